/*
 * test_kernel_data.c -- data movement kernels (transpose, concat, split, slice, pad, gather),
 * optimised and reference versions, against naive index arithmetic written here.
 *
 * Transpose: every permutation of 2-, 3- and 4-D shapes (with size-1 axes and sizes that
 * exercise the tiled path) at element sizes 1, 2, 4, 8 and 3. Slice: positive and negative
 * steps, steps > 1, starts in the middle, full and empty extents. Pad: every mode with positive,
 * negative (crop), mixed and oversized (wider than the axis) pads. Concat/Split and Gather on
 * uneven chunks.
 */
#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

static void fill_bytes(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(ktu_u32() & 0xff);
}

static void check_bytes(const void *got, const void *want, size_t n, const char *what) {
    ktu_checks++;
    if (memcmp(got, want, n) != 0) {
        size_t i = 0;
        while (((const unsigned char *)got)[i] == ((const unsigned char *)want)[i]) i++;
        ktu_fail("%s: first differing byte %zu of %zu", what, i, n);
    }
}

/* ---- Transpose -------------------------------------------------------------------------- */
static int next_perm(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return 1;
}

static cuvil_pool *pool3;   /* (main makes it) */

static void run_transpose(int ndim, const int64_t *dims, int64_t es) {
    cuvil_transpose_params p;
    memset(&p, 0, sizeof p);
    p.ndim = ndim;
    p.elem_size = es;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) {
        p.dims[d] = dims[d];
        p.perm[d] = d;
        total *= dims[d];
    }
    const size_t nb = (size_t)(total * es);
    unsigned char *x = ktu_alloc(nb), *y = ktu_alloc(nb), *ref = ktu_alloc(nb);
    fill_bytes(x, nb);
    do {
        /* naive: for each output index, its input index */
        int64_t xs[8], idx[8] = {0};
        int64_t s = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            xs[d] = s;
            s *= dims[d];
        }
        for (int64_t t = 0; t < total; t++) {
            int64_t off = 0;
            for (int i = 0; i < ndim; i++) off += idx[i] * xs[p.perm[i]];
            memcpy(ref + t * es, x + off * es, (size_t)es);
            for (int i = ndim - 1; i >= 0; i--) {
                if (++idx[i] < dims[p.perm[i]]) break;
                idx[i] = 0;
            }
        }
        char what[128];
        int len = snprintf(what, sizeof what, "transpose es=%lld dims", (long long)es);
        for (int d = 0; d < ndim; d++)
            len += snprintf(what + len, sizeof what - (size_t)len, "%s%lld", d ? "x" : "=",
                            (long long)dims[d]);
        len += snprintf(what + len, sizeof what - (size_t)len, " perm");
        for (int d = 0; d < ndim; d++)
            len +=
                snprintf(what + len, sizeof what - (size_t)len, "%s%d", d ? "," : "=", p.perm[d]);
        memset(y, 0xAB, nb);
        cuvil_transpose(&p, x, y);
        snprintf(what + len, sizeof what - (size_t)len, " [public]");
        check_bytes(y, ref, nb, what);
        memset(y, 0xAB, nb);
        cuvil_transpose__scalar(&p, x, y);
        snprintf(what + len, sizeof what - (size_t)len, " [__scalar]");
        check_bytes(y, ref, nb, what);
        memset(y, 0xAB, nb);   /* split over a pool of 3 (above 32 KB) */
        const cuvil_pool *old = cuvil_pool_bind(pool3);
        cuvil_transpose(&p, x, y);
        cuvil_pool_bind(old);
        snprintf(what + len, sizeof what - (size_t)len, " [public, 3 threads]");
        check_bytes(y, ref, nb, what);
    } while (next_perm(p.perm, ndim));
    free(x);
    free(y);
    free(ref);
}

