/* op_quant.c -- ONNX's quantization ops as ONNX's reference computes them (naive kernels; the
 * precision issue folds them into integer kernels): dequantize (x, scale, [zp]) and quantize
 * (x, scale, [zp]) per tensor, per axis or blocked (axis, block_size; output type `to`, else
 * the scale's / the zero point's, else uint8); dynamic_quantize (x) -> y, scale, zp;
 * matmul_integer (a, b, [a_zp], [b_zp]) -> int32; qlinear_matmul (a, a_scale, a_zp, b, b_scale,
 * b_zp, y_scale, y_zp). Fixed shapes. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

static bool int8to32(cir_dtype t) {
    return t == CIR_I4 || t == CIR_U4 || t == CIR_I8 || t == CIR_U8 || t == CIR_I16 || t == CIR_U16 || t == CIR_I32;
}

cuvil_status op_quant_params(cir_graph *g, cir_node *n, cuvil_quant_params *p) {
    cir_value *x = cir_in(g, n, 0), *sc = cir_in(g, n, 1), *zp = cir_in(g, n, 2);
    /* symbolic dims per tensor only (the emitter counts the elements of the run; the sizes here
     * are their upper bounds) */
    if (!cir_value_fixed(sc) || (!cir_value_fixed(x) && (cir_numel(sc) != 1 || sc->ndim > 1 || cir_attr_int(n, "block_size") > 0)))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the scale's dims must be fixed, and the input's too unless the "
                            "scale is one value");
    if (!cir_dtype_is_float(sc->dtype) || sc->dtype == CIR_F64)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "scale '%s' is %s; it must be float32, float16 or bfloat16", sc->name,
                            cir_dtype_name(sc->dtype));
    if (zp && (!cir_value_fixed(zp) || cir_numel(zp) != cir_numel(sc)))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "zero point '%s' must have the scale's shape", zp->name);
    int64_t bs = cir_attr_int(n, "block_size");
    p->block = bs > 0 ? bs : 1;
    p->saturate = (int)cir_attr_int(n, "saturate");
    p->outer = p->inner = 1;
    p->len = 1;
    if (cir_numel(sc) == 1 && sc->ndim <= 1 && bs <= 0) {   /* per tensor */
        p->mode = 0;
        for (int d = 0; d < x->ndim; d++) p->outer *= x->dims[d];
        return CUVIL_OK;
    }
    int ax;
    cuvil_status s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &ax);
    if (s) return s;
    for (int d = 0; d < x->ndim; d++) {
        if (d < ax) p->outer *= x->dims[d];
        else if (d > ax) p->inner *= x->dims[d];
    }
    p->len = x->dims[ax];
    if (bs <= 0) {   /* per axis: scale [len] */
        if (sc->ndim != 1 || sc->dims[0] != p->len)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "scale '%s' must be a scalar or [%lld] (axis %d)", sc->name,
                                (long long)p->len, ax);
        p->mode = 1;
        return CUVIL_OK;
    }
    /* blocked: the input's shape, ceil(len / block_size) along the axis */
    bool ok = sc->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++) ok = sc->dims[d] == (d == ax ? (p->len + bs - 1) / bs : x->dims[d]);
    if (!ok) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "scale '%s' does not fit block_size %lld along axis %d", sc->name,
                                 (long long)bs, ax);
    p->mode = 2;
    return CUVIL_OK;
}

static cuvil_status dq_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 3, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *sc = cir_in(g, n, 1), *zp = cir_in(g, n, 2);
    if (!int8to32(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; Cuvil dequantizes int4, uint4, int8, uint8, int16, uint16 "
                            "and int32", x->name, cir_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "zero point '%s' is %s, the input %s", zp->name, cir_dtype_name(zp->dtype),
                            cir_dtype_name(x->dtype));
    cuvil_quant_params p;
    if ((s = op_quant_params(g, n, &p))) return s;
    cir_dtype to = cir_attr_has(n, "to") && cir_attr_int(n, "to") ? (cir_dtype)cir_attr_int(n, "to") : sc->dtype;
    if (!cir_dtype_is_float(to) || to == CIR_F64)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output type %s", cir_dtype_name(to));
    cir_set_shape_like(cir_out(g, n, 0), to, x);
    return CUVIL_OK;
}

