/* pass_mean_pool.c -- a ReduceMean over the last two axes of a 4-D float32 tensor that keeps
 * them (timm's and PaddlePaddle's squeeze-excitation blocks: x.mean((2, 3), keepdim=True)) is
 * the GlobalAveragePool it computes, [N, C, H, W] -> [N, C, 1, 1], the mean of each plane, and
 * becomes one: the lowering's layout step then reads its input channels last, as it does the
 * pool's (a squeeze-excitation block between two convs stays in their channels-last region).
 * Fixed shapes only; axes given as constants (an attribute, or a constant input). */
#include "passes/passes_int.h"

cuvil_status cuvil_pass_mean_pool(cir_graph *g, const cuvil_options *o) {
    (void)o;
    int matched = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || n->kind != CIR_OP_REDUCE_MEAN || n->n_post || n->n_rt || n->half != CIR_UNDEF || n->n_out != 1)
            continue;
        cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
        if (!x || !y || x->dtype != CIR_F32 || y->dtype != CIR_F32 || x->ndim != 4 || y->ndim != 4 || x->seq_n >= 0 ||
            !cir_value_fixed(x) || !cir_value_fixed(y) || op_reduce_rt_axes(g, n))
            continue;
        cuvil_reduce_params p;
        int nd;
        int64_t dims[CIR_MAX_DIMS];
        cuvil_status s = op_reduce_params(g, n, &p, &nd, dims);   /* (as shape inference took it) */
        if (s) return s;
        if (p.mask != (1u << 2 | 1u << 3) || nd != 4 || x->dims[2] < 1 || x->dims[3] < 1) continue;
        cuvil_node_become_unary(g, n, CIR_OP_GLOBAL_AVG_POOL, x->id, "global_avg_pool (ReduceMean over H and W)");
        matched++;
    }
    if (matched) cir_graph_count_uses(g);
    return CUVIL_OK;
}
