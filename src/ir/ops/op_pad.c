/* op_pad.c -- pad (x, pads, [constant_value], [axes]): constant/reflect/edge/wrap, the pads
 * constant, the value constant or read when the model runs. Negative pads crop. float32 on
 * cuvil_f32_pad, other types on cuvil_pad_t, at run time and when folded. */
#include "ir/ops/ops.h"

#include <string.h>

cuvil_status op_pad_params(cir_graph *g, cir_node *n, cuvil_pad_params *p) {
    cir_value *x = cir_in(g, n, 0);
    int r = x->ndim;
    int64_t pads[2 * CIR_MAX_DIMS], axes[CIR_MAX_DIMS];
    int np, na = -1;
    cuvil_status s;
    memset(p, 0, sizeof *p);
    if ((s = op_const_ints(g, n, 1, "pads", pads, 2 * CIR_MAX_DIMS, &np))) return s;
    cir_value *cv = cir_in(g, n, 2);
    if (cv && cv->dtype != x->dtype)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "constant_value '%s' is %s, input '%s' %s", cv->name,
                            cir_dtype_name(cv->dtype), x->name, cir_dtype_name(x->dtype));
    if (cv && !cir_value_fixed(cv))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "constant_value '%s' must be a scalar", cv->name);
    if (cv && cir_numel(cv) > 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "constant_value '%s' has %lld elements; it must be a scalar", cv->name,
                            (long long)cir_numel(cv));
    p->value = cv && cir_numel(cv) == 1 && cir_is_const(cv) && x->dtype == CIR_F32 ? (float)cir_const_f64(cv, 0) : 0.0f;
    if (cir_in(g, n, 3) && (s = op_const_ints(g, n, 3, "axes", axes, CIR_MAX_DIMS, &na))) return s;
    const char *mode = cir_attr_enum_name(n, "mode");
    p->mode = (int)cir_attr_int(n, "mode");   /* pad_modes is in CUVIL_PAD_* order */

    int nax = na >= 0 ? na : r;
    if (np != 2 * nax)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "pads has %d values; expected %d (2 x %d axes)", np, 2 * nax, nax);
    p->ndim = r;
    int64_t pad_end[CIR_MAX_DIMS] = {0};
    bool seen[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < nax; i++) {
        int ax = i;
        if (na >= 0 && (s = op_axis(g, n, axes[i], r, "axes", &ax))) return s;
        if (seen[ax]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d is repeated in axes", ax);
        seen[ax] = true;
        p->pad_begin[ax] = pads[i];
        pad_end[ax] = pads[nax + i];
    }
    for (int d = 0; d < r; d++) {
        int64_t in = x->dims[d], b = p->pad_begin[d], e = pad_end[d];
        /* |pads| are bounded by the checks below or produce a negative size: no overflow */
        if (b < -in || e < -in || b > (INT64_C(1) << 40) || e > (INT64_C(1) << 40))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "pads %lld, %lld are invalid for axis %d of size %lld", (long long)b,
                                (long long)e, d, (long long)in);
        int64_t out = in + b + e, kept = in + (b < 0 ? b : 0) + (e < 0 ? e : 0);
        if (out < 0 || kept < 0)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "pads %lld, %lld crop more than axis %d of size %lld holds",
                                (long long)b, (long long)e, d, (long long)in);
        p->in_dims[d] = in;
        p->out_dims[d] = out;
        if (p->mode != CUVIL_PAD_CONSTANT && (b > 0 || e > 0)) {
            if (kept == 0)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "mode '%s' cannot pad axis %d, which has no elements left", mode, d);
            /* what ONNX Runtime accepts: a reflection does not repeat the border element */
            int64_t lim = p->mode == CUVIL_PAD_REFLECT ? kept - 1 : p->mode == CUVIL_PAD_WRAP ? kept : INT64_MAX;
            if (b > lim || e > lim)
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                                    "mode '%s': pads %lld, %lld exceed what axis %d of size %lld allows", mode, (long long)b,
                                    (long long)e, d, (long long)kept);
        }
    }
    return CUVIL_OK;
}

/* Whether the pads (or axes) are read when the model runs (cuvil_pad_rt). */
bool op_pad_rt(cir_graph *g, cir_node *n) {
    cir_value *pads = cir_in(g, n, 1), *axes = cir_in(g, n, 3);
    return (!cir_is_const(pads) && !pads->sval) || (axes && !cir_is_const(axes) && !axes->sval);
}

static cuvil_status pad_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 4, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    if (op_pad_rt(g, n)) {   /* each output dim a size the run finds, bounded by the declared output or a --dim */
        cir_value *pads = cir_in(g, n, 1), *axes = cir_in(g, n, 3), *cv = cir_in(g, n, 2);
        for (int i = 1; i < 4; i += 2) {
            cir_value *v = i == 1 ? pads : axes;
            if (v && ((v->dtype != CIR_I64 && v->dtype != CIR_I32) || v->ndim != 1 || !cir_value_fixed(v) ||
                      (i == 3 && v->dtype != pads->dtype)))
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' read when the model runs must be a 1-D int64 "
                                    "or int32 tensor of fixed length (pads and axes of one type)", v->name);
        }
        if (cv && (cv->dtype != x->dtype || cir_numel(cv) > 1))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "constant_value '%s' must be a scalar of the input's type", cv->name);
        const cir_dim *dx[CIR_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++)
            if ((s = op_found_dim(g, n, 0, d, d, -1, false, &dx[d]))) return s;
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
        return CUVIL_OK;
    }
    cuvil_pad_params p;
    if ((s = op_pad_params(g, n, &p))) return s;   /* checked at the dims' upper bounds */
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < p.ndim; d++) {
        int64_t b = p.pad_begin[d], e = p.out_dims[d] - p.in_dims[d] - b;
        const cir_dim *in = cir_dimx(g, x, d);
        if (x->dx[d]) {
            /* and at the smallest sizes: no crop, and what the mode reflects or wraps is there */
            int64_t lo = x->dx[d]->lo, lim = p.mode == CUVIL_PAD_REFLECT ? lo - 1 : lo;
            if (b < 0 || e < 0 || (p.mode != CUVIL_PAD_CONSTANT && (b > 0 || e > 0) && (b > lim || e > lim || lo < 1)))
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "pads %lld, %lld of axis %d, whose size is symbolic "
                                    "(down to %lld)", (long long)b, (long long)e, d, (long long)lo);
        }
        if (!(dx[d] = cir_dim_add_const(&g->dt, in, b + e))) return cir_dim_err(g, n, "the output's dims");
    }
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, p.ndim, dx);
    return CUVIL_OK;
}

static cuvil_status pad_fold(cir_graph *g, cir_node *n) {
    cuvil_pad_params p;
    cuvil_status s = op_pad_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cir_value *x = cir_in(g, n, 0), *cv = cir_in(g, n, 2);
    if (x->dtype == CIR_F32) cuvil_f32_pad(&p, x->data, y->data);
    else cuvil_pad_t(&p, cir_dtype_size(x->dtype), x->data, y->data, cv && cir_numel(cv) == 1 ? cv->data : NULL);
    return CUVIL_OK;
}

static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap", NULL};   /* ORDER: CUVIL_PAD_* */
static const cir_attr_spec pad_attrs[] = {{"mode", CIR_ATTR_ENUM, 0, 0, pad_modes, false}, CIR_ATTR_END};

const cir_opdef cir_op_pad = {"pad", CIR_OPF_SYM_DIMS, 2, 4, 1, 1, pad_attrs, pad_infer, pad_fold, NULL, 0};
