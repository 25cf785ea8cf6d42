/* op_loop.c -- loop_begin and loop: ONNX's Loop and Scan. The body is a region of the graph
 * (cir_node.then_region of both nodes, g->regions[r].loop) whose nodes lie between them in the
 * node list. loop_begin takes (trip count, condition, the N initial states, the S scanned
 * inputs) and gives the body's parameters (iteration number, condition, N states, S scanned
 * elements); codegen.c runs the body once per iteration after it, each parameter in its own
 * bytes for the whole loop. The loop node takes those 2 + N + S inputs, the 2 + N + S
 * parameters and then the body's results (condition, N states, K scan elements) (op_loop_at);
 * after each iteration the states carry into the parameters and each scan element goes to its
 * place in its output, and the node gives the N final states and the K scan outputs. A
 * state's shape is the same in every iteration, and a scan element's: where only the run
 * knows a dim, it checks (Cuvil refuses a shape that changes); a Loop's count is a size the
 * run finds, at most its trip count's bound; a Scan's is its inputs' scanned dim. Scan-8's
 * batch dim is taken when it is 1. */
#include "ir/ops/ops.h"

static const cir_attr_spec loop_attrs[] = {
    {"n_state", CIR_ATTR_INT, 0, 0, NULL, true},
    {"n_scan", CIR_ATTR_INT, 0, 0, NULL, false},   /* S, the scanned inputs (Scan) */
    {"scan", CIR_ATTR_INT, 0, 0, NULL, false},     /* 1: a Scan (no trip count nor condition) */
    {"batch", CIR_ATTR_INT, 0, 0, NULL, false},    /* 1: Scan-8's batch dim 0, of size 1, around everything */
    {"scan_in_axes", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"scan_in_reverse", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"scan_out_axes", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"scan_out_reverse", CIR_ATTR_INTS, 0, 0, NULL, false},
    /* per scan output: nonzero, it collects into a sequence (SequenceMap; a state appended to,
     * op_loop_fold_appends), whose elements' type must be seq_dtype[k] where that is nonzero */
    {"seq_out", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"seq_dtype", CIR_ATTR_INTS, 0, 0, NULL, false},
    CIR_ATTR_END,
};

bool op_loop_at(const cir_node *n, op_loop *l) {
    int64_t ns = cir_attr_int(n, "n_state"), sc = cir_attr_int(n, "n_scan");
    if (ns < 0 || sc < 0 || ns > (1 << 20) || sc > (1 << 20)) return false;
    l->n = (int)ns;
    l->s = (int)sc;
    l->p = 2 + l->n + l->s;
    l->scan = cir_attr_int(n, "scan") != 0;
    l->batch = cir_attr_int(n, "batch") != 0;
    if (n->kind == CIR_OP_LOOP_BEGIN) {
        l->k = 0;
        return n->n_in == l->p && n->n_out == l->p;
    }
    l->k = n->n_out - l->n;
    return l->k >= 0 && n->n_in == 2 * l->p + 1 + l->n + l->k;
}

bool op_loop_seq_out(const cir_node *n, int k) {
    const int64_t *f;
    return cir_attr_ints(n, "seq_out", &f) > k && f[k] != 0;
}

/* n's attribute `name` set to ints (cnt of them, in g's arena), replacing it where set. */
static cuvil_status set_ints(cir_graph *g, cir_node *n, const char *name, const int64_t *v, int cnt) {
    int64_t *c = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(cnt + 1));
    if (!c) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    if (cnt) memcpy(c, v, sizeof(int64_t) * (size_t)cnt);
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].spec->name, name)) {
            n->attrs[i].ints = c;
            n->attrs[i].n = cnt;
            return CUVIL_OK;
        }
    cuvil_attr a = {.name = name, .type = CUVIL_ATTR_INTS, .ints = c, .n = cnt};
    return cir_node_set_attr(g, n, &a);
}

static void set_int(cir_node *n, const char *name, int64_t v) {
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].spec->name, name)) n->attrs[i].i = v;
}

/* The node that writes value v before node `before` (-1: none, or v is an input). */
static int writer_of(const cir_graph *g, int v, int before) {
    for (int i = before - 1; i >= 0; i--) {
        const cir_node *x = cir_node_at(g, i);
        for (int j = 0; !x->dead && j < x->n_out; j++)
            if (x->out[j] == v) return i;
    }
    return -1;
}

