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
 * vpmaddubsw, which MLAS uses on AVX2, adds two uint8 x int8 products into a saturating int16:
 * 255 * 127 * 2 = 64770 does not fit, so ordinary 8-bit weights give wrong sums. Cuvil uses it
 * (6x16__avx2ub) only on a B packed pair-split ("Pair split" below): each pair's part in the
 * panels provably inside int16, the rest a short list of exact corrections.
 *
 * Packed B: a 64-byte header (K, N, type), the column sums (int32, N rounded up to 16), then
 * panels of 16 columns, each K rounded up to 4 in groups of 4: group g of panel p holds, for
 * column c, B'[4g .. 4g+3][16p + c] in bytes 4c .. 4c+3 (64 bytes: one zmm, two ymm).
 * Packed A: a 64-byte header (M, K, type), the row sums (int32, M rounded up to 12), then
 * panels of 12 rows, per group of 4 k the 12 rows' 4 bytes A' (48 bytes). Every microkernel's
 * MR (2, 4, 6, 12) divides 12: it reads its rows inside a panel. Neither layout depends on the
 * microkernel, so a conv's weights (A) and a matmul's (B) are packed when the model compiles
 * and serve whichever microkernel this CPU gets.
 * Loop nest per task (a block of up to QMC rows x QNC columns, tasks spread over the threads):
 * K in blocks of QKC4 groups, 16-column panels, MR-row sub-panels (the microkernel accumulates
 * the block's int32 tile in the thread's scratch); then the epilogue reads the tile once.
 * A conv's B (the image's patches) is built each call: each k's row of patch values (a copy of
 * image rows, x's zero point outside), then 4 rows at a time interleaved into panels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "../rt_int.h"

#define QNR 16
#define QMRP 12    /* packed A panel rows (a multiple of every MR) */
#define QKC4 128   /* 512 k: a 12-row A micro-panel 6 KiB, a B micro-panel 8 KiB */
#define QMC 144    /* a multiple of QMRP (a transformer's 128 tokens: one block, B read once) */
#define QNC 256
#define QHDR 64
#ifndef CUVIL_QPF_HINT
#define CUVIL_QPF_HINT 2   /* prefetcht1 (measured against t0 and nta: 1.10 / 1.12 / 1.33 ms on one 128 x 3072 x 768 product) */
#endif
#define QDW_TAPS 64   /* a depthwise conv runs on its own kernel up to this many taps */
#define QDW_STEP 8    /* ... and strides and dilations up to this */

/* ===== Microkernel table ======================================================== */
const cuvil_qgemm_ukernel_desc cuvil_qgemm_ukernels[] = {
    {cuvil_qgemm_uk_4x16__scalar, 4, 0, 1, 0, "4x16__scalar", "", NULL, 0},
#if CUVIL_HAVE_AVX2
    {cuvil_qgemm_uk_2x16__avx2, 2, 1, 1, 0, "2x16__avx2", "", NULL, 0},
    {cuvil_qgemm_uk_2x16__avx2_b16, 2, 1, 2, 0, "2x16__avx2_b16", "", NULL, 0},
    {cuvil_qgemm_uk_6x16__avx2w, 6, 1, 1, 1, "6x16__avx2w", "", NULL, 0},
    {cuvil_qgemm_uk_6x16__avx2ub, 6, 0, 1, 0, "6x16__avx2ub", "", NULL, 1},
    {cuvil_qgemm_uk_6x16__avxvnni, 6, 0, 1, 0, "6x16__avxvnni", "avxvnni", NULL, 0},
#endif
#if CUVIL_HAVE_AVX512
    {cuvil_qgemm_uk_4x16__avx512vnni, 4, 0, 1, 0, "4x32__avx512vnni", "avx512vnni", cuvil_qgemm_uk_4x32__avx512vnni, 0},
    {cuvil_qgemm_uk_12x16__avx512bw, 12, 1, 1, 0, "12x16__avx512bw", "", NULL, 0},
    {cuvil_qgemm_uk_12x16__avx512vnni, 12, 0, 1, 0, "12x16__avx512vnni", "avx512vnni", NULL, 0},
    {cuvil_qgemm_uk_12x16__avx512vnni, 12, 0, 1, 0, "12x32__avx512vnni", "avx512vnni", cuvil_qgemm_uk_12x32__avx512vnni, 0},
#endif
};
const int cuvil_qgemm_n_ukernels = (int)(sizeof cuvil_qgemm_ukernels / sizeof cuvil_qgemm_ukernels[0]);

/* The last entry this CPU runs (the table is in order of preference) that takes B as bytes
 * (b16 0: B packed as the model compiled it) or either way (b16 1: B packed each call, in the
 * microkernel's layout), or the one named by CUVIL_QGEMM_UKERNEL when this CPU runs it (to
 * measure the others; a comma-separated list names one for each use, the last that fits:
 * "6x16__avx2w" is what an AVX2 CPU without VNNI runs). Asked once
 * each (a race between threads writes the same answer). */
const cuvil_qgemm_ukernel_desc *cuvil_qgemm_best(int b16) {
    static const cuvil_qgemm_ukernel_desc *best[2];
    b16 = b16 != 0;
    if (best[b16]) return best[b16];
    const cuvil_qgemm_ukernel_desc *b = &cuvil_qgemm_ukernels[0];
    const char *want = getenv("CUVIL_QGEMM_UKERNEL");
    for (int i = 1; i < cuvil_qgemm_n_ukernels; i++)
        if (cuvil_qgemm_ukernel_runs(&cuvil_qgemm_ukernels[i]) && (b16 || cuvil_qgemm_ukernels[i].bw == 1) &&
            !cuvil_qgemm_ukernels[i].split)
            b = &cuvil_qgemm_ukernels[i];
    for (const char *w = want; w && *w; w += strcspn(w, ",") + (w[strcspn(w, ",")] == ',')) {   /* (a list: the last that fits) */
        const size_t len = strcspn(w, ",");
        for (int i = 0; i < cuvil_qgemm_n_ukernels; i++)
            if (strlen(cuvil_qgemm_ukernels[i].name) == len && !strncmp(w, cuvil_qgemm_ukernels[i].name, len) &&
                cuvil_qgemm_ukernel_runs(&cuvil_qgemm_ukernels[i]) && (b16 || cuvil_qgemm_ukernels[i].bw == 1) &&
                !cuvil_qgemm_ukernels[i].split)
                b = &cuvil_qgemm_ukernels[i];
    }
    best[b16] = b;
    return b;
}

int cuvil_qgemm_ukernel_runs(const cuvil_qgemm_ukernel_desc *uk) { return cuvil_rt_cpu_lacks(uk->features, NULL) == NULL; }

void cuvil_qgemm_uk_4x16__scalar(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate) {
    int32_t t[4][QNR];
    memset(t, 0, sizeof t);
    const uint8_t *pa = a;
    for (int64_t g = 0; g < k4; g++, pa += QMRP * 4, b += 64)
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
static inline int8_t norm_b(int t, const void *p, int64_t i) {
    return t == CUVIL_T_U8 ? (int8_t)(((const uint8_t *)p)[i] ^ 0x80u) : ((const int8_t *)p)[i];
}

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }
static int64_t kpad(int64_t K) { return CUVIL_ALIGN_UP(K, 4); }

size_t cuvil_qgemm_packed_b_bytes(int64_t K, int64_t N) {
    const int64_t np = CUVIL_ALIGN_UP(N, QNR);
    return QHDR + (size_t)np * 4 + (size_t)np * (size_t)kpad(K);
}

/* B packed with 16-bit values (the b16 microkernels' layout: each group of 4 k and 16 columns
 * 128 bytes, the same order), which a conv builds each call */
static size_t packed_b16_bytes(int64_t K, int64_t N) {
    const int64_t np = CUVIL_ALIGN_UP(N, QNR);
    return QHDR + (size_t)np * 4 + (size_t)np * (size_t)kpad(K) * 2;
}

static int32_t *packed_colsum(const void *bp) { return (int32_t *)((char *)(uintptr_t)bp + QHDR); }
static int8_t *packed_data(const void *bp, int64_t N) {
    return (int8_t *)((char *)(uintptr_t)bp + QHDR + (size_t)CUVIL_ALIGN_UP(N, QNR) * 4);
}

/* A packed B's header, zeroed sums and zeroed panels (into *cs, *d). */
/* A packed B's header (into *cs, *d: its column sums and panels, as they were) */
static void packed_header(void *dst, int64_t K, int64_t N, int bt, int bw, int32_t **cs, int8_t **d) {
    int64_t *h = dst;
    memset(dst, 0, QHDR);
    h[0] = K, h[1] = N, h[2] = bt, h[3] = bw;
    *cs = packed_colsum(dst);
    *d = packed_data(dst, N);
}

/* ... and its column sums and panels zeroed */
static void packed_init(void *dst, int64_t K, int64_t N, int bt, int bw, int32_t **cs, int8_t **d) {
    const int64_t np = CUVIL_ALIGN_UP(N, QNR);
    packed_header(dst, K, N, bt, bw, cs, d);
    memset(*cs, 0, (size_t)np * 4);
    memset(*d, 0, (size_t)np * (size_t)kpad(K) * (size_t)bw);
}

void cuvil_qgemm_pack_b(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn, void *dst) {
    const int64_t kp = kpad(K);
    int32_t *cs;
    int8_t *d;
    packed_init(dst, K, N, bt, 1, &cs, &d);
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

/* ===== Pair split ==================================================================
 * vpmaddubsw adds a pair of uint8 x int8 products into int16 with saturation. Over every uint8
 * A', a pair (u, v) of B' gives sums from 255 x (min(u, 0) + min(v, 0)) to 255 x (max(u, 0) +
 * max(v, 0)): inside int16 for every A' exactly when its positive values sum to at most 128 and its negative
 * ones to at least -128 (255 x 128 = 32640; 255 x 129 = 32895). A pair beyond that has both
 * values of one sign; the excess comes off the larger, so its part in the panels sums to 128
 * (or -128), and (k, column, excess) goes to a list that the driver adds, times A'[m][k], to
 * the int32 sums before the epilogue. The column sums stay those of B'. Ordinary weights
 * need few (BERT-base's, per-tensor int8: 0.04% of pairs). (A conv's weights are its A, never
 * split; as a B, per-channel conv weights would need ~3%.)
 * Layout: cuvil_qgemm_pack_b's, the header's word 4 set (word 5: the count), then per panel of
 * 16 columns the index of its first correction (int32, one more for the end), then the
 * corrections ordered by panel and k. */
typedef struct qcorr {
    int32_t k;
    int16_t col;   /* in the panel */
    int16_t r;     /* B'[k][col] minus the panel's value */
} qcorr;

/* the excess of the pair (u, v): 0, or what comes off the larger (*which: 0 u, 1 v) */
static int pair_excess(int u, int v, int *which) {
    const int pos = (u > 0 ? u : 0) + (v > 0 ? v : 0), neg = (u < 0 ? u : 0) + (v < 0 ? v : 0);
    *which = abs(v) > abs(u);
    return pos > 128 ? pos - 128 : neg < -128 ? neg + 128 : 0;
}

int64_t cuvil_qgemm_pair_excess(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn) {
    int64_t n_ex = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k + 1 < K; k += 2) {   /* (the pairs of each group of 4; past K the padding's 0) */
            int w;
            n_ex += pair_excess(norm_b(bt, B, k * sk + n * sn), norm_b(bt, B, (k + 1) * sk + n * sn), &w) != 0;
        }
    return n_ex;
}

int64_t cuvil_qgemm_split_cap(int64_t K, int64_t N) { return N * ((K + 1) / 2) / 256; }

static size_t split_idx_bytes(int64_t N) { return al64((size_t)(CUVIL_ALIGN_UP(N, QNR) / QNR + 1) * 4); }

size_t cuvil_qgemm_packed_b_split_bytes(int64_t K, int64_t N, int64_t excess) {
    return cuvil_qgemm_packed_b_bytes(K, N) + split_idx_bytes(N) + (size_t)excess * sizeof(qcorr);
}

