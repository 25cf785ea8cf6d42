/* pass_fuse_gelu.c -- the exporters write Gelu as the formula: x * 0.5 * (1 + erf(x / sqrt 2))
 * (BERT, DistilBERT) or 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) (GPT-2's
 * "gelu_new"), five to nine elementwise nodes, each a pass over memory. Matched here, they
 * become one gelu node (approximate='tanh' for the second), which fuse_act then moves into the
 * epilogue of the GEMM that computes x. The formula's constants must be the exact ones (to a
 * relative 1e-5) or, in a float16 or bfloat16 model (computed in float32 between casts), the
 * exact ones rounded to that type (a type the model computes in) (its sqrt 2 is 1.4140625: the model's own arithmetic is no
 * finer than that rounding), every value between must be used only by the next step, and the
 * products may come in any order: (x * 0.5) * s, (s * x) * 0.5, (0.5 * s) * x, ... */
#include "passes/passes_int.h"

#include <math.h>
#include <string.h>

typedef struct gelu_ctx {
    cir_graph *g;
    int *user;   /* per value id: the one live node that reads it, or -1 (none, several, or an output) */
} gelu_ctx;

/* A formula's constant x is want: within a relative 1e-5, or in a 16-bit model want rounded to
 * float16 or bfloat16, exactly. */
static bool near(const gelu_ctx *c, double x, double want) {
    if (fabs(x - want) <= 1e-5 * fabs(want)) return true;
    const float w = (float)want;
    return ((c->g->half_types & 1) && (float)x == cir_f16_to_f32(cir_f32_to_f16(w))) ||
           ((c->g->half_types & 2) && (float)x == cir_bf16_to_f32(cir_f32_to_bf16(w)));
}

static bool is_scalar(const gelu_ctx *c, const cir_value *v, double want) {
    return v && cir_is_const(v) && v->dtype == CIR_F32 && cir_numel(v) == 1 && near(c, cir_const_f64(v, 0), want);
}

/* The node that produces v, of op kind and without a fused activation, or NULL. */
static cir_node *made_by(const gelu_ctx *c, const cir_value *v, cir_op_kind kind) {
    if (!v || v->producer < 0) return NULL;
    cir_node *n = cir_node_at(c->g, v->producer);
    return n->dead || n->kind != kind || n->n_post || n->n_in != 2 ? NULL : n;
}

/* v's only reader, if it is a binary node of op kind (without an activation), else NULL. */
static cir_node *read_by(const gelu_ctx *c, const cir_value *v, cir_op_kind kind) {
    int u = c->user[v->id];
    if (u < 0) return NULL;
    cir_node *n = cir_node_at(c->g, u);
    return n->dead || n->kind != kind || n->n_post || n->n_in != 2 ? NULL : n;
}

/* The input of binary node n that is not the value `other` (by id), or NULL. */
static cir_value *other_in(const gelu_ctx *c, const cir_node *n, int other) {
    if (n->in[0] == other) return cir_val(c->g, n->in[1]);
    if (n->in[1] == other) return cir_val(c->g, n->in[0]);
    return NULL;
}

/* n is mul(x, scalar want) in either order: x, else NULL. */
static cir_value *mul_by(const gelu_ctx *c, const cir_node *n, double want) {
    if (!n) return NULL;
    cir_value *a = cir_in(c->g, n, 0), *b = cir_in(c->g, n, 1);
    return is_scalar(c, b, want) ? a : is_scalar(c, a, want) ? b : NULL;
}

/* Product node n as x^pw times a coefficient: a tree of products whose leaves are x, scalar
 * constants and Pow(x, 3), each value between read only by the next product (jax2tf writes
 * 0.044715 x^3 as x * (x * (0.044715 * x)); PyTorch's exports as 0.044715 * Pow(x, 3)). The
 * nodes go to dead[*nd...] (at most 6 of them). */
static bool power_term(const gelu_ctx *c, cir_node *n, const cir_value *x, int *pw, double *coef, cir_node **dead,
                       int *nd, int depth) {
    if (depth > 3 || *nd >= 6) return false;
    dead[(*nd)++] = n;
    for (int i = 0; i < 2; i++) {
        cir_value *v = cir_in(c->g, n, i);
        if (v == x) {
            (*pw)++;
            continue;
        }
        if (v && cir_is_const(v) && v->dtype == CIR_F32 && cir_numel(v) == 1) {
            *coef *= cir_const_f64(v, 0);
            continue;
        }
        if (!v || c->user[v->id] != n->id) return false;
        cir_node *m = made_by(c, v, CIR_OP_MUL), *p = made_by(c, v, CIR_OP_POW);
        if (m && power_term(c, m, x, pw, coef, dead, nd, depth + 1)) continue;
        if (p && cir_in(c->g, p, 0) == x && is_scalar(c, cir_in(c->g, p, 1), 3.0) && *nd < 6) {
            *pw += 3;
            dead[(*nd)++] = p;
            continue;
        }
        return false;
    }
    return true;
}

/* s = 1 + f(x) found; the Gelu is x * 0.5 * s in some order. Returns the last product, whose
 * output is the Gelu's, or NULL. dead[] gets the product nodes that go (at most 2). */
