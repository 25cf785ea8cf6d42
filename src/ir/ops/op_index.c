/* op_index.c -- gather_elements, scatter_elements (data, indices, [updates]; axis, reduction),
 * gather_nd (batch_dims) and scatter_nd (reduction): indexing with run-time data, any element
 * type. Indices out of range are an error from the compiled model's run (the kernels check
 * every index first), or from the compiler when they are constant and the op folds. */
#include "ir/ops/ops.h"

#include <string.h>

static const char *const reductions[] = {"none", "add", "mul", "max", "min", NULL};   /* ORDER: CUVIL_SCATTER_* */

static bool is_scatter(const cir_node *n) { return n->kind == CIR_OP_SCATTER_ELEMENTS || n->kind == CIR_OP_SCATTER_ND; }

static cuvil_status need_index_type(cir_graph *g, cir_node *n, const cir_value *idx, bool int32_ok) {
    if (idx->dtype == CIR_I64 || (int32_ok && idx->dtype == CIR_I32)) return CUVIL_OK;
    return cir_node_err(g, n, CUVIL_ERR_DTYPE, "indices '%s' must be %s, not %s", idx->name,
                        int32_ok ? "int32 or int64" : "int64", cir_dtype_name(idx->dtype));
}

/* ===== gather_elements, scatter_elements ==================================================== */
/* The checks and fields of gather/scatter_elements that do not depend on the dims. */
static cuvil_status elements_common(cir_graph *g, cir_node *n, cuvil_elements_params *p) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    memset(p, 0, sizeof *p);
    cuvil_status s;
    if ((s = need_index_type(g, n, idx, true))) return s;
    if (!cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, true);
    if (x->ndim < 1 || idx->ndim != x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "indices '%s' have rank %d; data '%s' has rank %d (they must agree, >= 1)",
                            idx->name, idx->ndim, x->name, x->ndim);
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &p->axis))) return s;
    p->ndim = x->ndim;
    p->elem_size = (int64_t)cir_dtype_size(x->dtype);
    p->reduction = is_scatter(n) ? (int)cir_attr_int(n, "reduction") : 0;
    return CUVIL_OK;
}

cuvil_status op_elements_params(cir_graph *g, cir_node *n, cuvil_elements_params *p) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    cuvil_status s = elements_common(g, n, p);
    if (s) return s;
    int axis = p->axis;
    for (int d = 0; d < x->ndim; d++)
        if (d != axis && idx->dims[d] > x->dims[d])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "indices '%s' dim %d is %lld, larger than data '%s' (%lld)", idx->name,
                                d, (long long)idx->dims[d], x->name, (long long)x->dims[d]);
    if (cir_numel(idx) > 0 && x->dims[axis] == 0)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "data '%s' has no elements along axis %d to index", x->name, axis);
    for (int d = 0; d < x->ndim; d++) {
        p->dims[d] = idx->dims[d];
        p->data_dims[d] = x->dims[d];
    }
    if (is_scatter(n)) {
        cir_value *u = cir_in(g, n, 2);
        if (u->dtype != x->dtype || u->ndim != idx->ndim || memcmp(u->dims, idx->dims, sizeof(int64_t) * (size_t)idx->ndim)) {
            char a[256], b[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "updates '%s' %s must have the indices' shape and the data's type "
                                "(indices %s)", u->name, cir_shape_str(g, u, a, sizeof a), cir_shape_str(g, idx, b, sizeof b));
        }
    }
    return CUVIL_OK;
}

/* gather_elements / scatter_elements with symbolic dims: the checks of op_elements_params on
 * expressions (an index dim within the data's, the updates' dims equal to the indices': proved
 * or checked when the model runs) and the fields that do not depend on dims. */
