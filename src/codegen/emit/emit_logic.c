/* emit_logic.c -- the ops of op_fold_only.c that also run at run time, on every element type:
 * the comparisons, not/and/or/xor and where (masks), expand and tile (broadcast copies), and sum
 * and mean (float32/64: a broadcast copy, then broadcasting adds), is_nan and is_inf. */
#include "codegen/emit/emit_int.h"

/* y = input 0 of n copied over y's shape (cuvil_bcast_copy: y[i] = x[i mod x_dims] per axis, x's
 * dims padded with leading 1s). */
/* "{ s0, s1, ... }": the element strides of operand vid in the output space of value out (0
 * along a dim where the operand has size 1: broadcast; a dim that follows the symbols and may
 * be 1 where the output's need not be: 0 when the run finds it 1), as C. */
static const char *strides_init(cg_ctx *cg, int vid, int out) {
    cir_graph *g = cg_graph(cg);
    const cir_value *v = cir_val(g, vid), *y = cir_val(g, out);
    const char *st[CIR_MAX_DIMS];
    const cir_dim *s = cir_dim_const(&g->dt, 1);
    for (int d = y->ndim - 1; d >= 0; d--) {
        int i = d - (y->ndim - v->ndim);
        bool bc = i < 0 || (!v->dx[i] && v->dims[i] == 1);
        const cir_dim *vd = i >= 0 ? cir_dimx(g, v, i) : NULL;
        if (!bc && v->dx[i] && vd->lo <= 1 && vd != cir_dimx(g, y, d)) {   /* (broadcast when the run says 1) */
            char buf[512];
            snprintf(buf, sizeof buf, "(%s == 1 ? 0 : %s)", cg_dim_c(cg, vd), cg_dim_c(cg, s));
            st[d] = cg_str(cg, buf);
        } else {
            st[d] = bc ? "0" : cg_dim_c(cg, s);
        }
        if (i >= 0) s = cir_dim_mul(&g->dt, s, cir_dimx(g, v, i));
    }
    cuvil_sb sb = {0};
    cuvil_sb_puts(&sb, "{ ");
    for (int d = 0; d < y->ndim; d++) cuvil_sb_printf(&sb, "%s%s", d ? ", " : "", st[d]);
    cuvil_sb_puts(&sb, y->ndim ? " }" : "0 }");
    const char *r = cg_str(cg, sb.s ? sb.s : "{ 0 }");
    cuvil_sb_free(&sb);
    return r;
}

