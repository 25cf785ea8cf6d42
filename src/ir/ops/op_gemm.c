/* op_gemm.c -- gemm (trans_a/trans_b, alpha, beta, broadcast C) and matmul (numpy semantics:
 * 1-D operands, broadcast batch dims; a third input, which only passes add (fuse_bias), is a
 * bias of N elements added to every row). Both run on cuvil_f32_gemm. */
#include "ir/ops/ops.h"

#include <string.h>

static cuvil_status gemm_params(cir_graph *g, cir_node *n, cuvil_gemm_params *p) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1), *c = cir_in(g, n, 2);
    memset(p, 0, sizeof *p);
    if (a->ndim != 2 || b->ndim != 2)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "A and B must be 2-D (got rank %d and %d)", a->ndim, b->ndim);
    p->trans_a = (int)cir_attr_int(n, "trans_a");
    p->trans_b = (int)cir_attr_int(n, "trans_b");
    p->M = p->trans_a ? a->dims[1] : a->dims[0];
    p->K = p->trans_a ? a->dims[0] : a->dims[1];
    int64_t kb = p->trans_b ? b->dims[1] : b->dims[0];
    p->N = p->trans_b ? b->dims[0] : b->dims[1];
    if (kb != p->K) {
        char sa[256], sb[256];
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "inner dims differ: A '%s' %s (transA=%d), B '%s' %s (transB=%d)", a->name,
                            cir_shape_str(g, a, sa, sizeof sa), p->trans_a, b->name, cir_shape_str(g, b, sb, sizeof sb), p->trans_b);
    }
    p->lda = a->dims[1];
    p->ldb = b->dims[1];
    p->ldc = p->N;
    p->alpha = cir_attr_float(n, "alpha");
    p->beta = cir_attr_float(n, "beta");
    p->batch = 1;
    p->act = cir_node_act_params(n);
    if (c) {
        int64_t cm = c->ndim >= 2 ? c->dims[c->ndim - 2] : 1, cn = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
        if (c->ndim > 2 || (cm != 1 && cm != p->M) || (cn != 1 && cn != p->N))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "C '%s' does not broadcast to [%lld,%lld]", c->name, (long long)p->M,
                                (long long)p->N);
        /* broadcast_c=0 (ONNX before opset 7 without broadcast=1): C must be [M, N] */
        if (!cir_attr_int(n, "broadcast_c") && (c->ndim != 2 || cm != p->M || cn != p->N))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "C '%s' must be [%lld,%lld] (this node does not broadcast C: "
                                "broadcast_c=0)", c->name, (long long)p->M, (long long)p->N);
        p->bias_rs = cm == 1 ? 0 : cn;
        p->bias_cs = cn == 1 ? 0 : 1;
    }
    return CUVIL_OK;
}

/* ===== With the dims as expressions (any graph) ======================================= */
static const cir_dim *dim_or_1(cir_graph *g, const cir_value *v, int i) {
    return i >= 0 && i < v->ndim ? cir_dimx(g, v, i) : cir_dim_const(&g->dt, 1);
}

/* A bias/C dim c that broadcasts to dim m: 1 (stride 0) or m (a guard if not proven). */
static cuvil_status bcast_dim(cir_graph *g, cir_node *n, const cir_dim *c, const cir_dim *m, const char *what) {
    if (cir_dim_is_const(c) && c->c == 1) return CUVIL_OK;
    if (cir_dim_is_const(c) && cir_dim_is_const(m) && c != m)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s does not broadcast: %lld against %lld", what, (long long)c->c, (long long)m->c);
    return cir_require_eq(g, n, c, m, what);
}