/* How many times nodes b+1 .. e-1 (not dead) read v. *at: the last reader. */
static int readers(const cir_graph *g, int v, int b, int e, int *at) {
    int c = 0;
    for (int i = b + 1; i < e; i++) {
        const cir_node *x = cir_node_at(g, i);
        for (int j = 0; !x->dead && j < cir_node_n_reads(x); j++)
            if (cir_node_read(x, j) == v) c++, *at = i;
    }
    return c;
}

cuvil_status op_loop_fold_appends(cir_graph *g, cir_node *ln) {
    op_loop l;
    int bi = op_loop_begin(g, ln);
    if (!op_loop_at(ln, &l) || l.scan || bi < 0) return CUVIL_OK;
    for (int i = 0; i < l.n; i++) {
        int init = ln->in[2 + i], p = ln->in[l.p + 2 + i], o = ln->in[2 * l.p + 1 + i], w = init >= 0 ? writer_of(g, init, bi) : -1;
        int at = -1;
        bool empty = w >= 0 && cir_node_at(g, w)->kind == CIR_OP_SEQ_EMPTY;
        if (init < 0 || p < 0 || o < 0 || readers(g, p, bi, ln->id, &at) != 1) continue;
        cir_node *x = cir_node_at(g, at);
        int uses_o = 0;
        for (int j = 0; j < ln->n_in; j++) uses_o += ln->in[j] == o;
        if (x->kind != CIR_OP_SEQ_INSERT || x->n_in < 2 || (x->n_in > 2 && x->in[2] >= 0) || x->in[0] != p ||
            x->in[1] == p || x->in[1] < 0 || x->out[0] != o || x->region != ln->then_region || uses_o != 1 ||
            readers(g, o, bi, ln->id, &at) != 0)
            continue;
        /* state i: appended to once per iteration, read by nothing else: its start, then the
         * sequence of what it appends (a scan output collecting into a sequence; from a start
         * that is not SequenceEmpty's, the two joined after the loop) */
        int appended = ln->out[i];
        if (!empty && appended >= 0) {
            char nm[200];
            snprintf(nm, sizeof nm, "%.120s/appended", ln->name);
            if ((appended = cir_value_add(g, nm, CIR_VAL_ACT)) < 0) return g->ctx->status;
        }
        cir_node *b = cir_node_at(g, bi);
        int np = l.p - 1, nk = l.k + 1, total = 2 * np + 1 + (l.n - 1) + nk;
        int *bin = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(np + 1));
        int *bout = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(np + 1));
        int *lin = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(total + 1));
        int *lout = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(ln->n_out + 1));
        int64_t *flags = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(2 * nk));
        if (!bin || !bout || !lin || !lout || !flags) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (int j = 0, c = 0; j < l.p; j++)
            if (j != 2 + i) bin[c] = b->in[j], bout[c++] = b->out[j];
        int c = 0;
        for (int j = 0; j < l.p; j++)
            if (j != 2 + i) lin[c++] = ln->in[j];
        for (int j = 0; j < l.p; j++)
            if (j != 2 + i) lin[c++] = ln->in[l.p + j];
        for (int j = 0; j < 1 + l.n + l.k; j++)
            if (j != 1 + i) lin[c++] = ln->in[2 * l.p + j];
        lin[c++] = x->in[1];
        for (int j = 0, d = 0; j < ln->n_out; j++)
            if (j != i) lout[d++] = ln->out[j];
        lout[ln->n_out - 1] = appended;
        int final = ln->out[i];
        for (int k = 0; k < nk; k++) {
            const int64_t *dt;
            flags[k] = k < l.k ? op_loop_seq_out(ln, k) : 1;
            flags[nk + k] = k < l.k ? (cir_attr_ints(ln, "seq_dtype", &dt) > k ? dt[k] : 0)
                                    : empty ? cir_attr_int(cir_node_at(g, w), "dtype") : 0;
        }
        b->in = bin, b->out = bout, b->n_in = b->n_out = np;
        ln->in = lin, ln->out = lout, ln->n_in = c;
        set_int(b, "n_state", l.n - 1);
        set_int(ln, "n_state", l.n - 1);
        cuvil_status s = set_ints(g, ln, "seq_out", flags, nk);
        if (!s) s = set_ints(g, ln, "seq_dtype", flags + nk, nk);
        if (s) return s;
        x->dead = true;   /* (its input, the state's parameter, is no longer one) */
        int ab[2] = {init, appended};
        if (!empty && final >= 0 && cir_node_add(g, CIR_OP_SEQ_JOIN, ln->name, ln->src_op, 2, ab, 1, &final) < 0)
            return g->ctx->status;
        return op_loop_fold_appends(g, ln);   /* the next state, with the counts as they now are */
    }
    return CUVIL_OK;
}

