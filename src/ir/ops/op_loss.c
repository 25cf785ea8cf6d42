/* op_loss.c -- nll_loss (x, target, [weight]): ONNX's NegativeLogLikelihoodLoss. x is [N, C] or
 * [N, C, d1, ..., dk] (log-probabilities), target [N] or [N, d1, ..., dk] (class indices, int32
 * or int64), weight [C]. Each element's loss is -x[n, target, d...] * weight[target] (0 where
 * target is ignore_index); reduction none keeps them ([N, d1, ..., dk]), sum adds them, mean
 * divides that sum by the weights of the targets not ignored. A target outside 0..C-1 (and not
 * ignore_index) fails the run naming the node. SoftmaxCrossEntropyLoss is log_softmax along
 * axis 1 and then this (onnx_ops.c). float32; float16 and bfloat16 between casts. */
#include "ir/ops/ops.h"

static const char *const reduction_names[] = {"none", "sum", "mean", NULL};   /* ORDER: CUVIL_LOSS_* */

static cuvil_status nll_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 3, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0), *t = cir_in(g, n, 1), *w = cir_in(g, n, 2);
    if (x->ndim < 2)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; it must be [N, C] or [N, C, d1, ...]", x->name,
                            x->ndim);
    if (t->dtype != CIR_I64 && t->dtype != CIR_I32)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "target '%s' must be int32 or int64, not %s", t->name,
                            cir_dtype_name(t->dtype));
    if (t->ndim != x->ndim - 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "target '%s' has rank %d; input '%s' of rank %d needs %d", t->name, t->ndim,
                            x->name, x->ndim, x->ndim - 1);
    for (int d = 0; d < t->ndim; d++)
        if ((s = cir_require_eq(g, n, cir_dimx(g, t, d), cir_dimx(g, x, d ? d + 1 : 0), "target's and input's dims")))
            return s;
    if (w) {
        if ((s = op_need_f32(g, n, 2))) return s;
        if (w->ndim != 1 || (s = cir_require_eq(g, n, cir_dimx(g, w, 0), cir_dimx(g, x, 1), "weight's and the classes' counts")))
            return s ? s : cir_node_err(g, n, CUVIL_ERR_SHAPE, "weight '%s' has rank %d; it must be [C]", w->name, w->ndim);
    }
    if (cir_attr_int(n, "reduction") != CUVIL_LOSS_NONE) {
        cir_set_shape(cir_out(g, n, 0), CIR_F32, 0, NULL);
        return CUVIL_OK;
    }
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) dx[d] = cir_dimx(g, t, d);
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, t->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec nll_attrs[] = {
    {"reduction", CIR_ATTR_ENUM, CUVIL_LOSS_MEAN, 0, reduction_names, false},
    {"ignore_index", CIR_ATTR_INT, 0, 0, NULL, false},
    {"has_ignore_index", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

/* no fold: a loss over constants is not a model anyone ships, and the run checks the targets */
const cir_opdef cir_op_nll_loss = {"nll_loss", CIR_OPF_SYM_DIMS, 2, 3, 1, 1, nll_attrs, nll_infer, NULL, NULL, 0};
