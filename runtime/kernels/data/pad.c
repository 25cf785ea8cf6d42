/*
 * pad.c -- Pad (constant, reflect, edge, wrap), float32, with negative pads.
 *
 * As ONNX Runtime does, negative pads crop first and the positive pads are then applied to
 * the cropped tensor, so reflect/edge/wrap only ever see the kept region. Along an axis with
 * kept region [lo, lo + len) of the input and pb = max(pad_begin, 0), output index o maps to
 * j = o - pb; inside [0, len) that is input lo + j, outside it the mode decides (constant: no
 * source; edge: clamp; reflect: mirror without repeating the edge, period 2(len-1); wrap:
 * modulo len). Reflect and wrap go on periodically when a pad exceeds the axis (numpy's rule).
 *
 * The optimised version maps each output row once (all axes but the last), then copies the
 * row's interior with memcpy and maps only its pad columns.
 */
#include <string.h>

#include "../rt_int.h"

typedef struct axis_map {
    int64_t lo, len, pb;
} axis_map;

static axis_map make_map(const cuvil_pad_params *p, int d) {
    const int64_t in = p->in_dims[d], pb = p->pad_begin[d];
    const int64_t pe = p->out_dims[d] - in - pb;
    axis_map m;
    m.lo = pb < 0 ? -pb : 0;
    m.len = in - m.lo - (pe < 0 ? -pe : 0);
    m.pb = pb > 0 ? pb : 0;
    return m;
}

static inline int64_t pmod(int64_t a, int64_t n) {
    int64_t r = a % n;
    return r < 0 ? r + n : r;
}

/* input index for output index o along an axis, or -1 for the constant */
static inline int64_t map_index(int mode, const axis_map *m, int64_t o) {
    int64_t j = o - m->pb;
    if (j >= 0 && j < m->len) return m->lo + j;
    if (m->len <= 0) return -1;
    switch (mode) {
    case CUVIL_PAD_EDGE: j = j < 0 ? 0 : m->len - 1; break;
    case CUVIL_PAD_REFLECT:
        if (m->len == 1) {
            j = 0;
        } else {
            const int64_t period = 2 * (m->len - 1);
            j = pmod(j, period);
            if (j >= m->len) j = period - j;
        }
        break;
    case CUVIL_PAD_WRAP: j = pmod(j, m->len); break;
    default: return -1;
    }
    return m->lo + j;
}

int cuvil_pad_rt(cuvil_pad_params *p, int idx_t, const void *pads, int n_pads, const void *axes, int n_axes,
                 const int64_t *hi) {
    const int r = p->ndim, nax = axes ? n_axes : r;
    int seen[CUVIL_RT_MAX_DIMS] = {0};
    int64_t pe[CUVIL_RT_MAX_DIMS] = {0};
    if (n_pads != 2 * nax || nax > r) return 1;
    for (int d = 0; d < r; d++) p->pad_begin[d] = 0;
    for (int i = 0; i < nax; i++) {
        int64_t ax = axes ? cuvil_ld_index(idx_t, axes, i) : i;
        if (ax < 0) ax += r;
        if (ax < 0 || ax >= r || seen[ax]) return 1;
        seen[ax] = 1;
        p->pad_begin[ax] = cuvil_ld_index(idx_t, pads, i);
        pe[ax] = cuvil_ld_index(idx_t, pads, nax + i);
    }
    for (int d = 0; d < r; d++) {
        const int64_t in = p->in_dims[d], b = p->pad_begin[d], e = pe[d];
        if (b < -in || e < -in || b > hi[d] || e > hi[d]) return 1;   /* (no overflow below) */
        const int64_t out = in + b + e, kept = in + (b < 0 ? b : 0) + (e < 0 ? e : 0);
        if (out < 0 || kept < 0 || out > hi[d]) return 1;
        if (p->mode != CUVIL_PAD_CONSTANT && (b > 0 || e > 0)) {
            const int64_t lim = p->mode == CUVIL_PAD_REFLECT ? kept - 1 : p->mode == CUVIL_PAD_WRAP ? kept : INT64_MAX;
            if (kept == 0 || b > lim || e > lim) return 1;
        }
        p->out_dims[d] = out;
    }
    return 0;
}

