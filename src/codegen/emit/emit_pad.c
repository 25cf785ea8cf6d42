/* emit_pad.c -- pad (op_pad.c) on cuvil_f32_pad. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_pad(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_pad_params p;
    cuvil_status s = op_pad_params(g, n, &p);
    if (s) return s;
    char v[32];
    const char *ps = cg_param(cg, "cuvil_pad_params",
                              "{ .mode = %s, .ndim = %d, .in_dims = %s, .out_dims = %s, .pad_begin = %s, .value = %s }",
                              (const char *const[]){"CUVIL_PAD_CONSTANT", "CUVIL_PAD_REFLECT", "CUVIL_PAD_EDGE",
                                                    "CUVIL_PAD_WRAP"}[p.mode], p.ndim,
                              cg_node_symbolic(g, n) ? cg_dims_init(cg, n->in[0], p.ndim) : cg_i64s(cg, p.in_dims, p.ndim),
                              cg_node_symbolic(g, n) ? cg_dims_init(cg, n->out[0], p.ndim) : cg_i64s(cg, p.out_dims, p.ndim),
                              cg_i64s(cg, p.pad_begin, p.ndim), cg_float(p.value, v));
    cg_printf(cg, "    cuvil_f32_pad(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
