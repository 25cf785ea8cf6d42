/* corelat.c -- the round trip of a cache line between the first two CPUs this process may run
 * on, for bench/bench.py: on a VM whose vCPUs the host places now on cores that share an L3,
 * now on cores that do not, it tells the two apart (on the 2-vCPU AMD EPYC VM of
 * bench/RESULTS.md: ~55-70 ns against ~320-350 ns; two-thread runs of both Cuvil and ONNX
 * Runtime took ~1.6x as long in the second case). Prints "<ns>", the median of 5 runs of 20000
 * round trips, or nothing where the process has fewer than two CPUs.
 *   cc -O2 -pthread bench/corelat.c -o corelat && ./corelat */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 20000

static _Alignas(64) atomic_int flag;
static int cpu[2];

static void pin(int c) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *echo(void *arg) {
    (void)arg;
    pin(cpu[1]);
    for (int i = 0; i < 5 * TRIPS; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 1) {
        }
        atomic_store_explicit(&flag, 0, memory_order_release);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s)) return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &s)) cpu[n++] = c;
    if (n < 2) return 0;
    pthread_t t;
    if (pthread_create(&t, NULL, echo, NULL)) return 1;
    pin(cpu[0]);
    double ns[5];
    for (int r = 0; r < 5; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < TRIPS; i++) {
            atomic_store_explicit(&flag, 1, memory_order_release);
            while (atomic_load_explicit(&flag, memory_order_acquire) != 0) {
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        ns[r] = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / TRIPS;
    }
    pthread_join(t, NULL);
    qsort(ns, 5, sizeof ns[0], cmp);
    printf("%.0f\n", ns[2]);
    return 0;
}
