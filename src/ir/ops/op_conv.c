/* op_conv.c -- conv and conv_transpose (1-D and 2-D, groups, dilations, auto_pad); conv_nd and
 * conv_transpose_nd, the same over 1 to CUVIL_ND_MAX spatial dims (fixed dims) on the N-D
 * kernels, which the frontend picks for 3-D and wider. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

typedef struct conv_geo {
    int nsp;                      /* spatial dims: 1 or 2 (the _nd ops: up to CUVIL_ND_MAX) */
    int64_t k[CUVIL_ND_MAX], s[CUVIL_ND_MAX], d[CUVIL_ND_MAX], pb[CUVIL_ND_MAX], pe[CUVIL_ND_MAX], in[CUVIL_ND_MAX],
        out[CUVIL_ND_MAX];
    int64_t group, N, C, M;
    /* A 2-D convolution whose W axis is trivial (W, KW and OW are 1, W a number, no pads along
     * it): the kernels see the 1-D convolution along H that it is, with H and W swapped
     * (op_conv_params, op_conv_kx; op_conv_x and the tensors' shapes keep the model's axes).
     * [C][H][1] is [C][1][H] in memory, and channels last [H][1][C] is [1][H][C], so the swap
     * is exact. The 1-D paths run it as a row of pixels, not a map one pixel wide (Magika's
     * 256 -> 512 5x1 conv on 512 x 1, cuvil-bench-conv-avx2, one thread: im2col GEMM 8.47 ms
     * as 512 x 1, 6.91 as 1 x 512). */
    bool swap_hw;
} conv_geo;

/* H <-> W, OH <-> OW, KH <-> KW, pad_t <-> pad_l of a struct of those fields (swap_hw). */
#define SWAP_HW(T, s)                                 \
    do {                                              \
        T t_ = (s)->H;                                \
        (s)->H = (s)->W, (s)->W = t_;                 \
        t_ = (s)->OH, (s)->OH = (s)->OW, (s)->OW = t_; \
        t_ = (s)->KH, (s)->KH = (s)->KW, (s)->KW = t_; \
        t_ = (s)->pad_t, (s)->pad_t = (s)->pad_l, (s)->pad_l = t_; \
    } while (0)

/* Reads an INTS attribute of nsp elements, or fills def. */
static cuvil_status spatial_attr(cir_graph *g, cir_node *n, const char *name, int nsp, int64_t def, int64_t *out,
                                 int count_mult) {
    const int64_t *v;
    int cnt = cir_attr_ints(n, name, &v);
    if (cnt < 0) {
        for (int i = 0; i < nsp * count_mult; i++) out[i] = def;
        return CUVIL_OK;
    }
    if (cnt != nsp * count_mult)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute %s has %d values, expected %d", name, cnt, nsp * count_mult);
    for (int i = 0; i < cnt; i++) out[i] = v[i];
    return CUVIL_OK;
}

