/* cir.c -- CIR graph construction (pointer-stable chunked storage), constants, use counts. See
 * cir.h. */
#include "ir/ops/ops.h"

#include <limits.h>
#include <math.h>
#include <string.h>

cir_graph *cir_graph_new(cuvil_ctx *ctx) {
    cir_graph *g = cuvil_calloc(1, sizeof *g);
    if (!g) {
        cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->ctx = ctx;
    g->name = "model";
    cuvil_limits_init(&g->limits);
    return g;
}

void cir_graph_free(cir_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_values && g->vchunks; i += CIR_CHUNK) cuvil_free(g->vchunks[i >> CIR_CHUNK_SHIFT]);
    for (int i = 0; i < g->n_nodes && g->nchunks; i += CIR_CHUNK) cuvil_free(g->nchunks[i >> CIR_CHUNK_SHIFT]);
    cuvil_free(g->vchunks);
    cuvil_free(g->nchunks);
    cuvil_free(g->inputs);
    cuvil_free(g->outputs);
    cuvil_map_free(&g->pack_index);
    cir_dimtab_free(&g->dt);
    cuvil_free(g->guards);
    cuvil_arena_free(&g->arena);
    cuvil_free(g);
}

/* Makes room for element `count` (0-based index count) in chunked storage: a new chunk when
 * count starts one. Chunks never move; only the array of chunk pointers grows. */
static bool chunk_room(cir_graph *g, void ***chunks, int *cap, int count, size_t elem) {
    if (count & (CIR_CHUNK - 1)) return true;
    if (count > INT_MAX - CIR_CHUNK) {
        cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED, "the graph has too many values or nodes");
        return false;
    }
    int c = count >> CIR_CHUNK_SHIFT;
    if (c >= *cap) {
        int nc = *cap ? *cap * 2 : 8;
        void **p = cuvil_realloc(*chunks, sizeof(void *) * (size_t)nc);
        if (!p) {
            cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory growing the graph");
            return false;
        }
        *chunks = p;
        *cap = nc;
    }
    (*chunks)[c] = cuvil_calloc(CIR_CHUNK, elem);
    if (!(*chunks)[c]) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory growing the graph");
        return false;
    }
    return true;
}

int cir_value_add(cir_graph *g, const char *name, cir_value_kind kind) {
    if (g->n_values >= g->limits.values) {
        cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                  "the graph has more than %lld values; the limit is values=%lld (raise it with --limit values=N)",
                  (long long)g->limits.values, (long long)g->limits.values);
        return -1;
    }
    if (!chunk_room(g, (void ***)&g->vchunks, &g->cap_vchunks, g->n_values, sizeof(cir_value))) return -1;
    const char *copy = cuvil_arena_strdup(&g->arena, name ? name : "");
    if (!copy) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return -1;
    }
    int id = g->n_values++;
    cir_value *v = &g->vchunks[id >> CIR_CHUNK_SHIFT][id & (CIR_CHUNK - 1)];
    memset(v, 0, sizeof *v);
    v->id = id;
    v->name = copy;
    v->kind = kind;
    v->ndim = -1;
    v->seq_n = -1;
    v->seq_sym = -1;
    v->opt_has = -1;
    v->producer = -1;
    v->output_index = -1;
    v->decl_ndim = -1;
    for (int i = 0; i < CIR_MAX_DIMS; i++) v->dim_sym[i] = -1;
    return id;
}

/* Counts nb more bytes of constants; false (message on ctx) over limits.total_bytes. */
static bool count_const_bytes(cir_graph *g, const cir_value *v, size_t nb) {
    if (g->const_bytes + nb > g->limits.total_bytes || nb > g->limits.total_bytes) {
        cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                  "constant '%s' (%zu bytes) brings the model's constants over the limit total_bytes=%llu (raise it "
                  "with --limit total_bytes=N)", v->name, nb, (unsigned long long)g->limits.total_bytes);
        return false;
    }
    g->const_bytes += nb;
    return true;
}

void *cir_value_make_const(cir_graph *g, cir_value *v) {
    size_t nb = cir_nbytes(v);
    if (nb > g->limits.total_bytes || g->const_bytes + nb > g->limits.total_bytes) {
        count_const_bytes(g, v, nb);   /* the message */
        return NULL;
    }
    void *d = cuvil_arena_alloc(&g->arena, nb ? nb : 1);
    if (!d) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory for constant '%s' (%zu bytes)", v->name, nb);
        return NULL;
    }
    memset(d, 0, nb ? nb : 1);
    v->kind = CIR_VAL_CONST;
    v->data = d;
    count_const_bytes(g, v, nb);   /* checked above */
    return d;
}

