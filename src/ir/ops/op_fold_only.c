/* op_fold_only.c -- ops exporters use for shape arithmetic and masks. constant_of_shape
 * (shape, [value]) and range fold when every input is constant; otherwise they run when the
 * model runs (emit_shape.c), their sizes expressions of the symbols, of values read from
 * tensors, or (a float range) a count the node finds; expand and tile (shape or repeats
 * constant, expressions or read from a tensor), the comparisons, not/and/or/xor and where also
 * run at run time on every element type, sum and mean on float32 and float64, is_nan and
 * is_inf on the float types. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>


/* ===== Helpers ========================================================================== */
static bool is_float(cir_dtype t) { return cir_dtype_is_float(t); }

static bool known_type(cir_dtype t) { return cir_dtype_size(t) != 0; }

/* Sets output 0 after checking its dims (model-supplied) are not negative; shape inference then
 * checks the whole shape against the limits, and folding against limits.folded_bytes. */
static cuvil_status set_out(cir_graph *g, cir_node *n, cir_dtype t, int ndim, const int64_t *dims) {
    for (int d = 0; d < ndim; d++)
        if (dims[d] < 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "output dim %d = %lld is negative", d, (long long)dims[d]);
    cir_set_shape(cir_out(g, n, 0), t, ndim, dims);
    return CUVIL_OK;
}

/* numpy broadcast of inputs [first, first + count) into ndim/dx, the dims as expressions
 * (op_broadcast_x: dims that may differ get guards). */
static cuvil_status bcast_inputs_x(cir_graph *g, cir_node *n, int first, int count, int *ndim, const cir_dim **dx) {
    cir_value acc = *cir_in(g, n, first);
    for (int i = first + 1; i < first + count; i++) {
        int nd;
        const cir_dim *d[CIR_MAX_DIMS];
        cuvil_status s = op_broadcast_x(g, n, &acc, cir_in(g, n, i), &nd, d);
        if (s) return s;
        cir_set_shape_x(&acc, acc.dtype, nd, d);
    }
    *ndim = acc.ndim;
    for (int d = 0; d < acc.ndim; d++) dx[d] = cir_dimx(g, &acc, d);
    return CUVIL_OK;
}

/* set_out for dims as expressions: each must be at least 0 for every value of the symbols. */
static cuvil_status set_out_x(cir_graph *g, cir_node *n, cir_dtype t, int ndim, const cir_dim **dx) {
    for (int d = 0; d < ndim; d++) {
        if (!dx[d]) return cir_dim_err(g, n, "the output's dims");
        if (dx[d]->lo < 0) {
            cuvil_sb e = {0};
            cir_dim_print(&e, &g->dt, dx[d]);
            cuvil_status s = cir_node_err(g, n, dx[d]->hi < 0 ? CUVIL_ERR_MODEL : CUVIL_ERR_UNSUPPORTED,
                                          "output dim %d = %s may be negative", d, e.s ? e.s : "?");
            cuvil_sb_free(&e);
            return s;
        }
    }
    cir_set_shape_x(cir_out(g, n, 0), t, ndim, dx);
    return CUVIL_OK;
}

/* Walks the output index space: offsets of element i's source in each broadcast input. */
typedef struct bcast_walk {
    int ndim, n;
    int64_t dims[CIR_MAX_DIMS], idx[CIR_MAX_DIMS];
    int64_t strides[3][CIR_MAX_DIMS];
    int64_t off[3];
} bcast_walk;

static void walk_init(bcast_walk *w, const cir_value *y, const cir_value *const *ins, int n) {
    memset(w, 0, sizeof *w);
    w->ndim = y->ndim;
    w->n = n;
    memcpy(w->dims, y->dims, sizeof w->dims);
    for (int k = 0; k < n; k++) op_bcast_strides(ins[k], y->ndim, y->dims, w->strides[k]);
}

