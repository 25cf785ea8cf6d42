/*
 * gemm_avx2.c -- the 6x16 AVX2+FMA GEMM microkernel (x86_64-avx2 target only), and a 5x16 one
 * for row counts that 6-row tiles pad (49 pixels: 50 rows in 5s, not 54 in 6s).
 *
 * 12 ymm accumulators (6 rows x 2 vectors of 8), 2 ymm for the B row, 1 for the broadcast A
 * element: 15 of the 16 registers. Each k step is 2 loads, 6 broadcasts and 12 FMAs, so the two
 * FMA ports stay busy as long as the packed panels come from L1/L2. The 5x16 tile: 10
 * accumulators, 2 loads and 5 broadcasts for 10 FMAs, still more chains than the FMA latency
 * times the two ports.
 */
#include <immintrin.h>

#include "../rt_int.h"

#define MR 6
#define NR 16

/* The packed B row (one line) 8 k steps ahead into L1 (past a panel's end: the next panel's,
 * or nothing; a prefetch never faults): ResNet-50 one thread 82.0 -> 78.7 ms (alternating
 * cuvil-run turns, Xeon VM), MobileNetV3, ResNet-18 on two threads and the YOLO-style
 * detector within noise. */
#define B_PREFETCH(b) _mm_prefetch((const char *)((b) + 8 * NR), _MM_HINT_T0)

/* HardSwish, as unary_avx2.c's hard_swish256 computes it (the same operations in the same
 * order: a tile's values are those of the activation applied after it). */
static inline __attribute__((always_inline)) __m256 hswish8(__m256 x) {
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.0f / 6.0f)), _mm256_set1_ps(0.5f));
    return _mm256_mul_ps(x, _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(1.0f)), _mm256_setzero_ps()));
}

/* The first n (0-8) floats at p as a vector, the rest zero (a masked load: lanes past n are
 * never read). */
static inline __attribute__((always_inline)) __m256 load_part(const float *p, size_t n) {
    if (n >= 8) return _mm256_loadu_ps(p);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
}

/* The first n (0-8) lanes of v to p, in pieces of 4, 2 and 1 (AVX2's masked store is slow on
 * AMD's cores before Zen 4). */
static inline __attribute__((always_inline)) void store_part(float *p, __m256 v, size_t n) {
    if (n >= 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    __m128 x = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(p, x);
        x = _mm256_extractf128_ps(v, 1);
        p += 4;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)(void *)p, x);
        x = _mm_movehl_ps(x, x);
        p += 2;
    }
    if (n & 1) _mm_store_ss(p, x);
}

/* Rows [0, mr) x columns [0, nr) of the accumulators (a tile of TR rows: MR or 5) into c: +
 * c_in, then the fused epilogue (bias, then the clamp or HardSwish). An edge tile runs the same
 * vector arithmetic on its mr rows and stores the first nr columns of each (partial loads
 * masked, partial stores in pieces), so its values are the full tile's. (Against the element by
 * element store it replaced: within noise, cuvil-bench-conv A/B on 40-, 72- and 184-channel
 * outputs, alternating.) */
