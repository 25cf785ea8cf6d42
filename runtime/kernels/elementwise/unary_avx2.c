/*
 * unary_avx2.c -- AVX2+FMA versions of the exp-based activations (x86_64-avx2 target only).
 *
 * exp is the Cephes single-precision scheme: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two
 * parts so r is exact), exp(r) by a degree-6 polynomial, scaled by 2^n. The scale is applied as
 * two powers of two so that results in the subnormal range and overflow to +inf come out the
 * way libm's expf gives them. Accuracy is about 1 ulp over the whole range.
 * tanh is a rational function of x (vexp_consts.h), clamped.
 * erf (and Gelu with it) is the rational minimax approximation x P(x^2) / Q(x^2) on [-4, 4]
 * (P of degree 6, Q of degree 4; beyond 4, erf is +-1 in single precision), the coefficients
 * Eigen and XLA use: within a few ulp. Gelu's tanh form is x sigmoid(2u), the same function as
 * 0.5 x (1 + tanh u) without the cancellation for negative x.
 */
#include <immintrin.h>
#include <float.h>
#include <math.h>

#include "../rt_int.h"
#include "vexp_consts.h"

/* exp(x - n ln 2) for n = round(x log2 e): the polynomial on the reduced argument. */
static inline __m256 exp_reduced256(__m256 x, __m256 n) {
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(VEXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    return p;
}

static inline __m256 exp256_wide(__m256 x) {
    const __m256 hi = _mm256_set1_ps(VEXP_HI), lo = _mm256_set1_ps(VEXP_LO);
    const __m256 nan_mask = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(VEXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 p = exp_reduced256(xc, n);
    /* 2^n = 2^n1 * 2^n2 with n1 = n >> 1: both halves stay normal for n in [-150, 128]. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_blendv_ps(res, _mm256_add_ps(x, x), nan_mask);
}

/* exp256_wide where every lane has |x| < 87 (almost always): 2^n is one normal power of two
 * (|n| <= 126), so no clamp, no NaN blend and one scaling product, whose single rounding is the
 * same as the two above (a product by a power of two rounds only into the subnormal range, once
 * either way). Same bits as exp256_wide (checked over every float), in about half the
 * instructions. */
static inline __m256 exp256(__m256 x) {
    const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    if (_mm256_movemask_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(87.0f), _CMP_LT_OQ)) != 0xff) return exp256_wide(x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VEXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 p = exp_reduced256(x, n);
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);   /* 2^n */
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 sigmoid256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

static inline __m256 silu256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(one, e));
}

/* HardSwish and HardSigmoid as unary.c's scalar loops compute them, operation for operation
 * (a multiply and an add, not fused; min/max as its comparisons: minps(a, b) is a < b ? a : b),
 * so the vector and scalar results are the same bits. */
static inline __m256 hard_swish256(__m256 x) {
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.0f / 6.0f)), _mm256_set1_ps(0.5f));
    return _mm256_mul_ps(x, _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(1.0f)), _mm256_setzero_ps()));
}

static inline __m256 hard_sigmoid256(__m256 x, __m256 al, __m256 be) {
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(al, x), be);
    const __m256 c = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(1.0f)), _mm256_setzero_ps());
    return _mm256_blendv_ps(c, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));   /* NaN propagates */
}

/* tanh as the rational form of vexp_consts.h: clamped (minps then maxps with x second, so a NaN
 * passes through), x P(x^2) / Q(x^2), x itself where |x| is tiny (-0 kept), +-1 from VTANH_ONE
 * (the clamped value is 1 - 2^-22). The exp form it
 * replaced (1 - 2 / (e^2|x| + 1), an odd polynomial below 0.625) was within 1.4 ulp at 2.1x the
 * time (0.85 against 0.40 ns a value, AMD EPYC Zen 4). */
static inline __m256 tanh256(__m256 x) {
    const __m256 c = _mm256_set1_ps(VTANH_CLAMP);
    const __m256 xc = _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), c), _mm256_min_ps(c, x));
    const __m256 z = _mm256_mul_ps(xc, xc);
    __m256 p = _mm256_set1_ps(VTANH_P0);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VTANH_P1));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VTANH_P2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VTANH_P3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VTANH_P4));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VTANH_P5));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VTANH_P6));
    __m256 q = _mm256_set1_ps(VTANH_Q0);
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(VTANH_Q1));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(VTANH_Q2));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(VTANH_Q3));
    const __m256 r = _mm256_div_ps(_mm256_mul_ps(p, xc), q);
    const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(_mm256_set1_ps(-0.0f), x));   /* +-1 */
    const __m256 sat = _mm256_blendv_ps(r, one, _mm256_cmp_ps(ax, _mm256_set1_ps(VTANH_ONE), _CMP_GE_OQ));
    return _mm256_blendv_ps(sat, x, _mm256_cmp_ps(ax, _mm256_set1_ps(VTANH_TINY), _CMP_LT_OQ));
}

