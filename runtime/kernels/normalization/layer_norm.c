/*
 * layer_norm.c -- LayerNormalization: each row of x viewed as [rows, len] is normalised,
 * y = (x - mean) / sqrt(var + eps) * scale + bias, with scale and bias of len elements (or
 * bias absent). Mean and variance are accumulated in double in two passes over the row (the
 * row is read three times; rows are short enough to stay in cache), so large offsets lose no
 * precision.
 */
#include <math.h>

#include "../rt_int.h"

void cuvil_f32_layer_norm(const cuvil_layer_norm_params *p, const float *x, const float *scale, const float *bias,
                          float *y) {
    const int64_t n = p->len;
    if (n <= 0) return;
    for (int64_t r = 0; r < p->rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += xr[i];
        const double mean = s / (double)n;
        double v = 0;
        for (int64_t i = 0; i < n; i++) {
            const double d = xr[i] - mean;
            v += d * d;
        }
        const float inv = (float)(1.0 / sqrt(v / (double)n + (double)p->epsilon)), m = (float)mean;
        if (bias)
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * inv * scale[i] + bias[i];
        else
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * inv * scale[i];
    }
}
