/* emit_sdpa.c -- sdpa (op_sdpa.c): the key/value cache joined into present_key/present_value
 * (cuvil_f32_kv_concat), then the attention kernel through strides (cuvil_f32_attention_qk). */
#include "codegen/emit/emit_int.h"

#include <math.h>

/* The strides (batch, head, row) of a [batch, seq, heads * size] (rank 3) or [batch, heads,
 * seq, size] (rank 4) tensor, as C. */
static void strides(cg_ctx *cg, const cir_value *x, int64_t size, const char **bs, const char **hs, const char **rs) {
    char b[32];
    *bs = cg_dimprod(cg, x->id, 1, x->ndim, 1);
    if (x->ndim == 4) {
        *hs = cg_dimprod(cg, x->id, 2, 4, 1);
        *rs = cg_str(cg, cg_i64(size, b));
    } else {
        *hs = cg_str(cg, cg_i64(size, b));
        *rs = cg_dimprod(cg, x->id, 2, 3, 1);
    }
}

cuvil_status cg_emit_sdpa(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_sdpa a;
    cuvil_status s = op_sdpa_shape(g, n, &a);
    if (s) return s;
    cir_value *q = cir_in(g, n, 0), *m = cir_in(g, n, 3), *y = cir_out(g, n, 0), *qk = cir_out_opt(g, n, 3);
    const char *kv_ptr[2], *kv_s[2][3];
    char b[32];
    for (int i = 0; i < 2; i++) {   /* keys, then values: through present_* when the node has it */
        cir_value *cur = cir_in(g, n, 1 + i), *past = cir_in(g, n, 4 + i), *pres = cir_out_opt(g, n, 1 + i);
        int64_t size = i ? a.v_dim : a.dim;
        const char *cs[3];
        strides(cg, cur, size, &cs[0], &cs[1], &cs[2]);
        if (!pres) {
            CUVIL_ASSERT(!past);   /* the frontend gives a node with a cache its present outputs */
            kv_ptr[i] = cg_in(cg, n->in[1 + i]);
            for (int j = 0; j < 3; j++) kv_s[i][j] = cs[j];
            continue;
        }
        cg_printf(cg, "    cuvil_f32_kv_concat(%s, %s, %s, %s, %s, %s, %s, %s, %lld, %lld, %s);\n",
                  past ? cg_in(cg, n->in[4 + i]) : "NULL", cg_dim_c(cg, a.p_len), cg_in(cg, n->in[1 + i]), cs[0], cs[1], cs[2],
                  cg_dim_c(cg, a.s_len), cg_dim_c(cg, a.batch), (long long)a.kv_heads, (long long)size,
                  cg_out(cg, n->out[1 + i]));
        kv_ptr[i] = cg_out(cg, n->out[1 + i]);
        strides(cg, pres, size, &kv_s[i][0], &kv_s[i][1], &kv_s[i][2]);
    }
    const char *qs[3], *ys[3];
    strides(cg, q, a.dim, &qs[0], &qs[1], &qs[2]);
    strides(cg, y, a.v_dim, &ys[0], &ys[1], &ys[2]);
    const char *ms[4] = {"0", "0", "0", "0"}, *m_cols = "0";
    if (m) {   /* right-aligned onto [batch, q heads, q seq, keys]; dims of 1 broadcast */
        for (int d = 0; d < m->ndim - 1; d++) {
            const cir_dim *md = cir_dimx(g, m, d);
            if (!(md->kind == CIR_DIM_CONST && md->c == 1)) ms[4 - m->ndim + d] = cg_dimprod(cg, m->id, d + 1, m->ndim, 1);
        }
        ms[3] = "1";
        m_cols = cg_dimprod(cg, m->id, m->ndim - 1, m->ndim, 1);
    }
    float scale = cir_attr_int(n, "has_scale") ? cir_attr_float(n, "scale") : (float)(1.0 / sqrt((double)a.dim));
    int64_t lw = cir_attr_int(n, "left_window_size"), rw = cir_attr_int(n, "right_window_size");
    char f1[32], f2[32], l1[32], l2[32];
    const char *ps = cg_param(
        cg, "cuvil_attention_params",
        "{ .batch = %s, .heads = %lld, .q_len = %s, .kv_len = %s, .dim = %lld, .v_dim = %lld,\n"
        "    .q_bs = %s, .q_hs = %s, .q_rs = %s, .k_bs = %s, .k_hs = %s, .k_rs = %s,\n"
        "    .v_bs = %s, .v_hs = %s, .v_rs = %s, .y_bs = %s, .y_hs = %s, .y_rs = %s, .scale = %s,\n"
        "    .m_bs = %s, .m_hs = %s, .m_rs = %s, .m_cs = %s, .mask_bool = %d, .causal = %d, .empty_rows_zero = 2,\n"
        "    .kv_group = %lld, .softcap = %s, .causal_lag = %s, .m_cols = %s, .window = %d, .win_left = %s, .win_right = %s }",
        cg_dim_c(cg, a.batch), (long long)a.q_heads, cg_dim_c(cg, a.q_len), cg_dim_c(cg, a.kv_len), (long long)a.dim,
        (long long)a.v_dim, qs[0], qs[1], qs[2], kv_s[0][0], kv_s[0][1], kv_s[0][2], kv_s[1][0], kv_s[1][1], kv_s[1][2],
        ys[0], ys[1], ys[2], cg_float(scale, f1), ms[0], ms[1], ms[2], ms[3], m && m->dtype == CIR_BOOL,
        cir_attr_int(n, "is_causal") != 0, (long long)(a.q_heads / a.kv_heads), cg_float(cir_attr_float(n, "softcap"), f2),
        cg_dim_c(cg, cir_dim_sub(&g->dt, a.s_len, a.q_len)), m_cols, lw >= 0 || rw >= 0, cg_i64(lw, l1), cg_i64(rw, l2));
    /* the scratch for the dims' upper bounds */
    cuvil_attention_params hi = {.batch = a.batch->hi, .heads = a.q_heads, .q_len = a.q_len->hi, .kv_len = a.kv_len->hi,
                                 .dim = a.dim, .v_dim = a.v_dim};
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    const char *S = cg_scratch(cg, cuvil_f32_attention_scratch_size_ex(&hi, &blk), "cuvil_f32_attention_scratch_size(&%s)", ps);
    cg_printf(cg, "    cuvil_f32_attention_qk(&%s, %s, %s, %s, %s, %s, %s, %s, %d, %s);\n", ps, cg_in(cg, n->in[0]), kv_ptr[0],
              kv_ptr[1], m ? cg_in(cg, n->in[3]) : "NULL", cir_in(g, n, 6) ? cg_in(cg, n->in[6]) : "NULL",
              cg_out(cg, n->out[0]), qk ? cg_out(cg, n->out[3]) : "NULL",
              (int)cir_attr_int(n, "qk_matmul_output_mode"), S);
    (void)b;
    return CUVIL_OK;
}

