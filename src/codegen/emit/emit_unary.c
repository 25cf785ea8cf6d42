/* emit_unary.c -- the elementwise activations and math (op_unary.c): the float32 kernel, or the
 * typed one for the other element types; a clip whose bounds are computed at run time, or of
 * integers, on cuvil_clip_t. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_unary(cg_ctx *cg, cir_graph *g, cir_node *n) {
    if (op_clip_typed(g, n)) {   /* bounds read when the model runs */
        cir_value *x = cir_in(g, n, 0), *lo = cir_in(g, n, 1), *hi = cir_in(g, n, 2);
        cg_printf(cg, "    cuvil_clip_t(%s, %s, %s, %s, %s, %s);\n", cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
                  lo ? cg_in(cg, n->in[1]) : "NULL", hi ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]),
                  cg_numel(cg, x->id));
        return CUVIL_OK;
    }
    cir_act ca;
    n->def->as_act(g, n, &ca);   /* infer refused the other nodes it is false for */
    cuvil_act_params a = cir_act_params(&ca);
    char buf[128];
    const char *p = cg_param(cg, "cuvil_act_params", "%s", cg_act(&a, buf));
    cir_value *x = cir_in(g, n, 0);
    if (x->dtype == CIR_F32)
        cg_printf(cg, "    cuvil_f32_unary(&%s, %s, %s, %s);\n", p, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]),
                  cg_numel(cg, x->id));
    else
        cg_printf(cg, "    cuvil_unary_t(&%s, %s, %s, %s, %s);\n", p, cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]), cg_numel(cg, x->id));
    return CUVIL_OK;
}
