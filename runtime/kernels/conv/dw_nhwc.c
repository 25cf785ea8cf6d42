/*
 * dw_nhwc.c -- depthwise convolution on channels-last tensors: x [N, H, W, C], y and the
 * residual [N, OH, OW, C], one output channel per input channel.
 *
 * The lowering gives this layout to the tensors between the pixels-as-rows GEMMs of small maps
 * (28x28 and below), whose product is [pixel][channel] already (src/lower/layout.c). In NCHW a row of such
 * a map is shorter than a vector: the depthwise conv transposed 8 channels at a time into a
 * padded tile and back, and the GEMMs before and after it transposed their outputs. Here a
 * vector holds DW_SIMD consecutive channels of one pixel, so that a tap is one full-width FMA
 * whatever the map's width, with no copy of the input: the border pixels take only the taps
 * inside the image, the others all of them, four output pixels at a time so that a stride-1
 * row's input vectors are loaded once for the three taps that read them.
 *
 * Weights: w[c * wcs + t * wts] for channel c and tap t = kh * KW + kw. The lowering prepacks
 * them tap-major (wcs 1, wts C: a tap's weights for consecutive channels are one vector load);
 * the model's own layout (wcs KH*KW, wts 1) runs the portable loop.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"
#include "dw_simd.h"

typedef struct dwn_run {
    const cuvil_conv2d_params *p;
    const float *x, *w, *bias, *res;
    float *y;
    int64_t wcs, wts;
    int64_t per;         /* output rows (of all images) per task */
    int64_t cparts, cper; /* or parts of the channels (cper a multiple of DW_SIMD), each every row */
    int hswish;          /* HardSwish in the store (else a pass over each row after) */
} dwn_run;

/* Output pixel (oh, ow) of image n, all channels, one at a time (the portable path): the taps
 * inside the image, the bias, the residual (which may be y itself: each channel's is read
 * before it is written) and the activation. */
static void pixel_scalar(const dwn_run *r, int64_t n, int64_t oh, int64_t ow, float *yp, const float *rp) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t C = p->C;
    for (int64_t c = 0; c < C; c++) {
        float acc = r->bias ? r->bias[c] : 0.0f;
        for (int64_t kh = 0; kh < p->KH; kh++) {
            const int64_t ih = oh * p->stride_h - p->pad_t + kh;
            if (ih < 0 || ih >= p->H) continue;
            for (int64_t kw = 0; kw < p->KW; kw++) {
                const int64_t iw = ow * p->stride_w - p->pad_l + kw;
                if (iw < 0 || iw >= p->W) continue;
                acc += r->w[c * r->wcs + (kh * p->KW + kw) * r->wts] * r->x[((n * p->H + ih) * p->W + iw) * C + c];
            }
        }
        yp[c] = cuvil_f32_act1(&p->act, acc + (rp ? rp[c] : 0.0f));
    }
}

#ifdef DW_SIMD
/* The epilogue of one output vector: + residual, Relu/Clip (lo, hi), stored (masked for the
 * last, partial vector of channels only: a masked store is slow on AMD's AVX2). */
static inline __attribute__((always_inline)) void store_vec(dwv v, const float *res, float *y, dwm m, int full,
                                                            dwv vlo, dwv vhi, int hswish) {
    if (res) v = DW_ADD(v, DW_LOADM(res, m));
    /* (bound, v): NaN passes through, as in cuvil_f32_act1 */
    v = hswish ? dw_hswish(v) : DW_MIN(vhi, DW_MAX(vlo, v));
    if (full)
        DW_STORE(y, v);
    else
        DW_STOREM(y, v, m);
}

/* Output pixels [ow0, ow0 + RB) of row oh, channels [c0, c0 + DW_SIMD) (mask m), the taps
 * [kh0, kh1) down and every tap across (interior pixels). KH, KW, S and RB are constants at
 * each call site: the tap loops unroll, the weights stay in registers (a tap outside [kh0,
 * kh1) is skipped by a branch, not a loop bound), and the loads that the taps of a stride-1
 * row share are made once. */
