/* op_if.c -- if (cond, then outputs..., else outputs...): ONNX's If. Its branches are regions of
 * the graph (cir_node.then_region, else_region) whose nodes come before it and run only when
 * cond (one bool) picks them (codegen.c); the node itself copies the picked branch's values into
 * its outputs. An output whose dims differ between the branches takes sizes the run finds
 * (op_found_dim: at most the larger branch's). A constant cond leaves the other branch out
 * (its inputs here become -1, and shape inference skips its nodes); so does a branch that cannot
 * run at the sizes compiled for (fail_branch: the run fails if it is picked). */
#include "ir/ops/ops.h"

static cuvil_status if_infer(cir_graph *g, cir_node *n) {
    int k = n->n_out;
    if (n->n_in != 1 + 2 * k || !n->then_region || !n->else_region)
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "an if without its branches' outputs");
    cir_value *c = cir_in(g, n, 0);
    if (!c || c->dtype != CIR_BOOL || !cir_value_fixed(c) || cir_numel(c) != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "its condition '%s' must be one bool", c ? c->name : "?");
    if (cir_is_const(c)) {   /* one branch: the other's values are not needed */
        bool pick = ((const uint8_t *)c->data)[0] != 0;
        if (n->fail_branch == (pick ? 1 : 2))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the branch its condition takes cannot run: %s", n->fail_msg);
        for (int i = 0; i < k; i++) n->in[1 + (pick ? k : 0) + i] = -1;
    } else if (n->fail_branch) {   /* a branch that cannot run at these sizes (shape inference): the other's */
        for (int i = 0; i < k; i++) n->in[1 + (n->fail_branch == 2 ? k : 0) + i] = -1;
    }
    for (int i = 0; i < k; i++) {
        cir_value *t = cir_in(g, n, 1 + i), *e = cir_in(g, n, 1 + k + i), *y = cir_out(g, n, i);
        if (!y) continue;
        const cir_value *one = t ? t : e;
        if (!one) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "output %d has no branch value", i);
        if (one->seq_n >= 0 || (t && e && e->seq_n >= 0)) {   /* a sequence: the bound of both, checked as copied */
            cuvil_status s = op_seq_either(g, n, y, one, t && e ? e : NULL);
            if (s) return s;
            continue;
        }
        if (t && e && (t->dtype != e->dtype || t->ndim != e->ndim))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output %d is %s of rank %d in the then branch ('%s') and %s of "
                                "rank %d in the else branch ('%s'); Cuvil needs one type and rank", i,
                                cir_dtype_name(t->dtype), t->ndim, t->name, cir_dtype_name(e->dtype), e->ndim, e->name);
        const cir_dim *dx[CIR_MAX_DIMS];
        for (int d = 0; d < one->ndim; d++) {
            const cir_dim *a = cir_dimx(g, one, d), *b = t && e ? cir_dimx(g, e, d) : a;
            if (a == b) {
                dx[d] = a;
                continue;
            }
            cuvil_status s = op_found_dim(g, n, i, d, i * CIR_MAX_DIMS + d, a->hi > b->hi ? a->hi : b->hi, false, &dx[d]);
            if (s) return s;
        }
        cir_set_shape_x(y, one->dtype, one->ndim, dx);
    }
    return CUVIL_OK;
}

const cir_opdef cir_op_if = {"if", CIR_OPF_SYM_DIMS, 1, -1, 1, 1 << 20, NULL, if_infer, NULL, NULL, 0};
