/* op_dropout.c -- dropout (x, [ratio], [training_mode]) -> y, [mask]: ONNX's Dropout where the
 * node has its mask output or a training_mode the model only knows when it runs (otherwise
 * the frontend makes Dropout an identity). Inference: y is x and the mask all true. A run whose
 * training_mode is true with a ratio other than 0 (random masking, training) fails naming the
 * node; with ratio 0 it is inference too. */
#include "ir/ops/ops.h"

static cuvil_status dropout_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 3, 1, 2);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *r = cir_in(g, n, 1), *t = cir_in(g, n, 2);
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    if (r && (cir_numel(r) != 1 || !cir_dtype_is_float(r->dtype)))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "ratio '%s' must be a float scalar", r->name);
    if (t && (cir_numel(t) != 1 || t->dtype != CIR_BOOL))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "training_mode '%s' must be a bool scalar", t->name);
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    if (cir_out_opt(g, n, 1)) cir_set_shape_x(cir_out_opt(g, n, 1), CIR_BOOL, x->ndim, dx);
    return CUVIL_OK;
}

const cir_opdef cir_op_dropout = {"dropout", CIR_OPF_SYM_DIMS, 1, 3, 1, 2, NULL, dropout_infer, NULL, NULL, 0};
