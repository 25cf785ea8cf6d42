/*
 * test_kernel_normalization.c -- softmax / log-softmax, reductions and the channel affine
 * (folded BatchNorm), optimised and reference versions, against double-precision loops
 * written here.
 *
 * Softmax: last axis (inner 1) and middle axes (inner > 1, including more than one stack chunk),
 * axis length 1, and inputs around 1000 that overflow a naive exp. Reduce: every op over every
 * axis mask of a 4-D tensor, plus shapes with size-1 axes, long contiguous and long kept inner
 * runs, and LogSumExp of large values. Channel affine: inner 1 and > 1, in place, activations.
 * The kernels split over threads (LayerNorm, an activation, DynamicQuantizeLinear): on 3 threads
 * bit for bit what one thread gives.
 */
#include <float.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>

#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

/* ---- Softmax ---------------------------------------------------------------------------- */
static void run_softmax(int64_t outer, int64_t len, int64_t inner, int is_log, float lo, float hi) {
    cuvil_softmax_params p = {outer, len, inner, is_log, 0};
    const size_t n = (size_t)(outer * len * inner);
    float *x = ktu_falloc(n), *y = ktu_falloc(n);
    ktu_fill(x, n, lo, hi);
    double *ref = malloc(n * sizeof(double));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t a = 0; a < len; a++) m = fmax(m, x[(o * len + a) * inner + i]);
            for (int64_t a = 0; a < len; a++) s += exp(x[(o * len + a) * inner + i] - m);
            for (int64_t a = 0; a < len; a++) {
                const double v = x[(o * len + a) * inner + i];
                ref[(o * len + a) * inner + i] = is_log ? v - m - log(s) : exp(v - m) / s;
            }
        }
    for (int v = 0; v < 3; v++) {
        float *out = y;
        if (v == 2) { /* in place: the kernel reads each x before writing that y */
            out = ktu_falloc(n);
            memcpy(out, x, n * sizeof(float));
            cuvil_f32_softmax(&p, out, out);
        } else {
            for (size_t i = 0; i < n; i++) y[i] = NAN;
            if (v)
                cuvil_f32_softmax__scalar(&p, x, y);
            else
                cuvil_f32_softmax(&p, x, y);
        }
        ktu_check(out, ref, n, 1e-5, 1e-6, "%s outer=%lld len=%lld inner=%lld range=[%g,%g] [%s]",
                  is_log ? "logsoftmax" : "softmax", (long long)outer, (long long)len,
                  (long long)inner, lo, hi,
                  v == 1 ? "__scalar"
                  : v    ? "public, in place"
                         : "public");
        if (out != y) free(out);
    }
    free(x);
    free(y);
    free(ref);
}

static void test_softmax(void) {
    for (int lg = 0; lg < 2; lg++) {
        run_softmax(3, 10, 1, lg, -5, 5);
        run_softmax(2, 1000, 1, lg, -5, 5);
        run_softmax(4, 7, 1, lg, 990, 1010); /* overflows without the max shift */
        run_softmax(5, 1, 1, lg, -5, 5);
        run_softmax(2, 9, 13, lg, -5, 5);
        run_softmax(2, 5, 300, lg, -10, 10); /* inner crosses a stack chunk */
        run_softmax(1, 3, 7, lg, -1000, -980);
        run_softmax(3, 1, 6, lg, -5, 5);
    }
}

/* nan_to_zero: a row (inner 1) or a column (inner 3) of -inf has a NaN softmax, which becomes
 * 0; the other rows are untouched (their reference: the same kernel without the flag). */
static void test_softmax_nan_to_zero(void) {
    for (int64_t inner = 1; inner <= 3; inner += 2) {
        const int64_t outer = 3, len = 6, n = outer * len * inner;
        float *x = ktu_falloc((size_t)n), *y = ktu_falloc((size_t)n), *y0 = ktu_falloc((size_t)n);
        ktu_fill(x, (size_t)n, -3, 3);
        for (int64_t a = 0; a < len; a++) x[(1 * len + a) * inner] = -INFINITY;   /* outer 1, inner 0 */
        x[(2 * len + 4) * inner] = NAN;                                            /* outer 2, inner 0 */
        for (int v = 0; v < 2; v++) {
            cuvil_softmax_params p = {outer, len, inner, 0, 1}, p0 = {outer, len, inner, 0, 0};
            if (v) {
                cuvil_f32_softmax__scalar(&p, x, y);
                cuvil_f32_softmax__scalar(&p0, x, y0);
            } else {
                cuvil_f32_softmax(&p, x, y);
                cuvil_f32_softmax(&p0, x, y0);
            }
            ktu_checks++;
            for (int64_t i = 0; i < n; i++) {
                const int64_t o = i / (len * inner), in = i % inner;
                const int nan_here = in == 0 && (o == 1 || o == 2);
                if (nan_here ? !(isnan(y0[i]) && y[i] == 0.0f) : memcmp(&y[i], &y0[i], sizeof(float)) != 0) {
                    ktu_fail("softmax nan_to_zero inner=%lld%s at %lld: %g (without: %g)", (long long)inner,
                             v ? " __scalar" : "", (long long)i, (double)y[i], (double)y0[i]);
                    break;
                }
            }
        }
        free(x);
        free(y);
        free(y0);
    }
}

