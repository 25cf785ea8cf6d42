/*
 * resize.c -- ONNX Resize (opset 11-19 semantics): nearest, n-linear, cubic.
 *
 * Along each axis an output index o maps to a source coordinate x by the
 * coordinate_transformation_mode (in float, the way ONNX Runtime evaluates it; the ONNX
 * reference uses double, which only differs where a coordinate lands within an ulp of a
 * rounding tie):
 *   half_pixel            (o + 0.5) / scale - 0.5
 *   asymmetric            o / scale
 *   align_corners         out == 1 ? 0 : o * (in - 1) / (out - 1)
 *   pytorch_half_pixel    out > 1 ? (o + 0.5) / scale - 0.5 : 0
 *   tf_half_pixel_for_nn  (o + 0.5) / scale
 *   half_pixel_symmetric  in/2 * (1 - out / (scale*in)) + (o + 0.5) / scale - 0.5
 *   tf_crop_and_resize    lo * (in - 1) + (out == 1 ? (hi - lo) * (in - 1) / 2
 *                                                    : o * (hi - lo) * (in - 1) / (out - 1)),
 *                         in double as ONNX's reference; an output with a coordinate outside
 *                         [0, in - 1] along any axis is extrapolation_value (the scalar path)
 * and becomes taps (input index, weight):
 *   nearest  one tap: x if integral, else floor/ceil by nearest_mode (round_prefer_floor
 *            takes floor at .5, round_prefer_ceil takes ceil; "at .5" allows 1e-6 of float
 *            error, as ONNX Runtime does);
 *   linear   floor(x) with 1 - r and floor(x) + 1 with r, r = x - floor(x);
 *   cubic    floor(x) - 1 .. floor(x) + 2 with Keys' coefficients for cubic_coeff_a; with
 *            exclude_outside the taps outside the input get weight 0 and the rest are
 *            renormalised.
 * Where the ONNX reference and ONNX Runtime disagree this follows ONNX Runtime and the spec:
 * pytorch_half_pixel gives 0 (not -0.5) for a length-1 output, align_corners uses the integer
 * output length, exclude_outside only changes cubic. Antialiasing is not supported (not in
 * the params).
 * Tap indices are then clamped into [0, in) (the reference's edge padding). An axis whose size
 * and scale are both unchanged is not interpolated. The value is the sum over all tap
 * combinations of the product of the axes' weights (separable, evaluated directly).
 *
 * The optimised version splits the output rows (all axes but the last) over the threads; each
 * walks its rows once per chunk of output columns, whose last-axis taps it makes first (on the
 * stack: kernels have no scratch here), and combines the outer axes' taps, each recomputed
 * only when its index moves, into (source row, weight) pairs. Pure nearest resizes become
 * gathers.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"

#define MAX_TAPS 4
#define CHUNK 32
#define MAX_COMBOS 64
/* A fractional part within this of .5 is a rounding tie (round_prefer_floor/ceil), as in ONNX
 * Runtime 1.32: a float coordinate such as 1 / (2/7.f) = 3.4999998 is meant to be 3.5. */
#define TIE_EPS 1e-6f

static int is_identity(const cuvil_resize_params *p, int d) {
    return p->in_dims[d] == p->out_dims[d] && p->scales[d] == 1.0f &&
           (p->coord_mode != CUVIL_COORD_TF_CROP_AND_RESIZE || (p->roi_lo[d] == 0.0f && p->roi_hi[d] == 1.0f));
}

static float axis_scale(const cuvil_resize_params *p, int d) {
    const float s = p->scales[d];
    if (s > 0.0f) return s;
    return p->in_dims[d] > 0 ? (float)p->out_dims[d] / (float)p->in_dims[d] : 1.0f;
}

/* tf_crop_and_resize's source coordinate, in double (as ONNX's reference). */
static double tf_crop_coord(const cuvil_resize_params *p, int d, int64_t o) {
    const double lo = p->roi_lo[d], hi = p->roi_hi[d], span = (double)p->in_dims[d] - 1.0;
    const double v = p->out_dims[d] == 1 ? (hi - lo) * span / 2.0 : (double)o * (hi - lo) * span / ((double)p->out_dims[d] - 1.0);
    return v + lo * span;
}

