/* quant_int.h -- Cuvil's own int8 quantizer (cuvil-compile --quantize int8 --calibrate DIR):
 * what the driver (src/quantize.c) and the pass (pass_quantize.c) share.
 *
 * The pass picks the points to quantize on the float graph after BatchNorm folding: the
 * float32 input of every convolution (depthwise ones too), MatMul and Gemm with constant
 * weights, and each one's result (after the Relu or Clip that alone reads it), unless that
 * result is a graph output; then the result of each Add both of whose inputs are points. Nodes named by --keep-float (by node name or op) are left
 * out. An LSTM (float32 input, constant weights, layout 0) takes int8 weights per gate row and
 * quantizes X and h as it runs (rnn quant 1, as ONNX Runtime's quantize_dynamic writes it):
 * no point, no calibration. The driver compiles the float model once with every point as an extra graph output
 * (QUANT_CALIBRATE), runs it on the calibration sets, and turns the values seen into a scale
 * and a zero point per point (QUANT_APPLY): the pass then puts a QuantizeLinear/
 * DequantizeLinear pair (uint8, per tensor) on each point and a DequantizeLinear of int8
 * weights (per output channel, symmetric) before each chosen node, and pass fold_qdq, which
 * runs right after it, folds them into the integer kernels as it folds ONNX Runtime's QDQ form.
 * Both compiles build the graph from the same file with the same passes, so the points come
 * out the same; the apply pass checks their names against the calibration's. */
#ifndef CUVIL_QUANT_INT_H
#define CUVIL_QUANT_INT_H

#include "ir/cir.h"

/* QUANT_INT4W: --quantize int4-weights, no calibration: every MatMul and Gemm with constant
 * 2-D weights becomes matmul_nbits on 4-bit weights (blocks of 32 along K, asymmetric, as
 * ONNX Runtime's MatMulNBitsQuantizer writes them) */
enum { QUANT_CALIBRATE = 1, QUANT_APPLY = 2, QUANT_INT4W = 3 };

typedef struct cuvil_qpoint {
    const char *name;          /* the value's name (the graph's arena) */
    int dims_fixed;            /* (its element count varies with the run: counted per run) */
    double lo, hi;             /* the range seen (calibration), then the one quantized */
    uint64_t count;
    uint64_t *hist;            /* percentile / entropy: 2048 bins of |x| over [0, max(|lo|, |hi|)] */
    float scale;
    uint8_t zero_point;
} cuvil_qpoint;

typedef struct cuvil_quant_state {
    int mode;                  /* QUANT_CALIBRATE or QUANT_APPLY */
    const cuvil_options *o;    /* --keep-float */
    cuvil_qpoint *pts;         /* the apply pass's: the calibration's points, in order */
    int n_pts;
    int n_model_outputs;       /* calibrate: the graph's own outputs, before the points */
    char **names;              /* calibrate: the points' names, in order (malloc'd) */
    int n_names;
    /* what the pass did, for the report */
    int n_nodes, n_weights, n_kept;
    int n_lstm;                /* LSTMs on 8-bit weights (X and h quantized as they run) */
    char kept[512];            /* the first nodes left in float32 and why */
} cuvil_quant_state;

#endif
