/*
 * gemm.c -- blocked single-precision GEMM (BLIS/GotoBLAS structure) shared by GEMM, MatMul,
 * Conv and ConvTranspose.
 *
 * Loop nest, outermost first:
 *   jc over N in steps of NC   B block  (kc x nc, packed, lives in L2)
 *   pc over K in steps of KC     pack B[pc.., jc..] into NR-wide panels
 *   ic over M in steps of MC     pack alpha*A[ic.., pc..] into MR-tall panels (L2)
 *   ir over mc in steps of MR    one A micro-panel stays in L1
 *   jr over nc in steps of NR    microkernel: MR x NR tile of C, accumulators in registers
 * The tiles of C (and of a residual read into them) are visited along MR rows, so that C is
 * written as MR sequential streams the hardware prefetcher follows; with jr outside ir (BLIS's
 * order, a B micro-panel kept in L1) every tile touches MC different rows, and a 1x1 conv's
 * output at 56x56 (M = 256, K = 64, + residual) ran at half the FMA peak waiting on them
 * (ResNet-50 layer1 conv3 1.29 -> 1.01 ms one thread; B micro-panels now come from L2, which
 * cost nothing measurable down to K = 16).
 * The first K block stores C = A*B (+ c_init, e.g. a residual, which may be C itself); later
 * blocks accumulate onto C; after the last K block the tile, still in L1, gets the epilogue
 * (beta * bias, activation). The microkernel is picked from cuvil_f32_gemm_ukernels[]
 * (6x16 AVX2+FMA on x86_64-avx2, a portable 4x8 otherwise). K is cut into equal blocks of at
 * most KC; alpha is folded into the packed A; edge tiles compute a full MR x NR tile on the
 * zero-padded panels and store only the valid part. A transposed B is packed with 8x8
 * register transposes on AVX2. A single-row product (M == 1, e.g. a batch-1 fully connected
 * layer) skips packing and streams B once (GEMV). On AVX-512, a row-major A times a B packed
 * ahead takes another order (gemm_range_lda): A's rows read in place 12 at a time, each against
 * every panel of a block of B kept in L2, nothing packed.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"
#include "../transpose8.h"

/* ===== Microkernel table ========================================================== */
const cuvil_gemm_ukernel_desc cuvil_f32_gemm_ukernels[] = {
    {cuvil_f32_gemm_ukernel_4x8__scalar, 4, 8, "4x8__scalar", cuvil_f32_conv_ukernel_4x8__scalar,
     cuvil_f32_rows_ukernel_4x8__scalar},
#if CUVIL_HAVE_AVX2
    /* for 49 rows (7x7 maps as pixels-as-rows GEMMs): 50 in 5s, 54 in 6s
     * (cuvil_gemm_blocking_for_rows) */
    {cuvil_f32_gemm_ukernel_5x16__avx2_fma, 5, 16, "5x16__avx2_fma", NULL, cuvil_f32_rows_ukernel_5x16__avx2_fma},
    {cuvil_f32_gemm_ukernel_6x16__avx2_fma, 6, 16, "6x16__avx2_fma", cuvil_f32_conv_ukernel_6x16__avx2_fma,
     cuvil_f32_rows_ukernel_6x16__avx2_fma},
#endif
#if CUVIL_HAVE_AVX512
    {cuvil_f32_gemm_ukernel_7x32__avx512, 7, 32, "7x32__avx512", NULL, cuvil_f32_rows_ukernel_7x32__avx512},
    {cuvil_f32_gemm_ukernel_8x32__avx512, 8, 32, "8x32__avx512", cuvil_f32_conv_ukernel_8x32__avx512,
     cuvil_f32_rows_ukernel_8x32__avx512},
#endif
};
const int cuvil_f32_gemm_n_ukernels =
    (int)(sizeof cuvil_f32_gemm_ukernels / sizeof cuvil_f32_gemm_ukernels[0]);

/* KC: a kc x NR B micro-panel (16 KiB at 256 x 16) stays in L1 next to an A micro-panel;
 * MC x KC of A (144 KiB) and KC x NC of B (1 MiB at 256 x 1024) share L2 (2 MiB per core on
 * the Sapphire Rapids this was tuned on; a 256 KiB-L2 part would want a smaller NC). */
#define N_UKERNELS (sizeof cuvil_f32_gemm_ukernels / sizeof cuvil_f32_gemm_ukernels[0])
static const cuvil_gemm_blocking default_blocking = {
    &cuvil_f32_gemm_ukernels[N_UKERNELS - 1],
#if CUVIL_HAVE_AVX512
    /* a 192 x 32 B micro-panel is 24 KiB of a 32-48 KiB L1 */
    256, 192, 1024,
#elif CUVIL_HAVE_AVX2
    144, 256, 1024,
#else
    128, 256, 1024,
#endif
};

const cuvil_gemm_blocking *cuvil_gemm_default_blocking(void) { return &default_blocking; }

cuvil_gemm_blocking cuvil_gemm_blocking_for_rows(const cuvil_gemm_blocking *b, int64_t M) {
    cuvil_gemm_blocking best = *b;
    int64_t best_rows = CUVIL_ALIGN_UP(M, b->uk->mr);
    for (size_t u = 0; u < N_UKERNELS; u++) {
        const cuvil_gemm_ukernel_desc *uk = &cuvil_f32_gemm_ukernels[u];
        const int64_t rows = CUVIL_ALIGN_UP(M, uk->mr);
        /* a smaller MR does fewer FMAs per load: in place it ran ~2.5% slower per FMA (7x32
         * against 8x32 on a 1024->256 1x1 conv at 14x14, 196 rows: 0.993 against 0.968 ms),
         * so it must save more than 5% of the rows (49: 49 against 56; 196: 196 against 200
         * stays 8x32; AVX2's 5x16 alone 2-4% slower per FMA than 6x16) */
        if (uk->nr != b->uk->nr || rows * 20 >= best_rows * 19) continue;
        best_rows = rows;
        best.uk = uk;
        best.mc = cuvil_max_i64(uk->mr, b->mc / uk->mr * uk->mr);
    }
    return best;
}

/* ===== Portable microkernel ======================================================== */
/* Plain C written so that -O3 keeps the 4x8 accumulators in vector registers (two SSE or one
 * AVX register per row). Same packing and contract as the ISA-specific ones. */
