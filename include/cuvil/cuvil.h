/*
 * cuvil.h -- the Cuvil compiler API.
 *
 * Cuvil compiles an ONNX model into native code: a shared library (or static archive, or C
 * sources) exporting the ABI of cuvil_model.h. The command-line tools are thin wrappers over
 * these calls.
 *
 *     cuvil_ctx *ctx = NULL;
 *     if (cuvil_ctx_create(&ctx) != CUVIL_OK) return 1;
 *     cuvil_options o;
 *     cuvil_options_init(&o);
 *     o.opt_level = 2;
 *     cuvil_options_set_dim(ctx, &o, "batch", 4);
 *     if (cuvil_compile_file(ctx, "resnet18.onnx", &o, "resnet18.so") != CUVIL_OK)
 *         fprintf(stderr, "%s\n", cuvil_errmsg(ctx));
 *     cuvil_ctx_destroy(ctx);
 *
 * Every call returns a cuvil_status; on failure the message is kept on the context and read
 * back with cuvil_errmsg(). A message names the node, the op and the offending value.
 */
#ifndef CUVIL_H
#define CUVIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuvil/cuvil_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What libcuvil exports; everything else in it is hidden. */
#ifndef CUVIL_API
#define CUVIL_API __attribute__((visibility("default")))
#endif

#define CUVIL_MAX_DIM_BINDINGS 16
#define CUVIL_MAX_DISABLED_PASSES 16

CUVIL_API const char *cuvil_status_str(cuvil_status s);
CUVIL_API const char *cuvil_version(void);
/* The ONNX ops the frontend takes, a line each, tab-separated: domain ("" for ONNX's, or
 * com.microsoft), op, the first opset taken, the CIR op it becomes (docs/OPS.md) and "direct"
 * or "mapped" (written as several CIR nodes or with its attributes rewritten). Copies at most
 * len - 1 bytes and a NUL into buf (len 0: nothing) and returns the text's full length. */
CUVIL_API size_t cuvil_supported_ops(char *buf, size_t len);

/* What cuvil_compile_file() writes. */
typedef enum cuvil_emit {
    CUVIL_EMIT_SO = 0,   /* shared library + header beside it */
    CUVIL_EMIT_A,        /* static archive + header beside it */
    CUVIL_EMIT_C,        /* a directory: C sources, weights, runtime, header, Makefile */
    CUVIL_EMIT_IR,       /* CIR text after the pipeline */
    CUVIL_EMIT_DOT       /* CIR as a Graphviz digraph */
} cuvil_emit;

/* How the library stores its float32 weights (--precision): as they are, or in 16 bits (IEEE
 * half or bfloat16, rounded to nearest even): a Gemm's or MatMul's weights and an embedding table
 * read in 16 bits by their kernels, the others widened to float32 when a context is created.
 * Arithmetic and activations stay float32, but for bf16's products on those weights, which take
 * their other operand in bfloat16 too (float32 sums). */
typedef enum cuvil_precision {
    CUVIL_PRECISION_FP32 = 0,
    CUVIL_PRECISION_FP16,
    CUVIL_PRECISION_BF16,
    /* --precision fp32 said: also a float16/bfloat16 model's weights, which by default stay in 16
     * bits where that type holds them exactly (read by the products in 16 bits, float32 sums),
     * are stored in float32 */
    CUVIL_PRECISION_FP32_STRICT
} cuvil_precision;

/* Cuvil's own quantizer (--quantize int8 --calibrate DIR): how the calibration sets' values
 * become each activation's range. */
typedef enum cuvil_calibration {
    CUVIL_CALIB_MINMAX = 0,     /* the smallest and largest value seen */
    CUVIL_CALIB_PERCENTILE,     /* |x|'s 99.999th percentile (a Relu's output: x's), ignoring outliers */
    CUVIL_CALIB_ENTROPY         /* the threshold whose 8-bit histogram keeps the most information (KL) */
} cuvil_calibration;
#define CUVIL_MAX_KEEP_FLOAT 64

/* How the weights reach the library: an assembler file that links weights.bin in with .incbin
 * (fast to compile; GNU assemblers), or a C array (any C compiler: Mach-O, armcc, IAR). */
typedef enum cuvil_weights_format {
    CUVIL_WEIGHTS_ASM = 0,
    CUVIL_WEIGHTS_C
} cuvil_weights_format;

