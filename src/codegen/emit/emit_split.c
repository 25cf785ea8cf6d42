/* emit_split.c -- split (op_split.c) on cuvil_split, for any element type. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_split(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int64_t outer, chunk[OP_SPLIT_MAX];
    cuvil_status s = op_split_params(g, n, &outer, chunk);
    if (s) return s;
    const char *cs = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, chunk, n->n_out));
    /* the outputs as a static table resolved into scratch: no stack, no code per output */
    const char *refs = cg_refs(cg, n->out, n->n_out);
    const char *S = cg_scratch(cg, sizeof(void *) * (size_t)n->n_out, "%zu", sizeof(void *) * (size_t)n->n_out);
    cg_printf(cg, "    cuvil_resolve_refs(%s, %d, A, WEIGHTS, in, out, (void **)%s);\n", refs, n->n_out, S);
    cg_printf(cg, "    cuvil_split(%lld, %d, %s, %s, (void *const *)%s);\n", (long long)outer, n->n_out, cs,
              cg_in(cg, n->in[0]), S);
    return CUVIL_OK;
}
