/* store16.c -- the lowering's last step under --activations fp16|bf16: the activations that go
 * from one kernel to others are stored in 16 bits. A value the step takes is narrowed by a
 * cast placed right after the kernel that writes it (float32 -> IEEE half or bfloat16, rounded
 * to nearest even: cuvil_cast), and each kernel that reads it reads a float32 copy widened by a
 * cast placed right before it, which lives only while that kernel runs. So what stays in the
 * arena between kernels is 16 bits an element, and the arithmetic is float32 as it was: the
 * results are those of the model with each of these values rounded once to 16 bits. The step
 * runs after fusion, block fusion and the layouts, so a fused kernel's inner values (a conv's
 * output before its Relu, an inverted-residual block's expanded tensor) are not rounded, and a
 * channels-last tensor is narrowed and widened in its layout (the casts are elementwise).
 *
 * A reshaping op that only relabels its input's bytes (CIR_OPF_ALIAS: Reshape, Flatten,
 * Squeeze, Unsqueeze) reads the 16-bit value as it is, and its output is 16-bit too.
 *
 * A Shape or Size reads the 16-bit value itself (its dims are the same).
 *
 * Taken: a float32 tensor a kernel of the graph's own region computes, of at least
 * STORE16_MIN_ELEMS elements (a symbolic dim counted as 1), that is not a graph output (the
 * caller's buffer: float32) nor relabelled into one, and that no control flow (If, Loop) reads.
 * Not taken:
 *  - smaller values (scales, a Resize's scales, shapes computed in float: the saving is nothing
 *    there, and they are not activations);
 *  - the outputs of Range and of a Cast from an integer, and what a Cast, Sin or Cos reads:
 *    positions, sizes and angles as floats (float16 holds whole numbers exactly only up to
 *    2048, bfloat16 up to 256; a rotary embedding's angles would lose whole radians), values a
 *    cast converts anyway;
 *  - the output of a node that reads a constant holding a finite value the 16-bit type cannot
 *    (an attention mask made with float32's lowest value, -3.4e38: it would become -inf), and
 *    what is computed from such an output up to an op that bounds its values (a Softmax, a
 *    Sigmoid, a Tanh, an attention: the scores the mask was added to).
 * A finite value that overflows the type at run time (float16's 65504) fails the run with a
 * message naming the value (emit_cast.c), rather than going on as an infinity. */
#include "lower/lower_int.h"

#include <stdio.h>
#include <string.h>

#include "ir/dim.h"
#include "ir/ops/ops.h"

#define STORE16_MIN_ELEMS 1024

/* Nodes that run other nodes (control flow), whose reads and writes stay float32. */
static bool control(const cir_node *n) {
    return n->kind == CIR_OP_IF || n->kind == CIR_OP_LOOP || n->kind == CIR_OP_LOOP_BEGIN;
}

/* At least STORE16_MIN_ELEMS elements at every size the model takes. */
static bool big_enough(const cir_value *v) {
    if (v->ndim < 0 || v->seq_n >= 0) return false;
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) {
        const int64_t e = v->dx[d] && !cir_dim_is_const(v->dx[d]) ? 1 : v->dims[d];
        if (e <= 0) return false;
        if (e >= STORE16_MIN_ELEMS || n >= STORE16_MIN_ELEMS / e + 1) return true;   /* (no overflow) */
        n *= e;
    }
    return n >= STORE16_MIN_ELEMS;
}

/* Whether constant c holds a finite value that type `half` cannot: one that rounds to an
 * infinity, |x| from the midpoint between the largest finite value and the next power of two
 * on (a tie goes to the even one, that power: 65520 for float16, 0x7f7f8000's bits for
 * bfloat16). */
static bool const_overflows(const cir_value *c, cir_dtype half) {
    if (!c || !cir_is_const(c) || c->dtype != CIR_F32 || !c->data) return false;
    const uint32_t lo = half == CIR_F16 ? 0x477ff000u : 0x7f7f8000u;   /* 65520.0f; bfloat16's */
    const uint32_t *u = c->data;
    const int64_t n = cir_numel(c);
    for (int64_t i = 0; i < n; i++) {
        const uint32_t a = u[i] & 0x7fffffffu;
        if (a >= lo && a < 0x7f800000u) return true;
    }
    return false;
}

/* Ops whose outputs are bounded whatever their inputs: where a value beyond the 16-bit range
 * (a mask) stops spreading. */
