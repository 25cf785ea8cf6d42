/*
 * test_ops_infer.c -- the ONNX frontend's mapping of (op, opset) onto CIR ops, and the CIR ops'
 * shape inference and constant folding, for the second group of ONNX ops (Slice, Split,
 * Gather, Cast, Resize, Reduce*, Pad, Softmax, Range, ConstantOfShape, Where, Expand), on
 * small graphs built by hand. Every expected shape and value below was worked out
 * by hand from the ONNX operator specification (not produced by the code under test).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/onnx/onnx_int.h"
#include "ir/ops/ops.h"

static int failures;
static cuvil_ctx ctx;

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);        \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* ===== Graph building ====================================================================
 * Nodes are written as ONNX nodes of a given opset and go through the frontend's mapping
 * (onnx_ops.c) onto CIR ops, so these tests cover both: the legacy forms (attributes that
 * later became inputs) and the CIR op's inference and folding. */
static cir_graph *G;
static onnx_node pending[4];
static int n_pending;

static void fresh(void) {
    cir_graph_free(G);
    G = cir_graph_new(&ctx);
    CUVIL_ASSERT(G);
    n_pending = 0;
    ctx.status = CUVIL_OK;
    ctx.errmsg[0] = 0;
}

/* A run-time input (no data). */
static int input(const char *name, cir_dtype t, int nd, const int64_t *dims) {
    int id = cir_value_add(G, name, CIR_VAL_INPUT);
    CUVIL_ASSERT(id >= 0);
    cir_set_shape(cir_val(G, id), t, nd, dims);
    return id;
}

static int cst(const char *name, cir_dtype t, int nd, const int64_t *dims, const void *data) {
    int id = cir_const_add(G, name, t, nd, dims, data);
    CUVIL_ASSERT(id >= 0);
    return id;
}

/* A 1-D int64 constant. */
static int ints(const char *name, int n, const int64_t *v) {
    int64_t d = n;
    return cst(name, CIR_I64, 1, &d, v);
}

/* An ONNX node `op` of `opset`; returns its handle for attr_*() and run(). */
static int node(const char *op, int opset, int nin, const int *in, int nout) {
    CUVIL_ASSERT(n_pending < 4);
    onnx_node *on = &pending[n_pending];
    memset(on, 0, sizeof *on);
    on->op = op;
    on->name = "node0";
    on->opset = opset;
    static char descs[4][64];
    snprintf(descs[n_pending], sizeof descs[0], "%s 'node0'", op);
    on->desc = descs[n_pending];
    on->n_in = nin;
    on->n_out = nout;
    on->in = cuvil_arena_alloc(&G->arena, sizeof(int) * (size_t)(nin + 1));
    if (on->in) memcpy(on->in, in, sizeof(int) * (size_t)nin);
    on->out = cuvil_arena_alloc(&G->arena, sizeof(int) * (size_t)(nout + 1));
    on->attrs = cuvil_arena_alloc(&G->arena, sizeof(onnx_attr) * 8);
    CUVIL_ASSERT(on->in && on->out && on->attrs);
    for (int i = 0; i < nout; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "y%d", i);
        on->out[i] = cir_value_add(G, nm, CIR_VAL_ACT);
    }
    return n_pending++;
}

static onnx_attr *new_attr(int k, const char *name, cuvil_attr_type t) {
    onnx_node *on = &pending[k];
    CUVIL_ASSERT(on->n_attrs < 8);
    onnx_attr *a = &on->attrs[on->n_attrs++];
    memset(a, 0, sizeof *a);
    a->name = a->a.name = name;
    a->a.type = t;
    a->tensor = -1;
    return a;
}

static void attr_int(int k, const char *name, int64_t v) { new_attr(k, name, CUVIL_ATTR_INT)->a.i = v; }
static void attr_str(int k, const char *name, const char *s) { new_attr(k, name, CUVIL_ATTR_STRING)->a.s = s; }
static void attr_ints(int k, const char *name, int cnt, const int64_t *v) {
    onnx_attr *a = new_attr(k, name, CUVIL_ATTR_INTS);
    a->a.n = (size_t)cnt;
    a->a.ints = cuvil_arena_memdup(&G->arena, v, sizeof(int64_t) * (size_t)cnt);
}
static void attr_floats(int k, const char *name, int cnt, const float *v) {
    onnx_attr *a = new_attr(k, name, CUVIL_ATTR_FLOATS);
    a->a.n = (size_t)cnt;
    a->a.floats = cuvil_arena_memdup(&G->arena, v, sizeof(float) * (size_t)cnt);
}

