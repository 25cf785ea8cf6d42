/*
 * conv2d.c -- 2-D convolution, NCHW: y = act(conv(x, w) + bias + residual).
 *
 * Three paths, chosen from the (constant) shape:
 *  - C/group == 1 (depthwise, any channel multiplier; not when the weights were packed for the
 *    GEMM, which the compiler does where the GEMM is faster): a direct loop over output rows. 3x3 and
 *    5x5 kernels with stride 1 or 2 keep every partial sum in registers across the taps and
 *    vectorise over the output width (borders are done per column); other shapes fold one tap
 *    at a time into a row accumulator.
 *  - 1x1, stride 1, no padding: per image and group, Y[Mg, H*W] = W[Mg, Cg] x X[Cg, H*W], a
 *    plain GEMM on the input as it lies.
 *  - anything else: the same GEMM with K = Cg*KH*KW, where the B operand is the im2col matrix.
 *    It is never materialised: the GEMM's B packer reads the image directly into the packed
 *    NR-wide panels (im2col and packing in one pass). A padded conv first copies the image
 *    with explicit zero borders into scratch, so that packing never clips.
 * Bias, the residual (which may be y itself) and the activation are fused into the GEMM
 * epilogue. Scratch: GEMM packing (+ the padded image), or two rows for depthwise.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"
#include "../transpose8.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* ===== im2col packer =================================================================== */
typedef struct im2col_ctx {
    const float *x; /* first input channel of the group, one image */
    int64_t C, H, W, KH, KW, sh, sw, pt, pl, dh, dw, OH, OW;
    /* 1: a padded image whose rows are stored as their even columns, then their odd ones
     * (pad_image, phased), for stride 2 across: the columns a tap reads are then contiguous */
    int phased;
} im2col_ctx;

typedef struct seg {
    int64_t oh, ow, len, pos;
} seg;

#define MAX_NR 32 /* widest microkernel the packer supports (ours are 8 and 16) */

/* Columns t in [0, len) of an output-row segment read input columns iw0 + t*sw; the ones
 * inside [0, W) are [*lo, *hi). */
static inline void clip_cols(int64_t iw0, int64_t sw, int64_t len, int64_t W, int64_t *lo,
                             int64_t *hi) {
    int64_t l = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
    int64_t h = W - iw0 > 0 ? (W - iw0 + sw - 1) / sw : 0;
    if (l > len) l = len;
    if (h > len) h = len;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Where one output-row segment reads within a channel, for one kernel tap (kh, kw). */
typedef struct plan {
    int64_t off;    /* input offset of the segment's first column (may be outside) */
    int64_t lo, hi; /* the columns t in [lo, hi) read inside the input; the rest are 0 */
} plan;

#define PLAN_CAP 96 /* plans kept per panel (taps x segments), on the stack: at least MAX_NR */

/* memcpy of up to 16 floats with a constant size per case, so each is a couple of moves
 * rather than a call into libc (panels split across output rows copy short runs). */
static inline void copy_run(float *d, const float *s, int64_t n) {
    switch (n) {
#define C(k) case k: memcpy(d, s, k * sizeof(float)); return;
        C(1) C(2) C(3) C(4) C(5) C(6) C(7) C(8) C(9) C(10) C(11) C(12) C(13) C(14) C(15) C(16)
#undef C
    default: memcpy(d, s, (size_t)n * sizeof(float)); return;
    }
}

/* Packs the im2col matrix B[k = (c, kh, kw)][j = (oh, ow)] of one image and group. Per panel
 * of NR output pixels the geometry (which output-row segments it covers, where each kernel
 * tap reads, what is clipped) is the same for every channel, so it is planned once per tap;
 * then channels are walked in the order the packed rows are laid out (c outer, taps inner),
 * so the writes are sequential and the reads stay within a few rows of one channel.
 * (Aligned to a cache line: its hot loop dispatches each copy through a jump table whose
 * speed moved with where the function happened to land. An unrelated change to this file
 * moved it 400 bytes and made RegNet-Y-400MF 6% slower on one thread, 11.7 -> 12.5 ms, with
 * pack_b_im2col 15% -> 18% of the run (perf); aligned, 12.2 against 12.3 before.) */
__attribute__((aligned(64))) static void pack_b_im2col(const void *vctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                          int nr, float *dst) {
    const im2col_ctx *g = (const im2col_ctx *)vctx;
    const int64_t KK = g->KH * g->KW, HW = g->H * g->W, sw = g->phased ? 1 : g->sw;
    const int64_t W_even = (g->W + 1) / 2; /* phased: where a row's odd columns start */
    seg segs[MAX_NR];
    plan plans[PLAN_CAP];
    unsigned char full[PLAN_CAP]; /* per tap: no segment clipped */
    for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
        const int64_t cols = cuvil_min_i64(nr, nc - j0);
        int nseg = 0;
        for (int64_t j = n0 + j0, pos = 0, rem = cols; rem > 0; nseg++) {
            const int64_t oh = j / g->OW, ow = j % g->OW;
            const int64_t len = cuvil_min_i64(rem, g->OW - ow);
            segs[nseg] = (seg){oh, ow, len, pos};
            j += len;
            pos += len;
            rem -= len;
        }
        if (cols < nr)
            for (int64_t kk = 0; kk < kc; kk++)
                memset(dst + kk * nr + cols, 0, (size_t)(nr - cols) * sizeof(float));
        const int single = nseg == 1 && cols == nr;
        /* taps in batches that fit the plan buffer */
        const int64_t tb = PLAN_CAP / nseg;
        for (int64_t t0 = 0; t0 < KK; t0 += tb) {
            const int64_t t1 = cuvil_min_i64(KK, t0 + tb);
            for (int64_t t = t0; t < t1; t++) {
                const int64_t kh = t / g->KW, kw = t % g->KW;
                int f = 1;
                for (int s = 0; s < nseg; s++) {
                    plan *pl = &plans[(t - t0) * nseg + s];
                    const int64_t ih = segs[s].oh * g->sh - g->pt + kh * g->dh;
                    if (g->phased) {
                        /* padded: nothing is clipped; column 2 ow + kw is in phase kw % 2 */
                        const int64_t col = segs[s].ow * 2 + kw * g->dw;
                        pl->off = ih * g->W + (col & 1) * W_even + (col >> 1);
                        pl->lo = 0;
                        pl->hi = segs[s].len;
                        continue;
                    }
                    const int64_t iw0 = segs[s].ow * sw - g->pl + kw * g->dw;
                    pl->off = ih * g->W + iw0;
                    if (ih >= 0 && ih < g->H) {
                        clip_cols(iw0, sw, segs[s].len, g->W, &pl->lo, &pl->hi);
                    } else {
                        pl->lo = pl->hi = 0;
                    }
                    f &= pl->lo == 0 && pl->hi == segs[s].len;
                }
                full[t - t0] = (unsigned char)f;
            }
            /* rows k = c*KK + t in [k0, k0 + kc) with t in [t0, t1) */
            const int64_t c_first = cuvil_max_i64(0, (k0 - t1 + 1 + KK - 1) / KK);
            const int64_t c_last = cuvil_min_i64(g->C - 1, (k0 + kc - 1 - t0) / KK);
            for (int64_t c = c_first; c <= c_last; c++) {
                const float *xc = g->x + c * HW;
                const int64_t ta = cuvil_max_i64(t0, k0 - c * KK);
                const int64_t tz = cuvil_min_i64(t1, k0 + kc - c * KK);
                for (int64_t t = ta; t < tz; t++) {
                    float *d = dst + (c * KK + t - k0) * nr;
                    const plan *pl = &plans[(t - t0) * nseg];
                    if (sw == 1 && single && full[t - t0]) {
                        const float *xs = xc + pl->off;
                        if (nr == 16)
                            memcpy(d, xs, 16 * sizeof(float));
                        else
                            memcpy(d, xs, (size_t)nr * sizeof(float));
                    } else if (sw == 1 && full[t - t0]) {
                        for (int s = 0; s < nseg; s++) {
                            float *ds = d + segs[s].pos;
                            const float *xs = xc + pl[s].off;
                            copy_run(ds, xs, segs[s].len);
                        }
                    } else if (sw == 2 && full[t - t0]) {
                        for (int s = 0; s < nseg; s++) {
                            float *ds = d + segs[s].pos;
                            const float *xs = xc + pl[s].off;
                            for (int64_t q = 0; q < segs[s].len; q++) ds[q] = xs[2 * q];
                        }
                    } else {
                        for (int s = 0; s < nseg; s++) {
                            float *ds = d + segs[s].pos;
                            const int64_t len = segs[s].len, lo = pl[s].lo, hi = pl[s].hi;
                            const int64_t off = pl[s].off;
                            for (int64_t q = 0; q < lo; q++) ds[q] = 0.0f;
                            for (int64_t q = lo; q < hi; q++) ds[q] = xc[off + q * sw];
                            for (int64_t q = hi; q < len; q++) ds[q] = 0.0f;
                        }
                    }
                }
            }
        }
    }
}

/* The B-panel layout of a dense [C][H*W] image (a 1x1 stride-1 conv's im2col): rows
 * [k0, k0 + kc) of columns [n0, n0 + nc) as nr-wide panels, zero padded. */
static void pack_rows(const void *vctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float *dst) {
    const im2col_ctx *g = (const im2col_ctx *)vctx;
    const int64_t HW = g->H * g->W;
    for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
        const int64_t cols = cuvil_min_i64(nr, nc - j0);
        const float *src = g->x + k0 * HW + n0 + j0;
        if (cols == nr) {
            cuvil_copy_rows(dst, nr, src, HW, kc, nr);
            continue;
        }
        for (int64_t k = 0; k < kc; k++) {
            memcpy(dst + k * nr, src + k * HW, (size_t)cols * sizeof(float));
            for (int64_t c = cols; c < nr; c++) dst[k * nr + c] = 0.0f;
        }
    }
}

#if defined(__AVX2__)
/* An 8 x 8 block: d[i][j] = s[j][i] (+ r[i][j]); r may be d itself (each row of r is read
 * before that row of d is written). */
static inline void transpose8x8(const float *s, int64_t lds, float *d, const float *r, int64_t ldd) {
    __m256 a[8];
    for (int i = 0; i < 8; i++) a[i] = _mm256_loadu_ps(s + i * lds);
    cuvil_transpose8_regs(a);
    for (int i = 0; i < 8; i++) {
        __m256 v = a[i];
        if (r) v = _mm256_add_ps(v, _mm256_loadu_ps(r + i * ldd));
        _mm256_storeu_ps(d + i * ldd, v);
    }
}
#endif

/* A conv's im2col matrix from a channels-last x, with K in tap-major order (k = (kh KW + kw)
 * C + c, the order cuvil_f32_conv2d_pack gives the weights of such a conv; a 1x1 conv's is x
 * itself): rows [k0, k0 + kc) of pixels [n0, n0 + nc) as the swapped GEMM's A panels of nr
 * pixels, pixel-minor. Within one tap a pixel's channels are contiguous, so a run of k in one
 * tap is 8 x 8 register transposes from one pointer per pixel (its tap's input pixel), or
 * zeros where the tap falls in the padding: nothing is copied into a padded image first. */
static void pack_im2col_nhwc(const void *vctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float *dst) {
    const im2col_ctx *g = (const im2col_ctx *)vctx;
    const int64_t C = g->C;
    for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
        const int64_t rows = cuvil_min_i64(nr, nc - j0);
        int64_t oh[MAX_NR], ow[MAX_NR];
        for (int64_t i = 0; i < rows; i++) {
            oh[i] = (n0 + j0 + i) / g->OW;
            ow[i] = (n0 + j0 + i) % g->OW;
        }
        for (int64_t kk = 0; kk < kc;) {
            const int64_t t = (k0 + kk) / C, c0 = (k0 + kk) % C, len = cuvil_min_i64(C - c0, kc - kk);
            const int64_t kh = t / g->KW, kw = t % g->KW;
            const float *src[MAX_NR]; /* pixel i's channels c0.. at tap t, NULL in the padding */
            for (int64_t i = 0; i < cuvil_max_i64(nr, 8); i++) {
                src[i] = NULL;
                if (i >= rows) continue;
                const int64_t ih = oh[i] * g->sh - g->pt + kh * g->dh, iw = ow[i] * g->sw - g->pl + kw * g->dw;
                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W) src[i] = g->x + (ih * g->W + iw) * C + c0;
            }
            float *d = dst + kk * nr;
            int64_t k = 0;
#if defined(__AVX2__)
            if (nr <= 8) {
                for (; k + 8 <= len; k += 8) {
                    __m256 a[8];
                    for (int i = 0; i < 8; i++) a[i] = src[i] ? _mm256_loadu_ps(src[i] + k) : _mm256_setzero_ps();
                    cuvil_transpose8_regs(a);
                    /* step k + i's nr rows: the first nr lanes of a[i]. Whole-vector stores in
                     * order, each overwriting what the next one writes again, but the last one
                     * of the panel (a masked store, slow on AMD's AVX2, for that one only) */
                    for (int i = 0; i < 7; i++) _mm256_storeu_ps(d + (k + i) * nr, a[i]);
                    if (nr == 8 || kk + k + 8 < kc)
                        _mm256_storeu_ps(d + (k + 7) * nr, a[7]);
                    else
                        _mm256_maskstore_ps(d + (k + 7) * nr,
                                            _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                            a[7]);
                }
            }
#endif
            for (; k < len; k++)
                for (int64_t i = 0; i < nr; i++) d[k * nr + i] = src[i] ? src[i][k] : 0.0f;
            kk += len;
        }
    }
}

/* ===== Depthwise direct loop =========================================================== */
/* (on the calling thread: the callers are a parallel range's tasks; over a whole plane where
 * the plane is contiguous, so the kernel is picked once for it, not once per short row) */
static void act_inplace(const cuvil_act_params *a, float *y, int64_t n) {
    if (a->act != CUVIL_ACT_NONE) cuvil_f32_act_rows(a, y, (size_t)n, 1, (size_t)n);
}

/* Bottom/right zero padding implied by the output size (never negative). */
static int64_t pad_end(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pb) {
    const int64_t e = (out - 1) * s + (k - 1) * d + 1 - in - pb;
    return e > 0 ? e : 0;
}

/* One output row of a KxK, stride S, undilated depthwise conv reading zero-padded input rows
 * (so no column is a border case). K and S are constants at each call site: the tap loops
 * unroll and the loop over output columns vectorises with every partial sum in registers. */
static inline __attribute__((always_inline)) void dw_row_fixed(
    const float *const *rows, const float *wk, float b, const float *rr, float *yr, int64_t OW,
    float lo, float hi, const int K, const int S) {
    const float *r[5];
    float wl[25];
    for (int kh = 0; kh < K; kh++) r[kh] = rows[kh];
    for (int t = 0; t < K * K; t++) wl[t] = wk[t];
    /* lo/hi: Relu and Clip fused (+-inf otherwise); NaN passes through as in cuvil_f32_act1 */
    if (rr) {
        for (int64_t ow = 0; ow < OW; ow++) {
            const int64_t base = ow * S;
            float acc = b;
            for (int kh = 0; kh < K; kh++)
                for (int kw = 0; kw < K; kw++) acc = CUVIL_FMA(wl[kh * K + kw], r[kh][base + kw], acc);
            acc += rr[ow];
            acc = acc < lo ? lo : acc;
            yr[ow] = acc > hi ? hi : acc;
        }
    } else {
        for (int64_t ow = 0; ow < OW; ow++) {
            const int64_t base = ow * S;
            float acc = b;
            for (int kh = 0; kh < K; kh++)
                for (int kw = 0; kw < K; kw++) acc = CUVIL_FMA(wl[kh * K + kw], r[kh][base + kw], acc);
            acc = acc < lo ? lo : acc;
            yr[ow] = acc > hi ? hi : acc;
        }
    }
}

/* One function per (K, S), so each gets its own register allocation (the weights stay in
 * registers instead of being spilled, as they are when all four share one body). */
#define DW_ROW(K, S)                                                                           \
    static __attribute__((noinline)) void dw_row_##K##x##K##s##S(                             \
        const float *const *rows, const float *wk, float b, const float *rr, float *yr,       \
        int64_t OW, float lo, float hi) {                                                      \
        dw_row_fixed(rows, wk, b, rr, yr, OW, lo, hi, K, S);                                   \
    }
DW_ROW(3, 1)
DW_ROW(3, 2)
DW_ROW(5, 1)
DW_ROW(5, 2)
#undef DW_ROW

/* 7x7: 49 taps a column are more than the compiler vectorises in one loop (it left them
 * scalar), so the row is summed in two passes over its output, input rows 0-3 then 4-6, each
 * pass vectorised over the columns with its 28 or 21 taps unrolled. out[ow] = b + in[ow] (in
 * may be NULL) + the taps. */
static inline __attribute__((always_inline)) void dw_part7(const float *const *r, const float *wk, const int nk,
                                                           const float *in, float b, float *out, int64_t OW,
                                                           const int S) {
    float wl[28];
    for (int t = 0; t < nk * 7; t++) wl[t] = wk[t];
    for (int64_t ow = 0; ow < OW; ow++) {
        const int64_t base = ow * S;
        float acc = in ? b + in[ow] : b;
        for (int kh = 0; kh < nk; kh++)
            for (int kw = 0; kw < 7; kw++) acc = CUVIL_FMA(wl[kh * 7 + kw], r[kh][base + kw], acc);
        out[ow] = acc;
    }
}

#define DW_PART7(NK, S)                                                                              \
    static __attribute__((noinline)) void dw_part7_##NK##s##S(const float *const *r, const float *wk, \
                                                               const float *in, float b, float *out,  \
                                                               int64_t OW) {                          \
        dw_part7(r, wk, NK, in, b, out, OW, S);                                                      \
    }
DW_PART7(4, 1)
DW_PART7(3, 1)
DW_PART7(4, 2)
DW_PART7(3, 2)
#undef DW_PART7

