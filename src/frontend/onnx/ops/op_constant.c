/* op_constant.c -- Constant, and Shape/Size, which are constant once shapes are fixed: their
 * infer() produces the output data directly. */
#include "frontend/onnx/ops/ops_int.h"

#include <string.h>

static cuvil_status constant_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 0, 0, 1, 1);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (n->n_attrs != 1) return cir_node_err(g, n, CUVIL_ERR_MODEL, "needs exactly one value attribute");
    const cir_attr *a = &n->attrs[0];
    int64_t cnt = a->n;
    if (!strcmp(a->name, "value") && a->type == CIR_ATTR_TENSOR) {
        cir_value *t = &g->values[a->tensor];
        cir_set_shape(y, t->dtype, t->ndim, t->dims);
    } else if (!strcmp(a->name, "value_float") && a->type == CIR_ATTR_FLOAT) {
        cir_set_shape(y, CUVIL_DTYPE_FLOAT32, 0, NULL);
    } else if (!strcmp(a->name, "value_int") && a->type == CIR_ATTR_INT) {
        cir_set_shape(y, CUVIL_DTYPE_INT64, 0, NULL);
    } else if (!strcmp(a->name, "value_floats") && a->type == CIR_ATTR_FLOATS) {
        cir_set_shape(y, CUVIL_DTYPE_FLOAT32, 1, &cnt);
    } else if (!strcmp(a->name, "value_ints") && a->type == CIR_ATTR_INTS) {
        cir_set_shape(y, CUVIL_DTYPE_INT64, 1, &cnt);
    } else {
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "value attribute '%s' is not supported", a->name);
    }
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (a->type == CIR_ATTR_TENSOR) memcpy(y->data, g->values[a->tensor].data, cir_nbytes(y));
    else if (a->type == CIR_ATTR_FLOAT) *(float *)y->data = a->f;
    else if (a->type == CIR_ATTR_INT) *(int64_t *)y->data = a->i;
    else if (a->type == CIR_ATTR_FLOATS) memcpy(y->data, a->floats, sizeof(float) * (size_t)cnt);
    else memcpy(y->data, a->ints, sizeof(int64_t) * (size_t)cnt);
    n->dead = true;
    return CUVIL_OK;
}

static cuvil_status shape_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int64_t r = x->ndim, start = cir_attr_int(n, "start", 0), end = cir_attr_int(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t cnt = end > start ? end - start : 0;
    cir_set_shape(y, CUVIL_DTYPE_INT64, 1, &cnt);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    for (int64_t i = 0; i < cnt; i++) ((int64_t *)y->data)[i] = x->dims[start + i];
    n->dead = true;
    return CUVIL_OK;
}

static cuvil_status size_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    cir_set_shape(y, CUVIL_DTYPE_INT64, 0, NULL);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    *(int64_t *)y->data = cir_numel(cir_in(g, n, 0));
    n->dead = true;
    return CUVIL_OK;
}

const cir_opdef cir_op_Constant = {"Constant", "", 1, 0, constant_infer, NULL, NULL, NULL};
const cir_opdef cir_op_Shape = {"Shape", "", 1, 0, shape_infer, NULL, NULL, NULL};
const cir_opdef cir_op_Size = {"Size", "", 1, 0, size_infer, NULL, NULL, NULL};
