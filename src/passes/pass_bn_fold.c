/* pass_bn_fold.c -- conv followed by batch_norm becomes one conv:
 * W'[m] = W[m] * s[m], B'[m] = (B[m] - mean[m]) * s[m] + beta[m], s = gamma / sqrt(var + eps).
 * New constants are made, so weights shared with other nodes are left untouched. */
#include "passes/passes_int.h"

#include <math.h>
#include <string.h>

static bool foldable(cir_graph *g, const cir_node *bn, cir_node **conv_out) {
    cir_value *x = cir_in(g, bn, 0);
    if (!x || x->producer < 0 || x->n_uses != 1 || x->output_index >= 0) return false;
    cir_node *c = cir_node_at(g, x->producer);
    if (c->dead || c->kind != CIR_OP_CONV || c->n_post || c->region != bn->region) return false;   /* (one region: passes_int.h) */
    if (!cir_is_const(cir_in(g, c, 1)) || (cir_in(g, c, 2) && !cir_is_const(cir_in(g, c, 2)))) return false;
    for (int i = 1; i < 5; i++)
        if (!cir_is_const(cir_in(g, bn, i))) return false;
    *conv_out = c;
    return true;
}

cuvil_status cuvil_pass_bn_fold(cir_graph *g, const cuvil_options *o) {
    (void)o;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *bn = cir_node_at(g, i), *c;
        if (bn->dead || bn->kind != CIR_OP_BATCH_NORM || !foldable(g, bn, &c)) continue;
        cir_value *w = cir_in(g, c, 1);
        double eps = cir_attr_float(bn, "epsilon");
        int64_t M = w->dims[0], per = cir_numel(w) / M;
        char name[512];
        snprintf(name, sizeof name, "%s+%s.weight", c->name, bn->name);
        int wid = cir_const_add(g, name, CIR_F32, w->ndim, w->dims, NULL);
        snprintf(name, sizeof name, "%s+%s.bias", c->name, bn->name);
        int bid = cir_const_add(g, name, CIR_F32, 1, &M, NULL);
        if (wid < 0 || bid < 0) return g->ctx->status;
        /* values live in pointer-stable storage: w stays valid, but re-read for clarity */
        w = cir_in(g, c, 1);
        cir_value *b = cir_in(g, c, 2);
        cir_value *gam = cir_in(g, bn, 1), *bet = cir_in(g, bn, 2), *mean = cir_in(g, bn, 3), *var = cir_in(g, bn, 4);
        float *nw = cir_val(g, wid)->data, *nb = cir_val(g, bid)->data;
        const float *ow = w->data;
        for (int64_t m = 0; m < M; m++) {
            double s = cir_const_f64(gam, m) / sqrt(cir_const_f64(var, m) + eps);
            for (int64_t k = 0; k < per; k++) nw[m * per + k] = (float)(ow[m * per + k] * s);
            double bias = b ? cir_const_f64(b, m) : 0.0;
            nb[m] = (float)((bias - cir_const_f64(mean, m)) * s + cir_const_f64(bet, m));
        }
        c->in[1] = wid;
        c->in[2] = bid;
        if (c->n_in < 3) c->n_in = 3;   /* the node's input array has a spare slot */
        cir_val(g, c->out[0])->n_uses = 0;
        c->out[0] = bn->out[0];
        cir_val(g, bn->out[0])->producer = c->id;
        c->fused = bn->src_op;
        bn->dead = true;
    }
    return CUVIL_OK;
}