/* (the residual rr, which may be yr itself, is read by the first pass, into the starting value) */
static void dw_row_7x7(const float *const *rows, const float *wk, float b, const float *rr, float *yr, int64_t OW,
                       float lo, float hi, int64_t S) {
    if (S == 1) {
        dw_part7_4s1(rows, wk, rr, b, yr, OW);
        dw_part7_3s1(rows + 4, wk + 28, yr, 0.0f, yr, OW);
    } else {
        dw_part7_4s2(rows, wk, rr, b, yr, OW);
        dw_part7_3s2(rows + 4, wk + 28, yr, 0.0f, yr, OW);
    }
    /* lo/hi: Relu and Clip fused (+-inf otherwise); NaN passes through as in cuvil_f32_act1 */
    for (int64_t ow = 0; ow < OW; ow++) {
        const float acc = yr[ow] < lo ? lo : yr[ow];
        yr[ow] = acc > hi ? hi : acc;
    }
}

/* ===== 3x3, 5x5 and 7x7 depthwise with explicit vectors (AVX-512, AVX2) ===================
 * Several output rows at once (4 at stride 1, 2 at stride 2), so that each input row is loaded
 * once for all the output rows it feeds (dwk_rows, below, on the weights). At stride 2 the
 * plane's rows are stored phased (even columns, then odd ones), so that the K taps of a row
 * are K plain loads (splitting them with permutes in
 * registers, for every row that reads them, made 96 x 112 x 112 stride 2 0.28 ms against 0.25
 * on Zen 4). The last vector of a row is masked: loads may run up to DW_SLACK floats past the
 * plane (lanes that are never stored), so the plane has that much zeroed slack. */
#define DW_SLACK 64

#include "dw_simd.h"

/* For each of `rows` rows (source s, W floats apart; destinations ld floats apart):
 * s[2j] to ev[j], s[2j + 1] to od[j], for the W floats of the row (vectorised where the
 * target has the depthwise vectors; the last, partial vector's masks are the same for every
 * row). */
static void split_even_odd(const float *s, int64_t rows, int64_t W, float *ev, float *od, int64_t ld) {
#if defined(DW_SIMD) && DW_SIMD == 16
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const int64_t full = W / 32 * 32, n = W - full; /* floats in the last, partial vector pair */
    const dwm l0 = dw_mask(n), l1 = dw_mask(n > 16 ? n - 16 : 0), me = dw_mask((n + 1) / 2), mo = dw_mask(n / 2);
    for (int64_t r = 0; r < rows; r++, s += W, ev += ld, od += ld) {
        for (int64_t i = 0; i < full; i += 32) {
            const __m512 lo = _mm512_loadu_ps(s + i), hi = _mm512_loadu_ps(s + i + 16);
            _mm512_storeu_ps(ev + i / 2, _mm512_permutex2var_ps(lo, ie, hi));
            _mm512_storeu_ps(od + i / 2, _mm512_permutex2var_ps(lo, io, hi));
        }
        if (n) {
            const __m512 lo = _mm512_maskz_loadu_ps(l0, s + full), hi = _mm512_maskz_loadu_ps(l1, s + full + 16);
            _mm512_mask_storeu_ps(ev + full / 2, me, _mm512_permutex2var_ps(lo, ie, hi));
            _mm512_mask_storeu_ps(od + full / 2, mo, _mm512_permutex2var_ps(lo, io, hi));
        }
    }
#elif defined(DW_SIMD)
    for (int64_t r = 0; r < rows; r++, s += W, ev += ld, od += ld) {
        int64_t i = 0;
        for (; i + 16 <= W; i += 16) {
            const __m256 lo = _mm256_loadu_ps(s + i), hi = _mm256_loadu_ps(s + i + 8);
            /* [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6] */
            _mm256_storeu_ps(ev + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(
                                             _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8)));
            _mm256_storeu_ps(od + i / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(
                                             _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8)));
        }
        for (; i < W; i++) (i & 1 ? od : ev)[i / 2] = s[i];
    }
#else
    for (int64_t r = 0; r < rows; r++, s += W, ev += ld, od += ld)
        for (int64_t i = 0; i < W; i++) (i & 1 ? od : ev)[i / 2] = s[i];
#endif
}

/* Input rows of W floats (consecutive) into padded rows stored phased, ld floats apart: padded
 * column q = pl + iw goes to (q & 1 ? odd : even)[q / 2] (pad_image's phased copy, the
 * stride-2 depthwise plane, the direct convolution's phases); the other positions are left as
 * they are. (One call per plane, not per row, the tail's masks made once: the stride-2
 * depthwise convs of MobileNetV2 alone, one thread, 144 x 56x56 0.107 -> 0.086 ms and 192 x
 * 28x28 0.050 -> 0.031; the model 7.65 -> 7.50 ms, medians of 30 alternating processes.) */
static void copy_rows_phased(const float *s, int64_t rows, int64_t W, int64_t pl, float *even, float *odd,
                             int64_t ld) {
    split_even_odd(s, rows, W, (pl & 1 ? odd : even) + (pl >> 1), ((pl + 1) & 1 ? odd : even) + ((pl + 1) >> 1),
                   ld);
}

#ifdef DW_SIMD
/* AVX-512 broadcasts a 7x7's weights at each use, an operand of the FMA (49 vectors of 64 bytes
 * in the frame made dw7_plane_s2's 4,616 bytes, over the runtime's 4 KB limit; and 96 x 56x56
 * 0.54 -> 0.37 ms); AVX2, which has no broadcast operand, reads them from its frame (0.50
 * against 0.61 ms broadcast). */
#define DW_W_AT_USE(K) (DW_SIMD == 16 && (K) == 7)

/* Output rows [oh0, oh0 + RB) of one channel of a KxK conv (K 3, 5 or 7) from its zero-padded
 * plane (row stride Wp), one vector of columns at a time (the last one masked); the RB
 * accumulators are independent. Each input row is loaded once for every output row it feeds:
 * its K taps are K plain loads (stride 2: the plane's rows are phased, even padded columns
 * then odd ones, so tap kw reads (kw & 1 ? odd : even) + kw / 2). The 9 weights of a 3x3 stay
 * in registers; a 5x5's 25 (and on AVX2 a 7x7's 49) are read from the frame where they do not
 * fit, an operand of the FMA; AVX-512 broadcasts a 7x7's from w (DW_W_AT_USE) (ConvNeXt-Tiny's
 * 96 x 56x56 7x7, AVX2, one thread: 4.0 -> 0.50 ms against the row loop, which the compiler
 * left scalar). Only the last, partial vector of a row is stored masked: a masked store is
 * slow on AMD's AVX2 (32 x 112x112 3x3, one thread, Zen 4: 0.287 -> 0.144 ms unmasked). (Two vectors
 * across, 4 x 2 accumulators, measured slower on Zen 4: 144 x 56 x 56 0.20 against 0.18 ms.) */
static inline __attribute__((always_inline)) void dwk_rows(const float *plane, int64_t Wp, const dwv *wv,
                                                           const float *wf, dwv vb,
                                                           dwv vlo, dwv vhi, const float *res, float *y, int64_t oh0,
                                                           int64_t OW, const int K, const int S, const int RB) {
    for (int64_t c0 = 0; c0 < OW; c0 += DW_SIMD) {
        dwv acc[4];
        for (int r = 0; r < RB; r++) acc[r] = vb;
        for (int ir = 0; ir < (RB - 1) * S + K; ir++) {
            dwv a[7];
            if (S == 1) {
                const float *src = plane + (oh0 + ir) * Wp + c0;
                for (int kw = 0; kw < K; kw++) a[kw] = DW_LOAD(src + kw);
            } else {
                const float *ev = plane + (oh0 * 2 + ir) * Wp + c0, *od = ev + (Wp + 1) / 2;
                for (int kw = 0; kw < K; kw++) a[kw] = DW_LOAD((kw & 1 ? od : ev) + kw / 2);
            }
            for (int r = 0; r < RB; r++) {
                const int kh = ir - r * S;
                if (kh < 0 || kh >= K) continue;
                for (int kw = 0; kw < K; kw++)
                    acc[r] = DW_FMA(DW_W_AT_USE(K) ? DW_SET1(wf[kh * K + kw]) : wv[kh * K + kw], a[kw], acc[r]);
            }
        }
        const int full = c0 + DW_SIMD <= OW;
        const dwm m = dw_mask(OW - c0);
        for (int r = 0; r < RB; r++) {
            const int64_t o = (oh0 + r) * OW + c0;
            dwv v = acc[r];
            if (res) v = DW_ADD(v, full ? DW_LOAD(res + o) : DW_LOADM(res + o, m));
            /* (bound, v): max/min return their second operand when either is NaN, so NaN
             * passes through as in cuvil_f32_act1 */
            v = DW_MIN(vhi, DW_MAX(vlo, v));
            if (full)
                DW_STORE(y + o, v);
            else
                DW_STOREM(y + o, v, m);
        }
    }
}

#define DWK_PLANE(K, S, RB)                                                                                    \
    static __attribute__((noinline)) void dw##K##_plane_s##S(const float *plane, int64_t Wp, const float *w, float b, \
                                                             const float *res, float *y, int64_t OH, int64_t OW,    \
                                                             float lo, float hi) {                                  \
        dwv wv[DW_W_AT_USE(K) ? 1 : K * K];                                                                    \
        for (int t = 0; t < (DW_W_AT_USE(K) ? 0 : K * K); t++) wv[t] = DW_SET1(w[t]);                           \
        const dwv vb = DW_SET1(b), vlo = DW_SET1(lo), vhi = DW_SET1(hi);                                       \
        int64_t oh = 0;                                                                                        \
        for (; oh + RB <= OH; oh += RB) dwk_rows(plane, Wp, wv, w, vb, vlo, vhi, res, y, oh, OW, K, S, RB);       \
        for (; oh < OH; oh++) dwk_rows(plane, Wp, wv, w, vb, vlo, vhi, res, y, oh, OW, K, S, 1);                  \
    }
DWK_PLANE(3, 1, 4)
/* (Stride 2 with 4 rows measured slower, 144 x 56x56 -> 28x28 0.105 -> 0.116 ms, and so did
 * prefetching the next channel's input while computing this one, 0.105 -> 0.108-0.114. Of the
 * 0.104 ms the phased copy takes 0.061 and the taps 0.043: skipping either, one thread, alone.) */
DWK_PLANE(3, 2, 2)
DWK_PLANE(5, 1, 4)
DWK_PLANE(5, 2, 2)
DWK_PLANE(7, 1, 4)
DWK_PLANE(7, 2, 2)
#undef DWK_PLANE
#undef DW_W_AT_USE
#endif /* DW_SIMD */

static int dw_is_fixed(const cuvil_conv2d_params *p) {
    return p->KH == p->KW && (p->KH == 3 || p->KH == 5 || p->KH == 7) && p->stride_h == p->stride_w &&
           (p->stride_w == 1 || p->stride_w == 2) && p->dil_h == 1 && p->dil_w == 1;
}

int cuvil_conv2d_dw_vectorized(const cuvil_conv2d_params *p) { return dw_is_fixed(p) || p->stride_w == 1; }

static void dw_plane_dims(const cuvil_conv2d_params *p, int64_t *Hp, int64_t *Wp) {
    *Hp = p->pad_t + p->H + pad_end(p->H, p->OH, p->KH, p->stride_h, 1, p->pad_t);
    *Wp = p->pad_l + p->W + pad_end(p->W, p->OW, p->KW, p->stride_w, 1, p->pad_l);
}

/* The fixed 3x3/5x5/7x7 path for output channels [q0, q1) of all N*M: each input channel is first
 * copied into a zero-padded plane. */
static void dw_fixed(const cuvil_conv2d_params *p, const float *x, int64_t xcs, const float *w,
                     const float *bias, const float *residual, float *y, float *plane, int64_t q0,
                     int64_t q1, int64_t oh0, int64_t oh1) {
    const int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, K = p->KH, S = p->stride_w;
    const int64_t mult = p->M / p->group, pt = p->pad_t, pl = p->pad_l;
    int64_t Hp, Wp;
    dw_plane_dims(p, &Hp, &Wp);
    int64_t cur = -1;
    memset(plane, 0, (size_t)(Hp * Wp + DW_SLACK) * sizeof(float)); /* borders (and slack) stay zero */
#ifdef DW_SIMD
    const int phased = S == 2; /* dwK_plane_s2 (K 3, 5, 7: all dw_fixed takes) reads rows split into even and odd columns */
#else
    const int phased = 0;
#endif
    float *flat = (float *)((char *)plane + CUVIL_ALIGN_UP((size_t)(Hp * Wp + DW_SLACK) * sizeof(float), 64));
    const int fused = p->act.act == CUVIL_ACT_NONE || p->act.act == CUVIL_ACT_RELU ||
                      p->act.act == CUVIL_ACT_CLIP;
    const float lo = p->act.act == CUVIL_ACT_RELU ? 0.0f
                     : p->act.act == CUVIL_ACT_CLIP ? p->act.alpha : -INFINITY;
    const float hi = p->act.act == CUVIL_ACT_CLIP ? p->act.beta : INFINITY;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n = q / p->M, m = q % p->M;
        const int64_t ci = n * p->C + m / mult;
        if (ci != cur) {
            /* (filling the plane a few rows ahead of the computed rows, to read them from L1,
             * measured slower: 144 x 56 x 56 stride 1 0.180 -> 0.207 ms) */
            /* the input rows output rows [oh0, oh1) read */
            const int64_t h0 = cuvil_max_i64(0, oh0 * S - pt), h1 = cuvil_min_i64(H, (oh1 - 1) * S - pt + K);
            const float *xc = x + ci * xcs + h0 * W;
            float *pr = plane + (pt + h0) * Wp;
            if (h1 <= h0) {
            } else if (phased) {
                copy_rows_phased(xc, h1 - h0, W, pl, pr, pr + (Wp + 1) / 2, Wp);
            } else {
                for (int64_t h = 0; h < h1 - h0; h++) memcpy(pr + h * Wp + pl, xc + h * W, (size_t)W * sizeof(float));
            }
            cur = ci;
        }
        const float *wm = w + m * K * K;
        float *ym = y + (n * p->M + m) * OH * OW;
        const float *rm = residual ? residual + (n * p->M + m) * OH * OW : NULL;
        const float b = bias ? bias[m] : 0.0f;
#ifdef DW_SIMD
        if (S == 2 || OW >= 16) {
            /* rows [oh0, oh1): the plane from the first one's top row, y and the residual from it */
            const float *pb = plane + oh0 * S * Wp, *rb = rm ? rm + oh0 * OW : NULL;
            float *yb = ym + oh0 * OW;
            const int64_t nh = oh1 - oh0;
            if (K == 3 && S == 1)
                dw3_plane_s1(pb, Wp, wm, b, rb, yb, nh, OW, lo, hi);
            else if (K == 3)
                dw3_plane_s2(pb, Wp, wm, b, rb, yb, nh, OW, lo, hi);
            else if (K == 5 && S == 1)
                dw5_plane_s1(pb, Wp, wm, b, rb, yb, nh, OW, lo, hi);
            else if (K == 5)
                dw5_plane_s2(pb, Wp, wm, b, rb, yb, nh, OW, lo, hi);
            else if (S == 1)
                dw7_plane_s1(pb, Wp, wm, b, rb, yb, nh, OW, lo, hi);
            else
                dw7_plane_s2(pb, Wp, wm, b, rb, yb, nh, OW, lo, hi);
            if (!fused) act_inplace(&p->act, yb, nh * OW);
            continue;
        }
#endif
        if (S == 1 && !rm && OW < 32 && oh0 == 0 && oh1 == OH) {
            /* stride 1: the whole plane as one row (output i at plane i + kh*Wp + kw), so that
             * short rows (14, 7) still fill vectors; the Wp - OW columns past each row's end
             * are computed too and dropped in the copy out */
            const float *rows[7];
            for (int64_t kh = 0; kh < K; kh++) rows[kh] = plane + kh * Wp;
            const int64_t len = (OH - 1) * Wp + OW;
            if (K == 3)
                dw_row_3x3s1(rows, wm, b, NULL, flat, len, lo, hi);
            else if (K == 5)
                dw_row_5x5s1(rows, wm, b, NULL, flat, len, lo, hi);
            else
                dw_row_7x7(rows, wm, b, NULL, flat, len, lo, hi, 1);
            for (int64_t oh = 0; oh < OH; oh++) memcpy(ym + oh * OW, flat + oh * Wp, (size_t)OW * sizeof(float));
            if (!fused) act_inplace(&p->act, ym, OH * OW);
            continue;
        }
        for (int64_t oh = oh0; oh < oh1; oh++) {
            const float *rows[7];
            for (int64_t kh = 0; kh < K; kh++) rows[kh] = plane + (oh * S + kh) * Wp;
            float *yr = ym + oh * OW;
            const float *rr = rm ? rm + oh * OW : NULL;
            if (K == 3 && S == 1)
                dw_row_3x3s1(rows, wm, b, rr, yr, OW, lo, hi);
            else if (K == 3)
                dw_row_3x3s2(rows, wm, b, rr, yr, OW, lo, hi);
            else if (K == 5 && S == 1)
                dw_row_5x5s1(rows, wm, b, rr, yr, OW, lo, hi);
            else if (K == 5)
                dw_row_5x5s2(rows, wm, b, rr, yr, OW, lo, hi);
            else
                dw_row_7x7(rows, wm, b, rr, yr, OW, lo, hi, S);
        }
        if (!fused) act_inplace(&p->act, ym + oh0 * OW, (oh1 - oh0) * OW);
    }
}

/* ===== Small planes: 8 channels at a time ================================================
 * On a 14 x 14 or 7 x 7 map a row is shorter than a vector, and per-channel work (copies,
 * calls, masked tails) costs more than the taps (960 channels at 7 x 7, one thread: 0.059 ms
 * against ORT's 0.027). Instead 8 channels are transposed, 8 x 8 in registers, into one
 * zero-padded tile of pixels whose 8 lanes are the channels; every tap is then one full-width
 * FMA whatever the map's width, and the output is transposed back (0.030 ms). */
