/* q4gemm.c -- y = x W with W in 4 bits, dequantized inside the product (com.microsoft
 * MatMulNBits, bits = 4): W[k][n] = q[n][k] * scale[n][b] - zs[n][b] for k's block b (zs the
 * zero point times the scale). The weights stay packed as the model ships them, two values a
 * byte, low nibble first, each column's Kpad = blocks * bs values in a row: a decoding step
 * (one row of x) reads K * N / 2 bytes instead of float32's K * N * 4.
 *
 * y[m][n] = sum_b scale[n][b] * (sum_{k in b} x[m][k] q[n][k]) - sum_b zs[n][b] * xs[m][b],
 * with xs[m][b] the block sums of x's row (the scratch). The inner sums run in float32 on
 * sixteen lanes (AVX-512) or eight (AVX2): a byte's low nibbles are the values at even k and its
 * high ones those at odd k, so x's row is copied once per call in that order (zero-padded to
 * whole blocks), and the nibbles need only a mask, a shift and a widening convert. Up to four
 * rows of x share each decode of W; tasks take 32 columns each. The portable loop does the
 * same arithmetic one element at a time. */
#include "../rt_int.h"
#include "../transpose8.h"

#include <math.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define Q4_AVX2 1
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define Q4_AVX512 1
#endif
#endif

#define Q4_NT 32   /* columns per task */

/* From this many rows of x on, W is dequantized a block at a time into the panels of the blocked
 * float32 GEMM (q4_pack_b), once for all the rows; below, the fused loops decode it once per 4 rows
 * (K = N = 4096, one thread, ms: 16 rows 9.2 fused against 11.3; 24 rows 13.2 either way; 128 rows
 * 67 against 45.7, where ONNX Runtime takes 47). */
#define Q4_GEMM_ROWS 24

/* The default blocking with K blocks of at most 256: K's equal blocks then start at multiples of
 * 32 for the common K (4096 = 16 x 256, 11008 = 43 x 256), where the nibbles decode 32 at a time
 * (the default 192 cut 4096 into blocks of 187). */
static cuvil_gemm_blocking q4_blocking(void) {
    cuvil_gemm_blocking b = *cuvil_gemm_default_blocking();
    b.kc = 256;
    return b;
}

/* The GEMM's A and B blocks for any target's blocking (MC <= 256 rows of MR <= 8, NC <= 1024
 * columns, K blocks of 256): the compiler sizes the scratch with its own build of this function,
 * whose default blocking is not the target's. */
static size_t q4_gemm_bound(int64_t M) {
    const size_t rows = (size_t)CUVIL_ALIGN_UP(M < 256 ? M : 256, 8) + 8;   /* (+ 8: rounded up to any MR <= 8) */
    return CUVIL_ALIGN_UP(rows * 256 * sizeof(float), 64) + CUVIL_ALIGN_UP((size_t)256 * 1024 * sizeof(float), 64);
}

size_t cuvil_matmul_q4_scratch_size(int64_t M, int64_t K, int64_t bs) {
    if (M <= 0 || K <= 0 || bs <= 0) return 64;
    const int64_t nb = (K + bs - 1) / bs;
    const size_t fused = (size_t)M * (size_t)nb * sizeof(float) * (size_t)(1 + bs) + 128;   /* block sums, then x reordered */
    return M >= Q4_GEMM_ROWS && q4_gemm_bound(M) > fused ? q4_gemm_bound(M) : fused;
}

/* The 4-bit value at k of a column's bytes (low nibble first). */
static inline int nibble(const uint8_t *q, int64_t k) { return (q[k / 2] >> ((k & 1) * 4)) & 15; }

typedef struct q4pack {
    const cuvil_q4_params *p;
    const uint8_t *w;
    const float *s, *zs;
} q4pack;

