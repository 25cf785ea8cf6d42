/* onnx_ops.c -- ONNX ops onto CIR ops. Each supported (op, opset) becomes canonical CIR: legacy
 * attribute forms become constant inputs (Reshape-1's shape, Squeeze/Unsqueeze/Reduce axes,
 * Split sizes, Slice-1's starts/ends/axes, Pad-2's pads and value, Clip-6's bounds,
 * Upsample-7's scales), opset-dependent defaults become explicit attributes (Softmax's axis,
 * Concat-1's axis), renamed or re-spelled attributes get CIR's names (transA -> trans_a,
 * auto_pad NOTSET -> explicit), and ops that are another op in disguise become it (Dropout ->
 * identity, CastLike -> cast, Upsample and Resize-10 -> resize, Constant -> a constant value).
 * After this file nothing looks at an ONNX op name or opset number. */
#include "frontend/onnx/onnx_int.h"
#include "ir/ops/ops.h"

#include <ctype.h>
#include <float.h>
#include <string.h>
#include <strings.h>

typedef cuvil_status (*map_fn)(onnx_mapper *m, onnx_node *on, cir_op_kind kind);

typedef struct op_map {
    const char *op;
    int since;
    cir_op_kind kind;
    map_fn map;          /* NULL: map_plain */
} op_map;

/* ===== Helpers ============================================================================ */
static onnx_attr *attr(onnx_node *on, const char *name) {
    for (int i = 0; i < on->n_attrs; i++)
        if (!strcmp(on->attrs[i].name, name)) {
            on->attrs[i].used = true;
            return &on->attrs[i];
        }
    return NULL;
}

static int64_t attr_int(onnx_node *on, const char *name, int64_t def) {
    onnx_attr *a = attr(on, name);
    return a && a->a.type == CUVIL_ATTR_INT ? a->a.i : def;
}

static cuvil_status node_err(onnx_mapper *m, const onnx_node *on, cuvil_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static cuvil_status node_err(onnx_mapper *m, const onnx_node *on, cuvil_status s, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cuvil_err(m->g->ctx, s, "%s: %s", on->desc, msg);
}

/* A constant made from an attribute: "<node>.<what>". Returns its id or -1. */
static int const_from(onnx_mapper *m, const onnx_node *on, const char *what, cir_dtype t, int ndim, const int64_t *dims,
                      const void *data) {
    char name[600];
    snprintf(name, sizeof name, "%.280s.%.280s", on->name, what);
    return cir_const_add(m->g, name, t, ndim, dims, data);
}

/* An INTS attribute as a 1-D int64 constant input; -1 when absent (*err set on failure). */
static int ints_input(onnx_mapper *m, onnx_node *on, const char *name, bool *err) {
    onnx_attr *a = attr(on, name);
    if (!a) return -1;
    int64_t n = (int64_t)a->a.n;
    int id = const_from(m, on, name, CIR_I64, 1, &n, a->a.ints);
    if (id < 0) *err = true;
    return id;
}

static int f32_scalar(onnx_mapper *m, onnx_node *on, const char *what, float v, bool *err) {
    int id = const_from(m, on, what, CIR_F32, 0, NULL, &v);
    if (id < 0) *err = true;
    return id;
}

static cuvil_status drop_output(onnx_mapper *m, onnx_node *on, int i, const char *why) {
    if (i >= on->n_out || on->out[i] < 0) return CUVIL_OK;
    if (m->n_dropped == m->cap_dropped) {
        int nc = m->cap_dropped ? 2 * m->cap_dropped : 8;
        onnx_dropped *p = cuvil_realloc(m->dropped, sizeof *p * (size_t)nc);
        if (!p) return cuvil_err(m->g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        m->dropped = p;
        m->cap_dropped = nc;
    }
    const char *desc = cuvil_arena_strdup(&m->g->arena, on->desc);
    if (!desc) return cuvil_err(m->g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    m->dropped[m->n_dropped++] = (onnx_dropped){on->out[i], desc, why};
    return CUVIL_OK;
}

/* Adds the CIR node: inputs/outputs as given, the attributes `set` (n_set of them), then every
 * ONNX attribute no mapping consumed, under its own name (the CIR op refuses ones it does not
 * have). `ignore` lists ONNX attributes with no meaning for inference. */
static cuvil_status add_node(onnx_mapper *m, onnx_node *on, cir_op_kind kind, int n_in, const int *in, int n_out,
                             const int *out, const cuvil_attr *set, int n_set, const char *const *ignore) {
    cir_graph *g = m->g;
    int id = cir_node_add(g, kind, on->name, on->op, n_in, in, n_out, out);
    if (id < 0) return g->ctx->status;
    cir_node *n = cir_node_at(g, id);
    cuvil_status s;
    for (int i = 0; i < n_set; i++)
        if ((s = cir_node_set_attr(g, n, &set[i]))) return s;
    for (int i = 0; i < on->n_attrs; i++) {
        onnx_attr *a = &on->attrs[i];
        bool skip = a->used;
        for (int k = 0; ignore && ignore[k] && !skip; k++) skip = !strcmp(ignore[k], a->name);
        if (skip) continue;
        if (a->tensor >= 0 || a->a.type == 0)
            return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "attribute '%s' is not supported", a->name);
        if ((s = cir_node_set_attr(g, n, &a->a))) return s;
    }
    return CUVIL_OK;
}

static const char *const no_ignore[] = {NULL};
static const char *const legacy_ignore[] = {"consumed_inputs", NULL};   /* opset 1's in-place hint */

static cuvil_status map_plain(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, NULL, 0, legacy_ignore);
}

/* auto_pad: ONNX's NOTSET/SAME_UPPER/... as CIR's explicit/same_upper/... */
static cuvil_status auto_pad(onnx_mapper *m, onnx_node *on, cuvil_attr *out, char *buf, size_t len, int *n_set) {
    onnx_attr *a = attr(on, "auto_pad");
    if (!a) return CUVIL_OK;
    const char *v = a->a.s ? a->a.s : "";
    if (!strcmp(v, "NOTSET")) v = "explicit";
    else if (strcmp(v, "SAME_UPPER") && strcmp(v, "SAME_LOWER") && strcmp(v, "VALID"))
        return node_err(m, on, CUVIL_ERR_MODEL, "unknown auto_pad '%s'", v);
    size_t k = 0;
    for (; v[k] && k < len - 1; k++) buf[k] = (char)tolower((unsigned char)v[k]);
    buf[k] = 0;
    out[(*n_set)++] = (cuvil_attr){.name = "auto_pad", .type = CUVIL_ATTR_STRING, .s = buf};
    return CUVIL_OK;
}

/* ===== Per-op mappings ===================================================================== */
/* The spatial dims of a convolution or pooling as far as the node tells before shapes are
 * inferred: kernel_shape's length, else the weight's or the input's declared rank; 0 unknown. */
static int spatial_dims(onnx_mapper *m, onnx_node *on) {
    for (int i = 0; i < on->n_attrs; i++)   /* (looked at, not consumed: the node takes it) */
        if (!strcmp(on->attrs[i].name, "kernel_shape")) return (int)on->attrs[i].a.n;
    for (int i = on->n_in > 1 ? 1 : 0; i >= 0; i--) {
        cir_value *v = on->in[i] >= 0 ? cir_val(m->g, on->in[i]) : NULL;
        if (v && v->ndim > 2) return v->ndim - 2;
    }
    return 0;
}

/* Conv, ConvTranspose, MaxPool, AveragePool, LpPool. What the 1-D/2-D ops do not cover goes
 * to the N-D ones: 3-D and wider (conv_nd, conv_transpose_nd, pool_nd), LpPool, MaxPool's
 * Indices output and its int8/uint8 input (pool_nd). */
static cuvil_status map_conv_pool(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    cuvil_attr set[2];
    char buf[16];
    int n_set = 0;
    cuvil_status s = auto_pad(m, on, set, buf, sizeof buf, &n_set);
    if (s) return s;
    int nsp = spatial_dims(m, on);
    if (kind == CIR_OP_CONV || kind == CIR_OP_CONV_TRANSPOSE) {
        if (nsp > 2) kind = kind == CIR_OP_CONV ? CIR_OP_CONV_ND : CIR_OP_CONV_TRANSPOSE_ND;
        return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, no_ignore);
    }
    if (kind == CIR_OP_CONV_INTEGER) return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, no_ignore);
    if (kind == CIR_OP_QLINEAR_CONV) {   /* x and w first, as conv's */
        if (on->n_in < 8) return node_err(m, on, CUVIL_ERR_MODEL, "QLinearConv has %d inputs; it takes 8 or 9", on->n_in);
        const int in[9] = {on->in[0], on->in[3], on->in[1], on->in[2], on->in[4], on->in[5], on->in[6], on->in[7],
                           on->n_in > 8 ? on->in[8] : -1};
        return add_node(m, on, kind, on->n_in > 8 ? 9 : 8, in, on->n_out, on->out, set, n_set, no_ignore);
    }
    bool indices = kind == CIR_OP_MAX_POOL && on->n_out > 1 && on->out[1] >= 0;
    cir_value *x = on->n_in > 0 && on->in[0] >= 0 ? cir_val(m->g, on->in[0]) : NULL;
    bool int_in = x && (x->dtype == CIR_U8 || x->dtype == CIR_I8);
    if (kind == CIR_OP_POOL_ND || nsp > 2 || indices || (kind == CIR_OP_MAX_POOL && int_in)) {
        const char *mode = kind == CIR_OP_POOL_ND ? "lp" : kind == CIR_OP_MAX_POOL ? "max" : "avg";
        set[n_set++] = (cuvil_attr){.name = "mode", .type = CUVIL_ATTR_STRING, .s = mode};
        return add_node(m, on, CIR_OP_POOL_ND, on->n_in, on->in, indices ? 2 : 1, on->out, set, n_set, no_ignore);
    }
    return add_node(m, on, kind, on->n_in, on->in, on->n_out > 1 ? 1 : on->n_out, on->out, set, n_set, no_ignore);
}

static int step(onnx_mapper *m, onnx_node *on, cir_op_kind k, int n_in, const int *in, int out, const char *what,
                const cuvil_attr *set, int n_set);
static int scalar_like(onnx_mapper *m, onnx_node *on, const char *what, float v, int x);
static void all_used(onnx_node *on);

/* BatchNormalization with training_mode=1 (opsets 14+) as CIR nodes, as ONNX's reference:
 * the batch's mean and (population) variance over every axis but 1 normalise x, and the
 * running statistics are input * momentum + batch's * (1 - momentum). X's rank must be known. */
static cuvil_status map_batch_norm_training(onnx_mapper *m, onnx_node *on) {
    cir_value *xv = cir_val(m->g, on->in[0]);
    if (xv->ndim < 2 || on->n_in < 5)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "training_mode=1 needs X's rank declared (at least 2) and 5 inputs");
    onnx_attr *ea = attr(on, "epsilon"), *ma = attr(on, "momentum");
    float eps = ea && ea->a.type == CUVIL_ATTR_FLOAT ? ea->a.f : 1e-5f, mom = ma && ma->a.type == CUVIL_ATTR_FLOAT ? ma->a.f : 0.9f;
    all_used(on);
    int64_t axes_v[CIR_MAX_DIMS], cshape[CIR_MAX_DIMS], flat = -1, na = 0, nc = xv->ndim - 1, one = 1;
    for (int i = 0; i < xv->ndim; i++)
        if (i != 1) axes_v[na++] = i;
    cshape[0] = -1;
    for (int i = 1; i < nc; i++) cshape[i] = 1;
    int x = on->in[0], axes = const_from(m, on, "axes", CIR_I64, 1, &na, axes_v);
    int cs = const_from(m, on, "channel shape", CIR_I64, 1, &nc, cshape), fl = const_from(m, on, "flat", CIR_I64, 1, &one, &flat);
    int e = scalar_like(m, on, "eps", eps, x), mo = scalar_like(m, on, "momentum", mom, x);
    int mo1 = scalar_like(m, on, "1-momentum", 1.0f - mom, x);
    if (axes < 0 || cs < 0 || fl < 0 || e < 0 || mo < 0 || mo1 < 0) return m->g->ctx->status;
    int mean = step(m, on, CIR_OP_REDUCE_MEAN, 2, (int[]){x, axes}, -1, "mean", NULL, 0);
    int d = mean < 0 ? -1 : step(m, on, CIR_OP_SUB, 2, (int[]){x, mean}, -1, "centred", NULL, 0);
    int d2 = d < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){d, d}, -1, "centred2", NULL, 0);
    int var = d2 < 0 ? -1 : step(m, on, CIR_OP_REDUCE_MEAN, 2, (int[]){d2, axes}, -1, "var", NULL, 0);
    int ve = var < 0 ? -1 : step(m, on, CIR_OP_ADD, 2, (int[]){var, e}, -1, "var_eps", NULL, 0);
    int sd = ve < 0 ? -1 : step(m, on, CIR_OP_SQRT, 1, &ve, -1, "std", NULL, 0);
    int q = sd < 0 ? -1 : step(m, on, CIR_OP_DIV, 2, (int[]){d, sd}, -1, "normed", NULL, 0);
    int sc = q < 0 ? -1 : step(m, on, CIR_OP_RESHAPE, 2, (int[]){on->in[1], cs}, -1, "scale", NULL, 0);
    int bi = sc < 0 ? -1 : step(m, on, CIR_OP_RESHAPE, 2, (int[]){on->in[2], cs}, -1, "bias", NULL, 0);
    int ys = bi < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){q, sc}, -1, "scaled", NULL, 0);
    if (ys < 0 || step(m, on, CIR_OP_ADD, 2, (int[]){ys, bi}, on->out[0], "y", NULL, 0) < 0) return m->g->ctx->status;
    for (int k = 0; k < 2; k++) {   /* running mean (output 1), running variance (output 2) */
        if (on->n_out <= 1 + k || on->out[1 + k] < 0) continue;
        int bf = step(m, on, CIR_OP_RESHAPE, 2, (int[]){k ? var : mean, fl}, -1, k ? "batch_var" : "batch_mean", NULL, 0);
        int a = bf < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){on->in[3 + k], mo}, -1, k ? "var_kept" : "mean_kept", NULL, 0);
        int b = a < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){bf, mo1}, -1, k ? "var_new" : "mean_new", NULL, 0);
        if (b < 0 || step(m, on, CIR_OP_ADD, 2, (int[]){a, b}, on->out[1 + k], k ? "running_var" : "running_mean", NULL, 0) < 0)
            return m->g->ctx->status;
    }
    return CUVIL_OK;
}

