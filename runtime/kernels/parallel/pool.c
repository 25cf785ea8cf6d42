/*
 * pool.c -- the persistent thread pool a model context owns (cuvil_rt.h, "Threads").
 *
 * A context created with n_threads = N > 1 starts N - 1 workers once; each run binds the pool
 * to the calling thread (thread-local), and a kernel that has enough work splits it with
 * cuvil_parallel_for: the caller is thread 0 and takes tasks too. Each thread has a block of
 * consecutive tasks, the t-th of n equal ones, and takes its own first, then what is left of
 * the others' (the call returns when every task is done, not when every worker has checked in:
 * one that was not scheduled in time leaves its share to the others). Kernels number their
 * tasks along the output's pixels or rows, so a thread mostly reads what it wrote in the layer
 * before: on a VM whose two vCPUs the host places now on cores that share an L3, now on cores
 * that do not (bench/corelat.c), MobileNetV2 on two threads ran 6.4-6.5 ms instead of 7.2-7.8
 * in the second case (per-run sums of bench/profile_layers.py's node times, 1500 runs each,
 * alternating), 4.3-4.5 against 4.4-4.7 in the first; with one shared counter the tasks went
 * round the threads in whatever order they came free. Between calls the
 * workers spin for a short while (the next node follows within microseconds), then sleep on a
 * condition variable until the next call or the pool's end. Every spin-wait yields the CPU
 * every 1024 rounds: without it, half the 2-thread runs on a 2-vCPU VM ran 1.4x slower, and
 * threads confined to fewer CPUs than the pool has (taskset, cgroups) were 10x slower. Each thread has its own slice of
 * the context's scratch (cuvil_thread_scratch); slice 0 is the one-thread scratch, so kernels
 * that do not split keep working unchanged.
 *
 * Built with -DCUVIL_NO_THREADS (embedded targets without POSIX threads), pools are never made:
 * cuvil_pool_create returns NULL and every kernel runs on the calling thread.
 */
#include <stdlib.h>
#include <string.h>

#include "../rt_int.h"

static __thread const cuvil_pool *bound_pool;
static __thread int my_tid;   /* this thread's index in its pool (0: the caller) */

#ifndef CUVIL_NO_THREADS
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin rounds before a worker sleeps: ~1-3 ms, longer than the gap between two parallel nodes. */
#define SPIN_ROUNDS 100000

/* One call's work. Two slots, alternating by generation: a worker that wakes late reads its
 * own generation's slot, which the next call does not touch. */
typedef struct pool_job {
    cuvil_task_fn fn;
    void *ctx;
    int64_t end[CUVIL_MAX_THREADS]; /* thread t's block of tasks ends here */
} pool_job;

/* (generation << 32) | the next task of a thread's block, on a cache line of its own */
typedef struct block_next {
    _Alignas(64) atomic_ullong v;
} block_next;

struct cuvil_pool {
    int n;                        /* threads, the caller included */
    size_t scratch_stride;        /* bytes between two threads' scratch slices */
    pthread_t *threads;           /* n - 1 workers */
    int started;                  /* workers running */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pool_job job[2];
    uint32_t gen;                 /* the caller's count of calls (the current one's generation) */
    /* the current generation << 32, what the workers wait on; each block's next task is taken
     * by a compare-and-swap that also checks the generation, so a worker that wakes after its
     * call ended takes nothing of the next */
    atomic_ullong next;
    block_next *blk;              /* n: the threads' blocks */
    atomic_llong done;            /* tasks of the current call finished */
    atomic_int stop;
    atomic_int active;            /* a call is in flight: nested calls run inline */
    void (*free)(void *p, void *user);
    void *user;
};

typedef struct worker_arg {
    cuvil_pool *pool;
    int tid;
} worker_arg;

static uint32_t gen_of(unsigned long long v) { return (uint32_t)(v >> 32); }

/* Takes and runs tasks of generation g until none is left: its own block's, then the next
 * threads'. The caller waits for the tasks to be done, not for the workers to check in: a
 * worker descheduled before it took a task (a busy core, a VM's vCPU preempted) costs the call
 * nothing. */
