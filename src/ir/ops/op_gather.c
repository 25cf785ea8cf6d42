/* op_gather.c -- gather along one axis, any element type. Constant indices are checked and
 * normalised at compile time (non-negative int64 in the weights); run-time ones (int32 or
 * int64) are checked by the kernel, and one out of range is an error from run. */
#include "ir/ops/ops.h"

#include <string.h>

/* The kernel view [outer, axis_len, nb_inner] of the data and the axis. */
cuvil_status op_gather_params(cir_graph *g, cir_node *n, int *axis, cuvil_gather_params *p) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    cuvil_status s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis);
    if (s) return s;
    memset(p, 0, sizeof *p);
    p->outer = 1;
    p->axis_len = x->dims[*axis];
    p->nb_inner = (int64_t)cir_dtype_size(x->dtype);
    for (int d = 0; d < *axis; d++) p->outer *= x->dims[d];
    for (int d = *axis + 1; d < x->ndim; d++) p->nb_inner *= x->dims[d];
    p->n_idx = cir_numel(idx);
    return CUVIL_OK;
}

/* The constant indices made non-negative, in a malloc'd array the caller frees; NULL after an
 * error (an index out of range, or out of memory). */
int64_t *op_gather_indices(cir_graph *g, cir_node *n, const cuvil_gather_params *p) {
    cir_value *idx = cir_in(g, n, 1);
    int64_t *out = cuvil_malloc(sizeof(int64_t) * (size_t)(p->n_idx + 1));
    if (!out) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < p->n_idx; i++) {
        int64_t v = cir_const_i64(idx, i), w = v < 0 ? v + p->axis_len : v;
        if (w < 0 || w >= p->axis_len) {
            cir_node_err(g, n, CUVIL_ERR_MODEL, "index %lld (element %lld of '%s') is out of range for an axis of size %lld",
                         (long long)v, (long long)i, idx->name, (long long)p->axis_len);
            cuvil_free(out);
            return NULL;
        }
        out[i] = w;
    }
    return out;
}

static cuvil_status gather_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    if (idx->dtype != CIR_I64 && idx->dtype != CIR_I32)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "indices '%s' must be int32 or int64, not %s", idx->name,
                            cir_dtype_name(idx->dtype));
    if (cir_dtype_size(x->dtype) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    int axis;
    cuvil_gather_params p;
    if ((s = op_gather_params(g, n, &axis, &p))) return s;
    int r = x->ndim - 1 + idx->ndim;
    if (r > CIR_MAX_DIMS)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the output would have rank %d; at most %d is supported", r,
                            CIR_MAX_DIMS);
    const cir_dim *dx[CIR_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < axis; d++) dx[nd++] = cir_dimx(g, x, d);
    for (int d = 0; d < idx->ndim; d++) dx[nd++] = cir_dimx(g, idx, d);
    for (int d = axis + 1; d < x->ndim; d++) dx[nd++] = cir_dimx(g, x, d);
    for (int d = 0; d < nd; d++)
        if (!dx[d]) return cir_dim_err(g, n, "the output's dims");
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, nd, dx);
    if (!cir_is_const(idx)) return CUVIL_OK;   /* checked by the kernel at run time */
    if (x->dx[axis]) return CUVIL_OK;   /* a symbolic axis: checked and normalised when the model runs */
    int64_t *norm = op_gather_indices(g, n, &p);   /* validates every index now */
    if (!norm) return g->ctx->status;
    cuvil_free(norm);
    return CUVIL_OK;
}

static cuvil_status gather_fold(cir_graph *g, cir_node *n) {
    int axis;
    cuvil_gather_params p;
    cuvil_status s = op_gather_params(g, n, &axis, &p);
    if (s) return s;
    int64_t *idx = op_gather_indices(g, n, &p);
    if (!idx) return g->ctx->status;
    cir_value *y = cir_out(g, n, 0);
    if (cir_value_make_const(g, y)) cuvil_gather(&p, idx, cir_in(g, n, 0)->data, y->data);
    cuvil_free(idx);
    return y->data ? CUVIL_OK : g->ctx->status;
}

static const cir_attr_spec gather_attrs[] = {{"axis", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_gather = {"gather", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, gather_attrs, gather_infer, gather_fold, NULL, 0};
