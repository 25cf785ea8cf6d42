/*
 * test_kernel_resize.c -- cuvil_f32_resize and its __scalar reference against a separable
 * double-precision implementation written here after onnx/reference/ops/op_resize.py (one axis
 * at a time, ratio 1 at integral source coordinates, the reference's neighbour windows and
 * edge padding). Where that reference and ONNX Runtime disagree the kernels follow ONNX
 * Runtime and the ONNX spec, and so does this test: pytorch_half_pixel maps to 0 when the
 * output length is 1, align_corners divides by (out - 1) with the integer output length, and
 * exclude_outside only affects cubic.
 *
 * Rounding ties in nearest mode allow 1e-6 of float error (ONNX Runtime 1.32's rule), so that
 * e.g. 1 / (2/7.f) = 3.4999998 rounds as the 3.5 it stands for.
 *
 * Covers nearest with every nearest_mode, linear and cubic (two cubic_coeff_a values, with and
 * without exclude_outside), every coordinate_transformation_mode, up- and down-sampling by
 * integer and fractional factors, scales that do not match out/in, outputs of length 1, axes
 * left alone, and 1- to 4-D tensors.
 */
#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

/* Source coordinate in ONNX Runtime's float arithmetic (upsamplebase.h): the reference's double
 * arithmetic differs only within an ulp of a rounding tie, where ORT is the one to match. */
static double coord(int cm, int64_t o, float scale, int64_t in_len, int64_t out_len) {
    const float y = (float)o, in = (float)in_len, out = (float)out_len;
    switch (cm) {
    case CUVIL_COORD_HALF_PIXEL: return ((y + 0.5f) / scale) - 0.5f;
    case CUVIL_COORD_ASYMMETRIC: return y / scale;
    case CUVIL_COORD_ALIGN_CORNERS: return out == 1 ? 0.0f : y * (in - 1) / (out - 1);
    case CUVIL_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (y + 0.5f) / scale - 0.5f : 0.0f;
    case CUVIL_COORD_TF_HALF_PIXEL_FOR_NN: return (y + 0.5f) / scale;
    case CUVIL_COORD_HALF_PIXEL_SYMMETRIC: {
        const float output_width = scale * in;
        const float adjustment = out / output_width;
        const float center = in / 2;
        const float offset = center * (1 - adjustment);
        return (float)(offset + (y + 0.5) / scale - 0.5);
    }
    default: return NAN;
    }
}

/* coefficients for `ratio` in (0, 1] as the reference writes them */
static int coeffs(const cuvil_resize_params *p, double ratio, int is_int, double *c) {
    if (p->mode == CUVIL_RESIZE_NEAREST) {
        if (is_int) {
            c[0] = 0;
            c[1] = 1;
            return 2;
        }
        switch (p->nearest_mode) {
        /* ties allow 1e-6 of float error in the coordinate, as ONNX Runtime 1.32 does */
        case CUVIL_NEAREST_ROUND_PREFER_FLOOR: c[0] = ratio <= 0.5 + 1e-6; c[1] = !c[0]; break;
        case CUVIL_NEAREST_ROUND_PREFER_CEIL: c[0] = ratio < 0.5 - 1e-6; c[1] = !c[0]; break;
        case CUVIL_NEAREST_FLOOR: c[0] = 1; c[1] = 0; break;
        default: c[0] = 0; c[1] = 1; break;
        }
        return 2;
    }
    if (p->mode == CUVIL_RESIZE_LINEAR) {
        c[0] = 1 - ratio;
        c[1] = ratio;
        return 2;
    }
    const double A = p->cubic_coeff_a, r = ratio;
    c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
    c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    c[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
    c[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
    return 4;
}

/* Resizes `src` (dims sd) along axis `ax` to `out` into dst. */
static void resize_axis(const cuvil_resize_params *p, int ax, const double *src, const int64_t *sd,
                        int64_t out, double *dst) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++) outer *= sd[d];
    for (int d = ax + 1; d < p->ndim; d++) inner *= sd[d];
    const int64_t in = sd[ax];
    /* scale 0 stands for out / in (what the frontend passes when Resize gives sizes) */
    const float scale = p->scales[ax] > 0 ? p->scales[ax] : (float)out / (float)in;
    for (int64_t o = 0; o < out; o++) {
        const double x = coord(p->coord_mode, o, scale, in, p->out_dims[ax]);
        const double fl = floor(x);
        const int is_int = x == fl;
        double c[4];
        const int n = coeffs(p, is_int ? 1.0 : x - fl, is_int, c);
        /* the n indices nearest to x, ties to the smaller: window start */
        const int64_t start = (int64_t)fl - n / 2 + (is_int ? 0 : 1);
        int64_t idx[4];
        double sum = 0;
        for (int t = 0; t < n; t++) {
            idx[t] = start + t;
            if (p->mode == CUVIL_RESIZE_CUBIC && p->exclude_outside && (idx[t] < 0 || idx[t] >= in))
                c[t] = 0;
            sum += c[t];
        }
        if (p->mode == CUVIL_RESIZE_CUBIC && p->exclude_outside && sum != 0)
            for (int t = 0; t < n; t++) c[t] /= sum;
        for (int t = 0; t < n; t++) idx[t] = idx[t] < 0 ? 0 : idx[t] >= in ? in - 1 : idx[t];
        for (int64_t a = 0; a < outer; a++)
            for (int64_t i = 0; i < inner; i++) {
                double v = 0;
                for (int t = 0; t < n; t++)
                    if (c[t] != 0) v += c[t] * src[(a * in + idx[t]) * inner + i];
                dst[(a * out + o) * inner + i] = v;
            }
    }
}

