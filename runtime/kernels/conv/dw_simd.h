/* dw_simd.h -- the vectors of the depthwise convolutions (conv2d.c, dw_nhwc.c): DW_SIMD floats
 * (AVX-512: 16, AVX2+FMA: 8; undefined on other targets, which run the portable loops), and
 * the masks that take the first n lanes. */
#ifndef CUVIL_DW_SIMD_H
#define CUVIL_DW_SIMD_H

#include <stdint.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define DW_SIMD 16
typedef __m512 dwv;
typedef __mmask16 dwm;
static inline dwm dw_mask(int64_t n) { return (dwm)(n >= 16 ? 0xFFFFu : (1u << n) - 1u); }
#define DW_LOAD(p) _mm512_loadu_ps(p)
#define DW_LOADM(p, m) _mm512_maskz_loadu_ps(m, p)
#define DW_STOREM(p, v, m) _mm512_mask_storeu_ps(p, m, v)
#define DW_STORE(p, v) _mm512_storeu_ps(p, v)
#define DW_SET1(x) _mm512_set1_ps(x)
#define DW_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define DW_ADD(a, b) _mm512_add_ps(a, b)
#define DW_MUL(a, b) _mm512_mul_ps(a, b)
#define DW_MAX(a, b) _mm512_max_ps(a, b)
#define DW_MIN(a, b) _mm512_min_ps(a, b)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DW_SIMD 8
typedef __m256 dwv;
typedef __m256i dwm;
static inline dwm dw_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n >= 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define DW_LOAD(p) _mm256_loadu_ps(p)
#define DW_LOADM(p, m) _mm256_maskload_ps(p, m)
#define DW_STOREM(p, v, m) _mm256_maskstore_ps(p, m, v)
#define DW_STORE(p, v) _mm256_storeu_ps(p, v)
#define DW_SET1(x) _mm256_set1_ps(x)
#define DW_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define DW_ADD(a, b) _mm256_add_ps(a, b)
#define DW_MUL(a, b) _mm256_mul_ps(a, b)
#define DW_MAX(a, b) _mm256_max_ps(a, b)
#define DW_MIN(a, b) _mm256_min_ps(a, b)
#endif

#ifdef DW_SIMD
/* HardSwish with the operations of unary_avx2.c's hard_swish256 in their order (the bits of
 * the activation applied after the conv). */
static inline dwv dw_hswish(dwv x) {
    const dwv v = DW_ADD(DW_MUL(x, DW_SET1(1.0f / 6.0f)), DW_SET1(0.5f));
    return DW_MUL(x, DW_MAX(DW_MIN(v, DW_SET1(1.0f)), DW_SET1(0.0f)));
}
#endif

#endif