static inline __m256 erf256(__m256 x) {
    /* max(-4, min(4, x)) in this order keeps a NaN (min and max return their second operand) */
    x = _mm256_max_ps(_mm256_set1_ps(-4.0f), _mm256_min_ps(_mm256_set1_ps(4.0f), x));
    const __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-2.72614225801306e-10f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.77068142495902e-08f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-2.10102402082508e-06f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.69250639462346e-05f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-7.34990630326855e-04f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-2.95459980854025e-03f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.60960333262415e-02f));
    __m256 q = _mm256_set1_ps(-1.45660718464996e-05f);
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(-2.13374055278905e-04f));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(-1.68282697438203e-03f));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(-7.37332916720468e-03f));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(-1.42647390514189e-02f));
    return _mm256_div_ps(_mm256_mul_ps(x, p), q);
}

static inline __m256 gelu256(__m256 x) {
    const __m256 h = _mm256_mul_ps(_mm256_set1_ps(0.5f), x);
    return _mm256_fmadd_ps(h, erf256(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752440f))), h);
}

static inline __m256 gelu_tanh256(__m256 x) {
    /* -2u = x (c0 + c1 x^2), c0 = -2 sqrt(2/pi), c1 = c0 * 0.044715 */
    const __m256 c0 = _mm256_set1_ps(VGELU_TANH_C0), c1 = _mm256_set1_ps(VGELU_TANH_C1);
    __m256 m2u = _mm256_mul_ps(x, _mm256_fmadd_ps(c1, _mm256_mul_ps(x, x), c0));
    __m256 e = exp256(m2u);
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* log: Cephes' logf. x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = t - t^2/2 + t^3 P(t) for
 * t = m - 1 (P of degree 8), e ln2 added in two parts (ln2 = 0.693359375 - 2.12194440e-4, the
 * first exact in a few bits). Subnormal x scaled by 2^23 first. x < 0: NaN; 0: -inf; +inf:
 * +inf; NaN: itself. About 1 ulp against the double logarithm. */
static inline __m256 log256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sub = _mm256_cmp_ps(x, _mm256_set1_ps(FLT_MIN), _CMP_LT_OQ);
    const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), sub);
    const __m256i xi = _mm256_castps_si256(xs);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(126)));
    e = _mm256_sub_ps(e, _mm256_and_ps(sub, _mm256_set1_ps(23.0f)));
    /* the mantissa in [0.5, 1) */
    __m256 m = _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(xi, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));
    /* below sqrt(1/2): 2m - 1 and e - 1, else m - 1 */
    const __m256 lt = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
    e = _mm256_sub_ps(e, _mm256_and_ps(lt, one));
    m = _mm256_add_ps(_mm256_sub_ps(m, one), _mm256_and_ps(lt, m));
    const __m256 z = _mm256_mul_ps(m, m);
    __m256 p = _mm256_set1_ps(7.0376836292E-2f);
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(-1.1514610310E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(1.1676998740E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(-1.2420140846E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(1.4249322787E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(-1.6668057665E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(2.0000714765E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(-2.4999993993E-1f));
    p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(3.3333331174E-1f));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, m), z);
    y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440E-4f), y);
    y = _mm256_fmadd_ps(z, _mm256_set1_ps(-0.5f), y);
    __m256 r = _mm256_add_ps(m, y);
    r = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), r);
    r = _mm256_blendv_ps(r, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
    r = _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
    r = _mm256_blendv_ps(r, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)); log1p(u) for u in [0, 1] as log(w) - ((w - 1)
 * - u) / w with w = 1 + u (the rounding of w corrected: exact to a few ulp, u itself where w
 * rounds to 1). */
static inline __m256 softplus256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 u = exp256(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));   /* exp(-|x|); NaN stays */
    const __m256 w = _mm256_add_ps(one, u);
    const __m256 l = _mm256_sub_ps(log256(w), _mm256_div_ps(_mm256_sub_ps(_mm256_sub_ps(w, one), u), w));
    return _mm256_add_ps(_mm256_max_ps(x, _mm256_setzero_ps()), l);
}

/* x tanh(softplus(x)) = x n / (n + 2) with n = e^x (e^x + 2): one exp and one division, no
 * cancellation (all terms positive). e^x taken at min(x, 20), past which the ratio is 1 in
 * single precision (and a NaN x stays in the product). */
static inline __m256 mish256(__m256 x) {
    const __m256 e = exp256(_mm256_min_ps(x, _mm256_set1_ps(20.0f)));
    const __m256 n = _mm256_mul_ps(e, _mm256_add_ps(e, _mm256_set1_ps(2.0f)));
    return _mm256_mul_ps(x, _mm256_div_ps(n, _mm256_add_ps(n, _mm256_set1_ps(2.0f))));
}

