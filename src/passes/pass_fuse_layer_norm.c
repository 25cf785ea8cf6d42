/* pass_fuse_layer_norm.c -- LayerNormalization as the TorchScript exporter writes it before
 * opset 17 (where the op does not exist), nine nodes over the last axis:
 *     m = ReduceMean(x) ; d = x - m ; v = ReduceMean(d ^ 2) ; s = Sqrt(v + eps)
 *     y = (d / s) * gamma + beta
 * becomes one layer_norm(x, gamma, beta; axis=-1, epsilon=eps) node, which normalises each row
 * in one kernel. Both reductions must be over the last axis only with keepdims=1, gamma and
 * beta constants of the last dim's size, eps a scalar constant, and every value between used
 * only by the next step (d twice). The products and sums may come in either order. */
#include "passes/passes_int.h"

#include <string.h>

/* The node that makes v, if of op kind with no fused activation or residual, else NULL. */
static cir_node *maker(cir_graph *g, const cir_value *v, cir_op_kind kind) {
    if (!v || v->producer < 0 || v->output_index >= 0) return NULL;
    cir_node *n = cir_node_at(g, v->producer);
    return n->dead || n->kind != kind || n->n_post ? NULL : n;
}

static bool scalar_const(const cir_value *v, double *out) {
    if (!v || !cir_is_const(v) || v->dtype != CIR_F32 || cir_numel(v) != 1) return false;
    *out = cir_const_f64(v, 0);
    return true;
}

/* n is a reduce_mean of x over its last axis only, keeping it. */
static bool mean_of_last(cir_graph *g, const cir_node *n, const cir_value *x) {
    if (!n || cir_in(g, n, 0) != x || x->ndim < 1 || !cir_attr_int(n, "keepdims")) return false;
    const cir_value *ax = n->n_in > 1 ? cir_in(g, n, 1) : NULL;
    if (!ax || !cir_is_const(ax) || cir_numel(ax) != 1 || (ax->dtype != CIR_I64 && ax->dtype != CIR_I32)) return false;
    const int64_t a = (int64_t)cir_const_f64(ax, 0);
    return a == -1 || a == x->ndim - 1;
}

/* A constant of the row's length (shape [len] or [1, ..., len]). */
static bool row_const(const cir_value *c, int64_t len) {
    return c && cir_is_const(c) && c->dtype == CIR_F32 && c->ndim >= 1 && c->dims[c->ndim - 1] == len &&
           cir_numel(c) == len;
}

/* The input of binary n other than v (by id), or NULL. */
static cir_value *other(cir_graph *g, const cir_node *n, const cir_value *v) {
    if (n->n_in != 2) return NULL;
    return n->in[0] == v->id ? cir_in(g, n, 1) : n->in[1] == v->id ? cir_in(g, n, 0) : NULL;
}

cuvil_status cuvil_pass_fuse_layer_norm(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cir_graph_count_uses(g);
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *sq = cir_node_at(g, i);
        if (sq->dead || sq->kind != CIR_OP_SQRT || sq->n_post) continue;
        /* s = sqrt(v + eps), v = mean((x - m) ^ 2), m = mean(x) */
        cir_value *e = cir_in(g, sq, 0), *sv = cir_out(g, sq, 0);
        cir_node *ad = maker(g, e, CIR_OP_ADD);
        double eps, two;
        if (!ad || e->n_uses != 1) continue;
        cir_value *v = NULL;
        for (int k = 0; k < 2 && !v; k++)
            if (scalar_const(cir_in(g, ad, 1 - k), &eps)) v = cir_in(g, ad, k);
        cir_node *rv = maker(g, v, CIR_OP_REDUCE_MEAN);
        if (!rv || v->n_uses != 1) continue;
        cir_value *p2 = cir_in(g, rv, 0);
        cir_node *pw = maker(g, p2, CIR_OP_POW);
        if (!pw || p2->n_uses != 1 || !scalar_const(cir_in(g, pw, 1), &two) || two != 2.0) continue;
        cir_value *d = cir_in(g, pw, 0);
        cir_node *sub = maker(g, d, CIR_OP_SUB);
        if (!sub || d->n_uses != 2 || !mean_of_last(g, rv, p2)) continue;
        cir_value *x = cir_in(g, sub, 0), *m = cir_in(g, sub, 1);
        cir_node *rm = maker(g, m, CIR_OP_REDUCE_MEAN);
        if (!rm || m->n_uses != 1 || !mean_of_last(g, rm, x) || x->dtype != CIR_F32) continue;
        /* y = (d / s) * gamma + beta */
        cir_node *dv = NULL, *mu = NULL, *add2 = NULL;
        for (int k = 0; k < g->n_nodes && !dv; k++) {   /* d's other reader */
            cir_node *u = cir_node_at(g, k);
            if (!u->dead && u != pw && u->kind == CIR_OP_DIV && u->n_in == 2 && u->in[0] == d->id && u->in[1] == sv->id &&
                !u->n_post)
                dv = u;
        }
        if (!dv || sv->n_uses != 1) continue;
        cir_value *nv = cir_out(g, dv, 0), *gamma = NULL, *beta = NULL;
        if (x->dx[x->ndim - 1]) continue;   /* a row of symbolic length: its gamma cannot match it */
        const int64_t len = x->dims[x->ndim - 1];
        for (int k = 0; k < g->n_nodes && !add2; k++) {
            cir_node *u = cir_node_at(g, k);
            if (u->dead || u->n_post) continue;
            if (!mu && u->kind == CIR_OP_MUL && (gamma = other(g, u, nv)) && row_const(gamma, len) && nv->n_uses == 1 &&
                nv->output_index < 0)
                mu = u, k = -1;   /* now look for the add of its output */
            else if (mu && u->kind == CIR_OP_ADD && (beta = other(g, u, cir_out(g, mu, 0))) && row_const(beta, len) &&
                     cir_out(g, mu, 0)->n_uses == 1 && cir_out(g, mu, 0)->output_index < 0)
                add2 = u;
        }
        if (!add2) continue;
        cir_value *y = cir_out(g, add2, 0);
        if (!cir_same_dims(y, x)) continue;
        const cir_node *all[] = {rm, sub, pw, rv, ad, sq, dv, mu};
        bool one = true;   /* (one region: passes_int.h) */
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) one &= all[k]->region == add2->region;
        if (!one) continue;
        /* add2 becomes the layer_norm, in its place (every input is ready there) */
        add2->kind = CIR_OP_LAYER_NORM;
        add2->def = cir_op_def(CIR_OP_LAYER_NORM);
        add2->n_in = 3;   /* in has a spare slot */
        add2->in[0] = x->id;
        add2->in[1] = gamma->id;
        add2->in[2] = beta->id;
        add2->n_attrs = 0;
        add2->attrs = NULL;
        add2->fused = "layer norm (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add)";
        cuvil_attr a = {.name = "epsilon", .type = CUVIL_ATTR_FLOAT, .f = (float)eps};
        cuvil_status st = cir_node_set_attr(g, add2, &a);
        if (st) return st;
        rm->dead = sub->dead = pw->dead = rv->dead = ad->dead = sq->dead = dv->dead = mu->dead = true;
        cir_graph_count_uses(g);
    }
    return CUVIL_OK;
}
