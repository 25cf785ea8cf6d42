/* op_seq.c -- ONNX's sequences of tensors, with a most elements the compile knows and a count
 * that is an expression of the symbols (a sequence graph input's count is one) or only the
 * run's: what SequenceEmpty/Construct/Insert/Erase and SplitToSequence make (each adds or
 * removes a known number of elements), read by SequenceAt, SequenceLength and
 * ConcatFromSequence, Identity and If. A sequence
 * value (cir_value.seq_n >= 0) is one block in the arena: a header of int64s (the count, then
 * each element's dims) and a slot per element with room for the elements' upper bounds. The
 * positions Insert, Erase and At take may be read when the model runs (checked then); which
 * element sits where is then a run-time fact, so a dim the elements do not all share is, in
 * what At returns, a size the run finds, bounded by the largest element's.
 *   seq_empty (; dtype): no elements.
 *   seq_construct (x1, ..., xk): k >= 1 tensors of one type and rank.
 *   seq_insert (S, t [, position]): t inserted before position (default: at the end), in -n..n.
 *   seq_erase (S [, position]): the element at position removed (default: the last), -n..n-1.
 *   seq_at (S, position): a copy of the element at position, -n..n-1.
 *   seq_length (S): the count, int64 (an expression of the symbols, or read from S's header).
 *   split_to_seq (x [, split]; axis, keepdims): x cut along axis into pieces of 1 (keepdims 0
 *     drops the axis), of `split` (a scalar: the last piece shorter), or of split's lengths.
 *   concat_from_seq (S; axis, new_axis): the elements joined along axis, or stacked on a new
 *     axis. */
#include "ir/ops/ops.h"

/* What the elements share: per dim, the expression every element has (NULL: not shared) and
 * the largest any has. rank -1: no element yet. */
typedef struct seq_desc {
    cir_dtype dtype;
    int rank;
    const cir_dim *same[CIR_MAX_DIMS];
    int64_t hi[CIR_MAX_DIMS];
} seq_desc;

static void desc_of_seq(cir_graph *g, const cir_value *s, seq_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = s->dtype;
    d->rank = s->seq_n ? s->ndim : -1;   /* (one that holds no element: any rank) */
    for (int i = 0; i < s->ndim; i++) {
        d->same[i] = (s->seq_same >> i) & 1 ? cir_dimx(g, (cir_value *)s, i) : NULL;
        d->hi[i] = s->dims[i];
    }
}

static void desc_of_tensor(cir_graph *g, const cir_value *x, seq_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = x->dtype;
    d->rank = x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        d->same[i] = cir_dimx(g, (cir_value *)x, i);
        d->hi[i] = x->dims[i];
    }
}

/* d takes element e too: the same type and rank (a first element sets them). */
static cuvil_status desc_add(cir_graph *g, cir_node *n, seq_desc *d, const seq_desc *e, const char *name) {
    if (d->dtype != e->dtype)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' is %s; the sequence's elements are %s", name,
                            cir_dtype_name(e->dtype), cir_dtype_name(d->dtype));
    if (d->rank < 0) {
        *d = *e;
        return CUVIL_OK;
    }
    if (d->rank != e->rank)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "'%s' has rank %d and the sequence's elements rank %d; Cuvil "
                            "takes sequences whose elements share a rank", name, e->rank, d->rank);
    for (int i = 0; i < d->rank; i++) {
        if (d->same[i] != e->same[i]) d->same[i] = NULL;
        if (e->hi[i] > d->hi[i]) d->hi[i] = e->hi[i];
    }
    return CUVIL_OK;
}

static cuvil_status too_many(cir_graph *g, cir_node *n, int64_t count) {
    return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its sequence would hold %lld elements; Cuvil takes at most %d",
                        (long long)count, CIR_SEQ_MAX);
}

/* y becomes a sequence of at most count elements as d describes, cnt its count (NULL: only
 * the run knows it). */
