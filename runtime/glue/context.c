/* context.c -- the entry points every compiled model shares (cuvil_glue.h): the context, its
 * memory and threads, the checks of the caller's arguments and dims, the messages.
 *
 * A model's <prefix>_create/run/run_shapes/errmsg/destroy forward here with its table. What
 * runs before create() knows that the CPU has the target's features (and what a context whose
 * create() failed may still be asked: errmsg, destroy, run) is compiled for the architecture's
 * baseline (CUVIL_RT_BASELINE), as cpu.c is. */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE   /* madvise, under -std=c11 */
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "cuvil_model.h"   /* the ABI (include/cuvil; copied beside the runtime for --emit c) */
#include "cuvil_glue.h"

_Static_assert(sizeof(struct cuvil_model) <= CUVIL_GLUE_CONTEXT_BYTES, "the context fits its share of a caller's buffer");

/* A copy loop, not snprintf: names may be long, and this runs on any CPU. */
CUVIL_RT_BASELINE void cuvil_glue_set_err(cuvil_model *m, const char *msg, const char *name) {
    size_t o = 0;
    for (const char *p = msg; *p && o + 1 < sizeof m->err; p++) m->err[o++] = *p;
    for (const char *p = name ? ": " : ""; *p && o + 1 < sizeof m->err; p++) m->err[o++] = *p;
    for (const char *p = name ? name : ""; *p && o + 1 < sizeof m->err; p++) m->err[o++] = *p;
    m->err[o] = 0;
}

cuvil_status cuvil_glue_fail(cuvil_model *m, const char *msg) {
    cuvil_glue_set_err(m, msg, NULL);
    return CUVIL_ERR_INVALID_ARG;
}

/* Blocks of 2 MB or more (the arena) in 2 MB pages where Linux gives them to those who ask
 * (transparent huge pages in 'madvise' mode, Debian's default): a channels-first conv reads
 * each input channel's rows from another 4 KB page, more pages than the TLB holds. (AMD EPYC
 * Zen 4, alternating rounds: ResNet-50 3.5% faster on one thread, 8% on two; MobileNetV2
 * 3.5% and 6-11%.) */
CUVIL_RT_BASELINE static void *default_alloc(size_t size, size_t align, void *user) {
    (void)user;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)1 << 21, n = (size + huge - 1) / huge * huge;
    if (size >= huge && n >= size) {
        void *p = aligned_alloc(huge, n);
        if (p) {
            (void)madvise(p, n, MADV_HUGEPAGE);   /* a hint: refused, 4 KB pages */
            return p;
        }
    }
#endif
    return aligned_alloc(align, (size + align - 1) / align * align);
}

CUVIL_RT_BASELINE static void default_free(void *p, void *user) {
    (void)user;
    free(p);
}

/* The CPU lacks a feature the target's code uses (n bytes at f): the message says which. */
CUVIL_RT_BASELINE static cuvil_status cpu_lacks(cuvil_model *m, const char *f, size_t n) {
    const cuvil_model_desc *d = m->t->desc;
    snprintf(m->err, sizeof m->err,
             "this CPU lacks %.*s, which the model's target %s needs (%s); compile the model for this machine "
             "(cuvil-compile without --target picks its best target)", (int)n, f, d->target, d->cpu_features);
    return CUVIL_ERR_UNSUPPORTED;
}

CUVIL_RT_BASELINE static cuvil_status no_external_weights(cuvil_model *m, const char *path) {
    cuvil_glue_set_err(m, "external weights are not supported by this model", path);
    return CUVIL_ERR_UNSUPPORTED;
}

/* A segment's source in the library, once widened or copied, is not read again by this context
 * (16-bit weights a product reads in place are no segment's): a hint that its pages may leave
 * memory (MADV_PAGEOUT, Linux 5.4: never loses data; a file's clean
 * pages are read again if another context widens them). */
CUVIL_RT_BASELINE static void release_pages(const unsigned char *p, size_t n) {
#if defined(__linux__) && defined(MADV_PAGEOUT)
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096, lo = ((uintptr_t)p + pg - 1) / pg * pg, hi = ((uintptr_t)p + n) / pg * pg;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_PAGEOUT);
#else
    (void)p;
    (void)n;
#endif
}

/* a + b rounded up to 64, or SIZE_MAX when it overflows */
CUVIL_RT_BASELINE static size_t add64(size_t a, size_t b) {
    size_t s = a + b;
    return s < a || s > SIZE_MAX - 63 ? SIZE_MAX : (s + 63) / 64 * 64;
}

