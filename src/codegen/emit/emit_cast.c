/* emit_cast.c -- cast (op_cast.c): a copy between equal types, else cuvil_cast. A cast that
 * stores a value in 16 bits for --activations (n->store16) is checked: a finite value that
 * becomes an infinity fails the run, naming the value (the cast is named after it). */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_cast(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (n->store16 && x->dtype == CIR_F32 && (y->dtype == CIR_F16 || y->dtype == CIR_BF16)) {
        cg_printf(cg, "    if (cuvil_cast16(%s, 1, %s, %s, (size_t)%s)) return 1;\n",
                  y->dtype == CIR_F16 ? "CUVIL_W16_F16" : "CUVIL_W16_BF16", cg_in(cg, n->in[0]), cg_out(cg, n->out[0]),
                  cg_numel(cg, x->id));
        cg_fallible(cg, y->dtype == CIR_F16 ? "a finite value is beyond float16's range (65504) and would be stored as "
                                              "an infinity (--activations fp16; bf16 has float32's range)"
                                            : "a finite value is beyond bfloat16's range (3.39e38) and would be stored "
                                              "as an infinity (--activations bf16)");
        return CUVIL_OK;
    }
    if (x->dtype == y->dtype)
        cg_printf(cg, "    memcpy(%s, %s, %s);\n", cg_out(cg, n->out[0]), cg_in(cg, n->in[0]), cg_nbytes(cg, x->id));
    else
        cg_printf(cg, "    cuvil_cast(%s, %s, %s, %s, %s);\n", cg_rt_type(x->dtype), cg_rt_type(y->dtype),
                  cg_in(cg, n->in[0]), cg_out(cg, n->out[0]), cg_numel(cg, x->id));
    return CUVIL_OK;
}

cuvil_status cg_emit_bitcast(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    cg_printf(cg, "    memmove(%s, %s, %s);\n", cg_out(cg, n->out[0]), cg_in(cg, n->in[0]), cg_nbytes(cg, x->id));
    return CUVIL_OK;
}
