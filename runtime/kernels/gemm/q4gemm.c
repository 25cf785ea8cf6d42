/* q4gemm.c -- y = x W with W in 4 bits, dequantized inside the product (com.microsoft
 * MatMulNBits, bits = 4): W[k][n] = q[n][k] * scale[n][b] - zs[n][b] for k's block b (zs the
 * zero point times the scale). The weights stay packed as the model ships them, two values a
 * byte, low nibble first, each column's Kpad = blocks * bs values in a row: a decoding step
 * (one row of x) reads K * N / 2 bytes instead of float32's K * N * 4.
 *
 * y[m][n] = sum_b scale[n][b] * (sum_{k in b} x[m][k] q[n][k]) - sum_b zs[n][b] * xs[m][b],
 * with xs[m][b] the block sums of x's row (the scratch). The inner sums run in float32 on
 * eight lanes (AVX2: sixteen nibbles widened by two byte unpacks and a convert), up to four rows
 * of x at a time so each byte of W is decoded once per four rows; tasks take 32 columns each.
 * The portable loop does the same arithmetic one element at a time. */
#include "cuvil_rt.h"

#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define Q4_AVX2 1
#endif

#define Q4_NT 32   /* columns per task */

size_t cuvil_matmul_q4_scratch_size(int64_t M, int64_t K, int64_t bs) {
    if (M <= 0 || K <= 0 || bs <= 0) return 64;
    return (size_t)M * (size_t)((K + bs - 1) / bs) * sizeof(float) + 64;
}

typedef struct q4job {
    const cuvil_q4_params *p;
    const float *x, *s, *zs, *xs;
    const uint8_t *w;
    float *y;
} q4job;

#ifdef Q4_AVX2
static inline float hsum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

/* rows m0..m0+R-1 (R 1..4) of column n: the scaled block sums of x q, in lanes */
static inline __attribute__((always_inline)) void col_avx2(const q4job *j, int64_t m0, int R, int64_t n, float *out) {
    const cuvil_q4_params *p = j->p;
    const int64_t K = p->K, bs = p->bs, nb = (K + bs - 1) / bs, kpad = nb * bs;
    const uint8_t *q = j->w + n * (kpad / 2);
    const __m128i lowm = _mm_set1_epi8(0x0f);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    float tail[4] = {0, 0, 0, 0};
    const float *x0 = j->x + m0 * K, *x1 = x0 + (R > 1 ? K : 0), *x2 = x0 + (R > 2 ? 2 * K : 0), *x3 = x0 + (R > 3 ? 3 * K : 0);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t k0 = b * bs, len = K - k0 < bs ? K - k0 : bs, vec = len / 16 * 16;
        __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
        for (int64_t k = k0; k < k0 + vec; k += 16) {
            const __m128i by = _mm_loadl_epi64((const __m128i *)(const void *)(q + k / 2));
            const __m128i lo = _mm_and_si128(by, lowm), hi = _mm_and_si128(_mm_srli_epi16(by, 4), lowm);
            const __m128i v = _mm_unpacklo_epi8(lo, hi);   /* the sixteen values in k order */
            const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
            const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
            b0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + k), w0, b0);
            b0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + k + 8), w1, b0);
            if (R > 1) {
                b1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + k), w0, b1);
                b1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + k + 8), w1, b1);
            }
            if (R > 2) {
                b2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + k), w0, b2);
                b2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + k + 8), w1, b2);
            }
            if (R > 3) {
                b3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + k), w0, b3);
                b3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + k + 8), w1, b3);
            }
        }
        const float sc = j->s[n * nb + b];
        const __m256 vs = _mm256_set1_ps(sc);
        acc0 = _mm256_fmadd_ps(b0, vs, acc0);
        if (R > 1) acc1 = _mm256_fmadd_ps(b1, vs, acc1);
        if (R > 2) acc2 = _mm256_fmadd_ps(b2, vs, acc2);
        if (R > 3) acc3 = _mm256_fmadd_ps(b3, vs, acc3);
        for (int64_t k = k0 + vec; k < k0 + len; k++) {   /* (K not a multiple of 16 in its last block) */
            const float wv = (float)((q[k / 2] >> ((k & 1) * 4)) & 15) * sc;
            tail[0] += x0[k] * wv;
            if (R > 1) tail[1] += x1[k] * wv;
            if (R > 2) tail[2] += x2[k] * wv;
            if (R > 3) tail[3] += x3[k] * wv;
        }
    }
    out[0] = hsum8(acc0) + tail[0];
    if (R > 1) out[1] = hsum8(acc1) + tail[1];
    if (R > 2) out[2] = hsum8(acc2) + tail[2];
    if (R > 3) out[3] = hsum8(acc3) + tail[3];
}
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
        for (int64_t k = k0; k < k1; k++) blk += x[k] * (float)((q[k / 2] >> ((k & 1) * 4)) & 15);
        acc += blk * j->s[n * nb + b];
    }
    return acc;
}

static void q4_task(void *ctx, int64_t t, int tid) {
    (void)tid;
    const q4job *j = ctx;
    const cuvil_q4_params *p = j->p;
    const int64_t N = p->N, M = p->M, nb = (p->K + p->bs - 1) / p->bs;
    const int64_t n0 = t * Q4_NT, n1 = n0 + Q4_NT < N ? n0 + Q4_NT : N;
    for (int64_t n = n0; n < n1; n++) {
        const float *zs = j->zs + n * nb;
        for (int64_t m = 0; m < M;) {
            float v[4];
            int R = M - m >= 4 ? 4 : 1;
#ifdef Q4_AVX2
            if (R == 4) col_avx2(j, m, 4, n, v);
            else col_avx2(j, m, 1, n, v);
#else
            R = 1;
            v[0] = col_scalar(j, m, n);
#endif
            for (int r = 0; r < R; r++) {
                const float *xs = j->xs + (m + r) * nb;
                float z = 0;
                for (int64_t b = 0; b < nb; b++) z += zs[b] * xs[b];
                j->y[(m + r) * N + n] = v[r] - z;
            }
            m += R;
        }
    }
}

void cuvil_matmul_q4(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales, const float *zs,
                     float *y, void *scratch) {
    const int64_t M = p->M, K = p->K, N = p->N, bs = p->bs, nb = (K + bs - 1) / bs;
    if (M <= 0 || N <= 0) return;
    float *xs = scratch;   /* each row's block sums */
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t k0 = b * bs, k1 = K - k0 < bs ? K : k0 + bs;
            float s = 0;
            for (int64_t k = k0; k < k1; k++) s += x[m * K + k];
            xs[m * nb + b] = s;
        }
    q4job j = {p, x, scales, zs, xs, w, y};
    cuvil_parallel_for((N + Q4_NT - 1) / Q4_NT, q4_task, &j);
}

void cuvil_matmul_q4__scalar(const cuvil_q4_params *p, const float *x, const uint8_t *w, const float *scales,
                             const float *zs, float *y) {
    const int64_t M = p->M, K = p->K, N = p->N, bs = p->bs, nb = (K + bs - 1) / bs;
    q4job j = {p, x, scales, zs, NULL, w, y};
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