static cuvil_status set_seq_cnt(cir_graph *g, cir_node *n, cir_value *y, const seq_desc *d, int64_t count,
                                const cir_dim *cnt) {
    if (count > CIR_SEQ_MAX) return too_many(g, n, count);
    int64_t dims[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < d->rank; i++) dims[i] = d->hi[i];
    char why[256];
    if (d->rank >= 0 && !cuvil_shape_ok(&g->limits, cir_dtype_size(d->dtype), d->rank, dims, why, sizeof why))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its elements %s", why);
    size_t slot = d->rank < 0 ? 0 : (size_t)cir_dtype_size(d->dtype);
    for (int i = 0; i < d->rank; i++) slot *= (size_t)dims[i];
    if (count && (slot + 64) > g->limits.tensor_bytes / (uint64_t)count)   /* the block, as a tensor's bytes */
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its sequence of %lld elements of up to %zu bytes is over the limit "
                            "tensor_bytes=%llu (raise it with --limit tensor_bytes=N)", (long long)count, slot,
                            (unsigned long long)g->limits.tensor_bytes);
    cir_set_shape(y, d->dtype, d->rank < 0 ? 0 : d->rank, dims);
    y->ndim = d->rank;
    y->seq_n = (int)count;
    y->seq_cnt = cnt;
    y->seq_same = 0;
    for (int i = 0; i < d->rank; i++)
        if (d->same[i]) {
            y->seq_same |= 1u << i;
            y->dx[i] = cir_dim_is_const(d->same[i]) ? NULL : d->same[i];
        }
    return CUVIL_OK;
}

/* ... of exactly count elements */
static cuvil_status set_seq(cir_graph *g, cir_node *n, cir_value *y, const seq_desc *d, int64_t count) {
    const cir_dim *cnt = cir_dim_const(&g->dt, count);
    return cnt ? set_seq_cnt(g, n, y, d, count, cnt) : cir_dim_err(g, n, "the sequence's count");
}

/* S's count plus k (k < 0: at least 0), or NULL where only the run knows S's; *bad where an
 * expression could not be formed. */
static const cir_dim *count_plus(cir_graph *g, const cir_value *S, int64_t k, bool *bad) {
    if (!S->seq_cnt) return NULL;
    const cir_dim *c = cir_dim_add_const(&g->dt, S->seq_cnt, k);
    if (c && k < 0) c = cir_dim_max(&g->dt, c, cir_dim_const(&g->dt, 0));
    *bad = !c;
    return c;
}

static cir_value *seq_input(cir_graph *g, cir_node *n, int i, cuvil_status *s) {
    cir_value *v = cir_in(g, n, i);
    *s = CUVIL_OK;
    if (!v) *s = cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d (the sequence) is omitted", i);
    else if (v->seq_n < 0) *s = cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a tensor; it takes a sequence", v->name);
    return v;
}

static cuvil_status tensor_inputs(cir_graph *g, cir_node *n, int from) {
    for (int i = from; i < n->n_in; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v && v->seq_n >= 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a sequence; it takes a tensor", v->name);
        if (v && !cir_dtype_size(v->dtype)) return op_need_typed(g, n, i, true);
    }
    return CUVIL_OK;
}

/* A position input (i): a scalar int32/int64; checked against lo..hi now where it is constant. */
static cuvil_status position(cir_graph *g, cir_node *n, int i, int64_t lo, int64_t hi) {
    cir_value *p = cir_in(g, n, i);
    if (!p) return CUVIL_OK;
    if ((p->dtype != CIR_I32 && p->dtype != CIR_I64) || cir_numel(p) != 1 || p->ndim > 1 || !cir_value_fixed(p))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "position '%s' must be a scalar int32 or int64", p->name);
    if (cir_is_const(p)) {
        int64_t v = cir_const_i64(p, 0);
        if (v < lo || v > hi)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "position %lld is outside %lld..%lld", (long long)v, (long long)lo,
                                (long long)hi);
    }
    return CUVIL_OK;
}

/* y: what either of sequences a and b (b may be NULL) is, as If's output (which branch runs
 * is the run's to know): the larger bound, each dim that both share alike, the count where
 * both have the same expression of it. */
/* d: what the elements of sequences a and b share (a sequence that holds none takes the other's
 * element type and rank). */
