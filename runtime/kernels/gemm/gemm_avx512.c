/*
 * gemm_avx512.c -- the 8x32 AVX-512 GEMM microkernel (x86_64-avx512 target only), its 7-row,
 * rows-in-place and direct-convolution variants, and the 12x32 tile that reads A's rows in place
 * (gemm.c's A-in-place order).
 *
 * 16 zmm accumulators (8 rows x 2 vectors of 16), 2 zmm for the B row; each A element is an
 * embedded broadcast operand of its two FMAs, so a k step is 2 vector loads and 16 FMAs with
 * 8 broadcast loads folded in. 8 rows divide the channel counts of common networks (64, 128,
 * ..., 96, 144, 960), 32 columns are two cache lines of the packed B panel. Partial tiles
 * store through masks.
 */
#include <immintrin.h>
#include <math.h>

#include "../rt_int.h"

#define MR 8
#define NR 32

/* Both lines of the packed B row 8 k steps ahead into L1 (past a panel's end: the next
 * panel's, or nothing; a prefetch never faults). B is a layer's weights, read from L3 or
 * memory once a run where the pixels are few: ResNet-50 one thread 58.1 -> 55.6 ms, ResNet-18
 * 23.1 -> 21.8, the YOLO-style detector 10.9 -> 10.5 (alternating cuvil-run turns, Xeon VM);
 * MobileNetV3 and ViT-S/16 within noise. */
#define B_PREFETCH(b)                                                  \
    do {                                                               \
        _mm_prefetch((const char *)((b) + 8 * NR), _MM_HINT_T0);       \
        _mm_prefetch((const char *)((b) + 8 * NR + 16), _MM_HINT_T0);  \
    } while (0)

/* HardSwish with the operations of unary_avx2.c's hard_swish256, in its order, on 16 lanes (the
 * bits of the activation applied after the tile, which that function does on this target). */
static inline __attribute__((always_inline)) __m512 hswish16(__m512 x) {
    const __m512 v = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.0f / 6.0f)), _mm512_set1_ps(0.5f));
    return _mm512_mul_ps(x, _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(1.0f)), _mm512_setzero_ps()));
}

/* Rows [0, mr) x columns [0, nr) of the accumulators into c: + c_in, then the fused epilogue
 * (bias, then the clamp: max(lo, v), min(hi, v) keep a NaN v). Partial columns: masked loads
 * and stores touch only the valid part. */
static inline __attribute__((always_inline)) void store_tile(__m512 (*acc)[2], float *c, size_t ldc, size_t mr,
                                                             size_t nr, const float *c_in, size_t ld_in,
                                                             const cuvil_ukernel_epi *epi) {
    const __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    const __mmask16 m1 = (__mmask16)(nr <= 16 ? 0u : nr >= 32 ? 0xFFFFu : (1u << (nr - 16)) - 1u);
    __m512 lo = _mm512_set1_ps(-INFINITY), hi = _mm512_set1_ps(INFINITY);
    __m512 cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();
    if (epi) {
        lo = _mm512_set1_ps(epi->lo);
        hi = _mm512_set1_ps(epi->hi);
        if (epi->col_bias) {
            cb0 = _mm512_maskz_loadu_ps(m0, epi->col_bias);
            cb1 = _mm512_maskz_loadu_ps(m1, epi->col_bias + 16);
        }
    }
    for (size_t i = 0; i < mr; i++) {
        __m512 v0 = acc[i][0], v1 = acc[i][1];
        if (c_in) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c_in + i * ld_in));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c_in + i * ld_in + 16));
        }
        if (epi) {
            const __m512 bi = epi->row_bias ? _mm512_set1_ps(epi->row_bias[i]) : _mm512_setzero_ps();
            v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(v0, _mm512_add_ps(bi, cb0))));
            v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(v1, _mm512_add_ps(bi, cb1))));
            if (epi->hswish) {
                v0 = hswish16(v0);
                v1 = hswish16(v1);
            }
        }
        _mm512_mask_storeu_ps(c + i * ldc, m0, v0);
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, v1);
    }
}

