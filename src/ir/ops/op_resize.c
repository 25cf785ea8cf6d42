/* op_resize.c -- resize (x, [roi], [scales], [sizes]), float32, onto the one cuvil_f32_resize
 * kernel. Scales or sizes constant, or read when the model runs: the dims along the axes are
 * then sizes the node finds (bounded by the declared output or --dim OUTPUT=LO:HI). nearest_mode "simple" is ONNX Runtime's rounding
 * for ONNX's Resize-10 and Upsample, which the frontend maps here with asymmetric coordinates. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

/* keep in ORDER with CUVIL_COORD_* */
static const char *const coord_names[] = {"half_pixel",          "asymmetric",           "align_corners",
                                          "pytorch_half_pixel", "tf_half_pixel_for_nn", "half_pixel_symmetric",
                                          "tf_crop_and_resize", NULL};
/* keep in ORDER with CUVIL_NEAREST_*, then "simple": ONNX Runtime's rounding for Resize-10 and
 * Upsample (down when every axis upsamples, up when every axis downsamples) */
static const char *const nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple", NULL};
enum { NEAREST_SIMPLE = 4 };
static const char *const mode_names[] = {"nearest", "linear", "cubic", NULL};   /* ORDER: CUVIL_RESIZE_* */
static const char *const kar_names[] = {"stretch", "not_larger", "not_smaller", NULL};

/* Reads a constant float tensor (the scales) into out; *count -1 when absent or empty. With
 * rt, scales computed when the model runs set *rt (float32, their count into *count). */
static cuvil_status const_floats(cir_graph *g, cir_node *n, int i, float *out, int *count, bool *rt) {
    cir_value *v = cir_in(g, n, i);
    *count = -1;
    if (!v || (cir_value_fixed(v) && cir_numel(v) == 0)) return CUVIL_OK;
    if (!cir_is_const(v) && rt && v->dtype == CIR_F32 && v->ndim == 1 && cir_value_fixed(v) && cir_numel(v) <= CIR_MAX_DIMS) {
        *rt = true;
        *count = (int)cir_numel(v);
        return CUVIL_OK;
    }
    if (!cir_is_const(v))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "scales '%s' are computed at run time; Cuvil needs them constant%s",
                            v->name, rt ? " or a 1-D float32 tensor of fixed length" : "");
    if (v->dtype != CIR_F32 && v->dtype != CIR_F64 && v->dtype != CIR_F16)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "scales '%s' must be float, not %s", v->name, cir_dtype_name(v->dtype));
    if (cir_numel(v) > CIR_MAX_DIMS)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "scales '%s' has %lld values", v->name, (long long)cir_numel(v));
    *count = (int)cir_numel(v);
    for (int j = 0; j < *count; j++) out[j] = (float)cir_const_f64(v, j);
    return CUVIL_OK;
}

/* op_resize_params; with rt (non-NULL), scales or sizes read when the model runs set *rt, the
 * axes they apply to into axes[0..*nax) (p's dims and scales along them then left for the
 * run, cuvil_resize_rt). */
