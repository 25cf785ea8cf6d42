/* memplan.c -- storage for every value: caller buffers for graph inputs/outputs, shared bytes
 * for alias ops, and one activation arena laid out from lifetimes (greedy by size, as
 * TFLite's and onnx2c's planners), verified before codegen. See cg_plan_memory().
 *
 * Time: placing a value looks only at the values live at the same time as it, found with a
 * segment tree over the lifetimes sorted by start, so a graph of bounded width plans in
 * O(n log n). A graph where very many values are live at once (a Concat of 100,000 inputs)
 * could make greedy placement quadratic; past a budget of such conflicts the remaining, smaller
 * values are placed one after another above the rest, which is linear and still correct. The
 * verification is a sweep over time with a segment tree over byte offsets: O(n log n). */
#include "codegen/codegen_int.h"
#include "ir/ops/ops.h"

#include <string.h>

#define ALIGN 64

typedef struct interval {
    int value;
    int first, last;      /* node indices, inclusive */
    size_t size, offset;
} interval;

static int by_size_desc(const void *a, const void *b) {
    const interval *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    if (x->first != y->first) return x->first - y->first;   /* deterministic */
    return x->value - y->value;
}

/* ===== Placement: which placed intervals overlap a lifetime ============================= */
/* A segment tree over the intervals sorted by `first`; a node holds the largest `last` among
 * the placed intervals of its range (-1: none placed). */
typedef struct lifetimes {
    int n, size;
    int *order;          /* leaf k -> index into iv, sorted by first */
    int *pos;            /* index into iv -> leaf */
    int *maxlast;        /* 2 * size nodes */
    const interval *iv;
} lifetimes;

typedef struct start_key {
    int first, idx;
} start_key;

static int by_first(const void *a, const void *b) {
    const start_key *x = a, *y = b;
    if (x->first != y->first) return x->first - y->first;
    return x->idx - y->idx;
}

static bool lifetimes_init(lifetimes *t, const interval *iv, int n) {
    memset(t, 0, sizeof *t);
    t->n = n;
    t->iv = iv;
    t->size = 1;
    while (t->size < n) t->size *= 2;
    t->order = cuvil_malloc(sizeof(int) * (size_t)(n + 1));
    t->pos = cuvil_malloc(sizeof(int) * (size_t)(n + 1));
    t->maxlast = cuvil_malloc(sizeof(int) * (size_t)(2 * t->size));
    start_key *keys = cuvil_malloc(sizeof(start_key) * (size_t)(n + 1));
    if (!t->order || !t->pos || !t->maxlast || !keys) {
        cuvil_free(keys);
        return false;
    }
    for (int i = 0; i < n; i++) keys[i] = (start_key){iv[i].first, i};
    qsort(keys, (size_t)n, sizeof *keys, by_first);
    for (int k = 0; k < n; k++) {
        t->order[k] = keys[k].idx;
        t->pos[keys[k].idx] = k;
    }
    cuvil_free(keys);
    for (int k = 0; k < 2 * t->size; k++) t->maxlast[k] = -1;
    return true;
}

static void lifetimes_free(lifetimes *t) {
    cuvil_free(t->order);
    cuvil_free(t->pos);
    cuvil_free(t->maxlast);
}

static void lifetimes_place(lifetimes *t, int i) {
    int k = t->size + t->pos[i], last = t->iv[i].last;
    for (; k >= 1; k /= 2) {
        if (t->maxlast[k] >= last) break;
        t->maxlast[k] = last;
    }
}

/* Appends to out[] the placed intervals with first <= b and last >= a (stops at cap; returns
 * the count, which may exceed cap to tell the caller). Iterative, with an explicit stack. */