/* --dim NAME=N fixes a symbolic dim; --dim NAME=LO:HI (max > 0) keeps it symbolic in
 * [min, max]: the compiled model takes any value in the range at run time. LO:HI:STEP (step >
 * 1; LO and HI multiples of it) takes the multiples of step in the range, which lets sizes
 * divided by strides (a CNN's H and W) stay exact: H=32:1024:32. */
typedef struct cuvil_dim_binding {
    const char *name;
    int64_t value;
    int64_t min, max;
    int64_t step;              /* 0 or 1: every value in the range */
} cuvil_dim_binding;

/* --shape INPUT=d0,d1,...: each dim of one input a number (fixed), a range LO:HI (symbolic,
 * named INPUT_dimK unless the model names it), or a NAME (the dim is that symbol; --dim
 * NAME=... binds it). Works for dims the model leaves unnamed. */
#define CUVIL_MAX_SHAPE_BINDINGS 16
typedef struct cuvil_shape_dim {
    int64_t value;             /* > 0: fixed */
    int64_t min, max;          /* max > 0: a range */
    int64_t step;              /* a range's step (0 or 1: every value) */
    const char *name;          /* non-NULL: a symbol's name */
} cuvil_shape_dim;

typedef struct cuvil_shape_binding {
    const char *input;
    int ndim;
    cuvil_shape_dim dims[CUVIL_MAX_DIMS];
} cuvil_shape_binding;

/* --seq INPUT=N | INPUT=LO:HI: how many elements sequence input INPUT holds: N exactly, or any
 * count in LO..HI (the symbol "len(INPUT)" at run time). Its elements' dims are what the model
 * fixes; where it leaves one open, --shape INPUT=d0,d1,... gives the largest each element's
 * dim may be (elements may differ there). */
typedef struct cuvil_seq_binding {
    const char *input;
    int64_t min, max;
} cuvil_seq_binding;

/* Bounds on what an untrusted model may make the compiler do. Each has a documented default
 * (docs/SECURITY.md) that cuvil_options_init() sets and `cuvil-compile --limit NAME=N` raises;
 * going over one is an error naming the limit, never a crash or a hang. */
typedef struct cuvil_limits {
    uint64_t model_bytes;     /* size of the model file (default 4 GiB) */
    int64_t nesting;          /* protobuf message nesting depth (default 64) */
    int64_t subgraph_depth;   /* graphs inside graphs (If/Loop bodies) (default 8) */
    int64_t nodes;            /* nodes in the graph (default 100,000) */
    int64_t values;           /* values in the graph (default 4,000,000), and protobuf messages
                                 and strings in the file (each is a memory block when parsed) */
    int64_t dim;              /* any single dim, and any size-like attribute (default 2^32) */
    uint64_t tensor_bytes;    /* one tensor: product of its dims (0 counted as 1) times the
                                 element size (default 16 GiB) */
    uint64_t total_bytes;     /* all constants, as loaded and folded (default 32 GiB) */
    uint64_t folded_bytes;    /* all constants computed at compile time together, and data
                                 kernels derive from constants (default 256 MiB) */
    int64_t fold_ops;         /* the work of computing constants at compile time, in units of about
                                 a nanosecond, for the whole compile (default 2^32, a few
                                 seconds); a node with a kernel over it runs in the compiled
                                 model instead */
    uint64_t packed_bytes;    /* weights the lowering writes again in its kernels' layouts (each
                                 weight once per layout); 0, the default: twice the model's
                                 constants plus 64 MiB */
} cuvil_limits;
/* The most `nesting` and `subgraph_depth` may be raised to: the protobuf parser recurses once
 * per level of nesting. */
#define CUVIL_MAX_NESTING 1000
/* The most bytes of weights a compiled model holds: they are linked into the library, and
 * x86-64's small code model (what the C compiler builds by default) addresses 2 GiB. A model
 * whose initializers declare more is refused before they are read, and so is one whose weights
 * (with the copies packed for the kernels) come to more. */
#define CUVIL_MAX_WEIGHTS_BYTES (((size_t)1 << 31) - ((size_t)1 << 27))

