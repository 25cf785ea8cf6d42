/*
 * kernel_test_util.h -- helpers shared by the tests/unit/test_kernel_*.c files: a reproducible
 * RNG, 64-byte aligned buffers, an activation reference in double precision (independent of
 * the runtime's cuvil_f32_act1), and a tolerant comparison that prints the first mismatch.
 * Header-only; every function is static.
 */
#ifndef KERNEL_TEST_UTIL_H
#define KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuvil_rt.h"

static uint64_t ktu_rng = 0x9E3779B97F4A7C15ull;
static int ktu_failures = 0;
static int ktu_checks = 0;

static inline uint32_t ktu_u32(void) {
    /* xorshift64* */
    ktu_rng ^= ktu_rng >> 12;
    ktu_rng ^= ktu_rng << 25;
    ktu_rng ^= ktu_rng >> 27;
    return (uint32_t)((ktu_rng * 0x2545F4914F6CDD1Dull) >> 32);
}

/* uniform in [lo, hi) */
static inline float ktu_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)(ktu_u32() >> 8) * (1.0f / 16777216.0f);
}

static inline void ktu_fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = ktu_uniform(lo, hi);
}

/* small integers in [-r, r]: products and sums stay exact in float */
static inline void ktu_fill_int(float *x, size_t n, int r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(ktu_u32() % (uint32_t)(2 * r + 1)) - r);
}

static inline void *ktu_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

static inline float *ktu_falloc(size_t n) { return (float *)ktu_alloc(n * sizeof(float)); }

/* the allocator pair a thread pool takes */
static inline void *ktu_aligned_alloc(size_t bytes, size_t align, void *user) {
    (void)user;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, bytes ? bytes : 1) == 0 ? p : NULL;
}
static inline void ktu_aligned_free(void *p, void *user) {
    (void)user;
    free(p);
}

/* Activation reference in double: written from the ONNX operator definitions. */
static inline double ktu_act(int act, double alpha, double beta, double x) {
    switch (act) {
    case CUVIL_ACT_NONE: return x;
    case CUVIL_ACT_RELU: return isnan(x) ? x : x > 0 ? x : 0;
    case CUVIL_ACT_LEAKY_RELU: return x >= 0 ? x : alpha * x;
    case CUVIL_ACT_CLIP: return isnan(x) ? x : fmin(fmax(x, alpha), beta);
    case CUVIL_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CUVIL_ACT_HARD_SIGMOID: return isnan(x) ? x : fmax(0.0, fmin(1.0, alpha * x + beta));   /* NaN stays NaN (ONNX Runtime) */
    case CUVIL_ACT_HARD_SWISH: return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case CUVIL_ACT_TANH: return tanh(x);
    case CUVIL_ACT_EXP: return exp(x);
    case CUVIL_ACT_LOG: return log(x);
    case CUVIL_ACT_SQRT: return sqrt(x);
    case CUVIL_ACT_NEG: return -x;
    case CUVIL_ACT_ABS: return fabs(x);
    case CUVIL_ACT_RECIPROCAL: return 1.0 / x;
    case CUVIL_ACT_ERF: return erf(x);
    case CUVIL_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case CUVIL_ACT_ELU: return x >= 0 ? x : alpha * (exp(x) - 1.0);
    case CUVIL_ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    case CUVIL_ACT_MISH: return x * tanh(x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)));
    case CUVIL_ACT_SILU: return x / (1.0 + exp(-x));
    case CUVIL_ACT_FLOOR: return floor(x);
    case CUVIL_ACT_CEIL: return ceil(x);
    case CUVIL_ACT_ROUND: return nearbyint(x);
    case CUVIL_ACT_SIN: return sin(x);
    case CUVIL_ACT_COS: return cos(x);
    case CUVIL_ACT_TAN: return tan(x);
    case CUVIL_ACT_ASIN: return asin(x);
    case CUVIL_ACT_ACOS: return acos(x);
    case CUVIL_ACT_ATAN: return atan(x);
    case CUVIL_ACT_SINH: return sinh(x);
    case CUVIL_ACT_COSH: return cosh(x);
    case CUVIL_ACT_ASINH: return asinh(x);
    case CUVIL_ACT_ACOSH: return acosh(x);
    case CUVIL_ACT_ATANH: return atanh(x);
    case CUVIL_ACT_SIGN: return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0;
    case CUVIL_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case CUVIL_ACT_SELU: return beta * (x > 0 ? x : alpha * (exp(x) - 1));
    case CUVIL_ACT_THRESHOLDED_RELU: return isnan(x) ? x : x > alpha ? x : 0;
    case CUVIL_ACT_SHRINK: return isnan(x) ? x : x < -alpha ? x + beta : x > alpha ? x - beta : 0;
    case CUVIL_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return NAN;
    }
}

