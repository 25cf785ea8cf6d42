/* pass_fuse_act.c -- an activation (relu, clip, ...) whose input comes from a node that can
 * apply one in its epilogue (conv, gemm, matmul, add, batch_norm, ...) and is used only there
 * is fused into that node. Also through a view between them (reshape, flatten, squeeze,
 * unsqueeze, identity: an elementwise activation commutes with it): GPT-2's Linear layers are a
 * Gemm on [batch * seq, n] reshaped to [batch, seq, n], and its Gelu reads the reshape. */
#include "passes/passes_int.h"

#include <string.h>

cuvil_status cuvil_pass_fuse_act(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *a = cir_node_at(g, i);
        if (a->dead || !(a->def->flags & CIR_OPF_IS_ACT) || !a->def->as_act) continue;
        cir_value *x = cir_in(g, a, 0);
        if (!x || x->producer < 0 || x->n_uses != 1 || x->output_index >= 0 || x->dtype != CIR_F32) continue;
        cir_node *p = cir_node_at(g, x->producer), *view = NULL;
        if (p->region != a->region) continue;   /* (one region: passes_int.h) */
        if (!p->dead && (p->def->flags & CIR_OPF_ALIAS)) {   /* act(view(y)) = view(act(y)) */
            cir_value *y = cir_in(g, p, 0);
            if (!y || y->producer < 0 || y->n_uses != 1 || y->output_index >= 0 || y->dtype != CIR_F32) continue;
            view = p;
            p = cir_node_at(g, y->producer);
            if (p->region != a->region) continue;
        }
        /* (an activation after p's epilogue, which has none yet: the kernels' form) */
        if (p->dead || !(p->def->flags & CIR_OPF_TAKES_ACT) || cir_node_act(p).op || !cir_post_kernel_form(p) ||
            p->n_post >= CIR_MAX_POSTS)
            continue;
        if (p->kind == CIR_OP_POW && cir_in(g, p, 1)->dtype != CIR_F32 && !cir_is_const(cir_in(g, p, 1)))
            continue;   /* an exponent of another type read as the model runs: cuvil_pow_t, no epilogue */
        cir_act act;
        if (!a->def->as_act(g, a, &act)) continue;
        /* p applies the act; a's output is now p's (or, through a view, the view's: p keeps
         * its own output, which only the view reads) */
        cir_node *maker = view ? view : p;
        cir_post_push(p, (cir_post){CIR_POST_ACT, -1, act});
        maker->out[0] = a->out[0];
        cir_val(g, a->out[0])->producer = maker->id;
        x->n_uses = 0;
        if (!(p->fused = cuvil_fused_note(g, p->fused, a->src_op))) return g->ctx->status;
        a->dead = true;
    }
    return CUVIL_OK;
}
