/*
 * qgemm.c -- the integer GEMM (cuvil_qgemm, cuvil_qconv): packing, the driver, the epilogue
 * and the portable microkernel; the ISA microkernels are in qgemm_avx2.c and qgemm_avx512.c.
 *
 * Every operand mix becomes uint8 A times int8 B: A' = A + 128 for int8 A, B' = B - 128 for
 * uint8 B, the zero points moved by the same amounts, so that
 *   sum_k (A - za)(B - zb) = sum_k A'B' - zb' rowsum(A') - za' colsum(B') + K za' zb'
 * with the row sums taken as A is packed and the column sums as B is (modular int32 arithmetic
 * throughout: the result is the exact one wherever it fits int32). The microkernels compute
 * sum A'B' exactly: vpdpbusd (VNNI) adds four uint8 x int8 products straight into int32;
 * without VNNI the operands are widened to 16 bits and vpmaddwd adds pairs into int32.
 * (vpmaddubsw, which MLAS uses on AVX2, adds two uint8 x int8 products into a saturating int16:
 * 255 * 127 * 2 = 64770 does not fit, so ordinary 8-bit weights give wrong sums; it is not used.)
 *
 * Packed B: a 64-byte header (K, N, type), the column sums (int32, N rounded up to 16), then
 * panels of 16 columns, each K rounded up to 4 in groups of 4: group g of panel p holds, for
 * column c, B'[4g .. 4g+3][16p + c] in bytes 4c .. 4c+3 (64 bytes: one zmm, two ymm).
 * Packed A: panels of the microkernel's MR rows, per group of 4 k the MR rows' 4 values: bytes
 * (uint8) or, for the 16-bit microkernels ("wide"), int16.
 * Loop nest per task (a block of up to QMC rows x QNC columns, tasks spread over the threads):
 * K in blocks of QKC4 groups, 16-column panels, MR-row panels (the microkernel accumulates the
 * block's int32 tile in the thread's scratch); then the epilogue reads the tile once.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"

#define QNR 16
#define QMR_MAX 12
#define QKC4 128   /* 512 k: an A micro-panel of 12 rows (int16) 12 KiB, a B micro-panel 8 KiB */
#define QMC 96     /* a multiple of every MR (3, 4, 6, 8, 12) */
#define QNC 256
#define QHDR 64

/* ===== Microkernel table ======================================================== */
const cuvil_qgemm_ukernel_desc cuvil_qgemm_ukernels[] = {
    {cuvil_qgemm_uk_4x16__scalar, 4, 0, "4x16__scalar", ""},
#if CUVIL_HAVE_AVX2
    {cuvil_qgemm_uk_3x16__avx2, 3, 1, "3x16__avx2", ""},
    {cuvil_qgemm_uk_6x16__avxvnni, 6, 0, "6x16__avxvnni", "avxvnni"},
#endif
#if CUVIL_HAVE_AVX512
    {cuvil_qgemm_uk_8x16__avx512bw, 8, 1, "8x16__avx512bw", ""},
    {cuvil_qgemm_uk_12x16__avx512vnni, 12, 0, "12x16__avx512vnni", "avx512vnni"},
#endif
};
const int cuvil_qgemm_n_ukernels = (int)(sizeof cuvil_qgemm_ukernels / sizeof cuvil_qgemm_ukernels[0]);

/* The last entry this CPU runs (the table is in order of preference); asked once (a race
 * between threads writes the same answer). */
const cuvil_qgemm_ukernel_desc *cuvil_qgemm_best(void) {
    static const cuvil_qgemm_ukernel_desc *best;
    if (best) return best;
    const cuvil_qgemm_ukernel_desc *b = &cuvil_qgemm_ukernels[0];
    for (int i = 1; i < cuvil_qgemm_n_ukernels; i++)
        if (cuvil_qgemm_ukernel_runs(&cuvil_qgemm_ukernels[i])) b = &cuvil_qgemm_ukernels[i];
    best = b;
    return b;
}

int cuvil_qgemm_ukernel_runs(const cuvil_qgemm_ukernel_desc *uk) { return cuvil_rt_cpu_lacks(uk->features, NULL) == NULL; }