static void take_tasks(cuvil_pool *p, uint32_t g, int tid) {
    const pool_job *job = &p->job[g & 1];
    const cuvil_task_fn fn = job->fn;
    void *const ctx = job->ctx;
    for (int k = 0; k < p->n; k++) {
        const int b = (tid + k) % p->n;
        atomic_ullong *next = &p->blk[b].v;
        unsigned long long v = atomic_load_explicit(next, memory_order_acquire);
        for (;;) {
            if (gen_of(v) != g) return; /* the call is over */
            if ((int64_t)(v & 0xFFFFFFFFu) >= job->end[b]) break;
            if (!atomic_compare_exchange_weak_explicit(next, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
                continue; /* v reloaded */
            fn(ctx, (int64_t)(v & 0xFFFFFFFFu), tid);
            atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
            v = atomic_load_explicit(next, memory_order_acquire);
        }
    }
}

static void *worker_main(void *varg) {
    worker_arg *a = (worker_arg *)varg;
    cuvil_pool *p = a->pool;
    const int tid = a->tid;
    uint32_t seen = 0;
    bound_pool = p;   /* kernels a task calls see their pool (nested splits run inline) */
    my_tid = tid;
    for (;;) {
        uint32_t g = gen_of(atomic_load_explicit(&p->next, memory_order_acquire));
        for (int spin = 0; g == seen && spin < SPIN_ROUNDS && !atomic_load_explicit(&p->stop, memory_order_relaxed);
             spin++) {
            CPU_RELAX();
            if ((spin & 1023) == 1023) sched_yield(); /* let a thread sharing this CPU run */
            g = gen_of(atomic_load_explicit(&p->next, memory_order_acquire));
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = gen_of(atomic_load_explicit(&p->next, memory_order_acquire))) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        take_tasks(p, g, tid);
    }
}

/* The CPUs this process may run on (its affinity mask), at least 1. */
static int usable_cpus(void) {
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) == 0) {
        const int n = CPU_COUNT(&cs);
        if (n > 0) return n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

cuvil_pool *cuvil_pool_create(int n_threads, size_t scratch_stride,
                              void *(*alloc)(size_t size, size_t align, void *user),
                              void (*release)(void *p, void *user), void *user) {
    if (n_threads <= 1 || n_threads > CUVIL_MAX_THREADS || !alloc || !release) return NULL;
    /* More threads than the CPUs this process may run on only wait for each other (256
     * threads on 2 CPUs ran ResNet-18 in 24 s instead of 17 ms): the pool keeps at most that
     * many, down to none (then every split runs on the caller). CUVIL_OVERSUBSCRIBE=1 lifts
     * the cap (the kernel tests use it for uneven splits on small machines). */
    const char *over = getenv("CUVIL_OVERSUBSCRIBE");
    if (!(over && over[0] == '1')) {
        const int cpus = usable_cpus();
        if (n_threads > cpus) n_threads = cpus;
    }
    const size_t blk_off = CUVIL_ALIGN_UP(sizeof(cuvil_pool), 64) +
                           CUVIL_ALIGN_UP((size_t)n_threads * (sizeof(pthread_t) + sizeof(worker_arg)), 64);
    const size_t bytes = blk_off + (size_t)n_threads * sizeof(block_next);
    unsigned char *mem = alloc(bytes, 64, user);
    if (!mem) return NULL;
    memset(mem, 0, bytes);
    cuvil_pool *p = (cuvil_pool *)mem;
    p->n = n_threads;
    p->scratch_stride = scratch_stride;
    p->threads = (pthread_t *)(mem + CUVIL_ALIGN_UP(sizeof(cuvil_pool), 64));
    worker_arg *args = (worker_arg *)(p->threads + n_threads);
    p->blk = (block_next *)(mem + blk_off);
    for (int i = 0; i < n_threads; i++) atomic_init(&p->blk[i].v, 0);
    p->free = release;
    p->user = user;
    atomic_init(&p->next, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->active, 0);
    if (pthread_mutex_init(&p->mu, NULL)) {
        release(mem, user);
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL)) {
        pthread_mutex_destroy(&p->mu);
        release(mem, user);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        args[i].pool = p;
        args[i].tid = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, &args[i])) {
            p->n = i;   /* the workers started so far are all there is */
            break;
        }
        p->started++;
    }
    if (p->started == 0 && n_threads > 1) {
        cuvil_pool_destroy(p);
        return NULL;
    }
    return p;
}

void cuvil_pool_destroy(cuvil_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    if (bound_pool == p) bound_pool = NULL;
    p->free(p, p->user);
}