void cuvil_qgemm_pack_b_split(int64_t K, int64_t N, int bt, const void *B, int64_t sk, int64_t sn, void *dst) {
    cuvil_qgemm_pack_b(K, N, bt, B, sk, sn, dst);
    const int64_t kp = kpad(K), npan = CUVIL_ALIGN_UP(N, QNR) / QNR;
    int8_t *d = packed_data(dst, N);
    int32_t *idx = (int32_t *)(void *)((char *)dst + cuvil_qgemm_packed_b_bytes(K, N));
    qcorr *cr = (qcorr *)(void *)((char *)idx + split_idx_bytes(N));
    memset(idx, 0, split_idx_bytes(N));   /* (its padding too: a compiled model's bytes are all defined) */
    int64_t n_ex = 0;
    for (int64_t p = 0; p < npan; p++) {
        idx[p] = (int32_t)n_ex;
        for (int64_t g = 0; g < kp / 4; g++)
            for (int c = 0; c < QNR; c++)
                for (int h = 0; h < 2; h++) {
                    int8_t *pr = d + p * kp * QNR + g * 64 + c * 4 + 2 * h;
                    int w;
                    const int ex = pair_excess(pr[0], pr[1], &w);
                    if (!ex) continue;
                    pr[w] = (int8_t)(pr[w] - ex);
                    cr[n_ex++] = (qcorr){(int32_t)(4 * g + 2 * h + w), (int16_t)c, (int16_t)ex};
                }
    }
    idx[npan] = (int32_t)n_ex;
    int64_t *h = dst;
    h[4] = 1, h[5] = n_ex;
}

/* B (row-major, row stride ldb) in the b16 layout */
static void pack_b16(int64_t K, int64_t N, int bt, const void *B, int64_t ldb, void *dst) {
    const int64_t kp = kpad(K);
    int32_t *cs;
    int8_t *d;
    packed_init(dst, K, N, bt, 2, &cs, &d);
    int16_t *d16 = (int16_t *)d;
    for (int64_t n = 0; n < N; n++) {
        int16_t *pp = d16 + (n / QNR) * kp * QNR + (n % QNR) * 4;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; k++) {
            const int8_t v = norm_b(bt, B, k * ldb + n);
            pp[(k / 4) * 64 + (k % 4)] = v;
            sum += v;
        }
        cs[n] = sum;
    }
}

/* ===== Packed A ================================================================== */
static int64_t mpad(int64_t M) { return CUVIL_ALIGN_UP(M, QMRP); }

size_t cuvil_qgemm_packed_a_bytes(int64_t M, int64_t K) {
    return QHDR + al64((size_t)mpad(M) * 4) + (size_t)mpad(M) * (size_t)kpad(K);
}

static int32_t *packed_rowsum(const void *ap) { return (int32_t *)((char *)(uintptr_t)ap + QHDR); }
static const uint8_t *packed_a_data(const void *ap, int64_t M) {
    return (const uint8_t *)ap + QHDR + al64((size_t)mpad(M) * 4);
}

void cuvil_qgemm_pack_a(int64_t M, int64_t K, int at, const void *A, int64_t lda, void *dst) {
    const int64_t kp = kpad(K);
    int64_t *h = dst;
    memset(dst, 0, QHDR);
    h[0] = M, h[1] = K, h[2] = at;
    int32_t *rs = packed_rowsum(dst);
    uint8_t *d = (uint8_t *)packed_a_data(dst, M);
    memset(rs, 0, (size_t)mpad(M) * 4);
    memset(d, 0, (size_t)mpad(M) * (size_t)kp);
    const uint8_t flip = at == CUVIL_T_I8 ? 0x80 : 0;
    const uint32_t flip4 = flip * 0x01010101u;
    for (int64_t m = 0; m < M; m++) {
        uint8_t *pd = d + (m / QMRP) * kp * QMRP + (m % QMRP) * 4;
        const uint8_t *src = (const uint8_t *)A + m * lda;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; k++) sum += (uint8_t)(src[k] ^ flip);   /* (vectorised) */
        rs[m] = sum;
        int64_t g = 0;
        for (; g < K / 4; g++) {   /* 4 bytes at a time into the group's slot */
            uint32_t w;
            memcpy(&w, src + 4 * g, 4);
            w ^= flip4;
            memcpy(pd + g * QMRP * 4, &w, 4);
        }
        for (int64_t k = 4 * g; k < K; k++) pd[g * QMRP * 4 + (k - 4 * g)] = (uint8_t)(src[k] ^ flip);
    }
}

/* w16 microkernels: a task's rows of A for one K block and one B micro-panel, widened */
#define QA16_BYTES ((size_t)QMC * QKC4 * 4 * 2)
#define QB16_BYTES ((size_t)QKC4 * 64 * 2)

size_t cuvil_qgemm_scratch_size(int64_t M, int64_t N, int64_t K, int a_packed, int b_packed) {
    size_t s = al64((size_t)M * 4) + al64((size_t)N * 4) + (size_t)QMC * QNC * 4 + QA16_BYTES + QB16_BYTES;
    if (!a_packed) s += al64(cuvil_qgemm_packed_a_bytes(M, K));
    if (!b_packed) s += al64(packed_b16_bytes(K, N));   /* (the larger layout: the microkernel picks) */
    return s;
}

/* ===== Driver ===================================================================== */
typedef struct qjob {
    const cuvil_qgemm_ukernel_desc *uk;
    const cuvil_qgemm_ukernel_desc *tail;   /* NULL, or a 4-row kernel of uk's instructions for a block's last rows */
    int64_t M, N, K, kp, mb, nb;
    int64_t mcb;                /* rows per task: up to QMC, the blocks of M as even as panels allow */
    const uint8_t *ad;          /* packed A's panels */
    const int8_t *bd;           /* packed B's panels */
    const int32_t *cs, *rs;     /* column sums of B', row sums of A' */
    const int32_t *za, *zb;     /* za' per row, zb' per column */
    const int32_t *cidx;        /* a pair-split B's corrections: NULL, or the index per panel */
    const qcorr *corr;          /* ... and the list */
    const cuvil_qgemm_epi *e;
    void *scratch;
    size_t blk_off;             /* the int32 tile, in each thread's scratch */
} qjob;

static inline const float *per_ptr(const float *p, int per, int64_t m) { return per == CUVIL_QPER_ROW ? p + m : p; }

/* f (in y's units) clamped to [lo, hi] (relative to the zero point; a NaN: lo), rounded to
 * nearest even by adding and taking away 1.5 * 2^23 (exact: the clamped values are well inside
 * 2^22), plus the zero point zp */
static inline __attribute__((always_inline)) int32_t requant(float f, float lo, float hi, int32_t zp) {
    f = f >= lo ? f : lo;
    f = f <= hi ? f : hi;
    return (int32_t)((f + 12582912.0f) - 12582912.0f) + zp;
}

/* One row of the tile through the epilogue, for constant col_s / col_b / kind / yt (each
 * combination inlined on its own: loops without branches, which the compiler vectorises):
 * the corrected sum v, then y = v (I32), (v + bias) * scale + fbias (F32), or requant((v + bias)
 * * scale) (REQUANT). The bias is added in int32, as ONNX Runtime does. */
static inline __attribute__((always_inline)) void epi_row(const int32_t *restrict src, int64_t nc,
                                                          const int32_t *restrict zb, const int32_t *restrict cs, uint32_t rs,
                                                          uint32_t za, uint32_t K, const cuvil_qgemm_epi *e,
                                                          const float *restrict sc, const int32_t *restrict ib,
                                                          const float *restrict fb, int col_s, int col_b, int kind, int yt,
                                                          const int32_t *restrict colc, uint32_t rowc, void *restrict y) {
    const float lo = (float)(e->lo - e->yzp), hi = (float)(e->hi - e->yzp);
    const int32_t zp = e->yzp;
    int32_t *restrict y32 = y;
    float *restrict yf = y;
    int8_t *restrict y8 = y;
    uint8_t *restrict yu = y;
    for (int64_t c = 0; c < nc; c++) {
        const uint32_t zc = colc ? 0 : (uint32_t)zb[c];   /* (colc: the corrections precomputed, no products) */
        const int32_t v = colc ? (int32_t)((uint32_t)src[c] + rowc + (uint32_t)colc[c])
                               : (int32_t)((uint32_t)src[c] - zc * rs - za * (uint32_t)cs[c] + K * za * zc);
        if (kind == CUVIL_QEPI_I32) {
            y32[c] = v;
            continue;
        }
        const int32_t vb = (int32_t)((uint32_t)v + (uint32_t)(ib ? ib[col_b ? c : 0] : 0));
        float f = (float)vb * sc[col_s ? c : 0];
        if (kind == CUVIL_QEPI_F32) {
            yf[c] = f + (fb ? fb[col_b ? c : 0] : 0.0f);
            continue;
        }
        const int32_t q = requant(f, lo, hi, zp);
        if (yt == CUVIL_T_I8) y8[c] = (int8_t)q;
        else yu[c] = (uint8_t)q;
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* requant_row_vec's 16 columns c.. (mask k): the requantized values, as int32 */
static inline __attribute__((always_inline)) __m512i rq16(const int32_t *src, const int32_t *colc, const int32_t *ib, const float *sc,
                                                          int64_t c, __mmask16 k, int col_s, int col_b, __m512i vr, __m512i b1,
                                                          __m512 s1, __m512 vlo, __m512 vhi, __m512 mag, __m512i vzp) {
    __m512i v = _mm512_add_epi32(_mm512_add_epi32(_mm512_maskz_loadu_epi32(k, src + c), vr), _mm512_maskz_loadu_epi32(k, colc + c));
    v = _mm512_add_epi32(v, ib && col_b ? _mm512_maskz_loadu_epi32(k, ib + c) : b1);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), col_s ? _mm512_maskz_loadu_ps(k, sc + c) : s1);
    f = _mm512_min_ps(_mm512_max_ps(f, vlo), vhi);
    f = _mm512_sub_ps(_mm512_add_ps(f, mag), mag);
    return _mm512_add_epi32(_mm512_cvttps_epi32(f), vzp);
}
#elif defined(__AVX2__)
/* requant_row_vec's 8 columns c..: the requantized values, as int32 */
static inline __attribute__((always_inline)) __m256i rq8(const int32_t *src, const int32_t *colc, const int32_t *ib, const float *sc,
                                                         int64_t c, int col_s, int col_b, __m256i vr, __m256i b1, __m256 s1,
                                                         __m256 vlo, __m256 vhi, __m256 mag, __m256i vzp) {
    __m256i v = _mm256_add_epi32(_mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(src + c)), vr),
                                 _mm256_loadu_si256((const __m256i *)(const void *)(colc + c)));
    v = _mm256_add_epi32(v, ib && col_b ? _mm256_loadu_si256((const __m256i *)(const void *)(ib + c)) : b1);
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), col_s ? _mm256_loadu_ps(sc + c) : s1);
    f = _mm256_min_ps(_mm256_max_ps(f, vlo), vhi);
    f = _mm256_sub_ps(_mm256_add_ps(f, mag), mag);
    return _mm256_add_epi32(_mm256_cvttps_epi32(f), vzp);
}
#endif

/* The requantizing epilogue of one row with the zero points' corrections precomputed (rowc,
 * colc), in whole vectors: the same arithmetic as epi_row's (int32 sums that wrap, the float
 * product, max(f, lo) then min(f, hi) as requant's comparisons take a NaN, the round trip
 * through 1.5 * 2^23, the zero point) with the last columns masked (AVX-512) or left to epi_row
 * (AVX2: fewer than 8). The compiler's own vectorisation of epi_row packs 64 values a step and
 * ran the 49 or 196 columns of a 7x7 or 14x14 image mostly in its scalar remainder. Returns
 * the columns done. */
