/* emit_layer_norm.c -- layer_norm and instance_norm (op_layer_norm.c) on their kernels. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_layer_norm(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_layer_norm_params p;
    cuvil_status s = op_layer_norm_params(g, n, &p);
    if (s) return s;
    char e[32];
    cir_value *x = cir_in(g, n, 0);
    int axis;
    op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &axis);
    const char *ps = cg_param(cg, "cuvil_layer_norm_params", "{ .rows = %s, .len = %lld, .epsilon = %s, .rms = %d }",
                              cg_dimprod(cg, x->id, 0, axis, 1), (long long)p.len, cg_float(p.epsilon, e), p.rms);
    const char *st[2] = {"NULL", "NULL"};   /* Mean and InvStdDev, when the node has them */
    for (int j = 0; j < 2; j++)
        if (n->n_out > j + 1 && n->out[j + 1] >= 0) st[j] = cg_out(cg, n->out[j + 1]);
    cg_printf(cg, "    cuvil_f32_layer_norm(&%s, %s, %s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
              cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]), st[0], st[1]);
    return CUVIL_OK;
}

cuvil_status cg_emit_instance_norm(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_instance_norm_params p;
    cuvil_status s = op_instance_norm_params(g, n, &p);
    if (s) return s;
    char e[32];
    cir_value *x = cir_in(g, n, 0);
    const char *ps = cg_param(cg, "cuvil_instance_norm_params", "{ .batch = %s, .channels = %lld, .len = %s, "
                              ".epsilon = %s }", cg_dimprod(cg, x->id, 0, 1, 1), (long long)p.channels,
                              cg_dimprod(cg, x->id, 2, x->ndim, 1), cg_float(p.epsilon, e));
    cg_printf(cg, "    cuvil_f32_instance_norm(&%s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
              cg_in(cg, n->in[2]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
