/*
 * typed.c -- elementwise kernels for every element type: arithmetic, comparisons, logic,
 * unary ops, casts, where, broadcast copies (Expand, Tile), Range, Trilu, CumSum, fills and ArgMax/ArgMin.
 *
 * These are the general paths for the types models use for indices, masks and shape
 * arithmetic (int64, int32, bool) and for float64/float16/bfloat16 data; float32 arithmetic
 * keeps its vectorised kernels in binary.c and unary.c. Each kernel dispatches on the type
 * once and runs a loop typed by macro, so the inner loops are plain C the compiler optimises.
 * Integer arithmetic goes through unsigned types, so overflow wraps instead of being
 * undefined.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../rt_int.h"
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* ===== float16 / bfloat16 ============================================================= */
uint16_t cuvil_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {   /* subnormal half, or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;   /* may carry into the exponent: fine */
    return (uint16_t)(sign | h);
}

uint16_t cuvil_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float cuvil_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float cuvil_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ===== Type dispatch =================================================================== */
/* X(tag, C type, unsigned twin) for the integer types; floats are handled apiece. */
#define FOR_INTS(X)                                                                       \
    X(CUVIL_T_I8, int8_t, uint8_t) X(CUVIL_T_I16, int16_t, uint16_t)                      \
    X(CUVIL_T_I32, int32_t, uint32_t) X(CUVIL_T_I64, int64_t, uint64_t)                   \
    X(CUVIL_T_U8, uint8_t, uint8_t) X(CUVIL_T_U16, uint16_t, uint16_t)                    \
    X(CUVIL_T_U32, uint32_t, uint32_t) X(CUVIL_T_U64, uint64_t, uint64_t)

static size_t type_size(int t) {
    switch (t) {
    case CUVIL_T_F64: case CUVIL_T_I64: case CUVIL_T_U64: return 8;
    case CUVIL_T_F32: case CUVIL_T_I32: case CUVIL_T_U32: return 4;
    case CUVIL_T_F16: case CUVIL_T_BF16: case CUVIL_T_I16: case CUVIL_T_U16: return 2;
    default: return 1;
    }
}

