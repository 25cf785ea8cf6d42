/*
 * ops.h -- what one CIR op provides, in the parts of onnx2c's nodes: an attribute table, a
 * check of the inputs that infers every output's dtype and shape, and a fold (evaluate at
 * compile time when every input is constant). One file per op family, op_<family>.c in this
 * folder; the registry is ops.inc. The C an op's nodes become in the generated model is
 * codegen's (src/codegen/emit/emit_<family>.c), and the choice of kernel for a target the
 * lowering's (src/lower/): the IR knows neither targets nor C.
 *
 * Ops are CIR's own: their semantics are fixed (no opset versions, no frontend names). A
 * frontend maps its ops onto them (src/frontend/onnx/onnx_ops.c): legacy attribute forms
 * become constant inputs, opset-dependent defaults become explicit attributes.
 *
 * Adding an op: a `const cir_opdef cir_op_<name>` in an op file and a line in ops.inc; unless
 * the op is CIR_OPF_ALIAS or CIR_OPF_FOLD_ONLY, its emitter in src/codegen/emit/ and a line in
 * emit.inc, and its kernel in runtime/ (plus a frontend mapping if a frontend has the op).
 */
#ifndef CUVIL_IR_OPS_H
#define CUVIL_IR_OPS_H

#include "ir/cir.h"

enum {
    CIR_OPF_ALIAS = 1u << 0,        /* output 0 has input 0's bytes (reshape, flatten, ...) */
    CIR_OPF_TAKES_ACT = 1u << 1,    /* emit honours the epilogue's activation: a following one can fuse */
    CIR_OPF_IS_ACT = 1u << 2,       /* an elementwise activation that can fuse into its producer */
    CIR_OPF_TAKES_RESIDUAL = 1u << 3, /* emit honours the epilogue's addition (cir_node_residual) */
    /* no run-time kernel (and no emitter): a node is supported only when it folds, or when its
     * infer() computes the output (shape, size) */
    CIR_OPF_FOLD_ONLY = 1u << 4,
    /* its output's shape is its inputs' data (shape, size, range, constant_of_shape): a node
     * folds whenever it can, like a FOLD_ONLY one, and must then (infer() needs the data). Its
     * emitter computes what does not fold (a value that depends on a symbol) when the model runs */
    CIR_OPF_SHAPE_DATA = 1u << 5,
    /* infer() computes the outputs' dims as expressions of the inputs' (cir_dimx,
     * cir_set_shape_x), so nodes of the op take symbolic dims, and its emitter writes their
     * kernel parameters from the dims when the model runs. A node of another op whose inputs
     * have symbolic dims is refused. */
    CIR_OPF_SYM_DIMS = 1u << 6
};

/* ===== Attributes ======================================================================= */
typedef enum cir_attr_type {
    CIR_ATTR_INT = 1,
    CIR_ATTR_FLOAT,
    CIR_ATTR_INTS,
    CIR_ATTR_FLOATS,
    CIR_ATTR_ENUM,       /* one of `names`, given as a string; read as its index */
    CIR_ATTR_DTYPE       /* an element type, given by name ("float32") or public number */
} cir_attr_type;

/* One entry of an op's attribute table; tables end with a NULL name. */
typedef struct cir_attr_spec {
    const char *name;
    cir_attr_type type;
    int64_t def_i;               /* INT, ENUM (index), DTYPE default */
    float def_f;                 /* FLOAT default */
    const char *const *names;    /* ENUM: the allowed values, NULL-terminated */
    bool required;
} cir_attr_spec;

#define CIR_ATTR_END {NULL, 0, 0, 0, NULL, false}

/* Accessors for op files and passes. `name` must be in the op's table (an internal error
 * otherwise): an attribute not set on the node reads as the table's default. */
int64_t cir_attr_int(const cir_node *n, const char *name);    /* INT, ENUM, DTYPE */
float cir_attr_float(const cir_node *n, const char *name);
/* INTS/FLOATS: the count (-1 when not set) and the elements. */
int cir_attr_ints(const cir_node *n, const char *name, const int64_t **out);
int cir_attr_floats(const cir_node *n, const char *name, const float **out);
bool cir_attr_has(const cir_node *n, const char *name);
/* ENUM: the value's name. */
const char *cir_attr_enum_name(const cir_node *n, const char *name);