CUVIL_RT_BASELINE cuvil_status cuvil_glue_create(const cuvil_glue_table *t, const cuvil_model_options *opts,
                                                 cuvil_model **out) {
    if (!out) return CUVIL_ERR_INVALID_ARG;
    *out = NULL;
    if (!t || (opts && !opts->alloc != !opts->free)) return CUVIL_ERR_INVALID_ARG;   /* both or neither */
    if (opts && opts->buffer && opts->alloc) return CUVIL_ERR_INVALID_ARG;            /* a buffer or an allocator */
    size_t lacks_n = 0;
    const char *lacks = cuvil_rt_cpu_lacks(t->desc->cpu_features, &lacks_n);
    const size_t arena = add64(t->desc->arena_bytes, 0), scratch = add64(t->scratch_bytes, 0);
    const size_t dims = CUVIL_GLUE_DIMS_BYTES(t->n_dims), context = CUVIL_GLUE_CONTEXT_BYTES + dims;
    if (opts && opts->buffer) {
        /* everything in the caller's buffer: the context and the dims, the arena, the scratch; no malloc */
        uintptr_t base = ((uintptr_t)opts->buffer + 63) / 64 * 64, end = (uintptr_t)opts->buffer + opts->buffer_bytes;
        if (end < (uintptr_t)opts->buffer || base < (uintptr_t)opts->buffer || base + CUVIL_GLUE_CONTEXT_BYTES > end)
            return CUVIL_ERR_INVALID_ARG;
        cuvil_model *m = (cuvil_model *)base;
        memset(m, 0, sizeof *m);
        m->t = t;
        m->weights = t->weights;
        *out = m;
        if (lacks) return cpu_lacks(m, lacks, lacks_n);
        if (t->scratch_need() > t->scratch_bytes) return CUVIL_ERR_INTERNAL;   /* a runtime with another blocking */
        if (opts->weights_path) return no_external_weights(m, opts->weights_path);
        if (t->n_wsegs) {
            cuvil_glue_set_err(m, "this model stores its weights in 16 bits (--precision) and widens them when a context is "
                               "created, which needs an allocator: a caller's buffer is not supported", NULL);
            return CUVIL_ERR_UNSUPPORTED;
        }
        size_t need = add64(add64(context, arena), scratch);
        if (need == SIZE_MAX || need > end - base) {
            cuvil_glue_set_err(m, "the buffer is smaller than the model needs (see its header's BUFFER_BYTES)", NULL);
            return CUVIL_ERR_INVALID_ARG;
        }
        if (opts->n_threads > 1) {
            cuvil_glue_set_err(m, "a context in the caller's buffer runs on the calling thread only (n_threads must be 0 or 1)",
                               NULL);
            return CUVIL_ERR_INVALID_ARG;
        }
        m->dims = (int64_t *)(base + CUVIL_GLUE_CONTEXT_BYTES);
        memset(m->dims, 0, sizeof(int64_t) * (size_t)t->n_dims);   /* (no optional output before a run) */
        m->arena = (unsigned char *)base + context;
        m->scratch = m->arena + arena;
        return CUVIL_OK;
    }
    void *(*alloc)(size_t, size_t, void *) = opts && opts->alloc ? opts->alloc : default_alloc;
    void *user = opts && opts->alloc ? opts->alloc_user : NULL;
    cuvil_model *m = alloc(context, 64, user);   /* the context, the dims after it */
    if (!m) return CUVIL_ERR_NOMEM;
    memset(m, 0, sizeof *m);
    m->t = t;
    m->weights = t->weights;
    m->free = opts && opts->alloc ? opts->free : default_free;
    m->user = user;
    m->dims = (int64_t *)((unsigned char *)m + CUVIL_GLUE_CONTEXT_BYTES);
    memset(m->dims, 0, sizeof(int64_t) * (size_t)t->n_dims);   /* (no optional output before a run) */
    *out = m;
    if (lacks) return cpu_lacks(m, lacks, lacks_n);
    if (t->scratch_need() > t->scratch_bytes) return CUVIL_ERR_INTERNAL;   /* a runtime with another blocking */
    if (opts && opts->weights_path) return no_external_weights(m, opts->weights_path);
    int threads = opts && opts->n_threads > 1 ? opts->n_threads : 1;
    if (threads > CUVIL_MAX_THREADS) {
        snprintf(m->err, sizeof m->err, "n_threads is %d, over the runtime's limit of %d (CUVIL_MAX_THREADS)", threads,
                 CUVIL_MAX_THREADS);
        return CUVIL_ERR_INVALID_ARG;
    }
    /* the arena, then a scratch slice per thread (sizes no address space holds: out of memory) */
    bool fits = arena != SIZE_MAX && scratch != SIZE_MAX && arena <= SIZE_MAX - 64 &&
                (!scratch || (size_t)threads <= (SIZE_MAX - 64 - arena) / scratch);
    m->arena = fits ? alloc(arena + scratch * (size_t)threads + 64, 64, user) : NULL;
    if (!m->arena) {
        cuvil_glue_set_err(m, "out of memory allocating the activation arena", NULL);
        return CUVIL_ERR_NOMEM;
    }
    m->scratch = m->arena + arena;
    if (t->n_wsegs) {   /* the weights stored in 16 bits, widened to the float32 layout the nodes read */
        m->weights16 = t->weights_bytes <= SIZE_MAX - 64 ? alloc(add64(t->weights_bytes, 0), 64, user) : NULL;
        if (!m->weights16) {
            cuvil_glue_set_err(m, "out of memory widening the model's 16-bit weights", NULL);
            m->free(m->arena, m->user);
            m->arena = m->scratch = NULL;
            return CUVIL_ERR_NOMEM;
        }
        unsigned char *x = NULL;   /* the sources of the weights packed now, freed after */
        if (t->transient_bytes && !(x = t->transient_bytes <= SIZE_MAX - 64 ? alloc(add64(t->transient_bytes, 0), 64, user) : NULL)) {
            cuvil_glue_set_err(m, "out of memory packing the model's 16-bit weights", NULL);
            m->free(m->arena, m->user);
            m->arena = m->scratch = NULL;
            return CUVIL_ERR_NOMEM;
        }
        memset(m->weights16, 0, t->weights_bytes);
        if (x) memset(x, 0, t->transient_bytes);
        cuvil_weights_expand(m->weights16, x, t->weights, t->wsegs, t->n_wsegs);
        if (t->init_weights) t->init_weights(m->weights16, x);
        if (x) m->free(x, m->user);
        m->weights = m->weights16;
        /* (only the widened or copied sources: a product may read its 16-bit weights in place) */
        for (int64_t k = 0; k < t->n_wsegs; k++)
            release_pages(t->weights + t->wsegs[k].src, (t->wsegs[k].kind & 3) ? 2 * t->wsegs[k].n : t->wsegs[k].n);
    }
    if (threads > 1) {
        m->pool = cuvil_pool_create(threads, scratch, alloc, m->free, user);
        if (!m->pool) {
            cuvil_glue_set_err(m, "cannot start the context's threads (out of memory, or a runtime built without threads)",
                               NULL);
            m->free(m->arena, m->user);   /* a context that failed has no arena: run() refuses it */
            m->arena = m->scratch = NULL;
            return CUVIL_ERR_NOMEM;
        }
    }
    return CUVIL_OK;
}

