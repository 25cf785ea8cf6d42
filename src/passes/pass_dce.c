/* pass_dce.c -- removes nodes none of whose outputs is used (walking backwards, so whole
 * dead chains go). Graph outputs count as uses. */
#include "passes/passes_int.h"

cuvil_status cuvil_pass_dce(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cir_graph_count_uses(g);
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        bool used = false;
        for (int j = 0; j < n->n_out; j++) used |= n->out[j] >= 0 && cir_val(g, n->out[j])->n_uses > 0;
        if (used) continue;
        n->dead = true;
        for (int j = 0; j < cir_node_n_reads(n); j++)
            if (cir_node_read(n, j) >= 0) cir_val(g, cir_node_read(n, j))->n_uses--;
    }
    return CUVIL_OK;
}