static int64_t requant_row_vec(const int32_t *src, int64_t nc, const int32_t *colc, uint32_t rowc, const float *sc, int col_s,
                               const int32_t *ib, int col_b, float lo, float hi, int32_t zp, int yt, void *y) {
    int64_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512i vr = _mm512_set1_epi32((int32_t)rowc), vzp = _mm512_set1_epi32(zp), b1 = _mm512_set1_epi32(ib ? ib[0] : 0);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi), mag = _mm512_set1_ps(12582912.0f), s1 = _mm512_set1_ps(sc[0]);
    /* 64 columns a step: four vectors packed to bytes (exact: the values are within the type's
     * range) and stored at once; a vpmovdb store per 16 columns was most of the epilogue's time */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#define RQ(c_, k_) rq16(src, colc, ib, sc, c_, k_, col_s, col_b, vr, b1, s1, vlo, vhi, mag, vzp)
    for (; c + 64 <= nc; c += 64) {
        const __m512i w01 = _mm512_packs_epi32(RQ(c, 0xFFFF), RQ(c + 16, 0xFFFF));
        const __m512i w23 = _mm512_packs_epi32(RQ(c + 32, 0xFFFF), RQ(c + 48, 0xFFFF));
        const __m512i b = yt == CUVIL_T_I8 ? _mm512_packs_epi16(w01, w23) : _mm512_packus_epi16(w01, w23);
        _mm512_storeu_si512((char *)y + c, _mm512_permutexvar_epi32(order, b));
    }
    for (; c < nc; c += 16) {
        const __mmask16 k = nc - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nc - c)) - 1);
        _mm512_mask_cvtepi32_storeu_epi8((char *)y + c, k, RQ(c, k));
    }
#undef RQ
#elif defined(__AVX2__)
    const __m256i vr = _mm256_set1_epi32((int32_t)rowc), vzp = _mm256_set1_epi32(zp), b1 = _mm256_set1_epi32(ib ? ib[0] : 0);
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), mag = _mm256_set1_ps(12582912.0f), s1 = _mm256_set1_ps(sc[0]);
#define RQ(c_) rq8(src, colc, ib, sc, c_, col_s, col_b, vr, b1, s1, vlo, vhi, mag, vzp)
    /* 32 columns a step, packed as above (the values are within -128..255: the packs are exact) */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; c + 32 <= nc; c += 32) {
        const __m256i w01 = _mm256_packs_epi32(RQ(c), RQ(c + 8)), w23 = _mm256_packs_epi32(RQ(c + 16), RQ(c + 24));
        const __m256i b = yt == CUVIL_T_I8 ? _mm256_packs_epi16(w01, w23) : _mm256_packus_epi16(w01, w23);
        _mm256_storeu_si256((__m256i *)(void *)((char *)y + c), _mm256_permutevar8x32_epi32(b, order));
    }
    for (; c + 8 <= nc; c += 8) {
        const __m256i q = RQ(c);
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(void *)((char *)y + c), yt == CUVIL_T_I8 ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
    }
#undef RQ
#else
    (void)src, (void)nc, (void)colc, (void)rowc, (void)sc, (void)col_s, (void)ib, (void)col_b, (void)lo, (void)hi, (void)zp, (void)yt, (void)y;
#endif
    return c;
}

/* Rows m0.. (mc) x columns n0.. (nc) of the tile, through the epilogue. */
static void epilogue(const qjob *j, const int32_t *blk, int64_t ldc, int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
    const cuvil_qgemm_epi *e = j->e;
    const uint32_t K = (uint32_t)j->K;
    const int32_t *zb = j->zb + n0, *cs = j->cs + n0;
    const int col_s = e->scale_per == CUVIL_QPER_COL, col_b = e->bias_per == CUVIL_QPER_COL;
    /* One zero point over the tile's rows (A) and one over its columns (Z), as almost every
     * model has: v = src + rowc + colc[c], rowc = -Z (rs - K A), colc[c] = -A cs[c], no
     * products per element (each was a vpmulld). */
    int32_t colc_buf[QNC];
    const int32_t *colc = NULL;
    int uni = nc <= QNC;
    for (int64_t r = 1; uni && r < mc; r++) uni = j->za[m0 + r] == j->za[m0];
    for (int64_t c = 1; uni && c < nc; c++) uni = zb[c] == zb[0];
    const uint32_t A = (uint32_t)j->za[m0], Z = nc > 0 ? (uint32_t)zb[0] : 0;
    if (uni) {
        for (int64_t c = 0; c < nc; c++) colc_buf[c] = (int32_t)(0u - A * (uint32_t)cs[c]);
        colc = colc_buf;
    }
    for (int64_t r = 0; r < mc; r++) {
        const int64_t m = m0 + r;
        const uint32_t za = (uint32_t)j->za[m], rs = (uint32_t)j->rs[m], rowc = 0u - Z * (rs - K * A);
        const int32_t *src = blk + r * ldc;
        const float *sc = e->scale ? (col_s ? e->scale + n0 : per_ptr(e->scale, e->scale_per, m)) : NULL;
        const int32_t *ib = e->ibias ? (col_b ? e->ibias + n0 : e->ibias + (e->bias_per == CUVIL_QPER_ROW ? m : 0)) : NULL;
        const float *fb = e->fbias ? (col_b ? e->fbias + n0 : e->fbias + (e->bias_per == CUVIL_QPER_ROW ? m : 0)) : NULL;
        const int64_t o = m * e->ldy + n0;
        void *y = (char *)e->y + (size_t)o * (e->kind == CUVIL_QEPI_REQUANT ? 1 : 4);
        int64_t done = 0;
        if (colc && e->kind == CUVIL_QEPI_REQUANT) {
            done = requant_row_vec(src, nc, colc, rowc, sc, col_s, ib, col_b, (float)(e->lo - e->yzp), (float)(e->hi - e->yzp),
                                   e->yzp, e->yt, y);
            if (done == nc) continue;
        }
#define EPI(cs_, cb_, kind_, yt_) \
    epi_row(src + done, nc - done, zb + done, cs + done, rs, za, K, e, sc ? sc + (cs_ ? done : 0) : NULL,                    \
            ib ? ib + (cb_ ? done : 0) : NULL,                                                                                \
            fb ? fb + (cb_ ? done : 0) : NULL, cs_, cb_, kind_, yt_, colc ? colc + done : NULL, rowc, (char *)y + done)
        if (e->kind == CUVIL_QEPI_I32) EPI(0, 0, CUVIL_QEPI_I32, 0);
        else if (e->kind == CUVIL_QEPI_F32) {
            if (col_s) EPI(1, col_b, CUVIL_QEPI_F32, 0);
            else EPI(0, col_b, CUVIL_QEPI_F32, 0);
        } else if (e->yt == CUVIL_T_I8) {
            if (col_s && col_b) EPI(1, 1, CUVIL_QEPI_REQUANT, CUVIL_T_I8);
            else if (col_s) EPI(1, 0, CUVIL_QEPI_REQUANT, CUVIL_T_I8);
            else if (col_b) EPI(0, 1, CUVIL_QEPI_REQUANT, CUVIL_T_I8);
            else EPI(0, 0, CUVIL_QEPI_REQUANT, CUVIL_T_I8);
        } else {
            if (col_s && col_b) EPI(1, 1, CUVIL_QEPI_REQUANT, CUVIL_T_U8);
            else if (col_s) EPI(1, 0, CUVIL_QEPI_REQUANT, CUVIL_T_U8);
            else if (col_b) EPI(0, 1, CUVIL_QEPI_REQUANT, CUVIL_T_U8);
            else EPI(0, 0, CUVIL_QEPI_REQUANT, CUVIL_T_U8);
        }
#undef EPI
    }
}

/* ===== w16: the operands widened for a 16-bit microkernel ========================
 * Without VNNI, vpmaddwd multiplies int16 pairs; widening A' and B' inside the microkernel
 * costs a conversion per load (2.5-3.3 uops per 16 multiply-adds instead of 2). A w16
 * microkernel gets them widened once per block instead: the task's A panels for the K block
 * zero-extended in place order (each group's 12 rows x 4 values, int16), and each B micro-panel,
 * before its row sub-panels run, sign-extended and regrouped so that a group's 64 values are the
 * 16 columns' (k0, k1) pairs then their (k2, k3) pairs: a vpmaddwd of a row's broadcast pair
 * and 8 columns' pairs gives those columns' sums in its int32 lanes. */
static void widen_a(const uint8_t *restrict src, int64_t n, int16_t *restrict dst) {
    int64_t i = 0;
#if defined(__AVX2__)
    for (; i + 16 <= n; i += 16)
        _mm256_store_si256((__m256i *)(void *)(dst + i), _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = src[i];
}

static void widen_b(const int8_t *restrict src, int64_t kk, int16_t *restrict dst) {
#if defined(__AVX2__)
    /* per 128-bit lane (4 columns x 4 k): the (k0, k1) bytes of each column, then the (k2, k3) */
    const __m256i sh = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (int64_t g = 0; g < kk; g++, src += 64, dst += 64)
        for (int i = 0; i < 2; i++) {   /* columns 8i .. 8i+7 */
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(src + 32 * i));
            const __m256i v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(raw, sh), 0xD8);   /* (k0 k1 | k2 k3) */
            _mm256_store_si256((__m256i *)(void *)(dst + 16 * i), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
            _mm256_store_si256((__m256i *)(void *)(dst + 32 + 16 * i), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
        }
#else
    for (int64_t g = 0; g < kk; g++, src += 64, dst += 64)
        for (int c = 0; c < QNR; c++)
            for (int q = 0; q < 4; q++) dst[(q / 2) * 32 + c * 2 + q % 2] = src[c * 4 + q];
#endif
}

/* A pair-split B's corrections q .. qe (one panel's, their k inside the K block) added to a
 * microkernel's tile c (rows rows; a: their packed A, from its first group): r times A'[m][k],
 * in modular int32 as the sums. Right after the microkernel: the tile's rows are in L1 (at the
 * end of a task they came from L2, and took 5% of BERT-base's time). */
static void correct(int32_t *c, int64_t ldc, const uint8_t *a, int64_t rows, const qcorr *q, const qcorr *qe) {
    for (; q < qe; q++) {
        const uint8_t *ak = a + (q->k / 4) * QMRP * 4 + q->k % 4;
        uint32_t *col = (uint32_t *)c + q->col;
        const uint32_t r = (uint32_t)(int32_t)q->r;
        for (int64_t i = 0; i < rows; i++) col[i * ldc] += (uint32_t)ak[4 * i] * r;
    }
}

/* the first of panel p's corrections whose group of 4 k is g or after */
static const qcorr *corr_from(const qjob *j, int64_t p, int64_t g) {
    int64_t lo = j->cidx[p], hi = j->cidx[p + 1];
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (j->corr[mid].k / 4 < g) lo = mid + 1;
        else hi = mid;
    }
    return j->corr + lo;
}

