/* conv.c -- the lowering's kernel selection for convolutions: Winograd F(4x4) and F(2x2), with
 * tiles as columns or rows, the direct convolutions, the GEMM with pixels as rows or columns,
 * the depthwise loop; the choice is recorded on the node (n->low: its note, algo) and the weights
 * are packed for it (pack.c). */
#include "lower/lower_int.h"

#include <math.h>
#include <string.h>

/* Conv n's parameters as its kernel is chosen and its weights packed. With symbolic dims (or
 * sizes the run finds) its sizes are those at a point inside the symbols' ranges, each at the
 * geometric mean of its ends (H=32:1024: 181, batch 1:8: 3), rather than at the upper bounds
 * op_conv_params gives: Winograd's tiles as rows and F(2x2), the best for a small map, would
 * never be taken at a range's top, nor F(4x4) at its bottom. Every kernel runs at every size
 * (the emitter passes the run's sizes and reserves the scratch of the largest); only the
 * speed depends on this point. */
cuvil_status lower_conv_params(cir_graph *g, cir_node *n, cuvil_conv2d_params *p) {
    cuvil_status s = op_conv_params(g, n, false, p);
    if (s || !g->symdims) return s;
    op_geo_x x;
    if ((s = op_conv_kx(g, n, &x))) return s;
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
    int64_t padded = (cols + nr - 1) / nr * nr;
    /* (the 32-column microkernels run a last tile of at most 16 columns as one vector) */
    if (nr == 32 && cols % 32 && cols % 32 <= 16) padded -= 16;
    return (double)rows / (double)((rows + mr - 1) / mr * mr) * (double)cols / (double)padded;
}

/* Few output pixels (a 7x7 map: 49, two 32-wide tiles of which 23% padding) fill the
 * microkernel's MR rows better than its NR columns: swap the operands where that wastes 5%
 * less (channels as columns, pixels as rows). Not for a short K (the taps of a few channels)
 * where the swapped GEMM's output is transposed after (and its pixels' rows packed, for an
 * im2col), which a short product does not pay for: an im2col's, and a 1x1 conv's on a map
 * larger than the channels-last regions of the layout pass (below), where it writes its
 * output channels last instead (bench/conv_sweep.py, AVX2, 1 -> 32 3x3 at 28x28, K = 9: 0.039
 * -> 0.069 ms swapped; cuvil-bench-conv-avx2, PP-LCNet's 1x1 16 -> 32 at 112x112, 32 channels
 * in 6-row tiles: 0.177 -> 0.234 ms swapped, 0.45 ms in the model). */
#define SWAP_MIN_K 32
#define SWAP_NEAR_DW_MAX_PIXELS (28 * 28)
static bool swapped_fits_better(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    const int64_t px = p->OH * p->OW, ch = p->M / p->group;
    const bool short_k = p->C / p->group * p->KH * p->KW < SWAP_MIN_K && p->KH * p->KW > 1;
    /* the swapped GEMM on a map larger than 28x28: its pixels' rows packed and its output
     * transposed cost more than the fill saves, for an im2col (bench/conv_sweep.py --suite,
     * x86_64-avx2, 6-row tiles: YOLO-style's stem 3 -> 16 6x6 s2 to 160x160 3.90 ms swapped
     * against 1.65, its 16 -> 32 3x3 s2 to 80x80 1.59 against 0.91; at 14x14, ResNet-18's 128 ->
     * 256 3x3 s2 gains, 1.50 -> 1.37) and for a 1x1 conv (cuvil-bench-conv-avx2, one thread,
     * channels first in and out, 16 or 32 output channels, which fill 6-row tiles 89%: at 112x112
     * K 32 -> 16 0.22 against 0.38 ms swapped, 32 -> 32 0.39 against 0.67, 144 -> 32 2.10
     * against 2.53; at 56x56 K 32 -> 16 0.044 against 0.049, 96 -> 16 0.12 against 0.24, 144 ->
     * 32 0.40 against 0.51; at 28x28 within 10%; at 7x7 swapped gains 10-18%, 80 to 480 channels
     * in and out). */
    const bool large_map = px > SWAP_NEAR_DW_MAX_PIXELS;
    return !short_k && !large_map && tile_fill(px, ch, t->mr, t->nr) > 1.05 * tile_fill(ch, px, t->mr, t->nr);
}

/* Does a conv (params p, constant weights: packed) run as Winograd? */
static bool runs_winograd(const cir_graph *g, bool packed, const cuvil_conv2d_params *p) {
    return packed && g->opt_level >= 2 && winograd_pays(p);
}

/* Do 2x2 tiles take fewer multiplies than 4x4 ones, counting what pads the map (16 a 2x2 tile,
 * 36 a 4x4)? A map 2 high: half of every 4x4 tile is padding. */