static void walk_next(bcast_walk *w) {
    for (int d = w->ndim - 1; d >= 0; d--) {
        for (int k = 0; k < w->n; k++) w->off[k] += w->strides[k][d];
        if (++w->idx[d] < w->dims[d]) return;
        for (int k = 0; k < w->n; k++) w->off[k] -= w->strides[k][d] * w->dims[d];
        w->idx[d] = 0;
    }
}

/* Copies each output element from its broadcast source (any dtype). */
static void bcast_copy(const cir_value *x, cir_value *y) {
    size_t es = cir_dtype_size(y->dtype);
    const cir_value *ins[1] = {x};
    bcast_walk w;
    walk_init(&w, y, ins, 1);
    int64_t cnt = cir_numel(y);
    for (int64_t i = 0; i < cnt; i++, walk_next(&w))
        memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)w.off[0] * es, es);
}

/* ===== ConstantOfShape ================================================================== */
static cuvil_status cos_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    if (cir_in(g, n, 0)->ndim != 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the shape input '%s' must be 1-D, it has rank %d", cir_in(g, n, 0)->name,
                            cir_in(g, n, 0)->ndim);
    int64_t dims[CIR_MAX_DIMS];
    const cir_dim *dx[CIR_MAX_DIMS];
    int nd;
    /* a shape known as expressions, or read from a tensor when the model runs */
    bool sym = !cir_is_const(cir_in(g, n, 0));
    if ((s = sym ? op_size_ints(g, n, 0, "input", dx, CIR_MAX_DIMS, &nd, 0, g->limits.dim)
                 : op_const_ints(g, n, 0, "input", dims, CIR_MAX_DIMS, &nd)))
        return s;
    cir_dtype t = CIR_F32;
    cir_value *v = cir_in(g, n, 1);
    if (v) {
        if (!cir_is_const(v) || cir_numel(v) != 1)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "value '%s' must be a constant one-element tensor", v->name);
        if (!known_type(v->dtype))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "value of type %s", cir_dtype_name(v->dtype));
        t = v->dtype;
    }
    return sym ? set_out_x(g, n, t, nd, dx) : set_out(g, n, t, nd, dims);
}

static cuvil_status cos_fold(cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    cir_value *val = cir_in(g, n, 1);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (!val) return CUVIL_OK;   /* float32 zeros */
    size_t es = cir_dtype_size(y->dtype);
    const void *v = val->data;
    int64_t cnt = cir_numel(y);
    for (int64_t i = 0; i < cnt; i++) memcpy((char *)y->data + (size_t)i * es, v, es);
    return CUVIL_OK;
}

/* ===== Range ============================================================================== */
/* Element count max(ceil((limit - start) / delta), 0), exact for integer types. */
static cuvil_status range_count(cir_graph *g, cir_node *n, int64_t *count) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1), *c = cir_in(g, n, 2);
    if (is_float(a->dtype)) {
        double start = cir_const_f64(a, 0), limit = cir_const_f64(b, 0), delta = cir_const_f64(c, 0);
        double k = ceil((limit - start) / delta);
        if (delta == 0 || isnan(k)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "delta is 0 or the range is not a number");
        if (k > 1e15) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the range has %g elements", k);
        *count = k > 0 ? (int64_t)k : 0;
        return CUVIL_OK;
    }
    int64_t start = cir_const_i64(a, 0), limit = cir_const_i64(b, 0), delta = cir_const_i64(c, 0), diff;
    if (delta == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "delta is 0");
    if (__builtin_sub_overflow(limit, start, &diff))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the range from %lld to %lld is too large", (long long)start,
                            (long long)limit);
    /* ceil division with operands of one sign; C truncation toward zero is the ceiling */
    if (delta > 0) *count = diff > 0 ? 1 + (diff - 1) / delta : 0;
    else *count = diff < 0 ? 1 + (diff + 1) / delta : 0;
    return CUVIL_OK;
}