void cuvil_qgemm_uk_4x16__scalar(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
    int32_t t[4][QNR];
    memset(t, 0, sizeof t);
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += 16, b += 64)
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < QNR; j++)
                for (int q = 0; q < 4; q++) t[r][j] += (int32_t)pa[r * 4 + q] * (int32_t)b[j * 4 + q];
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < QNR; j++) c[r * ldc + j] = accumulate ? c[r * ldc + j] + t[r][j] : t[r][j];
}

/* ===== Operands =================================================================== */
static inline int32_t ld8(int t, const void *p, int64_t i) {
    return t == CUVIL_T_I8 ? (int32_t)((const int8_t *)p)[i] : (int32_t)((const uint8_t *)p)[i];
}
/* A' (uint8) and B' (int8) of a stored value */
static inline uint8_t norm_a(int t, const void *p, int64_t i) {
    return t == CUVIL_T_I8 ? (uint8_t)(((const uint8_t *)p)[i] ^ 0x80u) : ((const uint8_t *)p)[i];
}
static inline int8_t norm_b(int t, const void *p, int64_t i) {
    return t == CUVIL_T_U8 ? (int8_t)(((const uint8_t *)p)[i] ^ 0x80u) : ((const int8_t *)p)[i];
}

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }
static int64_t kpad(int64_t K) { return CUVIL_ALIGN_UP(K, 4); }

size_t cuvil_qgemm_packed_b_bytes(int64_t K, int64_t N) {
    const int64_t np = CUVIL_ALIGN_UP(N, QNR);
    return QHDR + (size_t)np * 4 + (size_t)np * (size_t)kpad(K);
}

static int32_t *packed_colsum(const void *bp) { return (int32_t *)((char *)(uintptr_t)bp + QHDR); }
static int8_t *packed_data(const void *bp, int64_t N) {
    return (int8_t *)((char *)(uintptr_t)bp + QHDR + (size_t)CUVIL_ALIGN_UP(N, QNR) * 4);
}

/* A packed B's header, zeroed sums and zeroed panels (into *cs, *d). */
static void packed_init(void *dst, int64_t K, int64_t N, int bt, int32_t **cs, int8_t **d) {
    const int64_t np = CUVIL_ALIGN_UP(N, QNR);
    int64_t *h = dst;
    memset(dst, 0, QHDR);
    h[0] = K, h[1] = N, h[2] = bt;
    *cs = packed_colsum(dst);
    *d = packed_data(dst, N);
    memset(*cs, 0, (size_t)np * 4);
    memset(*d, 0, (size_t)np * (size_t)kpad(K));
}

void cuvil_qgemm_pack_b(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn, void *dst) {
    const int64_t kp = kpad(K);
    int32_t *cs;
    int8_t *d;
    packed_init(dst, K, N, bt, &cs, &d);
    for (int64_t n = 0; n < N; n++) {
        int8_t *pp = d + (n / QNR) * kp * QNR + (n % QNR) * 4;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; k++) {
            const int8_t v = norm_b(bt, B, k * sk + n * sn);
            pp[(k / 4) * 64 + (k % 4)] = v;
            sum += v;
        }
        cs[n] = sum;
    }
}

static size_t a_bytes(int64_t M, int64_t K) { return al64((size_t)(M + QMR_MAX) * (size_t)kpad(K) * 2); }

size_t cuvil_qgemm_scratch_size(int64_t M, int64_t N, int64_t K, int b_packed) {
    size_t s = a_bytes(M, K) + al64((size_t)(M + QMR_MAX) * 4) * 2 + al64((size_t)N * 4);
    if (!b_packed) s += al64(cuvil_qgemm_packed_b_bytes(K, N));
    return s + (size_t)QMC * QNC * 4;
}

