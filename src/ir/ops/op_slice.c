/* op_slice.c -- slice (x, starts, ends, [axes], [steps]; constant starts..steps; any element
 * type). */
#include "ir/ops/ops.h"

#include <string.h>

/* The counts of starts, ends, axes and steps (-1: absent) agree, and fit the input's rank. */
static cuvil_status check_counts(cir_graph *g, cir_node *n, int ns, int ne, int na, int nst) {
    const cir_value *x = cir_in(g, n, 0);
    if (ne != ns) return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values but ends has %d", ns, ne);
    if (na >= 0 && na != ns) return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values but axes has %d", ns, na);
    if (nst >= 0 && nst != ns) return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values but steps has %d", ns, nst);
    if (na < 0 && ns > x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %d values for input '%s' of rank %d", ns, x->name, x->ndim);
    return CUVIL_OK;
}

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
    if ((s = check_counts(g, n, ns, ne, na, nst))) return s;

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
        int64_t step = nst >= 0 ? steps[i] : 1, start = starts[i];
        if (step == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "steps[%d] is 0", i);
        int64_t cnt = cuvil_slice_axis(x->dims[ax], &start, ends[i], &step);   /* the kernel's own rules */
        p->starts[ax] = start;
        p->steps[ax] = step;
        p->out_dims[ax] = cnt;
    }
    return CUVIL_OK;
}

/* One bound (a start or an end) made an index into an axis of size dim by ONNX's rules: a
 * negative one counts from the end, then it clamps to [lo_off, dim + hi_off] (step > 0: [0,
 * dim]; step < 0: a start to [0, dim - 1], an end to [-1, dim - 1]). Refused when its sign is
 * not known (a symbolic bound that may be negative or not). */
static cuvil_status bound_x(cir_graph *g, cir_node *n, const cir_dim *v, const cir_dim *dim, int64_t lo_off,
                            int64_t hi_off, const char *what, int i, const cir_dim **out) {
    cir_dimtab *t = &g->dt;
    const cir_dim *lo = cir_dim_const(t, lo_off), *hi = cir_dim_add_const(t, dim, hi_off);
    if (v->lo >= 0 || v->hi < 0) {
        *out = v->lo >= 0 ? cir_dim_min(t, v, hi) : cir_dim_max(t, cir_dim_min(t, cir_dim_add(t, v, dim), hi), lo);
        return *out ? CUVIL_OK : cir_dim_err(g, n, what);
    }
    cuvil_sb e = {0};
    cir_dim_print(&e, t, v);
    cuvil_status s = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "%s[%d] is %s, which may be negative or not (a count from "
                                  "the end or from the start) when the model runs", what, i, e.s ? e.s : "?");
    cuvil_sb_free(&e);
    return s;
}

/* Starts or ends (input k): known as expressions, or constants (kept as numbers, which may be
 * too large for an expression: INT64_MAX for "to the end"). */
static cuvil_status bounds_in(cir_graph *g, cir_node *n, int k, const char *what, const cir_dim **e, int64_t *c, int *cnt) {
    cir_value *v = cir_in(g, n, k);
    if (v && v->sval) return op_sval_ints(g, n, k, what, e, CIR_MAX_DIMS, cnt);
    cuvil_status s = op_const_ints(g, n, k, what, c, CIR_MAX_DIMS, cnt);
    for (int i = 0; !s && i < *cnt; i++) e[i] = NULL;
    return s;
}

/* Bound i of starts or ends for an axis of size dim: bound_x on the expression, or on the
 * number; a number beyond every size of the axis clamps to the end it is beyond. */
static cuvil_status bound_of(cir_graph *g, cir_node *n, const cir_dim *e, int64_t c, const cir_dim *dim, int64_t lo_off,
                             int64_t hi_off, const char *what, int i, const cir_dim **out) {
    if (!e) {
        if (c > dim->hi || c < -dim->hi - 1) {
            *out = c > 0 ? cir_dim_add_const(&g->dt, dim, hi_off) : cir_dim_const(&g->dt, lo_off);
            return *out ? CUVIL_OK : cir_dim_err(g, n, what);
        }
        if (!(e = cir_dim_const(&g->dt, c))) return cir_dim_err(g, n, what);
    }
    return bound_x(g, n, e, dim, lo_off, hi_off, what, i, out);
}