void cuvil_f32_gemm_ukernel_4x8__scalar(size_t kc, const float *a, const float *b, float *c,
                                        size_t ldc, size_t mr, size_t nr, const float *c_in,
                                        size_t ld_in, const cuvil_ukernel_epi *epi) {
    float acc[4][8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    for (size_t k = 0; k < kc; k++) {
        for (int i = 0; i < 4; i++) {
            const float ai = a[i];
            for (int j = 0; j < 8; j++) acc[i][j] += ai * b[j];
        }
        a += 4;
        b += 8;
    }
    cuvil_ukernel_store_rows(acc[0], 8, c, ldc, mr, nr, c_in, ld_in, epi);
}

void cuvil_f32_conv_ukernel_4x8__scalar(size_t kc, const float *a, const float *b, const int64_t *boff, float *c,
                                        int accumulate) {
    float acc[4][8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) acc[i][j] = accumulate ? c[i * 8 + j] : 0.0f;
    for (size_t k = 0; k < kc; k++) {
        const float *bk = b + boff[k];
        for (int i = 0; i < 4; i++) {
            const float ai = a[i];
            for (int j = 0; j < 8; j++) acc[i][j] += ai * bk[j];
        }
        a += 4;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) c[i * 8 + j] = acc[i][j];
}

/* The 4x8 tile with A's rows read in place, in segments (direct convolution on a
 * channels-last image, conv2d.c): segment s is, for row i, the seglen[s] floats at
 * rows[s * 4 + i]; B a packed panel of their sum x 8. */
void cuvil_f32_rows_ukernel_4x8__scalar(size_t nseg, const size_t *seglen, const float *const *rows, const float *b,
                                        float *c, size_t ldc, size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                        const cuvil_ukernel_epi *epi) {
    float acc[4][8];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    for (size_t s = 0; s < nseg; s++)
        for (size_t k = 0; k < seglen[s]; k++) {
            for (int i = 0; i < 4; i++) {
                const float ai = rows[s * 4 + (size_t)i][k];
                for (int j = 0; j < 8; j++) acc[i][j] += ai * b[j];
            }
            b += 8;
        }
    cuvil_ukernel_store_rows(acc[0], 8, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* ===== Packing ======================================================================= */
/* alpha * A'[m0 .. m0+mc, k0 .. k0+kc) into ceil(mc/MR) panels of kc x MR, zero padded. */
static void pack_a(const cuvil_gemm_job *j, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                   int mr, float *dst) {
    const float alpha = j->alpha;
    for (int64_t i0 = 0; i0 < mc; i0 += mr) {
        const int64_t rows = cuvil_min_i64(mr, mc - i0);
        if (!j->trans_a) {
            /* A is [M, K]: each packed k step gathers one element of each of MR rows. */
            const float *src = j->A + (m0 + i0) * j->lda + k0;
            int64_t k0v = 0;
#if defined(__AVX2__)
            /* 8 or 6 rows (AVX-512's 8x32, AVX2's 6x16), fewer in a last panel (zero rows): 8 k
             * steps at a time by register transposes (the gather below ran at ~1% of ResNet-50,
             * packing the Winograd GEMMs' channels-last V, and at 10% of Whisper-tiny's encoder on
             * AVX2, attention's probabilities and the MatMuls' activations: 4.7% after, perf, one
             * thread; ViT-S/16 ~100 -> ~95 ms). With 6 rows each k step's 8 lanes are stored whole, in order, the next
             * step overwriting the 2 past it, but the last of a block of 8 (6 floats: the packed
             * panel may end there). */
            if (mr == 8 || mr == 6) {
                const __m256 va = _mm256_set1_ps(alpha);
                for (; k0v + 8 <= kc; k0v += 8) {
                    __m256 a[8];
                    for (int i = 0; i < 8; i++)
                        a[i] = i < rows ? _mm256_loadu_ps(src + i * j->lda + k0v) : _mm256_setzero_ps();
                    cuvil_transpose8_regs(a);
                    for (int i = 0; i < 7; i++) _mm256_storeu_ps(dst + (k0v + i) * mr, _mm256_mul_ps(va, a[i]));
                    const __m256 last = _mm256_mul_ps(va, a[7]);
                    if (mr == 8) {
                        _mm256_storeu_ps(dst + (k0v + 7) * 8, last);
                    } else {
                        _mm_storeu_ps(dst + (k0v + 7) * 6, _mm256_castps256_ps128(last));
                        _mm_storel_pi((__m64 *)(void *)(dst + (k0v + 7) * 6 + 4), _mm256_extractf128_ps(last, 1));
                    }
                }
            }
#endif
            for (int64_t k = k0v; k < kc; k++) {
                int64_t i = 0;
                for (; i < rows; i++) dst[k * mr + i] = alpha * src[i * j->lda + k];
                for (; i < mr; i++) dst[k * mr + i] = 0.0f;
            }
        } else {
            /* A is [K, M]: a packed k step is MR contiguous elements. */
            const float *src = j->A + k0 * j->lda + m0 + i0;
            for (int64_t k = 0; k < kc; k++) {
                int64_t i = 0;
                for (; i < rows; i++) dst[k * mr + i] = alpha * src[k * j->lda + i];
                for (; i < mr; i++) dst[k * mr + i] = 0.0f;
            }
        }
        dst += kc * mr;
    }
}

static void pack_b_dense(const cuvil_gemm_job *j, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                         int nr, float *dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += nr) {
        const int64_t cols = cuvil_min_i64(nr, nc - j0);
        if (!j->trans_b) {
            const float *src = j->B + k0 * j->ldb + n0 + j0;
            if (cols == nr) {
                cuvil_copy_rows(dst, nr, src, j->ldb, kc, nr);
            } else {
                for (int64_t k = 0; k < kc; k++) {
                    int64_t c = 0;
                    for (; c < cols; c++) dst[k * nr + c] = src[k * j->ldb + c];
                    for (; c < nr; c++) dst[k * nr + c] = 0.0f;
                }
            }
        } else {
            /* B is [N, K]: walk each of the NR rows contiguously. */
            const float *src = j->B + (n0 + j0) * j->ldb + k0;
#if CUVIL_HAVE_AVX2
            if (nr == 16 && cols == 16) {
                cuvil_f32_gemm_pack_b_t16__avx2((size_t)kc, src, (size_t)j->ldb, dst);
                dst += kc * nr;
                continue;
            }
#endif
            for (int64_t c = 0; c < cols; c++) {
                const float *s = src + c * j->ldb;
                for (int64_t k = 0; k < kc; k++) dst[k * nr + c] = s[k];
            }
            for (int64_t c = cols; c < nr; c++)
                for (int64_t k = 0; k < kc; k++) dst[k * nr + c] = 0.0f;
        }
        dst += kc * nr;
    }
}

/* ===== Epilogue ====================================================================== */
void cuvil_gemm_epilogue_tile(const cuvil_gemm_job *j, int64_t m0, int64_t n0, int64_t mr,
                              int64_t nr) {
    float *c = j->C + m0 * j->ldc + n0;
    if (j->bias) {
        const float beta = j->beta;
        for (int64_t i = 0; i < mr; i++) {
            float *ci = c + i * j->ldc;
            const float *bi = j->bias + (m0 + i) * j->bias_rs + n0 * j->bias_cs;
            if (j->bias_cs == 0) {
                const float bv = beta * bi[0];
                for (int64_t jj = 0; jj < nr; jj++) ci[jj] += bv;
            } else if (j->bias_cs == 1) {
                for (int64_t jj = 0; jj < nr; jj++) ci[jj] += beta * bi[jj];
            } else {
                for (int64_t jj = 0; jj < nr; jj++) ci[jj] += beta * bi[jj * j->bias_cs];
            }
        }
    }
    cuvil_f32_act_rows(&j->act, c, (size_t)j->ldc, (size_t)mr, (size_t)nr);   /* (the kernel picked once a tile) */
}

/* ===== M == 1: GEMV without packing =================================================== */
/* A single row (a fully connected layer at batch 1) would spend more time packing B than
 * multiplying, so it streams B once instead: dot products over B's rows when B is [N, K]
 * (trans_b), or a sum of scaled rows of B accumulated a chunk of columns at a time. */
#define GEMV_CHUNK 256

static int gemv_applies(const cuvil_gemm_job *j) {
    return j->M == 1 && j->pack_b == NULL && j->pack_a == NULL && j->a_packed == NULL && (!j->trans_a || j->lda == 1 || j->K == 1);
}

static int64_t pick_kc(int64_t K, int64_t kc_max);

/* Columns [n_lo, n_hi) (n_lo a multiple of the panel width), epilogue included, of one row of
 * A times the prepacked B, whose K blocks each hold all N columns' panels in a row: for each
 * run of up to GEMV_RUN columns, the K blocks are read in turn, each run's panels contiguous,
 * so B streams from memory nearly in order. (Panel by panel, all K blocks for each, made as
 * many streams as K blocks, 22 KB each: MobileNetV2's classifier, 1280 x 1000, 0.308 ms
 * against 0.210 this way, one thread, in a slow period of the AMD EPYC VM.) */
#define GEMV_RUN 512

/* acc[t] += sum_k a[k] * w(panel[k * pnr + t]) for t < pnr, the panel's values in 16 bits
 * (kind), widened in registers where the target has the instructions. */
static void gemv_panel16(int kind, size_t kc, const float *a, const uint16_t *panel, int pnr, float *acc) {
#if CUVIL_HAVE_AVX512
    if (pnr == 32) {
        cuvil_f32_gemv_panel32_w16__avx512(kind, kc, a, panel, acc);
        return;
    }
#endif
#if CUVIL_HAVE_AVX2
    if (pnr == 16) {
        cuvil_f32_gemv_panel16_w16__avx2_fma(kind, kc, a, panel, acc);
        return;
    }
#endif
    float w[CUVIL_GEMM_MAX_NR];
    for (size_t k = 0; k < kc; k++) {
        cuvil_widen16(kind, panel + k * (size_t)pnr, w, (size_t)pnr);
        for (int t = 0; t < pnr; t++) acc[t] += a[k] * w[t];
    }
}

/* x[i] rounded to the nearest bfloat16 (even on a tie; a NaN stays a NaN, quiet; a subnormal
 * becomes a zero of its sign, as vcvtneps2bf16 makes it), as a float. */
static void round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
        else if (!(u & 0x7F800000u)) u &= 0x80000000u;
        else u += 0x7FFFu + ((u >> 16) & 1u);
        u &= 0xFFFF0000u;
        memcpy(x + i, &u, sizeof u);
    }
}

