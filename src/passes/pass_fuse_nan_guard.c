/* pass_fuse_nan_guard.c -- where(is_nan(s), 0, s) after s = softmax(x): the guard the exporters
 * put after an attention softmax (torch's scaled_dot_product_attention: a row masked out
 * entirely is all -inf, and its softmax NaN) is two more passes over the [batch, heads, seq,
 * seq] scores; the softmax does it instead as it writes (nan_to_zero). Only when s is read by
 * the two guard nodes alone and the replacement is a scalar 0. The is_nan may read s through a
 * cast to another float type (a float16 model's converter keeps the softmax in float32 and casts
 * its result back): a cast of a float makes no NaN and keeps every NaN, so it tests the same. */
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
        cir_node *nan = cir_node_at(g, c->producer), *sm = cir_node_at(g, s->producer), *cast = NULL;
        if (nan->dead || nan->kind != CIR_OP_IS_NAN || c->n_uses != 1 || c->output_index >= 0 || nan->region != w->region ||
            sm->region != w->region)   /* (one region: passes_int.h) */
            continue;
        cir_value *t = cir_in(g, nan, 0);
        if (t != s) {   /* is_nan(cast(s)), the cast read there alone */
            if (!t || t->producer < 0 || t->n_uses != 1 || t->output_index >= 0 ||
                (t->dtype != CIR_F16 && t->dtype != CIR_BF16 && t->dtype != CIR_F64))
                continue;
            cast = cir_node_at(g, t->producer);
            if (cast->dead || cast->kind != CIR_OP_CAST || cast->n_in != 1 || cir_in(g, cast, 0) != s || cast->n_post ||
                cast->region != w->region)
                continue;
        }
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
        if (cast) t->n_uses = 0, cast->dead = true;
        nan->dead = true;
        w->dead = true;
        sm->fused = "IsNaN+Where";
    }
    return CUVIL_OK;
}
