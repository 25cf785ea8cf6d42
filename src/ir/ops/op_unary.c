/* op_unary.c -- elementwise activations and math: relu, leaky_relu, clip, sigmoid, ..., the
 * trigonometric and hyperbolic functions, sign, softsign, selu, thresholded_relu, shrink, mish, silu. */
#include "ir/ops/ops.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The activation a unary node applies. Clip's bounds are its (constant) inputs 1 and 2;
 * absent, they are float's lowest and highest values (infinities are clamped). */
static bool unary_act(cir_graph *g, const cir_node *n, cir_act *a) {
    a->op = n->kind;
    a->alpha = a->beta = 0;
    switch (n->kind) {
    case CIR_OP_LEAKY_RELU: case CIR_OP_ELU: case CIR_OP_THRESHOLDED_RELU: a->alpha = cir_attr_float(n, "alpha"); break;
    case CIR_OP_SELU:
        a->alpha = cir_attr_float(n, "alpha");
        a->beta = cir_attr_float(n, "gamma");
        break;
    case CIR_OP_SHRINK:
        a->alpha = cir_attr_float(n, "lambd");
        a->beta = cir_attr_float(n, "bias");
        break;
    case CIR_OP_HARD_SIGMOID:
        a->alpha = cir_attr_float(n, "alpha");
        a->beta = cir_attr_float(n, "beta");
        break;
    case CIR_OP_GELU:   /* alpha 1: the tanh form (cir_act_params maps it to CUVIL_ACT_GELU_TANH) */
        a->alpha = cir_attr_int(n, "approximate") != 0 ? 1.0f : 0.0f;
        break;
    case CIR_OP_CLIP: {
        cir_value *lo = cir_in(g, n, 1), *hi = cir_in(g, n, 2);
        if ((lo && !cir_is_const(lo)) || (hi && !cir_is_const(hi))) return false;
        a->alpha = lo && cir_numel(lo) == 1 ? (float)cir_const_f64(lo, 0) : -FLT_MAX;
        a->beta = hi && cir_numel(hi) == 1 ? (float)cir_const_f64(hi, 0) : FLT_MAX;
        break;
    }
    default: break;
    }
    return true;
}

/* Whether a clip node runs on cuvil_clip_t (bounds read when the model runs, any numeric type)
 * rather than as the activation: bounds computed at run time, or integers. */
bool op_clip_typed(cir_graph *g, const cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *lo = cir_in(g, n, 1), *hi = cir_in(g, n, 2);
    return n->kind == CIR_OP_CLIP && (!cir_dtype_is_float(x->dtype) || (lo && !cir_is_const(lo)) || (hi && !cir_is_const(hi)));
}

static cuvil_status unary_infer(cir_graph *g, cir_node *n) {
    bool clip = n->kind == CIR_OP_CLIP;
    cuvil_status s = op_check_arity(g, n, 1, clip ? 3 : 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_act a;
    if (!unary_act(g, n, &a) && !clip)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "attribute approximate='%s' is not supported",
                            cir_attr_enum_name(n, "approximate"));
    for (int i = 1; i < n->n_in; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v && cir_numel(v) != 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' must be a scalar", v->name);
        if (v && op_clip_typed(g, n) && v->dtype != x->dtype)
            return cir_node_err(g, n, CUVIL_ERR_DTYPE, "bound '%s' is %s, input '%s' is %s", v->name,
                                cir_dtype_name(v->dtype), x->name, cir_dtype_name(x->dtype));
    }
    cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
    if (cir_is_const(x) || cir_dtype_is_float(x->dtype)) return CUVIL_OK;
    /* at run time integers take the ops that stay integers */
    bool int_op = n->kind == CIR_OP_NEG || n->kind == CIR_OP_ABS || n->kind == CIR_OP_RELU || n->kind == CIR_OP_SIGN ||
                  n->kind == CIR_OP_CLIP;
    if (x->dtype == CIR_BOOL) int_op = false;
    if (!cir_dtype_is_int(x->dtype) || !int_op)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; at run time %s takes float types%s", x->name,
                            cir_dtype_name(x->dtype), n->def->name, int_op ? " and integers" : "");
    return CUVIL_OK;
}

static cuvil_status unary_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (op_clip_typed(g, n)) {   /* the kernel the compiled model runs */
        cir_value *lo = cir_in(g, n, 1), *hi = cir_in(g, n, 2);
        if (!cir_value_make_const(g, y)) return g->ctx->status;
        cuvil_clip_t(x->dtype, x->data, lo ? lo->data : NULL, hi ? hi->data : NULL, y->data, cir_numel(x));
        return CUVIL_OK;
    }
    cir_act ca;
    unary_act(g, n, &ca);
    cuvil_act_params a = cir_act_params(&ca);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int64_t cnt = cir_numel(x);
    if (x->dtype == CIR_F32) {
        cuvil_f32_unary__scalar(&a, x->data, y->data, (size_t)cnt);
        return CUVIL_OK;
    }
    if (cir_dtype_is_float(x->dtype)) {
        cuvil_unary_t(&a, x->dtype, x->data, y->data, cnt);   /* as the compiled model computes it */
        return CUVIL_OK;
    }
    bool integer = !cir_dtype_is_float(x->dtype);
    if (integer && (a.act == CUVIL_ACT_NEG || a.act == CUVIL_ACT_ABS || a.act == CUVIL_ACT_RELU || a.act == CUVIL_ACT_SIGN)) {
        /* exact in int64, wrapping as two's complement does (Abs(INT64_MIN) = INT64_MIN) */
        for (int64_t i = 0; i < cnt; i++) {
            int64_t v = cir_const_i64(x, i);
            uint64_t neg = 0 - (uint64_t)v;
            int64_t r = a.act == CUVIL_ACT_SIGN ? (v > 0) - (v < 0)
                        : a.act == CUVIL_ACT_RELU ? (v < 0 ? 0 : v) : (a.act == CUVIL_ACT_NEG || v < 0) ? (int64_t)neg : v;
            cir_const_set_i64(y, i, r);
        }
        return CUVIL_OK;
    }
    for (int64_t i = 0; i < cnt; i++) cir_const_set_f64(y, i, cuvil_f32_act1(&a, (float)cir_const_f64(x, i)));
    return CUVIL_OK;
}

