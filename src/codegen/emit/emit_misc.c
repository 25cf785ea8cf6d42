/* emit_misc.c -- eye_like, lrn and reverse_sequence (op_misc.c) on their kernels. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_eye_like(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    char k[32];
    cg_printf(cg, "    cuvil_eyelike_t(%s, %s, %s, %s, %s);\n", cg_rt_type(y->dtype), cg_dimprod(cg, y->id, 0, 1, 1),
              cg_dimprod(cg, y->id, 1, 2, 1), cg_i64(cir_attr_int(n, "k"), k), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_lrn(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    char a[32], b[32], c[32];
    cg_printf(cg, "    cuvil_f32_lrn(%s, %s, %s, %lld, %s, %s, %s, %s, %s);\n", cg_dimprod(cg, x->id, 0, 1, 1),
              cg_dimprod(cg, x->id, 1, 2, 1), cg_dimprod(cg, x->id, 2, x->ndim, 1), (long long)cir_attr_int(n, "size"),
              cg_float(cir_attr_float(n, "alpha"), a), cg_float(cir_attr_float(n, "beta"), b),
              cg_float(cir_attr_float(n, "bias"), c), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_reverse_sequence(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    int tf = cir_attr_int(n, "time_axis") == 0;
    cg_printf(cg, "    if (cuvil_reverse_sequence(%zu, %d, %s, %s, %s, (const int64_t *)%s, %s, %s)) return 1;\n",
              cir_dtype_size(x->dtype), tf, cg_dimprod(cg, x->id, tf ? 0 : 1, tf ? 1 : 2, 1),
              cg_dimprod(cg, x->id, tf ? 1 : 0, tf ? 2 : 1, 1), cg_dimprod(cg, x->id, 2, x->ndim, 1), cg_in(cg, n->in[1]),
              cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    cg_fallible(cg, "a sequence length is outside 0..the time axis's length");
    return CUVIL_OK;
}

cuvil_status cg_emit_grid_sample(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_grid_sample_params p;
    cuvil_status s = op_grid_sample_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_grid_sample_params",
                              "{ .nd = %d, .mode = %d, .padding = %d, .align_corners = %d, .N = %lld, .C = %lld, "
                              ".in_dims = %s, .out_dims = %s }", p.nd, p.mode, p.padding, p.align_corners, (long long)p.N,
                              (long long)p.C, cg_i64s(cg, p.in_dims, 3), cg_i64s(cg, p.out_dims, 3));
    cg_printf(cg, "    cuvil_f32_grid_sample(&%s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_window(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *sz = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    char hi[32];
    int slot = n->n_rt ? cg_found_slot(cg, g, n, 0, hi) : -1;
    if (slot < 0) snprintf(hi, sizeof hi, "%lld", (long long)y->dims[0]);
    cg_printf(cg, "    {\n        int64_t len;\n        if (cuvil_window_t(%d, %d, %s, %s, %s, %s, &len, %s)) return 1;\n",
              (int)cir_attr_int(n, "kind"), cir_attr_int(n, "periodic") != 0, cg_rt_type(y->dtype), cg_rt_type(sz->dtype),
              cg_in(cg, n->in[0]), hi, cg_out(cg, n->out[0]));
    if (slot >= 0) cg_printf(cg, "        D[%d] = len;\n", slot);
    cg_printf(cg, "    }\n");
    cg_fallible(cg, "its size is negative or over the output's declared or --dim size");
    return CUVIL_OK;
}

cuvil_status cg_emit_einsum(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_einsum p;
    cuvil_status s = op_einsum_plan(g, n, &p);
    if (s) return s;
    op_einsum_gemm_plan q;
    if (op_einsum_gemm(&p, &q)) {   /* a contraction: the GEMM, operands read in place */
        const cuvil_gemm_params *gp = &q.p;
        char al[32], be[32], act[128];
        const char *ps = cg_param(cg, "cuvil_gemm_params",
                                  "{ .M = %lld, .N = %lld, .K = %lld, .lda = %lld, .ldb = %lld, .ldc = %lld, .trans_a = %d, "
                                  ".trans_b = %d, .alpha = %s, .beta = %s, .batch = %lld, .a_bstride = %lld, "
                                  ".b_bstride = %lld, .c_bstride = %lld, .act = %s }",
                                  (long long)gp->M, (long long)gp->N, (long long)gp->K, (long long)gp->lda,
                                  (long long)gp->ldb, (long long)gp->ldc, gp->trans_a, gp->trans_b, cg_float(gp->alpha, al),
                                  cg_float(gp->beta, be), (long long)gp->batch, (long long)gp->a_bstride,
                                  (long long)gp->b_bstride, (long long)gp->c_bstride, cg_act(&gp->act, act));
        cuvil_gemm_ukernel_desc uk;
        cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
        const char *S = cg_scratch(cg, cuvil_f32_gemm_scratch_size_ex(gp, &blk), "cuvil_f32_gemm_scratch_size(&%s)", ps);
        const char *A = cg_in(cg, n->in[q.swap ? 1 : 0]), *B = cg_in(cg, n->in[q.swap ? 0 : 1]);
        if (!q.n_items) {
            cg_printf(cg, "    cuvil_f32_gemm(&%s, %s, %s, NULL, %s, %s);\n", ps, A, B, cg_out(cg, n->out[0]), S);
            return CUVIL_OK;
        }
        int64_t *offs = cuvil_malloc(sizeof(int64_t) * 3 * (size_t)q.n_items);
        if (!offs) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        op_einsum_gemm_offsets(&p, &q, offs);
        const char *tab = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, offs, (int)(3 * q.n_items)));
        cuvil_free(offs);
        cg_printf(cg, "    for (int64_t i = 0; i < %lld; i++)\n        cuvil_f32_gemm(&%s, %s + %s[3 * i], %s + %s[3 * i + 1], NULL, "
                      "%s + %s[3 * i + 2], %s);\n", (long long)q.n_items, ps, A, tab, B, tab, cg_out(cg, n->out[0]), tab, S);
        return CUVIL_OK;
    }
    cuvil_sb ins = {0};
    for (int k = 0; k < p.n_in; k++) cuvil_sb_printf(&ins, "%s%s", k ? ", " : "", cg_in(cg, n->in[k]));
    cg_printf(cg, "    {\n        const void *const xs[] = { %s };\n", ins.s ? ins.s : "NULL");
    cuvil_sb_free(&ins);
    cg_printf(cg, "        cuvil_einsum_t(%s, %d, %d, %d, (const int64_t[])%s, (const int64_t[])%s, xs, %s);\n    }\n", cg_rt_type(p.dtype), p.n_in, p.n_lab,
              p.n_out_lab, cg_i64s(cg, p.sizes, CUVIL_EINSUM_MAX_LAB), cg_i64s(cg, p.strides, p.n_in * CUVIL_EINSUM_MAX_LAB),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_tfidf(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_tfidf t;
    cuvil_status s = op_tfidf_table(g, n, &t);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t np = 0;
    for (int64_t i = 0; i < t.n_grams; i++)
        if (t.start[i] + t.len[i] > np) np = t.start[i] + t.len[i];
    const char *tok = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, t.tokens, (int)np));
    const char *st = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, t.start, (int)t.n_grams));
    const char *ln = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, t.len, (int)t.n_grams));
    const char *out = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, t.out, (int)t.n_grams));
    const char *w = "NULL";
    if (t.weights) {
        cuvil_sb sb = {0};
        char f[32];
        cuvil_sb_puts(&sb, "{ ");
        for (int64_t i = 0; i < t.n_grams; i++) cuvil_sb_printf(&sb, "%s%s", i ? ", " : "", cg_float(t.weights[i], f));
        cuvil_sb_puts(&sb, " }");
        w = cg_param(cg, "float[]", "%s", sb.s ? sb.s : "{ 0 }");
        cuvil_sb_free(&sb);
    }
    const char *ps = cg_param(cg, "cuvil_tfidf_params",
                              "{ .mode = %d, .x_i32 = %d, .rows = %lld, .C = %lld, .out_size = %lld, .min_n = %lld, "
                              ".max_n = %lld, .max_skip = %lld, .n_grams = %lld, .tokens = %s, .start = %s, .len = %s, "
                              ".out = %s, .weights = %s }",
                              t.mode, x->dtype == CIR_I32, (long long)(x->ndim == 2 ? x->dims[0] : 1),
                              (long long)x->dims[x->ndim - 1], (long long)t.out_size, (long long)t.min_n,
                              (long long)t.max_n, (long long)t.max_skip, (long long)t.n_grams, tok, st, ln, out, w);
    cg_printf(cg, "    cuvil_tfidf(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_det(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    int64_t m = x->dims[x->ndim - 1];   /* (its bound where symbolic) */
    const char *S = cg_scratch(cg, (size_t)(8 * m * m), "(size_t)8 * %lld * %lld", (long long)m, (long long)m);
    cg_printf(cg, "    cuvil_f32_det(%s, %s, %s, %s, %s);\n", cg_dimprod(cg, x->id, 0, x->ndim - 2, 1),
              cg_dimprod(cg, x->id, x->ndim - 1, x->ndim, 1), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}

cuvil_status cg_emit_dft(cg_ctx *cg, cir_graph *g, cir_node *n) {
    if (op_dft_runtime(g, n, 1, 2)) {
        cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0), *av = cir_in(g, n, 2), *lv = cir_in(g, n, 1);
        int64_t axis = cir_attr_int(n, "axis"), len = -1;
        if (av && cir_is_const(av)) axis = cir_const_i64(av, 0);
        if (lv && cir_is_const(lv)) len = cir_const_i64(lv, 0);
        bool art = av && !cir_is_const(av), lrt = lv && !cir_is_const(lv);
        const char *ps = cg_param(cg, "cuvil_dft_rt_params",
                                  "{ .ndim = %d, .inverse = %d, .onesided = %d, .axis_t = %s, .len_t = %s, .axis = %lld, "
                                  ".n = %lld, .dims = %s, .out_dims = %s }", x->ndim, cir_attr_int(n, "inverse") != 0,
                                  cir_attr_int(n, "onesided") != 0, art ? cg_rt_type(av->dtype) : "0",
                                  lrt ? cg_rt_type(lv->dtype) : "0", (long long)axis, (long long)len,
                                  cg_i64s(cg, x->dims, x->ndim), cg_i64s(cg, y->dims, y->ndim));
        cg_printf(cg, "    if (cuvil_f32_dft_rt(&%s, %s, %s, %s, %s)) return 1;\n", ps, art ? cg_in(cg, n->in[2]) : "NULL",
                  lrt ? cg_in(cg, n->in[1]) : "NULL", cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        cg_fallible(cg, "its axis or dft_length is invalid or gives another output shape than the model declares");
        return CUVIL_OK;
    }
    cuvil_dft_params p;
    int axis;
    cuvil_status s = op_dft_params(g, n, &p, &axis);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_dft_params",
                              "{ .mode = %d, .in_complex = %d, .outer = %lld, .len = %lld, .inner = %lld, .n = %lld, "
                              ".out_len = %lld }", p.mode, p.in_complex, (long long)p.outer, (long long)p.len,
                              (long long)p.inner, (long long)p.n, (long long)p.out_len);
    cg_printf(cg, "    cuvil_f32_dft(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_stft(cg_ctx *cg, cir_graph *g, cir_node *n) {
    if (op_dft_runtime(g, n, 1, 1) || op_dft_runtime(g, n, 3, 3)) {
        cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0), *sv = cir_in(g, n, 1), *w = cir_in(g, n, 2), *lv = cir_in(g, n, 3);
        bool srt = !cir_is_const(sv), lrt = lv && !cir_is_const(lv);
        const char *ps = cg_param(cg, "cuvil_stft_rt_params",
                                  "{ .in_complex = %d, .onesided = %d, .step_t = %s, .len_t = %s, .batch = %lld, "
                                  ".sig_len = %lld, .win_len = %lld, .step = %lld, .flen = %lld, .frames = %lld, "
                                  ".bins = %lld }", x->dims[2] == 2, cir_attr_int(n, "onesided") != 0,
                                  srt ? cg_rt_type(sv->dtype) : "0", lrt ? cg_rt_type(lv->dtype) : "0",
                                  (long long)x->dims[0], (long long)x->dims[1], (long long)(w ? w->dims[0] : -1),
                                  (long long)(srt ? 0 : cir_const_i64(sv, 0)),
                                  (long long)(lv && !lrt ? cir_const_i64(lv, 0) : -1), (long long)y->dims[1],
                                  (long long)y->dims[2]);
        cg_printf(cg, "    if (cuvil_f32_stft_rt(&%s, %s, %s, %s, %s, %s)) return 1;\n", ps, srt ? cg_in(cg, n->in[1]) : "NULL",
                  lrt ? cg_in(cg, n->in[3]) : "NULL", cg_in(cg, n->in[0]), w ? cg_in(cg, n->in[2]) : "NULL",
                  cg_out(cg, n->out[0]));
        cg_fallible(cg, "its frame_step or frame_length is invalid or gives another output shape than the model declares");
        return CUVIL_OK;
    }
    cuvil_stft_params p;
    cuvil_status s = op_stft_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_stft_params",
                              "{ .in_complex = %d, .batch = %lld, .sig_len = %lld, .step = %lld, .frames = %lld, "
                              ".win_len = %lld, .n = %lld, .bins = %lld }", p.in_complex, (long long)p.batch,
                              (long long)p.sig_len, (long long)p.step, (long long)p.frames, (long long)p.win_len,
                              (long long)p.n, (long long)p.bins);
    cg_printf(cg, "    cuvil_f32_stft(&%s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]),
              cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_rotary(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_rotary r;
    cuvil_status s = op_rotary_sizes(g, n, &r);
    if (s) return s;
    cir_value *pos = cir_in(g, n, 3);
    cg_printf(cg, "    if (cuvil_f32_rotary(%d, %d, %s, %s, %lld, %lld, %lld, %s, %s, %s, %s, %s, %s)) return 1;\n",
              cir_attr_int(n, "interleaved") != 0, r.x4d, cg_dim_c(cg, r.B), cg_dim_c(cg, r.S), (long long)r.H,
              (long long)r.D, (long long)r.rot, pos ? cg_dimprod(cg, n->in[1], 0, 1, 1) : "0", cg_in(cg, n->in[0]),
              cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), pos ? cg_in(cg, n->in[3]) : "NULL", cg_out(cg, n->out[0]));
    cg_fallible(cg, "a position id is outside the caches");
    return CUVIL_OK;
}

