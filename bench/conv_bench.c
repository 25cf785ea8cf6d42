/*
 * conv_bench.c -- one convolution shape through every path the runtime has for it, each timed
 * alone (median of the runs, one thread): the numbers bench/conv_sweep.py sets beside the path
 * the lowering chooses. Built as build/bin/cuvil-bench-conv (the host target's runtime) and,
 * on an AVX-512 machine, cuvil-bench-conv-avx2 (AVX2's); not a test.
 *
 *   cuvil-bench-conv N C H W M KH KW SH SW PT PL PB PR DH DW GROUP [MS]
 *
 * prints one JSON line: {"paths": {"<path>": median ms, ...}, "mr": .., "nr": .., "kc": ..}.
 * A path is timed only where the runtime takes it for this shape: "depthwise" (the direct
 * loop on the weights as they are: group == C), "gemm" (im2col GEMM, weights prepacked as
 * the GEMM's A), "gemm_t" (pixels as rows), "direct", "direct_t", "winograd", "winograd_t",
 * "winograd2_t", "grouped". Each is checked against the scalar reference before it is timed: a path
 * that gives another answer is reported as an error, not a time. MS: the time to spend on
 * each path (default 300 ms). CUVIL_BENCH_THREADS=N times each path on a pool of N threads;
 * CUVIL_BENCH_NHWC=1 gives every path its input and output channels last (as the lowering's
 * layout pass does inside a channels-last region).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/kernels/rt_int.h"
#include "bench_pool.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) {
        fprintf(stderr, "cuvil-bench-conv: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static float *frand(size_t n, unsigned seed) {
    float *f = (float *)xalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        f[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return f;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct path {
    const char *name;
    int64_t algo;
    int packed;   /* 0: weights as they are; 1: packed as the GEMM's A (MR rows); 2: as its B (NR);
                   * 3: for the grouped direct convolution (CUVIL_GCONV_LANES) */
} path;

static const path paths[] = {
    {"depthwise", 0, 0},
    {"gemm", 0, 1},
    {"gemm_t", CUVIL_CONV_GEMM_T, 2},
    {"direct", CUVIL_CONV_DIRECT, 1},
    {"direct_t", CUVIL_CONV_DIRECT_T, 2},
    {"winograd", CUVIL_CONV_WINOGRAD, 1},
    {"winograd_t", CUVIL_CONV_WINOGRAD_T, 2},
    {"winograd2_t", CUVIL_CONV_WINOGRAD2_T, 2},
    {"grouped", CUVIL_CONV_GROUPED, 3},
};

/* Does the runtime run path pa for p (and not quietly another)? */
static int takes(const path *pa, const cuvil_conv2d_params *p) {
    const int dw = p->group == p->C;
    /* channels last: the paths that take it (not the channels-first GEMM, direct and Winograd) */
    if (p->layout && (pa->algo == CUVIL_CONV_DIRECT || pa->algo == CUVIL_CONV_WINOGRAD || (pa->algo == 0 && pa->packed)))
        return 0;
    switch (pa->algo) {
    case 0: return pa->packed ? 1 : dw;   /* algo 0 unpacked with group == C: the direct loop */
    case CUVIL_CONV_GEMM_T: return 1;
    case CUVIL_CONV_DIRECT: return cuvil_conv2d_direct_applies(p);
    case CUVIL_CONV_DIRECT_T: return cuvil_conv2d_direct_t_applies(p);
    case CUVIL_CONV_GROUPED: return cuvil_conv2d_grouped_applies(p);
    default: return cuvil_conv2d_winograd_applies(p);
    }
}

