/* op_unique.c -- unique (x; axis, sorted): the distinct elements of x (or, with an axis, its
 * distinct slices along it), sorted or in order of first occurrence, with their first
 * occurrences, each element's (slice's) position among them and their counts
 * (cuvil_unique_t). Any element type. The count is a size the kernel finds, at most the
 * number of elements (slices). */
#include "ir/ops/ops.h"

/* The checks, and x as [outer, n, inner] around the axis (without one: [1, numel, 1]). */
static cuvil_status unique_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **len,
                                  const cir_dim **inner) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 4);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, true);
    cir_dimtab *t = &g->dt;
    *axis = -1;
    *outer = *inner = cir_dim_const(t, 1);
    *len = cir_numel_x(g, x);
    if (cir_attr_has(n, "axis")) {
        if (x->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_MODEL, "has an axis, but input '%s' is a scalar", x->name);
        if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis))) return s;
        *len = cir_dimx(g, x, *axis);
        for (int d = 0; d < x->ndim; d++) {
            if (d < *axis) *outer = cir_dim_mul(t, *outer, cir_dimx(g, x, d));
            if (d > *axis) *inner = cir_dim_mul(t, *inner, cir_dimx(g, x, d));
        }
    }
    return *outer && *inner && *len ? CUVIL_OK : cir_dim_err(g, n, "the input's layout");
}

cuvil_status op_unique_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **len,
                              const cir_dim **inner) {
    return unique_layout(g, n, axis, outer, len, inner);
}

static cuvil_status unique_infer(cir_graph *g, cir_node *n) {
    int axis;
    const cir_dim *outer, *len, *inner, *count, *dx[CIR_MAX_DIMS];
    cuvil_status s = unique_layout(g, n, &axis, &outer, &len, &inner);
    if (s || (s = op_found_dim(g, n, 0, axis < 0 ? 0 : axis, 0, len->hi, false, &count))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (axis < 0) {
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, 1, &count);
    } else {
        for (int d = 0; d < x->ndim; d++) dx[d] = d == axis ? count : cir_dimx(g, x, d);
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    }
    for (int i = 1; i < n->n_out; i++)
        if (n->out[i] >= 0) cir_set_shape_x(cir_out(g, n, i), CIR_I64, 1, i == 2 ? &len : &count);
    return CUVIL_OK;
}

static const cir_attr_spec unique_attrs[] = {{"axis", CIR_ATTR_INT, 0, 0, NULL, false},
                                             {"sorted", CIR_ATTR_INT, 1, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_unique = {"unique", CIR_OPF_SYM_DIMS, 1, 1, 1, 4, unique_attrs, unique_infer, NULL, NULL, 0};
