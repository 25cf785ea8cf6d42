/* pass_lower.c -- the lowering stage: for each node whose op has a lowering here, the kernel and
 * algorithm for the target and the (fixed) shapes are chosen and recorded on the node
 * (n->algo, shown by --emit ir), and constants the kernel wants in its own layout (prepacked
 * weights) are made now, so that nothing is repacked when the model runs. Ops without one have
 * one kernel and nothing to prepare. */
#include "passes/passes_int.h"
#include "codegen/toolchain_int.h"

#include <math.h>
#include <string.h>

/* With symbolic dims (or sizes the run finds) a conv's kernel is chosen as for fixed shapes,
 * at the dims' upper bounds (op_conv_params): Winograd, the direct and swapped GEMMs and
 * channels last take any size when the model runs (their packed weights depend on the
 * channels and the kernel's size only; the emitter passes the run's sizes and reserves the
 * scratch of the largest). The fused inverted-residual block's parameters are fixed numbers:
 * not with symbolic dims. */
static bool fixed_only(const cir_graph *g) { return g->symdims; }

/* What every lowering reads: the target, and the map sizes at which some conv runs as
 * Winograd with tiles as rows (collected before any is lowered). */
#define WINO_T_SIZES 8
typedef struct lower_ctx {
    const cuvil_target_info *t;
    int n_wino_t;
    int64_t wino_t_hw[WINO_T_SIZES][2];
    /* the bytes of the constant weights of the nodes still to lower after this one: room the
     * packed weights keep for them, packed as they are, when a conv would take Winograd's */
    const uint64_t *rest;
} lower_ctx;

typedef cuvil_status (*lower_fn)(cir_graph *g, cir_node *n, const lower_ctx *c);

/* A float32 constant of nf elements for n's weights w in a kernel's layout ("<w>.packed"),
 * counted with the model's own constants against limits.total_bytes (cir_const_add). key:
 * everything besides w's bytes that the layout depends on. Its id in *id. When this graph
 * already packed w with the same key and size (one weight read by many nodes: a shared
 * embedding, a weight-tied layer), that constant is returned and *fill is false: a weight is
 * packed once per layout, not once per reader (a 1 MiB weight read by 400 MatMuls was packed
 * 400 times). Otherwise the caller fills the zeroed data. */
static cuvil_status packed_const(cir_graph *g, const cir_value *w, size_t nf, const char *key, int *id, bool *fill) {
    /* the key text names the layout exactly (no hash collision can share two layouts) */
    char ikey[1024];
    if ((size_t)snprintf(ikey, sizeof ikey, "%d|%zu|%s", w->id, nf, key) >= sizeof ikey)
        return cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "lowering: a packing key of %zu bytes", strlen(key));
    int have = cuvil_map_get(&g->pack_index, ikey);
    if (have >= 0) {
        *id = have;
        *fill = false;
        return CUVIL_OK;
    }
    const uint64_t nb = (uint64_t)nf * sizeof(float);
    if (nb > g->packed_budget || g->packed_bytes > g->packed_budget - nb)
        return cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                         "weight '%s' in the layout of one more kernel (%llu bytes) brings the weights packed for the "
                         "kernels over the limit packed_bytes=%llu (by default twice the model's constants plus 64 MiB; "
                         "raise it with --limit packed_bytes=N)", w->name, (unsigned long long)nb,
                         (unsigned long long)g->packed_budget);
    g->packed_bytes += nb;
    char name[600];
    snprintf(name, sizeof name, "%.500s.packed", w->name);
    int64_t dims = (int64_t)nf;
    *fill = true;
    *id = cir_const_add(g, name, CIR_F32, 1, &dims, NULL);
    if (*id < 0) return g->ctx->status;
    const char *k = cuvil_arena_strdup(&g->arena, ikey);
    if (!k || !cuvil_map_put(&g->pack_index, k, *id)) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    return CUVIL_OK;
}

/* Conv n's parameters as its kernel is chosen and its weights packed. With symbolic dims (or
 * sizes the run finds) its sizes are those at a point inside the symbols' ranges, each at the
 * geometric mean of its ends (H=32:1024: 181, batch 1:8: 3), rather than at the upper bounds
 * op_conv_params gives: Winograd's tiles as rows and F(2x2), the best for a small map, would
 * never be taken at a range's top, nor F(4x4) at its bottom. Every kernel runs at every size
 * (the emitter passes the run's sizes and reserves the scratch of the largest); only the
 * speed depends on this point. */
static cuvil_status conv_choice_params(cir_graph *g, cir_node *n, cuvil_conv2d_params *p) {
    cuvil_status s = op_conv_params(g, n, false, p);
    if (s || !g->symdims) return s;
    op_geo_x x;
    if ((s = op_conv_x(g, n, &x))) return s;
    int ns = g->dt.n_syms;
    int64_t *vals = cuvil_malloc(sizeof(int64_t) * ((size_t)ns + 1));
    if (!vals) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < ns; k++) {
        int64_t lo = g->dt.syms[k].lo > 1 ? g->dt.syms[k].lo : 1, hi = g->dt.syms[k].hi > lo ? g->dt.syms[k].hi : lo;
        int64_t m = (int64_t)sqrt((double)lo * (double)hi);
        vals[k] = m < lo ? lo : m > hi ? hi : m;
    }
    const cir_dim *f[7] = {x.N, x.H, x.W, x.OH, x.OW, x.pad_t, x.pad_l};
    int64_t v[7];
    bool ok = true;
    for (int i = 0; i < 7 && ok; i++) ok = cir_dim_eval(f[i], vals, ns, &v[i]);
    cuvil_free(vals);
    if (ok && v[0] > 0 && v[3] > 0 && v[4] > 0) {
        p->N = v[0], p->H = v[1], p->W = v[2], p->OH = v[3], p->OW = v[4], p->pad_t = v[5], p->pad_l = v[6];
    }
    return CUVIL_OK;
}

