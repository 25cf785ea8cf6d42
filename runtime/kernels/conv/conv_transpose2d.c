/*
 * conv_transpose2d.c -- 2-D transposed convolution, NCHW, weights [C, M/group, KH, KW].
 *
 * GEMM + col2im (as Caffe/ONNX Runtime): per image and group,
 *   col[Mg*KH*KW, P] = W_g^T [Mg*KH*KW, Cg] x X_g[Cg, P]
 * for a chunk of P input pixels, then every col row (m, kh, kw) is scatter-added into y at
 * oh = h*stride_h - pad_t + kh*dil_h (likewise ow). y starts as the bias; the activation runs
 * over each finished output plane. Input pixels are taken in chunks so the col buffer (in
 * scratch) stays bounded whatever the image size.
 */
#include <string.h>

#include "../rt_int.h"

#define COL_MAX_FLOATS ((int64_t)1 << 20) /* 4 MiB of col buffer at most */

static int64_t col_chunk(const cuvil_conv_transpose2d_params *p, const cuvil_gemm_blocking *b) {
    const int64_t rows = (p->M / p->group) * p->KH * p->KW;
    const int64_t HW = p->H * p->W;
    int64_t c = COL_MAX_FLOATS / (rows > 0 ? rows : 1);
    c = c / b->uk->nr * b->uk->nr;
    if (c < b->uk->nr) c = b->uk->nr;
    return c < HW ? c : HW;
}

static size_t convt_scratch(const cuvil_conv_transpose2d_params *p, const cuvil_gemm_blocking *b) {
    const int64_t rows = (p->M / p->group) * p->KH * p->KW;
    const int64_t P = col_chunk(p, b);
    if (rows <= 0 || P <= 0) return 0;
    return CUVIL_ALIGN_UP((size_t)(rows * P) * sizeof(float), 64) +
           cuvil_gemm_job_scratch_size(rows, P, p->C / p->group, b);
}

size_t cuvil_f32_conv_transpose2d_scratch_size_ex(const cuvil_conv_transpose2d_params *p, const cuvil_gemm_blocking *b) {
    return convt_scratch(p, b);
}

size_t cuvil_f32_conv_transpose2d_scratch_size(const cuvil_conv_transpose2d_params *p) {
    return convt_scratch(p, cuvil_gemm_default_blocking());
}

