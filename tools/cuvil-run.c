/*
 * cuvil-run -- load a compiled model (.so), feed it tensors from files, write its outputs as
 * .npy, optionally time it. Thin: argument parsing and reporting; the model does the work and
 * libcuvil reads and writes the tensor files.
 *
 *     cuvil-run M.so [--input NAME=FILE]... [--output-dir DIR] [--threads N]
 *                    [--bench ITERS] [--warmup N] [--json] [--info]
 *
 * The contract (tests/unit/test_tensor_io.c and tests/python check it):
 *   - M.so is dlopen'ed as given ("./" is prepended to a bare file name); it must export
 *     CUVIL_MODEL_ENTRY_SYMBOL with this ABI version.
 *   - Every model input is given exactly once, as a .npy or ONNX TensorProto file whose dtype
 *     and shape equal the model's exactly (no conversion; a symbolic dim mismatch suggests the
 *     --dim to recompile with). NAME= may be left out when the model has one input.
 *   - A sequence input is an ONNX SequenceProto .pb or a folder of 0.npy, 1.npy, ...; its
 *     elements' dtype, rank and dims are checked against the model's bounds.
 *   - The model runs once; DIR/<output name>.npy is written for every output (.npz of its
 *     elements, arr_0 ..., for a sequence; DIR defaults to
 *     "." and is created; '/', '\\' and control characters in names become '_'). With --bench,
 *     ITERS more runs are timed after the warmup runs, and the outputs (of the first run) are
 *     written only when --output-dir is given. --json prints exactly one JSON line on stdout.
 *   - --info describes the model and exits, unless inputs are given too.
 *   - Exit status 0 on success; on any failure 1, exactly one line on stderr starting with
 *     "cuvil-run: ", and no output file left behind (and no directory it created).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuvil/cuvil.h"
#include "cuvil_rt.h"   /* cuvil_rt_cpu_lacks */

#define BUF_ALIGN 64
#define MAX_MODEL_TENSORS 4096   /* sanity bound on a descriptor read from a foreign .so */

static const char usage_text[] =
    "usage: cuvil-run MODEL.so [options]\n"
    "  --input NAME=FILE   an input tensor (.npy or ONNX TensorProto .pb); repeat for each\n"
    "                      model input; NAME= may be left out when the model has one input.\n"
    "                      A sequence input: an ONNX SequenceProto .pb, or a folder of 0.npy,\n"
    "                      1.npy, ... An optional input: an ONNX OptionalProto .pb (or its\n"
    "                      value's file), or left out\n"
    "  --output-dir DIR    write DIR/<output>.npy for each output (default: .); a sequence\n"
    "                      output as DIR/<output>.npz (arr_0, arr_1, ...: np.load reads it);\n"
    "                      an optional output without a value: no file\n"
    "  --threads N         threads for the model context (default: 1)\n"
    "  --bench ITERS       after the first run, time ITERS more runs (outputs are then\n"
    "                      written only if --output-dir is given)\n"
    "  --warmup N          untimed runs before timing (default: min(10, ITERS/10))\n"
    "  --json              print one JSON line on stdout instead of text\n"
    "  --info              print the model's description; runs only if inputs are given\n"
    "  -h, --help          this text\n";

/* ===== errors: the first one wins and is printed once, at exit =============================== */

static char g_err[2048];

static int errf(const char *fmt, ...) {
    if (g_err[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_err, sizeof g_err, fmt, ap);
        va_end(ap);
        /* one line, and no terminal escapes from a file's or a model's names */
        for (char *p = g_err; *p; p++) {
            if (*p == '\n' || *p == '\r' || *p == '\t')
                *p = ' ';
            else if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        }
    }
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A buffer for a tensor. Small ones are zeroed; one of a MiB or more is left as the allocator
 * gives it (fresh pages from the system), so that the outputs of a model with symbolic dims,
 * sized for the largest shapes (24 KV-cache outputs of 25 MB each for GPT-2's decode step up to
 * batch 8 and past 1023), cost memory only for what a run writes: the peak RSS that --bench
 * reports is then the model's, not the tool's. Every byte of a run's output shape is written by
 * the model before it is read. */
static void *alloc_aligned(size_t n) {
    void *p = NULL;
    size_t rounded = (n + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
    if (rounded < n || posix_memalign(&p, BUF_ALIGN, rounded ? rounded : BUF_ALIGN) != 0)
        return NULL;
    if (rounded < ((size_t)1 << 20)) memset(p, 0, rounded ? rounded : BUF_ALIGN);
    return p;
}

static const char *str_or(const char *s, const char *dflt) {
    return s ? s : dflt;
}

/* ===== arguments ============================================================================= */

typedef struct args {
    const char *model;
    const char **inputs;   /* the --input values, argv order */
    int n_inputs;
    const char *output_dir;
    int threads;
    long bench;            /* -1: no --bench */
    long warmup;           /* -1: default */
    bool json, info, help;
} args;

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, args *a) {
    a->inputs = calloc((size_t)argc, sizeof *a->inputs);
    if (!a->inputs)
        return errf("out of memory");
    a->bench = -1;
    a->warmup = -1;
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == '\0') {
            if (a->model)
                return errf("unexpected argument '%s' (the model is '%s'; see --help)", arg,
                            a->model);
            a->model = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = true;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            a->help = true;
            continue;
        }
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
            continue;
        }
        if (strcmp(arg, "--info") == 0) {
            a->info = true;
            continue;
        }
        /* options with a value: "--opt VALUE" or "--opt=VALUE" */
        static const char *const valued[] = {"--input", "--output-dir", "--threads", "--bench",
                                             "--warmup"};
        const char *opt = NULL, *val = NULL;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
            size_t n = strlen(valued[k]);
            if (strncmp(arg, valued[k], n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
                opt = valued[k];
                if (arg[n] == '=')
                    val = arg + n + 1;
                else if (i + 1 < argc)
                    val = argv[++i];
                else
                    return errf("%s needs a value (see --help)", opt);
                break;
            }
        }
        if (!opt)
            return errf("unknown option '%s' (see --help)", arg);
        long v;
        if (strcmp(opt, "--input") == 0) {
            a->inputs[a->n_inputs++] = val;
        } else if (strcmp(opt, "--output-dir") == 0) {
            if (!*val)
                return errf("--output-dir needs a directory");
            a->output_dir = val;
        } else if (strcmp(opt, "--threads") == 0) {
            if (!parse_long(val, 0, CUVIL_MAX_THREADS, &v))
                return errf("--threads '%s': expected an integer in 0..%d (the runtime's CUVIL_MAX_THREADS)", val,
                            CUVIL_MAX_THREADS);
            a->threads = (int)v;
        } else if (strcmp(opt, "--bench") == 0) {
            if (!parse_long(val, 1, 100000000, &v))
                return errf("--bench '%s': expected a number of iterations >= 1", val);
            a->bench = v;
        } else {
            if (!parse_long(val, 0, 100000000, &v))
                return errf("--warmup '%s': expected an integer >= 0", val);
            a->warmup = v;
        }
    }
    if (a->help)
        return 0;
    if (!a->model)
        return errf("no model given (usage: cuvil-run MODEL.so [--input NAME=FILE]...; "
                    "see --help)");
    if (a->warmup >= 0 && a->bench < 0)
        return errf("--warmup needs --bench");
    return 0;
}

