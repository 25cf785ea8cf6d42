/* toolchain.c -- writes the generated sources and invokes the C compiler: a shared library,
 * a static archive, or a folder of C sources with a Makefile for other toolchains. */
#include "codegen/toolchain_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ===== Where Cuvil's runtime lives ======================================================= */
/* $CUVIL_SOURCE_DIR / $CUVIL_BUILD_DIR override the paths baked in at build time, so a moved
 * build tree still works. */
static const char *source_dir(void) {
    const char *e = getenv("CUVIL_SOURCE_DIR");
    return e && *e ? e : CUVIL_SOURCE_DIR;
}
static const char *build_dir(void) {
    const char *e = getenv("CUVIL_BUILD_DIR");
    return e && *e ? e : CUVIL_BUILD_DIR;
}

const char *cuvil_host_target(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "x86_64-avx2";
#endif
    return "generic";
}

cuvil_status cuvil_check_target(cuvil_ctx *ctx, const char *target) {
    const char *list = CUVIL_TARGETS;   /* comma-separated, from the build */
    size_t n = strlen(target);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, target, n)) return CUVIL_OK;
        p = e ? e + 1 : p + len;
    }
    return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--target %s: not available in this build (available: %s)", target, list);
}

static const char *target_cflags(const char *target) {
    return !strcmp(target, "x86_64-avx2") ? "-mavx2 -mfma -mf16c" : "";
}