static cuvil_status map_batch_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    /* before opset 7, is_test=0 (the default) means training mode */
    if (on->opset < 7 && attr_int(on, "is_test", 0) != 1)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "is_test=0 (training mode, opsets before 7) is not supported");
    if (attr_int(on, "spatial", 1) == 0)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "spatial=0 (statistics per activation, opsets 7-8) is not supported");
    if (attr_int(on, "training_mode", 0)) return map_batch_norm_training(m, on);
    /* from opset 14 the running-statistics outputs exist only in training mode */
    for (int i = 1; i < on->n_out; i++) {
        if (on->out[i] < 0) continue;
        if (on->opset >= 14)
            return node_err(m, on, CUVIL_ERR_MODEL, "output %d (running statistics) is only produced with training_mode=1",
                            i);
        cuvil_status s = drop_output(m, on, i, "running statistics; inference only");
        if (s) return s;
    }
    static const char *const ignore[] = {"momentum", "consumed_inputs", NULL};
    return add_node(m, on, kind, on->n_in, on->in, 1, on->out, NULL, 0, ignore);
}

static cuvil_status map_dropout(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (on->opset < 7 && attr_int(on, "is_test", 0) != 1)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "is_test=0 (training mode, opsets before 7) is not supported");
    static const char *const ignore[] = {"ratio", "seed", "consumed_inputs", NULL};
    bool mask = on->opset >= 7 && on->n_out > 1 && on->out[1] >= 0;   /* (before opset 7 it had no meaning) */
    if (on->n_in > 2 && on->in[2] >= 0) {
        cir_value *t = cir_val(m->g, on->in[2]);
        if (cir_is_const(t) && cir_numel(t) == 1 && cir_const_i64(t, 0) && !(on->in[1] >= 0 && cir_is_const(cir_val(m->g, on->in[1])) &&
                                                                          cir_const_f64(cir_val(m->g, on->in[1]), 0) == 0))
            return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "training_mode is true: training-mode Dropout (random masking) is "
                            "not supported");
        if (!cir_is_const(t) || mask)   /* known when the model runs: checked then */
            return add_node(m, on, CIR_OP_DROPOUT, 3, on->in, mask ? 2 : 1, on->out, NULL, 0, ignore);
    }
    if (mask) return add_node(m, on, CIR_OP_DROPOUT, on->n_in > 2 ? 2 : on->n_in, on->in, 2, on->out, NULL, 0, ignore);
    cuvil_status s = drop_output(m, on, 1, "the mask output; inference only");
    if (s) return s;
    return add_node(m, on, kind, 1, on->in, 1, on->out, NULL, 0, ignore);
}

static cuvil_status map_clip(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (on->opset >= 11) return map_plain(m, on, kind);
    /* Clip-1/6: bounds are attributes; absent, float's lowest and highest values */
    onnx_attr *lo = attr(on, "min"), *hi = attr(on, "max");
    bool err = false;
    int in[3] = {on->in[0], lo ? f32_scalar(m, on, "min", lo->a.f, &err) : -1,
                 hi ? f32_scalar(m, on, "max", hi->a.f, &err) : -1};
    if (err) return m->g->ctx->status;
    return add_node(m, on, kind, 3, in, on->n_out, on->out, NULL, 0, legacy_ignore);
}

/* Add, Sub, Mul, Div, Pow before opset 7 (Max, Min 8; Sum, Mean 8): no broadcasting unless
 * broadcast=1, which aligns B at `axis`. */
static cuvil_status legacy_bcast(onnx_mapper *m, onnx_node *on, cir_op_kind kind, cuvil_attr *set, int *n_set) {
    (void)m;
    bool maxmin = kind == CIR_OP_MAX || kind == CIR_OP_MIN || kind == CIR_OP_SUM || kind == CIR_OP_MEAN;
    if (kind == CIR_OP_PRELU || on->opset >= (maxmin ? 8 : 7)) return CUVIL_OK;
    bool b = !maxmin && attr_int(on, "broadcast", 0) != 0;
    set[(*n_set)++] = (cuvil_attr){.name = "broadcast", .type = CUVIL_ATTR_STRING, .s = b ? "legacy" : "none"};
    onnx_attr *ax = attr(on, "axis");
    if (ax && b) set[(*n_set)++] = ax->a;
    return CUVIL_OK;
}

/* PRelu before opset 7: a slope of C values is per channel (axis 1, as PyTorch exports it);
 * with X's rank declared, the slope is reshaped to [C, 1, ...] so that it broadcasts so.
 * *slope is the slope to use. */
static cuvil_status legacy_prelu_slope(onnx_mapper *m, onnx_node *on, int *slope) {
    cir_value *x = cir_val(m->g, on->in[0]), *sl = cir_val(m->g, on->in[1]);
    if (x->ndim < 3 || sl->ndim != 1 || sl->dims[0] <= 1 || x->dx[1] || x->dim_sym[1] >= 0 || x->dims[1] != sl->dims[0]) return CUVIL_OK;
    int64_t shape[CIR_MAX_DIMS], r = x->ndim - 1;
    shape[0] = sl->dims[0];
    for (int i = 1; i < r; i++) shape[i] = 1;
    int sid = const_from(m, on, "slope shape", CIR_I64, 1, &r, shape);
    if (sid < 0) return m->g->ctx->status;
    char name[600];
    snprintf(name, sizeof name, "%.280s (per channel)", sl->name);
    int t = cir_value_add(m->g, name, CIR_VAL_ACT);
    int in[2] = {on->in[1], sid};
    if (t < 0 || cir_node_add(m->g, CIR_OP_RESHAPE, on->name, on->op, 2, in, 1, &t) < 0) return m->g->ctx->status;
    *slope = t;
    return CUVIL_OK;
}

static cuvil_status map_binary(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    cuvil_attr set[2];
    int n_set = 0;
    cuvil_status s = legacy_bcast(m, on, kind, set, &n_set);
    if (s) return s;
    int nin = on->n_in;
    if (kind == CIR_OP_PRELU && on->opset < 7 && nin == 2 && on->in[0] >= 0 && on->in[1] >= 0) {
        int in2[2] = {on->in[0], on->in[1]};
        if ((s = legacy_prelu_slope(m, on, &in2[1]))) return s;
        return add_node(m, on, kind, 2, in2, on->n_out, on->out, set, n_set, legacy_ignore);
    }
    if ((kind == CIR_OP_MAX || kind == CIR_OP_MIN) && nin > 2) {
        /* variadic Max/Min: a chain of two-input nodes, each output an intermediate value */
        int acc = on->in[0];
        for (int i = 1; i < nin - 1; i++) {
            char name[600];
            snprintf(name, sizeof name, "%.280s:%d", on->name, i);
            int t = cir_value_add(m->g, name, CIR_VAL_ACT);
            if (t < 0) return m->g->ctx->status;
            int in2[2] = {acc, on->in[i]};
            if ((s = add_node(m, on, kind, 2, in2, 1, &t, set, n_set, legacy_ignore))) return s;
            acc = t;
        }
        int in2[2] = {acc, on->in[nin - 1]};
        return add_node(m, on, kind, 2, in2, on->n_out, on->out, set, n_set, legacy_ignore);
    }
    return add_node(m, on, kind, nin, on->in, on->n_out, on->out, set, n_set, legacy_ignore);
}

static cuvil_status map_gemm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    cuvil_attr set[3];
    int n_set = 0;
    onnx_attr *ta = attr(on, "transA"), *tb = attr(on, "transB");
    if (ta) set[n_set++] = (cuvil_attr){.name = "trans_a", .type = CUVIL_ATTR_INT, .i = ta->a.i};
    if (tb) set[n_set++] = (cuvil_attr){.name = "trans_b", .type = CUVIL_ATTR_INT, .i = tb->a.i};
    if (on->opset < 7) set[n_set++] = (cuvil_attr){.name = "broadcast_c", .type = CUVIL_ATTR_INT, .i = attr_int(on, "broadcast", 0)};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, no_ignore);
}

/* An attribute that later opsets made input `slot`: the node gets it as a constant there. */
static cuvil_status map_attr_to_input(onnx_mapper *m, onnx_node *on, cir_op_kind kind, const char *name, int slot,
                                      int since_input) {
    if (on->opset >= since_input) return map_plain(m, on, kind);
    bool err = false;
    int in[2] = {on->in[0], ints_input(m, on, name, &err)};
    if (err) return m->g->ctx->status;
    for (int i = 1; i < on->n_in && i < 2; i++)
        if (on->in[i] >= 0 && in[1] < 0) in[1] = on->in[i];   /* Split-1's optional input */
    return add_node(m, on, kind, in[slot] >= 0 ? slot + 1 : 1, in, on->n_out, on->out, NULL, 0, legacy_ignore);
}

static cuvil_status map_reshape(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    return map_attr_to_input(m, on, kind, "shape", 1, 5);
}
static cuvil_status map_squeeze(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    return map_attr_to_input(m, on, kind, "axes", 1, 13);
}
static cuvil_status map_split(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    return map_attr_to_input(m, on, kind, "split", 1, 13);
}
static cuvil_status map_reduce(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    return map_attr_to_input(m, on, kind, "axes", 1, kind == CIR_OP_REDUCE_SUM ? 13 : 18);
}

/* ReduceLogSum: log of reduce_sum, through an intermediate value. */
static cuvil_status map_reduce_log_sum(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    char name[600];
    snprintf(name, sizeof name, "%.280s:sum", on->name);
    int t = cir_value_add(m->g, name, CIR_VAL_ACT);
    if (t < 0) return m->g->ctx->status;
    int *outs = on->out, n_out = on->n_out;
    on->out = &t;
    on->n_out = 1;
    cuvil_status s = map_attr_to_input(m, on, CIR_OP_REDUCE_SUM, "axes", 1, 18);
    on->out = outs;
    on->n_out = n_out;
    if (s) return s;
    static const char *const reduce_attrs[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};
    return add_node(m, on, CIR_OP_LOG, 1, &t, on->n_out, on->out, NULL, 0, reduce_attrs);
}

/* NegativeLogLikelihoodLoss on inputs in: ignore_index has no default (absent: every target
 * counts), so the node says whether it has one; reduction and ignore_index pass as they are. */
static cuvil_status add_nll(onnx_mapper *m, onnx_node *on, int n_in, const int *in) {
    cuvil_attr set[1];
    int n_set = 0;
    if (attr(on, "ignore_index")) set[n_set++] = (cuvil_attr){.name = "has_ignore_index", .type = CUVIL_ATTR_INT, .i = 1};
    for (int i = 0; i < on->n_attrs; i++) on->attrs[i].used &= strcmp(on->attrs[i].name, "ignore_index") != 0;
    return add_node(m, on, CIR_OP_NLL_LOSS, n_in, in, 1, on->out, set, n_set, no_ignore);
}

static cuvil_status map_nll(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    return add_nll(m, on, on->n_in, on->in);
}

/* SoftmaxCrossEntropyLoss: log_softmax along axis 1 (into the log_prob output when the node
 * has it), then nll_loss, as ONNX's function body defines it. */
static cuvil_status map_sce(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    int lp = on->n_out > 1 ? on->out[1] : -1;
    if (lp < 0) {
        char name[600];
        snprintf(name, sizeof name, "%.280s:log_prob", on->name);
        if ((lp = cir_value_add(m->g, name, CIR_VAL_ACT)) < 0) return m->g->ctx->status;
    }
    cuvil_attr ax = {.name = "axis", .type = CUVIL_ATTR_INT, .i = 1};
    static const char *const loss_attrs[] = {"reduction", "ignore_index", NULL};
    cuvil_status s = add_node(m, on, CIR_OP_LOG_SOFTMAX, 1, on->in, 1, &lp, &ax, 1, loss_attrs);
    if (s) return s;
    int in[3] = {lp, on->in[1], on->n_in > 2 ? on->in[2] : -1};
    return add_nll(m, on, in[2] >= 0 ? 3 : 2, in);
}

/* Mod: fmod=0 on floats (numpy's mod) is valid from opset 28 */
static cuvil_status map_mod(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    cuvil_attr set[1] = {{.name = "float_floor", .type = CUVIL_ATTR_INT, .i = on->opset >= 28}};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, 1, no_ignore);
}

/* QuantizeLinear, DequantizeLinear: output_dtype as CIR's `to`; precision (opset 25: the
 * division's type) is float32 here */
static cuvil_status map_quant(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *od = attr(on, "output_dtype");
    cuvil_attr set[1];
    int n_set = 0;
    if (od && od->a.i) set[n_set++] = (cuvil_attr){.name = "to", .type = CUVIL_ATTR_INT, .i = od->a.i};
    onnx_attr *pr = attr(on, "precision");
    if (pr && pr->a.i && pr->a.i != 1)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "precision=%lld is not supported (float32)", (long long)pr->a.i);
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, no_ignore);
}

/* HannWindow, HammingWindow, BlackmanWindow: window with its kind; output_datatype as dtype */
static cuvil_status map_window(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *od = attr(on, "output_datatype");
    cuvil_attr set[2] = {{.name = "kind", .type = CUVIL_ATTR_INT, .i = on->op[1] == 'a' ? (on->op[2] == 'n' ? 0 : 1) : 2}};
    int n_set = 1;
    if (od) set[n_set++] = (cuvil_attr){.name = "dtype", .type = CUVIL_ATTR_INT, .i = od->a.i};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, no_ignore);
}

static cuvil_status map_concat(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    bool has = false;
    for (int i = 0; i < on->n_attrs; i++) has |= !strcmp(on->attrs[i].name, "axis");
    if (on->opset >= 4 || has) return map_plain(m, on, kind);
    cuvil_attr set[1] = {{.name = "axis", .type = CUVIL_ATTR_INT, .i = 1}};   /* Concat-1's default */
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, 1, no_ignore);
}

/* softmax's attributes for on's axis under Softmax's opset (before 13: over the dims from axis
 * on, as one, axis 1 by default) into set; their count. */
static int softmax_attrs(onnx_node *on, int64_t opset, cuvil_attr set[2]) {
    const bool coerce = opset < 13;
    set[0] = (cuvil_attr){.name = "axis", .type = CUVIL_ATTR_INT, .i = attr_int(on, "axis", coerce ? 1 : -1)};
    set[1] = (cuvil_attr){.name = "coerce_2d", .type = CUVIL_ATTR_INT, .i = 1};
    return coerce ? 2 : 1;
}

static cuvil_status map_softmax(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    cuvil_attr set[2];
    const int n_set = softmax_attrs(on, on->opset, set);
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, no_ignore);
}

/* LayerNormalization: stash_type (the type of the Mean and InvStdDev outputs) must be float32,
 * the precision the statistics are computed in. */
