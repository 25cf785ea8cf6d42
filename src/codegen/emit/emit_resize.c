/* emit_resize.c -- resize (op_resize.c) on cuvil_f32_resize. */
#include "codegen/emit/emit_int.h"

static const char *const mode_syms[] = {"CUVIL_RESIZE_NEAREST", "CUVIL_RESIZE_LINEAR", "CUVIL_RESIZE_CUBIC"};
static const char *const coord_syms[] = {"CUVIL_COORD_HALF_PIXEL", "CUVIL_COORD_ASYMMETRIC", "CUVIL_COORD_ALIGN_CORNERS",
                                         "CUVIL_COORD_PYTORCH_HALF_PIXEL", "CUVIL_COORD_TF_HALF_PIXEL_FOR_NN",
                                         "CUVIL_COORD_HALF_PIXEL_SYMMETRIC", "CUVIL_COORD_TF_CROP_AND_RESIZE"};
static const char *const nearest_syms[] = {"CUVIL_NEAREST_ROUND_PREFER_FLOOR", "CUVIL_NEAREST_ROUND_PREFER_CEIL",
                                           "CUVIL_NEAREST_FLOOR", "CUVIL_NEAREST_CEIL"};

/* n floats as a C initialiser ("{ 0 }" for none) in buf. */
static const char *floats_init(char *buf, size_t len, const float *v, int n) {
    char f[32];
    size_t o = (size_t)snprintf(buf, len, "{");
    for (int d = 0; d < n; d++) o += (size_t)snprintf(buf + o, len - o, "%s%s", d ? ", " : " ", cg_float(v[d], f));
    snprintf(buf + o, len - o, "%s", n ? " }" : " 0 }");
    return buf;
}

cuvil_status cg_emit_resize(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_resize_params p;
    bool rt;
    int axes[CIR_MAX_DIMS], nax;
    cuvil_status s = op_resize_rt(g, n, &p, &rt, axes, &nax);
    if (s) return s;
    bool sym = cg_node_symbolic(g, n);
    if (sym) {   /* the scales a symbolic axis takes (op_resize_x) */
        const cir_dim *dx[CIR_MAX_DIMS];
        float sc[CIR_MAX_DIMS];
        if ((s = op_resize_x(g, n, &p, dx, sc))) return s;
        for (int d = 0; d < p.ndim; d++) p.scales[d] = sc[d];
    }
    char scales[CIR_MAX_DIMS * 36 + 8], lo[CIR_MAX_DIMS * 36 + 8], hi_roi[CIR_MAX_DIMS * 36 + 8], buf[32], a[32];
    floats_init(scales, sizeof scales, p.scales, p.ndim);
    char roi[CIR_MAX_DIMS * 80 + 128] = "";   /* tf_crop_and_resize's fields (a roi read when the model runs replaces them) */
    if (p.coord_mode == CUVIL_COORD_TF_CROP_AND_RESIZE)
        snprintf(roi, sizeof roi, ", .roi_lo = %s, .roi_hi = %s, .extrapolation_value = %s",
                 floats_init(lo, sizeof lo, p.roi_lo, p.ndim), floats_init(hi_roi, sizeof hi_roi, p.roi_hi, p.ndim),
                 cg_float(p.extrapolation_value, buf));
    if (rt) {   /* scales or sizes read when the model runs: p's dims and scales along the axes from them */
        int slots[CIR_MAX_DIMS];
        int64_t ax[CIR_MAX_DIMS];
        for (int i = 0; i < nax; i++) ax[i] = axes[i];
        const char *hi = cg_found_his(cg, g, n, nax, slots);
        cir_value *sc = cir_in(g, n, 2), *roi_v = cir_in(g, n, 1);
        bool by_scales = sc && cir_value_fixed(sc) && cir_numel(sc) > 0;
        bool roi_rt = p.coord_mode == CUVIL_COORD_TF_CROP_AND_RESIZE && !cir_is_const(roi_v);
        cg_printf(cg, "    {\n        static const int64_t hi[] = %s;\n        static const int ax[] = %s;\n"
                      "        cuvil_resize_params p = { .mode = %s, .coord_mode = %s, .nearest_mode = %s, .ndim = %d, "
                      ".in_dims = %s, .out_dims = %s, .scales = %s, .cubic_coeff_a = %s, .exclude_outside = %d%s };\n"
                      "        if (cuvil_resize_rt(&p, %d, ax, %s, %s, hi, %d, %s)) return 1;\n",
                  hi, cg_i64s(cg, ax, nax), mode_syms[p.mode], coord_syms[p.coord_mode], nearest_syms[p.nearest_mode], p.ndim, cg_dims_init(cg, n->in[0], p.ndim),
                  cg_dims_init(cg, n->in[0], p.ndim), scales, cg_float(p.cubic_coeff_a, a), p.exclude_outside, roi, nax,
                  by_scales ? cg_in(cg, n->in[2]) : "NULL", by_scales ? "NULL" : cg_in(cg, n->in[3]),
                  by_scales ? 0 : (int)cir_attr_int(n, "keep_aspect_ratio_policy"), roi_rt ? cg_in(cg, n->in[1]) : "NULL");
        for (int i = 0; i < nax; i++) cg_printf(cg, "        D[%d] = p.out_dims[%d];\n", slots[i], axes[i]);
        cg_printf(cg, "        cuvil_f32_resize(&p, %s, %s);\n    }\n", cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
        cg_fallible(cg, "its scales or sizes are not valid for its input, or give a dim over the output's declared or --dim size");
        return CUVIL_OK;
    }
    const char *ps = cg_param(cg, "cuvil_resize_params",
                              "{ .mode = %s, .coord_mode = %s, .nearest_mode = %s, .ndim = %d, .in_dims = %s, .out_dims = %s, "
                              ".scales = %s, .cubic_coeff_a = %s, .exclude_outside = %d%s }",
                              mode_syms[p.mode], coord_syms[p.coord_mode], nearest_syms[p.nearest_mode], p.ndim,
                              sym ? cg_dims_init(cg, n->in[0], p.ndim) : cg_i64s(cg, p.in_dims, p.ndim),
                              sym ? cg_dims_init(cg, n->out[0], p.ndim) : cg_i64s(cg, p.out_dims, p.ndim), scales, cg_float(p.cubic_coeff_a, a), p.exclude_outside,
                              roi);
    cg_printf(cg, "    cuvil_f32_resize(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