/* Sets limit `name` (a field of cuvil_limits) from a decimal string with an optional K, M, G
 * or T suffix (powers of 1024). Returns CUVIL_OK or CUVIL_ERR_INVALID_ARG with a message in
 * err naming the limits that exist. */
CUVIL_API cuvil_status cuvil_limits_set(cuvil_limits *l, const char *name, const char *value, char *err,
                              size_t errlen);

typedef struct cuvil_options {
    cuvil_emit emit;
    const char *target;          /* NULL: the host's ISA; see src/codegen/targets.inc for the names */
    int opt_level;               /* 0..3, default 2 */
    const char *name;            /* symbol prefix; NULL: derived from the output file name */
    int n_dims;
    cuvil_dim_binding dims[CUVIL_MAX_DIM_BINDINGS];   /* --dim NAME=N; unbound dims are 1 */
    int n_disabled;
    const char *disabled_passes[CUVIL_MAX_DISABLED_PASSES];
    const char *dump_after;      /* pass name or "all": print the IR after it to dump_file */
    FILE *dump_file;             /* NULL: stderr */
    const char *cc;              /* C compiler; NULL: $CC, else the one Cuvil was built with */
    int keep_sources;            /* keep the generated C next to a .so (debugging) */
    int verbose;                 /* print compiler commands and pass timings to stderr */
    cuvil_limits limits;         /* bounds on untrusted input; defaults from cuvil_options_init */
    cuvil_weights_format weights_format;   /* --weights-format asm|c (default asm) */
    cuvil_precision precision;   /* --precision fp32|fp16|bf16 (default fp32) */
    /* --quantize int8: quantize the float model's convolutions and matrix products to int8,
     * calibrated on the input sets in `calibrate` (a folder; see cuvil-compile --help), and
     * print the accuracy cost on them. keep_float: node names or ops left in float32. */
    int quantize;                /* 0: no; 8: int8 */
    const char *calibrate;
    cuvil_calibration calibration;
    int n_keep_float;
    const char *keep_float[CUVIL_MAX_KEEP_FLOAT];
    int n_shapes;
    cuvil_shape_binding shapes[CUVIL_MAX_SHAPE_BINDINGS];   /* --shape INPUT=... */
    int n_seqs;
    cuvil_seq_binding seqs[CUVIL_MAX_SHAPE_BINDINGS];       /* --seq INPUT=... */
    /* --activations fp16|bf16: the float32 tensors that go from one kernel to others are stored
     * in 16 bits between them (rounded to nearest even; each kernel widens what it reads and
     * computes in float32). CUVIL_PRECISION_FP32 (the default): as they are. Independent of
     * `precision` (the weights). */
    cuvil_precision activations;
} cuvil_options;

typedef struct cuvil_ctx cuvil_ctx;

CUVIL_API cuvil_status cuvil_ctx_create(cuvil_ctx **out);
CUVIL_API void cuvil_ctx_destroy(cuvil_ctx *ctx);
/* The message of the last failed call on ctx ("" if none); owned by ctx. */
CUVIL_API const char *cuvil_errmsg(const cuvil_ctx *ctx);

CUVIL_API void cuvil_options_init(cuvil_options *o);

/* Compiles the ONNX model at model_path into output_path (see cuvil_emit). On failure nothing
 * is left at output_path.
 *
 * Output safety: Cuvil never deletes or overwrites what it did not write. It refuses an output
 * (or the header beside a library) that is the model itself, that exists and was not written by
 * Cuvil, and for --emit c a folder that is not empty and holds no Cuvil marker file (or holds
 * files the marker does not list). Everything is written to temporary names and renamed into
 * place; temporaries are removed on every exit path (see cuvil_install_signal_cleanup). */
CUVIL_API cuvil_status cuvil_compile_file(cuvil_ctx *ctx, const char *model_path, const cuvil_options *o,
                                const char *output_path);

/* Parses cuvil-compile's options (argv holds arguments only, no program name: "--dim",
 * "batch=1:8", "--target", "x86_64-avx2", ...) into o, which cuvil_options_init() has set up.
 * --model and --output are stored in *model and *output (pass NULL to refuse them); each is
 * then required. Without --emit, the output's extension picks it (.a: archive, else so).
 * Strings in o point into argv or into copies owned by ctx: both must outlive the compile.
 * A bad argument is CUVIL_ERR_INVALID_ARG with a message naming it. */
