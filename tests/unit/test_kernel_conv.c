/*
 * test_kernel_conv.c -- cuvil_f32_conv2d and cuvil_f32_conv_transpose2d (optimised, __scalar,
 * and conv2d through every GEMM microkernel with shrunken cache blocks) against naive
 * double-precision loops written here.
 *
 * Conv2d cases cover the three kernel paths (1x1 GEMM, im2col GEMM, depthwise direct loop with
 * its fixed 3x3/5x5 and generic variants): 1x1 with and without stride/padding, 3x3/5x5/7x7,
 * stride 2, asymmetric and bottom/right-only padding (ceil-mode shapes), dilations, groups,
 * depthwise with channel multipliers, 1-D convs, batches, bias/residual combinations including
 * an in-place residual (residual == y), and every activation (on small-integer data, so the
 * sums are exact and only the activation's rounding is compared).
 */
#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

typedef struct conv_case {
    int64_t N, C, H, W, M, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, group;
} conv_case;

static cuvil_conv2d_params to_params(const conv_case *c) {
    cuvil_conv2d_params p;
    memset(&p, 0, sizeof p);
    p.N = c->N;
    p.C = c->C;
    p.H = c->H;
    p.W = c->W;
    p.M = c->M;
    p.KH = c->KH;
    p.KW = c->KW;
    p.stride_h = c->sh;
    p.stride_w = c->sw;
    p.pad_t = c->pt;
    p.pad_l = c->pl;
    p.dil_h = c->dh;
    p.dil_w = c->dw;
    p.group = c->group;
    p.OH = (c->H + c->pt + c->pb - (c->dh * (c->KH - 1) + 1)) / c->sh + 1;
    p.OW = (c->W + c->pl + c->pr - (c->dw * (c->KW - 1) + 1)) / c->sw + 1;
    return p;
}

static void naive_conv(const cuvil_conv2d_params *p, const float *x, const float *w,
                       const float *bias, const float *res, double *ref) {
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t oh = 0; oh < p->OH; oh++)
                for (int64_t ow = 0; ow < p->OW; ow++) {
                    double acc = bias ? bias[m] : 0.0;
                    const int64_t g = m / Mg;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t kh = 0; kh < p->KH; kh++)
                            for (int64_t kw = 0; kw < p->KW; kw++) {
                                const int64_t ih = oh * p->stride_h - p->pad_t + kh * p->dil_h;
                                const int64_t iw = ow * p->stride_w - p->pad_l + kw * p->dil_w;
                                if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
                                acc +=
                                    (double)x[((n * p->C + g * Cg + c) * p->H + ih) * p->W + iw] *
                                    w[((m * Cg + c) * p->KH + kh) * p->KW + kw];
                            }
                    const int64_t yi = ((n * p->M + m) * p->OH + oh) * p->OW + ow;
                    if (res) acc += res[yi];
                    ref[yi] = ktu_actp(&p->act, acc);
                }
}

static const cuvil_gemm_blocking *tiny_blocking(int uk) {
    static cuvil_gemm_blocking b[8];
    b[uk].uk = &cuvil_f32_gemm_ukernels[uk];
    b[uk].mc = b[uk].uk->mr + 1;
    b[uk].kc = 5;
    b[uk].nc = 2 * b[uk].uk->nr;
    return &b[uk];
}

/* res_mode: 0 none, 1 separate buffer, 2 in place (residual == y) */
/* y before a run for res_mode: the residual itself in place (2), else NaN; returns the
 * residual argument (NULL, res, or y). */
static const float *start_y(int res_mode, const float *res, float *y, size_t ny) {
    if (res_mode == 2) {
        memcpy(y, res, ny * sizeof(float));
        return y;
    }
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    return res_mode == 1 ? res : NULL;
}

/* cuvil_f32_conv2d_prepacked with algo on weights packed for (mr, kc), on `threads` threads
 * (a pool when more than 1), checked against ref. */
static void run_prepacked(const cuvil_conv2d_params *p, int64_t algo, int64_t mr, int64_t kc, int threads, const float *x,
                          const float *w, const float *bias, const float *r, float *y, const double *ref, size_t ny,
                          double rtol, double atol, const char *label, const char *what) {
    cuvil_conv2d_params pp = *p;
    pp.algo = algo;
    pp.packed_mr = mr;
    pp.packed_kc = kc;
    size_t nf = cuvil_f32_conv2d_packed_floats(&pp), nt = cuvil_f32_conv2d_pack_tmp_floats(&pp);
    float *wp = nf ? ktu_falloc(nf) : NULL, *tmp = nt ? ktu_falloc(nt) : NULL;
    if (nf) cuvil_f32_conv2d_pack(&pp, w, wp, tmp);
    free(tmp);
    const size_t per = CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size(&pp), 64);
    void *scratch = ktu_alloc((size_t)threads * per);
    cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
    if (threads > 1 && !pool) ktu_fail("%s: no thread pool", label);
    const cuvil_pool *prev = cuvil_pool_bind(pool);
    cuvil_f32_conv2d_prepacked(&pp, x, nf ? wp : w, bias, r, y, scratch);
    cuvil_pool_bind(prev);
    cuvil_pool_destroy(pool);
    ktu_check(y, ref, ny, rtol, atol, "%s [%s mr=%lld kc=%lld, %d thread%s]", label, what, (long long)mr, (long long)kc,
              threads, threads > 1 ? "s" : "");
    free(wp);
    free(scratch);
}