static void test_transpose(void) {
    static const int64_t d2[] = {37, 21};
    static const int64_t d3[] = {5, 18, 7};
    static const int64_t d4[] = {2, 3, 17, 20};
    static const int64_t d4b[] = {3, 1, 4, 1};
    static const int64_t d1[] = {9};
    static const int64_t big[] = {3, 85, 203};   /* a detector head's [3, 85, cells]: split over threads */
    static const int64_t es[] = {1, 2, 4, 8, 3};
    for (size_t e = 0; e < sizeof es / sizeof es[0]; e++) {
        run_transpose(2, d2, es[e]);
        run_transpose(3, d3, es[e]);
        run_transpose(4, d4, es[e]);
        run_transpose(4, d4b, es[e]);
        run_transpose(1, d1, es[e]);
        run_transpose(3, big, es[e]);
    }
}

/* ---- Slice ------------------------------------------------------------------------------- */
typedef struct slice_case {
    int ndim;
    int64_t in[4], start[4], step[4], out[4];
} slice_case;

static void test_slice(void) {
    static const slice_case cases[] = {
        {2, {6, 7}, {1, 2}, {1, 1}, {4, 5}},
        {2, {6, 7}, {5, 6}, {-1, -1}, {6, 7}},           /* full reverse */
        {3, {4, 5, 6}, {0, 4, 1}, {2, -2, 2}, {2, 3, 3}},
        {3, {4, 5, 6}, {3, 0, 5}, {-3, 1, -4}, {2, 5, 2}},
        {4, {2, 3, 4, 5}, {0, 0, 0, 0}, {1, 1, 1, 1}, {2, 3, 4, 5}}, /* identity */
        {4, {2, 3, 4, 9}, {1, 1, 0, 8}, {1, 1, 1, -3}, {1, 2, 4, 3}},
        {1, {10}, {9}, {-1}, {10}},
        {2, {5, 4}, {0, 3}, {1, 1}, {5, 0}},              /* empty */
        {3, {3, 4, 20}, {0, 1, 2}, {1, 1, 1}, {3, 2, 16}}, /* contiguous rows */
    };
    static const int64_t es[] = {4, 1, 8, 2};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (size_t e = 0; e < sizeof es / sizeof es[0]; e++) {
            const slice_case *c = &cases[ci];
            cuvil_slice_params p;
            memset(&p, 0, sizeof p);
            p.ndim = c->ndim;
            p.elem_size = es[e];
            int64_t nin = 1, nout = 1;
            for (int d = 0; d < c->ndim; d++) {
                p.in_dims[d] = c->in[d];
                p.out_dims[d] = c->out[d];
                p.starts[d] = c->start[d];
                p.steps[d] = c->step[d];
                nin *= c->in[d];
                nout *= c->out[d];
            }
            unsigned char *x = ktu_alloc((size_t)(nin * es[e]));
            unsigned char *y = ktu_alloc((size_t)(nout * es[e]) + 8),
                          *ref = ktu_alloc((size_t)(nout * es[e]) + 8);
            fill_bytes(x, (size_t)(nin * es[e]));
            int64_t idx[4] = {0};
            for (int64_t t = 0; t < nout; t++) {
                int64_t off = 0;
                for (int d = 0; d < c->ndim; d++) {
                    int64_t s = 1;
                    for (int d2 = d + 1; d2 < c->ndim; d2++) s *= c->in[d2];
                    off += (c->start[d] + idx[d] * c->step[d]) * s;
                }
                memcpy(ref + t * es[e], x + off * es[e], (size_t)es[e]);
                for (int d = c->ndim - 1; d >= 0; d--) {
                    if (++idx[d] < c->out[d]) break;
                    idx[d] = 0;
                }
            }
            memset(ref + nout * es[e], 0xCD, 8);
            for (int v = 0; v < 2; v++) {
                memset(y, 0xCD, (size_t)(nout * es[e]) + 8);
                if (v)
                    cuvil_slice__scalar(&p, x, y);
                else
                    cuvil_slice(&p, x, y);
                char what[64];
                snprintf(what, sizeof what, "slice case %zu es=%lld [%s]", ci, (long long)es[e],
                         v ? "__scalar" : "public");
                check_bytes(y, ref, (size_t)(nout * es[e]) + 8, what);
            }
            free(x);
            free(y);
            free(ref);
        }
}