/* ===== shapes as text ======================================================================== */

/* "[1,3,224,224]" */
static const char *dims_str(char *buf, size_t len, int ndim, const int64_t *dims) {
    size_t n = 0;
    n += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRId64, i ? "," : "", dims[i]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

/* "float32[batch=1,3,224,224]"; a sequence's "seq(<=4) float32[<=8,3]" */
static const char *info_str(char *buf, size_t len, const cuvil_tensor_info *t) {
    size_t n = t->is_optional ? (size_t)snprintf(buf, len, "optional ") : 0;
    if (t->is_sequence && n < len)
        n += (size_t)snprintf(buf + n, len - n, "seq(<=%d) ", t->seq_max);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "%s[", cuvil_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && n < len; i++) {
        if (t->is_sequence && (t->seq_varies >> i) & 1)
            n += (size_t)snprintf(buf + n, len - n, "%s<=%" PRId64, i ? "," : "", t->dims[i]);
        else if (t->dim_names[i])
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%" PRId64, i ? "," : "",
                                  t->dim_names[i], t->dims[i]);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%" PRId64, i ? "," : "", t->dims[i]);
    }
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

/* ===== JSON ================================================================================== */

static void json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_tensors(FILE *f, const cuvil_tensor_info *t, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        json_str(f, t[i].name);
        fprintf(f, ", \"dtype\": \"%s\", \"shape\": [", cuvil_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++)
            fprintf(f, "%s%" PRId64, d ? ", " : "", t[i].dims[d]);
        fputs("], \"dim_names\": [", f);
        for (int d = 0; d < t[i].ndim; d++) {
            fputs(d ? ", " : "", f);
            json_str(f, t[i].dim_names[d]);
        }
        fprintf(f, "], \"nbytes\": %zu", t[i].nbytes);
        if (t[i].is_sequence)   /* dims: the largest an element's may be */
            fprintf(f, ", \"sequence\": true, \"seq_max\": %d", t[i].seq_max);
        if (t[i].is_optional)
            fputs(", \"optional\": true", f);
        fputc('}', f);
    }
    fputc(']', f);
}

static void json_info(FILE *f, const cuvil_model_desc *d) {
    fputs("{\"name\": ", f);
    json_str(f, d->name);
    fputs(", \"target\": ", f);
    json_str(f, d->target);
    fputs(", \"cuvil_version\": ", f);
    json_str(f, d->cuvil_version);
    fputs(", \"sha256\": ", f);
    json_str(f, d->model_sha256);
    fputs(", \"options\": ", f);
    json_str(f, d->options);
    fprintf(f, ", \"abi_version\": %" PRIu32 ", \"arena_bytes\": %zu, \"weights_bytes\": %zu",
            d->abi_version, d->arena_bytes, d->weights_bytes);
    fputs(", \"cpu_features\": ", f);
    json_str(f, d->cpu_features);
    size_t n = 0;
    const char *lacks = cuvil_rt_cpu_lacks(d->cpu_features, &n);
    fputs(", \"cpu_lacks\": ", f);
    if (lacks)
        fprintf(f, "\"%.*s\"", (int)n, lacks);   /* a name of the model's list, checked by check_desc */
    else
        fputs("null", f);
    fputs(", \"inputs\": ", f);
    json_tensors(f, d->inputs, d->n_inputs);
    fputs(", \"outputs\": ", f);
    json_tensors(f, d->outputs, d->n_outputs);
    fputc('}', f);
}

/* Text from a model (names) on a terminal: control characters are shown as '?', so that no name
 * can move the cursor, clear the screen or set the terminal's title. */
static void safe_puts(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}

static void safe_line(FILE *f, const char *label, const char *s) {
    fputs(label, f);
    safe_puts(f, s);
    fputc('\n', f);
}

static void print_info(FILE *f, const char *path, const cuvil_model_desc *d) {
    char buf[512];
    safe_line(f, "model:    ", path);
    safe_line(f, "name:     ", str_or(d->name, "(none)"));
    safe_line(f, "target:   ", str_or(d->target, "(none)"));
    safe_line(f, "cuvil:    ", str_or(d->cuvil_version, "(none)"));
    safe_line(f, "sha256:   ", str_or(d->model_sha256, "(none)"));
    safe_line(f, "options:  ", str_or(d->options, "(none)"));
    fprintf(f, "abi:      %" PRIu32 "\n", d->abi_version);
    size_t n = 0;
    const char *lacks = cuvil_rt_cpu_lacks(d->cpu_features, &n);
    fputs("cpu:      ", f);
    safe_puts(f, *d->cpu_features ? d->cpu_features : "(portable code: any CPU)");
    if (lacks) {
        fputs(" (this CPU lacks ", f);
        fprintf(f, "%.*s)\n", (int)n, lacks);
    } else {
        fputs(*d->cpu_features ? " (this CPU has them all)\n" : "\n", f);
    }
    fprintf(f, "arena:    %zu bytes (%.2f MiB)\n", d->arena_bytes,
            (double)d->arena_bytes / (1024.0 * 1024.0));
    fprintf(f, "weights:  %zu bytes (%.2f MiB)\n", d->weights_bytes,
            (double)d->weights_bytes / (1024.0 * 1024.0));
    for (int k = 0; k < d->n_syms; k++) {   /* dims the model takes at run time */
        fputs(k ? ", " : "symbols:  ", f);
        safe_puts(f, str_or(d->syms[k].name, "?"));
        fprintf(f, "=%" PRId64 "..%" PRId64, d->syms[k].min, d->syms[k].max);
        if (d->syms[k].step > 1) fprintf(f, " step %" PRId64, d->syms[k].step);
        if (k == d->n_syms - 1) fputs(" (dims below: the upper bounds)\n", f);
    }
    fprintf(f, "inputs:\n");
    for (int i = 0; i < d->n_inputs; i++) {
        fputs("  ", f);
        safe_puts(f, d->inputs[i].name);
        fputs(": ", f);
        safe_line(f, "", info_str(buf, sizeof buf, &d->inputs[i]));
    }
    fprintf(f, "outputs:\n");
    for (int i = 0; i < d->n_outputs; i++) {
        fputs("  ", f);
        safe_puts(f, d->outputs[i].name);
        fputs(": ", f);
        safe_line(f, "", info_str(buf, sizeof buf, &d->outputs[i]));
    }
}