/* A new constant value without data, or NULL (message on ctx). */
static cir_value *const_value(cir_graph *g, const char *name, cir_dtype dtype, int ndim, const int64_t *dims) {
    CUVIL_ASSERT(ndim >= 0 && ndim <= CIR_MAX_DIMS);
    int64_t d0[CIR_MAX_DIMS];
    if (ndim) memcpy(d0, dims, sizeof(int64_t) * (size_t)ndim);
    int id = cir_value_add(g, name, CIR_VAL_CONST);
    if (id < 0) return NULL;
    cir_value *v = cir_val(g, id);
    cir_set_shape(v, dtype, ndim, d0);
    return v;
}

int cir_const_add(cir_graph *g, const char *name, cir_dtype dtype, int ndim, const int64_t *dims, const void *data) {
    cir_value *v = const_value(g, name, dtype, ndim, dims);
    if (!v) return -1;
    int id = v->id;
    void *d = cir_value_make_const(g, v);
    if (!d) return -1;
    if (data) memcpy(d, data, cir_nbytes(v));
    return id;
}

int cir_node_add(cir_graph *g, cir_op_kind kind, const char *name, const char *src_op, int n_in, const int *in,
                 int n_out, const int *out) {
    if (g->n_nodes >= g->limits.nodes) {
        cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                  "the graph has more than %lld nodes; the limit is nodes=%lld (raise it with --limit nodes=N)",
                  (long long)g->limits.nodes, (long long)g->limits.nodes);
        return -1;
    }
    if (n_in < 0 || n_out < 0 || n_in > INT_MAX / 2 - 1 || n_out > INT_MAX / 2 - 1) {
        cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "node '%s': bad input or output count", name ? name : "");
        return -1;
    }
    if (!chunk_room(g, (void ***)&g->nchunks, &g->cap_nchunks, g->n_nodes, sizeof(cir_node))) return -1;
    const cir_opdef *def = cir_op_def(kind);
    const char *nm = cuvil_arena_strdup(&g->arena, name ? name : "");
    const char *so = cuvil_arena_strdup(&g->arena, src_op ? src_op : def->name);
    int *ins = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(n_in + 1));
    int *outs = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(n_out + 1));
    if (!nm || !so || !ins || !outs) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return -1;
    }
    int id = g->n_nodes++;
    cir_node *n = cir_node_at(g, id);
    memset(n, 0, sizeof *n);
    n->id = id;
    n->kind = kind;
    n->def = def;
    n->name = nm;
    n->src_op = so;
    n->low.packed = -1;
    n->region = g->cur_region;
    n->in = ins;
    n->out = outs;
    n->n_in = n_in;
    n->n_out = n_out;
    if (n_in) memcpy(n->in, in, sizeof(int) * (size_t)n_in);
    if (n_out) memcpy(n->out, out, sizeof(int) * (size_t)n_out);
    n->in[n_in] = n->out[n_out] = -1;
    return id;
}

int cir_node_insert(cir_graph *g, int pos, cir_op_kind kind, const char *name, const char *src_op, int n_in,
                    const int *in, int n_out, const int *out) {
    CUVIL_ASSERT(pos >= 0 && pos <= g->n_nodes);
    int id = cir_node_add(g, kind, name, src_op, n_in, in, n_out, out);
    if (id < 0) return -1;
    cir_node added = *cir_node_at(g, id);
    for (int j = id; j > pos; j--) {
        cir_node *dst = cir_node_at(g, j);
        *dst = *cir_node_at(g, j - 1);
        dst->id = j;
    }
    *cir_node_at(g, pos) = added;
    cir_node_at(g, pos)->id = pos;
    for (int v = 0; v < g->n_values; v++) {
        cir_value *x = cir_val(g, v);
        if (x->producer >= pos) x->producer++;
    }
    return pos;
}

