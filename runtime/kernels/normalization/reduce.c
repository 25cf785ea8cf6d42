/*
 * reduce.c -- ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSumExp over any set of axes.
 *
 * The dims are simplified first: size-1 dims dropped, runs of adjacent dims that are all
 * reduced or all kept merged. Two shapes of loop remain:
 *  - the innermost group is reduced: every output is a reduction of contiguous segments
 *    (global pooling, last-axis reductions), done with 8 partial accumulators;
 *  - the innermost group is kept: outputs are produced a contiguous chunk at a time, each chunk
 *    accumulating one strided input row per reduced index (vectorises across the chunk).
 * LogSumExp is two passes (max, then sum of exp(x - max)) so it cannot overflow.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"

#define CHUNK 128

typedef struct {
    int n;
    int64_t size[CUVIL_RT_MAX_DIMS], stride[CUVIL_RT_MAX_DIMS];
} odo;

static float identity(int op) {
    switch (op) {
    case CUVIL_REDUCE_MAX:
    case CUVIL_REDUCE_LOG_SUM_EXP: return -INFINITY;
    case CUVIL_REDUCE_MIN: return INFINITY;
    case CUVIL_REDUCE_PROD: return 1.0f;
    default: return 0.0f;
    }
}

/* acc from the accumulated value; m is the max for LogSumExp, count the reduced size */
static inline float finish(int op, float acc, float m, int64_t count) {
    switch (op) {
    case CUVIL_REDUCE_MEAN: return count ? acc / (float)count : 0.0f;   /* of nothing: 0, as ONNX Runtime */
    case CUVIL_REDUCE_L2: return sqrtf(acc);
    case CUVIL_REDUCE_LOG_SUM_EXP: return isinf(m) ? m : m + logf(acc);
    default: return acc;
    }
}

/* max / min with a NaN x taken (and then kept), as a blend of the bits: no branch, so the loops
 * vectorise (written as ?: with ||, ReduceMax over 64 x 112 x 112's H and W took 0.91 ms, ONNX
 * Runtime 0.13) */
static inline float nan_max(float a, float x) { return ((x > a) | (x != x)) ? x : a; }
static inline float nan_min(float a, float x) { return ((x < a) | (x != x)) ? x : a; }

/* ---- contiguous segment reductions (8 partial accumulators) ---- */
static float seg_sum(const float *x, int64_t n, int mode) {
    /* mode 0: x, 1: x*x, 2: |x| */
    float a8[8] = {0};
    int64_t i = 0;
    float s = 0.0f;
    if (mode == 0) {
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) a8[k] += x[i + k];
        for (; i < n; i++) s += x[i];
    } else if (mode == 1) {
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) a8[k] += x[i + k] * x[i + k];
        for (; i < n; i++) s += x[i] * x[i];
    } else {
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) a8[k] += fabsf(x[i + k]);
        for (; i < n; i++) s += fabsf(x[i]);
    }
    for (int k = 0; k < 8; k++) s += a8[k];
    return s;
}

/* (a row of SEGW partial results, which GCC vectorises as a map; an unrolled 8 it did not) */
#define SEGW 32
static float seg_max(const float *x, int64_t n, float m) {
    float a[SEGW];
    int64_t i = 0;
    for (int k = 0; k < SEGW; k++) a[k] = m;
    for (; i + SEGW <= n; i += SEGW)
        for (int k = 0; k < SEGW; k++) a[k] = nan_max(a[k], x[i + k]);
    for (int k = 0; k < SEGW; k++) m = nan_max(m, a[k]);
    for (; i < n; i++) m = nan_max(m, x[i]);
    return m;
}

static float seg_min(const float *x, int64_t n, float m) {
    float a[SEGW];
    int64_t i = 0;
    for (int k = 0; k < SEGW; k++) a[k] = m;
    for (; i + SEGW <= n; i += SEGW)
        for (int k = 0; k < SEGW; k++) a[k] = nan_min(a[k], x[i + k]);
    for (int k = 0; k < SEGW; k++) m = nan_min(m, a[k]);
    for (; i < n; i++) m = nan_min(m, x[i]);
    return m;
}
#undef SEGW