static cuvil_status geometry(cir_graph *g, cir_node *n, bool transpose, conv_geo *c) {
    memset(c, 0, sizeof *c);
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1);
    bool nd = n->kind == CIR_OP_CONV_ND || n->kind == CIR_OP_CONV_TRANSPOSE_ND;
    if (x->ndim < 3 || x->ndim > (nd ? 2 + CUVIL_ND_MAX : 4))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has rank %d; convolutions over 1 to %d spatial dims are "
                            "supported", x->name, x->ndim, nd ? CUVIL_ND_MAX : 2);
    if (w->ndim != x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "weight '%s' has rank %d, input has rank %d", w->name, w->ndim, x->ndim);
    c->nsp = x->ndim - 2;
    c->N = x->dims[0];
    c->C = x->dims[1];
    c->group = cir_attr_int(n, "group");
    if (c->group <= 0 || c->group > g->limits.dim || c->C % c->group)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "group=%lld does not divide C=%lld", (long long)c->group, (long long)c->C);
    if (!transpose) {
        c->M = w->dims[0];
        if (w->dims[1] * c->group != c->C)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "weight '%s' has %lld input channels per group, input has C=%lld with group=%lld",
                                w->name, (long long)w->dims[1], (long long)c->C, (long long)c->group);
        if (c->M % c->group)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "group=%lld does not divide M=%lld", (long long)c->group, (long long)c->M);
    } else {
        if (w->dims[0] != c->C)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "weight '%s' has %lld input channels, input has C=%lld",
                                w->name, (long long)w->dims[0], (long long)c->C);
        bool ovf = false;
        c->M = cuvil_i64_mul(&ovf, w->dims[1], c->group);
        if (ovf || c->M > g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "weight '%s' with group=%lld gives too many output channels",
                                w->name, (long long)c->group);
    }
    int64_t ks[CUVIL_ND_MAX], pads[2 * CUVIL_ND_MAX], op[CUVIL_ND_MAX] = {0};
    cuvil_status s;
    if ((s = spatial_attr(g, n, "strides", c->nsp, 1, c->s, 1)) || (s = spatial_attr(g, n, "dilations", c->nsp, 1, c->d, 1)) ||
        (s = spatial_attr(g, n, "pads", c->nsp, 0, pads, 2)) || (s = spatial_attr(g, n, "kernel_shape", c->nsp, -1, ks, 1)) ||
        (transpose && (s = spatial_attr(g, n, "output_padding", c->nsp, 0, op, 1))))
        return s;
    for (int i = 0; i < 2 * c->nsp; i++)
        if (pads[i] < 0 || pads[i] > g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "pads[%d]=%lld is out of range (0..%lld)", i, (long long)pads[i],
                                (long long)g->limits.dim);
    for (int i = 0; i < c->nsp; i++)
        if (c->s[i] > g->limits.dim || c->d[i] > g->limits.dim || op[i] < 0 || op[i] > g->limits.dim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "strides, dilations or output_padding out of range (1..%lld)",
                                (long long)g->limits.dim);
    bool ovf = false;
    int ap = (int)cir_attr_int(n, "auto_pad");
    const char *apn = cir_auto_pad_names[ap];
    bool same = ap == CIR_PAD_SAME_UPPER || ap == CIR_PAD_SAME_LOWER;
    const int64_t *unused;
    if (ap != CIR_PAD_EXPLICIT && cir_attr_ints(n, "pads", &unused) >= 0)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "pads and auto_pad='%s' are both given", apn);
    const int64_t *os0 = NULL;
    int nos0 = transpose ? cir_attr_ints(n, "output_shape", &os0) : -1;
    if (transpose && nos0 >= 0 && nos0 != c->nsp)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "output_shape has %d values; it gives the %d spatial dims", nos0, c->nsp);
    for (int i = 0; i < c->nsp; i++) {
        c->in[i] = x->dims[2 + i];
        c->k[i] = w->dims[2 + i];
        if (ks[i] >= 0 && ks[i] != c->k[i])
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "kernel_shape[%d]=%lld but weight '%s' has %lld", i,
                                (long long)ks[i], w->name, (long long)c->k[i]);
        if (c->s[i] <= 0 || c->d[i] <= 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "strides and dilations must be positive");
        if (c->k[i] <= 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "weight '%s' has an empty kernel (size %lld along spatial dim %d)",
                                w->name, (long long)c->k[i], i);
        if (c->d[i] > 1 && same)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "dilations with auto_pad='%s' (ONNX Runtime refuses it too)",
                                apn);
        /* every operand is at most limits.dim (2^32 by default): products are checked */
        int64_t ek = cuvil_i64_add(&ovf, cuvil_i64_mul(&ovf, c->k[i] - 1, c->d[i]), 1);
        if (!transpose) {
            if (ap == CIR_PAD_EXPLICIT) {
                c->pb[i] = pads[i];
                c->pe[i] = pads[i + c->nsp];
                int64_t span = c->in[i] + c->pb[i] + c->pe[i] - ek;
                if (span < 0)
                    return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the kernel (%lld with dilation %lld) is larger than the "
                                        "padded input (%lld) along spatial dim %d", (long long)c->k[i], (long long)c->d[i],
                                        (long long)(c->in[i] + c->pb[i] + c->pe[i]), i);
                c->out[i] = span / c->s[i] + 1;
            } else if (ap == CIR_PAD_VALID) {
                c->out[i] = c->in[i] < ek ? 0 : (c->in[i] - ek) / c->s[i] + 1;
            } else {
                c->out[i] = (c->in[i] + c->s[i] - 1) / c->s[i];
                int64_t total = cuvil_i64_sub(&ovf, cuvil_i64_add(&ovf, cuvil_i64_mul(&ovf, c->out[i] - 1, c->s[i]), ek), c->in[i]);
                if (total < 0) total = 0;
                bool upper = ap == CIR_PAD_SAME_UPPER;
                c->pb[i] = upper ? total / 2 : total - total / 2;
                c->pe[i] = total - c->pb[i];
            }
        } else {
            const int64_t *os;
            int nos = cir_attr_ints(n, "output_shape", &os);
            if (op[i] >= c->s[i])
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "output_padding[%d]=%lld must be smaller than the stride (%lld), "
                                    "as ONNX Runtime requires", i, (long long)op[i], (long long)c->s[i]);
            int64_t full = cuvil_i64_add(&ovf, cuvil_i64_add(&ovf, cuvil_i64_mul(&ovf, c->s[i], c->in[i] - 1), op[i]), ek);
            if (nos >= c->nsp || ap != CIR_PAD_EXPLICIT) {
                int64_t target = nos >= c->nsp ? os[i] : cuvil_i64_mul(&ovf, c->in[i], c->s[i]);
                if (target < 0 || target > g->limits.dim)
                    return cir_node_err(g, n, CUVIL_ERR_MODEL, "output_shape %lld is out of range", (long long)target);
                int64_t total = full - target;
                /* as ONNX Runtime checks it: the input size an explicit output_shape implies must be
                 * this input's (an output up to stride - 1 longer than `full` gets the extra rows) */
                int64_t span = target - ek - op[i];
                if (nos >= c->nsp && (span < 0 || span / c->s[i] + 1 != c->in[i]))
                    return cir_node_err(g, n, CUVIL_ERR_SHAPE, "output_shape %lld along spatial dim %d does not fit this "
                                        "input (it implies an input of %lld, the input has %lld)", (long long)target, i,
                                        (long long)(span < 0 ? 0 : span / c->s[i] + 1), (long long)c->in[i]);
                if (total < 0) total = 0;
                if (ap == CIR_PAD_SAME_UPPER) {
                    c->pb[i] = total / 2;
                    c->pe[i] = total - total / 2;
                } else {
                    c->pb[i] = total - total / 2;
                    c->pe[i] = total / 2;
                }
                c->out[i] = target;
            } else {
                c->pb[i] = pads[i];
                c->pe[i] = pads[i + c->nsp];
                c->out[i] = full - c->pb[i] - c->pe[i];
            }
        }
        if (ovf)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the output size along spatial dim %d overflows (kernel %lld, "
                                "stride %lld, dilation %lld)", i, (long long)c->k[i], (long long)c->s[i], (long long)c->d[i]);
        if (c->out[i] <= 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "output size %lld along spatial dim %d is not positive",
                                (long long)c->out[i], i);
    }
    if (!transpose) {
        /* the kernels copy an image zero-padded (C x the padded extents), so that size is
         * bounded as a tensor's is: pads and strides each within limits.dim could make one past
         * 2^64 (strides and pads of 2^32 - 1 on a 1x1 input: a 2x2 output) */
        int64_t padded = cuvil_i64_mul(&ovf, c->C, 4);
        for (int i = 0; i < c->nsp; i++)
            padded = cuvil_i64_mul(&ovf, padded, cuvil_i64_add(&ovf, cuvil_i64_add(&ovf, c->in[i], c->pb[i]), c->pe[i]));
        if (ovf || (uint64_t)padded > g->limits.tensor_bytes)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "its zero-padded input (channels x each spatial dim with its pads) "
                                "is over the limit tensor_bytes=%llu", (unsigned long long)g->limits.tensor_bytes);
    }
    c->swap_hw = !transpose && c->nsp == 2 && !x->dx[3] && c->in[1] == 1 && c->k[1] == 1 && c->out[1] == 1 &&
                 c->pb[1] == 0 && c->pe[1] == 0;
    /* (conv_integer and qlinear_conv check their own inputs past the weights) */
    cir_value *b = n->kind == CIR_OP_CONV_INTEGER || n->kind == CIR_OP_QLINEAR_CONV ? NULL : cir_in(g, n, 2);
    if (b && (b->ndim != 1 || b->dims[0] != c->M))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "bias '%s' must have shape [%lld]", b->name, (long long)c->M);
    return CUVIL_OK;
}