int cuvil_gemm_bf16_dot_hw = -1;

/* Whether CUVIL_W16_BF16_DOT's products run on vdpbf16ps here (the CPU asked once; a race
 * writes the same answer). */
static int bf16_dot_hw(void) {
#if CUVIL_HAVE_AVX512
    static int has = -1;
    if (!cuvil_gemm_bf16_dot_hw) return 0;
    if (has < 0) has = cuvil_rt_cpu_lacks("avx512bf16", NULL) == NULL;
    return has;
#else
    return 0;
#endif
}

#define GEMV_DOT_CHUNK 256
static void gemv_packed_range(const cuvil_gemm_job *j, int64_t n_lo, int64_t n_hi) {
    const int64_t N = j->N, K = j->K, pnr = j->b_packed_nr;
    /* CUVIL_W16_BF16_DOT: alpha * a rounded to bfloat16, a chunk at a time */
    const int dot = j->b16 == CUVIL_W16_BF16_DOT;
    const float alpha = dot ? 1.0f : j->alpha;
    float ab[GEMV_DOT_CHUNK];
    const int64_t kcb = pick_kc(K, j->b_packed_kc), Np = CUVIL_ALIGN_UP(N, pnr);
    const float *a = j->A, *ci = j->c_init;
    float *c = j->C;
    float acc[GEMV_RUN + CUVIL_GEMM_MAX_NR];
    const int64_t run = GEMV_RUN / pnr * pnr; /* whole panels */
    for (int64_t r0 = n_lo; r0 < n_hi; r0 += run) {
        const int64_t r1 = cuvil_min_i64(n_hi, r0 + run), width = CUVIL_ALIGN_UP(r1 - r0, pnr);
        for (int64_t t = 0; t < width; t++) acc[t] = 0.0f;
        for (int64_t pc = 0; pc < K; pc += kcb) {
            const int64_t kc = cuvil_min_i64(kcb, K - pc);
            if (dot) {   /* (each chunk of a rounded once for the run's panels) */
                for (int64_t k0 = 0; k0 < kc; k0 += GEMV_DOT_CHUNK) {
                    const int64_t n = cuvil_min_i64(GEMV_DOT_CHUNK, kc - k0);
                    for (int64_t k = 0; k < n; k++) ab[k] = j->alpha * a[pc + k0 + k];
                    round_bf16(ab, (size_t)n);
                    for (int64_t n0 = r0; n0 < r1; n0 += pnr)
                        gemv_panel16(j->b16, (size_t)n, ab, j->b_packed16 + pc * Np + n0 * kc + k0 * pnr, (int)pnr,
                                     acc + (n0 - r0));
                }
                continue;
            }
            for (int64_t n0 = r0; n0 < r1; n0 += pnr) {
                float *an = acc + (n0 - r0);
                if (j->b_packed16) {
                    gemv_panel16(j->b16, (size_t)kc, a + pc, j->b_packed16 + pc * Np + n0 * kc, (int)pnr, an);
                    continue;
                }
                const float *panel = j->b_packed + pc * Np + n0 * kc;
#if CUVIL_HAVE_AVX512
                if (pnr == 32) {
                    cuvil_f32_gemv_panel32__avx512((size_t)kc, a + pc, panel, an);
                    continue;
                }
#endif
#if CUVIL_HAVE_AVX2
                if (pnr == 16) {
                    cuvil_f32_gemv_panel16__avx2_fma((size_t)kc, a + pc, panel, an);
                    continue;
                }
#endif
                for (int64_t k = 0; k < kc; k++)
                    for (int64_t t = 0; t < pnr; t++) an[t] += a[pc + k] * panel[k * pnr + t];
            }
        }
        for (int64_t n = r0; n < cuvil_min_i64(r1, N); n++) c[n] = alpha * acc[n - r0] + (ci ? ci[n] : 0.0f);
    }
    cuvil_gemm_epilogue_tile(j, 0, n_lo, 1, n_hi - n_lo);
}

typedef struct gemv_split {
    const cuvil_gemm_job *j;
    int64_t step;
} gemv_split;

static void gemv_task(void *vctx, int64_t t, int tid) {
    (void)tid;
    const gemv_split *s = (const gemv_split *)vctx;
    gemv_packed_range(s->j, t * s->step, cuvil_min_i64(s->j->N, (t + 1) * s->step));
}

/* One row of A times a prepacked B: each NR-column panel is read once, contiguously; a large
 * B (a classifier's 1000 x 1280) is split by panels among the threads. */
static void gemv_packed(const cuvil_gemm_job *j) {
    const int threads = cuvil_threads();
    const int64_t panels = (j->N + j->b_packed_nr - 1) / j->b_packed_nr;
    if (threads <= 1 || panels < 2 || (double)j->N * (double)j->K < 2.5e5) {
        gemv_packed_range(j, 0, j->N);
        return;
    }
    const int64_t parts = cuvil_min_i64(panels, threads);
    gemv_split s = {j, (panels + parts - 1) / parts * j->b_packed_nr};
    cuvil_parallel_for((j->N + s.step - 1) / s.step, gemv_task, &s);
}

