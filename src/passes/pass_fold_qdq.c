/* pass_fold_qdq.c -- a QDQ model's float Conv / MatMul / Gemm between DequantizeLinear and
 * QuantizeLinear nodes becomes one integer node (qlinear_conv, qlinear_matmul) on the integer
 * GEMM, as ONNX Runtime runs them:
 *
 *   DQ(xq, xs, xz) --\
 *   DQ(wq, ws, wz) ---> conv / matmul / gemm [-> relu | clip] [-> Q(ys, yz)]
 *   DQ(bq, bs) ------/   (conv's and gemm's bias: DQ of int32, or float32)
 *
 * x per tensor; w constant, per tensor or per output channel (conv: axis 0; matmul's [K, N]:
 * axis 1; gemm's transposed [N, K]: axis 0); every scale and zero point a constant. With a
 * QuantizeLinear (per tensor) as the result's only reader the node writes Q's 8-bit output
 * (a Relu or Clip with constant bounds between them becomes the clamp of the quantized value,
 * exactly where y_scale > 0: rounding is monotonic); otherwise it writes the float result, x_scale * w_scale *
 * (acc + bias). The bias becomes int32 in units of x_scale * w_scale: DQ(bq, bs) whose scale is
 * that product (as ONNX Runtime's quantizer writes it) is bq itself; any other bias is rounded
 * to those units (an error of at most half a unit, x_scale * w_scale / 2); a bias that could take
 * the int32 sum out of range does not fold. What does not match
 * keeps running in float, DequantizeLinear and QuantizeLinear as nodes of their own; the fold
 * needs K <= CUVIL_QGEMM_K_EXACT (the int32 sum exact). An Add of two DequantizeLinear outputs
 * of one shape read by a QuantizeLinear (a residual connection) becomes qlinear_add, computed
 * in y's units as ONNX Runtime's QLinearAdd (the float form's rounding may differ from it at a
 * tie: one step). Runs before constant folding, which would turn the weights' DequantizeLinear
 * into float constants. */
#include "passes/passes_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool i8t(cir_dtype t) { return t == CIR_U8 || t == CIR_I8; }

static cir_node *producer(cir_graph *g, const cir_value *v, int region) {
    if (!v || v->producer < 0) return NULL;
    cir_node *p = cir_node_at(g, v->producer);
    return p->dead || p->region != region ? NULL : p;
}


static bool const_f32(const cir_value *v) { return v && cir_is_const(v) && v->dtype == CIR_F32; }

/* A (de)quantize node's scale and zero point: constants, float32 scale, the zero point 8-bit
 * of type t, `cnt` values each (1, or the axis' length with the node's axis == axis). */
static bool q_params(cir_graph *g, cir_node *d, cir_dtype t, int64_t cnt, int axis, int rank) {
    cir_value *s = cir_in(g, d, 1), *z = cir_in(g, d, 2);
    if (!const_f32(s) || cir_numel(s) != cnt || cir_attr_int(d, "block_size") > 0) return false;
    if (z && (!cir_is_const(z) || z->dtype != t || cir_numel(z) != cnt)) return false;
    if (cnt == 1 && s->ndim <= 1) return true;
    int64_t ax = cir_attr_int(d, "axis");
    return s->ndim == 1 && (ax == axis || ax + rank == axis);
}

/* DQ of an 8-bit tensor per tensor into float32 */
static bool dq_tensor(cir_graph *g, cir_node *d) {
    return d && d->kind == CIR_OP_DEQUANTIZE && !d->n_post && i8t(cir_in(g, d, 0)->dtype) &&
           cir_out(g, d, 0)->dtype == CIR_F32 && q_params(g, d, cir_in(g, d, 0)->dtype, 1, 0, 0);
}

/* DQ of constant 8-bit weights, per tensor or along axis (of len) */
static bool dq_weight(cir_graph *g, cir_node *d, int axis, int64_t len) {
    if (!d || d->kind != CIR_OP_DEQUANTIZE || d->n_post) return false;
    cir_value *w = cir_in(g, d, 0);
    if (!cir_is_const(w) || !i8t(w->dtype) || cir_out(g, d, 0)->dtype != CIR_F32) return false;
    return q_params(g, d, w->dtype, 1, 0, w->ndim) || q_params(g, d, w->dtype, len, axis, w->ndim);
}

