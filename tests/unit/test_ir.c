/* test_ir.c -- CIR construction, the verifier, the printers, shape inference and the
 * memory plan, on graphs built by hand. Expected shapes are computed by hand here. */
#include "codegen/codegen_int.h"
#include "ir/ops/ops.h"
#include "passes/passes_int.h"

#include <string.h>

#include "check.h"
#include "../../runtime/kernels/rt_int.h"

static int add_act(cir_graph *g, const char *name) { return cir_value_add(g, name, CIR_VAL_ACT); }

static int add_input(cir_graph *g, const char *name, int ndim, const int64_t *dims) {
    int id = cir_value_add(g, name, CIR_VAL_INPUT);
    cir_set_shape(cir_val(g, id), CIR_F32, ndim, dims);
    CHECK(cir_graph_add_input(g, id) == CUVIL_OK, "add input");
    return id;
}

static void set_outputs(cir_graph *g, int n, const int *ids) {
    for (int i = 0; i < n; i++) CHECK(cir_graph_add_output(g, ids[i]) == CUVIL_OK, "add output");
}

static cir_node *node(cir_graph *g, cir_op_kind kind, int n_in, const int *in, int out) {
    int idx = cir_node_add(g, kind, cir_op_def(kind)->name, NULL, n_in, in, 1, &out);
    CUVIL_ASSERT(idx >= 0);
    return cir_node_at(g, idx);
}

static void attr_ints(cir_graph *g, cir_node *n, const char *name, int cnt, const int64_t *v) {
    cuvil_attr a = {.name = name, .type = CUVIL_ATTR_INTS, .ints = v, .n = (size_t)cnt};
    CHECK(cir_node_set_attr(g, n, &a) == CUVIL_OK, "set %s: %s", name, cuvil_errmsg(g->ctx));
}

static void attr_int(cir_graph *g, cir_node *n, const char *name, int64_t v) {
    cuvil_attr a = {.name = name, .type = CUVIL_ATTR_INT, .i = v};
    CHECK(cir_node_set_attr(g, n, &a) == CUVIL_OK, "set %s: %s", name, cuvil_errmsg(g->ctx));
}

/* A small CNN: conv(3x3, pad 1, stride 2) -> relu -> maxpool(2) -> flatten -> gemm. */
static cir_graph *small_cnn(cuvil_ctx *ctx) {
    cir_graph *g = cir_graph_new(ctx);
    int64_t xd[4] = {1, 3, 32, 32}, wd[4] = {16, 3, 3, 3}, fd[2] = {10, 16 * 8 * 8};
    int x = add_input(g, "x", 4, xd);
    float *w = calloc(16 * 3 * 3 * 3, sizeof(float)), *f = calloc(10 * 1024, sizeof(float));
    int W = cir_const_add(g, "w", CIR_F32, 4, wd, w);
    int F = cir_const_add(g, "f", CIR_F32, 2, fd, f);
    free(w);
    free(f);
    int c = add_act(g, "c"), r = add_act(g, "r"), p = add_act(g, "p"), fl = add_act(g, "fl"), y = add_act(g, "y");
    cir_node *conv = node(g, CIR_OP_CONV, 2, (int[]){x, W}, c);
    attr_ints(g, conv, "pads", 4, (int64_t[]){1, 1, 1, 1});
    attr_ints(g, conv, "strides", 2, (int64_t[]){2, 2});
    node(g, CIR_OP_RELU, 1, (int[]){c}, r);
    cir_node *mp = node(g, CIR_OP_MAX_POOL, 1, (int[]){r}, p);
    attr_ints(g, mp, "kernel_shape", 2, (int64_t[]){2, 2});
    attr_ints(g, mp, "strides", 2, (int64_t[]){2, 2});
    node(g, CIR_OP_FLATTEN, 1, (int[]){p}, fl);
    cir_node *gm = node(g, CIR_OP_GEMM, 2, (int[]){fl, F}, y);
    attr_int(g, gm, "trans_b", 1);
    set_outputs(g, 1, &y);
    return g;
}

