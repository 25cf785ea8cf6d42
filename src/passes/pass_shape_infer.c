/* pass_shape_infer.c -- infers every value's dtype and shape in node order, and folds nodes
 * whose inputs are all constant when their result is shape data (integers) or small: the
 * Shape -> Gather -> Concat -> Reshape chains exporters emit must be constant before the
 * Reshape can be inferred. Larger float constants are left to const_fold, except for ops that
 * can only be folded (no kernel): the next node's inference may need their result. */
#include "passes/passes_int.h"

#define SMALL_FOLD_ELEMS 4096

static bool worth_folding_now(cir_graph *g, const cir_node *n) {
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(g, n->out[i]);
        if (!v) continue;
        if (cir_dtype_is_float(v->dtype) && cir_numel(v) > SMALL_FOLD_ELEMS) return false;
    }
    return true;
}

/* What the model declares for v must agree with what inference found: the element type always
 * (as ONNX Runtime requires), and for a graph output the rank and every fixed dim too, since
 * the compiled model's interface reports them. */
static cuvil_status check_declared(cir_graph *g, const cir_node *n, const cir_value *v) {
    char sh[256];
    if (v->decl_dtype != CIR_UNDEF && v->decl_dtype != v->dtype)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "output '%s' is %s, but the model declares it %s", v->name,
                            cir_dtype_name(v->dtype), cir_dtype_name(v->decl_dtype));
    if (v->output_index < 0 || v->decl_ndim < 0) return CUVIL_OK;
    bool same = v->decl_ndim == v->ndim;
    for (int i = 0; same && i < v->ndim; i++) same = v->decl_dims[i] < 0 || v->decl_dims[i] == v->dims[i];
    if (same) return CUVIL_OK;
    cuvil_sb d = {0};
    cuvil_sb_puts(&d, "[");
    for (int i = 0; i < v->decl_ndim; i++) {
        if (v->decl_dims[i] < 0) cuvil_sb_printf(&d, "%s?", i ? "," : "");
        else cuvil_sb_printf(&d, "%s%lld", i ? "," : "", (long long)v->decl_dims[i]);
    }
    cuvil_sb_puts(&d, "]");
    cuvil_status s = cir_node_err(g, n, CUVIL_ERR_SHAPE, "graph output '%s' is %s, but the model declares it %s", v->name,
                                  cir_shape_str(g, v, sh, sizeof sh), d.s ? d.s : "?");
    cuvil_sb_free(&d);
    return s;
}

cuvil_status cuvil_pass_shape_infer(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        CUVIL_ASSERT(n->def);
        cuvil_status s = cir_node_check_attrs(g, n);
        if (!s) s = n->def->infer(g, n);
        if (s) return s;
        if (n->dead) {   /* infer produced constants (shape, size): still as declared? */
            for (int j = 0; j < n->n_out; j++) {
                cir_value *v = cir_val(g, n->out[j]);
                if (v && (s = check_declared(g, n, v))) return s;
            }
            continue;
        }
        for (int j = 0; j < n->n_out; j++) {
            cir_value *v = cir_val(g, n->out[j]);
            if (!v) continue;
            if (v->ndim < 0) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "output %d has no shape after infer", j);
            v->producer = i;
            /* every shape that enters the IR is bounded: later size arithmetic cannot overflow */
            if ((s = cir_check_shape(g, n, v)) || (s = check_declared(g, n, v))) return s;
        }
        if (n->def->fold && cuvil_inputs_const(g, n) && (worth_folding_now(g, n) || cir_op_always_folds(n->def)) &&
            cuvil_fold_wanted(g, n) &&
            (s = cuvil_fold_node(g, n)))
            return s;
    }
    return CUVIL_OK;
}
