/*
 * test_glue.c -- the runtime's glue (runtime/glue/context.c) on a hand-made model table: every
 * way create() takes its memory, every check of run's arguments and dims, the guards, the sizes
 * the run finds, the messages. Linked with the runtime the kernel tests use (sanitized in a
 * sanitized build), so the glue every model links is run under ASan/UBSan here.
 *
 * The model: x float32[n, 3] (n a symbol, 1..8 step 1), k int64[2] -> y float32[n, 3] = 2x and
 * z int64[c] = the first c of k's values, c = k[0] (a size the run finds, 0..2). A guard: n != 5
 * (as a model's check_guards() refuses a size its shapes cannot take).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuvil/cuvil_model.h"
#include "cuvil_glue.h"
#include "check.h"

static const cuvil_tensor_info inputs_[2] = {
    {"x", CUVIL_DTYPE_FLOAT32, 2, {8, 3}, {"n", NULL}, 8 * 3 * 4, 0, 0, 0, 0, 0, 0},
    {"k", CUVIL_DTYPE_INT64, 1, {2}, {NULL}, 16, 0, 0, 0, 0, 0, 0},
};
static const cuvil_tensor_info outputs_[2] = {
    {"y", CUVIL_DTYPE_FLOAT32, 2, {8, 3}, {"n", NULL}, 8 * 3 * 4, 0, 0, 0, 0, 0, 0},
    {"z", CUVIL_DTYPE_INT64, 1, {2}, {NULL}, 16, 0, 0, 0, 0, 0, 0},
};
static const cuvil_sym_info syms_[1] = {{"n", 1, 8, 1}};
static const int8_t in_sym_[2][CUVIL_MAX_DIMS] = {{0, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, -1, -1}};
static const unsigned char weights_[64] = {0};
static size_t scratch_need = 64;   /* what the "runtime" says its kernels need */
static int runs;

static size_t scratch_bytes(void) { return scratch_need; }

static cuvil_status check_guards(cuvil_model *m, const int64_t *D) {
    if (D[0] == 5) {
        snprintf(m->err, sizeof m->err, "node 'g': n is 5");
        return CUVIL_ERR_SHAPE;
    }
    return CUVIL_OK;
}

static cuvil_status check_guards_none(cuvil_model *m, const int64_t *D) {
    (void)m, (void)D;
    return CUVIL_OK;
}

static void output_dims(const int64_t *D, int64_t *const *od) {
    if (!od) return;
    if (od[0]) od[0][0] = D[0], od[0][1] = 3;
    if (od[1]) od[1][0] = D[1];
}

static cuvil_status run_nodes(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S, const void *const *in,
                              void *const *out, int64_t *D) {
    runs++;
    CHECK(W == weights_, "the nodes get the context's weights");
    CHECK(D[1] == 0, "a size the run finds starts at 0 (%lld)", (long long)D[1]);
    CHECK(((uintptr_t)A & 63) == 0 && ((uintptr_t)S & 63) == 0, "the arena and scratch are 64-byte aligned");
    memset(A, 0xab, 4096);   /* the arena: all of it is the model's (ASan sees an overrun) */
    memset(S, 0xcd, 64);
    const float *x = in[0];
    const int64_t *k = in[1];
    for (int64_t i = 0; i < D[0] * 3; i++) ((float *)out[0])[i] = 2 * x[i];
    if (k[0] < 0 || k[0] > 2) return cuvil_glue_fail(m, "node 'c': k[0] is outside 0..2");
    D[1] = k[0];
    for (int64_t i = 0; i < D[1]; i++) ((int64_t *)out[1])[i] = k[i];
    return CUVIL_OK;
}

static const cuvil_model_desc desc_ = {
    CUVIL_MODEL_ABI_VERSION, "t", 2, 2, inputs_, outputs_, "sha", "v", "generic", "", 4096, sizeof weights_,
    NULL, NULL, NULL, NULL, 1, syms_, NULL, "", 1, NULL,
};
static const cuvil_glue_table table_ = {
    &desc_, 64, scratch_bytes, 2, in_sym_, weights_, check_guards, output_dims, run_nodes, NULL, NULL, 0, 0, 0, NULL,
};