/* Source coordinate of output index o along axis d, in ONNX Runtime's arithmetic (float, with
 * half_pixel_symmetric's mixed float/double), so that ties in nearest rounding land the same
 * way even when the scale is not exact in float (e.g. 3/7). */
static float src_coord(const cuvil_resize_params *p, int d, int64_t o) {
    const float s = axis_scale(p, d);
    const float in = (float)p->in_dims[d], out = (float)p->out_dims[d];
    const float xr = (float)o;
    switch (p->coord_mode) {
    case CUVIL_COORD_ASYMMETRIC: return xr / s;
    case CUVIL_COORD_ALIGN_CORNERS: return out == 1.0f ? 0.0f : xr * (in - 1.0f) / (out - 1.0f);
    case CUVIL_COORD_PYTORCH_HALF_PIXEL: return out > 1.0f ? (xr + 0.5f) / s - 0.5f : 0.0f;
    case CUVIL_COORD_TF_HALF_PIXEL_FOR_NN: return (xr + 0.5f) / s;
    case CUVIL_COORD_TF_CROP_AND_RESIZE: return (float)tf_crop_coord(p, d, o);
    case CUVIL_COORD_HALF_PIXEL_SYMMETRIC: {
        const float output_width = s * in;
        const float adjustment = out / output_width;
        const float center = in / 2.0f;
        const float offset = center * (1.0f - adjustment);
        return (float)((double)offset + ((double)xr + 0.5) / (double)s - 0.5);
    }
    case CUVIL_COORD_HALF_PIXEL:
    default: return ((xr + 0.5f) / s) - 0.5f;
    }
}