cuvil_status cir_nodes_reorder(cir_graph *g, const int *order) {
    const int nn = g->n_nodes;
    cir_node *copy = cuvil_malloc(sizeof(cir_node) * ((size_t)nn + 1));
    int *pos = cuvil_malloc(sizeof(int) * ((size_t)nn + 1));
    if (!copy || !pos) {
        cuvil_free(copy);
        cuvil_free(pos);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nn; i++) copy[i] = *cir_node_at(g, i);
    for (int k = 0; k < nn; k++) {
        CUVIL_ASSERT(order[k] >= 0 && order[k] < nn);
        *cir_node_at(g, k) = copy[order[k]];
        cir_node_at(g, k)->id = k;
        pos[order[k]] = k;
    }
    for (int i = 0; i < g->n_guards; i++)
        if (g->guards[i].node_id >= 0 && g->guards[i].node_id < nn) g->guards[i].node_id = pos[g->guards[i].node_id];
    cuvil_free(copy);
    cuvil_free(pos);
    cir_graph_count_uses(g);   /* (the producers' ids too) */
    return CUVIL_OK;
}

static cuvil_status id_list_add(cir_graph *g, int **list, int *n, int *cap, int id) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        int *p = cuvil_realloc(*list, sizeof(int) * (size_t)nc);
        if (!p) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        *list = p;
        *cap = nc;
    }
    (*list)[(*n)++] = id;
    return CUVIL_OK;
}

cuvil_status cir_graph_add_input(cir_graph *g, int id) {
    return id_list_add(g, &g->inputs, &g->n_inputs, &g->cap_inputs, id);
}

cuvil_status cir_graph_add_output(cir_graph *g, int id) {
    cuvil_status s = id_list_add(g, &g->outputs, &g->n_outputs, &g->cap_outputs, id);
    if (!s && cir_val(g, id)->output_index < 0) cir_val(g, id)->output_index = g->n_outputs - 1;
    return s;
}

int64_t cir_numel(const cir_value *v) {
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->dims[i];
    return n;
}

size_t cir_seq_hdr_bytes(const cir_value *v) {
    return ((size_t)8 * (1 + (size_t)v->seq_n * (size_t)(v->ndim > 0 ? v->ndim : 0)) + 63) / 64 * 64;
}

size_t cir_seq_slot_bytes(const cir_value *v) {
    return v->ndim < 0 ? 0 : ((size_t)cir_numel(v) * cir_dtype_size(v->dtype) + 63) / 64 * 64;
}

void cir_copy_seq_type(cir_value *y, const cir_value *x) {
    y->dtype = x->dtype;
    y->ndim = x->ndim;
    for (int i = 0; i < CIR_MAX_DIMS; i++) {
        y->dims[i] = x->dims[i];
        y->dx[i] = x->dx[i];
        y->dim_sym[i] = -1;
    }
    y->sval = NULL;
    y->seq_n = x->seq_n;
    y->seq_same = x->seq_same;
    y->seq_cnt = x->seq_cnt;
}

size_t cir_nbytes(const cir_value *v) {
    if (v->seq_n >= 0) return cir_seq_hdr_bytes(v) + (size_t)v->seq_n * cir_seq_slot_bytes(v);
    return (size_t)cir_numel(v) * cir_dtype_size(v->dtype);
}

bool cir_is_const(const cir_value *v) { return v && v->kind == CIR_VAL_CONST; }

void cir_set_shape(cir_value *v, cir_dtype dtype, int ndim, const int64_t *dims) {
    CUVIL_ASSERT(ndim >= 0 && ndim <= CIR_MAX_DIMS);
    v->dtype = dtype;
    v->ndim = ndim;
    v->seq_n = -1;   /* a tensor (op_seq.c makes sequences after) */
    v->seq_same = 0;
    v->seq_cnt = NULL;
    for (int i = 0; i < CIR_MAX_DIMS; i++) {
        v->dims[i] = i < ndim ? dims[i] : 0;
        v->dim_sym[i] = -1;
        v->dx[i] = NULL;
    }
    v->sval = NULL;
}

void cir_set_shape_x(cir_value *v, cir_dtype dtype, int ndim, const cir_dim *const *dx) {
    CUVIL_ASSERT(ndim >= 0 && ndim <= CIR_MAX_DIMS);
    int64_t d[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < ndim; i++) {
        CUVIL_ASSERT(dx[i]);
        d[i] = dx[i]->hi;
    }
    cir_set_shape(v, dtype, ndim, d);
    for (int i = 0; i < ndim; i++) v->dx[i] = cir_dim_is_const(dx[i]) ? NULL : dx[i];
}

void cir_set_shape_like(cir_value *v, cir_dtype dtype, const cir_value *like) {
    int64_t d[CIR_MAX_DIMS];
    const cir_dim *x[CIR_MAX_DIMS];
    int nd = like->ndim;
    memcpy(d, like->dims, sizeof d);
    memcpy(x, like->dx, sizeof x);
    cir_set_shape(v, dtype, nd, d);
    memcpy(v->dx, x, sizeof x);
}

