/*
 * cir.h -- CIR, Cuvil's typed dataflow graph.
 *
 * A graph is a list of values and a list of nodes in topological order. Values have a dtype
 * (CIR's own enum, cir_dtype) and a shape whose dims are integers, each optionally tied to a
 * named symbol (the `batch` an exporter leaves open); this version binds every symbol to a
 * number before shape inference and keeps the name so the compiled model can report it. A
 * value is one of: a graph input, a constant (data known at compile time), or an activation
 * produced by a node.
 *
 * The IR owns its ops (ir/ops/ops.inc): a node has an op kind, that op's attributes (typed
 * and checked against the op's attribute table, ir/ops/ops.h; absent ones take the table's
 * default), its source node name and
 * source op name (both only for messages and generated comments), and what passes add: a
 * fused activation and a fused residual input. Nothing in a node depends on where the graph
 * came from; frontends map their ops onto these (src/frontend/onnx/onnx_ops.c).
 *
 * Storage is pointer-stable: values and nodes live in fixed-size chunks that never move, so a
 * cir_value * or cir_node * stays valid while the graph grows (cir_val, cir_node_at). Refer
 * to them by id across calls that add to the graph anyway; ids are what nodes store.
 *
 * All memory belongs to the graph; cir_graph_free() releases everything.
 */
#ifndef CUVIL_CIR_H
#define CUVIL_CIR_H

#include <string.h>

#include "cuvil/cuvil.h"
#include "cuvil_rt.h"
#include "ir/dim.h"
#include "util/util.h"

#define CIR_MAX_DIMS CUVIL_MAX_DIMS

/* ===== Element types ================================================================== */
/* CIR's element types, numbered densely (tables and loops over every dtype index by them).
 * Keep in ORDER with the table in src/ir/dtype.c. */
typedef enum cir_dtype {
    CIR_UNDEF = 0,
    CIR_F32, CIR_F64, CIR_F16, CIR_BF16,
    CIR_I8, CIR_I16, CIR_I32, CIR_I64,
    CIR_U8, CIR_U16, CIR_U32, CIR_U64,
    CIR_BOOL,
    CIR_I4, CIR_U4,   /* one element per byte; only the ops of cir_dtype_4bit_ok take them */
    CIR_DTYPE__COUNT
} cir_dtype;

size_t cir_dtype_size(cir_dtype t);          /* bytes per element; 0 for CIR_UNDEF */
const char *cir_dtype_name(cir_dtype t);     /* "float32", "int64", "bool", ... */
const char *cir_dtype_short(cir_dtype t);    /* "f32", "i64", "bool", ... */
bool cir_dtype_is_float(cir_dtype t);        /* f32, f64, f16, bf16 */
bool cir_dtype_is_int(cir_dtype t);          /* signed or unsigned integers (not bool) */
bool cir_dtype_is_signed(cir_dtype t);       /* signed integers and floats */
/* The public (ABI) element type and back; CIR_UNDEF for a public type CIR does not hold
 * (string, complex, float8). */
cir_dtype cir_dtype_from_public(cuvil_dtype t);
cuvil_dtype cir_dtype_to_public(cir_dtype t);
/* The public enum's name in C: "CUVIL_DTYPE_FLOAT32". */
const char *cir_dtype_public_symbol(cir_dtype t);
/* By name ("float32" or "f32"), CIR_UNDEF if none. */
cir_dtype cir_dtype_by_name(const char *name);

/* ===== Ops ============================================================================= */
typedef enum cir_op_kind {
    CIR_OP_NONE = 0,
#define CIR_OP(kind, name) CIR_OP_##kind,
#include "ir/ops/ops.inc"
#undef CIR_OP
    CIR_OP__COUNT
} cir_op_kind;

/* An activation fused into a node's epilogue: one of the elementwise ops that can fuse
 * (CIR_OP_IS_ACT: relu, clip, sigmoid, ...) with its parameters; op CIR_OP_NONE for none. */
typedef struct cir_act {
    cir_op_kind op;
    float alpha, beta;
} cir_act;

