/* pass_quantize.c -- Cuvil's own int8 quantizer, on the graph: picks the points to quantize and
 * either makes them graph outputs (calibration) or puts QuantizeLinear/DequantizeLinear pairs
 * on them and int8 weights under the chosen nodes, for fold_qdq to fold (quant_int.h says how
 * the two compiles fit together). Runs only when the driver set g->quant. */
#include "ir/ops/ops.h"
#include "passes/passes_int.h"
#include "passes/quant_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


static bool const_f32(const cir_value *v) { return v && cir_is_const(v) && v->dtype == CIR_F32; }

/* A float32 activation (not a constant) that a point may be. */
static bool act_f32(const cir_value *v) { return v && !cir_is_const(v) && v->dtype == CIR_F32 && v->seq_n < 0 && v->ndim >= 0; }

static void note_kept(cuvil_quant_state *st, const cir_node *n, const char *why) {
    st->n_kept++;
    size_t l = strlen(st->kept);
    if (l < sizeof st->kept - 80)
        snprintf(st->kept + l, sizeof st->kept - l, "%s%.40s '%.60s' (%s)", l ? ", " : "", n->src_op ? n->src_op : n->def->name,
                 n->name, why);
}

/* --keep-float NAME|OP: by the node's name, its ONNX op or its CIR op */
static bool keep_matches(const char *k, const cir_node *n) {
    return !strcmp(k, n->name) || (n->src_op && !strcmp(k, n->src_op)) || !strcmp(k, n->def->name);
}

/* A --keep-float that names no live node: a typo would otherwise quantize what it meant. */
static cuvil_status check_keep(cir_graph *g, const cuvil_options *o) {
    for (int i = 0; o && i < o->n_keep_float; i++) {
        bool found = false;
        for (int j = 0; j < g->n_nodes && !found; j++) found = !cir_node_at(g, j)->dead && keep_matches(o->keep_float[i], cir_node_at(g, j));
        if (!found)
            return cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "--keep-float %s: no node has that name or op (node names as the "
                             "model gives them; ops as ONNX names them, e.g. Conv, MatMul, Gemm)", o->keep_float[i]);
    }
    return CUVIL_OK;
}

static bool kept_by_user(const cuvil_options *o, const cir_node *n) {
    for (int i = 0; o && i < o->n_keep_float; i++) {
        if (keep_matches(o->keep_float[i], n)) return true;
    }
    return false;
}

/* Whether n is a convolution, MatMul or Gemm that the integer kernels take with its weights
 * quantized; *axis: the weights' output-channel axis, *M its length. Else NULL, or the reason
 * when n is one of those ops. */
static const char *unquantizable(cir_graph *g, const cir_node *n, int *axis, int64_t *M) {
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1);
    if (!act_f32(x) || !const_f32(w) || n->n_post) return "not float32 activations times constant weights";
    int64_t K;
    if (n->kind == CIR_OP_CONV) {
        if (w->ndim != 4 || !cir_value_fixed(x) || x->ndim != 4) return "not a 2-D convolution of fixed dims";
        *axis = 0, *M = w->dims[0];
        K = cir_numel(w) / (*M ? *M : 1);
    } else if (n->kind == CIR_OP_MATMUL) {
        if (w->ndim != 2 || x->ndim < 2) return "weights not 2-D";
        *axis = 1, *M = w->dims[1], K = w->dims[0];
    } else {
        const cir_value *c = cir_in(g, n, 2);
        if (w->ndim != 2 || x->ndim != 2 || cir_attr_int(n, "trans_a") || cir_attr_float(n, "alpha") != 1.0f ||
            (c && cir_attr_float(n, "beta") != 1.0f))
            return "Gemm with transA, alpha or beta";
        const bool tb = cir_attr_int(n, "trans_b") != 0;
        *axis = tb ? 0 : 1, *M = w->dims[tb ? 0 : 1], K = w->dims[tb ? 1 : 0];
    }
    if (K > CUVIL_QGEMM_K_EXACT || *M <= 0) return "a sum over more products than int32 holds exactly";
    return NULL;
}

/* The value a node's result is quantized at: after the Relu or Clip (constant bounds) that
 * alone reads it, else the result; -1 when that is a graph output (kept float32: the model's
 * outputs keep their precision). */
