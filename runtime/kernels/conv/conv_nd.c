/*
 * conv_nd.c -- convolution and its transpose over any number of spatial dims
 * (cuvil_conv_nd_params), float32, NC<spatial> layout: the 3-D (and wider) forms the 2-D
 * kernels leave out.
 *
 * Convolution: per batch item and group, vol2col writes the input taps of every output
 * position as a [C/group * taps, outputs] matrix and one GEMM multiplies the group's weights
 * [M/group, C/group * taps] by it, the bias added by the GEMM. Transpose: per batch item and
 * group one GEMM forms w' x ([M/group * taps, inputs]) and col2vol adds each column into the
 * output positions its taps reach. The scalar references are direct loops.
 */
#include <string.h>

#include "../rt_int.h"

typedef struct nd_sizes {
    int64_t in, out, win, cg, mg;
} nd_sizes;

static nd_sizes sizes(const cuvil_conv_nd_params *p) {
    nd_sizes z = {1, 1, 1, p->C / p->group, p->M / p->group};
    for (int i = 0; i < p->nsp; i++) {
        z.in *= p->in[i];
        z.out *= p->out[i];
        z.win *= p->k[i];
    }
    return z;
}

/* The GEMM of one group: [rows, K] (or its transpose) times [K, cols]. */
static cuvil_gemm_params gemm_of(int64_t rows, int64_t cols, int64_t K, int trans_a, int64_t lda, int with_bias) {
    cuvil_gemm_params g;
    memset(&g, 0, sizeof g);
    g.M = rows;
    g.N = cols;
    g.K = K;
    g.lda = lda;
    g.ldb = cols;
    g.ldc = cols;
    g.trans_a = trans_a;
    g.alpha = 1.0f;
    g.beta = with_bias ? 1.0f : 0.0f;
    g.bias_rs = 1;   /* one bias per row (output channel) */
    g.batch = 1;
    return g;
}

static cuvil_gemm_params group_gemm(const cuvil_conv_nd_params *p, int with_bias) {
    const nd_sizes z = sizes(p);
    return p->transpose ? gemm_of(z.mg * z.win, z.in, z.cg, 1, z.mg * z.win, 0)
                        : gemm_of(z.mg, z.out, z.cg * z.win, 0, z.cg * z.win, with_bias);
}

size_t cuvil_f32_conv_nd_scratch_size_ex(const cuvil_conv_nd_params *p, const cuvil_gemm_blocking *b) {
    const nd_sizes z = sizes(p);
    const int64_t col = p->transpose ? z.mg * z.win * z.in : z.cg * z.win * z.out;
    const cuvil_gemm_params g = group_gemm(p, 1);
    return CUVIL_ALIGN_UP((size_t)col * sizeof(float), 64) + cuvil_f32_gemm_scratch_size_ex(&g, b);
}

size_t cuvil_f32_conv_nd_scratch_size(const cuvil_conv_nd_params *p) {
    return cuvil_f32_conv_nd_scratch_size_ex(p, cuvil_gemm_default_blocking());
}

/* Coordinates of flat position r of a box with extents ext. */
static void unflatten(int nsp, int64_t r, const int64_t *ext, int64_t *c) {
    for (int i = nsp - 1; i >= 0; i--) {
        c[i] = r % ext[i];
        r /= ext[i];
    }
}

/* The input position that tap t of output position o reads along every dim; returns its flat
 * offset, or -1 when it is in the padding. */
static int64_t tap_src(const cuvil_conv_nd_params *p, const int64_t *oc, const int64_t *tc) {
    int64_t off = 0;
    for (int i = 0; i < p->nsp; i++) {
        const int64_t ii = oc[i] * p->s[i] - p->pb[i] + tc[i] * p->d[i];
        if (ii < 0 || ii >= p->in[i]) return -1;
        off = off * p->in[i] + ii;
    }
    return off;
}

/* The output position that tap t of input position i reaches (the transpose); -1 outside. */
static int64_t tap_dst(const cuvil_conv_nd_params *p, const int64_t *ic, const int64_t *tc) {
    int64_t off = 0;
    for (int i = 0; i < p->nsp; i++) {
        const int64_t oo = ic[i] * p->s[i] - p->pb[i] + tc[i] * p->d[i];
        if (oo < 0 || oo >= p->out[i]) return -1;
        off = off * p->out[i] + oo;
    }
    return off;
}

