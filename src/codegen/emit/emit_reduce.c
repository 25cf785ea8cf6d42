/* emit_reduce.c -- the reductions (op_reduce.c): float32 on cuvil_f32_reduce, other types on cuvil_reduce_t. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_reduce(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_reduce_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_reduce_params(g, n, &p, &ndim, dims);
    if (s) return s;
    static const char *const names[] = {"CUVIL_REDUCE_SUM", "CUVIL_REDUCE_MEAN", "CUVIL_REDUCE_MAX", "CUVIL_REDUCE_MIN",
                                        "CUVIL_REDUCE_PROD", "CUVIL_REDUCE_SUM_SQUARE", "CUVIL_REDUCE_L1", "CUVIL_REDUCE_L2",
                                        "CUVIL_REDUCE_LOG_SUM_EXP"};   /* ORDER: CUVIL_REDUCE_* */
    const char *ps = cg_param(cg, "cuvil_reduce_params", "{ .op = %s, .ndim = %d, .dims = %s, .mask = %uu }", names[p.op], p.ndim,
                              cg_node_symbolic(g, n) ? cg_dims_init(cg, n->in[0], p.ndim) : cg_i64s(cg, p.dims, p.ndim),
                              (unsigned)p.mask);
    const cir_value *x = cir_in(g, n, 0);
    if (x->dtype == CIR_F32)
        cg_printf(cg, "    cuvil_f32_reduce(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "    cuvil_reduce_t(&%s, %s, %s, %s);\n", ps, cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
