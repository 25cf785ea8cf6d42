/* toolchain.c -- writes the generated sources and invokes the C compiler: a shared library,
 * a static archive, or a folder of C sources with a Makefile for other toolchains.
 *
 * Output safety (cuvil.h): nothing is written where the user's files are until everything is
 * built. Sources are compiled in a build folder beside the output, registered for removal on
 * every exit path (tmpfiles.c), with the compiler run inside that folder on relative names, so
 * that no part of an output path (commas, spaces, newlines, quotes) reaches a command line or
 * a script. Finished files are renamed into place. An existing output is replaced only when
 * Cuvil wrote it: a library carries a marker string, a header its generated first line, an IR
 * or DOT file its generated header, and a source folder a manifest of what Cuvil put in it. */
#define _GNU_SOURCE 1   /* dladdr */
#include "codegen/toolchain_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <libgen.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MANIFEST ".cuvil-output"

/* ===== Where Cuvil's runtime lives ======================================================= */
/* Two roots: `share` holds include/cuvil/cuvil_model.h and runtime/ (the kernel sources and
 * cuvil_rt.h), `lib` holds lib/cuvil/<target>/libcuvil_rt.a. In a build, they are the source
 * and build folders baked in at build time. An installed Cuvil (make install PREFIX=P) finds
 * them beside itself: P/share/cuvil and P, located from the file this code was loaded from
 * (P/bin/cuvil-compile or P/lib/libcuvil.so), so an install works anywhere it is moved, with
 * the source tree gone. $CUVIL_SOURCE_DIR / $CUVIL_BUILD_DIR override both. */
static char install_share[PATH_MAX], install_lib[PATH_MAX];
static int install_found = -1;   /* -1: not looked yet */

static bool find_install(void) {
    if (install_found >= 0) return install_found;
    install_found = 0;
    Dl_info info;
    if (!dladdr((void *)cuvil_host_target, &info) || !info.dli_fname) return false;
    char self[PATH_MAX];
    if (!realpath(info.dli_fname, self)) return false;
    char *dir = dirname(self);            /* P/bin or P/lib */
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s", dir);
    char *p = dirname(prefix);            /* P */
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/share/cuvil/runtime/include/cuvil_rt.h", p);
    if (access(probe, R_OK) != 0) return false;
    if ((size_t)snprintf(install_share, sizeof install_share, "%s/share/cuvil", p) >= sizeof install_share ||
        (size_t)snprintf(install_lib, sizeof install_lib, "%s", p) >= sizeof install_lib)
        return false;
    install_found = 1;
    return true;
}

static const char *source_dir(void) {
    const char *e = getenv("CUVIL_SOURCE_DIR");
    if (e && *e) return e;
    return find_install() ? install_share : CUVIL_SOURCE_DIR;
}
static const char *build_dir(void) {
    const char *e = getenv("CUVIL_BUILD_DIR");
    if (e && *e) return e;
    return find_install() ? install_lib : CUVIL_BUILD_DIR;
}

/* The best target whose features (targets.inc) this CPU has: the same check as a model's
 * create() makes, so that a default build always runs where it was made. */
const char *cuvil_host_target(void) {
#if defined(__x86_64__)
    static const char *const best[] = {"x86_64-avx512", "x86_64-avx2"};
    for (size_t i = 0; i < sizeof best / sizeof best[0]; i++) {
        const cuvil_target_info *t = cuvil_target_find(best[i]);
        if (t && !cuvil_rt_cpu_lacks(t->features, NULL)) return best[i];
    }
#endif
    return "generic";
}

cuvil_status cuvil_check_target(cuvil_ctx *ctx, const char *target, bool need_runtime) {
    if (!cuvil_target_find(target))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--target %s: no such target (targets: %s)", target, cuvil_target_names());
    if (!need_runtime) return CUVIL_OK;   /* --emit c: sources for any target */
    const char *list = CUVIL_TARGETS;   /* comma-separated: the runtimes this build has */
    size_t n = strlen(target);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, target, n)) return CUVIL_OK;
        p = e ? e + 1 : p + len;
    }
    return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--target %s: this build has no runtime for it to link a library "
                     "(runtimes: %s); --emit c writes sources for any target", target, list);
}

static const char *target_cflags(const char *target) {
    const cuvil_target_info *t = cuvil_target_find(target);
    return t ? t->cflags : "";
}

cuvil_status cuvil_read_abi_header(cuvil_ctx *ctx, char **text) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/include/cuvil/cuvil_model.h", source_dir());
    uint8_t *d;
    size_t n;
    cuvil_status s = cuvil_read_file(ctx, path, "ABI header", (uint64_t)1 << 24, NULL, &d, &n);
    if (s) return s;
    d[n] = 0;   /* cuvil_read_file leaves room for it */
    *text = (char *)d;
    return CUVIL_OK;
}

/* ===== Paths ============================================================================== */
static bool path_join(char *out, size_t len, const char *dir, const char *name) {
    return (size_t)snprintf(out, len, "%s/%s", dir, name) < len;
}

/* Header path: the output path with its extension (if any) replaced by ".h". */
static void header_path(const char *output, char *out, size_t len) {
    snprintf(out, len, "%s", output);
    char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out, *dot = strrchr(base, '.');
    if (dot && dot > base) *dot = 0;
    size_t n = strlen(out);
    snprintf(out + n, len - n, ".h");
}

/* True when a and b name the same existing file. */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ===== Recognising Cuvil's own outputs ===================================================== */
/* Is the file at path one Cuvil wrote? Each kind has its own sign, and none of them can be
 * found in other files by accident:
 *   - a shared library: an ELF shared object (no program interpreter: not an executable) whose
 *     dynamic symbols are exactly what a model library exports: cuvil_model_entry and
 *     P_model, P_create, P_run, P_errmsg, P_destroy for one prefix P. Cuvil's own libraries and
 *     tools, programs, and a user's library that links a model's objects among its own code all
 *     export something else;
 *   - a static archive: an ar archive whose members are model.o (holding the marker string
 *     model.c defines, see codegen.c), weights.o and the runtime's objects, and nothing else;
 *   - a header, an IR or DOT file: its generated first line(s).
 * Reads are bounds-checked against the file's size: a hostile file is just "not Cuvil's". */
static bool map_file(const char *path, const unsigned char **data, size_t *size) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    if (ok) {
        *size = (size_t)st.st_size;
        *data = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        ok = *data != MAP_FAILED;
    }
    close(fd);
    return ok;
}

static bool range_ok(size_t size, uint64_t off, uint64_t len) { return off <= size && len <= size - off; }