bool op_loop_reverse(const cir_node *n, bool out, int i) {
    const int64_t *r;
    int nr = cir_attr_ints(n, out ? "scan_out_reverse" : "scan_in_reverse", &r);
    return nr > i && r[i] != 0;
}

/* Axis i of scan_out_axes or scan_in_axes (default 0), normalised against rank (negative
 * counts from the end). */
cuvil_status op_loop_axis(cir_graph *g, cir_node *n, bool out, int i, int rank, int *axis) {
    const char *name = out ? "scan_out_axes" : "scan_in_axes";
    const int64_t *ax;
    int na = cir_attr_ints(n, name, &ax);
    char what[64];
    snprintf(what, sizeof what, "%s[%d]", name, i);
    return op_axis(g, n, na > i ? ax[i] : 0, rank, what, axis);
}

static cuvil_status check_region(cir_graph *g, cir_node *n, op_loop *l) {
    if (!op_loop_at(n, l))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "its %d inputs and %d outputs do not match its counts (n_state %lld, n_scan "
                            "%lld)", n->n_in, n->n_out, (long long)cir_attr_int(n, "n_state"), (long long)cir_attr_int(n, "n_scan"));
    int r = n->then_region;
    if (r <= 0 || r >= g->n_regions || !g->regions[r].loop)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "a loop without its body (loops come from ONNX's Loop and Scan, "
                            "with their bodies; a graph built node by node has none)");
    return CUVIL_OK;
}

/* Whether v's first dim is 1 (Scan-8's batch), fixed. */
static cuvil_status batch_one(cir_graph *g, cir_node *n, const cir_value *v) {
    if (v->ndim < 1 || v->dx[0] || v->dims[0] != 1)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has a batch dim (dim 0) other than 1; Cuvil takes "
                            "opset 8's Scan with one batch only (opset 9's Scan has none)", v->name);
    return CUVIL_OK;
}

/* The largest trip count value m can hold: a constant, an expression of the symbols, a --dim
 * naming it; -1 when nothing bounds it. */
static int64_t trip_bound(cir_graph *g, const cir_value *m) {
    if (!m) return -1;
    if (m->producer >= 0 && cir_node_at(g, m->producer)->kind == CIR_OP_SEQ_LENGTH &&
        (!m->sval || !m->sval[0]))   /* a sequence's length: at most its bound */
        return cir_in(g, cir_node_at(g, m->producer), 0)->seq_n;
    if (cir_is_const(m)) {
        int64_t v = ((const int64_t *)m->data)[0];
        return v > 0 ? v : 0;
    }
    int64_t lo, hi;
    if (m->sval && m->sval[0]) return m->sval[0]->hi > 0 ? m->sval[0]->hi : 0;
    if (cir_value_bound(g, m->name, &lo, &hi)) return hi > 0 ? hi : 0;
    return -1;
}