/* A tile of at most 16 columns (the last of a GEMM whose N is 16 past a multiple of 32: 112 =
 * 3 x 32 + 16, 80, 48, 24 + 8): its R rows over the first vector of each packed B row only,
 * half the FMAs of the whole tile, which the masked store would mostly drop. Each sum runs
 * over k in order, as the whole tile's first vector does: a column's value does not depend on
 * which tile it falls in (the threads' splits of N move the tiles' edges, and a model's
 * output is the same bit for bit on 1 thread and 3). R = 8 sums keep 8 FMAs in flight. */
static inline __attribute__((always_inline)) void half_tile(int R, size_t kc, const float *a, const float *b,
                                                           __m512 (*acc)[2]) {
    __m512 e[8];
    for (int i = 0; i < R; i++) e[i] = _mm512_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(b);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) e[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, e[i]);
        a += R;
        b += NR;
    }
    for (int i = 0; i < R; i++) {
        acc[i][0] = e[i];
        acc[i][1] = _mm512_setzero_ps();
    }
}

void cuvil_f32_gemm_ukernel_8x32__avx512(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                         size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                         const cuvil_ukernel_epi *epi) {
    if (nr <= 16) {
        __m512 acc[MR][2];
        half_tile(MR, kc, a, b, acc);
        store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
        return;
    }
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps();
    __m512 c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    __m512 c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps();
    __m512 c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps();
    __m512 c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps();
    __m512 c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    __m512 c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps();
    __m512 c70 = _mm512_setzero_ps(), c71 = _mm512_setzero_ps();

#define ROW(i, r0, r1)                                \
    do {                                              \
        const __m512 av = _mm512_set1_ps(a[i]);       \
        r0 = _mm512_fmadd_ps(av, b0, r0);             \
        r1 = _mm512_fmadd_ps(av, b1, r1);             \
    } while (0)
    for (size_t k = 0; k < kc; k++) {
        B_PREFETCH(b);
        const __m512 b0 = _mm512_loadu_ps(b);
        const __m512 b1 = _mm512_loadu_ps(b + 16);
        ROW(0, c00, c01);
        ROW(1, c10, c11);
        ROW(2, c20, c21);
        ROW(3, c30, c31);
        ROW(4, c40, c41);
        ROW(5, c50, c51);
        ROW(6, c60, c61);
        ROW(7, c70, c71);
        a += MR;
        b += NR;
    }
#undef ROW

    __m512 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                         {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
    store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* The same with 7 rows (14 accumulators): a 7x7 map's 49 output pixels as the rows of the
 * swapped conv GEMM fill 7 tiles of 7 exactly, where 8-row tiles compute 56. */
void cuvil_f32_gemm_ukernel_7x32__avx512(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                         size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                         const cuvil_ukernel_epi *epi) {
    enum { R = 7 };
    __m512 acc[R][2];
    if (nr <= 16) {
        half_tile(R, kc, a, b, acc);
        store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
        return;
    }
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 7
        for (int i = 0; i < R; i++) {
            const __m512 av = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
        }
        a += R;
        b += NR;
    }
    store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* The 12 rows' sums over W vectors of each B row (W = 1: a panel's first 16 columns only). */
static inline __attribute__((always_inline)) void lda_sums(const int W, size_t kc, const float *a, size_t lda,
                                                          const float *b, __m512 (*acc)[2]) {
    const float *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
    for (size_t k = 0; k < kc; k++) {
        B_PREFETCH(b);
        const __m512 b0 = _mm512_loadu_ps(b), b1 = W == 2 ? _mm512_loadu_ps(b + 16) : b0;
#define ROW(i, p, o)                                                        \
    do {                                                                    \
        const __m512 av = _mm512_set1_ps((p)[(o) + k]);                     \
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);                     \
        if (W == 2) acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);         \
    } while (0)
#define ROWS3(i, p) ROW(i, p, 0); ROW(i + 1, p, lda); ROW(i + 2, p, 2 * lda)
        ROWS3(0, a);
        ROWS3(3, a3);
        ROWS3(6, a6);
        ROWS3(9, a9);
#undef ROWS3
#undef ROW
        b += NR;
    }
}

