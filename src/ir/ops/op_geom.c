/* op_geom.c -- ops whose output shape an input sets, read when the model runs or constant:
 * center_crop_pad (x, shape; axes): ONNX CenterCropPad, any type; affine_grid (theta, size;
 * align_corners): ONNX AffineGrid, 2-D and 3-D, float32; col2im (x, image_shape,
 * block_shape; dilations, pads, strides): ONNX Col2Im, float32. With the shape input constant
 * the output's shape follows from it; read when the model runs, it is the declared output
 * (op_declared_output) and the run checks that the values give it, failing otherwise. */
#include "ir/ops/ops.h"

#include <string.h>

/* Input i: a 1-D int64 tensor of 1..max values; *konst when constant (its values into v). */
static cuvil_status shape_input(cir_graph *g, cir_node *n, int i, const char *what, int max, int64_t *v, int *cnt,
                                bool *konst) {
    cir_value *s = cir_in(g, n, i);
    if (!s || s->dtype != CIR_I64 || s->ndim != 1 || s->dims[0] < 1 || s->dims[0] > max || s->dx[0])
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s must be an int64 tensor of 1 to %d values", what, max);
    *cnt = (int)s->dims[0];
    *konst = cir_is_const(s);
    for (int k = 0; *konst && k < *cnt; k++) v[k] = cir_const_i64(s, k);
    return CUVIL_OK;
}

/* ===== center_crop_pad ===================================================================== */
/* The axes (attribute; default all) as dims of x, into ax; their count. */
cuvil_status op_ccp_axes(cir_graph *g, cir_node *n, int64_t *ax, int *na) {
    const int64_t *a;
    int rank = cir_in(g, n, 0)->ndim, k = cir_attr_ints(n, "axes", &a);
    if (k < 0) {
        for (int i = 0; i < rank; i++) ax[i] = i;
        *na = rank;
        return CUVIL_OK;
    }
    if (k > rank) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axes has %d values for rank %d", k, rank);
    for (int i = 0; i < k; i++) {
        int d;
        cuvil_status s = op_axis(g, n, a[i], rank, "axes", &d);
        if (s) return s;
        ax[i] = d;
        for (int j = 0; j < i; j++)
            if (ax[j] == ax[i]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d appears twice", d);
    }
    *na = k;
    return CUVIL_OK;
}

static cuvil_status ccp_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_value_fixed(x) || x->ndim > 8 || !cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' must have fixed dims (at most 8)", x->name);
    int64_t ax[8], v[8];
    int na, cnt;
    bool konst;
    if ((s = op_ccp_axes(g, n, ax, &na)) || (s = shape_input(g, n, 1, "shape", 8, v, &cnt, &konst))) return s;
    if (cnt != na) return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape has %d values for %d axes", cnt, na);
    if (!konst) {
        if ((s = op_declared_output(g, n, x->dtype, x->ndim, "shape"))) return s;
        cir_value *y = cir_out(g, n, 0);
        for (int d = 0; d < x->ndim; d++) {
            bool listed = false;
            for (int i = 0; i < na; i++) listed |= ax[i] == d;
            if (!listed && y->dims[d] != x->dims[d])
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the declared output's dim %d is %lld; the input's is %lld and "
                                    "not in axes", d, (long long)y->dims[d], (long long)x->dims[d]);
        }
        return CUVIL_OK;
    }
    int64_t dims[8];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < na; i++) {
        if (v[i] < 0 || v[i] > g->limits.dim) return cir_node_err(g, n, CUVIL_ERR_MODEL, "shape[%d] is %lld", i, (long long)v[i]);
        dims[ax[i]] = v[i];
    }
    cir_set_shape(cir_out(g, n, 0), x->dtype, x->ndim, dims);
    return CUVIL_OK;
}

static const cir_attr_spec ccp_attrs[] = {{"axes", CIR_ATTR_INTS, 0, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_center_crop_pad = {"center_crop_pad", 0, 2, 2, 1, 1, ccp_attrs, ccp_infer, NULL, NULL, 0};

/* ===== affine_grid ========================================================================= */
static cuvil_status ag_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *th = cir_in(g, n, 0);
    if (!cir_value_fixed(th) || th->ndim != 3 || !((th->dims[1] == 2 && th->dims[2] == 3) || (th->dims[1] == 3 && th->dims[2] == 4)))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "theta '%s' must be [N, 2, 3] or [N, 3, 4] (fixed)", th->name);
    int nd = (int)th->dims[1], cnt;
    int64_t v[8];
    bool konst;
    if ((s = shape_input(g, n, 1, "size", 5, v, &cnt, &konst))) return s;
    if (cnt != nd + 2) return cir_node_err(g, n, CUVIL_ERR_MODEL, "size has %d values; theta is for %d-D (%d)", cnt, nd, nd + 2);
    if (!konst) {
        if ((s = op_declared_output(g, n, CIR_F32, nd + 2, "size"))) return s;
    } else {
        int64_t dims[5] = {v[0], 0, 0, 0, 0};
        for (int i = 0; i < nd; i++) {
            if (v[2 + i] < 1 || v[2 + i] > g->limits.dim)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "size[%d] is %lld", 2 + i, (long long)v[2 + i]);
            dims[1 + i] = v[2 + i];
        }
        dims[nd + 1] = nd;
        cir_set_shape(cir_out(g, n, 0), CIR_F32, nd + 2, dims);
    }
    cir_value *y = cir_out(g, n, 0);
    if (y->dims[0] != th->dims[0] || y->dims[nd + 1] != nd)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the grid must be [%lld, ..., %d]", (long long)th->dims[0], nd);
    return CUVIL_OK;
}