static inline __attribute__((always_inline)) void block_vec(const dwn_run *r, const float *xn, const dwv *wv,
                                                            int64_t kh0, int64_t kh1, int64_t oh, int64_t ow0,
                                                            int64_t c0, dwm m, int full, dwv vb, dwv vlo, dwv vhi,
                                                            float *yrow, const float *rrow, const int KH, const int KW,
                                                            const int S, const int RB) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t C = p->C;
    dwv acc[4];
    for (int i = 0; i < RB; i++) acc[i] = vb;
    for (int kh = 0; kh < KH; kh++) {
        if (kh < kh0 || kh >= kh1) continue;
        const float *xr = xn + ((oh * p->stride_h - p->pad_t + kh) * p->W + ow0 * S - p->pad_l) * C + c0;
        dwv col[(4 - 1) * 2 + 5];
        for (int j = 0; j < (RB - 1) * S + KW; j++) col[j] = DW_LOADM(xr + j * C, m);
        for (int kw = 0; kw < KW; kw++)
            for (int i = 0; i < RB; i++) acc[i] = DW_FMA(wv[kh * KW + kw], col[i * S + kw], acc[i]);
    }
    for (int i = 0; i < RB; i++)
        store_vec(acc[i], rrow ? rrow + (ow0 + i) * C + c0 : NULL, yrow + (ow0 + i) * C + c0, m, full, vlo, vhi,
                  r->hswish);
}

/* Output pixel ow of row oh, channels [c0, c0 + DW_SIMD): the taps [kh0, kh1) down and those
 * inside the image across (a border pixel). */
static inline __attribute__((always_inline)) void pixel_vec(const dwn_run *r, const float *xn, const dwv *wv,
                                                            int64_t kh0, int64_t kh1, int64_t oh, int64_t ow,
                                                            int64_t c0, dwm m, int full, dwv vb, dwv vlo, dwv vhi,
                                                            float *yrow, const float *rrow, const int KH,
                                                            const int KW) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t C = p->C, iw0 = ow * p->stride_w - p->pad_l;
    const int64_t kw0 = iw0 < 0 ? -iw0 : 0, kw1 = cuvil_min_i64(KW, p->W - iw0);
    dwv acc = vb;
    for (int kh = 0; kh < KH; kh++) {
        if (kh < kh0 || kh >= kh1) continue;
        const float *xr = xn + ((oh * p->stride_h - p->pad_t + kh) * p->W + iw0) * C + c0;
        for (int kw = 0; kw < KW; kw++)
            if (kw >= kw0 && kw < kw1) acc = DW_FMA(wv[kh * KW + kw], DW_LOADM(xr + kw * C, m), acc);
    }
    store_vec(acc, rrow ? rrow + ow * C + c0 : NULL, yrow + ow * C + c0, m, full, vlo, vhi, r->hswish);
}

/* Row oh, channels [cb, ce): the border pixels [0, a) and [b, OW) one by one, the interior
 * [a, b) in blocks of 4 (one function per kernel size and stride, ROW_VEC below, so that each
 * has its own small frame). */
