/* lower.c -- the lowering stage (cuvil_pass_lower, the last pass): its steps, registered below,
 * run in order. Kernel selection visits each node whose op has more than one kernel or
 * constants to prepare (conv.c, gemm.c), records the kernel and algorithm chosen for the
 * target and the shapes, and packs the constant weights into the layout that kernel reads
 * (pack.c), so that nothing is repacked when the model runs; ops without a selection have one
 * kernel and nothing to prepare. Then the steps over the whole graph: block fusion (blocks.c:
 * the convs of a block in one region, as passes_int.h says) and channels-last layouts
 * (layout.c: a tensor stays channels last only where its producer and every reader take it,
 * which an If, a loop and the nodes that copy values across regions do not). Last, under
 * --activations fp16|bf16, the casts that store the values between kernels in 16 bits
 * (store16.c). */
#include "lower/lower_int.h"

#include <string.h>

/* The selection of each op kind that has more than one kernel or prepares constants. */
typedef cuvil_status (*select_fn)(cir_graph *g, cir_node *n, const lower_ctx *c);
static const select_fn selections[CIR_OP__COUNT] = {
    [CIR_OP_CONV] = lower_conv,
    [CIR_OP_GEMM] = lower_gemm,
    [CIR_OP_MATMUL] = lower_gemm,
    [CIR_OP_RNN] = lower_rnn,
};

/* Kernel selection and weight packing, node by node (the constant weights still to lower after
 * each are the room c->rest keeps). */
static cuvil_status select_kernels(cir_graph *g, const lower_ctx *c) {
    uint64_t *rest = c->rest;
    *rest = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        const cir_value *w = n->dead || !selections[n->kind] ? NULL : cir_in(g, n, 1);
        if (w && cir_is_const(w)) *rest += cir_nbytes(w);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || !selections[n->kind]) continue;
        const cir_value *w = cir_in(g, n, 1);
        if (w && cir_is_const(w)) *rest -= cir_nbytes(w) < *rest ? cir_nbytes(w) : *rest;
        cuvil_status s = selections[n->kind](g, n, c);
        if (s) return s;
    }
    return CUVIL_OK;
}

/* The steps, in order. */
static const struct lower_step {
    const char *name;
    cuvil_status (*run)(cir_graph *g, const lower_ctx *c);
} steps[] = {
    {"kernels", select_kernels},
    {"blocks", lower_fuse_blocks},
    {"layouts", lower_layouts},
};

cuvil_status cuvil_pass_lower(cir_graph *g, const cuvil_options *o) {
    const cuvil_target_info *t = cuvil_target_find(g->target ? g->target : cuvil_host_target());
    if (!t) return cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "lowering: unknown target '%s'", g->target ? g->target : "?");
    uint64_t rest = 0;
    lower_ctx c = {t, 0, {{0}}, &rest};
    g->packed_bytes = 0;
    g->packed_budget = g->limits.packed_bytes ? g->limits.packed_bytes
                       : g->const_bytes > (UINT64_MAX - ((uint64_t)64 << 20)) / 2 ? UINT64_MAX
                                                                               : 2 * g->const_bytes + ((uint64_t)64 << 20);
    /* the maps of the convs that will run as Winograd with tiles as rows (lower_conv's test) */
    for (int i = 0; i < g->n_nodes && c.n_wino_t < WINO_T_SIZES; i++) {
        cir_node *n = cir_node_at(g, i);
        cuvil_conv2d_params p;
        if (n->dead || n->kind != CIR_OP_CONV || n->half != CIR_UNDEF || !cir_is_const(cir_in(g, n, 1)) ||
            lower_conv_params(g, n, &p) || !lower_runs_wino_t(g, &p, t) || lower_on_wino_t_map(&c, &p))
            continue;
        c.wino_t_hw[c.n_wino_t][0] = p.OH;
        c.wino_t_hw[c.n_wino_t][1] = p.OW;
        c.n_wino_t++;
    }
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        cuvil_status s = steps[k].run(g, &c);
        if (s) return s;
    }
    return lower_store16(g, o);
}