/* Node n leaves its packed weights for another layout: where no other node reads them, their
 * bytes no longer count against limits.packed_bytes (the generated code holds only the
 * constants it reads). */
static void release_pack(cir_graph *g, cir_node *n) {
    if (n->packed < 0) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const cir_node *o = cir_node_at(g, i);
        if (o != n && !o->dead && o->packed == n->packed) return;
    }
    const uint64_t nb = cir_nbytes(cir_val(g, n->packed));
    g->packed_bytes -= nb < g->packed_bytes ? nb : g->packed_bytes;
    n->packed = -1;
}

/* Whether nf more packed floats and `keep` bytes after them stay within limits.packed_bytes
 * (packed_const's check). */
static bool pack_fits(const cir_graph *g, size_t nf, uint64_t keep) {
    const uint64_t nb = (uint64_t)nf * sizeof(float);
    return nb <= g->packed_budget && keep <= g->packed_budget - nb && g->packed_bytes <= g->packed_budget - nb - keep;
}

/* The key of packed_const for a conv's weights: the fields of p the packing reads (and the
 * map's size, which picks some of them; not the batch). */
static void conv_pack_key(const cuvil_conv2d_params *p, char *key, size_t n) {
    snprintf(key, n, "conv C%lld M%lld g%lld k%lldx%lld s%lldx%lld d%lldx%lld p%lld,%lld H%lldx%lld O%lldx%lld "
             "a%lld l%lld mr%lld kc%lld", (long long)p->C, (long long)p->M, (long long)p->group, (long long)p->KH,
             (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w, (long long)p->dil_h,
             (long long)p->dil_w, (long long)p->pad_t, (long long)p->pad_l, (long long)p->H, (long long)p->W,
             (long long)p->OH, (long long)p->OW, (long long)p->algo, (long long)p->layout, (long long)p->packed_mr,
             (long long)p->packed_kc);
}

#ifndef WINO2_MIN_CHANNELS
#define WINO2_MIN_CHANNELS 64
#endif

/* Winograd F(4x4,3x3) does a quarter of the multiplies of the GEMM paths, but its transforms
 * cost O(C + M) per 4x4 tile and its transformed weights are 4x larger (36 / 9): it pays where
 * there are enough tiles to amortise the weights and enough channels to amortise the
 * transforms. Measured on ResNet-18's layers (bench/profile_layers.py, one thread, AMD EPYC):
 * 56x56 x 64 2.59 -> 1.38 ms, 28x28 x 128 2.47 -> 1.24 ms, 14x14 x 256 (16 tiles) 2.55 ->
 * 1.94 ms, but 7x7 x 512 (4 tiles of which 43% padding, 37 MB of weights) 3.0 -> 6.8 ms. */
static bool winograd_pays(const cuvil_conv2d_params *p) {
    const int64_t tiles = p->N * ((p->OH + 3) / 4) * ((p->OW + 3) / 4);
    return cuvil_conv2d_winograd_applies(p) && tiles >= 16 && p->C >= 16 && p->M >= 16;
}

/* The share of the microkernel's work that is not padding, for rows x cols in MR x NR tiles. */
static double tile_fill(int64_t rows, int64_t cols, int mr, int nr) {
    return (double)rows / (double)((rows + mr - 1) / mr * mr) * (double)cols / (double)((cols + nr - 1) / nr * nr);
}

/* Few output pixels (a 7x7 map: 49, two 32-wide tiles of which 23% padding) fill the
 * microkernel's MR rows better than its NR columns: swap the operands where that wastes 5%
 * less (channels as columns, pixels as rows). Not for an im2col of a short K (the taps of a
 * few channels): its swapped GEMM packs the pixels' rows and transposes the output after, which
 * a short product does not pay for (bench/conv_sweep.py, AVX2, 1 -> 32 3x3 at 28x28, K = 9: 0.039
 * -> 0.069 ms swapped). A 1x1 conv reads its input in place either way. */
#define SWAP_MIN_K 32
static bool swapped_fits_better(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    const int64_t px = p->OH * p->OW, ch = p->M / p->group;
    const bool short_im2col = p->KH * p->KW > 1 && p->C / p->group * p->KH * p->KW < SWAP_MIN_K;
    return !short_im2col && tile_fill(px, ch, t->mr, t->nr) > 1.05 * tile_fill(ch, px, t->mr, t->nr);
}

/* Does a conv (params p, constant weights: packed) run as Winograd? */
static bool runs_winograd(const cir_graph *g, bool packed, const cuvil_conv2d_params *p) {
    return packed && g->opt_level >= 2 && winograd_pays(p);
}

/* Where 4x4 tiles are too few (7x7: 4, 43% padding, 37 MB of weights at 512 channels),
 * Winograd F(2x2,3x3) with tiles as rows: 16 tiles at 7x7 (8x8 pixels), 2.25x fewer multiplies
 * than the GEMM on 1.78x the weights. */
static bool runs_winograd2(const cir_graph *g, bool packed, const cuvil_conv2d_params *p) {
    const int64_t tiles = ((p->OH + 1) / 2) * ((p->OW + 1) / 2);
    return packed && g->opt_level >= 2 && cuvil_conv2d_winograd_applies(p) && !winograd_pays(p) &&
           tiles >= 16 && tiles <= 64 && p->C >= WINO2_MIN_CHANNELS && p->M >= WINO2_MIN_CHANNELS;
}

/* Few tiles (14x14: 16 of 32 columns) fill the rows of Winograd's 36 GEMMs better (8 of 8)
 * than their columns, the tiles' usual place. */
static bool wino_t_shape(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    const int64_t tiles = ((p->OH + 3) / 4) * ((p->OW + 3) / 4);
    return tiles <= 64 && tile_fill(tiles, p->M, t->mr, t->nr) > 1.05 * tile_fill(p->M, tiles, t->mr, t->nr);
}

/* A 1x1 conv beside a depthwise conv on a map of up to 28x28 runs as the pixels-as-rows GEMM
 * too, whatever the tiles' fill, so that the tensor between them can be channels last (the
 * layout pass below), where the depthwise conv runs fastest. On MobileNetV2's 28x28 blocks
 * (profile_layers, one thread) the depthwise convs went 0.079 -> 0.057 ms each and 192 x
 * 28->14 0.041 -> 0.020, the GEMMs within 0.005. (At 56x56 the depthwise convs gained 0.1 ms
 * and the GEMMs lost as much, and the projection left the 112x112 block's fused kernel.) */
#define SWAP_NEAR_DW_MAX_PIXELS (28 * 28)

/* Likewise the 1x1 convs (and strided 1x1 shortcuts) on a map where the 3x3 convs run as
 * Winograd with tiles as rows (ResNets' 28x28 and 14x14 stages): all of a stage's tensors
 * can then be channels last, the Winograd transforms reading and writing them so. */
#define SWAP_NEAR_WINO_T_MAX_PIXELS (28 * 28)

/* Is n a depthwise conv (one input channel per group, as many groups as channels)? */
static bool is_depthwise_conv(cir_graph *g, const cir_node *n) {
    if (n->dead || n->kind != CIR_OP_CONV) return false;
    const cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1);
    return x && w && x->ndim == 4 && w->ndim == 4 && w->dims[1] == 1 && x->dims[1] > 1 && w->dims[0] == x->dims[1];
}