/* ---- Pad --------------------------------------------------------------------------------- */
static const char *pad_names[] = {"constant", "reflect", "edge", "wrap"};

/* numpy-style padding of one index after cropping: written as loops, not formulas */
static int64_t naive_pad_index(int mode, int64_t in, int64_t pb, int64_t pe, int64_t o) {
    const int64_t lo = pb < 0 ? -pb : 0, len = in - lo - (pe < 0 ? -pe : 0);
    int64_t j = o - (pb > 0 ? pb : 0);
    if (j >= 0 && j < len) return lo + j;
    if (mode == CUVIL_PAD_CONSTANT) return -1;
    if (mode == CUVIL_PAD_EDGE) return lo + (j < 0 ? 0 : len - 1);
    if (mode == CUVIL_PAD_WRAP) {
        while (j < 0) j += len;
        while (j >= len) j -= len;
        return lo + j;
    }
    /* reflect: bounce between the ends without repeating them */
    if (len == 1) return lo;
    int64_t pos = 0, dir = 1;
    const int64_t steps = j < 0 ? -j : j;
    if (j < 0) dir = -1;
    for (int64_t s = 0; s < steps; s++) {
        if (pos + dir < 0 || pos + dir >= len) dir = -dir;
        pos += dir;
    }
    return lo + pos;
}

typedef struct pad_case {
    int ndim;
    int64_t in[4], pb[4], pe[4];
} pad_case;

static void test_pad(void) {
    static const pad_case cases[] = {
        {1, {5}, {2}, {3}},
        {1, {5}, {7}, {9}},                          /* wider than the axis */
        {1, {1}, {2}, {1}},                          /* length-1 axis */
        {2, {4, 6}, {1, 2}, {2, 1}},
        {2, {4, 6}, {-1, 0}, {0, -2}},               /* crops only */
        {2, {5, 6}, {-2, 3}, {4, -1}},               /* crop one side, pad the other */
        {3, {2, 3, 4}, {0, 1, 0}, {1, 0, 3}},
        {4, {1, 2, 5, 6}, {0, 0, 2, 3}, {0, 0, 1, 4}},
        {4, {2, 3, 4, 5}, {1, -1, 2, -2}, {-1, 2, -1, 6}},
        {2, {3, 40}, {0, 5}, {0, 7}},
    };
    for (int mode = 0; mode < 4; mode++)
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const pad_case *c = &cases[ci];
            cuvil_pad_params p;
            memset(&p, 0, sizeof p);
            p.mode = mode;
            p.ndim = c->ndim;
            p.value = 2.5f;
            int64_t nin = 1, nout = 1;
            for (int d = 0; d < c->ndim; d++) {
                p.in_dims[d] = c->in[d];
                p.pad_begin[d] = c->pb[d];
                p.out_dims[d] = c->in[d] + c->pb[d] + c->pe[d];
                nin *= c->in[d];
                nout *= p.out_dims[d];
            }
            float *x = ktu_falloc((size_t)nin), *y = ktu_falloc((size_t)nout);
            ktu_fill(x, (size_t)nin, -1, 1);
            double *ref = malloc((size_t)nout * sizeof(double));
            int64_t idx[4] = {0};
            for (int64_t t = 0; t < nout; t++) {
                int64_t off = 0;
                int inside = 1;
                for (int d = 0; d < c->ndim; d++) {
                    const int64_t i = naive_pad_index(mode, c->in[d], c->pb[d], c->pe[d], idx[d]);
                    if (i < 0) inside = 0;
                    off = off * c->in[d] + (i < 0 ? 0 : i);
                }
                ref[t] = inside ? x[off] : p.value;
                for (int d = c->ndim - 1; d >= 0; d--) {
                    if (++idx[d] < p.out_dims[d]) break;
                    idx[d] = 0;
                }
            }
            for (int v = 0; v < 2; v++) {
                for (int64_t i = 0; i < nout; i++) y[i] = NAN;
                if (v)
                    cuvil_f32_pad__scalar(&p, x, y);
                else
                    cuvil_f32_pad(&p, x, y);
                ktu_check(y, ref, (size_t)nout, 0, 0, "pad %s case %zu [%s]", pad_names[mode], ci,
                          v ? "__scalar" : "public");
            }
            free(x);
            free(y);
            free(ref);
        }
}