static void test_shapes_and_printers(cuvil_ctx *ctx) {
    cir_graph *g = small_cnn(ctx);
    CHECK(cir_verify(g, false, NULL) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    cuvil_options o;
    cuvil_options_init(&o);
    o.opt_level = 0;
    CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    /* conv: (32 + 2 - 3) / 2 + 1 = 16; pool: 16 / 2 = 8; flatten 16*8*8 = 1024; gemm -> 10 */
    const cir_value *c = cir_val(g, cir_node_at(g, 0)->out[0]), *p = cir_val(g, cir_node_at(g, 2)->out[0]);
    const cir_value *fl = cir_val(g, cir_node_at(g, 3)->out[0]), *y = cir_val(g, g->outputs[0]);
    CHECK(c->ndim == 4 && c->dims[1] == 16 && c->dims[2] == 16 && c->dims[3] == 16, "conv out");
    CHECK(p->dims[2] == 8 && p->dims[3] == 8, "pool out %lld", (long long)p->dims[2]);
    CHECK(fl->ndim == 2 && fl->dims[0] == 1 && fl->dims[1] == 1024, "flatten out");
    CHECK(y->ndim == 2 && y->dims[0] == 1 && y->dims[1] == 10, "gemm out");
    cuvil_sb t = {0}, d = {0};
    cir_print_text(g, &t);
    cir_print_dot(g, &d);
    CHECK(t.s && strstr(t.s, "conv \"conv\"") && strstr(t.s, "trans_b=1") && strstr(t.s, "f32[1,10]"), "text printer:\n%s", t.s);
    CHECK(d.s && !strncmp(d.s, "digraph", 7) && strstr(d.s, "->"), "dot printer");
    cuvil_sb_free(&t);
    cuvil_sb_free(&d);

    /* opt level 2 fuses the Relu into the Conv */
    cir_graph_free(g);
    g = small_cnn(ctx);
    o.opt_level = 2;
    CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    CHECK(cir_node_act(cir_node_at(g, 0)).op == CIR_OP_RELU && cir_node_at(g, 1)->dead, "relu fused into conv");
    cir_graph_free(g);
}

static void test_verifier(cuvil_ctx *ctx) {
    cir_graph *g = cir_graph_new(ctx);
    int64_t d[1] = {4};
    int x = add_input(g, "x", 1, d);
    int a = add_act(g, "a"), b = add_act(g, "b");
    node(g, CIR_OP_RELU, 1, (int[]){b}, a);   /* uses b before it is defined */
    node(g, CIR_OP_RELU, 1, (int[]){x}, b);
    set_outputs(g, 1, &a);
    CHECK(cir_verify(g, false, NULL) == CUVIL_ERR_INTERNAL && strstr(cuvil_errmsg(ctx), "before it is defined"),
          "verifier missed use-before-def: %s", cuvil_errmsg(ctx));
    cir_graph_free(g);

    g = cir_graph_new(ctx);
    x = add_input(g, "x", 1, d);
    a = add_act(g, "a");
    node(g, CIR_OP_RELU, 1, (int[]){x}, a);
    node(g, CIR_OP_RELU, 1, (int[]){x}, a);   /* defined twice */
    set_outputs(g, 1, &a);
    CHECK(cir_verify(g, false, NULL) == CUVIL_ERR_INTERNAL && strstr(cuvil_errmsg(ctx), "defined twice"),
          "verifier missed double definition: %s", cuvil_errmsg(ctx));
    cir_graph_free(g);
}

static void test_shape_errors(cuvil_ctx *ctx) {
    cir_graph *g = cir_graph_new(ctx);
    int64_t da[2] = {2, 3}, db[2] = {4, 3};
    int a = add_input(g, "a", 2, da), b = add_input(g, "b", 2, db), y = add_act(g, "y");
    node(g, CIR_OP_ADD, 2, (int[]){a, b}, y);
    set_outputs(g, 1, &y);
    cuvil_options o;
    cuvil_options_init(&o);
    CHECK(cuvil_run_passes(g, &o) == CUVIL_ERR_SHAPE && strstr(cuvil_errmsg(ctx), "add 'add'") &&
              strstr(cuvil_errmsg(ctx), "f32[2,3]") && strstr(cuvil_errmsg(ctx), "f32[4,3]"),
          "broadcast error: %s", cuvil_errmsg(ctx));
    cir_graph_free(g);
}

/* The memory plan on a long chain with skips: check it independently of the planner's own
 * verification: recompute lifetimes from the node list and compare every pair. */
static void test_memplan(cuvil_ctx *ctx) {
    for (int seed = 1; seed <= 20; seed++) {
        cir_graph *g = cir_graph_new(ctx);
        unsigned r = (unsigned)seed * 2654435761u;
        int64_t d[2] = {1, 8};
        int vals[64], nv = 0;
        vals[nv++] = add_input(g, "x", 2, d);
        for (int i = 0; i < 40; i++) {
            r = r * 1103515245u + 12345u;
            int a = vals[nv - 1], b = vals[(r >> 8) % (unsigned)nv];
            int y = add_act(g, "v");
            if ((r >> 4) % 3 == 0) node(g, CIR_OP_RELU, 1, (int[]){a}, y);
            else if ((r >> 4) % 3 == 1) node(g, CIR_OP_ADD, 2, (int[]){a, b}, y);
            else node(g, CIR_OP_FLATTEN, 1, (int[]){a}, y);   /* an alias: shares bytes */
            vals[nv++] = y;
        }
        set_outputs(g, 1, &vals[nv - 1]);
        cuvil_options o;
        cuvil_options_init(&o);
        o.opt_level = 0;
        CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
        cg_plan plan;
        CHECK(cg_plan_memory(g, &plan) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
        /* independent lifetimes: an alias output's uses keep its source's bytes alive */
        int n = g->n_values;
        int *root = malloc(sizeof(int) * (size_t)n), *first = malloc(sizeof(int) * (size_t)n),
            *last = malloc(sizeof(int) * (size_t)n);
        for (int v = 0; v < n; v++) {
            root[v] = v;
            first[v] = last[v] = -1;
        }
        for (int i = 0; i < g->n_nodes; i++)
            if (!cir_node_at(g, i)->dead && plan.aliased[i]) root[cir_node_at(g, i)->out[0]] = root[cir_node_at(g, i)->in[0]];
        for (int i = 0; i < g->n_nodes; i++) {
            cir_node *nd = cir_node_at(g, i);
            if (nd->dead) continue;
            int o = root[nd->out[0]];
            if (first[o] < 0) first[o] = i;
            if (last[o] < i) last[o] = i;
            for (int j = 0; j < nd->n_in; j++)
                if (last[root[nd->in[j]]] < i) last[root[nd->in[j]]] = i;
        }
        int arena_vals = 0;
        for (int a = 0; a < n; a++) {
            if (plan.loc[a].kind != CG_LOC_ARENA || root[a] != a) continue;
            arena_vals++;
            for (int b = a + 1; b < n; b++) {
                if (plan.loc[b].kind != CG_LOC_ARENA || root[b] != b) continue;
                int64_t oa = plan.loc[a].index, ob = plan.loc[b].index;
                bool bytes = oa < ob + 32 && ob < oa + 32;   /* each value is 8 floats */
                bool live = first[a] <= last[b] && first[b] <= last[a];
                CHECK(!(bytes && live), "seed %d: values %d [%d,%d]@%lld and %d [%d,%d]@%lld overlap", seed, a, first[a],
                      last[a], (long long)oa, b, first[b], last[b], (long long)ob);
            }
        }
        for (int v = 0; v < n; v++)
            if (root[v] != v && cir_val(g, v)->kind == CIR_VAL_ACT && cir_val(g, v)->output_index < 0)
                CHECK(plan.loc[v].kind == plan.loc[root[v]].kind && plan.loc[v].index == plan.loc[root[v]].index,
                      "seed %d: alias %d does not share its source's storage", seed, v);
        CHECK(arena_vals > 3, "seed %d: only %d arena values", seed, arena_vals);
        free(root);
        CHECK(plan.arena_bytes <= (size_t)64 * 41, "arena %zu too big", plan.arena_bytes);
        free(first);
        free(last);
        cg_plan_free(&plan);
        cir_graph_free(g);
    }
}

/* The fused epilogue is a list in order: relu(conv(x) + r) makes the conv's [add r, relu], the
 * form the kernels take; other orders are not that form. */
static void test_post_list(cuvil_ctx *ctx) {
    cir_graph *g = cir_graph_new(ctx);
    int64_t d[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1};
    float w[4] = {1, 0.5f, -0.25f, 1};
    int x = add_input(g, "x", 4, d), r = add_input(g, "r", 4, d);
    int c = add_act(g, "c"), s = add_act(g, "s"), y = add_act(g, "y");
    node(g, CIR_OP_CONV, 2, (int[]){x, cir_const_add(g, "w", CIR_F32, 4, wd, w)}, c);
    node(g, CIR_OP_ADD, 2, (int[]){c, r}, s);
    node(g, CIR_OP_RELU, 1, (int[]){s}, y);
    set_outputs(g, 1, (int[]){y});
    cuvil_options o;
    cuvil_options_init(&o);
    CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    const cir_node *f = NULL;
    for (int i = 0; i < g->n_nodes; i++)
        if (!cir_node_at(g, i)->dead && cir_node_at(g, i)->kind == CIR_OP_CONV) f = cir_node_at(g, i);
    CHECK(f && f->n_post == 2 && f->post[0].kind == CIR_POST_ADD && f->post[0].value == r &&
              f->post[1].kind == CIR_POST_ACT && f->post[1].act.op == CIR_OP_RELU && f->out[0] == y,
          "the conv's epilogue is not [add r, relu]");
    CHECK(f && cir_post_kernel_form(f) && cir_node_residual(f) == r && cir_node_act(f).op == CIR_OP_RELU,
          "the kernels' view of it");
    CHECK(f && cir_node_n_reads(f) == f->n_in + 2 && cir_node_read(f, f->n_in) == r && cir_node_read(f, f->n_in + 1) == -1,
          "the values it reads: its inputs, then r");
    cuvil_sb t = {0};
    cir_print_text(g, &t);
    char want[64];
    snprintf(want, sizeof want, "add=%%%d act=relu(", r);
    CHECK(t.s && strstr(t.s, want), "--emit ir prints the epilogue in order: %s", t.s ? t.s : "");
    cuvil_sb_free(&t);
    cir_node n = {0};
    cir_act relu = {CIR_OP_RELU, 0, 0};
    CHECK(cir_post_kernel_form(&n) && cir_node_residual(&n) < 0 && !cir_node_act(&n).op, "no epilogue");
    cir_post_push(&n, (cir_post){CIR_POST_ACT, -1, relu});
    cir_post_push(&n, (cir_post){CIR_POST_ADD, r, {CIR_OP_NONE, 0, 0}});
    CHECK(!cir_post_kernel_form(&n) && cir_node_residual(&n) < 0 && !cir_node_act(&n).op,
          "an activation before an addition is not the kernels' form, nor read as theirs");
    n.n_post = 0;
    cir_post_push(&n, (cir_post){CIR_POST_ADD, r, {CIR_OP_NONE, 0, 0}});
    cir_post_push(&n, (cir_post){CIR_POST_ADD, r, {CIR_OP_NONE, 0, 0}});
    CHECK(!cir_post_kernel_form(&n), "two additions are not the kernels' form");
    for (int k = 0; k < CIR_MAX_POSTS; k++) cir_post_push(&n, (cir_post){CIR_POST_ACT, -1, relu});
    CHECK(n.n_post == CIR_MAX_POSTS && !cir_post_push(&n, (cir_post){CIR_POST_ACT, -1, relu}), "the list is bounded");
    cir_graph_free(g);
}

/* The sequence ops with an omitted input (a graph built without the ONNX frontend's schema
 * checks): refused by name, never read through a missing value. */
static void test_seq_omitted_inputs(cuvil_ctx *ctx) {
    static const struct {
        cir_op_kind kind;
        int n_in, in0, in1;
    } cases[] = {{CIR_OP_SEQ_INSERT, 2, -1, 0}, {CIR_OP_SEQ_INSERT, 2, 1, -1}, {CIR_OP_SEQ_AT, 2, -1, 0},
                 {CIR_OP_SEQ_ERASE, 1, -1, 0}, {CIR_OP_SEQ_LENGTH, 1, -1, 0}, {CIR_OP_CONCAT_FROM_SEQ, 1, -1, 0},
                 {CIR_OP_SPLIT_TO_SEQ, 1, -1, 0}, {CIR_OP_SEQ_CONSTRUCT, 2, -1, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cir_graph *g = cir_graph_new(ctx);
        int64_t d[1] = {2};
        int x = add_input(g, "x", 1, d), s = add_act(g, "s"), y = add_act(g, "y");
        node(g, CIR_OP_SEQ_CONSTRUCT, 1, (int[]){x}, s);   /* value 1: a sequence */
        int ids[2] = {cases[k].in0 < 0 ? -1 : cases[k].in0 == 0 ? x : s, cases[k].in1 < 0 ? -1 : x};
        cir_node *n = node(g, cases[k].kind, cases[k].n_in, ids, y);
        if (cases[k].kind == CIR_OP_CONCAT_FROM_SEQ) attr_int(g, n, "axis", 0);
        set_outputs(g, 1, (int[]){y});
        cuvil_options o;
        cuvil_options_init(&o);
        cuvil_status st = cuvil_run_passes(g, &o);
        CHECK(st != CUVIL_OK && st != CUVIL_ERR_INTERNAL, "case %zu (%s): status %d: %s", k, cir_op_def(cases[k].kind)->name,
              (int)st, cuvil_errmsg(ctx));
        cuvil_err_clear(ctx);
        ctx->status = CUVIL_OK;
        cir_graph_free(g);
    }
}

/* A conv that adds a residual writes over the residual's bytes exactly where nothing reads the
 * residual after it: p = conv(x); s = conv(p); y = conv(s) + p; then (kind) nothing, p read
 * again by a later node, or the fused conv's input being p itself (y = conv(p) + p). */
static void test_memplan_residual_in_place(cuvil_ctx *ctx) {
    for (int kind = 0; kind < 3; kind++) {
        cir_graph *g = cir_graph_new(ctx);
        int64_t d[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1};
        float w[4] = {1, 0.5f, -0.25f, 1};
        int x = add_input(g, "x", 4, d);
        int p = add_act(g, "p"), s = add_act(g, "s"), q = add_act(g, "q"), y = add_act(g, "y"), z = add_act(g, "z");
        node(g, CIR_OP_CONV, 2, (int[]){x, cir_const_add(g, "w1", CIR_F32, 4, wd, w)}, p);
        node(g, CIR_OP_CONV, 2, (int[]){p, cir_const_add(g, "w2", CIR_F32, 4, wd, w)}, s);
        node(g, CIR_OP_CONV, 2, (int[]){kind == 2 ? p : s, cir_const_add(g, "w3", CIR_F32, 4, wd, w)}, q);
        node(g, CIR_OP_ADD, 2, (int[]){q, p}, y);
        node(g, CIR_OP_CONV, 2, (int[]){y, cir_const_add(g, "w4", CIR_F32, 4, wd, w)}, z);
        int outs[2] = {z, -1};
        if (kind == 1) {
            outs[1] = add_act(g, "later");
            node(g, CIR_OP_RELU, 1, (int[]){p}, outs[1]);
        }
        set_outputs(g, kind == 1 ? 2 : 1, outs);
        cuvil_options o;
        cuvil_options_init(&o);
        CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
        const cir_node *fused = NULL;
        for (int i = 0; i < g->n_nodes; i++)
            if (!cir_node_at(g, i)->dead && cir_node_residual(cir_node_at(g, i)) >= 0) fused = cir_node_at(g, i);
        CHECK(fused && cir_node_residual(fused) == p && fused->out[0] == y, "kind %d: the add was not fused into the conv", kind);
        cg_plan plan;
        CHECK(cg_plan_memory(g, &plan) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
        CHECK(plan.loc[y].kind == CG_LOC_ARENA && plan.loc[p].kind == CG_LOC_ARENA, "kind %d: not in the arena", kind);
        const bool shared = plan.loc[y].index == plan.loc[p].index;
        CHECK(shared == (kind == 0), "kind %d: y at %lld, its residual p at %lld", kind, (long long)plan.loc[y].index,
              (long long)plan.loc[p].index);
        /* p is live from its conv to the fused one; s and the fused conv's output may not share
         * p's bytes unless y is written over p */
        CHECK(kind == 2 || plan.loc[s].index != plan.loc[p].index, "kind %d: s shares p's bytes", kind);
        cg_plan_free(&plan);
        cir_graph_free(g);
    }
}

/* Pointer-stable storage: a graph grown past several chunk boundaries (values and nodes) while
 * pointers taken early stay valid, then run through every pass and the memory plan (the
 * sanitizer build checks every access). Passes add values (bn_fold's constants) while they
 * hold node pointers. */
static void test_storage_growth(cuvil_ctx *ctx) {
    cir_graph *g = cir_graph_new(ctx);
    int64_t d[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1}, cd[1] = {2};
    int x = add_input(g, "x", 4, d);
    cir_value *xv = cir_val(g, x);
    float w[4] = {1, 0, 0, 1}, one[2] = {1, 1}, zero[2] = {0, 0};
    int cur = x, n_conv = 0;
    cir_node *first = NULL;
    for (int i = 0; i < 3 * CIR_CHUNK / 2; i++) {
        /* conv -> batch_norm -> relu: bn_fold and fuse_act rewrite every triple */
        int W = cir_const_add(g, "w", CIR_F32, 4, wd, w);
        int y = add_act(g, "c");
        cir_node *c = node(g, CIR_OP_CONV, 2, (int[]){cur, W}, y);
        if (!first) first = c;
        int bn[5] = {y, cir_const_add(g, "g", CIR_F32, 1, cd, one), cir_const_add(g, "b", CIR_F32, 1, cd, zero),
                     cir_const_add(g, "m", CIR_F32, 1, cd, zero), cir_const_add(g, "v", CIR_F32, 1, cd, one)};
        int z = add_act(g, "bn");
        node(g, CIR_OP_BATCH_NORM, 5, bn, z);
        int r = add_act(g, "r");
        node(g, CIR_OP_RELU, 1, (int[]){z}, r);
        cur = r;
        n_conv++;
    }
    set_outputs(g, 1, &cur);
    CHECK(g->n_values > 4 * CIR_CHUNK && g->n_nodes > 4 * CIR_CHUNK, "grew to %d values, %d nodes", g->n_values, g->n_nodes);
    CHECK(cir_val(g, x) == xv && xv->id == x && !strcmp(xv->name, "x"), "a value moved while the graph grew");
    CHECK(cir_node_at(g, 0) == first && first->kind == CIR_OP_CONV, "a node moved while the graph grew");
    cuvil_options o;
    cuvil_options_init(&o);
    CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        live++;
        CHECK(n->kind == CIR_OP_CONV && cir_node_act(n).op == CIR_OP_RELU, "node %d is %s, not a conv with relu fused", i,
              n->def->name);
    }
    CHECK(live == n_conv, "%d live nodes for %d convolutions", live, n_conv);
    cg_plan plan;
    CHECK(cg_plan_memory(g, &plan) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    cg_plan_free(&plan);
    cir_graph_free(g);
}

/* docs/OPS.md lists every op of the registry, each with all its attributes. */
static void test_ops_doc(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/docs/OPS.md", CUVIL_TEST_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    CHECK(f, "cannot open %s", path);
    if (!f) return;
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    for (int k = 1; k < CIR_OP__COUNT; k++) {
        const cir_opdef *d = cir_op_def((cir_op_kind)k);
        char key[96];
        snprintf(key, sizeof key, "\n| `%s` |", d->name);
        const char *row = strstr(doc, key);
        CHECK(row, "docs/OPS.md has no row for %s", d->name);
        if (!row) continue;
        const char *end = strchr(row + 1, '\n');
        for (const cir_attr_spec *a = d->attrs; a && a->name; a++) {
            snprintf(key, sizeof key, "`%s`", a->name);
            const char *at = strstr(row, key);
            CHECK(at && (!end || at < end), "docs/OPS.md: %s lacks attribute %s", d->name, a->name);
        }
    }
}

/* Codegen's emitter table (src/codegen/emit/emit.inc) and the IR agree on which ops have a
 * run-time kernel: every op has an emitter unless it is FOLD_ONLY or ALIAS (whose bytes codegen
 * shares or copies itself), and those have none. The passes decide what to fold from the flags,
 * so an op missing from the table would only fail once a model reaches codegen. */
static void test_emitters(void) {
    for (int k = 1; k < CIR_OP__COUNT; k++) {
        const cir_opdef *d = cir_op_def((cir_op_kind)k);
        bool fold_only = d->flags & CIR_OPF_FOLD_ONLY, alias = d->flags & CIR_OPF_ALIAS;
        CHECK(!(fold_only && alias), "%s is both FOLD_ONLY and ALIAS", d->name);
        CHECK(!((d->flags & CIR_OPF_SHAPE_DATA) && (fold_only || alias)), "%s is SHAPE_DATA and FOLD_ONLY or ALIAS", d->name);
        if (fold_only || alias)
            CHECK(!cg_emitter((cir_op_kind)k), "%s is %s but has an emitter in emit.inc", d->name,
                  fold_only ? "FOLD_ONLY" : "ALIAS");
        else
            CHECK(cg_emitter((cir_op_kind)k), "%s has no emitter in emit.inc (or mark it CIR_OPF_FOLD_ONLY)", d->name);
        CHECK(cir_op_has_emitter(d) == (cg_emitter((cir_op_kind)k) != NULL), "cir_op_has_emitter(%s) disagrees with emit.inc",
              d->name);
    }
}

/* libcuvil folds with the portable runtime: its blocking is the generic target's entry (the
 * host runtime's is checked by test_kernel_gemm). */
static void test_generic_target_blocking(void) {
    const cuvil_target_info *t = cuvil_target_find("generic");
    const cuvil_gemm_blocking *b = cuvil_gemm_default_blocking();
    CHECK(t && t->mr == b->uk->mr && t->nr == b->uk->nr && t->mc == b->mc && t->kc == b->kc && t->nc == b->nc,
          "targets.inc's generic entry differs from the portable runtime's blocking %dx%d mc=%lld kc=%lld nc=%lld",
          b->uk->mr, b->uk->nr, (long long)b->mc, (long long)b->kc, (long long)b->nc);
    CHECK(!cuvil_target_find("x86_64-avx3"), "an unknown target was found");
}

/* A float16 input through float32 kernels: shape inference places casts around each such
 * node (cir_node_insert), and every id and producer stays consistent. */
static void test_half_through_float32_kernels(cuvil_ctx *ctx) {
    cir_graph *g = small_cnn(ctx);
    cir_value *x = cir_val(g, g->inputs[0]);
    int64_t xd[4] = {1, 3, 32, 32};
    cir_set_shape(x, CIR_F16, 4, xd);
    for (int i = 0; i < g->n_nodes; i++) {   /* the weights float16 too: ONNX's T is one type */
        cir_node *n = cir_node_at(g, i);
        if (n->kind != CIR_OP_CONV && n->kind != CIR_OP_GEMM) continue;
        const cir_value *w = cir_in(g, n, 1);
        uint16_t *zero = calloc((size_t)cir_numel(w), sizeof *zero);
        int h = cir_const_add(g, "w16", CIR_F16, w->ndim, w->dims, zero);
        free(zero);
        CHECK(h >= 0, "float16 weights");
        cir_node_at(g, i)->in[1] = h;
    }
    cuvil_options o;
    cuvil_options_init(&o);
    o.opt_level = 0;
    CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    int casts = 0, half_nodes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        CHECK(n->id == i, "node %d has id %d", i, n->id);
        if (n->dead) continue;
        casts += n->kind == CIR_OP_CAST;
        half_nodes += n->half == CIR_F16;
        for (int j = 0; j < n->n_out; j++)
            CHECK(cir_val(g, n->out[j])->producer == i, "output %d of node %d ('%s') has producer %d", j, i, n->name,
                  cir_val(g, n->out[j])->producer);
        for (int j = 0; j < n->n_in; j++) {   /* inputs are made before they are used */
            const cir_value *v = cir_in(g, n, j);
            CHECK(!v || v->kind != CIR_VAL_ACT || v->producer < i, "node %d reads '%s' made by node %d", i, v ? v->name : "",
                  v ? v->producer : -1);
        }
    }
    /* conv, max_pool and gemm take float32: a cast in and a cast out each (relu and flatten
     * take float16), and casts of the weights: the conv's folds while shapes are inferred
     * (small), the gemm's 10240 elements are left to const_fold, which -O0 does not run */
    CHECK(half_nodes == 3 && casts == 7, "%d nodes computed in float32, %d casts", half_nodes, casts);
    CHECK(cir_val(g, g->outputs[0])->dtype == CIR_F16, "output is %s", cir_dtype_name(cir_val(g, g->outputs[0])->dtype));
    cir_graph_free(g);

    /* a chain of 400 float16 softmaxes: 800 casts placed, the node storage grows past its
     * chunks while nodes move (the sanitizer build runs this too) */
    g = cir_graph_new(ctx);
    int64_t d2[2] = {2, 3};
    int v = cir_value_add(g, "x", CIR_VAL_INPUT);
    cir_set_shape(cir_val(g, v), CIR_F16, 2, d2);
    CHECK(cir_graph_add_input(g, v) == CUVIL_OK, "add input");
    for (int i = 0; i < 400; i++) {
        int y = add_act(g, "s");
        node(g, CIR_OP_SOFTMAX, 1, &v, y);
        v = y;
    }
    set_outputs(g, 1, &v);
    CHECK(cuvil_run_passes(g, &o) == CUVIL_OK, "%s", cuvil_errmsg(ctx));
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        CHECK(n->id == i, "node %d has id %d", i, n->id);
        if (n->dead) continue;
        live++;
        for (int j = 0; j < n->n_in; j++) {
            const cir_value *x = cir_in(g, n, j);
            CHECK(!x || x->kind != CIR_VAL_ACT || x->producer < i, "node %d reads a value made by node %d", i,
                  x ? x->producer : -1);
        }
    }
    CHECK(live == 1200 && g->n_nodes == 1200, "%d live nodes of %d, want 1200", live, g->n_nodes);
    CHECK(cir_val(g, g->outputs[0])->dtype == CIR_F16, "chain output is %s", cir_dtype_name(cir_val(g, g->outputs[0])->dtype));
    cir_graph_free(g);
}

int main(void) {
    cuvil_ctx *ctx;
    if (cuvil_ctx_create(&ctx)) return 1;
    test_shapes_and_printers(ctx);
    test_verifier(ctx);
    test_shape_errors(ctx);
    test_memplan(ctx);
    test_memplan_residual_in_place(ctx);
    test_post_list(ctx);
    test_seq_omitted_inputs(ctx);
    test_storage_growth(ctx);
    test_ops_doc();
    test_emitters();
    test_generic_target_blocking();
    test_half_through_float32_kernels(ctx);
    cuvil_ctx_destroy(ctx);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    puts("test_ir: all checks passed");
    return 0;
}
