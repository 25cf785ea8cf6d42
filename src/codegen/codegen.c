/* codegen.c -- CIR (after passes and memory planning) to readable C: one static function per
 * node, kernel parameters as static const initialisers, the model ABI of cuvil_model.h.
 * Constants go into a weights blob that weights.S links in with .incbin. */
#include "codegen/codegen_int.h"
#include "ir/ops/ops.h"
#include "cuvil_glue.h"   /* (the runtime's) where create() puts the context: BUFFER_BYTES */

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

struct cg_ctx {
    cir_graph *g;
    cg_plan plan;
    cuvil_sb params;        /* file-scope parameter blocks and #defines */
    cuvil_sb locals;        /* symbolic nodes: the parameter blocks, declared in the node function */
    cuvil_sb body;          /* the current node's body */
    cuvil_sb scratch;       /* scratch-size expressions */
    cg_output *out;         /* the weights blob and its pieces */
    int64_t *const_off;     /* per value id: offset in the blob, -1 if not placed */
    int n_params;
    cuvil_arena strs;       /* strings handed to op emitters */
    bool over_limit;        /* cg_data went over limits.folded_bytes */
    int unplanned;          /* a value with no storage was referenced (id + 1), an internal error */
    const char *fail_what;  /* cg_fallible() for the current node, else NULL */
    size_t scratch_bytes;   /* the largest scratch a node needs, for the target */
    uint8_t *named;         /* per value id: 1 its arena offset, 2 its weights, 4 its stored offset has a #define */
    int n_data;             /* derived data blocks placed (cg_data), for their names */
    /* symbolic dims: per symbol of g->dt, the index of its dim in D[] and its step (the table's
     * symbol counts steps: the dim is D[j] = step * s) */
    int *sym_d;
    int64_t *sym_step;
    int rt_pos[CIR_MAX_RT_SYMS];   /* per size the run knows: the id of the node bringing it, or -1 */
    int *dims_node;         /* per value id: the node serial whose function declared dV<id>, or -1 */
    int node_serial;
    bool cur_symbolic;      /* the node being emitted is symbolic (cg_node_symbolic) */
    int n_ranged;           /* D's first entries: the ranged symbols (N_SYMS); the run's sizes follow */
    const cir_node *cur_node;
    /* --precision fp16|bf16: the 16-bit type (else CIR_UNDEF); per value id, 1 when the constant
     * is stored in it, 2 when kept float32 (plan_w16); a reader of a 16-bit constant that
     * plan_w16 did not foresee (its id + 1: an internal error) */
    cir_dtype w16;
    uint8_t *w16_ok;       /* 3: packed when a context is created (cg_packs_at_create); 4: its call emitted;
                            * 5: stored in 16 bits and kept so in memory (cg_w16_resident) */
    uint8_t *w16_src;      /* per value id: 1 when only such packing reads it (it goes in the transient layout) */
    int w16_stray;
    bool w16_exact_only;   /* a float16 or bfloat16 model without --precision: only weights the type holds exactly */
    int w16_asked;         /* the node being emitted asked for this value (its id + 1) in 16 bits (cg_w16_resident) */
    cuvil_sb init;         /* the part's calls that pack weights when a context is created */
    uint8_t *part_init;    /* per part: whether it has an init function */
    size_t init_tmp;       /* the floats the largest of those calls needs */
};

#define BLOB_ALIGN 64

const char *cg_ctype(cir_dtype t) {
    switch (t) {
    case CIR_F32: return "float";
    case CIR_F64: return "double";
    case CIR_I64: return "int64_t";
    case CIR_I32: return "int32_t";
    case CIR_I16: return "int16_t";
    case CIR_I8: case CIR_I4: return "int8_t";
    case CIR_U8: case CIR_BOOL: case CIR_U4: return "uint8_t";
    case CIR_U16: case CIR_F16: case CIR_BF16: return "uint16_t";
    case CIR_U32: return "uint32_t";
    case CIR_U64: return "uint64_t";
    default: return "unsigned char";
    }
}

/* fmt and its arguments as a string living until the node's emission ends. */
static const char *vfmt_str(cg_ctx *cg, const char *fmt, va_list ap0) {
    va_list ap;
    va_copy(ap, ap0);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = len >= 0 ? cuvil_arena_alloc(&cg->strs, (size_t)len + 1) : NULL;
    if (!s) {
        cg->body.oom = true;   /* fails the build at the end */
        return "NULL /* out of memory */";
    }
    va_copy(ap, ap0);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return s;
}

static const char *fmt_str(cg_ctx *cg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt_str(cg_ctx *cg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *s = vfmt_str(cg, fmt, ap);
    va_end(ap);
    return s;
}

/* --precision fp16|bf16: whether input j of a node of op k is a weight that may be stored in
 * 16 bits: a convolution's or matrix product's weights and bias, batch and layer normalisation's
 * parameters, an embedding table, an RNN's weights and biases, the weights packed for a kernel
 * (j -1: cir_node.low.packed). A constant that any other input reads (an Add's or Mul's operand,
 * which may be a rotary embedding's frequencies or a float index; a Pow's exponents; an
 * attention mask; quantisation scales), or that is a graph output, stays float32. */
static bool w16_weight(cir_op_kind k, int j) {
    switch (k) {
    case CIR_OP_CONV: case CIR_OP_CONV_TRANSPOSE: case CIR_OP_CONV_ND: case CIR_OP_CONV_TRANSPOSE_ND: case CIR_OP_GEMM:
        return j == -1 || j == 1 || j == 2;
    case CIR_OP_MATMUL: case CIR_OP_PRELU: return j == -1 || j == 1;
    case CIR_OP_MBBLOCK: case CIR_OP_BATCH_NORM: return j != 0;
    case CIR_OP_LAYER_NORM: case CIR_OP_INSTANCE_NORM: return j == 1 || j == 2;
    case CIR_OP_GATHER: return j == 0;
    case CIR_OP_RNN: return j == -1 || j == 1 || j == 2 || j == 3;   /* W, R, B */
    default: return false;
    }
}

/* Whether op k reads any weight (the check that a 16-bit constant is read only where foreseen). */
static bool w16_reader(cir_op_kind k) {
    for (int j = -1; j < 8; j++)
        if (w16_weight(k, j)) return true;
    return false;
}

/* The smallest float32 constant stored in 16 bits: scalars and short vectors stay exact. */
#define W16_MIN_ELEMS 64

/* Whether the cnt floats at f may be stored in the 16-bit type t: each finite one stays finite
 * (a half holds at most 65504; bfloat16 rounds past 3.3961e38 to inf: -FLT_MAX, a mask's
 * value, would become -inf). */
/* x in the 16-bit type t (CIR_F16 or CIR_BF16), rounded to nearest even; and back, exactly */
static uint16_t narrow16(cir_dtype t, float x) { return t == CIR_F16 ? cir_f32_to_f16(x) : cir_f32_to_bf16(x); }
static float round16(cir_dtype t, float x) {
    return t == CIR_F16 ? cir_f16_to_f32(narrow16(t, x)) : cir_bf16_to_f32(narrow16(t, x));
}

static bool w16_fits(cir_dtype t, const float *f, int64_t cnt) {
    if (cnt < W16_MIN_ELEMS) return false;
    for (int64_t i = 0; i < cnt; i++) {
        if (!isfinite(f[i])) continue;
        const float r = round16(t, f[i]);
        if (!isfinite(r)) return false;
    }
    return true;
}

/* Whether each of the cnt floats at f is a value of the 16-bit type t (a NaN stays a NaN):
 * stored so, none changes. */
static bool w16_exact(cir_dtype t, const float *f, int64_t cnt) {
    if (cnt < W16_MIN_ELEMS) return false;
    for (int64_t i = 0; i < cnt; i++) {
        const float r = round16(t, f[i]);
        if (r != f[i] && !(isnan(r) && isnan(f[i]))) return false;
    }
    return true;
}

static bool w16_may(const cg_ctx *cg, const float *f, int64_t cnt) {
    return cg->w16_exact_only ? w16_exact(cg->w16, f, cnt) : w16_fits(cg->w16, f, cnt);
}

static bool add_seg(cg_output *o, uint64_t dst, uint64_t src, uint64_t n, int kind) {
    if (o->n_segs == o->cap_segs) {
        int cap = o->cap_segs ? 2 * o->cap_segs : 64;
        struct cg_wseg *p = cuvil_realloc(o->segs, sizeof *p * (size_t)cap);
        if (!p) return false;
        o->segs = p;
        o->cap_segs = cap;
    }
    o->segs[o->n_segs++] = (struct cg_wseg){dst, src, n, kind};
    return true;
}

/* Appends nbytes of data to the blob (aligned) and returns their offset in the layout the nodes
 * read. narrow (--precision fp16|bf16 only): data is floats, stored in 16 bits. transient (only
 * with narrow's mode): the offset is in the layout create() frees once it has packed the weights
 * (the source of weights packed when a context is created, cg_pack_at_create). */
static int64_t blob_place(cg_ctx *cg, const void *data, size_t nbytes, bool narrow, bool transient) {
    cg_output *o = cg->out;
    size_t *len = transient ? &o->transient_len : &o->weights_len;
    size_t off = cuvil_align_up(*len, BLOB_ALIGN);
    static const char zeros[BLOB_ALIGN];
    *len = off + nbytes;
    if (cg->w16 == CIR_UNDEF) {   /* the blob is the layout */
        cuvil_sb_append(&o->weights, zeros, off - o->weights.len);
        cuvil_sb_append(&o->weights, data, nbytes);
        return (int64_t)off;
    }
    const int t = transient ? CG_WSEG_TRANSIENT : 0;
    struct cg_wseg *last = o->n_segs ? &o->segs[o->n_segs - 1] : NULL;
    if (!narrow && last && last->kind == t && o->merge_raw) {   /* one copy: the padding between them stored too */
        uint64_t pad = off - (last->dst + last->n);
        for (uint64_t k = 0; k < pad; k += BLOB_ALIGN)
            cuvil_sb_append(&o->weights, zeros, pad - k < BLOB_ALIGN ? (size_t)(pad - k) : BLOB_ALIGN);
        cuvil_sb_append(&o->weights, data, nbytes);
        last->n += pad + nbytes;
        return (int64_t)off;
    }
    size_t src = cuvil_align_up(o->weights.len, BLOB_ALIGN), cnt = nbytes / sizeof(float);
    cuvil_sb_append(&o->weights, zeros, src - o->weights.len);
    if (!narrow) {
        cuvil_sb_append(&o->weights, data, nbytes);
        if (!add_seg(o, off, src, nbytes, t)) o->weights.oom = true;
        o->merge_raw = true;
        return (int64_t)off;
    }
    const float *f = data;
    for (size_t i = 0; i < cnt; i++) {
        uint16_t h = narrow16(cg->w16, f[i]);
        cuvil_sb_append(&o->weights, &h, sizeof h);
    }
    if (!add_seg(o, off, src, cnt, t | (cg->w16 == CIR_F16 ? 1 : 2))) o->weights.oom = true;
    o->merge_raw = false;
    o->narrowed_bytes += nbytes;
    return (int64_t)off;
}

/* A constant read in place in 16 bits (cg_w16_resident): its values narrowed, after the stored
 * weights. A 16-bit model's (w16_exact_only) go in the layout, as raw bytes, so that the stored
 * weights stay the layout; --precision's only in the stored weights (read through STORED), the
 * layout holding no room for them. Returns the offset ptr() reads it at. */
static int64_t place_w16(cg_ctx *cg, const cir_value *rv) {
    cg_output *o = cg->out;
    const int64_t cnt = cir_numel(rv);
    const float *f = rv->data;
    uint16_t *h = cuvil_malloc((size_t)(cnt ? cnt : 1) * sizeof *h);
    if (!h) {
        o->weights.oom = true;
        return 0;
    }
    for (int64_t i = 0; i < cnt; i++) h[i] = narrow16(cg->w16, f[i]);
    o->narrowed_bytes += cir_nbytes(rv);
    o->resident16_bytes += cir_nbytes(rv);
    int64_t off;
    if (cg->w16_exact_only) {
        off = blob_place(cg, h, (size_t)cnt * sizeof *h, false, false);
    } else {
        static const char zeros[BLOB_ALIGN];
        const size_t src = cuvil_align_up(o->weights.len, BLOB_ALIGN);
        cuvil_sb_append(&o->weights, zeros, src - o->weights.len);
        cuvil_sb_append(&o->weights, h, (size_t)cnt * sizeof *h);
        o->merge_raw = false;   /* (the next raw constant's source is not where its layout room is) */
        off = (int64_t)src;
    }
    cuvil_free(h);
    return off;
}

/* Places constant value r in the blob (the first time it is read). */
static int64_t place_const(cg_ctx *cg, int r) {
    if (cg->const_off[r] < 0) {
        cir_value *rv = cir_val(cg->g, r);
        cg_output *o = cg->out;
        /* packed when a context is created: room in the layout only */
        if (cg->w16_ok && (cg->w16_ok[r] == 3 || cg->w16_ok[r] == 4)) {
            size_t off = cuvil_align_up(o->weights_len, BLOB_ALIGN);
            o->weights_len = off + cir_nbytes(rv);
            o->merge_raw = false;   /* (its room is not stored) */
            cg->const_off[r] = (int64_t)off;
            return cg->const_off[r];
        }
        if (rv->dtype == CIR_F32) o->f32_bytes += cir_nbytes(rv);
        if (cg->w16_ok && cg->w16_ok[r] == 5)
            cg->const_off[r] = place_w16(cg, rv);
        else
            cg->const_off[r] = blob_place(cg, rv->data, cir_nbytes(rv), cg->w16_ok && cg->w16_ok[r] == 1,
                                          cg->w16_src && cg->w16_src[r] == 1);
    }
    /* (a reader the plan did not foresee: an internal error, never the 16-bit values read as exact) */
    if (cg->w16_ok && cg->w16_ok[r] == 1 && (!cg->cur_node || !w16_reader(cg->cur_node->kind)) && !cg->w16_stray)
        cg->w16_stray = r + 1;
    /* (16-bit values read in place: only by a kernel that asked for them) */
    if (cg->w16_ok && cg->w16_ok[r] == 5 && (!cg->cur_node || cg->w16_asked != r + 1) && !cg->w16_stray)
        cg->w16_stray = r + 1;
    return cg->const_off[r];
}

/* For a 16-bit model: the type (CIR_F16 or CIR_BF16) that holds exactly more bytes of its float32
 * constants of W16_MIN_ELEMS or more, or CIR_UNDEF when neither holds any. */
static cir_dtype half_weights_type(cir_graph *g) {
    uint64_t bytes[2] = {0, 0};
    for (int v = 0; v < g->n_values; v++) {
        const cir_value *x = cir_val(g, v);
        if (!cir_is_const(x) || x->dtype != CIR_F32 || !x->data) continue;
        for (int k = 0; k < 2; k++)
            if (w16_exact(k ? CIR_BF16 : CIR_F16, x->data, cir_numel(x))) bytes[k] += cir_nbytes(x);
    }
    return !bytes[0] && !bytes[1] ? CIR_UNDEF : bytes[0] >= bytes[1] ? CIR_F16 : CIR_BF16;
}

/* --precision fp16|bf16: which float32 constants are stored in 16 bits (w16_ok 1; 2 kept). */
static cuvil_status plan_w16(cg_ctx *cg, const cuvil_options *o) {
    cir_graph *g = cg->g;
    cg->w16 = o->precision == CUVIL_PRECISION_FP16 ? CIR_F16 : o->precision == CUVIL_PRECISION_BF16 ? CIR_BF16 : CIR_UNDEF;
    if (cg->w16 == CIR_UNDEF && g->half_model && o->precision != CUVIL_PRECISION_FP32_STRICT) {
        /* a float16 or bfloat16 model (its kernels run in float32 between casts): the weights its
         * 16-bit initializers became are stored and read in that type, exactly */
        cg->w16 = half_weights_type(g);
        cg->w16_exact_only = true;
    }
    if (cg->w16 == CIR_UNDEF) return CUVIL_OK;
    cg->w16_ok = cuvil_calloc((size_t)g->n_values + 1, 1);
    if (!cg->w16_ok) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int j = 0; j <= cir_node_n_reads(n); j++) {
            const bool packed = j == cir_node_n_reads(n);
            int v = packed ? n->low.packed : cir_node_read(n, j);
            if (v < 0) continue;
            const cir_value *x = cir_val(g, v);
            if (!cir_is_const(x) || x->dtype != CIR_F32) continue;
            cg->w16_ok[v] = cg->w16_ok[v] == 2 || !w16_weight(n->kind, packed ? -1 : j < n->n_in ? j : 99) ? 2 : 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) cg->w16_ok[g->outputs[i]] = 2;
    /* Winograd-transformed weights of fixed-shape convs: packed when a context is created, unless
     * another reader of the same packed weights is symbolic (its parameters are the run's) */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            const cir_node *n = cir_node_at(g, i);
            int a = n->low.algo, pk = n->low.packed;
            if (n->dead || pk < 0) continue;
            const bool ok = n->kind == CIR_OP_CONV && !cg_node_symbolic(g, n) &&
                            (a == CUVIL_CONV_WINOGRAD || a == CUVIL_CONV_WINOGRAD_T || a == CUVIL_CONV_WINOGRAD2_T) &&
                            n->in[1] >= 0 && cir_is_const(cir_val(g, n->in[1])) && cir_val(g, n->in[1])->dtype == CIR_F32;
            if (pass == 0 && ok && cg->w16_ok[pk] == 1) cg->w16_ok[pk] = 3;
            else if (pass == 1 && !ok && cg->w16_ok[pk] == 3) cg->w16_ok[pk] = 1;
        }
    /* a Gemm's or MatMul's prepacked B and a Gather's table, which no other node reads: kept in 16
     * bits in memory (5), read in place and widened by the kernel (cg_w16_resident) */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            const cir_node *n = cir_node_at(g, i);
            if (n->dead) continue;
            for (int j = 0; j <= cir_node_n_reads(n); j++) {
                const bool packed = j == cir_node_n_reads(n);
                const int v = packed ? n->low.packed : cir_node_read(n, j);
                if (v < 0) continue;
                /* (a product's B it packed is not read when the model runs: a table tied to a
                 * head, Gather's and the head's source, stays a table) */
                if (!packed && j == 1 && n->low.packed >= 0 && (n->kind == CIR_OP_GEMM || n->kind == CIR_OP_MATMUL))
                    continue;
                const bool ok = packed ? n->kind == CIR_OP_GEMM || n->kind == CIR_OP_MATMUL
                                       : n->kind == CIR_OP_GATHER && j == 0 && n->in[0] == v && n->in[1] != v;
                if (pass == 0 && ok && cg->w16_ok[v] == 1) cg->w16_ok[v] = 5;
                else if (pass == 1 && !ok && cg->w16_ok[v] == 5) cg->w16_ok[v] = 1;
            }
        }
    /* a 16-bit model's: only those, in the layout as they are stored, so that the stored weights
     * stay the layout (no copy when a context is created, a caller's buffer allowed) */
    if (cg->w16_exact_only)
        for (int v = 0; v < g->n_values; v++)
            if (cg->w16_ok[v] == 1 || cg->w16_ok[v] == 3) cg->w16_ok[v] = 2;
    /* the sources only those packings read: 1, else 2 (a kernel reads it) */
    cg->w16_src = cuvil_calloc((size_t)g->n_values + 1, 1);
    if (!cg->w16_src) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int j = 0; j < cir_node_n_reads(n); j++) {
            int v = cir_node_read(n, j);
            if (v < 0 || !cir_is_const(cir_val(g, v))) continue;
            bool by_pack = n->kind == CIR_OP_CONV && j == 1 && n->low.packed >= 0 && cg->w16_ok[n->low.packed] == 3;
            cg->w16_src[v] = by_pack && cg->w16_src[v] != 2 ? 1 : 2;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) cg->w16_src[g->outputs[i]] = 2;
    for (int v = 0; v < g->n_values; v++) {
        const cir_value *x = cir_val(g, v);
        if (cg->w16_ok[v] != 1 && cg->w16_ok[v] != 5) continue;
        if (!x->data || !w16_may(cg, x->data, cir_numel(x))) {
            cg->w16_ok[v] = 2;
            cg->out->kept_range += cir_numel(x) >= W16_MIN_ELEMS;
        }
    }
    return CUVIL_OK;
}

