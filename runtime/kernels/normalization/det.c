/*
 * det.c -- determinants of a batch of square float32 matrices (ONNX Det): Gaussian
 * elimination with partial pivoting in double, the product of the pivots with the sign of the
 * row swaps. A matrix of M = 0 has determinant 1.
 */
#include <math.h>

#include "../rt_int.h"

void cuvil_f32_det(int64_t batch, int64_t M, const float *x, float *y, void *scratch) {
    double *a = scratch;
    for (int64_t b = 0; b < batch; b++) {
        const float *xb = x + b * M * M;
        for (int64_t i = 0; i < M * M; i++) a[i] = xb[i];
        double det = 1.0;
        for (int64_t c = 0; c < M && det != 0.0; c++) {
            int64_t p = c;
            for (int64_t r = c + 1; r < M; r++)
                if (fabs(a[r * M + c]) > fabs(a[p * M + c])) p = r;
            if (a[p * M + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (p != c) {
                for (int64_t k = 0; k < M; k++) {
                    const double t = a[c * M + k];
                    a[c * M + k] = a[p * M + k];
                    a[p * M + k] = t;
                }
                det = -det;
            }
            det *= a[c * M + c];
            for (int64_t r = c + 1; r < M; r++) {
                const double f = a[r * M + c] / a[c * M + c];
                for (int64_t k = c; k < M; k++) a[r * M + k] -= f * a[c * M + k];
            }
        }
        y[b] = (float)det;
    }
}
