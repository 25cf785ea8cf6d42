/*
 * gconv.c -- grouped convolution with few channels a group (CUVIL_CONV_GROUPED): direct, each
 * group's output channels the lanes of a vector.
 *
 * A grouped conv of a few channels a group (RegNet's 3x3 convs: 8 in, 8 out a group) is, as a
 * GEMM per group, a product of 8 rows and K = 72: the 6x16 microkernel fills 8 of 12 rows,
 * and packing costs as much as the product (15-25% of the AVX2 peak). Here each group's
 * input channels are first copied, zero-padded, into a tile whose pixels hold their Cg
 * channels side by side; then 8 output pixels at a time accumulate, per tap and input
 * channel, one broadcast input value times the vector of 8 output channels' weights (8
 * registers of 8 pixels x 8 channels, no packing of the input), and an 8 x 8 transpose in
 * registers turns them back into 8 rows of 8 pixels for the channels-first output. Any
 * stride, dilation and padding: a tap is one offset into the tile, a pixel one base address.
 *
 * Weights (packed by cuvil_f32_conv2d_pack, packed_mr = CUVIL_GCONV_LANES): per group, per
 * chunk of 8 output channels, per tap, per input channel, the 8 channels' weights (zero past
 * the group's last channel). Scratch per thread: the tile.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include "../transpose8.h"
#define GC_AVX2 1
#else
#define GC_AVX2 0
#endif

#define L CUVIL_GCONV_LANES

int cuvil_conv2d_grouped_applies(const cuvil_conv2d_params *p) {
    return p->group > 1 && p->C % p->group == 0 && p->M % p->group == 0 && p->C / p->group >= 2 && p->dil_h > 0 &&
           p->dil_w > 0 && p->stride_h > 0 && p->stride_w > 0;
}

/* The tile's rows and columns: the padded positions the taps read. */
static void gc_dims(const cuvil_conv2d_params *p, int64_t *Hp, int64_t *Wp) {
    *Hp = (p->OH - 1) * p->stride_h + (p->KH - 1) * p->dil_h + 1;
    *Wp = (p->OW - 1) * p->stride_w + (p->KW - 1) * p->dil_w + 1;
}

/* (SIZE_MAX where the tile's floats overflow: sizes from a model (strides and pads of 2^32 - 1
 * give a 2x2 output) may multiply past 2^64; the lowering then keeps the GEMM) */
size_t cuvil_f32_gconv2d_scratch_size(const cuvil_conv2d_params *p) {
    int64_t hs, hk, ws, wk, Hp, Wp, a, n;
    if (p->OH < 1 || p->OW < 1 || p->KH < 1 || p->KW < 1 || p->group < 1 ||
        __builtin_mul_overflow(p->OH - 1, p->stride_h, &hs) || __builtin_mul_overflow(p->KH - 1, p->dil_h, &hk) ||
        __builtin_add_overflow(hs, hk, &Hp) || __builtin_add_overflow(Hp, 1, &Hp) ||
        __builtin_mul_overflow(p->OW - 1, p->stride_w, &ws) || __builtin_mul_overflow(p->KW - 1, p->dil_w, &wk) ||
        __builtin_add_overflow(ws, wk, &Wp) || __builtin_add_overflow(Wp, 1, &Wp) ||
        __builtin_mul_overflow(Hp, Wp, &a) || __builtin_mul_overflow(a, p->C / p->group, &n) ||
        n > (int64_t)(SIZE_MAX / sizeof(float) / 2))
        return SIZE_MAX;
    return CUVIL_ALIGN_UP((size_t)n * sizeof(float), 64);
}

size_t cuvil_f32_gconv2d_packed_floats(const cuvil_conv2d_params *p) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    return (size_t)(p->group * ((Mg + L - 1) / L) * L * Cg * p->KH * p->KW);
}

void cuvil_f32_gconv2d_pack(const cuvil_conv2d_params *p, const float *w, float *w_packed) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, KK = p->KH * p->KW, nch = (Mg + L - 1) / L;
    for (int64_t g = 0; g < p->group; g++)
        for (int64_t j = 0; j < nch; j++)
            for (int64_t t = 0; t < KK; t++)
                for (int64_t c = 0; c < Cg; c++)
                    for (int64_t l = 0; l < L; l++) {
                        const int64_t m = j * L + l;
                        *w_packed++ = m < Mg ? w[((g * Mg + m) * Cg + c) * KK + t] : 0.0f;
                    }
}

