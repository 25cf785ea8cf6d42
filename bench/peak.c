/* peak.c -- this core's measured float32 FMA peak: 12 independent AVX2 FMA chains (enough to
 * cover FMA latency x 2 ports), timed over ~0.3 s. Prints GFLOP/s. Used by bench.py for
 * "% of peak", since the clock /proc/cpuinfo reports is often not the one the core runs at.
 *   cc -O2 -mavx2 -mfma bench/peak.c -o peak && ./peak */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    /* twelve named accumulators, so they stay in registers */
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    __m256 c0 = _mm256_set1_ps(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
           c10 = c0, c11 = c0;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        long iters = 20000000;
        double t0 = now();
        for (long it = 0; it < iters; it++) {
#define F(c) c = _mm256_fmadd_ps(c, a, b)
            F(c0); F(c1); F(c2); F(c3); F(c4); F(c5); F(c6); F(c7); F(c8); F(c9); F(c10); F(c11);
            __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
        }
        double dt = now() - t0;
        double gflops = (double)iters * 12 * 8 * 2 / dt / 1e9;
        if (gflops > best) best = gflops;
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float sink = _mm256_cvtss_f32(s);
    printf("%.1f\n", best + (double)(sink * 0.0f));
    return 0;
}
