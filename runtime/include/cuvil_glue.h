/*
 * cuvil_glue.h -- what a compiled model's entry points share: the context, and the table
 * through which the runtime's glue (runtime/glue/context.c) reaches one model.
 *
 * A model's generated C holds only what is its own: the node functions, the functions that
 * run them in order (parts), its tables (descriptor, symbols, which input dim carries which
 * symbol, sizes) and the expressions of its dims (output_dims, check_guards). Creating a
 * context, checking the caller's arguments and dims, the allocator, the threads and the
 * messages are here, compiled once with the runtime, warned and sanitised with it; the
 * model's exported <prefix>_create/run/... forward to cuvil_glue_* with its table.
 *
 * Include cuvil_model.h (the ABI: the generated <prefix>.h holds it) before this header.
 */
#ifndef CUVIL_GLUE_H
#define CUVIL_GLUE_H

#ifndef CUVIL_MODEL_H
#error "include cuvil_model.h (or the model's generated header) before cuvil_glue.h"
#endif

#include "cuvil_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The room a context takes in a caller's buffer before its arena: the context itself
 * (sizeof(struct cuvil_model) is at most this) and the run's dims (cuvil_glue_table.n_dims
 * int64s), rounded to 64 bytes. A model's header prints the same sum in <PREFIX>_BUFFER_BYTES. */
#define CUVIL_GLUE_CONTEXT_BYTES ((size_t)1024)
#define CUVIL_GLUE_DIMS_BYTES(n_dims) (((size_t)(n_dims) * 8 + 63) / 64 * 64)

/* One execution context: create() makes it, destroy() frees it (unless it lives in the
 * caller's buffer: free is NULL). Nothing in it is shared between contexts. */
struct cuvil_model {
    const struct cuvil_glue_table *t;   /* the model it runs */
    const unsigned char *weights;       /* the constants the nodes read (WEIGHTS): the table's */
    unsigned char *weights16;           /* or, when the table stores weights in 16 bits, their float32
                                         * layout, expanded by create() (weights points at it) */
    unsigned char *arena;               /* the activations (NULL until create() succeeds) */
    unsigned char *scratch;             /* the kernels' scratch, a slice per thread */
    int64_t *dims;                      /* the run's dims: symbols, then the sizes the run finds */
    void (*free)(void *p, void *user);  /* NULL: the context is in the caller's buffer */
    void *user;
    cuvil_pool *pool;                   /* n_threads > 1 */
    char err[512];
};

/* Runs the model's nodes in order: A the arena, W the weights, S the scratch, D the dims. */
typedef cuvil_status (*cuvil_glue_run_fn)(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S,
                                          const void *const *in, void *const *out, int64_t *D);

/* One model, as its generated model.c describes it (a static const table). */
typedef struct cuvil_glue_table {
    const cuvil_model_desc *desc;      /* names, dtypes, dims (upper bounds), symbols, arena, features */
    size_t scratch_bytes;              /* the scratch create() reserves per thread (an upper bound) */
    size_t (*scratch_need)(void);      /* what the linked runtime's kernels need: at most scratch_bytes */
    /* D's length: desc->n_syms symbols, desc->n_run_sizes found sizes, then a flag per optional
     * output (whether the run gave it a value) */
    int n_dims;
    /* per input dim: its symbol's index in D, -1 when fixed; a sequence input's [0]: its
     * count's symbol (-1: the count is fixed, its seq_max) */
    const int8_t (*in_sym)[CUVIL_MAX_DIMS];
    const unsigned char *weights;      /* the model's constants (a context starts with them) */
    /* What the shapes assume and the compiler could not prove, on the symbols: CUVIL_OK, or a
     * message into m->err and CUVIL_ERR_SHAPE */
    cuvil_status (*check_guards)(cuvil_model *m, const int64_t *D);
    /* the outputs' dims from D into od[i] (each may be NULL) */
    void (*output_dims)(const int64_t *D, int64_t *const *od);
    cuvil_glue_run_fn run;
    const int16_t *out_present;        /* per output: the D index of its flag, -1 when not optional */
    /* --precision fp16|bf16: weights holds some float32 constants in 16 bits; create() expands
     * the n_wsegs segments into weights_bytes of float32 layout for each context (0: none) */
    const cuvil_wseg *wsegs;
    int n_wsegs;
    size_t weights_bytes;
    /* then, when not NULL, packs the weights the library holds as their source (Winograd
     * transforms) into their place in W, from the transient_bytes at X (the sources widened,
     * and the packing's temporary floats), which create() frees after */
    size_t transient_bytes;
    void (*init_weights)(unsigned char *W, unsigned char *X);
} cuvil_glue_table;

/* The model's entry points (cuvil_model.h says what each does). create() and what runs before
 * its CPU check are compiled for the architecture's baseline (CUVIL_RT_BASELINE). */
CUVIL_RT_BASELINE cuvil_status cuvil_glue_create(const cuvil_glue_table *t, const cuvil_model_options *opts,
                                                 cuvil_model **out);
CUVIL_RT_BASELINE cuvil_status cuvil_glue_run_shapes(cuvil_model *m, const void *const *in,
                                                     const int64_t *const *in_dims, void *const *out,
                                                     int64_t *const *out_dims);
CUVIL_RT_BASELINE const char *cuvil_glue_errmsg(const cuvil_model *m);
CUVIL_RT_BASELINE int cuvil_glue_output_present(const cuvil_model *m, int i);
CUVIL_RT_BASELINE void cuvil_glue_destroy(cuvil_model *m);

/* "<msg>: <name>" (name may be NULL) into m->err, cut to fit. */
CUVIL_RT_BASELINE void cuvil_glue_set_err(cuvil_model *m, const char *msg, const char *name);
/* A node found bad data (an index out of range): msg into m->err; CUVIL_ERR_INVALID_ARG. */
cuvil_status cuvil_glue_fail(cuvil_model *m, const char *msg);

#ifdef __cplusplus
}
#endif
#endif /* CUVIL_GLUE_H */
