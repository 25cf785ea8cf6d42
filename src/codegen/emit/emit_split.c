/* emit_split.c -- split (op_split.c) on cuvil_split, for any element type. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_split(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int64_t outer, chunk[OP_SPLIT_MAX];
    cuvil_status s = n->n_rt ? CUVIL_OK : op_split_params(g, n, &outer, chunk);
    if (s) return s;
    const char *cs, *outs;
    /* the outputs as a static table resolved into scratch: no stack, no code per output (its
     * check first: a node's failures are reported with the last cg_fallible's words) */
    const char *S = cg_scratch(cg, sizeof(void *) * (size_t)n->n_out, "%zu", sizeof(void *) * (size_t)n->n_out);
    if (n->n_rt) {   /* the sizes read when the model runs (op_split.c): the dims they give, then the chunks */
        cir_value *x = cir_in(g, n, 0), *sp = cir_in(g, n, 1);
        int axis, slots[OP_SPLIT_MAX];
        op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &axis);
        const char *hi = cg_found_his(cg, g, n, n->n_out, slots);
        cg_printf(cg, "    int64_t sz[%d], ch[%d];\n    {\n        static const int64_t hi[] = %s;\n"
                      "        if (cuvil_split_sizes_rt(%s, %s, %d, %s, hi, sz)) return 1;\n    }\n",
                  n->n_out, n->n_out, hi, sp->dtype == CIR_I32 ? "CUVIL_T_I32" : "CUVIL_T_I64", cg_in(cg, n->in[1]), n->n_out,
                  cg_dimprod(cg, x->id, axis, axis + 1, 1));
        cg_fallible(cg, "its split sizes are negative or do not add up to the axis's length");
        for (int i = 0; i < n->n_out; i++)
            cg_printf(cg, "    D[%d] = sz[%d];\n    ch[%d] = sz[%d] * %s;\n", slots[i], i, i, i,
                      cg_dimprod(cg, x->id, axis + 1, x->ndim, (int64_t)cir_dtype_size(x->dtype)));
        cs = "ch";
        outs = cg_dimprod(cg, x->id, 0, axis, 1);
    } else if (cg_node_symbolic(g, n)) {   /* the chunks' bytes per outer row and the rows, of this run */
        int axis;
        const cir_dim *sizes[OP_SPLIT_MAX];
        if ((s = op_split_sizes_x(g, n, &axis, sizes))) return s;
        cir_value *x = cir_in(g, n, 0);
        const cir_dim *inner = cir_dim_const(&g->dt, (int64_t)cir_dtype_size(x->dtype));
        for (int d = axis + 1; d < x->ndim; d++) inner = cir_dim_mul(&g->dt, inner, cir_dimx(g, x, d));
        cuvil_sb sb = {0};
        cuvil_sb_puts(&sb, "{ ");
        for (int i = 0; i < n->n_out; i++) cuvil_sb_printf(&sb, "%s%s", i ? ", " : "", cg_dim_c(cg, cir_dim_mul(&g->dt, sizes[i], inner)));
        cuvil_sb_puts(&sb, " }");
        cs = cg_param(cg, "int64_t[]", "%s", sb.s ? sb.s : "{ 0 }");
        cuvil_sb_free(&sb);
        outs = cg_dimprod(cg, x->id, 0, axis, 1);
    } else {
        char b[32];
        cs = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, chunk, n->n_out));
        outs = cg_str(cg, cg_i64(outer, b));
    }
    const char *refs = cg_refs(cg, n->out, n->n_out);
    cg_printf(cg, "    cuvil_resolve_refs(%s, %d, A, WEIGHTS, in, out, (void **)%s);\n", refs, n->n_out, S);
    cg_printf(cg, "    cuvil_split(%s, %d, %s, %s, (void *const *)%s);\n", outs, n->n_out, cs,
              cg_in(cg, n->in[0]), S);
    return CUVIL_OK;
}