cuvil_status cuvil_read_abi_header(cuvil_ctx *ctx, char **text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/include/cuvil/cuvil_model.h", source_dir());
    uint8_t *d;
    size_t n;
    cuvil_status s = cuvil_read_file(ctx, path, &d, &n);
    if (s) return s;
    char *t = realloc(d, n + 1);
    if (!t) {
        free(d);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    t[n] = 0;
    *text = t;
    return CUVIL_OK;
}

/* ===== Running the compiler ============================================================= */
/* Runs argv with stdout+stderr to a log; on failure the message quotes the log's start. */
static cuvil_status run_cmd(cuvil_ctx *ctx, char *const *argv, const char *logpath, bool verbose) {
    if (verbose) {
        for (int i = 0; argv[i]; i++) fprintf(stderr, "%s%s", i ? " " : "cuvil: ", argv[i]);
        fputc('\n', stderr);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "cannot run %s: %s", argv[0], strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "waitpid: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return CUVIL_OK;
    char log[1200] = "";
    FILE *f = fopen(logpath, "r");
    if (f) {
        size_t k = fread(log, 1, sizeof log - 1, f);
        log[k] = 0;
        fclose(f);
    }
    return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "%s failed (exit %d):\n%s", argv[0],
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1, log);
}

/* Splits a space-separated string into argv slots (no quoting: flags only). */
static int split_into(char *s, char **argv, int at, int max) {
    for (char *tok = strtok(s, " "); tok && at < max - 1; tok = strtok(NULL, " ")) argv[at++] = tok;
    return at;
}

static cuvil_status write_text(cuvil_ctx *ctx, const char *dir, const char *name, const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return cuvil_write_file_atomic(ctx, path, data ? data : "", n);
}

static void weights_asm(cuvil_sb *s, const char *prefix) {
    cuvil_sb_printf(s,
                    "/* The model's weights, linked in from weights.bin (not a C array: fast to compile). */\n"
                    "    .section .rodata.%s_weights,\"a\"\n    .balign 64\n    .globl %s_weights\n"
                    "    .hidden %s_weights\n    .type %s_weights, @object\n%s_weights:\n    .incbin \"weights.bin\"\n"
                    "    .byte 0\n    .size %s_weights, . - %s_weights\n    .section .note.GNU-stack,\"\",@progbits\n",
                    prefix, prefix, prefix, prefix, prefix, prefix, prefix);
}

static cuvil_status write_sources(cuvil_ctx *ctx, const char *dir, const char *prefix, const cg_output *gen) {
    char hname[300];
    snprintf(hname, sizeof hname, "%s.h", prefix);
    cuvil_sb s = {0};
    weights_asm(&s, prefix);
    cuvil_status st;
    if ((st = write_text(ctx, dir, "model.c", gen->model_c.s, gen->model_c.len)) ||
        (st = write_text(ctx, dir, hname, gen->model_h.s, gen->model_h.len)) ||
        (st = write_text(ctx, dir, "weights.bin", gen->weights.s, gen->weights.len)) ||
        (st = write_text(ctx, dir, "weights.S", s.s, s.len))) {
        cuvil_sb_free(&s);
        return st;
    }
    cuvil_sb_free(&s);
    return CUVIL_OK;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}
static void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Compiles model.c and weights.S in dir to objects; returns their paths in dir. */
static cuvil_status compile_objects(cuvil_ctx *ctx, const char *dir, const char *target, const cuvil_options *o,
                                    bool shared) {
    char cc_buf[1024], flags_buf[256], inc_rt[4200], inc_dir[4200], src[4200], obj[4200], log[4200];
    const char *cc = o->cc ? o->cc : getenv("CC");
    snprintf(cc_buf, sizeof cc_buf, "%s", cc && *cc ? cc : CUVIL_C_COMPILER);
    snprintf(flags_buf, sizeof flags_buf, "%s", target_cflags(target));
    snprintf(inc_rt, sizeof inc_rt, "-I%s/runtime/include", source_dir());
    snprintf(inc_dir, sizeof inc_dir, "-I%s", dir);
    snprintf(log, sizeof log, "%s/cc.log", dir);
    const char *files[2][2] = {{"model.c", "model.o"}, {"weights.S", "weights.o"}};
    for (int f = 0; f < 2; f++) {
        char *argv[96];
        char cc_copy[1024], fl_copy[256];
        snprintf(cc_copy, sizeof cc_copy, "%s", cc_buf);
        snprintf(fl_copy, sizeof fl_copy, "%s", flags_buf);
        int a = split_into(cc_copy, argv, 0, 32);
        const char *fixed[] = {"-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
                               shared ? "-DCUVIL_MODEL_SHARED" : "-DCUVIL_MODEL_STATIC", inc_rt, inc_dir, "-c"};
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[a++] = (char *)fixed[i];
        a = split_into(fl_copy, argv, a, 60);
        snprintf(src, sizeof src, "%s/%s", dir, files[f][0]);
        snprintf(obj, sizeof obj, "%s/%s", dir, files[f][1]);
        argv[a++] = src;
        argv[a++] = "-o";
        argv[a++] = obj;
        char wa[4300];
        if (f == 1) {  /* .incbin finds weights.bin through the assembler's include path */
            snprintf(wa, sizeof wa, "-Wa,-I%s", dir);
            argv[a++] = wa;
        }
        argv[a] = NULL;
        cuvil_status s = run_cmd(ctx, argv, log, o->verbose);
        if (s) return s;
    }
    return CUVIL_OK;
}

static cuvil_status runtime_archive(cuvil_ctx *ctx, const char *target, char *out, size_t len) {
    snprintf(out, len, "%s/lib/cuvil/%s/libcuvil_rt.a", build_dir(), target);
    if (access(out, R_OK) != 0)
        return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "runtime for target %s not found at %s (run make, or set CUVIL_BUILD_DIR)",
                         target, out);
    return CUVIL_OK;
}

/* A build folder next to the output, so the final rename is atomic on one filesystem. */
static cuvil_status make_build_dir(cuvil_ctx *ctx, const char *output, char *dir, size_t len) {
    snprintf(dir, len, "%s.cuvil-build-XXXXXX", output);
    if (!mkdtemp(dir)) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot create a build folder beside it: %s", output, strerror(errno));
    return CUVIL_OK;
}

static cuvil_status move_into_place(cuvil_ctx *ctx, const char *from, const char *to) {
    if (rename(from, to) != 0) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot write: %s", to, strerror(errno));
    return CUVIL_OK;
}

/* Header path: the output path with its extension replaced by ".h". */
static void header_path(const char *output, char *out, size_t len) {
    snprintf(out, len, "%s", output);
    char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
    if (dot && (!slash || dot > slash)) *dot = 0;
    size_t n = strlen(out);
    snprintf(out + n, len - n, ".h");
}

