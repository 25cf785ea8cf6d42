/*
 * lower_int.h -- what the lowering's steps share (src/lower/). The lowering runs last among the
 * passes (cuvil_pass_lower, lower.c) as registered steps in order: kernel selection with weight
 * packing, per node (conv.c, gemm.c, pack.c), then block fusion (blocks.c) and layouts
 * (layout.c) over the whole graph. Each records its choice in the node's record n->low
 * (cir_lowering): its algo (the runtime's CUVIL_CONV_* algorithm, which the generated code
 * names), packed, kc, params and layout, and its note, the same in words for --emit ir and the
 * generated code's comments.
 */
#ifndef CUVIL_LOWER_INT_H
#define CUVIL_LOWER_INT_H

#include "passes/passes_int.h"
#include "codegen/toolchain_int.h"

/* What every step reads: the target, and the map sizes at which some conv runs as Winograd
 * with tiles as rows (collected before any is lowered). */
#define WINO_T_SIZES 8
typedef struct lower_ctx {
    const cuvil_target_info *t;
    int n_wino_t;
    int64_t wino_t_hw[WINO_T_SIZES][2];
    /* the bytes of the constant weights of the nodes still to lower after this one: room the
     * packed weights keep for them, packed as they are, when a conv would take Winograd's */
    uint64_t *rest;
} lower_ctx;

/* ===== Kernel selection (conv.c, gemm.c) ================================================ */
cuvil_status lower_conv(cir_graph *g, cir_node *n, const lower_ctx *c);
cuvil_status lower_gemm(cir_graph *g, cir_node *n, const lower_ctx *c);
cuvil_status lower_rnn(cir_graph *g, cir_node *n, const lower_ctx *c);
/* Conv n's parameters as its kernel is chosen and its weights packed (with symbolic dims: at
 * a point inside the symbols' ranges). */
cuvil_status lower_conv_params(cir_graph *g, cir_node *n, cuvil_conv2d_params *p);
/* Is n a depthwise conv (one input channel per group, as many groups as channels)? */
bool lower_is_depthwise(cir_graph *g, const cir_node *n);
/* How --emit ir and the generated comments describe a conv's algorithm. */
const char *lower_conv_algo_name(int64_t algo, bool pointwise, bool strided_pw);
/* Whether a conv of parameters p would run as Winograd with tiles as rows; whether p's map is
 * one of c's sizes where one does. */
bool lower_runs_wino_t(const cir_graph *g, const cuvil_conv2d_params *p, const cuvil_target_info *t);
bool lower_on_wino_t_map(const lower_ctx *c, const cuvil_conv2d_params *p);
/* Whether a conv the swapped GEMM took (CUVIL_CONV_GEMM_T), whose input stays channels first,
 * runs the direct convolution on a channels-last copy instead (the layout pass asks, knowing
 * the input's layout). */
bool lower_direct_t_over_swap(const cuvil_conv2d_params *p, const cuvil_target_info *t);
/* Conv n, its algo chosen for a channels-last layout it did not get (n->low.for_layout): its
 * channels-first algorithm and weights (the layout step). */
cuvil_status lower_conv_channels_first(cir_graph *g, cir_node *n, const lower_ctx *c);

/* ===== Weight packing (pack.c) ========================================================== */
/* A float32 constant of nf elements for weights w in a kernel's layout, shared by every node
 * that packs w with the same key; *fill: the caller fills it (a new one). */
cuvil_status lower_packed_const(cir_graph *g, const cir_value *w, size_t nf, const char *key, int *id, bool *fill);
/* Whether nf more packed floats and `keep` bytes after them stay within limits.packed_bytes. */
bool lower_pack_fits(const cir_graph *g, size_t nf, uint64_t keep);
/* Node n leaves its packed weights for another layout (uncounted where no other node reads them). */
void lower_release_pack(cir_graph *g, cir_node *n);
/* The key of lower_packed_const for a conv's weights. */
void lower_conv_pack_key(const cuvil_conv2d_params *p, char *key, size_t n);

/* ===== Steps over the whole graph ======================================================= */
cuvil_status lower_fuse_blocks(cir_graph *g, const lower_ctx *c);   /* blocks.c */
cuvil_status lower_layouts(cir_graph *g, const lower_ctx *c);       /* layout.c */
cuvil_status lower_store16(cir_graph *g, const cuvil_options *o);   /* store16.c: --activations fp16|bf16 */

#endif
