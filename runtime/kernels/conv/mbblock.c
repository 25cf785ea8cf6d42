/*
 * mbblock.c -- an inverted-residual block (MobileNetV2's expand 1x1 -> depthwise KxK -> project
 * 1x1, + residual) run band by band, so that its wide middle tensors never leave the cache.
 *
 * Run layer by layer, the expanded tensor (96 x 112 x 112 floats: 4.8 MB) is written by the
 * expand conv and read back by the depthwise one, and the depthwise output written and read
 * back by the projection: four passes over tensors larger than L2, which is where MobileNetV2
 * spends its time on a CPU. Here each band of R output rows computes the expanded rows it
 * needs (its own rows and the K - S halo rows it shares with its neighbours, computed again),
 * the depthwise conv of those, and the projection of the band, all in a thread's scratch of a
 * few hundred KB. Bands are independent, so they are also the unit of work for the threads.
 *
 * Without an expand conv (ex.M == 0: MobileNetV2's first block, depthwise then projection), a
 * band's depthwise conv reads its rows of x in place; what it saves is the round trip of the
 * depthwise output.
 *
 * Each of the three convs is exactly what cuvil_f32_conv2d_prepacked would do with its
 * parameters (the same GEMM driver and microkernel on the same prepacked weights, the same
 * depthwise loop): only the order of the work changes, and the halo rows' recomputation.
 */
#include <string.h>

#include "../rt_int.h"

/* The expanded rows of one band: what its bytes may take (L2 is 512 KB-2 MB on the CPUs we
 * target; the band's depthwise output and the GEMM panels share it). */
#define BAND_BYTES (384 * 1024)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int cuvil_mbblock_applies(const cuvil_mbblock_params *p) {
    const cuvil_conv2d_params *e = &p->ex, *d = &p->dw, *r = &p->pr;
    const int no_ex = e->M == 0; /* x is the depthwise conv's input */
    const int pw_e = no_ex || (e->KH == 1 && e->KW == 1 && e->stride_h == 1 && e->stride_w == 1 && e->pad_t == 0 &&
                     e->pad_l == 0 && e->group == 1 && e->OH == e->H && e->OW == e->W && e->packed_mr > 0 &&
                     e->algo == 0 && e->N == d->N && e->M == d->C && e->OH == d->H && e->OW == d->W);
    const int pw_r = r->KH == 1 && r->KW == 1 && r->stride_h == 1 && r->stride_w == 1 && r->pad_t == 0 &&
                     r->pad_l == 0 && r->group == 1 && r->OH == r->H && r->OW == r->W && r->packed_mr > 0 &&
                     r->algo == 0;
    const int dw = d->group == d->C && d->M == d->C && d->KH == d->KW && (d->KH == 3 || d->KH == 5) &&
                   d->stride_h == d->stride_w && (d->stride_h == 1 || d->stride_h == 2) && d->dil_h == 1 &&
                   d->dil_w == 1;
    return pw_e && pw_r && dw && d->N == r->N && d->M == r->C && d->OH == r->H && d->OW == r->W && d->N > 0 &&
           d->H > 0 && d->W > 0 && d->OH > 0 && d->OW > 0;
}

/* Output rows per band for `threads` threads: as many as the budget allows, then evened out
 * over the bands, with at least one band per thread. */
static int64_t band_rows(const cuvil_mbblock_params *p, int threads) {
    const cuvil_conv2d_params *d = &p->dw;
    const int64_t row_bytes = d->C * d->W * (int64_t)sizeof(float), S = d->stride_h, K = d->KH;
    int64_t R = 1;
    while (R < d->OH && ((R) * S + K) * row_bytes <= BAND_BYTES) R++; /* (R+1-1)*S + K rows fit */
    int64_t nb = ceil_div(d->OH, R);
    if (threads > 1) nb = cuvil_min_i64(d->OH, ceil_div(nb, threads) * threads);
    return ceil_div(d->OH, nb);
}

/* The depthwise conv of one band: its expanded rows [e0, e1) as a small image. */
static cuvil_conv2d_params band_dw(const cuvil_conv2d_params *d, int64_t oh0, int64_t oh1, int64_t *e0, int64_t *e1) {
    const int64_t ih0 = oh0 * d->stride_h - d->pad_t;
    *e0 = ih0 > 0 ? ih0 : 0;
    *e1 = cuvil_min_i64(d->H, (oh1 - 1) * d->stride_h - d->pad_t + d->KH);
    cuvil_conv2d_params b = *d;
    b.N = 1;
    b.H = *e1 - *e0;
    b.pad_t = ih0 < 0 ? -ih0 : 0;
    b.OH = oh1 - oh0;
    return b;
}

typedef struct band_layout {
    size_t e, d, dws, gemm, total; /* byte offsets of the parts, and the whole */
} band_layout;