/* Element i of a float-typed buffer as double, and back. */
static inline double ld_float(int t, const void *p, int64_t i) {
    switch (t) {
    case CUVIL_T_F32: return ((const float *)p)[i];
    case CUVIL_T_F64: return ((const double *)p)[i];
    case CUVIL_T_F16: return cuvil_f16_to_f32(((const uint16_t *)p)[i]);
    default: return cuvil_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

static inline void st_float(int t, void *p, int64_t i, double v) {
    switch (t) {
    case CUVIL_T_F32: ((float *)p)[i] = (float)v; break;
    case CUVIL_T_F64: ((double *)p)[i] = v; break;
    case CUVIL_T_F16: ((uint16_t *)p)[i] = cuvil_f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = cuvil_f32_to_bf16((float)v); break;
    }
}

static inline bool is_float_t(int t) { return t >= CUVIL_T_F32 && t <= CUVIL_T_BF16; }

/* v < 0 for signed and unsigned types alike, without a comparison the compiler calls always
 * false for unsigned ones */
#define IS_NEG(T, v) ((v) < (T)1 && (v) != 0)

/* ===== Broadcast iteration ================================================================
 * Walks the output of p (dims, a/b strides) in order; BODY sees the output index `o` and the
 * operand offsets `ia`, `ib`. The innermost dim runs as a plain loop. */
#define BCAST2(p, ...)                                                                         \
    do {                                                                                        \
        int nd_ = (p)->ndim;                                                                    \
        int64_t total_ = 1;                                                                     \
        for (int d_ = 0; d_ < nd_; d_++) total_ *= (p)->dims[d_];                               \
        if (total_ == 0) break;                                                                 \
        int64_t n_ = nd_ ? (p)->dims[nd_ - 1] : 1, sa_ = nd_ ? (p)->a_strides[nd_ - 1] : 0;     \
        int64_t sb_ = nd_ ? (p)->b_strides[nd_ - 1] : 0, idx_[CUVIL_RT_MAX_DIMS] = {0};         \
        int64_t oa_ = 0, ob_ = 0;                                                               \
        for (int64_t base_ = 0; base_ < total_; base_ += n_) {                                  \
            for (int64_t i_ = 0; i_ < n_; i_++) {                                               \
                const int64_t o = base_ + i_, ia = oa_ + i_ * sa_, ib = ob_ + i_ * sb_;          \
                __VA_ARGS__;                                                                    \
            }                                                                                   \
            for (int d_ = nd_ - 2; d_ >= 0; d_--) {                                             \
                oa_ += (p)->a_strides[d_];                                                      \
                ob_ += (p)->b_strides[d_];                                                      \
                if (++idx_[d_] < (p)->dims[d_]) break;                                          \
                oa_ -= (p)->a_strides[d_] * (p)->dims[d_];                                      \
                ob_ -= (p)->b_strides[d_] * (p)->dims[d_];                                      \
                idx_[d_] = 0;                                                                   \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* ===== Arithmetic ========================================================================= */
static inline double bin_float(int op, double a, double b) {
    switch (op) {
    case CUVIL_BIN_ADD: return a + b;
    case CUVIL_BIN_SUB: return a - b;
    case CUVIL_BIN_MUL: return a * b;
    case CUVIL_BIN_DIV: return a / b;
    case CUVIL_BIN_POW: return pow(a, b);
    case CUVIL_BIN_MAX: return a > b || a != a ? a : b;
    case CUVIL_BIN_MIN: return a < b || a != a ? a : b;
    case CUVIL_BIN_PRELU: return a >= 0 ? a : a * b;
    case CUVIL_BIN_MOD: {   /* numpy's mod: the divisor's sign */
        double r = fmod(a, b);
        return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case CUVIL_BIN_FMOD: return fmod(a, b);
    default: return 0;
    }
}

/* double -> integer without undefined behaviour: truncation, saturating out of range */
static inline int64_t sat_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

/* Integer Div and Mod: a divisor of 0 sets `zero` (the result there is 0; the caller reports
 * it); MIN / -1 wraps to MIN and MIN % -1 is 0 (both trap in C on x86). Products are taken in
 * unsigned arithmetic of at least unsigned int's width (1u * ...): two uint16_t operands would
 * be promoted to int, where 65535 * 65535 overflows. */
#define BIN_INT(TAG, T, U)                                                                      \
    case TAG: {                                                                                 \
        const T *A = a, *B = b;                                                                 \
        T *Y = y;                                                                               \
        const bool sgn = IS_NEG(T, (T)-1);                                                      \
        switch (p->op) {                                                                        \
        case CUVIL_BIN_ADD: BCAST2(p, Y[o] = (T)(U)((U)A[ia] + (U)B[ib])); break;               \
        case CUVIL_BIN_SUB: BCAST2(p, Y[o] = (T)(U)((U)A[ia] - (U)B[ib])); break;               \
        case CUVIL_BIN_MUL: BCAST2(p, Y[o] = (T)(U)(1u * (U)A[ia] * (U)B[ib])); break;          \
        case CUVIL_BIN_DIV:                                                                     \
            BCAST2(p, {                                                                         \
                zero |= B[ib] == 0;                                                             \
                Y[o] = B[ib] == 0 ? (T)0                                                        \
                       : (sgn && B[ib] == (T)-1) ? (T)(U)(0 - (U)A[ia]) : (T)(A[ia] / B[ib]);   \
            });                                                                                 \
            break;                                                                              \
        case CUVIL_BIN_MAX: BCAST2(p, Y[o] = A[ia] > B[ib] ? A[ia] : B[ib]); break;             \
        case CUVIL_BIN_MIN: BCAST2(p, Y[o] = A[ia] < B[ib] ? A[ia] : B[ib]); break;             \
        case CUVIL_BIN_PRELU: BCAST2(p, Y[o] = !IS_NEG(T, A[ia]) ? A[ia] : (T)(U)(1u * (U)A[ia] * (U)B[ib])); break; \
        case CUVIL_BIN_FMOD:                                                                    \
            BCAST2(p, {                                                                         \
                zero |= B[ib] == 0;                                                             \
                Y[o] = B[ib] == 0 || (sgn && B[ib] == (T)-1) ? (T)0 : (T)(A[ia] % B[ib]);       \
            });                                                                                 \
            break;                                                                              \
        case CUVIL_BIN_MOD:                                                                     \
            BCAST2(p, {                                                                         \
                zero |= B[ib] == 0;                                                             \
                T r_ = B[ib] == 0 || (sgn && B[ib] == (T)-1) ? (T)0 : (T)(A[ia] % B[ib]);       \
                Y[o] = r_ != 0 && IS_NEG(T, r_) != IS_NEG(T, B[ib]) ? (T)(U)((U)r_ + (U)B[ib]) : r_; \
            });                                                                                 \
            break;                                                                              \
        case CUVIL_BIN_SHL:   /* a shift below 0 or of the width or more: 0 */                 \
            BCAST2(p, Y[o] = IS_NEG(T, B[ib]) || (U)B[ib] >= 8 * sizeof(T) ? (T)0               \
                             : (T)(U)((U)A[ia] << (U)B[ib]));                                   \
            break;                                                                              \
        case CUVIL_BIN_SHR:   /* arithmetic for signed types; out of range: the sign, all bits */ \
            BCAST2(p, Y[o] = IS_NEG(T, B[ib]) || (U)B[ib] >= 8 * sizeof(T) ? (T)(IS_NEG(T, A[ia]) ? -1 : 0) \
                             : IS_NEG(T, A[ia]) ? (T)~(T)((U)(T)~A[ia] >> (U)B[ib])               \
                                               : (T)((U)A[ia] >> (U)B[ib]));                     \
            break;                                                                              \
        case CUVIL_BIN_BAND: BCAST2(p, Y[o] = (T)(A[ia] & B[ib])); break;                       \
        case CUVIL_BIN_BOR: BCAST2(p, Y[o] = (T)(A[ia] | B[ib])); break;                        \
        case CUVIL_BIN_BXOR: BCAST2(p, Y[o] = (T)(A[ia] ^ B[ib])); break;                       \
        case CUVIL_BIN_BNOT: BCAST2(p, Y[o] = (T)(~A[ia] + 0 * B[ib])); break;                 \
        default: break;                                                                         \
        }                                                                                       \
        break;                                                                                  \
    }

int cuvil_binary_t(const cuvil_binary_params *p, int t, const void *a, const void *b, void *y) {
    bool zero = false;
    if (p->op == CUVIL_BIN_POW && !is_float_t(t)) {
        cuvil_pow_t(p, t, a, t, b, y);
        return 0;
    }
    switch (t) {
    case CUVIL_T_F64: {
        const double *A = a, *B = b;
        double *Y = y;
        BCAST2(p, Y[o] = bin_float(p->op, A[ia], B[ib]));
        break;
    }
    case CUVIL_T_F32: case CUVIL_T_F16: case CUVIL_T_BF16:
        /* float32 arithmetic rounded once to the output type */
        BCAST2(p, st_float(t, y, o, (float)bin_float(p->op, (float)ld_float(t, a, ia), (float)ld_float(t, b, ib))));
        break;
        FOR_INTS(BIN_INT)
    default: break;
    }
    return zero;
}

/* ===== Comparisons and logic ============================================================== */
/* The comparison chosen once, outside the loop, as C's operators (a NaN operand: all false;
 * float16 and bfloat16 compared as the doubles they widen to, bools as 0 and 1). With the switch
 * inside the loop Magika's one-hot Equal (int32, 2048 x 257) took 0.56 ms on one thread. */
#define CMP_LOOPS(X, Y)                                                         \
    switch (p->op) {                                                            \
    case CUVIL_CMP_EQ: BCAST2(p, y[o] = (X) == (Y)); break;                     \
    case CUVIL_CMP_LT: BCAST2(p, y[o] = (X) < (Y)); break;                      \
    case CUVIL_CMP_GT: BCAST2(p, y[o] = (X) > (Y)); break;                      \
    case CUVIL_CMP_LE: BCAST2(p, y[o] = (X) <= (Y)); break;                     \
    case CUVIL_CMP_GE: BCAST2(p, y[o] = (X) >= (Y)); break;                     \
    default: BCAST2(p, { (void)ia; (void)ib; y[o] = 0; }); break;               \
    }

#define CMP_INT(TAG, T, U)                                                                      \
    case TAG: {                                                                                 \
        const T *A = a, *B = b;                                                                 \
        CMP_LOOPS(A[ia], B[ib]);                                                                \
        break;                                                                                  \
    }

void cuvil_compare_t(const cuvil_binary_params *p, int t, const void *a, const void *b, uint8_t *y) {
    switch (t) {
    case CUVIL_T_F32: {
        const float *A = a, *B = b;
        CMP_LOOPS(A[ia], B[ib]);
        break;
    }
    case CUVIL_T_F64: {
        const double *A = a, *B = b;
        CMP_LOOPS(A[ia], B[ib]);
        break;
    }
    case CUVIL_T_F16: case CUVIL_T_BF16:
        CMP_LOOPS(ld_float(t, a, ia), ld_float(t, b, ib));
        break;
    case CUVIL_T_BOOL: {
        const uint8_t *A = a, *B = b;
        CMP_LOOPS(A[ia] != 0, B[ib] != 0);
        break;
    }
        FOR_INTS(CMP_INT)
    default: break;
    }
}

void cuvil_logic(const cuvil_binary_params *p, const uint8_t *a, const uint8_t *b, uint8_t *y) {
    switch (p->op) {
    case CUVIL_LOGIC_AND: BCAST2(p, y[o] = (a[ia] != 0) & (b[ib] != 0)); break;
    case CUVIL_LOGIC_OR: BCAST2(p, y[o] = (a[ia] != 0) | (b[ib] != 0)); break;
    default: BCAST2(p, y[o] = (a[ia] != 0) ^ (b[ib] != 0)); break;
    }
}

void cuvil_not(const uint8_t *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] == 0;
}

/* ===== Unary ============================================================================== */
static double act_f64(const cuvil_act_params *a, double x) {
    double al = a->alpha, be = a->beta;
    switch (a->act) {
    case CUVIL_ACT_NONE: return x;
    case CUVIL_ACT_RELU: return x > 0 ? x : (x != x ? x : 0);
    case CUVIL_ACT_LEAKY_RELU: return x >= 0 ? x : al * x;
    case CUVIL_ACT_CLIP: return x != x ? x : x < al ? al : x > be ? be : x;
    case CUVIL_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case CUVIL_ACT_HARD_SIGMOID: return fmax(0, fmin(1, al * x + be));
    case CUVIL_ACT_HARD_SWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
    case CUVIL_ACT_TANH: return tanh(x);
    case CUVIL_ACT_EXP: return exp(x);
    case CUVIL_ACT_LOG: return log(x);
    case CUVIL_ACT_SQRT: return sqrt(x);
    case CUVIL_ACT_NEG: return -x;
    case CUVIL_ACT_ABS: return fabs(x);
    case CUVIL_ACT_RECIPROCAL: return 1 / x;
    case CUVIL_ACT_ERF: return erf(x);
    case CUVIL_ACT_GELU: return 0.5 * x * (1 + erf(x * 0.70710678118654752440));
    case CUVIL_ACT_ELU: return x >= 0 ? x : al * (exp(x) - 1);
    case CUVIL_ACT_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    case CUVIL_ACT_MISH: return x * tanh(x > 30 ? x : log1p(exp(x)));
    case CUVIL_ACT_SILU: return x / (1 + exp(-x));
    case CUVIL_ACT_FLOOR: return floor(x);
    case CUVIL_ACT_CEIL: return ceil(x);
    case CUVIL_ACT_ROUND: return nearbyint(x);   /* the default rounding mode: half to even */
    case CUVIL_ACT_SIN: return sin(x);
    case CUVIL_ACT_COS: return cos(x);
    case CUVIL_ACT_TAN: return tan(x);
    case CUVIL_ACT_ASIN: return asin(x);
    case CUVIL_ACT_ACOS: return acos(x);
    case CUVIL_ACT_ATAN: return atan(x);
    case CUVIL_ACT_SINH: return sinh(x);
    case CUVIL_ACT_COSH: return cosh(x);
    case CUVIL_ACT_ASINH: return asinh(x);
    case CUVIL_ACT_ACOSH: return acosh(x);
    case CUVIL_ACT_ATANH: return atanh(x);
    case CUVIL_ACT_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;
    case CUVIL_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case CUVIL_ACT_SELU: return be * (x > 0 ? x : al * expm1(x));
    case CUVIL_ACT_THRESHOLDED_RELU: return x > al ? x : (x != x ? x : 0);
    case CUVIL_ACT_SHRINK: return x < -al ? x + be : x > al ? x - be : (x != x ? x : 0);
    case CUVIL_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

#define UN_INT(TAG, T, U)                                                                       \
    case TAG: {                                                                                 \
        const T *X = x;                                                                         \
        T *Y = y;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                       \
            T v = X[i];                                                                         \
            T neg = (T)(U)(0 - (U)v);                                                           \
            Y[i] = a->act == CUVIL_ACT_NEG ? neg : a->act == CUVIL_ACT_ABS ? (IS_NEG(T, v) ? neg : v) \
                   : a->act == CUVIL_ACT_RELU ? (IS_NEG(T, v) ? (T)0 : v)                         \
                   : a->act == CUVIL_ACT_SIGN ? (T)(IS_NEG(T, v) ? (T)(U)(0 - (U)1) : (T)(v != 0)) : v;  \
        }                                                                                       \
        break;                                                                                  \
    }

void cuvil_unary_t(const cuvil_act_params *a, int t, const void *x, void *y, int64_t n) {
    switch (t) {
    case CUVIL_T_F64:
        for (int64_t i = 0; i < n; i++) ((double *)y)[i] = act_f64(a, ((const double *)x)[i]);
        break;
    case CUVIL_T_F32: case CUVIL_T_F16: case CUVIL_T_BF16:
        for (int64_t i = 0; i < n; i++) st_float(t, y, i, cuvil_f32_act1(a, (float)ld_float(t, x, i)));
        break;
        FOR_INTS(UN_INT)
    default: break;
    }
}

/* ===== Cast =============================================================================== */
/* Element i of an integer or bool buffer, as int64 (uint64 keeps its bits). */
static inline int64_t ld_int(int t, const void *p, int64_t i) {
    switch (t) {
    case CUVIL_T_I8: case CUVIL_T_I4: return ((const int8_t *)p)[i];
    case CUVIL_T_I16: return ((const int16_t *)p)[i];
    case CUVIL_T_I32: return ((const int32_t *)p)[i];
    case CUVIL_T_I64: return ((const int64_t *)p)[i];
    case CUVIL_T_U8: case CUVIL_T_U4: return ((const uint8_t *)p)[i];
    case CUVIL_T_U16: return ((const uint16_t *)p)[i];
    case CUVIL_T_U32: return ((const uint32_t *)p)[i];
    case CUVIL_T_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0;   /* bool */
    }
}

/* Stores the low bits of v in an integer buffer. */
static inline void st_int(int t, void *p, int64_t i, int64_t v) {
    switch (t) {
    case CUVIL_T_I8: case CUVIL_T_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CUVIL_T_I4: ((int8_t *)p)[i] = (int8_t)((((uint64_t)v & 0xF) ^ 8) - 8); break;   /* the low 4 bits */
    case CUVIL_T_U4: ((uint8_t *)p)[i] = (uint8_t)(v & 0xF); break;
    case CUVIL_T_I16: case CUVIL_T_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case CUVIL_T_I32: case CUVIL_T_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((uint64_t *)p)[i] = (uint64_t)v; break;
    }
}

/* ===== Float to integer, as ONNX Runtime converts on x86-64 ===========================
 * C leaves a float -> integer conversion of a value out of range undefined; x86's cvttsd2si
 * gives the "integer indefinite", the minimum of its 32- or 64-bit register, and ONNX Runtime's
 * results follow from which of those its compiled code uses. These do the same on any
 * machine, converting only values in range:
 *   int32 (and int8, int16, uint8, uint16, which keep its low bits): out of range or NaN -> INT32_MIN;
 *   int64: INT64_MIN;
 *   uint64: [2^63, 2^64) exactly, NaN and values below 2^63 as int64 (negatives wrap), 2^64 and
 *     above (inf, 3e38) -> 0 (x - 2^63 converted, its sign bit flipped back);
 *   uint32 from float16: the low 32 bits of the int64 conversion (inf, -inf, NaN -> 0);
 *   uint32 from float32, float64, bfloat16: ONNX Runtime's vectorised loop, x < 2^31 as int32,
 *     else (x - 2^31) as int32 plus 2^31 (-inf, NaN -> 2^31; inf, 2^32 and above -> 0). (The
 *     loop over its last n % 4 elements converts through int64 instead, as for float16.) */
static inline int32_t cvt_i32(double v) { return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN; }
static inline int64_t cvt_i64(double v) {
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v : INT64_MIN;
}

static int64_t float_to_int(int from, int to, double v) {
    switch (to) {
    /* 4 bits: truncated; out of range (undefined in ONNX) 0, as ONNX's reference (ml_dtypes) */
    case CUVIL_T_I4: return v > -9.0 && v < 8.0 ? (int64_t)v : 0;
    case CUVIL_T_U4: return v > -1.0 && v < 16.0 ? (int64_t)v : 0;
    case CUVIL_T_I64: return cvt_i64(v);
    case CUVIL_T_U64:
        if (v >= 9223372036854775808.0) return v < 18446744073709551616.0 ? (int64_t)(uint64_t)v : 0;
        return cvt_i64(v);
    case CUVIL_T_U32:
        if (from == CUVIL_T_F16) return cvt_i64(v);
        if (v >= 2147483648.0) return (int64_t)(uint32_t)((uint32_t)cvt_i32(v - 2147483648.0) + 0x80000000u);
        return (int64_t)(uint32_t)cvt_i32(v);
    default: return cvt_i32(v);
    }
}

/* ===== Integer Pow ===================================================================== */
/* Whether the exponent is one value along the innermost dim of more than one element (ONNX
 * Runtime's "input 1 is a scalar" spans, where its Pow multiplies for the exponents 2 and 3);
 * when the base is one value there too, or there is no such dim, it calls pow. */
static bool pow_by_rows(const cuvil_binary_params *p) {
    int d = p->ndim - 1;
    while (d >= 0 && p->dims[d] == 1) d--;
    return d >= 0 && p->a_strides[d] != 0 && p->b_strides[d] == 0;
}

void cuvil_pow_t(const cuvil_binary_params *p, int t, const void *a, int te, const void *b, void *y) {
    if (is_float_t(t)) {   /* a float base: pow in double, rounded once to t */
        const bool eu64 = te == CUVIL_T_U64, efl = is_float_t(te);
        BCAST2(p, {
            double e = efl ? ld_float(te, b, ib) : eu64 ? (double)(uint64_t)ld_int(te, b, ib) : (double)ld_int(te, b, ib);
            st_float(t, y, o, pow(ld_float(t, a, ia), e));
        });
        return;
    }
    const bool rows = pow_by_rows(p), u64 = t == CUVIL_T_U64, eu64 = te == CUVIL_T_U64, efl = is_float_t(te);
    BCAST2(p, {
        int64_t x = ld_int(t, a, ia), r;
        int64_t ei = efl ? 0 : ld_int(te, b, ib);
        double e = efl ? ld_float(te, b, ib) : eu64 ? (double)(uint64_t)ei : (double)ei;
        if (rows && e == 2) r = (int64_t)((uint64_t)x * (uint64_t)x);
        else if (rows && e == 3) r = (int64_t)((uint64_t)x * (uint64_t)x * (uint64_t)x);
        else r = float_to_int(CUVIL_T_F64, t, pow(u64 ? (double)(uint64_t)x : (double)x, e));
        st_int(t, y, o, r);
    });
}

void cuvil_cast(int from, int to, const void *x, void *y, int64_t n) {
    if (from == to) {
        memcpy(y, x, (size_t)n * type_size(from));
        return;
    }
    /* float16/bfloat16 <-> float32, the casts around float32 kernels: vector loops over the
     * threads (weights16.c) */
    if ((from == CUVIL_T_F16 || from == CUVIL_T_BF16) && to == CUVIL_T_F32) {
        cuvil_cast16(from == CUVIL_T_F16 ? CUVIL_W16_F16 : CUVIL_W16_BF16, 0, x, y, (size_t)n);
        return;
    }
    if (from == CUVIL_T_F32 && (to == CUVIL_T_F16 || to == CUVIL_T_BF16)) {
        (void)cuvil_cast16(to == CUVIL_T_F16 ? CUVIL_W16_F16 : CUVIL_W16_BF16, 1, x, y, (size_t)n);   /* (IEEE: inf) */
        return;
    }
    /* integers and bools to float32 (a dynamically quantized model's int32 sums before their
     * scale): tight loops, the same one rounding as below */
    if (to == CUVIL_T_F32 && (from == CUVIL_T_I32 || from == CUVIL_T_I8 || from == CUVIL_T_U8 || from == CUVIL_T_BOOL)) {
        float *restrict f = y;
        if (from == CUVIL_T_BOOL)   /* (a one-hot's mask: Magika's 2048 x 257 took 1.2 ms element by element) */
            for (int64_t i = 0; i < n; i++) f[i] = ((const uint8_t *)x)[i] != 0 ? 1.0f : 0.0f;
        else if (from == CUVIL_T_I32)
            for (int64_t i = 0; i < n; i++) f[i] = (float)((const int32_t *)x)[i];
        else if (from == CUVIL_T_I8)
            for (int64_t i = 0; i < n; i++) f[i] = (float)((const int8_t *)x)[i];
        else
            for (int64_t i = 0; i < n; i++) f[i] = (float)((const uint8_t *)x)[i];
        return;
    }
    /* the other casts exporters put on large tensors (indices, masks, int64 shape arithmetic
     * kept in float): tight loops with the rules below (element by element through the type
     * switches, 64 x 112 x 112 float32 -> int64 took 3.8x ONNX Runtime's time, int64 -> float32
     * 2.9x) */
    if (from == CUVIL_T_I64 && to == CUVIL_T_F32) {
        for (int64_t i = 0; i < n; i++) ((float *)y)[i] = (float)((const int64_t *)x)[i];
        return;
    }
    if (from == CUVIL_T_F32 && to == CUVIL_T_I64) {
        for (int64_t i = 0; i < n; i++) ((int64_t *)y)[i] = cvt_i64((double)((const float *)x)[i]);
        return;
    }
    if (from == CUVIL_T_F32 && to == CUVIL_T_I32) {
        for (int64_t i = 0; i < n; i++) ((int32_t *)y)[i] = cvt_i32((double)((const float *)x)[i]);
        return;
    }
    if (from == CUVIL_T_I64 && to == CUVIL_T_I32) {
        for (int64_t i = 0; i < n; i++) ((uint32_t *)y)[i] = (uint32_t)((const uint64_t *)x)[i];
        return;
    }
    if (from == CUVIL_T_I32 && to == CUVIL_T_I64) {
        for (int64_t i = 0; i < n; i++) ((int64_t *)y)[i] = ((const int32_t *)x)[i];
        return;
    }
    if (from == CUVIL_T_F32 && to == CUVIL_T_BOOL) {
        for (int64_t i = 0; i < n; i++) ((uint8_t *)y)[i] = ((const float *)x)[i] != 0.0f;
        return;
    }
    bool ff = is_float_t(from);
    for (int64_t i = 0; i < n; i++) {
        if (to == CUVIL_T_BOOL) {
            ((uint8_t *)y)[i] = ff ? ld_float(from, x, i) != 0 : ld_int(from, x, i) != 0;
        } else if (is_float_t(to)) {
            double v;
            if (ff) v = ld_float(from, x, i);
            else if (from == CUVIL_T_U64) v = (double)((const uint64_t *)x)[i];
            else v = (double)ld_int(from, x, i);
            if (to == CUVIL_T_F64) {
                ((double *)y)[i] = v;
            } else {
                /* one rounding from the source: an integer converts straight to float */
                float f = ff ? (float)v
                          : from == CUVIL_T_U64 ? (float)((const uint64_t *)x)[i] : (float)ld_int(from, x, i);
                st_float(to, y, i, f);
            }
        } else if (ff) {
            st_int(to, y, i, float_to_int(from, to, ld_float(from, x, i)));
        } else {
            st_int(to, y, i, ld_int(from, x, i));
        }
    }
}

/* ===== Where, broadcast copies ============================================================ */
/* n elements of es bytes: dst[i] = src[i * ss] (ss 0: one value repeated, 1: a copy). */
static void run_copy(char *dst, const char *src, int64_t ss, int64_t n, int64_t es) {
    if (ss == 1) {
        memcpy(dst, src, (size_t)(n * es));
        return;
    }
    switch (es) {   /* a value repeated */
    case 1: memset(dst, *src, (size_t)n); return;
    case 2: { uint16_t v; memcpy(&v, src, 2); for (int64_t i = 0; i < n; i++) memcpy(dst + 2 * i, &v, 2); return; }
    case 4: { uint32_t v; memcpy(&v, src, 4); for (int64_t i = 0; i < n; i++) memcpy(dst + 4 * i, &v, 4); return; }
    case 8: { uint64_t v; memcpy(&v, src, 8); for (int64_t i = 0; i < n; i++) memcpy(dst + 8 * i, &v, 8); return; }
    default: for (int64_t i = 0; i < n; i++) memcpy(dst + i * es, src, (size_t)es); return;
    }
}

/* Where on the rows of its innermost dim: each operand's row contiguous or one value (stride 1
 * or 0), the choice a blend of the bits (no branch: random conditions mispredicted, 9 ns an
 * element, 7.4 ms for 64 x 112 x 112 floats); other strides element by element. */
#define WHERE_ROW(T)                                                                               \
    do {                                                                                           \
        const T *xr = (const T *)(const void *)(X + ox * es), *yr = (const T *)(const void *)(Y + oy * es); \
        T *orow = (T *)(void *)(O + o * es);                                                       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T m = (T)0 - (T)(c[oc + i * cs] != 0);                                           \
            orow[i] = (T)((xr[i * xs] & m) | (yr[i * ys] & (T)~m));                                \
        }                                                                                          \
    } while (0)

void cuvil_where(const cuvil_where_params *p, const uint8_t *c, const void *x, const void *y, void *out) {
    int64_t total = 1, es = p->elem_size;
    for (int d = 0; d < p->ndim; d++) total *= p->dims[d];
    if (total == 0) return;
    const int last = p->ndim - 1;
    const int64_t n = p->ndim ? p->dims[last] : 1;
    const int64_t cs = p->ndim ? p->c_strides[last] : 0, xs = p->ndim ? p->x_strides[last] : 0,
                  ys = p->ndim ? p->y_strides[last] : 0;
    int64_t idx[CUVIL_RT_MAX_DIMS] = {0}, oc = 0, ox = 0, oy = 0;
    const char *X = x, *Y = y;
    char *O = out;
    for (int64_t o = 0; o < total; o += n) {
        switch (es) {
        case 1: WHERE_ROW(uint8_t); break;
        case 2: WHERE_ROW(uint16_t); break;
        case 4: WHERE_ROW(uint32_t); break;
        case 8: WHERE_ROW(uint64_t); break;
        default:
            for (int64_t i = 0; i < n; i++)
                memcpy(O + (o + i) * es, c[oc + i * cs] ? X + (ox + i * xs) * es : Y + (oy + i * ys) * es, (size_t)es);
            break;
        }
        for (int d = last - 1; d >= 0; d--) {   /* the next row */
            oc += p->c_strides[d];
            ox += p->x_strides[d];
            oy += p->y_strides[d];
            if (++idx[d] < p->dims[d]) break;
            oc -= p->c_strides[d] * p->dims[d];
            ox -= p->x_strides[d] * p->dims[d];
            oy -= p->y_strides[d] * p->dims[d];
            idx[d] = 0;
        }
    }
}
#undef WHERE_ROW

/* Row by row over the innermost dim (after joining neighbouring dims that are both copied or
 * both broadcast): a row is a copy, one value repeated, or (Tile) the source row repeated.
 * (Element by element with a modulo per dim it took 8.8 ms to expand 64 values to 64 x 112 x
 * 112.) */
void cuvil_bcast_copy(const cuvil_bcast_copy_params *p, const void *x, void *y) {
    int64_t D[CUVIL_RT_MAX_DIMS], XD[CUVIL_RT_MAX_DIMS], total = 1, es = p->elem_size;
    int nd = 0;
    for (int d = 0; d < p->ndim; d++) {
        total *= p->dims[d];
        if (p->dims[d] == 1) continue;
        const int full = p->x_dims[d] == p->dims[d], one = p->x_dims[d] == 1;
        if (nd > 0 && ((full && XD[nd - 1] == D[nd - 1]) || (one && XD[nd - 1] == 1))) {
            D[nd - 1] *= p->dims[d];
            XD[nd - 1] *= p->x_dims[d];
            continue;
        }
        D[nd] = p->dims[d];
        XD[nd++] = p->x_dims[d];
    }
    if (total == 0) return;
    if (nd == 0) {
        memcpy(y, x, (size_t)es);
        return;
    }
    int64_t xs[CUVIL_RT_MAX_DIMS], st = 1;
    for (int d = nd - 1; d >= 0; d--) xs[d] = st, st *= XD[d];
    const int64_t inner = D[nd - 1], xin = XD[nd - 1];
    int64_t idx[CUVIL_RT_MAX_DIMS] = {0};
    const char *X = x;
    char *Y = y;
    for (int64_t o = 0; o < total; o += inner) {
        int64_t off = 0;
        for (int d = 0; d < nd - 1; d++) off += (idx[d] % XD[d]) * xs[d];
        const char *src = X + off * es;
        char *dst = Y + o * es;
        if (xin == inner || xin == 1) {
            run_copy(dst, src, xin == 1 ? 0 : 1, inner, es);
        } else {   /* a tile of the row: inner is a multiple of xin */
            for (int64_t j = 0; j < inner; j += xin) memcpy(dst + j * es, src, (size_t)((inner - j < xin ? inner - j : xin) * es));
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < D[d]) break;
            idx[d] = 0;
        }
    }
}

/* ===== Range, Trilu, CumSum, fill ======================================================================== */
void cuvil_range_t(int t, const void *start, const void *delta, void *y, int64_t n) {
    if (is_float_t(t)) {   /* start + i * delta in double, rounded once (numpy's arange) */
        double s = ld_float(t, start, 0), d = ld_float(t, delta, 0);
        for (int64_t i = 0; i < n; i++) st_float(t, y, i, s + (double)i * d);
        return;
    }
    uint64_t s = (uint64_t)ld_int(t, start, 0), d = (uint64_t)ld_int(t, delta, 0);
    for (int64_t i = 0; i < n; i++) st_int(t, y, i, (int64_t)(s + (uint64_t)i * d));
}

/* A float as int64 the way a C cast would for values in range (ONNX Runtime's static_cast),
 * saturating outside it, INT64_MIN for NaN: never undefined. */
static int64_t f_to_i64(double v) {
    if (v != v) return INT64_MIN;   /* NaN: no index (an all-off row), no depth */
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static int64_t ld_index(int t, const void *p, int64_t i) { return is_float_t(t) ? f_to_i64(ld_float(t, p, i)) : ld_int(t, p, i); }

int64_t cuvil_onehot_depth_t(int t, const void *depth, int64_t cap) {
    int64_t d = ld_index(t, depth, 0);
    return d < 1 || d > cap ? -1 : d;   /* ONNX Runtime refuses a depth of 0 too */
}

void cuvil_onehot_t(int t, const void *idx, int64_t outer, int64_t depth, int64_t inner, const void *values, int64_t es,
                    void *y) {
    const char *off = values, *on = (const char *)values + es;
    char *Y = y;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t v = ld_index(t, idx, o * inner + i);
                if (v < 0 && v >= -depth) v += depth;   /* counts from the end */
                memcpy(Y + ((o * depth + d) * inner + i) * es, v == d ? on : off, (size_t)es);
            }
}

/* ===== Unique ============================================================================== */
typedef struct unique_ctx {
    int t;
    const char *x;
    int64_t outer, n, inner;
} unique_ctx;

/* -1, 0, 1: slice a against slice b, element by element (NaN after every number, equal to NaN). */
static int slice_cmp(const unique_ctx *u, int64_t a, int64_t b) {
    for (int64_t o = 0; o < u->outer; o++)
        for (int64_t i = 0; i < u->inner; i++) {
            int64_t ia = (o * u->n + a) * u->inner + i, ib = (o * u->n + b) * u->inner + i;
            if (is_float_t(u->t)) {
                double va = ld_float(u->t, u->x, ia), vb = ld_float(u->t, u->x, ib);
                bool na = va != va, nb = vb != vb;
                if (na != nb) return na ? 1 : -1;
                if (!na && va != vb) return va < vb ? -1 : 1;
            } else if (u->t == CUVIL_T_U64) {
                uint64_t va = ((const uint64_t *)(const void *)u->x)[ia], vb = ((const uint64_t *)(const void *)u->x)[ib];
                if (va != vb) return va < vb ? -1 : 1;
            } else {
                int64_t va = ld_int(u->t, u->x, ia), vb = ld_int(u->t, u->x, ib);
                if (va != vb) return va < vb ? -1 : 1;
            }
        }
    return 0;
}

/* Stable merge sort of v[0..m) by key: slices (keys NULL) or numbers keys[v[i]]. */
static void merge_sort(const unique_ctx *u, const int64_t *keys, int64_t *v, int64_t *tmp, int64_t m) {
    for (int64_t w = 1; w < m; w *= 2) {
        for (int64_t lo = 0; lo < m; lo += 2 * w) {
            int64_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool right = keys ? keys[v[j]] < keys[v[i]] : slice_cmp(u, v[j], v[i]) < 0;
                tmp[k++] = right ? v[j++] : v[i++];
            }
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, sizeof *v * (size_t)m);
    }
}

size_t cuvil_unique_scratch_size(int64_t n) { return sizeof(int64_t) * 5 * (size_t)(n > 0 ? n : 1); }

int64_t cuvil_unique_t(int t, int64_t es, const void *x, int64_t outer, int64_t n, int64_t inner, int sorted, void *y,
                       int64_t *idx, int64_t *inv, int64_t *cnt, int64_t cap, void *scratch) {
    unique_ctx u = {t, x, outer, n, inner};
    int64_t *perm = scratch, *tmp = perm + n, *gid = tmp + n, *first = gid + n, *pos = first + n, k = 0;
    for (int64_t j = 0; j < n; j++) perm[j] = j;
    merge_sort(&u, NULL, perm, tmp, n);
    for (int64_t s = 0; s < n; s++) {   /* groups of equal slices, in sorted order; stable: the first is the lowest */
        if (s == 0 || slice_cmp(&u, perm[s - 1], perm[s]) != 0) first[k++] = perm[s];
        gid[perm[s]] = k - 1;
    }
    if (k > cap) return -1;   /* more than the room planned: nothing written */
    for (int64_t g = 0; g < k; g++) pos[g] = g;
    if (!sorted) merge_sort(&u, first, pos, tmp, k);   /* the groups by first occurrence */
    for (int64_t r = 0; r < k; r++) tmp[pos[r]] = r;   /* group -> its position in the output */
    for (int64_t r = 0; r < k; r++) {
        int64_t f = first[pos[r]];
        if (idx) idx[r] = f;
        if (cnt) cnt[r] = 0;
        for (int64_t o = 0; o < outer && y; o++)
            memcpy((char *)y + ((o * k + r) * inner) * es, (const char *)x + ((o * n + f) * inner) * es, (size_t)(inner * es));
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t r = tmp[gid[j]];
        if (inv) inv[j] = r;
        if (cnt) cnt[r]++;
    }
    return k;
}

int64_t cuvil_range_count_t(int t, const void *start, const void *limit, const void *delta, int64_t cap) {
    int64_t n;
    if (is_float_t(t)) {
        double s = ld_float(t, start, 0), l = ld_float(t, limit, 0), d = ld_float(t, delta, 0);
        double k = ceil((l - s) / d);
        if (d == 0 || k != k) return -1;
        if (k > (double)cap) return -1;
        n = k > 0 ? (int64_t)k : 0;
    } else {
        int64_t s = ld_int(t, start, 0), l = ld_int(t, limit, 0), d = ld_int(t, delta, 0);
        if (d == 0) return -1;
        /* ceil(|l - s| / |d|) in uint64: every difference of two int64s fits */
        uint64_t span = d > 0 ? (l > s ? (uint64_t)l - (uint64_t)s : 0) : (s > l ? (uint64_t)s - (uint64_t)l : 0);
        uint64_t step = d > 0 ? (uint64_t)d : (uint64_t)(-(d + 1)) + 1;
        uint64_t k = span ? 1 + (span - 1) / step : 0;
        if (k > (uint64_t)cap) return -1;
        n = (int64_t)k;
    }
    return n > cap ? -1 : n;
}

void cuvil_trilu(const cuvil_trilu_params *p, const int64_t *k_rt, const void *x, void *y) {
    int64_t k = k_rt ? *k_rt : p->k;
    const char *X = x;
    char *Y = y;
    size_t es = (size_t)p->elem_size;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->rows; i++) {
            size_t row = (size_t)((b * p->rows + i) * p->cols) * es;
            for (int64_t j = 0; j < p->cols; j++) {
                bool keep = p->upper ? j - i >= k : j - i <= k;
                if (keep) memmove(Y + row + (size_t)j * es, X + row + (size_t)j * es, es);
                else memset(Y + row + (size_t)j * es, 0, es);
            }
        }
}

#define CUMSUM(T, ACC, LD, ST)                                                                  \
    for (int64_t o = 0; o < p->outer; o++)                                                      \
        for (int64_t in = 0; in < p->inner; in++) {                                             \
            ACC acc = p->prod ? (ACC)1 : (ACC)0;                                                \
            for (int64_t k = 0; k < p->len; k++) {                                              \
                int64_t at = (o * p->len + (p->reverse ? p->len - 1 - k : k)) * p->inner + in;  \
                ACC v = LD(((const T *)x)[at]);                                                 \
                if (!p->exclusive) acc = p->prod ? (ACC)(acc * v) : (ACC)(acc + v);             \
                ((T *)y)[at] = ST(acc);                                                         \
                if (p->exclusive) acc = p->prod ? (ACC)(acc * v) : (ACC)(acc + v);              \
            }                                                                                   \
        }
#define ID(v) (v)

void cuvil_cumsum_t(const cuvil_cumsum_params *p, int t, const void *x, void *y) {
    switch (t) {
    case CUVIL_T_F32: CUMSUM(float, float, ID, ID); break;
    case CUVIL_T_F64: CUMSUM(double, double, ID, ID); break;
    case CUVIL_T_F16: CUMSUM(uint16_t, float, cuvil_f16_to_f32, cuvil_f32_to_f16); break;
    case CUVIL_T_BF16: CUMSUM(uint16_t, float, cuvil_bf16_to_f32, cuvil_f32_to_bf16); break;
    case CUVIL_T_I32: case CUVIL_T_U32: CUMSUM(uint32_t, uint32_t, ID, ID); break;
    default: CUMSUM(uint64_t, uint64_t, ID, ID); break;   /* int64, uint64: wrapping */
    }
}
#undef CUMSUM
#undef ID

int cuvil_cumsum_rt(const cuvil_cumsum_params *p, int ndim, const int64_t *dims, int axis_t, const void *axis, int t,
                    const void *x, void *y) {
    int64_t a = cuvil_ld_index(axis_t, axis, 0);
    if (a < -(int64_t)ndim || a >= ndim) return 1;
    if (a < 0) a += ndim;
    cuvil_cumsum_params q = *p;
    q.outer = q.inner = 1;
    q.len = dims[a];
    for (int64_t d = 0; d < a; d++) q.outer *= dims[d];
    for (int64_t d = a + 1; d < ndim; d++) q.inner *= dims[d];
    cuvil_cumsum_t(&q, t, x, y);
    return 0;
}

#define CLIP(T)                                                                                 \
    do {                                                                                        \
        const T *X = x;                                                                         \
        T *Y = y, l = lo ? *(const T *)lo : (T)0, h = hi ? *(const T *)hi : (T)0;               \
        for (int64_t i = 0; i < n; i++) {                                                       \
            T v = X[i];                                                                         \
            if (lo && v < l) v = l;                                                             \
            if (hi && v > h) v = h;                                                             \
            Y[i] = v;                                                                           \
        }                                                                                       \
    } while (0)

void cuvil_clip_t(int t, const void *x, const void *lo, const void *hi, void *y, int64_t n) {
    switch (t) {
    case CUVIL_T_F32: CLIP(float); break;
    case CUVIL_T_F64: CLIP(double); break;
    case CUVIL_T_I8: CLIP(int8_t); break;
    case CUVIL_T_I16: CLIP(int16_t); break;
    case CUVIL_T_I32: CLIP(int32_t); break;
    case CUVIL_T_I64: CLIP(int64_t); break;
    case CUVIL_T_U8: CLIP(uint8_t); break;
    case CUVIL_T_U16: CLIP(uint16_t); break;
    case CUVIL_T_U32: CLIP(uint32_t); break;
    case CUVIL_T_U64: CLIP(uint64_t); break;
    case CUVIL_T_F16: case CUVIL_T_BF16: {   /* through float32 */
        float l = lo ? (float)ld_float(t, lo, 0) : 0, h = hi ? (float)ld_float(t, hi, 0) : 0;
        for (int64_t i = 0; i < n; i++) {
            float v = (float)ld_float(t, x, i);
            if (lo && v < l) v = l;
            if (hi && v > h) v = h;
            st_float(t, y, i, v);
        }
        break;
    }
    default: break;   /* bool: refused by the compiler */
    }
}
#undef CLIP

/* TopK candidates: the value as double (floats) or int64 (integers), and its index. */
typedef struct topk_item {
    double f;
    int64_t v, i;
} topk_item;

static int topk_cmp_f(const void *a, const void *b) {   /* descending, NaN first, ties by index */
    const topk_item *x = a, *y = b;
    bool xn = x->f != x->f, yn = y->f != y->f;
    if (xn != yn) return xn ? -1 : 1;
    if (!xn && x->f != y->f) return x->f > y->f ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int topk_cmp_f_asc(const void *a, const void *b) {   /* ascending, NaN last, ties by index */
    const topk_item *x = a, *y = b;
    bool xn = x->f != x->f, yn = y->f != y->f;
    if (xn != yn) return xn ? 1 : -1;
    if (!xn && x->f != y->f) return x->f < y->f ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int topk_cmp_i(const void *a, const void *b) {
    const topk_item *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int topk_cmp_i_asc(const void *a, const void *b) {
    const topk_item *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Puts the first k of c[0..n) in cmp's order (a total order: ties broken by index) into
 * c[0..k), sorted. For k well below n, a heap of the best k so far whose root is the worst of
 * them (most candidates cost one comparison with it), then the k sorted: what a sort of all n
 * gives, in n log k (the full sort of each 112-long row, k 10, took 8x ONNX Runtime's time). */
static void topk_sift(topk_item *h, int64_t k, int64_t i, int (*cmp)(const void *, const void *)) {
    for (;;) {
        int64_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < k && cmp(&h[l], &h[w]) > 0) w = l;
        if (r < k && cmp(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        const topk_item t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void topk_select(topk_item *c, int64_t n, int64_t k, int (*cmp)(const void *, const void *)) {
    if (k <= 0) return;
    if (k * 4 > n) {
        qsort(c, (size_t)n, sizeof *c, cmp);
        return;
    }
    for (int64_t i = k / 2 - 1; i >= 0; i--) topk_sift(c, k, i, cmp);   /* heap of c[0..k) */
    for (int64_t j = k; j < n; j++)
        if (cmp(&c[j], &c[0]) < 0) {   /* better than the worst kept */
            c[0] = c[j];
            topk_sift(c, k, 0, cmp);
        }
    qsort(c, (size_t)k, sizeof *c, cmp);
}

size_t cuvil_topk_scratch_size(const cuvil_topk_params *p) { return sizeof(topk_item) * (size_t)p->len; }

/* float32 rows shorter than 2^32: each candidate one 64-bit key, larger = earlier in the
 * qsort comparator's order: the value's bits made monotonic (-0 as +0; for largest NaN above
 * all, else the order reversed and NaN below all) above the index complemented (ties: the
 * smaller index first). The best k by a heap of keys whose root is the worst kept, then sorted
 * (the comparator through qsort took 1.6x ONNX Runtime's time on 112-long rows, k 10). */
static inline uint64_t topk_key(float v, int64_t j, uint32_t flip) {
    const uint32_t u = cuvil_f32_order_bits(v);   /* ascending as unsigned */
    const uint32_t nan = 0u - (uint32_t)(v != v);
    const uint32_t hi = ((u ^ flip) & ~nan) | (~flip & nan);   /* flip 0 (largest: NaN top) or ~0 (NaN bottom) */
    return ((uint64_t)hi << 32) | (uint64_t)(0xffffffffu - (uint32_t)j);
}

static void topk_f32_rows(const cuvil_topk_params *p, const float *x, float *y, int64_t *idx, uint64_t *h) {
    const uint32_t flip = p->largest ? 0u : 0xffffffffu;
    const int64_t k = p->k, n = p->len;
    if (k <= 0) return;   /* (no output; the heap's root would be read before it is written) */
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t in = 0; in < p->inner; in++) {
            const float *row = x + o * n * p->inner + in;
            for (int64_t j = 0; j < k; j++) h[j] = topk_key(row[j * p->inner], j, flip);
            for (int64_t i = k / 2 - 1; i >= 0; i--) cuvil_u64_heap_down(h, k, i, 0);
            for (int64_t j = k; j < n; j++) {
                const uint64_t v = topk_key(row[j * p->inner], j, flip);
                if (v > h[0]) {
                    h[0] = v;
                    cuvil_u64_heap_down(h, k, 0, 0);
                }
            }
            for (int64_t e = k - 1; e > 0; e--) {   /* heap sort: ascending keys from the end, the best first */
                const uint64_t t = h[0];
                h[0] = h[e];
                h[e] = t;
                cuvil_u64_heap_down(h, e, 0, 0);
            }
            for (int64_t j = 0; j < k; j++) {
                const int64_t at = (o * k + j) * p->inner + in, src = 0xffffffffu - (uint32_t)h[j];
                idx[at] = src;
                y[at] = row[src * p->inner];
            }
        }
}

void cuvil_topk_t(const cuvil_topk_params *p, int t, const void *x, void *y, int64_t *idx, void *scratch) {
    if (t == CUVIL_T_F32 && p->len < 0xffffffffLL && p->k <= p->len) {   /* (keys: smaller than topk_item) */
        topk_f32_rows(p, x, y, idx, scratch);
        return;
    }
    topk_item *c = scratch;
    bool fl = is_float_t(t);
    int (*cmp)(const void *, const void *) = fl ? (p->largest ? topk_cmp_f : topk_cmp_f_asc)
                                                : (p->largest ? topk_cmp_i : topk_cmp_i_asc);
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t in = 0; in < p->inner; in++) {
            for (int64_t j = 0; j < p->len; j++) {
                int64_t at = (o * p->len + j) * p->inner + in;
                c[j].i = j;
                if (fl) c[j].f = ld_float(t, x, at);
                else   /* (uint64 with its top bit flipped: the same order as int64) */
                    c[j].v = t == CUVIL_T_U64 ? (int64_t)(((const uint64_t *)x)[at] ^ (1ull << 63)) : ld_int(t, x, at);
            }
            topk_select(c, p->len, p->k, cmp);
            for (int64_t j = 0; j < p->k; j++) {
                int64_t at = (o * p->k + j) * p->inner + in, src = (o * p->len + c[j].i) * p->inner + in;
                idx[at] = c[j].i;
                memcpy((char *)y + (size_t)at * type_size(t), (const char *)x + (size_t)src * type_size(t), type_size(t));
            }
        }
}

void cuvil_float_class_t(int t, int mask, const void *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double v = ld_float(t, x, i);
        y[i] = ((mask & CUVIL_CLASS_NAN) && v != v) || ((mask & CUVIL_CLASS_POS_INF) && v == INFINITY) ||
               ((mask & CUVIL_CLASS_NEG_INF) && v == -INFINITY);
    }
}

void cuvil_fill(const void *value, int64_t elem_size, void *y, int64_t n) {
    char *Y = y;
    for (int64_t i = 0; i < n; i++) memcpy(Y + i * elem_size, value, (size_t)elem_size);
}

/* ===== Reductions of every numeric type =================================================== */
/* Output by output: integers accumulate in 64 bits, wrapping like the type (sums, products)
 * and comparing as the type (uint64 unsigned); floats in double, NaN propagating through max
 * and min as in the float32 kernel; one rounding to the type at the end. The compiler folds
 * non-float32 reductions with this function too. */
void cuvil_reduce_t(const cuvil_reduce_params *p, int t, const void *x, void *y) {
    int nk = 0, nr = 0;
    int64_t ks[CUVIL_RT_MAX_DIMS], kst[CUVIL_RT_MAX_DIMS], rs[CUVIL_RT_MAX_DIMS], rst[CUVIL_RT_MAX_DIMS];
    int64_t stride = 1, nout = 1, count = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {   /* innermost first */
        if (p->mask & (1u << d)) {
            rs[nr] = p->dims[d], rst[nr++] = stride;
            count *= p->dims[d];
        } else {
            ks[nk] = p->dims[d], kst[nk++] = stride;
            nout *= p->dims[d];
        }
        stride *= p->dims[d];
    }
    const bool fl = is_float_t(t), u64 = t == CUVIL_T_U64, bl = t == CUVIL_T_BOOL;   /* bool: max is any, min all */
    const int op = p->op;
    int64_t kidx[CUVIL_RT_MAX_DIMS] = {0}, base = 0;
    for (int64_t o = 0; o < nout; o++) {
        /* o counts the kept dims row-major: kidx[0] (innermost) fastest */
        double af = op == CUVIL_REDUCE_PROD ? 1 : op == CUVIL_REDUCE_MAX ? -INFINITY : op == CUVIL_REDUCE_MIN ? INFINITY : 0;
        double am = -INFINITY;
        int64_t ai = op == CUVIL_REDUCE_PROD ? 1 : op == CUVIL_REDUCE_MAX ? (u64 || bl ? 0 : INT64_MIN)
                                                  : op == CUVIL_REDUCE_MIN ? (bl ? 1 : u64 ? -1 : INT64_MAX) : 0;
        for (int pass = op == CUVIL_REDUCE_LOG_SUM_EXP ? 0 : 1; pass < 2; pass++) {
            int64_t ridx[CUVIL_RT_MAX_DIMS] = {0}, off = base;
            for (int64_t r = 0; r < count; r++) {
                double v = fl ? ld_float(t, x, off) : 0;
                int64_t w = fl ? 0 : ld_int(t, x, off);
                if (!fl) v = u64 ? (double)(uint64_t)w : (double)w;
                if (pass == 0) {
                    am = v > am || v != v ? v : am;
                } else {
                    switch (op) {
                    case CUVIL_REDUCE_SUM:
                    case CUVIL_REDUCE_MEAN: ai = (int64_t)((uint64_t)ai + (uint64_t)w), af += v; break;
                    case CUVIL_REDUCE_MAX:
                        ai = (u64 ? (uint64_t)w > (uint64_t)ai : w > ai) ? w : ai;
                        af = v > af || v != v ? v : af;
                        break;
                    case CUVIL_REDUCE_MIN:
                        ai = (u64 ? (uint64_t)w < (uint64_t)ai : w < ai) ? w : ai;
                        af = v < af || v != v ? v : af;
                        break;
                    case CUVIL_REDUCE_PROD: ai = (int64_t)((uint64_t)ai * (uint64_t)w), af *= v; break;
                    case CUVIL_REDUCE_SUM_SQUARE:
                    case CUVIL_REDUCE_L2: ai = (int64_t)((uint64_t)ai + (uint64_t)w * (uint64_t)w), af += v * v; break;
                    case CUVIL_REDUCE_L1:
                        ai = (int64_t)((uint64_t)ai + (!u64 && w < 0 ? 0 - (uint64_t)w : (uint64_t)w)), af += fabs(v);
                        break;
                    case CUVIL_REDUCE_LOG_SUM_EXP: af += isinf(am) ? 0 : exp(v - am); break;
                    default: break;
                    }
                }
                for (int d = 0; d < nr; d++) {   /* the next reduced index */
                    off += rst[d];
                    if (++ridx[d] < rs[d]) break;
                    off -= rst[d] * rs[d];
                    ridx[d] = 0;
                }
            }
        }
        /* the result, as double (rounded once to a float type) or as int64 */
        bool as_double = fl || op == CUVIL_REDUCE_L2 || op == CUVIL_REDUCE_LOG_SUM_EXP;
        double rd = af;
        int64_t ri = ai;
        if (op == CUVIL_REDUCE_MEAN) {
            if (fl) rd = count ? af / (double)count : 0.0;   /* of nothing: 0 */
            else ri = count ? (u64 ? (int64_t)((uint64_t)ai / (uint64_t)count) : ai / count) : 0;
        } else if (op == CUVIL_REDUCE_L2) {
            rd = sqrt(fl ? af : u64 ? (double)(uint64_t)ai : (double)ai);
        } else if (op == CUVIL_REDUCE_LOG_SUM_EXP) {
            rd = isinf(am) ? am : am + log(af);
        }
        if (fl) st_float(t, y, o, rd);
        else if (bl) ((uint8_t *)y)[o] = ri != 0;
        else st_int(t, y, o, as_double ? sat_i64(rd) : ri);
        for (int d = 0; d < nk; d++) {   /* the next output */
            base += kst[d];
            if (++kidx[d] < ks[d]) break;
            base -= kst[d] * ks[d];
            kidx[d] = 0;
        }
    }
}

/* ===== ArgMax / ArgMin ==================================================================== */
/* ArgMax / ArgMin on float32 with inner > 1: the axis walked outermost, a chunk of the inner
 * positions at a time, so each step reads a contiguous row (down a column of 12,544-float
 * strides, 64 x 112 x 112 over its channels took 2.8 ms, ONNX Runtime 1.0). The same rule as
 * below: the first NaN wins and stays, else the first (or with select_last the last) extreme. */
static void argmax_f32_rows(const cuvil_arg_params *p, const float *x, int64_t *y) {
    enum { CH = 256 };
    float bv[CH];
    int32_t bk[CH];
    uint8_t bn[CH];
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i0 = 0; i0 < p->inner; i0 += CH) {
            const int64_t c = p->inner - i0 < CH ? p->inner - i0 : CH;
            const float *r0 = x + o * p->axis_len * p->inner + i0;
            for (int64_t i = 0; i < c; i++) bv[i] = r0[i], bk[i] = 0, bn[i] = r0[i] != r0[i];
            for (int64_t k = 1; k < p->axis_len; k++) {
                const float *r = r0 + k * p->inner;
                for (int64_t i = 0; i < c; i++) {
                    const float v = r[i];
                    const int better = (bn[i] == 0) & ((v != v) | (p->is_min ? v < bv[i] : v > bv[i]) | (p->select_last & (v == bv[i])));
                    bv[i] = better ? v : bv[i];
                    bk[i] = better ? (int32_t)k : bk[i];
                    bn[i] = (uint8_t)(bn[i] | (better & (v != v)));
                }
            }
            for (int64_t i = 0; i < c; i++) y[o * p->inner + i0 + i] = bk[i];
        }
}

void cuvil_argmax_t(const cuvil_arg_params *p, int t, const void *x, int64_t *y) {
    if (t == CUVIL_T_F32 && p->inner > 1 && p->axis_len > 0 && p->axis_len <= INT32_MAX) {
        argmax_f32_rows(p, x, y);
        return;
    }
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t in = 0; in < p->inner; in++) {
            int64_t best = 0;
            double bv = 0;
            int64_t bi = 0;
            bool fl = is_float_t(t), bnan = false;
            for (int64_t k = 0; k < p->axis_len; k++) {
                int64_t at = (o * p->axis_len + k) * p->inner + in;
                if (fl) {
                    double v = ld_float(t, x, at);
                    bool nan = v != v;
                    bool better = k == 0 || (!bnan && (nan || (p->is_min ? v < bv : v > bv) ||
                                                      (p->select_last && v == bv)));
                    if (better) {
                        bv = v;
                        bnan = nan;
                        best = k;
                    }
                } else {
                    int64_t v = ld_int(t, x, at);
                    bool gt;
                    if (t == CUVIL_T_U64) {
                        uint64_t uv = (uint64_t)v, ub = (uint64_t)bi;
                        gt = p->is_min ? uv < ub : uv > ub;
                    } else {
                        gt = p->is_min ? v < bi : v > bi;
                    }
                    if (k == 0 || gt || (p->select_last && v == bi)) {
                        bi = v;
                        best = k;
                    }
                }
            }
            y[o * p->inner + in] = best;
        }
}

/* ===== EyeLike, ReverseSequence =========================================================== */
void cuvil_eyelike_t(int t, int64_t rows, int64_t cols, int64_t k, void *y) {
    memset(y, 0, (size_t)(rows * cols) * type_size(t));
    for (int64_t r = 0; r < rows; r++) {
        const int64_t c = r + k;
        if (c < 0 || c >= cols) continue;
        if (is_float_t(t)) st_float(t, y, r * cols + c, 1.0);
        else if (t == CUVIL_T_BOOL) ((uint8_t *)y)[r * cols + c] = 1;
        else st_int(t, y, r * cols + c, 1);
    }
}

int cuvil_reverse_sequence(size_t es, int time_first, int64_t T, int64_t B, int64_t inner, const int64_t *lens,
                           const void *x, void *y) {
    for (int64_t b = 0; b < B; b++)
        if (lens[b] < 0 || lens[b] > T) return 1;
    const size_t row = es * (size_t)inner;
    for (int64_t t = 0; t < T; t++)
        for (int64_t b = 0; b < B; b++) {
            const int64_t st = t < lens[b] ? lens[b] - 1 - t : t;   /* the step it comes from */
            const int64_t o = time_first ? t * B + b : b * T + t, in = time_first ? st * B + b : b * T + st;
            memcpy((char *)y + (size_t)o * row, (const char *)x + (size_t)in * row, row);
        }
    return 0;
}

/* ===== Quantization ======================================================================== */
static int64_t qidx(const cuvil_quant_params *p, int64_t o, int64_t l, int64_t i) {
    if (p->mode == 0) return 0;
    if (p->mode == 1) return l;
    const int64_t nb = (p->len + p->block - 1) / p->block;
    return (o * nb + l / p->block) * p->inner + i;
}

static void int_range(int t, double *lo, double *hi) {
    switch (t) {
    case CUVIL_T_I4: *lo = -8, *hi = 7; break;
    case CUVIL_T_U4: *lo = 0, *hi = 15; break;
    case CUVIL_T_I8: *lo = -128, *hi = 127; break;
    case CUVIL_T_U8: *lo = 0, *hi = 255; break;
    case CUVIL_T_I16: *lo = -32768, *hi = 32767; break;
    case CUVIL_T_U16: *lo = 0, *hi = 65535; break;
    case CUVIL_T_I32: *lo = -2147483648.0, *hi = 2147483647.0; break;
    case CUVIL_T_U32: *lo = 0, *hi = 4294967295.0; break;
    default: *lo = -9223372036854775808.0, *hi = 9223372036854775807.0; break;
    }
}

/* The common case: one float32 scale, 8-bit to float32 (a loop the compiler vectorises). */
static int dequantize_8(const cuvil_quant_params *p, int xt, const void *x, int st, const void *scale, const void *zp, int yt,
                        float *y) {
    if (p->mode != 0 || st != CUVIL_T_F32 || yt != CUVIL_T_F32 || (xt != CUVIL_T_U8 && xt != CUVIL_T_I8)) return 0;
    const int64_t n = p->outer * p->len * p->inner;
    const float s = *(const float *)scale;
    const int32_t z = zp ? (int32_t)ld_int(xt, zp, 0) : 0;
    if (xt == CUVIL_T_U8)
        for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)((const uint8_t *)x)[i] - z) * s;
    else
        for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)((const int8_t *)x)[i] - z) * s;
    return 1;
}

/* float32 to 8 bits with one float32 scale: rint(x / s) + zp saturated (NaN: 0), branch-free */
static int quantize_8(const cuvil_quant_params *p, int xt, const float *x, int st, const void *scale, const void *zp, int yt,
                      void *y) {
    if (p->mode != 0 || st != CUVIL_T_F32 || xt != CUVIL_T_F32 || (yt != CUVIL_T_U8 && yt != CUVIL_T_I8)) return 0;
    const int64_t n = p->outer * p->len * p->inner;
    const float s = *(const float *)scale;
    const float z = zp ? (float)ld_int(yt, zp, 0) : 0.0f, lo = yt == CUVIL_T_U8 ? 0.0f : -128.0f, hi = yt == CUVIL_T_U8 ? 255.0f : 127.0f;
    for (int64_t i = 0; i < n; i++) {
        const float q = x[i] / s;
        float v = nearbyintf(q) + z;
        v = v >= lo ? v : lo;
        v = v <= hi ? v : hi;
        v = q == q ? v : 0.0f;   /* (a NaN quotient: 0, as the general path) */
        if (yt == CUVIL_T_U8) ((uint8_t *)y)[i] = (uint8_t)v;
        else ((int8_t *)y)[i] = (int8_t)v;
    }
    return 1;
}

void cuvil_dequantize_t(const cuvil_quant_params *p, int xt, const void *x, int st, const void *scale, const void *zp,
                        int yt, void *y) {
    if (dequantize_8(p, xt, x, st, scale, zp, yt, y)) return;
    for (int64_t o = 0, e = 0; o < p->outer; o++)
        for (int64_t l = 0; l < p->len; l++)
            for (int64_t i = 0; i < p->inner; i++, e++) {
                const int64_t q = qidx(p, o, l, i);
                const int64_t z = zp ? ld_int(xt, zp, q) : 0;
                /* in float32 (the scale's precision or more), as the reference's (x - zp) * scale */
                const float v = (float)(ld_int(xt, x, e) - z) * (float)ld_float(st, scale, q);
                st_float(yt, y, e, v);
            }
}

void cuvil_quantize_t(const cuvil_quant_params *p, int xt, const void *x, int st, const void *scale, const void *zp,
                      int yt, void *y) {
    if (quantize_8(p, xt, x, st, scale, zp, yt, y)) return;
    double lo, hi;
    int_range(yt, &lo, &hi);
    for (int64_t o = 0, e = 0; o < p->outer; o++)
        for (int64_t l = 0; l < p->len; l++)
            for (int64_t i = 0; i < p->inner; i++, e++) {
                const int64_t q = qidx(p, o, l, i);
                const float r = nearbyintf((float)ld_float(xt, x, e) / (float)ld_float(st, scale, q));
                double v = (double)r + (double)(zp ? ld_int(yt, zp, q) : 0);
                v = v != v ? 0 : v < lo ? lo : v > hi ? hi : v;
                st_int(yt, y, e, (int64_t)v);
            }
}

/* The range of x with 0 in it, as one running max and min give it: vmaxps(x, m) is x > m ? x :
 * m, vminps(x, m) x < m ? x : m (a NaN never wins; a zero result is the starting +0). */
static void range0(int64_t n, const float *x, float *omx, float *omn) {
    float mx = 0.0f, mn = 0.0f;
    int64_t i = 0;
#if defined(__AVX__)
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_max_ps(v0, a0), a1 = _mm256_max_ps(v1, a1);
        b0 = _mm256_min_ps(v0, b0), b1 = _mm256_min_ps(v1, b1);
    }
    float l[4][8];
    _mm256_storeu_ps(l[0], a0), _mm256_storeu_ps(l[1], a1), _mm256_storeu_ps(l[2], b0), _mm256_storeu_ps(l[3], b1);
    for (int j = 0; j < 8; j++) {
        mx = l[0][j] > mx ? l[0][j] : mx, mx = l[1][j] > mx ? l[1][j] : mx;
        mn = l[2][j] < mn ? l[2][j] : mn, mn = l[3][j] < mn ? l[3][j] : mn;
    }
#endif
    for (; i < n; i++) {
        mx = x[i] > mx ? x[i] : mx;
        mn = x[i] < mn ? x[i] : mn;
    }
    *omx = mx, *omn = mn;
}

