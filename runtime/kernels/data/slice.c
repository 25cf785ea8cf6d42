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

int64_t cuvil_slice_axis(int64_t dim, int64_t *start, int64_t end, int64_t *step) {
    int64_t b = *start, st = *step, cnt;
    if (b < 0) b = b < -dim ? -1 : b + dim;   /* counts from the end; -1 (below 0) clamps next */
    if (end < 0) end = end < -dim ? -2 : end + dim;
    if (st > 0) {
        b = b < 0 ? 0 : b > dim ? dim : b;
        end = end < 0 ? 0 : end > dim ? dim : end;
        cnt = end > b ? 1 + (end - b - 1) / st : 0;   /* ceil((end - b) / st), no overflow for huge steps */
    } else {
        b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        cnt = b > end ? 1 + (end - b + 1) / st : 0;   /* operands <= 0: C's truncation is the ceiling */
    }
    if (cnt == 0) b = 0;   /* an empty slice reads nothing */
    /* a step longer than the axis selects one element whatever its size: kept small, so that
     * index arithmetic and a generated C literal stay in range (INT64_MIN) */
    int64_t maxstep = dim > 0 ? dim : 1;
    if (st > maxstep) st = maxstep;
    if (st < -maxstep) st = -maxstep;
    *start = b;
    *step = st;
    return cnt;
}

/* ===== Sizes read from tensors when the model runs ========================================= */
int cuvil_slice_rt(cuvil_slice_params *p, int n, int idx_t, const void *starts, const void *ends, const void *axes,
                   const void *steps, const int64_t *hi) {
    int seen[CUVIL_RT_MAX_DIMS] = {0};
    if (n < 0 || n > p->ndim) return 1;
    for (int d = 0; d < p->ndim; d++) {
        p->out_dims[d] = p->in_dims[d];
        p->starts[d] = 0;
        p->steps[d] = 1;
    }
    for (int i = 0; i < n; i++) {
        int64_t ax = axes ? cuvil_ld_index(idx_t, axes, i) : i;
        if (ax < 0) ax += p->ndim;
        if (ax < 0 || ax >= p->ndim || seen[ax]) return 1;   /* out of range or repeated */
        seen[ax] = 1;
        int64_t step = steps ? cuvil_ld_index(idx_t, steps, i) : 1, start = cuvil_ld_index(idx_t, starts, i);
        if (step == 0) return 1;
        int64_t cnt = cuvil_slice_axis(p->in_dims[ax], &start, cuvil_ld_index(idx_t, ends, i), &step);
        p->starts[ax] = start;
        p->steps[ax] = step;
        p->out_dims[ax] = cnt;
    }
    for (int d = 0; d < p->ndim; d++)
        if (p->out_dims[d] > hi[d]) return 1;   /* cannot happen: a slice is no longer than its axis */
    return 0;
}

int cuvil_squeeze_dims(int unsqueeze, int idx_t, const void *axes, int n, const int64_t *in_dims, int in_ndim,
                       const int64_t *hi, int64_t *out) {
    const int r = unsqueeze ? in_ndim + n : in_ndim;
    int mark[CUVIL_RT_MAX_DIMS] = {0};
    if (r > CUVIL_RT_MAX_DIMS || n > r) return 1;
    for (int i = 0; i < n; i++) {
        int64_t ax = cuvil_ld_index(idx_t, axes, i);
        if (ax < 0) ax += r;
        if (ax < 0 || ax >= r || mark[ax]) return 1;
        if (!unsqueeze && in_dims[ax] != 1) return 1;
        mark[ax] = 1;
    }
    for (int d = 0, j = 0, o = 0; d < r; d++) {
        if (unsqueeze) out[o] = mark[d] ? 1 : in_dims[j++];
        else if (mark[d]) continue;
        else out[o] = in_dims[d];
        if (out[o] > hi[o]) return 1;
        o++;
    }
    return 0;
}

int cuvil_split_sizes_rt(int idx_t, const void *split, int n, int64_t dim, const int64_t *hi, int64_t *out) {
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        out[i] = cuvil_ld_index(idx_t, split, i);
        if (out[i] < 0 || out[i] > hi[i]) return 1;
        sum += out[i];   /* each at most dim: no overflow */
    }
    return sum != dim;
}

int cuvil_reshape_dims(int shape_t, const void *shape, int n, const int64_t *in_dims, int in_ndim, int allowzero,
                       const int64_t *hi, int64_t *out) {
    int64_t total = 1, known = 1;
    int infer = -1;
    for (int d = 0; d < in_ndim; d++) total *= in_dims[d];   /* the input's size: planned, no overflow */
    for (int i = 0; i < n; i++) {
        int64_t v = cuvil_ld_index(shape_t, shape, i);
        if (v == -1) {
            if (infer >= 0) return 1;   /* two -1s */
            infer = i;
            continue;
        }
        if (v == 0 && !allowzero) {
            if (i >= in_ndim) return 1;
            v = in_dims[i];
        }
        if (v < 0 || v > hi[i]) return 1;
        out[i] = v;
        if (v && __builtin_mul_overflow(known, v, &known)) return 1;
        if (!v) known = 0;
    }
    if (infer >= 0) {
        if (known == 0 || total % known) return 1;
        out[infer] = total / known;
        if (out[infer] > hi[infer]) return 1;
    } else if (known != total) {
        return 1;
    }
    return 0;
}
