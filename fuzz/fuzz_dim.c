/* fuzz_dim.c -- libFuzzer target: bytes as a program that builds dim expressions (ir/dim.h),
 * checked by dim_oracle.h: the canonical expression equals the plain arithmetic at the
 * corners of the symbols' ranges and at random points inside them, stays inside its bounds,
 * and commuted operands give the same expression. */
#include "dim_oracle.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (dim_oracle_run(data, size)) abort();
    return 0;
}
