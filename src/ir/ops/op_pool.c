/* op_pool.c -- max_pool, avg_pool (1-D/2-D, ceil_mode, count_include_pad, dilations,
 * auto_pad), global_avg_pool, global_max_pool. */
#include "ir/ops/ops.h"

#include <string.h>

/* The window of every spatial dim from the attributes and x's (fixed) dims: in, kernel k,
 * strides s, dilations d, pads pb/pe (auto_pad applied) and the output size out. */
static cuvil_status pool_dims(cir_graph *g, cir_node *n, int nsp, int64_t *in, int64_t *k, int64_t *s, int64_t *d,
                              int64_t *pb, int64_t *pe, int64_t *out) {
    cir_value *x = cir_in(g, n, 0);
    const int64_t *ks, *st, *pads, *dil;
    int nks = cir_attr_ints(n, "kernel_shape", &ks), nst = cir_attr_ints(n, "strides", &st);
    int npd = cir_attr_ints(n, "pads", &pads), ndl = cir_attr_ints(n, "dilations", &dil);
    if (nks != nsp) return cir_node_err(g, n, CUVIL_ERR_MODEL, "kernel_shape must have %d values", nsp);
    if ((nst >= 0 && nst != nsp) || (npd >= 0 && npd != 2 * nsp) || (ndl >= 0 && ndl != nsp))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "strides/pads/dilations do not match %d spatial dims", nsp);
    bool ceil_mode = cir_attr_int(n, "ceil_mode") != 0;
    int ap = (int)cir_attr_int(n, "auto_pad");
    if (ap != CIR_PAD_EXPLICIT && npd >= 0)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "pads and auto_pad='%s' are both given", cir_auto_pad_names[ap]);
    for (int i = 0; i < nsp; i++) {
        in[i] = x->dims[2 + i];
        k[i] = ks[i];
        s[i] = nst > 0 ? st[i] : 1;
        d[i] = ndl > 0 ? dil[i] : 1;
        pb[i] = npd > 0 ? pads[i] : 0;
        pe[i] = npd > 0 ? pads[i + nsp] : 0;
        if (k[i] <= 0 || s[i] <= 0 || d[i] <= 0 || pb[i] < 0 || pe[i] < 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "kernel_shape, strides and dilations must be positive, pads >= 0");
        int64_t lim = g->limits.dim;
        if (k[i] > lim || s[i] > lim || d[i] > lim || pb[i] > lim || pe[i] > lim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "kernel_shape, strides, dilations or pads over the limit dim=%lld",
                                (long long)lim);
        if (pb[i] >= k[i] || pe[i] >= k[i])
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "pads %lld, %lld along spatial dim %d must be smaller than the "
                                "kernel (%lld), as ONNX Runtime requires", (long long)pb[i], (long long)pe[i], i, (long long)k[i]);
        bool ovf = false;
        int64_t ek = cuvil_i64_add(&ovf, cuvil_i64_mul(&ovf, k[i] - 1, d[i]), 1);
        if (ovf) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "kernel %lld with dilation %lld is too large", (long long)k[i],
                                     (long long)d[i]);
        if (ap == CIR_PAD_SAME_UPPER || ap == CIR_PAD_SAME_LOWER) {
            out[i] = (in[i] + s[i] - 1) / s[i];
            int64_t total = cuvil_i64_sub(&ovf, cuvil_i64_add(&ovf, cuvil_i64_mul(&ovf, out[i] - 1, s[i]), ek), in[i]);
            if (ovf) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "padding along spatial dim %d overflows", i);
            if (total < 0) total = 0;
            pb[i] = ap == CIR_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            pe[i] = total - pb[i];
        } else if (ap == CIR_PAD_VALID) {
            pb[i] = pe[i] = 0;
            out[i] = in[i] < ek ? 0 : (in[i] - ek) / s[i] + 1;
        } else {
            int64_t span = in[i] + pb[i] + pe[i] - ek;
            if (span < 0) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "window larger than the padded input");
            out[i] = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
            /* the last window must start inside the input or its left padding (as ORT, PyTorch) */
            if (ceil_mode && (out[i] - 1) * s[i] >= in[i] + pb[i]) out[i]--;
        }
        if (out[i] <= 0) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "output size along spatial dim %d is not positive", i);
    }
    return CUVIL_OK;
}