static bool wino2_fewer_multiplies(const cuvil_conv2d_params *p) {
    const int64_t t4 = ((p->OH + 3) / 4) * ((p->OW + 3) / 4), t2 = ((p->OH + 1) / 2) * ((p->OW + 1) / 2);
    return 16 * t2 < 36 * t4;
}

/* Where 4x4 tiles are too few (7x7: 4, 43% padding, 37 MB of weights at 512 channels) or pad
 * the map more than 2x2 ones cost, Winograd F(2x2,3x3) with tiles as rows: 16 tiles at 7x7
 * (8x8 pixels), 2.25x fewer multiplies than the GEMM on 1.78x the weights. (The CRNN's 256 ->
 * 256 at 2x80: F(4x4) 20 tiles, half padding, 1.37 / 1.34 ms AVX2 / AVX-512 against F(2x2)'s
 * 40 tiles 0.96 / 0.91, bench/conv_sweep.py --suite, one thread.) Not where its transformed
 * weights pass 4 MiB an image of the batch: a model's run then streams them from memory, and
 * 1.78x the bytes cost more than the multiplies save. Alone, with the weights warm in cache,
 * F(2x2) wins (ResNets' 512 -> 512 at 7x7, AVX-512: 1.32 against 1.35-1.40 ms, 16.8 MB of
 * them); in ResNet-50 it took 2.26 ms a conv against the GEMM's 1.82 (profile_layers, one
 * thread). cuvil-run --bench, medians of 10 alternating turns, one thread / two: ResNet-18
 * AVX-512 20.76 -> 20.04 / 11.46 -> 10.80 ms, AVX2 26.30 -> 26.19 / 14.60 -> 14.35;
 * ResNet-50 AVX-512 52.88 -> 52.04 / 28.27 -> 27.82, AVX2 70.84 -> 70.81 / 37.56 -> 37.25. */
#define WINO2_MAX_WEIGHT_BYTES ((double)(4u << 20))
static bool wino2_shape(const cuvil_conv2d_params *p) {
    const int64_t tiles = ((p->OH + 1) / 2) * ((p->OW + 1) / 2);
    return cuvil_conv2d_winograd_applies(p) && (!winograd_pays(p) || wino2_fewer_multiplies(p)) && tiles >= 16 &&
           tiles <= 64 && p->C >= WINO2_MIN_CHANNELS && p->M >= WINO2_MIN_CHANNELS;
}
static bool wino2_weights_fit(const cuvil_conv2d_params *p) {
    return 64.0 * (double)p->C * (double)p->M <= WINO2_MAX_WEIGHT_BYTES * (double)p->N;
}
static bool runs_winograd2(const cir_graph *g, bool packed, const cuvil_conv2d_params *p) {
    return packed && g->opt_level >= 2 && wino2_shape(p) && wino2_weights_fit(p);
}
/* A map where F(2x2) would be the Winograd but its weights are too many: not F(4x4) either,
 * whose are 2.25x those (a 2x80 map at 512 channels). */
static bool wino2_refused(const cuvil_conv2d_params *p) { return wino2_shape(p) && !wino2_weights_fit(p); }

/* Few tiles (14x14: 16 of 32 columns) fill the rows of Winograd's 36 GEMMs better (8 of 8)
 * than their columns, the tiles' usual place (wino_t_fills_better). On the x86 targets also
 * for a channels-last layout (wino_t_for_layout): with tiles as rows the input transform reads
 * a channels-last x a vector of channels at a time, where the channels-first one gathers each
 * row's four phases element by element (43% of a 64 -> 64 conv at 56x56, perf, AVX-512).
 * cuvil-bench-conv, one thread, channels first -> tiles as rows on a channels-last x
 * (CUVIL_BENCH_NHWC=1), AVX-512 / AVX2: 32 -> 32 at 40x40 0.199 -> 0.092 / 0.231 -> 0.129 ms,
 * 64 -> 64 at 40x40 0.49 -> 0.27 / 0.56 -> 0.37, at 20x20 0.147 -> 0.077 / 0.194 -> 0.111, at
 * 56x56 0.89 -> 0.56 / 1.09 -> 0.74. On a channels-first x and y it is slower (64 -> 64 at
 * 40x40 0.56 / 0.66), and there the layout step gives the conv back its channels-first kernel
 * (lower_conv_channels_first); the 1x1 convs that make x run as the pixels-as-rows GEMM to
 * write it channels last (feeds_wino_t, and those on the same map: lower_conv). Every map of
 * up to 40x40 (100 tiles), and up to 56x56 (196) where the tiles fill the GEMMs' rows within
 * 90% of their columns: ResNet-50, 56x56 stage channels last, cuvil-run --bench medians of 8
 * alternating turns, one thread / two, AVX2 72.8 -> 70.3 / 38.4 -> 37.0 ms, AVX-512 55.2 ->
 * 54.1 / 28.2 -> 27.2. (Larger maps keep the channels-first kernel: YOLO-style's at 80x80, whose
 * 1x1 neighbours of 16-32 channels lose more as pixels-as-rows GEMMs, 0.09 -> 0.14 ms.) */