static float seg_prod(const float *x, int64_t n, float p) {
    for (int64_t i = 0; i < n; i++) p *= x[i];
    return p;
}

/* Iterates the offsets of an odometer: call with *t = 0 .. total-1 in order. */
static inline int64_t odo_next(const odo *o, int64_t *idx, int64_t off) {
    for (int d = o->n - 1; d >= 0; d--) {
        off += o->stride[d];
        if (++idx[d] < o->size[d]) return off;
        off -= o->stride[d] * o->size[d];
        idx[d] = 0;
    }
    return off;
}

static int64_t odo_total(const odo *o) {
    int64_t t = 1;
    for (int d = 0; d < o->n; d++) t *= o->size[d];
    return t;
}

/* Reduction of the segments x + red offsets, each n long, into one value. */
static float reduce_segments(int op, const float *x, const odo *red, int64_t n, int64_t count) {
    int64_t idx[CUVIL_RT_MAX_DIMS] = {0};
    const int64_t nseg = odo_total(red);
    float acc = identity(op), m = -INFINITY;
    int64_t off = 0;
    if (op == CUVIL_REDUCE_LOG_SUM_EXP) {
        for (int64_t s = 0; s < nseg; s++) {
            m = seg_max(x + off, n, m);
            off = odo_next(red, idx, off);
        }
        if (isinf(m)) return m;
        acc = 0.0f;
        off = 0;
        for (int64_t s = 0; s < nseg; s++) {
            acc += cuvil_f32_sum_exp_shifted(x + off, NULL, n, m);
            off = odo_next(red, idx, off);
        }
        return finish(op, acc, m, count);
    }
    for (int64_t s = 0; s < nseg; s++) {
        const float *xs = x + off;
        switch (op) {
        case CUVIL_REDUCE_SUM:
        case CUVIL_REDUCE_MEAN: acc += seg_sum(xs, n, 0); break;
        case CUVIL_REDUCE_SUM_SQUARE:
        case CUVIL_REDUCE_L2: acc += seg_sum(xs, n, 1); break;
        case CUVIL_REDUCE_L1: acc += seg_sum(xs, n, 2); break;
        case CUVIL_REDUCE_MAX: acc = seg_max(xs, n, acc); break;
        case CUVIL_REDUCE_MIN: acc = seg_min(xs, n, acc); break;
        case CUVIL_REDUCE_PROD: acc = seg_prod(xs, n, acc); break;
        default: break;
        }
        off = odo_next(red, idx, off);
    }
    return finish(op, acc, m, count);
}

/* Accumulates the strided rows x + red offsets (each n long, contiguous) element-wise into
 * y[0..n). */
