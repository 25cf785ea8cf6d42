/* test_builder.c -- graphs built with the public builder API alone (cuvil_graph_*, no ONNX),
 * compiled to a shared library, loaded and run; outputs compared with naive loops written
 * here from the ops' definitions. Then every misuse of the API gets a precise error. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuvil/cuvil.h"

#include "check.h"

static char dir[] = "/tmp/cuvil-builder-XXXXXX";

static const cuvil_model_desc *load(const char *so, void **handle) {
    *handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECK(*handle, "dlopen %s: %s", so, dlerror());
    if (!*handle) return NULL;
    cuvil_model_entry_fn entry = (cuvil_model_entry_fn)dlsym(*handle, "cuvil_model_entry");
    CHECK(entry, "no cuvil_model_entry");
    return entry ? entry() : NULL;
}

/* ---- the reference: a small CNN written as loops ---- */
enum { N = 2, C = 3, H = 8, W = 8, M = 4, K = 3, OH = 4, OW = 4, F = M * OH * OW, NCLS = 5 };

static void reference(const float *x, const float *w, const float *b, const float *fc, const float *fb, float *y) {
    static float conv[N][M][H][W], pool[N][F];
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    double acc = b[m];
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < K; ki++)
                            for (int kj = 0; kj < K; kj++) {
                                int ii = i + ki - 1, jj = j + kj - 1;   /* pads 1 */
                                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                                acc += (double)x[((n * C + c) * H + ii) * W + jj] * w[((m * C + c) * K + ki) * K + kj];
                            }
                    conv[n][m][i][j] = acc > 0 ? (float)acc : 0.0f;   /* relu */
                }
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            for (int i = 0; i < OH; i++)
                for (int j = 0; j < OW; j++) {
                    float v = conv[n][m][2 * i][2 * j];
                    for (int di = 0; di < 2; di++)
                        for (int dj = 0; dj < 2; dj++) v = fmaxf(v, conv[n][m][2 * i + di][2 * j + dj]);
                    pool[n][(m * OH + i) * OW + j] = v;
                }
    for (int n = 0; n < N; n++) {
        double logits[NCLS], mx = -1e30, sum = 0;
        for (int k = 0; k < NCLS; k++) {
            double acc = fb[k];
            for (int f = 0; f < F; f++) acc += (double)pool[n][f] * fc[k * F + f];   /* trans_b = 1 */
            logits[k] = acc;
            if (acc > mx) mx = acc;
        }
        for (int k = 0; k < NCLS; k++) sum += exp(logits[k] - mx);
        for (int k = 0; k < NCLS; k++) y[n * NCLS + k] = (float)(exp(logits[k] - mx) / sum);
    }
}

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void test_cnn(cuvil_ctx *ctx) {
    unsigned seed = 7;
    static float x[N * C * H * W], w[M * C * K * K], b[M], fc[NCLS * F], fb[NCLS], want[N * NCLS], got[N * NCLS];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = frand(&seed) * 0.5f;
    for (size_t i = 0; i < M; i++) b[i] = frand(&seed) * 0.1f;
    for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++) fc[i] = frand(&seed) * 0.2f;
    for (size_t i = 0; i < NCLS; i++) fb[i] = frand(&seed) * 0.1f;
    reference(x, w, b, fc, fb, want);

    cuvil_graph *gr;
    CHECK(cuvil_graph_create(ctx, "tiny_cnn", &gr) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    const char *dn[4] = {"batch", NULL, NULL, NULL};
    int xi = cuvil_graph_input(gr, "image", CUVIL_DTYPE_FLOAT32, 4, (int64_t[]){N, C, H, W}, dn);
    int wi = cuvil_graph_constant(gr, "conv.w", CUVIL_DTYPE_FLOAT32, 4, (int64_t[]){M, C, K, K}, w);
    int bi = cuvil_graph_constant(gr, "conv.b", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){M}, b);
    int fci = cuvil_graph_constant(gr, "fc.w", CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){NCLS, F}, fc);
    int fbi = cuvil_graph_constant(gr, "fc.b", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){NCLS}, fb);
    int64_t shape[2] = {N, F};
    int shi = cuvil_graph_constant(gr, "shape", CUVIL_DTYPE_INT64, 1, (int64_t[]){2}, shape);
    CHECK(xi >= 0 && wi >= 0 && bi >= 0 && fci >= 0 && fbi >= 0 && shi >= 0, "%s", cuvil_errmsg(ctx));
    int c, r, p, fl, y, s;
    cuvil_attr conv_attrs[2] = {
        {.name = "pads", .type = CUVIL_ATTR_INTS, .ints = (int64_t[]){1, 1, 1, 1}, .n = 4},
        {.name = "auto_pad", .type = CUVIL_ATTR_STRING, .s = "explicit"},
    };
    cuvil_attr pool_attrs[2] = {
        {.name = "kernel_shape", .type = CUVIL_ATTR_INTS, .ints = (int64_t[]){2, 2}, .n = 2},
        {.name = "strides", .type = CUVIL_ATTR_INTS, .ints = (int64_t[]){2, 2}, .n = 2},
    };
    cuvil_attr gemm_attrs[1] = {{.name = "trans_b", .type = CUVIL_ATTR_INT, .i = 1}};
    cuvil_attr sm_attrs[1] = {{.name = "axis", .type = CUVIL_ATTR_INT, .i = -1}};
    CHECK(cuvil_graph_node(gr, "conv", "conv1", 3, (int[]){xi, wi, bi}, 1, &c, NULL, 2, conv_attrs) == CUVIL_OK, "%s",
          cuvil_errmsg(ctx));
    CHECK(cuvil_graph_node(gr, "relu", "relu1", 1, &c, 1, &r, NULL, 0, NULL) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_node(gr, "max_pool", "pool1", 1, &r, 1, &p, NULL, 2, pool_attrs) == CUVIL_OK, "%s",
          cuvil_errmsg(ctx));
    CHECK(cuvil_graph_node(gr, "reshape", "flat", 2, (int[]){p, shi}, 1, &fl, NULL, 0, NULL) == CUVIL_OK, "%s",
          cuvil_errmsg(ctx));
    CHECK(cuvil_graph_node(gr, "gemm", "fc", 3, (int[]){fl, fci, fbi}, 1, &y, NULL, 1, gemm_attrs) == CUVIL_OK, "%s",
          cuvil_errmsg(ctx));
    const char *oname[1] = {"probs"};
    CHECK(cuvil_graph_node(gr, "softmax", "sm", 1, &y, 1, &s, oname, 1, sm_attrs) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_output(gr, s) == CUVIL_OK, "%s", cuvil_errmsg(ctx));

    cuvil_options o;
    cuvil_options_init(&o);
    char so[128];
    snprintf(so, sizeof so, "%s/tiny.so", dir);
    CHECK(cuvil_compile_graph(gr, &o, so) == CUVIL_OK, "compile: %s", cuvil_errmsg(ctx));
    /* a graph is compiled once */
    CHECK(cuvil_compile_graph(gr, &o, so) == CUVIL_ERR_INVALID_ARG && strstr(cuvil_errmsg(ctx), "compiled already"),
          "second compile: %s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_output(gr, s) != CUVIL_OK, "a compiled graph took another output");
    cuvil_graph_destroy(gr);

    void *h;
    const cuvil_model_desc *d = load(so, &h);
    if (!d) return;
    CHECK(d->n_inputs == 1 && d->n_outputs == 1 && !strcmp(d->inputs[0].name, "image") &&
              !strcmp(d->outputs[0].name, "probs") && d->inputs[0].dim_names[0] &&
              !strcmp(d->inputs[0].dim_names[0], "batch") && d->outputs[0].dtype == CUVIL_DTYPE_FLOAT32 &&
              d->outputs[0].ndim == 2 && d->outputs[0].dims[0] == N && d->outputs[0].dims[1] == NCLS,
          "descriptor does not describe the graph");
    cuvil_model *m = NULL;
    CHECK(d->create(NULL, &m) == CUVIL_OK, "create");
    const void *in[1] = {x};
    void *out[1] = {got};
    CHECK(d->run(m, in, out) == CUVIL_OK, "run: %s", d->errmsg(m));
    double worst = 0;
    for (int i = 0; i < N * NCLS; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    CHECK(worst < 1e-5, "largest difference from the reference: %g", worst);
    d->destroy(m);
    dlclose(h);
    unlink(so);
    snprintf(so, sizeof so, "%s/tiny.h", dir);
    unlink(so);
}

/* Integer and bool values fold at compile time; the constant output is copied by run. */
static void test_folded_ints(cuvil_ctx *ctx) {
    cuvil_graph *gr;
    CHECK(cuvil_graph_create(ctx, "ints", &gr) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    int64_t a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    int ai = cuvil_graph_constant(gr, "a", CUVIL_DTYPE_INT64, 1, (int64_t[]){3}, a);
    int bi = cuvil_graph_constant(gr, "b", CUVIL_DTYPE_INT64, 1, (int64_t[]){3}, b);
    int x = cuvil_graph_input(gr, "x", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, NULL);
    int sum, prod, cast, y;
    CHECK(cuvil_graph_node(gr, "add", "s", 2, (int[]){ai, bi}, 1, &sum, NULL, 0, NULL) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_node(gr, "mul", "p", 2, (int[]){sum, ai}, 1, &prod, NULL, 0, NULL) == CUVIL_OK, "%s",
          cuvil_errmsg(ctx));
    cuvil_attr to = {.name = "to", .type = CUVIL_ATTR_STRING, .s = "float32"};
    CHECK(cuvil_graph_node(gr, "cast", "c", 1, &prod, 1, &cast, NULL, 1, &to) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_node(gr, "add", "y", 2, (int[]){x, cast}, 1, &y, NULL, 0, NULL) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_output(gr, y) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    cuvil_options o;
    cuvil_options_init(&o);
    char so[128];
    snprintf(so, sizeof so, "%s/ints.so", dir);
    CHECK(cuvil_compile_graph(gr, &o, so) == CUVIL_OK, "compile: %s", cuvil_errmsg(ctx));
    cuvil_graph_destroy(gr);
    void *h;
    const cuvil_model_desc *d = load(so, &h);
    if (!d) return;
    cuvil_model *m = NULL;
    float xv[3] = {0.5f, -1, 2}, got[3];
    CHECK(d->create(NULL, &m) == CUVIL_OK, "create");
    CHECK(d->run(m, (const void *const[]){xv}, (void *const[]){got}) == CUVIL_OK, "run");
    /* (a + b) * a = 11, 44, 99 */
    CHECK(got[0] == 11.5f && got[1] == 43.0f && got[2] == 101.0f, "got %g %g %g", got[0], got[1], got[2]);
    d->destroy(m);
    dlclose(h);
    unlink(so);
    snprintf(so, sizeof so, "%s/ints.h", dir);
    unlink(so);
}

static void expect_err(cuvil_ctx *ctx, cuvil_status got, cuvil_status want, const char *needle, const char *what) {
    CHECK(got == want && strstr(cuvil_errmsg(ctx), needle), "%s: status %d (%s), message \"%s\" (wanted \"%s\")", what,
          (int)got, cuvil_status_str(got), cuvil_errmsg(ctx), needle);
}

static void test_misuse(cuvil_ctx *ctx) {
    cuvil_graph *gr;
    CHECK(cuvil_graph_create(ctx, "bad", &gr) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    int x = cuvil_graph_input(gr, "x", CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
    int z = cuvil_graph_input(gr, "z", CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 3}, NULL);
    int y;
    expect_err(ctx, cuvil_graph_node(gr, "Conv", "n1", 1, &x, 1, &y, NULL, 0, NULL), CUVIL_ERR_INVALID_ARG,
               "no CIR op is named 'Conv'", "ONNX op name");
    expect_err(ctx, cuvil_graph_node(gr, "add", "n2", 1, &x, 1, &y, NULL, 0, NULL), CUVIL_ERR_INVALID_ARG,
               "it takes 2 inputs and 1 outputs", "arity");
    expect_err(ctx, cuvil_graph_node(gr, "relu", "n3", 1, (int[]){99}, 1, &y, NULL, 0, NULL), CUVIL_ERR_INVALID_ARG,
               "value 99, which does not exist", "bad value id");
    cuvil_attr bogus = {.name = "group", .type = CUVIL_ATTR_INT, .i = 2};
    expect_err(ctx, cuvil_graph_node(gr, "relu", "n4", 1, &x, 1, &y, NULL, 1, &bogus), CUVIL_ERR_UNSUPPORTED,
               "attribute 'group' is not supported", "unknown attribute");
    cuvil_attr wrong = {.name = "axis", .type = CUVIL_ATTR_FLOAT, .f = 1};
    expect_err(ctx, cuvil_graph_node(gr, "softmax", "n5", 1, &x, 1, &y, NULL, 1, &wrong), CUVIL_ERR_MODEL,
               "attribute 'axis' must be int", "mistyped attribute");
    cuvil_attr mode = {.name = "mode", .type = CUVIL_ATTR_STRING, .s = "mirror"};
    int pads = cuvil_graph_constant(gr, "pads", CUVIL_DTYPE_INT64, 1, (int64_t[]){4}, (int64_t[]){0, 0, 0, 0});
    expect_err(ctx, cuvil_graph_node(gr, "pad", "n6", 2, (int[]){x, pads}, 1, &y, NULL, 1, &mode), CUVIL_ERR_MODEL,
               "mode='mirror' is not one of 'constant', 'reflect', 'edge', 'wrap'", "bad enum");
    cuvil_attr twice[2] = {{.name = "axis", .type = CUVIL_ATTR_INT, .i = 0}, {.name = "axis", .type = CUVIL_ATTR_INT, .i = 1}};
    expect_err(ctx, cuvil_graph_node(gr, "softmax", "n7", 1, &x, 1, &y, NULL, 2, twice), CUVIL_ERR_MODEL,
               "attribute 'axis' is given twice", "repeated attribute");
    cuvil_attr to = {.name = "to", .type = CUVIL_ATTR_STRING, .s = "complex64"};
    expect_err(ctx, cuvil_graph_node(gr, "cast", "n8", 1, &x, 1, &y, NULL, 1, &to), CUVIL_ERR_UNSUPPORTED,
               "to='complex64' is not an element type", "bad dtype");
    expect_err(ctx, cuvil_graph_input(gr, "s", CUVIL_DTYPE_STRING, 1, (int64_t[]){2}, NULL) < 0 ? CUVIL_ERR_INVALID_ARG
                                                                                                  : CUVIL_OK,
               CUVIL_ERR_INVALID_ARG, "element type 8 (string) is not supported", "string input");
    expect_err(ctx, cuvil_graph_output(gr, 12345), CUVIL_ERR_INVALID_ARG, "value 12345 does not exist", "bad output");
    /* a failed call leaves nothing usable behind: not its value ids, not its dim names */
    int before = cuvil_graph_input(gr, "p", CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){7, 8}, (const char *const[]){"n", "n"});
    expect_err(ctx, before < 0 ? CUVIL_ERR_INVALID_ARG : CUVIL_OK, CUVIL_ERR_INVALID_ARG, "'n' is 7",
               "one name for two sizes");
    CHECK(cuvil_graph_input(gr, "q", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, (const char *const[]){"n"}) >= 0,
          "a refused input registered its dim name: %s", cuvil_errmsg(ctx));
    expect_err(ctx, cuvil_graph_node(gr, "relu", "r1", 1, (int[]){z + 1}, 1, &y, NULL, 0, NULL), CUVIL_ERR_INVALID_ARG,
               "a call that failed left behind", "value of a failed input");
    int dead = -1;
    cuvil_attr bad_axis = {.name = "axis", .type = CUVIL_ATTR_STRING, .s = NULL};
    CHECK(cuvil_graph_node(gr, "softmax", "s0", 1, &x, 1, &dead, NULL, 1, &bad_axis) != CUVIL_OK && dead == -1,
          "a string attribute with no string was accepted");
    expect_err(ctx, cuvil_graph_output(gr, x + 20), CUVIL_ERR_INVALID_ARG, "does not exist", "unknown output id");
    /* shape errors surface at compile time, naming the node */
    CHECK(cuvil_graph_node(gr, "add", "mismatch", 2, (int[]){x, z}, 1, &y, NULL, 0, NULL) == CUVIL_OK, "%s",
          cuvil_errmsg(ctx));
    CHECK(cuvil_graph_output(gr, y) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    cuvil_options o;
    cuvil_options_init(&o);
    char so[128];
    snprintf(so, sizeof so, "%s/bad.so", dir);
    /* an output folder that does not exist is refused before the graph is spent */
    expect_err(ctx, cuvil_compile_graph(gr, &o, "/nonexistent-cuvil-dir/x.so"), CUVIL_ERR_IO, "does not exist",
               "missing output folder");
    expect_err(ctx, cuvil_compile_graph(gr, &o, so), CUVIL_ERR_SHAPE, "add 'mismatch': cannot broadcast 'x' f32[2,3] with "
               "'z' f32[4,3]", "shape error");
    CHECK(access(so, F_OK) != 0, "a failed compile left %s", so);
    cuvil_graph_destroy(gr);

    /* a required attribute missing is reported when the graph compiles */
    CHECK(cuvil_graph_create(ctx, "bad2", &gr) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    x = cuvil_graph_input(gr, "x", CUVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, NULL);
    CHECK(cuvil_graph_node(gr, "max_pool", "mp", 1, &x, 1, &y, NULL, 0, NULL) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_output(gr, y) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    expect_err(ctx, cuvil_compile_graph(gr, &o, so), CUVIL_ERR_MODEL, "max_pool 'mp': attribute kernel_shape is required",
               "required attribute");
    cuvil_graph_destroy(gr);
}

/* cuvil_compile_graph_args: cuvil-compile's options as strings (what python/cuvil passes);
 * bad ones are refused before the graph is touched, so it still compiles afterwards. */
static void test_args(cuvil_ctx *ctx) {
    cuvil_graph *gr;
    CHECK(cuvil_graph_create(ctx, "args", &gr) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    float cv[4] = {1, 2, 3, 4};
    int x = cuvil_graph_input(gr, "x", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, NULL);
    int c = cuvil_graph_constant(gr, "c", CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, cv);
    int y;
    CHECK(cuvil_graph_node(gr, "mul", "y", 2, (int[]){x, c}, 1, &y, NULL, 0, NULL) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cuvil_graph_output(gr, y) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    char so[128];
    snprintf(so, sizeof so, "%s/args.so", dir);
    expect_err(ctx, cuvil_compile_graph_args(gr, 0, NULL), CUVIL_ERR_INVALID_ARG, "--output is required", "no output");
    expect_err(ctx, cuvil_compile_graph_args(gr, 4, (const char *[]){"--model", "m.onnx", "--output", so}),
               CUVIL_ERR_INVALID_ARG, "--model is not taken here", "--model for a graph");
    expect_err(ctx, cuvil_compile_graph_args(gr, 3, (const char *[]){"--output", so, "--bogus"}), CUVIL_ERR_INVALID_ARG,
               "unknown argument (see --help): --bogus", "unknown argument");
    expect_err(ctx, cuvil_compile_graph_args(gr, 3, (const char *[]){"--output", so, "--opt-level"}),
               CUVIL_ERR_INVALID_ARG, "missing value for: --opt-level", "missing value");
    expect_err(ctx, cuvil_compile_graph_args(gr, 4, (const char *[]){"--output", so, "--dim", "n=3"}),
               CUVIL_ERR_INVALID_ARG, "dims are fixed when it is built", "--dim for a graph");
    expect_err(ctx, cuvil_compile_graph_args(gr, 4, (const char *[]){"--output", so, "--emit", "exe"}),
               CUVIL_ERR_INVALID_ARG, "--emit must be so, a, c, ir or dot, got: exe", "bad --emit");
    CHECK(cuvil_compile_graph_args(gr, 4, (const char *[]){"--output", so, "-O", "1"}) == CUVIL_ERR_INVALID_ARG,
          "-O with a separate value is not an option");
    CHECK(cuvil_compile_graph_args(gr, 5, (const char *[]){"--output", so, "-O1", "--name", "argsm"}) == CUVIL_OK,
          "compile: %s", cuvil_errmsg(ctx));
    cuvil_graph_destroy(gr);
    void *h;
    const cuvil_model_desc *d = load(so, &h);
    if (!d) return;
    CHECK(!strcmp(d->name, "argsm"), "--name: prefix %s", d->name);
    cuvil_model *m = NULL;
    float xv[4] = {1, -1, 0.5f, 2}, got[4];
    CHECK(d->create(NULL, &m) == CUVIL_OK, "create");
    CHECK(d->run(m, (const void *const[]){xv}, (void *const[]){got}) == CUVIL_OK, "run");
    CHECK(got[0] == 1 && got[1] == -2 && got[2] == 1.5f && got[3] == 8, "got %g %g %g %g", got[0], got[1], got[2], got[3]);
    d->destroy(m);
    dlclose(h);
    unlink(so);
    snprintf(so, sizeof so, "%s/args.h", dir);
    unlink(so);
}

int main(void) {
    cuvil_ctx *ctx;
    if (cuvil_ctx_create(&ctx) || !mkdtemp(dir)) return 1;
    test_cnn(ctx);
    test_folded_ints(ctx);
    test_misuse(ctx);
    test_args(ctx);
    rmdir(dir);
    cuvil_ctx_destroy(ctx);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    puts("test_builder: all checks passed");
    return 0;
}