static void gemv(const cuvil_gemm_job *j) {
    const int64_t N = j->N, K = j->K;
    const float *a = j->A, alpha = j->alpha;
    const float *ci = j->c_init;
    float *c = j->C;
    if (j->trans_b) {
#if CUVIL_HAVE_AVX2
        cuvil_f32_gemv_t__avx2_fma((size_t)K, (size_t)N, a, j->B, (size_t)j->ldb, alpha, ci, c);
        cuvil_gemm_epilogue_tile(j, 0, 0, 1, N);
        return;
#endif
        int64_t n = 0;
        for (; n + 4 <= N; n += 4) {
            const float *b0 = j->B + n * j->ldb, *b1 = b0 + j->ldb, *b2 = b1 + j->ldb,
                        *b3 = b2 + j->ldb;
            float s0[8] = {0}, s1[8] = {0}, s2[8] = {0}, s3[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8)
                for (int l = 0; l < 8; l++) {
                    const float av = a[k + l];
                    s0[l] += av * b0[k + l];
                    s1[l] += av * b1[k + l];
                    s2[l] += av * b2[k + l];
                    s3[l] += av * b3[k + l];
                }
            float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
            for (int l = 0; l < 8; l++) {
                t0 += s0[l];
                t1 += s1[l];
                t2 += s2[l];
                t3 += s3[l];
            }
            for (; k < K; k++) {
                t0 += a[k] * b0[k];
                t1 += a[k] * b1[k];
                t2 += a[k] * b2[k];
                t3 += a[k] * b3[k];
            }
            const float r0 = alpha * t0, r1 = alpha * t1, r2 = alpha * t2, r3 = alpha * t3;
            c[n] = ci ? r0 + ci[n] : r0;
            c[n + 1] = ci ? r1 + ci[n + 1] : r1;
            c[n + 2] = ci ? r2 + ci[n + 2] : r2;
            c[n + 3] = ci ? r3 + ci[n + 3] : r3;
        }
        for (; n < N; n++) {
            const float *b0 = j->B + n * j->ldb;
            float s0[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8)
                for (int l = 0; l < 8; l++) s0[l] += a[k + l] * b0[k + l];
            float t0 = 0.0f;
            for (int l = 0; l < 8; l++) t0 += s0[l];
            for (; k < K; k++) t0 += a[k] * b0[k];
            c[n] = ci ? alpha * t0 + ci[n] : alpha * t0;
        }
    } else {
        float acc[GEMV_CHUNK];
        for (int64_t n0 = 0; n0 < N; n0 += GEMV_CHUNK) {
            const int64_t nn = cuvil_min_i64(GEMV_CHUNK, N - n0);
            for (int64_t t = 0; t < nn; t++) acc[t] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float av = a[k];
                const float *bk = j->B + k * j->ldb + n0;
                for (int64_t t = 0; t < nn; t++) acc[t] += av * bk[t];
            }
            if (ci)
                for (int64_t t = 0; t < nn; t++) c[n0 + t] = alpha * acc[t] + ci[n0 + t];
            else
                for (int64_t t = 0; t < nn; t++) c[n0 + t] = alpha * acc[t];
        }
    }
    cuvil_gemm_epilogue_tile(j, 0, 0, 1, N);
}

/* ===== Driver ======================================================================== */
static int64_t pick_kc(int64_t K, int64_t kc_max) {
    /* Split K into equal blocks rather than KC, KC, ..., small remainder. */
    int64_t nblk = (K + kc_max - 1) / kc_max;
    return (K + nblk - 1) / nblk;
}

int64_t cuvil_gemm_kc_split(int64_t K, int64_t kc_max) { return K > 0 ? pick_kc(K, kc_max) : 0; }

size_t cuvil_gemm_packed_a_floats(int64_t M, int64_t K, int mr) {
    return M > 0 && K > 0 ? (size_t)(CUVIL_ALIGN_UP(M, mr) * K) : 0;
}

void cuvil_gemm_pack_a_all(const cuvil_gemm_job *j, int mr, int64_t kc_max, float *dst) {
    if (j->M <= 0 || j->K <= 0) return;
    const int64_t kcb = pick_kc(j->K, kc_max), Mp = CUVIL_ALIGN_UP(j->M, mr);
    for (int64_t pc = 0; pc < j->K; pc += kcb) pack_a(j, 0, j->M, pc, cuvil_min_i64(kcb, j->K - pc), mr, dst + pc * Mp);
}

size_t cuvil_gemm_packed_b_floats(int64_t N, int64_t K, int nr) {
    return N > 0 && K > 0 ? (size_t)(CUVIL_ALIGN_UP(N, nr) * K) : 0;
}

void cuvil_gemm_pack_b_all(const cuvil_gemm_job *j, int nr, int64_t kc_max, float *dst) {
    if (j->N <= 0 || j->K <= 0) return;
    const int64_t kcb = pick_kc(j->K, kc_max), Np = CUVIL_ALIGN_UP(j->N, nr);
    for (int64_t pc = 0; pc < j->K; pc += kcb) pack_b_dense(j, pc, cuvil_min_i64(kcb, j->K - pc), 0, j->N, nr, dst + pc * Np);
}

/* Like pack_b_dense, reading B from a prepacked copy made with another NR or KC. */
static void repack_b(const cuvil_gemm_job *j, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float *dst) {
    const int64_t pnr = j->b_packed_nr, kcb = pick_kc(j->K, j->b_packed_kc), Np = CUVIL_ALIGN_UP(j->N, pnr);
    for (int64_t j0 = 0; j0 < nc; j0 += nr)
        for (int64_t k = 0; k < kc; k++)
            for (int c = 0; c < nr; c++) {
                const int64_t n = n0 + j0 + c, kk = k0 + k;
                float v = 0.0f;
                if (j0 + c < nc) {
                    const int64_t pc = kk / kcb * kcb, kcp = cuvil_min_i64(kcb, j->K - pc);
                    const int64_t at = pc * Np + (n / pnr) * pnr * kcp + (kk - pc) * pnr + n % pnr;
                    if (j->b_packed) v = j->b_packed[at];
                    else cuvil_widen16(j->b16, j->b_packed16 + at, &v, 1);
                }
                dst[(j0 / nr) * kc * nr + k * nr + c] = v;
            }
}

/* Like pack_a, reading A from a prepacked copy made with another MR or KC (a runtime built
 * with another blocking than the compiler assumed: correct, only slower). */
static void repack_a(const cuvil_gemm_job *j, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int mr, float *dst) {
    const int pmr = j->a_packed_mr;
    const int64_t kcb = pick_kc(j->K, j->a_packed_kc), Mp = CUVIL_ALIGN_UP(j->M, pmr);
    for (int64_t i0 = 0; i0 < mc; i0 += mr)
        for (int64_t k = 0; k < kc; k++)
            for (int i = 0; i < mr; i++) {
                const int64_t m = m0 + i0 + i, kk = k0 + k;
                float v = 0.0f;
                if (i0 + i < mc) {
                    const int64_t pc = kk / kcb * kcb, kcp = cuvil_min_i64(kcb, j->K - pc);
                    v = j->a_packed[pc * Mp + (m / pmr) * pmr * kcp + (kk - pc) * pmr + m % pmr];
                }
                dst[(i0 / mr) * kc * mr + k * mr + i] = v;
            }
}

