/*
 * attention.c -- scaled dot-product attention, y = softmax(scale * q k' + mask) v, for every
 * (batch, head), reading q, k and v and writing y in place through strides.
 *
 * The projections of a transformer leave q, k and v as [batch, seq, heads * dim]; the exported
 * graph reshapes and transposes them to [batch, heads, seq, dim] (and k to [.., dim, seq])
 * before its two MatMuls, and transposes the result back: four copies of every activation per
 * layer. Here the head h of batch item b is just an offset (b * bs + h * hs) and a row stride,
 * and the two products run on the GEMM driver with those strides (k as a transposed B).
 *
 * Work is split in tasks of up to ATT_QB query rows of one (batch, head), so that a decode step
 * (one query row) still has a task per head; or, where a head has several such blocks and the
 * heads go round the threads evenly, in tasks of a whole (batch, head), whose K and V are packed
 * once for all its blocks (att_by_head). Each task holds its rows' scores (q_block x kv_len),
 * the GEMM's packing buffers and (a task a head) the packed K and V in its thread's scratch
 * slice. Masks: an additive float mask
 * or a boolean one (false: the key is not seen), broadcast through strides, and a causal mask
 * computed, not read: query i of q_len sees keys j <= i + kv_len - q_len (a KV cache of
 * kv_len - q_len earlier tokens comes first). A row that sees no key is NaN, as softmax over
 * all -inf is, or 0 with empty_rows_zero (what the exporters' Where(IsNaN(p), 0, p) makes).
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"
#if defined(__AVX__)
#include <immintrin.h>
#endif

#define ATT_QB 128
#define ATT_QB_LONG 64
#define ATT_QB_KV 1024

/* Query rows per task: 128 (K and V are packed once per task: at 64, BERT-base's attention took
 * 10% longer), 64 past 1024 keys (the scores of a block: 512 KB at 1024 keys). */
static int64_t q_block(const cuvil_attention_params *p) {
    const int64_t qb = p->kv_len > ATT_QB_KV ? ATT_QB_LONG : ATT_QB;
    return p->q_len < qb ? p->q_len : qb;
}

size_t cuvil_f32_attention_scratch_size(const cuvil_attention_params *p) {
    return cuvil_f32_attention_scratch_size_ex(p, cuvil_gemm_default_blocking());
}

static size_t scratch_for(int64_t qb, int64_t kv, const cuvil_attention_params *p, const cuvil_gemm_blocking *b) {
    qb = qb > 0 ? qb : 1, kv = kv > 0 ? kv : 1;
    const size_t s1 = cuvil_gemm_job_scratch_size(qb, kv, p->dim, b), s2 = cuvil_gemm_job_scratch_size(qb, p->v_dim, kv, b);
    return CUVIL_ALIGN_UP((size_t)(qb * kv) * sizeof(float), 64) + (s1 > s2 ? s1 : s2);
}

/* Bytes of a head's K (as the first product's B, [kv, dim] transposed) and V (the second's,
 * [kv, v_dim]) packed in the microkernel's panels, each 64-aligned. */
static size_t packed_kv_bytes(const cuvil_attention_params *p, const cuvil_gemm_blocking *b) {
    const int nr = b->uk->nr;
    return CUVIL_ALIGN_UP(cuvil_gemm_packed_b_floats(p->kv_len, p->dim, nr) * sizeof(float), 64) +
           CUVIL_ALIGN_UP(cuvil_gemm_packed_b_floats(p->v_dim, p->kv_len, nr) * sizeof(float), 64);
}

/* A head's packed K and V are kept (a task a head) only up to this size: a long context (32768
 * keys of 128 floats) would otherwise reserve 32 MB a thread for them. */
#define ATT_KV_PACK_MAX ((size_t)4 << 20)

/* With symbolic dims p holds the upper bounds and the run's block may be the other size: the
 * larger of the two cases (up to ATT_QB_KV keys in blocks of ATT_QB rows, more in blocks of
 * ATT_QB_LONG), each growing with the rows and the keys; then, where a head may have several
 * blocks of queries (att_by_head), its packed K and V, which also grow with the keys, up to
 * ATT_KV_PACK_MAX (a run whose packed K and V would be larger keeps tasks of a block). */
