/* dtype.c -- CIR's element types (cir_dtype, cir.h): sizes, names, classes and the mapping to
 * the public (ABI) numbering of cuvil_dtype. */
#include "ir/cir.h"

#include <string.h>

static const struct {
    const char *name, *short_name;
    size_t size;
    cuvil_dtype pub;
    unsigned char is_float, is_int, is_signed;
} table[CIR_DTYPE__COUNT] = {
    [CIR_UNDEF] = {"undefined", "?", 0, CUVIL_DTYPE_UNDEFINED, 0, 0, 0},
    [CIR_F32] = {"float32", "f32", 4, CUVIL_DTYPE_FLOAT32, 1, 0, 1},
    [CIR_F64] = {"float64", "f64", 8, CUVIL_DTYPE_FLOAT64, 1, 0, 1},
    [CIR_F16] = {"float16", "f16", 2, CUVIL_DTYPE_FLOAT16, 1, 0, 1},
    [CIR_BF16] = {"bfloat16", "bf16", 2, CUVIL_DTYPE_BFLOAT16, 1, 0, 1},
    [CIR_I8] = {"int8", "i8", 1, CUVIL_DTYPE_INT8, 0, 1, 1},
    [CIR_I16] = {"int16", "i16", 2, CUVIL_DTYPE_INT16, 0, 1, 1},
    [CIR_I32] = {"int32", "i32", 4, CUVIL_DTYPE_INT32, 0, 1, 1},
    [CIR_I64] = {"int64", "i64", 8, CUVIL_DTYPE_INT64, 0, 1, 1},
    [CIR_U8] = {"uint8", "u8", 1, CUVIL_DTYPE_UINT8, 0, 1, 0},
    [CIR_U16] = {"uint16", "u16", 2, CUVIL_DTYPE_UINT16, 0, 1, 0},
    [CIR_U32] = {"uint32", "u32", 4, CUVIL_DTYPE_UINT32, 0, 1, 0},
    [CIR_U64] = {"uint64", "u64", 8, CUVIL_DTYPE_UINT64, 0, 1, 0},
    [CIR_BOOL] = {"bool", "bool", 1, CUVIL_DTYPE_BOOL, 0, 0, 0},
    [CIR_I4] = {"int4", "i4", 1, CUVIL_DTYPE_INT4, 0, 1, 1},
    [CIR_U4] = {"uint4", "u4", 1, CUVIL_DTYPE_UINT4, 0, 1, 0},
};

/* the runtime's typed kernels take CIR's numbering */
_Static_assert((int)CIR_F32 == (int)CUVIL_T_F32 && (int)CIR_F64 == (int)CUVIL_T_F64 && (int)CIR_F16 == (int)CUVIL_T_F16 && (int)CIR_BF16 == (int)CUVIL_T_BF16 &&
                   (int)CIR_I8 == (int)CUVIL_T_I8 && (int)CIR_I16 == (int)CUVIL_T_I16 && (int)CIR_I32 == (int)CUVIL_T_I32 && (int)CIR_I64 == (int)CUVIL_T_I64 &&
                   (int)CIR_U8 == (int)CUVIL_T_U8 && (int)CIR_U16 == (int)CUVIL_T_U16 && (int)CIR_U32 == (int)CUVIL_T_U32 && (int)CIR_U64 == (int)CUVIL_T_U64 &&
                   (int)CIR_BOOL == (int)CUVIL_T_BOOL && (int)CIR_I4 == (int)CUVIL_T_I4 && (int)CIR_U4 == (int)CUVIL_T_U4,
               "cir_dtype and the runtime's CUVIL_T_* must agree");

static bool valid(cir_dtype t) { return (unsigned)t < CIR_DTYPE__COUNT; }

size_t cir_dtype_size(cir_dtype t) { return valid(t) ? table[t].size : 0; }
const char *cir_dtype_name(cir_dtype t) { return valid(t) ? table[t].name : "unknown"; }
const char *cir_dtype_short(cir_dtype t) { return valid(t) ? table[t].short_name : "?"; }
bool cir_dtype_is_float(cir_dtype t) { return valid(t) && table[t].is_float; }
bool cir_dtype_is_int(cir_dtype t) { return valid(t) && table[t].is_int; }
bool cir_dtype_is_signed(cir_dtype t) { return valid(t) && table[t].is_signed; }

cir_dtype cir_dtype_from_public(cuvil_dtype t) {
    for (int i = 1; i < CIR_DTYPE__COUNT; i++)
        if (table[i].pub == t) return (cir_dtype)i;
    return CIR_UNDEF;
}

cuvil_dtype cir_dtype_to_public(cir_dtype t) { return valid(t) ? table[t].pub : CUVIL_DTYPE_UNDEFINED; }

cir_dtype cir_dtype_by_name(const char *name) {
    for (int i = 1; i < CIR_DTYPE__COUNT && name; i++)
        if (!strcmp(table[i].name, name) || !strcmp(table[i].short_name, name)) return (cir_dtype)i;
    return CIR_UNDEF;
}

const char *cir_dtype_public_symbol(cir_dtype t) {
    static const char *const names[CIR_DTYPE__COUNT] = {
        [CIR_UNDEF] = "CUVIL_DTYPE_UNDEFINED", [CIR_F32] = "CUVIL_DTYPE_FLOAT32", [CIR_F64] = "CUVIL_DTYPE_FLOAT64",
        [CIR_F16] = "CUVIL_DTYPE_FLOAT16",     [CIR_BF16] = "CUVIL_DTYPE_BFLOAT16", [CIR_I8] = "CUVIL_DTYPE_INT8",
        [CIR_I16] = "CUVIL_DTYPE_INT16",       [CIR_I32] = "CUVIL_DTYPE_INT32",   [CIR_I64] = "CUVIL_DTYPE_INT64",
        [CIR_U8] = "CUVIL_DTYPE_UINT8",        [CIR_U16] = "CUVIL_DTYPE_UINT16",  [CIR_U32] = "CUVIL_DTYPE_UINT32",
        [CIR_U64] = "CUVIL_DTYPE_UINT64",      [CIR_BOOL] = "CUVIL_DTYPE_BOOL",   [CIR_I4] = "CUVIL_DTYPE_INT4",
        [CIR_U4] = "CUVIL_DTYPE_UINT4",
    };
    return valid(t) ? names[t] : "CUVIL_DTYPE_UNDEFINED";
}
