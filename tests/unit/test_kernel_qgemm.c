/*
 * test_kernel_qgemm.c -- the integer GEMM (cuvil_qgemm) and convolution (cuvil_qconv), with
 * every microkernel this CPU runs, against naive int64 loops written here.
 *
 * Covers: uint8/int8 on either side, zero points absent, one, per row and per column, the
 * three epilogues (int32; requantized to uint8/int8 with int32 bias, per-column or per-row
 * scales and a raised lower clamp; float with bias), edge shapes around MR, 16 and the K block
 * (K = 0, 1, 3, 513, 1100), A and B packed ahead or each call (B in 8 or 16 bits, or packed
 * pair-split: with every kernel, and the vpmaddubsw one only so), a pool of 3
 * threads, the extreme operands that make a 16-bit pairwise sum saturate (255 * 127 * 2), and
 * convolutions with padding (x's zero point outside the image, pads wider than the kernel),
 * stride, dilation, groups, depthwise, 1x1 (x read in place) and pixel counts off 16.
 */
#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

static int rnd8(int t) { return t == CUVIL_T_I8 ? (int)(ktu_u32() % 256) - 128 : (int)(ktu_u32() % 256); }
static void fill8(int t, void *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (t == CUVIL_T_I8) ((int8_t *)p)[i] = (int8_t)rnd8(t);
        else ((uint8_t *)p)[i] = (uint8_t)rnd8(t);
    }
}
static int64_t get8(int t, const void *p, int64_t i) {
    return t == CUVIL_T_I8 ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* The expected output element from the exact sum (int64), as the epilogue defines it; *tol:
 * 1 for a requantized value (float rounding next to a tie), 0 else. */
static double expect(const cuvil_qgemm_epi *e, int64_t acc, int64_t m, int64_t n) {
    const int64_t si = e->scale_per == CUVIL_QPER_ROW ? m : e->scale_per == CUVIL_QPER_COL ? n : 0;
    const int64_t bi = e->bias_per == CUVIL_QPER_ROW ? m : e->bias_per == CUVIL_QPER_COL ? n : 0;
    if (e->kind == CUVIL_QEPI_I32) return (double)(int32_t)(uint32_t)(uint64_t)acc;
    if (e->kind == CUVIL_QEPI_F32)
        return (double)(acc + (e->ibias ? e->ibias[bi] : 0)) * e->scale[si] + (e->fbias ? e->fbias[bi] : 0);
    double v = nearbyint((double)(acc + (e->ibias ? e->ibias[bi] : 0)) * e->scale[si]) + e->yzp;
    return v < e->lo ? e->lo : v > e->hi ? e->hi : v;
}

static double got(const cuvil_qgemm_epi *e, int64_t o) {
    if (e->kind == CUVIL_QEPI_I32) return ((const int32_t *)e->y)[o];
    if (e->kind == CUVIL_QEPI_F32) return ((const float *)e->y)[o];
    return e->yt == CUVIL_T_I8 ? ((const int8_t *)e->y)[o] : ((const uint8_t *)e->y)[o];
}

static int close_enough(const cuvil_qgemm_epi *e, double g, double x) {
    if (e->kind == CUVIL_QEPI_I32) return g == x;
    if (e->kind == CUVIL_QEPI_F32) return fabs(g - x) <= 1e-5 * fabs(x) + 1e-3;
    return fabs(g - x) <= 1;
}

typedef struct gcase {
    int64_t M, N, K;
    int at, bt, azn, bzn;   /* zero points: 0 none, 1 one, 2 per row / column */
    int kind, per, packed, threads;
    int split;   /* B packed pair-split (1: B as filled; 2: B's values small, a few at the extremes) */
} gcase;

static void run_gemm(const cuvil_qgemm_ukernel_desc *uk, const gcase *c) {
    const int64_t M = c->M, N = c->N, K = c->K;
    uint8_t *A = ktu_alloc((size_t)(M * K) + 1), *B = ktu_alloc((size_t)(K * N) + 1);
    uint8_t *za = ktu_alloc((size_t)M + 1), *zb = ktu_alloc((size_t)N + 1);
    fill8(c->at, A, M * K);
    fill8(c->bt, B, K * N);
    if (c->split == 2)   /* (most pairs inside int16, as weights are: few corrections, or none) */
        for (int64_t i = 0; i < K * N; i++) {
            const int v = ktu_u32() % 200 == 0 ? (ktu_u32() % 2 ? 127 : -128) : (int)(ktu_u32() % 81) - 40;
            if (c->bt == CUVIL_T_I8) ((int8_t *)B)[i] = (int8_t)v;
            else ((uint8_t *)B)[i] = (uint8_t)(v + 128);
        }
    fill8(c->at, za, M);
    fill8(c->bt, zb, N);
    const int64_t az_n = c->azn == 2 ? M : c->azn, bz_n = c->bzn == 2 ? N : c->bzn;
    float *scale = ktu_falloc((size_t)(M + N) + 1), *fbias = ktu_falloc((size_t)(M + N) + 1);
    int32_t *ibias = ktu_alloc(sizeof(int32_t) * (size_t)(M + N + 1));
    for (int64_t i = 0; i < M + N; i++) {
        scale[i] = ktu_uniform(1e-5f, 4e-4f);
        fbias[i] = ktu_uniform(-1, 1);
        ibias[i] = (int32_t)(ktu_u32() % 20001) - 10000;
    }
    cuvil_qgemm_epi e = {.kind = c->kind, .yt = c->bt, .scale = scale, .scale_per = c->per, .bias_per = c->per,
                         .ldy = N + 3};
    if (c->kind == CUVIL_QEPI_REQUANT) {
        e.ibias = ibias;
        e.yzp = c->bt == CUVIL_T_I8 ? 5 : 130;
        e.lo = c->per == CUVIL_QPER_ROW ? e.yzp : c->bt == CUVIL_T_I8 ? -128 : 0;   /* a fused Relu */
        e.hi = c->bt == CUVIL_T_I8 ? 127 : 255;
    }
    if (c->kind == CUVIL_QEPI_F32) {
        e.fbias = fbias;
        if (c->packed) e.ibias = ibias;
    }
    const size_t ysz = (size_t)(M * e.ldy) * 4 + 4;
    e.y = ktu_alloc(ysz);
    memset(e.y, 0x5a, ysz);
    void *Bp = NULL, *Ap = NULL;
    if (c->packed && uk->bw == 1) {   /* B packed ahead; A too, in every other case */
        if (c->split) {
            Bp = ktu_alloc(cuvil_qgemm_packed_b_split_bytes(K, N, cuvil_qgemm_pair_excess(K, N, c->bt, B, N, 1)));
            cuvil_qgemm_pack_b_split(K, N, c->bt, B, N, 1, Bp);
        } else {
            Bp = ktu_alloc(cuvil_qgemm_packed_b_bytes(K, N));
            cuvil_qgemm_pack_b(K, N, c->bt, B, N, 1, Bp);
        }
        if (M % 2) {
            Ap = ktu_alloc(cuvil_qgemm_packed_a_bytes(M, K));
            cuvil_qgemm_pack_a(M, K, c->at, A, K, Ap);
        }
    }
    const size_t per = CUVIL_ALIGN_UP(cuvil_qgemm_scratch_size(M, N, K, Ap != NULL, Bp != NULL), 64);
    void *scratch = ktu_alloc(per * 3);
    cuvil_pool *pool = c->threads > 1 ? cuvil_pool_create(c->threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
    const cuvil_pool *prev = cuvil_pool_bind(pool);
    cuvil_qgemm_with(uk, M, N, K, c->at, A, K, Ap, c->bt, B, N, Bp, c->azn ? za : NULL, az_n, c->bzn ? zb : NULL, bz_n, &e,
                     scratch);
    cuvil_pool_bind(prev);
    cuvil_pool_destroy(pool);
    int bad = 0;
    for (int64_t m = 0; m < M && !bad; m++)
        for (int64_t n = 0; n < N && !bad; n++) {
            const int64_t zam = c->azn ? get8(c->at, za, az_n > 1 ? m : 0) : 0, zbn = c->bzn ? get8(c->bt, zb, bz_n > 1 ? n : 0) : 0;
            int64_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (get8(c->at, A, m * K + k) - zam) * (get8(c->bt, B, k * N + n) - zbn);
            const double x = expect(&e, acc, m, n), g = got(&e, m * e.ldy + n);
            ktu_checks++;
            if (!close_enough(&e, g, x)) {
                ktu_fail("qgemm %s M%lld N%lld K%lld at%d bt%d za%d zb%d kind%d per%d packed%d split%d thr%d: [%lld,%lld] %g, "
                         "expected %g", uk->name, (long long)M, (long long)N, (long long)K, c->at, c->bt, c->azn, c->bzn, c->kind,
                         c->per, c->packed, c->split, c->threads, (long long)m, (long long)n, g, x);
                bad = 1;
            }
        }
    /* the padding between rows is untouched */
    const size_t esz = c->kind == CUVIL_QEPI_REQUANT ? 1 : 4;
    for (int64_t m = 0; m < M && !bad; m++)
        for (int64_t n = N; n < e.ldy; n++)
            if (((const uint8_t *)e.y)[(size_t)(m * e.ldy + n) * esz] != 0x5a) {
                ktu_fail("qgemm %s wrote past column N at row %lld", uk->name, (long long)m);
                bad = 1;
                break;
            }
    free(A), free(B), free(za), free(zb), free(scale), free(fbias), free(ibias), free(e.y), free(Bp), free(Ap), free(scratch);
}

static void test_gemm(const cuvil_qgemm_ukernel_desc *uk) {
    static const int64_t shapes[][3] = {{1, 1, 1},  {1, 16, 4},    {2, 17, 3},   {13, 15, 5},   {12, 33, 64},
                                        {97, 31, 513}, {5, 257, 37}, {200, 300, 130}, {3, 5, 0}, {25, 40, 1100},
                                        {4, 48, 700},  {1, 100, 600}};   /* (up to 4 rows: a 4-row kernel where there is one) */
    static const int types[2] = {CUVIL_T_U8, CUVIL_T_I8};
    int i = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++, i++) {
                gcase c = {shapes[s][0], shapes[s][1], shapes[s][2], types[ta], types[tb], i % 3, (i / 3) % 3,
                           i % 3 == 2 ? CUVIL_QEPI_F32 : (i % 3 == 1 ? CUVIL_QEPI_REQUANT : CUVIL_QEPI_I32),
                           (i / 2) % 2 ? CUVIL_QPER_ROW : CUVIL_QPER_COL, i % 2, (i % 5 == 0) ? 3 : 1, 0};
                run_gemm(uk, &c);
                /* B packed pair-split: every kernel adds the corrections; a split kernel runs
                 * only on such a B */
                c.packed = 1;
                c.split = 1 + (i / 4) % 2;
                if (uk->split || i % 4 == 1) run_gemm(uk, &c);
            }
    /* each epilogue on a thread pool, across several tasks */
    for (int kind = 0; kind < 3; kind++) {
        gcase c = {250, 600, 700, CUVIL_T_U8, CUVIL_T_I8, 1, 2, kind, CUVIL_QPER_COL, 1, 3, uk->split ? 2 : 0};
        run_gemm(uk, &c);
        c.split = 1 + kind % 2;
        run_gemm(uk, &c);
    }
}

/* 255 x 127 + 255 x 127 overflows int16 (a vpmaddubsw pair); -128 ones at the other end. B raw
 * (packed each call), then packed pair-split: each (127, 127) pair of columns 0-9 needs a
 * correction (the (-128, 127) pairs of columns 10-19 none; -128 pairs: the random cases). */
static void test_extremes(const cuvil_qgemm_ukernel_desc *uk) {
    const int64_t M = 13, N = 20, K = 1000;
    uint8_t *A = ktu_alloc((size_t)(M * K));
    int8_t *B = ktu_alloc((size_t)(K * N));
    memset(A, 255, (size_t)(M * K));
    for (int64_t i = 0; i < K * N; i++) B[i] = (int8_t)((i / N) % 2 || (i % N) < 10 ? 127 : -128);
    int32_t *y = ktu_alloc(sizeof(int32_t) * (size_t)(M * N));
    cuvil_qgemm_epi e = {.kind = CUVIL_QEPI_I32, .y = y, .ldy = N};
    void *scratch = ktu_alloc(cuvil_qgemm_scratch_size(M, N, K, 0, 0));
    void *Bp = ktu_alloc(cuvil_qgemm_packed_b_split_bytes(K, N, cuvil_qgemm_pair_excess(K, N, CUVIL_T_I8, B, N, 1)));
    cuvil_qgemm_pack_b_split(K, N, CUVIL_T_I8, B, N, 1, Bp);
    for (int split = 0; split < 2; split++) {
        memset(y, 0, sizeof(int32_t) * (size_t)(M * N));
        cuvil_qgemm_with(uk, M, N, K, CUVIL_T_U8, A, K, NULL, CUVIL_T_I8, split ? NULL : B, N, split ? Bp : NULL, NULL, 0, NULL,
                         0, &e, scratch);
        for (int64_t n = 0; n < N; n++) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += 255 * (int64_t)B[k * N + n];
            ktu_checks++;
            if (y[n] != acc || y[(M - 1) * N + n] != acc) {
                ktu_fail("qgemm %s extremes%s: column %lld gives %d, expected %lld", uk->name, split ? ", B pair-split" : "",
                         (long long)n, y[n], (long long)acc);
                break;
            }
        }
    }
    free(A), free(B), free(y), free(scratch), free(Bp);
}