/* Offsets are named, not bare numbers: "A_V12" for value 12's place in the arena, "W_V3" for a
 * constant's in the weights; the #define (with the value's name, sanitised, as a comment) is
 * written the first time one is used, before the node's function. */
static void comment_str(cuvil_sb *o, const char *s);
static const char *offset_name_k(cg_ctx *cg, int vid, int kind, int64_t off) {
    static const char *const pre[] = {"A", "W", "S"};
    const uint8_t bit = (uint8_t)(1u << kind);
    if (!(cg->named[vid] & bit)) {
        cg->named[vid] |= bit;
        cuvil_sb_printf(&cg->params, "#define %s_V%d ((size_t)%lld)   /* ", pre[kind], vid, (long long)off);
        comment_str(&cg->params, cir_val(cg->g, vid)->name);
        cuvil_sb_puts(&cg->params, " */\n");
    }
    return fmt_str(cg, "%s_V%d", pre[kind], vid);
}

static const char *offset_name(cg_ctx *cg, int vid, bool weights, int64_t off) {
    return offset_name_k(cg, vid, weights ? 1 : 0, off);
}

static const char *ptr(cg_ctx *cg, int vid, bool writable) {
    cir_value *v = cir_val(cg->g, vid);
    cg_loc l = cg->plan.loc[vid];
    const char *t = cg_ctype(v->dtype), *c = writable ? "" : "const ";
    switch (l.kind) {
    case CG_LOC_INPUT: return fmt_str(cg, "((const %s *)in[%lld])", t, (long long)l.index);
    case CG_LOC_OUTPUT:
        if (l.off)   /* a Concat's input written in its slice of the output */
            return fmt_str(cg, "((%s%s *)(void *)((unsigned char *)out[%lld] + %lld))", c, t, (long long)l.index,
                           (long long)l.off);
        return fmt_str(cg, "((%s%s *)out[%lld])", c, t, (long long)l.index);
    case CG_LOC_ARENA: return fmt_str(cg, "((%s%s *)(A + %s))", c, t, offset_name(cg, vid, false, l.index));
    case CG_LOC_CONST: {
        int r = (int)l.index;
        place_const(cg, r);
        if (cg->w16_ok && cg->w16_ok[r] == 5) {   /* 16-bit values (cg_w16_resident): in the layout or where stored */
            const bool in_layout = cg->w16_exact_only;
            return fmt_str(cg, "((const uint16_t *)(const void *)(%s + %s))", in_layout ? "WEIGHTS" : "STORED",
                           offset_name_k(cg, r, in_layout ? 1 : 2, cg->const_off[r]));
        }
        return fmt_str(cg, "((const %s *)(WEIGHTS + %s))", t, offset_name(cg, r, true, cg->const_off[r]));
    }
    default:
        if (!cg->unplanned) cg->unplanned = vid + 1;
        return "NULL /* no storage planned */";
    }
}

const char *cg_refs(cg_ctx *cg, const int *ids, int n) {
    static const char *const kinds[] = {"CUVIL_REF_ARENA", "CUVIL_REF_WEIGHTS", "CUVIL_REF_INPUT", "CUVIL_REF_OUTPUT"};
    cuvil_sb sb = {0};
    cuvil_sb_puts(&sb, "{");
    for (int i = 0; i < n; i++) {
        int vid = ids[i];
        cg_loc l = cg->plan.loc[vid];
        int kind = 0;
        int64_t index = l.index;
        switch (l.kind) {
        case CG_LOC_ARENA: kind = 0; break;
        case CG_LOC_INPUT: kind = 2; break;
        case CG_LOC_OUTPUT: kind = 3; break;
        case CG_LOC_CONST:
            place_const(cg, (int)l.index);
            kind = 1;
            index = cg->const_off[l.index];
            break;
        default: CUVIL_ASSERT(!"cg_refs: a value without storage");
        }
        const char *idx = kind == 0 ? offset_name(cg, vid, false, index)
                          : kind == 1 ? offset_name(cg, (int)l.index, true, index) : fmt_str(cg, "%lld", (long long)index);
        cuvil_sb_printf(&sb, "%s{ %s, %s, %lld }", i ? ", " : " ", kinds[kind], idx,
                        (long long)(kind == 3 ? l.off : 0));
    }
    cuvil_sb_puts(&sb, " }");
    const char *p = sb.oom ? NULL : cg_param(cg, "cuvil_ref[]", "%s", sb.s);
    cuvil_sb_free(&sb);
    return p ? p : "NULL /* out of memory */";
}

const char *cg_in(cg_ctx *cg, int value_id) { return ptr(cg, value_id, false); }

const char *cg_out(cg_ctx *cg, int value_id) { return ptr(cg, value_id, true); }

const char *cg_w16_arg(int kind) {
    return kind == CUVIL_W16_F16 ? ", CUVIL_W16_F16" : kind == CUVIL_W16_BF16 ? ", CUVIL_W16_BF16"
                                   : kind == CUVIL_W16_BF16_DOT             ? ", CUVIL_W16_BF16_DOT"
                                                                            : "";
}

int cg_w16_resident(cg_ctx *cg, int value, bool product) {
    if (!cg->w16_ok || value < 0 || cg->w16_ok[value] != 5) return 0;
    cg->w16_asked = value + 1;
    if (cg->w16 == CIR_F16) return CUVIL_W16_F16;
    return product && !cg->w16_exact_only ? CUVIL_W16_BF16_DOT : CUVIL_W16_BF16;
}

bool cg_packs_at_create(cg_ctx *cg, const cir_node *n) {
    return cg->w16_ok && n->low.packed >= 0 && (cg->w16_ok[n->low.packed] == 3 || cg->w16_ok[n->low.packed] == 4) &&
           !cg_node_symbolic(cg->g, n);
}

void cg_pack_at_create(cg_ctx *cg, const char *fn, const char *params, int source, int packed, size_t tmp_floats) {
    if (cg->w16_ok[packed] == 4) return;   /* (one weight packed alike for several convs: once) */
    cg->w16_ok[packed] = 4;
    place_const(cg, packed);
    const char *src = ptr(cg, source, false);
    if (cg->w16_src[source] == 1)   /* in the transient layout X */
        src = fmt_str(cg, "((const float *)(void *)(X + %s))", offset_name(cg, source, true, cg->const_off[source]));
    cuvil_sb_printf(&cg->init, "    %s(&%s, %s, (float *)(void *)(W + %s), T);\n", fn, params, src,
                    offset_name(cg, packed, true, cg->const_off[packed]));
    if (tmp_floats > cg->init_tmp) cg->init_tmp = tmp_floats;
}