size_t cuvil_gemm_job_scratch_size(int64_t M, int64_t N, int64_t K,
                                   const cuvil_gemm_blocking *b) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    const int64_t mr = b->uk->mr, nr = b->uk->nr;
    /* (not pick_kc(K): its equal blocks are not monotonic in K, 300 gives 150 where 256 gives
     * 256, and a caller with symbolic dims sizes the scratch for their upper bounds, the run
     * taking any K up to them) */
    const int64_t kc = cuvil_min_i64(K, b->kc);
    const int64_t mc = CUVIL_ALIGN_UP(cuvil_min_i64(b->mc, M), mr);
    const int64_t nc = CUVIL_ALIGN_UP(cuvil_min_i64(b->nc, N), nr);
    size_t a_bytes = CUVIL_ALIGN_UP((size_t)(mc * kc) * sizeof(float), 64);
    size_t b_bytes = CUVIL_ALIGN_UP((size_t)(kc * nc) * sizeof(float), 64);
    return a_bytes + b_bytes;
}

/* The tile at (m0, n0) of C (c): what its microkernel adds (c_in, ld_in: C itself after the
 * first K block, else the initial value or nothing) and, in the last K block of a fused
 * epilogue, epi with the tile's biases (else NULL). */
static inline const cuvil_ukernel_epi *tile_inputs(const cuvil_gemm_job *j, int first, int last, int fuse,
                                                   cuvil_ukernel_epi *epi, int64_t m0, int64_t n0, float *c,
                                                   const float **cin, size_t *ld_in) {
    *cin = NULL;
    *ld_in = 0;
    if (!first) {
        *cin = c;
        *ld_in = (size_t)j->ldc;
    } else if (j->c_init) {
        *cin = j->c_init + m0 * j->ld_init + n0;
        *ld_in = (size_t)j->ld_init;
    }
    if (!(last && fuse)) return NULL;
    epi->row_bias = j->bias && j->bias_cs == 0 ? j->bias + m0 : NULL;
    epi->col_bias = j->bias && j->bias_cs == 1 ? j->bias + n0 : NULL;
    return epi;
}

#if CUVIL_HAVE_AVX512
/* The A-in-place path (gemm_range) for this job and blocking, whatever its rows: where the
 * packed path would block K as the weights were packed (so that a part of a thread split taking
 * either path sums in the same blocks: the same bits), or for any blocking where the job asks
 * for it (a_in_place, whose caller checks the rest). */
static int lda_applies(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b) {
    const cuvil_gemm_ukernel_desc *uk = b->uk;
    return uk->nr == 32 && uk->mr <= 8 && uk->rows && j->b_packed && j->b_packed_nr == 32 && !j->trans_a &&
           !j->a_packed && !j->pack_a && j->alpha == 1.0f && j->b16 != CUVIL_W16_BF16_DOT &&
           (j->a_in_place || pick_kc(j->K, j->b_packed_kc) == pick_kc(j->K, b->kc));
}

/* The bytes of B a block of columns keeps in L2 while every 12-row tile of A passes it. */
#define LDA_B_BLOCK_BYTES (512 * 1024)

/* gemm_range with A's rows read in place (see there): for each block of B's columns and each
 * K block (the prepacking's), every 12 rows of A (in L1) against each panel of the block (in
 * L2); a last 1-11 rows by the 8x32 rows microkernel (its rows clamped to the valid ones). */
static void gemm_range_lda(const cuvil_gemm_job *j, const cuvil_gemm_ukernel_desc *uk, int64_t m_lo, int64_t m_hi,
                           int64_t n_lo, int64_t n_hi, cuvil_ukernel_epi *epi, int fuse, int has_epilogue,
                           int act_after) {
    enum { R = CUVIL_GEMM_LDA_ROWS, NRL = 32 };
    const int64_t K = j->K, kcb = pick_kc(K, j->b_packed_kc), Np = CUVIL_ALIGN_UP(j->N, NRL);
    const int64_t nc_blk = cuvil_max_i64(NRL, LDA_B_BLOCK_BYTES / (kcb * (int64_t)sizeof(float)) / NRL * NRL);
    for (int64_t jc = n_lo; jc < n_hi; jc += nc_blk) {
        const int64_t jend = cuvil_min_i64(n_hi, jc + nc_blk);
        for (int64_t pc = 0; pc < K; pc += kcb) {
            const int64_t kc = cuvil_min_i64(kcb, K - pc);
            const int first = pc == 0, last = pc + kc == K;
            const float *bpk = j->b_packed + pc * Np;
            for (int64_t m0 = m_lo; m0 < m_hi;) {
                const int64_t rows = m_hi - m0 >= R ? R : cuvil_min_i64(uk->mr, m_hi - m0);
                for (int64_t n0 = jc; n0 < jend; n0 += NRL) {
                    const size_t nrr = (size_t)cuvil_min_i64(NRL, jend - n0);
                    float *c = j->C + m0 * j->ldc + n0;
                    const float *cin;
                    size_t ld_in;
                    const cuvil_ukernel_epi *ep = tile_inputs(j, first, last, fuse, epi, m0, n0, c, &cin, &ld_in);
                    const float *a = j->A + m0 * j->lda + pc, *bpanel = bpk + n0 * kc;
                    if (rows == R) {
                        cuvil_f32_gemm_lda_ukernel_12x32__avx512((size_t)kc, a, (size_t)j->lda, bpanel, c,
                                                                 (size_t)j->ldc, nrr, cin, ld_in, ep);
                    } else {
                        const float *rp[8];   /* uk->mr <= 8 (the caller checks) */
                        for (int i = 0; i < uk->mr; i++) rp[i] = a + cuvil_min_i64(i, rows - 1) * j->lda;
                        const size_t seg = (size_t)kc;
                        uk->rows(1, &seg, rp, bpanel, c, (size_t)j->ldc, (size_t)rows, nrr, cin, ld_in, ep);
                    }
                    if (last && has_epilogue && !ep) cuvil_gemm_epilogue_tile(j, m0, n0, rows, (int64_t)nrr);
                }
                /* the other activations once the rows' block of columns is done */
                if (last && act_after)
                    cuvil_f32_act_rows(&j->act, j->C + m0 * j->ldc + jc, (size_t)j->ldc, (size_t)rows,
                                       (size_t)(jend - jc));
                m0 += rows;
            }
        }
    }
}
#endif

/* Rows [m_lo, m_hi) x columns [n_lo, n_hi) of the product (n_lo a multiple of NR and, where A
 * is packed ahead, m_lo of MR, so that prepacked panels are read in place), on the calling
 * thread. */