/* What the loader and the pipeline do for one node: map it onto CIR, then for each CIR node
 * made: check attributes, infer, and fold when every input is constant. */
static cuvil_status run(int k) {
    onnx_mapper m = {.g = G};
    int first = G->n_nodes;
    cuvil_status s = cuvil_onnx_map_node(&m, &pending[k]);
    cuvil_free(m.dropped);
    if (s) return s;
    for (int i = first; i < G->n_nodes; i++) {
        cir_node *n = cir_node_at(G, i);
        if ((s = cir_node_check_attrs(G, n)) || (s = n->def->infer(G, n))) return s;
        bool all_const = true;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && !cir_is_const(cir_val(G, n->in[j]))) all_const = false;
        if (all_const && n->def->fold && (s = n->def->fold(G, n))) return s;
    }
    return CUVIL_OK;
}

/* The CIR node run(k) made last. */
static cir_node *cir_node_of(int k) {
    (void)k;
    return cir_node_at(G, G->n_nodes - 1);
}

static cir_value *out(int k, int i) { return cir_val(G, pending[k].out[i]); }

static bool shape_is(const cir_value *v, cir_dtype t, int nd, const int64_t *dims) {
    if (v->dtype != t || v->ndim != nd) return false;
    for (int i = 0; i < nd; i++)
        if (v->dims[i] != dims[i]) return false;
    return true;
}

static bool i64s_are(const cir_value *v, int cnt, const int64_t *want) {
    if (!cir_is_const(v) || cir_numel(v) != cnt) return false;
    for (int i = 0; i < cnt; i++)
        if (cir_const_i64(v, i) != want[i]) return false;
    return true;
}

static bool f32s_near(const cir_value *v, int cnt, const float *want, float tol) {
    if (!cir_is_const(v) || v->dtype != CIR_F32 || cir_numel(v) != cnt) return false;
    for (int i = 0; i < cnt; i++) {
        float got = ((const float *)v->data)[i];
        if (!(fabsf(got - want[i]) <= tol)) {
            fprintf(stderr, "  element %d: got %.9g, want %.9g\n", i, (double)got, (double)want[i]);
            return false;
        }
    }
    return true;
}

/* one float32 element of a constant, at index i */
static bool f32_at(const cir_value *v, int i, float want, float tol) {
    return cir_is_const(v) && fabsf(((const float *)v->data)[i] - want) <= tol;
}

static bool err_mentions(const char *what) {
    bool ok = strstr(ctx.errmsg, what) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ctx.errmsg, what);
    return ok;
}

