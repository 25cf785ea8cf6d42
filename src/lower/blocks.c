/* blocks.c -- the lowering's block fusion: a 1x1 conv, a depthwise conv and a 1x1 conv (an
 * inverted-residual block) as one kernel that runs band by band. */
#include "lower/lower_int.h"

#include <string.h>

/* With symbolic dims a block is fused as for fixed shapes, decided at the choice point of
 * lower_conv_params; its emitter gives the kernel the run's sizes (the block's input and
 * output dims), so the depthwise conv's padding must be numbers (not SAME over a symbol). */
static bool pads_fixed(cir_graph *g, cir_node *d) {
    op_geo_x x;
    return !g->symdims || (!op_conv_kx(g, d, &x) && cir_dim_is_const(x.pad_t) && cir_dim_is_const(x.pad_l));
}

/* ===== Inverted-residual blocks ========================================================== */
/* A block whose expanded tensor is at least this large runs as one kernel, band by band
 * (runtime/kernels/conv/mbblock.c), so that the tensor never makes the round trip through L3.
 * Measured on MobileNetV2 (bench/profile_layers.py, AMD EPYC Zen 4, 1 MB L2): its 112x112 block
 * (4.8 MB) 1.15 -> 0.88 ms on one thread, 0.54 -> 0.46-0.51 ms on two; the 56x56 and 28x28
 * blocks (1.8 and 0.6 MB) gained nothing or lost up to 0.03 ms (halo rows computed twice, GEMMs
 * on short bands), so they run layer by layer. MobileNetV3-Large's 112x112 block (3.2 MB, 16 ->
 * 64 -> 24), Intel Xeon VM with 2 MB of L2, AVX2, one thread: 0.679 -> 0.630 ms; its 56x56 one
 * (0.9 MB) 0.354 -> 0.380, as MobileNetV2's; the model in alternating cuvil-run turns 0.1-1.7%
 * faster on both targets and thread counts (within this VM's noise). */
#define MBBLOCK_MIN_BYTES (2 * 1024 * 1024)
/* Without an expand conv (MobileNetV2's first block: depthwise 32 x 112x112, 1.6 MB, then
 * 32 -> 16), where the depthwise conv's input is at least this large: the two convs 0.416 ->
 * 0.361 ms, the model 7.78 -> 7.67 ms on one thread (medians of 30 alternating processes; two
 * threads unchanged, 4.29). */
#define MBBLOCK_DP_MIN_BYTES (1024 * 1024)

/* The conv that alone produces value v for one consumer, or NULL. */
static cir_node *sole_conv_producer(cir_graph *g, int v) {
    if (v < 0) return NULL;
    cir_value *val = cir_val(g, v);
    if (val->kind != CIR_VAL_ACT || val->producer < 0 || val->n_uses != 1 || val->output_index >= 0) return NULL;
    cir_node *n = cir_node_at(g, val->producer);
    bool act_only = !n->n_post || (n->n_post == 1 && n->post[0].kind == CIR_POST_ACT);   /* no addition */
    return n->dead || n->kind != CIR_OP_CONV || !act_only || n->half != CIR_UNDEF ? NULL : n;
}

/* "Conv+Clip" for a node and what was fused into it. */
static const char *node_ops(const cir_node *n, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s", n->src_op, n->fused ? "+" : "", n->fused ? n->fused : "");
    return buf;
}

/* conv 1x1 -> depthwise conv -> conv 1x1 (+ residual), each with its activation, where the two
 * middle tensors have no other use: the last conv becomes an mbblock node that does all
 * three; the first two are dropped. */
