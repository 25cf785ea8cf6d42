/*
 * pool2d.c -- MaxPool / AveragePool / LpPool(p=2), NCHW, with strides, dilations, asymmetric
 * pads and ceil_mode (the caller's OH/OW).
 *
 * Semantics (as ONNX Runtime): taps outside the input are skipped; a window with no tap inside
 * gives -FLT_MAX for max and 0 for avg/lp. The average divisor is the number of taps inside
 * the input, or with count_include_pad the number inside the padded extent [-pad_t, H + pad_b)
 * x [-pad_l, W + pad_r).
 *
 * The optimised version works one output row at a time: max and average pools with undilated
 * rows reduce the window's valid input rows into a row on the stack, then each window's columns
 * of it (max_row, sum_row); the others fold one tap at a time into the whole output row (the y
 * row is the accumulator), each pass a plain loop over the columns whose tap is inside the
 * input, which the compiler vectorises for stride 1 and 2. Divisors are counted per row (rows) and per column (cols) because the valid
 * tap set of a window is a product of the two. Global pooling is a contiguous reduction; of a
 * channels-last input (CUVIL_POOL_X_NHWC) it is vectorised over the channels.
 */
#include <float.h>
#include <math.h>

#include "../rt_int.h"


void cuvil_f32_pool2d__scalar(const cuvil_pool2d_params *p, const float *x, float *y) {
    const int64_t H = p->H, W = p->W;
    /* channels last: element (n, c, h, w) at ((n H + h) W + w) C + c */
    const int nhwc = (p->layout & CUVIL_POOL_X_NHWC) != 0;
    for (int64_t nc = 0; nc < p->N * p->C; nc++) {
        const float *xc = nhwc ? x + nc / p->C * H * W * p->C + nc % p->C : x + nc * H * W;
        const int64_t xs = nhwc ? p->C : 1; /* between two pixels */
        float *yc = y + nc * p->OH * p->OW;
        for (int64_t oh = 0; oh < p->OH; oh++)
            for (int64_t ow = 0; ow < p->OW; ow++) {
                const int64_t h0 = oh * p->stride_h - p->pad_t, w0 = ow * p->stride_w - p->pad_l;
                float acc = p->kind == CUVIL_POOL_MAX ? -FLT_MAX : 0.0f;
                int64_t cnt = 0;
                for (int64_t kh = 0; kh < p->KH; kh++) {
                    const int64_t ih = h0 + kh * p->dil_h;
                    if (ih < 0 || ih >= H) continue;
                    for (int64_t kw = 0; kw < p->KW; kw++) {
                        const int64_t iw = w0 + kw * p->dil_w;
                        if (iw < 0 || iw >= W) continue;
                        const float v = xc[(ih * W + iw) * xs];
                        if (p->kind == CUVIL_POOL_MAX)
                            acc = v > acc ? v : acc;
                        else if (p->kind == CUVIL_POOL_AVG)
                            acc += v;
                        else
                            acc += v * v;
                        cnt++;
                    }
                }
                if (p->kind == CUVIL_POOL_AVG) {
                    if (p->count_include_pad)
                        cnt = cuvil_count_taps(h0, p->KH, p->dil_h, -p->pad_t, H + p->pad_b) *
                              cuvil_count_taps(w0, p->KW, p->dil_w, -p->pad_l, W + p->pad_r);
                    acc = cnt > 0 ? acc / (float)cnt : 0.0f;
                } else if (p->kind == CUVIL_POOL_LP2) {
                    acc = sqrtf(acc);
                }
                yc[oh * p->OW + ow] = acc;
            }
    }
}

typedef struct global_job {
    const cuvil_pool2d_params *p;
    const float *x;
    float *y;
} global_job;