#define DQ_CHUNKS 64   /* (the stack frame stays small: test runtime_stack_usage) */
typedef struct dq_job {
    const float *x;
    uint8_t *y;
    float s, zi, r;   /* r: 1 / s where s is a finite normal float, else 0 (division only) */
    int64_t n, per;
    float mx[DQ_CHUNKS], mn[DQ_CHUNKS];   /* per chunk */
} dq_job;

static void dq_range(void *vctx, int64_t t, int tid) {
    dq_job *j = vctx;
    const int64_t b = t * j->per, e = b + j->per < j->n ? b + j->per : j->n;
    (void)tid;
    range0(e - b, j->x + b, &j->mx[t], &j->mn[t]);
}

/* y = clamp(rint(x / s) + zi, 0, 255) (NaN: 0), ONNX's DynamicQuantizeLinear. With AVX2 or
 * AVX-512, t = x * r (r = 1 / s rounded) stands for x / s where that gives the same integer:
 * t and the rounded quotient q differ by at most 3 ulp of t (one rounding in r, one in the
 * product, one in q), under 2^-21 |t|, so unless a half-integer lies within that of t they
 * round to the same integer. A vector with a lane that near (or with |t| <= 1024 unknown:
 * beyond it both clamp alike) takes the division. vdivps was most of the quantization's time
 * (3% of BERT-base's int8 run). */
