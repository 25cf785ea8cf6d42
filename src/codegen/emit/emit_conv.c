/* emit_conv.c -- conv and conv_transpose (op_conv.c): the GEMM-based kernels, conv on the
 * weights the lowering pass prepacked when it did. */
#include "codegen/emit/emit_int.h"

#include <string.h>

/* A conv's algorithm (cuvil_conv2d_params.algo) as the runtime's name for it. */
static const char *algo_name(int64_t algo) {
    switch (algo) {
    case CUVIL_CONV_GEMM: return "CUVIL_CONV_GEMM";
    case CUVIL_CONV_WINOGRAD: return "CUVIL_CONV_WINOGRAD";
    case CUVIL_CONV_GEMM_T: return "CUVIL_CONV_GEMM_T";
    case CUVIL_CONV_WINOGRAD_T: return "CUVIL_CONV_WINOGRAD_T";
    case CUVIL_CONV_DIRECT: return "CUVIL_CONV_DIRECT";
    case CUVIL_CONV_WINOGRAD2_T: return "CUVIL_CONV_WINOGRAD2_T";
    case CUVIL_CONV_DIRECT_T: return "CUVIL_CONV_DIRECT_T";
    case CUVIL_CONV_GROUPED: return "CUVIL_CONV_GROUPED";
    default: CUVIL_ASSERT(!"a conv algorithm without a name"); return "0";
    }
}

/* A conv's layout flags (cuvil_conv2d_params.layout) as the runtime's names. */
static const char *layout_name(int64_t layout) {
    switch (layout & (CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC)) {
    case CUVIL_CONV_X_NHWC: return "CUVIL_CONV_X_NHWC";
    case CUVIL_CONV_Y_NHWC: return "CUVIL_CONV_Y_NHWC";
    case CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC: return "CUVIL_CONV_X_NHWC | CUVIL_CONV_Y_NHWC";
    default: return "0";
    }
}