cuvil_status op_elements_x(cir_graph *g, cir_node *n, cuvil_elements_params *p) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    cuvil_status s = elements_common(g, n, p);
    if (s) return s;
    for (int d = 0; d < x->ndim; d++)
        if (d != p->axis &&
            (s = cir_require_le(g, n, cir_dimx(g, idx, d), cir_dimx(g, x, d), "an indices dim within the data's")))
            return s;
    if (is_scatter(n)) {
        cir_value *u = cir_in(g, n, 2);
        if (u->dtype != x->dtype || u->ndim != idx->ndim)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "updates '%s' must have the indices' rank and the data's type", u->name);
        for (int d = 0; d < u->ndim; d++)
            if ((s = cir_require_eq(g, n, cir_dimx(g, u, d), cir_dimx(g, idx, d), "the dims of updates and indices"))) return s;
    }
    return CUVIL_OK;
}

static cuvil_status elements_infer(cir_graph *g, cir_node *n) {
    cuvil_elements_params p;
    bool sym = !cir_value_fixed(cir_in(g, n, 0)) || !cir_value_fixed(cir_in(g, n, 1)) ||
               (is_scatter(n) && !cir_value_fixed(cir_in(g, n, 2)));
    cuvil_status s = sym ? op_elements_x(g, n, &p) : op_elements_params(g, n, &p);
    if (s) return s;
    cir_value *src = is_scatter(n) ? cir_in(g, n, 0) : cir_in(g, n, 1);
    cir_set_shape_like(cir_out(g, n, 0), cir_in(g, n, 0)->dtype, src);
    return CUVIL_OK;
}

static cuvil_status index_error(cir_graph *g, cir_node *n) {
    return cir_node_err(g, n, CUVIL_ERR_MODEL, "an index in '%s' is out of range for its axis", cir_in(g, n, 1)->name);
}

static cuvil_status elements_fold(cir_graph *g, cir_node *n) {
    cuvil_elements_params p;
    cuvil_status s = op_elements_params(g, n, &p);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int bad = is_scatter(n) ? cuvil_scatter_elements(&p, x->dtype, idx->dtype, idx->data, cir_in(g, n, 2)->data, x->data, y->data)
                            : cuvil_gather_elements(&p, idx->dtype, idx->data, x->data, y->data);
    return bad ? index_error(g, n) : CUVIL_OK;
}

/* ===== gather_nd, scatter_nd ================================================================= */
/* The checks of gather_nd / scatter_nd that do not depend on the dims; batch_dims into *b. */
static cuvil_status nd_common(cir_graph *g, cir_node *n, int64_t *b) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    cuvil_status s;
    if ((s = need_index_type(g, n, idx, false))) return s;
    if (!cir_dtype_size(x->dtype)) return op_need_typed(g, n, 0, true);
    *b = is_scatter(n) ? 0 : cir_attr_int(n, "batch_dims");
    if (x->ndim < 1 || idx->ndim < 1)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "data and indices must have rank >= 1");
    if (*b < 0 || *b >= idx->ndim || *b >= x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "batch_dims=%lld must be below the ranks of data (%d) and indices (%d)",
                            (long long)*b, x->ndim, idx->ndim);
    return CUVIL_OK;
}