static void dq_quant(void *vctx, int64_t b, int64_t e, int tid) {
    const dq_job *j = vctx;
    const float s = j->s, zi = j->zi;
    const float *restrict x = j->x;   /* (locals: a byte store through j->y could alias j, and the loop would not vectorise) */
    uint8_t *restrict y = j->y;
    (void)tid;
    int64_t i = b;
#if defined(__AVX512F__)
    if (j->r != 0.0f) {
        const __m512 vs = _mm512_set1_ps(s), vr = _mm512_set1_ps(j->r), vz = _mm512_set1_ps(zi), half = _mm512_set1_ps(0.5f);
        const __m512 tol = _mm512_set1_ps(0x1p-21f), lim = _mm512_set1_ps(1024.0f), top = _mm512_set1_ps(255.0f);
        const __m512 zero = _mm512_setzero_ps();
        for (; i + 16 <= e; i += 16) {
            const __m512 xv = _mm512_loadu_ps(x + i), t = _mm512_mul_ps(xv, vr);
            __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512 at = _mm512_abs_ps(t), off = _mm512_abs_ps(_mm512_sub_ps(_mm512_abs_ps(_mm512_sub_ps(t, n)), half));
            if (_mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(at, lim, _CMP_LE_OQ), off, _mm512_mul_ps(tol, at), _CMP_LE_OQ))
                n = _mm512_roundscale_ps(_mm512_div_ps(xv, vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(n, vz), zero), top);   /* (max(NaN, 0): 0) */
            _mm_storeu_si128((__m128i *)(void *)(y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
        }
    }
#elif defined(__AVX2__)
    if (j->r != 0.0f) {
        const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(j->r), vz = _mm256_set1_ps(zi), half = _mm256_set1_ps(0.5f);
        const __m256 tol = _mm256_set1_ps(0x1p-21f), lim = _mm256_set1_ps(1024.0f), top = _mm256_set1_ps(255.0f);
        const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
        for (; i + 8 <= e; i += 8) {
            const __m256 xv = _mm256_loadu_ps(x + i), t = _mm256_mul_ps(xv, vr);
            __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m256 at = _mm256_andnot_ps(sign, t);
            const __m256 off = _mm256_andnot_ps(sign, _mm256_sub_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(t, n)), half));
            const __m256 near = _mm256_and_ps(_mm256_cmp_ps(at, lim, _CMP_LE_OQ), _mm256_cmp_ps(off, _mm256_mul_ps(tol, at), _CMP_LE_OQ));
            if (_mm256_movemask_ps(near)) n = _mm256_round_ps(_mm256_div_ps(xv, vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(n, vz), zero), top);   /* (max(NaN, 0): 0) */
            const __m256i q = _mm256_cvttps_epi32(v);
            const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            _mm_storel_epi64((__m128i *)(void *)(y + i), _mm_packus_epi16(w, w));
        }
    }
