/* emit_pad.c -- pad (op_pad.c) on cuvil_f32_pad, other types on cuvil_pad_t. */
#include "codegen/emit/emit_int.h"

static const char *const mode_names[] = {"CUVIL_PAD_CONSTANT", "CUVIL_PAD_REFLECT", "CUVIL_PAD_EDGE", "CUVIL_PAD_WRAP"};

cuvil_status cg_emit_pad(cg_ctx *cg, cir_graph *g, cir_node *n) {
    if (op_pad_rt(g, n)) {   /* pads read when the model runs (op_pad.c): the dims they give, then the kernel */
        cir_value *x = cir_in(g, n, 0), *pads = cir_in(g, n, 1), *axes = cir_in(g, n, 3), *cv = cir_in(g, n, 2);
        int slots[CIR_MAX_DIMS];
        const char *hi = cg_found_his(cg, g, n, x->ndim, slots);
        cg_printf(cg, "    {\n        static const int64_t hi[] = %s;\n        cuvil_pad_params p = { .mode = %s, .ndim = %d, "
                      ".in_dims = %s };\n        if (cuvil_pad_rt(&p, %s, %s, %lld, %s, %lld, hi)) return 1;\n",
                  x->ndim ? hi : "{ 0 }", mode_names[cir_attr_int(n, "mode")], x->ndim, cg_dims_init(cg, x->id, x->ndim),
                  pads->dtype == CIR_I32 ? "CUVIL_T_I32" : "CUVIL_T_I64", cg_in(cg, n->in[1]), (long long)cir_numel(pads),
                  axes ? cg_in(cg, n->in[3]) : "NULL", axes ? (long long)cir_numel(axes) : 0LL);
        for (int d = 0; d < x->ndim; d++) cg_printf(cg, "        D[%d] = p.out_dims[%d];\n", slots[d], d);
        bool one = cv && cir_numel(cv) == 1;
        if (x->dtype != CIR_F32)
            cg_printf(cg, "        cuvil_pad_t(&p, %zu, %s, %s, %s);\n    }\n", cir_dtype_size(x->dtype), cg_in(cg, n->in[0]),
                      cg_out(cg, n->out[0]), one ? cg_in(cg, n->in[2]) : "NULL");
        else
            cg_printf(cg, "        p.value = %s%s;\n        cuvil_f32_pad(&p, %s, %s);\n    }\n", one ? cg_in(cg, n->in[2]) : "0.0f",
                      one ? "[0]" : "", cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        cg_fallible(cg, "its pads are not valid for its input (a crop past an axis, reflect or wrap past what the axis "
                        "holds, an axis out of range or repeated) or give a dim over the size planned for it");
        return CUVIL_OK;
    }
    cuvil_pad_params p;
    cuvil_status s = op_pad_params(g, n, &p);
    if (s) return s;
    char v[32];
    const char *ps = cg_param(cg, "cuvil_pad_params",
                              "{ .mode = %s, .ndim = %d, .in_dims = %s, .out_dims = %s, .pad_begin = %s, .value = %s }",
                              mode_names[p.mode], p.ndim,
                              cg_node_symbolic(g, n) ? cg_dims_init(cg, n->in[0], p.ndim) : cg_i64s(cg, p.in_dims, p.ndim),
                              cg_node_symbolic(g, n) ? cg_dims_init(cg, n->out[0], p.ndim) : cg_i64s(cg, p.out_dims, p.ndim),
                              cg_i64s(cg, p.pad_begin, p.ndim), cg_float(p.value, v));
    cir_value *x = cir_in(g, n, 0), *cv = cir_in(g, n, 2);
    bool one = cv && cir_numel(cv) == 1;
    if (x->dtype != CIR_F32)
        cg_printf(cg, "    cuvil_pad_t(&%s, %zu, %s, %s, %s);\n", ps, cir_dtype_size(x->dtype), cg_in(cg, n->in[0]),
                  cg_out(cg, n->out[0]), one ? cg_in(cg, n->in[2]) : "NULL");
    else if (one && !cir_is_const(cv))   /* the value read as the model runs */
        cg_printf(cg, "    {\n        cuvil_pad_params pp = %s;\n        pp.value = %s[0];\n        cuvil_f32_pad(&pp, %s, %s);\n    }\n",
                  ps, cg_in(cg, n->in[2]), cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    else
        cg_printf(cg, "    cuvil_f32_pad(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
