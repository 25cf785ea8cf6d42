/* alloc.c -- the compiler's allocation functions, with the fault-injection and leak-count
 * hooks the tests use (util.h). Counting is atomic: several contexts may compile at once. */
#include "util/util.h"

#include <stdatomic.h>
#include <string.h>

static atomic_long n_allocs;        /* successful allocations so far */
static atomic_long n_live;          /* allocated and not yet freed */
static atomic_long fail_at = -1;    /* the allocation count at which failures start; -1: never */

void cuvil_alloc_fail_after(long n) { atomic_store(&fail_at, n < 0 ? -1 : atomic_load(&n_allocs) + n); }
long cuvil_alloc_count(void) { return atomic_load(&n_allocs); }
long cuvil_alloc_outstanding(void) { return atomic_load(&n_live); }

/* True when this allocation must fail (fault injection). */
static bool injected_failure(void) {
    long f = atomic_load(&fail_at);
    return f >= 0 && atomic_load(&n_allocs) >= f;
}

static void *counted(void *p) {
    if (p) {
        atomic_fetch_add(&n_allocs, 1);
        atomic_fetch_add(&n_live, 1);
    }
    return p;
}

void *cuvil_malloc(size_t n) { return injected_failure() ? NULL : counted(malloc(n ? n : 1)); }

void *cuvil_calloc(size_t n, size_t size) {
    return injected_failure() ? NULL : counted(calloc(n ? n : 1, size ? size : 1));
}

void *cuvil_realloc(void *p, size_t n) {
    if (!p) return cuvil_malloc(n);
    if (injected_failure()) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (q) atomic_fetch_add(&n_allocs, 1);   /* a new block replaces the old: live count kept */
    return q;
}

void *cuvil_aligned_alloc(size_t align, size_t n) {
    if (injected_failure()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : 1) != 0) return NULL;
    return counted(p);
}

char *cuvil_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = cuvil_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void cuvil_free(void *p) {
    if (!p) return;
    atomic_fetch_sub(&n_live, 1);
    free(p);
}