/* Sets one attribute from its public form (cuvil.h), checking name, type, enum value and
 * repeats against the op's table; errors name the node and the attribute. */
cuvil_status cir_node_set_attr(cir_graph *g, cir_node *n, const cuvil_attr *a);
/* Makes n a node of op `kind`: the attributes set whose name and type the new op's table has
 * move to its entries, the others are dropped (the caller checked them). */
void cir_node_rekind(cir_node *n, cir_op_kind kind);
/* Checks that every required attribute is set (after all cir_node_set_attr calls). */
cuvil_status cir_node_check_attrs(cir_graph *g, cir_node *n);
/* Appends " name=value" for every attribute set, for the IR printer (enum names, dtype
 * names; lists as [1,2,3]). */
void cir_attrs_print(const cir_node *n, cuvil_sb *out);

/* ===== Ops ================================================================================ */
typedef struct cir_opdef {
    const char *name;            /* "conv": CIR's name, in --emit ir and the builder API */
    unsigned flags;              /* CIR_OPF_* */
    int min_in, max_in;          /* input count (max -1: unbounded); omitted optionals count */
    int min_out, max_out;
    const cir_attr_spec *attrs;  /* NULL: none */
    /* Checks attributes and inputs, sets every output's dtype and shape. May read constant
     * inputs (a reshape's shape). Errors name the node and the value. */
    cuvil_status (*infer)(cir_graph *g, cir_node *n);
    /* Computes the outputs when every input is constant (outputs already have shapes):
     * cir_value_make_const() then fill. NULL: the op never folds. */
    cuvil_status (*fold)(cir_graph *g, cir_node *n);
    /* For CIR_OPF_IS_ACT: the activation this node applies (after infer); false when it
     * cannot be one (a clip bound computed at run time). */
    bool (*as_act)(cir_graph *g, const cir_node *n, cir_act *out);
    /* For CIR_OPF_IS_ACT: the run-time kernel's activation (cuvil_act). */
    int rt_act;
} cir_opdef;

const cir_opdef *cir_op_def(cir_op_kind k);
/* By CIR name ("conv"); CIR_OP_NONE if none. */
cir_op_kind cir_op_by_name(const char *name);
/* The run-time kernel's activation parameters for a fused activation. */
cuvil_act_params cir_act_params(const cir_act *a);
/* Node n's: its epilogue's activation, which its kernel applies last (cir_node_act). */
cuvil_act_params cir_node_act_params(const cir_node *n);
/* Whether codegen emits a kernel call for the op's nodes: not for ALIAS ops (codegen shares or
 * copies their bytes itself) nor for FOLD_ONLY ones. Exactly these ops have an entry in
 * codegen's emitter table, src/codegen/emit/emit.inc (checked by tests/unit/test_ir.c). */
static inline bool cir_op_has_emitter(const cir_opdef *d) { return !(d->flags & (CIR_OPF_ALIAS | CIR_OPF_FOLD_ONLY)); }
/* Whether a node of the op folds whenever its inputs are constant, whatever the budget says:
 * FOLD_ONLY and SHAPE_DATA ops (the next node's inference may need the result). */
static inline bool cir_op_always_folds(const cir_opdef *d) { return d->flags & (CIR_OPF_FOLD_ONLY | CIR_OPF_SHAPE_DATA); }

/* ===== Shared helpers for op files ======================================================= */
/* Requires n_in in [lo, hi] (hi -1: unbounded) and n_out in [olo, ohi]. */
cuvil_status op_check_arity(cir_graph *g, cir_node *n, int lo, int hi, int olo, int ohi);
/* Requires input i present with a known float32 type. */
cuvil_status op_need_f32(cir_graph *g, cir_node *n, int i);
/* Requires input i present, constant, integer-typed; reads it into out (at most max). */
cuvil_status op_const_ints(cir_graph *g, cir_node *n, int i, const char *what, int64_t *out,
                           int max, int *count);