static cuvil_status gemm_x(cir_graph *g, cir_node *n, op_gemm_xparams *p, int *ndim, const cir_dim **dx) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1), *c = cir_in(g, n, 2);
    if (a->ndim != 2 || b->ndim != 2)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "A and B must be 2-D (got rank %d and %d)", a->ndim, b->ndim);
    int ta = (int)cir_attr_int(n, "trans_a"), tb = (int)cir_attr_int(n, "trans_b");
    cir_dimtab *t = &g->dt;
    p->M = cir_dimx(g, a, ta ? 1 : 0);
    p->K = cir_dimx(g, a, ta ? 0 : 1);
    p->N = cir_dimx(g, b, tb ? 0 : 1);
    p->lda = cir_dimx(g, a, 1);
    p->ldb = cir_dimx(g, b, 1);
    p->ldc = p->N;
    p->batch = cir_dim_const(t, 1);
    p->a_bstride = p->b_bstride = p->c_bstride = p->bias_rs = cir_dim_const(t, 0);
    p->bias_cs = cir_dim_const(t, 0);
    cuvil_status s = cir_require_eq(g, n, cir_dimx(g, b, tb ? 1 : 0), p->K, "the inner dims of A and B");
    if (s) return s;
    if (c) {
        if (c->ndim > 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "C '%s' has rank %d; at most 2", c->name, c->ndim);
        const cir_dim *cm = dim_or_1(g, c, c->ndim - 2), *cn = dim_or_1(g, c, c->ndim - 1);
        if (!cir_attr_int(n, "broadcast_c") && (c->ndim != 2 || cm != p->M || cn != p->N))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "C '%s' must be [M, N] (this node does not broadcast C: "
                                "broadcast_c=0)", c->name);
        if ((s = bcast_dim(g, n, cm, p->M, "the rows of C")) || (s = bcast_dim(g, n, cn, p->N, "the columns of C")))
            return s;
        p->bias_rs = cir_dim_is_const(cm) && cm->c == 1 ? cir_dim_const(t, 0) : cn;
        p->bias_cs = cir_dim_const(t, cir_dim_is_const(cn) && cn->c == 1 ? 0 : 1);
    }
    *ndim = 2;
    dx[0] = p->M;
    dx[1] = p->N;
    return CUVIL_OK;
}

static cuvil_status matmul_x(cir_graph *g, cir_node *n, op_gemm_xparams *p, int *ndim, const cir_dim **dx) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1);
    if (a->ndim < 1 || b->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "operands must have rank >= 1");
    cir_dimtab *t = &g->dt;
    const cir_dim *M = a->ndim == 1 ? cir_dim_const(t, 1) : cir_dimx(g, a, a->ndim - 2), *K = cir_dimx(g, a, a->ndim - 1);
    const cir_dim *Kb = cir_dimx(g, b, b->ndim == 1 ? 0 : b->ndim - 2), *N = b->ndim == 1 ? cir_dim_const(t, 1) : cir_dimx(g, b, b->ndim - 1);
    cuvil_status s = cir_require_eq(g, n, K, Kb, "the inner dims of the operands");
    if (s) return s;
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0, br = ba > bb ? ba : bb;
    const cir_dim *bd[CIR_MAX_DIMS], *one = cir_dim_const(t, 1), *batch = one;
    bool a_full = true, b_full = true, a_one = true, b_one = true;
    for (int i = 0; i < br; i++) {
        int ia = i - (br - ba), ib = i - (br - bb);
        const cir_dim *da = ia >= 0 ? cir_dimx(g, a, ia) : one, *db = ib >= 0 ? cir_dimx(g, b, ib) : one;
        if (da == db || db == one) bd[i] = da;
        else if (da == one) bd[i] = db;
        else if (cir_dim_is_const(da) && cir_dim_is_const(db))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "batch dims do not broadcast");
        else if ((s = cir_require_eq(g, n, da, db, "the batch dims of the operands"))) return s;
        else bd[i] = da;
        a_full &= da == bd[i];
        b_full &= db == bd[i];
        a_one &= da == one;
        b_one &= db == one;
        batch = cir_dim_mul(t, batch, bd[i]);
    }
    p->K = K;
    p->N = p->ldb = p->ldc = N;
    p->lda = K;
    p->a_bstride = p->b_bstride = p->c_bstride = p->bias_rs = cir_dim_const(t, 0);
    p->bias_cs = cir_dim_const(t, 0);
    if (b_one && a_full) {   /* A [batch, M, K] contiguous and B shared: batch folds into M */
        p->M = cir_dim_mul(t, M, batch);
        p->batch = one;
    } else if ((a_full || a_one) && (b_full || b_one)) {
        p->M = M;
        p->batch = batch;
        if (!a_one) p->a_bstride = cir_dim_mul(t, M, K);
        if (!b_one) p->b_bstride = cir_dim_mul(t, K, N);
        p->c_bstride = cir_dim_mul(t, M, N);
    } else {
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "a batch broadcast that is neither contiguous nor shared, with "
                            "symbolic dims");
    }
    cir_value *bias = cir_in(g, n, 2);
    if (bias) {
        if (bias->dtype != CIR_F32 || bias->ndim < 1 || cir_dimx(g, bias, bias->ndim - 1) != N || !cir_value_fixed(bias))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the bias '%s' is not a row of N", bias->name);
        p->bias_cs = one;
    }
    *ndim = 0;
    for (int i = 0; i < br; i++) dx[(*ndim)++] = bd[i];
    if (a->ndim > 1) dx[(*ndim)++] = M;
    if (b->ndim > 1) dx[(*ndim)++] = N;
    for (int i = 0; i < *ndim; i++)
        if (!dx[i]) return cir_dim_err(g, n, "the output's dims");
    if (!p->M || !p->a_bstride || !p->b_bstride || !p->c_bstride) return cir_dim_err(g, n, "the GEMM's sizes");
    return CUVIL_OK;
}

