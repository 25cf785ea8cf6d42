/*
 * winograd.c -- 3x3 stride-1 convolution by Winograd F(4x4, 3x3) (Lavin & Gray 2016).
 *
 * Each 4x4 tile of the output comes from a 6x6 patch of the input: with the 6x6 input
 * transform V = B' d B, the 6x6 weight transform U = G g G' (done at compile time, cuvil_f32_
 * conv2d_pack) and the output transform Y = A' (U . V) A, the 36 products of 9 taps x 16 outputs
 * become 36 GEMMs: for each of the 36 points xi, M[xi] (Cout x T) = U[xi] (Cout x Cin) x
 * V[xi] (Cin x T) over the T tiles. That is 4x fewer multiplies than the direct convolution;
 * the transforms add O(Cin + Cout) per tile.
 *
 * Tiles are processed in blocks of TB (V and M of a block stay in L2), each block in three
 * phases that the context's threads share: the input transform (split by input channel), the
 * 36 GEMMs (split by xi; U is prepacked into the microkernel's panels), the output transform
 * with bias, residual and activation fused (split by output channel). The transforms work on a
 * row of tiles at a time, vectorised across the tiles of the row: an input row is first split
 * into its 4 phases (x[4i + k]), so that every tap of every tile is a contiguous load. On small
 * maps the input transform runs over a few channels' tiles at once (wino_cb: at 14x14, 16
 * tiles, four channels; ResNet-50's layer3 3x3 convs 1.30-1.33 -> 1.17-1.22 ms each, one
 * thread, profile_layers' lowest of 3 runs).
 *
 * With tiles as rows (CUVIL_CONV_WINOGRAD_T) x and y may be channels last (p->layout): the
 * input transform then runs a tile at a time over a vector of channels, which lie contiguous
 * in x, into V as [point][tile][channel] (the GEMMs' A as it lies), and the output transform,
 * already vectorised over channels, stores each pixel's run of them. ResNet-50's layer2 and
 * layer3 are then channels last throughout (profile_layers, one thread, lowest of 3 runs
 * alternating with the NCHW build: the five 14x14 3x3 convs 6.28 -> 5.92 ms, the three 28x28
 * ones 3.72 -> 3.39).
 *
 * On several threads, tiles as columns (channels first: ResNets' 56x56 stage) and enough tiles for
 * two blocks a thread, each thread takes whole blocks instead (block_task), all three phases
 * in its own scratch slice, with V and M sized to half this machine's 1 MiB L2: no block's
 * V or M then passes between cores. It pays when another tenant of the host takes the shared
 * L3: in such periods ResNet-18's 56x56 3x3 convs (two threads, profile_layers, alternating)
 * took 1.33-1.39 ms each shared, 0.99-1.05 private; otherwise 0.68-0.71 against 0.72-0.73.
 *
 * Maps too small for 4x4 tiles (7x7) run F(2x2, 3x3) with tiles as rows (CUVIL_CONV_WINOGRAD2_T,
 * "F(2x2, 3x3)" below): ResNet-18's three 512-channel 7x7 convs (profile_layers, alternating
 * with the pixels-as-rows GEMM) 2.34-2.40 -> 1.68-1.74 ms each on one thread, 1.32-1.34 ->
 * 1.05-1.08 on two.
 *
 * Points (0, 1, -1, 2, -2, inf); float32 error grows with the point magnitudes, ~1e-6 relative
 * to the sum of |terms| on N(0,1) data (tests/unit/test_kernel_conv.c bounds it).
 */
#include <string.h>

#include "../rt_int.h"

/* The iterations of the loop that follows are independent (its pointers do not overlap).
 * GCC only: clang's equivalent, vectorize(assume_safety), warns -Wpass-failed where it cannot
 * vectorise (builds without optimisation, the fuzzers'). */
#if defined(__GNUC__) && !defined(__clang__)
#define IVDEP _Pragma("GCC ivdep")
#else
#define IVDEP
#endif

#define WT 6          /* transformed tile side: 4 + 3 - 1 */
#define WP (WT * WT)  /* 36 points */

/* F(2x2, 3x3) (CUVIL_CONV_WINOGRAD2_T): 2x2 output tiles from 4x4 patches, 16 points. */
static int is_f2(const cuvil_conv2d_params *p) { return p->algo == CUVIL_CONV_WINOGRAD2_T; }
static int64_t wino_points(const cuvil_conv2d_params *p) { return is_f2(p) ? 16 : WP; }
static int64_t wino_side(const cuvil_conv2d_params *p) { return is_f2(p) ? 2 : 4; }

/* ===== Geometry and scratch ============================================================ */
typedef struct wino_geo {
    int64_t TH, TW, T;   /* tiles down, across, in all (per image) */
    int64_t TB;          /* tiles per block */
} wino_geo;

/* V and M of a block (points x (Cin + Cout) x TB floats) within `budget` bytes: ~2 MiB of L2 when
 * the threads share a block, half of this machine's 1 MiB when each has its own. With tiles as
 * rows, 3 MiB: a 28x28 map's 49 tiles at 128 channels are then one block, not 32 + 17, and
 * the 2.4 MB of transformed weights are read once, not twice (the same 7 + 7 row panels);
 * ResNet-18's three such convs, profile_layers alternating: 0.43-0.44 -> 0.40 ms each on two
 * threads in the VM's fast periods, 0.72-0.75 -> 0.64-0.65 in its slow ones; one thread
 * 0.83 -> 0.78-0.80. */
#define SHARED_BUDGET (2u << 20)
#define ROWS_BUDGET (3u << 20)
#define PRIVATE_BUDGET (640u << 10)