/* Is conv n's input made by a depthwise conv, or its output's one use a depthwise conv? */
static bool next_to_depthwise(cir_graph *g, const cir_node *n) {
    const cir_value *x = cir_in(g, n, 0), *y = cir_val(g, n->out[0]);
    if (x->producer >= 0 && is_depthwise_conv(g, cir_node_at(g, x->producer))) return true;
    if (y->n_uses != 1) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *c = cir_node_at(g, i);
        if (!c->dead && c->n_in > 0 && c->in[0] == y->id) return is_depthwise_conv(g, c);
    }
    return false;
}

/* The direct convolution (taps read in place from the input's four phases, no im2col
 * packing) measured faster than im2col+gemm for 3x3 stride-2 convs with enough channels
 * (one thread / two, alone: ResNet-50's layer2.0 conv2, 128 x 56x56 -> 28x28, 2.43 -> 2.31 /
 * 1.47 -> 1.29 ms), but not for a stem's few input channels (MobileNetV2's 3 -> 32, K = 27:
 * 0.304 -> 0.319 ms; ResNet's 7x7, K = 147: faster alone, 2.51 -> 2.80 ms in the model), nor
 * is it needed at stride 1 where Winograd takes the 3x3 convs. For a 1x1 stride-1 conv it
 * reads the input itself (no copy): with few output channels the GEMM path's packing of the
 * input costs as much as the product. In MobileNetV2 (one thread): 144 -> 24 at 56x56 with
 * the residual 0.307 -> 0.222 ms, 144/192 -> 32 at 28x28 -0.005 each; but 32 -> 16 at
 * 112x112 0.211 -> 0.291, hence C >= 128. (ResNet-50's 256 -> 64 at 56x56: 1.048 -> 1.031
 * alone, the whole model within noise: left to the GEMM.) */
static bool direct_pays(const cuvil_conv2d_params *p) {
    if (!cuvil_conv2d_direct_applies(p)) return false;
    if (p->KH * p->KW == 1 && p->stride_h == 1) return p->M <= 32 && p->C >= 128;
    return p->stride_h == 2 && p->KH * p->KW > 1 && p->C * p->KH * p->KW >= 256;
}

