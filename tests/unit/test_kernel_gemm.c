/*
 * test_kernel_gemm.c -- cuvil_f32_gemm, its __scalar reference and every GEMM microkernel
 * against a naive double-precision loop written here.
 *
 * Covers: M < MR, N < NR, K not a multiple of the unroll, transposed A/B, leading dimensions
 * larger than the rows, alpha, beta, every bias broadcast pattern, batches with zero strides,
 * K = 0, every activation in the epilogue (on small-integer data so the sum is exact and the
 * comparison measures the activation alone), shrunken cache blocks so each loop of the
 * blocked driver runs more than once, and a 512^3 product (timed, for information). Also
 * checks that C outside the M x N window (the ldc padding) is never written.
 */
#include <time.h>

#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

#define SENTINEL 12345.0f

static size_t extent(int64_t rows, int64_t cols, int64_t ld) {
    return rows > 0 && cols > 0 ? (size_t)((rows - 1) * ld + cols) : 0;
}

static void naive(const cuvil_gemm_params *p, const float *A, const float *B, const float *bias,
                  double *ref) {
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t n = 0; n < p->N; n++) {
                const float *a = A + b * p->a_bstride, *bb = B + b * p->b_bstride;
                double acc = 0;
                for (int64_t k = 0; k < p->K; k++) {
                    double av = p->trans_a ? a[k * p->lda + m] : a[m * p->lda + k];
                    double bv = p->trans_b ? bb[n * p->ldb + k] : bb[k * p->ldb + n];
                    acc += av * bv;
                }
                double v = p->alpha * acc;
                if (bias)
                    v += (double)p->beta *
                         bias[b * p->bias_bstride + m * p->bias_rs + n * p->bias_cs];
                ref[(b * p->M + m) * p->N + n] = ktu_actp(&p->act, v);
            }
}

enum { RUN_PUBLIC, RUN_SCALAR, RUN_EX };

/* nonzero: the B that run_variant gets is packed and stored in 16 bits of this kind
 * (cuvil_f32_gemm_w16) */
static int w16_kind;

/* Runs one variant; returns 1 when C matches ref and the padding is untouched. */
static int run_variant(const cuvil_gemm_params *p, const float *A, const float *B,
                       const float *bias, float *C, size_t c_size, const double *ref, int how,
                       const cuvil_gemm_blocking *blk, double rtol, double atol,
                       const char *label) {
    for (size_t i = 0; i < c_size; i++) C[i] = SENTINEL;
    void *scratch = NULL;
    const char *vname = how == RUN_PUBLIC   ? "public"
                        : how == RUN_SCALAR ? "__scalar"
                                            : blk->uk->name;
    if (w16_kind) {
        const uint16_t *B16 = (const uint16_t *)(const void *)B;
        if (how == RUN_PUBLIC) {
            scratch = ktu_alloc(cuvil_f32_gemm_scratch_size(p));
            cuvil_f32_gemm_w16(p, w16_kind, A, B16, bias, C, scratch);
        } else {
            scratch = ktu_alloc(cuvil_f32_gemm_scratch_size_ex(p, blk));
            cuvil_f32_gemm_w16_ex(p, w16_kind, A, B16, bias, C, scratch, blk);
        }
        vname = how == RUN_PUBLIC ? "public w16" : "ex w16";
    } else if (how == RUN_PUBLIC) {
        scratch = ktu_alloc(cuvil_f32_gemm_scratch_size(p));
        cuvil_f32_gemm(p, A, B, bias, C, scratch);
    } else if (how == RUN_SCALAR) {
        cuvil_f32_gemm__scalar(p, A, B, bias, C);
    } else {
        scratch = ktu_alloc(cuvil_f32_gemm_scratch_size_ex(p, blk));
        cuvil_f32_gemm_ex(p, A, B, bias, C, scratch, blk);
    }
    free(scratch);
    const size_t mn = (size_t)(p->batch * p->M * p->N);
    float *got = ktu_falloc(mn ? mn : 1);
    char *inside = calloc(c_size ? c_size : 1, 1);
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t m = 0; m < p->M; m++)
            for (int64_t n = 0; n < p->N; n++) {
                const size_t ci = (size_t)(b * p->c_bstride + m * p->ldc + n);
                got[(b * p->M + m) * p->N + n] = C[ci];
                inside[ci] = 1;
            }
    int ok = ktu_check(got, ref, mn, rtol, atol, "%s [%s]", label, vname);
    for (size_t i = 0; i < c_size && ok; i++)
        if (!inside[i] && C[i] != SENTINEL) {
            ktu_fail("%s [%s]: wrote C[%zu] outside the M x N window", label, vname, i);
            ok = 0;
        }
    free(got);
    free(inside);
    return ok;
}

