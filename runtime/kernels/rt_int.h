/*
 * rt_int.h -- private declarations shared by the kernel families in runtime/kernels/.
 *
 * Not part of the model ABI: generated code only sees cuvil_rt.h. What lives here:
 *  - the blocked GEMM driver (cuvil_f32_gemm_run) that GEMM, Conv and ConvTranspose share, with
 *    its pluggable B packer (Conv packs im2col columns straight from the image) and its fused
 *    epilogue (initial C such as a residual, bias, activation);
 *  - the GEMM microkernel table (one list, expanded by dispatch and by the unit tests);
 *  - vectorised helpers (exp, activation on a buffer) that several families use;
 *  - `__scalar` references for the families whose public header declares none, so tests can
 *    check optimised and reference paths alike.
 * Unit tests include this file by relative path to reach the internal entry points.
 */
#ifndef CUVIL_RT_INT_H
#define CUVIL_RT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cuvil_rt.h"

#ifndef CUVIL_HAVE_AVX2
#define CUVIL_HAVE_AVX2 0
#endif
#ifndef CUVIL_HAVE_AVX512
#define CUVIL_HAVE_AVX512 0
#endif

#define CUVIL_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

/* Pooling: taps k in [0, K) with lo_lim <= start + k*d < hi_lim. */
static inline int64_t cuvil_count_taps(int64_t start, int64_t K, int64_t d, int64_t lo_lim, int64_t hi_lim) {
    int64_t n = 0;
    for (int64_t k = 0; k < K; k++) {
        const int64_t i = start + k * d;
        n += i >= lo_lim && i < hi_lim;
    }
    return n;
}

/* a * b + c as one fused instruction where the target has one (the runtime is compiled as
 * ISO C, which does not contract a * b + c by itself); a multiply and an add elsewhere, since
 * a software fmaf would be far slower */
#ifdef __FMA__
#define CUVIL_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define CUVIL_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline int64_t cuvil_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cuvil_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
/* Element i of an index array of type t (CUVIL_T_I32, else int64), as int64. */
static inline int64_t cuvil_ld_index(int t, const void *v, int64_t i) {
    return t == CUVIL_T_I32 ? (int64_t)((const int32_t *)v)[i] : ((const int64_t *)v)[i];
}

/* dst[k*dld + c] = src[k*sld + c] for k < rows, c < n: a panel's rows, with a constant-size
 * copy for the microkernels' widths (a libc memcpy call per 32-byte row costs more than it). */
static inline void cuvil_copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t n) {
    switch (n) {
#define CUVIL_COPY_ROWS_CASE(w)                                                                     \
    case w:                                                                                         \
        for (int64_t k = 0; k < rows; k++) __builtin_memcpy(dst + k * dld, src + k * sld, w * sizeof(float)); \
        return;
        /* 4, 5, 6, 7: the pixels-as-rows A panels of the 4x8, 5x16, 6x16 and 7x32 tiles (7 rows
         * through libc's memcpy, one call per k step, made packing a 49 x 960 A 2.3x slower) */
        CUVIL_COPY_ROWS_CASE(4)
        CUVIL_COPY_ROWS_CASE(5)
        CUVIL_COPY_ROWS_CASE(6)
        CUVIL_COPY_ROWS_CASE(7)
        CUVIL_COPY_ROWS_CASE(8)
        CUVIL_COPY_ROWS_CASE(16)
        CUVIL_COPY_ROWS_CASE(32)
#undef CUVIL_COPY_ROWS_CASE
    default:
        for (int64_t k = 0; k < rows; k++) __builtin_memcpy(dst + k * dld, src + k * sld, (size_t)n * sizeof(float));
        return;
    }
}

/* ===== Elementwise helpers ========================================================== */
/* keep in ORDER with enum cuvil_act */
extern const char *const cuvil_act_names[CUVIL_ACT__COUNT];

/* y[i] = exp(x[i]); y may equal x. Vectorised where the target allows. */
void cuvil_f32_vexp(const float *x, float *y, size_t n);
/* Activation a in place over rows rows of n values, row r at c + r ld, on the calling thread
 * (an epilogue's tile): the kernel is picked once for all the rows. */
void cuvil_f32_act_rows(const cuvil_act_params *a, float *c, size_t ld, size_t rows, size_t n);
/* The sum of exp(x[i] - m) for i < n, each also stored in y[i] where y is not NULL (y may
 * equal x): softmax's exponentials and their sum in one pass. Vectorised where the target
 * allows (unary.c). */
