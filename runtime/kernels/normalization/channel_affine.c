/*
 * channel_affine.c -- y[n,c,i] = act(x[n,c,i] * scale[c] + shift[c]) (inference BatchNorm
 * after folding). y may equal x. inner == 1 ([N, C] inputs) runs across channels instead of
 * across the (length-1) inner axis so the loop still vectorises.
 */
#include <math.h>

#include "../rt_int.h"

void cuvil_f32_channel_affine(const cuvil_channel_affine_params *p, const float *x,
                              const float *scale, const float *shift, float *y) {
    const int64_t N = p->N, C = p->C, I = p->inner;
    if (I == 1) {
        for (int64_t n = 0; n < N; n++) {
            const float *xn = x + n * C;
            float *yn = y + n * C;
            for (int64_t c = 0; c < C; c++) yn[c] = xn[c] * scale[c] + shift[c];
            if (p->act.act != CUVIL_ACT_NONE) cuvil_f32_unary(&p->act, yn, yn, (size_t)C);
        }
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const float *xr = x + (n * C + c) * I;
            float *yr = y + (n * C + c) * I;
            const float s = scale[c], t = shift[c];
            for (int64_t i = 0; i < I; i++) yr[i] = xr[i] * s + t;
            if (p->act.act != CUVIL_ACT_NONE) cuvil_f32_unary(&p->act, yr, yr, (size_t)I);
        }
}

void cuvil_f32_channel_affine__scalar(const cuvil_channel_affine_params *p, const float *x,
                                      const float *scale, const float *shift, float *y) {
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t c = 0; c < p->C; c++)
            for (int64_t i = 0; i < p->inner; i++) {
                const int64_t k = (n * p->C + c) * p->inner + i;
                y[k] = cuvil_f32_act1(&p->act, x[k] * scale[c] + shift[c]);
            }
}

void cuvil_f32_bn_affine(int64_t C, float eps, const float *gamma, const float *beta, const float *mean, const float *var,
                         float *scale, float *shift) {
    for (int64_t c = 0; c < C; c++) {
        const double sc = (double)gamma[c] / sqrt((double)var[c] + (double)eps);
        scale[c] = (float)sc;
        shift[c] = (float)((double)beta[c] - (double)mean[c] * sc);
    }
}

void cuvil_f32_lrn(int64_t N, int64_t C, int64_t inner, int64_t size, float alpha, float beta, float bias, const float *x,
                   float *y) {
    const int64_t lo = (size - 1) / 2, hi = size / 2;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < inner; i++) {
                double sq = 0;
                const int64_t k0 = c - lo < 0 ? 0 : c - lo, k1 = hi > C - 1 - c ? C - 1 : c + hi;   /* no overflow */
                for (int64_t k = k0; k <= k1; k++) {
                    const double v = x[(n * C + k) * inner + i];
                    sq += v * v;
                }
                y[(n * C + c) * inner + i] =
                    (float)(x[(n * C + c) * inner + i] / pow((double)bias + (double)alpha / (double)size * sq, (double)beta));
            }
}