cuvil_status op_nd_params(cir_graph *g, cir_node *n, cuvil_nd_params *p, int *ndim, int64_t *dims) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    memset(p, 0, sizeof *p);
    cuvil_status s;
    int64_t b;
    if ((s = nd_common(g, n, &b))) return s;
    int64_t k = idx->dims[idx->ndim - 1];
    if (k < 1 || k > x->ndim - b)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "indices '%s' tuples have %lld coordinates; data '%s' has %lld indexable dims",
                            idx->name, (long long)k, x->name, (long long)(x->ndim - b));
    p->n_batch = p->n_idx = p->slice_elems = 1;
    p->k = k;
    p->elem_size = (int64_t)cir_dtype_size(x->dtype);
    for (int d = 0; d < b; d++) {
        if (idx->dims[d] != x->dims[d])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "batch dim %d is %lld in indices and %lld in data", d,
                                (long long)idx->dims[d], (long long)x->dims[d]);
        p->n_batch *= x->dims[d];
    }
    for (int d = (int)b; d < idx->ndim - 1; d++) p->n_idx *= idx->dims[d];
    for (int64_t d = 0; d < k; d++) p->data_dims[d] = x->dims[b + d];
    for (int d = (int)(b + k); d < x->ndim; d++) p->slice_elems *= x->dims[d];
    for (int64_t d = 0; d < k; d++)
        if (x->dims[b + d] == 0 && p->n_batch * p->n_idx > 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "data '%s' has no elements along dim %lld to index", x->name,
                                (long long)(b + d));
    /* gather's output / scatter's updates: indices.shape[:-1] + data.shape[b+k:] */
    int nd = 0;
    for (int d = 0; d < idx->ndim - 1; d++) dims[nd++] = idx->dims[d];
    for (int d = (int)(b + k); d < x->ndim; d++) {
        if (nd == CIR_MAX_DIMS)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the result would have rank over %d", CIR_MAX_DIMS);
        dims[nd++] = x->dims[d];
    }
    *ndim = nd;
    if (is_scatter(n)) {
        p->reduction = (int)cir_attr_int(n, "reduction");
        cir_value *u = cir_in(g, n, 2);
        if (u->dtype != x->dtype || u->ndim != nd || memcmp(u->dims, dims, sizeof(int64_t) * (size_t)nd)) {
            char a[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "updates '%s' %s must be indices.shape[:-1] + data.shape[k:] in the "
                                "data's type", u->name, cir_shape_str(g, u, a, sizeof a));
        }
    }
    return CUVIL_OK;
}

/* gather_nd / scatter_nd with the dims as expressions (symbolic data, indices or updates): the
 * checks and counts of op_nd_params, and gather's output dims (scatter's are the data's). The
 * coordinates per index (k) must be fixed. */
cuvil_status op_nd_x(cir_graph *g, cir_node *n, op_nd_xparams *p, int64_t *k_out, int *ndim, const cir_dim **dx) {
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1);
    cuvil_status s;
    int64_t b;
    if ((s = nd_common(g, n, &b))) return s;
    if (idx->dx[idx->ndim - 1])
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the last dim of indices '%s' is symbolic", idx->name);
    int64_t k = idx->dims[idx->ndim - 1];
    if (k < 1 || k > x->ndim - b)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "indices '%s' tuples have %lld coordinates; data '%s' has %lld indexable dims",
                            idx->name, (long long)k, x->name, (long long)(x->ndim - b));
    if (idx->ndim - 1 + x->ndim - b - k > CIR_MAX_DIMS)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the result would have rank over %d", CIR_MAX_DIMS);
    cir_dimtab *t = &g->dt;
    p->n_batch = p->n_idx = p->slice_elems = cir_dim_const(t, 1);
    for (int d = 0; d < b; d++) {
        if ((s = cir_require_eq(g, n, cir_dimx(g, idx, d), cir_dimx(g, x, d), "the batch dims of indices and data"))) return s;
        p->n_batch = cir_dim_mul(t, p->n_batch, cir_dimx(g, x, d));
    }
    for (int d = (int)b; d < idx->ndim - 1; d++) p->n_idx = cir_dim_mul(t, p->n_idx, cir_dimx(g, idx, d));
    for (int d = 0; d < k; d++) p->data_dims[d] = cir_dimx(g, x, (int)b + d);
    for (int d = (int)(b + k); d < x->ndim; d++) p->slice_elems = cir_dim_mul(t, p->slice_elems, cir_dimx(g, x, d));
    *ndim = 0;
    for (int d = 0; d < idx->ndim - 1; d++) dx[(*ndim)++] = cir_dimx(g, idx, d);
    for (int d = (int)(b + k); d < x->ndim; d++) dx[(*ndim)++] = cir_dimx(g, x, d);
    for (int d = 0; d < *ndim; d++)
        if (!dx[d]) return cir_dim_err(g, n, "the output's dims");
    for (int d = 0; d < k; d++)
        if (!p->data_dims[d]) return cir_dim_err(g, n, "the data's dims");
    if (!p->n_batch || !p->n_idx || !p->slice_elems) return cir_dim_err(g, n, "the sizes");
    if (is_scatter(n)) {   /* updates: indices.shape[:-1] + data.shape[k:] */
        cir_value *u = cir_in(g, n, 2);
        if (u->dtype != x->dtype || u->ndim != *ndim)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "updates '%s' must have rank %d (indices.shape[:-1] + data.shape[k:]) "
                                "and the data's type", u->name, *ndim);
        for (int d = 0; d < *ndim; d++)
            if ((s = cir_require_eq(g, n, cir_dimx(g, u, d), dx[d], "the updates' dims and indices.shape[:-1] + data.shape[k:]")))
                return s;
    }
    *k_out = k;
    return CUVIL_OK;
}