const cir_dim *cir_dimx(cir_graph *g, const cir_value *v, int i) {
    CUVIL_ASSERT(i >= 0 && i < v->ndim);
    return v->dx[i] ? v->dx[i] : cir_dim_const(&g->dt, v->dims[i]);
}

bool cir_value_fixed(const cir_value *v) {
    for (int i = 0; i < v->ndim; i++)
        if (v->dx[i]) return false;
    return true;
}

const cir_dim *cir_numel_x(cir_graph *g, const cir_value *v) {
    const cir_dim *e = cir_dim_const(&g->dt, 1);
    for (int i = 0; i < v->ndim; i++) e = cir_dim_mul(&g->dt, e, cir_dimx(g, v, i));
    return e;
}

const cir_dim *cir_sval_at(cir_graph *g, const cir_value *v, int64_t i) {
    if (v->sval) return v->sval[i];
    if (v->kind == CIR_VAL_CONST && v->data && (cir_dtype_is_int(v->dtype) || v->dtype == CIR_BOOL))
        return cir_dim_const(&g->dt, cir_const_i64(v, i));
    return NULL;
}

cuvil_status cir_dim_err(cir_graph *g, const cir_node *n, const char *what) {
    return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "%s: %s", what, cir_dimtab_why(&g->dt));
}

static cuvil_status add_guard(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, cir_guard_kind kind,
                              const char *what) {
    /* the same assumption again (a node inferred again, an emitter repeating its op's checks):
     * kept once (expressions are hash-consed: equal ones are the same pointer) */
    for (int i = 0; i < g->n_guards; i++)
        if (g->guards[i].a == a && g->guards[i].b == b && g->guards[i].kind == kind && g->guards[i].node_id <= n->id)
            return CUVIL_OK;
    if (g->n_guards == g->cap_guards) {
        int cap = g->cap_guards ? 2 * g->cap_guards : 16;
        cir_guard *p = cuvil_realloc(g->guards, sizeof *p * (size_t)cap);
        if (!p) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        g->guards = p;
        g->cap_guards = cap;
    }
    char desc[512];
    const char *w = cuvil_arena_strdup(&g->arena, what), *nd = cuvil_arena_strdup(&g->arena, cir_node_desc(n, desc, sizeof desc));
    if (!w || !nd) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    g->guards[g->n_guards++] = (cir_guard){a, b, kind, n->id, nd, w};
    return CUVIL_OK;
}

static cuvil_status refuse_pair(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *fmt,
                                const char *what) {
    cuvil_sb sa = {0}, sb = {0};
    cir_dim_print(&sa, &g->dt, a);
    cir_dim_print(&sb, &g->dt, b);
    cuvil_status s = cir_node_err(g, n, CUVIL_ERR_SHAPE, fmt, what, sa.s ? sa.s : "?", sb.s ? sb.s : "?");
    cuvil_sb_free(&sa);
    cuvil_sb_free(&sb);
    return s;
}

cuvil_status cir_require_eq(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *what) {
    if (!a || !b) return cir_dim_err(g, n, what);
    if (a == b) return CUVIL_OK;
    if (cir_dim_prove_ne(&g->dt, a, b)) return refuse_pair(g, n, a, b, "%s differ: %s and %s", what);
    return add_guard(g, n, a, b, CIR_GUARD_EQ, what);
}

cuvil_status cir_require_le(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *what) {
    if (!a || !b) return cir_dim_err(g, n, what);
    if (cir_dim_prove_le(&g->dt, a, b)) return CUVIL_OK;
    if (cir_dim_prove_lt(&g->dt, b, a)) return refuse_pair(g, n, a, b, "%s: %s exceeds %s", what);
    return add_guard(g, n, a, b, CIR_GUARD_LE, what);
}