/* The direct convolution on a channels-last copy of the input (CUVIL_CONV_DIRECT_T) where the
 * one on channels-first phases would run (direct_pays: the strided convs of several taps),
 * whose output can then be channels last too. Each conv alone (cuvil_f32_conv2d_prepacked,
 * medians of 40), one thread / two: ResNet-50's layer2.0 conv2, 128 x 56x56 -> 28x28, 2.46 ->
 * 2.33 / 1.39 -> 1.24 ms; ResNet-18's layer2.0 conv1, 64 -> 128, 1.25 -> 1.15 / 0.75 -> 0.64;
 * in ResNet-18 on two threads its 28x28 stage is then channels last throughout (layer2.0
 * conv2, Winograd with tiles as rows, 0.71 -> 0.53 ms). Against the pixels-as-rows GEMM on a channels-last input it measured even
 * (ResNet-50's layer3.0 and layer4.0 conv2, within 3% either way), and on a stem (3 -> 64,
 * 7x7, K 147 in segments of 21) slower: those keep their GEMMs. Measured on AVX2 and AVX-512
 * only (NR 16 and 32): the portable targets keep the channels-first one. */
static bool direct_t_pays(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return cuvil_conv2d_direct_t_applies(p) && p->KH * p->KW > 1 && direct_pays(p) && t->nr >= 16;
}

/* A projection (a 1x1 stride-1 conv to at most half as many channels) with a channels-last x
 * runs as the direct convolution, which reads x's pixels in place, rather than the
 * pixels-as-rows GEMM, which packs them. Each conv alone (cuvil_f32_conv2d_prepacked, medians
 * of 200-300, one thread / two). With the target's kc, AVX-512: 192 -> 32 at 28x28 14% / 16%
 * faster, 384 -> 64 at 14x14 5% / 6%, 576 -> 160 at 7x7 2-4% / 15%, 512 -> 128 at 28x28 4% /
 * 3%, but not with more outputs (960 -> 320 at 7x7 -2% / +0.5%, 2048 -> 512 -3%); AVX2 192 ->
 * 32 12% faster: there, at most 5 tiles of NR. On AVX-512 the weights are packed in one K block
 * (below), and then the larger ones gain too: 1024 -> 256 at 14x14 1.11-1.16 -> 1.03-1.05 ms /
 * 0.61-0.65 -> 0.51, 2048 -> 512 at 7x7 1.20-1.25 -> 1.03-1.20 / 0.79-0.82 -> 0.49-0.59, 960 ->
 * 320 at 7x7 0.30 -> 0.28 / 0.225 -> 0.153. Not expansions (32 -> 64 at 28x28 6% / 16% slower,
 * 24 -> 144 at 56x56 19%, 256 -> 1024 at 14x14 +7% / -8%): with few input channels a tile's
 * setup outweighs the packing. */
static bool direct_t_projection(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return cuvil_conv2d_direct_t_applies(p) && p->KH == 1 && p->KW == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_t == 0 && p->pad_l == 0 && p->OH == p->H && p->OW == p->W && t->nr >= 16 && p->C >= 2 * p->M &&
           (t->nr >= 32 || p->M <= 5 * t->nr);
}

/* Its weights in K blocks of up to this many channels (one block up to 1024) on targets of 32
 * columns (AVX-512), so that each tile's sums stay in registers over all of K: alone, one
 * thread / two, 576 -> 96 at 14x14 5% / 3-6% faster, 960 -> 160 at 7x7 7-9% / 9-11%, 512 -> 128
 * at 28x28 3-7% / 3-4% than with kc 192. (With 16 columns, AVX2, it measured even: 576 -> 64 5%
 * faster, 384 -> 64 4-8% slower.) */
#define DIRECT_T_WHOLE_K_MAX 1024

/* Is conv n's output map one of the sizes where Winograd runs with tiles as rows? */
static bool on_wino_t_map(const lower_ctx *c, const cuvil_conv2d_params *p) {
    for (int i = 0; i < c->n_wino_t; i++)
        if (c->wino_t_hw[i][0] == p->OH && c->wino_t_hw[i][1] == p->OW) return true;
    return false;
}

/* How the profile and --emit c describe a conv's algorithm. */
static const char *conv_algo_name(int64_t algo, bool pointwise, bool strided_pw) {
    switch (algo) {
    case CUVIL_CONV_WINOGRAD2_T: return "winograd F(2x2,3x3), tiles as rows";
    case CUVIL_CONV_WINOGRAD_T: return "winograd F(4x4,3x3), tiles as rows";
    case CUVIL_CONV_WINOGRAD: return "winograd F(4x4,3x3)";
    case CUVIL_CONV_DIRECT_T:
        return pointwise ? "1x1 direct on channels-last pixels read in place, pixels as rows"
                         : "direct on a channels-last padded copy, pixels as rows";
    case CUVIL_CONV_GEMM_T:
        return strided_pw ? "1x1 strided as gemm on a subsampled copy, pixels as rows" : "im2col+gemm, pixels as rows";
    case CUVIL_CONV_DIRECT: return pointwise ? "1x1 direct (input read in place)" : "direct (taps read in place from 4 phases)";
    default: return pointwise ? "1x1 as gemm" : strided_pw ? "1x1 strided as gemm on a subsampled copy" : "im2col+gemm";
    }
}

