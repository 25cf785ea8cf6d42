/*
 * test_kernel_pool.c -- cuvil_f32_pool2d and its __scalar reference against a naive loop
 * written here from the header's contract (ONNX Runtime semantics): max / average / L2 pooling
 * with strides, dilations, asymmetric pads, ceil_mode output sizes, count_include_pad (whose
 * divisor counts taps inside the padded extent only), global pooling and 1-D pooling; every
 * case also with the input channels last (CUVIL_POOL_X_NHWC).
 */
#include <float.h>

#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

typedef struct pool_case {
    int64_t N, C, H, W, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw;
    int ceil_mode;
} pool_case;

/* ONNX/ONNX Runtime output size, with the rule that the last window must start inside the
 * input or the left padding. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d,
                        int ceil_mode) {
    const int64_t span = in + p0 + p1 - (d * (k - 1) + 1);
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p0) o--;
    return o;
}

static void naive_pool(const cuvil_pool2d_params *p, const float *x, double *ref) {
    for (int64_t nc = 0; nc < p->N * p->C; nc++)
        for (int64_t oh = 0; oh < p->OH; oh++)
            for (int64_t ow = 0; ow < p->OW; ow++) {
                double acc = p->kind == CUVIL_POOL_MAX ? -FLT_MAX : 0.0;
                int64_t inside = 0, padded = 0;
                for (int64_t kh = 0; kh < p->KH; kh++)
                    for (int64_t kw = 0; kw < p->KW; kw++) {
                        const int64_t ih = oh * p->stride_h - p->pad_t + kh * p->dil_h;
                        const int64_t iw = ow * p->stride_w - p->pad_l + kw * p->dil_w;
                        if (ih >= -p->pad_t && ih < p->H + p->pad_b && iw >= -p->pad_l &&
                            iw < p->W + p->pad_r)
                            padded++;
                        if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
                        const double v = x[(nc * p->H + ih) * p->W + iw];
                        inside++;
                        if (p->kind == CUVIL_POOL_MAX)
                            acc = v > acc ? v : acc;
                        else if (p->kind == CUVIL_POOL_AVG)
                            acc += v;
                        else
                            acc += v * v;
                    }
                if (p->kind == CUVIL_POOL_AVG) {
                    const int64_t div = p->count_include_pad ? padded : inside;
                    acc = div ? acc / (double)div : 0.0;
                } else if (p->kind == CUVIL_POOL_LP2) {
                    acc = sqrt(acc);
                }
                ref[(nc * p->OH + oh) * p->OW + ow] = acc;
            }
}

static cuvil_pool *pool3;   /* (main makes it) */

static void run_pool(const pool_case *c, int kind, int cip) {
    cuvil_pool2d_params p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.N = c->N;
    p.C = c->C;
    p.H = c->H;
    p.W = c->W;
    p.KH = c->KH;
    p.KW = c->KW;
    p.stride_h = c->sh;
    p.stride_w = c->sw;
    p.pad_t = c->pt;
    p.pad_l = c->pl;
    p.pad_b = c->pb;
    p.pad_r = c->pr;
    p.dil_h = c->dh;
    p.dil_w = c->dw;
    p.count_include_pad = cip;
    p.OH = out_size(c->H, c->KH, c->sh, c->pt, c->pb, c->dh, c->ceil_mode);
    p.OW = out_size(c->W, c->KW, c->sw, c->pl, c->pr, c->dw, c->ceil_mode);
    char label[256];
    snprintf(
        label, sizeof label,
        "pool kind=%d %lldx%lld k=%lldx%lld s=%lld,%lld pads=%lld,%lld,%lld,%lld dil=%lld,%lld "
        "ceil=%d cip=%d -> %lldx%lld",
        kind, (long long)c->H, (long long)c->W, (long long)c->KH, (long long)c->KW,
        (long long)c->sh, (long long)c->sw, (long long)c->pt, (long long)c->pl, (long long)c->pb,
        (long long)c->pr, (long long)c->dh, (long long)c->dw, c->ceil_mode, cip, (long long)p.OH,
        (long long)p.OW);
    const size_t nx = (size_t)(p.N * p.C * p.H * p.W), ny = (size_t)(p.N * p.C * p.OH * p.OW);
    float *x = ktu_falloc(nx), *y = ktu_falloc(ny);
    ktu_fill(x, nx, -2, 2);
    double *ref = malloc(ny * sizeof(double));
    naive_pool(&p, x, ref);
    /* also the same x channels last (the lowering gives that to global pools; y stays
     * [N, C, OH, OW]) */
    float *xt = ktu_falloc(nx);
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t c = 0; c < p.C; c++)
            for (int64_t q = 0; q < p.H * p.W; q++)
                xt[(n * p.H * p.W + q) * p.C + c] = x[(n * p.C + c) * p.H * p.W + q];
    for (int last = 0; last < 2; last++) {
        const char *how = last ? ", x channels last" : "";
        p.layout = last ? CUVIL_POOL_X_NHWC : 0;
        for (size_t i = 0; i < ny; i++) y[i] = NAN;
        cuvil_f32_pool2d(&p, last ? xt : x, y);
        ktu_check(y, ref, ny, 1e-5, 1e-6, "%s [public%s]", label, how);
        for (size_t i = 0; i < ny; i++) y[i] = NAN;
        cuvil_f32_pool2d__scalar(&p, last ? xt : x, y);
        ktu_check(y, ref, ny, 1e-5, 1e-6, "%s [__scalar%s]", label, how);
        for (size_t i = 0; i < ny; i++) y[i] = NAN;   /* planes split over a pool of 3 */
        const cuvil_pool *old = cuvil_pool_bind(pool3);
        cuvil_f32_pool2d(&p, last ? xt : x, y);
        cuvil_pool_bind(old);
        ktu_check(y, ref, ny, 1e-5, 1e-6, "%s [public, 3 threads%s]", label, how);
    }
    free(xt);
    free(x);
    free(y);
    free(ref);
}

