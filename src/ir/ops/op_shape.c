/* op_shape.c -- shape and size, which are constant once shapes are fixed: their infer()
 * produces the output data directly; with symbolic dims, its values as expressions (sval). */
#include "ir/ops/ops.h"

#include <string.h>

static cuvil_status shape_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int64_t r = x->ndim, start = cir_attr_int(n, "start"), end = cir_attr_has(n, "end") ? cir_attr_int(n, "end") : r;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t cnt = end > start ? end - start : 0;
    cir_set_shape(y, CIR_I64, 1, &cnt);
    bool fixed = true;
    for (int64_t i = 0; i < cnt; i++) fixed &= !x->dx[start + i];
    if (!fixed) {   /* dims that are expressions of the symbols: known as expressions */
        const cir_dim **sv = cuvil_arena_alloc(&g->arena, sizeof *sv * (size_t)(cnt ? cnt : 1));
        if (!sv) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < cnt; i++)
            if (!(sv[i] = cir_dimx(g, x, (int)(start + i)))) return cir_dim_err(g, n, "the shape");
        y->sval = sv;
        return CUVIL_OK;
    }
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    for (int64_t i = 0; i < cnt; i++) ((int64_t *)y->data)[i] = x->dims[start + i];
    n->dead = true;
    return CUVIL_OK;
}

static cuvil_status size_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0), *x = cir_in(g, n, 0);
    cir_set_shape(y, CIR_I64, 0, NULL);
    if (!cir_value_fixed(x)) {
        const cir_dim **sv = cuvil_arena_alloc(&g->arena, sizeof *sv);
        if (!sv) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (!(sv[0] = cir_numel_x(g, x))) return cir_dim_err(g, n, "the size");
        y->sval = sv;
        return CUVIL_OK;
    }
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    *(int64_t *)y->data = cir_numel(cir_in(g, n, 0));
    n->dead = true;
    return CUVIL_OK;
}

static const cir_attr_spec shape_attrs[] = {
    {"start", CIR_ATTR_INT, 0, 0, NULL, false},
    {"end", CIR_ATTR_INT, 0, 0, NULL, false},   /* absent: the rank */
    CIR_ATTR_END,
};

const cir_opdef cir_op_shape = {"shape", CIR_OPF_SHAPE_DATA | CIR_OPF_SYM_DIMS, 1, 1, 1, 1, shape_attrs, shape_infer, NULL, NULL, 0};
const cir_opdef cir_op_size = {"size", CIR_OPF_SHAPE_DATA | CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, size_infer, NULL, NULL, 0};