/* One input channel per group (C/group == 1: depthwise, and a conv of a single channel) runs
 * the depthwise loop, unless each input channel has outputs enough to fill the microkernel's
 * MR rows and either the loop cannot vectorise (a stride across other than the register-tiled
 * 3x3/5x5 ones) or there is one input channel only: then the GEMM (weights prepacked, K = the
 * taps), which packs each input once for all its outputs where the loop reads it once per
 * output, is faster, far faster with long kernels and strides. bench/conv_sweep.py, one
 * thread, depthwise loop -> GEMM path (AVX-512): a learned spectrogram (1 -> 257, k512 s160, 1 s
 * of audio) 4.2 -> 0.43 ms, 10 s 97 -> 3.9 ms (ONNX Runtime 3.6); wav2vec2's first conv (1 ->
 * 512, k10 s5) 5.5 -> 0.64 ms; 1 -> 64 7x7 s2 at 112x112 2.6 -> 0.3 ms; 4 -> 256 (x64) 1x400
 * s160 3.2 -> 0.5 ms; 1 -> 32 3x3 at 28x28, AVX2 0.054 -> 0.039 ms (AVX-512: 0.020 -> 0.027, the
 * one that loses). With fewer outputs per channel the loop wins (16 -> 64 (x4) 1x9 s4, AVX2:
 * 0.13 against 0.34 ms), and so it does for depthwise convs where it vectorises (8 -> 128
 * (x16) 3x3 at 28x28 0.036 against 0.077 ms; a 31-tap 1-D depthwise conv 0.37 against 2.7). */
static bool dw_runs_gemm(const cuvil_conv2d_params *p, bool packed, const cuvil_target_info *t) {
    return packed && p->C / p->group == 1 && p->M / p->group >= t->mr &&
           (p->group == 1 || !cuvil_conv2d_dw_vectorized(p));
}

/* Strides across of 3 or more have no fast im2col packing (stride 2 has its phases): each
 * element is gathered. The direct convolution on a channels-last copy reads the taps in place
 * instead, where a kernel row's KW x C floats (contiguous in the copy) are enough to stream:
 * bench/conv_sweep.py, one thread, GEMM or pixels-as-rows GEMM -> direct: AlexNet's 11x11 s4 3
 * -> 64 at 224 (33 floats a row), AVX2 7.7 -> 2.0 ms, AVX-512 2.9 -> 2.0; a ViT's 16x16 s16
 * patches 3 -> 192 (48) 1.24 -> 0.78 ms; a spectrogram's 512 taps s160 0.43 -> 0.31 ms. Short rows
 * lose: 4x4 s4 patches of 3 channels (12 floats) 0.44 -> 0.56 ms, wav2vec2's k10 s5 on one
 * channel 0.6 -> 1.9 ms. */
#define DIRECT_T_MIN_ROW 32
static bool direct_t_strided(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return cuvil_conv2d_direct_t_applies(p) && p->KH * p->KW > 1 && p->stride_w >= 3 && p->KW * p->C >= DIRECT_T_MIN_ROW &&
           t->nr >= 16;
}

/* Depthwise convolutions (see dw_runs_gemm) run the direct loop; the others run as GEMMs (1x1
 * stride-1 ones straight on the input, the rest through im2col packing), and their constant
 * weights are packed now into the panels the target's microkernel reads. */
static cuvil_status lower_conv(cir_graph *g, cir_node *n, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    cuvil_conv2d_params p;
    cuvil_status s = conv_choice_params(g, n, &p);
    if (s) return s;
    cir_value *w = cir_in(g, n, 1);
    char algo[160];
    const bool packed = g->opt_level >= 1 && cir_is_const(w);
    /* (Winograd takes only stride 1: never with strided_t) */
    const bool strided_t = packed && g->opt_level >= 2 && direct_t_strided(&p, t);
    /* a single input channel with a gathering stride and long kernel rows: the direct
     * convolution, as for more channels (conv_sweep.py: 1 -> 4, k400 s160, AVX2 0.034 -> 0.021 ms) */
    bool depthwise = p.C / p.group == 1 && !dw_runs_gemm(&p, packed, t) && !strided_t;
    bool pointwise = p.KH == 1 && p.KW == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_t == 0 && p.pad_l == 0 &&
                     p.OH == p.H && p.OW == p.W;
    bool strided_pw = cuvil_conv2d_strided_pointwise(&p);
    if (depthwise) {
        snprintf(algo, sizeof algo, "direct depthwise%s", (p.KH == 3 || p.KH == 5) && p.KH == p.KW ? " (register-tiled)" : "");
    } else {
        /* Winograd's transformed weights are 1.8x (F(2x2)) to 4x (F(4x4)) the GEMM's: where they
         * would bring the packed weights over limits.packed_bytes (ResNet-18's last stage at batch
         * 8), the conv takes a kernel on weights packed as they are */
        bool allow_wino = true;
    choose:;
        bool wino2 = allow_wino && runs_winograd2(g, packed, &p);
        bool wino = (allow_wino && runs_winograd(g, packed, &p)) || wino2;
        /* the swapped GEMMs run group by group with a transpose each: one group only (grouped
         * convs, conv_sweep.py: 64 -> 64 g4 3x3 s2 at 56x56, AVX2, 0.34 -> 0.74 ms swapped) */
        bool swap = packed && !wino && !strided_t && p.group == 1 &&
                    (swapped_fits_better(&p, t) ||
                     (g->opt_level >= 2 && pointwise && p.group == 1 && p.OH * p.OW <= SWAP_NEAR_DW_MAX_PIXELS &&
                      next_to_depthwise(g, n)) ||
                     (g->opt_level >= 2 && (pointwise || strided_pw) && p.group == 1 &&
                      p.OH * p.OW <= SWAP_NEAR_WINO_T_MAX_PIXELS && on_wino_t_map(c, &p)));
        bool wino_t = wino && !wino2 && wino_t_shape(&p, t);
        bool direct_t = strided_t || (packed && !wino && !swap && g->opt_level >= 2 && direct_t_pays(&p, t));
        bool direct = packed && !wino && !swap && !direct_t && direct_pays(&p);
        p.algo = wino2      ? CUVIL_CONV_WINOGRAD2_T
                 : wino_t   ? CUVIL_CONV_WINOGRAD_T
                 : wino     ? CUVIL_CONV_WINOGRAD
                 : direct_t ? CUVIL_CONV_DIRECT_T
                 : swap     ? CUVIL_CONV_GEMM_T
                 : direct   ? CUVIL_CONV_DIRECT
                            : 0;
        snprintf(algo, sizeof algo, "%s, gemm %dx%d kc=%lld", conv_algo_name(p.algo, pointwise, strided_pw), t->mr, t->nr,
                 (long long)t->kc);
        if (packed) {
            /* the swapped GEMMs pack the weights as their B */
            p.packed_mr = cuvil_conv2d_algo_packs_b(p.algo) ? t->nr : t->mr;
            p.packed_kc = t->kc;
            if (wino && !pack_fits(g, cuvil_f32_conv2d_packed_floats(&p), *c->rest)) {
                allow_wino = false;
                goto choose;
            }
            int id;
            bool fill;
            char key[400];
            conv_pack_key(&p, key, sizeof key);
            if ((s = packed_const(g, w, cuvil_f32_conv2d_packed_floats(&p), key, &id, &fill))) return s;
            float *tmp = NULL;
            size_t nt = fill ? cuvil_f32_conv2d_pack_tmp_floats(&p) : 0;
            if (nt && !(tmp = cuvil_malloc(nt * sizeof(float))))
                return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory transforming weights");
            if (fill) cuvil_f32_conv2d_pack(&p, w->data, cir_val(g, id)->data, tmp);
            cuvil_free(tmp);
            n->packed = id;
            n->kernel_algo = (int)p.algo;
            snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ", weights %s",
                     wino ? "transformed and prepacked" : "prepacked");
        }
    }
    n->algo = cuvil_arena_strdup(&g->arena, algo);
    return n->algo ? CUVIL_OK : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
}

