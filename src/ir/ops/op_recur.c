/* op_recur.c -- ops that carry a state between calls (opset 27): causal_conv (x, w, [bias],
 * [past_state]; activation): ONNX CausalConvWithState, a depthwise causal 1-D convolution over
 * the past state then x, and the state's next value; linear_attention (q, k, v, [past_state],
 * [decay], [beta]; q_num_heads, kv_num_heads, scale, update_rule): ONNX LinearAttention, the
 * recurrence of its linear, gated, delta and gated-delta rules. Both as ONNX's reference,
 * float32, with symbolic batch and length. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

static const char *const cc_acts[] = {"none", "silu", "swish", NULL};

cuvil_status op_causal_conv_sizes(cir_graph *g, cir_node *n, op_causal_conv *c) {
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1), *b = cir_in(g, n, 2), *ps = cir_in(g, n, 3);
    if (x->ndim != 3 || x->dx[1])
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' must be [batch, channels (fixed), length]", x->name);
    c->B = cir_dimx(g, x, 0);
    c->L = cir_dimx(g, x, 2);
    c->C = x->dims[1];
    if (w->ndim != 3 || !cir_value_fixed(w) || w->dims[0] != c->C || w->dims[1] != 1 || w->dims[2] < 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "weight '%s' must be [%lld, 1, k] (fixed)", w->name, (long long)c->C);
    c->K = w->dims[2];
    if (b && (b->ndim != 1 || b->dims[0] != c->C))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "bias '%s' must be [%lld]", b->name, (long long)c->C);
    if (ps) {
        cuvil_status s;
        if (ps->ndim != 3 || ps->dx[1] || ps->dx[2] || ps->dims[1] != c->C || ps->dims[2] != c->K - 1)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "past_state '%s' must be [batch, %lld, %lld]", ps->name,
                                (long long)c->C, (long long)(c->K - 1));
        if ((s = cir_require_eq(g, n, cir_dimx(g, ps, 0), c->B, "past_state's and the input's batch"))) return s;
    }
    c->act = (int)cir_attr_int(n, "activation") != 0;
    return CUVIL_OK;
}

static cuvil_status cc_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 4, 1, 2);
    if (s) return s;
    for (int i = 0; i < 4; i++)
        if (cir_in(g, n, i) && (s = op_need_f32(g, n, i))) return s;
    op_causal_conv c;
    if ((s = op_causal_conv_sizes(g, n, &c))) return s;
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *dx[3] = {c.B, cir_dimx(g, x, 1), c.L}, *ds[3] = {c.B, cir_dimx(g, x, 1), cir_dim_const(&g->dt, c.K - 1)};
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, 3, dx);
    if (cir_out_opt(g, n, 1)) cir_set_shape_x(cir_out(g, n, 1), CIR_F32, 3, ds);
    return CUVIL_OK;
}

static const cir_attr_spec cc_attrs[] = {{"activation", CIR_ATTR_ENUM, 0, 0, cc_acts, false}, CIR_ATTR_END};
const cir_opdef cir_op_causal_conv = {"causal_conv", CIR_OPF_SYM_DIMS, 2, 4, 1, 2, cc_attrs, cc_infer, NULL, NULL, 0};

/* ===== linear_attention ==================================================================== */
static const char *const la_rules[] = {"linear", "gated", "delta", "gated_delta", NULL};