/* ---- Concat / Split ------------------------------------------------------------------------ */
static void test_concat_split(void) {
    /* the last two: over 64 KB, split over a pool of 3 at byte ranges that cut pieces and rows */
    static const int64_t chunks[][4] = {{4, 12, 0, 8}, {1, 3, 5, 7}, {64, 4, 4, 100}, {1000, 36, 0, 2052},
                                        {40000, 30000, 1, 20003}};
    static const int64_t outers[] = {1, 3, 17, 40};
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++)
        for (size_t oi = 0; oi < sizeof outers / sizeof outers[0]; oi++) {
            const int64_t outer = outers[oi];
            const int n = 4;
            int64_t row = 0;
            for (int i = 0; i < n; i++) row += chunks[ci][i];
            unsigned char *ins[4], *outs[4];
            for (int i = 0; i < n; i++) {
                ins[i] = ktu_alloc((size_t)(outer * chunks[ci][i]));
                outs[i] = ktu_alloc((size_t)(outer * chunks[ci][i]));
                fill_bytes(ins[i], (size_t)(outer * chunks[ci][i]));
            }
            unsigned char *y = ktu_alloc((size_t)(outer * row)),
                          *ref = ktu_alloc((size_t)(outer * row));
            for (int64_t r = 0, pos = 0; r < outer; r++)
                for (int i = 0; i < n; i++)
                    for (int64_t b = 0; b < chunks[ci][i]; b++)
                        ref[pos++] = ins[i][r * chunks[ci][i] + b];
            for (int pooled = 0; pooled < 2; pooled++) {
                const cuvil_pool *old = cuvil_pool_bind(pooled ? pool3 : NULL);
                memset(y, 0xAB, (size_t)(outer * row));
                cuvil_concat(outer, n, chunks[ci], (const void *const *)ins, y);
                char what[80];
                snprintf(what, sizeof what, "concat chunks %zu outer %lld%s", ci, (long long)outer,
                         pooled ? " [3 threads]" : "");
                check_bytes(y, ref, (size_t)(outer * row), what);
                for (int i = 0; i < n; i++) memset(outs[i], 0xAB, (size_t)(outer * chunks[ci][i]));
                cuvil_split(outer, n, chunks[ci], ref, (void *const *)outs);
                for (int i = 0; i < n; i++) {
                    snprintf(what, sizeof what, "split chunks %zu outer %lld output %d%s", ci, (long long)outer, i,
                             pooled ? " [3 threads]" : "");
                    check_bytes(outs[i], ins[i], (size_t)(outer * chunks[ci][i]), what);
                }
                cuvil_pool_bind(old);
            }
            for (int i = 0; i < n; i++) {
                free(ins[i]);
                free(outs[i]);
            }
            free(y);
            free(ref);
        }
}