static inline __attribute__((always_inline)) void row_vec(const dwn_run *r, const float *xn, int64_t kh0, int64_t kh1,
                                                          int64_t oh, int64_t a, int64_t b, float *yrow,
                                                          const float *rrow, float lo, float hi, int64_t cb,
                                                          int64_t ce, const int K, const int S) {
    const cuvil_conv2d_params *p = r->p;
    const dwv vlo = DW_SET1(lo), vhi = DW_SET1(hi);
    for (int64_t c0 = cb; c0 < ce; c0 += DW_SIMD) {
        const dwm m = dw_mask(ce - c0);   /* (the part's last vector may be partial) */
        const int full = ce - c0 >= DW_SIMD;
        dwv wv[25];
        for (int t = 0; t < K * K; t++) wv[t] = DW_LOADM(r->w + t * r->wts + c0, m);
        const dwv vb = r->bias ? DW_LOADM(r->bias + c0, m) : DW_SET1(0.0f);
        for (int64_t ow = 0; ow < a; ow++)
            pixel_vec(r, xn, wv, kh0, kh1, oh, ow, c0, m, full, vb, vlo, vhi, yrow, rrow, K, K);
        int64_t ow = a;
        for (; ow + 4 <= b; ow += 4)
            block_vec(r, xn, wv, kh0, kh1, oh, ow, c0, m, full, vb, vlo, vhi, yrow, rrow, K, K, S, 4);
        for (; ow < b; ow++) block_vec(r, xn, wv, kh0, kh1, oh, ow, c0, m, full, vb, vlo, vhi, yrow, rrow, K, K, S, 1);
        for (ow = b; ow < p->OW; ow++)
            pixel_vec(r, xn, wv, kh0, kh1, oh, ow, c0, m, full, vb, vlo, vhi, yrow, rrow, K, K);
    }
}

#define ROW_VEC(K, S)                                                                                            \
    static __attribute__((noinline)) void row_vec_##K##_##S(const dwn_run *r, const float *xn, int64_t kh0,      \
                                                            int64_t kh1, int64_t oh, int64_t a, int64_t b,      \
                                                            float *yrow, const float *rrow, float lo, float hi, \
                                                            int64_t cb, int64_t ce) {                           \
        row_vec(r, xn, kh0, kh1, oh, a, b, yrow, rrow, lo, hi, cb, ce, K, S);                                  \
    }
ROW_VEC(3, 1)
ROW_VEC(3, 2)
ROW_VEC(5, 1)
ROW_VEC(5, 2)
#undef ROW_VEC
#endif

/* Does the conv run the vector rows (tap-major weights, 3x3 or 5x5, stride 1 or 2 across)? */
static int vec_rows(const cuvil_conv2d_params *p, int64_t wcs) {
#ifdef DW_SIMD
    return wcs == 1 && p->KH == p->KW && (p->KW == 3 || p->KW == 5) && (p->stride_w == 1 || p->stride_w == 2);
#else
    (void)p;
    (void)wcs;
    return 0;
#endif
}

/* Output rows [q0, q1) of all N*OH, channels [cb, ce) (the vector rows; the portable loop takes
 * every channel, and is never given a part of them: cuvil_f32_dwconv2d_nhwc). */
