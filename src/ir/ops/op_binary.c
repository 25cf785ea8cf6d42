/* op_binary.c -- add, sub, mul, div, pow, max, min, prelu, mod, and the integer ones (bit_shift,
 * bitwise_and/or/xor/not), with numpy broadcasting. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

static int binop(const cir_node *n) {
    switch (n->kind) {
    case CIR_OP_ADD: return CUVIL_BIN_ADD;
    case CIR_OP_SUB: return CUVIL_BIN_SUB;
    case CIR_OP_MUL: return CUVIL_BIN_MUL;
    case CIR_OP_DIV: return CUVIL_BIN_DIV;
    case CIR_OP_POW: return CUVIL_BIN_POW;
    case CIR_OP_MAX: return CUVIL_BIN_MAX;
    case CIR_OP_MIN: return CUVIL_BIN_MIN;
    case CIR_OP_PRELU: return CUVIL_BIN_PRELU;
    case CIR_OP_MOD: return cir_attr_int(n, "fmod") ? CUVIL_BIN_FMOD : CUVIL_BIN_MOD;
    case CIR_OP_BIT_SHIFT: return cir_attr_int(n, "direction") ? CUVIL_BIN_SHR : CUVIL_BIN_SHL;
    case CIR_OP_BITWISE_AND: return CUVIL_BIN_BAND;
    case CIR_OP_BITWISE_OR: return CUVIL_BIN_BOR;
    case CIR_OP_BITWISE_XOR: return CUVIL_BIN_BXOR;
    case CIR_OP_BITWISE_NOT: return CUVIL_BIN_BNOT;
    default: CUVIL_ASSERT(!"not a binary op");
    }
}

static const char *const bcast_names[] = {"numpy", "none", "legacy", NULL};
enum { BCAST_NUMPY, BCAST_NONE, BCAST_LEGACY };

static bool bitwise(int op) { return op >= CUVIL_BIN_SHL; }

static bool same_shape(const cir_value *a, const cir_value *b) {
    return a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
}

/* broadcast="none": operands of one shape (ONNX before opset 7, or 8 for max/min, without
 * broadcast=1). broadcast="legacy": B matches a run of A's dims that starts at `axis` (absent:
 * its trailing dims), B's dims of size 1 broadcasting. The run at the trailing dims is numpy's
 * rule; any other axis is refused. */
static cuvil_status check_legacy_broadcast(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b) {
    if (n->kind == CIR_OP_MOD || bitwise(binop(n))) return CUVIL_OK;   /* ONNX's Mod (and these) came after numpy's rule */
    int mode = (int)cir_attr_int(n, "broadcast");
    if (mode == BCAST_NUMPY || same_shape(a, b)) return CUVIL_OK;
    char sa[256], sb[256];
    if (mode == BCAST_NONE)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "inputs '%s' %s and '%s' %s must have one shape (this node does not "
                            "broadcast: broadcast=none)", a->name, cir_shape_str(g, a, sa, sizeof sa), b->name,
                            cir_shape_str(g, b, sb, sizeof sb));
    if (b->ndim > a->ndim)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' has more dims than '%s'", b->name, a->name);
    int64_t ax = cir_attr_int(n, "axis");
    if (cir_attr_has(n, "axis") && ax != a->ndim - b->ndim && !(ax < 0 && ax + a->ndim == a->ndim - b->ndim))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "broadcasting at axis=%lld (opsets before 7) is not supported; "
                            "only at the trailing dims", (long long)ax);
    return CUVIL_OK;
}