static cuvil_status q_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 3, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *zp = cir_in(g, n, 2);
    if (!cir_dtype_is_float(x->dtype) || x->dtype == CIR_F64)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; Cuvil quantizes float32, float16 and bfloat16",
                            x->name, cir_dtype_name(x->dtype));
    cuvil_quant_params p;
    if ((s = op_quant_params(g, n, &p))) return s;
    cir_dtype to = zp ? zp->dtype : cir_attr_has(n, "to") && cir_attr_int(n, "to") ? (cir_dtype)cir_attr_int(n, "to") : CIR_U8;
    if (!int8to32(to) || to == CIR_I32)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output type %s (Cuvil quantizes to int4, uint4, int8, uint8, int16, uint16)",
                            cir_dtype_name(to));
    cir_set_shape_like(cir_out(g, n, 0), to, x);
    return CUVIL_OK;
}

/* QuantizeLinear of constants (a Paddle export's weights are Constant nodes, so ONNX Runtime's
 * quantizer writes QuantizeLinear -> DequantizeLinear on them): the 8-bit constant, which
 * fold_qdq then takes as weights through a DequantizeLinear. */
static cuvil_status q_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *sc = cir_in(g, n, 1), *zp = cir_in(g, n, 2), *y = cir_out(g, n, 0);
    cuvil_quant_params p;
    cuvil_status s = op_quant_params(g, n, &p);
    if (s) return s;
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_quantize_t(&p, x->dtype, x->data, sc->dtype, sc->data, zp ? zp->data : NULL, y->dtype, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec q_attrs[] = {
    {"axis", CIR_ATTR_INT, 1, 0, NULL, false},
    {"block_size", CIR_ATTR_INT, 0, 0, NULL, false},
    {"saturate", CIR_ATTR_INT, 1, 0, NULL, false},
    {"to", CIR_ATTR_DTYPE, CIR_UNDEF, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_dequantize = {"dequantize", CIR_OPF_SYM_DIMS, 2, 3, 1, 1, q_attrs, dq_infer, NULL, NULL, 0};
const cir_opdef cir_op_quantize = {"quantize", CIR_OPF_SYM_DIMS, 2, 3, 1, 1, q_attrs, q_infer, q_fold, NULL, 0};

static cuvil_status dynq_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 3, 3);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_set_shape_like(cir_out(g, n, 0), CIR_U8, x);   /* (symbolic dims too: the run counts the elements) */
    cir_set_shape(cir_out(g, n, 1), CIR_F32, 0, NULL);
    cir_set_shape(cir_out(g, n, 2), CIR_U8, 0, NULL);
    return CUVIL_OK;
}
const cir_opdef cir_op_dynamic_quantize = {"dynamic_quantize", CIR_OPF_SYM_DIMS, 1, 1, 3, 3, NULL, dynq_infer, NULL, NULL, 0};

/* The batched product's sizes: a [.., M, K], b [.., K, N] (2-D, or the same batch dims). */
cuvil_status op_imatmul_sizes(cir_graph *g, cir_node *n, int ia, int ib, op_imatmul *m) {
    cir_value *a = cir_in(g, n, ia), *b = cir_in(g, n, ib);
    if (!int8to32(a->dtype) || !int8to32(b->dtype) || a->dtype == CIR_I32 || b->dtype == CIR_I32)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "inputs '%s' (%s) and '%s' (%s) must be 8- or 16-bit integers", a->name,
                            cir_dtype_name(a->dtype), b->name, cir_dtype_name(b->dtype));
    if (a->ndim < 2 || b->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the operands must be of rank 2 or more");
    /* symbolic dims: a's rows (its dims but the last; the sizes here their upper bounds) against
     * a fixed 2-D b, on 8-bit operands (the integer GEMM, whose rows the run gives) */
    m->sym = !cir_value_fixed(a);
    if ((m->sym && (a->dx[a->ndim - 1] || !cir_value_fixed(b) || b->ndim != 2 ||
                    (a->dtype != CIR_U8 && a->dtype != CIR_I8) || (b->dtype != CIR_U8 && b->dtype != CIR_I8))) ||
        !cir_value_fixed(b))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "with symbolic dims, a's last dim must be fixed and b a fixed 2-D "
                            "matrix, both 8-bit");
    m->M = a->dims[a->ndim - 2], m->K = a->dims[a->ndim - 1], m->N = b->dims[b->ndim - 1];
    if (b->dims[b->ndim - 2] != m->K)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' has %lld columns and '%s' %lld rows", a->name, (long long)m->K, b->name,
                            (long long)b->dims[b->ndim - 2]);
    int64_t ba = 1, bb = 1;   /* the batch items: the batch dims' product (not numel / (M K): K may be 0) */
    for (int d = 0; d < a->ndim - 2; d++) ba *= a->dims[d];
    for (int d = 0; d < b->ndim - 2; d++) bb *= b->dims[d];
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim - 2; d++) same = a->dims[d] == b->dims[d];
    if (!same && b->ndim != 2 && a->ndim != 2)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "batch dims that broadcast other than against a 2-D operand");
    const cir_value *big = b->ndim > a->ndim ? b : a;
    m->ndim = big->ndim;
    for (int d = 0; d < big->ndim - 2; d++) m->dims[d] = big->dims[d];
    m->dims[m->ndim - 2] = m->M, m->dims[m->ndim - 1] = m->N;
    m->batch = ba > bb ? ba : bb;
    m->a_bs = ba > 1 ? m->M * m->K : 0, m->b_bs = bb > 1 ? m->K * m->N : 0;
    return CUVIL_OK;
}

