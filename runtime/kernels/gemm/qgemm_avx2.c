/*
 * qgemm_avx2.c -- integer GEMM microkernels on 256-bit registers (qgemm.c has the layouts).
 *
 * 2x16 AVX2: each row's 4 bytes of A' zero-extended to int16 (and repeated), B' sign-extended
 * to int16 as it is loaded (16 bytes: 4 columns x 4 k), vpmaddwd adds each pair of products
 * into int32 exactly; an accumulator holds two
 * partial sums per column, added pairwise at the end (vphaddd, then vpermq restores the column
 * order). 12 accumulators, 3 broadcast A rows and one B quarter: the 16 registers.
 * 6x16 AVX2 on 16-bit operands (w16): the driver widens A' and B' once per block (qgemm.c:
 * A's panels zero-extended, B's micro-panel sign-extended and regrouped by pairs of k), so the
 * loop has no conversions: per pair of k, two loads of B (16 columns), and per row one
 * broadcast load of the row's two A values and two vpmaddwd + vpaddd, each int32 lane one
 * column's sum. 12 accumulators; 2 uops per 16 multiply-adds (the 2x16 kernels spend 2.5-3.3).
 * 6x16 AVX2 on a pair-split B (ub): vpmaddubsw multiplies a row's 4 bytes of A' by 8 columns'
 * 4 bytes of B' and adds each pair of products into int16, vpmaddwd by ones adds the two pairs
 * into int32, vpaddd accumulates: 3 uops per 32 multiply-adds where the w16 form spends 4. The
 * int16 pair sum is exact only because B was packed pair-split (qgemm.c: no pair of B' whose
 * products can leave int16 for any uint8 A'), which the driver checks before it picks this.
 * 6x16 AVX-VNNI: vpdpbusd adds four uint8 x int8 products into each int32 lane, B' as packed
 * (two ymm per group of 4 k); built with the avxvnni attribute and picked only on a CPU that
 * has it (cuvil_qgemm_best).
 */
#include <immintrin.h>
#include <string.h>

#include "../rt_int.h"

static inline __attribute__((always_inline)) void put8(int32_t *c, __m256i v, int accumulate) {
    if (accumulate) v = _mm256_add_epi32(v, _mm256_loadu_si256((const __m256i *)c));
    _mm256_storeu_si256((__m256i *)c, v);
}

/* (named accumulators, not arrays: with an array GCC 12 keeps a copy of each accumulator on
 * the stack and stores it on every step) */
#define Q4(X, r) X(r, 0) X(r, 1) X(r, 2) X(r, 3)
#define ZERO(r, q) __m256i c##r##q = _mm256_setzero_si256();
/* the column pairs summed (vphaddd per 128-bit lane gives columns [0 1 4 5 | 2 3 6 7]; vpermq
 * 0,2,1,3 orders them), stored or added to c's row r */