/* ===== Slice ============================================================================== */
static void test_slice(void) {
    int64_t d10 = 10, x10[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};

    /* negative step: 8, 5, 2 */
    fresh();
    int in[5] = {cst("x", CIR_I64, 1, &d10, x10), ints("s", 1, (int64_t[]){8}), ints("e", 1, (int64_t[]){1}),
                 ints("a", 1, (int64_t[]){0}), ints("st", 1, (int64_t[]){-3})};
    int k = node("Slice", 13, 5, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){3}));
    CHECK(i64s_are(out(k, 0), 3, (int64_t[]){8, 5, 2}));

    /* negative step from INT64_MAX down past the start with end INT64_MIN: whole axis reversed */
    fresh();
    in[0] = cst("x", CIR_I64, 1, &d10, x10);
    in[1] = ints("s", 1, (int64_t[]){INT64_MAX});
    in[2] = ints("e", 1, (int64_t[]){INT64_MIN});
    in[3] = ints("a", 1, (int64_t[]){-1});
    in[4] = ints("st", 1, (int64_t[]){-4});
    k = node("Slice", 13, 5, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(i64s_are(out(k, 0), 3, (int64_t[]){9, 5, 1}));

    /* 2-D with clamping: rows [1, INT64_MAX) step 2 -> row 1; columns -1 down to INT64_MIN -> 3,2,1,0 */
    fresh();
    float m[12];
    for (int i = 0; i < 12; i++) m[i] = (float)i;
    in[0] = cst("x", CIR_F32, 2, (int64_t[]){3, 4}, m);
    in[1] = ints("s", 2, (int64_t[]){-1, 1});
    in[2] = ints("e", 2, (int64_t[]){INT64_MIN, INT64_MAX});
    in[3] = ints("a", 2, (int64_t[]){1, 0});
    in[4] = ints("st", 2, (int64_t[]){-1, 2});
    k = node("Slice", 13, 5, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){1, 4}));
    CHECK(f32s_near(out(k, 0), 4, (float[]){7, 6, 5, 4}, 0));

    /* clamping to an empty result: start 100 clamps to 10 = end */
    fresh();
    in[0] = cst("x", CIR_I64, 1, &d10, x10);
    in[1] = ints("s", 1, (int64_t[]){100});
    in[2] = ints("e", 1, (int64_t[]){-100});
    k = node("Slice", 13, 3, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){0}));

    /* opset 1 attributes; a run-time float32 input infers the shape without folding */
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){5, 6});
    k = node("Slice", 9, 1, in, 1);
    attr_ints(k, "starts", 2, (int64_t[]){1, -3});
    attr_ints(k, "ends", 2, (int64_t[]){-1, 1000});
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){3, 3}));
    CHECK(!cir_is_const(out(k, 0)));

    /* errors: step 0, repeated axis, run-time int64 data */
    fresh();
    in[0] = input("x", CIR_F32, 1, &d10);
    in[1] = ints("s", 1, (int64_t[]){0});
    in[2] = ints("e", 1, (int64_t[]){5});
    in[3] = ints("a", 1, (int64_t[]){0});
    in[4] = ints("st", 1, (int64_t[]){0});
    k = node("Slice", 13, 5, in, 1);
    CHECK(run(k) == CUVIL_ERR_MODEL && err_mentions("Slice 'node0'") && err_mentions("steps[0] is 0"));
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){4, 4});
    in[1] = ints("s", 2, (int64_t[]){0, 0});
    in[2] = ints("e", 2, (int64_t[]){2, 2});
    in[3] = ints("a", 2, (int64_t[]){1, -1});
    k = node("Slice", 13, 4, in, 1);
    CHECK(run(k) == CUVIL_ERR_MODEL && err_mentions("repeated"));
    fresh();
    in[0] = input("x", CIR_I64, 1, &d10);
    in[1] = ints("s", 1, (int64_t[]){0});
    in[2] = ints("e", 1, (int64_t[]){5});
    k = node("Slice", 13, 3, in, 1);   /* int64 at run time: supported since every type runs */
    CHECK(run(k) == CUVIL_OK && shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){5}) && !cir_is_const(out(k, 0)));
}

/* ===== Split ============================================================================== */
static void test_split(void) {
    float x[14];
    for (int i = 0; i < 14; i++) x[i] = (float)i;
    /* num_outputs=3 over 7 rows: ceil(7/3)=3, 3, and the remaining 1 */
    fresh();
    int in[2] = {cst("x", CIR_F32, 2, (int64_t[]){7, 2}, x), -1};
    int k = node("Split", 18, 1, in, 3);
    attr_int(k, "num_outputs", 3);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){3, 2}));
    CHECK(shape_is(out(k, 1), CIR_F32, 2, (int64_t[]){3, 2}));
    CHECK(shape_is(out(k, 2), CIR_F32, 2, (int64_t[]){1, 2}));
    CHECK(f32s_near(out(k, 1), 6, (float[]){6, 7, 8, 9, 10, 11}, 0));
    CHECK(f32s_near(out(k, 2), 2, (float[]){12, 13}, 0));

    /* opset 13 split input along axis -1 */
    fresh();
    in[0] = cst("x", CIR_F32, 2, (int64_t[]){2, 7}, x);
    in[1] = ints("split", 2, (int64_t[]){2, 5});
    k = node("Split", 13, 2, in, 2);
    attr_int(k, "axis", -1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){2, 2}));
    CHECK(f32s_near(out(k, 0), 4, (float[]){0, 1, 7, 8}, 0));
    CHECK(f32s_near(out(k, 1), 10, (float[]){2, 3, 4, 5, 6, 9, 10, 11, 12, 13}, 0));

    /* before opset 18 an equal split must divide */
    fresh();
    in[0] = input("x", CIR_F32, 1, (int64_t[]){7});
    k = node("Split", 11, 1, in, 2);
    CHECK(run(k) == CUVIL_ERR_SHAPE);
    /* split sizes that do not add up */
    fresh();
    in[0] = input("x", CIR_F32, 1, (int64_t[]){7});
    k = node("Split", 11, 1, in, 2);
    attr_ints(k, "split", 2, (int64_t[]){3, 3});
    CHECK(run(k) == CUVIL_ERR_SHAPE);
}