float cuvil_f32_sum_exp_shifted(const float *x, float *y, int64_t n, float m);
#if CUVIL_HAVE_AVX2
/* Vector versions of the transcendental activations (elementwise/unary_avx2.c). Each handles
 * any n (a scalar tail included); y may equal x. Return 0 when `act` has no AVX2 version. */
int cuvil_f32_unary__avx2(const cuvil_act_params *a, const float *x, float *y, size_t n);
/* The same over rows rows of n values, row r at x + r ld and y + r ld. */
int cuvil_f32_unary_rows__avx2(const cuvil_act_params *a, const float *x, float *y, size_t ld, size_t rows,
                               size_t n);
/* exp, sigmoid, SiLU and Gelu's tanh form in 16 lanes, the AVX2 kernel's bits, over rows as
 * above; 0: not one of those */
int cuvil_f32_unary_rows__avx512(const cuvil_act_params *a, const float *x, float *y, size_t ld, size_t rows,
                                 size_t n);
void cuvil_f32_vexp__avx2(const float *x, float *y, size_t n);
float cuvil_f32_sum_exp_shifted__avx2(const float *x, float *y, size_t n, float m);
/* y[c ys + r] = x[r xs + c] for r < rows, c < cols (strides in floats); data/transpose_avx2.c */
void cuvil_transpose_f32__avx2(const float *x, int64_t xs, float *y, int64_t ys, int64_t rows, int64_t cols);
#endif
#if CUVIL_HAVE_AVX512
float cuvil_f32_sum_exp_shifted__avx512(const float *x, float *y, size_t n, float m);
#endif

/* ===== GEMM driver ================================================================== */
/* A microkernel computes one MR x NR tile: acc = sum_k a[k*MR + i] * b[k*NR + j] over kc packed
 * steps, then c[i*ldc + j] = acc + (c_in ? c_in[i*ld_in + j] : 0) for i < mr, j < nr (the
 * packed operands are zero padded to MR/NR, so only the stores are partial). c_in may equal c
 * (accumulating over K blocks). kc may be 0. */
/* What a microkernel fuses into its store (the GEMM's epilogue on the last K block):
 * c = min(max(acc + c_in + row_bias[i] + col_bias[j], lo), hi), NaN passing through; either
 * bias may be NULL, lo/hi +-inf for no clamp (Relu: 0/+inf, Clip: its bounds). hswish:
 * HardSwish instead of the clamp (lo/hi must then be -inf/+inf: the AVX2 kernels skip it),
 * v * max(min(v * (1/6) + 0.5, 1), 0), in the vector kernels the operations of unary_avx2.c's
 * hard_swish256 in that order (so the same bits as applying it after). */
typedef struct cuvil_ukernel_epi {
    const float *row_bias;
    const float *col_bias;
    float lo, hi;
    int hswish;
} cuvil_ukernel_epi;

/* cond ? a : b as a blend of the bits under cond's mask: no branch, so the loops over it
 * vectorise. (`x >= 0 ? x : a * x` became a branch with the product inside, mispredicted on
 * random signs: PRelu and LeakyRelu on 16 x 28 x 22 x 22 took 0.84 and 0.96 ms, a Mul of that
 * size 0.024; now 0.025.) */
static inline float cuvil_pick(int cond, float a, float b) {
    uint32_t ab, bb;
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    const uint32_t m = 0u - (uint32_t)(cond != 0), r = (ab & m) | (bb & ~m);
    float y;
    memcpy(&y, &r, sizeof y);
    return y;
}

/* x where x >= 0 (-0 included), else alt (NaN: alt) */
static inline float cuvil_select_ge0(float x, float alt) { return cuvil_pick(x >= 0.0f, x, alt); }

/* The bits of a float as an unsigned key in the float's order (-0 taken as +0, so the two are
 * equal; NaN lands above +inf or below -inf by its sign: callers place it themselves). */
static inline uint32_t cuvil_f32_order_bits(float v) {
    uint32_t u;
    v = v == 0.0f ? 0.0f : v;
    memcpy(&u, &v, sizeof u);
    return u ^ ((uint32_t)((int32_t)u >> 31) | 0x80000000u);
}

/* Sifts h[i] down a binary heap of n 64-bit keys: the largest at the root (max 1) or the
 * smallest (max 0). */
