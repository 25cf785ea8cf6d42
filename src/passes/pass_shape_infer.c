/* pass_shape_infer.c -- infers every value's dtype and shape in node order, and folds nodes
 * whose inputs are all constant when their result is shape data (integers) or small: the
 * Shape -> Gather -> Concat -> Reshape chains exporters emit must be constant before the
 * Reshape can be inferred. Larger float constants are left to const_fold, except for ops that
 * can only be folded (no kernel): the next node's inference may need their result. */
#include "passes/passes_int.h"

#define SMALL_FOLD_ELEMS 4096
#define CIR_MAX_INPUTS_HALF 16

static bool worth_folding_now(cir_graph *g, const cir_node *n) {
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(g, n->out[i]);
        if (!v) continue;
        if (cir_dtype_is_float(v->dtype) && cir_numel(v) > SMALL_FOLD_ELEMS) return false;
    }
    return true;
}

/* What the model declares for v must agree with what inference found: the element type always
 * (as ONNX Runtime requires), and for a graph output the rank and every fixed dim too, since
 * the compiled model's interface reports them. */
static cuvil_status check_declared(cir_graph *g, const cir_node *n, cir_value *v) {
    char sh[256];
    if (v->decl_kind && (v->decl_kind == 2) != (v->seq_n >= 0))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "output '%s' is a %s, but the model declares it a %s", v->name,
                            v->seq_n >= 0 ? "sequence" : "tensor", v->decl_kind == 2 ? "sequence" : "tensor");
    if (v->decl_dtype != CIR_UNDEF && v->decl_dtype != v->dtype && !(v->seq_n >= 0 && v->ndim < 0))
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "output '%s' is %s, but the model declares it %s", v->name,
                            cir_dtype_name(v->dtype), cir_dtype_name(v->decl_dtype));
    if (v->output_index < 0 || v->decl_ndim < 0) return CUVIL_OK;
    /* a fixed dim declared where the run finds the size (a NonZero's count, which ONNX's own
     * test models declare from their data): an assumption, checked when the model runs */
    /* one that the values of a tensor give, read before the node runs (an Expand's shape fed
     * by the caller): also the size of the output, which is then planned for the declared
     * size, not for every value the tensor may hold */
    const cir_dim *dx[CIR_MAX_DIMS];
    bool narrowed = false;
    for (int i = 0; v->decl_ndim == v->ndim && i < v->ndim; i++) {
        dx[i] = cir_dimx(g, v, i);
        if (v->decl_dims[i] >= 0 && cir_dim_uses_rt(g, v->dx[i])) {
            const cir_dim *c = cir_dim_const(&g->dt, v->decl_dims[i]);
            cuvil_status s = cir_require_eq(g, n, c, v->dx[i], "the declared output dim and the size the run found");
            if (s) return s;
            if (!cir_dim_uses_found(g, v->dx[i])) {
                dx[i] = c;
                narrowed = true;
            }
        }
    }
    if (narrowed) cir_set_shape_x(v, v->dtype, v->ndim, dx);
    bool same = v->decl_ndim == v->ndim;
    for (int i = 0; same && i < v->ndim; i++)
        same = v->decl_dims[i] < 0 || (!v->dx[i] && v->decl_dims[i] == v->dims[i]) || cir_dim_uses_rt(g, v->dx[i]);
    if (same) return CUVIL_OK;
    cuvil_sb d = {0};
    cuvil_sb_puts(&d, "[");
    for (int i = 0; i < v->decl_ndim; i++) {
        if (v->decl_dims[i] < 0) cuvil_sb_printf(&d, "%s?", i ? "," : "");
        else cuvil_sb_printf(&d, "%s%lld", i ? "," : "", (long long)v->decl_dims[i]);
    }
    cuvil_sb_puts(&d, "]");
    cuvil_status s = cir_node_err(g, n, CUVIL_ERR_SHAPE, "graph output '%s' is %s, but the model declares it %s", v->name,
                                  cir_shape_str(g, v, sh, sizeof sh), d.s ? d.s : "?");
    cuvil_sb_free(&d);
    return s;
}

/* int4 and uint4 (one element per byte) enter only ops that convert them or move them whole;
 * any other op would compute in 8 bits. Checks n's inputs, or its outputs once inferred. */
