/* loss.c -- ONNX's NegativeLogLikelihoodLoss (cuvil_rt.h). Sums in double. */
#include "../rt_int.h"

int cuvil_f32_nll_loss(const float *x, int idx_t, const void *t, const float *w, int64_t n, int64_t c, int64_t d,
                       int reduction, int has_ignore, int64_t ignore, float *y) {
    double sum = 0, wsum = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            const int64_t cls = cuvil_ld_index(idx_t, t, k);
            float l = 0.0f;
            if (!(has_ignore && cls == ignore)) {
                if (cls < 0 || cls >= c) return 1;
                const float wt = w ? w[cls] : 1.0f;
                l = -x[(i * c + cls) * d + j] * wt;
                wsum += wt;
            }
            if (reduction == CUVIL_LOSS_NONE) y[k] = l;
            else sum += l;
        }
    if (reduction == CUVIL_LOSS_SUM) y[0] = (float)sum;
    else if (reduction == CUVIL_LOSS_MEAN) y[0] = (float)(sum / wsum);   /* all ignored: 0/0, NaN, as ONNX's reference */
    return 0;
}
