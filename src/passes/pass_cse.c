/* pass_cse.c -- common-subexpression elimination: constants of one dtype, shape and bytes
 * become one, then a node that computes what an earlier node computes (the same op, the same
 * attributes, the same inputs) is replaced by it. Add, Mul, And, Or, Xor and Equal give the same
 * bits whichever operand comes first, so their two inputs are compared in either order; Max and
 * Min do not (max(-0, +0) is the second operand), nor anything else. No CIR op has a side effect
 * or draws random numbers (the ONNX frontend makes Dropout an identity), so every node may merge.
 *
 * It runs twice (passes.inc): before const_fold, so that identical chains over identical
 * weights (TorchScript's GPT-2 has one causal mask per layer, each computed from its own copy
 * of the same buffer) fold once, and after the simplifications, which make more nodes alike.
 *
 * With symbolic dims no constant depends on a symbol (what does is an activation or a value
 * known as expressions, cir_value.sval), so constants merge freely. */
#include "passes/passes_int.h"

#include <string.h>

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_bytes(uint64_t h, const unsigned char *b, size_t n) {
    uint64_t x = 0xcbf29ce484222325ull ^ h;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        x = (x ^ w) * 0x100000001b3ull;
        x ^= x >> 29;
    }
    for (; i < n; i++) x = (x ^ b[i]) * 0x100000001b3ull;
    return mix(h, x);
}

/* A constant's bytes, sampled: all of a small one, 3 pieces of 1 KB of a large one (GPT-2's
 * weights are 500 MB, twice a compile). Equal keys are then compared in full. */
static uint64_t hash_data(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    enum { PIECE = 1024 };
    if (n <= 3 * PIECE) return hash_bytes(h, b, n);
    h = hash_bytes(h, b, PIECE);
    h = hash_bytes(h, b + n / 2 - PIECE / 2, PIECE);
    return hash_bytes(h, b + n - PIECE, PIECE);
}

/* An open-addressing table of ids keyed by 64-bit hashes; a slot holds id + 1, 0 when free. */
typedef struct table {
    int *slot;
    uint64_t *key;
    size_t mask;
} table;

static bool table_init(table *t, size_t want) {
    size_t cap = 16;
    while (cap < 2 * want + 2) cap *= 2;
    t->slot = cuvil_calloc(cap, sizeof(int));
    t->key = cuvil_calloc(cap, sizeof(uint64_t));
    t->mask = cap - 1;
    return t->slot && t->key;
}

static void table_free(table *t) {
    cuvil_free(t->slot);
    cuvil_free(t->key);
}

/* ===== Constants ============================================================================ */
static bool same_const(const cir_value *a, const cir_value *b) {
    if (a->dtype != b->dtype || !cir_same_dims(a, b)) return false;
    size_t n = cir_nbytes(a);
    return a->data == b->data || !n || !memcmp(a->data, b->data, n);
}

/* Makes each constant a live node reads the first one of its dtype, dims and bytes. */
static cuvil_status merge_consts(cuvil_rewrite *rw) {
    cir_graph *g = rw->g;
    uint8_t *read = cuvil_calloc((size_t)g->n_values + 1, 1);
    table t = {0};
    cuvil_status st = CUVIL_OK;
    if (!read || !table_init(&t, (size_t)g->n_values)) {
        cuvil_free(read);
        table_free(&t);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int k = 0; k < cir_node_n_reads(n); k++)
            if (cir_node_read(n, k) >= 0) read[cir_node_read(n, k)] = 1;
    }
    for (int v = 0; v < g->n_values && !st; v++) {
        cir_value *c = cir_val(g, v);
        if (!read[v] || !cir_is_const(c) || c->ndim < 0) continue;
        uint64_t h = mix((uint64_t)c->dtype, (uint64_t)c->ndim);
        for (int d = 0; d < c->ndim; d++) h = mix(h, (uint64_t)c->dims[d]);
        h = hash_data(h, c->data, cir_nbytes(c));
        for (size_t s = h & t.mask;; s = (s + 1) & t.mask) {
            if (!t.slot[s]) {
                t.slot[s] = v + 1;
                t.key[s] = h;
                break;
            }
            if (t.key[s] == h && same_const(cir_val(g, t.slot[s] - 1), c)) {
                rw->rep[v] = t.slot[s] - 1;
                rw->n_changed++;
                break;
            }
        }
    }
    cuvil_free(read);
    table_free(&t);
    return st;
}

/* ===== Nodes ================================================================================ */
static bool commutes(cir_op_kind k) {
    return k == CIR_OP_ADD || k == CIR_OP_MUL || k == CIR_OP_AND || k == CIR_OP_OR || k == CIR_OP_XOR ||
           k == CIR_OP_EQUAL;
}