static cuvil_status four_bit_ok(cir_graph *g, cir_node *n, bool outputs) {
    switch (n->kind) {
    case CIR_OP_CAST: case CIR_OP_QUANTIZE: case CIR_OP_DEQUANTIZE: case CIR_OP_IDENTITY: case CIR_OP_RESHAPE:
    case CIR_OP_SQUEEZE: case CIR_OP_UNSQUEEZE: case CIR_OP_FLATTEN: case CIR_OP_SHAPE: case CIR_OP_SIZE:
        return CUVIL_OK;
    default: break;
    }
    int cnt = outputs ? n->n_out : n->n_in;
    for (int j = 0; j < cnt; j++) {
        int id = outputs ? n->out[j] : n->in[j];
        const cir_value *v = id >= 0 ? cir_val(g, id) : NULL;
        if (v && (v->dtype == CIR_I4 || v->dtype == CIR_U4))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "%s '%s' is %s; 4-bit values go only into Cast, "
                                "QuantizeLinear, DequantizeLinear and the reshaping ops", outputs ? "output" : "input",
                                v->name, cir_dtype_name(v->dtype));
    }
    return CUVIL_OK;
}

/* A cast of value `from` to type `to`, placed at pos, into *out_value, or when that is -1 into
 * a new value named after `from` ("x (as float32)"); the node is named node_name (src_op
 * src_op: messages about the cast speak of the node the model has) or else after the value.
 * Returns the node's id or -1 (message on ctx). */
static int cast_at(cir_graph *g, int pos, int from, cir_dtype to, const char *node_name, const char *src_op,
                   int *out_value, int region) {
    char name[600];
    snprintf(name, sizeof name, "%.500s (as %s)", cir_val(g, from)->name, cir_dtype_name(to));
    int nv = *out_value >= 0 ? *out_value : cir_value_add(g, name, CIR_VAL_ACT);
    if (nv < 0) return -1;
    int id = cir_node_insert(g, pos, CIR_OP_CAST, node_name ? node_name : name, src_op ? src_op : "Cast", 1, &from, 1,
                             &nv);
    if (id < 0) return -1;
    cir_node_at(g, id)->region = region;   /* the region of the node it serves */
    cir_node_at(g, id)->half_cast = true;
    cuvil_attr a = {.name = "to", .type = CUVIL_ATTR_INT, .i = cir_dtype_to_public(to)};
    if (cir_node_set_attr(g, cir_node_at(g, id), &a)) return -1;
    *out_value = nv;
    return id;
}

/* Node i's kernel takes float32 and an input is float16 or bfloat16 (ONNX Runtime does the
 * same on CPUs): every such input is cast to float32 by a node placed before it. Once it is
 * inferred, its float32 outputs are cast back (half_out). */
static cuvil_status half_in(cir_graph *g, int i) {
    cir_node *n = cir_node_at(g, i);
    g->half_model = true;
    cir_dtype half = CIR_UNDEF;
    int n_in = n->n_in, orig[CIR_MAX_INPUTS_HALF], cast[CIR_MAX_INPUTS_HALF];
    if (n_in > CIR_MAX_INPUTS_HALF)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "has %d inputs; float16 is computed in float32 for at most %d",
                            n_in, CIR_MAX_INPUTS_HALF);
    const cir_value *h = NULL;   /* the first half-precision input: its type is the node's */
    for (int j = 0; j < n_in; j++) {
        orig[j] = n->in[j];
        cast[j] = -1;
        cir_value *v = cir_in(g, n, j);
        if (v && !h && (v->dtype == CIR_F16 || v->dtype == CIR_BF16)) h = v, half = v->dtype;
    }
    CUVIL_ASSERT(h);
    g->half_types |= half == CIR_F16 ? 1 : 2;
    /* ops whose float inputs share one type T in ONNX: a float32 among float16 ones is an error
     * (resize's scales, batch norm's statistics and pow's exponent may differ) */
    bool one_t = n->kind == CIR_OP_CONV || n->kind == CIR_OP_CONV_TRANSPOSE || n->kind == CIR_OP_GEMM ||
                 n->kind == CIR_OP_MATMUL || n->kind == CIR_OP_LAYER_NORM || n->kind == CIR_OP_INSTANCE_NORM ||
                 n->kind == CIR_OP_PAD;
    for (int j = 0; j < n_in && one_t; j++) {
        const cir_value *v = cir_in(g, n, j);
        if (v && cir_dtype_is_float(v->dtype) && v->dtype != half)
            return cir_node_err(g, n, CUVIL_ERR_DTYPE, "inputs '%s' (%s) and '%s' (%s) differ in type", h->name,
                                cir_dtype_name(h->dtype), v->name, cir_dtype_name(v->dtype));
    }
    for (int j = 0; j < n_in; j++) {
        cir_value *v = orig[j] >= 0 ? cir_val(g, orig[j]) : NULL;
        if (!v || (v->dtype != CIR_F16 && v->dtype != CIR_BF16)) continue;
        for (int k = 0; k < j && cast[j] < 0; k++)   /* the same value twice: one cast */
            if (orig[k] == orig[j]) cast[j] = cast[k];
        if (cast[j] < 0) {
            if (cast_at(g, i, orig[j], CIR_F32, NULL, NULL, &cast[j], n->region) < 0) return g->ctx->status;
            i++;   /* the node moved up one */
        }
        cir_node_at(g, i)->in[j] = cast[j];
    }
    cir_node_at(g, i)->half = half;
    return CUVIL_OK;
}

