/* pass_fuse_act.c -- an activation (relu, clip, ...) whose input comes from a node that can
 * apply one in its epilogue (conv, gemm, matmul, add, batch_norm, ...) and is used only there
 * is fused into that node. */
#include "passes/passes_int.h"

#include <string.h>

cuvil_status cuvil_pass_fuse_act(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *a = cir_node_at(g, i);
        if (a->dead || !(a->def->flags & CIR_OPF_IS_ACT) || !a->def->as_act) continue;
        cir_value *x = cir_in(g, a, 0);
        if (!x || x->producer < 0 || x->n_uses != 1 || x->output_index >= 0 || x->dtype != CIR_F32) continue;
        cir_node *p = cir_node_at(g, x->producer);
        if (p->dead || !(p->def->flags & CIR_OPF_TAKES_ACT) || p->act.op) continue;
        cir_act act;
        if (!a->def->as_act(g, a, &act)) continue;
        p->act = act;
        p->out[0] = a->out[0];
        cir_val(g, a->out[0])->producer = p->id;
        x->n_uses = 0;
        char *f = cuvil_arena_alloc(&g->arena, strlen(p->fused ? p->fused : "") + strlen(a->src_op) + 2);
        if (!f) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        sprintf(f, "%s%s%s", p->fused ? p->fused : "", p->fused ? "+" : "", a->src_op);
        p->fused = f;
        a->dead = true;
    }
    return CUVIL_OK;
}
