/* pass_lower.c -- the lowering stage: for each node whose op has a lower hook, the kernel and
 * algorithm for the target and the (fixed) shapes are chosen and recorded on the node
 * (n->algo, shown by --emit ir), and constants the kernel wants in its own layout (prepacked
 * weights) are made now, so that nothing is repacked when the model runs. */
#include "passes/passes_int.h"
#include "codegen/toolchain_int.h"

cuvil_status cuvil_pass_lower(cir_graph *g, const cuvil_options *o) {
    (void)o;
    const cuvil_target_info *t = cuvil_target_find(g->target ? g->target : cuvil_host_target());
    if (!t) return cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "lowering: unknown target '%s'", g->target ? g->target : "?");
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || !n->def->lower) continue;
        cuvil_status s = n->def->lower(g, n, t);
        if (s) return s;
    }
    return CUVIL_OK;
}
