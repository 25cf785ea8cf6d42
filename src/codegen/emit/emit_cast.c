/* emit_cast.c -- cast (op_cast.c): a copy between equal types, else cuvil_cast. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_cast(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
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