/* bias patterns: 0 none, 1 per column [N], 2 per row [M], 3 full [M, N], 4 scalar,
 * 5 full column-major */
static void set_bias(cuvil_gemm_params *p, int pattern) {
    switch (pattern) {
    case 1: p->bias_rs = 0; p->bias_cs = 1; break;
    case 2: p->bias_rs = 1; p->bias_cs = 0; break;
    case 3: p->bias_rs = p->N; p->bias_cs = 1; break;
    case 4: p->bias_rs = 0; p->bias_cs = 0; break;
    case 5: p->bias_rs = 1; p->bias_cs = p->M; break;
    default: p->bias_rs = p->bias_cs = 0; break;
    }
}

static const cuvil_gemm_blocking *tiny_blocking(int uk) {
    static cuvil_gemm_blocking b[8];
    b[uk].uk = &cuvil_f32_gemm_ukernels[uk];
    b[uk].mc = 2 * b[uk].uk->mr + 1; /* not a multiple of MR on purpose */
    b[uk].kc = 7;
    b[uk].nc = 3 * b[uk].uk->nr;
    return &b[uk];
}

/* data: 0 random in [-1, 1), 1 small integers (exact sums) */
static void run_case(cuvil_gemm_params p, int bias_pattern, int data, const char *label) {
    char buf[256];
    snprintf(buf, sizeof buf,
             "%s M=%lld N=%lld K=%lld ta=%d tb=%d lda=%lld ldb=%lld ldc=%lld alpha=%g beta=%g "
             "bias=%d batch=%lld act=%s",
             label, (long long)p.M, (long long)p.N, (long long)p.K, p.trans_a, p.trans_b,
             (long long)p.lda, (long long)p.ldb, (long long)p.ldc, p.alpha, p.beta, bias_pattern,
             (long long)p.batch, cuvil_act_names[p.act.act]);
    set_bias(&p, bias_pattern);
    const size_t a_ext = p.trans_a ? extent(p.K, p.M, p.lda) : extent(p.M, p.K, p.lda);
    const size_t b_ext = p.trans_b ? extent(p.N, p.K, p.ldb) : extent(p.K, p.N, p.ldb);
    const size_t c_ext = extent(p.M, p.N, p.ldc);
    const size_t bias_ext = (size_t)((p.M - 1) * p.bias_rs + (p.N - 1) * p.bias_cs + 1);
    const size_t a_size = (size_t)((p.batch - 1) * p.a_bstride) + a_ext;
    const size_t b_size = (size_t)((p.batch - 1) * p.b_bstride) + b_ext;
    const size_t c_size = (size_t)((p.batch - 1) * p.c_bstride) + c_ext;
    const size_t bias_size = (size_t)((p.batch - 1) * p.bias_bstride) + bias_ext;
    float *A = ktu_falloc(a_size + 1), *B = ktu_falloc(b_size + 1), *C = ktu_falloc(c_size + 1);
    float *bias = bias_pattern ? ktu_falloc(bias_size) : NULL;
    if (data) {
        ktu_fill_int(A, a_size, 2);
        ktu_fill_int(B, b_size, 2);
        if (bias) ktu_fill_int(bias, bias_size, 3);
    } else {
        ktu_fill(A, a_size, -1, 1);
        ktu_fill(B, b_size, -1, 1);
        if (bias) ktu_fill(bias, bias_size, -1, 1);
    }
    const size_t mn = (size_t)(p.batch * p.M * p.N);
    double *ref = malloc((mn ? mn : 1) * sizeof(double));
    naive(&p, A, B, bias, ref);
    /* exact integer data: only the activation's own rounding remains */
    const double rtol = data ? 2e-6 : 1e-4, atol = data ? 1e-6 : 1e-4;
    run_variant(&p, A, B, bias, C, c_size, ref, RUN_PUBLIC, NULL, rtol, atol, buf);
    run_variant(&p, A, B, bias, C, c_size, ref, RUN_SCALAR, NULL, rtol, atol, buf);
    for (int u = 0; u < cuvil_f32_gemm_n_ukernels; u++)
        run_variant(&p, A, B, bias, C, c_size, ref, RUN_EX, tiny_blocking(u), rtol, atol, buf);
    if (p.batch <= 1 || p.b_bstride == 0) {
        /* B packed ahead of time (as the lowering pass does for constant weights): read in place
         * by a run with the tile and KC it was packed for, repacked by a run with others */
        for (int u = -1; u < cuvil_f32_gemm_n_ukernels; u++) {
            const cuvil_gemm_blocking *pk = u < 0 ? cuvil_gemm_default_blocking() : tiny_blocking(u);
            cuvil_gemm_params q = p;
            q.packed_nr = pk->uk->nr;
            q.packed_kc = pk->kc;
            float *Bp = ktu_falloc(cuvil_f32_gemm_packed_b_floats(&q) + 1);
            cuvil_f32_gemm_pack_b(&q, B, Bp);
            char lb[400];
            snprintf(lb, sizeof lb, "%s packed-B nr=%lld kc=%lld", buf, (long long)q.packed_nr, (long long)q.packed_kc);
            run_variant(&q, A, Bp, bias, C, c_size, ref, u < 0 ? RUN_PUBLIC : RUN_EX, pk, rtol, atol, lb);
            run_variant(&q, A, Bp, bias, C, c_size, ref, u < 0 ? RUN_EX : RUN_PUBLIC, tiny_blocking(0), rtol, atol, lb);
            free(Bp);
        }
        /* the packed B in 16 bits (--precision fp16|bf16): the same product on B's values
         * rounded to the 16-bit type, read in place, repacked, and by the one-row path */
        const size_t b_n = b_size + 1;
        float *Bw = ktu_falloc(b_n), *Ar = ktu_falloc(a_size + 1);
        double *ref16 = malloc((mn ? mn : 1) * sizeof(double));
        /* CUVIL_W16_BF16_DOT twice: on AVX-512 BF16 where this CPU has it, and in float32 FMAs */
        for (int kind = CUVIL_W16_F16; kind <= CUVIL_W16_BF16_DOT + 1; kind++) {
            const int k16 = kind > CUVIL_W16_BF16_DOT ? CUVIL_W16_BF16_DOT : kind;
            cuvil_gemm_bf16_dot_hw = kind > CUVIL_W16_BF16_DOT ? 0 : -1;
            for (size_t i = 0; i < b_n; i++) {
                uint16_t h = k16 == CUVIL_W16_F16 ? cuvil_f32_to_f16(B[i]) : cuvil_f32_to_bf16(B[i]);
                Bw[i] = k16 == CUVIL_W16_F16 ? cuvil_f16_to_f32(h) : cuvil_bf16_to_f32(h);
            }
            if (k16 == CUVIL_W16_BF16_DOT) {   /* the sums of alpha * A rounded to bfloat16 times B */
                cuvil_gemm_params r = p;
                r.alpha = 1.0f;
                for (size_t i = 0; i < a_size + 1; i++) Ar[i] = cuvil_bf16_to_f32(cuvil_f32_to_bf16(p.alpha * A[i]));
                naive(&r, Ar, Bw, bias, ref16);
            } else {
                naive(&p, A, Bw, bias, ref16);
            }
            for (int u = -1; u < cuvil_f32_gemm_n_ukernels; u++) {
                const cuvil_gemm_blocking *pk = u < 0 ? cuvil_gemm_default_blocking() : tiny_blocking(u);
                cuvil_gemm_params q = p;
                q.packed_nr = pk->uk->nr;
                q.packed_kc = pk->kc;
                const size_t nf = cuvil_f32_gemm_packed_b_floats(&q);
                float *Bp = ktu_falloc(nf + 1);
                uint16_t *B16 = ktu_alloc((nf + 1) * sizeof(uint16_t));
                cuvil_f32_gemm_pack_b(&q, Bw, Bp);
                for (size_t i = 0; i < nf; i++)
                    B16[i] = k16 == CUVIL_W16_F16 ? cuvil_f32_to_f16(Bp[i]) : cuvil_f32_to_bf16(Bp[i]);
                char lb[400];
                snprintf(lb, sizeof lb, "%s packed-B16 kind=%d%s nr=%lld kc=%lld", buf, k16,
                         kind > CUVIL_W16_BF16_DOT ? " (FMA)" : "", (long long)q.packed_nr, (long long)q.packed_kc);
                w16_kind = k16;
                run_variant(&q, A, (const float *)(void *)B16, bias, C, c_size, ref16, u < 0 ? RUN_PUBLIC : RUN_EX, pk, rtol,
                            atol, lb);
                run_variant(&q, A, (const float *)(void *)B16, bias, C, c_size, ref16, u < 0 ? RUN_EX : RUN_PUBLIC,
                            tiny_blocking(0), rtol, atol, lb);
                w16_kind = 0;
                free(Bp);
                free(B16);
            }
        }
        cuvil_gemm_bf16_dot_hw = -1;
        free(Bw);
        free(Ar);
        free(ref16);
    }
    free(A);
    free(B);
    free(C);
    free(bias);
    free(ref);
}