static int result_point(cir_graph *g, const cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    cir_node *r = cuvil_sole_reader(g, y);
    if (r && !r->region && !r->n_post && cir_in(g, r, 0) == y &&
        (r->kind == CIR_OP_RELU ||
         (r->kind == CIR_OP_CLIP && (!cir_in(g, r, 1) || (const_f32(cir_in(g, r, 1)) && cir_numel(cir_in(g, r, 1)) == 1)) &&
          (!cir_in(g, r, 2) || (const_f32(cir_in(g, r, 2)) && cir_numel(cir_in(g, r, 2)) == 1)))))
        y = cir_out(g, r, 0);
    return act_f32(y) && y->output_index < 0 ? y->id : -1;
}

/* The points in order (value ids into pts, *n of them; is_pt marks them) and the chosen nodes
 * (chosen[node id]). */
static cuvil_status pick(cir_graph *g, cuvil_quant_state *st, int *pts, int *n, uint8_t *is_pt, uint8_t *chosen) {
    *n = 0;
#define ADD_POINT(v)                                        \
    do {                                                    \
        if ((v) >= 0 && !is_pt[v]) is_pt[v] = 1, pts[(*n)++] = (v); \
    } while (0)
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *nd = cir_node_at(g, i);
        if (nd->dead || (nd->kind != CIR_OP_CONV && nd->kind != CIR_OP_MATMUL && nd->kind != CIR_OP_GEMM)) continue;
        int axis;
        int64_t M;
        if (!const_f32(cir_in(g, nd, 1))) continue;   /* (a product of two activations: nothing to quantize) */
        const char *why = nd->region ? "inside an If or Loop" : unquantizable(g, nd, &axis, &M);
        if (!why && kept_by_user(st->o, nd)) why = "--keep-float";
        if (why) {
            note_kept(st, nd, why);
            continue;
        }
        chosen[i] = 1;
        st->n_nodes++;
        cir_value *x = cir_in(g, nd, 0);
        if (x->output_index < 0) ADD_POINT(x->id);
        ADD_POINT(result_point(g, nd));
    }
    /* residual Adds of two points (one shape): their result too, for qlinear_add */
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *nd = cir_node_at(g, i);
        if (nd->dead || nd->kind != CIR_OP_ADD || nd->region || nd->n_in != 2 || nd->n_post || kept_by_user(st->o, nd)) continue;
        cir_value *a = cir_in(g, nd, 0), *b = cir_in(g, nd, 1);
        if (!a || !b || !is_pt[a->id] || !is_pt[b->id] || !cir_value_fixed(a) || !cir_same_dims(a, b) ||
            !cir_same_dims(a, cir_out(g, nd, 0)))
            continue;
        ADD_POINT(result_point(g, nd));
    }
#undef ADD_POINT
    return CUVIL_OK;
}

/* A constant named after v's name and what. */
static int named_const(cir_graph *g, const char *base, const char *what, cir_dtype t, int ndim, const int64_t *dims,
                       const void *data) {
    char name[600];
    snprintf(name, sizeof name, "%.500s:%s", base, what);
    return cir_const_add(g, name, t, ndim, dims, data);
}

/* Inserts kind(in..) -> out at pos and infers it. Returns its id or -1. */
static int insert_node(cir_graph *g, int pos, cir_op_kind kind, const char *name, const char *src_op, int n_in,
                       const int *in, int out) {
    int id = cir_node_insert(g, pos, kind, name, src_op, n_in, in, 1, &out);
    if (id < 0) return -1;
    cir_node *n = cir_node_at(g, id);
    if (n->def->infer(g, n)) return -1;
    cir_val(g, out)->producer = id;
    return id;
}

/* v -> QuantizeLinear -> DequantizeLinear, which every reader of v reads instead. */
static cuvil_status put_qdq(cir_graph *g, int v, const cuvil_qpoint *p) {
    cir_value *x = cir_val(g, v);
    const char *nm = x->name;
    float sc = p->scale;
    uint8_t zp = p->zero_point;
    int s = named_const(g, nm, "scale", CIR_F32, 0, NULL, &sc), z = named_const(g, nm, "zero_point", CIR_U8, 0, NULL, &zp);
    char qn[600], dn[600];
    snprintf(qn, sizeof qn, "%.500s (uint8)", nm);
    snprintf(dn, sizeof dn, "%.500s (dequantized)", nm);
    int q = s < 0 || z < 0 ? -1 : cir_value_add(g, qn, CIR_VAL_ACT), d = q < 0 ? -1 : cir_value_add(g, dn, CIR_VAL_ACT);
    if (d < 0) return g->ctx->status;
    for (int i = 0; i < g->n_nodes; i++) {   /* the readers read the dequantized value */
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) n->in[j] = d;
        for (int j = 0; j < n->n_post; j++)
            if (n->post[j].kind == CIR_POST_ADD && n->post[j].value == v) n->post[j].value = d;
    }
    x = cir_val(g, v);
    const int pos = x->producer >= 0 ? x->producer + 1 : 0, qin[3] = {v, s, z}, din[3] = {q, s, z};
    if (insert_node(g, pos, CIR_OP_QUANTIZE, qn, "QuantizeLinear", 3, qin, q) < 0 ||
        insert_node(g, pos + 1, CIR_OP_DEQUANTIZE, dn, "DequantizeLinear", 3, din, d) < 0)
        return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "quantize: inserting at '%s'", nm);
    return CUVIL_OK;
}

