/*
 * tfidf.c -- ONNX TfIdfVectorizer over integer tokens (cuvil_tfidf): counts of the table's
 * n-grams in each row, at every skip distance, with TF, IDF or TF-IDF weighting. A sequence
 * is compared with each n-gram of its length (the table is small next to a row's sequences).
 */
#include <string.h>

#include "../rt_int.h"

static int64_t tok(const cuvil_tfidf_params *p, const void *x, int64_t i) {
    return p->x_i32 ? (int64_t)((const int32_t *)x)[i] : ((const int64_t *)x)[i];
}

void cuvil_tfidf(const cuvil_tfidf_params *p, const void *x, float *y) {
    for (int64_t r = 0; r < p->rows; r++) {
        float *yr = y + r * p->out_size;
        memset(yr, 0, sizeof(float) * (size_t)p->out_size);
        const int64_t base = r * p->C;
        for (int64_t d = 1; d <= p->max_skip + 1; d++) {
            const int64_t n_lo = d == 1 ? p->min_n : (p->min_n > 2 ? p->min_n : 2);   /* unigrams once */
            if (n_lo > p->max_n || (n_lo - 1) * d >= p->C) break;   /* (no n-gram fits at this distance or wider) */
            for (int64_t i = 0; i < p->C; i++)
                for (int64_t g = 0; g < p->n_grams; g++) {
                    const int64_t n = p->len[g];
                    if (n < n_lo || i + (n - 1) * d >= p->C) continue;
                    int64_t k = 0;
                    while (k < n && tok(p, x, base + i + k * d) == p->tokens[p->start[g] + k]) k++;
                    if (k < n) continue;
                    const float w = p->weights ? p->weights[g] : 1.0f;
                    yr[p->out[g]] = p->mode == 1 ? yr[p->out[g]] + 1.0f : p->mode == 2 ? w : yr[p->out[g]] + w;
                }
        }
    }
}