/* One step of a node's fused epilogue, applied to its output after the op: the addition of a
 * value of the output's shape (a residual), or an activation. A node's list runs in order;
 * the kernels take an addition then an activation, each at most once (cir_post_kernel_form),
 * and the passes that fuse build only that form. */
typedef enum cir_post_kind {
    CIR_POST_ADD = 1,   /* y += value */
    CIR_POST_ACT        /* y = act(y) */
} cir_post_kind;

typedef struct cir_post {
    cir_post_kind kind;
    int value;          /* CIR_POST_ADD: the value added; else -1 */
    cir_act act;        /* CIR_POST_ACT: the activation */
} cir_post;

#define CIR_MAX_POSTS 4

/* ===== Values ========================================================================== */
typedef enum cir_value_kind {
    CIR_VAL_ACT = 0,   /* produced by a node */
    CIR_VAL_INPUT,     /* a graph input: caller's buffer */
    CIR_VAL_CONST      /* data known at compile time */
} cir_value_kind;

typedef struct cir_value {
    int id;
    const char *name;          /* source name; for messages and escaped strings only */
    cir_value_kind kind;
    cir_dtype dtype;           /* CIR_UNDEF until inferred */
    int ndim;                  /* -1 until inferred */
    int64_t dims[CIR_MAX_DIMS];
    int dim_sym[CIR_MAX_DIMS]; /* index into graph->syms, or -1 */
    /* Each dim as an expression of the graph's symbols (ir/dim.h, in g->dt), or NULL for a dim
     * that is the constant dims[i]. Where dx[i] is not a constant, dims[i] is its upper bound
     * (what memory is planned for), never its value: code that needs the value reads dx. Set
     * by the ops whose inference computes expressions (CIR_OPF_SYM_DIMS, cir_set_shape_x). */
    const cir_dim *dx[CIR_MAX_DIMS];
    /* An integer tensor of at most CIR_MAX_SVAL elements whose values are known as expressions
     * of the symbols (a Shape of a symbolic value, arithmetic on it): its elements in
     * row-major order, or NULL. What a Reshape, Slice or Expand reads its target from. */
    const cir_dim **sval;
    /* seq_n >= 0: a sequence (ONNX seq(tensor)) of seq_n tensors of type dtype and rank ndim
     * (-1 while it has none); dims[d] bounds dim d over its elements, and dx[d] is every
     * element's dim d where bit d of seq_same is set. Stored as a block (cir_seq_hdr_bytes): a
     * header of int64s (the count, then each element's dims), then a slot per element with
     * room for the bounds. -1: a tensor (every other value). seq_n is then the most elements
     * it may hold; seq_cnt its count as an expression of the symbols (at most seq_n), or NULL
     * where only the run knows it (the header holds it); seq_sym: for a sequence graph input,
     * the g->syms index of the symbol its count binds (cir_graph_bind_syms), else -1. */
    int seq_n;
    uint32_t seq_same;
    const cir_dim *seq_cnt;
    int seq_sym;
#define CIR_SEQ_MAX 1024   /* elements a sequence may hold */
    void *data;                /* CIR_VAL_CONST: dense row-major data, owned by the graph */
    int producer;              /* node id, -1 for inputs and constants */
    int n_uses;                /* computed by cir_graph_count_uses() */
    int output_index;          /* position among graph outputs, -1 if not an output */
    /* What the source declares for this value (a graph output or a value_info entry), checked
     * against what shape inference finds. decl_dtype CIR_UNDEF: nothing declared. */
    /* An ONNX optional (onnx_load.c pairs each with its presence): the value id of the bool
     * scalar that says whether this value holds one, else -1. The loader's: after it, the
     * graph reads presence through opt_elem and present nodes only. optional: a graph input or
     * output that may be absent (the caller's NULL; cuvil_model_desc.output_present). */
    int opt_has;
    bool optional;
    cir_dtype decl_dtype;
    int decl_kind;             /* 0: no type declared, 1: a tensor, 2: a sequence (decl_dtype: its elements') */
    int decl_ndim;             /* -1: no shape declared */
    int64_t decl_dims[CIR_MAX_DIMS];   /* -1: not a fixed number (symbolic or absent) */
} cir_value;

