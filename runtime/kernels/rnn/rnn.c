/*
 * rnn.c -- ONNX's RNN, GRU and LSTM (cuvil_rt.h: cuvil_f32_rnn), every direction, with sequence
 * lengths, initial states, peepholes, clip, input_forget, linear_before_reset and the
 * activations the ops name.
 *
 * Per direction: the input projection of every step is one GEMM (x [steps * batch, input] times
 * w', the biases folded in), then each step adds h r' (a GEMM of batch rows on r packed once for
 * the whole sequence) and applies the cell row by row. GRU's candidate gate multiplies r' by
 * (reset . h) (linear_before_reset 0) or multiplies the reset into (h r' + its bias) (1): two
 * packed blocks of r, the z/r gates' and the h gate's.
 * On 8-bit weights (cuvil_rnn_q8, DynamicQuantizeLSTM) the same loop runs both products on the
 * integer GEMM: x quantized once, h before each step, the int32 sums scaled back to float.
 */
#include <math.h>
#include <string.h>

#include "../rt_int.h"

static int n_gates(int cell) { return cell == CUVIL_CELL_LSTM ? 4 : cell == CUVIL_CELL_GRU ? 3 : 1; }

static float act(const cuvil_rnn_act *a, float x) {
    switch (a->fn) {
    case CUVIL_RNN_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CUVIL_RNN_ACT_TANH: return tanhf(x);
    case CUVIL_RNN_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case CUVIL_RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case CUVIL_RNN_ACT_LEAKY_RELU: return x >= 0.0f ? x : a->alpha * x;
    case CUVIL_RNN_ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.0f;
    case CUVIL_RNN_ACT_SCALED_TANH: return a->alpha * tanhf(a->beta * x);
    case CUVIL_RNN_ACT_HARD_SIGMOID: {
        const float v = a->alpha * x + a->beta;
        return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    }
    case CUVIL_RNN_ACT_ELU: return x >= 0.0f ? x : a->alpha * (expf(x) - 1.0f);
    case CUVIL_RNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    default: return x > 20.0f ? x : log1pf(expf(x));   /* softplus */
    }
}

static inline float clipf(float v, float c) { return c > 0.0f ? (v < -c ? -c : v > c ? c : v) : v; }

/* The scratch's parts, each 64-byte aligned. */
typedef struct rnn_parts {
    size_t xw, gates, h, c, rh, bias, pack, pack2, xq, hq, sc, gemm, total;
} rnn_parts;

static size_t al(size_t floats) { return CUVIL_ALIGN_UP(floats * sizeof(float), 64); }

/* packed: the float weights packed ahead; q8: the 8-bit ones (cuvil_rnn_q8: x and h quantized
 * into xq and hq, the products' float scales in sc, the integer GEMM's scratch last) */
static rnn_parts parts(const cuvil_rnn_params *p, const cuvil_gemm_blocking *bl, int packed, int q8) {
    const int64_t G = n_gates(p->cell), H = p->hidden, B = p->batch, nr = bl->uk->nr;
    const int64_t n1 = p->cell == CUVIL_CELL_GRU ? 2 * H : G * H;   /* the first packed block's columns */
    rnn_parts q;
    size_t o = 0;
    q.xw = o, o += al((size_t)(p->seq * B * G * H));
    q.gates = o, o += al((size_t)(B * G * H));
    q.h = o, o += al((size_t)(B * H));
    q.c = o, o += al((size_t)(B * H));
    q.rh = o, o += al((size_t)(B * H));
    q.bias = o, o += al((size_t)(G * H));
    /* (r's blocks packed per call; none with the weights packed ahead) */
    const int64_t rows = p->seq * B > B ? p->seq * B : B;
    if (q8) {
        q.pack = q.pack2 = o;
        q.xq = o, o += CUVIL_ALIGN_UP((size_t)(p->seq * B * p->input), 64);
        q.hq = o, o += CUVIL_ALIGN_UP((size_t)(B * H), 64);
        q.sc = o, o += al((size_t)(G * H));
        q.gemm = o;
        size_t g1 = cuvil_qgemm_scratch_size(rows, G * H, p->input, 0, 1), g2 = cuvil_qgemm_scratch_size(B, G * H, H, 0, 1);
        o += g1 > g2 ? g1 : g2;
        q.total = o;
        return q;
    }
    q.xq = q.hq = q.sc = 0;
    q.pack = o, o += packed ? 0 : al(cuvil_gemm_packed_b_floats(n1, H, (int)nr));
    q.pack2 = o, o += packed ? 0 : al(p->cell == CUVIL_CELL_GRU ? cuvil_gemm_packed_b_floats(H, H, (int)nr) : 1);
    q.gemm = o;
    size_t g1 = cuvil_gemm_job_scratch_size(rows, G * H, p->input, bl), g2 = cuvil_gemm_job_scratch_size(B, G * H, H, bl);
    o += g1 > g2 ? g1 : g2;
    q.total = o;
    return q;
}