/* Q per tensor from float32 to 8 bits, its type its zero point's (uint8 without one: an
 * output_dtype with no zero point stays a node of its own) */
static bool q_tensor(cir_graph *g, cir_node *q) {
    if (!q || q->kind != CIR_OP_QUANTIZE || q->n_post || cir_in(g, q, 0)->dtype != CIR_F32) return false;
    cir_value *z = cir_in(g, q, 2);
    const cir_dtype t = cir_out(g, q, 0)->dtype;
    return i8t(t) && t == (z ? z->dtype : CIR_U8) && q_params(g, q, t, 1, 0, 0);
}

/* A Relu, or a Clip with constant bounds, into [*lo, *hi]. */
static bool clamp_of(cir_graph *g, cir_node *a, float *lo, float *hi) {
    if (a->n_post) return false;
    if (a->kind == CIR_OP_RELU) {
        *lo = 0, *hi = INFINITY;
        return true;
    }
    if (a->kind != CIR_OP_CLIP) return false;
    cir_value *l = cir_in(g, a, 1), *h = cir_in(g, a, 2);
    if ((l && (!const_f32(l) || cir_numel(l) != 1)) || (h && (!const_f32(h) || cir_numel(h) != 1))) return false;
    *lo = l ? (float)cir_const_f64(l, 0) : -INFINITY;
    *hi = h ? (float)cir_const_f64(h, 0) : INFINITY;
    return *lo <= *hi;
}

/* The bias as int32 in units of x_scale * w_scale[i] (a new constant), or -1 when it cannot be
 * one (not constant, not [M], or so large that the sum plus it, K products of at most 255 x 255,
 * could leave int32: the float model would not wrap); -2 on error. */
static int int_bias(cir_graph *g, cir_node *n, cir_value *b, int region, const cir_value *xs, const cir_value *ws, int64_t M,
                    int64_t K) {
    const double room = 2147483647.0 - (double)K * 65025.0;
    cir_node *d = producer(g, b, region);
    cir_value *bq = NULL, *bs = NULL, *bz = NULL;
    if (d && d->kind == CIR_OP_DEQUANTIZE && !d->n_post) {
        bq = cir_in(g, d, 0), bs = cir_in(g, d, 1), bz = cir_in(g, d, 2);
        if (!cir_is_const(bq) || bq->dtype != CIR_I32 || !const_f32(bs) || (bz && !cir_is_const(bz)) ||
            cir_attr_int(d, "block_size") > 0 || (cir_numel(bs) != 1 && cir_numel(bs) != M) || (bz && cir_numel(bz) != cir_numel(bs)))
            return -1;
    } else if (!const_f32(b)) {
        return -1;
    }
    const cir_value *bv = bq ? bq : b;
    if (bv->ndim != 1 || bv->dims[0] != M) return -1;
    int32_t *ib = cuvil_malloc(sizeof(int32_t) * (size_t)M);
    if (!ib) return -2;
    const float x = (float)cir_const_f64(xs, 0);
    bool ok = true;
    for (int64_t i = 0; i < M && ok; i++) {
        const float unit = x * (float)cir_const_f64(ws, cir_numel(ws) > 1 ? i : 0);
        if (bq) {
            const int64_t si = cir_numel(bs) > 1 ? i : 0, z = bz ? cir_const_i64(bz, si) : 0;
            const float s = (float)cir_const_f64(bs, si);
            if (s == unit && z == 0) {   /* the quantizer's own units: exact */
                ib[i] = (int32_t)cir_const_i64(bq, i);
                ok = fabs((double)ib[i]) <= room;
                continue;
            }
            const double v = nearbyint((double)((float)(cir_const_i64(bq, i) - z) * s) / (double)unit);
            ok = v == v && fabs(v) <= room;
            ib[i] = ok ? (int32_t)v : 0;
        } else {
            const double v = nearbyint(cir_const_f64(b, i) / (double)unit);
            ok = v == v && fabs(v) <= room;
            ib[i] = ok ? (int32_t)v : 0;
        }
    }
    int id = -1;
    if (ok) {
        char name[600];
        snprintf(name, sizeof name, "%.500s:int32_bias", n->name);
        int64_t dims = M;
        id = cir_const_add(g, name, CIR_I32, 1, &dims, ib);
        if (id < 0) id = -2;
    }
    cuvil_free(ib);
    return id;
}