cuvil_status cg_emit_center_crop_pad(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int64_t axes[8];
    int na;
    cuvil_status s = op_ccp_axes(g, n, axes, &na);
    if (s) return s;
    cg_printf(cg, "    if (cuvil_center_crop_pad(%d, (const int64_t[])%s, (const int64_t[])%s, %d, (const int64_t[])%s, "
              "(const int64_t *)%s, %zu, %s, %s)) return 1;\n", x->ndim, cg_i64s(cg, x->dims, x->ndim),
              cg_i64s(cg, y->dims, y->ndim), na, cg_i64s(cg, axes, na), cg_in(cg, n->in[1]), cir_dtype_size(x->dtype),
              cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    cg_fallible(cg, "its shape gives another output than the model declares");
    return CUVIL_OK;
}

cuvil_status cg_emit_affine_grid(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *th = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int nd = (int)th->dims[1];
    cg_printf(cg, "    if (cuvil_f32_affine_grid(%d, %d, %lld, (const int64_t[])%s, (const int64_t *)%s, %s, %s)) return 1;\n", nd,
              cir_attr_int(n, "align_corners") != 0, (long long)th->dims[0], cg_i64s(cg, y->dims + 1, nd),
              cg_in(cg, n->in[1]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    cg_fallible(cg, "its size gives another grid than the model declares");
    return CUVIL_OK;
}

cuvil_status cg_emit_col2im(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int nsp = y->ndim - 2;
    int64_t d[CUVIL_ND_MAX], st[CUVIL_ND_MAX], pads[2 * CUVIL_ND_MAX];
    cuvil_status s = op_col2im_attrs(g, n, nsp, d, st, pads);
    if (s) return s;
    cg_printf(cg, "    if (cuvil_f32_col2im(%d, %lld, %lld, %lld, %lld, (const int64_t[])%s, (const int64_t[])%s, "
              "(const int64_t[])%s, (const int64_t[])%s, (const int64_t *)%s, (const int64_t *)%s, %s, %s)) return 1;\n",
              nsp, (long long)y->dims[0], (long long)y->dims[1], (long long)x->dims[1], (long long)x->dims[2],
              cg_i64s(cg, y->dims + 2, nsp), cg_i64s(cg, d, nsp), cg_i64s(cg, st, nsp), cg_i64s(cg, pads, 2 * nsp),
              cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    cg_fallible(cg, "its image_shape or block_shape gives another output than the model declares");
    return CUVIL_OK;
}

cuvil_status cg_emit_causal_conv(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_causal_conv c;
    cuvil_status s = op_causal_conv_sizes(g, n, &c);
    if (s) return s;
    cg_printf(cg, "    cuvil_f32_causal_conv(%s, %lld, %s, %lld, %d, %s, %s, %s, %s, %s, %s);\n", cg_dim_c(cg, c.B),
              (long long)c.C, cg_dim_c(cg, c.L), (long long)c.K, c.act, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
              cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cir_in(g, n, 3) ? cg_in(cg, n->in[3]) : "NULL",
              cg_out(cg, n->out[0]), cir_out_opt(g, n, 1) ? cg_out(cg, n->out[1]) : "NULL");
    return CUVIL_OK;
}

cuvil_status cg_emit_linear_attention(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_linear_attention a;
    cuvil_status s = op_linear_attention_sizes(g, n, &a);
    if (s) return s;
    char sc[32];
    size_t bytes = sizeof(float) * (size_t)((a.dk + 1) * a.dv);
    const char *S = cg_scratch(cg, bytes, "%zu", bytes);
    cg_printf(cg, "    {\n        const cuvil_linear_attention_params p = { .gated = %d, .delta = %d, .B = %s, .T = %s, "
              ".hq = %lld, .hk = %lld, .dk = %lld, .dv = %lld, .decay_w = %lld, .beta_w = %lld, .scale = %s };\n"
              "        cuvil_f32_linear_attention(&p, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n    }\n",
              a.gated, a.delta, cg_dim_c(cg, a.B), cg_dim_c(cg, a.T), (long long)a.hq, (long long)a.hk, (long long)a.dk,
              (long long)a.dv, (long long)a.decay_w, (long long)a.beta_w, cg_float(a.scale, sc), cg_in(cg, n->in[0]),
              cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), cir_in(g, n, 3) ? cg_in(cg, n->in[3]) : "NULL",
              cir_in(g, n, 4) ? cg_in(cg, n->in[4]) : "NULL", cir_in(g, n, 5) ? cg_in(cg, n->in[5]) : "NULL",
              cg_out(cg, n->out[0]), cir_out_opt(g, n, 1) ? cg_out(cg, n->out[1]) : "NULL", S);
    return CUVIL_OK;
}