/* a caller's allocator that counts, and fails from call fail_from on (0: never) */
static int n_alloc, n_free, fail_from;
static void *count_alloc(size_t size, size_t align, void *user) {
    CHECK(user == &n_alloc, "the allocator gets its user pointer");
    if (fail_from && n_alloc + 1 >= fail_from) return NULL;
    n_alloc++;
    return aligned_alloc(align, (size + align - 1) / align * align);
}
static void count_free(void *p, void *user) {
    CHECK(user == &n_alloc, "free gets the user pointer");
    n_free++;
    free(p);
}

static void test_run(cuvil_model *m, const char *what) {
    float x[8 * 3], y[8 * 3];
    int64_t k[2] = {2, 7}, z[2] = {0, 0}, xd[2] = {4, 3}, kd[1] = {2}, yd[2] = {0, 0}, zd[1] = {-1};
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    const void *in[2] = {x, k};
    void *out[2] = {y, z};
    const int64_t *id[2] = {xd, kd};
    int64_t *od[2] = {yd, zd};
    cuvil_status st = cuvil_glue_run_shapes(m, in, id, out, od);
    CHECK(st == CUVIL_OK, "%s: run: %s", what, cuvil_glue_errmsg(m));
    CHECK(yd[0] == 4 && yd[1] == 3 && zd[0] == 2, "%s: output dims %lld,%lld %lld", what, (long long)yd[0],
          (long long)yd[1], (long long)zd[0]);
    CHECK(y[11] == 22.0f && z[0] == 2 && z[1] == 7, "%s: outputs", what);
    /* the fixed-shape call: the symbols at their upper bounds */
    st = cuvil_glue_run_shapes(m, in, NULL, out, od);
    CHECK(st == CUVIL_OK && yd[0] == 8 && y[23] == 46.0f, "%s: run at the bounds", what);
}

static void test_create_modes(void) {
    cuvil_model *m = NULL;
    CHECK(cuvil_glue_create(&table_, NULL, &m) == CUVIL_OK && m, "default create");
    test_run(m, "default");
    cuvil_glue_destroy(m);

    cuvil_model_options o = {.alloc = count_alloc, .free = count_free, .alloc_user = &n_alloc, .n_threads = 2};
    CHECK(cuvil_glue_create(&table_, &o, &m) == CUVIL_OK, "create with an allocator and 2 threads: %s",
          cuvil_glue_errmsg(m));
    test_run(m, "allocator");
    cuvil_glue_destroy(m);
    CHECK(n_alloc > 0 && n_alloc == n_free, "every allocation freed (%d, %d)", n_alloc, n_free);

    /* a caller's buffer: the header's BUFFER_BYTES is the context, the dims, the arena, the scratch and 64 */
    size_t need = CUVIL_GLUE_CONTEXT_BYTES + CUVIL_GLUE_DIMS_BYTES(2) + 4096 + 64 + 64;
    unsigned char *buf = malloc(need + 1);
    for (size_t skew = 0; skew < 64; skew += 7) {   /* any alignment of the caller's buffer */
        cuvil_model_options b = {.buffer = buf + (skew & 1), .buffer_bytes = need};
        CHECK(cuvil_glue_create(&table_, &b, &m) == CUVIL_OK, "create in a buffer: %s", cuvil_glue_errmsg(m));
        test_run(m, "buffer");
        cuvil_glue_destroy(m);   /* frees nothing */
        b.buffer_bytes = need - 64 - 1;
        CHECK(cuvil_glue_create(&table_, &b, &m) == CUVIL_ERR_INVALID_ARG && strstr(cuvil_glue_errmsg(m), "smaller"),
              "a buffer too small: %s", cuvil_glue_errmsg(m));
    }
    cuvil_model_options b = {.buffer = buf, .buffer_bytes = need, .n_threads = 2};
    CHECK(cuvil_glue_create(&table_, &b, &m) == CUVIL_ERR_INVALID_ARG && strstr(cuvil_glue_errmsg(m), "calling thread"),
          "threads in a buffer: %s", cuvil_glue_errmsg(m));
    b.n_threads = 0;
    b.buffer_bytes = 100;
    CHECK(cuvil_glue_create(&table_, &b, &m) == CUVIL_ERR_INVALID_ARG && !m, "a buffer without room for a context");
    b.buffer_bytes = SIZE_MAX;   /* wraps around the address space */
    CHECK(cuvil_glue_create(&table_, &b, &m) == CUVIL_ERR_INVALID_ARG, "a buffer past the address space");
    free(buf);
}