/* Planes [nc0, nc1) of a channels-first global pool. */
static void global_planes(void *vctx, int64_t nc0, int64_t nc1, int tid) {
    const global_job *j = vctx;
    const cuvil_pool2d_params *p = j->p;
    const float *x = j->x;
    float *y = j->y;
    const int64_t HW = p->H * p->W;
    (void)tid;
    for (int64_t nc = nc0; nc < nc1; nc++) {
        const float *xc = x + nc * HW;
        float a8[8];
        int64_t i = 0;
        float acc;
        if (p->kind == CUVIL_POOL_MAX) {
            for (int k = 0; k < 8; k++) a8[k] = -FLT_MAX;
            for (; i + 8 <= HW; i += 8)
                for (int k = 0; k < 8; k++) a8[k] = xc[i + k] > a8[k] ? xc[i + k] : a8[k];
            acc = -FLT_MAX;
            for (int k = 0; k < 8; k++) acc = a8[k] > acc ? a8[k] : acc;
            for (; i < HW; i++) acc = xc[i] > acc ? xc[i] : acc;
        } else if (p->kind == CUVIL_POOL_AVG) {
            /* 32 partial sums (four vectors, four independent chains of adds: one vector's
             * chain made a 14x14 plane wait on 24 dependent adds) */
            float a32[32];
            for (int k = 0; k < 32; k++) a32[k] = 0.0f;
            for (; i + 32 <= HW; i += 32)
                for (int k = 0; k < 32; k++) a32[k] += xc[i + k];
            for (int k = 0; k < 8; k++) a8[k] = (a32[k] + a32[k + 8]) + (a32[k + 16] + a32[k + 24]);
            for (; i + 8 <= HW; i += 8)
                for (int k = 0; k < 8; k++) a8[k] += xc[i + k];
            acc = 0.0f;
            for (int k = 0; k < 8; k++) acc += a8[k];
            for (; i < HW; i++) acc += xc[i];
            acc /= (float)HW;
        } else {
            for (int k = 0; k < 8; k++) a8[k] = 0.0f;
            for (; i + 8 <= HW; i += 8)
                for (int k = 0; k < 8; k++) a8[k] += xc[i + k] * xc[i + k];
            acc = 0.0f;
            for (int k = 0; k < 8; k++) acc += a8[k];
            for (; i < HW; i++) acc += xc[i] * xc[i];
            acc = sqrtf(acc);
        }
        y[nc] = acc;
    }
}

/* (the planes over the threads from 16K values, two shares of 8K: the convs before a pool
 * split their output over the threads, and one thread alone read the other core's share
 * from that core's cache. MobileNetV3, AVX2, its pools of 120 x 28x28 from 128K values:
 * 0.005 ms on one thread, 0.014 on two.) */
static void global_pool(const cuvil_pool2d_params *p, const float *x, float *y) {
    global_job j = {p, x, y};
    cuvil_parallel_range(p->N * p->C, cuvil_max_i64(1, 8192 / cuvil_max_i64(p->H * p->W, 1)), 1, global_planes, &j);
}

/* Global pooling of a channels-last x: the pixels [q0, q1) in order, each folded into the
 * channels [c0, c1) at once (contiguous on both sides, so the compiler vectorises it over
 * channels) of acc, which holds c1 - c0. The last conv before a global pool writes its
 * pixels-as-rows product this way, with no transpose into NCHW. */
static void global_nhwc_fold(const cuvil_pool2d_params *p, const float *x, int64_t q0, int64_t q1, int64_t c0,
                             int64_t c1, float *acc) {
    const int64_t C = p->C, nc = c1 - c0;
    const float init = p->kind == CUVIL_POOL_MAX ? -FLT_MAX : 0.0f;
    for (int64_t c = 0; c < nc; c++) acc[c] = init;
    for (int64_t q = q0; q < q1; q++) {
        const float *r = x + q * C + c0;
        if (p->kind == CUVIL_POOL_MAX)
            for (int64_t c = 0; c < nc; c++) acc[c] = r[c] > acc[c] ? r[c] : acc[c];
        else if (p->kind == CUVIL_POOL_AVG)
            for (int64_t c = 0; c < nc; c++) acc[c] += r[c];
        else
            for (int64_t c = 0; c < nc; c++) acc[c] += r[c] * r[c];
    }
}

/* A large image's pixels in two halves, folded apart and then together (whatever the thread
 * count: the same sums on one thread or two), GLOBAL_HALF_C channels at a time (the second
 * half's sums are on the stack). The convs before a pool split their output pixels over the
 * threads, so on two threads each half is in the cache of the core that reads it; one thread
 * alone read the other core's half from there (MobileNetV3, AVX2, its pool of 672 x 14x14:
 * 0.008 ms on one thread, 0.019 on two; now 0.005). */
#define GLOBAL_HALF_C 512

