/* emit_dropout.c -- dropout (op_dropout.c): the training check, x copied, the mask all true. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_dropout(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *r = cir_in(g, n, 1), *t = cir_in(g, n, 2);
    if (t) {   /* training with a ratio other than 0: random, which inference does not do */
        const char *ratio = "0.5";
        char buf[64];
        if (r) {
            snprintf(buf, sizeof buf, "(double)%s[0]", cg_in(cg, n->in[1]));
            ratio = r->dtype == CIR_F32 || r->dtype == CIR_F64 ? buf : NULL;
        }
        if (ratio) {
            cg_printf(cg, "    if (%s[0] && %s != 0) return 1;\n", cg_in(cg, n->in[2]), ratio);
        } else {   /* float16/bfloat16: 0 is the bits 0 or the sign alone */
            cg_printf(cg, "    if (%s[0] && (((const uint16_t *)%s)[0] & 0x7fff) != 0) return 1;\n", cg_in(cg, n->in[2]),
                      cg_in(cg, n->in[1]));
        }
        cg_fallible(cg, "training_mode is true with a ratio other than 0: training-mode Dropout (random masking) is not "
                        "supported");
    }
    cg_printf(cg, "    memmove(%s, %s, %s);\n", cg_out(cg, n->out[0]), cg_in(cg, n->in[0]), cg_nbytes(cg, x->id));
    if (cir_out_opt(g, n, 1)) cg_printf(cg, "    memset(%s, 1, %s);\n", cg_out(cg, n->out[1]), cg_numel(cg, x->id));
    return CUVIL_OK;
}