/* ---- Reduce ------------------------------------------------------------------------------- */
static const char *red_names[] = {"Sum", "Mean", "Max", "Min", "Prod", "SumSquare", "L1", "L2",
                                  "LogSumExp"};

static void run_reduce(int op, int ndim, const int64_t *dims, uint32_t mask, float lo, float hi) {
    cuvil_reduce_params p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.ndim = ndim;
    int64_t total = 1, nout = 1, count = 1;
    for (int d = 0; d < ndim; d++) {
        p.dims[d] = dims[d];
        total *= dims[d];
        if ((mask >> d) & 1u)
            count *= dims[d];
        else
            nout *= dims[d];
    }
    p.mask = mask;
    float *x = ktu_falloc((size_t)total), *y = ktu_falloc((size_t)nout + 1);
    ktu_fill(x, (size_t)total, lo, hi);
    /* naive: accumulate every input into its output slot, in double */
    double *acc = malloc((size_t)nout * sizeof(double)),
           *mx = malloc((size_t)nout * sizeof(double));
    for (int64_t o = 0; o < nout; o++) {
        mx[o] = -INFINITY;
        acc[o] = op == CUVIL_REDUCE_MAX ? -INFINITY : op == CUVIL_REDUCE_MIN ? INFINITY
                 : op == CUVIL_REDUCE_PROD ? 1.0 : 0.0;
    }
    for (int pass = 0; pass < 2; pass++) {
        int64_t idx[CUVIL_RT_MAX_DIMS] = {0};
        for (int64_t t = 0; t < total; t++) {
            int64_t o = 0;
            for (int d = 0; d < ndim; d++)
                if (!((mask >> d) & 1u)) o = o * dims[d] + idx[d];
            const double v = x[t];
            if (pass == 0) {
                mx[o] = fmax(mx[o], v);
            } else {
                switch (op) {
                case CUVIL_REDUCE_SUM: case CUVIL_REDUCE_MEAN: acc[o] += v; break;
                case CUVIL_REDUCE_MAX: acc[o] = isnan(acc[o]) || isnan(v) ? NAN : fmax(acc[o], v); break;   /* NaN propagates */
                case CUVIL_REDUCE_MIN: acc[o] = isnan(acc[o]) || isnan(v) ? NAN : fmin(acc[o], v); break;
                case CUVIL_REDUCE_PROD: acc[o] *= v; break;
                case CUVIL_REDUCE_SUM_SQUARE: case CUVIL_REDUCE_L2: acc[o] += v * v; break;
                case CUVIL_REDUCE_L1: acc[o] += fabs(v); break;
                case CUVIL_REDUCE_LOG_SUM_EXP: acc[o] += exp(v - mx[o]); break;
                default: break;
                }
            }
            for (int d = ndim - 1; d >= 0; d--) {
                if (++idx[d] < dims[d]) break;
                idx[d] = 0;
            }
        }
    }
    for (int64_t o = 0; o < nout; o++) {
        if (op == CUVIL_REDUCE_MEAN) acc[o] /= (double)count;
        if (op == CUVIL_REDUCE_L2) acc[o] = sqrt(acc[o]);
        if (op == CUVIL_REDUCE_LOG_SUM_EXP) acc[o] = mx[o] + log(acc[o]);
    }
    char shape[64] = "";
    for (int d = 0; d < ndim; d++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "x" : "",
                 (long long)dims[d]);
    for (int v = 0; v < 2; v++) {
        for (int64_t o = 0; o <= nout; o++) y[o] = 777.0f;
        if (v)
            cuvil_f32_reduce__scalar(&p, x, y);
        else
            cuvil_f32_reduce(&p, x, y);
        ktu_check(y, acc, (size_t)nout, 2e-5, 1e-5, "reduce %s %s mask=0x%x [%s]", red_names[op],
                  shape, mask, v ? "__scalar" : "public");
        if (y[nout] != 777.0f)
            ktu_fail("reduce %s %s mask=0x%x wrote past the end", red_names[op], shape, mask);
    }
    free(x);
    free(y);
    free(acc);
    free(mx);
}

