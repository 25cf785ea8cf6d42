/* peak.h -- one core's measured float32 FMA peak per ISA (bench/peak.c prints it; the GEMM
 * microbenchmark bench/gemm_bench.c divides by it). Every accumulator goes through an empty asm
 * statement each iteration: otherwise the compiler may compute the chains it can see are unused
 * until the end outside the timed loop (an earlier version did, and reported 1.5x the real
 * peak). */
#ifndef CUVIL_BENCH_PEAK_H
#define CUVIL_BENCH_PEAK_H

#include <immintrin.h>
#include <time.h>

static inline double peak_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((target("avx2,fma"))) static inline double peak_avx2(void) {
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
           c9 = c0, c10 = c0, c11 = c0;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        const long iters = 10000000;
        const double t0 = peak_now();
        for (long it = 0; it < iters; it++) {
#define F(c) c = _mm256_fmadd_ps(c, a, b)
            F(c0); F(c1); F(c2); F(c3); F(c4); F(c5); F(c6); F(c7); F(c8); F(c9); F(c10); F(c11);
#undef F
            __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
            __asm__ volatile("" : "+x"(c6), "+x"(c7), "+x"(c8), "+x"(c9), "+x"(c10), "+x"(c11));
        }
        const double g = (double)iters * 12 * 8 * 2 / (peak_now() - t0) * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

__attribute__((target("avx512f"))) static inline double peak_avx512(void) {
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
           c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        const long iters = 6000000;
        const double t0 = peak_now();
        for (long it = 0; it < iters; it++) {
#define F(c) c = _mm512_fmadd_ps(c, a, b)
            F(c0); F(c1); F(c2); F(c3); F(c4); F(c5); F(c6); F(c7);
            F(c8); F(c9); F(c10); F(c11); F(c12); F(c13); F(c14); F(c15);
#undef F
            __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7));
            __asm__ volatile("" : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14), "+v"(c15));
        }
        const double g = (double)iters * 16 * 16 * 2 / (peak_now() - t0) * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

#endif /* CUVIL_BENCH_PEAK_H */
