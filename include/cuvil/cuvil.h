/*
 * cuvil.h -- the Cuvil compiler API.
 *
 * Cuvil compiles an ONNX model into native code: a shared library (or static archive, or C
 * sources) exporting the ABI of cuvil_model.h. The command-line tools are thin wrappers over
 * these calls.
 *
 *     cuvil_ctx *ctx = NULL;
 *     if (cuvil_ctx_create(&ctx) != CUVIL_OK) return 1;
 *     cuvil_options o;
 *     cuvil_options_init(&o);
 *     o.opt_level = 2;
 *     cuvil_options_set_dim(ctx, &o, "batch", 4);
 *     if (cuvil_compile_file(ctx, "resnet18.onnx", &o, "resnet18.so") != CUVIL_OK)
 *         fprintf(stderr, "%s\n", cuvil_errmsg(ctx));
 *     cuvil_ctx_destroy(ctx);
 *
 * Every call returns a cuvil_status; on failure the message is kept on the context and read
 * back with cuvil_errmsg(). A message names the node, the op and the offending value.
 */
#ifndef CUVIL_H
#define CUVIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuvil/cuvil_model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUVIL_MAX_DIM_BINDINGS 16
#define CUVIL_MAX_DISABLED_PASSES 16

const char *cuvil_status_str(cuvil_status s);
const char *cuvil_version(void);

/* What cuvil_compile_file() writes. */
typedef enum cuvil_emit {
    CUVIL_EMIT_SO = 0,   /* shared library + header beside it */
    CUVIL_EMIT_A,        /* static archive + header beside it */
    CUVIL_EMIT_C,        /* a directory: C sources, weights, runtime, header, Makefile */
    CUVIL_EMIT_IR,       /* CIR text after the pipeline */
    CUVIL_EMIT_DOT       /* CIR as a Graphviz digraph */
} cuvil_emit;

typedef struct cuvil_dim_binding {
    const char *name;
    int64_t value;
} cuvil_dim_binding;

typedef struct cuvil_options {
    cuvil_emit emit;
    const char *target;          /* NULL: the host's ISA ("x86_64-avx2" or "generic") */
    int opt_level;               /* 0..3, default 2 */
    const char *name;            /* symbol prefix; NULL: derived from the output file name */
    int n_dims;
    cuvil_dim_binding dims[CUVIL_MAX_DIM_BINDINGS];   /* --dim NAME=N; unbound dims are 1 */
    int n_disabled;
    const char *disabled_passes[CUVIL_MAX_DISABLED_PASSES];
    const char *dump_after;      /* pass name or "all": print the IR after it to dump_file */
    FILE *dump_file;             /* NULL: stderr */
    const char *cc;              /* C compiler; NULL: $CC, else the one Cuvil was built with */
    int keep_sources;            /* keep the generated C next to a .so (debugging) */
    int verbose;                 /* print compiler commands and pass timings to stderr */
} cuvil_options;

typedef struct cuvil_ctx cuvil_ctx;

cuvil_status cuvil_ctx_create(cuvil_ctx **out);
void cuvil_ctx_destroy(cuvil_ctx *ctx);
/* The message of the last failed call on ctx ("" if none); owned by ctx. */
const char *cuvil_errmsg(const cuvil_ctx *ctx);

void cuvil_options_init(cuvil_options *o);

/* Compiles the ONNX model at model_path into output_path (see cuvil_emit). On failure nothing
 * is left at output_path. */
cuvil_status cuvil_compile_file(cuvil_ctx *ctx, const char *model_path, const cuvil_options *o,
                                const char *output_path);

/* ===== Tensor files (used by cuvil-run and the tests) ============================== */
/* A dense host tensor; data is malloc'd and owned by the struct. */
typedef struct cuvil_host_tensor {
    cuvil_dtype dtype;
    int ndim;
    int64_t dims[CUVIL_MAX_DIMS];
    void *data;
    size_t nbytes;
    char *name;        /* the TensorProto's name for .pb files, else NULL; malloc'd */
} cuvil_host_tensor;

/* Size in bytes of one element of dtype, 0 for unknown/variable-size types. */
size_t cuvil_dtype_size(cuvil_dtype dtype);
const char *cuvil_dtype_name(cuvil_dtype dtype);

/* Reads a .npy file (little-endian, C order; fortran_order is refused) or an ONNX TensorProto
 * .pb file (chosen by content, not by extension) into *out. On failure writes a one-line
 * message naming the file and the problem into err (errlen bytes) and returns a status. */
cuvil_status cuvil_tensor_read(const char *path, cuvil_host_tensor *out, char *err,
                               size_t errlen);
/* Writes t as .npy atomically (temp file + rename): on failure no file is left at path. */
cuvil_status cuvil_npy_write(const char *path, const cuvil_host_tensor *t, char *err,
                             size_t errlen);
void cuvil_host_tensor_free(cuvil_host_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* CUVIL_H */