static cuvil_status resize_params(cir_graph *g, cir_node *n, cuvil_resize_params *p, bool *rt, int *axes, int *naxp) {
    cir_value *x = cir_in(g, n, 0);
    int r = x->ndim, nsc = -1, nsz = -1;
    float sc[CIR_MAX_DIMS];
    int64_t sz[CIR_MAX_DIMS];
    cuvil_status s;
    memset(p, 0, sizeof *p);

    /* ---- scales or sizes ---- */
    if ((s = const_floats(g, n, 2, sc, &nsc, rt))) return s;
    cir_value *sv = cir_in(g, n, 3);
    if (sv && rt && !cir_is_const(sv) && cir_value_fixed(sv) && cir_numel(sv) > 0 && sv->ndim == 1 && sv->dtype == CIR_I64 &&
        cir_numel(sv) <= CIR_MAX_DIMS) {
        *rt = true;
        nsz = (int)cir_numel(sv);
    } else if (sv && cir_numel(sv) > 0 && (s = op_const_ints(g, n, 3, "sizes", sz, CIR_MAX_DIMS, &nsz))) {
        return s;
    }
    if ((nsc >= 0) == (nsz >= 0))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "exactly one of scales and sizes must be given (non-empty)");

    /* ---- the axes they apply to (opset 18) ---- */
    const int64_t *axa = NULL;
    int na = cir_attr_ints(n, "axes", &axa), axes_own[CIR_MAX_DIMS];
    if (!axes) axes = axes_own;
    if (na > CIR_MAX_DIMS) return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute axes has %d values", na);
    bool seen[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < (na < 0 ? r : na); i++) {
        axes[i] = i;
        if (na >= 0 && (s = op_axis(g, n, axa[i], r, "axes", &axes[i]))) return s;
        if (seen[axes[i]]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d is repeated in axes", axes[i]);
        seen[axes[i]] = true;
    }
    int nax = na < 0 ? r : na, given = nsc >= 0 ? nsc : nsz;
    if (given != nax)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s has %d values; expected %d", nsc >= 0 ? "scales" : "sizes", given, nax);

    p->ndim = r;
    for (int d = 0; d < r; d++) {
        p->in_dims[d] = p->out_dims[d] = x->dims[d];
        p->scales[d] = 1.0f;
    }
    if (naxp) *naxp = nax;
    for (int i = 0; i < nax && !(rt && *rt); i++) {
        int d = axes[i];
        int64_t in = x->dims[d], out;
        if (nsc >= 0) {
            if (!(sc[i] > 0) || isinf(sc[i]))
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "scales[%d]=%g is not a positive number", i, (double)sc[i]);
            /* as ONNX Runtime computes it: float scale times the dim, truncated */
            float prod = sc[i] * (float)in;
            if (prod >= 9.0e15f)
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "scales[%d]=%g makes axis %d too large", i, (double)sc[i], d);
            out = (int64_t)prod;
            if (out <= 0)
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis %d of '%s' (size %lld) would become empty with scale %g", d,
                                    x->name, (long long)in, (double)sc[i]);
            p->scales[d] = sc[i];
        } else {
            out = sz[i];
            if (out <= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "sizes[%d]=%lld is not positive", i, (long long)out);
            if (in == 0) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot resize axis %d of '%s', which is empty", d, x->name);
            /* 0 asks the kernel to derive the scale from out/in itself (cuvil_rt.h), in the
             * arithmetic ONNX Runtime uses; a rounded ratio here (5/12 -> 0.41666666f) would
             * move exact nearest-neighbour ties off .5 */
            p->scales[d] = out == in ? 1.0f : 0.0f;
        }
        p->out_dims[d] = out;
    }

    /* ---- interpolation attributes ---- */
    p->mode = (int)cir_attr_int(n, "mode");
    p->cubic_coeff_a = cir_attr_float(n, "cubic_coeff_a");
    p->exclude_outside = cir_attr_int(n, "exclude_outside") != 0;
    int cm = (int)cir_attr_int(n, "coordinate_transformation_mode"), nm = (int)cir_attr_int(n, "nearest_mode");
    p->coord_mode = cm;
    for (int d = 0; d < r; d++) p->roi_lo[d] = 0.0f, p->roi_hi[d] = 1.0f;
    if (cm == CUVIL_COORD_TF_CROP_AND_RESIZE) {   /* the region of interest: constant, starts then ends */
        cir_value *roi = cir_in(g, n, 1);
        if (!roi || !cir_dtype_is_float(roi->dtype) || !cir_value_fixed(roi) || cir_numel(roi) != 2 * nax)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "tf_crop_and_resize needs roi, %d float values", 2 * nax);
        if (!cir_is_const(roi) && (!rt || roi->dtype != CIR_F32))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "a roi read when the model runs must be float32, with scales or "
                                "sizes read then too");
        for (int i = 0; i < nax && cir_is_const(roi); i++) {
            p->roi_lo[axes[i]] = (float)cir_const_f64(roi, i);
            p->roi_hi[axes[i]] = (float)cir_const_f64(roi, nax + i);
            if (!isfinite(p->roi_lo[axes[i]]) || !isfinite(p->roi_hi[axes[i]]) || fabsf(p->roi_lo[axes[i]]) > 1e6f ||
                fabsf(p->roi_hi[axes[i]]) > 1e6f)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "roi '%s' holds a value that is not finite (or beyond 1e6)",
                                    roi->name);
        }
        p->extrapolation_value = cir_attr_float(n, "extrapolation_value");
    }
    if (nm == NEAREST_SIMPLE && rt && *rt)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "Resize-10 or Upsample with scales computed when the model runs");
    if (nm == NEAREST_SIMPLE) {
        bool up = false, down = false;
        for (int d = 0; d < r; d++) {
            up |= p->scales[d] > 1.0f;
            down |= p->scales[d] < 1.0f;
        }
        if (p->mode == CUVIL_RESIZE_NEAREST && up && down)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "nearest mode that upsamples some axes and downsamples others");
        nm = down ? CUVIL_NEAREST_CEIL : CUVIL_NEAREST_FLOOR;
    }
    p->nearest_mode = nm;
    if (cir_attr_int(n, "antialias") != 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "antialias=%lld is not supported",
                            (long long)cir_attr_int(n, "antialias"));
    int kar = (int)cir_attr_int(n, "keep_aspect_ratio_policy");
    if (kar != 0 && nsz >= 0 && !(rt && *rt)) {   /* (scales given: the policy does not apply; sizes read when
                                                     * the model runs: cuvil_resize_rt applies it) */
        if (!cir_value_fixed(x))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "keep_aspect_ratio_policy '%s' on symbolic dims with constant "
                                "sizes", cir_attr_enum_name(n, "keep_aspect_ratio_policy"));
        /* one scale for every axis given, the least (not_larger) or greatest (not_smaller) of
         * sizes / dims, each output size rounded half up, as ONNX's reference */
        double scale = 0.0;
        for (int i = 0; i < nax; i++) {
            if (x->dims[axes[i]] == 0) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis %d of '%s' is empty", axes[i], x->name);
            double f = (double)sz[i] / (double)x->dims[axes[i]];
            if (i == 0 || (kar == 1 ? f < scale : f > scale)) scale = f;
        }
        for (int i = 0; i < nax; i++) {
            int d = axes[i];
            double o = scale * (double)x->dims[d] + 0.5;
            if (!(o < (double)g->limits.dim))
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis %d of '%s' would be over the limit dim", d, x->name);
            p->out_dims[d] = (int64_t)o;
            if (p->out_dims[d] <= 0)
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis %d of '%s' would become empty", d, x->name);
            p->scales[d] = (float)scale;
        }
    }
    return CUVIL_OK;
}

