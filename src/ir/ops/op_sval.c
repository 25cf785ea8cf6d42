/* op_sval.c -- small integer tensors whose values are known as expressions of the symbols
 * (cir_value.sval): what exporters compute shapes with (Shape -> Gather -> Unsqueeze -> Concat
 * -> Reshape, Shape -> Sub -> Slice). Shape inference calls op_sval_eval after a node's infer
 * when an input has such values: the node's output gets its values as expressions by the op's
 * own semantics, element by element, or becomes a constant when they all are. What cannot be
 * computed exactly (a division whose rounding depends on signs not proven, a comparison not
 * decided) is left alone: the value is then only known when the model runs, and a node that
 * needs it as a shape says so. Codegen writes a node with such an output as a fill of its
 * elements from D[] (codegen.c), so the model computes the same numbers. */
#include "ir/ops/ops.h"

#include <string.h>

static bool known(cir_graph *g, const cir_value *v) {
    (void)g;
    if (!v) return false;
    if (v->sval) return true;
    return cir_is_const(v) && (cir_dtype_is_int(v->dtype) || v->dtype == CIR_BOOL) && cir_numel(v) <= CIR_MAX_SVAL;
}

/* Element i of a known value. */
static const cir_dim *at(cir_graph *g, const cir_value *v, int64_t i) {
    if (v->sval) return v->sval[i];
    return cir_dim_const(&g->dt, cir_const_i64(v, i));
}

/* Integer division as ONNX's Div computes it (truncating), where the signs make it a floor
 * or ceiling division; NULL when they are not proven. */
static const cir_dim *trunc_div(cir_graph *g, const cir_dim *a, const cir_dim *b) {
    if (!a || !b || b->lo <= 0) return NULL;
    if (a->lo >= 0) return cir_dim_fdiv(&g->dt, a, b);
    if (a->hi <= 0) return cir_dim_cdiv(&g->dt, a, b);
    return NULL;
}

/* 1, 0, or -1 when the comparison is not decided. */
static int decide(cir_graph *g, cir_op_kind k, const cir_dim *a, const cir_dim *b) {
    cir_dimtab *t = &g->dt;
    switch (k) {
    case CIR_OP_EQUAL: return a == b ? 1 : cir_dim_prove_ne(t, a, b) ? 0 : -1;
    case CIR_OP_LESS: return cir_dim_prove_lt(t, a, b) ? 1 : cir_dim_prove_le(t, b, a) ? 0 : -1;
    case CIR_OP_GREATER: return cir_dim_prove_lt(t, b, a) ? 1 : cir_dim_prove_le(t, a, b) ? 0 : -1;
    case CIR_OP_LESS_EQUAL: return cir_dim_prove_le(t, a, b) ? 1 : cir_dim_prove_lt(t, b, a) ? 0 : -1;
    case CIR_OP_GREATER_EQUAL: return cir_dim_prove_le(t, b, a) ? 1 : cir_dim_prove_lt(t, a, b) ? 0 : -1;
    default: return -1;
    }
}

/* Whether every value of e fits type t. */
static bool fits(const cir_dim *e, cir_dtype t) {
    switch (t) {
    case CIR_I64: return true;
    case CIR_I32: return e->lo >= INT32_MIN && e->hi <= INT32_MAX;
    case CIR_BOOL: return e->lo >= 0 && e->hi <= 1;
    default: return false;
    }
}

