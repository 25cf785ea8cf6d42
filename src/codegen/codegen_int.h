/*
 * codegen_int.h -- the C emitter's interface for ops, memory planning and the compiler driver.
 *
 * Each live node becomes one `static void nK(...)` function in the generated model.c whose
 * body the op's emitter (emit/emit_<family>.c, found by cg_emitter) writes with cg_printf();
 * pointer expressions for its operands come from cg_in()/cg_out(), kernel parameter blocks
 * become file-scope `static const` initialisers via cg_param(). Constants are placed in the
 * weights blob when first referenced, so weights no node reads are never written.
 */
#ifndef CUVIL_CODEGEN_INT_H
#define CUVIL_CODEGEN_INT_H

#include "ir/cir.h"

typedef struct cg_ctx cg_ctx;

/* ===== Generated files ================================================================= */
/* cg_generate writes all of a model's C into one text, each file after a line that starts
 * with CG_FILE_MARK and names it, then closes the comment; cg_split_files cuts it there. No line of
 * generated code starts with '/' but these (model strings appear only inside escaped string
 * literals and sanitised comments, after code on their line). Nodes go into part files of
 * CG_PART_NODES each, compiled apart (in parallel): a C compiler's time grows faster than the
 * size of one file (an Add chain of 4000 nodes: 12 s as one file). */
#define CG_FILE_MARK "/* @cuvil-file "
#ifndef CG_PART_NODES
#define CG_PART_NODES 256
#endif
typedef struct cg_file {
    char name[32];          /* "model.c", "cuvil_model_int.h", "part_0003.c" */
    const char *text;       /* inside the text that was split */
    size_t len;
} cg_file;
/* The files of a generated text, in order; *n their number (a text without markers is one
 * file, "model.c"). Returns NULL when out of memory; cuvil_free() it. */
cg_file *cg_split_files(const char *text, size_t len, int *n);

/* ===== Targets (targets.inc, targets.c) ============================================== */
typedef struct cuvil_target_info {
    const char *name;       /* "x86_64-avx2" */
    const char *arch;       /* "x86_64", "any" */
    const char *cflags;     /* for the runtime and the model */
    const char *kernels;    /* ISA kernel file suffix, "" for the portable ones only */
    const char *features;   /* CPU features the code may use, checked at create ("" for none) */
    int mr, nr;             /* GEMM microkernel tile */
    int64_t mc, kc, nc;     /* GEMM blocking */
    int direct;             /* the channels-first direct convolution may run (targets.inc) */
} cuvil_target_info;

/* The entry of the table for name, or NULL. */
const cuvil_target_info *cuvil_target_find(const char *name);
/* "generic, x86_64-avx2, ..." */
const char *cuvil_target_names(void);

/* C element type name for a dtype ("float", "int64_t", ...). */
const char *cg_ctype(cir_dtype t);
/* Pointer expressions, e.g. "((const float *)(W + 4096))", "((float *)(A + 0))",
 * "((const float *)in[0])". Valid until the node's emission ends. */
const char *cg_in(cg_ctx *cg, int value_id);
const char *cg_out(cg_ctx *cg, int value_id);
/* A static table of cuvil_ref for the n values ids (see cuvil_resolve_refs); returns its name. */
const char *cg_refs(cg_ctx *cg, const int *ids, int n);
/* Places nbytes of compile-time data (e.g. folded BatchNorm scale) in the weights blob and
 * returns a const pointer expression of element type dtype. */
const char *cg_data(cg_ctx *cg, const void *data, size_t nbytes, cir_dtype dtype);
/* --precision fp16|bf16: whether packed constant `packed` (a conv's Winograd-transformed
 * weights) is made when a context is created, from its source weights stored in 16 bits, instead
 * of being stored: a transform of rounded weights keeps the rounding error of the weights alone
 * (transformed weights rounded again come out 3-4 times further off), and the source is a
 * quarter of the transform's size. If so the emitter calls cg_pack_at_create once it has the
 * kernel's parameter block. */
bool cg_packs_at_create(cg_ctx *cg, const cir_node *n);
/* --precision fp16|bf16: CUVIL_W16_F16 or _BF16 when constant `value` of the node being emitted
 * (a Gemm's or MatMul's prepacked B, a Gather's table) is read in place in 16 bits (cg_in then
 * gives a const uint16_t *, for cuvil_f32_gemm_w16 or cuvil_gather_w16); else 0, the kernel
 * reads it in float32. Only the node's kernel may read such a value (else an internal error).
 * product: the product's B, which under --precision bf16 is CUVIL_W16_BF16_DOT (its A rounded to
 * bfloat16 too; a 16-bit model's products keep float32 arithmetic). */
int cg_w16_resident(cg_ctx *cg, int value, bool product);
/* A cg_w16_resident kind as the kernel's argument (", CUVIL_W16_F16"), "" for 0. */
const char *cg_w16_arg(int kind);
/* Emits `fn(&params, source, packed, tmp)` into the function create() runs on the widened
 * weights (once per packed constant); tmp_floats: what the call needs at tmp. */