/* A float scalar that holds an integer known as an expression: a constant of an integer value,
 * or a Cast to float of an integer scalar whose value is a constant or an expression of the
 * symbols (YOLOv8's anchors: Range(0, Cast(Shape(x)[3]), 1)), within +-2^24 where float32 holds
 * every integer; else NULL. */
static const cir_dim *float_int(cir_graph *g, const cir_value *v) {
    const double lim = 16777216.0;
    if (cir_is_const(v)) {
        const double x = cir_const_f64(v, 0);
        return x == floor(x) && fabs(x) <= lim ? cir_dim_const(&g->dt, (int64_t)x) : NULL;
    }
    if (v->producer < 0) return NULL;
    const cir_node *c = cir_node_at(g, v->producer);
    const cir_value *i = c->dead || c->kind != CIR_OP_CAST || c->n_in != 1 ? NULL : cir_in(g, c, 0);
    if (!i || !cir_dtype_is_int(i->dtype) || cir_numel(i) != 1 || (!i->sval && !cir_is_const(i))) return NULL;
    const cir_dim *e = cir_sval_at(g, i, 0);
    return e && e->lo >= -lim && e->hi <= lim ? e : NULL;
}

static cuvil_status range_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 3, 1, 1);
    if (s) return s;
    cir_value *a = cir_in(g, n, 0);
    cir_dtype t = a->dtype;
    g->half_input |= t == CIR_F16 || t == CIR_BF16;   /* computed in float32 between casts */
    if (t != CIR_F32 && t != CIR_F64 && t != CIR_I16 && t != CIR_I32 &&
        t != CIR_I64)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "start '%s' has type %s; Range takes float, double, int16, int32, int64",
                            a->name, cir_dtype_name(t));
    for (int i = 0; i < 3; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v->dtype != t)
            return cir_node_err(g, n, CUVIL_ERR_DTYPE, "input '%s' is %s, start is %s", v->name, cir_dtype_name(v->dtype),
                                cir_dtype_name(t));
        if (cir_numel(v) != 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' must be a scalar", v->name);
    }
    cir_value *b = cir_in(g, n, 1), *c = cir_in(g, n, 2);
    const cir_dim *de = cir_is_const(c) || c->sval ? cir_sval_at(g, c, 0) : NULL;
    if ((!cir_is_const(a) || !cir_is_const(b)) && (t == CIR_I32 || t == CIR_I64) && de && cir_dim_is_const(de) && de->c != 0) {
        /* integer bounds known as expressions (a length from a Shape) or read when the model
         * runs, a constant delta: the count is an expression of them; the values are computed
         * when the model runs, from start and delta */
        const cir_dim *st, *li, *cnt;
        int one;
        int64_t lim = (int64_t)g->limits.dim;
        if ((s = op_size_ints(g, n, 0, "start", &st, 1, &one, -lim, lim)) ||
            (s = op_size_ints(g, n, 1, "limit", &li, 1, &one, -lim, lim)))
            return s;
        cir_dimtab *tb = &g->dt;
        cnt = de->c > 0 ? cir_dim_cdiv(tb, cir_dim_sub(tb, li, st), de)
                        : cir_dim_cdiv(tb, cir_dim_sub(tb, st, li), cir_dim_const(tb, -de->c));
        cnt = cir_dim_max(tb, cnt, cir_dim_const(tb, 0));
        return set_out_x(g, n, t, 1, &cnt);
    }
    if ((t == CIR_F32 || t == CIR_F64) && (!cir_is_const(a) || !cir_is_const(b)) && cir_is_const(c) &&
        fabs(cir_const_f64(c, 0)) == 1.0) {
        /* float bounds that hold integers known as expressions, a delta of +-1: the count
         * (limit - start, or start - limit) is exact, an expression of them */
        const cir_dim *st = float_int(g, a), *li = float_int(g, b);
        if (st && li) {
            cir_dimtab *tb = &g->dt;
            const cir_dim *cnt = cir_const_f64(c, 0) > 0 ? cir_dim_sub(tb, li, st) : cir_dim_sub(tb, st, li);
            cnt = cir_dim_max(tb, cnt, cir_dim_const(tb, 0));
            return set_out_x(g, n, t, 1, &cnt);
        }
    }
    if (!cir_is_const(a) || !cir_is_const(b) || !cir_is_const(c)) {
        /* read when the model runs (a float range, a delta not constant): the count is a size
         * the node finds, bounded by the output's declared size or a --dim naming it */
        const cir_dim *cnt;
        if ((s = op_found_dim(g, n, 0, 0, 0, -1, false, &cnt))) return s;
        return set_out_x(g, n, t, 1, &cnt);
    }
    int64_t count;
    if ((s = range_count(g, n, &count))) return s;
    return set_out(g, n, t, 1, &count);
}

