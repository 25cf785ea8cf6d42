/* op_transpose.c -- transpose, depth_to_space and space_to_depth (transposes of a 6-D view of
 * their input, one kernel), and concat, for any element type. */
#include "ir/ops/ops.h"

#include <string.h>

/* depth_to_space / space_to_depth of x [N, C, H, W] with block b: the 6-D view of x and the
 * permutation that makes the output's 6-D view (DCR: [N, b, b, C/b^2, H, W] -> [N, C/b^2, H, b,
 * W, b]; CRD: [N, C/b^2, b, b, H, W] -> the same; space_to_depth: [N, C, H/b, b, W/b, b] ->
 * [N, b, b, C, H/b, W/b], CRD -> [N, C, b, b, H/b, W/b]). */
static cuvil_status block_params(cir_graph *g, cir_node *n, cuvil_transpose_params *p) {
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim != 4) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; it must be 4 (N, C, H, W)",
                                          x->name, x->ndim);
    int64_t b = cir_attr_int(n, "blocksize"), N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], bb;
    if (b < 1 || __builtin_mul_overflow(b, b, &bb))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "blocksize %lld must be at least 1", (long long)b);
    p->ndim = 6;
    p->elem_size = (int64_t)cir_dtype_size(x->dtype);
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3}, s2d[6] = {0, 3, 5, 1, 2, 4}, s2d_crd[6] = {0, 1, 3, 5, 2, 4};
    const int *perm;
    if (n->kind == CIR_OP_DEPTH_TO_SPACE) {
        if (C % bb)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has %lld channels, not a multiple of blocksize^2 = %lld",
                                x->name, (long long)C, (long long)bb);
        bool is_crd = cir_attr_int(n, "mode") == 1;
        int64_t v[6] = {N, b, b, C / bb, H, W}, w[6] = {N, C / bb, b, b, H, W};
        memcpy(p->dims, is_crd ? w : v, sizeof v);
        perm = is_crd ? crd : dcr;
    } else {
        if (H % b || W % b)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' is %lldx%lld, not a multiple of blocksize %lld",
                                x->name, (long long)H, (long long)W, (long long)b);
        int64_t v[6] = {N, C, H / b, b, W / b, b};
        memcpy(p->dims, v, sizeof v);
        perm = cir_attr_int(n, "mode") == 1 ? s2d_crd : s2d;
    }
    for (int i = 0; i < 6; i++) p->perm[i] = perm[i];
    return CUVIL_OK;
}

cuvil_status op_transpose_params(cir_graph *g, cir_node *n, cuvil_transpose_params *p) {
    cir_value *x = cir_in(g, n, 0);
    memset(p, 0, sizeof *p);
    if (n->kind == CIR_OP_DEPTH_TO_SPACE || n->kind == CIR_OP_SPACE_TO_DEPTH) return block_params(g, n, p);
    p->ndim = x->ndim;
    p->elem_size = (int64_t)cir_dtype_size(x->dtype);
    const int64_t *perm;
    int cnt = cir_attr_ints(n, "perm", &perm);
    if (cnt >= 0 && cnt != x->ndim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "perm has %d values for rank %d", cnt, x->ndim);
    bool seen[CIR_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        p->dims[i] = x->dims[i];
        int64_t v = cnt >= 0 ? perm[i] : x->ndim - 1 - i;
        if (v < 0 || v >= x->ndim || seen[v]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "perm is not a permutation");
        seen[v] = true;
        p->perm[i] = (int)v;
    }
    return CUVIL_OK;
}

static cuvil_status transpose_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    /* swap_last2 (a frontend's transpose of an operand whose rank the model does not declare,
     * com.microsoft FusedMatMul's transA/transB): the perm once the rank is known */
    if (cir_attr_int(n, "swap_last2") && !cir_attr_has(n, "perm")) {
        cir_value *x = cir_in(g, n, 0);
        if (x->ndim < 2)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; swapping its last two dims needs 2 or more",
                                x->name, x->ndim);
        int64_t perm[CIR_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) perm[d] = d;
        perm[x->ndim - 2] = x->ndim - 1, perm[x->ndim - 1] = x->ndim - 2;
        cuvil_attr pa = {.name = "perm", .type = CUVIL_ATTR_INTS, .ints = perm, .n = (size_t)x->ndim};
        if ((s = cir_node_set_attr(g, n, &pa))) return s;
    }
    cuvil_transpose_params p;
    if ((s = op_transpose_params(g, n, &p))) return s;
    cir_value *x = cir_in(g, n, 0);
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int i = 0; i < p.ndim; i++)
        if (!(dx[i] = cir_dimx(g, x, p.perm[i]))) return cir_dim_err(g, n, "the output's dims");
    cir_set_shape_x(cir_out(g, n, 0), x->dtype, x->ndim, dx);
    return CUVIL_OK;   /* any element type: the kernel moves elem_size bytes */
}