/* ===== Gather ============================================================================= */
static void test_gather(void) {
    int64_t data[6] = {10, 11, 20, 21, 30, 31};
    fresh();
    int in[2] = {cst("x", CIR_I64, 2, (int64_t[]){3, 2}, data), ints("i", 2, (int64_t[]){-1, 0})};
    int k = node("Gather", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 2, (int64_t[]){2, 2}));
    CHECK(i64s_are(out(k, 0), 4, (int64_t[]){30, 31, 10, 11}));

    /* scalar index -1 on axis 1: one column, rank drops */
    fresh();
    int64_t m1 = -1;
    in[0] = cst("x", CIR_I64, 2, (int64_t[]){3, 2}, data);
    in[1] = cst("i", CIR_I64, 0, NULL, &m1);
    k = node("Gather", 13, 2, in, 1);
    attr_int(k, "axis", 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){3}));
    CHECK(i64s_are(out(k, 0), 3, (int64_t[]){11, 21, 31}));

    /* out of range: the message names the index */
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){3, 2});
    in[1] = ints("i", 2, (int64_t[]){0, -4});
    k = node("Gather", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_ERR_MODEL && err_mentions("-4"));
    /* run-time indices: checked by the kernel when the model runs */
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){3, 2});
    in[1] = input("i", CIR_I64, 1, (int64_t[]){2});
    k = node("Gather", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK && shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){2, 2}));
}

/* ===== Cast =============================================================================== */
static void test_cast(void) {
    float x[4] = {-1.7f, 2.5f, 0.0f, 3.9f};
    int64_t d4 = 4;
    fresh();
    int in[2] = {cst("x", CIR_F32, 1, &d4, x), -1};
    int k = node("Cast", 13, 1, in, 1);
    attr_int(k, "to", CUVIL_DTYPE_INT64);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, &d4));
    CHECK(i64s_are(out(k, 0), 4, (int64_t[]){-1, 2, 0, 3}));   /* truncation toward zero */

    fresh();
    in[0] = cst("x", CIR_F32, 1, &d4, x);
    k = node("Cast", 13, 1, in, 1);
    attr_int(k, "to", CUVIL_DTYPE_BOOL);
    CHECK(run(k) == CUVIL_OK);
    CHECK(i64s_are(out(k, 0), 4, (int64_t[]){1, 1, 0, 1}));

    /* int64 -> float32 */
    fresh();
    in[0] = ints("x", 3, (int64_t[]){-3, 0, 16777216});
    k = node("Cast", 13, 1, in, 1);
    attr_int(k, "to", CUVIL_DTYPE_FLOAT32);
    CHECK(run(k) == CUVIL_OK);
    CHECK(f32s_near(out(k, 0), 3, (float[]){-3.0f, 0.0f, 16777216.0f}, 0));

    /* float32 -> float16: 1.0 = 0x3c00, -2 = 0xc000, 0.1 = 0x2e66 (rounded to nearest),
     * 65504 = 0x7bff (largest), 70000 -> +inf 0x7c00, 1e-7 -> subnormal 2 * 2^-24 = 0x0002 */
    float h[6] = {1.0f, -2.0f, 0.1f, 65504.0f, 70000.0f, 1e-7f};
    int64_t d6 = 6;
    fresh();
    in[0] = cst("x", CIR_F32, 1, &d6, h);
    k = node("Cast", 13, 1, in, 1);
    attr_int(k, "to", CUVIL_DTYPE_FLOAT16);
    CHECK(run(k) == CUVIL_OK);
    const uint16_t want_h[6] = {0x3c00, 0xc000, 0x2e66, 0x7bff, 0x7c00, 0x0002};
    CHECK(cir_is_const(out(k, 0)) && !memcmp(out(k, 0)->data, want_h, sizeof want_h));

    /* CastLike takes the type of its second input */
    fresh();
    in[0] = ints("x", 2, (int64_t[]){7, -7});
    in[1] = input("like", CIR_F32, 0, NULL);
    k = node("CastLike", 15, 2, in, 1);
    CHECK(run(k) == CUVIL_OK && cir_node_of(k)->def->fold(G, cir_node_of(k)) == CUVIL_OK);
    CHECK(f32s_near(out(k, 0), 2, (float[]){7.0f, -7.0f}, 0));

    /* run time: float32 -> float32 is a copy, other pairs run the cast kernel */
    fresh();
    in[0] = input("x", CIR_F32, 1, &d4);
    k = node("Cast", 13, 1, in, 1);
    attr_int(k, "to", CUVIL_DTYPE_FLOAT32);
    CHECK(run(k) == CUVIL_OK);
    fresh();
    in[0] = input("x", CIR_F32, 1, &d4);
    k = node("Cast", 13, 1, in, 1);
    attr_int(k, "to", CUVIL_DTYPE_INT64);
    CHECK(run(k) == CUVIL_OK && shape_is(out(k, 0), CIR_I64, 1, &d4) && !cir_is_const(out(k, 0)));
}