void cuvil_pad_t(const cuvil_pad_params *p, size_t es, const void *x, void *y, const void *value) {
    axis_map maps[CUVIL_RT_MAX_DIMS] = {{0, 0, 0}};
    int64_t xs[CUVIL_RT_MAX_DIMS], idx[CUVIL_RT_MAX_DIMS] = {0};
    int64_t st = 1, total = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        xs[d] = st;
        st *= p->in_dims[d];
        maps[d] = make_map(p, d);
    }
    for (int d = 0; d < p->ndim; d++) total *= p->out_dims[d];
    for (int64_t t = 0; t < total; t++) {
        int64_t off = 0;
        int inside = 1;
        for (int d = 0; d < p->ndim && inside; d++) {
            const int64_t i = map_index(p->mode, &maps[d], idx[d]);
            if (i < 0)
                inside = 0;
            else
                off += i * xs[d];
        }
        char *o = (char *)y + t * (int64_t)es;
        if (inside) memcpy(o, (const char *)x + off * (int64_t)es, es);
        else if (value) memcpy(o, value, es);
        else memset(o, 0, es);
        for (int d = p->ndim - 1; d >= 0; d--) {
            if (++idx[d] < p->out_dims[d]) break;
            idx[d] = 0;
        }
    }
}

/* The naive reference of cuvil_f32_pad: the typed walk, element by element. */
void cuvil_f32_pad__scalar(const cuvil_pad_params *p, const float *x, float *y) {
    cuvil_pad_t(p, sizeof(float), x, y, &p->value);
}

void cuvil_f32_pad(const cuvil_pad_params *p, const float *x, float *y) {
    const int nd = p->ndim;
    if (nd == 0) {
        y[0] = x[0];
        return;
    }
    axis_map maps[CUVIL_RT_MAX_DIMS] = {{0, 0, 0}};
    int64_t xs[CUVIL_RT_MAX_DIMS], idx[CUVIL_RT_MAX_DIMS] = {0};
    int64_t st = 1, rows = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (p->out_dims[d] <= 0) return;
        xs[d] = st;
        st *= p->in_dims[d];
        maps[d] = make_map(p, d);
    }
    for (int d = 0; d < nd - 1; d++) rows *= p->out_dims[d];
    const int64_t OL = p->out_dims[nd - 1];
    const axis_map *ml = &maps[nd - 1];
    /* interior columns [c0, c1) copy input [lo, lo + c1 - c0) */
    const int64_t c0 = cuvil_min_i64(ml->pb, OL);
    const int64_t c1 = cuvil_min_i64(ml->pb + cuvil_max_i64(ml->len, 0), OL);
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * OL;
        int64_t off = 0;
        int inside = 1;
        for (int d = 0; d < nd - 1 && inside; d++) {
            const int64_t i = map_index(p->mode, &maps[d], idx[d]);
            if (i < 0)
                inside = 0;
            else
                off += i * xs[d];
        }
        if (!inside) {
            const float v = p->value;
            for (int64_t c = 0; c < OL; c++) yr[c] = v;
        } else {
            const float *xr = x + off;
            for (int64_t c = 0; c < c0; c++) {
                const int64_t i = map_index(p->mode, ml, c);
                yr[c] = i < 0 ? p->value : xr[i];
            }
            if (c1 > c0) memcpy(yr + c0, xr + ml->lo, (size_t)(c1 - c0) * sizeof(float));
            for (int64_t c = c1 > c0 ? c1 : c0; c < OL; c++) {
                const int64_t i = map_index(p->mode, ml, c);
                yr[c] = i < 0 ? p->value : xr[i];
            }
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < p->out_dims[d]) break;
            idx[d] = 0;
        }
    }
}