static wino_geo wino_plan_budget(const cuvil_conv2d_params *p, int nr, size_t budget) {
    wino_geo g;
    const int64_t o = wino_side(p);
    g.TH = (p->OH + o - 1) / o;
    g.TW = (p->OW + o - 1) / o;
    g.T = g.TH * g.TW;
    int64_t tb_max = (int64_t)budget / (wino_points(p) * 4 * (p->C + p->M));
    tb_max = tb_max / nr * nr;
    if (tb_max < nr) tb_max = nr;
    if (tb_max > 128) tb_max = 128;
    const int64_t nblk = (g.T + tb_max - 1) / tb_max;
    g.TB = CUVIL_ALIGN_UP((g.T + nblk - 1) / nblk, nr);
    if (g.TB > g.T) g.TB = g.T;
    return g;
}

/* Blocks of TB tiles per image. */
static int64_t wino_blocks(const wino_geo *g) { return (g->T + g->TB - 1) / g->TB; }

static wino_geo wino_plan(const cuvil_conv2d_params *p, int nr) {
    return wino_plan_budget(p, nr, p->algo != CUVIL_CONV_WINOGRAD ? ROWS_BUDGET : SHARED_BUDGET);
}

/* Does p run with a block of tiles per thread (*g its plan)? With tiles as columns (the
 * channels-first layout: ResNets' 56x56 stage) and enough blocks for two per thread. */
static int wino_private(const cuvil_conv2d_params *p, int nr, int threads, wino_geo *g) {
    if (p->algo != CUVIL_CONV_WINOGRAD || threads <= 1) return 0;
    *g = wino_plan_budget(p, nr, PRIVATE_BUDGET);
    return p->N * wino_blocks(g) >= 2 * (int64_t)threads;
}

/* Channels whose input transform runs together: the 1-D transforms then run over CB x TB
 * values at a time rather than over one channel's TB tiles (16 at 14x14, one vector, with a
 * call and a loop around it for each of 12 transforms per channel). */
static int64_t wino_cb(int64_t TB) {
    const int64_t cb = 64 / (TB > 0 ? TB : 1);
    return cb < 1 ? 1 : cb > 8 ? 8 : cb;
}

/* The transforms' buffers: the input's D and W (36 x CB x TB each) and one row's phases
 * (4 x (TB + 2)); the output's T (24 x TB), Y (16 x TB) and a row (4 x TB) need less. */
static size_t transform_bytes(int64_t TB) {
    size_t n = (size_t)(2 * WP * TB * wino_cb(TB) + 4 * (TB + 2));
    if (n < 40 * 64) n = 40 * 64; /* the swapped layout's output transform: T and Y of 64 channels */
    /* (and its channels-last input transform: 6 + 36 vectors of 16, fewer) */
    return CUVIL_ALIGN_UP(n * sizeof(float), 64);
}

/* Per-thread: the phases of 6 input rows and the row-transformed values of a tile row
 * segment, then the GEMM's packing scratch. */
static size_t wino_thread_bytes(const cuvil_conv2d_params *p, const wino_geo *g, const cuvil_gemm_blocking *b) {
    const size_t gemm = p->algo != CUVIL_CONV_WINOGRAD ? cuvil_gemm_job_scratch_size(g->TB, p->M, p->C, b)
                                                        : cuvil_gemm_job_scratch_size(p->M, g->TB, p->C, b);
    return transform_bytes(g->TB) + CUVIL_ALIGN_UP(gemm, 64);
}

static size_t wino_v_bytes(const cuvil_conv2d_params *p, const wino_geo *g) {
    return CUVIL_ALIGN_UP((size_t)(wino_points(p) * p->C * g->TB) * sizeof(float), 64);
}

static size_t wino_shared_bytes(const cuvil_conv2d_params *p, const wino_geo *g) {
    return wino_v_bytes(p, g) + CUVIL_ALIGN_UP((size_t)(wino_points(p) * p->M * g->TB) * sizeof(float), 64);
}

int cuvil_conv2d_winograd_applies(const cuvil_conv2d_params *p) {
    return p->KH == 3 && p->KW == 3 && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 &&
           p->dil_w == 1 && p->group == 1 && p->C > 0 && p->M > 0 && p->OH > 0 && p->OW > 0;
}

/* Every thread's slice is this size: the shared blocks' V and M in slice 0, or a private
 * block's in each slice, then the per-thread buffers. */
size_t cuvil_f32_conv2d_winograd_scratch_size(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b) {
    const wino_geo g = wino_plan(p, b->uk->nr), gp = wino_plan_budget(p, b->uk->nr, PRIVATE_BUDGET);
    const size_t shared = wino_shared_bytes(p, &g) + wino_thread_bytes(p, &g, b);
    const size_t priv = wino_shared_bytes(p, &gp) + wino_thread_bytes(p, &gp, b);
    return shared > priv ? shared : priv;
}

/* ===== Weight transform (compile time) ================================================= */
size_t cuvil_f32_conv2d_winograd_packed_floats(const cuvil_conv2d_params *p, int mr) {
    if (p->algo != CUVIL_CONV_WINOGRAD) /* tiles as rows: mr is the microkernel's NR */
        return (size_t)wino_points(p) * cuvil_gemm_packed_b_floats(p->M, p->C, mr);
    return WP * cuvil_gemm_packed_a_floats(p->M, p->C, mr);
}