static inline int64_t clampi(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* Number of taps per output index along axis d (fixed per axis). */
static int axis_ntaps(const cuvil_resize_params *p, int d) {
    if (is_identity(p, d) || p->mode == CUVIL_RESIZE_NEAREST) return 1;
    return p->mode == CUVIL_RESIZE_LINEAR ? 2 : 4;
}

/* Taps of output index o along axis d: exactly axis_ntaps(p, d) of them. */
static void axis_taps(const cuvil_resize_params *p, int d, int64_t o, int64_t *idx, float *w) {
    const int64_t in = p->in_dims[d];
    if (is_identity(p, d)) {
        idx[0] = o;
        w[0] = 1.0f;
        return;
    }
    const float x = src_coord(p, d, o);
    const float fl = floorf(x);
    const float r = x - fl; /* exact */
    const int64_t x0 = (int64_t)fl;
    if (p->mode == CUVIL_RESIZE_NEAREST) {
        int64_t i = x0;
        if (r != 0.0f) {
            switch (p->nearest_mode) {
            case CUVIL_NEAREST_ROUND_PREFER_CEIL: i = r < 0.5f - TIE_EPS ? x0 : x0 + 1; break;
            case CUVIL_NEAREST_FLOOR: i = x0; break;
            case CUVIL_NEAREST_CEIL: i = x0 + 1; break;
            case CUVIL_NEAREST_ROUND_PREFER_FLOOR:
            default: i = r <= 0.5f + TIE_EPS ? x0 : x0 + 1; break;
            }
        }
        idx[0] = clampi(i, in);
        w[0] = 1.0f;
        return;
    }
    if (p->mode == CUVIL_RESIZE_LINEAR) {
        idx[0] = clampi(x0, in);
        idx[1] = clampi(x0 + 1, in);
        w[0] = 1.0f - r;
        w[1] = r;
        return;
    }
    /* cubic */
    const double A = (double)p->cubic_coeff_a;
    const double r1 = (double)r + 1.0, s = 1.0 - (double)r, s1 = s + 1.0;
    double c[4];
    c[0] = ((A * r1 - 5.0 * A) * r1 + 8.0 * A) * r1 - 4.0 * A;
    c[1] = ((A + 2.0) * r - (A + 3.0)) * r * r + 1.0;
    c[2] = ((A + 2.0) * s - (A + 3.0)) * s * s + 1.0;
    c[3] = ((A * s1 - 5.0 * A) * s1 + 8.0 * A) * s1 - 4.0 * A;
    if (p->exclude_outside) {
        double sum = 0.0;
        for (int t = 0; t < 4; t++) {
            const int64_t i = x0 - 1 + t;
            if (i < 0 || i >= in) c[t] = 0.0;
            sum += c[t];
        }
        if (sum != 0.0)
            for (int t = 0; t < 4; t++) c[t] /= sum;
    }
    for (int t = 0; t < 4; t++) {
        idx[t] = clampi(x0 - 1 + t, in);
        w[t] = (float)c[t];
    }
}

void cuvil_f32_resize__scalar(const cuvil_resize_params *p, const float *x, float *y) {
    const int nd = p->ndim;
    int64_t xs[CUVIL_RT_MAX_DIMS], oidx[CUVIL_RT_MAX_DIMS] = {0};
    int64_t st = 1, total = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xs[d] = st;
        st *= p->in_dims[d];
    }
    for (int d = 0; d < nd; d++) total *= p->out_dims[d];
    int nt[CUVIL_RT_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) nt[d] = axis_ntaps(p, d);
    for (int64_t t = 0; t < total; t++) {
        int64_t ti[CUVIL_RT_MAX_DIMS][MAX_TAPS];
        float tw[CUVIL_RT_MAX_DIMS][MAX_TAPS];
        for (int d = 0; d < nd; d++) axis_taps(p, d, oidx[d], ti[d], tw[d]);
        int k[CUVIL_RT_MAX_DIMS] = {0}, outside = 0;
        for (int d = 0; d < nd && p->coord_mode == CUVIL_COORD_TF_CROP_AND_RESIZE; d++)
            if (!is_identity(p, d)) {
                const double c = tf_crop_coord(p, d, oidx[d]);
                outside |= c < 0.0 || c > (double)(p->in_dims[d] - 1);
            }
        double acc = 0.0;
        for (;;) {
            double wgt = 1.0;
            int64_t off = 0;
            for (int d = 0; d < nd; d++) {
                wgt *= tw[d][k[d]];
                off += ti[d][k[d]] * xs[d];
            }
            acc += wgt * x[off];
            int d = nd - 1;
            for (; d >= 0; d--) {
                if (++k[d] < nt[d]) break;
                k[d] = 0;
            }
            if (d < 0) break;
        }
        y[t] = outside ? p->extrapolation_value : (float)acc;
        for (int d = nd - 1; d >= 0; d--) {
            if (++oidx[d] < p->out_dims[d]) break;
            oidx[d] = 0;
        }
    }
}

/* One output row's columns [j0, j0 + nj): the sum over the nc combinations (source row offset
 * coff, weight cw) of the outer axes' taps of the last axis' taps (ii, ww: T a column). */
static inline void resize_cols(const float *x, float *yr, int64_t nj, int T, const int64_t *ii, const float *ww, int nc,
                               const int64_t *coff, const float *cw) {
    if (T == 1 && nc == 1 && cw[0] == 1.0f) {
        const float *xr = x + coff[0];
        for (int64_t j = 0; j < nj; j++) yr[j] = xr[ii[j]];
        return;
    }
    float acc[CHUNK];
    for (int64_t j = 0; j < nj; j++) acc[j] = 0.0f;
    for (int c = 0; c < nc; c++) {
        const float *xr = x + coff[c];
        const float wc = cw[c];
        if (T == 1) {
            for (int64_t j = 0; j < nj; j++) acc[j] += wc * xr[ii[j]];
        } else if (T == 2) {
            for (int64_t j = 0; j < nj; j++) acc[j] += wc * (ww[2 * j] * xr[ii[2 * j]] + ww[2 * j + 1] * xr[ii[2 * j + 1]]);
        } else {
            for (int64_t j = 0; j < nj; j++) {
                const int64_t *ij = ii + 4 * j;
                const float *wj = ww + 4 * j;
                acc[j] += wc * (wj[0] * xr[ij[0]] + wj[1] * xr[ij[1]] + wj[2] * xr[ij[2]] + wj[3] * xr[ij[3]]);
            }
        }
    }
    memcpy(yr, acc, (size_t)nj * sizeof(float));
}

