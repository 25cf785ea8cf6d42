/*
 * util.h -- small pieces every part of the compiler uses: the context with its error message,
 * an arena allocator, a growable string buffer, a string->int map, checked size arithmetic.
 */
#ifndef CUVIL_UTIL_H
#define CUVIL_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuvil/cuvil.h"

/* ===== Allocation ======================================================================
 * Every allocation of the compiler goes through these, so that a test can make the N-th one
 * fail (fault injection) and count what is still allocated (leak check without a sanitizer).
 * cuvil_free() releases memory from any of them. */
void *cuvil_malloc(size_t n);
void *cuvil_calloc(size_t n, size_t size);
void *cuvil_realloc(void *p, size_t n);
void *cuvil_aligned_alloc(size_t align, size_t n);   /* any n; align a power of two >= 8 */
char *cuvil_strdup(const char *s);
void cuvil_free(void *p);
/* Test hooks (not for production use): after `n` more successful allocations every further
 * one fails (n < 0: never). Returns the number of allocations made so far. */
void cuvil_alloc_fail_after(long n);
long cuvil_alloc_count(void);
/* Allocations made through the functions above and not yet freed. */
long cuvil_alloc_outstanding(void);

/* A broken internal invariant: abort with file and line (never for bad user input). */
#define CUVIL_ASSERT(x)                                                                      \
    do {                                                                                     \
        if (!(x)) cuvil_panic(__FILE__, __LINE__, #x);                                       \
    } while (0)
_Noreturn void cuvil_panic(const char *file, int line, const char *what);

/* ===== Arena: bump allocation, freed all at once ==================================== */
typedef struct cuvil_arena_block cuvil_arena_block;
typedef struct cuvil_arena {
    cuvil_arena_block *head;
} cuvil_arena;

/* Zeroed memory owned by the arena, 64-byte aligned when n >= 64 (16 below); NULL only when
 * out of memory. */
void *cuvil_arena_alloc(cuvil_arena *a, size_t n);
char *cuvil_arena_strdup(cuvil_arena *a, const char *s);
void *cuvil_arena_memdup(cuvil_arena *a, const void *p, size_t n);
void cuvil_arena_free(cuvil_arena *a);
/* Frees everything but the first block and empties it: memory for another round. */
void cuvil_arena_reset(cuvil_arena *a);

/* ===== Context ============================================================================ */
struct cuvil_ctx {
    cuvil_arena arena;
    cuvil_status status;
    char errmsg[2048];
    /* a message longer than errmsg (a list of every unsupported op of a model): on the heap, up
     * to CUVIL_ERRMSG_MAX bytes; cuvil_errmsg() returns it when set */
    char *errlong;
};
#define CUVIL_ERRMSG_MAX ((size_t)1 << 20)

/* The context a graph reports on (cuvil.c); NULL for NULL. */
cuvil_ctx *cuvil_graph_ctx_(cuvil_graph *g);

/* Records a message on ctx and returns status, so that `return cuvil_err(ctx, ...)` reads well. */
cuvil_status cuvil_err(cuvil_ctx *ctx, cuvil_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Forgets the message on ctx (status unchanged). */
void cuvil_err_clear(cuvil_ctx *ctx);
/* Like cuvil_err but keeps the message already on ctx and prefixes it (adds context). */
cuvil_status cuvil_err_prefix(cuvil_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ===== Limits (limits.c) ===================================================================== */
/* Fills l with the documented defaults. */
void cuvil_limits_init(cuvil_limits *l);
/* Checks a shape against the limits: every dim in [0, l->dim], and the product of the dims
 * (a 0 counted as 1, so that every partial product is bounded too) times esize at most
 * l->tensor_bytes. On failure writes the reason into why and returns false. Every shape that
 * enters the IR passes this check, so size arithmetic on IR shapes cannot overflow. */
bool cuvil_shape_ok(const cuvil_limits *l, size_t esize, int ndim, const int64_t *dims, char *why, size_t len);

/* ===== String buffer ========================================================================= */
typedef struct cuvil_sb {
    char *s;
    size_t len, cap;
    bool oom;
} cuvil_sb;

void cuvil_sb_printf(cuvil_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cuvil_sb_vprintf(cuvil_sb *b, const char *fmt, va_list ap);
void cuvil_sb_puts(cuvil_sb *b, const char *s);
void cuvil_sb_append(cuvil_sb *b, const void *p, size_t n);
/* Appends s as the body of a C string literal (escaped, no quotes). */
void cuvil_sb_c_escape(cuvil_sb *b, const char *s);
/* Appends text that is safe inside a C block comment, a DOT string and a terminal: letters,
 * digits and `_ .,:;=+-[]()<>#@!%&|^~{}$'` are kept, every other byte (among them `*`, `/`,
 * `\`, `?`, quotes, control characters and non-ASCII) becomes '_'; at most max bytes of s are
 * used (then "..." is appended). The model's strings reach comments only through this. */
void cuvil_sb_safe_text(cuvil_sb *b, const char *s, size_t max);
/* The same, but '*' and '/' (of a dim's expression, "batch*seq", "H/2") are kept where no
 * neighbour, written before or in s, makes a comment's opener or closer or "//" of them, and
 * never as s's last byte. */
void cuvil_sb_safe_expr(cuvil_sb *b, const char *s, size_t max);
/* The character cuvil_sb_safe_text() writes for c: c itself, or '_'. */
char cuvil_safe_char(unsigned char c);
/* Appends s escaped for a DOT double-quoted string: quotes and backslashes escaped, control
 * characters as spaces, bytes that are not valid UTF-8 as '?'. */
void cuvil_sb_dot_escape(cuvil_sb *b, const char *s);
void cuvil_sb_free(cuvil_sb *b);

/* ===== String -> int map (open addressing) ======================================== */
typedef struct cuvil_map {
    const char **keys;
    int *vals;
    size_t cap, n;
} cuvil_map;

/* Returns false when out of memory. Keys are not copied. */
bool cuvil_map_put(cuvil_map *m, const char *key, int val);
/* Returns the value, or -1 when absent. */
int cuvil_map_get(const cuvil_map *m, const char *key);
void cuvil_map_free(cuvil_map *m);

/* ===== Checked arithmetic on model-supplied numbers ================================ */
static inline bool cuvil_mul_ovf(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline bool cuvil_add_ovf(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out);
}
static inline size_t cuvil_align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* int64 arithmetic on model numbers with a sticky overflow flag: a chain of operations is
 * written plainly and checked once, `if (ovf) return error`. On overflow the result is 0. */
static inline int64_t cuvil_i64_add(bool *ovf, int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) { *ovf = true; return 0; }
    return r;
}
static inline int64_t cuvil_i64_sub(bool *ovf, int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) { *ovf = true; return 0; }
    return r;
}
static inline int64_t cuvil_i64_mul(bool *ovf, int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) { *ovf = true; return 0; }
    return r;
}

/* ===== Files ======================================================================== */
/* Opens path for reading without blocking on a FIFO or device, and checks that it is a
 * regular file of at most max_bytes. Returns the fd (>= 0) and its size, or -1 with a message
 * on ctx naming `what` ("model", "external data file 'w.bin'"). */
int cuvil_open_regular(cuvil_ctx *ctx, const char *path, const char *what, uint64_t max_bytes,
                       const char *limit_name, uint64_t *size);
/* Reads a whole regular file of at most max_bytes (the limit called limit_name in messages,
 * if not NULL) into a cuvil_malloc'd buffer. Returns CUVIL_OK or a status with a message on
 * ctx. */
cuvil_status cuvil_read_file(cuvil_ctx *ctx, const char *path, const char *what, uint64_t max_bytes,
                             const char *limit_name, uint8_t **data, size_t *size);
/* Writes data to path atomically (temp file in the same folder, then rename); on failure
 * (a full disk, a signal) no temp file is left. */
cuvil_status cuvil_write_file_atomic(cuvil_ctx *ctx, const char *path, const void *data,
                                     size_t size);
/* Test hook: the N-th write through cuvil_write_file_atomic() from now fails with ENOSPC
 * (n <= 0: never). */
void cuvil_write_fail_after(long n);

/* ===== Temporary paths removed on every exit (tmpfiles.c) ==========================
 * A folder or file registered here is removed by cuvil_tmp_remove(), and also when the
 * process is killed by a signal that cuvil_install_signal_cleanup() covers. At most
 * CUVIL_TMP_MAX are registered at once (a thread-safe, lock-free table). */
#define CUVIL_TMP_MAX 64
bool cuvil_tmp_register(const char *path);
/* Forgets path without removing it (it was renamed into place). */
void cuvil_tmp_forget(const char *path);
/* Removes path (a file, or a folder with everything in it) and forgets it. */
void cuvil_tmp_remove(const char *path);
/* A child process the compiler waits for (a C compiler), killed first by the signal cleanup;
 * at most CUVIL_CHILD_MAX at once (false: no room): room for every compile the table above
 * admits (CUVIL_TMP_MAX / 2) running CUVIL_JOBS_MAX compilers each. Dropped once waited for. */
#define CUVIL_JOBS_MAX 16
#define CUVIL_CHILD_MAX (CUVIL_TMP_MAX / 2 * CUVIL_JOBS_MAX)
bool cuvil_tmp_add_child(long pid);
void cuvil_tmp_drop_child(long pid);
/* True once cuvil_install_signal_cleanup() ran: then the C compiler is started in a process
 * group of its own, which the handler stops as a whole (the driver and its cc1 and as). */
bool cuvil_tmp_own_group(void);
/* Lower-case hex SHA-256 of data into out[65]. */
void cuvil_sha256_hex(const void *data, size_t size, char out[65]);

#endif /* CUVIL_UTIL_H */