static cuvil_status nd_infer(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    if (!cir_value_fixed(x) || !cir_value_fixed(cir_in(g, n, 1)) || (is_scatter(n) && !cir_value_fixed(cir_in(g, n, 2)))) {
        op_nd_xparams px;
        int nd;
        int64_t k;
        const cir_dim *dx[CIR_MAX_DIMS];
        cuvil_status s = op_nd_x(g, n, &px, &k, &nd, dx);
        if (s) return s;
        if (is_scatter(n)) cir_set_shape_like(cir_out(g, n, 0), x->dtype, x);
        else cir_set_shape_x(cir_out(g, n, 0), x->dtype, nd, dx);
        return CUVIL_OK;
    }
    cuvil_nd_params p;
    int nd;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_nd_params(g, n, &p, &nd, dims);
    if (s) return s;
    if (is_scatter(n)) cir_set_shape(cir_out(g, n, 0), x->dtype, x->ndim, x->dims);
    else cir_set_shape(cir_out(g, n, 0), x->dtype, nd, dims);
    return CUVIL_OK;
}

static cuvil_status nd_fold(cir_graph *g, cir_node *n) {
    cuvil_nd_params p;
    int nd;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_nd_params(g, n, &p, &nd, dims);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *idx = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int bad = is_scatter(n) ? cuvil_scatter_nd(&p, x->dtype, idx->data, cir_in(g, n, 2)->data, x->data, y->data)
                            : cuvil_gather_nd(&p, idx->data, x->data, y->data);
    return bad ? index_error(g, n) : CUVIL_OK;
}

static const cir_attr_spec gather_elements_attrs[] = {{"axis", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec scatter_elements_attrs[] = {
    {"axis", CIR_ATTR_INT, 0, 0, NULL, false},
    {"reduction", CIR_ATTR_ENUM, CUVIL_SCATTER_NONE, 0, reductions, false},
    CIR_ATTR_END,
};
static const cir_attr_spec gather_nd_attrs[] = {{"batch_dims", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec scatter_nd_attrs[] = {
    {"reduction", CIR_ATTR_ENUM, CUVIL_SCATTER_NONE, 0, reductions, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_gather_elements = {"gather_elements", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, gather_elements_attrs, elements_infer,
                                          elements_fold, NULL, 0};
const cir_opdef cir_op_scatter_elements = {"scatter_elements", CIR_OPF_SYM_DIMS, 3, 3, 1, 1, scatter_elements_attrs, elements_infer,
                                           elements_fold, NULL, 0};
const cir_opdef cir_op_gather_nd = {"gather_nd", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, gather_nd_attrs, nd_infer, nd_fold, NULL, 0};
const cir_opdef cir_op_scatter_nd = {"scatter_nd", CIR_OPF_SYM_DIMS, 3, 3, 1, 1, scatter_nd_attrs, nd_infer, nd_fold, NULL, 0};
