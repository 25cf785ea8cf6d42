/*
 * layer_norm.c -- LayerNormalization: each row of x viewed as [rows, len] is normalised,
 * y = (x - mean) / sqrt(var + eps) * scale + bias, with scale and bias of len elements (or
 * bias absent). Mean and variance are accumulated in double in two passes over the row (the
 * row is read three times; rows are short enough to stay in cache), so large offsets lose no
 * precision. RMSNormalization is the same without the mean. InstanceNormalization is the same per (image, channel) row, with one scale and
 * bias per channel.
 */
#include <math.h>

#include "../rt_int.h"

/* The mean of n > 0 floats and 1 / sqrt(variance + eps), accumulated in double (two passes);
 * rms: the mean is taken as 0 (1 / sqrt(mean of squares + eps)). */
static void row_stats(const float *xr, int64_t n, float eps, int rms, float *m, float *inv) {
    if (rms) {
        double q = 0;
        for (int64_t i = 0; i < n; i++) q += (double)xr[i] * xr[i];
        *inv = (float)(1.0 / sqrt(q / (double)n + (double)eps));
        *m = 0.0f;
        return;
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += xr[i];
    const double mean = s / (double)n;
    double v = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = xr[i] - mean;
        v += d * d;
    }
    *inv = (float)(1.0 / sqrt(v / (double)n + (double)eps));
    *m = (float)mean;
}

void cuvil_f32_instance_norm(const cuvil_instance_norm_params *p, const float *x, const float *scale, const float *bias,
                             float *y) {
    const int64_t n = p->len;
    if (n <= 0) return;
    for (int64_t r = 0; r < p->batch * p->channels; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float m, inv;
        row_stats(xr, n, p->epsilon, 0, &m, &inv);
        const float sc = scale[r % p->channels] * inv, b = bias[r % p->channels];
        for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * sc + b;
    }
}

void cuvil_f32_layer_norm(const cuvil_layer_norm_params *p, const float *x, const float *scale, const float *bias,
                          float *y, float *mean, float *inv_std) {
    const int64_t n = p->len;
    if (n <= 0) return;
    for (int64_t r = 0; r < p->rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float m, inv;
        row_stats(xr, n, p->epsilon, p->rms, &m, &inv);
        if (mean) mean[r] = m;
        if (inv_std) inv_std[r] = inv;
        if (bias)
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * inv * scale[i] + bias[i];
        else
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * inv * scale[i];
    }
}