static void reduce_rows(int op, const float *x, const odo *red, int64_t n, int64_t count,
                        float *y) {
    float acc[CHUNK], m[CHUNK], t[CHUNK];
    const int64_t nrow = odo_total(red);
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int64_t c = cuvil_min_i64(CHUNK, n - i0);
        int64_t idx[CUVIL_RT_MAX_DIMS] = {0};
        int64_t off = 0;
        const float id = identity(op);
        for (int64_t i = 0; i < c; i++) acc[i] = id;
        if (op == CUVIL_REDUCE_LOG_SUM_EXP) {
            for (int64_t i = 0; i < c; i++) m[i] = -INFINITY;
            for (int64_t r = 0; r < nrow; r++) {
                const float *xr = x + off + i0;
                for (int64_t i = 0; i < c; i++) m[i] = xr[i] > m[i] ? xr[i] : m[i];
                off = odo_next(red, idx, off);
            }
            for (int64_t i = 0; i < c; i++) acc[i] = 0.0f;
            off = 0;
            for (int64_t r = 0; r < nrow; r++) {
                const float *xr = x + off + i0;
                for (int64_t i = 0; i < c; i++) t[i] = isinf(m[i]) ? 0.0f : xr[i] - m[i];
                cuvil_f32_vexp(t, t, (size_t)c);
                for (int64_t i = 0; i < c; i++) acc[i] += t[i];
                off = odo_next(red, idx, off);
            }
            for (int64_t i = 0; i < c; i++) y[i0 + i] = finish(op, acc[i], m[i], count);
            continue;
        }
        for (int64_t r = 0; r < nrow; r++) {
            const float *xr = x + off + i0;
            switch (op) {
            case CUVIL_REDUCE_SUM:
            case CUVIL_REDUCE_MEAN:
                for (int64_t i = 0; i < c; i++) acc[i] += xr[i];
                break;
            case CUVIL_REDUCE_SUM_SQUARE:
            case CUVIL_REDUCE_L2:
                for (int64_t i = 0; i < c; i++) acc[i] += xr[i] * xr[i];
                break;
            case CUVIL_REDUCE_L1:
                for (int64_t i = 0; i < c; i++) acc[i] += fabsf(xr[i]);
                break;
            case CUVIL_REDUCE_MAX:
                for (int64_t i = 0; i < c; i++) acc[i] = nan_max(acc[i], xr[i]);
                break;
            case CUVIL_REDUCE_MIN:
                for (int64_t i = 0; i < c; i++) acc[i] = nan_min(acc[i], xr[i]);
                break;
            case CUVIL_REDUCE_PROD:
                for (int64_t i = 0; i < c; i++) acc[i] *= xr[i];
                break;
            default: break;
            }
            off = odo_next(red, idx, off);
        }
        for (int64_t i = 0; i < c; i++) y[i0 + i] = finish(op, acc[i], 0.0f, count);
    }
}

int cuvil_reduce_axes_rt(cuvil_reduce_params *p, int n, int idx_t, const void *axes, int keepdims, const int64_t *hi,
                         int64_t *out_dims) {
    p->mask = 0;
    for (int i = 0; i < n; i++) {
        int64_t ax = cuvil_ld_index(idx_t, axes, i);
        if (ax < 0) ax += p->ndim;
        if (ax < 0 || ax >= p->ndim || ((p->mask >> ax) & 1u)) return 1;   /* out of range or repeated */
        p->mask |= 1u << ax;
    }
    int nd = 0;
    for (int d = 0; d < p->ndim; d++) {
        const int r = (p->mask >> d) & 1u;
        if (r && !keepdims) continue;
        out_dims[nd] = r ? 1 : p->dims[d];
        if (out_dims[nd] > hi[nd]) return 1;
        nd++;
    }
    return 0;
}