/* The output's shape: m's dims, or with symbolic dims a's dims but the last (as expressions) and N. */
cuvil_status op_imatmul_shape(cir_graph *g, cir_node *n, const op_imatmul *m, int ia, cir_dtype t) {
    if (!m->sym) {
        cir_set_shape(cir_out(g, n, 0), t, m->ndim, m->dims);
        return CUVIL_OK;
    }
    cir_value *a = cir_in(g, n, ia);
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < a->ndim - 1; d++)
        if (!(dx[d] = cir_dimx(g, a, d))) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    if (!(dx[a->ndim - 1] = cir_dim_const(&g->dt, m->N))) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    cir_set_shape_x(cir_out(g, n, 0), t, a->ndim, dx);
    return CUVIL_OK;
}

/* A zero point (or scale) of one value or one per row (of a: M) / column (of b: N). */
static cuvil_status per(cir_graph *g, cir_node *n, int i, int64_t along, cir_dtype t, int64_t *cnt) {
    cir_value *v = cir_in(g, n, i);
    *cnt = 0;
    if (!v) return CUVIL_OK;
    if (t != CIR_UNDEF && v->dtype != t)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "'%s' is %s; its operand is %s", v->name, cir_dtype_name(v->dtype),
                            cir_dtype_name(t));
    *cnt = cir_numel(v);
    if (*cnt != 1 && (*cnt != along || v->ndim > 2))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "'%s' has %lld values; Cuvil takes one or one per row/column (%lld)",
                            v->name, (long long)*cnt, (long long)along);
    return CUVIL_OK;
}

static cuvil_status mmi_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 4, 1, 1);
    if (s) return s;
    op_imatmul m;
    int64_t c;
    if ((s = op_imatmul_sizes(g, n, 0, 1, &m)) || (s = per(g, n, 2, m.M, cir_in(g, n, 0)->dtype, &c)) ||
        (s = per(g, n, 3, m.N, cir_in(g, n, 1)->dtype, &c)))
        return s;
    if (m.sym && cir_in(g, n, 2) && cir_numel(cir_in(g, n, 2)) > 1)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "a zero point per row of a with symbolic dims");
    return op_imatmul_shape(g, n, &m, 0, CIR_I32);
}
const cir_opdef cir_op_matmul_integer = {"matmul_integer", CIR_OPF_SYM_DIMS, 2, 4, 1, 1, NULL, mmi_infer, NULL, NULL, 0};

/* min/max (the float result's clamp before it is quantized) need y's scale and zero point
 * (inputs iys, iyz) as constants: the clamp becomes bounds on the quantized values. */
cuvil_status op_qclamp_check(cir_graph *g, cir_node *n, int iys, int iyz) {
    const float lo = cir_attr_float(n, "min"), hi = cir_attr_float(n, "max");
    if (lo == -INFINITY && hi == INFINITY) return CUVIL_OK;
    cir_value *ys = cir_in(g, n, iys), *yz = cir_in(g, n, iyz);
    if (!ys || !cir_is_const(ys) || (yz && !cir_is_const(yz)) || !(cir_const_f64(ys, 0) > 0))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "min/max need a constant positive y_scale and a constant y_zero_point");
    if (!(lo <= hi)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "min %g is above max %g", (double)lo, (double)hi);
    return CUVIL_OK;
}