#endif
    for (; i < e; i++) {
        float v = nearbyintf(x[i] / s) + zi;
        v = v >= 0.0f ? v : 0.0f;   /* (NaN: 0) */
        v = v <= 255.0f ? v : 255.0f;
        y[i] = (uint8_t)v;
    }
}

/* Both passes split over the threads: the range per chunk (max and min come out the same
 * whatever the chunks), then the quantization. */
void cuvil_dynamic_quantize(int64_t n, const float *x, uint8_t *y, float *scale, uint8_t *zp) {
    dq_job j;
    j.x = x, j.y = y, j.n = n;
    const int th = cuvil_threads();
    const int64_t want = n >= 32768 && th > 1 ? (2 * th < DQ_CHUNKS ? 2 * th : DQ_CHUNKS) : 1;
    j.per = n > 0 ? ((n + want - 1) / want + 63) / 64 * 64 : 1;
    const int64_t chunks = n > 0 ? (n + j.per - 1) / j.per : 0;
    float mx = 0.0f, mn = 0.0f;
    if (chunks <= 1) {
        range0(n, x, &mx, &mn);
    } else {
        cuvil_parallel_for(chunks, dq_range, &j);
        for (int64_t c = 0; c < chunks; c++) {
            mx = j.mx[c] > mx ? j.mx[c] : mx;
            mn = j.mn[c] < mn ? j.mn[c] : mn;
        }
    }
    const float s = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;
    float z = 0.0f - mn / s;
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    const float zi = nearbyintf(z);
    j.s = s, j.zi = zi;
    j.r = isfinite(s) && s >= 0x1p-126f ? 1.0f / s : 0.0f;
    cuvil_parallel_range(n, 16384, 64, dq_quant, &j);
    *scale = s;
    *zp = (uint8_t)zi;
}

