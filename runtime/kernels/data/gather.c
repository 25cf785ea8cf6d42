/*
 * gather.c -- Gather along one axis with constant, already non-negative indices:
 * y[o, j, :] = x[o, idx[j], :] with rows of nb_inner bytes.
 */
#include <string.h>

#include "../rt_int.h"

void cuvil_gather(const cuvil_gather_params *p, const int64_t *idx, const void *x, void *y) {
    const size_t nb = (size_t)p->nb_inner;
    const char *xs = (const char *)x;
    char *ys = (char *)y;
    if (nb == 0) return;
    for (int64_t o = 0; o < p->outer; o++) {
        const char *xo = xs + o * p->axis_len * (int64_t)nb;
        char *yo = ys + o * p->n_idx * (int64_t)nb;
        switch (nb) {
        case 4:
            for (int64_t j = 0; j < p->n_idx; j++) memcpy(yo + j * 4, xo + idx[j] * 4, 4);
            break;
        case 8:
            for (int64_t j = 0; j < p->n_idx; j++) memcpy(yo + j * 8, xo + idx[j] * 8, 8);
            break;
        default:
            for (int64_t j = 0; j < p->n_idx; j++)
                memcpy(yo + j * (int64_t)nb, xo + idx[j] * (int64_t)nb, nb);
            break;
        }
    }
}

void cuvil_gather_w16(const cuvil_gather_params *p, int kind, const int64_t *idx, const uint16_t *x, float *y) {
    const int64_t inner = p->nb_inner / (int64_t)sizeof(float);
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < p->n_idx; j++)
            cuvil_widen16(kind, x + (o * p->axis_len + idx[j]) * inner, y + (o * p->n_idx + j) * inner, (size_t)inner);
}