cuvil_status op_resize_params(cir_graph *g, cir_node *n, cuvil_resize_params *p) {
    return resize_params(g, n, p, NULL, NULL, NULL);
}

cuvil_status op_resize_rt(cir_graph *g, cir_node *n, cuvil_resize_params *p, bool *rt, int *axes, int *nax) {
    *rt = false;
    return resize_params(g, n, p, rt, axes, nax);
}

/* The output dims as expressions, and the scales the kernel takes (sizes mode on a symbolic
 * axis: 0, the kernel derives out/in when the model runs). A symbolic axis scaled by a factor
 * that is not an integer or 1/2^j (where ONNX Runtime's float product would not be an exact
 * floor of the dim) is refused. */
cuvil_status op_resize_x(cir_graph *g, cir_node *n, const cuvil_resize_params *p, const cir_dim **dx, float *scales) {
    cir_value *x = cir_in(g, n, 0), *sv = cir_in(g, n, 3);
    bool sizes = sv && cir_numel(sv) > 0;
    for (int d = 0; d < p->ndim; d++) {
        scales[d] = p->scales[d];
        if (!x->dx[d]) {
            dx[d] = cir_dim_const(&g->dt, p->out_dims[d]);
            continue;
        }
        float sc = p->scales[d];
        if (sizes) {   /* a fixed output size, whatever the input's */
            dx[d] = cir_dim_const(&g->dt, p->out_dims[d]);
            scales[d] = 0.0f;
        } else if (sc == 1.0f) {
            dx[d] = x->dx[d];
        } else if (sc > 1.0f && sc == floorf(sc) && sc < 65536.0f) {
            dx[d] = cir_dim_scale(&g->dt, x->dx[d], (int64_t)sc);
        } else if (sc < 1.0f && 1.0f / sc == floorf(1.0f / sc) && !((int64_t)(1.0f / sc) & ((int64_t)(1.0f / sc) - 1))) {
            dx[d] = cir_dim_fdiv(&g->dt, x->dx[d], cir_dim_const(&g->dt, (int64_t)(1.0f / sc)));
            if (dx[d] && dx[d]->lo < 1)
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "axis %d of '%s' may become empty with scale %g", d,
                                    x->name, (double)sc);
        } else {
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "scale %g on axis %d of '%s', whose size is symbolic (only "
                                "integer scales and 1/2^j)", (double)sc, d, x->name);
        }
        if (!dx[d]) return cir_dim_err(g, n, "the output's dims");
    }
    return CUVIL_OK;
}

