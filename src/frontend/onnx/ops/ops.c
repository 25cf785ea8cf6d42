/* ops.c -- the op registry (ops.inc) and helpers shared by the op files. */
#include "frontend/onnx/ops/ops_int.h"

#include <string.h>

#define OP(name) extern const cir_opdef cir_op_##name;
#include "frontend/onnx/ops/ops.inc"
#undef OP

static const cir_opdef *const registry[] = {
#define OP(name) &cir_op_##name,
#include "frontend/onnx/ops/ops.inc"
#undef OP
};

const cir_opdef *cir_op_lookup(const char *domain, const char *op) {
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (!strcmp(registry[i]->op, op) && !strcmp(registry[i]->domain, domain ? domain : ""))
            return registry[i];
    return NULL;
}

cuvil_status op_check_arity(cir_graph *g, cir_node *n, int lo, int hi, int olo, int ohi) {
    int nin = n->n_in;
    while (nin > 0 && n->in[nin - 1] < 0) nin--;   /* trailing omitted optionals */
    if (nin < lo || (hi >= 0 && nin > hi))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "has %d inputs, expected %d..%d", nin, lo, hi);
    if (n->n_out < olo || n->n_out > ohi)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "has %d outputs, expected %d..%d", n->n_out, olo, ohi);
    for (int i = 0; i < lo; i++)
        if (n->in[i] < 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "required input %d is missing", i);
    return CUVIL_OK;
}

cuvil_status op_need_f32(cir_graph *g, cir_node *n, int i) {
    cir_value *v = cir_in(g, n, i);
    if (!v) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is missing", i);
    if (v->ndim < 0) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "input '%s' has no shape", v->name);
    if (v->dtype != CUVIL_DTYPE_FLOAT32)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; only float32 is supported",
                            v->name, cuvil_dtype_name(v->dtype));
    return CUVIL_OK;
}

cuvil_status op_const_ints(cir_graph *g, cir_node *n, int i, const char *what, int64_t *out, int max, int *count) {
    cir_value *v = cir_in(g, n, i);
    if (!v) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' is missing", what);
    if (!cir_is_const(v))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                            "input '%s' ('%s') is computed at run time; Cuvil needs it constant "
                            "(it could not be folded from the model's fixed shapes)", what, v->name);
    if (v->dtype != CUVIL_DTYPE_INT64 && v->dtype != CUVIL_DTYPE_INT32)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' must be int64, not %s", what, cuvil_dtype_name(v->dtype));
    int64_t cnt = cir_numel(v);
    if (cnt > max) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has %lld elements, at most %d supported",
                                       what, (long long)cnt, max);
    for (int64_t j = 0; j < cnt; j++) out[j] = cir_const_i64(v, j);
    *count = (int)cnt;
    return CUVIL_OK;
}

cuvil_status op_axis(cir_graph *g, cir_node *n, int64_t axis, int rank, const char *what, int *out) {
    if (axis < -rank || axis >= rank)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s=%lld is out of range for rank %d", what, (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return CUVIL_OK;
}

cuvil_status op_broadcast(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b, int *ndim, int64_t *dims) {
    int r = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[256], sb[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot broadcast '%s' %s with '%s' %s", a->name,
                                cir_shape_str(g, a, sa, sizeof sa), b->name, cir_shape_str(g, b, sb, sizeof sb));
        }
        dims[i] = da == 1 ? db : da;
    }
    *ndim = r;
    return CUVIL_OK;
}

void op_bcast_strides(const cir_value *v, int ndim, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        int iv = i - (ndim - v->ndim);
        int64_t d = iv >= 0 ? v->dims[iv] : 1;
        strides[i] = (d == 1 && dims[i] != 1) || iv < 0 ? 0 : s;
        s *= d;
    }
}
