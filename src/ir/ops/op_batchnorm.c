/* op_batchnorm.c -- batch_norm (inference): a per-channel affine at run time (its scale and
 * shift computed while compiling, or when the model runs from parameters it only has then), or
 * folded into the preceding conv by the bn_fold pass. */
#include "ir/ops/ops.h"

static cuvil_status bn_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 5, 5, 1, 1);
    if (s) return s;
    for (int i = 0; i < 5; i++)
        if ((s = op_need_f32(g, n, i))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d < 2", x->name, x->ndim);
    if (x->dx[1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the channels of '%s' are symbolic", x->name);
    for (int i = 1; i < 5; i++) {
        cir_value *p = cir_in(g, n, i);
        if (cir_numel(p) != x->dims[1])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' has %lld elements, C=%lld", p->name,
                                (long long)cir_numel(p), (long long)x->dims[1]);
    }
    cir_set_shape_like(cir_out(g, n, 0), CIR_F32, x);
    return CUVIL_OK;
}

/* scale = gamma / sqrt(var + eps), shift = beta - mean * scale (in double, then rounded), from
 * the constant float32 parameters: the kernel the model uses when they are inputs. */
void op_batch_norm_affine(cir_graph *g, cir_node *n, float *scale, float *shift) {
    cir_value *gam = cir_in(g, n, 1), *bet = cir_in(g, n, 2), *mean = cir_in(g, n, 3), *var = cir_in(g, n, 4);
    cuvil_f32_bn_affine(cir_numel(gam), cir_attr_float(n, "epsilon"), gam->data, bet->data, mean->data, var->data, scale,
                        shift);
}

void op_batch_norm_params(cir_graph *g, cir_node *n, cuvil_channel_affine_params *p) {
    cir_value *x = cir_in(g, n, 0);
    p->N = x->dims[0];
    p->C = x->dims[1];
    p->inner = 1;
    for (int i = 2; i < x->ndim; i++) p->inner *= x->dims[i];
    p->act = cir_node_act_params(n);
}

static cuvil_status bn_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    int64_t C = x->dims[1];
    float *sc = cuvil_arena_alloc(&g->arena, sizeof(float) * (size_t)C * 2);
    if (!sc || !cir_value_make_const(g, y)) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    op_batch_norm_affine(g, n, sc, sc + C);
    cuvil_channel_affine_params p;
    op_batch_norm_params(g, n, &p);
    cuvil_f32_channel_affine(&p, x->data, sc, sc + C, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec bn_attrs[] = {
    {"epsilon", CIR_ATTR_FLOAT, 0, 1e-5f, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_batch_norm = {"batch_norm", CIR_OPF_TAKES_ACT | CIR_OPF_SYM_DIMS, 5, 5, 1, 1, bn_attrs, bn_infer, bn_fold, NULL, 0};