static int64_t mm_acc(int64_t M, int64_t N, int64_t K, int64_t m, int64_t nn, int at, const void *a, int bt, const void *b,
                      const void *azp, int64_t az_n, const void *bzp, int64_t bz_n) {
    const int64_t za = azp ? ld_int(at, azp, az_n > 1 ? m : 0) : 0, zb = bzp ? ld_int(bt, bzp, bz_n > 1 ? nn : 0) : 0;
    int64_t acc = 0;
    (void)M;
    for (int64_t k = 0; k < K; k++) acc += (ld_int(at, a, m * K + k) - za) * (ld_int(bt, b, k * N + nn) - zb);
    return acc;
}

void cuvil_matmul_integer(int64_t batch, int64_t M, int64_t N, int64_t K, int at, const void *a, int64_t a_bs, int bt,
                          const void *b, int64_t b_bs, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                          int32_t *y) {
    const size_t as = type_size(at), bs = type_size(bt);
    for (int64_t q = 0; q < batch; q++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t nn = 0; nn < N; nn++)
                y[(q * M + m) * N + nn] = (int32_t)(uint32_t)mm_acc(M, N, K, m, nn, at, (const char *)a + (size_t)(q * a_bs) * as,
                                                                    bt, (const char *)b + (size_t)(q * b_bs) * bs, azp, az_n,
                                                                    bzp, bz_n);
}