size_t cuvil_f32_attention_scratch_size_ex(const cuvil_attention_params *p, const cuvil_gemm_blocking *b) {
    const int64_t q = p->q_len, kv = p->kv_len;
    const size_t shortk = scratch_for(q < ATT_QB ? q : ATT_QB, kv < ATT_QB_KV ? kv : ATT_QB_KV, p, b);
    const size_t longk = kv > ATT_QB_KV ? scratch_for(q < ATT_QB_LONG ? q : ATT_QB_LONG, kv, p, b) : 0;
    const size_t blocks = CUVIL_ALIGN_UP(shortk > longk ? shortk : longk, 64), kvp = packed_kv_bytes(p, b);
    return q > ATT_QB_LONG ? blocks + (kvp < ATT_KV_PACK_MAX ? kvp : ATT_KV_PACK_MAX) : blocks;
}

/* Soft-capping of n scores (softcap > 0). */
static void softcap_row(const cuvil_attention_params *p, float *row, int64_t n) {
    if (p->softcap > 0.0f)
        for (int64_t j = 0; j < n; j++) row[j] = p->softcap * tanhf(row[j] / p->softcap);
}

/* The masks of query row qi (global index) on its scores row[0, kv): the additive or boolean
 * mask, the causal frontier and the window. Returns how many leading keys may be seen. */
static int64_t mask_row(const cuvil_attention_params *p, const void *mask, const int64_t *nonpad, int64_t b, int64_t h,
                        int64_t qi, float *row) {
    const int64_t kv = p->kv_len, mc = p->m_cols > 0 && p->m_cols < kv ? p->m_cols : kv;
    if (mask) {
        const int64_t base = b * p->m_bs + h * p->m_hs + qi * p->m_rs;
        if (p->mask_bool) {
            const uint8_t *m = (const uint8_t *)mask + base;
            for (int64_t j = 0; j < mc; j++)
                if (!m[j * p->m_cs]) row[j] = -INFINITY;
        } else {
            const float *m = (const float *)mask + base;
            if (p->m_cs == 1)
                for (int64_t j = 0; j < mc; j++) row[j] += m[j];
            else
                for (int64_t j = 0; j < mc; j++) row[j] += m[j * p->m_cs];
        }
        for (int64_t j = mc; j < kv; j++) row[j] = -INFINITY;   /* a shorter mask: the rest hidden */
    }
    int64_t seen = kv;
    /* the query's position among the keys */
    const int64_t at = nonpad ? qi + nonpad[b] - p->q_len : qi + kv - p->q_len - p->causal_lag;
    if (nonpad) {   /* the keys after the valid ones: hidden */
        seen = nonpad[b] < 0 ? 0 : nonpad[b] < kv ? nonpad[b] : kv;
        for (int64_t j = seen; j < kv; j++) row[j] = -INFINITY;
    }
    if (p->causal) {
        const int64_t c = at + 1 < 0 ? 0 : at + 1 > kv ? kv : at + 1;
        for (int64_t j = c; j < kv; j++) row[j] = -INFINITY;
        seen = c < seen ? c : seen;
    }
    if (p->window)
        for (int64_t j = 0; j < kv; j++)
            if ((p->win_left >= 0 && at - j > p->win_left) || (p->win_right >= 0 && j - at > p->win_right))
                row[j] = -INFINITY;
    return seen;
}

/* The largest of row[0, n) (-inf if none; a NaN never wins, *nan says one was there) and the
 * sum, in 16 lanes (two ymm: vmaxps(v, m) is v > m ? v : m). */
static float row_max(const float *row, int64_t n, int *nan) {
    float mx = -INFINITY;
    int64_t j = 0;
#if defined(__AVX__)
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, u = _mm256_setzero_ps();
    for (; j + 16 <= n; j += 16) {
        const __m256 v0 = _mm256_loadu_ps(row + j), v1 = _mm256_loadu_ps(row + j + 8);
        m0 = _mm256_max_ps(v0, m0), m1 = _mm256_max_ps(v1, m1);
        u = _mm256_or_ps(u, _mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)));
    }
    float l[16];
    _mm256_storeu_ps(l, m0), _mm256_storeu_ps(l + 8, m1);
    for (int i = 0; i < 16; i++) mx = l[i] > mx ? l[i] : mx;
    *nan |= _mm256_movemask_ps(u) != 0;
#endif
    for (; j < n; j++) {
        mx = row[j] > mx ? row[j] : mx;
        *nan |= row[j] != row[j];
    }
    return mx;
}