static cuvil_status binary_infer(cir_graph *g, cir_node *n) {
    bool variadic = n->kind == CIR_OP_MAX || n->kind == CIR_OP_MIN || n->kind == CIR_OP_BITWISE_NOT;
    cuvil_status s = op_check_arity(g, n, variadic ? 1 : 2, 2, 1, 1);
    if (s) return s;
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1 < n->n_in ? 1 : 0);
    if (!b) b = a;
    int op = binop(n);
    if (a->dtype != b->dtype && op != CUVIL_BIN_POW)
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", a->name,
                            cir_dtype_name(a->dtype), b->name, cir_dtype_name(b->dtype));
    int ndim;
    const cir_dim *dx[CIR_MAX_DIMS];
    if ((s = check_legacy_broadcast(g, n, a, b))) return s;
    if (n->kind == CIR_OP_MOD && cir_attr_int(n, "fmod") != 0 && cir_attr_int(n, "fmod") != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "fmod is %lld; it must be 0 or 1", (long long)cir_attr_int(n, "fmod"));
    if (bitwise(op) && (cir_dtype_is_float(a->dtype) || a->dtype == CIR_BOOL || !cir_dtype_size(a->dtype)))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' is %s; bitwise ops take integers", a->name,
                            cir_dtype_name(a->dtype));
    if (op == CUVIL_BIN_MOD && cir_dtype_is_float(a->dtype) && !cir_attr_int(n, "float_floor"))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "mod of %s '%s' needs fmod=1 before opset 28 (fmod=0, the divisor's "
                            "sign, is for integers there)", cir_dtype_name(a->dtype), a->name);
    if ((s = op_broadcast_x(g, n, a, b, &ndim, dx))) return s;
    if (op == CUVIL_BIN_PRELU) {   /* the slope broadcasts onto X (unidirectional) */
        bool same = ndim == a->ndim;
        for (int i = 0; same && i < ndim; i++) same = dx[i] == cir_dimx(g, a, i);
        if (!same) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "slope '%s' does not broadcast to X's shape", b->name);
    }
    cir_set_shape_x(cir_out(g, n, 0), a->dtype, ndim, dx);
    if (cir_is_const(a) && cir_is_const(b)) return CUVIL_OK;
    if (a->dtype == CIR_BOOL) return op_need_typed(g, n, 0, false);
    if (op == CUVIL_BIN_POW && b->dtype != a->dtype) {   /* an exponent of another type: cuvil_pow_t */
        if (!cir_dtype_size(b->dtype) || b->dtype == CIR_BOOL)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "exponent '%s' has type %s", b->name, cir_dtype_name(b->dtype));
        return CUVIL_OK;
    }
    if (a->dtype == CIR_F32) return op_need_f32(g, n, b == a ? 0 : 1);   /* the float32 kernel */
    return CUVIL_OK;
}

/* Integer arithmetic of a node whose operands differ in type (bool operands; a Pow's exponent of
 * another type), which only folding meets (the run-time kernels take one type): in int64,
 * wrapping as two's complement does, then narrowed to the output type by cir_const_set_i64. */
static int64_t apply_int(int op, int64_t x, int64_t y) {
    switch (op) {
    case CUVIL_BIN_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
    case CUVIL_BIN_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
    case CUVIL_BIN_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
    case CUVIL_BIN_DIV: return y == 0 ? 0 : (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;   /* 0: refused before */
    case CUVIL_BIN_POW: return cir_f64_to_i64(pow((double)x, (double)y));   /* bool only */
    case CUVIL_BIN_MAX: return x > y ? x : y;
    case CUVIL_BIN_MIN: return x < y ? x : y;
    case CUVIL_BIN_PRELU: return x >= 0 ? x : (int64_t)((uint64_t)x * (uint64_t)y);
    case CUVIL_BIN_FMOD: return y == 0 || y == -1 ? 0 : x % y;
    case CUVIL_BIN_MOD: {
        int64_t r = y == 0 || y == -1 ? 0 : x % y;
        return r != 0 && (r < 0) != (y < 0) ? r + y : r;
    }
    case CUVIL_BIN_BAND: return x & y;
    case CUVIL_BIN_BOR: return x | y;
    case CUVIL_BIN_BXOR: return x ^ y;
    case CUVIL_BIN_BNOT: return ~x;
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
    case CUVIL_BIN_FMOD: return fmod(x, y);
    default: CUVIL_ASSERT(!"binary op");
    }
}

const char *op_binary_zero_msg(cir_dtype t, int op) {
    if (cir_dtype_is_float(t) || t == CIR_BOOL) return NULL;
    return op == CUVIL_BIN_DIV ? "integer division by zero"
           : op == CUVIL_BIN_MOD || op == CUVIL_BIN_FMOD ? "integer modulo by zero" : NULL;
}

void op_binary_params(cir_graph *g, cir_node *n, cuvil_binary_params *p) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1) ? cir_in(g, n, 1) : a, *y = cir_out(g, n, 0);
    op_bin_params(a, b, y, binop(n), p);
    p->act = cir_node_act_params(n);
}

