/* peak.c -- this core's measured float32 FMA peak, for "% of peak" in bench/RESULTS.md (the
 * clock /proc/cpuinfo reports is often not the one the core runs at). Prints one line per ISA
 * the CPU has: "avx2 <GFLOP/s>" (12 independent 8-lane FMA chains) and, where the CPU has
 * AVX-512F, "avx512 <GFLOP/s>" (16 chains of 16 lanes), each the best of 3 runs of ~0.2 s.
 *   cc -O2 bench/peak.c -o peak && ./peak          (the loops are in peak.h) */
#include <stdio.h>

#include "peak.h"

int main(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) printf("avx2 %.1f\n", peak_avx2());
    if (__builtin_cpu_supports("avx512f")) printf("avx512 %.1f\n", peak_avx512());
    return 0;
}
