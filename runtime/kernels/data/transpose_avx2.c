/*
 * transpose_avx2.c -- a float matrix transposed in 8 x 8 blocks in AVX registers (x86_64-avx2
 * and -avx512 targets): transpose.c's tiles of 4-byte elements.
 */
#include "../rt_int.h"
#include "../transpose8.h"

void cuvil_transpose_f32__avx2(const float *x, int64_t xs, float *y, int64_t ys, int64_t rows, int64_t cols) {
    int64_t r0 = 0;
    for (; r0 + 8 <= rows; r0 += 8) {
        int64_t c0 = 0;
        for (; c0 + 8 <= cols; c0 += 8) {
            __m256 a[8];
            for (int j = 0; j < 8; j++) a[j] = _mm256_loadu_ps(x + (r0 + j) * xs + c0);
            cuvil_transpose8_regs(a);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(y + (c0 + i) * ys + r0, a[i]);
        }
        for (; c0 < cols; c0++)
            for (int j = 0; j < 8; j++) y[c0 * ys + r0 + j] = x[(r0 + j) * xs + c0];
    }
    for (; r0 < rows; r0++)
        for (int64_t c = 0; c < cols; c++) y[c * ys + r0] = x[r0 * xs + c];
}