static cuvil_status range_fold(cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0), *c = cir_in(g, n, 2), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int64_t cnt = y->dims[0];
    if (is_float(y->dtype)) {
        /* start + i * delta, rounded once to the output type (numpy's arange) */
        double start = cir_const_f64(a, 0), delta = cir_const_f64(c, 0);
        for (int64_t i = 0; i < cnt; i++) cir_const_set_f64(y, i, start + (double)i * delta);
    } else {
        int64_t start = cir_const_i64(a, 0), delta = cir_const_i64(c, 0);
        for (int64_t i = 0; i < cnt; i++) cir_const_set_i64(y, i, start + i * delta);   /* stays within [start, limit) */
    }
    return CUVIL_OK;
}

/* ===== Expand =============================================================================== */
/* The output dims of expanding x to `shape` (its dims the shape's values): numpy broadcasting,
 * where a number c other than 1 against a value s of the shape read when the model runs is c,
 * with the guard (c - s)(s - 1) = 0 (s is 1 or c; ONNX Runtime's rule), not the guard s = c of
 * two operands' dims. */
static cuvil_status expand_dims_x(cir_graph *g, cir_node *n, const cir_value *x, const cir_value *shape, int *ndim,
                                  const cir_dim **dx) {
    cir_dimtab *t = &g->dt;
    int r = x->ndim > shape->ndim ? x->ndim : shape->ndim;
    const cir_dim *one = cir_dim_const(t, 1);
    for (int i = 0; i < r; i++) {
        int ia = i - (r - x->ndim), ib = i - (r - shape->ndim);
        const cir_dim *a = ia >= 0 ? cir_dimx(g, x, ia) : one, *b = ib >= 0 ? cir_dimx(g, shape, ib) : one;
        if (!a || !b) return cir_dim_err(g, n, "broadcasting");
        if (cir_dim_is_const(a) && a->c != 1 && !cir_dim_is_const(b) && cir_dim_uses_rt(g, b)) {
            /* s <= c, and for c >= 2 also s >= 1 and (s - 1) mod (c - 1) = 0: s is 1 or c (s >= 0) */
            char what[160];
            snprintf(what, sizeof what, "shape[%d] must be 1 or %lld (the input's dim) when the model runs; the checks on "
                     "its value", ib, (long long)a->c);
            cuvil_status s = cir_require_le(g, n, b, a->c ? a : one, what);
            if (!s && a->c >= 2)
                s = cir_require_le(g, n, one, b, what) ||
                    cir_require_eq(g, n, cir_dim_mod(t, cir_dim_add_const(t, b, -1), cir_dim_const(t, a->c - 1)),
                                   cir_dim_const(t, 0), what) ? g->ctx->status : CUVIL_OK;
            if (s) return s;
            dx[i] = a;
            continue;
        }
        cir_value pa = {0}, pb = {0};
        for (int d = 0; d < CIR_MAX_DIMS; d++) pa.dim_sym[d] = pb.dim_sym[d] = -1;
        pa.name = x->name;
        pb.name = shape->name;
        cir_set_shape_x(&pa, x->dtype, 1, &a);
        cir_set_shape_x(&pb, CIR_I64, 1, &b);
        int one_nd;
        cuvil_status s = op_broadcast_x(g, n, &pa, &pb, &one_nd, &dx[i]);
        if (s) return s;
    }
    *ndim = r;
    return CUVIL_OK;
}