/* Sequence input i's header (block S): its count (binding the count's symbol, when it has one)
 * and each element's dims, checked against the descriptor before any node reads it. */
static cuvil_status bind_seq(cuvil_model *m, int i, const void *S, int64_t *D, bool fixed_call) {
    const cuvil_glue_table *t = m->t;
    const cuvil_model_desc *d = t->desc;
    const cuvil_tensor_info *in = &d->inputs[i];
    const int64_t *h = (const int64_t *)S, n = h[0];
    int k = t->in_sym[i][0];
    const cuvil_sym_info *s = k >= 0 ? &d->syms[k] : NULL;
    char msg[200];
    if (!s && n != in->seq_max) {
        snprintf(msg, sizeof msg, "the sequence holds %lld elements; the model takes %d", (long long)n, in->seq_max);
    } else if (s && (n < s->min || n > s->max || n > in->seq_max)) {
        snprintf(msg, sizeof msg, "the sequence holds %lld elements, outside %lld..%lld", (long long)n, (long long)s->min,
                 (long long)s->max);
    } else if (s && !fixed_call && D[k] >= 0 && D[k] != n) {
        snprintf(msg, sizeof msg, "the sequence holds %lld elements, but symbol %.64s is %lld", (long long)n, s->name,
                 (long long)D[k]);
    } else {
        msg[0] = 0;
        if (s) D[k] = n;
    }
    for (int64_t e = 0; !msg[0] && e < n; e++)
        for (int j = 0; j < in->ndim; j++) {
            int64_t v = h[1 + e * in->ndim + j];
            bool varies = (in->seq_varies >> j) & 1;
            if (varies ? v >= 0 && v <= in->dims[j] : v == in->dims[j]) continue;
            snprintf(msg, sizeof msg, "element %lld: dim %d is %lld; the model takes %s%lld", (long long)e, j, (long long)v,
                     varies ? "0.." : "", (long long)in->dims[j]);
            break;
        }
    if (!msg[0]) return CUVIL_OK;
    cuvil_glue_set_err(m, msg, in->name);
    return CUVIL_ERR_SHAPE;
}

