/*
 * gemm_bench.c -- GFLOP/s of every GEMM microkernel this runtime has, and of the blocked GEMM
 * with each, as a % of this core's measured FMA peak. Built as build/bin/cuvil-bench-gemm
 * (links the host target's runtime); not a test: run it by hand or from `make bench`.
 *
 *   cuvil-bench-gemm [--quick]
 *   cuvil-bench-gemm --shape M N K [THREADS [PACKED_B]]   (one product; see one_shape)
 *
 * Peak: independent FMA chains of the widest vectors each ISA has (8 lanes AVX2, 16 AVX-512),
 * timed for ~0.2 s; the best of 3. Rows:
 *   ukernel  the microkernel alone on L1-resident packed panels (kc = the blocking's KC)
 *   rows     its variant reading A's rows in place (the channels-last direct convolution's),
 *            MR rows of 3 segments (a 3x3 conv's kernel rows), L1-resident
 *   square   C = A B, M = N = K (64 ... 1024), the whole driver: packing, blocking, edges;
 *            the median GFLOP/s of calls timed one by one
 *   square, B packed   the same from 256 up with B packed ahead of time, as a MatMul's
 *            weights are (AVX-512: A's rows then read in place, gemm.c)
 *   layer    the products of the benchmark models' convolutions as im2col GEMMs
 *            (M = output channels, N = output pixels, K = input channels x taps), one thread;
 *            A (the weights) dense, packed on every call
 *   layer, pixels as rows   the same product as the channels-last lowering runs it: the
 *            pixels as the rows (M and N swapped), the weights B packed ahead of time, as a
 *            model's are (printed with the layer's M, N, K)
 *   square, 2 threads   the squares of 256 and more on a pool of 2 threads (the x86
 *            kernels): % of twice the one-core peak, the per-thread efficiency
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../runtime/kernels/rt_int.h"
#if defined(__x86_64__)
#include "peak.h"
#include "bench_pool.h"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *falloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float))) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    float *f = (float *)p;
    for (size_t i = 0; i < n; i++) f[i] = (float)((i * 7919u) % 1000u) * 1e-3f - 0.5f;
    return f;
}

/* The microkernel alone, or (rows) its variant reading A's rows in place: MR rows of kc floats
 * as 3 segments, the rows 4 KiB apart (an image's), all L1-resident. */
