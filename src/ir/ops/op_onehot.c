/* op_onehot.c -- onehot (indices, depth, values; axis): values[1] where an index (negative ones
 * counting from the end) equals the position along a new axis of size depth, values[0]
 * elsewhere (cuvil_onehot_t). indices of any numeric type (floats truncated, as ONNX Runtime
 * casts them), depth one number, constant or read when the model runs -- then a size the node
 * finds, bounded by the declared output or a --dim naming it --, values two elements of any
 * type. */
#include "ir/ops/ops.h"

/* The checks, the new axis, and the indices' layout around it as expressions. */
static cuvil_status onehot_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **inner) {
    cuvil_status s = op_check_arity(g, n, 3, 3, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *d = cir_in(g, n, 1), *v = cir_in(g, n, 2);
    if (x->dtype == CIR_BOOL || !cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, false);
    if (d->dtype == CIR_BOOL || !cir_dtype_size(d->dtype) || !cir_value_fixed(d) || cir_numel(d) != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "depth '%s' must be one number", d->name);
    if (!cir_dtype_size(v->dtype) || !cir_value_fixed(v) || cir_numel(v) != 2)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "values '%s' must hold two elements (off, on)", v->name);
    if (x->ndim >= CIR_MAX_DIMS)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "indices '%s' has rank %d; the output's would pass %d", x->name,
                            x->ndim, CIR_MAX_DIMS);
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim + 1, "axis", axis))) return s;
    cir_dimtab *t = &g->dt;
    *outer = *inner = cir_dim_const(t, 1);
    for (int i = 0; i < x->ndim; i++) {
        if (i < *axis) *outer = cir_dim_mul(t, *outer, cir_dimx(g, x, i));
        else *inner = cir_dim_mul(t, *inner, cir_dimx(g, x, i));
    }
    return *outer && *inner ? CUVIL_OK : cir_dim_err(g, n, "the indices' layout");
}

cuvil_status op_onehot_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **inner) {
    return onehot_layout(g, n, axis, outer, inner);
}

static cuvil_status onehot_infer(cir_graph *g, cir_node *n) {
    int axis;
    const cir_dim *outer, *inner, *depth, *dx[CIR_MAX_DIMS];
    cuvil_status s = onehot_layout(g, n, &axis, &outer, &inner);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *d = cir_in(g, n, 1);
    if (cir_is_const(d)) {
        double dv = cir_dtype_is_float(d->dtype) ? cir_const_f64(d, 0) : (double)cir_const_i64(d, 0);
        if (!(dv >= 1) || dv > (double)g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "depth %g is under 1, not a number or over the limit dim", dv);
        depth = cir_dim_const(&g->dt, cir_dtype_is_float(d->dtype) ? (int64_t)dv : cir_const_i64(d, 0));
    } else if ((s = op_found_dim(g, n, 0, axis, 0, -1, false, &depth))) {
        return s;
    }
    for (int i = 0, j = 0; i <= x->ndim; i++) dx[i] = i == axis ? depth : cir_dimx(g, x, j++);
    cir_set_shape_x(cir_out(g, n, 0), cir_in(g, n, 2)->dtype, x->ndim + 1, dx);
    return CUVIL_OK;
}

static const cir_attr_spec onehot_attrs[] = {{"axis", CIR_ATTR_INT, -1, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_onehot = {"onehot", CIR_OPF_SYM_DIMS, 3, 3, 1, 1, onehot_attrs, onehot_infer, NULL, NULL, 0};
