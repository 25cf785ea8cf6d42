/* onnx_int.h -- private interface of the ONNX frontend. */
#ifndef CUVIL_ONNX_INT_H
#define CUVIL_ONNX_INT_H

#include "ir/cir.h"
#include "onnx.pb-c.h"

/* Loads the ONNX model at path into a new graph. Symbolic dims are bound from o->dims (default
 * 1). Every op the compiler does not know is reported at once. On failure returns a status
 * with the message on ctx and *out = NULL. */
cuvil_status cuvil_onnx_load(cuvil_ctx *ctx, const char *path, const cuvil_options *o,
                             cir_graph **out);

/* Converts a TensorProto's data (raw_data, typed fields, or external data relative to
 * model_dir; model_dir NULL refuses external data) into dense little-endian bytes allocated
 * in arena. `what` names the tensor in messages. Sets *dtype, *ndim, dims, *data. */
cuvil_status cuvil_onnx_tensor_data(cuvil_ctx *ctx, cuvil_arena *arena, const Onnx__TensorProto *t,
                                    const char *model_dir, const char *what, cuvil_dtype *dtype,
                                    int *ndim, int64_t dims[CUVIL_MAX_DIMS], void **data);

/* The decoder behind cuvil_onnx_tensor_data, shared with the .pb reader of cuvil_tensor_read:
 * data must be in raw_data, the one typed field the spec names for its dtype, or (with
 * model_dir) an external file. Malformed tensors get status `malformed`; the data is allocated
 * with alloc(alloc_arg, nbytes). */
cuvil_status cuvil_onnx_tensor_decode(cuvil_ctx *ctx, const Onnx__TensorProto *t, const char *model_dir,
                                      const char *what, cuvil_status malformed, void *(*alloc)(void *, size_t),
                                      void *alloc_arg, cuvil_dtype *dtype, int *ndim, int64_t dims[CUVIL_MAX_DIMS],
                                      void **data, size_t *nbytes);

#endif