static const cir_attr_spec ag_attrs[] = {{"align_corners", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_affine_grid = {"affine_grid", 0, 2, 2, 1, 1, ag_attrs, ag_infer, NULL, NULL, 0};

/* ===== col2im ============================================================================== */
/* Input 2 (block_shape) when constant, for the channel count; else the declared output's. */
static cuvil_status c2i_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 3, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_value_fixed(x) || x->ndim != 3)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' must be [N, C * block size, L] (fixed)", x->name);
    int ni, nb;
    int64_t img[CUVIL_ND_MAX], blk[CUVIL_ND_MAX];
    bool ki, kb;
    if ((s = shape_input(g, n, 1, "image_shape", CUVIL_ND_MAX, img, &ni, &ki)) ||
        (s = shape_input(g, n, 2, "block_shape", CUVIL_ND_MAX, blk, &nb, &kb)))
        return s;
    if (ni != nb) return cir_node_err(g, n, CUVIL_ERR_MODEL, "image_shape has %d values, block_shape %d", ni, nb);
    int64_t d[CUVIL_ND_MAX], st[CUVIL_ND_MAX], pads[2 * CUVIL_ND_MAX];
    if ((s = op_col2im_attrs(g, n, ni, d, st, pads))) return s;
    if (!ki || !kb) {
        if ((s = op_declared_output(g, n, CIR_F32, 2 + ni, "image_shape or block_shape"))) return s;
        if (cir_out(g, n, 0)->dims[0] != x->dims[0])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the declared output's batch is not the input's (%lld)",
                                (long long)x->dims[0]);
        return CUVIL_OK;
    }
    int64_t dims[2 + CUVIL_ND_MAX] = {x->dims[0], 0}, prod = 1, blocks = 1;
    bool ovf = false;
    for (int i = 0; i < ni; i++) {
        if (blk[i] < 1 || img[i] < 1 || img[i] > g->limits.dim || blk[i] > g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "image_shape and block_shape must be positive");
        prod = cuvil_i64_mul(&ovf, prod, blk[i]);
        int64_t span = img[i] + pads[i] + pads[ni + i] - cuvil_i64_mul(&ovf, d[i], blk[i] - 1) - 1;
        if (ovf || span < 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the block (%lld, dilation %lld) does not fit image dim %d (%lld)",
                                (long long)blk[i], (long long)d[i], i, (long long)img[i]);
        blocks = cuvil_i64_mul(&ovf, blocks, span / st[i] + 1);
        dims[2 + i] = img[i];
    }
    if (ovf || x->dims[1] % prod)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' dim 1 (%lld) is not a multiple of the block size", x->name,
                            (long long)x->dims[1]);
    if (blocks != x->dims[2])
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has %lld columns; the image holds %lld blocks", x->name,
                            (long long)x->dims[2], (long long)blocks);
    dims[1] = x->dims[1] / prod;
    cir_set_shape(cir_out(g, n, 0), CIR_F32, 2 + ni, dims);
    return CUVIL_OK;
}

/* The attributes of col2im for nsp spatial dims, checked: dilations, strides (default 1), pads
 * (begins then ends, default 0). */
cuvil_status op_col2im_attrs(cir_graph *g, cir_node *n, int nsp, int64_t *d, int64_t *st, int64_t *pads) {
    const int64_t *a;
    int k;
    for (int i = 0; i < nsp; i++) d[i] = st[i] = 1, pads[i] = pads[nsp + i] = 0;
    if ((k = cir_attr_ints(n, "dilations", &a)) >= 0) {
        if (k != nsp) return cir_node_err(g, n, CUVIL_ERR_MODEL, "dilations has %d values for %d dims", k, nsp);
        memcpy(d, a, sizeof(int64_t) * (size_t)nsp);
    }
    if ((k = cir_attr_ints(n, "strides", &a)) >= 0) {
        if (k != nsp) return cir_node_err(g, n, CUVIL_ERR_MODEL, "strides has %d values for %d dims", k, nsp);
        memcpy(st, a, sizeof(int64_t) * (size_t)nsp);
    }
    if ((k = cir_attr_ints(n, "pads", &a)) >= 0) {
        if (k != 2 * nsp) return cir_node_err(g, n, CUVIL_ERR_MODEL, "pads has %d values for %d dims", k, nsp);
        memcpy(pads, a, sizeof(int64_t) * (size_t)(2 * nsp));
    }
    for (int i = 0; i < nsp; i++)
        if (d[i] < 1 || st[i] < 1 || pads[i] < 0 || pads[nsp + i] < 0 || d[i] > g->limits.dim || st[i] > g->limits.dim ||
            pads[i] > g->limits.dim || pads[nsp + i] > g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "dilations and strides must be positive, pads >= 0");
    return CUVIL_OK;
}

static const cir_attr_spec c2i_attrs[] = {
    {"dilations", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"pads", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"strides", CIR_ATTR_INTS, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_col2im = {"col2im", 0, 3, 3, 1, 1, c2i_attrs, c2i_infer, NULL, NULL, 0};
