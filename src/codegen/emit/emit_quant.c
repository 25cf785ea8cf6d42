/* emit_quant.c -- the quantization ops (op_quant.c) on their kernels (typed.c). */
#include "codegen/emit/emit_int.h"

#include <math.h>

cuvil_status cg_emit_quant(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_quant_params p;
    cuvil_status s = op_quant_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *sc = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    char outer[32];
    snprintf(outer, sizeof outer, "%lld", (long long)p.outer);
    /* (symbolic dims: per tensor, the run's element count) */
    const char *ps = cg_param(cg, "cuvil_quant_params", "{ .outer = %s, .len = %lld, .inner = %lld, .block = %lld, "
                              ".mode = %d, .saturate = %d }", !cir_value_fixed(x) ? cg_numel(cg, x->id) : outer,
                              (long long)p.len, (long long)p.inner, (long long)p.block, p.mode, p.saturate);
    cg_printf(cg, "    cuvil_%s_t(&%s, %s, %s, %s, %s, %s, %s, %s);\n", n->kind == CIR_OP_QUANTIZE ? "quantize" : "dequantize", ps,
              cg_rt_type(x->dtype), cg_in(cg, n->in[0]), cg_rt_type(sc->dtype), cg_in(cg, n->in[1]),
              cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cg_rt_type(y->dtype), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_dynamic_quantize(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cg_printf(cg, "    cuvil_dynamic_quantize(%s, %s, %s, %s, %s);\n", cg_numel(cg, n->in[0]), cg_in(cg, n->in[0]),
              cg_out(cg, n->out[0]), cg_out(cg, n->out[1]), cg_out(cg, n->out[2]));
    (void)g;
    return CUVIL_OK;
}

static bool i8t(cir_dtype t) { return t == CIR_U8 || t == CIR_I8; }
static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The requantizing (or float) multiplier: computed now into the weights when the scales are
 * constants, else by the run into the scratch at byte `off` (the caller sized it). *per: one
 * value or one per row/column (ws's count). */
static const char *qscale(cg_ctx *cg, cir_graph *g, cir_node *n, int ixs, int iws, int iys, const char *S, size_t off) {
    cir_value *xs = cir_in(g, n, ixs), *ws = cir_in(g, n, iws), *ys = iys >= 0 ? cir_in(g, n, iys) : NULL;
    const int64_t cnt = cir_numel(ws);
    if (cir_is_const(xs) && cir_is_const(ws) && (!ys || cir_is_const(ys))) {
        float *sc = cuvil_malloc(sizeof(float) * (size_t)cnt);
        if (!sc) return NULL;
        cuvil_qscale(cnt, xs->data, ws->data, cnt, ys ? ys->data : NULL, sc);
        const char *e = cg_data(cg, sc, sizeof(float) * (size_t)cnt, CIR_F32);
        cuvil_free(sc);
        return e;
    }
    char buf[96];
    snprintf(buf, sizeof buf, "(float *)((char *)%s + %zu)", S, off);
    const char *e = cg_str(cg, buf);
    cg_printf(cg, "    cuvil_qscale(%lld, %s, %s, %lld, %s, %s);\n", (long long)cnt, cg_in(cg, n->in[ixs]), cg_in(cg, n->in[iws]),
              (long long)cnt, ys ? cg_in(cg, n->in[iys]) : "NULL", e);
    return e;
}

/* A bound of the quantized output from the float clamp v (min or max): zp + rint(v / y_scale)
 * within y's type (the constants op_qclamp_check asked for). */
static int32_t qbound(cir_graph *g, cir_node *n, float v, int iys, int iyz, int32_t tlo, int32_t thi) {
    if (v == -INFINITY) return tlo;
    if (v == INFINITY) return thi;
    cir_value *yz = cir_in(g, n, iyz);
    const double q = (double)nearbyintf(v / (float)cir_const_f64(cir_in(g, n, iys), 0)) + (yz ? (double)cir_const_i64(yz, 0) : 0);
    return q != q ? tlo : q < tlo ? tlo : q > thi ? thi : (int32_t)q;
}

/* `cuvil_qgemm_epi E = ...;` in a block the caller closes: int32 out (kind I32), float out, or
 * requantized to y's type with its zero point (input iyz, -1 or absent: 0), the clamp from the
 * node's min/max (y's scale input iys); the bias (input ibias, -1: none) int32 per row or
 * column (bias_per). */
static void qepi(cg_ctx *cg, cir_graph *g, cir_node *n, int kind, const char *scale, int scale_per, int ibias, int bias_per,
                 int iys, int iyz, int64_t ldy) {
    cir_value *y = cir_out(g, n, 0);
    cg_printf(cg, "    {\n        cuvil_qgemm_epi E = { .kind = %d, .yt = %s, .scale = %s, .scale_per = %d, .ibias = %s, "
              ".bias_per = %d, .y = %s, .ldy = %lld };\n", kind, cg_rt_type(y->dtype), scale ? scale : "NULL", scale_per,
              ibias >= 0 && cir_in(g, n, ibias) ? cg_in(cg, n->in[ibias]) : "NULL", bias_per, cg_out(cg, n->out[0]),
              (long long)ldy);
    if (kind == CUVIL_QEPI_REQUANT) {
        const int32_t tlo = y->dtype == CIR_I8 ? -128 : 0, thi = y->dtype == CIR_I8 ? 127 : 255;
        const bool z = iyz >= 0 && cir_in(g, n, iyz);
        cg_printf(cg, "        E.yzp = %s%s%s; E.lo = %d; E.hi = %d;\n", z ? "(int32_t)(" : "0", z ? cg_in(cg, n->in[iyz]) : "",
                  z ? ")[0]" : "", qbound(g, n, cir_attr_float(n, "min"), iys, iyz, tlo, thi),
                  qbound(g, n, cir_attr_float(n, "max"), iys, iyz, tlo, thi));
    }
}

static size_t qconv_size(const cuvil_conv2d_params *q, const void *user) {
    (void)user;
    return cuvil_qconv_scratch_size(q);
}

cuvil_status cg_emit_qconv(cg_ctx *cg, cir_graph *g, cir_node *n) {
    const bool ql = n->kind == CIR_OP_QLINEAR_CONV;
    cuvil_conv2d_params p;
    cuvil_status s = op_conv_params(g, n, false, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    const int ixz = ql ? 3 : 2, iwz = ql ? 5 : 3;
    cir_value *xz = cir_in(g, n, ixz), *wz = cir_in(g, n, iwz);
    /* symbolic dims: the run's sizes, and the kernel's scratch the largest over the symbols' values
     * (p: the upper bounds); the weights and scales after it */
    const bool sym = cg_node_symbolic(g, n);
    op_geo_x gx;
    if (sym && (s = op_conv_kx(g, n, &gx))) return s;
    char f[768];
    const char *ps = cg_param(cg, "cuvil_conv2d_params", "{ %s }", sym ? cg_conv_geo_fields_x(cg, &p, &gx) : cg_conv_geo_fields(&p, f, sizeof f));
    /* the weights packed now when they are constants (as ever), else by the run into the scratch */
    const bool wconst = cir_is_const(w);
    const size_t wbytes = wconst ? 0 : al64(cuvil_qconv_packed_w_bytes(&p));
    const size_t raw = sym ? cg_conv_scratch_bound(g, &p, &gx, qconv_size, NULL) : cuvil_qconv_scratch_size(&p);
    const size_t need = al64(raw), extra = wbytes + al64(sizeof(float) * (size_t)p.M);
    /* (the run checks its need, its own sizes', against the reservation: past `need` lie the weights) */
    const char *S = cg_scratch(cg, need + extra, "cuvil_qconv_scratch_size(&%s) + %zu + %zu", ps, need - raw, extra);
    const char *wp;
    if (wconst) {
        void *buf = cuvil_malloc(cuvil_qconv_packed_w_bytes(&p));
        if (!buf) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        cuvil_qconv_pack_w(&p, w->dtype == CIR_I8 ? CUVIL_T_I8 : CUVIL_T_U8, w->data, buf);
        wp = cg_data(cg, buf, cuvil_qconv_packed_w_bytes(&p), CIR_U8);
        cuvil_free(buf);
    } else {
        char b[96];
        snprintf(b, sizeof b, "((char *)%s + %zu)", S, need);
        wp = cg_str(cg, b);
        cg_printf(cg, "    cuvil_qconv_pack_w(&%s, %s, %s, %s);\n", ps, cg_rt_type(w->dtype), cg_in(cg, n->in[1]), wp);
    }
    const char *scale = NULL;
    int per = CUVIL_QPER_ONE, kind = CUVIL_QEPI_I32;
    if (ql) {
        if (!(scale = qscale(cg, g, n, 2, 4, cir_in(g, n, 6) ? 6 : -1, S, need + wbytes)))
            return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        per = cir_numel(cir_in(g, n, 4)) > 1 ? CUVIL_QPER_ROW : CUVIL_QPER_ONE;
        kind = y->dtype == CIR_F32 ? CUVIL_QEPI_F32 : CUVIL_QEPI_REQUANT;
    }
    qepi(cg, g, n, kind, scale, per, ql ? 8 : -1, CUVIL_QPER_ROW, ql ? 6 : -1, ql ? 7 : -1, 0);
    cg_printf(cg, "        cuvil_qconv(&%s, %s, %s, %s, %s, %s, %lld, &E, %s);\n    }\n", ps, cg_rt_type(x->dtype),
              cg_in(cg, n->in[0]), xz ? cg_in(cg, n->in[ixz]) : "NULL", wp, wz ? cg_in(cg, n->in[iwz]) : "NULL",
              wz ? (long long)cir_numel(wz) : 0LL, S);
    return CUVIL_OK;
}

/* MatMulInteger / QLinearMatMul of 8-bit operands on the integer GEMM: B packed now when it is
 * a constant; a batch of A against a 2-D B as one product of all the rows (unless a's zero
 * point is per row), else one product per batch item. */
static cuvil_status imatmul_fast(cg_ctx *cg, cir_graph *g, cir_node *n, const op_imatmul *m, int ia, int ib, int iaz, int ibz) {
    const bool q = n->kind == CIR_OP_QLINEAR_MATMUL;
    cir_value *a = cir_in(g, n, ia), *b = cir_in(g, n, ib), *az = cir_in(g, n, iaz), *bz = cir_in(g, n, ibz);
    const int64_t az_n = az ? cir_numel(az) : 0, bz_n = bz ? cir_numel(bz) : 0;
    /* (symbolic dims: infer allowed only a 2-D b and one a zero point, so always one product,
     * whatever a_bs is at the bounds: K may be 0) */
    const bool flat = m->sym || (m->b_bs == 0 && (az_n <= 1 || m->batch == 1) && (m->a_bs != 0 || m->batch == 1));
    /* rows: a number, or with symbolic dims the run's (the sizes in m their upper bounds, for
     * the scratch); infer allowed symbolic dims only where the product is flat */
    const int64_t rows = flat ? m->batch * m->M : m->M, reps = flat ? 1 : m->batch;
    char rbuf[32];
    const char *rows_c = m->sym ? cg_dimprod(cg, a->id, 0, a->ndim - 1, 1) : (snprintf(rbuf, sizeof rbuf, "%lld", (long long)rows), rbuf);
    const bool bconst = cir_is_const(b) && m->b_bs == 0;
    const char *bp = "NULL";
    if (bconst) {
        /* pair-split for a target without VNNI where few pairs need a correction */
        const int bt = b->dtype == CIR_I8 ? CUVIL_T_I8 : CUVIL_T_U8;
        const int64_t ex = cg_target_pair_split(g) ? cuvil_qgemm_pair_excess(m->K, m->N, bt, b->data, m->N, 1) : -1;
        const bool split = ex >= 0 && ex <= cuvil_qgemm_split_cap(m->K, m->N);
        const size_t nb = split ? cuvil_qgemm_packed_b_split_bytes(m->K, m->N, ex) : cuvil_qgemm_packed_b_bytes(m->K, m->N);
        void *buf = cuvil_malloc(nb);
        if (!buf) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (split) cuvil_qgemm_pack_b_split(m->K, m->N, bt, b->data, m->N, 1, buf);
        else cuvil_qgemm_pack_b(m->K, m->N, bt, b->data, m->N, 1, buf);
        bp = cg_data(cg, buf, nb, CIR_U8);
        cuvil_free(buf);
    }
    const size_t need = al64(cuvil_qgemm_scratch_size(rows, m->N, m->K, 0, bconst)), extra = sizeof(float) * (size_t)m->N;
    const char *S = cg_scratch(cg, need + extra, "cuvil_qgemm_scratch_size(%lld, %lld, %lld, 0, %d) + %zu + %zu", (long long)rows,
                               (long long)m->N, (long long)m->K, bconst,
                               need - cuvil_qgemm_scratch_size(rows, m->N, m->K, 0, bconst), extra);
    const char *scale = NULL;
    int per = CUVIL_QPER_ONE, kind = CUVIL_QEPI_I32;
    if (q) {
        const bool fout = !cir_in(g, n, 6);
        if (!(scale = qscale(cg, g, n, 1, 4, fout ? -1 : 6, S, need))) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        per = cir_numel(cir_in(g, n, 4)) > 1 ? CUVIL_QPER_COL : CUVIL_QPER_ONE;
        kind = fout ? CUVIL_QEPI_F32 : CUVIL_QEPI_REQUANT;
    }
    qepi(cg, g, n, kind, scale, per, q ? 8 : -1, CUVIL_QPER_COL, q ? 6 : -1, q ? 7 : -1, m->N);
    cir_value *fb = q ? cir_in(g, n, 9) : NULL;   /* (the dynamic fold's float bias; infer: no int32 one beside it) */
    if (fb) cg_printf(cg, "        E.fbias = %s; E.bias_per = %d;\n", cg_in(cg, n->in[9]), cir_numel(fb) > 1 ? CUVIL_QPER_COL : CUVIL_QPER_ONE);
    const size_t ysz = kind == CUVIL_QEPI_REQUANT ? 1 : 4;
    cg_printf(cg, "        for (int64_t q = 0; q < %lld; q++) {\n            E.y = (char *)%s + (size_t)(q * %lld) * %zu;\n",
              (long long)reps, cg_out(cg, n->out[0]), (long long)(rows * m->N), ysz);
    /* B itself only where it is not packed: a reference would put the constant in the library
     * beside its packed copy (BERT-base's int8 weights stored twice) */
    char braw[512];
    if (bconst) snprintf(braw, sizeof braw, "NULL");
    else snprintf(braw, sizeof braw, "(const int8_t *)%s + q * %lld", cg_in(cg, n->in[ib]), (long long)m->b_bs);
    cg_printf(cg, "            cuvil_qgemm(%s, %lld, %lld, %s, (const int8_t *)%s + q * %lld, %lld, NULL, %s, %s, "
              "%lld, %s, %s, %lld, %s, %lld, &E, %s);\n        }\n    }\n", rows_c, (long long)m->N, (long long)m->K,
              cg_rt_type(a->dtype), cg_in(cg, n->in[ia]), (long long)m->a_bs, (long long)m->K, cg_rt_type(b->dtype), braw,
              (long long)m->N, bp, az ? cg_in(cg, n->in[iaz]) : "NULL", (long long)az_n, bz ? cg_in(cg, n->in[ibz]) : "NULL",
              (long long)bz_n, S);
    return CUVIL_OK;
}

cuvil_status cg_emit_imatmul(cg_ctx *cg, cir_graph *g, cir_node *n) {
    bool q = n->kind == CIR_OP_QLINEAR_MATMUL;
    int ia = 0, ib = q ? 3 : 1, iaz = q ? 2 : 2, ibz = q ? 5 : 3;
    op_imatmul m;
    cuvil_status s = op_imatmul_sizes(g, n, ia, ib, &m);
    if (s) return s;
    cir_value *a = cir_in(g, n, ia), *b = cir_in(g, n, ib), *az = cir_in(g, n, iaz), *bz = cir_in(g, n, ibz);
    if (i8t(a->dtype) && i8t(b->dtype) && (!q || cir_in(g, n, 1)->dtype == CIR_F32))
        return m.batch > 0 && m.M > 0 && m.N > 0 ? imatmul_fast(cg, g, n, &m, ia, ib, iaz, ibz) : CUVIL_OK;
    if (q && (!cir_in(g, n, 6) || cir_in(g, n, 8) || cir_attr_float(n, "min") != -INFINITY || cir_attr_float(n, "max") != INFINITY))
        return cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "qlinear_matmul '%s': the reference kernel takes only QLinearMatMul's form",
                         n->name);
    cg_printf(cg, "    cuvil_%s(%lld, %lld, %lld, %lld, %s, %s, %lld, %s, %s, %lld, %s, %lld, %s, %lld, ", q ? "qlinear_matmul" : "matmul_integer",
              (long long)m.batch, (long long)m.M, (long long)m.N, (long long)m.K, cg_rt_type(a->dtype), cg_in(cg, n->in[ia]),
              (long long)m.a_bs, cg_rt_type(b->dtype), cg_in(cg, n->in[ib]), (long long)m.b_bs, az ? cg_in(cg, n->in[iaz]) : "NULL",
              az ? (long long)cir_numel(az) : 0LL, bz ? cg_in(cg, n->in[ibz]) : "NULL", bz ? (long long)cir_numel(bz) : 0LL);
    if (q) {
        cir_value *bs = cir_in(g, n, 4), *yz = cir_in(g, n, 7);
        cg_printf(cg, "%s, %s, %s, %lld, %s, %s, %s, %s);\n", cg_rt_type(cir_in(g, n, 1)->dtype), cg_in(cg, n->in[1]),
                  cg_in(cg, n->in[4]), (long long)cir_numel(bs), cg_in(cg, n->in[6]), cg_rt_type(yz->dtype), cg_in(cg, n->in[7]),
                  cg_out(cg, n->out[0]));
    } else {
        cg_printf(cg, "(int32_t *)%s);\n", cg_out(cg, n->out[0]));
    }
    return CUVIL_OK;
}

cuvil_status cg_emit_qadd(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 3), *y = cir_out(g, n, 0), *yz = cir_in(g, n, 7);
    const int32_t tlo = y->dtype == CIR_I8 ? -128 : 0, thi = y->dtype == CIR_I8 ? 127 : 255;
    cg_printf(cg, "    cuvil_qadd(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %d, %d, %s);\n", cg_numel(cg, n->in[0]),
              cg_rt_type(a->dtype), cg_in(cg, n->in[0]), cg_in(cg, n->in[1]), cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL",
              cg_rt_type(b->dtype), cg_in(cg, n->in[3]), cg_in(cg, n->in[4]), cir_in(g, n, 5) ? cg_in(cg, n->in[5]) : "NULL",
              cg_in(cg, n->in[6]), cg_rt_type(y->dtype), yz ? cg_in(cg, n->in[7]) : "NULL",
              qbound(g, n, cir_attr_float(n, "min"), 6, 7, tlo, thi), qbound(g, n, cir_attr_float(n, "max"), 6, 7, tlo, thi),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* matmul_nbits: 4-bit weights dequantized inside the product (cuvil_matmul_q4); a's rows the
 * run's where they are symbolic. */
cuvil_status cg_emit_matmul_nbits(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0);
    const int64_t K = cir_attr_int(n, "K"), N = cir_attr_int(n, "N"), bs = cir_attr_int(n, "block_size");
    const int64_t rows = cir_numel(a) / K;   /* (the upper bound where they are symbolic) */
    char rbuf[32];
    const char *rows_c = cir_value_fixed(a) ? (snprintf(rbuf, sizeof rbuf, "%lld", (long long)rows), rbuf)
                                            : cg_dimprod(cg, a->id, 0, a->ndim - 1, 1);
    const char *S = cg_scratch(cg, cuvil_matmul_q4_scratch_size(rows, K, bs), "cuvil_matmul_q4_scratch_size(%lld, %lld, %lld)",
                               (long long)rows, (long long)K, (long long)bs);
    cg_printf(cg, "    {\n        const cuvil_q4_params p = {%s, %lld, %lld, %lld};\n"
                  "        cuvil_matmul_q4(&p, %s, %s, %s, %s, %s, %s);\n    }\n",
              rows_c, (long long)K, (long long)N, (long long)bs, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]), cg_in(cg, n->in[2]),
              cg_in(cg, n->in[3]), cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}
