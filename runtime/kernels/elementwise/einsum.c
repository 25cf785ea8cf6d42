/*
 * einsum.c -- ONNX Einsum as a naive loop (cuvil_einsum_t): for every output element, the
 * sum over the summed labels of the operands' product, each operand read through its stride
 * per label (a repeated label's strides added: the diagonal). Floats accumulate in double;
 * integers in 64 bits, wrapping as two's complement.
 */
#include "../rt_int.h"

static double get_f(int type, const void *x, int64_t i) {
    return type == CUVIL_T_F64 ? ((const double *)x)[i] : ((const float *)x)[i];
}

static uint64_t get_i(int type, const void *x, int64_t i) {
    switch (type) {
    case CUVIL_T_I32: return (uint64_t)(int64_t)((const int32_t *)x)[i];
    case CUVIL_T_U32: return ((const uint32_t *)x)[i];
    default: return ((const uint64_t *)x)[i];
    }
}

void cuvil_einsum_t(int type, int n_in, int n_lab, int n_out_lab, const int64_t *sizes, const int64_t *strides,
                    const void *const *x, void *y) {
    const int is_float = type == CUVIL_T_F32 || type == CUVIL_T_F64;
    int64_t n_out = 1, n_sum = 1;
    for (int l = 0; l < n_lab; l++) {
        if (l < n_out_lab) n_out *= sizes[l];
        else n_sum *= sizes[l];
    }
    for (int64_t o = 0; o < n_out; o++) {
        int64_t base[CUVIL_EINSUM_MAX_IN] = {0};
        for (int64_t r = o, l = n_out_lab - 1; l >= 0; l--) {
            const int64_t i = r % sizes[l];
            r /= sizes[l];
            for (int k = 0; k < n_in; k++) base[k] += i * strides[k * CUVIL_EINSUM_MAX_LAB + l];
        }
        double accf = 0.0;
        uint64_t acci = 0;
        for (int64_t s = 0; s < n_sum; s++) {
            int64_t off[CUVIL_EINSUM_MAX_IN];
            for (int k = 0; k < n_in; k++) off[k] = base[k];
            for (int64_t r = s, l = n_lab - 1; l >= n_out_lab; l--) {
                const int64_t i = r % sizes[l];
                r /= sizes[l];
                for (int k = 0; k < n_in; k++) off[k] += i * strides[k * CUVIL_EINSUM_MAX_LAB + l];
            }
            if (is_float) {
                double p = 1.0;
                for (int k = 0; k < n_in; k++) p *= get_f(type, x[k], off[k]);
                accf += p;
            } else {
                uint64_t p = 1;
                for (int k = 0; k < n_in; k++) p *= get_i(type, x[k], off[k]);
                acci += p;
            }
        }
        switch (type) {
        case CUVIL_T_F32: ((float *)y)[o] = (float)accf; break;
        case CUVIL_T_F64: ((double *)y)[o] = accf; break;
        case CUVIL_T_I32: case CUVIL_T_U32: ((uint32_t *)y)[o] = (uint32_t)acci; break;
        default: ((uint64_t *)y)[o] = acci; break;
        }
    }
}
