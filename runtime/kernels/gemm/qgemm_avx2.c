/*
 * qgemm_avx2.c -- integer GEMM microkernels on 256-bit registers (qgemm.c has the layouts).
 *
 * 3x16 AVX2: A packed as int16, B' sign-extended to int16 as it is loaded (16 bytes: 4 columns
 * x 4 k), vpmaddwd adds each pair of products into int32 exactly; an accumulator holds two
 * partial sums per column, added pairwise at the end (vphaddd, then vpermq restores the column
 * order). 12 accumulators, 3 broadcast A rows and one B quarter: the 16 registers.
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

void cuvil_qgemm_uk_3x16__avx2(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
    __m256i acc[3][4];
    for (int r = 0; r < 3; r++)
        for (int q = 0; q < 4; q++) acc[r][q] = _mm256_setzero_si256();
    const int16_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += 12, b += 64) {
        int64_t t0, t1, t2;
        memcpy(&t0, pa, 8);
        memcpy(&t1, pa + 4, 8);
        memcpy(&t2, pa + 8, 8);
        const __m256i a0 = _mm256_set1_epi64x(t0), a1 = _mm256_set1_epi64x(t1), a2 = _mm256_set1_epi64x(t2);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            const __m256i bq = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16 * q)));
            acc[0][q] = _mm256_add_epi32(acc[0][q], _mm256_madd_epi16(bq, a0));
            acc[1][q] = _mm256_add_epi32(acc[1][q], _mm256_madd_epi16(bq, a1));
            acc[2][q] = _mm256_add_epi32(acc[2][q], _mm256_madd_epi16(bq, a2));
        }
    }
    for (int r = 0; r < 3; r++) {
        /* hadd per 128-bit lane gives columns [0 1 4 5 | 2 3 6 7]; vpermq 0,2,1,3 orders them */
        const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
        const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][2], acc[r][3]), 0xD8);
        put8(c + r * ldc, lo, accumulate);
        put8(c + r * ldc + 8, hi, accumulate);
    }
}

__attribute__((target("avxvnni"))) void cuvil_qgemm_uk_6x16__avxvnni(int64_t k4, const void *a, const int8_t *b,
                                                                      int32_t *c, int64_t ldc, int accumulate) {
    __m256i acc[6][2];
    for (int r = 0; r < 6; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += 24, b += 64) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 32));
#pragma GCC unroll 6
        for (int r = 0; r < 6; r++) {
            int32_t t;
            memcpy(&t, pa + 4 * r, 4);
            const __m256i ar = _mm256_set1_epi32(t);
            acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], ar, b0);
            acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], ar, b1);
        }
    }
    for (int r = 0; r < 6; r++) {
        put8(c + r * ldc, acc[r][0], accumulate);
        put8(c + r * ldc + 8, acc[r][1], accumulate);
    }
}