/* The same for an input known as expressions of the symbols (cir_value.sval) or constant. */
cuvil_status op_sval_ints(cir_graph *g, cir_node *n, int i, const char *what, const cir_dim **out, int max, int *count);
/* Dim d of node n's output `out` as the k-th size n finds when the model runs (its kernel
 * writes it, and fails rather than write more): in 0..derived (a bound the op implies, -1
 * for none; when soft, one that holds only for most inputs, used when nothing else bounds
 * the dim), narrowed by the graph output's declared dim and by a --dim naming the output; an
 * error that says which --dim to give when nothing bounds it. */
cuvil_status op_found_dim(cir_graph *g, cir_node *n, int out, int d, int k, int64_t derived, bool soft,
                          const cir_dim **dx);
/* op_sval_ints, and for a tensor computed at run time (or an input of the model) its elements
 * as the symbols of their values, read just before n runs (cir_rt_load), each in [lo, hi]:
 * the values n's op can take. */
cuvil_status op_size_ints(cir_graph *g, cir_node *n, int i, const char *what, const cir_dim **out, int max, int *count,
                          int64_t lo, int64_t hi);

/* A loop_begin or loop node's counts (op_loop.c): n states, s scanned inputs, k scan outputs,
 * p = 2 + n + s (the loop_begin's inputs, and its outputs: the body's parameters). The loop
 * node's inputs are the loop_begin's p inputs, its p outputs, then the body's results from
 * 2p: condition, n states, k scan elements. */
typedef struct op_loop {
    int n, s, k, p;
    bool scan, batch;   /* a Scan; opset 8's batch dim (of 1) around everything */
} op_loop;
/* False when n's inputs and outputs do not match its counts. */
bool op_loop_at(const cir_node *n, op_loop *l);
/* Whether scanned input i (out: scan output i) runs backwards; its axis against rank. */
bool op_loop_reverse(const cir_node *n, bool out, int i);
/* Whether loop n's scan output k collects into a sequence (its attribute seq_out). */
bool op_loop_seq_out(const cir_node *n, int k);
/* Loop ln's states that the body only appends to, once per iteration (SequenceInsert without
 * a position, its result read by nothing else), become scan outputs collecting into
 * sequences, joined after the loop to the state's start (seq_join) unless that is
 * SequenceEmpty's: the same sequence, without a count that grows from one iteration to the
 * next. The frontend calls it after loading a Loop (the last node added). */
cuvil_status op_loop_fold_appends(cir_graph *g, cir_node *ln);
cuvil_status op_loop_axis(cir_graph *g, cir_node *n, bool out, int i, int rank, int *axis);
/* The index of loop node n's loop_begin (the nearest before it with its body), or -1. */
int op_loop_begin(const cir_graph *g, const cir_node *n);
/* Normalises axis (negative counts from the end) against rank, or errors naming `what`. */
cuvil_status op_axis(cir_graph *g, cir_node *n, int64_t axis, int rank, const char *what, int *out);
/* numpy broadcast of a and b shapes into out; errors name both shapes. */
cuvil_status op_broadcast(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b,
                          int *ndim, int64_t *dims);
/* The same for dims as expressions (every graph): dims that may differ (symbols) must be equal,
 * a guard the model checks when it runs (cir_require_eq). */
cuvil_status op_broadcast_x(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b, int *ndim,
                            const cir_dim **dx);
/* Element strides (0 on broadcast dims) of v viewed in the rank-ndim output space `dims`. */
void op_bcast_strides(const cir_value *v, int ndim, const int64_t *dims, int64_t *strides);

/* The broadcasting parameters of y = a OP b (act none). */
void op_bin_params(const cir_value *a, const cir_value *b, const cir_value *y, int op, cuvil_binary_params *p);
/* Requires input i to have an element type the typed kernels take: any but bool unless
 * bool_ok, not UNDEF. */
cuvil_status op_need_typed(cir_graph *g, cir_node *n, int i, bool bool_ok);

/* Node n (inferred) reads integers known as expressions of the symbols (cir_value.sval): its
 * output gets its values as expressions where the op's semantics allow (op_sval.c), or becomes
 * a constant (n then dead). Fails only when out of memory. */
cuvil_status op_sval_eval(cir_graph *g, cir_node *n);

