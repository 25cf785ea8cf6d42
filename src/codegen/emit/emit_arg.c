/* emit_arg.c -- argmax and argmin (op_arg.c): the typed kernel cuvil_argmax_t. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_arg(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_arg_params p;
    int axis;
    cuvil_status s = op_arg_params(g, n, &p, &axis);
    if (s) return s;
    const cir_value *x = cir_in(g, n, 0);
    const char *ps = cg_param(cg, "cuvil_arg_params", "{ .outer = %s, .axis_len = %s, .inner = %s, .is_min = %d, "
                              ".select_last = %d }", cg_dimprod(cg, x->id, 0, axis, 1), cg_dimprod(cg, x->id, axis, axis + 1, 1),
                              cg_dimprod(cg, x->id, axis + 1, x->ndim, 1), p.is_min, p.select_last);
    cg_printf(cg, "    cuvil_argmax_t(&%s, %s, %s, %s);\n", ps, cg_rt_type(cir_in(g, n, 0)->dtype), cg_in(cg, n->in[0]),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