static cuvil_gemm_params make(int64_t M, int64_t N, int64_t K, int ta, int tb, int pad) {
    cuvil_gemm_params p;
    memset(&p, 0, sizeof p);
    p.M = M;
    p.N = N;
    p.K = K;
    p.trans_a = ta;
    p.trans_b = tb;
    p.lda = (ta ? M : K) + pad;
    p.ldb = (tb ? K : N) + pad;
    p.ldc = N + pad;
    p.alpha = 1.0f;
    p.beta = 1.0f;
    p.batch = 1;
    p.act.act = CUVIL_ACT_NONE;
    return p;
}

static void test_shapes(void) {
    static const int64_t Ms[] = {1, 5, 6, 7, 13};
    static const int64_t Ns[] = {1, 8, 15, 16, 17, 33};
    static const int64_t Ks[] = {1, 3, 16, 37};
    int counter = 0;
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
                for (int t = 0; t < 4; t++) {
                    cuvil_gemm_params p = make(Ms[mi], Ns[ni], Ks[ki], t & 1, t >> 1, counter % 3);
                    static const float alphas[] = {1.0f, 0.5f, -2.0f};
                    static const float betas[] = {1.0f, 0.25f};
                    p.alpha = alphas[counter % 3];
                    p.beta = betas[(counter / 3) % 2];
                    run_case(p, counter % 6, 0, "shape");
                    counter++;
                }
}

