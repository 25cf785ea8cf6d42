/* weights16.c -- float32 <-> 16 bits: widening the weights a library stores in 16 bits
 * (--precision fp16|bf16) into the float32 layout its nodes read, once per context at create(),
 * and the casts between float32 kernels and float16/bfloat16 values. F16C converts eight values
 * an instruction where the target has it (x86-64 AVX2 and AVX-512 targets); bfloat16 is the upper
 * half of a float32, rounded to nearest even in integer lanes. The results are bit for bit the
 * exact scalar conversions' (typed.c), which run elsewhere and for the tails: a block holding a
 * NaN, whose payload the instructions treat otherwise, goes to them too. */
#include "cuvil_rt.h"

#include <string.h>

#if (defined(__F16C__) && defined(__AVX__)) || defined(__AVX2__)
#include <immintrin.h>
#endif

static void widen_f16(float *d, const uint16_t *s, uint64_t n) {
    uint64_t i = 0;
#if defined(__F16C__) && defined(__AVX2__)
    const __m128i inf = _mm_set1_epi16(0x7c00), abs = _mm_set1_epi16(0x7fff);
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(s + i));
        if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, abs), inf))) {   /* a NaN: the scalar's bits */
            for (int k = 0; k < 8; k++) d[i + k] = cuvil_f16_to_f32(s[i + k]);
            continue;
        }
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; i++) d[i] = cuvil_f16_to_f32(s[i]);
}

static void widen_bf16(float *d, const uint16_t *s, uint64_t n) {
    uint64_t i = 0;
#if defined(__AVX2__)
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
#endif
    for (; i < n; i++) {
        uint32_t u = (uint32_t)s[i] << 16;
        memcpy(d + i, &u, sizeof u);
    }
}

/* float32 -> kind's 16 bits by the exact scalar conversion (typed.c), for the tails and for the
 * blocks the vector loops hand back; returns whether a finite value overflowed to an infinity
 * (|x| past the largest finite one by half its step or more: IEEE's overflow). */
static int narrow_scalar(int kind, uint16_t *d, const float *s, uint64_t n) {
    const uint16_t inf = kind == CUVIL_W16_F16 ? 0x7c00u : 0x7f80u;
    int ovf = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, s + i, sizeof u);
        d[i] = kind == CUVIL_W16_F16 ? cuvil_f32_to_f16(s[i]) : cuvil_f32_to_bf16(s[i]);
        ovf |= (d[i] & 0x7fffu) == inf && (u & 0x7f800000u) != 0x7f800000u;
    }
    return ovf;
}

/* float32 -> IEEE half, to nearest even (F16C's rounding-mode immediate: not MXCSR's). A block
 * holding a NaN (its payload), or whose result holds an infinity (was it one?), goes to the
 * scalar conversion, which gives the same bits and the overflow. */
static int narrow_f16(uint16_t *d, const float *s, uint64_t n) {
    uint64_t i = 0;
    int ovf = 0;
#if defined(__F16C__) && defined(__AVX2__)
    const __m128i abs = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(s + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            ovf |= narrow_scalar(CUVIL_W16_F16, d + i, s + i, 8);
            continue;
        }
        const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(d + i), h);
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, abs), inf)))
            ovf |= narrow_scalar(CUVIL_W16_F16, d + i, s + i, 8);
    }
#endif
    return ovf | narrow_scalar(CUVIL_W16_F16, d + i, s + i, n - i);
}

/* float32 -> bfloat16, to nearest even: x + 0x7fff + (bit 16 of x), its upper half (not AVX-512
 * BF16's vcvtneps2bf16, which takes subnormal inputs as zeros); NaN and infinity blocks as in
 * narrow_f16. */
static int narrow_bf16(uint16_t *d, const float *s, uint64_t n) {
    uint64_t i = 0;
    int ovf = 0;
#if defined(__AVX2__)
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i abs = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7f80);
    for (; i + 8 <= n; i += 8) {
        const __m256 xf = _mm256_loadu_ps(s + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(xf, xf, _CMP_UNORD_Q))) {
            ovf |= narrow_scalar(CUVIL_W16_BF16, d + i, s + i, 8);
            continue;
        }
        const __m256i x = _mm256_castps_si256(xf);
        const __m256i r = _mm256_srli_epi32(
            _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(x, 16), one))), 16);
        /* the eight 32-bit lanes (each < 65536) to eight uint16: packus works per 128-bit half */
        const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
        _mm_storeu_si128((__m128i *)(d + i), _mm_packus_epi32(lo, hi));
        if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(_mm256_and_si256(r, abs), inf)))
            ovf |= narrow_scalar(CUVIL_W16_BF16, d + i, s + i, 8);
    }
#endif
    return ovf | narrow_scalar(CUVIL_W16_BF16, d + i, s + i, n - i);
}

int cuvil_narrow16(int kind, const float *src, uint16_t *dst, size_t n) {
    return kind == CUVIL_W16_F16 ? narrow_f16(dst, src, n) : narrow_bf16(dst, src, n);
}

void cuvil_widen16(int kind, const uint16_t *src, float *dst, size_t n) {
    if (kind == CUVIL_W16_F16) widen_f16(dst, src, n);
    else widen_bf16(dst, src, n);
}

void cuvil_weights_expand(unsigned char *dst, unsigned char *x, const unsigned char *src, const cuvil_wseg *segs,
                          int64_t n_segs) {
    for (int64_t k = 0; k < n_segs; k++) {
        const cuvil_wseg *g = &segs[k];
        unsigned char *d = (g->kind & CUVIL_WSEG_TRANSIENT ? x : dst) + g->dst;
        const unsigned char *s = src + g->src;
        switch (g->kind & 3) {
        case CUVIL_WSEG_RAW: memcpy(d, s, g->n); break;
        case CUVIL_WSEG_F16: widen_f16((float *)(void *)d, (const uint16_t *)(const void *)s, g->n); break;
        default: widen_bf16((float *)(void *)d, (const uint16_t *)(const void *)s, g->n); break;
        }
    }
}

/* cuvil_narrow16 / cuvil_widen16 of a whole tensor, split over the bound pool's threads; each
 * thread notes an overflow in its own byte (read after the split, which the pool orders). */
typedef struct cast16_job {
    int kind, narrow;
    const void *src;
    void *dst;
    unsigned char ovf[CUVIL_MAX_THREADS];
} cast16_job;

static void cast16_range(void *ctx, int64_t b, int64_t e, int tid) {
    cast16_job *j = ctx;
    if (j->narrow) {
        if (cuvil_narrow16(j->kind, (const float *)j->src + b, (uint16_t *)j->dst + b, (size_t)(e - b))) j->ovf[tid] = 1;
    } else {
        cuvil_widen16(j->kind, (const uint16_t *)j->src + b, (float *)j->dst + b, (size_t)(e - b));
    }
}

int cuvil_cast16(int kind, int narrow, const void *src, void *dst, size_t n) {
    cast16_job j = {kind, narrow, src, dst, {0}};
    cuvil_parallel_range((int64_t)n, 16384, 64, cast16_range, &j);
    int ovf = 0;
    for (int t = 0; t < CUVIL_MAX_THREADS; t++) ovf |= j.ovf[t];
    return ovf;
}