/* A transposed copy of constant 8-bit [R, C] as [C, R]. */
static int transposed(cir_graph *g, const cir_value *w) {
    const int64_t R = w->dims[0], C = w->dims[1];
    char name[600];
    snprintf(name, sizeof name, "%.500s:T", w->name);
    int64_t dims[2] = {C, R};
    int id = cir_const_add(g, name, w->dtype, 2, dims, NULL);
    if (id < 0) return -1;
    uint8_t *dst = cir_val(g, id)->data;
    const uint8_t *src = w->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) dst[c * R + r] = src[r * C + c];
    return id;
}

static cuvil_status set_float_attr(cir_graph *g, cir_node *n, const char *name, float v) {
    cuvil_attr a = {.name = name, .type = CUVIL_ATTR_FLOAT, .f = v};
    return cir_node_set_attr(g, n, &a);
}

/* The QuantizeLinear that alone reads n's result yv, directly or after a Relu/Clip (*act, its
 * bounds in *lo, *hi); NULL (and no bounds) when there is none. */
static cir_node *quantized_by(cir_graph *g, cir_node *n, cir_value *yv, cir_node **act, float *lo, float *hi) {
    *lo = -INFINITY, *hi = INFINITY, *act = NULL;
    cir_node *r = cuvil_sole_reader(g, yv);
    if (r && r->region == n->region && clamp_of(g, r, lo, hi) && cir_in(g, r, 0) == yv) {
        *act = r;
        r = cuvil_sole_reader(g, cir_out(g, r, 0));
    }
    /* (a clamp moves onto the quantized values only through a positive y_scale: rounding x / s
     * is monotonic increasing only then) */
    if (r && r->region == n->region && q_tensor(g, r) && cir_in(g, r, 0) == (*act ? cir_out(g, *act, 0) : yv) &&
        (!*act || cir_const_f64(cir_in(g, r, 1), 0) > 0))
        return r;
    *lo = -INFINITY, *hi = INFINITY, *act = NULL;
    return NULL;
}

/* n's output becomes q's (q and act dead), with the clamp [lo, hi] as min/max. */
static cuvil_status take_q(cir_graph *g, cir_node *n, cir_node *q, cir_node *act, float lo, float hi) {
    n->out[0] = q->out[0];
    cir_val(g, q->out[0])->producer = n->id;
    q->dead = true;
    if (act) act->dead = true;
    cuvil_status s = CUVIL_OK;
    if ((lo != -INFINITY && (s = set_float_attr(g, n, "min", lo))) || (hi != INFINITY && (s = set_float_attr(g, n, "max", hi))))
        return s;
    return CUVIL_OK;
}

static const char *fused_note(cir_graph *g, cir_node *n, cir_node *act, cir_node *q) {
    const char *note = cuvil_fused_note(g, n->fused, "DequantizeLinear");
    if (act && note) note = cuvil_fused_note(g, note, act->src_op);
    if (q && note) note = cuvil_fused_note(g, note, q->src_op);
    return note;
}

/* add(DQ(a), DQ(b)) [-> relu | clip] -> Q, a and b of one shape (symbolic dims: the same
 * expressions): qlinear_add */