static void test_reduce(void) {
    static const int64_t d4[] = {3, 4, 5, 6};
    static const int64_t d1s[] = {2, 1, 7, 1, 9};
    static const int64_t wide[] = {3, 700};
    static const int64_t tall[] = {40, 2, 300};
    static const int64_t d1[] = {37};
    for (int op = 0; op <= CUVIL_REDUCE_LOG_SUM_EXP; op++) {
        const float lo = op == CUVIL_REDUCE_PROD ? 0.6f : -2.0f;
        const float hi = op == CUVIL_REDUCE_PROD ? 1.5f : 2.0f;
        for (uint32_t m = 0; m < 16; m++) run_reduce(op, 4, d4, m, lo, hi);
        for (uint32_t m = 0; m < 32; m += 3) run_reduce(op, 5, d1s, m, lo, hi);
        run_reduce(op, 2, wide, 2, lo, hi);
        run_reduce(op, 2, wide, 1, lo, hi);
        run_reduce(op, 3, tall, 5, lo, hi);
        run_reduce(op, 3, tall, 2, lo, hi);
        run_reduce(op, 1, d1, 1, lo, hi);
        run_reduce(op, 1, d1, 0, lo, hi);
    }
    run_reduce(CUVIL_REDUCE_LOG_SUM_EXP, 4, d4, 0xA, 80.0f, 100.0f); /* exp overflows unshifted */
    run_reduce(CUVIL_REDUCE_LOG_SUM_EXP, 2, wide, 2, 80.0f, 100.0f);
}

/* ---- Channel affine ------------------------------------------------------------------- */
static void run_affine(int64_t N, int64_t C, int64_t inner, int act) {
    cuvil_channel_affine_params p = {N, C, inner, ktu_act_params(act)};
    const size_t n = (size_t)(N * C * inner);
    float *x0 = ktu_falloc(n), *x = ktu_falloc(n), *y = ktu_falloc(n);
    float *sc = ktu_falloc((size_t)C), *sh = ktu_falloc((size_t)C);
    ktu_fill(x0, n, -3, 3);
    ktu_fill(sc, (size_t)C, -2, 2);
    ktu_fill(sh, (size_t)C, -1, 1);
    double *ref = malloc(n * sizeof(double));
    for (int64_t i = 0; i < N * C * inner; i++) {
        const int64_t c = (i / inner) % C;
        ref[i] = ktu_actp(&p.act, (double)x0[i] * sc[c] + sh[c]);
    }
    for (int v = 0; v < 4; v++) {
        memcpy(x, x0, n * sizeof(float));
        float *out = v & 1 ? x : y;
        if (v < 2)
            cuvil_f32_channel_affine(&p, x, sc, sh, out);
        else
            cuvil_f32_channel_affine__scalar(&p, x, sc, sh, out);
        ktu_check(out, ref, n, 2e-5, 2e-6, "channel_affine N=%lld C=%lld inner=%lld act=%s [%s%s]",
                  (long long)N, (long long)C, (long long)inner, cuvil_act_names[act],
                  v < 2 ? "public" : "__scalar", v & 1 ? ", in place" : "");
    }
    free(x0);
    free(x);
    free(y);
    free(sc);
    free(sh);
    free(ref);
}

static void test_affine(void) {
    run_affine(2, 5, 17, CUVIL_ACT_NONE);
    run_affine(3, 19, 1, CUVIL_ACT_NONE);
    run_affine(1, 4, 64, CUVIL_ACT_RELU);
    run_affine(2, 3, 9, CUVIL_ACT_CLIP);
    run_affine(4, 7, 1, CUVIL_ACT_SIGMOID);
    run_affine(1, 3, 33, CUVIL_ACT_HARD_SWISH);
    run_affine(1, 2, 20, CUVIL_ACT_SILU);
    run_affine(1, 2, 20, CUVIL_ACT_LEAKY_RELU);
}

/* The kernels that split their elements or rows over the threads (cuvil_parallel_range):
 * LayerNorm, an activation, DynamicQuantizeLinear on 3 threads give the one-thread results bit
 * for bit, on sizes that split into uneven chunks. */