static void test_create_refusals(void) {
    cuvil_model *m = NULL;
    CHECK(cuvil_glue_create(&table_, NULL, NULL) == CUVIL_ERR_INVALID_ARG, "no out");
    cuvil_model_options o = {.alloc = count_alloc};
    CHECK(cuvil_glue_create(&table_, &o, &m) == CUVIL_ERR_INVALID_ARG && !m, "alloc without free");
    unsigned char buf[4096];
    o = (cuvil_model_options){.alloc = count_alloc, .free = count_free, .buffer = buf, .buffer_bytes = sizeof buf};
    CHECK(cuvil_glue_create(&table_, &o, &m) == CUVIL_ERR_INVALID_ARG && !m, "a buffer and an allocator");
    o = (cuvil_model_options){.weights_path = "w.bin"};
    CHECK(cuvil_glue_create(&table_, &o, &m) == CUVIL_ERR_UNSUPPORTED && strstr(cuvil_glue_errmsg(m), "w.bin"),
          "external weights: %s", cuvil_glue_errmsg(m));
    cuvil_glue_destroy(m);
    o = (cuvil_model_options){.n_threads = CUVIL_MAX_THREADS + 1};
    CHECK(cuvil_glue_create(&table_, &o, &m) == CUVIL_ERR_INVALID_ARG && strstr(cuvil_glue_errmsg(m), "CUVIL_MAX_THREADS"),
          "too many threads: %s", cuvil_glue_errmsg(m));
    /* a context whose create() failed: run refuses it, errmsg and destroy work */
    CHECK(cuvil_glue_run_shapes(m, NULL, NULL, NULL, NULL) == CUVIL_ERR_INVALID_ARG, "run after a failed create");
    cuvil_glue_destroy(m);
    /* a runtime whose kernels need more scratch than the model was compiled for */
    scratch_need = 65;
    CHECK(cuvil_glue_create(&table_, NULL, &m) == CUVIL_ERR_INTERNAL, "a runtime with another blocking");
    cuvil_glue_destroy(m);
    scratch_need = 64;
    /* a CPU feature no CPU has: refused with the target named */
    cuvil_model_desc d = desc_;
    d.cpu_features = "nosuchfeature";
    cuvil_glue_table t = table_;
    t.desc = &d;
    CHECK(cuvil_glue_create(&t, NULL, &m) == CUVIL_ERR_UNSUPPORTED && strstr(cuvil_glue_errmsg(m), "nosuchfeature") &&
              strstr(cuvil_glue_errmsg(m), "generic"), "a CPU lacking a feature: %s", cuvil_glue_errmsg(m));
    CHECK(cuvil_glue_run_shapes(m, NULL, NULL, NULL, NULL) == CUVIL_ERR_INVALID_ARG &&
              strstr(cuvil_glue_errmsg(m), "nosuchfeature"), "run after it keeps the message");
    cuvil_glue_destroy(m);
    CHECK(!strcmp(cuvil_glue_errmsg(NULL), "no model"), "errmsg(NULL)");
    cuvil_glue_destroy(NULL);
    CHECK(cuvil_glue_run_shapes(NULL, NULL, NULL, NULL, NULL) == CUVIL_ERR_INVALID_ARG, "run(NULL)");
    /* the allocator fails at the context, at the arena, at the threads' memory: nothing leaks,
     * and a context that failed cannot run (its arena is gone) */
    for (int k = 1; k <= 3; k++) {
        n_alloc = n_free = 0;
        fail_from = k;
        cuvil_model_options a = {.alloc = count_alloc, .free = count_free, .alloc_user = &n_alloc, .n_threads = 2};
        m = NULL;
        CHECK(cuvil_glue_create(&table_, &a, &m) == CUVIL_ERR_NOMEM, "allocation %d failing: %s", k, cuvil_glue_errmsg(m));
        CHECK((k == 1) == !m, "allocation %d failing: a context to read the message from", k);
        float x[24] = {0}, y[24];
        int64_t kk[2] = {0}, z[2];
        const void *in[2] = {x, kk};
        void *out[2] = {y, z};
        const int runs_before = runs;
        CHECK(!m || (cuvil_glue_run_shapes(m, in, NULL, out, NULL) == CUVIL_ERR_INVALID_ARG && runs == runs_before),
              "allocation %d failing: run refuses the context", k);
        CHECK(k != 3 || strstr(cuvil_glue_errmsg(m), "threads"), "the threads' failure is kept: %s", cuvil_glue_errmsg(m));
        cuvil_glue_destroy(m);
        CHECK(n_alloc == n_free, "allocation %d failing: %d allocated, %d freed", k, n_alloc, n_free);
    }
    fail_from = 0;
}