cuvil_status op_pool_params(cir_graph *g, cir_node *n, cuvil_pool2d_params *p) {
    cir_value *x = cir_in(g, n, 0);
    memset(p, 0, sizeof *p);
    bool global = n->kind == CIR_OP_GLOBAL_AVG_POOL || n->kind == CIR_OP_GLOBAL_MAX_POOL;
    p->kind = n->kind == CIR_OP_MAX_POOL || n->kind == CIR_OP_GLOBAL_MAX_POOL ? CUVIL_POOL_MAX : CUVIL_POOL_AVG;
    if (x->ndim < 3) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d < 3", x->name, x->ndim);
    p->N = x->dims[0];
    p->C = x->dims[1];
    p->dil_h = p->dil_w = p->stride_h = p->stride_w = 1;
    if (global) {
        int64_t sp = 1;
        for (int i = 2; i < x->ndim; i++) sp *= x->dims[i];
        if (sp == 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has no spatial elements to pool over", x->name);
        p->H = 1;
        p->W = sp;
        p->KH = 1;
        p->KW = sp;
        p->OH = p->OW = 1;
        return CUVIL_OK;
    }
    int nsp = x->ndim - 2;
    if (nsp > 2) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "only 1-D and 2-D pooling is supported (input rank %d)", x->ndim);
    if (p->kind == CUVIL_POOL_MAX && cir_attr_int(n, "storage_order"))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "storage_order=1 is not supported");
    int64_t in[2], k[2], s[2], d[2], pb[2], pe[2], out[2];
    cuvil_status st = pool_dims(g, n, nsp, in, k, s, d, pb, pe, out);
    if (st) return st;
    int o = nsp == 1 ? 1 : 0;   /* a 1-D pool is a 2-D one with H = 1 */
    p->H = o ? 1 : in[0];
    p->W = in[nsp - 1];
    p->OH = o ? 1 : out[0];
    p->OW = out[nsp - 1];
    p->KH = o ? 1 : k[0];
    p->KW = k[nsp - 1];
    p->stride_h = o ? 1 : s[0];
    p->stride_w = s[nsp - 1];
    p->pad_t = o ? 0 : pb[0];
    p->pad_l = pb[nsp - 1];
    p->pad_b = o ? 0 : pe[0];
    p->pad_r = pe[nsp - 1];
    p->dil_h = o ? 1 : d[0];
    p->dil_w = d[nsp - 1];
    p->count_include_pad = p->kind == CUVIL_POOL_AVG ? (int)cir_attr_int(n, "count_include_pad") : 0;
    return CUVIL_OK;
}

cuvil_status op_pool_x(cir_graph *g, cir_node *n, op_geo_x *x) {
    cuvil_pool2d_params p;
    cuvil_status s = op_pool_params(g, n, &p);   /* the attributes, checked */
    if (s) return s;
    cir_value *v = cir_in(g, n, 0);
    cir_dimtab *t = &g->dt;
    const cir_dim *one = cir_dim_const(t, 1), *zero = cir_dim_const(t, 0);
    x->N = cir_dimx(g, v, 0);
    if (n->kind == CIR_OP_GLOBAL_AVG_POOL || n->kind == CIR_OP_GLOBAL_MAX_POOL) {
        const cir_dim *sp = one;
        for (int i = 2; i < v->ndim; i++) sp = cir_dim_mul(t, sp, cir_dimx(g, v, i));
        if (!sp) return cir_dim_err(g, n, "the pooled size");
        if (sp->lo <= 0) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the input may have no spatial elements");
        x->H = x->KH = x->OH = x->OW = one;
        x->W = x->KW = sp;
        x->pad_t = x->pad_l = x->pad_b = x->pad_r = zero;
        return CUVIL_OK;
    }
    int nsp = v->ndim - 2, ap = (int)cir_attr_int(n, "auto_pad");
    bool ceil_mode = cir_attr_int(n, "ceil_mode") != 0;
    const int64_t *ks, *st, *pads, *dil;
    int nst = cir_attr_ints(n, "strides", &st), npd = cir_attr_ints(n, "pads", &pads), ndl = cir_attr_ints(n, "dilations", &dil);
    cir_attr_ints(n, "kernel_shape", &ks);
    op_window w[2];
    for (int i = 0; i < nsp; i++) {
        int64_t d = ndl > 0 ? dil[i] : 1, ek = (ks[i] - 1) * d + 1;
        if ((s = op_window_x(g, n, i, cir_dimx(g, v, 2 + i), ek, nst > 0 ? st[i] : 1, ap, npd > 0 ? pads[i] : 0,
                             npd > 0 ? pads[i + nsp] : 0, ceil_mode, &w[i])))
            return s;
    }
    bool o = nsp == 1;
    x->H = o ? one : cir_dimx(g, v, 2);
    x->W = cir_dimx(g, v, 1 + nsp);
    x->OH = o ? one : w[0].out;
    x->OW = w[nsp - 1].out;
    x->KH = cir_dim_const(t, p.KH);
    x->KW = cir_dim_const(t, p.KW);
    x->pad_t = o ? zero : w[0].pb;
    x->pad_l = w[nsp - 1].pb;
    x->pad_b = o ? zero : w[0].pe;
    x->pad_r = w[nsp - 1].pe;
    return CUVIL_OK;
}