const char *cg_data(cg_ctx *cg, const void *data, size_t nbytes, cir_dtype dtype) {
    /* data derived at compile time (converted exponents, normalised indices, folded BatchNorm
     * scales) counts as folded: one shared constant used by many nodes must not multiply */
    cir_graph *g = cg->g;
    if (nbytes > g->limits.folded_bytes || g->folded_bytes > g->limits.folded_bytes - nbytes) {
        cg->over_limit = true;
        return "NULL /* over the folded_bytes limit */";
    }
    g->folded_bytes += nbytes;
    if (dtype == CIR_F32) cg->out->f32_bytes += nbytes;
    /* a BatchNorm's scale and shift, derived from its parameters, follow --precision */
    bool narrow = cg->w16 != CIR_UNDEF && !cg->w16_exact_only && dtype == CIR_F32 && cg->cur_node &&
                  cg->cur_node->kind == CIR_OP_BATCH_NORM && w16_may(cg, data, (int64_t)(nbytes / sizeof(float)));
    int64_t off = blob_place(cg, data, nbytes, narrow, false);
    int k = cg->n_data++;
    cuvil_sb_printf(&cg->params, "#define W_D%d ((size_t)%lld)   /* derived at compile time */\n", k, (long long)off);
    return fmt_str(cg, "((const %s *)(WEIGHTS + W_D%d))", cg_ctype(dtype), k);
}

const char *cg_param(cg_ctx *cg, const char *type, const char *init_fmt, ...) {
    int k = cg->n_params++;
    size_t tl = strlen(type);
    bool array = tl > 2 && !strcmp(type + tl - 2, "[]");
    /* symbolic nodes: a local, since its numbers may be expressions of the run's dims */
    bool local = cg->cur_symbolic;
    cuvil_sb *o = local ? &cg->locals : &cg->params;
    cuvil_sb_printf(o, "%sconst %.*s P%d%s = ", local ? "    " : "static ", (int)(array ? tl - 2 : tl), type, k,
                    array ? "[]" : "");
    va_list ap;
    va_start(ap, init_fmt);
    cuvil_sb_vprintf(o, init_fmt, ap);
    va_end(ap);
    cuvil_sb_puts(o, ";\n");
    return fmt_str(cg, "P%d", k);
}

const char *cg_scratch(cg_ctx *cg, size_t bytes, const char *size_expr_fmt, ...) {
    if (bytes > cg->scratch_bytes) cg->scratch_bytes = bytes;
    char buf[512];
    va_list ap;
    va_start(ap, size_expr_fmt);
    vsnprintf(buf, sizeof buf, size_expr_fmt, ap);
    va_end(ap);
    if (cg->cur_symbolic) {
        /* its parameters are the run's: bytes was computed at the dims' upper bounds, and the
         * node checks that this run needs no more (a kernel whose scratch is not monotone in
         * its dims fails the run rather than overrun) */
        cg_printf(cg, "    if (%s > (size_t)%zu) return 1;\n", buf, bytes);
        cg_fallible(cg, "needs more scratch memory than the compiler reserved for its dims' upper bounds (an internal error)");
        return "S";
    }
    cuvil_sb_printf(&cg->scratch, "    t = %s;\n    if (t > s) s = t;\n", buf);
    return "S";
}

void cg_found_call(cg_ctx *cg, int slot, const char *what, const char *call_fmt, ...) {
    va_list ap;
    va_start(ap, call_fmt);
    const char *call = vfmt_str(cg, call_fmt, ap);
    va_end(ap);
    cg_printf(cg, "    D[%d] = %s;\n    if (D[%d] < 0) return 1;\n", slot, call, slot);
    cg_fallible(cg, what);
}

/* ===== Symbolic dims ================================================================= */
cir_graph *cg_graph(cg_ctx *cg) { return cg->g; }
const char *cg_str(cg_ctx *cg, const char *s) { return fmt_str(cg, "%s", s); }
const cir_node *cg_node(cg_ctx *cg) { return cg->cur_node; }

int cg_rt_slot(cg_ctx *cg, int dsym) { return cg->sym_d[dsym]; }

/* How many of graph outputs 0 .. n-1 are optional. */
static int optional_outputs(const cir_graph *g, int n) {
    int j = 0;
    for (int k = 0; k < n; k++) j += cir_val((cir_graph *)g, g->outputs[k])->optional;
    return j;
}

int cg_present_slot(cg_ctx *cg, int i) {
    cir_graph *g = cg->g;
    if (i < 0 || i >= g->n_outputs || !cir_val(g, g->outputs[i])->optional) return -1;
    return cg->n_ranged + g->n_rt_syms + optional_outputs(g, i);
}

bool cg_node_symbolic(const cir_graph *g, const cir_node *n) {
    if (!g->symdims) return false;
    if (n->n_rt) return true;   /* it reads or finds sizes when the model runs */
    for (int i = 0; i < n->n_in; i++) {
        const cir_value *v = cir_in(g, n, i);
        if (v && !cir_value_fixed(v)) return true;
        /* values that follow the symbols (a Slice's start at the iteration number, its length 1
         * whatever it is: fixed shapes, offsets of this run) */
        if (v && v->sval && !cir_is_const(v)) return true;
    }
    for (int i = 0; i < n->n_out; i++) {
        const cir_value *v = n->out[i] >= 0 ? cir_val(g, n->out[i]) : NULL;
        if (v && !cir_value_fixed(v)) return true;
    }
    for (int j = n->n_in; j < cir_node_n_reads(n); j++)   /* the values the epilogue adds */
        if (cir_node_read(n, j) >= 0 && !cir_value_fixed(cir_val(g, cir_node_read(n, j)))) return true;
    return false;
}

static void sym_c(cuvil_sb *o, int k, void *user) {
    const cg_ctx *cg = user;
    if (cg->sym_step[k] > 1) cuvil_sb_printf(o, "(D[%d] / %lld)", cg->sym_d[k], (long long)cg->sym_step[k]);
    else cuvil_sb_printf(o, "D[%d]", cg->sym_d[k]);
}

static const char *dim_c(cg_ctx *cg, const cir_dim *e, cuvil_arena *a) {
    cuvil_sb sb = {0};
    if (e) cir_dim_print_c(&sb, e, sym_c, cg);
    else cuvil_sb_puts(&sb, "0 /* no expression: out of memory */");
    const char *s = sb.oom ? NULL : cuvil_arena_strdup(a, sb.s ? sb.s : "0");
    cuvil_sb_free(&sb);
    if (!s) cg->body.oom = true;
    return s ? s : "0";
}

const char *cg_dim_c(cg_ctx *cg, const cir_dim *e) { return dim_c(cg, e, &cg->strs); }

const char *cg_nbytes(cg_ctx *cg, int vid) {
    cir_value *v = cir_val(cg->g, vid);
    if (cir_value_fixed(v) || v->seq_n >= 0) return fmt_str(cg, "%zu", cir_nbytes(v));   /* (a sequence: its block) */
    return fmt_str(cg, "((size_t)%s * %zu)", cg_dim_c(cg, cir_numel_x(cg->g, v)), cir_dtype_size(v->dtype));
}

const char *cg_numel(cg_ctx *cg, int vid) {
    cir_value *v = cir_val(cg->g, vid);
    if (cir_value_fixed(v)) return fmt_str(cg, "%lld", (long long)cir_numel(v));
    return cg_dim_c(cg, cir_numel_x(cg->g, v));
}

const char *cg_dimprod(cg_ctx *cg, int vid, int from, int to, int64_t scale) {
    cir_value *v = cir_val(cg->g, vid);
    const cir_dim *e = cir_dim_const(&cg->g->dt, scale);
    for (int i = from; i < to; i++) e = cir_dim_mul(&cg->g->dt, e, cir_dimx(cg->g, v, i));
    if (!e) {
        cg->body.oom = true;   /* bounded products of a value's dims: only out of memory fails */
        return "0";
    }
    return cir_dim_is_const(e) ? fmt_str(cg, "%lld", (long long)e->c) : cg_dim_c(cg, e);
}

const char *cg_dims_init(cg_ctx *cg, int vid, int r) {
    const cir_value *v = cir_val(cg->g, vid);
    cuvil_sb sb = {0};
    cuvil_sb_puts(&sb, "{ ");
    for (int d = 0; d < r; d++) {
        int i = d - (r - v->ndim);
        cuvil_sb_printf(&sb, "%s%s", d ? ", " : "", i < 0 ? "1" : cg_dimprod(cg, vid, i, i + 1, 1));
    }
    cuvil_sb_puts(&sb, r ? " }" : "0 }");
    const char *s = sb.oom ? NULL : cg_str(cg, sb.s ? sb.s : "{ 0 }");
    cuvil_sb_free(&sb);
    if (!s) cg->body.oom = true;
    return s ? s : "{ 0 }";
}

const char *cg_dims(cg_ctx *cg, int vid) {
    if (cg->dims_node[vid] != cg->node_serial) {
        cg->dims_node[vid] = cg->node_serial;
        cir_value *v = cir_val(cg->g, vid);
        cuvil_sb_printf(&cg->locals, "    const int64_t dV%d[%d] = {", vid, v->ndim ? v->ndim : 1);
        for (int i = 0; i < v->ndim; i++)
            cuvil_sb_printf(&cg->locals, "%s%s", i ? ", " : " ", v->dx[i] ? cg_dim_c(cg, v->dx[i]) : fmt_str(cg, "%lld", (long long)v->dims[i]));
        cuvil_sb_puts(&cg->locals, v->ndim ? " };\n" : " 1 };\n");
    }
    return fmt_str(cg, "dV%d", vid);
}

const char *cg_bind(cg_ctx *cg, const char *type, const char *bind, const int *ids, int n, const char *init_fmt, ...) {
    int k = cg->n_params++;
    cuvil_sb_printf(&cg->locals, "    %s P%d = ", type, k);
    va_list ap;
    va_start(ap, init_fmt);
    cuvil_sb_vprintf(&cg->locals, init_fmt, ap);
    va_end(ap);
    cuvil_sb_puts(&cg->locals, ";\n");
    cuvil_sb nd = {0}, dd = {0};
    for (int i = 0; i < n; i++) {
        const cir_value *v = ids[i] >= 0 ? cir_val(cg->g, ids[i]) : NULL;
        cuvil_sb_printf(&nd, "%s%d", i ? ", " : "", v ? v->ndim : -1);
        cuvil_sb_printf(&dd, "%s%s", i ? ", " : "", v ? cg_dims(cg, ids[i]) : "NULL");
    }
    cg_printf(cg, "    %s(&P%d, %d, (const int[]){ %s }, (const int64_t *const[]){ %s });\n", bind, k, n, nd.s ? nd.s : "0",
              dd.s ? dd.s : "NULL");
    if (nd.oom || dd.oom) cg->body.oom = true;
    cuvil_sb_free(&nd);
    cuvil_sb_free(&dd);
    return fmt_str(cg, "P%d", k);
}

const char *cg_bind_node(cg_ctx *cg, const cir_node *n, const char *type, const char *bind, const char *init) {
    int ids[64], k = 0;
    CUVIL_ASSERT(n->n_in + n->n_out <= 64);
    for (int i = 0; i < n->n_in; i++) ids[k++] = n->in[i];
    for (int i = 0; i < n->n_out; i++) ids[k++] = n->out[i];
    return cg_bind(cg, type, bind, ids, k, "%s", init);
}

const char *cg_rt_type(cir_dtype t) {
    static const char *const names[CIR_DTYPE__COUNT] = {
        [CIR_F32] = "CUVIL_T_F32", [CIR_F64] = "CUVIL_T_F64", [CIR_F16] = "CUVIL_T_F16", [CIR_BF16] = "CUVIL_T_BF16",
        [CIR_I8] = "CUVIL_T_I8",   [CIR_I16] = "CUVIL_T_I16", [CIR_I32] = "CUVIL_T_I32", [CIR_I64] = "CUVIL_T_I64",
        [CIR_U8] = "CUVIL_T_U8",   [CIR_U16] = "CUVIL_T_U16", [CIR_U32] = "CUVIL_T_U32", [CIR_U64] = "CUVIL_T_U64",
        [CIR_BOOL] = "CUVIL_T_BOOL", [CIR_I4] = "CUVIL_T_I4", [CIR_U4] = "CUVIL_T_U4",
    };
    CUVIL_ASSERT(t > CIR_UNDEF && t < CIR_DTYPE__COUNT);
    return names[t];
}

void cg_fallible(cg_ctx *cg, const char *what) { cg->fail_what = what; }

void cg_printf(cg_ctx *cg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cuvil_sb_vprintf(&cg->body, fmt, ap);
    va_end(ap);
}

const char *cg_float(float x, char buf[32]) {
    if (isinf(x)) snprintf(buf, 32, "%sINFINITY", x < 0 ? "-" : "");
    else if (isnan(x)) snprintf(buf, 32, "NAN");
    else {
        snprintf(buf, 32, "%.9g", (double)x);
        if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
        strcat(buf, "f");
    }
    return buf;
}

