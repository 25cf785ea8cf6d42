/* emit_index.c -- gather_elements, scatter_elements, gather_nd and scatter_nd (op_index.c):
 * the kernels check every index first, and one out of range is an error from run. */
#include "codegen/emit/emit_int.h"

static const char *const reduction_syms[] = {"CUVIL_SCATTER_NONE", "CUVIL_SCATTER_ADD", "CUVIL_SCATTER_MUL",
                                             "CUVIL_SCATTER_MAX", "CUVIL_SCATTER_MIN"};   /* ORDER: CUVIL_SCATTER_* */

/* ===== gather_elements, scatter_elements ==================================================== */
static const char *elements_param(cg_ctx *cg, const cuvil_elements_params *p) {
    return cg_param(cg, "cuvil_elements_params", "{ .ndim = %d, .axis = %d, .reduction = %s, .elem_size = %lld, .dims = %s, "
                    ".data_dims = %s }", p->ndim, p->axis, reduction_syms[p->reduction], (long long)p->elem_size, cg_i64s(cg, p->dims, p->ndim),
                    cg_i64s(cg, p->data_dims, p->ndim));
}

cuvil_status cg_emit_elements(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_elements_params p;
    cuvil_status s = op_elements_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    const char *ps = elements_param(cg, &p);
    if (n->kind == CIR_OP_SCATTER_ELEMENTS)
        cg_printf(cg, "    if (cuvil_scatter_elements(&%s, %s, %s, %s, %s, %s, %s)) return 1;\n", ps, cg_rt_type(x->dtype),
                  cg_rt_type(idx->dtype), cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "    if (cuvil_gather_elements(&%s, %s, %s, %s, %s)) return 1;\n", ps, cg_rt_type(idx->dtype),
                  cg_in(cg, n->in[1]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    cg_fallible(cg, "an index is out of range for its axis");
    return CUVIL_OK;
}

/* ===== gather_nd, scatter_nd ================================================================= */
cuvil_status cg_emit_nd(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_nd_params p;
    int nd;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_nd_params(g, n, &p, &nd, dims);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (n->kind == CIR_OP_GATHER_ND && cg_node_symbolic(g, n)) {   /* the counts of this run */
        op_nd_xparams px;
        const cir_dim *dx[CIR_MAX_DIMS];
        if ((s = op_gather_nd_x(g, n, &px, &nd, dx))) return s;
        cuvil_sb dd = {0};
        cuvil_sb_puts(&dd, "{ ");
        for (int d = 0; d < (int)p.k; d++) cuvil_sb_printf(&dd, "%s%s", d ? ", " : "", cg_dim_c(cg, px.data_dims[d]));
        cuvil_sb_puts(&dd, " }");
        const char *ps = cg_param(cg, "cuvil_nd_params", "{ .n_batch = %s, .n_idx = %s, .k = %lld, .slice_elems = %s, "
                                  ".elem_size = %lld, .reduction = %s, .data_dims = %s }", cg_dim_c(cg, px.n_batch),
                                  cg_dim_c(cg, px.n_idx), (long long)p.k, cg_dim_c(cg, px.slice_elems), (long long)p.elem_size,
                                  reduction_syms[p.reduction], dd.s ? dd.s : "{ 0 }");
        cuvil_sb_free(&dd);
        cg_printf(cg, "    if (cuvil_gather_nd(&%s, %s, %s, %s)) return 1;\n", ps, cg_in(cg, n->in[1]), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]));
        cg_fallible(cg, "an index is out of range for its dim");
        return CUVIL_OK;
    }
    const char *ps = cg_param(cg, "cuvil_nd_params", "{ .n_batch = %lld, .n_idx = %lld, .k = %lld, .slice_elems = %lld, "
                              ".elem_size = %lld, .reduction = %s, .data_dims = %s }", (long long)p.n_batch,
                              (long long)p.n_idx, (long long)p.k, (long long)p.slice_elems, (long long)p.elem_size,
                              reduction_syms[p.reduction], cg_i64s(cg, p.data_dims, (int)p.k));
    if (n->kind == CIR_OP_SCATTER_ND)
        cg_printf(cg, "    if (cuvil_scatter_nd(&%s, %s, %s, %s, %s, %s)) return 1;\n", ps, cg_rt_type(x->dtype),
                  cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "    if (cuvil_gather_nd(&%s, %s, %s, %s)) return 1;\n", ps, cg_in(cg, n->in[1]), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]));
    cg_fallible(cg, "an index is out of range for its dim");
    return CUVIL_OK;
}