/* dst[i] = W[k0 + i][n] = q * scale - zs of k0 + i's block, i < kn. */
static void decode_col(const q4pack *c, int64_t n, int64_t k0, int64_t kn, float *dst) {
    const int64_t bs = c->p->bs, nb = (c->p->K + bs - 1) / bs;
    const uint8_t *wn = c->w + n * (nb * bs / 2);
    const float *sc = c->s + n * nb, *z = c->zs + n * nb;
    int64_t i = 0;
#ifdef Q4_AVX2
    for (; i < kn && ((k0 + i) & 31); i++) dst[i] = fmaf((float)nibble(wn, k0 + i), sc[(k0 + i) / bs], -z[(k0 + i) / bs]);
    const __m128i m4 = _mm_set1_epi8(15);
    for (; i + 32 <= kn; i += 32) {   /* 16 bytes: k .. k + 31, low nibble first; 2 blocks where bs is 16 */
        const int64_t k = k0 + i, b0 = k / bs, b1 = (k + 16) / bs;
        const __m128i by = _mm_loadu_si128((const __m128i *)(const void *)(wn + k / 2));
        const __m128i lo = _mm_and_si128(by, m4), hi = _mm_and_si128(_mm_srli_epi16(by, 4), m4);
        const __m128i q0 = _mm_unpacklo_epi8(lo, hi), q1 = _mm_unpackhi_epi8(lo, hi);
        const __m256 s0 = _mm256_set1_ps(sc[b0]), z0 = _mm256_set1_ps(z[b0]);
        const __m256 s1 = _mm256_set1_ps(sc[b1]), z1 = _mm256_set1_ps(z[b1]);
        _mm256_storeu_ps(dst + i, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q0)), s0, z0));
        _mm256_storeu_ps(dst + i + 8, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q0, 8))), s0, z0));
        _mm256_storeu_ps(dst + i + 16, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q1)), s1, z1));
        _mm256_storeu_ps(dst + i + 24, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q1, 8))), s1, z1));
    }
#endif
    for (; i < kn; i++)   /* (one rounding, as the vector loop's fmsub) */
        dst[i] = fmaf((float)nibble(wn, k0 + i), sc[(k0 + i) / bs], -z[(k0 + i) / bs]);
}

/* The GEMM's B packer (cuvil_gemm_pack_b_fn): rows [k0, k0 + kc) x columns [n0, n0 + nc) of W as
 * kc x nr panels. Q4_CCH columns at a time, each decoded a chunk of Q4_KCH k (contiguous in w),
 * then the chunk transposed into the panel's rows 8 x 8 (2 KB on the stack: the runtime's
 * functions keep under 4 KB). */
#define Q4_KCH 32
#define Q4_CCH 16
static void q4_pack_b(const void *ctx, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float *dst) {
    const q4pack *c = ctx;
    float t[Q4_CCH][Q4_KCH];
    for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
        const int64_t cols = cuvil_min_i64(nr, nc - j0);
        for (int64_t kk = 0; kk < kc; kk += Q4_KCH) {
            const int64_t kn = cuvil_min_i64(Q4_KCH, kc - kk);
            for (int c0 = 0; c0 < nr; c0 += Q4_CCH) {
                const int cw = nr - c0 < Q4_CCH ? nr - c0 : Q4_CCH;
                for (int col = 0; col < cw; col++) {
                    if (c0 + col < cols) decode_col(c, n0 + j0 + c0 + col, k0 + kk, kn, t[col]);
                    else memset(t[col], 0, sizeof t[col]);
                }
                int64_t k = 0;
#if CUVIL_HAVE_AVX2
                if (cw % 8 == 0)
                    for (; k + 8 <= kn; k += 8)
                        for (int c8 = 0; c8 < cw; c8 += 8) {
                            __m256 r[8];
                            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(&t[c8 + i][k]);
                            cuvil_transpose8_regs(r);
                            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kk + k + i) * nr + c0 + c8, r[i]);
                        }
#endif
                for (; k < kn; k++)
                    for (int col = 0; col < cw; col++) dst[(kk + k) * nr + c0 + col] = t[col][k];
            }
        }
    }
}

/* y = x W for M >= Q4_GEMM_ROWS rows: the blocked GEMM, W's blocks packed from the nibbles. */
static void q4_gemm(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales, const float *zs,
                    float *y, void *scratch) {
    const q4pack c = {p, w, scales, zs};
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = p->M;
    j.N = p->N;
    j.K = p->K;
    j.A = x;
    j.lda = p->K;
    j.alpha = 1.0f;
    j.pack_b = q4_pack_b;
    j.pack_b_ctx = &c;
    j.C = y;
    j.ldc = p->N;
    j.beta = 1.0f;
    const cuvil_gemm_blocking b = q4_blocking();
    cuvil_f32_gemm_run(&j, &b, scratch);
}

