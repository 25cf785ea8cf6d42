/*
 * transpose.c -- Transpose, and the strided copy that Transpose and Slice share.
 *
 * cuvil_strided_copy() writes a dense destination from a source described by per-dim byte
 * strides. After dropping size-1 dims and merging dims that are contiguous in the source, one
 * of three loops runs:
 *  - the innermost destination dim is contiguous in the source: memcpy of whole rows;
 *  - some other destination dim is the source's contiguous one (a real transpose such as
 *    NCHW -> NHWC): 16x16 tiles over those two dims, so both sides touch few cache lines (8x8
 *    blocks in AVX registers for 4-byte elements on the x86 targets);
 *  - otherwise: an element loop over the innermost dim's stride.
 * The work (rows, or blocks of 64 along the tiled dim) is split over the threads from 64 KB
 * (at least two units of 32 KB).
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

/* The copy after the dims are merged: d, s (source byte strides), ds (dense destination
 * strides) of n dims; the odometer walks od[0..no) (all but the innermost, and but b, the
 * source's contiguous dim, when tiling). A unit of work is one odometer position and, when
 * tiling, one block of UNIT_ROWS along b. */
#define UNIT_ROWS 64
typedef struct scopy {
    const char *x;
    char *y;
    int n, b, no;
    int od[CUVIL_RT_MAX_DIMS];
    int64_t d[CUVIL_RT_MAX_DIMS], s[CUVIL_RT_MAX_DIMS], ds[CUVIL_RT_MAX_DIMS];
    int64_t es, nblk;   /* blocks along b per odometer position (1 without tiling) */
    int rows2;          /* a unit is all of dim n - 2 (rows of the innermost dim shorter than ROWS2_BYTES) */
} scopy;

/* Below this many bytes a row, a unit takes every row of the next dim out: the odometer's
 * divisions cost more than a short row's copy (DepthToSpace's rows of 2 floats took 4.6x ONNX
 * Runtime's time, SpaceToDepth's of 56 strided floats 2.2x). */
#define ROWS2_BYTES 1024

static void scopy_units(void *vctx, int64_t u0, int64_t u1, int tid) {
    const scopy *c = vctx;
    const int n = c->n, b = c->b;
    const int64_t es = c->es, L = c->d[n - 1], sl = c->s[n - 1];
    (void)tid;
    for (int64_t u = u0; u < u1; u++) {
        int64_t t = u / c->nblk, xo = 0, yo = 0;
        for (int k = c->no - 1; k >= 0; k--) {
            const int i = c->od[k];
            const int64_t v = t % c->d[i];
            t /= c->d[i];
            xo += v * c->s[i];
            yo += v * c->ds[i];
        }
        if (c->rows2) {   /* the unit is d[n - 2] short rows */
            const int64_t R = c->d[n - 2], sr = c->s[n - 2], dr = c->ds[n - 2];
            for (int64_t r = 0; r < R; r++)
                if (sl == es) memcpy(c->y + yo + r * dr, c->x + xo + r * sr, (size_t)(L * es));
                else copy_elems(c->y + yo + r * dr, es, c->x + xo + r * sr, sl, L, es);
        } else if (sl == es) {
            memcpy(c->y + yo, c->x + xo, (size_t)(L * es));
        } else if (b < 0) {
            copy_elems(c->y + yo, es, c->x + xo, sl, L, es);
        } else {
            const int64_t sb = c->s[b], dsb = c->ds[b];
            const int64_t ib = (u % c->nblk) * UNIT_ROWS, B = cuvil_min_i64(c->d[b], ib + UNIT_ROWS);
#if CUVIL_HAVE_AVX2
            if (es == 4 && sb == 4 && sl % 4 == 0 && dsb % 4 == 0) {
                /* source rows along the innermost dim l, contiguous along b */
                cuvil_transpose_f32__avx2((const float *)(const void *)(c->x + xo + ib * sb), sl / 4,
                                          (float *)(void *)(c->y + yo + ib * dsb), dsb / 4, L, B - ib);
                continue;
            }
#endif
            for (int64_t i0 = ib; i0 < B; i0 += TILE) {
                const int64_t ni = cuvil_min_i64(TILE, B - i0);
                for (int64_t l0 = 0; l0 < L; l0 += TILE) {
                    const int64_t nl = cuvil_min_i64(TILE, L - l0);
                    for (int64_t l = l0; l < l0 + nl; l++)
                        copy_elems(c->y + yo + i0 * dsb + l * es, dsb, c->x + xo + i0 * sb + l * sl, sb, ni, es);
                }
            }
        }
    }
}

void cuvil_strided_copy(int ndim, const int64_t *dims, const int64_t *src_strides,
                        int64_t es, const void *src, void *dst) {
    scopy c;
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0) return;
        if (dims[i] == 1) continue;
        if (n > 0 && c.s[n - 1] == src_strides[i] * dims[i]) {
            c.d[n - 1] *= dims[i];
            c.s[n - 1] = src_strides[i];
            continue;
        }
        c.d[n] = dims[i];
        c.s[n] = src_strides[i];
        n++;
    }
    c.x = (const char *)src;
    c.y = (char *)dst;
    if (n == 0) {
        memcpy(c.y, c.x, (size_t)es);
        return;
    }
    c.n = n;
    c.es = es;
    /* dense destination strides */
    c.ds[n - 1] = es;
    for (int i = n - 2; i >= 0; i--) c.ds[i] = c.ds[i + 1] * c.d[i + 1];

    /* the dims walked by the odometer: all but the innermost, and but `b` when tiling */
    c.b = -1;
    if (c.s[n - 1] != es)
        for (int i = 0; i < n - 1; i++)
            if (c.s[i] == es && c.d[i] >= 4 && c.d[n - 1] >= 4) c.b = i;
    c.rows2 = c.b < 0 && n >= 2 && c.d[n - 1] * es < ROWS2_BYTES;
    c.no = 0;
    for (int i = 0; i < n - 1 - c.rows2; i++)
        if (i != c.b) c.od[c.no++] = i;
    int64_t total = 1;
    for (int k = 0; k < c.no; k++) total *= c.d[c.od[k]];
    c.nblk = c.b >= 0 ? (c.d[c.b] + UNIT_ROWS - 1) / UNIT_ROWS : 1;
    /* units of about 32 KB or more each, from two of them on, over the threads */
    const int64_t unit_bytes = (c.b >= 0 ? UNIT_ROWS : c.rows2 ? c.d[n - 2] : 1) * c.d[n - 1] * es;
    cuvil_parallel_range(total * c.nblk, cuvil_max_i64(1, (32 << 10) / cuvil_max_i64(unit_bytes, 1)), 1, scopy_units,
                         &c);
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