static cuvil_status begin_infer(cir_graph *g, cir_node *n) {
    op_loop l;
    cuvil_status s = check_region(g, n, &l);
    if (s) return s;
    if (!l.scan) {
        cir_value *m = cir_in(g, n, 0), *c = cir_in(g, n, 1);
        if (!m && !c)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "has neither a trip count nor a condition: it would never end");
        char sh[160];
        if (m && (m->dtype != CIR_I64 || !cir_value_fixed(m) || cir_numel(m) != 1))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "its trip count '%s' is %s %s; ONNX's Loop takes one int64", m->name,
                                cir_dtype_name(m->dtype), cir_shape_str(g, m, sh, sizeof sh));
        if (c && (c->dtype != CIR_BOOL || !cir_value_fixed(c) || cir_numel(c) != 1))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "its condition '%s' is %s %s; ONNX's Loop takes one bool", c->name,
                                cir_dtype_name(c->dtype), cir_shape_str(g, c, sh, sizeof sh));
        if (n->out[0] >= 0) {
            cir_value *it = cir_out(g, n, 0);
            cir_set_shape(it, CIR_I64, 0, NULL);
            /* the iteration number as a symbol in 0 .. the trip count's bound - 1 (the loop
             * writes it into D[] and fails an iteration past it: codegen.c's open_loop), so
             * that sizes the body computes from it (x[i:i+1], Range(0, i + 1)) are bounded */
            int64_t hi = trip_bound(g, m);
            if (hi > 0) {
                const cir_dim *x = cir_rt_found(g, n, 0, hi - 1, "iteration");
                const cir_dim **sv = x ? cuvil_arena_alloc(&g->arena, sizeof *sv) : NULL;
                if (!x) return g->ctx->status;
                if (!sv) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
                sv[0] = x;
                it->sval = sv;
            }
        }
        if (n->out[1] >= 0) cir_set_shape(cir_out(g, n, 1), CIR_BOOL, 0, NULL);
    }
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int i = 0; i < l.n; i++) {
        cir_value *x = cir_in(g, n, 2 + i);
        if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "its state %d has no initial value", i);
        if (l.batch && (s = batch_one(g, n, x))) return s;
        if (n->out[2 + i] < 0) continue;
        int b = l.batch ? 1 : 0;
        for (int d = b; d < x->ndim; d++)
            if (!(dx[d - b] = cir_dimx(g, x, d))) return cir_dim_err(g, n, "a state's shape");
        cir_set_shape_x(cir_out(g, n, 2 + i), x->dtype, x->ndim - b, dx);
    }
    const cir_dim *count = NULL;
    for (int j = 0; j < l.s; j++) {
        cir_value *x = cir_in(g, n, 2 + l.n + j);
        if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "its scanned input %d is missing", j);
        if (l.batch && (s = batch_one(g, n, x))) return s;
        int b = l.batch ? 1 : 0, axis;
        if (x->ndim < 1 + b)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "its scanned input '%s' has no dim to scan", x->name);
        if (l.batch) axis = 1;
        else if ((s = op_loop_axis(g, n, false, j, x->ndim, &axis))) return s;
        const cir_dim *c = cir_dimx(g, x, axis);
        if (!c) return cir_dim_err(g, n, "a scanned dim");
        if (count && (s = cir_require_eq(g, n, count, c, "the scanned dims of its inputs"))) return s;
        count = count ? count : c;
        int r = 0;
        for (int d = b; d < x->ndim; d++)
            if (d != axis && !(dx[r++] = cir_dimx(g, x, d))) return cir_dim_err(g, n, "a scanned element's shape");
        if (n->out[2 + l.n + j] >= 0) cir_set_shape_x(cir_out(g, n, 2 + l.n + j), x->dtype, r, dx);
    }
    if (l.scan && !l.s) return cir_node_err(g, n, CUVIL_ERR_MODEL, "scans no input (num_scan_inputs is 0)");
    return CUVIL_OK;
}

int op_loop_begin(const cir_graph *g, const cir_node *n) {
    for (int i = n->id - 1; i >= 0; i--) {
        const cir_node *b = cir_node_at(g, i);
        if (!b->dead && b->kind == CIR_OP_LOOP_BEGIN && b->then_region == n->then_region) return i;
    }
    return -1;
}

/* Whether dim e reads a size the run finds or reads inside the body (nodes between b and e),
 * or the iteration number (b's). */
static bool body_size(const cir_graph *g, const cir_dim *e, int b, int end) {
    for (int i = b; i < end; i++) {
        const cir_node *x = cir_node_at(g, i);
        for (int r = x->rt_first; !x->dead && r < x->rt_first + x->n_rt; r++)
            if (cir_dim_uses(e, g->rt_syms[r])) return true;
    }
    return false;
}

/* Whether a Loop's condition is true in every iteration: no initial condition or a constant
 * true one, and the body gives a constant true or passes its condition parameter through.
 * (Without a condition input ONNX's text calls the body's condition ignored; ONNX's reference
 * implementation and ONNX Runtime stop on it, and so does Cuvil: codegen.c's open_loop checks
 * the condition parameter every iteration.) */
static bool const_true(const cir_value *v) {
    return v && cir_is_const(v) && v->dtype == CIR_BOOL && cir_numel(v) == 1 && ((const uint8_t *)v->data)[0];
}