static const char *mode_names[] = {"nearest", "linear", "cubic"};
static const char *coord_names[] = {"half_pixel", "asymmetric", "align_corners",
                                    "pytorch_half_pixel", "tf_half_pixel_for_nn",
                                    "half_pixel_symmetric"};
static const char *nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

static cuvil_pool *pool3;   /* (main makes it) */

static void run_resize(const cuvil_resize_params *p) {
    int64_t nin = 1, nout = 1, maxn = 1;
    for (int d = 0; d < p->ndim; d++) {
        nin *= p->in_dims[d];
        nout *= p->out_dims[d];
    }
    /* size of the largest intermediate */
    int64_t cur[CUVIL_RT_MAX_DIMS];
    for (int d = 0; d < p->ndim; d++) cur[d] = p->in_dims[d];
    maxn = nin;
    for (int d = 0; d < p->ndim; d++) {
        cur[d] = p->out_dims[d];
        int64_t n = 1;
        for (int e = 0; e < p->ndim; e++) n *= cur[e];
        if (n > maxn) maxn = n;
    }
    float *x = ktu_falloc((size_t)nin), *y = ktu_falloc((size_t)nout);
    ktu_fill(x, (size_t)nin, -1, 1);
    double *a = malloc((size_t)maxn * sizeof(double)), *b = malloc((size_t)maxn * sizeof(double));
    for (int64_t i = 0; i < nin; i++) a[i] = x[i];
    for (int d = 0; d < p->ndim; d++) cur[d] = p->in_dims[d];
    for (int d = 0; d < p->ndim; d++) {
        if (p->in_dims[d] == p->out_dims[d] && p->scales[d] == 1.0f) continue;
        resize_axis(p, d, a, cur, p->out_dims[d], b);
        cur[d] = p->out_dims[d];
        double *t = a;
        a = b;
        b = t;
    }
    char label[256];
    int len = snprintf(label, sizeof label, "resize %s %s", mode_names[p->mode],
                       coord_names[p->coord_mode]);
    if (p->mode == CUVIL_RESIZE_NEAREST)
        len += snprintf(label + len, sizeof label - (size_t)len, " %s",
                        nearest_names[p->nearest_mode]);
    if (p->mode == CUVIL_RESIZE_CUBIC)
        len += snprintf(label + len, sizeof label - (size_t)len, " A=%g exclude=%d",
                        p->cubic_coeff_a, p->exclude_outside);
    for (int d = 0; d < p->ndim; d++)
        len += snprintf(label + len, sizeof label - (size_t)len, " %lld->%lld(x%g)",
                        (long long)p->in_dims[d], (long long)p->out_dims[d], (double)p->scales[d]);
    const double tol = p->mode == CUVIL_RESIZE_NEAREST ? 0.0 : 1e-5;
    for (int v = 0; v < 3; v++) {
        for (int64_t i = 0; i < nout; i++) y[i] = NAN;
        if (v == 1) {
            cuvil_f32_resize__scalar(p, x, y);
        } else if (v == 2) {   /* the rows split over a pool of 3 */
            const cuvil_pool *old = cuvil_pool_bind(pool3);
            cuvil_f32_resize(p, x, y);
            cuvil_pool_bind(old);
        } else {
            cuvil_f32_resize(p, x, y);
        }
        ktu_check(y, a, (size_t)nout, tol, tol, "%s [%s]", label, v == 1 ? "__scalar" : v ? "public, 3 threads" : "public");
    }
    free(x);
    free(y);
    free(a);
    free(b);
}