void cuvil_f32_conv_transpose2d(const cuvil_conv_transpose2d_params *p, const float *x,
                                const float *w, const float *bias, float *y, void *scratch) {
    const cuvil_gemm_blocking *blk = cuvil_gemm_default_blocking();
    const int64_t G = p->group, Cg = p->C / G, Mg = p->M / G;
    const int64_t KH = p->KH, KW = p->KW, KK = KH * KW, H = p->H, W = p->W, HW = H * W;
    const int64_t OH = p->OH, OW = p->OW, OHW = OH * OW;
    const int64_t sh = p->stride_h, sw = p->stride_w, dh = p->dil_h, dw = p->dil_w;
    if (p->N <= 0 || p->M <= 0 || OHW <= 0) return;
    const int64_t rows = Mg * KK, P = col_chunk(p, blk);
    float *col = (float *)scratch;
    void *gscratch = (char *)scratch + CUVIL_ALIGN_UP((size_t)(rows * P) * sizeof(float), 64);

    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = rows;
    j.K = Cg;
    j.lda = rows;
    j.trans_a = 1;
    j.alpha = 1.0f;
    j.ldb = HW;
    j.act.act = CUVIL_ACT_NONE;
    /* kernel = stride, no padding or dilation, output exactly the input times the stride (a
     * UNet's or a text detector's 2x2 stride-2 upsampling): every output is one product, so
     * col2im writes bias + product once instead of adding it to a plane filled with the bias
     * first (the same one addition; 64 -> 32 2x2 s2 at 56x56, AVX2, one thread, 0.90 -> 0.81 ms
     * against ONNX Runtime's 0.68) */
    const int tiles = KH == sh && KW == sw && dh == 1 && dw == 1 && p->pad_t == 0 && p->pad_l == 0 && OH == H * KH &&
                      OW == W * KW;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t g = 0; g < G; g++) {
            float *yg = y + (n * p->M + g * Mg) * OHW;
            for (int64_t m = 0; m < Mg && !(tiles && HW > 0 && Cg > 0); m++) {
                const float b = bias ? bias[g * Mg + m] : 0.0f;
                float *ym = yg + m * OHW;
                for (int64_t i = 0; i < OHW; i++) ym[i] = b;
            }
            if (HW > 0 && Cg > 0)
                for (int64_t p0 = 0; p0 < HW; p0 += P) {
                    const int64_t pc = cuvil_min_i64(P, HW - p0);
                    j.N = pc;
                    j.A = w + g * Cg * rows;
                    j.B = x + (n * p->C + g * Cg) * HW + p0;
                    j.C = col;
                    j.ldc = pc;
                    cuvil_f32_gemm_run(&j, blk, gscratch);
                    /* col2im over the input rows this chunk touches */
                    for (int64_t r = 0; r < rows; r++) {
                        const int64_t m = r / KK, kh = (r / KW) % KH, kw = r % KW;
                        const float *cr = col + r * pc;
                        float *ym = yg + m * OHW;
                        for (int64_t q = p0; q < p0 + pc;) {
                            const int64_t h = q / W, w0 = q % W;
                            const int64_t len = cuvil_min_i64(W - w0, p0 + pc - q);
                            const int64_t oh = h * sh - p->pad_t + kh * dh;
                            if (oh >= 0 && oh < OH) {
                                float *yr = ym + oh * OW;
                                const int64_t off = w0 * sw - p->pad_l + kw * dw;
                                /* t in [0, len) writes ow = off + t*sw; keep 0 <= ow < OW */
                                int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
                                int64_t hi = OW - off > 0 ? (OW - off + sw - 1) / sw : 0;
                                if (hi > len) hi = len;
                                const float *cq = cr + (q - p0);
                                if (tiles) {
                                    const float b = bias ? bias[g * Mg + m] : 0.0f;
                                    for (int64_t t = lo; t < hi; t++) yr[off + t * sw] = b + cq[t];
                                } else if (sw == 1)
                                    for (int64_t t = lo; t < hi; t++) yr[off + t] += cq[t];
                                else
                                    for (int64_t t = lo; t < hi; t++) yr[off + t * sw] += cq[t];
                            }
                            q += len;
                        }
                    }
                }
            if (p->act.act != CUVIL_ACT_NONE) cuvil_f32_unary(&p->act, yg, yg, (size_t)(Mg * OHW));
        }
}

void cuvil_f32_conv_transpose2d__scalar(const cuvil_conv_transpose2d_params *p,
                                        const float *x, const float *w, const float *bias,
                                        float *y) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, OHW = p->OH * p->OW;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t i = 0; i < OHW; i++) y[(n * p->M + m) * OHW + i] = bias ? bias[m] : 0.0f;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t c = 0; c < p->C; c++) {
            const int64_t g = c / Cg;
            for (int64_t h = 0; h < p->H; h++)
                for (int64_t wi = 0; wi < p->W; wi++) {
                    const float xv = x[((n * p->C + c) * p->H + h) * p->W + wi];
                    for (int64_t mm = 0; mm < Mg; mm++)
                        for (int64_t kh = 0; kh < p->KH; kh++) {
                            const int64_t oh = h * p->stride_h - p->pad_t + kh * p->dil_h;
                            if (oh < 0 || oh >= p->OH) continue;
                            for (int64_t kw = 0; kw < p->KW; kw++) {
                                const int64_t ow = wi * p->stride_w - p->pad_l + kw * p->dil_w;
                                if (ow < 0 || ow >= p->OW) continue;
                                y[((n * p->M + g * Mg + mm) * p->OH + oh) * p->OW + ow] +=
                                    xv * w[((c * Mg + mm) * p->KH + kh) * p->KW + kw];
                            }
                        }
                }
        }
    for (int64_t i = 0; i < p->N * p->M * OHW; i++) y[i] = cuvil_f32_act1(&p->act, y[i]);
}