/* U[xi][m][c] = (G g[m][c] G')[xi], packed per xi into mr-row panels of kc_max blocks. */
void cuvil_f32_conv2d_winograd_pack(const cuvil_conv2d_params *p, const float *w, int mr, int64_t kc_max,
                                    float *dst, float *tmp) {
    static const double G[WT][3] = {
        {1.0 / 4, 0, 0},
        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
        {1.0 / 24, 1.0 / 12, 1.0 / 6},
        {1.0 / 24, -1.0 / 12, 1.0 / 6},
        {0, 0, 1},
    };
    static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const int64_t M = p->M, C = p->C;
    const int wt = is_f2(p) ? 4 : WT, wp = wt * wt;
    const double(*Gv)[3] = is_f2(p) ? G2 : G;
    /* tmp: wp x M x C floats, the transformed weights before packing */
    for (int64_t m = 0; m < M; m++)
        for (int64_t c = 0; c < C; c++) {
            const float *g = w + (m * C + c) * 9;
            double t[WT][3]; /* G g */
            for (int i = 0; i < wt; i++)
                for (int k = 0; k < 3; k++)
                    t[i][k] = Gv[i][0] * g[0 * 3 + k] + Gv[i][1] * g[1 * 3 + k] + Gv[i][2] * g[2 * 3 + k];
            for (int i = 0; i < wt; i++)
                for (int j = 0; j < wt; j++)
                    tmp[((size_t)(i * wt + j) * (size_t)M + (size_t)m) * (size_t)C + (size_t)c] =
                        (float)(t[i][0] * Gv[j][0] + t[i][1] * Gv[j][1] + t[i][2] * Gv[j][2]);
        }
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    if (p->algo != CUVIL_CONV_WINOGRAD) {
        /* U[xi] [M, C] as the B operand (trans_b: B[c, m] = U[m, c]), mr its panel width */
        j.N = M;
        j.K = C;
        j.ldb = C;
        j.trans_b = 1;
        const size_t per = cuvil_gemm_packed_b_floats(M, C, mr);
        for (int xi = 0; xi < wp; xi++) {
            j.B = tmp + (size_t)xi * (size_t)(M * C);
            cuvil_gemm_pack_b_all(&j, mr, kc_max, dst + (size_t)xi * per);
        }
        return;
    }
    j.M = M;
    j.K = C;
    j.lda = C;
    j.alpha = 1.0f;
    const size_t per = cuvil_gemm_packed_a_floats(M, C, mr);
    for (int xi = 0; xi < WP; xi++) {
        j.A = tmp + (size_t)xi * (size_t)(M * C);
        cuvil_gemm_pack_a_all(&j, mr, kc_max, dst + (size_t)xi * per);
    }
}

/* ===== The three phases ================================================================= */
typedef struct wino_run {
    const cuvil_conv2d_params *p;
    const cuvil_gemm_blocking *b;
    const float *x, *wp, *bias, *residual;
    float *y;
    void *scratch;
    size_t shared;        /* offset of the per-thread part in every slice */
    wino_geo g;
    float *V, *Mb;        /* [WP][C][TB], [WP][M][TB] */
    int64_t n;            /* image */
    int64_t t0, nt;       /* this block's tiles */
    int64_t per_c;        /* channels per task in the transforms (tiles, channels-last x) */
    int64_t parts;        /* wino_t_private: the parts of an image's tiles, one a thread */
} wino_run;

static float *thread_part(const wino_run *r, int tid) {
    return (float *)((char *)cuvil_thread_scratch(r->scratch, tid) + r->shared);
}

/* o[q*os + e] = (B' d)[q] with d[q] = d[q*ds + e], for e < L: the 1-D input transform. */
static inline __attribute__((always_inline)) void bt6(const float *restrict d, int64_t ds, float *restrict o, int64_t os,
                                                      int64_t L) {
    const float *d0 = d, *d1 = d + ds, *d2 = d + 2 * ds, *d3 = d + 3 * ds, *d4 = d + 4 * ds, *d5 = d + 5 * ds;
    float *o0 = o, *o1 = o + os, *o2 = o + 2 * os, *o3 = o + 3 * os, *o4 = o + 4 * os, *o5 = o + 5 * os;
    /* (restrict is lost where this is inlined: without IVDEP the loop is versioned on a range
     * check that V and a thread's transform buffers, both in the scratch, fail, and runs scalar;
     * ResNet-50's input transforms took 5.6% of its run, 2.7% with it, perf on one thread) */
    IVDEP
    for (int64_t e = 0; e < L; e++) {
        const float a = d1[e], b = d2[e], c = d3[e], f = d4[e];
        o0[e] = 4.0f * d0[e] - 5.0f * b + f;
        o1[e] = f + c - 4.0f * (a + b);
        o2[e] = f - c + 4.0f * (a - b);
        o3[e] = f - b + 2.0f * (c - a);
        o4[e] = f - b - 2.0f * (c - a);
        o5[e] = 4.0f * a - 5.0f * c + d5[e];
    }
}

/* o[k*os + e] = (A' s)[k], k < 4, with s[q] = s[q*ss + e]: the 1-D output transform. */
static void at4(const float *restrict s, int64_t ss, float *restrict o, int64_t os, int64_t L) {
    const float *s0 = s, *s1 = s + ss, *s2 = s + 2 * ss, *s3 = s + 3 * ss, *s4 = s + 4 * ss, *s5 = s + 5 * ss;
    float *o0 = o, *o1 = o + os, *o2 = o + 2 * os, *o3 = o + 3 * os;
    IVDEP /* as in bt6, should this be inlined */
    for (int64_t e = 0; e < L; e++) {
        const float p12 = s1[e] + s2[e], m12 = s1[e] - s2[e], p34 = s3[e] + s4[e], m34 = s3[e] - s4[e];
        o0[e] = s0[e] + p12 + p34;
        o1[e] = m12 + 2.0f * m34;
        o2[e] = p12 + 4.0f * p34;
        o3[e] = m12 + 8.0f * m34 + s5[e];
    }
}