static bool bounds_values(const cir_node *n) {
    return n->kind == CIR_OP_SOFTMAX || n->kind == CIR_OP_SIGMOID || n->kind == CIR_OP_TANH ||
           n->kind == CIR_OP_ATTENTION || n->kind == CIR_OP_SDPA;
}

/* Whether node p's output v may be stored in 16 bits (its readers are checked apart; a node
 * reading a constant the type cannot hold, or a value made from one, is checked by the caller). */
static bool takes(const cir_graph *g, const cir_node *p, const cir_value *v) {
    if (p->dead || p->region != 0 || control(p) || p->kind == CIR_OP_RANGE || (p->def->flags & CIR_OPF_ALIAS))
        return false;
    if (p->kind == CIR_OP_CAST && p->n_in >= 1 && cir_in(g, p, 0) && !cir_dtype_is_float(cir_in(g, p, 0)->dtype))
        return false;
    return v->kind == CIR_VAL_ACT && v->dtype == CIR_F32 && v->output_index < 0 && v->n_uses > 0 && big_enough(v);
}

/* A cast node from value x into a new value of type `to`, shaped as x, named "x (label)"; the
 * node goes at the end of the list (the caller orders them). Returns the new value, or -1. */
static int add_cast(cir_graph *g, int x, cir_dtype to, const char *label) {
    char name[600];
    snprintf(name, sizeof name, "%.500s (%s)", cir_val(g, x)->name, label);
    const int y = cir_value_add(g, name, CIR_VAL_ACT);
    if (y < 0) return -1;
    cir_set_shape_like(cir_val(g, y), to, cir_val(g, x));
    const int id = cir_node_add(g, CIR_OP_CAST, name, "Cast", 1, &x, 1, &y);
    if (id < 0) return -1;
    cir_node *c = cir_node_at(g, id);
    c->region = 0;
    c->store16 = to != CIR_F32;
    cuvil_attr a = {.name = "to", .type = CUVIL_ATTR_INT, .i = cir_dtype_to_public(to)};
    if (cir_node_set_attr(g, c, &a)) return -1;
    return y;
}

/* The new node order, grown as casts are added. */
typedef struct order_list {
    int *at;
    int n, cap;
} order_list;

static bool push(order_list *l, int id) {
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 1024;
        int *p = cuvil_realloc(l->at, sizeof(int) * (size_t)cap);
        if (!p) return false;
        l->at = p;
        l->cap = cap;
    }
    l->at[l->n++] = id;
    return true;
}