/* ---- Gather -------------------------------------------------------------------------------- */
static void test_gather(void) {
    static const int64_t nbs[] = {4, 8, 12, 1, 40};
    static const int64_t idx[] = {3, 0, 3, 5, 1, 2, 4};
    for (size_t bi = 0; bi < sizeof nbs / sizeof nbs[0]; bi++)
        for (int64_t outer = 1; outer <= 3; outer++) {
            cuvil_gather_params p = {outer, 6, nbs[bi], 7};
            const size_t nx = (size_t)(outer * 6 * nbs[bi]), ny = (size_t)(outer * 7 * nbs[bi]);
            unsigned char *x = ktu_alloc(nx), *y = ktu_alloc(ny), *ref = ktu_alloc(ny);
            fill_bytes(x, nx);
            for (int64_t o = 0; o < outer; o++)
                for (int64_t j = 0; j < 7; j++)
                    for (int64_t b = 0; b < nbs[bi]; b++)
                        ref[(o * 7 + j) * nbs[bi] + b] = x[(o * 6 + idx[j]) * nbs[bi] + b];
            cuvil_gather(&p, idx, x, y);
            char what[64];
            snprintf(what, sizeof what, "gather nb=%lld outer=%lld", (long long)nbs[bi],
                     (long long)outer);
            check_bytes(y, ref, ny, what);
            free(x);
            free(y);
            free(ref);
        }
}

/* ---- Sequences ------------------------------------------------------------------------- */
/* Blocks sized exactly (malloc'd: ASan sees a byte past them): elements of [r, 3] float with r
 * up to 4; insert, erase and at at every position, split by lengths, concat and stack, and
 * the refusals (a position out of range, lengths that do not sum, an output over its room). */