/* ===== loading the model ===================================================================== */

static int check_tensor_info(const char *path, const char *kind, int i,
                             const cuvil_tensor_info *t) {
    if (!t->name)
        return errf("%s: malformed model descriptor: %s %d has no name", path, kind, i);
    if (t->ndim < 0 || t->ndim > CUVIL_MAX_DIMS)
        return errf("%s: malformed model descriptor: %s '%s' has ndim %d", path, kind, t->name,
                    t->ndim);
    size_t n = cuvil_dtype_size(t->dtype);
    if (n == 0)
        return errf("%s: %s '%s' has dtype %s, which cuvil-run cannot feed", path, kind,
                    t->name, cuvil_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++)
        if (t->dims[d] < 0 || (uint64_t)t->dims[d] > SIZE_MAX ||
            __builtin_mul_overflow(n, (size_t)t->dims[d], &n))
            return errf("%s: malformed model descriptor: %s '%s' has an invalid shape", path,
                        kind, t->name);
    if (t->is_sequence) {   /* the header and seq_max slots of room for the largest element */
        size_t h = 0, all = 0;
        bool ok = t->seq_max >= 0 && t->seq_max <= 1 << 20 && t->seq_slot_bytes >= n && t->seq_hdr_bytes % 64 == 0 &&
                  t->seq_slot_bytes % 64 == 0 && !__builtin_mul_overflow((size_t)t->seq_max, (size_t)t->ndim, &h) &&
                  !__builtin_add_overflow(h, (size_t)1, &h) && !__builtin_mul_overflow(h, (size_t)8, &h) &&
                  t->seq_hdr_bytes >= h && !__builtin_mul_overflow((size_t)t->seq_max, t->seq_slot_bytes, &all) &&
                  !__builtin_add_overflow(all, t->seq_hdr_bytes, &all) && all == t->nbytes;
        if (!ok)
            return errf("%s: malformed model descriptor: %s '%s' has an invalid sequence layout", path, kind, t->name);
        return 0;
    }
    if (n != t->nbytes)
        return errf("%s: malformed model descriptor: %s '%s' says %zu bytes, its shape needs %zu",
                    path, kind, t->name, t->nbytes, n);
    return 0;
}

/* Sequence input `ti` from a SequenceProto .pb or a folder of .npy into a new block *out (its
 * header and slots, as cuvil_model.h lays it out); each element's type, rank and dims checked
 * against the model's bounds here, so that it fits its slot (the model checks the rest). */
static int seq_block(const cuvil_tensor_info *ti, const char *file, cuvil_host_tensor *ts, int n, void **out) {
    int bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        const cuvil_host_tensor *t = &ts[i];
        char fs[256], ms[512];
        if (t->dtype != ti->dtype)
            bad = errf("input '%s': element %d of %s is %s; the model takes %s", ti->name, i, file,
                       cuvil_dtype_name(t->dtype), cuvil_dtype_name(ti->dtype));
        bool fits = t->ndim == ti->ndim;
        for (int k = 0; fits && k < t->ndim; k++)
            fits = t->dims[k] >= 0 && t->dims[k] <= ti->dims[k];
        if (!bad && !fits)
            bad = errf("input '%s': element %d of %s has shape %s; the model takes %s", ti->name, i, file,
                       dims_str(fs, sizeof fs, t->ndim, t->dims), info_str(ms, sizeof ms, ti));
    }
    unsigned char *S = bad ? NULL : alloc_aligned(ti->nbytes);
    if (!bad && !S)
        bad = errf("out of memory for input '%s' (%zu bytes)", ti->name, ti->nbytes);
    if (!bad) {
        memset(S, 0, ti->seq_hdr_bytes);
        ((int64_t *)S)[0] = n;
        for (int i = 0; i < n; i++) {
            memcpy(cuvil_seq_elem_dims(ti, S, i), ts[i].dims, sizeof(int64_t) * (size_t)ti->ndim);
            if (ts[i].nbytes) memcpy(cuvil_seq_elem_data(ti, S, i), ts[i].data, ts[i].nbytes);
        }
        *out = S;
    }
    cuvil_host_seq_free(ts, n);
    return bad;
}

static int read_seq_input(const cuvil_tensor_info *ti, const char *file, void **out) {
    cuvil_host_tensor *ts = NULL;
    int n = 0;
    char e[1024];
    if (cuvil_seq_read_max(file, ti->nbytes, ti->seq_max, &ts, &n, e, sizeof e) != CUVIL_OK)
        return errf("input '%s': %s", ti->name, e);
    return seq_block(ti, file, ts, n, out);
}

/* Whether file may be an ONNX OptionalProto for optional input ti: a regular file that is not
 * a .npy (a .npy, or a sequence's folder, holds a value; cuvil_optional_read_max says what
 * else is the value's own file). */
static bool optional_proto(const cuvil_tensor_info *ti, const char *file) {
    struct stat st;
    char head[6] = {0};
    if (!ti->is_optional || stat(file, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    FILE *f = fopen(file, "rb");
    size_t r = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    return !(r == sizeof head && !memcmp(head, "\x93NUMPY", 6));
}

static int check_desc(const char *path, const cuvil_model_desc *d) {
    if (d->abi_version != CUVIL_MODEL_ABI_VERSION)
        return errf("%s: model ABI version %" PRIu32 ", this cuvil-run supports %d; recompile the "
                    "model with this Cuvil", path, d->abi_version, CUVIL_MODEL_ABI_VERSION);
    if (d->n_inputs < 0 || d->n_inputs > MAX_MODEL_TENSORS || d->n_outputs < 0 ||
        d->n_outputs > MAX_MODEL_TENSORS || (d->n_inputs && !d->inputs) ||
        (d->n_outputs && !d->outputs) || !d->create || !d->run || !d->errmsg || !d->destroy || !d->run_shapes ||
        d->n_syms < 0 || d->n_syms > 64 || (d->n_syms && !d->syms) || !d->cpu_features || !d->output_present)
        return errf("%s: malformed model descriptor", path);
    for (const char *c = d->cpu_features; *c; c++)   /* names: printed as they are */
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == ' ' || *c == '_'))
            return errf("%s: malformed model descriptor (its CPU features)", path);
    for (int i = 0; i < d->n_inputs; i++)
        if (check_tensor_info(path, "input", i, &d->inputs[i]))
            return 1;
    for (int i = 0; i < d->n_outputs; i++)
        if (check_tensor_info(path, "output", i, &d->outputs[i]))
            return 1;
    return 0;
}

