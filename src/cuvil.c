/* cuvil.c -- the compiler driver: load, passes, codegen, toolchain. See cuvil.h. */
#include "codegen/toolchain_int.h"
#include "frontend/onnx/onnx_int.h"
#include "passes/passes_int.h"

#include <ctype.h>
#include <string.h>

const char *cuvil_version(void) { return CUVIL_VERSION; }

void cuvil_options_init(cuvil_options *o) {
    memset(o, 0, sizeof *o);
    o->opt_level = 2;
}

/* The symbol prefix: --name, else the output file's stem made into a C identifier. */
static cuvil_status pick_prefix(cuvil_ctx *ctx, const cuvil_options *o, const char *output, char *out, size_t len) {
    if (o->name) {
        if (!*o->name || strlen(o->name) >= len - 1 || isdigit((unsigned char)o->name[0]))
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--name '%s': must be a C identifier", o->name);
        for (const char *p = o->name; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_')
                return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--name '%s': must be a C identifier", o->name);
        snprintf(out, len, "%s", o->name);
        return CUVIL_OK;
    }
    const char *base = strrchr(output, '/');
    base = base ? base + 1 : output;
    size_t k = 0;
    if (isdigit((unsigned char)*base)) out[k++] = 'm';
    for (const char *p = base; *p && *p != '.' && k < len - 1; p++) out[k++] = isalnum((unsigned char)*p) ? *p : '_';
    if (!k) out[k++] = 'm';
    out[k] = 0;
    if (!strncmp(out, "lib", 3) && out[3]) memmove(out, out + 3, k - 2);   /* libfoo.so -> foo */
    return CUVIL_OK;
}

cuvil_status cuvil_compile_file(cuvil_ctx *ctx, const char *model_path, const cuvil_options *o, const char *output) {
    ctx->errmsg[0] = 0;
    if (!model_path || !output || !o) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "model path, options and output are required");
    if (o->opt_level < 0 || o->opt_level > 3)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--opt-level %d: must be 0..3", o->opt_level);
    const char *target = o->target ? o->target : cuvil_host_target();
    cuvil_status s = cuvil_check_target(ctx, target);
    if (s) return s;
    char prefix[128];
    if ((s = pick_prefix(ctx, o, output, prefix, sizeof prefix))) return s;
    cir_graph *g = NULL;
    if ((s = cuvil_onnx_load(ctx, model_path, o, &g))) return s;
    if ((s = cuvil_run_passes(g, o))) goto done;
    if (o->emit == CUVIL_EMIT_IR || o->emit == CUVIL_EMIT_DOT) {
        cuvil_sb sb = {0};
        if (o->emit == CUVIL_EMIT_IR) cir_print_text(g, &sb);
        else cir_print_dot(g, &sb);
        if (sb.oom) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        else if (!strcmp(output, "-")) fputs(sb.s ? sb.s : "", stdout);
        else s = cuvil_write_file_atomic(ctx, output, sb.s ? sb.s : "", sb.len);
        cuvil_sb_free(&sb);
        goto done;
    }
    char *abi = NULL;
    if ((s = cuvil_read_abi_header(ctx, &abi))) goto done;
    cg_output gen;
    s = cg_generate(g, o, prefix, target, abi, &gen);
    free(abi);
    if (!s) {
        if (o->emit == CUVIL_EMIT_C) s = cuvil_emit_sources(ctx, &gen, prefix, target, output);
        else s = cuvil_build_library(ctx, &gen, prefix, target, o, output);
    }
    cg_output_free(&gen);
done:
    cir_graph_free(g);
    return s;
}