/* ===== Resize / Upsample ================================================================== */
static void test_resize(void) {
    int64_t xd[4] = {1, 1, 2, 3};
    float sc[4] = {1, 1, 2, 1.5f};
    int64_t d4 = 4;
    /* scales: floor(2*2)=4, floor(3*1.5)=4 */
    fresh();
    int in[4] = {input("x", CIR_F32, 4, xd), -1, cst("scales", CIR_F32, 1, &d4, sc), -1};
    int k = node("Resize", 13, 3, in, 1);
    attr_str(k, "mode", "linear");
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 4, (int64_t[]){1, 1, 4, 4}));

    /* sizes, with an empty scales tensor (opset 11 style) counting as absent */
    fresh();
    int64_t d0 = 0;
    in[0] = input("x", CIR_F32, 4, xd);
    in[1] = cst("roi", CIR_F32, 1, &d0, NULL);
    in[2] = cst("scales", CIR_F32, 1, &d0, NULL);
    in[3] = ints("sizes", 4, (int64_t[]){1, 1, 3, 5});
    k = node("Resize", 11, 4, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 4, (int64_t[]){1, 1, 3, 5}));

    /* opset 18 axes map the sizes onto H and W */
    fresh();
    in[0] = input("x", CIR_F32, 4, xd);
    in[1] = -1;
    in[2] = -1;
    in[3] = ints("sizes", 2, (int64_t[]){5, 7});
    k = node("Resize", 18, 4, in, 1);
    attr_ints(k, "axes", 2, (int64_t[]){2, -1});
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 4, (int64_t[]){1, 1, 5, 7}));

    /* Upsample-7: scales attribute */
    fresh();
    in[0] = input("x", CIR_F32, 4, xd);
    k = node("Upsample", 7, 1, in, 1);
    attr_floats(k, "scales", 4, (float[]){1, 1, 2, 2});
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 4, (int64_t[]){1, 1, 4, 6}));

    /* both scales and sizes, and an unsupported option */
    fresh();
    in[0] = input("x", CIR_F32, 4, xd);
    in[1] = -1;
    in[2] = cst("scales", CIR_F32, 1, &d4, sc);
    in[3] = ints("sizes", 4, (int64_t[]){1, 1, 3, 5});
    k = node("Resize", 13, 4, in, 1);
    CHECK(run(k) == CUVIL_ERR_MODEL);
    fresh();
    in[0] = input("x", CIR_F32, 4, xd);
    in[1] = -1;
    in[2] = cst("scales", CIR_F32, 1, &d4, sc);
    k = node("Resize", 13, 3, in, 1);
    attr_str(k, "coordinate_transformation_mode", "tf_crop_and_resize");   /* without its roi */
    CHECK(run(k) == CUVIL_ERR_MODEL && err_mentions("tf_crop_and_resize needs roi"));
    fresh();
    in[0] = input("x", CIR_F32, 4, xd);
    in[1] = -1;
    in[2] = cst("scales", CIR_F32, 1, &d4, sc);
    k = node("Resize", 18, 3, in, 1);
    attr_int(k, "antialias", 1);
    CHECK(run(k) == CUVIL_ERR_UNSUPPORTED && err_mentions("antialias"));
}

