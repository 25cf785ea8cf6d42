/*
 * fake_model.c -- a hand-written "compiled model" that implements include/cuvil/cuvil_model.h
 * exactly as generated code does, so cuvil-run, the examples and the ABI contract can be tested
 * without the compiler. test_tensor_io.c builds it at test time:
 *
 *     cc -shared -fPIC -I<repo>/include fake_model.c -o fake.so [-DFAKE_VARIANT=2] ...
 *
 * Variant 1 (default, prefix "fake"):  x float32[batch=1,3]  ->  y float32[1,3] = 2*x + 1
 * Variant 2 (prefix "fake2"):          a float32[2,2], b int64[2]
 *                                      -> "sum/0" float32[2,2] = a + b (broadcast over rows),
 *                                         "count:0" int64[] = b[0] + b[1]
 * Test hooks, which a generated model does not have:
 *   - run fails (CUVIL_ERR_INVALID_ARG) when any float input element is NaN;
 *   - create fails when opts->n_threads > 64, and when opts->weights_path is set;
 *   - -DFAKE_ABI_VERSION=N reports a different ABI version; -DFAKE_NO_ENTRY omits the dlopen
 *     entry symbol.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuvil/cuvil_model.h"

#ifndef FAKE_VARIANT
#define FAKE_VARIANT 1
#endif
#ifndef FAKE_ABI_VERSION
#define FAKE_ABI_VERSION CUVIL_MODEL_ABI_VERSION
#endif
#if FAKE_VARIANT == 1
#define FAKE_PREFIX fake
#else
#define FAKE_PREFIX fake2
#endif

#define FAKE_CAT_(a, b) a##_##b
#define FAKE_CAT(a, b) FAKE_CAT_(a, b)
#define FAKE_SYM(fn) FAKE_CAT(FAKE_PREFIX, fn)
#define FAKE_STR_(x) #x
#define FAKE_STR(x) FAKE_STR_(x)
#define EXPORT __attribute__((visibility("default")))

struct cuvil_model {
    int n_threads;
    char err[256];
};

#if FAKE_VARIANT == 1
static const cuvil_tensor_info fake_inputs[] = {
    {.name = "x", .dtype = CUVIL_DTYPE_FLOAT32, .ndim = 2, .dims = {1, 3},
     .dim_names = {"batch", NULL}, .nbytes = 12},
};
static const cuvil_tensor_info fake_outputs[] = {
    {.name = "y", .dtype = CUVIL_DTYPE_FLOAT32, .ndim = 2, .dims = {1, 3},
     .dim_names = {"batch", NULL}, .nbytes = 12},
};
#else
static const cuvil_tensor_info fake_inputs[] = {
    {.name = "a", .dtype = CUVIL_DTYPE_FLOAT32, .ndim = 2, .dims = {2, 2}, .nbytes = 16},
    {.name = "b", .dtype = CUVIL_DTYPE_INT64, .ndim = 1, .dims = {2}, .nbytes = 16},
};
static const cuvil_tensor_info fake_outputs[] = {
    {.name = "sum/0", .dtype = CUVIL_DTYPE_FLOAT32, .ndim = 2, .dims = {2, 2}, .nbytes = 16},
    {.name = "count:0", .dtype = CUVIL_DTYPE_INT64, .ndim = 0, .nbytes = 8},
};
#endif

static cuvil_status fake_fail(cuvil_model *m, cuvil_status st, const char *msg, long v) {
    snprintf(m->err, sizeof m->err, "%s: %s (%ld)", FAKE_STR(FAKE_PREFIX), msg, v);
    return st;
}

EXPORT cuvil_status FAKE_SYM(create)(const cuvil_model_options *opts, cuvil_model **out) {
    cuvil_model *m = calloc(1, sizeof *m);
    *out = m;
    if (!m)
        return CUVIL_ERR_NOMEM;
    m->n_threads = opts ? opts->n_threads : 0;
    if (opts && opts->weights_path)
        return fake_fail(m, CUVIL_ERR_INVALID_ARG, "external weights are not supported", 0);
    if (m->n_threads < 0 || m->n_threads > 64)
        return fake_fail(m, CUVIL_ERR_INVALID_ARG, "n_threads must be in 0..64", m->n_threads);
    return CUVIL_OK;
}

EXPORT cuvil_status FAKE_SYM(run)(cuvil_model *m, const void *const *inputs,
                                  void *const *outputs) {
    m->err[0] = '\0';
#if FAKE_VARIANT == 1
    const float *x = inputs[0];
    float *y = outputs[0];
    for (int i = 0; i < 3; i++)
        if (isnan(x[i]))
            return fake_fail(m, CUVIL_ERR_INVALID_ARG, "x holds NaN at index", i);
    for (int i = 0; i < 3; i++)
        y[i] = 2.0f * x[i] + 1.0f;
#else
    const float *a = inputs[0];
    const int64_t *b = inputs[1];
    float *sum = outputs[0];
    int64_t *count = outputs[1];
    for (int i = 0; i < 4; i++)
        if (isnan(a[i]))
            return fake_fail(m, CUVIL_ERR_INVALID_ARG, "a holds NaN at index", i);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++)
            sum[r * 2 + c] = a[r * 2 + c] + (float)b[c];
    *count = b[0] + b[1];
#endif
    return CUVIL_OK;
}

/* fixed dims: the run's must be the descriptor's (checked), and so are the outputs' */
EXPORT cuvil_status FAKE_SYM(run_shapes)(cuvil_model *m, const void *const *inputs, const int64_t *const *in_dims,
                                         void *const *outputs, int64_t *const *out_dims) {
    const int ni = (int)(sizeof fake_inputs / sizeof fake_inputs[0]), no = (int)(sizeof fake_outputs / sizeof fake_outputs[0]);
    for (int i = 0; in_dims && i < ni; i++)
        for (int d = 0; d < fake_inputs[i].ndim; d++)
            if (in_dims[i][d] != fake_inputs[i].dims[d]) return fake_fail(m, CUVIL_ERR_SHAPE, "a dim differs at input", i);
    cuvil_status st = FAKE_SYM(run)(m, inputs, outputs);
    for (int i = 0; !st && out_dims && i < no; i++)
        for (int d = 0; d < fake_outputs[i].ndim; d++)
            if (out_dims[i]) out_dims[i][d] = fake_outputs[i].dims[d];
    return st;
}