#if defined(__AVX2__) && defined(__FMA__)
#define DW_BLOCKED8 1
#else
#define DW_BLOCKED8 0
#endif

/* The shapes it takes; their scratch is counted on every target (the compiler sizes scratch
 * with the portable runtime). */
static int dw_blocked(const cuvil_conv2d_params *p) {
    int64_t Hp, Wp;
    dw_plane_dims(p, &Hp, &Wp);
    /* strided: only when the output is at most 8 wide (14 -> 7: 0.054 -> 0.039 ms one
     * thread, 576 channels); at 28 -> 14 transposing 4 input pixels per output cost more
     * than it saved (192 channels: 0.035 -> 0.051 ms) */
    return p->M == p->C && p->dil_h == 1 && p->dil_w == 1 && p->OW < 16 && Hp * Wp <= 1024 &&
           p->KH * p->KW <= 49 && ((p->stride_h == 1 && p->stride_w == 1) || p->OW <= 8);
}

/* Floats of scratch: the tile, the output pixels, one 8 x 8 block. */
static size_t dw_blocked_floats(const cuvil_conv2d_params *p) {
    int64_t Hp, Wp;
    dw_plane_dims(p, &Hp, &Wp);
    return (size_t)(Hp * Wp * 8 + p->OH * p->OW * 8 + 64);
}

#if DW_BLOCKED8

/* Channels [c, c + 8) of image n (all inside it); tile's borders are zero. */
static void dw_block8(const cuvil_conv2d_params *p, const float *x, int64_t xcs, const float *w, const float *bias,
                      const float *residual, float *y, float *tile, int64_t n, int64_t c) {
    const int64_t H = p->H, W = p->W, HW = H * W, OH = p->OH, OW = p->OW, OP = OH * OW;
    const int64_t KH = p->KH, KW = p->KW, sh = p->stride_h, sw = p->stride_w, pt = p->pad_t, pl = p->pad_l;
    int64_t Hp, Wp;
    dw_plane_dims(p, &Hp, &Wp);
    float *out = tile + Hp * Wp * 8, *blk = out + OP * 8;
    const float *xc = x + (n * p->C + c) * xcs;
    /* in: pixel q's 8 channels to tile[(pt + q / W) * Wp + pl + q % W] */
    int64_t q = 0;
    float *dst = tile + (pt * Wp + pl) * 8;   /* pixel q's place in the tile; its column ww */
    for (int64_t ww = 0; q + 8 <= HW; q += 8) {
        transpose8x8(xc + q, xcs, blk, NULL, 8);
        for (int i = 0; i < 8; i++) {
            _mm256_storeu_ps(dst, _mm256_loadu_ps(blk + i * 8));
            dst += 8;
            if (++ww == W) {   /* the next row (no division a pixel) */
                ww = 0;
                dst += (Wp - W) * 8;
            }
        }
    }
    for (; q < HW; q++)
        for (int l = 0; l < 8; l++) tile[((pt + q / W) * Wp + pl + q % W) * 8 + l] = xc[l * xcs + q];
    /* taps: wv[t] holds tap t of the 8 channels */
    __m256 wv[49];
    for (int64_t t = 0; t < KH * KW; t++) {
        float tw[8];
        for (int l = 0; l < 8; l++) tw[l] = w[(c + l) * KH * KW + t];
        wv[t] = _mm256_loadu_ps(tw);
    }
    float tb[8];
    for (int l = 0; l < 8; l++) tb[l] = bias ? bias[c + l] : 0.0f;
    const __m256 vb = _mm256_loadu_ps(tb);
    /* Relu/Clip before the transpose back when there is no residual to add first */
    const int clamp = !residual && (p->act.act == CUVIL_ACT_RELU || p->act.act == CUVIL_ACT_CLIP);
    const __m256 vlo = _mm256_set1_ps(p->act.act == CUVIL_ACT_RELU ? 0.0f : p->act.alpha);
    const __m256 vhi = _mm256_set1_ps(p->act.act == CUVIL_ACT_RELU ? INFINITY : p->act.beta);
    for (int64_t oh = 0; oh < OH; oh++) {
        int64_t ow = 0;
        /* 4 pixels of a row at a time: each tap's weights loaded once for 4 independent sums
         * (one sum a pixel waited on its own chain of KH*KW dependent FMAs) */
        for (; ow + 4 <= OW; ow += 4) {
            const float *src = tile + (oh * sh * Wp + ow * sw) * 8;
            const int64_t ps = sw * 8;
            __m256 a0 = vb, a1 = vb, a2 = vb, a3 = vb;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    const __m256 w = wv[kh * KW + kw];
                    const float *x = src + (kh * Wp + kw) * 8;
                    a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x), a0);
                    a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + ps), a1);
                    a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + 2 * ps), a2);
                    a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + 3 * ps), a3);
                }
            if (clamp) {
                a0 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, a0));
                a1 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, a1));
                a2 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, a2));
                a3 = _mm256_min_ps(vhi, _mm256_max_ps(vlo, a3));
            }
            float *o = out + (oh * OW + ow) * 8;
            _mm256_storeu_ps(o, a0);
            _mm256_storeu_ps(o + 8, a1);
            _mm256_storeu_ps(o + 16, a2);
            _mm256_storeu_ps(o + 24, a3);
        }
        for (; ow < OW; ow++) {
            const float *src = tile + (oh * sh * Wp + ow * sw) * 8;
            __m256 acc = vb;
            if (KH == 3 && KW == 3) {
                for (int kh = 0; kh < 3; kh++)
                    for (int kw = 0; kw < 3; kw++)
                        acc = _mm256_fmadd_ps(wv[kh * 3 + kw], _mm256_loadu_ps(src + (kh * Wp + kw) * 8), acc);
            } else {
                for (int64_t kh = 0; kh < KH; kh++)
                    for (int64_t kw = 0; kw < KW; kw++)
                        acc = _mm256_fmadd_ps(wv[kh * KW + kw], _mm256_loadu_ps(src + (kh * Wp + kw) * 8), acc);
            }
            /* (bound, v): NaN passes through, as in cuvil_f32_act1 */
            if (clamp) acc = _mm256_min_ps(vhi, _mm256_max_ps(vlo, acc));
            _mm256_storeu_ps(out + (oh * OW + ow) * 8, acc);
        }
    }
    /* out: back to 8 planes (+ residual, which may be y itself) */
    float *yc = y + (n * p->M + c) * OP;
    const float *rc = residual ? residual + (n * p->M + c) * OP : NULL;
    for (q = 0; q + 8 <= OP; q += 8) transpose8x8(out + q * 8, 8, yc + q, rc ? rc + q : NULL, OP);
    for (; q < OP; q++)
        for (int l = 0; l < 8; l++) yc[l * OP + q] = out[q * 8 + l] + (rc ? rc[l * OP + q] : 0.0f);
    if (!clamp) act_inplace(&p->act, yc, 8 * OP);   /* (the 8 planes are adjacent) */
}
#endif

/* Scratch: an accumulator row of OW floats, then (fixed path) the padded input plane and the
 * flat output; these bytes, then (small planes) the 8-channel tile. */
static size_t dw_row_plane_bytes(const cuvil_conv2d_params *p) {
    size_t n = CUVIL_ALIGN_UP((size_t)p->OW * sizeof(float), 64);
    if (dw_is_fixed(p)) {
        int64_t Hp, Wp;
        dw_plane_dims(p, &Hp, &Wp);
        n += 2 * CUVIL_ALIGN_UP((size_t)(Hp * Wp + DW_SLACK) * sizeof(float), 64);
    }
    return n;
}

static size_t dw_scratch_size(const cuvil_conv2d_params *p) {
    size_t n = dw_row_plane_bytes(p);
    if (dw_blocked(p)) n += CUVIL_ALIGN_UP(dw_blocked_floats(p) * sizeof(float), 64);
    return n;
}

/* dw_fixed's zero-padded plane in a thread's scratch: after the row of OW floats that the
 * generic loop keeps there. */
static float *dw_plane_after_row(float *row, int64_t OW) {
    return (float *)((char *)row + CUVIL_ALIGN_UP((size_t)OW * sizeof(float), 64));
}

/* Output channels [q0, q1) of all N*M, one at a time; `row` is one thread's scratch. */
static void dw_channels(const cuvil_conv2d_params *p, const float *x, int64_t xcs, const float *w, const float *bias,
                        const float *residual, float *y, float *row, int64_t q0, int64_t q1) {
    const int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, KH = p->KH, KW = p->KW;
    const int64_t sh = p->stride_h, sw = p->stride_w, dh = p->dil_h, dw = p->dil_w;
    const int64_t mult = p->M / p->group; /* output channels per input channel */
    if (dw_is_fixed(p)) {
        dw_fixed(p, x, xcs, w, bias, residual, y, dw_plane_after_row(row, OW), q0, q1, 0, OH);
        return;
    }
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n = q / p->M, m = q % p->M;
        {
            const float *xc = x + (n * p->C + m / mult) * xcs;
            const float *wm = w + m * KH * KW;
            float *ym = y + (n * p->M + m) * OH * OW;
            const float *rm = residual ? residual + (n * p->M + m) * OH * OW : NULL;
            const float b = bias ? bias[m] : 0.0f;
            for (int64_t oh = 0; oh < OH; oh++) {
                for (int64_t ow = 0; ow < OW; ow++) row[ow] = b;
                for (int64_t kh = 0; kh < KH; kh++) {
                    const int64_t ih = oh * sh - p->pad_t + kh * dh;
                    if (ih < 0 || ih >= H) continue;
                    const float *xr = xc + ih * W;
                    for (int64_t kw = 0; kw < KW; kw++) {
                        const float wv = wm[kh * KW + kw];
                        const int64_t off = kw * dw - p->pad_l;
                        int64_t lo, hi;
                        clip_cols(off, sw, OW, W, &lo, &hi);
                        if (sw == 1) {
                            for (int64_t ow = lo; ow < hi; ow++) row[ow] += wv * xr[ow + off];
                        } else if (sw == 2) {
                            for (int64_t ow = lo; ow < hi; ow++) row[ow] += wv * xr[2 * ow + off];
                        } else {
                            for (int64_t ow = lo; ow < hi; ow++) row[ow] += wv * xr[ow * sw + off];
                        }
                    }
                }
                float *yr = ym + oh * OW;
                if (rm) {
                    const float *rr = rm + oh * OW;
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = row[ow] + rr[ow];
                } else {
                    memcpy(yr, row, (size_t)OW * sizeof(float));
                }
            }
            act_inplace(&p->act, ym, OH * OW);
        }
    }
}

/* Output channels [q0, q1) of all N*M: 8 at a time on small planes, the rest one by one. */
static void dw_range(const cuvil_conv2d_params *p, const float *x, int64_t xcs, const float *w, const float *bias,
                     const float *residual, float *y, float *row, int64_t q0, int64_t q1) {
#if DW_BLOCKED8
    if (dw_blocked(p)) {
        int64_t Hp, Wp;
        dw_plane_dims(p, &Hp, &Wp);
        float *tile = (float *)((char *)row + dw_row_plane_bytes(p));
        memset(tile, 0, (size_t)(Hp * Wp * 8) * sizeof(float)); /* the borders stay zero */
        for (int64_t q = q0; q < q1;) {
            const int64_t m = q % p->M;
            if (m + 8 <= p->M && q + 8 <= q1) {
                dw_block8(p, x, xcs, w, bias, residual, y, tile, q / p->M, m);
                q += 8;
                continue;
            }
            /* fewer than 8 left in this image or this range */
            const int64_t end = m + 8 > p->M ? cuvil_min_i64(q1, q + (p->M - m)) : q1;
            dw_channels(p, x, xcs, w, bias, residual, y, row, q, end);
            q = end;
        }
        return;
    }
#endif
    dw_channels(p, x, xcs, w, bias, residual, y, row, q0, q1);
}

typedef struct dw_split {
    const cuvil_conv2d_params *p;
    const float *x, *w, *bias, *residual;
    float *y, *scratch;
    int64_t per;
} dw_split;

static void dw_task(void *vctx, int64_t t, int tid) {
    const dw_split *s = (const dw_split *)vctx;
    const int64_t total = s->p->N * s->p->M, q0 = t * s->per;
    dw_range(s->p, s->x, s->p->H * s->p->W, s->w, s->bias, s->residual, s->y, (float *)cuvil_thread_scratch(s->scratch, tid), q0,
             cuvil_min_i64(total, q0 + s->per));
}

#ifdef DW_SIMD
/* Task t of the row split: output rows [OH t / T, OH (t + 1) / T) of every channel. */
static void dw_rows_task(void *vctx, int64_t t, int tid) {
    const dw_split *s = (const dw_split *)vctx;
    const cuvil_conv2d_params *p = s->p;
    const int64_t T = s->per, oh0 = p->OH * t / T, oh1 = p->OH * (t + 1) / T;
    float *row = (float *)cuvil_thread_scratch(s->scratch, tid);
    if (oh1 > oh0)
        dw_fixed(p, s->x, p->H * p->W, s->w, s->bias, s->residual, s->y, dw_plane_after_row(row, p->OW), 0, p->N * p->M,
                 oh0, oh1);
}
#endif

void cuvil_f32_dwconv2d(const cuvil_conv2d_params *p, const float *x, const float *w,
                        const float *bias, const float *residual, float *y, float *row) {
    const int64_t total = p->N * p->M;
    const int threads = cuvil_threads();
    if (threads <= 1 || total < 2 || p->OH * p->OW * p->KH * p->KW * total < 100000) {
        dw_range(p, x, p->H * p->W, w, bias, residual, y, row, 0, total);
        return;
    }
#ifdef DW_SIMD
    /* Large planes of the vector path (80x80 and up): the threads split the rows of every
     * channel, as the stem and the 1x1 convs before and after them split their pixels, so that
     * each reads what its core wrote (by channels, each read half its input from the other
     * core's cache). MobileNetV3, AVX2, two threads, bench/profile_layers.py: 16 x 112x112 3x3
     * 0.074 -> 0.058 ms; 72 x 56x56 3x3 even (0.058 -> 0.061); 120 x 28x28 5x5, whose input
     * comes channels first from a transposing copy that splits the channels, 0.056 -> 0.077,
     * so smaller planes keep the channels' split. */
    if (dw_is_fixed(p) && (p->stride_w == 2 || p->OW >= 16) && !(DW_BLOCKED8 && dw_blocked(p)) &&
        p->H * p->W >= 6400 && p->OH >= 4 * (int64_t)threads) {
        dw_split s = {p, x, w, bias, residual, y, row, threads};
        cuvil_parallel_for(threads, dw_rows_task, &s);
        return;
    }
#endif
    /* a few tasks per thread: channels cost the same, but threads may not start together */
    const int64_t tasks = cuvil_min_i64(total, 4 * (int64_t)threads);
    int64_t per = (total + tasks - 1) / tasks;
    if (DW_BLOCKED8 && dw_blocked(p)) per = CUVIL_ALIGN_UP(per, 8); /* whole blocks of 8 channels */
    dw_split s = {p, x, w, bias, residual, y, row, per};
    cuvil_parallel_for((total + s.per - 1) / s.per, dw_task, &s);
}

void cuvil_f32_dwconv2d_serial(const cuvil_conv2d_params *p, const float *x, int64_t xcs, const float *w,
                               const float *bias, const float *residual, float *y, float *row) {
    dw_range(p, x, xcs, w, bias, residual, y, row, 0, p->N * p->M);
}

/* ===== Dispatch ======================================================================== */
/* One input channel per group runs the direct loop on the weights as they are (or, channels
 * last, tap-major), unless the compiler chose another algorithm for it and packed the weights
 * for that (algo != 0, or algo 0 with packed_mr > 0 in NCHW: the GEMM). It does so where that
 * is faster: one input channel with many outputs (a learned spectrogram: 1 -> 257 channels,
 * 512 taps, stride 160) or a large channel multiplier (src/lower/conv.c). */
static int is_depthwise(const cuvil_conv2d_params *p) {
    if (p->group != p->C || p->algo != 0) return 0;
    return p->packed_mr == 0 || p->layout != 0;
}

static int is_pointwise(const cuvil_conv2d_params *p) {
    return p->KH == 1 && p->KW == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_t == 0 &&
           p->pad_l == 0 && p->OH == p->H && p->OW == p->W;
}

/* Explicit zero padding: the im2col packer then never clips (whole-run copies only). (A
 * channels-last x is packed by pack_im2col_nhwc, which reads zeros for the padding.) */
static int use_padded(const cuvil_conv2d_params *p) {
    return !is_pointwise(p) && !(p->layout & CUVIL_CONV_X_NHWC) &&
           (p->pad_t > 0 || p->pad_l > 0 ||
            pad_end(p->H, p->OH, p->KH, p->stride_h, p->dil_h, p->pad_t) > 0 ||
            pad_end(p->W, p->OW, p->KW, p->stride_w, p->dil_w, p->pad_l) > 0);
}

/* Height and width of the zero-padded copy of the input. */
static void padded_dims(const cuvil_conv2d_params *p, int64_t *Hp, int64_t *Wp) {
    *Hp = p->pad_t + p->H + pad_end(p->H, p->OH, p->KH, p->stride_h, p->dil_h, p->pad_t);
    *Wp = p->pad_l + p->W + pad_end(p->W, p->OW, p->KW, p->stride_w, p->dil_w, p->pad_l);
}

typedef struct pad_job {
    const cuvil_conv2d_params *p;
    const float *xn;
    float *xpad;
    int64_t Hp, Wp;
    int phased;
} pad_job;