static inline __attribute__((always_inline)) void store_tile_r(__m256 (*acc)[2], const int TR, float *c, size_t ldc,
                                                               size_t mr, size_t nr, const float *c_in, size_t ld_in,
                                                               const cuvil_ukernel_epi *epi) {
    const int full = mr == (size_t)TR && nr == NR;
    const size_t n0 = nr < 8 ? nr : 8, n1 = nr - n0;
    if (c_in)
#pragma GCC unroll 6
        for (int i = 0; i < TR; i++) {
            if (!full && (size_t)i >= mr) break;
            acc[i][0] = _mm256_add_ps(acc[i][0], full ? _mm256_loadu_ps(c_in + i * ld_in) : load_part(c_in + i * ld_in, n0));
            acc[i][1] = _mm256_add_ps(acc[i][1],
                                      full ? _mm256_loadu_ps(c_in + i * ld_in + 8) : load_part(c_in + i * ld_in + 8, n1));
        }
    if (epi) {
        /* bias, then the clamp: max(lo, v) and min(hi, v) keep a NaN v (the second operand) */
        const __m256 lo = _mm256_set1_ps(epi->lo), hi = _mm256_set1_ps(epi->hi);
        __m256 cb0 = _mm256_setzero_ps(), cb1 = _mm256_setzero_ps();
        if (epi->col_bias) {
            cb0 = full ? _mm256_loadu_ps(epi->col_bias) : load_part(epi->col_bias, n0);
            cb1 = full ? _mm256_loadu_ps(epi->col_bias + 8) : load_part(epi->col_bias + 8, n1);
        }
        const float *rb = epi->row_bias;
        if (epi->hswish)   /* (its lo and hi are -inf and +inf: no clamp) */
#pragma GCC unroll 6
            for (int i = 0; i < TR; i++) {
                if (!full && (size_t)i >= mr) break;
                const __m256 bi = rb ? _mm256_set1_ps(rb[i]) : _mm256_setzero_ps();
                acc[i][0] = hswish8(_mm256_add_ps(acc[i][0], _mm256_add_ps(bi, cb0)));
                acc[i][1] = hswish8(_mm256_add_ps(acc[i][1], _mm256_add_ps(bi, cb1)));
            }
        else
#pragma GCC unroll 6
            for (int i = 0; i < TR; i++) {
                if (!full && (size_t)i >= mr) break;
                const __m256 bi = rb ? _mm256_set1_ps(rb[i]) : _mm256_setzero_ps();
                acc[i][0] = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(acc[i][0], _mm256_add_ps(bi, cb0))));
                acc[i][1] = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(acc[i][1], _mm256_add_ps(bi, cb1))));
            }
    }
    if (full) {
#pragma GCC unroll 6
        for (int i = 0; i < TR; i++) {
            _mm256_storeu_ps(c + i * ldc, acc[i][0]);
            _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
        }
        return;
    }
#pragma GCC unroll 6
    for (int i = 0; i < TR; i++) {
        if ((size_t)i >= mr) break;
        store_part(c + i * ldc, acc[i][0], n0);
        if (n1) store_part(c + i * ldc + 8, acc[i][1], n1);
    }
}