static void input_task(void *vctx, int64_t task, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t H = p->H, W = p->W, TW = r->g.TW, TB = r->g.TB, seg = TB + 2, nt = r->nt;
    const int64_t CB = wino_cb(TB), S = CB * TB; /* floats per point: CB channels of TB tiles */
    float *D = thread_part(r, tid);   /* [6 r][6 c][CB][TB]: the 6x6 patch of each tile */
    float *Wt = D + WP * S;           /* [6 r][6 j][CB][TB]: rows transformed */
    float *P = Wt + WP * S;           /* [4 k][seg]: one input row's phases */
    const int64_t c0 = task * r->per_c, c1 = cuvil_min_i64(p->C, c0 + r->per_c);
    /* the tiles past nt of each channel but the last are transformed too (and their V never
     * read): zeros, not whatever the scratch held */
    if (nt < TB && CB > 1) memset(D, 0, (size_t)(WP * S) * sizeof(float));
    for (int64_t cg = c0; cg < c1; cg += CB) {
        const int64_t cb = cuvil_min_i64(CB, c1 - cg);
        for (int64_t cl = 0; cl < cb; cl++) {
            const float *xc = r->x + (r->n * p->C + cg + cl) * H * W;
            float *Dc = D + cl * TB;
            /* gather: D[rr][cc][cl][tile] = x[4 th + rr - pad_t][4 tw + cc - pad_l], a tile row at a time */
            for (int64_t t = r->t0; t < r->t0 + nt;) {
                const int64_t th = t / TW, a = t % TW;
                const int64_t L = cuvil_min_i64(TW - a, r->t0 + nt - t); /* tiles [a, a + L) of row th */
                const int64_t col = t - r->t0;
                const int64_t iw0 = 4 * a - p->pad_l, iw1 = 4 * (a + L) + 3 - p->pad_l; /* columns read */
                for (int rr = 0; rr < WT; rr++) {
                    const int64_t ih = 4 * th + rr - p->pad_t;
                    if (ih < 0 || ih >= H) {
                        for (int cc = 0; cc < WT; cc++) memset(Dc + (rr * WT + cc) * S + col, 0, (size_t)L * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + ih * W;
                    if (iw0 >= 0 && iw1 < W) {
                        const float *xs = xr + iw0;
                        for (int k = 0; k < 4; k++)
                            for (int64_t i = 0; i <= L; i++) P[k * seg + i] = xs[4 * i + k];
                    } else {
                        for (int k = 0; k < 4; k++)
                            for (int64_t i = 0; i <= L; i++) {
                                const int64_t iw = iw0 + 4 * i + k;
                                P[k * seg + i] = iw >= 0 && iw < W ? xr[iw] : 0.0f;
                            }
                    }
                    /* column cc of tile i is phase cc % 4 at i + cc / 4 */
                    for (int cc = 0; cc < WT; cc++)
                        memcpy(Dc + (rr * WT + cc) * S + col, P + (cc % 4) * seg + cc / 4, (size_t)L * sizeof(float));
                }
                t += L;
            }
        }
        /* along each row, then down each column, over the group's channels and tiles at once:
         * V[xi][c][tile] is contiguous over a run of channels */
        const int64_t len = (cb - 1) * TB + nt;
        for (int rr = 0; rr < WT; rr++) bt6(D + rr * WT * S, S, Wt + rr * WT * S, S, len);
        float *Vc = r->V + cg * TB;
        for (int j = 0; j < WT; j++) bt6(Wt + j * S, WT * S, Vc + j * p->C * TB, WT * p->C * TB, len);
    }
}

/* The input transform of a channels-last x (the swapped layout only): a tile at a time,
 * vectorised across a run of WV channels, whose 36 pixel vectors are contiguous in x; V is
 * then [WP][TB][C], each point's tiles as the rows of its GEMM's A, a channel run a vector.
 * A tile row inside the image is transformed straight from x; one that crosses its edge from
 * a copy with zeros for the padding. */
#define WV 16

/* bt6 over L <= WV lanes; a whole vector's with the count a constant (one register a row). */
static inline __attribute__((always_inline)) void bt6_lanes(const float *d, int64_t ds, float *o, int64_t os, int64_t L) {
    if (L == WV) bt6(d, ds, o, os, WV);
    else bt6(d, ds, o, os, L);
}

static void input_task_nhwc(void *vctx, int64_t task, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t H = p->H, W = p->W, C = p->C, TW = r->g.TW, TB = r->g.TB;
    const int64_t q0 = task * r->per_c, q1 = cuvil_min_i64(r->nt, q0 + r->per_c);
    const float *xn = r->x + r->n * H * W * C;
    float *d = thread_part(r, tid), *w = d + WT * WV; /* one padded tile row; the rows transformed */
    for (int64_t q = q0; q < q1; q++) {
        const int64_t th = (r->t0 + q) / TW, tw = (r->t0 + q) % TW;
        const int64_t iw0 = 4 * tw - p->pad_l;
        const int cols_in = iw0 >= 0 && iw0 + WT <= W;
        for (int64_t c0 = 0; c0 < C; c0 += WV) {
            const int64_t L = cuvil_min_i64(WV, C - c0);
            /* along each row (the 6 pixels of tile row rr, C apart in x) */
            for (int rr = 0; rr < WT; rr++) {
                const int64_t ih = 4 * th + rr - p->pad_t;
                float *wr = w + rr * WT * WV;
                if (ih >= 0 && ih < H && cols_in) {
                    bt6_lanes(xn + (ih * W + iw0) * C + c0, C, wr, WV, L);
                    continue;
                }
                for (int cc = 0; cc < WT; cc++) {
                    const int64_t iw = iw0 + cc;
                    float *dv = d + cc * WV;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W) memcpy(dv, xn + (ih * W + iw) * C + c0, (size_t)L * sizeof(float));
                    else memset(dv, 0, WV * sizeof(float));
                }
                bt6(d, WV, wr, WV, L);
            }
            /* then down each column into V[xi][q][c0 ..] */
            float *Vq = r->V + q * C + c0;
            for (int j = 0; j < WT; j++) bt6_lanes(w + j * WV, WT * WV, Vq + j * TB * C, WT * TB * C, L);
        }
    }
}

static void gemm_task(void *vctx, int64_t xi, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t TB = r->g.TB;
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    if (p->algo != CUVIL_CONV_WINOGRAD) {
        /* M'[xi] (tiles x Cout) = V[xi]' (tiles x Cin) U[xi]': V is [Cin][TB], the A operand
         * stored transposed; the product lands as [xi][tile][m] */
        j.M = r->nt;
        j.N = p->M;
        j.K = p->C;
        j.alpha = 1.0f;
        j.A = r->V + xi * p->C * TB;
        j.lda = TB;
        j.trans_a = 1;
        if ((p->layout & CUVIL_CONV_X_NHWC) || is_f2(p)) { /* V is [xi][TB][C] */
            j.lda = p->C;
            j.trans_a = 0;
        }
        j.b_packed = r->wp + (size_t)xi * cuvil_gemm_packed_b_floats(p->M, p->C, (int)p->packed_mr);
        j.b_packed_nr = (int)p->packed_mr;
        j.b_packed_kc = p->packed_kc;
        j.C = r->Mb + xi * TB * p->M;
        j.ldc = p->M;
        /* (the blocked GEMM at every block's size: a block of one tile would take the one-row
         * product, whose sums run in another order, and the blocks' sizes depend on the threads:
         * a model's output would change with their number) */
        cuvil_f32_gemm_run_range(&j, r->b, (char *)thread_part(r, tid) + transform_bytes(TB), 0, j.M, 0, j.N);
        return;
    }
    j.M = p->M;
    j.N = r->nt;
    j.K = p->C;
    j.alpha = 1.0f;
    j.a_packed = r->wp + (size_t)xi * cuvil_gemm_packed_a_floats(p->M, p->C, (int)p->packed_mr);
    j.a_packed_mr = (int)p->packed_mr;
    j.a_packed_kc = p->packed_kc;
    j.B = r->V + xi * p->C * TB;
    j.ldb = TB;
    j.C = r->Mb + xi * p->M * TB;
    j.ldc = TB;
    cuvil_f32_gemm_run_range(&j, r->b, (char *)thread_part(r, tid) + transform_bytes(TB), 0, j.M, 0, j.N);
}

static void output_task(void *vctx, int64_t task, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t OH = p->OH, OW = p->OW, TW = r->g.TW, TB = r->g.TB, nt = r->nt;
    float *T = thread_part(r, tid); /* [4 k][6 j][TB]: A' down the columns */
    float *Y = T + 24 * TB;         /* [4 k][4 l][TB]: the 4x4 outputs of each tile */
    float *row = Y + 16 * TB;       /* one output row of a tile row segment */
    const int64_t m0 = task * r->per_c, m1 = cuvil_min_i64(p->M, m0 + r->per_c);
    const cuvil_act_params *act = &p->act;
    const int64_t xs = p->M * TB; /* between two points of one output channel in M */
    for (int64_t m = m0; m < m1; m++) {
        const float *Mm = r->Mb + m * TB;
        for (int j = 0; j < WT; j++) at4(Mm + j * xs, WT * xs, T + j * TB, WT * TB, nt);
        for (int k = 0; k < 4; k++) at4(T + k * WT * TB, TB, Y + k * 4 * TB, TB, nt);
        float *ym = r->y + (r->n * p->M + m) * OH * OW;
        const float *rm = r->residual ? r->residual + (r->n * p->M + m) * OH * OW : NULL;
        const float bv = r->bias ? r->bias[m] : 0.0f;
        for (int64_t t = r->t0; t < r->t0 + nt;) {
            const int64_t th = t / TW, a = t % TW;
            const int64_t L = cuvil_min_i64(TW - a, r->t0 + nt - t);
            const int64_t col = t - r->t0;
            const int64_t nvalid = cuvil_min_i64(4 * L, OW - 4 * a);
            for (int k = 0; k < 4 && 4 * th + k < OH; k++) {
                const float *y0 = Y + (k * 4 + 0) * TB + col, *y1 = Y + (k * 4 + 1) * TB + col,
                            *y2 = Y + (k * 4 + 2) * TB + col, *y3 = Y + (k * 4 + 3) * TB + col;
                for (int64_t q = 0; q < L; q++) {
                    row[4 * q + 0] = y0[q];
                    row[4 * q + 1] = y1[q];
                    row[4 * q + 2] = y2[q];
                    row[4 * q + 3] = y3[q];
                }
                const int64_t off = (4 * th + k) * OW + 4 * a;
                float *yr = ym + off;
                if (rm) {
                    const float *rr = rm + off; /* may be yr itself: each element read before written */
                    for (int64_t q = 0; q < nvalid; q++) yr[q] = row[q] + bv + rr[q];
                } else {
                    for (int64_t q = 0; q < nvalid; q++) yr[q] = row[q] + bv;
                }
                if (act->act == CUVIL_ACT_RELU) {
                    for (int64_t q = 0; q < nvalid; q++) yr[q] = yr[q] < 0.0f ? 0.0f : yr[q];
                } else if (act->act != CUVIL_ACT_NONE) {
                    cuvil_f32_unary(act, yr, yr, (size_t)nvalid);
                }
            }
            t += L;
        }
    }
}

/* The output transform of the swapped layout (M' as [xi][tile][m]): vectorised across a block
 * of output channels, one tile at a time, then each channel's 4x4 outputs stored. */
#define OUT_T_BLOCK 64

/* A tile's output points (Y: [S x S][OUT_T_BLOCK], channels [m0, m0 + nm), the tile's corner at
 * oh0, ow0) stored: bias and residual added in Y (the residual, which may be y itself, read
 * before anything is written), the activation over all points at once, then each point's
 * channels to their places, channels first or last. */
static void store_tile(const wino_run *r, float *Y, int S, int64_t oh0, int64_t ow0, int64_t m0, int64_t nm) {
    const cuvil_conv2d_params *p = r->p;
    const int64_t OH = p->OH, OW = p->OW, M = p->M;
    const int nhwc = (p->layout & CUVIL_CONV_Y_NHWC) != 0;
    const int kn = (int)cuvil_min_i64(S, OH - oh0), ln = (int)cuvil_min_i64(S, OW - ow0);
    for (int k = 0; k < kn; k++)
        for (int l = 0; l < ln; l++) {
            float *yv = Y + (k * S + l) * OUT_T_BLOCK;
            const int64_t pix = (oh0 + k) * OW + ow0 + l;
            if (r->bias)
                for (int64_t mm = 0; mm < nm; mm++) yv[mm] += r->bias[m0 + mm];
            if (r->residual && nhwc) {
                const float *rp = r->residual + (r->n * OH * OW + pix) * M + m0;
                for (int64_t mm = 0; mm < nm; mm++) yv[mm] += rp[mm];
            } else if (r->residual) {
                const float *rp = r->residual + (r->n * M + m0) * OH * OW + pix;
                for (int64_t mm = 0; mm < nm; mm++) yv[mm] += rp[mm * OH * OW];
            }
        }
    if (p->act.act == CUVIL_ACT_RELU) {
        for (int k = 0; k < kn * S; k++)
            for (int64_t mm = 0; mm < nm; mm++) Y[k * OUT_T_BLOCK + mm] = Y[k * OUT_T_BLOCK + mm] < 0.0f ? 0.0f : Y[k * OUT_T_BLOCK + mm];
    } else {
        cuvil_f32_act_rows(&p->act, Y, OUT_T_BLOCK, (size_t)(kn * S), (size_t)nm);
    }
    for (int k = 0; k < kn; k++)
        for (int l = 0; l < ln; l++) {
            const float *yv = Y + (k * S + l) * OUT_T_BLOCK;
            const int64_t pix = (oh0 + k) * OW + ow0 + l;
            if (nhwc) {
                memcpy(r->y + (r->n * OH * OW + pix) * M + m0, yv, (size_t)nm * sizeof(float));
            } else {
                float *yp = r->y + (r->n * M + m0) * OH * OW + pix;
                for (int64_t mm = 0; mm < nm; mm++) yp[mm * OH * OW] = yv[mm];
            }
        }
}
static void output_task_t(void *vctx, int64_t task, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const int64_t TW = r->g.TW, TB = r->g.TB, M = r->p->M;
    float *T = thread_part(r, tid); /* [4 k][6 j][OUT_T_BLOCK], then Y [4 k][4 l][OUT_T_BLOCK] */
    float *Y = T + 24 * OUT_T_BLOCK;
    const int64_t m0 = task * OUT_T_BLOCK, nm = cuvil_min_i64(M - m0, OUT_T_BLOCK);
    const int64_t xs = TB * M; /* between two points */
    for (int64_t t = 0; t < r->nt; t++) {
        const int64_t tile = r->t0 + t, th = tile / TW, tw = tile % TW;
        const float *src = r->Mb + t * M + m0;
        for (int j = 0; j < WT; j++) at4(src + j * xs, WT * xs, T + j * OUT_T_BLOCK, WT * OUT_T_BLOCK, nm);
        for (int k = 0; k < 4; k++) at4(T + k * WT * OUT_T_BLOCK, OUT_T_BLOCK, Y + k * 4 * OUT_T_BLOCK, OUT_T_BLOCK, nm);
        store_tile(r, Y, 4, 4 * th, 4 * tw, m0, nm);
    }
}

/* ===== F(2x2, 3x3) with tiles as rows ===================================================
 * For maps too small for 4x4 tiles (7x7: 4 of them, 43% padding, and 4x the weights; as
 * 2x2 tiles 16, of 8x8 pixels): 2.25x fewer multiplies than the direct convolution on 1.78x
 * the weights, points (0, 1, -1, inf). Input transform B' d B with
 * B' = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], output A' m A with A' = [1 1 1 0; 0 1 -1 -1].
 * x and y each channels first or last: the input transform gathers each tile's 4x4 patch
 * for a run of WV channels (contiguous when x is channels last), V is [16][TB][C]. */
static void input_task_f2(void *vctx, int64_t task, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const cuvil_conv2d_params *p = r->p;
    const int64_t H = p->H, W = p->W, C = p->C, TW = r->g.TW, TB = r->g.TB;
    const int64_t q0 = task * r->per_c, q1 = cuvil_min_i64(r->nt, q0 + r->per_c);
    const int nhwc = (p->layout & CUVIL_CONV_X_NHWC) != 0;
    const float *xn = r->x + r->n * H * W * C;
    float *d = thread_part(r, tid), *t = d + 16 * WV; /* the 4x4 patch; its rows transformed */
    for (int64_t q = q0; q < q1; q++) {
        const int64_t th = (r->t0 + q) / TW, tw = (r->t0 + q) % TW;
        const int64_t ih0 = 2 * th - p->pad_t, iw0 = 2 * tw - p->pad_l;
        for (int64_t c0 = 0; c0 < C; c0 += WV) {
            const int64_t L = cuvil_min_i64(WV, C - c0);
            for (int rr = 0; rr < 4; rr++)
                for (int cc = 0; cc < 4; cc++) {
                    const int64_t ih = ih0 + rr, iw = iw0 + cc;
                    float *dv = d + (rr * 4 + cc) * WV;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                        memset(dv, 0, WV * sizeof(float));
                    } else if (nhwc) {
                        memcpy(dv, xn + (ih * W + iw) * C + c0, (size_t)L * sizeof(float));
                    } else {
                        const float *xs = xn + c0 * H * W + ih * W + iw;
                        for (int64_t e = 0; e < L; e++) dv[e] = xs[e * H * W];
                    }
                }
            /* along each row: t[rr][j] = (d[rr] B)[j] */
            for (int rr = 0; rr < 4; rr++) {
                const float *d0 = d + (rr * 4) * WV, *d1 = d0 + WV, *d2 = d1 + WV, *d3 = d2 + WV;
                float *o = t + rr * 4 * WV;
                for (int64_t e = 0; e < L; e++) {
                    o[e] = d0[e] - d2[e];
                    o[WV + e] = d1[e] + d2[e];
                    o[2 * WV + e] = d2[e] - d1[e];
                    o[3 * WV + e] = d1[e] - d3[e];
                }
            }
            /* then down each column into V[i * 4 + j][q][c0 ..] */
            float *Vq = r->V + q * C + c0;
            const int64_t vs = TB * C; /* between two points */
            for (int j = 0; j < 4; j++) {
                const float *s0 = t + j * WV, *s1 = s0 + 4 * WV, *s2 = s1 + 4 * WV, *s3 = s2 + 4 * WV;
                float *v0 = Vq + j * vs, *v1 = v0 + 4 * vs, *v2 = v1 + 4 * vs, *v3 = v2 + 4 * vs;
                for (int64_t e = 0; e < L; e++) {
                    v0[e] = s0[e] - s2[e];
                    v1[e] = s1[e] + s2[e];
                    v2[e] = s2[e] - s1[e];
                    v3[e] = s1[e] - s3[e];
                }
            }
        }
    }
}

