/*
 * test_kernel_q4.c -- the 4-bit-weight product (cuvil_matmul_q4, and its portable reference
 * cuvil_matmul_q4__scalar) against a naive double loop written here from MatMulNBits' reading
 * of the weights: W[k][n] = q * scale - zs, q the nibble of byte k/2 of column n's row (low
 * first). Edge shapes: K a multiple of 16 or not (the last block partial), K below one block,
 * block sizes 16..256, rows 1..37 (the four-row path and its remainder; from 24 rows the blocked
 * GEMM on W dequantized a block at a time, K blocks starting at odd k), N around the 32-column
 * task and the GEMM's panels, a pool of 3 threads; all 16 nibble values and negative scales.
 */
#include "kernel_test_util.h"

static void run_case(int64_t M, int64_t K, int64_t N, int64_t bs, int threads) {
    const int64_t nb = (K + bs - 1) / bs, kpad = nb * bs;
    uint8_t *w = ktu_alloc((size_t)(N * kpad / 2));
    float *x = ktu_falloc((size_t)(M * K)), *s = ktu_falloc((size_t)(N * nb)), *zs = ktu_falloc((size_t)(N * nb));
    float *y = ktu_falloc((size_t)(M * N) + 1), *y2 = ktu_falloc((size_t)(M * N) + 1);
    double *ref = ktu_alloc(sizeof(double) * (size_t)(M * N + 1));
    for (int64_t i = 0; i < N * kpad / 2; i++) w[i] = (uint8_t)ktu_u32();
    ktu_fill(x, (size_t)(M * K), -2, 2);
    for (int64_t i = 0; i < N * nb; i++) s[i] = ktu_uniform(-0.2f, 0.2f), zs[i] = s[i] * (float)(ktu_u32() % 16);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) {
                const int q = (w[n * (kpad / 2) + k / 2] >> ((k % 2) * 4)) & 15;
                acc += (double)x[m * K + k] * ((double)q * s[n * nb + k / bs] - zs[n * nb + k / bs]);
            }
            ref[m * N + n] = acc;
        }
    cuvil_q4_params p = {M, K, N, bs};
    /* a slice of scratch per thread, as a context gives (the many-row GEMM's blocks are per thread) */
    const size_t stride = (cuvil_matmul_q4_scratch_size(M, K, bs) + 63) / 64 * 64;
    void *scratch = ktu_alloc(stride * (size_t)threads);
    cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, stride, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
    const cuvil_pool *prev = cuvil_pool_bind(pool);
    cuvil_matmul_q4(&p, x, w, s, zs, y, scratch);
    cuvil_pool_bind(prev);
    cuvil_pool_destroy(pool);
    cuvil_matmul_q4__scalar(&p, x, w, s, zs, y2);
    /* float32 sums of K terms of up to 2 * 15 * 0.2 against double */
    const double atol = 1e-5 * (double)K + 1e-5;
    ktu_check(y, ref, (size_t)(M * N), 1e-4, atol, "q4 M=%lld K=%lld N=%lld bs=%lld threads=%d", (long long)M, (long long)K,
              (long long)N, (long long)bs, threads);
    ktu_check(y2, ref, (size_t)(M * N), 1e-4, atol, "q4 scalar M=%lld K=%lld N=%lld bs=%lld", (long long)M, (long long)K,
              (long long)N, (long long)bs);
    free(w), free(x), free(s), free(zs), free(y), free(y2), free(ref), free(scratch);
}

int main(void) {
    setenv("CUVIL_OVERSUBSCRIBE", "1", 1);
    static const int64_t Ks[] = {16, 40, 64, 100, 256, 1000};
    static const int64_t bss[] = {16, 32, 128, 256};
    static const int64_t Ms[] = {1, 3, 4, 5, 9, 24, 37};   /* (from 24: W's blocks dequantized for the GEMM) */
    static const int64_t Ns[] = {1, 31, 33, 70};
    for (size_t a = 0; a < sizeof Ks / sizeof *Ks; a++)
        for (size_t b = 0; b < sizeof bss / sizeof *bss; b++)
            for (size_t c = 0; c < sizeof Ms / sizeof *Ms; c++)
                for (size_t d = 0; d < sizeof Ns / sizeof *Ns; d++)
                    run_case(Ms[c], Ks[a], Ns[d], bss[b], (c + d) % 2 ? 3 : 1);
    return ktu_finish("test_kernel_q4");
}