void cuvil_qlinear_matmul(int64_t batch, int64_t M, int64_t N, int64_t K, int at, const void *a, int64_t a_bs, int bt,
                          const void *b, int64_t b_bs, const void *azp, int64_t az_n, const void *bzp, int64_t bz_n,
                          int sst, const void *a_scale, const void *b_scale, int64_t b_sn, const void *y_scale, int yt,
                          const void *yzp, void *y) {
    const size_t as = type_size(at), bs = type_size(bt);
    double lo, hi;
    int_range(yt, &lo, &hi);
    for (int64_t nn = 0; nn < N; nn++) {
        /* the reference's a_scale * b_scale / y_scale, each step rounded to the scales' type */
        const float ab = (float)ld_float(sst, a_scale, 0) * (float)ld_float(sst, b_scale, b_sn > 1 ? nn : 0);
        const float ab_r = sst == CUVIL_T_F16 ? cuvil_f16_to_f32(cuvil_f32_to_f16(ab)) : ab;
        const float f = ab_r / (float)ld_float(sst, y_scale, 0);
        const double fs = sst == CUVIL_T_F16 ? (double)cuvil_f16_to_f32(cuvil_f32_to_f16(f)) : (double)f;
        for (int64_t q = 0; q < batch; q++)
            for (int64_t m = 0; m < M; m++) {
                const int64_t acc = mm_acc(M, N, K, m, nn, at, (const char *)a + (size_t)(q * a_bs) * as, bt,
                                           (const char *)b + (size_t)(q * b_bs) * bs, azp, az_n, bzp, bz_n);
                double v = nearbyint((double)acc * fs + (double)(yzp ? ld_int(yt, yzp, 0) : 0));
                v = v < lo ? lo : v > hi ? hi : v;
                st_int(yt, y, (q * M + m) * N + nn, (int64_t)v);
            }
    }
}

