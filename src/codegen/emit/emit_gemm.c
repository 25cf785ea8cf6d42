/* emit_gemm.c -- gemm and matmul (op_gemm.c) on cuvil_f32_gemm: one (batched) call, with B as
 * the lowering pass prepacked it when it did, or a loop over a table of operand offsets for a
 * MatMul broadcast that is neither contiguous nor shared. */
#include "codegen/emit/emit_int.h"

/* B: the packed copy when there is one (a const uint16_t * when it stays in 16 bits), else the input. */
static const char *gemm_b(cg_ctx *cg, const cir_node *n) { return cg_in(cg, n->low.packed >= 0 ? n->low.packed : n->in[1]); }

cuvil_status cg_emit_gemm(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_gemm_params p;
    int64_t nirr, *offs;
    cuvil_status s = op_gemm_params(g, n, &p, &nirr, &offs);
    if (s) return s;
    char al[32], be[32], act[128], ex[128] = "";
    if (n->low.packed >= 0) {   /* B packed by the lowering pass for the target's tile */
        const cuvil_target_info *t = cuvil_target_find(g->target);
        CUVIL_ASSERT(t && !nirr);
        snprintf(ex, sizeof ex, ", .packed_nr = %d, .packed_kc = %lld", t->nr, (long long)t->kc);
    }
    const int w16 = cg_w16_resident(cg, n->low.packed, true);   /* B in 16 bits: cuvil_f32_gemm_w16 */
    const char *fn = w16 ? "cuvil_f32_gemm_w16" : "cuvil_f32_gemm";
    const char *kind = cg_w16_arg(w16);
    char bs[3][32];
    const int64_t bv[3] = {p.a_bstride, p.b_bstride, p.c_bstride};
    for (int i = 0; i < 3; i++) cg_i64(bv[i], bs[i]);
    if (cg_node_symbolic(g, n)) {   /* the sizes of this run */
        op_gemm_xparams x;
        int nd;
        const cir_dim *dx[CIR_MAX_DIMS];
        if ((s = op_gemm_x(g, n, &x, &nd, dx))) return s;
        if (nirr) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "an irregular batch broadcast with symbolic dims");
        const char *ps = cg_param(cg, "cuvil_gemm_params",
                                  "{ .M = %s, .N = %s, .K = %s, .lda = %s, .ldb = %s, .ldc = %s, .trans_a = %d, "
                                  ".trans_b = %d, .alpha = %s, .beta = %s, .bias_rs = %s, .bias_cs = %s, .batch = %s, "
                                  ".a_bstride = %s, .b_bstride = %s, .c_bstride = %s, .bias_bstride = 0, .act = %s%s }",
                                  cg_dim_c(cg, x.M), cg_dim_c(cg, x.N), cg_dim_c(cg, x.K), cg_dim_c(cg, x.lda),
                                  cg_dim_c(cg, x.ldb), cg_dim_c(cg, x.ldc), p.trans_a, p.trans_b, cg_float(p.alpha, al),
                                  cg_float(p.beta, be), cg_dim_c(cg, x.bias_rs), cg_dim_c(cg, x.bias_cs),
                                  cg_dim_c(cg, x.batch), cg_dim_c(cg, x.a_bstride), cg_dim_c(cg, x.b_bstride),
                                  cg_dim_c(cg, x.c_bstride), cg_act(&p.act, act), ex);
        cuvil_gemm_ukernel_desc uk;
        cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
        const char *S = cg_scratch(cg, cuvil_f32_gemm_scratch_size_ex(&p, &blk), "cuvil_f32_gemm_scratch_size(&%s)", ps);
        cir_value *c = cir_in(g, n, 2);
        cg_printf(cg, "    %s(&%s%s, %s, %s, %s, %s, %s);\n", fn, ps, kind, cg_in(cg, n->in[0]), gemm_b(cg, n),
                  c ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]), S);
        return CUVIL_OK;
    }
    const char *ps = cg_param(cg, "cuvil_gemm_params",
                              "{ .M = %lld, .N = %lld, .K = %lld, .lda = %lld, .ldb = %lld, .ldc = %lld, .trans_a = %d, "
                              ".trans_b = %d, .alpha = %s, .beta = %s, .bias_rs = %lld, .bias_cs = %lld, .batch = %lld, "
                              ".a_bstride = %s, .b_bstride = %s, .c_bstride = %s, .bias_bstride = 0, .act = %s%s }",
                              (long long)p.M, (long long)p.N, (long long)p.K, (long long)p.lda, (long long)p.ldb,
                              (long long)p.ldc, p.trans_a, p.trans_b, cg_float(p.alpha, al), cg_float(p.beta, be),
                              (long long)p.bias_rs, (long long)p.bias_cs, (long long)p.batch, bs[0], bs[1], bs[2],
                              cg_act(&p.act, act), ex);
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    const char *S = cg_scratch(cg, cuvil_f32_gemm_scratch_size_ex(&p, &blk), "cuvil_f32_gemm_scratch_size(&%s)", ps);
    cir_value *c = cir_in(g, n, 2);
    if (nirr) {
        const char *tab = cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, offs, (int)(2 * nirr)));
        cuvil_free(offs);
        cg_printf(cg, "    for (int64_t i = 0; i < %lld; i++)\n        cuvil_f32_gemm(&%s, %s + %s[2 * i], %s + %s[2 * i + 1], %s, "
                      "%s + i * %lld, %s);\n", (long long)nirr, ps, cg_in(cg, n->in[0]), tab, cg_in(cg, n->in[1]), tab,
                  c ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]), (long long)(p.M * p.N), S);
        return CUVIL_OK;
    }
    cg_printf(cg, "    %s(&%s%s, %s, %s, %s, %s, %s);\n", fn, ps, kind, cg_in(cg, n->in[0]), gemm_b(cg, n),
              c ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}
