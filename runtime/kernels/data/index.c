/*
 * index.c -- ops that index with run-time data: Gather, GatherElements, ScatterElements,
 * GatherND, ScatterND; and NonZero, which finds indices. Every index is checked before it is used: negative ones count from the
 * end of their axis, and one out of range makes the kernel return 1 (the generated code turns
 * that into an error from run naming the node), never a read or write out of bounds.
 */
#include <stdbool.h>
#include <string.h>

#include "../rt_int.h"

/* Index i of an int32 or int64 array, made non-negative against len; -1 when out of range. */
static inline int64_t index_at(int idx_t, const void *idx, int64_t i, int64_t len) {
    int64_t v = cuvil_ld_index(idx_t, idx, i);
    if (v < 0) v += len;
    return v >= 0 && v < len ? v : -1;
}

int cuvil_gather_rt(const cuvil_gather_params *p, int idx_t, const void *idx, const void *x, void *y) {
    const size_t nb = (size_t)p->nb_inner;
    const char *xs = (const char *)x;
    char *ys = (char *)y;
    for (int64_t j = 0; j < p->n_idx; j++)   /* every index first: no partial output on errors */
        if (index_at(idx_t, idx, j, p->axis_len) < 0) return 1;
    for (int64_t o = 0; o < p->outer; o++) {
        const char *xo = xs + o * p->axis_len * (int64_t)nb;
        char *yo = ys + o * p->n_idx * (int64_t)nb;
        for (int64_t j = 0; j < p->n_idx; j++)
            memcpy(yo + j * (int64_t)nb, xo + index_at(idx_t, idx, j, p->axis_len) * (int64_t)nb, nb);
    }
    return 0;
}

int cuvil_gather_w16_rt(const cuvil_gather_params *p, int kind, int idx_t, const void *idx, const uint16_t *x, float *y) {
    const int64_t inner = p->nb_inner / (int64_t)sizeof(float);
    for (int64_t j = 0; j < p->n_idx; j++)   /* every index first: no partial output on errors */
        if (index_at(idx_t, idx, j, p->axis_len) < 0) return 1;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < p->n_idx; j++)
            cuvil_widen16(kind, x + (o * p->axis_len + index_at(idx_t, idx, j, p->axis_len)) * inner,
                          y + (o * p->n_idx + j) * inner, (size_t)inner);
    return 0;
}

/* ===== Elements =========================================================================== */
/* Offset in data of element `i` of the index space (dims), with the axis coordinate replaced
 * by `at`. */
static inline int64_t data_offset(const cuvil_elements_params *p, const int64_t *coord, int64_t at) {
    int64_t off = 0;
    for (int d = 0; d < p->ndim; d++) off = off * p->data_dims[d] + (d == p->axis ? at : coord[d]);
    return off;
}

static void next_coord(const cuvil_elements_params *p, int64_t *coord) {
    for (int d = p->ndim - 1; d >= 0; d--) {
        if (++coord[d] < p->dims[d]) return;
        coord[d] = 0;
    }
}

static int64_t count(const int64_t *dims, int n) {
    int64_t c = 1;
    for (int d = 0; d < n; d++) c *= dims[d];
    return c;
}

/* Are the n indices all within [-len, len)? (an or of the bad ones, no early exit: a loop the
 * compiler vectorises) */
static int indices_fit(int idx_t, const void *idx, int64_t n, int64_t len) {
    int bad = 0;
    if (idx_t == CUVIL_T_I32) {
        const int32_t *v = idx;
        for (int64_t i = 0; i < n; i++) bad |= (v[i] < -len) | (v[i] >= len);
    } else {
        const int64_t *v = idx;
        for (int64_t i = 0; i < n; i++) bad |= (v[i] < -len) | (v[i] >= len);
    }
    return !bad;
}

/* y[j] = x[base + v_j sa + j sj] for a row of L 4-byte values, v_j the row's indices made
 * non-negative (checked before: |v| < len) without a branch */
#define GATHER_ROW4(T)                                                                            \
    do {                                                                                          \
        const T *ir = (const T *)idx + i;                                                         \
        for (int64_t j = 0; j < L; j++) {                                                         \
            const int64_t v = ir[j];                                                              \
            y4[i + j] = x4[base + (v + (v < 0 ? len : 0)) * sa + j * sj];                         \
        }                                                                                         \
    } while (0)

