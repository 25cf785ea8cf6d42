/*
 * test_kernel_attention.c -- cuvil_f32_attention and its __scalar reference against a
 * double-precision loop written here: the layouts transformers leave q, k, v and y in
 * ([batch, seq, heads * dim] and [batch, heads, seq, dim]), float and boolean masks broadcast
 * through strides, the causal mask with and without a cache before the queries, query blocks
 * past the kernel's 64 rows, rows that see no key (NaN, or 0 with empty_rows_zero), no keys at
 * all, dim 0, and a pool of 3 threads (identical to one thread).
 */
#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

typedef struct layout {
    int heads_inner;   /* [b, s, h, d] (the projections' layout) rather than [b, h, s, d] */
} layout;

/* Strides of a [batch, heads, len, dim] tensor stored as lay says. */
static void strides(const cuvil_attention_params *p, int64_t len, int64_t dim, layout lay, int64_t *bs, int64_t *hs,
                    int64_t *rs) {
    if (lay.heads_inner) {
        *bs = len * p->heads * dim;
        *hs = dim;
        *rs = p->heads * dim;
    } else {
        *bs = p->heads * len * dim;
        *hs = len * dim;
        *rs = dim;
    }
}

static void reference(const cuvil_attention_params *p, const float *q, const float *k, const float *v, const void *mask,
                      double *y) {
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads; h++)
            for (int64_t i = 0; i < p->q_len; i++) {
                double *yr = y + b * p->y_bs + h * p->y_hs + i * p->y_rs;
                double s[2048], mx = -INFINITY, sum = 0;   /* (kv_len <= 2048 in every case here) */
                for (int64_t j = 0; j < p->kv_len; j++) {
                    double acc = 0;
                    for (int64_t d = 0; d < p->dim; d++)
                        acc += (double)q[b * p->q_bs + h * p->q_hs + i * p->q_rs + d] *
                               k[b * p->k_bs + h * p->k_hs + j * p->k_rs + d];
                    s[j] = p->scale * acc;
                    if (mask) {
                        int64_t at = b * p->m_bs + h * p->m_hs + i * p->m_rs + j * p->m_cs;
                        if (p->mask_bool) s[j] = ((const uint8_t *)mask)[at] ? s[j] : -INFINITY;
                        else s[j] += ((const float *)mask)[at];
                    }
                    if (p->causal && j > i + p->kv_len - p->q_len) s[j] = -INFINITY;
                    mx = fmax(mx, s[j]);
                }
                for (int64_t d = 0; d < p->v_dim; d++) yr[d] = 0;
                if (p->kv_len == 0) continue;
                if (mx == -INFINITY) {
                    for (int64_t d = 0; d < p->v_dim; d++) yr[d] = p->empty_rows_zero ? 0.0 : NAN;
                    continue;
                }
                for (int64_t j = 0; j < p->kv_len; j++) sum += exp(s[j] - mx);
                for (int64_t j = 0; j < p->kv_len; j++)
                    for (int64_t d = 0; d < p->v_dim; d++)
                        yr[d] += exp(s[j] - mx) / sum * v[b * p->v_bs + h * p->v_hs + j * p->v_rs + d];
            }
}

/* mask_kind: 0 none, 1 float [b, 1, 1, kv] padding mask (-inf past a length per batch item; the
 * last item sees nothing when hide_all), 2 boolean [b, 1, q, kv] random with the diagonal kept */
static int64_t bound_q, bound_kv;   /* nonzero: size the scratch for these (symbolic dims' upper bounds) */

