/*
 * ops.h -- what one CIR op provides, in the parts of onnx2c's nodes: an attribute table, a
 * check of the inputs that infers every output's dtype and shape, a fold (evaluate at compile
 * time when every input is constant), and the C it emits for the generated model. One file per
 * op family, op_<family>.c in this folder; the registry is ops.inc.
 *
 * Ops are CIR's own: their semantics are fixed (no opset versions, no frontend names). A
 * frontend maps its ops onto them (src/frontend/onnx/onnx_ops.c): legacy attribute forms
 * become constant inputs, opset-dependent defaults become explicit attributes.
 *
 * Adding an op: a `const cir_opdef cir_op_<name>` in an op file and a line in ops.inc (plus
 * its kernel in runtime/, and a frontend mapping if a frontend has it).
 */
#ifndef CUVIL_IR_OPS_H
#define CUVIL_IR_OPS_H

#include "codegen/codegen_int.h"
#include "ir/cir.h"
#include "../runtime/kernels/rt_int.h"   /* GEMM blocking: sizes and packing done for the target */

enum {
    CIR_OPF_ALIAS = 1u << 0,        /* output 0 has input 0's bytes (reshape, flatten, ...) */
    CIR_OPF_TAKES_ACT = 1u << 1,    /* emit honours n->act: a following activation can fuse */
    CIR_OPF_IS_ACT = 1u << 2,       /* an elementwise activation that can fuse into its producer */
    CIR_OPF_TAKES_RESIDUAL = 1u << 3 /* emit honours n->residual */
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
    /* Writes the node's C (see codegen_int.h). NULL for ALIAS ops, which codegen handles, and
     * for ops that are only supported when they fold. */
    cuvil_status (*emit)(cg_ctx *cg, cir_graph *g, cir_node *n);
    /* For CIR_OPF_IS_ACT: the activation this node applies (after infer); false when it
     * cannot be one (a clip bound computed at run time). */
    bool (*as_act)(cir_graph *g, const cir_node *n, cir_act *out);
    /* For CIR_OPF_IS_ACT: the run-time kernel's activation (cuvil_act). */
    int rt_act;
    /* The lowering stage: chooses the kernel and algorithm for target t and the fixed shapes,
     * records it in n->algo, and may add constants in the kernel's layout (n->packed). NULL:
     * the op has one kernel and nothing to prepare. */
    cuvil_status (*lower)(cir_graph *g, cir_node *n, const cuvil_target_info *t);
} cir_opdef;

const cir_opdef *cir_op_def(cir_op_kind k);
/* By CIR name ("conv"); CIR_OP_NONE if none. */
cir_op_kind cir_op_by_name(const char *name);
/* The run-time kernel's activation parameters for a fused activation. */
cuvil_act_params cir_act_params(const cir_act *a);

/* ===== Shared helpers for op files ======================================================= */
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

/* The broadcasting parameters of y = a OP b (act none), and their static initialiser in the
 * generated C (returns the parameter's name). */
void op_bin_params(const cir_value *a, const cir_value *b, const cir_value *y, int op, cuvil_binary_params *p);
/* op_names: the names of p->op's enum (op_bin_names, op_cmp_names, op_logic_names). */
const char *op_emit_bin_params(cg_ctx *cg, const cuvil_binary_params *p, const char *const *op_names);

/* The runtime's enum names, for the generated C (indexed by the enum's value). */
extern const char *const op_bin_names[];     /* CUVIL_BIN_* */
extern const char *const op_cmp_names[];     /* CUVIL_CMP_* */
extern const char *const op_logic_names[];   /* CUVIL_LOGIC_* */
/* Requires input i to have an element type the typed kernels take: any but bool unless
 * bool_ok, not UNDEF. */
cuvil_status op_need_typed(cir_graph *g, cir_node *n, int i, bool bool_ok);

/* The GEMM blocking of the target g is compiled for (targets.inc); uk is filled with its tile
 * (no function: for sizes and packing only) and pointed to by the result. */
cuvil_gemm_blocking op_target_blocking(const cir_graph *g, cuvil_gemm_ukernel_desc *uk);

/* Shared enum value lists. */
extern const char *const cir_auto_pad_names[];   /* "explicit", "same_upper", "same_lower", "valid" */
enum { CIR_PAD_EXPLICIT = 0, CIR_PAD_SAME_UPPER, CIR_PAD_SAME_LOWER, CIR_PAD_VALID };

#endif
