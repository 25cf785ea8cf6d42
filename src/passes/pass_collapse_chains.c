/* pass_collapse_chains.c -- an op applied to its own result becomes one node:
 *   relu(relu(x)), abs(abs(x)) -> the inner one; floor, ceil and round of floor, ceil or round
 *     -> the inner one (an integer value, or NaN, or inf, is its own floor, ceil and round);
 *   clip(clip(x, a, b), c, d) -> clip(x, max(a, c), min(b, d)) where both ranges are in order
 *     and overlap;
 *   min(min(x, c1), c2) -> min(x, min(c1, c2)), the same for max, with constants c1, c2;
 *   reshape(view(x), s) -> reshape(x, s), view one of reshape, flatten, squeeze, unsqueeze,
 *     identity (views keep the order of the elements);
 *   transpose(transpose(x, p1), p2) -> transpose(x, p1 o p2) where the inner one has no other
 *     reader (drop_identities removes a pair that cancels).
 * Each gives the bits the chain gives, as the kernels compute them: ties between equal values
 * pick the same operand (max(-0, +0) is +0, max(+0, -0) is -0) and NaN goes through the same.
 * That is why an empty clip intersection (whose result is one bound, but a -0 equal to it
 * would come out as itself from one clip) is left as two clips, why a NaN among min/max
 * constants keeps both nodes, and why abs is not merged into relu (an integer relu(abs(MIN))
 * is 0). */
#include "passes/passes_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The live node that makes value v, or NULL. */
static cir_node *maker(cir_graph *g, int v) {
    cir_value *x = cir_val(g, v);
    if (!x || x->producer < 0) return NULL;
    cir_node *p = cir_node_at(g, x->producer);
    /* (a node that reads or finds sizes when the model runs keeps its place: its checks matter) */
    return p->dead || p->n_post || p->half != CIR_UNDEF || p->n_rt ? NULL : p;
}

static bool rounding(cir_op_kind k) { return k == CIR_OP_FLOOR || k == CIR_OP_CEIL || k == CIR_OP_ROUND; }

/* ===== Clip ================================================================================= */
typedef struct bound {
    long double v;   /* long double holds every int64 and uint64 exactly */
    int id;          /* the constant, -1 when absent */
} bound;

/* Bound i (1: min, 2: max) of clip node n: absent, or a constant of x's type; false when it
 * is computed at run time, NaN or another type. An absent bound is what the kernel takes:
 * float's lowest/highest for the float kernel, none (an infinity) for the typed one. float64
 * is left alone: its clip runs as an activation whose bounds are float32 (unary_act), which
 * changes a bound such as 0.1 and whose inverted range differs from the float32 kernel's. */
static bool clip_bound(cuvil_rewrite *rw, const cir_node *n, int i, bound *b) {
    cir_graph *g = rw->g;
    cir_value *x = cir_in(g, n, 0), *c = cir_in(g, n, i);
    bool fl = cir_dtype_is_float(x->dtype);
    b->id = -1;
    if (x->dtype == CIR_F64) return false;
    b->v = fl ? (i == 1 ? -FLT_MAX : FLT_MAX) : (i == 1 ? -INFINITY : INFINITY);
    if (!c) return true;
    if (!cir_is_const(c) || c->dtype != x->dtype || cir_numel(c) != 1)
        return false;
    b->id = c->id;
    if (fl) b->v = (float)cir_const_f64(c, 0);   /* what the kernel compares with (unary_act) */
    else if (c->dtype == CIR_U64) b->v = (uint64_t)cir_const_i64(c, 0);
    else b->v = cir_const_i64(c, 0);
    return !isnan(b->v);
}