typedef struct global_nhwc_job {
    const cuvil_pool2d_params *p;
    const float *x;   /* one image */
    int64_t c0, c1;   /* the channels of this call */
    float *acc[2];    /* each half's folds */
} global_nhwc_job;

static void global_nhwc_half(void *vctx, int64_t t, int tid) {
    const global_nhwc_job *j = vctx;
    const int64_t HW = j->p->H * j->p->W;
    (void)tid;
    global_nhwc_fold(j->p, j->x, t * (HW / 2), t ? HW : HW / 2, j->c0, j->c1, j->acc[t]);
}

static void global_pool_nhwc(const cuvil_pool2d_params *p, const float *x, float *y) {
    const int64_t C = p->C, HW = p->H * p->W;
    float half[GLOBAL_HALF_C];
    const int halves = HW >= 2 && HW * C >= 16384;
    for (int64_t n = 0; n < p->N; n++) {
        float *yn = y + n * C;
        if (halves) {
            for (int64_t c0 = 0; c0 < C; c0 += GLOBAL_HALF_C) {
                global_nhwc_job j = {p, x + n * HW * C, c0, cuvil_min_i64(C, c0 + GLOBAL_HALF_C), {yn + c0, half}};
                cuvil_parallel_for(2, global_nhwc_half, &j);
                for (int64_t c = 0; c < j.c1 - c0; c++)
                    yn[c0 + c] = p->kind == CUVIL_POOL_MAX ? (half[c] > yn[c0 + c] ? half[c] : yn[c0 + c])
                                                           : yn[c0 + c] + half[c];
            }
        } else {
            global_nhwc_fold(p, x + n * HW * C, 0, HW, 0, C, yn);
        }
        if (p->kind == CUVIL_POOL_AVG)
            for (int64_t c = 0; c < C; c++) yn[c] /= (float)HW;
        else if (p->kind == CUVIL_POOL_LP2)
            for (int64_t c = 0; c < C; c++) yn[c] = sqrtf(yn[c]);
    }
}

/* Max pooling with undilated rows, one output row (yr) from the plane xc: separably, the max
 * of the valid input rows into a row t first (contiguous loads), then the max over each
 * window's KW columns of t; t is -FLT_MAX where the window leaves the input, so neither pass
 * branches. A window's KH x KW taps are visited once each (the 3x3 stride-2 pool after
 * ResNet's stem took 9 strided passes per row before). The `v > acc` fold skips NaN taps, in
 * any grouping, as the other paths do. Output columns go in chunks whose t fits on the stack. */
#define MAXROW_T 512
static int row_fits(const cuvil_pool2d_params *p) {
    return p->dil_h == 1 && (p->KW - 1) * p->dil_w + 1 <= MAXROW_T / 2 && p->stride_w <= MAXROW_T / 4;
}

/* Output row oh of max_row / sum_row: its window's input rows [ih0, ih1), and its output
 * columns a chunk at a time whose span of input columns fits their row t. */
typedef struct row_geom {
    int64_t ih0, ih1, span, chunk;   /* span: input columns one window covers; chunk: output columns a pass, >= 1 */
} row_geom;
static row_geom row_geometry(const cuvil_pool2d_params *p, int64_t oh) {
    row_geom g;
    g.ih0 = cuvil_max_i64(0, oh * p->stride_h - p->pad_t);
    g.ih1 = cuvil_min_i64(p->H, oh * p->stride_h - p->pad_t + p->KH);
    g.span = (p->KW - 1) * p->dil_w + 1;
    g.chunk = (MAXROW_T - g.span) / p->stride_w + 1;
    return g;
}

/* The chunk of output columns from ow0: n of them; t[i] is input column c0 + i for i < len,
 * inside the input for [lo, hi); t's columns outside the input set to pad here. */
typedef struct chunk_geom {
    int64_t n, c0, len, lo, hi;
} chunk_geom;
static chunk_geom chunk_geometry(const cuvil_pool2d_params *p, const row_geom *g, int64_t ow0, float *t, float pad) {
    chunk_geom c;
    c.n = cuvil_min_i64(g->chunk, p->OW - ow0);
    c.c0 = ow0 * p->stride_w - p->pad_l;
    c.len = (c.n - 1) * p->stride_w + g->span;
    c.lo = cuvil_max_i64(0, -c.c0);
    c.hi = cuvil_max_i64(c.lo, cuvil_min_i64(c.len, p->W - c.c0));
    for (int64_t i = 0; i < c.lo; i++) t[i] = pad;
    for (int64_t i = c.hi; i < c.len; i++) t[i] = pad;
    return c;
}