size_t cuvil_f32_rnn_scratch_size(const cuvil_rnn_params *p) { return parts(p, cuvil_gemm_default_blocking(), 0, 0).total; }
size_t cuvil_f32_rnn_scratch_size_ex(const cuvil_rnn_params *p, const cuvil_gemm_blocking *b) { return parts(p, b, 0, 0).total; }
size_t cuvil_f32_rnn_packed_scratch_size(const cuvil_rnn_params *p) { return parts(p, cuvil_gemm_default_blocking(), 1, 0).total; }
size_t cuvil_f32_rnn_packed_scratch_size_ex(const cuvil_rnn_params *p, const cuvil_gemm_blocking *b) { return parts(p, b, 1, 0).total; }
size_t cuvil_rnn_q8_scratch_size(const cuvil_rnn_params *p) { return parts(p, cuvil_gemm_default_blocking(), 0, 1).total; }

/* C[B, n] = A[B, H] times the packed block (n columns of r'). */
static void recur(const cuvil_rnn_params *p, const float *a, const float *r, const float *pack, int nr, int64_t kc, int64_t n,
                  float *c, int64_t ldc, void *gs) {
    const cuvil_gemm_blocking *bl = cuvil_gemm_default_blocking();
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.M = p->batch;
    j.N = n;
    j.K = p->hidden;
    j.A = a;
    j.lda = p->hidden;
    j.alpha = 1.0f;
    j.B = r;
    j.ldb = p->hidden;
    j.trans_b = 1;
    j.C = c;
    j.ldc = ldc;
    j.b_packed = pack;
    j.b_packed_nr = nr;
    j.b_packed_kc = kc;
    cuvil_f32_gemm_run_serial(&j, bl, gs);
}

/* b' (n rows of k values, b [n, k]) packed as the GEMM's B in nr-column panels, kc blocking */
static void pack_block(const float *b, int64_t n, int64_t k, int nr, int64_t kc, float *dst) {
    cuvil_gemm_job j;
    memset(&j, 0, sizeof j);
    j.N = n;
    j.K = k;
    j.B = b;
    j.ldb = k;
    j.trans_b = 1;
    cuvil_gemm_pack_b_all(&j, nr, kc, dst);
}

/* One direction's r (rd) as each step's product reads it: its first block (GRU: the z/r gates'
 * 2H columns, else all G H), then GRU's h gate's H columns at dst2 */
static void pack_r(const cuvil_rnn_params *p, const float *rd, int nr, int64_t kc, float *dst, float *dst2) {
    const int64_t H = p->hidden, gru = p->cell == CUVIL_CELL_GRU;
    pack_block(rd, gru ? 2 * H : n_gates(p->cell) * H, H, nr, kc, dst);
    if (gru) pack_block(rd + 2 * H * H, H, H, nr, kc, dst2);
}

/* Per direction, the weights packed ahead: w' for the input projection (G H columns over the
 * input), then r's blocks as each step's product reads them (GRU: its z/r gates', then the h
 * gate's). Neither depends on the sequence or the batch. */