/* n = clip(clip(x, a, b), c, d): rewires n to clip(x, a|c, b|d). */
static cuvil_status collapse_clip(cuvil_rewrite *rw, cir_node *n, cir_node *p) {
    cir_graph *g = rw->g;
    bound a, b, c, d;
    if (!clip_bound(rw, p, 1, &a) || !clip_bound(rw, p, 2, &b) || !clip_bound(rw, n, 1, &c) || !clip_bound(rw, n, 2, &d))
        return CUVIL_OK;
    if (a.v > b.v || c.v > d.v || a.v > d.v || c.v > b.v) return CUVIL_OK;   /* out of order, or disjoint */
    bound lo = a.v < c.v ? c : a, hi = b.v > d.v ? d : b;   /* the clips' own tie rules */
    int *in = n->in;
    if (n->n_in < 3) {   /* the node's input array holds n_in + 1 */
        if (!(in = cuvil_arena_alloc(&g->arena, sizeof(int) * 4))) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    in[0] = p->in[0];
    in[1] = lo.id;
    in[2] = hi.id;
    n->in = in;
    n->n_in = hi.id >= 0 ? 3 : lo.id >= 0 ? 2 : 1;
    rw->n_changed++;
    return CUVIL_OK;
}

/* ===== Min, Max ============================================================================= */
static bool has_nan(const cir_value *c) {
    if (!cir_dtype_is_float(c->dtype)) return false;
    for (int64_t i = 0; i < cir_numel(c); i++)
        if (isnan(cir_const_f64(c, i))) return true;
    return false;
}

/* n = op(op(x, c1), c2), op min or max: n becomes op(x, op(c1, c2)), the constant computed by
 * the kernel the node runs (the compiler folds with them too). */
static cuvil_status collapse_minmax(cuvil_rewrite *rw, cir_node *n, cir_node *p) {
    cir_graph *g = rw->g;
    if (n->n_in != 2 || p->n_in != 2 || n->n_attrs || p->n_attrs) return CUVIL_OK;   /* numpy broadcasting */
    cir_value *x = cir_in(g, p, 0), *c1 = cir_in(g, p, 1), *c2 = cir_in(g, n, 1), *m = cir_in(g, n, 0);
    if (!x || !c1 || !c2 || !cir_is_const(c1) || !cir_is_const(c2) || cir_is_const(x) || c1->dtype != c2->dtype ||
        c1->dtype != x->dtype)
        return CUVIL_OK;
    if (c1 == c2) {   /* op(op(x, c), c) = op(x, c), whatever c holds */
        cuvil_rewrite_replace(rw, n, m->id);
        return CUVIL_OK;
    }
    if (has_nan(c1) || has_nan(c2)) return CUVIL_OK;
    int nd;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_broadcast(g, n, c1, c2, &nd, dims);
    if (s) return s;
    const cir_value *big = cir_numel(c1) >= cir_numel(c2) ? c1 : c2;   /* no constant larger than both */
    if (nd != big->ndim || memcmp(dims, big->dims, sizeof(int64_t) * (size_t)nd)) return CUVIL_OK;
    char name[512];
    snprintf(name, sizeof name, "%s(%s,%s)", n->def->name, c1->name, c2->name);
    int id = cir_const_add(g, name, c1->dtype, nd, dims, NULL);
    if (id < 0) return g->ctx->status;
    cir_value *cm = cir_val(g, id);
    c1 = cir_in(g, p, 1);
    c2 = cir_in(g, n, 1);
    cuvil_binary_params bp;
    op_bin_params(c1, c2, cm, n->kind == CIR_OP_MIN ? CUVIL_BIN_MIN : CUVIL_BIN_MAX, &bp);
    if (cm->dtype == CIR_F32) cuvil_f32_binary__scalar(&bp, c1->data, c2->data, cm->data);
    else cuvil_binary_t(&bp, cm->dtype, c1->data, c2->data, cm->data);
    n->in[0] = x->id;
    n->in[1] = id;
    rw->n_changed++;
    return CUVIL_OK;
}

/* ===== Views and transposes ================================================================= */
static bool is_view(cir_op_kind k) {
    return k == CIR_OP_RESHAPE || k == CIR_OP_FLATTEN || k == CIR_OP_SQUEEZE || k == CIR_OP_UNSQUEEZE ||
           k == CIR_OP_IDENTITY;
}

/* n = reshape(view(x), s): reads x instead, where s says the same of x as of the view (its 0s
 * copy a dim, which x must then have at that place too). */
static void collapse_reshape(cuvil_rewrite *rw, cir_node *n, cir_node *p) {
    cir_graph *g = rw->g;
    cir_value *x = cir_in(g, p, 0), *m = cir_in(g, n, 0), *s = cir_in(g, n, 1);
    if (!x || !s || !cir_is_const(s) || x->dtype != m->dtype) return;
    if (!cir_attr_int(n, "allowzero")) {
        for (int64_t i = 0; i < cir_numel(s); i++) {
            if (cir_const_i64(s, i) != 0) continue;
            if (i >= x->ndim || x->dims[i] != m->dims[i] || x->dx[i] != m->dx[i]) return;
        }
    }
    n->in[0] = x->id;
    rw->n_changed++;
}

static cuvil_status collapse_transpose(cuvil_rewrite *rw, cir_node *n, cir_node *p) {
    cir_graph *g = rw->g;
    cir_value *m = cir_in(g, n, 0);
    cuvil_transpose_params p1, p2;
    if (m->n_uses != 1 || m->output_index >= 0 || op_transpose_params(g, p, &p1) || op_transpose_params(g, n, &p2) ||
        p1.ndim != p2.ndim)
        return CUVIL_OK;
    int64_t perm[CIR_MAX_DIMS];
    bool same = true;
    for (int i = 0; i < p2.ndim; i++) {
        perm[i] = p1.perm[p2.perm[i]];   /* out[i] = mid[p2[i]] = x[p1[p2[i]]] */
        same &= perm[i] == i;
    }
    if (same) {   /* a longer chain that cancels */
        cuvil_rewrite_replace(rw, n, p->in[0]);
        return CUVIL_OK;
    }
    int k = 0;
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].spec->name, "perm")) n->attrs[k++] = n->attrs[i];
    n->n_attrs = k;
    cuvil_attr a = {.name = "perm", .type = CUVIL_ATTR_INTS, .ints = perm, .n = (size_t)p2.ndim};
    cuvil_status s = cir_node_set_attr(g, n, &a);
    if (s) return s;
    n->in[0] = p->in[0];
    rw->n_changed++;
    return CUVIL_OK;
}