/* Padded rows [r0, r1) of the copy, counted over all channels (channel r / Hp, row r % Hp). */
static void pad_rows(void *vctx, int64_t r0, int64_t r1, int tid) {
    const pad_job *j = vctx;
    const cuvil_conv2d_params *p = j->p;
    const int64_t Hp = j->Hp, Wp = j->Wp, We = (Wp + 1) / 2;
    (void)tid;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t c = r / Hp, h = r % Hp - p->pad_t;
        float *dr = j->xpad + r * Wp;
        if (h < 0 || h >= p->H) {
            memset(dr, 0, (size_t)Wp * sizeof(float));
            continue;
        }
        const float *sr = j->xn + (c * p->H + h) * p->W;
        if (j->phased) {
            /* padded column q goes to (q & 1) * We + q / 2: zeros, then the input */
            memset(dr, 0, (size_t)Wp * sizeof(float));
            copy_rows_phased(sr, 1, p->W, p->pad_l, dr, dr + We, Wp);
            continue;
        }
        memset(dr, 0, (size_t)p->pad_l * sizeof(float));
        memcpy(dr + p->pad_l, sr, (size_t)p->W * sizeof(float));
        memset(dr + p->pad_l + p->W, 0, (size_t)(Wp - p->pad_l - p->W) * sizeof(float));
    }
}

/* One image, all channels, into its zero-padded copy (Hp x Wp per channel); phased: each
 * padded row stored as its even columns, then its odd ones (for stride 2 across). The rows go
 * over the threads from 32K floats: copied on the calling thread alone, MobileNetV3's stem
 * (3 x 226x226, phased) took 0.248 ms on one thread and 0.201 on two. */
static void pad_image(const cuvil_conv2d_params *p, const float *xn, float *xpad, int64_t Hp, int64_t Wp, int phased) {
    pad_job j = {p, xn, xpad, Hp, Wp, phased};
    cuvil_parallel_range(p->C * Hp, cuvil_max_i64(1, 16384 / cuvil_max_i64(Wp, 1)), 1, pad_rows, &j);
}

/* Stride 2 across on a padded image: its copy is deinterleaved (pad_image, phased). */
static int use_phased(const cuvil_conv2d_params *p) { return use_padded(p) && p->stride_w == 2; }

static size_t gemm_scratch(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    return CUVIL_ALIGN_UP(cuvil_gemm_job_scratch_size(Mg, p->OH * p->OW, Cg * p->KH * p->KW, b),
                          64);
}

static int is_winograd(const cuvil_conv2d_params *p) {
    return (p->algo == CUVIL_CONV_WINOGRAD || p->algo == CUVIL_CONV_WINOGRAD_T || p->algo == CUVIL_CONV_WINOGRAD2_T) &&
           p->packed_mr > 0 &&
           cuvil_conv2d_winograd_applies(p);
}

static int is_gemm_t(const cuvil_conv2d_params *p) {
    return p->algo == CUVIL_CONV_GEMM_T && p->packed_mr > 0 && !is_depthwise(p);
}

/* A pixels-as-rows GEMM of several taps on a channels-last x: its im2col is packed with K
 * tap-major (pack_im2col_nhwc), and so are its prepacked weights. */
static int gemm_t_taps_major(const cuvil_conv2d_params *p) {
    return is_gemm_t(p) && p->group == 1 && (p->layout & CUVIL_CONV_X_NHWC) && p->KH * p->KW > 1;
}

static int64_t ks_parts(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b_default, int64_t *kb);

/* The direct convolution on a channels-last copy (CUVIL_CONV_DIRECT_T, below): its weights
 * are packed as a pixels-as-rows GEMM's of a channels-last x, K tap-major. */
static int is_direct_t(const cuvil_conv2d_params *p);
static int is_grouped(const cuvil_conv2d_params *p) {
    return p->algo == CUVIL_CONV_GROUPED && p->packed_mr == CUVIL_GCONV_LANES && cuvil_conv2d_grouped_applies(p);
}
static size_t direct_t_scratch(const cuvil_conv2d_params *p);
static void conv2d_direct_t(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                            const float *residual, float *y, void *scratch);

/* A 1x1 stride-1 conv on a channels-last x and y (either lowering: the pixels-as-rows GEMM or
 * direct_t) is the GEMM y = x W with x's rows as they lie and the weights packed ahead as its B:
 * on AVX-512 it runs as one (cuvil_f32_gemm_run), on its A-in-place path whatever rows a thread
 * gets (gemm.c: the pixels 12 at a time, the weights read in place, no scratch, so the choice
 * here at run time needs none that the compiler sized), the residual as the product's initial
 * value, the bias and activation in its epilogue (SiLU and the others the store does not apply:
 * once a band of rows is done). Where 12-row tiles waste few rows (not 7x7 maps). Alternating
 * cuvil-run turns, AVX-512: ResNet-50 one thread 57.5 -> 55.6 ms (direct_t's convs); SiLU too,
 * once 7x7 maps were left out: EfficientNet-B0 10.32 -> 10.23 / 5.69 -> 5.63 ms, the YOLO-style
 * detector 9.51 -> 9.47 / 5.73 -> 5.66 (one / two threads; before, with 7x7 maps, two threads
 * measured 3% slower). */
static int pointwise_nhwc_as_gemm(const cuvil_conv2d_params *p) {
#if CUVIL_HAVE_AVX512
    const cuvil_gemm_ukernel_desc *uk = cuvil_gemm_default_blocking()->uk;
    /* rows the 12-row tiles waste: a last 1-8 rows take an 8-row tile, 9-11 two */
    const int64_t OHW = p->OH * p->OW, r = OHW % CUVIL_GEMM_LDA_ROWS, waste = r == 0 ? 0 : r <= 8 ? 8 - r : 16 - r;
    return waste * 16 <= OHW && is_pointwise(p) && p->group == 1 && (p->layout & CUVIL_CONV_X_NHWC) &&
           (p->layout & CUVIL_CONV_Y_NHWC) && p->packed_mr == 32 && p->packed_kc > 0 && uk->nr == 32 &&
           uk->mr <= 8 && uk->rows;
#else
    (void)p;
    return 0;
#endif
}

static void pointwise_nhwc_gemm(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                                const float *residual, float *y, void *scratch) {
    const int64_t OHW = p->OH * p->OW;
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = OHW;
    j.N = p->M;
    j.K = p->C;
    j.lda = p->C;
    j.alpha = 1.0f;
    j.b_packed_nr = (int)p->packed_mr;
    j.b_packed_kc = p->packed_kc;
    j.b_packed = w_packed;
    j.ldc = j.ld_init = p->M;
    j.bias = bias;
    j.bias_cs = 1;
    j.beta = 1.0f;
    j.act = p->act;
    j.a_in_place = 1;
    for (int64_t n = 0; n < p->N; n++) {
        j.A = x + n * OHW * p->C;
        j.C = y + n * OHW * p->M;
        j.c_init = residual ? residual + n * OHW * p->M : NULL;
        cuvil_f32_gemm_run(&j, cuvil_gemm_default_blocking(), scratch);
    }
}

/* The swapped GEMM's scratch: its packing (per thread), then y' (OH*OW x M/group), A packed,
 * with the K split (ks_parts) the second partial product, then the padded input. */
static size_t gemm_t_scratch(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b_default) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, K = Cg * p->KH * p->KW;
    /* run with the microkernel that fits the pixel count (cuvil_gemm_blocking_for_rows) */
    const cuvil_gemm_blocking br = cuvil_gemm_blocking_for_rows(b_default, p->OH * p->OW), *b = &br;
    int64_t kb[3];
    return CUVIL_ALIGN_UP(cuvil_gemm_job_scratch_size(p->OH * p->OW, Mg, K, b), 64) +
           (ks_parts(p, b_default, kb) ? 2 : 1) * CUVIL_ALIGN_UP((size_t)(p->OH * p->OW * Mg) * sizeof(float), 64) +
           CUVIL_ALIGN_UP(cuvil_gemm_packed_a_floats(p->OH * p->OW, K, b->uk->mr) * sizeof(float), 64);
}

/* A 1x1 conv with a stride and no padding (ResNet's downsampling shortcuts): the im2col
 * packer would gather every other column; instead each image is subsampled once into scratch
 * ([C][OH*OW], contiguous) and run as the 1x1 stride-1 conv of that. */
int cuvil_conv2d_strided_pointwise(const cuvil_conv2d_params *p) {
    return p->KH == 1 && p->KW == 1 && (p->stride_h > 1 || p->stride_w > 1) && p->pad_t == 0 && p->pad_l == 0 &&
           pad_end(p->H, p->OH, 1, p->stride_h, 1, 0) == 0 && pad_end(p->W, p->OW, 1, p->stride_w, 1, 0) == 0 &&
           !is_depthwise(p);
}

static cuvil_conv2d_params subsampled(const cuvil_conv2d_params *p) {
    cuvil_conv2d_params q = *p;
    q.N = 1;
    q.H = p->OH;
    q.W = p->OW;
    q.stride_h = q.stride_w = 1;
    return q;
}

typedef struct subsample_job {
    const cuvil_conv2d_params *p;
    const float *x;
    float *xs;
} subsample_job;

static void subsample_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const subsample_job *j = (const subsample_job *)vctx;
    const cuvil_conv2d_params *p = j->p;
    const int64_t c0 = t * 16, c1 = cuvil_min_i64(p->C, c0 + 16);
    for (int64_t c = c0; c < c1; c++)
        for (int64_t oh = 0; oh < p->OH; oh++) {
            const float *src = j->x + (c * p->H + oh * p->stride_h) * p->W;
            float *dst = j->xs + (c * p->OH + oh) * p->OW;
            for (int64_t ow = 0; ow < p->OW; ow++) dst[ow] = src[ow * p->stride_w];
        }
}

/* Channels last: output row t's pixels, C floats each, from every stride_h-th row and
 * stride_w-th pixel of x into xs ([OH*OW][C]). */
static void subsample_task_nhwc(void *vctx, int64_t t, int tid) {
    (void)tid;
    const subsample_job *j = (const subsample_job *)vctx;
    const cuvil_conv2d_params *p = j->p;
    const int64_t C = p->C;
    for (int64_t ow = 0; ow < p->OW; ow++)
        memcpy(j->xs + (t * p->OW + ow) * C, j->x + ((t * p->stride_h) * p->W + ow * p->stride_w) * C,
               (size_t)C * sizeof(float));
}

/* Runs each image of a strided 1x1 conv as the stride-1 conv of its subsampled copy (on
 * prepacked weights or not), in the conv's layout: a channels-last x is subsampled into a
 * channels-last copy, and a channels-last y is the stride-1 conv's. */
static void conv2d_strided_pointwise(const cuvil_conv2d_params *p, const float *x, const float *w, const float *bias,
                                     const float *residual, float *y, void *scratch, const cuvil_gemm_blocking *b,
                                     int prepacked) {
    if (p->N <= 0 || p->M <= 0 || p->OH <= 0 || p->OW <= 0) return;
    const cuvil_conv2d_params q = subsampled(p);
    float *xs = (float *)((char *)scratch + CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size_ex(&q, b), 64));
    const int64_t ysz = p->M * p->OH * p->OW;
    for (int64_t n = 0; n < p->N; n++) {
        subsample_job j = {p, x + n * p->C * p->H * p->W, xs};
        if (p->layout & CUVIL_CONV_X_NHWC)
            cuvil_parallel_for(p->OH, subsample_task_nhwc, &j);
        else
            cuvil_parallel_for((p->C + 15) / 16, subsample_task, &j);
        const float *r = residual ? residual + n * ysz : NULL;
        if (prepacked)
            cuvil_f32_conv2d_prepacked(&q, xs, w, bias, r, y + n * ysz, scratch);
        else
            cuvil_f32_conv2d_ex(&q, xs, w, bias, r, y + n * ysz, scratch, b);
    }
}

/* ===== Direct convolution ================================================================
 * The GEMM of the weights and the im2col matrix without building the latter: the input is
 * copied once, zero-padded (stride 2: split into its four phases, even/odd rows x even/odd
 * columns, so that a tap of a stride-2 conv is a stride-1 read of one phase), and the
 * microkernel reads each row of a B panel in place, at the offset of its tap (c, kh, kw) from
 * the panel's first pixel. The pixels are numbered along the padded (phase) rows, Wv per row,
 * of which the first OW are outputs: a panel of NR consecutive ones is then one contiguous run
 * per tap, and the Wv - OW between two rows are computed and dropped (3-4% for 56 -> 28 or
 * 224 -> 112). A panel's MR x NR tiles accumulate over K in a strip that the epilogue (bias,
 * residual, activation) then writes out row by row. Weights: packed as for the GEMM path. */
int cuvil_conv2d_direct_applies(const cuvil_conv2d_params *p) {
    return p->group == 1 && p->stride_h == p->stride_w && (p->stride_h == 1 || p->stride_h == 2) &&
           p->dil_h == 1 && p->dil_w == 1 && p->N > 0 && p->OH > 0 && p->OW > 0;
}

static int is_direct(const cuvil_conv2d_params *p) {
    return p->algo == CUVIL_CONV_DIRECT && p->packed_mr > 0 && cuvil_conv2d_direct_applies(p);
}

/* The image's dims: one channel's floats, and pixels per row (Wv). */
static void direct_dims(const cuvil_conv2d_params *p, int64_t *plane, int64_t *Wv) {
    int64_t Hp, Wp;
    padded_dims(p, &Hp, &Wp);
    if (p->stride_h == 1) {
        *plane = Hp * Wp;
        *Wv = Wp;
    } else {
        *plane = 4 * ((Hp + 1) / 2) * ((Wp + 1) / 2);
        *Wv = (Wp + 1) / 2;
    }
}

/* A 1x1 stride-1 unpadded conv reads its input in place: the image is the input itself, and
 * only the last, partial panel (which would read past it) is copied, zero-filled, to scratch. */
static int direct_in_place(const cuvil_conv2d_params *p) {
    return p->KH == 1 && p->KW == 1 && p->stride_h == 1 && p->pad_t == 0 && p->pad_l == 0 && p->OH == p->H &&
           p->OW == p->W;
}

/* Bytes of scratch before the tap offsets: the image (+ NR floats a last panel may read past
 * it) or, in place, the last panel's C x NR copy. */
static size_t direct_img_bytes(const cuvil_conv2d_params *p, int nr) {
    int64_t plane, Wv;
    direct_dims(p, &plane, &Wv);
    return CUVIL_ALIGN_UP((size_t)(direct_in_place(p) ? p->C * nr : p->C * plane + nr) * sizeof(float), 64);
}

/* Scratch: the image part (direct_img_bytes); the K tap offsets (in place: also the copy's);
 * then in every thread's slice a strip of ALIGN(M, MR) x NR floats. */
static size_t direct_image_bytes(const cuvil_conv2d_params *p, int nr) {
    return direct_img_bytes(p, nr) +
           CUVIL_ALIGN_UP((size_t)((direct_in_place(p) ? 2 : 1) * p->C * p->KH * p->KW) * sizeof(int64_t), 64);
}

static size_t direct_scratch(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b) {
    return direct_image_bytes(p, b->uk->nr) +
           CUVIL_ALIGN_UP((size_t)(CUVIL_ALIGN_UP(p->M, b->uk->mr) * b->uk->nr) * sizeof(float), 64);
}

typedef struct direct_image {
    const cuvil_conv2d_params *p;
    const float *x; /* one image */
    float *img;
    int64_t plane;
    int64_t band_rows, bands;   /* the input rows a copy task takes; bands a channel */
} direct_image;

/* The padded (and for stride 2 phased) copy of an image in two passes over all threads, the
 * planes zeroed in chunks, then each channel's rows copied in bands: a channel a task left
 * a stem's 3 channels (YOLO-style's 3 x 320x320, 1.2 MB) to one thread, the other waiting
 * (cuvil-bench-conv, AVX-512, 3 -> 16 6x6 s2 at 320x320, two threads: 0.398 ms against 0.612
 * on one; the copy 13% of the run, perf). */
#define DIRECT_IMAGE_CHUNK ((int64_t)16 << 10)
static void direct_zero_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const direct_image *d = (const direct_image *)vctx;
    const int64_t n = d->p->C * d->plane, i0 = t * DIRECT_IMAGE_CHUNK;
    memset(d->img + i0, 0, (size_t)cuvil_min_i64(DIRECT_IMAGE_CHUNK, n - i0) * sizeof(float));
}

/* Rows [h0, h0 + band_rows) of channel t / bands into the image. */
static void direct_image_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const direct_image *d = (const direct_image *)vctx;
    const cuvil_conv2d_params *p = d->p;
    int64_t Hp, Wp;
    padded_dims(p, &Hp, &Wp);
    const int64_t H = p->H, W = p->W, pt = p->pad_t, pl = p->pad_l;
    const int64_t Hq = (Hp + 1) / 2, Wq = (Wp + 1) / 2, Pq = Hq * Wq;
    const int64_t c = t / d->bands, h0 = t % d->bands * d->band_rows, h1 = cuvil_min_i64(H, h0 + d->band_rows);
    const float *xc = d->x + c * H * W;
    float *dc = d->img + c * d->plane;
    for (int64_t h = h0; h < h1; h++) {
        if (p->stride_h == 1) {
            memcpy(dc + (pt + h) * Wp + pl, xc + h * W, (size_t)W * sizeof(float));
            continue;
        }
        /* padded (r, q) to phase (r & 1, q & 1) at (r / 2, q / 2) */
        const int64_t r = pt + h;
        float *row0 = dc + (2 * (r & 1)) * Pq + (r >> 1) * Wq, *row1 = row0 + Pq;
        copy_rows_phased(xc + h * W, 1, W, pl, row0, row1, Wq);
    }
}

typedef struct direct_run {
    const cuvil_conv2d_params *p;
    const float *img, *a, *bias, *residual;
    const int64_t *boff;
    const float *tail;    /* panels from `full` on: read from here, at offsets toff */
    const int64_t *toff;
    int64_t full;
    float *y;
    void *scratch;
    size_t strip_off;
    const cuvil_gemm_ukernel_desc *uk;
    int64_t Wv, NV, K, kcb, Mp, per;
} direct_run;

