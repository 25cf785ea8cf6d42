/* limits.c -- the bounds on untrusted input (cuvil_limits in cuvil.h): defaults and parsing.
 * docs/SECURITY.md documents the same table; keep them in sync. */
#include "util/util.h"

#include <errno.h>
#include <string.h>

#define GiB ((uint64_t)1 << 30)

static const struct {
    const char *name;
    size_t offset;
    bool is_u64;
    uint64_t dflt;
} table[] = {
    {"model_bytes", offsetof(cuvil_limits, model_bytes), true, 4 * GiB},
    {"nesting", offsetof(cuvil_limits, nesting), false, 64},
    {"subgraph_depth", offsetof(cuvil_limits, subgraph_depth), false, 8},
    {"nodes", offsetof(cuvil_limits, nodes), false, 100000},
    {"values", offsetof(cuvil_limits, values), false, 4000000},
    {"dim", offsetof(cuvil_limits, dim), false, (uint64_t)1 << 32},
    {"tensor_bytes", offsetof(cuvil_limits, tensor_bytes), true, 16 * GiB},
    {"total_bytes", offsetof(cuvil_limits, total_bytes), true, 32 * GiB},
    {"folded_bytes", offsetof(cuvil_limits, folded_bytes), true, GiB / 4},
    {"fold_ops", offsetof(cuvil_limits, fold_ops), false, (uint64_t)1 << 32},
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
