/* op_misc.c -- eye_like (x; dtype, k): an identity-like matrix of x's shape (ONNX EyeLike);
 * lrn (x; alpha, beta, bias, size): LocalResponseNormalization across channels, float32;
 * reverse_sequence (x, lens; time_axis, batch_axis): each batch item's first lens[b] steps
 * reversed, any element type (a length outside 0..T fails the run). */
#include "ir/ops/ops.h"

#include <string.h>

static cuvil_status eye_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim != 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; EyeLike takes 2", x->name, x->ndim);
    cir_dtype t = cir_attr_has(n, "dtype") ? (cir_dtype)cir_attr_int(n, "dtype") : x->dtype;
    if (!cir_dtype_size(t)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output type %s", cir_dtype_name(t));
    const cir_dim *dx[2] = {cir_dimx(g, x, 0), cir_dimx(g, x, 1)};
    cir_set_shape_x(cir_out(g, n, 0), t, 2, dx);
    return CUVIL_OK;
}

static const cir_attr_spec eye_attrs[] = {
    {"dtype", CIR_ATTR_DTYPE, CIR_UNDEF, 0, NULL, false},
    {"k", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_eye_like = {"eye_like", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, eye_attrs, eye_infer, NULL, NULL, 0};

static cuvil_status lrn_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; LRN takes [N, C, ...]", x->name, x->ndim);
    if (cir_attr_int(n, "size") < 1) return cir_node_err(g, n, CUVIL_ERR_MODEL, "size must be at least 1");
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, x->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec lrn_attrs[] = {
    {"alpha", CIR_ATTR_FLOAT, 0, 1e-4f, NULL, false},
    {"beta", CIR_ATTR_FLOAT, 0, 0.75f, NULL, false},
    {"bias", CIR_ATTR_FLOAT, 0, 1.0f, NULL, false},
    {"size", CIR_ATTR_INT, 0, 0, NULL, true},
    CIR_ATTR_END,
};
const cir_opdef cir_op_lrn = {"lrn", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, lrn_attrs, lrn_infer, NULL, NULL, 0};

static cuvil_status revseq_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *l = cir_in(g, n, 1);
    int64_t ta = cir_attr_int(n, "time_axis"), ba = cir_attr_int(n, "batch_axis");
    if (x->ndim < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "time_axis %lld and batch_axis %lld must be 0 and 1 of a rank >= 2 input",
                            (long long)ta, (long long)ba);
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    if (l->dtype != CIR_I64 || l->ndim != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "sequence_lens '%s' must be a 1-D int64 tensor", l->name);
    if ((s = cir_require_eq(g, n, cir_dimx(g, l, 0), cir_dimx(g, x, (int)ba), "sequence_lens's length and the batch")))
        return s;
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec revseq_attrs[] = {
    {"time_axis", CIR_ATTR_INT, 0, 0, NULL, false},
    {"batch_axis", CIR_ATTR_INT, 1, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_reverse_sequence = {"reverse_sequence", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, revseq_attrs, revseq_infer,
                                           NULL, NULL, 0};

/* ===== grid_sample ======================================================================== */
/* grid_sample (x [N, C, d1..dk], grid [N, o1..ok, k]; mode, padding_mode, align_corners): ONNX's
 * GridSample for k = 1..3 on cuvil_f32_grid_sample. float32. */
static const char *const gs_modes[] = {"bilinear", "nearest", "bicubic", "linear", "cubic", NULL};
static const char *const gs_pads[] = {"zeros", "border", "reflection", NULL};

cuvil_status op_grid_sample_params(cir_graph *g, cir_node *n, cuvil_grid_sample_params *p) {
    cir_value *x = cir_in(g, n, 0), *gr = cir_in(g, n, 1);
    int nd = x->ndim - 2;
    if (nd < 1 || nd > 3 || gr->ndim != x->ndim || gr->dims[gr->ndim - 1] != nd)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "X '%s' must be [N, C, 1 to 3 spatial dims] and grid '%s' [N, out dims..., "
                            "%d]", x->name, gr->name, nd > 0 ? nd : 1);
    if (!cir_value_fixed(x) || !cir_value_fixed(gr))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "X's and grid's dims must be fixed");
    if (gr->dims[0] != x->dims[0])
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "X and grid have batches %lld and %lld", (long long)x->dims[0],
                            (long long)gr->dims[0]);
    for (int d = 2; d < x->ndim; d++)
        if (x->dims[d] < 1)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "X '%s' has an empty spatial dim %d (ONNX Runtime refuses it too)",
                                x->name, d);
    int64_t m = cir_attr_int(n, "mode");
    p->nd = nd;
    p->mode = m == 1 ? 0 : (m == 0 || m == 3) ? 1 : 2;
    p->padding = (int)cir_attr_int(n, "padding_mode");
    p->align_corners = cir_attr_int(n, "align_corners") != 0;
    p->N = x->dims[0];
    p->C = x->dims[1];
    for (int i = 0; i < 3; i++) {
        p->in_dims[i] = i < nd ? x->dims[2 + i] : 1;
        p->out_dims[i] = i < nd ? gr->dims[1 + i] : 1;
    }
    return CUVIL_OK;
}

