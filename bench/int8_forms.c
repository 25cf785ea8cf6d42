/* int8_forms.c -- one core's multiply-add rate of the two AVX2 integer forms, 12 independent
 * chains each, for bench/RESULTS.md:
 *   exact:      vpmaddwd + vpaddd              (Cuvil's AVX2 kernel: 16 multiply-adds a pair,
 *                                               on operands widened to 16 bits)
 *   saturating: vpmaddubsw + vpmaddwd (by 1) + vpaddd   (MLAS's AVX2 kernel: 32 a triple; the
 *                                               int16 pair sums saturate on ordinary weights)
 * Each the best of 3 runs of ~0.3 s, in G multiply-adds/s.
 *   cc -O2 -mavx2 bench/int8_forms.c -o int8_forms && ./int8_forms */
#include <immintrin.h>
#include <stdio.h>

#include "peak.h"

#define L12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ZERO(k) __m256i c##k = _mm256_setzero_si256();
#define KEEP(k) __asm__ volatile("" : "+x"(c##k), "+x"(a));   /* (each chain live, a not hoisted) */
#define SUM(k) s += _mm256_extract_epi32(c##k, 0);

static double form(int saturating) {
    __m256i a = _mm256_set1_epi16(3);
    const __m256i b = _mm256_set1_epi16(5), ones = _mm256_set1_epi16(1);
    double best = 0;
    int s = 0;
    for (int rep = 0; rep < 3; rep++) {
        L12(ZERO)
        const long iters = 30000000;
        const double t0 = peak_now();
        if (saturating) {
            for (long i = 0; i < iters; i++) {
#define S(k) c##k = _mm256_add_epi32(c##k, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones)); KEEP(k)
                L12(S)
#undef S
            }
        } else {
            for (long i = 0; i < iters; i++) {
#define S(k) c##k = _mm256_add_epi32(c##k, _mm256_madd_epi16(a, b)); KEEP(k)
                L12(S)
#undef S
            }
        }
        const double g = (double)iters * 12 * (saturating ? 32 : 16) / (peak_now() - t0) * 1e-9;
        best = g > best ? g : best;
        L12(SUM)
    }
    return best + 0.0 * s;
}

int main(void) {
    printf("exact vpmaddwd+vpaddd %.1f\n", form(0));
    printf("saturating vpmaddubsw+vpmaddwd+vpaddd %.1f\n", form(1));
    return 0;
}