typedef struct ccase {
    int64_t N, C, H, W, M, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group;
    int xt, wt, wzn, kind;
} ccase;

static void run_conv(const cuvil_qgemm_ukernel_desc *uk, const ccase *c) {
    cuvil_conv2d_params p = {.N = c->N, .C = c->C, .H = c->H, .W = c->W, .M = c->M, .KH = c->KH, .KW = c->KW,
                             .stride_h = c->sh, .stride_w = c->sw, .pad_t = c->pt, .pad_l = c->pl, .dil_h = c->dh,
                             .dil_w = c->dw, .group = c->group};
    p.OH = (c->H + c->pt + c->pb - ((c->KH - 1) * c->dh + 1)) / c->sh + 1;
    p.OW = (c->W + c->pl + c->pr - ((c->KW - 1) * c->dw + 1)) / c->sw + 1;
    const int64_t Cg = c->C / c->group, Mg = c->M / c->group, K = Cg * c->KH * c->KW, P = p.OH * p.OW;
    const int64_t nx = c->N * c->C * c->H * c->W, nw = c->M * K, ny = c->N * c->M * P;
    uint8_t *x = ktu_alloc((size_t)nx), *w = ktu_alloc((size_t)nw), xz[1], *wz = ktu_alloc((size_t)c->M);
    fill8(c->xt, x, nx);
    fill8(c->wt, w, nw);
    fill8(c->xt, xz, 1);
    fill8(c->wt, wz, c->M);
    const int64_t wz_n = c->wzn == 2 ? c->M : c->wzn;
    float *scale = ktu_falloc((size_t)c->M);
    int32_t *bias = ktu_alloc(sizeof(int32_t) * (size_t)c->M);
    for (int64_t i = 0; i < c->M; i++) {
        scale[i] = ktu_uniform(1e-4f, 2e-3f);
        bias[i] = (int32_t)(ktu_u32() % 4001) - 2000;
    }
    /* y of x's type (int8 output: the packs and truncations of the signed path) */
    cuvil_qgemm_epi e = {.kind = c->kind, .yt = c->xt, .scale = scale, .scale_per = CUVIL_QPER_ROW,
                         .bias_per = CUVIL_QPER_ROW, .ldy = P};
    if (c->kind == CUVIL_QEPI_REQUANT && c->xt == CUVIL_T_I8) e.ibias = bias, e.yzp = 5, e.lo = -128, e.hi = 127;
    else if (c->kind == CUVIL_QEPI_REQUANT) e.ibias = bias, e.yzp = 100, e.lo = 0, e.hi = 255;
    e.y = ktu_alloc((size_t)ny * 4);
    /* every other case on a pool of 3 threads (the patches and the GEMM in tasks) */
    static int nth = 0;
    const int threads = (nth++ % 2) ? 3 : 1;
    const size_t per = CUVIL_ALIGN_UP(cuvil_qconv_scratch_size(&p), 64);
    void *scratch = ktu_alloc(per * (size_t)threads), *wp = ktu_alloc(cuvil_qconv_packed_w_bytes(&p));
    cuvil_qconv_pack_w(&p, c->wt, w, wp);
    cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
    const cuvil_pool *prev = cuvil_pool_bind(pool);
    cuvil_qconv_with(uk, &p, c->xt, x, xz, wp, c->wzn ? wz : NULL, wz_n, &e, scratch);
    cuvil_pool_bind(prev);
    cuvil_pool_destroy(pool);
    const int64_t zx = get8(c->xt, xz, 0);
    int bad = 0;
    for (int64_t n = 0; n < c->N && !bad; n++)
        for (int64_t m = 0; m < c->M && !bad; m++) {
            const int64_t g = m / Mg, zw = c->wzn ? get8(c->wt, wz, wz_n > 1 ? m : 0) : 0;
            for (int64_t oh = 0; oh < p.OH && !bad; oh++)
                for (int64_t ow = 0; ow < p.OW && !bad; ow++) {
                    int64_t acc = 0;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                const int64_t ih = oh * c->sh - c->pt + kh * c->dh, iw = ow * c->sw - c->pl + kw * c->dw;
                                const int64_t xv = ih >= 0 && ih < c->H && iw >= 0 && iw < c->W
                                                       ? get8(c->xt, x, ((n * c->C + g * Cg + ci) * c->H + ih) * c->W + iw)
                                                       : zx;
                                acc += (xv - zx) * (get8(c->wt, w, ((m * Cg + ci) * c->KH + kh) * c->KW + kw) - zw);
                            }
                    const int64_t o = (n * c->M + m) * P + oh * p.OW + ow;
                    const double ex = expect(&e, acc, m, 0), gv = got(&e, o);
                    ktu_checks++;
                    if (!close_enough(&e, gv, ex)) {
                        ktu_fail("qconv %s C%lld M%lld %lldx%lld k%lldx%lld g%lld: y[%lld] %g, expected %g", uk->name,
                                 (long long)c->C, (long long)c->M, (long long)c->H, (long long)c->W, (long long)c->KH,
                                 (long long)c->KW, (long long)c->group, (long long)o, gv, ex);
                        bad = 1;
                    }
                }
        }
    free(x), free(w), free(wz), free(scale), free(bias), free(e.y), free(scratch), free(wp);
}

