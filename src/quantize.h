/* quantize.h -- the int8 quantizer's driver (quantize.c), called by the compiler driver. */
#ifndef CUVIL_QUANTIZE_H
#define CUVIL_QUANTIZE_H

#include "frontend/onnx/onnx_int.h"
#include "ir/cir.h"

/* cuvil.c's passes-then-output for a built graph (exported for the quantizer). */
cuvil_status cuvil_compile_cir(cuvil_ctx *ctx, cir_graph *g, const cuvil_options *o, const char *model_path,
                               const char *target, const char *prefix, const char *output);
/* --quantize int8: calibrates model on o->calibrate and compiles it quantized into output. */
cuvil_status cuvil_quantize_compile(cuvil_ctx *ctx, const cuvil_onnx_model *model, const cuvil_options *o,
                                    const char *model_path, const char *target, const char *prefix, const char *output);

/* --quantize int4-weights: g compiled with its MatMul/Gemm weights in 4 bits (a note on stderr). */
cuvil_status cuvil_int4_weights_compile(cuvil_ctx *ctx, cir_graph *g, const cuvil_options *o, const char *model_path,
                                        const char *target, const char *prefix, const char *output);

#endif