/* depth_to_space / space_to_depth with symbolic dims: block_params's 6-D view as expressions
 * (the divisibility by the block checked when the model runs where it is not proved) and, if
 * y is given, the output's dims. */
cuvil_status op_block_x(cir_graph *g, cir_node *n, const cir_dim **v6, int *perm, const cir_dim **y) {
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim != 4) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; it must be 4 (N, C, H, W)",
                                          x->name, x->ndim);
    int64_t b = cir_attr_int(n, "blocksize");
    if (b < 1 || b > 65536) return cir_node_err(g, n, CUVIL_ERR_MODEL, "blocksize %lld must be in 1..65536", (long long)b);
    cir_dimtab *t = &g->dt;
    const cir_dim *N = cir_dimx(g, x, 0), *C = cir_dimx(g, x, 1), *H = cir_dimx(g, x, 2), *W = cir_dimx(g, x, 3);
    const cir_dim *B = cir_dim_const(t, b), *BB = cir_dim_const(t, b * b), *zero = cir_dim_const(t, 0);
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3}, s2d[6] = {0, 3, 5, 1, 2, 4}, s2d_crd[6] = {0, 1, 3, 5, 2, 4};
    const int *pm;
    cuvil_status s;
    if (n->kind == CIR_OP_DEPTH_TO_SPACE) {
        if ((s = cir_require_eq(g, n, cir_dim_mod(t, C, BB), zero, "the channels modulo blocksize^2 and 0"))) return s;
        const cir_dim *c = cir_dim_fdiv(t, C, BB);
        bool is_crd = cir_attr_int(n, "mode") == 1;
        const cir_dim *v[6] = {N, B, B, c, H, W}, *w[6] = {N, c, B, B, H, W};
        memcpy(v6, is_crd ? w : v, sizeof v);
        pm = is_crd ? crd : dcr;
        if (y) y[0] = N, y[1] = c, y[2] = cir_dim_mul(t, H, B), y[3] = cir_dim_mul(t, W, B);
    } else {
        if ((s = cir_require_eq(g, n, cir_dim_mod(t, H, B), zero, "the height modulo blocksize and 0")) ||
            (s = cir_require_eq(g, n, cir_dim_mod(t, W, B), zero, "the width modulo blocksize and 0")))
            return s;
        const cir_dim *h = cir_dim_fdiv(t, H, B), *w = cir_dim_fdiv(t, W, B), *v[6] = {N, C, h, B, w, B};
        memcpy(v6, v, sizeof v);
        pm = cir_attr_int(n, "mode") == 1 ? s2d_crd : s2d;
        if (y) y[0] = N, y[1] = cir_dim_mul(t, C, BB), y[2] = h, y[3] = w;
    }
    for (int i = 0; i < 6; i++) {
        perm[i] = pm[i];
        if (!v6[i]) return cir_dim_err(g, n, "the blocks' dims");
    }
    for (int i = 0; y && i < 4; i++)
        if (!y[i]) return cir_dim_err(g, n, "the output's dims");
    return CUVIL_OK;
}

static cuvil_status block_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 1, 1, 1);
    if (s) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_value_fixed(x)) {
        const cir_dim *v6[6], *y[4];
        int perm[6];
        if ((s = op_block_x(g, n, v6, perm, y))) return s;
        cir_set_shape_x(cir_out(g, n, 0), x->dtype, 4, y);
        return CUVIL_OK;
    }
    cuvil_transpose_params p;
    if ((s = op_transpose_params(g, n, &p))) return s;
    int64_t b = cir_attr_int(n, "blocksize"), dims[4] = {x->dims[0], 0, 0, 0};
    bool d2s = n->kind == CIR_OP_DEPTH_TO_SPACE, over = false;   /* b * b fits (block_params) */
    if (d2s) {
        dims[1] = x->dims[1] / (b * b);
        over = __builtin_mul_overflow(x->dims[2], b, &dims[2]) || __builtin_mul_overflow(x->dims[3], b, &dims[3]);
    } else {
        over = __builtin_mul_overflow(x->dims[1], b * b, &dims[1]);
        dims[2] = x->dims[2] / b;
        dims[3] = x->dims[3] / b;
    }
    if (over) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "blocksize %lld makes the output too large", (long long)b);
    cir_set_shape(cir_out(g, n, 0), x->dtype, 4, dims);
    return CUVIL_OK;
}

static cuvil_status transpose_fold(cir_graph *g, cir_node *n) {
    cuvil_transpose_params p;
    cuvil_status s = op_transpose_params(g, n, &p);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0);
    if (!cir_value_make_const(g, y)) return g->ctx->status;
    cuvil_transpose(&p, cir_in(g, n, 0)->data, y->data);
    return CUVIL_OK;
}