static bool i8(cir_dtype t) { return t == CIR_U8 || t == CIR_I8; }

static cuvil_status qlmm_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 6, 10, 1, 1);
    if (s) return s;
    op_imatmul m;
    int64_t c;
    cir_value *as = cir_in(g, n, 1), *bs = cir_in(g, n, 4), *ys = cir_in(g, n, 6), *yz = cir_in(g, n, 7), *b = cir_in(g, n, 8);
    if ((s = op_imatmul_sizes(g, n, 0, 3, &m)) || (s = per(g, n, 2, 1, cir_in(g, n, 0)->dtype, &c)) ||
        (s = per(g, n, 5, m.N, cir_in(g, n, 3)->dtype, &c)) || (s = per(g, n, 1, 1, CIR_UNDEF, &c)) ||
        (s = per(g, n, 4, m.N, as->dtype, &c)) || (s = per(g, n, 6, 1, as->dtype, &c)) || (s = per(g, n, 7, 1, CIR_UNDEF, &c)))
        return s;
    if ((as->dtype != CIR_F32 && as->dtype != CIR_F16) || bs->dtype != as->dtype || (ys && ys->dtype != as->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the scales must all be float32 or all float16");
    if (yz && yz->dtype != CIR_U8 && yz->dtype != CIR_I8)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "y_zero_point '%s' is %s", yz->name, cir_dtype_name(yz->dtype));
    if (yz && !ys) return cir_node_err(g, n, CUVIL_ERR_MODEL, "y_zero_point without y_scale");
    /* (the QDQ fold's forms: float out without y_scale, an int32 bias, min/max) */
    if ((!ys || b) && (as->dtype != CIR_F32 || (cir_in(g, n, 0)->dtype != CIR_U8 && cir_in(g, n, 0)->dtype != CIR_I8) ||
                       (cir_in(g, n, 3)->dtype != CIR_U8 && cir_in(g, n, 3)->dtype != CIR_I8)))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "a float output or a bias needs 8-bit operands and float32 scales");
    if (b && (b->dtype != CIR_I32 || b->ndim != 1 || b->dims[0] != m.N))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "bias '%s' must be int32 of shape [%lld]", b->name, (long long)m.N);
    cir_value *fb = cir_in(g, n, 9);   /* (the dynamic fold's float bias, after the scale) */
    if (fb && (ys || b || fb->dtype != CIR_F32 || !cir_value_fixed(fb) ||
               (cir_numel(fb) != 1 && (fb->ndim < 1 || fb->dims[fb->ndim - 1] != m.N || cir_numel(fb) != m.N))))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "float bias '%s' must be float32, one value or [%lld], without y_scale "
                            "or an int32 bias", fb->name, (long long)m.N);
    if ((s = op_qclamp_check(g, n, 6, 7))) return s;
    const bool fast = as->dtype == CIR_F32 && i8(cir_in(g, n, 0)->dtype) && i8(cir_in(g, n, 3)->dtype);
    const bool clamp = cir_attr_float(n, "min") != -INFINITY || cir_attr_float(n, "max") != INFINITY;
    if (!fast && (!ys || !yz || clamp || m.sym))   /* (the reference kernel: QLinearMatMul's own form) */
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "with float16 scales or 16-bit operands, y_scale and y_zero_point "
                            "are required and min/max and symbolic dims are not supported");
    return op_imatmul_shape(g, n, &m, 0, !ys ? CIR_F32 : yz ? yz->dtype : CIR_U8);
}
static const cir_attr_spec qlmm_attrs[] = {
    {"min", CIR_ATTR_FLOAT, 0, -INFINITY, NULL, false},
    {"max", CIR_ATTR_FLOAT, 0, INFINITY, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_qlinear_matmul = {"qlinear_matmul", CIR_OPF_SYM_DIMS, 6, 10, 1, 1, qlmm_attrs, qlmm_infer, NULL, NULL, 0};

/* qlinear_add (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, [y_zp]): the QDQ fold's residual add
 * (and ONNX Runtime's QLinearAdd without broadcasting), computed as ONNX Runtime does, in y's
 * units. */
static cuvil_status qadd_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 7, 8, 1, 1);
    if (s) return s;
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 3), *yz = cir_in(g, n, 7);
    for (int i = 0; i < 2; i++) {
        cir_value *x = i ? b : a;
        if (x->dtype != CIR_U8 && x->dtype != CIR_I8)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; uint8 and int8 are supported", x->name,
                                cir_dtype_name(x->dtype));
    }
    if (!cir_same_dims(a, b))   /* (symbolic dims: the same expressions) */
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "'%s' and '%s' must have the same shape", a->name, b->name);
    int64_t c;
    if ((s = per(g, n, 1, 1, CIR_F32, &c)) || (s = per(g, n, 2, 1, a->dtype, &c)) || (s = per(g, n, 4, 1, CIR_F32, &c)) ||
        (s = per(g, n, 5, 1, b->dtype, &c)) || (s = per(g, n, 6, 1, CIR_F32, &c)) || (s = per(g, n, 7, 1, CIR_UNDEF, &c)))
        return s;
    if (!cir_in(g, n, 1) || !cir_in(g, n, 4) || !cir_in(g, n, 6))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "the scales are required");
    if (yz && yz->dtype != CIR_U8 && yz->dtype != CIR_I8)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "y_zero_point '%s' is %s", yz->name, cir_dtype_name(yz->dtype));
    if ((s = op_qclamp_check(g, n, 6, 7))) return s;
    cir_set_shape_like(cir_out(g, n, 0), yz ? yz->dtype : CIR_U8, a);
    return CUVIL_OK;
}
const cir_opdef cir_op_qlinear_add = {"qlinear_add", CIR_OPF_SYM_DIMS, 7, 8, 1, 1, qlmm_attrs, qadd_infer, NULL, NULL, 0};

