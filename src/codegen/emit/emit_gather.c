/* emit_gather.c -- gather (op_gather.c): constant indices normalised into the weights, or
 * run-time ones that the kernel checks (an index out of range is an error from run). */
#include "codegen/emit/emit_int.h"

/* The kernel's parameters (op_gather_params) with the dims of this run: a symbolic node's are
 * expressions of D[]. */
static const char *gather_params(cg_ctx *cg, cir_graph *g, cir_node *n, int axis) {
    cir_value *x = cir_in(g, n, 0);
    return cg_param(cg, "cuvil_gather_params", "{ .outer = %s, .axis_len = %s, .nb_inner = %s, .n_idx = %s }",
                    cg_dimprod(cg, x->id, 0, axis, 1), cg_dimprod(cg, x->id, axis, axis + 1, 1),
                    cg_dimprod(cg, x->id, axis + 1, x->ndim, (int64_t)cir_dtype_size(x->dtype)), cg_numel(cg, n->in[1]));
}

cuvil_status cg_emit_gather(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int axis;
    cuvil_gather_params p;
    cuvil_status s = op_gather_params(g, n, &axis, &p);
    if (s) return s;
    cir_value *iv = cir_in(g, n, 1);
    /* a float32 table read in 16 bits (--precision): the _w16 kernels widen the rows they copy */
    const int w16 = cg_w16_resident(cg, n->in[0], false);
    const char *w16_fn = w16 ? "_w16" : "", *kind = cg_w16_arg(w16);
    if (!cir_is_const(iv) || cir_in(g, n, 0)->dx[axis]) {   /* checked (and normalised) by the kernel */
        const char *ps = gather_params(cg, g, n, axis);
        cg_printf(cg, "    if (cuvil_gather%s_rt(&%s%s, %s, %s, %s, %s)) return 1;\n", w16_fn, ps, kind, cg_rt_type(iv->dtype),
                  cg_in(cg, n->in[1]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        char what[96];
        if (cir_in(g, n, 0)->dx[axis])   /* a symbolic bound: one text for every size */
            snprintf(what, sizeof what, "an index is out of range for its axis");
        else
            snprintf(what, sizeof what, "an index is out of range [-%lld, %lld)", (long long)p.axis_len, (long long)p.axis_len);
        cg_fallible(cg, cuvil_arena_strdup(&g->arena, what));
        return CUVIL_OK;
    }
    int64_t *idx = op_gather_indices(g, n, &p);
    if (!idx) return g->ctx->status;
    const char *is = cg_data(cg, idx, sizeof(int64_t) * (size_t)p.n_idx, CIR_I64);
    cuvil_free(idx);
    const char *ps = gather_params(cg, g, n, axis);
    cg_printf(cg, "    cuvil_gather%s(&%s%s, %s, %s, %s);\n", w16_fn, ps, kind, is, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
