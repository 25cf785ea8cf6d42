/* op_reshape.c -- ops that only reinterpret the bytes of their input: reshape, flatten,
 * squeeze, unsqueeze, identity. Codegen shares the input's storage (CIR_OPF_ALIAS) or copies
 * when it cannot. */
#include "ir/ops/ops.h"

#include <string.h>

static cuvil_status set_out(cir_graph *g, cir_node *n, int ndim, const int64_t *dims) {
    cir_value *x = cir_in(g, n, 0);
    int64_t cnt = 1;
    bool ovf = false;
    for (int i = 0; i < ndim; i++) cnt = cuvil_i64_mul(&ovf, cnt, dims[i]);
    if (ovf || cnt != cir_numel(x)) {
        if (ovf)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot reshape '%s' (%lld elements): the target shape's product "
                                "overflows", x->name, (long long)cir_numel(x));
        char sx[256];
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot reshape '%s' %s (%lld elements) to %lld elements", x->name,
                            cir_shape_str(g, x, sx, sizeof sx), (long long)cir_numel(x), (long long)cnt);
    }
    cir_set_shape(cir_out(g, n, 0), x->dtype, ndim, dims);
    return CUVIL_OK;
}

static cuvil_status reshape_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t shape[CIR_MAX_DIMS], dims[CIR_MAX_DIMS];
    int cnt;
    if ((s = op_const_ints(g, n, 1, "shape", shape, CIR_MAX_DIMS, &cnt))) return s;
    bool allowzero = cir_attr_int(n, "allowzero") != 0;
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < cnt; i++) {
        if (shape[i] == -1) {
            if (infer_at >= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (shape[i] == 0 && !allowzero) {
            if (i >= x->ndim) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "shape[%d]=0 but the input has rank %d", i, x->ndim);
            dims[i] = x->dims[i];
        } else if (shape[i] < 0) {
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape[%d]=%lld is invalid", i, (long long)shape[i]);
        } else {
            dims[i] = shape[i];
        }
        if (__builtin_mul_overflow(known, dims[i], &known))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "shape's product overflows (at shape[%d]=%lld)", i, (long long)dims[i]);
    }
    if (infer_at >= 0) {
        if (known == 0 || cir_numel(x) % known)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot infer the -1 dim: %lld elements into blocks of %lld",
                                (long long)cir_numel(x), (long long)known);
        dims[infer_at] = cir_numel(x) / known;
    }
    return set_out(g, n, cnt, dims);
}

static cuvil_status flatten_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t axis = cir_attr_int(n, "axis");
    if (axis < -x->ndim || axis > x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis=%lld out of range for rank %d", (long long)axis, x->ndim);
    if (axis < 0) axis += x->ndim;
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < x->ndim; i++) dims[i < axis ? 0 : 1] *= x->dims[i];
    return set_out(g, n, 2, dims);
}

/* Axes from the optional input 1 (-1: absent). */
static cuvil_status get_axes(cir_graph *g, cir_node *n, int64_t *axes, int *cnt) {
    *cnt = -1;
    if (!cir_in(g, n, 1)) return CUVIL_OK;
    return op_const_ints(g, n, 1, "axes", axes, CIR_MAX_DIMS, cnt);
}

static cuvil_status squeeze_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t axes[CIR_MAX_DIMS], dims[CIR_MAX_DIMS];
    int cnt, nd = 0;
    if ((s = get_axes(g, n, axes, &cnt))) return s;
    bool drop[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < cnt; i++) {
        int ax;
        if ((s = op_axis(g, n, axes[i], x->ndim, "axes", &ax))) return s;
        if (x->dims[ax] != 1)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot squeeze axis %d of '%s': its size is %lld", ax, x->name,
                                (long long)x->dims[ax]);
        drop[ax] = true;
    }
    for (int i = 0; i < x->ndim; i++)
        if (!(cnt < 0 ? x->dims[i] == 1 : drop[i])) dims[nd++] = x->dims[i];
    return set_out(g, n, nd, dims);
}

static cuvil_status unsqueeze_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t axes[CIR_MAX_DIMS], dims[CIR_MAX_DIMS];
    int cnt;
    if ((s = get_axes(g, n, axes, &cnt))) return s;
    if (cnt <= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axes are required");
    int r = x->ndim + cnt;
    if (r > CIR_MAX_DIMS) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "rank %d > %d", r, CIR_MAX_DIMS);
    bool ins[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < cnt; i++) {
        int ax;
        if ((s = op_axis(g, n, axes[i], r, "axes", &ax))) return s;
        if (ins[ax]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d repeated", ax);
        ins[ax] = true;
    }
    for (int i = 0, j = 0; i < r; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
    return set_out(g, n, r, dims);
}

static cuvil_status identity_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    return set_out(g, n, x->ndim, x->dims);
}

static cuvil_status alias_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    memcpy(y->data, x->data, cir_nbytes(x));
    return CUVIL_OK;
}

static const cir_attr_spec reshape_attrs[] = {{"allowzero", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec flatten_attrs[] = {{"axis", CIR_ATTR_INT, 1, 0, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_reshape = {"reshape", CIR_OPF_ALIAS, 2, 2, 1, 1, reshape_attrs, reshape_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_flatten = {"flatten", CIR_OPF_ALIAS, 1, 1, 1, 1, flatten_attrs, flatten_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_squeeze = {"squeeze", CIR_OPF_ALIAS, 1, 2, 1, 1, NULL, squeeze_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_unsqueeze = {"unsqueeze", CIR_OPF_ALIAS, 2, 2, 1, 1, NULL, unsqueeze_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_identity = {"identity", CIR_OPF_ALIAS, 1, 1, 1, 1, NULL, identity_infer, alias_fold, NULL, 0};
