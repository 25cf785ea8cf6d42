/* weights16.c -- widening the weights a library stores in 16 bits (--precision fp16|bf16) into
 * the float32 layout its nodes read, once per context at create(). F16C converts eight halves
 * an instruction where the target has it (x86-64 AVX2 and AVX-512 targets); elsewhere, and for
 * the tails, the exact scalar conversion. bfloat16 is the upper half of a float32. */
#include "cuvil_rt.h"

#include <string.h>

#if (defined(__F16C__) && defined(__AVX__)) || defined(__AVX2__)
#include <immintrin.h>
#endif

static void widen_f16(float *d, const uint16_t *s, uint64_t n) {
    uint64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
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
