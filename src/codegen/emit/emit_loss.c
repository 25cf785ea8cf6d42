/* emit_loss.c -- nll_loss (op_loss.c) on cuvil_f32_nll_loss. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_nll_loss(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *t = cir_in(g, n, 1), *w = cir_in(g, n, 2);
    char ig[32];
    cg_printf(cg, "    if (cuvil_f32_nll_loss(%s, %s, %s, %s, %s, %s, %s, %d, %d, %s, %s)) return 1;\n", cg_in(cg, n->in[0]),
              t->dtype == CIR_I32 ? "CUVIL_T_I32" : "CUVIL_T_I64", cg_in(cg, n->in[1]), w ? cg_in(cg, n->in[2]) : "NULL",
              cg_dimprod(cg, x->id, 0, 1, 1), cg_dimprod(cg, x->id, 1, 2, 1), cg_dimprod(cg, x->id, 2, x->ndim, 1),
              (int)cir_attr_int(n, "reduction"), (int)cir_attr_int(n, "has_ignore_index"),
              cg_i64(cir_attr_int(n, "ignore_index"), ig), cg_out(cg, n->out[0]));
    cg_fallible(cg, "a target is not a class index (0..C-1) nor the ignored index");
    return CUVIL_OK;
}