static void gemm_range(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch, int64_t m_lo,
                       int64_t m_hi, int64_t n_lo, int64_t n_hi) {
    const int64_t M = j->M, N = j->N, K = j->K;
    if (K <= 0) {
        /* Empty sum: C = c_init + epilogue. */
        for (int64_t m = 0; m < M; m++) {
            float *c = j->C + m * j->ldc;
            if (j->c_init) {
                const float *ci = j->c_init + m * j->ld_init;
                if (ci != c) memmove(c, ci, (size_t)N * sizeof(float));
            } else {
                memset(c, 0, (size_t)N * sizeof(float));
            }
            cuvil_gemm_epilogue_tile(j, m, 0, 1, N);
        }
        return;
    }
    const cuvil_gemm_ukernel_desc *uk = b->uk;
    const int mr = uk->mr, nr = uk->nr;
    const int64_t kc_max = pick_kc(K, b->kc);
    const int64_t mc_max = CUVIL_ALIGN_UP(cuvil_min_i64(b->mc, M), mr);
    const int64_t nc_max = CUVIL_ALIGN_UP(cuvil_min_i64(b->nc, N), nr);
    const int has_epilogue = j->bias != NULL || j->act.act != CUVIL_ACT_NONE;
    /* the microkernel applies a per-row or per-column bias and Relu/Clip as it stores */
    const cuvil_act act = j->act.act;
    const int bias_fusable = !j->bias || (j->beta == 1.0f && ((j->bias_cs == 0 && j->bias_rs == 1) ||
                                                              (j->bias_rs == 0 && j->bias_cs == 1)));
    const int fuse = has_epilogue && bias_fusable;
    /* any other activation (SiLU, HardSwish, ...) after the microkernel has added the bias, once
     * a strip (the block's rows of NR columns) is done: one call a strip, not a tile (per tile,
     * EfficientNet-B0's 16 -> 96 1x1 at 112x112 with SiLU, AVX2, one thread, took 1.23 ms, a
     * call per MR rows of nc columns 0.90) */
    /* CUVIL_W16_BF16_DOT: each packed block of A rounded to bfloat16 (on AVX-512 BF16 converted
     * into pairs, B's too, for vdpbf16ps), so never A read in place */
    const int dot = j->b16 == CUVIL_W16_BF16_DOT;
    /* HardSwish goes into the microkernel's store (but the bfloat16 kernel's), not a second
     * pass over each strip: PP-LCNet one thread / two, alternating cuvil-run turns, AVX-512
     * 3.48 -> 3.35 / 2.06 -> 2.00 ms, AVX2 4.66 -> 4.58 / 2.69 -> 2.62; MobileNetV3 -1 to -3% */
    const int hswish = fuse && act == CUVIL_ACT_HARD_SWISH && !dot;
    const int act_after = fuse && act != CUVIL_ACT_NONE && act != CUVIL_ACT_RELU && act != CUVIL_ACT_CLIP && !hswish;
    cuvil_ukernel_epi epi = {NULL, NULL, act == CUVIL_ACT_RELU ? 0.0f : act == CUVIL_ACT_CLIP ? j->act.alpha : -INFINITY,
                             act == CUVIL_ACT_CLIP ? j->act.beta : INFINITY, hswish};
    if (act_after || hswish) epi.lo = -INFINITY, epi.hi = INFINITY;
    /* prepacked A in this run's layout: read in place */
    const int dot_hw = dot && nr == 32 && (mr == 8 || mr == 7) && bf16_dot_hw();
    const int a_direct = !dot && j->a_packed && j->a_packed_mr == mr && pick_kc(K, j->a_packed_kc) == kc_max;
    const int b_prepacked = j->b_packed || j->b_packed16;
    const int b_direct = b_prepacked && j->b_packed_nr == nr && pick_kc(K, j->b_packed_kc) == kc_max;
#if CUVIL_HAVE_AVX512
    /* A row-major and B packed ahead (a MatMul's or Gemm's activations times its weights, a
     * channels-last 1x1 conv's pixels): A's rows read in place, 12 at a time, against each
     * panel of a block of B that stays in L2, as MLAS's kernels read it: no packing of A, and
     * 12 rows a B row. AVX-512, one thread, against ONNX Runtime's MatMul in alternating turns
     * (Xeon VM): 197 x 1536 x 384 1.10 -> 1.02 x its time, 512^3 1.11 -> 1.05, 49 x 512 x 4608
     * 1.13 -> 1.08; ViT-S/16 77.4 -> 70.8 ms (two threads 43.3 -> 40.5). On AVX2 the same order
     * with 6 rows (its 16 registers hold no more) measured within 2% of the packed path: not
     * taken. (alpha 1 only: the packed path folds alpha into A, which would change the bits.) */
    if (lda_applies(j, b) && (m_hi - m_lo >= CUVIL_GEMM_LDA_ROWS || j->a_in_place)) {
        gemm_range_lda(j, uk, m_lo, m_hi, n_lo, n_hi, &epi, fuse, has_epilogue, act_after);
        return;
    }
#endif
    /* (the scratch, which the path above does not use: a_in_place jobs may have none) */
    float *ap = (float *)scratch;
    float *bp = ap + CUVIL_ALIGN_UP((size_t)(mc_max * kc_max), 16);

    for (int64_t jc = n_lo; jc < n_hi; jc += nc_max) {
        const int64_t nc = cuvil_min_i64(nc_max, n_hi - jc);
        for (int64_t pc = 0; pc < K; pc += kc_max) {
            const int64_t kc = cuvil_min_i64(kc_max, K - pc);
            const int first = pc == 0, last = pc + kc == K;
            const float *bpk = bp;
            if (b_direct && j->b_packed)
                bpk = j->b_packed + pc * CUVIL_ALIGN_UP(N, nr) + jc * kc;
            else if (b_direct)   /* the block's panels, contiguous: widened in one pass */
                cuvil_widen16(j->b16, j->b_packed16 + pc * CUVIL_ALIGN_UP(N, nr) + jc * kc, bp,
                              (size_t)(CUVIL_ALIGN_UP(nc, nr) * kc));
            else if (b_prepacked)
                repack_b(j, pc, kc, jc, nc, nr, bp);
            else if (j->pack_b)
                j->pack_b(j->pack_b_ctx, pc, kc, jc, nc, nr, bp);
            else
                pack_b_dense(j, pc, kc, jc, nc, nr, bp);
#if CUVIL_HAVE_AVX512
            if (dot_hw) cuvil_bf16_pairs_b32__avx512bf16(bp, (size_t)kc, (size_t)((nc + nr - 1) / nr));
#endif
            for (int64_t ic = m_lo; ic < m_hi; ic += mc_max) {
                const int64_t mc = cuvil_min_i64(mc_max, m_hi - ic);
                const float *apk = ap;
                if (a_direct) apk = j->a_packed + pc * CUVIL_ALIGN_UP(M, mr) + ic * kc;
                else if (j->a_packed) repack_a(j, ic, mc, pc, kc, mr, ap);
                else if (j->pack_a) j->pack_a(j->pack_a_ctx, pc, kc, ic, mc, mr, ap);
                else pack_a(j, ic, mc, pc, kc, mr, ap);
#if CUVIL_HAVE_AVX512
                if (dot_hw) cuvil_bf16_pairs_a__avx512bf16(ap, (size_t)kc, mr, (size_t)((mc + mr - 1) / mr));
#endif
                if (dot && !dot_hw) round_bf16(ap, (size_t)(CUVIL_ALIGN_UP(mc, mr) * kc));
                /* BLIS's order: each B micro-panel (kc x NR, 16-24 KiB) stays in L1 while every
                 * A micro-panel of the block (mc x kc in L2) passes it; the other order streamed
                 * the whole B block (kc x nc, 1 MiB: larger than a 512 KiB L2) from L2 or L3
                 * once per MR rows. AVX2 6x16, B packed ahead, one thread / two: 128 x 768 x
                 * 3072 79-82% -> 85-87% / 73-75% -> 79-82% of the FMA peak, 512^3 82-85% ->
                 * 88-93% / 85-88% -> 91-92%, 256^3 87-89% -> 91-92% (cuvil-bench-gemm-avx2
                 * --shape, this session's Xeon) */
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    const int64_t n0 = jc + jr;
                    const size_t nrr = (size_t)cuvil_min_i64(nr, nc - jr);
                    const float *bpanel = bpk + jr * kc;
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        const int64_t m0 = ic + ir;
                        const size_t mrr = (size_t)cuvil_min_i64(mr, mc - ir);
                        float *c = j->C + m0 * j->ldc + n0;
                        const float *cin;
                        size_t ld_in;
                        const cuvil_ukernel_epi *ep = tile_inputs(j, first, last, fuse, &epi, m0, n0, c, &cin, &ld_in);
#if CUVIL_HAVE_AVX512
                        if (dot_hw) {   /* the panels as bfloat16 pairs: kc2 of them */
                            const int64_t kc2 = (kc + 1) / 2;
                            const uint16_t *a2 = (const uint16_t *)(const void *)apk + ir * kc2 * 2;
                            const uint16_t *b2 = (const uint16_t *)(const void *)bpk + jr * kc2 * 2;
                            cuvil_bf16_gemm_ukernel_x32__avx512bf16(mr, (size_t)kc2, a2, b2, c, (size_t)j->ldc, mrr, nrr,
                                                                    cin, ld_in, ep);
                        } else
#endif
                        uk->fn((size_t)kc, apk + ir * kc, bpanel, c, (size_t)j->ldc, mrr, nrr, cin, ld_in, ep);
                        if (last && has_epilogue && !ep) cuvil_gemm_epilogue_tile(j, m0, n0, (int64_t)mrr, (int64_t)nrr);
                    }
                    /* the other activations once a strip of the block's rows is done (mc x NR,
                     * just written: in L1 or L2) */
                    if (last && act_after)
                        cuvil_f32_act_rows(&j->act, j->C + ic * j->ldc + n0, (size_t)j->ldc, (size_t)mc, nrr);
                }
            }
        }
    }
}