/* Gemm and MatMul run the blocked GEMM (a one-row product streams B); a constant B shared by
 * every batch item is packed now into the NR-column panels the target's microkernel reads. */
static cuvil_status lower_gemm(cir_graph *g, cir_node *n, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    cuvil_gemm_params p;
    int64_t nirr, *offs;
    cuvil_status s = op_gemm_params(g, n, &p, &nirr, &offs);
    if (s) return s;
    cuvil_free(offs);
    cir_value *b = cir_in(g, n, 1);
    char algo[160];
    snprintf(algo, sizeof algo, "gemm %dx%d kc=%lld", t->mr, t->nr, (long long)t->kc);
    if (g->opt_level >= 1 && cir_is_const(b) && b->dtype == CIR_F32 && !nirr && (p.batch <= 1 || p.b_bstride == 0) &&
        p.N > 0 && p.K > 0) {
        p.packed_nr = t->nr;
        p.packed_kc = t->kc;
        int id;
        bool fill;
        char key[160];
        snprintf(key, sizeof key, "gemm N%lld K%lld ldb%lld t%d nr%lld kc%lld", (long long)p.N, (long long)p.K,
                 (long long)p.ldb, p.trans_b, (long long)p.packed_nr, (long long)p.packed_kc);
        if ((s = packed_const(g, b, cuvil_f32_gemm_packed_b_floats(&p), key, &id, &fill))) return s;
        if (fill) cuvil_f32_gemm_pack_b(&p, b->data, cir_val(g, id)->data);
        n->packed = id;
        snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ", B prepacked");
    }
    n->algo = cuvil_arena_strdup(&g->arena, algo);
    return n->algo ? CUVIL_OK : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
}

/* ===== Inverted-residual blocks ========================================================== */
/* A block whose expanded tensor is at least this large runs as one kernel, band by band
 * (runtime/kernels/conv/mbblock.c), so that the tensor never makes the round trip through L3.
 * Measured on MobileNetV2 (bench/profile_layers.py, AMD EPYC Zen 4, 1 MB L2): its 112x112 block
 * (4.8 MB) 1.15 -> 0.88 ms on one thread, 0.54 -> 0.46-0.51 ms on two; the 56x56 and 28x28
 * blocks (1.8 and 0.6 MB) gained nothing or lost up to 0.03 ms (halo rows computed twice, GEMMs
 * on short bands), so they run layer by layer. */
#define MBBLOCK_MIN_BYTES (4 * 1024 * 1024)
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
    return n->dead || n->kind != CIR_OP_CONV || n->residual >= 0 || n->half != CIR_UNDEF ? NULL : n;
}

/* "Conv+Clip" for a node and what was fused into it. */
static const char *node_ops(const cir_node *n, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s", n->src_op, n->fused ? "+" : "", n->fused ? n->fused : "");
    return buf;
}

/* conv 1x1 -> depthwise conv -> conv 1x1 (+ residual), each with its activation, where the two
 * middle tensors have no other use: the last conv becomes an mbblock node that does all
 * three; the first two are dropped. */