static cuvil_status gs_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1))) return s;
    cuvil_grid_sample_params p;
    if ((s = op_grid_sample_params(g, n, &p))) return s;
    int64_t dims[5] = {p.N, p.C, p.out_dims[0], p.out_dims[1], p.out_dims[2]};
    cir_set_shape(cir_out(g, n, 0), CIR_F32, p.nd + 2, dims);
    return CUVIL_OK;
}

static const cir_attr_spec gs_attrs[] = {
    {"mode", CIR_ATTR_ENUM, 0, 0, gs_modes, false},
    {"padding_mode", CIR_ATTR_ENUM, 0, 0, gs_pads, false},
    {"align_corners", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_grid_sample = {"grid_sample", 0, 2, 2, 1, 1, gs_attrs, gs_infer, NULL, NULL, 0};

/* ===== window ============================================================================= */
/* window (size; kind 0 Hann, 1 Hamming, 2 Blackman, periodic, dtype): ONNX's window functions,
 * of a length read when the model runs (the output's dim found then, bounded by the declared
 * output or a --dim) or constant. */
static cuvil_status window_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *sz = cir_in(g, n, 0);
    if ((sz->dtype != CIR_I64 && sz->dtype != CIR_I32) || cir_numel(sz) != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "size '%s' must be an int32 or int64 scalar", sz->name);
    cir_dtype t = cir_attr_has(n, "dtype") ? (cir_dtype)cir_attr_int(n, "dtype") : CIR_F32;
    if (!cir_dtype_size(t)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output type %s", cir_dtype_name(t));
    const cir_dim *d;
    if (cir_is_const(sz)) {
        int64_t v = cir_const_i64(sz, 0);
        if (v < 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "size is %lld", (long long)v);
        d = cir_dim_const(&g->dt, v);
    } else if ((s = op_found_dim(g, n, 0, 0, 0, -1, false, &d))) {
        return s;
    }
    cir_set_shape_x(cir_out(g, n, 0), t, 1, &d);
    return CUVIL_OK;
}

static const cir_attr_spec window_attrs[] = {
    {"kind", CIR_ATTR_INT, 0, 0, NULL, false},
    {"periodic", CIR_ATTR_INT, 1, 0, NULL, false},
    {"dtype", CIR_ATTR_DTYPE, CIR_F32, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_window = {"window", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, window_attrs, window_infer, NULL, NULL, 0};

/* ===== tfidf ============================================================================== */
/* tfidf (x [C] or [B, C], int32/int64; mode, min/max_gram_length, max_skip_count, ngram_counts,
 * ngram_indexes, pool_int64s, weights): ONNX TfIdfVectorizer as its reference computes it. The
 * pool's n-grams become a table (op_tfidf_table; a duplicate is refused, as ONNX Runtime does);
 * the kernel counts, for every skip distance and start, each
 * sequence that is an n-gram of a length in [min, max] (unigrams once, at distance 1). */
static const char *const tfidf_modes[] = {"NONE", "TF", "IDF", "TFIDF", NULL};

cuvil_status op_tfidf_table(cir_graph *g, cir_node *n, op_tfidf *t) {
    memset(t, 0, sizeof *t);
    const int64_t *counts, *idx, *pool;
    const float *w;
    int nc = cir_attr_ints(n, "ngram_counts", &counts), ni = cir_attr_ints(n, "ngram_indexes", &idx);
    int np = cir_attr_ints(n, "pool_int64s", &pool), nw = cir_attr_floats(n, "weights", &w);
    if (np < 0) np = 0;
    t->mode = (int)cir_attr_int(n, "mode");
    t->min_n = cir_attr_int(n, "min_gram_length");
    t->max_n = cir_attr_int(n, "max_gram_length");
    t->max_skip = cir_attr_int(n, "max_skip_count");
    if (t->mode == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "mode must be TF, IDF or TFIDF");
    if (t->min_n < 1 || t->max_n < t->min_n || t->max_n > 64 || t->max_skip < 0 || t->max_skip > g->limits.dim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "min_gram_length %lld, max_gram_length %lld (1 <= min <= max <= 64) or "
                            "max_skip_count %lld out of range", (long long)t->min_n, (long long)t->max_n,
                            (long long)t->max_skip);
    if (nc <= 0 || ni <= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "ngram_counts and ngram_indexes are required");
    t->out_size = 0;
    for (int i = 0; i < ni; i++) {
        if (idx[i] < 0 || idx[i] >= g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "ngram_indexes[%d] = %lld is out of range", i, (long long)idx[i]);
        if (idx[i] + 1 > t->out_size) t->out_size = idx[i] + 1;
    }
    if (nw >= 0 && nw != ni)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "weights has %d values; ngram_indexes %d (one per n-gram)", nw, ni);
    t->tokens = pool;
    /* the table (at most one n-gram per pool value) and a hash of it, for duplicates */
    size_t cap = 16;
    while (cap < 2 * (size_t)np) cap *= 2;
    t->start = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(np + 1));
    t->len = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(np + 1));
    t->out = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(np + 1));
    t->weights = nw > 0 ? cuvil_arena_alloc(&g->arena, sizeof(float) * (size_t)(np + 1)) : NULL;
    int64_t *hash = cuvil_malloc(sizeof(int64_t) * cap);
    if (!t->start || !t->len || !t->out || (nw > 0 && !t->weights) || !hash) {
        cuvil_free(hash);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < cap; i++) hash[i] = -1;
    /* n-grams of size k+1 are pool[counts[k] .. counts[k+1]) in runs of k+1; ids count them all */
    int64_t id = 0;
    for (int k = 0; k < nc; k++) {
        int64_t lo = counts[k], hi = k + 1 < nc ? counts[k + 1] : np, size = k + 1;
        if (lo < 0 || hi < lo || hi > np) {
            cuvil_free(hash);
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "ngram_counts[%d] = %lld does not index the pool (%d values) in order",
                                k, (long long)lo, np);
        }
        for (int64_t s = lo; s + size <= hi; s += size, id++) {
            if (size < t->min_n || size > t->max_n) continue;
            if (id >= ni) {
                cuvil_free(hash);
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "ngram_indexes has %d values; the pool has more n-grams", ni);
            }
            uint64_t h = 1469598103934665603ull ^ (uint64_t)size;
            for (int64_t j = 0; j < size; j++) h = (h ^ (uint64_t)pool[s + j]) * 1099511628211ull;
            size_t slot = (size_t)(h & (cap - 1));
            while (hash[slot] >= 0 && !(t->len[hash[slot]] == size &&
                                        !memcmp(pool + t->start[hash[slot]], pool + s, sizeof(int64_t) * (size_t)size)))
                slot = (slot + 1) & (cap - 1);
            if (hash[slot] >= 0) {   /* (the reference's trie keeps the last id; ONNX Runtime refuses) */
                cuvil_free(hash);
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "the pool has an n-gram of length %lld twice (at %lld), as "
                                    "ONNX Runtime refuses too", (long long)size, (long long)s);
            }
            hash[slot] = t->n_grams;
            t->start[t->n_grams] = s;
            t->len[t->n_grams] = size;
            if (t->weights) t->weights[t->n_grams] = w[id];
            t->out[t->n_grams++] = idx[id];
        }
    }
    cuvil_free(hash);
    return CUVIL_OK;
}