cuvil_status op_gemm_x(cir_graph *g, cir_node *n, op_gemm_xparams *p, int *ndim, const cir_dim **dx) {
    return n->kind == CIR_OP_GEMM ? gemm_x(g, n, p, ndim, dx) : matmul_x(g, n, p, ndim, dx);
}

static cuvil_status gemm_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 3, 1, 1);
    if (s || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1)) || (cir_in(g, n, 2) && (s = op_need_f32(g, n, 2))))
        return s;
    cuvil_gemm_params p;
    if (!cir_value_fixed(cir_in(g, n, 0)) || !cir_value_fixed(cir_in(g, n, 1))) {
        op_gemm_xparams px;
        int nd;
        const cir_dim *dx[CIR_MAX_DIMS];
        if ((s = op_gemm_x(g, n, &px, &nd, dx))) return s;
        cir_set_shape_x(cir_out(g, n, 0), CIR_F32, nd, dx);
        return CUVIL_OK;
    }
    if ((s = gemm_params(g, n, &p))) return s;
    int64_t dims[2] = {p.M, p.N};
    cir_set_shape(cir_out(g, n, 0), CIR_F32, 2, dims);
    return CUVIL_OK;
}

/* MatMul: out = broadcast(batch) + [M, N]. When each operand's batch is either the full output
 * batch (contiguous) or one shared matrix, one batched call does it; other broadcasts set
 * *n_irregular to the batch count and, if offs is given, fill offs[2i], offs[2i+1] with the
 * element offsets of A and B for output matrix i. */