static void qtask(void *vctx, int64_t t, int tid) {
    const qjob *j = vctx;
    const cuvil_qgemm_ukernel_desc *uk = j->uk;
    const int mr = uk->mr;
    const int64_t mbi = t / j->nb, nbi = t % j->nb;
    const int64_t m0 = mbi * j->mcb, mc = cuvil_min_i64(j->mcb, j->M - m0), n0 = nbi * QNC, nc = cuvil_min_i64(QNC, j->N - n0);
    const int64_t ldc = CUVIL_ALIGN_UP(nc, QNR), g4 = j->kp / 4;
    int32_t *blk = (int32_t *)((char *)cuvil_thread_scratch(j->scratch, tid) + j->blk_off);
    int16_t *a16 = NULL, *b16 = NULL;   /* (w16: the widened operands, past the tile) */
    if (uk->w16) a16 = (int16_t *)(void *)((char *)blk + (size_t)QMC * QNC * 4), b16 = a16 + QA16_BYTES / 2;
    if (g4 == 0) memset(blk, 0, (size_t)QMC * QNC * 4);
    for (int64_t k0 = 0; k0 < g4; k0 += QKC4) {
        const int64_t kk = cuvil_min_i64(QKC4, g4 - k0);
        if (a16)   /* (m0 is a whole number of panels) */
            for (int64_t pi = 0; pi < (mc + QMRP - 1) / QMRP; pi++)
                widen_a(j->ad + (m0 / QMRP + pi) * j->kp * QMRP + k0 * QMRP * 4, kk * QMRP * 4, a16 + pi * kk * QMRP * 4);
        const int64_t pstride = j->kp * QNR * uk->bw;   /* bytes from one panel to the next */
        for (int64_t n = n0; n < n0 + nc;) {
            const int two = uk->fn2 && n + QNR < n0 + nc, np = two ? 2 : 1;
            const int8_t *bpan = j->bd + ((n / QNR) * j->kp * QNR + k0 * 64) * uk->bw;
            /* the next panels' slice of this K block, prefetched a part per row step while these
             * run (a matmul's weights come from memory the first time: each block of rows reads
             * them once) */
            const int64_t slice = kk * 64 * uk->bw, after = (n0 + nc - (n + np * QNR) + QNR - 1) / QNR;
            const int npf = after >= 2 && uk->fn2 ? 2 : after >= 1 ? 1 : 0;
            const char *next = npf ? (const char *)bpan + np * pstride : NULL;   /* (not past packed B) */
            const int64_t per = (slice + ((mc + mr - 1) / mr) * 64 - 1) / (((mc + mr - 1) / mr) * 64) * 64;
            int64_t pf = npf ? 0 : slice;
            if (b16) widen_b(bpan, kk, b16);
            const qcorr *cq[2][2] = {{NULL, NULL}, {NULL, NULL}};   /* (each panel's corrections in this K block) */
            if (j->corr)
                for (int q = 0; q < np; q++) cq[q][0] = corr_from(j, n / QNR + q, k0), cq[q][1] = corr_from(j, n / QNR + q, k0 + kk);
            for (int64_t m = m0, step; m < m0 + mc; m += step) {
                /* (the block's last 4 or 8 rows: the 4-row kernel, a call per 4) */
                const cuvil_qgemm_ukernel_desc *k = j->tail && m0 + mc - m <= 8 ? j->tail : uk;
                step = k->mr;
                const void *apan = a16 ? (const void *)(a16 + ((m - m0) / QMRP) * kk * QMRP * 4 + (m % QMRP) * 4)
                                       : (const void *)(j->ad + (m / QMRP) * j->kp * QMRP + k0 * QMRP * 4 + (m % QMRP) * 4);
                for (const int64_t e = cuvil_min_i64(pf + per, slice); pf < e; pf += 64) {
                    __builtin_prefetch(next + pf, 0, CUVIL_QPF_HINT);
                    if (npf == 2) __builtin_prefetch(next + pstride + pf, 0, CUVIL_QPF_HINT);
                }
                if (two) k->fn2(kk, apan, bpan, pstride, blk + (m - m0) * ldc + (n - n0), ldc, k0 > 0);
                else k->fn(kk, apan, b16 ? (const int8_t *)(const void *)b16 : bpan, blk + (m - m0) * ldc + (n - n0), ldc, k0 > 0);
                for (int q = 0; q < np; q++)
                    if (cq[q][0] < cq[q][1])
                        correct(blk + (m - m0) * ldc + (n - n0) + q * QNR, ldc, j->ad + (m / QMRP) * j->kp * QMRP + (m % QMRP) * 4,
                                cuvil_min_i64(step, m0 + mc - m), cq[q][0], cq[q][1]);
            }
            n += np * QNR;
        }
    }
    epilogue(j, blk, ldc, m0, mc, n0, nc);
}

/* A and B packed (ap, bp); the zero points' arrays and the tiles in the scratch past off. */
__attribute__((noinline)) static void qgemm_packed(const cuvil_qgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K,
                                                   const void *ap, const void *bp, const void *azp, int64_t az_n,
                                                   const void *bzp, int64_t bz_n, const cuvil_qgemm_epi *e, void *scratch,
                                                   size_t off) {
    if (M <= 0 || N <= 0) return;
    const int at = (int)((const int64_t *)ap)[2], bt = (int)((const int64_t *)bp)[2];
    const int64_t *bh = bp;
    if (bh[3] != uk->bw) uk = cuvil_qgemm_best(bh[3] == 2);   /* (B's layout decides) */
    if (uk->split && !bh[4]) uk = cuvil_qgemm_best(0);   /* (a kernel for a pair-split B only on one) */
    if (bh[4] && uk->w16 && M >= 4)   /* (a pair-split B: vpmaddubsw in place of the 16-bit form; for 1-3
                                        * rows the 2-row kernel below, not 6 rows computed for them) */
        for (const cuvil_qgemm_ukernel_desc *k = cuvil_qgemm_ukernels; k < cuvil_qgemm_ukernels + cuvil_qgemm_n_ukernels; k++)
            if (k->split && cuvil_qgemm_ukernel_runs(k)) uk = k;
    if (uk->w16 && M < 12) {   /* (a few rows do not repay widening B: the preferred byte kernel before it) */
        const cuvil_qgemm_ukernel_desc *alt = NULL;
        for (const cuvil_qgemm_ukernel_desc *k = cuvil_qgemm_ukernels; k < uk; k++)
            if (k->bw == 1 && !k->w16 && !k->fn2 && cuvil_qgemm_ukernel_runs(k)) alt = k;
        if (alt) uk = alt;
    }
    /* a 4-row kernel of the same instructions, where there is one: all of a product of up to 4
     * rows, and a block's last 4 or 8 rows (128 rows: 10 panels of 12 and 8 rows, not 11 x 12) */
    const cuvil_qgemm_ukernel_desc *tail = NULL;
    if (uk->mr > 4 && uk->fn2)
        for (const cuvil_qgemm_ukernel_desc *k = cuvil_qgemm_ukernels; k < cuvil_qgemm_ukernels + cuvil_qgemm_n_ukernels; k++)
            if (k->mr == 4 && k->fn2 && k->bw == uk->bw && k->w16 == uk->w16 && !strcmp(k->features, uk->features)) tail = k;
    if (M <= 4 && tail) uk = tail, tail = NULL;
    int32_t *za = (int32_t *)((char *)scratch + off), *zb = (int32_t *)((char *)za + al64((size_t)M * 4));
    const int32_t oa = at == CUVIL_T_I8 ? 128 : 0, ob = bt == CUVIL_T_U8 ? 128 : 0;
    for (int64_t m = 0; m < M; m++) za[m] = (azp && az_n ? ld8(at, azp, az_n > 1 ? m : 0) : 0) + oa;
    for (int64_t n = 0; n < N; n++) zb[n] = (bzp && bz_n ? ld8(bt, bzp, bz_n > 1 ? n : 0) : 0) - ob;
    qjob j = {
        .uk = uk, .tail = tail, .M = M, .N = N, .K = K, .kp = kpad(K), .nb = (N + QNC - 1) / QNC,
        .ad = packed_a_data(ap, M), .bd = packed_data(bp, N), .cs = packed_colsum(bp), .rs = packed_rowsum(ap),
        .za = za, .zb = zb, .e = e, .scratch = scratch,
        .cidx = bh[4] && bh[5] ? (const int32_t *)(const void *)((const char *)bp + cuvil_qgemm_packed_b_bytes(K, N)) : NULL,
        .blk_off = off + al64((size_t)M * 4) + al64((size_t)N * 4),
    };
    if (j.cidx) j.corr = (const qcorr *)(const void *)((const char *)j.cidx + split_idx_bytes(N));
    /* As few row blocks as QMC allows (each reads all of B), the blocks as even as panels allow
     * (200 rows: 108 + 92, not 144 + 56); more while the tasks do not split evenly over the
     * threads (128 rows x 768 columns on two threads: 2 x 3 tasks, not 3) */
    int64_t blocks = (M + QMC - 1) / QMC;
    const int64_t T = cuvil_threads();
    while (blocks * j.nb < 4 * T && (blocks * j.nb) % T != 0 && (M + blocks) / (blocks + 1) >= 2 * QMRP) blocks++;
    j.mcb = cuvil_min_i64(QMC, CUVIL_ALIGN_UP((M + blocks - 1) / blocks, QMRP));
    j.mb = (M + j.mcb - 1) / j.mcb;
    cuvil_parallel_for(j.mb * j.nb, qtask, &j);
}

void cuvil_qgemm_with(const cuvil_qgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, int at, const void *A,
                      int64_t lda, const void *Ap, int bt, const void *B, int64_t ldb, const void *Bp, const void *azp,
                      int64_t az_n, const void *bzp, int64_t bz_n, const cuvil_qgemm_epi *e, void *scratch) {
    size_t off = 0;
    if (!Ap) {
        cuvil_qgemm_pack_a(M, K, at, A, lda, scratch);
        Ap = scratch;
        off += al64(cuvil_qgemm_packed_a_bytes(M, K));
    }
    if (!Bp) {
        if (uk->bw == 2) pack_b16(K, N, bt, B, ldb, (char *)scratch + off);
        else cuvil_qgemm_pack_b(K, N, bt, B, ldb, 1, (char *)scratch + off);
        Bp = (char *)scratch + off;
        off += al64(packed_b16_bytes(K, N));
    }
    qgemm_packed(uk, M, N, K, Ap, Bp, azp, az_n, bzp, bz_n, e, scratch, off);
}

void cuvil_qgemm(int64_t M, int64_t N, int64_t K, int at, const void *A, int64_t lda, const void *Ap, int bt, const void *B,
                 int64_t ldb, const void *Bp, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                 const cuvil_qgemm_epi *e, void *scratch) {
    cuvil_qgemm_with(cuvil_qgemm_best(0), M, N, K, at, A, lda, Ap, bt, B, ldb, Bp, azp, az_n, bzp, bz_n, e, scratch);
}

/* ===== Convolution ================================================================ */
static int64_t conv_k(const cuvil_conv2d_params *p) { return p->C / p->group * p->KH * p->KW; }

size_t cuvil_qconv_packed_w_bytes(const cuvil_conv2d_params *p) {
    return (size_t)p->group * al64(cuvil_qgemm_packed_a_bytes(p->M / p->group, conv_k(p)));
}

void cuvil_qconv_pack_w(const cuvil_conv2d_params *p, int wt, const void *w, void *dst) {
    const int64_t Mg = p->M / p->group, K = conv_k(p);
    const size_t per = al64(cuvil_qgemm_packed_a_bytes(Mg, K));
    for (int64_t g = 0; g < p->group; g++)
        cuvil_qgemm_pack_a(Mg, K, wt, (const char *)w + (size_t)(g * Mg * K), K, (char *)dst + (size_t)g * per);
}

/* Rows of 4 k's patch values into the packed panels of group k4: row q holds P values, B' after
 * an xor with fl[q] (0x80: stored uint8, else 0); past P the panels hold 0. bw 2: the values
 * sign-extended to int16 (the b16 layout). */
