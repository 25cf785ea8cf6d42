/* pass_shape_infer.c -- infers every value's dtype and shape in node order, and folds nodes
 * whose inputs are all constant when their result is shape data (integers) or small: the
 * Shape -> Gather -> Concat -> Reshape chains exporters emit must be constant before the
 * Reshape can be inferred. Larger float constants are left to const_fold. */
#include "passes/passes_int.h"

#define SMALL_FOLD_ELEMS 4096

static bool worth_folding_now(cir_graph *g, const cir_node *n) {
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(g, n->out[i]);
        if (!v) continue;
        bool is_float = v->dtype == CUVIL_DTYPE_FLOAT32 || v->dtype == CUVIL_DTYPE_FLOAT64 ||
                        v->dtype == CUVIL_DTYPE_FLOAT16 || v->dtype == CUVIL_DTYPE_BFLOAT16;
        if (is_float && cir_numel(v) > SMALL_FOLD_ELEMS) return false;
    }
    return true;
}

cuvil_status cuvil_pass_shape_infer(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead) continue;
        CUVIL_ASSERT(n->def);
        cuvil_status s = n->def->infer(g, n);
        if (s) return s;
        if (n->dead) continue;   /* infer produced constants (Constant, Shape) */
        for (int j = 0; j < n->n_out; j++) {
            cir_value *v = cir_val(g, n->out[j]);
            if (v && v->ndim < 0) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "output %d has no shape after infer", j);
            if (v) v->producer = i;
        }
        if (n->def->fold && cuvil_inputs_const(g, n) && worth_folding_now(g, n) && (s = cuvil_fold_node(g, n)))
            return s;
    }
    return CUVIL_OK;
}
