/* op_reduce.c -- reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod,
 * reduce_sum_square, reduce_l1, reduce_l2, reduce_log_sum_exp over the constant axes of input 1
 * (absent or empty: all, unless noop_with_empty_axes), or of axes read when the model runs (each
 * output dim then a size the run finds, at most the input dim it can be). Every numeric type, at run time and
 * folded with the same kernels: float32 on cuvil_f32_reduce, others on cuvil_reduce_t. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

int op_reduce_kind(const cir_node *n) {
    switch (n->kind) {
    case CIR_OP_REDUCE_SUM: return CUVIL_REDUCE_SUM;
    case CIR_OP_REDUCE_MEAN: return CUVIL_REDUCE_MEAN;
    case CIR_OP_REDUCE_MAX: return CUVIL_REDUCE_MAX;
    case CIR_OP_REDUCE_MIN: return CUVIL_REDUCE_MIN;
    case CIR_OP_REDUCE_PROD: return CUVIL_REDUCE_PROD;
    case CIR_OP_REDUCE_SUM_SQUARE: return CUVIL_REDUCE_SUM_SQUARE;
    case CIR_OP_REDUCE_L1: return CUVIL_REDUCE_L1;
    case CIR_OP_REDUCE_L2: return CUVIL_REDUCE_L2;
    case CIR_OP_REDUCE_LOG_SUM_EXP: return CUVIL_REDUCE_LOG_SUM_EXP;
    default: CUVIL_ASSERT(!"not a reduction");
    }
}

/* Whether axes is a tensor the model computes or takes when it runs (not known as numbers):
 * the run reads it (cuvil_reduce_axes_rt); one of length 0 is known to be empty. */
bool op_reduce_rt_axes(cir_graph *g, cir_node *n) {
    cir_value *v = cir_in(g, n, 1);
    return v && !cir_is_const(v) && !(cir_value_fixed(v) && cir_numel(v) == 0);
}

/* The kernel parameters (mask bit d: axis d is reduced) and the output shape. Absent or
 * empty axes reduce everything, unless noop_with_empty_axes makes the node an identity. */
cuvil_status op_reduce_params(cir_graph *g, cir_node *n, cuvil_reduce_params *p, int *ndim, int64_t *dims) {
    cir_value *x = cir_in(g, n, 0);
    memset(p, 0, sizeof *p);
    p->op = op_reduce_kind(n);
    p->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) p->dims[d] = x->dims[d];
    int64_t axes[CIR_MAX_DIMS];
    int na = -1;
    cuvil_status s;
    cir_value *av = cir_in(g, n, 1);
    if (av && !cir_is_const(av) && cir_value_fixed(av) && cir_numel(av) == 0) av = NULL;   /* empty: as absent */
    if (av && (s = op_const_ints(g, n, 1, "axes", axes, CIR_MAX_DIMS, &na))) return s;
    bool keepdims = cir_attr_int(n, "keepdims") != 0;
    if (na <= 0) {
        if (cir_attr_int(n, "noop_with_empty_axes")) {
            p->mask = 0;
            *ndim = x->ndim;
            memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
            return CUVIL_OK;
        }
        p->mask = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
    }
    for (int i = 0; i < na; i++) {
        int ax;
        if ((s = op_axis(g, n, axes[i], x->ndim, "axes", &ax))) return s;
        if (p->mask & (1u << ax)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d is repeated in axes", ax);
        p->mask |= 1u << ax;
    }
    *ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!(p->mask & (1u << d))) dims[(*ndim)++] = x->dims[d];
        else if (keepdims) dims[(*ndim)++] = 1;
    }
    return CUVIL_OK;
}

static cuvil_status reduce_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 2, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if ((x->dtype == CIR_BOOL && n->kind != CIR_OP_REDUCE_MAX && n->kind != CIR_OP_REDUCE_MIN) ||
        cir_dtype_size(x->dtype) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    bool keepdims = cir_attr_int(n, "keepdims") != 0;
    if (op_reduce_rt_axes(g, n)) {   /* axes read when the model runs: each output dim a size the run finds */
        cir_value *a = cir_in(g, n, 1);
        if ((a->dtype != CIR_I64 && a->dtype != CIR_I32) || a->ndim != 1 || !cir_value_fixed(a))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input 'axes' ('%s') is %s of rank %d%s; read when the model "
                                "runs, Cuvil takes it as a 1-D int64 or int32 tensor of fixed length", a->name,
                                cir_dtype_name(a->dtype), a->ndim, cir_value_fixed(a) ? "" : " and symbolic length");
        int64_t cnt = a->dims[0];
        if (cnt > x->ndim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "axes has %lld values for input '%s' of rank %d", (long long)cnt,
                                x->name, x->ndim);
        int nd = keepdims ? x->ndim : x->ndim - (int)cnt;
        const cir_dim *dx[CIR_MAX_DIMS];
        for (int d = 0; d < nd; d++) {   /* at most the largest input dim it can be */
            int64_t hi = 1;
            for (int e = d; e <= (keepdims ? d : d + (int)cnt); e++) hi = x->dims[e] > hi ? x->dims[e] : hi;
            if ((s = op_found_dim(g, n, 0, d, d, hi, false, &dx[d]))) return s;
        }
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, nd, dx);
        return CUVIL_OK;
    }
    cuvil_reduce_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    if ((s = op_reduce_params(g, n, &p, &ndim, dims))) return s;
    /* the dims kept, as expressions (op_reduce_params's, with x's expressions) */
    const cir_dim *dx[CIR_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!(p.mask & (1u << d))) dx[nd++] = cir_dimx(g, x, d);
        else if (keepdims) dx[nd++] = cir_dim_const(&g->dt, 1);
    }
    CUVIL_ASSERT(nd == ndim);
    for (int d = 0; d < nd; d++)
        if (!dx[d]) return cir_dim_err(g, n, "the output's dims");
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, ndim, dx);   /* every numeric type runs (cuvil_reduce_t) */
    return CUVIL_OK;
}

static cuvil_status reduce_fold(cir_graph *g, cir_node *n) {
    cuvil_reduce_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    cuvil_status s = op_reduce_params(g, n, &p, &ndim, dims);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    if (x->dtype == CIR_F32) cuvil_f32_reduce(&p, x->data, y->data);   /* no __scalar twin: the compiler links the portable runtime */
    else cuvil_reduce_t(&p, (int)x->dtype, x->data, y->data);            /* as the model computes it */
    return CUVIL_OK;
}

static const cir_attr_spec reduce_attrs[] = {
    {"keepdims", CIR_ATTR_INT, 1, 0, NULL, false},
    {"noop_with_empty_axes", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

#define REDUCE(name) \
    const cir_opdef cir_op_##name = {#name, CIR_OPF_SYM_DIMS, 1, 2, 1, 1, reduce_attrs, reduce_infer, reduce_fold, NULL, 0};
REDUCE(reduce_sum)
REDUCE(reduce_mean)
REDUCE(reduce_max)
REDUCE(reduce_min)
REDUCE(reduce_prod)
REDUCE(reduce_sum_square)
REDUCE(reduce_l1)
REDUCE(reduce_l2)
REDUCE(reduce_log_sum_exp)
