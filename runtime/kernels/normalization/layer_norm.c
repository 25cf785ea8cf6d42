/*
 * layer_norm.c -- LayerNormalization: each row of x viewed as [rows, len] is normalised,
 * y = (x - mean) / sqrt(var + eps) * scale + bias, with scale and bias of len elements (or
 * bias absent). Mean and variance are accumulated in double about the row's mean taken first in
 * float (row_stats: the row is read three times; rows are short enough to stay in cache), so
 * large offsets lose no precision. RMSNormalization is the same without the mean. InstanceNormalization is the same per (image, channel) row, with one scale and
 * bias per channel.
 */
#include <math.h>

#include "../rt_int.h"

/* sum of xr[i] - c (c 0: the plain sum) and of its squares, in double, in 32 lanes (independent
 * chains the compiler vectorises: four vectors of 8 doubles or eight of 4, so that the adds of
 * one wait for none of the others; with 8 lanes BERT-base's layer norms took 2% of its int8
 * run), the row's last n % 32 values into the first lanes, then the lanes added pairwise (a
 * tree five adds deep: folded one after another, 2 x 32 dependent adds a pass made a row of 96
 * or 112 wait some 250 cycles, ConvNeXt-Tiny's layer norms over 96 channels 1.6x ONNX Runtime's
 * time, x86_64-avx512, AMD EPYC) */
static void sums(const float *xr, int64_t n, double c, double *s1, double *s2) {
    double a[32] = {0}, q[32] = {0};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 32; l++) {
            const double d = (double)xr[i + l] - c;
            a[l] += d;
            q[l] += d * d;
        }
    for (int l = 0; l < n - i; l++) {
        const double d = (double)xr[i + l] - c;
        a[l] += d;
        q[l] += d * d;
    }
    for (int w = 16; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w], q[l] += q[l + w];
    *s1 = a[0], *s2 = q[0];
}

/* The sum of n floats in float, 32 lanes added pairwise at the end (the shift of row_stats) */
static float fsum(const float *xr, int64_t n) {
    float a[32] = {0};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 32; l++) a[l] += xr[i + l];
    for (int l = 0; l < n - i; l++) a[l] += xr[i + l];
    for (int w = 16; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

/* The mean of n > 0 floats and 1 / sqrt(variance + eps), accumulated in double about a shift c
 * near the mean: the sums s of x - c and q of its squares give the mean c + s/n and the
 * variance q/n - (s/n)^2, in which nothing cancels (|s/n| is the float mean's error). The
 * shift is the mean taken in float (a pass of 16-lane float vectors, not 8-lane double ones),
 * or, where that sum overflows, the mean in double. rms: the mean is taken as 0 (1 / sqrt(mean
 * of squares + eps)). */
static void row_stats(const float *xr, int64_t n, float eps, int rms, float *m, float *inv) {
    double s, q;
    if (rms) {
        sums(xr, n, 0.0, &s, &q);
        *inv = (float)(1.0 / sqrt(q / (double)n + (double)eps));
        *m = 0.0f;
        return;
    }
    double c = (double)(fsum(xr, n) / (float)n);
    if (!isfinite(c)) {
        sums(xr, n, 0.0, &s, &q);
        c = s / (double)n;
    }
    sums(xr, n, c, &s, &q);
    const double d = s / (double)n, var = q / (double)n - d * d;
    *inv = (float)(1.0 / sqrt((var > 0.0 ? var : 0.0) + (double)eps));
    *m = (float)(c + d);
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

typedef struct ln_job {
    const cuvil_layer_norm_params *p;
    const float *x, *scale, *bias;
    float *y, *mean, *inv_std;
} ln_job;

static void ln_rows(void *vctx, int64_t r0, int64_t r1, int tid) {
    const ln_job *j = vctx;
    const int64_t n = j->p->len;
    const float *scale = j->scale, *bias = j->bias;
    (void)tid;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = j->x + r * n;
        float *yr = j->y + r * n;
        float m, inv;
        row_stats(xr, n, j->p->epsilon, j->p->rms, &m, &inv);
        if (j->mean) j->mean[r] = m;
        if (j->inv_std) j->inv_std[r] = inv;
        if (bias)
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * inv * scale[i] + bias[i];
        else
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - m) * inv * scale[i];
    }
}

/* rows split over the threads (chunks of at least 16384 / len rows) */
void cuvil_f32_layer_norm(const cuvil_layer_norm_params *p, const float *x, const float *scale, const float *bias,
                          float *y, float *mean, float *inv_std) {
    if (p->len <= 0) return;
    ln_job j = {p, x, scale, bias, y, mean, inv_std};
    cuvil_parallel_range(p->rows, 16384 / p->len, 1, ln_rows, &j);
}