cuvil_status cg_emit_mask_index(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *m = cir_in(g, n, 0);
    char f[32];
    cg_printf(cg, "    cuvil_mask_index(%s, %d, %s, %s, %s, %s, %s, %s);\n", cg_rt_type(m->dtype), m->ndim,
              cg_dimprod(cg, n->out[0], 0, 1, 1), cg_dimprod(cg, n->out[0], 2, 3, 1), cg_dimprod(cg, n->out[0], 3, 4, 1),
              cg_in(cg, n->in[0]), cg_float(cir_attr_float(n, "filter"), f), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_gqa_check(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *k = cir_in(g, n, 2), *pk = cir_in(g, n, 3);
    cg_printf(cg, "    if (cuvil_gqa_check(%s, %s, %s, (const int32_t *)%s, (const int32_t *)%s, %s, %s, (size_t)(%s) * %zu)) "
              "return 1;\n", cg_dimprod(cg, n->in[2], 0, 1, 1), cg_dimprod(cg, n->in[2], 1, 2, 1),
              pk ? cg_dimprod(cg, n->in[3], 2, 3, 1) : "0", cg_in(cg, n->in[0]), cg_in(cg, n->in[1]), cg_in(cg, n->in[2]),
              cg_out(cg, n->out[0]), cg_dimprod(cg, n->in[2], 0, 3, 1), cir_dtype_size(k->dtype));
    cg_fallible(cg, "its total_sequence_length is not the past's length plus the new tokens', or a seqlens_k is not "
                "total - 1 (padded rows or a shared cache buffer, which Cuvil does not take)");
    return CUVIL_OK;
}