static bool cond_stays_true(cir_graph *g, const cir_node *n, const op_loop *l) {
    const cir_value *c0 = cir_in(g, n, 1), *out = cir_in(g, n, 2 * l->p);
    return (!c0 || const_true(c0)) && (const_true(out) || (out && n->in[l->p + 1] == out->id));
}

/* y: a sequence of the loop's elements e (count: the iterations, an expression or found; b the
 * loop_begin), a dim the body finds as it runs not shared, at most e's bound. */
static cuvil_status seq_scan_output(cir_graph *g, cir_node *n, cir_value *y, const cir_value *e, const cir_dim *count,
                                    int b) {
    int64_t cap = count->hi;
    if (cap > CIR_SEQ_MAX)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its sequence output would hold %lld elements; Cuvil takes at "
                            "most %d", (long long)cap, CIR_SEQ_MAX);
    char why[256];
    if (!cuvil_shape_ok(&g->limits, cir_dtype_size(e->dtype), e->ndim, e->dims, why, sizeof why))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its sequence's elements %s", why);
    cir_set_shape(y, e->dtype, e->ndim, e->dims);
    y->seq_n = (int)cap;
    y->seq_cnt = cir_dim_uses_found(g, count) ? NULL : count;
    y->seq_same = 0;
    if (cap && (cir_seq_slot_bytes(y) + 64) > g->limits.tensor_bytes / (uint64_t)cap)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its sequence output of %lld elements is over the limit "
                            "tensor_bytes=%llu (raise it with --limit tensor_bytes=N)", (long long)cap,
                            (unsigned long long)g->limits.tensor_bytes);
    for (int d = 0; d < e->ndim; d++) {
        const cir_dim *x = cir_dimx(g, e, d);
        if (!x || body_size(g, x, b, n->id)) continue;   /* each element its own */
        y->seq_same |= 1u << d;
        y->dx[d] = cir_dim_is_const(x) ? NULL : x;
    }
    return CUVIL_OK;
}

