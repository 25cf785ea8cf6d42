/* emit_index.c -- gather_elements, scatter_elements, gather_nd and scatter_nd (op_index.c):
 * the kernels check every index first, and one out of range is an error from run. */
#include "codegen/emit/emit_int.h"

static const char *const reduction_syms[] = {"CUVIL_SCATTER_NONE", "CUVIL_SCATTER_ADD", "CUVIL_SCATTER_MUL",
                                             "CUVIL_SCATTER_MAX", "CUVIL_SCATTER_MIN"};   /* ORDER: CUVIL_SCATTER_* */

/* ===== gather_elements, scatter_elements ==================================================== */
/* p's fields, with the indices' and the data's dims given as C initialisers. */
static const char *elements_param(cg_ctx *cg, const cuvil_elements_params *p, const char *dims, const char *data_dims) {
    return cg_param(cg, "cuvil_elements_params", "{ .ndim = %d, .axis = %d, .reduction = %s, .elem_size = %lld, .dims = %s, "
                    ".data_dims = %s }", p->ndim, p->axis, reduction_syms[p->reduction], (long long)p->elem_size, dims,
                    data_dims);
}

cuvil_status cg_emit_elements(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_elements_params p;
    bool sym = cg_node_symbolic(g, n);
    cuvil_status s = sym ? op_elements_x(g, n, &p) : op_elements_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    /* a symbolic node's dims: the run's, as expressions of D[] */
    const char *ps = sym ? elements_param(cg, &p, cg_dims_init(cg, n->in[1], p.ndim), cg_dims_init(cg, n->in[0], p.ndim))
                         : elements_param(cg, &p, cg_i64s(cg, p.dims, p.ndim), cg_i64s(cg, p.data_dims, p.ndim));
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
static void nd_call(cg_ctx *cg, cir_graph *g, cir_node *n, const char *ps) {
    if (n->kind == CIR_OP_SCATTER_ND)
        cg_printf(cg, "    if (cuvil_scatter_nd(&%s, %s, %s, %s, %s, %s)) return 1;\n", ps, cg_rt_type(cir_in(g, n, 0)->dtype),
                  cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "    if (cuvil_gather_nd(&%s, %s, %s, %s)) return 1;\n", ps, cg_in(cg, n->in[1]), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]));
    cg_fallible(cg, "an index is out of range for its dim");
}

cuvil_status cg_emit_nd(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int nd;
    cuvil_status s;
    int reduction = n->kind == CIR_OP_SCATTER_ND ? (int)cir_attr_int(n, "reduction") : 0;
    int64_t es = (int64_t)cir_dtype_size(cir_in(g, n, 0)->dtype);
    if (cg_node_symbolic(g, n)) {   /* the counts of this run */
        op_nd_xparams px;
        int64_t k;
        const cir_dim *dx[CIR_MAX_DIMS];
        if ((s = op_nd_x(g, n, &px, &k, &nd, dx))) return s;
        cuvil_sb dd = {0};
        cuvil_sb_puts(&dd, "{ ");
        for (int d = 0; d < (int)k; d++) cuvil_sb_printf(&dd, "%s%s", d ? ", " : "", cg_dim_c(cg, px.data_dims[d]));
        cuvil_sb_puts(&dd, " }");
        const char *ps = cg_param(cg, "cuvil_nd_params", "{ .n_batch = %s, .n_idx = %s, .k = %lld, .slice_elems = %s, "
                                  ".elem_size = %lld, .reduction = %s, .data_dims = %s }", cg_dim_c(cg, px.n_batch),
                                  cg_dim_c(cg, px.n_idx), (long long)k, cg_dim_c(cg, px.slice_elems), (long long)es,
                                  reduction_syms[reduction], dd.s ? dd.s : "{ 0 }");
        cuvil_sb_free(&dd);
        nd_call(cg, g, n, ps);
        return CUVIL_OK;
    }
    cuvil_nd_params p;
    int64_t dims[CIR_MAX_DIMS];
    if ((s = op_nd_params(g, n, &p, &nd, dims))) return s;
    const char *ps = cg_param(cg, "cuvil_nd_params", "{ .n_batch = %lld, .n_idx = %lld, .k = %lld, .slice_elems = %lld, "
                              ".elem_size = %lld, .reduction = %s, .data_dims = %s }", (long long)p.n_batch,
                              (long long)p.n_idx, (long long)p.k, (long long)p.slice_elems, (long long)p.elem_size,
                              reduction_syms[p.reduction], cg_i64s(cg, p.data_dims, (int)p.k));
    nd_call(cg, g, n, ps);
    return CUVIL_OK;
}

/* ===== nonzero, compress (op_nonzero.c) ==================================================== */
/* The kernel call `call`, whose result is node n's count: into D[] when the run finds it. */
static void count_call(cg_ctx *cg, const cir_graph *g, const cir_node *n, cuvil_sb *call) {
    if (n->n_rt)
        cg_printf(cg, "    D[%d] = %s;   /* the count: a size the run finds */\n", cg_rt_slot(cg, g->rt_syms[n->rt_first]),
                  call->s ? call->s : "0");
    else cg_printf(cg, "    (void)%s;\n", call->s ? call->s : "0");
    cuvil_sb_free(call);
}