/* ===== Concat ========================================================================= */
static cuvil_status concat_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, -1, 1, 1);
    if (s) return s;
    cir_value *x0 = cir_in(g, n, 0);
    int ax;
    if ((s = op_axis(g, n, cir_attr_int(n, "axis"), x0->ndim, "axis", &ax))) return s;
    const cir_dim *dx[CIR_MAX_DIMS];
    for (int d = 0; d < x0->ndim; d++) dx[d] = cir_dimx(g, x0, d);
    dx[ax] = cir_dim_const(&g->dt, 0);
    for (int i = 0; i < n->n_in; i++) {
        cir_value *x = cir_in(g, n, i);
        if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is missing", i);
        if (x->dtype != x0->dtype || x->ndim != x0->ndim)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' differs from '%s' in type or rank", x->name, x0->name);
        for (int d = 0; d < x->ndim; d++) {
            if (d == ax) continue;
            const cir_dim *a = cir_dimx(g, x, d);
            if (a == dx[d]) continue;
            if (cir_dim_is_const(a) && cir_dim_is_const(dx[d])) {
                char sa[256], sb[256];
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' %s does not match '%s' %s outside axis %d", x->name,
                                    cir_shape_str(g, x, sa, sizeof sa), x0->name, cir_shape_str(g, x0, sb, sizeof sb), ax);
            }
            char what[64];
            snprintf(what, sizeof what, "dims %d of the inputs", d);
            if ((s = cir_require_eq(g, n, a, dx[d], what))) return s;
        }
        dx[ax] = cir_dim_add(&g->dt, dx[ax], cir_dimx(g, x, ax));
        if (!dx[ax]) return cir_dim_err(g, n, "the concatenated dim");
    }
    cir_set_shape_x(cir_out(g, n, 0), x0->dtype, x0->ndim, dx);
    return CUVIL_OK;
}

/* outer = product of dims before axis; chunk[i] = bytes of input i per outer row. */
int64_t op_concat_layout(cir_graph *g, cir_node *n, int64_t *chunk) {
    cir_value *y = cir_out(g, n, 0);
    int ax;
    op_axis(g, n, cir_attr_int(n, "axis"), y->ndim, "axis", &ax);
    int64_t outer = 1, inner = (int64_t)cir_dtype_size(y->dtype);
    for (int d = 0; d < ax; d++) outer *= y->dims[d];
    for (int d = ax + 1; d < y->ndim; d++) inner *= y->dims[d];
    for (int i = 0; i < n->n_in; i++) chunk[i] = cir_in(g, n, i)->dims[ax] * inner;
    return outer;
}

static cuvil_status concat_fold(cir_graph *g, cir_node *n) {
    int64_t *chunk = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)n->n_in);
    const void **ins = cuvil_arena_alloc(&g->arena, sizeof(void *) * (size_t)n->n_in);
    cir_value *y = cir_out(g, n, 0);
    if (!chunk || !ins || !cir_value_make_const(g, y)) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    int64_t outer = op_concat_layout(g, n, chunk);
    for (int i = 0; i < n->n_in; i++) ins[i] = cir_in(g, n, i)->data;
    cuvil_concat(outer, n->n_in, chunk, ins, y->data);
    return CUVIL_OK;
}

static const cir_attr_spec transpose_attrs[] = {{"perm", CIR_ATTR_INTS, 0, 0, NULL, false},
                                                {"swap_last2", CIR_ATTR_INT, 0, 0, NULL, false}, CIR_ATTR_END};
static const cir_attr_spec concat_attrs[] = {{"axis", CIR_ATTR_INT, 0, 0, NULL, true}, CIR_ATTR_END};

const cir_opdef cir_op_transpose = {"transpose", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, transpose_attrs, transpose_infer, transpose_fold, NULL, 0};

static const char *const d2s_modes[] = {"DCR", "CRD", NULL};
static const cir_attr_spec d2s_attrs[] = {
    {"blocksize", CIR_ATTR_INT, 0, 0, NULL, true},
    {"mode", CIR_ATTR_ENUM, 0, 0, d2s_modes, false},
    CIR_ATTR_END,
};
static const cir_attr_spec s2d_attrs[] = {
    {"blocksize", CIR_ATTR_INT, 0, 0, NULL, true},
    {"mode", CIR_ATTR_ENUM, 0, 0, d2s_modes, false},   /* opset 25: DCR (the default) or CRD */
    CIR_ATTR_END,
};

const cir_opdef cir_op_depth_to_space = {"depth_to_space", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, d2s_attrs, block_infer, transpose_fold, NULL, 0};
const cir_opdef cir_op_space_to_depth = {"space_to_depth", CIR_OPF_SYM_DIMS, 1, 1, 1, 1, s2d_attrs, block_infer, transpose_fold, NULL, 0};
const cir_opdef cir_op_concat = {"concat", CIR_OPF_SYM_DIMS, 1, -1, 1, 1, concat_attrs, concat_infer, concat_fold, NULL, 0};
