/*
 * emit_int.h -- what the emitters share. An emitter writes one node's C through the cg_*
 * calls of codegen_int.h: its kernel's parameters, computed by the op file's op_*_params (the
 * ones its fold uses, so the compiled model and folding cannot differ), as a static
 * initialiser, and the kernel call. One file per op family: emit_<family>.c for
 * src/ir/ops/op_<family>.c (emit_logic.c for the ops of op_fold_only.c that have a kernel);
 * emit.inc maps op kinds to emitters (cg_emitter).
 */
#ifndef CUVIL_CODEGEN_EMIT_INT_H
#define CUVIL_CODEGEN_EMIT_INT_H

#include "codegen/codegen_int.h"
#include "ir/ops/ops.h"
#include "../runtime/kernels/rt_int.h"   /* GEMM blocking: scratch sizes computed for the target */

#define CG_EMIT(kind, fn) cuvil_status fn(cg_ctx *cg, cir_graph *g, cir_node *n);
#include "codegen/emit/emit.inc"
#undef CG_EMIT

/* The static initialiser of binary-kernel parameters in the generated C (returns its name);
 * op_names: the names of p->op's enum (cg_bin_names, cg_cmp_names, cg_logic_names). In a
 * symbolic node, the parameters of values a, b and y computed when the model runs (cg_bind). */
const char *cg_bin_params(cg_ctx *cg, const cuvil_binary_params *p, const char *const *op_names, int a, int b, int y);

/* The geometry fields of a conv's cuvil_conv2d_params as a C initialiser, into buf (emit_conv.c). */
const char *cg_conv_geo_fields(const cuvil_conv2d_params *p, char *buf, size_t len);
/* A symbolic conv: its sizes and padding as C of the run's dims, and the scratch to reserve, the
 * largest size(q) over values of the symbols its dims use (emit_conv.c says which; the node's
 * run also checks its need against it) */
const char *cg_conv_geo_fields_x(cg_ctx *cg, const cuvil_conv2d_params *p, const op_geo_x *x);
typedef size_t (*cg_conv_size_fn)(const cuvil_conv2d_params *q, const void *user);
size_t cg_conv_scratch_bound(cir_graph *g, const cuvil_conv2d_params *p, const op_geo_x *x, cg_conv_size_fn size, const void *user);

/* The runtime's enum names, for the generated C (indexed by the enum's value). */
extern const char *const cg_bin_names[];     /* CUVIL_BIN_* */
extern const char *const cg_cmp_names[];     /* CUVIL_CMP_* */
extern const char *const cg_logic_names[];   /* CUVIL_LOGIC_* */

/* Whether the integer GEMM's constant B is packed pair-split for the target g is compiled for
 * (cuvil_qgemm_pack_b_split): one whose CPUs have AVX2 and may lack VNNI (x86_64-avx2). */
bool cg_target_pair_split(const cir_graph *g);
/* The GEMM blocking of the target g is compiled for (targets.inc); uk is filled with its tile
 * (no function: for sizes and packing only) and pointed to by the result. */
cuvil_gemm_blocking cg_target_blocking(const cir_graph *g, cuvil_gemm_ukernel_desc *uk);

#endif
