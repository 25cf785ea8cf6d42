/*
 * geom.c -- CenterCropPad, AffineGrid and Col2Im with their shape inputs read when the model
 * runs: each checks that the values give the output it was compiled for, then computes it
 * directly.
 */
#include <string.h>

#include "../rt_int.h"

int cuvil_center_crop_pad(int ndim, const int64_t *in_dims, const int64_t *out_dims, int n_axes, const int64_t *axes,
                          const int64_t *shape, size_t esize, const void *x, void *y) {
    for (int i = 0; i < n_axes; i++)
        if (shape[i] != out_dims[axes[i]]) return 1;
    int64_t off[8], total = 1;
    for (int d = 0; d < ndim; d++) {   /* source = destination + off (negative: padding before) */
        off[d] = in_dims[d] >= out_dims[d] ? (in_dims[d] - out_dims[d]) / 2 : -((out_dims[d] - in_dims[d]) / 2);
        total *= out_dims[d];
    }
    const char *X = x;
    char *Y = y;
    for (int64_t o = 0; o < total; o++) {
        int64_t src = 0, r = o, mul = 1;
        int inside = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            const int64_t c = r % out_dims[d] + off[d];
            r /= out_dims[d];
            inside &= c >= 0 && c < in_dims[d];
            src += c * mul;
            mul *= in_dims[d];
        }
        if (inside) memcpy(Y + (size_t)o * esize, X + (size_t)src * esize, esize);
        else memset(Y + (size_t)o * esize, 0, esize);
    }
    return 0;
}

/* Coordinate i of n points in -1..1. */
static double base(int64_t i, int64_t n, int align) {
    if (align) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

int cuvil_f32_affine_grid(int nd, int align_corners, int64_t N, const int64_t *sp, const int64_t *size,
                          const float *theta, float *grid) {
    if (size[0] != N) return 1;
    int64_t pts = 1;
    for (int i = 0; i < nd; i++) {
        if (size[2 + i] != sp[i]) return 1;
        pts *= sp[i];
    }
    for (int64_t n = 0; n < N; n++) {
        const float *t = theta + n * nd * (nd + 1);
        for (int64_t p = 0; p < pts; p++) {
            double v[4] = {0, 0, 0, 1.0};   /* (x, y[, z], 1): x along the last dim */
            for (int64_t r = p, i = nd - 1; i >= 0; i--) {
                v[nd - 1 - i] = base(r % sp[i], sp[i], align_corners);
                r /= sp[i];
            }
            v[nd] = 1.0;
            for (int k = 0; k < nd; k++) {
                double acc = 0.0;
                for (int j = 0; j <= nd; j++) acc += (double)t[k * (nd + 1) + j] * v[j];
                grid[(n * pts + p) * nd + k] = (float)acc;
            }
        }
    }
    return 0;
}

int cuvil_f32_col2im(int nsp, int64_t N, int64_t C, int64_t CK, int64_t L, const int64_t *img, const int64_t *d,
                     const int64_t *st, const int64_t *pads, const int64_t *image_shape, const int64_t *block_shape,
                     const float *x, float *y) {
    int64_t win = 1, blocks[CUVIL_ND_MAX], nb = 1, isz = 1;
    for (int i = 0; i < nsp; i++) {
        /* each block fits the padded image: bs - 1 <= (img + pads) / d, so no product overflows */
        if (image_shape[i] != img[i] || block_shape[i] < 1 ||
            block_shape[i] - 1 > (img[i] + pads[i] + pads[nsp + i]) / d[i] || win > CK / block_shape[i])
            return 1;
        win *= block_shape[i];
        const int64_t span = img[i] + pads[i] + pads[nsp + i] - d[i] * (block_shape[i] - 1) - 1;
        if (span < 0) return 1;
        blocks[i] = span / st[i] + 1;
        nb *= blocks[i];
        isz *= img[i];
    }
    if (win * C != CK || nb != L) return 1;
    memset(y, 0, sizeof(float) * (size_t)(N * C * isz));
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < win; t++) {
                const float *row = x + (n * CK + c * win + t) * L;
                float *yc = y + (n * C + c) * isz;
                for (int64_t l = 0; l < L; l++) {
                    int64_t off = 0, rt = t, rl = l, mul = 1;
                    int inside = 1;
                    for (int i = nsp - 1; i >= 0; i--) {
                        const int64_t ti = rt % block_shape[i], li = rl % blocks[i];
                        rt /= block_shape[i];
                        rl /= blocks[i];
                        const int64_t at = li * st[i] - pads[i] + ti * d[i];
                        inside &= at >= 0 && at < img[i];
                        off += at * mul;
                        mul *= img[i];
                    }
                    if (inside) yc[off] += row[l];
                }
            }
    return 0;
}