static cuvil_status pool_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    cir_value *x0 = cir_in(g, n, 0);
    if (!s && n->kind == CIR_OP_MAX_POOL && x0 && (x0->dtype == CIR_U8 || x0->dtype == CIR_I8)) {
        /* an 8-bit MaxPool (a QOperator model's, whose input type the frontend did not know yet)
         * runs on pool_nd, which takes it */
        cir_node_rekind(n, CIR_OP_POOL_ND);
        cuvil_attr mode = {.name = "mode", .type = CUVIL_ATTR_STRING, .s = "max"};
        if ((s = cir_node_set_attr(g, n, &mode))) return s;
        return n->def->infer(g, n);
    }
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cuvil_pool2d_params p;
    if ((s = op_pool_params(g, n, &p))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (x->dx[1]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the channels of '%s' are symbolic", x->name);
    if (!cir_value_fixed(x)) {
        op_geo_x gx;
        if ((s = op_pool_x(g, n, &gx))) return s;
        const cir_dim *dx[CIR_MAX_DIMS] = {gx.N, cir_dimx(g, x, 1)};
        for (int i = 2; i < x->ndim; i++) dx[i] = cir_dim_const(&g->dt, 1);
        if (n->kind != CIR_OP_GLOBAL_AVG_POOL && n->kind != CIR_OP_GLOBAL_MAX_POOL) {
            if (x->ndim == 3) dx[2] = gx.OW;
            else dx[2] = gx.OH, dx[3] = gx.OW;
        }
        cir_set_shape_x(cir_out(g, n, 0), CIR_F32, x->ndim, dx);
        return CUVIL_OK;
    }
    int64_t dims[CIR_MAX_DIMS];
    dims[0] = p.N;
    dims[1] = p.C;
    if (n->kind == CIR_OP_GLOBAL_AVG_POOL || n->kind == CIR_OP_GLOBAL_MAX_POOL) {
        for (int i = 2; i < x->ndim; i++) dims[i] = 1;
    } else if (x->ndim == 3) {
        dims[2] = p.OW;
    } else {
        dims[2] = p.OH;
        dims[3] = p.OW;
    }
    cir_set_shape(cir_out(g, n, 0), CIR_F32, x->ndim, dims);
    return CUVIL_OK;
}

static cuvil_status pool_fold(cir_graph *g, cir_node *n) {
    cuvil_pool2d_params p;
    cuvil_status s = op_pool_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_f32_pool2d__scalar(&p, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec max_pool_attrs[] = {
    {"kernel_shape", CIR_ATTR_INTS, 0, 0, NULL, true},
    {"strides", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"pads", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"dilations", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"auto_pad", CIR_ATTR_ENUM, CIR_PAD_EXPLICIT, 0, cir_auto_pad_names, false},
    {"ceil_mode", CIR_ATTR_INT, 0, 0, NULL, false},
    {"storage_order", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

static const cir_attr_spec avg_pool_attrs[] = {
    {"kernel_shape", CIR_ATTR_INTS, 0, 0, NULL, true},
    {"strides", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"pads", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"dilations", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"auto_pad", CIR_ATTR_ENUM, CIR_PAD_EXPLICIT, 0, cir_auto_pad_names, false},
    {"ceil_mode", CIR_ATTR_INT, 0, 0, NULL, false},
    {"count_include_pad", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_max_pool = {"max_pool", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, max_pool_attrs, pool_infer, pool_fold, NULL, 0};
const cir_opdef cir_op_avg_pool = {"avg_pool", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, avg_pool_attrs, pool_infer, pool_fold, NULL, 0};
const cir_opdef cir_op_global_avg_pool = {"global_avg_pool", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, pool_infer, pool_fold, NULL, 0};
const cir_opdef cir_op_global_max_pool = {"global_max_pool", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, pool_infer, pool_fold, NULL, 0};

/* ===== pool_nd ============================================================================ */
/* pool_nd (x; mode max/avg/lp, p, ...; y, [indices]): pooling over 1 to CUVIL_ND_MAX spatial
 * dims on cuvil_pool_nd, for what max_pool and avg_pool leave out: 3-D and wider, LpPool,
 * MaxPool's Indices output and its int8/uint8 inputs. Fixed dims. */
static const char *const pool_nd_modes[] = {"max", "avg", "lp", NULL};

cuvil_status op_pool_nd_params(cir_graph *g, cir_node *n, cuvil_pool_nd_params *p) {
    cir_value *x = cir_in(g, n, 0);
    memset(p, 0, sizeof *p);
    int nsp = x->ndim - 2;
    if (nsp < 1 || nsp > CUVIL_ND_MAX)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has rank %d; pooling takes [N, C] and 1 to %d spatial "
                            "dims", x->name, x->ndim, CUVIL_ND_MAX);
    p->nsp = nsp;
    p->kind = (int)cir_attr_int(n, "mode");
    p->dtype = (int)x->dtype;
    p->count_include_pad = p->kind == CUVIL_POOLND_AVG && cir_attr_int(n, "count_include_pad") != 0;
    p->storage_order = cir_attr_int(n, "storage_order") != 0;
    p->N = x->dims[0];
    p->C = x->dims[1];
    p->p = cir_attr_int(n, "p");
    if (p->kind == CUVIL_POOLND_LP && (p->p < 1 || p->p > 64))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "p=%lld; LpPool takes 1 to 64", (long long)p->p);
    cuvil_status s = pool_dims(g, n, nsp, p->in, p->k, p->s, p->d, p->pb, p->pe, p->out);
    if (s) return s;
    /* the direct loop's work: every output's window, bounded (2^40 taps) */
    bool ovf = false;
    int64_t work = cuvil_i64_mul(&ovf, p->N, p->C);
    for (int i = 0; i < nsp; i++) work = cuvil_i64_mul(&ovf, work, cuvil_i64_mul(&ovf, p->out[i], p->k[i]));
    if (ovf || work > ((int64_t)1 << 40))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its windows hold more than 2^40 taps in all");
    return CUVIL_OK;
}

static cuvil_status pool_nd_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 2);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int mode = (int)cir_attr_int(n, "mode");
    if (x->dtype != CIR_F32 && !(mode == CUVIL_POOLND_MAX && (x->dtype == CIR_U8 || x->dtype == CIR_I8)))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; %s pooling takes float32%s", x->name,
                            cir_dtype_name(x->dtype), pool_nd_modes[mode], mode == CUVIL_POOLND_MAX ? ", int8 and uint8" : "");
    if (cir_out_opt(g, n, 1) && mode != CUVIL_POOLND_MAX)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "only max pooling has an indices output");
    if (!cir_value_fixed(x))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has symbolic dims; this pooling (3-D or wider, LpPool, "
                            "MaxPool's indices or integer input) takes fixed dims", x->name);
    cuvil_pool_nd_params p;
    if ((s = op_pool_nd_params(g, n, &p))) return s;
    int64_t dims[2 + CUVIL_ND_MAX] = {p.N, p.C};
    for (int i = 0; i < p.nsp; i++) dims[2 + i] = p.out[i];
    cir_set_shape(cir_out(g, n, 0), x->dtype, 2 + p.nsp, dims);
    if (cir_out_opt(g, n, 1)) cir_set_shape(cir_out(g, n, 1), CIR_I64, 2 + p.nsp, dims);
    return CUVIL_OK;
}

static const cir_attr_spec pool_nd_attrs[] = {
    {"mode", CIR_ATTR_ENUM, 0, 0, pool_nd_modes, true},
    {"p", CIR_ATTR_INT, 2, 0, NULL, false},
    {"kernel_shape", CIR_ATTR_INTS, 0, 0, NULL, true},
    {"strides", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"pads", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"dilations", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"auto_pad", CIR_ATTR_ENUM, CIR_PAD_EXPLICIT, 0, cir_auto_pad_names, false},
    {"ceil_mode", CIR_ATTR_INT, 0, 0, NULL, false},
    {"count_include_pad", CIR_ATTR_INT, 0, 0, NULL, false},
    {"storage_order", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_pool_nd = {"pool_nd", 0, 1, 1, 1, 2, pool_nd_attrs, pool_nd_infer, NULL, NULL, 0};
