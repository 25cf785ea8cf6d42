/* pass_drop_identities.c -- nodes whose output is their input, bit for bit, are removed: an
 * identity (Dropout), a Cast to the input's own type, x + 0, x - 0, x * 1, x / 1 (the constant on
 * either side of + and *), a Transpose that keeps the order of the dims or undoes the Transpose
 * before it, a Max, Min or Concat of one input, a Slice of all of its input, and a Reshape,
 * Flatten, Squeeze, Unsqueeze or Expand to the shape the input already has. Each only where the
 * output has the input's type and shape (a constant that broadcasts the input to a larger shape
 * leaves the node alone).
 *
 * IEEE arithmetic decides which zero: -0 + +0 is +0 (ONNX Runtime returns it too), so x + c is x
 * for every x only when every element of c is -0, and x - c when every element is +0; 1 / (x + 0)
 * would otherwise turn a -inf into +inf. x * 1 and x / 1 are exact (and keep NaN, inf and -0).
 * Integers: any 0 and 1. A reader of a removed node's output reads its input instead; a graph
 * output keeps its name (cuvil_rewrite_replace).
 *
 * With symbolic dims the shapes are compared as expressions (cir_same_dims): a reshape to
 * [4, -1] of [seq, 4] is kept, since the two agree at seq = 4 only. */
#include "passes/passes_int.h"

#include <math.h>
#include <string.h>

/* Every element of constant c is `one` (1) or the zero of sign `neg` (0). */
static bool all_equal(const cir_value *c, int one, bool neg) {
    int64_t cnt = cir_numel(c);
    if (c->dtype == CIR_BOOL || c->ndim < 0 || !cnt) return false;
    bool fl = cir_dtype_is_float(c->dtype);
    for (int64_t i = 0; i < cnt; i++) {
        if (!fl) {
            if (cir_const_i64(c, i) != one) return false;
            continue;
        }
        double v = cir_const_f64(c, i);
        if (v != (double)one || (!one && (signbit(v) != 0) != neg)) return false;
    }
    return true;
}

/* y = x OP c (or c OP x for + and *) with c the op's identity element: the x side, else -1. */
static int binary_identity(cuvil_rewrite *rw, const cir_node *n) {
    cir_graph *g = rw->g;
    if (n->n_in != 2 || n->n_post) return -1;
    for (int side = 0; side < 2; side++) {
        cir_value *x = cir_in(g, n, side), *c = cir_in(g, n, 1 - side), *y = cir_out(g, n, 0);
        if (!x || !c || !cir_is_const(c) || c->dtype != x->dtype || y->dtype != x->dtype || !cir_same_dims(y, x)) continue;
        bool ok = false;
        switch (n->kind) {
        case CIR_OP_ADD: ok = all_equal(c, 0, true); break;
        case CIR_OP_MUL: ok = all_equal(c, 1, false); break;
        case CIR_OP_SUB: ok = side == 0 && all_equal(c, 0, false); break;
        case CIR_OP_DIV: ok = side == 0 && all_equal(c, 1, false); break;
        default: break;
        }
        if (ok) return x->id;
    }
    return -1;
}

/* The permutation of a transpose node (its rank), or -1. */
static int perm_of(cir_graph *g, cir_node *n, int *perm) {
    cuvil_transpose_params p;
    if (n->kind != CIR_OP_TRANSPOSE || op_transpose_params(g, n, &p)) return -1;
    memcpy(perm, p.perm, sizeof(int) * (size_t)p.ndim);
    return p.ndim;
}

/* A transpose that moves nothing, alone or after the transpose that makes its input: the value
 * it copies, else -1. */
static int transpose_identity(cir_graph *g, cir_node *n) {
    int p2[CIR_MAX_DIMS], p1[CIR_MAX_DIMS], r = perm_of(g, n, p2);
    if (r < 0 || n->n_post) return -1;
    bool same = true;
    for (int i = 0; i < r; i++) same &= p2[i] == i;
    if (same) return n->in[0];
    cir_value *m = cir_in(g, n, 0);
    if (m->producer < 0) return -1;
    cir_node *t = cir_node_at(g, m->producer);
    if (t->dead || perm_of(g, t, p1) != r) return -1;
    for (int i = 0; i < r; i++)   /* out[i] = mid[p2[i]] = x[p1[p2[i]]] */
        if (p1[p2[i]] != i) return -1;
    return t->in[0];
}

/* A Slice from index 0 with step 1 along every axis (the output's shape the input's: checked by
 * the caller): the value it copies, else -1. (GhostNet's ghost modules slice their Concat back
 * to its own channel count: 32 copies of up to 48 x 112x112 floats.) */
static int slice_identity(cir_graph *g, cir_node *n) {
    const cir_dim *start[CIR_MAX_DIMS], *cnt[CIR_MAX_DIMS];
    int64_t steps[CIR_MAX_DIMS];
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 0 || op_slice_x(g, n, start, cnt, steps)) return -1;
    for (int d = 0; d < x->ndim; d++)
        if (steps[d] != 1 || !cir_dim_is_const(start[d]) || start[d]->c != 0) return -1;
    return x->id;
}

cuvil_status cuvil_pass_drop_identities(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cuvil_rewrite rw;
    cuvil_status s = cuvil_rewrite_begin(g, &rw);
    if (s) return s;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        cuvil_rewrite_inputs(&rw, n);
        /* (a node that reads or finds sizes when the model runs stays: its loads and checks do) */
        if (n->n_out != 1 || n->n_in < 1 || n->in[0] < 0 || n->half != CIR_UNDEF || n->n_post || n->n_rt)
            continue;
        cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
        int to = -1;
        switch (n->kind) {
        case CIR_OP_IDENTITY: to = x->id; break;
        case CIR_OP_CAST:
            if (y->dtype == x->dtype) to = x->id;
            break;
        case CIR_OP_ADD: case CIR_OP_SUB: case CIR_OP_MUL: case CIR_OP_DIV: to = binary_identity(&rw, n); break;
        case CIR_OP_MAX: case CIR_OP_MIN: case CIR_OP_CONCAT:
            if (n->n_in == 1) to = x->id;
            break;
        case CIR_OP_TRANSPOSE: to = transpose_identity(g, n); break;
        case CIR_OP_SLICE: to = slice_identity(g, n); break;
        case CIR_OP_RESHAPE: case CIR_OP_FLATTEN: case CIR_OP_SQUEEZE: case CIR_OP_UNSQUEEZE: case CIR_OP_EXPAND:
            to = x->id;
            break;
        default: break;
        }
        if (to < 0) continue;
        cir_value *t = cir_val(g, to);
        if (t->dtype != y->dtype || !cir_same_dims(t, y)) continue;
        cuvil_rewrite_replace(&rw, n, to);
    }
    cuvil_rewrite_end(&rw);
    return CUVIL_OK;
}
