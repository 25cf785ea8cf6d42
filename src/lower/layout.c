/* layout.c -- the lowering's layouts: tensors kept channels last between the convs (and the
 * global pools) that all take them so, their weights repacked where the layout changes them. */
#include "lower/lower_int.h"

#include <string.h>

/* A projection (a 1x1 stride-1 conv to at most half as many channels) with a channels-last x
 * runs as the direct convolution, which reads x's pixels in place, rather than the
 * pixels-as-rows GEMM, which packs them. Each conv alone (cuvil_f32_conv2d_prepacked, medians
 * of 200-300, one thread / two). With the target's kc, AVX-512: 192 -> 32 at 28x28 14% / 16%
 * faster, 384 -> 64 at 14x14 5% / 6%, 576 -> 160 at 7x7 2-4% / 15%, 512 -> 128 at 28x28 4% /
 * 3%, but not with more outputs (960 -> 320 at 7x7 -2% / +0.5%, 2048 -> 512 -3%); AVX2 192 ->
 * 32 12% faster: there, at most 5 tiles of NR. On AVX-512 the weights are packed in one K block
 * (below), and then the larger ones gain too: 1024 -> 256 at 14x14 1.11-1.16 -> 1.03-1.05 ms /
 * 0.61-0.65 -> 0.51, 2048 -> 512 at 7x7 1.20-1.25 -> 1.03-1.20 / 0.79-0.82 -> 0.49-0.59, 960 ->
 * 320 at 7x7 0.30 -> 0.28 / 0.225 -> 0.153.
 * Also a 1x1 conv to at most twice its input channels and at most 256 outputs, no more outputs
 * than pixels: since the rows microkernels took their k loop unrolled (5c49096) and the 1x1
 * split stopped reading every pixel on both threads for a 1% smaller share (a5f5480's
 * successor), cuvil-bench-conv with CUVIL_BENCH_NHWC=1 and HardSwish, direct / GEMM, AVX2 one
 * thread / two: 64 -> 64 at 56x56 0.85 / 0.90, 128 -> 128 at 28x28 0.92 / 0.90, 32 -> 32 at
 * 112x112 0.77 / 0.78, 96 -> 96 at 28x28 0.91 / 0.90, 64 -> 128 at 56x56 0.93 / 0.95, 128 -> 256
 * at 28x28 0.97 / 0.94, 512 -> 128 at 28x28 0.85, 672 -> 112 at 14x14 0.94 / 0.95; AVX-512 64 ->
 * 64 0.83 / 0.88, 128 -> 128 0.97 / 0.95, 64 -> 128 0.93 / 1.00. Left to the GEMM: 256 -> 256 at
 * 14x14 (AVX2 0.93 / 1.06, AVX-512 0.98 / 1.19: more outputs than pixels), 2048 -> 512 at 7x7
 * (1.03 / 1.03) and expansions by 4 or more (24 -> 144 at 56x56 1.07 / 1.10, 112 -> 672 at
 * 14x14 1.10 / 1.07): with few input channels a tile's setup outweighs the packing. */
static bool direct_t_projection(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    if (!cuvil_conv2d_direct_t_applies(p) || p->KH != 1 || p->KW != 1 || p->stride_h != 1 || p->stride_w != 1 ||
        p->pad_t != 0 || p->pad_l != 0 || p->OH != p->H || p->OW != p->W || t->nr < 16)
        return false;
    return (p->C >= 2 * p->M && (t->nr >= 32 || p->M <= 5 * t->nr)) ||
           (p->M <= 2 * p->C && p->M <= 256 && p->M <= p->OH * p->OW);
}

/* Its weights in K blocks of up to this many channels (one block up to 1024) on targets of 32
 * columns (AVX-512), so that each tile's sums stay in registers over all of K: alone, one
 * thread / two, 576 -> 96 at 14x14 5% / 3-6% faster, 960 -> 160 at 7x7 7-9% / 9-11%, 512 -> 128
 * at 28x28 3-7% / 3-4% than with kc 192. (With 16 columns, AVX2, it measured even: 576 -> 64 5%
 * faster, 384 -> 64 4-8% slower.) */