static void test_split_over_threads(void) {
    const int64_t rows = 1001, len = 64, n = 100003;
    float *x = ktu_falloc((size_t)n), *sc = ktu_falloc((size_t)len), *bi = ktu_falloc((size_t)len);
    float *y1 = ktu_falloc((size_t)n), *y3 = ktu_falloc((size_t)n), *m1 = ktu_falloc((size_t)rows), *m3 = ktu_falloc((size_t)rows);
    uint8_t *q1 = ktu_alloc((size_t)n), *q3 = ktu_alloc((size_t)n);
    ktu_fill(x, (size_t)n, -4, 7);
    ktu_fill(sc, (size_t)len, -2, 2);
    ktu_fill(bi, (size_t)len, -1, 1);
    x[77777] = NAN;   /* (DynamicQuantizeLinear: a NaN is not the range's end, quantizes to 0) */
    const cuvil_layer_norm_params lp = {.rows = rows, .len = len, .epsilon = 1e-5f};
    const cuvil_act_params gelu = ktu_act_params(CUVIL_ACT_GELU);
    float s1 = 0, s3 = 0;
    uint8_t z1 = 0, z3 = 0;
    for (int pass = 0; pass < 2; pass++) {
        cuvil_pool *pool = pass ? cuvil_pool_create(3, 64, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
        const cuvil_pool *prev = cuvil_pool_bind(pool);
        cuvil_f32_layer_norm(&lp, x, sc, bi, pass ? y3 : y1, pass ? m3 : m1, NULL);
        cuvil_dynamic_quantize(n, x, pass ? q3 : q1, pass ? &s3 : &s1, pass ? &z3 : &z1);
        cuvil_pool_bind(prev);
        cuvil_pool_destroy(pool);
    }
    ktu_checks++;
    if (memcmp(y1, y3, sizeof(float) * (size_t)(rows * len)) || memcmp(m1, m3, sizeof(float) * (size_t)rows))
        ktu_fail("layer_norm on 3 threads differs from 1");
    ktu_checks++;
    if (s1 != s3 || z1 != z3 || memcmp(q1, q3, (size_t)n) || q1[77777] != 0)
        ktu_fail("dynamic_quantize on 3 threads differs from 1 (scale %g / %g, zero point %d / %d)", (double)s1, (double)s3,
                 z1, z3);
    for (int pass = 0; pass < 2; pass++) {
        cuvil_pool *pool = pass ? cuvil_pool_create(3, 64, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
        const cuvil_pool *prev = cuvil_pool_bind(pool);
        cuvil_f32_unary(&gelu, x, pass ? y3 : y1, (size_t)n);
        cuvil_pool_bind(prev);
        cuvil_pool_destroy(pool);
    }
    ktu_checks++;
    if (memcmp(y1, y3, sizeof(float) * (size_t)n)) ktu_fail("gelu on 3 threads differs from 1");
    free(x), free(sc), free(bi), free(y1), free(y3), free(m1), free(m3), free(q1), free(q3);
}

/* DynamicQuantizeLinear on values at and next to the rounding ties of x / s (the kernel's
 * multiply by 1 / s must give rint(x / s) exactly), NaN, a row's tail, against
 * ONNX's formula here; ranges whose scale is 1/255 or a few ulp off a power of two. */
static void test_dynamic_quantize_ties(void) {
    const int64_t n = 4099;
    float *x = ktu_falloc((size_t)n);
    uint8_t *q = ktu_alloc((size_t)n);
    static const float ranges[][2] = {{-1.0f, 0.0f}, {-0.3f, 7.1f}, {-1e-3f, 2.5e-3f}, {-97.0f, 158.0f}, {0.0f, 255.0f},
                                      {-1e30f, 3e30f}, {-2.0e-37f, 1.0e-37f}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        /* (the scale the kernel takes from x's range, [mn, mx] with 0 in it: every other value inside) */
        const float mn = ranges[r][0], mx = ranges[r][1], s = (mx - mn) / 255.0f;
        const int64_t klo = (int64_t)ceilf(mn / s) + 1, khi = (int64_t)floorf(mx / s) - 2;
        for (int64_t i = 0; i < n; i++) {
            const float k = (float)(klo + (int64_t)(ktu_u32() % (uint32_t)(khi - klo + 1))) + 0.5f;   /* (a tie, then ulps off it) */
            float v = k * s;
            for (int u = (int)(ktu_u32() % 7) - 3; u != 0; u += u > 0 ? -1 : 1) v = nextafterf(v, u > 0 ? INFINITY : -INFINITY);
            x[i] = i % 5 == 4 ? ktu_uniform(mn, mx) : v;
        }
        x[0] = mn, x[1] = mx, x[2] = NAN;
        float so;
        uint8_t zo;
        cuvil_dynamic_quantize(n, x, q, &so, &zo);
        for (int64_t i = 0; i < n; i++) {
            float v = nearbyintf(x[i] / so) + (float)zo;
            v = v >= 0.0f ? v : 0.0f;
            v = v <= 255.0f ? v : 255.0f;
            ktu_checks++;
            if (so != s || q[i] != (uint8_t)v) {
                ktu_fail("dynamic_quantize range [%g, %g]: x[%lld] = %.9g gives %d, expected %d (scale %.9g)", (double)mn, (double)mx,
                         (long long)i, (double)x[i], q[i], (int)(uint8_t)v, (double)so);
                break;
            }
        }
    }
    free(x), free(q);
}

/* LayerNormalization's statistics (its mean and 1 / sqrt(var + eps) outputs) against double
 * where the mean dwarfs the spread (offsets 1e4, 1e6 and -3e5: the float mean the kernel shifts
 * by is off by a fair part of the spread, 4096 values of 1e6 +- 1 by some 0.1, and the double
 * sums about it must recover the exact ones),
 * on rows whose float sum overflows (values near 3e38: the shift falls back to the mean in
 * double), a constant row (variance 0) and lengths around the 32 lanes; y itself where the
 * offset is 0 (with an offset its float rounding of x - mean dominates). */
static void test_layer_norm_precision(void) {
    const int64_t lens[] = {1, 7, 31, 32, 33, 96, 112, 200, 4096};
    const double offs[] = {0.0, 1e4, 1e6, -3e5, 3e38}, spreads[] = {1.0, 1.0, 1.0, 1e-2, 1e37};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++) {
            const int64_t len = lens[li], rows = 3;
            const double off = offs[oi], spread = spreads[oi];
            float *x = ktu_falloc((size_t)(rows * len)), *y = ktu_falloc((size_t)(rows * len));
            float *sc = ktu_falloc((size_t)len), *bi = ktu_falloc((size_t)len);
            float *m = ktu_falloc((size_t)rows), *inv = ktu_falloc((size_t)rows);
            double *ref = malloc(sizeof(double) * (size_t)(rows * len)), *mref = malloc(sizeof(double) * (size_t)rows);
            double *iref = malloc(sizeof(double) * (size_t)rows);
            ktu_fill(sc, (size_t)len, 0.5, 2);
            ktu_fill(bi, (size_t)len, -1, 1);
            ktu_fill(x, (size_t)(rows * len), -1, 1);
            for (int64_t i = 0; i < rows * len; i++) x[i] = (float)(off + spread * x[i]);
            for (int64_t i = 0; i < len; i++) x[2 * len + i] = (float)(off + spread * 0.25);   /* a constant row */
            for (int64_t r = 0; r < rows; r++) {
                double mean = 0, var = 0;
                for (int64_t i = 0; i < len; i++) mean += x[r * len + i];
                mean /= (double)len;
                for (int64_t i = 0; i < len; i++) var += ((double)x[r * len + i] - mean) * ((double)x[r * len + i] - mean);
                var /= (double)len;
                mref[r] = mean;
                iref[r] = 1.0 / sqrt(var + 1e-5);
                for (int64_t i = 0; i < len; i++) ref[r * len + i] = ((double)x[r * len + i] - mean) * iref[r] * sc[i] + bi[i];
            }
            const cuvil_layer_norm_params lp = {.rows = rows, .len = len, .epsilon = 1e-5f};
            cuvil_f32_layer_norm(&lp, x, sc, bi, y, m, inv);
            ktu_check(m, mref, (size_t)rows, 1e-6, 0.0, "layer_norm mean len=%lld offset %g", (long long)len, off);
            ktu_check(inv, iref, (size_t)rows, 1e-5, 0.0, "layer_norm 1/std len=%lld offset %g", (long long)len, off);
            if (off == 0.0)
                ktu_check(y, ref, (size_t)(rows * len), 1e-5, 1e-5, "layer_norm len=%lld", (long long)len);
            free(x), free(y), free(sc), free(bi), free(m), free(inv), free(ref), free(mref), free(iref);
        }
}

int main(void) {
    setenv("CUVIL_OVERSUBSCRIBE", "1", 1);   /* (3 threads on a 2-CPU machine) */
    test_dynamic_quantize_ties();
    test_softmax();
    test_softmax_nan_to_zero();
    test_reduce();
    test_affine();
    test_split_over_threads();
    test_layer_norm_precision();
    return ktu_finish("test_kernel_normalization");
}
