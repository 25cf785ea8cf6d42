/* test_kernel_cast16.c -- cuvil_cast between float32 and float16 / bfloat16 (the vector loops
 * of weights16.c: F16C and AVX2 integer lanes, with scalar tails), against references that do
 * not share their code: the C compiler's _Float16 conversions (round to nearest even) for IEEE
 * half, and for bfloat16 the nearer of the two neighbouring bfloat16 values chosen in double
 * arithmetic (ties to the even one). Every half bit pattern is widened; float32 values from
 * every binade, halfway points, subnormals, the overflow boundary and random bits are narrowed,
 * at lengths that leave tails. NaNs: a NaN each way (its bits: the scalar conversion's, on
 * every target). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuvil_rt.h"

static int failures;
#define CHECK(c, ...)                                   \
    do {                                                \
        if (!(c)) {                                     \
            failures++;                                 \
            if (failures < 20) {                        \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);           \
                fputc('\n', stderr);                    \
            }                                           \
        }                                               \
    } while (0)

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t ref_f16(float x) {
    _Float16 h = (_Float16)x;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static float ref_widen_f16(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

/* The bfloat16 nearest x (finite): the truncation and the next one away from zero, chosen by
 * their distance to x in double; a tie goes to the even one. Past the largest finite one the
 * next is infinity, at 2^128 for the distance (IEEE's rounding of an unbounded exponent). */
static uint16_t ref_bf16(float x) {
    const uint32_t u = bits_of(x);
    const uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);   /* |hi| > |lo| (may be inf) */
    const double dx = x, dlo = from_bits((uint32_t)lo << 16);
    const double dhi = (hi & 0x7fff) == 0x7f80 ? copysign(ldexp(1.0, 128), dx) : (double)from_bits((uint32_t)hi << 16);
    const double a = fabs(dx - dlo), b = fabs(dhi - dx);
    if (a < b) return lo;
    if (b < a) return hi;
    return (lo & 1) ? hi : lo;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void test_widen(void) {
    enum { N = 65536 + 5 };   /* every half, then a tail */
    uint16_t *h = malloc(sizeof *h * N);
    float *f = malloc(sizeof *f * N);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    for (int t = 0; t < 2; t++) {
        const int type = t ? CUVIL_T_BF16 : CUVIL_T_F16;
        cuvil_cast(type, CUVIL_T_F32, h, f, N);
        for (int i = 0; i < N; i++) {
            const float want = t ? from_bits((uint32_t)h[i] << 16) : ref_widen_f16(h[i]);
            if (want != want) {   /* a NaN: the scalar's bits */
                const float s = t ? cuvil_bf16_to_f32(h[i]) : cuvil_f16_to_f32(h[i]);
                CHECK(bits_of(f[i]) == bits_of(s), "widen %s NaN %04x: %08x, scalar %08x", t ? "bf16" : "f16", h[i],
                      bits_of(f[i]), bits_of(s));
            } else {
                CHECK(bits_of(f[i]) == bits_of(want), "widen %s %04x: %08x, want %08x", t ? "bf16" : "f16", h[i],
                      bits_of(f[i]), bits_of(want));
            }
        }
    }
    free(h);
    free(f);
}

static void test_narrow(void) {
    enum { N = 1 << 20 };
    float *x = malloc(sizeof *x * (N + 3));
    uint16_t *y = malloc(sizeof *y * (N + 3));
    int n = 0;
    /* halfway points and their neighbours, every binade of both types, both signs */
    for (int e = 1; e < 255 && n < N - 64; e++)
        for (int s = 0; s < 2; s++)
            for (uint32_t m = 0; m < 8; m++) {
                const uint32_t base = ((uint32_t)s << 31) | ((uint32_t)e << 23);
                const uint32_t mids[] = {0x1000u | (m << 13), 0x8000u | (m << 16)};   /* f16 and bf16 ties */
                for (int k = 0; k < 2; k++) {
                    x[n++] = from_bits(base | mids[k]);
                    x[n++] = from_bits(base | (mids[k] + 1));
                    x[n++] = from_bits(base | (mids[k] - 1));
                }
            }
    const float special[] = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e30f, INFINITY, -INFINITY,
                             5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f, 3.4e38f, from_bits(1), from_bits(0x807fffffu)};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) x[n++] = special[k];
    while (n < N) {   /* random finite bits */
        uint32_t u = rnd() ^ (rnd() << 16);
        if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x40000000u;
        x[n++] = from_bits(u);
    }
    x[n++] = from_bits(0x7fc00001u);   /* NaNs in the tail and (below) in a vector */
    x[n++] = from_bits(0xff812345u);
    x[100] = from_bits(0x7f800001u);
    for (int t = 0; t < 2; t++) {
        const int type = t ? CUVIL_T_BF16 : CUVIL_T_F16;
        cuvil_cast(CUVIL_T_F32, type, x, y, n);
        for (int i = 0; i < n; i++) {
            uint16_t want;
            if (x[i] != x[i]) want = t ? cuvil_f32_to_bf16(x[i]) : cuvil_f32_to_f16(x[i]);   /* the scalar's NaN */
            else want = t ? ref_bf16(x[i]) : ref_f16(x[i]);
            CHECK(y[i] == want, "narrow %s %08x (%g): %04x, want %04x", t ? "bf16" : "f16", bits_of(x[i]), x[i], y[i],
                  want);
        }
    }
    free(x);
    free(y);
}

/* cuvil_narrow16's flag: set by a finite value that became an infinity (at 65520 for float16,
 * 0x7f7f8000's bits for bfloat16), in a vector block or in the tail; not by infinities, NaNs
 * or values just below the threshold. */
static void test_overflow_flag(void) {
    enum { N = 21 };   /* two blocks of 8 and a tail of 5 */
    float x[N];
    uint16_t y[N];
    const float below[2] = {65519.996f, from_bits(0x7f7f7fffu)}, at[2] = {65520.0f, from_bits(0x7f7f8000u)};
    for (int t = 0; t < 2; t++) {
        const int kind = t ? CUVIL_W16_BF16 : CUVIL_W16_F16;
        for (int pos = 0; pos < N; pos++) {
            for (int i = 0; i < N; i++) x[i] = (float)i - 10.0f;
            x[3] = INFINITY;
            x[N - 1] = -INFINITY;
            x[7] = NAN;
            CHECK(!cuvil_narrow16(kind, x, y, N), "%s: flag without an overflow", t ? "bf16" : "f16");
            if (pos == 3 || pos == 7 || pos == N - 1) continue;
            x[pos] = below[t];
            CHECK(!cuvil_narrow16(kind, x, y, N), "%s: flag just below the threshold at %d", t ? "bf16" : "f16", pos);
            x[pos] = (pos & 1) ? -at[t] : at[t];
            CHECK(cuvil_narrow16(kind, x, y, N), "%s: no flag for an overflow at %d", t ? "bf16" : "f16", pos);
        }
    }
}

int main(void) {
    test_widen();
    test_narrow();
    test_overflow_flag();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("test_kernel_cast16: ok\n");
    return 0;
}