typedef struct gemm_split {
    const cuvil_gemm_job *j;
    const cuvil_gemm_blocking *b;
    void *scratch;
    int by_m;                              /* parts of rows, else of columns */
    int64_t bound[CUVIL_MAX_THREADS + 1]; /* part t: rows or columns [bound[t], bound[t+1]) */
} gemm_split;

static void gemm_task(void *vctx, int64_t t, int tid) {
    const gemm_split *s = (const gemm_split *)vctx;
    void *scr = cuvil_thread_scratch(s->scratch, tid);
    const int64_t lo = s->bound[t], hi = s->bound[t + 1];
    if (s->by_m)
        gemm_range(s->j, s->b, scr, lo, hi, 0, s->j->N);
    else
        gemm_range(s->j, s->b, scr, 0, s->j->M, lo, hi);
}

/* Cuts `n` rows (or columns) in tiles of `r` into `parts` runs of whole tiles of nearly equal
 * cost, a tile costing its rows plus `r / 4` (the fixed cost of a microkernel call: a partial last
 * tile costs nearly a full one). Equal runs of ceil(tiles / parts) tiles left 49 rows in 8-row
 * tiles as 32 + 17, one thread doing twice the other's work. Returns the number of runs. */
int64_t cuvil_gemm_split_tiles(int64_t n, int64_t r, int64_t parts, int64_t *bound) {
    const int64_t tiles = (n + r - 1) / r, over = r / 4 > 0 ? r / 4 : 1;
    if (parts > tiles) parts = tiles;
    const int64_t total = n + tiles * over;
    int64_t t = 0, cost = 0, k = 1;
    bound[0] = 0;
    for (int64_t i = 0; i < tiles && k < parts; i++) {
        const int64_t rows = cuvil_min_i64(r, n - i * r);
        /* end run k after this tile when that comes closer to its share than one tile more */
        cost += rows + over;
        t = (i + 1) * r;
        const int64_t target = total * k / parts;
        const int64_t next = cost + cuvil_min_i64(r, n - t) + over;
        if (t < n && (cost >= target || next - target > target - cost)) bound[k++] = t;
    }
    bound[k] = n;
    return k;
}

/* The one-row products, when they apply: 1 if done. */
static int gemv_run(const cuvil_gemm_job *j) {
    const int64_t M = j->M, K = j->K;
    if (K > 0 && (j->b_packed || j->b_packed16) && M == 1 && j->a_packed == NULL && j->pack_a == NULL &&
        (!j->trans_a || j->lda == 1 || K == 1) &&
        j->b_packed_nr <= CUVIL_GEMM_MAX_NR) {
        gemv_packed(j);
        return 1;
    }
    if (K > 0 && gemv_applies(j)) {
        gemv(j);
        return 1;
    }
    return 0;
}

void cuvil_f32_gemm_run_serial(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch) {
    if (j->M <= 0 || j->N <= 0 || gemv_run(j)) return;
    gemm_range(j, b, scratch, 0, j->M, 0, j->N);
}

void cuvil_f32_gemm_run_range(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch, int64_t m_lo,
                              int64_t m_hi, int64_t n_lo, int64_t n_hi) {
    if (j->K <= 0 || m_lo >= m_hi || n_lo >= n_hi) return;
    gemm_range(j, b, scratch, m_lo, m_hi, n_lo, n_hi);
}

