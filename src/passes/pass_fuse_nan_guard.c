/* pass_fuse_nan_guard.c -- where(is_nan(s), 0, s) after s = softmax(x): the guard the exporters
 * put after an attention softmax (torch's scaled_dot_product_attention: a row masked out
 * entirely is all -inf, and its softmax NaN) is two more passes over the [batch, heads, seq,
 * seq] scores; the softmax does it instead as it writes (nan_to_zero). Only when s is read by
 * the two guard nodes alone and the replacement is a scalar 0. */
#include "passes/passes_int.h"

#include <string.h>

static bool is_scalar_zero(const cir_value *v) {
    return v && cir_is_const(v) && v->dtype == CIR_F32 && cir_numel(v) == 1 && cir_const_f64(v, 0) == 0.0;
}

cuvil_status cuvil_pass_fuse_nan_guard(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cir_graph_count_uses(g);
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *w = cir_node_at(g, i);
        if (w->dead || w->kind != CIR_OP_WHERE || w->n_in != 3 || w->n_post) continue;
        cir_value *c = cir_in(g, w, 0), *z = cir_in(g, w, 1), *s = cir_in(g, w, 2), *y = cir_out(g, w, 0);
        if (!c || !s || c->producer < 0 || s->producer < 0 || !is_scalar_zero(z)) continue;
        cir_node *nan = cir_node_at(g, c->producer), *sm = cir_node_at(g, s->producer);
        if (nan->dead || nan->kind != CIR_OP_IS_NAN || cir_in(g, nan, 0) != s || c->n_uses != 1 || c->output_index >= 0 ||
            nan->region != w->region || sm->region != w->region)   /* (one region: passes_int.h) */
            continue;
        if (sm->dead || sm->kind != CIR_OP_SOFTMAX || sm->n_post || cir_attr_int(sm, "nan_to_zero") ||
            s->n_uses != 2 || s->output_index >= 0 || s->dtype != CIR_F32)
            continue;
        if (!cir_same_dims(y, s)) continue;
        cuvil_attr a = {.name = "nan_to_zero", .type = CUVIL_ATTR_INT, .i = 1};
        cuvil_status st = cir_node_set_attr(g, sm, &a);
        if (st) return st;
        sm->out[0] = w->out[0];
        y->producer = sm->id;
        s->n_uses = 0;
        c->n_uses = 0;
        nan->dead = true;
        w->dead = true;
        sm->fused = "IsNaN+Where";
    }
    return CUVIL_OK;
}