static cuvil_status fuse_mbblocks(cir_graph *g, const cuvil_target_info *t) {
    if (fixed_only(g) || g->opt_level < 2) return CUVIL_OK;
    bool changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *P = cir_node_at(g, i);
        if (P->dead || P->kind != CIR_OP_CONV || P->packed < 0 || P->kernel_algo != 0 || P->half != CIR_UNDEF) continue;
        cir_node *D = sole_conv_producer(g, P->in[0]);
        if (!D || D->packed >= 0 || cir_in(g, D, 0)->dtype != CIR_F32) continue;
        cir_node *E = sole_conv_producer(g, D->in[0]);
        const size_t e_bytes = cir_nbytes(cir_in(g, D, 0));
        cuvil_mbblock_params mp;
        cuvil_status s;
        if ((s = op_conv_params(g, D, false, &mp.dw)) || (s = op_conv_params(g, P, false, &mp.pr))) return s;
        mp.pr.packed_mr = t->mr;
        mp.pr.packed_kc = t->kc;
        /* with the expand conv before it, or else the depthwise conv and the projection alone */
        bool with_ex = false;
        if (E && E->packed >= 0 && E->kernel_algo == 0 && e_bytes >= MBBLOCK_MIN_BYTES) {
            if ((s = op_conv_params(g, E, false, &mp.ex))) return s;
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
        in[1] = with_ex ? E->packed : -1;
        in[2] = with_ex && cir_in(g, E, 2) ? E->in[2] : -1;
        in[3] = D->in[1];
        in[4] = cir_in(g, D, 2) ? D->in[2] : -1;
        in[5] = P->packed;
        in[6] = cir_in(g, P, 2) ? P->in[2] : -1;
        in[7] = -1;
        P->kind = CIR_OP_MBBLOCK;
        P->def = cir_op_def(CIR_OP_MBBLOCK);
        P->in = in;
        P->n_in = 7;
        P->packed = -1;
        P->kernel_params = kp;
        P->algo = algo_s;
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

/* ===== Channels-last regions ============================================================
 * A pixels-as-rows GEMM (kernel_algo CUVIL_CONV_GEMM_T: 14x14 and 7x7 maps, and 1x1 convs
 * beside a depthwise conv up to 28x28) computes its output as [pixel][channel] and
 * transposed it into NCHW, and a depthwise conv between two of them transposed 8 channels at
 * a time into a tile and back. A tensor whose producer and consumers can all take it
 * channels last (cuvil_conv2d_layout_ok: the pixels-as-rows GEMM writes it and reads it as a
 * 1x1 conv's input, the depthwise conv reads and writes it, a GEMM adds it as its residual,
 * a global pool reads it, Winograd with tiles as rows reads and writes it) is kept so, with no
 * transposes; the others, and the graph's outputs, stay NCHW. */

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
    if (conv_choice_params(g, n, &p)) return false;
    const bool depthwise = is_depthwise_conv(g, n);
    if (depthwise && (n->packed >= 0 || !cir_is_const(cir_in(g, n, 1)))) return false;
    p.algo = n->kernel_algo;
    p.packed_mr = n->packed >= 0 || depthwise ? 1 : 0;
    p.layout = depthwise ? CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC : layout;
    return cuvil_conv2d_layout_ok(&p) != 0;
}

static cuvil_status assign_layouts(cir_graph *g, const cuvil_target_info *t) {
    if (g->opt_level < 2) return CUVIL_OK;
    bool *last = cuvil_calloc((size_t)g->n_values + 1, sizeof *last); /* value v channels last */
    if (!last) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    /* what a conv can write, 4-D and not a graph output */
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (!layout_ok(g, n, CUVIL_CONV_Y_NHWC)) continue;
        const cir_value *v = cir_val(g, n->out[0]);
        last[v->id] = v->kind == CIR_VAL_ACT && v->ndim == 4 && v->output_index < 0;
    }
    /* that every use can read */
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && !(j == 0 && layout_ok(g, n, CUVIL_CONV_X_NHWC))) last[n->in[j]] = false;
        if (n->residual >= 0 && !layout_ok(g, n, CUVIL_CONV_Y_NHWC)) last[n->residual] = false;
        if (n->packed >= 0) last[n->packed] = false;
    }
    /* the depthwise conv's input and output, a residual and the output it is added to: both
     * channels last or neither */
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            cir_node *n = cir_node_at(g, i);
            if (n->dead || n->kind != CIR_OP_CONV) continue;
            const int x = n->in[0], y = n->out[0];
            int pairs[2][2] = {{is_depthwise_conv(g, n) ? x : -1, y}, {n->residual, y}};
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
            n->layout = CUVIL_POOL_X_NHWC;
            if (!(n->algo = cuvil_arena_strdup(&g->arena, "channels last in"))) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
            continue;
        }
        if (n->kind != CIR_OP_CONV) continue;
        const int layout = (last[n->in[0]] ? CUVIL_CONV_X_NHWC : 0) | (last[n->out[0]] ? CUVIL_CONV_Y_NHWC : 0);
        if (!layout) continue;
        cuvil_conv2d_params p;
        if ((s = conv_choice_params(g, n, &p))) break;
        n->layout = layout;
        const char *base = n->algo ? n->algo : "";
        char algo[CIR_ALGO_MAX], direct[CIR_ALGO_MAX];
        bool repack = false; /* the weights packed again, for another K blocking */
        if (n->kernel_algo == CUVIL_CONV_GEMM_T && (layout & CUVIL_CONV_X_NHWC) && direct_t_projection(&p, t)) {
            /* the same packed weights (a 1x1 conv's are the same tap-major or not), but for
             * their K blocking: repacked below where that changes */
            n->kernel_algo = CUVIL_CONV_DIRECT_T;
            if (t->nr >= 32 && p.C > t->kc) {
                n->kernel_kc = p.C < DIRECT_T_WHOLE_K_MAX ? p.C : DIRECT_T_WHOLE_K_MAX;
                repack = true;
            }
            snprintf(direct, sizeof direct, "%s, gemm %dx%d kc=%lld, weights prepacked",
                     conv_algo_name(CUVIL_CONV_DIRECT_T, true, false), t->mr, t->nr,
                     (long long)(n->kernel_kc ? n->kernel_kc : t->kc));
            base = direct;
        }
        snprintf(algo, sizeof algo, "%s, channels last %s", base,
                 layout == CUVIL_CONV_X_NHWC ? "in" : layout == CUVIL_CONV_Y_NHWC ? "out" : "in and out");
        /* the weights tap-major: the depthwise conv's (a tap's weights for a vector of
         * channels), and a GEMM's of several taps reading channels last (K = tap C + c, the
         * order its im2col of that input comes in); the weights packed before are left unused
         * (the generated code holds only the constants it reads) */
        const bool dw = is_depthwise_conv(g, n);
        p.layout = layout;
        p.algo = n->kernel_algo;
        p.packed_mr = dw ? t->mr : t->nr;
        p.packed_kc = n->kernel_kc ? n->kernel_kc : t->kc;
        const bool tap_major = cuvil_conv2d_packed_tap_major(&p);
        if (tap_major || repack) {
            int id;
            bool fill;
            char key[400];
            conv_pack_key(&p, key, sizeof key);
            cir_value *w = cir_in(g, n, 1);
            release_pack(g, n);   /* (what this node alone read no longer counts) */
            if ((s = packed_const(g, w, cuvil_f32_conv2d_packed_floats(&p), key, &id, &fill))) break;
            if (fill) cuvil_f32_conv2d_pack(&p, w->data, cir_val(g, id)->data, NULL);
            n->packed = id;
            if (tap_major) snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ", weights tap-major");
        }
        if (!(n->algo = cuvil_arena_strdup(&g->arena, algo))) s = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    cuvil_free(last);
    if (!s) cir_graph_count_uses(g);
    return s;
}