/* The sizes and strides of cuvil_gemm_params as expressions of the dims (any graph), for a
 * node with symbolic dims (the emitter writes them as C of D[]); the other fields are
 * op_gemm_params's. */
typedef struct op_gemm_xparams {
    const cir_dim *M, *N, *K, *lda, *ldb, *ldc, *batch, *a_bstride, *b_bstride, *c_bstride, *bias_rs, *bias_cs;
} op_gemm_xparams;
/* Fills p and the output's dims (guards for K and broadcast batch dims); a MatMul batch
 * broadcast that is neither contiguous nor shared is refused. */
cuvil_status op_gemm_x(cir_graph *g, cir_node *n, op_gemm_xparams *p, int *ndim, const cir_dim **dx);

/* gather_nd's / scatter_nd's counts and data dims as expressions (for symbolic dims). */
typedef struct op_nd_xparams {
    const cir_dim *n_batch, *n_idx, *slice_elems, *data_dims[CIR_MAX_DIMS];
} op_nd_xparams;
/* Fills p, *k (the coordinates per index) and gather's output dims (scatter's updates dims);
 * guards for batch dims and the updates' dims. */
cuvil_status op_nd_x(cir_graph *g, cir_node *n, op_nd_xparams *p, int64_t *k, int *ndim, const cir_dim **dx);

/* One spatial dim of a sliding window (conv, pool) with the input size in an expression: the
 * output size and the padding before and after, by auto_pad ap (CIR_PAD_*; explicit pads pb,
 * pe), kernel extent ek and stride s. Refused when some input size in the range leaves no
 * output (the window larger than the padded input). */
typedef struct op_window {
    const cir_dim *out, *pb, *pe;
} op_window;
cuvil_status op_window_x(cir_graph *g, cir_node *n, int i, const cir_dim *in, int64_t ek, int64_t s, int ap, int64_t pb,
                         int64_t pe, bool ceil_mode, op_window *w);

/* The fields of cuvil_conv2d_params / cuvil_pool2d_params that depend on the input's dims, as
 * expressions (for symbolic dims): a 1-D op's H side is 1 and 0. */
typedef struct op_geo_x {
    const cir_dim *N, *H, *W, *OH, *OW, *KH, *KW, *pad_t, *pad_l, *pad_b, *pad_r;
} op_geo_x;
cuvil_status op_conv_x(cir_graph *g, cir_node *n, op_geo_x *x);
/* op_conv_x as the kernels take it (op_conv_params' view: a conv one pixel wide is a 1-D one
 * along H, H and W swapped). */
cuvil_status op_conv_kx(cir_graph *g, cir_node *n, op_geo_x *x);
/* Whether conv n's kernel view swaps H and W (a 2-D conv one pixel wide: op_conv_params). */
bool op_conv_swaps_hw(cir_graph *g, cir_node *n);
cuvil_status op_pool_x(cir_graph *g, cir_node *n, op_geo_x *x);
cuvil_status op_convt_x(cir_graph *g, cir_node *n, op_geo_x *x);

/* resize's output dims as expressions and the scales the kernel takes (for symbolic dims). */
cuvil_status op_resize_x(cir_graph *g, cir_node *n, const cuvil_resize_params *p, const cir_dim **dx, float *scales);

/* ===== Parameters shared with codegen's emitters ========================================= */
/* Each computes, from a node after infer, the parameters of the op's run-time kernel: the op
 * file's fold runs the kernel with them, its emitter (src/codegen/emit/emit_<family>.c) writes
 * them into the generated C. One computation, so that a folded node and the compiled model
 * cannot differ. Errors name the node. */
cuvil_status op_arg_params(cir_graph *g, cir_node *n, cuvil_arg_params *p, int *axis);
/* batch_norm: scale = gamma / sqrt(var + eps) and shift = beta - mean * scale (C floats each),
 * and the affine kernel's shape and fused activation. */
void op_batch_norm_affine(cir_graph *g, cir_node *n, float *scale, float *shift);
void op_batch_norm_params(cir_graph *g, cir_node *n, cuvil_channel_affine_params *p);
/* The binary ops (add ... prelu) with their broadcast and fused activation. */
void op_binary_params(cir_graph *g, cir_node *n, cuvil_binary_params *p);
/* What an integer division (CUVIL_BIN_DIV) or modulo (CUVIL_BIN_MOD, _FMOD) by zero of element
 * type t is called in messages ("integer division by zero"), which the kernel reports
 * (cuvil_binary_t returns 1); NULL for the other ops and types. */