int cuvil_gather_elements(const cuvil_elements_params *p, int idx_t, const void *idx, const void *x, void *y) {
    int64_t n = count(p->dims, p->ndim), es = p->elem_size, coord[CUVIL_RT_MAX_DIMS] = {0};
    int64_t len = p->data_dims[p->axis];
    if (!indices_fit(idx_t, idx, n, len)) return 1;
    if (n == 0 || p->ndim < 1) {   /* (rank 0: one element) */
        if (n) memcpy(y, (const char *)x + index_at(idx_t, idx, 0, len) * es, (size_t)es);
        return 0;
    }
    /* row by row over the innermost dim: the row's base offset once, then each element its
     * index times the axis' stride (element by element through every dim, 64 x 56 x 56 took
     * 4x ONNX Runtime's time) */
    const int last = p->ndim - 1;
    int64_t ds[CUVIL_RT_MAX_DIMS] = {0}, st = 1;
    for (int d = last; d >= 0; d--) ds[d] = st, st *= p->data_dims[d];
    const int64_t L = p->dims[last], sa = ds[p->axis], sj = p->axis == last ? 0 : 1;
    const char *X = x;
    char *Y = y;
    for (int64_t i = 0; i < n; i += L) {
        int64_t base = 0;
        for (int d = 0; d < last; d++)
            if (d != p->axis) base += coord[d] * ds[d];
        switch (es) {
        case 4: {   /* (the index type's loop: index_at's per element took 1.8x ONNX Runtime's time) */
            const uint32_t *x4 = (const uint32_t *)(const void *)X;
            uint32_t *y4 = (uint32_t *)(void *)Y;
            if (idx_t == CUVIL_T_I32) GATHER_ROW4(int32_t);
            else GATHER_ROW4(int64_t);
            break;
        }
        case 8:
            for (int64_t j = 0; j < L; j++)
                ((uint64_t *)(void *)Y)[i + j] = ((const uint64_t *)(const void *)X)[base + index_at(idx_t, idx, i + j, len) * sa + j * sj];
            break;
        default:
            for (int64_t j = 0; j < L; j++)
                memcpy(Y + (i + j) * es, X + (base + index_at(idx_t, idx, i + j, len) * sa + j * sj) * es, (size_t)es);
            break;
        }
        for (int d = last - 1; d >= 0; d--) {   /* the next row */
            if (++coord[d] < p->dims[d]) break;
            coord[d] = 0;
        }
    }
    return 0;
}
#undef GATHER_ROW4