static cuvil_status expand_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), shape;
    memset(&shape, 0, sizeof shape);
    for (int d = 0; d < CIR_MAX_DIMS; d++) shape.dim_sym[d] = -1;
    shape.name = cir_in(g, n, 1)->name;
    if (!cir_is_const(cir_in(g, n, 1)) || !cir_value_fixed(x)) {   /* dims as expressions */
        const cir_dim *sd[CIR_MAX_DIMS], *dx[CIR_MAX_DIMS];
        int nd;
        if ((s = op_size_ints(g, n, 1, "shape", sd, CIR_MAX_DIMS, &nd, 0, g->limits.dim))) return s;
        for (int d = 0; d < nd; d++)
            if (sd[d]->lo < 0)
                return cir_node_err(g, n, sd[d]->hi < 0 ? CUVIL_ERR_MODEL : CUVIL_ERR_UNSUPPORTED, "shape[%d] may be negative", d);
        if (!known_type(x->dtype))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
        cir_set_shape_x(&shape, CIR_I64, nd, sd);
        return (s = expand_dims_x(g, n, x, &shape, &nd, dx)) ? s : set_out_x(g, n, x->dtype, nd, dx);
    }
    if ((s = op_const_ints(g, n, 1, "shape", shape.dims, CIR_MAX_DIMS, &shape.ndim))) return s;
    for (int d = 0; d < shape.ndim; d++)
        if (shape.dims[d] < 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape[%d]=%lld is negative", d, (long long)shape.dims[d]);
    if (!known_type(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    int nd;
    int64_t dims[CIR_MAX_DIMS];
    return (s = op_broadcast(g, n, x, &shape, &nd, dims)) ? s : set_out(g, n, x->dtype, nd, dims);
}

static cuvil_status expand_fold(cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    bcast_copy(cir_in(g, n, 0), y);
    return CUVIL_OK;
}

/* ===== Comparisons and logic ============================================================ */
enum { L_EQ, L_LT, L_GT, L_LE, L_GE, L_NOT, L_AND, L_OR, L_XOR };

static int logic_op(const cir_node *n) {
    switch (n->kind) {
    case CIR_OP_EQUAL: return L_EQ;
    case CIR_OP_LESS: return L_LT;
    case CIR_OP_GREATER: return L_GT;
    case CIR_OP_LESS_EQUAL: return L_LE;
    case CIR_OP_GREATER_EQUAL: return L_GE;
    case CIR_OP_NOT: return L_NOT;
    case CIR_OP_AND: return L_AND;
    case CIR_OP_OR: return L_OR;
    case CIR_OP_XOR: return L_XOR;
    default: CUVIL_ASSERT(!"not a logic op");
    }
}

static cuvil_status logic_infer(cir_graph *g, cir_node *n) {
    int op = logic_op(n), nin = op == L_NOT ? 1 : 2;
    cuvil_status s = op_check_arity(g, n, nin, nin, 1, 1);
    if (s) return s;
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, nin - 1);
    bool logical = op >= L_NOT;
    if (logical && (a->dtype != CIR_BOOL || b->dtype != CIR_BOOL))
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs must be bool; '%s' is %s",
                            a->dtype != CIR_BOOL ? a->name : b->name,
                            cir_dtype_name(a->dtype != CIR_BOOL ? a->dtype : b->dtype));
    if (a->dtype != b->dtype)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", a->name,
                            cir_dtype_name(a->dtype), b->name, cir_dtype_name(b->dtype));
    if (!known_type(a->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", a->name, cir_dtype_name(a->dtype));
    int nd;
    const cir_dim *dx[CIR_MAX_DIMS];
    if ((s = bcast_inputs_x(g, n, 0, nin, &nd, dx)) || (s = set_out_x(g, n, CIR_BOOL, nd, dx))) return s;
    return CUVIL_OK;
}

static cuvil_status logic_fold(cir_graph *g, cir_node *n) {
    int op = logic_op(n), nin = op == L_NOT ? 1 : 2;
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, nin - 1), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    const cir_value *ins[2] = {a, b};
    bcast_walk w;
    walk_init(&w, y, ins, 2);
    bool fp = is_float(a->dtype);
    int64_t cnt = cir_numel(y);
    for (int64_t i = 0; i < cnt; i++, walk_next(&w)) {
        int r;
        if (op >= L_NOT) {
            bool p = cir_const_i64(a, w.off[0]) != 0, q = cir_const_i64(b, w.off[1]) != 0;
            r = op == L_NOT ? !p : op == L_AND ? p && q : op == L_OR ? p || q : p != q;
        } else {
            /* integers compare exactly; floats as doubles (NaN compares false, as in IEEE) */
            int c;
            if (fp) {
                double p = cir_const_f64(a, w.off[0]), q = cir_const_f64(b, w.off[1]);
                c = p < q ? -1 : p > q ? 1 : p == q ? 0 : 2;
            } else {
                int64_t p = cir_const_i64(a, w.off[0]), q = cir_const_i64(b, w.off[1]);
                c = p < q ? -1 : p > q;
            }
            r = op == L_EQ   ? c == 0
                : op == L_LT ? c == -1
                : op == L_GT ? c == 1
                : op == L_LE ? c == -1 || c == 0
                             : c == 1 || c == 0;
        }
        ((uint8_t *)y->data)[i] = (uint8_t)r;
    }
    return CUVIL_OK;
}

