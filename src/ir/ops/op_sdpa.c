/* op_sdpa.c -- sdpa (q, k, v, [mask], [past_key], [past_value], [nonpad_kv_seqlen]) -> y, [present_key],
 * [present_value], [qk]: ONNX's Attention (opsets 23-25) on the attention kernel
 * (cuvil_f32_attention_qk; emit_sdpa.c). q, k and v are all 4-D ([batch, heads, seq, head
 * size]) or all 3-D ([batch, seq, heads * head size], the head counts from q_num_heads and
 * kv_num_heads); query head h reads key/value head h / (q heads / kv heads). past_key and
 * past_value ([batch, kv heads, past, head size]) come before this step's keys and values in
 * present_key and present_value, which the attention reads. The mask (bool: false hides a key;
 * float: added) broadcasts to [batch, q heads, q seq, keys], right-aligned; a mask with fewer
 * columns than keys hides the rest. is_causal: query i sees keys j <= i + past; the window
 * attributes bound j around that position; softcap caps the scaled scores; scale defaults to
 * 1 / sqrt(head size). nonpad_kv_seqlen (input 6, int64 [batch], without a past): batch item b
 * has that many valid keys, its queries sitting at the end of them for the causal frontier and
 * the window. A query row that sees no key gives 0. qk is the scores at
 * qk_matmul_output_mode (0 or 1: scaled and capped, 2: masked, 3: the softmax). float32. */
#include "ir/ops/ops.h"

#include <math.h>

cuvil_status op_sdpa_shape(cir_graph *g, cir_node *n, op_sdpa *a) {
    cir_dimtab *t = &g->dt;
    cuvil_status s;
    cir_value *np = cir_in(g, n, 6);
    if (np && (np->dtype != CIR_I64 || np->ndim != 1))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "nonpad_kv_seqlen '%s' must be a 1-D int64 tensor", np->name);
    if (np && cir_in(g, n, 4))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "nonpad_kv_seqlen cannot be combined with past_key and past_value");
    for (int i = 0; i < 6; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v && i != 3 && (s = op_need_f32(g, n, i))) return s;
    }
    cir_value *q = cir_in(g, n, 0), *k = cir_in(g, n, 1), *v = cir_in(g, n, 2), *m = cir_in(g, n, 3);
    cir_value *pk = cir_in(g, n, 4), *pv = cir_in(g, n, 5);
    a->rank = q->ndim;
    if ((q->ndim != 3 && q->ndim != 4) || k->ndim != q->ndim || v->ndim != q->ndim)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "Q, K and V have ranks %d, %d and %d; they must all be 3 or all 4",
                            q->ndim, k->ndim, v->ndim);
    if (!pk != !pv) return cir_node_err(g, n, CUVIL_ERR_MODEL, "past_key and past_value must be given together");
    a->batch = cir_dimx(g, q, 0);
    if (a->rank == 4) {
        a->q_len = cir_dimx(g, q, 2);
        a->s_len = cir_dimx(g, k, 2);
        if (cir_dimx(g, q, 1)->kind != CIR_DIM_CONST || cir_dimx(g, k, 1)->kind != CIR_DIM_CONST ||
            cir_dimx(g, q, 3)->kind != CIR_DIM_CONST || cir_dimx(g, v, 3)->kind != CIR_DIM_CONST)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the head counts and head sizes must be fixed");
        a->q_heads = q->dims[1];
        a->kv_heads = k->dims[1];
        a->dim = q->dims[3];
        a->v_dim = v->dims[3];
        if (cir_attr_int(n, "q_num_heads") || cir_attr_int(n, "kv_num_heads")) {
            if (cir_attr_int(n, "q_num_heads") != a->q_heads || cir_attr_int(n, "kv_num_heads") != a->kv_heads)
                return cir_node_err(g, n, CUVIL_ERR_MODEL, "q_num_heads and kv_num_heads do not match 4-D inputs' heads");
        }
        if ((s = cir_require_eq(g, n, cir_dimx(g, k, 1), cir_dimx(g, v, 1), "K's and V's heads")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, k, 3), cir_dim_const(t, a->dim), "K's and Q's head sizes")))
            return s;
        if ((s = cir_require_eq(g, n, cir_dimx(g, v, 2), a->s_len, "K's and V's lengths"))) return s;
    } else {
        a->q_heads = cir_attr_int(n, "q_num_heads");
        a->kv_heads = cir_attr_int(n, "kv_num_heads");
        if (a->q_heads <= 0 || a->kv_heads <= 0)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "3-D inputs need q_num_heads and kv_num_heads (positive)");
        a->q_len = cir_dimx(g, q, 1);
        a->s_len = cir_dimx(g, k, 1);
        for (int i = 0; i < 3; i++) {
            cir_value *x = cir_in(g, n, i);
            if (cir_dimx(g, x, 2)->kind != CIR_DIM_CONST || x->dims[2] % (i ? a->kv_heads : a->q_heads))
                return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the last dim of '%s' must be a fixed multiple of its heads (%lld)",
                                    x->name, (long long)(i ? a->kv_heads : a->q_heads));
        }
        a->dim = q->dims[2] / a->q_heads;
        a->v_dim = v->dims[2] / a->kv_heads;
        if (k->dims[2] / a->kv_heads != a->dim)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "K's head size (%lld) differs from Q's (%lld)",
                                (long long)(k->dims[2] / a->kv_heads), (long long)a->dim);
        if ((s = cir_require_eq(g, n, cir_dimx(g, v, 1), a->s_len, "K's and V's lengths"))) return s;
    }
    if (a->q_heads % a->kv_heads)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%lld query heads are not a multiple of %lld key/value heads",
                            (long long)a->q_heads, (long long)a->kv_heads);
    for (int i = 1; i < 3; i++)
        if ((s = cir_require_eq(g, n, cir_dimx(g, cir_in(g, n, i), 0), a->batch, "the batch sizes"))) return s;
    a->p_len = cir_dim_const(t, 0);
    if (pk) {
        if (pk->ndim != 4 || pv->ndim != 4)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "past_key and past_value must be 4-D [batch, kv heads, past, head size]");
        a->p_len = cir_dimx(g, pk, 2);
        if ((s = cir_require_eq(g, n, cir_dimx(g, pk, 0), a->batch, "past_key's batch")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pk, 1), cir_dim_const(t, a->kv_heads), "past_key's heads")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pk, 3), cir_dim_const(t, a->dim), "past_key's head size")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pv, 0), a->batch, "past_value's batch")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pv, 1), cir_dim_const(t, a->kv_heads), "past_value's heads")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pv, 2), a->p_len, "past_value's length")) ||
            (s = cir_require_eq(g, n, cir_dimx(g, pv, 3), cir_dim_const(t, a->v_dim), "past_value's head size")))
            return s;
    }
    a->kv_len = cir_dim_add(t, a->p_len, a->s_len);
    if (np && (s = cir_require_eq(g, n, cir_dimx(g, np, 0), a->batch, "nonpad_kv_seqlen's length and the batch")))
        return s;
    if (m) {
        if (m->dtype != CIR_BOOL && (s = op_need_f32(g, n, 3))) return s;
        if (m->ndim < 1 || m->ndim > 4)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "attn_mask '%s' has rank %d; at most 4", m->name, m->ndim);
        const cir_dim *full[4] = {a->batch, cir_dim_const(t, a->q_heads), a->q_len, a->kv_len};
        for (int d = 0; d < m->ndim; d++) {
            const cir_dim *md = cir_dimx(g, m, d), *want = full[4 - m->ndim + d];
            if (d == m->ndim - 1) {   /* at most the keys: a shorter mask hides the rest */
                if ((s = cir_require_le(g, n, md, want, "the mask's columns and the keys"))) return s;
            } else if (!(md->kind == CIR_DIM_CONST && md->c == 1) && (s = cir_require_eq(g, n, md, want, "the mask's dims"))) {
                return s;
            }
        }
    }
    return CUVIL_OK;
}

