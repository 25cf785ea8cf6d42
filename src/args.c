/* args.c -- cuvil-compile's options as a library call: the command line (tools/cuvil-compile.c)
 * and the Python package (python/cuvil) pass the same argument strings, parsed once here. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* "N", "LO:HI" or "LO:HI:STEP" with 1 <= N, 0 <= LO <= HI, 1 <= HI and STEP >= 1 (*step 1
 * when not given; the compiler checks that LO and HI are multiples of it). A range may start
 * at 0 (a KV cache that starts empty); a fixed dim may not be 0. */
static bool parse_dim(const char *s, int64_t *lo, int64_t *hi, int64_t *step) {
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s)) return false;
    long long a = strtoll(s, &end, 10), b = a, c = 1;
    if (errno || a < 0) return false;
    if (*end == ':') {
        const char *t = end + 1;
        if (!isdigit((unsigned char)*t)) return false;
        b = strtoll(t, &end, 10);
        if (errno || b < a) return false;
        if (*end == ':') {
            t = end + 1;
            if (!isdigit((unsigned char)*t)) return false;
            c = strtoll(t, &end, 10);
            if (errno || c <= 0) return false;
        }
    }
    if (*end || b <= 0) return false;
    *lo = a;
    *hi = b;
    *step = c;
    return true;
}

static cuvil_status bad(cuvil_ctx *ctx, const char *msg, const char *arg) {
    return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s%s%s", msg, arg ? ": " : "", arg ? arg : "");
}

/* --shape IN=d0,d1,...: the text is copied to ctx's arena (the binding points into it). IN is
 * everything before the last '='. */
static cuvil_status parse_shape(cuvil_ctx *ctx, cuvil_options *o, const char *v) {
    const char *eq = strrchr(v, '=');   /* (the dims hold no '='; an input's name may) */
    if (!eq || eq == v) return bad(ctx, "--shape wants INPUT=d0,d1,... , got", v);
    if (o->n_shapes == CUVIL_MAX_SHAPE_BINDINGS) return bad(ctx, "too many --shape options", NULL);
    for (int k = 0; k < o->n_shapes; k++)
        if (!strncmp(o->shapes[k].input, v, (size_t)(eq - v)) && !o->shapes[k].input[eq - v])
            return bad(ctx, "--shape given twice for input", o->shapes[k].input);
    if (strlen(v) >= 1024) return bad(ctx, "--shape value too long", v);
    char *copy = cuvil_arena_strdup(&ctx->arena, v);
    if (!copy) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    cuvil_shape_binding *b = &o->shapes[o->n_shapes];
    memset(b, 0, sizeof *b);
    copy[eq - v] = 0;
    b->input = copy;
    for (char *d = copy + (eq - v) + 1, *next; d; d = next) {
        next = strchr(d, ',');
        if (next) *next++ = 0;
        if (b->ndim == CUVIL_MAX_DIMS) return bad(ctx, "--shape: too many dims", v);
        cuvil_shape_dim *sd = &b->dims[b->ndim++];
        int64_t lo, hi, step;
        if (parse_dim(d, &lo, &hi, &step)) {
            if (lo == hi) sd->value = lo;
            else sd->min = lo, sd->max = hi, sd->step = step;
        } else if (*d && (isalpha((unsigned char)*d) || *d == '_')) {
            sd->name = d;
        } else {
            return bad(ctx, "--shape: each dim is a number, LO:HI[:STEP] or a name, got", v);
        }
    }
    o->n_shapes++;
    return CUVIL_OK;
}

/* --seq IN=N | IN=LO:HI (0 <= LO <= HI; N may be 0): the name is copied to ctx's arena. */
static cuvil_status parse_seq(cuvil_ctx *ctx, cuvil_options *o, const char *v) {
    const char *eq = strrchr(v, '=');
    if (!eq || eq == v) return bad(ctx, "--seq wants INPUT=N or INPUT=LO:HI, got", v);
    if (o->n_seqs == CUVIL_MAX_SHAPE_BINDINGS) return bad(ctx, "too many --seq options", NULL);
    long long lo, hi;
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)eq[1])) return bad(ctx, "--seq wants a count N or a range LO:HI (0 <= LO <= HI), got", v);
    lo = hi = strtoll(eq + 1, &end, 10);
    if (!errno && *end == ':' && isdigit((unsigned char)end[1])) hi = strtoll(end + 1, &end, 10);
    if (errno || *end || lo < 0 || hi < lo)
        return bad(ctx, "--seq wants a count N or a range LO:HI (0 <= LO <= HI), got", v);
    char *name = cuvil_arena_memdup(&ctx->arena, v, (size_t)(eq - v) + 1);
    if (!name) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    name[eq - v] = 0;
    for (int k = 0; k < o->n_seqs; k++)
        if (!strcmp(o->seqs[k].input, name)) return bad(ctx, "--seq given twice for input", name);
    o->seqs[o->n_seqs++] = (cuvil_seq_binding){name, lo, hi};
    return CUVIL_OK;
}