static cuvil_status map_layer_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *st = attr(on, "stash_type");
    if (st && st->a.i != 1)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "stash_type=%lld is not supported (only 1, float32)",
                        (long long)st->a.i);
    static const char *const ignore[] = {"stash_type", NULL};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, NULL, 0, ignore);
}

/* RMSNormalization: layer_norm without the mean (rms=1), no bias, only Y. */
static cuvil_status map_rms_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *st = attr(on, "stash_type");
    if (st && st->a.i != 1)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "stash_type=%lld is not supported (only 1, float32)",
                        (long long)st->a.i);
    cuvil_attr set[1] = {{.name = "rms", .type = CUVIL_ATTR_INT, .i = 1}};
    static const char *const ignore[] = {"stash_type", NULL};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, 1, ignore);
}

/* Attention (opsets 23-25): sdpa. scale has no default value (absent: 1 / sqrt(head size)), so
 * the node says whether it has one; a node with a cache gets present outputs (the kernel reads
 * the joined keys and values from them). */
static cuvil_status map_attention(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    /* softmax_precision: the softmax runs in float32 whatever it asks (float64 too) */
    cuvil_attr set[1];
    int n_set = 0;
    if (attr(on, "scale")) set[n_set++] = (cuvil_attr){.name = "has_scale", .type = CUVIL_ATTR_INT, .i = 1};
    for (int i = 0; i < on->n_attrs; i++) on->attrs[i].used &= strcmp(on->attrs[i].name, "scale") != 0;
    int out[4] = {-1, -1, -1, -1}, n_in = on->n_in;
    for (int i = 0; i < on->n_out && i < 4; i++) out[i] = on->out[i];
    bool cache = n_in > 4 && on->in[4] >= 0;
    for (int i = 1; i < 3 && cache; i++)
        if (out[i] < 0) {
            char name[600];
            snprintf(name, sizeof name, "%.280s:present_%s", on->name, i == 1 ? "key" : "value");
            if ((out[i] = cir_value_add(m->g, name, CIR_VAL_ACT)) < 0) return m->g->ctx->status;
        }
    int n_out = out[3] >= 0 ? 4 : out[2] >= 0 ? 3 : out[1] >= 0 ? 2 : 1;
    static const char *const ignore[] = {"softmax_precision", NULL};
    return add_node(m, on, kind, n_in, on->in, n_out, out, set, n_set, ignore);
}

/* RNN, GRU, LSTM: rnn with the cell, and the activations resolved into codes with their alpha
 * and beta (activation_alpha/_beta are taken in order by the activations that use them; the
 * others have their op's defaults). */
static cuvil_status rnn_node(onnx_mapper *m, onnx_node *on, int n_in, const int *in, int quant) {
    static const struct {
        const char *name;
        int fn, uses_alpha, uses_beta;
        float alpha, beta;
    } acts[] = {{"Sigmoid", CUVIL_RNN_ACT_SIGMOID, 0, 0, 0, 0}, {"Tanh", CUVIL_RNN_ACT_TANH, 0, 0, 0, 0},
                {"Relu", CUVIL_RNN_ACT_RELU, 0, 0, 0, 0}, {"Affine", CUVIL_RNN_ACT_AFFINE, 1, 1, 1.0f, 0.0f},
                {"LeakyRelu", CUVIL_RNN_ACT_LEAKY_RELU, 1, 0, 0.01f, 0}, {"ThresholdedRelu", CUVIL_RNN_ACT_THRESHOLDED_RELU, 1, 0, 1.0f, 0},
                {"ScaledTanh", CUVIL_RNN_ACT_SCALED_TANH, 1, 1, 1.0f, 1.0f}, {"HardSigmoid", CUVIL_RNN_ACT_HARD_SIGMOID, 1, 1, 0.2f, 0.5f},
                {"Elu", CUVIL_RNN_ACT_ELU, 1, 0, 1.0f, 0}, {"Softsign", CUVIL_RNN_ACT_SOFTSIGN, 0, 0, 0, 0},
                {"Softplus", CUVIL_RNN_ACT_SOFTPLUS, 0, 0, 0, 0}};
    int cell = !strcmp(on->op, "LSTM") || !strcmp(on->op, "DynamicQuantizeLSTM") ? CUVIL_CELL_LSTM
               : !strcmp(on->op, "GRU")                                            ? CUVIL_CELL_GRU
                                                                                   : CUVIL_CELL_RNN;
    int per = cell == CUVIL_CELL_LSTM ? 3 : cell == CUVIL_CELL_GRU ? 2 : 1;
    onnx_attr *dir = attr(on, "direction");
    const char *dv = dir && dir->a.s ? dir->a.s : "forward";
    int dirs = !strcmp(dv, "bidirectional") ? 2 : 1;
    if (dirs == 1 && strcmp(dv, "forward") && strcmp(dv, "reverse"))
        return node_err(m, on, CUVIL_ERR_MODEL, "direction '%s' is not forward, reverse or bidirectional", dv);
    onnx_attr *an = attr(on, "activations"), *aa = attr(on, "activation_alpha"), *ab = attr(on, "activation_beta");
    int n_names = an ? an->n_strs : 0;
    if (an && n_names != per * dirs && n_names != per)
        return node_err(m, on, CUVIL_ERR_MODEL, "activations has %d names; %s %s takes %d", n_names, dv, on->op, per * dirs);
    int64_t codes[6] = {0};
    float al[6] = {0}, be[6] = {0};
    int ia = 0, ib = 0;
    for (int d = 0; d < dirs; d++)
        for (int k = 0; k < per; k++) {
            int i = d * 3 + k;
            if (d == 1 && n_names == per) {   /* one set named for both directions: the same */
                codes[i] = codes[k], al[i] = al[k], be[i] = be[k];
                continue;
            }
            const char *name = n_names ? an->strs[d * per + k] : (cell == CUVIL_CELL_RNN || k > 0) ? "Tanh" : "Sigmoid";
            size_t j = 0;
            while (j < sizeof acts / sizeof acts[0] && strcasecmp(acts[j].name, name)) j++;
            if (j == sizeof acts / sizeof acts[0])
                return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "activation '%s' is not supported", name);
            codes[i] = acts[j].fn, al[i] = acts[j].alpha, be[i] = acts[j].beta;
            if (acts[j].uses_alpha && aa && aa->a.type == CUVIL_ATTR_FLOATS && (size_t)ia < aa->a.n) al[i] = aa->a.floats[ia++];
            if (acts[j].uses_beta && ab && ab->a.type == CUVIL_ATTR_FLOATS && (size_t)ib < ab->a.n) be[i] = ab->a.floats[ib++];
        }
    char dbuf[16];
    snprintf(dbuf, sizeof dbuf, "%s", dv);
    cuvil_attr set[6] = {{.name = "cell", .type = CUVIL_ATTR_INT, .i = cell},
                         {.name = "acts", .type = CUVIL_ATTR_INTS, .n = 3 * dirs, .ints = codes},
                         {.name = "act_alpha", .type = CUVIL_ATTR_FLOATS, .n = 3 * dirs, .floats = al},
                         {.name = "act_beta", .type = CUVIL_ATTR_FLOATS, .n = 3 * dirs, .floats = be},
                         {.name = "direction", .type = CUVIL_ATTR_STRING, .s = dbuf},
                         {.name = "quant", .type = CUVIL_ATTR_INT, .i = quant}};
    static const char *const ignore[] = {"output_sequence", NULL};   /* opset 1: whether Y is wanted (its output says) */
    for (int i = 0; i < on->n_attrs; i++) on->attrs[i].used |= !strcmp(on->attrs[i].name, "activations");
    return add_node(m, on, CIR_OP_RNN, n_in, in, on->n_out, on->out, set, quant ? 6 : 5, ignore);
}

static cuvil_status map_rnn(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    return rnn_node(m, on, on->n_in, on->in, 0);
}

static int in_at(onnx_node *on, int i);

/* com.microsoft DynamicQuantizeLSTM's W or R with its scale and zero point: present and
 * constants (the kernel packs the weights when the model compiles). Their types and sizes are
 * op_rnn's to check (q8_weights). 0, or -1 on error (set). */
static int dq_lstm_weight(onnx_mapper *m, onnx_node *on, int slot, int sslot, int zslot, const char *what) {
    const int wi = in_at(on, slot), si = in_at(on, sslot), zi = in_at(on, zslot);
    if (wi < 0 || si < 0) return node_err(m, on, CUVIL_ERR_MODEL, "%s and %s_scale are required", what, what), -1;
    if (!cir_is_const(cir_val(m->g, wi)) || !cir_is_const(cir_val(m->g, si)) || (zi >= 0 && !cir_is_const(cir_val(m->g, zi))))
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "%s, its scale and its zero point must be constants (initializers)", what), -1;
    return 0;
}

/* com.microsoft DynamicQuantizeLSTM (X, W, R, [B], [sequence_lens], [initial_h], [initial_c],
 * [P], W_scale, W_zero_point, R_scale, R_zero_point; LSTM's attributes): an rnn node of quant 1
 * on the 8-bit weights, which quantizes X and h as ONNX Runtime's kernel does (cuvil_rnn_q8). */
static cuvil_status map_ms_dq_lstm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    if (on->n_in > 12) return node_err(m, on, CUVIL_ERR_MODEL, "has %d inputs; DynamicQuantizeLSTM takes 12", on->n_in);
    if (dq_lstm_weight(m, on, 1, 8, 9, "W") < 0 || dq_lstm_weight(m, on, 2, 10, 11, "R") < 0) return m->g->ctx->status;
    int in[12], n = 12;
    for (int i = 0; i < 12; i++) in[i] = in_at(on, i);
    while (in[n - 1] < 0) n--;   /* (W_scale and R_scale are there: dq_lstm_weight) */
    return rnn_node(m, on, n, in, 1);
}

/* ===== ONNX functions written as CIR nodes ================================================ */
/* For the ops below (ONNX defines each as a function of simpler ops): one step of the body,
 * node kind k on inputs in -> a new intermediate value (returned, -1 on failure) or, with out
 * >= 0, the node's output. The node's attributes are all read before (marked used). */
static int step(onnx_mapper *m, onnx_node *on, cir_op_kind k, int n_in, const int *in, int out, const char *what,
                const cuvil_attr *set, int n_set) {
    if (out < 0) {
        char name[600];
        snprintf(name, sizeof name, "%.280s:%s", on->name, what);
        if ((out = cir_value_add(m->g, name, CIR_VAL_ACT)) < 0) return -1;
    }
    return add_node(m, on, k, n_in, in, 1, &out, set, n_set, no_ignore) ? -1 : out;
}

/* A float constant of x's element type: the float32 scalar cast like x (folded). */
static int scalar_like(onnx_mapper *m, onnx_node *on, const char *what, float v, int x) {
    bool err = false;
    int c = f32_scalar(m, on, what, v, &err);
    if (err) return -1;
    int in[2] = {c, x};
    char w[64];
    snprintf(w, sizeof w, "%s:like", what);
    return step(m, on, CIR_OP_CAST, 2, in, -1, w, NULL, 0);
}

static void all_used(onnx_node *on) {
    for (int i = 0; i < on->n_attrs; i++) on->attrs[i].used = true;
}

/* Celu: alpha * elu(x / alpha) (= max(0, x) + min(0, alpha * (exp(x / alpha) - 1))). */
static cuvil_status map_celu(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    onnx_attr *a = attr(on, "alpha");
    float al = a && a->a.type == CUVIL_ATTR_FLOAT ? a->a.f : 1.0f;
    all_used(on);
    int x = on->in[0], c = scalar_like(m, on, "alpha", al, x);
    int t1 = c < 0 ? -1 : step(m, on, CIR_OP_DIV, 2, (int[]){x, c}, -1, "scaled", NULL, 0);
    int t2 = t1 < 0 ? -1 : step(m, on, CIR_OP_ELU, 1, &t1, -1, "elu", NULL, 0);
    return t2 < 0 || step(m, on, CIR_OP_MUL, 2, (int[]){t2, c}, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* Swish: x * sigmoid(alpha * x); SwiGLU (a, b): swish(a) * b. */
static cuvil_status map_swish(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    onnx_attr *a = attr(on, "alpha");
    float al = a && a->a.type == CUVIL_ATTR_FLOAT ? a->a.f : 1.0f;
    all_used(on);
    bool glu = !strcmp(on->op, "SwiGLU");
    int x = on->in[0], c = scalar_like(m, on, "alpha", al, x);
    int t1 = c < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){x, c}, -1, "scaled", NULL, 0);
    int t2 = t1 < 0 ? -1 : step(m, on, CIR_OP_SIGMOID, 1, &t1, -1, "sigmoid", NULL, 0);
    int t3 = t2 < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){x, t2}, glu ? -1 : on->out[0], "swish", NULL, 0);
    if (t3 >= 0 && glu) t3 = step(m, on, CIR_OP_MUL, 2, (int[]){t3, on->in[1]}, on->out[0], "y", NULL, 0);
    return t3 < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over axes (default
 * 0, 2, 3), as ONNX's function body computes it. */
static cuvil_status map_mvn(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    onnx_attr *ax = attr(on, "axes");
    int64_t def[3] = {0, 2, 3}, n = ax ? (int64_t)ax->a.n : 3;
    int axes = const_from(m, on, "axes", CIR_I64, 1, &n, ax ? ax->a.ints : def);
    all_used(on);
    int x = on->in[0], eps = scalar_like(m, on, "eps", 1e-9f, x);
    if (axes < 0 || eps < 0) return m->g->ctx->status;
    int mean = step(m, on, CIR_OP_REDUCE_MEAN, 2, (int[]){x, axes}, -1, "mean", NULL, 0);
    int sq = mean < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){x, x}, -1, "x2", NULL, 0);
    int msq = sq < 0 ? -1 : step(m, on, CIR_OP_REDUCE_MEAN, 2, (int[]){sq, axes}, -1, "mean_x2", NULL, 0);
    int m2 = msq < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){mean, mean}, -1, "mean2", NULL, 0);
    int var = m2 < 0 ? -1 : step(m, on, CIR_OP_SUB, 2, (int[]){msq, m2}, -1, "var", NULL, 0);
    int sd = var < 0 ? -1 : step(m, on, CIR_OP_SQRT, 1, &var, -1, "std", NULL, 0);
    int den = sd < 0 ? -1 : step(m, on, CIR_OP_ADD, 2, (int[]){sd, eps}, -1, "den", NULL, 0);
    int num = den < 0 ? -1 : step(m, on, CIR_OP_SUB, 2, (int[]){x, mean}, -1, "centred", NULL, 0);
    return num < 0 || step(m, on, CIR_OP_DIV, 2, (int[]){num, den}, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status
                                                                                                  : CUVIL_OK;
}