/* The strip of panel v0 (Mp x NR, bias not yet added) to y's rows, with the epilogue. Another
 * activation than Relu and Clip runs once on the whole strip (its M rows, in place), between
 * adding the bias and residual and the copy out, not once for each row segment of each channel
 * (32 floats a call). cuvil-bench-conv with SiLU, AVX-512, one thread, medians of 5 runs:
 * YOLO-style's stem (3 -> 16 6x6 s2 at 320x320) 1.27 -> 1.08 ms, its 128 -> 32 1x1 at 40x40
 * 0.174 -> 0.148; the model within noise (13.31 / 13.40 ms, alternating). */
static void direct_store(const direct_run *r, float *strip, int64_t v0) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t nr = r->uk->nr, OW = p->OW, OHW = p->OH * p->OW, Wv = r->Wv;
    const cuvil_act a = p->act.act;
    const int clamp = a == CUVIL_ACT_RELU || a == CUVIL_ACT_CLIP;
    const int after = a != CUVIL_ACT_NONE && !clamp;
    const float lo = a == CUVIL_ACT_RELU ? 0.0f : p->act.alpha, hi = a == CUVIL_ACT_RELU ? INFINITY : p->act.beta;
    for (int pass = after ? 0 : 1; pass < 2; pass++) {
        if (pass == 1 && after) act_inplace(&p->act, strip, p->M * nr); /* (lanes between rows too: never stored) */
        for (int64_t l = 0; l < nr && v0 + l < r->NV;) {
            const int64_t v = v0 + l, row = v / Wv, col = v % Wv;
            if (col >= OW) { /* between two rows */
                l += Wv - col;
                continue;
            }
            const int64_t len = cuvil_min_i64(OW - col, nr - l), off = row * OW + col;
            for (int64_t m = 0; m < p->M; m++) {
                float *src = strip + m * nr + l;
                float *dst = r->y + m * OHW + off;
                if (pass == 1 && after) { /* the sums, with the activation: copied out */
                    memcpy(dst, src, (size_t)len * sizeof(float));
                    continue;
                }
                const float bm = r->bias ? r->bias[m] : 0.0f;
                /* the residual may be y itself: each element is read before it is written */
                const float *res = r->residual ? r->residual + m * OHW + off : NULL;
                for (int64_t i = 0; i < len; i++) {
                    float v1 = src[i] + bm + (res ? res[i] : 0.0f);
                    if (clamp) {
                        v1 = v1 < lo ? lo : v1; /* NaN passes, as in cuvil_f32_act1 */
                        v1 = v1 > hi ? hi : v1;
                    }
                    if (after) src[i] = v1; /* the activation after, on the whole strip */
                    else dst[i] = v1;
                }
            }
            l += len;
        }
    }
}

static void direct_task(void *vctx, int64_t t, int tid) {
    const direct_run *r = (const direct_run *)vctx;
    const int64_t nr = r->uk->nr, mr = r->uk->mr, strips = (r->NV + nr - 1) / nr;
    float *strip = (float *)((char *)cuvil_thread_scratch(r->scratch, tid) + r->strip_off);
    for (int64_t s = t * r->per; s < cuvil_min_i64(strips, (t + 1) * r->per); s++) {
        const float *b = s < r->full ? r->img + s * nr : r->tail;
        const int64_t *off = s < r->full ? r->boff : r->toff;
        for (int64_t pc = 0; pc < r->K; pc += r->kcb) {
            const int64_t kc = cuvil_min_i64(r->kcb, r->K - pc);
            const float *a = r->a + pc * r->Mp;
            for (int64_t ir = 0; ir < r->Mp; ir += mr)
                r->uk->ind((size_t)kc, a + ir * kc, b, off + pc, strip + ir * nr, pc > 0);
        }
        direct_store(r, strip, s * nr);
    }
}

static void conv2d_gemm(const cuvil_conv2d_params *p, const float *x, const float *w, const float *w_packed,
                        const float *bias, const float *residual, float *y, void *scratch,
                        const cuvil_gemm_blocking *b);

/* ===== A stem: KxK stride 2 (K 3 to 7) on a few input channels ============================
 * The first conv of most mobile CNNs (3 -> 16 or 32, 3x3 s2 at 224x224: K 27) through the
 * direct path's microkernel pays a call, a strip's store and its epilogue for every 16 pixels
 * of 27 taps; through the GEMM, an im2col packing as long as the product. Here STEM_P vectors of
 * a row's output pixels for STEM_MB output channels are summed in registers over all taps, each
 * weight broadcast once for the STEM_P vectors, the input read from its zero-padded copy with
 * each row's even columns before its odd ones (pad_image, phased), and stored with the bias,
 * residual and activation to the channels-first output. cuvil-bench-conv, one thread, Intel
 * Xeon VM (CUVIL_BENCH_ACT=6: HardSwish): MobileNetV3's 3 -> 16 at 224x224, AVX2, GEMM 0.29-0.30
 * ms, the direct path's microkernel 0.32, this kernel 0.19-0.20 (without an activation:
 * 0.275-0.294, 0.265, 0.17). The weights are read from the direct path's packing (the GEMM's
 * A: MR rows a panel, one K block: conv2d_direct sends other packings to the GEMM first).
 * The same loop takes larger stems (a tap kw of a row: phase kw % 2 at kw / 2): ResNet's 3 ->
 * 64 7x7 (K 147) AVX2 2.85-2.91 ms as the GEMM, 2.65-2.67 here; AVX-512 1.82-1.83 and 1.72-1.73
 * (cuvil-bench-conv, one thread). */
#define STEM_MAX_C 4
#define STEM_MAX_TAPS 147   /* C x KH x KW: ResNet's 3 x 7x7 */
int cuvil_conv2d_stem_applies(const cuvil_conv2d_params *p) {
    return p->KH == p->KW && p->KH >= 3 && p->KH <= 7 && p->stride_h == 2 && p->stride_w == 2 && p->dil_h == 1 &&
           p->dil_w == 1 && p->group == 1 && p->C <= STEM_MAX_C && p->C * p->KH * p->KW <= STEM_MAX_TAPS &&
           p->N > 0 && p->OH > 0 && p->OW > 0;
}

#ifdef DW_SIMD
#define STEM_MB 6   /* output channels a block (the last block of a conv: the rest, 1 to 6) */
#if DW_SIMD == 16
#define STEM_P 4   /* vectors of output pixels (6 x 4 sums in registers of 32, 4 inputs, a weight) */
#else
#define STEM_P 2   /* (6 x 2 sums, 2 inputs and a weight: 15 of the 16 registers) */
#endif

/* The activation a stem applies in registers: Relu and Clip (clamp: lo, hi) and HardSwish
 * (hswish: the same arithmetic as cuvil_f32_act1's, a multiply and an add, then min and max as
 * its comparisons, so the same bits); the others run on each finished row. HardSwish in
 * registers rather than on the rows after: cuvil-bench-conv, MobileNetV3's and PP-LCNet's stem
 * (3 -> 16 at 224x224) with it, one thread, AVX-512 / AVX2: 0.163 -> 0.138 / 0.195 -> 0.189 ms. */
typedef struct stem_run {
    const cuvil_conv2d_params *p;
    const float *xpad, *a, *bias, *residual;
    float *y;
    int64_t Hp, Wp, mr, bands, band_rows;
    int64_t group_bands;   /* bands a group (one a thread) */
    int clamp, hswish;
    float lo, hi;
} stem_run;

/* Output channels [m0, m0 + MB) with weights wb ([tap][STEM_MB]), row oh, output pixels
 * [c0, c0 + P vectors) (the last vector masked where the row ends). MB and P are constants
 * where it is inlined (stem_cols), so that the sums stay in registers. Each tap: P input
 * vectors loaded, MB weights broadcast, MB x P FMAs. Blocks of 6 channels rather than 4
 * (AVX2: 8 loads for 12 FMAs rather than 6 for 8, and 12 independent sums to cover the FMA's
 * latency rather than 8). cuvil-bench-conv, one thread, Intel Xeon VM, old and new builds in
 * turns: MobileNetV2's 3 -> 32 at 224x224, AVX2 0.38 -> 0.32 ms, AVX-512 0.31 -> 0.23; PP-LCNet's
 * 3 -> 16 with HardSwish, AVX2 0.21 -> 0.175, AVX-512 0.169 -> 0.131. */
static inline __attribute__((always_inline)) void stem_block(const stem_run *r, const float *wb, int64_t m0,
                                                             const int MB, int64_t oh, int64_t c0, const int P) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t OW = p->OW, OHW = p->OH * p->OW, Wp = r->Wp, We = (Wp + 1) / 2, plane = r->Hp * Wp;
    const int full = c0 + P * DW_SIMD <= OW;
    const dwm msk = dw_mask(OW - c0 - (P - 1) * DW_SIMD);
    dwv acc[STEM_MB][STEM_P];
#pragma GCC unroll 8
    for (int j = 0; j < MB; j++) {
        const dwv b = DW_SET1(r->bias ? r->bias[m0 + j] : 0.0f);
#pragma GCC unroll 8
        for (int v = 0; v < P; v++) acc[j][v] = b;
    }
    const int64_t KH = p->KH, KW = p->KW;
    const float *wc = wb;
    for (int64_t c = 0; c < p->C; c++) {
        const float *pc = r->xpad + c * plane + 2 * oh * Wp + c0;
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *ev = pc + kh * Wp, *od = ev + We;
            for (int64_t kw = 0; kw < KW; kw++, wc += STEM_MB) {
                const float *src = (kw & 1 ? od : ev) + kw / 2;   /* padded column 2 ow + kw */
                dwv x[STEM_P];
#pragma GCC unroll 8
                for (int v = 0; v < P; v++)
                    x[v] = full || v < P - 1 ? DW_LOAD(src + v * DW_SIMD) : DW_LOADM(src + v * DW_SIMD, msk);
#pragma GCC unroll 8
                for (int j = 0; j < MB; j++) {
                    const dwv w = DW_SET1(wc[j]);
#pragma GCC unroll 8
                    for (int v = 0; v < P; v++) acc[j][v] = DW_FMA(w, x[v], acc[j][v]);
                }
            }
        }
    }
    const dwv vlo = DW_SET1(r->lo), vhi = DW_SET1(r->hi);
#pragma GCC unroll 8
    for (int j = 0; j < MB; j++)
#pragma GCC unroll 8
        for (int v = 0; v < P; v++) {
            const int64_t o = (m0 + j) * OHW + oh * OW + c0 + v * DW_SIMD;
            const int whole = full || v < P - 1;
            dwv y = acc[j][v];
            if (r->residual) y = DW_ADD(y, whole ? DW_LOAD(r->residual + o) : DW_LOADM(r->residual + o, msk));
            if (r->clamp) y = DW_MIN(vhi, DW_MAX(vlo, y));   /* (NaN passes, as in dwk_rows) */
            if (r->hswish) y = dw_hswish(y);
            if (whole)
                DW_STORE(r->y + o, y);
            else
                DW_STOREM(r->y + o, y, msk);
        }
}

/* Row oh of channels [m0, m0 + MB): STEM_P vectors at a time, then the rest (1 to STEM_P
 * vectors, the last maybe partial). */
static inline __attribute__((always_inline)) void stem_cols(const stem_run *r, const float *wb, int64_t m0,
                                                            const int MB, int64_t oh) {
    const int64_t OW = r->p->OW;
    int64_t c0 = 0;
    for (; c0 + STEM_P * DW_SIMD <= OW; c0 += STEM_P * DW_SIMD) stem_block(r, wb, m0, MB, oh, c0, STEM_P);
    switch ((OW - c0 + DW_SIMD - 1) / DW_SIMD) {
    case 1: stem_block(r, wb, m0, MB, oh, c0, 1); break;
    case 2: stem_block(r, wb, m0, MB, oh, c0, 2); break;   /* (STEM_P 2: the last one partial) */
#if STEM_P > 2
    case 3: stem_block(r, wb, m0, MB, oh, c0, 3); break;
    case 4: stem_block(r, wb, m0, MB, oh, c0, 4); break;
#endif
    default: break;   /* (0: the row ended with a whole block) */
    }
}

/* Task t: a band of rows of one block of STEM_MB output channels, its weights gathered from the
 * packed panels first. The bands are in one group per thread, and the tasks go group by group
 * (within a group, block by block), so that each thread reads the input rows of its own bands
 * only: by blocks first, both threads of two read the whole image, half of it from the other
 * core's cache; band by band, one thread wrote all output planes at once (cuvil-bench-conv with
 * CUVIL_BENCH_THREADS, AVX2, 3 -> 32 at 224x224 with SiLU, one thread / two, medians of 4
 * interleaved runs: by blocks 0.576 / 0.364 ms, by bands 0.578 / 0.309, in groups 0.560 /
 * 0.303). */
static void stem_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const stem_run *r = (const stem_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t blocks = (p->M + STEM_MB - 1) / STEM_MB, K = p->C * p->KH * p->KW, per = r->group_bands;
    const int64_t g = t / (blocks * per), band = g * per + t % per;
    if (band >= r->bands) return;   /* (the last group's tasks past the bands) */
    const int64_t m0 = t % (blocks * per) / per * STEM_MB, h0 = band * r->band_rows;
    const int mb = (int)cuvil_min_i64(STEM_MB, p->M - m0);
    float wb[STEM_MAX_TAPS * STEM_MB];
    for (int j = 0; j < mb; j++) {   /* channel m's weights: row m % mr of panel m / mr */
        const int64_t m = m0 + j;
        const float *src = r->a + (m / r->mr) * K * r->mr + m % r->mr;
        for (int64_t k = 0; k < K; k++) wb[k * STEM_MB + j] = src[k * r->mr];
    }
    const int64_t h1 = cuvil_min_i64(p->OH, h0 + r->band_rows), OW = p->OW;
    for (int64_t oh = h0; oh < h1; oh++) {
        switch (mb) {
        case 6: stem_cols(r, wb, m0, 6, oh); break;
        case 5: stem_cols(r, wb, m0, 5, oh); break;
        case 4: stem_cols(r, wb, m0, 4, oh); break;
        case 3: stem_cols(r, wb, m0, 3, oh); break;
        case 2: stem_cols(r, wb, m0, 2, oh); break;
        default: stem_cols(r, wb, m0, 1, oh); break;
        }
        if (!r->clamp && !r->hswish)
            for (int j = 0; j < mb; j++) act_inplace(&p->act, r->y + (m0 + j) * p->OH * OW + oh * OW, OW);
    }
}

/* Scratch: the image's padded, phased copy (at most the direct path's image part). */
static void conv2d_stem(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                        const float *residual, float *y, void *scratch, int64_t mr) {
    int64_t Hp, Wp;
    padded_dims(p, &Hp, &Wp);
    const int64_t blocks = (p->M + STEM_MB - 1) / STEM_MB, band_rows = 8, bands = (p->OH + band_rows - 1) / band_rows;
    const int relu = p->act.act == CUVIL_ACT_RELU;
    const int64_t groups = cuvil_min_i64(cuvil_threads(), bands);
    stem_run r = {p, (const float *)scratch, w_packed, bias, NULL, NULL, Hp, Wp, mr, bands, band_rows,
                  (bands + groups - 1) / groups, relu || p->act.act == CUVIL_ACT_CLIP, p->act.act == CUVIL_ACT_HARD_SWISH,
                  relu ? 0.0f : p->act.alpha, relu ? INFINITY : p->act.beta};
    const int64_t ysz = p->M * p->OH * p->OW;
    for (int64_t n = 0; n < p->N; n++) {
        pad_image(p, x + n * p->C * p->H * p->W, (float *)scratch, Hp, Wp, 1);
        r.y = y + n * ysz;
        r.residual = residual ? residual + n * ysz : NULL;
        cuvil_parallel_for(groups * blocks * r.group_bands, stem_task, &r);
    }
}
#endif

static void conv2d_direct(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                          const float *residual, float *y, void *scratch, const cuvil_gemm_blocking *b) {
    const cuvil_gemm_ukernel_desc *uk = b->uk;
    const int64_t K = p->C * p->KH * p->KW, kcb = cuvil_gemm_kc_split(K, b->kc);
    if (!uk->ind || p->packed_mr != uk->mr || cuvil_gemm_kc_split(K, p->packed_kc) != kcb) {
        /* weights packed for another microkernel: the GEMM path repacks them */
        conv2d_gemm(p, x, NULL, w_packed, bias, residual, y, scratch, b);
        return;
    }
#ifdef DW_SIMD
    if (cuvil_conv2d_stem_applies(p) && kcb >= K) {   /* (K in one block) */
        conv2d_stem(p, x, w_packed, bias, residual, y, scratch, uk->mr);
        return;
    }
#endif
    int64_t plane, Wv, Hp, Wp;
    direct_dims(p, &plane, &Wv);
    padded_dims(p, &Hp, &Wp);
    const int in_place = direct_in_place(p);
    float *img = (float *)scratch; /* in place: the last panel's copy */
    int64_t *boff = (int64_t *)((char *)scratch + direct_img_bytes(p, uk->nr));
    const int64_t Hq = (Hp + 1) / 2, Wq = (Wp + 1) / 2;
    for (int64_t c = 0, k = 0; c < p->C; c++)
        for (int64_t kh = 0; kh < p->KH; kh++)
            for (int64_t kw = 0; kw < p->KW; kw++, k++)
                boff[k] = p->stride_h == 1 ? c * plane + kh * Wp + kw
                                           : c * plane + (2 * (kh & 1) + (kw & 1)) * Hq * Wq + (kh >> 1) * Wq + (kw >> 1);
    const int64_t NV = (p->OH - 1) * Wv + p->OW, strips = (NV + uk->nr - 1) / uk->nr;
    const int64_t tasks = cuvil_min_i64(strips, 4 * (int64_t)cuvil_threads());
    direct_run r = {p, img, w_packed, bias, NULL, boff, img, boff + K, strips, NULL, scratch,
                    direct_image_bytes(p, uk->nr), uk, Wv, NV, K, kcb, CUVIL_ALIGN_UP(p->M, uk->mr),
                    (strips + tasks - 1) / tasks};
    if (in_place) {
        r.full = NV / uk->nr;
        for (int64_t c = 0; c < p->C; c++) boff[K + c] = c * uk->nr;
    } else {
        /* what a last panel reads past the image: zeros, never stored */
        memset(img + p->C * plane, 0, (size_t)uk->nr * sizeof(float));
    }
    const int64_t ysz = p->M * p->OH * p->OW;
    for (int64_t n = 0; n < p->N; n++) {
        const float *xn = x + n * p->C * p->H * p->W;
        if (in_place) {
            r.img = xn;
            const int64_t rest = NV - r.full * uk->nr;
            for (int64_t c = 0; rest > 0 && c < p->C; c++) {
                memcpy(img + c * uk->nr, xn + c * plane + r.full * uk->nr, (size_t)rest * sizeof(float));
                memset(img + c * uk->nr + rest, 0, (size_t)(uk->nr - rest) * sizeof(float));
            }
        } else {
            const int64_t band_rows = cuvil_max_i64(1, DIRECT_IMAGE_CHUNK / cuvil_max_i64(1, p->W));
            direct_image di = {p, xn, img, plane, band_rows, (p->H + band_rows - 1) / band_rows};
            cuvil_parallel_for((p->C * plane + DIRECT_IMAGE_CHUNK - 1) / DIRECT_IMAGE_CHUNK, direct_zero_task, &di);
            cuvil_parallel_for(p->C * di.bands, direct_image_task, &di);
        }
        r.y = y + n * ysz;
        r.residual = residual ? residual + n * ysz : NULL;
        cuvil_parallel_for((strips + r.per - 1) / r.per, direct_task, &r);
    }
}

