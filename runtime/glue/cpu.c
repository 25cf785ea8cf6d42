/* cpu.c -- does this CPU have the features a model's code was built for?
 *
 * A model built for x86_64-avx512 executes AVX-512 instructions; on a CPU without them the
 * process dies of SIGILL, with no message. So every model's create() asks first
 * (cuvil_rt_cpu_lacks with its target's feature list, src/codegen/targets.inc) and refuses
 * with a message naming the target and the feature. This file, and create() itself, are
 * compiled for the baseline ISA (CUVIL_RT_BASELINE) whatever the target's flags, so that
 * nothing before the answer can be an instruction the CPU lacks. (On RISC-V there is no such
 * attribute in GCC 12: the check is built with the target's -march=rv64gcv, which GCC 12 never
 * uses for plain C; a compiler that vectorises for RVV could put a vector instruction first.)
 *
 * x86-64: CPUID says what the processor implements, XGETBV what the operating system saves
 * on a context switch (AVX needs the YMM state, AVX-512 the opmask and ZMM states too); a
 * feature counts only when both agree. RISC-V (Linux): the V extension from the auxiliary
 * vector. */
#include "cuvil_rt.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* CPUID by hand, not <cpuid.h>: its static inline functions, with this file's ISA flags, are not
 * inlined into a no-avx caller but compiled out of line with those flags. */
CUVIL_RT_BASELINE static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

/* XCR0's bits: 1 SSE, 2 AVX (YMM upper halves), 5 opmask, 6 ZMM upper halves, 7 ZMM16-31. */
#define XCR0_AVX 0x6u
#define XCR0_AVX512 0xe6u

CUVIL_RT_BASELINE static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* 1: the CPU and the OS support feature name (n bytes); 0: not; -1: a name this file does
 * not know (a target table that names one is a bug, reported as missing). */
CUVIL_RT_BASELINE static int has_feature(const char *name, size_t n) {
    unsigned r0[4], r1[4] = {0}, r7[4] = {0}, r71[4] = {0};
    cpuid(0, 0, r0);   /* r0[0]: the highest basic leaf */
    if (r0[0] >= 1) cpuid(1, 0, r1);
    if (r0[0] >= 7) cpuid(7, 0, r7);
    if (r0[0] >= 7 && r7[0] >= 1) cpuid(7, 1, r71);   /* r7[0]: the highest subleaf of leaf 7 */
    const unsigned c1 = r1[2];
    const int osxsave = (c1 >> 27) & 1;
    const uint64_t x = osxsave ? xcr0() : 0;
    const int os_avx = (x & XCR0_AVX) == XCR0_AVX, os_avx512 = (x & XCR0_AVX512) == XCR0_AVX512;
    static const struct {
        const char *name;
        int leaf;        /* 1: CPUID.1 ECX; 7: CPUID.7.0 EBX; 70: CPUID.7.0 ECX; 71: CPUID.7.1 EAX */
        int bit;
        int avx512;      /* needs the AVX-512 OS state (else the AVX state) */
    } table[] = {
        {"avx", 1, 28, 0},      {"fma", 1, 12, 0},      {"f16c", 1, 29, 0},     {"avx2", 7, 5, 0},
        {"avx512f", 7, 16, 1},  {"avx512dq", 7, 17, 1}, {"avx512bw", 7, 30, 1}, {"avx512vl", 7, 31, 1},
        {"avx512vnni", 70, 11, 1}, {"avxvnni", 71, 4, 0}, {"avx512bf16", 71, 5, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].name) != n || memcmp(table[i].name, name, n)) continue;
        const int lf = table[i].leaf;
        const unsigned reg = lf == 1 ? c1 : lf == 7 ? r7[1] : lf == 70 ? r7[2] : r71[0];
        const int cpu = (reg >> table[i].bit) & 1, avx = (c1 >> 28) & 1;
        return cpu && avx && (table[i].avx512 ? os_avx512 && os_avx : os_avx);
    }
    return -1;
}
#elif defined(__riscv) && defined(__linux__)
#include <sys/auxv.h>

static int has_feature(const char *name, size_t n) {
    if (n == 3 && !memcmp(name, "rvv", 3)) return (int)((getauxval(AT_HWCAP) >> ('V' - 'A')) & 1);
    return -1;
}
#else
/* No way to ask here: a build that names features cannot be checked, so it is refused. */
static int has_feature(const char *name, size_t n) {
    (void)name;
    (void)n;
    return -1;
}
#endif

/* The first feature of the space-separated list this CPU lacks (a pointer to its name, len
 * bytes in *len, inside `features`), or NULL when it has them all. */
CUVIL_RT_BASELINE const char *cuvil_rt_cpu_lacks(const char *features, size_t *len) {
    for (const char *p = features; p && *p;) {
        while (*p == ' ') p++;
        size_t n = 0;
        while (p[n] && p[n] != ' ') n++;
        if (n && has_feature(p, n) != 1) {
            if (len) *len = n;
            return p;
        }
        p += n;
    }
    return NULL;
}