/* ===== Where ================================================================================ */
static cuvil_status where_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 3, 1, 1);
    if (s) return s;
    cir_value *c = cir_in(g, n, 0), *x = cir_in(g, n, 1), *y = cir_in(g, n, 2);
    if (c->dtype != CIR_BOOL)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "condition '%s' is %s, not bool", c->name, cir_dtype_name(c->dtype));
    if (x->dtype != y->dtype)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", x->name,
                            cir_dtype_name(x->dtype), y->name, cir_dtype_name(y->dtype));
    if (!known_type(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    int nd;
    const cir_dim *dx[CIR_MAX_DIMS];
    if ((s = bcast_inputs_x(g, n, 0, 3, &nd, dx)) || (s = set_out_x(g, n, x->dtype, nd, dx))) return s;
    return CUVIL_OK;
}

static cuvil_status where_fold(cir_graph *g, cir_node *n) {
    cir_value *c = cir_in(g, n, 0), *x = cir_in(g, n, 1), *y = cir_in(g, n, 2), *out = cir_out(g, n, 0);
    if (!cir_value_make_const(g, out)) return g->ctx->status;
    const cir_value *ins[3] = {c, x, y};
    bcast_walk w;
    walk_init(&w, out, ins, 3);
    size_t es = cir_dtype_size(out->dtype);
    int64_t cnt = cir_numel(out);
    for (int64_t i = 0; i < cnt; i++, walk_next(&w)) {
        bool pick_x = ((const uint8_t *)c->data)[w.off[0]] != 0;
        const cir_value *src = pick_x ? x : y;
        memcpy((char *)out->data + (size_t)i * es, (const char *)src->data + (size_t)w.off[pick_x ? 1 : 2] * es, es);
    }
    return CUVIL_OK;
}

/* ===== Tile ================================================================================== */
static cuvil_status tile_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t rep[CIR_MAX_DIMS], dims[CIR_MAX_DIMS];
    int cnt;
    if (!cir_is_const(cir_in(g, n, 1))) {   /* repeats known as expressions, or read when the model runs */
        const cir_dim *rx[CIR_MAX_DIMS], *dx[CIR_MAX_DIMS];
        if ((s = op_size_ints(g, n, 1, "repeats", rx, CIR_MAX_DIMS, &cnt, 0, g->limits.dim))) return s;
        if (cnt != x->ndim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "repeats has %d values for input '%s' of rank %d", cnt, x->name,
                                x->ndim);
        if (!known_type(x->dtype))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
        for (int d = 0; d < cnt; d++) {
            if (rx[d]->lo < 0)
                return cir_node_err(g, n, rx[d]->hi < 0 ? CUVIL_ERR_MODEL : CUVIL_ERR_UNSUPPORTED, "repeats[%d] may be negative", d);
            if (!(dx[d] = cir_dim_mul(&g->dt, cir_dimx(g, x, d), rx[d]))) return cir_dim_err(g, n, "the output's dims");
        }
        return set_out_x(g, n, x->dtype, x->ndim, dx);
    }
    if ((s = op_const_ints(g, n, 1, "repeats", rep, CIR_MAX_DIMS, &cnt))) return s;
    if (cnt != x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "repeats has %d values for input '%s' of rank %d", cnt, x->name, x->ndim);
    if (!known_type(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < cnt; d++) {
        if (rep[d] < 0 || __builtin_mul_overflow(x->dims[d], rep[d], &dims[d]))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "repeats[%d]=%lld is invalid", d, (long long)rep[d]);
        dx[d] = cir_dim_scale(&g->dt, cir_dimx(g, x, d), rep[d]);
    }
    if ((s = set_out_x(g, n, x->dtype, x->ndim, dx))) return s;
    return CUVIL_OK;
}