/* A truncated or forged shared library can make dlopen map a segment past the end of the file
 * and die with SIGBUS when it touches it. Before dlopen: a regular file, an ELF header of this
 * machine's class, and every program header's file range and the section table inside it. */
static int check_elf(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errf("cannot load model: %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return errf("cannot load model: %s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    Elf64_Ehdr eh;
    int bad = 0;
    const char *why = NULL;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        why = "not an ELF shared library";
    else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ehsize < sizeof eh || eh.e_phentsize != sizeof(Elf64_Phdr))
        why = "not a 64-bit ELF shared library for this machine";
    else if (eh.e_phoff > size || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > size - eh.e_phoff)
        why = "truncated (its program headers lie past the end of the file)";
    else if (eh.e_shnum && (eh.e_shoff > size || eh.e_shentsize != sizeof(Elf64_Shdr) ||
                            (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > size - eh.e_shoff))
        why = "truncated (its section headers lie past the end of the file)";
    for (int i = 0; !why && i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) != (ssize_t)sizeof ph)
            why = "unreadable program header";
        else if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
            why = "truncated (a segment lies past the end of the file)";
    }
    close(fd);
    if (why)
        bad = errf("cannot load model: %s: %s", path, why);
    return bad;
}

static int load_model(const char *path, void **handle, const cuvil_model_desc **desc) {
    if (check_elf(path))
        return 1;
    /* dlopen searches the library path for a bare name; a model file is meant literally */
    size_t n = strlen(path) + 3;
    char *p = malloc(n);
    if (!p)
        return errf("out of memory");
    snprintf(p, n, "%s%s", strchr(path, '/') ? "" : "./", path);
    *handle = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    free(p);
    if (!*handle) {
        const char *e = dlerror();
        return errf("cannot load model: %s", e ? e : path);
    }
    void *sym = dlsym(*handle, CUVIL_MODEL_ENTRY_SYMBOL);
    if (!sym)
        return errf("%s: not a Cuvil model (no symbol '%s')", path, CUVIL_MODEL_ENTRY_SYMBOL);
    cuvil_model_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);   /* object to function pointer, as POSIX allows */
    *desc = entry();
    if (!*desc)
        return errf("%s: %s() returned NULL", path, CUVIL_MODEL_ENTRY_SYMBOL);
    return check_desc(path, *desc);
}

/* ===== inputs ================================================================================ */

/* Lists the model's input names into buf: "x, mask". */
static const char *input_names(char *buf, size_t len, const cuvil_model_desc *d) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < d->n_inputs && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", d->inputs[i].name);
    if (d->n_inputs == 0)
        snprintf(buf, len, "(none)");
    return buf;
}

/* Maps each --input to a model input: files[i] is the file for input i. */
static int resolve_inputs(const args *a, const cuvil_model_desc *d, const char **files) {
    char names[1024];
    for (int k = 0; k < a->n_inputs; k++) {
        const char *s = a->inputs[k];
        int idx = -1;
        size_t best = 0;
        for (int i = 0; i < d->n_inputs; i++) {
            size_t len = strlen(d->inputs[i].name);
            if (strncmp(s, d->inputs[i].name, len) == 0 && s[len] == '=' &&
                (idx < 0 || len > best)) {
                idx = i;
                best = len;
            }
        }
        const char *file;
        if (idx >= 0) {
            file = s + best + 1;
        } else if (!strchr(s, '=') || (d->n_inputs == 1 && access(s, F_OK) == 0)) {
            if (d->n_inputs != 1)
                return errf("--input %s: the model has %d inputs (%s); name it with "
                            "--input NAME=FILE", s, d->n_inputs,
                            input_names(names, sizeof names, d));
            idx = 0;
            file = s;
        } else {
            return errf("unknown input '%.*s'; the model's inputs are: %s",
                        (int)(strchr(s, '=') - s), s, input_names(names, sizeof names, d));
        }
        if (!*file)
            return errf("--input %s: no file given", s);
        if (files[idx])
            return errf("input '%s' given twice ('%s' and '%s')", d->inputs[idx].name,
                        files[idx], file);
        files[idx] = file;
    }
    char missing[1024];
    size_t n = 0;
    int n_missing = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        if (files[i] || n >= sizeof missing || d->inputs[i].is_optional)   /* (an optional one may be left out) */
            continue;
        n += (size_t)snprintf(missing + n, sizeof missing - n, "%s'%s' (%s)",
                              n_missing ? ", " : "", d->inputs[i].name,
                              info_str(names, sizeof names, &d->inputs[i]));
        n_missing++;
    }
    if (n_missing)
        return errf("missing input%s %s; pass --input %s=FILE", n_missing > 1 ? "s" : "",
                    missing, d->n_inputs == 1 ? d->inputs[0].name : "NAME");
    return 0;
}

/* Whether name is one of the n symbols the model takes at run time (a dim named after a symbol
 * fixed at compile time is just its number). */
static bool is_run_sym(const char *name, const cuvil_sym_info *syms, int n) {
    for (int k = 0; name && k < n; k++)
        if (syms[k].name && !strcmp(syms[k].name, name)) return true;
    return false;
}

/* The file's tensor must be exactly what the model was compiled for; with symbolic dims
 * (n_syms), the rank and type must be, and the model checks the dims when it runs. */
static int check_input(const cuvil_tensor_info *ti, const char *file, const cuvil_host_tensor *t, int n_syms,
                       const cuvil_sym_info *run_syms) {
    if (t->dtype != ti->dtype)
        return errf("input '%s': file %s holds %s, model expects %s (no implicit conversion; "
                    "convert the file, e.g. a.astype('%s'))", ti->name, file,
                    cuvil_dtype_name(t->dtype), cuvil_dtype_name(ti->dtype),
                    cuvil_dtype_name(ti->dtype));
    if (n_syms && t->ndim == ti->ndim)
        return 0;
    if (n_syms) {   /* symbolic dims by name: the upper bounds are not what it was compiled for */
        char fs[256], ms[512];
        size_t k = 0;
        for (int i = 0; i < ti->ndim && k < sizeof ms; i++) {
            k += (size_t)snprintf(ms + k, sizeof ms - k, "%s", i ? "," : "[");
            if (k < sizeof ms)
                k += is_run_sym(ti->dim_names[i], run_syms, n_syms) ? (size_t)snprintf(ms + k, sizeof ms - k, "%s", ti->dim_names[i])
                                      : (size_t)snprintf(ms + k, sizeof ms - k, "%" PRId64, ti->dims[i]);
        }
        if (k < sizeof ms) snprintf(ms + k, sizeof ms - k, "%s", ti->ndim ? "]" : "[]");
        return errf("input '%s': file %s has shape %s (rank %d); the model takes rank %d: %s", ti->name, file,
                    dims_str(fs, sizeof fs, t->ndim, t->dims), t->ndim, ti->ndim, ms);
    }
    bool same = t->ndim == ti->ndim;
    for (int i = 0; same && i < t->ndim; i++)
        same = t->dims[i] == ti->dims[i];
    if (same && t->nbytes == ti->nbytes)
        return 0;
    char fs[256], ms[256], syms[512] = "", hint[512] = "";
    size_t ns = 0, nh = 0;
    bool only_symbolic = t->ndim == ti->ndim;
    for (int i = 0; i < ti->ndim; i++) {
        if (ti->dim_names[i] && ns < sizeof syms)
            ns += (size_t)snprintf(syms + ns, sizeof syms - ns, "%s%s=%" PRId64,
                                   ns ? ", " : " (", ti->dim_names[i], ti->dims[i]);
        if (t->ndim != ti->ndim || t->dims[i] == ti->dims[i])
            continue;
        if (!ti->dim_names[i])
            only_symbolic = false;
        else if (nh < sizeof hint)
            nh += (size_t)snprintf(hint + nh, sizeof hint - nh, "%s--dim %s=%" PRId64,
                                   nh ? " " : "; recompile with ", ti->dim_names[i],
                                   t->dims[i]);
    }
    if (ns && ns < sizeof syms)
        snprintf(syms + ns, sizeof syms - ns, ")");
    return errf("input '%s': file %s has shape %s, model was compiled for %s%s%s", ti->name,
                file, dims_str(fs, sizeof fs, t->ndim, t->dims),
                dims_str(ms, sizeof ms, ti->ndim, ti->dims), syms, only_symbolic ? hint : "");
}