typedef struct q4job {
    const cuvil_q4_params *p;
    const float *x, *s, *zs, *xs;
    const float *xd;           /* each row of x, zero-padded to whole blocks, in chunks of C values: the
                                * values at even k (low nibbles) of each 8 bytes, then those at odd k */
    const uint8_t *w;
    float *y;
} q4job;

#ifdef Q4_AVX2
/* The chunk of k the vector loops take: 32 (16 bytes of w), or 16 where blocks are 16. */
static inline int64_t chunk(int64_t bs) { return bs == 16 ? 16 : 32; }

/* x's row reordered for the nibbles: per chunk of C = 32, [evens of bytes 0-7, evens of bytes
 * 8-15, odds of 0-7, odds of 8-15] (a chunk of 16: [evens, odds]), zeros past K. */
static inline void reorder(const float *x, int64_t K, int64_t kpad, int64_t C, float *xd) {
    for (int64_t c0 = 0; c0 < kpad; c0 += C)
        for (int64_t i = 0; i < C; i++) {
            const int64_t k = c0 + i, half = C / 2, pos = (i % 2) * half + i / 2;   /* even k: first half */
            xd[c0 + pos] = k < K ? x[k] : 0.0f;
        }
}

static inline float hsum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

#define FMA_ROWS(R, off, wv)                                                          \
    do {                                                                              \
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + (off)), wv, s0);                   \
        if ((R) > 1) s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + (off)), wv, s1);      \
        if ((R) > 2) s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + (off)), wv, s2);      \
        if ((R) > 3) s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + (off)), wv, s3);      \
    } while (0)

/* rows m0..m0+R-1 (R 1..4) of column n: the scaled block sums of x q */
static inline __attribute__((always_inline)) void col_avx2(const q4job *j, int64_t m0, int R, int64_t n, int64_t b0, int64_t b1,
                                                          float *out) {
    const cuvil_q4_params *p = j->p;
    const int64_t K = p->K, bs = p->bs, nb = (K + bs - 1) / bs, kpad = nb * bs, C = chunk(bs);
    const uint8_t *q = j->w + n * (kpad / 2);
    const __m128i lowm = _mm_set1_epi8(0x0f);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const float *x0 = j->xd + m0 * kpad, *x1 = x0 + (R > 1 ? kpad : 0), *x2 = x0 + (R > 2 ? 2 * kpad : 0),
                *x3 = x0 + (R > 3 ? 3 * kpad : 0);
    for (int64_t b = b0; b < b1; b++) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int64_t k = b * bs; k < (b + 1) * bs; k += C) {
            if (C == 32) {   /* 16 bytes: evens of 0-7 | 8-15, then odds */
                const __m128i by = _mm_loadu_si128((const __m128i *)(const void *)(q + k / 2));
                const __m128i lo = _mm_and_si128(by, lowm), hi = _mm_and_si128(_mm_srli_epi16(by, 4), lowm);
                const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
                const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
                const __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
                const __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
                FMA_ROWS(R, k, w0);
                FMA_ROWS(R, k + 8, w1);
                FMA_ROWS(R, k + 16, w2);
                FMA_ROWS(R, k + 24, w3);
            } else {   /* 8 bytes: evens, then odds */
                const __m128i by = _mm_loadl_epi64((const __m128i *)(const void *)(q + k / 2));
                const __m128i lo = _mm_and_si128(by, lowm), hi = _mm_and_si128(_mm_srli_epi16(by, 4), lowm);
                const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
                const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
                FMA_ROWS(R, k, w0);
                FMA_ROWS(R, k + 8, w1);
            }
        }
        const __m256 vs = _mm256_set1_ps(j->s[n * nb + b]);
        acc0 = _mm256_fmadd_ps(s0, vs, acc0);
        if (R > 1) acc1 = _mm256_fmadd_ps(s1, vs, acc1);
        if (R > 2) acc2 = _mm256_fmadd_ps(s2, vs, acc2);
        if (R > 3) acc3 = _mm256_fmadd_ps(s3, vs, acc3);
    }
    out[0] = hsum8(acc0);
    if (R > 1) out[1] = hsum8(acc1);
    if (R > 2) out[2] = hsum8(acc2);
    if (R > 3) out[3] = hsum8(acc3);
}
#undef FMA_ROWS
#endif

