/* op_reshape.c -- ops that only reinterpret the bytes of their input: reshape, flatten,
 * squeeze, unsqueeze, identity. Codegen shares the input's storage (CIR_OPF_ALIAS) or copies
 * when it cannot. */
#include "ir/ops/ops.h"

#include <string.h>

/* The output: dims dx[0..ndim), whose product must be the input's element count (proven, or
 * a guard the model checks when it runs). */
static cuvil_status set_out(cir_graph *g, cir_node *n, int ndim, const cir_dim **dx) {
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *cnt = cir_dim_const(&g->dt, 1);
    for (int i = 0; i < ndim; i++) {
        if (!dx[i]) return cir_dim_err(g, n, "the output's dims");
        cnt = cir_dim_mul(&g->dt, cnt, dx[i]);
    }
    const cir_dim *have = cir_numel_x(g, x);
    if (!cnt || !have) return cir_dim_err(g, n, "the element count");
    if (cir_dim_is_const(cnt) && cir_dim_is_const(have) && cnt != have) {
        char sx[256];
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot reshape '%s' %s (%lld elements) to %lld elements", x->name,
                            cir_shape_str(g, x, sx, sizeof sx), (long long)have->c, (long long)cnt->c);
    }
    cuvil_status s = cir_require_eq(g, n, have, cnt, "the element counts of input and output");   /* (in that order) */
    if (s) return s;
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, ndim, dx);
    return CUVIL_OK;
}

static cuvil_status reshape_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *shape[CIR_MAX_DIMS], *dx[CIR_MAX_DIMS];
    int cnt;
    cir_value *sv = cir_in(g, n, 1);
    if (sv && !cir_is_const(sv) && !sv->sval) {
        /* a shape read when the model runs: each output dim is a size the node finds then
         * (cuvil_reshape_dims, by ONNX's rules: 0 copies, -1 is inferred, the product is the
         * input's), at most the input's element count */
        if (sv->ndim != 1 || !cir_value_fixed(sv) || (sv->dtype != CIR_I64 && sv->dtype != CIR_I32))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its shape '%s' is read when the model runs; Cuvil takes "
                                "it as a 1-D int64 tensor of fixed length", sv->name);
        if (sv->dims[0] > CIR_MAX_DIMS)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "shape '%s' has %lld values, at most %d supported", sv->name,
                                (long long)sv->dims[0], CIR_MAX_DIMS);
        const cir_dim *total = cir_numel_x(g, x);
        if (!total) return cir_dim_err(g, n, "the element count");
        cnt = (int)sv->dims[0];
        /* (with no elements a dim may be any size: the count bounds it only when it is > 0) */
        for (int i = 0; i < cnt; i++)
            if ((s = op_found_dim(g, n, 0, i, i, total->hi > 1 ? total->hi : 1, total->lo == 0, &dx[i]))) return s;
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, cnt, dx);
        return CUVIL_OK;
    }
    if (sv && !sv->sval) {
        /* numbers: a product that overflows is refused before any becomes an expression */
        int64_t c[CIR_MAX_DIMS], prod = 1;
        if ((s = op_const_ints(g, n, 1, "shape", c, CIR_MAX_DIMS, &cnt))) return s;
        for (int i = 0; i < cnt; i++)
            if (c[i] > 0 && __builtin_mul_overflow(prod, c[i], &prod))
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "shape's product overflows (at shape[%d]=%lld)", i, (long long)c[i]);
        for (int i = 0; i < cnt; i++)
            if (!(shape[i] = cir_dim_const(&g->dt, c[i])))
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "shape[%d]=%lld is out of range", i, (long long)c[i]);
    } else if ((s = op_sval_ints(g, n, 1, "shape", shape, CIR_MAX_DIMS, &cnt))) {
        return s;
    }
    bool allowzero = cir_attr_int(n, "allowzero") != 0;
    int infer_at = -1;
    const cir_dim *known = cir_dim_const(&g->dt, 1);
    for (int i = 0; i < cnt; i++) {
        const cir_dim *e = shape[i];
        if (!cir_dim_is_const(e)) {
            /* a value known as an expression: the dim itself only if it can never be 0 (which
             * would copy the input's dim) or negative (-1: the inferred dim) */
            if (e->lo < (allowzero ? 0 : 1)) {
                cuvil_sb t = {0};
                cir_dim_print(&t, &g->dt, e);
                s = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "shape[%d] is %s, which may be %s when the model runs", i,
                                 t.s ? t.s : "?", e->lo < 0 ? "negative" : "0");
                cuvil_sb_free(&t);
                return s;
            }
            dx[i] = e;
        } else if (e->c == -1) {
            if (infer_at >= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape has more than one -1");
            infer_at = i;
            continue;
        } else if (e->c == 0 && !allowzero) {
            if (i >= x->ndim) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "shape[%d]=0 but the input has rank %d", i, x->ndim);
            dx[i] = cir_dimx(g, x, i);
        } else if (e->c < 0) {
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape[%d]=%lld is invalid", i, (long long)e->c);
        } else {
            dx[i] = e;
        }
        known = cir_dim_mul(&g->dt, known, dx[i]);
        if (!known)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "shape's product overflows (at shape[%d]): %s", i, cir_dimtab_why(&g->dt));
    }
    if (infer_at >= 0) {
        const cir_dim *total = cir_numel_x(g, x);
        if (cir_dim_is_const(known) && cir_dim_is_const(total) && (known->c == 0 || total->c % known->c))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot infer the -1 dim: %lld elements into blocks of %lld",
                                (long long)total->c, (long long)known->c);
        dx[infer_at] = cir_dim_fdiv(&g->dt, total, known);   /* exact: set_out checks the product */
        if (!dx[infer_at]) return cir_dim_err(g, n, "the -1 dim");
    }
    return set_out(g, n, cnt, dx);
}