/* dst = dst (reduction) src for one element of type t. */
static void reduce_into(int t, int reduction, void *dst, const void *src) {
#define RED(T)                                                                                   \
    do {                                                                                         \
        T a, b;                                                                                  \
        memcpy(&a, dst, sizeof a);                                                               \
        memcpy(&b, src, sizeof b);                                                               \
        switch (reduction) {                                                                     \
        case CUVIL_SCATTER_ADD: a = (T)(a + b); break;                                           \
        case CUVIL_SCATTER_MUL: a = (T)(a * b); break;                                           \
        case CUVIL_SCATTER_MAX: a = b > a ? b : a; break;                                        \
        case CUVIL_SCATTER_MIN: a = b < a ? b : a; break;                                        \
        default: a = b; break;                                                                   \
        }                                                                                        \
        memcpy(dst, &a, sizeof a);                                                               \
    } while (0)
#define RED_U(T, U)                                                                              \
    do {                                                                                         \
        U a, b;                                                                                  \
        memcpy(&a, dst, sizeof a);                                                               \
        memcpy(&b, src, sizeof b);                                                               \
        T sa = (T)a, sb = (T)b;                                                                  \
        switch (reduction) {                                                                     \
        case CUVIL_SCATTER_ADD: a = (U)(a + b); break;                                           \
        case CUVIL_SCATTER_MUL: a = (U)(a * b); break;                                           \
        case CUVIL_SCATTER_MAX: a = sb > sa ? b : a; break;                                      \
        case CUVIL_SCATTER_MIN: a = sb < sa ? b : a; break;                                      \
        default: a = b; break;                                                                   \
        }                                                                                        \
        memcpy(dst, &a, sizeof a);                                                               \
    } while (0)
    switch (t) {
    case CUVIL_T_F32: RED(float); break;
    case CUVIL_T_F64: RED(double); break;
    case CUVIL_T_F16: case CUVIL_T_BF16: {
        uint16_t a, b;
        memcpy(&a, dst, 2);
        memcpy(&b, src, 2);
        float fa = t == CUVIL_T_F16 ? cuvil_f16_to_f32(a) : cuvil_bf16_to_f32(a);
        float fb = t == CUVIL_T_F16 ? cuvil_f16_to_f32(b) : cuvil_bf16_to_f32(b);
        switch (reduction) {
        case CUVIL_SCATTER_ADD: fa += fb; break;
        case CUVIL_SCATTER_MUL: fa *= fb; break;
        case CUVIL_SCATTER_MAX: fa = fb > fa ? fb : fa; break;
        case CUVIL_SCATTER_MIN: fa = fb < fa ? fb : fa; break;
        default: fa = fb; break;
        }
        a = t == CUVIL_T_F16 ? cuvil_f32_to_f16(fa) : cuvil_f32_to_bf16(fa);
        memcpy(dst, &a, 2);
        break;
    }
    /* integers: arithmetic in the unsigned twin (wraps), comparisons signed */
    case CUVIL_T_I8: RED_U(int8_t, uint8_t); break;
    case CUVIL_T_I16: RED_U(int16_t, uint16_t); break;
    case CUVIL_T_I32: RED_U(int32_t, uint32_t); break;
    case CUVIL_T_I64: RED_U(int64_t, uint64_t); break;
    case CUVIL_T_U8: RED_U(uint8_t, uint8_t); break;
    case CUVIL_T_U16: RED_U(uint16_t, uint16_t); break;
    case CUVIL_T_U32: RED_U(uint32_t, uint32_t); break;
    case CUVIL_T_U64: RED_U(uint64_t, uint64_t); break;
    default: {   /* bool: add is or, mul is and */
        uint8_t a = *(uint8_t *)dst != 0, b = *(const uint8_t *)src != 0;
        switch (reduction) {
        case CUVIL_SCATTER_ADD: case CUVIL_SCATTER_MAX: a = a | b; break;
        case CUVIL_SCATTER_MUL: case CUVIL_SCATTER_MIN: a = a & b; break;
        default: a = b; break;
        }
        *(uint8_t *)dst = a;
        break;
    }
    }
#undef RED
#undef RED_U
}

int cuvil_scatter_elements(const cuvil_elements_params *p, int t, int idx_t, const void *idx, const void *upd,
                           const void *data, void *y) {
    int64_t n = count(p->dims, p->ndim), es = p->elem_size, coord[CUVIL_RT_MAX_DIMS] = {0};
    int64_t len = p->data_dims[p->axis];
    for (int64_t i = 0; i < n; i++)
        if (index_at(idx_t, idx, i, len) < 0) return 1;
    if (y != data) memcpy(y, data, (size_t)(count(p->data_dims, p->ndim) * es));
    for (int64_t i = 0; i < n; i++, next_coord(p, coord))
        reduce_into(t, p->reduction, (char *)y + data_offset(p, coord, index_at(idx_t, idx, i, len)) * es,
                    (const char *)upd + i * es);
    return 0;
}

/* ===== ND =================================================================================== */
/* Offset (in slices) of index tuple j of batch b, or -1 when a coordinate is out of range. */
static int64_t nd_slice(const cuvil_nd_params *p, const int64_t *idx, int64_t b, int64_t j) {
    const int64_t *t = idx + (b * p->n_idx + j) * p->k;
    int64_t off = 0;
    for (int64_t d = 0; d < p->k; d++) {
        int64_t v = t[d], len = p->data_dims[d];
        if (v < 0) v += len;
        if (v < 0 || v >= len) return -1;
        off = off * len + v;
    }
    return off;
}