/* Whether a node may merge at all: what the lowering made or chose stays as it is. */
static bool mergeable(const cir_node *n) {
    return !n->dead && n->n_out >= 1 && n->low.packed < 0 && !n->low.params && !n->low.note && n->kind != CIR_OP_MBBLOCK &&
           n->kind != CIR_OP_ATTENTION && !n->then_region && n->kind != CIR_OP_LOOP_BEGIN && n->kind != CIR_OP_LOOP &&
           n->kind != CIR_OP_IF &&   /* (control flow: each owns its regions) */
           n->kind != CIR_OP_OPT_ELEM;   /* (an optional output's: it says whether the output holds one) */
}

static const cir_attr *find_attr(const cir_node *n, const cir_attr_spec *spec) {
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].spec == spec) return &n->attrs[i];
    return NULL;
}

/* The same attributes set, with the same values (floats bit for bit). */
static bool same_attrs(const cir_node *a, const cir_node *b) {
    if (a->n_attrs != b->n_attrs) return false;
    for (int i = 0; i < a->n_attrs; i++) {
        const cir_attr *x = &a->attrs[i], *y = find_attr(b, x->spec);
        if (!y || x->i != y->i || memcmp(&x->f, &y->f, sizeof x->f) || x->n != y->n) return false;
        if (x->n > 0 && x->ints && (!y->ints || memcmp(x->ints, y->ints, sizeof(int64_t) * (size_t)x->n))) return false;
        if (x->n > 0 && x->floats && (!y->floats || memcmp(x->floats, y->floats, sizeof(float) * (size_t)x->n)))
            return false;
        if (!x->ints != !y->ints || !x->floats != !y->floats) return false;
    }
    return true;
}

static bool same_inputs(const cir_node *a, const cir_node *b) {
    if (a->n_in != b->n_in) return false;
    if (!memcmp(a->in, b->in, sizeof(int) * (size_t)a->n_in)) return true;
    return commutes(a->kind) && a->n_in == 2 && a->in[0] == b->in[1] && a->in[1] == b->in[0];
}

static bool same_node(cir_graph *g, const cir_node *a, const cir_node *b) {
    /* (the epilogues compared as bytes: every field of a step is set, and a float's bits) */
    if (a->kind != b->kind || a->n_out != b->n_out || a->n_post != b->n_post || a->half != b->half ||
        a->low.layout != b->low.layout || memcmp(a->post, b->post, sizeof a->post[0] * (size_t)a->n_post) ||
        !same_inputs(a, b) || !same_attrs(a, b))
        return false;
    for (int k = 0; k < a->n_out; k++) {   /* the same types and shapes follow; checked all the same */
        if ((a->out[k] < 0) != (b->out[k] < 0)) return false;
        if (a->out[k] < 0) continue;
        const cir_value *x = cir_val(g, a->out[k]), *y = cir_val(g, b->out[k]);
        if (x->dtype != y->dtype || !cir_same_dims(x, y)) return false;
    }
    return true;
}

static uint64_t node_hash(const cir_node *n) {
    uint64_t h = mix((uint64_t)n->kind, (uint64_t)n->n_in);
    if (commutes(n->kind) && n->n_in == 2) {   /* the pair, in either order */
        int a = n->in[0] < n->in[1] ? n->in[0] : n->in[1], b = n->in[0] < n->in[1] ? n->in[1] : n->in[0];
        h = mix(mix(h, (uint64_t)(int64_t)a), (uint64_t)(int64_t)b);
    } else {
        for (int k = 0; k < n->n_in; k++) h = mix(h, (uint64_t)(int64_t)n->in[k]);
    }
    for (int k = 0; k < n->n_post; k++) h = mix(h, (uint64_t)n->post[k].kind * 1000003u + (uint64_t)(int64_t)n->post[k].value);
    for (int i = 0; i < n->n_attrs; i++) h = mix(h, (uint64_t)n->attrs[i].i);
    return h;
}

cuvil_status cuvil_pass_cse(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cuvil_rewrite rw;
    cuvil_status s = cuvil_rewrite_begin(g, &rw);
    if (s) return s;
    table t = {0};
    if ((s = merge_consts(&rw))) goto done;
    if (!table_init(&t, (size_t)g->n_nodes)) {
        s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        cuvil_rewrite_inputs(&rw, n);
        if (!mergeable(n)) continue;
        uint64_t h = node_hash(n);
        for (size_t sl = h & t.mask;; sl = (sl + 1) & t.mask) {
            if (!t.slot[sl]) {
                t.slot[sl] = i + 1;
                t.key[sl] = h;
                break;
            }
            cir_node *keep = cir_node_at(g, t.slot[sl] - 1);
            if (t.key[sl] == h && !keep->dead && same_node(g, keep, n) && cuvil_rewrite_can_merge(&rw, n, keep) &&
                cir_region_within(g, n->region, keep->region)) {   /* (keep runs wherever n does: passes_int.h) */
                cuvil_rewrite_merge(&rw, n, keep);
                break;
            }
        }
    }
done:
    table_free(&t);
    cuvil_rewrite_end(&rw);
    return s;
}
