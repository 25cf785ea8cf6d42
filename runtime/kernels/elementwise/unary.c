/*
 * unary.c -- activations and unary elementwise ops (y = act(x)).
 *
 * cuvil_f32_act1() is the one definition of every activation's semantics; the __scalar
 * reference is a loop over it. The optimised cuvil_f32_unary() writes the cheap ops as plain
 * loops that the compiler vectorises, and on the x86 targets sends the transcendental ones to
 * vector versions: exp, sigmoid, SiLU and Gelu's tanh form to unary_avx512.c on x86_64-avx512,
 * those and tanh, erf, Gelu, HardSwish and HardSigmoid to unary_avx2.c otherwise.
 * cuvil_f32_act_rows() applies one over a tile's rows on the calling thread (epilogues).
 */
#include <math.h>

#include "../rt_int.h"

/* keep in ORDER with enum cuvil_act in cuvil_rt.h */
const char *const cuvil_act_names[CUVIL_ACT__COUNT] = {
    "None", "Relu",  "LeakyRelu",  "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
    "Exp",  "Log",   "Sqrt",       "Neg",  "Abs",     "Reciprocal",  "Erf",       "Gelu",
    "Elu",  "Softplus", "Mish",    "Silu", "Floor",   "Ceil",        "Round",
    "Sin",  "Cos",   "Tan",        "Asin", "Acos",    "Atan",        "Sinh",      "Cosh",
    "Asinh", "Acosh", "Atanh",     "Sign", "Softsign", "Selu",       "ThresholdedRelu", "Shrink",
    "GeluTanh",
};

static inline float softplus1(float x) {
    /* log(1 + exp(x)) without overflow for large x */
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

float cuvil_f32_act1(const cuvil_act_params *a, float x) {
    switch (a->act) {
    case CUVIL_ACT_NONE: return x;
    case CUVIL_ACT_RELU: return x < 0.0f ? 0.0f : x; /* NaN propagates */
    case CUVIL_ACT_LEAKY_RELU: return x >= 0.0f ? x : a->alpha * x;
    case CUVIL_ACT_CLIP: {
        float v = x < a->alpha ? a->alpha : x;
        return v > a->beta ? a->beta : v;
    }
    case CUVIL_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CUVIL_ACT_HARD_SIGMOID: {
        float v = a->alpha * x + a->beta;
        if (v != v) return v;   /* NaN propagates */
        v = v < 1.0f ? v : 1.0f;
        return v > 0.0f ? v : 0.0f;
    }
    case CUVIL_ACT_HARD_SWISH: return cuvil_hswish1(x);
    case CUVIL_ACT_TANH: return tanhf(x);
    case CUVIL_ACT_EXP: return expf(x);
    case CUVIL_ACT_LOG: return logf(x);
    case CUVIL_ACT_SQRT: return sqrtf(x);
    case CUVIL_ACT_NEG: return -x;
    case CUVIL_ACT_ABS: return fabsf(x);
    case CUVIL_ACT_RECIPROCAL: return 1.0f / x;
    case CUVIL_ACT_ERF: return erff(x);
    case CUVIL_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case CUVIL_ACT_ELU: return x >= 0.0f ? x : a->alpha * expm1f(x);
    case CUVIL_ACT_SOFTPLUS: return softplus1(x);
    case CUVIL_ACT_MISH: return x * tanhf(softplus1(x));
    case CUVIL_ACT_SILU: return x / (1.0f + expf(-x));
    case CUVIL_ACT_FLOOR: return floorf(x);
    case CUVIL_ACT_CEIL: return ceilf(x);
    case CUVIL_ACT_ROUND: return rintf(x); /* default rounding mode: half to even */
    case CUVIL_ACT_SIN: return sinf(x);
    case CUVIL_ACT_COS: return cosf(x);
    case CUVIL_ACT_TAN: return tanf(x);
    case CUVIL_ACT_ASIN: return asinf(x);
    case CUVIL_ACT_ACOS: return acosf(x);
    case CUVIL_ACT_ATAN: return atanf(x);
    case CUVIL_ACT_SINH: return sinhf(x);
    case CUVIL_ACT_COSH: return coshf(x);
    case CUVIL_ACT_ASINH: return asinhf(x);
    case CUVIL_ACT_ACOSH: return acoshf(x);
    case CUVIL_ACT_ATANH: return atanhf(x);
    case CUVIL_ACT_SIGN: return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case CUVIL_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case CUVIL_ACT_SELU: return a->beta * (x > 0.0f ? x : a->alpha * expm1f(x));
    case CUVIL_ACT_THRESHOLDED_RELU: return x > a->alpha ? x : (x != x ? x : 0.0f);
    case CUVIL_ACT_SHRINK: return x < -a->alpha ? x + a->beta : x > a->alpha ? x - a->beta : (x != x ? x : 0.0f);
    case CUVIL_ACT_GELU_TANH:   /* x sigmoid(2u): 0.5 x (1 + tanh u) without its cancellation */
        return x / (1.0f + expf(x * (-1.5957691216057308f - 0.0713548162726009f * x * x)));
    default: return x;
    }
}

void cuvil_f32_unary__scalar(const cuvil_act_params *a, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = cuvil_f32_act1(a, x[i]);
}

static void unary_serial(const cuvil_act_params *a, const float *x, float *y, size_t n) {
    const float al = a->alpha, be = a->beta;
    switch (a->act) {
    case CUVIL_ACT_NONE:
        if (x != y)
            for (size_t i = 0; i < n; i++) y[i] = x[i];
        return;
    case CUVIL_ACT_RELU:
        for (size_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
        return;
    case CUVIL_ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++) y[i] = cuvil_select_ge0(x[i], al * x[i]);
        return;
    case CUVIL_ACT_CLIP:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] < al ? al : x[i];
            y[i] = v > be ? be : v;
        }
        return;
#if !CUVIL_HAVE_AVX2   /* (with AVX2 these two go to its vectors below: the same operations) */
    case CUVIL_ACT_HARD_SIGMOID:
        for (size_t i = 0; i < n; i++) {
            float v = al * x[i] + be;
            float c = v < 1.0f ? v : 1.0f;
            y[i] = v != v ? v : c > 0.0f ? c : 0.0f;   /* NaN propagates */
        }
        return;
    case CUVIL_ACT_HARD_SWISH:
        for (size_t i = 0; i < n; i++) y[i] = cuvil_hswish1(x[i]);
        return;
#endif
#if !CUVIL_HAVE_AVX2   /* (with AVX2: its sqrt instruction, the same bits; sqrtf's errno kept GCC's loop scalar) */
    case CUVIL_ACT_SQRT:
        for (size_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
        return;
#endif
    case CUVIL_ACT_NEG:
        for (size_t i = 0; i < n; i++) y[i] = -x[i];
        return;
    case CUVIL_ACT_ABS:
        for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
        return;
    case CUVIL_ACT_RECIPROCAL:
        for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i];
        return;
    case CUVIL_ACT_FLOOR:
        for (size_t i = 0; i < n; i++) y[i] = floorf(x[i]);
        return;
    case CUVIL_ACT_CEIL:
        for (size_t i = 0; i < n; i++) y[i] = ceilf(x[i]);
        return;
    case CUVIL_ACT_ROUND:
        for (size_t i = 0; i < n; i++) y[i] = rintf(x[i]);
        return;
    /* (act1's definitions as selects that vectorise: same values) */
    case CUVIL_ACT_SOFTSIGN:
        for (size_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + fabsf(x[i]));
        return;
    case CUVIL_ACT_SIGN:
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            y[i] = cuvil_pick(v > 0.0f, 1.0f, cuvil_pick(v < 0.0f, -1.0f, v));
        }
        return;
    case CUVIL_ACT_THRESHOLDED_RELU:
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            y[i] = cuvil_pick(v > al || v != v, v, 0.0f);
        }
        return;
    default:
