/* op_layer_norm.c -- layer_norm (x, scale, [bias]; axis, epsilon) -> y, [mean], [inv_std_dev]:
 * each slice of x from `axis` to the end is normalised to zero mean and unit variance, then
 * scaled and shifted; scale and bias broadcast to that slice's shape; the optional outputs are
 * each slice's mean and 1 / sqrt(variance + epsilon), float32. rms=1 (RMSNormalization): the
 * mean is taken as 0. instance_norm (x, scale, bias; epsilon): x is [N, C,
 * ...], each (n, c) slice normalised, then scaled and shifted by scale[c], bias[c]. float32, at
 * run time and folded by the one kernel of each. */
#include "ir/ops/ops.h"

#include <string.h>

cuvil_status op_layer_norm_params(cir_graph *g, cir_node *n, cuvil_layer_norm_params *p) {
    cir_value *x = cir_in(g, n, 0);
    cuvil_status s;
    for (int i = 0; i < n->n_in; i++)
        if (cir_in(g, n, i) && (s = op_need_f32(g, n, i))) return s;
    if (x->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a scalar", x->name);
    int axis;
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &axis))) return s;
    for (int d = axis; d < x->ndim; d++)
        if (x->dx[d])
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "normalises dim %d of '%s', which is symbolic (the normalised "
                                "dims must be fixed, as its scale's are)", d, x->name);
    memset(p, 0, sizeof *p);
    p->rows = p->len = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < axis) p->rows *= x->dims[d];
        else p->len *= x->dims[d];
    }
    p->epsilon = cir_attr_float(n, "epsilon");
    p->rms = (int)cir_attr_int(n, "rms");
    /* scale and bias: as many elements as a normalised slice (their shape is its trailing dims,
     * possibly with leading 1s; a broadcast of fewer elements is not supported) */
    for (int i = 1; i < 3; i++) {
        cir_value *v = cir_in(g, n, i);
        if (!v) continue;
        bool ok = cir_numel(v) == p->len && v->ndim <= x->ndim - axis + 1;
        for (int d = 0; ok && d < v->ndim; d++) {
            int xd = x->ndim - v->ndim + d;
            ok = xd >= axis ? v->dims[d] == x->dims[xd] : v->dims[d] == 1;
        }
        if (!ok) {
            char a[256];
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "%s '%s' %s must have the shape of the normalised slice (%lld "
                                "elements from axis %d)", i == 1 ? "scale" : "bias", v->name,
                                cir_shape_str(g, v, a, sizeof a), (long long)p->len, axis);
        }
    }
    return CUVIL_OK;
}

static cuvil_status ln_infer(cir_graph *g, cir_node *n) {
    cuvil_layer_norm_params p;
    cuvil_status s = op_layer_norm_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
    /* Mean and InvStdDev: float32 (the stash type), x's dims with those normalised set to 1 */
    const cir_dim *sd[CIR_MAX_DIMS];
    int axis;
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &axis))) return s;
    for (int d = 0; d < x->ndim; d++)
        if (!(sd[d] = d < axis ? cir_dimx(g, x, d) : cir_dim_const(&g->dt, 1))) return cir_dim_err(g, n, "the dims");
    for (int j = 1; j < n->n_out && j < 3; j++)
        if (n->out[j] >= 0) cir_set_shape_x(cir_val(g, n->out[j]), CIR_F32, x->ndim, sd);
    return CUVIL_OK;
}

static cuvil_status ln_fold(cir_graph *g, cir_node *n) {
    cuvil_layer_norm_params p;
    cuvil_status s = op_layer_norm_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0), *b = cir_in(g, n, 2), *st[2] = {NULL, NULL};
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    for (int j = 0; j < 2; j++)
        if (n->n_out > j + 1 && n->out[j + 1] >= 0 && !cir_value_make_const(g, st[j] = cir_val(g, n->out[j + 1])))
            return g->ctx->status;
    cuvil_f32_layer_norm(&p, cir_in(g, n, 0)->data, cir_in(g, n, 1)->data, b ? b->data : NULL, y->data,
                         st[0] ? st[0]->data : NULL, st[1] ? st[1]->data : NULL);
    return CUVIL_OK;
}

static const cir_attr_spec ln_attrs[] = {
    {"axis", CIR_ATTR_INT, -1, 0, NULL, false},
    {"epsilon", CIR_ATTR_FLOAT, 0, 1e-5f, NULL, false},
    {"rms", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_layer_norm = {"layer_norm", CIR_OPF_SYM_DIMS, 2, 3, 1, 3, ln_attrs, ln_infer, ln_fold, NULL, 0};

/* ===== instance_norm ===================================================================== */
cuvil_status op_instance_norm_params(cir_graph *g, cir_node *n, cuvil_instance_norm_params *p) {
    cir_value *x = cir_in(g, n, 0);
    cuvil_status s;
    for (int i = 0; i < 3; i++)
        if ((s = op_need_f32(g, n, i))) return s;
    if (x->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; it must be [N, C, ...]", x->name,
                                         x->ndim);
    memset(p, 0, sizeof *p);
    p->batch = x->dims[0];
    p->channels = x->dims[1];
    p->len = 1;
    for (int d = 2; d < x->ndim; d++) p->len *= x->dims[d];
    p->epsilon = cir_attr_float(n, "epsilon");
    for (int i = 1; i < 3; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v->ndim != 1 || v->dims[0] != p->channels) {
            char a[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s '%s' is %s; it must be [C] = [%lld]", i == 1 ? "scale" : "bias",
                                v->name, cir_shape_str(g, v, a, sizeof a), (long long)p->channels);
        }
    }
    return CUVIL_OK;
}

static cuvil_status in_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 3, 1, 1);
    if (s) return s;
    cuvil_instance_norm_params p;
    if ((s = op_instance_norm_params(g, n, &p))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->dx[1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the channels of '%s' are symbolic", x->name);
    cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
    return CUVIL_OK;
}

static cuvil_status in_fold(cir_graph *g, cir_node *n) {
    cuvil_instance_norm_params p;
    cuvil_status s = op_instance_norm_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_f32_instance_norm(&p, cir_in(g, n, 0)->data, cir_in(g, n, 1)->data, cir_in(g, n, 2)->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec in_attrs[] = {{"epsilon", CIR_ATTR_FLOAT, 0, 1e-5f, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_instance_norm = {"instance_norm", CIR_OPF_SYM_DIMS, 3, 3, 1, 1, in_attrs, in_infer, in_fold, NULL, 0};