/* M' as [16][tile][m]: a tile at a time over a block of OUT_T_BLOCK output channels. */
static void output_task_f2(void *vctx, int64_t task, int tid) {
    const wino_run *r = (const wino_run *)vctx;
    const int64_t TW = r->g.TW, TB = r->g.TB, M = r->p->M;
    float *T = thread_part(r, tid); /* [2 k][4 j][OUT_T_BLOCK], then Y [2 k][2 l][OUT_T_BLOCK] */
    float *Y = T + 8 * OUT_T_BLOCK;
    const int64_t m0 = task * OUT_T_BLOCK, nm = cuvil_min_i64(M - m0, OUT_T_BLOCK);
    const int64_t xs = TB * M; /* between two points */
    for (int64_t t = 0; t < r->nt; t++) {
        const int64_t tile = r->t0 + t, th = tile / TW, tw = tile % TW;
        const float *src = r->Mb + t * M + m0;
        /* down each column: T[k][j] = (A' m)[k][j] */
        for (int j = 0; j < 4; j++) {
            const float *s0 = src + j * xs, *s1 = s0 + 4 * xs, *s2 = s1 + 4 * xs, *s3 = s2 + 4 * xs;
            float *t0 = T + j * OUT_T_BLOCK, *t1 = t0 + 4 * OUT_T_BLOCK;
            for (int64_t e = 0; e < nm; e++) {
                t0[e] = s0[e] + s1[e] + s2[e];
                t1[e] = s1[e] - s2[e] - s3[e];
            }
        }
        /* along each row: Y[k][l] = (T A)[k][l] */
        for (int k = 0; k < 2; k++) {
            const float *s0 = T + k * 4 * OUT_T_BLOCK, *s1 = s0 + OUT_T_BLOCK, *s2 = s1 + OUT_T_BLOCK,
                        *s3 = s2 + OUT_T_BLOCK;
            float *y0 = Y + k * 2 * OUT_T_BLOCK, *y1 = y0 + OUT_T_BLOCK;
            for (int64_t e = 0; e < nm; e++) {
                y0[e] = s0[e] + s1[e] + s2[e];
                y1[e] = s1[e] - s2[e] - s3[e];
            }
        }
        store_tile(r, Y, 2, 2 * th, 2 * tw, m0, nm);
    }
}