void cuvil_f32_gemm_run(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch) {
    const int64_t M = j->M, N = j->N, K = j->K;
    if (M <= 0 || N <= 0 || gemv_run(j)) return;
    const int threads = cuvil_threads();
    const int64_t mr = b->uk->mr, nr = b->uk->nr;
    const int64_t tiles_m = (M + mr - 1) / mr, tiles_n = (N + nr - 1) / nr;
    /* below ~1 MFLOP per thread the split costs more than it saves, unless B is large enough
     * that reading it is the cost (a few rows: a 1x1 conv on a 1x1 map, 512 -> 1280, AVX-512, two
     * threads, 0.084 -> 0.047 ms; as gemv_packed splits from 2.5e5 weights) */
    if (threads <= 1 || K <= 0 || (tiles_m < 2 && tiles_n < 2) ||
        ((double)M * (double)N * (double)K < 5e5 * threads && (double)N * (double)K < 2.5e5)) {
        gemm_range(j, b, scratch, 0, M, 0, N);
        return;
    }
    /* Split the columns (each thread packs its own B panels and reads all of A) unless there
     * are too few of them to go round; then the rows (each thread packs all of B). B packed
     * ahead of time and A not (a MatMul's or Gemm's weights): the rows where there are more of
     * them than columns, whose split packs each row of A once where the columns' packs all of A
     * in every task (AVX2, two threads, the whole model, with the macro-kernel's earlier loop
     * order: ConvNeXt-Tiny 57-59 -> 53-54 ms, ViT-S/16 53-61 -> 51-53, BERT-base at 128 tokens
     * 131-133 -> 122); the columns where there are at least as many columns as rows (and 4
     * tiles of them a thread), since
     * every task of the rows' split then streams all of B, the larger operand, from memory
     * where each of the columns' streams its share (two threads, cuvil-run --bench medians:
     * BERT-base at 128 tokens AVX2 137.0 -> 123.5 ms; ConvNeXt-Tiny, whose last stages have 49
     * and 196 rows, AVX2 57.4 -> 53.9, AVX-512 45.6 -> 40.3; ViT-S/16 AVX2 50.8 -> 49.3, AVX-512
     * 38.0 -> 37.0; Whisper-tiny's encoder, 1500 rows, and the CRNN even). */
    gemm_split s;
    s.j = j;
    s.b = b;
    s.scratch = scratch;
    /* (16-bit B is widened block by block in every task that reads it: a row split would widen
     * all of it in each, so those keep the columns) */
    const int b_rows = j->b_packed && !j->a_packed && tiles_m >= 2 * (int64_t)threads &&
                                 !(N >= M && tiles_n >= 4 * (int64_t)threads);
    s.by_m = b_rows || (tiles_n < 4 * threads && tiles_m > tiles_n) ||
             /* a conv's pixels read in place: by rows, as its lowering's bands, so that each
              * thread reads the pixels it wrote in the layer before (pool.c) */
             (j->a_in_place && (M + CUVIL_GEMM_LDA_ROWS - 1) / CUVIL_GEMM_LDA_ROWS >= 2 * (int64_t)threads);
    /* two tasks per thread, so that a thread slowed down (a busy core, a noisy neighbour on a
     * VM) leaves the other the rest; one each where every task packs all of the operand it
     * shares (B for rows, A for columns), which a second task would pack again (squares of
     * 256-512, AVX2, two threads: 66% -> 73-78% of twice the one-core peak) */
    const int redundant = s.by_m ? !j->b_packed : !j->a_packed;
    const int64_t want = redundant ? threads : cuvil_min_i64(2 * (int64_t)threads, CUVIL_MAX_THREADS);
    /* (rows in whole 12-row tiles where A is read in place: each part's last tile otherwise goes
     * to the 8-row kernel for a few rows) */
    int64_t mt = mr;
#if CUVIL_HAVE_AVX512
    if (lda_applies(j, b)) mt = CUVIL_GEMM_LDA_ROWS;
#endif
    const int64_t parts = s.by_m ? cuvil_gemm_split_tiles(M, mt, want, s.bound) : cuvil_gemm_split_tiles(N, nr, want, s.bound);
    cuvil_parallel_for(parts, gemm_task, &s);
}

/* ===== Public GEMM =================================================================== */
size_t cuvil_f32_gemm_scratch_size_ex(const cuvil_gemm_params *p, const cuvil_gemm_blocking *b) {
    return cuvil_gemm_job_scratch_size(p->M, p->N, p->K, b);
}

size_t cuvil_f32_gemm_scratch_size(const cuvil_gemm_params *p) {
    return cuvil_f32_gemm_scratch_size_ex(p, &default_blocking);
}

static void gemm_ex(const cuvil_gemm_params *p, const float *A, const float *B, int kind, const uint16_t *B16,
                    const float *bias, float *C, void *scratch, const cuvil_gemm_blocking *b) {
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = p->M;
    j.N = p->N;
    j.K = p->K;
    j.lda = p->lda;
    j.trans_a = p->trans_a;
    j.alpha = p->alpha;
    j.ldb = p->ldb;
    j.trans_b = p->trans_b;
    j.ldc = p->ldc;
    j.bias_rs = p->bias_rs;
    j.bias_cs = p->bias_cs;
    j.beta = p->beta;
    j.act = p->act;
    if (p->packed_nr) {
        j.b_packed_nr = (int)p->packed_nr;
        j.b_packed_kc = p->packed_kc;
    }
    j.b16 = kind;
    const int64_t batch = p->batch; /* 0: an empty batch, nothing to do */
    for (int64_t i = 0; i < batch; i++) {
        j.A = A + i * p->a_bstride;
        if (B16) j.b_packed16 = B16 + i * p->b_bstride;
        else if (p->packed_nr) j.b_packed = B + i * p->b_bstride;
        else j.B = B + i * p->b_bstride;
        j.C = C + i * p->c_bstride;
        j.bias = bias ? bias + i * p->bias_bstride : NULL;
        cuvil_f32_gemm_run(&j, b, scratch);
    }
}

void cuvil_f32_gemm_ex(const cuvil_gemm_params *p, const float *A, const float *B, const float *bias, float *C,
                       void *scratch, const cuvil_gemm_blocking *b) {
    gemm_ex(p, A, B, 0, NULL, bias, C, scratch, b);
}

void cuvil_f32_gemm_w16_ex(const cuvil_gemm_params *p, int kind, const float *A, const uint16_t *B16, const float *bias,
                           float *C, void *scratch, const cuvil_gemm_blocking *b) {
    if (!p->packed_nr || kind < CUVIL_W16_F16 || kind > CUVIL_W16_BF16_DOT) __builtin_trap();   /* (a caller's bug) */
    gemm_ex(p, A, NULL, kind, B16, bias, C, scratch, b);
}

void cuvil_f32_gemm_w16(const cuvil_gemm_params *p, int kind, const float *A, const uint16_t *B16, const float *bias,
                        float *C, void *scratch) {
    cuvil_f32_gemm_w16_ex(p, kind, A, B16, bias, C, scratch, &default_blocking);
}

size_t cuvil_f32_gemm_packed_b_floats(const cuvil_gemm_params *p) {
    return cuvil_gemm_packed_b_floats(p->N, p->K, (int)p->packed_nr);
}

void cuvil_f32_gemm_pack_b(const cuvil_gemm_params *p, const float *B, float *B_packed) {
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.N = p->N;
    j.K = p->K;
    j.B = B;
    j.ldb = p->ldb;
    j.trans_b = p->trans_b;
    cuvil_gemm_pack_b_all(&j, (int)p->packed_nr, p->packed_kc, B_packed);
}

void cuvil_f32_gemm(const cuvil_gemm_params *p, const float *A, const float *B,
                    const float *bias, float *C, void *scratch) {
    cuvil_f32_gemm_ex(p, A, B, bias, C, scratch, &default_blocking);
}

void cuvil_f32_gemm__scalar(const cuvil_gemm_params *p, const float *A, const float *B,
                            const float *bias, float *C) {
    const int64_t batch = p->batch; /* 0: an empty batch, nothing to do */
    for (int64_t bi = 0; bi < batch; bi++) {
        const float *a = A + bi * p->a_bstride, *b = B + bi * p->b_bstride;
        const float *bb = bias ? bias + bi * p->bias_bstride : NULL;
        float *c = C + bi * p->c_bstride;
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t n = 0; n < p->N; n++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < p->K; k++) {
                    float av = p->trans_a ? a[k * p->lda + m] : a[m * p->lda + k];
                    float bv = p->trans_b ? b[n * p->ldb + k] : b[k * p->ldb + n];
                    acc += av * bv;
                }
                float v = p->alpha * acc;
                if (bb) v += p->beta * bb[m * p->bias_rs + n * p->bias_cs];
                c[m * p->ldc + n] = cuvil_f32_act1(&p->act, v);
            }
    }
}