#ifdef Q4_AVX512
#define FMA_ROWS16(R, off, wv)                                                        \
    do {                                                                              \
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x0 + (off)), wv, s0);                   \
        if ((R) > 1) s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x1 + (off)), wv, s1);      \
        if ((R) > 2) s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x2 + (off)), wv, s2);      \
        if ((R) > 3) s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x3 + (off)), wv, s3);      \
    } while (0)

/* the same on sixteen lanes, for chunks of 32 (blocks of 32 or more) */
static inline __attribute__((always_inline)) void col_avx512(const q4job *j, int64_t m0, int R, int64_t n, int64_t b0,
                                                            int64_t b1, float *out) {
    const cuvil_q4_params *p = j->p;
    const int64_t K = p->K, bs = p->bs, nb = (K + bs - 1) / bs, kpad = nb * bs;
    const uint8_t *q = j->w + n * (kpad / 2);
    const __m128i lowm = _mm_set1_epi8(0x0f);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const float *x0 = j->xd + m0 * kpad, *x1 = x0 + (R > 1 ? kpad : 0), *x2 = x0 + (R > 2 ? 2 * kpad : 0),
                *x3 = x0 + (R > 3 ? 3 * kpad : 0);
    for (int64_t b = b0; b < b1; b++) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int64_t k = b * bs; k < (b + 1) * bs; k += 32) {
            const __m128i by = _mm_loadu_si128((const __m128i *)(const void *)(q + k / 2));
            const __m128i lo = _mm_and_si128(by, lowm), hi = _mm_and_si128(_mm_srli_epi16(by, 4), lowm);
            const __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo));
            const __m512 w1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi));
            FMA_ROWS16(R, k, w0);
            FMA_ROWS16(R, k + 16, w1);
        }
        const __m512 vs = _mm512_set1_ps(j->s[n * nb + b]);
        acc0 = _mm512_fmadd_ps(s0, vs, acc0);
        if (R > 1) acc1 = _mm512_fmadd_ps(s1, vs, acc1);
        if (R > 2) acc2 = _mm512_fmadd_ps(s2, vs, acc2);
        if (R > 3) acc3 = _mm512_fmadd_ps(s3, vs, acc3);
    }
    out[0] = _mm512_reduce_add_ps(acc0);
    if (R > 1) out[1] = _mm512_reduce_add_ps(acc1);
    if (R > 2) out[2] = _mm512_reduce_add_ps(acc2);
    if (R > 3) out[3] = _mm512_reduce_add_ps(acc3);
}
#undef FMA_ROWS16
#endif

/* the portable loop: sum_b scale * sum_k x q, one element at a time */
static float col_scalar(const q4job *j, int64_t m, int64_t n) {
    const cuvil_q4_params *p = j->p;
    const int64_t K = p->K, bs = p->bs, nb = (K + bs - 1) / bs, kpad = nb * bs;
    const uint8_t *q = j->w + n * (kpad / 2);
    const float *x = j->x + m * K;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t k0 = b * bs, k1 = K - k0 < bs ? K : k0 + bs;
        float blk = 0;
        for (int64_t k = k0; k < k1; k++) blk += x[k] * (float)nibble(q, k);
        acc += blk * j->s[n * nb + b];
    }
    return acc;
}

/* sum_b zs[b] xs[b]: the zero points' share (eight lanes where the target has them: in order,
 * the compiler's one-by-one sum took a third of the kernel's time at 16 rows) */
static inline float zdot(const float *zs, const float *xs, int64_t nb) {
    int64_t b = 0;
    float z = 0;
#ifdef Q4_AVX2
    __m256 a = _mm256_setzero_ps();
    for (; b + 8 <= nb; b += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(zs + b), _mm256_loadu_ps(xs + b), a);
    z = hsum8(a);
#endif
    for (; b < nb; b++) z += zs[b] * xs[b];
    return z;
}

#ifdef Q4_AVX2
/* blocks per K tile: x's tile of four rows (16 KB at 1024 values) stays in L1 while the task's
 * columns go by */
