/* emit_pool.c -- max_pool, avg_pool, global_avg_pool, global_max_pool (op_pool.c) on
 * cuvil_f32_pool2d. */
#include "codegen/emit/emit_int.h"

/* A global pool's input layout as the runtime's name. */
static const char *layout(const cir_node *n) { return n->low.layout & CUVIL_POOL_X_NHWC ? "CUVIL_POOL_X_NHWC" : "0"; }

cuvil_status cg_emit_pool(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_pool2d_params p;
    cuvil_status s = op_pool_params(g, n, &p);
    if (s) return s;
    if (cg_node_symbolic(g, n)) {   /* the sizes and padding of this run */
        op_geo_x x;
        if ((s = op_pool_x(g, n, &x))) return s;
        const char *ps = cg_param(cg, "cuvil_pool2d_params",
                                  "{ .kind = %s, .N = %s, .C = %lld, .H = %s, .W = %s, .OH = %s, .OW = %s, .KH = %s, "
                                  ".KW = %s, .stride_h = %lld, .stride_w = %lld, .pad_t = %s, .pad_l = %s, .pad_b = %s, "
                                  ".pad_r = %s, .dil_h = %lld, .dil_w = %lld, .count_include_pad = %d, .layout = %s }",
                                  p.kind == CUVIL_POOL_MAX ? "CUVIL_POOL_MAX" : "CUVIL_POOL_AVG", cg_dim_c(cg, x.N),
                                  (long long)p.C, cg_dim_c(cg, x.H), cg_dim_c(cg, x.W), cg_dim_c(cg, x.OH), cg_dim_c(cg, x.OW),
                                  cg_dim_c(cg, x.KH), cg_dim_c(cg, x.KW), (long long)p.stride_h, (long long)p.stride_w,
                                  cg_dim_c(cg, x.pad_t), cg_dim_c(cg, x.pad_l), cg_dim_c(cg, x.pad_b), cg_dim_c(cg, x.pad_r),
                                  (long long)p.dil_h, (long long)p.dil_w, p.count_include_pad, layout(n));
        cg_printf(cg, "    cuvil_f32_pool2d(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        return CUVIL_OK;
    }
    const char *ps = cg_param(cg, "cuvil_pool2d_params",
                              "{ .kind = %s, .N = %lld, .C = %lld, .H = %lld, .W = %lld, .OH = %lld, .OW = %lld, .KH = %lld, "
                              ".KW = %lld, .stride_h = %lld, .stride_w = %lld, .pad_t = %lld, .pad_l = %lld, .pad_b = %lld, "
                              ".pad_r = %lld, .dil_h = %lld, .dil_w = %lld, .count_include_pad = %d, .layout = %s }",
                              p.kind == CUVIL_POOL_MAX ? "CUVIL_POOL_MAX" : "CUVIL_POOL_AVG", (long long)p.N, (long long)p.C, (long long)p.H, (long long)p.W, (long long)p.OH,
                              (long long)p.OW, (long long)p.KH, (long long)p.KW, (long long)p.stride_h,
                              (long long)p.stride_w, (long long)p.pad_t, (long long)p.pad_l, (long long)p.pad_b,
                              (long long)p.pad_r, (long long)p.dil_h, (long long)p.dil_w, p.count_include_pad,
                              layout(n));
    cg_printf(cg, "    cuvil_f32_pool2d(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

cuvil_status cg_emit_pool_nd(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_pool_nd_params p;
    cuvil_status s = op_pool_nd_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_pool_nd_params",
                              "{ .nsp = %d, .kind = %d, .dtype = %d, .count_include_pad = %d, .storage_order = %d, .N = %lld, "
                              ".C = %lld, .p = %lld, .in = %s, .out = %s, .k = %s, .s = %s, .d = %s, .pb = %s, .pe = %s }",
                              p.nsp, p.kind, p.dtype, p.count_include_pad, p.storage_order, (long long)p.N, (long long)p.C,
                              (long long)p.p, cg_i64s(cg, p.in, CUVIL_ND_MAX), cg_i64s(cg, p.out, CUVIL_ND_MAX),
                              cg_i64s(cg, p.k, CUVIL_ND_MAX), cg_i64s(cg, p.s, CUVIL_ND_MAX), cg_i64s(cg, p.d, CUVIL_ND_MAX),
                              cg_i64s(cg, p.pb, CUVIL_ND_MAX), cg_i64s(cg, p.pe, CUVIL_ND_MAX));
    cg_printf(cg, "    cuvil_pool_nd(&%s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]),
              cir_out_opt(g, n, 1) ? cg_out(cg, n->out[1]) : "NULL");
    return CUVIL_OK;
}
