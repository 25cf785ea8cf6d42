/* op_arg.c -- argmax and argmin along one axis (keepdims, select_last_index), int64 indices,
 * any numeric element type, at run time and folded by the one kernel. */
#include "ir/ops/ops.h"

#include <string.h>

cuvil_status op_arg_params(cir_graph *g, cir_node *n, cuvil_arg_params *p, int *axis) {
    cir_value *x = cir_in(g, n, 0);
    cuvil_status s = op_need_typed(g, n, 0, false);
    if (s) return s;
    if (x->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is a scalar; it needs an axis", x->name);
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis))) return s;
    if (x->dims[*axis] == 0 && cir_numel(x) == 0 && x->ndim > 0) {
        int64_t rest = 1;
        for (int d = 0; d < x->ndim; d++)
            if (d != *axis) rest *= x->dims[d];
        if (rest) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis %d of '%s' is empty: no index to return", *axis, x->name);
    }
    memset(p, 0, sizeof *p);
    p->outer = p->inner = 1;
    p->axis_len = x->dims[*axis];
    for (int d = 0; d < *axis; d++) p->outer *= x->dims[d];
    for (int d = *axis + 1; d < x->ndim; d++) p->inner *= x->dims[d];
    p->is_min = n->kind == CIR_OP_ARGMIN;
    p->select_last = cir_attr_int(n, "select_last_index") != 0;
    return CUVIL_OK;
}

static cuvil_status arg_infer(cir_graph *g, cir_node *n) {
    cuvil_arg_params p;
    int axis;
    cuvil_status s = op_arg_params(g, n, &p, &axis);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->dx[axis] && x->dx[axis]->lo < 1)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "axis %d of '%s' may be empty: no index to return", axis, x->name);
    const cir_dim *dx[CIR_MAX_DIMS];
    int nd = 0;
    bool keep = cir_attr_int(n, "keepdims") != 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != axis) dx[nd++] = cir_dimx(g, x, d);
        else if (keep) dx[nd++] = cir_dim_const(&g->dt, 1);
    }
    for (int d = 0; d < nd; d++)
        if (!dx[d]) return cir_dim_err(g, n, "the output's dims");
    cir_set_shape_x(cir_out(g, n, 0), CIR_I64, nd, dx);
    return CUVIL_OK;
}

static cuvil_status arg_fold(cir_graph *g, cir_node *n) {
    cuvil_arg_params p;
    int axis;
    cuvil_status s = op_arg_params(g, n, &p, &axis);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_argmax_t(&p, x->dtype, x->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec arg_attrs[] = {
    {"axis", CIR_ATTR_INT, 0, 0, NULL, false},
    {"keepdims", CIR_ATTR_INT, 1, 0, NULL, false},
    {"select_last_index", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_argmax = {"argmax", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, arg_attrs, arg_infer, arg_fold, NULL, 0};
const cir_opdef cir_op_argmin = {"argmin", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, arg_attrs, arg_infer, arg_fold, NULL, 0};