/* QLinearAdd: for constant types (inlined per combination, a loop the compiler vectorises) */
static inline __attribute__((always_inline)) void qadd_loop(int64_t n, int at, const void *restrict a, int32_t za, float ra, int bt,
                                                            const void *restrict b, int32_t zb, float rb, int yt, int32_t zy,
                                                            float lo, float hi, void *restrict y) {
    const float magic = 12582912.0f;
    for (int64_t i = 0; i < n; i++) {
        const int32_t av = at == CUVIL_T_U8 ? ((const uint8_t *)a)[i] : ((const int8_t *)a)[i];
        const int32_t bv = bt == CUVIL_T_U8 ? ((const uint8_t *)b)[i] : ((const int8_t *)b)[i];
        float f = (float)(av - za) * ra + (float)(bv - zb) * rb;
        f = f >= lo ? f : lo;
        f = f <= hi ? f : hi;
        const int32_t q = (int32_t)((f + magic) - magic) + zy;
        if (yt == CUVIL_T_U8) ((uint8_t *)y)[i] = (uint8_t)q;
        else ((int8_t *)y)[i] = (int8_t)q;
    }
}

void cuvil_qadd(int64_t n, int at, const void *a, const float *as, const void *az, int bt, const void *b, const float *bs,
                const void *bz, const float *ys, int yt, const void *yz, int32_t lo, int32_t hi, void *y) {
    const float ra = as[0] / ys[0], rb = bs[0] / ys[0];
    const int32_t za = az ? (int32_t)ld_int(at, az, 0) : 0, zb = bz ? (int32_t)ld_int(bt, bz, 0) : 0;
    const int32_t zy = yz ? (int32_t)ld_int(yt, yz, 0) : 0;
    float flo = (float)(lo - zy), fhi = (float)(hi - zy);
    if (ra != ra || rb != rb) flo = fhi = 0.0f;   /* (a NaN scale: the zero point, not undefined behaviour) */
    const int U = CUVIL_T_U8, S = CUVIL_T_I8;
#define QADD(a_, b_, y_) qadd_loop(n, a_, a, za, ra, b_, b, zb, rb, y_, zy, flo, fhi, y)
    if (yt == U) {
        if (at == U && bt == U) QADD(U, U, U);
        else if (at == U) QADD(U, S, U);
        else if (bt == U) QADD(S, U, U);
        else QADD(S, S, U);
    } else {
        if (at == U && bt == U) QADD(U, U, S);
        else if (at == U) QADD(U, S, S);
        else if (bt == U) QADD(S, U, S);
        else QADD(S, S, S);
    }
#undef QADD
}

/* ===== Window functions =================================================================== */
int cuvil_window_t(int kind, int periodic, int t, int st, const void *size, int64_t hi, int64_t *n_out, void *y) {
    const int64_t n = ld_int(st, size, 0);
    if (n < 0 || n > hi) return 1;
    *n_out = n;
    const double N1 = periodic ? (double)n : (double)n - 1.0, pi = 3.14159265358979323846;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (kind == 0) {
            const double s = sin((double)i * pi / N1);
            v = s * s;
        } else if (kind == 1) {
            v = 25.0 / 46.0 - cos((double)i * pi * 2.0 / N1) * (1.0 - 25.0 / 46.0);
        } else {
            v = cos((double)i * (pi * 2.0) / N1) * -0.5 + cos((double)i * (pi * 4.0) / N1) * 0.08 + 0.42;
        }
        if (is_float_t(t)) st_float(t, y, i, v);
        else if (t == CUVIL_T_BOOL) ((uint8_t *)y)[i] = v != 0;
        else st_int(t, y, i, sat_i64(v));
    }
    return 0;
}
