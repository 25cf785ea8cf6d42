/* emit_topk.c -- topk (op_topk.c): one call of cuvil_topk_t, with one row's candidates in scratch. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_topk(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_topk_params p;
    int axis;
    const cir_dim *kx;
    cuvil_status s = op_topk_params(g, n, &p, &axis, &kx);
    if (s) return s;
    const cir_value *xv = cir_in(g, n, 0);
    const char *ps = cg_param(cg, "cuvil_topk_params", "{ .outer = %s, .len = %s, .inner = %s, .k = %s, .largest = %d }",
                              cg_dimprod(cg, xv->id, 0, axis, 1), cg_dimprod(cg, xv->id, axis, axis + 1, 1),
                              cg_dimprod(cg, xv->id, axis + 1, xv->ndim, 1), cg_dim_c(cg, kx), p.largest);
    const char *S = cg_scratch(cg, cuvil_topk_scratch_size(&p), "cuvil_topk_scratch_size(&%s)", ps);
    cir_value *x = cir_in(g, n, 0);
    cg_printf(cg, "    cuvil_topk_t(&%s, %s, %s, %s, %s, %s);\n", ps, cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
              cg_out(cg, n->out[0]), cg_out(cg, n->out[1]), S);
    return CUVIL_OK;
}