static void run_conv(const conv_case *cc, int with_bias, int res_mode, int act, int int_data) {
    cuvil_conv2d_params p = to_params(cc);
    p.act = ktu_act_params(act);
    char label[300];
    snprintf(label, sizeof label,
             "conv N=%lld C=%lld %lldx%lld M=%lld k=%lldx%lld s=%lld,%lld pads=%lld,%lld,%lld,%lld "
             "dil=%lld,%lld g=%lld bias=%d res=%d act=%s",
             (long long)cc->N, (long long)cc->C, (long long)cc->H, (long long)cc->W,
             (long long)cc->M, (long long)cc->KH, (long long)cc->KW, (long long)cc->sh,
             (long long)cc->sw, (long long)cc->pt, (long long)cc->pl, (long long)cc->pb,
             (long long)cc->pr, (long long)cc->dh, (long long)cc->dw, (long long)cc->group,
             with_bias, res_mode, cuvil_act_names[act]);
    const size_t nx = (size_t)(p.N * p.C * p.H * p.W);
    const size_t nw = (size_t)(p.M * (p.C / p.group) * p.KH * p.KW);
    const size_t ny = (size_t)(p.N * p.M * p.OH * p.OW);
    float *x = ktu_falloc(nx), *w = ktu_falloc(nw), *b = ktu_falloc((size_t)p.M);
    float *res = ktu_falloc(ny), *y = ktu_falloc(ny);
    if (int_data) {
        ktu_fill_int(x, nx, 2);
        ktu_fill_int(w, nw, 2);
        ktu_fill_int(b, (size_t)p.M, 3);
        ktu_fill_int(res, ny, 3);
    } else {
        ktu_fill(x, nx, -1, 1);
        ktu_fill(w, nw, -1, 1);
        ktu_fill(b, (size_t)p.M, -1, 1);
        ktu_fill(res, ny, -1, 1);
    }
    double *ref = malloc(ny * sizeof(double));
    naive_conv(&p, x, w, with_bias ? b : NULL, res_mode ? res : NULL, ref);
    const double rtol = int_data ? 2e-6 : 1e-4, atol = int_data ? 1e-6 : 1e-4;
    const float *bias = with_bias ? b : NULL;

    /* Winograd is not exact on integers (its transforms have fractions): its own tolerance,
     * ~1e-6 of the sum of |terms| (the output's scale), covering F(4x4,3x3)'s growth */
    const double wscale = 9.0 * (double)(p.C / p.group) * (int_data ? 4.0 : 1.0);
    const double wtol = 2e-6 * wscale + (res_mode ? 1e-5 : 0.0);
    /* ... and integer data put some outputs exactly on a discontinuity or pole of these
     * activations (Floor, Sign, Log(0), ...), or where they are steep (Exp of ~45), where
     * Winograd's 1e-6 error is not small: those pairs check the exact paths only (each
     * activation's fusion is the same code in all) */
    static const int jumpy[] = {CUVIL_ACT_EXP, CUVIL_ACT_COSH, CUVIL_ACT_SINH, CUVIL_ACT_SIGN, CUVIL_ACT_ASIN, CUVIL_ACT_ACOS, CUVIL_ACT_ACOSH, CUVIL_ACT_ATANH,
                                CUVIL_ACT_CEIL, CUVIL_ACT_FLOOR, CUVIL_ACT_LOG, CUVIL_ACT_RECIPROCAL, CUVIL_ACT_SQRT,
                                CUVIL_ACT_TAN};
    int skip_wino = 0;
    for (size_t k = 0; k < sizeof jumpy / sizeof jumpy[0]; k++) skip_wino |= int_data && act == jumpy[k];
    for (int v = -24; v < cuvil_f32_gemm_n_ukernels; v++) {
        if (skip_wino && (v == -7 || v == -6 || v == -5 || (v <= -13 && v >= -14) || v == -18 || v == -19)) continue;
        const float *r = start_y(res_mode, res, y, ny);
        void *scratch = NULL;
        if (v <= -23) {
            /* grouped direct convolution (CUVIL_CONV_GROUPED), on one thread (-23) and on a
             * pool of 3 (-24) */
            if (!cuvil_conv2d_grouped_applies(&p)) continue;
            run_prepacked(&p, CUVIL_CONV_GROUPED, CUVIL_GCONV_LANES, 0, v == -24 ? 3 : 1, x, w, bias, r, y, ref, ny, rtol,
                          atol, label, "grouped");
        } else if (v <= -20) {
            /* direct convolution on a channels-last copy (CUVIL_CONV_DIRECT_T), channels first
             * in and out: weights packed for the runtime's NR on one thread (-20) and on a pool
             * of 3 (-21), and for an NR no microkernel has (-22: the portable loop) */
            if (!cuvil_conv2d_direct_t_applies(&p)) continue;
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            run_prepacked(&p, CUVIL_CONV_DIRECT_T, v == -22 ? 5 : def->uk->nr, v == -22 ? 17 : def->kc, v == -21 ? 3 : 1, x,
                          w, bias, r, y, ref, ny, rtol, atol, label, "direct_t");
        } else if (v <= -18) {
            /* Winograd F(2x2,3x3) with tiles as rows (CUVIL_CONV_WINOGRAD2_T), channels first in
             * and out: on one thread (-18) and on a pool of 3 (-19) */
            if (!cuvil_conv2d_winograd_applies(&p)) continue;
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            run_prepacked(&p, CUVIL_CONV_WINOGRAD2_T, def->uk->nr, def->kc, v == -19 ? 3 : 1, x, w, bias, r, y, ref, ny, 1e-4,
                          wtol, label, "winograd F(2x2,3x3)");
        } else if (v <= -15) {
            /* direct convolution (CUVIL_CONV_DIRECT), weights packed as for the GEMM path: for
             * the runtime's MR and KC on one thread (-15) and on a pool of 3 (-16); for another
             * MR and KC (-17: it falls back to the GEMM path, which repacks them) */
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            run_prepacked(&p, CUVIL_CONV_DIRECT, v == -17 ? (def->uk->mr == 4 ? 6 : 4) : def->uk->mr,
                          v == -17 ? 17 : def->kc, v == -16 ? 3 : 1, x, w, bias, r, y, ref, ny, rtol, atol, label, "direct");
        } else if (v <= -13) {
            /* Winograd with tiles as the GEMMs' rows (CUVIL_CONV_WINOGRAD_T): the weights packed as
             * B for the runtime's NR, on one thread (-13) and on a pool of 3 (-14) */
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            cuvil_conv2d_params pp = p;
            pp.algo = CUVIL_CONV_WINOGRAD_T;
            pp.packed_mr = def->uk->nr;
            pp.packed_kc = def->kc;
            if (!cuvil_conv2d_winograd_applies(&pp)) continue;
            size_t nf = cuvil_f32_conv2d_packed_floats(&pp), nt = cuvil_f32_conv2d_pack_tmp_floats(&pp);
            float *wp = ktu_falloc(nf), *tmp = ktu_falloc(nt);
            cuvil_f32_conv2d_pack(&pp, w, wp, tmp);
            const size_t per = CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size(&pp), 64);
            scratch = ktu_alloc(3 * per);
            cuvil_pool *pool = v == -14 ? cuvil_pool_create(3, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
            if (v == -14 && !pool) ktu_fail("%s: no thread pool", label);
            const cuvil_pool *prev = cuvil_pool_bind(pool);
            cuvil_f32_conv2d_prepacked(&pp, x, wp, bias, r, y, scratch);
            cuvil_pool_bind(prev);
            cuvil_pool_destroy(pool);
            ktu_check(y, ref, ny, 1e-4, wtol, "%s [winograd, tiles as rows%s]", label, v == -14 ? ", 3 threads" : "");
            free(wp);
            free(tmp);
        } else if (v <= -10) {
            /* pixels as the GEMM's rows (CUVIL_CONV_GEMM_T): weights packed as B for the runtime's NR
             * (-10), for another NR and KC (-11, repacked), and on a pool of 2 threads (-12) */
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            run_prepacked(&p, CUVIL_CONV_GEMM_T, v == -11 ? (def->uk->nr == 8 ? 16 : 8) : def->uk->nr,
                          v == -11 ? 17 : def->kc, v == -12 ? 2 : 1, x, w, bias, r, y, ref, ny, rtol, atol, label, "gemm_t");
        } else if (v <= -7) {
            /* on a pool of 3 threads: -9 the GEMM paths, -8 prepacked, -7 Winograd (if it applies) */
            cuvil_conv2d_params pp = p;
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            if (v >= -8) {
                pp.packed_mr = def->uk->mr;
                pp.packed_kc = def->kc;
            }
            if (v == -7) {
                pp.algo = CUVIL_CONV_WINOGRAD;
                if (!cuvil_conv2d_winograd_applies(&pp)) continue;
            }
            size_t nf = cuvil_f32_conv2d_packed_floats(&pp), nt = cuvil_f32_conv2d_pack_tmp_floats(&pp);
            float *wp = nf ? ktu_falloc(nf) : NULL, *tmp = nt ? ktu_falloc(nt) : NULL;
            if (nf) cuvil_f32_conv2d_pack(&pp, w, wp, tmp);
            const size_t per = CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size(&pp), 64);
            scratch = ktu_alloc(3 * per);
            cuvil_pool *pool = cuvil_pool_create(3, per, ktu_aligned_alloc, ktu_aligned_free, NULL);
            if (!pool) ktu_fail("%s: no thread pool", label);
            const cuvil_pool *prev = cuvil_pool_bind(pool);
            if (cuvil_threads() != 3) ktu_fail("%s: %d threads bound, not 3", label, cuvil_threads());
            if (v == -9)
                cuvil_f32_conv2d(&pp, x, w, bias, r, y, scratch);
            else
                cuvil_f32_conv2d_prepacked(&pp, x, nf ? wp : w, bias, r, y, scratch);
            cuvil_pool_bind(prev);
            cuvil_pool_destroy(pool);
            const double tol = v == -7 ? wtol : atol;
            ktu_check(y, ref, ny, v == -7 ? 1e-4 : rtol, tol, "%s [3 threads, %s]", label,
                      v == -9 ? "gemm" : v == -8 ? "prepacked" : "winograd");
            free(wp);
            free(tmp);
        } else if (v == -6 || v == -5) {
            /* Winograd F(4x4,3x3): weights transformed for the runtime's blocking, and for another */
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            cuvil_conv2d_params pp = p;
            pp.algo = CUVIL_CONV_WINOGRAD;
            pp.packed_mr = v == -6 ? def->uk->mr : (def->uk->mr == 4 ? 6 : 4);
            pp.packed_kc = v == -6 ? def->kc : 17;
            if (!cuvil_conv2d_winograd_applies(&pp)) continue;
            size_t nf = cuvil_f32_conv2d_packed_floats(&pp), nt = cuvil_f32_conv2d_pack_tmp_floats(&pp);
            float *wp = ktu_falloc(nf), *tmp = ktu_falloc(nt);
            cuvil_f32_conv2d_pack(&pp, w, wp, tmp);
            scratch = ktu_alloc(cuvil_f32_conv2d_scratch_size(&pp));
            cuvil_f32_conv2d_prepacked(&pp, x, wp, bias, r, y, scratch);
            ktu_check(y, ref, ny, 1e-4, wtol, "%s [winograd mr=%lld kc=%lld]", label, (long long)pp.packed_mr,
                      (long long)pp.packed_kc);
            free(wp);
            free(tmp);
        } else if (v == -4 || v == -3) {
            /* weights packed ahead of time: for the runtime's own blocking (read in place), and
             * for another MR and KC (a compiler that assumed another blocking: repacked) */
            const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
            cuvil_conv2d_params pp = p;
            pp.packed_mr = v == -4 ? def->uk->mr : (def->uk->mr == 4 ? 6 : 4);
            pp.packed_kc = v == -4 ? def->kc : 17;
            size_t nf = cuvil_f32_conv2d_packed_floats(&pp);
            float *wp = nf ? ktu_falloc(nf) : NULL;
            if (nf) cuvil_f32_conv2d_pack(&pp, w, wp, NULL);
            scratch = ktu_alloc(cuvil_f32_conv2d_scratch_size(&pp));
            cuvil_f32_conv2d_prepacked(&pp, x, nf ? wp : w, bias, r, y, scratch);
            ktu_check(y, ref, ny, rtol, atol, "%s [prepacked mr=%lld kc=%lld]", label, (long long)pp.packed_mr,
                      (long long)pp.packed_kc);
            free(wp);
        } else if (v == -2) {
            scratch = ktu_alloc(cuvil_f32_conv2d_scratch_size(&p));
            cuvil_f32_conv2d(&p, x, w, bias, r, y, scratch);
            ktu_check(y, ref, ny, rtol, atol, "%s [public]", label);
        } else if (v == -1) {
            cuvil_f32_conv2d__scalar(&p, x, w, bias, r, y);
            ktu_check(y, ref, ny, rtol, atol, "%s [__scalar]", label);
        } else {
            const cuvil_gemm_blocking *blk = tiny_blocking(v);
            scratch = ktu_alloc(cuvil_f32_conv2d_scratch_size_ex(&p, blk));
            cuvil_f32_conv2d_ex(&p, x, w, bias, r, y, scratch, blk);
            ktu_check(y, ref, ny, rtol, atol, "%s [%s]", label, blk->uk->name);
        }
        free(scratch);
    }
    free(x);
    free(w);
    free(b);
    free(res);
    free(y);
    free(ref);
}