/* --dim NAME=N | NAME=LO:HI[:STEP]: the name is copied to ctx's arena. */
static cuvil_status parse_dim_option(cuvil_ctx *ctx, cuvil_options *o, const char *v) {
    const char *eq = strrchr(v, '=');   /* (the value holds no '='; a name may) */
    if (!eq || eq == v) return bad(ctx, "--dim wants NAME=N, NAME=LO:HI or NAME=LO:HI:STEP, got", v);
    if (o->n_dims == CUVIL_MAX_DIM_BINDINGS) return bad(ctx, "too many --dim options", NULL);
    if ((size_t)(eq - v) >= 256) return bad(ctx, "--dim name too long", v);
    int64_t lo, hi, step;
    if (!parse_dim(eq + 1, &lo, &hi, &step))
        return bad(ctx, strchr(eq, ':') ? "--dim wants a range LO:HI or LO:HI:STEP of integers (0 <= LO <= HI, "
                                          "1 <= HI, at most 2^63 - 1), got"
                                        : "--dim wants a positive integer or a range LO:HI, got", v);
    char *name = cuvil_arena_memdup(&ctx->arena, v, (size_t)(eq - v) + 1);
    if (!name) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    name[eq - v] = 0;
    for (int k = 0; k < o->n_dims; k++)
        if (!strcmp(o->dims[k].name, name)) return bad(ctx, "--dim given twice for", name);
    cuvil_dim_binding *d = &o->dims[o->n_dims++];
    d->name = name;
    d->value = lo == hi ? lo : 0; /* one value: fixed */
    d->min = lo == hi ? 0 : lo;
    d->max = lo == hi ? 0 : hi;
    d->step = lo == hi ? 0 : step;
    return CUVIL_OK;
}

cuvil_status cuvil_options_parse(cuvil_ctx *ctx, cuvil_options *o, int argc, const char *const *argv,
                                 const char **model, const char **output) {
    if (!ctx) return CUVIL_ERR_INVALID_ARG;
    if (!o || argc < 0 || (argc > 0 && !argv)) return bad(ctx, "cuvil_options_parse: no options or arguments", NULL);
    const char *emit = NULL;
    bool seen_format = false, seen_opt = false, seen_precision = false, seen_calib = false, seen_act = false;
    if (model) *model = NULL;
    if (output) *output = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!a) return bad(ctx, "a NULL argument", NULL);
        cuvil_status s = CUVIL_OK;