static size_t packed_parts(const cuvil_rnn_params *p, int nr, size_t part[3]) {
    const int64_t H = p->hidden, GH = n_gates(p->cell) * H, gru = p->cell == CUVIL_CELL_GRU;
    part[0] = p->input > 0 ? cuvil_gemm_packed_b_floats(GH, p->input, nr) : 0;
    part[1] = cuvil_gemm_packed_b_floats(gru ? 2 * H : GH, H, nr);
    part[2] = gru ? cuvil_gemm_packed_b_floats(H, H, nr) : 0;
    return part[0] + part[1] + part[2];
}

size_t cuvil_f32_rnn_packed_floats(const cuvil_rnn_params *p, int nr) {
    size_t part[3];
    return packed_parts(p, nr, part) * (size_t)p->dirs;
}

void cuvil_f32_rnn_pack(const cuvil_rnn_params *p, const float *w, const float *r, int nr, int64_t kc, float *dst) {
    const int64_t I = p->input, H = p->hidden, GH = n_gates(p->cell) * H;
    size_t part[3];
    const size_t per = packed_parts(p, nr, part);
    for (int d = 0; d < p->dirs; d++, dst += per) {
        if (I > 0) pack_block(w + d * GH * I, GH, I, nr, kc, dst);
        pack_r(p, r + d * GH * H, nr, kc, dst + part[0], dst + part[0] + part[1]);
    }
}

/* ===== 8-bit weights (cuvil_rnn_q8) ===== */
/* Per direction: w's block (K input, N 4 hidden), then r's (K hidden), each 64-byte aligned and
 * with room for a pair-split's corrections (up to cuvil_qgemm_split_cap). */
static size_t q8_block_bytes(int64_t K, int64_t N) {
    return CUVIL_ALIGN_UP(cuvil_qgemm_packed_b_split_bytes(K, N, cuvil_qgemm_split_cap(K, N)), 64);
}
static size_t q8_w_bytes(const cuvil_rnn_params *p) { return p->input > 0 ? q8_block_bytes(p->input, 4 * p->hidden) : 0; }
static size_t q8_r_bytes(const cuvil_rnn_params *p) { return q8_block_bytes(p->hidden, 4 * p->hidden); }

static void q8_pack_block(int64_t K, int64_t N, int split, int wt, const void *b, void *dst) {
    memset(dst, 0, q8_block_bytes(K, N));   /* (the room not taken: a compiled model's bytes are all defined) */
    if (split && cuvil_qgemm_pair_excess(K, N, wt, b, N, 1) <= cuvil_qgemm_split_cap(K, N)) cuvil_qgemm_pack_b_split(K, N, wt, b, N, 1, dst);
    else cuvil_qgemm_pack_b(K, N, wt, b, N, 1, dst);
}

size_t cuvil_rnn_q8_packed_bytes(const cuvil_rnn_params *p) { return (q8_w_bytes(p) + q8_r_bytes(p)) * (size_t)p->dirs; }

void cuvil_rnn_q8_pack(const cuvil_rnn_params *p, int split, int wt, const void *w, const void *r, void *dst) {
    const int64_t I = p->input, H = p->hidden, GH = 4 * H;
    char *o = dst;
    for (int d = 0; d < p->dirs; d++) {
        if (I > 0) q8_pack_block(I, GH, split, wt, (const int8_t *)w + d * I * GH, o);
        o += q8_w_bytes(p);
        q8_pack_block(H, GH, split, wt, (const int8_t *)r + d * H * GH, o);
        o += q8_r_bytes(p);
    }
}

/* y [M, N] (row stride N) = (a - az) (B - zp) as floats: times as * scale (direction d's, one
 * or per column), plus fbias (NULL or per column), on the packed block bp; sc: N floats. */