/* After node i (computed in float32 for half inputs) is inferred: its float32 outputs become
 * new values, cast back to the half type into the original ones by nodes placed after it. */
static cuvil_status half_out(cir_graph *g, int i) {
    cir_node *n = cir_node_at(g, i);
    n->half_out_done = true;
    for (int j = n->n_out - 1; j >= 0; j--) {
        n = cir_node_at(g, i);
        cir_value *v = n->out[j] >= 0 ? cir_val(g, n->out[j]) : NULL;
        if (!v || v->dtype != CIR_F32) continue;   /* indices and the like stay */
        if (n->kind == CIR_OP_LAYER_NORM && j > 0) continue;   /* Mean, InvStdDev: float32 (stash_type) */
        char name[600];
        snprintf(name, sizeof name, "%.500s (as float32)", v->name);
        int orig = n->out[j], nv = cir_value_add(g, name, CIR_VAL_ACT);
        if (nv < 0) return g->ctx->status;
        n = cir_node_at(g, i);
        cir_value *x = cir_val(g, nv), *o = cir_val(g, orig);
        cir_set_shape_like(x, CIR_F32, o);   /* (symbolic dims too: the kernel writes the run's size) */
        x->producer = i;
        n->out[j] = nv;
        int dummy = orig;   /* the cast back is named as the node: a message about its output speaks of it */
        if (cast_at(g, i + 1, nv, n->half, n->name, n->src_op, &dummy, n->region) < 0) return g->ctx->status;
        o->producer = -1;   /* the cast's, once inferred */
    }
    return CUVIL_OK;
}

/* Whether node n, which takes half-precision values, is computed in float32 between casts too
 * although it has a half kernel: it is elementwise arithmetic, a pool, a reduction or a data
 * movement whose outputs are all of its inputs' half type, and one of those inputs comes from a
 * float32 kernel (a cast shape inference placed after it). Pass half_chain then joins the casts
 * away, so a chain of half nodes runs in float32 (as ONNX Runtime computes them on CPUs) and its
 * kernels fuse. Not at -O0, nor with --disable-pass half_chain. */