static void bcast_copy_call(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int64_t xd[CIR_MAX_DIMS];
    for (int d = 0; d < y->ndim; d++) xd[d] = d < y->ndim - x->ndim ? 1 : x->dims[d - (y->ndim - x->ndim)];
    bool sym = cg_node_symbolic(g, n);
    const char *ps = cg_param(cg, "cuvil_bcast_copy_params", "{ .ndim = %d, .elem_size = %zu, .dims = %s, .x_dims = %s }",
                              y->ndim, cir_dtype_size(y->dtype), sym ? cg_dims_init(cg, y->id, y->ndim) : cg_i64s(cg, y->dims, y->ndim),
                              sym ? cg_dims_init(cg, x->id, y->ndim) : cg_i64s(cg, xd, y->ndim));
    cg_printf(cg, "    cuvil_bcast_copy(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
}

/* Expand and Tile. */
cuvil_status cg_emit_bcast_copy(cg_ctx *cg, cir_graph *g, cir_node *n) {
    bcast_copy_call(cg, g, n);
    return CUVIL_OK;
}

/* ===== Comparisons and logic ============================================================ */
cuvil_status cg_emit_logic(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (n->kind == CIR_OP_NOT) {
        cg_printf(cg, "    cuvil_not(%s, %s, %s);\n", cg_in(cg, n->in[0]), cg_out(cg, n->out[0]), cg_numel(cg, y->id));
        return CUVIL_OK;
    }
    static const int kop[CIR_OP__COUNT] = {
        [CIR_OP_EQUAL] = CUVIL_CMP_EQ, [CIR_OP_LESS] = CUVIL_CMP_LT, [CIR_OP_GREATER] = CUVIL_CMP_GT,
        [CIR_OP_LESS_EQUAL] = CUVIL_CMP_LE, [CIR_OP_GREATER_EQUAL] = CUVIL_CMP_GE, [CIR_OP_AND] = CUVIL_LOGIC_AND,
        [CIR_OP_OR] = CUVIL_LOGIC_OR, [CIR_OP_XOR] = CUVIL_LOGIC_XOR,
    };
    bool logical = n->kind == CIR_OP_AND || n->kind == CIR_OP_OR || n->kind == CIR_OP_XOR;
    cuvil_binary_params p;
    op_bin_params(a, cir_in(g, n, 1), y, kop[n->kind], &p);
    const char *ps = cg_bin_params(cg, &p, logical ? cg_logic_names : cg_cmp_names, n->in[0], n->in[1], n->out[0]);
    if (logical)
        cg_printf(cg, "    cuvil_logic(&%s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "    cuvil_compare_t(&%s, %s, %s, %s, %s);\n", ps, cg_rt_type(a->dtype), cg_in(cg, n->in[0]),
                  cg_in(cg, n->in[1]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* ===== Where ================================================================================ */
cuvil_status cg_emit_where(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *out = cir_out(g, n, 0);
    if (cg_node_symbolic(g, n)) {
        const char *ps = cg_param(cg, "cuvil_where_params",
                                  "{ .ndim = %d, .elem_size = %zu, .dims = %s, .c_strides = %s, .x_strides = %s, .y_strides = %s }",
                                  out->ndim, cir_dtype_size(out->dtype), cg_dims_init(cg, out->id, out->ndim),
                                  strides_init(cg, n->in[0], out->id), strides_init(cg, n->in[1], out->id),
                                  strides_init(cg, n->in[2], out->id));
        cg_printf(cg, "    cuvil_where(&%s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
                  cg_in(cg, n->in[2]), cg_out(cg, n->out[0]));
        return CUVIL_OK;
    }
    int64_t cs[CIR_MAX_DIMS], xs[CIR_MAX_DIMS], ys[CIR_MAX_DIMS];
    op_bcast_strides(cir_in(g, n, 0), out->ndim, out->dims, cs);
    op_bcast_strides(cir_in(g, n, 1), out->ndim, out->dims, xs);
    op_bcast_strides(cir_in(g, n, 2), out->ndim, out->dims, ys);
    const char *ps = cg_param(cg, "cuvil_where_params",
                              "{ .ndim = %d, .elem_size = %zu, .dims = %s, .c_strides = %s, .x_strides = %s, .y_strides = %s }",
                              out->ndim, cir_dtype_size(out->dtype), cg_i64s(cg, out->dims, out->ndim),
                              cg_i64s(cg, cs, out->ndim), cg_i64s(cg, xs, out->ndim),
                              cg_i64s(cg, ys, out->ndim));
    cg_printf(cg, "    cuvil_where(&%s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]), cg_in(cg, n->in[2]),
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

/* ===== Sum, Mean ============================================================================ */
/* y = x0 broadcast, then y += x_i for each other input, then (mean) y /= n, in the element
 * type as ONNX Runtime sums. */
cuvil_status cg_emit_sum(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    bcast_copy_call(cg, g, n);
    const char *out = cg_out(cg, n->out[0]);
    bool f32 = y->dtype == CIR_F32;
    for (int i = 1; i <= n->n_in; i++) {
        cuvil_binary_params p;
        const char *b;
        int bid = -1;   /* the mean's divisor: a scalar in the weights */
        if (i < n->n_in) {
            op_bin_params(y, cir_in(g, n, i), y, CUVIL_BIN_ADD, &p);
            b = cg_in(cg, n->in[i]);
            bid = n->in[i];
        } else if (n->kind == CIR_OP_MEAN) {
            cir_value scalar = *y;   /* the divisor n, a scalar */
            scalar.ndim = 0;
            op_bin_params(y, &scalar, y, CUVIL_BIN_DIV, &p);
            float nf = (float)n->n_in;
            double nd = (double)n->n_in;
            b = f32 ? cg_data(cg, &nf, sizeof nf, CIR_F32) : cg_data(cg, &nd, sizeof nd, CIR_F64);
        } else {
            break;
        }
        const char *bp = cg_bin_params(cg, &p, cg_bin_names, y->id, bid, y->id);
        if (f32) cg_printf(cg, "    cuvil_f32_binary(&%s, %s, %s, %s);\n", bp, out, b, out);
        else cg_printf(cg, "    cuvil_binary_t(&%s, %s, %s, %s, %s);\n", bp, cg_rt_type(y->dtype), out, b, out);
    }
    return CUVIL_OK;
}

/* ===== IsNaN, IsInf ========================================================================= */
cuvil_status cg_emit_float_class(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    cg_printf(cg, "    cuvil_float_class_t(%s, %d, %s, %s, %s);\n", cg_rt_type(x->dtype), op_float_class_mask(n),
              cg_in(cg, n->in[0]), cg_out(cg, n->out[0]), cg_numel(cg, x->id));
    return CUVIL_OK;
}