typedef struct shape_case {
    int ndim;
    int64_t in[4], out[4];
    float scales[4]; /* 0: out / in */
} shape_case;

static const shape_case shapes[] = {
    {4, {1, 2, 4, 5}, {1, 2, 8, 10}, {0}},          /* x2 */
    {4, {1, 2, 6, 7}, {1, 2, 3, 3}, {0}},           /* down, fractional */
    {4, {2, 1, 5, 4}, {2, 1, 7, 13}, {0}},          /* odd factors */
    {4, {1, 1, 5, 6}, {1, 1, 1, 1}, {0}},           /* to a single pixel */
    {1, {7}, {3}, {0}},
    {1, {4}, {11}, {0}},
    {3, {2, 5, 6}, {3, 9, 4}, {0}},                 /* every axis, including the first */
    {2, {1, 9}, {1, 20}, {0}},
    {4, {1, 2, 5, 5}, {1, 2, 12, 12}, {1, 1, 2.5f, 2.5f}},   /* scales given: floor(12.5) */
    {4, {1, 1, 5, 10}, {1, 1, 3, 6}, {1, 1, 0.6f, 0.65f}},   /* scales not equal to out/in */
    {2, {5, 6}, {5, 9}, {1.1f, 1.5f}},              /* same size, scale != 1: interpolated */
    {4, {1, 3, 2, 300}, {1, 3, 3, 520}, {0}},       /* wide rows cross a chunk */
    {1, {20}, {6}, {0}},                            /* exact .5 ties that float misses by an ulp */
    {1, {7}, {38}, {0}},
    {4, {1, 8, 40, 40}, {1, 8, 80, 80}, {0}},       /* FPN's x2: rows enough to split over threads */
    {2, {3, 700}, {5, 1400}, {0}},                  /* long rows: many chunks of columns a row */
};

int main(void) {
    pool3 = cuvil_pool_create(3, 0, ktu_aligned_alloc, ktu_aligned_free, NULL);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int zero_scales = 0; zero_scales < 2; zero_scales++) {
            const shape_case *s = &shapes[si];
            if (zero_scales && s->scales[0] != 0) continue; /* only for sizes-derived scales */
            cuvil_resize_params p;
            memset(&p, 0, sizeof p);
            p.ndim = s->ndim;
            for (int d = 0; d < s->ndim; d++) {
                p.in_dims[d] = s->in[d];
                p.out_dims[d] = s->out[d];
                if (s->scales[0] != 0)
                    p.scales[d] = s->scales[d];
                else if (zero_scales)
                    p.scales[d] = s->in[d] == s->out[d] ? 1.0f : 0.0f;
                else
                    p.scales[d] = (float)s->out[d] / (float)s->in[d];
            }
            for (int cm = 0; cm <= CUVIL_COORD_HALF_PIXEL_SYMMETRIC; cm++) {
                p.coord_mode = cm;
                p.mode = CUVIL_RESIZE_NEAREST;
                for (int nm = 0; nm <= CUVIL_NEAREST_CEIL; nm++) {
                    p.nearest_mode = nm;
                    run_resize(&p);
                }
                p.mode = CUVIL_RESIZE_LINEAR;
                run_resize(&p);
                p.mode = CUVIL_RESIZE_CUBIC;
                for (int k = 0; k < 4; k++) {
                    p.cubic_coeff_a = k & 1 ? -0.5f : -0.75f;
                    p.exclude_outside = k >> 1;
                    run_resize(&p);
                }
            }
        }
    cuvil_pool_destroy(pool3);
    return ktu_finish("test_kernel_resize");
}