/* The lowering of each op kind that has more than one kernel or prepares constants. */
static const lower_fn lowerings[CIR_OP__COUNT] = {
    [CIR_OP_CONV] = lower_conv,
    [CIR_OP_GEMM] = lower_gemm,
    [CIR_OP_MATMUL] = lower_gemm,
};

cuvil_status cuvil_pass_lower(cir_graph *g, const cuvil_options *o) {
    (void)o;
    const cuvil_target_info *t = cuvil_target_find(g->target ? g->target : cuvil_host_target());
    if (!t) return cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "lowering: unknown target '%s'", g->target ? g->target : "?");
    uint64_t rest = 0;
    lower_ctx c = {t, 0, {{0}}, &rest};
    g->packed_bytes = 0;
    g->packed_budget = g->limits.packed_bytes ? g->limits.packed_bytes
                       : g->const_bytes > (UINT64_MAX - ((uint64_t)64 << 20)) / 2 ? UINT64_MAX
                                                                               : 2 * g->const_bytes + ((uint64_t)64 << 20);
    /* the maps of the convs that will run as Winograd with tiles as rows (lower_conv's test) */
    for (int i = 0; i < g->n_nodes && c.n_wino_t < WINO_T_SIZES; i++) {
        cir_node *n = cir_node_at(g, i);
        cuvil_conv2d_params p;
        if (n->dead || n->kind != CIR_OP_CONV || n->half != CIR_UNDEF || !cir_is_const(cir_in(g, n, 1)) ||
            conv_choice_params(g, n, &p) || !runs_winograd(g, g->opt_level >= 1, &p) || !wino_t_shape(&p, t) ||
            on_wino_t_map(&c, &p))
            continue;
        c.wino_t_hw[c.n_wino_t][0] = p.OH;
        c.wino_t_hw[c.n_wino_t][1] = p.OW;
        c.n_wino_t++;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        const cir_value *w = n->dead || !lowerings[n->kind] ? NULL : cir_in(g, n, 1);
        if (w && cir_is_const(w)) rest += cir_nbytes(w);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead || !lowerings[n->kind]) continue;
        const cir_value *w = cir_in(g, n, 1);
        if (w && cir_is_const(w)) rest -= cir_nbytes(w) < rest ? cir_nbytes(w) : rest;
        cuvil_status s = lowerings[n->kind](g, n, &c);
        if (s) return s;
    }
    if (cuvil_has_runtime_if(g)) return CUVIL_OK;   /* block fusion and layouts move work across nodes: not into or out of a branch */
    cuvil_status s = fuse_mbblocks(g, t);
    return s ? s : assign_layouts(g, t);
}