/* run_shapes with x's dims (n, c) and k's values: its status, the message in *msg */
static cuvil_status run_with(cuvil_model *m, int64_t n, int64_t c, int64_t k0, const char **msg) {
    float x[8 * 3] = {0}, y[8 * 3];
    int64_t k[2] = {k0, 0}, z[2], xd[2] = {n, c}, kd[1] = {2};
    const void *in[2] = {x, k};
    void *out[2] = {y, z};
    const int64_t *id[2] = {xd, kd};
    cuvil_status st = cuvil_glue_run_shapes(m, in, id, out, NULL);
    *msg = cuvil_glue_errmsg(m);
    return st;
}

static void test_run_checks(void) {
    cuvil_model *m = NULL;
    CHECK(cuvil_glue_create(&table_, NULL, &m) == CUVIL_OK, "create");
    const char *msg;
    CHECK(run_with(m, 3, 3, 1, &msg) == CUVIL_OK && !msg[0], "a good run clears the message: %s", msg);
    CHECK(run_with(m, 9, 3, 1, &msg) == CUVIL_ERR_SHAPE && strstr(msg, "outside 1..8") && strstr(msg, ": x"),
          "n over its range: %s", msg);
    CHECK(run_with(m, 0, 3, 1, &msg) == CUVIL_ERR_SHAPE && strstr(msg, "outside"), "n under its range: %s", msg);
    CHECK(run_with(m, 3, 4, 1, &msg) == CUVIL_ERR_SHAPE && strstr(msg, "dim 1 is 4; the model takes 3"),
          "a fixed dim: %s", msg);
    CHECK(run_with(m, 5, 3, 1, &msg) == CUVIL_ERR_SHAPE && strstr(msg, "n is 5"), "a guard: %s", msg);
    CHECK(run_with(m, 3, 3, 9, &msg) == CUVIL_ERR_INVALID_ARG && strstr(msg, "node 'c'"), "a node's failure: %s", msg);
    CHECK(run_with(m, 3, 3, 0, &msg) == CUVIL_OK, "and the context runs after it: %s", msg);

    float x[24], y[24];
    int64_t k[2] = {0}, z[2], xd[2] = {2, 3}, kd[1] = {2};
    const void *in[2] = {x, k}, *in_null[2] = {x, NULL};
    void *out[2] = {y, z}, *out_null[2] = {NULL, z};
    const int64_t *id[2] = {xd, kd}, *id_null[2] = {xd, NULL};
    CHECK(cuvil_glue_run_shapes(m, NULL, id, out, NULL) == CUVIL_ERR_INVALID_ARG &&
              strstr(cuvil_glue_errmsg(m), "inputs array"), "no inputs: %s", cuvil_glue_errmsg(m));
    CHECK(cuvil_glue_run_shapes(m, in, id, NULL, NULL) == CUVIL_ERR_INVALID_ARG, "no outputs");
    CHECK(cuvil_glue_run_shapes(m, in_null, id, out, NULL) == CUVIL_ERR_INVALID_ARG &&
              strstr(cuvil_glue_errmsg(m), "input buffer is NULL: k"), "a NULL input: %s", cuvil_glue_errmsg(m));
    CHECK(cuvil_glue_run_shapes(m, in, id, out_null, NULL) == CUVIL_ERR_INVALID_ARG &&
              strstr(cuvil_glue_errmsg(m), "output buffer is NULL: y"), "a NULL output: %s", cuvil_glue_errmsg(m));
    CHECK(cuvil_glue_run_shapes(m, in, id_null, out, NULL) == CUVIL_ERR_INVALID_ARG &&
              strstr(cuvil_glue_errmsg(m), "dims of input are NULL: k"), "NULL dims: %s", cuvil_glue_errmsg(m));
    cuvil_glue_destroy(m);
}

