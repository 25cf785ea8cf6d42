/* pass_fuse_silu.c -- SiLU (swish) as the exporters write it: Mul(x, Sigmoid(x)), torch's
 * nn.SiLU before ONNX had the op (EfficientNet, YOLOv5/v8, MobileViT, ...). Three passes over
 * memory (the value, its sigmoid, the product) and, since x has two readers, no epilogue for the
 * node that computes x. Matched here, the pair becomes one silu node, x / (1 + exp(-x)), which
 * fuse_act then moves into the epilogue of x's conv or GEMM. The sigmoid's output must be read
 * by the Mul alone and not be a graph output; the Mul's other input must be the very value the
 * sigmoid reads (not an equal one), in either order. */
#include "passes/passes_int.h"

cuvil_status cuvil_pass_fuse_silu(cir_graph *g, const cuvil_options *o) {
    (void)o;
    int *user = cuvil_single_readers(g);
    if (!user) return g->ctx->status;
    int matched = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *sg = cir_node_at(g, i);
        if (sg->dead || sg->kind != CIR_OP_SIGMOID || sg->n_post || sg->n_in != 1) continue;
        cir_value *x = cir_in(g, sg, 0), *s = cir_out(g, sg, 0);
        if (!x || !s || x->dtype != CIR_F32) continue;
        cir_node *m = cuvil_mul_by_input(g, user, s, x, sg->region);
        if (!m) continue;
        sg->dead = true;
        cuvil_node_become_unary(g, m, CIR_OP_SILU, x->id, "silu (x * sigmoid(x))");
        matched++;
    }
    cuvil_free(user);
    if (matched) cir_graph_count_uses(g);
    return CUVIL_OK;
}