/* A source row's columns [j0, j0 + nj) interpolated along the last axis (two taps a column). */
static inline void lerp_cols(const float *xr, float *h, int64_t nj, const int64_t *ii, const float *ww) {
    for (int64_t j = 0; j < nj; j++) h[j] = ww[2 * j] * xr[ii[2 * j]] + ww[2 * j + 1] * xr[ii[2 * j + 1]];
}

/* Combines the outer axes' taps (axis d < last: ti[d], tw[d], nt[d] of them) into (source row
 * offset, weight) pairs; returns their number. */
static int resize_combos(int last, const int *nt, const int64_t *xs, int64_t (*ti)[MAX_TAPS], float (*tw)[MAX_TAPS],
                         int64_t *coff, float *cw) {
    int nc = 1;
    coff[0] = 0;
    cw[0] = 1.0f;
    for (int d = 0; d < last; d++) {
        const int n = nt[d];
        for (int c = nc - 1; c >= 0; c--)
            for (int t = n - 1; t >= 0; t--) {
                coff[c * n + t] = coff[c] + ti[d][t] * xs[d];
                cw[c * n + t] = cw[c] * tw[d][t];
            }
        nc *= n;
    }
    return nc;
}

typedef struct resize_job {
    const cuvil_resize_params *p;
    const float *x;
    float *y;
    int last, T;
    const int *nt;
    const int64_t *xs;
} resize_job;

/* The outer axes' indices of output row r (all axes but the last) and their taps. */
static void row_start(const cuvil_resize_params *p, int last, int64_t r, int64_t *oidx, int64_t (*ti)[MAX_TAPS],
                      float (*tw)[MAX_TAPS]) {
    for (int d = last - 1; d >= 0; d--) {
        oidx[d] = r % p->out_dims[d];
        r /= p->out_dims[d];
    }
    for (int d = 0; d < last; d++) axis_taps(p, d, oidx[d], ti[d], tw[d]);
}

/* The next output row: the outer indices moved on like an odometer, the taps of those that
 * moved recomputed. */
static void row_next(const cuvil_resize_params *p, int last, int64_t *oidx, int64_t (*ti)[MAX_TAPS],
                     float (*tw)[MAX_TAPS]) {
    for (int d = last - 1; d >= 0; d--) {
        const int wrapped = ++oidx[d] == p->out_dims[d];
        if (wrapped) oidx[d] = 0;
        axis_taps(p, d, oidx[d], ti[d], tw[d]);
        if (!wrapped) break;
    }
}

/* Pure nearest (one tap of weight 1 along every axis) with rows of up to NEAREST_ROW values:
 * the row's source indices once, then each output row a gather of its source row, or a copy of
 * the row before where both read the same source row (an upsampling's repeated rows). */
#define NEAREST_ROW 256
static void nearest_rows(void *vctx, int64_t r0, int64_t r1, int tid) {
    const resize_job *j = vctx;
    const cuvil_resize_params *p = j->p;
    (void)tid;
    const int last = j->last;
    const int64_t OL = p->out_dims[last];
    int64_t ii[NEAREST_ROW], oidx[CUVIL_RT_MAX_DIMS] = {0}, ti[CUVIL_RT_MAX_DIMS][MAX_TAPS], prev = -1;
    float w, tw[CUVIL_RT_MAX_DIMS][MAX_TAPS];
    for (int64_t c = 0; c < OL; c++) axis_taps(p, last, c, ii + c, &w);
    row_start(p, last, r0, oidx, ti, tw);
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = 0;
        for (int d = 0; d < last; d++) off += ti[d][0] * j->xs[d];
        float *yr = j->y + r * OL;
        if (off == prev) {
            memcpy(yr, yr - OL, (size_t)OL * sizeof(float));
        } else {
            const float *xr = j->x + off;
            for (int64_t c = 0; c < OL; c++) yr[c] = xr[ii[c]];
            prev = off;
        }
        if (r + 1 < r1) row_next(p, last, oidx, ti, tw);
    }
}