static inline void cuvil_u64_heap_down(uint64_t *h, int64_t n, int64_t i, int max) {
    for (;;) {
        int64_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && (max ? h[l] > h[w] : h[l] < h[w])) w = l;
        if (r < n && (max ? h[r] > h[w] : h[r] < h[w])) w = r;
        if (w == i) return;
        const uint64_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* HardSwish in scalar code (cuvil_f32_act1 and the portable microkernels' epilogues). */
static inline float cuvil_hswish1(float x) {
    float v = x * (1.0f / 6.0f) + 0.5f;
    v = v < 1.0f ? v : 1.0f;
    return x * (v > 0.0f ? v : 0.0f);
}

/* The valid part (mr x nr) of a tile spilled to t (row stride ldt) into c: + c_in, then epi. */
static inline void cuvil_ukernel_store_rows(const float *t, size_t ldt, float *c, size_t ldc, size_t mr, size_t nr,
                                            const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi) {
    for (size_t i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        const float *ti = t + i * ldt;
        if (c_in)
            for (size_t j = 0; j < nr; j++) ci[j] = ti[j] + c_in[i * ld_in + j];
        else
            for (size_t j = 0; j < nr; j++) ci[j] = ti[j];
        if (!epi) continue;
        const float rb = epi->row_bias ? epi->row_bias[i] : 0.0f, lo = epi->lo, hi = epi->hi;
        for (size_t j = 0; j < nr; j++) {
            float v = ci[j] + rb + (epi->col_bias ? epi->col_bias[j] : 0.0f);
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
            ci[j] = epi->hswish ? cuvil_hswish1(v) : v;
        }
    }
}

typedef void (*cuvil_f32_gemm_ukernel_fn)(size_t kc, const float *a, const float *b, float *c,
                                          size_t ldc, size_t mr, size_t nr, const float *c_in,
                                          size_t ld_in, const cuvil_ukernel_epi *epi);

/* The same product with B's rows read in place (direct convolution, conv2d.c): row k of the
 * kc x NR panel is the NR floats at b + boff[k]. c is a whole MR x NR tile of row stride NR,
 * overwritten (accumulate 0) or added to (1); no epilogue. */
typedef void (*cuvil_f32_conv_ukernel_fn)(size_t kc, const float *a, const float *b, const int64_t *boff, float *c,
                                          int accumulate);

/* The product with A's rows read in place (direct convolution on a channels-last image,
 * conv2d.c), in nseg segments: segment s is, for tile row i, the seglen[s] floats at
 * rows[s * MR + i] (rows past mr: any readable ones); B is a packed panel of (their sum) x NR.
 * Stored as cuvil_f32_gemm_ukernel_fn stores. */
typedef void (*cuvil_f32_rows_ukernel_fn)(size_t nseg, const size_t *seglen, const float *const *rows,
                                          const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                          const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi);

typedef struct cuvil_gemm_ukernel_desc {
    cuvil_f32_gemm_ukernel_fn fn;
    int mr, nr;
    const char *name;
    cuvil_f32_conv_ukernel_fn ind;  /* NULL: this tile has no direct-convolution variant */
    cuvil_f32_rows_ukernel_fn rows; /* NULL: nor one reading A's rows in place */
} cuvil_gemm_ukernel_desc;

void cuvil_f32_gemm_ukernel_4x8__scalar(size_t kc, const float *a, const float *b, float *c,
                                        size_t ldc, size_t mr, size_t nr, const float *c_in,
                                        size_t ld_in, const cuvil_ukernel_epi *epi);
void cuvil_f32_conv_ukernel_4x8__scalar(size_t kc, const float *a, const float *b, const int64_t *boff, float *c,
                                        int accumulate);
void cuvil_f32_rows_ukernel_4x8__scalar(size_t nseg, const size_t *seglen, const float *const *rows, const float *b,
                                        float *c, size_t ldc, size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                        const cuvil_ukernel_epi *epi);
#if CUVIL_HAVE_AVX2
void cuvil_f32_gemm_ukernel_6x16__avx2_fma(size_t kc, const float *a, const float *b, float *c,
                                           size_t ldc, size_t mr, size_t nr, const float *c_in,
                                           size_t ld_in, const cuvil_ukernel_epi *epi);
void cuvil_f32_gemm_ukernel_5x16__avx2_fma(size_t kc, const float *a, const float *b, float *c,
                                           size_t ldc, size_t mr, size_t nr, const float *c_in,
                                           size_t ld_in, const cuvil_ukernel_epi *epi);
void cuvil_f32_rows_ukernel_5x16__avx2_fma(size_t nseg, const size_t *seglen, const float *const *rows,
                                           const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                           const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi);
void cuvil_f32_conv_ukernel_6x16__avx2_fma(size_t kc, const float *a, const float *b, const int64_t *boff,
                                           float *c, int accumulate);
void cuvil_f32_rows_ukernel_6x16__avx2_fma(size_t nseg, const size_t *seglen, const float *const *rows,
                                           const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                           const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi);
/* c[n] = alpha * dot(a[0..K), B[n*ldb ..]) + (c_in ? c_in[n] : 0) for n < N (c_in may be c). */
void cuvil_f32_gemv_t__avx2_fma(size_t K, size_t N, const float *a, const float *B, size_t ldb,
                                float alpha, const float *c_in, float *c);
/* acc[t] += sum_k a[k] * panel[k*16 + t] for t < 16 (one row of A times a packed B panel). */
void cuvil_f32_gemv_panel16__avx2_fma(size_t kc, const float *a, const float *panel, float *acc);
/* The same on a panel of 16-bit values (kind CUVIL_W16_F16 or _BF16), widened as they load. */
void cuvil_f32_gemv_panel16_w16__avx2_fma(int kind, size_t kc, const float *a, const uint16_t *panel, float *acc);
/* dst[k*16 + c] = src[c*ld + k] for c < 16, k < kc (a 16-wide panel of a transposed B). */
void cuvil_f32_gemm_pack_b_t16__avx2(size_t kc, const float *src, size_t ld, float *dst);
#endif

#if CUVIL_HAVE_AVX512
void cuvil_f32_gemm_ukernel_8x32__avx512(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                         size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                         const cuvil_ukernel_epi *epi);
void cuvil_f32_gemm_ukernel_7x32__avx512(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                         size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                         const cuvil_ukernel_epi *epi);
void cuvil_f32_conv_ukernel_8x32__avx512(size_t kc, const float *a, const float *b, const int64_t *boff, float *c,
                                         int accumulate);
void cuvil_f32_rows_ukernel_7x32__avx512(size_t nseg, const size_t *seglen, const float *const *rows,
                                         const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                         const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi);
void cuvil_f32_rows_ukernel_8x32__avx512(size_t nseg, const size_t *seglen, const float *const *rows,
                                         const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                         const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi);
/* A 12 x 32 tile with A's 12 rows read in place (row i at a + i * lda, kc floats) against one
 * packed B panel (kc x 32): the tile of the driver's A-in-place order (gemm.c), stored like the
 * 8x32 microkernel's (c_in, then the epilogue; columns past nr not stored). */
void cuvil_f32_gemm_lda_ukernel_12x32__avx512(size_t kc, const float *a, size_t lda, const float *b, float *c,
                                              size_t ldc, size_t nr, const float *c_in, size_t ld_in,
                                              const cuvil_ukernel_epi *epi);
/* acc[t] += sum_k a[k] * panel[k*32 + t] for t < 32. */
void cuvil_f32_gemv_panel32__avx512(size_t kc, const float *a, const float *panel, float *acc);
void cuvil_f32_gemv_panel32_w16__avx512(int kind, size_t kc, const float *a, const uint16_t *panel, float *acc);
/* CUVIL_W16_BF16_DOT on AVX-512 BF16 (run only where the CPU has it): npanels packed panels of
 * kc steps (pack_a's mr rows; pack_b's 32 columns) converted in place into bfloat16 pairs,
 * [ceil(kc / 2)][mr or 32][2], the second of a last odd step 0; the microkernels take kc2 pairs of
 * such panels. */
void cuvil_bf16_pairs_a__avx512bf16(float *panels, size_t kc, int mr, size_t npanels);
void cuvil_bf16_pairs_b32__avx512bf16(float *panels, size_t kc, size_t npanels);
/* the rows x 32 tile (rows 8 or 7: the panels' mr), mr x nr of it stored as the float32 ones */
void cuvil_bf16_gemm_ukernel_x32__avx512bf16(int rows, size_t kc2, const uint16_t *a, const uint16_t *b, float *c,
                                             size_t ldc, size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                             const cuvil_ukernel_epi *epi);
#endif

/* Every microkernel this archive was built with, best last; the default is the last one. */
extern const cuvil_gemm_ukernel_desc cuvil_f32_gemm_ukernels[];
extern const int cuvil_f32_gemm_n_ukernels;

/* Cache blocking (BLIS names): kc rows of K per packed panel, mc rows of A per packed block,
 * nc columns of B per packed block. Tests shrink these to exercise every loop edge. */
typedef struct cuvil_gemm_blocking {
    const cuvil_gemm_ukernel_desc *uk;
    int64_t mc, kc, nc;
} cuvil_gemm_blocking;

const cuvil_gemm_blocking *cuvil_gemm_default_blocking(void);
/* b, or b with a microkernel of the same NR whose MR pads M to at least 5% fewer rows (49
 * rows: 7x32 computes 49 where 8x32 computes 56), for A operands packed at run time. */
cuvil_gemm_blocking cuvil_gemm_blocking_for_rows(const cuvil_gemm_blocking *b, int64_t M);

/* Packs rows [k0, k0+kc) x columns [n0, n0+nc) of the (virtual) B operand into `dst` as
 * ceil(nc/nr) panels, each kc x nr row-major, zero padded past nc. */
typedef void (*cuvil_gemm_pack_b_fn)(const void *ctx, int64_t k0, int64_t kc, int64_t n0,
                                     int64_t nc, int nr, float *dst);

/* One (unbatched) product:
 *   C[m,n] = act(alpha * sum_k A'[m,k] B'[k,n] + c_init[m,n] + beta * bias[m*rs + n*cs])
 * c_init (ld_init) may be NULL or equal C (in-place residual). B is read through pack_b when
 * it is non-NULL, else it is the dense B/ldb/trans_b. */
typedef struct cuvil_gemm_job {
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    int trans_a;
    float alpha;
    const float *B;
    int64_t ldb;
    int trans_b;
    cuvil_gemm_pack_b_fn pack_b;
    const void *pack_b_ctx;
    /* A read through a packer too (alpha 1), called as pack_a(ctx, k0, kc, m0, mc, mr, dst):
     * the same contract with rows for columns (a conv's im2col as the A operand). */
    cuvil_gemm_pack_b_fn pack_a;
    const void *pack_a_ctx;
    float *C;
    int64_t ldc;
    const float *c_init;
    int64_t ld_init;
    const float *bias;
    int64_t bias_rs, bias_cs;
    float beta;
    cuvil_act_params act;
    /* A packed ahead of time (cuvil_gemm_pack_a_all): used as is when the run's blocking has
     * the MR and KC it was packed with, else repacked from it; NULL: A is packed on the fly. */
    const float *a_packed;
    int a_packed_mr;
    int64_t a_packed_kc;
    /* B packed ahead of time (cuvil_gemm_pack_b_all), likewise; NULL: B is dense (or pack_b). */
    const float *b_packed;
    int b_packed_nr;
    int64_t b_packed_kc;
    /* B packed likewise but its values stored in 16 bits (cuvil_f32_gemm_w16), b_packed NULL:
     * b16 CUVIL_W16_F16, _BF16 or _BF16_DOT. Each K block of panels is widened to float32 before
     * the microkernels read it (the one-row product widens in registers), so the sums are those of
     * the float32 product on the widened weights; with _BF16_DOT on A rounded to bfloat16 too (on
     * AVX-512 BF16 both blocks converted into bfloat16 pairs instead, for vdpbf16ps). (Widening
     * each panel into L1 as first used, walking the tiles along columns, measured no better: a
     * 128 x 768 x 3072 product 5.93 ms against 5.77, 32 rows 1.53 against 1.55.) */
    const uint16_t *b_packed16;
    int b16;
    /* A's rows read in place for any number of rows (AVX-512): the driver then uses no scratch.
     * The caller checks what gemm.c's lda_applies needs (B packed ahead in 32 columns, the 8x32
     * or 7x32 microkernel, A row-major and not packed, alpha 1), as conv2d.c's
     * pointwise_nhwc_as_gemm does; otherwise the packed path runs, on the scratch. */
    int a_in_place;
} cuvil_gemm_job;

/* The rows of the A-in-place path's tile (AVX-512's 12x32: gemm.c's order and thread split,
 * conv2d.c's choice of the path). */
#define CUVIL_GEMM_LDA_ROWS 12

/* All of A ([M, K], or [K, M] with trans_a; times alpha) in the layout the driver reads with
 * a microkernel of MR rows and a KC blocking: for each K block [pc, pc + kc) of
 * cuvil_gemm_kc_split(K, kc_max), ALIGN_UP(M, mr) rows as mr-row panels of kc steps, at
 * offset pc * ALIGN_UP(M, mr). cuvil_gemm_packed_a_floats() floats. */
size_t cuvil_gemm_packed_a_floats(int64_t M, int64_t K, int mr);
void cuvil_gemm_pack_a_all(const cuvil_gemm_job *j, int mr, int64_t kc_max, float *dst);
/* All of B ([K, N], or [N, K] with trans_b) likewise, in NR-column panels: for each K block
 * [pc, pc + kc), ALIGN_UP(N, nr) columns as nr-wide panels of kc steps, at offset
 * pc * ALIGN_UP(N, nr). cuvil_gemm_packed_b_floats() floats. */
size_t cuvil_gemm_packed_b_floats(int64_t N, int64_t K, int nr);
#define CUVIL_GEMM_MAX_NR 64   /* the widest NR a packed B may have for the one-row product */
void cuvil_gemm_pack_b_all(const cuvil_gemm_job *j, int nr, int64_t kc_max, float *dst);
/* The K block size the driver uses for K and a KC blocking (equal blocks). */
int64_t cuvil_gemm_kc_split(int64_t K, int64_t kc_max);

size_t cuvil_gemm_job_scratch_size(int64_t M, int64_t N, int64_t K, const cuvil_gemm_blocking *b);
/* Splits the product among the bound pool's threads when it is large enough (each uses its
 * slice of scratch); _serial runs it on the calling thread (inside a task). */
void cuvil_f32_gemm_run(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch);
void cuvil_f32_gemm_run_serial(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch);
/* Rows [m_lo, m_hi) x columns [n_lo, n_hi) of the product (K > 0; n_lo a multiple of NR and,
 * where A is packed ahead, m_lo of MR), on the calling thread. */
void cuvil_f32_gemm_run_range(const cuvil_gemm_job *j, const cuvil_gemm_blocking *b, void *scratch, int64_t m_lo,
                              int64_t m_hi, int64_t n_lo, int64_t n_hi);
/* Cuts n rows (or columns) in tiles of r into at most `parts` runs of whole tiles (the last may
 * end in a partial one) of nearly equal cost: bound[t] .. bound[t + 1] is run t, bound[0] = 0,
 * bound[runs] = n. Returns the number of runs. */
int64_t cuvil_gemm_split_tiles(int64_t n, int64_t r, int64_t parts, int64_t *bound);

/* cuvil_f32_gemm with an explicit blocking (tests). */
size_t cuvil_f32_gemm_scratch_size_ex(const cuvil_gemm_params *p, const cuvil_gemm_blocking *b);
size_t cuvil_f32_conv_nd_scratch_size_ex(const cuvil_conv_nd_params *p, const cuvil_gemm_blocking *b);
void cuvil_f32_gemm_ex(const cuvil_gemm_params *p, const float *A, const float *B,
                       const float *bias, float *C, void *scratch, const cuvil_gemm_blocking *b);
void cuvil_f32_gemm_w16_ex(const cuvil_gemm_params *p, int kind, const float *A, const uint16_t *B16, const float *bias,
                           float *C, void *scratch, const cuvil_gemm_blocking *b);
/* CUVIL_W16_BF16_DOT's products on AVX-512 BF16: -1 where the CPU has it (asked once), 0 never
 * (the float32 FMAs on the rounded values: the tests compare the two). */
extern int cuvil_gemm_bf16_dot_hw;

/* Applies C = act(C + beta * bias) to an mr x nr tile at (m0, n0) of the product. */
void cuvil_gemm_epilogue_tile(const cuvil_gemm_job *j, int64_t m0, int64_t n0, int64_t mr,
                              int64_t nr);

/* ===== Convolution (internal variants) ============================================== */
size_t cuvil_f32_conv_transpose2d_scratch_size_ex(const cuvil_conv_transpose2d_params *p, const cuvil_gemm_blocking *b);
size_t cuvil_f32_conv2d_scratch_size_ex(const cuvil_conv2d_params *p,
                                        const cuvil_gemm_blocking *b);
void cuvil_f32_conv2d_ex(const cuvil_conv2d_params *p, const float *x, const float *w,
                         const float *bias, const float *residual, float *y, void *scratch,
                         const cuvil_gemm_blocking *b);
/* The depthwise direct loop, usable whenever C/group == 1; `row` is the scratch of
 * cuvil_f32_conv2d_scratch_size (a row of OW floats, then the zero-padded input plane for the
 * 3x3/5x5 kernels; each part 64-byte aligned). */
void cuvil_f32_dwconv2d(const cuvil_conv2d_params *p, const float *x, const float *w,
                        const float *bias, const float *residual, float *y, float *row);
/* cuvil_f32_attention's and cuvil_f32_mbblock's scratch for a blocking (the compiler sizes it
 * for the target's). */
size_t cuvil_f32_rnn_scratch_size_ex(const cuvil_rnn_params *p, const cuvil_gemm_blocking *b);
size_t cuvil_f32_rnn_packed_scratch_size_ex(const cuvil_rnn_params *p, const cuvil_gemm_blocking *b);
size_t cuvil_f32_attention_scratch_size_ex(const cuvil_attention_params *p, const cuvil_gemm_blocking *b);
size_t cuvil_f32_mbblock_scratch_size_ex(const cuvil_mbblock_params *p, const cuvil_gemm_blocking *b);
/* The same on the calling thread (inside a task), x's channels xcs floats apart (H * W for a
 * whole image; more for rows of a larger one). */
void cuvil_f32_dwconv2d_serial(const cuvil_conv2d_params *p, const float *x, int64_t xcs, const float *w,
                               const float *bias, const float *residual, float *y, float *row);
/* Depthwise on channels-last x, y and residual (dw_nhwc.c; cuvil_conv2d_layout_ok): the weight
 * of channel c, tap t is w[c * wcs + t * wts] (the model's layout: wcs KH*KW, wts 1; prepacked
 * tap-major: wcs 1, wts C, which the vector loop takes). No scratch. */
void cuvil_f32_dwconv2d_nhwc(const cuvil_conv2d_params *p, const float *x, const float *w, int64_t wcs, int64_t wts,
                             const float *bias, const float *residual, float *y);

/* The grouped direct convolution (gconv.c, CUVIL_CONV_GROUPED): scratch per thread (SIZE_MAX
 * where the tile's size overflows), packed weights, the packer, the kernel. */
size_t cuvil_f32_gconv2d_scratch_size(const cuvil_conv2d_params *p);
size_t cuvil_f32_gconv2d_packed_floats(const cuvil_conv2d_params *p);
void cuvil_f32_gconv2d_pack(const cuvil_conv2d_params *p, const float *w, float *w_packed);
void cuvil_f32_gconv2d(const cuvil_conv2d_params *p, const float *x, const float *w_packed, const float *bias,
                       const float *residual, float *y, void *scratch);

/* Winograd F(4x4, 3x3), or F(2x2, 3x3) for algo CUVIL_CONV_WINOGRAD2_T (winograd.c): 3x3,
 * stride 1, undilated, one group. The weights are transformed and packed for the GEMM's MR/KC
 * (packed_floats floats; tmp holds 36 x M x C floats); run with the packed_mr/packed_kc of p. */
size_t cuvil_f32_conv2d_winograd_scratch_size(const cuvil_conv2d_params *p, const cuvil_gemm_blocking *b);
size_t cuvil_f32_conv2d_winograd_packed_floats(const cuvil_conv2d_params *p, int mr);
void cuvil_f32_conv2d_winograd_pack(const cuvil_conv2d_params *p, const float *w, int mr, int64_t kc_max,
                                    float *dst, float *tmp);
void cuvil_f32_conv2d_winograd(const cuvil_conv2d_params *p, const float *x, const float *w_packed,
                               const float *bias, const float *residual, float *y, void *scratch,
                               const cuvil_gemm_blocking *b);

/* ===== Data movement ================================================================ */
/* dst (dense, dims[ndim]) = src viewed with the given byte strides (any sign). Simplifies the
 * dims (drops size 1, merges contiguous runs), then copies rows with memcpy, transposes in
 * tiles when the source's contiguous dim is not the destination's, or walks strides. */
void cuvil_strided_copy(int ndim, const int64_t *dims, const int64_t *src_strides,
                        int64_t elem_size, const void *src, void *dst);

/* ===== References for families whose public header declares none =================== */
void cuvil_f32_channel_affine__scalar(const cuvil_channel_affine_params *p, const float *x,
                                      const float *scale, const float *shift, float *y);
void cuvil_f32_reduce__scalar(const cuvil_reduce_params *p, const float *x, float *y);
void cuvil_transpose__scalar(const cuvil_transpose_params *p, const void *x, void *y);
void cuvil_slice__scalar(const cuvil_slice_params *p, const void *x, void *y);
void cuvil_f32_pad__scalar(const cuvil_pad_params *p, const float *x, float *y);
void cuvil_f32_resize__scalar(const cuvil_resize_params *p, const float *x, float *y);

/* ===== Integer GEMM microkernels (qgemm*.c) =====================================
 * c[r * ldc + j] (= or +=, accumulate) sum over k4 groups of 4 of A'[r][k] B'[k][j], for the
 * MR x 16 tile of MR rows inside a packed A panel (a: its first row's bytes of the first group;
 * the next group 48 bytes on) and a packed B micro-panel (cuvil_qgemm_pack_b's layout); wide:
 * it widens to 16 bits (vpmaddwd); features: the CPU features it needs beyond its target's,
 * asked when the model runs ("" none). The table lists them in order of preference. */
typedef void (*cuvil_qgemm_uk_fn)(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
/* Two 16-column panels at once: the second's B at b + bstride bytes, its tile at c + 16. */
typedef void (*cuvil_qgemm_uk2_fn)(int64_t k4, const void *a, const int8_t *b, int64_t bstride, int32_t *c, int64_t ldc,
                                   int accumulate);
typedef struct cuvil_qgemm_ukernel_desc {
    cuvil_qgemm_uk_fn fn;
    int mr;
    int wide;
    int bw;   /* B's bytes per value: 1 (cuvil_qgemm_pack_b's layout), 2 (the same order, int16) */
    int w16;  /* 1: takes A and B as the driver widens them each block (qgemm.c: "w16"), B packed
               * with bw 1 */
    const char *name;
    const char *features;
    cuvil_qgemm_uk2_fn fn2;   /* NULL, or 32 columns a call (fn then takes a lone last panel) */
    int split;  /* 1: exact only on a pair-split B (cuvil_qgemm_pack_b_split): the driver picks it
                 * for such a B in place of a w16 kernel, never otherwise */
} cuvil_qgemm_ukernel_desc;
#define CUVIL_QA_GROUP 48   /* bytes of a packed A panel per group of 4 k (12 rows x 4) */
#define CUVIL_QA16_GROUP 48 /* int16 values of a widened A panel per group of 4 k (the same, widened) */
extern const cuvil_qgemm_ukernel_desc cuvil_qgemm_ukernels[];
extern const int cuvil_qgemm_n_ukernels;
const cuvil_qgemm_ukernel_desc *cuvil_qgemm_best(int b16);
int cuvil_qgemm_ukernel_runs(const cuvil_qgemm_ukernel_desc *uk);
void cuvil_qgemm_uk_4x16__scalar(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_2x16__avx2(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_2x16__avx2_b16(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_6x16__avx2w(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_6x16__avx2ub(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_6x16__avxvnni(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_12x16__avx512bw(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_12x16__avx512vnni(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc,
                                      int accumulate);
void cuvil_qgemm_uk_12x32__avx512vnni(int64_t k4, const void *a, const int8_t *b, int64_t bstride, int32_t *c, int64_t ldc,
                                      int accumulate);
void cuvil_qgemm_uk_4x16__avx512vnni(int64_t k4, const void *a, const int8_t *b, int32_t *c, int64_t ldc, int accumulate);
void cuvil_qgemm_uk_4x32__avx512vnni(int64_t k4, const void *a, const int8_t *b, int64_t bstride, int32_t *c, int64_t ldc,
                                     int accumulate);
/* cuvil_qgemm and cuvil_qconv with a given microkernel (the tests run each). */
void cuvil_qgemm_with(const cuvil_qgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, int at, const void *A,
                      int64_t lda, const void *Ap, int bt, const void *B, int64_t ldb, const void *Bp, const void *azp,
                      int64_t az_n, const void *bzp, int64_t bz_n, const cuvil_qgemm_epi *e, void *scratch);
void cuvil_qconv_with(const cuvil_qgemm_ukernel_desc *uk, const cuvil_conv2d_params *p, int xt, const void *x,
                      const void *xzp, const void *wp, const void *wzp, int64_t wz_n, const cuvil_qgemm_epi *e,
                      void *scratch);

#endif /* CUVIL_RT_INT_H */