#define NEED_VALUE() do { if (!v) return bad(ctx, "missing value for", a); i++; } while (0)
/* an option that takes one value: given twice is an error, not "the last one wins" */
#define ONCE(set) do { if (set) return bad(ctx, "option given twice", a); } while (0)
        if (!strcmp(a, "--model")) {
            if (!model) return bad(ctx, "--model is not taken here (the graph is the model)", NULL);
            ONCE(*model);
            NEED_VALUE();
            *model = v;
        } else if (!strcmp(a, "--output") || !strcmp(a, "-o")) {
            if (!output) return bad(ctx, "--output is not taken here", NULL);
            ONCE(*output);
            NEED_VALUE();
            *output = v;
        } else if (!strcmp(a, "--emit")) { ONCE(emit); NEED_VALUE(); emit = v; }
        else if (!strcmp(a, "--target")) { ONCE(o->target); NEED_VALUE(); o->target = v; }
        else if (!strcmp(a, "--weights-format")) {
            ONCE(seen_format);
            seen_format = true;
            NEED_VALUE();
            if (!strcmp(v, "asm")) o->weights_format = CUVIL_WEIGHTS_ASM;
            else if (!strcmp(v, "c")) o->weights_format = CUVIL_WEIGHTS_C;
            else return bad(ctx, "--weights-format wants asm or c, got", v);
        } else if (!strcmp(a, "--precision")) {
            ONCE(seen_precision);
            seen_precision = true;
            NEED_VALUE();
            if (!strcmp(v, "fp32")) o->precision = CUVIL_PRECISION_FP32_STRICT;
            else if (!strcmp(v, "fp16")) o->precision = CUVIL_PRECISION_FP16;
            else if (!strcmp(v, "bf16")) o->precision = CUVIL_PRECISION_BF16;
            else return bad(ctx, "--precision wants fp32, fp16 or bf16, got", v);
        } else if (!strcmp(a, "--activations")) {
            ONCE(seen_act);
            seen_act = true;
            NEED_VALUE();
            if (!strcmp(v, "fp32")) o->activations = CUVIL_PRECISION_FP32;
            else if (!strcmp(v, "fp16")) o->activations = CUVIL_PRECISION_FP16;
            else if (!strcmp(v, "bf16")) o->activations = CUVIL_PRECISION_BF16;
            else return bad(ctx, "--activations wants fp32, fp16 or bf16, got", v);
        } else if (!strcmp(a, "--quantize")) {
            ONCE(o->quantize);
            NEED_VALUE();
            if (!strcmp(v, "int8")) o->quantize = 8;
            else if (!strcmp(v, "int4-weights")) o->quantize = 4;
            else return bad(ctx, "--quantize wants int8 or int4-weights, got", v);
        } else if (!strcmp(a, "--calibrate")) { ONCE(o->calibrate); NEED_VALUE(); o->calibrate = v; }
        else if (!strcmp(a, "--calibration")) {
            ONCE(seen_calib);
            seen_calib = true;
            NEED_VALUE();
            if (!strcmp(v, "minmax")) o->calibration = CUVIL_CALIB_MINMAX;
            else if (!strcmp(v, "percentile")) o->calibration = CUVIL_CALIB_PERCENTILE;
            else if (!strcmp(v, "entropy")) o->calibration = CUVIL_CALIB_ENTROPY;
            else return bad(ctx, "--calibration wants minmax, percentile or entropy, got", v);
        } else if (!strcmp(a, "--keep-float")) {
            NEED_VALUE();
            if (o->n_keep_float == CUVIL_MAX_KEEP_FLOAT) return bad(ctx, "too many --keep-float options", NULL);
            o->keep_float[o->n_keep_float++] = v;
        } else if (!strcmp(a, "--opt-level") || !strncmp(a, "-O", 2)) {
            ONCE(seen_opt);
            seen_opt = true;
            const char *num = a + 2;
            if (a[1] != 'O') {
                NEED_VALUE();
                num = v;
            }
            char *end;
            long n = strtol(num, &end, 10);
            if (!*num || *end || n < 0 || n > 3) return bad(ctx, "--opt-level must be 0..3, got", num);
            o->opt_level = (int)n;
        } else if (!strcmp(a, "--dim")) {
            NEED_VALUE();
            s = parse_dim_option(ctx, o, v);
        } else if (!strcmp(a, "--shape")) {
            NEED_VALUE();
            s = parse_shape(ctx, o, v);
        } else if (!strcmp(a, "--seq")) {
            NEED_VALUE();
            s = parse_seq(ctx, o, v);
        } else if (!strcmp(a, "--name")) { ONCE(o->name); NEED_VALUE(); o->name = v; }
        else if (!strcmp(a, "--disable-pass")) {
            NEED_VALUE();
            if (o->n_disabled == CUVIL_MAX_DISABLED_PASSES) return bad(ctx, "too many --disable-pass options", NULL);
            o->disabled_passes[o->n_disabled++] = v;
        } else if (!strcmp(a, "--dump-ir-after")) { ONCE(o->dump_after); NEED_VALUE(); o->dump_after = v; }
        else if (!strcmp(a, "--cc")) { ONCE(o->cc); NEED_VALUE(); o->cc = v; }
        else if (!strcmp(a, "--keep-sources")) o->keep_sources = 1;
        else if (!strcmp(a, "--limit")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            char name[64], err[512];
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof name) return bad(ctx, "--limit wants NAME=N, got", v);
            memcpy(name, v, (size_t)(eq - v));
            name[eq - v] = 0;
            if (cuvil_limits_set(&o->limits, name, eq + 1, err, sizeof err) != CUVIL_OK) return bad(ctx, err, NULL);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = 1;
        else return bad(ctx, "unknown argument (see --help)", a);
#undef NEED_VALUE
#undef ONCE
        if (s != CUVIL_OK) return s;
    }
    if (model && !*model) return bad(ctx, "--model and --output are required (see --help)", NULL);
    if (output && !*output)
        return bad(ctx, model ? "--model and --output are required (see --help)" : "--output is required", NULL);
    const char *out = output ? *output : NULL;
    size_t ol = out ? strlen(out) : 0;
    if (!emit) emit = ol > 2 && !strcmp(out + ol - 2, ".a") ? "a" : "so";
    if (!strcmp(emit, "so")) o->emit = CUVIL_EMIT_SO;
    else if (!strcmp(emit, "a")) o->emit = CUVIL_EMIT_A;
    else if (!strcmp(emit, "c")) o->emit = CUVIL_EMIT_C;
    else if (!strcmp(emit, "ir")) o->emit = CUVIL_EMIT_IR;
    else if (!strcmp(emit, "dot")) o->emit = CUVIL_EMIT_DOT;
    else return bad(ctx, "--emit must be so, a, c, ir or dot, got", emit);
    return CUVIL_OK;
}

cuvil_status cuvil_compile_args(cuvil_ctx *ctx, int argc, const char *const *argv) {
    cuvil_options o;
    cuvil_options_init(&o);
    const char *model, *output;
    cuvil_status s = cuvil_options_parse(ctx, &o, argc, argv, &model, &output);
    return s != CUVIL_OK ? s : cuvil_compile_file(ctx, model, &o, output);
}

cuvil_status cuvil_compile_graph_args(cuvil_graph *g, int argc, const char *const *argv) {
    cuvil_ctx *ctx = cuvil_graph_ctx_(g);
    if (!ctx) return CUVIL_ERR_INVALID_ARG;
    cuvil_options o;
    cuvil_options_init(&o);
    const char *output;
    cuvil_status s = cuvil_options_parse(ctx, &o, argc, argv, NULL, &output);
    return s != CUVIL_OK ? s : cuvil_compile_graph(g, &o, output);
}