size_t cuvil_f32_conv2d_scratch_size_ex(const cuvil_conv2d_params *p,
                                        const cuvil_gemm_blocking *b) {
    if (is_grouped(p)) return cuvil_f32_gconv2d_scratch_size(p);
    if (cuvil_conv2d_strided_pointwise(p)) {
        const cuvil_conv2d_params q = subsampled(p);
        return CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size_ex(&q, b), 64) +
               CUVIL_ALIGN_UP((size_t)(p->C * p->OH * p->OW) * sizeof(float), 64);
    }
    if (is_depthwise(p)) return p->layout ? 0 : dw_scratch_size(p);
    if (is_winograd(p)) return cuvil_f32_conv2d_winograd_scratch_size(p, b);
    if (is_direct_t(p)) return direct_t_scratch(p);
    size_t n = is_gemm_t(p) ? gemm_t_scratch(p, b) : gemm_scratch(p, b);
    if (use_padded(p)) {
        int64_t Hp, Wp;
        padded_dims(p, &Hp, &Wp);
        n += CUVIL_ALIGN_UP((size_t)(p->C * Hp * Wp) * sizeof(float), 64);
    }
    /* direct: also the GEMM path's, which it falls back to for weights packed otherwise */
    if (is_direct(p) && direct_scratch(p, b) > n) n = direct_scratch(p, b);
    return n;
}

size_t cuvil_f32_conv2d_scratch_size(const cuvil_conv2d_params *p) {
    return cuvil_f32_conv2d_scratch_size_ex(p, cuvil_gemm_default_blocking());
}

static void conv2d_gemm_t(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                          const float *residual, float *y, void *scratch, const cuvil_gemm_blocking *b);

/* w_packed: the weights as cuvil_f32_conv2d_pack left them (w unused), or NULL. */
static void conv2d_gemm(const cuvil_conv2d_params *p, const float *x, const float *w, const float *w_packed,
                        const float *bias, const float *residual, float *y, void *scratch,
                        const cuvil_gemm_blocking *b);

void cuvil_f32_conv2d_ex(const cuvil_conv2d_params *p, const float *x, const float *w,
                         const float *bias, const float *residual, float *y, void *scratch,
                         const cuvil_gemm_blocking *b) {
    if (p->layout) {
        /* channels last: the depthwise conv on the model's weights, else (the GEMMs take a
         * layout only on prepacked weights) the reference loop */
        if (is_depthwise(p) && cuvil_conv2d_layout_ok(p))
            cuvil_f32_dwconv2d_nhwc(p, x, w, p->KH * p->KW, 1, bias, residual, y);
        else
            cuvil_f32_conv2d__scalar(p, x, w, bias, residual, y);
        return;
    }
    if (cuvil_conv2d_strided_pointwise(p)) {
        conv2d_strided_pointwise(p, x, w, bias, residual, y, scratch, b, 0);
        return;
    }
    conv2d_gemm(p, x, w, NULL, bias, residual, y, scratch, b);
}

int cuvil_conv2d_layout_ok(const cuvil_conv2d_params *p) {
    const int64_t l = p->layout, both = CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC;
    if (l == 0) return 1;
    if (l & ~both) return 0;
    if (is_depthwise(p)) return l == both && p->M == p->C && p->dil_h == 1 && p->dil_w == 1;
    /* a channels-last x: a 1x1 conv's A as it lies, a strided one's subsampled copy, another
     * conv's im2col packed from it (on weights packed tap-major); the direct convolution
     * copies x either way and writes y either way */
    if (p->algo == CUVIL_CONV_DIRECT_T) return p->packed_mr > 0 && cuvil_conv2d_direct_t_applies(p);
    if (p->algo == CUVIL_CONV_WINOGRAD_T || p->algo == CUVIL_CONV_WINOGRAD2_T)
        return p->packed_mr > 0 && cuvil_conv2d_winograd_applies(p);
    return p->algo == CUVIL_CONV_GEMM_T && p->packed_mr > 0 && p->group == 1;
}

/* Depthwise with a layout and packed_mr > 0: the weights tap-major ([KH*KW][M]). */
static int dw_tap_major(const cuvil_conv2d_params *p) {
    return is_depthwise(p) && p->layout && p->packed_mr > 0;
}

int cuvil_conv2d_packed_tap_major(const cuvil_conv2d_params *p) { return dw_tap_major(p) || gemm_t_taps_major(p); }

size_t cuvil_f32_conv2d_packed_floats(const cuvil_conv2d_params *p) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    if (dw_tap_major(p)) return (size_t)(p->KH * p->KW * p->M);
    if (is_depthwise(p) || p->packed_mr <= 0) return 0;
    if (is_grouped(p)) return cuvil_f32_gconv2d_packed_floats(p);
    if (is_winograd(p)) return cuvil_f32_conv2d_winograd_packed_floats(p, (int)p->packed_mr);
    if (is_gemm_t(p) || is_direct_t(p))
        return (size_t)p->group * cuvil_gemm_packed_b_floats(Mg, Cg * p->KH * p->KW, (int)p->packed_mr);
    return (size_t)p->group * cuvil_gemm_packed_a_floats(Mg, Cg * p->KH * p->KW, (int)p->packed_mr);
}

size_t cuvil_f32_conv2d_pack_tmp_floats(const cuvil_conv2d_params *p) {
    return is_winograd(p) ? (size_t)(36 * p->M * p->C) : 0;
}

void cuvil_f32_conv2d_pack(const cuvil_conv2d_params *p, const float *w, float *w_packed, float *tmp) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, K = Cg * p->KH * p->KW;
    if (dw_tap_major(p)) {
        const int64_t KK = p->KH * p->KW;
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t t = 0; t < KK; t++) w_packed[t * p->M + m] = w[m * KK + t];
        return;
    }
    if (is_depthwise(p) || p->packed_mr <= 0) return;
    if (is_grouped(p)) {
        cuvil_f32_gconv2d_pack(p, w, w_packed);
        return;
    }
    if (is_winograd(p)) {
        cuvil_f32_conv2d_winograd_pack(p, w, (int)p->packed_mr, p->packed_kc, w_packed, tmp);
        return;
    }
    if (gemm_t_taps_major(p) || is_direct_t(p)) {
        /* B[k = t C + c, m] = w[m, c, t], in cuvil_gemm_pack_b_all's layout: K blocks of kcb
         * rows, each nr-column panels of kc x nr, the columns past M zero */
        const int64_t KK = p->KH * p->KW, nr = p->packed_mr, kcb = cuvil_gemm_kc_split(K, p->packed_kc);
        const int64_t Np = CUVIL_ALIGN_UP(p->M, nr);
        memset(w_packed, 0, cuvil_f32_conv2d_packed_floats(p) * sizeof(float));
        for (int64_t k = 0; k < K; k++) {
            const int64_t pc = k / kcb * kcb, kc = cuvil_min_i64(kcb, K - pc), t = k / p->C, c = k % p->C;
            for (int64_t m = 0; m < p->M; m++)
                w_packed[pc * Np + m / nr * kc * nr + (k - pc) * nr + m % nr] = w[(m * p->C + c) * KK + t];
        }
        return;
    }
    if (is_gemm_t(p)) {
        /* w [Mg, K] per group is B' (trans_b): B[k, m] = w[m, k] */
        const size_t per = cuvil_gemm_packed_b_floats(Mg, K, (int)p->packed_mr);
        cuvil_gemm_job j;
        memset(&j, 0, sizeof j);
        j.N = Mg;
        j.K = K;
        j.ldb = K;
        j.trans_b = 1;
        for (int64_t g = 0; g < p->group; g++) {
            j.B = w + g * Mg * K;
            cuvil_gemm_pack_b_all(&j, (int)p->packed_mr, p->packed_kc, w_packed + (size_t)g * per);
        }
        return;
    }
    const size_t per = cuvil_gemm_packed_a_floats(Mg, K, (int)p->packed_mr);
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = Mg;
    j.K = K;
    j.lda = K;
    j.alpha = 1.0f;
    for (int64_t g = 0; g < p->group; g++) {
        j.A = w + g * Mg * K;
        cuvil_gemm_pack_a_all(&j, (int)p->packed_mr, p->packed_kc, w_packed + (size_t)g * per);
    }
}

void cuvil_f32_conv2d_prepacked(const cuvil_conv2d_params *p, const float *x, const float *w_packed,
                                const float *bias, const float *residual, float *y, void *scratch) {
    if (dw_tap_major(p)) {
        cuvil_f32_dwconv2d_nhwc(p, x, w_packed, 1, p->M, bias, residual, y);
        return;
    }
    if (is_depthwise(p) || p->packed_mr <= 0) {   /* nothing was packed: w_packed is w */
        cuvil_f32_conv2d(p, x, w_packed, bias, residual, y, scratch);
        return;
    }
    if (is_grouped(p)) {
        cuvil_f32_gconv2d(p, x, w_packed, bias, residual, y, scratch);
        return;
    }
    if (cuvil_conv2d_strided_pointwise(p)) {
        conv2d_strided_pointwise(p, x, w_packed, bias, residual, y, scratch, cuvil_gemm_default_blocking(), 1);
        return;
    }
    if (is_winograd(p)) {
        cuvil_f32_conv2d_winograd(p, x, w_packed, bias, residual, y, scratch, cuvil_gemm_default_blocking());
        return;
    }
    if (is_gemm_t(p)) {
        conv2d_gemm_t(p, x, w_packed, bias, residual, y, scratch, cuvil_gemm_default_blocking());
        return;
    }
    if (is_direct_t(p)) {
        conv2d_direct_t(p, x, w_packed, bias, residual, y, scratch);
        return;
    }
    if (is_direct(p)) {
        conv2d_direct(p, x, w_packed, bias, residual, y, scratch, cuvil_gemm_default_blocking());
        return;
    }
    conv2d_gemm(p, x, NULL, w_packed, bias, residual, y, scratch, cuvil_gemm_default_blocking());
}

static void conv2d_gemm(const cuvil_conv2d_params *p, const float *x, const float *w, const float *w_packed,
                        const float *bias, const float *residual, float *y, void *scratch,
                        const cuvil_gemm_blocking *b) {
    if (p->N <= 0 || p->M <= 0 || p->OH <= 0 || p->OW <= 0) return;
    if (is_depthwise(p)) {
        cuvil_f32_dwconv2d(p, x, w, bias, residual, y, (float *)scratch);
        return;
    }
    const int64_t G = p->group, Cg = p->C / G, Mg = p->M / G;
    const int64_t OHW = p->OH * p->OW, KK = p->KH * p->KW;
    const int pointwise = is_pointwise(p), padded = use_padded(p);
    int64_t Hp = p->H, Wp = p->W;
    if (padded) padded_dims(p, &Hp, &Wp);
    const int64_t HW = p->H * p->W, HWp = Hp * Wp;
    float *xpad = padded ? (float *)((char *)scratch + gemm_scratch(p, b)) : NULL;
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = Mg;
    j.N = OHW;
    j.K = Cg * KK;
    j.lda = Cg * KK;
    j.alpha = 1.0f;
    j.ldb = HW;
    j.ldc = OHW;
    j.ld_init = OHW;
    j.bias_rs = 1;
    j.bias_cs = 0;
    j.beta = 1.0f;
    j.act = p->act;
    const int phased = use_phased(p);
    im2col_ctx ctx = {NULL, Cg, Hp, Wp, p->KH, p->KW, p->stride_h, p->stride_w,
                      padded ? 0 : p->pad_t, padded ? 0 : p->pad_l, p->dil_h, p->dil_w,
                      p->OH, p->OW, phased};
    if (!pointwise) {
        j.pack_b = pack_b_im2col;
        j.pack_b_ctx = &ctx;
    }
    for (int64_t n = 0; n < p->N; n++) {
        const float *xn = x + n * p->C * HW;
        if (padded) pad_image(p, xn, xpad, Hp, Wp, phased);
        for (int64_t g = 0; g < G; g++) {
            const int64_t yoff = (n * p->M + g * Mg) * OHW;
            if (w_packed) {
                j.a_packed = w_packed + (size_t)g * cuvil_gemm_packed_a_floats(Mg, Cg * KK, (int)p->packed_mr);
                j.a_packed_mr = (int)p->packed_mr;
                j.a_packed_kc = p->packed_kc;
            } else {
                j.A = w + g * Mg * Cg * KK;
            }
            j.B = xn + g * Cg * HW;
            ctx.x = padded ? xpad + g * Cg * HWp : xn + g * Cg * HW;
            j.C = y + yoff;
            j.c_init = residual ? residual + yoff : NULL;
            j.bias = bias ? bias + g * Mg : NULL;
            cuvil_f32_gemm_run(&j, b, scratch);
        }
    }
}

/* y[m][q] = yt[q][m] (+ residual, then the activation) for one image and group, 16 channels
 * per task so that both sides stay in a few cache lines. */
typedef struct transpose_out {
    const cuvil_conv2d_params *p;
    const float *yt, *residual;
    float *y;
    int64_t yoff, Mg, OHW;
} transpose_out;


static void transpose_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const transpose_out *r = (const transpose_out *)vctx;
    const int64_t OHW = r->OHW, Mg = r->Mg, m0 = 16 * t, m1 = cuvil_min_i64(Mg, m0 + 16);
    float *y = r->y + r->yoff;
    /* the residual may be y itself: each element is read before it is written */
    const float *res = r->residual ? r->residual + r->yoff : NULL;
    int64_t mv = m0; /* channels [m0, mv) done in 8 x 8 blocks */
#if defined(__AVX2__)
    /* 8 x 8 blocks in registers; the rows and columns left over element by element */
    mv = m0 + (m1 - m0) / 8 * 8;
    const int64_t q0 = OHW / 8 * 8;
    for (int64_t m = m0; m < mv; m += 8)
        for (int64_t q = 0; q < q0; q += 8)
            transpose8x8(r->yt + q * Mg + m, Mg, y + m * OHW + q, res ? res + m * OHW + q : NULL, OHW);
    for (int64_t q = q0; q < OHW; q++) {
        const float *src = r->yt + q * Mg;
        for (int64_t m = m0; m < mv; m++) y[m * OHW + q] = res ? src[m] + res[m * OHW + q] : src[m];
    }
#endif
    for (int64_t q = 0; q < OHW; q++) {
        const float *src = r->yt + q * Mg;
        for (int64_t m = mv; m < m1; m++) y[m * OHW + q] = res ? src[m] + res[m * OHW + q] : src[m];
    }
    if (res)
        cuvil_f32_act_rows(&r->p->act, y + m0 * OHW, (size_t)OHW, (size_t)(m1 - m0), (size_t)OHW);
}

/* The swapped GEMM's A (OHW rows, K) packed whole, in cuvil_gemm_pack_a_all's layout: task t
 * packs K block t / 2, its first or second half of the rows. */
typedef struct a_pack_split {
    cuvil_gemm_pack_b_fn fn;
    const im2col_ctx *ctx;
    float *dst;
    int64_t rows, K, kcb;
    int mr;
    int64_t half; /* rows in the first half (a multiple of mr) */
} a_pack_split;

static void a_pack_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const a_pack_split *s = (const a_pack_split *)vctx;
    const int64_t pc = (t / 2) * s->kcb, kc = cuvil_min_i64(s->kcb, s->K - pc);
    const int64_t r0 = t % 2 ? s->half : 0, r1 = t % 2 ? s->rows : cuvil_min_i64(s->half, s->rows);
    if (r1 <= r0) return;
    s->fn(s->ctx, pc, kc, r0, r1 - r0, s->mr, s->dst + pc * CUVIL_ALIGN_UP(s->rows, s->mr) + r0 * kc);
}

/* A packed and multiplied in bands of output pixels, one per thread: a task packs its rows of
 * A and runs them against all of B, so its A stays in its own core's cache and the two stages
 * need one fork/join, not two. (Transposing each band into y in the same task was slower: the
 * bands' edges share a cache line in every channel's row of y.) Each band is a whole number of
 * mr-row tiles but the last, so its A, packed as an A of its own rows, starts at q0 * K in the
 * whole A's space. One 14x14 layer on two threads: 576 -> 96 0.117 -> 0.110 ms, 384 -> 64
 * 0.052 -> 0.051, 64 -> 384 0.060 -> 0.059. */
typedef struct gemm_t_bands {
    const cuvil_gemm_job *j;
    const cuvil_gemm_blocking *b;
    const a_pack_split *ap;
    void *scratch;
    int64_t bound[CUVIL_MAX_THREADS + 1];
} gemm_t_bands;