static cuvil_status fold_add(cir_graph *g, cir_node *n) {
    cir_value *av = cir_in(g, n, 0), *bv = cir_in(g, n, 1), *yv = cir_out(g, n, 0);
    if (n->n_post || n->n_in != 2 || !av || !bv || yv->dtype != CIR_F32 || !cir_same_dims(av, bv) ||
        !cir_same_dims(av, yv))
        return CUVIL_OK;
    cir_node *da = producer(g, av, n->region), *db = producer(g, bv, n->region);
    if (!dq_tensor(g, da) || !dq_tensor(g, db)) return CUVIL_OK;
    float lo, hi;
    cir_node *act, *q = quantized_by(g, n, yv, &act, &lo, &hi);
    if (!q) return CUVIL_OK;
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 9);
    const char *note = fused_note(g, n, act, q);
    if (!in || !note) return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    const int v[8] = {da->in[0], da->in[1], da->n_in > 2 ? da->in[2] : -1, db->in[0], db->in[1], db->n_in > 2 ? db->in[2] : -1,
                      q->in[1], q->n_in > 2 ? q->in[2] : -1};
    memcpy(in, v, sizeof v);
    n->fused = note;
    cir_node_rekind(n, CIR_OP_QLINEAR_ADD);
    n->in = in;
    n->n_in = 8;
    cuvil_status s = take_q(g, n, q, act, lo, hi);
    if (s || (s = n->def->infer(g, n))) return s;
    cir_graph_count_uses(g);
    return CUVIL_OK;
}

/* The float32 node that alone reads v in n's region, untouched by other passes; NULL if none. */
static cir_node *sole_f32_reader(cir_graph *g, const cir_node *n, const cir_value *v, cir_op_kind kind) {
    cir_node *r = cuvil_sole_reader(g, v);
    return r && r->kind == kind && r->region == n->region && !r->n_post && r->half == CIR_UNDEF && r->n_out == 1 &&
                   cir_out(g, r, 0)->dtype == CIR_F32
               ? r
               : NULL;
}

/* r = binary(v, other) or binary(other, v) of v's shape: the other operand when it is float32
 * and one value, or one per column ([N] or [1, N]: what qlinear_matmul's scale takes) */
static cir_value *per_column_operand(cir_graph *g, cir_node *r, const cir_value *v, int64_t N) {
    if (r->n_in != 2 || !cir_in(g, r, 0) || !cir_in(g, r, 1) || !cir_same_dims(cir_out(g, r, 0), v)) return NULL;
    cir_value *o = cir_in(g, r, 0) == v ? cir_in(g, r, 1) : cir_in(g, r, 0);
    if (o == v || o->dtype != CIR_F32 || !cir_value_fixed(o) || o->ndim > v->ndim) return NULL;
    if (cir_numel(o) == 1) return o;
    return o->ndim >= 1 && o->ndim <= 2 && o->dims[o->ndim - 1] == N && cir_numel(o) == N ? o : NULL;
}

/* A constant of one value *v of type t named after node n ("<n>:<what>"); its id (< 0: failed) */
static int scalar_const(cir_graph *g, const cir_node *n, const char *what, cir_dtype t, const void *v) {
    char name[600];
    snprintf(name, sizeof name, "%.500s:%s", n->name, what);
    return cir_const_add(g, name, t, 0, NULL, v);
}

/* The last node of a folded chain (after every operand's producer) becomes the product
 * qlinear_matmul (in: its 10 inputs) or qlinear_conv (its 9, n's attributes), under the name of
 * the chain's first node n, which dies. */
static cuvil_status become_product(cir_graph *g, cir_node *last, cir_node *n, cir_op_kind kind, int *in, const char *note) {
    const bool conv = kind == CIR_OP_QLINEAR_CONV;
    last->name = n->name;
    last->src_op = n->src_op;
    last->fused = note;
    last->attrs = conv ? n->attrs : last->attrs;   /* (qlinear_conv's min and max keep their defaults) */
    last->n_attrs = conv ? n->n_attrs : 0;
    cir_node_rekind(last, kind);
    last->in = in;
    last->n_in = conv ? 9 : 10;
    n->dead = true;
    cuvil_status st = last->def->infer(g, last);
    if (!st) cir_graph_count_uses(g);
    return st;
}