#define PUTROW(r)                                                                                    \
    put8(c + (r) * ldc, _mm256_permute4x64_epi64(_mm256_hadd_epi32(c##r##0, c##r##1), 0xD8), accumulate); \
    put8(c + (r) * ldc + 8, _mm256_permute4x64_epi64(_mm256_hadd_epi32(c##r##2, c##r##3), 0xD8), accumulate);

/* an A row: its 4 bytes (vbroadcastss, a load) zero-extended to int16, 4 times over */
static inline __attribute__((always_inline)) __m256i arow16(const uint8_t *p) {
    return _mm256_cvtepu8_epi16(_mm_castps_si128(_mm_broadcast_ss((const float *)(const void *)p)));
}

/* 8 accumulators, an A row (or two) and the B quarters: within the 16 registers */
void cuvil_qgemm_uk_2x16__avx2(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
    Q4(ZERO, 0) Q4(ZERO, 1)
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 64) {
        const __m256i a0 = arow16(pa), a1 = arow16(pa + 4);
#define QSTEP(q, unused)                                                                   \
    {                                                                                      \
        const __m256i bq = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16 * (q)))); \
        c0##q = _mm256_add_epi32(c0##q, _mm256_madd_epi16(bq, a0));                        \
        c1##q = _mm256_add_epi32(c1##q, _mm256_madd_epi16(bq, a1));                        \
    }
        QSTEP(0, 0) QSTEP(1, 0) QSTEP(2, 0) QSTEP(3, 0)
#undef QSTEP
    }
    PUTROW(0) PUTROW(1)
}

/* The same with B already 16-bit (a conv's patches, built so each call): no sign extension in
 * the loop. */
void cuvil_qgemm_uk_2x16__avx2_b16(int64_t k4, const void *a, const int8_t *b8, int32_t *c, int64_t ldc, int accumulate) {
    Q4(ZERO, 0) Q4(ZERO, 1)
    const uint8_t *pa = a;
    const __m256i *b = (const __m256i *)(const void *)b8;
    for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 4) {
        const __m256i a0 = arow16(pa), a1 = arow16(pa + 4);
#define QSTEP(q, unused)                                                                   \
    {                                                                                      \
        const __m256i bq = _mm256_loadu_si256(b + (q));                                    \
        c0##q = _mm256_add_epi32(c0##q, _mm256_madd_epi16(bq, a0));                        \
        c1##q = _mm256_add_epi32(c1##q, _mm256_madd_epi16(bq, a1));                        \
    }
        QSTEP(0, 0) QSTEP(1, 0) QSTEP(2, 0) QSTEP(3, 0)
#undef QSTEP
    }
    PUTROW(0) PUTROW(1)
}

/* a: the widened A panel's row (CUVIL_QA16_GROUP int16 a group, the row's 4 values at 4 r); b: the
 * widened micro-panel (per group of 4 k: the 16 columns' pairs (k0, k1), then their (k2, k3)) */
void cuvil_qgemm_uk_6x16__avx2w(int64_t k4, const void *a, const int8_t *b8, int32_t *c, int64_t ldc, int accumulate) {
#define Z2(r) __m256i c##r##0 = _mm256_setzero_si256(), c##r##1 = _mm256_setzero_si256();
    Z2(0) Z2(1) Z2(2) Z2(3) Z2(4) Z2(5)
#undef Z2
    const int16_t *pa = a;
    const __m256i *b = (const __m256i *)(const void *)b8;
    for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA16_GROUP, b += 4) {
#define WROW(r, h)                                                                                        \
    {                                                                                                     \
        const __m256i ar = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(pa + 4 * (r) + 2 * (h)))); \
        c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(ar, b0));                                  \
        c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(ar, b1));                                  \
        __asm__("" : "+x"(c##r##0), "+x"(c##r##1));   /* (each pair's sums added as they come: else GCC \
                                                          adds the two pairs' products first and spills) */ \
    }
#define WPAIR(h)                                                                                          \
    {                                                                                                     \
        const __m256i b0 = _mm256_load_si256(b + 2 * (h)), b1 = _mm256_load_si256(b + 2 * (h) + 1);      \
        WROW(0, h) WROW(1, h) WROW(2, h) WROW(3, h) WROW(4, h) WROW(5, h)                                 \
    }
        WPAIR(0) WPAIR(1)
#undef WPAIR
#undef WROW
    }
#define P2(r) put8(c + (r) * ldc, c##r##0, accumulate); put8(c + (r) * ldc + 8, c##r##1, accumulate);
    P2(0) P2(1) P2(2) P2(3) P2(4) P2(5)
#undef P2
}

/* a: the packed A panel's rows (4 bytes each a group); b: a pair-split micro-panel in the packed
 * layout. 12 accumulators, the ones, a row's broadcast and two products: the 16 registers, B
 * read from memory by each vpmaddubsw. (In inline assembly: in C, GCC keeps B's two vectors in
 * registers and moves the accumulators through the stack, at 0.8x the rate.) */