/* Rows [r0, r0 + rows) of A, its K blocks from k0 (a block boundary) to k1, packed into a as
 * an A of those rows and K steps alone. */
static void pack_a_rows(const a_pack_split *ap, int64_t r0, int64_t rows, int64_t k0, int64_t k1, float *a) {
    for (int64_t pc = k0; pc < k1; pc += ap->kcb)
        ap->fn(ap->ctx, pc, cuvil_min_i64(ap->kcb, k1 - pc), r0, rows, ap->mr,
               a + (pc - k0) * CUVIL_ALIGN_UP(rows, ap->mr));
}

static void band_task(void *vctx, int64_t t, int tid) {
    const gemm_t_bands *s = (const gemm_t_bands *)vctx;
    const int64_t q0 = s->bound[t], q1 = s->bound[t + 1], rows = q1 - q0;
    float *a = s->ap->dst + q0 * s->ap->K;
    pack_a_rows(s->ap, q0, rows, 0, s->ap->K, a);
    cuvil_gemm_job jb = *s->j;
    jb.M = rows;
    jb.a_packed = a;
    jb.C = s->j->C + q0 * s->j->ldc;
    if (jb.c_init) jb.c_init += q0 * jb.ld_init;
    cuvil_f32_gemm_run_serial(&jb, s->b, cuvil_thread_scratch(s->scratch, tid));
}

/* Too few row tiles for bands: each thread packs all of A into its own slice of scratch and
 * multiplies it by its run of B's columns. A packed once and shared costs a write by one core
 * of lines the other has just read, and their reads back: ResNet-50's 3x3 convs at 7x7 (A 49 x
 * 4608) ran no faster on two threads than on one in this VM's slow periods, 2.45 -> 2.52 ms. */
typedef struct gemm_t_cols {
    const cuvil_gemm_job *j;
    const cuvil_gemm_blocking *b;
    const a_pack_split *ap;
    void *scratch;
    size_t a_off;         /* A's place in a thread's slice */
    const int64_t *bound; /* run t: columns [bound[t], bound[t + 1]) */
} gemm_t_cols;

static void cols_task(void *vctx, int64_t t, int tid) {
    const gemm_t_cols *s = (const gemm_t_cols *)vctx;
    char *slice = (char *)cuvil_thread_scratch(s->scratch, tid);
    float *a = (float *)(slice + s->a_off);
    pack_a_rows(s->ap, 0, s->ap->rows, 0, s->ap->K, a);
    cuvil_gemm_job jb = *s->j;
    jb.a_packed = a;
    cuvil_f32_gemm_run_range(&jb, s->b, slice, 0, jb.M, s->bound[t], s->bound[t + 1]);
}

/* A large A (over 256 KB) and no bands to split it by rows: the product is computed in two
 * parts over halves of K (whole K blocks), task t packing A's columns for its half (all rows)
 * into its own slice and multiplying them by the same rows of the prepacked weights (whose K
 * blocks lie one after the other) into a partial product of its own; then each task sums a
 * run of rows of both, with the bias and the activation (and, for a channels-last y, the
 * residual: the sum is y). On two threads only the partials' rows cross between the cores
 * (49 x 512 floats for ResNet-50's 3x3 convs at 7x7), where an A packed once and shared (900
 * KB) was written by one core and read back by the other. Whether it applies follows the
 * shapes alone, and one thread runs both parts: a conv adds its terms in the same order on
 * any number of threads, so outputs do not change with the thread count. ResNet-50 on two
 * threads, alternating processes (this VM's timing is bimodal): with the split on two threads
 * only, fast periods 46.4 -> 45.5 ms, slow ones 65.4 -> 62.2; as here, medians of 12 49.4 ->
 * 48.3, and one thread 88.6 -> 87.4 (within noise: the second partial's pass costs little). */
typedef struct gemm_t_ks {
    const cuvil_gemm_job *j; /* the whole product: its A packer, B, bias, epilogue */
    const cuvil_gemm_blocking *b;
    const a_pack_split *ap;
    void *scratch;
    size_t a_off;         /* A's place in a slice */
    int64_t kb[3];        /* part t: K [kb[t], kb[t + 1]) */
    float *part[2];       /* the partial products (ldc N) */
    float *dst;           /* the sum: y' (part[0] itself), or a channels-last y */
    const float *res;     /* residual added in the sum (channels-last y), or NULL */
    cuvil_act_params act; /* applied in the sum */
} gemm_t_ks;

static void ks_product_task(void *vctx, int64_t t, int tid) {
    const gemm_t_ks *s = (const gemm_t_ks *)vctx;
    const cuvil_gemm_job *j = s->j;
    char *slice = (char *)cuvil_thread_scratch(s->scratch, tid);
    const int64_t k0 = s->kb[t], k1 = s->kb[t + 1];
    float *a = (float *)(slice + s->a_off);
    pack_a_rows(s->ap, 0, s->ap->rows, k0, k1, a);
    cuvil_gemm_job jb = *j;
    jb.K = k1 - k0;
    jb.a_packed = a;
    jb.b_packed = j->b_packed + k0 * CUVIL_ALIGN_UP(j->N, j->b_packed_nr);
    jb.C = s->part[t];
    jb.ldc = j->N;
    jb.c_init = NULL;
    jb.bias = NULL;
    jb.act.act = CUVIL_ACT_NONE;
    cuvil_f32_gemm_run_serial(&jb, s->b, slice);
}

static void ks_sum_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const gemm_t_ks *s = (const gemm_t_ks *)vctx;
    const int64_t M = s->j->M, N = s->j->N, q0 = M * t / 2, q1 = M * (t + 1) / 2;
    const float *bias = s->j->bias;
    for (int64_t q = q0; q < q1; q++) {
        /* part 0 may be the destination itself (y'), and so may the residual (y): each
         * element of both is read before it is written */
        float *d = s->dst + q * N;
        const float *p0 = s->part[0] + q * N, *p1 = s->part[1] + q * N, *r = s->res ? s->res + q * N : NULL;
        for (int64_t m = 0; m < N; m++) d[m] = p0[m] + (bias ? bias[m] : 0.0f) + (r ? r[m] : 0.0f) + p1[m];
        act_inplace(&s->act, d, N);
    }
}

/* The K split's bounds for conv p into kb, and its parts (2), or 0 where it does not apply: an
 * A over 256 KB (what gemm_t_col_split packs in each thread), weights over 512 KB or fewer than
 * 8 row tiles (gemm_t_band_split's bounds on two threads), enough work, and weights packed for
 * this blocking, so that a run of their K blocks is itself a prepacked B; and an even number
 * of K blocks, so that the two parts are equal. (K = 512 is three blocks of 171: ResNet-50's
 * layer3 shortcut, 512 -> 1024 at 28 -> 14, ran its parts 1 : 2 and took 1.35-1.42 ms on two
 * threads against 1.11-1.16 without the split, 2.0-2.1 on one.) */
static int64_t ks_parts(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b_default, int64_t *kb) {
    const int64_t Mg = p->M / p->group, K = (p->C / p->group) * p->KH * p->KW, OHW = p->OH * p->OW;
    const cuvil_gemm_blocking br = cuvil_gemm_blocking_for_rows(b_default, OHW);
    const int64_t kcb = cuvil_gemm_kc_split(K, br.kc), nb = K > 0 ? (K + kcb - 1) / kcb : 0;
    const int64_t tiles = (OHW + br.uk->mr - 1) / br.uk->mr;
    if (nb < 2 || (double)OHW * (double)K * sizeof(float) <= 256.0 * 1024 ||
        ((double)Mg * (double)K * sizeof(float) <= 512.0 * 1024 && tiles >= 8) ||
        (double)OHW * (double)Mg * (double)K < 1e6 || p->packed_mr != br.uk->nr ||
        cuvil_gemm_kc_split(K, p->packed_kc) != kcb || nb % 2)
        return 0;
    kb[0] = 0;
    kb[1] = nb / 2 * kcb;
    kb[2] = K;
    if (cuvil_gemm_kc_split(kb[1], br.kc) != kcb || cuvil_gemm_kc_split(K - kb[1], br.kc) != kcb) return 0;
    return 2;
}

/* Runs of columns, one per thread, when there are at least two tiles per thread, enough work,
 * and an A that each core's cache holds beside B's panels; returns their number, 0 for the
 * shared A. (With the 3x3 convs' A of 900 KB too, ResNet-50 ran 0.5-1% slower on two threads.) */
static int64_t gemm_t_col_split(int64_t OHW, int64_t Mg, int64_t K, int nr, int64_t *bound) {
    const int64_t threads = cuvil_threads();
    if (threads <= 1 || (Mg + nr - 1) / nr < 2 * threads || (double)OHW * (double)Mg * (double)K < 5e5 * threads ||
        (double)OHW * (double)K * sizeof(float) > 256.0 * 1024)
        return 0;
    return cuvil_gemm_split_tiles(Mg, nr, threads, bound);
}

/* Bands when every thread gets at least 4 row tiles (few enough rows left over to balance)
 * and B, which each band reads whole, is small enough to stay in a core's cache. Returns the
 * number of bands, 0 for the other way. (Bands whatever B's size: ResNet-50 and MobileNetV2 on
 * two threads within this VM's noise, about 1% either way.) */
static int64_t gemm_t_band_split(int64_t OHW, int64_t Mg, int64_t K, int mr, int64_t *bound) {
    const int64_t threads = cuvil_threads(), tiles = (OHW + mr - 1) / mr;
    if (threads <= 1 || tiles < 4 * threads || (double)Mg * (double)K * sizeof(float) > 512.0 * 1024) return 0;
    return cuvil_gemm_split_tiles(OHW, mr, threads, bound);
}

/* y' = im2col(x)' w' per image and group: rows are output pixels (packed from the image by
 * the im2col packer, as A panels), columns output channels (the weights, prepacked as B); the
 * product lands in scratch as [pixel][channel] and is transposed into y with the bias, the
 * residual and the activation. A channels-last y (p->layout) is that product itself, written
 * in place with the whole epilogue; a channels-last x is A itself, packed from its rows. */
static void conv2d_gemm_t(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                          const float *residual, float *y, void *scratch, const cuvil_gemm_blocking *b_default) {
    if (p->N <= 0 || p->M <= 0 || p->OH <= 0 || p->OW <= 0) return;
    if (pointwise_nhwc_as_gemm(p)) {
        pointwise_nhwc_gemm(p, x, w_packed, bias, residual, y, scratch);
        return;
    }
    /* A (the pixels) is packed here, so any MR may pack it: the one that pads the fewest rows */
    const cuvil_gemm_blocking br = cuvil_gemm_blocking_for_rows(b_default, p->OH * p->OW), *b = &br;
    const int64_t G = p->group, Cg = p->C / G, Mg = p->M / G;
    const int64_t OHW = p->OH * p->OW, KK = p->KH * p->KW, K = Cg * KK;
    const int padded = use_padded(p);
    int64_t Hp = p->H, Wp = p->W;
    if (padded) padded_dims(p, &Hp, &Wp);
    const int64_t HW = p->H * p->W, HWp = Hp * Wp;
    float *yt = (float *)((char *)scratch + CUVIL_ALIGN_UP(cuvil_gemm_job_scratch_size(OHW, Mg, K, b), 64));
    float *apack = (float *)((char *)yt + CUVIL_ALIGN_UP((size_t)(OHW * Mg) * sizeof(float), 64));
    float *xpad = padded ? (float *)((char *)scratch + gemm_t_scratch(p, b_default)) : NULL;
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = OHW;
    j.N = Mg;
    j.K = K;
    j.alpha = 1.0f;
    j.ldc = Mg;
    j.b_packed_nr = (int)p->packed_mr;
    j.b_packed_kc = p->packed_kc;
    const int phased = use_phased(p);
    im2col_ctx ctx = {NULL, Cg, Hp, Wp, p->KH, p->KW, p->stride_h, p->stride_w,
                      padded ? 0 : p->pad_t, padded ? 0 : p->pad_l, p->dil_h, p->dil_w,
                      p->OH, p->OW, phased};
    /* A, the im2col matrix (a 1x1 stride-1 conv's is the image itself: its rows pack as they
     * lie), is packed once by all threads, then read in place by every part of the GEMM (which
     * would otherwise pack all of it in each of its column tasks). (A 1x1 conv's A read by the
     * microkernel straight from the input, a k step every HW floats, skipped the packing:
     * 960 -> 320 at 7x7 alone 0.283 -> 0.268 ms, but the models ran slower, MobileNetV2 7.84 ->
     * 7.99 ms and ResNet-50 74.0 -> 74.9 on one thread: a tile's kc scattered lines, read again
     * for every column tile, do not stay in L1 beside the B panel as a packed tile does.) */
    const int x_nhwc = (p->layout & CUVIL_CONV_X_NHWC) != 0, y_nhwc = (p->layout & CUVIL_CONV_Y_NHWC) != 0;
    a_pack_split ap = {x_nhwc ? pack_im2col_nhwc : is_pointwise(p) ? pack_rows : pack_b_im2col, &ctx, apack, OHW, K,
                       cuvil_gemm_kc_split(K, b->kc), b->uk->mr, 0};
    ap.half = CUVIL_ALIGN_UP((OHW + 1) / 2, ap.mr);
    j.a_packed = apack;
    j.a_packed_mr = ap.mr;
    j.a_packed_kc = b->kc;
    /* the bias per column and, without a residual (added before it), the activation go into
     * the GEMM's epilogue; the rest into the transposing copy */
    j.bias_rs = 0;
    j.bias_cs = 1;
    j.beta = 1.0f;
    if (!residual || y_nhwc) j.act = p->act;
    if (y_nhwc) j.ld_init = Mg; /* the residual, as the product's initial value */
    const size_t per = cuvil_gemm_packed_b_floats(Mg, K, (int)p->packed_mr);
    gemm_t_ks ks = {&j, b, &ap, scratch, (size_t)((char *)apack - (char *)scratch), {0}, {yt, NULL}, NULL, NULL, p->act};
    /* the K split, where it applies, on any number of threads (the order of the sums) */
    const int64_t n_ks = ks_parts(p, b_default, ks.kb);
    gemm_t_bands bands = {&j, b, &ap, scratch, {0}};
    const int64_t n_bands = n_ks > 0 ? 0 : gemm_t_band_split(OHW, Mg, K, ap.mr, bands.bound);
    /* (the bands' bounds, unused without bands, hold the column runs) */
    gemm_t_cols cols = {&j, b, &ap, scratch, (size_t)((char *)apack - (char *)scratch), bands.bound};
    const int64_t n_cols = n_ks > 0 || n_bands > 0 ? 0 : gemm_t_col_split(OHW, Mg, K, b->uk->nr, bands.bound);
    ks.part[1] = (float *)((char *)apack + CUVIL_ALIGN_UP(cuvil_gemm_packed_a_floats(OHW, K, ap.mr) * sizeof(float), 64));
    for (int64_t n = 0; n < p->N; n++) {
        const float *xn = x + n * p->C * HW;
        if (padded) pad_image(p, xn, xpad, Hp, Wp, phased);
        for (int64_t g = 0; g < G; g++) {
            ctx.x = padded ? xpad + g * Cg * HWp : xn + g * Cg * HW;
            j.b_packed = w_packed + (size_t)g * per;
            j.bias = bias ? bias + g * Mg : NULL;
            j.C = y_nhwc ? y + n * OHW * p->M + g * Mg : yt;
            if (y_nhwc) j.c_init = residual ? residual + n * OHW * p->M + g * Mg : NULL;
            transpose_out tr = {p, yt, residual, y, (n * p->M + g * Mg) * OHW, Mg, OHW};
            if (n_ks > 0) {
                cuvil_parallel_for(n_ks, ks_product_task, &ks);
                ks.dst = j.C;
                ks.res = y_nhwc ? j.c_init : NULL;
                /* without a residual (or with one already added) the activation is the sum's */
                ks.act.act = !residual || y_nhwc ? p->act.act : CUVIL_ACT_NONE;
                cuvil_parallel_for(2, ks_sum_task, &ks);
            } else if (n_bands > 0)
                cuvil_parallel_for(n_bands, band_task, &bands);
            else if (n_cols > 0)
                cuvil_parallel_for(n_cols, cols_task, &cols);
            else {
                cuvil_parallel_for(2 * ((K + ap.kcb - 1) / ap.kcb), a_pack_task, &ap);
                cuvil_f32_gemm_run(&j, b, scratch);
            }
            if (!y_nhwc) cuvil_parallel_for((Mg + 15) / 16, transpose_task, &tr);
        }
    }
}

/* ===== Direct convolution on a channels-last copy (CUVIL_CONV_DIRECT_T) ================ */
/* Each image is copied once, zero-padded, channels last (from either layout: the input's
 * reorder folded into this layer); then output pixels are the rows of MR x NR register tiles
 * and output channels their columns, on the weights prepacked as the swapped GEMM's B with K
 * tap-major. A tile row's K is read in place from the copy: in the padded image one kernel
 * row of a pixel's window (KW taps x C channels) is KW*C contiguous floats, so a K block is a
 * few segments per row (cuvil_f32_rows_ukernel_fn) and nothing is packed. (The im2col of the
 * pixels-as-rows GEMM writes and reads back KH*KW/(sh*sw) times the input.) */
#define DIRECT_T_MAX_SEGS 16
#define DIRECT_T_MAX_MR 8

int cuvil_conv2d_direct_t_applies(const cuvil_conv2d_params *p) {
    return p->group == 1 && p->dil_h == 1 && p->dil_w == 1 && p->C > 0;
}

int cuvil_conv2d_algo_packs_b(int64_t algo) {
    return algo == CUVIL_CONV_GEMM_T || algo == CUVIL_CONV_WINOGRAD_T || algo == CUVIL_CONV_WINOGRAD2_T ||
           algo == CUVIL_CONV_DIRECT_T;
}

static int is_direct_t(const cuvil_conv2d_params *p) {
    return p->algo == CUVIL_CONV_DIRECT_T && p->packed_mr > 0 && cuvil_conv2d_direct_t_applies(p);
}