cuvil_status cuvil_build_library(cuvil_ctx *ctx, const cg_output *gen, const char *prefix, const char *target,
                                 const cuvil_options *o, const char *output) {
    char dir[4200], rt[4200], lib[4300], hdr[4300], hsrc[4300], log[4300];
    cuvil_status s = runtime_archive(ctx, target, rt, sizeof rt);
    if (s || (s = make_build_dir(ctx, output, dir, sizeof dir))) return s;
    bool shared = o->emit != CUVIL_EMIT_A;
    if ((s = write_sources(ctx, dir, prefix, gen)) || (s = compile_objects(ctx, dir, target, o, shared))) goto done;
    snprintf(log, sizeof log, "%s/cc.log", dir);
    snprintf(lib, sizeof lib, "%s/out.lib", dir);
    char mo[4300], wo[4300];
    snprintf(mo, sizeof mo, "%s/model.o", dir);
    snprintf(wo, sizeof wo, "%s/weights.o", dir);
    if (shared) {
        char cc_copy[1024];
        const char *cc = o->cc ? o->cc : getenv("CC");
        snprintf(cc_copy, sizeof cc_copy, "%s", cc && *cc ? cc : CUVIL_C_COMPILER);
        char *argv[64];
        int a = split_into(cc_copy, argv, 0, 64);
        argv[a++] = "-shared";
        argv[a++] = "-o";
        argv[a++] = lib;
        argv[a++] = mo;
        argv[a++] = wo;
        argv[a++] = rt;
        argv[a++] = "-lm";
        argv[a++] = "-Wl,--no-undefined";
        argv[a] = NULL;
        if ((s = run_cmd(ctx, argv, log, o->verbose))) goto done;
    } else {
        /* one self-contained archive: the model's objects plus the runtime's (ar's MRI script) */
        char mri[4300], script[16000];
        snprintf(mri, sizeof mri, "%s/archive.mri", dir);
        snprintf(script, sizeof script, "CREATE %s\nADDLIB %s\nADDMOD %s\nADDMOD %s\nSAVE\nEND\n", lib, rt, mo, wo);
        if ((s = cuvil_write_file_atomic(ctx, mri, script, strlen(script)))) goto done;
        char *argv[] = {"sh", "-c", NULL, NULL};
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "ar -M < '%s'", mri);
        argv[2] = cmd;
        if (strchr(mri, '\'')) {
            s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "output path must not contain a quote for --emit a");
            goto done;
        }
        if ((s = run_cmd(ctx, argv, log, o->verbose))) goto done;
    }
    header_path(output, hdr, sizeof hdr);
    snprintf(hsrc, sizeof hsrc, "%s/%s.h", dir, prefix);
    if ((s = move_into_place(ctx, hsrc, hdr)) || (s = move_into_place(ctx, lib, output))) goto done;
done:
    if (o->keep_sources) fprintf(stderr, "cuvil: generated sources kept in %s\n", dir);
    else rm_tree(dir);
    return s;
}

/* ===== --emit c: a portable source folder ============================================== */
static cuvil_status copy_file(cuvil_ctx *ctx, const char *from, const char *to) {
    uint8_t *d;
    size_t n;
    cuvil_status s = cuvil_read_file(ctx, from, &d, &n);
    if (s) return s;
    s = cuvil_write_file_atomic(ctx, to, d, n);
    free(d);
    return s;
}

static cuvil_status mkdir_p(cuvil_ctx *ctx, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", tmp, strerror(errno));
            *p = '/';
        }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", tmp, strerror(errno));
    return CUVIL_OK;
}

/* Copies runtime/ (headers and kernel sources) recursively into dst/runtime. */
static cuvil_status copy_runtime(cuvil_ctx *ctx, const char *src, const char *dst, cuvil_sb *srcs, const char *rel) {
    DIR *d = opendir(src);
    if (!d) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", src, strerror(errno));
    cuvil_status s = mkdir_p(ctx, dst);
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char from[4200], to[4200], r[4200];
        snprintf(from, sizeof from, "%s/%s", src, e->d_name);
        snprintf(to, sizeof to, "%s/%s", dst, e->d_name);
        snprintf(r, sizeof r, "%s/%s", rel, e->d_name);
        struct stat st;
        if (stat(from, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            s = copy_runtime(ctx, from, to, srcs, r);
        } else {
            size_t l = strlen(e->d_name);
            bool is_c = l > 2 && !strcmp(e->d_name + l - 2, ".c");
            if (is_c || (l > 2 && !strcmp(e->d_name + l - 2, ".h")) || (l > 4 && !strcmp(e->d_name + l - 4, ".inc"))) {
                s = copy_file(ctx, from, to);
                if (is_c) cuvil_sb_printf(srcs, " \\\n\t%s", r);
            }
        }
    }
    closedir(d);
    return s;
}

