/* op_reduce.c -- reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod,
 * reduce_sum_square, reduce_l1, reduce_l2, reduce_log_sum_exp over the constant axes of input 1
 * (absent or empty: all, unless noop_with_empty_axes). float32 at run time and folded with the
 * same kernel; other numeric types fold with a naive loop (shape arithmetic). */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

static int reduce_kind(const cir_node *n) {
    switch (n->kind) {
    case CIR_OP_REDUCE_SUM: return CUVIL_REDUCE_SUM;
    case CIR_OP_REDUCE_MEAN: return CUVIL_REDUCE_MEAN;
    case CIR_OP_REDUCE_MAX: return CUVIL_REDUCE_MAX;
    case CIR_OP_REDUCE_MIN: return CUVIL_REDUCE_MIN;
    case CIR_OP_REDUCE_PROD: return CUVIL_REDUCE_PROD;
    case CIR_OP_REDUCE_SUM_SQUARE: return CUVIL_REDUCE_SUM_SQUARE;
    case CIR_OP_REDUCE_L1: return CUVIL_REDUCE_L1;
    case CIR_OP_REDUCE_L2: return CUVIL_REDUCE_L2;
    case CIR_OP_REDUCE_LOG_SUM_EXP: return CUVIL_REDUCE_LOG_SUM_EXP;
    default: CUVIL_ASSERT(!"not a reduction");
    }
}

/* The kernel parameters (mask bit d: axis d is reduced) and the output shape. Absent or
 * empty axes reduce everything, unless noop_with_empty_axes makes the node an identity. */
cuvil_status op_reduce_params(cir_graph *g, cir_node *n, cuvil_reduce_params *p, int *ndim, int64_t *dims) {
    cir_value *x = cir_in(g, n, 0);
    memset(p, 0, sizeof *p);
    p->op = reduce_kind(n);
    p->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) p->dims[d] = x->dims[d];
    int64_t axes[CIR_MAX_DIMS];
    int na = -1;
    cuvil_status s;
    if (cir_in(g, n, 1) && (s = op_const_ints(g, n, 1, "axes", axes, CIR_MAX_DIMS, &na))) return s;
    bool keepdims = cir_attr_int(n, "keepdims") != 0;
    if (na <= 0) {
        if (cir_attr_int(n, "noop_with_empty_axes")) {
            p->mask = 0;
            *ndim = x->ndim;
            memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
            return CUVIL_OK;
        }
        p->mask = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
    }
    for (int i = 0; i < na; i++) {
        int ax;
        if ((s = op_axis(g, n, axes[i], x->ndim, "axes", &ax))) return s;
        if (p->mask & (1u << ax)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d is repeated in axes", ax);
        p->mask |= 1u << ax;
    }
    *ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!(p->mask & (1u << d))) dims[(*ndim)++] = x->dims[d];
        else if (keepdims) dims[(*ndim)++] = 1;
    }
    return CUVIL_OK;
}

static cuvil_status reduce_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->dtype == CIR_BOOL || cir_dtype_size(x->dtype) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    cuvil_reduce_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    if ((s = op_reduce_params(g, n, &p, &ndim, dims))) return s;
    cir_set_shape(cir_out(g, n, 0), x->dtype, ndim, dims);
    return cir_is_const(x) ? CUVIL_OK : op_need_f32(g, n, 0);
}

/* Integer arithmetic wraps like the types it models instead of overflowing (undefined in C). */
static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* Naive reduction for the types the kernel does not take: accumulates in int64 for integer
 * types (exact shape products) and in double otherwise. */