const char *op_binary_zero_msg(cir_dtype t, int op);
/* conv (transpose false) or conv_transpose (true, whose params struct has the same fields); a
 * 1-D convolution is a 2-D one with H = KH = OH = 1. No prepacking (the lowering pass adds it). */
cuvil_status op_conv_params(cir_graph *g, cir_node *n, bool transpose, cuvil_conv2d_params *p);
/* The view [outer, axis_len, nb_inner] of gather's data and the axis. */
cuvil_status op_gather_params(cir_graph *g, cir_node *n, int *axis, cuvil_gather_params *p);
/* gather's constant indices made non-negative, in a malloc'd array the caller frees; NULL after
 * an error (an index out of range, or out of memory). */
int64_t *op_gather_indices(cir_graph *g, cir_node *n, const cuvil_gather_params *p);
/* gemm or matmul; for an irregular MatMul broadcast, *offs gets a malloc'd table of A and B
 * element offsets per output matrix (caller frees) and *n_irregular its length. */
cuvil_status op_gemm_params(cir_graph *g, cir_node *n, cuvil_gemm_params *p, int64_t *n_irregular, int64_t **offs);
/* gather_elements, scatter_elements. */
cuvil_status op_elements_params(cir_graph *g, cir_node *n, cuvil_elements_params *p);
/* compress's input around its axis (outer, axis_len, inner elements; no axis: 1, numel, 1). */
cuvil_status op_compress_layout(cir_graph *g, cir_node *n, const cir_dim **outer, const cir_dim **axis_len,
                                const cir_dim **inner);
/* The same for symbolic dims: the checks on expressions (guards where not proved), every field
 * but dims and data_dims (the indices' and the data's dims, written by the emitter). */
cuvil_status op_elements_x(cir_graph *g, cir_node *n, cuvil_elements_params *p);
/* gather_nd, scatter_nd; also the shape of gather's output / scatter's updates (ndim, dims). */
cuvil_status op_nd_params(cir_graph *g, cir_node *n, cuvil_nd_params *p, int *ndim, int64_t *dims);
/* An rnn node's sizes (op_rnn.c). */
typedef struct op_rnn {
    int gates, dirs, layout;
    bool q8;   /* attribute quant: 8-bit w and r with their scales and zero points (inputs 8..11) */
    int64_t input, hidden;
    const cir_dim *seq, *batch;
    cuvil_rnn_act act[2][3];
} op_rnn;
cuvil_status op_rnn_sizes(cir_graph *g, cir_node *n, op_rnn *a);
cuvil_status op_grid_sample_params(cir_graph *g, cir_node *n, cuvil_grid_sample_params *p);
cuvil_status op_quant_params(cir_graph *g, cir_node *n, cuvil_quant_params *p);
/* An integer matmul's sizes (op_quant.c): batch items, a's and b's batch strides (0: shared). */
typedef struct op_imatmul {
    int64_t batch, M, N, K, a_bs, b_bs;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    bool sym;   /* a's dims but the last are symbolic (the sizes above their upper bounds) */
} op_imatmul;
/* The output's shape of an integer matmul (a at input ia), of type t. */
cuvil_status op_imatmul_shape(cir_graph *g, cir_node *n, const op_imatmul *m, int ia, cir_dtype t);
/* qlinear_conv / qlinear_matmul: min/max need y's scale (input iys) and zero point (iyz) constant. */
cuvil_status op_qclamp_check(cir_graph *g, cir_node *n, int iys, int iyz);
cuvil_status op_imatmul_sizes(cir_graph *g, cir_node *n, int ia, int ib, op_imatmul *m);
/* Whether a pad node's pads or axes are read when the model runs (op_pad.c). */
bool op_pad_rt(cir_graph *g, cir_node *n);
cuvil_status op_layer_norm_params(cir_graph *g, cir_node *n, cuvil_layer_norm_params *p);
/* An sdpa node's sizes (op_sdpa.c): expressions of the symbols, the head counts and sizes fixed. */
typedef struct op_sdpa {
    int rank;                                            /* of q, k, v and y: 3 or 4 */
    int64_t q_heads, kv_heads, dim, v_dim;
    const cir_dim *batch, *q_len, *s_len, *p_len, *kv_len;   /* s_len: this step's keys; kv_len = p_len + s_len */
} op_sdpa;
cuvil_status op_sdpa_shape(cir_graph *g, cir_node *n, op_sdpa *a);
cuvil_status op_instance_norm_params(cir_graph *g, cir_node *n, cuvil_instance_norm_params *p);
cuvil_status op_pad_params(cir_graph *g, cir_node *n, cuvil_pad_params *p);
/* The pooling ops; a 1-D pool is a 2-D one with H = 1, a global one a window over all of it. */
cuvil_status op_pool_params(cir_graph *g, cir_node *n, cuvil_pool2d_params *p);
/* einsum's loop (op_einsum.c): the arguments of cuvil_einsum_t, and the output's shape */
typedef struct op_einsum {
    int n_in, n_lab, n_out_lab, out_rank;
    cir_dtype dtype;
    int64_t sizes[CUVIL_EINSUM_MAX_LAB], strides[CUVIL_EINSUM_MAX_IN * CUVIL_EINSUM_MAX_LAB], out_dims[CIR_MAX_DIMS];
} op_einsum;
cuvil_status op_einsum_plan(cir_graph *g, cir_node *n, op_einsum *p);
/* A float32 Einsum of two operands as one cuvil_f32_gemm (op_einsum.c): its params (batch:
 * one strided run), the operands swapped (swap: input 1 is the GEMM's A, C computed transposed
 * as stored), or n_items > 0 calls with p.batch 1 at the offsets op_einsum_gemm_offsets writes
 * (A's, B's and C's, 3 per item). false: not a contraction the GEMM reads in place. */