cuvil_status op_slice_x(cir_graph *g, cir_node *n, const cir_dim **start, const cir_dim **cnt, int64_t *steps) {
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *starts[CIR_MAX_DIMS], *ends[CIR_MAX_DIMS];
    int64_t axes[CIR_MAX_DIMS], st[CIR_MAX_DIMS], sc[CIR_MAX_DIMS], ec[CIR_MAX_DIMS];
    int ns, ne, na = -1, nst = -1;
    cuvil_status s;
    cir_dimtab *t = &g->dt;
    if ((s = bounds_in(g, n, 1, "starts", starts, sc, &ns)) || (s = bounds_in(g, n, 2, "ends", ends, ec, &ne)) ||
        (cir_in(g, n, 3) && (s = op_const_ints(g, n, 3, "axes", axes, CIR_MAX_DIMS, &na))) ||
        (cir_in(g, n, 4) && (s = op_const_ints(g, n, 4, "steps", st, CIR_MAX_DIMS, &nst))))
        return s;
    if ((s = check_counts(g, n, ns, ne, na, nst))) return s;
    for (int d = 0; d < x->ndim; d++) {
        start[d] = cir_dim_const(t, 0);
        cnt[d] = cir_dimx(g, x, d);
        steps[d] = 1;
    }
    bool seen[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < ns; i++) {
        int ax = i;
        if (na >= 0 && (s = op_axis(g, n, axes[i], x->ndim, "axes", &ax))) return s;
        if (seen[ax]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %d is repeated in axes", ax);
        seen[ax] = true;
        int64_t step = nst >= 0 ? st[i] : 1;
        if (step == 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "steps[%d] is 0", i);
        const cir_dim *dim = cir_dimx(g, x, ax), *b, *e;
        /* a step longer than the axis selects its first element whatever the axis' size */
        int64_t maxstep = dim->hi > 0 ? dim->hi : 1;
        if (step > maxstep) step = maxstep;
        if (step < -maxstep) step = -maxstep;
        int64_t slo = 0, shi = step > 0 ? 0 : -1, elo = step > 0 ? 0 : -1, ehi = step > 0 ? 0 : -1;
        if ((s = bound_of(g, n, starts[i], sc[i], dim, slo, shi, "starts", i, &b)) ||
            (s = bound_of(g, n, ends[i], ec[i], dim, elo, ehi, "ends", i, &e)))
            return s;
        const cir_dim *c = step > 0 ? cir_dim_cdiv(t, cir_dim_sub(t, e, b), cir_dim_const(t, step))
                                    : cir_dim_cdiv(t, cir_dim_sub(t, b, e), cir_dim_const(t, -step));
        c = cir_dim_max(t, c, cir_dim_const(t, 0));
        if (!c) return cir_dim_err(g, n, "the slice's length");
        start[ax] = b;
        cnt[ax] = c;
        steps[ax] = step;
    }
    return CUVIL_OK;
}

static cuvil_status slice_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 5, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (cir_dtype_size(x->dtype) == 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has type %s", x->name, cir_dtype_name(x->dtype));
    cir_value *a = cir_in(g, n, 1), *b = cir_in(g, n, 2);
    bool rt = false;   /* an input read when the model runs (not known as expressions) */
    for (int i = 1; i < 5; i++) {
        cir_value *v = cir_in(g, n, i);
        rt |= v && !cir_is_const(v) && !(i < 3 && v->sval);
    }
    if (rt) {   /* the slice the run's values give: each output dim a size the node finds, at most the input's */
        int64_t cnt = -1;
        for (int i = 1; i < 5; i++) {
            cir_value *v = cir_in(g, n, i);
            if (!v) continue;
            if (v->dtype != a->dtype || (v->dtype != CIR_I64 && v->dtype != CIR_I32) || v->ndim != 1 || !cir_value_fixed(v))
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s %s; with starts, ends, axes or steps "
                                    "read when the model runs, Cuvil takes them as 1-D tensors of fixed length and one "
                                    "type, int32 or int64", v->name, cir_dtype_name(v->dtype), v->ndim == 1 ? "" : "(not 1-D)");
            if (cnt >= 0 && v->dims[0] != cnt)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts, ends, axes and steps have different lengths");
            cnt = v->dims[0];
        }
        if (cnt > x->ndim)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "starts has %lld values for input '%s' of rank %d", (long long)cnt,
                                x->name, x->ndim);
        const cir_dim *dx[CIR_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++)
            if ((s = op_found_dim(g, n, 0, d, d, x->dims[d], false, &dx[d]))) return s;
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
        return CUVIL_OK;
    }
    if (cir_value_fixed(x) && !a->sval && !b->sval) {   /* numbers: the kernel's own computation */
        cuvil_slice_params p;
        if ((s = op_slice_params(g, n, &p))) return s;
        cir_set_shape(cir_out(g, n, 0), x->dtype, p.ndim, p.out_dims);
        return CUVIL_OK;
    }
    const cir_dim *start[CIR_MAX_DIMS], *cnt[CIR_MAX_DIMS];
    int64_t steps[CIR_MAX_DIMS];
    if ((s = op_slice_x(g, n, start, cnt, steps))) return s;
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, cnt);
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

const cir_opdef cir_op_slice = {"slice", CIR_OPF_SYM_DIMS, 3, 5, 1, 1, NULL, slice_infer, slice_fold, NULL, 0};