/* 12 rows read in place, 24 accumulators: each B row's two vectors serve 12 broadcasts (8 in
 * the packed kernel), and the rows stay in L1 while the block's B panels pass (gemm.c's
 * A-in-place order), so nothing is packed. Each sum runs over k in order from zero, c_in added
 * at the store: the bits of the packed kernels' tiles. */
_Static_assert(CUVIL_GEMM_LDA_ROWS == 12, "lda_sums reads 4 x 3 rows");
void cuvil_f32_gemm_lda_ukernel_12x32__avx512(size_t kc, const float *a, size_t lda, const float *b, float *c,
                                              size_t ldc, size_t nr, const float *c_in, size_t ld_in,
                                              const cuvil_ukernel_epi *epi) {
    __m512 acc[12][2];
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    if (nr <= 16)   /* a last panel of at most 16 columns: its first vector only, as half_tile */
        lda_sums(1, kc, a, lda, b, acc);
    else
        lda_sums(2, kc, a, lda, b, acc);
    store_tile(acc, c, ldc, 12, nr, c_in, ld_in, epi);
}

/* The 8x32 tile with B's rows at b + boff[k] (direct convolution): a whole tile of row
 * stride 32, written or added to. */
void cuvil_f32_conv_ukernel_8x32__avx512(size_t kc, const float *a, const float *b, const int64_t *boff, float *c,
                                         int accumulate) {
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = accumulate ? _mm512_loadu_ps(c + i * NR) : _mm512_setzero_ps();
        acc[i][1] = accumulate ? _mm512_loadu_ps(c + i * NR + 16) : _mm512_setzero_ps();
    }
    for (size_t k = 0; k < kc; k++) {
        const float *bk = b + boff[k];
        const __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            const __m512 av = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
        }
        a += MR;
    }
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * NR, acc[i][0]);
        _mm512_storeu_ps(c + i * NR + 16, acc[i][1]);
    }
}

/* half_tile for the rows microkernels: R rows read in place, segment by segment. */
static inline __attribute__((always_inline)) void half_rows(int R, size_t nseg, const size_t *seglen,
                                                           const float *const *rows, const float *b, __m512 (*acc)[2]) {
    __m512 e[8];
    for (int i = 0; i < R; i++) e[i] = _mm512_setzero_ps();
    for (size_t sg = 0; sg < nseg; sg++) {
        const float *a[8];
        for (int i = 0; i < R; i++) a[i] = rows[sg * (size_t)R + (size_t)i];
        for (size_t k = 0; k < seglen[sg]; k++) {
            const __m512 b0 = _mm512_loadu_ps(b);
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) e[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i][k]), b0, e[i]);
            b += NR;
        }
    }
    for (int i = 0; i < R; i++) {
        acc[i][0] = e[i];
        acc[i][1] = _mm512_setzero_ps();
    }
}

/* The 8x32 tile with A's rows read in place, in segments (direct convolution on a
 * channels-last image, conv2d.c): segment s is, for row i, the seglen[s] floats at
 * rows[s * 8 + i]; B a packed panel of their sum x 32. */
