/*
 * cuvil_model.h -- the ABI every Cuvil-compiled model exports.
 *
 * A model compiled by `cuvil-compile --model m.onnx --output m.so` is a shared library (or a
 * static archive) that needs nothing beside libc and libm. Its generated header `m.h` declares
 * the prefixed entry points (`<prefix>_create`, `<prefix>_run`, ...); every model also exposes
 * one descriptor, `<prefix>_model()`, so that a host that only knows this header (cuvil-run,
 * the Python package) can drive any model. A shared library additionally exports the fixed
 * symbol CUVIL_MODEL_ENTRY_SYMBOL, which returns the same descriptor, for dlopen.
 *
 * Usage with dlopen:
 *
 *     void *h = dlopen("./m.so", RTLD_NOW | RTLD_LOCAL);
 *     const cuvil_model_desc *(*entry)(void) = dlsym(h, CUVIL_MODEL_ENTRY_SYMBOL);
 *     const cuvil_model_desc *d = entry();
 *     cuvil_model *m = NULL;
 *     if (d->create(NULL, &m) != CUVIL_OK) { puts(m ? d->errmsg(m) : "out of memory"); ... }
 *     const void *in[] = { input0 };   void *out[] = { output0 };
 *     if (d->run(m, in, out) != CUVIL_OK) puts(d->errmsg(m));
 *     d->destroy(m);
 *
 * Buffers are owned by the caller and are used in place (zero copy): input i must hold
 * d->inputs[i] elements laid out densely in row-major order with the dims the model reports.
 * A context is not thread-safe, but contexts are independent: N threads may run N contexts of
 * the same model at once, sharing one copy of the weights.
 */
#ifndef CUVIL_MODEL_H
#define CUVIL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUVIL_MODEL_ABI_VERSION 9   /* 2: options alloc/free; 3: options buffer; 4: symbols, run_shapes;
                                       5: a symbol's step; 6: cpu_features; 7: n_run_sizes;
                                       8: sequences (cuvil_tensor_info.seq_max ...);
                                       9: optionals (is_optional, output_present) */
#define CUVIL_MODEL_ENTRY_SYMBOL "cuvil_model_entry"
#define CUVIL_MAX_DIMS 8

/* Status of every call. Keep in ORDER with cuvil_status_names[] in src/util/status.c. */
typedef enum cuvil_status {
    CUVIL_OK = 0,
    CUVIL_ERR_INVALID_ARG,   /* a bad argument from the caller */
    CUVIL_ERR_MODEL,         /* the model file is malformed or inconsistent */
    CUVIL_ERR_UNSUPPORTED,   /* valid, but not supported by this version */
    CUVIL_ERR_SHAPE,         /* shapes do not agree */
    CUVIL_ERR_DTYPE,         /* element types do not agree */
    CUVIL_ERR_NOMEM,         /* an allocation failed */
    CUVIL_ERR_IO,            /* reading or writing a file failed */
    CUVIL_ERR_TOOLCHAIN,     /* the C compiler or linker failed */
    CUVIL_ERR_INTERNAL       /* a bug in Cuvil */
} cuvil_status;

/* Element types; the numbers are ONNX's TensorProto.DataType so they can be passed through. */
typedef enum cuvil_dtype {
    CUVIL_DTYPE_UNDEFINED = 0,
    CUVIL_DTYPE_FLOAT32 = 1,
    CUVIL_DTYPE_UINT8 = 2,
    CUVIL_DTYPE_INT8 = 3,
    CUVIL_DTYPE_UINT16 = 4,
    CUVIL_DTYPE_INT16 = 5,
    CUVIL_DTYPE_INT32 = 6,
    CUVIL_DTYPE_INT64 = 7,
    CUVIL_DTYPE_STRING = 8,
    CUVIL_DTYPE_BOOL = 9,
    CUVIL_DTYPE_FLOAT16 = 10,
    CUVIL_DTYPE_FLOAT64 = 11,
    CUVIL_DTYPE_UINT32 = 12,
    CUVIL_DTYPE_UINT64 = 13,
    CUVIL_DTYPE_BFLOAT16 = 16,
    /* 4-bit integers, in memory one element per byte (int8_t -8..7, uint8_t 0..15; a run
     * fails on an input value outside that range); ONNX's files pack two per byte */
    CUVIL_DTYPE_UINT4 = 21,
    CUVIL_DTYPE_INT4 = 22
} cuvil_dtype;

