/* emit.c -- the emitter table (emit.inc) and helpers shared by the emitters. */
#include "codegen/emit/emit_int.h"

#include <string.h>

static const cg_emit_fn emitters[CIR_OP__COUNT] = {
#define CG_EMIT(kind, fn) [CIR_OP_##kind] = fn,
#include "codegen/emit/emit.inc"
#undef CG_EMIT
};

cg_emit_fn cg_emitter(cir_op_kind k) {
    CUVIL_ASSERT(k > CIR_OP_NONE && k < CIR_OP__COUNT);
    return emitters[k];
}

const char *const cg_bin_names[] = {"CUVIL_BIN_ADD", "CUVIL_BIN_SUB", "CUVIL_BIN_MUL", "CUVIL_BIN_DIV",
                                    "CUVIL_BIN_POW", "CUVIL_BIN_MAX", "CUVIL_BIN_MIN", "CUVIL_BIN_PRELU",
                                    "CUVIL_BIN_MOD", "CUVIL_BIN_FMOD", "CUVIL_BIN_SHL", "CUVIL_BIN_SHR",
                                    "CUVIL_BIN_BAND", "CUVIL_BIN_BOR", "CUVIL_BIN_BXOR", "CUVIL_BIN_BNOT"};
const char *const cg_cmp_names[] = {"CUVIL_CMP_EQ", "CUVIL_CMP_LT", "CUVIL_CMP_GT", "CUVIL_CMP_LE", "CUVIL_CMP_GE"};
const char *const cg_logic_names[] = {"CUVIL_LOGIC_AND", "CUVIL_LOGIC_OR", "CUVIL_LOGIC_XOR"};
_Static_assert(sizeof cg_bin_names / sizeof cg_bin_names[0] == CUVIL_BIN__COUNT, "CUVIL_BIN_* names");

const char *cg_bin_params(cg_ctx *cg, const cuvil_binary_params *p, const char *const *op_names, int a, int b, int y) {
    char act[128];
    if (cg_node_symbolic(cg_graph(cg), cg_node(cg)) && a >= 0 && y >= 0)   /* b -1: a scalar (rank -1: stride 0) */
        return cg_bind(cg, "cuvil_binary_params", "cuvil_binary_bind", (const int[]){a, b, y}, 3, "{ .op = %s, .act = %s }",
                       op_names[p->op], cg_act(&p->act, act));
    return cg_param(cg, "cuvil_binary_params", "{ .op = %s, .ndim = %d, .dims = %s, .a_strides = %s, .b_strides = %s, .act = %s }",
                    op_names[p->op], p->ndim, cg_i64s(cg, p->dims, p->ndim), cg_i64s(cg, p->a_strides, p->ndim),
                    cg_i64s(cg, p->b_strides, p->ndim), cg_act(&p->act, act));
}

bool cg_target_pair_split(const cir_graph *g) {
    const cuvil_target_info *t = cuvil_target_find(g->target);
    return t && strstr(t->kernels, "avx2") && !strstr(t->kernels, "avx512");
}

cuvil_gemm_blocking cg_target_blocking(const cir_graph *g, cuvil_gemm_ukernel_desc *uk) {
    const cuvil_target_info *t = cuvil_target_find(g->target);
    if (!t) t = cuvil_target_find("generic");
    CUVIL_ASSERT(t);
    memset(uk, 0, sizeof *uk);
    uk->mr = t->mr;
    uk->nr = t->nr;
    uk->name = t->name;
    cuvil_gemm_blocking b = {uk, t->mc, t->kc, t->nc};
    return b;
}