/* GroupNormalization (opset 21; ONNX deprecated opset 18's per-group scale): x viewed as [N,
 * G, rest] normalised per (n, g) by instance_norm, then the scale and bias per channel, as
 * ONNX's function body. */
static cuvil_status map_group_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    int64_t G = attr_int(on, "num_groups", 0);
    onnx_attr *ea = attr(on, "epsilon");
    float eps = ea && ea->a.type == CUVIL_ATTR_FLOAT ? ea->a.f : 1e-5f;
    all_used(on);
    if (G < 1 || G > m->g->limits.dim) return node_err(m, on, CUVIL_ERR_MODEL, "num_groups is %lld", (long long)G);
    if (on->n_in < 3) return node_err(m, on, CUVIL_ERR_MODEL, "scale and bias are required");
    cir_value *sv = cir_val(m->g, on->in[1]);
    int64_t C = sv->ndim == 1 && !sv->dx[0] && sv->dim_sym[0] < 0 ? sv->dims[0] : -1;
    if (C < 1) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "the scale's length must be declared");
    cuvil_attr ea2 = {.name = "epsilon", .type = CUVIL_ATTR_FLOAT, .f = eps};
    int64_t g3[3] = {0, G, -1}, c3[3] = {0, C, -1}, col[2] = {-1, 1}, three = 3, two = 2;
    int x = on->in[0], sg = const_from(m, on, "group shape", CIR_I64, 1, &three, g3);
    int sh = sg < 0 ? -1 : step(m, on, CIR_OP_SHAPE, 1, &x, -1, "shape", NULL, 0);
    int x3 = sh < 0 ? -1 : step(m, on, CIR_OP_RESHAPE, 2, (int[]){x, sg}, -1, "grouped", NULL, 0);
    if (x3 < 0) return m->g->ctx->status;
    float *ones = cuvil_malloc(sizeof(float) * (size_t)G), *zeros = cuvil_calloc((size_t)G, sizeof(float));
    if (!ones || !zeros) {
        cuvil_free(ones);
        cuvil_free(zeros);
        return cuvil_err(m->g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < G; i++) ones[i] = 1.0f;
    int on1 = const_from(m, on, "ones", CIR_F32, 1, &G, ones), ze = const_from(m, on, "zeros", CIR_F32, 1, &G, zeros);
    cuvil_free(ones);
    cuvil_free(zeros);
    int sc = const_from(m, on, "channel shape", CIR_I64, 1, &three, c3), cl = const_from(m, on, "column", CIR_I64, 1, &two, col);
    if (on1 < 0 || ze < 0 || sc < 0 || cl < 0) return m->g->ctx->status;
    int y3 = step(m, on, CIR_OP_INSTANCE_NORM, 3, (int[]){x3, on1, ze}, -1, "normed", &ea2, 1);
    int yc = y3 < 0 ? -1 : step(m, on, CIR_OP_RESHAPE, 2, (int[]){y3, sc}, -1, "per channel", NULL, 0);
    int s2 = yc < 0 ? -1 : step(m, on, CIR_OP_RESHAPE, 2, (int[]){on->in[1], cl}, -1, "scale", NULL, 0);
    int b2 = s2 < 0 ? -1 : step(m, on, CIR_OP_RESHAPE, 2, (int[]){on->in[2], cl}, -1, "bias", NULL, 0);
    int ys = b2 < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){yc, s2}, -1, "scaled", NULL, 0);
    int yb = ys < 0 ? -1 : step(m, on, CIR_OP_ADD, 2, (int[]){ys, b2}, -1, "shifted", NULL, 0);
    return yb < 0 || step(m, on, CIR_OP_RESHAPE, 2, (int[]){yb, sh}, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status
                                                                                                 : CUVIL_OK;
}

/* LpNormalization: x / ||x||_p along axis (p 1 or 2), 0 where the norm is 0, as ONNX's
 * reference computes it. */
static cuvil_status map_lp_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    int64_t axis = attr_int(on, "axis", -1), p = attr_int(on, "p", 2), one = 1;
    if (p != 1 && p != 2) return node_err(m, on, CUVIL_ERR_MODEL, "p is %lld; it must be 1 or 2", (long long)p);
    all_used(on);
    int x = on->in[0], axes = const_from(m, on, "axes", CIR_I64, 1, &one, &axis), zero = scalar_like(m, on, "zero", 0.0f, x);
    if (axes < 0 || zero < 0) return m->g->ctx->status;
    cuvil_attr keep = {.name = "keepdims", .type = CUVIL_ATTR_INT, .i = 1};
    int nrm = step(m, on, p == 1 ? CIR_OP_REDUCE_L1 : CIR_OP_REDUCE_L2, 2, (int[]){x, axes}, -1, "norm", &keep, 1);
    int q = nrm < 0 ? -1 : step(m, on, CIR_OP_DIV, 2, (int[]){x, nrm}, -1, "q", NULL, 0);
    int z = q < 0 ? -1 : step(m, on, CIR_OP_EQUAL, 2, (int[]){nrm, zero}, -1, "is0", NULL, 0);
    return z < 0 || step(m, on, CIR_OP_WHERE, 3, (int[]){z, zero, q}, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status
                                                                                                   : CUVIL_OK;
}

static cuvil_status map_slice(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (on->opset >= 10) return map_plain(m, on, kind);
    bool err = false;
    if (!attr(on, "starts") || !attr(on, "ends"))
        return node_err(m, on, CUVIL_ERR_MODEL, "attributes starts and ends are required");
    int in[4] = {on->in[0], ints_input(m, on, "starts", &err), ints_input(m, on, "ends", &err), -1};
    onnx_attr *ax = attr(on, "axes");
    /* an empty list means "the first len(starts) axes", as ONNX's reference reads it */
    if (ax && ax->a.n > 0) in[3] = ints_input(m, on, "axes", &err);
    if (err) return m->g->ctx->status;
    return add_node(m, on, kind, in[3] >= 0 ? 4 : 3, in, on->n_out, on->out, NULL, 0, no_ignore);
}

static cuvil_status map_pad(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (on->opset >= 11) return map_plain(m, on, kind);
    bool err = false;
    onnx_attr *p = attr(on, "pads");
    if (!p) p = attr(on, "paddings");   /* opset 1's name */
    if (!p) return node_err(m, on, CUVIL_ERR_MODEL, "attribute pads is required");
    int64_t n = (int64_t)p->a.n;
    int in[3] = {on->in[0], const_from(m, on, "pads", CIR_I64, 1, &n, p->a.ints), -1};
    if (in[1] < 0) return m->g->ctx->status;
    onnx_attr *v = attr(on, "value");
    if (v) in[2] = f32_scalar(m, on, "value", v->a.f, &err);
    if (err) return m->g->ctx->status;
    return add_node(m, on, kind, in[2] >= 0 ? 3 : 2, in, on->n_out, on->out, NULL, 0, no_ignore);
}

static cuvil_status map_cast(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    /* CastLike (two inputs) is a cast to input 1's type */
    onnx_attr *to = attr(on, "to");
    cuvil_attr set[1];
    int n_set = 0;
    if (to) set[n_set++] = (cuvil_attr){.name = "to", .type = CUVIL_ATTR_INT, .i = to->a.i};
    static const char *const ignore[] = {"saturate", NULL};   /* float8 targets only */
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, ignore);
}

/* SequenceEmpty: its dtype attribute, an element type as Cast's `to` is. */
static cuvil_status map_seq_empty(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *dt = attr(on, "dtype");
    cuvil_attr set[1];
    int n_set = 0;
    if (dt) set[n_set++] = (cuvil_attr){.name = "dtype", .type = CUVIL_ATTR_INT, .i = dt->a.i};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, set, n_set, NULL);
}

/* Resize-10 and Upsample: asymmetric coordinates, ONNX Runtime's "simple" nearest rounding. */
static cuvil_status map_resize(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    bool upsample = !strcmp(on->op, "Upsample");
    if (!upsample && on->opset >= 11) return map_plain(m, on, kind);
    onnx_attr *mode = attr(on, "mode");
    const char *mv = mode && mode->a.s ? mode->a.s : "nearest";
    if (!strcmp(mv, "bilinear")) mv = "linear";
    if (strcmp(mv, "nearest") && strcmp(mv, "linear")) return node_err(m, on, CUVIL_ERR_MODEL, "unknown mode '%s'", mv);
    int in[3] = {on->in[0], -1, on->n_in > 1 ? on->in[1] : -1};
    if (upsample && on->opset < 9) {
        onnx_attr *sc = attr(on, "scales");
        if (!sc) return node_err(m, on, CUVIL_ERR_MODEL, "attribute scales is required");
        int64_t n = (int64_t)sc->a.n;
        if ((in[2] = const_from(m, on, "scales", CIR_F32, 1, &n, sc->a.floats)) < 0) return m->g->ctx->status;
    }
    if (in[2] < 0) return node_err(m, on, CUVIL_ERR_MODEL, "input scales is required");
    cuvil_attr set[3] = {
        {.name = "mode", .type = CUVIL_ATTR_STRING, .s = mv},
        {.name = "coordinate_transformation_mode", .type = CUVIL_ATTR_STRING, .s = "asymmetric"},
        {.name = "nearest_mode", .type = CUVIL_ATTR_STRING, .s = "simple"},
    };
    return add_node(m, on, kind, 3, in, on->n_out, on->out, set, 3, no_ignore);
}

static cuvil_status map_constant_of_shape(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *v = attr(on, "value");
    int in[2] = {on->in[0], v ? v->tensor : -1};
    if (v && v->tensor < 0) return node_err(m, on, CUVIL_ERR_MODEL, "attribute value must be a tensor");
    return add_node(m, on, kind, v ? 2 : 1, in, on->n_out, on->out, NULL, 0, no_ignore);
}

/* Constant: its output becomes a constant value; no node. */
static cuvil_status map_constant(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    cir_graph *g = m->g;
    if (on->n_attrs != 1) return node_err(m, on, CUVIL_ERR_MODEL, "needs exactly one value attribute");
    onnx_attr *a = &on->attrs[0];
    cir_value *y = cir_val(g, on->out[0]);
    int64_t cnt = (int64_t)a->a.n;
    const void *src;
    if (!strcmp(a->name, "value") && a->tensor >= 0) {
        cir_value *t = cir_val(g, a->tensor);
        cir_set_shape(y, t->dtype, t->ndim, t->dims);
        src = t->data;
    } else if (!strcmp(a->name, "value_float") && a->a.type == CUVIL_ATTR_FLOAT) {
        cir_set_shape(y, CIR_F32, 0, NULL);
        src = &a->a.f;
    } else if (!strcmp(a->name, "value_int") && a->a.type == CUVIL_ATTR_INT) {
        cir_set_shape(y, CIR_I64, 0, NULL);
        src = &a->a.i;
    } else if (!strcmp(a->name, "value_floats") && a->a.type == CUVIL_ATTR_FLOATS) {
        cir_set_shape(y, CIR_F32, 1, &cnt);
        src = a->a.floats;
    } else if (!strcmp(a->name, "value_ints") && a->a.type == CUVIL_ATTR_INTS) {
        cir_set_shape(y, CIR_I64, 1, &cnt);
        src = a->a.ints;
    } else {
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "value attribute '%s' is not supported", a->name);
    }
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (cir_nbytes(y)) memcpy(y->data, src, cir_nbytes(y));
    return CUVIL_OK;
}

/* Einsum: the equation's characters as an INTS attribute (checked here: labels, ',', "->",
 * '.', spaces), so the model's text is never kept as a string. */
static cuvil_status map_einsum(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    onnx_attr *a = attr(on, "equation");
    if (!a || a->a.type != CUVIL_ATTR_STRING || !a->a.s)
        return node_err(m, on, CUVIL_ERR_MODEL, "attribute equation (a string) is required");
    size_t len = strlen(a->a.s);
    if (len == 0 || len > 512) return node_err(m, on, CUVIL_ERR_MODEL, "the equation has %zu characters (1 to 512)", len);
    int64_t eq[512];
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)a->a.s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && c != ',' && c != '-' && c != '>' && c != '.' && c != ' ')
            return node_err(m, on, CUVIL_ERR_MODEL, "the equation has character %u at %zu, which is not a label, ',', "
                            "\"->\", '.' or a space", c, i);
        eq[i] = c;
    }
    cuvil_attr set = {.name = "equation", .type = CUVIL_ATTR_INTS, .ints = eq, .n = len};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, &set, 1, no_ignore);
}

/* DFT: from opset 20 the axis is an input, default -2 (before, an attribute, default 1). */
static cuvil_status map_dft(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (on->opset < 20) return map_plain(m, on, kind);
    cuvil_attr ax = {.name = "axis", .type = CUVIL_ATTR_INT, .i = -2};
    return add_node(m, on, kind, on->n_in, on->in, on->n_out, on->out, &ax, 1, no_ignore);
}

/* ===== ONNX Runtime's contrib ops (domain com.microsoft) ===================================== */
/* The fused ops its transformer optimiser and exporters write, as CIR nodes. */
static float attr_float(onnx_node *on, const char *name, float def) {
    onnx_attr *a = attr(on, name);
    return a && a->a.type == CUVIL_ATTR_FLOAT ? a->a.f : def;
}

static int in_at(onnx_node *on, int i) { return i < on->n_in ? on->in[i] : -1; }
static int out_at(onnx_node *on, int i) { return i < on->n_out ? on->out[i] : -1; }