static void run(const char *name, int64_t B, int64_t H, int64_t Q, int64_t KV, int64_t D, int64_t DV, layout lay,
                int mask_kind, int causal, int empty_zero, int hide_all) {
    cuvil_attention_params p;
    memset(&p, 0, sizeof p);
    p.batch = B, p.heads = H, p.q_len = Q, p.kv_len = KV, p.dim = D, p.v_dim = DV;
    p.scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
    p.causal = causal;
    p.empty_rows_zero = empty_zero;
    strides(&p, Q, D, lay, &p.q_bs, &p.q_hs, &p.q_rs);
    strides(&p, KV, D, lay, &p.k_bs, &p.k_hs, &p.k_rs);
    strides(&p, KV, DV, lay, &p.v_bs, &p.v_hs, &p.v_rs);
    strides(&p, Q, DV, lay, &p.y_bs, &p.y_hs, &p.y_rs);
    const size_t nq = (size_t)(B * H * Q * D) + 1, nk = (size_t)(B * H * KV * D) + 1, nv = (size_t)(B * H * KV * DV) + 1,
                 ny = (size_t)(B * H * Q * DV) + 1;
    float *q = ktu_falloc(nq), *k = ktu_falloc(nk), *v = ktu_falloc(nv), *y = ktu_falloc(ny), *y3 = ktu_falloc(ny),
          *ys = ktu_falloc(ny);
    double *ref = malloc(ny * sizeof(double));
    ktu_fill(q, nq, -2, 2);
    ktu_fill(k, nk, -2, 2);
    ktu_fill(v, nv, -1, 1);
    void *mask = NULL;
    if (mask_kind == 1) {
        float *m = ktu_falloc((size_t)(B * KV) + 1);
        for (int64_t b = 0; b < B; b++) {
            const int64_t len = hide_all && b == B - 1 ? 0 : KV - (b * 7) % (KV > 1 ? KV : 1);
            for (int64_t j = 0; j < KV; j++) m[b * KV + j] = j < len ? ktu_uniform(-0.5f, 0.5f) : -INFINITY;
        }
        p.m_bs = KV, p.m_hs = 0, p.m_rs = 0, p.m_cs = 1;
        mask = m;
    } else if (mask_kind == 2) {
        uint8_t *m = ktu_alloc((size_t)(B * Q * KV) + 1);
        for (int64_t i = 0; i < B * Q * KV; i++) m[i] = (ktu_u32() & 3) != 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < Q && i < KV; i++) m[(b * Q + i) * KV + i] = 1;
        p.mask_bool = 1;
        p.m_bs = Q * KV, p.m_hs = 0, p.m_rs = KV, p.m_cs = 1;
        mask = m;
    }
    reference(&p, q, k, v, mask, ref);
    /* the scratch sized as a build with symbolic dims sizes it: for the upper bounds */
    cuvil_attention_params pb = p;
    pb.q_len = bound_q > Q ? bound_q : Q, pb.kv_len = bound_kv > KV ? bound_kv : KV;
    const size_t per = CUVIL_ALIGN_UP(cuvil_f32_attention_scratch_size(&pb), 64);
    void *scratch = ktu_alloc(3 * per);
    unsigned char *one = ktu_alloc(per + 256);   /* one thread's slice and a canary after it */
    memset(one + per, 0xA5, 256);
    for (size_t i = 0; i < ny; i++) y[i] = y3[i] = ys[i] = 12345.0f;   /* every y must be written */
    cuvil_f32_attention(&p, q, k, v, mask, y, one);
    ktu_checks++;
    for (int i = 0; i < 256; i++)
        if (one[per + (size_t)i] != 0xA5) {
            ktu_fail("attention %s wrote past its scratch (sized for q %lld, kv %lld)", name, (long long)pb.q_len,
                     (long long)pb.kv_len);
            break;
        }
    free(one);
    cuvil_f32_attention__scalar(&p, q, k, v, mask, ys);
    cuvil_pool *pool = cuvil_pool_create(3, per, ktu_aligned_alloc, ktu_aligned_free, NULL);
    if (!pool) ktu_fail("no thread pool");
    const cuvil_pool *prev = cuvil_pool_bind(pool);
    cuvil_f32_attention(&p, q, k, v, mask, y3, scratch);
    cuvil_pool_bind(prev);
    cuvil_pool_destroy(pool);
    const size_t n = ny - 1;
    ktu_check(y, ref, n, 1e-4, 1e-5, "attention %s", name);
    ktu_check(ys, ref, n, 1e-4, 1e-5, "attention__scalar %s", name);
    ktu_checks++;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&y[i], &y3[i], sizeof(float)) && !(isnan(y[i]) && isnan(y3[i]))) {
            ktu_fail("attention %s: 3 threads differ from 1 at %zu", name, i);
            break;
        }
    free(q), free(k), free(v), free(y), free(y3), free(ys), free(ref), free(mask), free(scratch);
}

int main(void) {
    setenv("CUVIL_OVERSUBSCRIBE", "1", 1);
    const layout proj = {1}, heads = {0};
    /* BERT: the projections' layout, a padding mask, 140 rows (a block of 128 and one of 12) */
    run("bert-like", 2, 3, 140, 140, 16, 16, proj, 1, 0, 0, 0);
    /* a build for up to 1100 (or 300) rows and keys, run at fewer: blocks of 64 rows past 1024
     * keys, of 128 below; the GEMMs' K blocks (the keys) are not monotonic in K */
    const int64_t runs[][3] = {{1100, 1100, 1100}, {1100, 1024, 1024}, {1100, 700, 300}, {300, 256, 256}, {300, 200, 129}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char nm[96];
        snprintf(nm, sizeof nm, "bounded by %lld, run at q %lld kv %lld", (long long)runs[i][0], (long long)runs[i][2],
                 (long long)runs[i][1]);
        bound_q = bound_kv = runs[i][0];
        run(nm, 1, 2, runs[i][2], runs[i][1], 16, 16, proj, 1, 0, 0, 0);
    }
    bound_q = bound_kv = 0;
    /* Whisper-like: blocks of 64 rows past 1024 keys, a task a head (K and V packed once a head)
     * with 1 and 3 threads; the runs above, of 2 heads, take it with 1 thread and not with 3 */
    run("whisper-like, 3 heads of 1030 rows", 1, 3, 1030, 1030, 16, 8, proj, 0, 0, 0, 0);
    run("bert-like, one item masked out, rows to 0", 3, 2, 9, 9, 8, 8, proj, 1, 0, 1, 1);
    run("bert-like, one item masked out, rows NaN", 3, 2, 9, 9, 8, 8, proj, 1, 0, 0, 1);
    /* GPT-2: the prompt (causal, square), a decode step after a cache, a chunk after a cache */
    run("gpt2 prompt causal", 1, 4, 67, 67, 16, 16, heads, 0, 1, 0, 0);
    run("gpt2 decode step", 2, 4, 1, 37, 16, 16, heads, 0, 1, 0, 0);
    run("causal chunk after a cache", 1, 2, 5, 12, 8, 8, proj, 0, 1, 0, 0);
    run("boolean mask", 2, 2, 11, 13, 8, 12, heads, 2, 0, 0, 0);
    run("boolean mask and causal", 2, 2, 13, 13, 8, 8, proj, 2, 1, 1, 0);
    run("no mask, v wider than q", 1, 3, 3, 5, 4, 7, heads, 0, 0, 0, 0);
    run("no keys", 2, 2, 3, 0, 8, 8, heads, 0, 0, 0, 0);
    run("dim 0", 1, 2, 3, 4, 0, 5, heads, 0, 0, 0, 0);
    return ktu_finish("test_kernel_attention");
}
