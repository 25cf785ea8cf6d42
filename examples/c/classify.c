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
 * It reads a float32 .npy image (with a small reader of its own), runs the model once, prints
 * the top-5 classes of the first output with softmax probabilities, then times 50 runs and
 * prints the median latency.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
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

/* ===== a minimal .npy reader: little-endian float32, C order ================================= */

/* Reads path into a 64-byte aligned buffer of exactly want_bytes, checking that the header
 * says float32 with the shape dims[0..ndim). Returns NULL after printing why. */
static float *read_npy_f32(const char *path, int ndim, const int64_t *dims, size_t want_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail("%s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char pre[12];
    char *header = NULL;
    float *data = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] < 1 ||
        pre[6] > 3) {
        fail("%s: not a .npy file (version 1.0 to 3.0)", path);
        goto out;
    }
    size_t hlen = pre[8] | (size_t)pre[9] << 8;
    if (pre[6] > 1) {   /* 2.0 and 3.0: 4-byte header length */
        if (fread(pre + 10, 1, 2, f) != 2) {
            fail("%s: truncated header", path);
            goto out;
        }
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hlen > 65536 || !(header = malloc(hlen + 1)) || fread(header, 1, hlen, f) != hlen) {
        fail("%s: bad or truncated header", path);
        goto out;
    }
    header[hlen] = '\0';
    if (!strstr(header, "'descr': '<f4'")) {
        fail("%s: the model takes float32 input; save it with a.astype('float32')", path);
        goto out;
    }
    if (strstr(header, "'fortran_order': True")) {
        fail("%s: fortran_order arrays are not supported", path);
        goto out;
    }
    /* the shape tuple must equal the model's input dims */
    const char *s = strstr(header, "'shape': (");
    if (!s) {
        fail("%s: header has no shape", path);
        goto out;
    }
    s += strlen("'shape': (");
    int n = 0;
    int64_t shape[16];
    while (*s != ')' && n < 16) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s)
            break;
        shape[n++] = v;
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    int same = n == ndim;
    for (int i = 0; same && i < n; i++)
        same = shape[i] == dims[i];
    if (!same) {
        char got[256] = "", want[256] = "";
        for (int i = 0; i < n; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)shape[i]);
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
                     (long long)dims[i]);
        fail("%s: shape [%s], the model was compiled for [%s]", path, got, want);
        goto out;
    }
    data = alloc64(want_bytes);
    if (!data) {
        fail("out of memory");
        goto out;
    }
    char extra;
    if (fread(data, 1, want_bytes, f) != want_bytes || fread(&extra, 1, 1, f) != 0) {
        fail("%s: payload is not %zu bytes", path, want_bytes);
        free(data);
        data = NULL;
    }
out:
    free(header);
    fclose(f);
    return data;
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

    float *x = read_npy_f32(argv[1], in->ndim, in->dims, in->nbytes);
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
