/* op_softmax.c -- Softmax and LogSoftmax. Before opset 13 the input is coerced to 2-D
 * [prod(dims[:axis]), prod(dims[axis:])] (axis default 1); from 13 they act along one axis
 * (default -1). */
#include "frontend/onnx/ops/ops_int.h"

#include <string.h>

static cuvil_status softmax_params(cir_graph *g, cir_node *n, cuvil_softmax_params *p) {
    cir_value *x = cir_in(g, n, 0);
    bool coerce = n->opset < 13;
    int ax;
    cuvil_status s = op_axis(g, n, cir_attr_int(n, "axis", coerce ? 1 : -1), x->ndim, "axis", &ax);
    if (s) return s;
    memset(p, 0, sizeof *p);
    p->outer = p->axis_len = p->inner = 1;
    p->log = !strcmp(n->op, "LogSoftmax");
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
    if ((s = softmax_params(g, n, &p))) return s;
    cir_set_shape(cir_out(g, n, 0), x->dtype, x->ndim, x->dims);
    return CUVIL_OK;
}

static cuvil_status softmax_fold(cir_graph *g, cir_node *n) {
    cuvil_softmax_params p;
    cuvil_status s = softmax_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_f32_softmax__scalar(&p, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

static cuvil_status softmax_emit(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_softmax_params p;
    cuvil_status s = softmax_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_softmax_params", "{ .outer = %lld, .axis_len = %lld, .inner = %lld, .log = %d }",
                              (long long)p.outer, (long long)p.axis_len, (long long)p.inner, p.log);
    cg_printf(cg, "    cuvil_f32_softmax(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

const cir_opdef cir_op_Softmax = {"Softmax", "", 1, 0, softmax_infer, softmax_fold, softmax_emit, NULL};
const cir_opdef cir_op_LogSoftmax = {"LogSoftmax", "", 1, 0, softmax_infer, softmax_fold, softmax_emit, NULL};
