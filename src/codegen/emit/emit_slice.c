/* emit_slice.c -- slice (op_slice.c) on cuvil_slice, for any element type. */
#include "codegen/emit/emit_int.h"

/* "{ e0, e1, ... }" of n expressions (NULL: "0"), as C. */
static const char *exprs(cg_ctx *cg, const cir_dim *const *e, int n) {
    cuvil_sb sb = {0};
    cuvil_sb_puts(&sb, "{ ");
    for (int i = 0; i < n; i++) cuvil_sb_printf(&sb, "%s%s", i ? ", " : "", cg_dim_c(cg, e[i]));
    cuvil_sb_puts(&sb, n ? " }" : "0 }");
    const char *s = cg_str(cg, sb.s ? sb.s : "{ 0 }");
    cuvil_sb_free(&sb);
    return s;
}

cuvil_status cg_emit_slice(cg_ctx *cg, cir_graph *g, cir_node *n) {
    if (cg_node_symbolic(g, n)) {   /* the starts and counts of this run (op_slice_x) */
        cir_value *x = cir_in(g, n, 0);
        const cir_dim *start[CIR_MAX_DIMS], *cnt[CIR_MAX_DIMS], *in[CIR_MAX_DIMS];
        int64_t steps[CIR_MAX_DIMS];
        cuvil_status s = op_slice_x(g, n, start, cnt, steps);
        if (s) return s;
        for (int i = 0; i < x->ndim; i++) in[i] = cir_dimx(g, x, i);
        const char *ps = cg_param(cg, "cuvil_slice_params",
                                  "{ .ndim = %d, .elem_size = %zu, .in_dims = %s, .out_dims = %s, .starts = %s, .steps = %s }",
                                  x->ndim, cir_dtype_size(x->dtype), exprs(cg, in, x->ndim), exprs(cg, cnt, x->ndim),
                                  exprs(cg, start, x->ndim), cg_i64s(cg, steps, x->ndim));
        cg_printf(cg, "    cuvil_slice(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        return CUVIL_OK;
    }
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