static void test_conv(const cuvil_qgemm_ukernel_desc *uk) {
    const int U = CUVIL_T_U8, S = CUVIL_T_I8;
    const ccase cs[] = {
        {1, 3, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, U, S, 1, CUVIL_QEPI_REQUANT},
        {2, 16, 7, 7, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, S, S, 2, CUVIL_QEPI_I32},
        {1, 8, 10, 9, 8, 3, 3, 2, 2, 1, 0, 2, 1, 1, 1, 8, U, U, 2, CUVIL_QEPI_REQUANT},   /* depthwise */
        {1, 12, 8, 8, 6, 3, 2, 1, 2, 2, 1, 0, 1, 2, 1, 3, U, S, 0, CUVIL_QEPI_F32},
        {1, 64, 14, 14, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, U, S, 2, CUVIL_QEPI_REQUANT},
        {2, 5, 13, 21, 7, 5, 3, 3, 2, 3, 2, 4, 0, 2, 1, 1, S, U, 1, CUVIL_QEPI_I32},   /* pads past the kernel */
        {1, 3, 4, 40, 4, 1, 7, 1, 3, 0, 3, 0, 3, 1, 1, 1, U, S, 0, CUVIL_QEPI_REQUANT},
        {2, 13, 6, 20, 8, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, U, S, 1, CUVIL_QEPI_REQUANT},   /* 1x1: x read in place */
        {1, 6, 9, 9, 5, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, U, U, 2, CUVIL_QEPI_F32},          /* 1x1 stride 2 */
        {1, 2, 9, 64, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, U, S, 1, CUVIL_QEPI_I32},       /* 32 columns inside */
        {1, 2, 9, 66, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, S, S, 1, CUVIL_QEPI_I32},
        {1, 4, 5, 70, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, U, S, 2, CUVIL_QEPI_REQUANT},   /* depthwise, wide */
        {1, 16, 7, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16, S, S, 2, CUVIL_QEPI_REQUANT}, /* depthwise 3x3: one pass */
        {2, 6, 14, 13, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 6, S, U, 1, CUVIL_QEPI_I32},      /* depthwise 5x5 */
        {1, 5, 11, 17, 5, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 5, U, S, 0, CUVIL_QEPI_F32},      /* stride 3, dilation 2 */
        {1, 3, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, U, S, 2, CUVIL_QEPI_REQUANT},    /* a 1x1 image */
        /* depthwise, requantized, >= 8 channels: 16 at a time, channels last (full and partial
         * blocks, rows of 16+ pixels in and out, strides, dilation, uneven pads, 5x5) */
        {1, 40, 19, 37, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 40, U, S, 2, CUVIL_QEPI_REQUANT},
        {2, 32, 34, 33, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 32, S, S, 1, CUVIL_QEPI_REQUANT},
        {1, 16, 20, 40, 16, 5, 5, 1, 2, 2, 0, 3, 4, 1, 1, 16, U, U, 2, CUVIL_QEPI_REQUANT},
        {1, 24, 9, 18, 24, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 24, S, S, 0, CUVIL_QEPI_REQUANT},
        {1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, U, S, 2, CUVIL_QEPI_REQUANT},
        {1, 17, 3, 3, 17, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 17, S, U, 1, CUVIL_QEPI_REQUANT},
        {1, 48, 130, 20, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 48, U, S, 2, CUVIL_QEPI_REQUANT},   /* several strips */
        {1, 16, 40, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1, 16, S, S, 1, CUVIL_QEPI_REQUANT},     /* int8 out, dilated rows */
        {1, 16, 3, 2100, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16, S, S, 2, CUVIL_QEPI_REQUANT},   /* strips of one row */
        {1, 16, 2, 4200, 16, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 16, U, S, 2, CUVIL_QEPI_REQUANT},   /* too wide: planar */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_conv(uk, &cs[i]);
}

int main(void) {
    setenv("CUVIL_OVERSUBSCRIBE", "1", 1);
    for (int i = 0; i < cuvil_qgemm_n_ukernels; i++) {
        const cuvil_qgemm_ukernel_desc *uk = &cuvil_qgemm_ukernels[i];
        if (!cuvil_qgemm_ukernel_runs(uk)) {
            printf("test_kernel_qgemm: %s not run (this CPU lacks %s)\n", uk->name, uk->features);
            continue;
        }
        test_gemm(uk);
        test_extremes(uk);
        test_conv(uk);
        printf("test_kernel_qgemm: %s checked\n", uk->name);
    }
    printf("test_kernel_qgemm: cuvil_qgemm runs %s here (%s for a conv's patches)\n", cuvil_qgemm_best(0)->name,
           cuvil_qgemm_best(1)->name);
    return ktu_finish("test_kernel_qgemm");
}