int main(int argc, char **argv) {
    if (argc < 17) {
        fprintf(stderr, "usage: cuvil-bench-conv N C H W M KH KW SH SW PT PL PB PR DH DW GROUP [MS]\n");
        return 2;
    }
    int64_t v[16];
    for (int i = 0; i < 16; i++) v[i] = strtoll(argv[1 + i], NULL, 10);
    const double budget = argc > 17 ? atof(argv[17]) * 1e-3 : 0.3;
    cuvil_conv2d_params p;
    memset(&p, 0, sizeof p);
    p.N = v[0], p.C = v[1], p.H = v[2], p.W = v[3], p.M = v[4], p.KH = v[5], p.KW = v[6];
    p.stride_h = v[7], p.stride_w = v[8], p.pad_t = v[9], p.pad_l = v[10];
    p.dil_h = v[13], p.dil_w = v[14], p.group = v[15];
    p.OH = (p.H + v[9] + v[11] - (p.dil_h * (p.KH - 1) + 1)) / p.stride_h + 1;
    p.OW = (p.W + v[10] + v[12] - (p.dil_w * (p.KW - 1) + 1)) / p.stride_w + 1;
    if (p.N <= 0 || p.C <= 0 || p.M <= 0 || p.group <= 0 || p.C % p.group || p.M % p.group || p.OH <= 0 || p.OW <= 0) {
        fprintf(stderr, "cuvil-bench-conv: not a valid convolution\n");
        return 2;
    }
    /* CUVIL_BENCH_ACT: an activation fused into every path (cuvil_act's number, alpha 0, beta 0;
     * HardSwish is 6); CUVIL_BENCH_ONLY: only the path of that name (to profile it) */
    const char *act_env = getenv("CUVIL_BENCH_ACT"), *only = getenv("CUVIL_BENCH_ONLY");
    if (act_env) p.act.act = atoi(act_env);
    if (getenv("CUVIL_BENCH_NHWC") && atoi(getenv("CUVIL_BENCH_NHWC")))
        p.layout = CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC;
    const char *th_env = getenv("CUVIL_BENCH_THREADS");
    const int threads = th_env && atoi(th_env) > 1 ? atoi(th_env) : 1;
    size_t stride = 0;   /* each thread's scratch: the largest any path needs */
    const cuvil_gemm_blocking *b = cuvil_gemm_default_blocking();
    const size_t nx = (size_t)(p.N * p.C * p.H * p.W), nw = (size_t)(p.M * (p.C / p.group) * p.KH * p.KW),
                 ny = (size_t)(p.N * p.M * p.OH * p.OW);
    float *x = frand(nx, 1), *w = frand(nw, 2), *bias = frand((size_t)p.M, 3), *y = (float *)xalloc(ny * sizeof(float)),
          *ref = (float *)xalloc(ny * sizeof(float));
    cuvil_f32_conv2d__scalar(&p, x, w, bias, NULL, ref);
    double scale = 0;
    for (size_t i = 0; i < ny; i++) scale = fmax(scale, fabs(ref[i]));
    printf("{\"mr\": %d, \"nr\": %d, \"kc\": %lld, \"OH\": %lld, \"OW\": %lld, \"paths\": {", b->uk->mr, b->uk->nr,
           (long long)b->kc, (long long)p.OH, (long long)p.OW);
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        cuvil_conv2d_params q = p;
        q.algo = paths[k].algo;
        q.packed_mr = paths[k].packed == 1 ? b->uk->mr : paths[k].packed == 2 ? b->uk->nr
                      : paths[k].packed == 3 ? CUVIL_GCONV_LANES : 0;
        q.packed_kc = paths[k].packed ? b->kc : 0;
        if (takes(&paths[k], &q)) {
            const size_t need = (cuvil_f32_conv2d_scratch_size(&q) + 127) / 64 * 64;
            stride = need > stride ? need : stride;
        }
    }
    cuvil_pool *pool = threads > 1 ? cuvil_pool_create(threads, stride, pool_alloc, pool_free, NULL) : NULL;
    if (threads > 1 && !pool) {
        fprintf(stderr, "cuvil-bench-conv: cannot start %d threads\n", threads);
        return 2;
    }
    cuvil_pool_bind(pool);
    int first = 1;
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        const path *pa = &paths[k];
        cuvil_conv2d_params q = p;
        q.algo = pa->algo;
        q.packed_mr = pa->packed == 1 ? b->uk->mr : pa->packed == 2 ? b->uk->nr : pa->packed == 3 ? CUVIL_GCONV_LANES : 0;
        q.packed_kc = pa->packed ? b->kc : 0;
        if (!takes(pa, &q) || (only && strcmp(only, pa->name))) continue;
        size_t np = cuvil_f32_conv2d_packed_floats(&q), nt = cuvil_f32_conv2d_pack_tmp_floats(&q);
        float *wp = w, *tmp = NULL;
        if (pa->packed) {
            wp = (float *)xalloc((np ? np : 1) * sizeof(float));
            tmp = nt ? (float *)xalloc(nt * sizeof(float)) : NULL;
            cuvil_f32_conv2d_pack(&q, w, wp, tmp);
        }
        void *scratch = xalloc(stride * (size_t)threads + 64);
        cuvil_f32_conv2d_prepacked(&q, x, wp, bias, NULL, y, scratch);
        double err = 0;
        for (size_t i = 0; i < ny; i++) err = fmax(err, fabs(y[i] - ref[i]));
        printf("%s\"%s\": ", first ? "" : ", ", pa->name);
        first = 0;
        if (!(err <= 1e-4 * scale + 1e-6)) {
            printf("\"error: max abs difference %g from the scalar reference\"", err);
        } else {
            double t[512];
            int n = 0;
            const double start = now();
            while (n < 512 && (n < 5 || now() - start < budget)) {
                double t0 = now();
                cuvil_f32_conv2d_prepacked(&q, x, wp, bias, NULL, y, scratch);
                t[n++] = now() - t0;
            }
            qsort(t, (size_t)n, sizeof t[0], cmp_double);
            printf("%.5f", t[n / 2] * 1e3);
        }
        free(scratch);
        free(tmp);
        if (wp != w) free(wp);
    }
    printf("}}\n");
    cuvil_pool_bind(NULL);
    cuvil_pool_destroy(pool);
    free(x);
    free(w);
    free(bias);
    free(y);
    free(ref);
    return 0;
}