/* Channels [c0, c0 + Cg) of one image (xg: channel c0's plane) into the tile: padded position
 * (hp, wp) of channel c at tile[(hp Wp + wp) Cg + c - c0]; every float of the tile is written. */
static void gc_pack_tile(const cuvil_conv2d_params *p, const float *xg, float *tile, int64_t Hp, int64_t Wp) {
    const int64_t Cg = p->C / p->group, H = p->H, W = p->W, HW = H * W, pt = p->pad_t, pl = p->pad_l;
    const int64_t w_end = cuvil_min_i64(Wp, pl + W), nw = w_end > pl ? w_end - pl : 0;
    for (int64_t hp = 0; hp < Hp; hp++) {
        float *row = tile + hp * Wp * Cg;
        const int64_t h = hp - pt;
        if (h < 0 || h >= H || nw == 0) {
            memset(row, 0, (size_t)(Wp * Cg) * sizeof(float));
            continue;
        }
        memset(row, 0, (size_t)(pl * Cg) * sizeof(float));
        memset(row + (pl + nw) * Cg, 0, (size_t)((Wp - pl - nw) * Cg) * sizeof(float));
        /* the row's Cg channels (rows HW apart) transposed into its pixels (Cg floats each) */
        const float *xr = xg + h * W;
        float *dst = row + pl * Cg;
#if CUVIL_HAVE_AVX2
        cuvil_transpose_f32__avx2(xr, HW, dst, Cg, Cg, nw);
#else
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t w = 0; w < nw; w++) dst[w * Cg + c] = xr[c * HW + w];
#endif
    }
}

typedef struct gc_run {
    const cuvil_conv2d_params *p;
    const float *x, *w, *bias, *residual;
    float *y, *scratch;
} gc_run;

/* Output pixels [q0, q0 + 8) of one group's chunk of (up to) 8 output channels: pb[i] is pixel
 * q0 + i's window in the tile (the last pixel's again past the end); yc, rc: the chunk's first
 * output channel's plane and its residual (OP floats apart). */
static inline void gc_block(const cuvil_conv2d_params *p, const float *const pb[8], const float *wj, const float *bj,
                            int64_t Wp, int64_t nv, int64_t np, float *yc, const float *rc, int64_t OP, int clamp,
                            float lo, float hi) {
    const int64_t Cg = p->C / p->group, KH = p->KH, KW = p->KW;
    const int64_t th = p->dil_h * Wp * Cg, tw = p->dil_w * Cg;
#if GC_AVX2
    const __m256 vb = _mm256_loadu_ps(bj);
    __m256 a[8];
    for (int i = 0; i < 8; i++) a[i] = vb;
    const float *wp = wj;
    for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) {
            const int64_t o = kh * th + kw * tw;
            const float *p0 = pb[0] + o, *p1 = pb[1] + o, *p2 = pb[2] + o, *p3 = pb[3] + o;
            const float *p4 = pb[4] + o, *p5 = pb[5] + o, *p6 = pb[6] + o, *p7 = pb[7] + o;
            for (int64_t c = 0; c < Cg; c++, wp += L) {
                const __m256 wv = _mm256_loadu_ps(wp);
                a[0] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p0 + c), a[0]);
                a[1] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p1 + c), a[1]);
                a[2] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p2 + c), a[2]);
                a[3] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p3 + c), a[3]);
                a[4] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p4 + c), a[4]);
                a[5] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p5 + c), a[5]);
                a[6] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p6 + c), a[6]);
                a[7] = _mm256_fmadd_ps(wv, _mm256_broadcast_ss(p7 + c), a[7]);
            }
        }
    cuvil_transpose8_regs(a); /* a[o]: output channel o's 8 pixels */
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    if (np == 8) {
        for (int64_t o = 0; o < nv; o++) {
            __m256 v = a[o];
            if (rc) v = _mm256_add_ps(v, _mm256_loadu_ps(rc + o * OP));
            /* (bound, v): NaN passes through, as in cuvil_f32_act1 */
            if (clamp) v = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v));
            _mm256_storeu_ps(yc + o * OP, v);
        }
    } else {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)np), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int64_t o = 0; o < nv; o++) {
            __m256 v = a[o];
            if (rc) v = _mm256_add_ps(v, _mm256_maskload_ps(rc + o * OP, m));
            if (clamp) v = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v));
            _mm256_maskstore_ps(yc + o * OP, m, v);
        }
    }
