/* emit_reduce.c -- the reductions (op_reduce.c): float32 on cuvil_f32_reduce, other types on cuvil_reduce_t. */
#include "codegen/emit/emit_int.h"

static const char *const names[] = {"CUVIL_REDUCE_SUM", "CUVIL_REDUCE_MEAN", "CUVIL_REDUCE_MAX", "CUVIL_REDUCE_MIN",
                                    "CUVIL_REDUCE_PROD", "CUVIL_REDUCE_SUM_SQUARE", "CUVIL_REDUCE_L1", "CUVIL_REDUCE_L2",
                                    "CUVIL_REDUCE_LOG_SUM_EXP"};   /* ORDER: CUVIL_REDUCE_* */

/* The kernel's call on parameters ps (a pointer), indented by pad. */
static void kernel_call(cg_ctx *cg, cir_graph *g, cir_node *n, const char *pad, const char *ps) {
    const cir_value *x = cir_in(g, n, 0);
    if (x->dtype == CIR_F32)
        cg_printf(cg, "%scuvil_f32_reduce(%s, %s, %s);\n", pad, ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "%scuvil_reduce_t(%s, %s, %s, %s);\n", pad, ps, cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]));
}

cuvil_status cg_emit_reduce(cg_ctx *cg, cir_graph *g, cir_node *n) {
    if (op_reduce_rt_axes(g, n)) {   /* axes read when the model runs (op_reduce.c): the mask and the dims it finds */
        cir_value *x = cir_in(g, n, 0), *a = cir_in(g, n, 1), *y = cir_out(g, n, 0);
        int slots[CIR_MAX_DIMS];
        const char *hi = cg_found_his(cg, g, n, y->ndim, slots);
        cg_printf(cg, "    {\n        static const int64_t hi[] = %s;\n        int64_t od[CUVIL_RT_MAX_DIMS + 1];\n"
                      "        cuvil_reduce_params p = { .op = %s, .ndim = %d, .dims = %s };\n"
                      "        if (cuvil_reduce_axes_rt(&p, %lld, %s, %s, %d, hi, od)) return 1;\n",
                  y->ndim ? hi : "{ 0 }", names[op_reduce_kind(n)], x->ndim, cg_dims_init(cg, x->id, x->ndim), (long long)cir_numel(a),
                  a->dtype == CIR_I32 ? "CUVIL_T_I32" : "CUVIL_T_I64", cg_in(cg, n->in[1]),
                  cir_attr_int(n, "keepdims") != 0);
        for (int d = 0; d < y->ndim; d++) cg_printf(cg, "        D[%d] = od[%d];\n", slots[d], d);
        kernel_call(cg, g, n, "        ", "&p");
        cg_printf(cg, "    }\n");
        cg_fallible(cg, "its axes are not valid for its input (out of range or repeated)");
        return CUVIL_OK;
    }
    cuvil_reduce_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_reduce_params(g, n, &p, &ndim, dims);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_reduce_params", "{ .op = %s, .ndim = %d, .dims = %s, .mask = %uu }", names[p.op], p.ndim,
                              cg_node_symbolic(g, n) ? cg_dims_init(cg, n->in[0], p.ndim) : cg_i64s(cg, p.dims, p.ndim),
                              (unsigned)p.mask);
    char pp[128];
    snprintf(pp, sizeof pp, "&%s", ps);
    kernel_call(cg, g, n, "    ", pp);
    return CUVIL_OK;
}
