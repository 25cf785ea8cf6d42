/* op_binary.c -- Add, Sub, Mul, Div, Pow, Max, Min, PRelu with numpy broadcasting. */
#include "frontend/onnx/ops/ops_int.h"

#include <math.h>
#include <string.h>

static int binop(const cir_node *n) {
    static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"};
    /* keep in ORDER with CUVIL_BIN_* */
    for (int i = 0; i < CUVIL_BIN__COUNT; i++)
        if (!strcmp(names[i], n->op)) return i;
    CUVIL_ASSERT(!"not a binary op");
}

static bool same_shape(const cir_value *a, const cir_value *b) {
    return a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
}

/* Before numpy-style broadcasting (opset 7 for Add & co., 8 for Max/Min): operands of the same
 * shape, or, with broadcast=1, B matching a run of A's dims that starts at `axis` (default:
 * its trailing dims), B's dims of size 1 broadcasting. The run at the trailing dims is numpy's
 * rule; any other axis is not, and is refused. Max/Min before 8 take equal shapes only. */
static cuvil_status check_legacy_broadcast(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b) {
    bool maxmin = !strcmp(n->op, "Max") || !strcmp(n->op, "Min");
    /* PRelu had no broadcast attribute: a slope of one element applies to all (numpy agrees) */
    if (n->opset >= (maxmin ? 8 : 7) || same_shape(a, b) || !strcmp(n->op, "PRelu")) return CUVIL_OK;
    char sa[256], sb[256];
    if (maxmin || !cir_attr_int(n, "broadcast", 0))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "inputs '%s' %s and '%s' %s must have one shape (opset %d has no "
                            "broadcasting%s)", a->name, cir_shape_str(g, a, sa, sizeof sa), b->name,
                            cir_shape_str(g, b, sb, sizeof sb), n->opset, maxmin ? "" : " without broadcast=1");
    if (b->ndim > a->ndim)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' has more dims than '%s'", b->name, a->name);
    const cir_attr *ax = cir_attr_find(n, "axis");
    if (ax && ax->i != a->ndim - b->ndim && !(ax->i < 0 && ax->i + a->ndim == a->ndim - b->ndim))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "broadcasting at axis=%lld (opsets before 7) is not supported; "
                            "only at the trailing dims", (long long)ax->i);
    return CUVIL_OK;
}

static cuvil_status binary_infer(cir_graph *g, cir_node *n) {
    bool variadic = !strcmp(n->op, "Max") || !strcmp(n->op, "Min");
    cuvil_status s = op_check_arity(g, n, variadic ? 1 : 2, 2, 1, 1);
    if (s) return s;
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1 < n->n_in ? 1 : 0);
    if (!b) b = a;
    int op = binop(n);
    if (a->dtype != b->dtype && op != CUVIL_BIN_POW)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", a->name,
                            cuvil_dtype_name(a->dtype), b->name, cuvil_dtype_name(b->dtype));
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    if ((s = check_legacy_broadcast(g, n, a, b))) return s;
    if (op == CUVIL_BIN_PRELU) {
        /* the slope broadcasts onto X (unidirectional) */
        if ((s = op_broadcast(g, n, a, b, &ndim, dims))) return s;
        if (ndim != a->ndim || memcmp(dims, a->dims, sizeof(int64_t) * (size_t)ndim))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "slope '%s' does not broadcast to X's shape", b->name);
    } else if ((s = op_broadcast(g, n, a, b, &ndim, dims))) {
        return s;
    }
    cir_set_shape(cir_out(g, n, 0), a->dtype, ndim, dims);
    bool all_const = cir_is_const(a) && cir_is_const(b);
    /* a constant exponent of another numeric type is converted to float32 by emit */
    bool b_converts = op == CUVIL_BIN_POW && cir_is_const(b) && cuvil_dtype_size(b->dtype);
    if (!all_const && ((s = op_need_f32(g, n, 0)) || (!b_converts && (s = op_need_f32(g, n, b == a ? 0 : 1))))) return s;
    return CUVIL_OK;
}

/* Integer arithmetic as the hardware does it: two's complement wrap-around (no undefined
 * behaviour on overflow), division truncating, x / 0 = 0 and INT64_MIN / -1 = INT64_MIN. The
 * result is then narrowed to the output type by cir_const_set_i64. */
