/* op_topk.c -- topk (x, k): the k largest (largest=1) or smallest elements along an axis, in
 * order (ties: the lower index first), and their int64 indices. k is a constant, an expression
 * of the symbols, or read from its tensor just before the node runs (the output's shape). float32/64, float16, bfloat16, int32/64, at run time and folded, by the one kernel
 * cuvil_topk_t (its scratch holds one row's candidates). */
#include "ir/ops/ops.h"

#include <string.h>

cuvil_status op_topk_params(cir_graph *g, cir_node *n, cuvil_topk_params *p, int *axis, const cir_dim **kxp) {
    cir_value *x = cir_in(g, n, 0), *kv = cir_in(g, n, 1);
    cir_dtype t = x->dtype;
    if (!cir_dtype_size(t) || t == CIR_BOOL)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "input '%s' has type %s; topk takes numbers", x->name, cir_dtype_name(t));
    if (x->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a scalar; topk needs an axis", x->name);
    cuvil_status s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis);
    if (s) return s;
    int64_t k;
    int cnt;
    const cir_dim *kx = NULL;
    if (kv && !cir_is_const(kv) && cir_numel(kv) == 1) {   /* k known as an expression, or read when the model runs */
        if ((s = op_size_ints(g, n, 1, "k", &kx, 1, &cnt, 0, x->dims[*axis]))) return s;
        if ((s = cir_require_le(g, n, kx, cir_dimx(g, x, *axis), "k and the size of the axis"))) return s;
        k = kx->hi;   /* the kernel's scratch: for the largest */
    } else {
        if ((s = op_const_ints(g, n, 1, "k", &k, 1, &cnt))) return s;
        if (cnt != 1 || cir_numel(kv) != 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "k '%s' must hold one value", kv->name);
        if (k < 0 || k > x->dims[*axis])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "k=%lld is outside 0..%lld, the size of axis %d of '%s'", (long long)k,
                                (long long)x->dims[*axis], *axis, x->name);
        if (x->dx[*axis] && k > x->dx[*axis]->lo)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "k=%lld may exceed axis %d of '%s', whose size is symbolic "
                                "(down to %lld)", (long long)k, *axis, x->name, (long long)x->dx[*axis]->lo);
    }
    if (kxp) *kxp = kx ? kx : cir_dim_const(&g->dt, k);
    memset(p, 0, sizeof *p);
    p->outer = p->inner = 1;
    p->len = x->dims[*axis];
    p->k = k;
    for (int d = 0; d < *axis; d++) p->outer *= x->dims[d];
    for (int d = *axis + 1; d < x->ndim; d++) p->inner *= x->dims[d];
    p->largest = cir_attr_int(n, "largest") != 0;
    return CUVIL_OK;
}

static cuvil_status topk_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 2, 2);
    if (s) return s;
    cuvil_topk_params p;
    int axis;
    const cir_dim *kx;
    if ((s = op_topk_params(g, n, &p, &axis, &kx))) return s;
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        if (!(dx[d] = d == axis ? kx : cir_dimx(g, x, d))) return cir_dim_err(g, n, "the dims");
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    cir_set_shape_x(cir_out(g, n, 1), CIR_I64, x->ndim, dx);
    return CUVIL_OK;
}

static cuvil_status topk_fold(cir_graph *g, cir_node *n) {
    cuvil_topk_params p;
    int axis;
    cuvil_status s = op_topk_params(g, n, &p, &axis, NULL);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0), *yi = cir_out(g, n, 1);
    if (!cir_value_make_const(g, y) || !cir_value_make_const(g, yi)) return g->ctx->status;
    void *scratch = cuvil_malloc(cuvil_topk_scratch_size(&p) + 1);
    if (!scratch) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    cuvil_topk_t(&p, x->dtype, x->data, y->data, yi->data, scratch);
    cuvil_free(scratch);
    return CUVIL_OK;
}

static const cir_attr_spec topk_attrs[] = {
    {"axis", CIR_ATTR_INT, -1, 0, NULL, false},
    {"largest", CIR_ATTR_INT, 1, 0, NULL, false},
    {"sorted", CIR_ATTR_INT, 1, 0, NULL, false},   /* the output is always sorted (any order is allowed otherwise) */
    CIR_ATTR_END,
};

const cir_opdef cir_op_topk = {"topk", CIR_OPF_SYM_DIMS, 2, 2, 2, 2, topk_attrs, topk_infer, topk_fold, NULL, 0};