cuvil_status cir_require_bcast(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *what,
                               const cir_dim **out) {
    if (!a || !b) return cir_dim_err(g, n, what);
    const cir_dim *one = cir_dim_const(&g->dt, 1);
    bool a1 = a->lo <= 1 && a->hi >= 1, b1 = b->lo <= 1 && b->hi >= 1;   /* may be 1 when the model runs */
    *out = cir_dim_is_const(b) ? b : a;
    if (a == b || (!a1 && !b1)) return cir_require_eq(g, n, a, b, what);   /* (neither may be 1: equal) */
    if (a == one || b == one) {
        *out = a == one ? b : a;
        return CUVIL_OK;
    }
    /* a constant c > 1 and a dim that may be 1: c, whichever it is; two that may be 1: the larger */
    *out = cir_dim_is_const(b) && !b1 ? b : cir_dim_is_const(a) && !a1 ? a : cir_dim_max(&g->dt, a, b);
    if (!*out) return cir_dim_err(g, n, what);
    return add_guard(g, n, a, b, CIR_GUARD_BCAST, what);
}

/* The symbol with key `key` that node n brings, made on the first call in [lo, hi] (name: its
 * name for people). A node's symbols are consecutive in g->rt_syms: made while it is inferred. */
static const cir_dim *rt_symbol(cir_graph *g, cir_node *n, int key, int64_t lo, int64_t hi, const char *name,
                                const char *value) {
    for (int r = n->rt_first; r < n->rt_first + n->n_rt; r++)
        if (g->rt_key[r] == key) return cir_dim_sym(&g->dt, g->rt_syms[r]);
    if (g->n_rt_syms == CIR_MAX_RT_SYMS) {
        cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the model has more than %d sizes known only when it runs", CIR_MAX_RT_SYMS);
        return NULL;
    }
    if (n->n_rt && n->rt_first + n->n_rt != g->n_rt_syms) {
        cir_node_err(g, n, CUVIL_ERR_INTERNAL, "a size known only when the model runs, made after those of another node");
        return NULL;
    }
    int k = cir_dimtab_add_sym(&g->dt, name, lo, hi);
    if (k < 0) {
        cir_dim_err(g, n, "a size known only when the model runs");
        return NULL;
    }
    if (!n->n_rt) n->rt_first = g->n_rt_syms;
    n->n_rt++;
    g->rt_syms[g->n_rt_syms] = k;
    g->rt_key[g->n_rt_syms] = key;
    g->rt_lo[g->n_rt_syms] = lo;
    g->rt_value[g->n_rt_syms] = value;
    g->rt_hi[g->n_rt_syms++] = hi;
    g->symdims = true;   /* the nodes after it compute their sizes from the run's dims */
    return cir_dim_sym(&g->dt, k);
}

const cir_dim *cir_rt_found(cir_graph *g, cir_node *n, int k, int64_t hi, const char *what) {
    char name[96];
    if (k) snprintf(name, sizeof name, "%s%d(%.48s)", what, k, n->name);
    else snprintf(name, sizeof name, "%s(%.48s)", what, n->name);
    cir_value *y = n->n_out ? cir_out(g, n, 0) : NULL;
    return rt_symbol(g, n, -1 - k, 0, hi, name, y ? y->name : n->name);
}

const cir_dim *cir_rt_sym(cir_graph *g, cir_node *n, int64_t hi, const char *what) {
    return cir_rt_found(g, n, 0, hi, what);
}

const cir_dim *cir_rt_load(cir_graph *g, cir_node *n, int i, int j, int64_t lo, int64_t hi) {
    cir_value *v = cir_in(g, n, i);
    if (!v || j < 0 || j >= CIR_MAX_SVAL) {
        cir_node_err(g, n, CUVIL_ERR_INTERNAL, "reads element %d of input %d as a size", j, i);
        return NULL;
    }
    int64_t ulo, uhi;
    if (cir_value_bound(g, v->name, &ulo, &uhi)) {   /* the user's range, within the op's */
        if (ulo > lo) lo = ulo;
        if (uhi < hi) hi = uhi;
        if (lo > hi) {
            cir_node_err(g, n, CUVIL_ERR_INVALID_ARG, "--dim %s=%lld:%lld leaves no value this node can take (%lld..%lld)",
                         v->name, (long long)ulo, (long long)uhi, (long long)lo, (long long)hi);
            return NULL;
        }
    }
    char name[96];
    snprintf(name, sizeof name, "%.40s[%d]", v->name, j);
    return rt_symbol(g, n, i * CIR_MAX_SVAL + j, lo, hi, name, v->name);
}

bool cir_dim_uses_rt(const cir_graph *g, const cir_dim *e) {
    for (int r = 0; e && r < g->n_rt_syms; r++)
        if (cir_dim_uses(e, g->rt_syms[r])) return true;
    return false;
}