static int64_t apply_int(int op, int64_t x, int64_t y) {
    switch (op) {
    case CUVIL_BIN_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
    case CUVIL_BIN_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
    case CUVIL_BIN_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
    case CUVIL_BIN_DIV: return y == 0 ? 0 : (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;   /* 0: refused before */
    case CUVIL_BIN_POW: return cir_f64_to_i64(pow((double)x, (double)y));
    case CUVIL_BIN_MAX: return x > y ? x : y;
    case CUVIL_BIN_MIN: return x < y ? x : y;
    case CUVIL_BIN_PRELU: return x >= 0 ? x : (int64_t)((uint64_t)x * (uint64_t)y);
    default: CUVIL_ASSERT(!"binary op");
    }
}

static double apply(int op, double x, double y) {
    switch (op) {
    case CUVIL_BIN_ADD: return x + y;
    case CUVIL_BIN_SUB: return x - y;
    case CUVIL_BIN_MUL: return x * y;
    case CUVIL_BIN_DIV: return x / y;
    case CUVIL_BIN_POW: return pow(x, y);
    case CUVIL_BIN_MAX: return x > y ? x : y;
    case CUVIL_BIN_MIN: return x < y ? x : y;
    case CUVIL_BIN_PRELU: return x >= 0 ? x : x * y;
    default: CUVIL_ASSERT(!"binary op");
    }
}

static void params(cir_graph *g, cir_node *n, cuvil_binary_params *p) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1) ? cir_in(g, n, 1) : a, *y = cir_out(g, n, 0);
    memset(p, 0, sizeof *p);
    p->op = binop(n);
    p->ndim = y->ndim;
    for (int i = 0; i < y->ndim; i++) p->dims[i] = y->dims[i];
    op_bcast_strides(a, y->ndim, y->dims, p->a_strides);
    op_bcast_strides(b, y->ndim, y->dims, p->b_strides);
    p->act = n->act;
}

static cuvil_status binary_fold(cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1) ? cir_in(g, n, 1) : a, *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_binary_params p;
    params(g, n, &p);
    if (y->dtype == CUVIL_DTYPE_FLOAT32 && b->dtype == CUVIL_DTYPE_FLOAT32) {
        cuvil_f32_binary__scalar(&p, a->data, b->data, y->data);
        return CUVIL_OK;
    }
    bool integer = y->dtype != CUVIL_DTYPE_FLOAT32 && y->dtype != CUVIL_DTYPE_FLOAT64 &&
                   y->dtype != CUVIL_DTYPE_FLOAT16 && y->dtype != CUVIL_DTYPE_BFLOAT16;
    if (integer && p.op == CUVIL_BIN_DIV)   /* as ONNX Runtime refuses it when the session starts */
        for (int64_t i = 0; i < cir_numel(b); i++)
            if (cir_const_i64(b, i) == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "integer division by zero");
    int64_t cnt = cir_numel(y), idx[CIR_MAX_DIMS] = {0};
    for (int64_t i = 0; i < cnt; i++) {
        int64_t ia = 0, ib = 0;
        for (int d = 0; d < p.ndim; d++) {
            ia += idx[d] * p.a_strides[d];
            ib += idx[d] * p.b_strides[d];
        }
        if (integer) cir_const_set_i64(y, i, apply_int(p.op, cir_const_i64(a, ia), cir_const_i64(b, ib)));
        else cir_const_set_f64(y, i, apply(p.op, cir_const_f64(a, ia), cir_const_f64(b, ib)));
        for (int d = p.ndim - 1; d >= 0 && ++idx[d] == p.dims[d]; d--) idx[d] = 0;
    }
    return CUVIL_OK;
}

static cuvil_status binary_emit(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_binary_params p;
    params(g, n, &p);
    char act[128];
    const char *ps = cg_param(cg, "cuvil_binary_params", "{ .op = %d, .ndim = %d, .dims = %s, .a_strides = %s, .b_strides = %s, .act = %s }",
                              p.op, p.ndim, cg_i64s(cg, p.dims, p.ndim), cg_i64s(cg, p.a_strides, p.ndim),
                              cg_i64s(cg, p.b_strides, p.ndim), cg_act(&p.act, act));
    int bi = n->n_in > 1 && n->in[1] >= 0 ? n->in[1] : n->in[0];
    cir_value *b = &g->values[bi];
    const char *bexpr = cg_in(cg, bi);
    if (b->dtype != CUVIL_DTYPE_FLOAT32) {   /* Pow's constant exponent: as float32 */
        int64_t cnt = cir_numel(b);
        float *f = cuvil_malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
        if (!f) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < cnt; i++) f[i] = (float)cir_const_f64(b, i);
        bexpr = cg_data(cg, f, sizeof(float) * (size_t)cnt, CUVIL_DTYPE_FLOAT32);
        cuvil_free(f);
    }
    cg_printf(cg, "    cuvil_f32_binary(&%s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), bexpr, cg_out(cg, n->out[0]));
    return CUVIL_OK;
}

#define BINARY(name) \
    const cir_opdef cir_op_##name = {#name, "", 1, CIR_OP_TAKES_ACT, binary_infer, binary_fold, binary_emit, NULL};
BINARY(Add)
BINARY(Sub)
BINARY(Mul)
BINARY(Div)
BINARY(Pow)
BINARY(Max)
BINARY(Min)
BINARY(PRelu)
