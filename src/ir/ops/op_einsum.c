/* op_einsum.c -- einsum (x0, x1, ...; equation): ONNX Einsum as numpy computes it, on the
 * naive kernel cuvil_einsum_t, or on the GEMM for a float32 contraction of two operands
 * (op_einsum_gemm, below). The equation is an INTS attribute holding its characters (the
 * frontend checks them: letters, ',', "->", "...", spaces), so no text of the model is kept
 * as a string. Repeated labels in one term take the diagonal; labels absent from the output
 * are summed; "..." stands for the same broadcast run of dims in every term; a dim of 1
 * broadcasts against a label's size (as numpy). Implicit output: the ellipsis, then the
 * labels used once, in character order. Fixed dims; float32/64 and 32/64-bit integers. */
#include "ir/ops/ops.h"

#include <string.h>

enum { ELL = 52 };   /* label ids: 'A'..'Z' 0..25, 'a'..'z' 26..51; ellipsis dims after them */

static int label_id(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + c - 'a';
    return -1;
}

/* One term: its labels (ELL for the ellipsis) in order. */
typedef struct term {
    int n, lab[CIR_MAX_DIMS + 1];
    bool ell;
} term;

/* Parses eq[from, to) into t; false with a message in why. */
static bool parse_term(const int64_t *eq, int from, int to, term *t, char *why, size_t len) {
    memset(t, 0, sizeof *t);
    for (int i = from; i < to; i++) {
        int64_t c = eq[i];
        if (c == ' ') continue;
        if (c == '.') {
            if (t->ell || i + 2 >= to || eq[i + 1] != '.' || eq[i + 2] != '.') {
                snprintf(why, len, t->ell ? "a term has two ellipses" : "a '.' outside \"...\"");
                return false;
            }
            t->ell = true;
            i += 2;
            c = -1;   /* the ellipsis's slot, below */
        }
        int id = c < 0 ? ELL : label_id((int)c);
        if (id < 0) {
            snprintf(why, len, "character %lld is not a label", (long long)c);
            return false;
        }
        if (t->n > CIR_MAX_DIMS) {
            snprintf(why, len, "a term has more than %d labels", CIR_MAX_DIMS);
            return false;
        }
        t->lab[t->n++] = id;
    }
    return true;
}

