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
    if (n->n_rt) {   /* starts, ends, axes or steps read when the model runs: the dims it finds */
        cir_value *x = cir_in(g, n, 0), *st = cir_in(g, n, 1);
        int slots[CIR_MAX_DIMS];
        const char *hi = cg_found_his(cg, g, n, x->ndim, slots);
        cg_printf(cg, "    {\n        static const int64_t hi[] = %s;\n        cuvil_slice_params p = { .ndim = %d, .elem_size = %zu, "
                      ".in_dims = %s };\n        if (cuvil_slice_rt(&p, %lld, %s, %s, %s, %s, %s, hi)) return 1;\n",
                  hi, x->ndim, cir_dtype_size(x->dtype), cg_dims_init(cg, x->id, x->ndim), (long long)cir_numel(st),
                  st->dtype == CIR_I32 ? "CUVIL_T_I32" : "CUVIL_T_I64", cg_in(cg, n->in[1]), cg_in(cg, n->in[2]),
                  cir_in(g, n, 3) ? cg_in(cg, n->in[3]) : "NULL", cir_in(g, n, 4) ? cg_in(cg, n->in[4]) : "NULL");
        for (int d = 0; d < x->ndim; d++) cg_printf(cg, "        D[%d] = p.out_dims[%d];\n", slots[d], d);
        cg_printf(cg, "        cuvil_slice(&p, %s, %s);\n    }\n", cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        cg_fallible(cg, "its starts, ends, axes and steps are not valid for its input (a step of 0, an axis out of range "
                        "or repeated), or give a dim over the output's declared or --dim size");
        return CUVIL_OK;
    }
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