/* A into MR-row panels (bytes, or int16 when wide), its row sums into rs. */
static void pack_a(const cuvil_qgemm_ukernel_desc *uk, int64_t M, int64_t K, int at, const void *A, int64_t lda,
                   void *dst, int32_t *rs) {
    const int mr = uk->mr, w = uk->wide ? 2 : 1;
    const int64_t kp = kpad(K), panels = (M + mr - 1) / mr;
    memset(dst, 0, (size_t)(panels * mr) * (size_t)kp * (size_t)w);
    for (int64_t m = 0; m < M; m++) {
        const int64_t i = m / mr, r = m % mr;
        int32_t sum = 0;
        if (w == 1) {
            uint8_t *d = (uint8_t *)dst + (i * kp) * mr + r * 4;
            for (int64_t k = 0; k < K; k++) {
                const uint8_t v = norm_a(at, A, m * lda + k);
                d[(k / 4) * mr * 4 + (k % 4)] = v;
                sum += v;
            }
        } else {
            int16_t *d = (int16_t *)dst + (i * kp) * mr + r * 4;
            for (int64_t k = 0; k < K; k++) {
                const uint8_t v = norm_a(at, A, m * lda + k);
                d[(k / 4) * mr * 4 + (k % 4)] = (int16_t)v;
                sum += v;
            }
        }
        rs[m] = sum;
    }
}

/* ===== Driver ===================================================================== */
typedef struct qjob {
    const cuvil_qgemm_ukernel_desc *uk;
    int64_t M, N, K, kp, mb, nb;
    const void *ap;             /* packed A */
    const int8_t *bd;           /* packed B's panels */
    const int32_t *cs, *rs;     /* column sums of B', row sums of A' */
    const int32_t *za, *zb;     /* za' per row, zb' per column */
    const cuvil_qgemm_epi *e;
    void *scratch;
    size_t blk_off;             /* the int32 tile, in each thread's scratch */
} qjob;

static inline int64_t per(int p, int64_t m, int64_t n) { return p == CUVIL_QPER_ROW ? m : p == CUVIL_QPER_COL ? n : 0; }

static void epilogue(const qjob *j, const int32_t *blk, int64_t ldc, int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
    const cuvil_qgemm_epi *e = j->e;
    const uint32_t K = (uint32_t)j->K;
    for (int64_t r = 0; r < mc; r++) {
        const int64_t m = m0 + r;
        const uint32_t za = (uint32_t)j->za[m], rs = (uint32_t)j->rs[m];
        const int32_t *src = blk + r * ldc;
        for (int64_t c = 0; c < nc; c++) {
            const int64_t n = n0 + c;
            const uint32_t zb = (uint32_t)j->zb[n];
            const int32_t v = (int32_t)((uint32_t)src[c] - zb * rs - za * (uint32_t)j->cs[n] + K * za * zb);
            const int64_t o = m * e->ldy + n;
            if (e->kind == CUVIL_QEPI_I32) {
                ((int32_t *)e->y)[o] = v;
            } else if (e->kind == CUVIL_QEPI_F32) {
                const int64_t a = (int64_t)v + (e->ibias ? e->ibias[per(e->bias_per, m, n)] : 0);
                float f = (float)a * e->scale[per(e->scale_per, m, n)];
                if (e->fbias) f += e->fbias[per(e->bias_per, m, n)];
                ((float *)e->y)[o] = f;
            } else {
                const int64_t a = (int64_t)v + (e->ibias ? e->ibias[per(e->bias_per, m, n)] : 0);
                float f = (float)a * e->scale[per(e->scale_per, m, n)];
                const float lo = (float)(e->lo - e->yzp), hi = (float)(e->hi - e->yzp);
                f = f >= lo ? f : lo;   /* (a NaN scale: lo) */
                f = f <= hi ? f : hi;
                const int32_t q = (int32_t)nearbyintf(f) + e->yzp;
                if (e->yt == CUVIL_T_I8) ((int8_t *)e->y)[o] = (int8_t)q;
                else ((uint8_t *)e->y)[o] = (uint8_t)q;
            }
        }
    }
}