static cuvil_status tfidf_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if ((x->dtype != CIR_I32 && x->dtype != CIR_I64) || x->ndim < 1 || x->ndim > 2)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' must be int32 or int64 of rank 1 or 2 (strings are not "
                            "supported)", x->name);
    if (!cir_value_fixed(x)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has symbolic dims", x->name);
    if (x->ndim == 2 && x->dims[0] < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has no rows", x->name);
    op_tfidf t;
    if ((s = op_tfidf_table(g, n, &t))) return s;
    int64_t dims[2] = {x->dims[0], t.out_size};
    if (x->ndim == 1) dims[0] = t.out_size;
    cir_set_shape(cir_out(g, n, 0), CIR_F32, x->ndim, dims);
    return CUVIL_OK;
}

static const cir_attr_spec tfidf_attrs[] = {
    {"mode", CIR_ATTR_ENUM, 0, 0, tfidf_modes, true},
    {"min_gram_length", CIR_ATTR_INT, 0, 0, NULL, true},
    {"max_gram_length", CIR_ATTR_INT, 0, 0, NULL, true},
    {"max_skip_count", CIR_ATTR_INT, 0, 0, NULL, true},
    {"ngram_counts", CIR_ATTR_INTS, 0, 0, NULL, true},
    {"ngram_indexes", CIR_ATTR_INTS, 0, 0, NULL, true},
    {"pool_int64s", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"weights", CIR_ATTR_FLOATS, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_tfidf = {"tfidf", 0, 1, 1, 1, 1, tfidf_attrs, tfidf_infer, NULL, NULL, 0};

/* ===== det ================================================================================ */
/* det (x [..., M, M]): the determinant of each matrix (ONNX Det), LU with partial pivoting in
 * double; float32. */
static cuvil_status det_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; Det takes [..., M, M]", x->name, x->ndim);
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    if ((s = cir_require_eq(g, n, dx[x->ndim - 2], dx[x->ndim - 1], "the matrices' rows and columns"))) return s;
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, x->ndim - 2, dx);
    return CUVIL_OK;
}
const cir_opdef cir_op_det = {"det", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, det_infer, NULL, NULL, 0};

/* ===== rotary ============================================================================= */
/* rotary (x, cos_cache, sin_cache, [position_ids]; interleaved, num_heads,
 * rotary_embedding_dim): ONNX RotaryEmbedding (opset 23) on cuvil_f32_rotary. x is [B, H, S,
 * D] or [B, S, H * D] (num_heads given); the caches [max_pos, rot/2] read at position_ids [B,
 * S] (an id outside them fails the run), or [B, S, rot/2] without ids. float32. */
cuvil_status op_rotary_sizes(cir_graph *g, cir_node *n, op_rotary *r) {
    cir_value *x = cir_in(g, n, 0), *c = cir_in(g, n, 1), *sn = cir_in(g, n, 2), *pos = cir_in(g, n, 3);
    memset(r, 0, sizeof *r);
    if (x->ndim != 3 && x->ndim != 4)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; RotaryEmbedding takes [B, H, S, D] or [B, S, "
                            "hidden]", x->name, x->ndim);
    if (x->dx[x->ndim - 1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the last dim of '%s' is symbolic", x->name);
    r->x4d = x->ndim == 4;
    int64_t heads = cir_attr_int(n, "num_heads"), last = x->dims[x->ndim - 1];
    if (r->x4d) {
        if (x->dx[1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the heads dim of '%s' is symbolic", x->name);
        r->H = x->dims[1];
        r->D = last;
        r->S = cir_dimx(g, x, 2);
    } else {
        if (heads < 1 || last % heads)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "num_heads %lld must divide the hidden size %lld of a 3-D input",
                                (long long)heads, (long long)last);
        r->H = heads;
        r->D = last / heads;
        r->S = cir_dimx(g, x, 1);
    }
    r->B = cir_dimx(g, x, 0);
    r->rot = cir_attr_int(n, "rotary_embedding_dim");
    if (r->rot == 0) r->rot = r->D;
    if (r->rot < 2 || r->rot > r->D || r->rot % 2)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "rotary_embedding_dim %lld must be even and at most the head size %lld",
                            (long long)r->rot, (long long)r->D);
    for (int i = 1; i < 3; i++) {
        cir_value *v = i == 1 ? c : sn;
        if (v->ndim != (pos ? 2 : 3) || v->dx[v->ndim - 1] || v->dims[v->ndim - 1] != r->rot / 2)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s '%s' must be [%s, %lld]", i == 1 ? "cos_cache" : "sin_cache",
                                v->name, pos ? "positions" : "batch, sequence", (long long)(r->rot / 2));
        cuvil_status s;
        if (!pos && ((s = cir_require_eq(g, n, cir_dimx(g, v, 0), r->B, "the caches' and the input's batch")) ||
                     (s = cir_require_eq(g, n, cir_dimx(g, v, 1), r->S, "the caches' and the input's sequence"))))
            return s;
    }
    if (pos) {
        if (pos->dtype != CIR_I64 || pos->ndim != 2)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "position_ids '%s' must be int64 [batch, sequence]", pos->name);
        cuvil_status s;
        if ((s = cir_require_eq(g, n, cir_dimx(g, pos, 0), r->B, "position_ids' and the input's batch")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pos, 1), r->S, "position_ids' and the input's sequence")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, c, 0), cir_dimx(g, sn, 0), "the caches' lengths")))
            return s;
    }
    return CUVIL_OK;
}

static cuvil_status rotary_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 4, 1, 1);
    if (s || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1)) || (s = op_need_f32(g, n, 2))) return s;
    op_rotary r;
    if ((s = op_rotary_sizes(g, n, &r))) return s;
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *dx[4];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, x->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec rotary_attrs[] = {
    {"interleaved", CIR_ATTR_INT, 0, 0, NULL, false},
    {"num_heads", CIR_ATTR_INT, 0, 0, NULL, false},
    {"rotary_embedding_dim", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_rotary = {"rotary", CIR_OPF_SYM_DIMS, 3, 4, 1, 1, rotary_attrs, rotary_infer, NULL, NULL, 0};