#define WINO_T_MAX_TILES 100
#define WINO_T_WIDE_MAX_TILES 196
static bool wino_t_fills_better(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    const int64_t tiles = ((p->OH + 3) / 4) * ((p->OW + 3) / 4);
    return tiles <= 64 && tile_fill(tiles, p->M, t->mr, t->nr) > 1.05 * tile_fill(p->M, tiles, t->mr, t->nr);
}
static bool wino_t_for_layout(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    const int64_t tiles = ((p->OH + 3) / 4) * ((p->OW + 3) / 4);
    if (t->nr < 16) return false;
    return tiles <= WINO_T_MAX_TILES ||
           (tiles <= WINO_T_WIDE_MAX_TILES && tile_fill(tiles, p->M, t->mr, t->nr) >= 0.9 * tile_fill(p->M, tiles, t->mr, t->nr));
}
static bool wino_t_shape(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return wino_t_fills_better(p, t) || wino_t_for_layout(p, t);
}

/* With few channels Winograd's transforms, O(C + M) a tile, outweigh the multiplies it saves
 * on its GEMMs' C x M: channels first (tiles as columns), where the channels-first direct
 * convolution's tiles of MR = 8 output channels are full, that runs instead.
 * cuvil-bench-conv, one thread, AVX-512, Winograd -> direct: 16 -> 16 at 160x160 1.05 -> 0.74
 * ms, at 80x80 0.27 -> 0.17 (YOLO-style's), at 56x56 0.143 -> 0.086; 24 -> 24 at 160x160 1.70
 * -> 1.62, at 80x80 0.43 -> 0.38. From 32 channels Winograd wins or ties (32 -> 32 at 80x80
 * 0.62 against 0.65, 32 -> 64 at 16x160 0.32 against 0.50, 48 -> 48 at 56x56 0.59 against 0.71).
 * On AVX2, whose direct path is the channels-last one at 16 columns, Winograd takes 24 channels
 * (0.46 against 0.80 ms at 80x80) and 16 within 15%: it keeps them. Channels counted as
 * 2CM / (C + M) (the transforms' cost against the GEMMs'). */
#define WINO_DIRECT_MAX_CHANNELS 24
static bool direct_over_winograd(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return t->direct && t->nr >= 32 && 2 * p->C * p->M <= WINO_DIRECT_MAX_CHANNELS * (p->C + p->M) &&
           cuvil_conv2d_direct_applies(p);
}

/* Does a conv run Winograd F(4x4) (with tiles as columns or rows): where it pays, but not
 * with few channels on a target that runs the direct convolution instead, nor on a map where
 * F(2x2) was refused for its weights (lower_conv and lower_runs_wino_t ask the same). */
static bool runs_winograd4(const cir_graph *g, bool packed, const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return runs_winograd(g, packed, p) && !direct_over_winograd(p, t) && !wino2_refused(p);
}

/* Is p a 1x1 stride-1 unpadded conv (its input is the GEMM's operand as it lies)? */
static bool conv_pointwise(const cuvil_conv2d_params *p) {
    return p->KH == 1 && p->KW == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_t == 0 && p->pad_l == 0 &&
           p->OH == p->H && p->OW == p->W;
}

/* A 1x1 conv beside a depthwise conv on a map of up to 28x28 runs as the pixels-as-rows GEMM
 * too, whatever the tiles' fill, so that the tensor between them can be channels last (the
 * layout pass below), where the depthwise conv runs fastest. On MobileNetV2's 28x28 blocks
 * (profile_layers, one thread) the depthwise convs went 0.079 -> 0.057 ms each and 192 x
 * 28->14 0.041 -> 0.020, the GEMMs within 0.005. (At 56x56 the depthwise convs gained 0.1 ms
 * and the GEMMs lost as much, and the projection left the 112x112 block's fused kernel.)
 * (SWAP_NEAR_DW_MAX_PIXELS is defined above, with swapped_fits_better.) */

/* Likewise the 1x1 convs (and strided 1x1 shortcuts) on a map where the 3x3 convs run as
 * Winograd with tiles as rows (ResNets' 28x28 and 14x14 stages): all of a stage's tensors
 * can then be channels last, the Winograd transforms reading and writing them so. On larger
 * maps (ResNets' 56x56) only where the swap fills the tiles within 90% (not YOLO-style's 16
 * output channels in 32 columns) and every use of the output can read it channels last
 * (uses_read_channels_last). Each is marked for the layout step, which gives it back the GEMM
 * where neither its input nor its output ends channels last. */
