/* pass_half_chain.c -- a float16 or bfloat16 model runs its kernels in float32 (shape inference
 * casts a half input of a float32 kernel to float32 before the node and its outputs back after
 * it). Between two such kernels the value would go float32 -> half -> float32: this pass takes
 * the second kernel's input from the first kernel's float32 output instead, so a chain of half
 * nodes is computed in float32 from its first cast in to its last cast out, and the kernels can
 * fuse (conv + clip, the blocks, channels-last layouts) as they do in a float32 model.
 *
 * This keeps more precision than rounding every intermediate to 16 bits: ONNX Runtime computes a
 * float16 model on CPUs in the same way (it inserts the casts around its float32 kernels and
 * then removes the pairs it inserted). Only casts shape inference placed are taken: a model's own
 * Cast to float16 and back, which rounds on purpose, stays. A half value that a graph output, a
 * half-typed op (Reshape, Concat, a model's Cast) or an If's branch reads keeps its cast: only
 * the cast back to float32 goes. --disable-pass half_chain rounds each intermediate to 16 bits. */
#include "passes/passes_int.h"

cuvil_status cuvil_pass_half_chain(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cuvil_rewrite rw;
    cuvil_status s = cuvil_rewrite_begin(g, &rw);
    if (s) return s;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        cuvil_rewrite_inputs(&rw, n);
        /* its casts are in place: from here on it is a float32 node like any other, and the later
         * passes (fusion, blocks, layouts) may take it as one */
        if (n->half_out_done) n->half = CIR_UNDEF;
        if (n->kind != CIR_OP_CAST || !n->half_cast || n->n_in != 1 || n->n_out != 1 || n->in[0] < 0) continue;
        cir_value *h = cir_in(g, n, 0), *y = cir_out(g, n, 0);
        if (y->dtype != CIR_F32 || (h->dtype != CIR_F16 && h->dtype != CIR_BF16) || h->producer < 0) continue;
        cir_node *p = cir_node_at(g, h->producer);
        if (p->dead || p->kind != CIR_OP_CAST || !p->half_cast || p->n_in != 1 || p->in[0] < 0) continue;
        cir_value *x = cir_in(g, p, 0);
        /* the same region: a branch's value comes from the branch (regions nest in the list) */
        if (x->dtype != CIR_F32 || p->region != n->region || !cir_same_dims(x, y)) continue;
        cuvil_rewrite_replace(&rw, n, x->id);
    }
    cuvil_rewrite_end(&rw);
    return CUVIL_OK;
}
