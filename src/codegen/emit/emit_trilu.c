/* emit_trilu.c -- trilu (op_trilu.c): one call of cuvil_trilu, k read when the model runs if it
 * is not constant. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_trilu(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_trilu_params p;
    cuvil_status s = op_trilu_params(g, n, &p);
    if (s) return s;
    char k[32];
    cir_value *x = cir_in(g, n, 0);
    const char *ps = cg_param(cg, "cuvil_trilu_params", "{ .batch = %s, .rows = %s, .cols = %s, .k = %s, "
                              ".elem_size = %lld, .upper = %d }", cg_dimprod(cg, x->id, 0, x->ndim - 2, 1),
                              cg_dimprod(cg, x->id, x->ndim - 2, x->ndim - 1, 1), cg_dimprod(cg, x->id, x->ndim - 1, x->ndim, 1),
                              cg_i64(p.k, k), (long long)p.elem_size, p.upper);
    cir_value *kv = cir_in(g, n, 1);
    cg_printf(cg, "    cuvil_trilu(&%s, %s, %s, %s);\n", ps, kv && !cir_is_const(kv) ? cg_in(cg, n->in[1]) : "NULL",
              cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
