/* emit_slice.c -- slice (op_slice.c) on cuvil_slice, for any element type. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_slice(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_slice_params p;
    cuvil_status s = op_slice_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_slice_params",
                              "{ .ndim = %d, .elem_size = %lld, .in_dims = %s, .out_dims = %s, .starts = %s, .steps = %s }",
                              p.ndim, (long long)p.elem_size, cg_i64s(cg, p.in_dims, p.ndim), cg_i64s(cg, p.out_dims, p.ndim),
                              cg_i64s(cg, p.starts, p.ndim), cg_i64s(cg, p.steps, p.ndim));
    cg_printf(cg, "    cuvil_slice(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