cuvil_status op_einsum_plan(cir_graph *g, cir_node *n, op_einsum *p) {
    memset(p, 0, sizeof *p);
    const int64_t *eq;
    int len = cir_attr_ints(n, "equation", &eq);
    if (len <= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "the equation is empty");
    int arrow = -1;
    for (int i = 0; i + 1 < len; i++)
        if (eq[i] == '-' && eq[i + 1] == '>') {
            if (arrow >= 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "the equation has two \"->\"");
            arrow = i;
        }
    int lhs_end = arrow >= 0 ? arrow : len;
    term terms[CUVIL_EINSUM_MAX_IN], out;
    int nt = 0, start = 0;
    char why[96] = "";
    for (int i = 0; i <= lhs_end; i++) {
        if (i < lhs_end && eq[i] != ',') continue;
        if (nt == CUVIL_EINSUM_MAX_IN)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "more than %d operands", CUVIL_EINSUM_MAX_IN);
        if (!parse_term(eq, start, i, &terms[nt++], why, sizeof why))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "the equation is malformed: %s", why);
        start = i + 1;
    }
    if (nt != n->n_in)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "the equation has %d terms for %d inputs", nt, n->n_in);
    /* every label's size; the ellipsis's run, broadcast right-aligned */
    int64_t size[ELL + CIR_MAX_DIMS];
    int count[ELL] = {0};
    for (int l = 0; l < ELL + CIR_MAX_DIMS; l++) size[l] = -1;
    int ell_rank = 0;
    cir_dtype t = CIR_UNDEF;
    for (int k = 0; k < nt; k++) {
        cir_value *x = cir_in(g, n, k);
        if (!x) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is missing", k);
        if (k == 0) t = x->dtype;
        else if (x->dtype != t)
            return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", cir_in(g, n, 0)->name,
                                cir_dtype_name(t), x->name, cir_dtype_name(x->dtype));
        int named = terms[k].n - (terms[k].ell ? 1 : 0), er = x->ndim - named;
        if (er < 0 || (!terms[k].ell && er != 0))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' has rank %d; its term names %d dims%s", x->name, x->ndim,
                                named, terms[k].ell ? " and an ellipsis" : "");
        if (er > ell_rank) ell_rank = er;
    }
    for (int k = 0; k < nt; k++) {
        cir_value *x = cir_in(g, n, k);
        int named = terms[k].n - (terms[k].ell ? 1 : 0), er = x->ndim - named, d = 0;
        for (int j = 0; j < terms[k].n; j++) {
            int l = terms[k].lab[j], reps = l == ELL ? er : 1;
            for (int r = 0; r < reps; r++, d++) {
                int id = l == ELL ? ELL + ell_rank - er + r : l;
                int64_t v = x->dims[d];
                if (l != ELL) count[l]++;
                if (size[id] < 0 || size[id] == 1) size[id] = size[id] == 1 && v == 1 ? 1 : v;
                else if (v != 1 && v != size[id])
                    return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' dim %d is %lld where the label has %lld", x->name,
                                        d, (long long)v, (long long)size[id]);
            }
        }
    }
    for (int r = 0; r < ell_rank; r++)
        if (size[ELL + r] < 0) size[ELL + r] = 1;
    /* the output's labels */
    bool any_ell = false;
    for (int k = 0; k < nt; k++) any_ell |= terms[k].ell;
    if (arrow >= 0) {
        if (!parse_term(eq, arrow + 2, len, &out, why, sizeof why))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "the equation's output is malformed: %s", why);
        for (int j = 0; j < out.n; j++) {
            int l = out.lab[j];
            if (l == ELL) continue;
            if (!count[l]) return cir_node_err(g, n, CUVIL_ERR_MODEL, "output label %c is in no input", l < 26 ? 'A' + l : 'a' + l - 26);
            for (int i = 0; i < j; i++)
                if (out.lab[i] == l) return cir_node_err(g, n, CUVIL_ERR_MODEL, "output label %c appears twice", l < 26 ? 'A' + l : 'a' + l - 26);
        }
        if (!out.ell && ell_rank > 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "the inputs' \"...\" covers %d dims the output does not name", ell_rank);
    } else {
        memset(&out, 0, sizeof out);
        if (any_ell) out.lab[out.n++] = ELL, out.ell = true;
        for (int l = 0; l < ELL; l++)
            if (count[l] == 1) {
                if (out.n > CIR_MAX_DIMS) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the output has too many dims");
                out.lab[out.n++] = l;
            }
    }
    /* the loop's labels: the output's, in its order, then the summed ones */
    int lab[ELL + CIR_MAX_DIMS], nl = 0;
    bool used[ELL + CIR_MAX_DIMS] = {false};
    p->out_rank = 0;
    for (int j = 0; j < out.n; j++) {
        int reps = out.lab[j] == ELL ? ell_rank : 1;
        for (int r = 0; r < reps; r++) {
            int id = out.lab[j] == ELL ? ELL + r : out.lab[j];
            if (p->out_rank == CIR_MAX_DIMS) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the output has too many dims");
            p->out_dims[p->out_rank++] = size[id];
            lab[nl++] = id;
            used[id] = true;
        }
    }
    p->n_out_lab = nl;
    for (int l = 0; l < ELL; l++)
        if (count[l] && !used[l]) lab[nl++] = l;
    if (nl > CUVIL_EINSUM_MAX_LAB) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "more than %d labels", CUVIL_EINSUM_MAX_LAB);
    p->n_lab = nl;
    p->n_in = nt;
    p->dtype = t;
    bool ovf = false;
    int64_t work = 1;   /* the naive loop's iterations: every label's size multiplied, bounded (2^40) */
    for (int i = 0; i < nl; i++) {
        p->sizes[i] = size[lab[i]];
        work = cuvil_i64_mul(&ovf, work, p->sizes[i]);
    }
    if (ovf || work > ((int64_t)1 << 40))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "its loop over every label's values is more than 2^40 steps");
    /* each operand's stride per loop label: the sum over its dims with that label (the
     * diagonal of a repeated one), 0 where it lacks the label or has a broadcast 1 */
    for (int k = 0; k < nt; k++) {
        cir_value *x = cir_in(g, n, k);
        int named = terms[k].n - (terms[k].ell ? 1 : 0), er = x->ndim - named, d = 0;
        int64_t st[CIR_MAX_DIMS], acc = 1;
        for (int i = x->ndim - 1; i >= 0; i--) st[i] = acc, acc *= x->dims[i];
        for (int j = 0; j < terms[k].n; j++) {
            int l = terms[k].lab[j], reps = l == ELL ? er : 1;
            for (int r = 0; r < reps; r++, d++) {
                int id = l == ELL ? ELL + ell_rank - er + r : l;
                if (x->dims[d] == 1 && size[id] != 1) continue;
                for (int i = 0; i < nl; i++)
                    if (lab[i] == id) p->strides[k * CUVIL_EINSUM_MAX_LAB + i] += st[d];
            }
        }
    }
    return CUVIL_OK;
}