static cuvil_status flatten_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t axis = cir_attr_int(n, "axis");
    if (axis < -x->ndim || axis > x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis=%lld out of range for rank %d", (long long)axis, x->ndim);
    if (axis < 0) axis += x->ndim;
    const cir_dim *dx[2] = {cir_dim_const(&g->dt, 1), cir_dim_const(&g->dt, 1)};
    for (int i = 0; i < x->ndim; i++) dx[i < axis ? 0 : 1] = cir_dim_mul(&g->dt, dx[i < axis ? 0 : 1], cir_dimx(g, x, i));
    return set_out(g, n, 2, dx);
}

/* Axes from the optional input 1 (-1: absent). */
static cuvil_status get_axes(cir_graph *g, cir_node *n, int64_t *axes, int *cnt) {
    *cnt = -1;
    cir_value *a = cir_in(g, n, 1);
    if (!a || (!cir_is_const(a) && cir_value_fixed(a) && cir_numel(a) == 0)) return CUVIL_OK;   /* absent or empty: none given */
    return op_const_ints(g, n, 1, "axes", axes, CIR_MAX_DIMS, cnt);
}

/* Axes the model computes or takes when it runs: each output dim a size the run finds
 * (cuvil_squeeze_dims), at most the largest dim of x. */
static cuvil_status rt_axes_infer(cir_graph *g, cir_node *n, bool unsqueeze) {
    cir_value *x = cir_in(g, n, 0), *a = cir_in(g, n, 1);
    if ((a->dtype != CIR_I64 && a->dtype != CIR_I32) || a->ndim != 1 || !cir_value_fixed(a))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input 'axes' ('%s') is %s of rank %d; read when the model runs, "
                            "Cuvil takes it as a 1-D int64 or int32 tensor of fixed length", a->name, cir_dtype_name(a->dtype),
                            a->ndim);
    int64_t cnt = a->dims[0];
    int r = unsqueeze ? x->ndim + (int)cnt : x->ndim - (int)cnt;
    if (r < 0 || r > CIR_MAX_DIMS)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "axes has %lld values for input '%s' of rank %d", (long long)cnt, x->name,
                            x->ndim);
    int64_t hi = 1;
    for (int d = 0; d < x->ndim; d++) hi = x->dims[d] > hi ? x->dims[d] : hi;
    const cir_dim *dx[CIR_MAX_DIMS];
    cuvil_status s;
    for (int d = 0; d < r; d++)
        if ((s = op_found_dim(g, n, 0, d, d, hi, false, &dx[d]))) return s;
    return set_out(g, n, r, dx);
}