/* The block r->t0, r->nt of image r->n on one thread, its three phases one after the other, V
 * and M at the start of the thread's own slice (block_task, range_task). */
static void private_block(wino_run *r, int tid) {
    const cuvil_conv2d_params *p = r->p;
    r->V = (float *)cuvil_thread_scratch(r->scratch, tid);
    r->Mb = (float *)((char *)r->V + wino_v_bytes(p, &r->g));
    if (p->layout & CUVIL_CONV_X_NHWC) {
        r->per_c = r->nt;
        input_task_nhwc(r, 0, tid);
    } else {
        r->per_c = p->C;
        input_task(r, 0, tid);
    }
    for (int xi = 0; xi < WP; xi++) gemm_task(r, xi, tid);
    if (p->algo == CUVIL_CONV_WINOGRAD_T) {
        for (int64_t mb = 0; mb * OUT_T_BLOCK < p->M; mb++) output_task_t(r, mb, tid);
    } else {
        r->per_c = p->M;
        output_task(r, 0, tid);
    }
}

/* Block `task` (image task / blocks, its tiles the next TB) on one thread. */
static void block_task(void *vctx, int64_t task, int tid) {
    wino_run r = *(const wino_run *)vctx;
    const int64_t nblk = wino_blocks(&r.g);
    r.n = task / nblk;
    r.t0 = task % nblk * r.g.TB;
    r.nt = cuvil_min_i64(r.g.TB, r.g.T - r.t0);
    private_block(&r, tid);
}

