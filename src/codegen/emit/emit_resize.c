/* emit_resize.c -- resize (op_resize.c) on cuvil_f32_resize. */
#include "codegen/emit/emit_int.h"

cuvil_status cg_emit_resize(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_resize_params p;
    cuvil_status s = op_resize_params(g, n, &p);
    if (s) return s;
    bool sym = cg_node_symbolic(g, n);
    if (sym) {   /* the scales a symbolic axis takes (op_resize_x) */
        const cir_dim *dx[CIR_MAX_DIMS];
        float sc[CIR_MAX_DIMS];
        if ((s = op_resize_x(g, n, &p, dx, sc))) return s;
        for (int d = 0; d < p.ndim; d++) p.scales[d] = sc[d];
    }
    char scales[CIR_MAX_DIMS * 36 + 8], buf[32], a[32];
    size_t o = (size_t)snprintf(scales, sizeof scales, "{");
    for (int d = 0; d < p.ndim; d++)
        o += (size_t)snprintf(scales + o, sizeof scales - o, "%s%s", d ? ", " : " ", cg_float(p.scales[d], buf));
    snprintf(scales + o, sizeof scales - o, "%s", p.ndim ? " }" : " 0 }");
    const char *ps = cg_param(cg, "cuvil_resize_params",
                              "{ .mode = %s, .coord_mode = %s, .nearest_mode = %s, .ndim = %d, .in_dims = %s, .out_dims = %s, "
                              ".scales = %s, .cubic_coeff_a = %s, .exclude_outside = %d }",
                              (const char *const[]){"CUVIL_RESIZE_NEAREST", "CUVIL_RESIZE_LINEAR", "CUVIL_RESIZE_CUBIC"}[p.mode],
                              (const char *const[]){"CUVIL_COORD_HALF_PIXEL", "CUVIL_COORD_ASYMMETRIC", "CUVIL_COORD_ALIGN_CORNERS",
                                                    "CUVIL_COORD_PYTORCH_HALF_PIXEL", "CUVIL_COORD_TF_HALF_PIXEL_FOR_NN",
                                                    "CUVIL_COORD_HALF_PIXEL_SYMMETRIC"}[p.coord_mode],
                              (const char *const[]){"CUVIL_NEAREST_ROUND_PREFER_FLOOR", "CUVIL_NEAREST_ROUND_PREFER_CEIL",
                                                    "CUVIL_NEAREST_FLOOR", "CUVIL_NEAREST_CEIL"}[p.nearest_mode], p.ndim,
                              sym ? cg_dims_init(cg, n->in[0], p.ndim) : cg_i64s(cg, p.in_dims, p.ndim),
                              sym ? cg_dims_init(cg, n->out[0], p.ndim) : cg_i64s(cg, p.out_dims, p.ndim), scales, cg_float(p.cubic_coeff_a, a), p.exclude_outside);
    cg_printf(cg, "    cuvil_f32_resize(&%s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_out(cg, n->out[0]));
    return CUVIL_OK;
}