static void test_activations(void) {
    for (int act = 0; act < CUVIL_ACT__COUNT; act++)
        for (int t = 0; t < 4; t++) {
            cuvil_gemm_params p = make(7 + t, 19, 9 + 2 * t, t & 1, t >> 1, 1);
            p.act = ktu_act_params(act);
            p.alpha = t == 3 ? 0.5f : 1.0f;
            p.beta = t == 2 ? 0.25f : 1.0f;
            run_case(p, 1 + t % 3, 1, "act");
        }
    /* more rows than a block's mc, columns ending in a partial strip, K in two blocks: the
     * activations applied a strip (mc rows of NR columns) at a time, after the last K block */
    for (int act = 0; act < CUVIL_ACT__COUNT; act++) {
        cuvil_gemm_params p = make(300, 37, 300, 0, 0, 1);
        p.act = ktu_act_params(act);
        run_case(p, 1, 1, "act, blocks");
    }
}

static void test_batches(void) {
    for (int t = 0; t < 4; t++) {
        /* batch 3: A broadcast (stride 0), B and C strided, per-batch bias */
        cuvil_gemm_params p = make(5, 18, 11, t & 1, t >> 1, 2);
        p.batch = 3;
        const int64_t a_ext =
            (int64_t)(p.trans_a ? extent(p.K, p.M, p.lda) : extent(p.M, p.K, p.lda));
        const int64_t b_ext =
            (int64_t)(p.trans_b ? extent(p.N, p.K, p.ldb) : extent(p.K, p.N, p.ldb));
        p.a_bstride = 0;
        p.b_bstride = b_ext + 5;
        p.c_bstride = p.M * p.ldc + 7;
        p.bias_bstride = p.N;
        run_case(p, 1, 0, "batch A broadcast");
        /* B broadcast, bias shared (stride 0) */
        p.a_bstride = a_ext + 1;
        p.b_bstride = 0;
        p.bias_bstride = 0;
        p.act.act = CUVIL_ACT_RELU;
        run_case(p, 3, 0, "batch B broadcast");
    }
}

static void test_empty_batch(void) {
    /* batch 0 (a zero-sized batch dim): nothing is read or written */
    cuvil_gemm_params p = make(4, 5, 3, 0, 0, 0);
    p.batch = 0;
    float C[20];
    for (int i = 0; i < 20; i++) C[i] = SENTINEL;
    void *scratch = ktu_alloc(cuvil_f32_gemm_scratch_size(&p));
    cuvil_f32_gemm(&p, NULL, NULL, NULL, C, scratch);
    cuvil_f32_gemm__scalar(&p, NULL, NULL, NULL, C);
    free(scratch);
    ktu_checks++;
    for (int i = 0; i < 20; i++)
        if (C[i] != SENTINEL) {
            ktu_fail("batch=0 wrote C[%d]", i);
            break;
        }
}