int cuvil_gather_nd(const cuvil_nd_params *p, const int64_t *idx, const void *x, void *y) {
    int64_t per_batch = count(p->data_dims, (int)p->k), nb = p->slice_elems * p->elem_size;
    for (int64_t b = 0; b < p->n_batch; b++)
        for (int64_t j = 0; j < p->n_idx; j++)
            if (nd_slice(p, idx, b, j) < 0) return 1;
    for (int64_t b = 0; b < p->n_batch; b++)
        for (int64_t j = 0; j < p->n_idx; j++)
            memcpy((char *)y + (b * p->n_idx + j) * nb, (const char *)x + (b * per_batch + nd_slice(p, idx, b, j)) * nb,
                   (size_t)nb);
    return 0;
}

int cuvil_scatter_nd(const cuvil_nd_params *p, int t, const int64_t *idx, const void *upd, const void *data, void *y) {
    int64_t per_batch = count(p->data_dims, (int)p->k), nb = p->slice_elems * p->elem_size, es = p->elem_size;
    for (int64_t b = 0; b < p->n_batch; b++)
        for (int64_t j = 0; j < p->n_idx; j++)
            if (nd_slice(p, idx, b, j) < 0) return 1;
    if (y != data) memcpy(y, data, (size_t)(p->n_batch * per_batch * nb));
    for (int64_t b = 0; b < p->n_batch; b++)
        for (int64_t j = 0; j < p->n_idx; j++) {
            char *dst = (char *)y + (b * per_batch + nd_slice(p, idx, b, j)) * nb;
            const char *src = (const char *)upd + (b * p->n_idx + j) * nb;
            for (int64_t e = 0; e < p->slice_elems; e++) reduce_into(t, p->reduction, dst + e * es, src + e * es);
        }
    return 0;
}

/* ===== NonZero ============================================================================ */
static bool nonzero_at(int t, const void *x, int64_t i) {
    switch (t) {
    case CUVIL_T_F32: return ((const float *)x)[i] != 0.0f;   /* NaN too; -0.0 is zero */
    case CUVIL_T_F64: return ((const double *)x)[i] != 0.0;
    case CUVIL_T_F16: case CUVIL_T_BF16: return (((const uint16_t *)x)[i] & 0x7fff) != 0;
    case CUVIL_T_I16: case CUVIL_T_U16: return ((const uint16_t *)x)[i] != 0;
    case CUVIL_T_I32: case CUVIL_T_U32: return ((const uint32_t *)x)[i] != 0;
    case CUVIL_T_I64: case CUVIL_T_U64: return ((const uint64_t *)x)[i] != 0;
    default: return ((const uint8_t *)x)[i] != 0;   /* int8, uint8, bool */
    }
}

int64_t cuvil_nonzero_count(int t, const void *x, int64_t n) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) count += nonzero_at(t, x, i);
    return count;
}

int64_t cuvil_nonzero(int t, const void *x, int ndim, const int64_t *dims, int64_t *y) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= dims[d];
    const int64_t count = cuvil_nonzero_count(t, x, n);
    int64_t at[CUVIL_RT_MAX_DIMS] = {0}, k = 0;   /* the multi-index of element i */
    for (int64_t i = 0; i < n; i++) {
        if (nonzero_at(t, x, i)) {
            for (int d = 0; d < ndim; d++) y[d * count + k] = at[d];
            k++;
        }
        for (int d = ndim - 1; d >= 0 && ++at[d] == dims[d]; d--) at[d] = 0;
    }
    return count;
}

/* ===== Compress =========================================================================== */
int64_t cuvil_compress(const void *x, const uint8_t *cond, int64_t outer, int64_t axis_len, int64_t cond_len,
                       int64_t inner_bytes, void *y) {
    const int64_t len = cond_len < axis_len ? cond_len : axis_len;
    int64_t count = 0;
    for (int64_t j = 0; j < len; j++) count += cond[j] != 0;
    const char *xs = (const char *)x;
    char *ys = (char *)y;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < len; j++)
            if (cond[j]) {
                memcpy(ys, xs + (o * axis_len + j) * inner_bytes, (size_t)inner_bytes);
                ys += inner_bytes;
            }
    return count;
}
