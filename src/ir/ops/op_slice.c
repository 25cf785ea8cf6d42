/* op_slice.c -- slice (x, starts, ends, [axes], [steps]; constant starts..steps; any element
 * type). */
#include "ir/ops/ops.h"

#include <string.h>

/* Reads starts/ends/axes/steps and computes the kernel parameters with ONNX's clamping:
 * negative starts/ends count from the end; for step > 0 both clamp to [0, dim], for step < 0
 * start clamps to [0, dim-1] and end to [-1, dim-1]; the output has
 * max(0, ceil((end - start) / step)) elements along the axis. */
cuvil_status op_slice_params(cir_graph *g, cir_node *n, cuvil_slice_params *p) {
    cir_value *x = cir_in(g, n, 0);
    int64_t starts[CIR_MAX_DIMS], ends[CIR_MAX_DIMS], axes[CIR_MAX_DIMS], steps[CIR_MAX_DIMS];
    int ns, ne, na = -1, nst = -1;
    cuvil_status s;
    if ((s = op_const_ints(g, n, 1, "starts", starts, CIR_MAX_DIMS, &ns)) ||
        (s = op_const_ints(g, n, 2, "ends", ends, CIR_MAX_DIMS, &ne)) ||
        (cir_in(g, n, 3) && (s = op_const_ints(g, n, 3, "axes", axes, CIR_MAX_DIMS, &na))) ||
        (cir_in(g, n, 4) && (s = op_const_ints(g, n, 4, "steps", steps, CIR_MAX_DIMS, &nst))))
        return s;
    if (ne != ns) return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values but ends has %d", ns, ne);
    if (na >= 0 && na != ns) return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values but axes has %d", ns, na);
    if (nst >= 0 && nst != ns) return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values but steps has %d", ns, nst);
    if (na < 0 && ns > x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values for input '%s' of rank %d", ns, x->name, x->ndim);

    memset(p, 0, sizeof *p);
    p->ndim = x->ndim;
    p->elem_size = (int64_t)cir_dtype_size(x->dtype);
    for (int d = 0; d < x->ndim; d++) {
        p->in_dims[d] = p->out_dims[d] = x->dims[d];
        p->steps[d] = 1;
    }
    bool seen[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < ns; i++) {
        int ax = i;
        if (na >= 0 && (s = op_axis(g, n, axes[i], x->ndim, "axes", &ax))) return s;
        if (seen[ax]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d is repeated in axes", ax);
        seen[ax] = true;
        int64_t step = nst >= 0 ? steps[i] : 1, dim = x->dims[ax], start = starts[i], end = ends[i];
        if (step == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "steps[%d] is 0", i);
        if (start < 0) start += dim;   /* cannot overflow: dim >= 0 */
        if (end < 0) end += dim;
        int64_t cnt;
        if (step > 0) {
            start = start < 0 ? 0 : start > dim ? dim : start;
            end = end < 0 ? 0 : end > dim ? dim : end;
            /* ceil((end - start) / step) without overflowing for huge steps */
            cnt = end > start ? 1 + (end - start - 1) / step : 0;
        } else {
            start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
            end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
            /* both operands of the division are <= 0: C's truncation is the ceiling */
            cnt = start > end ? 1 + (end - start + 1) / step : 0;
        }
        /* an empty slice reads nothing: start 0, except in a symbolic compile, where a start
         * in [0, dim] keeps following the symbol when the slice is empty at one end of its range */
        if (cnt == 0 && (!g->symbolic || start < 0)) start = 0;
        /* a step longer than the axis selects one element whatever its size: keep it small, so
         * that kernel index arithmetic and the generated C literal stay in range (INT64_MIN) */
        int64_t maxstep = dim > 0 ? dim : 1;
        if (step > maxstep) step = maxstep;
        if (step < -maxstep) step = -maxstep;
        p->starts[ax] = start;
        p->steps[ax] = step;
        p->out_dims[ax] = cnt;
    }
    return CUVIL_OK;
}

static cuvil_status slice_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 5, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (cir_dtype_size(x->dtype) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    cuvil_slice_params p;
    if ((s = op_slice_params(g, n, &p))) return s;
    cir_set_shape(cir_out(g, n, 0), x->dtype, p.ndim, p.out_dims);
    return CUVIL_OK;
}

static cuvil_status slice_fold(cir_graph *g, cir_node *n) {
    cuvil_slice_params p;
    cuvil_status s = op_slice_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_slice(&p, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

const cir_opdef cir_op_slice = {"slice", 0, 3, 5, 1, 1, NULL, slice_infer, slice_fold, NULL, 0};