static void test_k_zero(void) {
    for (int bias = 0; bias < 3; bias++) {
        cuvil_gemm_params p = make(3, 5, 0, 0, 0, 0);
        p.lda = 1;
        p.ldb = 5;
        p.beta = 0.5f;
        p.act = ktu_act_params(CUVIL_ACT_SIGMOID);
        run_case(p, bias, 0, "K=0");
    }
}

static void test_large(void) {
    /* crosses MC and KC with the default blocking */
    run_case(make(257, 301, 519, 0, 0, 3), 2, 0, "large");
    run_case(make(150, 97, 300, 1, 1, 0), 1, 0, "large transposed");
    /* one row over a prepacked B of several runs of columns (the last one short) and K blocks */
    run_case(make(1, 1100, 700, 0, 0, 0), 2, 0, "one row, wide");

    /* 512^3: correctness of the public path, and its speed for information */
    const int64_t n = 512;
    cuvil_gemm_params p = make(n, n, n, 0, 0, 0);
    float *A = ktu_falloc((size_t)(n * n)), *B = ktu_falloc((size_t)(n * n));
    float *C = ktu_falloc((size_t)(n * n));
    ktu_fill(A, (size_t)(n * n), -1, 1);
    ktu_fill(B, (size_t)(n * n), -1, 1);
    void *scratch = ktu_alloc(cuvil_f32_gemm_scratch_size(&p));
    cuvil_f32_gemm(&p, A, B, NULL, C, scratch); /* warm-up */
    struct timespec t0, t1;
    const int reps = 5;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; r++) cuvil_f32_gemm(&p, A, B, NULL, C, scratch);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("gemm 512^3 (%s): %.1f GFLOP/s\n", cuvil_gemm_default_blocking()->uk->name,
           2.0 * (double)(n * n * n) * reps / s * 1e-9);
    double *ref = malloc((size_t)(n * n) * sizeof(double));
    naive(&p, A, B, NULL, ref);
    ktu_check(C, ref, (size_t)(n * n), 1e-4, 1e-4, "gemm 512^3");
    free(ref);
    free(scratch);
    free(A);
    free(B);
    free(C);
}

/* The compiler packs weights for the blocking src/codegen/targets.inc gives each target; the
 * runtime these tests link (the host's) must use the same, or every prepacked model would
 * repack (correct, slow). */
static void test_target_table(void) {
    static const struct {
        const char *name, *kernels;
        int mr, nr;
        int64_t mc, kc, nc;
    } table[] = {
#define CUVIL_TARGET(name, arch, cflags, kernels, features, mr, nr, mc, kc, nc, direct) {name, kernels, mr, nr, mc, kc, nc},
#include "codegen/targets.inc"
#undef CUVIL_TARGET
    };
    const char *host = CUVIL_TEST_HOST_TARGET;   /* the runtime these tests link */
    const cuvil_gemm_blocking *b = cuvil_gemm_default_blocking();
    int found = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, host)) continue;
        found = 1;
        ktu_checks++;
        if (!(table[i].mr == b->uk->mr && table[i].nr == b->uk->nr && table[i].mc == b->mc && table[i].kc == b->kc &&
              table[i].nc == b->nc))
            ktu_fail("targets.inc gives %s %dx%d mc=%lld kc=%lld nc=%lld; its runtime uses %dx%d mc=%lld kc=%lld nc=%lld", host,
               table[i].mr, table[i].nr, (long long)table[i].mc, (long long)table[i].kc, (long long)table[i].nc, b->uk->mr,
                     b->uk->nr, (long long)b->mc, (long long)b->kc, (long long)b->nc);
    }
    ktu_checks++;
    if (!found) ktu_fail("targets.inc has no entry %s", host);
}

/* The same products on a pool of 3 threads: split by columns, by rows, a one-row product over
 * a prepacked B split by panels; each output is computed by one thread exactly as on one, so
 * the results must be identical to the single-thread ones (and those match the reference). */