/* exp(x) - 1 without the cancellation near 0: for |x| < 0.5 its Taylor series to x^8 (the next
 * term below 1.5e-8 of the value), exp(x) - 1 beyond. */
static inline __m256 expm1_256(__m256 x) {
    __m256 p = _mm256_set1_ps(1.0f / 40320.0f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f / 5040.0f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(0.5f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x), x, x);
    const __m256 big = _mm256_sub_ps(exp256(x), _mm256_set1_ps(1.0f));
    const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
}

/* Elu (scale 1) and Selu: x where x > 0 or (zero_keeps: Elu) x == 0, else alpha expm1(x); times
 * scale. */
static inline __m256 elu256(__m256 x, __m256 al, __m256 scale, __m256 zero_keeps) {
    const __m256 neg = _mm256_mul_ps(al, expm1_256(x));
    const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ),
                                     _mm256_and_ps(zero_keeps, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ)));
    return _mm256_mul_ps(scale, _mm256_blendv_ps(neg, x, keep));
}

/* F over rows rows of n values, row r at x0 + r ld (y0 likewise); the tail of each row as a
 * masked load and store (the lanes past it are zeros, computed and not written). */
#define VLOOP(F)                                                                              \
    do {                                                                                      \
        for (size_t r_ = 0; r_ < rows; r_++) {                                                \
            const float *x = x0 + r_ * ld;                                                    \
            float *y = y0 + r_ * ld;                                                          \
            size_t i = 0;                                                                     \
            for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));   \
            if (i < n) {                                                                      \
                const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)),        \
                                                     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); \
                _mm256_maskstore_ps(y + i, m, F(_mm256_maskload_ps(x + i, m)));               \
            }                                                                                 \
        }                                                                                     \
    } while (0)

void cuvil_f32_vexp__avx2(const float *x0, float *y0, size_t n) {
    const size_t rows = 1, ld = 0;
    VLOOP(exp256);
}

/* exp(x - m) of 16 values a step in two sums (8 in the tail, masked: its lanes past n add 0),
 * stored where y is given; the sums' lanes added at the end. */
float cuvil_f32_sum_exp_shifted__avx2(const float *x, float *y, size_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 e0 = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        const __m256 e1 = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        if (y) _mm256_storeu_ps(y + i, e0), _mm256_storeu_ps(y + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i < n; i += 8) {
        const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cuvil_min_i64(8, (int64_t)(n - i))),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm)), _mm256_castsi256_ps(k));
        if (y) _mm256_maskstore_ps(y + i, k, e);
        s0 = _mm256_add_ps(s0, e);
    }
    const __m256 s = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

int cuvil_f32_unary__avx2(const cuvil_act_params *a, const float *x, float *y, size_t n) {
    return cuvil_f32_unary_rows__avx2(a, x, y, 0, 1, n);
}

int cuvil_f32_unary_rows__avx2(const cuvil_act_params *a, const float *x0, float *y0, size_t ld, size_t rows,
                               size_t n) {
    switch (a->act) {
    case CUVIL_ACT_EXP: VLOOP(exp256); return 1;
    case CUVIL_ACT_SIGMOID: VLOOP(sigmoid256); return 1;
    case CUVIL_ACT_SILU: VLOOP(silu256); return 1;
    case CUVIL_ACT_TANH: VLOOP(tanh256); return 1;
    case CUVIL_ACT_ERF: VLOOP(erf256); return 1;
    case CUVIL_ACT_GELU: VLOOP(gelu256); return 1;
    case CUVIL_ACT_GELU_TANH: VLOOP(gelu_tanh256); return 1;
    case CUVIL_ACT_HARD_SWISH: VLOOP(hard_swish256); return 1;
    case CUVIL_ACT_HARD_SIGMOID: {
        const __m256 al = _mm256_set1_ps(a->alpha), be = _mm256_set1_ps(a->beta);
#define HSIG(v) hard_sigmoid256(v, al, be)
        VLOOP(HSIG);
#undef HSIG
        return 1;
    }
    case CUVIL_ACT_LOG: VLOOP(log256); return 1;
    case CUVIL_ACT_SQRT: VLOOP(_mm256_sqrt_ps); return 1;
    case CUVIL_ACT_SOFTPLUS: VLOOP(softplus256); return 1;
    case CUVIL_ACT_MISH: VLOOP(mish256); return 1;
    case CUVIL_ACT_ELU:
    case CUVIL_ACT_SELU: {
        /* Elu's alpha; Selu's alpha and gamma (beta) */
        const int selu = a->act == CUVIL_ACT_SELU;
        const __m256 al = _mm256_set1_ps(a->alpha), sc = _mm256_set1_ps(selu ? a->beta : 1.0f);
        const __m256 zk = _mm256_castsi256_ps(_mm256_set1_epi32(selu ? 0 : -1));
#define ELU(v) elu256(v, al, sc, zk)
        VLOOP(ELU);
#undef ELU
        return 1;
    }
    default: return 0;
    }
}
