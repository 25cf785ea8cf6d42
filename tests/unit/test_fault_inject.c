/* test_fault_inject.c -- every allocation of load, passes and codegen, and every file write of
 * `--emit c`, fails in turn: each run must end in a clean error (a status and a message, no
 * crash), free everything it took (the allocation counter returns to where it was; the
 * sanitizer build's LeakSanitizer checks the same at exit) and leave no file behind.
 *
 * Models: the bundled example (Conv/Relu/MaxPool/Gemm...) and one built here with protobuf-c that
 * exercises shape folding (Shape -> Gather -> Concat -> Reshape to [1,6,24]), Slice, Concat,
 * Transpose, Softmax and a Conv + BatchNormalization + residual Add. */
#include "codegen/codegen_int.h"
#include "codegen/toolchain_int.h"
#include "frontend/onnx/onnx_int.h"
#include "passes/passes_int.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* ===== a model built with protobuf-c ====================================================== */
/* Everything allocated to build it, freed once it is serialised. */
static void *kept[256];
static int n_kept;
static void *keep(void *p) {
    if (n_kept < (int)(sizeof kept / sizeof kept[0])) kept[n_kept++] = p;
    return p;
}
static void free_kept(void) {
    while (n_kept) free(kept[--n_kept]);
}

static Onnx__NodeProto *node(const char *op, int nin, const char **in, int nout, const char **out) {
    Onnx__NodeProto *n = keep(calloc(1, sizeof *n));
    onnx__node_proto__init(n);
    n->attribute = keep(calloc(4, sizeof *n->attribute));   /* room for the attributes below */
    n->op_type = (char *)op;
    n->n_input = (size_t)nin;
    n->input = (char **)in;
    n->n_output = (size_t)nout;
    n->output = (char **)out;
    return n;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, int cnt, int64_t *v) {
    Onnx__AttributeProto *a = keep(calloc(1, sizeof *a));
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)cnt;
    a->ints = v;
    n->attribute[n->n_attribute++] = a;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = keep(calloc(1, sizeof *a));
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    n->attribute[n->n_attribute++] = a;
}

static Onnx__ValueInfoProto *vinfo(const char *name, int nd, const int64_t *dims) {
    Onnx__ValueInfoProto *v = keep(calloc(1, sizeof *v));
    Onnx__TypeProto *t = keep(calloc(1, sizeof *t));
    Onnx__TypeProto__Tensor *tt = keep(calloc(1, sizeof *tt));
    Onnx__TensorShapeProto *sh = keep(calloc(1, sizeof *sh));
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(t);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    tt->has_elem_type = 1;
    tt->elem_type = 1;
    sh->n_dim = (size_t)nd;
    sh->dim = keep(calloc((size_t)nd + 1, sizeof *sh->dim));
    for (int i = 0; i < nd; i++) {
        sh->dim[i] = keep(calloc(1, sizeof **sh->dim));
        onnx__tensor_shape_proto__dimension__init(sh->dim[i]);
        sh->dim[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        sh->dim[i]->dim_value = dims[i];
    }
    tt->shape = sh;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->name = (char *)name;
    v->type = t;
    return v;
}

static Onnx__TensorProto *tensor(const char *name, int dtype, int nd, const int64_t *dims, const void *data, size_t n) {
    Onnx__TensorProto *t = keep(calloc(1, sizeof *t));
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)nd;
    t->dims = (int64_t *)dims;
    t->has_raw_data = 1;
    t->raw_data.len = n;
    t->raw_data.data = (uint8_t *)data;
    return t;
}