static cuvil_status tile_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    size_t es = cir_dtype_size(y->dtype);
    int64_t cnt = cir_numel(y), idx[CIR_MAX_DIMS] = {0};
    for (int64_t i = 0; i < cnt; i++) {
        int64_t off = 0;
        for (int d = 0; d < x->ndim; d++) off = off * x->dims[d] + idx[d] % x->dims[d];
        memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
        for (int d = y->ndim - 1; d >= 0 && ++idx[d] == y->dims[d]; d--) idx[d] = 0;
    }
    return CUVIL_OK;
}

/* ===== Sum, Mean ============================================================================= */
static cuvil_status sum_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, -1, 1, 1);
    if (s) return s;
    cir_value *a = cir_in(g, n, 0);
    for (int i = 0; i < n->n_in; i++) {
        cir_value *v = cir_in(g, n, i);
        if (!v) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is missing", i);
        if (v->dtype != a->dtype)
            return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", a->name,
                                cir_dtype_name(a->dtype), v->name, cir_dtype_name(v->dtype));
    }
    if (a->dtype != CIR_F32 && a->dtype != CIR_F64) {
        g->half_input |= a->dtype == CIR_F16 || a->dtype == CIR_BF16;   /* computed in float32 between casts */
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; only float32 and float64 are supported", a->name,
                            cir_dtype_name(a->dtype));
    }
    bool numpy = cir_attr_int(n, "broadcast") == 0;
    for (int i = 1; !numpy && i < n->n_in; i++) {   /* broadcast=none: ONNX before opset 8 */
        cir_value *v = cir_in(g, n, i);
        if (v->ndim != a->ndim || memcmp(v->dims, a->dims, sizeof(int64_t) * (size_t)a->ndim))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "inputs '%s' and '%s' must have one shape (this node does not "
                                "broadcast: broadcast=none)", a->name, v->name);
    }
    int nd;
    const cir_dim *dx[CIR_MAX_DIMS];
    if ((s = bcast_inputs_x(g, n, 0, n->n_in, &nd, dx)) || (s = set_out_x(g, n, a->dtype, nd, dx))) return s;
    return CUVIL_OK;   /* folded, or run as a chain of broadcasting adds (emit_logic.c) */
}