static int lifetimes_query(const lifetimes *t, int a, int b, int *out, int cap) {
    typedef struct qframe {
        int k, lo, span;   /* tree node and its leaf range [lo, lo + span) */
    } qframe;
    qframe stack[96];   /* depth-first: at most one pending sibling per level */
    int found = 0, sp = 0;
    stack[sp++] = (qframe){1, 0, t->size};
    while (sp) {
        int k = stack[sp - 1].k, lo = stack[sp - 1].lo, span = stack[sp - 1].span;
        sp--;
        if (t->maxlast[k] < a) continue;   /* nothing placed here lives until a */
        if (lo >= t->n || t->iv[t->order[lo]].first > b) continue;   /* sorted: nothing here starts by b */
        if (span == 1) {
            if (found < cap) out[found] = t->order[lo];
            found++;
            continue;
        }
        stack[sp++] = (qframe){2 * k + 1, lo + span / 2, span / 2};
        stack[sp++] = (qframe){2 * k, lo, span / 2};
    }
    return found;
}

static int by_offset(const void *a, const void *b) {
    const interval *x = *(interval *const *)a, *y = *(interval *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Greedy by size: each interval at the lowest offset that fits between the already placed
 * intervals it overlaps in time. Returns the arena size, or false when out of memory. */
static bool place_all(interval *iv, int ni, size_t *arena_out) {
    lifetimes t;
    int *hits = cuvil_malloc(sizeof(int) * (size_t)(ni + 1));
    interval **live = cuvil_malloc(sizeof(interval *) * (size_t)(ni + 1));
    bool ok = hits && live && lifetimes_init(&t, iv, ni);
    size_t arena = 0;
    /* conflicts examined so far; past the budget, the rest go one after another (linear) */
    int64_t budget = 64 * (int64_t)ni + 1000000, spent = 0;
    for (int i = 0; ok && i < ni; i++) {
        if (spent > budget) {
            iv[i].offset = arena;
            arena += iv[i].size;
            continue;
        }
        int nl = lifetimes_query(&t, iv[i].first, iv[i].last, hits, ni);
        spent += nl;
        for (int j = 0; j < nl; j++) live[j] = &iv[hits[j]];
        qsort(live, (size_t)nl, sizeof *live, by_offset);
        size_t off = 0;
        for (int j = 0; j < nl; j++) {
            if (live[j]->offset >= off + iv[i].size) break;
            if (live[j]->offset + live[j]->size > off) off = live[j]->offset + live[j]->size;
        }
        iv[i].offset = off;
        if (off + iv[i].size > arena) arena = off + iv[i].size;
        lifetimes_place(&t, i);
    }
    if (hits && live) lifetimes_free(&t);
    cuvil_free(hits);
    cuvil_free(live);
    *arena_out = arena;
    return ok;
}

/* ===== Verification: no two intervals live at one time share a byte ===================== */
/* Sweep over time; a segment tree over the compressed byte coordinates counts how many live
 * intervals cover each elementary byte range (range add, range max). */
typedef struct cover {
    int size;
    int *mx, *lazy;
} cover;

static void cover_add(cover *c, int k, int lo, int hi, int a, int b, int v) {
    if (b <= lo || hi <= a) return;
    if (a <= lo && hi <= b) {
        c->mx[k] += v;
        c->lazy[k] += v;
        return;
    }
    int mid = (lo + hi) / 2;
    cover_add(c, 2 * k, lo, mid, a, b, v);
    cover_add(c, 2 * k + 1, mid, hi, a, b, v);
    c->mx[k] = c->lazy[k] + (c->mx[2 * k] > c->mx[2 * k + 1] ? c->mx[2 * k] : c->mx[2 * k + 1]);
}

static int cover_max(const cover *c, int k, int lo, int hi, int a, int b) {
    if (b <= lo || hi <= a) return 0;
    if (a <= lo && hi <= b) return c->mx[k];
    int mid = (lo + hi) / 2, l = cover_max(c, 2 * k, lo, mid, a, b), r = cover_max(c, 2 * k + 1, mid, hi, a, b);
    return c->lazy[k] + (l > r ? l : r);
}

static int cmp_size_t(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static int coord_of(const size_t *xs, int n, size_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (xs[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

typedef struct event {
    int time, kind, i;    /* kind 0: removal (at last + 1), 1: addition (at first) */
} event;

static int by_event(const void *a, const void *b) {
    const event *x = a, *y = b;
    if (x->time != y->time) return x->time - y->time;
    if (x->kind != y->kind) return x->kind - y->kind;
    return x->i - y->i;
}

/* Returns -1 when the plan is sound, else the index of an interval that overlaps another
 * (*other gets the second), or -2 when out of memory. */
static int verify_plan(const interval *iv, int ni, int *other) {
    size_t *xs = cuvil_malloc(sizeof(size_t) * (size_t)(2 * ni + 1));
    event *ev = cuvil_malloc(sizeof(event) * (size_t)(2 * ni + 1));
    cover c = {0};
    int bad = -1, nx = 0;
    if (!xs || !ev) {
        bad = -2;
        goto done;
    }
    for (int i = 0; i < ni; i++) {
        xs[nx++] = iv[i].offset;
        xs[nx++] = iv[i].offset + iv[i].size;
        ev[2 * i] = (event){iv[i].first, 1, i};
        ev[2 * i + 1] = (event){iv[i].last + 1, 0, i};
    }
    qsort(xs, (size_t)nx, sizeof *xs, cmp_size_t);
    int u = 0;
    for (int i = 0; i < nx; i++)
        if (!u || xs[i] != xs[u - 1]) xs[u++] = xs[i];
    nx = u;
    c.size = 1;
    while (c.size < nx) c.size *= 2;
    c.mx = cuvil_calloc((size_t)(2 * c.size), sizeof(int));
    c.lazy = cuvil_calloc((size_t)(2 * c.size), sizeof(int));
    if (!c.mx || !c.lazy) {
        bad = -2;
        goto done;
    }
    qsort(ev, (size_t)(2 * ni), sizeof *ev, by_event);
    for (int e = 0; e < 2 * ni && bad < 0; e++) {
        const interval *v = &iv[ev[e].i];
        int a = coord_of(xs, nx, v->offset), b = coord_of(xs, nx, v->offset + v->size);
        if (ev[e].kind == 0) {
            cover_add(&c, 1, 0, c.size, a, b, -1);
        } else if (cover_max(&c, 1, 0, c.size, a, b) > 0) {
            bad = ev[e].i;
            /* find the partner for the message (rare: only on a bug) */
            for (int j = 0; j < ni; j++)
                if (j != bad && iv[j].first <= v->last && v->first <= iv[j].last && iv[j].offset < v->offset + v->size &&
                    v->offset < iv[j].offset + iv[j].size)
                    *other = j;
        } else {
            cover_add(&c, 1, 0, c.size, a, b, 1);
        }
    }
done:
    cuvil_free(xs);
    cuvil_free(ev);
    cuvil_free(c.mx);
    cuvil_free(c.lazy);
    return bad;
}

/* A loop's body runs many times between its loop_begin (at b) and its loop node (at e): a value
 * the body reads or writes that lives before b (the body's parameters, made at b, among them)
 * lives until e, since every iteration reads it, and the loop node's outputs, written as the
 * iterations go, live from b. Repeated until nothing moves (loops inside loops). */
static void loop_lifetimes(cir_graph *g, const int *root, int *first, int *last) {
    for (bool moved = true; moved;) {
        moved = false;
        for (int e = 0; e < g->n_nodes; e++) {
            cir_node *ln = cir_node_at(g, e);
            if (ln->dead || ln->kind != CIR_OP_LOOP) continue;
            int b = op_loop_begin(g, ln);
            if (b < 0) continue;   /* (shape inference refused it) */
            for (int i = b + 1; i < e; i++) {
                cir_node *n = cir_node_at(g, i);
                const int nr = cir_node_n_reads(n);
                for (int j = 0; !n->dead && j < nr + n->n_out; j++) {
                    int v = j < nr ? cir_node_read(n, j) : n->out[j - nr];
                    if (v < 0) continue;
                    int r = root[v];
                    if (first[r] >= 0 && first[r] <= b && last[r] < e) {
                        last[r] = e;
                        moved = true;
                    }
                }
            }
            for (int j = 0; j < ln->n_out; j++) {
                int r = ln->out[j] >= 0 ? root[ln->out[j]] : -1;
                if (r >= 0 && first[r] > b) {
                    first[r] = b;
                    moved = true;
                }
            }
        }
    }
}

/* Lifetimes of roots: from the producing node to the last use of any alias. */
static void lifetimes_of_roots(cir_graph *g, const int *root, int *first, int *last) {
    for (int v = 0; v < g->n_values; v++) first[v] = last[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int j = 0; j < n->n_out; j++) {
            int v = n->out[j];
            if (v < 0) continue;
            int r = root[v];
            if (first[r] < 0) first[r] = i;
            if (last[r] < i) last[r] = i;
        }
        for (int j = 0; j < cir_node_n_reads(n); j++) {
            int v = cir_node_read(n, j);
            if (v < 0) continue;
            int r = root[v];
            if (last[r] < i) last[r] = i;
        }
    }
    loop_lifetimes(g, root, first, last);
}

static size_t plan_nbytes(const cir_graph *g, int v) {
    return cir_nbytes(cir_val((cir_graph *)g, v));
}

/* The root of v in the forest `up` (up[v] == v at a root), halving the path as it goes. */
static int find_root(int *up, int v) {
    while (up[v] != v) {
        up[v] = up[up[v]];
        v = up[v];
    }
    return v;
}

/* A conv (or inverted-residual block) y = act(conv(x) + r) whose r is not used after it writes
 * y over r's bytes (the kernels take residual == y, cuvil_rt.h): y's root becomes r's. One
 * tensor is then read and written where two were, and stays in cache along the residual chain
 * of a ResNet stage (in ResNet-50's layer1 each bottleneck's last conv read a 3.2 MB residual
 * and wrote a 3.2 MB output elsewhere). Only where r is the arena's (not a caller's buffer),
 * of y's size and type, and not also an input of the node (a kernel that reads x in bands
 * would see rows it already wrote). root[] is a forest here, flattened after; last[] of a
 * root that takes an output grows by that output's. Returns whether any output moved. */
static bool residual_in_place(cir_graph *g, int *root, int *last) {
    bool moved = false;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        const int res_id = n->dead ? -1 : cir_node_residual(n);
        if (res_id < 0 || (n->kind != CIR_OP_CONV && n->kind != CIR_OP_MBBLOCK) || n->n_out != 1 || n->out[0] < 0 ||
            n->half != CIR_UNDEF || !cir_post_kernel_form(n))
            continue;
        const int y = n->out[0], r = find_root(root, res_id);
        const cir_value *yv = cir_val(g, y), *rv = cir_val(g, r), *res = cir_val(g, res_id);
        if (root[y] != y || r == y || yv->kind != CIR_VAL_ACT || yv->output_index >= 0 || rv->kind != CIR_VAL_ACT ||
            rv->output_index >= 0 || rv->producer < 0 || last[r] != i || yv->dtype != CIR_F32 ||
            res->dtype != CIR_F32 || rv->dtype != CIR_F32 || plan_nbytes(g, y) != plan_nbytes(g, res_id) ||
            plan_nbytes(g, r) != plan_nbytes(g, y))
            continue;
        bool read = false;
        for (int j = 0; j < n->n_in; j++) read |= n->in[j] >= 0 && find_root(root, n->in[j]) == r;
        if (read) continue;
        root[y] = r;
        if (last[y] > last[r]) last[r] = last[y];
        moved = true;
    }
    if (moved)
        for (int v = 0; v < g->n_values; v++) root[v] = find_root(root, v);
    return moved;
}

/* A Concat along its outermost dim (nothing but 1s before the axis: NCHW channels at batch 1,
 * a detector's rows of boxes) whose inputs are each written by a node of the main graph, used
 * by this Concat once, neither a graph input nor a graph output, and at offsets of whole cache
 * lines: each input is placed in place, in its slice of the output, and the Concat has
 * nothing to copy (plan->aliased). up[x] = the Concat's output, upoff[x] = x's byte offset in it;
 * resolved into root[] and off[] by the caller. Every kernel writes exactly its output's bytes
 * (a graph output is a caller's buffer of that size), so slices side by side do not touch. */
static void concat_in_place(cir_graph *g, cg_plan *plan, const int *root, int *up, int64_t *upoff) {
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || n->kind != CIR_OP_CONCAT || n->n_in < 2 || n->n_out != 1 || n->out[0] < 0 || n->n_rt ||
            n->region != 0 || n->half != CIR_UNDEF || cg_node_symbolic(g, n))
            continue;
        const cir_value *y = cir_val(g, n->out[0]);
        if (y->kind != CIR_VAL_ACT || root[y->id] != y->id || !cir_value_fixed(y)) continue;
        int64_t chunk[64], *ch = n->n_in <= 64 ? chunk : cuvil_malloc(sizeof(int64_t) * (size_t)n->n_in);
        if (!ch) continue;   /* (no room to decide: the Concat copies, as before) */
        bool ok = op_concat_layout(g, n, ch) == 1;
        int64_t off = 0;
        int taken = 0;   /* inputs marked up[x] = -2 while deciding: an input met twice finds its mark */
        for (int j = 0; ok && j < n->n_in; j++) {
            const int x = n->in[j];
            const cir_value *xv = x >= 0 ? cir_val(g, x) : NULL;
            const cir_node *pn = xv && xv->producer >= 0 ? cir_node_at(g, xv->producer) : NULL;
            ok = xv && pn && xv->kind == CIR_VAL_ACT && xv->output_index < 0 && xv->dtype == y->dtype &&
                 root[x] == x && up[x] == -1 && !pn->dead && pn->region == 0 && pn->then_region == 0 &&
                 pn->else_region == 0 && pn->half == CIR_UNDEF && off % ALIGN == 0 &&
                 (int64_t)cir_nbytes(xv) == ch[j];
            if (ok) up[x] = -2, taken++;
            off += ch[j];
        }
        ok = ok && off == (int64_t)cir_nbytes(y);
        off = 0;
        for (int j = 0; j < taken; j++) {   /* (the inputs marked are the first `taken`, each once) */
            up[n->in[j]] = ok ? y->id : -1;
            upoff[n->in[j]] = ok ? off : 0;
            off += ch[j];
        }
        if (ok) plan->aliased[i] = true;
        if (ch != chunk) cuvil_free(ch);
    }
}

cuvil_status cg_plan_memory(cir_graph *g, cg_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int nv = g->n_values, nn = g->n_nodes;
    plan->loc = cuvil_calloc((size_t)nv + 1, sizeof *plan->loc);
    plan->aliased = cuvil_calloc((size_t)nn + 1, sizeof *plan->aliased);
    int *root = cuvil_malloc(sizeof(int) * ((size_t)nv + 1));
    int *first = cuvil_malloc(sizeof(int) * ((size_t)nv + 1)), *last = cuvil_malloc(sizeof(int) * ((size_t)nv + 1));
    int *up = cuvil_malloc(sizeof(int) * ((size_t)nv + 1));
    int64_t *upoff = cuvil_calloc((size_t)nv + 1, sizeof *upoff), *off = cuvil_calloc((size_t)nv + 1, sizeof *off);
    interval *iv = cuvil_calloc((size_t)nv + 1, sizeof *iv);
    cuvil_status st = CUVIL_OK;
    if (!plan->loc || !plan->aliased || !root || !first || !last || !up || !upoff || !off || !iv) {
        st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory planning memory");
        goto done;
    }
    for (int v = 0; v < nv; v++) root[v] = v;
    /* alias ops share their input's bytes unless their output is a caller's buffer */
    for (int i = 0; i < nn; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || !(n->def->flags & CIR_OPF_ALIAS)) continue;
        cir_value *y = cir_out(g, n, 0);
        if (y->output_index >= 0) continue;
        plan->aliased[i] = true;
        root[y->id] = root[n->in[0]];
    }
    /* Concats whose inputs are written in their slices of the output: each value's root and
     * offset through the chain of Concats that hold it (a Concat's output may be another's input) */
    for (int v = 0; v < nv; v++) up[v] = -1;
    concat_in_place(g, plan, root, up, upoff);
    for (int v = 0; v < nv; v++) {
        int r = root[v];
        int64_t o = 0;
        for (int hops = 0; up[r] >= 0 && hops <= nn; hops++) {
            o += upoff[r];
            r = up[r];
        }
        root[v] = r;
        off[v] = o;
    }
    lifetimes_of_roots(g, root, first, last);
    /* a conv that adds a residual writes over it where that is the residual's last use */
    if (residual_in_place(g, root, last)) lifetimes_of_roots(g, root, first, last);
    int ni = 0;
    for (int v = 0; v < nv; v++) {
        cir_value *val = cir_val(g, v);
        if (val->kind != CIR_VAL_ACT || root[v] != v || val->output_index >= 0 || first[v] < 0) continue;
        iv[ni].value = v;
        iv[ni].first = first[v];
        iv[ni].last = last[v];
        size_t nb = cir_nbytes(val);
        iv[ni].size = cuvil_align_up(nb ? nb : 1, ALIGN);
        ni++;
    }
    qsort(iv, (size_t)ni, sizeof *iv, by_size_desc);
    size_t arena = 0;
    if (!place_all(iv, ni, &arena)) {
        st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory planning memory");
        goto done;
    }
    int other = -1, bad = verify_plan(iv, ni, &other);
    if (bad == -2) st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory verifying the memory plan");
    else if (bad >= 0)
        st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "memory plan: '%s' and '%s' overlap", cir_val(g, iv[bad].value)->name,
                       other >= 0 ? cir_val(g, iv[other].value)->name : "?");
    if (st) goto done;
    plan->arena_bytes = arena;
    for (int i = 0; i < ni; i++) plan->loc[iv[i].value] = (cg_loc){CG_LOC_ARENA, (int64_t)iv[i].offset, 0};
    for (int i = 0; i < g->n_inputs; i++) plan->loc[g->inputs[i]] = (cg_loc){CG_LOC_INPUT, i, 0};
    for (int v = 0; v < nv; v++) {
        cir_value *val = cir_val(g, v);
        if (val->kind == CIR_VAL_CONST) plan->loc[v] = (cg_loc){CG_LOC_CONST, v, 0};
        else if (val->kind == CIR_VAL_ACT && val->output_index >= 0) plan->loc[v] = (cg_loc){CG_LOC_OUTPUT, val->output_index, 0};
    }
    for (int v = 0; v < nv; v++)
        if (root[v] != v) {
            plan->loc[v] = plan->loc[root[v]];
            if (plan->loc[v].kind == CG_LOC_ARENA) plan->loc[v].index += off[v];
            else if (plan->loc[v].kind == CG_LOC_OUTPUT) plan->loc[v].off += off[v];
        }
done:
    cuvil_free(root);
    cuvil_free(first);
    cuvil_free(last);
    cuvil_free(up);
    cuvil_free(upoff);
    cuvil_free(off);
    cuvil_free(iv);
    if (st) cg_plan_free(plan);
    return st;
}

void cg_plan_free(cg_plan *plan) {
    cuvil_free(plan->loc);
    cuvil_free(plan->aliased);
    memset(plan, 0, sizeof *plan);
}
