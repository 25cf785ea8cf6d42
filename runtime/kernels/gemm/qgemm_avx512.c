/*
 * qgemm_avx512.c -- integer GEMM microkernels on 512-bit registers (qgemm.c has the layouts).
 *
 * 8x16 AVX-512 BW: A packed as int16, B' sign-extended to int16 as it is loaded (32 bytes: 8
 * columns x 4 k per zmm), vpmaddwd adds each pair of products into int32 exactly; the two
 * partial sums of a column are added at the end (the even and the odd lanes of two
 * accumulators gathered by vpermt2d). 16 accumulators.
 * 12x16 AVX-512 VNNI: vpdpbusd adds four uint8 x int8 products into each int32 lane, one zmm of
 * B' per group of 4 k, A broadcast from memory; built with the avx512vnni attribute and picked
 * only on a CPU that has it (cuvil_qgemm_best).
 */
#include <immintrin.h>
#include <string.h>

#include "../rt_int.h"

static inline __attribute__((always_inline)) void put16(int32_t *c, __m512i v, int accumulate) {
    if (accumulate) v = _mm512_add_epi32(v, _mm512_loadu_si512(c));
    _mm512_storeu_si512(c, v);
}

void cuvil_qgemm_uk_8x16__avx512bw(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
    __m512i acc[8][2];
    for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    const int16_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += 32, b += 64) {
        const __m512i b0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b));
        const __m512i b1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b + 32)));
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            int64_t t;
            memcpy(&t, pa + 4 * r, 8);
            const __m512i ar = _mm512_set1_epi64(t);
            acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_madd_epi16(b0, ar));
            acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_madd_epi16(b1, ar));
        }
    }
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int r = 0; r < 8; r++) {
        const __m512i s = _mm512_add_epi32(_mm512_permutex2var_epi32(acc[r][0], ev, acc[r][1]),
                                           _mm512_permutex2var_epi32(acc[r][0], od, acc[r][1]));
        put16(c + r * ldc, s, accumulate);
    }
}

__attribute__((target("avx512vnni"))) void cuvil_qgemm_uk_12x16__avx512vnni(int64_t k4, const void *a, const int8_t *b,
                                                                             int32_t *c, int64_t ldc, int accumulate) {
    __m512i acc[12];
    for (int r = 0; r < 12; r++) acc[r] = _mm512_setzero_si512();
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += 48, b += 64) {
        const __m512i bv = _mm512_loadu_si512(b);
#pragma GCC unroll 12
        for (int r = 0; r < 12; r++) {
            int32_t t;
            memcpy(&t, pa + 4 * r, 4);
            acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(t), bv);
        }
    }
    for (int r = 0; r < 12; r++) put16(c + r * ldc, acc[r], accumulate);
}