/* One channel's n weights src[k * ss] as int8 symmetric into dst[k * ds] (scale max |w| / 127,
 * 1 when the max is 0 or not finite; half to even, clamped to +-127, NaN 0). Returns the scale. */
static float sym_int8(const float *src, int64_t ss, int64_t n, int8_t *dst, int64_t ds) {
    float mx = 0;
    for (int64_t k = 0; k < n; k++) {
        const float a = fabsf(src[k * ss]);
        if (a > mx) mx = a;
    }
    const float sc = mx > 0 && isfinite(mx) ? mx / 127.0f : 1.0f;
    for (int64_t k = 0; k < n; k++) {
        const float r = nearbyintf(src[k * ss] / sc);
        dst[k * ds] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r == r ? r : 0);
    }
    return sc;
}

/* Node n's weights (input 1) as int8, symmetric per output channel along axis (M channels),
 * through a DequantizeLinear placed before n. */
static cuvil_status quantize_weights(cir_graph *g, int id, int axis, int64_t M) {
    cir_node *n = cir_node_at(g, id);
    const cir_value *w = cir_in(g, n, 1);
    const int64_t cnt = cir_numel(w), inner = axis == 0 ? cnt / M : 1, stride = axis == 0 ? 1 : M;
    const int64_t per = cnt / M;   /* elements per channel */
    float *sc = cuvil_malloc(sizeof(float) * (size_t)M);
    int8_t *q = cuvil_malloc((size_t)cnt), *zp = cuvil_calloc((size_t)M, 1);
    cuvil_status st = CUVIL_OK;
    if (!sc || !q || !zp) st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    const float *f = w->data;
    for (int64_t c = 0; !st && c < M; c++) {   /* channel c: elements c*inner + k (axis 0) or k*M + c (axis 1) */
        const int64_t at = axis == 0 ? c * inner : c, step = axis == 0 ? 1 : stride;
        sc[c] = sym_int8(f + at, step, per, q + at, step);
    }
    int wq = -1, ws = -1, wz = -1, wd = -1;
    if (!st) {
        const char *nm = w->name;
        wq = named_const(g, nm, "int8", CIR_I8, w->ndim, w->dims, q);
        ws = wq < 0 ? -1 : named_const(g, nm, "scale", CIR_F32, 1, &M, sc);
        wz = ws < 0 ? -1 : named_const(g, nm, "zero_point", CIR_I8, 1, &M, zp);
        char dn[600];
        snprintf(dn, sizeof dn, "%.500s (dequantized)", nm);
        wd = wz < 0 ? -1 : cir_value_add(g, dn, CIR_VAL_ACT);
        if (wd < 0) st = g->ctx->status;
    }
    cuvil_free(sc);
    cuvil_free(q);
    cuvil_free(zp);
    if (st) return st;
    const int din[3] = {wq, ws, wz};
    int d = cir_node_insert(g, id, CIR_OP_DEQUANTIZE, cir_val(g, wd)->name, "DequantizeLinear", 3, din, 1, &wd);
    if (d < 0) return g->ctx->status;
    cuvil_attr a = {.name = "axis", .type = CUVIL_ATTR_INT, .i = axis};
    cir_node *dq = cir_node_at(g, d);
    if ((st = cir_node_set_attr(g, dq, &a)) || (st = dq->def->infer(g, dq))) return st;
    cir_val(g, wd)->producer = d;
    cir_node_at(g, d + 1)->in[1] = wd;   /* n moved up one */
    return CUVIL_OK;
}

#define INT4_BLOCK 32

