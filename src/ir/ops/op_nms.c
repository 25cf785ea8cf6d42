/* op_nms.c -- non_max_suppression (boxes, scores, [max_output_boxes_per_class],
 * [iou_threshold], [score_threshold]; center_point_box): the boxes ONNX Runtime's greedy
 * suppression keeps (cuvil_nms), int64 [count, 3] rows (batch, class, box). boxes is float32
 * [B, N, 4], scores float32 [B, C, N], the optional inputs one element each (constant or read
 * when the model runs). count is a size the kernel finds, at most B * C * min(N, the maximum
 * when it is a constant), or less where the declared output or a --dim naming it says. */
#include "ir/ops/ops.h"

/* The checks, and B, C, N as expressions. */
static cuvil_status nms_layout(cir_graph *g, cir_node *n, const cir_dim **b, const cir_dim **c, const cir_dim **k) {
    cuvil_status s = op_check_arity(g, n, 2, 5, 1, 1);
    if (s || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1))) return s;
    cir_value *bx = cir_in(g, n, 0), *sc = cir_in(g, n, 1);
    if (bx->ndim != 3 || sc->ndim != 3)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "boxes '%s' and scores '%s' must have rank 3 (they have %d and %d)",
                            bx->name, sc->name, bx->ndim, sc->ndim);
    static const char *const what[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
    for (int i = 2; i < 5; i++) {
        cir_value *v = cir_in(g, n, i);
        if (!v) continue;
        cir_dtype want = i == 2 ? CIR_I64 : CIR_F32;
        if (v->dtype != want || !cir_value_fixed(v) || cir_numel(v) != 1)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s '%s' must be one %s element (it is %s with %lld)", what[i - 2],
                                v->name, cir_dtype_name(want), cir_dtype_name(v->dtype), (long long)cir_numel(v));
    }
    int64_t cpb = cir_attr_int(n, "center_point_box");
    if (cpb != 0 && cpb != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "center_point_box is %lld; it must be 0 or 1", (long long)cpb);
    *b = cir_dimx(g, bx, 0);
    *c = cir_dimx(g, sc, 1);
    *k = cir_dimx(g, bx, 1);
    if ((s = cir_require_eq(g, n, cir_dimx(g, bx, 2), cir_dim_const(&g->dt, 4), "the boxes' last dim and 4")) ||
        (s = cir_require_eq(g, n, *b, cir_dimx(g, sc, 0), "the batches of boxes and scores")) ||
        (s = cir_require_eq(g, n, *k, cir_dimx(g, sc, 2), "the box counts of boxes and scores")))
        return s;
    return CUVIL_OK;
}

cuvil_status op_nms_layout(cir_graph *g, cir_node *n, const cir_dim **b, const cir_dim **c, const cir_dim **k) {
    return nms_layout(g, n, b, c, k);
}

static cuvil_status nms_infer(cir_graph *g, cir_node *n) {
    const cir_dim *b, *c, *k;
    cuvil_status s = nms_layout(g, n, &b, &c, &k);
    if (s) return s;
    int64_t per = k->hi, bound;
    cir_value *mx = cir_in(g, n, 2);
    if (!mx) per = 0;   /* ONNX's default: no box */
    else if (cir_is_const(mx)) per = cir_const_i64(mx, 0) < 0 ? 0 : cir_const_i64(mx, 0) < per ? cir_const_i64(mx, 0) : per;
    if (__builtin_mul_overflow(b->hi, c->hi, &bound) || __builtin_mul_overflow(bound, per, &bound))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its output may have more rows than can be counted");
    const cir_dim *dx[2];
    if ((s = op_found_dim(g, n, 0, 0, 0, bound, false, &dx[0]))) return s;
    dx[1] = cir_dim_const(&g->dt, 3);
    cir_set_shape_x(cir_out(g, n, 0), CIR_I64, 2, dx);
    return CUVIL_OK;
}

static const cir_attr_spec nms_attrs[] = {{"center_point_box", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_nms = {"non_max_suppression", CIR_OPF_SYM_DIMS, 2, 5, 1, 1, nms_attrs, nms_infer, NULL, NULL, 0};
