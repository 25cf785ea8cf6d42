/* op_softmax.c -- softmax, log_softmax and hardmax along one axis (default -1); with
 * coerce_2d=1 (ONNX before opset 13) over the input coerced to 2-D [prod(dims[:axis]),
 * prod(dims[axis:])]; nan_to_zero=1 (set by the fuse_nan_guard pass) makes NaN results 0. */
#include "ir/ops/ops.h"

#include <string.h>

cuvil_status op_softmax_params(cir_graph *g, cir_node *n, cuvil_softmax_params *p) {
    cir_value *x = cir_in(g, n, 0);
    bool coerce = cir_attr_int(n, "coerce_2d") != 0;
    int ax;
    cuvil_status s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &ax);
    if (s) return s;
    memset(p, 0, sizeof *p);
    p->outer = p->axis_len = p->inner = 1;
    p->log = n->kind == CIR_OP_LOG_SOFTMAX;
    p->nan_to_zero = cir_attr_int(n, "nan_to_zero") != 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d < ax) p->outer *= x->dims[d];
        else if (d == ax || coerce) p->axis_len *= x->dims[d];
        else p->inner *= x->dims[d];
    }
    return CUVIL_OK;
}

static cuvil_status softmax_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    cuvil_softmax_params p;
    if ((s = op_softmax_params(g, n, &p))) return s;
    cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
    return CUVIL_OK;
}

static cuvil_status softmax_fold(cir_graph *g, cir_node *n) {
    cuvil_softmax_params p;
    cuvil_status s = op_softmax_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (n->kind == CIR_OP_HARDMAX) cuvil_f32_hardmax(&p, cir_in(g, n, 0)->data, y->data);
    else cuvil_f32_softmax__scalar(&p, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec softmax_attrs[] = {
    {"axis", CIR_ATTR_INT, -1, 0, NULL, false},
    {"coerce_2d", CIR_ATTR_INT, 0, 0, NULL, false},
    {"nan_to_zero", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_softmax = {"softmax", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, softmax_attrs, softmax_infer, softmax_fold, NULL, 0};
const cir_opdef cir_op_log_softmax = {"log_softmax", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, softmax_attrs, softmax_infer, softmax_fold, NULL, 0};
const cir_opdef cir_op_hardmax = {"hardmax", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, softmax_attrs, softmax_infer, softmax_fold, NULL, 0};

/* ===== attention ========================================================================= */
/* attention nodes come from pass_fuse_attention.c, with their output's shape already set and
 * their layout in n->low.params; a model or the builder cannot make one. */
static cuvil_status attention_infer(cir_graph *g, cir_node *n) {
    return cir_node_err(g, n, CUVIL_ERR_MODEL,
                        "op 'attention' is made by the compiler from MatMul, Softmax and MatMul nodes; a model cannot use it");
}

const cir_opdef cir_op_attention = {"attention", 0, 3, 6, 1, 1, NULL, attention_infer, NULL, NULL, 0};