static cuvil_status resize_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 4, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    cuvil_resize_params p;
    bool rt;
    int axes[CIR_MAX_DIMS], nax;
    if ((s = op_resize_rt(g, n, &p, &rt, axes, &nax))) return s;
    if (rt) {   /* scales or sizes read when the model runs: the dims along the axes are sizes it finds */
        const cir_dim *dx[CIR_MAX_DIMS];
        for (int d = 0; d < p.ndim; d++) dx[d] = cir_dimx(g, x, d);
        for (int i = 0; i < nax; i++)
            if ((s = op_found_dim(g, n, 0, axes[i], i, -1, false, &dx[axes[i]]))) return s;
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, p.ndim, dx);
        return CUVIL_OK;
    }
    if (!cir_value_fixed(x)) {
        const cir_dim *dx[CIR_MAX_DIMS];
        float sc[CIR_MAX_DIMS];
        if ((s = op_resize_x(g, n, &p, dx, sc))) return s;
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, p.ndim, dx);
        return CUVIL_OK;
    }
    cir_set_shape(cir_out(g, n, 0), x->dtype, p.ndim, p.out_dims);
    return CUVIL_OK;
}

static cuvil_status resize_fold(cir_graph *g, cir_node *n) {
    cuvil_resize_params p;
    cuvil_status s = op_resize_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_f32_resize(&p, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec resize_attrs[] = {
    {"mode", CIR_ATTR_ENUM, CUVIL_RESIZE_NEAREST, 0, mode_names, false},
    {"coordinate_transformation_mode", CIR_ATTR_ENUM, CUVIL_COORD_HALF_PIXEL, 0, coord_names, false},
    {"nearest_mode", CIR_ATTR_ENUM, CUVIL_NEAREST_ROUND_PREFER_FLOOR, 0, nearest_names, false},
    {"cubic_coeff_a", CIR_ATTR_FLOAT, 0, -0.75f, NULL, false},
    {"exclude_outside", CIR_ATTR_INT, 0, 0, NULL, false},
    {"antialias", CIR_ATTR_INT, 0, 0, NULL, false},
    {"keep_aspect_ratio_policy", CIR_ATTR_ENUM, 0, 0, kar_names, false},
    {"axes", CIR_ATTR_INTS, 0, 0, NULL, false},
    {"extrapolation_value", CIR_ATTR_FLOAT, 0, 0.0f, NULL, false},   /* tf_crop_and_resize only */
    CIR_ATTR_END,
};

const cir_opdef cir_op_resize = {"resize", CIR_OPF_SYM_DIMS, 1, 4, 1, 1, resize_attrs, resize_infer, resize_fold, NULL, 0};
