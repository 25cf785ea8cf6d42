/* pass_fuse_mish.c -- Mish as the exporters write it: Mul(x, Tanh(Softplus(x))), torch's
 * F.mish before ONNX had the op (opset 18) and darknet's YOLOv4 conversions. Four passes over
 * memory (the value, its softplus, the tanh, the product) and, since x has two readers, no
 * epilogue for the node that computes x. Matched here, the chain becomes one mish node, which
 * fuse_act then moves into the epilogue of x's conv or GEMM. The softplus's and the tanh's
 * outputs must each be read by the next node alone and not be graph outputs; the Mul's other
 * input must be the very value the softplus reads (not an equal one), in either order. */
#include "passes/passes_int.h"

cuvil_status cuvil_pass_fuse_mish(cir_graph *g, const cuvil_options *o) {
    (void)o;
    int *user = cuvil_single_readers(g);
    if (!user) return g->ctx->status;
    int matched = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *sp = cir_node_at(g, i);
        if (sp->dead || sp->kind != CIR_OP_SOFTPLUS || sp->n_post || sp->n_in != 1) continue;
        cir_value *x = cir_in(g, sp, 0), *s = cir_out(g, sp, 0);
        if (!x || !s || x->dtype != CIR_F32 || s->dtype != CIR_F32 || user[s->id] < 0) continue;
        cir_node *th = cir_node_at(g, user[s->id]);
        if (th->dead || th->kind != CIR_OP_TANH || th->n_post || th->n_in != 1 || th->region != sp->region) continue;
        cir_node *m = cuvil_mul_by_input(g, user, cir_out(g, th, 0), x, sp->region);
        if (!m) continue;
        sp->dead = true;
        th->dead = true;
        cuvil_node_become_unary(g, m, CIR_OP_MISH, x->id, "mish (x * tanh(softplus(x)))");
        matched++;
    }
    cuvil_free(user);
    if (matched) cir_graph_count_uses(g);
    return CUVIL_OK;
}