cuvil_status cuvil_emit_sources(cuvil_ctx *ctx, const cg_output *gen, const char *prefix, const char *target,
                                const char *output) {
    struct stat st;
    if (stat(output, &st) == 0 && !S_ISDIR(st.st_mode))
        return cuvil_err(ctx, CUVIL_ERR_IO, "%s: exists and is not a folder", output);
    char tmp[4200];
    cuvil_status s = make_build_dir(ctx, output, tmp, sizeof tmp);
    if (s) return s;
    cuvil_sb srcs = {0}, mk = {0};
    char rt_src[4200], rt_dst[4300];
    snprintf(rt_src, sizeof rt_src, "%s/runtime", source_dir());
    snprintf(rt_dst, sizeof rt_dst, "%s/runtime", tmp);
    if ((s = write_sources(ctx, tmp, prefix, gen)) || (s = copy_runtime(ctx, rt_src, rt_dst, &srcs, "runtime"))) goto done;
    bool avx2 = !strcmp(target, "x86_64-avx2");
    cuvil_sb_printf(&mk,
                    "# Builds the model '%s' (target %s) with any C11 compiler: lib%s.so and lib%s.a.\n"
                    "# Generated by Cuvil %s. Cross builds: make CC=aarch64-linux-gnu-gcc (target generic).\n"
                    "CC ?= cc\nAR ?= ar\nCFLAGS ?= -O2\n"
                    "ISA_FLAGS = %s\n"
                    "ALL_FLAGS = -std=c11 -fPIC -fvisibility=hidden -D_GNU_SOURCE -Iruntime/include -I. $(ISA_FLAGS) $(CFLAGS)\n"
                    "RUNTIME_SRC =%s\n"
                    "RUNTIME_SRC := $(filter-out %s,$(RUNTIME_SRC))\n"
                    "RUNTIME_OBJ = $(RUNTIME_SRC:.c=.o)\n\n"
                    "all: lib%s.so lib%s.a\n\n"
                    "lib%s.so: model.o weights.o $(RUNTIME_OBJ)\n\t$(CC) -shared -o $@ $^ -lm\n\n"
                    "lib%s.a: model.o weights.o $(RUNTIME_OBJ)\n\t$(AR) rcs $@ $^\n\n"
                    "model.o: model.c %s.h\n\t$(CC) $(ALL_FLAGS) -DCUVIL_MODEL_SHARED -c model.c -o $@\n\n"
                    "weights.o: weights.S weights.bin\n\t$(CC) -c weights.S -o $@\n\n"
                    "%%.o: %%.c\n\t$(CC) $(ALL_FLAGS) -O3 -c $< -o $@\n\n"
                    "clean:\n\trm -f *.o $(RUNTIME_OBJ) lib%s.so lib%s.a\n\n.PHONY: all clean\n",
                    prefix, target, prefix, prefix, cuvil_version(), avx2 ? "-mavx2 -mfma -mf16c -DCUVIL_HAVE_AVX2=1" : "",
                    srcs.s ? srcs.s : "", avx2 ? "%_avx512.c %_neon.c %_rvv.c" : "%_avx2.c %_avx512.c %_neon.c %_rvv.c",
                    prefix, prefix, prefix, prefix, prefix, prefix, prefix);
    if ((s = write_text(ctx, tmp, "Makefile", mk.s, mk.len))) goto done;
    /* replace the output folder */
    if (stat(output, &st) == 0) rm_tree(output);
    s = move_into_place(ctx, tmp, output);
done:
    if (s) rm_tree(tmp);
    cuvil_sb_free(&srcs);
    cuvil_sb_free(&mk);
    return s;
}
