/* emit_transpose.c -- transpose, depth_to_space, space_to_depth and concat (op_transpose.c), for
 * any element type. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_transpose(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_transpose_params p;
    cuvil_status s = op_transpose_params(g, n, &p);
    if (s) return s;
    cuvil_sb perm = {0};
    cuvil_sb_puts(&perm, "{ ");
    for (int i = 0; i < p.ndim; i++) cuvil_sb_printf(&perm, "%s%d", i ? ", " : "", p.perm[i]);
    cuvil_sb_puts(&perm, " }");
    const char *ps = cg_param(cg, "cuvil_transpose_params", "{ .ndim = %d, .elem_size = %lld, .dims = %s, .perm = %s }",
                              p.ndim, (long long)p.elem_size, cg_i64s(cg, p.dims, p.ndim), perm.s ? perm.s : "{0}");
    cuvil_sb_free(&perm);
    cg_printf(cg, "    cuvil_transpose(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* ===== Concat ========================================================================= */
cuvil_status cg_emit_concat(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int64_t *chunk = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)n->n_in);
    if (!chunk) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    int64_t outer = op_concat_layout(g, n, chunk);
    const char *cs = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, chunk, n->n_in));
    /* the inputs as a static table resolved into scratch: no stack, no code per input */
    const char *refs = cg_refs(cg, n->in, n->n_in);
    const char *S = cg_scratch(cg, sizeof(void *) * (size_t)n->n_in, "%zu", sizeof(void *) * (size_t)n->n_in);
    cg_printf(cg, "    cuvil_resolve_refs(%s, %d, A, WEIGHTS, in, out, (void **)%s);\n", refs, n->n_in, S);
    cg_printf(cg, "    cuvil_concat(%lld, %d, %s, (const void *const *)%s, %s);\n", (long long)outer, n->n_in, cs, S,
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