const char *cg_act(const cuvil_act_params *a, char buf[128]) {
    static const char *const names[] = {
        "CUVIL_ACT_NONE", "CUVIL_ACT_RELU", "CUVIL_ACT_LEAKY_RELU", "CUVIL_ACT_CLIP", "CUVIL_ACT_SIGMOID",
        "CUVIL_ACT_HARD_SIGMOID", "CUVIL_ACT_HARD_SWISH", "CUVIL_ACT_TANH", "CUVIL_ACT_EXP", "CUVIL_ACT_LOG",
        "CUVIL_ACT_SQRT", "CUVIL_ACT_NEG", "CUVIL_ACT_ABS", "CUVIL_ACT_RECIPROCAL", "CUVIL_ACT_ERF", "CUVIL_ACT_GELU",
        "CUVIL_ACT_ELU", "CUVIL_ACT_SOFTPLUS", "CUVIL_ACT_MISH", "CUVIL_ACT_SILU", "CUVIL_ACT_FLOOR", "CUVIL_ACT_CEIL",
        "CUVIL_ACT_ROUND", "CUVIL_ACT_SIN", "CUVIL_ACT_COS", "CUVIL_ACT_TAN", "CUVIL_ACT_ASIN", "CUVIL_ACT_ACOS",
        "CUVIL_ACT_ATAN", "CUVIL_ACT_SINH", "CUVIL_ACT_COSH", "CUVIL_ACT_ASINH", "CUVIL_ACT_ACOSH", "CUVIL_ACT_ATANH",
        "CUVIL_ACT_SIGN", "CUVIL_ACT_SOFTSIGN", "CUVIL_ACT_SELU", "CUVIL_ACT_THRESHOLDED_RELU", "CUVIL_ACT_SHRINK",
        "CUVIL_ACT_GELU_TANH",
    }; /* keep in ORDER with enum cuvil_act */
    _Static_assert(sizeof names / sizeof names[0] == CUVIL_ACT__COUNT, "cuvil_act names");
    char al[32], be[32];
    CUVIL_ASSERT(a->act >= 0 && a->act < CUVIL_ACT__COUNT);
    snprintf(buf, 128, "{ .act = %s, .alpha = %s, .beta = %s }", names[a->act], cg_float(a->alpha, al), cg_float(a->beta, be));
    return buf;
}

const char *cg_i64(int64_t v, char buf[32]) {
    /* -9223372036854775808 is not a C literal (it is minus an out-of-range constant) */
    if (v == INT64_MIN) snprintf(buf, 32, "(-9223372036854775807LL - 1)");
    else snprintf(buf, 32, "%lldLL", (long long)v);
    return buf;
}

const char *cg_i64s(cg_ctx *cg, const int64_t *v, int n) {
    cuvil_sb sb = {0};
    char b[32];
    cuvil_sb_puts(&sb, "{ ");
    for (int i = 0; i < n; i++) cuvil_sb_printf(&sb, "%s%s", i ? ", " : "", cg_i64(v[i], b));
    cuvil_sb_puts(&sb, n ? " }" : "0 }");
    const char *s = cuvil_arena_strdup(&cg->strs, sb.s ? sb.s : "{ 0 }");
    cuvil_sb_free(&sb);
    return s ? s : "{ 0 }";
}

/* A node whose outputs all have values known as expressions (cir_value.sval): the C that
 * writes them. False (nothing written) for other nodes. */
static bool sval_fill(cg_ctx *cg, const cir_node *n) {
    if (!cg->g->symdims || n->n_out < 1 || n->n_post) return false;
    for (int i = 0; i < n->n_out; i++)
        if (n->out[i] < 0 || !cir_val(cg->g, n->out[i])->sval) return false;
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(cg->g, n->out[i]);
        const char *p = cg_out(cg, v->id);
        for (int64_t k = 0; k < cir_numel(v); k++)
            cg_printf(cg, "    %s[%lld] = (%s)%s;\n", p, (long long)k, cg_ctype(v->dtype), cg_dim_c(cg, v->sval[k]));
    }
    return true;
}

/* ===== The model file ================================================================ */
/* Model strings in comments: only the characters cuvil_sb_safe_text() keeps (no '*', '/',
 * '\\', '?', control or non-ASCII bytes), so no name can end a comment, open one, continue a
 * line or form a trigraph; long names are cut. */
#define COMMENT_NAME_MAX 96
static void comment_str(cuvil_sb *o, const char *s) { cuvil_sb_safe_text(o, s, COMMENT_NAME_MAX); }

static void tensor_infos(cir_graph *g, cuvil_sb *o, const char *name, const int *ids, int n) {
    cuvil_sb_printf(o, "static const cuvil_tensor_info %s[%d] = {\n", name, n ? n : 1);
    for (int i = 0; i < n; i++) {
        cir_value *v = cir_val(g, ids[i]);
        cuvil_sb_puts(o, "    { \"");
        cuvil_sb_c_escape(o, v->name);
        int nd = v->ndim > 0 ? v->ndim : 0;   /* (-1: a sequence that never holds an element) */
        cuvil_sb_printf(o, "\", %s, %d, {", cir_dtype_public_symbol(v->dtype), nd);
        for (int d = 0; d < nd; d++) cuvil_sb_printf(o, "%s%lld", d ? ", " : " ", (long long)v->dims[d]);
        cuvil_sb_puts(o, nd ? " }, {" : "0 }, {");
        for (int d = 0; d < nd; d++) {
            cuvil_sb_puts(o, d ? ", " : " ");
            if (v->dim_sym[d] >= 0) {
                cuvil_sb_puts(o, "\"");
                cuvil_sb_c_escape(o, g->syms[v->dim_sym[d]].name);
                cuvil_sb_puts(o, "\"");
            } else {
                cuvil_sb_puts(o, "NULL");
            }
        }
        /* @max: with symbolic dims, the descriptor states the upper bounds */
        cuvil_sb_printf(o, "%s}, %zu, ", nd ? " " : "NULL ", cir_nbytes(v));
        if (v->seq_n >= 0)   /* a sequence: its most elements, the dims they need not share, its layout */
            cuvil_sb_printf(o, "1, %d, 0x%xu, %zu, %zu, %d }, /*@max*/\n", v->seq_n,
                            (unsigned)(~v->seq_same & ((1u << nd) - 1)), cir_seq_hdr_bytes(v),
                            cir_seq_slot_bytes(v), v->optional);
        else
            cuvil_sb_printf(o, "0, 0, 0, 0, 0, %d }, /*@max*/\n", v->optional);
    }
    if (!n) cuvil_sb_puts(o, "    { 0 },\n");
    cuvil_sb_puts(o, "};\n");
}

static void shape_comment(cir_graph *g, cuvil_sb *o, const int *ids, int n) {
    char sh[1024];
    for (int i = 0, k = 0; i < n; i++) {
        if (ids[i] < 0) continue;
        cuvil_sb_puts(o, k++ ? ", " : "");
        comment_str(o, cir_val(g, ids[i])->name);
        cuvil_sb_puts(o, " ");
        cuvil_sb_safe_expr(o, cir_shape_str(g, cir_val(g, ids[i]), sh, sizeof sh), sizeof sh);
    }
}

/* Guard gd as C: if it fails, the message into m->err and return CUVIL_ERR_SHAPE. */
static void guard_c(cg_ctx *cg, cuvil_sb *c, const cir_guard *gd) {
    cir_graph *g = cg->g;
    const char *a = dim_c(cg, gd->a, &g->arena), *b = dim_c(cg, gd->b, &g->arena);
    if (gd->kind == CIR_GUARD_LE)
        cuvil_sb_printf(c, "    if (%s > %s) {\n        snprintf(m->err, sizeof m->err, \"%%s: %%s: %%lld exceeds %%lld\", \"", a, b);
    else if (gd->kind == CIR_GUARD_BCAST)
        cuvil_sb_printf(c, "    if (%s != %s && %s != 1 && %s != 1) {\n        snprintf(m->err, sizeof m->err, \"%%s: %%s do not "
                           "broadcast (%%lld and %%lld)\", \"", a, b, a, b);
    else
        cuvil_sb_printf(c, "    if (%s != %s) {\n        snprintf(m->err, sizeof m->err, \"%%s: %%s differ (%%lld and %%lld)\", \"", a, b);
    cuvil_sb_c_escape(c, gd->node);
    cuvil_sb_puts(c, "\", \"");
    cuvil_sb_c_escape(c, gd->what);
    cuvil_sb_printf(c, "\",\n                 (long long)%s, (long long)%s);\n        return CUVIL_ERR_SHAPE;\n    }\n", a, b);
}

/* A guard on a size the run finds: checked before the node that assumes it, not before all. */
static bool guard_at_node(const cir_graph *g, const cir_guard *gd) {
    if (gd->node_id >= 0 && gd->node_id < g->n_nodes && cir_node_at(g, gd->node_id)->region)
        return true;   /* a node in an If's branch: only when the branch runs */
    return cir_dim_uses_rt(g, gd->a) || cir_dim_uses_rt(g, gd->b);
}

/* ===== If's branches ======================================================================== */
#define CG_MAX_OPEN_REGIONS 64

/* The live regions node n runs in, outermost first, into chain (their count). */
static int region_chain(const cir_graph *g, const cir_node *n, int *chain) {
    int tmp[CG_MAX_OPEN_REGIONS], k = 0;
    for (int r = n->region; r > 0 && k < CG_MAX_OPEN_REGIONS; r = cir_region_live(g, g->regions[r].parent)) tmp[k++] = r;
    for (int i = 0; i < k; i++) chain[i] = tmp[k - 1 - i];
    return k;
}

/* ===== Loops' bodies (op_loop.c) ============================================================= */
/* The loop node that closes loop_begin b's body: the first after it with that body, or NULL. */
static cir_node *loop_end_of(const cir_graph *g, const cir_node *b) {
    for (int i = b->id + 1; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (!n->dead && n->kind == CIR_OP_LOOP && n->then_region == b->then_region) return n;
    }
    return NULL;
}

/* Into c (indent ind): the copy of slice `idx` along `axis` of value big from value elem
 * (to_big) or into it: a block per index of the dims before axis, each the bytes after it. */
static void slice_copy(cg_ctx *cg, cuvil_sb *c, int ind, int big, int axis, int elem, const char *idx, bool to_big) {
    cir_value *bv = cir_val(cg->g, big);
    const char *outer = cg_dimprod(cg, big, 0, axis, 1), *cnt = cg_dimprod(cg, big, axis, axis + 1, 1);
    const char *inner = cg_dimprod(cg, big, axis + 1, bv->ndim, (int64_t)cir_dtype_size(bv->dtype));
    const char *at = fmt_str(cg, "(o_ * %s + %s) * %s", cnt, idx, inner);
    if (to_big)
        cuvil_sb_printf(c, "%*sfor (int64_t o_ = 0; o_ < %s; o_++)\n%*s    memcpy((unsigned char *)%s + %s, "
                           "(const unsigned char *)%s + o_ * %s, %s);\n", ind, "", outer, ind, "", cg_out(cg, big), at,
                        cg_in(cg, elem), inner, inner);
    else
        cuvil_sb_printf(c, "%*sfor (int64_t o_ = 0; o_ < %s; o_++)\n%*s    memcpy((unsigned char *)%s + o_ * %s, "
                           "(const unsigned char *)%s + %s, %s);\n", ind, "", outer, ind, "", cg_out(cg, elem), inner,
                        cg_in(cg, big), at, inner);
}

/* The #defines and parameter blocks written so far (cg_param, the offsets' names), into the
 * file at hand: before the node's function that uses them, or before a part's function for
 * the lines a loop wrote into calls. */
static void flush_params(cg_ctx *cg, cuvil_sb *nodes) {
    if (cg->params.len) cuvil_sb_append(nodes, cg->params.s, cg->params.len);
    cg->params.len = 0;
}

/* Into calls: return cuvil_glue_fail(m, "<node e>: <what>") when cond holds. */
static void loop_fail(cuvil_sb *calls, int ind, const cir_node *e, const char *cond, const char *what) {
    char desc[512];
    cuvil_sb_printf(calls, "%*sif (%s) return cuvil_glue_fail(m, \"", ind, "", cond);
    cuvil_sb_c_escape(calls, cir_node_desc(e, desc, sizeof desc));
    cuvil_sb_puts(calls, ": ");
    cuvil_sb_c_escape(calls, what);
    cuvil_sb_puts(calls, "\");\n");
}

/* Opens loop_begin b's body (into calls, indent ind): the loop over its iterations, each
 * first checking the trip count, the condition or the scanned length, then setting the
 * iteration number and copying the scanned inputs' elements into the body's parameters. */