/* Gelu (erf), FastGelu (x [+ bias], tanh), BiasGelu (a + b, erf), QuickGelu (x sigmoid(alpha x)). */
static cuvil_status map_ms_gelu(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    bool fast = !strcmp(on->op, "FastGelu"), quick = !strcmp(on->op, "QuickGelu");
    float alpha = attr_float(on, "alpha", 1.702f);
    all_used(on);
    int x = in_at(on, 0), b = in_at(on, 1);
    if (x < 0) return node_err(m, on, CUVIL_ERR_MODEL, "input 0 is required");
    if (b >= 0 && !quick && (x = step(m, on, CIR_OP_ADD, 2, (int[]){x, b}, -1, "biased", NULL, 0)) < 0) return m->g->ctx->status;
    if (quick) {
        int c = scalar_like(m, on, "alpha", alpha, x);
        int t = c < 0 ? -1 : step(m, on, CIR_OP_MUL, 2, (int[]){x, c}, -1, "scaled", NULL, 0);
        int sg = t < 0 ? -1 : step(m, on, CIR_OP_SIGMOID, 1, &t, -1, "sigmoid", NULL, 0);
        return sg < 0 || step(m, on, CIR_OP_MUL, 2, (int[]){x, sg}, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status
                                                                                                : CUVIL_OK;
    }
    cuvil_attr ap = {.name = "approximate", .type = CUVIL_ATTR_STRING, .s = fast ? "tanh" : "none"};
    return step(m, on, CIR_OP_GELU, 1, &x, on->out[0], "y", &ap, 1) < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* FusedMatMul: alpha * op(A) op(B), op a transpose of the last two dims where transA/transB
 * say (an operand of undeclared rank: the transpose's swap_last2, resolved by shape
 * inference); the batch transposes are refused. */
static cuvil_status map_ms_fused_matmul(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (attr_int(on, "transBatchA", 0) || attr_int(on, "transBatchB", 0))
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "transBatchA/transBatchB are not supported");
    float alpha = attr_float(on, "alpha", 1.0f);
    int64_t tr[2] = {attr_int(on, "transA", 0), attr_int(on, "transB", 0)};
    all_used(on);
    int op[2] = {in_at(on, 0), in_at(on, 1)};
    if (op[0] < 0 || op[1] < 0) return node_err(m, on, CUVIL_ERR_MODEL, "inputs A and B are required");
    for (int i = 0; i < 2; i++) {
        if (!tr[i]) continue;
        cir_value *v = cir_val(m->g, op[i]);
        if (v->ndim < 2) {   /* (a rank not declared, or below 2: shape inference knows, or says) */
            cuvil_attr sa = {.name = "swap_last2", .type = CUVIL_ATTR_INT, .i = 1};
            if ((op[i] = step(m, on, CIR_OP_TRANSPOSE, 1, &op[i], -1, i ? "Bt" : "At", &sa, 1)) < 0) return m->g->ctx->status;
            continue;
        }
        int64_t perm[CIR_MAX_DIMS];
        for (int d = 0; d < v->ndim; d++) perm[d] = d;
        perm[v->ndim - 2] = v->ndim - 1;
        perm[v->ndim - 1] = v->ndim - 2;
        cuvil_attr pa = {.name = "perm", .type = CUVIL_ATTR_INTS, .ints = perm, .n = (size_t)v->ndim};
        if ((op[i] = step(m, on, CIR_OP_TRANSPOSE, 1, &op[i], -1, i ? "Bt" : "At", &pa, 1)) < 0) return m->g->ctx->status;
    }
    if (alpha == 1.0f) return step(m, on, kind, 2, op, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status : CUVIL_OK;
    int p = step(m, on, kind, 2, op, -1, "product", NULL, 0), c = p < 0 ? -1 : scalar_like(m, on, "alpha", alpha, p);
    return c < 0 || step(m, on, CIR_OP_MUL, 2, (int[]){p, c}, on->out[0], "y", NULL, 0) < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* SkipLayerNormalization (input, skip, gamma, [beta], [bias]) and its RMS form
 * SkipSimplifiedLayerNormalization (input, skip, gamma, [bias]): layer_norm over the last axis
 * of input + skip (+ bias); outputs y, [mean], [inv_std_var], [the sum]. SimplifiedLayer-
 * Normalization (x, scale): RMS layer_norm along axis; outputs y, [inv_std_var]. */
static cuvil_status map_ms_layer_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    bool skip = !strncmp(on->op, "Skip", 4), rms = strstr(on->op, "Simplified") != NULL;
    float eps = attr_float(on, "epsilon", skip ? 1e-12f : 1e-5f);   /* (ONNX Runtime's defaults) */
    int64_t axis = attr_int(on, "axis", -1);
    all_used(on);
    cuvil_attr set[3] = {{.name = "epsilon", .type = CUVIL_ATTR_FLOAT, .f = eps},
                         {.name = "rms", .type = CUVIL_ATTR_INT, .i = rms},
                         {.name = "axis", .type = CUVIL_ATTR_INT, .i = skip ? -1 : axis}};
    int x = in_at(on, 0), scale = in_at(on, skip ? 2 : 1), beta = skip && !rms ? in_at(on, 3) : -1;
    if (x < 0 || scale < 0 || (skip && in_at(on, 1) < 0)) return node_err(m, on, CUVIL_ERR_MODEL, "a required input is missing");
    int lo[3] = {out_at(on, 0), -1, -1};   /* layer_norm's y, mean, inv_std_dev */
    if (skip) {
        int bias = in_at(on, rms ? 3 : 4), sum_out = out_at(on, 3);
        x = step(m, on, CIR_OP_ADD, 2, (int[]){x, on->in[1]}, bias >= 0 ? -1 : sum_out, "sum", NULL, 0);
        if (x >= 0 && bias >= 0) x = step(m, on, CIR_OP_ADD, 2, (int[]){x, bias}, sum_out, "sum_bias", NULL, 0);
        if (x < 0) return m->g->ctx->status;
        if (rms && out_at(on, 1) >= 0)
            return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "output 1 (the mean) of an RMS normalisation is used");
        lo[1] = rms ? -1 : out_at(on, 1);
        lo[2] = out_at(on, 2);
    } else {
        lo[2] = out_at(on, 1);
    }
    int in[3] = {x, scale, beta}, n_out = lo[2] >= 0 ? 3 : lo[1] >= 0 ? 2 : 1;
    return add_node(m, on, CIR_OP_LAYER_NORM, beta >= 0 ? 3 : 2, in, n_out, lo, set, 3, no_ignore);
}

/* EmbedLayerNormalization (input_ids, [segment_ids], word_embedding, position_embedding,
 * [segment_embedding], gamma, beta, [mask], [position_ids]): layer_norm of the word, position
 * (position_ids, else 0..seq-1) and segment embeddings' sum; outputs y, [mask_index: the
 * mask's count per row, int32], [the sum]. */
static cuvil_status map_ms_embed_layer_norm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    float eps = attr_float(on, "epsilon", 1e-12f);
    all_used(on);
    int ids = in_at(on, 0), seg = in_at(on, 1), we = in_at(on, 2), pe = in_at(on, 3), se = in_at(on, 4), gm = in_at(on, 5);
    int bt = in_at(on, 6), mask = in_at(on, 7), pos = in_at(on, 8);
    if (ids < 0 || we < 0 || pe < 0 || gm < 0 || bt < 0 || (seg >= 0) != (se >= 0))
        return node_err(m, on, CUVIL_ERR_MODEL, "input_ids, the word and position embeddings, gamma and beta are required "
                        "(segment ids and embedding together)");
    int sum = step(m, on, CIR_OP_GATHER, 2, (int[]){we, ids}, -1, "word", NULL, 0);
    if (sum >= 0 && pos < 0) {   /* positions 0 .. seq - 1 */
        int64_t one = 1, idx1 = 1;
        int sh = step(m, on, CIR_OP_SHAPE, 1, &ids, -1, "shape", NULL, 0);
        int k1 = const_from(m, on, "seq axis", CIR_I64, 0, NULL, &idx1);
        int len = sh < 0 || k1 < 0 ? -1 : step(m, on, CIR_OP_GATHER, 2, (int[]){sh, k1}, -1, "seq", NULL, 0);
        int64_t zero = 0;
        int z = const_from(m, on, "zero", CIR_I64, 0, NULL, &zero), o = const_from(m, on, "one", CIR_I64, 0, NULL, &one);
        pos = len < 0 || z < 0 || o < 0 ? -1 : step(m, on, CIR_OP_RANGE, 3, (int[]){z, len, o}, -1, "positions", NULL, 0);
        if (pos < 0) return m->g->ctx->status;
    }
    int pv = sum < 0 ? -1 : step(m, on, CIR_OP_GATHER, 2, (int[]){pe, pos}, -1, "position", NULL, 0);
    sum = pv < 0 ? -1 : step(m, on, CIR_OP_ADD, 2, (int[]){sum, pv}, seg >= 0 ? -1 : out_at(on, 2), "word_position", NULL, 0);
    if (sum >= 0 && seg >= 0) {
        int sv = step(m, on, CIR_OP_GATHER, 2, (int[]){se, seg}, -1, "segment", NULL, 0);
        sum = sv < 0 ? -1 : step(m, on, CIR_OP_ADD, 2, (int[]){sum, sv}, out_at(on, 2), "embedding_sum", NULL, 0);
    }
    cuvil_attr e = {.name = "epsilon", .type = CUVIL_ATTR_FLOAT, .f = eps};
    if (sum < 0 || step(m, on, CIR_OP_LAYER_NORM, 3, (int[]){sum, gm, bt}, on->out[0], "y", &e, 1) < 0)
        return m->g->ctx->status;
    if (out_at(on, 1) < 0) return CUVIL_OK;
    if (mask < 0) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "output mask_index is used but the node has no mask");
    int64_t one = 1, ax = 1;
    int axes = const_from(m, on, "mask axis", CIR_I64, 1, &one, &ax);
    cuvil_attr keep = {.name = "keepdims", .type = CUVIL_ATTR_INT, .i = 0};
    int cnt = axes < 0 ? -1 : step(m, on, CIR_OP_REDUCE_SUM, 2, (int[]){mask, axes}, -1, "mask_count", &keep, 1);
    cuvil_attr to = {.name = "to", .type = CUVIL_ATTR_STRING, .s = "int32"};
    return cnt < 0 || step(m, on, CIR_OP_CAST, 1, &cnt, on->out[1], "mask_index", &to, 1) < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* The additive float mask (mask_index op) of a contrib attention's mask input `mask` for keys
 * of `like` ([B, T, ...]), and attention_bias `bias` added to it; -1 for none. */
static int ms_attn_mask(onnx_mapper *m, onnx_node *on, int mask, int like, int bias, float filter) {
    int mk = -1;
    if (mask >= 0) {
        cuvil_attr f = {.name = "filter", .type = CUVIL_ATTR_FLOAT, .f = filter};
        if ((mk = step(m, on, CIR_OP_MASK_INDEX, 2, (int[]){mask, like}, -1, "mask", &f, 1)) < 0) return -1;
    }
    if (bias < 0) return mk >= 0 ? mk : -2;
    if (mk < 0) return bias;
    return step(m, on, CIR_OP_ADD, 2, (int[]){mk, bias}, -1, "mask_bias", NULL, 0);
}

/* The attention itself: sdpa on 3-D q, k, v of `heads` heads. */
static cuvil_status ms_sdpa(onnx_mapper *m, onnx_node *on, int q, int k, int v, int mask, int64_t heads, bool causal,
                            float scale) {
    cuvil_attr set[5] = {{.name = "q_num_heads", .type = CUVIL_ATTR_INT, .i = heads},
                         {.name = "kv_num_heads", .type = CUVIL_ATTR_INT, .i = heads},
                         {.name = "is_causal", .type = CUVIL_ATTR_INT, .i = causal},
                         {.name = "scale", .type = CUVIL_ATTR_FLOAT, .f = scale},
                         {.name = "has_scale", .type = CUVIL_ATTR_INT, .i = scale != 0.0f}};
    int in[4] = {q, k, v, mask};
    return add_node(m, on, CIR_OP_SDPA, mask >= 0 ? 4 : 3, in, 1, on->out, set, scale != 0.0f ? 5 : 3, no_ignore);
}

/* Attention (input, weights, [bias], [mask_index], [past], [attention_bias]): q, k, v from
 * input x weights (+ bias), split by qkv_hidden_sizes (or in thirds), then sdpa; unidirectional
 * is causal. The past/present cache, rotary and packed forms are refused. */
static cuvil_status map_ms_attention(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    int64_t heads = attr_int(on, "num_heads", 0);
    bool causal = attr_int(on, "unidirectional", 0) != 0;
    float scale = attr_float(on, "scale", 0.0f), filter = attr_float(on, "mask_filter_value", -10000.0f);
    onnx_attr *qs = attr(on, "qkv_hidden_sizes");
    if (attr_int(on, "do_rotary", 0) || attr_int(on, "past_present_share_buffer", 0))
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "do_rotary and past_present_share_buffer are not supported");
    all_used(on);
    if (heads < 1) return node_err(m, on, CUVIL_ERR_MODEL, "num_heads is required");
    if (in_at(on, 4) >= 0 || out_at(on, 1) >= 0 || in_at(on, 6) >= 0)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "the past/present key-value cache is not supported");
    int x = in_at(on, 0), w = in_at(on, 1), b = in_at(on, 2);
    if (x < 0 || w < 0) return node_err(m, on, CUVIL_ERR_MODEL, "input and weights are required");
    int qkv = step(m, on, CIR_OP_MATMUL, 2, (int[]){x, w}, -1, "qkv", NULL, 0);
    if (qkv >= 0 && b >= 0) qkv = step(m, on, CIR_OP_ADD, 2, (int[]){qkv, b}, -1, "qkv_bias", NULL, 0);
    if (qkv < 0) return m->g->ctx->status;
    int parts[3];
    char nm[3][600];
    for (int i = 0; i < 3; i++) {
        snprintf(nm[i], sizeof nm[i], "%.280s:%c", on->name, "qkv"[i]);
        if ((parts[i] = cir_value_add(m->g, nm[i], CIR_VAL_ACT)) < 0) return m->g->ctx->status;
    }
    cuvil_attr ax = {.name = "axis", .type = CUVIL_ATTR_INT, .i = -1};
    int split_in[2] = {qkv, -1}, n_split_in = 1;
    if (qs) {
        if (qs->a.type != CUVIL_ATTR_INTS || qs->a.n != 3 || qs->a.ints[0] != qs->a.ints[1])
            return node_err(m, on, CUVIL_ERR_MODEL, "qkv_hidden_sizes must give 3 sizes, q's and k's equal");
        int64_t three = 3;
        if ((split_in[1] = const_from(m, on, "qkv sizes", CIR_I64, 1, &three, qs->a.ints)) < 0) return m->g->ctx->status;
        n_split_in = 2;
    }
    if (add_node(m, on, CIR_OP_SPLIT, n_split_in, split_in, 3, parts, &ax, 1, no_ignore)) return m->g->ctx->status;
    int mask = ms_attn_mask(m, on, in_at(on, 3), parts[1], in_at(on, 5), filter);
    if (mask == -1) return m->g->ctx->status;
    return ms_sdpa(m, on, parts[0], parts[1], parts[2], mask < 0 ? -1 : mask, heads, causal, scale);
}

/* MultiHeadAttention (query, key, value, [bias], [key_padding_mask], [attention_bias]): 3-D
 * query, key and value (bias split in thirds onto them), then sdpa; caches and packed forms
 * are refused. */
