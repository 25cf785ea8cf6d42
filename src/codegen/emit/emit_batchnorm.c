/* emit_batchnorm.c -- batch_norm (op_batchnorm.c) that did not fold into a conv: a per-channel
 * affine whose scale and shift are computed now, into the weights. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_batch_norm(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int64_t C = cir_in(g, n, 0)->dims[1];
    const char *scale, *shift;
    bool rt = false;
    for (int i = 1; i < 5; i++) rt |= !cir_is_const(cir_in(g, n, i));
    if (rt) {   /* parameters the model has only when it runs: the affine computed then, into scratch */
        char e[32];
        const char *S = cg_scratch(cg, sizeof(float) * 2 * (size_t)C, "%zu", sizeof(float) * 2 * (size_t)C);
        cg_printf(cg, "    cuvil_f32_bn_affine(%lld, %s, %s, %s, %s, %s, (float *)%s, (float *)%s + %lld);\n", (long long)C,
                  cg_float(cir_attr_float(n, "epsilon"), e), cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), cg_in(cg, n->in[3]),
                  cg_in(cg, n->in[4]), S, S, (long long)C);
        char buf[64];
        snprintf(buf, sizeof buf, "(float *)%s", S);
        scale = cg_str(cg, buf);
        snprintf(buf, sizeof buf, "(float *)%s + %lld", S, (long long)C);
        shift = cg_str(cg, buf);
    } else {
        float *sc = cuvil_malloc(sizeof(float) * (size_t)C * 2);
        if (!sc) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        op_batch_norm_affine(g, n, sc, sc + C);
        scale = cg_data(cg, sc, sizeof(float) * (size_t)C, CIR_F32);
        shift = cg_data(cg, sc + C, sizeof(float) * (size_t)C, CIR_F32);
        cuvil_free(sc);
    }
    cuvil_channel_affine_params p;
    op_batch_norm_params(g, n, &p);
    char a[128];
    const cir_value *x = cir_in(g, n, 0);
    const char *ps = cg_param(cg, "cuvil_channel_affine_params", "{ .N = %s, .C = %lld, .inner = %s, .act = %s }",
                              cg_dimprod(cg, x->id, 0, 1, 1), (long long)p.C, cg_dimprod(cg, x->id, 2, x->ndim, 1),
                              cg_act(&p.act, a));
    cg_printf(cg, "    cuvil_f32_channel_affine(&%s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), scale, shift,
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
