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

/* Zeroed, 64-byte aligned memory owned by the arena; NULL only when out of memory. */
void *cuvil_arena_alloc(cuvil_arena *a, size_t n);
char *cuvil_arena_strdup(cuvil_arena *a, const char *s);
void *cuvil_arena_memdup(cuvil_arena *a, const void *p, size_t n);
void cuvil_arena_free(cuvil_arena *a);

/* ===== Context ============================================================================ */
struct cuvil_ctx {
    cuvil_arena arena;
    cuvil_status status;
    char errmsg[2048];
};

/* Records a message on ctx and returns status, so that `return cuvil_err(ctx, ...)` reads well. */
cuvil_status cuvil_err(cuvil_ctx *ctx, cuvil_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like cuvil_err but keeps the message already on ctx and prefixes it (adds context). */
cuvil_status cuvil_err_prefix(cuvil_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

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

/* ===== Files ======================================================================== */
/* Reads a whole file into a malloc'd buffer. Returns CUVIL_OK or a status with a message on ctx. */
cuvil_status cuvil_read_file(cuvil_ctx *ctx, const char *path, uint8_t **data, size_t *size);
/* Writes data to path atomically (temp file in the same folder, then rename). */
cuvil_status cuvil_write_file_atomic(cuvil_ctx *ctx, const char *path, const void *data,
                                     size_t size);
/* Lower-case hex SHA-256 of data into out[65]. */
void cuvil_sha256_hex(const void *data, size_t size, char out[65]);

#endif /* CUVIL_UTIL_H */