bool cir_dim_uses_found(const cir_graph *g, const cir_dim *e) {
    for (int r = 0; e && r < g->n_rt_syms; r++)
        if (g->rt_key[r] < 0 && cir_dim_uses(e, g->rt_syms[r])) return true;
    return false;
}

int cir_region_live(const cir_graph *g, int r) {
    int live = -1;   /* the innermost region on the way up whose condition is known only when the model runs */
    for (int depth = 0; r > 0 && r < g->n_regions && depth <= g->n_regions; depth++, r = g->regions[r].parent) {
        const struct cir_region *rg = &g->regions[r];
        const cir_value *c = rg->cond >= 0 ? cir_val((cir_graph *)g, rg->cond) : NULL;
        if (c && cir_is_const(c) && c->dtype == CIR_BOOL && cir_numel(c) == 1) {
            if ((((const uint8_t *)c->data)[0] != 0) == rg->is_else) return -1;   /* a branch not taken */
        } else if ((c || rg->loop) && live < 0) {
            live = r;   /* (a loop's body runs apart from the nodes around it, however many times) */
        }
    }
    return live < 0 ? 0 : live;
}

bool cir_region_within(const cir_graph *g, int inner, int outer) {
    for (int depth = 0; inner > 0 && inner < g->n_regions && depth <= g->n_regions; depth++) {
        if (inner == outer) return true;
        inner = g->regions[inner].parent;
    }
    return inner == outer;
}

bool cir_value_bound(const cir_graph *g, const char *name, int64_t *lo, int64_t *hi) {
    for (int i = 0; name && i < g->n_value_bounds; i++)
        if (!strcmp(g->value_bounds[i].name, name)) {
            *lo = g->value_bounds[i].lo;
            *hi = g->value_bounds[i].hi;
            return true;
        }
    return false;
}

cuvil_status cir_graph_bind_syms(cir_graph *g) {
    for (int k = 0; k < g->n_syms; k++) {
        cir_sym *sy = &g->syms[k];
        sy->e = NULL;
        sy->dsym = -1;
        if (sy->min >= sy->max) continue;
        int64_t step = sy->step > 1 ? sy->step : 1;
        /* the multiples of step in [min, max]: step * s for s in [ceil(min/step), max/step] */
        sy->dsym = cir_dimtab_add_sym(&g->dt, sy->name, (sy->min + step - 1) / step, sy->max / step);
        if (sy->dsym < 0)
            return cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "symbol '%s': %s", sy->name, cir_dimtab_why(&g->dt));
        g->dt.syms[sy->dsym].unit = step;
        sy->e = cir_dim_scale(&g->dt, cir_dim_sym(&g->dt, sy->dsym), step);
        if (!sy->e) return cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "symbol '%s': %s", sy->name, cir_dimtab_why(&g->dt));
    }
    for (int i = 0; i < g->n_inputs; i++) {
        cir_value *v = cir_val(g, g->inputs[i]);
        for (int d = 0; d < v->ndim; d++) {
            int k = v->dim_sym[d];
            if (k < 0 || !g->syms[k].e) continue;
            v->dx[d] = cir_dim_is_const(g->syms[k].e) ? NULL : g->syms[k].e;
            v->dims[d] = g->syms[k].e->hi;
        }
    }
    for (int i = 0; i < g->n_inputs; i++) {   /* a sequence's count: its symbol, or fixed (its most elements) */
        cir_value *v = cir_val(g, g->inputs[i]);
        if (v->seq_n < 0) continue;
        const cir_sym *sy = v->seq_sym >= 0 ? &g->syms[v->seq_sym] : NULL;
        v->seq_cnt = sy && sy->e ? sy->e : cir_dim_const(&g->dt, v->seq_n);
        if (!v->seq_cnt) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < g->n_syms; k++) g->symdims |= g->syms[k].dsym >= 0;   /* a ranged symbol */
    return CUVIL_OK;
}

/* Appends printf output to buf[*o..len), truncating; *o never passes len - 1. */
static void put(char *buf, size_t len, size_t *o, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *o, const char *fmt, ...) {
    if (*o + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *o, len - *o, fmt, ap);
    va_end(ap);
    if (n > 0) *o = *o + (size_t)n < len ? *o + (size_t)n : len - 1;
}