/* Is name one of the symbols a model library exports? Sets *prefix_len for P_<fn> names. */
static bool model_symbol(const char *name, size_t len, size_t *prefix_len) {
    static const char *const fns[] = {"_model", "_create", "_run_shapes", "_run", "_errmsg", "_destroy", "_output_present"};
    *prefix_len = 0;
    if (len == 17 && !memcmp(name, "cuvil_model_entry", 17)) return true;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        size_t fl = strlen(fns[i]);
        if (len > fl && !memcmp(name + len - fl, fns[i], fl)) {
            *prefix_len = len - fl;
            return true;
        }
    }
    /* what some linkers add to every shared object */
    static const char *const linker[] = {"_init", "_fini", "__bss_start", "_edata", "_end"};
    for (size_t i = 0; i < sizeof linker / sizeof linker[0]; i++)
        if (len == strlen(linker[i]) && !memcmp(name, linker[i], len)) return true;
    return false;
}

static bool is_model_library(const unsigned char *p, size_t n) {
    Elf64_Ehdr eh;
    if (n < sizeof eh) return false;
    memcpy(&eh, p, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !range_ok(n, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr)) ||
        !range_ok(n, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        return false;
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_INTERP) return false;   /* a program, not a library */
    }
    bool entry = false, other = false;
    const unsigned char *prefix = NULL;
    size_t prefix_len = 0;
    for (int i = 0; i < eh.e_shnum && !other; i++) {
        Elf64_Shdr sh, str;
        memcpy(&sh, p + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_DYNSYM) continue;
        if (sh.sh_link >= eh.e_shnum || sh.sh_entsize != sizeof(Elf64_Sym) || !range_ok(n, sh.sh_offset, sh.sh_size))
            return false;
        memcpy(&str, p + eh.e_shoff + (uint64_t)sh.sh_link * sizeof str, sizeof str);
        if (!range_ok(n, str.sh_offset, str.sh_size)) return false;
        for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym) && !other; k++) {
            Elf64_Sym sym;
            memcpy(&sym, p + sh.sh_offset + k * sizeof sym, sizeof sym);
            if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;   /* imports, the null symbol */
            if (sym.st_name >= str.sh_size) return false;
            const char *name = (const char *)p + str.sh_offset + sym.st_name;
            const void *nul = memchr(name, 0, str.sh_size - sym.st_name);
            if (!nul) return false;
            size_t len = (size_t)((const char *)nul - name), pl;
            if (!model_symbol(name, len, &pl)) {
                other = true;
            } else if (pl) {   /* all P_<fn> share one prefix */
                if (!prefix) prefix = (const unsigned char *)name, prefix_len = pl;
                else if (pl != prefix_len || memcmp(prefix, name, pl)) other = true;
            } else if (len == 17) {
                entry = true;
            }
        }
    }
    return entry && !other;
}

/* The marker model.c defines, stored here with every byte XOR 0x20 so that this library does
 * not itself contain it. */
static void marker(char out[32]) {
    static const unsigned char enc[] = {
        'C' ^ 0x20, 'U' ^ 0x20, 'V' ^ 0x20, 'I' ^ 0x20, 'L' ^ 0x20, '-' ^ 0x20, 'M' ^ 0x20,
        'O' ^ 0x20, 'D' ^ 0x20, 'E' ^ 0x20, 'L' ^ 0x20, '-' ^ 0x20, 'O' ^ 0x20, 'U' ^ 0x20,
        'T' ^ 0x20, 'P' ^ 0x20, 'U' ^ 0x20, 'T' ^ 0x20, '-' ^ 0x20, 'V' ^ 0x20, '1' ^ 0x20,
    };
    size_t i = 0;
    for (; i < sizeof enc; i++) out[i] = (char)(enc[i] ^ 0x20);
    out[i] = 0;
}

/* Calls fn(name, data, size, arg) for each member of the ar archive at p; false when the
 * archive is malformed or fn returns false. */
static bool ar_members(const unsigned char *p, size_t n, bool (*fn)(const char *, const unsigned char *, size_t, void *),
                       void *arg) {
    if (n < 8 || memcmp(p, "!<arch>\n", 8)) return false;
    const unsigned char *longnames = NULL;   /* GNU ar's "//" member: names over 15 characters */
    size_t nlong = 0;
    for (size_t off = 8; off + 60 <= n;) {
        const unsigned char *h = p + off;
        char sz[11];
        memcpy(sz, h + 48, 10);
        sz[10] = 0;
        char *end;
        unsigned long long len = strtoull(sz, &end, 10);
        if (end == sz || memcmp(h + 58, "`\n", 2) || !range_ok(n, off + 60, len)) return false;
        char name[256];
        memcpy(name, h, 16);
        name[16] = 0;
        if (!memcmp(name, "//", 2)) {
            longnames = h + 60;
            nlong = (size_t)len;
            strcpy(name, "//");
        } else if (name[0] == '/' && name[1] >= '0' && name[1] <= '9') {
            /* "/123": the name at offset 123 of the long-name table, ending in "/\n" */
            unsigned long long at = strtoull(name + 1, NULL, 10);
            if (!longnames || at >= nlong) return false;
            size_t k = 0;
            while (at + k < nlong && longnames[at + k] != '/' && longnames[at + k] != '\n' && k < sizeof name - 1) {
                name[k] = (char)longnames[at + k];
                k++;
            }
            name[k] = 0;
        } else {
            char *slash = strchr(name, '/');
            if (slash && slash != name) *slash = 0;   /* "model.o/        " -> "model.o" */
            else if (slash) strcpy(name, "/");        /* the symbol index */
            else {                                    /* BSD-style: space padded */
                size_t k = strlen(name);
                while (k && name[k - 1] == ' ') name[--k] = 0;
            }
        }
        if (!fn(name, h + 60, (size_t)len, arg)) return false;
        off += 60 + len + (len & 1);
    }
    return true;
}

static bool collect_name(const char *name, const unsigned char *data, size_t size, void *arg) {
    (void)data, (void)size;
    if (cuvil_map_get(arg, name) >= 0) return true;   /* in both targets' archives */
    char *copy = cuvil_strdup(name);
    if (copy && cuvil_map_put(arg, copy, 1)) return true;
    cuvil_free(copy);
    return false;
}

typedef struct archive_check {
    cuvil_map runtime;   /* member names of the runtime archives this build has */
    bool model;          /* a model.o with the marker was seen */
} archive_check;

/* "part_0003.o": the object of one of the model's part files (codegen.c) */
static bool part_object(const char *name) {
    if (strncmp(name, "part_", 5)) return false;
    const char *p = name + 5;
    size_t d = strspn(p, "0123456789");
    return d >= 4 && !strcmp(p + d, ".o");
}