#if CUVIL_HAVE_AVX512
        if (cuvil_f32_unary_rows__avx512(a, x, y, 0, 1, n)) return;
#endif
#if CUVIL_HAVE_AVX2
        if (cuvil_f32_unary__avx2(a, x, y, n)) return;
#endif
        cuvil_f32_unary__scalar(a, x, y, n);
        return;
    }
}

void cuvil_f32_act_rows(const cuvil_act_params *a, float *c, size_t ld, size_t rows, size_t n) {
    if (a->act == CUVIL_ACT_NONE || rows == 0) return;
    if (rows == 1 || ld == n) {
        unary_serial(a, c, c, rows * n);
        return;
    }
#if CUVIL_HAVE_AVX512
    if (cuvil_f32_unary_rows__avx512(a, c, c, ld, rows, n)) return;
#endif
#if CUVIL_HAVE_AVX2
    if (cuvil_f32_unary_rows__avx2(a, c, c, ld, rows, n)) return;
#endif
    for (size_t r = 0; r < rows; r++) unary_serial(a, c + r * ld, c + r * ld, n);
}

typedef struct unary_job {
    const cuvil_act_params *a;
    const float *x;
    float *y;
} unary_job;

static void unary_range(void *vctx, int64_t b, int64_t e, int tid) {
    const unary_job *j = vctx;
    (void)tid;
    unary_serial(j->a, j->x + b, j->y + b, (size_t)(e - b));
}

/* split over the threads above 8192 elements (a GELU over BERT-base's 128 x 3072 took 0.16 ms
 * on one thread while the other waited) */
void cuvil_f32_unary(const cuvil_act_params *a, const float *x, float *y, size_t n) {
    if (n < 2 * 8192) {   /* (no thread lookup: some kernels call it per element) */
        unary_serial(a, x, y, n);
        return;
    }
    unary_job j = {a, x, y};
    cuvil_parallel_range((int64_t)n, 8192, 64, unary_range, &j);
}

void cuvil_f32_vexp(const float *x, float *y, size_t n) {
#if CUVIL_HAVE_AVX512
    static const cuvil_act_params e = {CUVIL_ACT_EXP, 0.0f, 0.0f};
    cuvil_f32_unary_rows__avx512(&e, x, y, 0, 1, n);
#elif CUVIL_HAVE_AVX2
    cuvil_f32_vexp__avx2(x, y, n);
#else
    for (size_t i = 0; i < n; i++) y[i] = expf(x[i]);
#endif
}

float cuvil_f32_sum_exp_shifted(const float *x, float *y, int64_t n, float m) {
    if (n <= 0) return 0.0f;
#if CUVIL_HAVE_AVX512
    return cuvil_f32_sum_exp_shifted__avx512(x, y, (size_t)n, m);
#elif CUVIL_HAVE_AVX2
    return cuvil_f32_sum_exp_shifted__avx2(x, y, (size_t)n, m);
#else
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float e = expf(x[i] - m);
        if (y) y[i] = e;
        s += e;
    }
    return s;
#endif
}