#define SWAP_NEAR_WINO_T_MAX_PIXELS (28 * 28)

/* Is n a depthwise conv (one input channel per group, as many groups as channels)? */
bool lower_is_depthwise(cir_graph *g, const cir_node *n) {
    if (n->dead || n->kind != CIR_OP_CONV) return false;
    const cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1);
    return x && w && x->ndim == 4 && w->ndim == 4 && w->dims[1] == 1 && x->dims[1] > 1 && w->dims[0] == x->dims[1];
}

/* Is conv n's output's one use a conv that runs Winograd with tiles as rows (its input)? A 1x1
 * conv that makes that input then runs as the pixels-as-rows GEMM, whose output can be
 * channels last (the layout pass), where the Winograd input transform reads it fastest
 * (wino_t_shape). */
static bool feeds_wino_t(cir_graph *g, const cir_node *n, const cuvil_target_info *t) {
    const cir_value *y = cir_val(g, n->out[0]);
    if (y->n_uses != 1) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *c = cir_node_at(g, i);
        if (c->dead || c->n_in < 2 || c->in[0] != y->id) continue;
        cuvil_conv2d_params q;
        return c->kind == CIR_OP_CONV && c->half == CIR_UNDEF && cir_is_const(cir_in(g, c, 1)) &&
               !lower_conv_params(g, c, &q) && lower_runs_wino_t(g, &q, t);
    }
    return false;
}

/* Could conv n's output be channels last: not a graph output, and each of its uses a conv (its
 * input), a global pool or an elementwise binary op, the kinds that read a channels-last
 * tensor (the layout pass decides)? A pixels-as-rows GEMM whose output ends channels first
 * transposes it: YOLO-style's 64 -> 255 head at 40x40, read by a Reshape, 0.30 -> 0.45 ms on one
 * thread so. */
static bool uses_read_channels_last(cir_graph *g, const cir_node *n) {
    const cir_value *y = cir_val(g, n->out[0]);
    if (y->output_index >= 0 || y->n_uses < 1) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const cir_node *c = cir_node_at(g, i);
        if (c->dead) continue;
        for (int j = 0; j < c->n_in; j++) {
            if (c->in[j] != y->id) continue;
            switch (c->kind) {
            case CIR_OP_CONV: if (j != 0) return false; break;
            case CIR_OP_GLOBAL_AVG_POOL: case CIR_OP_GLOBAL_MAX_POOL:
            case CIR_OP_ADD: case CIR_OP_SUB: case CIR_OP_MUL: case CIR_OP_DIV: case CIR_OP_MAX: case CIR_OP_MIN: break;
            default: return false;
            }
        }
    }
    return true;
}