static void interleave4(const int8_t *const r0[4], const uint8_t fl[4], int64_t P, int64_t kp, int64_t k4, int bw, int8_t *d) {
    int8_t tail[4][QNR];
    const int8_t *r[4] = {r0[0], r0[1], r0[2], r0[3]};
    for (int64_t p0 = 0; p0 < P; p0 += QNR) {
        int64_t base = p0;
        uint8_t f[4] = {fl[0], fl[1], fl[2], fl[3]};
        if (p0 + QNR > P) {   /* the last panel: its values, normalised, then zeros */
            for (int q = 0; q < 4; q++) {
                for (int64_t j = 0; j < QNR; j++) tail[q][j] = j < P - p0 ? (int8_t)(r0[q][p0 + j] ^ fl[q]) : 0;
                r[q] = tail[q];
                f[q] = 0;
            }
            base = 0;
        }
#if defined(__SSE2__)
        __m128i v[4];
        for (int q = 0; q < 4; q++)
            v[q] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r[q] + base)), _mm_set1_epi8((char)f[q]));
        if (bw == 1) {
            int8_t *o = d + p0 * kp + k4 * 64;
            const __m128i ab0 = _mm_unpacklo_epi8(v[0], v[1]), ab1 = _mm_unpackhi_epi8(v[0], v[1]);
            const __m128i ce0 = _mm_unpacklo_epi8(v[2], v[3]), ce1 = _mm_unpackhi_epi8(v[2], v[3]);
            _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi16(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(ab1, ce1));
            _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(ab1, ce1));
        } else {
            int16_t *o = (int16_t *)(void *)d + p0 * kp + k4 * 64;
            __m128i w[4][2];   /* row q's 16 values as two vectors of 8 int16 */
            for (int q = 0; q < 4; q++) {
                const __m128i sg = _mm_cmpgt_epi8(_mm_setzero_si128(), v[q]);
                w[q][0] = _mm_unpacklo_epi8(v[q], sg);
                w[q][1] = _mm_unpackhi_epi8(v[q], sg);
            }
            for (int h = 0; h < 2; h++) {   /* pixels 8h .. 8h+7 */
                const __m128i ab0 = _mm_unpacklo_epi16(w[0][h], w[1][h]), ab1 = _mm_unpackhi_epi16(w[0][h], w[1][h]);
                const __m128i ce0 = _mm_unpacklo_epi16(w[2][h], w[3][h]), ce1 = _mm_unpackhi_epi16(w[2][h], w[3][h]);
                _mm_storeu_si128((__m128i *)(o + 32 * h), _mm_unpacklo_epi32(ab0, ce0));
                _mm_storeu_si128((__m128i *)(o + 32 * h + 8), _mm_unpackhi_epi32(ab0, ce0));
                _mm_storeu_si128((__m128i *)(o + 32 * h + 16), _mm_unpacklo_epi32(ab1, ce1));
                _mm_storeu_si128((__m128i *)(o + 32 * h + 24), _mm_unpackhi_epi32(ab1, ce1));
            }
        }
#else
        for (int j = 0; j < QNR; j++)
            for (int q = 0; q < 4; q++) {
                const int8_t val = (int8_t)(r[q][base + j] ^ f[q]);
                if (bw == 1) d[(p0 * kp + k4 * 64) + j * 4 + q] = val;
                else ((int16_t *)(void *)d)[(p0 * kp + k4 * 64) + j * 4 + q] = val;
            }
#endif
    }
}

/* o[i] = x[i * sw] ^ flip for i < n: a copy the compiler vectorises (no aliasing to fear) */
static inline void copy_flip(int8_t *restrict o, const uint8_t *restrict x, int64_t n, int64_t sw, uint8_t flip) {
    int64_t i = 0;
#if defined(__SSE2__)
    if (sw == 1 && n >= 16) {   /* 16 bytes at a time, the last 16 overlapping the ones before */
        const __m128i f = _mm_set1_epi8((char)flip);
        for (;; i += 16) {
            i = i + 16 <= n ? i : n - 16;
            _mm_storeu_si128((__m128i *)(o + i), _mm_xor_si128(_mm_loadu_si128((const __m128i *)(x + i)), f));
            if (i + 16 >= n) return;
        }
    }
#endif
    if (sw == 1) {
        for (; i < n; i++) o[i] = (int8_t)(x[i] ^ flip);
        return;
    }
#if defined(__SSE2__)
    if (sw == 2) {   /* the even bytes of 32: masked to 16 bits, packed back to bytes */
        const __m128i m = _mm_set1_epi16(0xff), f = _mm_set1_epi8((char)flip);
        /* the 32 bytes read, x[2i .. 2i+31], must all be x's: 2i + 31 <= 2(n - 1), so i + 17 <= n
         * (the last chunks go to the loop below) */
        for (; i + 17 <= n; i += 16) {
            const __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)(x + 2 * i)), m);
            const __m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(x + 2 * i + 16)), m);
            _mm_storeu_si128((__m128i *)(o + i), _mm_xor_si128(_mm_packus_epi16(a, b), f));
        }
    }
#endif
    for (; i < n; i++) o[i] = (int8_t)(x[i * sw] ^ flip);
}

/* The patches of one image's group (x: its first channel) as packed B: column = output pixel,
 * k = (channel, kh, kw) as the weights order it; x's zero point where the window leaves x.
 * Each k's row (np bytes, B' values) is built in `rows` (4 at a time), then interleaved. */
/* The patches of one image's group (x: its first channel) as packed B, in tasks: each task a
 * group of 4 k's (their rows built in the thread's scratch, then interleaved), then the column
 * sums in tasks over the panels (read back from the packed values). */
typedef struct patch_job {
    const cuvil_conv2d_params *p;
    int xt, bw;
    const void *x;
    int32_t zx;
    void *scratch;   /* each thread's rows at its slice's start */
    int8_t *d;       /* the packed panels */
    int32_t *cs;
    int cs_inline;   /* one thread: the column sums added up as the rows are built (no second pass) */
} patch_job;

/* cs[i] += (int8)(row[i] ^ flip) */
static inline void add_row(int32_t *restrict cs, const uint8_t *restrict row, int64_t n, uint8_t flip) {
    for (int64_t i = 0; i < n; i++) cs[i] += (int8_t)(row[i] ^ flip);
}

static void patch_task(void *vctx, int64_t k4, int tid) {
    const patch_job *j = vctx;
    const cuvil_conv2d_params *p = j->p;
    const int64_t K = conv_k(p), P = p->OH * p->OW, kp = kpad(K), np = CUVIL_ALIGN_UP(P, QNR), HW = p->H * p->W;
    const int xt = j->xt;
    int8_t *rows = cuvil_thread_scratch(j->scratch, tid);
    const int8_t pad = (int8_t)(xt == CUVIL_T_U8 ? j->zx - 128 : j->zx);
    const uint8_t flip = xt == CUVIL_T_U8 ? 0x80 : 0;
    const int8_t *r[4];
    uint8_t fl[4] = {0, 0, 0, 0};
    for (int q = 0; q < 4; q++) {
        const int64_t k = k4 * 4 + q;
        int8_t *row = rows + q * np;
        r[q] = row;
        if (k >= K) {
            memset(row, 0, (size_t)P);
            continue;
        }
        const int64_t c = k / (p->KH * p->KW), kh = k / p->KW % p->KH, kw = k % p->KW;
        const uint8_t *xc = (const uint8_t *)j->x + c * HW;
        /* the output columns whose input column is inside x: [lo, hi) */
        const int64_t off = kw * p->dil_w - p->pad_l, sw = p->stride_w, ih0 = kh * p->dil_h - p->pad_t;
        if (sw == 1 && off == 0 && p->OW == p->W && p->stride_h == 1 && ih0 >= 0 && ih0 + p->OH <= p->H) {
            /* every patch value inside x, the rows one block (a 1x1 conv's channel): read in place */
            r[q] = (const int8_t *)(xc + ih0 * p->W);
            fl[q] = flip;
            if (j->cs_inline) add_row(j->cs, xc + ih0 * p->W, P, flip);
            continue;
        }
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw, hi = (p->W - off + sw - 1) / sw;
        hi = hi < 0 ? 0 : hi > p->OW ? p->OW : hi;
        lo = lo > hi ? hi : lo;
        for (int64_t oh = 0; oh < p->OH; oh++) {
            int8_t *o = row + oh * p->OW;
            const int64_t ih = oh * p->stride_h - p->pad_t + kh * p->dil_h;
            if (ih < 0 || ih >= p->H) {
                memset(o, pad, (size_t)p->OW);
                continue;
            }
            const uint8_t *xr = xc + ih * p->W;
            for (int64_t ow = 0; ow < lo; ow++) o[ow] = pad;   /* (a few columns: no memset call) */
            copy_flip(o + lo, xr + lo * sw + off, hi - lo, sw, flip);
            for (int64_t ow = hi; ow < p->OW; ow++) o[ow] = pad;
        }
        if (j->cs_inline) add_row(j->cs, (const uint8_t *)row, P, 0);
    }
    interleave4(r, fl, P, kp, k4, j->bw, j->d);
}

/* the column sums of panels [16 t, 16 t + 16): each column's values over every group of 4 k */
static void colsum_task(void *vctx, int64_t t, int tid) {
    const patch_job *j = vctx;
    (void)tid;
    const int64_t kp = kpad(conv_k(j->p));
    int32_t acc[64];   /* one sum per byte of a group (4 per column): a flat loop, no spills */
    for (int64_t pn = t * 16; pn < t * 16 + 16 && pn * QNR < CUVIL_ALIGN_UP(j->p->OH * j->p->OW, QNR); pn++) {
        memset(acc, 0, sizeof acc);
        if (j->bw == 1) {
            const int8_t *pp = j->d + pn * kp * QNR;
            for (int64_t g = 0; g < kp / 4; g++, pp += 64)
                for (int i = 0; i < 64; i++) acc[i] += pp[i];
        } else {
            const int16_t *pp = (const int16_t *)(const void *)j->d + pn * kp * QNR;
            for (int64_t g = 0; g < kp / 4; g++, pp += 64)
                for (int i = 0; i < 64; i++) acc[i] += pp[i];
        }
        for (int c = 0; c < QNR; c++) j->cs[pn * QNR + c] = acc[4 * c] + acc[4 * c + 1] + acc[4 * c + 2] + acc[4 * c + 3];
    }
}

__attribute__((noinline)) static void pack_patches(const cuvil_conv2d_params *p, int xt, const void *x, int32_t zx, void *scratch,
                                                   int bw, void *dst) {
    const int64_t K = conv_k(p), P = p->OH * p->OW;
    patch_job j = {p, xt, bw, x, zx, scratch, NULL, NULL, cuvil_threads() == 1};
    packed_header(dst, K, P, xt, bw, &j.cs, &j.d);   /* (every panel byte is written below) */
    if (j.cs_inline) memset(j.cs, 0, sizeof(int32_t) * (size_t)CUVIL_ALIGN_UP(P, QNR));
    cuvil_parallel_for(kpad(K) / 4, patch_task, &j);
    if (!j.cs_inline) cuvil_parallel_for((CUVIL_ALIGN_UP(P, QNR) / QNR + 15) / 16, colsum_task, &j);
}

static size_t patches_bytes(const cuvil_conv2d_params *p) {
    return al64((size_t)CUVIL_ALIGN_UP(p->OH * p->OW, QNR) * 4);
}


/* ===== Depthwise convolution ===================================================== */
/* One channel per group. The channel's x - zx goes, as float, into stride_h x stride_w phase
 * planes of the zero-padded image (plane (a, b) holds the padded pixels (i sh + a, j sw + b)), so
 * that every tap reads one plane at a fixed offset: a tap is then one contiguous multiply-add
 * over all the output rows at once, the rows Wq apart (the columns past OW computed and
 * dropped). The sums are exact in float: each product is at most 255 * 255 and a window has at
 * most QDW_TAPS of them (64 * 65025 < 2^24). Channels in tasks; then the epilogue per row. */
typedef struct qdw_geo {
    int64_t Hq, Wq;   /* a phase plane */
} qdw_geo;

/* the padded row's columns: x's (after pad_l) and every tap's of every output */
static int64_t dw_padded_w(const cuvil_conv2d_params *p) {
    return cuvil_max_i64(p->W + p->pad_l, (p->OW - 1) * p->stride_w + (p->KW - 1) * p->dil_w + 1);
}

static qdw_geo dw_geo(const cuvil_conv2d_params *p) {
    const int64_t Hp = cuvil_max_i64(p->H + p->pad_t, (p->OH - 1) * p->stride_h + (p->KH - 1) * p->dil_h + 1);
    const int64_t Wp = dw_padded_w(p);
    qdw_geo g = {(Hp + p->stride_h - 1) / p->stride_h, (Wp + p->stride_w - 1) / p->stride_w};
    return g;
}

/* the phase planes; the sums (OH rows of Wq, and DW_SLACK more: the epilogue runs in whole
 * vectors); the epilogue's output, as many; the channel's image as float */
#define DW_SLACK 16
static size_t dw_acc_bytes(const cuvil_conv2d_params *p, const qdw_geo *g) {
    return al64(sizeof(float) * (size_t)(p->OH * g->Wq + DW_SLACK));
}
static size_t dw_scratch(const cuvil_conv2d_params *p) {
    const qdw_geo g = dw_geo(p);
    return al64(sizeof(float) * (size_t)(p->stride_h * p->stride_w * g.Hq * g.Wq)) + 2 * dw_acc_bytes(p, &g) +
           al64(sizeof(float) * (size_t)(p->H * p->W));
}