static cuvil_status seq_union(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b, seq_desc *d) {
    seq_desc e;
    desc_of_seq(g, a, d);
    desc_of_seq(g, b, &e);
    if (d->rank < 0) d->dtype = e.dtype;
    if (e.rank < 0) e.dtype = d->dtype;
    return e.rank < 0 ? CUVIL_OK : desc_add(g, n, d, &e, b->name);
}

cuvil_status op_seq_either(cir_graph *g, cir_node *n, cir_value *y, const cir_value *a, const cir_value *b) {
    if (b && (a->seq_n < 0) != (b->seq_n < 0))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "'%s' and '%s' must both be sequences or both tensors", a->name, b->name);
    seq_desc d;
    if (!b) {
        desc_of_seq(g, a, &d);
        return set_seq_cnt(g, n, y, &d, a->seq_n, a->seq_cnt);
    }
    cuvil_status s = seq_union(g, n, a, b, &d);
    if (s) return s;
    return set_seq_cnt(g, n, y, &d, a->seq_n > b->seq_n ? a->seq_n : b->seq_n, a->seq_cnt == b->seq_cnt ? a->seq_cnt : NULL);
}

/* ===== empty, construct, insert, erase ====================================================== */
static cuvil_status empty_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 0, 0, 1, 1);
    if (s) return s;
    seq_desc d = {.dtype = cir_attr_has(n, "dtype") ? (cir_dtype)cir_attr_int(n, "dtype") : CIR_F32, .rank = -1};
    if (!cir_dtype_size(d.dtype)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "element type %s", cir_dtype_name(d.dtype));
    return set_seq(g, n, cir_out(g, n, 0), &d, 0);
}

static cuvil_status construct_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, -1, 1, 1);
    if (s || (s = tensor_inputs(g, n, 0))) return s;
    seq_desc d = {.dtype = cir_in(g, n, 0)->dtype, .rank = -1}, e;
    for (int i = 0; i < n->n_in; i++) {
        cir_value *x = cir_in(g, n, i);
        if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is omitted", i);
        desc_of_tensor(g, x, &e);
        if ((s = desc_add(g, n, &d, &e, x->name))) return s;
    }
    return set_seq(g, n, cir_out(g, n, 0), &d, n->n_in);
}

static cuvil_status insert_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 3, 1, 1);
    cir_value *S = s ? NULL : seq_input(g, n, 0, &s);
    if (s || (s = tensor_inputs(g, n, 1))) return s;
    if ((s = position(g, n, 2, -(int64_t)S->seq_n, S->seq_n))) return s;
    if (!cir_in(g, n, 1)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input 1 (the tensor to insert) is omitted");
    seq_desc d, e;
    desc_of_seq(g, S, &d);
    desc_of_tensor(g, cir_in(g, n, 1), &e);
    if ((s = desc_add(g, n, &d, &e, cir_in(g, n, 1)->name))) return s;
    bool bad = false;
    const cir_dim *cnt = count_plus(g, S, 1, &bad);
    return bad ? cir_dim_err(g, n, "the sequence's count") : set_seq_cnt(g, n, cir_out(g, n, 0), &d, (int64_t)S->seq_n + 1, cnt);
}

static cuvil_status erase_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    cir_value *S = s ? NULL : seq_input(g, n, 0, &s);
    if (s || (s = tensor_inputs(g, n, 1))) return s;
    if (S->seq_n == 0) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "sequence '%s' is empty: nothing to erase", S->name);
    if ((s = position(g, n, 1, -(int64_t)S->seq_n, S->seq_n - 1))) return s;
    seq_desc d;
    desc_of_seq(g, S, &d);
    bool bad = false;
    const cir_dim *cnt = count_plus(g, S, -1, &bad);   /* (an empty one: the kernel refuses it) */
    return bad ? cir_dim_err(g, n, "the sequence's count") : set_seq_cnt(g, n, cir_out(g, n, 0), &d, S->seq_n - 1, cnt);
}