static cuvil_status sdpa_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 7, 1, 4);
    if (s) return s;
    op_sdpa a;
    if ((s = op_sdpa_shape(g, n, &a))) return s;
    int64_t mode = cir_attr_int(n, "qk_matmul_output_mode");
    if (mode < 0 || mode > 3)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "qk_matmul_output_mode is %lld; it must be 0..3", (long long)mode);
    cir_dimtab *t = &g->dt;
    const cir_dim *yd[4];
    if (a.rank == 4) {
        yd[0] = a.batch, yd[1] = cir_dim_const(t, a.q_heads), yd[2] = a.q_len, yd[3] = cir_dim_const(t, a.v_dim);
    } else {
        yd[0] = a.batch, yd[1] = a.q_len, yd[2] = cir_dim_const(t, a.q_heads * a.v_dim);
    }
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, a.rank, yd);
    const cir_dim *pkd[4] = {a.batch, cir_dim_const(t, a.kv_heads), a.kv_len, cir_dim_const(t, a.dim)};
    const cir_dim *pvd[4] = {a.batch, cir_dim_const(t, a.kv_heads), a.kv_len, cir_dim_const(t, a.v_dim)};
    const cir_dim *qkd[4] = {a.batch, cir_dim_const(t, a.q_heads), a.q_len, a.kv_len};
    if (cir_out_opt(g, n, 1)) cir_set_shape_x(cir_out_opt(g, n, 1), CIR_F32, 4, pkd);
    if (cir_out_opt(g, n, 2)) cir_set_shape_x(cir_out_opt(g, n, 2), CIR_F32, 4, pvd);
    if (cir_out_opt(g, n, 3)) cir_set_shape_x(cir_out_opt(g, n, 3), CIR_F32, 4, qkd);
    for (int d = 0; d < 4; d++)
        if (!pkd[d] || !qkd[d] || (d < a.rank && !yd[d])) return cir_dim_err(g, n, "the output's dims");
    return CUVIL_OK;
}