static void test_threads(void) {
    /* (40 x 40: as many columns as rows but, with 3 threads, too few tiles of them: the rows) */
    static const int64_t shapes[][3] = {{257, 301, 519}, {512, 49, 300}, {40, 3000, 64}, {1, 1000, 512}, {7, 9, 5},
                                        {40, 40, 70}};
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        for (int packed = 0; packed < 2; packed++) {
            cuvil_gemm_params p = make(M, N, K, 0, 0, 0);
            /* (with B packed, SiLU: applied a strip at a time after the microkernel) */
            p.act = ktu_act_params(packed ? CUVIL_ACT_SILU : CUVIL_ACT_RELU);
            float *A = ktu_falloc((size_t)(M * K)), *B = ktu_falloc((size_t)(K * N)), *bias = ktu_falloc((size_t)M);
            float *C1 = ktu_falloc((size_t)(M * N)), *C3 = ktu_falloc((size_t)(M * N));
            ktu_fill(A, (size_t)(M * K), -1, 1);
            ktu_fill(B, (size_t)(K * N), -1, 1);
            ktu_fill(bias, (size_t)M, -1, 1);
            const float *Bx = B;
            float *Bp = NULL;
            if (packed) {
                p.packed_nr = def->uk->nr;
                p.packed_kc = def->kc;
                Bp = ktu_falloc(cuvil_f32_gemm_packed_b_floats(&p));
                cuvil_f32_gemm_pack_b(&p, B, Bp);
                Bx = Bp;
            }
            const size_t per = CUVIL_ALIGN_UP(cuvil_f32_gemm_scratch_size(&p), 64);
            void *scratch = ktu_alloc(3 * per);
            cuvil_f32_gemm(&p, A, Bx, bias, C1, scratch);
            cuvil_pool *pool = cuvil_pool_create(3, per, ktu_aligned_alloc, ktu_aligned_free, NULL);
            if (!pool) ktu_fail("no thread pool");
            const cuvil_pool *prev = cuvil_pool_bind(pool);
            cuvil_f32_gemm(&p, A, Bx, bias, C3, scratch);
            cuvil_pool_bind(prev);
            cuvil_pool_destroy(pool);
            ktu_checks++;
            if (memcmp(C1, C3, (size_t)(M * N) * sizeof(float)) != 0)
                ktu_fail("gemm %lldx%lldx%lld%s: 3 threads differ from 1", (long long)M, (long long)N, (long long)K,
                         packed ? " (B prepacked)" : "");
            double *ref = malloc((size_t)(M * N) * sizeof(double));
            naive(&p, A, B, bias, ref);
            ktu_check(C3, ref, (size_t)(M * N), 1e-4, 1e-4, "gemm %lldx%lldx%lld on 3 threads", (long long)M,
                      (long long)N, (long long)K);
            free(ref);
            free(scratch);
            free(Bp);
            free(A);
            free(B);
            free(bias);
            free(C1);
            free(C3);
        }
    }
}

/* A row-major A times a B packed ahead runs, on AVX-512, with A's rows read in place 12 at a time
 * (gemm.c's gemm_range_lda; any target: whichever path it takes); the same product with A given
 * transposed (trans_a: A packed, the 8x32 tiles) must give the same bits: row counts that leave
 * 1-11 rows to the rows microkernel, partial panels, several K blocks, rows longer than K
 * (lda), a row or column bias with Relu, HardSwish or SiLU (after the tile), a full [M, N] bias
 * (the epilogue after the tile); and through the driver's job, an initial value (c_init, a
 * conv's residual) with a column bias and HardSwish, on 1 and 3 threads. */