CUVIL_API cuvil_status cuvil_options_parse(cuvil_ctx *ctx, cuvil_options *o, int argc, const char *const *argv,
                                 const char **model, const char **output);
/* cuvil-compile as a call: parses argc/argv (with --model and --output) and compiles. For
 * bindings (python/cuvil) that pass the command line's strings instead of a cuvil_options. */
CUVIL_API cuvil_status cuvil_compile_args(cuvil_ctx *ctx, int argc, const char *const *argv);

/* Installs handlers for every catchable signal that would end the process (SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1/2, SIGXCPU, SIGABRT, the real-time signals, ...;
 * not the crash signals SIGSEGV, SIGBUS, SIGILL, SIGFPE) that remove the compiler's temporary
 * files and build folders, stop a running C compiler (which then runs in a process group of its
 * own), and let the signal take its default effect; also ignores SIGXFSZ, so that a file-size
 * limit is a write error with a message rather than a kill. For programs (cuvil-compile) that
 * own their signal handling. */
CUVIL_API void cuvil_install_signal_cleanup(void);

/* ===== Building a graph without a model file ======================================= */
/* A CIR graph built by calls: graph inputs, constants, nodes of CIR ops ("conv", "add",
 * "reshape", ...: the names `cuvil-compile --emit ir` prints; docs/OPS.md lists them with their
 * attributes) and graph outputs, then compiled like a model file. Values are referred to by the
 * ids these calls return (-1 stands for an omitted optional input). Names are data: they appear
 * in messages and in the compiled model's tensor descriptions, never as code.
 *
 *     cuvil_graph *gr;
 *     cuvil_graph_create(ctx, "tiny", &gr);
 *     int64_t dims[2] = {1, 4};
 *     int x = cuvil_graph_input(gr, "x", CUVIL_DTYPE_FLOAT32, 2, dims, NULL);
 *     int y;
 *     cuvil_graph_node(gr, "relu", "act", 1, &x, 1, &y, NULL, 0, NULL);
 *     cuvil_graph_output(gr, y);
 *     cuvil_compile_graph(gr, &o, "tiny.so");
 *     cuvil_graph_destroy(gr);
 */
typedef enum cuvil_attr_type {
    CUVIL_ATTR_INT = 1,
    CUVIL_ATTR_FLOAT,
    CUVIL_ATTR_STRING,    /* enum-valued attributes ("same_upper") and dtype names ("int64") */
    CUVIL_ATTR_INTS,
    CUVIL_ATTR_FLOATS
} cuvil_attr_type;

typedef struct cuvil_attr {
    const char *name;
    cuvil_attr_type type;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;   /* INTS: n elements */
    const float *floats;   /* FLOATS: n elements */
    size_t n;
} cuvil_attr;

typedef struct cuvil_graph cuvil_graph;

/* Creates an empty graph whose errors are reported on ctx. */
CUVIL_API cuvil_status cuvil_graph_create(cuvil_ctx *ctx, const char *name, cuvil_graph **out);
CUVIL_API void cuvil_graph_destroy(cuvil_graph *g);
/* Adds a graph input; dim_names (NULL, or ndim entries each NULL or a name) label dims as
 * symbols. Returns the value id, or -1 with a message on the context. */
CUVIL_API int cuvil_graph_input(cuvil_graph *g, const char *name, cuvil_dtype dtype, int ndim, const int64_t *dims,
                      const char *const *dim_names);
/* Adds a constant holding a copy of data (dense, row-major, dtype's size per element).
 * Returns the value id, or -1. */
CUVIL_API int cuvil_graph_constant(cuvil_graph *g, const char *name, cuvil_dtype dtype, int ndim, const int64_t *dims,
                         const void *data);
/* Adds a node of CIR op `op` reading n_in value ids; its n_out outputs are new values whose
 * ids are written to outputs (out_names: NULL, or n_out names, NULL for "<node>:<i>"). The
 * attributes are checked against the op's table: unknown, repeated or mistyped ones are
 * errors. Shapes are inferred when the graph is compiled. */
CUVIL_API cuvil_status cuvil_graph_node(cuvil_graph *g, const char *op, const char *name, int n_in, const int *inputs,
                              int n_out, int *outputs, const char *const *out_names, int n_attrs,
                              const cuvil_attr *attrs);