EXPORT const char *FAKE_SYM(errmsg)(const cuvil_model *m) {
    return m ? m->err : "no context";
}

EXPORT void FAKE_SYM(destroy)(cuvil_model *m) {
    free(m);
}

EXPORT int FAKE_SYM(output_present)(const cuvil_model *m, int i) {
    return m && i >= 0 && i < (int)(sizeof fake_outputs / sizeof fake_outputs[0]);   /* (no optional outputs) */
}

static const cuvil_model_desc fake_desc = {
    .abi_version = FAKE_ABI_VERSION,
    .name = FAKE_STR(FAKE_PREFIX),
    .n_inputs = (int)(sizeof fake_inputs / sizeof fake_inputs[0]),
    .n_outputs = (int)(sizeof fake_outputs / sizeof fake_outputs[0]),
    .inputs = fake_inputs,
    .outputs = fake_outputs,
    .model_sha256 = "0000000000000000000000000000000000000000000000000000000000000000",
    .cuvil_version = "0.1.0-fake",
    .target = "generic",
    .options = "opt_level=0 (hand-written test model)",
    .arena_bytes = 0,
    .weights_bytes = 0,
    .create = FAKE_SYM(create),
    .run = FAKE_SYM(run),
    .errmsg = FAKE_SYM(errmsg),
    .destroy = FAKE_SYM(destroy),
    .n_syms = 0,
    .syms = NULL,
    .run_shapes = FAKE_SYM(run_shapes),
    .cpu_features = "",
    .output_present = FAKE_SYM(output_present),
};

EXPORT const cuvil_model_desc *FAKE_SYM(model)(void) {
    return &fake_desc;
}

#ifndef FAKE_NO_ENTRY
EXPORT const cuvil_model_desc *cuvil_model_entry(void) {
    return &fake_desc;
}
#endif