/* Softmax in place of a row whose first `seen` scores may be finite. */
static void softmax_row(const cuvil_attention_params *p, int64_t seen, float *row) {
    const int64_t kv = p->kv_len;
    int nan = 0;
    const float mx = row_max(row, seen, &nan);
    if (mx == -INFINITY || nan) {   /* no key seen (or a NaN score): softmax gives NaN */
        const float v = mx == -INFINITY && p->empty_rows_zero && !nan ? 0.0f : NAN;
        for (int64_t j = 0; j < kv; j++) row[j] = v;
        if (p->empty_rows_zero == 1)   /* Where(IsNaN(p), 0, p) */
            for (int64_t j = 0; j < kv; j++) row[j] = row[j] != row[j] ? 0.0f : row[j];
        return;
    }
    const float inv = 1.0f / cuvil_f32_sum_exp_shifted(row, row, seen, mx);
    for (int64_t j = 0; j < seen; j++) row[j] *= inv;
    for (int64_t j = seen; j < kv; j++) row[j] = 0.0f;
}

typedef struct att_ctx {
    const cuvil_attention_params *p;
    const float *q, *k, *v;
    const void *mask;
    const int64_t *nonpad;
    float *y;
    float *qk;      /* the scores at stage qk_mode, or NULL */
    int qk_mode;
    void *scratch;
    int64_t n_qb;   /* query blocks per (batch, head) */
    int by_head;    /* a task is a (batch, head), its K and V packed once (att_by_head) */
} att_ctx;

static int64_t kv_head(const cuvil_attention_params *p, int64_t h) { return p->kv_group > 1 ? h / p->kv_group : h; }

static void copy_qk(const att_ctx *c, int stage, int64_t b, int64_t h, int64_t qi, const float *row) {
    const cuvil_attention_params *p = c->p;
    if (c->qk && (c->qk_mode == stage || (stage == 0 && c->qk_mode == 1)))
        memcpy(c->qk + ((b * p->heads + h) * p->q_len + qi) * p->kv_len, row, sizeof(float) * (size_t)p->kv_len);
}

/* Query rows [r0, r0 + rows) of (batch b, head h): scores in s (rows x kv), the GEMMs' scratch
 * gs; kp and vp the head's K and V packed in the microkernel's panels, or NULL (packed by the
 * GEMM, as it goes). */
static void att_block(const att_ctx *c, int64_t b, int64_t h, int64_t r0, int64_t rows, float *s, void *gs,
                      const float *kp, const float *vp) {
    const cuvil_attention_params *p = c->p;
    const int64_t kv = p->kv_len;
    float *y = c->y + b * p->y_bs + h * p->y_hs + r0 * p->y_rs;
    const cuvil_gemm_blocking *bl = cuvil_gemm_default_blocking();
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    /* s = scale * q k' */
    j.M = rows;
    j.N = kv;
    j.K = p->dim;
    j.A = c->q + b * p->q_bs + h * p->q_hs + r0 * p->q_rs;
    j.lda = p->q_rs;
    j.alpha = p->scale;
    j.B = c->k + b * p->k_bs + kv_head(p, h) * p->k_hs;
    j.ldb = p->k_rs;
    j.trans_b = 1;
    if (kp) {
        j.b_packed = kp;
        j.b_packed_nr = bl->uk->nr;
        j.b_packed_kc = bl->kc;
    }
    j.C = s;
    j.ldc = kv;
    if (p->dim > 0) cuvil_f32_gemm_run_serial(&j, bl, gs);
    else memset(s, 0, sizeof(float) * (size_t)(rows * kv));
    for (int64_t i = 0; i < rows; i++) {
        float *row = s + i * kv;
        softcap_row(p, row, kv);
        copy_qk(c, 0, b, h, r0 + i, row);
        const int64_t seen = mask_row(p, c->mask, c->nonpad, b, h, r0 + i, row);
        copy_qk(c, 2, b, h, r0 + i, row);
        softmax_row(p, seen, row);
        copy_qk(c, 3, b, h, r0 + i, row);
    }
    /* y = s v */
    memset(&j, 0, sizeof j);
    j.M = rows;
    j.N = p->v_dim;
    j.K = kv;
    j.A = s;
    j.lda = kv;
    j.alpha = 1.0f;
    j.B = c->v + b * p->v_bs + kv_head(p, h) * p->v_hs;
    j.ldb = p->v_rs;
    if (vp) {
        j.b_packed = vp;
        j.b_packed_nr = bl->uk->nr;
        j.b_packed_kc = bl->kc;
    }
    j.C = y;
    j.ldc = p->y_rs;
    cuvil_f32_gemm_run_serial(&j, bl, gs);
}