typedef struct qdw_job {
    const cuvil_conv2d_params *p;
    int xt;
    const uint8_t *x;
    int32_t zx;
    const void *wp;
    const void *wzp;
    int64_t wz_n;
    const cuvil_qgemm_epi *e;
    void *scratch;
    int64_t nblk, nstrip;   /* (the 16-channel kernel's channel blocks and strips) */
} qdw_job;

/* dst[i] = x[i] - zx for the n values of a channel's image (x int8 when s8, else uint8): one
 * long vector loop (row by row, a 7- or 14-wide image ran in scalar remainders) */
static void dw_convert(float *restrict dst, const uint8_t *restrict x, int64_t n, int s8, float zx) {
    const int8_t *restrict xs = (const int8_t *)x;
    if (s8)
        for (int64_t i = 0; i < n; i++) dst[i] = (float)xs[i] - zx;
    else
        for (int64_t i = 0; i < n; i++) dst[i] = (float)x[i] - zx;
}

/* dst[j] = src[j * sw] for j < n */
static inline void dw_fill(float *restrict dst, const float *restrict src, int64_t n, int64_t sw) {
    if (sw == 1) memcpy(dst, src, sizeof(float) * (size_t)(n > 0 ? n : 0));
    else if (sw == 2)   /* (its own loop: vectorised as an even/odd shuffle) */
        for (int64_t j = 0; j < n; j++) dst[j] = src[2 * j];
    else
        for (int64_t j = 0; j < n; j++) dst[j] = src[j * sw];
}

static inline void dw_tap(float *restrict acc, const float *restrict src, int64_t n, float w) {
    for (int64_t i = 0; i < n; i++) acc[i] += src[i] * w;
}

/* acc[i] = sum of the 9 taps' src[t][i] w[t]: one pass (tap by tap, the accumulator row went
 * through the cache 9 times; a 112 x 112 plane does not stay in L1) */
static void dw_taps9(float *restrict acc, const float *const src[9], const float w[9], int64_t n) {
    const float *restrict s0 = src[0], *restrict s1 = src[1], *restrict s2 = src[2], *restrict s3 = src[3],
                          *restrict s4 = src[4], *restrict s5 = src[5], *restrict s6 = src[6], *restrict s7 = src[7],
                          *restrict s8 = src[8];
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
    for (int64_t i = 0; i < n; i++)
        acc[i] = s0[i] * w0 + s1[i] * w1 + s2[i] * w2 + s3[i] * w3 + s4[i] * w4 + s5[i] * w5 + s6[i] * w6 + s7[i] * w7 +
                 s8[i] * w8;
}

static inline __attribute__((always_inline)) void dw_out(const float *restrict acc, int64_t n, int kind, int yt, float s,
                                                         int32_t bias, float fbias, float lo, float hi, int32_t zp,
                                                         void *restrict y) {
    int32_t *restrict y32 = y;
    float *restrict yf = y;
    int8_t *restrict y8 = y;
    uint8_t *restrict yu = y;
    for (int64_t i = 0; i < n; i++) {
        const int32_t a = (int32_t)acc[i];   /* (an exact integer) */
        if (kind == CUVIL_QEPI_I32) {
            y32[i] = a;
            continue;
        }
        float f = (float)(int32_t)((uint32_t)a + (uint32_t)bias) * s;
        if (kind == CUVIL_QEPI_F32) {
            yf[i] = f + fbias;
            continue;
        }
        const int32_t q = requant(f, lo, hi, zp);
        if (yt == CUVIL_T_I8) y8[i] = (int8_t)q;
        else yu[i] = (uint8_t)q;
    }
}

/* channel c's K taps w - zw from the packed A (one row per group: A' - za' = w - zw), as float
 * at w[k * stride] */
static void dw_weights(const qdw_job *j, int64_t c, int64_t K, float *w, int64_t stride) {
    const void *ap = (const char *)j->wp + (size_t)c * al64(cuvil_qgemm_packed_a_bytes(1, K));
    const uint8_t *ad = packed_a_data(ap, 1);
    const int wt = (int)((const int64_t *)ap)[2];
    const int32_t za = (j->wzp && j->wz_n ? ld8(wt, j->wzp, j->wz_n > 1 ? c : 0) : 0) + (wt == CUVIL_T_I8 ? 128 : 0);
    for (int64_t k = 0; k < K; k++) w[k * stride] = (float)((int32_t)ad[(k / 4) * QMRP * 4 + (k % 4)] - za);
}

static void qdw_task(void *vctx, int64_t t, int tid) {
    const qdw_job *j = vctx;
    const cuvil_conv2d_params *p = j->p;
    const cuvil_qgemm_epi *e = j->e;
    const int64_t n = t / p->C, c = t % p->C, K = p->KH * p->KW, P = p->OH * p->OW, sh = p->stride_h, sw = p->stride_w;
    const qdw_geo g = dw_geo(p);
    float wk[QDW_TAPS];
    dw_weights(j, c, K, wk, 1);
    float *planes = cuvil_thread_scratch(j->scratch, tid);
    float *acc = planes + al64(sizeof(float) * (size_t)(sh * sw * g.Hq * g.Wq)) / sizeof(float);
    float *img = (float *)((char *)acc + 2 * dw_acc_bytes(p, &g));
    const size_t plane = (size_t)(g.Hq * g.Wq);
    memset(planes, 0, sizeof(float) * plane * (size_t)(sh * sw));
    dw_convert(img, j->x + (size_t)((n * p->C + c) * p->H * p->W), p->H * p->W, j->xt == CUVIL_T_I8, (float)j->zx);
    for (int64_t b = 0; b < sw; b++) {   /* the columns of phase b: iw + pad_l = j sw + b */
        const int64_t iw0 = ((b - p->pad_l) % sw + sw) % sw, cnt = (p->W - iw0 + sw - 1) / sw;
        const size_t off = (size_t)b * plane + (size_t)((iw0 + p->pad_l) / sw);
        for (int64_t ih = 0, r = p->pad_t; ih < p->H; ih++, r++) {   /* padded row ih + pad_t */
            float *row = planes + (size_t)((r % sh) * sw) * plane + (size_t)((r / sh) * g.Wq);
            dw_fill(row + off, img + ih * p->W + iw0, cnt, sw);
        }
    }
    const int64_t L = (p->OH - 1) * g.Wq + p->OW;
    if (K == 9) {   /* (the products and sums are exact integers in float: any order gives them) */
        const float *src[9];
        float w[9];
        for (int64_t k = 0; k < 9; k++) {
            const int64_t dr = (k / p->KW) * p->dil_h, dc = (k % p->KW) * p->dil_w;
            src[k] = planes + (size_t)((dr % sh) * sw + dc % sw) * plane + (size_t)((dr / sh) * g.Wq + dc / sw);
            w[k] = wk[k];
        }
        dw_taps9(acc, src, w, L);
    } else {
        memset(acc, 0, sizeof(float) * (size_t)L);
        for (int64_t kh = 0; kh < p->KH; kh++)
            for (int64_t kw = 0; kw < p->KW; kw++) {
                const int64_t k = kh * p->KW + kw, dr = kh * p->dil_h, dc = kw * p->dil_w;
                const float *src = planes + (size_t)((dr % sh) * sw + dc % sw) * plane + (size_t)((dr / sh) * g.Wq + dc / sw);
                dw_tap(acc, src, L, wk[k]);
            }
    }
    const float s = e->scale ? e->scale[e->scale_per == CUVIL_QPER_ROW ? c : 0] : 0.0f;
    const int64_t bi = e->bias_per == CUVIL_QPER_ROW ? c : 0;
    const int32_t bias = e->ibias ? e->ibias[bi] : 0;
    const float fb = e->fbias ? e->fbias[bi] : 0.0f, lo = (float)(e->lo - e->yzp), hi = (float)(e->hi - e->yzp);
    const size_t ysz = e->kind == CUVIL_QEPI_REQUANT ? 1 : 4;
    /* the epilogue over all the rows at once (the dropped columns too, and up to a whole
     * vector past them, zeros: one vector loop without a scalar tail), into a buffer; then
     * each row's OW values to y */
    const int64_t Lv = CUVIL_ALIGN_UP(L, DW_SLACK);
    for (int64_t i = L; i < Lv; i++) acc[i] = 0.0f;
    char *out = (char *)acc + dw_acc_bytes(p, &g);
    if (e->kind == CUVIL_QEPI_I32) dw_out(acc, Lv, CUVIL_QEPI_I32, 0, s, bias, fb, lo, hi, e->yzp, out);
    else if (e->kind == CUVIL_QEPI_F32) dw_out(acc, Lv, CUVIL_QEPI_F32, 0, s, bias, fb, lo, hi, e->yzp, out);
    else if (e->yt == CUVIL_T_I8) dw_out(acc, Lv, CUVIL_QEPI_REQUANT, CUVIL_T_I8, s, bias, fb, lo, hi, e->yzp, out);
    else dw_out(acc, Lv, CUVIL_QEPI_REQUANT, CUVIL_T_U8, s, bias, fb, lo, hi, e->yzp, out);
    char *y = (char *)e->y + (size_t)((n * p->M + c) * P) * ysz;
    for (int64_t oh = 0; oh < p->OH; oh++)
        memcpy(y + (size_t)(oh * p->OW) * ysz, out + (size_t)(oh * g.Wq) * ysz, (size_t)p->OW * ysz);
}

/* ===== Depthwise, 16 channels at a time ===========================================
 * A requantizing depthwise conv with at least 8 channels runs here instead: per task a block
 * of 16 channels and a strip of output rows. The strip's input rows go, as float x - zx, into
 * a channels-last buffer T[row][col][16] with the padding as zeros (16 x 16 bytes transposed at a
 * time), so a tap is one 16-lane multiply-add per output pixel, the taps' weights w - zw a
 * 16-lane vector each. Each output row is requantized 16 channels at a time (per-channel scale
 * and bias vectors, the epilogue's arithmetic) into bytes [pixel][16], transposed back to the
 * channels' rows of y. Sums exact in float as above. (The planar kernel's per-channel setup
 * dominated the small late layers: 960 channels of 7 x 7 took 0.2 ms.) */
#define CDW_LANES 16
#define CDW_PIX 4   /* output pixels a step (8 zmm accumulators measured slower on AVX-512) */
#define CDW_RQ 4    /* pixels requantized a step: 64 values, requant_row_vec's widest step */
#define CDW_T_BYTES ((size_t)128 << 10)   /* a strip's input rows: about this much */
#define CDW_MAX_WP 4096                     /* wider padded rows take the planar kernel */

typedef struct cdw_geo {
    int64_t Wp;       /* padded row: columns 0 .. Wp-1, input column iw at iw + pad_l */
    int64_t R, rin;   /* output rows per strip; input rows a strip reads at most */
} cdw_geo;

static cdw_geo cdw_geom(const cuvil_conv2d_params *p) {
    cdw_geo g;
    g.Wp = dw_padded_w(p);
    const int64_t span = (p->KH - 1) * p->dil_h + 1, row = g.Wp * CDW_LANES * (int64_t)sizeof(float);
    const int64_t cap = cuvil_max_i64((int64_t)CDW_T_BYTES / row, span);
    g.R = cuvil_min_i64(cuvil_max_i64((cap - span) / p->stride_h + 1, 1), p->OH);
    g.rin = (g.R - 1) * p->stride_h + span;
    return g;
}

static int cdw_fits(const cuvil_conv2d_params *p) {   /* (after depthwise(p): the sizes are bounded) */
    const int64_t Wp = dw_padded_w(p);
    /* (and a strip of one output row within 4 MiB: a tall dilated kernel takes the planar one) */
    return p->C >= 8 && Wp <= CDW_MAX_WP && ((p->KH - 1) * p->dil_h + 1) * Wp * CDW_LANES * (int64_t)sizeof(float) <= ((int64_t)4 << 20);
}