static void q8_product(const cuvil_rnn_params *p, const cuvil_rnn_q8_weights *q, int d, int64_t M, int64_t N, int64_t K,
                       const uint8_t *a, float as, uint8_t az, const void *bp, const float *scale, int64_t sn, const void *zp,
                       const float *fbias, float *sc, float *y, void *gs) {
    const int per = sn != p->dirs;   /* (op_rnn checked: p->dirs, or dirs x N) */
    if (per)
        for (int64_t n = 0; n < N; n++) sc[n] = as * scale[d * N + n];
    else
        sc[0] = as * scale[d];
    cuvil_qgemm_epi e;
    memset(&e, 0, sizeof e);
    e.kind = CUVIL_QEPI_F32;
    e.scale = sc;
    e.scale_per = per ? CUVIL_QPER_COL : CUVIL_QPER_ONE;
    e.fbias = fbias;
    e.bias_per = CUVIL_QPER_COL;
    e.y = y;
    e.ldy = N;
    const void *bz = zp ? (const void *)((const int8_t *)zp + (per ? d * N : d)) : NULL;
    cuvil_qgemm(M, N, K, CUVIL_T_U8, a, K, NULL, q->wt, NULL, N, bp, &az, 1, bz, zp ? (per ? N : 1) : 0, &e, gs);
}

static int rnn_run(const cuvil_rnn_params *p, const float *x, const float *w, const float *r, const float *packed, int packed_nr,
                   int64_t packed_kc, const float *b, const int32_t *seq_lens, const float *h0, const float *c0,
                   const float *peep, float *y, float *yh, float *yc, void *scratch, const cuvil_rnn_q8_weights *q8);

int cuvil_rnn_q8(const cuvil_rnn_params *p, const cuvil_rnn_q8_weights *q, const float *x, const float *b, const int32_t *seq_lens,
                 const float *h0, const float *c0, const float *peep, float *y, float *yh, float *yc, void *scratch) {
    if (p->cell != CUVIL_CELL_LSTM || p->layout) return 1;   /* (op_rnn refuses these: the packing is LSTM's 4H) */
    return rnn_run(p, x, NULL, NULL, NULL, 0, 0, b, seq_lens, h0, c0, peep, y, yh, yc, scratch, q);
}

int cuvil_f32_rnn(const cuvil_rnn_params *p, const float *x, const float *w, const float *r, const float *b,
                  const int32_t *seq_lens, const float *h0, const float *c0, const float *peep, float *y, float *yh,
                  float *yc, void *scratch) {
    return rnn_run(p, x, w, r, NULL, 0, 0, b, seq_lens, h0, c0, peep, y, yh, yc, scratch, NULL);
}

int cuvil_f32_rnn_packed(const cuvil_rnn_params *p, const float *x, const float *w, const float *r, const float *packed,
                         int packed_nr, int64_t packed_kc, const float *b, const int32_t *seq_lens, const float *h0,
                         const float *c0, const float *peep, float *y, float *yh, float *yc, void *scratch) {
    return rnn_run(p, x, w, r, packed, packed_nr, packed_kc, b, seq_lens, h0, c0, peep, y, yh, yc, scratch, NULL);
}

