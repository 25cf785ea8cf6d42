/* emit_binary.c -- add, sub, mul, div, pow, max, min, prelu, mod (op_binary.c): the float32
 * kernel, or the typed one for the other element types. An integer division or modulo by zero
 * is an error from run that names the node, as ONNX Runtime's is. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_binary(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_binary_params p;
    op_binary_params(g, n, &p);
    cir_value *y = cir_out(g, n, 0);
    int b_id = n->n_in > 1 && n->in[1] >= 0 ? n->in[1] : n->in[0];
    if (p.op == CUVIL_BIN_POW && cir_val(g, b_id)->dtype != y->dtype &&
        !(y->dtype == CIR_F32 && cir_is_const(cir_val(g, b_id)))) {   /* an exponent of another type (no act: fuse_act) */
        cg_printf(cg, "    cuvil_pow_t(&%s, %s, %s, %s, %s, %s);\n", cg_bin_params(cg, &p, cg_bin_names, n->in[0], b_id, n->out[0]),
                  cg_rt_type(y->dtype), cg_in(cg, n->in[0]), cg_rt_type(cir_val(g, b_id)->dtype), cg_in(cg, b_id),
                  cg_out(cg, n->out[0]));
        return CUVIL_OK;
    }
    if (y->dtype != CIR_F32) {
        const char *what = op_binary_zero_msg(y->dtype, p.op);
        cg_printf(cg, "    %scuvil_binary_t(&%s, %s, %s, %s, %s)%s;\n", what ? "if (" : "", cg_bin_params(cg, &p, cg_bin_names, n->in[0], n->n_in > 1 && n->in[1] >= 0 ? n->in[1] : n->in[0], n->out[0]),
                  cg_rt_type(y->dtype), cg_in(cg, n->in[0]), cg_in(cg, n->n_in > 1 && n->in[1] >= 0 ? n->in[1] : n->in[0]),
                  cg_out(cg, n->out[0]), what ? ") return 1" : "");
        if (what) cg_fallible(cg, what);
        return CUVIL_OK;
    }
    int bi = n->n_in > 1 && n->in[1] >= 0 ? n->in[1] : n->in[0];
    const char *ps;
    if (n->low.layout & CIR_BIN_CHANNELS_LAST) {
        /* channels last (the layout step: fixed shapes, a 4-D y, each input y's shape, in y's
         * layout, or broadcast over H and W): the op on the dims as the bytes lie, [N, H, W, C],
         * an input broadcast over H and W read as [N', 1, 1, C'] (the same bytes) */
        int64_t d[3][4];
        const cir_value *v[3] = {cir_in(g, n, 0), cir_val(g, bi), y};
        for (int k = 0; k < 3; k++) {
            int64_t r[4] = {1, 1, 1, 1};
            CUVIL_ASSERT(v[k]->ndim >= 0 && v[k]->ndim <= 4);
            for (int i = 0; i < v[k]->ndim; i++) r[4 - v[k]->ndim + i] = v[k]->dims[i];
            d[k][0] = r[0], d[k][1] = r[2], d[k][2] = r[3], d[k][3] = r[1];
        }
        cuvil_binary_params q = p;
        cuvil_binary_bind(&q, 3, (const int[]){4, 4, 4}, (const int64_t *const[]){d[0], d[1], d[2]});
        char act[128];
        ps = cg_param(cg, "cuvil_binary_params", "{ .op = %s, .ndim = %d, .dims = %s, .a_strides = %s, .b_strides = %s, .act = %s }",
                      cg_bin_names[q.op], q.ndim, cg_i64s(cg, q.dims, q.ndim), cg_i64s(cg, q.a_strides, q.ndim),
                      cg_i64s(cg, q.b_strides, q.ndim), cg_act(&q.act, act));
    } else {
        ps = cg_bin_params(cg, &p, cg_bin_names, n->in[0], bi, n->out[0]);
    }
    cir_value *b = cir_val(g, bi);
    const char *bexpr = cg_in(cg, bi);
    if (b->dtype != CIR_F32) {   /* Pow's constant exponent: as float32 */
        int64_t cnt = cir_numel(b);
        float *f = cuvil_malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
        if (!f) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < cnt; i++) f[i] = (float)cir_const_f64(b, i);
        bexpr = cg_data(cg, f, sizeof(float) * (size_t)cnt, CIR_F32);
        cuvil_free(f);
    }
    cg_printf(cg, "    cuvil_f32_binary(&%s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), bexpr, cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
