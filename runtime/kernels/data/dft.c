/*
 * dft.c -- ONNX DFT and STFT as direct sums (O(n^2) per line): forward, inverse and inverse
 * one-sided (real output, numpy's irfft), the twiddle of k*t taken mod n in double.
 */
#include <math.h>

#include "../rt_int.h"

/* e^{sign * 2 pi i * kt / n} */
static void twiddle(int64_t kt, int64_t n, double sign, double *re, double *im) {
    const double a = sign * 2.0 * M_PI * (double)(kt % n) / (double)n;
    *re = cos(a);
    *im = sin(a);
}

void cuvil_f32_dft(const cuvil_dft_params *p, const float *x, float *y) {
    const int c = p->in_complex ? 2 : 1, oc = p->mode == 2 ? 1 : 2;
    const int64_t taps = p->len < p->n ? p->len : p->n;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t in = 0; in < p->inner; in++) {
            const float *xl = x + (o * p->len * p->inner + in) * c;   /* element t at xl[t * inner * c] */
            float *yl = y + (o * p->out_len * p->inner + in) * oc;
            for (int64_t k = 0; k < p->out_len; k++) {
                double sr = 0.0, si = 0.0;
                if (p->mode == 2) {   /* real output from the one-sided half: Hermitian symmetry */
                    const int64_t half = p->n / 2;
                    for (int64_t f = 0; f <= half && f < p->len; f++) {
                        const double xr = xl[f * p->inner * c], xi = c == 2 ? xl[f * p->inner * c + 1] : 0.0;
                        double wr, wi;
                        twiddle(f * k, p->n, 1.0, &wr, &wi);
                        const double re = xr * wr - xi * wi;
                        /* DC and (n even) Nyquist once, their imaginary parts dropped; the others twice */
                        sr += f == 0 || (p->n % 2 == 0 && f == half) ? xr * (f == 0 ? 1.0 : wr) : 2.0 * re;
                    }
                    yl[k * p->inner * oc] = (float)(sr / (double)p->n);
                    continue;
                }
                for (int64_t t = 0; t < taps; t++) {
                    const double xr = xl[t * p->inner * c], xi = c == 2 ? xl[t * p->inner * c + 1] : 0.0;
                    double wr, wi;
                    twiddle(k * t, p->n, p->mode == 1 ? 1.0 : -1.0, &wr, &wi);
                    sr += xr * wr - xi * wi;
                    si += xr * wi + xi * wr;
                }
                const double scale = p->mode == 1 ? 1.0 / (double)p->n : 1.0;
                yl[k * p->inner * oc] = (float)(sr * scale);
                yl[k * p->inner * oc + 1] = (float)(si * scale);
            }
        }
}

void cuvil_f32_stft(const cuvil_stft_params *p, const float *x, const float *window, float *y) {
    const int c = p->in_complex ? 2 : 1;
    const int64_t taps = p->win_len < p->n ? p->win_len : p->n;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t f = 0; f < p->frames; f++)
            for (int64_t k = 0; k < p->bins; k++) {
                double sr = 0.0, si = 0.0;
                for (int64_t t = 0; t < taps; t++) {
                    const int64_t s = f * p->step + t;
                    if (s >= p->sig_len) break;   /* the last frames are zero-padded */
                    const double w = window ? window[t] : 1.0;
                    const double xr = x[(b * p->sig_len + s) * c] * w, xi = c == 2 ? x[(b * p->sig_len + s) * c + 1] * w : 0.0;
                    double wr, wi;
                    twiddle(k * t, p->n, -1.0, &wr, &wi);
                    sr += xr * wr - xi * wi;
                    si += xr * wi + xi * wr;
                }
                float *yo = y + ((b * p->frames + f) * p->bins + k) * 2;
                yo[0] = (float)sr;
                yo[1] = (float)si;
            }
}

int cuvil_f32_dft_rt(const cuvil_dft_rt_params *p, const void *axis_v, const void *len_v, const float *x, float *y) {
    int64_t axis = p->axis_t ? cuvil_ld_index(p->axis_t, axis_v, 0) : p->axis;
    int64_t n = p->len_t ? cuvil_ld_index(p->len_t, len_v, 0) : p->n;
    if (axis < -p->ndim || axis >= p->ndim) return 1;
    const int a = (int)(axis < 0 ? axis + p->ndim : axis);
    if (a == p->ndim - 1) return 1;
    if (n < 0) n = p->inverse && p->onesided ? 2 * (p->dims[a] - 1) : p->dims[a];
    if (n < 1) return 1;
    cuvil_dft_params q = {.mode = !p->inverse ? 0 : p->onesided ? 2 : 1, .in_complex = p->dims[p->ndim - 1] == 2,
                          .outer = 1, .len = p->dims[a], .inner = 1, .n = n,
                          .out_len = !p->inverse && p->onesided ? n / 2 + 1 : n};
    for (int d = 0; d < p->ndim - 1; d++) {   /* the output the model was compiled for, or fail */
        const int64_t want = d == a ? q.out_len : p->dims[d];
        if (p->out_dims[d] != want) return 1;
        if (d < a) q.outer *= p->dims[d];
        if (d > a) q.inner *= p->dims[d];
    }
    if (p->out_dims[p->ndim - 1] != (q.mode == 2 ? 1 : 2)) return 1;
    cuvil_f32_dft(&q, x, y);
    return 0;
}

int cuvil_f32_stft_rt(const cuvil_stft_rt_params *p, const void *step_v, const void *len_v, const float *x,
                      const float *window, float *y) {
    const int64_t step = p->step_t ? cuvil_ld_index(p->step_t, step_v, 0) : p->step;
    int64_t flen = p->len_t ? cuvil_ld_index(p->len_t, len_v, 0) : p->flen;
    if (flen < 0) flen = p->win_len >= 0 ? p->win_len : p->sig_len;
    if (step < 1 || flen < 1 || flen > p->sig_len || (p->win_len >= 0 && p->win_len != flen)) return 1;
    cuvil_stft_params q = {.in_complex = p->in_complex, .batch = p->batch, .sig_len = p->sig_len, .step = step,
                           .frames = 1 + (p->sig_len - flen) / step, .win_len = p->win_len >= 0 ? p->win_len : flen,
                           .n = flen, .bins = p->onesided ? flen / 2 + 1 : flen};
    if (q.frames != p->frames || q.bins != p->bins) return 1;   /* not the output it was compiled for */
    cuvil_f32_stft(&q, x, window, y);
    return 0;
}
