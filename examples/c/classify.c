/*
 * classify.c -- use a Cuvil-compiled image classifier from plain C.
 *
 * The model is linked like any other library: include the header cuvil-compile wrote beside
 * it and call the prefixed functions. Nothing else is needed (no libcuvil, no Python):
 *
 *     cuvil-compile --model tinycnn.onnx --output out/tinycnn.so   # writes out/tinycnn.h too
 *     make MODEL_DIR=out MODEL=tinycnn                              # see Makefile
 *     ./classify sample.npy
 *
 * The source does not name the model: the Makefile passes -DMODEL_HEADER='"tinycnn.h"' and
 * -DMODEL_PREFIX=tinycnn, and CALL(run) becomes tinycnn_run.
 *
 * It reads a float32 .npy image (with the small reader in npy.h), runs the model once, prints
 * the top-5 classes of the first output with softmax probabilities, then times 50 runs and
 * prints the median latency.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(MODEL_HEADER) || !defined(MODEL_PREFIX)
#error "compile with -DMODEL_HEADER='\"tinycnn.h\"' -DMODEL_PREFIX=tinycnn (see Makefile)"
#endif
#include MODEL_HEADER
#include "npy.h"

#define PASTE_(a, b) a##_##b
#define PASTE(a, b) PASTE_(a, b)
#define CALL(fn) PASTE(MODEL_PREFIX, fn)   /* CALL(run) -> tinycnn_run */

#define N_TIMED_RUNS 50
#define TOP_K 5

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("classify: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* The model wants 64-byte aligned buffers. */
static void *alloc64(size_t n) {
    return aligned_alloc(64, n ? (n + 63) / 64 * 64 : 64);
}

/* A float32 .npy image whose shape is the model's input dims; NULL after printing why. */
static float *read_image(const char *path, const cuvil_tensor_info *in) {
    npy_array a;
    if (npy_read("classify", path, "<f4", sizeof(float), &a) != 0)
        return NULL;
    int same = a.ndim == in->ndim;
    for (int i = 0; same && i < a.ndim; i++)
        same = a.shape[i] == in->dims[i];
    if (!same) {
        char got[256] = "", want[256] = "";
        for (int i = 0; i < a.ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)a.shape[i]);
        for (int i = 0; i < in->ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
                     (long long)in->dims[i]);
        fail("%s: shape [%s], the model was compiled for [%s]", path, got, want);
        free(a.data);
        return NULL;
    }
    return a.data;
}

/* ===== main ================================================================================== */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s INPUT.npy [THREADS]\n", argv[0]);
        return 2;
    }
    const cuvil_model_desc *d = CALL(model)();
    if (d->n_inputs != 1 || d->n_outputs < 1 || d->inputs[0].dtype != CUVIL_DTYPE_FLOAT32 ||
        d->outputs[0].dtype != CUVIL_DTYPE_FLOAT32)
        return fail("model '%s' is not a classifier (one float32 input, float32 scores)",
                    d->name);
    const cuvil_tensor_info *in = &d->inputs[0], *out = &d->outputs[0];

    float *x = read_image(argv[1], in);
    if (!x)
        return 1;
    void **outs = calloc((size_t)d->n_outputs, sizeof *outs);
    int rc = 1;
    cuvil_model *m = NULL;
    for (int i = 0; outs && i < d->n_outputs; i++)
        if (!(outs[i] = alloc64(d->outputs[i].nbytes))) {
            fail("out of memory");
            goto done;
        }
    if (!outs) {
        fail("out of memory");
        goto done;
    }

    cuvil_model_options opts = {.n_threads = argc > 2 ? atoi(argv[2]) : 1, .weights_path = NULL};
    cuvil_status st = CALL(create)(&opts, &m);
    if (st != CUVIL_OK) {
        fail("create failed: %s", m ? CALL(errmsg)(m) : "out of memory");
        goto done;
    }
    const void *ins[1] = {x};
    if (CALL(run)(m, ins, outs) != CUVIL_OK) {
        fail("run failed: %s", CALL(errmsg)(m));
        goto done;
    }

    /* softmax over the last axis of the first output, first batch item */
    const float *scores = outs[0];
    int k = out->ndim > 0 ? (int)out->dims[out->ndim - 1] : 1;
    double *p = malloc((size_t)k * sizeof *p);
    int *idx = malloc((size_t)k * sizeof *idx);
    if (!p || !idx || k < 1) {
        free(p);
        free(idx);
        fail("%s", k < 1 ? "model output has no classes" : "out of memory");
        goto done;
    }
    float mx = scores[0];
    for (int i = 1; i < k; i++)
        mx = scores[i] > mx ? scores[i] : mx;
    double sum = 0;
    for (int i = 0; i < k; i++)
        sum += p[i] = exp((double)scores[i] - mx);
    for (int i = 0; i < k; i++) {
        p[i] /= sum;
        idx[i] = i;
    }
    int top = k < TOP_K ? k : TOP_K;
    for (int i = 0; i < top; i++)   /* partial selection sort: k is small */
        for (int j = i + 1; j < k; j++)
            if (p[idx[j]] > p[idx[i]]) {
                int t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    printf("model %s, input %s\n", d->name, argv[1]);
    printf("top %d of %d classes (softmax):\n", top, k);
    for (int i = 0; i < top; i++)
        printf("  %d. class %d  p=%.4f\n", i + 1, idx[i], p[idx[i]]);
    free(p);
    free(idx);

    double t[N_TIMED_RUNS];
    for (int i = 0; i < N_TIMED_RUNS; i++) {
        double t0 = now_ms();
        if (CALL(run)(m, ins, outs) != CUVIL_OK) {
            fail("run failed: %s", CALL(errmsg)(m));
            goto done;
        }
        t[i] = now_ms() - t0;
    }
    qsort(t, N_TIMED_RUNS, sizeof t[0], cmp_double);
    printf("median latency over %d runs: %.4f ms\n", N_TIMED_RUNS,
           (t[N_TIMED_RUNS / 2 - 1] + t[N_TIMED_RUNS / 2]) / 2);
    rc = 0;

done:
    if (m)
        CALL(destroy)(m);
    for (int i = 0; outs && i < d->n_outputs; i++)
        free(outs[i]);
    free(outs);
    free(x);
    return rc;
}
