/*
 * recur.c -- CausalConvWithState and LinearAttention (opset 27), step by step as ONNX's
 * reference computes them.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"

void cuvil_f32_causal_conv(int64_t B, int64_t C, int64_t L, int64_t K, int silu, const float *x, const float *w,
                           const float *bias, const float *past, float *y, float *present) {
    const int64_t P = K - 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            const float *xc = x + (b * C + c) * L, *pc = past ? past + (b * C + c) * P : NULL, *wc = w + c * K;
            /* element j of past-then-x */
#define SEQ(j) ((j) < P ? (pc ? pc[(j)] : 0.0f) : xc[(j) - P])
            float *yc = y + (b * C + c) * L;
            for (int64_t t = 0; t < L; t++) {
                float acc = bias ? bias[c] : 0.0f;
                for (int64_t j = 0; j < K; j++) acc += wc[j] * SEQ(t + j);
                yc[t] = silu ? acc / (1.0f + expf(-acc)) : acc;
            }
            if (present)
                for (int64_t j = 0; j < P; j++) present[(b * C + c) * P + j] = SEQ(L + j);
#undef SEQ
        }
}

void cuvil_f32_linear_attention(const cuvil_linear_attention_params *p, const float *q, const float *k, const float *v,
                                const float *past, const float *decay, const float *beta, float *y, float *present,
                                void *scratch) {
    const int64_t dk = p->dk, dv = p->dv, group = p->hq / p->hk;
    float *S = scratch, *vt = S + dk * dv;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->hk; h++) {
            if (past) memcpy(S, past + (b * p->hk + h) * dk * dv, sizeof(float) * (size_t)(dk * dv));
            else memset(S, 0, sizeof(float) * (size_t)(dk * dv));
            for (int64_t t = 0; t < p->T; t++) {
                const int64_t bt = b * p->T + t;
                const float *kt = k + (bt * p->hk + h) * dk, *vv = v + (bt * p->hk + h) * dv;
                if (p->gated)
                    for (int64_t d = 0; d < dk; d++) {
                        const float g = expf(p->decay_w == p->hk ? decay[bt * p->hk + h] : decay[(bt * p->hk + h) * dk + d]);
                        for (int64_t m = 0; m < dv; m++) S[d * dv + m] *= g;
                    }
                if (p->delta) {
                    const float bb = beta[bt * p->beta_w + (p->beta_w == 1 ? 0 : h)];
                    for (int64_t m = 0; m < dv; m++) {
                        float r = 0.0f;
                        for (int64_t d = 0; d < dk; d++) r += S[d * dv + m] * kt[d];
                        vt[m] = bb * (vv[m] - r);
                    }
                } else {
                    memcpy(vt, vv, sizeof(float) * (size_t)dv);
                }
                for (int64_t d = 0; d < dk; d++)
                    for (int64_t m = 0; m < dv; m++) S[d * dv + m] += kt[d] * vt[m];
                for (int64_t r = 0; r < group; r++) {
                    const int64_t hq = h * group + r;
                    const float *qt = q + (bt * p->hq + hq) * dk;
                    float *yt = y + (bt * p->hq + hq) * dv;
                    for (int64_t m = 0; m < dv; m++) {
                        float acc = 0.0f;
                        for (int64_t d = 0; d < dk; d++) acc += qt[d] * S[d * dv + m];
                        yt[m] = p->scale * acc;
                    }
                }
            }
            if (present) memcpy(present + (b * p->hk + h) * dk * dv, S, sizeof(float) * (size_t)(dk * dv));
        }
}