/* Serialises the second model into a malloc'd buffer. */
static uint8_t *build_model(size_t *size) {
    static const int64_t xd[] = {1, 4, 6, 6}, wd[] = {4, 4, 3, 3}, cd[] = {4}, idx_d[] = {1}, sd[] = {1},
                         td[] = {2}, yd[] = {1, 6, 6};
    static float w[4 * 4 * 9], bn[4], var[4];
    for (int i = 0; i < 4 * 4 * 9; i++) w[i] = (float)((i * 37) % 11 - 5) / 7.0f;
    for (int i = 0; i < 4; i++) bn[i] = 0.5f + (float)i / 8.0f, var[i] = 1.0f + (float)i;
    static const int64_t zero = 0, one = 1, two = 2, big = 4, six_neg[] = {6, -1};
    static int64_t pads[] = {1, 1, 1, 1}, perm[] = {0, 2, 1};
    static const char *const names[][4] = {
        {"x", "w", "b"}, {"c"}, {"c", "g", "be", "m"}, {"bnout"}, {"bnout", "x"}, {"r"},
        {"r"}, {"shp"}, {"shp", "i0"}, {"n0"}, {"n0", "m1"}, {"tgt"}, {"r", "tgt"}, {"flat"},
        {"flat", "s0", "s1", "ax"}, {"sl"}, {"sl", "sl"}, {"cat"}, {"cat"}, {"tr"}, {"tr"}, {"y"}};
    Onnx__NodeProto *nodes[11];
    nodes[0] = node("Conv", 3, (const char **)names[0], 1, (const char **)names[1]);
    attr_ints(nodes[0], "pads", 4, pads);
    static const char *bn_in[] = {"c", "g", "be", "m", "v"};
    nodes[1] = node("BatchNormalization", 5, bn_in, 1, (const char **)names[3]);
    nodes[2] = node("Add", 2, (const char **)names[4], 1, (const char **)names[5]);
    nodes[3] = node("Shape", 1, (const char **)names[6], 1, (const char **)names[7]);
    nodes[4] = node("Gather", 2, (const char **)names[8], 1, (const char **)names[9]);
    nodes[5] = node("Concat", 2, (const char **)names[10], 1, (const char **)names[11]);
    attr_int(nodes[5], "axis", 0);
    nodes[6] = node("Reshape", 2, (const char **)names[12], 1, (const char **)names[13]);
    nodes[7] = node("Slice", 4, (const char **)names[14], 1, (const char **)names[15]);
    nodes[8] = node("Concat", 2, (const char **)names[16], 1, (const char **)names[17]);
    attr_int(nodes[8], "axis", 2);
    nodes[9] = node("Transpose", 1, (const char **)names[18], 1, (const char **)names[19]);
    attr_ints(nodes[9], "perm", 3, perm);
    nodes[10] = node("Softmax", 1, (const char **)names[20], 1, (const char **)names[21]);
    attr_int(nodes[10], "axis", -1);
    Onnx__TensorProto *inits[] = {
        tensor("w", 1, 4, wd, w, sizeof w), tensor("b", 1, 1, cd, bn, sizeof bn), tensor("g", 1, 1, cd, bn, sizeof bn),
        tensor("be", 1, 1, cd, bn, sizeof bn), tensor("m", 1, 1, cd, bn, sizeof bn), tensor("v", 1, 1, cd, var, sizeof var),
        tensor("i0", 7, 1, idx_d, &zero, 8), tensor("m1", 7, 1, td, six_neg, 16), tensor("s0", 7, 1, sd, &one, 8),
        tensor("s1", 7, 1, sd, &big, 8), tensor("ax", 7, 1, sd, &two, 8)};
    Onnx__ValueInfoProto *in = vinfo("x", 4, xd), *out = vinfo("y", 3, yd);
    Onnx__GraphProto *g = keep(calloc(1, sizeof *g));
    onnx__graph_proto__init(g);
    g->name = "built";
    g->n_node = 11;
    g->node = nodes;
    g->n_initializer = sizeof inits / sizeof inits[0];
    g->initializer = inits;
    g->n_input = 1;
    g->input = &in;
    g->n_output = 1;
    g->output = &out;
    Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT, *ops[] = {&op};
    op.domain = "";
    op.has_version = 1;
    op.version = 13;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.graph = g;
    m.n_opset_import = 1;
    m.opset_import = ops;
    *size = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*size);
    onnx__model_proto__pack(&m, buf);
    free_kept();
    return buf;
}

/* ===== the walks ============================================================================ */
static uint8_t *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    *size = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* load + passes + codegen in memory; returns the status, message in msg. */
static cuvil_status pipeline(const uint8_t *data, size_t size, int opt, char *msg, size_t len) {
    cuvil_ctx *ctx = NULL;
    if (cuvil_ctx_create(&ctx) != CUVIL_OK) {
        snprintf(msg, len, "ctx: out of memory");
        return CUVIL_ERR_NOMEM;
    }
    cuvil_options o;
    cuvil_options_init(&o);
    o.opt_level = opt;
    cir_graph *g = NULL;
    cuvil_status s = cuvil_onnx_load_buffer(ctx, data, size, "model.onnx", NULL, &o, &g);
    if (!s) s = cuvil_run_passes(g, &o);
    if (!s) {
        cg_output gen;
        s = cg_generate(g, &o, "m", "generic", "/* abi */\n", &gen);
        cg_output_free(&gen);
    }
    snprintf(msg, len, "%s", cuvil_errmsg(ctx));
    cir_graph_free(g);
    cuvil_ctx_destroy(ctx);
    return s;
}

