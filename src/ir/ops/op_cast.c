/* op_cast.c -- cast (x, [like]): to the `to` attribute's type, or to input 1's type when given
 * (ONNX CastLike). Folded for every numeric type and bool; at run time only float32 -> float32
 * (a copy) is supported. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

static bool is_float(cir_dtype t) { return cir_dtype_is_float(t); }

/* The target type: input 1's type when given (ONNX CastLike), else the 'to' attribute. */
static cuvil_status cast_target(cir_graph *g, cir_node *n, cir_dtype *to) {
    cir_value *like = cir_in(g, n, 1);
    if (like) *to = like->dtype;
    else if (!cir_attr_has(n, "to")) return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute to is required");
    else *to = (cir_dtype)cir_attr_int(n, "to");
    if (!cir_dtype_size(*to))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "casting to %s is not supported", cir_dtype_name(*to));
    return CUVIL_OK;
}

static cuvil_status cast_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_dtype to = CIR_UNDEF;
    if ((s = cast_target(g, n, &to))) return s;
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    cir_set_shape(cir_out(g, n, 0), to, x->ndim, x->dims);
    if (!cir_is_const(x) && (x->dtype != CIR_F32 || to != CIR_F32))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                            "casting '%s' from %s to %s at run time is not supported (only on constant inputs)", x->name,
                            cir_dtype_name(x->dtype), cir_dtype_name(to));
    return CUVIL_OK;
}

static cuvil_status cast_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int64_t cnt = cir_numel(x);
    cir_dtype from = x->dtype, to = y->dtype;
    if (from == to) {
        memcpy(y->data, x->data, cir_nbytes(x));
        return CUVIL_OK;
    }
    for (int64_t i = 0; i < cnt; i++) {
        if (to == CIR_BOOL) {
            ((uint8_t *)y->data)[i] = is_float(from) ? cir_const_f64(x, i) != 0 : cir_const_i64(x, i) != 0;
        } else if (to == CIR_F16 || to == CIR_BF16) {
            float f = from == CIR_U64 ? (float)((const uint64_t *)x->data)[i]
                      : is_float(from)           ? (float)cir_const_f64(x, i)
                                                 : (float)cir_const_i64(x, i);
            ((uint16_t *)y->data)[i] = to == CIR_F16 ? cir_f32_to_f16(f) : cir_f32_to_bf16(f);
        } else if (to == CIR_F32) {
            /* one rounding step, straight from the source type */
            ((float *)y->data)[i] = from == CIR_U64 ? (float)((const uint64_t *)x->data)[i]
                                    : is_float(from)           ? (float)cir_const_f64(x, i)
                                                               : (float)cir_const_i64(x, i);
        } else if (to == CIR_F64) {
            ((double *)y->data)[i] = from == CIR_U64 ? (double)((const uint64_t *)x->data)[i]
                                     : is_float(from)           ? cir_const_f64(x, i)
                                                                : (double)cir_const_i64(x, i);
        } else if (is_float(from)) {
            /* Out of range (and NaN) is undefined in ONNX; this is what x86's truncating
             * conversions give, so what ONNX Runtime gives there: the narrowest of int32 and
             * int64 that holds the target converts, out-of-range values become its minimum, and
             * narrower targets take the low bits. */
            double v = cir_const_f64(x, i);
            bool wide = to == CIR_I64 || to == CIR_U64 || to == CIR_U32;
            double lim = wide ? 9223372036854775808.0 : 2147483648.0;
            if (to == CIR_U64 && v >= 9223372036854775808.0 && v < 18446744073709551616.0)
                ((uint64_t *)y->data)[i] = (uint64_t)v;
            else if (v != v || v >= lim || v < -lim)
                cir_const_set_i64(y, i, wide ? INT64_MIN : INT32_MIN);
            else
                cir_const_set_i64(y, i, (int64_t)v);
        } else {
            cir_const_set_i64(y, i, cir_const_i64(x, i));   /* integers wrap, as C's conversions do */
        }
    }
    return CUVIL_OK;
}

static cuvil_status cast_emit(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cg_printf(cg, "    memcpy(%s, %s, %zu);\n", cg_out(cg, n->out[0]), cg_in(cg, n->in[0]), cir_nbytes(cir_in(g, n, 0)));
    return CUVIL_OK;
}

static const cir_attr_spec cast_attrs[] = {{"to", CIR_ATTR_DTYPE, CIR_UNDEF, 0, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_cast = {"cast", 0, 1, 2, 1, 1, cast_attrs, cast_infer, cast_fold, cast_emit, NULL, 0};