static cuvil_status map_ms_mha(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    (void)kind;
    int64_t heads = attr_int(on, "num_heads", 0);
    bool causal = attr_int(on, "unidirectional", 0) != 0;
    float scale = attr_float(on, "scale", 0.0f), filter = attr_float(on, "mask_filter_value", -10000.0f);
    all_used(on);
    if (heads < 1) return node_err(m, on, CUVIL_ERR_MODEL, "num_heads is required");
    int q = in_at(on, 0), k = in_at(on, 1), v = in_at(on, 2), b = in_at(on, 3);
    if (q < 0 || k < 0 || v < 0)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "only separate query, key and value are supported (not packed)");
    for (int i = 6; i < on->n_in; i++)
        if (on->in[i] >= 0) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "the past key/value cache is not supported");
    for (int i = 1; i < on->n_out; i++)
        if (on->out[i] >= 0) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "the present key/value outputs are not supported");
    if (b >= 0) {
        int parts[3], qkv[3] = {q, k, v};
        char nm[3][600];
        for (int i = 0; i < 3; i++) {
            snprintf(nm[i], sizeof nm[i], "%.280s:bias_%c", on->name, "qkv"[i]);
            if ((parts[i] = cir_value_add(m->g, nm[i], CIR_VAL_ACT)) < 0) return m->g->ctx->status;
        }
        cuvil_attr ax = {.name = "axis", .type = CUVIL_ATTR_INT, .i = 0};
        if (add_node(m, on, CIR_OP_SPLIT, 1, &b, 3, parts, &ax, 1, no_ignore)) return m->g->ctx->status;
        for (int i = 0; i < 3; i++)
            if ((qkv[i] = step(m, on, CIR_OP_ADD, 2, (int[]){qkv[i], parts[i]}, -1, nm[i] + strlen(on->name) + 1, NULL, 0)) < 0)
                return m->g->ctx->status;
        q = qkv[0], k = qkv[1], v = qkv[2];
    }
    int mask = ms_attn_mask(m, on, in_at(on, 4), k, in_at(on, 5), filter);
    if (mask == -1) return m->g->ctx->status;
    return ms_sdpa(m, on, q, k, v, mask < 0 ? -1 : mask, heads, causal, scale);
}

/* GroupQueryAttention (query, key, value, [past_key], [past_value], seqlens_k,
 * total_sequence_length, ..., [attention_bias]): sdpa with grouped heads, causal, the cache
 * concatenated (present = past then the new keys), softcap; gqa_check makes the run fail where
 * seqlens_k or total_sequence_length ask for more (padded rows, a shared cache buffer). Packed
 * QKV, rotary inside, local windows, smooth softmax and head sinks are refused. */
static cuvil_status map_ms_gqa(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    int64_t hq = attr_int(on, "num_heads", 0), hk = attr_int(on, "kv_num_heads", 0);
    float scale = attr_float(on, "scale", 0.0f), softcap = attr_float(on, "softcap", 0.0f);
    if (attr_int(on, "do_rotary", 0) || attr_int(on, "smooth_softmax", 0) || attr_int(on, "local_window_size", -1) != -1 ||
        attr_int(on, "qk_output", 0))
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "do_rotary, smooth_softmax, local_window_size and qk_output are not "
                        "supported");
    all_used(on);
    if (hq < 1 || hk < 1) return node_err(m, on, CUVIL_ERR_MODEL, "num_heads and kv_num_heads are required");
    int q = in_at(on, 0), k = in_at(on, 1), v = in_at(on, 2), pk = in_at(on, 3), pv = in_at(on, 4);
    int sl = in_at(on, 5), tot = in_at(on, 6), bias = in_at(on, 10);
    if (k < 0 || v < 0) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "packed QKV (no key and value) is not supported");
    if ((pk >= 0) != (pv >= 0)) return node_err(m, on, CUVIL_ERR_MODEL, "past_key and past_value go together");
    if (sl < 0 || tot < 0) return node_err(m, on, CUVIL_ERR_MODEL, "seqlens_k and total_sequence_length are required");
    for (int i = 7; i < on->n_in; i++)
        if (i != 10 && on->in[i] >= 0)
            return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "input %d (the rotary caches, position ids or head sink) is not "
                            "supported", i);
    for (int i = 3; i < on->n_out; i++)
        if (on->out[i] >= 0) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "output %d is not supported", i);
    int kc = step(m, on, CIR_OP_GQA_CHECK, pk >= 0 ? 4 : 3, (int[]){sl, tot, k, pk}, -1, "key_checked", NULL, 0);
    if (kc < 0) return m->g->ctx->status;
    cuvil_attr set[6] = {{.name = "q_num_heads", .type = CUVIL_ATTR_INT, .i = hq},
                         {.name = "kv_num_heads", .type = CUVIL_ATTR_INT, .i = hk},
                         {.name = "is_causal", .type = CUVIL_ATTR_INT, .i = 1},
                         {.name = "softcap", .type = CUVIL_ATTR_FLOAT, .f = softcap},
                         {.name = "scale", .type = CUVIL_ATTR_FLOAT, .f = scale},
                         {.name = "has_scale", .type = CUVIL_ATTR_INT, .i = 1}};
    int in[6] = {q, kc, v, bias, pk, pv}, outs[3] = {on->out[0], out_at(on, 1), out_at(on, 2)};
    int n_out = outs[2] >= 0 ? 3 : outs[1] >= 0 ? 2 : 1;
    return add_node(m, on, kind, pk >= 0 ? 6 : bias >= 0 ? 4 : 3, in, n_out, outs, set, scale != 0.0f ? 6 : 4, no_ignore);
}

/* RotaryEmbedding (input, position_ids, cos_cache, sin_cache): CIR's rotary with ONNX's input
 * order; position_ids [batch, seq] (the [1] offset form and packed batching are refused). */
static cuvil_status map_ms_rotary(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    if (attr_int(on, "is_packed_batching", 0)) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "is_packed_batching is not supported");
    if (attr_float(on, "scale", 1.0f) != 1.0f) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "a scale other than 1");
    cir_value *p = in_at(on, 1) >= 0 ? cir_val(m->g, on->in[1]) : NULL;
    if (!p || (p->ndim >= 0 && p->ndim != 2))
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "position_ids must be [batch, seq] (the offset form is not supported)");
    static const char *const ignore[] = {"scale", "is_packed_batching", NULL};
    int in[4] = {on->in[0], in_at(on, 2), in_at(on, 3), on->in[1]};
    return add_node(m, on, kind, 4, in, on->n_out, on->out, NULL, 0, ignore);
}

/* BiasSoftmax (data, bias): softmax(data + bias) over the dims from axis on; the bias of data's rank (its
 * dims of 1 broadcast, inner or outer alike; a bias of lower rank, which is_inner_broadcast
 * aligns left or right, is refused). */
static cuvil_status map_ms_bias_softmax(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    /* ONNX Runtime's softmax here is opset 11's: over everything from axis on */
    cuvil_attr ax[2] = {{.name = "axis", .type = CUVIL_ATTR_INT, .i = attr_int(on, "axis", 1)},
                        {.name = "coerce_2d", .type = CUVIL_ATTR_INT, .i = 1}};
    all_used(on);
    if (in_at(on, 0) < 0 || in_at(on, 1) < 0) return node_err(m, on, CUVIL_ERR_MODEL, "data and bias are required");
    cir_value *d = cir_val(m->g, on->in[0]), *b = cir_val(m->g, on->in[1]);
    if (d->ndim < 1 || d->ndim != b->ndim)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "the bias must have the data's rank, both declared");
    int t = step(m, on, CIR_OP_ADD, 2, (int[]){in_at(on, 0), in_at(on, 1)}, -1, "biased", NULL, 0);
    return t < 0 || step(m, on, kind, 1, &t, on->out[0], "y", ax, 2) < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* ===== ONNX Runtime's QOperator ops (com.microsoft) ======================================
 * QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearAveragePool,
 * QLinearGlobalAveragePool, QLinearConcat: DequantizeLinear of each input, the float op,
 * QuantizeLinear, what they are defined as (ONNX Runtime computes them in float as well).
 * QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat: qlinear_matmul on the integer GEMM. */

/* A node with no attributes of on's (a step of the composite). */
static int raw_step(onnx_mapper *m, onnx_node *on, cir_op_kind k, int n_in, const int *in, int out, const char *what) {
    if (out < 0) {
        char name[600];
        snprintf(name, sizeof name, "%.280s:%s", on->name, what);
        if ((out = cir_value_add(m->g, name, CIR_VAL_ACT)) < 0) return -1;
    }
    return cir_node_add(m->g, k, on->name, on->op, n_in, in, 1, &out) < 0 ? -1 : out;
}

static int dq_of(onnx_mapper *m, onnx_node *on, int i, const char *what) {
    int x = in_at(on, i), s = in_at(on, i + 1), z = in_at(on, i + 2);
    if (x < 0 || s < 0) {
        node_err(m, on, CUVIL_ERR_MODEL, "input %d (%s) and its scale are required", i, what);
        return -1;
    }
    return raw_step(m, on, CIR_OP_DEQUANTIZE, z >= 0 ? 3 : 2, (int[]){x, s, z}, -1, what);
}

static cuvil_status q_into(onnx_mapper *m, onnx_node *on, int v, int is) {
    int s = in_at(on, is), z = in_at(on, is + 1);
    if (v < 0) return m->g->ctx->status;
    if (s < 0) return node_err(m, on, CUVIL_ERR_MODEL, "the output's scale (input %d) is required", is);
    return raw_step(m, on, CIR_OP_QUANTIZE, z >= 0 ? 3 : 2, (int[]){v, s, z}, on->out[0], "y") < 0 ? m->g->ctx->status : CUVIL_OK;
}

static cuvil_status map_ms_qlinear(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    const char *op = on->op;
    if (!strcmp(op, "QLinearAdd") || !strcmp(op, "QLinearMul")) {
        all_used(on);
        int a = dq_of(m, on, 0, "a"), b = a < 0 ? -1 : dq_of(m, on, 3, "b");
        int y = b < 0 ? -1 : raw_step(m, on, kind, 2, (int[]){a, b}, -1, "float");
        return q_into(m, on, y, 6);
    }
    if (!strcmp(op, "QLinearConcat")) {   /* Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) each */
        if (on->n_in < 5 || (on->n_in - 2) % 3)
            return node_err(m, on, CUVIL_ERR_MODEL, "QLinearConcat has %d inputs; it takes 2 + 3 per tensor", on->n_in);
        int *xs = cuvil_arena_alloc(&m->g->arena, sizeof(int) * (size_t)(on->n_in / 3 + 1));
        if (!xs) return cuvil_err(m->g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        int nx = 0;
        onnx_attr *ax = attr(on, "axis");
        all_used(on);
        for (int i = 2; i < on->n_in; i += 3)
            if ((xs[nx++] = dq_of(m, on, i, "x")) < 0) return m->g->ctx->status;
        cuvil_attr set = {.name = "axis", .type = CUVIL_ATTR_INT, .i = ax ? ax->a.i : 0};
        if (!ax) return node_err(m, on, CUVIL_ERR_MODEL, "attribute axis is required");
        int y = step(m, on, CIR_OP_CONCAT, nx, xs, -1, "float", &set, 1);
        return q_into(m, on, y, 0);
    }
    if (!strcmp(op, "QLinearSoftmax")) {   /* (X, X_scale, [X_zp], Y_scale, [Y_zp]; axis, opset: Softmax's opset) */
        onnx_attr *os = attr(on, "opset");
        if (!os) return node_err(m, on, CUVIL_ERR_MODEL, "attribute opset (the Softmax's) is required");
        cuvil_attr set[2];
        const int n_set = softmax_attrs(on, os->a.i, set);
        all_used(on);
        int x = dq_of(m, on, 0, "x");
        int y = x < 0 ? -1 : step(m, on, CIR_OP_SOFTMAX, 1, &x, -1, "float", set, n_set);
        return q_into(m, on, y, 3);
    }
    onnx_attr *cl = attr(on, "channels_last");
    if (cl && cl->a.i) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "channels_last=1 is not supported");
    if (cl) cl->used = true;
    int x = dq_of(m, on, 0, "x");
    if (x < 0) return m->g->ctx->status;
    int y;
    if (!strcmp(op, "QLinearAveragePool")) {
        cuvil_attr set[1];
        char buf[16];
        int n_set = 0;
        cuvil_status s = auto_pad(m, on, set, buf, sizeof buf, &n_set);
        if (s) return s;
        y = step(m, on, CIR_OP_AVG_POOL, 1, &x, -1, "float", set, n_set);
    } else if (!strcmp(op, "QLinearLeakyRelu")) {
        cuvil_attr set = {.name = "alpha", .type = CUVIL_ATTR_FLOAT, .f = attr_float(on, "alpha", 0.01f)};
        all_used(on);
        y = step(m, on, CIR_OP_LEAKY_RELU, 1, &x, -1, "float", &set, 1);
    } else {   /* QLinearSigmoid, QLinearGlobalAveragePool */
        y = step(m, on, kind, 1, &x, -1, "float", NULL, 0);
    }
    return q_into(m, on, y, 3);
}

/* QGemm (A, a_scale, a_zp, B, b_scale, b_zp, [C int32], [y_scale], [y_zp]; transA, transB,
 * alpha 1): the operands transposed where asked, then qlinear_matmul (float out without
 * y_scale). */
static cuvil_status map_ms_qgemm(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    float alpha = attr_float(on, "alpha", 1.0f);
    int64_t ta = attr_int(on, "transA", 0), tb = attr_int(on, "transB", 0);
    all_used(on);
    if (alpha != 1.0f) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "alpha=%g (Cuvil takes 1)", (double)alpha);
    int a = in_at(on, 0), b = in_at(on, 3);
    if (a < 0 || b < 0 || in_at(on, 1) < 0 || in_at(on, 4) < 0)
        return node_err(m, on, CUVIL_ERR_MODEL, "A, B and their scales are required");
    static const int64_t perm[2] = {1, 0};
    cuvil_attr tp = {.name = "perm", .type = CUVIL_ATTR_INTS, .ints = perm, .n = 2};
    if (ta && (a = step(m, on, CIR_OP_TRANSPOSE, 1, &a, -1, "A^T", &tp, 1)) < 0) return m->g->ctx->status;
    if (tb && (b = step(m, on, CIR_OP_TRANSPOSE, 1, &b, -1, "B^T", &tp, 1)) < 0) return m->g->ctx->status;
    int in[9] = {a, in_at(on, 1), in_at(on, 2), b, in_at(on, 4), in_at(on, 5), in_at(on, 7), in_at(on, 8), in_at(on, 6)};
    return raw_step(m, on, kind, 9, in, on->out[0], "y") < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* DynamicQuantizeMatMul (A float, B, b_scale, [b_zp], [bias]): A quantized as
 * DynamicQuantizeLinear does, then qlinear_matmul with a float output, plus the bias.
 * MatMulIntegerToFloat (A, B, a_scale, b_scale, [a_zp], [b_zp], [bias]): the same without the
 * first step. */