static cuvil_status binary_fold(cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1) ? cir_in(g, n, 1) : a, *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_binary_params p;
    op_binary_params(g, n, &p);
    if (y->dtype == CIR_F32 && b->dtype == CIR_F32) {
        cuvil_f32_binary__scalar(&p, a->data, b->data, y->data);
        return CUVIL_OK;
    }
    if (b->dtype == y->dtype && y->dtype != CIR_BOOL) {   /* as the compiled model computes it */
        if (cuvil_binary_t(&p, y->dtype, a->data, b->data, y->data))   /* as ONNX Runtime refuses it */
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s", op_binary_zero_msg(y->dtype, p.op));
        return CUVIL_OK;
    }
    bool integer = !cir_dtype_is_float(y->dtype);
    if (integer && p.op == CUVIL_BIN_POW && y->dtype != CIR_BOOL) {   /* an exponent of another type */
        cuvil_pow_t(&p, y->dtype, a->data, b->dtype, b->data, y->data);
        return CUVIL_OK;
    }
    if (integer && op_binary_zero_msg(y->dtype, p.op))
        for (int64_t i = 0; i < cir_numel(b); i++)
            if (cir_const_i64(b, i) == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s", op_binary_zero_msg(y->dtype, p.op));
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

static const cir_attr_spec binary_attrs[] = {
    {"broadcast", CIR_ATTR_ENUM, BCAST_NUMPY, 0, bcast_names, false},
    {"axis", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

#define BINARY(name, lo) \
    const cir_opdef cir_op_##name = {#name, CIR_OPF_TAKES_ACT | CIR_OPF_SYM_DIMS, lo, 2, 1, 1, binary_attrs, binary_infer, binary_fold, NULL, 0};
BINARY(add, 2)
BINARY(sub, 2)
BINARY(mul, 2)
BINARY(div, 2)
BINARY(pow, 2)
BINARY(max, 1)
BINARY(min, 1)
BINARY(prelu, 2)

static const cir_attr_spec mod_attrs[] = {
    {"fmod", CIR_ATTR_INT, 0, 0, NULL, false},   /* 1: C's fmod (the dividend's sign); 0: the divisor's */
    {"float_floor", CIR_ATTR_INT, 0, 0, NULL, false},   /* fmod=0 on floats allowed (ONNX opset 28) */
    CIR_ATTR_END,
};
const cir_opdef cir_op_mod = {"mod", CIR_OPF_TAKES_ACT | CIR_OPF_SYM_DIMS, 2, 2, 1, 1, mod_attrs, binary_infer, binary_fold, NULL, 0};

/* integers only, on cuvil_binary_t (folded by it too: operands of one type) */
static const char *const direction_names[] = {"LEFT", "RIGHT", NULL};
static const cir_attr_spec shift_attrs[] = {{"direction", CIR_ATTR_ENUM, 0, 0, direction_names, true}, CIR_ATTR_END};
const cir_opdef cir_op_bit_shift = {"bit_shift", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, shift_attrs, binary_infer, binary_fold, NULL, 0};
const cir_opdef cir_op_bitwise_and = {"bitwise_and", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, NULL, binary_infer, binary_fold, NULL, 0};
const cir_opdef cir_op_bitwise_or = {"bitwise_or", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, NULL, binary_infer, binary_fold, NULL, 0};
const cir_opdef cir_op_bitwise_xor = {"bitwise_xor", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, NULL, binary_infer, binary_fold, NULL, 0};
const cir_opdef cir_op_bitwise_not = {"bitwise_not", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, NULL, binary_infer, binary_fold, NULL, 0};