static void qtask(void *vctx, int64_t t, int tid) {
    const qjob *j = vctx;
    const cuvil_qgemm_ukernel_desc *uk = j->uk;
    const int mr = uk->mr, w = uk->wide ? 2 : 1;
    const int64_t mbi = t / j->nb, nbi = t % j->nb;
    const int64_t m0 = mbi * QMC, mc = cuvil_min_i64(QMC, j->M - m0), n0 = nbi * QNC, nc = cuvil_min_i64(QNC, j->N - n0);
    const int64_t ldc = CUVIL_ALIGN_UP(nc, QNR), g4 = j->kp / 4;
    int32_t *blk = (int32_t *)((char *)cuvil_thread_scratch(j->scratch, tid) + j->blk_off);
    if (g4 == 0) memset(blk, 0, (size_t)QMC * QNC * 4);
    for (int64_t k0 = 0; k0 < g4; k0 += QKC4) {
        const int64_t kk = cuvil_min_i64(QKC4, g4 - k0);
        for (int64_t n = n0; n < n0 + nc; n += QNR) {
            const int8_t *bpan = j->bd + (n / QNR) * j->kp * QNR + k0 * 64;
            for (int64_t m = m0; m < m0 + mc; m += mr) {
                const char *apan = (const char *)j->ap + ((m / mr) * j->kp * mr + k0 * 4 * mr) * w;
                uk->fn(kk, apan, bpan, blk + (m - m0) * ldc + (n - n0), ldc, k0 > 0);
            }
        }
    }
    epilogue(j, blk, ldc, m0, mc, n0, nc);
}

/* B packed in bp (cuvil_qgemm_pack_b), the scratch past what it may hold. */
__attribute__((noinline)) static void qgemm_packed(const cuvil_qgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, int at, const void *A,
                         int64_t lda, const void *bp, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                         const cuvil_qgemm_epi *e, void *scratch, size_t off) {
    if (M <= 0 || N <= 0) return;
    const int bt = (int)((const int64_t *)bp)[2];
    char *s0 = (char *)scratch + off;
    void *ap = s0;
    int32_t *rs = (int32_t *)(s0 + a_bytes(M, K)), *za = (int32_t *)((char *)rs + al64((size_t)(M + QMR_MAX) * 4));
    int32_t *zb = (int32_t *)((char *)za + al64((size_t)(M + QMR_MAX) * 4));
    pack_a(uk, M, K, at, A, lda, ap, rs);
    const int32_t oa = at == CUVIL_T_I8 ? 128 : 0, ob = bt == CUVIL_T_U8 ? 128 : 0;
    for (int64_t m = 0; m < M; m++) za[m] = (azp && az_n ? ld8(at, azp, az_n > 1 ? m : 0) : 0) + oa;
    for (int64_t n = 0; n < N; n++) zb[n] = (bzp && bz_n ? ld8(bt, bzp, bz_n > 1 ? n : 0) : 0) - ob;
    qjob j = {
        .uk = uk, .M = M, .N = N, .K = K, .kp = kpad(K), .mb = (M + QMC - 1) / QMC, .nb = (N + QNC - 1) / QNC,
        .ap = ap, .bd = packed_data(bp, N), .cs = packed_colsum(bp), .rs = rs, .za = za, .zb = zb, .e = e,
        .scratch = scratch, .blk_off = off + (size_t)((char *)zb - s0) + al64((size_t)N * 4),
    };
    cuvil_parallel_for(j.mb * j.nb, qtask, &j);
}

void cuvil_qgemm_with(const cuvil_qgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, int at, const void *A,
                      int64_t lda, int bt, const void *B, int64_t ldb, const void *Bp, const void *azp, int64_t az_n,
                      const void *bzp, int64_t bz_n, const cuvil_qgemm_epi *e, void *scratch) {
    size_t off = 0;
    if (!Bp) {
        cuvil_qgemm_pack_b(K, N, bt, B, ldb, 1, scratch);
        Bp = scratch;
        off = al64(cuvil_qgemm_packed_b_bytes(K, N));
    }
    qgemm_packed(uk, M, N, K, at, A, lda, Bp, azp, az_n, bzp, bz_n, e, scratch, off);
}

void cuvil_qgemm(int64_t M, int64_t N, int64_t K, int at, const void *A, int64_t lda, int bt, const void *B,
                 int64_t ldb, const void *Bp, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                 const cuvil_qgemm_epi *e, void *scratch) {
    cuvil_qgemm_with(cuvil_qgemm_best(), M, N, K, at, A, lda, bt, B, ldb, Bp, azp, az_n, bzp, bz_n, e, scratch);
}

/* ===== Convolution ================================================================ */
/* The patches of one image's group (x: its first channel) as packed B: column = output pixel,
 * k = (channel, kh, kw) as the weights order it; x's zero point where the window leaves x. */