/* ===== Reduce ============================================================================= */
static void test_reduce(void) {
    float x[6] = {1, 2, 3, 4, 5, 6};   /* [[1,2,3],[4,5,6]] */
    int64_t xd[2] = {2, 3};
    /* ReduceSum-13, axes input [1]: keepdims 1 -> [2,1], keepdims 0 -> [2] */
    for (int keep = 0; keep <= 1; keep++) {
        fresh();
        int in[2] = {cst("x", CIR_F32, 2, xd, x), ints("axes", 1, (int64_t[]){1})};
        int k = node("ReduceSum", 13, 2, in, 1);
        attr_int(k, "keepdims", keep);
        CHECK(run(k) == CUVIL_OK);
        CHECK(keep ? shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){2, 1})
                   : shape_is(out(k, 0), CIR_F32, 1, (int64_t[]){2}));
        CHECK(f32s_near(out(k, 0), 2, (float[]){6, 15}, 0));
    }
    /* ReduceMean-11: axes attribute [0], keepdims 0 */
    fresh();
    int in[2] = {cst("x", CIR_F32, 2, xd, x), -1};
    int k = node("ReduceMean", 11, 1, in, 1);
    attr_ints(k, "axes", 1, (int64_t[]){0});
    attr_int(k, "keepdims", 0);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 1, (int64_t[]){3}));
    CHECK(f32s_near(out(k, 0), 3, (float[]){2.5f, 3.5f, 4.5f}, 1e-6f));
    /* ReduceMax-18 with no axes: everything, keepdims default 1 */
    fresh();
    in[0] = cst("x", CIR_F32, 2, xd, x);
    k = node("ReduceMax", 18, 1, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){1, 1}));
    CHECK(f32s_near(out(k, 0), 1, (float[]){6}, 0));
    /* noop_with_empty_axes: identity */
    fresh();
    in[0] = cst("x", CIR_F32, 2, xd, x);
    k = node("ReduceL2", 18, 1, in, 1);
    attr_int(k, "noop_with_empty_axes", 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, xd));
    CHECK(f32s_near(out(k, 0), 6, x, 0));
    /* int64 ReduceProd (shape arithmetic) on axis -1: 1*2*3, 4*5*6 */
    fresh();
    in[0] = cst("x", CIR_I64, 2, xd, (int64_t[]){1, 2, 3, 4, 5, 6});
    k = node("ReduceProd", 13, 1, in, 1);
    attr_ints(k, "axes", 1, (int64_t[]){-1});
    attr_int(k, "keepdims", 0);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){2}));
    CHECK(i64s_are(out(k, 0), 2, (int64_t[]){6, 120}));
    /* repeated axis */
    fresh();
    in[0] = input("x", CIR_F32, 2, xd);
    k = node("ReduceMin", 13, 1, in, 1);
    attr_ints(k, "axes", 2, (int64_t[]){1, -1});
    CHECK(run(k) == CUVIL_ERR_MODEL);
}

/* ===== Pad ================================================================================= */
static void test_pad(void) {
    float x[6] = {1, 2, 3, 4, 5, 6};   /* [[1,2,3],[4,5,6]] */
    int64_t xd[2] = {2, 3};
    /* pads [begin0, begin1, end0, end1] = [0, -1, 1, 0]: crop column 0, add a row of 9s */
    fresh();
    float nine = 9.0f;
    int in[3] = {cst("x", CIR_F32, 2, xd, x), ints("pads", 4, (int64_t[]){0, -1, 1, 0}),
                 cst("v", CIR_F32, 0, NULL, &nine)};
    int k = node("Pad", 13, 3, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){3, 2}));
    CHECK(f32s_near(out(k, 0), 6, (float[]){2, 3, 5, 6, 9, 9}, 0));
    /* opset 2 attributes, edge mode */
    fresh();
    in[0] = cst("x", CIR_F32, 2, xd, x);
    k = node("Pad", 2, 1, in, 1);
    attr_ints(k, "pads", 4, (int64_t[]){0, 1, 0, -2});
    attr_str(k, "mode", "edge");
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){2, 2}));
    CHECK(f32s_near(out(k, 0), 4, (float[]){1, 1, 4, 4}, 0));
    /* cropping more than the axis holds */
    fresh();
    in[0] = input("x", CIR_F32, 2, xd);
    in[1] = ints("pads", 4, (int64_t[]){-2, 0, -1, 0});
    k = node("Pad", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_ERR_SHAPE);
}

