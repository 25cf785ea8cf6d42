/* op_cast.c -- Cast and CastLike. Folded for every numeric type and bool; at run time only
 * float32 -> float32 (a copy) is supported. */
#include "frontend/onnx/ops/ops_int.h"

#include <math.h>
#include <string.h>

static bool is_float(cuvil_dtype t) {
    return t == CUVIL_DTYPE_FLOAT32 || t == CUVIL_DTYPE_FLOAT64 || t == CUVIL_DTYPE_FLOAT16 || t == CUVIL_DTYPE_BFLOAT16;
}

/* Types a cast can read and write: the fixed-size ones Cuvil knows. */
static bool castable(cuvil_dtype t) {
    return t != CUVIL_DTYPE_STRING && cuvil_dtype_size(t) != 0;
}

/* The target type: the 'to' attribute (Cast) or input 1's type (CastLike). */
static cuvil_status cast_target(cir_graph *g, cir_node *n, cuvil_dtype *to) {
    if (!strcmp(n->op, "CastLike")) {
        *to = cir_in(g, n, 1)->dtype;
    } else {
        const cir_attr *a = cir_attr_find(n, "to");
        if (!a || a->type != CIR_ATTR_INT) return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute 'to' is required");
        if (a->i <= 0 || a->i > 0xffff || !castable((cuvil_dtype)a->i))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "to=%lld (%s) is not a supported type", (long long)a->i,
                                a->i > 0 && a->i <= 0xffff ? cuvil_dtype_name((cuvil_dtype)a->i) : "unknown");
        *to = (cuvil_dtype)a->i;
    }
    if (!castable(*to))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "casting to %s is not supported", cuvil_dtype_name(*to));
    return CUVIL_OK;
}

static cuvil_status cast_infer(cir_graph *g, cir_node *n) {
    bool like = !strcmp(n->op, "CastLike");
    cuvil_status s = op_check_arity(g, n, like ? 2 : 1, like ? 2 : 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cuvil_dtype to = CUVIL_DTYPE_UNDEFINED;
    if ((s = cast_target(g, n, &to))) return s;
    if (!castable(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cuvil_dtype_name(x->dtype));
    cir_set_shape(cir_out(g, n, 0), to, x->ndim, x->dims);
    if (!cir_is_const(x) && (x->dtype != CUVIL_DTYPE_FLOAT32 || to != CUVIL_DTYPE_FLOAT32))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                            "casting '%s' from %s to %s at run time is not supported (only on constant inputs)", x->name,
                            cuvil_dtype_name(x->dtype), cuvil_dtype_name(to));
    return CUVIL_OK;
}

static cuvil_status cast_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    int64_t cnt = cir_numel(x);
    cuvil_dtype from = x->dtype, to = y->dtype;
    if (from == to) {
        memcpy(y->data, x->data, cir_nbytes(x));
        return CUVIL_OK;
    }
    for (int64_t i = 0; i < cnt; i++) {
        if (to == CUVIL_DTYPE_BOOL) {
            ((uint8_t *)y->data)[i] = is_float(from) ? cir_const_f64(x, i) != 0 : cir_const_i64(x, i) != 0;
        } else if (to == CUVIL_DTYPE_FLOAT16 || to == CUVIL_DTYPE_BFLOAT16) {
            float f = from == CUVIL_DTYPE_UINT64 ? (float)((const uint64_t *)x->data)[i]
                      : is_float(from)           ? (float)cir_const_f64(x, i)
                                                 : (float)cir_const_i64(x, i);
            ((uint16_t *)y->data)[i] = to == CUVIL_DTYPE_FLOAT16 ? cir_f32_to_f16(f) : cir_f32_to_bf16(f);
        } else if (to == CUVIL_DTYPE_FLOAT32) {
            /* one rounding step, straight from the source type */
            ((float *)y->data)[i] = from == CUVIL_DTYPE_UINT64 ? (float)((const uint64_t *)x->data)[i]
                                    : is_float(from)           ? (float)cir_const_f64(x, i)
                                                               : (float)cir_const_i64(x, i);
        } else if (to == CUVIL_DTYPE_FLOAT64) {
            ((double *)y->data)[i] = from == CUVIL_DTYPE_UINT64 ? (double)((const uint64_t *)x->data)[i]
                                     : is_float(from)           ? cir_const_f64(x, i)
                                                                : (double)cir_const_i64(x, i);
        } else if (is_float(from)) {
            /* Out of range (and NaN) is undefined in ONNX; this is what x86's truncating
             * conversions give, so what ONNX Runtime gives there: the narrowest of int32 and
             * int64 that holds the target converts, out-of-range values become its minimum, and
             * narrower targets take the low bits. */
            double v = cir_const_f64(x, i);
            bool wide = to == CUVIL_DTYPE_INT64 || to == CUVIL_DTYPE_UINT64 || to == CUVIL_DTYPE_UINT32;
            double lim = wide ? 9223372036854775808.0 : 2147483648.0;
            if (to == CUVIL_DTYPE_UINT64 && v >= 9223372036854775808.0 && v < 18446744073709551616.0)
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

const cir_opdef cir_op_Cast = {"Cast", "", 6, 0, cast_infer, cast_fold, cast_emit, NULL};
const cir_opdef cir_op_CastLike = {"CastLike", "", 15, 0, cast_infer, cast_fold, cast_emit, NULL};
