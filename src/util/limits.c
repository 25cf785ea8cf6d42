/* limits.c -- the bounds on untrusted input (cuvil_limits in cuvil.h): defaults and parsing.
 * docs/SECURITY.md documents the same table; keep them in sync. */
#include "util/util.h"

#include <errno.h>
#include <string.h>

#define GiB ((uint64_t)1 << 30)

/* max: the most a limit may be raised to (0: any value), with the reason */
static const struct {
    const char *name;
    size_t offset;
    bool is_u64;
    uint64_t dflt, max;
    const char *why_max;
} table[] = {
    {"model_bytes", offsetof(cuvil_limits, model_bytes), true, 4 * GiB, 0, NULL},
    /* protobuf-c unpacks and frees messages recursively: a frame or two per level (about 2 KB
     * with the walk that checks the depth first; 4,000 levels used the whole 8 MiB stack, and an
     * AddressSanitizer build or a thread with a smaller stack has less) */
    {"nesting", offsetof(cuvil_limits, nesting), false, 64, CUVIL_MAX_NESTING,
     "the protobuf parser recurses once per level, and deeper would overflow the stack"},
    {"subgraph_depth", offsetof(cuvil_limits, subgraph_depth), false, 8, CUVIL_MAX_NESTING,
     "a graph inside a graph is a nesting level too"},
    {"nodes", offsetof(cuvil_limits, nodes), false, 100000, 0, NULL},
    {"values", offsetof(cuvil_limits, values), false, 4000000, 0, NULL},
    {"dim", offsetof(cuvil_limits, dim), false, (uint64_t)1 << 32, 0, NULL},
    {"tensor_bytes", offsetof(cuvil_limits, tensor_bytes), true, 16 * GiB, 0, NULL},
    {"total_bytes", offsetof(cuvil_limits, total_bytes), true, 32 * GiB, 0, NULL},
    {"folded_bytes", offsetof(cuvil_limits, folded_bytes), true, GiB / 4, 0, NULL},
    {"fold_ops", offsetof(cuvil_limits, fold_ops), false, (uint64_t)1 << 32, 0, NULL},
    /* 0: twice the model's constants plus 64 MiB (cir_packed_budget) */
    {"packed_bytes", offsetof(cuvil_limits, packed_bytes), true, 0, 0, NULL},
};
#define N_LIMITS (sizeof table / sizeof table[0])

void cuvil_limits_init(cuvil_limits *l) {
    for (size_t i = 0; i < N_LIMITS; i++) {
        char *f = (char *)l + table[i].offset;
        if (table[i].is_u64) *(uint64_t *)f = table[i].dflt;
        else *(int64_t *)f = (int64_t)table[i].dflt;
    }
}

cuvil_status cuvil_limits_set(cuvil_limits *l, const char *name, const char *value, char *err, size_t errlen) {
    size_t k = 0;
    while (k < N_LIMITS && strcmp(table[k].name, name)) k++;
    if (k == N_LIMITS) {
        char names[256];
        size_t o = 0;
        for (size_t i = 0; i < N_LIMITS && o < sizeof names; i++)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "", table[i].name);
        snprintf(err, errlen, "--limit %s: no such limit (limits: %s)", name, names);
        return CUVIL_ERR_INVALID_ARG;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    unsigned shift = 0;
    if (end != value && *end && !end[1]) {
        const char *units = "KMGT", *u = strchr(units, *end);
        if (u) {
            shift = 10 * (unsigned)(u - units + 1);
            end++;
        }
    }
    bool bad = errno || end == value || *end || value[0] == '-' || v == 0 || (shift && v > (UINT64_MAX >> shift));
    uint64_t x = (uint64_t)v << shift;
    if (!bad && !table[k].is_u64 && x > (uint64_t)INT64_MAX) bad = true;
    if (bad) {
        snprintf(err, errlen, "--limit %s=%s: expected a positive integer (with an optional K, M, G or T suffix)", name,
                 value);
        return CUVIL_ERR_INVALID_ARG;
    }
    if (table[k].max && x > table[k].max) {
        snprintf(err, errlen, "--limit %s=%s: at most %llu (%s)", name, value, (unsigned long long)table[k].max,
                 table[k].why_max);
        return CUVIL_ERR_INVALID_ARG;
    }
    char *f = (char *)l + table[k].offset;
    if (table[k].is_u64) *(uint64_t *)f = x;
    else *(int64_t *)f = (int64_t)x;
    return CUVIL_OK;
}

bool cuvil_shape_ok(const cuvil_limits *l, size_t esize, int ndim, const int64_t *dims, char *why, size_t len) {
    uint64_t bytes = esize ? esize : 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) {
            snprintf(why, len, "dim %d is negative (%lld)", i, (long long)dims[i]);
            return false;
        }
        if (dims[i] > l->dim) {
            snprintf(why, len, "dim %d = %lld is over the limit dim=%lld (raise it with --limit dim=N)", i,
                     (long long)dims[i], (long long)l->dim);
            return false;
        }
        if (dims[i] && (__builtin_mul_overflow(bytes, (uint64_t)dims[i], &bytes) || bytes > l->tensor_bytes)) {
            snprintf(why, len, "its size is over the limit tensor_bytes=%llu (raise it with --limit tensor_bytes=N)",
                     (unsigned long long)l->tensor_bytes);
            return false;
        }
    }
    return true;
}