static void test_a_in_place(void) {
    static const int64_t shapes[][3] = {{12, 32, 8}, {197, 100, 500}, {25, 40, 1}, {49, 512, 700}, {37, 16, 193},
                                        {13, 1, 64}, {24, 333, 384}};
    static const cuvil_act acts[] = {CUVIL_ACT_RELU, CUVIL_ACT_HARD_SWISH, CUVIL_ACT_SILU, CUVIL_ACT_NONE};
    const cuvil_gemm_blocking *def = cuvil_gemm_default_blocking();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int form = 0; form < 4; form++) {
            const int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
            cuvil_gemm_params p = make(M, N, K, 0, 0, 0);
            p.lda = K + (int64_t)(i % 2) * 3; /* rows longer than K every other case */
            p.act = ktu_act_params(acts[form]);
            p.packed_nr = def->uk->nr;
            p.packed_kc = def->kc;
            /* form 0: a bias a row, 1 and 2: a column, 3: a full [M, N] one */
            p.bias_rs = form == 0 || form == 3 ? (form == 3 ? N : 1) : 0;
            p.bias_cs = form == 0 ? 0 : 1;
            const int64_t lda = p.lda;
            float *A = ktu_falloc((size_t)(M * lda)), *At = ktu_falloc((size_t)(M * K)), *B = ktu_falloc((size_t)(K * N));
            float *bias = ktu_falloc((size_t)(M * N)), *C1 = ktu_falloc((size_t)(M * N)), *C2 = ktu_falloc((size_t)(M * N));
            ktu_fill(A, (size_t)(M * lda), -1, 1);
            ktu_fill(B, (size_t)(K * N), -1, 1);
            ktu_fill(bias, (size_t)(M * N), -1, 1);
            for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < K; k++) At[k * M + m] = A[m * lda + k];
            float *Bp = ktu_falloc(cuvil_f32_gemm_packed_b_floats(&p));
            cuvil_f32_gemm_pack_b(&p, B, Bp);
            void *scratch = ktu_alloc(cuvil_f32_gemm_scratch_size(&p) + 64);
            cuvil_f32_gemm(&p, A, Bp, bias, C1, scratch);
            cuvil_gemm_params t = p;
            t.trans_a = 1;
            t.lda = M;
            cuvil_f32_gemm(&t, At, Bp, bias, C2, scratch);
            ktu_checks++;
            if (memcmp(C1, C2, (size_t)(M * N) * sizeof(float)) != 0)
                ktu_fail("gemm %lldx%lldx%lld (B prepacked, form %d): A row-major and A transposed differ", (long long)M,
                         (long long)N, (long long)K, form);
            if (form == 1)
                for (int threads = 1; threads <= 3; threads += 2) { /* c_init through the job */
                    cuvil_gemm_job j;
                    memset(&j, 0, sizeof j);
                    j.M = M, j.N = N, j.K = K, j.lda = lda, j.alpha = 1.0f, j.ldc = j.ld_init = N;
                    j.b_packed = Bp, j.b_packed_nr = (int)p.packed_nr, j.b_packed_kc = p.packed_kc;
                    j.bias = bias, j.bias_cs = 1, j.beta = 1.0f, j.act = p.act, j.c_init = bias;
                    const size_t per = CUVIL_ALIGN_UP(cuvil_gemm_job_scratch_size(M, N, K, def), 64);
                    void *sc = ktu_alloc((size_t)threads * per + 64);
                    cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, per, ktu_aligned_alloc, ktu_aligned_free, NULL) : NULL;
                    const cuvil_pool *prev = cuvil_pool_bind(pool);
                    j.A = A;
                    j.C = C1;
                    cuvil_f32_gemm_run(&j, def, sc);
                    cuvil_gemm_job jt = j;
                    jt.A = At, jt.lda = M, jt.trans_a = 1, jt.C = C2;
                    cuvil_f32_gemm_run(&jt, def, sc);
                    cuvil_pool_bind(prev);
                    cuvil_pool_destroy(pool);
                    free(sc);
                    ktu_checks++;
                    if (memcmp(C1, C2, (size_t)(M * N) * sizeof(float)) != 0)
                        ktu_fail("gemm %lldx%lldx%lld with c_init, %d thread%s: A row-major and A transposed differ",
                                 (long long)M, (long long)N, (long long)K, threads, threads > 1 ? "s" : "");
                }
            double *ref = malloc((size_t)(M * N) * sizeof(double));
            cuvil_f32_gemm(&p, A, Bp, bias, C1, scratch);
            naive(&p, A, B, bias, ref);
            ktu_check(C1, ref, (size_t)(M * N), 1e-4, 1e-4, "gemm %lldx%lldx%lld form %d, A row-major, B prepacked",
                      (long long)M, (long long)N, (long long)K, form);
            free(ref);
            free(scratch);
            free(Bp);
            free(A);
            free(At);
            free(B);
            free(bias);
            free(C1);
            free(C2);
        }
}

/* Every microkernel's edge tiles (mr < MR rows, nr < NR columns), with and without c_in and
 * each form of its epilogue (a row bias with Relu's clamp, a column bias with Clip's, a column
 * bias then HardSwish): each value the same, bit for bit, as the full tile's at its place (so
 * that how a product is cut into tiles, by blocks or by threads, never changes a result),
 * within rounding of a double loop, and nothing written outside the mr x nr window. HardSwish
 * in the store: the bits of cuvil_f32_act_rows applied to the tile after (the vector kernels;
 * the portable one within rounding). */