bool op_squeeze_rt_axes(cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 1);
    return a && !cir_is_const(a) && !a->sval && !(cir_value_fixed(a) && cir_numel(a) == 0);
}

static cuvil_status squeeze_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    if (op_squeeze_rt_axes(g, n)) return rt_axes_infer(g, n, false);
    cir_value *x = cir_in(g, n, 0);
    int64_t axes[CIR_MAX_DIMS];
    const cir_dim *dx[CIR_MAX_DIMS];
    int cnt, nd = 0;
    if ((s = get_axes(g, n, axes, &cnt))) return s;
    bool drop[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < cnt; i++) {
        int ax;
        if ((s = op_axis(g, n, axes[i], x->ndim, "axes", &ax))) return s;
        if (x->dx[ax] && x->dx[ax]->lo <= 1 && x->dx[ax]->hi >= 1) {   /* symbolic: 1 when the model runs (a guard) */
            if ((s = cir_require_eq(g, n, x->dx[ax], cir_dim_const(&g->dt, 1), "the squeezed dim and 1"))) return s;
        } else if (x->dx[ax] || x->dims[ax] != 1) {
            char sx[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot squeeze axis %d of '%s' %s: its size is not 1", ax, x->name,
                                cir_shape_str(g, x, sx, sizeof sx));
        }
        drop[ax] = true;
    }
    for (int i = 0; i < x->ndim; i++) {
        /* no axes: the dims of size 1, which a symbolic dim that may be 1 leaves undecided */
        if (cnt < 0 && x->dx[i] && x->dx[i]->lo <= 1)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "squeezes the dims of size 1, and dim %d of '%s' is symbolic "
                                "and may be 1 (give the axes)", i, x->name);
        if (!(cnt < 0 ? !x->dx[i] && x->dims[i] == 1 : drop[i])) dx[nd++] = cir_dimx(g, x, i);
    }
    return set_out(g, n, nd, dx);
}

static cuvil_status unsqueeze_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    if (op_squeeze_rt_axes(g, n)) return rt_axes_infer(g, n, true);
    cir_value *x = cir_in(g, n, 0);
    int64_t axes[CIR_MAX_DIMS];
    const cir_dim *dx[CIR_MAX_DIMS];
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
    for (int i = 0, j = 0; i < r; i++) dx[i] = ins[i] ? cir_dim_const(&g->dt, 1) : cir_dimx(g, x, j++);
    return set_out(g, n, r, dx);
}

static cuvil_status identity_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->seq_n >= 0) {   /* a sequence: its block, copied or shared as a tensor's bytes are */
        cir_copy_seq_type(cir_out(g, n, 0), x);
        return CUVIL_OK;
    }
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) dx[i] = cir_dimx(g, x, i);
    return set_out(g, n, x->ndim, dx);
}

static cuvil_status alias_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    memcpy(y->data, x->data, cir_nbytes(x));
    return CUVIL_OK;
}

static const cir_attr_spec reshape_attrs[] = {{"allowzero", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec flatten_attrs[] = {{"axis", CIR_ATTR_INT, 1, 0, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_reshape = {"reshape", CIR_OPF_ALIAS | CIR_OPF_SYM_DIMS, 2, 2, 1, 1, reshape_attrs, reshape_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_flatten = {"flatten", CIR_OPF_ALIAS | CIR_OPF_SYM_DIMS, 1, 1, 1, 1, flatten_attrs, flatten_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_squeeze = {"squeeze", CIR_OPF_ALIAS | CIR_OPF_SYM_DIMS, 1, 2, 1, 1, NULL, squeeze_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_unsqueeze = {"unsqueeze", CIR_OPF_ALIAS | CIR_OPF_SYM_DIMS, 2, 2, 1, 1, NULL, unsqueeze_infer, alias_fold, NULL, 0};
const cir_opdef cir_op_identity = {"identity", CIR_OPF_ALIAS | CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, identity_infer, alias_fold, NULL, 0};