/* ===== outputs =============================================================================== */

/* A file name for an output: the output's name, with the characters that cannot or should not
 * be in a file name ('/', '\\', control characters) replaced by '_'; never empty, "." or "..".
 * Other characters (':' as in "logits:0", spaces, UTF-8) are kept, so names stay predictable. */
static void output_file_name(char *buf, size_t len, const char *name, int index) {
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < len && n < 200; p++) {
        unsigned char c = (unsigned char)*p;
        buf[n++] = (c == '/' || c == '\\' || c < 0x20 || c == 0x7f) ? '_' : (char)c;
    }
    buf[n] = '\0';
    if (n == 0)
        snprintf(buf, len, "output%d", index);
    else if (strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
        memset(buf, '_', n);
}

/* mkdir -p; the directories it made are appended to made[] (for removal on failure). */
static int make_dirs(const char *dir, char **made, int *n_made, int max_made) {
    char *p = strdup(dir);
    if (!p)
        return errf("out of memory");
    size_t len = strlen(p);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) == 0) {
            char *copy = *n_made < max_made ? strdup(p) : NULL;
            if (copy)
                made[(*n_made)++] = copy;
        } else {
            struct stat sb;
            if (errno != EEXIST || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                int e = errno == EEXIST ? ENOTDIR : errno;
                errf("--output-dir %s: cannot create '%s': %s", dir, p, strerror(e));
                free(p);
                return 1;
            }
        }
        p[i] = saved;
    }
    free(p);
    return 0;
}

/* A float16's value (for printing only: exact, including subnormals, infinities and NaN). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
    return h & 0x8000 ? -v : v;
}

/* Up to 8 leading values, "[3, 5, 7]" or "[3, 5, ...]". */
static void preview(FILE *f, const cuvil_tensor_info *t, const void *data) {
    size_t count = t->nbytes / cuvil_dtype_size(t->dtype);
    fputc('[', f);
    for (size_t i = 0; i < count && i < 8; i++) {
        fputs(i ? ", " : "", f);
        const char *p = (const char *)data + i * cuvil_dtype_size(t->dtype);
        switch (t->dtype) {
        case CUVIL_DTYPE_FLOAT32: { float v; memcpy(&v, p, 4); fprintf(f, "%g", v); break; }
        case CUVIL_DTYPE_FLOAT64: { double v; memcpy(&v, p, 8); fprintf(f, "%g", v); break; }
        case CUVIL_DTYPE_INT64: { int64_t v; memcpy(&v, p, 8); fprintf(f, "%" PRId64, v); break; }
        case CUVIL_DTYPE_INT32: { int32_t v; memcpy(&v, p, 4); fprintf(f, "%" PRId32, v); break; }
        case CUVIL_DTYPE_INT8: case CUVIL_DTYPE_INT4: fprintf(f, "%d", (int)*(const int8_t *)p); break;
        case CUVIL_DTYPE_INT16: { int16_t v; memcpy(&v, p, 2); fprintf(f, "%d", (int)v); break; }
        case CUVIL_DTYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); fprintf(f, "%u", (unsigned)v); break; }
        case CUVIL_DTYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); fprintf(f, "%" PRIu32, v); break; }
        case CUVIL_DTYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); fprintf(f, "%" PRIu64, v); break; }
        case CUVIL_DTYPE_FLOAT16: { uint16_t v; memcpy(&v, p, 2); fprintf(f, "%g", half_value(v)); break; }
        case CUVIL_DTYPE_BFLOAT16: {   /* the top half of a float32 */
            uint16_t v;
            memcpy(&v, p, 2);
            uint32_t bits = (uint32_t)v << 16;
            float x;
            memcpy(&x, &bits, 4);
            fprintf(f, "%g", x);
            break;
        }
        case CUVIL_DTYPE_UINT8:
        case CUVIL_DTYPE_UINT4:
        case CUVIL_DTYPE_BOOL: fprintf(f, "%u", (unsigned)*(const uint8_t *)p); break;
        default: fputs("?", f); break;
        }
    }
    fputs(count > 8 ? ", ...]" : "]", f);
}

/* ===== timing statistics ===================================================================== */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_stats {
    double median, p99, min, mean;
} bench_stats;

static bench_stats stats_of(double *t, long n) {
    bench_stats s = {0, 0, 0, 0};
    if (n <= 0)
        return s;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s.median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    long k = (long)ceil(0.99 * (double)n) - 1;   /* nearest rank */
    s.p99 = t[k < 0 ? 0 : k];
    s.min = t[0];
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += t[i];
    s.mean = sum / (double)n;
    return s;
}

/* This process's peak RSS. VmHWM first: Linux keeps ru_maxrss across execve, so a cuvil-run
 * started by a big parent (a Python benchmark) would report the parent's footprint. */
static double peak_rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
        fclose(f);
        if (kb >= 0) return (double)kb / 1024.0;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0;   /* Linux: kilobytes */
}

/* ===== main ================================================================================== */