static const cir_attr_spec sdpa_attrs[] = {
    {"is_causal", CIR_ATTR_INT, 0, 0, NULL, false},
    {"q_num_heads", CIR_ATTR_INT, 0, 0, NULL, false},
    {"kv_num_heads", CIR_ATTR_INT, 0, 0, NULL, false},
    {"scale", CIR_ATTR_FLOAT, 0, 0, NULL, false},
    {"has_scale", CIR_ATTR_INT, 0, 0, NULL, false},
    {"softcap", CIR_ATTR_FLOAT, 0, 0, NULL, false},
    {"qk_matmul_output_mode", CIR_ATTR_INT, 0, 0, NULL, false},
    {"left_window_size", CIR_ATTR_INT, -1, 0, NULL, false},
    {"right_window_size", CIR_ATTR_INT, -1, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_sdpa = {"sdpa", CIR_OPF_SYM_DIMS, 3, 7, 1, 4, sdpa_attrs, sdpa_infer, NULL, NULL, 0};

/* ===== mask_index ========================================================================== */
/* mask_index (mask, like; filter): the additive float mask of ONNX Runtime's contrib Attention
 * and MultiHeadAttention from their mask_index or key_padding_mask: [B] key counts (keys at and
 * past the count hidden), [B, T] or [B, S, T] of 0 (hidden) / nonzero, into [B, 1, 1, T] or
 * [B, 1, S, T] of 0 or `filter` (ONNX Runtime's mask_filter_value, added to the scores). T is
 * like's dim 1 for the 1-D form (the keys, from a [B, T, ...] value). int32/int64/bool masks. */
static cuvil_status mask_index_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 2, 1, 1);
    if (s) return s;
    cir_value *m = cir_in(g, n, 0), *like = cir_in(g, n, 1);
    if ((m->dtype != CIR_I32 && m->dtype != CIR_I64 && m->dtype != CIR_BOOL) || m->ndim < 1 || m->ndim > 3)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "mask '%s' must be int32, int64 or bool of rank 1 to 3 (key counts, "
                            "[batch, keys] or [batch, queries, keys])", m->name);
    if (like->ndim < 2) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' gives no key count", like->name);
    const cir_dim *one = cir_dim_const(&g->dt, 1);
    const cir_dim *dy[4] = {cir_dimx(g, m, 0), one, m->ndim == 3 ? cir_dimx(g, m, 1) : one,
                            m->ndim == 1 ? cir_dimx(g, like, 1) : cir_dimx(g, m, m->ndim - 1)};
    cir_set_shape_x(cir_out(g, n, 0), CIR_F32, 4, dy);
    return CUVIL_OK;
}

static const cir_attr_spec mask_index_attrs[] = {{"filter", CIR_ATTR_FLOAT, 0, -10000.0f, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_mask_index = {"mask_index", CIR_OPF_SYM_DIMS, 2, 2, 1, 1, mask_index_attrs, mask_index_infer, NULL,
                                     NULL, 0};

/* ===== gqa_check =========================================================================== */
/* gqa_check (seqlens_k [B] int32, total_sequence_length int32 scalar, key [B, S, ...], [past_key
 * [B, H, P, D]]) -> key, copied: ONNX Runtime's GroupQueryAttention as Cuvil takes it, with
 * every row whole and the cache not shared. The run fails unless total_sequence_length is P + S
 * and every seqlens_k is total - 1 (padding, or a past buffer longer than the tokens in it,
 * would need the masks Cuvil does not build). */
static cuvil_status gqa_check_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 4, 1, 1);
    if (s) return s;
    cir_value *sl = cir_in(g, n, 0), *tot = cir_in(g, n, 1), *k = cir_in(g, n, 2), *pk = cir_in(g, n, 3);
    if (sl->dtype != CIR_I32 || sl->ndim != 1 || tot->dtype != CIR_I32 || cir_numel(tot) != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "seqlens_k must be int32 [batch] and total_sequence_length an int32 scalar");
    if (k->ndim != 3 || (pk && pk->ndim != 4))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "key must be [batch, seq, kv heads * head size] and past_key "
                            "[batch, kv heads, past, head size]");
    if ((s = cir_require_eq(g, n, cir_dimx(g, sl, 0), cir_dimx(g, k, 0), "seqlens_k's length and the batch"))) return s;
    const cir_dim *dx[3] = {cir_dimx(g, k, 0), cir_dimx(g, k, 1), cir_dimx(g, k, 2)};
    cir_set_shape_x(cir_out(g, n, 0), k->dtype, 3, dx);
    return CUVIL_OK;
}
const cir_opdef cir_op_gqa_check = {"gqa_check", CIR_OPF_SYM_DIMS, 3, 4, 1, 1, NULL, gqa_check_infer, NULL, NULL, 0};