static bool check_member(const char *name, const unsigned char *data, size_t size, void *arg) {
    archive_check *c = arg;
    if (!strcmp(name, "model.o")) {
        char m[32];
        marker(m);
        c->model = memmem(data, size, m, strlen(m)) != NULL;
        return c->model;
    }
    /* the symbol index and long-name table are the archive's own; weights.o is the model's;
     * everything else must be a member of a runtime archive */
    return !strcmp(name, "/") || !strcmp(name, "//") || !strcmp(name, "weights.o") || part_object(name) ||
           cuvil_map_get(&c->runtime, name) >= 0;
}

/* Is the archive made of a model.o with the marker, weights.o and the runtime's objects only? */
static bool is_model_archive(const unsigned char *p, size_t n) {
    if (n < 8 || memcmp(p, "!<arch>\n", 8)) return false;
    archive_check c = {0};
    const char *list = CUVIL_TARGETS;
    for (const char *t = list; *t;) {
        size_t len = strcspn(t, ",");
        char path[PATH_MAX];
        const unsigned char *rp;
        size_t rn;
        if ((size_t)snprintf(path, sizeof path, "%s/lib/cuvil/%.*s/libcuvil_rt.a", build_dir(), (int)len, t) < sizeof path &&
            map_file(path, &rp, &rn)) {
            ar_members(rp, rn, collect_name, &c.runtime);
            munmap((void *)rp, rn);
        }
        t += len + (t[len] == ',');
    }
    bool ok = ar_members(p, n, check_member, &c) && c.model;
    for (size_t i = 0; i < c.runtime.cap; i++) cuvil_free((void *)c.runtime.keys[i]);
    cuvil_map_free(&c.runtime);
    return ok;
}

static bool is_library(const char *path) {
    const unsigned char *p;
    size_t n;
    if (!map_file(path, &p, &n)) return false;
    bool ours = is_model_library(p, n) || is_model_archive(p, n);
    munmap((void *)p, n);
    return ours;
}

/* Does the file start with `magic` and hold `needle` within its first `window` bytes? */
static bool file_has(const char *path, const char *magic, const char *needle, size_t window) {
    const unsigned char *p;
    size_t n;
    if (!map_file(path, &p, &n)) return false;
    size_t ml = strlen(magic), w = window < n ? window : n;
    bool found = n >= ml && !memcmp(p, magic, ml) && memmem(p, w, needle, strlen(needle)) != NULL;
    munmap((void *)p, n);
    return found;
}

/* Refuses to replace path unless it is absent or Cuvil wrote it (`ours`), or when it is the
 * model or a link. what: "output", "header". */
static cuvil_status check_replace(cuvil_ctx *ctx, const char *path, const char *model, const char *what,
                                  bool (*ours)(const char *)) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return CUVIL_OK;
        return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", path, strerror(errno));
    }
    if (model && same_file(path, model))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: the %s would overwrite the model itself", path, what);
    if (S_ISLNK(st.st_mode))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: the %s path is a symbolic link; Cuvil does not replace it", path,
                         what);
    if (S_ISDIR(st.st_mode)) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: the %s path is a folder", path, what);
    if (!S_ISREG(st.st_mode) || !ours(path))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG,
                         "%s: exists and was not written by Cuvil; refusing to overwrite it (remove it or choose another "
                         "--output)", path);
    return CUVIL_OK;
}

static bool is_header(const char *p) { return file_has(p, "/* ", " -- generated by Cuvil ", 512); }
static bool is_text(const char *p) {
    return file_has(p, "# CIR", "generated by Cuvil ", 512) || file_has(p, "digraph cir {", "generated by Cuvil ", 512);
}

/* ===== A folder written by --emit c: its manifest ====================================== */
/* The manifest lists one relative path per line: what Cuvil wrote, and what the folder's
 * Makefile builds. A folder may be replaced when it holds nothing else. */
typedef struct manifest {
    cuvil_map set;
    cuvil_arena strs;
    char unknown[PATH_MAX];   /* the first entry not in the manifest */
} manifest;

/* Walks dir (rel: its path inside the output folder) for an entry the manifest does not list;
 * returns 1 when one is found (in m->unknown), -1 on a read error, 0 when all is listed. */
static int find_unlisted(manifest *m, const char *dir, const char *rel, int depth) {
    DIR *dp = opendir(dir);
    if (!dp) return -1;
    int r = 0;
    struct dirent *e;
    while (!r && (e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[PATH_MAX], sub[PATH_MAX];
        if (!path_join(path, sizeof path, dir, e->d_name) ||
            (size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= sizeof sub)
            return closedir(dp), -1;
        struct stat st;
        char dirkey[PATH_MAX + 1];
        snprintf(dirkey, sizeof dirkey, "%s/", sub);
        if (lstat(path, &st) != 0) r = -1;
        else if (S_ISDIR(st.st_mode) && depth < 16 && cuvil_map_get(&m->set, dirkey) >= 0)
            r = find_unlisted(m, path, sub, depth + 1);
        else if (!S_ISREG(st.st_mode) || cuvil_map_get(&m->set, sub) < 0) {
            snprintf(m->unknown, sizeof m->unknown, "%s", sub);
            r = 1;
        }
    }
    closedir(dp);
    return r;
}

/* A manifest line as Cuvil writes them: a relative path of the characters of its own names
 * (letters, digits, `_ . + -`), components neither empty, `.` nor `..`; a folder ends in '/'.
 * Anything else means a manifest Cuvil did not write (a hostile folder could list
 * "../../home/you/.bashrc"). */
static bool manifest_entry_ok(const char *e) {
    if (!*e || *e == '/') return false;
    for (const char *c = e; *c;) {
        size_t n = strcspn(c, "/");
        if (!n || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) return false;
        for (size_t i = 0; i < n; i++)
            if (!((c[i] >= 'a' && c[i] <= 'z') || (c[i] >= 'A' && c[i] <= 'Z') || (c[i] >= '0' && c[i] <= '9') ||
                  c[i] == '_' || c[i] == '.' || c[i] == '+' || c[i] == '-'))
                return false;
        c += n;
        if (*c == '/') c++;
    }
    return true;
}

/* Reads dir's manifest; *n_found is the number of entries outside it (the first in m->unknown).
 * Returns false when there is no readable manifest, or one Cuvil cannot have written. */
static bool read_manifest(cuvil_ctx *ctx, const char *dir, manifest *m) {
    char path[PATH_MAX];
    if (!path_join(path, sizeof path, dir, MANIFEST)) return false;
    uint8_t *d;
    size_t n;
    cuvil_ctx quiet = {0};
    if (cuvil_read_file(&quiet, path, "manifest", (uint64_t)1 << 24, NULL, &d, &n)) return false;
    (void)ctx;
    d[n] = 0;
    bool ok = !strncmp((char *)d, "# Written by Cuvil", 18);
    for (char *line = (char *)d; ok && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        if (*line && *line != '#') {
            const char *copy = manifest_entry_ok(line) ? cuvil_arena_strdup(&m->strs, line) : NULL;
            ok = copy && cuvil_map_put(&m->set, copy, 1);
        }
        line = end ? end + 1 : line + strlen(line);
    }
    cuvil_free(d);
    return ok && cuvil_map_put(&m->set, MANIFEST, 1);
}

/* The whole of dir is Cuvil's (a manifest lists every file in it)? Else an error naming why. */
static cuvil_status check_folder(cuvil_ctx *ctx, const char *dir, const char *model) {
    static const char hint[] = "remove it or choose another --output";
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) return CUVIL_OK;
        return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", dir, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: is a symbolic link; Cuvil does not replace it", dir);
    if (!S_ISDIR(st.st_mode))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: exists and is not a folder (--emit c writes a folder)", dir);
    char rd[PATH_MAX], rm[PATH_MAX];
    if (model && realpath(dir, rd) && realpath(model, rm) && !strncmp(rm, rd, strlen(rd)) && rm[strlen(rd)] == '/')
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: the output folder holds the model; %s", dir, hint);
    DIR *dp = opendir(dir);
    if (!dp) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", dir, strerror(errno));
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
    closedir(dp);
    if (empty) return CUVIL_OK;
    manifest m = {0};
    cuvil_status s = CUVIL_OK;
    if (!read_manifest(ctx, dir, &m)) {
        s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG,
                      "%s: the folder is not empty and was not written by Cuvil (no %s manifest); refusing to replace it "
                      "(%s)", dir, MANIFEST, hint);
    } else {
        int r = find_unlisted(&m, dir, "", 0);
        if (r > 0)
            s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG,
                          "%s: holds '%s', which Cuvil did not write; refusing to replace the folder (%s)", dir, m.unknown,
                          hint);
        else if (r < 0)
            s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    }
    cuvil_map_free(&m.set);
    cuvil_arena_free(&m.strs);
    return s;
}