/* ===== Softmax ============================================================================ */
static void test_softmax(void) {
    float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t xd[3] = {2, 2, 2};
    const double e = exp(1.0);
    /* opset 11, axis 1: coerced to [2, 4]: softmax over {0,1,2,3} */
    fresh();
    int in[1] = {cst("x", CIR_F32, 3, xd, x)};
    int k = node("Softmax", 11, 1, in, 1);
    attr_int(k, "axis", 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 3, xd));
    float s0 = (float)(1.0 / (1 + e + e * e + e * e * e));
    CHECK(f32_at(out(k, 0), 0, s0, 1e-6f));
    /* opset 13, axis 1: over pairs (0,2): 1 / (1 + e^2) */
    fresh();
    in[0] = cst("x", CIR_F32, 3, xd, x);
    k = node("Softmax", 13, 1, in, 1);
    attr_int(k, "axis", 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 3, xd));
    float s1 = (float)(1.0 / (1 + e * e));   /* elements (0,0,0) and (0,0,1) */
    CHECK(f32_at(out(k, 0), 0, s1, 1e-6f) && f32_at(out(k, 0), 1, s1, 1e-6f));
    /* opset 13 default axis -1, log: log(1 / (1 + e)) for x0 */
    fresh();
    in[0] = cst("x", CIR_F32, 3, xd, x);
    k = node("LogSoftmax", 13, 1, in, 1);
    CHECK(run(k) == CUVIL_OK);
    float l0 = (float)-log(1 + e);
    CHECK(f32_at(out(k, 0), 0, l0, 1e-6f));
    /* opset 11 shapes stay the input's for a run-time input too; rank-0 axis errors */
    fresh();
    in[0] = input("x", CIR_F32, 4, (int64_t[]){2, 3, 4, 5});
    k = node("Softmax", 11, 1, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 4, (int64_t[]){2, 3, 4, 5}));
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){2, 3});
    k = node("Softmax", 13, 1, in, 1);
    attr_int(k, "axis", 2);
    CHECK(run(k) == CUVIL_ERR_MODEL);
}