#define DIRECT_T_WHOLE_K_MAX 1024

/* ===== Channels-last regions ============================================================
 * A pixels-as-rows GEMM (low.algo CUVIL_CONV_GEMM_T: 14x14 and 7x7 maps, and 1x1 convs
 * beside a depthwise conv up to 28x28) computes its output as [pixel][channel] and
 * transposed it into NCHW, and a depthwise conv between two of them transposed 8 channels at
 * a time into a tile and back. A tensor whose producer and consumers can all take it
 * channels last (cuvil_conv2d_layout_ok: the pixels-as-rows GEMM writes it and reads it as a
 * 1x1 conv's input, the depthwise conv reads and writes it, a GEMM adds it as its residual,
 * a global pool reads it, Winograd with tiles as rows reads and writes it, an elementwise
 * binary op reads and writes it: bin_full_inputs) is kept so, with no transposes; the others,
 * and the graph's outputs, stay NCHW. */

static bool is_global_pool(const cir_node *n) {
    return n->kind == CIR_OP_GLOBAL_AVG_POOL || n->kind == CIR_OP_GLOBAL_MAX_POOL;
}

/* Can conv n run with `layout` (the depthwise conv: on weights prepacked tap-major)? A global
 * pool reads channels last (its output, [N, C, 1, 1], is the same either way). */
static bool layout_ok(cir_graph *g, cir_node *n, int layout) {
    if (n->dead || n->half != CIR_UNDEF || n->n_in < 1 || !cir_in(g, n, 0) || cir_in(g, n, 0)->dtype != CIR_F32)
        return false;
    if (is_global_pool(n))
        return layout == CUVIL_CONV_X_NHWC && cir_in(g, n, 0)->ndim == 4;
    if (n->kind != CIR_OP_CONV) return false;
    cuvil_conv2d_params p;
    if (lower_conv_params(g, n, &p)) return false;
    const bool depthwise = lower_is_depthwise(g, n);
    if (depthwise && (n->low.packed >= 0 || !cir_is_const(cir_in(g, n, 1)))) return false;
    p.algo = n->low.algo;
    p.packed_mr = n->low.packed >= 0 || depthwise ? 1 : 0;
    p.layout = depthwise ? CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC : layout;
    return cuvil_conv2d_layout_ok(&p) != 0;
}

/* A float32 elementwise binary op of fixed shapes with a 4-D output, each of whose inputs is
 * either an activation of the output's shape (read in the output's layout) or broadcast over
 * H and W ([.., C, 1, 1]: a squeeze-excitation's scale, a PReLU's slope, a per-channel bias),
 * whose bytes are the same channels first or last. Returns the mask of the inputs of the first
 * kind (bit j: input j), 0 where the op cannot run channels last or has no such input. (Squeeze-excitation blocks,
 * x * sigmoid(fc(pool(x))), had the depthwise conv that makes x and the projection that reads
 * x * s leave the channels-last regions, with transposes around them.) An op with a fused
 * activation (an epilogue read) is left NCHW. */
static unsigned bin_full_inputs(cir_graph *g, const cir_node *n) {
    switch (n->kind) {
    case CIR_OP_ADD: case CIR_OP_SUB: case CIR_OP_MUL: case CIR_OP_DIV: case CIR_OP_MAX: case CIR_OP_MIN:
    case CIR_OP_PRELU: break;
    default: return 0;
    }
    if (n->dead || n->half != CIR_UNDEF || n->n_in != 2 || n->n_out != 1 || n->n_rt || cir_node_n_reads(n) != n->n_in)
        return 0;
    const cir_value *y = cir_out(g, n, 0);
    if (!y || y->dtype != CIR_F32 || y->ndim != 4 || y->seq_n >= 0 || !cir_value_fixed(y)) return 0;
    unsigned full = 0;
    for (int j = 0; j < 2; j++) {
        const cir_value *v = cir_in(g, n, j);
        if (!v || v->dtype != CIR_F32 || v->ndim < 0 || v->ndim > 4 || v->seq_n >= 0 || !cir_value_fixed(v)) return 0;
        if (v->ndim == 4 && !memcmp(v->dims, y->dims, sizeof v->dims[0] * 4)) {
            if (v->kind != CIR_VAL_ACT) return 0;   /* (a constant or graph input stays as it is given) */
            full |= 1u << j;
        } else if (!(v->ndim < 1 || v->dims[v->ndim - 1] == 1) || !(v->ndim < 2 || v->dims[v->ndim - 2] == 1)) {
            return 0;
        }
    }
    return full;
}