static void walk_allocations(const char *what, const uint8_t *data, size_t size, int opt) {
    char msg[2048];
    long live0 = cuvil_alloc_outstanding(), c0 = cuvil_alloc_count();
    cuvil_status s = pipeline(data, size, opt, msg, sizeof msg);
    long total = cuvil_alloc_count() - c0;
    CHECK(s == CUVIL_OK, "%s -O%d: the model does not compile: %s", what, opt, msg);
    CHECK(cuvil_alloc_outstanding() == live0, "%s: a successful compile leaked %ld blocks", what,
          cuvil_alloc_outstanding() - live0);
    int bad = 0;
    for (long n = 0; n < total && bad < 5; n++) {
        cuvil_alloc_fail_after(n);
        s = pipeline(data, size, opt, msg, sizeof msg);
        cuvil_alloc_fail_after(-1);
        if (s == CUVIL_OK || !msg[0] || s == CUVIL_ERR_INTERNAL) {
            fprintf(stderr, "%s -O%d: allocation %ld failing: status %s, message '%s'\n", what, opt, n + 1,
                    cuvil_status_str(s), msg);
            failures++, bad++;
        }
        if (cuvil_alloc_outstanding() != live0) {
            fprintf(stderr, "%s -O%d: allocation %ld failing leaked %ld blocks\n", what, opt, n + 1,
                    cuvil_alloc_outstanding() - live0);
            failures++, bad++;
            live0 = cuvil_alloc_outstanding();
        }
    }
    printf("%s -O%d: %ld allocations, each failed in turn\n", what, opt, total);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void rm_rf(const char *path) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
}

/* --emit c with each allocation, then each file write, failing: an error, and the output folder
 * holds nothing afterwards (no partial source folder, no build folder, no temp file). */
static void walk_emit_c(const char *model) {
    char dir[] = "/tmp/cuvil_fault_XXXXXX", out[4200], msg[2048];
    if (!mkdtemp(dir)) {
        failures++;
        return;
    }
    snprintf(out, sizeof out, "%s/gen", dir);
    cuvil_options o;
    cuvil_options_init(&o);
    o.emit = CUVIL_EMIT_C;
    cuvil_ctx *ctx = NULL;
    cuvil_ctx_create(&ctx);
    long live0 = cuvil_alloc_outstanding(), c0 = cuvil_alloc_count();
    cuvil_status s = cuvil_compile_file(ctx, model, &o, out);
    long total = cuvil_alloc_count() - c0;
    CHECK(s == CUVIL_OK, "--emit c: %s", cuvil_errmsg(ctx));
    rm_rf(out);
    /* every allocation up to codegen's end, then every 7th through the file writes */
    int bad = 0;
    for (long n = 0; n < total && bad < 5; n += n < total - 400 ? 1 : 7) {
        cuvil_alloc_fail_after(n);
        s = cuvil_compile_file(ctx, model, &o, out);
        cuvil_alloc_fail_after(-1);
        snprintf(msg, sizeof msg, "%s", cuvil_errmsg(ctx));
        if (s == CUVIL_OK || !msg[0] || count_entries(dir) != 0 || cuvil_alloc_outstanding() != live0) {
            fprintf(stderr, "--emit c, allocation %ld failing: status %s, '%s', %d entries left, %ld blocks leaked\n",
                    n + 1, cuvil_status_str(s), msg, count_entries(dir), cuvil_alloc_outstanding() - live0);
            failures++, bad++;
            rm_rf(out);
            live0 = cuvil_alloc_outstanding();
        }
    }
    int writes = 0;
    for (long k = 1; bad < 5; k++) {
        cuvil_write_fail_after(k);
        s = cuvil_compile_file(ctx, model, &o, out);
        cuvil_write_fail_after(0);
        if (s == CUVIL_OK) {   /* fewer than k writes: the walk is complete */
            rm_rf(out);
            break;
        }
        writes++;
        bool enospc = strstr(cuvil_errmsg(ctx), "No space left on device") != NULL;
        if (s != CUVIL_ERR_IO || !enospc || count_entries(dir) != 0) {
            fprintf(stderr, "--emit c, write %ld failing: status %s, '%s', %d entries left\n", k, cuvil_status_str(s),
                    cuvil_errmsg(ctx), count_entries(dir));
            failures++, bad++;
            rm_rf(out);
        }
    }
    printf("--emit c: %ld allocations and %d file writes, each failed in turn\n", total, writes);
    CHECK(writes > 10, "only %d writes were walked", writes);
    cuvil_ctx_destroy(ctx);
    rm_rf(dir);
}

int main(void) {
    char tiny[4096];
    snprintf(tiny, sizeof tiny, "%s/examples/models/tinycnn.onnx", CUVIL_TEST_SOURCE_DIR);
    size_t n1 = 0, n2 = 0;
    uint8_t *m1 = read_all(tiny, &n1), *m2 = build_model(&n2);
    CHECK(m1 != NULL, "cannot read %s", tiny);
    if (m1) {
        walk_allocations("tinycnn", m1, n1, 0);
        walk_allocations("tinycnn", m1, n1, 2);
    }
    walk_allocations("built", m2, n2, 2);
    if (m1) walk_emit_c(tiny);
    free(m1);
    free(m2);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    else printf("test_fault_inject: all checks passed\n");
    return failures != 0;
}