static cir_node *halve_times(const gelu_ctx *c, const cir_value *s, const cir_value *x, cir_node **dead) {
    cir_node *m1 = read_by(c, s, CIR_OP_MUL);
    if (!m1) return NULL;
    cir_value *t = other_in(c, m1, s->id), *y1 = cir_out(c->g, m1, 0);
    if (!t || t == s) return NULL;
    if (t == x || is_scalar(c, t, 0.5)) {   /* (s * x) * 0.5, (s * 0.5) * x */
        cir_node *f = read_by(c, y1, CIR_OP_MUL);
        cir_value *o = f ? other_in(c, f, y1->id) : NULL;
        if (!o || (t == x ? !is_scalar(c, o, 0.5) : o != x)) return NULL;
        dead[0] = m1;
        return f;
    }
    cir_node *h = made_by(c, t, CIR_OP_MUL);   /* (x * 0.5) * s */
    if (!h || mul_by(c, h, 0.5) != x || c->user[t->id] != m1->id) return NULL;
    dead[0] = h;
    return m1;
}

/* One Gelu ending at unary node e (erf or tanh): the nodes that go in dead[] (NULL-ended), the
 * last product returned (NULL: no match), x in *xp. */
static cir_node *match(const gelu_ctx *c, cir_node *e, cir_node **dead, cir_value **xp) {
    cir_graph *g = c->g;
    cir_value *u = cir_in(g, e, 0), *ev = cir_out(g, e, 0), *x = NULL;
    if (c->user[u->id] != e->id) return NULL;
    int nd = 0;
    dead[nd++] = e;
    if (e->kind == CIR_OP_ERF) {   /* u = x / sqrt 2 or x * (1 / sqrt 2) */
        cir_node *d = made_by(c, u, CIR_OP_DIV), *m = made_by(c, u, CIR_OP_MUL);
        if (d && is_scalar(c, cir_in(g, d, 1), 1.4142135623730951)) x = cir_in(g, d, 0);
        else if (m) x = mul_by(c, m, 0.7071067811865476);
        if (!x) return NULL;
        dead[nd++] = d ? d : m;
    } else {   /* u = sqrt(2 / pi) * (x + 0.044715 * x^3) */
        cir_node *k = made_by(c, u, CIR_OP_MUL);
        cir_value *a = k ? mul_by(c, k, 0.7978845608028654) : NULL;
        cir_node *ad = a && c->user[a->id] == k->id ? made_by(c, a, CIR_OP_ADD) : NULL;
        if (!ad) return NULL;
        for (int side = 0; side < 2 && !x; side++) {   /* ad = x + 0.044715 x^3 */
            cir_value *xc = cir_in(g, ad, side), *mv = cir_in(g, ad, 1 - side);
            cir_node *m = made_by(c, mv, CIR_OP_MUL), *chain[6];
            int pw = 0, nc = 0;
            double coef = 1.0;
            if (m && c->user[mv->id] == ad->id && power_term(c, m, xc, &pw, &coef, chain, &nc, 0) && pw == 3 &&
                near(c, coef, 0.044715)) {
                x = xc;
                dead[nd++] = k;
                dead[nd++] = ad;
                for (int i = 0; i < nc; i++) dead[nd++] = chain[i];
            }
        }
        if (!x) return NULL;
    }
    /* s = 1 + e */
    cir_node *one = read_by(c, ev, CIR_OP_ADD);
    cir_value *s = one ? cir_out(g, one, 0) : NULL;
    if (!one || !is_scalar(c, other_in(c, one, ev->id), 1.0)) return NULL;
    dead[nd++] = one;
    cir_node *f = halve_times(c, s, x, &dead[nd]);
    if (!f) return NULL;
    nd++;
    dead[nd] = NULL;
    cir_value *y = cir_out(g, f, 0);
    if (x->dtype != CIR_F32 || y->dtype != CIR_F32 || !cir_same_dims(x, y)) return NULL;
    *xp = x;
    return f;
}

cuvil_status cuvil_pass_fuse_gelu(cir_graph *g, const cuvil_options *o) {
    (void)o;
    gelu_ctx c = {.g = g, .user = cuvil_single_readers(g)};
    if (!c.user) return g->ctx->status;
    cuvil_status s = CUVIL_OK;
    int matched = 0;
    for (int i = 0; i < g->n_nodes && !s; i++) {
        cir_node *e = cir_node_at(g, i), *dead[16];
        cir_value *x;
        if (e->dead || (e->kind != CIR_OP_ERF && e->kind != CIR_OP_TANH) || e->n_post) continue;
        cir_node *f = match(&c, e, dead, &x);
        bool one = f && f->region == e->region;   /* (one region: passes_int.h) */
        for (int k = 0; one && dead[k]; k++) one = dead[k]->region == e->region;
        if (!one) continue;
        const bool tanh_form = e->kind == CIR_OP_TANH;
        for (int k = 0; dead[k]; k++)
            if (dead[k] != f) dead[k]->dead = true;
        cuvil_node_become_unary(g, f, CIR_OP_GELU, x->id, tanh_form ? "gelu (tanh form)" : "gelu (erf form)");
        if (tanh_form) {
            cuvil_attr a = {.name = "approximate", .type = CUVIL_ATTR_STRING, .s = "tanh"};
            s = cir_node_set_attr(g, f, &a);
        }
        matched++;
    }
    cuvil_free(c.user);
    if (matched) cir_graph_count_uses(g);
    return s;
}