/* Is conv n's input made by a depthwise conv, or its output's one use a depthwise conv? */
static bool next_to_depthwise(cir_graph *g, const cir_node *n) {
    const cir_value *x = cir_in(g, n, 0), *y = cir_val(g, n->out[0]);
    if (x->producer >= 0 && lower_is_depthwise(g, cir_node_at(g, x->producer))) return true;
    /* or through a squeeze-excitation's scale: x = d * s (either order), d of x's shape made by
     * a depthwise conv (MobileNetV3's and EfficientNet's projections), which the layout pass
     * keeps channels last with d where the projection reads x so */
    if (x->producer >= 0) {
        const cir_node *m = cir_node_at(g, x->producer);
        if (!m->dead && m->kind == CIR_OP_MUL && m->n_in == 2)
            for (int j = 0; j < 2; j++) {
                const cir_value *d = cir_in(g, m, j);
                if (d && d->producer >= 0 && d->ndim == x->ndim && !memcmp(d->dims, x->dims, sizeof d->dims[0] * (size_t)x->ndim) &&
                    lower_is_depthwise(g, cir_node_at(g, d->producer)))
                    return true;
            }
    }
    if (y->n_uses != 1) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *c = cir_node_at(g, i);
        if (!c->dead && c->n_in > 0 && c->in[0] == y->id) return lower_is_depthwise(g, c);
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

/* With few output channels the GEMM's packing of the input (K rows a pixel) serves only a
 * few tiles of them, and the direct convolutions, which read the input in place, win at
 * shorter K too: YOLO's stem (3 -> 16, 6x6 s2 at 320x320, K 108) and its next conv (16 -> 32,
 * 3x3 s2 at 160x160, K 144). cuvil-bench-conv, one thread, medians of 5 runs, GEMM -> the
 * direct path the target takes: AVX2 (the channels-last one) 2.14 -> 1.44 ms and 0.91 ->
 * 0.69; 3 -> 16 5x5 s2 at 224x224 (K 75) 0.58 -> 0.43; AVX-512 (the channels-first one, whose
 * tiles are 8 channels: the channels-last one pads 16 channels to 32 columns, 2.05 ms) 1.38
 * -> 0.98, 0.82 -> 0.67 (the channels-last one 0.67 too), 0.56 -> 0.39. Not a 3x3 stem of K 27
 * (3 -> 32 3x3 s2: AVX2 0.37 against 0.43 channels last; AVX-512 0.31 against 0.33), which
 * the direct path's stem kernel takes (cuvil_conv2d_stem_applies, below). */
#define FEW_OUTPUTS_MAX_M 32
#define FEW_OUTPUTS_MIN_K 64
static bool strided_few_outputs(const cuvil_conv2d_params *p) {
    return cuvil_conv2d_direct_applies(p) && p->stride_h == 2 && p->stride_w == 2 && p->KH * p->KW > 1 &&
           p->M <= FEW_OUTPUTS_MAX_M && p->C * p->KH * p->KW >= FEW_OUTPUTS_MIN_K;
}

/* A stem (cuvil_conv2d_stem_applies: a KxK stride-2 conv, K 3 to 7, on at most 4 input
 * channels, the first conv of most CNNs) runs the direct path, where the x86 runtimes sum
 * STEM_MB output channels of a few vectors of pixels in registers over all its taps (conv2d.c,
 * the stem kernel) rather than packing an im2col as long as the product. cuvil-bench-conv, one
 * thread, Intel Xeon VM, GEMM -> direct, AVX2 / AVX-512: MobileNetV3's 3 -> 16 at 224x224
 * 0.275-0.294 -> 0.17 / 0.17-0.18 -> 0.14-0.15 ms (with HardSwish fused, AVX2, 0.29-0.30 ->
 * 0.19-0.20); MobileNetV2's 3 -> 32 0.42-0.45 -> 0.33-0.35 / 0.24-0.27 -> 0.25-0.26; ResNet's
 * 3 -> 64 7x7 (K 147) 2.85-2.91 -> 2.65-2.67 / 1.82-1.83 -> 1.72-1.73 (ResNet-18 in alternating
 * cuvil-run turns: AVX-512 20.78 -> 20.50 ms, AVX2 within noise, 26.05 / 26.10). YOLO-style's
 * 3 -> 16 6x6 keeps the channels-last direct path on AVX2 (strided_few_outputs: its output
 * channels last for the next conv); on AVX-512 the stem kernel (0.79-0.84 ms, as the direct
 * path's microkernel did; the model 9.79 -> 9.69 ms). The runtime tells which shapes it takes. */

/* direct_pays, with the shapes above where they were measured (AVX2, AVX-512: NR 16 and 32;
 * the portable targets keep their GEMM there). */
static bool direct_pays_on(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return direct_pays(p) || (t->nr >= 16 && (strided_few_outputs(p) || cuvil_conv2d_stem_applies(p)));
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
    if (!cuvil_conv2d_direct_t_applies(p) || p->KH * p->KW == 1 || t->nr < 16) return false;
    /* the few-output shapes: where the channels-first one runs too, only those whose outputs
     * fill the tiles' NR columns (strided_few_outputs) */
    return direct_pays(p) || (strided_few_outputs(p) && !(p->M < t->nr && t->direct));
}

/* A strided conv of a 3x3 or larger kernel that direct_t_pays but whose few output pixels
 * the swapped GEMM took (swapped_fits_better: 20x20 -> 10x10), on a channels-first input: the
 * swapped GEMM packs its im2col from that input, channel by channel, where the direct
 * convolution copies it once into a channels-last padded tile and reads the taps in place.
 * bench/conv_sweep.py --suite (each conv alone, channels-first input, one thread, Intel Xeon
 * AVX-512 VM), swapped GEMM -> direct, AVX-512 / AVX2: YOLO-style's 128 -> 128 3x3 s2 at
 * 20x20 0.273 -> 0.182 / 0.381 -> 0.272 ms, its 128 -> 256 0.451 -> 0.358 / 0.663 -> 0.561,
 * ResNet-18's 128 -> 256 at 28x28 0.912 -> 0.733 / 1.326 -> 1.065. On a channels-last input the
 * swapped GEMM's im2col reads whole pixels and the two measured even (direct_t_pays): there it
 * stays (ResNet-50 with every such conv switched, AVX-512: 57.0 -> 58.5 ms, its 28x28 and
 * 14x14 stages channels last). Not the 2x2 s2 patches of ConvNeXt's downsampling, whose
 * windows do not overlap (AVX-512 even: 384 -> 768 0.778 / 0.783 ms). */
bool lower_direct_t_over_swap(const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return p->KH >= 3 && p->KW >= 3 && p->stride_h >= 2 && p->stride_w >= 2 && p->group == 1 && direct_t_pays(p, t);
}

/* A 1x1 conv on a 1x1 map to at most half its channels (a squeeze-excitation block's reduction,
 * a classifier head's): a one-row product, which the direct convolution on channels-last pixels
 * runs as the weights' row of panels read once (a 1x1 map is the same channels first or last),
 * where the pixels-as-rows GEMM and the GEMM cost twice that or more. cuvil-bench-conv, one
 * thread, medians of 3 runs, AVX2 / AVX-512, chosen before -> direct: EfficientNet-B0's 672 ->
 * 28 0.008 -> 0.004 / 0.006 -> 0.003 ms, 1152 -> 48 0.015 -> 0.009 / 0.015 -> 0.010, 96 -> 4
 * (the GEMM) 2x; MobileNetV3's 960 -> 240 0.030 -> 0.028 / 0.036 -> 0.032. Expansions (28 ->
 * 672, 48 -> 1152, 512 -> 1280) measured even: left to the pixels-as-rows GEMM. */
static bool squeeze_on_one_pixel(const cuvil_conv2d_params *p, bool pointwise, const cuvil_target_info *t) {
    return pointwise && p->OH * p->OW == 1 && p->C >= 2 * p->M && p->group == 1 && t->nr >= 16 &&
           cuvil_conv2d_direct_t_applies(p);
}

/* Is conv n's output map one of the sizes where Winograd runs with tiles as rows? */
bool lower_on_wino_t_map(const lower_ctx *c, const cuvil_conv2d_params *p) {
    for (int i = 0; i < c->n_wino_t; i++)
        if (c->wino_t_hw[i][0] == p->OH && c->wino_t_hw[i][1] == p->OW) return true;
    return false;
}

/* How the profile and --emit c describe a conv's algorithm. */
const char *lower_conv_algo_name(int64_t algo, bool pointwise, bool strided_pw) {
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
    case CUVIL_CONV_GROUPED: return "grouped direct, output channels as lanes";
    default: return pointwise ? "1x1 as gemm" : strided_pw ? "1x1 strided as gemm on a subsampled copy" : "im2col+gemm";
    }
}