/* ===== Einsum as a GEMM ====================================================================
 * A float32 contraction of two operands is C[batch, m, n] = sum_k A[batch, m, k] B[batch, k, n]
 * once its labels are grouped by where they occur: in both inputs and the output (batch), in
 * the first input and the output (m), in the second and the output (n), in both inputs only
 * (k). A group of several labels is one dim when its labels nest in every operand that has
 * them (outer stride = inner stride x inner size), so that the GEMM reads the operands in
 * place with one row stride each; a batch group that does not nest becomes a table of offsets.
 * Anything else (a label summed in one input only, an output label broadcast in both, a group
 * that does not nest, an operand whose rows and columns are both strided) keeps the naive
 * loop. */
typedef struct ein_group {
    int64_t size;
    int64_t st[3];   /* stride in A, B, C of the group's innermost label */
} ein_group;

/* Merges the labels lab[0..n) (strides st[which][l]) into g; false if they do not nest. */
static bool ein_merge(const op_einsum *p, const int *lab, int n, const int64_t (*st)[CUVIL_EINSUM_MAX_LAB],
                      const bool *uses, ein_group *gr) {
    int order[CUVIL_EINSUM_MAX_LAB];
    memcpy(order, lab, sizeof(int) * (size_t)n);
    /* outermost first: by the largest stride of any operand that has the label */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            int64_t a = 0, b = 0;
            for (int w = 0; w < 3; w++)
                if (uses[w]) {
                    if (st[w][order[j - 1]] > a) a = st[w][order[j - 1]];
                    if (st[w][order[j]] > b) b = st[w][order[j]];
                }
            if (a >= b) break;
            const int t = order[j - 1];
            order[j - 1] = order[j];
            order[j] = t;
        }
    gr->size = 1;
    for (int w = 0; w < 3; w++) gr->st[w] = 0;
    for (int i = 0; i < n; i++) {
        const int l = order[i];
        for (int w = 0; w < 3 && i > 0; w++)
            if (uses[w] && st[w][order[i - 1]] != st[w][l] * p->sizes[l]) return false;
        gr->size *= p->sizes[l];
    }
    if (n > 0)
        for (int w = 0; w < 3; w++) gr->st[w] = uses[w] ? st[w][order[n - 1]] : 0;
    return true;
}

bool op_einsum_gemm(const op_einsum *p, op_einsum_gemm_plan *q) {
    memset(q, 0, sizeof *q);
    if (p->dtype != CIR_F32 || p->n_in != 2) return false;
    int64_t st[3][CUVIL_EINSUM_MAX_LAB] = {{0}};
    int64_t acc = 1;
    for (int l = p->n_out_lab - 1; l >= 0; l--) st[2][l] = acc, acc *= p->sizes[l];   /* C is dense, in output order */
    int grp[4][CUVIL_EINSUM_MAX_LAB], ng[4] = {0};   /* batch, m, n, k */
    for (int l = 0; l < p->n_lab; l++) {
        st[0][l] = p->strides[l];
        st[1][l] = p->strides[CUVIL_EINSUM_MAX_LAB + l];
        if (p->sizes[l] == 0) return false;   /* (an empty product: the loop's) */
        if (p->sizes[l] == 1) continue;
        const bool a = st[0][l] != 0, b = st[1][l] != 0, out = l < p->n_out_lab;
        const int which = out ? (a && b ? 0 : a ? 1 : b ? 2 : -1) : (a && b ? 3 : -1);
        if (which < 0) return false;
        grp[which][ng[which]++] = l;
    }
    static const bool uses[4][3] = {{true, true, true}, {true, false, true}, {false, true, true}, {true, true, false}};
    ein_group m, n, k;
    if (!ein_merge(p, grp[1], ng[1], (const int64_t (*)[CUVIL_EINSUM_MAX_LAB])st, uses[1], &m) ||
        !ein_merge(p, grp[2], ng[2], (const int64_t (*)[CUVIL_EINSUM_MAX_LAB])st, uses[2], &n) ||
        !ein_merge(p, grp[3], ng[3], (const int64_t (*)[CUVIL_EINSUM_MAX_LAB])st, uses[3], &k))
        return false;
    /* each operand's layout: rows or columns contiguous (a dim of 1 has either) */
    const bool a_rows = k.size == 1 || k.st[0] == 1, a_cols = m.size == 1 || m.st[0] == 1;
    const bool b_rows = n.size == 1 || n.st[1] == 1, b_cols = k.size == 1 || k.st[1] == 1;
    const bool c_rows = n.size == 1 || n.st[2] == 1, c_cols = m.size == 1 || m.st[2] == 1;
    if (!(a_rows || a_cols) || !(b_rows || b_cols) || !(c_rows || c_cols)) return false;
    cuvil_gemm_params *g = &q->p;
    g->alpha = 1.0f;
    g->batch = 1;
    /* C[m, n] row-major, or C^T[n, m] = B'^T A'^T when C's columns are the contiguous ones */
    q->swap = !c_rows;
    const ein_group *ra = q->swap ? &n : &m, *rb = q->swap ? &m : &n;   /* rows, columns of the product */
    const int ia = q->swap ? 1 : 0, ib = q->swap ? 0 : 1;              /* operand read as A, as B */
    const bool ra_rows = q->swap ? b_cols : a_rows, rb_rows = q->swap ? a_cols : b_rows;
    g->M = ra->size;
    g->N = rb->size;
    g->K = k.size;
    g->ldc = g->M == 1 ? g->N : ra->st[2];
    /* A'[i, kk] at ra->st[ia] i + k.st[ia] kk: row-major with lda = its row stride, else transposed */
    g->trans_a = !ra_rows;
    g->lda = g->trans_a ? (g->K == 1 ? g->M : k.st[ia]) : (g->M == 1 ? g->K : ra->st[ia]);
    /* B'[kk, j] at k.st[ib] kk + rb->st[ib] j */
    g->trans_b = !rb_rows;
    g->ldb = g->trans_b ? (g->N == 1 ? g->K : rb->st[ib]) : (g->K == 1 ? g->N : k.st[ib]);
    /* the batch: one strided run, or a table */
    ein_group b;
    if (ein_merge(p, grp[0], ng[0], (const int64_t (*)[CUVIL_EINSUM_MAX_LAB])st, uses[0], &b)) {
        g->batch = b.size;
        g->a_bstride = b.st[ia];
        g->b_bstride = b.st[ib];
        g->c_bstride = b.st[2];
        return true;
    }
    int64_t items = 1;
    for (int i = 0; i < ng[0]; i++) items *= p->sizes[grp[0][i]];
    if (items > 65536) return false;
    q->n_items = items;
    q->ia = ia;
    q->ib = ib;
    q->n_batch_lab = ng[0];
    for (int i = 0; i < ng[0]; i++) q->batch_lab[i] = grp[0][i];
    return true;
}