/* Height and width of the channels-last padded copy. */
static void direct_t_dims(const cuvil_conv2d_params *p, int64_t *Hp, int64_t *Wp) {
    *Hp = p->pad_t + p->H + pad_end(p->H, p->OH, p->KH, p->stride_h, 1, p->pad_t);
    *Wp = p->pad_l + p->W + pad_end(p->W, p->OW, p->KW, p->stride_w, 1, p->pad_l);
}

/* A channels-last x that needs no padding is read as it lies. */
static int direct_t_in_place(const cuvil_conv2d_params *p) {
    int64_t Hp, Wp;
    direct_t_dims(p, &Hp, &Wp);
    return (p->layout & CUVIL_CONV_X_NHWC) && Hp == p->H && Wp == p->W;
}

/* The padded copy (none in place), each output pixel's window's offset in it, then (a
 * channels-first y) the product [pixel][channel] to transpose. (As a GEMM it needs none.) */
static size_t direct_t_scratch(const cuvil_conv2d_params *p) {
    int64_t Hp, Wp;
    direct_t_dims(p, &Hp, &Wp);
    size_t n = (direct_t_in_place(p) ? 0 : CUVIL_ALIGN_UP((size_t)(Hp * Wp * p->C) * sizeof(float), 64)) +
               CUVIL_ALIGN_UP((size_t)(p->OH * p->OW) * sizeof(int64_t), 64);
    if (!(p->layout & CUVIL_CONV_Y_NHWC)) n += CUVIL_ALIGN_UP((size_t)(p->OH * p->OW * p->M) * sizeof(float), 64);
    return n;
}

typedef struct direct_t_run {
    const cuvil_conv2d_params *p;
    const float *x;    /* this image, in p's x layout */
    float *xpad;       /* [Hp][Wp][C], the copy */
    const float *xin;  /* what the tiles read: xpad, or x in place */
    int64_t *pix;      /* output pixel q's window starts at xin + pix[q] */
    const float *w;    /* prepacked: K blocks of kcb rows, each Np/nr panels of kc x nr */
    const float *bias; /* [M] or NULL */
    const float *init; /* the product's initial value (a channels-last y's residual) or NULL */
    float *c;          /* [OH*OW][M] */
    const cuvil_gemm_ukernel_desc *uk; /* NULL: the portable loop */
    int64_t Hp, Wp, K, kcb, Np, nr;
    int fuse_act; /* the activation is this product's (else the transposing copy's, or none) */
    int by_cols;  /* tasks split the columns (else the rows) */
    int64_t bound[CUVIL_MAX_THREADS + 1];
} direct_t_run;

/* Rows [h0, h1) of the padded copy. */
static void direct_t_pad_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const direct_t_run *r = (const direct_t_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t C = p->C, Wp = r->Wp, h0 = r->Hp * t / cuvil_threads(), h1 = r->Hp * (t + 1) / cuvil_threads();
    for (int64_t h = h0; h < h1; h++) {
        float *d = r->xpad + h * Wp * C;
        const int64_t ih = h - p->pad_t;
        if (ih < 0 || ih >= p->H) {
            memset(d, 0, (size_t)(Wp * C) * sizeof(float));
            continue;
        }
        memset(d, 0, (size_t)(p->pad_l * C) * sizeof(float));
        memset(d + (p->pad_l + p->W) * C, 0, (size_t)((Wp - p->pad_l - p->W) * C) * sizeof(float));
        d += p->pad_l * C;
        if (p->layout & CUVIL_CONV_X_NHWC) {
            memcpy(d, r->x + ih * p->W * C, (size_t)(p->W * C) * sizeof(float));
            continue;
        }
        const float *s = r->x + ih * p->W; /* channel c's row at s + c H W */
        const int64_t HW = p->H * p->W;
        int64_t c0 = 0;
#if defined(__AVX2__)
        for (; c0 + 8 <= C; c0 += 8) {
            int64_t w0 = 0;
            for (; w0 + 8 <= p->W; w0 += 8) transpose8x8(s + c0 * HW + w0, HW, d + w0 * C + c0, NULL, C);
            for (; w0 < p->W; w0++)
                for (int64_t c = c0; c < c0 + 8; c++) d[w0 * C + c] = s[c * HW + w0];
        }
#endif
        for (int64_t w = 0; w < p->W; w++)
            for (int64_t c = c0; c < C; c++) d[w * C + c] = s[c * HW + w];
    }
}

/* The portable stand-in for a microkernel of this NR (weights packed for a tile the runtime
 * lacks): the same contract, one row at a time. */
static void rows_portable(size_t nseg, const size_t *seglen, const float *const *rows, size_t ld_rows,
                          const float *b, int64_t nrp, float *c, size_t ldc, size_t mr, size_t nr,
                          const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi) {
    for (size_t i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        for (size_t j = 0; j < nr; j++) {
            float acc = 0.0f;
            const float *bj = b + j;
            for (size_t s = 0; s < nseg; s++) {
                const float *a = rows[s * ld_rows + i];
                for (size_t k = 0; k < seglen[s]; k++, bj += nrp) acc += a[k] * *bj;
            }
            float v = acc + (c_in ? c_in[i * ld_in + j] : 0.0f);
            if (epi) {
                v += epi->col_bias ? epi->col_bias[j] : 0.0f;
                v = v < epi->lo ? epi->lo : v;
                v = v > epi->hi ? epi->hi : v;
                if (epi->hswish) v = cuvil_hswish1(v);
            }
            ci[j] = v;
        }
    }
}

/* Tiles of pixels that a K block's rows keep in L2 beside its weights (ResNet's 3x3 convs:
 * 16 tiles of 8 x 192 floats, 96 KiB). */
#define DIRECT_T_ROWS_BYTES (96 * 1024)

/* Task t: its rows or columns (r->bound), all of K. K goes block by block (the packing's kcb)
 * and within a block by runs of up to DIRECT_T_MAX_SEGS segments; the first run starts from
 * the initial value, the last one adds the bias and the activation. Within a run, as in a
 * GEMM: runs of row tiles, and for each panel of weights (kept in L1) every tile of the run. */
static void direct_t_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const direct_t_run *r = (const direct_t_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t C = p->C, M = p->M, OHW = p->OH * p->OW, L = p->KW * C, nr = r->nr;
    const int mr = r->uk ? r->uk->mr : 4;
    const int64_t q_lo = r->by_cols ? 0 : r->bound[t], q_hi = r->by_cols ? OHW : r->bound[t + 1];
    const int64_t n_lo = r->by_cols ? r->bound[t] : 0, n_hi = r->by_cols ? r->bound[t + 1] : M;
    const cuvil_act act = p->act.act;
    const int clamp = act == CUVIL_ACT_NONE || act == CUVIL_ACT_RELU || act == CUVIL_ACT_CLIP;
    /* HardSwish in the microkernel's store too (no second pass over the band's tiles) */
    cuvil_ukernel_epi epi = {NULL, NULL, -INFINITY, INFINITY, r->fuse_act && act == CUVIL_ACT_HARD_SWISH};
    if (r->fuse_act && act == CUVIL_ACT_RELU) epi.lo = 0.0f;
    if (r->fuse_act && act == CUVIL_ACT_CLIP) {
        epi.lo = p->act.alpha;
        epi.hi = p->act.beta;
    }
    const float *rows[DIRECT_T_MAX_SEGS * DIRECT_T_MAX_MR];
    size_t seglen[DIRECT_T_MAX_SEGS];
    int64_t segoff[DIRECT_T_MAX_SEGS];
    for (int64_t pc = 0; pc < r->K; pc += r->kcb) {
        const int64_t kc = cuvil_min_i64(r->kcb, r->K - pc);
        for (int64_t k0 = pc; k0 < pc + kc;) {
            /* the next run of segments: [k0, k1), cut where a kernel row ends */
            size_t nseg = 0;
            int64_t k1 = k0;
            while (k1 < pc + kc && nseg < DIRECT_T_MAX_SEGS) {
                const int64_t kh = k1 / L, len = cuvil_min_i64(L - k1 % L, pc + kc - k1);
                segoff[nseg] = kh * r->Wp * C + k1 % L;
                seglen[nseg++] = (size_t)len;
                k1 += len;
            }
            const int first = k0 == 0, last = k1 == r->K;
            const int64_t tb = cuvil_max_i64(1, DIRECT_T_ROWS_BYTES / (mr * (k1 - k0) * (int64_t)sizeof(float))) * mr;
            for (int64_t qb = q_lo; qb < q_hi; qb += tb) {
                const int64_t qe = cuvil_min_i64(q_hi, qb + tb);
                for (int64_t n0 = n_lo; n0 < n_hi; n0 += nr) {
                    const int64_t nn = cuvil_min_i64(nr, n_hi - n0);
                    const float *b = r->w + pc * r->Np + n0 * kc + (k0 - pc) * nr;
                    epi.col_bias = r->bias ? r->bias + n0 : NULL;
                    const cuvil_ukernel_epi *e = last ? &epi : NULL;
                    for (int64_t q0 = qb; q0 < qe; q0 += mr) {
                        const int64_t mrr = cuvil_min_i64(mr, qe - q0);
                        for (int i = 0; i < mr; i++) {
                            const float *base = r->xin + r->pix[cuvil_min_i64(q0 + i, OHW - 1)];
                            for (size_t s = 0; s < nseg; s++) rows[s * (size_t)mr + (size_t)i] = base + segoff[s];
                        }
                        float *c = r->c + q0 * M + n0;
                        const float *cin = first ? (r->init ? r->init + q0 * M + n0 : NULL) : c;
                        if (r->uk)
                            r->uk->rows(nseg, seglen, rows, b, c, (size_t)M, (size_t)mrr, (size_t)nn, cin, (size_t)M,
                                        e);
                        else
                            rows_portable(nseg, seglen, rows, (size_t)mr, b, nr, c, (size_t)M, (size_t)mrr, (size_t)nn,
                                          cin, (size_t)M, e);
                    }
                }
                /* any other activation once for the band's tiles (one call, not one a tile) */
                if (last && r->fuse_act && !clamp && !epi.hswish)
                    cuvil_f32_act_rows(&p->act, r->c + qb * M + n_lo, (size_t)M, (size_t)(qe - qb), (size_t)(n_hi - n_lo));
            }
            k0 = k1;
        }
    }
}

static void conv2d_direct_t(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                            const float *residual, float *y, void *scratch) {
    if (p->N <= 0 || p->M <= 0 || p->OH <= 0 || p->OW <= 0) return;
    if (pointwise_nhwc_as_gemm(p)) {
        pointwise_nhwc_gemm(p, x, w_packed, bias, residual, y, scratch);
        return;
    }
    direct_t_run r;
    memset(&r, 0, sizeof r);
    r.p = p;
    direct_t_dims(p, &r.Hp, &r.Wp);
    const int64_t OHW = p->OH * p->OW, M = p->M, HW = p->H * p->W;
    r.K = p->C * p->KH * p->KW;
    r.kcb = cuvil_gemm_kc_split(r.K, p->packed_kc);
    r.nr = p->packed_mr;
    r.Np = CUVIL_ALIGN_UP(M, r.nr);
    r.w = w_packed;
    r.bias = bias;
    /* the tile of the packing's NR: the best (the last), or one that pads 5% fewer rows
     * (cuvil_gemm_blocking_for_rows's rule: 49 pixels in 7 tiles of 7, not 56 in 8s) */
    for (int u = cuvil_f32_gemm_n_ukernels - 1; u >= 0; u--) {
        const cuvil_gemm_ukernel_desc *d = &cuvil_f32_gemm_ukernels[u];
        if (!d->rows || d->nr != r.nr || d->mr > DIRECT_T_MAX_MR) continue;
        if (!r.uk || CUVIL_ALIGN_UP(OHW, d->mr) * 20 < CUVIL_ALIGN_UP(OHW, r.uk->mr) * 19) r.uk = d;
    }
    const int mr = r.uk ? r.uk->mr : 4;
    const int y_nhwc = (p->layout & CUVIL_CONV_Y_NHWC) != 0;
    const int in_place = direct_t_in_place(p);
    r.xpad = (float *)scratch;
    const size_t copy = in_place ? 0 : CUVIL_ALIGN_UP((size_t)(r.Hp * r.Wp * p->C) * sizeof(float), 64);
    r.pix = (int64_t *)((char *)scratch + copy);
    float *yt = y_nhwc ? NULL : (float *)((char *)r.pix + CUVIL_ALIGN_UP((size_t)OHW * sizeof(int64_t), 64));
    /* output pixel q's first float in the (padded) channels-last input; a row at a time, no
     * division a pixel (YOLO-style's 160x160 stem: 25,600 of them, each run, on one thread) */
    for (int64_t oh = 0, q = 0; oh < p->OH; oh++)
        for (int64_t ow = 0; ow < p->OW; ow++, q++) r.pix[q] = (oh * p->stride_h * r.Wp + ow * p->stride_w) * p->C;
    /* a channels-first y: the residual and then the activation go into the transposing copy */
    r.fuse_act = y_nhwc || !residual;
    const int64_t threads = cuvil_threads(), panels = (M + r.nr - 1) / r.nr, row_tiles = (OHW + mr - 1) / mr;
    const int64_t by_cols = (panels + threads - 1) / threads * row_tiles;
    const int64_t by_rows = (row_tiles + threads - 1) / threads * panels;
    if (panels < 4 * threads) {
        /* Fewer than 4 panels a thread: by rows, each thread reading its pixels only, unless
         * the busiest thread has 5% fewer tiles by columns (where every thread reads every
         * pixel), or about as many and the weights outweigh the pixels (M > OH OW). YOLO-style,
         * AVX2, two threads, in the model (bench/profile_layers.py), columns -> rows: 1x1 convs
         * of 2 and 4 panels (267 tiles by columns against 268 by rows; 134 against 136) 64 -> 32
         * at 40x40 0.102 -> 0.070 ms, 128 -> 64 at 20x20 0.082 -> 0.052; its 3x3 s2 convs 32 ->
         * 64 to 40x40 0.42 -> 0.32, 64 -> 64 to 20x20 0.225 -> 0.175. With 4 panels a thread or
         * more (ResNet-50's 128 outputs in 16-column panels, AVX2, two threads) rows measured
         * slower in the model: the rules below. (On AVX-512 those are 4 panels of 32 and take
         * this rule: ResNet-50 there within noise, 31.7 / 31.3 ms.) */
        r.by_cols = threads > 1 && (by_cols * 20 < by_rows * 19 || (by_cols * 20 <= by_rows * 21 && M > OHW));
    } else if (p->KH * p->KW > 1) {
        r.by_cols = threads > 1;
    } else {
        /* a 1x1 conv: the same rule. (With the columns wherever their busiest thread had fewer
         * tiles, each thread read every pixel for a share 1% smaller: cuvil-bench-conv, channels
         * last, AVX2, two threads, 128 -> 128 at 28x28 0.18 -> 0.135 ms, 64 -> 128 at 56x56 0.387
         * -> 0.312; ResNet-50's 512 -> 128 at 28x28 0.565 by columns, 0.543 by rows.) */
        r.by_cols = threads > 1 && (by_cols * 20 < by_rows * 19 || (by_cols * 20 <= by_rows * 21 && M > OHW));
    }
    const int64_t parts = r.by_cols ? cuvil_gemm_split_tiles(M, r.nr, threads, r.bound)
                                    : cuvil_gemm_split_tiles(OHW, mr, threads, r.bound);
    for (int64_t n = 0; n < p->N; n++) {
        r.x = x + n * p->C * HW;
        r.xin = in_place ? r.x : r.xpad;
        if (!in_place) cuvil_parallel_for(threads, direct_t_pad_task, &r);
        r.c = y_nhwc ? y + n * OHW * M : yt;
        r.init = y_nhwc && residual ? residual + n * OHW * M : NULL;
        cuvil_parallel_for(parts, direct_t_task, &r);
        if (!y_nhwc) {
            transpose_out tr = {p, yt, residual, y, n * M * OHW, M, OHW};
            cuvil_parallel_for((M + 15) / 16, transpose_task, &tr);
        }
    }
}

void cuvil_f32_conv2d(const cuvil_conv2d_params *p, const float *x, const float *w,
                      const float *bias, const float *residual, float *y, void *scratch) {
    cuvil_f32_conv2d_ex(p, x, w, bias, residual, y, scratch, cuvil_gemm_default_blocking());
}

void cuvil_f32_conv2d__scalar(const cuvil_conv2d_params *p, const float *x, const float *w,
                              const float *bias, const float *residual, float *y) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++) {
            const int64_t g = m / Mg;
            for (int64_t oh = 0; oh < p->OH; oh++)
                for (int64_t ow = 0; ow < p->OW; ow++) {
                    float acc = 0.0f;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t kh = 0; kh < p->KH; kh++) {
                            const int64_t ih = oh * p->stride_h - p->pad_t + kh * p->dil_h;
                            if (ih < 0 || ih >= p->H) continue;
                            for (int64_t kw = 0; kw < p->KW; kw++) {
                                const int64_t iw = ow * p->stride_w - p->pad_l + kw * p->dil_w;
                                if (iw < 0 || iw >= p->W) continue;
                                const int64_t ci = g * Cg + c;
                                acc += x[p->layout & CUVIL_CONV_X_NHWC ? ((n * p->H + ih) * p->W + iw) * p->C + ci
                                                                       : ((n * p->C + ci) * p->H + ih) * p->W + iw] *
                                       w[((m * Cg + c) * p->KH + kh) * p->KW + kw];
                            }
                        }
                    const int64_t yi = p->layout & CUVIL_CONV_Y_NHWC ? ((n * p->OH + oh) * p->OW + ow) * p->M + m
                                                                     : ((n * p->M + m) * p->OH + oh) * p->OW + ow;
                    if (bias) acc += bias[m];
                    if (residual) acc += residual[yi];
                    y[yi] = cuvil_f32_act1(&p->act, acc);
                }
        }
}