#else
    float a[8][L];
    for (int i = 0; i < 8; i++)
        for (int l = 0; l < L; l++) a[i][l] = bj[l];
    const float *wp = wj;
    for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) {
            const int64_t o = kh * th + kw * tw;
            for (int64_t c = 0; c < Cg; c++, wp += L)
                for (int i = 0; i < 8; i++) {
                    const float xv = pb[i][o + c];
                    for (int l = 0; l < L; l++) a[i][l] += wp[l] * xv;
                }
        }
    for (int64_t o = 0; o < nv; o++)
        for (int64_t i = 0; i < np; i++) {
            float v = a[i][o];
            if (rc) v += rc[o * OP + i];
            if (clamp) v = hi < (lo > v ? lo : v) ? hi : (lo > v ? lo : v);
            yc[o * OP + i] = v;
        }
#endif
}

/* Task t: image t / group, group t % group. */
static void gc_task(void *vctx, int64_t t, int tid) {
    const gc_run *r = (const gc_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t n = t / p->group, g = t % p->group;
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, KK = p->KH * p->KW, nch = (Mg + L - 1) / L;
    const int64_t OW = p->OW, OP = p->OH * OW, sh = p->stride_h, sw = p->stride_w;
    int64_t Hp, Wp;
    gc_dims(p, &Hp, &Wp);
    float *tile = (float *)cuvil_thread_scratch(r->scratch, tid);
    gc_pack_tile(p, r->x + (n * p->C + g * Cg) * p->H * p->W, tile, Hp, Wp);
    const int act = p->act.act;
    const int clamp = GC_AVX2 && (act == CUVIL_ACT_RELU || act == CUVIL_ACT_CLIP);
    const float lo = act == CUVIL_ACT_RELU ? 0.0f : p->act.alpha, hi = act == CUVIL_ACT_RELU ? INFINITY : p->act.beta;
    float *yg = r->y + (n * p->M + g * Mg) * OP;
    const float *rg = r->residual ? r->residual + (n * p->M + g * Mg) * OP : NULL;
    for (int64_t j = 0; j < nch; j++) {
        const int64_t nv = cuvil_min_i64(L, Mg - j * L);
        float bj[L];
        for (int64_t l = 0; l < L; l++) bj[l] = l < nv && r->bias ? r->bias[g * Mg + j * L + l] : 0.0f;
        const float *wj = r->w + ((g * nch + j) * KK) * Cg * L;
        int64_t oh = 0, ow = 0; /* pixel q0's */
        for (int64_t q0 = 0; q0 < OP; q0 += 8) {
            const float *pb[8];
            int64_t h = oh, w = ow;
            for (int i = 0; i < 8; i++) {
                pb[i] = tile + (h * sh * Wp + w * sw) * Cg;
                if (q0 + i + 1 < OP && ++w == OW) w = 0, h++; /* past the end: the last pixel again */
            }
            ow += 8;
            while (ow >= OW) ow -= OW, oh++;
            gc_block(p, pb, wj, bj, Wp, nv, cuvil_min_i64(8, OP - q0), yg + j * L * OP + q0,
                     rg ? rg + j * L * OP + q0 : NULL, OP, clamp, lo, hi);
        }
    }
    if (act != CUVIL_ACT_NONE && !clamp) cuvil_f32_act_rows(&p->act, yg, (size_t)(Mg * OP), 1, (size_t)(Mg * OP));
}

void cuvil_f32_gconv2d(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                       const float *residual, float *y, void *scratch) {
    if (p->N <= 0 || p->M <= 0 || p->OH <= 0 || p->OW <= 0) return;
    gc_run r = {p, x, w_packed, bias, residual, y, (float *)scratch};
    const int64_t tasks = p->N * p->group;
    if (cuvil_threads() <= 1) {
        for (int64_t t = 0; t < tasks; t++) gc_task(&r, t, 0);
        return;
    }
    cuvil_parallel_for(tasks, gc_task, &r);
}