/* One input channel per group (C/group == 1: depthwise, and a conv of a single channel) runs
 * the depthwise loop, unless each input channel has outputs enough to fill the microkernel's
 * MR rows and either the loop cannot vectorise (a stride across other than the register-tiled
 * 3x3/5x5/7x7 ones) or there is one input channel only: then the GEMM (weights prepacked, K = the
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

/* A grouped conv of few output channels a group (RegNet's 8 in, 8 out) as per-group GEMMs
 * fills few of the microkernel's rows on a short K, and packs its input for each: the direct
 * grouped kernel (a group's output channels as vector lanes, its input read in place from a
 * channels-last tile) runs it instead. bench/conv_sweep.py's cuvil-bench-conv, one thread,
 * GEMM -> grouped, AVX2 / AVX-512: RegNetY-400MF's 48 (g6) 3x3 s2 112 -> 56 0.76 -> 0.36 /
 * 0.54 -> 0.34 ms, 208 (g26) at 14x14 0.32 -> 0.083 / 0.30 -> 0.12, 440 (g55) at 7x7 0.35 ->
 * 0.092 / 0.21 -> 0.061; ResNeXt's 32 groups of 4 at 56x56 2.50 -> 1.07 / 1.48 -> 0.97 ms, of
 * 32 at 7x7 0.97 -> 0.54 / 0.58 -> 0.42. With many output channels a group the GEMM fills
 * its tiles and wins (AlexNet's 96 -> 256 g2 5x5, 128 a group: 4.9 against 6.3 ms, AVX2).
 * Measured on AVX2 and AVX-512 only: the portable targets keep the GEMM. */
#define GROUPED_MAX_MG 64
/* Its scratch, a thread's copy of one group's padded input, is bounded (at the symbols' upper
 * bounds where the dims are symbolic; SIZE_MAX where it overflows): a larger map keeps the
 * GEMM, whose packing is blocked. */
#define GROUPED_MAX_TILE_BYTES ((size_t)8 << 20)
static bool grouped_pays(cir_graph *g, cir_node *n, const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    if (!cuvil_conv2d_grouped_applies(p) || p->M / p->group > GROUPED_MAX_MG || t->nr < 16) return false;
    cuvil_conv2d_params u = *p;
    if (g->symdims && op_conv_params(g, n, false, &u)) return false;
    u.algo = CUVIL_CONV_GROUPED;
    u.packed_mr = CUVIL_GCONV_LANES;
    return cuvil_f32_conv2d_scratch_size(&u) <= GROUPED_MAX_TILE_BYTES;
}

/* Conv weights w packed for p's algorithm (p->packed_mr, p->packed_kc), Winograd's transformed:
 * the packed constant's id in *id (shared with a node that packed w the same way). */