/* The output's elements into e[0..cnt); false when this op or these values cannot be. */
static bool eval(cir_graph *g, cir_node *n, const cir_value *y, int64_t cnt, const cir_dim **e) {
    cir_value *x = cir_in(g, n, 0);
    switch (n->kind) {
    case CIR_OP_RESHAPE: case CIR_OP_FLATTEN: case CIR_OP_SQUEEZE: case CIR_OP_UNSQUEEZE: case CIR_OP_IDENTITY:
        if (!known(g, x)) return false;
        for (int64_t i = 0; i < cnt; i++) e[i] = at(g, x, i);
        return true;
    case CIR_OP_CAST:
        if (!known(g, x)) return false;
        for (int64_t i = 0; i < cnt; i++)
            if (!fits(e[i] = at(g, x, i), y->dtype)) return false;
        return true;
    case CIR_OP_NEG:
        if (!known(g, x)) return false;
        for (int64_t i = 0; i < cnt; i++) e[i] = cir_dim_neg(&g->dt, at(g, x, i));
        return true;
    case CIR_OP_GATHER: {
        cir_value *iv = cir_in(g, n, 1);
        int axis;
        cuvil_gather_params p;
        if (!known(g, x) || !cir_is_const(iv) || op_gather_params(g, n, &axis, &p)) return false;
        int64_t inner = p.nb_inner / (int64_t)cir_dtype_size(x->dtype), k = 0;
        for (int64_t o = 0; o < p.outer; o++)
            for (int64_t j = 0; j < p.n_idx; j++) {
                int64_t ix = cir_const_i64(iv, j);
                if (ix < 0) ix += p.axis_len;
                if (ix < 0 || ix >= p.axis_len) return false;   /* infer reports it */
                for (int64_t r = 0; r < inner; r++) e[k++] = at(g, x, (o * p.axis_len + ix) * inner + r);
            }
        return k == cnt;
    }
    case CIR_OP_CONCAT: {
        int64_t chunk[CIR_MAX_SVAL], k = 0, esz = (int64_t)cir_dtype_size(y->dtype);
        if (n->n_in > CIR_MAX_SVAL) return false;
        for (int i = 0; i < n->n_in; i++)
            if (!known(g, cir_in(g, n, i))) return false;
        int64_t outer = op_concat_layout(g, n, chunk);
        for (int64_t o = 0; o < outer; o++)
            for (int i = 0; i < n->n_in; i++) {
                int64_t m = chunk[i] / esz;
                for (int64_t r = 0; r < m; r++) e[k++] = at(g, cir_in(g, n, i), o * m + r);
            }
        return k == cnt;
    }
    case CIR_OP_SLICE: {
        cuvil_slice_params p;
        if (!known(g, x) || cir_numel(x) > CIR_MAX_SVAL || op_slice_params(g, n, &p)) return false;
        int64_t idx[CIR_MAX_DIMS] = {0};
        for (int64_t i = 0; i < cnt; i++) {
            int64_t src = 0;
            for (int d = 0; d < p.ndim; d++) src = src * p.in_dims[d] + p.starts[d] + idx[d] * p.steps[d];
            e[i] = at(g, x, src);
            for (int d = p.ndim - 1; d >= 0 && ++idx[d] == p.out_dims[d]; d--) idx[d] = 0;
        }
        return true;
    }
    case CIR_OP_ADD: case CIR_OP_SUB: case CIR_OP_MUL: case CIR_OP_DIV: case CIR_OP_MOD: case CIR_OP_MAX:
    case CIR_OP_MIN: case CIR_OP_EQUAL: case CIR_OP_LESS: case CIR_OP_GREATER: case CIR_OP_LESS_EQUAL:
    case CIR_OP_GREATER_EQUAL: {
        cir_value *b = n->n_in > 1 ? cir_in(g, n, 1) : x;
        if (!known(g, x) || !known(g, b) || (n->kind == CIR_OP_MOD && cir_attr_int(n, "fmod"))) return false;
        cuvil_binary_params p;
        op_bin_params(x, b, y, 0, &p);
        int64_t idx[CIR_MAX_DIMS] = {0};
        for (int64_t i = 0; i < cnt; i++) {
            int64_t ia = 0, ib = 0;
            for (int d = 0; d < p.ndim; d++) {
                ia += idx[d] * p.a_strides[d];
                ib += idx[d] * p.b_strides[d];
            }
            const cir_dim *u = at(g, x, ia), *v = at(g, b, ib);
            cir_dimtab *t = &g->dt;
            int r;
            switch (n->kind) {
            case CIR_OP_ADD: e[i] = cir_dim_add(t, u, v); break;
            case CIR_OP_SUB: e[i] = cir_dim_sub(t, u, v); break;
            case CIR_OP_MUL: e[i] = cir_dim_mul(t, u, v); break;
            case CIR_OP_DIV: e[i] = trunc_div(g, u, v); break;
            case CIR_OP_MOD: e[i] = v && v->lo > 0 ? cir_dim_mod(t, u, v) : NULL; break;
            case CIR_OP_MAX: e[i] = cir_dim_max(t, u, v); break;
            case CIR_OP_MIN: e[i] = cir_dim_min(t, u, v); break;
            default:
                if ((r = decide(g, n->kind, u, v)) < 0) return false;
                e[i] = cir_dim_const(t, r);
            }
            if (!e[i] || !fits(e[i], y->dtype)) return false;
            for (int d = p.ndim - 1; d >= 0 && ++idx[d] == p.dims[d]; d--) idx[d] = 0;
        }
        return true;
    }
    case CIR_OP_WHERE: {
        cir_value *c = x, *a = cir_in(g, n, 1), *b = cir_in(g, n, 2);
        if (!known(g, c) || !known(g, a) || !known(g, b) || y->ndim > CIR_MAX_DIMS) return false;
        int64_t cs[CIR_MAX_DIMS], as[CIR_MAX_DIMS], bs[CIR_MAX_DIMS], idx[CIR_MAX_DIMS] = {0};
        op_bcast_strides(c, y->ndim, y->dims, cs);
        op_bcast_strides(a, y->ndim, y->dims, as);
        op_bcast_strides(b, y->ndim, y->dims, bs);
        for (int64_t i = 0; i < cnt; i++) {
            int64_t ic = 0, ia = 0, ib = 0;
            for (int d = 0; d < y->ndim; d++) {
                ic += idx[d] * cs[d];
                ia += idx[d] * as[d];
                ib += idx[d] * bs[d];
            }
            const cir_dim *cv = at(g, c, ic);
            if (!cir_dim_is_const(cv)) return false;
            e[i] = cv->c ? at(g, a, ia) : at(g, b, ib);
            for (int d = y->ndim - 1; d >= 0 && ++idx[d] == y->dims[d]; d--) idx[d] = 0;
        }
        return true;
    }
    default:
        return false;
    }
}