cuvil_status op_conv_x(cir_graph *g, cir_node *n, op_geo_x *x) {
    conv_geo c;
    cuvil_status s = geometry(g, n, false, &c);   /* the attributes and channels, checked */
    if (s) return s;
    cir_value *v = cir_in(g, n, 0);
    if (v->dx[1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the channels of '%s' are symbolic", v->name);
    cir_dimtab *t = &g->dt;
    int ap = (int)cir_attr_int(n, "auto_pad");
    const int64_t *pads;
    bool have = cir_attr_ints(n, "pads", &pads) >= 0;
    op_window w[2];
    for (int i = 0; i < c.nsp; i++) {
        int64_t ek = (c.k[i] - 1) * c.d[i] + 1;   /* bounded: geometry checked it */
        if ((s = op_window_x(g, n, i, cir_dimx(g, v, 2 + i), ek, c.s[i], ap, have ? pads[i] : 0, have ? pads[i + c.nsp] : 0,
                             false, &w[i])))
            return s;
    }
    int h = c.nsp == 1 ? -1 : 0, wd = c.nsp - 1;
    const cir_dim *one = cir_dim_const(t, 1), *zero = cir_dim_const(t, 0);
    x->N = cir_dimx(g, v, 0);
    x->H = h < 0 ? one : cir_dimx(g, v, 2);
    x->W = cir_dimx(g, v, 1 + c.nsp);
    x->OH = h < 0 ? one : w[0].out;
    x->OW = w[wd].out;
    x->KH = cir_dim_const(t, h < 0 ? 1 : c.k[0]);
    x->KW = cir_dim_const(t, c.k[wd]);
    x->pad_t = h < 0 ? zero : w[0].pb;
    x->pad_l = w[wd].pb;
    x->pad_b = h < 0 ? zero : w[0].pe;
    x->pad_r = w[wd].pe;
    return CUVIL_OK;
}

bool op_conv_swaps_hw(cir_graph *g, cir_node *n) {
    conv_geo c;
    return !geometry(g, n, false, &c) && c.swap_hw;
}

cuvil_status op_conv_kx(cir_graph *g, cir_node *n, op_geo_x *x) {
    conv_geo c;
    cuvil_status s = op_conv_x(g, n, x);
    if (s || (s = geometry(g, n, false, &c))) return s;
    if (c.swap_hw) {   /* (as op_conv_params: W, KW, OW are 1, its pads 0) */
        SWAP_HW(const cir_dim *, x);
        const cir_dim *t0 = x->pad_b;
        x->pad_b = x->pad_r, x->pad_r = t0;
    }
    return CUVIL_OK;
}

/* A transposed convolution with symbolic spatial dims: explicit pads only (output_shape and
 * auto_pad derive pads from the sizes), output (in - 1) * s + output_padding + extent - pads. */
cuvil_status op_convt_x(cir_graph *g, cir_node *n, op_geo_x *x) {
    conv_geo c;
    cuvil_status s = geometry(g, n, true, &c);
    if (s) return s;
    cir_value *v = cir_in(g, n, 0);
    const int64_t *os;
    if (v->dx[1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the channels of '%s' are symbolic", v->name);
    if (cir_attr_int(n, "auto_pad") != CIR_PAD_EXPLICIT || cir_attr_ints(n, "output_shape", &os) >= 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output_shape or auto_pad with symbolic dims");
    int64_t op[2] = {0, 0};
    const int64_t *opv;
    if (cir_attr_ints(n, "output_padding", &opv) == c.nsp)
        for (int i = 0; i < c.nsp; i++) op[i] = opv[i];
    cir_dimtab *t = &g->dt;
    const cir_dim *out[2];
    for (int i = 0; i < c.nsp; i++) {
        int64_t ek = (c.k[i] - 1) * c.d[i] + 1;
        out[i] = cir_dim_add_const(t, cir_dim_scale(t, cir_dimx(g, v, 2 + i), c.s[i]), op[i] + ek - c.s[i] - c.pb[i] - c.pe[i]);
        if (!out[i]) return cir_dim_err(g, n, "the output size");
        if (out[i]->lo <= 0)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the output size along spatial dim %d may not be positive", i);
    }
    int h = c.nsp == 1 ? -1 : 0, wd = c.nsp - 1;
    const cir_dim *one = cir_dim_const(t, 1);
    x->N = cir_dimx(g, v, 0);
    x->H = h < 0 ? one : cir_dimx(g, v, 2);
    x->W = cir_dimx(g, v, 1 + c.nsp);
    x->OH = h < 0 ? one : out[0];
    x->OW = out[wd];
    x->KH = cir_dim_const(t, h < 0 ? 1 : c.k[0]);
    x->KW = cir_dim_const(t, c.k[wd]);
    x->pad_t = cir_dim_const(t, h < 0 ? 0 : c.pb[0]);
    x->pad_l = cir_dim_const(t, c.pb[wd]);
    x->pad_b = cir_dim_const(t, h < 0 ? 0 : c.pe[0]);
    x->pad_r = cir_dim_const(t, c.pe[wd]);
    return CUVIL_OK;
}

static cuvil_status infer_common(cir_graph *g, cir_node *n, bool transpose) {
    cuvil_status s;
    if ((s = op_check_arity(g, n, 2, 3, 1, 1)) || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1)) ||
        (cir_in(g, n, 2) && (s = op_need_f32(g, n, 2))))
        return s;
    conv_geo c;
    if (!cir_value_fixed(cir_in(g, n, 0))) {
        op_geo_x x;
        if ((s = transpose ? op_convt_x(g, n, &x) : op_conv_x(g, n, &x)) || (s = geometry(g, n, transpose, &c))) return s;
        const cir_dim *dx[4] = {x.N, cir_dim_const(&g->dt, c.M), c.nsp == 1 ? x.OW : x.OH, x.OW};
        cir_set_shape_x(cir_out(g, n, 0), CIR_F32, 2 + c.nsp, dx);
        return CUVIL_OK;
    }
    if ((s = geometry(g, n, transpose, &c))) return s;
    int64_t dims[4] = {c.N, c.M, c.out[0], c.out[1]};
    cir_set_shape(cir_out(g, n, 0), CIR_F32, 2 + c.nsp, dims);
    return CUVIL_OK;
}

static cuvil_status conv_infer(cir_graph *g, cir_node *n) { return infer_common(g, n, false); }
static cuvil_status convt_infer(cir_graph *g, cir_node *n) { return infer_common(g, n, true); }

/* The kernel's view of the geometry: a 1-D convolution is a 2-D one with H = KH = OH = 1.
 * cuvil_conv_transpose2d_params has the same fields, so both ops go through this one struct. */
static cuvil_conv2d_params geo_params(const conv_geo *c, const cir_act *act) {
    int h = c->nsp == 1 ? -1 : 0, w = c->nsp - 1;   /* h < 0: the absent H axis */
    cuvil_conv2d_params p = {
        .N = c->N, .C = c->C, .H = h < 0 ? 1 : c->in[h], .W = c->in[w], .M = c->M,
        .OH = h < 0 ? 1 : c->out[h], .OW = c->out[w], .KH = h < 0 ? 1 : c->k[h], .KW = c->k[w],
        .stride_h = h < 0 ? 1 : c->s[h], .stride_w = c->s[w], .pad_t = h < 0 ? 0 : c->pb[h], .pad_l = c->pb[w],
        .dil_h = h < 0 ? 1 : c->d[h], .dil_w = c->d[w], .group = c->group, .act = cir_act_params(act),
    };
    return p;
}

cuvil_status op_conv_params(cir_graph *g, cir_node *n, bool transpose, cuvil_conv2d_params *p) {
    conv_geo c;
    cuvil_status s = geometry(g, n, transpose, &c);
    if (s) return s;
    cir_act act = cir_node_act(n);
    *p = geo_params(&c, &act);
    if (c.swap_hw) {   /* H along W: a 1-D convolution, H = KH = OH = 1 (conv_geo's swap_hw) */
        SWAP_HW(int64_t, p);
        int64_t t0 = p->stride_h;
        p->stride_h = p->stride_w, p->stride_w = t0;
        t0 = p->dil_h, p->dil_h = p->dil_w, p->dil_w = t0;
    }
    return CUVIL_OK;
}

/* Folding with the reference kernels, for convolutions of constants (rare: weight-only chains). */
static cuvil_status conv_fold(cir_graph *g, cir_node *n) {
    cuvil_conv2d_params p;
    cuvil_status s = op_conv_params(g, n, false, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    float *out = cir_value_make_const(g, y);
    if (!out) return g->ctx->status;
    cir_value *b = cir_in(g, n, 2);
    cuvil_f32_conv2d__scalar(&p, cir_in(g, n, 0)->data, cir_in(g, n, 1)->data, b ? b->data : NULL,
                             cir_node_residual(n) >= 0 ? cir_val(g, cir_node_residual(n))->data : NULL, out);
    return CUVIL_OK;
}

/* the attributes every convolution takes */
#define CONV_ATTRS                                                                         \
    {"group", CIR_ATTR_INT, 1, 0, NULL, false}, {"strides", CIR_ATTR_INTS, 0, 0, NULL, false}, \
        {"dilations", CIR_ATTR_INTS, 0, 0, NULL, false}, {"pads", CIR_ATTR_INTS, 0, 0, NULL, false}, \
        {"kernel_shape", CIR_ATTR_INTS, 0, 0, NULL, false},                                    \
        {"auto_pad", CIR_ATTR_ENUM, CIR_PAD_EXPLICIT, 0, cir_auto_pad_names, false}

static const cir_attr_spec conv_attrs[] = {
    CONV_ATTRS,
    CIR_ATTR_END,
};

/* mbblock nodes come from the lowering stage (src/lower/blocks.c), with their shapes already set;
 * a model or the builder cannot make one. */
static cuvil_status mbblock_infer(cir_graph *g, cir_node *n) {
    return cir_node_err(g, n, CUVIL_ERR_MODEL,
                        "op 'mbblock' is made by the compiler's lowering stage from three convolutions; a model cannot use it");
}

static const cir_attr_spec convt_attrs[] = {
    CONV_ATTRS,
    {"output_padding", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"output_shape", CIR_ATTR_INTS, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_conv = {"conv", CIR_OPF_TAKES_ACT | CIR_OPF_TAKES_RESIDUAL | CIR_OPF_SYM_DIMS, 2, 3, 1, 1, conv_attrs,
                               conv_infer, conv_fold, NULL, 0};
const cir_opdef cir_op_conv_transpose = {"conv_transpose", CIR_OPF_TAKES_ACT | CIR_OPF_SYM_DIMS, 2, 3, 1, 1, convt_attrs,
                                         convt_infer, NULL, NULL, 0};
const cir_opdef cir_op_mbblock = {"mbblock", CIR_OPF_TAKES_ACT | CIR_OPF_TAKES_RESIDUAL, 7, 7, 1, 1, NULL, mbblock_infer, NULL, NULL, 0};

/* ===== conv_integer, qlinear_conv ========================================================= */
/* conv_integer (x, w, [x_zp], [w_zp]) -> int32: ONNX's ConvInteger. qlinear_conv (x, w, x_scale,
 * x_zp, w_scale, w_zp, [y_scale], [y_zp], [bias]) -> y: QLinearConv with x and w first (as
 * conv's), bias int32; without y_scale the output is float32, x_scale * w_scale * (acc + bias)
 * (the QDQ fold's conv whose result feeds float ops). min, max: the float result clamped to
 * them before it is quantized (a Relu or Clip the QDQ fold took in; y's scale and zero point
 * then constants). 1-D and 2-D; the batch and spatial dims may be symbolic (the channels and
 * the weights fixed); uint8 and int8. */
static bool i8t(cir_dtype t) { return t == CIR_U8 || t == CIR_I8; }

/* Input i: absent (when optional), else of type t (CIR_UNDEF: any 8-bit) with 1 or `per` values. */
static cuvil_status qin(cir_graph *g, cir_node *n, int i, cir_dtype t, int64_t per, bool optional, const char *what) {
    cir_value *v = cir_in(g, n, i);
    if (!v) return optional ? CUVIL_OK : cir_node_err(g, n, CUVIL_ERR_MODEL, "%s is missing", what);
    if (t == CIR_UNDEF ? !i8t(v->dtype) : v->dtype != t)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s '%s' is %s; it must be %s", what, v->name, cir_dtype_name(v->dtype),
                            t == CIR_UNDEF ? "uint8 or int8" : cir_dtype_name(t));
    if (!cir_value_fixed(v) || (cir_numel(v) != 1 && (cir_numel(v) != per || v->ndim != 1)))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s '%s' must hold one value%s", what, v->name,
                            per > 1 ? " or one per output channel" : "");
    return CUVIL_OK;
}

static cuvil_status qconv_infer(cir_graph *g, cir_node *n) {
    const bool ql = n->kind == CIR_OP_QLINEAR_CONV;
    cuvil_status s = op_check_arity(g, n, ql ? 6 : 2, ql ? 9 : 4, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1);
    if (!i8t(x->dtype) || !i8t(w->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s and weight '%s' %s; uint8 and int8 are supported",
                            x->name, cir_dtype_name(x->dtype), w->name, cir_dtype_name(w->dtype));
    if (!cir_value_fixed(w)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the weight's dims must be fixed");
    op_geo_x gx;   /* (symbolic batch and spatial dims: the output's, as conv's) */
    if (!cir_value_fixed(x) && (s = op_conv_x(g, n, &gx))) return s;
    conv_geo c;
    if ((s = geometry(g, n, false, &c))) return s;
    if (c.nsp > 2) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "integer convolutions over %d spatial dims (1-D and 2-D are)", c.nsp);
    cir_dtype yt = CIR_I32;
    if (!ql) {
        if ((s = qin(g, n, 2, x->dtype, 1, true, "x_zero_point")) || (s = qin(g, n, 3, w->dtype, c.M, true, "w_zero_point")))
            return s;
    } else {
        cir_value *ys = cir_in(g, n, 6), *yz = cir_in(g, n, 7);
        if ((s = qin(g, n, 2, CIR_F32, 1, false, "x_scale")) || (s = qin(g, n, 3, x->dtype, 1, true, "x_zero_point")) ||
            (s = qin(g, n, 4, CIR_F32, c.M, false, "w_scale")) || (s = qin(g, n, 5, w->dtype, c.M, true, "w_zero_point")) ||
            (s = qin(g, n, 6, CIR_F32, 1, true, "y_scale")) || (s = qin(g, n, 7, CIR_UNDEF, 1, true, "y_zero_point")))
            return s;
        cir_value *b = cir_in(g, n, 8);
        if (b && (b->dtype != CIR_I32 || b->ndim != 1 || b->dims[0] != c.M))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "bias '%s' must be int32 of shape [%lld]", b->name, (long long)c.M);
        if (yz && !ys) return cir_node_err(g, n, CUVIL_ERR_MODEL, "y_zero_point without y_scale");
        yt = !ys ? CIR_F32 : yz ? yz->dtype : CIR_U8;
        if ((s = op_qclamp_check(g, n, 6, 7))) return s;
    }
    if (!cir_value_fixed(x)) {
        const cir_dim *dx[4] = {gx.N, cir_dim_const(&g->dt, c.M), c.nsp == 1 ? gx.OW : gx.OH, gx.OW};
        cir_set_shape_x(cir_out(g, n, 0), yt, 2 + c.nsp, dx);
        return CUVIL_OK;
    }
    int64_t dims[4] = {c.N, c.M, c.out[0], c.out[1]};
    cir_set_shape(cir_out(g, n, 0), yt, 2 + c.nsp, dims);
    return CUVIL_OK;
}

static const cir_attr_spec qconv_attrs[] = {
    CONV_ATTRS,
    {"min", CIR_ATTR_FLOAT, 0, -INFINITY, NULL, false},
    {"max", CIR_ATTR_FLOAT, 0, INFINITY, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_conv_integer = {"conv_integer", CIR_OPF_SYM_DIMS, 2, 4, 1, 1, conv_attrs, qconv_infer, NULL, NULL, 0};
const cir_opdef cir_op_qlinear_conv = {"qlinear_conv", CIR_OPF_SYM_DIMS, 6, 9, 1, 1, qconv_attrs, qconv_infer, NULL, NULL, 0};

/* ===== conv_nd, conv_transpose_nd ========================================================= */
cuvil_status op_conv_nd_params(cir_graph *g, cir_node *n, cuvil_conv_nd_params *p) {
    conv_geo c;
    bool transpose = n->kind == CIR_OP_CONV_TRANSPOSE_ND;
    cuvil_status s = geometry(g, n, transpose, &c);
    if (s) return s;
    memset(p, 0, sizeof *p);
    p->nsp = c.nsp;
    p->transpose = transpose;
    p->N = c.N;
    p->C = c.C;
    p->M = c.M;
    p->group = c.group;
    for (int i = 0; i < c.nsp; i++) {
        p->in[i] = c.in[i];
        p->out[i] = c.out[i];
        p->k[i] = c.k[i];
        p->s[i] = c.s[i];
        p->d[i] = c.d[i];
        p->pb[i] = c.pb[i];
    }
    /* the kernel's column buffer: a group's channels x taps x positions, as one tensor */
    bool ovf = false;
    int64_t col = cuvil_i64_mul(&ovf, transpose ? c.M / c.group : c.C / c.group, 4);
    for (int i = 0; i < c.nsp; i++) col = cuvil_i64_mul(&ovf, cuvil_i64_mul(&ovf, col, c.k[i]), transpose ? c.in[i] : c.out[i]);
    if (ovf || (uint64_t)col > g->limits.tensor_bytes)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "its column buffer (a group's channels x kernel taps x positions) is over "
                            "the limit tensor_bytes=%llu", (unsigned long long)g->limits.tensor_bytes);
    return CUVIL_OK;
}

static cuvil_status conv_nd_infer(cir_graph *g, cir_node *n) {
    cuvil_status s;
    if ((s = op_check_arity(g, n, 2, 3, 1, 1)) || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1)) ||
        (cir_in(g, n, 2) && (s = op_need_f32(g, n, 2))))
        return s;
    for (int i = 0; i < 3; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v && !cir_value_fixed(v))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has symbolic dims; convolutions over more than 2 "
                                "spatial dims take fixed dims", v->name);
    }
    cuvil_conv_nd_params p;
    if ((s = op_conv_nd_params(g, n, &p))) return s;
    int64_t dims[2 + CUVIL_ND_MAX] = {p.N, p.M};
    for (int i = 0; i < p.nsp; i++) dims[2 + i] = p.out[i];
    cir_set_shape(cir_out(g, n, 0), CIR_F32, 2 + p.nsp, dims);
    return CUVIL_OK;
}

static cuvil_status conv_nd_fold(cir_graph *g, cir_node *n) {
    cuvil_conv_nd_params p;
    cuvil_status s = op_conv_nd_params(g, n, &p);
    if (s) return s;
    float *out = cir_value_make_const(g, cir_out(g, n, 0));
    if (!out) return g->ctx->status;
    cir_value *b = cir_in(g, n, 2);
    cuvil_f32_conv_nd__scalar(&p, cir_in(g, n, 0)->data, cir_in(g, n, 1)->data, b ? b->data : NULL, out);
    return CUVIL_OK;
}

const cir_opdef cir_op_conv_nd = {"conv_nd", 0, 2, 3, 1, 1, conv_attrs, conv_nd_infer, conv_nd_fold, NULL, 0};
const cir_opdef cir_op_conv_transpose_nd = {"conv_transpose_nd", 0, 2, 3, 1, 1, convt_attrs, conv_nd_infer, conv_nd_fold,
                                            NULL, 0};