void cuvil_f32_reduce(const cuvil_reduce_params *p, const float *x, float *y) {
    /* Group dims: drop size 1, merge runs with the same reduced flag. */
    int64_t gsize[CUVIL_RT_MAX_DIMS];
    int gred[CUVIL_RT_MAX_DIMS];
    int ng = 0;
    int64_t count = 1, out_total = 1;
    for (int d = 0; d < p->ndim; d++) {
        const int r = (p->mask >> d) & 1u;
        if (r)
            count *= p->dims[d];
        else
            out_total *= p->dims[d];
        if (p->dims[d] == 1) continue;
        if (ng > 0 && gred[ng - 1] == r) {
            gsize[ng - 1] *= p->dims[d];
            continue;
        }
        gsize[ng] = p->dims[d];
        gred[ng] = r;
        ng++;
    }
    if (out_total == 0) return;
    if (count == 0) {
        /* reducing an empty set: the identity, finished */
        for (int64_t i = 0; i < out_total; i++)
            y[i] = finish(p->op, p->op == CUVIL_REDUCE_LOG_SUM_EXP ? 0.0f : identity(p->op),
                          -INFINITY, 0);
        return;
    }
    int any_red = 0;
    for (int g = 0; g < ng; g++) any_red |= gred[g];
    if (!any_red) {
        /* Only size-1 axes reduced: every op but the nonlinear ones is the identity map. */
        for (int64_t i = 0; i < out_total; i++) {
            const float v = x[i];
            switch (p->op) {
            case CUVIL_REDUCE_SUM_SQUARE: y[i] = v * v; break;
            case CUVIL_REDUCE_L1:
            case CUVIL_REDUCE_L2: y[i] = fabsf(v); break;
            default: y[i] = v; break;
            }
        }
        return;
    }
    /* input strides of the groups */
    int64_t gstride[CUVIL_RT_MAX_DIMS];
    int64_t s = 1;
    for (int g = ng - 1; g >= 0; g--) {
        gstride[g] = s;
        s *= gsize[g];
    }
    odo kept = {0}, red = {0};
    const int last_red = gred[ng - 1];
    for (int g = 0; g < ng - 1; g++) {
        odo *o = gred[g] ? &red : &kept;
        o->size[o->n] = gsize[g];
        o->stride[o->n] = gstride[g];
        o->n++;
    }
    const int64_t inner = gsize[ng - 1];
    int64_t kidx[CUVIL_RT_MAX_DIMS] = {0};
    const int64_t nout = odo_total(&kept);
    int64_t off = 0;
    for (int64_t o = 0; o < nout; o++) {
        if (last_red)
            y[o] = reduce_segments(p->op, x + off, &red, inner, count);
        else
            reduce_rows(p->op, x + off, &red, inner, count, y + o * inner);
        off = odo_next(&kept, kidx, off);
    }
}

void cuvil_f32_reduce__scalar(const cuvil_reduce_params *p, const float *x, float *y) {
    odo kept = {0}, red = {0};
    int64_t s = 1, count = 1;
    int64_t stride[CUVIL_RT_MAX_DIMS];
    for (int d = p->ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= p->dims[d];
    }
    for (int d = 0; d < p->ndim; d++) {
        odo *o = ((p->mask >> d) & 1u) ? &red : &kept;
        o->size[o->n] = p->dims[d];
        o->stride[o->n] = stride[d];
        o->n++;
        if ((p->mask >> d) & 1u) count *= p->dims[d];
    }
    const int64_t nout = odo_total(&kept), nred = odo_total(&red);
    int64_t kidx[CUVIL_RT_MAX_DIMS] = {0}, koff = 0;
    for (int64_t o = 0; o < nout; o++) {
        int64_t ridx[CUVIL_RT_MAX_DIMS] = {0}, roff = 0;
        float m = -INFINITY;
        if (p->op == CUVIL_REDUCE_LOG_SUM_EXP) {
            for (int64_t r = 0; r < nred; r++) {
                const float v = x[koff + roff];
                m = v > m ? v : m;
                roff = odo_next(&red, ridx, roff);
            }
            roff = 0;
        }
        double acc = p->op == CUVIL_REDUCE_LOG_SUM_EXP ? 0.0 : identity(p->op);
        for (int64_t r = 0; r < nred; r++) {
            const double v = x[koff + roff];
            switch (p->op) {
            case CUVIL_REDUCE_SUM:
            case CUVIL_REDUCE_MEAN: acc += v; break;
            case CUVIL_REDUCE_SUM_SQUARE:
            case CUVIL_REDUCE_L2: acc += v * v; break;
            case CUVIL_REDUCE_L1: acc += fabs(v); break;
            case CUVIL_REDUCE_MAX: acc = v > acc || v != v ? v : acc; break;
            case CUVIL_REDUCE_MIN: acc = v < acc || v != v ? v : acc; break;
            case CUVIL_REDUCE_PROD: acc *= v; break;
            case CUVIL_REDUCE_LOG_SUM_EXP: acc += isinf(m) ? 0.0 : exp(v - m); break;
            default: break;
            }
            roff = odo_next(&red, ridx, roff);
        }
        y[o] = finish(p->op, (float)acc, m, count);
        koff = odo_next(&kept, kidx, koff);
    }
}