static cuvil_status pack_conv_weights(cir_graph *g, const cir_value *w, const cuvil_conv2d_params *p, int *id) {
    bool fill;
    char key[400];
    lower_conv_pack_key(p, key, sizeof key);
    cuvil_status s = lower_packed_const(g, w, cuvil_f32_conv2d_packed_floats(p), key, id, &fill);
    if (s || !fill) return s;
    float *tmp = NULL;
    const size_t nt = cuvil_f32_conv2d_pack_tmp_floats(p);
    if (nt && !(tmp = cuvil_malloc(nt * sizeof(float))))
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory transforming weights");
    cuvil_f32_conv2d_pack(p, w->data, cir_val(g, *id)->data, tmp);
    cuvil_free(tmp);
    return CUVIL_OK;
}

/* Depthwise convolutions (see dw_runs_gemm) run the direct loop; the others run as GEMMs (1x1
 * stride-1 ones straight on the input, the rest through im2col packing), and their constant
 * weights are packed now into the panels the target's microkernel reads. */
cuvil_status lower_conv(cir_graph *g, cir_node *n, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    cuvil_conv2d_params p;
    cuvil_status s = lower_conv_params(g, n, &p);
    if (s) return s;
    cir_value *w = cir_in(g, n, 1);
    char algo[160];
    const bool packed = g->opt_level >= 1 && cir_is_const(w);
    /* (Winograd takes only stride 1: never with strided_t) */
    const bool strided_t = packed && g->opt_level >= 2 && direct_t_strided(&p, t);
    /* a single input channel with a gathering stride and long kernel rows: the direct
     * convolution, as for more channels (conv_sweep.py: 1 -> 4, k400 s160, AVX2 0.034 -> 0.021 ms) */
    bool depthwise = p.C / p.group == 1 && !dw_runs_gemm(&p, packed, t) && !strided_t;
    bool pointwise = conv_pointwise(&p);
    bool strided_pw = cuvil_conv2d_strided_pointwise(&p);
    if (depthwise) {
        snprintf(algo, sizeof algo, "direct depthwise%s", (p.KH == 3 || p.KH == 5 || p.KH == 7) && p.KH == p.KW ? " (register-tiled)" : "");
    } else {
        /* Winograd's transformed weights are 1.8x (F(2x2)) to 4x (F(4x4)) the GEMM's: where they
         * would bring the packed weights over limits.packed_bytes (ResNet-18's last stage at batch
         * 8), the conv takes a kernel on weights packed as they are */
        bool allow_wino = true, allow_grouped = true;
    choose:;
        const bool grouped = allow_grouped && packed && g->opt_level >= 2 && !strided_t && grouped_pays(g, n, &p, t);
        bool wino2 = allow_wino && runs_winograd2(g, packed, &p);
        const bool few_channels = runs_winograd(g, packed, &p) && direct_over_winograd(&p, t);
        bool wino = (allow_wino && runs_winograd4(g, packed, &p, t)) || wino2;
        /* the swapped GEMMs run group by group with a transpose each: one group only (grouped
         * convs, conv_sweep.py: 64 -> 64 g4 3x3 s2 at 56x56, AVX2, 0.34 -> 0.74 ms swapped) */
        const bool fits_swapped = packed && !wino && !strided_t && p.group == 1 && swapped_fits_better(&p, t);
        const bool swap_fill_ok = tile_fill(p.OH * p.OW, p.M, t->mr, t->nr) >= 0.9 * tile_fill(p.M, p.OH * p.OW, t->mr, t->nr);
        const bool swap_for_layout =
            packed && !wino && !strided_t && p.group == 1 && !fits_swapped && g->opt_level >= 2 &&
            ((pointwise && p.OH * p.OW <= SWAP_NEAR_DW_MAX_PIXELS && next_to_depthwise(g, n)) ||
             ((pointwise || strided_pw) &&
              (p.OH * p.OW <= SWAP_NEAR_WINO_T_MAX_PIXELS || (swap_fill_ok && uses_read_channels_last(g, n))) &&
              lower_on_wino_t_map(c, &p)) ||
             (pointwise && feeds_wino_t(g, n, t)));
        bool swap = fits_swapped || swap_for_layout;
        bool wino_t = wino && !wino2 && wino_t_shape(&p, t);
        bool direct_t = strided_t || (packed && !wino && !swap && g->opt_level >= 2 && direct_t_pays(&p, t)) ||
                        (packed && g->opt_level >= 2 && squeeze_on_one_pixel(&p, pointwise, t));
        /* (the stem kernel on AVX2 too, whose direct path runs nothing else: targets.inc) */
        bool direct = packed && !wino && !swap && !direct_t && (t->direct || (t->nr >= 16 && cuvil_conv2d_stem_applies(&p))) &&
                      (direct_pays_on(&p, t) || few_channels);
        p.algo = grouped    ? CUVIL_CONV_GROUPED
                 : wino2    ? CUVIL_CONV_WINOGRAD2_T
                 : wino_t   ? CUVIL_CONV_WINOGRAD_T
                 : wino     ? CUVIL_CONV_WINOGRAD
                 : direct_t ? CUVIL_CONV_DIRECT_T
                 : swap     ? CUVIL_CONV_GEMM_T
                 : direct   ? CUVIL_CONV_DIRECT
                            : 0;
        if (grouped)
            snprintf(algo, sizeof algo, "%s, %d channels a vector", lower_conv_algo_name(p.algo, pointwise, strided_pw),
                     CUVIL_GCONV_LANES);
        else
            snprintf(algo, sizeof algo, "%s, gemm %dx%d kc=%lld", lower_conv_algo_name(p.algo, pointwise, strided_pw), t->mr,
                     t->nr, (long long)t->kc);
        if (packed) {
            /* the swapped GEMMs pack the weights as their B */
            p.packed_mr = grouped ? CUVIL_GCONV_LANES : cuvil_conv2d_algo_packs_b(p.algo) ? t->nr : t->mr;
            p.packed_kc = t->kc;
            if (wino && !lower_pack_fits(g, cuvil_f32_conv2d_packed_floats(&p), *c->rest)) {
                allow_wino = false;
                goto choose;
            }
            /* (a group's output channels padded to whole vectors: up to 8x the weights where a
             * group has few; the GEMM's, padded to its rows, may still fit) */
            if (grouped && !lower_pack_fits(g, cuvil_f32_conv2d_packed_floats(&p), *c->rest)) {
                allow_grouped = false;
                goto choose;
            }
            int id;
            if ((s = pack_conv_weights(g, w, &p, &id))) return s;
            n->low.packed = id;
            n->low.algo = (int)p.algo;
            n->low.for_layout = (p.algo == CUVIL_CONV_GEMM_T && swap_for_layout) ||
                                (p.algo == CUVIL_CONV_WINOGRAD_T && !wino_t_fills_better(&p, t));
            snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ", weights %s",
                     wino ? "transformed and prepacked" : "prepacked");
        }
    }
    n->low.note = cuvil_arena_strdup(&g->arena, algo);
    return n->low.note ? CUVIL_OK : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
}