static const conv_case conv_cases[] = {
    /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
    {1, 3, 5, 7, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},     /* pointwise GEMM */
    {2, 17, 6, 5, 13, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* pointwise, batch, odd sizes */
    {1, 8, 9, 9, 6, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},     /* 1x1 stride 2 */
    {1, 4, 5, 5, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* 1x1 with padding */
    {1, 3, 8, 8, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* 3x3 same */
    {2, 5, 9, 11, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},    /* 3x3 stride 2 */
    {1, 6, 10, 10, 8, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 1},   /* TF-style SAME: bottom/right only */
    {1, 4, 7, 9, 6, 3, 3, 1, 2, 2, 0, 1, 3, 1, 1, 1},     /* asymmetric pads and strides */
    {1, 3, 15, 13, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},   /* 7x7 stem */
    {1, 4, 12, 12, 5, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1},   /* 5x5 */
    {1, 4, 11, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},   /* dilation 2 */
    {1, 3, 9, 10, 4, 3, 2, 1, 1, 1, 0, 1, 0, 3, 1, 1},    /* non-square kernel, mixed dilation */
    {1, 8, 7, 7, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},    /* groups 2 */
    {2, 12, 6, 6, 8, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 4},    /* groups 4, stride 2 */
    {1, 6, 6, 6, 6, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3},     /* grouped pointwise */
    {1, 16, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},  /* 8 channels a group (RegNet's), 99 pixels */
    {2, 24, 11, 13, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3}, /* 8 a group, stride 2, batch 2 */
    {1, 16, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},   /* 20 outputs a group: a partial chunk */
    {1, 32, 6, 9, 32, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 2},   /* 16 a group, dilated */
    {1, 12, 10, 8, 6, 3, 2, 1, 2, 1, 0, 0, 1, 1, 1, 3},   /* 4 in, 2 out a group, asymmetric */
    {1, 7, 9, 19, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 7},    /* depthwise 3x3 s1 */
    {2, 5, 10, 21, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 5},   /* depthwise 3x3 s2 */
    {1, 4, 9, 23, 4, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 4},    /* depthwise 3x3 s2 SAME-upper */
    {1, 3, 12, 17, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 3},   /* depthwise 5x5 s1 */
    {1, 3, 11, 18, 3, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 3},   /* depthwise 5x5 s2 */
    {1, 3, 3, 4, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 3},     /* depthwise kernel wider than input */
    {1, 4, 10, 10, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 4},   /* depthwise dilated (generic loop) */
    {1, 3, 8, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3},     /* depthwise multiplier 2 */
    {1, 4, 9, 9, 4, 7, 7, 3, 3, 3, 3, 3, 3, 1, 1, 4},     /* depthwise 7x7 stride 3 (generic) */
    {1, 3, 13, 40, 3, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 3},   /* depthwise 7x7 s1 (ConvNeXt's), rows of 40 */
    {1, 3, 12, 15, 3, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 3},   /* depthwise 7x7 s1, short rows (the flat plane) */
    {1, 3, 13, 37, 3, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 3},   /* depthwise 7x7 s2 (phased rows), 19 wide */
    {1, 2, 11, 20, 2, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 2},   /* depthwise 5x5 s1, 20 wide: a full and a masked vector */
    {1, 2, 15, 37, 2, 7, 7, 2, 2, 3, 3, 2, 2, 1, 1, 2},   /* depthwise 7x7 s2, uneven pads */
    {1, 4, 1, 30, 6, 1, 5, 1, 1, 0, 2, 0, 2, 1, 1, 1},    /* 1-D */
    {2, 6, 1, 25, 6, 1, 3, 1, 2, 0, 1, 0, 1, 1, 2, 6},    /* 1-D depthwise, stride and dilation */
    {1, 70, 6, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    /* K = 630 > KC */
    {1, 16, 20, 21, 150, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* M > MC, N > NC */
    {1, 4, 5, 6, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2},     /* pointwise, 1 output per group: GEMV */
    {2, 5, 4, 7, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},     /* single output channel: GEMV */
    {1, 3, 6, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* single output channel, im2col */
    {1, 5, 9, 10, 6, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* 3x3 s1 unpadded: partial tiles */
    {1, 4, 7, 9, 6, 3, 3, 1, 1, 2, 0, 1, 3, 1, 1, 1},     /* 3x3 s1 asymmetric pads */
    {2, 8, 33, 35, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},  /* 3x3 s1, many tiles, batch */
    {1, 300, 6, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* 3x3 s1, C > KC */
    {1, 2, 2, 3, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1},     /* 3x3 s1, image smaller than a tile */
    {2, 13, 28, 40, 147, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* 3x3 s1, on 3 threads a block of tiles each */
    /* planes of over 16K floats: the direct path's padded copy in bands of rows, on 3 threads */
    {1, 3, 150, 130, 8, 6, 6, 2, 2, 2, 2, 2, 2, 1, 1, 1},   /* a stem 6x6 s2 (phased), 2 bands a channel */
    {2, 2, 140, 121, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* 3x3 s1, batch, 2 bands a channel */
    {2, 5, 11, 8, 7, 1, 1, 2, 3, 0, 0, 0, 0, 1, 1, 1},    /* 1x1 strides 2x3, batch (subsampled) */
    {1, 12, 14, 14, 40, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1}, /* 1x1 stride 2 to 7x7 (pixels as rows) */
    {1, 3, 16, 34, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3},   /* depthwise 3x3 s2, even width */
    {1, 2, 9, 40, 2, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 2},    /* depthwise 3x3 s2, odd padded width */
    {1, 2, 8, 36, 2, 5, 5, 2, 2, 1, 1, 2, 2, 1, 1, 2},    /* depthwise 5x5 s2, uneven pads */
    {1, 2, 13, 53, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},   /* depthwise 3x3 s1, rows not a multiple of 4 */
    {1, 2, 11, 16, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},   /* depthwise 3x3 s1, one full vector */
    {1, 2, 7, 7, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2},     /* depthwise 3x3 s2 to 4x4 */
    {1, 2, 1, 1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},     /* depthwise 3x3 s1 on a 1x1 image */
    {1, 2, 2, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2},     /* depthwise 3x3 s2 to 1x1 */
    {1, 3, 5, 3, 3, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1, 3},     /* depthwise 3x3 s2, asymmetric pads */
    {1, 4, 3, 3, 5, 1, 1, 4, 4, 0, 0, 0, 0, 1, 1, 1},     /* 1x1 stride larger than the image */
    {1, 2, 9, 37, 2, 3, 3, 1, 1, 2, 0, 0, 2, 1, 1, 2},    /* depthwise 3x3 s1, pads 2/0 (read in place) */
    {1, 2, 6, 70, 2, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 2},    /* depthwise 3x3 s2 unpadded, wide */
    {1, 2, 5, 17, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},    /* depthwise 3x3 s1, width one past a vector */
    {1, 2, 7, 65, 2, 3, 3, 2, 2, 1, 2, 2, 1, 1, 1, 2},    /* depthwise 3x3 s2, pads 1/2 and 2/1 */
    {1, 2, 6, 64, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2},    /* depthwise 3x3 s2, width 2 x 32: no partial vector */
    {1, 20, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 20},  /* depthwise 7x7 map: 8 channels at a time + 4 */
    {2, 12, 14, 13, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 12}, /* depthwise small s2, batch: blocks + rest per image */
    {1, 16, 9, 11, 16, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 16}, /* depthwise 5x5 small map */
    {1, 8, 1, 1, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8},     /* depthwise 8 channels on a 1x1 map */
    {1, 9, 10, 12, 9, 4, 3, 3, 2, 2, 0, 1, 2, 1, 1, 9},   /* depthwise 4x3 kernel, strides 3x2, uneven pads */
    {1, 100, 14, 14, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 100}, /* depthwise 14x14, split among threads */
    /* depthwise planes the threads split by rows (from 6400 input pixels: each thread a band of
     * rows of every channel) */
    {1, 24, 80, 85, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 24}, /* 3x3 s1, 80 rows */
    {1, 16, 26, 250, 16, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 16}, /* 3x3 s2 SAME-upper, 13 rows (bands of 4 and 5) */
    {1, 4, 117, 61, 4, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 4},   /* 5x5 s2, 59 rows */
    {2, 2, 81, 83, 2, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 2},    /* 7x7 s1, batch 2 */
    {1, 3, 90, 91, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3},   /* 3x3 s1, multiplier 2 */
    /* stems (KxK s2, K 3 to 7, on at most 4 channels and 147 taps: the direct path's stem kernel
     * on AVX2 and AVX-512) */
    {2, 3, 35, 37, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},  /* 13 outputs (a partial block), 19 wide, batch 2 */
    {1, 1, 17, 66, 4, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 1},   /* one channel, SAME-upper pads, 33 wide */
    {1, 4, 20, 100, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},  /* 4 channels, 50 wide: several blocks of vectors */
    {1, 3, 9, 130, 16, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1},  /* 65 wide (one past 4 AVX-512 or 8 AVX2 vectors), odd pads */
    {1, 2, 7, 59, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   /* 30 wide: the rest 2 AVX-512 vectors or 2 of AVX2's (14) */
    {1, 3, 20, 112, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1}, /* 32 outputs: 5 blocks of 6 and one of 2; 56 wide */
    {1, 3, 41, 57, 13, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 1},  /* a 5x5 stem, 29 wide */
    {1, 3, 30, 44, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},  /* ResNet's 7x7 stem (K 147): 10 blocks of 6 and one of 4 */
    {1, 4, 14, 20, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},   /* 4 x 7x7 (K 196): past the stem kernel's 147 taps */
    {1, 3, 22, 37, 7, 4, 4, 2, 2, 1, 1, 2, 2, 1, 1, 1},   /* a 4x4 stem (even K), uneven pads */
    {1, 4, 26, 66, 11, 6, 6, 2, 2, 2, 2, 2, 2, 1, 1, 1},  /* 4 x 6x6: 144 taps, the most with 4 channels */
    {2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},  /* groups 2, batch 2, 100 pixels: pixel bands per image and group */
    {2, 20, 9, 11, 6, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* pointwise, batch 2, 99 pixels: direct reads whole panels in place, the last copied */
    {2, 64, 7, 7, 200, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},  /* 3x3 at 7x7, 200 channels: too few pixels for bands, runs of columns, A packed by each thread */
    {1, 200, 7, 7, 200, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* the same with an A of 345 KB: K split among the threads */
    {1, 60, 5, 5, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* A of 54 KB, 20 columns: one thread packs and runs it all */
    {1, 1, 1, 700, 21, 1, 64, 1, 16, 0, 0, 0, 0, 1, 1, 1}, /* one input channel, 64 taps, stride 16 (a spectrogram) */
    {2, 3, 1, 400, 24, 1, 9, 1, 5, 0, 2, 0, 1, 1, 1, 3},  /* depthwise x8, k9 s5, padded: the GEMM path when packed */
    {1, 1, 9, 9, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* one channel in, one out */
};

static void test_conv2d(void) {
    const int n = (int)(sizeof conv_cases / sizeof conv_cases[0]);
    for (int i = 0; i < n; i++) {
        run_conv(&conv_cases[i], i % 2, 0, CUVIL_ACT_NONE, 0);
        run_conv(&conv_cases[i], 1, 1 + i % 2, CUVIL_ACT_RELU, 0);
        run_conv(&conv_cases[i], 1, 2, CUVIL_ACT_SILU, 1);
    }
    /* every activation through each path, with bias and in-place/separate residual */
    static const int paths[] = {1, 4, 15, 24, 33};
    for (int act = 0; act < CUVIL_ACT__COUNT; act++) {
        for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++)
            run_conv(&conv_cases[paths[k]], 1, 1 + (act + (int)k) % 2, act, 1);
        for (int i = 0; i < n; i++) {   /* the stems (conv2d.c's stem kernel), without and with residuals */
            const conv_case *c = &conv_cases[i];
            if (c->KH == c->KW && c->KH >= 3 && c->KH <= 7 && c->sh == 2 && c->sw == 2 && c->C <= 4 &&
                c->C * c->KH * c->KW <= 147 && c->group == 1 && c->dh == 1 && c->dw == 1)
                run_conv(c, 1, (act + i) % 3, act, 1);
        }
    }
}

/* ---- ConvTranspose ---------------------------------------------------------------------- */
typedef struct convt_case {
    int64_t N, C, H, W, M, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, oph, opw, group;
} convt_case;

static void run_convt(const convt_case *cc, int with_bias, int act) {
    cuvil_conv_transpose2d_params p;
    memset(&p, 0, sizeof p);
    p.N = cc->N;
    p.C = cc->C;
    p.H = cc->H;
    p.W = cc->W;
    p.M = cc->M;
    p.KH = cc->KH;
    p.KW = cc->KW;
    p.stride_h = cc->sh;
    p.stride_w = cc->sw;
    p.pad_t = cc->pt;
    p.pad_l = cc->pl;
    p.dil_h = cc->dh;
    p.dil_w = cc->dw;
    p.group = cc->group;
    p.OH = (cc->H - 1) * cc->sh - cc->pt - cc->pb + cc->dh * (cc->KH - 1) + 1 + cc->oph;
    p.OW = (cc->W - 1) * cc->sw - cc->pl - cc->pr + cc->dw * (cc->KW - 1) + 1 + cc->opw;
    p.act = ktu_act_params(act);
    char label[300];
    snprintf(
        label, sizeof label,
        "convT N=%lld C=%lld %lldx%lld M=%lld k=%lldx%lld s=%lld,%lld pads=%lld,%lld,%lld,%lld "
        "dil=%lld,%lld outpad=%lld,%lld g=%lld bias=%d act=%s",
        (long long)cc->N, (long long)cc->C, (long long)cc->H, (long long)cc->W, (long long)cc->M,
        (long long)cc->KH, (long long)cc->KW, (long long)cc->sh, (long long)cc->sw,
        (long long)cc->pt, (long long)cc->pl, (long long)cc->pb, (long long)cc->pr,
        (long long)cc->dh, (long long)cc->dw, (long long)cc->oph, (long long)cc->opw,
        (long long)cc->group, with_bias, cuvil_act_names[act]);
    const int64_t Cg = p.C / p.group, Mg = p.M / p.group;
    const size_t nx = (size_t)(p.N * p.C * p.H * p.W);
    const size_t nw = (size_t)(p.C * Mg * p.KH * p.KW);
    const size_t ny = (size_t)(p.N * p.M * p.OH * p.OW);
    float *x = ktu_falloc(nx), *w = ktu_falloc(nw), *b = ktu_falloc((size_t)p.M);
    float *y = ktu_falloc(ny);
    const int int_data = act != CUVIL_ACT_NONE;
    if (int_data) {
        ktu_fill_int(x, nx, 2);
        ktu_fill_int(w, nw, 2);
        ktu_fill_int(b, (size_t)p.M, 3);
    } else {
        ktu_fill(x, nx, -1, 1);
        ktu_fill(w, nw, -1, 1);
        ktu_fill(b, (size_t)p.M, -1, 1);
    }
    /* naive: gather form, written independently of the kernels' scatter form */
    double *ref = malloc(ny * sizeof(double));
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t m = 0; m < p.M; m++)
            for (int64_t oh = 0; oh < p.OH; oh++)
                for (int64_t ow = 0; ow < p.OW; ow++) {
                    const int64_t g = m / Mg, mm = m % Mg;
                    double acc = with_bias ? b[m] : 0.0;
                    for (int64_t c = g * Cg; c < (g + 1) * Cg; c++)
                        for (int64_t kh = 0; kh < p.KH; kh++)
                            for (int64_t kw = 0; kw < p.KW; kw++) {
                                const int64_t th = oh + p.pad_t - kh * p.dil_h;
                                const int64_t tw = ow + p.pad_l - kw * p.dil_w;
                                if (th < 0 || tw < 0 || th % p.stride_h || tw % p.stride_w)
                                    continue;
                                const int64_t h = th / p.stride_h, wi = tw / p.stride_w;
                                if (h >= p.H || wi >= p.W) continue;
                                acc += (double)x[((n * p.C + c) * p.H + h) * p.W + wi] *
                                       w[((c * Mg + mm) * p.KH + kh) * p.KW + kw];
                            }
                    ref[((n * p.M + m) * p.OH + oh) * p.OW + ow] = ktu_actp(&p.act, acc);
                }
    const double rtol = int_data ? 2e-6 : 1e-4, atol = int_data ? 1e-6 : 1e-4;
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    void *scratch = ktu_alloc(cuvil_f32_conv_transpose2d_scratch_size(&p));
    cuvil_f32_conv_transpose2d(&p, x, w, with_bias ? b : NULL, y, scratch);
    ktu_check(y, ref, ny, rtol, atol, "%s [public]", label);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    cuvil_f32_conv_transpose2d__scalar(&p, x, w, with_bias ? b : NULL, y);
    ktu_check(y, ref, ny, rtol, atol, "%s [__scalar]", label);
    free(scratch);
    free(x);
    free(w);
    free(b);
    free(y);
    free(ref);
}

static const convt_case convt_cases[] = {
    /*  N  C  H  W  M  KH KW sh sw pt pl pb pr dh dw oph opw g */
    {1, 3, 4, 5, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* upsample x2, output_padding */
    {2, 4, 5, 4, 6, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1},   /* 4x4 s2 (DCGAN) */
    {1, 5, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1},   /* 1x1 */
    {1, 4, 4, 6, 6, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 2},   /* groups, no padding (grows) */
    {1, 2, 5, 5, 3, 3, 2, 3, 2, 0, 1, 2, 0, 2, 1, 2, 1, 1},   /* stride 3, dilation, asym */
    {1, 6, 3, 4, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 6},   /* depthwise transposed */
    {1, 3, 1, 9, 4, 1, 4, 1, 2, 0, 1, 0, 1, 1, 1, 0, 1, 1},   /* 1-D */
    {1, 2, 32, 32, 70, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1}, /* col buffer in chunks */
};

static void test_conv_transpose2d(void) {
    const int n = (int)(sizeof convt_cases / sizeof convt_cases[0]);
    for (int i = 0; i < n; i++) {
        run_convt(&convt_cases[i], i % 2, CUVIL_ACT_NONE);
        run_convt(&convt_cases[i], 1, CUVIL_ACT_NONE);
    }
    for (int act = 1; act < CUVIL_ACT__COUNT; act++) run_convt(&convt_cases[act % n], 1, act);
}

/* The inverted-residual block (mbblock.c) against the three convs done by naive_conv, on one
 * thread and on a pool of 3; shapes with one band and with many (tall and wide maps). Cin 0:
 * no expand conv (ex all zero), x is the depthwise conv's input of Ce channels. */
typedef struct mb_case {
    int64_t N, Cin, Ce, Cout, H, W, K, S, pad;
    int residual, act_e, act_d;
} mb_case;

static void mb_conv(cuvil_conv2d_params *p, int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t K,
                    int64_t S, int64_t pad, int64_t group) {
    conv_case c = {N, C, H, W, M, K, K, S, S, pad, pad, pad, pad, 1, 1, group};
    *p = to_params(&c);
}

static float *to_float(const double *d, size_t n) {
    float *f = ktu_falloc(n);
    for (size_t i = 0; i < n; i++) f[i] = (float)d[i];
    return f;
}

static void test_mbblock(void) {
    static const mb_case cases[] = {
        /* N Cin Ce Cout  H   W  K  S pad res act_e act_d */
        {1, 4, 16, 4, 9, 11, 3, 1, 1, 1, CUVIL_ACT_CLIP, CUVIL_ACT_CLIP},      /* one band, residual */
        {2, 5, 24, 7, 13, 10, 3, 2, 1, 0, CUVIL_ACT_RELU, CUVIL_ACT_NONE},     /* batch, stride 2 */
        {1, 8, 64, 12, 50, 80, 3, 1, 1, 1, CUVIL_ACT_CLIP, CUVIL_ACT_CLIP},    /* many bands */
        {1, 6, 48, 10, 61, 97, 3, 2, 1, 0, CUVIL_ACT_CLIP, CUVIL_ACT_CLIP},    /* many bands, odd, s2 */
        {1, 7, 40, 9, 45, 120, 5, 2, 2, 0, CUVIL_ACT_RELU, CUVIL_ACT_RELU},    /* 5x5 s2 */
        {1, 3, 32, 3, 40, 130, 5, 1, 2, 1, CUVIL_ACT_NONE, CUVIL_ACT_CLIP},    /* 5x5 s1 */
        {1, 0, 32, 16, 57, 70, 3, 1, 1, 0, CUVIL_ACT_NONE, CUVIL_ACT_CLIP},    /* no expand, many bands */
        {2, 0, 12, 12, 9, 13, 3, 2, 1, 1, CUVIL_ACT_NONE, CUVIL_ACT_RELU},     /* no expand, batch, s2 */
    };
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const mb_case *c = &cases[ci];
        cuvil_mbblock_params mp;
        memset(&mp, 0, sizeof mp);
        const int no_ex = c->Cin == 0;
        if (!no_ex) mb_conv(&mp.ex, c->N, c->Cin, c->H, c->W, c->Ce, 1, 1, 0, 1);
        mb_conv(&mp.dw, c->N, c->Ce, c->H, c->W, c->Ce, c->K, c->S, c->pad, c->Ce);
        mb_conv(&mp.pr, c->N, c->Ce, mp.dw.OH, mp.dw.OW, c->Cout, 1, 1, 0, 1);
        if (!no_ex) {
            mp.ex.act = ktu_act_params(c->act_e);
            mp.ex.packed_mr = def->uk->mr;
            mp.ex.packed_kc = def->kc;
        }
        mp.dw.act = ktu_act_params(c->act_d);
        mp.pr.packed_mr = def->uk->mr;
        mp.pr.packed_kc = def->kc;
        if (!cuvil_mbblock_applies(&mp)) ktu_fail("mbblock case %zu: does not apply", ci);
        const size_t nx = (size_t)(c->N * (no_ex ? c->Ce : c->Cin) * c->H * c->W), ne = (size_t)(c->N * c->Ce * c->H * c->W);
        const size_t nd = (size_t)(c->N * c->Ce * mp.dw.OH * mp.dw.OW), ny = (size_t)(c->N * c->Cout * mp.dw.OH * mp.dw.OW);
        const size_t nwe = (size_t)(no_ex ? 1 : c->Ce * c->Cin), nwd = (size_t)(c->Ce * c->K * c->K), nwp = (size_t)(c->Cout * c->Ce);
        float *x = ktu_falloc(nx), *we = ktu_falloc(nwe), *be = ktu_falloc((size_t)c->Ce), *wd = ktu_falloc(nwd);
        float *bd = ktu_falloc((size_t)c->Ce), *wp = ktu_falloc(nwp), *bp = ktu_falloc((size_t)c->Cout);
        float *res = c->residual ? ktu_falloc(ny) : NULL, *y = ktu_falloc(ny);
        ktu_fill(x, nx, -1, 1);
        ktu_fill(we, nwe, -0.5, 0.5);
        ktu_fill(be, (size_t)c->Ce, -0.5, 0.5);
        ktu_fill(wd, nwd, -0.5, 0.5);
        ktu_fill(bd, (size_t)c->Ce, -0.5, 0.5);
        ktu_fill(wp, nwp, -0.5, 0.5);
        ktu_fill(bp, (size_t)c->Cout, -0.5, 0.5);
        if (res) ktu_fill(res, ny, -1, 1);
        /* reference: the three convs, naive, each rounded to float as the real one stores it */
        double *re = malloc(ne * sizeof(double)), *rd = malloc(nd * sizeof(double)), *ref = malloc(ny * sizeof(double));
        if (!re || !rd || !ref) ktu_fail("out of memory");
        if (no_ex)
            for (size_t i = 0; i < ne; i++) re[i] = x[i]; /* the depthwise conv reads x */
        else
            naive_conv(&mp.ex, x, we, be, NULL, re);
        float *e = to_float(re, ne);
        naive_conv(&mp.dw, e, wd, bd, NULL, rd);
        float *d = to_float(rd, nd);
        naive_conv(&mp.pr, d, wp, bp, res, ref);
        /* the weights as the compiler packs them */
        float *wep = no_ex ? NULL : ktu_falloc(cuvil_f32_conv2d_packed_floats(&mp.ex));
        float *wpp = ktu_falloc(cuvil_f32_conv2d_packed_floats(&mp.pr));
        if (!no_ex) cuvil_f32_conv2d_pack(&mp.ex, we, wep, NULL);
        cuvil_f32_conv2d_pack(&mp.pr, wp, wpp, NULL);
        const size_t per = CUVIL_ALIGN_UP(cuvil_f32_mbblock_scratch_size(&mp), 64);
        void *scratch = ktu_alloc(3 * per);
        for (int threads = 1; threads <= 3; threads += 2) {
            cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
            if (threads > 1 && !pool) ktu_fail("mbblock: no thread pool");
            const cuvil_pool *prev = cuvil_pool_bind(pool);
            /* the residual apart, then (the memory plan's in-place residual) in y itself */
            for (int in_place = 0; in_place <= (res != NULL); in_place++) {
                if (in_place)
                    memcpy(y, res, ny * sizeof(float));
                else
                    memset(y, 0xff, ny * sizeof(float)); /* NaN: every element must be written */
                cuvil_f32_mbblock(&mp, x, wep, no_ex ? NULL : be, wd, bd, wpp, bp, in_place ? y : res, y, scratch);
                ktu_check(y, ref, ny, 1e-4, 1e-4, "mbblock case %zu (%lldx%lld, %lldx%lld s%lld, %d thread%s%s)", ci,
                          (long long)c->H, (long long)c->W, (long long)c->K, (long long)c->K, (long long)c->S, threads,
                          threads > 1 ? "s" : "", in_place ? ", residual in y" : "");
            }
            cuvil_pool_bind(prev);
            cuvil_pool_destroy(pool);
        }
        free(scratch);
        free(wep);
        free(wpp);
        free(e);
        free(d);
        free(re);
        free(rd);
        free(ref);
        free(x);
        free(we);
        free(be);
        free(wd);
        free(bd);
        free(wp);
        free(bp);
        free(res);
        free(y);
    }
    /* not the pattern: a strided expand, a grouped projection, a dilated depthwise */
    cuvil_mbblock_params mp;
    memset(&mp, 0, sizeof mp);
    mb_conv(&mp.ex, 1, 4, 8, 8, 16, 1, 1, 0, 1);
    mb_conv(&mp.dw, 1, 16, 8, 8, 16, 3, 1, 1, 16);
    mb_conv(&mp.pr, 1, 16, 8, 8, 4, 1, 1, 0, 1);
    mp.ex.packed_mr = mp.pr.packed_mr = def->uk->mr;
    mp.ex.packed_kc = mp.pr.packed_kc = def->kc;
    if (!cuvil_mbblock_applies(&mp)) ktu_fail("mbblock: the plain block does not apply");
    cuvil_mbblock_params bad = mp;
    bad.pr.group = 2;
    if (cuvil_mbblock_applies(&bad)) ktu_fail("mbblock: applies to a grouped projection");
    bad = mp;
    bad.dw.dil_h = bad.dw.dil_w = 2;
    if (cuvil_mbblock_applies(&bad)) ktu_fail("mbblock: applies to a dilated depthwise conv");
    bad = mp;
    bad.ex.packed_mr = 0;
    if (cuvil_mbblock_applies(&bad)) ktu_fail("mbblock: applies to unpacked weights");
    bad = mp;
    bad.pr.C = 8;
    if (cuvil_mbblock_applies(&bad)) ktu_fail("mbblock: applies to mismatched channels");
    bad = mp;
    memset(&bad.ex, 0, sizeof bad.ex);
    if (!cuvil_mbblock_applies(&bad)) ktu_fail("mbblock: the block without its expand conv does not apply");
    bad.pr.C = 8;
    if (cuvil_mbblock_applies(&bad)) ktu_fail("mbblock: applies without expand to mismatched channels");
}

/* ---- Channels-last tensors (p->layout) ------------------------------------------------- */
/* [N, C, HW] -> [N, HW, C] (to NHWC), or back (to_nhwc 0). */
static void relayout_f(const float *s, float *d, int64_t N, int64_t C, int64_t HW, int to_nhwc) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t q = 0; q < HW; q++) {
                const int64_t a = (n * C + c) * HW + q, b = (n * HW + q) * C + c;
                d[to_nhwc ? b : a] = s[to_nhwc ? a : b];
            }
}

/* One conv with layout flags against the NCHW naive loop: x, the residual and the reference
 * transposed here. res_mode as run_conv's; the kernel: `algo` (the pixels-as-rows GEMM or
 * Winograd with tiles as rows) on prepacked weights (1 and 3 threads), or the depthwise conv
 * on tap-major weights (1 and 3 threads) and on the model's (unprepacked). Weights packed for NR
 * nr and K blocks of kc (0: the default microkernel's, the default kc). */
static void run_layout_nr(const conv_case *cc, int64_t layout, int res_mode, int act, int64_t algo, int nr,
                          int64_t kc) {
    cuvil_conv2d_params p = to_params(cc);
    p.act = ktu_act_params(act);
    p.layout = layout;
    const int dw = p.group == p.C;
    p.algo = dw ? 0 : algo;
    p.packed_mr = 1; /* (for cuvil_conv2d_layout_ok; run_prepacked sets the real one) */
    char label[300];
    snprintf(label, sizeof label, "layout %lld algo %lld: N=%lld C=%lld %lldx%lld M=%lld k=%lldx%lld s=%lld pads=%lld,%lld res=%d act=%s",
             (long long)layout, (long long)p.algo, (long long)p.N, (long long)p.C, (long long)p.H, (long long)p.W, (long long)p.M,
             (long long)p.KH, (long long)p.KW, (long long)p.stride_h, (long long)p.pad_t, (long long)p.pad_l, res_mode,
             cuvil_act_names[act]);
    if (!cuvil_conv2d_layout_ok(&p)) {
        ktu_fail("%s: cuvil_conv2d_layout_ok refuses it", label);
        return;
    }
    const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
    const size_t nx = (size_t)(p.N * p.C * HW), nw = (size_t)(p.M * (p.C / p.group) * p.KH * p.KW);
    const size_t ny = (size_t)(p.N * p.M * OHW);
    float *x = ktu_falloc(nx), *xl = ktu_falloc(nx), *w = ktu_falloc(nw), *b = ktu_falloc((size_t)p.M);
    float *res = ktu_falloc(ny), *resl = ktu_falloc(ny), *y = ktu_falloc(ny);
    ktu_fill(x, nx, -1, 1);
    ktu_fill(w, nw, -1, 1);
    ktu_fill(b, (size_t)p.M, -1, 1);
    ktu_fill(res, ny, -1, 1);
    double *ref = malloc(ny * sizeof(double)), *refl = malloc(ny * sizeof(double));
    naive_conv(&p, x, w, b, res_mode ? res : NULL, ref);
    if (layout & CUVIL_CONV_X_NHWC)
        relayout_f(x, xl, p.N, p.C, HW, 1);
    else
        memcpy(xl, x, nx * sizeof(float));
    const int y_last = (layout & CUVIL_CONV_Y_NHWC) != 0;
    if (y_last)
        relayout_f(res, resl, p.N, p.M, OHW, 1);
    else
        memcpy(resl, res, ny * sizeof(float));
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t m = 0; m < p.M; m++)
            for (int64_t q = 0; q < OHW; q++)
                refl[y_last ? (n * OHW + q) * p.M + m : (n * p.M + m) * OHW + q] = ref[(n * p.M + m) * OHW + q];
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    /* Winograd's own error (run_conv's wtol) */
    const int wino = p.algo == CUVIL_CONV_WINOGRAD_T || p.algo == CUVIL_CONV_WINOGRAD2_T;
    const double tol = wino ? 2e-6 * 9.0 * (double)p.C + 1e-5 : 1e-4;
    for (int v = 0; v < (dw ? 3 : 2); v++) {
        const float *r = start_y(res_mode, resl, y, ny);
        if (v < 2) {
            run_prepacked(&p, p.algo, dw ? def->uk->mr : nr ? nr : def->uk->nr, kc ? kc : def->kc, v ? 3 : 1, xl, w, b, r, y, refl, ny, 1e-4,
                          tol, label,
                          dw                                 ? "depthwise, tap-major weights"
                          : p.algo == CUVIL_CONV_WINOGRAD_T  ? "winograd_t"
                          : wino                             ? "winograd2_t"
                          : p.algo == CUVIL_CONV_DIRECT_T    ? "direct_t"
                                                             : "gemm_t");
        } else {
            cuvil_conv2d_params pp = p;
            pp.packed_mr = 0;
            void *scratch = ktu_alloc(cuvil_f32_conv2d_scratch_size(&pp) + 64);
            cuvil_f32_conv2d(&pp, xl, w, b, r, y, scratch);
            ktu_check(y, refl, ny, 1e-4, 1e-4, "%s [depthwise, the model's weights]", label);
            free(scratch);
        }
    }
    free(x);
    free(xl);
    free(w);
    free(b);
    free(res);
    free(resl);
    free(y);
    free(ref);
    free(refl);
}

/* With weights packed for the runtime's default microkernel. */
static void run_layout_algo(const conv_case *cc, int64_t layout, int res_mode, int act, int64_t algo) {
    run_layout_nr(cc, layout, res_mode, act, algo, 0, 0);
}

static void run_layout(const conv_case *cc, int64_t layout, int res_mode, int act) {
    run_layout_algo(cc, layout, res_mode, act, CUVIL_CONV_GEMM_T);
}

/* A 1x1 stride-1 conv with x and y channels last (lowered as direct_t or as the pixels-as-rows
 * GEMM) runs, on AVX-512, as a GEMM with x's rows read in place (conv2d.c's
 * pointwise_nhwc_as_gemm), where 12-row tiles waste few rows; with y channels first it runs its
 * own path (direct_t's tiles, the GEMM on packed pixels) and a transposing copy. Without a
 * residual the two orders of operations are the same, so the outputs must be the same bits, on
 * 1 and 3 threads (any target: whichever paths it takes). */
static void test_pointwise_nhwc_as_gemm_bits(void) {
    const int64_t X = CUVIL_CONV_X_NHWC, Y = CUVIL_CONV_Y_NHWC;
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    static const conv_case cases[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {1, 192, 12, 10, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* 120 pixels: 10 tiles of 12 */
        {2, 96, 14, 14, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* 196: 4 rows left, a panel of 8 columns */
        {1, 1100, 4, 3, 80, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* K in two blocks, a half panel */
        {1, 64, 10, 11, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* 110: 2 rows left */
        {1, 1024, 14, 14, 256, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, /* ResNet-50's: split among the threads (direct_t
                                                                  * only: the other GEMM splits its K here, other sums) */
    };
    static const int acts[] = {CUVIL_ACT_RELU, CUVIL_ACT_HARD_SWISH, CUVIL_ACT_SILU, CUVIL_ACT_NONE};
    for (size_t i = 0; i < 2 * sizeof cases / sizeof cases[0]; i++)
        for (int a = 0; a < 4; a++)
            for (int threads = 1; threads <= 3; threads += 2) {
                const size_t ci = i % (sizeof cases / sizeof cases[0]);
                const int gemm_t = i >= sizeof cases / sizeof cases[0];
                if (gemm_t && ci == sizeof cases / sizeof cases[0] - 1) continue; /* (the last case) */
                cuvil_conv2d_params p = to_params(&cases[ci]);
                p.act = ktu_act_params(acts[a]);
                /* (the lowering's K blocks: all of K up to 1024 for direct_t, KC for the GEMM) */
                p.algo = gemm_t ? CUVIL_CONV_GEMM_T : CUVIL_CONV_DIRECT_T;
                p.packed_mr = def->uk->nr;
                p.packed_kc = gemm_t ? def->kc : cases[ci].C > 1024 ? 1024 : cases[ci].C;
                const int64_t HW = p.H * p.W, OHW = p.OH * p.OW;
                const size_t nx = (size_t)(p.N * p.C * HW), nw = (size_t)(p.M * p.C), ny = (size_t)(p.N * p.M * OHW);
                float *x = ktu_falloc(nx), *xl = ktu_falloc(nx), *w = ktu_falloc(nw), *b = ktu_falloc((size_t)p.M);
                float *y1 = ktu_falloc(ny), *y2 = ktu_falloc(ny), *y2l = ktu_falloc(ny);
                ktu_fill(x, nx, -1, 1);
                ktu_fill(w, nw, -1, 1);
                ktu_fill(b, (size_t)p.M, -1, 1);
                relayout_f(x, xl, p.N, p.C, HW, 1);
                const size_t nf = cuvil_f32_conv2d_packed_floats(&p), nt = cuvil_f32_conv2d_pack_tmp_floats(&p);
                float *wp = ktu_falloc(nf), *tmp = nt ? ktu_falloc(nt) : NULL;
                cuvil_f32_conv2d_pack(&p, w, wp, tmp);
                free(tmp);
                cuvil_conv2d_params q1 = p, q2 = p;
                q1.layout = X | Y;
                q2.layout = X;
                const size_t per = CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size(&q1), 64) +
                                   CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size(&q2), 64);
                void *scratch = ktu_alloc((size_t)threads * per);
                cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
                if (threads > 1 && !pool) ktu_fail("direct_t as gemm: no thread pool");
                const cuvil_pool *prev = cuvil_pool_bind(pool);
                cuvil_f32_conv2d_prepacked(&q1, xl, wp, b, NULL, y1, scratch);
                cuvil_f32_conv2d_prepacked(&q2, xl, wp, b, NULL, y2, scratch);
                cuvil_pool_bind(prev);
                cuvil_pool_destroy(pool);
                relayout_f(y2, y2l, p.N, p.M, OHW, 1);
                ktu_checks++;
                if (memcmp(y1, y2l, ny * sizeof(float)) != 0)
                    ktu_fail("%s 1x1 case %zu act %s, %d thread%s: channels-last y differs from channels-first y",
                             gemm_t ? "gemm_t" : "direct_t", ci, cuvil_act_names[acts[a]], threads, threads > 1 ? "s" : "");
                free(x);
                free(xl);
                free(w);
                free(b);
                free(wp);
                free(y1);
                free(y2);
                free(y2l);
                free(scratch);
            }
}

static void test_channels_last(void) {
    const int64_t X = CUVIL_CONV_X_NHWC, Y = CUVIL_CONV_Y_NHWC, XY = X | Y;
    static const conv_case gemm[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {2, 96, 14, 14, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},  /* 196 pixels: bands on 3 threads */
        {1, 37, 7, 7, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* 49 pixels (MR 7 where there is one), K % 8 = 5 */
        {1, 200, 7, 7, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* column runs */
        {1, 5, 3, 2, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},      /* fewer pixels than a panel, K < 8 */
        {2, 1400, 7, 7, 72, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},  /* A of 274 KB: K split among the threads */
    };
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++) {
        run_layout(&gemm[i], XY, (int)i % 3, CUVIL_ACT_CLIP);
        run_layout(&gemm[i], X, 1, CUVIL_ACT_RELU);
        run_layout(&gemm[i], Y, 2, CUVIL_ACT_SILU);
        run_layout(&gemm[i], XY, 2, CUVIL_ACT_NONE);
    }
    /* strided 1x1 (ResNet's shortcuts): the subsampled copy keeps x's layout */
    static const conv_case spw[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {2, 48, 14, 14, 72, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},  /* 14 -> 7, batch */
        {1, 21, 9, 12, 10, 1, 1, 3, 2, 0, 0, 0, 0, 1, 1, 1},   /* unequal strides, odd sizes */
    };
    for (size_t i = 0; i < sizeof spw / sizeof spw[0]; i++) {
        run_layout(&spw[i], XY, (int)i % 3, CUVIL_ACT_RELU);
        run_layout(&spw[i], X, 1, CUVIL_ACT_NONE);
        run_layout(&spw[i], Y, 2, CUVIL_ACT_CLIP);
    }
    /* convs of several taps: a channels-last x packed into im2col with K tap-major (on
     * weights packed so), the padding read as zeros */
    static const conv_case c3 = {1, 16, 7, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    run_layout(&c3, Y, 1, CUVIL_ACT_RELU);
    static const conv_case taps[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {1, 16, 7, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* 3x3 same */
        {2, 40, 14, 14, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   /* stride 2, batch: K runs of 40 cross the K blocks */
        {1, 5, 9, 8, 11, 3, 2, 1, 2, 2, 0, 1, 1, 2, 1, 1},      /* C = 5 (no 8-wide run), 3x2, dilated rows, uneven pads */
        {1, 13, 6, 7, 9, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1},      /* 5x5, 42 pixels: a partial panel */
        {1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    /* ResNet's layer4 shape (fewer outputs): K split */
    };
    for (size_t i = 0; i < sizeof taps / sizeof taps[0]; i++) {
        run_layout(&taps[i], XY, (int)i % 3, CUVIL_ACT_RELU);
        run_layout(&taps[i], X, 1, CUVIL_ACT_NONE);
        /* the direct convolution (undilated): x copied channels last from either layout */
        if (taps[i].dh != 1 || taps[i].dw != 1) continue;
        run_layout_algo(&taps[i], XY, (int)i % 3, CUVIL_ACT_RELU, CUVIL_CONV_DIRECT_T);
        run_layout_algo(&taps[i], X, 1, CUVIL_ACT_SILU, CUVIL_CONV_DIRECT_T);
        run_layout_algo(&taps[i], Y, 2, CUVIL_ACT_CLIP, CUVIL_CONV_DIRECT_T);
    }
    static const conv_case direct_t[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {1, 3, 30, 28, 20, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},     /* a stem: K 147 in one block, 7 segments of 21 */
        {2, 64, 15, 13, 70, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1},    /* stride 2, batch, uneven pads, a partial panel */
        {1, 2, 9, 9, 9, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1},        /* kernel rows of 10, 5 segments */
        {1, 2, 24, 6, 9, 17, 3, 1, 1, 8, 1, 8, 1, 1, 1, 1},      /* 17 kernel rows: a K block in two runs of segments */
        {1, 300, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* C over KC: a kernel row in several K blocks */
        {1, 16, 8, 11, 33, 2, 3, 3, 1, 0, 1, 1, 0, 1, 1, 1},     /* 2x3, strides 3x1 */
        {2, 40, 9, 7, 24, 3, 3, 1, 2, 0, 0, 0, 0, 1, 1, 1},      /* no padding: a channels-last x read in place */
        {1, 72, 7, 7, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},      /* 1x1: one segment of C per row */
        {2, 24, 10, 9, 40, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},     /* 1x1 stride 2 */
        {1, 256, 3, 3, 160, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* 1x1, more outputs than pixels: threads split columns */
        {1, 192, 12, 10, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* a projection (MobileNetV2's): threads split rows (channels-last y: the GEMM on AVX-512) */
        {1, 1100, 4, 3, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},    /* 1x1, C over 1024: two K blocks of 550 below */
    };
    for (size_t i = 0; i < sizeof direct_t / sizeof direct_t[0]; i++) {
        run_layout_algo(&direct_t[i], 0, (int)i % 3, CUVIL_ACT_RELU, CUVIL_CONV_DIRECT_T);
        run_layout_algo(&direct_t[i], XY, 1, CUVIL_ACT_NONE, CUVIL_CONV_DIRECT_T);
        run_layout_algo(&direct_t[i], X, 2, CUVIL_ACT_HARD_SWISH, CUVIL_CONV_DIRECT_T);
        run_layout_algo(&direct_t[i], Y, 0, CUVIL_ACT_CLIP, CUVIL_CONV_DIRECT_T);
        /* an activation the microkernel does not fuse, applied to the tiles (no transposing
         * copy to take it): channels-last y, or channels-first y without a residual */
        run_layout_algo(&direct_t[i], XY, 2, CUVIL_ACT_SILU, CUVIL_CONV_DIRECT_T);
        run_layout_algo(&direct_t[i], 0, 0, CUVIL_ACT_SILU, CUVIL_CONV_DIRECT_T);
        /* every microkernel this machine runs that reads rows in place (weights packed for its NR) */
        for (int u = 0; u < cuvil_f32_gemm_n_ukernels; u++)
            if (cuvil_f32_gemm_ukernels[u].rows)
                run_layout_nr(&direct_t[i], i % 2 ? XY : 0, 1, CUVIL_ACT_RELU, CUVIL_CONV_DIRECT_T, cuvil_f32_gemm_ukernels[u].nr, 0);
        /* K in blocks of up to 1024 (the lowering's projections on AVX-512): one segment of C
         * per row up to that */
        const conv_case *d = &direct_t[i];
        if (d->KH * d->KW == 1)
            run_layout_nr(d, X | (i % 2 ? Y : 0), 2, CUVIL_ACT_CLIP, CUVIL_CONV_DIRECT_T, 0, d->C < 1024 ? d->C : 1024);
    }
    /* Winograd with tiles as rows: the input transform reads a channels-last x (V as
     * [point][tile][channel]), the output transform writes a channels-last y */
    static const conv_case wino[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {1, 64, 14, 14, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* ResNet's 14x14: 16 tiles */
        {2, 37, 11, 9, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    /* partial tiles and channel vectors, batch */
        {1, 20, 28, 28, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* 49 tiles */
        {1, 8, 10, 13, 5, 3, 3, 1, 1, 0, 2, 1, 0, 1, 1, 1},     /* uneven pads, C < a vector */
        {1, 440, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},  /* several tile blocks (32 + 17 tiles) */
        /* on 3 threads each image's tiles in 3 contiguous parts, one a thread (wino_t_private) */
        {2, 24, 44, 50, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* 143 tiles, partial ones, batch */
        {1, 72, 52, 52, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* 169 tiles: a part in two blocks */
    };
    for (size_t i = 0; i < sizeof wino / sizeof wino[0]; i++) {
        run_layout_algo(&wino[i], XY, (int)i % 3, CUVIL_ACT_RELU, CUVIL_CONV_WINOGRAD_T);
        run_layout_algo(&wino[i], X, 1, CUVIL_ACT_NONE, CUVIL_CONV_WINOGRAD_T);
        run_layout_algo(&wino[i], Y, 2, CUVIL_ACT_CLIP, CUVIL_CONV_WINOGRAD_T);
        run_layout_algo(&wino[i], Y, 0, CUVIL_ACT_SILU, CUVIL_CONV_WINOGRAD_T);
        run_layout_algo(&wino[i], XY, (int)i % 3, CUVIL_ACT_RELU, CUVIL_CONV_WINOGRAD2_T);
        run_layout_algo(&wino[i], X, 2, CUVIL_ACT_NONE, CUVIL_CONV_WINOGRAD2_T);
        run_layout_algo(&wino[i], Y, 1, CUVIL_ACT_SILU, CUVIL_CONV_WINOGRAD2_T);
        /* channels-first outputs with an activation of the vector kernels over a residual in y */
        run_layout_algo(&wino[i], X, 1, CUVIL_ACT_SILU, CUVIL_CONV_WINOGRAD2_T);
        run_layout_algo(&wino[i], X, 1, CUVIL_ACT_HARD_SWISH, CUVIL_CONV_WINOGRAD_T);
    }
    static const conv_case dws[] = {
        /*  N  C   H   W   M  KH KW sh sw pt pl pb pr dh dw g */
        {1, 40, 14, 14, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 40},   /* a partial vector of channels */
        {2, 48, 14, 14, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 48},   /* stride 2, batch */
        {1, 24, 9, 11, 24, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 24},    /* 5x5 */
        {1, 19, 12, 10, 19, 5, 5, 2, 2, 2, 2, 1, 2, 1, 1, 19},   /* 5x5 stride 2, uneven pads */
        {1, 64, 7, 7, 64, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 64},     /* no padding */
        {1, 16, 1, 1, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16},     /* a 1x1 map: every tap but one outside */
        {1, 9, 10, 12, 9, 4, 3, 3, 2, 2, 0, 1, 2, 1, 1, 9},      /* 4x3, strides 3x2: the portable loop */
        {1, 160, 14, 14, 160, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 160}, /* enough work to split among threads */
        /* 7 and 8 rows on 3 threads: each thread a part of the channels, every row (the last
         * part ending in a partial vector: 228 = 28.5 x 8) */
        {1, 228, 7, 7, 228, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 228},
        {2, 480, 7, 7, 480, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 480},
        /* 7x7 taps: the portable loop, which must keep the split by rows (with the residual in
         * y, a conv that every thread ran whole added it twice) */
        {1, 96, 7, 7, 96, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 96},
    };
    for (size_t i = 0; i < sizeof dws / sizeof dws[0]; i++) {
        run_layout(&dws[i], XY, (int)i % 3, CUVIL_ACT_CLIP);
        run_layout(&dws[i], XY, 0, CUVIL_ACT_HARD_SWISH);
        run_layout(&dws[i], XY, 2, CUVIL_ACT_HARD_SWISH);   /* the residual in y, then HardSwish */
        run_layout(&dws[i], XY, 1, CUVIL_ACT_SILU);
    }
    /* what cuvil_conv2d_layout_ok refuses */
    cuvil_conv2d_params p = to_params(&gemm[0]);
    p.algo = CUVIL_CONV_GEMM_T;
    p.packed_mr = 1;
    p.layout = XY;
    if (!cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: refuses the 1x1 pixels-as-rows GEMM");
    p.algo = 0;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes a channels-last GEMM that is not pixels-as-rows");
    p.algo = CUVIL_CONV_WINOGRAD;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes Winograd with tiles as columns");
    p = to_params(&wino[0]);
    p.algo = CUVIL_CONV_WINOGRAD_T;
    p.packed_mr = 1;
    p.layout = XY;
    if (!cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: refuses Winograd with tiles as rows");
    p.stride_h = p.stride_w = 2;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes Winograd_T where Winograd does not apply");
    p.algo = CUVIL_CONV_WINOGRAD2_T;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes Winograd2_T where Winograd does not apply");
    p.stride_h = p.stride_w = 1;
    if (!cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: refuses Winograd F(2x2,3x3) with tiles as rows");
    static const conv_case grouped = {1, 8, 7, 7, 12, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2};
    p = to_params(&grouped);
    p.algo = CUVIL_CONV_GEMM_T;
    p.packed_mr = 1;
    p.layout = Y;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes a grouped GEMM");
    p = to_params(&dws[0]);
    p.layout = X;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes a depthwise conv with only its input channels last");
    p.layout = XY;
    p.dil_h = 2;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes a dilated depthwise conv");
    p = to_params(&dws[0]);
    p.layout = 4;
    if (cuvil_conv2d_layout_ok(&p)) ktu_fail("layout: takes an unknown flag");
}

/* conv_nd.c over three spatial dims, both directions, against a naive gather loop written
 * here (the transpose in its gather form: output o takes input i where i*s - pb + t*d == o). */
typedef struct nd_case {
    int transpose;
    int64_t N, C, M, group, in[3], k[3], s[3], d[3], pb[3], out[3];
} nd_case;

static void run_conv_nd(const nd_case *c, int with_bias) {
    cuvil_conv_nd_params p = {.nsp = 3, .transpose = c->transpose, .N = c->N, .C = c->C, .M = c->M, .group = c->group};
    int64_t nin = 1, nout = 1, win = 1;
    for (int i = 0; i < 3; i++) {
        p.in[i] = c->in[i], p.out[i] = c->out[i], p.k[i] = c->k[i], p.s[i] = c->s[i], p.d[i] = c->d[i];
        p.pb[i] = c->pb[i];
        nin *= c->in[i], nout *= c->out[i], win *= c->k[i];
    }
    const int64_t Cg = c->C / c->group, Mg = c->M / c->group;
    const size_t nx = (size_t)(c->N * c->C * nin), nw = (size_t)(c->C * Mg * win), ny = (size_t)(c->N * c->M * nout);
    float *x = ktu_falloc(nx), *w = ktu_falloc(nw), *b = ktu_falloc((size_t)c->M), *y = ktu_falloc(ny);
    ktu_fill(x, nx, -1, 1);
    ktu_fill(w, nw, -1, 1);
    ktu_fill(b, (size_t)c->M, -1, 1);
    double *ref = malloc(ny * sizeof(double));
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t o0 = 0; o0 < c->out[0]; o0++)
                for (int64_t o1 = 0; o1 < c->out[1]; o1++)
                    for (int64_t o2 = 0; o2 < c->out[2]; o2++) {
                        const int64_t g = m / Mg, o[3] = {o0, o1, o2};
                        double acc = with_bias ? b[m] : 0.0;
                        for (int64_t ci = g * Cg; ci < (g + 1) * Cg; ci++)
                            for (int64_t t0 = 0; t0 < c->k[0]; t0++)
                                for (int64_t t1 = 0; t1 < c->k[1]; t1++)
                                    for (int64_t t2 = 0; t2 < c->k[2]; t2++) {
                                        const int64_t t[3] = {t0, t1, t2};
                                        int64_t ii[3];
                                        int ok = 1;
                                        for (int a = 0; a < 3; a++) {
                                            if (!c->transpose) {
                                                ii[a] = o[a] * c->s[a] - c->pb[a] + t[a] * c->d[a];
                                            } else {
                                                const int64_t q = o[a] + c->pb[a] - t[a] * c->d[a];
                                                ok &= q >= 0 && q % c->s[a] == 0;
                                                ii[a] = q / c->s[a];
                                            }
                                            ok &= ii[a] >= 0 && ii[a] < c->in[a];
                                        }
                                        if (!ok) continue;
                                        const int64_t tap = (t0 * c->k[1] + t1) * c->k[2] + t2;
                                        const float wv = c->transpose ? w[(ci * Mg + m % Mg) * win + tap]
                                                                      : w[(m * Cg + ci - g * Cg) * win + tap];
                                        acc += (double)x[(n * c->C + ci) * nin + (ii[0] * c->in[1] + ii[1]) * c->in[2] + ii[2]] * wv;
                                    }
                        ref[(n * c->M + m) * nout + (o0 * c->out[1] + o1) * c->out[2] + o2] = acc;
                    }
    char label[64];
    snprintf(label, sizeof label, "conv_nd transpose=%d C=%lld M=%lld g=%lld", c->transpose, (long long)c->C,
             (long long)c->M, (long long)c->group);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    void *scratch = ktu_alloc(cuvil_f32_conv_nd_scratch_size(&p));
    cuvil_f32_conv_nd(&p, x, w, with_bias ? b : NULL, y, scratch);
    ktu_check(y, ref, ny, 1e-4, 1e-4, "%s [public]", label);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    cuvil_f32_conv_nd__scalar(&p, x, w, with_bias ? b : NULL, y);
    ktu_check(y, ref, ny, 1e-4, 1e-4, "%s [__scalar]", label);
    free(scratch);
    free(x);
    free(w);
    free(b);
    free(y);
    free(ref);
}

static void test_conv_nd(void) {
    static const nd_case cases[] = {
        /* tr N  C  M  g  in         k          s          d          pb         out */
        {0, 2, 3, 4, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {4, 5, 6}},   /* same padding */
        {0, 1, 4, 6, 2, {5, 6, 7}, {2, 3, 2}, {2, 1, 3}, {1, 2, 1}, {0, 1, 1}, {2, 4, 3}},   /* groups, strides, dilation */
        {0, 1, 4, 4, 4, {3, 4, 5}, {1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {3, 2, 3}},   /* depthwise */
        {1, 1, 3, 2, 1, {3, 3, 4}, {2, 2, 3}, {2, 2, 1}, {1, 1, 1}, {0, 1, 1}, {6, 4, 4}},   /* transpose, strides */
        {1, 2, 4, 6, 2, {2, 3, 3}, {3, 2, 2}, {1, 2, 3}, {2, 1, 1}, {1, 0, 0}, {4, 6, 8}},   /* transpose, groups, dilation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_conv_nd(&cases[i], 1);
        run_conv_nd(&cases[i], 0);
    }
}

/* Winograd with tiles as rows gives the same bits on 1 thread and on 3: 387 tiles (9 x 43) of
 * 16 channels split as 129 a thread, each part a block of 128 tiles and one of 1, where the
 * shared plan on one thread runs other blocks; a one-tile block once took the one-row product,
 * whose sums run in another order. */
static void test_winograd_threads_bitwise(void) {
    const conv_case cc = {1, 16, 36, 172, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    cuvil_conv2d_params p = to_params(&cc);
    p.layout = CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC;
    p.algo = CUVIL_CONV_WINOGRAD_T;
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    p.packed_mr = def->uk->nr;
    p.packed_kc = def->kc;
    const size_t nx = (size_t)(p.C * p.H * p.W), ny = (size_t)(p.M * p.OH * p.OW);
    const size_t nw = (size_t)(p.M * p.C * 9), nf = cuvil_f32_conv2d_packed_floats(&p);
    float *x = ktu_falloc(nx), *w = ktu_falloc(nw), *b = ktu_falloc((size_t)p.M), *y[2];
    float *wp = ktu_falloc(nf), *tmp = ktu_falloc(cuvil_f32_conv2d_pack_tmp_floats(&p));
    ktu_fill(x, nx, -1, 1);
    ktu_fill(w, nw, -1, 1);
    ktu_fill(b, (size_t)p.M, -1, 1);
    cuvil_f32_conv2d_pack(&p, w, wp, tmp);
    const size_t per = CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size(&p), 64);
    for (int k = 0; k < 2; k++) {
        const int threads = k ? 3 : 1;
        y[k] = ktu_falloc(ny);
        void *scratch = ktu_alloc((size_t)threads * per);
        cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
        if (threads > 1 && !pool) ktu_fail("winograd threads: no thread pool");
        const cuvil_pool *prev = cuvil_pool_bind(pool);
        cuvil_f32_conv2d_prepacked(&p, x, wp, b, NULL, y[k], scratch);
        cuvil_pool_bind(prev);
        cuvil_pool_destroy(pool);
        free(scratch);
    }
    if (memcmp(y[0], y[1], ny * sizeof(float)))
        ktu_fail("winograd, tiles as rows, 387 tiles: 3 threads differ from 1 in the bits");
    free(x), free(w), free(b), free(wp), free(tmp), free(y[0]), free(y[1]);
}

int main(void) {
    setenv("CUVIL_OVERSUBSCRIBE", "1", 1); /* pools of 3 threads even on 2 CPUs: uneven splits */
    test_winograd_threads_bitwise();
    test_channels_last();
    test_pointwise_nhwc_as_gemm_bits();
    test_mbblock();
    test_conv2d();
    test_conv_transpose2d();
    test_conv_nd();
    return ktu_finish("test_kernel_conv");
}