/* T, the accumulators of a row (+ CDW_PIX - 1 pixels), the strip's bytes (+ 16 pixels), the weights, scales, biases */
static size_t cdw_scratch(const cuvil_conv2d_params *p) {
    const cdw_geo g = cdw_geom(p);
    return al64(sizeof(float) * (size_t)(g.rin * g.Wp * CDW_LANES)) + al64(sizeof(float) * (size_t)((p->OW + CDW_PIX - 1) * CDW_LANES)) +
           al64((size_t)((g.R * p->OW + 16) * CDW_LANES)) + al64(sizeof(float) * (size_t)(p->KH * p->KW * CDW_LANES)) +
           2 * al64(sizeof(float) * CDW_RQ * CDW_LANES);
}

/* The 16 x 16 byte transpose network, on vectors of V bytes (each 16-byte lane on its own): in
 * 16 rows from in, si bytes apart; out 16 vectors whose lane L holds column 16 L + T16_COL[k] of
 * the rows (the bit-reversed order of the interleaves), the k-th at o + k * so, or, with
 * bitrev, at o + T16_COL[k] * so (its column's place) */
static const int T16_COL[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
#define T16_NET(name, vec, load, store, u8l, u8h, u16l, u16h, u32l, u32h, u64l, u64h)                                        \
    static inline __attribute__((always_inline)) void name(const uint8_t *in, int64_t si, uint8_t *o, int64_t so, int bitrev) { \
        vec r[16], t[16];                                                                                                     \
        for (int i = 0; i < 16; i++) r[i] = load((const void *)(in + i * si));                                                \
        for (int i = 0; i < 8; i++) t[2 * i] = u8l(r[2 * i], r[2 * i + 1]), t[2 * i + 1] = u8h(r[2 * i], r[2 * i + 1]);       \
        for (int i = 0; i < 4; i++)                                                                                           \
            for (int h = 0; h < 2; h++)                                                                                       \
                r[4 * i + h] = u16l(t[4 * i + h], t[4 * i + 2 + h]), r[4 * i + 2 + h] = u16h(t[4 * i + h], t[4 * i + 2 + h]); \
        for (int i = 0; i < 2; i++)                                                                                           \
            for (int h = 0; h < 4; h++)                                                                                       \
                t[8 * i + h] = u32l(r[8 * i + h], r[8 * i + 4 + h]), t[8 * i + 4 + h] = u32h(r[8 * i + h], r[8 * i + 4 + h]); \
        for (int h = 0; h < 8; h++) r[h] = u64l(t[h], t[8 + h]), r[8 + h] = u64h(t[h], t[8 + h]);                             \
        for (int k = 0; k < 16; k++) store((void *)(o + (bitrev ? T16_COL[k] : k) * so), r[k]);                              \
    }
#if defined(__SSE2__)
static inline __m128i t16_ld128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline void t16_st128(void *p, __m128i v) { _mm_storeu_si128((__m128i *)p, v); }
T16_NET(t16_net16, __m128i, t16_ld128, t16_st128, _mm_unpacklo_epi8, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpackhi_epi16,
        _mm_unpacklo_epi32, _mm_unpackhi_epi32, _mm_unpacklo_epi64, _mm_unpackhi_epi64)
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define T16_WIDE 64   /* pixels a step of the wide transpose (one zmm of each channel) */
static inline __m512i t16_ld512(const void *p) { return _mm512_loadu_si512(p); }
static inline void t16_st512(void *p, __m512i v) { _mm512_storeu_si512(p, v); }
T16_NET(t16_wide, __m512i, t16_ld512, t16_st512, _mm512_unpacklo_epi8, _mm512_unpackhi_epi8, _mm512_unpacklo_epi16,
        _mm512_unpackhi_epi16, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32, _mm512_unpacklo_epi64, _mm512_unpackhi_epi64)
/* (the vector of pixels i, 16 + i, 32 + i, 48 + i of a [pixel][16] buffer: rows of 16 pixels) */
static inline __m512i t16_ld512px(const void *p) {
    const uint8_t *b = p;
    const __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)b));
    const __m512i v1 = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(b + 256)), 1);
    const __m512i v2 = _mm512_inserti32x4(v1, _mm_loadu_si128((const __m128i *)(const void *)(b + 512)), 2);
    return _mm512_inserti32x4(v2, _mm_loadu_si128((const __m128i *)(const void *)(b + 768)), 3);
}
T16_NET(t16_wide_px, __m512i, t16_ld512px, t16_st512, _mm512_unpacklo_epi8, _mm512_unpackhi_epi8, _mm512_unpacklo_epi16,
        _mm512_unpackhi_epi16, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32, _mm512_unpacklo_epi64, _mm512_unpackhi_epi64)
#elif defined(__AVX2__)
#define T16_WIDE 32
static inline __m256i t16_ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void t16_st256(void *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline __m256i t16_ld256px(const void *p) {
    const uint8_t *b = p;
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)b)),
                                   _mm_loadu_si128((const __m128i *)(const void *)(b + 256)), 1);
}
T16_NET(t16_wide_px, __m256i, t16_ld256px, t16_st256, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8, _mm256_unpacklo_epi16,
        _mm256_unpackhi_epi16, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64)
T16_NET(t16_wide, __m256i, t16_ld256, t16_st256, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8, _mm256_unpacklo_epi16,
        _mm256_unpackhi_epi16, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64)
#endif

/* o[j][i] = in[i][j] for a 16 x 16 block of bytes (rows of in si bytes apart, of o so bytes) */
static inline void t16x16(const uint8_t *in, int64_t si, uint8_t *o, int64_t so) {
#if defined(__SSE2__)
    t16_net16(in, si, o, so, 1);
#else
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) o[j * so + i] = in[i * si + j];
#endif
}

/* 16 bytes (int8 when s8) to 16 floats minus zx */
static inline void cdw_cvt16(float *restrict d, const uint8_t *restrict b, int s8, float zx) {
#if defined(__AVX512F__)
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)b);
    const __m512i w = s8 ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
    _mm512_storeu_ps(d, _mm512_sub_ps(_mm512_cvtepi32_ps(w), _mm512_set1_ps(zx)));
#elif defined(__AVX2__)
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)b);
    const __m128i v1 = _mm_unpackhi_epi64(v, v);
    const __m256i w0 = s8 ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v), w1 = s8 ? _mm256_cvtepi8_epi32(v1) : _mm256_cvtepu8_epi32(v1);
    _mm256_storeu_ps(d, _mm256_sub_ps(_mm256_cvtepi32_ps(w0), _mm256_set1_ps(zx)));
    _mm256_storeu_ps(d + 8, _mm256_sub_ps(_mm256_cvtepi32_ps(w1), _mm256_set1_ps(zx)));
#else
    for (int l = 0; l < 16; l++) d[l] = (s8 ? (float)(int8_t)b[l] : (float)b[l]) - zx;
#endif
}

/* acc[q][l] = sum over the taps of T at pixel q's tap position times the tap's weights (an
 * exact integer, stored as int32), for the q < nq (<= CDW_PIX) pixels from column c0 of the output row
 * whose first input row is r0 */
static inline __attribute__((always_inline)) void cdw_pixels(const float *restrict T, int64_t Wp, int64_t r0, int64_t c0,
                                                              int nq, const cuvil_conv2d_params *p, const float *restrict wv,
                                                              int32_t *restrict acc) {
    const int64_t sw = p->stride_w, KW = p->KW;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t kh = 0; kh < p->KH; kh++) {
        const float *row = T + ((r0 + kh * p->dil_h) * Wp + c0) * CDW_LANES;
        for (int64_t kw = 0; kw < KW; kw++) {
            const __m512 w = _mm512_loadu_ps(wv + (kh * KW + kw) * CDW_LANES);
            const float *v = row + kw * p->dil_w * CDW_LANES;
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(v), w, a0);
            if (nq > 1) a1 = _mm512_fmadd_ps(_mm512_loadu_ps(v + sw * CDW_LANES), w, a1);
            if (nq > 2) a2 = _mm512_fmadd_ps(_mm512_loadu_ps(v + 2 * sw * CDW_LANES), w, a2);
            if (nq > 3) a3 = _mm512_fmadd_ps(_mm512_loadu_ps(v + 3 * sw * CDW_LANES), w, a3);
        }
    }
    _mm512_storeu_si512(acc, _mm512_cvttps_epi32(a0)), _mm512_storeu_si512(acc + 16, _mm512_cvttps_epi32(a1));
    _mm512_storeu_si512(acc + 32, _mm512_cvttps_epi32(a2)), _mm512_storeu_si512(acc + 48, _mm512_cvttps_epi32(a3));
#elif defined(__AVX2__)
    __m256 a[8];
    for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
    for (int64_t kh = 0; kh < p->KH; kh++) {
        const float *row = T + ((r0 + kh * p->dil_h) * Wp + c0) * CDW_LANES;
        for (int64_t kw = 0; kw < KW; kw++) {
            const float *wq = wv + (kh * KW + kw) * CDW_LANES;
            const __m256 w0 = _mm256_loadu_ps(wq), w1 = _mm256_loadu_ps(wq + 8);
            const float *v = row + kw * p->dil_w * CDW_LANES;
            for (int q = 0; q < 4; q++)
                if (q < nq) {
                    a[2 * q] = _mm256_fmadd_ps(_mm256_loadu_ps(v + q * sw * CDW_LANES), w0, a[2 * q]);
                    a[2 * q + 1] = _mm256_fmadd_ps(_mm256_loadu_ps(v + q * sw * CDW_LANES + 8), w1, a[2 * q + 1]);
                }
        }
    }
    for (int i = 0; i < 8; i++) _mm256_storeu_si256((__m256i *)(void *)(acc + 8 * i), _mm256_cvttps_epi32(a[i]));
#else
    float a[CDW_PIX * CDW_LANES] = {0};
    for (int64_t kh = 0; kh < p->KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) {
            const float *v = T + ((r0 + kh * p->dil_h) * Wp + c0 + kw * p->dil_w) * CDW_LANES, *w = wv + (kh * KW + kw) * CDW_LANES;
            for (int q = 0; q < nq; q++)
                for (int l = 0; l < CDW_LANES; l++) a[q * CDW_LANES + l] += v[q * sw * CDW_LANES + l] * w[l];
        }
    for (int q = 0; q < CDW_PIX * CDW_LANES; q++) acc[q] = (int32_t)a[q];
#endif
}

