/* pass_const_fold.c -- evaluates every remaining node whose inputs are all constant (e.g. a
 * Transpose or Mul applied to weights) at compile time, in node order so chains fold. */
#include "passes/passes_int.h"

cuvil_status cuvil_pass_const_fold(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || !n->def->fold || !cuvil_inputs_const(g, n) || !cuvil_fold_wanted(g, n)) continue;
        cuvil_status s = cuvil_fold_node(g, n);
        if (s) return s;
    }
    return CUVIL_OK;
}