void cuvil_f32_rows_ukernel_8x32__avx512(size_t nseg, const size_t *seglen, const float *const *rows,
                                         const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                         const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi) {
    __m512 acc[MR][2];
    if (nr <= 16) {
        half_rows(MR, nseg, seglen, rows, b, acc);
        store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
        return;
    }
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (size_t s = 0; s < nseg; s++) {
        const float *a0 = rows[s * MR], *a1 = rows[s * MR + 1], *a2 = rows[s * MR + 2], *a3 = rows[s * MR + 3];
        const float *a4 = rows[s * MR + 4], *a5 = rows[s * MR + 5], *a6 = rows[s * MR + 6], *a7 = rows[s * MR + 7];
        for (size_t k = 0; k < seglen[s]; k++) {
            B_PREFETCH(b);
            const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#define ROW(i, ai)                                        \
    do {                                                  \
        const __m512 av = _mm512_set1_ps(ai[k]);          \
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);   \
        acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);   \
    } while (0)
            ROW(0, a0);
            ROW(1, a1);
            ROW(2, a2);
            ROW(3, a3);
            ROW(4, a4);
            ROW(5, a5);
            ROW(6, a6);
            ROW(7, a7);
#undef ROW
            b += NR;
        }
    }
    store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* The same with 7 rows (a 7x7 map's 49 pixels). */
void cuvil_f32_rows_ukernel_7x32__avx512(size_t nseg, const size_t *seglen, const float *const *rows,
                                         const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                         const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi) {
    enum { R = 7 };
    __m512 acc[R][2];
    if (nr <= 16) {
        half_rows(R, nseg, seglen, rows, b, acc);
        store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
        return;
    }
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (size_t s = 0; s < nseg; s++) {
        const float *a[R];
        for (int i = 0; i < R; i++) a[i] = rows[s * R + (size_t)i];
        for (size_t k = 0; k < seglen[s]; k++) {
            const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 7
            for (int i = 0; i < R; i++) {
                const __m512 av = _mm512_set1_ps(a[i][k]);
                acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
            }
            b += NR;
        }
    }
    store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* 16 values of a panel of kind 0 (float32) or CUVIL_W16_F16 / _BF16 (widened). */
static inline __attribute__((always_inline)) __m512 load16(int kind, const void *panel, size_t i) {
    if (kind == 0) return _mm512_loadu_ps((const float *)panel + i);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)panel + i));
    if (kind == CUVIL_W16_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* acc[t] += sum_k a[k] * panel[k*32 + t] for t < 32 (one row of A times a packed B panel). */
static inline __attribute__((always_inline)) void panel32(int kind, size_t kc, const float *a, const void *panel,
                                                          float *acc) {
    __m512 s0 = _mm512_loadu_ps(acc), s1 = _mm512_loadu_ps(acc + 16);
    __m512 t0 = _mm512_setzero_ps(), t1 = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 2 <= kc; k += 2) {
        const __m512 a0 = _mm512_set1_ps(a[k]), a1 = _mm512_set1_ps(a[k + 1]);
        s0 = _mm512_fmadd_ps(a0, load16(kind, panel, k * NR), s0);
        s1 = _mm512_fmadd_ps(a0, load16(kind, panel, k * NR + 16), s1);
        t0 = _mm512_fmadd_ps(a1, load16(kind, panel, (k + 1) * NR), t0);
        t1 = _mm512_fmadd_ps(a1, load16(kind, panel, (k + 1) * NR + 16), t1);
    }
    for (; k < kc; k++) {
        const __m512 a0 = _mm512_set1_ps(a[k]);
        s0 = _mm512_fmadd_ps(a0, load16(kind, panel, k * NR), s0);
        s1 = _mm512_fmadd_ps(a0, load16(kind, panel, k * NR + 16), s1);
    }
    _mm512_storeu_ps(acc, _mm512_add_ps(s0, t0));
    _mm512_storeu_ps(acc + 16, _mm512_add_ps(s1, t1));
}

void cuvil_f32_gemv_panel32__avx512(size_t kc, const float *a, const float *panel, float *acc) {
    panel32(0, kc, a, panel, acc);
}

/* The same on a panel of 16-bit values (one loop per kind). */
void cuvil_f32_gemv_panel32_w16__avx512(int kind, size_t kc, const float *a, const uint16_t *panel, float *acc) {
    if (kind == CUVIL_W16_F16) panel32(CUVIL_W16_F16, kc, a, panel, acc);
    else panel32(CUVIL_W16_BF16, kc, a, panel, acc);
}

/* ===== bfloat16 products (CUVIL_W16_BF16_DOT) on AVX-512 BF16 ======================== */
/* vdpbf16ps adds to each float32 lane the two products of a pair of bfloat16s: the packed
 * panels hold, for each pair of k (2k2, 2k2 + 1), every row's (or column's) two values side by
 * side. The driver packs A and B in float32 as always and converts each block in place (a pair
 * takes the bytes of one float: the write never passes the read), rounding to nearest even. */