/* ONNX Runtime's dynamic form, as quantize_dynamic writes it:
 *
 *   matmul_integer(a, b, az, bz) -> cast(float32) -> mul(s) [-> add(bias)]
 *
 * a and b 8-bit, az one value, s (the scales' product, known when the model runs) and the bias
 * float32, each one value or one per column: the last node becomes qlinear_matmul's float form,
 * y = float(acc) * s + bias in the GEMM's epilogue, as the unfused nodes round it (float(acc)
 * rounded once, the product once; the bias added after it). a_scale is the constant 1, b_scale
 * s (qscale's float(1 * s) is s). */
static cuvil_status fold_dynamic(cir_graph *g, cir_node *n) {
    cir_value *a = cir_in(g, n, 0), *b = cir_in(g, n, 1), *az = cir_in(g, n, 2), *y = cir_out(g, n, 0);
    if (n->n_post || n->half != CIR_UNDEF || !a || !b || !i8t(a->dtype) || !i8t(b->dtype) || (az && cir_numel(az) != 1)) return CUVIL_OK;
    op_imatmul m;
    cuvil_status st = op_imatmul_sizes(g, n, 0, 1, &m);   /* (infer took the same sizes) */
    if (st) return st;
    if (m.K > CUVIL_QGEMM_K_EXACT) return CUVIL_OK;
    cir_node *c = sole_f32_reader(g, n, y, CIR_OP_CAST), *mu = c ? sole_f32_reader(g, n, cir_out(g, c, 0), CIR_OP_MUL) : NULL;
    cir_value *s = mu ? per_column_operand(g, mu, cir_out(g, c, 0), m.N) : NULL;
    if (!s) return CUVIL_OK;
    cir_node *ad = sole_f32_reader(g, n, cir_out(g, mu, 0), CIR_OP_ADD), *last = mu;
    cir_value *fb = ad ? per_column_operand(g, ad, cir_out(g, mu, 0), m.N) : NULL;
    if (fb) last = ad;
    static const float one = 1.0f;
    static const uint8_t zero = 0;
    const int one_id = scalar_const(g, n, "one", CIR_F32, &one);
    int bz_id = n->n_in > 3 ? n->in[3] : -1;   /* (qlinear_matmul's b zero point is not optional) */
    if (bz_id < 0) bz_id = scalar_const(g, n, "b_zero_point", b->dtype, &zero);
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 11);
    if (one_id < 0 || bz_id < 0 || !in) return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    const char *note = cuvil_fused_note(g, n->fused, c->src_op);
    if (note) note = cuvil_fused_note(g, note, mu->src_op);
    if (note && fb) note = cuvil_fused_note(g, note, ad->src_op);
    if (!note) return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    const int v[10] = {n->in[0], one_id, az ? n->in[2] : -1, n->in[1], s->id, bz_id, -1, -1, -1, fb ? fb->id : -1};
    memcpy(in, v, sizeof v);
    c->dead = true;
    if (fb) mu->dead = true;
    return become_product(g, last, n, CIR_OP_QLINEAR_MATMUL, in, note);
}

/* quantize_dynamic's convolution:
 *
 *   conv_integer(x, w, xz, wz) [-> add(reshape(b))] -> cast(float32) -> mul(s)
 *
 * x and w 8-bit, xz one value, b int32 [M] (the float bias divided by the scales, computed when
 * the model runs) reshaped to [1, M, 1(, 1)], s float32, one value: the last node becomes
 * qlinear_conv's float form, y = float(acc + b) * s in the epilogue, as the unfused nodes round
 * it (the int32 sum wraps as the Add's, float() rounds once, the product once). x_scale is the
 * constant 1, w_scale s. */