static void att_task(void *vctx, int64_t t, int tid) {
    const att_ctx *c = (const att_ctx *)vctx;
    const cuvil_attention_params *p = c->p;
    const int64_t qb = q_block(p), kv = p->kv_len;
    const int64_t bh = c->by_head ? t : t / c->n_qb, h = bh % p->heads, b = bh / p->heads;
    const int64_t blk0 = c->by_head ? 0 : t % c->n_qb, blk1 = c->by_head ? c->n_qb : blk0 + 1;
    if (kv == 0) {   /* no keys: an empty sum of values */
        for (int64_t blk = blk0; blk < blk1; blk++) {
            const int64_t r0 = blk * qb, rows = cuvil_min_i64(qb, p->q_len - r0);
            float *y = c->y + b * p->y_bs + h * p->y_hs + r0 * p->y_rs;
            for (int64_t i = 0; i < rows; i++) memset(y + i * p->y_rs, 0, sizeof(float) * (size_t)p->v_dim);
        }
        return;
    }
    char *scr = cuvil_thread_scratch(c->scratch, tid);
    float *s = (float *)scr;
    void *gs = scr + CUVIL_ALIGN_UP((size_t)(qb * kv) * sizeof(float), 64);
    float *kp = NULL, *vp = NULL;
    if (c->by_head) {
        /* K and V packed once for all the head's blocks (Whisper-tiny's encoder, 1500 tokens in
         * 24 blocks: each block packed both again, 768 KB) */
        const cuvil_gemm_blocking *bl = cuvil_gemm_default_blocking();
        const int nr = bl->uk->nr;
        kp = (float *)(scr + CUVIL_ALIGN_UP(scratch_for(qb, kv, p, bl), 64));
        vp = (float *)((char *)kp + CUVIL_ALIGN_UP(cuvil_gemm_packed_b_floats(kv, p->dim, nr) * sizeof(float), 64));
        cuvil_gemm_job j;
        memset(&j, 0, sizeof j);
        if (p->dim > 0) {
            j.N = kv;
            j.K = p->dim;
            j.B = c->k + b * p->k_bs + kv_head(p, h) * p->k_hs;
            j.ldb = p->k_rs;
            j.trans_b = 1;
            cuvil_gemm_pack_b_all(&j, nr, bl->kc, kp);
        }
        if (p->v_dim > 0) {
            j.N = p->v_dim;
            j.K = kv;
            j.B = c->v + b * p->v_bs + kv_head(p, h) * p->v_hs;
            j.ldb = p->v_rs;
            j.trans_b = 0;
            cuvil_gemm_pack_b_all(&j, nr, bl->kc, vp);
        }
    }
    for (int64_t blk = blk0; blk < blk1; blk++) {
        const int64_t r0 = blk * qb, rows = cuvil_min_i64(qb, p->q_len - r0);
        /* (a block of one row takes the one-row products on the operands as they lie, as
         * with a task a block: the same sums whatever the threads) */
        att_block(c, b, h, r0, rows, s, gs, rows > 1 ? kp : NULL, rows > 1 ? vp : NULL);
    }
}

/* A task a head rather than a block of queries where a head has several blocks (K and V
 * packed once a head, not once a block) and the heads go round the threads evenly. */
static int att_by_head(const cuvil_attention_params *p, int64_t n_qb) {
    const int64_t heads = p->batch * p->heads, threads = cuvil_threads();
    return n_qb >= 2 && p->q_len > ATT_QB_LONG && packed_kv_bytes(p, cuvil_gemm_default_blocking()) <= ATT_KV_PACK_MAX &&
           (heads % threads == 0 || heads >= 4 * threads);
}

