/* op_batchnorm.c -- BatchNormalization (inference): a per-channel affine at run time, or
 * folded into the preceding Conv by the bn_fold pass. */
#include "frontend/onnx/ops/ops_int.h"

#include <math.h>

static cuvil_status bn_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 5, 5, 1, 5);
    if (s) return s;
    /* before opset 7, is_test=0 (the default) means training mode */
    if (n->opset < 7 && cir_attr_int(n, "is_test", 0) != 1)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "is_test=0 (training mode, opsets before 7) is not supported");
    if (cir_attr_int(n, "spatial", 1) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "spatial=0 (statistics per activation, opsets 7-8) is not supported");
    if (cir_attr_int(n, "training_mode", 0))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "training_mode=1 is not supported (inference only)");
    /* from opset 14 the running-statistics outputs exist only in training mode */
    if (n->opset >= 14)
        for (int i = 1; i < n->n_out; i++)
            if (n->out[i] >= 0)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "output %d (running statistics) is only produced with "
                                    "training_mode=1", i);
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0 && g->values[n->out[i]].n_uses)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output %d (running statistics) is used; inference only", i);
    for (int i = 0; i < 5; i++)
        if ((s = op_need_f32(g, n, i))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d < 2", x->name, x->ndim);
    for (int i = 1; i < 5; i++) {
        cir_value *p = cir_in(g, n, i);
        if (cir_numel(p) != x->dims[1])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' has %lld elements, C=%lld", p->name,
                                (long long)cir_numel(p), (long long)x->dims[1]);
        if (!cir_is_const(p))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "parameter '%s' is computed at run time; Cuvil needs it constant", p->name);
    }
    cir_set_shape(cir_out(g, n, 0), CUVIL_DTYPE_FLOAT32, x->ndim, x->dims);
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0) cir_set_shape(cir_out(g, n, i), CUVIL_DTYPE_FLOAT32, 1, &x->dims[1]);
    return CUVIL_OK;
}

/* scale = gamma / sqrt(var + eps), shift = beta - mean * scale (in double, then rounded). */
static void bn_affine(cir_graph *g, cir_node *n, float *scale, float *shift) {
    cir_value *gam = cir_in(g, n, 1), *bet = cir_in(g, n, 2), *mean = cir_in(g, n, 3), *var = cir_in(g, n, 4);
    double eps = cir_attr_float(n, "epsilon", 1e-5f);
    for (int64_t c = 0; c < cir_numel(gam); c++) {
        double sc = cir_const_f64(gam, c) / sqrt(cir_const_f64(var, c) + eps);
        scale[c] = (float)sc;
        shift[c] = (float)(cir_const_f64(bet, c) - cir_const_f64(mean, c) * sc);
    }
}

static void bn_params(cir_graph *g, cir_node *n, cuvil_channel_affine_params *p) {
    cir_value *x = cir_in(g, n, 0);
    p->N = x->dims[0];
    p->C = x->dims[1];
    p->inner = 1;
    for (int i = 2; i < x->ndim; i++) p->inner *= x->dims[i];
    p->act = n->act;
}

static cuvil_status bn_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int64_t C = x->dims[1];
    float *sc = cuvil_arena_alloc(&g->arena, sizeof(float) * (size_t)C * 2);
    if (!sc || !cir_value_make_const(g, y)) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    bn_affine(g, n, sc, sc + C);
    cuvil_channel_affine_params p;
    bn_params(g, n, &p);
    cuvil_f32_channel_affine(&p, x->data, sc, sc + C, y->data);
    return CUVIL_OK;
}

static cuvil_status bn_emit(cg_ctx *cg, cir_graph *g, cir_node *n) {
    int64_t C = cir_in(g, n, 0)->dims[1];
    float *sc = cuvil_malloc(sizeof(float) * (size_t)C * 2);
    if (!sc) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    bn_affine(g, n, sc, sc + C);
    const char *scale = cg_data(cg, sc, sizeof(float) * (size_t)C, CUVIL_DTYPE_FLOAT32);
    const char *shift = cg_data(cg, sc + C, sizeof(float) * (size_t)C, CUVIL_DTYPE_FLOAT32);
    cuvil_free(sc);
    cuvil_channel_affine_params p;
    bn_params(g, n, &p);
    char a[128];
    const char *ps = cg_param(cg, "cuvil_channel_affine_params", "{ .N = %lld, .C = %lld, .inner = %lld, .act = %s }",
                              (long long)p.N, (long long)p.C, (long long)p.inner, cg_act(&p.act, a));
    cg_printf(cg, "    cuvil_f32_channel_affine(&%s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), scale, shift,
              cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

const cir_opdef cir_op_BatchNormalization = {"BatchNormalization", "", 1, CIR_OP_TAKES_ACT, bn_infer, bn_fold, bn_emit, NULL};
