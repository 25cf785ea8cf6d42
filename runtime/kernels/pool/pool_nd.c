/*
 * pool_nd.c -- pooling over any number of spatial dims (cuvil_pool_nd_params): MaxPool with
 * its Indices output and of int8/uint8, AveragePool, LpPool of any p. A direct loop over the
 * output positions and, for each, over the window's taps: the forms the 2-D kernel
 * (pool2d.c) leaves out, where correctness matters more than speed; 2-D MaxPool of 8-bit values
 * (a QOperator model's, 130x slower that way than the float kernel) has a row-wise loop.
 *
 * Semantics (as ONNX Runtime and ONNX's reference): taps outside the input are skipped; the
 * average divisor is the number of taps inside the input, or with count_include_pad inside
 * the padded extent [-pb, in + pe); LpPool is (sum |x|^p)^(1/p) over the taps inside; the
 * index of a max is its flat offset in x, batch and channel included, the spatial part
 * row-major (storage_order 0) or column-major (1); the first of equal maxima wins.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../rt_int.h"

static double load(int dtype, const void *x, int64_t i) {
    switch (dtype) {
    case CUVIL_T_U8: return ((const uint8_t *)x)[i];
    case CUVIL_T_I8: return ((const int8_t *)x)[i];
    default: return ((const float *)x)[i];
    }
}

static void store(int dtype, void *y, int64_t i, double v) {
    switch (dtype) {
    case CUVIL_T_U8: ((uint8_t *)y)[i] = (uint8_t)v; break;
    case CUVIL_T_I8: ((int8_t *)y)[i] = (int8_t)v; break;
    default: ((float *)y)[i] = (float)v; break;
    }
}

/* 2-D MaxPool of 8-bit values without Indices (a QOperator model's): per output row, the max of
 * its window's input rows into a padded row (a vector loop), then each output the max of its
 * taps along that row. Values are taken as v ^ flip (0x80 for int8) so that one unsigned max
 * serves both types. Returns 0 (nothing done) when the padded row does not fit its buffer. */
#define MP8_ROW 2048
static int maxpool2d_8(const cuvil_pool_nd_params *p, const uint8_t *x, uint8_t *y) {
    const int64_t H = p->in[0], W = p->in[1], OH = p->out[0], OW = p->out[1];
    const int64_t kh = p->k[0], kw = p->k[1], sh = p->s[0], sw = p->s[1], dh = p->d[0], dw = p->d[1], pt = p->pb[0],
                  pl = p->pb[1];
    const int64_t span = OW > 0 ? (OW - 1) * sw + (kw - 1) * dw + 1 : 0, len = span > pl + W ? span : pl + W;
    if (len > MP8_ROW || pl < 0 || pt < 0) return 0;
    const uint8_t flip = p->dtype == CUVIL_T_I8 ? 0x80 : 0;
    uint8_t row[MP8_ROW];
    for (int64_t nc = 0; nc < p->N * p->C; nc++) {
        const uint8_t *xc = x + nc * H * W;
        uint8_t *yc = y + nc * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            memset(row, 0, (size_t)len);   /* (0 after the flip: the type's lowest) */
            int any = 0;
            for (int64_t t = 0; t < kh; t++) {
                const int64_t ih = oh * sh - pt + t * dh;
                if (ih < 0 || ih >= H) continue;
                const uint8_t *xr = xc + ih * W;
                uint8_t *restrict r = row + pl;
                for (int64_t i = 0; i < W; i++) {
                    const uint8_t v = (uint8_t)(xr[i] ^ flip);
                    r[i] = v > r[i] ? v : r[i];
                }
                any = 1;
            }
            for (int64_t ow = 0; ow < OW; ow++) {
                uint8_t m = 0;
                for (int64_t t = 0; any && t < kw; t++) {
                    const uint8_t v = row[ow * sw + t * dw];
                    m = v > m ? v : m;
                }
                yc[oh * OW + ow] = (uint8_t)(m ^ flip);
            }
        }
    }
    return 1;
}

void cuvil_pool_nd(const cuvil_pool_nd_params *p, const void *x, void *y, int64_t *indices) {
    const int nsp = p->nsp;
    if (nsp == 2 && p->kind == CUVIL_POOLND_MAX && !indices && (p->dtype == CUVIL_T_U8 || p->dtype == CUVIL_T_I8) &&
        maxpool2d_8(p, x, y))
        return;
    int64_t in_sz = 1, out_sz = 1, win = 1;
    for (int i = 0; i < nsp; i++) {
        in_sz *= p->in[i];
        out_sz *= p->out[i];
        win *= p->k[i];
    }
    const double lowest = p->dtype == CUVIL_T_U8 ? 0.0 : p->dtype == CUVIL_T_I8 ? -128.0 : -FLT_MAX;
    for (int64_t nc = 0; nc < p->N * p->C; nc++) {
        const int64_t xbase = nc * in_sz;
        for (int64_t o = 0; o < out_sz; o++) {
            int64_t oi[CUVIL_ND_MAX], start[CUVIL_ND_MAX];
            for (int64_t r = o, i = nsp - 1; i >= 0; i--) {
                oi[i] = r % p->out[i];
                r /= p->out[i];
                start[i] = oi[i] * p->s[i] - p->pb[i];
            }
            double acc = p->kind == CUVIL_POOLND_MAX ? lowest : 0.0;
            int64_t best = -1, cnt = 0;
            for (int64_t t = 0; t < win; t++) {
                /* the tap's coordinates, its row-major (rm) and column-major (cm) offsets */
                int64_t ii[CUVIL_ND_MAX];
                int inside = 1;
                for (int64_t r = t, i = nsp - 1; i >= 0; i--) {
                    ii[i] = start[i] + r % p->k[i] * p->d[i];
                    r /= p->k[i];
                    inside &= ii[i] >= 0 && ii[i] < p->in[i];
                }
                if (!inside) continue;
                int64_t rm = 0, cm = 0, cs = 1;
                for (int i = 0; i < nsp; i++) {
                    rm = rm * p->in[i] + ii[i];
                    cm += ii[i] * cs;
                    cs *= p->in[i];
                }
                const double v = load(p->dtype, x, xbase + rm);
                cnt++;
                if (p->kind == CUVIL_POOLND_MAX) {
                    if (best < 0 || v > acc) {
                        acc = v;
                        best = xbase + (p->storage_order ? cm : rm);
                    }
                } else if (p->kind == CUVIL_POOLND_AVG) {
                    acc += v;
                } else {
                    acc += p->p == 1 ? fabs(v) : p->p == 2 ? v * v : pow(fabs(v), (double)p->p);
                }
            }
            if (p->kind == CUVIL_POOLND_AVG) {
                if (p->count_include_pad) {
                    cnt = 1;
                    for (int i = 0; i < nsp; i++)
                        cnt *= cuvil_count_taps(start[i], p->k[i], p->d[i], -p->pb[i], p->in[i] + p->pe[i]);
                }
                acc = cnt > 0 ? acc / (double)cnt : 0.0;
            } else if (p->kind == CUVIL_POOLND_LP) {
                acc = p->p == 1 ? acc : p->p == 2 ? sqrt(acc) : pow(acc, 1.0 / (double)p->p);
            }
            store(p->dtype, y, nc * out_sz + o, acc);
            if (indices) indices[nc * out_sz + o] = best;
        }
    }
}