static cuvil_status sum_fold(cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    bool mean = n->kind == CIR_OP_MEAN;
    int64_t cnt = cir_numel(y);
    /* inputs in order, each broadcast onto y, accumulated in double */
    double *acc = cuvil_calloc((size_t)cnt + 1, sizeof *acc);
    if (!acc) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n->n_in; k++) {
        cir_value *x = cir_in(g, n, k);
        const cir_value *ins[1] = {x};
        bcast_walk w;
        walk_init(&w, y, ins, 1);
        for (int64_t i = 0; i < cnt; i++, walk_next(&w)) acc[i] += cir_const_f64(x, w.off[0]);
    }
    for (int64_t i = 0; i < cnt; i++) cir_const_set_f64(y, i, mean ? acc[i] / n->n_in : acc[i]);
    cuvil_free(acc);
    return CUVIL_OK;
}

/* ===== IsNaN, IsInf ======================================================================== */
/* The classes a node detects: CUVIL_CLASS_* bits. */
int op_float_class_mask(const cir_node *n) {
    if (n->kind == CIR_OP_IS_NAN) return CUVIL_CLASS_NAN;
    return (cir_attr_int(n, "detect_positive") ? CUVIL_CLASS_POS_INF : 0) |
           (cir_attr_int(n, "detect_negative") ? CUVIL_CLASS_NEG_INF : 0);
}

static cuvil_status class_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!is_float(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "input '%s' is %s; %s takes float types", x->name,
                            cir_dtype_name(x->dtype), n->def->name);
    cir_set_shape_like(cir_out(g, n, 0), CIR_BOOL, x);
    return CUVIL_OK;
}

static cuvil_status class_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_float_class_t(x->dtype, op_float_class_mask(n), x->data, y->data, cir_numel(x));
    return CUVIL_OK;
}

static const cir_attr_spec isinf_attrs[] = {
    {"detect_positive", CIR_ATTR_INT, 1, 0, NULL, false},
    {"detect_negative", CIR_ATTR_INT, 1, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_is_nan = {"is_nan", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, class_infer, class_fold, NULL, 0};
const cir_opdef cir_op_is_inf = {"is_inf", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, isinf_attrs, class_infer, class_fold, NULL, 0};

static const char *const sum_bcast[] = {"numpy", "none", NULL};
static const cir_attr_spec sum_attrs[] = {{"broadcast", CIR_ATTR_ENUM, 0, 0, sum_bcast, false}, CIR_ATTR_END};

/* flags: CIR_OPF_FOLD_ONLY for the ops without a kernel, CIR_OPF_SHAPE_DATA for those whose
 * output's shape is their inputs' data (codegen emits the others, and those when revived) */
#define FOLD_OP(name, flags, lo, hi, attrs, infer, fold) \
    const cir_opdef cir_op_##name = {#name, flags, lo, hi, 1, 1, attrs, infer, fold, NULL, 0};
FOLD_OP(constant_of_shape, CIR_OPF_SHAPE_DATA | CIR_OPF_SYM_DIMS, 1, 2, NULL, cos_infer, cos_fold)
FOLD_OP(range, CIR_OPF_SHAPE_DATA | CIR_OPF_SYM_DIMS, 3, 3, NULL, range_infer, range_fold)
FOLD_OP(expand, CIR_OPF_SYM_DIMS, 2, 2, NULL, expand_infer, expand_fold)
FOLD_OP(equal, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(less, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(greater, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(less_equal, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(greater_equal, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(not, CIR_OPF_SYM_DIMS, 1, 1, NULL, logic_infer, logic_fold)
FOLD_OP(and, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(or, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(xor, CIR_OPF_SYM_DIMS, 2, 2, NULL, logic_infer, logic_fold)
FOLD_OP(where, CIR_OPF_SYM_DIMS, 3, 3, NULL, where_infer, where_fold)
FOLD_OP(tile, CIR_OPF_SYM_DIMS, 2, 2, NULL, tile_infer, tile_fold)
FOLD_OP(sum, CIR_OPF_SYM_DIMS, 1, -1, sum_attrs, sum_infer, sum_fold)
FOLD_OP(mean, CIR_OPF_SYM_DIMS, 1, -1, sum_attrs, sum_infer, sum_fold)