void cuvil_f32_conv_nd(const cuvil_conv_nd_params *p, const float *x, const float *w, const float *bias, float *y,
                       void *scratch) {
    const nd_sizes z = sizes(p);
    float *col = scratch;
    const int64_t col_n = p->transpose ? z.mg * z.win * z.in : z.cg * z.win * z.out;
    void *gs = (char *)scratch + CUVIL_ALIGN_UP((size_t)col_n * sizeof(float), 64);
    const cuvil_gemm_params gp = group_gemm(p, bias != NULL);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t g = 0; g < p->group; g++) {
            const float *xg = x + (n * p->C + g * z.cg) * z.in;
            float *yg = y + (n * p->M + g * z.mg) * z.out;
            if (!p->transpose) {
                for (int64_t c = 0; c < z.cg; c++)
                    for (int64_t t = 0; t < z.win; t++) {
                        int64_t tc[CUVIL_ND_MAX], oc[CUVIL_ND_MAX];
                        unflatten(p->nsp, t, p->k, tc);
                        float *row = col + (c * z.win + t) * z.out;
                        for (int64_t o = 0; o < z.out; o++) {
                            unflatten(p->nsp, o, p->out, oc);
                            const int64_t src = tap_src(p, oc, tc);
                            row[o] = src < 0 ? 0.0f : xg[c * z.in + src];
                        }
                    }
                cuvil_f32_gemm(&gp, w + g * z.mg * z.cg * z.win, col, bias ? bias + g * z.mg : NULL, yg, gs);
                continue;
            }
            cuvil_f32_gemm(&gp, w + g * z.cg * z.mg * z.win, xg, NULL, col, gs);
            for (int64_t m = 0; m < z.mg; m++) {
                const float b = bias ? bias[g * z.mg + m] : 0.0f;
                for (int64_t o = 0; o < z.out; o++) yg[m * z.out + o] = b;
                for (int64_t t = 0; t < z.win; t++) {
                    int64_t tc[CUVIL_ND_MAX], ic[CUVIL_ND_MAX];
                    unflatten(p->nsp, t, p->k, tc);
                    const float *row = col + (m * z.win + t) * z.in;
                    for (int64_t i = 0; i < z.in; i++) {
                        unflatten(p->nsp, i, p->in, ic);
                        const int64_t dst = tap_dst(p, ic, tc);
                        if (dst >= 0) yg[m * z.out + dst] += row[i];
                    }
                }
            }
        }
}

void cuvil_f32_conv_nd__scalar(const cuvil_conv_nd_params *p, const float *x, const float *w, const float *bias,
                               float *y) {
    const nd_sizes z = sizes(p);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t o = 0; o < z.out; o++) y[(n * p->M + m) * z.out + o] = bias ? bias[m] : 0.0f;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t g = 0; g < p->group; g++)
            for (int64_t c = 0; c < z.cg; c++)
                for (int64_t m = 0; m < z.mg; m++)
                    for (int64_t t = 0; t < z.win; t++) {
                        int64_t tc[CUVIL_ND_MAX], pc[CUVIL_ND_MAX];
                        unflatten(p->nsp, t, p->k, tc);
                        const int64_t ci = g * z.cg + c, mi = g * z.mg + m;
                        const float wv = p->transpose ? w[((ci * z.mg) + m) * z.win + t] : w[((mi * z.cg) + c) * z.win + t];
                        const float *xc = x + (n * p->C + ci) * z.in;
                        float *ym = y + (n * p->M + mi) * z.out;
                        if (!p->transpose) {
                            for (int64_t o = 0; o < z.out; o++) {
                                unflatten(p->nsp, o, p->out, pc);
                                const int64_t src = tap_src(p, pc, tc);
                                if (src >= 0) ym[o] += xc[src] * wv;
                            }
                        } else {
                            for (int64_t i = 0; i < z.in; i++) {
                                unflatten(p->nsp, i, p->in, pc);
                                const int64_t dst = tap_dst(p, pc, tc);
                                if (dst >= 0) ym[dst] += xc[i] * wv;
                            }
                        }
                    }
}
