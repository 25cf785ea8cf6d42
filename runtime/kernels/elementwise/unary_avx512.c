/*
 * unary_avx512.c -- AVX-512 versions of the exp-based activations that models spend time in
 * (exp, sigmoid, SiLU, Gelu's tanh form, tanh; x86_64-avx512 target only); the others stay in
 * unary_avx2.c.
 *
 * The same arithmetic as unary_avx2.c's exp256, sixteen lanes at a time, with the bits it gives
 * (checked by test_kernel_elementwise against a double reference and, over every float, once
 * by hand): x clamped to [-104, 89] (the clamps ordered so that a NaN passes through: maxps
 * returns its second operand when one is NaN), n = round(x log2 e), the Cephes polynomial on
 * x - n ln 2 (ln 2 in two parts), and the scaling by 2^n as vscalefps, one correctly rounded
 * product as the AVX2 path's one (|x| < 87) or two (there both halves are normal, so the first
 * is exact) products are, subnormal and overflowing results included.
 */
#include <immintrin.h>

#include "../rt_int.h"
#include "vexp_consts.h"

static inline __m512 exp512(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(VEXP_HI), _mm512_max_ps(_mm512_set1_ps(VEXP_LO), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(VEXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(VEXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 sigmoid512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static inline __m512 silu512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static inline __m512 gelu_tanh512(__m512 x) {   /* x sigmoid(2u), as unary_avx2.c's */
    const __m512 c0 = _mm512_set1_ps(VGELU_TANH_C0), c1 = _mm512_set1_ps(VGELU_TANH_C1);
    const __m512 m2u = _mm512_mul_ps(x, _mm512_fmadd_ps(c1, _mm512_mul_ps(x, x), c0));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(m2u)));
}

static inline __m512 tanh512(__m512 x) {   /* unary_avx2.c's tanh256, sixteen lanes */
    const __m512 c = _mm512_set1_ps(VTANH_CLAMP);
    const __m512 xc = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), c), _mm512_min_ps(c, x));
    const __m512 z = _mm512_mul_ps(xc, xc);
    __m512 p = _mm512_set1_ps(VTANH_P0);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(VTANH_P1));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(VTANH_P2));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(VTANH_P3));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(VTANH_P4));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(VTANH_P5));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(VTANH_P6));
    __m512 q = _mm512_set1_ps(VTANH_Q0);
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(VTANH_Q1));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(VTANH_Q2));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(VTANH_Q3));
    const __m512 r = _mm512_div_ps(_mm512_mul_ps(p, xc), q);
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)),
                                                           _mm512_andnot_si512(_mm512_castps_si512(ax), _mm512_castps_si512(x))));
    const __m512 sat = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(VTANH_ONE), _CMP_GE_OQ), r, one);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(VTANH_TINY), _CMP_LT_OQ), sat, x);
}

/* F over rows rows of n values, row r at x0 + r ld (y0 likewise); the tail of each row as a
 * masked load and store (the lanes past it are zeros, computed and not written). */
#define VLOOP512(F)                                                                           \
    do {                                                                                      \
        for (size_t r_ = 0; r_ < rows; r_++) {                                                \
            const float *x = x0 + r_ * ld;                                                    \
            float *y = y0 + r_ * ld;                                                          \
            size_t i = 0;                                                                     \
            for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i))); \
            if (i < n) {                                                                      \
                const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);                         \
                _mm512_mask_storeu_ps(y + i, m, F(_mm512_maskz_loadu_ps(m, x + i)));          \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* unary_avx2.c's cuvil_f32_sum_exp_shifted__avx2, 32 values a step, the tail masked */
float cuvil_f32_sum_exp_shifted__avx512(const float *x, float *y, size_t n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 e0 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        const __m512 e1 = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
        if (y) _mm512_storeu_ps(y + i, e0), _mm512_storeu_ps(y + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)));
        if (y) _mm512_mask_storeu_ps(y + i, k, e);
        s0 = _mm512_add_ps(s0, e);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

int cuvil_f32_unary_rows__avx512(const cuvil_act_params *a, const float *x0, float *y0, size_t ld, size_t rows,
                                 size_t n) {
    switch (a->act) {
    case CUVIL_ACT_EXP: VLOOP512(exp512); return 1;
    case CUVIL_ACT_SIGMOID: VLOOP512(sigmoid512); return 1;
    case CUVIL_ACT_SILU: VLOOP512(silu512); return 1;
    case CUVIL_ACT_GELU_TANH: VLOOP512(gelu_tanh512); return 1;
    case CUVIL_ACT_TANH: VLOOP512(tanh512); return 1;
    default: return 0;
    }
}