static void test_ukernel_edges(void) {
    enum { KC = 37, LD = 80 };
    for (int u = 0; u < cuvil_f32_gemm_n_ukernels; u++) {
        const cuvil_gemm_ukernel_desc *uk = &cuvil_f32_gemm_ukernels[u];
        const int MRk = uk->mr, NRk = uk->nr;
        float *a = ktu_falloc((size_t)(KC * MRk)), *b = ktu_falloc((size_t)(KC * NRk));
        float *cin = ktu_falloc((size_t)(MRk * LD)), *rb = ktu_falloc((size_t)MRk), *cb = ktu_falloc((size_t)NRk);
        float *full = ktu_falloc((size_t)(MRk * LD)), *c = ktu_falloc((size_t)(MRk * LD));
        ktu_fill(a, (size_t)(KC * MRk), -1, 1);
        ktu_fill(b, (size_t)(KC * NRk), -1, 1);
        ktu_fill(cin, (size_t)(MRk * LD), -1, 1);
        ktu_fill(rb, (size_t)MRk, -1, 1);
        ktu_fill(cb, (size_t)NRk, -1, 1);
        for (int form = 0; form < 8; form++) {
            /* 0 none, 1 row bias + Relu, 2 column bias + Clip, 3 column bias + HardSwish */
            const int with_in = form & 1, epi_kind = form >> 1;
            cuvil_ukernel_epi epi = {epi_kind == 1 ? rb : NULL, epi_kind >= 2 ? cb : NULL,
                                     epi_kind == 1 ? 0.0f : epi_kind == 2 ? -0.25f : -INFINITY,
                                     epi_kind == 1 || epi_kind == 3 ? INFINITY : 0.5f, epi_kind == 3};
            const cuvil_ukernel_epi *ep = epi_kind ? &epi : NULL;
            uk->fn(KC, a, b, full, LD, (size_t)MRk, (size_t)NRk, with_in ? cin : NULL, with_in ? LD : 0, ep);
            if (epi_kind == 3) {   /* the store's HardSwish against the activation applied after */
                cuvil_ukernel_epi plain = epi;
                plain.hswish = 0;
                uk->fn(KC, a, b, c, LD, (size_t)MRk, (size_t)NRk, with_in ? cin : NULL, with_in ? LD : 0, &plain);
                const cuvil_act_params hs = {CUVIL_ACT_HARD_SWISH, 0.0f, 0.0f};
                cuvil_f32_act_rows(&hs, c, LD, (size_t)MRk, (size_t)NRk);
                const int exact = strstr(uk->name, "scalar") == NULL;
                ktu_checks++;
                for (int i = 0; i < MRk; i++)
                    for (int j = 0; j < NRk; j++) {
                        const float x = full[i * LD + j], y = c[i * LD + j];
                        if (exact ? memcmp(&x, &y, sizeof x) != 0 : fabsf(x - y) > 1e-6f * (1 + fabsf(y)))
                            ktu_fail("%s HardSwish in the store: c[%d][%d] = %.9g, after the tile %.9g", uk->name, i, j, x, y);
                    }
            }
            for (int mr = 1; mr <= MRk; mr++)
                for (int nr = 1; nr <= NRk; nr++) {
                    for (int i = 0; i < MRk * LD; i++) c[i] = SENTINEL;
                    uk->fn(KC, a, b, c, LD, (size_t)mr, (size_t)nr, with_in ? cin : NULL, with_in ? LD : 0, ep);
                    ktu_checks++;
                    for (int i = 0; i < MRk; i++)
                        for (int j = 0; j < LD; j++) {
                            const float got = c[i * LD + j];
                            if (i < mr && j < nr) {
                                double v = with_in ? cin[i * LD + j] : 0.0;
                                for (int k = 0; k < KC; k++) v += (double)a[k * MRk + i] * b[k * NRk + j];
                                if (epi_kind) v += epi_kind == 1 ? rb[i] : cb[j];
                                if (ep) v = v < epi.lo ? epi.lo : v > epi.hi ? epi.hi : v;
                                if (epi_kind == 3) v = v * fmin(fmax(v / 6 + 0.5, 0.0), 1.0);
                                if (memcmp(&got, &full[i * LD + j], sizeof got) || fabs(got - v) > 1e-4 * (1 + fabs(v)))
                                    ktu_fail("%s tile %dx%d form %d: c[%d][%d] = %.9g, the full tile's %.9g, a double loop's %.9g",
                                             uk->name, mr, nr, form, i, j, got, full[i * LD + j], v);
                            } else if (got != SENTINEL) {
                                ktu_fail("%s tile %dx%d form %d: wrote c[%d][%d] outside the tile", uk->name, mr, nr, form, i,
                                         j);
                            }
                        }
                }
        }
        free(a);
        free(b);
        free(cin);
        free(rb);
        free(cb);
        free(full);
        free(c);
    }
}

int main(void) {
    setenv("CUVIL_OVERSUBSCRIBE", "1", 1); /* pools of 3 threads even on 2 CPUs: uneven splits */
    test_target_table();
    test_threads();
    test_a_in_place();
    test_ukernel_edges();
    test_shapes();
    test_activations();
    test_batches();
    test_k_zero();
    test_empty_batch();
    test_large();
    return ktu_finish("test_kernel_gemm");
}
