/* op_split.c -- split (sizes from the constant input 1, or num_outputs, or equal parts; any
 * element type). */
#include "ir/ops/ops.h"

#include <string.h>

/* The split axis and the size of every chunk along it (n->n_out of them). */
static cuvil_status split_sizes(cir_graph *g, cir_node *n, int *axis, int64_t *sizes) {
    cir_value *x = cir_in(g, n, 0);
    cuvil_status s;
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis))) return s;
    int64_t dim = x->dims[*axis];
    bool num = cir_attr_has(n, "num_outputs");
    int64_t num_outputs = cir_attr_int(n, "num_outputs");
    int cnt = -1;
    if (cir_in(g, n, 1) && (s = op_const_ints(g, n, 1, "split", sizes, OP_SPLIT_MAX, &cnt))) return s;
    if (cnt >= 0 && num)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "both 'split' and num_outputs=%lld are given", (long long)num_outputs);
    if (cnt >= 0) {
        if (cnt != n->n_out)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "split has %d values for %d outputs", cnt, n->n_out);
        int64_t sum = 0;
        for (int i = 0; i < cnt; i++) {
            if (sizes[i] < 0 || sizes[i] > dim)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "split[%d]=%lld is invalid", i, (long long)sizes[i]);
            sum += sizes[i];
        }
        if (sum != dim)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "split sizes add up to %lld but axis %d of '%s' has %lld",
                                (long long)sum, *axis, x->name, (long long)dim);
        return CUVIL_OK;
    }
    if (num) {
        /* opset 18: ceil(dim / num_outputs) each, the last chunk takes what is left */
        if (num_outputs != n->n_out)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "num_outputs=%lld but the node has %d outputs", (long long)num_outputs,
                                n->n_out);
        int64_t chunk = (dim + n->n_out - 1) / n->n_out, last = dim - chunk * (n->n_out - 1);
        if (last < 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "num_outputs=%d cannot split axis %d of size %lld into chunks of %lld",
                                n->n_out, *axis, (long long)dim, (long long)chunk);
        for (int i = 0; i < n->n_out; i++) sizes[i] = i == n->n_out - 1 ? last : chunk;
        return CUVIL_OK;
    }
    if (dim % n->n_out)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "axis %d of '%s' has size %lld, which does not split into %d equal parts",
                            *axis, x->name, (long long)dim, n->n_out);
    for (int i = 0; i < n->n_out; i++) sizes[i] = dim / n->n_out;
    return CUVIL_OK;
}

/* The chunk sizes as expressions: split_sizes's when the axis is fixed; on a symbolic axis,
 * equal parts (a guard that they divide it) or given sizes (a guard that they add up to it). */
cuvil_status op_split_sizes_x(cir_graph *g, cir_node *n, int *axis, const cir_dim **sizes) {
    cir_value *x = cir_in(g, n, 0);
    cuvil_status s;
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", axis))) return s;
    cir_dimtab *t = &g->dt;
    if (!x->dx[*axis]) {
        int64_t sz[OP_SPLIT_MAX];
        if ((s = split_sizes(g, n, axis, sz))) return s;
        for (int i = 0; i < n->n_out; i++) sizes[i] = cir_dim_const(t, sz[i]);
        return CUVIL_OK;
    }
    const cir_dim *dim = x->dx[*axis];
    if (cir_attr_has(n, "num_outputs"))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "num_outputs on axis %d, whose size is symbolic", *axis);
    int cnt = -1;
    int64_t given[OP_SPLIT_MAX];
    if (cir_in(g, n, 1) && (s = op_const_ints(g, n, 1, "split", given, OP_SPLIT_MAX, &cnt))) return s;
    if (cnt >= 0) {
        if (cnt != n->n_out) return cir_node_err(g, n, CUVIL_ERR_MODEL, "split has %d values for %d outputs", cnt, n->n_out);
        int64_t sum = 0;
        for (int i = 0; i < cnt; i++) {
            if (given[i] < 0 || given[i] > dim->hi)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "split[%d]=%lld is invalid", i, (long long)given[i]);
            sizes[i] = cir_dim_const(t, given[i]);
            sum += given[i];
        }
        return cir_require_eq(g, n, cir_dim_const(t, sum), dim, "the split sizes' sum and the axis");
    }
    const cir_dim *part = cir_dim_fdiv(t, dim, cir_dim_const(t, n->n_out));
    if (!part) return cir_dim_err(g, n, "the parts");
    for (int i = 0; i < n->n_out; i++) sizes[i] = part;
    return cir_require_eq(g, n, cir_dim_scale(t, part, n->n_out), dim, "the equal parts and the axis");
}