cuvil_status lower_layouts(cir_graph *g, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    if (g->opt_level < 2) return CUVIL_OK;
    bool *last = cuvil_calloc((size_t)g->n_values + 1, sizeof *last); /* value v channels last */
    if (!last) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    /* what a conv or a binary op can write, 4-D and not a graph output */
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (!layout_ok(g, n, CUVIL_CONV_Y_NHWC) && !bin_full_inputs(g, n)) continue;
        const cir_value *v = cir_val(g, n->out[0]);
        last[v->id] = v->kind == CIR_VAL_ACT && v->ndim == 4 && v->output_index < 0;
    }
    /* that every use can read */
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        const unsigned full = bin_full_inputs(g, n);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && !(j == 0 && layout_ok(g, n, CUVIL_CONV_X_NHWC)) && !(j < 2 && (full >> j & 1)))
                last[n->in[j]] = false;
        for (int j = n->n_in; j < cir_node_n_reads(n); j++)   /* the values the epilogue adds */
            if (cir_node_read(n, j) >= 0 && !layout_ok(g, n, CUVIL_CONV_Y_NHWC)) last[cir_node_read(n, j)] = false;
        if (n->low.packed >= 0) last[n->low.packed] = false;
    }
    /* the depthwise conv's input and output, a residual and the output it is added to, a
     * binary op's inputs of its output's shape and its output: both channels last or neither */
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            cir_node *n = cir_node_at(g, i);
            const unsigned full = n->dead ? 0 : bin_full_inputs(g, n);
            if (n->dead || (n->kind != CIR_OP_CONV && !full)) continue;
            const int x = n->in[0], y = n->out[0];
            int pairs[2][2] = {{lower_is_depthwise(g, n) ? x : -1, y}, {cir_node_residual(n), y}};
            if (full) {
                pairs[0][0] = full & 1 ? n->in[0] : -1;
                pairs[1][0] = full & 2 ? n->in[1] : -1;
            }
            for (int k = 0; k < 2; k++)
                if (pairs[k][0] >= 0 && last[pairs[k][0]] != last[pairs[k][1]]) {
                    last[pairs[k][0]] = last[pairs[k][1]] = false;
                    changed = true;
                }
        }
    }
    cuvil_status s = CUVIL_OK;
    for (int i = 0; i < g->n_nodes && !s; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        if (is_global_pool(n) && last[n->in[0]]) {
            n->low.layout = CUVIL_POOL_X_NHWC;
            if (!(n->low.note = cuvil_arena_strdup(&g->arena, "channels last in"))) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
            continue;
        }
        if (bin_full_inputs(g, n) && last[n->out[0]]) {
            n->low.layout = CIR_BIN_CHANNELS_LAST;
            if (!(n->low.note = cuvil_arena_strdup(&g->arena, "channels last"))) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
            continue;
        }
        if (n->kind != CIR_OP_CONV) continue;
        const int layout = (last[n->in[0]] ? CUVIL_CONV_X_NHWC : 0) | (last[n->out[0]] ? CUVIL_CONV_Y_NHWC : 0);
        /* a kernel chosen for a layout that did not come: its channels-first twin */
        if (!layout && n->low.for_layout) {
            if ((s = lower_conv_channels_first(g, n, c))) break;
            continue;
        }
        /* a swapped GEMM of a strided 3x3 (or larger) conv on a channels-first input: the
         * direct convolution on a channels-last copy (lower_direct_t_over_swap) */
        const bool over_swap = !(layout & CUVIL_CONV_X_NHWC) && n->low.algo == CUVIL_CONV_GEMM_T && n->low.packed >= 0;
        if (!layout && !over_swap) continue;
        cuvil_conv2d_params p;
        if ((s = lower_conv_params(g, n, &p))) break;
        bool to_direct_t = false;   /* (where its weights, packed again, fit the packing budget) */
        if (over_swap && lower_direct_t_over_swap(&p, t)) {
            cuvil_conv2d_params q = p;
            q.algo = CUVIL_CONV_DIRECT_T;
            q.packed_mr = t->nr;
            q.packed_kc = t->kc;
            to_direct_t = lower_pack_fits(g, cuvil_f32_conv2d_packed_floats(&q), 0);
        }
        if (!layout && !to_direct_t) continue;
        n->low.layout = layout;
        const char *base = n->low.note ? n->low.note : "";
        char algo[CIR_ALGO_MAX], direct[CIR_ALGO_MAX];
        bool repack = false; /* the weights packed again, for another K blocking or kernel */
        if (to_direct_t) {
            n->low.algo = CUVIL_CONV_DIRECT_T;   /* its weights tap-major: repacked below */
            repack = true;
            snprintf(direct, sizeof direct, "%s, gemm %dx%d kc=%lld, weights prepacked",
                     lower_conv_algo_name(CUVIL_CONV_DIRECT_T, false, false), t->mr, t->nr, (long long)t->kc);
            base = direct;
        }
        if (n->low.algo == CUVIL_CONV_GEMM_T && (layout & CUVIL_CONV_X_NHWC) && direct_t_projection(&p, t)) {
            /* the same packed weights (a 1x1 conv's are the same tap-major or not), but for
             * their K blocking: repacked below where that changes */
            n->low.algo = CUVIL_CONV_DIRECT_T;
            if (t->nr >= 32 && p.C > t->kc) {
                n->low.kc = p.C < DIRECT_T_WHOLE_K_MAX ? p.C : DIRECT_T_WHOLE_K_MAX;
                repack = true;
            }
            snprintf(direct, sizeof direct, "%s, gemm %dx%d kc=%lld, weights prepacked",
                     lower_conv_algo_name(CUVIL_CONV_DIRECT_T, true, false), t->mr, t->nr,
                     (long long)(n->low.kc ? n->low.kc : t->kc));
            base = direct;
        }
        if (layout)
            snprintf(algo, sizeof algo, "%s, channels last %s", base,
                     layout == CUVIL_CONV_X_NHWC ? "in" : layout == CUVIL_CONV_Y_NHWC ? "out" : "in and out");
        else
            snprintf(algo, sizeof algo, "%s", base);
        /* the weights tap-major: the depthwise conv's (a tap's weights for a vector of
         * channels), and a GEMM's of several taps reading channels last (K = tap C + c, the
         * order its im2col of that input comes in); the weights packed before are left unused
         * (the generated code holds only the constants it reads) */
        const bool dw = lower_is_depthwise(g, n);
        p.layout = layout;
        p.algo = n->low.algo;
        p.packed_mr = dw ? t->mr : t->nr;
        p.packed_kc = n->low.kc ? n->low.kc : t->kc;
        const bool tap_major = cuvil_conv2d_packed_tap_major(&p);
        if (tap_major || repack) {
            int id;
            bool fill;
            char key[400];
            lower_conv_pack_key(&p, key, sizeof key);
            cir_value *w = cir_in(g, n, 1);
            lower_release_pack(g, n);   /* (what this node alone read no longer counts) */
            if ((s = lower_packed_const(g, w, cuvil_f32_conv2d_packed_floats(&p), key, &id, &fill))) break;
            if (fill) cuvil_f32_conv2d_pack(&p, w->data, cir_val(g, id)->data, NULL);
            n->low.packed = id;
            if (tap_major) snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ", weights tap-major");
        }
        if (!(n->low.note = cuvil_arena_strdup(&g->arena, algo))) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    cuvil_free(last);
    if (!s) cir_graph_count_uses(g);
    return s;
}