/* --quantize int4-weights: MatMul / Gemm n (constant 2-D weights, a's last dim K) becomes
 * matmul_nbits: per column n and block b of 32 along K, scale (max - min) / 15 and zero point
 * rint(-min / scale) of the block's range with 0 in it, q = clamp(rint(w / scale) + zp, 0, 15);
 * a Gemm's bias an Add after it. Returns the reason it is left in float32, or NULL. */
static const char *int4_weights(cir_graph *g, int id, cuvil_status *st) {
    cir_node *n = cir_node_at(g, id);
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1), *c = n->kind == CIR_OP_GEMM ? cir_in(g, n, 2) : NULL;
    *st = CUVIL_OK;
    if (!act_f32(x) || !const_f32(w) || w->ndim != 2 || n->n_post || x->ndim < 1) return "not float32 activations times 2-D constant weights";
    const bool tb = n->kind == CIR_OP_GEMM && cir_attr_int(n, "trans_b");
    if (n->kind == CIR_OP_GEMM && (cir_attr_int(n, "trans_a") || cir_attr_float(n, "alpha") != 1.0f || x->ndim != 2 ||
                                   (c && cir_attr_float(n, "beta") != 1.0f)))
        return "Gemm with transA, alpha or beta";
    const int64_t K = w->dims[tb ? 1 : 0], N = w->dims[tb ? 0 : 1], nb = (K + INT4_BLOCK - 1) / INT4_BLOCK;
    if (x->dx[x->ndim - 1] || x->dims[x->ndim - 1] != K) return "its input's last dim is not the weights' K";
    if (c && !(c->ndim == 1 && c->dims[0] == N) && !(c->ndim == 2 && c->dims[0] == 1 && c->dims[1] == N))
        return "a Gemm bias that is not one value per column";
    const float *f = w->data;
    uint8_t *q = cuvil_calloc((size_t)(N * nb * INT4_BLOCK / 2), 1);
    float *sc = cuvil_malloc(sizeof(float) * (size_t)(N * nb)), *zs = cuvil_malloc(sizeof(float) * (size_t)(N * nb));
    if (!q || !sc || !zs) {
        cuvil_free(q), cuvil_free(sc), cuvil_free(zs);
        *st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t col = 0; col < N; col++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t k0 = b * INT4_BLOCK, k1 = K - k0 < INT4_BLOCK ? K : k0 + INT4_BLOCK;
            float mn = 0, mx = 0;
            for (int64_t k = k0; k < k1; k++) {
                const float v = f[tb ? col * K + k : k * N + col];
                if (v < mn) mn = v;
                if (v > mx) mx = v;
            }
            float s = (mx - mn) / 15.0f;
            if (!(s > 0) || !isfinite(s)) s = 1.0f;
            float z = nearbyintf(-mn / s);
            z = z < 0 ? 0 : z > 15 ? 15 : z;
            sc[col * nb + b] = s, zs[col * nb + b] = z * s;
            for (int64_t k = k0; k < k1; k++) {
                float r = nearbyintf(f[tb ? col * K + k : k * N + col] / s) + z;
                const unsigned v = r != r ? (unsigned)z : r < 0 ? 0u : r > 15 ? 15u : (unsigned)r;
                q[col * (nb * INT4_BLOCK / 2) + k / 2] |= (uint8_t)(v << ((k & 1) * 4));
            }
        }
    const int64_t qd[2] = {N, nb * INT4_BLOCK / 2}, sd[2] = {N, nb};
    const char *nm = w->name;
    int wq = named_const(g, nm, "int4", CIR_U8, 2, qd, q), ws = wq < 0 ? -1 : named_const(g, nm, "scale", CIR_F32, 2, sd, sc);
    int wz = ws < 0 ? -1 : named_const(g, nm, "zero_point_scaled", CIR_F32, 2, sd, zs);
    cuvil_free(q), cuvil_free(sc), cuvil_free(zs);
    if (wz < 0) {
        *st = g->ctx->status;
        return NULL;
    }
    n = cir_node_at(g, id);
    int y = n->out[0], yb = -1;
    if (c) {   /* the bias: an Add after the product, into the node's output */
        char bn[600];
        snprintf(bn, sizeof bn, "%.500s (without bias)", cir_val(g, y)->name);
        if ((yb = cir_value_add(g, bn, CIR_VAL_ACT)) < 0) {
            *st = g->ctx->status;
            return NULL;
        }
    }
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 5);
    if (!in) {
        *st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    in[0] = n->in[0], in[1] = wq, in[2] = ws, in[3] = wz, in[4] = -1;
    const int cv = c ? c->id : -1;
    cir_node_rekind(n, CIR_OP_MATMUL_NBITS);
    n->in = in;
    n->n_in = 4;
    const cuvil_attr at[3] = {{.name = "K", .type = CUVIL_ATTR_INT, .i = K}, {.name = "N", .type = CUVIL_ATTR_INT, .i = N},
                              {.name = "block_size", .type = CUVIL_ATTR_INT, .i = INT4_BLOCK}};
    for (int k = 0; k < 3 && !*st; k++) *st = cir_node_set_attr(g, n, &at[k]);
    if (!*st && c) {
        n->out[0] = yb;
        *st = n->def->infer(g, n);
        cir_val(g, yb)->producer = id;
        if (!*st) {
            const int ain[2] = {yb, cv};
            int a = cir_node_insert(g, id + 1, CIR_OP_ADD, cir_node_at(g, id)->name, "Gemm", 2, ain, 1, &y);
            if (a < 0) *st = g->ctx->status;
            else if (!(*st = cir_node_at(g, a)->def->infer(g, cir_node_at(g, a)))) cir_val(g, y)->producer = a;
        }
    } else if (!*st) {
        *st = n->def->infer(g, n);
    }
    return NULL;
}