static void test_set_err(void) {
    cuvil_model *m = NULL;
    CHECK(cuvil_glue_create(&table_, NULL, &m) == CUVIL_OK, "create");
    char name[2000];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    cuvil_glue_set_err(m, "msg", name);   /* cut to fit */
    CHECK(strlen(cuvil_glue_errmsg(m)) == sizeof m->err - 1 && !strncmp(cuvil_glue_errmsg(m), "msg: nnn", 8),
          "a long name is cut");
    cuvil_glue_set_err(m, "only", NULL);
    CHECK(!strcmp(cuvil_glue_errmsg(m), "only"), "no name: %s", cuvil_glue_errmsg(m));
    cuvil_glue_destroy(m);
}

/* ===== a sequence input: the header checked before any node reads it ===================== */
/* "s": up to 3 elements of float[<=4, 3] (dim 0 may differ between elements), its count the
 * symbol len(s) in 1..3; "f": exactly 2 elements of the same (a fixed count). Layout: a header
 * of 64 bytes (8 * (1 + 3 * 2) = 56, rounded), slots of 64 (4 * 3 * 4 = 48, rounded). */
static const cuvil_tensor_info seq_in_[2] = {
    {"s", CUVIL_DTYPE_FLOAT32, 2, {4, 3}, {NULL, NULL}, 64 + 3 * 64, 1, 3, 1u, 64, 64, 0},
    {"f", CUVIL_DTYPE_FLOAT32, 2, {4, 3}, {NULL, NULL}, 64 + 2 * 64, 1, 2, 1u, 64, 64, 0},
};
static const cuvil_tensor_info seq_out_[1] = {{"n", CUVIL_DTYPE_INT64, 1, {1}, {NULL}, 8, 0, 0, 0, 0, 0, 0}};
static const cuvil_sym_info seq_syms_[1] = {{"len(s)", 1, 3, 1}};
static const int8_t seq_in_sym_[2][CUVIL_MAX_DIMS] = {{0, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, -1, -1}};

static void seq_output_dims(const int64_t *D, int64_t *const *od) {
    (void)D;
    if (od && od[0]) od[0][0] = 1;
}

static cuvil_status seq_run_nodes(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S, const void *const *in,
                                  void *const *out, int64_t *D) {
    (void)m, (void)A, (void)W, (void)S;
    CHECK(D[0] == ((const int64_t *)in[0])[0], "len(s) is the header's count");
    *(int64_t *)out[0] = D[0];
    return CUVIL_OK;
}

static const cuvil_model_desc seq_desc_ = {
    CUVIL_MODEL_ABI_VERSION, "q", 2, 1, seq_in_, seq_out_, "sha", "v", "generic", "", 64, sizeof weights_,
    NULL, NULL, NULL, NULL, 1, seq_syms_, NULL, "", 0, NULL,
};
static const cuvil_glue_table seq_table_ = {
    &seq_desc_, 64, scratch_bytes, 1, seq_in_sym_, weights_, check_guards_none, seq_output_dims, seq_run_nodes, NULL, NULL, 0, 0, 0, NULL,
};

/* Runs with s holding `count` elements whose dims are d0 x d1 each (f: 2 elements of 4 x 3, or
 * f_count of them), through run_shapes with dims (NULL for the sequences) or the fixed call. */