static int rnn_run(const cuvil_rnn_params *p, const float *x, const float *w, const float *r, const float *packed, int packed_nr,
                   int64_t packed_kc, const float *b, const int32_t *seq_lens, const float *h0, const float *c0,
                   const float *peep, float *y, float *yh, float *yc, void *scratch, const cuvil_rnn_q8_weights *q8) {
    const int64_t S = p->seq, B = p->batch, I = p->input, H = p->hidden, G = n_gates(p->cell), GH = G * H;
    if (seq_lens)
        for (int64_t i = 0; i < B; i++)
            if (seq_lens[i] < 0 || seq_lens[i] > S) return 1;
    const rnn_parts q = parts(p, cuvil_gemm_default_blocking(), packed != NULL, q8 != NULL);
    char *base = (char *)scratch;
    float *xw = (float *)(base + q.xw), *gates = (float *)(base + q.gates), *h = (float *)(base + q.h);
    float *c = (float *)(base + q.c), *rh = (float *)(base + q.rh), *bias = (float *)(base + q.bias);
    float *pack = (float *)(base + q.pack), *pack2 = (float *)(base + q.pack2);
    void *gs = base + q.gemm;
    uint8_t *xq = (uint8_t *)(base + q.xq), *hq = (uint8_t *)(base + q.hq);
    float *sc = (float *)(base + q.sc), xs = 1.0f;
    uint8_t xz = 0;
    /* 8-bit: x quantized once for every direction's input projection, over the steps any batch
     * item takes (ONNX Runtime's range: the later steps' x is not read), layout 0 (op_rnn) */
    int64_t steps = S;
    if (q8 && seq_lens) {
        steps = 0;
        for (int64_t i = 0; i < B; i++) steps = seq_lens[i] > steps ? seq_lens[i] : steps;
    }
    if (q8 && steps * B * I > 0) cuvil_dynamic_quantize(steps * B * I, x, xq, &xs, &xz);
    const cuvil_gemm_blocking *bl = cuvil_gemm_default_blocking();
    const int gru = p->cell == CUVIL_CELL_GRU, lstm = p->cell == CUVIL_CELL_LSTM;
    /* the weights packed ahead (packed: w and r unread), else r's blocks packed here per direction */
    const int nr = packed ? packed_nr : bl->uk->nr;
    const int64_t kc = packed ? packed_kc : bl->kc;
    size_t part[3] = {0, 0, 0};
    const size_t per = packed ? packed_parts(p, nr, part) : 0;
    for (int d = 0; d < p->dirs; d++) {
        const int rev = p->dirs == 2 ? d == 1 : p->reverse;
        const float *wd = packed || !w ? NULL : w + d * GH * I, *rd = packed || !r ? NULL : r + d * GH * H, *bd = b ? b + d * 2 * GH : NULL;
        const float *pw = packed ? packed + d * per : NULL;
        const float *rp = packed ? pw + part[0] : pack, *rp2 = packed ? pw + part[0] + part[1] : pack2;
        const char *qw = q8 ? (const char *)q8->packed + (size_t)d * (q8_w_bytes(p) + q8_r_bytes(p)) : NULL;
        const char *qr = q8 ? qw + q8_w_bytes(p) : NULL;
        const cuvil_rnn_act *a = p->act[d];
        /* the biases: Wb + Rb, but for GRU's candidate with linear_before_reset, Wb alone (its Rb
         * is inside the reset's product) */
        for (int64_t k = 0; k < GH; k++)
            bias[k] = bd ? bd[k] + ((gru && p->linear_before_reset && k >= 2 * H) ? 0.0f : bd[GH + k]) : 0.0f;
        /* every step's input projection: xw[row] = x[row] w' + bias, rows in x's order */
        if (S * B > 0 && GH > 0) {
            cuvil_gemm_job j;
            memset(&j, 0, sizeof j);
            j.M = S * B;
            j.N = GH;
            j.K = I;
            j.A = x;
            j.lda = I;
            j.alpha = 1.0f;
            j.B = wd;
            j.ldb = I;
            j.trans_b = 1;
            if (pw) j.b_packed = pw, j.b_packed_nr = nr, j.b_packed_kc = kc;
            j.C = xw;
            j.ldc = GH;
            j.bias = bias;
            j.bias_cs = 1;
            j.beta = 1.0f;
            if (I > 0 && q8) {
                q8_product(p, q8, d, steps * B, GH, I, xq, xs, xz, qw, q8->w_scale, q8->ws_n, q8->w_zp, bias, sc, xw, gs);
            } else if (I > 0) {
                cuvil_f32_gemm_run_serial(&j, bl, gs);
            } else {
                for (int64_t i = 0; i < S * B; i++) memcpy(xw + i * GH, bias, sizeof(float) * (size_t)GH);
            }
        }
        if (!packed && !q8) pack_r(p, rd, nr, kc, pack, pack2);
        const float *rd2 = rd ? rd + 2 * H * H : NULL;
        for (int64_t bb = 0; bb < B; bb++) {   /* [dirs, batch, hidden], layout 1 [batch, dirs, hidden] */
            const int64_t at = (p->layout ? bb * p->dirs + d : d * B + bb) * H;
            for (int64_t k = 0; k < H; k++) {
                h[bb * H + k] = h0 ? h0[at + k] : 0.0f;
                c[bb * H + k] = c0 ? c0[at + k] : 0.0f;
            }
        }
        const float *pd = peep ? peep + d * 3 * H : NULL;
        /* an LSTM of the usual activations (sigmoid, tanh, tanh) without peepholes or coupled
         * gates: its cell on whole rows of the vector activations (the scalar loop below calls
         * expf and tanhf per value) */
        const int vcell = lstm && !pd && !p->input_forget && a[0].fn == CUVIL_RNN_ACT_SIGMOID && a[1].fn == CUVIL_RNN_ACT_TANH &&
                          a[2].fn == CUVIL_RNN_ACT_TANH;
        /* a GRU of the usual activations (sigmoid, tanh): its gates on whole rows the same way */
        const int vgru = gru && a[0].fn == CUVIL_RNN_ACT_SIGMOID && a[1].fn == CUVIL_RNN_ACT_TANH;
        const cuvil_act_params sig = {CUVIL_ACT_SIGMOID, 0.0f, 0.0f}, th = {CUVIL_ACT_TANH, 0.0f, 0.0f};
        for (int64_t s = 0; s < S; s++) {
            const int64_t t = rev ? S - 1 - s : s;
            if (H > 0 && q8 && t >= steps) {   /* (every row past its length: nothing reads the gates) */
            } else if (H > 0 && q8) {   /* gates = h r', h quantized as a whole */
                float hs;
                uint8_t hz;
                cuvil_dynamic_quantize(B * H, h, hq, &hs, &hz);
                q8_product(p, q8, d, B, GH, H, hq, hs, hz, qr, q8->r_scale, q8->rs_n, q8->r_zp, NULL, sc, gates, gs);
            } else if (H > 0) {
                recur(p, h, rd, rp, nr, kc, gru ? 2 * H : GH, gates, GH, gs);   /* gates = h r' */
            }
            if (gru && !p->linear_before_reset) {   /* the candidate's product takes (reset . h): its reset first */
                for (int64_t bb = 0; bb < B; bb++) {
                    const float *xr = xw + (p->layout ? bb * S + t : t * B + bb) * GH;
                    float *rr = rh + bb * H;
                    if (vgru) {   /* the reset gate on the row, then times h */
                        for (int64_t k = 0; k < H; k++) rr[k] = clipf(xr[H + k] + gates[bb * GH + H + k], p->clip);
                        cuvil_f32_unary(&sig, rr, rr, (size_t)H);
                        for (int64_t k = 0; k < H; k++) rr[k] *= h[bb * H + k];
                        continue;
                    }
                    for (int64_t k = 0; k < H; k++)
                        rr[k] = act(&a[0], clipf(xr[H + k] + gates[bb * GH + H + k], p->clip)) * h[bb * H + k];
                }
                if (H > 0) recur(p, rh, rd2, rp2, nr, kc, H, gates + 2 * H, GH, gs);
            } else if (gru && H > 0) {
                recur(p, h, rd2, rp2, nr, kc, H, gates + 2 * H, GH, gs);
            }
            for (int64_t bb = 0; bb < B; bb++) {
                float *yo = y ? y + (p->layout ? (bb * S + t) * p->dirs + d : (t * p->dirs + d) * B + bb) * H : NULL;
                if (seq_lens && t >= seq_lens[bb]) {   /* past its length: 0 out, the state kept */
                    if (yo) memset(yo, 0, sizeof(float) * (size_t)H);
                    continue;
                }
                const float *xr = xw + (p->layout ? bb * S + t : t * B + bb) * GH;
                float *gr = gates + bb * GH, *hr = h + bb * H, *cr = c + bb * H;
                if (vcell) {   /* (i, o, f, c: sigmoid on the first three, tanh on the last, whole rows) */
                    for (int64_t k = 0; k < GH; k++) gr[k] = clipf(xr[k] + gr[k], p->clip);
                    cuvil_f32_unary(&sig, gr, gr, (size_t)(3 * H));
                    cuvil_f32_unary(&th, gr + 3 * H, gr + 3 * H, (size_t)H);
                    for (int64_t k = 0; k < H; k++) cr[k] = gr[2 * H + k] * cr[k] + gr[k] * gr[3 * H + k];
                    cuvil_f32_unary(&th, cr, rh + bb * H, (size_t)H);
                    for (int64_t k = 0; k < H; k++) hr[k] = gr[H + k] * rh[bb * H + k];
                    if (yo) memcpy(yo, hr, sizeof(float) * (size_t)H);
                    continue;
                }
                if (vgru) {   /* z (and the reset, linear_before_reset) by sigmoid, the candidate by tanh, whole rows */
                    const float *rb = bd ? bd + GH + 2 * H : NULL;
                    for (int64_t k = 0; k < H; k++) gr[k] = clipf(xr[k] + gr[k], p->clip);
                    cuvil_f32_unary(&sig, gr, gr, (size_t)H);
                    if (p->linear_before_reset) {
                        for (int64_t k = 0; k < H; k++) gr[H + k] = clipf(xr[H + k] + gr[H + k], p->clip);
                        cuvil_f32_unary(&sig, gr + H, gr + H, (size_t)H);
                        for (int64_t k = 0; k < H; k++)
                            gr[2 * H + k] = clipf(xr[2 * H + k] + gr[H + k] * (gr[2 * H + k] + (rb ? rb[k] : 0.0f)), p->clip);
                    } else {
                        for (int64_t k = 0; k < H; k++) gr[2 * H + k] = clipf(xr[2 * H + k] + gr[2 * H + k], p->clip);
                    }
                    cuvil_f32_unary(&th, gr + 2 * H, gr + 2 * H, (size_t)H);
                    for (int64_t k = 0; k < H; k++) hr[k] = (1.0f - gr[k]) * gr[2 * H + k] + gr[k] * hr[k];
                    if (yo) memcpy(yo, hr, sizeof(float) * (size_t)H);
                    continue;
                }
                for (int64_t k = 0; k < H; k++) {
                    if (lstm) {
                        const float ci = cr[k];
                        float ig = clipf(xr[k] + gr[k] + (pd ? pd[k] * ci : 0.0f), p->clip);
                        float fg = clipf(xr[2 * H + k] + gr[2 * H + k] + (pd ? pd[2 * H + k] * ci : 0.0f), p->clip);
                        const float cg = act(&a[1], clipf(xr[3 * H + k] + gr[3 * H + k], p->clip));
                        ig = act(&a[0], ig);
                        fg = p->input_forget ? 1.0f - ig : act(&a[0], fg);
                        const float cn = fg * ci + ig * cg;
                        const float og = act(&a[0], clipf(xr[H + k] + gr[H + k] + (pd ? pd[H + k] * cn : 0.0f), p->clip));
                        cr[k] = cn;
                        hr[k] = og * act(&a[2], cn);
                    } else if (gru) {
                        const float z = act(&a[0], clipf(xr[k] + gr[k], p->clip));
                        float hh;
                        if (p->linear_before_reset) {
                            const float rg = act(&a[0], clipf(xr[H + k] + gr[H + k], p->clip));
                            hh = act(&a[1], clipf(xr[2 * H + k] + rg * (gr[2 * H + k] + (bd ? bd[GH + 2 * H + k] : 0.0f)),
                                                  p->clip));
                        } else {
                            hh = act(&a[1], clipf(xr[2 * H + k] + gr[2 * H + k], p->clip));
                        }
                        hr[k] = (1.0f - z) * hh + z * hr[k];
                    } else {
                        hr[k] = act(&a[0], clipf(xr[k] + gr[k], p->clip));
                    }
                }
                if (yo) memcpy(yo, hr, sizeof(float) * (size_t)H);
            }
        }
        for (int64_t bb = 0; bb < B; bb++) {
            const int64_t at = (p->layout ? bb * p->dirs + d : d * B + bb) * H;
            const int none = seq_lens && seq_lens[bb] == 0;   /* no step: 0, as ONNX Runtime gives */
            for (int64_t k = 0; k < H; k++) {
                if (yh) yh[at + k] = none ? 0.0f : h[bb * H + k];
                if (yc) yc[at + k] = none ? 0.0f : c[bb * H + k];
            }
        }
    }
    return 0;
}