static bool promote_half(cir_graph *g, const cir_node *n, const cuvil_options *o) {
    if (!o || o->opt_level < 1 || cuvil_pass_disabled(o, "half_chain") || n->half != CIR_UNDEF || n->n_out < 1 ||
        n->n_in > CIR_MAX_INPUTS_HALF)
        return false;
    switch (n->kind) {
    case CIR_OP_ADD: case CIR_OP_SUB: case CIR_OP_MUL: case CIR_OP_DIV: case CIR_OP_POW: case CIR_OP_MAX:
    case CIR_OP_MIN: case CIR_OP_PRELU: case CIR_OP_SUM: case CIR_OP_MEAN: case CIR_OP_WHERE:
    case CIR_OP_MAX_POOL: case CIR_OP_AVG_POOL: case CIR_OP_GLOBAL_AVG_POOL: case CIR_OP_GLOBAL_MAX_POOL:
    case CIR_OP_RESHAPE: case CIR_OP_FLATTEN: case CIR_OP_SQUEEZE: case CIR_OP_UNSQUEEZE: case CIR_OP_TRANSPOSE:
    case CIR_OP_CONCAT: case CIR_OP_SLICE: case CIR_OP_SPLIT: case CIR_OP_DEPTH_TO_SPACE: case CIR_OP_SPACE_TO_DEPTH:
    case CIR_OP_EXPAND: case CIR_OP_TILE: case CIR_OP_PAD: case CIR_OP_GATHER:
    case CIR_OP_SOFTMAX: case CIR_OP_LOG_SOFTMAX: case CIR_OP_REDUCE_MEAN: case CIR_OP_REDUCE_SUM:
    case CIR_OP_REDUCE_MAX: case CIR_OP_REDUCE_MIN: case CIR_OP_RESIZE:
        break;
    default:
        if (!(n->def->flags & CIR_OPF_IS_ACT)) return false;
    }
    cir_dtype half = CIR_UNDEF;
    bool from_f32 = false;
    for (int j = 0; j < n->n_in; j++) {
        const cir_value *v = cir_in(g, n, j);
        if (!v || (v->dtype != CIR_F16 && v->dtype != CIR_BF16)) continue;
        if (half != CIR_UNDEF && v->dtype != half) return false;
        half = v->dtype;
        if (v->producer >= 0) {
            const cir_node *p = cir_node_at(g, v->producer);
            from_f32 |= !p->dead && p->half_cast && p->n_in == 1 && cir_in(g, p, 0) && cir_in(g, p, 0)->dtype == CIR_F32;
        }
    }
    if (!from_f32) return false;
    for (int j = 0; j < n->n_out; j++) {   /* declared types: a half op's outputs are its inputs' type */
        const cir_value *v = n->out[j] >= 0 ? cir_val(g, n->out[j]) : NULL;
        if (v && v->ndim >= 0 && v->dtype != half) return false;
    }
    return true;
}

/* Whether an input of n has a dim (dims) or values (!dims) known only as expressions of the
 * symbols. */
static bool takes_symbolic(cir_graph *g, const cir_node *n, bool dims) {
    for (int j = 0; j < n->n_in; j++) {
        const cir_value *v = cir_in(g, n, j);
        if (v && (dims ? !cir_value_fixed(v) : v->sval != NULL)) return true;
    }
    return false;
}

/* Node n, in a branch of an If whose condition only the run knows, cannot be inferred (status
 * s, message on the context): at the sizes compiled for, that branch cannot run. TorchScript's
 * exports carry such branches (silero-vad's 8 kHz path, its sizes those of a 256-sample chunk,
 * beside the 16 kHz one compiled for 512 samples); ONNX Runtime fails only if a run takes one.
 * So does Cuvil: the branch's nodes die, the If takes its outputs from the other branch, and the
 * run fails with this reason when the condition picks the dead one (cg_emit_if). Not for a loop's
 * body, nor when the If's other branch already failed. Returns true when it did. */
static bool drop_branch(cir_graph *g, const cir_node *n, cuvil_status s) {
    const int r = n->region;
    if (r <= 0 || r >= g->n_regions || g->regions[r].loop || g->regions[r].cond < 0 ||
        (s != CUVIL_ERR_SHAPE && s != CUVIL_ERR_MODEL && s != CUVIL_ERR_UNSUPPORTED))
        return false;
    cir_node *f = NULL;
    for (int j = 0; j < g->n_nodes && !f; j++) {
        cir_node *c = cir_node_at(g, j);
        if (!c->dead && c->kind == CIR_OP_IF && (c->then_region == r || c->else_region == r)) f = c;
    }
    const int side = g->regions[r].is_else ? 2 : 1;
    if (!f || f->fail_branch || (side == 1 ? f->then_region : f->else_region) != r) return false;
    const char *why = cuvil_errmsg(g->ctx);
    char *msg = cuvil_arena_strdup(&g->arena, why ? why : "?");
    if (!msg) return false;
    for (int j = 0; j < g->n_nodes; j++) {
        cir_node *c = cir_node_at(g, j);
        if (!c->dead && c->region && cir_region_within(g, c->region, r)) c->dead = true;
    }
    /* the size checks those nodes asked for go with them (the run would make them on the
     * other branch's way; a live node that assumes the same asks again) */
    int kept = 0;
    for (int k = 0; k < g->n_guards; k++) {
        const cir_guard *gd = &g->guards[k];
        const cir_node *c = gd->node_id >= 0 && gd->node_id < g->n_nodes ? cir_node_at(g, gd->node_id) : NULL;
        if (c && c->dead && c->region && cir_region_within(g, c->region, r)) continue;
        g->guards[kept++] = *gd;
    }
    g->n_guards = kept;
    f->fail_branch = side;
    f->fail_msg = msg;
    cuvil_sb note = {0};
    cuvil_sb_safe_text(&note, f->name, 200);
    cuvil_sb_printf(&note, "': its %s branch cannot run at these sizes; a run that takes it fails (", side == 1 ? "then" : "else");
    cuvil_sb_safe_text(&note, msg, 600);
    fprintf(stderr, "cuvil: note: If '%s)\n", note.s ? note.s : "?");
    cuvil_sb_free(&note);
    cuvil_err_clear(g->ctx);
    g->ctx->status = CUVIL_OK;
    return true;
}