static cuvil_status split_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, OP_SPLIT_MAX);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *sp = cir_in(g, n, 1);
    for (int i = 0; i < n->n_out; i++)
        if (n->out[i] < 0) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output %d is omitted", i);
    if (cir_dtype_size(x->dtype) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    int axis;
    const cir_dim *sizes[OP_SPLIT_MAX], *dx[CIR_MAX_DIMS];
    if (sp && !cir_is_const(sp) && !sp->sval) {   /* sizes read when the model runs: found (cuvil_split_sizes_rt) */
        if ((sp->dtype != CIR_I64 && sp->dtype != CIR_I32) || sp->ndim != 1 || !cir_value_fixed(sp) ||
            cir_numel(sp) != n->n_out)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input 'split' ('%s') read when the model runs must be a 1-D "
                                "int64 or int32 tensor with a size per output (%d)", sp->name, n->n_out);
        if (cir_attr_has(n, "num_outputs"))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "both 'split' and num_outputs are given");
        if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x->ndim, "axis", &axis))) return s;
        for (int i = 0; i < n->n_out; i++)
            if ((s = op_found_dim(g, n, i, axis, i, x->dims[axis], false, &sizes[i]))) return s;
    } else if ((s = op_split_sizes_x(g, n, &axis, sizes))) {
        return s;
    }
    for (int d = 0; d < x->ndim; d++) dx[d] = cir_dimx(g, x, d);
    for (int i = 0; i < n->n_out; i++) {
        dx[axis] = sizes[i];
        for (int d = 0; d < x->ndim; d++)
            if (!dx[d]) return cir_dim_err(g, n, "the outputs' dims");
        cir_set_shape_x(cir_out(g, n, i), x->dtype, x->ndim, dx);
    }
    return CUVIL_OK;
}

/* The kernel's view: outer = product of dims before the axis; chunk[i] = bytes of output i per
 * outer row. */
cuvil_status op_split_params(cir_graph *g, cir_node *n, int64_t *outer, int64_t *chunk) {
    int axis;
    int64_t sizes[OP_SPLIT_MAX];
    cuvil_status s = split_sizes(g, n, &axis, sizes);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    int64_t inner = (int64_t)cir_dtype_size(x->dtype);
    *outer = 1;
    for (int d = 0; d < axis; d++) *outer *= x->dims[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->dims[d];
    for (int i = 0; i < n->n_out; i++) chunk[i] = sizes[i] * inner;
    return CUVIL_OK;
}

static cuvil_status split_fold(cir_graph *g, cir_node *n) {
    int64_t outer, chunk[OP_SPLIT_MAX];
    void *outs[OP_SPLIT_MAX];
    cuvil_status s = op_split_params(g, n, &outer, chunk);
    if (s) return s;
    for (int i = 0; i < n->n_out; i++)
        if (!(outs[i] = cir_value_make_const(g, cir_out(g, n, i)))) return g->ctx->status;
    cuvil_split(outer, n->n_out, chunk, cir_in(g, n, 0)->data, outs);
    return CUVIL_OK;
}

static const cir_attr_spec split_attrs[] = {
    {"axis", CIR_ATTR_INT, 0, 0, NULL, false},
    {"num_outputs", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_split = {"split", CIR_OPF_SYM_DIMS, 1, 2, 1, OP_SPLIT_MAX, split_attrs, split_infer, split_fold, NULL, 0};
