/* op_nonzero.c -- the ops whose output size is a count of their input's values, a size the run
 * finds (cir_rt_sym): memory is planned for its upper bound, and the nodes after them compute
 * their sizes from the count the kernel returns. Constant inputs fold, the count then a number.
 *   nonzero (x): the indices of x's non-zero elements, int64 [rank, count], count in
 *     0..numel(x); any element type, x with a dim.
 *   compress (x, condition; axis): the slices of x along axis (or its elements, flattened,
 *     without one) where the bool condition is true, count in 0..len(condition), which must
 *     not exceed the axis (ONNX Runtime's rule). */
#include "ir/ops/ops.h"

static cuvil_status nonzero_check(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, true);
    if (x->ndim < 1)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is a scalar (nonzero of a scalar is not supported)",
                            x->name);
    return CUVIL_OK;
}

static cuvil_status nonzero_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = nonzero_check(g, n);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (cir_is_const(x)) {   /* folds: the count is known now */
        int64_t dims[2] = {x->ndim, cuvil_nonzero_count(x->dtype, x->data, cir_numel(x))};
        cir_set_shape(cir_out(g, n, 0), CIR_I64, 2, dims);
        return CUVIL_OK;
    }
    const cir_dim *dx[2] = {cir_dim_const(&g->dt, x->ndim), cir_rt_sym(g, n, cir_numel(x), "count")};
    if (!dx[1]) return g->ctx->status;
    cir_set_shape_x(cir_out(g, n, 0), CIR_I64, 2, dx);
    return CUVIL_OK;
}

static cuvil_status nonzero_fold(cir_graph *g, cir_node *n) {
    cuvil_status s = nonzero_check(g, n);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (cuvil_nonzero(x->dtype, x->data, x->ndim, x->dims, y->data) != y->dims[1])
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "the kernel's count differs from shape inference's");
    return CUVIL_OK;
}

/* ===== compress ============================================================================ */
/* The checks (the condition's length within the axis: a guard where not proved), and the
 * layout of x around the axis (outer, axis_len, inner elements) as expressions. */
static cuvil_status compress_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **axis_len,
                                    const cir_dim **inner) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *c = cir_in(g, n, 1);
    if (!cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, true);
    if (c->dtype != CIR_BOOL || c->ndim != 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "condition '%s' must be a 1-D bool tensor", c->name);
    cir_dimtab *t = &g->dt;
    *axis = -1;
    *outer = *inner = cir_dim_const(t, 1);
    *axis_len = cir_numel_x(g, x);
    if (cir_attr_has(n, "axis")) {
        if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis))) return s;
        *axis_len = cir_dimx(g, x, *axis);
        for (int d = 0; d < *axis; d++) *outer = cir_dim_mul(t, *outer, cir_dimx(g, x, d));
        for (int d = *axis + 1; d < x->ndim; d++) *inner = cir_dim_mul(t, *inner, cir_dimx(g, x, d));
    }
    if (!*outer || !*inner || !*axis_len) return cir_dim_err(g, n, "the input's layout");
    return cir_require_le(g, n, cir_dimx(g, c, 0), *axis_len, "the condition's length within the axis");
}

static cuvil_status compress_infer(cir_graph *g, cir_node *n) {
    int axis;
    const cir_dim *outer, *axis_len, *inner;
    cuvil_status s = compress_layout(g, n, &axis, &outer, &axis_len, &inner);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *c = cir_in(g, n, 1);
    const cir_dim *count;
    if (cir_is_const(c)) {
        int64_t k = 0;
        for (int64_t i = 0; i < cir_numel(c); i++) k += ((const uint8_t *)c->data)[i] != 0;
        count = cir_dim_const(&g->dt, k);
    } else {
        count = cir_rt_sym(g, n, c->dims[0], "count");
        if (!count) return g->ctx->status;
    }
    const cir_dim *dx[CIR_MAX_DIMS];
    if (axis < 0) {
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, 1, &count);
        return CUVIL_OK;
    }
    for (int d = 0; d < x->ndim; d++) dx[d] = d == axis ? count : cir_dimx(g, x, d);
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    return CUVIL_OK;
}

/* The kernel's numbers with fixed dims (a fold). */
static cuvil_status compress_fold(cir_graph *g, cir_node *n) {
    int axis;
    const cir_dim *outer, *axis_len, *inner;
    cuvil_status s = compress_layout(g, n, &axis, &outer, &axis_len, &inner);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *c = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    if (!cir_dim_is_const(outer) || !cir_dim_is_const(axis_len) || !cir_dim_is_const(inner))
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "folded with symbolic dims");
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int64_t k = cuvil_compress(x->data, c->data, outer->c, axis_len->c, c->dims[0],
                               inner->c * (int64_t)cir_dtype_size(x->dtype), y->data);
    if (k != (axis < 0 ? y->dims[0] : y->dims[axis]))
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "the kernel's count differs from shape inference's");
    return CUVIL_OK;
}

cuvil_status op_compress_layout(cir_graph *g, cir_node *n, const cir_dim **outer, const cir_dim **axis_len,
                                const cir_dim **inner) {
    int axis;
    return compress_layout(g, n, &axis, outer, axis_len, inner);
}

static const cir_attr_spec compress_attrs[] = {{"axis", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_compress = {"compress", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, compress_attrs, compress_infer, compress_fold,
                                   NULL, 0};

const cir_opdef cir_op_nonzero = {"nonzero", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, nonzero_infer, nonzero_fold, NULL, 0};