cuvil_status cuvil_pass_shape_infer(cir_graph *g, const cuvil_options *o) {
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        CUVIL_ASSERT(n->def);
        if (n->region) {   /* in an If's branch: not taken when the condition is constant and says so */
            int live = cir_region_live(g, n->region);
            if (live < 0) {
                n->dead = true;
                continue;
            }
            n->region = live;   /* the branch a constant condition takes runs with the nodes around it */
        }
        g->half_input = false;
        cuvil_status s = cir_node_check_attrs(g, n);
        for (int j = 0; !s && j < n->n_in && !cir_op_reads_seq(n->kind); j++) {
            const cir_value *v = cir_in(g, n, j);
            if (v && v->seq_n >= 0)
                s = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is a sequence; Cuvil takes sequences into the "
                                 "sequence ops, Identity, If and SequenceMap, and as a Loop's state only where the body "
                                 "appends to it (SequenceInsert at the end, read by nothing else)", v->name);
        }
        if (!s && g->symdims && !(n->def->flags & CIR_OPF_SYM_DIMS) && takes_symbolic(g, n, true))
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "takes symbolic dims, which op %s cannot take (fix them with "
                                "--dim NAME=N)", n->def->name);
        if (!s) s = four_bit_ok(g, n, false);
        if (!s && promote_half(g, n, o)) {   /* in float32 between casts, as its neighbours */
            if ((s = half_in(g, i))) return s;
            i--;
            continue;
        }
        if (!s) s = n->def->infer(g, n);
        if (!s) s = four_bit_ok(g, n, true);
        if (s && g->half_input && n->half == CIR_UNDEF) {
            /* computed in float32 between casts: the casts are inferred first, then the node */
            cuvil_err_clear(g->ctx);
            g->ctx->status = CUVIL_OK;
            if ((s = half_in(g, i))) return s;
            i--;
            continue;
        }
        if (s && drop_branch(g, n, s)) continue;
        if (s) return s;
        if (n->half != CIR_UNDEF && !n->half_out_done) {
            if ((s = half_out(g, i))) return s;
            n = cir_node_at(g, i);
        }
        if (n->dead) {   /* infer produced constants (shape, size): still as declared? */
            for (int j = 0; j < n->n_out; j++) {
                cir_value *v = cir_val(g, n->out[j]);
                if (v && (s = check_declared(g, n, v))) return s;
            }
            continue;
        }
        for (int j = 0; j < n->n_out; j++) {
            cir_value *v = cir_val(g, n->out[j]);
            if (!v) continue;
            if (v->ndim < 0 && v->seq_n < 0) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "output %d has no shape after infer", j);
            v->producer = i;
            /* every shape that enters the IR is bounded: later size arithmetic cannot overflow */
            if ((s = check_declared(g, n, v)) || (s = cir_check_shape(g, n, v))) return s;
        }
        if (g->symdims && takes_symbolic(g, n, false)) {   /* shape arithmetic on the symbols */
            if ((s = op_sval_eval(g, n))) return s;
            if (n->dead) continue;
        }
        if (n->def->fold && cuvil_inputs_const(g, n) && (worth_folding_now(g, n) || cir_op_always_folds(n->def)) &&
            cuvil_fold_wanted(g, n) &&
            (s = cuvil_fold_node(g, n)))
            return s;
    }
    return CUVIL_OK;
}