/* ===== Nodes =========================================================================== */
struct cir_opdef;
struct cir_attr_spec;

/* One attribute set on a node: its entry in the op's table (name, type, default) and value.
 * INT, ENUM (index into the spec's names) and DTYPE (a cir_dtype) use i; FLOAT uses f; INTS
 * and FLOATS use n and ints/floats. Read them with the accessors of ir/ops/ops.h. */
typedef struct cir_attr {
    const struct cir_attr_spec *spec;
    int64_t i;
    float f;
    int n;
    int64_t *ints;
    float *floats;
} cir_attr;

/* The longest note a node's lowering may hold, its NUL included (the lowering writes them). */
#define CIR_ALGO_MAX 400

/* What the lowering stage chose for a node (src/lower/: kernel selection, weight packing,
 * block fusion, layouts), one record: the generated code names each choice (the runtime's
 * CUVIL_CONV_* algorithm, a layout's flags), and note says it in words. Zero (packed -1): the
 * op's one kernel, nothing packed, NCHW. */
typedef struct cir_lowering {
    const char *note;          /* the kernel and algorithm chosen, for --emit ir and comments
                                * (at most CIR_ALGO_MAX bytes, its NUL included) */
    int packed;                /* value id of weights packed for that kernel, or -1 */
    int algo;                  /* the kernel's algorithm code where it has several (0: its default) */
    int64_t kc;                /* the K blocking of the packed weights, 0: the target's kc */
    /* what the kernel needs beyond the inputs' shapes, in the graph's arena (mbblock: its
     * cuvil_mbblock_params; attention, from its fusion pass: cir_attention_kp); NULL for most */
    const void *params;
    /* a conv's channels-last input and output (CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC), a global
     * pool's input (CUVIL_POOL_X_NHWC), a binary op's inputs of its output's shape and its
     * output (CIR_BIN_CHANNELS_LAST), from the layout step; 0: NCHW */
    int layout;
    /* a conv's algo chosen so that its tensors could be channels last (a 1x1 conv's
     * pixels-as-rows GEMM beside a depthwise conv or Winograd with tiles as rows; Winograd with
     * tiles as rows where the fill alone would not take it): the layout step gives it back its
     * channels-first algorithm where neither its input nor its output ends channels last */
    bool for_layout;
} cir_lowering;

#define CIR_BIN_CHANNELS_LAST 1

typedef struct cir_node {
    int id;
    cir_op_kind kind;
    const struct cir_opdef *def;   /* cir_op_def(kind) */
    int n_attrs;
    cir_attr *attrs;           /* the attributes set (others take the spec's default) */
    const char *name;          /* source node name, or a synthesised "conv_12" */
    const char *src_op;        /* what the source called the op ("Conv", "Upsample"): messages only */
    int n_in, n_out;
    int *in;                   /* value ids; -1 for an omitted optional input; one spare slot */
    int *out;
    bool dead;                 /* removed by a pass; skipped everywhere, dropped by DCE */
    /* added by passes */
    cir_post post[CIR_MAX_POSTS];   /* the fused epilogue, in order (cir_post) */
    int n_post;
    const char *fused;         /* names of the ops fused in, for comments ("batch_norm+relu") */
    cir_lowering low;          /* the lowering stage's choices (src/lower/) */
    /* float16/bfloat16 inputs of an op whose kernel takes float32: shape inference casts them
     * to float32 before the node and its float32 outputs back to this type after it */
    cir_dtype half;
    bool half_out_done;        /* the casts after it are in place */
    bool half_cast;            /* a cast shape inference put there (not the model's): a round trip
                                * f32 -> half -> f32 of two of them may go (pass half_chain) */
    bool store16;              /* a cast --activations put there (src/lower/store16.c): narrowing,
                                * it fails the run where a finite value overflows the type */
    /* the sizes only the model's run knows that this node brings (a NonZero's count, the
     * values of a shape it reads from a tensor): g->rt_syms[rt_first .. rt_first + n_rt),
     * made once by cir_rt_found and cir_rt_load; n_rt 0 for most nodes */
    int rt_first, n_rt;
    /* the region the node runs in (g->regions): 0 for the graph's own nodes, else a branch of
     * an If, whose nodes come before it in the list and run only when its condition picks
     * that branch */
    int region;
    int then_region, else_region;   /* an If's two branches (0: none); a loop's body in then_region */
    /* an If's branch that cannot run at the sizes compiled for (1 then, 2 else; 0 none): its
     * nodes are dead, and the run fails with fail_msg (shape inference's reason) when the
     * condition picks it (pass_shape_infer.c) */
    int fail_branch;
    const char *fail_msg;
} cir_node;