/* matmul_nbits (a, w, scales, zs): a float32 [..., K] times 4-bit weights dequantized inside
 * the product (q4gemm.c): w uint8 [N, blocks * block_size / 2] (MatMulNBits' B), scales and zs
 * float32 [N, blocks] (zs: the zero point times the scale). a's rows may be symbolic. */
static cuvil_status mmnb_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 4, 4, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    const int64_t K = cir_attr_int(n, "K"), N = cir_attr_int(n, "N"), bs = cir_attr_int(n, "block_size");
    cir_value *a = cir_in(g, n, 0), *w = cir_in(g, n, 1), *sc = cir_in(g, n, 2), *zs = cir_in(g, n, 3);
    if (K <= 0 || N <= 0 || bs < 16 || (bs & (bs - 1)))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "K=%lld, N=%lld, block_size=%lld", (long long)K, (long long)N, (long long)bs);
    const int64_t nb = (K + bs - 1) / bs;
    if (a->ndim < 1 || a->dx[a->ndim - 1] || a->dims[a->ndim - 1] != K)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' must end in K=%lld", a->name, (long long)K);
    if (w->dtype != CIR_U8 || !cir_value_fixed(w) || cir_numel(w) != N * nb * bs / 2 || sc->dtype != CIR_F32 ||
        !cir_value_fixed(sc) || cir_numel(sc) != N * nb || zs->dtype != CIR_F32 || !cir_value_fixed(zs) || cir_numel(zs) != N * nb)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "weights uint8 [%lld, %lld], scales and zs float32 [%lld, %lld] expected",
                            (long long)N, (long long)(nb * bs / 2), (long long)N, (long long)nb);
    if (cir_value_fixed(a)) {
        int64_t d[CIR_MAX_DIMS];
        memcpy(d, a->dims, sizeof(int64_t) * (size_t)a->ndim);
        d[a->ndim - 1] = N;
        cir_set_shape(cir_out(g, n, 0), CIR_F32, a->ndim, d);
        return CUVIL_OK;
    }
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < a->ndim - 1; d++)
        if (!(dx[d] = cir_dimx(g, a, d))) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    if (!(dx[a->ndim - 1] = cir_dim_const(&g->dt, N))) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, a->ndim, dx);
    return CUVIL_OK;
}

static const cir_attr_spec mmnb_attrs[] = {
    {"K", CIR_ATTR_INT, 0, 0, NULL, true},
    {"N", CIR_ATTR_INT, 0, 0, NULL, true},
    {"block_size", CIR_ATTR_INT, 0, 0, NULL, true},
    CIR_ATTR_END,
};
const cir_opdef cir_op_matmul_nbits = {"matmul_nbits", CIR_OPF_SYM_DIMS, 4, 4, 1, 1, mmnb_attrs, mmnb_infer, NULL, NULL, 0};