/* Output rows [r0, r1) (all axes but the last), on one thread, in blocks of about BLOCK_FLOATS
 * output values (at least BLOCK_MIN_ROWS rows): in each block the last axis' taps a chunk of
 * columns at a time, each chunk down the block's rows; an outer axis' taps recomputed only
 * when its index moves. Bilinear rows (two taps on the last axis, two source rows) interpolate
 * each source row's columns once and keep the last two for the next output rows, which in an
 * upsampling read the same source rows; the same operations in the same order as the four-tap
 * sum, (w0 a + w1 b) and (w0 c + w1 d), then c0 h0 + c1 h1. bench/op_sweep.py's Resize linear
 * 2x (64 x 112 x 112 -> 224 x 224), one thread, AMD EPYC, alternating cuvil-run turns: 12.4 ms
 * (a four-tap sum per value, every row of the map per chunk) -> 5.1-5.3 on x86_64-avx512, 17-21
 * -> 5.9-7.5 on x86_64-avx2; the same code without the blocks measured 4.5-4.8 or 7.5-8.4 on
 * x86_64-avx512 by how GCC laid out the loops. */
#define BLOCK_FLOATS 16384
#define BLOCK_MIN_ROWS 16
static void resize_rows(void *vctx, int64_t r0, int64_t r1, int tid) {
    const resize_job *j = vctx;
    const cuvil_resize_params *p = j->p;
    const int last = j->last, T = j->T;
    const int64_t OL = p->out_dims[last];
    (void)tid;
    int64_t ii[CHUNK * MAX_TAPS], coff[MAX_COMBOS];
    float ww[CHUNK * MAX_TAPS], cw[MAX_COMBOS];
    int64_t ti[CUVIL_RT_MAX_DIMS][MAX_TAPS];
    float tw[CUVIL_RT_MAX_DIMS][MAX_TAPS], hrow[2][CHUNK];
    const int64_t rb = cuvil_max_i64(BLOCK_MIN_ROWS, BLOCK_FLOATS / cuvil_max_i64(OL, 1));
    for (int64_t b0 = r0; b0 < r1; b0 += rb) {
        const int64_t b1 = cuvil_min_i64(r1, b0 + rb);
        for (int64_t j0 = 0; j0 < OL; j0 += CHUNK) {
            const int64_t nj = cuvil_min_i64(CHUNK, OL - j0);
            for (int64_t c = 0; c < nj; c++) axis_taps(p, last, j0 + c, ii + c * T, ww + c * T);
            int64_t oidx[CUVIL_RT_MAX_DIMS] = {0}, hkey[2] = {-1, -1};   /* the source rows hrow holds */
            row_start(p, last, b0, oidx, ti, tw);
            for (int64_t r = b0; r < b1; r++) {
                const int nc = resize_combos(last, j->nt, j->xs, ti, tw, coff, cw);
                float *yr = j->y + r * OL + j0;
                if (T == 2 && nc == 2) {
                    const float *h[2];
                    for (int c = 0; c < 2; c++) {
                        int s = hkey[0] == coff[c] ? 0 : hkey[1] == coff[c] ? 1 : -1;
                        if (s < 0) {   /* (into the slot the other source row does not hold) */
                            s = hkey[0] == coff[1 - c] ? 1 : 0;
                            lerp_cols(j->x + coff[c], hrow[s], nj, ii, ww);
                            hkey[s] = coff[c];
                        }
                        h[c] = hrow[s];
                    }
                    const float c0 = cw[0], c1 = cw[1];
                    for (int64_t q = 0; q < nj; q++) yr[q] = c0 * h[0][q] + c1 * h[1][q];
                } else {
                    resize_cols(j->x, yr, nj, T, ii, ww, nc, coff, cw);
                }
                if (r + 1 < b1) row_next(p, last, oidx, ti, tw);
            }
        }
    }
}