static void max_row(const cuvil_pool2d_params *p, const float *xc, float *yr, int64_t oh) {
    const int64_t W = p->W, sw = p->stride_w, dw = p->dil_w, KW = p->KW;
    const row_geom g = row_geometry(p, oh);
    const int64_t ih0 = g.ih0, ih1 = g.ih1;
    float t[MAXROW_T];
    for (int64_t ow0 = 0; ow0 < p->OW; ow0 += g.chunk) {
        const chunk_geom cg = chunk_geometry(p, &g, ow0, t, -FLT_MAX);
        const int64_t n = cg.n, c0 = cg.c0, lo = cg.lo, hi = cg.hi;
        int64_t ih = ih0;
        if (ih1 - ih0 >= 3) {
            /* three rows a pass (a 3-row window in one pass over t, not an initialisation and three) */
            const float *r0 = xc + ih * W + c0, *r1 = r0 + W, *r2 = r1 + W;
            for (int64_t i = lo; i < hi; i++) {
                float a = r0[i] > -FLT_MAX ? r0[i] : -FLT_MAX;
                a = r1[i] > a ? r1[i] : a;
                t[i] = r2[i] > a ? r2[i] : a;
            }
            ih += 3;
        } else if (ih1 - ih0 == 2) {
            const float *r0 = xc + ih * W + c0, *r1 = r0 + W;
            for (int64_t i = lo; i < hi; i++) {
                const float a = r0[i] > -FLT_MAX ? r0[i] : -FLT_MAX;
                t[i] = r1[i] > a ? r1[i] : a;
            }
            ih += 2;
        } else {
            for (int64_t i = lo; i < hi; i++) t[i] = -FLT_MAX;
        }
        for (; ih < ih1; ih++) {
            const float *xr = xc + ih * W;
            for (int64_t i = lo; i < hi; i++) t[i] = xr[c0 + i] > t[i] ? xr[c0 + i] : t[i];
        }
        float *y = yr + ow0;
        if (KW == 3 && sw == 2 && dw == 1) {
            /* ResNet's stem pool: its three columns in one pass (t holds no NaN) */
            for (int64_t j = 0; j < n; j++) {
                const float a = t[2 * j] > t[2 * j + 1] ? t[2 * j] : t[2 * j + 1];
                y[j] = t[2 * j + 2] > a ? t[2 * j + 2] : a;
            }
            continue;
        }
        for (int64_t j = 0; j < n; j++) y[j] = -FLT_MAX;
        for (int64_t kw = 0; kw < KW; kw++) {
            const float *tk = t + kw * dw;
            if (sw == 1)
                for (int64_t j = 0; j < n; j++) y[j] = tk[j] > y[j] ? tk[j] : y[j];
            else if (sw == 2)
                for (int64_t j = 0; j < n; j++) y[j] = tk[2 * j] > y[j] ? tk[2 * j] : y[j];
            else
                for (int64_t j = 0; j < n; j++) y[j] = tk[j * sw] > y[j] ? tk[j * sw] : y[j];
        }
    }
}

/* Average pooling with undilated rows, the sums of output row oh into yr the same way: the
 * valid input rows added into t (0 where the window leaves the input), then each window's KW
 * columns of t; returns the rows summed. Each value is summed in registers and stored once:
 * folding every tap into the output row (below) read back and stored each value KH x KW times,
 * and where the input and output maps lie a multiple of 4 KB apart (two maps of the same size
 * in the arena) every load of the input waited on the store before it to the same low address
 * bits: a 3x3 stride-1 pool on 64 x 112 x 112 took 1.2-1.3 ms on x86_64-avx512 (AMD EPYC) against
 * ONNX Runtime's 0.44. Sums in another order than the fold's (rows first). */
