/* op_trilu.c -- trilu (x, [k]): the upper (upper=1) or lower (upper=0) triangle of each matrix
 * of x's last two dims, from diagonal k (an int64 scalar, constant or computed at run time;
 * 0 when absent, positive above the main one), the other elements zero. Every element type, at run time and folded, by the one
 * kernel cuvil_trilu. Exporters use it for causal attention masks. */
#include "ir/ops/ops.h"

static cuvil_status trilu_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; trilu needs at least 2", x->name, x->ndim);
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    cuvil_trilu_params p;
    if ((s = op_trilu_params(g, n, &p))) return s;
    cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
    return CUVIL_OK;
}

cuvil_status op_trilu_params(cir_graph *g, cir_node *n, cuvil_trilu_params *p) {
    cir_value *x = cir_in(g, n, 0);
    cir_value *k = cir_in(g, n, 1);
    p->k = 0;
    if (k && (k->dtype != CIR_I64 || k->ndim != 0))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "k '%s' must be an int64 scalar, it is %s of rank %d", k->name,
                            cir_dtype_name(k->dtype), k->ndim);
    if (k && cir_is_const(k)) p->k = *(const int64_t *)k->data;
    p->rows = x->dims[x->ndim - 2];
    p->cols = x->dims[x->ndim - 1];
    p->batch = 1;
    for (int d = 0; d < x->ndim - 2; d++) p->batch *= x->dims[d];   /* bounded: the shape passed the limits */
    p->elem_size = (int64_t)cir_dtype_size(x->dtype);
    p->upper = (int)cir_attr_int(n, "upper");
    return CUVIL_OK;
}

static cuvil_status trilu_fold(cir_graph *g, cir_node *n) {
    cuvil_trilu_params p;
    cuvil_status s = op_trilu_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_trilu(&p, NULL, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec trilu_attrs[] = {{"upper", CIR_ATTR_INT, 1, 0, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_trilu = {"trilu", CIR_OPF_SYM_DIMS, 1, 2, 1, 1, trilu_attrs, trilu_infer, trilu_fold, NULL, 0};