cuvil_status lower_fuse_blocks(cir_graph *g, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    if (g->opt_level < 2) return CUVIL_OK;
    bool changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *P = cir_node_at(g, i);
        if (P->dead || P->kind != CIR_OP_CONV || P->low.packed < 0 || P->low.algo != 0 || P->half != CIR_UNDEF ||
            !cir_post_kernel_form(P))
            continue;
        cir_node *D = sole_conv_producer(g, P->in[0]);
        if (!D || D->low.packed >= 0 || cir_in(g, D, 0)->dtype != CIR_F32 || D->region != P->region) continue;
        cir_node *E = sole_conv_producer(g, D->in[0]);   /* (a block's convs: one region, passes_int.h) */
        if (E && E->region != P->region) E = NULL;
        /* a conv one pixel wide has H and W swapped in its kernel view (op_conv_params), where
         * the block's emitter gives the kernel the model's axes: none in a block (a depthwise
         * conv of a block is 3x3 or 5x5, never one pixel wide, so none is lost) */
        if (op_conv_swaps_hw(g, D) || op_conv_swaps_hw(g, P)) continue;
        if (E && op_conv_swaps_hw(g, E)) E = NULL;
        cuvil_mbblock_params mp;
        cuvil_status s;
        if ((s = lower_conv_params(g, D, &mp.dw)) || (s = lower_conv_params(g, P, &mp.pr))) return s;
        if (!pads_fixed(g, D)) continue;
        /* the depthwise conv's input, at the sizes the choice is made at */
        const size_t e_bytes = (size_t)(mp.dw.N * mp.dw.C * mp.dw.H * mp.dw.W) * sizeof(float);
        mp.pr.packed_mr = t->mr;
        mp.pr.packed_kc = t->kc;
        /* with the expand conv before it, or else the depthwise conv and the projection alone */
        bool with_ex = false;
        if (E && E->low.packed >= 0 && E->low.algo == 0 && e_bytes >= MBBLOCK_MIN_BYTES) {
            if ((s = lower_conv_params(g, E, &mp.ex))) return s;
            mp.ex.packed_mr = t->mr;
            mp.ex.packed_kc = t->kc;
            with_ex = cuvil_mbblock_applies(&mp);
        }
        if (!with_ex) {
            memset(&mp.ex, 0, sizeof mp.ex);
            if (e_bytes < MBBLOCK_DP_MIN_BYTES || !cuvil_mbblock_applies(&mp)) continue;
        }
        cuvil_mbblock_params *kp = cuvil_arena_alloc(&g->arena, sizeof *kp);
        int *in = cuvil_arena_alloc(&g->arena, sizeof(int) * 8);
        char a[3][200], algo[300], fused[640];
        snprintf(algo, sizeof algo,
                 "%sdepthwise %lldx%lld s%lld -> project 1x1 in bands of rows, gemm %dx%d kc=%lld, weights prepacked",
                 with_ex ? "expand 1x1 -> " : "", (long long)mp.dw.KH, (long long)mp.dw.KW, (long long)mp.dw.stride_h,
                 t->mr, t->nr, (long long)t->kc);
        snprintf(fused, sizeof fused, "%s%s%s | %s", with_ex ? node_ops(E, a[0], sizeof a[0]) : "", with_ex ? " | " : "",
                 node_ops(D, a[1], sizeof a[1]), node_ops(P, a[2], sizeof a[2]));
        const char *algo_s = cuvil_arena_strdup(&g->arena, algo), *fused_s = cuvil_arena_strdup(&g->arena, fused);
        if (!kp || !in || !algo_s || !fused_s) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        *kp = mp;
        in[0] = with_ex ? E->in[0] : D->in[0];
        in[1] = with_ex ? E->low.packed : -1;
        in[2] = with_ex && cir_in(g, E, 2) ? E->in[2] : -1;
        in[3] = D->in[1];
        in[4] = cir_in(g, D, 2) ? D->in[2] : -1;
        in[5] = P->low.packed;
        in[6] = cir_in(g, P, 2) ? P->in[2] : -1;
        in[7] = -1;
        P->kind = CIR_OP_MBBLOCK;
        P->def = cir_op_def(CIR_OP_MBBLOCK);
        P->in = in;
        P->n_in = 7;
        P->low.packed = -1;
        P->low.params = kp;
        P->low.note = algo_s;
        P->fused = fused_s;
        D->dead = true;
        if (with_ex) E->dead = true;
        changed = true;
    }
    if (changed) cir_graph_count_uses(g);
    return CUVIL_OK;
}

/* (Tried and not kept: ResNet's stem conv and its max pool as one kernel, the conv's rows
 * computed in bands of 512 KiB and pooled while in cache, the rows two bands share kept. The
 * fused node ran 2.77-2.79 ms against the pair's 2.90 / 2.72 (profile_layers, one thread),
 * and ResNet-18 ran 0.5 ms slower in alternating runs (27.07 -> 27.57 ms, 10 rounds): with
 * a 32 MB L3 the stem's 3.2 MB output never left cache, so there was no pass over memory to
 * save.) */