static inline __attribute__((always_inline)) void store_tile(__m256 (*acc)[2], float *c, size_t ldc, size_t mr,
                                                             size_t nr, const float *c_in, size_t ld_in,
                                                             const cuvil_ukernel_epi *epi) {
    store_tile_r(acc, MR, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* The sums of a TR x 16 tile over A packed in panels of AS rows (AS = TR for the 5x16 tile's
 * panels, MR for an edge tile of a 6x16 panel, whose rows past TR are zero), each row's FMAs in
 * k order from zero (the 6x16 tile's order: an edge tile's values are the whole tile's). */
static inline __attribute__((always_inline)) void packed_sums(const int TR, const int AS, size_t kc, const float *a,
                                                              const float *b, __m256 (*acc)[2]) {
#pragma GCC unroll 6
    for (int i = 0; i < TR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (size_t k = 0; k < kc; k++) {
        B_PREFETCH(b + k * NR);
        const __m256 b0 = _mm256_loadu_ps(b + k * NR), b1 = _mm256_loadu_ps(b + k * NR + 8);
#pragma GCC unroll 6
        for (int i = 0; i < TR; i++) {
            const __m256 av = _mm256_broadcast_ss(a + k * (size_t)AS + (size_t)i);
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
    }
}

/* An edge tile of TR < MR rows: only its rows' FMAs. A 4-row tile's 8 sums take 4 cycles a k
 * step (the FMA's latency) where the whole tile's 12 take 6: cuvil-bench-gemm-avx2 --shape, one
 * thread, old and new in turns, medians of 6: 32 x 3136 x 288 (tiles 5 x 6 + 2) 93.1 -> 99.3
 * GFLOP/s, 40 x 784 x 960 99.3 -> 100.6; 16 rows (6, 6, 4) 86 either way, its B's packing the
 * bound there. */
static inline __attribute__((always_inline)) void short_tile(const int TR, size_t kc, const float *a, const float *b,
                                                             float *c, size_t ldc, size_t nr, const float *c_in,
                                                             size_t ld_in, const cuvil_ukernel_epi *epi) {
    __m256 acc[MR][2];
    packed_sums(TR, MR, kc, a, b, acc);
    store_tile_r(acc, TR, c, ldc, (size_t)TR, nr, c_in, ld_in, epi);
}

void cuvil_f32_gemm_ukernel_6x16__avx2_fma(size_t kc, const float *a, const float *b, float *c,
                                           size_t ldc, size_t mr, size_t nr, const float *c_in,
                                           size_t ld_in, const cuvil_ukernel_epi *epi) {
    switch (mr) {   /* an edge tile: its rows only */
    case 1: short_tile(1, kc, a, b, c, ldc, nr, c_in, ld_in, epi); return;
    case 2: short_tile(2, kc, a, b, c, ldc, nr, c_in, ld_in, epi); return;
    case 3: short_tile(3, kc, a, b, c, ldc, nr, c_in, ld_in, epi); return;
    case 4: short_tile(4, kc, a, b, c, ldc, nr, c_in, ld_in, epi); return;
    case 5: short_tile(5, kc, a, b, c, ldc, nr, c_in, ld_in, epi); return;
    default: break;
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();

#define STEP(off)                                                    \
    do {                                                             \
        const __m256 b0 = _mm256_loadu_ps(b + (off) * NR);            \
        const __m256 b1 = _mm256_loadu_ps(b + (off) * NR + 8);        \
        __m256 av = _mm256_broadcast_ss(a + (off) * MR + 0);         \
        c00 = _mm256_fmadd_ps(av, b0, c00);                          \
        c01 = _mm256_fmadd_ps(av, b1, c01);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 1);                \
        c10 = _mm256_fmadd_ps(av, b0, c10);                          \
        c11 = _mm256_fmadd_ps(av, b1, c11);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 2);                \
        c20 = _mm256_fmadd_ps(av, b0, c20);                          \
        c21 = _mm256_fmadd_ps(av, b1, c21);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 3);                \
        c30 = _mm256_fmadd_ps(av, b0, c30);                          \
        c31 = _mm256_fmadd_ps(av, b1, c31);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 4);                \
        c40 = _mm256_fmadd_ps(av, b0, c40);                          \
        c41 = _mm256_fmadd_ps(av, b1, c41);                          \
        av = _mm256_broadcast_ss(a + (off) * MR + 5);                \
        c50 = _mm256_fmadd_ps(av, b0, c50);                          \
        c51 = _mm256_fmadd_ps(av, b1, c51);                          \
    } while (0)

    for (size_t k = 0; k < kc; k++) {
        B_PREFETCH(b);
        STEP(0);
        a += MR;
        b += NR;
    }
#undef STEP

    __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    store_tile(acc, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* A TR x 16 tile (TR: MR or 5) with A's rows read in place, in segments (direct convolution on
 * a channels-last image, conv2d.c): segment s is, for row i, the seglen[s] floats at
 * rows[s * TR + i]; B a packed panel of their sum x 16. */
static inline __attribute__((always_inline)) void rows_tile(const int TR, size_t nseg, const size_t *seglen,
                                                            const float *const *rows, const float *b, float *c,
                                                            size_t ldc, size_t mr, size_t nr, const float *c_in,
                                                            size_t ld_in, const cuvil_ukernel_epi *epi) {
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < TR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (size_t s = 0; s < nseg; s++) {
        const float *ar[MR];
#pragma GCC unroll 6
        for (int i = 0; i < TR; i++) ar[i] = rows[s * (size_t)TR + (size_t)i];
#pragma GCC unroll 4
        for (size_t k = 0; k < seglen[s]; k++) {
            B_PREFETCH(b + k * NR);
            const __m256 b0 = _mm256_loadu_ps(b + k * NR), b1 = _mm256_loadu_ps(b + k * NR + 8);
#pragma GCC unroll 6
            for (int i = 0; i < TR; i++) {
                const __m256 av = _mm256_broadcast_ss(ar[i] + k);
                acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
            }
        }
        b += seglen[s] * NR;
    }
    store_tile_r(acc, TR, c, ldc, mr, nr, c_in, ld_in, epi);
}

void cuvil_f32_rows_ukernel_6x16__avx2_fma(size_t nseg, const size_t *seglen, const float *const *rows,
                                           const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                           const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi) {
    rows_tile(MR, nseg, seglen, rows, b, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* The 5x16 tile: A packed in panels of 5 rows. */
void cuvil_f32_gemm_ukernel_5x16__avx2_fma(size_t kc, const float *a, const float *b, float *c,
                                           size_t ldc, size_t mr, size_t nr, const float *c_in,
                                           size_t ld_in, const cuvil_ukernel_epi *epi) {
    __m256 acc[5][2];
    packed_sums(5, 5, kc, a, b, acc);
    store_tile_r(acc, 5, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* The 5x16 tile with A's rows read in place (row i of segment s at rows[s * 5 + i]). */
void cuvil_f32_rows_ukernel_5x16__avx2_fma(size_t nseg, const size_t *seglen, const float *const *rows,
                                           const float *b, float *c, size_t ldc, size_t mr, size_t nr,
                                           const float *c_in, size_t ld_in, const cuvil_ukernel_epi *epi) {
    rows_tile(5, nseg, seglen, rows, b, c, ldc, mr, nr, c_in, ld_in, epi);
}

/* ===== GEMV with B stored [N, K] (M == 1, trans_b) ===================================== */
static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* c[n] = alpha * dot(a, B[n, :]) (+ c_in[n]) for n < N: four rows of B per pass share the
 * loads of a; two accumulators per row hide the FMA latency. */
void cuvil_f32_gemv_t__avx2_fma(size_t K, size_t N, const float *a, const float *B, size_t ldb,
                                float alpha, const float *c_in, float *c) {
    size_t n = 0;
    for (; n + 4 <= N; n += 4) {
        const float *b0 = B + n * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
        __m256 u0 = _mm256_setzero_ps(), u1 = _mm256_setzero_ps();
        __m256 u2 = _mm256_setzero_ps(), u3 = _mm256_setzero_ps();
        size_t k = 0;
        for (; k + 16 <= K; k += 16) {
            const __m256 a0 = _mm256_loadu_ps(a + k), a1 = _mm256_loadu_ps(a + k + 8);
            s0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + k), s0);
            s1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b1 + k), s1);
            s2 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b2 + k), s2);
            s3 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b3 + k), s3);
            u0 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b0 + k + 8), u0);
            u1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + k + 8), u1);
            u2 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b2 + k + 8), u2);
            u3 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b3 + k + 8), u3);
        }
        for (; k + 8 <= K; k += 8) {
            const __m256 a0 = _mm256_loadu_ps(a + k);
            s0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + k), s0);
            s1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b1 + k), s1);
            s2 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b2 + k), s2);
            s3 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b3 + k), s3);
        }
        float t0 = hsum256(_mm256_add_ps(s0, u0)), t1 = hsum256(_mm256_add_ps(s1, u1));
        float t2 = hsum256(_mm256_add_ps(s2, u2)), t3 = hsum256(_mm256_add_ps(s3, u3));
        for (; k < K; k++) {
            t0 += a[k] * b0[k];
            t1 += a[k] * b1[k];
            t2 += a[k] * b2[k];
            t3 += a[k] * b3[k];
        }
        c[n] = alpha * t0 + (c_in ? c_in[n] : 0.0f);
        c[n + 1] = alpha * t1 + (c_in ? c_in[n + 1] : 0.0f);
        c[n + 2] = alpha * t2 + (c_in ? c_in[n + 2] : 0.0f);
        c[n + 3] = alpha * t3 + (c_in ? c_in[n + 3] : 0.0f);
    }
    for (; n < N; n++) {
        const float *b0 = B + n * ldb;
        __m256 s0 = _mm256_setzero_ps();
        size_t k = 0;
        for (; k + 8 <= K; k += 8)
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b0 + k), s0);
        float t0 = hsum256(s0);
        for (; k < K; k++) t0 += a[k] * b0[k];
        c[n] = alpha * t0 + (c_in ? c_in[n] : 0.0f);
    }
}