static cuvil_status reduce_fold_generic(cir_graph *g, const cuvil_reduce_params *p, cir_value *x, cir_value *y) {
    int64_t nout = cir_numel(y), nin = cir_numel(x), count = 1;
    bool integer = x->dtype != CIR_F64 && x->dtype != CIR_F16 && x->dtype != CIR_BF16;
    for (int d = 0; d < p->ndim; d++)
        if (p->mask & (1u << d)) count *= p->dims[d];
    int64_t *ai = cuvil_calloc((size_t)nout + 1, sizeof *ai);
    double *af = cuvil_calloc((size_t)nout + 1, sizeof *af), *am = cuvil_calloc((size_t)nout + 1, sizeof *am);
    if (!ai || !af || !am) {
        cuvil_free(ai), cuvil_free(af), cuvil_free(am);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    int op = p->op;
    for (int64_t o = 0; o < nout; o++) {
        ai[o] = op == CUVIL_REDUCE_PROD ? 1 : op == CUVIL_REDUCE_MAX ? INT64_MIN : op == CUVIL_REDUCE_MIN ? INT64_MAX : 0;
        af[o] = op == CUVIL_REDUCE_PROD ? 1 : op == CUVIL_REDUCE_MAX ? -INFINITY : op == CUVIL_REDUCE_MIN ? INFINITY : 0;
        am[o] = -INFINITY;
    }
    /* LogSumExp: a first pass for the maximum so exp() cannot overflow */
    for (int pass = op == CUVIL_REDUCE_LOG_SUM_EXP ? 0 : 1; pass < 2; pass++) {
        int64_t idx[CIR_MAX_DIMS] = {0};
        for (int64_t i = 0; i < nin; i++) {
            int64_t o = 0;
            for (int d = 0; d < p->ndim; d++)
                if (!(p->mask & (1u << d))) o = o * p->dims[d] + idx[d];
            double v = cir_const_f64(x, i);
            int64_t w = integer ? cir_const_i64(x, i) : 0;
            if (pass == 0) {
                am[o] = v > am[o] ? v : am[o];
            } else {
                switch (op) {
                case CUVIL_REDUCE_SUM:
                case CUVIL_REDUCE_MEAN: ai[o] = wrap_add(ai[o], w), af[o] += v; break;
                case CUVIL_REDUCE_MAX: ai[o] = w > ai[o] ? w : ai[o], af[o] = v > af[o] ? v : af[o]; break;
                case CUVIL_REDUCE_MIN: ai[o] = w < ai[o] ? w : ai[o], af[o] = v < af[o] ? v : af[o]; break;
                case CUVIL_REDUCE_PROD: ai[o] = wrap_mul(ai[o], w), af[o] *= v; break;
                case CUVIL_REDUCE_SUM_SQUARE:
                case CUVIL_REDUCE_L2: ai[o] = wrap_add(ai[o], wrap_mul(w, w)), af[o] += v * v; break;
                case CUVIL_REDUCE_L1: ai[o] = wrap_add(ai[o], w < 0 ? wrap_mul(w, -1) : w), af[o] += fabs(v); break;
                case CUVIL_REDUCE_LOG_SUM_EXP: af[o] += isinf(am[o]) ? 0 : exp(v - am[o]); break;
                default: break;
                }
            }
            for (int d = p->ndim - 1; d >= 0 && ++idx[d] == p->dims[d]; d--) idx[d] = 0;
        }
    }
    for (int64_t o = 0; o < nout; o++) {
        switch (op) {
        case CUVIL_REDUCE_MEAN:
            if (integer) cir_const_set_i64(y, o, count ? ai[o] / count : 0);
            else cir_const_set_f64(y, o, count ? af[o] / (double)count : 0.0);   /* of nothing: 0 */
            break;
        case CUVIL_REDUCE_L2: cir_const_set_f64(y, o, sqrt(integer ? (double)ai[o] : af[o])); break;
        case CUVIL_REDUCE_LOG_SUM_EXP: cir_const_set_f64(y, o, isinf(am[o]) ? am[o] : am[o] + log(af[o])); break;
        default:
            if (integer) cir_const_set_i64(y, o, ai[o]);
            else cir_const_set_f64(y, o, af[o]);
        }
    }
    cuvil_free(ai), cuvil_free(af), cuvil_free(am);
    return CUVIL_OK;
}

static cuvil_status reduce_fold(cir_graph *g, cir_node *n) {
    cuvil_reduce_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_reduce_params(g, n, &p, &ndim, dims);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (x->dtype == CIR_F32) {
        cuvil_f32_reduce(&p, x->data, y->data);   /* no __scalar twin: the compiler links the portable runtime */
        return CUVIL_OK;
    }
    return reduce_fold_generic(g, &p, x, y);
}

static const cir_attr_spec reduce_attrs[] = {
    {"keepdims", CIR_ATTR_INT, 1, 0, NULL, false},
    {"noop_with_empty_axes", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

#define REDUCE(name) \
    const cir_opdef cir_op_##name = {#name, 0, 1, 2, 1, 1, reduce_attrs, reduce_infer, reduce_fold, NULL, 0};
REDUCE(reduce_sum)
REDUCE(reduce_mean)
REDUCE(reduce_max)
REDUCE(reduce_min)
REDUCE(reduce_prod)
REDUCE(reduce_sum_square)
REDUCE(reduce_l1)
REDUCE(reduce_l2)
REDUCE(reduce_log_sum_exp)
