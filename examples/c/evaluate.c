/*
 * evaluate.c -- a Cuvil-compiled classifier from plain C over a labelled test set: accuracy,
 * agreement with another implementation's predictions, and latency per input.
 *
 *     make MODEL_DIR=out MODEL=digits            # see Makefile (builds classify and evaluate)
 *     ./evaluate X.npy LABELS.npy [REFERENCE_PREDICTIONS.npy]
 *
 * X is float32 [N, ...] where [1, ...] are the model's input dims: the model runs on one input
 * at a time, as a service answering single requests would. LABELS and the reference
 * predictions (e.g. PyTorch's, from examples/digits/train.py) are int64 [N].
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(MODEL_HEADER) || !defined(MODEL_PREFIX)
#error "compile with -DMODEL_HEADER='\"digits.h\"' -DMODEL_PREFIX=digits (see Makefile)"
#endif
#include MODEL_HEADER
#include "npy.h"

#define PASTE_(a, b) a##_##b
#define PASTE(a, b) PASTE_(a, b)
#define CALL(fn) PASTE(MODEL_PREFIX, fn)   /* CALL(run) -> digits_run */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s X.npy LABELS.npy [REFERENCE_PREDICTIONS.npy]\n", argv[0]);
        return 2;
    }
    const cuvil_model_desc *d = CALL(model)();
    const cuvil_tensor_info *in = &d->inputs[0], *out = &d->outputs[0];
    if (d->n_inputs != 1 || d->n_outputs != 1 || in->dtype != CUVIL_DTYPE_FLOAT32 || out->dtype != CUVIL_DTYPE_FLOAT32 ||
        in->ndim < 1 || in->dims[0] != 1 || out->ndim != 2) {
        fprintf(stderr, "evaluate: model '%s' is not a batch-1 classifier (one float32 input [1, ...], "
                        "float32 scores [1, classes])\n", d->name);
        return 1;
    }
    npy_array x, labels, ref = {0};
    if (npy_read("evaluate", argv[1], "<f4", sizeof(float), &x) != 0 ||
        npy_read("evaluate", argv[2], "<i8", sizeof(int64_t), &labels) != 0 ||
        (argc > 3 && npy_read("evaluate", argv[3], "<i8", sizeof(int64_t), &ref) != 0))
        return 1;
    const int64_t n = x.ndim ? x.shape[0] : 0;
    int same = x.ndim == in->ndim && n > 0;
    for (int i = 1; same && i < in->ndim; i++) same = x.shape[i] == in->dims[i];
    if (!same || labels.ndim != 1 || labels.shape[0] != n || (argc > 3 && (ref.ndim != 1 || ref.shape[0] != n))) {
        fprintf(stderr, "evaluate: X must be [N, ...] with the model's input dims after N, LABELS and the "
                        "predictions [N]\n");
        return 1;
    }
    const size_t per = in->nbytes / sizeof(float);
    const int64_t classes = out->dims[1];
    float *xi = aligned_alloc(64, (in->nbytes + 63) / 64 * 64), *scores = aligned_alloc(64, (out->nbytes + 63) / 64 * 64);
    double *t = malloc((size_t)n * sizeof *t);
    cuvil_model *m = NULL;
    if (!xi || !scores || !t || CALL(create)(NULL, &m) != CUVIL_OK) {
        fprintf(stderr, "evaluate: %s\n", m ? CALL(errmsg)(m) : "out of memory");
        return 1;
    }
    const int64_t *lab = labels.data, *rp = ref.data;
    int64_t correct = 0, agree = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(xi, (const float *)x.data + (size_t)i * per, in->nbytes);
        const void *ins[1] = {xi};
        void *outs[1] = {scores};
        double t0 = now_us();
        if (CALL(run)(m, ins, outs) != CUVIL_OK) {
            fprintf(stderr, "evaluate: run %lld: %s\n", (long long)i, CALL(errmsg)(m));
            return 1;
        }
        t[i] = now_us() - t0;
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (scores[c] > scores[best]) best = c;
        correct += best == lab[i];
        if (rp) agree += best == rp[i];
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    printf("Cuvil (C, %s): held-out accuracy %.1f%% (%lld/%lld)", d->target, 100.0 * (double)correct / (double)n,
           (long long)correct, (long long)n);
    if (rp) printf("; same prediction as the reference on %lld/%lld", (long long)agree, (long long)n);
    printf("; latency median %.1f us per input\n", n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2);
    CALL(destroy)(m);
    free(xi);
    free(scores);
    free(t);
    free(x.data);
    free(labels.data);
    free(ref.data);
    return 0;
}