/* One input or output. dims[i] is the size the model was compiled for; where the ONNX model
 * left dim i symbolic, dim_names[i] is its name (e.g. "batch"), else NULL.
 *
 * A sequence of tensors (ONNX's seq(tensor)) has is_sequence 1: it holds 0..seq_max elements
 * of type dtype and rank ndim, each dim d at most dims[d]. Its buffer (nbytes) is one block:
 *     int64_t count; int64_t dims[seq_max][ndim];      (the header: seq_hdr_bytes, 64-aligned)
 *     element i's data, dense row-major, at seq_hdr_bytes + i * seq_slot_bytes
 * (cuvil_seq_elem_dims and cuvil_seq_elem_data below find them). An input's header is the
 * caller's to fill, and run checks it: the count within the range of its symbol
 * "len(<input>)" (at most seq_max; where syms has no such symbol, the model was compiled for
 * a fixed count: seq_max exactly), and each element's dim d equal to dims[d], or within
 * 0..dims[d] where bit d of seq_varies is set (its elements may differ there). An output's
 * header is the model's: read the count and each element's dims from it after every run. The
 * dims arguments of run_shapes are not read or written for a sequence (they may be NULL).
 * A tensor has is_sequence and the seq_ fields 0.
 *
 * An optional (ONNX's optional(tensor) or optional(seq(tensor))) has is_optional 1: an input
 * may be absent (its buffer NULL; its dims are not read), and after each run output_present()
 * says whether an output holds a value (its buffer's contents mean nothing when it does not). */
typedef struct cuvil_tensor_info {
    const char *name;
    cuvil_dtype dtype;
    int ndim;
    int64_t dims[CUVIL_MAX_DIMS];
    const char *dim_names[CUVIL_MAX_DIMS];
    size_t nbytes;           /* product of dims times the element size; a sequence's: its block */
    int is_sequence;
    int seq_max;
    uint32_t seq_varies;
    size_t seq_hdr_bytes, seq_slot_bytes;
    int is_optional;
} cuvil_tensor_info;

/* A sequence's element i: its dims (info->ndim of them) and its data, in block S. */
static inline int64_t *cuvil_seq_elem_dims(const cuvil_tensor_info *info, void *S, int64_t i) {
    return (int64_t *)S + 1 + i * info->ndim;
}
static inline void *cuvil_seq_elem_data(const cuvil_tensor_info *info, void *S, int64_t i) {
    return (unsigned char *)S + info->seq_hdr_bytes + (size_t)i * info->seq_slot_bytes;
}

/* A symbolic dim the model takes at run time: any value in [min, max] that is a multiple of
 * step (1: every value). */
typedef struct cuvil_sym_info {
    const char *name;
    int64_t min, max;
    int64_t step;
} cuvil_sym_info;

/* Options for create; NULL means all defaults. */
typedef struct cuvil_model_options {
    /* 0 or 1: run on the calling thread. N > 1: the context starts N - 1 worker threads at
     * create (joined at destroy); each run splits its convolutions and GEMMs among them and
     * the caller. Workers spin for ~1-3 ms after each parallel step, then sleep until the next
     * run. Contexts do not share threads: k contexts of N threads running at the same time use
     * k x N threads, so keep that sum within the cores (more only slows every context down).
     * N above the CPUs the process may run on (its affinity mask) is reduced to that count.
     * Not with `buffer` (a context in the caller's memory runs on the calling thread). */
    int n_threads;
    const char *weights_path;   /* reserved for external weights; must be NULL for now */
    /* Where the context's memory (the context and its activation arena: create's only
     * allocations; run never allocates) comes from: alloc(size, align, alloc_user) returns
     * `align`-aligned memory or NULL, free(p, alloc_user) releases it. Both NULL: the C
     * library's aligned_alloc/free. Give both or neither. */
    void *(*alloc)(size_t size, size_t align, void *user);
    void (*free)(void *p, void *user);
    void *alloc_user;
    /* Or everything in the caller's memory: `buffer` (any alignment) of buffer_bytes, at least
     * the model header's <PREFIX>_BUFFER_BYTES; create() then allocates nothing, destroy()
     * frees nothing, and the buffer must outlive the context. Not with alloc/free. */
    void *buffer;
    size_t buffer_bytes;
} cuvil_model_options;