/* ===== Before any work: is the output acceptable? ====================================== */
cuvil_status cuvil_check_output(cuvil_ctx *ctx, const char *model, const cuvil_options *o, const char *output) {
    size_t n = strlen(output);
    if (!n) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--output is empty");
    if (o->emit == CUVIL_EMIT_IR || o->emit == CUVIL_EMIT_DOT) {
        if (!strcmp(output, "-")) return CUVIL_OK;
        return check_replace(ctx, output, model, "output", is_text);
    }
    const char *base = strrchr(output, '/');
    base = base ? base + 1 : output;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--output %s: name a file or folder, not '%s'", output,
                         *base ? base : "/");
    if (n >= PATH_MAX - 64) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--output: the path is too long");
    if (o->emit == CUVIL_EMIT_C) return check_folder(ctx, output, model);
    char hdr[PATH_MAX];
    header_path(output, hdr, sizeof hdr);
    if (!strcmp(hdr, output))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG,
                         "--output %s: the library would have the header's name (the header goes beside it as NAME.h); "
                         "use a .so or .a name", output);
    cuvil_status s = check_replace(ctx, output, model, "output", is_library);
    if (!s) s = check_replace(ctx, hdr, model, "header", is_header);
    return s;
}

/* ===== Running the compiler ============================================================= */
/* Starts argv inside dir (relative names only), stdin from in_name (or /dev/null), stdout and
 * stderr to dir/<log>; *pid the child, registered with the signal cleanup. */
static cuvil_status spawn_cmd(cuvil_ctx *ctx, const char *dir, char *const *argv, const char *in_name, const char *log,
                              bool verbose, pid_t *pid) {
    if (verbose) {
        fprintf(stderr, "cuvil: (in %s)", dir);
        for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
        fputc('\n', stderr);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    posix_spawn_file_actions_addopen(&fa, 0, in_name ? in_name : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    /* with the signal cleanup installed, the compiler gets a process group of its own so that
     * the handler can stop cc1 and as too, not only the driver */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (cuvil_tmp_own_group()) {
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
    }
    int rc = posix_spawnp(pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "cannot run %s: %s", argv[0], strerror(rc));
    if (!cuvil_tmp_add_child(*pid)) {   /* cannot happen: CUVIL_CHILD_MAX has room for every compile's jobs */
        if (cuvil_tmp_own_group()) kill(-*pid, SIGKILL);
        kill(*pid, SIGKILL);
        while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR) {}
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "too many C compilers running at once in this process");
    }
    return CUVIL_OK;
}

/* Waits for a child of spawn_cmd (what: the program; on: the file it worked on, or NULL); on
 * failure the message quotes the start of its log. */
static cuvil_status wait_cmd(cuvil_ctx *ctx, const char *dir, pid_t pid, const char *what, const char *on,
                             const char *log) {
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            cuvil_tmp_drop_child(pid);
            return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "waitpid: %s", strerror(errno));
        }
    cuvil_tmp_drop_child(pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return CUVIL_OK;
    char text[1200] = "", lp[PATH_MAX];
    if (path_join(lp, sizeof lp, dir, log)) {
        FILE *f = fopen(lp, "r");
        if (f) {
            size_t k = fread(text, 1, sizeof text - 1, f);
            text[k] = 0;
            fclose(f);
        }
    }
    if (WIFSIGNALED(status))
        return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "%s was killed by signal %d%s%s:\n%s", what, WTERMSIG(status),
                         on ? " compiling " : "", on ? on : "", text);
    return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "%s failed (exit %d)%s%s:\n%s", what, WEXITSTATUS(status),
                     on ? " compiling " : "", on ? on : "", text);
}

/* Runs argv inside dir and waits for it (log: dir/cc.log). */
static cuvil_status run_cmd(cuvil_ctx *ctx, const char *dir, char *const *argv, const char *in_name, bool verbose) {
    pid_t pid;
    cuvil_status s = spawn_cmd(ctx, dir, argv, in_name, "cc.log", verbose, &pid);
    return s ? s : wait_cmd(ctx, dir, pid, argv[0], NULL, "cc.log");
}

/* How many compilers run at once: the CPUs this process may run on, at most CUVIL_JOBS_MAX. */
static int n_jobs(void) {
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > CUVIL_JOBS_MAX ? CUVIL_JOBS_MAX : n;
}

/* Splits a space-separated string into argv slots (no quoting: flags only). */
static int split_into(char *s, char **argv, int at, int max) {
    char *save = NULL;
    for (char *tok = strtok_r(s, " ", &save); tok && at < max - 1; tok = strtok_r(NULL, " ", &save)) argv[at++] = tok;
    return at;
}

