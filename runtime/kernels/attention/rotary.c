/*
 * rotary.c -- ONNX RotaryEmbedding (cuvil_f32_rotary): each head's first rot dims rotated
 * pairwise by the cached angle of its position, the rest copied; and the additive mask of ONNX
 * Runtime's contrib attention from its mask index (cuvil_mask_index).
 */
#include <string.h>

#include "../rt_int.h"

int cuvil_f32_rotary(int interleaved, int x4d, int64_t B, int64_t S, int64_t H, int64_t D, int64_t rot, int64_t max_pos,
                     const float *x, const float *cos_c, const float *sin_c, const int64_t *pos, float *y) {
    const int64_t half = rot / 2;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t row = b * S + s;
            if (pos) {
                row = pos[b * S + s];
                if (row < 0 || row >= max_pos) return 1;
            }
            const float *c = cos_c + row * half, *sn = sin_c + row * half;
            for (int64_t h = 0; h < H; h++) {
                const int64_t at = (x4d ? (b * H + h) * S + s : (b * S + s) * H + h) * D;
                const float *xv = x + at;
                float *yv = y + at;
                for (int64_t j = 0; j < half; j++) {
                    const int64_t i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : j + half;
                    const float x1 = xv[i1], x2 = xv[i2];
                    yv[i1] = c[j] * x1 - sn[j] * x2;
                    yv[i2] = sn[j] * x1 + c[j] * x2;
                }
                if (D > rot) memcpy(yv + rot, xv + rot, sizeof(float) * (size_t)(D - rot));
            }
        }
    return 0;
}

void cuvil_mask_index(int t, int ndim, int64_t B, int64_t rows, int64_t T, const void *mask, float filter, float *y) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < T; j++) {
                const int64_t i = ndim == 1 ? b : ndim == 2 ? b * T + j : (b * rows + r) * T + j;
                const int64_t v = t == CUVIL_T_I32 ? ((const int32_t *)mask)[i]
                                  : t == CUVIL_T_I64 ? ((const int64_t *)mask)[i] : ((const uint8_t *)mask)[i];
                const int visible = ndim == 1 ? j < v : v != 0;
                y[(b * rows + r) * T + j] = visible ? 0.0f : filter;
            }
}

int cuvil_gqa_check(int64_t B, int64_t S, int64_t P, const int32_t *seqlens, const int32_t *total, const void *key,
                    void *y, size_t nbytes) {
    if ((int64_t)*total != P + S) return 1;
    for (int64_t b = 0; b < B; b++)
        if ((int64_t)seqlens[b] + 1 != P + S) return 1;
    if (nbytes) memcpy(y, key, nbytes);
    return 0;
}