/* A named dim. value: what shapes are built with (the fixed value, or for a symbolic one the
 * value of the compile at hand); min < max: symbolic, any value in [min, max] at run time. */
typedef struct cir_sym {
    const char *name;
    int64_t value;
    int64_t min, max;
    int64_t step;              /* a range's values are its multiples of step (>= 1) */
    /* a graph of expression dims (cir_graph.symdims): the dim as an expression, step * s with
     * s the table's symbol dsym (ranging over min/step .. max/step); NULL and -1 otherwise */
    const cir_dim *e;
    int dsym;
    bool defaulted;            /* neither --dim nor --shape gave it: compiled at 1 */
} cir_sym;

/* The most elements of a value known as expressions (cir_value.sval): shapes and the like. */
#define CIR_MAX_SVAL 64

/* Values and nodes live in chunks of CIR_CHUNK elements that never move. */
#define CIR_CHUNK_SHIFT 9
#define CIR_CHUNK (1 << CIR_CHUNK_SHIFT)

/* At most this many sizes known only when the model runs, per graph. */
#define CIR_MAX_RT_SYMS 64

typedef struct cir_graph {
    cuvil_ctx *ctx;
    cuvil_arena arena;
    const char *name;
    int n_values, n_nodes;
    cir_value **vchunks;       /* chunk pointers (this array may move; chunks do not) */
    cir_node **nchunks;
    int cap_vchunks, cap_nchunks;
    int n_inputs, n_outputs;
    int cap_inputs, cap_outputs;
    int *inputs;               /* value ids */
    int *outputs;              /* value ids */
    int n_syms;
    cir_sym syms[32];
    char model_sha256[65];
    const char *model_path;    /* as given; outputs name only its file (cir_model_name) */
    cuvil_limits limits;       /* bounds on what the model may make the compiler do */
    uint64_t const_bytes;      /* bytes of constant data held, checked against limits.total_bytes */
    uint64_t folded_bytes;     /* of those, computed at compile time (limits.folded_bytes) */
    double fold_work;          /* work spent folding so far (limits.fold_ops, cuvil_fold_work) */
    const char *target;        /* the target compiled for (the lowering stage reads it), or NULL */
    /* set by op_need_f32 when it refuses a float16/bfloat16 input (shape inference then
     * computes the node in float32 between casts instead) */
    bool half_input;
    /* some float16/bfloat16 nodes are computed in float32 between casts (a 16-bit model): its
     * weights are stored in 16 bits where that type holds them exactly (codegen's plan_w16) */
    bool half_model;
    uint8_t half_types;        /* which: 1 float16, 2 bfloat16 */
    int opt_level;             /* the options' opt level, for the lowering stage */
    struct cuvil_quant_state *quant;   /* --quantize int8: what pass quantize does (passes/quant_int.h) */
    /* each packed constant by what it was made from (src/lower/pack.c): one weight
     * read by many nodes in the same layout is packed once */
    cuvil_map pack_index;
    uint64_t packed_bytes;     /* their bytes, checked against packed_budget (limits.packed_bytes) */
    uint64_t packed_budget;
    /* The dims' expressions (cir_value.dx, .sval) live in this table. symdims: a model compiled
     * once for every value of its symbols, its shapes expressions of them (cir_graph_bind_syms). */
    cir_dimtab dt;
    bool symdims;
    /* The sizes known only when the model runs (cir_rt_found, cir_rt_load): their symbols in
     * dt, in the run's dims D[N_SYMS + r], each brought by one node (cir_node.rt_first): a size
     * its kernel finds and writes as it runs (rt_key -1 - k: its k-th), or the value of element
     * j of its input i, read just before it runs (rt_key i * CIR_MAX_SVAL + j), checked against
     * [rt_lo, rt_hi]. */
    int rt_syms[CIR_MAX_RT_SYMS], rt_key[CIR_MAX_RT_SYMS];
    int64_t rt_lo[CIR_MAX_RT_SYMS], rt_hi[CIR_MAX_RT_SYMS];
    const char *rt_value[CIR_MAX_RT_SYMS];   /* the value read, or whose dim is found: what a --dim names */
    int n_rt_syms;
    /* --dim NAME=LO:HI where NAME is a value of the model, not a symbol: the range of the
     * elements of an integer tensor a node reads sizes from, or of the dims of a value whose
     * sizes the run finds (cir_value_bound) */
    struct cir_value_bound {
        char *name;
        int64_t lo, hi;
    } *value_bounds;
    int n_value_bounds;
    /* Nested regions: regions[r] for r >= 1, each inside its parent (0: the graph). An If's
     * branch runs when the If's condition value `cond` is true (or, for an else branch,
     * false); a loop's body (loop, cond -1) runs once per iteration between its loop_begin and
     * loop nodes (op_loop.c). cur_region: the region nodes added now go into (cir_node_add). */
    struct cir_region {
        int parent, cond;
        bool is_else, loop;
    } *regions;
    int n_regions, cap_regions, cur_region;
    /* What the shapes assume and the compiler could not prove (two dims that must be equal: a
     * MatMul's K, broadcast partners): the generated code checks each once per run, before any
     * node runs, and fails naming the node. */
    struct cir_guard *guards;
    int n_guards, cap_guards;
} cir_graph;

