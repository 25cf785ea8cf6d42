/* fuzz_model.c -- libFuzzer target: arbitrary bytes as an ONNX model through load, verify,
 * passes and codegen (fuzz_common.h). Seeds: fuzz/make_seeds.py. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the last byte picks the opt level, so both pipelines are covered */
    return fuzz_compile(data, size, size ? data[size - 1] % 4 : 2);
}