/* Marks a value as a graph output (in call order). */
CUVIL_API cuvil_status cuvil_graph_output(cuvil_graph *g, int value);
/* Compiles the graph as cuvil_compile_file() compiles a model (same options and outputs; dims
 * are the numbers the graph was built with, so o->n_dims must be 0). A graph is compiled once:
 * the passes rewrite it, and a second call is an error. */
CUVIL_API cuvil_status cuvil_compile_graph(cuvil_graph *g, const cuvil_options *o, const char *output_path);
/* The same with cuvil-compile's options as arguments (--output required; no --model, and no
 * --dim: see above). */
CUVIL_API cuvil_status cuvil_compile_graph_args(cuvil_graph *g, int argc, const char *const *argv);

/* ===== Tensor files (used by cuvil-run and the tests) ============================== */
/* A dense host tensor; data is malloc'd and owned by the struct. */
typedef struct cuvil_host_tensor {
    cuvil_dtype dtype;
    int ndim;
    int64_t dims[CUVIL_MAX_DIMS];
    void *data;
    size_t nbytes;
    char *name;        /* the TensorProto's name for .pb files, else NULL; malloc'd */
} cuvil_host_tensor;

/* Size in bytes of one element of dtype, 0 for unknown/variable-size types. */
CUVIL_API size_t cuvil_dtype_size(cuvil_dtype dtype);
CUVIL_API const char *cuvil_dtype_name(cuvil_dtype dtype);

/* Reads a .npy file (little-endian, C order; fortran_order is refused) or an ONNX TensorProto
 * .pb file (chosen by content, not by extension) into *out. On failure writes a one-line
 * message naming the file and the problem into err (errlen bytes) and returns a status. */
CUVIL_API cuvil_status cuvil_tensor_read(const char *path, cuvil_host_tensor *out, char *err,
                               size_t errlen);
/* The same for a file of at most max_bytes (cuvil_tensor_read allows the default tensor_bytes
 * limit plus a header). Only regular files are read: a FIFO or a device (/dev/zero) is refused
 * before anything is read. */
CUVIL_API cuvil_status cuvil_tensor_read_max(const char *path, uint64_t max_bytes, cuvil_host_tensor *out, char *err,
                                   size_t errlen);
/* Writes t as .npy atomically (temp file + rename): on failure no file is left at path. */
CUVIL_API cuvil_status cuvil_npy_write(const char *path, const cuvil_host_tensor *t, char *err,
                             size_t errlen);
CUVIL_API void cuvil_host_tensor_free(cuvil_host_tensor *t);
/* Reads a sequence of tensors: an ONNX SequenceProto .pb file, or a folder of 0.npy, 1.npy, ...
 * (each .npy or TensorProto .pb, read until the next number is missing). At most max_n
 * elements and max_bytes of their data. *out (free with cuvil_host_seq_free) gets *n_out
 * elements. */
CUVIL_API cuvil_status cuvil_seq_read_max(const char *path, uint64_t max_bytes, int max_n, cuvil_host_tensor **out,
                                          int *n_out, char *err, size_t errlen);
CUVIL_API void cuvil_host_seq_free(cuvil_host_tensor *ts, int n);
/* Reads an ONNX OptionalProto .pb file for an optional input of a sequence (want_seq) or a
 * tensor: *kind 0 (it holds nothing), 1 (a tensor, into *t) or 2 (a sequence of *n tensors,
 * into *seq; free with cuvil_host_seq_free), or -1 when the file is not an OptionalProto (read
 * it as the value's own file). For a sequence, a SequenceProto is the value itself (the two
 * formats read alike). The limits are cuvil_seq_read_max's. */
CUVIL_API cuvil_status cuvil_optional_read_max(const char *path, uint64_t max_bytes, int max_n, int want_seq, int *kind,
                                               cuvil_host_tensor *t, cuvil_host_tensor **seq, int *n, char *err,
                                               size_t errlen);
/* Writes a sequence of n tensors as a .npz (NumPy's zip of arr_0.npy, arr_1.npy, ...: np.load
 * reads it; uncompressed, at most 4 GiB), atomically as cuvil_npy_write. */
CUVIL_API cuvil_status cuvil_npz_write(const char *path, const cuvil_host_tensor *ts, int n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* CUVIL_H */
