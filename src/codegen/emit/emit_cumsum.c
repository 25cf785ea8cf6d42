/* emit_cumsum.c -- cumsum (op_cumsum.c): one call of cuvil_cumsum_t, or of cuvil_cumsum_rt when the
 * axis is computed at run time (checked there). */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_cumsum(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_cumsum_params p;
    cuvil_status s = op_cumsum_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *axis = cir_in(g, n, 1);
    const char *ps;
    if (cir_is_const(axis) && cg_node_symbolic(g, n)) {   /* the layout of this run */
        int64_t a;
        int cnt, ax;
        if ((s = op_const_ints(g, n, 1, "axis", &a, 1, &cnt)) || (s = op_axis(g, n, a, x->ndim, "axis", &ax))) return s;
        ps = cg_param(cg, "cuvil_cumsum_params", "{ .outer = %s, .len = %s, .inner = %s, .exclusive = %d, .reverse = %d, "
                      ".prod = %d }",
                      cg_dimprod(cg, x->id, 0, ax, 1), cg_dimprod(cg, x->id, ax, ax + 1, 1),
                      cg_dimprod(cg, x->id, ax + 1, x->ndim, 1), p.exclusive, p.reverse, p.prod);
    } else {
        ps = cg_param(cg, "cuvil_cumsum_params", "{ .outer = %lld, .len = %lld, .inner = %lld, .exclusive = %d, "
                      ".reverse = %d, .prod = %d }", (long long)p.outer, (long long)p.len, (long long)p.inner, p.exclusive, p.reverse, p.prod);
    }
    if (cir_is_const(axis)) {
        cg_printf(cg, "    cuvil_cumsum_t(&%s, %s, %s, %s);\n", ps, cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]));
        return CUVIL_OK;
    }
    const char *dims = cg_param(cg, "int64_t[]", "%s", cg_node_symbolic(g, n) ? cg_dims_init(cg, x->id, x->ndim)
                                                                            : cg_i64s(cg, x->dims, x->ndim));
    cg_printf(cg, "    if (cuvil_cumsum_rt(&%s, %d, %s, %s, %s, %s, %s, %s)) return 1;\n", ps, x->ndim, dims,
              cg_rt_type(axis->dtype), cg_in(cg, n->in[1]), cg_rt_type(x->dtype), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    cg_fallible(cg, "axis is out of range for the input's rank");
    return CUVIL_OK;
}