static band_layout layout(const cuvil_mbblock_params *p, int64_t R, const cuvil_gemm_blocking *b) {
    const cuvil_conv2d_params *d = &p->dw;
    const int64_t er = cuvil_min_i64(d->H, (R - 1) * d->stride_h + d->KH);
    cuvil_conv2d_params worst = *d; /* the tallest padded plane any band's depthwise needs */
    worst.N = 1;
    worst.H = er;
    worst.OH = R;
    band_layout l;
    l.e = 0;
    l.d = l.e + (p->ex.M > 0 ? CUVIL_ALIGN_UP((size_t)(d->C * er * d->W) * sizeof(float), 64) : 0); /* no expand: x in place */
    l.dws = l.d + CUVIL_ALIGN_UP((size_t)(d->C * R * d->OW) * sizeof(float), 64);
    l.gemm = l.dws + CUVIL_ALIGN_UP(cuvil_f32_conv2d_scratch_size_ex(&worst, b), 64);
    size_t g1 = p->ex.M > 0 ? cuvil_gemm_job_scratch_size(p->ex.M, er * d->W, p->ex.C, b) : 0;
    size_t g2 = cuvil_gemm_job_scratch_size(p->pr.M, R * d->OW, p->pr.C, b);
    l.total = l.gemm + CUVIL_ALIGN_UP(g1 > g2 ? g1 : g2, 64);
    return l;
}

size_t cuvil_f32_mbblock_scratch_size_ex(const cuvil_mbblock_params *p, const cuvil_gemm_blocking *b) {
    /* one thread's bands are the tallest */
    return layout(p, band_rows(p, 1), b).total;
}

size_t cuvil_f32_mbblock_scratch_size(const cuvil_mbblock_params *p) {
    return cuvil_f32_mbblock_scratch_size_ex(p, cuvil_gemm_default_blocking());
}

typedef struct mb_run {
    const cuvil_mbblock_params *p;
    const float *x, *we, *be, *wd, *bd, *wp, *bp, *residual;
    float *y;
    void *scratch;
    const cuvil_gemm_blocking *b;
    band_layout l;
    int64_t R, nb;
} mb_run;

/* C[M, N] = act(W B + bias) for 1x1 conv c with prepacked weights w, B [K, N] (row stride ldb),
 * C of row stride ldc. */
static void pointwise_job(cuvil_gemm_job *j, const cuvil_conv2d_params *c, const float *w, const float *bias,
                          const float *B, int64_t ldb, int64_t N, float *C, int64_t ldc) {
    memset(j, 0, sizeof *j);
    j->M = c->M;
    j->N = N;
    j->K = c->C;
    j->alpha = 1.0f;
    j->a_packed = w;
    j->a_packed_mr = (int)c->packed_mr;
    j->a_packed_kc = c->packed_kc;
    j->B = B;
    j->ldb = ldb;
    j->C = C;
    j->ldc = ldc;
    j->bias = bias;
    j->bias_rs = 1;
    j->beta = 1.0f;
    j->act = c->act;
}

static void band_task(void *vctx, int64_t t, int tid) {
    const mb_run *s = (const mb_run *)vctx;
    const cuvil_mbblock_params *p = s->p;
    const cuvil_conv2d_params *d = &p->dw;
    const int64_t n = t / s->nb, oh0 = (t % s->nb) * s->R, oh1 = cuvil_min_i64(d->OH, oh0 + s->R);
    if (oh0 >= oh1) return;
    char *scr = (char *)cuvil_thread_scratch(s->scratch, tid);
    float *eb = (float *)(scr + s->l.e), *db = (float *)(scr + s->l.d);
    void *gs = scr + s->l.gemm;
    int64_t e0, e1;
    const cuvil_conv2d_params bd = band_dw(d, oh0, oh1, &e0, &e1);
    const int64_t HW = d->H * d->W, OHW = d->OH * d->OW;

    /* expand: E[:, e0:e1] = act(We x[:, e0:e1] + be) */
    cuvil_gemm_job j;
    if (p->ex.M > 0) {
        pointwise_job(&j, &p->ex, s->we, s->be, s->x + n * p->ex.C * HW + e0 * d->W, HW, (e1 - e0) * d->W, eb,
                      (e1 - e0) * d->W);
        cuvil_f32_gemm_run_serial(&j, s->b, gs);
    }

    /* depthwise on the band: the expanded rows, or without an expand x's rows [e0, e1) in place */
    if (p->ex.M > 0)
        cuvil_f32_dwconv2d_serial(&bd, eb, (e1 - e0) * d->W, s->wd, s->bd, NULL, db, (float *)(scr + s->l.dws));
    else
        cuvil_f32_dwconv2d_serial(&bd, s->x + n * d->C * HW + e0 * d->W, HW, s->wd, s->bd, NULL, db,
                                  (float *)(scr + s->l.dws));

    /* project: y[:, oh0:oh1] = act(Wp D + bp + residual) */
    const int64_t yoff = n * p->pr.M * OHW + oh0 * d->OW;
    pointwise_job(&j, &p->pr, s->wp, s->bp, db, (oh1 - oh0) * d->OW, (oh1 - oh0) * d->OW, s->y + yoff, OHW);
    j.c_init = s->residual ? s->residual + yoff : NULL;
    j.ld_init = OHW;
    cuvil_f32_gemm_run_serial(&j, s->b, gs);
}

void cuvil_f32_mbblock(const cuvil_mbblock_params *p, const float *x, const float *we, const float *be,
                       const float *wd, const float *bd, const float *wp, const float *bp, const float *residual,
                       float *y, void *scratch) {
    const int threads = cuvil_threads();
    mb_run s = {p, x, we, be, wd, bd, wp, bp, residual, y, scratch, cuvil_gemm_default_blocking(), {0, 0, 0, 0, 0},
                band_rows(p, threads), 0};
    s.l = layout(p, s.R, s.b);
    s.nb = ceil_div(p->dw.OH, s.R);
    cuvil_parallel_for(p->dw.N * s.nb, band_task, &s);
}