char *cir_shape_str(const cir_graph *g, const cir_value *v, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    if (v->seq_n >= 0 && v->seq_cnt && cir_dim_is_const(v->seq_cnt)) {   /* its elements' type and dims ("<=": a bound) */
        put(buf, len, &o, "seq(%lld)", (long long)v->seq_cnt->hi);
    } else if (v->seq_n >= 0 && v->seq_cnt) {
        cuvil_sb e = {0};
        cir_dim_print(&e, &g->dt, v->seq_cnt);
        put(buf, len, &o, "seq(%s<=%d)", e.s ? e.s : "?", v->seq_n);
        cuvil_sb_free(&e);
    } else if (v->seq_n >= 0) {
        put(buf, len, &o, "seq(<=%d)", v->seq_n);
    }
    put(buf, len, &o, "%s", cir_dtype_short(v->dtype));
    if (v->ndim < 0) {
        put(buf, len, &o, "[?]");
        return buf;
    }
    put(buf, len, &o, "[");
    for (int i = 0; i < v->ndim; i++) {
        if (i) put(buf, len, &o, ",");
        if (v->seq_n >= 0 && !((v->seq_same >> i) & 1)) {
            put(buf, len, &o, "<=%lld", (long long)v->dims[i]);
        } else if (v->dx[i]) {
            cuvil_sb e = {0};
            cir_dim_print(&e, &g->dt, v->dx[i]);
            put(buf, len, &o, "%s", e.s ? e.s : "?");
            cuvil_sb_free(&e);
        } else if (v->dim_sym[i] >= 0) {
            char safe[68];
            size_t k = 0;
            for (const char *p = g->syms[v->dim_sym[i]].name; *p && k < 64; p++) safe[k++] = cuvil_safe_char((unsigned char)*p);
            safe[k] = 0;
            put(buf, len, &o, "%s=%lld", safe, (long long)v->dims[i]);
        } else {
            put(buf, len, &o, "%lld", (long long)v->dims[i]);
        }
    }
    put(buf, len, &o, "]");
    return buf;
}

cuvil_status cir_check_shape(cir_graph *g, const cir_node *n, const cir_value *v) {
    char why[256], sh[256];
    if (cuvil_shape_ok(&g->limits, cir_dtype_size(v->dtype), v->ndim, v->dims, why, sizeof why)) return CUVIL_OK;
    for (int r = 0; n && r < g->n_rt_syms; r++)   /* a size from a tensor's values: which --dim bounds it */
        for (int i = 0; i < v->ndim; i++)
            if (v->dx[i] && cir_dim_uses(v->dx[i], g->rt_syms[r]))
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output '%s' %s: %s; its dim %d is known only when the model "
                                    "runs, from %s '%s': give %s largest value with --dim %s=LO:HI", v->name,
                                    cir_shape_str(g, v, sh, sizeof sh), why, i, g->rt_key[r] < 0 ? "the sizes of" : "the values of",
                                    g->rt_value[r], g->rt_key[r] < 0 ? "their" : "its", g->rt_value[r]);
    if (n) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output '%s' %s: %s", v->name, cir_shape_str(g, v, sh, sizeof sh), why);
    return cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED, "'%s' %s: %s", v->name, cir_shape_str(g, v, sh, sizeof sh), why);
}

/* ===== Constant element access ========================================================== */
int64_t cir_f64_to_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

/* The runtime's conversions: the compiler folds exactly as a compiled model computes. */
uint16_t cir_f32_to_f16(float f) { return cuvil_f32_to_f16(f); }
uint16_t cir_f32_to_bf16(float f) { return cuvil_f32_to_bf16(f); }

int64_t cir_const_i64(const cir_value *v, int64_t i) {
    const void *d = v->data;
    switch (v->dtype) {
    case CIR_I64: return ((const int64_t *)d)[i];
    case CIR_I32: return ((const int32_t *)d)[i];
    case CIR_I16: return ((const int16_t *)d)[i];
    case CIR_I8: case CIR_I4: return ((const int8_t *)d)[i];
    case CIR_U8: case CIR_U4: return ((const uint8_t *)d)[i];
    case CIR_U16: return ((const uint16_t *)d)[i];
    case CIR_U32: return ((const uint32_t *)d)[i];
    case CIR_U64: return (int64_t)((const uint64_t *)d)[i];
    case CIR_BOOL: return ((const uint8_t *)d)[i] != 0;
    case CIR_F32: return cir_f64_to_i64(((const float *)d)[i]);
    case CIR_F64: return cir_f64_to_i64(((const double *)d)[i]);
    case CIR_F16: case CIR_BF16: return cir_f64_to_i64(cir_const_f64(v, i));
    default: CUVIL_ASSERT(!"cir_const_i64: unsupported dtype");
    }
}

