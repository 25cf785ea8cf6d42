/* emit_softmax.c -- softmax and log_softmax (op_softmax.c) on cuvil_f32_softmax, hardmax on
 * cuvil_f32_hardmax. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_softmax(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_softmax_params p;
    cuvil_status s = op_softmax_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_softmax_params",
                              "{ .outer = %lld, .axis_len = %lld, .inner = %lld, .log = %d, .nan_to_zero = %d }",
                              (long long)p.outer, (long long)p.axis_len, (long long)p.inner, p.log, p.nan_to_zero);
    cg_printf(cg, "    cuvil_f32_%s(&%s, %s, %s);\n", n->kind == CIR_OP_HARDMAX ? "hardmax" : "softmax", ps, cg_in(cg, n->in[0]),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