static cuvil_status loop_infer(cir_graph *g, cir_node *n) {
    op_loop l;
    cuvil_status s = check_region(g, n, &l);
    if (s) return s;
    int b = op_loop_begin(g, n), R = 2 * l.p;
    if (b < 0) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "a loop without its loop_begin");
    if (!l.scan) {
        cir_value *c = cir_in(g, n, R);
        if (!c || c->dtype != CIR_BOOL || !cir_value_fixed(c) || cir_numel(c) != 1)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "its body's condition output '%s' must be one bool", c ? c->name : "?");
    }
    const cir_dim *dx[CIR_MAX_DIMS + 1];
    for (int i = 0; i < l.n; i++) {
        cir_value *p = cir_in(g, n, l.p + 2 + i), *o = cir_in(g, n, R + 1 + i);
        if (!p || !o) return cir_node_err(g, n, CUVIL_ERR_MODEL, "its state %d has no value in the body", i);
        /* dims that may differ are checked as each iteration ends (codegen.c's close_loop) */
        bool same = p->dtype == o->dtype && p->ndim == o->ndim;
        for (int d = 0; same && d < p->ndim; d++) {
            const cir_dim *a = cir_dimx(g, p, d), *c = cir_dimx(g, o, d);
            same = a && c && (a == c || !cir_dim_is_const(a) || !cir_dim_is_const(c));
        }
        if (!same) {
            char a[160], c[160];
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its state %d enters the body as '%s' %s %s and leaves it as '%s' "
                                "%s %s; Cuvil needs a state's type and shape the same in every iteration", i, p->name,
                                cir_dtype_name(p->dtype), cir_shape_str(g, p, a, sizeof a), o->name,
                                cir_dtype_name(o->dtype), cir_shape_str(g, o, c, sizeof c));
        }
        if (n->out[i] < 0) continue;
        int k = 0;
        if (l.batch) dx[k++] = cir_dim_const(&g->dt, 1);
        for (int d = 0; d < p->ndim; d++) dx[k++] = cir_dimx(g, p, d);
        cir_set_shape_x(cir_out(g, n, i), p->dtype, k, dx);
    }
    const cir_dim *count = NULL;
    if (l.scan) {
        const cir_node *bn = cir_node_at(g, b);
        cir_value *x = cir_in(g, bn, 2 + l.n);
        int axis = 1;
        if (!x) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "a scan without a scanned input");
        if (!l.batch && (s = op_loop_axis(g, n, false, 0, x->ndim, &axis))) return s;
        if (!(count = cir_dimx(g, x, axis))) return cir_dim_err(g, n, "a scan's count");
    }
    for (int k = 0; k < l.k; k++) {
        cir_value *e = cir_in(g, n, R + 1 + l.n + k);
        if (!e) return cir_node_err(g, n, CUVIL_ERR_MODEL, "its scan output %d has no value in the body", k);
        if (e->ndim >= CIR_MAX_DIMS - (l.batch ? 1 : 0))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its scan output's element '%s' has rank %d; the limit is %d",
                                e->name, e->ndim, CIR_MAX_DIMS - 1 - (l.batch ? 1 : 0));
        if (e->seq_n >= 0)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its scan output %d, '%s', is a sequence; Cuvil takes tensors "
                                "there", k, e->name);
        if (n->out[l.n + k] < 0) continue;
        cir_value *m = cir_in(g, n, 0);
        if (!count && m && cond_stays_true(g, n, &l) && (cir_is_const(m) || (m->sval && m->sval[0]))) {
            /* a condition that stays true: exactly its trip count of iterations (none for a
             * negative one) */
            count = cir_is_const(m) ? cir_dim_const(&g->dt, trip_bound(g, m))
                                    : cir_dim_max(&g->dt, m->sval[0], cir_dim_const(&g->dt, 0));
            if (!count) return cir_dim_err(g, n, "a loop's count");
        }
        if (!count && op_loop_seq_out(n, k) && trip_bound(g, m) < 0)   /* (a sequence: no declared dims to bound it) */
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its trip count '%s' is known only when the model runs and "
                                "nothing bounds it: give its largest value with --dim %s=0:N", m ? m->name : "(none)",
                                m ? m->name : "TRIP_COUNT");
        if (!count) {   /* a Loop's count: the iterations the run makes */
            s = op_found_dim(g, n, l.n + k, 0, 0, trip_bound(g, m), false, &count);
            if (s) return s;
        }
        if (op_loop_seq_out(n, k)) {   /* a sequence of the elements, each its own dims */
            const int64_t *dt;
            if (cir_attr_ints(n, "seq_dtype", &dt) > k && dt[k] && dt[k] != e->dtype)
                return cir_node_err(g, n, CUVIL_ERR_DTYPE, "it appends %s elements ('%s') to a sequence of %s", 
                                    cir_dtype_name(e->dtype), e->name, cir_dtype_name((cir_dtype)dt[k]));
            if ((s = seq_scan_output(g, n, cir_out(g, n, l.n + k), e, count, b))) return s;
            continue;
        }
        /* an element dim the body finds as it runs: the output's is the first iteration's, and
         * every later one must give the same (codegen.c's close_loop) */
        const cir_dim *ex[CIR_MAX_DIMS];
        for (int d = 0; d < e->ndim; d++) {
            ex[d] = cir_dimx(g, e, d);
            if (ex[d] && body_size(g, ex[d], b, n->id))
                ex[d] = cir_rt_found(g, n, 1 + k * CIR_MAX_DIMS + d, ex[d]->hi, "dim");
            if (!ex[d]) return cir_dim_err(g, n, "a scan output's element shape");
        }
        int axis = 0, j = 0;
        if (l.scan && !l.batch && (s = op_loop_axis(g, n, true, k, e->ndim + 1, &axis))) return s;
        if (l.batch) dx[j++] = cir_dim_const(&g->dt, 1);
        for (int d = 0; d <= e->ndim; d++) dx[j++] = d == axis ? count : ex[d < axis ? d : d - 1];
        cir_set_shape_x(cir_out(g, n, l.n + k), e->dtype, j, dx);
    }
    return CUVIL_OK;
}

const cir_opdef cir_op_loop_begin = {"loop_begin", CIR_OPF_SYM_DIMS, 2, 1 << 20, 2, 1 << 20, loop_attrs, begin_infer, NULL, NULL, 0};
const cir_opdef cir_op_loop = {"loop", CIR_OPF_SYM_DIMS, 5, 1 << 20, 0, 1 << 20, loop_attrs, loop_infer, NULL, NULL, 0};