typedef enum cir_guard_kind {
    CIR_GUARD_EQ,              /* a == b */
    CIR_GUARD_LE,              /* a <= b */
    CIR_GUARD_BCAST            /* a == b, or one of them is 1 (broadcasting) */
} cir_guard_kind;

typedef struct cir_guard {
    const cir_dim *a, *b;
    cir_guard_kind kind;
    int node_id;               /* checked before that node runs when it reads a size known only then */
    const char *node;          /* the node that assumes it, "MatMul 'mm1'" (for the message) */
    const char *what;          /* "the inner dims of the operands"; both in the graph's arena */
} cir_guard;

cir_graph *cir_graph_new(cuvil_ctx *ctx);
void cir_graph_free(cir_graph *g);

static inline cir_value *cir_val(const cir_graph *g, int id) {
    return id < 0 ? NULL : &g->vchunks[id >> CIR_CHUNK_SHIFT][id & (CIR_CHUNK - 1)];
}
static inline cir_node *cir_node_at(const cir_graph *g, int id) {
    return &g->nchunks[id >> CIR_CHUNK_SHIFT][id & (CIR_CHUNK - 1)];
}
/* Input i of n, or NULL if absent/omitted. */
/* Whether a and b have the same rank and dims (inferred shapes). */
static inline bool cir_same_dims(const cir_value *a, const cir_value *b) {
    return a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)(a->ndim > 0 ? a->ndim : 0)) &&
           !memcmp(a->dx, b->dx, sizeof(a->dx[0]) * (size_t)(a->ndim > 0 ? a->ndim : 0));
}
static inline cir_value *cir_in(const cir_graph *g, const cir_node *n, int i) {
    return i < n->n_in && n->in[i] >= 0 ? cir_val(g, n->in[i]) : NULL;
}
/* Output i, which must exist (frontends only create nodes whose required outputs exist). */
static inline cir_value *cir_out(const cir_graph *g, const cir_node *n, int i) {
    CUVIL_ASSERT(i < n->n_out && n->out[i] >= 0);
    return cir_val(g, n->out[i]);
}

