/* toolchain_int.h -- invoking the C compiler on generated code. */
#ifndef CUVIL_TOOLCHAIN_INT_H
#define CUVIL_TOOLCHAIN_INT_H

#include "codegen/codegen_int.h"

/* "x86_64-avx2" when the host has AVX2+FMA, else "generic". */
const char *cuvil_host_target(void);
/* OK when target is in the target table and, with need_runtime (linking a library), this build
 * has a runtime for it; else an error listing the ones there are. */
cuvil_status cuvil_check_target(cuvil_ctx *ctx, const char *target, bool need_runtime);
/* The text of cuvil_model.h (malloc'd), pasted into every model header. */
cuvil_status cuvil_read_abi_header(cuvil_ctx *ctx, char **text);
/* Refuses an output Cuvil must not write (see cuvil_compile_file in cuvil.h): the model
 * itself, a path (or header path) that exists and was not written by Cuvil, a non-empty folder
 * without Cuvil's manifest. Run before any work, and again just before renaming into place. */
cuvil_status cuvil_check_output(cuvil_ctx *ctx, const char *model, const cuvil_options *o, const char *output);
/* Compiles gen into a shared library (o->emit SO) or static archive (A) at output, with the
 * header beside it; nothing is left at output on failure, nor any build folder. */
cuvil_status cuvil_build_library(cuvil_ctx *ctx, const cg_output *gen, const char *prefix, const char *target,
                                 const cuvil_options *o, const char *model, const char *output);
/* Writes a folder with the sources, the runtime, a Makefile and Cuvil's manifest (--emit c). */
cuvil_status cuvil_emit_sources(cuvil_ctx *ctx, const cg_output *gen, const char *prefix, const char *target,
                                const cuvil_options *o, const char *model, const char *output);

#endif