static cuvil_status open_loop(cg_ctx *cg, cuvil_sb *calls, int ind, const cir_node *b) {
    cir_graph *g = cg->g;
    op_loop l;
    cir_node *e = loop_end_of(g, b);
    if (!op_loop_at(b, &l) || !e) return cir_node_err(g, b, CUVIL_ERR_INTERNAL, "a loop_begin without its loop");
    int it = b->then_region;
    char hi[32];
    int slot = cg_found_slot(cg, g, e, 0, hi);
    if (slot >= 0) cuvil_sb_printf(calls, "%*sD[%d] = 0;   /* the iterations made */\n", ind, "", slot);
    op_loop le;
    for (int k = 0; op_loop_at(e, &le) && k < le.k; k++)   /* sequence outputs: empty before the first */
        if (op_loop_seq_out(e, k) && e->out[le.n + k] >= 0)
            cuvil_sb_printf(calls, "%*s*(int64_t *)%s = 0;\n", ind, "", cg_out(cg, e->out[le.n + k]));
    cuvil_sb_printf(calls, "%*sfor (int64_t it%d = 0;; it%d++) {   /* ", ind, "", it, it);
    comment_str(calls, l.scan ? "Scan" : "Loop");
    cuvil_sb_puts(calls, " '");
    comment_str(calls, b->name);
    cuvil_sb_puts(calls, "': its body, once per iteration */\n");
    ind += 4;
    if (b->in[0] >= 0) cuvil_sb_printf(calls, "%*sif (it%d >= *%s) break;\n", ind, "", it, cg_in(cg, b->in[0]));
    /* the condition: the initial one (or true), then the body's (with or without a condition
     * input: ONNX's reference and ONNX Runtime stop on the body's) */
    if (!l.scan && b->out[1] >= 0) cuvil_sb_printf(calls, "%*sif (!*%s) break;\n", ind, "", cg_in(cg, b->out[1]));
    if (l.scan) {
        const cir_value *x = cir_val(g, b->in[2 + l.n]);
        int axis = 1;
        cuvil_status s = l.batch ? CUVIL_OK : op_loop_axis(g, (cir_node *)b, false, 0, x->ndim, &axis);
        if (s) return s;
        cuvil_sb_printf(calls, "%*sif (it%d >= %s) break;\n", ind, "", it, cg_dimprod(cg, x->id, axis, axis + 1, 1));
    }
    if (b->out[0] >= 0) cuvil_sb_printf(calls, "%*s*%s = it%d;\n", ind, "", cg_out(cg, b->out[0]), it);
    int is = cg_found_slot(cg, g, b, 0, hi);
    if (is >= 0) {   /* the iteration number as the symbol the body's sizes read (op_loop.c) */
        loop_fail(calls, ind, b, fmt_str(cg, "it%d > %s", it, hi),
                  "it makes more iterations than its trip count's bound (a constant, the symbols' ranges or a --dim "
                  "naming the trip count) allows");
        cuvil_sb_printf(calls, "%*sD[%d] = it%d;\n", ind, "", is, it);
    }
    for (int j = 0; j < l.s; j++) {
        if (b->out[2 + l.n + j] < 0) continue;
        int x = b->in[2 + l.n + j], axis = 1;
        cuvil_status s = l.batch ? CUVIL_OK : op_loop_axis(g, (cir_node *)b, false, j, cir_val(g, x)->ndim, &axis);
        if (s) return s;
        const char *idx = op_loop_reverse(b, false, j)
                              ? fmt_str(cg, "(%s - 1 - it%d)", cg_dimprod(cg, x, axis, axis + 1, 1), it)
                              : fmt_str(cg, "it%d", it);
        slice_copy(cg, calls, ind, x, axis, b->out[2 + l.n + j], idx, false);
    }
    return CUVIL_OK;
}

/* Closes loop_begin b's body (into calls; ind: the body's indent): each scan element goes to
 * its place in its output, then the condition and the states carry into the parameters (after
 * the scan elements, which may share a parameter's bytes; through scratch when one result
 * shares another's parameter, a swap). Dims only the run knows are checked to be the same in
 * every iteration. */
static cuvil_status close_loop(cg_ctx *cg, cuvil_sb *calls, int ind, const cir_node *b) {
    cir_graph *g = cg->g;
    op_loop l;
    cir_node *e = loop_end_of(g, b);
    if (!e || !op_loop_at(e, &l)) return cir_node_err(g, b, CUVIL_ERR_INTERNAL, "a loop_begin without its loop");
    int it = b->then_region, R = 2 * l.p;
    char hi[32];
    int slot = cg_found_slot(cg, g, e, 0, hi);
    for (int k = 0; k < l.k; k++) {
        int y = e->out[l.n + k], x = e->in[R + 1 + l.n + k], axis = l.batch ? 1 : 0;
        if (y < 0) continue;
        cir_value *yv = cir_val(g, y), *xv = cir_val(g, x);
        if (yv->seq_n >= 0) {   /* into a sequence: the iteration's element, with its own dims */
            loop_fail(calls, ind, e, fmt_str(cg, "it%d >= %d", it, yv->seq_n),
                      "it makes more iterations than its sequence output holds");
            bool sym = cg->cur_symbolic;
            cg->cur_symbolic = false;   /* (its layout: numbers, a static the part's function sees) */
            const char *p = cg_seq_params(cg, yv);
            cg->cur_symbolic = sym;
            cuvil_sb_printf(calls, "%*s{\n%*s    const int64_t d_[] = %s;\n%*s    cuvil_seq_put(&%s, %s, it%d + 1, it%d, %s, d_);\n"
                                   "%*s}\n", ind, "", ind, "", cg_dims_init(cg, x, xv->ndim > 0 ? xv->ndim : 1), ind, "",
                            p, cg_out(cg, y), it, it, cg_in(cg, x), ind, "");
            continue;
        }
        cuvil_status s = l.scan && !l.batch ? op_loop_axis(g, e, true, k, yv->ndim, &axis) : CUVIL_OK;
        if (s) return s;
        for (int d = 0; d < xv->ndim; d++) {   /* the first iteration's element dims, the others' checked */
            int fs = cg_found_slot(cg, g, e, 1 + k * CIR_MAX_DIMS + d, NULL);
            if (fs < 0) continue;
            const char *c = cg_dim_c(cg, cir_dimx(g, xv, d));
            cuvil_sb_printf(calls, "%*sif (it%d == 0) D[%d] = %s;\n", ind, "", it, fs, c);
            loop_fail(calls, ind, e, fmt_str(cg, "D[%d] != %s", fs, c),
                      "its scan outputs' elements differ in shape between iterations");
        }
        const char *idx = fmt_str(cg, "it%d", it);
        if (!l.scan && slot >= 0) {   /* the room planned for the iterations: more fails the run */
            loop_fail(calls, ind, e, fmt_str(cg, "it%d >= %s", it, hi),
                      "it makes more iterations than its scan outputs' declared or --dim size");
        } else if (op_loop_reverse(e, true, k)) {
            idx = fmt_str(cg, "(%s - 1 - it%d)", cg_dimprod(cg, y, axis, axis + 1, 1), it);
        }
        slice_copy(cg, calls, ind, y, axis, x, idx, true);
    }
    /* what carries: the condition (a Loop's) and the states, dst[i] from src[i] */
    int n = 0, *dst = cuvil_arena_alloc(&cg->strs, sizeof(int) * (size_t)(2 * (l.n + 1)));
    if (!dst) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    int *src = dst + l.n + 1;
    if (!l.scan && e->in[l.p + 1] >= 0 && e->in[R] >= 0) {
        dst[n] = e->in[l.p + 1];
        src[n++] = e->in[R];
    }
    for (int i = 0; i < l.n; i++) {
        cir_value *pv = cir_val(g, e->in[l.p + 2 + i]), *ov = cir_val(g, e->in[R + 1 + i]);
        for (int d = 0; d < pv->ndim; d++) {
            const cir_dim *a = cir_dimx(g, pv, d), *c = cir_dimx(g, ov, d);
            if (a != c)
                loop_fail(calls, ind, e, fmt_str(cg, "%s != %s", cg_dim_c(cg, a), cg_dim_c(cg, c)),
                          fmt_str(cg, "state %d leaves an iteration with another shape than it entered", i));
        }
        dst[n] = pv->id;
        src[n++] = ov->id;
    }
    bool hazard = false;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            cg_loc a = cg->plan.loc[src[i]], p = cg->plan.loc[dst[j]];
            hazard |= i != j && a.kind == p.kind && a.index == p.index;
        }
    size_t total = 0;
    for (int i = 0; hazard && i < n; i++) total += cuvil_align_up(cir_nbytes(cir_val(g, dst[i])), 64);
    if (hazard) {
        if (total > cg->scratch_bytes) cg->scratch_bytes = total;
        cuvil_sb_printf(&cg->scratch, "    t = %zu;\n    if (t > s) s = t;\n", total);
    }
    for (int pass = hazard ? 0 : 1; pass < 2; pass++) {
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            const char *nb = cg_nbytes(cg, dst[i]);
            if (!hazard)
                cuvil_sb_printf(calls, "%*smemmove(%s, %s, %s);\n", ind, "", cg_out(cg, dst[i]), cg_in(cg, src[i]), nb);
            else if (!pass)
                cuvil_sb_printf(calls, "%*smemcpy((unsigned char *)S + %zu, %s, %s);\n", ind, "", off, cg_in(cg, src[i]), nb);
            else
                cuvil_sb_printf(calls, "%*smemcpy(%s, (const unsigned char *)S + %zu, %s);\n", ind, "", cg_out(cg, dst[i]), off, nb);
            off += cuvil_align_up(cir_nbytes(cir_val(g, dst[i])), 64);
        }
    }
    if (slot >= 0) cuvil_sb_printf(calls, "%*sD[%d] = it%d + 1;\n", ind, "", slot, it);
    cuvil_sb_printf(calls, "%*s}\n", ind - 4, "");
    return CUVIL_OK;
}

/* Closes the open regions past the first `keep` (into calls): an If's branch, or a loop's
 * body (open_begin[i]: its loop_begin, -1 for a branch). */
static cuvil_status close_regions(cg_ctx *cg, cuvil_sb *calls, int *open, int keep, const int *open_begin) {
    while (*open > keep) {
        (*open)--;
        if (open_begin[*open] >= 0) {
            cuvil_status s = close_loop(cg, calls, 4 * (*open + 2), cir_node_at(cg->g, open_begin[*open]));
            if (s) return s;
            continue;
        }
        cuvil_sb_printf(calls, "%*s}\n", 4 * (*open + 1), "");
    }
    return CUVIL_OK;
}

/* Opens regions chain[*open .. k) (into calls): each an `if` on its If's condition. A loop's
 * body opens only right after its loop_begin (open_loop). */
static cuvil_status open_regions(cg_ctx *cg, cuvil_sb *calls, int *stack, int *open, int *open_begin, const int *chain,
                                 int k, const cir_node *n) {
    for (; *open < k; (*open)++) {
        const struct cir_region *rg = &cg->g->regions[chain[*open]];
        if (rg->loop) return cir_node_err(cg->g, n, CUVIL_ERR_INTERNAL, "a node of a loop's body apart from the others");
        stack[*open] = chain[*open];
        open_begin[*open] = -1;
        cuvil_sb_printf(calls, "%*sif (%s*(const uint8_t *)%s) {   /* an If's %s branch */\n", 4 * (*open + 1), "",
                        rg->is_else ? "!" : "", cg_in(cg, rg->cond), rg->is_else ? "else" : "then");
    }
    return CUVIL_OK;
}

/* Whether guard gd reads table symbol sym. */
static bool guard_uses(const cir_guard *gd, int sym) { return cir_dim_uses(gd->a, sym) || cir_dim_uses(gd->b, sym); }

/* Whether every size known only when the model runs that guard gd reads is known before node
 * id runs: found by a node before it, or read from a tensor for it or a node before it. */
static bool guard_ready(const cg_ctx *cg, const cir_guard *gd, int id) {
    const cir_graph *g = cg->g;
    for (int r = 0; r < g->n_rt_syms; r++) {
        if (!guard_uses(gd, g->rt_syms[r])) continue;
        int at = cg->rt_pos[r];
        if (at < 0 || (g->rt_key[r] < 0 ? at >= id : at > id)) return false;
    }
    return true;
}

/* Node n's sizes read from its integer inputs (cir_rt_load), into D[] just before it runs,
 * each checked against its range; into calls (a part's function: m is at hand). */
static void rt_loads(cg_ctx *cg, cuvil_sb *calls, const cir_node *n, const char *desc) {
    cir_graph *g = cg->g;
    for (int r = n->rt_first; r < n->rt_first + n->n_rt; r++) {
        if (g->rt_key[r] < 0) continue;
        int i = g->rt_key[r] / CIR_MAX_SVAL, j = g->rt_key[r] % CIR_MAX_SVAL;
        cir_value *v = cir_in(g, n, i);
        if (!v) continue;
        int slot = cg_rt_slot(cg, g->rt_syms[r]);
        char lo[32], hi[32];
        cuvil_sb_printf(calls, "    D[%d] = (int64_t)((const %s *)%s)[%d];   /* read from a tensor */\n", slot,
                        v->dtype == CIR_I32 ? "int32_t" : "int64_t", cg_in(cg, v->id), j);
        cuvil_sb_printf(calls, "    if (D[%d] < %s || D[%d] > %s) {\n        snprintf(m->err, sizeof m->err, \"%%s: %%s[%d] = %%lld is "
                               "outside %lld..%lld, the values it supports here (a --dim naming the value narrows them)\", \"",
                        slot, cg_i64(g->rt_lo[r], lo), slot, cg_i64(g->rt_hi[r], hi), j, (long long)g->rt_lo[r],
                        (long long)g->rt_hi[r]);
        cuvil_sb_c_escape(calls, desc);
        cuvil_sb_puts(calls, "\", \"");
        cuvil_sb_c_escape(calls, v->name);
        cuvil_sb_printf(calls, "\", (long long)D[%d]);\n        return CUVIL_ERR_INVALID_ARG;\n    }\n", slot);
    }
}

/* The guards on sizes the run finds that nodes up to id assume (all when id < 0), not yet
 * written, into calls (a part's function: m is at hand): before node id runs, or right after
 * the node that finds the size when that node is the one assuming it (a declared output dim). */
static void rt_guards(cg_ctx *cg, cuvil_sb *calls, int id, uint8_t **donep, int *cap) {
    if (cg->g->n_guards > *cap) {   /* an emitter added one (its op's checks, on the run's sizes) */
        uint8_t *p = cuvil_realloc(*donep, (size_t)cg->g->n_guards);
        if (!p) {
            cg->body.oom = true;   /* fails the compile at the end */
            return;
        }
        memset(p + *cap, 0, (size_t)(cg->g->n_guards - *cap));
        *donep = p;
        *cap = cg->g->n_guards;
    }
    uint8_t *done = *donep;
    for (int i = 0; i < cg->g->n_guards; i++) {
        const cir_guard *gd = &cg->g->guards[i];
        if (done[i] || !guard_at_node(cg->g, gd)) continue;
        bool orphan = false;   /* on a size of a node no longer in the graph (folded): nothing reads it */
        for (int r = 0; r < cg->g->n_rt_syms; r++)
            orphan |= cg->rt_pos[r] < 0 && guard_uses(gd, cg->g->rt_syms[r]);
        if (orphan) {
            done[i] = 1;
            continue;
        }
        if (id >= 0 && (gd->node_id > id || !guard_ready(cg, gd, id))) continue;
        done[i] = 1;
        guard_c(cg, calls, gd);
    }
}