/* Output i, or NULL where the node has none (an optional output left out). */
static inline cir_value *cir_out_opt(const cir_graph *g, const cir_node *n, int i) {
    return i < n->n_out && n->out[i] >= 0 ? cir_val(g, n->out[i]) : NULL;
}

/* ===== A node's fused epilogue (cir_post) =============================================== */
/* The values n reads: its inputs, then the values its epilogue adds (-1 for an omitted input
 * and for an epilogue step that reads none). */
static inline int cir_node_n_reads(const cir_node *n) { return n->n_in + n->n_post; }
static inline int cir_node_read(const cir_node *n, int j) {
    return j < n->n_in ? n->in[j] : n->post[j - n->n_in].kind == CIR_POST_ADD ? n->post[j - n->n_in].value : -1;
}
/* The value the kernel adds to its output before its activation (the epilogue's addition in
 * the kernels' form), or -1. */
static inline int cir_node_residual(const cir_node *n) {
    return n->n_post && n->post[0].kind == CIR_POST_ADD ? n->post[0].value : -1;
}
/* The activation the kernel applies last (the epilogue's, in the kernels' form), or none. */
static inline cir_act cir_node_act(const cir_node *n) {
    if (n->n_post && n->post[n->n_post - 1].kind == CIR_POST_ACT) return n->post[n->n_post - 1].act;
    return (cir_act){CIR_OP_NONE, 0, 0};
}
/* Whether n's epilogue is what the kernels take: an addition, then an activation, each at
 * most once (or nothing). */
static inline bool cir_post_kernel_form(const cir_node *n) {
    int k = 0;
    if (k < n->n_post && n->post[k].kind == CIR_POST_ADD) k++;
    if (k < n->n_post && n->post[k].kind == CIR_POST_ACT) k++;
    return k == n->n_post;
}
/* Appends step p to n's epilogue; false when the list is full. */
static inline bool cir_post_push(cir_node *n, cir_post p) {
    if (n->n_post >= CIR_MAX_POSTS) return false;
    n->post[n->n_post++] = p;
    return true;
}

/* Adds a value with no shape yet; returns its id, or -1 (out of memory or over
 * limits.values; message on ctx). */
int cir_value_add(cir_graph *g, const char *name, cir_value_kind kind);
/* Adds a constant value holding a copy of data (NULL: zeros); nbytes follow from dtype and
 * dims. Returns its id or -1 (message on ctx). */
int cir_const_add(cir_graph *g, const char *name, cir_dtype dtype, int ndim,
                  const int64_t *dims, const void *data);
/* Makes v a constant with fresh zeroed data of its dtype and shape; returns the data, or NULL
 * (message on the context) when out of memory or over limits.total_bytes. */
void *cir_value_make_const(cir_graph *g, cir_value *v);
/* Adds a node of op `kind` with no attributes set (see cir_node_set_attr in ir/ops/ops.h);
 * inputs/outputs are copied. src_op NULL: the CIR op name. Returns its id or -1 (message on
 * ctx: out of memory, over limits.nodes). */
int cir_node_add(cir_graph *g, cir_op_kind kind, const char *name, const char *src_op,
                 int n_in, const int *in, int n_out, const int *out);
/* The same, placed at position pos (0..n_nodes) of the node order: the nodes from pos on move
 * up one (their ids and their outputs' producers with them). A cir_node pointer taken before
 * the call may now point at another node. Only shape inference, which runs first, inserts. */
int cir_node_insert(cir_graph *g, int pos, cir_op_kind kind, const char *name, const char *src_op, int n_in,
                    const int *in, int n_out, const int *out);
/* Puts the nodes in a new order: position k gets the node that was at order[k] (a permutation
 * of 0 .. n_nodes - 1). Node ids, the values' producers and the guards' nodes follow. Where
 * a later stage adds nodes among the others (src/lower/store16.c): added at the end, then
 * placed all at once. */
