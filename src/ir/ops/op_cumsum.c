/* op_cumsum.c -- cumsum and cumprod (x, axis): running sums or products along one axis (axis a scalar, constant or
 * computed at run time, negative counting from the end), inclusive or exclusive (the sum before each element),
 * forward or reverse. float32/64, float16, bfloat16 and the 32- and 64-bit integers (which
 * wrap), at run time and folded, by the one kernel cuvil_cumsum_t. */
#include "ir/ops/ops.h"

#include <string.h>

cuvil_status op_cumsum_params(cir_graph *g, cir_node *n, cuvil_cumsum_params *p) {
    cir_value *x = cir_in(g, n, 0), *av = cir_in(g, n, 1);
    cir_dtype t = x->dtype;
    if (t != CIR_F32 && t != CIR_F64 && t != CIR_F16 && t != CIR_BF16 && t != CIR_I32 && t != CIR_I64 && t != CIR_U32 &&
        t != CIR_U64)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "input '%s' has type %s; cumsum and cumprod take float, double, float16, "
                            "bfloat16 and 32- and 64-bit integers", x->name, cir_dtype_name(t));
    if (x->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a scalar; cumsum needs an axis", x->name);
    if (av->ndim > 1 || cir_numel(av) != 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis '%s' must be a scalar", av->name);
    if (av->dtype != CIR_I32 && av->dtype != CIR_I64)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "axis '%s' is %s; it must be int32 or int64", av->name,
                            cir_dtype_name(av->dtype));
    memset(p, 0, sizeof *p);
    p->exclusive = cir_attr_int(n, "exclusive") != 0;
    p->reverse = cir_attr_int(n, "reverse") != 0;
    p->prod = n->kind == CIR_OP_CUMPROD;
    if (!cir_is_const(av)) return CUVIL_OK;   /* the layout comes from the axis when the model runs */
    int64_t a;
    int cnt, axis;
    cuvil_status s = op_const_ints(g, n, 1, "axis", &a, 1, &cnt);
    if (s || (s = op_axis(g, n, a, x->ndim, "axis", &axis))) return s;
    p->outer = p->inner = 1;
    p->len = x->dims[axis];
    for (int d = 0; d < axis; d++) p->outer *= x->dims[d];
    for (int d = axis + 1; d < x->ndim; d++) p->inner *= x->dims[d];
    return CUVIL_OK;
}

static cuvil_status cumsum_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cuvil_cumsum_params p;
    if ((s = op_cumsum_params(g, n, &p))) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
    return CUVIL_OK;
}

static cuvil_status cumsum_fold(cir_graph *g, cir_node *n) {
    cuvil_cumsum_params p;
    cuvil_status s = op_cumsum_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_cumsum_t(&p, x->dtype, x->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec cumsum_attrs[] = {
    {"exclusive", CIR_ATTR_INT, 0, 0, NULL, false},
    {"reverse", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_cumsum = {"cumsum", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, cumsum_attrs, cumsum_infer, cumsum_fold, NULL, 0};
const cir_opdef cir_op_cumprod = {"cumprod", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, cumsum_attrs, cumsum_infer, cumsum_fold, NULL, 0};