static inline int64_t tile_blocks(int64_t bs) { return bs >= 1024 ? 1 : 1024 / bs; }
#endif

static void q4_task(void *ctx, int64_t t, int tid) {
    (void)tid;
    const q4job *j = ctx;
    const cuvil_q4_params *p = j->p;
    const int64_t N = p->N, M = p->M, nb = (p->K + p->bs - 1) / p->bs;
    const int64_t n0 = t * Q4_NT, n1 = n0 + Q4_NT < N ? n0 + Q4_NT : N;
    for (int64_t m = 0; m < M;) {
#if defined(Q4_AVX2)
        const int R = M - m >= 4 ? 4 : 1;
#else
        const int R = 1;
#endif
        float acc[Q4_NT][4];
        memset(acc, 0, sizeof acc);
#if defined(Q4_AVX2)
        const int64_t tb = tile_blocks(p->bs);
        for (int64_t b0 = 0; b0 < nb; b0 += tb) {
            const int64_t b1 = b0 + tb < nb ? b0 + tb : nb;
            for (int64_t n = n0; n < n1; n++) {
                float v[4];
#ifdef Q4_AVX512
                if (p->bs >= 32) {
                    if (R == 4) col_avx512(j, m, 4, n, b0, b1, v);
                    else col_avx512(j, m, 1, n, b0, b1, v);
                } else if (R == 4) {
                    col_avx2(j, m, 4, n, b0, b1, v);
                } else {
                    col_avx2(j, m, 1, n, b0, b1, v);
                }
#else
                if (R == 4) col_avx2(j, m, 4, n, b0, b1, v);
                else col_avx2(j, m, 1, n, b0, b1, v);
#endif
                for (int r = 0; r < R; r++) acc[n - n0][r] += v[r];
            }
        }
#else
        for (int64_t n = n0; n < n1; n++) acc[n - n0][0] = col_scalar(j, m, n);
#endif
        for (int64_t n = n0; n < n1; n++) {
            const float *zs = j->zs + n * nb;
            for (int r = 0; r < R; r++) {
                j->y[(m + r) * N + n] = acc[n - n0][r] - zdot(zs, j->xs + (m + r) * nb, nb);
            }
        }
        m += R;
    }
}

void cuvil_matmul_q4(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales, const float *zs,
                     float *y, void *scratch) {
    const int64_t M = p->M, K = p->K, N = p->N, bs = p->bs, nb = (K + bs - 1) / bs;
    if (M <= 0 || N <= 0) return;
    const cuvil_gemm_blocking b = q4_blocking();
    if (M >= Q4_GEMM_ROWS && cuvil_gemm_job_scratch_size(M, N, K, &b) <= q4_gemm_bound(M)) {   /* (always, on our targets) */
        q4_gemm(p, x, w, scales, zs, y, scratch);
        return;
    }
    float *xs = scratch;   /* each row's block sums, then its reordered copy */
    float *xd = xs + ((M * nb + 15) / 16 * 16);
#ifdef Q4_AVX2
    for (int64_t m = 0; m < M; m++) reorder(x + m * K, K, nb * bs, chunk(bs), xd + m * nb * bs);
#else
    (void)xd;
#endif
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t k0 = b * bs, k1 = K - k0 < bs ? K : k0 + bs;
            float s = 0;
            for (int64_t k = k0; k < k1; k++) s += x[m * K + k];
            xs[m * nb + b] = s;
        }
    q4job j = {p, x, scales, zs, xs, xd, w, y};
    cuvil_parallel_for((N + Q4_NT - 1) / Q4_NT, q4_task, &j);
}

void cuvil_matmul_q4__scalar(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales,
                             const float *zs, float *y) {
    const int64_t M = p->M, K = p->K, N = p->N, bs = p->bs, nb = (K + bs - 1) / bs;
    q4job j = {p, x, scales, zs, NULL, NULL, w, y};
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            float z = 0;
            for (int64_t b = 0; b < nb; b++) {
                const int64_t k0 = b * bs, k1 = K - k0 < bs ? K : k0 + bs;
                float s = 0;
                for (int64_t k = k0; k < k1; k++) s += x[m * K + k];
                z += zs[n * nb + b] * s;
            }
            y[m * N + n] = col_scalar(&j, m, n) - z;
        }
}
