/*
 * softmax.c -- Softmax / LogSoftmax along the middle axis of x viewed as [outer, len, inner].
 *
 * Numerically stable: y = exp(x - max) / sum exp(x - max), log form x - max - log(sum).
 * inner == 1 (the usual last-axis case) works row by row with 8 partial maxima/sums so the
 * compiler can vectorise the reductions; inner > 1 vectorises across `inner` instead, in chunks
 * whose running max/sum live on the stack (kernels have no scratch here). Both read every x
 * before writing the y at the same place, so y == x works (the header does not promise it).
 * Hardmax (1 at the first largest element along the axis, 0 elsewhere) shares the layout.
 * nan_to_zero: every NaN result becomes 0, as the guard Where(IsNaN(y), 0, y) that the exporters
 * put after an attention softmax (a row masked out entirely is all -inf, and its softmax NaN).
 */
#include <math.h>

#include "../rt_int.h"

#define CHUNK 256

static void zero_nans(float *y, int64_t n, int64_t step) {
    for (int64_t i = 0; i < n; i++) y[i * step] = y[i * step] != y[i * step] ? 0.0f : y[i * step];
}

static float row_max(const float *x, int64_t n) {
    float m8[8];
    int64_t i = 0;
    if (n >= 8) {
        for (int k = 0; k < 8; k++) m8[k] = x[k];
        for (i = 8; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) m8[k] = x[i + k] > m8[k] ? x[i + k] : m8[k];
    } else {
        for (int k = 0; k < 8; k++) m8[k] = x[0];
    }
    float m = m8[0];
    for (int k = 1; k < 8; k++) m = m8[k] > m ? m8[k] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static void softmax_rows(const cuvil_softmax_params *p, const float *x, float *y) {
    const int64_t L = p->axis_len;
    for (int64_t o = 0; o < p->outer; o++) {
        const float *xr = x + o * L;
        float *yr = y + o * L;
        const float m = row_max(xr, L);
        if (p->log) {
            /* (x - m) first: exact, so large inputs keep their precision */
            const float ls = logf(cuvil_f32_sum_exp_shifted(xr, NULL, L, m));
            for (int64_t i = 0; i < L; i++) yr[i] = (xr[i] - m) - ls;
        } else {
            const float inv = 1.0f / cuvil_f32_sum_exp_shifted(xr, yr, L, m);
            for (int64_t i = 0; i < L; i++) yr[i] *= inv;
        }
        if (p->nan_to_zero) zero_nans(yr, L, 1);
    }
}

static void softmax_strided(const cuvil_softmax_params *p, const float *x, float *y) {
    const int64_t L = p->axis_len, I = p->inner;
    float m[CHUNK], s[CHUNK], t[CHUNK];
    for (int64_t o = 0; o < p->outer; o++) {
        const float *xo = x + o * L * I;
        float *yo = y + o * L * I;
        for (int64_t i0 = 0; i0 < I; i0 += CHUNK) {
            const int64_t n = cuvil_min_i64(CHUNK, I - i0);
            for (int64_t i = 0; i < n; i++) {
                m[i] = xo[i0 + i];
                s[i] = 0.0f;
            }
            for (int64_t a = 1; a < L; a++) {
                const float *xa = xo + a * I + i0;
                for (int64_t i = 0; i < n; i++) m[i] = xa[i] > m[i] ? xa[i] : m[i];
            }
            for (int64_t a = 0; a < L; a++) {
                const float *xa = xo + a * I + i0;
                /* the log form needs x again afterwards, so it sums through t */
                float *ea = p->log ? t : yo + a * I + i0;
                for (int64_t i = 0; i < n; i++) ea[i] = xa[i] - m[i];
                cuvil_f32_vexp(ea, ea, (size_t)n);
                for (int64_t i = 0; i < n; i++) s[i] += ea[i];
            }
            if (p->log) {
                for (int64_t i = 0; i < n; i++) s[i] = logf(s[i]);
                for (int64_t a = 0; a < L; a++) {
                    const float *xa = xo + a * I + i0;
                    float *ya = yo + a * I + i0;
                    for (int64_t i = 0; i < n; i++) ya[i] = (xa[i] - m[i]) - s[i];
                }
            } else {
                for (int64_t i = 0; i < n; i++) s[i] = 1.0f / s[i];
                for (int64_t a = 0; a < L; a++) {
                    float *ya = yo + a * I + i0;
                    for (int64_t i = 0; i < n; i++) ya[i] *= s[i];
                }
            }
            if (p->nan_to_zero)
                for (int64_t a = 0; a < L; a++) zero_nans(yo + a * I + i0, n, 1);
        }
    }
}

void cuvil_f32_softmax(const cuvil_softmax_params *p, const float *x, float *y) {
    if (p->outer <= 0 || p->axis_len <= 0 || p->inner <= 0) return;
    if (p->inner == 1)
        softmax_rows(p, x, y);
    else
        softmax_strided(p, x, y);
}

void cuvil_f32_softmax__scalar(const cuvil_softmax_params *p, const float *x, float *y) {
    const int64_t L = p->axis_len, I = p->inner;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < I; i++) {
            const float *xr = x + o * L * I + i;
            float *yr = y + o * L * I + i;
            float m = -INFINITY;
            for (int64_t a = 0; a < L; a++) m = xr[a * I] > m ? xr[a * I] : m;
            float s = 0.0f;
            for (int64_t a = 0; a < L; a++) s += expf(xr[a * I] - m);
            for (int64_t a = 0; a < L; a++)
                yr[a * I] = p->log ? (xr[a * I] - m) - logf(s) : expf(xr[a * I] - m) / s;
            if (p->nan_to_zero) zero_nans(yr, L, I);
        }
}

void cuvil_f32_hardmax(const cuvil_softmax_params *p, const float *x, float *y) {
    const int64_t L = p->axis_len, I = p->inner;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < I; i++) {
            const float *xr = x + o * L * I + i;
            float *yr = y + o * L * I + i;
            int64_t best = 0;   /* the first largest; NaN never wins a comparison */
            for (int64_t k = 1; k < L; k++)
                if (xr[k * I] > xr[best * I]) best = k;
            for (int64_t k = 0; k < L; k++) yr[k * I] = k == best ? 1.0f : 0.0f;
        }
}