static cuvil_status write_text(cuvil_ctx *ctx, const char *dir, const char *name, const void *data, size_t n) {
    char path[PATH_MAX];
    if (!path_join(path, sizeof path, dir, name)) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: path too long", dir);
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

/* The weights as a C array: a string literal of exactly n bytes plus its NUL (the .incbin
 * version ends with a zero byte too), each byte printable or a three-digit octal escape (so no
 * escape can swallow the next character, and no trigraph or quote appears). */
static void weights_c(cuvil_sb *s, const char *prefix, const unsigned char *d, size_t n) {
    cuvil_sb_printf(s, "/* The model's weights as a C array (cuvil-compile --weights-format c). */\n"
                       "#if defined(__GNUC__)\n__attribute__((visibility(\"hidden\")))\n#endif\n"
                       "_Alignas(64) const unsigned char %s_weights[%zu] =\n", prefix, n + 1);
    if (!n) cuvil_sb_puts(s, "    \"\"");
    for (size_t i = 0; i < n; i += 64) {
        char line[64 * 4 + 16];
        size_t o = 0;
        line[o++] = ' ';
        line[o++] = ' ';
        line[o++] = ' ';
        line[o++] = ' ';
        line[o++] = '"';
        for (size_t k = i; k < n && k < i + 64; k++) {
            unsigned c = d[k];
            if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?') line[o++] = (char)c;
            else o += (size_t)snprintf(line + o, sizeof line - o, "\\%03o", c);
        }
        line[o++] = '"';
        line[o] = 0;
        cuvil_sb_printf(s, "%s%s", i ? "\n" : "", line);
    }
    cuvil_sb_puts(s, ";\n");
}

/* The model's C files (cg_split_files): their names are the generator's own. */
typedef struct src_files {
    cg_file *f;
    int n;
} src_files;

/* Does file name n end in ".c" (with something before it)? */
static bool c_file(const char *n) {
    size_t l = strlen(n);
    return l > 2 && !strcmp(n + l - 2, ".c");
}

static bool generated_name(const char *n) {
    size_t l = strlen(n);
    if (l < 3 || n[0] == '.' || (!c_file(n) && strcmp(n + l - 2, ".h"))) return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')) return false;
    return true;
}

static cuvil_status write_sources(cuvil_ctx *ctx, const char *dir, const char *prefix, const cg_output *gen,
                                  cuvil_weights_format wf, src_files *sf) {
    char hname[300];
    snprintf(hname, sizeof hname, "%s.h", prefix);
    sf->f = cg_split_files(gen->model_c.s ? gen->model_c.s : "", gen->model_c.len, &sf->n);
    if (!sf->f) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    cuvil_status st = CUVIL_OK;
    for (int i = 0; i < sf->n && !st; i++) {
        if (!generated_name(sf->f[i].name))
            return cuvil_err(ctx, CUVIL_ERR_INTERNAL, "generated a file named '%s'", sf->f[i].name);
        st = write_text(ctx, dir, sf->f[i].name, sf->f[i].text, sf->f[i].len);
    }
    if (st) return st;
    cuvil_sb s = {0};
    if (wf == CUVIL_WEIGHTS_C) weights_c(&s, prefix, (const unsigned char *)gen->weights.s, gen->weights.len);
    else weights_asm(&s, prefix);
    if (s.oom) st = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    else if (!(st = write_text(ctx, dir, hname, gen->model_h.s, gen->model_h.len))) {
        if (wf == CUVIL_WEIGHTS_C) st = write_text(ctx, dir, "weights.c", s.s, s.len);
        else if (!(st = write_text(ctx, dir, "weights.bin", gen->weights.s, gen->weights.len)))
            st = write_text(ctx, dir, "weights.S", s.s, s.len);
    }
    cuvil_sb_free(&s);
    return st;
}

/* "part_0003.c" -> "part_0003.o" (out holds 32 bytes) */
static void object_name(const char *src, char *out) {
    snprintf(out, 32, "%.*s.o", (int)(strlen(src) - 2), src);
}

/* The C compiler's command words: o->cc, else $CC, else the one Cuvil was built with. */
static const char *cc_words(const cuvil_options *o, char *buf, size_t len) {
    const char *cc = o->cc ? o->cc : getenv("CC");
    snprintf(buf, len, "%s", cc && *cc ? cc : CUVIL_C_COMPILER);
    return buf;
}

/* One compile of compile_objects: its command line (pointing into its own copies of the
 * compiler's words and the target's flags) and its log. */
typedef struct cc_job {
    char *argv[96];
    char cc[1024], flags[256], src[32], obj[32], log[48];
    pid_t pid;
} cc_job;

/* Compiles the model's C files and its weights (weights.S or .c) in dir, each to its object,
 * n_jobs() at a time. */
static cuvil_status compile_objects(cuvil_ctx *ctx, const char *dir, const char *target, const cuvil_options *o,
                                    bool shared, const src_files *sf) {
    char cc_buf[1024], inc_rt[PATH_MAX + 8];
    cc_words(o, cc_buf, sizeof cc_buf);
    snprintf(inc_rt, sizeof inc_rt, "-I%s/runtime/include", source_dir());
    bool wc = o->weights_format == CUVIL_WEIGHTS_C;
    int n = 1;
    for (int i = 0; i < sf->n; i++) n += c_file(sf->f[i].name);
    cc_job *jobs = cuvil_calloc((size_t)n, sizeof *jobs);
    if (!jobs) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i <= sf->n; i++) {
        const char *src = i < sf->n ? sf->f[i].name : wc ? "weights.c" : "weights.S";
        if (i < sf->n && !c_file(src)) continue;   /* a header */
        cc_job *j = &jobs[k];
        snprintf(j->src, sizeof j->src, "%s", src);
        object_name(src, j->obj);
        snprintf(j->log, sizeof j->log, "cc-%d.log", k);
        snprintf(j->cc, sizeof j->cc, "%s", cc_buf);
        snprintf(j->flags, sizeof j->flags, "%s", target_cflags(target));
        int a = split_into(j->cc, j->argv, 0, 32);
        if (!a) {
            cuvil_free(jobs);
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "the C compiler command is empty");
        }
        const char *fixed[] = {"-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
                               shared ? "-DCUVIL_MODEL_SHARED" : "-DCUVIL_MODEL_STATIC", inc_rt, "-c"};
        for (size_t q = 0; q < sizeof fixed / sizeof fixed[0]; q++) j->argv[a++] = (char *)fixed[q];
        a = split_into(j->flags, j->argv, a, 60);
        j->argv[a++] = j->src;
        j->argv[a++] = "-o";
        j->argv[a++] = j->obj;
        if (i == sf->n && !wc) j->argv[a++] = "-Wa,-I.";   /* .incbin finds weights.bin in the build folder */
        j->argv[a] = NULL;
        k++;
    }
    /* a window of n_jobs() compilers: the oldest is waited for before the next starts (the
     * parts are alike in size); after a failure nothing more starts and the rest finish */
    cuvil_status s = CUVIL_OK;
    const int window = n_jobs();
    int started = 0, done = 0;
    while (done < started || (!s && started < k)) {
        if (!s && started < k && started - done < window) {
            s = spawn_cmd(ctx, dir, jobs[started].argv, NULL, jobs[started].log, o->verbose, &jobs[started].pid);
            if (!s) started++;
            continue;
        }
        cuvil_ctx quiet = {0};
        cuvil_status w = wait_cmd(s ? &quiet : ctx, dir, jobs[done].pid, jobs[done].argv[0], jobs[done].src, jobs[done].log);
        cuvil_free(quiet.errlong);
        if (!s) s = w;
        done++;
    }
    cuvil_free(jobs);
    return s;
}