static cuvil_status fold_dynamic_conv(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1), *xz = cir_in(g, n, 2), *y = cir_out(g, n, 0);
    if (n->n_post || n->half != CIR_UNDEF || !x || !w || !i8t(x->dtype) || !i8t(w->dtype) || (xz && cir_numel(xz) != 1) ||
        y->ndim < 3 || cir_numel(w) / (w->dims[0] ? w->dims[0] : 1) > CUVIL_QGEMM_K_EXACT)
        return CUVIL_OK;
    const int64_t M = y->dims[1];
    cir_node *ba = cuvil_sole_reader(g, y), *br = NULL;
    cir_value *sum = y, *b = NULL;
    if (ba && ba->kind == CIR_OP_ADD && ba->region == n->region && !ba->n_post && ba->n_in == 2 && cir_in(g, ba, 0) &&
        cir_in(g, ba, 1) && cir_out(g, ba, 0)->dtype == CIR_I32 && cir_same_dims(cir_out(g, ba, 0), y)) {
        cir_value *o = cir_in(g, ba, 0) == y ? cir_in(g, ba, 1) : cir_in(g, ba, 0);
        br = o != y && o->producer >= 0 ? cir_node_at(g, o->producer) : NULL;
        b = br && br->kind == CIR_OP_RESHAPE && br->region == n->region ? cir_in(g, br, 0) : NULL;
        bool chan = b && b->dtype == CIR_I32 && cir_value_fixed(b) && b->ndim == 1 && b->dims[0] == M && cir_value_fixed(o) &&
                    o->ndim == y->ndim && o->dims[1] == M;   /* [1, M, 1, ...]: b's values along the channels */
        for (int i = 0; chan && i < o->ndim; i++) chan = i == 1 || o->dims[i] == 1;
        if (!chan) return CUVIL_OK;
        sum = cir_out(g, ba, 0);
    } else {
        ba = NULL;
    }
    cir_node *c = sole_f32_reader(g, n, sum, CIR_OP_CAST), *mu = c ? sole_f32_reader(g, n, cir_out(g, c, 0), CIR_OP_MUL) : NULL;
    /* (one value: a conv's columns are its pixels, so no scale per column) */
    cir_value *sv = mu ? per_column_operand(g, mu, cir_out(g, c, 0), 1) : NULL;
    if (!sv || cir_numel(sv) != 1) return CUVIL_OK;
    static const float one = 1.0f;
    static const uint8_t zero = 0;
    const int one_id = scalar_const(g, n, "one", CIR_F32, &one);
    int zp[2] = {xz ? n->in[2] : -1, n->n_in > 3 ? n->in[3] : -1};   /* (qlinear_conv's are not optional) */
    for (int i = 0; i < 2; i++)
        if (zp[i] < 0) zp[i] = scalar_const(g, n, i ? "w_zero_point" : "x_zero_point", (i ? w : x)->dtype, &zero);
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 9);
    const char *note = in && one_id >= 0 && zp[0] >= 0 && zp[1] >= 0 ? cuvil_fused_note(g, n->fused, ba ? ba->src_op : c->src_op)
                                                                     : NULL;
    if (note && ba) note = cuvil_fused_note(g, note, c->src_op);
    if (note) note = cuvil_fused_note(g, note, mu->src_op);
    if (!note) return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    /* (qlinear_conv's order: x and w first) */
    const int v[9] = {n->in[0], n->in[1], one_id, zp[0], sv->id, zp[1], -1, -1, b ? b->id : -1};
    memcpy(in, v, sizeof v);
    if (ba) ba->dead = true;
    c->dead = true;
    return become_product(g, mu, n, CIR_OP_QLINEAR_CONV, in, note);
}

/* qlinear_matmul's float form without a bias (com.microsoft DynamicQuantizeMatMul and
 * MatMulIntegerToFloat import as it, their bias as an Add after it) -> add(bias), the bias one
 * value or one per column: the bias into the epilogue (input 9), added after the scale as the
 * Add did. */
static cuvil_status fold_float_bias(cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    if (n->n_post || n->half != CIR_UNDEF || y->dtype != CIR_F32 || cir_in(g, n, 6) || cir_in(g, n, 8) || cir_in(g, n, 9) ||
        cir_attr_float(n, "min") != -INFINITY || cir_attr_float(n, "max") != INFINITY || !cir_in(g, n, 0) || !cir_in(g, n, 3) ||
        !i8t(cir_in(g, n, 0)->dtype) || !i8t(cir_in(g, n, 3)->dtype) || cir_in(g, n, 1)->dtype != CIR_F32)
        return CUVIL_OK;
    cir_node *ad = sole_f32_reader(g, n, y, CIR_OP_ADD);
    cir_value *fb = ad ? per_column_operand(g, ad, y, y->dims[y->ndim - 1]) : NULL;
    if (!fb) return CUVIL_OK;
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 11);
    const char *note = in ? cuvil_fused_note(g, n->fused, ad->src_op) : NULL;
    if (!note) return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 10; i++) in[i] = i < n->n_in ? n->in[i] : -1;
    in[9] = fb->id;
    return become_product(g, ad, n, CIR_OP_QLINEAR_MATMUL, in, note);
}