static cuvil_status matmul_params(cir_graph *g, cir_node *n, cuvil_gemm_params *p, int *ndim, int64_t *dims,
                                  int64_t *n_irregular, int64_t *offs) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1);
    memset(p, 0, sizeof *p);
    *n_irregular = 0;
    if (a->ndim < 1 || b->ndim < 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "operands must have rank >= 1");
    int64_t M = a->ndim == 1 ? 1 : a->dims[a->ndim - 2], K = a->dims[a->ndim - 1];
    int64_t Kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2], N = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    const cir_dim *ka = a->dx[a->ndim - 1], *kb = b->dx[b->ndim == 1 ? 0 : b->ndim - 2];
    if (K != Kb && (ka || kb)) {
        /* a symbolic K (a size the run finds): the upper bounds need not agree; shape inference
         * made their equality a guard (op_gemm_x), so K is the fixed one's, or the smaller bound */
        K = !ka ? K : !kb ? Kb : K < Kb ? K : Kb;
    } else if (K != Kb) {
        char sa[256], sb[256];
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "inner dims differ: '%s' %s and '%s' %s", a->name,
                            cir_shape_str(g, a, sa, sizeof sa), b->name, cir_shape_str(g, b, sb, sizeof sb));
    }
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0, br = ba > bb ? ba : bb;
    int64_t bdims[CIR_MAX_DIMS], batch = 1, na = 1, nb = 1;
    bool ovf = false;
    for (int i = 0; i < br; i++) {
        int ia = i - (br - ba), ib = i - (br - bb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "batch dims do not broadcast");
        bdims[i] = da == 1 ? db : da;
        batch = cuvil_i64_mul(&ovf, batch, bdims[i]);
        na *= da;   /* products of input dims: bounded by the inputs' size limit */
        nb *= db;
    }
    /* the output's size: checked here because the offset table below is sized by it */
    if (ovf || cuvil_i64_mul(&ovf, cuvil_i64_mul(&ovf, batch, M), N) > (int64_t)(g->limits.tensor_bytes / 4) || ovf)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the output would be over the limit tensor_bytes=%llu",
                            (unsigned long long)g->limits.tensor_bytes);
    bool irregular = (na != 1 && na != batch) || (nb != 1 && nb != batch);
    if (irregular && offs) {
        /* per-item element offsets of A and B for a broadcast neither contiguous nor shared */
        int64_t sa[CIR_MAX_DIMS], sb[CIR_MAX_DIMS], ma = M * K, mb = K * N;
        for (int i = br - 1; i >= 0; i--) {
            int ia = i - (br - ba), ib = i - (br - bb);
            int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
            sa[i] = da == 1 ? 0 : ma;
            sb[i] = db == 1 ? 0 : mb;
            ma *= da;
            mb *= db;
        }
        for (int64_t it = 0; it < batch; it++) {
            int64_t rem = it, oa = 0, ob = 0;
            for (int i = br - 1; i >= 0; i--) {
                int64_t idx = rem % bdims[i];
                rem /= bdims[i];
                oa += idx * sa[i];
                ob += idx * sb[i];
            }
            offs[2 * it] = oa;
            offs[2 * it + 1] = ob;
        }
    }
    if (irregular) {
        p->M = M;
        p->batch = 1;   /* the caller loops over the offset table */
        *n_irregular = batch;
    } else if (nb == 1 && na == batch) {
        /* the A operand is [batch, M, K] contiguous: when B is shared, fold batch into M */
        p->M = M * batch;
        p->batch = 1;
    } else {
        p->M = M;
        p->batch = batch;
        p->a_bstride = na == 1 ? 0 : M * K;
        p->b_bstride = nb == 1 ? 0 : K * N;
        p->c_bstride = M * N;
    }
    p->N = N;
    p->K = K;
    p->lda = K;
    p->ldb = N;
    p->ldc = N;
    p->alpha = 1.0f;
    p->act = cir_node_act_params(n);
    cir_value *bias = cir_in(g, n, 2);
    if (bias) {   /* [N] or [1, ..., 1, N], the same for every row and batch item */
        bool ok = bias->dtype == CIR_F32 && bias->ndim >= 1 && bias->dims[bias->ndim - 1] == N && cir_numel(bias) == N;
        if (!ok) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the bias '%s' is not a row of %lld", bias->name, (long long)N);
        p->beta = 1.0f;
        p->bias_rs = 0;
        p->bias_cs = 1;
    }
    *ndim = 0;
    for (int i = 0; i < br; i++) dims[(*ndim)++] = bdims[i];
    if (a->ndim > 1) dims[(*ndim)++] = M;
    if (b->ndim > 1) dims[(*ndim)++] = N;
    return CUVIL_OK;
}