/* The run's dims: the symbols a model takes at run time (D[k], in the order of g->syms with
 * min < max), which input dims carry them (the glue, runtime/glue/context.c, reads them from the
 * inputs' dims and checks every dim), output_dims() writing the outputs' dims and
 * check_guards() what the shapes assume. In a fixed model every dim is checked against the one
 * it was compiled for, and D holds only the sizes the run finds. */
static void shape_functions(cg_ctx *cg, cuvil_sb *c) {
    cir_graph *g = cg->g;
    int dyn[CIR_MAX_DIMS * 8], nd = 0;   /* g->syms index -> D index, -1 for fixed symbols */
    for (int k = 0; k < g->n_syms && k < (int)(sizeof dyn / sizeof dyn[0]); k++)
        dyn[k] = g->syms[k].min < g->syms[k].max ? nd++ : -1;
    cuvil_sb_printf(c, "\n#define N_INPUTS %d\n#define N_OUTPUTS %d\n"
                       , g->n_inputs, g->n_outputs);
    cuvil_sb_printf(c, "\n#define N_RUN_SIZES %d   /* sizes the run finds (D[N_SYMS + r]) */\n", g->n_rt_syms);
    cuvil_sb_printf(c, "\n#define N_SYMS %d\nstatic const cuvil_sym_info syms_[%d] = {\n", nd, nd ? nd : 1);
    for (int k = 0; k < g->n_syms; k++) {
        if (dyn[k] < 0) continue;
        cuvil_sb_puts(c, "    { \"");
        cuvil_sb_c_escape(c, g->syms[k].name);
        cuvil_sb_printf(c, "\", %lld, %lld, %lld },\n", (long long)g->syms[k].min, (long long)g->syms[k].max,
                        (long long)(g->syms[k].step > 1 ? g->syms[k].step : 1));
    }
    if (!nd) cuvil_sb_puts(c, "    { NULL, 0, 0, 1 },\n");
    cuvil_sb_printf(c, "};\n/* per input dim: the D index of its symbol, -1 for a fixed dim */\n"
                       "static const int8_t in_sym_[%d][CUVIL_MAX_DIMS] = {\n", g->n_inputs ? g->n_inputs : 1);
    for (int i = 0; i < g->n_inputs; i++) {
        cir_value *v = cir_val(g, g->inputs[i]);
        cuvil_sb_puts(c, "    {");
        for (int d = 0; d < CIR_MAX_DIMS; d++)
            if (v->seq_n >= 0)   /* a sequence: its count's symbol */
                cuvil_sb_printf(c, "%s%d", d ? ", " : " ", !d && v->seq_sym >= 0 ? dyn[v->seq_sym] : -1);
            else
                cuvil_sb_printf(c, "%s%d", d ? ", " : " ", d < v->ndim && v->dim_sym[d] >= 0 ? dyn[v->dim_sym[d]] : -1);
        cuvil_sb_puts(c, " },\n");
    }
    if (!g->n_inputs) cuvil_sb_puts(c, "    { 0 },\n");
    cuvil_sb_puts(c, "};\n\n/* the outputs' dims from the run's */\n"
        "static void output_dims(const int64_t *D, int64_t *const *od) {\n    (void)D;\n    if (!od) return;\n");
    for (int i = 0; i < g->n_outputs; i++) {
        cir_value *v = cir_val(g, g->outputs[i]);
        if (v->seq_n >= 0) continue;   /* a sequence: its dims are in its header */
        cuvil_sb_printf(c, "    if (od[%d]) {", i);
        for (int d = 0; d < v->ndim; d++) {
            if (v->dx[d]) cuvil_sb_printf(c, " od[%d][%d] = %s;", i, d, dim_c(cg, v->dx[d], &g->arena));
            else cuvil_sb_printf(c, " od[%d][%d] = %lld;", i, d, (long long)v->dims[d]);
        }
        cuvil_sb_puts(c, " }\n");
    }
    cuvil_sb_printf(c, "}\n\n#define N_PRESENT %d   /* optional outputs: whether the run gave each a value (D[...]) */\n"
                       "static const int16_t out_present_[%d] = {", optional_outputs(g, g->n_outputs),
                    g->n_outputs ? g->n_outputs : 1);
    for (int i = 0; i < g->n_outputs; i++) cuvil_sb_printf(c, "%s%d", i ? ", " : "", cg_present_slot(cg, i));
    cuvil_sb_puts(c, g->n_outputs ? "};\n" : "-1};\n");
    cuvil_sb_puts(c, "\n/* What the shapes assume and the compiler could not prove: checked before any node runs (those on\n"
                     " * sizes the run finds: before the node that assumes them) */\n"
                     "static cuvil_status check_guards(cuvil_model *m, const int64_t *D) {\n    (void)m; (void)D;\n");
    for (int i = 0; i < g->n_guards; i++)
        if (!guard_at_node(g, &g->guards[i])) guard_c(cg, c, &g->guards[i]);
    cuvil_sb_puts(c, "    return CUVIL_OK;\n}\n");
}

static void options_text(const cuvil_options *o, const char *target, cuvil_sb *out) {
    cuvil_sb_printf(out, "--target %s --opt-level %d", target, o->opt_level);
    if (o->precision != CUVIL_PRECISION_FP32)
        cuvil_sb_printf(out, " --precision %s", o->precision == CUVIL_PRECISION_FP16   ? "fp16"
                                                : o->precision == CUVIL_PRECISION_BF16 ? "bf16"
                                                                                        : "fp32");
    if (o->activations == CUVIL_PRECISION_FP16 || o->activations == CUVIL_PRECISION_BF16)
        cuvil_sb_printf(out, " --activations %s", o->activations == CUVIL_PRECISION_FP16 ? "fp16" : "bf16");
    for (int i = 0; i < o->n_dims; i++) {
        const cuvil_dim_binding *b = &o->dims[i];
        if (b->max > 0) cuvil_sb_printf(out, " --dim %s=%lld:%lld", b->name, (long long)b->min, (long long)b->max);
        else cuvil_sb_printf(out, " --dim %s=%lld", b->name, (long long)b->value);
        if (b->max > 0 && b->step > 1) cuvil_sb_printf(out, ":%lld", (long long)b->step);
    }
    for (int i = 0; i < o->n_shapes; i++) {
        const cuvil_shape_binding *b = &o->shapes[i];
        cuvil_sb_printf(out, " --shape %s=", b->input ? b->input : "");
        for (int d = 0; d < b->ndim; d++) {
            const cuvil_shape_dim *sd = &b->dims[d];
            if (sd->name) cuvil_sb_printf(out, "%s%s", d ? "," : "", sd->name);
            else if (sd->max > 0) cuvil_sb_printf(out, "%s%lld:%lld", d ? "," : "", (long long)sd->min, (long long)sd->max);
            else cuvil_sb_printf(out, "%s%lld", d ? "," : "", (long long)sd->value);
            if (!sd->name && sd->max > 0 && sd->step > 1) cuvil_sb_printf(out, ":%lld", (long long)sd->step);
        }
    }
    for (int i = 0; i < o->n_seqs; i++) {
        const cuvil_seq_binding *b = &o->seqs[i];
        if (b->min == b->max) cuvil_sb_printf(out, " --seq %s=%lld", b->input, (long long)b->max);
        else cuvil_sb_printf(out, " --seq %s=%lld:%lld", b->input, (long long)b->min, (long long)b->max);
    }
    for (int i = 0; i < o->n_disabled; i++) cuvil_sb_printf(out, " --disable-pass %s", o->disabled_passes[i]);
}

/* A new part file: its marker line, what it includes, its own #defines of offsets. */
static void open_part(cg_ctx *cg, cuvil_sb *c, int k) {
    cuvil_sb_printf(c, "\n" CG_FILE_MARK "part_%04d.c */\n#include \"cuvil_model_int.h\"\n\n"
                       "/* ===== one function per node, after its kernel parameters ===== */\n", k);
    memset(cg->named, 0, (size_t)cg->g->n_values);
}

/* The end of part k: its scratch size and the function that runs its nodes in order (the
 * calls collected so far, which it takes). */
static void close_part(cg_ctx *cg, cuvil_sb *c, const char *prefix, int k, cuvil_sb *calls) {
    cuvil_sb_printf(c, "\nCUVIL_HIDDEN size_t %s_part%d_scratch(void) {\n    size_t s = 0, t = 0;\n%s    (void)t;\n    return s;\n}\n",
                    prefix, k, !cg->scratch.s ? "" : cg->scratch.s);
    cuvil_sb_printf(c, "\nCUVIL_HIDDEN cuvil_status %s_part%d(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S,\n"
                       "                                const void *const *in, void *const *out, int64_t *D) {\n"
                       "    (void)m; (void)A; (void)W; (void)S; (void)in; (void)out; (void)D;\n%s    return CUVIL_OK;\n}\n",
                    prefix, k, calls->s ? calls->s : "");
    calls->len = 0;
    if (calls->s) calls->s[0] = 0;
    cg->scratch.len = 0;
    if (cg->scratch.s) cg->scratch.s[0] = 0;
    if (cg->init.len && cg->part_init) {   /* the weights its nodes pack when a context is created */
        cuvil_sb_printf(c, "\nCUVIL_HIDDEN void %s_part%d_init(unsigned char *W, const unsigned char *X, float *T) {\n%s}\n",
                        prefix, k, cg->init.s);
        cg->part_init[k] = 1;
        cg->init.len = 0;
        cg->init.s[0] = 0;
    }
}

/* The target's CPU features (targets.inc); "" for an unknown target, which the driver refused. */
static const char *target_features(const char *target) {
    const cuvil_target_info *t = cuvil_target_find(target);
    return t ? t->features : "";
}

