/* Element types: sizes and names of cuvil_dtype (ONNX TensorProto.DataType numbering). */
#include "cuvil/cuvil.h"

/* Indexed by the enum value; the gaps are ONNX types Cuvil does not know (complex, ...). */
static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {
    [CUVIL_DTYPE_UNDEFINED] = {"undefined", 0},
    [CUVIL_DTYPE_FLOAT32] = {"float32", 4},
    [CUVIL_DTYPE_UINT8] = {"uint8", 1},
    [CUVIL_DTYPE_INT8] = {"int8", 1},
    [CUVIL_DTYPE_UINT16] = {"uint16", 2},
    [CUVIL_DTYPE_INT16] = {"int16", 2},
    [CUVIL_DTYPE_INT32] = {"int32", 4},
    [CUVIL_DTYPE_INT64] = {"int64", 8},
    [CUVIL_DTYPE_STRING] = {"string", 0},   /* variable size */
    [CUVIL_DTYPE_BOOL] = {"bool", 1},
    [CUVIL_DTYPE_FLOAT16] = {"float16", 2},
    [CUVIL_DTYPE_FLOAT64] = {"float64", 8},
    [CUVIL_DTYPE_UINT32] = {"uint32", 4},
    [CUVIL_DTYPE_UINT64] = {"uint64", 8},
    [CUVIL_DTYPE_BFLOAT16] = {"bfloat16", 2},
    [CUVIL_DTYPE_UINT4] = {"uint4", 1},   /* one element per byte in memory */
    [CUVIL_DTYPE_INT4] = {"int4", 1},
};

#define DTYPE_TABLE_LEN (sizeof dtype_table / sizeof dtype_table[0])

size_t cuvil_dtype_size(cuvil_dtype dtype) {
    if ((unsigned)dtype >= DTYPE_TABLE_LEN)
        return 0;
    return dtype_table[dtype].size;
}

const char *cuvil_dtype_name(cuvil_dtype dtype) {
    if ((unsigned)dtype >= DTYPE_TABLE_LEN || dtype_table[dtype].name == NULL)
        return "unknown";
    return dtype_table[dtype].name;
}
