/*
 * qgemm_avx512.c -- integer GEMM microkernels on 512-bit registers (qgemm.c has the layouts).
 *
 * 12x16 AVX-512 BW: each row's 4 bytes of A' zero-extended to int16 (and repeated), B'
 * sign-extended to int16 as it is loaded (32 bytes: 8 columns x 4 k per zmm), vpmaddwd adds
 * each pair of products into int32 exactly; the two partial sums of a column are added at the
 * end (the even and the odd lanes of two accumulators gathered by vpermt2d). 24 accumulators.
 * 12x16 AVX-512 VNNI: vpdpbusd adds four uint8 x int8 products into each int32 lane, one zmm of
 * B' per group of 4 k, A broadcast from memory; built with the avx512vnni attribute and picked
 * only on a CPU that has it (cuvil_qgemm_best).
 * 12x32 AVX-512 VNNI: the same on two panels at once, 24 accumulators: one broadcast of A feeds
 * two vpdpbusd (the 12x16 kernel loads 13 registers for 12 of them and runs ~15% slower).
 * 4x16 and 4x32 AVX-512 VNNI: the same on 4 rows, for products of up to 4 rows.
 */
#include <immintrin.h>
#include <string.h>

#include "../rt_int.h"

#define R12B(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

static inline __attribute__((always_inline)) void put16(int32_t *c, __m512i v, int accumulate) {
    if (accumulate) v = _mm512_add_epi32(v, _mm512_loadu_si512(c));
    _mm512_storeu_si512(c, v);
}

void cuvil_qgemm_uk_12x16__avx512bw(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
#define Z2(r) __m512i c##r##0 = _mm512_setzero_si512(), c##r##1 = _mm512_setzero_si512();
    R12B(Z2)
#undef Z2
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 64) {
        const __m512i b0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b));
        const __m512i b1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b + 32)));
#define WSTEP(r)                                                                                      \
    {                                                                                                 \
        const __m512i ar = _mm512_cvtepu8_epi16(_mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)(pa + 4 * (r))))); \
        c##r##0 = _mm512_add_epi32(c##r##0, _mm512_madd_epi16(b0, ar));                               \
        c##r##1 = _mm512_add_epi32(c##r##1, _mm512_madd_epi16(b1, ar));                               \
    }
        R12B(WSTEP)
#undef WSTEP
    }
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#define WPUT(r)                                                                                                  \
    put16(c + (r) * ldc,                                                                                         \
          _mm512_add_epi32(_mm512_permutex2var_epi32(c##r##0, ev, c##r##1), _mm512_permutex2var_epi32(c##r##0, od, c##r##1)), \
          accumulate);
    R12B(WPUT)
#undef WPUT
}

/* (named accumulators, not an array: with an array GCC 12 moves every accumulator between two
 * registers on each step) */
#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define R4(X) X(0) X(1) X(2) X(3)

/* One 16-column panel, the rows of RX */
#define ZERO(r) __m512i c##r = _mm512_setzero_si512();
#define STEP(r)                                                   \
    {                                                             \
        int32_t t;                                                \
        memcpy(&t, pa + 4 * (r), 4);                              \
        c##r = _mm512_dpbusd_epi32(c##r, _mm512_set1_epi32(t), bv); \
    }
#define PUT(r) put16(c + (r) * ldc, c##r, accumulate);
#define VNNI16(NAME, RX)                                                                                                \
    __attribute__((target("avx512vnni"))) void NAME(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, \
                                                    int accumulate) {                                                 \
        RX(ZERO)                                                                                                      \
        const uint8_t *pa = a;                                                                                        \
        for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 64) {                                             \
            const __m512i bv = _mm512_loadu_si512(b);                                                                 \
            RX(STEP)                                                                                                  \
        }                                                                                                             \
        RX(PUT)                                                                                                       \
    }

/* Two panels at once: one broadcast of A feeds two vpdpbusd */
#define ZERO2(r) __m512i c##r = _mm512_setzero_si512(), d##r = _mm512_setzero_si512();
#define STEP2(r)                                                  \
    {                                                             \
        int32_t t;                                                \
        memcpy(&t, pa + 4 * (r), 4);                              \
        const __m512i av = _mm512_set1_epi32(t);                  \
        c##r = _mm512_dpbusd_epi32(c##r, av, bv);                 \
        d##r = _mm512_dpbusd_epi32(d##r, av, bw);                 \
    }
#define PUT2(r)                                   \
    put16(c + (r) * ldc, c##r, accumulate);       \
    put16(c + (r) * ldc + 16, d##r, accumulate);
#define VNNI32(NAME, RX)                                                                                                \
    __attribute__((target("avx512vnni"))) void NAME(int64_t k4, const void *a, const int8_t *b, int64_t bstride,       \
                                                    int32_t *c, int64_t ldc, int accumulate) {                        \
        RX(ZERO2)                                                                                                     \
        const uint8_t *pa = a;                                                                                        \
        const int8_t *b2 = b + bstride;                                                                               \
        for (int64_t g = 0; g < k4; g++, pa += CUVIL_QA_GROUP, b += 64, b2 += 64) {                                   \
            const __m512i bv = _mm512_loadu_si512(b), bw = _mm512_loadu_si512(b2);                                   \
            RX(STEP2)                                                                                                 \
        }                                                                                                             \
        RX(PUT2)                                                                                                      \
    }

VNNI16(cuvil_qgemm_uk_12x16__avx512vnni, R12)
VNNI32(cuvil_qgemm_uk_12x32__avx512vnni, R12)
/* a few rows (a recurrence's batch, a decoder's token): a third of the 12-row kernels' work */
VNNI16(cuvil_qgemm_uk_4x16__avx512vnni, R4)
VNNI32(cuvil_qgemm_uk_4x32__avx512vnni, R4)