static int64_t sum_row(const cuvil_pool2d_params *p, const float *xc, float *yr, int64_t oh) {
    const int64_t W = p->W, sw = p->stride_w, dw = p->dil_w, KW = p->KW;
    const row_geom g = row_geometry(p, oh);
    const int64_t ih0 = g.ih0, ih1 = g.ih1;
    float t[MAXROW_T];
    for (int64_t ow0 = 0; ow0 < p->OW; ow0 += g.chunk) {
        const chunk_geom cg = chunk_geometry(p, &g, ow0, t, 0.0f);
        const int64_t n = cg.n, c0 = cg.c0, lo = cg.lo, hi = cg.hi;
        int64_t ih = ih0;
        if (ih1 - ih0 >= 3) {   /* (three rows a pass) */
            const float *r0 = xc + ih * W + c0, *r1 = r0 + W, *r2 = r1 + W;
            for (int64_t i = lo; i < hi; i++) t[i] = (r0[i] + r1[i]) + r2[i];
            ih += 3;
        } else if (ih1 - ih0 == 2) {
            const float *r0 = xc + ih * W + c0, *r1 = r0 + W;
            for (int64_t i = lo; i < hi; i++) t[i] = r0[i] + r1[i];
            ih += 2;
        } else {
            for (int64_t i = lo; i < hi; i++) t[i] = 0.0f;
        }
        for (; ih < ih1; ih++) {
            const float *xr = xc + ih * W + c0;
            for (int64_t i = lo; i < hi; i++) t[i] += xr[i];
        }
        float *y = yr + ow0;
        if (dw == 1 && sw == 1 && KW == 3) {
            for (int64_t j = 0; j < n; j++) y[j] = (t[j] + t[j + 1]) + t[j + 2];
        } else if (dw == 1 && sw == 2 && KW == 2) {
            for (int64_t j = 0; j < n; j++) y[j] = t[2 * j] + t[2 * j + 1];
        } else if (dw == 1 && sw == 2 && KW == 3) {
            for (int64_t j = 0; j < n; j++) y[j] = (t[2 * j] + t[2 * j + 1]) + t[2 * j + 2];
        } else {
            for (int64_t j = 0; j < n; j++) y[j] = t[j * sw];
            for (int64_t kw = 1; kw < KW; kw++)
                for (int64_t j = 0; j < n; j++) y[j] += t[j * sw + kw * dw];
        }
    }
    return ih1 > ih0 ? ih1 - ih0 : 0;
}

/* An average pool row's columns [ow0, ow1) divided by their own count of taps (rc rows of
 * them; columns inside [lim_lo, lim_hi) counted). */
static void avg_edge(const cuvil_pool2d_params *p, float *yr, int64_t ow0, int64_t ow1, float rc, int64_t lim_lo,
                     int64_t lim_hi) {
    for (int64_t ow = ow0; ow < ow1; ow++) {
        const float cnt = rc * (float)cuvil_count_taps(ow * p->stride_w - p->pad_l, p->KW, p->dil_w, lim_lo, lim_hi);
        yr[ow] = cnt > 0.0f ? yr[ow] / cnt : 0.0f;
    }
}