static cuvil_status map_ms_dq_matmul(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    all_used(on);
    const bool dyn = !strcmp(on->op, "DynamicQuantizeMatMul");
    int a = in_at(on, 0), b = in_at(on, 1), as, az, bs, bz, bias;
    if (dyn) {
        bs = in_at(on, 2), bz = in_at(on, 3), bias = in_at(on, 4);
        char name[600];
        int outs[3];
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%.280s:%s", on->name, k == 0 ? "a_q" : k == 1 ? "a_scale" : "a_zero_point");
            if ((outs[k] = cir_value_add(m->g, name, CIR_VAL_ACT)) < 0) return m->g->ctx->status;
        }
        if (a < 0 || cir_node_add(m->g, CIR_OP_DYNAMIC_QUANTIZE, on->name, on->op, 1, &a, 3, outs) < 0)
            return a < 0 ? node_err(m, on, CUVIL_ERR_MODEL, "input A is required") : m->g->ctx->status;
        a = outs[0], as = outs[1], az = outs[2];
    } else {
        as = in_at(on, 2), bs = in_at(on, 3), az = in_at(on, 4), bz = in_at(on, 5), bias = in_at(on, 6);
    }
    if (a < 0 || b < 0 || as < 0 || bs < 0) return node_err(m, on, CUVIL_ERR_MODEL, "A, B and the scales are required");
    int in[6] = {a, as, az, b, bs, bz};
    int y = raw_step(m, on, kind, 6, in, bias >= 0 ? -1 : on->out[0], "y");
    if (y < 0 || bias < 0) return y < 0 ? m->g->ctx->status : CUVIL_OK;
    return raw_step(m, on, CIR_OP_ADD, 2, (int[]){y, bias}, on->out[0], "biased") < 0 ? m->g->ctx->status : CUVIL_OK;
}

/* MatMulNBits (A float32 [..., K], B uint8 [N, blocks, block_size * bits / 8], scales [N *
 * blocks], [zero_points: uint8 packed like B's values, or float [N * blocks]], [g_idx], [bias
 * [N]]; K, N, bits, block_size): A times the dequantized weights, W[k][n] = (q - zp) * scale of
 * k's block (zp 2^(bits-1) when absent), each byte's values from its low bits up (g_idx, the
 * 4th input, refused). 4 bits: matmul_nbits reads B as it is (its kernel dequantizes inside the
 * product; the zero points become zp * scale). 2 and 8 bits: the weights are dequantized now,
 * into a float32 [K, N] constant that MatMul reads. B, the scales and the zero points must be
 * constants. */
static cuvil_status map_ms_matmul_nbits(onnx_mapper *m, onnx_node *on, cir_op_kind kind) {
    const int64_t K = attr_int(on, "K", -1), N = attr_int(on, "N", -1), bits = attr_int(on, "bits", 4);
    const int64_t bs = attr_int(on, "block_size", -1);
    all_used(on);
    if (K <= 0 || N <= 0 || K > m->g->limits.dim || N > m->g->limits.dim)
        return node_err(m, on, CUVIL_ERR_MODEL, "attributes K=%lld and N=%lld must be positive (and at most %lld)", (long long)K,
                        (long long)N, (long long)m->g->limits.dim);
    if (bits != 2 && bits != 4 && bits != 8) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "bits=%lld (Cuvil takes 2, 4, 8)", (long long)bits);
    if (bs < 16 || bs > 65536 || (bs & (bs - 1)))
        return node_err(m, on, CUVIL_ERR_MODEL, "block_size=%lld must be a power of 2 from 16", (long long)bs);
    if (in_at(on, 4) >= 0) return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "g_idx (a column order) is not supported");
    int a = in_at(on, 0), bi = in_at(on, 1), si = in_at(on, 2), zi = in_at(on, 3), bias = in_at(on, 5);
    if (a < 0 || bi < 0 || si < 0) return node_err(m, on, CUVIL_ERR_MODEL, "A, B and scales are required");
    cir_value *B = cir_val(m->g, bi), *S = cir_val(m->g, si), *Z = zi >= 0 ? cir_val(m->g, zi) : NULL;
    const int64_t nb = (K + bs - 1) / bs, blob = bs * bits / 8;
    if (!cir_is_const(B) || !cir_is_const(S) || (Z && !cir_is_const(Z)))
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "B, scales and zero_points must be constants (initializers)");
    if (B->dtype != CIR_U8 || cir_numel(B) != N * nb * blob)
        return node_err(m, on, CUVIL_ERR_SHAPE, "B '%s' must be uint8 [%lld, %lld, %lld] (N, blocks, block bytes)", B->name,
                        (long long)N, (long long)nb, (long long)blob);
    if (S->dtype != CIR_F32 || cir_numel(S) != N * nb)
        return node_err(m, on, CUVIL_ERR_SHAPE, "scales '%s' must be float32 with %lld values (N x blocks)", S->name,
                        (long long)(N * nb));
    const int64_t zrow = (nb * bits + 7) / 8;   /* packed zero points' bytes per column */
    if (Z && !(Z->dtype == CIR_U8 && cir_numel(Z) == N * zrow) && !(Z->dtype == CIR_F32 && cir_numel(Z) == N * nb))
        return node_err(m, on, CUVIL_ERR_SHAPE, "zero_points '%s' must be uint8 [%lld] (packed) or float32 [%lld]", Z->name,
                        (long long)(N * zrow), (long long)(N * nb));
    const unsigned mask = (1u << bits) - 1, per = (unsigned)(8 / bits);
    const uint8_t *zq = Z && Z->dtype == CIR_U8 ? Z->data : NULL;
    const float *sc = S->data, *zf = Z && Z->dtype == CIR_F32 ? Z->data : NULL;
    if (bits == 4) {   /* the weights stay 4-bit: matmul_nbits dequantizes them inside the product */
        const int64_t zdims[2] = {N, nb};
        const int zs = const_from(m, on, "zero_point_scaled", CIR_F32, 2, zdims, NULL);
        if (zs < 0) return m->g->ctx->status;
        float *Zs = cir_val(m->g, zs)->data;
        for (int64_t n = 0; n < N; n++)
            for (int64_t b = 0; b < nb; b++) {
                float z = 8;
                if (zq) z = (float)((zq[n * zrow + b / 2] >> ((unsigned)(b & 1) * 4)) & 15);
                else if (zf) z = zf[n * nb + b];
                Zs[n * nb + b] = z * sc[n * nb + b];
            }
        const cuvil_attr at[3] = {{.name = "K", .type = CUVIL_ATTR_INT, .i = K},
                                  {.name = "N", .type = CUVIL_ATTR_INT, .i = N},
                                  {.name = "block_size", .type = CUVIL_ATTR_INT, .i = bs}};
        int y = step(m, on, CIR_OP_MATMUL_NBITS, 4, (int[]){a, bi, si, zs}, bias >= 0 ? -1 : on->out[0], "y", at, 3);
        if (y < 0 || bias < 0) return y < 0 ? m->g->ctx->status : CUVIL_OK;
        return step(m, on, CIR_OP_ADD, 2, (int[]){y, bias}, on->out[0], "biased", NULL, 0) < 0 ? m->g->ctx->status : CUVIL_OK;
    }
    bool ovf = false;
    const uint64_t nbytes = (uint64_t)cuvil_i64_mul(&ovf, cuvil_i64_mul(&ovf, K, N), 4);
    if (ovf || nbytes > m->g->limits.total_bytes)
        return node_err(m, on, CUVIL_ERR_UNSUPPORTED, "the dequantized weights (%lld x %lld float32) are over the limit "
                        "total_bytes=%llu", (long long)K, (long long)N, (unsigned long long)m->g->limits.total_bytes);
    const int64_t dims[2] = {K, N};
    const int w = const_from(m, on, "weights", CIR_F32, 2, dims, NULL);
    if (w < 0) return m->g->ctx->status;
    float *W = cir_val(m->g, w)->data;
    const uint8_t *q = B->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const int64_t b = k / bs, j = k % bs;
            const uint8_t byte = q[(n * nb + b) * blob + j / per];
            const float v = (float)((byte >> ((unsigned)(j % per) * (unsigned)bits)) & mask);
            float z = (float)(1u << (bits - 1));
            if (zq) z = (float)((zq[n * zrow + b * bits / 8] >> ((unsigned)(b * bits % 8))) & mask);
            else if (zf) z = zf[n * nb + b];
            W[k * N + n] = (v - z) * sc[n * nb + b];
        }
    (void)kind;
    int y = step(m, on, CIR_OP_MATMUL, 2, (int[]){a, w}, bias >= 0 ? -1 : on->out[0], "y", NULL, 0);
    if (y < 0 || bias < 0) return y < 0 ? m->g->ctx->status : CUVIL_OK;
    return step(m, on, CIR_OP_ADD, 2, (int[]){y, bias}, on->out[0], "biased", NULL, 0) < 0 ? m->g->ctx->status : CUVIL_OK;
}

static const op_map ms_table[] = {
    {"Gelu", 1, CIR_OP_GELU, map_ms_gelu},
    {"FastGelu", 1, CIR_OP_GELU, map_ms_gelu},
    {"BiasGelu", 1, CIR_OP_GELU, map_ms_gelu},
    {"QuickGelu", 1, CIR_OP_GELU, map_ms_gelu},
    {"FusedMatMul", 1, CIR_OP_MATMUL, map_ms_fused_matmul},
    {"SkipLayerNormalization", 1, CIR_OP_LAYER_NORM, map_ms_layer_norm},
    {"SkipSimplifiedLayerNormalization", 1, CIR_OP_LAYER_NORM, map_ms_layer_norm},
    {"EmbedLayerNormalization", 1, CIR_OP_LAYER_NORM, map_ms_embed_layer_norm},
    {"Attention", 1, CIR_OP_SDPA, map_ms_attention},
    {"MultiHeadAttention", 1, CIR_OP_SDPA, map_ms_mha},
    {"GroupQueryAttention", 1, CIR_OP_SDPA, map_ms_gqa},
    {"RotaryEmbedding", 1, CIR_OP_ROTARY, map_ms_rotary},
    {"BiasSoftmax", 1, CIR_OP_SOFTMAX, map_ms_bias_softmax},
    {"QLinearAdd", 1, CIR_OP_ADD, map_ms_qlinear},
    {"QLinearMul", 1, CIR_OP_MUL, map_ms_qlinear},
    {"QLinearSigmoid", 1, CIR_OP_SIGMOID, map_ms_qlinear},
    {"QLinearSoftmax", 1, CIR_OP_SOFTMAX, map_ms_qlinear},
    {"QLinearLeakyRelu", 1, CIR_OP_LEAKY_RELU, map_ms_qlinear},
    {"QLinearAveragePool", 1, CIR_OP_AVG_POOL, map_ms_qlinear},
    {"QLinearGlobalAveragePool", 1, CIR_OP_GLOBAL_AVG_POOL, map_ms_qlinear},
    {"QLinearConcat", 1, CIR_OP_CONCAT, map_ms_qlinear},
    {"QGemm", 1, CIR_OP_QLINEAR_MATMUL, map_ms_qgemm},
    {"DynamicQuantizeMatMul", 1, CIR_OP_QLINEAR_MATMUL, map_ms_dq_matmul},
    {"MatMulIntegerToFloat", 1, CIR_OP_QLINEAR_MATMUL, map_ms_dq_matmul},
    {"MatMulNBits", 1, CIR_OP_MATMUL_NBITS, map_ms_matmul_nbits},
    {"DynamicQuantizeLSTM", 1, CIR_OP_RNN, map_ms_dq_lstm},
};