static cuvil_status runtime_archive(cuvil_ctx *ctx, const char *target, char *out, size_t len, int verbose) {
    snprintf(out, len, "%s/lib/cuvil/%s/libcuvil_rt.a", build_dir(), target);
    if (verbose) fprintf(stderr, "cuvil: runtime %s, headers %s\n", out, source_dir());
    if (access(out, R_OK) != 0)
        return cuvil_err(ctx, CUVIL_ERR_TOOLCHAIN, "runtime for target %s not found at %s (run make, or set CUVIL_BUILD_DIR)",
                         target, out);
    return CUVIL_OK;
}

static cuvil_status copy_file(cuvil_ctx *ctx, const char *from, const char *to) {
    uint8_t *d;
    size_t n;
    cuvil_status s = cuvil_read_file(ctx, from, "file", UINT64_MAX, NULL, &d, &n);
    if (s) return s;
    s = cuvil_write_file_atomic(ctx, to, d, n);
    cuvil_free(d);
    return s;
}

/* A build folder beside the output (so the final renames stay on one filesystem), registered
 * for removal on every exit path. */
static cuvil_status make_build_dir(cuvil_ctx *ctx, const char *output, char *dir, size_t len) {
    if ((size_t)snprintf(dir, len, "%s.cuvil-build-XXXXXX", output) >= len)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s: path too long", output);
    if (!mkdtemp(dir)) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot create a build folder beside it: %s", output, strerror(errno));
    if (!cuvil_tmp_register(dir)) {
        rmdir(dir);
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "too many compiles at once in this process (at most %d)",
                         CUVIL_TMP_MAX / 2);
    }
    return CUVIL_OK;
}

static void finish_build_dir(const cuvil_options *o, const char *dir) {
    if (o->keep_sources) {
        cuvil_tmp_forget(dir);
        fprintf(stderr, "cuvil: generated sources kept in %s\n", dir);
    } else {
        cuvil_tmp_remove(dir);
    }
}

cuvil_status cuvil_build_library(cuvil_ctx *ctx, const cg_output *gen, const char *prefix, const char *target,
                                 const cuvil_options *o, const char *model, const char *output) {
    char dir[PATH_MAX], rt[PATH_MAX], hdr[PATH_MAX], path[PATH_MAX];
    cuvil_status s = runtime_archive(ctx, target, rt, sizeof rt, o->verbose);
    if (s || (s = make_build_dir(ctx, output, dir, sizeof dir))) return s;
    bool shared = o->emit != CUVIL_EMIT_A;
    src_files sf = {0};
    char **argv = NULL;
    char (*objs)[32] = NULL;
    cuvil_sb script = {0};
    if ((s = write_sources(ctx, dir, prefix, gen, o->weights_format, &sf)) ||
        (s = compile_objects(ctx, dir, target, o, shared, &sf)))
        goto done;
    /* the objects: the model's files', then weights.o */
    objs = cuvil_calloc((size_t)sf.n + 1, sizeof *objs);
    argv = cuvil_calloc((size_t)sf.n + 64, sizeof *argv);
    if (!objs || !argv) {
        s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        goto done;
    }
    int n_obj = 0;
    for (int i = 0; i < sf.n; i++)
        if (c_file(sf.f[i].name)) object_name(sf.f[i].name, objs[n_obj++]);
    snprintf(objs[n_obj++], sizeof objs[0], "weights.o");
    if (shared) {
        char cc_copy[1024];
        cc_words(o, cc_copy, sizeof cc_copy);
        int a = split_into(cc_copy, argv, 0, 48);
        argv[a++] = "-shared";
        argv[a++] = "-o";
        argv[a++] = "out.lib";
        for (int i = 0; i < n_obj; i++) argv[a++] = objs[i];
        const char *rest[] = {rt, "-lm", "-pthread", "-Wl,--no-undefined"};
        for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) argv[a++] = (char *)rest[i];
        argv[a] = NULL;
        if ((s = run_cmd(ctx, dir, argv, NULL, o->verbose))) goto done;
    } else {
        /* one self-contained archive: the model's objects plus the runtime's (ar's MRI script,
         * on fixed names inside the build folder, read from stdin: no shell) */
        cuvil_sb_puts(&script, "CREATE out.lib\nADDLIB rt.a\n");
        for (int i = 0; i < n_obj; i++) cuvil_sb_printf(&script, "ADDMOD %s\n", objs[i]);
        cuvil_sb_puts(&script, "SAVE\nEND\n");
        if (script.oom) {
            s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (!path_join(path, sizeof path, dir, "rt.a") || (s = copy_file(ctx, rt, path)) ||
            (s = write_text(ctx, dir, "archive.mri", script.s, script.len)))
            goto done;
        char *ar[] = {"ar", "-M", NULL};
        if ((s = run_cmd(ctx, dir, ar, "archive.mri", o->verbose))) goto done;
    }
    /* into place: checked again (the build took a while), the library first, then the header */
    header_path(output, hdr, sizeof hdr);
    if ((s = cuvil_check_output(ctx, model, o, output))) goto done;
    if (!path_join(path, sizeof path, dir, "out.lib")) goto done;
    if (rename(path, output) != 0) {
        s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot write: %s", output, strerror(errno));
        goto done;
    }
    char hsrc[PATH_MAX + 300];
    snprintf(hsrc, sizeof hsrc, "%s/%s.h", dir, prefix);
    if (rename(hsrc, hdr) != 0) {
        s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot write: %s", hdr, strerror(errno));
        unlink(output);   /* the library just put there: no half output */
    }
done:
    cuvil_free(sf.f);
    cuvil_free(argv);
    cuvil_free(objs);
    cuvil_sb_free(&script);
    finish_build_dir(o, dir);
    return s;
}