/* LSTM node id on 8-bit weights (rnn quant 1, as com.microsoft DynamicQuantizeLSTM): W [D, 4H, I]
 * and R [D, 4H, H] per gate row symmetric int8 (scale max |w| / 127, rounded to nearest even),
 * stored in the kernel's [D, I, 4H] and [D, H, 4H]; X and h are quantized as the model runs (no
 * calibration). NULL when done (or *st set), else why not. */
static const char *lstm_weights(cir_graph *g, int id, cuvil_status *st) {
    cir_node *n = cir_node_at(g, id);
    cir_value *w = cir_in(g, n, 1), *r = cir_in(g, n, 2);
    if (cir_attr_int(n, "quant")) return NULL;   /* (8-bit already: a DynamicQuantizeLSTM) */
    if (cir_attr_int(n, "cell") != CUVIL_CELL_LSTM) return "GRU and RNN stay float32";
    if (cir_attr_int(n, "layout")) return "layout 1";
    if (!const_f32(w) || !const_f32(r) || !act_f32(cir_in(g, n, 0))) return "not float32 input times constant weights";
    op_rnn a;
    if ((*st = op_rnn_sizes(g, n, &a))) return NULL;
    const int64_t D = a.dirs, GH = 4 * a.hidden, I = a.input, H = a.hidden;
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 13);
    int8_t *wq = cuvil_malloc((size_t)(D * I * GH) + 1), *rq = cuvil_malloc((size_t)(D * H * GH) + 1);
    float *sc = cuvil_malloc(sizeof(float) * (size_t)(2 * D * GH) + 1);
    if (!in || !wq || !rq || !sc) {
        cuvil_free(wq), cuvil_free(rq), cuvil_free(sc);
        *st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int which = 0; which < 2; which++) {
        const float *src = which ? r->data : w->data;
        const int64_t K = which ? H : I;
        int8_t *q = which ? rq : wq;
        float *s = sc + which * D * GH;
        for (int64_t d = 0; d < D; d++)
            for (int64_t row = 0; row < GH; row++)   /* a gate row: [d, row, 0..K) into [d, 0..K, row] */
                s[d * GH + row] = sym_int8(src + (d * GH + row) * K, 1, K, q + d * K * GH + row, GH);
    }
    const int64_t wd[3] = {D, I, GH}, rd[3] = {D, H, GH}, sd[2] = {D, GH};
    const int wi = named_const(g, n->name, "W_int8", CIR_I8, 3, wd, wq), ri = named_const(g, n->name, "R_int8", CIR_I8, 3, rd, rq);
    const int wsi = named_const(g, n->name, "W_scale", CIR_F32, 2, sd, sc), rsi = named_const(g, n->name, "R_scale", CIR_F32, 2, sd,
                                                                                              sc + D * GH);
    cuvil_free(wq), cuvil_free(rq), cuvil_free(sc);
    if (wi < 0 || ri < 0 || wsi < 0 || rsi < 0) {
        *st = g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int k = 0; k < 12; k++) in[k] = k < n->n_in ? n->in[k] : -1;
    in[1] = wi, in[2] = ri, in[8] = wsi, in[9] = -1, in[10] = rsi, in[11] = -1;
    n->in = in;
    n->n_in = 11;
    const cuvil_attr q = {.name = "quant", .type = CUVIL_ATTR_INT, .i = 1};
    if (!(*st = cir_node_set_attr(g, n, &q))) *st = n->def->infer(g, n);
    return NULL;
}