/* Planes [nc0, nc1) of all N*C. */
static void pool_planes(const cuvil_pool2d_params *p, const float *x, float *y, int64_t nc0, int64_t nc1) {
    const int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW;
    const int64_t sh = p->stride_h, sw = p->stride_w, dh = p->dil_h, dw = p->dil_w;
    const int is_max = p->kind == CUVIL_POOL_MAX;
    const int separable = is_max && row_fits(p), summed = p->kind == CUVIL_POOL_AVG && row_fits(p);
    for (int64_t nc = nc0; nc < nc1; nc++) {
        const float *xc = x + nc * H * W;
        float *yc = y + nc * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            float *yr = yc + oh * OW;
            if (separable) {
                max_row(p, xc, yr, oh);
                continue;
            }
            const int64_t h0 = oh * sh - p->pad_t;
            int64_t rowcnt = 0;
            if (summed) rowcnt = sum_row(p, xc, yr, oh);
            else
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = is_max ? -FLT_MAX : 0.0f;
            for (int64_t kh = 0; kh < p->KH && !summed; kh++) {
                const int64_t ih = h0 + kh * dh;
                if (ih < 0 || ih >= H) continue;
                rowcnt++;
                const float *xr = xc + ih * W;
                for (int64_t kw = 0; kw < p->KW; kw++) {
                    const int64_t off = kw * dw - p->pad_l;
                    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
                    int64_t hi = W - off > 0 ? (W - off + sw - 1) / sw : 0;
                    if (hi > OW) hi = OW;
                    if (is_max) {
                        if (sw == 1)
                            for (int64_t ow = lo; ow < hi; ow++) {
                                const float v = xr[ow + off];
                                yr[ow] = v > yr[ow] ? v : yr[ow];
                            }
                        else
                            for (int64_t ow = lo; ow < hi; ow++) {
                                const float v = xr[ow * sw + off];
                                yr[ow] = v > yr[ow] ? v : yr[ow];
                            }
                    } else if (p->kind == CUVIL_POOL_AVG) {
                        if (sw == 1)
                            for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xr[ow + off];
                        else
                            for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xr[ow * sw + off];
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++) {
                            const float v = xr[ow * sw + off];
                            yr[ow] += v * v;
                        }
                    }
                }
            }
            if (p->kind == CUVIL_POOL_AVG) {
                const float rc = (float)(p->count_include_pad
                                             ? cuvil_count_taps(h0, p->KH, dh, -p->pad_t, H + p->pad_b)
                                             : rowcnt);
                /* taps of each column inside the input (or, count_include_pad, the padding):
                 * KW for the columns whose window lies inside [lim_lo, lim_hi), counted at the
                 * edges (a count per column took 3.4x ONNX Runtime's time on a 3x3 stride-1
                 * pool without the padding's taps) */
                const int64_t lim_lo = p->count_include_pad ? -p->pad_l : 0, lim_hi = p->count_include_pad ? W + p->pad_r : W;
                const int64_t span = (p->KW - 1) * dw;
                int64_t in0 = lim_lo + p->pad_l <= 0 ? 0 : (lim_lo + p->pad_l + sw - 1) / sw;   /* first ow with w0 >= lim_lo */
                int64_t in1 = lim_hi - span + p->pad_l > 0 ? (lim_hi - span + p->pad_l + sw - 1) / sw : 0;   /* w0 + span < lim_hi */
                in1 = cuvil_min_i64(in1, OW);
                in0 = cuvil_min_i64(in0, in1);
                const float full = rc * (float)p->KW;
                avg_edge(p, yr, 0, in0, rc, lim_lo, lim_hi);
                /* (the interior's divisions in a loop of their own, which the compiler
                 * vectorises: inside the edges' loop they were one divss a value, 1.34 of a 3x3
                 * stride-1 pool's 1.4 ms on 64 x 112 x 112, x86_64-avx512, AMD EPYC) */
                if (full > 0.0f)
                    for (int64_t ow = in0; ow < in1; ow++) yr[ow] /= full;
                else
                    for (int64_t ow = in0; ow < in1; ow++) yr[ow] = 0.0f;
                avg_edge(p, yr, in1, OW, rc, lim_lo, lim_hi);
            } else if (p->kind == CUVIL_POOL_LP2) {
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = sqrtf(yr[ow]);
            }
        }
    }
}

typedef struct pool_split {
    const cuvil_pool2d_params *p;
    const float *x;
    float *y;
    int64_t per;
} pool_split;

static void pool_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const pool_split *s = (const pool_split *)vctx;
    pool_planes(s->p, s->x, s->y, t * s->per, cuvil_min_i64(s->p->N * s->p->C, (t + 1) * s->per));
}

void cuvil_f32_pool2d(const cuvil_pool2d_params *p, const float *x, float *y) {
    const int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW;
    if (OH <= 0 || OW <= 0) return;
    const int global = OH == 1 && OW == 1 && p->KH == H && p->KW == W && p->pad_t == 0 && p->pad_l == 0 &&
                       (p->dil_h == 1 || H == 1) && (p->dil_w == 1 || W == 1);
    if (p->layout & CUVIL_POOL_X_NHWC) {
        /* the lowering gives channels last to global pools only; anything else, correctly */
        if (global)
            global_pool_nhwc(p, x, y);
        else
            cuvil_f32_pool2d__scalar(p, x, y);
        return;
    }
    if (global) {
        global_pool(p, x, y);
        return;
    }
    const int64_t planes = p->N * p->C, threads = cuvil_threads();
    if (threads <= 1 || planes < 2 || planes * OH * OW * p->KH * p->KW < 200000) {
        pool_planes(p, x, y, 0, planes);
        return;
    }
    /* planes cost the same: a few tasks per thread */
    pool_split s = {p, x, y, (planes + 4 * threads - 1) / (4 * threads)};
    cuvil_parallel_for((planes + s.per - 1) / s.per, pool_task, &s);
}
