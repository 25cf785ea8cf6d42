/*
 * transpose.c -- Transpose, and the strided copy that Transpose and Slice share.
 *
 * cuvil_strided_copy() writes a dense destination from a source described by per-dim byte
 * strides. After dropping size-1 dims and merging dims that are contiguous in the source, one
 * of three loops runs:
 *  - the innermost destination dim is contiguous in the source: memcpy of whole rows;
 *  - some other destination dim is the source's contiguous one (a real transpose such as
 *    NCHW -> NHWC): 16x16 tiles over those two dims, so both sides touch few cache lines;
 *  - otherwise: an element loop over the innermost dim's stride.
 */
#include <string.h>

#include "../rt_int.h"

#define TILE 16

/* Copies n elements of es bytes from src (stride ss bytes) to dst (stride ds bytes). */
static inline void copy_elems(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n,
                              int64_t es) {
    switch (es) {
#define CASE(T)                                                                          \
    case sizeof(T):                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                \
            T v;                                                                         \
            memcpy(&v, src + i * ss, sizeof(T));                                         \
            memcpy(dst + i * ds, &v, sizeof(T));                                         \
        }                                                                                \
        return;
        CASE(uint8_t)
        CASE(uint16_t)
        CASE(uint32_t)
        CASE(uint64_t)
#undef CASE
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, (size_t)es);
        return;
    }
}

void cuvil_strided_copy(int ndim, const int64_t *dims, const int64_t *src_strides,
                        int64_t es, const void *src, void *dst) {
    int64_t d[CUVIL_RT_MAX_DIMS], s[CUVIL_RT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0) return;
        if (dims[i] == 1) continue;
        if (n > 0 && s[n - 1] == src_strides[i] * dims[i]) {
            d[n - 1] *= dims[i];
            s[n - 1] = src_strides[i];
            continue;
        }
        d[n] = dims[i];
        s[n] = src_strides[i];
        n++;
    }
    const char *x = (const char *)src;
    char *y = (char *)dst;
    if (n == 0) {
        memcpy(y, x, (size_t)es);
        return;
    }
    /* dense destination strides */
    int64_t ds[CUVIL_RT_MAX_DIMS];
    ds[n - 1] = es;
    for (int i = n - 2; i >= 0; i--) ds[i] = ds[i + 1] * d[i + 1];

    /* the dims walked by the odometer: all but the innermost, and but `b` when tiling */
    int b = -1;
    if (s[n - 1] != es)
        for (int i = 0; i < n - 1; i++)
            if (s[i] == es && d[i] >= 4 && d[n - 1] >= 4) b = i;
    int od[CUVIL_RT_MAX_DIMS], no = 0;
    for (int i = 0; i < n - 1; i++)
        if (i != b) od[no++] = i;
    int64_t idx[CUVIL_RT_MAX_DIMS] = {0};
    int64_t total = 1;
    for (int k = 0; k < no; k++) total *= d[od[k]];
    const int64_t L = d[n - 1], sl = s[n - 1];
    int64_t xo = 0, yo = 0;
    for (int64_t t = 0; t < total; t++) {
        if (sl == es) {
            memcpy(y + yo, x + xo, (size_t)(L * es));
        } else if (b < 0) {
            copy_elems(y + yo, es, x + xo, sl, L, es);
        } else {
            const int64_t B = d[b], sb = s[b], dsb = ds[b];
            for (int64_t i0 = 0; i0 < B; i0 += TILE) {
                const int64_t ni = cuvil_min_i64(TILE, B - i0);
                for (int64_t l0 = 0; l0 < L; l0 += TILE) {
                    const int64_t nl = cuvil_min_i64(TILE, L - l0);
                    for (int64_t l = l0; l < l0 + nl; l++)
                        copy_elems(y + yo + i0 * dsb + l * es, dsb, x + xo + i0 * sb + l * sl, sb,
                                   ni, es);
                }
            }
        }
        for (int k = no - 1; k >= 0; k--) {
            const int i = od[k];
            xo += s[i];
            yo += ds[i];
            if (++idx[k] < d[i]) break;
            xo -= s[i] * d[i];
            yo -= ds[i] * d[i];
            idx[k] = 0;
        }
    }
}

void cuvil_transpose(const cuvil_transpose_params *p, const void *x, void *y) {
    int64_t xs[CUVIL_RT_MAX_DIMS], od[CUVIL_RT_MAX_DIMS], ss[CUVIL_RT_MAX_DIMS];
    int64_t st = p->elem_size;
    for (int d = p->ndim - 1; d >= 0; d--) {
        xs[d] = st;
        st *= p->dims[d];
    }
    for (int i = 0; i < p->ndim; i++) {
        od[i] = p->dims[p->perm[i]];
        ss[i] = xs[p->perm[i]];
    }
    cuvil_strided_copy(p->ndim, od, ss, p->elem_size, x, y);
}

void cuvil_transpose__scalar(const cuvil_transpose_params *p, const void *x, void *y) {
    int64_t xs[CUVIL_RT_MAX_DIMS], idx[CUVIL_RT_MAX_DIMS] = {0};
    int64_t st = 1, total = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        xs[d] = st;
        st *= p->dims[d];
    }
    for (int d = 0; d < p->ndim; d++) total *= p->dims[d];
    const size_t es = (size_t)p->elem_size;
    for (int64_t t = 0; t < total; t++) {
        int64_t off = 0;
        for (int i = 0; i < p->ndim; i++) off += idx[i] * xs[p->perm[i]];
        memcpy((char *)y + t * (int64_t)es, (const char *)x + off * (int64_t)es, es);
        for (int i = p->ndim - 1; i >= 0; i--) {
            if (++idx[i] < p->dims[p->perm[i]]) break;
            idx[i] = 0;
        }
    }
}
