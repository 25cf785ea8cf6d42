/* grid_sample.c -- ONNX's GridSample (cuvil_rt.h), as its reference computes it: per output
 * point, the grid's coordinates denormalised per spatial dim, then the nearest pixel or the
 * separable linear (2 taps) or cubic (4 taps) interpolation, every tap read through the padding
 * mode (zeros: 0 outside; border: clamped; reflection: mirrored at the borders). */
#include <math.h>

#include "../rt_int.h"

/* in float32, as ONNX's reference and ONNX Runtime compute it (nearest mode's ties depend on it) */
static float denorm(float v, int64_t len, int align) {
    return align ? (v + 1.0f) / 2.0f * (float)(len - 1) : ((v + 1.0f) * (float)len - 1.0f) / 2.0f;
}

static double reflect(double x, double lo, double hi) {
    const double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        const double dx = lo - x;
        const int64_t n = (int64_t)(dx / rng);
        const double r = dx - (double)n * rng;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        const double dx = x - hi;
        const int64_t n = (int64_t)(dx / rng);
        const double r = dx - (double)n * rng;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

/* The index read for tap i along a dim of length len, or -1 for a zero (zeros padding). */
static int64_t tap(const cuvil_grid_sample_params *p, int64_t i, int64_t len, double lo, double hi) {
    if (p->padding == 0) return i >= 0 && i < len ? i : -1;
    if (p->padding == 1) return i < 0 ? 0 : i > len - 1 ? len - 1 : i;
    const int64_t r = (int64_t)reflect((double)i, lo, hi);
    return r < 0 ? 0 : r > len - 1 ? len - 1 : r;
}

static void cubic_coeffs(double x, double *c) {
    const double a = -0.75;
    x = fabs(x);
    c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
    c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

void cuvil_f32_grid_sample(const cuvil_grid_sample_params *p, const float *x, const float *grid, float *y) {
    const int nd = p->nd;
    int64_t in_sz = 1, out_sz = 1;
    for (int i = 0; i < nd; i++) in_sz *= p->in_dims[i], out_sz *= p->out_dims[i];
    double lo[3], hi[3];
    for (int i = 0; i < nd; i++) {
        lo[i] = p->align_corners ? 0.0 : -0.5;
        hi[i] = p->align_corners ? (double)p->in_dims[i] - 1.0 : (double)p->in_dims[i] - 0.5;
    }
    const int taps = p->mode == 0 ? 1 : p->mode == 1 ? 2 : 4;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t o = 0; o < out_sz; o++) {
            const float *g = grid + (n * out_sz + o) * nd;
            int64_t idx[3][4];   /* per dim, the taps' indices (-1: zero) */
            double w[3][4];      /* and weights */
            for (int i = 0; i < nd; i++) {
                double v = denorm(g[nd - 1 - i], p->in_dims[i], p->align_corners);
                if (p->mode == 0) v = nearbyintf((float)v);
                if (v < lo[i] || v > hi[i]) {
                    /* border: the coordinate clamped, but for cubic only its taps (PyTorch's and ONNX
                     * Runtime's rule; ONNX's reference clamps it, and no case of ONNX's suites tests it) */
                    if (p->padding == 1 && p->mode == 2) { /* taps clamped below */ }
                    else if (p->padding == 1) v = v < 0 ? 0 : v > (double)(p->in_dims[i] - 1) ? (double)(p->in_dims[i] - 1) : v;
                    else if (p->padding == 2) v = (float)reflect(v, lo[i], hi[i]);   /* stored as float32, as the reference */
                }
                /* far outside (or NaN): every tap is out of range or clamped alike; keep the integer
                 * conversions below defined */
                const double far = (double)p->in_dims[i] + 8.0;
                if (!(v >= -far)) v = -far;
                if (v > far) v = far;
                if (p->mode == 0) {
                    idx[i][0] = tap(p, (int64_t)v, p->in_dims[i], lo[i], hi[i]);
                    w[i][0] = 1.0;
                    continue;
                }
                const double f = floor(v), fr = v - f;
                const int64_t i0 = (int64_t)f;
                if (p->mode == 1) {
                    w[i][0] = 1.0 - fr, w[i][1] = fr;
                    for (int t = 0; t < 2; t++) idx[i][t] = tap(p, i0 + t, p->in_dims[i], lo[i], hi[i]);
                } else {
                    cubic_coeffs(fr, w[i]);
                    for (int t = 0; t < 4; t++) idx[i][t] = tap(p, i0 - 1 + t, p->in_dims[i], lo[i], hi[i]);
                }
            }
            int64_t ntap = 1;
            for (int i = 0; i < nd; i++) ntap *= taps;
            for (int64_t c = 0; c < p->C; c++) {
                const float *xc = x + (n * p->C + c) * in_sz;
                double acc = 0;
                for (int64_t k = 0; k < ntap; k++) {
                    int64_t off = 0, r = k;
                    double wt = 1.0;
                    int zero = 0;
                    for (int i = nd - 1; i >= 0; i--) {
                        const int t = (int)(r % taps);
                        r /= taps;
                        wt *= w[i][t];
                        zero |= idx[i][t] < 0;
                    }
                    if (zero) continue;
                    r = k;
                    int64_t stride = 1;
                    int64_t tt[3];
                    for (int i = nd - 1; i >= 0; i--) tt[i] = r % taps, r /= taps;
                    for (int i = nd - 1; i >= 0; i--) {
                        off += idx[i][tt[i]] * stride;
                        stride *= p->in_dims[i];
                    }
                    acc += wt * (double)xc[off];
                }
                y[(n * p->C + c) * out_sz + o] = (float)acc;
            }
        }
}
