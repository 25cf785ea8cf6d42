/* transpose8.h -- an 8 x 8 float transpose in AVX registers, for the packers that turn rows
 * into k steps (conv2d.c's channels-last im2col, gemm.c's row-major A). AVX2 targets only. */
#ifndef CUVIL_TRANSPOSE8_H
#define CUVIL_TRANSPOSE8_H

#if defined(__AVX2__)
#include <immintrin.h>

/* a[i][j] = a[j][i] for 8 vectors of 8 floats, in registers. */
static inline void cuvil_transpose8_regs(__m256 a[8]) {
    __m256 t[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        a[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        a[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        a[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        a[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(a[i], a[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(a[i], a[i + 4], 0x31);
    }
    for (int i = 0; i < 8; i++) a[i] = t[i];
}
#endif

#endif