/* D from the inputs' dims; every dim checked: a fixed one against the model, a symbolic one
 * against its range and the other dims of its symbol; a sequence's from its header (bind_seq);
 * an absent optional input's not at all. */
static cuvil_status bind_dims(cuvil_model *m, const void *const *inputs, const int64_t *const *dims, int64_t *D) {
    const cuvil_glue_table *t = m->t;
    const cuvil_model_desc *d = t->desc;
    for (int k = 0; k < d->n_syms; k++) D[k] = -1;
    for (int i = 0; i < d->n_inputs; i++) {
        const cuvil_tensor_info *in = &d->inputs[i];
        if (!inputs[i]) continue;   /* an optional one, absent: nothing reads it */
        if (in->is_sequence) {
            cuvil_status st = bind_seq(m, i, inputs[i], D, false);
            if (st) return st;
            continue;
        }
        if (!dims[i]) {
            cuvil_glue_set_err(m, "the dims of input are NULL", in->name);
            return CUVIL_ERR_INVALID_ARG;
        }
        for (int j = 0; j < in->ndim; j++) {
            int64_t v = dims[i][j];
            int k = t->in_sym[i][j];
            const cuvil_sym_info *s = k >= 0 ? &d->syms[k] : NULL;
            char msg[160];
            if (!s) {
                if (v == in->dims[j]) continue;
                snprintf(msg, sizeof msg, "dim %d is %lld; the model takes %lld", j, (long long)v, (long long)in->dims[j]);
            } else if (v < s->min || v > s->max) {
                snprintf(msg, sizeof msg, "dim %d is %lld, outside %lld..%lld (symbol %.64s)", j, (long long)v,
                         (long long)s->min, (long long)s->max, s->name);
            } else if (v % s->step) {
                snprintf(msg, sizeof msg, "dim %d is %lld, not a multiple of %lld (symbol %.64s)", j, (long long)v,
                         (long long)s->step, s->name);
            } else if (D[k] >= 0 && D[k] != v) {
                snprintf(msg, sizeof msg, "dim %d is %lld, but another dim of symbol %.64s is %lld", j, (long long)v,
                         s->name, (long long)D[k]);
            } else {
                D[k] = v;
                continue;
            }
            cuvil_glue_set_err(m, msg, in->name);
            return CUVIL_ERR_SHAPE;
        }
    }
    for (int k = 0; k < d->n_syms; k++)   /* a symbol only absent inputs carry: its least (nothing reads it) */
        if (D[k] < 0) D[k] = d->syms[k].min;
    return CUVIL_OK;
}

/* The checks of the caller's arguments before any of the target's code: a context whose
 * create() failed (this CPU lacks the target's features) is refused here. */
CUVIL_RT_BASELINE static cuvil_status check_args(cuvil_model *m, const void *const *in, void *const *out) {
    if (!m->arena) {
        if (!m->err[0]) cuvil_glue_set_err(m, "the context was not created (create() failed)", NULL);
        return CUVIL_ERR_INVALID_ARG;
    }
    m->err[0] = 0;
    const cuvil_model_desc *d = m->t->desc;
    if (d->n_inputs && !in) {
        cuvil_glue_set_err(m, "inputs array is NULL", NULL);
        return CUVIL_ERR_INVALID_ARG;
    }
    if (!out) {
        cuvil_glue_set_err(m, "outputs array is NULL", NULL);
        return CUVIL_ERR_INVALID_ARG;
    }
    for (int i = 0; i < d->n_inputs; i++)
        if (!in[i] && !d->inputs[i].is_optional) {
            cuvil_glue_set_err(m, "input buffer is NULL", d->inputs[i].name);
            return CUVIL_ERR_INVALID_ARG;
        }
    for (int i = 0; i < d->n_outputs; i++)
        if (!out[i]) {
            cuvil_glue_set_err(m, "output buffer is NULL", d->outputs[i].name);
            return CUVIL_ERR_INVALID_ARG;
        }
    return CUVIL_OK;
}