cuvil_status cg_emit_nonzero(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    cuvil_sb c = {0};
    cuvil_sb_printf(&c, "cuvil_nonzero(%s, %s, %d, %s, %s)", cg_rt_type(x->dtype), cg_in(cg, n->in[0]), x->ndim,
                    cg_dims(cg, n->in[0]), cg_out(cg, n->out[0]));
    count_call(cg, g, n, &c);
    return CUVIL_OK;
}

cuvil_status cg_emit_compress(cg_ctx *cg, cir_graph *g, cir_node *n) {
    const cir_dim *outer, *axis_len, *inner;
    cuvil_status s = op_compress_layout(g, n, &outer, &axis_len, &inner);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *c = cir_in(g, n, 1);
    cuvil_sb call = {0};
    cuvil_sb_printf(&call, "cuvil_compress(%s, (const uint8_t *)%s, %s, %s, %s, %s * %zu, %s)", cg_in(cg, n->in[0]),
                    cg_in(cg, n->in[1]), cg_dim_c(cg, outer), cg_dim_c(cg, axis_len), cg_dim_c(cg, cir_dimx(g, c, 0)),
                    cg_dim_c(cg, inner), cir_dtype_size(x->dtype), cg_out(cg, n->out[0]));
    count_call(cg, g, n, &call);
    return CUVIL_OK;
}

/* ===== non_max_suppression (op_nms.c) ======================================================= */
cuvil_status cg_emit_nms(cg_ctx *cg, cir_graph *g, cir_node *n) {
    const cir_dim *b, *c, *k;
    cuvil_status s = op_nms_layout(g, n, &b, &c, &k);
    if (s) return s;
    char cap[32];
    int slot = cg_found_slot(cg, g, n, 0, cap);
    const char *S = cg_scratch(cg, cuvil_nms_scratch_size(k->hi), "cuvil_nms_scratch_size(%s)", cg_dim_c(cg, k));
    cg_found_call(cg, slot, "its iou_threshold is outside [0, 1], or it keeps more boxes than the output's declared or --dim size",
                  "cuvil_nms(%s, %s, %s, %s, %s, %s, %s, %s, %d, %s, %s, %s)", cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
                  cg_dim_c(cg, b), cg_dim_c(cg, c), cg_dim_c(cg, k), cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL",
                  cir_in(g, n, 3) ? cg_in(cg, n->in[3]) : "NULL", cir_in(g, n, 4) ? cg_in(cg, n->in[4]) : "NULL",
                  (int)cir_attr_int(n, "center_point_box"), cg_out(cg, n->out[0]), cap, S);
    return CUVIL_OK;
}

/* ===== onehot (op_onehot.c) ================================================================= */
cuvil_status cg_emit_onehot(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int axis;
    const cir_dim *outer, *inner;
    cuvil_status s = op_onehot_layout(g, n, &axis, &outer, &inner);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    char cap[32];
    int slot = cg_found_slot(cg, g, n, 0, cap);
    if (slot >= 0)   /* the depth, read when the model runs */
        cg_found_call(cg, slot, "its depth is under 1, or over the output's declared or --dim size",
                      "cuvil_onehot_depth_t(%s, %s, %s)", cg_rt_type(cir_in(g, n, 1)->dtype), cg_in(cg, n->in[1]), cap);
    cg_printf(cg, "    cuvil_onehot_t(%s, %s, %s, %s, %s, %s, %zu, %s);\n", cg_rt_type(x->dtype), cg_in(cg, n->in[0]),
              cg_dim_c(cg, outer), cg_dim_c(cg, cir_dimx(g, y, axis)), cg_dim_c(cg, inner), cg_in(cg, n->in[2]),
              cir_dtype_size(y->dtype), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* ===== unique (op_unique.c) ================================================================= */
cuvil_status cg_emit_unique(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int axis;
    const cir_dim *outer, *len, *inner;
    cuvil_status s = op_unique_layout(g, n, &axis, &outer, &len, &inner);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    const char *out[4];
    for (int i = 0; i < 4; i++) out[i] = i < n->n_out && n->out[i] >= 0 ? cg_out(cg, n->out[i]) : "NULL";
    const char *S = cg_scratch(cg, cuvil_unique_scratch_size(len->hi), "cuvil_unique_scratch_size(%s)", cg_dim_c(cg, len));
    char cap[32];
    int slot = cg_found_slot(cg, g, n, 0, cap);
    cg_found_call(cg, slot, "it finds more distinct values than the output's declared or --dim size",
                  "cuvil_unique_t(%s, %zu, %s, %s, %s, %s, %d, %s, %s, %s, %s, %s, %s)", cg_rt_type(x->dtype),
                  cir_dtype_size(x->dtype), cg_in(cg, n->in[0]), cg_dim_c(cg, outer), cg_dim_c(cg, len), cg_dim_c(cg, inner),
                  cir_attr_int(n, "sorted") != 0, out[0], out[1], out[2], out[3], cap, S);
    return CUVIL_OK;
}