static const cir_attr_spec alpha_001[] = {{"alpha", CIR_ATTR_FLOAT, 0, 0.01f, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec alpha_1[] = {{"alpha", CIR_ATTR_FLOAT, 0, 1.0f, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec hard_sigmoid_attrs[] = {
    {"alpha", CIR_ATTR_FLOAT, 0, 0.2f, NULL, false},
    {"beta", CIR_ATTR_FLOAT, 0, 0.5f, NULL, false},
    CIR_ATTR_END,
};
static const cir_attr_spec selu_attrs[] = {
    {"alpha", CIR_ATTR_FLOAT, 0, 1.67326319217681884765625f, NULL, false},
    {"gamma", CIR_ATTR_FLOAT, 0, 1.05070102214813232421875f, NULL, false},
    CIR_ATTR_END,
};
static const cir_attr_spec shrink_attrs[] = {
    {"bias", CIR_ATTR_FLOAT, 0, 0.0f, NULL, false},
    {"lambd", CIR_ATTR_FLOAT, 0, 0.5f, NULL, false},
    CIR_ATTR_END,
};
static const char *const gelu_approx[] = {"none", "tanh", NULL};
static const cir_attr_spec gelu_attrs[] = {{"approximate", CIR_ATTR_ENUM, 0, 0, gelu_approx, false}, CIR_ATTR_END};

#define UNARY(name, act, attrs, max_in) \
    const cir_opdef cir_op_##name = {#name, CIR_OPF_IS_ACT | CIR_OPF_SYM_DIMS, 1, max_in, 1, 1, attrs, unary_infer, unary_fold, unary_act, act};
UNARY(relu, CUVIL_ACT_RELU, NULL, 1)
UNARY(leaky_relu, CUVIL_ACT_LEAKY_RELU, alpha_001, 1)
UNARY(clip, CUVIL_ACT_CLIP, NULL, 3)
UNARY(sigmoid, CUVIL_ACT_SIGMOID, NULL, 1)
UNARY(hard_sigmoid, CUVIL_ACT_HARD_SIGMOID, hard_sigmoid_attrs, 1)
UNARY(hard_swish, CUVIL_ACT_HARD_SWISH, NULL, 1)
UNARY(tanh, CUVIL_ACT_TANH, NULL, 1)
UNARY(exp, CUVIL_ACT_EXP, NULL, 1)
UNARY(log, CUVIL_ACT_LOG, NULL, 1)
UNARY(sqrt, CUVIL_ACT_SQRT, NULL, 1)
UNARY(neg, CUVIL_ACT_NEG, NULL, 1)
UNARY(abs, CUVIL_ACT_ABS, NULL, 1)
UNARY(reciprocal, CUVIL_ACT_RECIPROCAL, NULL, 1)
UNARY(erf, CUVIL_ACT_ERF, NULL, 1)
UNARY(elu, CUVIL_ACT_ELU, alpha_1, 1)
UNARY(softplus, CUVIL_ACT_SOFTPLUS, NULL, 1)
UNARY(floor, CUVIL_ACT_FLOOR, NULL, 1)
UNARY(ceil, CUVIL_ACT_CEIL, NULL, 1)
UNARY(round, CUVIL_ACT_ROUND, NULL, 1)
UNARY(gelu, CUVIL_ACT_GELU, gelu_attrs, 1)
UNARY(sin, CUVIL_ACT_SIN, NULL, 1)
UNARY(cos, CUVIL_ACT_COS, NULL, 1)
UNARY(tan, CUVIL_ACT_TAN, NULL, 1)
UNARY(asin, CUVIL_ACT_ASIN, NULL, 1)
UNARY(acos, CUVIL_ACT_ACOS, NULL, 1)
UNARY(atan, CUVIL_ACT_ATAN, NULL, 1)
UNARY(sinh, CUVIL_ACT_SINH, NULL, 1)
UNARY(cosh, CUVIL_ACT_COSH, NULL, 1)
UNARY(asinh, CUVIL_ACT_ASINH, NULL, 1)
UNARY(acosh, CUVIL_ACT_ACOSH, NULL, 1)
UNARY(atanh, CUVIL_ACT_ATANH, NULL, 1)
UNARY(sign, CUVIL_ACT_SIGN, NULL, 1)
UNARY(softsign, CUVIL_ACT_SOFTSIGN, NULL, 1)
UNARY(selu, CUVIL_ACT_SELU, selu_attrs, 1)
UNARY(thresholded_relu, CUVIL_ACT_THRESHOLDED_RELU, alpha_1, 1)
UNARY(shrink, CUVIL_ACT_SHRINK, shrink_attrs, 1)
UNARY(mish, CUVIL_ACT_MISH, NULL, 1)
UNARY(silu, CUVIL_ACT_SILU, NULL, 1)   /* (no ONNX op before Swish-24: pass_fuse_silu.c) */