/* int4 and uint4 inputs hold one element per byte: each must be in -8..7 or 0..15 (a model
 * computes with them as such; a value outside would give an answer no 4-bit input could). */
static cuvil_status check_4bit(cuvil_model *m, const void *const *in, const int64_t *const *in_dims) {
    const cuvil_model_desc *d = m->t->desc;
    for (int i = 0; i < d->n_inputs; i++) {
        const cuvil_tensor_info *x = &d->inputs[i];
        if ((x->dtype != CUVIL_DTYPE_INT4 && x->dtype != CUVIL_DTYPE_UINT4) || x->is_sequence || !in[i]) continue;
        int64_t n = 1;
        for (int j = 0; j < x->ndim; j++) n *= in_dims ? in_dims[i][j] : x->dims[j];
        const int lo = x->dtype == CUVIL_DTYPE_INT4 ? -8 : 0, hi = x->dtype == CUVIL_DTYPE_INT4 ? 7 : 15;
        for (int64_t k = 0; k < n; k++) {
            const int v = x->dtype == CUVIL_DTYPE_INT4 ? ((const int8_t *)in[i])[k] : ((const uint8_t *)in[i])[k];
            if (v < lo || v > hi) {
                char msg[128];
                snprintf(msg, sizeof msg, "element %lld is %d, outside %s's %d..%d", (long long)k, v,
                         x->dtype == CUVIL_DTYPE_INT4 ? "int4" : "uint4", lo, hi);
                cuvil_glue_set_err(m, msg, x->name);
                return CUVIL_ERR_INVALID_ARG;
            }
        }
    }
    return CUVIL_OK;
}

static cuvil_status run_checked(cuvil_model *m, const void *const *in, const int64_t *const *in_dims, void *const *out,
                                int64_t *const *out_dims) {
    const cuvil_glue_table *t = m->t;
    const cuvil_model_desc *d = t->desc;
    int64_t *D = m->dims;
    for (int k = d->n_syms; k < t->n_dims; k++) D[k] = 0;   /* written by the nodes that find them */
    cuvil_status st;
    if (in_dims) {
        if ((st = bind_dims(m, in, in_dims, D))) return st;
    } else {
        for (int k = 0; k < d->n_syms; k++) D[k] = d->syms[k].max;   /* the fixed-shape call: the upper bounds */
        for (int i = 0; i < d->n_inputs; i++)   /* (but a sequence's count is its own) */
            if (d->inputs[i].is_sequence && in[i] && (st = bind_seq(m, i, in[i], D, true))) return st;
    }
    if ((st = t->check_guards(m, D))) return st;
    if ((st = check_4bit(m, in, in_dims))) return st;
    const cuvil_pool *prev = cuvil_pool_bind(m->pool);   /* this context's threads, for its kernels */
    st = t->run(m, m->arena, m->weights, m->scratch, in, out, D);
    cuvil_pool_bind(prev);
    for (int i = 0; st && t->out_present && i < d->n_outputs; i++)   /* a failed run gives no output */
        if (t->out_present[i] >= 0) D[t->out_present[i]] = 0;
    if (st) return st;
    t->output_dims(D, out_dims);
    return CUVIL_OK;
}

CUVIL_RT_BASELINE cuvil_status cuvil_glue_run_shapes(cuvil_model *m, const void *const *in,
                                                     const int64_t *const *in_dims, void *const *out,
                                                     int64_t *const *out_dims) {
    if (!m) return CUVIL_ERR_INVALID_ARG;
    cuvil_status st = check_args(m, in, out);
    return st ? st : run_checked(m, in, in_dims, out, out_dims);
}

CUVIL_RT_BASELINE const char *cuvil_glue_errmsg(const cuvil_model *m) { return m ? m->err : "no model"; }

CUVIL_RT_BASELINE int cuvil_glue_output_present(const cuvil_model *m, int i) {
    if (!m || !m->arena || i < 0 || i >= m->t->desc->n_outputs) return 0;
    int k = m->t->out_present ? m->t->out_present[i] : -1;
    return k < 0 ? 1 : m->dims[k] != 0;
}

CUVIL_RT_BASELINE void cuvil_glue_destroy(cuvil_model *m) {
    if (!m || !m->free) return;   /* (no free: it lives in the caller's buffer) */
    if (m->pool) cuvil_pool_destroy(m->pool);   /* (none where create() found the CPU lacking) */
    if (m->arena) m->free(m->arena, m->user);
    if (m->weights16) m->free(m->weights16, m->user);
    m->free(m, m->user);
}