/* ===== at, length ============================================================================ */
static cuvil_status at_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, n->kind == CIR_OP_SEQ_MAP_ARG ? 3 : 2, 1, 1);
    cir_value *S = s ? NULL : seq_input(g, n, 0, &s);
    if (s || (s = tensor_inputs(g, n, 1))) return s;
    if (!cir_in(g, n, 1)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input position is required");
    if (S->seq_n == 0) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "sequence '%s' is empty: no element to take", S->name);
    if ((s = position(g, n, 1, -(int64_t)S->seq_n, S->seq_n - 1))) return s;
    seq_desc d;
    desc_of_seq(g, S, &d);
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int i = 0; i < d.rank; i++) {
        dx[i] = d.same[i];
        if (!dx[i] && (s = op_found_dim(g, n, 0, i, i, d.hi[i], false, &dx[i]))) return s;
    }
    cir_set_shape_x(cir_out(g, n, 0), d.dtype, d.rank, dx);
    return CUVIL_OK;
}

/* seq_map_arg (x, i, count): SequenceMap's body input (onnx_load.c): a sequence's element i
 * (its count must be `count`, the first input's), or a tensor as it is. */
static cuvil_status map_arg_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 3, 1, 1);
    cir_value *x = s ? NULL : cir_in(g, n, 0);
    if (s) return s;
    if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input 0 is omitted");
    if (x->seq_n < 0) {   /* a tensor: the same in every iteration */
        if (!cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, true);
        const cir_dim *dx[CIR_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++) dx[i] = cir_dimx(g, x, i);
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
        return CUVIL_OK;
    }
    return at_infer(g, n);
}

/* seq_join (A, B): A's elements, then B's (a Loop's state appended to from a start that is not
 * empty: op_loop_fold_appends). */
static cuvil_status join_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    cir_value *A = s ? NULL : seq_input(g, n, 0, &s), *B = s ? NULL : seq_input(g, n, 1, &s);
    if (s) return s;
    seq_desc d;
    if ((s = seq_union(g, n, A, B, &d))) return s;
    const cir_dim *cnt = A->seq_cnt && B->seq_cnt ? cir_dim_add(&g->dt, A->seq_cnt, B->seq_cnt) : NULL;
    if (A->seq_cnt && B->seq_cnt && !cnt) return cir_dim_err(g, n, "the sequence's count");
    return set_seq_cnt(g, n, cir_out(g, n, 0), &d, (int64_t)A->seq_n + B->seq_n, cnt);
}

/* opt_elem (x, has; must): ONNX's optional, taken out (OptionalGetElement: must, the run fails
 * without one) or passed on (Identity, an If's branch, a graph output: without one the output
 * holds nothing): a copy of x when has is true. */
static cuvil_status opt_elem_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    cir_value *x = s ? NULL : cir_in(g, n, 0), *h = s ? NULL : cir_in(g, n, 1);
    if (s) return s;
    if (!x || !h || h->dtype != CIR_BOOL || cir_numel(h) != 1 || h->seq_n >= 0)
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "an optional without its value or presence");
    cir_value *y = cir_out(g, n, 0);
    if (x->seq_n >= 0) {
        cir_copy_seq_type(y, x);
        return CUVIL_OK;
    }
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) dx[i] = cir_dimx(g, x, i);
    cir_set_shape_x(y, x->dtype, x->ndim, dx);
    return CUVIL_OK;
}

/* present (x): whether graph input x, an optional one, was given (the caller's buffer is not NULL). */
static cuvil_status present_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    if (!cir_in(g, n, 0) || cir_in(g, n, 0)->kind != CIR_VAL_INPUT)
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "present() of a value that is not a graph input");
    cir_set_shape(cir_out(g, n, 0), CIR_BOOL, 0, NULL);
    return CUVIL_OK;
}

static cuvil_status length_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    cir_value *S = s ? NULL : seq_input(g, n, 0, &s);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    cir_set_shape(y, CIR_I64, 0, NULL);
    if (!S->seq_cnt) return CUVIL_OK;   /* read from its header when the model runs */
    const cir_dim **sv = cuvil_arena_alloc(&g->arena, sizeof *sv);
    if (!sv) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    sv[0] = S->seq_cnt;
    y->sval = sv;   /* written from the expression (codegen's sval_fill) */
    return CUVIL_OK;
}

