/*
 * ops_int.h -- what one ONNX op (family) provides, in the three parts of onnx2c's nodes:
 * check attributes and infer the output shapes, fold (evaluate at compile time when every
 * input is constant), and emit C for the generated model. One file per op family,
 * op_<name>.c; the registry is ops.inc. New ops start from op_template.c.txt's shape.
 */
#ifndef CUVIL_OPS_INT_H
#define CUVIL_OPS_INT_H

#include "codegen/codegen_int.h"
#include "ir/cir.h"

enum {
    CIR_OP_ALIAS = 1u << 0,        /* output 0 has input 0's bytes (Reshape, Flatten, ...) */
    CIR_OP_TAKES_ACT = 1u << 1,    /* emit honours n->act: a following activation can fuse */
    CIR_OP_IS_ACT = 1u << 2,       /* an elementwise activation that can fuse into its producer */
    CIR_OP_TAKES_RESIDUAL = 1u << 3 /* emit honours n->residual */
};

typedef struct cir_opdef {
    const char *op;          /* ONNX op type */
    const char *domain;      /* "" for ai.onnx */
    int since;               /* the oldest opset version this implementation accepts */
    unsigned flags;
    /* Checks attributes and inputs, sets every output's dtype and shape. May read constant
     * inputs (a Reshape's shape). Errors name the node and the value. */
    cuvil_status (*infer)(cir_graph *g, cir_node *n);
    /* Computes the outputs when every input is constant (outputs already have shapes):
     * cir_value_make_const() then fill. NULL: the op never folds. */
    cuvil_status (*fold)(cir_graph *g, cir_node *n);
    /* Writes the node's C (see codegen_int.h). NULL for ALIAS ops, which codegen handles. */
    cuvil_status (*emit)(cg_ctx *cg, cir_graph *g, cir_node *n);
    /* For CIR_OP_IS_ACT: the activation this node applies (after infer). */
    bool (*as_act)(cir_graph *g, const cir_node *n, cuvil_act_params *out);
} cir_opdef;

/* The op's implementation, or NULL when Cuvil does not support it. */
const cir_opdef *cir_op_lookup(const char *domain, const char *op);

/* ===== Shared helpers for op files ================================================= */
/* Requires n_in in [lo, hi] (hi -1: unbounded) and n_out in [olo, ohi]. */
cuvil_status op_check_arity(cir_graph *g, cir_node *n, int lo, int hi, int olo, int ohi);
/* Requires input i present with a known float32 type. */
cuvil_status op_need_f32(cir_graph *g, cir_node *n, int i);
/* Requires input i present, constant, integer-typed; reads it into out (at most max). */
cuvil_status op_const_ints(cir_graph *g, cir_node *n, int i, const char *what, int64_t *out,
                           int max, int *count);
/* Normalises axis (negative counts from the end) against rank, or errors naming `what`. */
cuvil_status op_axis(cir_graph *g, cir_node *n, int64_t axis, int rank, const char *what, int *out);
/* numpy broadcast of a and b shapes into out; errors name both shapes. */
cuvil_status op_broadcast(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b,
                          int *ndim, int64_t *dims);
/* Element strides (0 on broadcast dims) of v viewed in the rank-ndim output space `dims`. */
void op_bcast_strides(const cir_value *v, int ndim, const int64_t *dims, int64_t *strides);

#endif