void cuvil_f32_resize(const cuvil_resize_params *p, const float *x, float *y) {
    const int nd = p->ndim;
    int64_t total = 1;
    for (int d = 0; d < nd; d++) total *= p->out_dims[d];
    if (total <= 0) return;
    if (nd == 0) {
        y[0] = x[0];
        return;
    }
    int nt[CUVIL_RT_MAX_DIMS] = {0};
    int64_t combos = 1;
    for (int d = 0; d < nd; d++) {
        nt[d] = axis_ntaps(p, d);
        if (d < nd - 1) combos *= nt[d];
    }
    if (combos > MAX_COMBOS || p->coord_mode == CUVIL_COORD_TF_CROP_AND_RESIZE) {
        cuvil_f32_resize__scalar(p, x, y);
        return;
    }
    int64_t xs[CUVIL_RT_MAX_DIMS];
    int64_t st = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xs[d] = st;
        st *= p->in_dims[d];
    }
    const int last = nd - 1;
    const int64_t OL = p->out_dims[last];
    int64_t rows = 1;
    for (int d = 0; d < last; d++) rows *= p->out_dims[d];
    int nearest = 1;   /* one tap of weight 1 along every axis */
    for (int d = 0; d < nd; d++) nearest &= nt[d] == 1;
    resize_job j = {p, x, y, last, nt[last], nt, xs};
    cuvil_parallel_range(rows, cuvil_max_i64(1, 16384 / cuvil_max_i64(OL, 1)), 1,
                         nearest && OL <= NEAREST_ROW ? nearest_rows : resize_rows, &j);
}

int cuvil_resize_rt(cuvil_resize_params *p, int nax, const int *axes, const float *scales, const int64_t *sizes,
                    const int64_t *hi, int keep_aspect, const float *roi) {
    double kscale = 0.0;   /* keep_aspect_ratio_policy 1 (not_larger) / 2 (not_smaller): one scale */
    for (int i = 0; keep_aspect && sizes && i < nax; i++) {
        if (p->in_dims[axes[i]] == 0) return 1;
        const double f = (double)sizes[i] / (double)p->in_dims[axes[i]];
        if (i == 0 || (keep_aspect == 1 ? f < kscale : f > kscale)) kscale = f;
    }
    for (int i = 0; roi && i < nax; i++) {   /* finite and moderate: a coordinate always converts */
        if (!(fabsf(roi[i]) <= 1e6f) || !(fabsf(roi[nax + i]) <= 1e6f)) return 1;
        p->roi_lo[axes[i]] = roi[i];
        p->roi_hi[axes[i]] = roi[nax + i];
    }
    for (int i = 0; i < nax; i++) {
        int d = axes[i];
        int64_t in = p->in_dims[d], out;
        if (scales) {   /* as ONNX Runtime computes it: the float scale times the dim, truncated */
            float sc = scales[i], prod = sc * (float)in;
            if (!(sc > 0) || isinf(sc) || !(prod < 9.0e15f)) return 1;
            out = (int64_t)prod;
            p->scales[d] = sc;
        } else if (keep_aspect) {   /* rounded half up, as ONNX's reference */
            const double o = kscale * (double)in + 0.5;
            if (!(o < 9.0e15)) return 1;
            out = (int64_t)o;
            p->scales[d] = (float)kscale;
        } else {   /* 0: the kernel derives out / in (exact nearest-neighbour ties) */
            out = sizes[i];
            if (in == 0) return 1;
            p->scales[d] = out == in ? 1.0f : 0.0f;
        }
        if (out <= 0 || out > hi[i]) return 1;
        p->out_dims[d] = out;
    }
    return 0;
}