/* ===== split_to_seq =========================================================================== */
/* x's layout around the axis and the pieces: their count, and each one's length where known
 * (lens[i] -1: read when the model runs). */
cuvil_status op_split_to_seq_layout(cir_graph *g, cir_node *n, int *axis, int64_t *count, int64_t *lens, int *keep) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s || (s = tensor_inputs(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0), *sp = cir_in(g, n, 1);
    if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input 0 is omitted");
    if (x->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a scalar", x->name);
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis))) return s;
    const cir_dim *len = cir_dimx(g, x, *axis);
    *keep = 1;
    if (!sp) {
        if (!cir_dim_is_const(len))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "splits '%s' into pieces of 1 along axis %d, whose length "
                                "follows the symbols; Cuvil needs the count of pieces fixed", x->name, *axis);
        *count = len->hi;
        *keep = cir_attr_int(n, "keepdims") != 0;
        if (*count > CIR_SEQ_MAX) return too_many(g, n, *count);
        for (int64_t i = 0; i < *count; i++) lens[i] = 1;
        return CUVIL_OK;
    }
    if ((sp->dtype != CIR_I32 && sp->dtype != CIR_I64) || sp->ndim > 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "split '%s' must be an int32 or int64 scalar or 1-D tensor", sp->name);
    if (sp->ndim == 0) {
        if (!cir_is_const(sp) || !cir_dim_is_const(len))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "a scalar split needs it and the axis's length fixed");
        int64_t c = cir_const_i64(sp, 0);
        if (c < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "split %lld is not positive", (long long)c);
        *count = len->hi / c + (len->hi % c != 0);
        if (*count > CIR_SEQ_MAX) return too_many(g, n, *count);
        for (int64_t i = 0; i < *count; i++) lens[i] = i + 1 < *count ? c : len->hi - (*count - 1) * c;
        return CUVIL_OK;
    }
    if (!cir_dim_is_const(cir_dimx(g, sp, 0)))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "split '%s' has a length that follows the symbols; Cuvil needs "
                            "the count of pieces fixed", sp->name);
    *count = sp->dims[0];
    if (*count > CIR_SEQ_MAX) return too_many(g, n, *count);
    int64_t sum = 0;
    for (int64_t i = 0; i < *count; i++) {
        lens[i] = cir_is_const(sp) ? cir_const_i64(sp, i) : -1;
        if (cir_is_const(sp) && lens[i] < 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "split[%lld] is %lld, negative", (long long)i, (long long)lens[i]);
        sum += cir_is_const(sp) ? lens[i] : 0;
    }
    if (cir_is_const(sp))
        return cir_require_eq(g, n, cir_dim_const(&g->dt, sum), len, "the split's lengths summing to the axis's");
    return CUVIL_OK;
}

static cuvil_status split_infer(cir_graph *g, cir_node *n) {
    int axis, keep;
    int64_t count, lens[CIR_SEQ_MAX];
    cuvil_status s = op_split_to_seq_layout(g, n, &axis, &count, lens, &keep);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    seq_desc d;
    desc_of_tensor(g, x, &d);
    bool same = count > 0 && lens[0] >= 0;
    for (int64_t i = 1; i < count; i++) same &= lens[i] == lens[0];
    int64_t hi = 0;
    for (int64_t i = 0; i < count; i++) hi = lens[i] < 0 ? x->dims[axis] : lens[i] > hi ? lens[i] : hi;
    d.same[axis] = same ? cir_dim_const(&g->dt, lens[0]) : NULL;
    d.hi[axis] = same ? lens[0] : hi;
    if (!keep) {   /* pieces of 1 without the axis */
        for (int i = axis; i + 1 < d.rank; i++) {
            d.same[i] = d.same[i + 1];
            d.hi[i] = d.hi[i + 1];
        }
        d.rank--;
    }
    return set_seq(g, n, cir_out(g, n, 0), &d, count);
}