void cuvil_qgemm_uk_6x16__avx2ub(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
#define Z2(r) __m256i c##r##0 = _mm256_setzero_si256(), c##r##1 = _mm256_setzero_si256();
    Z2(0) Z2(1) Z2(2) Z2(3) Z2(4) Z2(5)
#undef Z2
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 64) {
        __m256i ar, t0, t1;
        __asm__(
        "vpbroadcastd 0(%[pa]), %[ar]\n\t"
        "vpmaddubsw (%[b]), %[ar], %[t0]\n\t"
        "vpmaddubsw 32(%[b]), %[ar], %[t1]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t0], %[c00], %[c00]\n\t"
        "vpaddd %[t1], %[c01], %[c01]\n\t"
        "vpbroadcastd 4(%[pa]), %[ar]\n\t"
        "vpmaddubsw (%[b]), %[ar], %[t0]\n\t"
        "vpmaddubsw 32(%[b]), %[ar], %[t1]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t0], %[c10], %[c10]\n\t"
        "vpaddd %[t1], %[c11], %[c11]\n\t"
        "vpbroadcastd 8(%[pa]), %[ar]\n\t"
        "vpmaddubsw (%[b]), %[ar], %[t0]\n\t"
        "vpmaddubsw 32(%[b]), %[ar], %[t1]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t0], %[c20], %[c20]\n\t"
        "vpaddd %[t1], %[c21], %[c21]\n\t"
        "vpbroadcastd 12(%[pa]), %[ar]\n\t"
        "vpmaddubsw (%[b]), %[ar], %[t0]\n\t"
        "vpmaddubsw 32(%[b]), %[ar], %[t1]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t0], %[c30], %[c30]\n\t"
        "vpaddd %[t1], %[c31], %[c31]\n\t"
        "vpbroadcastd 16(%[pa]), %[ar]\n\t"
        "vpmaddubsw (%[b]), %[ar], %[t0]\n\t"
        "vpmaddubsw 32(%[b]), %[ar], %[t1]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t0], %[c40], %[c40]\n\t"
        "vpaddd %[t1], %[c41], %[c41]\n\t"
        "vpbroadcastd 20(%[pa]), %[ar]\n\t"
        "vpmaddubsw (%[b]), %[ar], %[t0]\n\t"
        "vpmaddubsw 32(%[b]), %[ar], %[t1]\n\t"
        "vpmaddwd %[ones], %[t0], %[t0]\n\t"
        "vpmaddwd %[ones], %[t1], %[t1]\n\t"
        "vpaddd %[t0], %[c50], %[c50]\n\t"
        "vpaddd %[t1], %[c51], %[c51]\n\t"
        : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51),
          [ar] "=&x"(ar), [t0] "=&x"(t0), [t1] "=&x"(t1)
        : [pa] "r"(pa), [b] "r"(b), [ones] "x"(ones)
        : "memory");
    }
#define P2(r) put8(c + (r) * ldc, c##r##0, accumulate); put8(c + (r) * ldc + 8, c##r##1, accumulate);
    P2(0) P2(1) P2(2) P2(3) P2(4) P2(5)
#undef P2
}

__attribute__((target("avxvnni"))) void cuvil_qgemm_uk_6x16__avxvnni(int64_t k4, const void *a, const int8_t *b,
                                                                      int32_t *c, int64_t ldc, int accumulate) {
#define Z2(r) __m256i c##r##0 = _mm256_setzero_si256(), c##r##1 = _mm256_setzero_si256();
    Z2(0) Z2(1) Z2(2) Z2(3) Z2(4) Z2(5)
#undef Z2
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 64) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 32));
#define VSTEP(r)                                                                                  \
    {                                                                                             \
        const __m256i ar = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(pa + 4 * (r)))); \
        c##r##0 = _mm256_dpbusd_avx_epi32(c##r##0, ar, b0);                                       \
        c##r##1 = _mm256_dpbusd_avx_epi32(c##r##1, ar, b1);                                       \
    }
        VSTEP(0) VSTEP(1) VSTEP(2) VSTEP(3) VSTEP(4) VSTEP(5)
#undef VSTEP
    }
#define P2(r) put8(c + (r) * ldc, c##r##0, accumulate); put8(c + (r) * ldc + 8, c##r##1, accumulate);
    P2(0) P2(1) P2(2) P2(3) P2(4) P2(5)
#undef P2
}