/* ===== Packing a transposed B ([N, K] storage) into 16-wide panels ===================== */
static inline void transpose8x8(__m256 *r) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* acc[0..16) += sum_k a[k] * panel[16k ..]: the panel streams once, contiguously; four k
 * steps per pass on eight accumulators hide the FMA latency. */
/* 8 values of a panel of kind 0 (float32) or CUVIL_W16_F16 / _BF16 (widened: F16C, or a shift). */
static inline __attribute__((always_inline)) __m256 load8(int kind, const void *panel, size_t i) {
    if (kind == 0) return _mm256_loadu_ps((const float *)panel + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)panel + i));
    if (kind == CUVIL_W16_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) void panel16(int kind, size_t kc, const float *a, const void *panel,
                                                          float *acc) {
    __m256 s[8];
    for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 4 <= kc; k += 4)
        for (int u = 0; u < 4; u++) {
            const __m256 av = _mm256_broadcast_ss(a + k + u);
            s[2 * u] = _mm256_fmadd_ps(av, load8(kind, panel, (k + u) * 16), s[2 * u]);
            s[2 * u + 1] = _mm256_fmadd_ps(av, load8(kind, panel, (k + u) * 16 + 8), s[2 * u + 1]);
        }
    for (; k < kc; k++) {
        const __m256 av = _mm256_broadcast_ss(a + k);
        s[0] = _mm256_fmadd_ps(av, load8(kind, panel, k * 16), s[0]);
        s[1] = _mm256_fmadd_ps(av, load8(kind, panel, k * 16 + 8), s[1]);
    }
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[4], s[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(s[1], s[3]), _mm256_add_ps(s[5], s[7]));
    _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), lo));
    _mm256_storeu_ps(acc + 8, _mm256_add_ps(_mm256_loadu_ps(acc + 8), hi));
}

