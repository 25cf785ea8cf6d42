/* emit_quant.c -- the quantization ops (op_quant.c) on their kernels (typed.c). */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_quant(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_quant_params p;
    cuvil_status s = op_quant_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *sc = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    const char *ps = cg_param(cg, "cuvil_quant_params", "{ .outer = %lld, .len = %lld, .inner = %lld, .block = %lld, "
                              ".mode = %d, .saturate = %d }", (long long)p.outer, (long long)p.len, (long long)p.inner,
                              (long long)p.block, p.mode, p.saturate);
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

cuvil_status cg_emit_imatmul(cg_ctx *cg, cir_graph *g, cir_node *n) {
    bool q = n->kind == CIR_OP_QLINEAR_MATMUL;
    int ia = 0, ib = q ? 3 : 1, iaz = q ? 2 : 2, ibz = q ? 5 : 3;
    op_imatmul m;
    cuvil_status s = op_imatmul_sizes(g, n, ia, ib, &m);
    if (s) return s;
    cir_value *a = cir_in(g, n, ia), *b = cir_in(g, n, ib), *az = cir_in(g, n, iaz), *bz = cir_in(g, n, ibz);
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