/* Does p, with tiles as rows (F(4x4)), run each image's tiles in one contiguous part a thread
 * (range_task), *g its plan? Shared, a block's V and M cross between the cores twice (the
 * input transform split by tiles, the GEMMs by point, the output transform by channel): half
 * of 36 T (C + M) floats; private, each thread reads all 36 C M floats of the transformed
 * weights, (threads - 1) x that more. Private where it moves less, with at least 32 tiles a
 * thread: ResNets' and YOLO's 56x56 and 40x40 maps (T 196 at 64 channels, 100 at 32), not their
 * 28x28 and 14x14 (49 tiles at 128 channels, 16 at 256), whose weights are the larger part. */
#define WINO_T_PRIVATE_MIN_TILES 32
static int wino_t_private(const cuvil_conv2d_params *p, int nr, int threads, wino_geo *g) {
    if (p->algo != CUVIL_CONV_WINOGRAD_T || threads <= 1) return 0;
    *g = wino_plan_budget(p, nr, PRIVATE_BUDGET);
    return g->T >= WINO_T_PRIVATE_MIN_TILES * (int64_t)threads &&
           g->T * (p->C + p->M) > 2 * (int64_t)(threads - 1) * p->C * p->M;
}

/* Part `task` % parts of image `task` / parts (its tiles the part's contiguous share, in
 * blocks of TB) on one thread. */