cuvil_status cuvil_pass_quantize(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cuvil_quant_state *st = g->quant;
    if (!st) return CUVIL_OK;
    for (int i = 0; i < g->n_nodes; i++) {
        const cir_node *n = cir_node_at(g, i);
        if (!n->dead && (n->kind == CIR_OP_IF || n->kind == CIR_OP_LOOP))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "--quantize takes models without If and Loop for now");
    }
    st->n_nodes = st->n_kept = 0;
    st->kept[0] = 0;
    cuvil_status ks = check_keep(g, st->o);
    if (ks) return ks;
    if (st->mode == QUANT_INT4W) {   /* from the last node back: an inserted Add moves only the nodes after it */
        for (int i = g->n_nodes - 1; i >= 0; i--) {
            cir_node *n = cir_node_at(g, i);
            if (n->dead || (n->kind != CIR_OP_MATMUL && n->kind != CIR_OP_GEMM)) continue;
            cuvil_status s = CUVIL_OK;
            if (!const_f32(cir_in(g, n, 1))) continue;   /* (a product of two activations: nothing to quantize) */
            const char *why = n->region ? "inside an If or Loop" : kept_by_user(st->o, n) ? "--keep-float" : int4_weights(g, i, &s);
            if (s) return s;
            if (why) note_kept(st, cir_node_at(g, i), why);
            else st->n_nodes++;
        }
        cir_graph_count_uses(g);
        return CUVIL_OK;
    }
    int *pts = cuvil_malloc(sizeof(int) * ((size_t)g->n_values + 1));
    uint8_t *is_pt = cuvil_calloc((size_t)g->n_values + 1, 1), *chosen = cuvil_calloc((size_t)g->n_nodes + 1, 1);
    int n_pts = 0;
    cuvil_status s = !pts || !is_pt || !chosen ? cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory")
                                               : pick(g, st, pts, &n_pts, is_pt, chosen);
    if (!s && st->mode == QUANT_CALIBRATE) {   /* every point a graph output, after the model's own */
        st->n_model_outputs = g->n_outputs;
        st->names = cuvil_calloc((size_t)n_pts + 1, sizeof(char *));
        if (!st->names) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (int k = 0; !s && k < n_pts; k++) {
            if (!(st->names[k] = cuvil_strdup(cir_val(g, pts[k])->name))) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
            else st->n_names = k + 1;
            if (!s) s = cir_graph_add_output(g, pts[k]);
        }
    } else if (!s) {
        if (n_pts != st->n_pts)
            s = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "--quantize: %d points now, %d when calibrating", n_pts, st->n_pts);
        for (int k = 0; !s && k < n_pts; k++)
            if (strcmp(cir_val(g, pts[k])->name, st->pts[k].name))
                s = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "--quantize: point %d is '%s' now, '%s' when calibrating", k,
                              cir_val(g, pts[k])->name, st->pts[k].name);
        /* the weights first (node ids move as nodes go in: from the last node back), then the points */
        for (int i = g->n_nodes - 1; !s && i >= 0; i--) {
            if (!chosen[i]) continue;
            int axis;
            int64_t M;
            if (unquantizable(g, cir_node_at(g, i), &axis, &M)) continue;   /* (cannot happen: picked above) */
            s = quantize_weights(g, i, axis, M);
            st->n_weights += !s;
        }
        for (int k = 0; !s && k < n_pts; k++) s = put_qdq(g, pts[k], &st->pts[k]);
        for (int i = 0; !s && i < g->n_nodes; i++) {   /* LSTMs: 8-bit weights, X and h quantized as they run */
            cir_node *n = cir_node_at(g, i);
            if (n->dead || n->kind != CIR_OP_RNN) continue;
            const char *why = n->region ? "inside an If or Loop" : kept_by_user(st->o, n) ? "--keep-float" : lstm_weights(g, i, &s);
            if (!s && why) note_kept(st, n, why);
            else if (!s && cir_attr_int(n, "quant")) st->n_lstm++;
        }
        if (!s) cir_graph_count_uses(g);
    }
    cuvil_free(pts);
    cuvil_free(is_pt);
    cuvil_free(chosen);
    return s;
}