void cuvil_f32_gemv_panel16__avx2_fma(size_t kc, const float *a, const float *panel, float *acc) {
    panel16(0, kc, a, panel, acc);
}

/* The same on a panel of 16-bit values (one loop per kind). */
void cuvil_f32_gemv_panel16_w16__avx2_fma(int kind, size_t kc, const float *a, const uint16_t *panel, float *acc) {
    if (kind == CUVIL_W16_F16) panel16(CUVIL_W16_F16, kc, a, panel, acc);
    else panel16(CUVIL_W16_BF16, kc, a, panel, acc);
}

/* dst[k*16 + c] = src[c*ld + k] for c < 16, k < kc: one full 16-wide panel of B' = B^T. */
void cuvil_f32_gemm_pack_b_t16__avx2(size_t kc, const float *src, size_t ld, float *dst) {
    size_t k = 0;
    for (; k + 8 <= kc; k += 8)
        for (size_t c0 = 0; c0 < 16; c0 += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (c0 + (size_t)i) * ld + k);
            transpose8x8(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (k + (size_t)i) * 16 + c0, r[i]);
        }
    for (; k < kc; k++)
        for (size_t c = 0; c < 16; c++) dst[k * 16 + c] = src[c * ld + k];
}

/* The 6x16 tile with B's rows at b + boff[k] (direct convolution): a whole tile of row
 * stride 16, written or added to. */
void cuvil_f32_conv_ukernel_6x16__avx2_fma(size_t kc, const float *a, const float *b, const int64_t *boff,
                                           float *c, int accumulate) {
    __m256 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = accumulate ? _mm256_loadu_ps(c + i * NR) : _mm256_setzero_ps();
        acc[i][1] = accumulate ? _mm256_loadu_ps(c + i * NR + 8) : _mm256_setzero_ps();
    }
    for (size_t k = 0; k < kc; k++) {
        const float *bk = b + boff[k];
        const __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const __m256 av = _mm256_broadcast_ss(a + i);
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
        a += MR;
    }
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(c + i * NR, acc[i][0]);
        _mm256_storeu_ps(c + i * NR + 8, acc[i][1]);
    }
}