static cuvil_status matmul_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 3, 1, 1);
    if (s || (s = op_need_f32(g, n, 0)) || (s = op_need_f32(g, n, 1))) return s;
    cuvil_gemm_params p;
    int ndim;
    int64_t dims[CIR_MAX_DIMS], irregular;
    if (!cir_value_fixed(cir_in(g, n, 0)) || !cir_value_fixed(cir_in(g, n, 1))) {
        op_gemm_xparams px;
        const cir_dim *dx[CIR_MAX_DIMS];
        if ((s = op_gemm_x(g, n, &px, &ndim, dx))) return s;
        cir_set_shape_x(cir_out(g, n, 0), CIR_F32, ndim, dx);
        return CUVIL_OK;
    }
    if ((s = matmul_params(g, n, &p, &ndim, dims, &irregular, NULL))) return s;
    cir_set_shape(cir_out(g, n, 0), CIR_F32, ndim, dims);
    return CUVIL_OK;
}

/* Params of either op; for an irregular MatMul broadcast, *offs gets a malloc'd offset table
 * (caller frees) and *n_irregular its length. */
cuvil_status op_gemm_params(cir_graph *g, cir_node *n, cuvil_gemm_params *p, int64_t *n_irregular, int64_t **offs) {
    int ndim;
    int64_t dims[CIR_MAX_DIMS];
    *n_irregular = 0;
    *offs = NULL;
    if (n->kind == CIR_OP_GEMM) return gemm_params(g, n, p);
    cuvil_status s = matmul_params(g, n, p, &ndim, dims, n_irregular, NULL);
    if (s || !*n_irregular) return s;
    *offs = cuvil_malloc(sizeof(int64_t) * 2 * (size_t)*n_irregular);
    if (!*offs) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    return matmul_params(g, n, p, &ndim, dims, n_irregular, *offs);
}

static cuvil_status gemm_fold(cir_graph *g, cir_node *n) {
    cuvil_gemm_params p;
    int64_t nirr, *offs;
    cuvil_status s = op_gemm_params(g, n, &p, &nirr, &offs);
    if (s) return s;
    cir_value *y = cir_out(g, n, 0), *c = cir_in(g, n, 2);
    const float *A = cir_in(g, n, 0)->data, *B = cir_in(g, n, 1)->data;
    if (!cir_value_make_const(g, y)) {
        cuvil_free(offs);
        return g->ctx->status;
    }
    if (!nirr) cuvil_f32_gemm__scalar(&p, A, B, c ? c->data : NULL, y->data);
    for (int64_t i = 0; i < nirr; i++)
        cuvil_f32_gemm__scalar(&p, A + offs[2 * i], B + offs[2 * i + 1], c ? c->data : NULL, (float *)y->data + i * p.M * p.N);
    cuvil_free(offs);
    return CUVIL_OK;
}

static const cir_attr_spec gemm_attrs[] = {
    {"trans_a", CIR_ATTR_INT, 0, 0, NULL, false},
    {"trans_b", CIR_ATTR_INT, 0, 0, NULL, false},
    {"alpha", CIR_ATTR_FLOAT, 0, 1.0f, NULL, false},
    {"beta", CIR_ATTR_FLOAT, 0, 1.0f, NULL, false},
    {"broadcast_c", CIR_ATTR_INT, 1, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_gemm = {"gemm", CIR_OPF_TAKES_ACT | CIR_OPF_SYM_DIMS, 2, 3, 1, 1, gemm_attrs, gemm_infer, gemm_fold, NULL, 0};
const cir_opdef cir_op_matmul = {"matmul", CIR_OPF_TAKES_ACT | CIR_OPF_SYM_DIMS, 2, 3, 1, 1, NULL, matmul_infer, gemm_fold, NULL, 0};