cuvil_status lower_store16(cir_graph *g, const cuvil_options *o) {
    if (!o || (o->activations != CUVIL_PRECISION_FP16 && o->activations != CUVIL_PRECISION_BF16)) return CUVIL_OK;
    const cir_dtype half = o->activations == CUVIL_PRECISION_FP16 ? CIR_F16 : CIR_BF16;
    const char *narrow_label = half == CIR_F16 ? "stored as float16" : "stored as bfloat16";
    cir_graph_count_uses(g);
    const int nn0 = g->n_nodes, nv0 = g->n_values;
    cuvil_status st = CUVIL_OK;
    /* ok[v]: every live reader of v runs in the graph's region and is not control flow;
     * h16[v]: the 16-bit value that stands for v from its producer on, or -1 */
    bool *ok = cuvil_malloc((size_t)nv0 + 1), *wide_v = cuvil_malloc((size_t)nv0 + 1);
    int *h16 = cuvil_malloc(sizeof(int) * ((size_t)nv0 + 1));
    order_list order = {0};
    if (!ok || !wide_v || !h16) goto oom;
    for (int v = 0; v < nv0; v++) ok[v] = true, h16[v] = -1;
    for (int i = 0; i < nn0; i++) {
        const cir_node *n = cir_node_at(g, i);
        const bool keep = n->region != 0 || control(n) || n->kind == CIR_OP_CAST || n->kind == CIR_OP_SIN ||
                          n->kind == CIR_OP_COS;
        for (int j = 0; !n->dead && keep && j < cir_node_n_reads(n); j++) {
            const int v = cir_node_read(n, j);
            if (v >= 0) ok[v] = false;
        }
    }
    /* values beyond the type's range: a constant holding one (each scanned once), and what is
     * made from such a value up to an op that bounds it (in node order: a node's inputs come
     * before it) */
    for (int v = 0; v < nv0; v++) wide_v[v] = const_overflows(cir_val(g, v), half);
    for (int i = 0; i < nn0; i++) {
        const cir_node *n = cir_node_at(g, i);
        if (n->dead || bounds_values(n)) continue;
        bool wide = false;
        for (int j = 0; j < cir_node_n_reads(n) && !wide; j++) {
            const int v = cir_node_read(n, j);
            wide = v >= 0 && wide_v[v];
        }
        for (int j = 0; wide && j < n->n_out; j++)
            if (n->out[j] >= 0 && n->out[j] < nv0) wide_v[n->out[j]] = true, ok[n->out[j]] = false;
    }
    /* a value that relabellings make a graph output: the caller's float32 */
    for (int i = nn0 - 1; i >= 0; i--) {
        const cir_node *n = cir_node_at(g, i);
        if (n->dead || !(n->def->flags & CIR_OPF_ALIAS) || n->n_in < 1 || n->in[0] < 0 || n->n_out < 1 || n->out[0] < 0)
            continue;
        if (cir_out(g, n, 0)->output_index >= 0 || !ok[n->out[0]]) ok[n->in[0]] = false;
    }
    /* Each original node in order, each with the casts it needs before and after it (added at
     * the end of the list: ids from nn0 on). */
    for (int i = 0; i < nn0; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || n->region != 0 || control(n)) {
            if (!push(&order, i)) goto oom;
            continue;
        }
        /* a relabelling of a 16-bit value: its output is that value, in 16 bits */
        const int x0 = n->n_in >= 1 ? n->in[0] : -1;
        if ((n->def->flags & CIR_OPF_ALIAS) && x0 >= 0 && x0 < nv0 && h16[x0] >= 0 && n->n_out == 1 && n->out[0] >= 0 &&
            n->out[0] < nv0 && ok[n->out[0]] && cir_out(g, n, 0)->output_index < 0 && cir_out(g, n, 0)->dtype == CIR_F32) {
            n->in[0] = h16[x0];
            cir_out(g, n, 0)->dtype = half;
            h16[n->out[0]] = n->out[0];
            if (!push(&order, i)) goto oom;
            continue;
        }
        /* a Shape or Size: the dims, which the 16-bit value has too */
        if ((n->kind == CIR_OP_SHAPE || n->kind == CIR_OP_SIZE) && x0 >= 0 && x0 < nv0 && h16[x0] >= 0) {
            n->in[0] = h16[x0];
            if (!push(&order, i)) goto oom;
            continue;
        }
        /* its reads of 16-bit values: a float32 copy each, made right before it */
        enum { SEEN_MAX = 16 };
        int seen_v[SEEN_MAX], seen_t[SEEN_MAX], n_seen = 0;
        for (int j = 0; j < cir_node_n_reads(n); j++) {
            const int v = cir_node_read(n, j);
            if (v < 0 || v >= nv0 || h16[v] < 0) continue;
            int t = -1;
            for (int k = 0; k < n_seen && t < 0; k++)
                if (seen_v[k] == v) t = seen_t[k];
            if (t < 0) {
                if ((t = add_cast(g, h16[v], CIR_F32, "as float32")) < 0) goto fail;
                if (!push(&order, g->n_nodes - 1)) goto oom;
                if (n_seen < SEEN_MAX) seen_v[n_seen] = v, seen_t[n_seen] = t, n_seen++;
            }
            n = cir_node_at(g, i);
            if (j < n->n_in) n->in[j] = t;
            else n->post[j - n->n_in].value = t;
        }
        if (!push(&order, i)) goto oom;
        /* its outputs that other kernels read: narrowed right after it */
        for (int j = 0; j < n->n_out; j++) {
            const int y = n->out[j];
            if (y < 0 || y >= nv0 || !ok[y] || !takes(g, n, cir_val(g, y))) continue;
            const int y16 = add_cast(g, y, half, narrow_label);
            if (y16 < 0) goto fail;
            if (!push(&order, g->n_nodes - 1)) goto oom;
            n = cir_node_at(g, i);
            h16[y] = y16;
        }
    }
    CUVIL_ASSERT(order.n == g->n_nodes);
    st = cir_nodes_reorder(g, order.at);
    goto out;
oom:
    st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory placing the 16-bit activations");
    goto out;
fail:
    st = g->ctx->status ? g->ctx->status : CUVIL_ERR_INTERNAL;
out:
    cuvil_free(ok);
    cuvil_free(wide_v);
    cuvil_free(h16);
    cuvil_free(order.at);
    return st;
}