cuvil_status op_linear_attention_sizes(cir_graph *g, cir_node *n, op_linear_attention *a) {
    cir_value *q = cir_in(g, n, 0), *k = cir_in(g, n, 1), *v = cir_in(g, n, 2), *ps = cir_in(g, n, 3);
    cir_value *dc = cir_in(g, n, 4), *bt = cir_in(g, n, 5);
    memset(a, 0, sizeof *a);
    int64_t hq = cir_attr_int(n, "q_num_heads"), hk = cir_attr_int(n, "kv_num_heads");
    if (hq < 1 || hk < 1 || hq % hk || hq > g->limits.dim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "q_num_heads %lld must be a positive multiple of kv_num_heads %lld",
                            (long long)hq, (long long)hk);
    cir_value *qkv[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (qkv[i]->ndim != 3 || qkv[i]->dx[2])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' must be [batch, length, heads * dim (fixed)]", qkv[i]->name);
    if (q->dims[2] % hq || k->dims[2] % hk || v->dims[2] % hk)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the last dims of query, key and value must divide by their heads");
    a->hq = hq;
    a->hk = hk;
    a->dk = q->dims[2] / hq;
    a->dv = v->dims[2] / hk;
    if (k->dims[2] / hk != a->dk)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "key '%s' has a head size of %lld, query %lld", k->name,
                            (long long)(k->dims[2] / hk), (long long)a->dk);
    a->B = cir_dimx(g, q, 0);
    a->T = cir_dimx(g, q, 1);
    cuvil_status s;
    for (int i = 1; i < 3; i++)
        if ((s = cir_require_eq(g, n, cir_dimx(g, qkv[i], 0), a->B, "the batches")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, qkv[i], 1), a->T, "the lengths")))
            return s;
    int rule = (int)cir_attr_int(n, "update_rule");
    a->gated = rule == 1 || rule == 3;
    a->delta = rule == 2 || rule == 3;
    if (a->gated != (dc != NULL) || a->delta != (bt != NULL))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "update_rule '%s' takes %s decay and %s beta", la_rules[rule],
                            a->gated ? "a" : "no", a->delta ? "a" : "no");
    cir_value *db[2] = {dc, bt};
    for (int i = 0; i < 2; i++) {
        cir_value *e = db[i];
        if (!e) continue;
        if (e->ndim != 3 || e->dx[2] ||
            (e->dims[2] != hk && !(i == 0 && e->dims[2] == hk * a->dk) && !(i == 1 && e->dims[2] == 1)))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s '%s' must be [batch, length, %s]", i ? "beta" : "decay", e->name,
                                i ? "kv_num_heads or 1" : "kv_num_heads or kv_num_heads * head size");
        if ((s = cir_require_eq(g, n, cir_dimx(g, e, 0), a->B, "the batches")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, e, 1), a->T, "the lengths")))
            return s;
        if (i == 0) a->decay_w = e->dims[2];
        else a->beta_w = e->dims[2];
    }
    if (ps) {
        if (ps->ndim != 4 || ps->dx[1] || ps->dx[2] || ps->dx[3] || ps->dims[1] != hk || ps->dims[2] != a->dk ||
            ps->dims[3] != a->dv)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "past_state '%s' must be [batch, %lld, %lld, %lld]", ps->name,
                                (long long)hk, (long long)a->dk, (long long)a->dv);
        if ((s = cir_require_eq(g, n, cir_dimx(g, ps, 0), a->B, "the batches"))) return s;
    }
    bool ovf = false;   /* the kernel's scratch: a state and a row, as one tensor */
    int64_t scratch = cuvil_i64_mul(&ovf, cuvil_i64_mul(&ovf, a->dk + 1, a->dv), 4);
    if (ovf || (uint64_t)scratch > g->limits.tensor_bytes)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "its state ([%lld, %lld] per head) is over the limit tensor_bytes",
                            (long long)a->dk, (long long)a->dv);
    float sc = cir_attr_float(n, "scale");
    a->scale = sc != 0.0f ? sc : 1.0f / sqrtf((float)a->dk);
    return CUVIL_OK;
}

static cuvil_status la_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 6, 1, 2);
    if (s) return s;
    for (int i = 0; i < 6; i++)
        if (cir_in(g, n, i) && (s = op_need_f32(g, n, i))) return s;
    op_linear_attention a;
    if ((s = op_linear_attention_sizes(g, n, &a))) return s;
    const cir_dim *dy[3] = {a.B, a.T, cir_dim_const(&g->dt, a.hq * a.dv)};
    const cir_dim *ds[4] = {a.B, cir_dim_const(&g->dt, a.hk), cir_dim_const(&g->dt, a.dk), cir_dim_const(&g->dt, a.dv)};
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, 3, dy);
    if (cir_out_opt(g, n, 1)) cir_set_shape_x(cir_out(g, n, 1), CIR_F32, 4, ds);
    return CUVIL_OK;
}

static const cir_attr_spec la_attrs[] = {
    {"chunk_size", CIR_ATTR_INT, 64, 0, NULL, false},   /* a tuning hint: no effect on the result */
    {"kv_num_heads", CIR_ATTR_INT, 0, 0, NULL, true},
    {"q_num_heads", CIR_ATTR_INT, 0, 0, NULL, true},
    {"scale", CIR_ATTR_FLOAT, 0, 0.0f, NULL, false},
    {"update_rule", CIR_ATTR_ENUM, 3, 0, la_rules, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_linear_attention = {"linear_attention", CIR_OPF_SYM_DIMS, 3, 6, 1, 2, la_attrs, la_infer, NULL,
                                           NULL, 0};