/* Folds node n if it matches; where n is quantized but does not fold, *why says why. */
static cuvil_status fold(cir_graph *g, cir_node *n, const char **why) {
#define NOFOLD(reason) \
    do {               \
        *why = reason; \
        return CUVIL_OK; \
    } while (0)
    *why = NULL;
    const bool conv = n->kind == CIR_OP_CONV, gemm = n->kind == CIR_OP_GEMM;
    cir_value *xv = cir_in(g, n, 0), *wv = cir_in(g, n, 1), *yv = cir_out(g, n, 0);
    if (!xv || !wv) return CUVIL_OK;
    cir_node *dx = producer(g, xv, n->region), *dw = producer(g, wv, n->region);
    const bool qx = dx && dx->kind == CIR_OP_DEQUANTIZE, qw = dw && dw->kind == CIR_OP_DEQUANTIZE;
    if (!qx && !qw) return CUVIL_OK;   /* not a quantized node */
    /* (a MatMul's or Gemm's rows may be symbolic: qlinear_matmul takes them; a conv's batch and
     * spatial dims: qlinear_conv takes them, not its channels) */
    const bool xdims = cir_value_fixed(xv) || (conv ? xv->ndim >= 2 && !xv->dx[1] : xv->ndim >= 2 && !xv->dx[xv->ndim - 1]);
    if (!qw || !cir_is_const(cir_in(g, dw, 0)) || !cir_value_fixed(wv))
        NOFOLD("its second operand is not constant weights through a DequantizeLinear (a product of two activations?)");
    if (n->n_post || yv->dtype != CIR_F32 || !xdims) NOFOLD("symbolic channels (a convolution's) or columns, or a non-float result");
    if (!dq_tensor(g, dx)) NOFOLD("its input is not 8-bit through a DequantizeLinear per tensor with constant scale and zero point");
    cir_value *w0 = cir_in(g, dw, 0);
    int64_t M, K;   /* output channels / columns; the sum's length */
    bool trans_b = false;
    const char *wmsg = "its weights' DequantizeLinear is not of constant 8-bit weights per tensor or per output channel";
    if (conv) {
        if (wv->ndim < 3 || wv->ndim > 4) NOFOLD("a convolution over more than 2 spatial dims");
        M = wv->dims[0];
        K = cir_numel(wv) / (M ? M : 1);
        if (!dq_weight(g, dw, 0, M)) NOFOLD(wmsg);
    } else if (gemm) {
        if (cir_attr_int(n, "trans_a") || cir_attr_float(n, "alpha") != 1.0f || xv->ndim != 2 || wv->ndim != 2)
            NOFOLD("Gemm with transA or alpha other than 1");
        if (cir_in(g, n, 2) && cir_attr_float(n, "beta") != 1.0f) NOFOLD("Gemm with beta other than 1");
        trans_b = cir_attr_int(n, "trans_b") != 0;
        M = wv->dims[trans_b ? 0 : 1], K = wv->dims[trans_b ? 1 : 0];
        if (!dq_weight(g, dw, trans_b ? 0 : 1, M)) NOFOLD(wmsg);
    } else {
        if (wv->ndim != 2 || xv->ndim < 2) NOFOLD("MatMul whose weights are not 2-D");
        M = wv->dims[1], K = wv->dims[0];
        if (!dq_weight(g, dw, 1, M)) NOFOLD(wmsg);
    }
    if (K > CUVIL_QGEMM_K_EXACT) NOFOLD("a sum over more than 33025 products (int32 could overflow)");
    if (M <= 0) NOFOLD("no output channels");
    cir_value *xs = cir_in(g, dx, 1), *ws = cir_in(g, dw, 1);
    int bias = -1;
    cir_value *b = conv || gemm ? cir_in(g, n, 2) : NULL;
    if (b) {
        if (gemm && (b->ndim != 1 || b->dims[0] != M)) NOFOLD("a Gemm bias that is not one value per column");
        if ((bias = int_bias(g, n, b, n->region, xs, ws, M, K)) == -2) return g->ctx->status ? g->ctx->status : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (bias < 0) NOFOLD("its bias is not a constant (int32 through DequantizeLinear, or float32) within int32 in its units");
    }
#undef NOFOLD
    float lo, hi;
    cir_node *act, *q = quantized_by(g, n, yv, &act, &lo, &hi);
    int wid = w0->id;
    if (trans_b && (wid = transposed(g, w0)) < 0) return g->ctx->status;
    int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 10);
    if (!in) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    const int xz = dx->n_in > 2 ? dx->in[2] : -1, wz = dw->n_in > 2 ? dw->in[2] : -1;
    const int ys = q ? q->in[1] : -1, yz = q && q->n_in > 2 ? q->in[2] : -1;
    if (conv) {
        const int v[9] = {dx->in[0], wid, dx->in[1], xz, dw->in[1], wz, ys, yz, bias};
        memcpy(in, v, sizeof v);
    } else {
        const int v[9] = {dx->in[0], dx->in[1], xz, wid, dw->in[1], wz, ys, yz, bias};
        memcpy(in, v, sizeof v);
    }
    const char *note = fused_note(g, n, act, q);
    if (!note) return g->ctx->status;
    n->fused = note;
    /* conv's attributes carry over; gemm's are dropped (each was checked above) */
    if (!conv) n->n_attrs = 0;
    cir_node_rekind(n, conv ? CIR_OP_QLINEAR_CONV : CIR_OP_QLINEAR_MATMUL);
    n->in = in;
    n->n_in = 9;
    cuvil_status s;
    if (q && (s = take_q(g, n, q, act, lo, hi))) return s;
    if ((s = n->def->infer(g, n))) return s;
    cir_graph_count_uses(g);
    return CUVIL_OK;
}

