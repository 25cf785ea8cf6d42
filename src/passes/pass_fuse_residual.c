/* pass_fuse_residual.c -- add(conv(x), r) with r of the same shape becomes one conv that adds
 * r in its epilogue. The conv moves to the add's place in the schedule (its inputs are all
 * ready earlier), so r is ready too. */
#include "passes/passes_int.h"

#include <string.h>

static bool same_shape(const cir_value *a, const cir_value *b) { return cir_same_dims(a, b) && a->dtype == b->dtype; }

cuvil_status cuvil_pass_fuse_residual(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *add = cir_node_at(g, i);
        if (add->dead || add->kind != CIR_OP_ADD || add->n_post || add->n_in != 2) continue;
        for (int side = 0; side < 2; side++) {
            cir_value *x = cir_in(g, add, side), *r = cir_in(g, add, 1 - side), *y = cir_out(g, add, 0);
            if (!x || !r || x->producer < 0 || x->n_uses != 1 || x->output_index >= 0 || x == r) continue;
            cir_node *c = cir_node_at(g, x->producer);
            if (c->dead || !(c->def->flags & CIR_OPF_TAKES_RESIDUAL) || c->n_post || c->region != add->region) continue;
            if (!same_shape(x, y) || !same_shape(r, y) || r->kind == CIR_VAL_CONST) continue;
            cir_node moved = *c;
            moved.id = add->id;
            moved.post[0] = (cir_post){CIR_POST_ADD, r->id, {CIR_OP_NONE, 0, 0}};   /* (c had no epilogue) */
            moved.n_post = 1;
            moved.out[0] = add->out[0];
            if (!(moved.fused = cuvil_fused_note(g, c->fused, add->src_op))) return g->ctx->status;
            c->dead = true;
            *add = moved;
            cir_val(g, y->id)->producer = add->id;
            x->n_uses = 0;
            break;
        }
    }
    return CUVIL_OK;
}