int main(int argc, char **argv) {
    args a = {0};
    void *handle = NULL;
    const cuvil_model_desc *d = NULL;
    cuvil_model *m = NULL;
    const char **files = NULL;
    cuvil_host_tensor *tin = NULL;
    void **in_owned = NULL, **out_bufs = NULL, **bench_bufs = NULL;
    const void **in_ptrs = NULL;
    char **out_paths = NULL;
    bool *existed = NULL;   /* per output: its file was there before this run */
    bool *absent = NULL;    /* per output: an optional one the run gave no value (no file) */
    int64_t **in_dims = NULL, **out_dims = NULL;
    int64_t (*out_dim_bufs)[CUVIL_MAX_DIMS] = NULL;   /* the outputs' dims from run_shapes */
    cuvil_tensor_info *run_outs = NULL;   /* the outputs as this run made them (dims, nbytes) */
    char *made_dirs[64];
    int n_made = 0, n_written = 0;
    double *times = NULL;
    int rc = 1;

    /* a file-size limit (ulimit -f) makes a write fail with EFBIG, reported, not a kill */
    signal(SIGXFSZ, SIG_IGN);
    if (parse_args(argc, argv, &a))
        goto done;
    if (a.help) {
        fputs(usage_text, stdout);
        rc = 0;
        goto done;
    }

    double t_load = now_ms();
    if (load_model(a.model, &handle, &d))
        goto done;
    t_load = now_ms() - t_load;

    if (a.info && a.n_inputs == 0) {
        if (a.json) {
            fputs("{\"model\": ", stdout);
            json_str(stdout, a.model);
            fputs(", \"info\": ", stdout);
            json_info(stdout, d);
            fputs("}\n", stdout);
        } else {
            print_info(stdout, a.model, d);
        }
        rc = 0;
        goto done;
    }

    /* ---- inputs: every model input exactly once, exact dtype and shape ---- */
    int ni = d->n_inputs, no = d->n_outputs;
    files = calloc((size_t)ni + 1, sizeof *files);
    tin = calloc((size_t)ni + 1, sizeof *tin);
    in_owned = calloc((size_t)ni + 1, sizeof *in_owned);
    in_ptrs = calloc((size_t)ni + 1, sizeof *in_ptrs);
    out_bufs = calloc((size_t)no + 1, sizeof *out_bufs);
    out_paths = calloc((size_t)no + 1, sizeof *out_paths);
    existed = calloc((size_t)no + 1, sizeof *existed);
    absent = calloc((size_t)no + 1, sizeof *absent);
    if (!files || !tin || !in_owned || !in_ptrs || !out_bufs || !out_paths || !existed || !absent) {
        errf("out of memory");
        goto done;
    }
    if (resolve_inputs(&a, d, files))
        goto done;
    for (int i = 0; i < ni; i++) {
        char e[1024];
        if (!files[i])   /* an optional input left out: absent */
            continue;
        bool have = false;
        if (optional_proto(&d->inputs[i], files[i])) {   /* an OptionalProto: nothing, a tensor or a sequence */
            int kind = 0, n = 0;
            cuvil_host_tensor *ts = NULL;
            if (cuvil_optional_read_max(files[i], (uint64_t)d->inputs[i].nbytes + (1u << 20), d->inputs[i].seq_max + 1,
                                        d->inputs[i].is_sequence != 0, &kind, &tin[i], &ts, &n, e, sizeof e) != CUVIL_OK) {
                errf("input '%s': %s", d->inputs[i].name, e);
                goto done;
            }
            if (!kind)
                continue;
            if (kind == 2) {
                if (n > d->inputs[i].seq_max) {
                    cuvil_host_seq_free(ts, n);
                    errf("input '%s': %s: the sequence holds more than %d elements", d->inputs[i].name, files[i],
                         d->inputs[i].seq_max);
                    goto done;
                }
                if (seq_block(&d->inputs[i], files[i], ts, n, &in_owned[i]))
                    goto done;
                in_ptrs[i] = in_owned[i];
                continue;
            }
            have = kind == 1;   /* (-1: not an OptionalProto; the value's own file, read below) */
        }
        if (d->inputs[i].is_sequence) {
            if (read_seq_input(&d->inputs[i], files[i], &in_owned[i]))
                goto done;
            in_ptrs[i] = in_owned[i];
            continue;
        }
        /* the file holds this input's bytes plus a header: anything much larger is refused
         * before it is read (a FIFO or /dev/zero is refused outright) */
        if (!have && cuvil_tensor_read_max(files[i], (uint64_t)d->inputs[i].nbytes + (1u << 20), &tin[i], e,
                                           sizeof e) != CUVIL_OK) {
            errf("input '%s': %s", d->inputs[i].name, e);
            goto done;
        }
        if (!have && tin[i].name && strcmp(tin[i].name, d->inputs[i].name) != 0) {
            errf("input '%s': file %s holds the tensor '%s' (a TensorProto names its input; give "
                 "the file for '%s', or a .npy)", d->inputs[i].name, files[i], tin[i].name,
                 d->inputs[i].name);
            goto done;
        }
        /* NumPy has no bfloat16: a uint16 file is its bits (as the Python package takes uint16 views;
         * ONNX 1.12's test data stores bfloat16 tensors so) */
        if (tin[i].dtype == CUVIL_DTYPE_UINT16 && d->inputs[i].dtype == CUVIL_DTYPE_BFLOAT16) tin[i].dtype = CUVIL_DTYPE_BFLOAT16;
        /* nor int4: an int8 (uint8) file holds one element per byte (the model checks the range) */
        if ((tin[i].dtype == CUVIL_DTYPE_INT8 && d->inputs[i].dtype == CUVIL_DTYPE_INT4) ||
            (tin[i].dtype == CUVIL_DTYPE_UINT8 && d->inputs[i].dtype == CUVIL_DTYPE_UINT4))
            tin[i].dtype = d->inputs[i].dtype;
        if (check_input(&d->inputs[i], files[i], &tin[i], d->n_syms, d->syms))
            goto done;
        in_ptrs[i] = tin[i].data;
        if ((uintptr_t)tin[i].data % BUF_ALIGN != 0) {
            if (!(in_owned[i] = alloc_aligned(tin[i].nbytes))) {
                errf("out of memory for input '%s' (%zu bytes)", d->inputs[i].name, tin[i].nbytes);
                goto done;
            }
            memcpy(in_owned[i], tin[i].data, tin[i].nbytes);
            in_ptrs[i] = in_owned[i];
        }
    }
    for (int i = 0; i < no; i++) {
        if (!(out_bufs[i] = alloc_aligned(d->outputs[i].nbytes))) {
            errf("out of memory for output '%s' (%zu bytes)", d->outputs[i].name,
                 d->outputs[i].nbytes);
            goto done;
        }
    }

    /* ---- create and run ---- */
    int threads = a.threads;
    cuvil_model_options opts = {.n_threads = threads, .weights_path = NULL};
    double t_create = now_ms();
    cuvil_status st = d->create(&opts, &m);
    t_create = now_ms() - t_create;
    if (st != CUVIL_OK) {
        const char *msg = m ? d->errmsg(m) : NULL;
        errf("%s: create failed: %s", a.model, msg && *msg ? msg : cuvil_status_str(st));
        goto done;
    }
    double load_ms = t_load + t_create;
    void *const *outs = out_bufs;
    const void *const *ins = in_ptrs;
    /* the run's dims: the files' (a model with symbolic dims takes them, checks them and gives
     * the outputs' dims back) */
    in_dims = calloc((size_t)ni + 1, sizeof *in_dims);
    out_dims = calloc((size_t)no + 1, sizeof *out_dims);
    out_dim_bufs = calloc((size_t)no + 1, sizeof *out_dim_bufs);
    if (!in_dims || !out_dims || !out_dim_bufs) {
        errf("out of memory");
        goto done;
    }
    for (int i = 0; i < ni; i++) in_dims[i] = d->inputs[i].is_sequence ? NULL : tin[i].dims;   /* (a sequence's: its header) */
    for (int i = 0; i < no; i++) out_dims[i] = out_dim_bufs[i];
    double first_ms = now_ms();
    st = d->run_shapes(m, ins, (const int64_t *const *)in_dims, outs, out_dims);
    first_ms = now_ms() - first_ms;
    if (st != CUVIL_OK) {
        const char *msg = d->errmsg(m);
        errf("%s: run failed: %s", a.model, msg && *msg ? msg : cuvil_status_str(st));
        goto done;
    }
    /* the run's output dims: within the buffers sized by the descriptor, or the model is broken */
    if (!(run_outs = calloc((size_t)no + 1, sizeof *run_outs))) {
        errf("out of memory");
        goto done;
    }
    for (int i = 0; i < no; i++) {
        run_outs[i] = d->outputs[i];
        if ((absent[i] = d->outputs[i].is_optional && !d->output_present(m, i)))
            continue;
        if (d->outputs[i].is_sequence) {   /* its header: the count and each element's dims */
            const cuvil_tensor_info *to = &d->outputs[i];
            int64_t cnt = *(const int64_t *)out_bufs[i];
            bool ok = cnt >= 0 && cnt <= to->seq_max;
            for (int64_t e = 0; ok && e < cnt; e++) {
                const int64_t *ed = cuvil_seq_elem_dims(to, out_bufs[i], e);
                for (int k = 0; k < to->ndim; k++) ok &= ed[k] >= 0 && ed[k] <= to->dims[k];
            }
            if (!ok) {
                errf("%s: output '%s': the model gave a sequence outside its descriptor's (a broken model)", a.model, to->name);
                goto done;
            }
            continue;
        }
        size_t nb = cuvil_dtype_size(d->outputs[i].dtype);
        bool ok = true;
        for (int k = 0; k < d->outputs[i].ndim; k++) {
            int64_t v = out_dim_bufs[i][k];
            ok &= v >= 0 && v <= d->outputs[i].dims[k] && !__builtin_mul_overflow(nb, (size_t)(v < 0 ? 0 : v), &nb);
            run_outs[i].dims[k] = v;
        }
        if (!ok || nb > d->outputs[i].nbytes) {
            errf("%s: output '%s': the model gave dims outside its descriptor's %s", a.model, d->outputs[i].name,
                 "(a broken model)");
            goto done;
        }
        run_outs[i].nbytes = nb;
    }

    bench_stats bs = {0, 0, 0, 0};
    long warmup = 0;
    if (a.bench > 0) {
        warmup = a.warmup >= 0 ? a.warmup : (a.bench / 10 < 10 ? a.bench / 10 : 10);
        times = malloc((size_t)a.bench * sizeof *times);
        /* the timed runs write elsewhere: the files hold the first run's results */
        bench_bufs = calloc((size_t)no + 1, sizeof *bench_bufs);
        if (!times || !bench_bufs) {
            errf("out of memory");
            goto done;
        }
        for (int i = 0; i < no; i++) {
            if (!(bench_bufs[i] = alloc_aligned(d->outputs[i].nbytes))) {
                errf("out of memory for output '%s' (%zu bytes)", d->outputs[i].name,
                     d->outputs[i].nbytes);
                goto done;
            }
        }
        void *const *bench_outs = bench_bufs;
        for (long i = 0; i < warmup + a.bench; i++) {
            double t0 = now_ms();
            st = d->run_shapes(m, ins, (const int64_t *const *)in_dims, bench_outs, NULL);
            double t1 = now_ms();
            if (st != CUVIL_OK) {
                const char *msg = d->errmsg(m);
                errf("%s: run %ld failed: %s", a.model, i + 2,
                     msg && *msg ? msg : cuvil_status_str(st));
                goto done;
            }
            if (i >= warmup)
                times[i - warmup] = t1 - t0;
        }
        bs = stats_of(times, a.bench);
    }

    /* ---- outputs: written only after every run succeeded, all or none ---- */
    bool write_outputs = a.bench < 0 || a.output_dir;
    if (write_outputs && no > 0) {
        const char *dir = a.output_dir ? a.output_dir : ".";
        if (make_dirs(dir, made_dirs, &n_made, (int)(sizeof made_dirs / sizeof made_dirs[0])))
            goto done;
        char (*fnames)[256] = calloc((size_t)no, sizeof *fnames);
        if (!fnames) {
            errf("out of memory");
            goto done;
        }
        for (int i = 0; i < no; i++) {
            output_file_name(fnames[i], sizeof fnames[i] - 16, d->outputs[i].name, i);
            for (int j = 0; j < i; j++) {
                if (strcmp(fnames[i], fnames[j]) == 0) {   /* "a/b" and "a_b" */
                    size_t l = strlen(fnames[i]);
                    snprintf(fnames[i] + l, sizeof fnames[i] - l, "_%d", i);
                    j = -1;   /* re-check against all */
                }
            }
            size_t plen = strlen(dir) + strlen(fnames[i]) + 8;
            if (!(out_paths[i] = malloc(plen))) {
                free(fnames);
                errf("out of memory");
                goto done;
            }
            snprintf(out_paths[i], plen, "%s/%s.%s", dir, fnames[i], d->outputs[i].is_sequence ? "npz" : "npy");
        }
        free(fnames);
        /* an output file never replaces an input of this run or the model (an output named
         * "data" would otherwise overwrite ./data.npy while it is the input); a file that existed
         * before is never removed on failure */
        for (int i = 0; i < no; i++) {
            struct stat so, si;
            existed[i] = lstat(out_paths[i], &so) == 0;
            if (!existed[i])
                continue;
            for (int k = 0; k <= ni; k++) {
                const char *other = k < ni ? files[k] : a.model;
                if (stat(other, &si) == 0 && stat(out_paths[i], &so) == 0 && si.st_dev == so.st_dev &&
                    si.st_ino == so.st_ino) {
                    errf("output '%s' would be written to %s, which is %s of this run; choose another "
                         "--output-dir", d->outputs[i].name, out_paths[i], k < ni ? "an input" : "the model");
                    goto done;
                }
            }
        }
        for (int i = 0; i < no; i++) {
            const cuvil_tensor_info *to = &d->outputs[i];
            if (absent[i]) {   /* no value: no file */
                n_written++;
                continue;
            }
            if (to->is_sequence) {   /* a .npz of its elements, arr_0 ... */
                int64_t cnt = *(const int64_t *)out_bufs[i];
                cuvil_host_tensor *ts = calloc((size_t)cnt + 1, sizeof *ts);
                if (!ts) {
                    errf("out of memory");
                    goto done;
                }
                for (int64_t e = 0; e < cnt; e++) {
                    ts[e] = (cuvil_host_tensor){.dtype = to->dtype, .ndim = to->ndim,
                                                .data = cuvil_seq_elem_data(to, out_bufs[i], e)};
                    size_t nb = cuvil_dtype_size(to->dtype);
                    for (int k = 0; k < to->ndim; k++) nb *= (size_t)(ts[e].dims[k] = cuvil_seq_elem_dims(to, out_bufs[i], e)[k]);
                    ts[e].nbytes = nb;
                }
                char e[1024];
                cuvil_status ws = cuvil_npz_write(out_paths[i], ts, (int)cnt, e, sizeof e);
                free(ts);
                if (ws != CUVIL_OK) {
                    errf("output '%s': %s", to->name, e);
                    goto done;
                }
                n_written++;
                continue;
            }
            cuvil_host_tensor t = {.dtype = to->dtype, .ndim = to->ndim, .data = out_bufs[i], .nbytes = run_outs[i].nbytes};
            memcpy(t.dims, run_outs[i].dims, sizeof t.dims);   /* the run's dims */
            char e[1024];
            if (cuvil_npy_write(out_paths[i], &t, e, sizeof e) != CUVIL_OK) {
                errf("output '%s': %s", to->name, e);
                goto done;
            }
            n_written++;
        }
    }

    /* ---- report ---- */
    double rss = peak_rss_mb();
    int threads_used = threads > 1 ? threads : 1;
    if (a.json) {
        fputs("{\"model\": ", stdout);
        json_str(stdout, a.model);
        fprintf(stdout, ", \"threads\": %d, \"load_ms\": %.4f, \"first_ms\": %.4f", threads_used,
                load_ms, first_ms);
        if (a.bench > 0)
            fprintf(stdout, ", \"iters\": %ld, \"warmup\": %ld, \"median_ms\": %.4f, "
                    "\"p99_ms\": %.4f, \"min_ms\": %.4f, \"mean_ms\": %.4f", a.bench, warmup,
                    bs.median, bs.p99, bs.min, bs.mean);
        fprintf(stdout, ", \"peak_rss_mb\": %.2f, \"outputs\": [", rss);
        for (int i = 0; i < n_written; i++) {
            fprintf(stdout, "%s{\"name\": ", i ? ", " : "");
            json_str(stdout, d->outputs[i].name);
            fputs(", \"file\": ", stdout);
            json_str(stdout, absent[i] ? NULL : out_paths[i]);   /* (null: an optional output without a value) */
            fputc('}', stdout);
        }
        fputc(']', stdout);
        if (a.info) {
            fputs(", \"info\": ", stdout);
            json_info(stdout, d);
        }
        fputs("}\n", stdout);
    } else {
        if (a.info)
            print_info(stdout, a.model, d);
        char buf[512];
        for (int i = 0; i < n_written; i++) {
            safe_puts(stdout, d->outputs[i].name);
            fputs(": ", stdout);
            safe_puts(stdout, info_str(buf, sizeof buf, &run_outs[i]));
            fputs(" = ", stdout);
            if (absent[i]) {   /* (a file of that name there is an earlier run's: said, and left as it is) */
                struct stat so;
                printf("none (an optional output the run gave no value; no file%s)\n",
                       out_paths[i] && lstat(out_paths[i], &so) == 0 ? ", and the one there is from before this run" : "");
                continue;
            }
            if (run_outs[i].is_sequence)
                printf("%" PRId64 " elements", *(const int64_t *)out_bufs[i]);
            else
                preview(stdout, &run_outs[i], out_bufs[i]);
            fputs(" -> ", stdout);
            safe_line(stdout, "", out_paths[i]);
        }
        if (a.bench > 0) {
            fputs("model:     ", stdout);
            safe_puts(stdout, a.model);
            printf(" (threads=%d)\n", threads_used);
            printf("load:      %.3f ms (dlopen + create)\n", load_ms);
            printf("first run: %.3f ms\n", first_ms);
            printf("%ld runs (after %ld warmup): median %.3f ms, p99 %.3f ms, min %.3f ms, "
                   "mean %.3f ms\n", a.bench, warmup, bs.median, bs.p99, bs.min, bs.mean);
            printf("peak RSS:  %.1f MB\n", rss);
        }
    }
    if (fflush(stdout) != 0) {
        errf("cannot write to stdout: %s", strerror(errno));
        goto done;
    }
    rc = 0;

done:
    if (rc != 0) {
        /* no partial results: remove the files this run created (never one that was there
         * before), then the directories it made */
        for (int i = 0; i < n_written; i++)
            if (!existed[i] && !absent[i])
                unlink(out_paths[i]);
        for (int i = n_made - 1; i >= 0; i--)
            rmdir(made_dirs[i]);
        fprintf(stderr, "cuvil-run: %s\n", g_err[0] ? g_err : "failed");
    }
    for (int i = 0; i < n_made; i++)
        free(made_dirs[i]);
    if (m)
        d->destroy(m);
    if (d) {
        for (int i = 0; tin && i < d->n_inputs; i++)
            cuvil_host_tensor_free(&tin[i]);
        for (int i = 0; in_owned && i < d->n_inputs; i++)
            free(in_owned[i]);
        for (int i = 0; out_bufs && i < d->n_outputs; i++)
            free(out_bufs[i]);
        for (int i = 0; bench_bufs && i < d->n_outputs; i++)
            free(bench_bufs[i]);
        for (int i = 0; out_paths && i < d->n_outputs; i++)
            free(out_paths[i]);
    }
    free(times);
    free(files);
    free(tin);
    free(in_owned);
    free(in_ptrs);
    free(out_bufs);
    free(bench_bufs);
    free(out_paths);
    free(existed);
    free(absent);
    free(in_dims);
    free(out_dims);
    free(out_dim_bufs);
    free(run_outs);
    free(a.inputs);
    if (handle)
        dlclose(handle);
    return rc;
}