int cuvil_pool_threads(const cuvil_pool *p) { return p ? p->n : 1; }

void cuvil_parallel_for(int64_t n_tasks, cuvil_task_fn fn, void *ctx) {
    cuvil_pool *p = (cuvil_pool *)bound_pool;
    if (n_tasks <= 0) return;
    if (!p || n_tasks == 1 || p->n <= 1 || n_tasks > 0xFFFFFFFFLL ||
        atomic_load_explicit(&p->active, memory_order_acquire)) {
        /* one thread, one task, or called from inside a task: run inline */
        const int tid = p ? my_tid : 0;
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, tid);
        return;
    }
    atomic_store_explicit(&p->active, 1, memory_order_release);
    if (++p->gen == 0) p->gen = 1; /* 0 is the generation workers start having seen */
    const uint32_t g = p->gen;
    pool_job *job = &p->job[g & 1];
    job->fn = fn;
    job->ctx = ctx;
    /* the blocks first: a worker that sees the new generation in p->next finds them set */
    for (int t = 0; t < p->n; t++) {
        job->end[t] = n_tasks * (t + 1) / p->n;
        atomic_store_explicit(&p->blk[t].v, ((unsigned long long)g << 32) | (unsigned long long)(n_tasks * t / p->n),
                              memory_order_release);
    }
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->next, (unsigned long long)g << 32, memory_order_release);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    take_tasks(p, g, 0);
    for (unsigned spin = 1; atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks; spin++) {
        CPU_RELAX();
        if ((spin & 1023) == 0) sched_yield(); /* a worker on this CPU must run to finish */
    }
    atomic_store_explicit(&p->active, 0, memory_order_release);
}

size_t cuvil_pool_scratch_stride(const cuvil_pool *p) { return p ? p->scratch_stride : 0; }

#else /* CUVIL_NO_THREADS */

struct cuvil_pool {
    int unused;
};

cuvil_pool *cuvil_pool_create(int n_threads, size_t scratch_stride,
                              void *(*alloc)(size_t size, size_t align, void *user),
                              void (*release)(void *p, void *user), void *user) {
    (void)n_threads, (void)scratch_stride, (void)alloc, (void)release, (void)user;
    return NULL;
}

void cuvil_pool_destroy(cuvil_pool *p) { (void)p; }

int cuvil_pool_threads(const cuvil_pool *p) {
    (void)p;
    return 1;
}

void cuvil_parallel_for(int64_t n_tasks, cuvil_task_fn fn, void *ctx) {
    for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
}

size_t cuvil_pool_scratch_stride(const cuvil_pool *p) {
    (void)p;
    return 0;
}

#endif /* CUVIL_NO_THREADS */

const cuvil_pool *cuvil_pool_bind(const cuvil_pool *p) {
    const cuvil_pool *old = bound_pool;
    bound_pool = p;
    my_tid = 0;
    return old;
}

int cuvil_threads(void) { return cuvil_pool_threads(bound_pool); }

typedef struct range_job {
    cuvil_range_fn fn;
    void *ctx;
    int64_t n, per;
} range_job;

static void range_task(void *vctx, int64_t t, int tid) {
    const range_job *j = vctx;
    const int64_t b = t * j->per, e = b + j->per < j->n ? b + j->per : j->n;
    j->fn(j->ctx, b, e, tid);
}

void cuvil_parallel_range(int64_t n, int64_t grain, int64_t align, cuvil_range_fn fn, void *ctx) {
    const int th = cuvil_threads();
    if (n <= 0) return;
    grain = grain < 1 ? 1 : grain;
    align = align < 1 ? 1 : align;
    if (th <= 1 || n < 2 * grain) {
        fn(ctx, 0, n, my_tid);   /* (inside another kernel's task: that thread's index) */
        return;
    }
    /* 2 chunks a thread (a late thread's share is taken by the others), at least `grain`
     * each, whole multiples of `align` */
    int64_t tasks = 2 * (int64_t)th, per = (n + tasks - 1) / tasks;
    per = per < grain ? grain : per;
    per = (per + align - 1) / align * align;
    range_job j = {fn, ctx, n, per};
    cuvil_parallel_for((n + per - 1) / per, range_task, &j);
}

void *cuvil_thread_scratch(void *scratch, int tid) {
    return (char *)scratch + (size_t)tid * cuvil_pool_scratch_stride(bound_pool);
}
