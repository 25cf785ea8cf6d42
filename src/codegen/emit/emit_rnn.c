/* emit_rnn.c -- rnn (op_rnn.c) on cuvil_f32_rnn; quant 1 on cuvil_rnn_q8, its 8-bit weights
 * packed here. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_rnn(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_rnn a;
    cuvil_status s = op_rnn_sizes(g, n, &a);
    if (s) return s;
    cuvil_sb acts = {0};
    cuvil_sb_puts(&acts, "{ ");
    for (int d = 0; d < 2; d++) {
        cuvil_sb_puts(&acts, d ? ", { " : "{ ");
        for (int k = 0; k < 3; k++) {
            cuvil_rnn_act z = {0, 0, 0}, *v = d < a.dirs ? &a.act[d][k] : &z;
            char f1[32], f2[32];
            cuvil_sb_printf(&acts, "%s{ %d, %s, %s }", k ? ", " : "", v->fn, cg_float(v->alpha, f1), cg_float(v->beta, f2));
        }
        cuvil_sb_puts(&acts, " }");
    }
    cuvil_sb_puts(&acts, " }");
    char clip[32];
    int dir = (int)cir_attr_int(n, "direction");
    const char *ps = cg_param(cg, "cuvil_rnn_params",
                              "{ .cell = %d, .dirs = %d, .reverse = %d, .layout = %d, .seq = %s, .batch = %s, .input = %lld, "
                              ".hidden = %lld, .clip = %s, .linear_before_reset = %d, .input_forget = %d, .act = %s }",
                              (int)cir_attr_int(n, "cell"), a.dirs, dir == 1, a.layout, cg_dim_c(cg, a.seq),
                              cg_dim_c(cg, a.batch), (long long)a.input, (long long)a.hidden,
                              cg_float(cir_attr_float(n, "clip"), clip), cir_attr_int(n, "linear_before_reset") != 0,
                              cir_attr_int(n, "input_forget") != 0, acts.s ? acts.s : "{ 0 }");
    cuvil_sb_free(&acts);
    cuvil_rnn_params hi = {.cell = (int)cir_attr_int(n, "cell"), .dirs = a.dirs, .seq = a.seq->hi, .batch = a.batch->hi,
                           .input = a.input, .hidden = a.hidden};
    if (a.q8) {   /* (W and R are not referenced: only their packed copy is in the library) */
        cir_value *w = cir_in(g, n, 1), *r = cir_in(g, n, 2), *ws = cir_in(g, n, 8), *rs = cir_in(g, n, 10);
        const size_t nb = cuvil_rnn_q8_packed_bytes(&hi);
        void *buf = cuvil_malloc(nb ? nb : 1);
        if (!buf) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        const int wt = w->dtype == CIR_I8 ? CUVIL_T_I8 : CUVIL_T_U8;
        cuvil_rnn_q8_pack(&hi, cg_target_pair_split(g), wt, w->data, r->data, buf);
        const char *wp = cg_data(cg, buf, nb, CIR_U8);
        cuvil_free(buf);
        const char *S = cg_scratch(cg, cuvil_rnn_q8_scratch_size(&hi), "cuvil_rnn_q8_scratch_size(&%s)", ps);
        const char *in[12], *out[3];
        for (int i = 0; i < 12; i++) in[i] = i != 1 && i != 2 && cir_in(g, n, i) ? cg_in(cg, n->in[i]) : "NULL";
        for (int i = 0; i < 3; i++) out[i] = cir_out_opt(g, n, i) ? cg_out(cg, n->out[i]) : "NULL";
        cg_printf(cg, "    {\n        const cuvil_rnn_q8_weights Q = { %s, %s, %s, %s, %lld, %lld, %s, %s };\n", cg_rt_type(w->dtype), wp, in[8],
                  in[10], (long long)cir_numel(ws), (long long)cir_numel(rs), in[9], in[11]);
        cg_printf(cg, "        if (cuvil_rnn_q8(&%s, &Q, %s, %s, (const int32_t *)%s, %s, %s, %s, %s, %s, %s, %s)) return 1;\n    }\n", ps,
                  in[0], in[3], in[4], in[5], in[6], in[7], out[0], out[1], out[2], S);
        cg_fallible(cg, "a sequence length is outside 0..the sequence's length");
        return CUVIL_OK;
    }
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    const bool packed = n->low.packed >= 0;   /* (the lowering packed w and r: neither is read, nor packed here) */
    const char *S = packed ? cg_scratch(cg, cuvil_f32_rnn_packed_scratch_size_ex(&hi, &blk), "cuvil_f32_rnn_packed_scratch_size(&%s)", ps)
                           : cg_scratch(cg, cuvil_f32_rnn_scratch_size_ex(&hi, &blk), "cuvil_f32_rnn_scratch_size(&%s)", ps);
    const char *in[8], *out[3];
    for (int i = 0; i < 8; i++) in[i] = cir_in(g, n, i) && !(packed && (i == 1 || i == 2)) ? cg_in(cg, n->in[i]) : "NULL";
    for (int i = 0; i < 3; i++) out[i] = cir_out_opt(g, n, i) ? cg_out(cg, n->out[i]) : "NULL";
    if (packed) {
        const cuvil_target_info *t = cuvil_target_find(g->target);
        CUVIL_ASSERT(t);
        cg_printf(cg, "    if (cuvil_f32_rnn_packed(&%s, %s, NULL, NULL, %s, %d, %lld, %s, (const int32_t *)%s, %s, %s, %s, %s, %s, "
                  "%s, %s)) return 1;\n", ps, in[0], cg_in(cg, n->low.packed), t->nr, (long long)t->kc, in[3], in[4], in[5],
                  in[6], in[7], out[0], out[1], out[2], S);
    } else {
        cg_printf(cg, "    if (cuvil_f32_rnn(&%s, %s, %s, %s, %s, (const int32_t *)%s, %s, %s, %s, %s, %s, %s, %s)) return 1;\n", ps,
                  in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], out[0], out[1], out[2], S);
    }
    cg_fallible(cg, "a sequence length is outside 0..the sequence's length");
    return CUVIL_OK;
}