typedef struct op_einsum_gemm_plan {
    cuvil_gemm_params p;
    bool swap;
    int64_t n_items;
    int ia, ib, n_batch_lab, batch_lab[CUVIL_EINSUM_MAX_LAB];
} op_einsum_gemm_plan;
bool op_einsum_gemm(const op_einsum *p, op_einsum_gemm_plan *q);
void op_einsum_gemm_offsets(const op_einsum *p, const op_einsum_gemm_plan *q, int64_t *offs);
/* tfidf's n-gram table (op_misc.c), in g's arena: n-gram i is tokens[start[i] .. + len[i]),
 * counted at output column out[i] with weight weights[i] (NULL: 1) */
typedef struct op_tfidf {
    int mode;
    int64_t min_n, max_n, max_skip, out_size, n_grams;
    const int64_t *tokens;
    int64_t *start, *len, *out;
    float *weights;
} op_tfidf;
cuvil_status op_tfidf_table(cir_graph *g, cir_node *n, op_tfidf *t);
cuvil_status op_dft_params(cir_graph *g, cir_node *n, cuvil_dft_params *p, int *axis);
cuvil_status op_declared_output(cir_graph *g, cir_node *n, cir_dtype t, int rank, const char *what);
bool op_dft_runtime(cir_graph *g, cir_node *n, int from, int to);
cuvil_status op_stft_params(cir_graph *g, cir_node *n, cuvil_stft_params *p);
/* rotary's sizes (op_misc.c): x as [B, H, S, D] (x4d) or [B, S, H, D] */
typedef struct op_rotary {
    int x4d;
    const cir_dim *B, *S;
    int64_t H, D, rot;
} op_rotary;
cuvil_status op_rotary_sizes(cir_graph *g, cir_node *n, op_rotary *r);
cuvil_status op_ccp_axes(cir_graph *g, cir_node *n, int64_t *axes, int *na);
cuvil_status op_col2im_attrs(cir_graph *g, cir_node *n, int nsp, int64_t *d, int64_t *st, int64_t *pads);
/* causal_conv and linear_attention's sizes (op_recur.c) */
typedef struct op_causal_conv {
    const cir_dim *B, *L;
    int64_t C, K;
    int act;
} op_causal_conv;
cuvil_status op_causal_conv_sizes(cir_graph *g, cir_node *n, op_causal_conv *c);
typedef struct op_linear_attention {
    const cir_dim *B, *T;
    int64_t hq, hk, dk, dv, decay_w, beta_w;
    int gated, delta;
    float scale;
} op_linear_attention;
cuvil_status op_linear_attention_sizes(cir_graph *g, cir_node *n, op_linear_attention *a);
cuvil_status op_pool_nd_params(cir_graph *g, cir_node *n, cuvil_pool_nd_params *p);
cuvil_status op_conv_nd_params(cir_graph *g, cir_node *n, cuvil_conv_nd_params *p);
/* The reductions (mask bit d: axis d is reduced), and the output shape (ndim, dims). */
cuvil_status op_reduce_params(cir_graph *g, cir_node *n, cuvil_reduce_params *p, int *ndim, int64_t *dims);
/* Whether a squeeze or unsqueeze node's axes are read when the model runs (op_reshape.c). */
bool op_squeeze_rt_axes(cir_graph *g, cir_node *n);
/* Whether a reduce node's axes are read when the model runs (op_reduce.c). */
bool op_reduce_rt_axes(cir_graph *g, cir_node *n);
/* CUVIL_REDUCE_* of a reduce node. */
int op_reduce_kind(const cir_node *n);
cuvil_status op_resize_params(cir_graph *g, cir_node *n, cuvil_resize_params *p);
/* op_resize_params, where scales or sizes may be read when the model runs (*rt): the axes they
 * apply to into axes[0..*nax), p's dims and scales along them then the run's (cuvil_resize_rt). */