void op_einsum_gemm_offsets(const op_einsum *p, const op_einsum_gemm_plan *q, int64_t *offs) {
    int64_t acc = 1, cst[CUVIL_EINSUM_MAX_LAB];
    for (int l = p->n_out_lab - 1; l >= 0; l--) cst[l] = acc, acc *= p->sizes[l];
    for (int64_t it = 0; it < q->n_items; it++) {
        int64_t r = it, o[3] = {0, 0, 0};
        for (int i = q->n_batch_lab - 1; i >= 0; i--) {
            const int l = q->batch_lab[i];
            const int64_t idx = r % p->sizes[l];
            r /= p->sizes[l];
            o[0] += idx * p->strides[q->ia * CUVIL_EINSUM_MAX_LAB + l];
            o[1] += idx * p->strides[q->ib * CUVIL_EINSUM_MAX_LAB + l];
            o[2] += idx * cst[l];
        }
        for (int w = 0; w < 3; w++) offs[3 * it + w] = o[w];
    }
}

static cuvil_status einsum_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, CUVIL_EINSUM_MAX_IN, 1, 1);
    if (s) return s;
    for (int k = 0; k < n->n_in; k++) {
        cir_value *x = cir_in(g, n, k);
        if (x && !cir_value_fixed(x))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has symbolic dims; Einsum takes fixed dims", x->name);
        if (x && x->dtype != CIR_F32 && x->dtype != CIR_F64 && x->dtype != CIR_I32 && x->dtype != CIR_I64 &&
            x->dtype != CIR_U32 && x->dtype != CIR_U64) {
            g->half_input |= x->dtype == CIR_F16 || x->dtype == CIR_BF16;   /* computed in float32 between casts */
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; Einsum takes float32/64 and 32/64-bit "
                                "integers", x->name, cir_dtype_name(x->dtype));
        }
    }
    op_einsum p;
    if ((s = op_einsum_plan(g, n, &p))) return s;
    cir_set_shape(cir_out(g, n, 0), p.dtype, p.out_rank, p.out_dims);
    return CUVIL_OK;
}

static const cir_attr_spec einsum_attrs[] = {
    {"equation", CIR_ATTR_INTS, 0, 0, NULL, true},
    CIR_ATTR_END,
};
const cir_opdef cir_op_einsum = {"einsum", 0, 1, CUVIL_EINSUM_MAX_IN, 1, 1, einsum_attrs, einsum_infer, NULL, NULL, 0};