/* The fields of op_conv_params() as a C initialiser (shared by both params structs). */
const char *cg_conv_geo_fields(const cuvil_conv2d_params *p, char *buf, size_t len) {
    char a[128];
    snprintf(buf, len,
             ".N = %lld, .C = %lld, .H = %lld, .W = %lld, .M = %lld, .OH = %lld, .OW = %lld, .KH = %lld, .KW = %lld, "
             ".stride_h = %lld, .stride_w = %lld, .pad_t = %lld, .pad_l = %lld, .dil_h = %lld, .dil_w = %lld, "
             ".group = %lld, .act = %s",
             (long long)p->N, (long long)p->C, (long long)p->H, (long long)p->W, (long long)p->M, (long long)p->OH,
             (long long)p->OW, (long long)p->KH, (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w,
             (long long)p->pad_t, (long long)p->pad_l, (long long)p->dil_h, (long long)p->dil_w, (long long)p->group,
             cg_act(&p->act, a));
    return buf;
}

/* geo_fields of a symbolic node: the sizes and padding of this run as C of D[]. */
const char *cg_conv_geo_fields_x(cg_ctx *cg, const cuvil_conv2d_params *p, const op_geo_x *x) {
    char a[128];
    const char *s = "";
    cuvil_sb sb = {0};
    cuvil_sb_printf(&sb, ".N = %s, .C = %lld, .H = %s, .W = %s, .M = %lld, .OH = %s, .OW = %s, .KH = %lld, .KW = %lld, "
                    ".stride_h = %lld, .stride_w = %lld, .pad_t = %s, .pad_l = %s, .dil_h = %lld, .dil_w = %lld, "
                    ".group = %lld, .act = %s", cg_dim_c(cg, x->N), (long long)p->C, cg_dim_c(cg, x->H), cg_dim_c(cg, x->W),
                    (long long)p->M, cg_dim_c(cg, x->OH), cg_dim_c(cg, x->OW), (long long)p->KH, (long long)p->KW,
                    (long long)p->stride_h, (long long)p->stride_w, cg_dim_c(cg, x->pad_t), cg_dim_c(cg, x->pad_l),
                    (long long)p->dil_h, (long long)p->dil_w, (long long)p->group, cg_act(&p->act, a));
    if (!sb.oom) s = cg_str(cg, sb.s ? sb.s : "");
    cuvil_sb_free(&sb);
    return s;
}

/* The scratch a symbolic conv reserves. The kernel's scratch is not monotone in the sizes (it
 * picks its path by them: a depthwise conv over a narrow map takes a blocked path with more
 * scratch), so the largest of it over values of the symbols it depends on: every value of a
 * symbol whose range has at most 64, else its 32 smallest, its 16 largest and 16 between (where
 * the kernels' small-map paths and the upper bounds are), all combinations up to 2^16 of them.
 * Not a proof between those values: the node also checks its run's need against what it
 * reserved (cg_scratch), so a run that needs more fails with a message, never overruns. */
#define SCRATCH_VALUES 64
static int candidates(const cir_dimsym *s, int64_t *v) {
    int n = 0;
    if (s->hi - s->lo < SCRATCH_VALUES) {
        for (int64_t x = s->lo; x <= s->hi; x++) v[n++] = x;
        return n;
    }
    for (int i = 0; i < 32; i++) v[n++] = s->lo + i;
    for (int i = 0; i < 16; i++) v[n++] = s->hi - i;
    for (int i = 1; i <= 16; i++) v[n++] = s->lo + 32 + (s->hi - 16 - s->lo - 32) * i / 17;
    return n;
}

static size_t conv_scratch_at(const cuvil_conv2d_params *q, bool transpose, const cuvil_gemm_blocking *blk) {
    if (!transpose) return cuvil_f32_conv2d_scratch_size_ex(q, blk);
    cuvil_conv_transpose2d_params tp;
    memcpy(&tp, q, sizeof tp);
    return cuvil_f32_conv_transpose2d_scratch_size_ex(&tp, blk);
}

/* The largest of at(v) over values of the symbols that dims f[0..nf) use (candidates above),
 * v holding the dims evaluated there; at the upper bounds first. */
typedef size_t (*scratch_at_fn)(const int64_t *v, void *user);
static size_t scratch_over(cir_graph *g, const cir_dim *const *f, int nf, scratch_at_fn at, void *user) {
    const cir_dimtab *t = &g->dt;
    int64_t vals[64], v[16];
    int syms[8], ns = 0;
    bool ok = t->n_syms <= 64 && nf <= 16;
    for (int k = 0; ok && k < t->n_syms; k++) vals[k] = t->syms[k].hi;
    for (int i = 0; ok && i < nf; i++) ok = cir_dim_eval(f[i], vals, t->n_syms, &v[i]);
    size_t best = ok ? at(v, user) : 0;
    if (!ok) return best;
    for (int k = 0; k < t->n_syms; k++)
        for (int i = 0; i < nf; i++)
            if (cir_dim_uses(f[i], k)) {
                if (ns == 8) return best;   /* more symbols than combinations can cover */
                syms[ns++] = k;
                break;
            }
    int64_t cand[8][SCRATCH_VALUES];
    int nc[8];
    long total = 1;
    for (int j = 0; j < ns; j++) {
        nc[j] = candidates(&t->syms[syms[j]], cand[j]);
        total *= nc[j];
    }
    for (int j = 0; j < ns && total > 65536; j++) {   /* too many: the ends of each range */
        total /= nc[j];
        cand[j][1] = t->syms[syms[j]].hi;
        nc[j] = 2;
        total *= 2;
    }
    for (long c = 0; c < total; c++) {
        long r = c;
        for (int j = 0; j < ns; j++) {
            vals[syms[j]] = cand[j][r % nc[j]];
            r /= nc[j];
        }
        bool good = true;
        for (int i = 0; i < nf && good; i++) good = cir_dim_eval(f[i], vals, t->n_syms, &v[i]);   /* (at() judges v) */
        if (!good) continue;
        size_t sz = at(v, user);
        if (sz > best) best = sz;
    }
    return best;
}

typedef struct conv_at {
    const cuvil_conv2d_params *p;
    cg_conv_size_fn size;
    const void *user;
} conv_at;

/* v: N, H, W, OH, OW, pad_t, pad_l, KH, KW */
static size_t conv_scratch_v(const int64_t *v, void *user) {
    const conv_at *a = user;
    if (v[3] <= 0 || v[4] <= 0) return 0;
    cuvil_conv2d_params q = *a->p;
    q.N = v[0], q.H = v[1], q.W = v[2], q.OH = v[3], q.OW = v[4], q.pad_t = v[5], q.pad_l = v[6], q.KH = v[7], q.KW = v[8];
    return a->size(&q, a->user);
}

size_t cg_conv_scratch_bound(cir_graph *g, const cuvil_conv2d_params *pp, const op_geo_x *gx, cg_conv_size_fn size,
                             const void *user) {
    const cir_dim *f[9] = {gx->N, gx->H, gx->W, gx->OH, gx->OW, gx->pad_t, gx->pad_l, gx->KH, gx->KW};
    conv_at a = {pp, size, user};
    size_t at_pp = size(pp, user), over = scratch_over(g, f, 9, conv_scratch_v, &a);
    return at_pp > over ? at_pp : over;
}

typedef struct f32_conv_at {
    bool transpose;
    const cuvil_gemm_blocking *blk;
} f32_conv_at;

static size_t f32_conv_size(const cuvil_conv2d_params *q, const void *user) {
    const f32_conv_at *a = user;
    return conv_scratch_at(q, a->transpose, a->blk);
}

cuvil_status cg_emit_conv(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_conv2d_params pp;
    cuvil_status s = op_conv_params(g, n, false, &pp);
    if (s) return s;
    pp.layout = n->low.layout;
    op_geo_x gx;
    bool sym = cg_node_symbolic(g, n);
    if (sym && (s = op_conv_kx(g, n, &gx))) return s;
    char f[1024], ex[160] = "";
    if (n->low.packed >= 0) {
        const cuvil_target_info *t = cuvil_target_find(g->target);
        CUVIL_ASSERT(t);
        pp.packed_mr = n->low.algo == CUVIL_CONV_GROUPED     ? CUVIL_GCONV_LANES
                       : cuvil_conv2d_algo_packs_b(n->low.algo) ? t->nr
                                                                : t->mr;
        pp.packed_kc = n->low.kc ? n->low.kc : t->kc;
        pp.algo = n->low.algo;   /* the scratch below is the algorithm's */
        snprintf(ex, sizeof ex, ", .packed_mr = %lld, .packed_kc = %lld, .algo = %s", (long long)pp.packed_mr,
                 (long long)pp.packed_kc, algo_name(pp.algo));
    }
    if (pp.layout) snprintf(ex + strlen(ex), sizeof ex - strlen(ex), ", .layout = %s", layout_name(pp.layout));
    const char *p = cg_param(cg, "cuvil_conv2d_params", "{ %s%s }", sym ? cg_conv_geo_fields_x(cg, &pp, &gx) : cg_conv_geo_fields(&pp, f, sizeof f), ex);
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    const f32_conv_at at = {false, &blk};
    const char *S = cg_scratch(cg, sym ? cg_conv_scratch_bound(g, &pp, &gx, f32_conv_size, &at) : cuvil_f32_conv2d_scratch_size_ex(&pp, &blk),
                               "cuvil_f32_conv2d_scratch_size(&%s)", p);
    if (cg_packs_at_create(cg, n))   /* --precision: transformed from the 16-bit source when a context is created */
        cg_pack_at_create(cg, "cuvil_f32_conv2d_pack", p, n->in[1], n->low.packed, cuvil_f32_conv2d_pack_tmp_floats(&pp));
    cg_printf(cg, "    cuvil_f32_conv2d%s(&%s, %s, %s, %s, %s, %s, %s);\n", n->low.packed >= 0 ? "_prepacked" : "", p,
              cg_in(cg, n->in[0]), cg_in(cg, n->low.packed >= 0 ? n->low.packed : n->in[1]),
              cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cir_node_residual(n) >= 0 ? cg_in(cg, cir_node_residual(n)) : "NULL",
              cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}

/* The inverted-residual block the lowering made (src/lower/blocks.c): its three convs' parameters
 * are in n->low.params; inputs x, the expand weights (packed) and bias, the depthwise
 * weights and bias, the projection weights (packed) and bias; the epilogue's addition (cir_node_residual). */
/* A block's three convs at the sizes v: N, H, W (its input's), OH, OW (its output's). */
typedef struct mb_at {
    const cuvil_mbblock_params *p;
    const cuvil_gemm_blocking *blk;
} mb_at;

static void mb_sizes(cuvil_mbblock_params *q, const int64_t *v) {
    cuvil_conv2d_params *c[3] = {&q->ex, &q->dw, &q->pr};
    for (int i = 0; i < 3; i++) c[i]->N = v[0];
    if (q->ex.M) q->ex.H = q->ex.OH = v[1], q->ex.W = q->ex.OW = v[2];
    q->dw.H = v[1], q->dw.W = v[2], q->dw.OH = v[3], q->dw.OW = v[4];
    q->pr.H = q->pr.OH = v[3], q->pr.W = q->pr.OW = v[4];
}

static size_t mb_scratch_v(const int64_t *v, void *user) {
    const mb_at *a = user;
    if (v[0] <= 0 || v[1] <= 0 || v[2] <= 0 || v[3] <= 0 || v[4] <= 0) return 0;
    cuvil_mbblock_params q = *a->p;
    mb_sizes(&q, v);
    return cuvil_f32_mbblock_scratch_size_ex(&q, a->blk);
}

/* The inverted-residual block the lowering made (src/lower/blocks.c): its three convs' parameters
 * are in n->low.params; inputs x, the expand weights (packed) and bias, the depthwise
 * weights and bias, the projection weights (packed) and bias; the epilogue's addition (cir_node_residual). With symbolic dims
 * the sizes are the run's: N, H and W of x (the expand and depthwise convs' input), OH and OW
 * of y (the depthwise conv's output and the projection's). */
cuvil_status cg_emit_mbblock(cg_ctx *cg, cir_graph *g, cir_node *n) {
    const cuvil_mbblock_params *mp = (const cuvil_mbblock_params *)n->low.params;
    CUVIL_ASSERT(mp && n->n_in == 7);
    const bool sym = cg_node_symbolic(g, n);
    const cir_value *x = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    const cir_dim *f[5] = {cir_dimx(g, x, 0), cir_dimx(g, x, 2), cir_dimx(g, x, 3), cir_dimx(g, y, 2), cir_dimx(g, y, 3)};
    for (int i = 0; i < 5; i++)
        if (!f[i]) return cir_dim_err(g, n, "a block's sizes");
    char f3[3][1200];
    const cuvil_conv2d_params *c[3] = {&mp->ex, &mp->dw, &mp->pr};
    for (int i = 0; i < 3; i++) {
        char geo[1024];
        const char *gs = cg_conv_geo_fields(c[i], geo, sizeof geo);
        if (sym && c[i]->M) {   /* ex: x's map, dw: x's -> y's, pr: y's */
            const cir_dim *zero = cir_dim_const(&g->dt, 0);
            op_geo_x gx = {.N = f[0], .H = i == 2 ? f[3] : f[1], .W = i == 2 ? f[4] : f[2], .OH = i == 0 ? f[1] : f[3],
                           .OW = i == 0 ? f[2] : f[4], .pad_t = i == 1 ? cir_dim_const(&g->dt, c[i]->pad_t) : zero,
                           .pad_l = i == 1 ? cir_dim_const(&g->dt, c[i]->pad_l) : zero};
            if (!gx.pad_t || !gx.pad_l) return cir_dim_err(g, n, "a block's padding");
            gs = cg_conv_geo_fields_x(cg, c[i], &gx);
        }
        snprintf(f3[i], sizeof f3[i], "%s, .packed_mr = %lld, .packed_kc = %lld, .algo = %s", gs, (long long)c[i]->packed_mr,
                 (long long)c[i]->packed_kc, algo_name(c[i]->algo));
    }
    const char *p = cg_param(cg, "cuvil_mbblock_params", "{ .ex = { %s }, .dw = { %s }, .pr = { %s } }", f3[0], f3[1], f3[2]);
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    size_t bytes = cuvil_f32_mbblock_scratch_size_ex(mp, &blk);
    if (sym) {
        mb_at a = {mp, &blk};
        size_t over = scratch_over(g, f, 5, mb_scratch_v, &a);
        if (over > bytes) bytes = over;
    }
    const char *S = cg_scratch(cg, bytes, "cuvil_f32_mbblock_scratch_size(&%s)", p);
    const char *in[7];
    for (int i = 0; i < 7; i++) in[i] = cir_in(g, n, i) ? cg_in(cg, n->in[i]) : "NULL";
    cg_printf(cg, "    cuvil_f32_mbblock(&%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n", p, in[0], in[1], in[2], in[3],
              in[4], in[5], in[6], cir_node_residual(n) >= 0 ? cg_in(cg, cir_node_residual(n)) : "NULL", cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}

cuvil_status cg_emit_conv_transpose(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_conv2d_params gp;
    cuvil_status s = op_conv_params(g, n, true, &gp);
    if (s) return s;
    char f[1024];
    op_geo_x gx;
    bool sym = cg_node_symbolic(g, n);
    if (sym && (s = op_convt_x(g, n, &gx))) return s;
    const char *p = cg_param(cg, "cuvil_conv_transpose2d_params", "{ %s }", sym ? cg_conv_geo_fields_x(cg, &gp, &gx) : cg_conv_geo_fields(&gp, f, sizeof f));
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    cuvil_conv_transpose2d_params tp;
    memcpy(&tp, &gp, sizeof tp);   /* the same geometry fields (geo_fields prints both) */
    const f32_conv_at at = {true, &blk};
    const char *S = cg_scratch(cg, sym ? cg_conv_scratch_bound(g, &gp, &gx, f32_conv_size, &at)
                                   : cuvil_f32_conv_transpose2d_scratch_size_ex(&tp, &blk),
                               "cuvil_f32_conv_transpose2d_scratch_size(&%s)", p);
    cg_printf(cg, "    cuvil_f32_conv_transpose2d(&%s, %s, %s, %s, %s, %s);\n", p, cg_in(cg, n->in[0]),
              cg_in(cg, n->in[1]), cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}

cuvil_status cg_emit_conv_nd(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cuvil_conv_nd_params p;
    cuvil_status s = op_conv_nd_params(g, n, &p);
    if (s) return s;
    const char *ps = cg_param(cg, "cuvil_conv_nd_params",
                              "{ .nsp = %d, .transpose = %d, .N = %lld, .C = %lld, .M = %lld, .group = %lld, .in = %s, "
                              ".out = %s, .k = %s, .s = %s, .d = %s, .pb = %s }",
                              p.nsp, p.transpose, (long long)p.N, (long long)p.C, (long long)p.M, (long long)p.group,
                              cg_i64s(cg, p.in, CUVIL_ND_MAX), cg_i64s(cg, p.out, CUVIL_ND_MAX), cg_i64s(cg, p.k, CUVIL_ND_MAX),
                              cg_i64s(cg, p.s, CUVIL_ND_MAX), cg_i64s(cg, p.d, CUVIL_ND_MAX), cg_i64s(cg, p.pb, CUVIL_ND_MAX));
    cuvil_gemm_ukernel_desc uk;
    cuvil_gemm_blocking blk = cg_target_blocking(g, &uk);
    const char *S = cg_scratch(cg, cuvil_f32_conv_nd_scratch_size_ex(&p, &blk), "cuvil_f32_conv_nd_scratch_size(&%s)", ps);
    cg_printf(cg, "    cuvil_f32_conv_nd(&%s, %s, %s, %s, %s, %s);\n", ps, cg_in(cg, n->in[0]), cg_in(cg, n->in[1]),
              cir_in(g, n, 2) ? cg_in(cg, n->in[2]) : "NULL", cg_out(cg, n->out[0]), S);
    return CUVIL_OK;
}