typedef struct cuvil_model cuvil_model;   /* one execution context */

typedef struct cuvil_model_desc {
    uint32_t abi_version;       /* CUVIL_MODEL_ABI_VERSION */
    const char *name;           /* symbol prefix the model was compiled with */
    int n_inputs;
    int n_outputs;
    const cuvil_tensor_info *inputs;
    const cuvil_tensor_info *outputs;
    const char *model_sha256;   /* of the ONNX file the model was compiled from */
    const char *cuvil_version;
    const char *target;         /* e.g. "x86_64-avx2" */
    const char *options;        /* the compile options, as text */
    size_t arena_bytes;         /* activation memory one context allocates */
    size_t weights_bytes;

    /* Creates a context. On success returns CUVIL_OK and *out. On failure *out may still be
     * set, so the message can be read with errmsg(); destroy() it either way. */
    cuvil_status (*create)(const cuvil_model_options *opts, cuvil_model **out);
    /* Runs the model: inputs[i] and outputs[i] in the order of the descriptor. */
    cuvil_status (*run)(cuvil_model *m, const void *const *inputs, void *const *outputs);
    /* The message of the last failed call on m ("" if none). Owned by m. */
    const char *(*errmsg)(const cuvil_model *m);
    void (*destroy)(cuvil_model *m);
    /* The symbolic dims (empty for a model with fixed dims). The descriptor's tensor dims are
     * then the upper bounds, and dim_names name an input dim's symbol. */
    int n_syms;
    const cuvil_sym_info *syms;
    /* run with the inputs' dims: input_dims[i] holds inputs[i]'s dims (the descriptor's rank; a
     * sequence's dims are in its header: its input_dims[i] is not read);
     * every dim is checked (fixed ones against the model, symbolic ones against their range and
     * each other: CUVIL_ERR_SHAPE with a message). output_dims[i] (or output_dims NULL) receive
     * the outputs' dims; output buffers need room for them (at most the descriptor's dims). run()
     * is run_shapes at the descriptor's dims. */
    cuvil_status (*run_shapes)(cuvil_model *m, const void *const *inputs, const int64_t *const *input_dims,
                               void *const *outputs, int64_t *const *output_dims);
    /* The CPU features the model's code uses, space-separated ("avx2 fma f16c avx512f ..."; ""
     * for portable code). create() checks them before anything else and, on a CPU that lacks
     * one, fails with CUVIL_ERR_UNSUPPORTED and a message naming it (and the target). Reading
     * the descriptor, errmsg() and destroy() are safe on any CPU of the architecture. */
    const char *cpu_features;
    /* How many sizes only the run knows (a NonZero's count: how many elements its input's
     * values make non-zero). When > 0, the outputs' dims may depend on the inputs' values, not
     * only on their dims: give output buffers the descriptor's dims (their upper bounds) and
     * read the dims from run_shapes' output_dims after every run. */
    int n_run_sizes;
    /* Whether output i holds a value after the last run on m: 1 for an output that is not
     * optional, 0 for an absent optional one (and for any before a run succeeded). */
    int (*output_present)(const cuvil_model *m, int i);
} cuvil_model_desc;

typedef const cuvil_model_desc *(*cuvil_model_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* CUVIL_MODEL_H */
