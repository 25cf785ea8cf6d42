/* cuvil-compile -- compiles an ONNX model into a shared library (or archive, C sources, IR).
 * Thin: parses arguments and calls cuvil_compile_file(). */
#include <cuvil/cuvil.h>

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fputs("usage: cuvil-compile --model M.onnx --output OUT [options]\n"
          "  --output OUT          M.so (default), M.a, a folder for --emit c, a file or - for ir/dot\n"
          "  --emit so|a|c|ir|dot  what to write (default: from OUT's extension, else so)\n"
          "  --target T            generic, x86_64-avx2, x86_64-avx512, aarch64-neon or riscv64-rvv\n"
          "                        (default: this machine's ISA; for another ISA, --emit c and build there)\n"
          "  --opt-level N         0..3 (default 2)\n"
          "  --shape IN=d0,d1,...  the dims of input IN: numbers, ranges LO:HI[:STEP] (symbolic at run\n"
          "                        time) or names; works for dims the model leaves unnamed\n"
          "  --weights-format F    asm (default: weights.bin linked with .incbin) or c (a C array,\n"
          "                        for toolchains without GNU .incbin)\n"
          "  --dim NAME=N          fix the model's symbolic dim NAME to N (default 1); repeatable\n"
          "  --dim NAME=LO:HI      keep NAME symbolic: the model takes any value in LO..HI at run time\n"
          "                        (at most 3 dims stay symbolic)\n"
          "  --dim NAME=LO:HI:STEP  the multiples of STEP in LO..HI (sizes divided by strides stay\n"
          "                        exact: a CNN's --dim H=32:1024:32)\n"
          "  --name PREFIX         symbol prefix of the model's C API (default: OUT's file name)\n"
          "  --disable-pass NAME   skip an optional pass; repeatable\n"
          "  --dump-ir-after NAME  print the IR after pass NAME (or 'all', 'load') to stderr\n"
          "  --cc CC               C compiler (default: $CC, else the one Cuvil was built with)\n"
          "  --keep-sources        keep the generated C next to the output\n"
          "  --limit NAME=N        raise a bound on untrusted models (docs/SECURITY.md): model_bytes,\n"
          "                        nesting, subgraph_depth, nodes, values, dim, tensor_bytes,\n"
          "                        total_bytes, folded_bytes, fold_ops; N may end in K, M, G or T\n"
          "  -v, --verbose         print compiler commands\n"
          "  --version, --help\n", f);
}

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "cuvil-compile: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* "N", "LO:HI" or "LO:HI:STEP" with 1 <= LO <= HI and STEP >= 1 (*step 1 when not given; the
 * library checks that LO and HI are multiples of it). */
static bool parse_dim(const char *s, int64_t *lo, int64_t *hi, int64_t *step) {
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s)) return false;
    long long a = strtoll(s, &end, 10), b = a, c = 1;
    if (errno || a <= 0) return false;
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
    if (*end) return false;
    *lo = a;
    *hi = b;
    *step = c;
    return true;
}

