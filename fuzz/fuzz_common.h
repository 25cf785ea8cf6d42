/* fuzz_common.h -- what the model fuzz targets run: bytes -> load -> verify -> passes -> C code,
 * everything the compiler does with a model short of invoking the C compiler. Shared by
 * fuzz_model.c and fuzz_model_struct.c. The limits are the defaults shrunk so that one input
 * costs milliseconds and little memory; the checks they guard are the same. */
#ifndef CUVIL_FUZZ_COMMON_H
#define CUVIL_FUZZ_COMMON_H

#include "codegen/codegen_int.h"
#include "frontend/onnx/onnx_int.h"
#include "passes/passes_int.h"

#include <string.h>

static void fuzz_options(cuvil_options *o) {
    cuvil_options_init(o);
    o->limits.tensor_bytes = (uint64_t)64 << 20;
    o->limits.total_bytes = (uint64_t)256 << 20;
    o->limits.folded_bytes = (uint64_t)16 << 20;
    o->limits.nodes = 20000;
    o->limits.fold_ops = (int64_t)1 << 24;   /* instrumented folding is ~10x slower */
    o->limits.values = 100000;
}

/* Compiles one model held in memory to C text. Any status is fine: the fuzzer looks for
 * crashes, sanitizer reports, leaks, hangs and runaway memory. A status of CUVIL_ERR_INTERNAL
 * is a bug in Cuvil (a verifier or an invariant check fired) and aborts, so it is found. */
static int fuzz_compile(const uint8_t *data, size_t size, int opt_level) {
    cuvil_ctx *ctx = NULL;
    if (cuvil_ctx_create(&ctx) != CUVIL_OK) return 0;
    cuvil_options o;
    fuzz_options(&o);
    o.opt_level = opt_level;
    cir_graph *g = NULL;
    cuvil_status s = cuvil_onnx_load_buffer(ctx, data, size, "fuzz.onnx", NULL, &o, &g);
    if (!s) s = cuvil_run_passes(g, &o);
    if (!s) {
        cg_output gen;
        s = cg_generate(g, &o, "m", "generic", "/* cuvil_model.h */\n", &gen);
        cg_output_free(&gen);
    }
    if (s == CUVIL_ERR_INTERNAL) {
        fprintf(stderr, "internal error: %s\n", cuvil_errmsg(ctx));
        abort();
    }
    cir_graph_free(g);
    cuvil_ctx_destroy(ctx);
    return 0;
}

#endif
