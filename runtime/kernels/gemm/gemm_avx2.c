/*
 * gemm_avx2.c -- the 6x16 AVX2+FMA GEMM microkernel (x86_64-avx2 target only).
 *
 * 12 ymm accumulators (6 rows x 2 vectors of 8), 2 ymm for the B row, 1 for the broadcast A
 * element: 15 of the 16 registers. Each k step is 2 loads, 6 broadcasts and 12 FMAs, so the two
 * FMA ports stay busy as long as the packed panels come from L1/L2.
 */
#include <immintrin.h>

#include "../rt_int.h"

#define MR 6
#define NR 16

void cuvil_f32_gemm_ukernel_6x16__avx2_fma(size_t kc, const float *a, const float *b, float *c,
                                           size_t ldc, size_t mr, size_t nr, const float *c_in,
                                           size_t ld_in) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();

#define STEP(off)                                                    \
    do {                                                             \
        const __m256 b0 = _mm256_loadu_ps(b + (off) * NR);            \
        const __m256 b1 = _mm256_loadu_ps(b + (off) * NR + 8);        \
        __m256 av = _mm256_broadcast_ss(a + (off) * MR + 0);         \
        c00 = _mm256_fmadd_ps(av, b0, c00);                          \
        c01 = _mm256_fmadd_ps(av, b1, c01);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 1);                \
        c10 = _mm256_fmadd_ps(av, b0, c10);                          \
        c11 = _mm256_fmadd_ps(av, b1, c11);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 2);                \
        c20 = _mm256_fmadd_ps(av, b0, c20);                          \
        c21 = _mm256_fmadd_ps(av, b1, c21);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 3);                \
        c30 = _mm256_fmadd_ps(av, b0, c30);                          \
        c31 = _mm256_fmadd_ps(av, b1, c31);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 4);                \
        c40 = _mm256_fmadd_ps(av, b0, c40);                          \
        c41 = _mm256_fmadd_ps(av, b1, c41);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 5);                \
        c50 = _mm256_fmadd_ps(av, b0, c50);                          \
        c51 = _mm256_fmadd_ps(av, b1, c51);                          \
    } while (0)

    for (size_t k = 0; k < kc; k++) {
        STEP(0);
        a += MR;
        b += NR;
    }
#undef STEP

    if (mr == MR && nr == NR) {
        if (c_in) {
            c00 = _mm256_add_ps(c00, _mm256_loadu_ps(c_in + 0 * ld_in));
            c01 = _mm256_add_ps(c01, _mm256_loadu_ps(c_in + 0 * ld_in + 8));
            c10 = _mm256_add_ps(c10, _mm256_loadu_ps(c_in + 1 * ld_in));
            c11 = _mm256_add_ps(c11, _mm256_loadu_ps(c_in + 1 * ld_in + 8));
            c20 = _mm256_add_ps(c20, _mm256_loadu_ps(c_in + 2 * ld_in));
            c21 = _mm256_add_ps(c21, _mm256_loadu_ps(c_in + 2 * ld_in + 8));
            c30 = _mm256_add_ps(c30, _mm256_loadu_ps(c_in + 3 * ld_in));
            c31 = _mm256_add_ps(c31, _mm256_loadu_ps(c_in + 3 * ld_in + 8));
            c40 = _mm256_add_ps(c40, _mm256_loadu_ps(c_in + 4 * ld_in));
            c41 = _mm256_add_ps(c41, _mm256_loadu_ps(c_in + 4 * ld_in + 8));
            c50 = _mm256_add_ps(c50, _mm256_loadu_ps(c_in + 5 * ld_in));
            c51 = _mm256_add_ps(c51, _mm256_loadu_ps(c_in + 5 * ld_in + 8));
        }
        _mm256_storeu_ps(c + 0 * ldc, c00);
        _mm256_storeu_ps(c + 0 * ldc + 8, c01);
        _mm256_storeu_ps(c + 1 * ldc, c10);
        _mm256_storeu_ps(c + 1 * ldc + 8, c11);
        _mm256_storeu_ps(c + 2 * ldc, c20);
        _mm256_storeu_ps(c + 2 * ldc + 8, c21);
        _mm256_storeu_ps(c + 3 * ldc, c30);
        _mm256_storeu_ps(c + 3 * ldc + 8, c31);
        _mm256_storeu_ps(c + 4 * ldc, c40);
        _mm256_storeu_ps(c + 4 * ldc + 8, c41);
        _mm256_storeu_ps(c + 5 * ldc, c50);
        _mm256_storeu_ps(c + 5 * ldc + 8, c51);
        return;
    }

    /* Edge tile: spill the accumulators and store the valid part. */
    float t[MR][NR] __attribute__((aligned(32)));
    _mm256_store_ps(t[0], c00);
    _mm256_store_ps(t[0] + 8, c01);
    _mm256_store_ps(t[1], c10);
    _mm256_store_ps(t[1] + 8, c11);
    _mm256_store_ps(t[2], c20);
    _mm256_store_ps(t[2] + 8, c21);
    _mm256_store_ps(t[3], c30);
    _mm256_store_ps(t[3] + 8, c31);
    _mm256_store_ps(t[4], c40);
    _mm256_store_ps(t[4] + 8, c41);
    _mm256_store_ps(t[5], c50);
    _mm256_store_ps(t[5] + 8, c51);
    for (size_t i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        if (c_in) {
            const float *ii = c_in + i * ld_in;
            for (size_t j = 0; j < nr; j++) ci[j] = t[i][j] + ii[j];
        } else {
            for (size_t j = 0; j < nr; j++) ci[j] = t[i][j];
        }
    }
}
