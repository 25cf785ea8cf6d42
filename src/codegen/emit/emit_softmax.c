/* emit_softmax.c -- softmax and log_softmax (op_softmax.c) on cuvil_f32_softmax, hardmax on
 * cuvil_f32_hardmax. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_softmax(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_softmax_params p;
    cuvil_status s = op_softmax_params(g, n, &p);
    if (s) return s;
    /* the sizes as op_softmax_params computes them, from the dims of this run */
    cir_value *x = cir_in(g, n, 0);
    int ax;
    op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &ax);
    bool coerce = cir_attr_int(n, "coerce_2d") != 0;
    const char *ps = cg_param(cg, "cuvil_softmax_params",
                              "{ .outer = %s, .axis_len = %s, .inner = %s, .log = %d, .nan_to_zero = %d }",
                              cg_dimprod(cg, x->id, 0, ax, 1), cg_dimprod(cg, x->id, ax, coerce ? x->ndim : ax + 1, 1),
                              cg_dimprod(cg, x->id, coerce ? x->ndim : ax + 1, x->ndim, 1), p.log, p.nan_to_zero);
    cg_printf(cg, "    cuvil_f32_%s(&%s, %s, %s);\n", n->kind == CIR_OP_HARDMAX ? "hardmax" : "softmax", ps, cg_in(cg, n->in[0]),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* The attention the fusion made (pass_fuse_attention.c): its parameters and the operands'
 * offsets are in n->low.params (expressions of the run's dims with symbolic dims); inputs q,
 * k, v and the mask if any. */
/* "(ptr + off)": an operand at an element offset. */
static const char *at_offset(cg_ctx *cg, const char *ptr, const char *off) {
    cuvil_sb t = {0};
    cuvil_sb_printf(&t, "(%s + %s)", ptr, off);
    const char *r = cg_str(cg, t.s && !t.oom ? t.s : "NULL");
    cuvil_sb_free(&t);
    return r;
}

cuvil_status cg_emit_attention(cg_ctx *cg, cir_graph *g, cir_node *n) {
    const cir_attention_kp *kp = (const cir_attention_kp *)n->low.params;
    CUVIL_ASSERT(kp && n->n_in >= 3 && n->n_in <= 6);
    const cuvil_attention_params *p = &kp->p;
    const int64_t st[16] = {p->q_bs, p->q_hs, p->q_rs, p->k_bs, p->k_hs, p->k_rs, p->v_bs, p->v_hs,
                            p->v_rs, p->y_bs, p->y_hs, p->y_rs, p->m_bs, p->m_hs, p->m_rs, p->m_cs};
    char s[16][32], f[32];
    for (int i = 0; i < 16; i++) cg_i64(st[i], s[i]);
    const char *ps;
    if (kp->xp) {   /* symbolic dims: the sizes, strides and offsets of this run */
        const char *x[CIR_ATT_X];
        for (int i = 0; i < CIR_ATT_X; i++) x[i] = cg_dim_c(cg, kp->xp[i]);
        ps = cg_param(cg, "cuvil_attention_params",
                      "{ .batch = %s, .heads = %s, .q_len = %s, .kv_len = %s, .dim = %s, .v_dim = %s,\n"
                      "    .q_bs = %s, .q_hs = %s, .q_rs = %s, .k_bs = %s, .k_hs = %s, .k_rs = %s,\n"
                      "    .v_bs = %s, .v_hs = %s, .v_rs = %s, .y_bs = %s, .y_hs = %s, .y_rs = %s, .scale = %s,\n"
                      "    .m_bs = %s, .m_hs = %s, .m_rs = %s, .m_cs = %s, .mask_bool = %d, .causal = %d, .empty_rows_zero = %d }",
                      x[CIR_ATT_BATCH], x[CIR_ATT_HEADS], x[CIR_ATT_Q_LEN], x[CIR_ATT_KV_LEN], x[CIR_ATT_DIM],
                      x[CIR_ATT_V_DIM], x[CIR_ATT_Q_BS], x[CIR_ATT_Q_HS], x[CIR_ATT_Q_RS], x[CIR_ATT_K_BS], x[CIR_ATT_K_HS],
                      x[CIR_ATT_K_RS], x[CIR_ATT_V_BS], x[CIR_ATT_V_HS], x[CIR_ATT_V_RS], x[CIR_ATT_Y_BS], x[CIR_ATT_Y_HS],
                      x[CIR_ATT_Y_RS], cg_float(p->scale, f), x[CIR_ATT_M_BS], x[CIR_ATT_M_HS], x[CIR_ATT_M_RS],
                      x[CIR_ATT_M_CS], p->mask_bool, p->causal, p->empty_rows_zero);
    } else {
    ps = cg_param(
        cg, "cuvil_attention_params",
        "{ .batch = %lld, .heads = %lld, .q_len = %lld, .kv_len = %lld, .dim = %lld, .v_dim = %lld,\n"
        "    .q_bs = %s, .q_hs = %s, .q_rs = %s, .k_bs = %s, .k_hs = %s, .k_rs = %s,\n"
        "    .v_bs = %s, .v_hs = %s, .v_rs = %s, .y_bs = %s, .y_hs = %s, .y_rs = %s, .scale = %s,\n"
        "    .m_bs = %s, .m_hs = %s, .m_rs = %s, .m_cs = %s, .mask_bool = %d, .causal = %d, .empty_rows_zero = %d }",
        (long long)p->batch, (long long)p->heads, (long long)p->q_len, (long long)p->kv_len, (long long)p->dim,
        (long long)p->v_dim, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],
        cg_float(p->scale, f), s[12], s[13], s[14], s[15], p->mask_bool, p->causal, p->empty_rows_zero);
    }
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    const char *S = cg_scratch(cg, cuvil_f32_attention_scratch_size_ex(p, &blk), "cuvil_f32_attention_scratch_size(&%s)", ps);
    const char *in[4];
    const int64_t off[4] = {kp->q_off, kp->k_off, kp->v_off, kp->m_off};
    static const int xo[4] = {CIR_ATT_Q_OFF, CIR_ATT_K_OFF, CIR_ATT_V_OFF, CIR_ATT_M_OFF};
    char b[32];
    for (int i = 0; i < 4; i++) {
        if (i == 3 && (n->n_in < 4 || n->in[3] < 0)) in[i] = "NULL";
        else if (kp->xp || off[i])
            in[i] = at_offset(cg, cg_in(cg, n->in[i]), kp->xp ? cg_dim_c(cg, kp->xp[xo[i]]) : cg_i64(off[i], b));
        else in[i] = cg_in(cg, n->in[i]);
    }
    const char *y = kp->xp || kp->y_off
                        ? at_offset(cg, cg_out(cg, n->out[0]), kp->xp ? cg_dim_c(cg, kp->xp[CIR_ATT_Y_OFF]) : cg_i64(kp->y_off, b))
                        : cg_out(cg, n->out[0]);
    if (n->n_in > 4) {   /* scalars folded from the model's constants, read as it runs */
        cg_printf(cg, "    cuvil_attention_params p = %s;\n    p.scale = p.scale", ps);
        for (int i = 4; i < n->n_in; i++) cg_printf(cg, " %c %s[0]", kp->scale_div[i - 4] ? '/' : '*', cg_in(cg, n->in[i]));
        cg_printf(cg, ";\n");
        ps = "p";
    }
    cg_printf(cg, "    cuvil_f32_attention(&%s, %s, %s, %s, %s, %s, %s);\n", ps, in[0], in[1], in[2], in[3], y, S);
    return CUVIL_OK;
}