cuvil_status op_resize_rt(cir_graph *g, cir_node *n, cuvil_resize_params *p, bool *rt, int *axes, int *nax);
cuvil_status op_slice_params(cir_graph *g, cir_node *n, cuvil_slice_params *p);
/* The same with the dims as expressions (any graph): per axis of the input, the first index read
 * and the count (both expressions) and the step; starts and ends may be known as expressions
 * (sval). Each bound is clamped by ONNX's rules; one whose sign is not known is refused. */
cuvil_status op_slice_x(cir_graph *g, cir_node *n, const cir_dim **start, const cir_dim **cnt, int64_t *steps);
cuvil_status op_softmax_params(cir_graph *g, cir_node *n, cuvil_softmax_params *p);
/* split: outer = product of dims before the axis, chunk[i] = bytes of output i per outer row
 * (n->n_out <= OP_SPLIT_MAX of them). */
#define OP_SPLIT_MAX 64   /* the loader's limit on a node's outputs */
/* The chunk sizes along the split axis as expressions (any graph; guards where a symbolic axis
 * must divide or add up). */
cuvil_status op_split_sizes_x(cir_graph *g, cir_node *n, int *axis, const cir_dim **sizes);
cuvil_status op_split_params(cir_graph *g, cir_node *n, int64_t *outer, int64_t *chunk);
cuvil_status op_transpose_params(cir_graph *g, cir_node *n, cuvil_transpose_params *p);
/* depth_to_space / space_to_depth with symbolic dims: the 6-D view's dims v6 and perm of
 * op_transpose_params, as expressions, and (y non-NULL) the output's 4 dims. */
cuvil_status op_block_x(cir_graph *g, cir_node *n, const cir_dim **v6, int *perm, const cir_dim **y);
cuvil_status op_trilu_params(cir_graph *g, cir_node *n, cuvil_trilu_params *p);
/* topk: the layout, k and the axis. */
/* unique: the checks, the axis (-1: none), the input as [outer, len, inner] around it. */
cuvil_status op_unique_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **len,
                              const cir_dim **inner);
/* onehot: the checks, the new axis, the indices' layout around it. */
cuvil_status op_onehot_layout(cir_graph *g, cir_node *n, int *axis, const cir_dim **outer, const cir_dim **inner);
/* non_max_suppression: the checks, and the batches, classes and boxes as expressions. */
cuvil_status op_nms_layout(cir_graph *g, cir_node *n, const cir_dim **b, const cir_dim **c, const cir_dim **k);
cuvil_status op_topk_params(cir_graph *g, cir_node *n, cuvil_topk_params *p, int *axis, const cir_dim **kx);
/* Whether op k takes a sequence as an input (op_seq.c; Identity and If pass one on); no other
 * does. */