/* ===== Range, ConstantOfShape, Where, Expand =============================================== */
static void test_fold_only(void) {
    /* Range int64: 10, 7, 4 (limit 1 exclusive) */
    fresh();
    int64_t a = 10, b = 1, c = -3;
    int in[3] = {cst("start", CIR_I64, 0, NULL, &a), cst("limit", CIR_I64, 0, NULL, &b),
                 cst("delta", CIR_I64, 0, NULL, &c)};
    int k = node("Range", 11, 3, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){3}));
    CHECK(i64s_are(out(k, 0), 3, (int64_t[]){10, 7, 4}));
    /* Range float: 0, 0.25, 0.5, 0.75 */
    fresh();
    float fa = 0, fb = 1, fc = 0.25f;
    in[0] = cst("start", CIR_F32, 0, NULL, &fa);
    in[1] = cst("limit", CIR_F32, 0, NULL, &fb);
    in[2] = cst("delta", CIR_F32, 0, NULL, &fc);
    k = node("Range", 11, 3, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(f32s_near(out(k, 0), 4, (float[]){0, 0.25f, 0.5f, 0.75f}, 0));
    /* Range on a run-time integer start, constant delta -3: the count is ceil((start - 1) / 3)
     * clamped at 0, start being read when the model runs (in -limits.dim .. limits.dim) */
    fresh();
    in[0] = input("start", CIR_I64, 0, NULL);
    in[1] = cst("limit", CIR_I64, 0, NULL, &b);
    in[2] = cst("delta", CIR_I64, 0, NULL, &c);
    k = node("Range", 11, 3, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(out(k, 0)->dx[0] && out(k, 0)->dx[0]->lo == 0 &&
          out(k, 0)->dx[0]->hi == ((int64_t)G->limits.dim - 1 + 2) / 3);
    /* a float range read when the model runs: its count is found then, and nothing bounds it */
    fresh();
    in[0] = input("start", CIR_F32, 0, NULL);
    in[1] = cst("limit", CIR_F32, 0, NULL, &fb);
    in[2] = cst("delta", CIR_F32, 0, NULL, &fc);
    k = node("Range", 11, 3, in, 1);
    CHECK(run(k) == CUVIL_ERR_UNSUPPORTED && err_mentions("Range") && err_mentions("known only when the model runs") &&
          err_mentions("--dim"));

    /* ConstantOfShape: default float32 zeros; with an int64 value */
    fresh();
    in[0] = ints("shape", 2, (int64_t[]){2, 3});
    k = node("ConstantOfShape", 9, 1, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){2, 3}));
    CHECK(f32s_near(out(k, 0), 6, (float[]){0, 0, 0, 0, 0, 0}, 0));
    fresh();
    int64_t seven = 7, one = 1;
    int vt = cst("value", CIR_I64, 1, &one, &seven);
    in[0] = ints("shape", 1, (int64_t[]){3});
    k = node("ConstantOfShape", 9, 1, in, 1);
    new_attr(k, "value", (cuvil_attr_type)0)->tensor = vt;
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 1, (int64_t[]){3}));
    CHECK(i64s_are(out(k, 0), 3, (int64_t[]){7, 7, 7}));

    /* Where: cond [2,1], X [3], Y scalar -> [2,3] */
    fresh();
    uint8_t cond[2] = {1, 0};
    int64_t yv = -1;
    in[0] = cst("c", CIR_BOOL, 2, (int64_t[]){2, 1}, cond);
    in[1] = ints("x", 3, (int64_t[]){1, 2, 3});
    in[2] = cst("y", CIR_I64, 0, NULL, &yv);
    k = node("Where", 16, 3, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 2, (int64_t[]){2, 3}));
    CHECK(i64s_are(out(k, 0), 6, (int64_t[]){1, 2, 3, -1, -1, -1}));

    /* Expand: [3,1] to shape [2,1,2] -> [2,3,2] (bidirectional broadcast) */
    fresh();
    in[0] = cst("x", CIR_I64, 2, (int64_t[]){3, 1}, (int64_t[]){1, 2, 3});
    in[1] = ints("shape", 3, (int64_t[]){2, 1, 2});
    k = node("Expand", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_I64, 3, (int64_t[]){2, 3, 2}));
    CHECK(i64s_are(out(k, 0), 12, (int64_t[]){1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
    /* Expand of run-time float32 data infers (it has a kernel); incompatible shapes error */
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){3, 1});
    in[1] = ints("shape", 2, (int64_t[]){1, 4});
    k = node("Expand", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_F32, 2, (int64_t[]){3, 4}));
    fresh();
    in[0] = input("x", CIR_F32, 2, (int64_t[]){3, 2});
    in[1] = ints("shape", 2, (int64_t[]){1, 4});
    k = node("Expand", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_ERR_SHAPE);

    /* Equal feeding Where: the exporters' "replace -1 by the input dim" idiom */
    fresh();
    in[0] = ints("s", 3, (int64_t[]){-1, 4, -1});
    in[1] = cst("m1", CIR_I64, 0, NULL, &yv);
    k = node("Equal", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(shape_is(out(k, 0), CIR_BOOL, 1, (int64_t[]){3}));
    CHECK(i64s_are(out(k, 0), 3, (int64_t[]){1, 0, 1}));

    /* Tile [2] x 3 -> [6]; Sum/Mean of float constants */
    fresh();
    in[0] = ints("x", 2, (int64_t[]){5, 6});
    in[1] = ints("r", 1, (int64_t[]){3});
    k = node("Tile", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(i64s_are(out(k, 0), 6, (int64_t[]){5, 6, 5, 6, 5, 6}));
    fresh();
    float p[2] = {1, 2}, q = 4;
    in[0] = cst("p", CIR_F32, 1, (int64_t[]){2}, p);
    in[1] = cst("q", CIR_F32, 0, NULL, &q);
    k = node("Mean", 13, 2, in, 1);
    CHECK(run(k) == CUVIL_OK);
    CHECK(f32_at(out(k, 0), 0, 2.5f, 0) && f32_at(out(k, 0), 1, 3.0f, 0));
}

int main(void) {
    test_slice();
    test_split();
    test_gather();
    test_cast();
    test_resize();
    test_reduce();
    test_pad();
    test_softmax();
    test_fold_only();
    cir_graph_free(G);
    if (failures) {
        fprintf(stderr, "test_ops_infer: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_ops_infer: all checks passed\n");
    return 0;
}