/* ===== The table =========================================================================== */
static const op_map table[] = {
    {"Conv", 1, CIR_OP_CONV, map_conv_pool},
    {"ConvTranspose", 1, CIR_OP_CONV_TRANSPOSE, map_conv_pool},
    {"BatchNormalization", 1, CIR_OP_BATCH_NORM, map_batch_norm},
    {"Relu", 1, CIR_OP_RELU, NULL},
    {"LeakyRelu", 1, CIR_OP_LEAKY_RELU, NULL},
    {"Clip", 1, CIR_OP_CLIP, map_clip},
    {"Sigmoid", 1, CIR_OP_SIGMOID, NULL},
    {"HardSigmoid", 1, CIR_OP_HARD_SIGMOID, NULL},
    {"HardSwish", 1, CIR_OP_HARD_SWISH, NULL},
    {"Tanh", 1, CIR_OP_TANH, NULL},
    {"Exp", 1, CIR_OP_EXP, NULL},
    {"Log", 1, CIR_OP_LOG, NULL},
    {"Sqrt", 1, CIR_OP_SQRT, NULL},
    {"Neg", 1, CIR_OP_NEG, NULL},
    {"Abs", 1, CIR_OP_ABS, NULL},
    {"Reciprocal", 1, CIR_OP_RECIPROCAL, NULL},
    {"Erf", 1, CIR_OP_ERF, NULL},
    {"Sin", 7, CIR_OP_SIN, NULL},
    {"Cos", 7, CIR_OP_COS, NULL},
    {"Tan", 7, CIR_OP_TAN, NULL},
    {"Asin", 7, CIR_OP_ASIN, NULL},
    {"Acos", 7, CIR_OP_ACOS, NULL},
    {"Atan", 7, CIR_OP_ATAN, NULL},
    {"Sinh", 9, CIR_OP_SINH, NULL},
    {"Cosh", 9, CIR_OP_COSH, NULL},
    {"Asinh", 9, CIR_OP_ASINH, NULL},
    {"Acosh", 9, CIR_OP_ACOSH, NULL},
    {"Atanh", 9, CIR_OP_ATANH, NULL},
    {"Sign", 9, CIR_OP_SIGN, NULL},
    {"Softsign", 1, CIR_OP_SOFTSIGN, NULL},
    {"Selu", 6, CIR_OP_SELU, NULL},
    {"ThresholdedRelu", 10, CIR_OP_THRESHOLDED_RELU, NULL},
    {"Shrink", 9, CIR_OP_SHRINK, NULL},
    {"Mish", 18, CIR_OP_MISH, NULL},
    {"Elu", 1, CIR_OP_ELU, NULL},
    {"Celu", 12, CIR_OP_ELU, map_celu},
    {"EyeLike", 9, CIR_OP_EYE_LIKE, NULL},
    {"LRN", 1, CIR_OP_LRN, NULL},
    {"GridSample", 16, CIR_OP_GRID_SAMPLE, NULL},
    {"Einsum", 12, CIR_OP_EINSUM, map_einsum},
    {"TfIdfVectorizer", 9, CIR_OP_TFIDF, NULL},
    {"Det", 11, CIR_OP_DET, NULL},
    {"DFT", 17, CIR_OP_DFT, map_dft},
    {"STFT", 17, CIR_OP_STFT, NULL},
    {"RotaryEmbedding", 23, CIR_OP_ROTARY, NULL},
    {"CenterCropPad", 18, CIR_OP_CENTER_CROP_PAD, NULL},
    {"AffineGrid", 20, CIR_OP_AFFINE_GRID, NULL},
    {"Col2Im", 18, CIR_OP_COL2IM, NULL},
    /* ONNX Runtime's RMS normalisation, which its optimiser writes in the ONNX domain */
    {"SimplifiedLayerNormalization", 1, CIR_OP_LAYER_NORM, map_ms_layer_norm},
    {"CausalConvWithState", 27, CIR_OP_CAUSAL_CONV, NULL},
    {"LinearAttention", 27, CIR_OP_LINEAR_ATTENTION, NULL},
    {"HannWindow", 17, CIR_OP_WINDOW, map_window},
    {"HammingWindow", 17, CIR_OP_WINDOW, map_window},
    {"BlackmanWindow", 17, CIR_OP_WINDOW, map_window},
    {"QuantizeLinear", 10, CIR_OP_QUANTIZE, map_quant},
    {"DequantizeLinear", 10, CIR_OP_DEQUANTIZE, map_quant},
    {"DynamicQuantizeLinear", 11, CIR_OP_DYNAMIC_QUANTIZE, NULL},
    {"MatMulInteger", 10, CIR_OP_MATMUL_INTEGER, NULL},
    {"QLinearMatMul", 10, CIR_OP_QLINEAR_MATMUL, NULL},
    {"ConvInteger", 10, CIR_OP_CONV_INTEGER, map_conv_pool},
    {"QLinearConv", 10, CIR_OP_QLINEAR_CONV, map_conv_pool},
    {"ReverseSequence", 10, CIR_OP_REVERSE_SEQUENCE, NULL},
    {"Swish", 24, CIR_OP_MUL, map_swish},
    {"SwiGLU", 28, CIR_OP_MUL, map_swish},
    {"MeanVarianceNormalization", 9, CIR_OP_SUB, map_mvn},
    {"LpNormalization", 1, CIR_OP_DIV, map_lp_norm},
    {"Softplus", 1, CIR_OP_SOFTPLUS, NULL},
    {"Floor", 1, CIR_OP_FLOOR, NULL},
    {"Ceil", 1, CIR_OP_CEIL, NULL},
    {"Round", 1, CIR_OP_ROUND, NULL},
    {"Gelu", 1, CIR_OP_GELU, NULL},
    {"Add", 1, CIR_OP_ADD, map_binary},
    {"Sub", 1, CIR_OP_SUB, map_binary},
    {"Mul", 1, CIR_OP_MUL, map_binary},
    {"Div", 1, CIR_OP_DIV, map_binary},
    {"Pow", 1, CIR_OP_POW, map_binary},
    {"Max", 1, CIR_OP_MAX, map_binary},
    {"Min", 1, CIR_OP_MIN, map_binary},
    {"PRelu", 1, CIR_OP_PRELU, map_binary},
    {"Mod", 10, CIR_OP_MOD, map_mod},
    {"BitShift", 11, CIR_OP_BIT_SHIFT, NULL},
    {"BitwiseAnd", 18, CIR_OP_BITWISE_AND, NULL},
    {"BitwiseOr", 18, CIR_OP_BITWISE_OR, NULL},
    {"BitwiseXor", 18, CIR_OP_BITWISE_XOR, NULL},
    {"BitwiseNot", 18, CIR_OP_BITWISE_NOT, NULL},
    {"MaxPool", 1, CIR_OP_MAX_POOL, map_conv_pool},
    {"AveragePool", 1, CIR_OP_AVG_POOL, map_conv_pool},
    {"LpPool", 1, CIR_OP_POOL_ND, map_conv_pool},
    {"GlobalAveragePool", 1, CIR_OP_GLOBAL_AVG_POOL, NULL},
    {"GlobalMaxPool", 1, CIR_OP_GLOBAL_MAX_POOL, NULL},
    {"Reshape", 1, CIR_OP_RESHAPE, map_reshape},
    {"Flatten", 1, CIR_OP_FLATTEN, NULL},
    {"Squeeze", 1, CIR_OP_SQUEEZE, map_squeeze},
    {"Unsqueeze", 1, CIR_OP_UNSQUEEZE, map_squeeze},
    {"Identity", 1, CIR_OP_IDENTITY, NULL},
    {"Dropout", 1, CIR_OP_IDENTITY, map_dropout},
    {"Transpose", 1, CIR_OP_TRANSPOSE, NULL},
    {"Concat", 1, CIR_OP_CONCAT, map_concat},
    {"Gemm", 1, CIR_OP_GEMM, map_gemm},
    {"MatMul", 1, CIR_OP_MATMUL, NULL},
    {"Constant", 1, CIR_OP_NONE, map_constant},
    {"Shape", 1, CIR_OP_SHAPE, NULL},
    {"Size", 1, CIR_OP_SIZE, NULL},
    {"Slice", 1, CIR_OP_SLICE, map_slice},
    {"Split", 1, CIR_OP_SPLIT, map_split},
    {"Softmax", 1, CIR_OP_SOFTMAX, map_softmax},
    {"LogSoftmax", 1, CIR_OP_LOG_SOFTMAX, map_softmax},
    {"Hardmax", 1, CIR_OP_HARDMAX, map_softmax},
    {"LayerNormalization", 17, CIR_OP_LAYER_NORM, map_layer_norm},
    {"RNN", 1, CIR_OP_RNN, map_rnn},
    {"GRU", 1, CIR_OP_RNN, map_rnn},
    {"LSTM", 1, CIR_OP_RNN, map_rnn},
    {"Attention", 23, CIR_OP_SDPA, map_attention},
    {"RMSNormalization", 23, CIR_OP_LAYER_NORM, map_rms_norm},
    {"Gather", 1, CIR_OP_GATHER, NULL},
    {"GatherElements", 11, CIR_OP_GATHER_ELEMENTS, NULL},
    {"ScatterElements", 11, CIR_OP_SCATTER_ELEMENTS, NULL},
    {"GatherND", 11, CIR_OP_GATHER_ND, NULL},
    {"ScatterND", 11, CIR_OP_SCATTER_ND, NULL},
    {"ArgMax", 1, CIR_OP_ARGMAX, NULL},
    {"ArgMin", 1, CIR_OP_ARGMIN, NULL},
    {"Cast", 6, CIR_OP_CAST, map_cast},
    {"Trilu", 14, CIR_OP_TRILU, NULL},
    {"InstanceNormalization", 1, CIR_OP_INSTANCE_NORM, NULL},
    {"GroupNormalization", 18, CIR_OP_INSTANCE_NORM, map_group_norm},
    {"DepthToSpace", 1, CIR_OP_DEPTH_TO_SPACE, NULL},
    {"SpaceToDepth", 1, CIR_OP_SPACE_TO_DEPTH, NULL},
    {"CumSum", 11, CIR_OP_CUMSUM, NULL},
    {"CumProd", 26, CIR_OP_CUMPROD, NULL},
    {"TopK", 10, CIR_OP_TOPK, NULL},
    {"NonZero", 9, CIR_OP_NONZERO, NULL},
    {"SequenceEmpty", 11, CIR_OP_SEQ_EMPTY, map_seq_empty},
    {"SequenceConstruct", 11, CIR_OP_SEQ_CONSTRUCT, NULL},
    {"SequenceInsert", 11, CIR_OP_SEQ_INSERT, NULL},
    {"SequenceErase", 11, CIR_OP_SEQ_ERASE, NULL},
    {"SequenceAt", 11, CIR_OP_SEQ_AT, NULL},
    {"SequenceLength", 11, CIR_OP_SEQ_LENGTH, NULL},
    {"SplitToSequence", 11, CIR_OP_SPLIT_TO_SEQ, NULL},
    {"ConcatFromSequence", 11, CIR_OP_CONCAT_FROM_SEQ, NULL},
    {"Compress", 9, CIR_OP_COMPRESS, NULL},
    {"NonMaxSuppression", 10, CIR_OP_NMS, NULL},
    {"OneHot", 9, CIR_OP_ONEHOT, NULL},
    {"Unique", 11, CIR_OP_UNIQUE, NULL},
    {"If", 1, CIR_OP_IF, NULL},
    {"Loop", 1, CIR_OP_LOOP, NULL},   /* onnx_load.c's load_loop, not mapped here */
    {"Scan", 8, CIR_OP_LOOP, NULL},
    {"SequenceMap", 17, CIR_OP_LOOP, NULL},   /* onnx_load.c's load_seq_map: a loop over the elements */
    /* onnx_load.c's load_optional_op: an optional is its value and a bool that says it is there */
    {"Optional", 15, CIR_OP_OPT_ELEM, NULL},
    {"OptionalHasElement", 15, CIR_OP_OPT_ELEM, NULL},
    {"OptionalGetElement", 15, CIR_OP_OPT_ELEM, NULL},
    {"Scatter", 9, CIR_OP_SCATTER_ELEMENTS, NULL},   /* deprecated in 11 for ScatterElements: the same op */
    {"IsNaN", 9, CIR_OP_IS_NAN, NULL},
    {"IsInf", 10, CIR_OP_IS_INF, NULL},
    {"CastLike", 15, CIR_OP_CAST, map_cast},
    {"BitCast", 26, CIR_OP_BITCAST, map_cast},
    {"Pad", 1, CIR_OP_PAD, map_pad},
    {"ReduceSum", 1, CIR_OP_REDUCE_SUM, map_reduce},
    {"NegativeLogLikelihoodLoss", 12, CIR_OP_NLL_LOSS, map_nll},
    {"SoftmaxCrossEntropyLoss", 12, CIR_OP_NLL_LOSS, map_sce},
    {"ReduceMean", 1, CIR_OP_REDUCE_MEAN, map_reduce},
    {"ReduceMax", 1, CIR_OP_REDUCE_MAX, map_reduce},
    {"ReduceMin", 1, CIR_OP_REDUCE_MIN, map_reduce},
    {"ReduceProd", 1, CIR_OP_REDUCE_PROD, map_reduce},
    {"ReduceSumSquare", 1, CIR_OP_REDUCE_SUM_SQUARE, map_reduce},
    {"ReduceL1", 1, CIR_OP_REDUCE_L1, map_reduce},
    {"ReduceL2", 1, CIR_OP_REDUCE_L2, map_reduce},
    {"ReduceLogSumExp", 1, CIR_OP_REDUCE_LOG_SUM_EXP, map_reduce},
    {"ReduceLogSum", 1, CIR_OP_REDUCE_SUM, map_reduce_log_sum},
    {"Resize", 10, CIR_OP_RESIZE, map_resize},
    {"Upsample", 7, CIR_OP_RESIZE, map_resize},
    {"ConstantOfShape", 9, CIR_OP_CONSTANT_OF_SHAPE, map_constant_of_shape},
    {"Range", 11, CIR_OP_RANGE, NULL},
    {"Expand", 8, CIR_OP_EXPAND, NULL},
    {"Equal", 7, CIR_OP_EQUAL, NULL},
    {"Less", 7, CIR_OP_LESS, NULL},
    {"Greater", 7, CIR_OP_GREATER, NULL},
    {"LessOrEqual", 12, CIR_OP_LESS_EQUAL, NULL},
    {"GreaterOrEqual", 12, CIR_OP_GREATER_EQUAL, NULL},
    {"Not", 1, CIR_OP_NOT, NULL},
    {"And", 7, CIR_OP_AND, NULL},
    {"Or", 7, CIR_OP_OR, NULL},
    {"Xor", 7, CIR_OP_XOR, NULL},
    {"Where", 9, CIR_OP_WHERE, NULL},
    {"Tile", 6, CIR_OP_TILE, NULL},
    {"Sum", 6, CIR_OP_SUM, map_binary},
    {"Mean", 6, CIR_OP_MEAN, map_binary},
};

static const op_map *lookup(const char *op) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].op, op)) return &table[i];
    return NULL;
}

static const op_map *lookup_domain(const char *domain, const char *op) {
    if (!*domain) return lookup(op);
    if (strcmp(domain, "com.microsoft")) return NULL;
    for (size_t i = 0; i < sizeof ms_table / sizeof ms_table[0]; i++)
        if (!strcmp(ms_table[i].op, op)) return &ms_table[i];
    return NULL;
}

void cuvil_onnx_list_ops(cuvil_sb *sb) {
    for (int t = 0; t < 2; t++) {
        const op_map *tab = t ? ms_table : table;
        size_t n = t ? sizeof ms_table / sizeof ms_table[0] : sizeof table / sizeof table[0];
        for (size_t i = 0; i < n; i++)
            cuvil_sb_printf(sb, "%s\t%s\t%d\t%s\t%s\n", t ? "com.microsoft" : "", tab[i].op, tab[i].since,
                            tab[i].kind > CIR_OP_NONE && tab[i].kind < CIR_OP__COUNT ? cir_op_def(tab[i].kind)->name : "-",
                            tab[i].map ? "mapped" : "direct");
    }
}

int cuvil_onnx_domain_op_since(const char *domain, const char *op) {
    const op_map *e = lookup_domain(domain, op);
    return e ? e->since : 0;
}

int cuvil_onnx_op_since(const char *op) {
    const op_map *e = lookup(op);
    return e ? e->since : 0;
}

cuvil_status cuvil_onnx_map_node(onnx_mapper *m, onnx_node *on) {
    const op_map *e = lookup_domain(on->domain ? on->domain : "", on->op);
    CUVIL_ASSERT(e && on->opset >= e->since);
    for (int i = 0; i < on->n_attrs; i++) on->attrs[i].used = false;
    /* (ONNX's ops were checked against their schemas; a contrib op's mapping needs output 0) */
    if (on->domain && *on->domain && (on->n_out < 1 || on->out[0] < 0))
        return node_err(m, on, CUVIL_ERR_MODEL, "output 0 is required");
    return e->map ? e->map(m, on, e->kind) : map_plain(m, on, e->kind);
}

cuvil_status cuvil_onnx_check_dropped(onnx_mapper *m) {
    cir_graph *g = m->g;
    if (!m->n_dropped) return CUVIL_OK;
    cir_graph_count_uses(g);
    for (int i = 0; i < m->n_dropped; i++) {
        cir_value *v = cir_val(g, m->dropped[i].value);
        if (v->n_uses)
            return cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED, "%s: output '%s' (%s) is used", m->dropped[i].desc, v->name,
                             m->dropped[i].why);
    }
    return CUVIL_OK;
}