cuvil_status cir_nodes_reorder(cir_graph *g, const int *order);
/* Appends a graph input / output (value ids). */
cuvil_status cir_graph_add_input(cir_graph *g, int id);
cuvil_status cir_graph_add_output(cir_graph *g, int id);

/* ===== Dims as expressions (ir/dim.h) ================================================== */
/* Dim i of v as an expression: dx[i], or the constant dims[i]; NULL when out of memory. */
const cir_dim *cir_dimx(cir_graph *g, const cir_value *v, int i);
/* Whether every dim of v is a number (no dx but constants). */
bool cir_value_fixed(const cir_value *v);
/* Sets v's dtype and the shape of `like` (its dims and their expressions). */
void cir_set_shape_like(cir_value *v, cir_dtype dtype, const cir_value *like);
/* Sets v's dtype and shape from expressions (each dims[i] its upper bound, dx[i] the
 * expression or NULL for a constant); every dx[i] must be non-NULL. Clears sval. */
void cir_set_shape_x(cir_value *v, cir_dtype dtype, int ndim, const cir_dim *const *dx);
/* The number of elements of v as an expression; NULL when the product cannot be formed
 * (message on the table, cir_dimtab_why). */
const cir_dim *cir_numel_x(cir_graph *g, const cir_value *v);
/* Element i of an integer value as an expression: its sval, or its constant data; NULL if
 * neither is known. */
const cir_dim *cir_sval_at(cir_graph *g, const cir_value *v, int64_t i);
/* Makes the symbols of g's dim ranges (min < max) symbols of its table and sets the dims of
 * the graph inputs that use them to their expressions: g becomes a graph of expression dims
 * (symdims). Errors name the symbol. */
cuvil_status cir_graph_bind_syms(cir_graph *g);
/* That dims a and b are equal, as node n's shapes need: nothing when they are the same
 * expression, an error naming n and `what` when they cannot be (constants that differ, bounds
 * apart), else a guard the model checks when it runs. NULL operands: the table's reason. */
cuvil_status cir_require_eq(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *what);
/* a <= b: proved, refused when provably false, else a guard checked when the model runs. */
/* The symbol of node n's k-th size that only the run knows (a NonZero's count), in 0..hi,
 * made on the first call (what: its name for people, "count"); the node's emitter writes its
 * value into D[] (cg_rt_slot) and must not write more than hi allows. NULL with a message on
 * failure. cir_rt_sym is k = 0. */
const cir_dim *cir_rt_found(cir_graph *g, cir_node *n, int k, int64_t hi, const char *what);
const cir_dim *cir_rt_sym(cir_graph *g, cir_node *n, int64_t hi, const char *what);
/* The symbol of the value of element j of node n's integer input i, which the model reads
 * just before n runs: what the node computes sizes from when the tensor is only known then
 * (a Reshape's shape, a TopK's k fed by the caller). Its range is [lo, hi] (the values the op
 * can take) narrowed by a --dim naming the input's value (cir_value_bound); a value outside it
 * fails the run naming the node and the value. NULL with a message on failure. */
const cir_dim *cir_rt_load(cir_graph *g, cir_node *n, int i, int j, int64_t lo, int64_t hi);
/* Whether e depends on a size only the run knows; on one that a kernel finds (not read from
 * a tensor before the node runs). */
bool cir_dim_uses_rt(const cir_graph *g, const cir_dim *e);
bool cir_dim_uses_found(const cir_graph *g, const cir_dim *e);
/* Where a node of region r runs: -1 when r lies in a branch of an If whose constant condition
 * takes the other; else the innermost region on the way up that is a loop's body or a branch
 * whose condition is known only when the model runs (0: none, the node runs once, always). */
int cir_region_live(const cir_graph *g, int r);
/* Whether region `inner` is region `outer` or lies inside it (a node of outer runs whenever
 * one of inner does). */