int main(int argc, char **argv) {
    cuvil_options o;
    cuvil_options_init(&o);
    const char *model = NULL, *output = NULL, *emit = NULL;
    static char dim_names[CUVIL_MAX_DIM_BINDINGS][256];
    static char shape_texts[CUVIL_MAX_SHAPE_BINDINGS][1024];
    bool seen_format = false, seen_opt = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() do { if (!v) return fail("missing value for", a); i++; } while (0)
/* an option that takes one value: given twice is an error, not "the last one wins" */
#define ONCE(set) do { if (set) return fail("option given twice", a); } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--version")) { printf("cuvil-compile %s\n", cuvil_version()); return 0; }
        else if (!strcmp(a, "--model")) { ONCE(model); NEED_VALUE(); model = v; }
        else if (!strcmp(a, "--output") || !strcmp(a, "-o")) { ONCE(output); NEED_VALUE(); output = v; }
        else if (!strcmp(a, "--emit")) { ONCE(emit); NEED_VALUE(); emit = v; }
        else if (!strcmp(a, "--target")) { ONCE(o.target); NEED_VALUE(); o.target = v; }
        else if (!strcmp(a, "--weights-format")) {
            ONCE(seen_format);
            seen_format = true;
            NEED_VALUE();
            if (!strcmp(v, "asm")) o.weights_format = CUVIL_WEIGHTS_ASM;
            else if (!strcmp(v, "c")) o.weights_format = CUVIL_WEIGHTS_C;
            else return fail("--weights-format wants asm or c, got", v);
        }
        else if (!strcmp(a, "--opt-level") || !strncmp(a, "-O", 2)) {
            ONCE(seen_opt);
            seen_opt = true;
            const char *num = a + 2;
            if (a[1] != 'O') {
                NEED_VALUE();
                num = v;
            }
            char *end;
            long n = strtol(num, &end, 10);
            if (!*num || *end || n < 0 || n > 3) return fail("--opt-level must be 0..3, got", num);
            o.opt_level = (int)n;
        } else if (!strcmp(a, "--dim")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) return fail("--dim wants NAME=N, NAME=LO:HI or NAME=LO:HI:STEP, got", v);
            if (o.n_dims == CUVIL_MAX_DIM_BINDINGS) return fail("too many --dim options", NULL);
            if ((size_t)(eq - v) >= sizeof dim_names[0]) return fail("--dim name too long", v);
            int64_t lo, hi, step;
            if (!parse_dim(eq + 1, &lo, &hi, &step))
                return fail(strchr(eq, ':') ? "--dim wants a range LO:HI or LO:HI:STEP of positive integers (LO <= HI, "
                                              "at most 2^63 - 1), got"
                                            : "--dim wants a positive integer or a range LO:HI, got", v);
            char *name = dim_names[o.n_dims];
            memcpy(name, v, (size_t)(eq - v));
            name[eq - v] = 0;
            for (int k = 0; k < o.n_dims; k++)
                if (!strcmp(o.dims[k].name, name)) return fail("--dim given twice for", name);
            o.dims[o.n_dims].name = name;
            o.dims[o.n_dims].value = lo == hi ? lo : 0;
            o.dims[o.n_dims].min = lo == hi ? 0 : lo;
            o.dims[o.n_dims].step = lo == hi ? 0 : step;   /* one value: fixed */
            o.dims[o.n_dims++].max = lo == hi ? 0 : hi;
        } else if (!strcmp(a, "--shape")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) return fail("--shape wants INPUT=d0,d1,... , got", v);
            if (o.n_shapes == CUVIL_MAX_SHAPE_BINDINGS) return fail("too many --shape options", NULL);
            for (int k = 0; k < o.n_shapes; k++)
                if (!strncmp(o.shapes[k].input, v, (size_t)(eq - v)) && !o.shapes[k].input[eq - v])
                    return fail("--shape given twice for input", o.shapes[k].input);
            cuvil_shape_binding *b = &o.shapes[o.n_shapes];
            memset(b, 0, sizeof *b);
            if (strlen(v) >= sizeof shape_texts[0]) return fail("--shape value too long", v);
            char *copy = strcpy(shape_texts[o.n_shapes], v);
            copy[eq - v] = 0;
            b->input = copy;
            for (char *d = copy + (eq - v) + 1, *next; d; d = next) {
                next = strchr(d, ',');
                if (next) *next++ = 0;
                if (b->ndim == CUVIL_MAX_DIMS) return fail("--shape: too many dims", v);
                cuvil_shape_dim *sd = &b->dims[b->ndim++];
                int64_t lo, hi, step;
                if (parse_dim(d, &lo, &hi, &step)) {
                    if (lo == hi) sd->value = lo;
                    else sd->min = lo, sd->max = hi, sd->step = step;
                } else if (*d && (isalpha((unsigned char)*d) || *d == '_')) {
                    sd->name = d;
                } else {
                    return fail("--shape: each dim is a number, LO:HI[:STEP] or a name, got", v);
                }
            }
            o.n_shapes++;
        } else if (!strcmp(a, "--name")) { ONCE(o.name); NEED_VALUE(); o.name = v; }
        else if (!strcmp(a, "--disable-pass")) {
            NEED_VALUE();
            if (o.n_disabled == CUVIL_MAX_DISABLED_PASSES) return fail("too many --disable-pass options", NULL);
            o.disabled_passes[o.n_disabled++] = v;
        } else if (!strcmp(a, "--dump-ir-after")) { ONCE(o.dump_after); NEED_VALUE(); o.dump_after = v; }
        else if (!strcmp(a, "--cc")) { ONCE(o.cc); NEED_VALUE(); o.cc = v; }
        else if (!strcmp(a, "--keep-sources")) o.keep_sources = 1;
        else if (!strcmp(a, "--limit")) {
            NEED_VALUE();
            const char *eq = strchr(v, '=');
            char name[64], err[512];
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof name) return fail("--limit wants NAME=N, got", v);
            memcpy(name, v, (size_t)(eq - v));
            name[eq - v] = 0;
            if (cuvil_limits_set(&o.limits, name, eq + 1, err, sizeof err) != CUVIL_OK) return fail(err, NULL);
        }
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o.verbose = 1;
        else return fail("unknown argument (see --help)", a);
#undef NEED_VALUE
#undef ONCE
    }
    if (!model || !output) return fail("--model and --output are required (see --help)", NULL);
    size_t ol = strlen(output);
    if (!emit) emit = ol > 2 && !strcmp(output + ol - 2, ".a") ? "a" : "so";
    if (!strcmp(emit, "so")) o.emit = CUVIL_EMIT_SO;
    else if (!strcmp(emit, "a")) o.emit = CUVIL_EMIT_A;
    else if (!strcmp(emit, "c")) o.emit = CUVIL_EMIT_C;
    else if (!strcmp(emit, "ir")) o.emit = CUVIL_EMIT_IR;
    else if (!strcmp(emit, "dot")) o.emit = CUVIL_EMIT_DOT;
    else return fail("--emit must be so, a, c, ir or dot, got", emit);
    cuvil_ctx *ctx = NULL;
    if (cuvil_ctx_create(&ctx) != CUVIL_OK) return fail("out of memory", NULL);
    /* Ctrl-C, a kill or a file-size limit never leaves a build folder or temp file behind */
    cuvil_install_signal_cleanup();
    cuvil_status s = cuvil_compile_file(ctx, model, &o, output);
    if (s != CUVIL_OK) {
        /* the message quotes names from the model: control characters (terminal escapes) are
         * shown as '?', and every line after the first is indented, so that no name can forge
         * a line of its own ("cuvil-compile: ok") */
        fputs("cuvil-compile: ", stderr);
        for (const unsigned char *p = (const unsigned char *)cuvil_errmsg(ctx); *p; p++) {
            if (*p == '\n') fputs(p[1] ? "\n  " : "", stderr);
            else fputc(*p == '\t' || (*p >= 0x20 && *p != 0x7f) ? *p : '?', stderr);
        }
        fputc('\n', stderr);
    }
    cuvil_ctx_destroy(ctx);
    return s == CUVIL_OK ? 0 : 1;
}