/* Parameters that make each activation non-trivial. */
static inline cuvil_act_params ktu_act_params(int act) {
    cuvil_act_params a = {act, 0.0f, 0.0f};
    switch (act) {
    case CUVIL_ACT_LEAKY_RELU: a.alpha = 0.1f; break;
    case CUVIL_ACT_CLIP: a.alpha = -1.5f; a.beta = 2.0f; break;
    case CUVIL_ACT_HARD_SIGMOID: a.alpha = 0.2f; a.beta = 0.5f; break;
    case CUVIL_ACT_ELU: a.alpha = 1.5f; break;
    case CUVIL_ACT_SELU: a.alpha = 1.67326319f; a.beta = 1.05070102f; break;
    case CUVIL_ACT_THRESHOLDED_RELU: a.alpha = 0.75f; break;
    case CUVIL_ACT_SHRINK: a.alpha = 0.5f; a.beta = 0.25f; break;
    default: break;
    }
    return a;
}

static inline double ktu_actp(const cuvil_act_params *a, double x) {
    return ktu_act(a->act, a->alpha, a->beta, x);
}

static inline int ktu_close(float got, double ref, double rtol, double atol) {
    if (isnan(got) && isnan(ref)) return 1;
    if (isinf(got) || isinf((float)ref)) return got == (float)ref;
    return fabs((double)got - ref) <= atol + rtol * fabs(ref);
}

/* Compares n values; on the first mismatch prints `what` (printf-style), the index and both
 * values, counts a failure and returns 0. */
static inline int ktu_check(const float *got, const double *ref, size_t n, double rtol, double atol,
                     const char *what, ...) {
    ktu_checks++;
    for (size_t i = 0; i < n; i++) {
        if (!ktu_close(got[i], ref[i], rtol, atol)) {
            va_list ap;
            va_start(ap, what);
            fprintf(stderr, "FAIL: ");
            vfprintf(stderr, what, ap);
            va_end(ap);
            fprintf(stderr, ": [%zu] got %.9g want %.9g (of %zu)\n", i, (double)got[i], ref[i], n);
            ktu_failures++;
            return 0;
        }
    }
    return 1;
}

/* Same for a float reference. */
static inline int ktu_check_f(const float *got, const float *ref, size_t n, double rtol,
                              double atol, const char *what, ...) {
    ktu_checks++;
    for (size_t i = 0; i < n; i++) {
        if (!ktu_close(got[i], (double)ref[i], rtol, atol)) {
            va_list ap;
            va_start(ap, what);
            fprintf(stderr, "FAIL: ");
            vfprintf(stderr, what, ap);
            va_end(ap);
            fprintf(stderr, ": [%zu] got %.9g want %.9g (of %zu)\n", i, (double)got[i],
                    (double)ref[i], n);
            ktu_failures++;
            return 0;
        }
    }
    return 1;
}

static inline void ktu_fail(const char *what, ...) {
    va_list ap;
    va_start(ap, what);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, what, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    ktu_failures++;
}

static inline int ktu_finish(const char *name) {
    if (ktu_failures) {
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, ktu_failures, ktu_checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, ktu_checks);
    return 0;
}

#endif /* KERNEL_TEST_UTIL_H */