bool cir_region_within(const cir_graph *g, int inner, int outer);
/* The range a --dim gave to value `name` (true), or false. */
bool cir_value_bound(const cir_graph *g, const char *name, int64_t *lo, int64_t *hi);
cuvil_status cir_require_le(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *what);
/* That a and b broadcast (ONNX's rule: equal, or one is 1), proved now or checked when the model
 * runs; *out gets the broadcast dim (a where b is 1, b where a is, max(a, b) where only the run
 * knows which). A pair that may not be 1 must be equal (cir_require_eq). */
cuvil_status cir_require_bcast(cir_graph *g, const cir_node *n, const cir_dim *a, const cir_dim *b, const char *what,
                               const cir_dim **out);
/* An error naming node n for an expression that could not be formed (NULL): the table's reason. */
cuvil_status cir_dim_err(cir_graph *g, const cir_node *n, const char *what);

int64_t cir_numel(const cir_value *v);
size_t cir_nbytes(const cir_value *v);   /* a sequence's: its whole block */
/* A sequence's block: the header's bytes (64-aligned) and one element's slot (64-aligned). */
size_t cir_seq_hdr_bytes(const cir_value *v);
size_t cir_seq_slot_bytes(const cir_value *v);
/* Makes y the sequence type of x (count, bound, elements' type and dims). */
void cir_copy_seq_type(cir_value *y, const cir_value *x);
bool cir_is_const(const cir_value *v);
/* Sets v's dtype and shape (dims copied, symbols cleared). */
void cir_set_shape(cir_value *v, cir_dtype dtype, int ndim, const int64_t *dims);
/* Checks v's shape against the graph's limits (cuvil_shape_ok); errors name node n (or the
 * value alone when n is NULL). Shape inference runs it on every output it sets. */
cuvil_status cir_check_shape(cir_graph *g, const cir_node *n, const cir_value *v);
/* "f32[1,3,224,224]" with symbolic dims as "batch=1"; returns buf. Symbol names are written
 * through cuvil_safe_char(), so the text is safe in comments, DOT and messages. */
char *cir_shape_str(const cir_graph *g, const cir_value *v, char *buf, size_t len);

/* Conversions without undefined behaviour: double -> int64 truncates toward zero, NaN gives 0,
 * out-of-range values saturate; float -> IEEE half and -> bfloat16 round to nearest even
 * (overflow to infinity, NaN stays NaN). */
int64_t cir_f64_to_i64(double x);
uint16_t cir_f32_to_f16(float f);
uint16_t cir_f32_to_bf16(float f);
float cir_f16_to_f32(uint16_t h);
float cir_bf16_to_f32(uint16_t h);

/* Reads element i of a constant as int64 / double (any dtype). */
int64_t cir_const_i64(const cir_value *v, int64_t i);
double cir_const_f64(const cir_value *v, int64_t i);
/* Writes element i of a constant from a double / int64 (converted to its dtype). */
void cir_const_set_f64(cir_value *v, int64_t i, double x);
void cir_const_set_i64(cir_value *v, int64_t i, int64_t x);

/* Recomputes producers and use counts from the live nodes. */
void cir_graph_count_uses(cir_graph *g);

/* Checks structural invariants: every input of a live node is a graph input, a constant or
 * produced by an earlier live node; every value produced once; shapes and dtypes known when
 * `shapes` is set; outputs defined. Returns CUVIL_OK or CUVIL_ERR_INTERNAL with a message. */
cuvil_status cir_verify(cir_graph *g, bool shapes, const char *after_pass);

/* Printers. Text: one line per value declaration and node, with each op's attributes. DOT:
 * a Graphviz digraph. */
void cir_print_text(cir_graph *g, cuvil_sb *out);
void cir_print_dot(cir_graph *g, cuvil_sb *out);

/* The model's file name without its folders: what outputs record of where the model came from
 * (no path of the build machine in any output; the sha256 identifies the model). */
const char *cir_model_name(const cir_graph *g);
/* Message prefix for node n: "Conv 'conv1'" (the source op). Returns buf. */
const char *cir_node_desc(const cir_node *n, char *buf, size_t len);
/* Records an error about node n: "<op> '<name>': <message>". */
cuvil_status cir_node_err(cir_graph *g, const cir_node *n, cuvil_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* CUVIL_CIR_H */
