/* op_cast.c -- cast (x, [like]): to the `to` attribute's type, or to input 1's type when given
 * (ONNX CastLike). Every pair of types, at run time and folded, by the one kernel cuvil_cast
 * (ONNX Runtime's conversions on x86-64). */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

/* The target type: input 1's type when given (ONNX CastLike), else the 'to' attribute. */
static cuvil_status cast_target(cir_graph *g, cir_node *n, cir_dtype *to) {
    cir_value *like = cir_in(g, n, 1);
    if (like) *to = like->dtype;
    else if (!cir_attr_has(n, "to")) return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute to is required");
    else *to = (cir_dtype)cir_attr_int(n, "to");
    if (!cir_dtype_size(*to))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "casting to %s is not supported", cir_dtype_name(*to));
    return CUVIL_OK;
}

static cuvil_status cast_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_dtype to = CIR_UNDEF;
    if ((s = cast_target(g, n, &to))) return s;
    if (!cir_dtype_size(x->dtype))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    if (cir_in(g, n, 1)) {   /* CastLike reads only like's type: now the node's `to`, so a constant x folds */
        cuvil_attr a = {.name = "to", .type = CUVIL_ATTR_STRING, .s = cir_dtype_name(to)};
        if ((s = cir_node_set_attr(g, n, &a))) return s;
        n->in[1] = -1;
        n->n_in = 1;
    }
    cir_set_shape_like(cir_out(g, n, 0), to, x);
    return CUVIL_OK;
}

/* One kernel for both: the compiled model and the compiler convert alike. */
static cuvil_status cast_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_cast(x->dtype, y->dtype, x->data, y->data, cir_numel(x));
    return CUVIL_OK;
}

static const cir_attr_spec cast_attrs[] = {{"to", CIR_ATTR_DTYPE, CIR_UNDEF, 0, NULL, false}, CIR_ATTR_END};

const cir_opdef cir_op_cast = {"cast", CIR_OPF_SYM_DIMS, 1, 2, 1, 1, cast_attrs, cast_infer, cast_fold, NULL, 0};

/* ===== bitcast ============================================================================ */
/* bitcast (x; to): x's bytes as type `to` of the same width (ONNX BitCast), the shape kept. */
static cuvil_status bitcast_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    cir_dtype to = CIR_UNDEF;
    if ((s = cast_target(g, n, &to))) return s;
    if (!cir_dtype_size(x->dtype) || cir_dtype_size(x->dtype) != cir_dtype_size(to))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' is %s; BitCast to %s needs an element type of its width",
                            x->name, cir_dtype_name(x->dtype), cir_dtype_name(to));
    cir_set_shape_like(cir_out(g, n, 0), to, x);
    return CUVIL_OK;
}

static cuvil_status bitcast_fold(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    memcpy(y->data, x->data, (size_t)cir_numel(x) * cir_dtype_size(x->dtype));
    return CUVIL_OK;
}

const cir_opdef cir_op_bitcast = {"bitcast", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, cast_attrs, bitcast_infer, bitcast_fold, NULL, 0};