void cg_pack_at_create(cg_ctx *cg, const char *fn, const char *params, int source, int packed, size_t tmp_floats);
/* Declares `static const <type> P<k> = <init>;` at file scope and returns "P<k>"; a type
 * ending in "[]" declares an array (`static const int64_t P<k>[] = ...`). In a symbolic node
 * (cg_node_symbolic) a local `const` of the node's function: init may use the run's D[]. */
const char *cg_param(cg_ctx *cg, const char *type, const char *init_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records that the node needs scratch memory: `bytes` computed now for the target (the model
 * header states the largest as PREFIX_SCRATCH_BYTES), and size_expr, the same size computed by
 * the linked runtime, e.g. "cuvil_f32_conv2d_scratch_size(&P3)", which create() checks against
 * it. Returns the scratch pointer expression ("S"). */
const char *cg_scratch(cg_ctx *cg, size_t bytes, const char *size_expr_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The runtime's name for an element type ("CUVIL_T_I64"), for the typed kernels. */
const char *cg_rt_type(cir_dtype t);
/* Marks the current node as one that can fail at run time (its body returns 1 from the node
 * function on failure, e.g. `if (cuvil_gather_rt(...)) return 1;`); run() then reports
 * "<node>: <what>" and returns CUVIL_ERR_INVALID_ARG. */
void cg_fallible(cg_ctx *cg, const char *what);
/* Appends to the current node's body. */
void cg_printf(cg_ctx *cg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A float as a C literal that round-trips exactly ("1.5f", "INFINITY"). Returns buf. */
const char *cg_float(float x, char buf[32]);
/* "{ .act = 1, .alpha = 0.0f, .beta = 0.0f }" for activation params. Returns buf. */
const char *cg_act(const cuvil_act_params *a, char buf[128]);
/* An int64 as a C literal that is valid for every value (INT64_MIN included). Returns buf. */
const char *cg_i64(int64_t v, char buf[32]);
/* An int64 array as "{ 1LL, 2LL, 3LL }" (n elements). Returns a string valid for the node. */
const char *cg_i64s(cg_ctx *cg, const int64_t *v, int n);

/* A copy of s that lives until the node's emission ends. */
const char *cg_str(cg_ctx *cg, const char *s);
/* The graph and the node being emitted. */
cir_graph *cg_graph(cg_ctx *cg);
const cir_node *cg_node(cg_ctx *cg);

/* ===== Symbolic dims (a graph of expression dims, cir_graph.symdims) ================= */
/* Whether node n reads or writes a value whose dims are expressions of the symbols, or reads
 * a value that follows them (cir_value.sval: a Slice's start at a loop's iteration number):
 * its emitter then has the kernel's parameters computed when the model runs (cg_bind). */
bool cg_node_symbolic(const cir_graph *g, const cir_node *n);
/* The index in D[] of the size known only when the model runs as symbol dsym (cir_node.rt_first):
 * the node that finds it writes `D[slot] = ...`. */
int cg_rt_slot(cg_ctx *cg, int dsym);
/* The D[] index where the run says whether optional graph output i holds a value (after the
 * symbols and the sizes the run finds), or -1 for an output that is not optional. */
int cg_present_slot(cg_ctx *cg, int i);
/* A sequence's layout (cuvil_seq_params) as a static's name (emit_seq.c). */
const char *cg_seq_params(cg_ctx *cg, const cir_value *v);
/* A Reshape's output dims from its shape read when the model runs, into D[] (emit_shape.c). */
void cg_emit_found_dims(cg_ctx *cg, cir_graph *g, cir_node *n);
/* Node n's k-th found size (op_found_dim): its D[] slot (-1: none) and, into hi (when not
 * NULL), the room planned for it as a C literal. */
int cg_found_slot(cg_ctx *cg, const cir_graph *g, const cir_node *n, int k, char hi[32]);
/* `D[slot] = <call>;` for a kernel that returns the size it finds, or -1 (a value it refuses, or
 * over the room planned), which fails the node with `what`. */
void cg_found_call(cg_ctx *cg, int slot, const char *what, const char *call_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The room planned for node n's found sizes k = 0..cnt-1 (op_found_dim) as a C initialiser, and
 * their D[] slots into slots[]. */
const char *cg_found_his(cg_ctx *cg, cir_graph *g, const cir_node *n, int cnt, int *slots);
/* An expression as C over the run's dims D[] ("(D[0] * 768)"); valid until the node ends. */
const char *cg_dim_c(cg_ctx *cg, const cir_dim *e);
/* Value vid's size in bytes as C: a number, or an expression of D[]. */
const char *cg_nbytes(cg_ctx *cg, int vid);
/* Value vid's element count as C: a number, or an expression of D[]. */
const char *cg_numel(cg_ctx *cg, int vid);
/* scale times the product of value vid's dims from..to-1, as C (a number when fixed). */
const char *cg_dimprod(cg_ctx *cg, int vid, int from, int to, int64_t scale);
/* "{ d0, d1, ... }": value vid's dims as a C initialiser (expressions of D[] where symbolic),
 * padded at the front with 1s to rank r (>= its rank). */
const char *cg_dims_init(cg_ctx *cg, int vid, int r);
/* Value vid's dims as C: the name of a local `const int64_t` array of them, declared in the
 * node's function (a scalar's: a one-element array). */
const char *cg_dims(cg_ctx *cg, int vid);
/* The kernel parameters of a symbolic node: a local `type P<k>` initialised from init (the
 * fields that do not depend on dims: attributes, the lowering's choices), completed when the
 * model runs by `bind(&P<k>, n, nd, d)`, the runtime's function that computes the fields that
 * depend on dims from the ranks nd[] and dims d[] of values ids[0..n) (the node's inputs then
 * outputs, as the op's bind documents; -1 for an absent one: rank -1, NULL). Returns "P<k>". */
const char *cg_bind(cg_ctx *cg, const char *type, const char *bind, const int *ids, int n, const char *init_fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The same with the node's inputs then its outputs as the values. */
const char *cg_bind_node(cg_ctx *cg, const cir_node *n, const char *type, const char *bind, const char *init);

/* ===== Emitters (emit/) =============================================================== */
/* Writes node n's C with the calls above; errors name the node. */
typedef cuvil_status (*cg_emit_fn)(cg_ctx *cg, cir_graph *g, cir_node *n);
/* The emitter of op kind k (emit/emit.inc), or NULL for the ops without a run-time kernel:
 * ALIAS ops, whose bytes codegen shares or copies itself, and FOLD_ONLY ones. */
cg_emit_fn cg_emitter(cir_op_kind k);

/* ===== Memory plan (memplan.c) ====================================================== */
typedef enum cg_loc_kind { CG_LOC_NONE = 0, CG_LOC_INPUT, CG_LOC_OUTPUT, CG_LOC_ARENA, CG_LOC_CONST } cg_loc_kind;

typedef struct cg_loc {
    cg_loc_kind kind;
    int64_t index;     /* input/output position, or byte offset in arena/weights */
    int64_t off;       /* an output's: bytes into the caller's buffer (a Concat's input written in place) */
} cg_loc;

typedef struct cg_plan {
    cg_loc *loc;        /* per value id */
    /* per node: an ALIAS node whose output shares its input's bytes, or a Concat whose inputs
     * were written in place (nothing to run) */
    bool *aliased;
    size_t arena_bytes;
} cg_plan;

/* Plans storage for every value: graph inputs/outputs use the caller's buffers, alias nodes
 * share bytes where they can, other activations get offsets in one arena from their lifetimes
 * (greedy by size); constants are left CG_LOC_CONST with offsets assigned later by codegen.
 * Then verifies that no two values live at the same time overlap. */
cuvil_status cg_plan_memory(cir_graph *g, cg_plan *plan);
void cg_plan_free(cg_plan *plan);

/* ===== Driver (codegen.c) ============================================================ */
#define CG_WSEG_TRANSIENT 8
typedef struct cg_output {
    cuvil_sb model_c;      /* model.c */
    cuvil_sb model_h;      /* <prefix>.h */
    cuvil_sb weights;      /* weights.bin */
    size_t weights_len;    /* the size of the weights' layout the nodes read: weights.len, unless
                            * --precision stores some in 16 bits (then the segments below say
                            * how create() widens weights.bin into it) */
    struct cg_wseg {
        uint64_t dst, src, n;
        int kind;          /* 0 n bytes as they are, 1 n halves, 2 n bfloat16s (cuvil_wseg's), with
                            * CG_WSEG_TRANSIENT: into the transient layout */
    } *segs;
    int n_segs, cap_segs;
    bool merge_raw;        /* the last segment is raw and ends the stored layout: a raw one may join it */
    size_t transient_len;  /* the layout create() fills, packs the weights from and frees */
    uint64_t f32_bytes, narrowed_bytes;   /* float32 bytes placed, and of those stored in 16 bits */
    uint64_t resident16_bytes;   /* of those, the bytes kept in 16 bits in memory too (cg_w16_resident) */
    int kept_range;        /* float32 constants kept: outside the 16-bit type's range */
    size_t arena_bytes;
} cg_output;

/* Emits the C for graph g (after passes). prefix: the symbol prefix; abi_h: the text of
 * cuvil_model.h, pasted into the model's header so that it is self-contained. */
cuvil_status cg_generate(cir_graph *g, const cuvil_options *o, const char *prefix,
                         const char *target, const char *abi_h, cg_output *out);
void cg_output_free(cg_output *out);

#endif