static void test_sequences(void) {
    const cuvil_seq_params p3 = {3, 2, 64, 64, 4}, p4 = {4, 2, 128, 64, 4}, p2 = {2, 2, 64, 64, 4};
    float x[3][12], w[12];
    int64_t xd[3][2] = {{2, 3}, {1, 3}, {4, 3}}, wd[2] = {3, 3};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 12; k++) x[i][k] = (float)(100 * i + k);
    for (int k = 0; k < 12; k++) w[k] = (float)(-1 - k);
    unsigned char *S = malloc(64 + 3 * 64), *O = malloc(128 + 4 * 64), *E = malloc(64 + 2 * 64);
    for (int i = 0; i < 3; i++) cuvil_seq_put(&p3, S, 3, i, x[i], xd[i]);
    for (int64_t pos = -5; pos <= 5; pos++) {   /* insert w before pos, then read every element back */
        int bad = cuvil_seq_insert(&p3, S, &p4, O, w, wd, CUVIL_T_I64, &pos);
        ktu_checks++;
        if (bad != (pos < -3 || pos > 3)) ktu_fail("insert at %lld: returned %d", (long long)pos, bad);
        if (bad) continue;
        int64_t at = pos < 0 ? pos + 3 : pos;
        for (int64_t k = 0; k < 4; k++) {
            float y[12];
            int64_t yd[2], cap[2] = {4, 3};
            int src = k < at ? (int)k : k == at ? -1 : (int)k - 1;
            if (cuvil_seq_at(&p4, O, CUVIL_T_I64, &k, y, yd, cap)) ktu_fail("at %lld after insert", (long long)k);
            const int64_t *d = src < 0 ? wd : xd[src];
            ktu_checks++;
            if (yd[0] != d[0] || yd[1] != 3) ktu_fail("insert at %lld: element %lld dims", (long long)pos, (long long)k);
            check_bytes(y, src < 0 ? w : x[src], (size_t)(d[0] * 3 * 4), "an element after insert");
        }
    }
    for (int32_t pos = -4; pos <= 3; pos++) {   /* erase pos, then the first remaining element */
        int bad = cuvil_seq_erase(&p3, S, &p2, E, CUVIL_T_I32, &pos);
        ktu_checks++;
        if (bad != (pos < -3 || pos > 2)) ktu_fail("erase at %d: returned %d", pos, bad);
        if (bad) continue;
        int at = pos < 0 ? pos + 3 : pos, first = at == 0 ? 1 : 0;
        float y[12];
        int64_t yd[2], cap[2] = {4, 3}, zero = 0;
        if (cuvil_seq_at(&p2, E, CUVIL_T_I64, &zero, y, yd, cap)) ktu_fail("at 0 after erase");
        check_bytes(y, x[first], (size_t)(xd[first][0] * 12), "the first element after erase");
    }
    float y[12];
    int64_t yd[2], small[2] = {1, 3}, two = 2, big = INT64_MIN;
    ktu_checks += 2;
    if (!cuvil_seq_at(&p3, S, CUVIL_T_I64, &two, y, yd, small)) ktu_fail("at: an element over the room was copied");
    if (!cuvil_seq_at(&p3, S, CUVIL_T_I64, &big, y, yd, small)) ktu_fail("at INT64_MIN was taken");
    /* concat along axis 0: 2 + 1 + 4 rows */
    float c[7 * 3], want[7 * 3];
    int64_t cd[2], ccap[2] = {7, 3}, ccap_small[2] = {6, 3};
    memcpy(want, x[0], 24);
    memcpy(want + 6, x[1], 12);
    memcpy(want + 9, x[2], 48);
    ktu_checks += 3;
    if (cuvil_seq_concat(&p3, S, 0, 0, c, cd, ccap) || cd[0] != 7 || cd[1] != 3) ktu_fail("concat axis 0");
    check_bytes(c, want, sizeof want, "concat axis 0");
    if (!cuvil_seq_concat(&p3, S, 0, 0, c, cd, ccap_small)) ktu_fail("concat over its room");
    if (!cuvil_seq_concat(&p3, S, 1, 0, c, cd, ccap)) ktu_fail("concat on axis 1 of elements of different rows");
    /* split a [2, 5] by lengths 2, 0, 3 along axis 1, then stack pieces of 1 of a [2, 3] */
    const cuvil_seq_params ps = {3, 2, 64, 64, 4};
    float a[10];
    for (int k = 0; k < 10; k++) a[k] = (float)k;
    int64_t ad[2] = {2, 5}, lens[3] = {2, 0, 3}, bad_lens[3] = {2, 2, 2};
    unsigned char *P = malloc(64 + 3 * 64);
    ktu_checks += 2;
    if (cuvil_seq_split(&ps, P, a, ad, 2, 1, 3, lens, 0, NULL, 0)) ktu_fail("split by lengths");
    const float want2[6] = {2, 3, 4, 7, 8, 9};
    int64_t two2 = 2, cap3[2] = {2, 5};
    if (cuvil_seq_at(&ps, P, CUVIL_T_I64, &two2, y, yd, cap3) || yd[0] != 2 || yd[1] != 3) ktu_fail("the third piece");
    check_bytes(y, want2, sizeof want2, "the third piece");
    ktu_checks += 2;
    if (!cuvil_seq_split(&ps, P, a, ad, 2, 1, 3, bad_lens, 0, NULL, 0)) ktu_fail("split: lengths over the axis");
    int32_t neg[3] = {6, -1, 0};
    if (!cuvil_seq_split(&ps, P, a, ad, 2, 1, 3, NULL, CUVIL_T_I32, neg, 0)) ktu_fail("split: a negative length");
    const cuvil_seq_params pd = {5, 1, 64, 64, 4};
    unsigned char *Q = malloc(64 + 5 * 64);
    int64_t ones[5] = {1, 1, 1, 1, 1}, st_d[2], st_cap[2] = {2, 5};
    float st[10];
    ktu_checks += 2;
    if (cuvil_seq_split(&pd, Q, a, ad, 2, 1, 5, ones, 0, NULL, 1)) ktu_fail("split into pieces of 1 without the axis");
    if (cuvil_seq_concat(&pd, Q, 1, 1, st, st_d, st_cap) || st_d[0] != 2 || st_d[1] != 5) ktu_fail("stack on axis 1");
    check_bytes(st, a, sizeof st, "split then stacked back");
    free(S);
    free(O);
    free(E);
    free(P);
    free(Q);
}

int main(void) {
    test_sequences();
    pool3 = cuvil_pool_create(3, 0, ktu_aligned_alloc, ktu_aligned_free, NULL);
    test_transpose();
    test_slice();
    test_pad();
    test_concat_split();
    test_gather();
    cuvil_pool_destroy(pool3);
    return ktu_finish("test_kernel_data");
}