static const pool_case cases[] = {
    /*  N  C  H   W  KH KW sh sw pt pl pb pr dh dw ceil */
    {1, 3, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0},     /* 2x2 s2 */
    {2, 2, 11, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* ResNet max pool */
    {1, 2, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},    /* 3x3 s1 same */
    {1, 2, 10, 11, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1},   /* ceil_mode, no pads */
    {1, 2, 10, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   /* ceil_mode with pads */
    {1, 1, 7, 7, 2, 2, 3, 3, 0, 0, 0, 0, 1, 1, 1},     /* ceil_mode window past the input */
    {1, 2, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0},   /* dilation 2 */
    {1, 2, 13, 11, 2, 3, 2, 1, 0, 1, 1, 0, 3, 2, 1},   /* mixed dilations, ceil */
    {1, 3, 9, 9, 3, 3, 2, 2, 0, 1, 2, 0, 1, 1, 0},     /* asymmetric pads */
    {1, 2, 6, 7, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 0},     /* pads on every side, big window */
    {2, 3, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, 1, 1, 0},     /* global */
    {1, 4, 5, 9, 5, 9, 1, 1, 0, 0, 0, 0, 1, 1, 0},     /* global, non-square */
    {2, 37, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, 1, 1, 0},    /* global, channels not a multiple of a vector */
    {1, 2048, 1, 3, 1, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0},  /* global, many channels, few pixels */
    {1, 3, 1, 20, 1, 3, 1, 2, 0, 1, 0, 1, 1, 1, 0},    /* 1-D */
    {1, 2, 1, 17, 1, 4, 1, 3, 0, 0, 0, 2, 1, 1, 1},    /* 1-D ceil */
    {1, 1, 3, 300, 2, 2, 1, 1, 0, 0, 1, 1, 1, 1, 0},   /* wide rows */
    {1, 2, 5, 601, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* ResNet max pool, rows wider than a chunk */
    {1, 3, 7, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},    /* ResNet max pool, 20 columns: 8 at a time + 4 */
    {1, 2, 6, 37, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1},    /* 3 wide s2, ceil, odd width: last window clipped */
    {1, 1, 4, 1100, 3, 4, 1, 1, 1, 2, 1, 1, 1, 1, 1},  /* stride 1, two chunks and a remainder */
    {1, 1, 6, 700, 3, 3, 3, 3, 0, 0, 2, 2, 1, 2, 1},   /* stride 3, dilated columns, ceil */
    {1, 1, 3, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 0},     /* windows wholly in the padding */
    {1, 96, 56, 56, 56, 56, 1, 1, 0, 0, 0, 0, 1, 1, 0}, /* global, planes enough to split over threads */
    {2, 40, 25, 23, 25, 23, 1, 1, 0, 0, 0, 0, 1, 1, 0}, /* global, two images of an odd pixel count: halves */
    {1, 2100, 4, 4, 4, 4, 1, 1, 0, 0, 0, 0, 1, 1, 0},  /* global, channels in several runs of the halves' stack sums */
};

int main(void) {
    pool3 = cuvil_pool_create(3, 0, ktu_aligned_alloc, ktu_aligned_free, NULL);
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        run_pool(&cases[i], CUVIL_POOL_MAX, 0);
        run_pool(&cases[i], CUVIL_POOL_AVG, 0);
        run_pool(&cases[i], CUVIL_POOL_AVG, 1);
        run_pool(&cases[i], CUVIL_POOL_LP2, 0);
    }
    cuvil_pool_destroy(pool3);
    return ktu_finish("test_kernel_pool");
}