/* ===== concat_from_seq ======================================================================== */
cuvil_status op_concat_from_seq_axis(cir_graph *g, cir_node *n, int *axis) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    cir_value *S = s ? NULL : seq_input(g, n, 0, &s);
    if (s) return s;
    if (S->seq_n == 0 || S->ndim < 0)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "sequence '%s' is empty: nothing to concatenate", S->name);
    bool stack = cir_attr_int(n, "new_axis") != 0;
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), S->ndim + stack, "axis", axis))) return s;
    if (!stack && S->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "its elements are scalars (join them with new_axis=1)");
    for (int i = 0; i < S->ndim; i++)
        if ((stack || i != *axis) && !((S->seq_same >> i) & 1))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the elements of '%s' may differ in dim %d, which %s; Cuvil "
                                "needs that dim the same in every element", S->name, i,
                                stack ? "stacking needs alike" : "joining along another axis needs alike");
    return CUVIL_OK;
}

static cuvil_status concat_infer(cir_graph *g, cir_node *n) {
    int axis;
    cuvil_status s = op_concat_from_seq_axis(g, n, &axis);
    if (s) return s;
    cir_value *S = cir_in(g, n, 0);
    bool stack = cir_attr_int(n, "new_axis") != 0;
    const cir_dim *dx[CIR_MAX_DIMS];
    int r = 0;
    for (int i = 0; i < S->ndim + stack; i++) {
        if (stack && i == axis) {
            if (S->seq_cnt) dx[r] = S->seq_cnt;
            else if ((s = op_found_dim(g, n, 0, i, 0, S->seq_n, false, &dx[r]))) return s;
            r++;
            continue;
        }
        int src = stack && i > axis ? i - 1 : i;
        if (!stack && i == axis) {
            if (((S->seq_same >> i) & 1) && S->seq_cnt) {
                dx[r] = cir_dim_mul(&g->dt, S->seq_cnt, cir_dimx(g, S, i));
            } else if ((s = op_found_dim(g, n, 0, i, 0, S->dims[i] * S->seq_n, false, &dx[r]))) {
                return s;
            }
            if (!dx[r]) return cir_dim_err(g, n, "the joined axis");
            r++;
            continue;
        }
        dx[r++] = cir_dimx(g, S, src);
    }
    cir_set_shape_x(cir_out(g, n, 0), S->dtype, r, dx);
    return CUVIL_OK;
}

static const cir_attr_spec empty_attrs[] = {{"dtype", CIR_ATTR_DTYPE, CIR_F32, 0, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec split_attrs[] = {
    {"axis", CIR_ATTR_INT, 0, 0, NULL, false},
    {"keepdims", CIR_ATTR_INT, 1, 0, NULL, false},
    CIR_ATTR_END,
};
static const cir_attr_spec concat_attrs[] = {
    {"axis", CIR_ATTR_INT, 0, 0, NULL, true},
    {"new_axis", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_seq_empty = {"seq_empty", CIR_OPF_SYM_DIMS, 0, 0, 1, 1, empty_attrs, empty_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_construct = {"seq_construct", CIR_OPF_SYM_DIMS, 1, -1, 1, 1, NULL, construct_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_insert = {"seq_insert", CIR_OPF_SYM_DIMS, 2, 3, 1, 1, NULL, insert_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_erase = {"seq_erase", CIR_OPF_SYM_DIMS, 1, 2, 1, 1, NULL, erase_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_at = {"seq_at", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, NULL, at_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_map_arg = {"seq_map_arg", CIR_OPF_SYM_DIMS, 3, 3, 1, 1, NULL, map_arg_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_join = {"seq_join", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, NULL, join_infer, NULL, NULL, 0};
static const cir_attr_spec opt_elem_attrs[] = {{"must", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_opt_elem = {"opt_elem", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, opt_elem_attrs, opt_elem_infer, NULL, NULL, 0};
const cir_opdef cir_op_present = {"present", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, present_infer, NULL, NULL, 0};
const cir_opdef cir_op_seq_length = {"seq_length", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, length_infer, NULL, NULL, 0};
const cir_opdef cir_op_split_to_seq = {"split_to_seq", CIR_OPF_SYM_DIMS, 1, 2, 1, 1, split_attrs, split_infer, NULL, NULL, 0};
const cir_opdef cir_op_concat_from_seq = {"concat_from_seq", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, concat_attrs, concat_infer, NULL,
                                          NULL, 0};
