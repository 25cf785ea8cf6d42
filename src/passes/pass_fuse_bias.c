/* pass_fuse_bias.c -- add(matmul(a, b), c) with c a constant row (a Linear layer's bias, [N])
 * becomes one matmul that adds c in its epilogue: the exporters write every
 * Linear of a transformer this way, and the add alone is a pass over the whole output. */
#include "passes/passes_int.h"

#include <string.h>

/* c is a constant vector of y's last dim, which broadcasting adds to every row of y. Only 1-D:
 * a constant [1, 1, 1, N] may be one only at some values of the symbols (an attention mask
 * [batch, 1, 1, N] at batch 1), and the graph must be the same at every value. */
static bool is_row_for(const cir_value *c, const cir_value *y) {
    return c && cir_is_const(c) && c->dtype == CIR_F32 && c->ndim == 1 && y->ndim >= 1 &&
           !y->dx[y->ndim - 1] && c->dims[0] == y->dims[y->ndim - 1];
}

cuvil_status cuvil_pass_fuse_bias(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cir_graph_count_uses(g);
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *add = cir_node_at(g, i);
        if (add->dead || add->kind != CIR_OP_ADD || add->n_post || add->n_in != 2) continue;
        for (int side = 0; side < 2; side++) {
            cir_value *x = cir_in(g, add, side), *c = cir_in(g, add, 1 - side), *y = cir_out(g, add, 0);
            if (!x || x->producer < 0 || x->n_uses != 1 || x->output_index >= 0 || x->dtype != CIR_F32) continue;
            cir_node *m = cir_node_at(g, x->producer);
            if (m->dead || m->kind != CIR_OP_MATMUL || m->n_in != 2 || m->n_post || m->region != add->region) continue;
            if (!is_row_for(c, x) || !cir_same_dims(y, x))
                continue;
            m->in[2] = c->id;   /* in has a spare slot */
            m->n_in = 3;
            m->out[0] = add->out[0];
            y->producer = m->id;
            x->n_uses = 0;
            if (!(m->fused = cuvil_fused_note(g, m->fused, add->src_op))) return g->ctx->status;
            add->dead = true;
            break;
        }
    }
    return CUVIL_OK;
}