static void range_task(void *vctx, int64_t task, int tid) {
    wino_run r = *(const wino_run *)vctx;
    const int64_t part = task % r.parts, a = r.g.T * part / r.parts, e = r.g.T * (part + 1) / r.parts;
    r.n = task / r.parts;
    for (r.t0 = a; r.t0 < e; r.t0 += r.g.TB) {
        r.nt = cuvil_min_i64(r.g.TB, e - r.t0);
        private_block(&r, tid);
    }
}

void cuvil_f32_conv2d_winograd(const cuvil_conv2d_params *p, const float *x, const float *w_packed,
                               const float *bias, const float *residual, float *y, void *scratch,
                               const cuvil_gemm_blocking *b) {
    if (p->N <= 0) return;
    wino_run r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.b = b;
    r.x = x;
    r.wp = w_packed;
    r.bias = bias;
    r.residual = residual;
    r.y = y;
    r.scratch = scratch;
    const int threads = cuvil_threads();
    if (wino_private(p, b->uk->nr, threads, &r.g)) {
        r.shared = wino_shared_bytes(p, &r.g);
        cuvil_parallel_for(p->N * wino_blocks(&r.g), block_task, &r);
        return;
    }
    if (wino_t_private(p, b->uk->nr, threads, &r.g)) {
        r.shared = wino_shared_bytes(p, &r.g);
        r.parts = threads;
        cuvil_parallel_for(p->N * threads, range_task, &r);
        return;
    }
    r.g = wino_plan(p, b->uk->nr);
    r.shared = wino_shared_bytes(p, &r.g);
    r.V = (float *)scratch;
    r.Mb = (float *)((char *)scratch + wino_v_bytes(p, &r.g));
    for (r.n = 0; r.n < p->N; r.n++)
        for (r.t0 = 0; r.t0 < r.g.T; r.t0 += r.g.TB) {
            r.nt = cuvil_min_i64(r.g.TB, r.g.T - r.t0);
            if (is_f2(p)) {
                r.per_c = (r.nt + 4 * threads - 1) / (4 * threads);
                cuvil_parallel_for((r.nt + r.per_c - 1) / r.per_c, input_task_f2, &r);
                cuvil_parallel_for(16, gemm_task, &r);
                cuvil_parallel_for((p->M + OUT_T_BLOCK - 1) / OUT_T_BLOCK, output_task_f2, &r);
                continue;
            }
            if (p->layout & CUVIL_CONV_X_NHWC) { /* split by tiles */
                r.per_c = (r.nt + 4 * threads - 1) / (4 * threads);
                cuvil_parallel_for((r.nt + r.per_c - 1) / r.per_c, input_task_nhwc, &r);
            } else {
                r.per_c = CUVIL_ALIGN_UP((p->C + 4 * threads - 1) / (4 * threads), wino_cb(r.g.TB));
                cuvil_parallel_for((p->C + r.per_c - 1) / r.per_c, input_task, &r);
            }
            cuvil_parallel_for(WP, gemm_task, &r);
            if (p->algo == CUVIL_CONV_WINOGRAD_T) {
                cuvil_parallel_for((p->M + OUT_T_BLOCK - 1) / OUT_T_BLOCK, output_task_t, &r);
                continue;
            }
            r.per_c = (p->M + 4 * threads - 1) / (4 * threads);
            cuvil_parallel_for((p->M + r.per_c - 1) / r.per_c, output_task, &r);
        }
}
