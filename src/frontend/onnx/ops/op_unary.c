/* op_unary.c -- elementwise activations and math: Relu, LeakyRelu, Clip, Sigmoid, ... */
#include "frontend/onnx/ops/ops_int.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The activation a unary node applies, from its op type and attributes/inputs. Clip's min
 * and max come from attributes before opset 11 and from (constant) inputs after; absent, they
 * are float's lowest and highest values (the spec's defaults: infinities are clamped). */
static bool unary_act(cir_graph *g, const cir_node *n, cuvil_act_params *a) {
    static const struct { const char *op; int act; float alpha, beta; } table[] = {
        {"Relu", CUVIL_ACT_RELU, 0, 0},         {"LeakyRelu", CUVIL_ACT_LEAKY_RELU, 0.01f, 0},
        {"Sigmoid", CUVIL_ACT_SIGMOID, 0, 0},   {"HardSigmoid", CUVIL_ACT_HARD_SIGMOID, 0.2f, 0.5f},
        {"HardSwish", CUVIL_ACT_HARD_SWISH, 0, 0}, {"Tanh", CUVIL_ACT_TANH, 0, 0},
        {"Exp", CUVIL_ACT_EXP, 0, 0},           {"Log", CUVIL_ACT_LOG, 0, 0},
        {"Sqrt", CUVIL_ACT_SQRT, 0, 0},         {"Neg", CUVIL_ACT_NEG, 0, 0},
        {"Abs", CUVIL_ACT_ABS, 0, 0},           {"Reciprocal", CUVIL_ACT_RECIPROCAL, 0, 0},
        {"Erf", CUVIL_ACT_ERF, 0, 0},           {"Elu", CUVIL_ACT_ELU, 1.0f, 0},
        {"Softplus", CUVIL_ACT_SOFTPLUS, 0, 0}, {"Floor", CUVIL_ACT_FLOOR, 0, 0},
        {"Ceil", CUVIL_ACT_CEIL, 0, 0},         {"Round", CUVIL_ACT_ROUND, 0, 0},
        {"Gelu", CUVIL_ACT_GELU, 0, 0},         {"Clip", CUVIL_ACT_CLIP, 0, 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].op, n->op)) continue;
        a->act = table[i].act;
        a->alpha = cir_attr_float(n, "alpha", table[i].alpha);
        a->beta = cir_attr_float(n, "beta", table[i].beta);
        if (a->act == CUVIL_ACT_CLIP) {
            if (n->opset < 11) {
                a->alpha = cir_attr_float(n, "min", -FLT_MAX);
                a->beta = cir_attr_float(n, "max", FLT_MAX);
            } else {
                cir_value *lo = cir_in(g, n, 1), *hi = cir_in(g, n, 2);
                if ((lo && !cir_is_const(lo)) || (hi && !cir_is_const(hi))) return false;
                a->alpha = lo ? (float)cir_const_f64(lo, 0) : -FLT_MAX;
                a->beta = hi ? (float)cir_const_f64(hi, 0) : FLT_MAX;
            }
        }
        if (a->act == CUVIL_ACT_GELU && strcmp(cir_attr_str(n, "approximate", "none"), "none") != 0) return false;
        return true;
    }
    return false;
}

static cuvil_status unary_infer(cir_graph *g, cir_node *n) {
    bool clip = !strcmp(n->op, "Clip");
    cuvil_status s = op_check_arity(g, n, 1, clip ? 3 : 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cuvil_act_params a;
    if (!unary_act(g, n, &a)) {
        if (clip)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "min/max inputs are computed at run time; Cuvil needs them constant");
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "attribute approximate='%s' is not supported",
                            cir_attr_str(n, "approximate", ""));
    }
    for (int i = 1; i < n->n_in; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v && cir_numel(v) != 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' must be a scalar", v->name);
    }
    cir_set_shape(cir_out(g, n, 0), x->dtype, x->ndim, x->dims);
    /* float32 is what the kernels compute; other types only fold at compile time */
    if (x->dtype != CUVIL_DTYPE_FLOAT32 && !cir_is_const(x))
        return op_need_f32(g, n, 0);
    return CUVIL_OK;
}

static cuvil_status unary_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    cuvil_act_params a;
    unary_act(g, n, &a);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int64_t cnt = cir_numel(x);
    if (x->dtype == CUVIL_DTYPE_FLOAT32) {
        cuvil_f32_unary__scalar(&a, x->data, y->data, (size_t)cnt);
        return CUVIL_OK;
    }
    bool integer = x->dtype != CUVIL_DTYPE_FLOAT64 && x->dtype != CUVIL_DTYPE_FLOAT16 && x->dtype != CUVIL_DTYPE_BFLOAT16;
    if (integer && (a.act == CUVIL_ACT_NEG || a.act == CUVIL_ACT_ABS || a.act == CUVIL_ACT_RELU)) {
        /* exact in int64, wrapping as two's complement does (Abs(INT64_MIN) = INT64_MIN) */
        for (int64_t i = 0; i < cnt; i++) {
            int64_t v = cir_const_i64(x, i);
            uint64_t neg = 0 - (uint64_t)v;
            int64_t r = a.act == CUVIL_ACT_RELU ? (v < 0 ? 0 : v) : (a.act == CUVIL_ACT_NEG || v < 0) ? (int64_t)neg : v;
            cir_const_set_i64(y, i, r);
        }
        return CUVIL_OK;
    }
    for (int64_t i = 0; i < cnt; i++) cir_const_set_f64(y, i, cuvil_f32_act1(&a, (float)cir_const_f64(x, i)));
    return CUVIL_OK;
}

static cuvil_status unary_emit(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_act_params a;
    unary_act(g, n, &a);
    char buf[128];
    const char *p = cg_param(cg, "cuvil_act_params", "%s", cg_act(&a, buf));
    cg_printf(cg, "    cuvil_f32_unary(&%s, %s, %s, %lld);\n", p, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]),
              (long long)cir_numel(cir_in(g, n, 0)));
    return CUVIL_OK;
}

#define UNARY(name) \
    const cir_opdef cir_op_##name = {#name, "", 1, CIR_OP_IS_ACT, unary_infer, unary_fold, unary_emit, unary_act};
UNARY(Relu)
UNARY(LeakyRelu)
UNARY(Clip)
UNARY(Sigmoid)
UNARY(HardSigmoid)
UNARY(HardSwish)
UNARY(Tanh)
UNARY(Exp)
UNARY(Log)
UNARY(Sqrt)
UNARY(Neg)
UNARY(Abs)
UNARY(Reciprocal)
UNARY(Erf)
UNARY(Elu)
UNARY(Softplus)
UNARY(Floor)
UNARY(Ceil)
UNARY(Round)
UNARY(Gelu)