float cir_f16_to_f32(uint16_t h) { return cuvil_f16_to_f32(h); }

float cir_bf16_to_f32(uint16_t h) { return cuvil_bf16_to_f32(h); }

double cir_const_f64(const cir_value *v, int64_t i) {
    const void *d = v->data;
    switch (v->dtype) {
    case CIR_F32: return ((const float *)d)[i];
    case CIR_F64: return ((const double *)d)[i];
    case CIR_F16: return cir_f16_to_f32(((const uint16_t *)d)[i]);
    case CIR_BF16: return cir_bf16_to_f32(((const uint16_t *)d)[i]);
    default: return (double)cir_const_i64(v, i);
    }
}

void cir_const_set_f64(cir_value *v, int64_t i, double x) {
    void *d = v->data;
    switch (v->dtype) {
    case CIR_F32: ((float *)d)[i] = (float)x; break;
    case CIR_F64: ((double *)d)[i] = x; break;
    case CIR_F16: ((uint16_t *)d)[i] = cir_f32_to_f16((float)x); break;
    case CIR_BF16: ((uint16_t *)d)[i] = cir_f32_to_bf16((float)x); break;
    case CIR_BOOL: ((uint8_t *)d)[i] = x != 0; break;
    default: cir_const_set_i64(v, i, cir_f64_to_i64(x)); break;
    }
}

void cir_const_set_i64(cir_value *v, int64_t i, int64_t x) {
    void *d = v->data;
    switch (v->dtype) {
    case CIR_I64: ((int64_t *)d)[i] = x; break;
    case CIR_I32: ((int32_t *)d)[i] = (int32_t)x; break;
    case CIR_I16: ((int16_t *)d)[i] = (int16_t)x; break;
    case CIR_I8: ((int8_t *)d)[i] = (int8_t)x; break;
    case CIR_U8: ((uint8_t *)d)[i] = (uint8_t)x; break;
    case CIR_I4: ((int8_t *)d)[i] = (int8_t)((((uint64_t)x & 0xF) ^ 8) - 8); break;   /* the low 4 bits */
    case CIR_U4: ((uint8_t *)d)[i] = (uint8_t)(x & 0xF); break;
    case CIR_U16: ((uint16_t *)d)[i] = (uint16_t)x; break;
    case CIR_U32: ((uint32_t *)d)[i] = (uint32_t)x; break;
    case CIR_U64: ((uint64_t *)d)[i] = (uint64_t)x; break;
    case CIR_BOOL: ((uint8_t *)d)[i] = x != 0; break;
    case CIR_F32: ((float *)d)[i] = (float)x; break;
    case CIR_F64: ((double *)d)[i] = (double)x; break;
    case CIR_F16: ((uint16_t *)d)[i] = cir_f32_to_f16((float)x); break;
    case CIR_BF16: ((uint16_t *)d)[i] = cir_f32_to_bf16((float)x); break;
    default: CUVIL_ASSERT(!"cir_const_set_i64: unsupported dtype");
    }
}

/* ===== Uses ================================================================================== */
void cir_graph_count_uses(cir_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        cir_value *v = cir_val(g, i);
        v->n_uses = 0;
        if (v->kind == CIR_VAL_ACT) v->producer = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) cir_val(g, n->in[j])->n_uses++;
        for (int j = n->n_in; j < cir_node_n_reads(n); j++)
            if (cir_node_read(n, j) >= 0) cir_val(g, cir_node_read(n, j))->n_uses++;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && cir_val(g, n->out[j])->kind == CIR_VAL_ACT) cir_val(g, n->out[j])->producer = i;
    }
    for (int i = 0; i < g->n_outputs; i++) cir_val(g, g->outputs[i])->n_uses++;
}

const char *cir_model_name(const cir_graph *g) {
    const char *p = g->model_path ? g->model_path : "?";
    const char *slash = strrchr(p, '/');
    return slash && slash[1] ? slash + 1 : p;
}

/* ===== Messages ============================================================================== */
const char *cir_node_desc(const cir_node *n, char *buf, size_t len) {
    snprintf(buf, len, "%s '%s'", n->src_op, n->name);
    return buf;
}

cuvil_status cir_node_err(cir_graph *g, const cir_node *n, cuvil_status s, const char *fmt, ...) {
    char desc[512], msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cuvil_err(g->ctx, s, "%s: %s", cir_node_desc(n, desc, sizeof desc), msg);
}
