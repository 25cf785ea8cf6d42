/*
 * slice.c -- Slice with per-axis start and step (steps may be negative): a strided copy whose
 * source strides are step * (input stride) and whose base is the element at the starts.
 */
#include <string.h>

#include "../rt_int.h"

void cuvil_slice(const cuvil_slice_params *p, const void *x, void *y) {
    int64_t ss[CUVIL_RT_MAX_DIMS];
    int64_t st = p->elem_size, base = 0;
    for (int d = p->ndim - 1; d >= 0; d--) {
        if (p->out_dims[d] == 0) return;
        ss[d] = p->steps[d] * st;
        base += p->starts[d] * st;
        st *= p->in_dims[d];
    }
    cuvil_strided_copy(p->ndim, p->out_dims, ss, p->elem_size, (const char *)x + base, y);
}

void cuvil_slice__scalar(const cuvil_slice_params *p, const void *x, void *y) {
    int64_t xs[CUVIL_RT_MAX_DIMS], idx[CUVIL_RT_MAX_DIMS] = {0};
    int64_t st = 1, total = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        xs[d] = st;
        st *= p->in_dims[d];
    }
    for (int d = 0; d < p->ndim; d++) total *= p->out_dims[d];
    const size_t es = (size_t)p->elem_size;
    for (int64_t t = 0; t < total; t++) {
        int64_t off = 0;
        for (int d = 0; d < p->ndim; d++) off += (p->starts[d] + idx[d] * p->steps[d]) * xs[d];
        memcpy((char *)y + t * (int64_t)es, (const char *)x + off * (int64_t)es, es);
        for (int d = p->ndim - 1; d >= 0; d--) {
            if (++idx[d] < p->out_dims[d]) break;
            idx[d] = 0;
        }
    }
}