cuvil_status cg_generate(cir_graph *g, const cuvil_options *o, const char *prefix, const char *target,
                         const char *abi_h, cg_output *out) {
    memset(out, 0, sizeof *out);
    char up[256];   /* the prefix of the header's macros */
    size_t ul = 0;
    for (; prefix[ul] && ul < sizeof up - 1; ul++) up[ul] = (char)toupper((unsigned char)prefix[ul]);
    up[ul] = 0;
    cg_ctx cg = {.g = g, .out = out};
    cuvil_status st = cg_plan_memory(g, &cg.plan);
    if (st) return st;
    cg.const_off = cuvil_malloc(sizeof(int64_t) * ((size_t)g->n_values + 1));
    if (!cg.const_off) {
        cg_plan_free(&cg.plan);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_values; i++) cg.const_off[i] = -1;
    cg.named = cuvil_calloc((size_t)g->n_values + 1, 1);
    cg.part_init = cuvil_calloc((size_t)g->n_nodes + 2, 1);   /* (at most a part per node, and one) */
    if (!cg.named || !cg.part_init || plan_w16(&cg, o)) {   /* (plan_w16 fails only out of memory) */
        cuvil_free(cg.named);
        cuvil_free(cg.w16_ok);
        cuvil_free(cg.w16_src);
        cuvil_free(cg.part_init);
        cuvil_free(cg.const_off);
        cg_plan_free(&cg.plan);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    out->arena_bytes = cg.plan.arena_bytes;
    cg.dims_node = cuvil_malloc(sizeof(int) * ((size_t)g->n_values + 1));
    cg.sym_d = cuvil_calloc((size_t)g->dt.n_syms + 1, sizeof(int));
    cg.sym_step = cuvil_calloc((size_t)g->dt.n_syms + 1, sizeof(int64_t));
    if (!cg.dims_node || !cg.sym_d || !cg.sym_step) st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int i = 0; cg.dims_node && i < g->n_values; i++) cg.dims_node[i] = -1;
    for (int k = 0, j = 0; cg.sym_d && k < g->n_syms; k++) {
        if (g->syms[k].min >= g->syms[k].max) continue;
        if (g->syms[k].dsym >= 0) {   /* D's order: the ranged symbols of g->syms (shape_functions) */
            cg.sym_d[g->syms[k].dsym] = j;
            cg.sym_step[g->syms[k].dsym] = g->syms[k].step;
        }
        j++;
        cg.n_ranged = j;
    }
    for (int r = 0; cg.sym_d && r < g->n_rt_syms; r++) {   /* then the sizes the run finds (N_SYMS + r) */
        cg.sym_d[g->rt_syms[r]] = cg.n_ranged + r;
        cg.sym_step[g->rt_syms[r]] = 1;
    }
    for (int r = 0; r < g->n_rt_syms; r++) cg.rt_pos[r] = -1;   /* the node bringing each (guard_ready) */
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        for (int r = n->rt_first; !n->dead && r < n->rt_first + n->n_rt; r++) cg.rt_pos[r] = n->id;
    }
    int guard_cap = g->n_guards + 1;
    uint8_t *guard_done = cuvil_calloc((size_t)guard_cap, 1);   /* rt guards emitted */
    if (!guard_done) st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");

    cuvil_sb calls = {0}, opts = {0};
    options_text(o, target, &opts);
    /* The sources are written front to back into one text, each file after a line
     * CG_FILE_MARK (split when written, cg_split_files): cuvil_model_int.h (what every file
     * includes; "cuvil" starts no model's prefix, so no <prefix>.h takes its name),
     * part_NNNN.c (CG_PART_NODES nodes each: their parameters and functions, and a function
     * that runs them), then model.c (the tables, the model's glue, run() calling the parts). */
    cuvil_sb *nodes = &out->model_c;
    {
        cuvil_sb *c = nodes;
        cuvil_sb_printf(c, CG_FILE_MARK "cuvil_model_int.h */\n/* Generated by Cuvil %s from ", cuvil_version());
        comment_str(c, cir_model_name(g));
        cuvil_sb_printf(c, " (sha256 %s).\n * Options: ", g->model_sha256);
        cuvil_sb_safe_text(c, opts.s ? opts.s : "", 2048);
        cuvil_sb_printf(c, "\n * Do not edit: regenerate with cuvil-compile. */\n"
                           "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                           "#include \"cuvil_rt.h\"\n#include \"%s.h\"\n#include \"cuvil_glue.h\"   /* the context, the glue's table */\n\n"
                           "#define CUVIL_EXPORT __attribute__((visibility(\"default\")))\n"
                           "#define CUVIL_HIDDEN __attribute__((visibility(\"hidden\")))\n"
                           "/* the constants, as the context holds them: node and part functions take them as W */\n"
                           "#define WEIGHTS W\n"
                           "/* the weights as the library stores them (some read in place: --precision's 16-bit products) */\n"
                           "extern const unsigned char %s_weights[];\n#define STORED %s_weights\n",
                        prefix, prefix, prefix);
    }
    char desc[512];
    int n_emitted = 0, n_parts = 0, in_part = 0;
    /* the regions open in calls: If branches, loop bodies (open_begin: the loop_begin, or -1) */
    int open = 0, open_stack[CG_MAX_OPEN_REGIONS], open_begin[CG_MAX_OPEN_REGIONS], chain[CG_MAX_OPEN_REGIONS];
    for (int i = 0; i < g->n_nodes && !st; i++) {
        cir_node *n = cir_node_at(g, i);
        bool view = (n->def->flags & CIR_OPF_ALIAS) && cg.plan.aliased[i];
        if (n->dead || (view && !n->n_rt) || (n->kind == CIR_OP_CONCAT && cg.plan.aliased[i]))
            continue;   /* (a view sharing its input's bytes, a Concat whose inputs are in place: nothing to run) */
        int k = region_chain(g, n, chain), keep = 0;
        while (keep < open && keep < k && open_stack[keep] == chain[keep]) keep++;
        if (n_parts && (st = close_regions(&cg, &calls, &open, keep, open_begin))) break;
        flush_params(&cg, nodes);
        /* a part per CG_PART_NODES nodes that run, split where no branch is open */
        if (!n_parts || (in_part >= CG_PART_NODES && !open && !k)) {
            if (n_parts) close_part(&cg, nodes, prefix, n_parts - 1, &calls);
            open_part(&cg, nodes, n_parts++);
            in_part = 0;
        }
        in_part++;
        if ((st = open_regions(&cg, &calls, open_stack, &open, open_begin, chain, k, n))) break;
        rt_loads(&cg, &calls, n, cir_node_desc(n, desc, sizeof desc));
        rt_guards(&cg, &calls, n->id, &guard_done, &guard_cap);
        cuvil_arena_reset(&cg.strs);   /* strings handed to emitters live for one node */
        cg.body.len = 0;
        if (cg.body.s) cg.body.s[0] = 0;
        cg.locals.len = 0;
        if (cg.locals.s) cg.locals.s[0] = 0;
        cg.fail_what = NULL;
        cg.node_serial++;
        cg.cur_symbolic = cg_node_symbolic(g, n);
        cg.cur_node = n;
        cg.w16_asked = 0;
        if (n->def->flags & CIR_OPF_ALIAS) {
            /* (checked even for a scalar output, which finds no dims) */
            bool axes_rt = (n->kind == CIR_OP_SQUEEZE || n->kind == CIR_OP_UNSQUEEZE) && op_squeeze_rt_axes(g, n);
            if ((n->n_rt && n->kind == CIR_OP_RESHAPE && g->rt_key[n->rt_first] < 0) || axes_rt)
                cg_emit_found_dims(&cg, g, n);   /* a Reshape's shape or (Un)Squeeze's axes read when the model runs */
            if (!view)
                cg_printf(&cg, "    memcpy(%s, %s, %s);\n", cg_out(&cg, n->out[0]), cg_in(&cg, n->in[0]), cg_nbytes(&cg, n->out[0]));
        } else if (sval_fill(&cg, n)) {
            /* its output's values are expressions of the symbols (op_sval.c): written from D */
        } else if (!cir_post_kernel_form(n) || (cir_node_residual(n) >= 0 && !(n->def->flags & CIR_OPF_TAKES_RESIDUAL)) ||
                   (cir_node_act(n).op && !(n->def->flags & CIR_OPF_TAKES_ACT))) {   /* (the passes build no other) */
            st = cir_node_err(g, n, CUVIL_ERR_INTERNAL, "an epilogue its kernel cannot apply (%d steps)", n->n_post);
            break;
        } else if (!cg_emitter(n->kind)) {
            st = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "is only supported when its inputs are constant");
            break;
        } else if ((st = cg_emitter(n->kind)(&cg, g, n))) {
            break;
        }
        if (cg.unplanned) {
            st = cir_node_err(g, n, CUVIL_ERR_INTERNAL, "value '%s' has no storage (not an input, a constant or an output "
                              "of an earlier node)", cir_val(g, cg.unplanned - 1)->name);
            break;
        }
        if (cg.over_limit) {
            st = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                              "its kernel's constant data brings the constants computed at compile time over the limit "
                              "folded_bytes=%llu (raise it with --limit folded_bytes=N)",
                              (unsigned long long)g->limits.folded_bytes);
            break;
        }
        cuvil_sb_puts(nodes, "\n/* ");
        comment_str(nodes, cir_node_desc(n, desc, sizeof desc));
        if (n->fused) {
            cuvil_sb_puts(nodes, " +");
            comment_str(nodes, n->fused);
        }
        cuvil_sb_puts(nodes, ": ");
        shape_comment(g, nodes, n->in, n->n_in);
        for (int k = 0; k < n->n_post; k++) {   /* the epilogue's additions */
            if (n->post[k].kind != CIR_POST_ADD) continue;
            cuvil_sb_puts(nodes, " + residual ");
            shape_comment(g, nodes, &n->post[k].value, 1);
        }
        cuvil_sb_puts(nodes, " -> ");
        shape_comment(g, nodes, n->out, n->n_out);
        if (n->low.note) {
            /* the lowering's own words, not a name from the model: kept whole */
            cuvil_sb_puts(nodes, "; ");
            cuvil_sb_safe_text(nodes, n->low.note, CIR_ALGO_MAX);
        }
        cuvil_sb_puts(nodes, " */\n");
        flush_params(&cg, nodes);
        cuvil_sb_printf(nodes, "static int node%d(unsigned char *A, const unsigned char *W, void *S, const void *const *in,\n"
                                "                 void *const *out, int64_t *D) {\n"
                                "    (void)A; (void)W; (void)S; (void)in; (void)out; (void)D;\n%s%s    return 0;\n}\n",
                        n_emitted, cg.locals.s ? cg.locals.s : "", cg.body.s ? cg.body.s : "");
        if (cg.fail_what) {
            /* the message names the node: an escaped string literal */
            cuvil_sb_printf(&calls, "    if (node%d(A, W, S, in, out, D)) return cuvil_glue_fail(m, \"", n_emitted);
            cuvil_sb_c_escape(&calls, desc);
            cuvil_sb_puts(&calls, ": ");
            cuvil_sb_c_escape(&calls, cg.fail_what);
            cuvil_sb_puts(&calls, "\");\n");
        } else {
            cuvil_sb_printf(&calls, "    node%d(A, W, S, in, out, D);\n", n_emitted);
        }
        n_emitted++;
        if (n->kind == CIR_OP_LOOP_BEGIN) {   /* its body follows, in a loop */
            if (open >= CG_MAX_OPEN_REGIONS || n->then_region <= 0) {
                st = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "control flow nested more than %d deep", CG_MAX_OPEN_REGIONS);
                break;
            }
            if ((st = open_loop(&cg, &calls, 4 * (open + 1), n))) break;
            open_stack[open] = n->then_region;
            open_begin[open++] = n->id;
            flush_params(&cg, nodes);
        }
    }
    if (!st && n_parts) st = close_regions(&cg, &calls, &open, 0, open_begin);
    flush_params(&cg, nodes);   /* (those the regions' ends use) */
    if (!st && n_parts) {
        rt_guards(&cg, &calls, -1, &guard_done, &guard_cap);   /* those of views and dead nodes at the end */
        close_part(&cg, nodes, prefix, n_parts - 1, &calls);
    }
    /* model.c: its own #defines of offsets */
    cuvil_sb_puts(nodes, "\n" CG_FILE_MARK "model.c */\n#include \"cuvil_model_int.h\"\n\n"
                         "/* Tells a later cuvil-compile that this library is Cuvil's to replace. */\n"
                         "__attribute__((used)) static const char cuvil_marker_[] = \"CUVIL-MODEL-\" \"OUTPUT-V1\";\n");
    memset(cg.named, 0, (size_t)g->n_values);
    /* the parts, in order; then the graph outputs that no node writes: constants, inputs,
     * repeated outputs */
    for (int k = 0; k < n_parts; k++) {
        cuvil_sb_printf(nodes, "CUVIL_HIDDEN cuvil_status %s_part%d(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S,\n"
                               "                                const void *const *in, void *const *out, int64_t *D);\n"
                               "CUVIL_HIDDEN size_t %s_part%d_scratch(void);\n", prefix, k, prefix, k);
        cuvil_sb_printf(&calls, "    if ((st = %s_part%d(m, A, W, S, in, out, D))) return st;\n", prefix, k);
        cuvil_sb_printf(&cg.scratch, "    t = %s_part%d_scratch();\n    if (t > s) s = t;\n", prefix, k);
    }
    for (int i = 0; i < g->n_outputs && !st; i++) {
        cir_value *v = cir_val(g, g->outputs[i]);
        if (v->kind == CIR_VAL_ACT && v->output_index == i) continue;
        const char *src = v->kind == CIR_VAL_ACT ? fmt_str(&cg, "out[%d]", v->output_index) : cg_in(&cg, v->id);
        cuvil_sb_printf(&calls, "    memcpy(out[%d], %s, %s);\n", i, src, cg_nbytes(&cg, v->id));
        if (cg_present_slot(&cg, i) >= 0 && v->output_index >= 0)   /* an optional output again: whether it holds one */
            cuvil_sb_printf(&calls, "    D[%d] = D[%d];\n", cg_present_slot(&cg, i), cg_present_slot(&cg, v->output_index));
        if (cg.unplanned)
            st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "graph output '%s' has no storage", v->name);
    }
    if (!st && cg.w16_stray)
        st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "--precision: constant '%s', stored in 16 bits, is read where float32 "
                       "is needed", cir_val(g, cg.w16_stray - 1)->name);
    if (!st && out->weights.len > CUVIL_MAX_WEIGHTS_BYTES)
        st = cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                       "the model's weights, with the copies packed for its kernels, come to %zu bytes; a compiled model "
                       "links them into the library, which holds at most %zu bytes of them (x86-64's small code model "
                       "addresses 2 GiB)", out->weights.len, (size_t)CUVIL_MAX_WEIGHTS_BYTES);
    /* weights packed when a context is created: their calls, after the widening, with room for
     * their temporary floats at the end of the layout */
    bool any_init = false;
    for (int k = 0; k < n_parts && !st; k++) {
        if (!cg.part_init[k]) continue;
        if (!any_init) {
            size_t tmp = cuvil_align_up(out->transient_len, BLOB_ALIGN);
            out->transient_len = tmp + cg.init_tmp * sizeof(float);
            cuvil_sb_printf(&cg.init, "static void init_weights(unsigned char *W, unsigned char *X) {\n"
                                      "    float *T = (float *)(void *)(X + %zu);\n", tmp);
        }
        any_init = true;
        cuvil_sb_printf(&out->model_c, "CUVIL_HIDDEN void %s_part%d_init(unsigned char *W, const unsigned char *X, float *T);\n",
                        prefix, k);
        cuvil_sb_printf(&cg.init, "    %s_part%d_init(W, X, T);\n", prefix, k);
    }
    if (any_init) cuvil_sb_printf(&out->model_c, "%s}\n", cg.init.s);
    /* --precision with nothing stored in 16 bits: the blob is the layout, no widening */
    if (!any_init && out->n_segs == 1 && out->segs[0].kind == 0 && out->segs[0].dst == 0 && out->segs[0].src == 0)
        out->n_segs = 0;
    if (!st && cg.w16 != CIR_UNDEF && !cg.w16_exact_only) {
        /* what the library holds, on stderr: the user asked for it and may want to know */
        fprintf(stderr, "cuvil: note: --precision %s: %.1f of %.1f MB of float32 weights stored in 16 bits; the library "
                        "holds %.1f MB of weights, widened to %.1f MB when a context is created (and %.1f MB while it is)",
                cg.w16 == CIR_F16 ? "fp16" : "bf16", (double)out->narrowed_bytes / 1e6, (double)out->f32_bytes / 1e6,
                (double)out->weights.len / 1e6, (double)out->weights_len / 1e6, (double)out->transient_len / 1e6);
        if (out->resident16_bytes)
            fprintf(stderr, "; %.1f MB of them (matrix products' weights, embedding tables) are read in place in 16 bits, "
                            "widened by the kernel%s", (double)out->resident16_bytes / 2e6,
                    cg.w16 == CIR_BF16 ? " (those products round their other operand to bfloat16 too: AVX-512 BF16 where "
                                         "the CPU has it)" : "");
        if (out->kept_range) fprintf(stderr, "; %d constants kept in float32 (values the 16-bit type cannot hold)", out->kept_range);
        fprintf(stderr, "\n");
    }
    if (!st && out->n_segs) {
        cuvil_sb *c = &out->model_c;
        cuvil_sb_printf(c, "\n/* the weights stored in 16 bits (--precision) and how create() widens them */\n"
                           "static const cuvil_wseg wsegs_[] = {\n");
        for (int k = 0; k < out->n_segs; k++)
            cuvil_sb_printf(c, "    {%lluu, %lluu, %lluu, %s%s},\n", (unsigned long long)out->segs[k].dst,
                            (unsigned long long)out->segs[k].src, (unsigned long long)out->segs[k].n,
                            (out->segs[k].kind & 3) == 0   ? "CUVIL_WSEG_RAW"
                            : (out->segs[k].kind & 3) == 1 ? "CUVIL_WSEG_F16"
                                                           : "CUVIL_WSEG_BF16",
                            out->segs[k].kind & CG_WSEG_TRANSIENT ? " | CUVIL_WSEG_TRANSIENT" : "");
        cuvil_sb_puts(c, "};\n");
    }
    if (!st) {
        cuvil_sb *c = &out->model_c;
        /* offsets named by the copies of graph outputs no node writes */
        flush_params(&cg, c);
        /* the largest scratch of any part (a symbolic node reserves the bound computed for the
         * upper bounds, SCRATCH_BYTES, and checks it when the model runs) */
        cuvil_sb_printf(c, "\nstatic size_t scratch_bytes(void) {\n    size_t s = 0, t = 0;\n%s    (void)t;\n    return s;\n}\n\n",
                        cg.scratch.s ? cg.scratch.s : "");
        tensor_infos(g, c, "inputs_", g->inputs, g->n_inputs);
        tensor_infos(g, c, "outputs_", g->outputs, g->n_outputs);
        shape_functions(&cg, c);
        cuvil_sb_printf(c,
            "\n#define CPU_TARGET \"%s\"\n#define CPU_FEATURES \"%s\"   /* what the target's code uses: create() checks them */\n"
            "#define ARENA_BYTES ((size_t)%zu)\n"
            "#define SCRATCH_BYTES ((size_t)%zu)   /* for the target's kernels; scratch_bytes() is the linked runtime's */ /*@max*/\n\n"
            "/* the nodes in order (the glue calls it, runtime/glue/context.c) */\n"
            "static cuvil_status run_nodes(cuvil_model *m, unsigned char *A, const unsigned char *W, void *S,\n"
            "                              const void *const *in, void *const *out, int64_t *D) {\n"
            "    (void)m; (void)A; (void)W; (void)S; (void)in; (void)out; (void)D;\n"
            "    cuvil_status st = CUVIL_OK;\n%s"
            "    return st;\n}\n\n",
            target, target_features(target), cg.plan.arena_bytes, cg.scratch_bytes, calls.s ? calls.s : "");
        cuvil_sb_printf(c, "static const cuvil_model_desc desc_ = {\n    CUVIL_MODEL_ABI_VERSION, \"%s\", N_INPUTS, N_OUTPUTS, inputs_, outputs_,\n"
                           "    \"%s\", \"%s\", CPU_TARGET, \"", prefix, g->model_sha256, cuvil_version());
        cuvil_sb_c_escape(c, opts.s ? opts.s : "");
        cuvil_sb_printf(c, "\",\n    ARENA_BYTES, %zu,\n    %s_create, %s_run, %s_errmsg, %s_destroy,\n"
                           "    N_SYMS, syms_, %s_run_shapes, CPU_FEATURES, N_RUN_SIZES, %s_output_present,\n};\n\n",
                        out->weights.len, prefix, prefix, prefix, prefix, prefix, prefix);
        cuvil_sb_printf(c, "_Static_assert(%s_BUFFER_BYTES >= CUVIL_GLUE_CONTEXT_BYTES + CUVIL_GLUE_DIMS_BYTES(N_SYMS + N_RUN_SIZES + N_PRESENT) +\n"
                           "               (ARENA_BYTES + 63) / 64 * 64 + (SCRATCH_BYTES + 63) / 64 * 64 + 64,\n"
                           "               \"the header's BUFFER_BYTES holds what create() puts in a caller's buffer\");\n\n", up);
        cuvil_sb_printf(c,
            "/* what the glue reaches the model through */\n"
            "extern const unsigned char %s_weights[];\n"
            "static const cuvil_glue_table table_ = {\n"
            "    &desc_, SCRATCH_BYTES, scratch_bytes, N_SYMS + N_RUN_SIZES + N_PRESENT, in_sym_, %s_weights,\n"
            "    check_guards, output_dims, run_nodes, out_present_, %s, %d, %zu, %zu, %s,\n};\n\n"
            "/* The entry points: the runtime's glue with this model's table. create() and what a context\n"
            " * whose create() failed may be asked run on any CPU of the architecture (CUVIL_RT_BASELINE):\n"
            " * create() checks first that this one has what the target's code uses. */\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT cuvil_status %s_create(const cuvil_model_options *opts, cuvil_model **out) {\n"
            "    return cuvil_glue_create(&table_, opts, out);\n}\n\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT cuvil_status %s_run_shapes(cuvil_model *m, const void *const *in,\n"
            "                                                            const int64_t *const *in_dims, void *const *out,\n"
            "                                                            int64_t *const *out_dims) {\n"
            "    return cuvil_glue_run_shapes(m, in, in_dims, out, out_dims);\n}\n\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT cuvil_status %s_run(cuvil_model *m, const void *const *in, void *const *out) {\n"
            "    return cuvil_glue_run_shapes(m, in, NULL, out, NULL);\n}\n\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT const char *%s_errmsg(const cuvil_model *m) { return cuvil_glue_errmsg(m); }\n\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT int %s_output_present(const cuvil_model *m, int i) {\n"
            "    return cuvil_glue_output_present(m, i);\n}\n\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT void %s_destroy(cuvil_model *m) { cuvil_glue_destroy(m); }\n\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT const cuvil_model_desc *%s_model(void) { return &desc_; }\n\n"
            "#ifdef CUVIL_MODEL_SHARED\n"
            "CUVIL_RT_BASELINE CUVIL_EXPORT const cuvil_model_desc *cuvil_model_entry(void) { return &desc_; }\n#endif\n",
            prefix, prefix, out->n_segs ? "wsegs_" : "NULL", out->n_segs, out->weights_len, out->transient_len,
            any_init ? "init_weights" : "NULL",
            prefix, prefix, prefix, prefix,
            prefix, prefix, prefix);
        if (c->oom || out->weights.oom || calls.oom || cg.params.oom || cg.body.oom || cg.scratch.oom)
            st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory generating C");
    }
    cuvil_sb_free(&calls);
    cuvil_sb_free(&opts);
    cuvil_free(cg.dims_node);
    cuvil_free(cg.sym_d);
    cuvil_free(cg.sym_step);
    cuvil_free(guard_done);
    cuvil_sb_free(&cg.params);
    cuvil_sb_free(&cg.locals);
    cuvil_sb_free(&cg.body);
    cuvil_sb_free(&cg.scratch);
    cuvil_arena_free(&cg.strs);
    cuvil_free(cg.const_off);
    cuvil_free(cg.named);
    cuvil_free(cg.w16_ok);
    cuvil_free(cg.w16_src);
    cuvil_free(cg.part_init);
    cuvil_sb_free(&cg.init);
    size_t arena_bytes = cg.plan.arena_bytes, scratch_bytes = cg.scratch_bytes;
    /* the context and the run's dims, as create() places them in a caller's buffer */
    size_t context_bytes =
        CUVIL_GLUE_CONTEXT_BYTES + CUVIL_GLUE_DIMS_BYTES(cg.n_ranged + g->n_rt_syms + optional_outputs(g, g->n_outputs));
    cg_plan_free(&cg.plan);
    if (!st) {
        /* the header: the ABI (self-contained) and the prefixed entry points */
        cuvil_sb *h = &out->model_h;
        cuvil_sb_printf(h, "/* %s.h -- generated by Cuvil %s from ", prefix, cuvil_version());
        comment_str(h, cir_model_name(g));
        cuvil_sb_printf(h, ".\n *\n * Inputs:\n");
        char sh[1024];
        for (int i = 0; i < g->n_inputs; i++) {
            cuvil_sb_printf(h, " *   %d: ", i);
            comment_str(h, cir_val(g, g->inputs[i])->name);
            cuvil_sb_puts(h, " ");
            cuvil_sb_safe_expr(h, cir_shape_str(g, cir_val(g, g->inputs[i]), sh, sizeof sh), sizeof sh);
            cuvil_sb_puts(h, "\n");
        }
        cuvil_sb_puts(h, " * Outputs:\n");
        for (int i = 0; i < g->n_outputs; i++) {
            cuvil_sb_printf(h, " *   %d: ", i);
            comment_str(h, cir_val(g, g->outputs[i])->name);
            cuvil_sb_puts(h, " ");
            cuvil_sb_safe_expr(h, cir_shape_str(g, cir_val(g, g->outputs[i]), sh, sizeof sh), sizeof sh);
            cuvil_sb_puts(h, "\n");
        }
        cuvil_sb_printf(h, " *\n * Buffers are dense row-major, in the order above; see cuvil_model.h below.\n */\n"
                           "#ifndef %s_MODEL_H\n#define %s_MODEL_H\n\n", up, up);
        cuvil_sb_puts(h, abi_h);
        cuvil_sb_printf(h, "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
                           "#define %s_N_INPUTS %d\n#define %s_N_OUTPUTS %d\n"
                           "/* Memory one context uses: the activation arena and the kernels' scratch (upper bounds),\n"
                           " * and the size of a caller's buffer that holds all of it (cuvil_model_options.buffer):\n"
                           " * with one, create() allocates nothing. */\n"
                           "#define %s_ARENA_BYTES ((size_t)%zu) /*@max*/\n#define %s_SCRATCH_BYTES ((size_t)%zu) /*@max*/\n"
                           "#define %s_BUFFER_BYTES ((size_t)%zu) /*@max*/\n\n"
                           "const cuvil_model_desc *%s_model(void);\n"
                           "cuvil_status %s_create(const cuvil_model_options *opts, cuvil_model **out);\n"
                           "cuvil_status %s_run(cuvil_model *m, const void *const *inputs, void *const *outputs);\n"
                           "/* With input dims (the rank of each is the descriptor's): symbolic dims take the run's values\n"
                           " * within their ranges; output_dims[i] (or NULL) receive the outputs' dims. Buffers hold the\n"
                           " * run's dims, dense. */\n"
                           "cuvil_status %s_run_shapes(cuvil_model *m, const void *const *inputs, const int64_t *const *input_dims,\n"
                           "                           void *const *outputs, int64_t *const *output_dims);\n"
                           "const char *%s_errmsg(const cuvil_model *m);\n"
                           "/* Whether output i holds a value after the last run (0: an absent optional one). */\n"
                           "int %s_output_present(const cuvil_model *m, int i);\n"
                           "void %s_destroy(cuvil_model *m);\n\n"
                           "#ifdef __cplusplus\n}\n#endif\n#endif\n",
                        up, g->n_inputs, up, g->n_outputs, up, arena_bytes, up, scratch_bytes, up,
                        context_bytes + (arena_bytes + 63) / 64 * 64 + (scratch_bytes + 63) / 64 * 64 + 64, prefix, prefix,
                        prefix, prefix, prefix, prefix, prefix);
        if (h->oom) st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory generating the header");
    }
    return st;
}