cuvil_status cuvil_pass_fold_qdq(cir_graph *g, const cuvil_options *o) {
    (void)o;
    cir_graph_count_uses(g);
    int unfolded = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        cuvil_status s = CUVIL_OK;
        const char *why = NULL;
        if (n->dead) continue;
        if (n->kind == CIR_OP_CONV || n->kind == CIR_OP_MATMUL || n->kind == CIR_OP_GEMM) s = fold(g, n, &why);
        else if (n->kind == CIR_OP_ADD) s = fold_add(g, n);
        else if (n->kind == CIR_OP_MATMUL_INTEGER) s = fold_dynamic(g, n);
        else if (n->kind == CIR_OP_CONV_INTEGER) s = fold_dynamic_conv(g, n);
        else if (n->kind == CIR_OP_QLINEAR_MATMUL) s = fold_float_bias(g, n);
        if (s) return s;
        if (why && g->quant) {   /* Cuvil's own quantizer left its weights in float on purpose, and says so itself */
            const cir_value *w = cir_in(g, n, 1);
            const cir_node *p = w && w->producer >= 0 ? cir_node_at(g, w->producer) : NULL;
            if (!p || p->kind != CIR_OP_DEQUANTIZE) why = NULL;
        }
        /* what stays float says so: the user sees which nodes of a quantized model did not
         * become integer ones, and why (the first 8; names as the model spells them) */
        if (why && unfolded++ < 8)
            fprintf(stderr, "cuvil: note: %s '%.200s' runs in float32 between DequantizeLinear and QuantizeLinear: %s\n",
                    n->src_op ? n->src_op : n->def->name, n->name, why);
    }
    if (unfolded > 8) fprintf(stderr, "cuvil: note: and %d more quantized nodes run in float32\n", unfolded - 8);
    return CUVIL_OK;
}