/* ===== --emit c: a portable source folder ============================================== */
static cuvil_status mkdir_p(cuvil_ctx *ctx, const char *path) {
    char tmp[PATH_MAX];
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

/* Copies runtime/ (headers and kernel sources) recursively into dst/runtime; lists the C files
 * in srcs (Makefile syntax) and every file (and the object each C file becomes) in files. */
static cuvil_status copy_runtime(cuvil_ctx *ctx, const char *src, const char *dst, cuvil_sb *srcs, cuvil_sb *files,
                                 const char *rel, int depth) {
    if (depth > 8) return CUVIL_OK;
    DIR *d = opendir(src);
    if (!d) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", src, strerror(errno));
    cuvil_status s = mkdir_p(ctx, dst);
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char from[PATH_MAX], to[PATH_MAX], r[PATH_MAX];
        if (!path_join(from, sizeof from, src, e->d_name) || !path_join(to, sizeof to, dst, e->d_name) ||
            !path_join(r, sizeof r, rel, e->d_name))
            continue;
        struct stat st;
        if (stat(from, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            cuvil_sb_printf(files, "%s/\n", r);   /* folders are listed too (with a slash) */
            s = copy_runtime(ctx, from, to, srcs, files, r, depth + 1);
        } else {
            size_t l = strlen(e->d_name);
            bool is_c = c_file(e->d_name);
            if (is_c || (l > 2 && !strcmp(e->d_name + l - 2, ".h")) || (l > 4 && !strcmp(e->d_name + l - 4, ".inc"))) {
                s = copy_file(ctx, from, to);
                cuvil_sb_printf(files, "%s\n", r);
                if (is_c) {
                    cuvil_sb_printf(srcs, " \\\n\t%s", r);
                    cuvil_sb_printf(files, "%.*s.o\n", (int)(strlen(r) - 2), r);
                }
            }
        }
    }
    closedir(d);
    return s;
}

/* Removes rel (a manifest entry: checked by manifest_entry_ok) under the folder root: a regular
 * file, or (folder) an empty folder. Each folder on the way is opened without following a
 * symbolic link, so nothing outside root is reached, whatever was swapped in meanwhile. */
static void remove_under(int root, const char *rel, bool folder) {
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s", rel) >= sizeof buf) return;
    size_t l = strlen(buf);
    while (l && buf[l - 1] == '/') buf[--l] = 0;
    int fd = dup(root);
    char *comp = buf;
    for (char *slash; fd >= 0 && (slash = strchr(comp, '/'));) {
        *slash = 0;
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        fd = next;
        comp = slash + 1;
    }
    if (fd < 0) return;
    struct stat st;
    if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
        unlinkat(fd, comp, folder ? AT_REMOVEDIR : 0);
    close(fd);
}

static int longer_first(const void *a, const void *b) {
    size_t x = strlen(*(const char *const *)a), y = strlen(*(const char *const *)b);
    return x > y ? -1 : x < y;
}

/* Removes the files of a replaced --emit c folder that its manifest lists (regular files only,
 * then the listed folders once empty, then the folder): what Cuvil wrote. Anything else, which
 * appeared while it was replaced, stays, and one warning says where. */
static void remove_listed(const char *dir, const char *output) {
    manifest m = {0};
    cuvil_ctx quiet = {0};
    const char **keys = NULL;
    if (read_manifest(&quiet, dir, &m) && (keys = cuvil_calloc(m.set.n + 1, sizeof *keys))) {
        size_t n = 0;
        for (size_t i = 0; i < m.set.cap; i++)
            if (m.set.keys[i] && strcmp(m.set.keys[i], MANIFEST)) keys[n++] = m.set.keys[i];
        /* files first; then folders, the deepest first (a longer path cannot be a parent) */
        qsort(keys, n, sizeof *keys, longer_first);
        int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        for (int pass = 0; root >= 0 && pass < 2; pass++)
            for (size_t i = 0; i < n; i++) {
                size_t len = strlen(keys[i]);
                bool folder = len && keys[i][len - 1] == '/';
                if (folder == (pass == 1)) remove_under(root, keys[i], folder);
            }
        if (root >= 0) {
            unlinkat(root, MANIFEST, 0);
            close(root);
        }
    }
    cuvil_free(keys);
    cuvil_map_free(&m.set);
    cuvil_arena_free(&m.strs);
    cuvil_free(quiet.errlong);
    if (rmdir(dir) != 0)
        fprintf(stderr, "cuvil: warning: %s: files Cuvil did not write appeared in the folder while it was replaced; "
                        "they are kept in %s\n", output, dir);
}

cuvil_status cuvil_emit_sources(cuvil_ctx *ctx, const cg_output *gen, const char *prefix, const char *target,
                                const cuvil_options *o, const char *model, const char *output) {
    char tmp[PATH_MAX], old[PATH_MAX];
    cuvil_status s = make_build_dir(ctx, output, tmp, sizeof tmp);
    if (s) return s;
    cuvil_sb srcs = {0}, mk = {0}, files = {0}, mobj = {0}, mfiles = {0};
    src_files sf = {0};
    char rt_src[PATH_MAX], rt_dst[PATH_MAX];
    snprintf(rt_src, sizeof rt_src, "%s/runtime", source_dir());
    if (!path_join(rt_dst, sizeof rt_dst, tmp, "runtime")) {
        s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: path too long", tmp);
        goto done;
    }
    bool wc = o->weights_format == CUVIL_WEIGHTS_C;
    if ((s = write_sources(ctx, tmp, prefix, gen, o->weights_format, &sf)) ||
        (s = copy_runtime(ctx, rt_src, rt_dst, &srcs, &files, "runtime", 0)))
        goto done;
    {
        /* the ABI header, which the runtime's glue (runtime/glue/context.c) includes */
        char abi_src[PATH_MAX], abi_dst[PATH_MAX];
        snprintf(abi_src, sizeof abi_src, "%s/include/cuvil/cuvil_model.h", source_dir());
        if (!path_join(abi_dst, sizeof abi_dst, rt_dst, "include/cuvil_model.h")) {
            s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: path too long", rt_dst);
            goto done;
        }
        if ((s = copy_file(ctx, abi_src, abi_dst))) goto done;
        cuvil_sb_puts(&files, "runtime/include/cuvil_model.h\n");
    }
    /* the model's files, and the objects of its C files */
    for (int i = 0; i < sf.n; i++) {
        cuvil_sb_printf(&mfiles, "%s\n", sf.f[i].name);
        if (!c_file(sf.f[i].name)) continue;
        char obj[32];
        object_name(sf.f[i].name, obj);
        cuvil_sb_printf(&mobj, " %s", obj);
        cuvil_sb_printf(&mfiles, "%s\n", obj);
    }
    /* the target's flags and ISA kernel files, the other ISAs' files left out */
    const cuvil_target_info *ti = cuvil_target_find(target);
    char isa[512], skip[256] = "";
    static const char *const suffixes[] = {"avx2", "avx512", "neon", "rvv"};
    snprintf(isa, sizeof isa, "%s", ti->cflags);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        /* is suffixes[i] one of the target's space-separated kernel suffixes? */
        bool has = false;
        size_t sl = strlen(suffixes[i]);
        for (const char *k = ti->kernels; *k;) {
            size_t l = strcspn(k, " ");
            has |= l == sl && !strncmp(k, suffixes[i], l);
            k += l;
            k += strspn(k, " ");
        }
        if (has) {
            size_t l = strlen(isa);
            snprintf(isa + l, sizeof isa - l, " -DCUVIL_HAVE_");
            for (const char *c = suffixes[i]; *c && strlen(isa) + 2 < sizeof isa; c++) {
                l = strlen(isa);
                isa[l] = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
                isa[l + 1] = 0;
            }
            snprintf(isa + strlen(isa), sizeof isa - strlen(isa), "=1");
        } else {
            snprintf(skip + strlen(skip), sizeof skip - strlen(skip), "%s%%_%s.c", *skip ? " " : "", suffixes[i]);
        }
    }
    cuvil_sb_printf(&mk,
                    "# Builds the model '%s' (target %s) with any C11 compiler: lib%s.so and lib%s.a.\n"
                    "# Generated by Cuvil %s. Cross builds: make CC=aarch64-linux-gnu-gcc (targets generic, aarch64-neon).\n"
                    "CC ?= cc\nAR ?= ar\nCFLAGS ?= -O2\n"
                    "ISA_FLAGS = %s\n"
                    "ALL_FLAGS = -std=c11 -fPIC -fvisibility=hidden -D_GNU_SOURCE -Iruntime/include $(ISA_FLAGS) $(CFLAGS)\n"
                    "RUNTIME_SRC =%s\n"
                    "RUNTIME_SRC := $(filter-out %s,$(RUNTIME_SRC))\n"
                    "RUNTIME_OBJ = $(RUNTIME_SRC:.c=.o)\n"
                    "MODEL_OBJ =%s\n\n"
                    "all: lib%s.so lib%s.a\n\n"
                    "lib%s.so: $(MODEL_OBJ) weights.o $(RUNTIME_OBJ)\n\t$(CC) -shared -o $@ $^ -lm -pthread\n\n"
                    "lib%s.a: $(MODEL_OBJ) weights.o $(RUNTIME_OBJ)\n\t$(AR) rcs $@ $^\n\n"
                    "$(MODEL_OBJ): %%.o: %%.c cuvil_model_int.h %s.h\n\t$(CC) $(ALL_FLAGS) -DCUVIL_MODEL_SHARED -c $< -o $@\n\n"
                    "%s"
                    "%%.o: %%.c\n\t$(CC) $(ALL_FLAGS) -O3 -c $< -o $@\n\n"
                    "clean:\n\trm -f *.o $(RUNTIME_OBJ) lib%s.so lib%s.a\n\n.PHONY: all clean\n",
                    prefix, target, prefix, prefix, cuvil_version(), isa, srcs.s ? srcs.s : "", skip,
                    mobj.s ? mobj.s : "", prefix, prefix, prefix, prefix, prefix,
                    wc ? "weights.o: weights.c\n\t$(CC) $(ALL_FLAGS) -c weights.c -o $@\n\n"
                       : "weights.o: weights.S weights.bin\n\t$(CC) -c weights.S -o $@\n\n",
                    prefix, prefix);
    cuvil_sb man = {0};
    cuvil_sb_printf(&man,
                    "# Written by Cuvil %s (cuvil-compile --emit c). Cuvil replaces this folder only while it holds\n"
                    "# nothing but the files below: what Cuvil wrote, and what its Makefile builds.\n"
                    "%s%s.h\n%sMakefile\nweights.o\nlib%s.so\nlib%s.a\nruntime/\n%s",
                    cuvil_version(), mfiles.s ? mfiles.s : "", prefix, wc ? "weights.c\n" : "weights.bin\nweights.S\n", prefix,
                    prefix, files.s ? files.s : "");
    if (mk.oom || man.oom || srcs.oom || files.oom || mobj.oom || mfiles.oom)
        s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    if (!s) s = write_text(ctx, tmp, "Makefile", mk.s, mk.len);
    if (!s) s = write_text(ctx, tmp, MANIFEST, man.s, man.len);
    cuvil_sb_free(&man);
    if (s) goto done;
    /* replace the folder: checked again now; the new one takes the old one's place in one
     * step (renameat2's exchange; where the file system cannot, the old one moves aside first),
     * then of the old one what its manifest lists goes, file by file: never a scan, so that a
     * file that appeared in it meanwhile is kept */
    if ((s = cuvil_check_output(ctx, model, o, output))) goto done;
    struct stat st;
    bool had_old = lstat(output, &st) == 0;
    chmod(tmp, 0755);   /* mkdtemp made it private; the folder is an ordinary source tree */
    if (had_old && renameat2(AT_FDCWD, tmp, AT_FDCWD, output, RENAME_EXCHANGE) == 0) {
        cuvil_tmp_forget(tmp);   /* it holds the old folder now: not the signal cleanup's to remove */
        remove_listed(tmp, output);
        tmp[0] = 0;
        goto done;
    }
    if (had_old) {
        if ((size_t)snprintf(old, sizeof old, "%s.cuvil-old-XXXXXX", output) >= sizeof old || !mkdtemp(old) ||
            rename(output, old) != 0) {
            s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot move the previous output aside: %s", output, strerror(errno));
            if (old[0]) rmdir(old);
            goto done;
        }
    }
    if (rename(tmp, output) != 0) {
        s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot write: %s", output, strerror(errno));
        if (had_old) rename(old, output);
        goto done;
    }
    cuvil_tmp_forget(tmp);
    tmp[0] = 0;
    if (had_old) remove_listed(old, output);
done:
    if (tmp[0]) cuvil_tmp_remove(tmp);   /* what was not renamed into place */
    cuvil_free(sf.f);
    cuvil_sb_free(&mobj);
    cuvil_sb_free(&mfiles);
    cuvil_sb_free(&srcs);
    cuvil_sb_free(&mk);
    cuvil_sb_free(&files);
    return s;
}