cuvil_status cuvil_pass_collapse_chains(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cuvil_rewrite rw;
    cuvil_status s = cuvil_rewrite_begin(g, &rw);
    if (s) return s;
    for (int i = 0; i < g->n_nodes && !s; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || n->n_rt) continue;
        cuvil_rewrite_inputs(&rw, n);
        if (n->n_out != 1 || n->n_in < 1 || n->in[0] < 0 || n->n_post || n->half != CIR_UNDEF) continue;
        cir_node *p = maker(g, n->in[0]);
        if (!p) continue;
        switch (n->kind) {
        case CIR_OP_RELU: case CIR_OP_ABS:
            if (p->kind == n->kind) cuvil_rewrite_replace(&rw, n, n->in[0]);
            break;
        case CIR_OP_FLOOR: case CIR_OP_CEIL: case CIR_OP_ROUND:
            if (rounding(p->kind)) cuvil_rewrite_replace(&rw, n, n->in[0]);
            break;
        case CIR_OP_CLIP:
            if (p->kind == CIR_OP_CLIP) s = collapse_clip(&rw, n, p);
            break;
        case CIR_OP_MIN: case CIR_OP_MAX:
            if (p->kind == n->kind) s = collapse_minmax(&rw, n, p);
            break;
        case CIR_OP_RESHAPE:
            if (is_view(p->kind)) collapse_reshape(&rw, n, p);
            break;
        case CIR_OP_TRANSPOSE:
            if (p->kind == CIR_OP_TRANSPOSE) s = collapse_transpose(&rw, n, p);
            break;
        default: break;
        }
    }
    cuvil_rewrite_end(&rw);
    return s;
}