static void rows(const dwn_run *r, int64_t q0, int64_t q1, int64_t cb, int64_t ce) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t C = p->C, OW = p->OW;
#ifdef DW_SIMD
    const int64_t S = p->stride_w;
    if (vec_rows(p, r->wcs)) {
        const cuvil_act act = p->act.act;
        const int clamp = act == CUVIL_ACT_NONE || act == CUVIL_ACT_RELU || act == CUVIL_ACT_CLIP;
        const float lo = act == CUVIL_ACT_RELU ? 0.0f : act == CUVIL_ACT_CLIP ? p->act.alpha : -INFINITY;
        const float hi = act == CUVIL_ACT_CLIP ? p->act.beta : INFINITY;
        /* the pixels whose taps are all inside the image across: [a, b) */
        int64_t a = (p->pad_l + S - 1) / S, b = p->W - p->KW + p->pad_l >= 0 ? (p->W - p->KW + p->pad_l) / S + 1 : 0;
        a = cuvil_min_i64(a, OW);
        b = cuvil_min_i64(b, OW);
        if (b < a) b = a;
        for (int64_t q = q0; q < q1; q++) {
            const int64_t n = q / p->OH, oh = q % p->OH;
            float *yrow = r->y + q * OW * C;
            const float *rrow = r->res ? r->res + q * OW * C : NULL;
            const float *xn = r->x + n * p->H * p->W * C;
            /* the taps inside the image down */
            const int64_t ih0 = oh * p->stride_h - p->pad_t;
            const int64_t kh0 = ih0 < 0 ? -ih0 : 0, kh1 = cuvil_min_i64(p->KH, p->H - ih0);
            if (p->KW == 3 && S == 1)
                row_vec_3_1(r, xn, kh0, kh1, oh, a, b, yrow, rrow, lo, hi, cb, ce);
            else if (p->KW == 3)
                row_vec_3_2(r, xn, kh0, kh1, oh, a, b, yrow, rrow, lo, hi, cb, ce);
            else if (S == 1)
                row_vec_5_1(r, xn, kh0, kh1, oh, a, b, yrow, rrow, lo, hi, cb, ce);
            else
                row_vec_5_2(r, xn, kh0, kh1, oh, a, b, yrow, rrow, lo, hi, cb, ce);
            if (!clamp && !r->hswish) {
                if (cb == 0 && ce == C)
                    cuvil_f32_unary(&p->act, yrow, yrow, (size_t)(OW * C));
                else   /* the part's channels of each pixel */
                    cuvil_f32_act_rows(&p->act, yrow + cb, (size_t)C, (size_t)OW, (size_t)(ce - cb));
            }
        }
        return;
    }
#endif
    (void)cb;
    (void)ce;
    for (int64_t q = q0; q < q1; q++) {
        float *yrow = r->y + q * OW * C;
        const float *rrow = r->res ? r->res + q * OW * C : NULL;
        for (int64_t ow = 0; ow < OW; ow++)
            pixel_scalar(r, q / p->OH, q % p->OH, ow, yrow + ow * C, rrow ? rrow + ow * C : NULL);
    }
}

static void rows_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const dwn_run *r = (const dwn_run *)vctx;
    const int64_t total = r->p->N * r->p->OH;
    if (r->cparts > 1)
        rows(r, 0, total, t * r->cper, cuvil_min_i64(r->p->C, (t + 1) * r->cper));
    else
        rows(r, t * r->per, cuvil_min_i64(total, (t + 1) * r->per), 0, r->p->C);
}

void cuvil_f32_dwconv2d_nhwc(const cuvil_conv2d_params *p, const float *x, const float *w, int64_t wcs, int64_t wts,
                             const float *bias, const float *residual, float *y) {
    const int64_t total = p->N * p->OH;
    if (total <= 0 || p->OW <= 0 || p->C <= 0) return;
    dwn_run r = {p, x, w, bias, residual, y, wcs, wts, total, 1, p->C, 0};
    r.hswish = vec_rows(p, wcs) && p->act.act == CUVIL_ACT_HARD_SWISH;
    const int64_t threads = cuvil_threads();
    /* one run of rows per thread: the GEMMs on either side split the pixels the same way; with
     * fewer than 4 rows a thread (a 7x7 map: 4 and 3 on two threads), a part of the channels
     * instead, every row */
    if (threads > 1 && total >= 2 && (double)total * (double)(p->OW * p->C * p->KH * p->KW) >= 1e5) {
        const int64_t tasks = cuvil_min_i64(total, threads);
        r.per = (total + tasks - 1) / tasks;
#ifdef DW_SIMD
        const int64_t vecs = (p->C + DW_SIMD - 1) / DW_SIMD;
        if (vec_rows(p, wcs) && total < 4 * threads && total % threads && vecs >= 2 * threads) {
            r.cper = (vecs + threads - 1) / threads * DW_SIMD;
            r.cparts = (p->C + r.cper - 1) / r.cper;
            cuvil_parallel_for(r.cparts, rows_task, &r);
            return;
        }
#endif
    }
    cuvil_parallel_for((total + r.per - 1) / r.per, rows_task, &r);
}