static double time_ukernel(const cuvil_gemm_ukernel_desc *uk, int64_t kc, int rows_variant) {
    enum { SEGS = 3, STRIDE = 1024 };
    float *a = falloc((size_t)(uk->mr * (kc > STRIDE ? kc : STRIDE))), *b = falloc((size_t)(kc * uk->nr));
    float *c = falloc((size_t)(uk->mr * uk->nr));
    const float *rows[SEGS * 16];
    size_t seglen[SEGS];
    for (int s = 0; s < SEGS && uk->mr <= 16; s++) {
        seglen[s] = (size_t)(kc / SEGS + (s < kc % SEGS));
        for (int i = 0; i < uk->mr; i++) rows[s * uk->mr + i] = a + i * STRIDE + s * (kc / SEGS + 1);
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        const long iters = 200000000 / (kc * uk->mr * uk->nr) + 1;
        double t0 = now();
        for (long it = 0; it < iters; it++)
            if (rows_variant)
                uk->rows(SEGS, seglen, rows, b, c, (size_t)uk->nr, (size_t)uk->mr, (size_t)uk->nr, c, (size_t)uk->nr,
                         NULL);
            else
                uk->fn((size_t)kc, a, b, c, (size_t)uk->nr, (size_t)uk->mr, (size_t)uk->nr, c, (size_t)uk->nr, NULL);
        double g = 2.0 * (double)kc * uk->mr * uk->nr * (double)iters / (now() - t0) * 1e-9;
        if (g > best) best = g;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* The pool of the two-thread rows: one for all of a kernel's rows, made before them and kept, as
 * a model's context keeps its own (a pool made for each size left the worker on the caller's CPU
 * for some of them: those rows ran at one thread's speed), its scratch stride g_pool_stride. */
static cuvil_pool *g_pool;
static size_t g_pool_stride;

/* median GFLOP/s of C[M,N] = A[M,K] B[K,N] through the driver, on one thread or (threads > 1)
 * on g_pool: the driver splits the product as in a model */
static double time_gemm_b(const cuvil_gemm_blocking *blk, int64_t M, int64_t N, int64_t K, int quick, int threads,
                          int packed_b) {
    float *A = falloc((size_t)(M * K)), *B = falloc((size_t)(K * N)), *C = falloc((size_t)(M * N));
    cuvil_gemm_params p;
    memset(&p, 0, sizeof p);
    p.M = M;
    p.N = N;
    p.K = K;
    p.lda = K;
    p.ldb = N;
    p.ldc = N;
    p.alpha = 1.0f;
    p.batch = 1;
    if (packed_b) {   /* B packed ahead of time, as a MatMul's or Gemm's weights are */
        p.packed_nr = blk->uk->nr;
        p.packed_kc = blk->kc;
        float *bp = falloc(cuvil_f32_gemm_packed_b_floats(&p));
        cuvil_f32_gemm_pack_b(&p, B, bp);
        free(B);
        B = bp;
    }
    const size_t per = threads > 1 ? g_pool_stride : (cuvil_f32_gemm_scratch_size_ex(&p, blk) + 127) / 64 * 64;
    if (threads > 1 && (!g_pool || cuvil_pool_threads(g_pool) != threads ||
                        cuvil_f32_gemm_scratch_size_ex(&p, blk) > g_pool_stride)) {
        fprintf(stderr, "no thread pool of %d for this size\n", threads);
        exit(2);
    }
    void *scratch = falloc(per * (size_t)threads / sizeof(float) + 16);
    const cuvil_pool *prev = cuvil_pool_bind(threads > 1 ? g_pool : NULL);
    const double flop = 2.0 * (double)M * (double)N * (double)K;
    /* each call timed alone, the median of them (as the models' medians): a batch's mean
     * would carry the calls where this VM left one of two threads waiting (p90 at half speed) */
    enum { MAXC = 512 };
    static double g[MAXC];
    int calls = (int)((quick ? 1e9 : 4e9) / flop) + 1;
    if (calls < 15) calls = 15;
    if (calls > MAXC) calls = MAXC;
    cuvil_f32_gemm_ex(&p, A, B, NULL, C, scratch, blk); /* warm */
    /* CUVIL_BENCH_FLUSH=MB: before each call (untimed) that many MB are read and written, so
     * that B, A and C come from memory as a model's weights do (each layer's are read once a run) */
    const char *fl = getenv("CUVIL_BENCH_FLUSH");
    const size_t flush_n = fl && atoll(fl) > 0 ? (size_t)atoll(fl) << 18 : 0;
    float *flush = flush_n ? falloc(flush_n) : NULL;
    for (int r = 0; r < calls; r++) {
        for (size_t i = 0; i < flush_n; i += 16) flush[i] += 1.0f;
        double t0 = now();
        cuvil_f32_gemm_ex(&p, A, B, NULL, C, scratch, blk);
        g[r] = flop / (now() - t0) * 1e-9;
    }
    cuvil_pool_bind(prev);
    free(flush);
    for (int i = 1; i < calls; i++) /* insertion sort for the median */
        for (int j = i; j > 0 && g[j] < g[j - 1]; j--) {
            double t = g[j];
            g[j] = g[j - 1];
            g[j - 1] = t;
        }
    free(A);
    free(B);
    free(C);
    free(scratch);
    return g[calls / 2];
}

static double time_gemm(const cuvil_gemm_blocking *blk, int64_t M, int64_t N, int64_t K, int quick, int threads) {
    return time_gemm_b(blk, M, N, K, quick, threads, 0);
}

static int can_run(const cuvil_gemm_ukernel_desc *uk) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (strstr(uk->name, "avx512"))
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (strstr(uk->name, "avx2")) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    (void)uk;
    return 1;
}

/* --shape M N K [threads [packed]]: one product through the default blocking (its microkernel
 * and the target's mc/kc/nc, each overridable by CUVIL_BENCH_MC/KC/NC), B dense or (packed 1)
 * packed ahead of time; GFLOP/s and % of threads x the one-core peak. */
static int one_shape(int argc, char **argv, double peak) {
    if (argc < 5) {
        fprintf(stderr, "usage: cuvil-bench-gemm --shape M N K [THREADS [PACKED_B]]\n");
        return 2;
    }
    const int64_t M = atoll(argv[2]), N = atoll(argv[3]), K = atoll(argv[4]);
    const int threads = argc > 5 ? atoi(argv[5]) : 1, packed = argc > 6 ? atoi(argv[6]) : 0;
    if (M <= 0 || N <= 0 || K <= 0 || threads < 1 || threads > CUVIL_MAX_THREADS) {
        fprintf(stderr, "cuvil-bench-gemm: bad shape or thread count\n");
        return 2;
    }
    cuvil_gemm_blocking blk = *cuvil_gemm_default_blocking();
    const char *e;
    if ((e = getenv("CUVIL_BENCH_MC")) && atoll(e) > 0) blk.mc = atoll(e);
    if ((e = getenv("CUVIL_BENCH_KC")) && atoll(e) > 0) blk.kc = atoll(e);
    if ((e = getenv("CUVIL_BENCH_NC")) && atoll(e) > 0) blk.nc = atoll(e);
    if (threads > 1) {
        cuvil_gemm_params q;
        memset(&q, 0, sizeof q);
        q.M = M, q.N = N, q.K = K, q.lda = K, q.ldb = q.ldc = N, q.batch = 1;
        g_pool_stride = (cuvil_f32_gemm_scratch_size_ex(&q, &blk) + 127) / 64 * 64;
        g_pool = cuvil_pool_create(threads, g_pool_stride, pool_alloc, pool_free, NULL);
        if (!g_pool || cuvil_pool_threads(g_pool) != threads) {
            fprintf(stderr, "cuvil-bench-gemm: no pool of %d threads\n", threads);
            return 2;
        }
    }
    const double g = time_gemm_b(&blk, M, N, K, 0, threads, packed);
    printf("| kernel, blocking | threads, B | M | N | K | GFLOP/s | %% peak |\n|---|---|---|---|---|---|---|\n");
    printf("| %s mc=%lld kc=%lld nc=%lld | %d%s | %lld | %lld | %lld | %.1f | %.1f |\n", blk.uk->name, (long long)blk.mc,
           (long long)blk.kc, (long long)blk.nc, threads, packed ? ", B packed" : ", B dense",
           (long long)M, (long long)N, (long long)K, g, peak > 0 ? 100 * g / (threads * peak) : 0.0);
    cuvil_pool_destroy(g_pool);
    g_pool = NULL;
    return 0;
}

int main(int argc, char **argv) {
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    const int shape = argc > 1 && !strcmp(argv[1], "--shape");
    double peak = 0;
    const char *peak_isa = "none measured (portable build)";
#if CUVIL_HAVE_AVX2
    const double p2 = peak_avx2();
    printf("peak AVX2 FMA: %.1f GFLOP/s\n", p2);
    peak = p2;
    peak_isa = "AVX2";
#endif
#if CUVIL_HAVE_AVX512
    const double p5 = peak_avx512();
    printf("peak AVX-512 FMA: %.1f GFLOP/s\n", p5);
    if (p5 > peak) {
        peak = p5;
        peak_isa = "AVX-512";
    }
#endif
    printf("%% of peak: of the %s peak, %.1f GFLOP/s (one core)\n\n", peak_isa, peak);
    if (shape) return one_shape(argc, argv, peak);
    printf("| kernel | case | M | N | K | GFLOP/s | %% peak |\n|---|---|---|---|---|---|---|\n");
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    static const int64_t squares[] = {64, 128, 256, 384, 512, 768, 1024};
    /* ResNet-18/50 and MobileNetV2 convolutions as GEMMs: (Cout, OH*OW, Cin*KH*KW) */
    static const int64_t layers[][3] = {
        {64, 12544, 147},  {64, 3136, 576},  {128, 784, 1152}, {256, 196, 2304}, {512, 49, 4608},
        {256, 3136, 64},   {64, 3136, 256},  {512, 784, 128},  {1024, 196, 256}, {2048, 49, 512},
        {96, 12544, 16},   {144, 3136, 24},  {32, 784, 192},   {960, 49, 160},   {1280, 49, 320},
    };
    for (int u = 0; u < cuvil_f32_gemm_n_ukernels; u++) {
        const cuvil_gemm_ukernel_desc *uk = &cuvil_f32_gemm_ukernels[u];
        if (!can_run(uk)) {
            printf("| %s | skipped: this CPU cannot execute it | | | | | |\n", uk->name);
            continue;
        }
        cuvil_gemm_blocking blk = *def;
        blk.uk = uk;
        if (uk != def->uk) { /* the portable/AVX2 kernels with their own target's blocking */
            blk.mc = uk->mr == 6 ? 144 : 128;
            blk.kc = 256;
            blk.nc = 1024;
        }
        double g = time_ukernel(uk, blk.kc, 0);
        printf("| %s | ukernel | %d | %d | %lld | %.1f | %.1f |\n", uk->name, uk->mr, uk->nr, (long long)blk.kc, g,
               100 * g / peak);
        if (uk->rows && uk->mr <= 16) {
            g = time_ukernel(uk, blk.kc, 1);
            printf("| %s | rows | %d | %d | %lld | %.1f | %.1f |\n", uk->name, uk->mr, uk->nr, (long long)blk.kc, g,
                   100 * g / peak);
        }
        for (size_t i = 0; i < sizeof squares / sizeof squares[0]; i++) {
            if (quick && squares[i] > 512) break;
            g = time_gemm(&blk, squares[i], squares[i], squares[i], quick, 1);
            printf("| %s | square | %lld | %lld | %lld | %.1f | %.1f |\n", uk->name, (long long)squares[i],
                   (long long)squares[i], (long long)squares[i], g, 100 * g / peak);
            if (squares[i] < 256) continue;
            g = time_gemm_b(&blk, squares[i], squares[i], squares[i], quick, 1, 1);
            printf("| %s | square, B packed | %lld | %lld | %lld | %.1f | %.1f |\n", uk->name, (long long)squares[i],
                   (long long)squares[i], (long long)squares[i], g, 100 * g / peak);
        }
        for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
            if (quick && i >= 5) break;
            g = time_gemm(&blk, layers[i][0], layers[i][1], layers[i][2], quick, 1);
            printf("| %s | layer | %lld | %lld | %lld | %.1f | %.1f |\n", uk->name, (long long)layers[i][0],
                   (long long)layers[i][1], (long long)layers[i][2], g, 100 * g / peak);
            g = time_gemm_b(&blk, layers[i][1], layers[i][0], layers[i][2], quick, 1, 1);
            printf("| %s | layer, pixels as rows | %lld | %lld | %lld | %.1f | %.1f |\n", uk->name,
                   (long long)layers[i][0], (long long)layers[i][1], (long long)layers[i][2], g, 100 * g / peak);
        }
        /* two threads (the machines here have 2 cores): % of twice the one-core peak */
        if (strstr(uk->name, "avx")) {
            cuvil_gemm_params big;
            memset(&big, 0, sizeof big);
            big.M = big.N = big.K = big.lda = big.ldb = big.ldc = squares[sizeof squares / sizeof squares[0] - 1];
            big.batch = 1;
            g_pool_stride = (cuvil_f32_gemm_scratch_size_ex(&big, &blk) + 127) / 64 * 64;
            g_pool = cuvil_pool_create(2, g_pool_stride, pool_alloc, pool_free, NULL);
            if (!g_pool || cuvil_pool_threads(g_pool) != 2) {
                printf("| %s | square, 2 threads: no pool of 2 threads here | | | | | |\n", uk->name);
                cuvil_pool_destroy(g_pool);
                g_pool = NULL;
            }
            for (size_t i = 0; g_pool && i < sizeof squares / sizeof squares[0]; i++) {
                if (squares[i] < 256 || (quick && squares[i] > 512)) continue;
                g = time_gemm(&blk, squares[i], squares[i], squares[i], quick, 2);
                printf("| %s | square, 2 threads | %lld | %lld | %lld | %.1f | %.1f |\n", uk->name, (long long)squares[i],
                       (long long)squares[i], (long long)squares[i], g, 100 * g / (2 * peak));
            }
            cuvil_pool_destroy(g_pool);
            g_pool = NULL;
        }
        fflush(stdout);
    }
    return 0;
}
