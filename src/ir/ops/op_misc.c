/* op_misc.c -- eye_like (x; dtype, k): an identity-like matrix of x's shape (ONNX EyeLike);
 * lrn (x; alpha, beta, bias, size): LocalResponseNormalization across channels, float32;
 * reverse_sequence (x, lens; time_axis, batch_axis): each batch item's first lens[b] steps
 * reversed, any element type (a length outside 0..T fails the run). */
#include "ir/ops/ops.h"

static cuvil_status eye_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim != 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; EyeLike takes 2", x->name, x->ndim);
    cir_dtype t = cir_attr_has(n, "dtype") ? (cir_dtype)cir_attr_int(n, "dtype") : x->dtype;
    if (!cir_dtype_size(t)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output type %s", cir_dtype_name(t));
    const cir_dim *dx[2] = {cir_dimx(g, x, 0), cir_dimx(g, x, 1)};
    cir_set_shape_x(cir_out(g, n, 0), t, 2, dx);
    return CUVIL_OK;
}

static const cir_attr_spec eye_attrs[] = {
    {"dtype", CIR_ATTR_DTYPE, CIR_UNDEF, 0, NULL, false},
    {"k", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_eye_like = {"eye_like", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, eye_attrs, eye_infer, NULL, NULL, 0};

static cuvil_status lrn_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; LRN takes [N, C, ...]", x->name, x->ndim);
    if (cir_attr_int(n, "size") < 1) return cir_node_err(g, n, CUVIL_ERR_MODEL, "size must be at least 1");
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, x->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec lrn_attrs[] = {
    {"alpha", CIR_ATTR_FLOAT, 0, 1e-4f, NULL, false},
    {"beta", CIR_ATTR_FLOAT, 0, 0.75f, NULL, false},
    {"bias", CIR_ATTR_FLOAT, 0, 1.0f, NULL, false},
    {"size", CIR_ATTR_INT, 0, 0, NULL, true},
    CIR_ATTR_END,
};
const cir_opdef cir_op_lrn = {"lrn", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, lrn_attrs, lrn_infer, NULL, NULL, 0};

static cuvil_status revseq_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *l = cir_in(g, n, 1);
    int64_t ta = cir_attr_int(n, "time_axis"), ba = cir_attr_int(n, "batch_axis");
    if (x->ndim < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "time_axis %lld and batch_axis %lld must be 0 and 1 of a rank >= 2 input",
                            (long long)ta, (long long)ba);
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    if (l->dtype != CIR_I64 || l->ndim != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "sequence_lens '%s' must be a 1-D int64 tensor", l->name);
    if ((s = cir_require_eq(g, n, cir_dimx(g, l, 0), cir_dimx(g, x, (int)ba), "sequence_lens's length and the batch")))
        return s;
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec revseq_attrs[] = {
    {"time_axis", CIR_ATTR_INT, 0, 0, NULL, false},
    {"batch_axis", CIR_ATTR_INT, 1, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_reverse_sequence = {"reverse_sequence", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, revseq_attrs, revseq_infer,
                                           NULL, NULL, 0};