#define BF16_TARGET __attribute__((target("avx512bf16")))

/* idx[2i] = i, idx[2i + 1] = w + i: the values of two rows of w, interleaved. */
static inline __attribute__((always_inline)) __m512i pair_index(int w) {
    int16_t t[32];
    for (int i = 0; i < 32; i++) t[i] = (int16_t)(i % 2 ? w + i / 2 : i / 2);
    return _mm512_loadu_si512(t);
}

BF16_TARGET void cuvil_bf16_pairs_a__avx512bf16(float *panels, size_t kc, int mr, size_t npanels) {
    const size_t kc2 = (kc + 1) / 2;
    const __m512i idx = pair_index(mr);
    const __mmask16 both = (__mmask16)((1u << (2 * mr)) - 1u), one = (__mmask16)((1u << mr) - 1u);
    const __mmask32 out = (__mmask32)((1ull << (2 * mr)) - 1ull);
    uint16_t *dst = (uint16_t *)(void *)panels;
    for (size_t p = 0; p < npanels; p++) {
        const float *src = panels + p * kc * (size_t)mr;
        for (size_t k2 = 0; k2 < kc2; k2++) {
            /* rows 2k2 and 2k2 + 1 of the panel: 2 mr consecutive floats (the second row zero past kc) */
            const __m512 v = _mm512_maskz_loadu_ps(2 * k2 + 1 < kc ? both : one, src + 2 * k2 * (size_t)mr);
            const __m512i h = _mm512_castsi256_si512((__m256i)_mm512_cvtneps_pbh(v));
            _mm512_mask_storeu_epi16(dst, out, _mm512_permutexvar_epi16(idx, h));
            dst += 2 * (size_t)mr;
        }
    }
}

BF16_TARGET void cuvil_bf16_pairs_b32__avx512bf16(float *panels, size_t kc, size_t npanels) {
    const size_t kc2 = (kc + 1) / 2;
    const __m512i idx = pair_index(16);
    uint16_t *dst = (uint16_t *)(void *)panels;
    for (size_t p = 0; p < npanels; p++) {
        const float *src = panels + p * kc * NR;
        for (size_t k2 = 0; k2 < kc2; k2++) {
            const float *r0 = src + 2 * k2 * NR, *r1 = r0 + NR;
            const int has1 = 2 * k2 + 1 < kc;
            const __m512 a0 = _mm512_loadu_ps(r0), a1 = _mm512_loadu_ps(r0 + 16);
            const __m512 b0 = has1 ? _mm512_loadu_ps(r1) : _mm512_setzero_ps();
            const __m512 b1 = has1 ? _mm512_loadu_ps(r1 + 16) : _mm512_setzero_ps();
            const __m512i lo = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(b0, a0));
            const __m512i hi = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(b1, a1));
            _mm512_storeu_si512(dst, lo);
            _mm512_storeu_si512(dst + 32, hi);
            dst += 2 * NR;
        }
    }
}

/* The R x 32 tile over kc2 pairs of k: a [kc2][R][2], b [kc2][32][2] bfloat16s. */
BF16_TARGET static inline __attribute__((always_inline)) void bf16_tile(int R, size_t kc2, const uint16_t *a, const uint16_t *b,
                                                            __m512 (*acc)[2]) {
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (size_t k2 = 0; k2 < kc2; k2++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 32);
        int32_t ap[8];
        __builtin_memcpy(ap, a, sizeof(int32_t) * (size_t)R);
        for (int i = 0; i < R; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32(ap[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
        }
        a += 2 * (size_t)R;
        b += 2 * NR;
    }
}

BF16_TARGET void cuvil_bf16_gemm_ukernel_x32__avx512bf16(int rows, size_t kc2, const uint16_t *a, const uint16_t *b,
                                                          float *c, size_t ldc, size_t mr, size_t nr, const float *c_in,
                                                          size_t ld_in, const cuvil_ukernel_epi *epi) {
    __m512 acc[8][2];
    if (rows == 8) bf16_tile(8, kc2, a, b, acc);
    else bf16_tile(7, kc2, a, b, acc);
    store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
}