static void cdw_task(void *vctx, int64_t t, int tid) {
    const qdw_job *j = vctx;
    const cuvil_conv2d_params *p = j->p;
    const cuvil_qgemm_epi *e = j->e;
    const cdw_geo g = cdw_geom(p);
    const int64_t n = t / (j->nblk * j->nstrip), b = t / j->nstrip % j->nblk, st = t % j->nstrip;
    const int64_t c0 = b * CDW_LANES, cb = cuvil_min_i64(CDW_LANES, p->C - c0), K = p->KH * p->KW, P = p->OH * p->OW;
    const int64_t oh0 = st * g.R, R = cuvil_min_i64(g.R, p->OH - oh0), Wp = g.Wp, OW = p->OW;
    float *T = cuvil_thread_scratch(j->scratch, tid);
    int32_t *acc = (int32_t *)(void *)(T + al64(sizeof(float) * (size_t)(g.rin * Wp * CDW_LANES)) / sizeof(float));
    uint8_t *ob = (uint8_t *)(acc + al64(sizeof(int32_t) * (size_t)((OW + CDW_PIX - 1) * CDW_LANES)) / sizeof(int32_t));
    float *wv = (float *)(void *)(ob + al64((size_t)((g.R * OW + 16) * CDW_LANES)));
    float *sc = wv + al64(sizeof(float) * (size_t)(K * CDW_LANES)) / sizeof(float);   /* (a copy per pixel of a step) */
    int32_t *bs = (int32_t *)(void *)(sc + al64(sizeof(float) * CDW_RQ * CDW_LANES) / sizeof(float));
    /* the weights w - zw, the scales, the biases (lanes past the block: 0) */
    for (int64_t l = 0; l < CDW_LANES; l++) {
        const int64_t c = c0 + l;
        if (l >= cb) {
            for (int64_t k = 0; k < K; k++) wv[k * CDW_LANES + l] = 0.0f;
            sc[l] = 0.0f, bs[l] = 0;
            continue;
        }
        dw_weights(j, c, K, wv + l, CDW_LANES);
        sc[l] = e->scale ? e->scale[e->scale_per == CUVIL_QPER_ROW ? c : 0] : 0.0f;
        bs[l] = e->ibias ? e->ibias[e->bias_per == CUVIL_QPER_ROW ? c : 0] : 0;
    }
    for (int64_t l = CDW_LANES; l < CDW_RQ * CDW_LANES; l++) sc[l] = sc[l % CDW_LANES], bs[l] = bs[l % CDW_LANES];
    /* the strip's input rows, channels last; the rows outside x and the padding columns 0. The
     * rows inside x are one run of bytes per channel (rows r_lo .. r_hi - 1): transposed 16
     * pixels at a time (the last 16 overlapping the ones before), each pixel's 16 channels
     * converted to its place in T. */
    const int64_t ih0 = oh0 * p->stride_h - p->pad_t, rin = (R - 1) * p->stride_h + (p->KH - 1) * p->dil_h + 1;
    const int64_t r_lo = cuvil_max_i64(ih0, 0), r_hi = cuvil_min_i64(ih0 + rin, p->H), HW = p->H * p->W;
    for (int64_t r = 0; r < rin; r++) {
        float *tr = T + r * Wp * CDW_LANES;
        if (ih0 + r < r_lo || ih0 + r >= r_hi) memset(tr, 0, sizeof(float) * (size_t)(Wp * CDW_LANES));
        else {
            memset(tr, 0, sizeof(float) * (size_t)(p->pad_l * CDW_LANES));
            memset(tr + (p->pad_l + p->W) * CDW_LANES, 0, sizeof(float) * (size_t)((Wp - p->pad_l - p->W) * CDW_LANES));
        }
    }
    const uint8_t *xb = j->x + (size_t)((n * p->C + c0) * HW + r_lo * p->W);
    const int s8 = j->xt == CUVIL_T_I8;
    const float zx = (float)j->zx;
    float *T0 = T + ((r_lo - ih0) * Wp + p->pad_l) * CDW_LANES;   /* input pixel (r_lo, 0) */
    const int64_t Lin = r_hi > r_lo ? (r_hi - r_lo) * p->W : 0;
    uint8_t blk16[16 * 16];
    int64_t i = 0;
#if defined(T16_WIDE)
    /* T16_WIDE pixels a step (the last step overlapping the one before): each channel's run in
     * one vector, transposed 16 lanes at a time; pixel q's 16 bytes are then at wpos[q] */
    if (cb == CDW_LANES && Lin >= T16_WIDE) {
        uint8_t wide[16 * T16_WIDE];
        int wpos[T16_WIDE];
        for (int k = 0; k < 16; k++)
            for (int L = 0; L < T16_WIDE / 16; L++) wpos[16 * L + T16_COL[k]] = k * T16_WIDE + L * 16;
        for (; i < Lin; i += T16_WIDE) {
            const int64_t i0 = cuvil_min_i64(i, Lin - T16_WIDE);
            t16_wide(xb + i0, HW, wide, T16_WIDE, 0);
            int64_t rr = i0 / p->W, cc = i0 % p->W;
            for (int q = 0; q < T16_WIDE; q++) {
                cdw_cvt16(T0 + (rr * Wp + cc) * CDW_LANES, wide + wpos[q], s8, zx);
                if (++cc == p->W) cc = 0, rr++;
            }
        }
    }
#endif
    for (; i < Lin; i += 16) {
        const int64_t i0 = Lin < 16 ? i : cuvil_min_i64(i, Lin - 16), np = cuvil_min_i64(16, Lin - i0);
        if (cb == CDW_LANES && np == 16) t16x16(xb + i0, HW, blk16, 16);
        else
            for (int64_t l = 0; l < CDW_LANES; l++)
                for (int64_t q = 0; q < np; q++) blk16[q * 16 + l] = xb[(l < cb ? l : 0) * HW + i0 + q];
        int64_t rr = i0 / p->W, cc = i0 % p->W;
        for (int64_t q = 0; q < np; q++) {
            cdw_cvt16(T0 + (rr * Wp + cc) * CDW_LANES, blk16 + q * 16, s8, zx);
            if (++cc == p->W) cc = 0, rr++;
        }
    }
    const float lo = (float)(e->lo - e->yzp), hi = (float)(e->hi - e->yzp);
    for (int64_t oh = oh0; oh < oh0 + R; oh++) {
        const int64_t r0 = (oh - oh0) * p->stride_h;
        for (int64_t ow = 0; ow < OW; ow += CDW_PIX)
            cdw_pixels(T, Wp, r0, ow * p->stride_w, (int)cuvil_min_i64(CDW_PIX, OW - ow), p, wv, acc + ow * CDW_LANES);
        /* requantized, 16 channels a pixel, CDW_RQ pixels a step where the row has them: the
         * GEMM epilogue's row, per-channel scales and biases */
        static const int32_t zero64[CDW_RQ * CDW_LANES];
        for (int64_t ow = 0; ow < OW;) {
            const int64_t nl = (OW - ow >= CDW_RQ ? CDW_RQ : 1) * CDW_LANES;
            uint8_t *o = ob + ((oh - oh0) * OW + ow) * CDW_LANES;
            const int32_t *a = acc + ow * CDW_LANES;
            for (int64_t l = requant_row_vec(a, nl, zero64, 0, sc, 1, bs, 1, lo, hi, e->yzp, e->yt, o); l < nl; l++)
                o[l] = (uint8_t)requant((float)(int32_t)((uint32_t)a[l] + (uint32_t)bs[l]) * sc[l], lo, hi, e->yzp);
            ow += nl / CDW_LANES;
        }
    }
    /* back to the channels' rows of y: the strip's rows are one run per channel */
    uint8_t *y = (uint8_t *)e->y + (size_t)((n * p->M + c0) * P + oh0 * OW);
    const int64_t Lout = R * OW;
    i = 0;
#if defined(T16_WIDE)
    if (cb == CDW_LANES && Lout >= T16_WIDE)   /* (as above; each vector row: 16-byte pixels 256 bytes apart) */
        for (; i < Lout; i += T16_WIDE) {
            const int64_t i0 = cuvil_min_i64(i, Lout - T16_WIDE);
            t16_wide_px(ob + i0 * CDW_LANES, CDW_LANES, y + i0, P, 1);
        }
#endif
    for (; i < Lout; i += 16) {
        const int64_t i0 = Lout < 16 ? i : cuvil_min_i64(i, Lout - 16);
        if (Lout >= 16 && cb == CDW_LANES) t16x16(ob + i0 * CDW_LANES, CDW_LANES, y + i0, P);
        else if (Lout >= 16) {
            t16x16(ob + i0 * CDW_LANES, CDW_LANES, blk16, 16);
            for (int64_t l = 0; l < cb; l++) memcpy(y + l * P + i0, blk16 + l * 16, 16);
        } else
            for (int64_t q = i0; q < Lout; q++)
                for (int64_t l = 0; l < cb; l++) y[l * P + q] = ob[q * CDW_LANES + l];
    }
}

/* The depthwise kernel takes a conv with one channel per group, at most QDW_TAPS taps, strides
 * and dilations up to QDW_STEP and planes of a bounded size (all checked here, before any size
 * is multiplied: a model's strides and pads go up to 2^32); any other runs on the GEMM. */
static int depthwise(const cuvil_conv2d_params *p) {
    if (p->group != p->C || p->M != p->C || p->KH * p->KW > QDW_TAPS) return 0;
    if (p->stride_h > QDW_STEP || p->stride_w > QDW_STEP || p->dil_h > QDW_STEP || p->dil_w > QDW_STEP) return 0;
    const int64_t lim = (int64_t)1 << 28;   /* floats in the planes */
    if (p->H + p->pad_t > lim || p->W + p->pad_l > lim || p->OH > lim || p->OW > lim) return 0;
    const qdw_geo g = dw_geo(p);
    return p->H <= lim / (p->W > 0 ? p->W : 1) && g.Hq <= lim / g.Wq && g.Hq * g.Wq <= lim / (p->stride_h * p->stride_w) &&
           p->OH <= lim / g.Wq;
}

size_t cuvil_qconv_scratch_size(const cuvil_conv2d_params *p) {
    const int64_t K = conv_k(p), P = p->OH * p->OW;
    if (depthwise(p)) {
        const size_t planar = dw_scratch(p), blocked = cdw_fits(p) ? cdw_scratch(p) : 0;
        return planar > blocked ? planar : blocked;
    }
    return patches_bytes(p) + al64(packed_b16_bytes(K, P)) + cuvil_qgemm_scratch_size(p->M / p->group, P, K, 1, 1);
}


void cuvil_qconv_with(const cuvil_qgemm_ukernel_desc *uk, const cuvil_conv2d_params *p, int xt, const void *x,
                      const void *xzp, const void *wp, const void *wzp, int64_t wz_n, const cuvil_qgemm_epi *e,
                      void *scratch) {
    if (depthwise(p) && cdw_fits(p) && e->kind == CUVIL_QEPI_REQUANT) {
        const cdw_geo g = cdw_geom(p);
        qdw_job j = {p, xt, x, xzp ? ld8(xt, xzp, 0) : 0, wp, wzp, wz_n, e, scratch, (p->C + CDW_LANES - 1) / CDW_LANES,
                     (p->OH + g.R - 1) / g.R};
        cuvil_parallel_for(p->N * j.nblk * j.nstrip, cdw_task, &j);
        return;
    }
    if (depthwise(p)) {
        qdw_job j = {p, xt, x, xzp ? ld8(xt, xzp, 0) : 0, wp, wzp, wz_n, e, scratch, 0, 0};
        cuvil_parallel_for(p->N * p->C, qdw_task, &j);
        return;
    }
    const int64_t G = p->group, Cg = p->C / G, Mg = p->M / G, K = conv_k(p), P = p->OH * p->OW;
    const size_t ysz = e->kind == CUVIL_QEPI_REQUANT ? 1 : 4, rows = patches_bytes(p);
    const size_t off = rows + al64(packed_b16_bytes(K, P)), wper = al64(cuvil_qgemm_packed_a_bytes(Mg, K));
    const int32_t zx = xzp ? ld8(xt, xzp, 0) : 0;
    void *bp = (char *)scratch + rows;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t g = 0; g < G; g++) {
            pack_patches(p, xt, (const char *)x + (size_t)((n * p->C + g * Cg) * p->H * p->W), zx, scratch, uk->bw, bp);
            cuvil_qgemm_epi eg = *e;
            eg.y = (char *)e->y + (size_t)((n * p->M + g * Mg) * P) * ysz;
            eg.ldy = P;
            if (e->scale_per == CUVIL_QPER_ROW) eg.scale = e->scale + g * Mg;
            if (e->bias_per == CUVIL_QPER_ROW) {
                if (e->ibias) eg.ibias = e->ibias + g * Mg;
                if (e->fbias) eg.fbias = e->fbias + g * Mg;
            }
            const void *wzg = wzp && wz_n > 1 ? (const char *)wzp + (size_t)(g * Mg) : wzp;
            qgemm_packed(uk, Mg, P, K, (const char *)wp + (size_t)g * wper, bp, wzg, wz_n, xzp, xzp ? 1 : 0, &eg, scratch, off);
        }
}

void cuvil_qconv(const cuvil_conv2d_params *p, int xt, const void *x, const void *xzp, const void *wp, const void *wzp,
                 int64_t wz_n, const cuvil_qgemm_epi *e, void *scratch) {
    cuvil_qconv_with(cuvil_qgemm_best(1), p, xt, x, xzp, wp, wzp, wz_n, e, scratch);
}

void cuvil_qscale(int64_t n, const float *xs, const float *ws, int64_t ws_n, const float *ys, float *out) {
    for (int64_t i = 0; i < n; i++) {
        const float ab = xs[0] * ws[ws_n > 1 ? i : 0];
        out[i] = ys ? ab / ys[0] : ab;
    }
}
