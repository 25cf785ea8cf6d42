/* emit_transpose.c -- transpose, depth_to_space, space_to_depth and concat (op_transpose.c), for
 * any element type. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_transpose(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_transpose_params p;
    cuvil_status s;
    const char *dims;
    bool block = n->kind == CIR_OP_DEPTH_TO_SPACE || n->kind == CIR_OP_SPACE_TO_DEPTH;
    if (block && cg_node_symbolic(g, n)) {   /* the 6-D view of this run */
        const cir_dim *v6[6];
        memset(&p, 0, sizeof p);
        if ((s = op_block_x(g, n, v6, p.perm, NULL))) return s;
        p.ndim = 6;
        p.elem_size = (int64_t)cir_dtype_size(cir_in(g, n, 0)->dtype);
        cuvil_sb d = {0};
        cuvil_sb_puts(&d, "{ ");
        for (int i = 0; i < 6; i++) cuvil_sb_printf(&d, "%s%s", i ? ", " : "", cg_dim_c(cg, v6[i]));
        cuvil_sb_puts(&d, " }");
        dims = cg_str(cg, d.s ? d.s : "{ 0 }");
        cuvil_sb_free(&d);
    } else {
        if ((s = op_transpose_params(g, n, &p))) return s;
        /* a symbolic transpose's dims: the input's, as expressions of D[] */
        dims = cg_node_symbolic(g, n) ? cg_dims_init(cg, n->in[0], cir_in(g, n, 0)->ndim) : cg_i64s(cg, p.dims, p.ndim);
    }
    cuvil_sb perm = {0};
    cuvil_sb_puts(&perm, "{ ");
    for (int i = 0; i < p.ndim; i++) cuvil_sb_printf(&perm, "%s%d", i ? ", " : "", p.perm[i]);
    cuvil_sb_puts(&perm, " }");
    const char *ps = cg_param(cg, "cuvil_transpose_params", "{ .ndim = %d, .elem_size = %lld, .dims = %s, .perm = %s }",
                              p.ndim, (long long)p.elem_size, dims, perm.s ? perm.s : "{0}");
    cuvil_sb_free(&perm);
    cg_printf(cg, "    cuvil_transpose(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* ===== Concat ========================================================================= */
cuvil_status cg_emit_concat(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int64_t *chunk = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)n->n_in);
    if (!chunk) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    int64_t outer = op_concat_layout(g, n, chunk);
    const char *cs, *outs;
    if (cg_node_symbolic(g, n)) {   /* each input's bytes per outer row, and the rows: of this run */
        int ax;
        op_axis(g, n, cir_attr_int(n, "axis"), cir_out(g, n, 0)->ndim, "axis", &ax);
        cuvil_sb sb = {0};
        cuvil_sb_puts(&sb, "{ ");
        for (int i = 0; i < n->n_in; i++) {
            const cir_value *x = cir_in(g, n, i);
            cuvil_sb_printf(&sb, "%s%s", i ? ", " : "", cg_dimprod(cg, x->id, ax, x->ndim, (int64_t)cir_dtype_size(x->dtype)));
        }
        cuvil_sb_puts(&sb, " }");
        cs = cg_param(cg, "int64_t[]", "%s", sb.s ? sb.s : "{ 0 }");
        cuvil_sb_free(&sb);
        outs = cg_dimprod(cg, n->out[0], 0, ax, 1);
    } else {
        cs = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, chunk, n->n_in));
        char b[32];
        outs = cg_str(cg, cg_i64(outer, b));
    }
    /* the inputs as a static table resolved into scratch: no stack, no code per input */
    const char *refs = cg_refs(cg, n->in, n->n_in);
    const char *S = cg_scratch(cg, sizeof(void *) * (size_t)n->n_in, "%zu", sizeof(void *) * (size_t)n->n_in);
    cg_printf(cg, "    cuvil_resolve_refs(%s, %d, A, WEIGHTS, in, out, (void **)%s);\n", refs, n->n_in, S);
    cg_printf(cg, "    cuvil_concat(%s, %d, %s, (const void *const *)%s, %s);\n", outs, n->n_in, cs, S,
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