void cg_output_free(cg_output *out) {
    cuvil_sb_free(&out->model_c);
    cuvil_sb_free(&out->model_h);
    cuvil_sb_free(&out->weights);
    cuvil_free(out->segs);
    out->segs = NULL;
}

cg_file *cg_split_files(const char *text, size_t len, int *n) {
    const size_t ml = strlen(CG_FILE_MARK);
    int cap = 8;
    cg_file *f = cuvil_malloc(sizeof *f * (size_t)cap);
    if (!f) return NULL;
    *n = 0;
    for (size_t at = 0; at < len;) {
        const char *line = text + at, *eol = memchr(line, '\n', len - at);
        size_t ll = eol ? (size_t)(eol - line) : len - at, next = at + ll + (eol ? 1 : 0);
        bool mark = ll > ml && !memcmp(line, CG_FILE_MARK, ml);
        if (mark || *n == 0) {
            if (*n == cap) {
                cg_file *g = cuvil_realloc(f, sizeof *f * (size_t)(cap *= 2));
                if (!g) {
                    cuvil_free(f);
                    return NULL;
                }
                f = g;
            }
            cg_file *c = &f[(*n)++];
            snprintf(c->name, sizeof c->name, "model.c");
            if (mark) {
                size_t k = 0;
                for (const char *p = line + ml; p < line + ll && *p != ' ' && k + 1 < sizeof c->name; p++) c->name[k++] = *p;
                c->name[k] = 0;
            }
            c->text = mark ? text + next : line;
            c->len = 0;
            if (mark) {
                at = next;
                continue;
            }
        }
        f[*n - 1].len = (size_t)(text + next - f[*n - 1].text);
        at = next;
    }
    return f;
}