/* Conv n, whose algorithm lower_conv chose for a channels-last layout (n->low.for_layout) that
 * the layout step did not give it, neither its input nor its output channels last: the
 * channels-first one it would take otherwise, the GEMM for a 1x1 conv's pixels-as-rows one,
 * Winograd with tiles as columns for tiles as rows, its weights packed for that. (On a
 * channels-first x and y each measured slower than its channels-first twin: 64 -> 64 at 40x40,
 * AVX-512, Winograd with tiles as rows 0.56 against 0.49 ms, cuvil-bench-conv.) Where those
 * weights would bring the packed ones over limits.packed_bytes it keeps what it has. */
cuvil_status lower_conv_channels_first(cir_graph *g, cir_node *n, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    cuvil_conv2d_params p;
    cuvil_status s = lower_conv_params(g, n, &p);
    if (s) return s;
    const bool wino = n->low.algo == CUVIL_CONV_WINOGRAD_T;
    p.algo = wino ? CUVIL_CONV_WINOGRAD : 0;
    p.layout = 0;
    p.packed_mr = t->mr;
    p.packed_kc = t->kc;
    const size_t nf = cuvil_f32_conv2d_packed_floats(&p);
    const int old = n->low.packed;
    lower_release_pack(g, n);
    if (!lower_pack_fits(g, nf, 0)) {
        if (n->low.packed < 0 && old >= 0) {   /* released: counted again */
            n->low.packed = old;
            g->packed_bytes += cir_nbytes(cir_val(g, old));
        }
        return CUVIL_OK;
    }
    int id;
    if ((s = pack_conv_weights(g, cir_in(g, n, 1), &p, &id))) return s;
    n->low.packed = id;
    n->low.algo = (int)p.algo;
    n->low.kc = 0;
    n->low.for_layout = false;
    char algo[CIR_ALGO_MAX];
    snprintf(algo, sizeof algo, "%s, gemm %dx%d kc=%lld, weights %s",
             lower_conv_algo_name(p.algo, conv_pointwise(&p), cuvil_conv2d_strided_pointwise(&p)), t->mr, t->nr,
             (long long)t->kc, wino ? "transformed and prepacked" : "prepacked");
    n->low.note = cuvil_arena_strdup(&g->arena, algo);
    return n->low.note ? CUVIL_OK : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
}

bool lower_runs_wino_t(const cir_graph *g, const cuvil_conv2d_params *p, const cuvil_target_info *t) {
    return runs_winograd4(g, g->opt_level >= 1, p, t) && !runs_winograd2(g, g->opt_level >= 1, p) && wino_t_shape(p, t);
}