__attribute__((noinline)) static void pack_patches(const cuvil_conv2d_params *p, int xt, const void *x, int32_t zx, void *dst) {
    const int64_t Cg = p->C / p->group, K = Cg * p->KH * p->KW, P = p->OH * p->OW, kp = kpad(K);
    const int64_t HW = p->H * p->W;
    int32_t *cs;
    int8_t *d;
    packed_init(dst, K, P, xt, &cs, &d);
    const int8_t pad = (int8_t)(xt == CUVIL_T_U8 ? zx - 128 : zx);
    for (int64_t k = 0; k < K; k++) {
        const int64_t c = k / (p->KH * p->KW), kh = k / p->KW % p->KH, kw = k % p->KW;
        int8_t *base = d + (k / 4) * 64 + (k % 4);
        int64_t pix = 0;
        for (int64_t oh = 0; oh < p->OH; oh++) {
            const int64_t ih = oh * p->stride_h - p->pad_t + kh * p->dil_h;
            const int row = ih >= 0 && ih < p->H;
            for (int64_t ow = 0; ow < p->OW; ow++, pix++) {
                const int64_t iw = ow * p->stride_w - p->pad_l + kw * p->dil_w;
                const int8_t v = row && iw >= 0 && iw < p->W ? norm_b(xt, x, c * HW + ih * p->W + iw) : pad;
                base[(pix / QNR) * kp * QNR + (pix % QNR) * 4] = v;
                cs[pix] += v;
            }
        }
    }
}

size_t cuvil_qconv_scratch_size(const cuvil_conv2d_params *p) {
    const int64_t K = p->C / p->group * p->KH * p->KW, P = p->OH * p->OW;
    return al64(cuvil_qgemm_packed_b_bytes(K, P)) + cuvil_qgemm_scratch_size(p->M / p->group, P, K, 1);
}

void cuvil_qconv_with(const cuvil_qgemm_ukernel_desc *uk, const cuvil_conv2d_params *p, int xt, const void *x,
                      const void *xzp, int wt, const void *w, const void *wzp, int64_t wz_n, const cuvil_qgemm_epi *e,
                      void *scratch) {
    const int64_t G = p->group, Cg = p->C / G, Mg = p->M / G, K = Cg * p->KH * p->KW, P = p->OH * p->OW;
    const size_t ysz = e->kind == CUVIL_QEPI_REQUANT ? 1 : 4, off = al64(cuvil_qgemm_packed_b_bytes(K, P));
    const int32_t zx = xzp ? ld8(xt, xzp, 0) : 0;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t g = 0; g < G; g++) {
            pack_patches(p, xt, (const char *)x + (size_t)((n * p->C + g * Cg) * p->H * p->W), zx, scratch);
            cuvil_qgemm_epi eg = *e;
            eg.y = (char *)e->y + (size_t)((n * p->M + g * Mg) * P) * ysz;
            eg.ldy = P;
            if (e->scale_per == CUVIL_QPER_ROW) eg.scale = e->scale + g * Mg;
            if (e->bias_per == CUVIL_QPER_ROW) {
                if (e->ibias) eg.ibias = e->ibias + g * Mg;
                if (e->fbias) eg.fbias = e->fbias + g * Mg;
            }
            const void *wg = (const char *)w + (size_t)(g * Mg * K);
            const void *wzg = wzp && wz_n > 1 ? (const char *)wzp + (size_t)(g * Mg) : wzp;
            qgemm_packed(uk, Mg, P, K, wt, wg, K, scratch, wzg, wz_n, xzp, xzp ? 1 : 0, &eg, scratch, off);
        }
}

void cuvil_qconv(const cuvil_conv2d_params *p, int xt, const void *x, const void *xzp, int wt, const void *w,
                 const void *wzp, int64_t wz_n, const cuvil_qgemm_epi *e, void *scratch) {
    cuvil_qconv_with(cuvil_qgemm_best(), p, xt, x, xzp, wt, w, wzp, wz_n, e, scratch);
}

void cuvil_qscale(int64_t n, const float *xs, const float *ws, int64_t ws_n, const float *ys, float *out) {
    for (int64_t i = 0; i < n; i++) {
        const float ab = xs[0] * ws[ws_n > 1 ? i : 0];
        out[i] = ys ? ab / ys[0] : ab;
    }
}
