/* bench_pool.h -- the allocator the microbenchmarks (bench/gemm_bench.c, bench/conv_bench.c)
 * give cuvil_pool_create for their thread pools. */
#ifndef CUVIL_BENCH_POOL_H
#define CUVIL_BENCH_POOL_H

#include <stdlib.h>

static void *pool_alloc(size_t size, size_t align, void *user) {
    (void)user;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) ? NULL : p;
}

static void pool_free(void *p, void *user) {
    (void)user;
    free(p);
}

#endif