void cuvil_f32_attention_qk(const cuvil_attention_params *p, const float *q, const float *k, const float *v,
                            const void *mask, const int64_t *nonpad, float *y, float *qk, int qk_mode, void *scratch) {
    if (p->batch <= 0 || p->heads <= 0 || p->q_len <= 0) return;
    if (p->v_dim <= 0 && !qk) return;
    att_ctx c = {p, q, k, v, mask, nonpad, y, qk, qk_mode, scratch, (p->q_len + q_block(p) - 1) / q_block(p), 0};
    c.by_head = att_by_head(p, c.n_qb);
    cuvil_parallel_for(p->batch * p->heads * (c.by_head ? 1 : c.n_qb), att_task, &c);
}

void cuvil_f32_attention(const cuvil_attention_params *p, const float *q, const float *k, const float *v,
                         const void *mask, float *y, void *scratch) {
    cuvil_f32_attention_qk(p, q, k, v, mask, NULL, y, NULL, 0, scratch);
}

void cuvil_f32_kv_concat(const float *past, int64_t p_len, const float *cur, int64_t c_bs, int64_t c_hs, int64_t c_rs,
                         int64_t s_len, int64_t batch, int64_t heads, int64_t dim, float *present) {
    const int64_t t = p_len + s_len;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++) {
            float *o = present + (b * heads + h) * t * dim;
            if (p_len) memcpy(o, past + (b * heads + h) * p_len * dim, sizeof(float) * (size_t)(p_len * dim));
            for (int64_t r = 0; r < s_len; r++)
                memcpy(o + (p_len + r) * dim, cur + b * c_bs + h * c_hs + r * c_rs, sizeof(float) * (size_t)dim);
        }
}

/* The reference's score of query i for key j: masked, -inf where hidden. */
static float ref_score(const cuvil_attention_params *p, const float *q, const float *k, const void *mask, int64_t b,
                       int64_t h, int64_t i, int64_t j) {
    const int64_t at = i + p->kv_len - p->q_len - p->causal_lag;
    if (p->causal && j > at) return -INFINITY;
    if (p->window && ((p->win_left >= 0 && at - j > p->win_left) || (p->win_right >= 0 && j - at > p->win_right)))
        return -INFINITY;
    if (mask && p->m_cols > 0 && j >= p->m_cols) return -INFINITY;
    const float *qr = q + b * p->q_bs + h * p->q_hs + i * p->q_rs, *kr = k + b * p->k_bs + kv_head(p, h) * p->k_hs + j * p->k_rs;
    float acc = 0.0f;
    for (int64_t d = 0; d < p->dim; d++) acc += qr[d] * kr[d];
    float sc = p->scale * acc;
    if (p->softcap > 0.0f) sc = p->softcap * tanhf(sc / p->softcap);
    if (mask) {
        const int64_t at = b * p->m_bs + h * p->m_hs + i * p->m_rs + j * p->m_cs;
        if (p->mask_bool) sc = ((const uint8_t *)mask)[at] ? sc : -INFINITY;
        else sc += ((const float *)mask)[at];
    }
    return sc;
}

void cuvil_f32_attention__scalar(const cuvil_attention_params *p, const float *q, const float *k, const float *v,
                                 const void *mask, float *y) {
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads; h++)
            for (int64_t i = 0; i < p->q_len; i++) {
                float *yr = y + b * p->y_bs + h * p->y_hs + i * p->y_rs;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < p->kv_len; j++) {
                    const float sc = ref_score(p, q, k, mask, b, h, i, j);
                    mx = sc > mx || sc != sc ? sc : mx;
                }
                for (int64_t j = 0; j < p->kv_len; j++) sum += expf(ref_score(p, q, k, mask, b, h, i, j) - mx);
                const int none = p->kv_len > 0 && (mx == -INFINITY || mx != mx);   /* NaN row */
                for (int64_t d = 0; d < p->v_dim; d++) yr[d] = 0.0f;
                if (none) {
                    for (int64_t d = 0; d < p->v_dim; d++) yr[d] = p->empty_rows_zero == 1 || (p->empty_rows_zero && mx == -INFINITY) ? 0.0f : NAN;
                    continue;
                }
                for (int64_t j = 0; j < p->kv_len; j++) {
                    const float w = expf(ref_score(p, q, k, mask, b, h, i, j) - mx) / sum;
                    const float *vr = v + b * p->v_bs + kv_head(p, h) * p->v_hs + j * p->v_rs;
                    for (int64_t d = 0; d < p->v_dim; d++) yr[d] += w * vr[d];
                }
            }
}