cuvil_status op_sval_eval(cir_graph *g, cir_node *n) {
    if (n->n_out != 1) return CUVIL_OK;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_fixed(y) || (y->dtype != CIR_I64 && y->dtype != CIR_I32 && y->dtype != CIR_BOOL)) return CUVIL_OK;
    int64_t cnt = cir_numel(y);
    if (cnt > CIR_MAX_SVAL) return CUVIL_OK;
    const cir_dim *e[CIR_MAX_SVAL];
    char why[sizeof g->dt.why];
    memcpy(why, g->dt.why, sizeof why);
    bool ok = eval(g, n, y, cnt, e);
    memcpy(g->dt.why, why, sizeof why);   /* what could not be formed is simply not known */
    for (int64_t i = 0; ok && i < cnt; i++) ok = e[i] != NULL;
    if (!ok) return CUVIL_OK;
    bool all_const = true;
    for (int64_t i = 0; i < cnt; i++) all_const &= cir_dim_is_const(e[i]);
    if (all_const) {   /* folded: a constant like any other */
        if (!cir_value_make_const(g, y)) return g->ctx->status;
        for (int64_t i = 0; i < cnt; i++) cir_const_set_i64(y, i, e[i]->c);
        y->producer = -1;
        n->dead = true;
        return CUVIL_OK;
    }
    const cir_dim **sv = cuvil_arena_memdup(&g->arena, e, sizeof *e * (size_t)(cnt ? cnt : 1));
    if (!sv) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    y->sval = sv;
    return CUVIL_OK;
}