static cuvil_status seq_run(cuvil_model *m, int64_t count, int64_t d0, int64_t d1, int64_t f_count, bool fixed,
                            int64_t *n) {
    _Alignas(64) int64_t s[(64 + 3 * 64) / 8] = {0}, f[(64 + 2 * 64) / 8] = {0};
    s[0] = count;
    for (int64_t e = 0; e < 3; e++) s[1 + 2 * e] = d0, s[2 + 2 * e] = d1;
    f[0] = f_count;
    for (int64_t e = 0; e < 2; e++) f[1 + 2 * e] = 4, f[2 + 2 * e] = 3;
    const void *in[2] = {s, f};
    void *out[1] = {n};
    const int64_t *id[2] = {NULL, NULL};
    return cuvil_glue_run_shapes(m, in, fixed ? NULL : id, out, NULL);
}

static void test_sequence_inputs(void) {
    cuvil_model *m = NULL;
    CHECK(cuvil_glue_create(&seq_table_, NULL, &m) == CUVIL_OK, "create: %s", cuvil_glue_errmsg(m));
    int64_t n = -1;
    for (int fixed = 0; fixed < 2; fixed++) {
        for (int64_t c = 1; c <= 3; c++)
            CHECK(seq_run(m, c, c, 3, 2, fixed, &n) == CUVIL_OK && n == c, "%lld elements: %s", (long long)c,
                  cuvil_glue_errmsg(m));
        const struct { int64_t count, d0, d1, f; const char *msg; } bad[] = {
            {0, 4, 3, 2, "holds 0 elements, outside 1..3: s"},
            {4, 4, 3, 2, "holds 4 elements, outside 1..3: s"},
            {-1, 4, 3, 2, "holds -1 elements"},
            {2, 5, 3, 2, "element 0: dim 0 is 5; the model takes 0..4: s"},
            {2, -1, 3, 2, "element 0: dim 0 is -1"},
            {2, 4, 2, 2, "element 0: dim 1 is 2; the model takes 3: s"},
            {2, 4, 3, 1, "holds 1 elements; the model takes 2: f"},
            {2, 4, 3, 3, "holds 3 elements; the model takes 2: f"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            n = -7;
            cuvil_status st = seq_run(m, bad[i].count, bad[i].d0, bad[i].d1, bad[i].f, fixed, &n);
            CHECK(st == CUVIL_ERR_SHAPE && strstr(cuvil_glue_errmsg(m), bad[i].msg) && n == -7,
                  "bad header %zu (%s): %d %s", i, fixed ? "fixed call" : "run_shapes", (int)st, cuvil_glue_errmsg(m));
        }
    }
    cuvil_glue_destroy(m);
}

/* ===== optionals: an input the caller may leave out, an output the run may give no value ==== */
static const cuvil_tensor_info opt_in_[1] = {{"o", CUVIL_DTYPE_FLOAT32, 1, {2}, {NULL}, 8, 0, 0, 0, 0, 0, 1}};
static const cuvil_tensor_info opt_out_[2] = {{"p", CUVIL_DTYPE_FLOAT32, 1, {2}, {NULL}, 8, 0, 0, 0, 0, 0, 1},
                                              {"q", CUVIL_DTYPE_FLOAT32, 1, {2}, {NULL}, 8, 0, 0, 0, 0, 0, 0}};
static const int8_t opt_in_sym_[1][CUVIL_MAX_DIMS] = {{-1, -1, -1, -1, -1, -1, -1, -1}};
static const int16_t opt_present_[2] = {0, -1};

static void opt_output_dims(const int64_t *D, int64_t *const *od) {
    (void)D;
    for (int i = 0; od && i < 2; i++)
        if (od[i]) od[i][0] = 2;
}

static cuvil_status opt_run_nodes(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S, const void *const *in,
                                  void *const *out, int64_t *D) {
    (void)A, (void)W, (void)S;
    const float *o = in[0];
    if (o) memcpy(out[0], o, 8);
    memset(out[1], 0, 8);
    D[0] = o != NULL;   /* p holds one where o was given */
    if (o && o[0] < 0) return cuvil_glue_fail(m, "node 'n': o[0] is negative");
    return CUVIL_OK;
}

static const cuvil_model_desc opt_desc_ = {
    CUVIL_MODEL_ABI_VERSION, "o", 1, 2, opt_in_, opt_out_, "sha", "v", "generic", "", 64, sizeof weights_,
    NULL, NULL, NULL, NULL, 0, NULL, NULL, "", 0, NULL,
};
static const cuvil_glue_table opt_table_ = {
    &opt_desc_, 64, scratch_bytes, 1, opt_in_sym_, weights_, check_guards_none, opt_output_dims, opt_run_nodes, opt_present_, NULL, 0, 0, 0, NULL,
};

static void test_optionals(void) {
    cuvil_model *m = NULL;
    CHECK(cuvil_glue_create(&opt_table_, NULL, &m) == CUVIL_OK, "create: %s", cuvil_glue_errmsg(m));
    CHECK(!cuvil_glue_output_present(m, 0) && cuvil_glue_output_present(m, 1), "before a run: p absent, q there");
    float o[2] = {1, 2}, p[2], q[2], neg[2] = {-1, 0};
    int64_t pd[1], qd[1], od[1] = {2};
    const void *in[1] = {o}, *none[1] = {NULL}, *bad[1] = {neg};
    void *out[2] = {p, q};
    int64_t *odims[2] = {pd, qd};
    const int64_t *idims[1] = {od};
    for (int fixed = 0; fixed < 2; fixed++) {
        CHECK(cuvil_glue_run_shapes(m, in, fixed ? NULL : idims, out, odims) == CUVIL_OK &&
              cuvil_glue_output_present(m, 0) && p[1] == 2, "given: %s", cuvil_glue_errmsg(m));
        CHECK(cuvil_glue_run_shapes(m, none, fixed ? NULL : idims, out, odims) == CUVIL_OK &&
              !cuvil_glue_output_present(m, 0) && cuvil_glue_output_present(m, 1), "left out: %s", cuvil_glue_errmsg(m));
        CHECK(cuvil_glue_run_shapes(m, in, NULL, out, NULL) == CUVIL_OK && cuvil_glue_output_present(m, 0), "given again");
        CHECK(cuvil_glue_run_shapes(m, bad, NULL, out, NULL) == CUVIL_ERR_INVALID_ARG && !cuvil_glue_output_present(m, 0),
              "a failed run gives no optional output");
    }
    CHECK(!cuvil_glue_output_present(m, 2) && !cuvil_glue_output_present(m, -1) && !cuvil_glue_output_present(NULL, 0),
          "outputs that do not exist");
    cuvil_glue_destroy(m);
}

/* ===== weights stored in 16 bits (--precision): widened per context, then packed ===== */
/* stored: 4 raw bytes, 3 halves (1, -2, 65504), 2 bfloat16s (1.5, -0.25), a transient half (3) */
static const unsigned char w16_[] = {1, 2, 3, 4,           0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b,
                                     0xc0, 0x3f, 0x80, 0xbe, 0x00, 0x42};
static const cuvil_wseg wsegs16_[] = {
    {0, 0, 4, CUVIL_WSEG_RAW}, {64, 4, 3, CUVIL_WSEG_F16}, {128, 10, 2, CUVIL_WSEG_BF16},
    {8, 14, 1, CUVIL_WSEG_F16 | CUVIL_WSEG_TRANSIENT},
};
static int inits16;
static void init16(unsigned char *W, unsigned char *X) {   /* "packs": W[192] = 10 * X[8] */
    inits16++;
    float v;
    memcpy(&v, X + 8, 4);
    v *= 10;
    memcpy(W + 192, &v, 4);
}
static cuvil_status run16(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S, const void *const *in,
                          void *const *out, int64_t *D) {
    (void)m, (void)A, (void)S, (void)in, (void)D;
    CHECK(W != w16_ && ((uintptr_t)W & 63) == 0, "the nodes read the widened copy, 64-byte aligned");
    memcpy(out[0], W, 196);
    return CUVIL_OK;
}
static void output_dims16(const int64_t *D, int64_t *const *od) {
    (void)D;
    if (od && od[0]) od[0][0] = 196;
}
static const cuvil_tensor_info out16_[1] = {{"w", CUVIL_DTYPE_UINT8, 1, {196}, {NULL}, 196, 0, 0, 0, 0, 0, 0}};
static const cuvil_model_desc desc16_ = {
    CUVIL_MODEL_ABI_VERSION, "w16", 0, 1, NULL, out16_, "sha", "v", "generic", "", 64, sizeof w16_,
    NULL, NULL, NULL, NULL, 0, NULL, NULL, "", 0, NULL,
};
static const cuvil_glue_table table16_ = {
    &desc16_, 64, scratch_bytes, 0, NULL, w16_, check_guards_none, output_dims16, run16, NULL, wsegs16_, 4, 196, 12, init16,
};

static void test_weights16(void) {
    for (int k = 0; k < 2; k++) {   /* two contexts: each its own copy */
        cuvil_model *m = NULL;
        cuvil_model_options o = {.alloc = count_alloc, .free = count_free, .alloc_user = &n_alloc};
        n_alloc = n_free = 0;
        CHECK(cuvil_glue_create(&table16_, &o, &m) == CUVIL_OK, "create: %s", cuvil_glue_errmsg(m));
        unsigned char w[196];
        void *out[1] = {w};
        CHECK(cuvil_glue_run_shapes(m, NULL, NULL, out, NULL) == CUVIL_OK, "run: %s", cuvil_glue_errmsg(m));
        float f[3], b[2], p;
        memcpy(f, w + 64, 12);
        memcpy(b, w + 128, 8);
        memcpy(&p, w + 192, 4);
        CHECK(w[0] == 1 && w[3] == 4 && w[4] == 0 && w[8] == 0 && w[63] == 0, "raw bytes copied, the rest zero");
        CHECK(f[0] == 1.0f && f[1] == -2.0f && f[2] == 65504.0f, "halves widened: %g %g %g", f[0], f[1], f[2]);
        CHECK(b[0] == 1.5f && b[1] == -0.25f, "bfloat16s widened: %g %g", b[0], b[1]);
        CHECK(p == 30.0f, "packed from the transient source: %g", p);
        CHECK(n_alloc == 4 && n_free == 1, "context, arena, weights, transient (freed): %d %d", n_alloc, n_free);
        cuvil_glue_destroy(m);
        CHECK(n_free == 4, "destroy frees the widened weights too: %d", n_free);
    }
    CHECK(inits16 == 2, "packed once per context: %d", inits16);
    unsigned char buf[8192];
    cuvil_model *m = NULL;
    cuvil_model_options o = {.buffer = buf, .buffer_bytes = sizeof buf};
    CHECK(cuvil_glue_create(&table16_, &o, &m) == CUVIL_ERR_UNSUPPORTED && strstr(cuvil_glue_errmsg(m), "16 bits"),
          "a caller's buffer is refused with a message: %s", cuvil_glue_errmsg(m));
    cuvil_glue_destroy(m);
    cuvil_model_options f = {.alloc = count_alloc, .free = count_free, .alloc_user = &n_alloc};
    for (int from = 1; from <= 4; from++) {   /* each allocation failing: out of memory, nothing leaked */
        n_alloc = n_free = 0;
        fail_from = from;
        m = NULL;
        cuvil_status st = cuvil_glue_create(&table16_, &f, &m);
        CHECK(st == CUVIL_ERR_NOMEM, "allocation %d failing: %d", from, (int)st);
        cuvil_glue_destroy(m);
        CHECK(n_alloc == n_free, "allocation %d failing: %d allocated, %d freed", from, n_alloc, n_free);
    }
    fail_from = 0;
}

int main(void) {
    test_weights16();
    test_sequence_inputs();
    test_optionals();
    test_create_modes();
    test_create_refusals();
    test_run_checks();
    test_set_err();
    CHECK(runs > 0, "the nodes ran");
    if (failures) fprintf(stderr, "test_glue: %d failures\n", failures);
    else printf("test_glue: all passed (%d runs)\n", runs);
    return failures != 0;
}