static inline bool cir_op_reads_seq(cir_op_kind k) {
    return k == CIR_OP_SEQ_INSERT || k == CIR_OP_SEQ_ERASE || k == CIR_OP_SEQ_AT || k == CIR_OP_SEQ_LENGTH ||
           k == CIR_OP_CONCAT_FROM_SEQ || k == CIR_OP_IDENTITY || k == CIR_OP_IF || k == CIR_OP_SEQ_MAP_ARG ||
           k == CIR_OP_SEQ_JOIN || k == CIR_OP_OPT_ELEM || k == CIR_OP_PRESENT;
}
/* y: what either sequence is, as If's output (b NULL: a). */
cuvil_status op_seq_either(cir_graph *g, cir_node *n, cir_value *y, const cir_value *a, const cir_value *b);
/* split_to_seq: the axis, the count of pieces and each one's length (-1: read when the model
 * runs; lens has room for CIR_SEQ_MAX), and whether a piece of 1 keeps the axis. */
cuvil_status op_split_to_seq_layout(cir_graph *g, cir_node *n, int *axis, int64_t *count, int64_t *lens, int *keep);
/* concat_from_seq: the checks and the axis (of the output when stacking). */
cuvil_status op_concat_from_seq_axis(cir_graph *g, cir_node *n, int *axis);
/* clip runs on cuvil_clip_t (bounds computed at run time, or integer input), not as an activation. */
bool op_clip_typed(cir_graph *g, const cir_node *n);
/* is_nan / is_inf: the CUVIL_CLASS_* bits the node detects. */
int op_float_class_mask(const cir_node *n);
cuvil_status op_cumsum_params(cir_graph *g, cir_node *n, cuvil_cumsum_params *p);
/* concat (after infer): returns outer = product of dims before the axis; chunk[i] = bytes of
 * input i per outer row. */
int64_t op_concat_layout(cir_graph *g, cir_node *n, int64_t *chunk);

/* attention nodes (made by pass_fuse_attention.c, never by a model): the kernel's parameters and
 * where each operand starts in its buffer, in elements (inputs q, k, v, [mask], then up to two
 * scalars that multiply p.scale when the model runs, or divide it where scale_div; output y).
 * Their n->low.params. */
typedef struct cir_attention_kp {
    cuvil_attention_params p;
    int64_t q_off, k_off, v_off, m_off, y_off;
    bool scale_div[2];
    /* With symbolic dims: p's sizes and strides and the offsets as dim expressions, indexed by
     * CIR_ATT_* (p and the offsets then hold their upper bounds); NULL when they are numbers. */
    const cir_dim *const *xp;
} cir_attention_kp;
/* keep in ORDER with the printing in emit_softmax.c */
enum {
    CIR_ATT_BATCH, CIR_ATT_HEADS, CIR_ATT_Q_LEN, CIR_ATT_KV_LEN, CIR_ATT_DIM, CIR_ATT_V_DIM,
    CIR_ATT_Q_BS, CIR_ATT_Q_HS, CIR_ATT_Q_RS, CIR_ATT_K_BS, CIR_ATT_K_HS, CIR_ATT_K_RS,
    CIR_ATT_V_BS, CIR_ATT_V_HS, CIR_ATT_V_RS, CIR_ATT_Y_BS, CIR_ATT_Y_HS, CIR_ATT_Y_RS,
    CIR_ATT_M_BS, CIR_ATT_M_HS, CIR_ATT_M_RS, CIR_ATT_M_CS,
    CIR_ATT_Q_OFF, CIR_ATT_K_OFF, CIR_ATT_V_OFF, CIR_ATT_M_OFF, CIR_ATT_Y_OFF,
    CIR_ATT_X
};

/* Shared enum value lists. */
extern const char *const cir_auto_pad_names[];   /* "explicit", "same_upper", "same_lower", "valid" */
enum { CIR_PAD_EXPLICIT = 0, CIR_PAD_SAME_UPPER, CIR_PAD_SAME_LOWER, CIR_PAD_VALID };

#endif
