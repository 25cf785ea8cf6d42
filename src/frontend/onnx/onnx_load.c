/* onnx_load.c -- ONNX ModelProto (protobuf-c) to CIR. See onnx_int.h.
 *
 * This is the trust boundary: the model file comes from a stranger. Before protobuf-c sees it,
 * onnx_prescan.c bounds its nesting and refuses NUL bytes in strings; after, every field that
 * matters is checked here against the ONNX spec (IR version, opsets, names defined once,
 * shapes, topological order), against ONNX's operator schemas (onnx_schema.c) and against the
 * limits in the options. Names stay data: they are copied, compared and printed in messages,
 * never interpreted. */
#include "frontend/onnx/onnx_int.h"
#include "ir/ops/ops.h"

#include <libgen.h>
#include <limits.h>
#include <string.h>

typedef struct loader {
    cuvil_ctx *ctx;
    cir_graph *g;
    const cuvil_options *o;
    const cuvil_limits *lim;
    cuvil_map names;          /* value name -> id */
    cuvil_map later;          /* node output name -> node index, to explain a use before definition */
    cuvil_map declared;       /* graph input names (repeats) */
    cuvil_map opsets;         /* domain ("ai.onnx" for the default) -> index in opset_import */
    cuvil_map elem_dims;      /* the names of sequence inputs' element dims that a --dim gives */
    /* A loop's body may name an input as a graph around it names a value (ONNX's checker and
     * ONNX Runtime take it; node outputs stay single assignments throughout): the input hides
     * the outer value until the body ends. scope_first: the
     * first value id of the subgraph loading (0: the main graph); shadow: the outer names hidden,
     * and their ids, restored when it ends. */
    int scope_first;
    struct shadowed {
        const char *name;
        int id;
    } *shadow;
    int n_shadow, cap_shadow;
    const char *model_dir;    /* NULL: external data refused */
    Onnx__ModelProto *m;
    onnx_mapper map;          /* ONNX ops onto CIR ops (onnx_ops.c) */
    /* per symbol: the --shape dim that fixed or bounded it first (another must agree), and where */
    const cuvil_shape_dim *bound[32];
    const char *bound_input[32];
    int bound_dim[32];
} loader;

static void *pb_alloc(void *unused, size_t n) {
    (void)unused;
    return cuvil_malloc(n);
}
static void pb_free(void *unused, void *p) {
    (void)unused;
    cuvil_free(p);
}
ProtobufCAllocator cuvil_pb_allocator = {pb_alloc, pb_free, NULL};

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

/* The opset the model imports for domain, or -1: looked up in L->opsets (check_opsets fills it
 * once; a scan per node would be quadratic for a model with many imports). */
static int opset_of(loader *L, const char *domain) {
    int i = cuvil_map_get(&L->opsets, is_default_domain(domain) ? "ai.onnx" : domain);
    if (i < 0) return -1;
    int64_t v = L->m->opset_import[i]->version;
    return v > INT_MAX ? INT_MAX : v < 0 ? -1 : (int)v;
}

static cuvil_status check_opsets(loader *L) {
    const Onnx__ModelProto *m = L->m;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain, *key = is_default_domain(d) ? "ai.onnx" : d;
        if (cuvil_map_get(&L->opsets, key) >= 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "the model imports the opset of domain '%s' twice", key);
        if (!cuvil_map_put(&L->opsets, key, (int)i)) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (is_default_domain(d)) {
            int64_t v = m->opset_import[i]->version;
            if (v < 1)
                return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "the model imports opset %lld of the ONNX domain, which does not exist",
                                 (long long)v);
            if (v > cuvil_onnx_max_opset())
                return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                                 "the model uses opset %lld of the ONNX domain; this Cuvil knows opsets up to %d",
                                 (long long)v, cuvil_onnx_max_opset());
        }
    }
    if (opset_of(L, "") < 0)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "the model imports no opset for the default ONNX domain");
    return CUVIL_OK;
}

static int sym_get(loader *L, const char *name) {
    cir_graph *g = L->g;
    for (int i = 0; i < g->n_syms; i++)
        if (!strcmp(g->syms[i].name, name)) return i;
    if (g->n_syms == (int)(sizeof g->syms / sizeof g->syms[0])) return -1;
    int64_t val = 1, lo = 0, hi = 0, step = 1;
    bool given = false;
    for (int i = 0; i < L->o->n_dims; i++)
        if (!strcmp(L->o->dims[i].name, name)) {
            given = true;
            if (L->o->dims[i].max > 0) {
                lo = L->o->dims[i].min;
                hi = val = L->o->dims[i].max;   /* the upper bound */
                step = L->o->dims[i].step > 1 ? L->o->dims[i].step : 1;
            } else {
                val = L->o->dims[i].value;
            }
        }
    const char *copy = cuvil_arena_strdup(&g->arena, name);
    if (!copy) return -2;
    cir_sym *s = &g->syms[g->n_syms];
    s->name = copy;
    s->value = val;
    s->min = lo;
    s->max = hi;
    s->step = step;
    s->defaulted = !given;
    return g->n_syms++;
}

/* The --shape binding of input `name`, or NULL. */
static const cuvil_shape_binding *shape_binding(loader *L, const char *name) {
    for (int i = 0; i < L->o->n_shapes; i++)
        if (L->o->shapes[i].input && !strcmp(L->o->shapes[i].input, name)) return &L->o->shapes[i];
    return NULL;
}

/* Whether a body input `name` may be defined now (its value id in L->names is `id`, -1 if none):
 * unused, or a value of a graph around the subgraph loading, which it then hides (L->shadow).
 * false: defined twice in one graph, or out of memory (L->ctx says which when *oom). */
static bool may_define(loader *L, const char *name, int id, bool *oom) {
    *oom = false;
    if (id < 0) return true;
    if (!L->scope_first || id >= L->scope_first) return false;   /* (this graph's own: twice) */
    if (L->n_shadow == L->cap_shadow) {
        int cap = L->cap_shadow ? 2 * L->cap_shadow : 16;
        struct shadowed *ns = cuvil_realloc(L->shadow, sizeof *ns * (size_t)cap);
        if (!ns) return !(*oom = true);
        L->shadow = ns;
        L->cap_shadow = cap;
    }
    L->shadow[L->n_shadow++] = (struct shadowed){name, id};
    return true;
}

static cuvil_status add_name(loader *L, int id) {
    if (!cuvil_map_put(&L->names, cir_val(L->g, id)->name, id))
        return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    return CUVIL_OK;
}

static cuvil_status count_value(loader *L) {
    if (L->g->n_values >= L->lim->values)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                         "the model has more than %lld values; the limit is values=%lld (raise it with --limit values=N)",
                         (long long)L->lim->values, (long long)L->lim->values);
    return CUVIL_OK;
}

/* A new value of the model, within the values limit (count_value), or -1 (the message on the
 * context). */
static int new_value(loader *L, const char *name, cir_value_kind kind) {
    return count_value(L) ? -1 : cir_value_add(L->g, name, kind);
}

/* A value's declared tensor type: dtype and shape (dims -1 where not a fixed number). */
typedef struct decl {
    int kind;                  /* 0: no type, 1: a tensor, 2: a sequence of tensors (what follows: its elements) */
    bool opt;                  /* an optional one (ONNX's optional(...)) */
    cir_dtype dtype;
    int ndim;                  /* -1: no shape */
    int64_t dims[CUVIL_MAX_DIMS];
    const Onnx__TensorShapeProto *shape;
} decl;

/* Reads a ValueInfoProto's type. `what` is "graph input", "graph output" or "value_info". */
static cuvil_status read_decl(loader *L, const Onnx__ValueInfoProto *vi, const char *what, decl *d) {
    const char *name = vi->name ? vi->name : "";
    memset(d, 0, sizeof *d);
    d->ndim = -1;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp) return CUVIL_OK;
    d->kind = 1;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && tp->optional_type && tp->optional_type->elem_type) {
        d->opt = true;   /* an optional: its element's type */
        tp = tp->optional_type->elem_type;
    }
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type && tp->sequence_type->elem_type &&
        tp->sequence_type->elem_type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        d->kind = 2;   /* a sequence of tensors: its elements' type */
        tp = tp->sequence_type->elem_type;
    }
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s '%s': only tensors, sequences of tensors and optionals of "
                         "those are supported (not maps, or sequences or optionals of other kinds)", what, name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) {
        d->dtype = tt->elem_type > 0 && tt->elem_type < 64 ? cir_dtype_from_public((cuvil_dtype)tt->elem_type) : CIR_UNDEF;
        if (d->dtype == CIR_UNDEF)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s '%s': element type %d (%s) is not supported", what, name,
                             (int)tt->elem_type, cuvil_dtype_name((cuvil_dtype)tt->elem_type));
    }
    if (!tt->shape) return CUVIL_OK;
    if (tt->shape->n_dim > CUVIL_MAX_DIMS)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s '%s': rank %zu; at most %d is supported", what, name,
                         tt->shape->n_dim, CUVIL_MAX_DIMS);
    d->ndim = (int)tt->shape->n_dim;
    d->shape = tt->shape;
    for (int i = 0; i < d->ndim; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        d->dims[i] = -1;
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) continue;
        if (dim->dim_value == -1) continue;   /* exporters' "unknown" (ONNX's checker and ONNX Runtime take it) */
        if (dim->dim_value < 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s '%s': dim %d is %lld; a dim_value must not be negative", what,
                             name, i, (long long)dim->dim_value);
        if (dim->dim_value > L->lim->dim)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                             "%s '%s': dim %d = %lld is over the limit dim=%lld (raise it with --limit dim=N)", what, name,
                             i, (long long)dim->dim_value, (long long)L->lim->dim);
        d->dims[i] = dim->dim_value;
    }
    return CUVIL_OK;
}

/* A dim with a name of its own: dim_param other than "", "?" and "-1" (exporters' words for
 * "unknown"). */
static bool dim_is_named(const Onnx__TensorShapeProto__Dimension *dim) {
    const char *p = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dim->dim_param : NULL;
    return p && *p && strcmp(p, "?") && strcmp(p, "-1");
}

static void set_decl(cir_value *v, const decl *d) {
    v->decl_kind = d->kind;
    v->decl_dtype = d->dtype;
    v->decl_ndim = d->kind == 2 ? -1 : d->ndim;   /* (a sequence's elements' dims: not checked) */
    for (int i = 0; i < CIR_MAX_DIMS; i++) v->decl_dims[i] = i < d->ndim ? d->dims[i] : -1;
}

/* "float32[1,3,?,?]" */
static const char *decl_str(const decl *d, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "%s", cir_dtype_name(d->dtype));
    if (d->ndim < 0) return buf;
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "[");
    for (int i = 0; i < d->ndim && o < len; i++) {
        if (d->dims[i] < 0) o += (size_t)snprintf(buf + o, len - o, "%s?", i ? "," : "");
        else o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)d->dims[i]);
    }
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

/* Before any initializer's data is read (external data may be gigabytes): their bytes as
 * declared (dims times element size) must fit in a library, which links its weights in
 * (CUVIL_MAX_WEIGHTS_BYTES). An output of text (--emit ir, dot) links nothing. */
static cuvil_status check_declared_bytes(loader *L, const Onnx__GraphProto *gp) {
    if (L->o && (L->o->emit == CUVIL_EMIT_IR || L->o->emit == CUVIL_EMIT_DOT)) return CUVIL_OK;
    uint64_t total = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        uint64_t nb = t->has_data_type ? cuvil_dtype_size((cuvil_dtype)t->data_type) : 0;
        for (size_t d = 0; d < t->n_dims; d++) {
            /* a bad dim, a size that overflows or one over the limits: reported precisely when
             * the initializer is read */
            if (t->dims[d] < 0 || t->dims[d] > L->lim->dim) return CUVIL_OK;
            if (t->dims[d] && nb > UINT64_MAX / (uint64_t)t->dims[d]) return CUVIL_OK;
            nb *= (uint64_t)t->dims[d];
        }
        if (nb > L->lim->tensor_bytes) return CUVIL_OK;
        total = nb > UINT64_MAX - total ? UINT64_MAX : total + nb;
        if (total > CUVIL_MAX_WEIGHTS_BYTES)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                             "the initializers up to '%s' hold %llu bytes; a compiled model links its weights into the "
                             "library, which holds at most %llu bytes of them (x86-64's small code model addresses "
                             "2 GiB); a model this large needs external weights, which Cuvil does not support yet",
                             t->name ? t->name : "", (unsigned long long)total,
                             (unsigned long long)CUVIL_MAX_WEIGHTS_BYTES);
    }
    return CUVIL_OK;
}

static cuvil_status load_initializers(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    cuvil_status s0 = check_declared_bytes(L, gp);
    if (s0) return s0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *name = t->name ? t->name : "";
        if (!*name) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "initializer %zu has no name", i);
        if (cuvil_map_get(&L->names, name) >= 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "initializer '%s' is defined twice", name);
        cuvil_status s = count_value(L);
        if (s) return s;
        cuvil_dtype dt;
        int ndim;
        int64_t dims[CUVIL_MAX_DIMS];
        void *data;
        if ((s = cuvil_onnx_tensor_data(L->ctx, &g->arena, t, L->model_dir, name, L->lim, &dt, &ndim, dims, &data)))
            return s;
        cir_dtype ct = cir_dtype_from_public(dt);
        if (ct == CIR_UNDEF)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "initializer '%s': element type %s is not supported", name,
                             cuvil_dtype_name(dt));
        int id = cir_value_add(g, name, CIR_VAL_CONST);
        if (id < 0) return L->ctx->status;
        cir_value *v = cir_val(g, id);
        cir_set_shape(v, ct, ndim, dims);
        v->data = data;
        g->const_bytes += cir_nbytes(v);
        if (g->const_bytes > L->lim->total_bytes)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                             "initializer '%s' brings the model's constants over the limit total_bytes=%llu (raise it with "
                             "--limit total_bytes=N)", name, (unsigned long long)L->lim->total_bytes);
        if ((s = add_name(L, id))) return s;
    }
    if (gp->n_sparse_initializer)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "sparse initializers are not supported");
    return CUVIL_OK;
}

/* "8", "1:64", "32:512:32": a --shape dim's value or range. */
static const char *shape_dim_str(const cuvil_shape_dim *d, char *buf, size_t len) {
    if (d->value > 0) snprintf(buf, len, "%lld", (long long)d->value);
    else if (d->step > 1) snprintf(buf, len, "%lld:%lld:%lld", (long long)d->min, (long long)d->max, (long long)d->step);
    else snprintf(buf, len, "%lld:%lld", (long long)d->min, (long long)d->max);
    return buf;
}

/* The --seq binding of input `name`, or NULL. */
static const cuvil_seq_binding *seq_binding(loader *L, const char *name) {
    for (int i = 0; i < L->o->n_seqs; i++)
        if (!strcmp(L->o->seqs[i].input, name)) return &L->o->seqs[i];
    return NULL;
}

/* Graph input `name` (value id), a sequence of tensors as d declares its elements: its most
 * elements and count from --seq, its elements' dims from the model, or where it leaves one
 * open (a dim_param, which elements need not share), their largest from --shape. */
static cuvil_status load_seq_input(loader *L, int id, const char *name, const decl *d) {
    cir_graph *g = L->g;
    const cuvil_seq_binding *qb = seq_binding(L, name);
    const cuvil_shape_binding *sb = shape_binding(L, name);
    if (!qb)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s' is a sequence: give how many elements it holds "
                         "with --seq %s=N (or a range, --seq %s=LO:HI)", name, name, name);
    if (qb->max > CIR_SEQ_MAX)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "--seq %s: %lld elements; Cuvil takes at most %d", name,
                         (long long)qb->max, CIR_SEQ_MAX);
    int rank = d->ndim >= 0 ? d->ndim : sb ? sb->ndim : -1;
    if (rank < 0)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s' is a sequence whose elements' shape the model does "
                         "not give: give their largest dims with --shape %s=d0,d1,...", name, name);
    if (sb && sb->ndim != rank)
        return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: %d dims given; the sequence's elements have rank %d", name,
                         sb->ndim, rank);
    int64_t dims[CUVIL_MAX_DIMS];
    uint32_t same = 0;
    for (int k = 0; k < rank; k++) {
        const cuvil_shape_dim *sd = sb ? &sb->dims[k] : NULL;
        int64_t given = sd ? (sd->max > 0 ? sd->max : sd->value) : 0;
        if (sd && sd->name)
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d is a name; a sequence's elements take the "
                             "largest each dim may be, a number", name, k);
        if (d->ndim >= 0 && d->dims[k] >= 0) {   /* fixed by the model: every element's */
            if (sd && given != d->dims[k])
                return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d of its elements is %lld in the model",
                                 name, k, (long long)d->dims[k]);
            dims[k] = d->dims[k];
            same |= 1u << k;
            continue;
        }
        const Onnx__TensorShapeProto__Dimension *dm = d->ndim >= 0 && d->shape ? d->shape->dim[k] : NULL;
        for (int j = 0; !sd && dm && dim_is_named(dm) && j < L->o->n_dims; j++) {   /* a name --dim gives */
            const cuvil_dim_binding *b = &L->o->dims[j];
            if (strcmp(b->name, dm->dim_param)) continue;
            if (!cuvil_map_put(&L->elem_dims, b->name, j)) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            if (b->max <= 0) {   /* a number: every element's */
                dims[k] = b->value;
                same |= 1u << k;
                given = -1;
            } else {
                given = b->max;   /* a range: the largest (elements may differ) */
            }
        }
        if (given < 0) continue;
        if (given <= 0)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s' is a sequence whose elements' dim %d the model "
                             "leaves open: give the largest it may be with --shape %s=d0,d1,... (or, where the model names "
                             "it, its value, every element's, or its range with --dim NAME=...)", name, k, name);
        if (given > L->lim->dim)
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d = %lld is over the limit dim=%lld", name, k,
                             (long long)given, (long long)L->lim->dim);
        dims[k] = given;
    }
    cir_value *v = cir_val(g, id);
    cir_set_shape(v, d->dtype, rank, dims);
    v->seq_n = (int)qb->max;
    v->seq_same = same;
    char why[256];
    if (!cuvil_shape_ok(&g->limits, cir_dtype_size(d->dtype), rank, dims, why, sizeof why))
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': its elements %s", name, why);
    size_t slot = cir_seq_slot_bytes(v);
    if (qb->max && slot > (g->limits.tensor_bytes - cir_seq_hdr_bytes(v)) / (uint64_t)qb->max)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': a sequence of %lld elements of up to %zu bytes is "
                         "over the limit tensor_bytes=%llu (raise it with --limit tensor_bytes=N)", name, (long long)qb->max,
                         slot, (unsigned long long)g->limits.tensor_bytes);
    return CUVIL_OK;
}

/* Graph input id, an optional one: the caller may leave it out (a NULL buffer); whether it did
 * is a present node's bool, its pair (cir_value.opt_has). */
static cuvil_status optional_input(loader *L, int id) {
    cir_graph *g = L->g;
    char nm[300];
    snprintf(nm, sizeof nm, "%.280s/present", cir_val(g, id)->name);
    int has = new_value(L, nm, CIR_VAL_ACT);
    if (has < 0) return L->ctx->status;
    if (cir_node_add(g, CIR_OP_PRESENT, nm, "(optional input)", 1, &id, 1, &has) < 0) return L->ctx->status;
    cir_val(g, id)->optional = true;
    cir_val(g, id)->opt_has = has;
    return CUVIL_OK;
}

/* The symbols of the sequence inputs' counts, "len(<input>)", made after every dim's (a dim
 * the model names so is refused: the two would be one symbol). */
static cuvil_status seq_count_syms(loader *L) {
    cir_graph *g = L->g;
    for (int i = 0; i < g->n_inputs; i++) {
        cir_value *v = cir_val(g, g->inputs[i]);
        if (v->seq_n < 0) continue;
        const cuvil_seq_binding *qb = seq_binding(L, v->name);
        if (qb->min == qb->max) continue;   /* a fixed count: seq_n */
        char name[300];
        snprintf(name, sizeof name, "len(%.280s)", v->name);
        for (int k = 0; k < g->n_syms; k++)
            if (!strcmp(g->syms[k].name, name))
                return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': its count's symbol '%s' is also the name of "
                                 "a dim of the model", v->name, name);
        if (g->n_syms == (int)(sizeof g->syms / sizeof g->syms[0]))
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': too many symbolic dims (at most %d)", v->name,
                             (int)(sizeof g->syms / sizeof g->syms[0]));
        const char *copy = cuvil_arena_strdup(&g->arena, name);
        if (!copy) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        g->syms[g->n_syms] = (cir_sym){.name = copy, .value = qb->max, .min = qb->min, .max = qb->max, .step = 1};
        v->seq_sym = g->n_syms++;
    }
    for (int i = 0; i < L->o->n_seqs; i++) {
        int id = cuvil_map_get(&L->names, L->o->seqs[i].input);
        if (id < 0 || cir_val(g, id)->kind != CIR_VAL_INPUT || cir_val(g, id)->seq_n < 0)
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--seq %s: the model has no sequence input named so",
                             L->o->seqs[i].input);
    }
    return CUVIL_OK;
}

static cuvil_status load_inputs(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    for (int k = 0; k < L->o->n_seqs; k++) {   /* (an --seq naming no input: said first) */
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++) found = gp->input[i]->name && !strcmp(gp->input[i]->name, L->o->seqs[k].input);
        if (!found)
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--seq %s: the model has no sequence input named so",
                             L->o->seqs[k].input);
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi->name ? vi->name : "";
        if (!*name) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph input %zu has no name", i);
        if (cuvil_map_get(&L->declared, name) >= 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph input '%s' is declared twice", name);
        if (!cuvil_map_put(&L->declared, name, (int)i)) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        decl d;
        cuvil_status s = read_decl(L, vi, "graph input", &d);
        if (s) return s;
        int init = cuvil_map_get(&L->names, name);
        if (init >= 0) {
            /* an initializer listed as an input (IR < 4 style, or a default value): the two must agree */
            cir_value *c = cir_val(g, init);
            bool same = d.kind != 2 && (d.dtype == CIR_UNDEF || d.dtype == c->dtype);
            if (d.ndim >= 0) {
                same &= d.ndim == c->ndim;
                for (int k = 0; same && k < d.ndim; k++) same &= d.dims[k] < 0 || d.dims[k] == c->dims[k];
            }
            if (!same) {
                char a[256], b[256];
                return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph input '%s' is declared %s but its initializer is %s", name,
                                 decl_str(&d, a, sizeof a), cir_shape_str(g, c, b, sizeof b));
            }
            continue;   /* Cuvil treats it as the constant */
        }
        if (!vi->type)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph input '%s' has no type", name);
        if (d.dtype == CIR_UNDEF)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph input '%s' has no element type", name);
        if (d.kind == 2) {
            int id = new_value(L, name, CIR_VAL_INPUT);
            if (id < 0) return L->ctx->status;
            if ((s = load_seq_input(L, id, name, &d)) || (s = cir_graph_add_input(g, id)) || (s = add_name(L, id)) ||
                (d.opt && (s = optional_input(L, id))))
                return s;
            continue;
        }
        if (seq_binding(L, name))
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--seq %s: the input is a tensor, not a sequence", name);
        if (d.ndim < 0)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': the model gives no shape (rank unknown)", name);
        int id = new_value(L, name, CIR_VAL_INPUT);
        if (id < 0) return L->ctx->status;
        int64_t dims[CUVIL_MAX_DIMS];
        int syms[CUVIL_MAX_DIMS];
        const cuvil_shape_binding *sb = shape_binding(L, name);
        if (sb && sb->ndim != d.ndim)
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: %d dims given; the input has rank %d", name, sb->ndim,
                             d.ndim);
        for (int k = 0; k < d.ndim; k++) {
            const Onnx__TensorShapeProto__Dimension *dim = d.shape->dim[k];
            const cuvil_shape_dim *sd = sb ? &sb->dims[k] : NULL;
            syms[k] = -1;
            dims[k] = d.dims[k];
            if (dims[k] >= 0) {
                if (sd && sd->max > 0)
                    return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d is %lld in the model; a range cannot "
                                     "make it symbolic", name, k, (long long)dims[k]);
                if (sd && sd->value != dims[k])
                    return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d is %lld in the model", name, k,
                                     (long long)dims[k]);
                continue;
            }
            /* a named dim is one symbol wherever it appears; an unnamed one (no value, -1, or the
             * name "?" that Paddle's exporter writes for every unknown dim) is a symbol of its
             * own, "<input>_dim<k>", which --shape sets */
            char anon[300];
            const char *sname = sd && sd->name ? sd->name
                                : dim_is_named(dim) ? dim->dim_param
                                                    : (snprintf(anon, sizeof anon, "%.200s_dim%d", name, k), anon);
            syms[k] = sym_get(L, sname);
            if (syms[k] == -2) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            if (syms[k] < 0)
                return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': too many symbolic dims (at most %d)", name,
                                 (int)(sizeof g->syms / sizeof g->syms[0]));
            cir_sym *sy = &g->syms[syms[k]];
            for (int j = 0; sd && !sd->name && j < L->o->n_dims; j++)
                if (!strcmp(L->o->dims[j].name, sy->name))
                    return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d is symbol '%s', which --dim %s also "
                                     "sets; give it once (a name in --shape, its value in --dim)", name, k, sy->name, sy->name);
            _Static_assert(sizeof L->bound / sizeof L->bound[0] == sizeof g->syms / sizeof g->syms[0], "per symbol");
            if (sd && (sd->value > 0 || sd->max > 0)) {   /* one symbol, one value or range */
                const cuvil_shape_dim *b = L->bound[syms[k]];
                if (b && (b->value != sd->value || b->min != sd->min || b->max != sd->max ||
                          (b->step > 1 ? b->step : 1) != (sd->step > 1 ? sd->step : 1))) {
                    char x[80], y[80];
                    return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: dim %d is symbol '%s', which --shape %s "
                                     "(dim %d) gives as %s; here it is %s", name, k, sy->name, L->bound_input[syms[k]],
                                     L->bound_dim[syms[k]], shape_dim_str(b, x, sizeof x), shape_dim_str(sd, y, sizeof y));
                }
                L->bound[syms[k]] = sd;
                L->bound_input[syms[k]] = name;
                L->bound_dim[syms[k]] = k;
            }
            if (sd && (sd->value > 0 || sd->max > 0)) sy->defaulted = false;
            if (sd && sd->value > 0) {          /* fixed by --shape */
                sy->value = sd->value;
                sy->min = sy->max = 0;
            } else if (sd && sd->max > 0) {     /* a range by --shape */
                sy->min = sd->min;
                sy->max = sy->value = sd->max;
                sy->step = sd->step > 1 ? sd->step : 1;
            }
            if (sy->max > 0 && (sy->min < 0 || sy->max > L->lim->dim))
                return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "the range %lld:%lld of dim '%s' must be within 0..%lld",
                                 (long long)sy->min, (long long)sy->max, sy->name, (long long)L->lim->dim);
            if (sy->max > 0 && (sy->min % sy->step || sy->max % sy->step))
                return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "the range %lld:%lld:%lld of dim '%s' must start and end on "
                                 "multiples of its step %lld", (long long)sy->min, (long long)sy->max, (long long)sy->step,
                                 sy->name, (long long)sy->step);
            dims[k] = sy->value;
        }
        cir_value *v = cir_val(g, id);
        cir_set_shape(v, d.dtype, d.ndim, dims);
        for (int k = 0; k < d.ndim; k++) v->dim_sym[k] = syms[k];
        if ((s = cir_check_shape(g, NULL, v))) return cuvil_err_prefix(L->ctx, "graph input ");
        if ((s = cir_graph_add_input(g, id))) return s;
        if ((s = add_name(L, id))) return s;
        if (d.opt && (s = optional_input(L, id))) return s;
    }
    return seq_count_syms(L);
}

/* One AttributeProto in its public form (a TENSOR attribute becomes a constant value). desc
 * names the node. */
static cuvil_status load_attr(loader *L, const char *desc, const char *node_name, const Onnx__AttributeProto *ap,
                              onnx_attr *a) {
    cir_graph *g = L->g;
    memset(a, 0, sizeof *a);
    a->tensor = -1;
    a->name = cuvil_arena_strdup(&g->arena, ap->name ? ap->name : "");
    if (!a->name) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    a->a.name = a->name;
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->a.type = CUVIL_ATTR_FLOAT; a->a.f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->a.type = CUVIL_ATTR_INT; a->a.i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        if (ap->s.len && memchr(ap->s.data, 0, ap->s.len))
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' holds a NUL byte", desc, a->name);
        char *str = cuvil_arena_alloc(&g->arena, ap->s.len + 1);
        if (!str) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (ap->s.len) memcpy(str, ap->s.data, ap->s.len);
        str[ap->s.len] = 0;
        a->a.type = CUVIL_ATTR_STRING;
        a->a.s = str;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        if (ap->n_floats > INT_MAX / 8) return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: attribute '%s' is too long", desc, a->name);
        a->a.type = CUVIL_ATTR_FLOATS;
        a->a.n = ap->n_floats;
        float *fl = cuvil_arena_alloc(&g->arena, sizeof(float) * (ap->n_floats + 1));
        if (!fl) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (ap->n_floats) memcpy(fl, ap->floats, sizeof(float) * ap->n_floats);
        a->a.floats = fl;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        if (ap->n_ints > INT_MAX / 8) return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: attribute '%s' is too long", desc, a->name);
        a->a.type = CUVIL_ATTR_INTS;
        a->a.n = ap->n_ints;
        int64_t *iv = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (ap->n_ints + 1));
        if (!iv) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (ap->n_ints) memcpy(iv, ap->ints, sizeof(int64_t) * ap->n_ints);
        a->a.ints = iv;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
        if (ap->n_strings > 1024) return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: attribute '%s' is too long", desc, a->name);
        const char **sv = cuvil_arena_alloc(&g->arena, sizeof(char *) * (ap->n_strings + 1));
        if (!sv) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < ap->n_strings; i++) {
            if (ap->strings[i].len && memchr(ap->strings[i].data, 0, ap->strings[i].len))
                return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' holds a NUL byte", desc, a->name);
            char *str = cuvil_arena_alloc(&g->arena, ap->strings[i].len + 1);
            if (!str) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            if (ap->strings[i].len) memcpy(str, ap->strings[i].data, ap->strings[i].len);
            str[ap->strings[i].len] = 0;
            sv[i] = str;
        }
        a->strs = sv;
        a->n_strs = (int)ap->n_strings;
        break;   /* no CIR op takes a list of strings: type 0, refused unless the mapping consumes it */
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' has no tensor", desc, a->name);
        cuvil_status s = count_value(L);
        if (s) return s;
        cuvil_dtype dt;
        int ndim;
        int64_t dims[CUVIL_MAX_DIMS];
        void *data;
        char what[600];
        snprintf(what, sizeof what, "%.280s.%.280s", node_name, a->name);
        if ((s = cuvil_onnx_tensor_data(L->ctx, &g->arena, ap->t, L->model_dir, what, L->lim, &dt, &ndim, dims, &data)))
            return cuvil_err_prefix(L->ctx, "%s: ", desc);
        cir_dtype ct = cir_dtype_from_public(dt);
        if (ct == CIR_UNDEF)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: attribute '%s': element type %s is not supported", desc,
                             a->name, cuvil_dtype_name(dt));
        int id = cir_value_add(g, what, CIR_VAL_CONST);
        if (id < 0) return L->ctx->status;
        cir_set_shape(cir_val(g, id), ct, ndim, dims);
        cir_val(g, id)->data = data;
        g->const_bytes += cir_nbytes(cir_val(g, id));
        if (g->const_bytes > L->lim->total_bytes)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                             "%s: attribute '%s' brings the model's constants over the limit total_bytes=%llu (raise it "
                             "with --limit total_bytes=N)", desc, a->name, (unsigned long long)L->lim->total_bytes);
        a->tensor = id;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                         "%s: attribute '%s' is a subgraph, which Cuvil takes only as the body of If, Loop and "
                         "Scan", desc, a->name);
    default:
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: attribute '%s' has unsupported type %d", desc, a->name,
                         (int)ap->type);
    }
    return CUVIL_OK;
}

/* "Conv 'conv1'" for messages about a node not yet in the graph. */
static const char *node_desc(const char *domain, const char *op, const char *name, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%.200s '%.300s'", domain, *domain ? "." : "", op, name);
    return buf;
}

/* The nodes whose op Cuvil does not support, one entry per (domain, op, opset, reason): how
 * many, and the first one's description; listed all at once after every node is read. */
typedef struct unsup_op {
    const char *first;   /* the first node's name, quoted */
    const char *op;      /* domain-qualified op */
    const char *domain;
    int opset, why, n;   /* why: 0 unsupported, 1 older opset, 2 not in this opset, 3 no opset */
    int since;           /* why 2: the opset ONNX added it in */
} unsup_op;

typedef struct unsup_list {
    cuvil_map index;     /* key -> entry */
    cuvil_arena strs;
    unsup_op *ops;
    int n_ops, cap, n_nodes;
    bool oom;
} unsup_list;

static void unsup_add(unsup_list *u, const char *domain, const char *op, int opset, int why, int since,
                      const char *name) {
    char key[900];
    snprintf(key, sizeof key, "%zu:%.300s%zu:%.300s%d:%d", strlen(domain), domain, strlen(op), op, opset, why);
    u->n_nodes++;
    int i = cuvil_map_get(&u->index, key);
    if (i >= 0) {
        u->ops[i].n++;
        return;
    }
    if (u->n_ops == u->cap) {
        int cap = u->cap ? 2 * u->cap : 16;
        unsup_op *p = cuvil_realloc(u->ops, sizeof *p * (size_t)cap);
        if (!p) {
            u->oom = true;
            return;
        }
        u->ops = p;
        u->cap = cap;
    }
    char q[620];
    snprintf(q, sizeof q, "%.300s%s%.300s", domain, *domain ? "." : "", op);
    char nm[340];
    snprintf(nm, sizeof nm, "'%.300s'%s", name, strlen(name) > 300 ? " (cut at 300 bytes)" : "");
    const char *k = cuvil_arena_strdup(&u->strs, key), *f = cuvil_arena_strdup(&u->strs, nm),
               *o = cuvil_arena_strdup(&u->strs, q), *d = cuvil_arena_strdup(&u->strs, domain);
    if (!k || !f || !o || !d || !cuvil_map_put(&u->index, k, u->n_ops)) {
        u->oom = true;
        return;
    }
    u->ops[u->n_ops++] = (unsup_op){.first = f, .op = o, .domain = d, .opset = opset, .why = why, .n = 1, .since = since};
}

/* "N nodes use K ops Cuvil does not support:" then a line per op: op, opset, the count and the
 * first node. Every op is listed: the message is as long as it needs to be (cuvil_err keeps
 * long ones). */
static cuvil_status unsup_report(cuvil_ctx *ctx, unsup_list *u) {
    cuvil_sb b = {0};
    for (int i = 0; i < u->n_ops; i++) {
        const unsup_op *e = &u->ops[i];
        cuvil_sb_printf(&b, "\n  %s", e->op);
        if (e->why == 3) cuvil_sb_printf(&b, ": the model imports no opset for domain '%s'", e->domain);
        else if (e->why == 2) cuvil_sb_printf(&b, " does not exist in opset %d (ONNX added it in opset %d)", e->opset, e->since);
        else cuvil_sb_printf(&b, " (opset %d)%s", e->opset, e->why == 1 ? ": this opset version is older than Cuvil supports" : "");
        if (e->n > 1) cuvil_sb_printf(&b, "; %d nodes, the first %s", e->n, e->first);
        else cuvil_sb_printf(&b, "; node %s", e->first);
    }
    cuvil_status s;
    if (b.oom || u->oom) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory listing the unsupported ops");
    else s = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "%d node%s use%s %d op%s Cuvil does not support:%s", u->n_nodes,
                       u->n_nodes > 1 ? "s" : "", u->n_nodes > 1 ? "" : "s", u->n_ops, u->n_ops > 1 ? "s" : "",
                       b.s ? b.s : "");
    cuvil_sb_free(&b);
    return s;
}

static void unsup_free(unsup_list *u) {
    cuvil_map_free(&u->index);
    cuvil_arena_free(&u->strs);
    cuvil_free(u->ops);
}

static cuvil_status load_nodes(loader *L, const Onnx__GraphProto *gp);

/* L->names' mark of an output of the If, Loop or Scan whose subgraphs are loading: out of
 * their scope (a subgraph reading it would be a cycle). */
#define OWN_OUTPUT (-2)

/* The most control-flow bodies inside each other: the loader recurses once per level. */
#define MAX_REGION_DEPTH 16

/* A Loop's or Scan's body as load_region makes it: the loop_begin node it adds first (its
 * inputs, attributes, name) and the body's parameters, its outputs. */
typedef struct loop_spec {
    const int *begin_in;       /* p (op_loop) value ids */
    int p, first;              /* the body's inputs are parameters first .. p - 1 (a Scan's start at 2) */
    const cuvil_attr *attrs;
    int n_attrs;
    const char *name, *src_op;
    int *params;               /* out: p value ids, -1 where the body has no such input */
    /* SequenceMap's (with p 2, first 2): its inputs, each body input made from one (element
     * `iteration` of a sequence, a tensor as it is: seq_map_arg), and the count value */
    const int *map_in;
    int n_map_in, map_count;
} loop_spec;

/* The loop_begin of ls (in the region around the body): the body's inputs become its outputs. */
static cuvil_status add_loop_begin(loader *L, const Onnx__GraphProto *sg, const char *desc, loop_spec *ls) {
    cir_graph *g = L->g;
    if (ls->map_in) {   /* SequenceMap: the iteration number and the condition, values of their own */
        for (int i = 0; i < 2; i++) {
            char nm[300];
            snprintf(nm, sizeof nm, "%.200s/%s", ls->name, i ? "cond" : "iteration");
            if ((ls->params[i] = new_value(L, nm, CIR_VAL_ACT)) < 0) return L->ctx->status;
        }
        if ((int)sg->n_input != ls->n_map_in)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its body has %zu inputs; it needs %d, one per input", desc,
                             sg->n_input, ls->n_map_in);
    } else if ((int)sg->n_input != ls->p - ls->first) {
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its body has %zu inputs; it needs %d", desc, sg->n_input,
                         ls->p - ls->first);
    }
    for (int i = 0; !ls->map_in && i < ls->p; i++) ls->params[i] = -1;
    for (size_t j = 0; !ls->map_in && j < sg->n_input; j++) {
        const char *nm = sg->input[j]->name ? sg->input[j]->name : "";
        if (!*nm) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: input %zu of its body has no name", desc, j);
        bool oom;
        if (!may_define(L, nm, cuvil_map_get(&L->names, nm), &oom))
            return oom ? cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory")
                       : cuvil_err(L->ctx, CUVIL_ERR_MODEL, "input '%s' of its body is defined twice", nm);
        int id = new_value(L, nm, CIR_VAL_ACT);
        cuvil_status s = id < 0 ? L->ctx->status : add_name(L, id);
        if (s) return s;
        ls->params[ls->first + (int)j] = id;
    }
    int id = cir_node_add(g, CIR_OP_LOOP_BEGIN, ls->name, ls->src_op, ls->p, ls->begin_in, ls->p, ls->params);
    if (id < 0) return L->ctx->status;
    cir_node *b = cir_node_at(g, id);
    for (int i = 0; i < ls->n_attrs; i++) {
        cuvil_status s = cir_node_set_attr(g, b, &ls->attrs[i]);
        if (s) return s;
    }
    b->then_region = g->n_regions - 1;
    return CUVIL_OK;
}

/* The subgraph sg of node desc (its attribute attr) into a new region of the graph: an If's
 * branch, run when value cond is true (false when is_else), or with ls a loop's body, whose
 * loop_begin it adds first. Its initializers and nodes may read every value of the graphs
 * around it; its outputs' value ids are appended to outs[*n_outs..] (outs holds max). */
static cuvil_status load_region(loader *L, const Onnx__GraphProto *sg, const char *desc, const char *attr, int cond,
                                bool is_else, loop_spec *ls, int *outs, int *n_outs, int max, int *region) {
    cir_graph *g = L->g;
    int depth = 0;
    for (int r = g->cur_region; r > 0; r = g->regions[r].parent) depth++;
    if (depth >= MAX_REGION_DEPTH)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: control flow (If, Loop, Scan) nested more than %d deep", desc,
                         MAX_REGION_DEPTH);
    if (sg->n_input && !ls)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its %s has inputs; an If's branches take none", desc, attr);
    if (sg->n_output > (size_t)(max - *n_outs))   /* room for them in outs[] */
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its %s has %zu outputs, the node %d", desc, attr, sg->n_output,
                         max - *n_outs);
    int r = g->n_regions ? g->n_regions : 1;   /* regions[0] is the graph itself */
    if (r + 1 > g->cap_regions) {   /* (doubling: many Ifs copy the table a few times, not once each) */
        int cap = g->cap_regions ? 2 * g->cap_regions : 8;
        struct cir_region *nr = cuvil_arena_alloc(&g->arena, sizeof *nr * (size_t)cap);
        if (!nr) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (g->n_regions) memcpy(nr, g->regions, sizeof *nr * (size_t)g->n_regions);
        else nr[0] = (struct cir_region){0, -1, false, false};
        g->regions = nr;
        g->cap_regions = cap;
    }
    g->regions[r] = (struct cir_region){g->cur_region, ls ? -1 : cond, is_else, ls != NULL};
    g->n_regions = r + 1;
    *region = r;
    cuvil_map outer_later = L->later;   /* the subgraph's own "produced later" names */
    memset(&L->later, 0, sizeof L->later);
    int outer_region = g->cur_region, first_value = g->n_values, outer_first = L->scope_first, outer_shadow = L->n_shadow;
    L->scope_first = first_value;   /* (a name of the graphs around it may be defined again here: may_define) */
    cuvil_status s = ls ? add_loop_begin(L, sg, desc, ls) : CUVIL_OK;
    g->cur_region = r;
    for (size_t j = 0; !s && ls && ls->map_in && j < sg->n_input; j++) {   /* SequenceMap's body inputs */
        const char *nm = sg->input[j]->name ? sg->input[j]->name : "";
        if (!*nm) s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: input %zu of its body has no name", desc, j);
        bool oom = false;
        if (!s && !may_define(L, nm, cuvil_map_get(&L->names, nm), &oom))
            s = oom ? cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory")
                    : cuvil_err(L->ctx, CUVIL_ERR_MODEL, "input '%s' of its body is defined twice", nm);
        int id = s ? -1 : new_value(L, nm, CIR_VAL_ACT);
        if (!s && id < 0) s = L->ctx->status;
        int args[3] = {ls->map_in[j], ls->params[0], ls->map_count};
        if (!s && cir_node_add(g, CIR_OP_SEQ_MAP_ARG, ls->name, ls->src_op, 3, args, 1, &id) < 0) s = L->ctx->status;
        if (!s) s = add_name(L, id);
    }
    if (!s) s = load_initializers(L, sg);
    if (!s) s = load_nodes(L, sg);
    g->cur_region = outer_region;
    L->scope_first = outer_first;
    cuvil_map_free(&L->later);
    L->later = outer_later;
    if (s) return cuvil_err_prefix(L->ctx, "in the %s of %s: ", attr, desc);
    for (size_t j = 0; j < sg->n_output; j++) {
        const char *o = sg->output[j]->name ? sg->output[j]->name : "";
        int id = cuvil_map_get(&L->names, o);
        if (id < 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: output '%s' of its %s is not a value of the %s or the graph",
                             desc, o, attr, ls ? "body" : "branch");
        outs[(*n_outs)++] = id;
    }
    /* the subgraph's names leave scope with it (the other branch may use them again), and the
     * outer values it hid are seen again */
    for (int v = first_value; v < g->n_values; v++) {
        const char *nm = cir_val(g, v)->name;
        if (nm && cuvil_map_get(&L->names, nm) == v && !cuvil_map_put(&L->names, nm, -1))
            return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int k = L->n_shadow - 1; k >= outer_shadow; k--)
        if (!cuvil_map_put(&L->names, L->shadow[k].name, L->shadow[k].id))
            return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    L->n_shadow = outer_shadow;
    return CUVIL_OK;
}

/* The graph attribute `name` of np, or NULL (an error on the context when it is not a graph). */
static const Onnx__GraphProto *graph_attr(loader *L, const Onnx__NodeProto *np, const char *desc, const char *name,
                                          cuvil_status *s) {
    for (size_t j = 0; j < np->n_attribute; j++) {
        const Onnx__AttributeProto *ap = np->attribute[j];
        if (strcmp(ap->name ? ap->name : "", name)) continue;
        if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !ap->g) {
            *s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' is not a graph", desc, name);
            return NULL;
        }
        return ap->g;
    }
    return NULL;
}

/* Attribute `name` of np as ints (n of them; an INT as one), or n = -1 when not set. */
static const int64_t *ints_attr(const Onnx__NodeProto *np, const char *name, int *n) {
    *n = -1;
    for (size_t j = 0; j < np->n_attribute; j++) {
        const Onnx__AttributeProto *ap = np->attribute[j];
        if (strcmp(ap->name ? ap->name : "", name)) continue;
        if (ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
            *n = 1;
            return &ap->i;
        }
        if (ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && ap->n_ints <= INT_MAX) {
            *n = (int)ap->n_ints;
            return ap->ints;
        }
    }
    return NULL;
}

/* A Loop or Scan node (desc; inputs in[], outputs out[], named by load_nodes): its body as a
 * region between a loop_begin and a loop node (op_loop.c). */
static cuvil_status load_loop(loader *L, const Onnx__NodeProto *np, const char *desc, const char *name, const char *op,
                              int opset, const int *in, const int *out) {
    cir_graph *g = L->g;
    bool scan = !strcmp(op, "Scan");
    cuvil_status s = CUVIL_OK;
    const Onnx__GraphProto *body = graph_attr(L, np, desc, "body", &s);
    if (!body) return s ? s : cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: needs its body attribute", desc);
    int n_in = (int)np->n_input, n_out = (int)np->n_output, nsc = 0, first = 0, lead = 0;
    if (scan) {
        int c;
        const int64_t *v = ints_attr(np, "num_scan_inputs", &c);
        lead = opset < 9 ? 1 : 0;   /* Scan-8's sequence_lens */
        if (c != 1 || v[0] < 1 || v[0] > n_in - lead)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: num_scan_inputs must be between 1 and its %d inputs", desc,
                             n_in - lead);
        if (lead && in[0] >= 0)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: its sequence_lens input is not supported (opset 8's Scan "
                             "over sequences of one length only)", desc);
        nsc = (int)v[0];
        first = 2;
    }
    int n = scan ? n_in - lead - nsc : n_in - 2;   /* the states */
    if (n < 0 || n_out < n)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: has %d inputs and %d outputs; its states need as many outputs as "
                         "inputs", desc, n_in, n_out);
    int k = n_out - n, p = 2 + n + nsc;
    int64_t *axes[4] = {NULL, NULL, NULL, NULL};
    static const char *const onnx_names[4] = {"scan_input_axes", "scan_input_directions", "scan_output_axes",
                                              "scan_output_directions"};
    static const char *const cir_names[4] = {"scan_in_axes", "scan_in_reverse", "scan_out_axes", "scan_out_reverse"};
    cuvil_attr attrs[8];
    int na = 0;
    attrs[na++] = (cuvil_attr){.name = "n_state", .type = CUVIL_ATTR_INT, .i = n};
    attrs[na++] = (cuvil_attr){.name = "n_scan", .type = CUVIL_ATTR_INT, .i = nsc};
    attrs[na++] = (cuvil_attr){.name = "scan", .type = CUVIL_ATTR_INT, .i = scan};
    if (scan && lead) attrs[na++] = (cuvil_attr){.name = "batch", .type = CUVIL_ATTR_INT, .i = 1};
    for (int a = 0; scan && a < 4; a++) {
        int c, want = a < 2 ? nsc : k;
        const int64_t *v = ints_attr(np, lead && a == 1 ? "directions" : onnx_names[a], &c);
        if (c < 0) continue;
        if (lead && a != 1) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: opset 8's Scan has no %s", desc, onnx_names[a]);
        if (c != want)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: %s has %d entries; it needs %d", desc,
                             lead && a == 1 ? "directions" : onnx_names[a], c, want);
        for (int i = 0; a % 2 && i < c; i++)
            if (v[i] != 0 && v[i] != 1)
                return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: %s[%d] is %lld; a direction is 0 or 1", desc,
                                 lead && a == 1 ? "directions" : onnx_names[a], i, (long long)v[i]);
        if (!(axes[a] = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(c + 1))))
            return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (c) memcpy(axes[a], v, sizeof(int64_t) * (size_t)c);
        attrs[na++] = (cuvil_attr){.name = cir_names[a], .type = CUVIL_ATTR_INTS, .ints = axes[a], .n = c};
    }
    /* the loop node's inputs: loop_begin's p, the p parameters, then the body's results */
    int total = 2 * p + 1 + n + k;
    int *all = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(total + 1));
    if (!all) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    all[0] = scan ? -1 : in[0];
    all[1] = scan ? -1 : in[1];
    for (int i = 0; i < n + nsc; i++) all[2 + i] = in[(scan ? lead : 2) + i];
    loop_spec ls = {.begin_in = all, .p = p, .first = first, .attrs = attrs, .n_attrs = na, .name = name, .src_op = op,
                    .params = all + p};
    int got = 2 * p + (scan ? 1 : 0), region = 0;
    if (scan) all[2 * p] = -1;   /* a Scan's body gives no condition */
    s = load_region(L, body, desc, "body", -1, false, &ls, all, &got, total, &region);
    if (s) return s;
    if (got != total)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its body has %d outputs; it needs %d", desc, got - 2 * p,
                         total - 2 * p - (scan ? 1 : 0));
    int id = cir_node_add(g, CIR_OP_LOOP, name, op, total, all, n_out, out);
    if (id < 0) return L->ctx->status;
    cir_node *ln = cir_node_at(g, id);
    for (int i = 0; i < na && !s; i++) s = cir_node_set_attr(g, ln, &attrs[i]);
    ln->then_region = region;
    return s ? s : op_loop_fold_appends(g, ln);   /* (a state that grows by appending: a sequence output) */
}

/* A SequenceMap node (desc; inputs in[], outputs out[]): a loop over its first input's elements
 * (a seq_length node gives the count) whose body takes, for each input, the element of the
 * iteration (a sequence; all of one length, checked as the loop runs) or the tensor itself,
 * and whose results collect into its output sequences (the loop's attribute seq_out). */
static cuvil_status load_seq_map(loader *L, const Onnx__NodeProto *np, const char *desc, const char *name, const int *in,
                                 const int *out) {
    cir_graph *g = L->g;
    cuvil_status s = CUVIL_OK;
    for (size_t j = 0; j < np->n_attribute; j++)
        if (strcmp(np->attribute[j]->name ? np->attribute[j]->name : "", "body"))
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: has no attribute '%s' (SequenceMap takes 'body')", desc,
                             np->attribute[j]->name ? np->attribute[j]->name : "");
    const Onnx__GraphProto *body = graph_attr(L, np, desc, "body", &s);
    if (!body) return s ? s : cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: needs its body attribute", desc);
    int n_in = (int)np->n_input, k = (int)np->n_output;
    if (n_in < 1 || in[0] < 0 || k < 1)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: takes a sequence as its first input and gives at least one output",
                         desc);
    for (int j = 1; j < n_in; j++)
        if (in[j] < 0) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: input %d is omitted", desc, j);
    char nm[300];
    snprintf(nm, sizeof nm, "%.200s/count", name);
    int cnt = new_value(L, nm, CIR_VAL_ACT);
    if (cnt < 0) return L->ctx->status;
    if (cir_node_add(g, CIR_OP_SEQ_LENGTH, name, "SequenceMap", 1, in, 1, &cnt) < 0) return L->ctx->status;
    int64_t *ones = cuvil_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)k);
    if (!ones) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < k; i++) ones[i] = 1;
    cuvil_attr attrs[4] = {
        {.name = "n_state", .type = CUVIL_ATTR_INT, .i = 0},
        {.name = "n_scan", .type = CUVIL_ATTR_INT, .i = 0},
        {.name = "scan", .type = CUVIL_ATTR_INT, .i = 0},
        {.name = "seq_out", .type = CUVIL_ATTR_INTS, .ints = ones, .n = k},
    };
    /* the loop node's inputs: loop_begin's 2 (the count, no condition), the 2 parameters, the
     * body's condition (the parameter, passed through: always true), its k results */
    int p = 2, total = 2 * p + 1 + k;
    int *all = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(total + 1));
    if (!all) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    all[0] = cnt;
    all[1] = -1;
    loop_spec ls = {.begin_in = all, .p = p, .first = 2, .attrs = attrs, .n_attrs = 4, .name = name,
                    .src_op = "SequenceMap", .params = all + p, .map_in = in, .n_map_in = n_in, .map_count = cnt};
    int got = 2 * p + 1, region = 0;
    s = load_region(L, body, desc, "body", -1, false, &ls, all, &got, total, &region);
    if (s) return s;
    all[2 * p] = all[p + 1];   /* the condition parameter, unchanged */
    if (got != total)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its body has %d outputs; it needs %d, one per output", desc,
                         got - 2 * p - 1, k);
    int id = cir_node_add(g, CIR_OP_LOOP, name, "SequenceMap", total, all, k, out);
    if (id < 0) return L->ctx->status;
    cir_node *ln = cir_node_at(g, id);
    for (int i = 0; i < 4 && !s; i++) s = cir_node_set_attr(g, ln, &attrs[i]);
    ln->then_region = region;
    return s;
}

/* ===== optionals: a value and a bool that says it is there (cir_value.opt_has) ============== */
static bool is_opt(const cir_graph *g, int id) { return id >= 0 && cir_val(g, id)->opt_has >= 0; }

/* A new bool scalar constant v, or -1 (the message on the context). */
static int const_bool(loader *L, bool v, const char *name) {
    uint8_t b = v;
    return count_value(L) ? -1 : cir_const_add(L->g, name, CIR_BOOL, 0, NULL, &b);
}

/* Node `kind` reading in[0..n_in) and writing value y, named for ONNX node `name` (op `op`). */
static cuvil_status add_node1(loader *L, cir_op_kind kind, const char *name, const char *op, int n_in, const int *in, int y) {
    return cir_node_add(L->g, kind, name, op, n_in, in, 1, &y) < 0 ? L->ctx->status : CUVIL_OK;
}

/* opt_elem (x, its presence) into a new value named after x (must: OptionalGetElement's,
 * which fails without one), or -1. */
static int opt_elem(loader *L, int x, const char *name, const char *op, bool must, int y) {
    cir_graph *g = L->g;
    if (y < 0) {
        char nm[300];
        snprintf(nm, sizeof nm, "%.280s/value", cir_val(g, x)->name);
        if ((y = new_value(L, nm, CIR_VAL_ACT)) < 0) return -1;
    }
    int in[2] = {x, cir_val(g, x)->opt_has};
    int id = cir_node_add(g, CIR_OP_OPT_ELEM, name, op, 2, in, 1, &y);
    cuvil_attr a = {.name = "must", .type = CUVIL_ATTR_INT, .i = must};
    if (id < 0 || cir_node_set_attr(g, cir_node_at(g, id), &a)) return -1;
    return y;
}

/* Optional, OptionalHasElement, OptionalGetElement, and Identity of an optional (desc; inputs
 * in[], outputs out[]): each made of identities, constants and opt_elem, the optional's value
 * and presence kept as a pair. */
static cuvil_status load_optional_op(loader *L, const Onnx__NodeProto *np, const char *desc, const char *name,
                                     const char *op, const int *in, const int *out) {
    cir_graph *g = L->g;
    int x = np->n_input ? in[0] : -1, y = np->n_output == 1 ? out[0] : -1;
    bool optional = !strcmp(op, "Optional");
    if (np->n_input > 1 || y < 0)
        return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: takes at most one input and gives one output", desc);
    const Onnx__TypeProto *tp = NULL;
    for (size_t j = 0; j < np->n_attribute; j++) {
        const Onnx__AttributeProto *ap = np->attribute[j];
        if (!optional || strcmp(ap->name ? ap->name : "", "type") || ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: has no attribute '%s'%s", desc, ap->name ? ap->name : "",
                             optional ? " (Optional takes 'type', a type)" : "");
        tp = ap->tp;
    }
    char nm[300];
    snprintf(nm, sizeof nm, "%.200s/present", name);
    if (optional) {
        if (is_opt(g, x))
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: an optional of an optional is not supported", desc);
        cuvil_status s = CUVIL_OK;
        if (x >= 0) {
            s = add_node1(L, CIR_OP_IDENTITY, name, op, 1, &x, y);
        } else {   /* an empty one: a value of its type that nothing reads (it is absent) */
            const Onnx__TypeProto *e = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type
                                           ? tp->sequence_type->elem_type : tp;
            cir_dtype dt = e && e->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && e->tensor_type &&
                                   e->tensor_type->elem_type > 0 && e->tensor_type->elem_type < 64
                               ? cir_dtype_from_public((cuvil_dtype)e->tensor_type->elem_type) : CIR_UNDEF;
            if (dt == CIR_UNDEF || !cir_dtype_size(dt))
                return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: without an input, it needs its 'type' attribute: a "
                                 "tensor or a sequence of tensors of a numeric type", desc);
            if (e != tp) {
                int id = cir_node_add(g, CIR_OP_SEQ_EMPTY, name, op, 0, NULL, 1, &y);
                cuvil_attr a = {.name = "dtype", .type = CUVIL_ATTR_INT, .i = cir_dtype_to_public(dt)};
                if (id < 0 || (s = cir_node_set_attr(g, cir_node_at(g, id), &a))) return id < 0 ? L->ctx->status : s;
            } else {
                const Onnx__TensorShapeProto *sh = e->tensor_type->shape;
                int64_t dims[CIR_MAX_DIMS] = {0};   /* the type's dims (0 where it names none: no bytes) */
                int r = sh ? (int)sh->n_dim : 0;
                if (r > CIR_MAX_DIMS) return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: its type has rank %d", desc, r);
                uint64_t bytes = cir_dtype_size(dt);
                for (int k = 0; k < r; k++) {
                    const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
                    int64_t v = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dm->dim_value : 0;
                    dims[k] = v > 0 && v <= (1 << 24) ? v : 0;
                    bytes = dims[k] && bytes > UINT64_MAX / (uint64_t)dims[k] ? UINT64_MAX : bytes * (uint64_t)dims[k];
                }
                if (bytes > ((uint64_t)16 << 20))   /* (a constant nothing reads, in the weights) */
                    return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: an empty optional of a tensor of over 16 MiB "
                                     "(its 'type') is not supported", desc);
                snprintf(nm, sizeof nm, "%.200s/empty", name);
                int c = count_value(L) ? -1 : cir_const_add(g, nm, dt, r, dims, NULL);
                if (c < 0 || (s = add_node1(L, CIR_OP_IDENTITY, name, op, 1, &c, y))) return c < 0 ? L->ctx->status : s;
                snprintf(nm, sizeof nm, "%.200s/present", name);
            }
        }
        int has = s ? -1 : const_bool(L, x >= 0, nm);
        if (has < 0) return s ? s : L->ctx->status;
        cir_val(g, y)->opt_has = has;
        return CUVIL_OK;
    }
    if (!strcmp(op, "OptionalHasElement")) {
        int h = is_opt(g, x) ? cir_val(g, x)->opt_has : const_bool(L, x >= 0, nm);   /* a tensor or none: known */
        return h < 0 ? L->ctx->status : add_node1(L, CIR_OP_IDENTITY, name, op, 1, &h, y);
    }
    if (x < 0) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: needs its input", desc);
    if (!strcmp(op, "OptionalGetElement") && !is_opt(g, x))   /* (opset 18: a tensor or sequence, as it is) */
        return add_node1(L, CIR_OP_IDENTITY, name, op, 1, &x, y);
    if (opt_elem(L, x, name, op, !strcmp(op, "OptionalGetElement"), y) < 0) return L->ctx->status;
    if (strcmp(op, "OptionalGetElement")) cir_val(g, y)->opt_has = cir_val(g, x)->opt_has;   /* Identity: still one */
    return CUVIL_OK;
}

/* An If node's branches (np's then_branch and else_branch attributes) loaded as regions; in[]
 * becomes (cond, the then outputs, the else outputs). */
/* If's outputs that are optionals (in either branch): each branch's value through opt_elem (in
 * its branch: an absent graph input is NULL) and its presence (a constant true where the
 * branch gives a plain value) become two outputs, the value's and a bool after the node's own;
 * out[] and *n_out grow, and pres[j] (out index j) gets the presence output's index or -1. */
static cuvil_status if_optionals(loader *L, const char *desc, const char *name, int **in, int *n_in, int **out, int *n_out,
                                 const int *regions, int *pres) {
    cir_graph *g = L->g;
    int k = *n_out, n_opt = 0, *all = *in;
    for (int j = 0; j < k; j++) {
        pres[j] = -1;
        n_opt += is_opt(g, all[1 + j]) || is_opt(g, all[1 + k + j]);
    }
    if (!n_opt) return CUVIL_OK;
    int k2 = k + n_opt, *nin = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(2 * k2 + 2));
    int *nout = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(k2 + 1));
    if (!nin || !nout) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    nin[0] = all[0];
    memcpy(nout, *out, sizeof(int) * (size_t)k);
    int outer = g->cur_region;
    for (int j = 0, o = k; j < k; j++) {
        if (!is_opt(g, all[1 + j]) && !is_opt(g, all[1 + k + j])) {
            nin[1 + j] = all[1 + j];
            nin[1 + k2 + j] = all[1 + k + j];
            continue;
        }
        for (int b = 0; b < 2; b++) {   /* in its branch's region: the value, its presence */
            int v = all[1 + b * k + j], *val = &nin[1 + b * k2 + j], *has = &nin[1 + b * k2 + o];
            g->cur_region = regions[b];
            if (v < 0) {
                *val = *has = -1;   /* (a branch a constant condition left out) */
            } else if (is_opt(g, v)) {
                *has = cir_val(g, v)->opt_has;
                *val = opt_elem(L, v, name, "If", false, -1);
            } else {
                *val = v;
                *has = const_bool(L, true, desc);
            }
            g->cur_region = outer;
            if ((v >= 0 && *val < 0) || (v >= 0 && *has < 0)) return L->ctx->status;
        }
        char nm[300];
        snprintf(nm, sizeof nm, "%.280s/present", cir_val(g, nout[j])->name);
        if ((nout[o] = new_value(L, nm, CIR_VAL_ACT)) < 0) return L->ctx->status;
        pres[j] = o++;
    }
    *in = nin;
    *n_in = 1 + 2 * k2;
    *out = nout;
    *n_out = k2;
    return CUVIL_OK;
}

static cuvil_status load_if(loader *L, const Onnx__NodeProto *np, const char *desc, int **in, int *n_in, int *regions) {
    cuvil_status gs = CUVIL_OK;
    const Onnx__GraphProto *br[2] = {graph_attr(L, np, desc, "then_branch", &gs), NULL};
    if (!gs) br[1] = graph_attr(L, np, desc, "else_branch", &gs);
    if (gs) return gs;
    if (!br[0] || !br[1]) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: needs then_branch and else_branch", desc);
    int k = (int)np->n_output, cond = (*in)[0];
    if (np->n_input != 1 || cond < 0) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: takes one input, the condition", desc);
    int *all = cuvil_arena_alloc(&L->g->arena, sizeof(int) * (size_t)(1 + 2 * k));
    if (!all) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    all[0] = cond;
    int n = 1;
    cuvil_status s = load_region(L, br[0], desc, "then_branch", cond, false, NULL, all, &n, 1 + k, &regions[0]);
    if (!s && n != 1 + k)
        s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its then_branch has %d outputs, the node %d", desc, n - 1, k);
    if (!s) s = load_region(L, br[1], desc, "else_branch", cond, true, NULL, all, &n, 1 + 2 * k, &regions[1]);
    if (!s && n != 1 + 2 * k)
        s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: its else_branch has %d outputs, the node %d", desc, n - 1 - k, k);
    *in = all;
    *n_in = n;
    return s;
}

static cuvil_status load_nodes(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    unsup_list unknown = {0};
    cuvil_status s = CUVIL_OK;
    char desc[600];
    if ((int64_t)gp->n_node > L->lim->nodes)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                         "the model has %zu nodes; the limit is nodes=%lld (raise it with --limit nodes=N)", gp->n_node,
                         (long long)L->lim->nodes);
    /* where each name is produced, to tell an unsorted graph or a cycle from a dangling input */
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t j = 0; j < gp->node[i]->n_output; j++) {
            const char *o = gp->node[i]->output[j];
            if (o && *o && cuvil_map_get(&L->later, o) < 0 && !cuvil_map_put(&L->later, o, (int)i))
                return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        }
    for (size_t i = 0; i < gp->n_node && !s; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *op = np->op_type ? np->op_type : "";
        const char *domain = np->domain ? np->domain : "";
        if (!strcmp(domain, "ai.onnx")) domain = "";
        char synth[128];
        const char *name = np->name && *np->name ? np->name : (snprintf(synth, sizeof synth, "%.60s_%zu", op, i), synth);
        node_desc(domain, op, name, desc, sizeof desc);
        if (!*op) {
            s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "node %zu has no op_type", i);
            break;
        }
        int opset = opset_of(L, domain);
        int since = !*domain ? cuvil_onnx_op_since(op) : cuvil_onnx_domain_op_since(domain, op);
        int first = !*domain ? cuvil_onnx_first_opset(op) : 0;
        bool supported = since > 0 && opset >= since && !(first && opset < first);
        if (!supported) {
            unsup_add(&unknown, domain, op, opset, opset < 0 ? 3 : first > opset ? 2 : since ? 1 : 0, first, name);
        } else if (!*domain && (s = cuvil_onnx_check_node(L->ctx, np, desc, opset))) {
            break;
        }
        if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2) {
            s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: too many inputs or outputs", desc);
            break;
        }
        int *in = cuvil_arena_alloc(&L->g->arena, sizeof(int) * (np->n_input + 1));
        int *out = cuvil_arena_alloc(&L->g->arena, sizeof(int) * (np->n_output + 1));
        if (!in || !out) {
            s = cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t j = 0; j < np->n_input && !s; j++) {
            const char *iname = np->input[j];
            if (!iname || !*iname) {
                in[j] = -1;
                continue;
            }
            in[j] = cuvil_map_get(&L->names, iname);
            if (in[j] >= 0) continue;
            int at = cuvil_map_get(&L->later, iname);
            if (in[j] == OWN_OUTPUT)
                s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: input '%s' is an output of the If, Loop or Scan whose subgraph "
                              "holds this node (a cycle)", desc, iname);
            else if (at == (int)i)
                s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: input '%s' is the node's own output (a cycle)", desc, iname);
            else if (at > (int)i)
                s = cuvil_err(L->ctx, CUVIL_ERR_MODEL,
                              "%s: input '%s' is produced by node %d, which comes later (ONNX requires the nodes in "
                              "topological order; the graph is unsorted or has a cycle)", desc, iname, at);
            else
                s = cuvil_err(L->ctx, CUVIL_ERR_MODEL,
                              "%s: input '%s' is not a graph input, an initializer or the output of any node", desc, iname);
        }
        for (size_t j = 0; j < np->n_output && !s; j++) {
            const char *oname = np->output[j];
            if (!oname || !*oname) {
                out[j] = -1;
                continue;
            }
            if (cuvil_map_get(&L->names, oname) >= 0) {   /* (SSA: in its graph and those around it) */
                s = cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: output '%s' is defined twice", desc, oname);
                break;
            }
            out[j] = new_value(L, oname, CIR_VAL_ACT);
            if (out[j] < 0) s = L->ctx->status;
            else s = add_name(L, out[j]);
        }
        if (s) break;
        if (!supported) continue;   /* reported with the others once every node is read */
        bool opt_op = !*domain && (!strncmp(op, "Optional", 8) || (!strcmp(op, "Identity") && np->n_input == 1 &&
                                                                   is_opt(g, in[0])));
        for (size_t j = 0; !opt_op && j < np->n_input && !s; j++)   /* (other ops take the value: OptionalGetElement) */
            if (is_opt(g, in[j]))
                s = cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: input '%s' is an optional; Cuvil takes optionals into "
                              "Identity, If's branches, OptionalHasElement and OptionalGetElement (which gives its value) "
                              "only", desc, np->input[j]);
        if (!s && opt_op) s = load_optional_op(L, np, desc, name, op, in, out);
        if (s) break;
        if (opt_op) continue;
        bool is_loop = !*domain && (!strcmp(op, "Loop") || !strcmp(op, "Scan") || !strcmp(op, "SequenceMap")),
             is_if = !*domain && !strcmp(op, "If");
        /* the node's own outputs are not values its subgraphs may read (that would be a cycle):
         * out of scope while they load */
        for (size_t j = 0; (is_loop || is_if) && j < np->n_output && !s; j++)
            if (out[j] >= 0 && !cuvil_map_put(&L->names, np->output[j], OWN_OUTPUT))
                s = cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        int n_in = (int)np->n_input, regions[2] = {0, 0}, n_out = (int)np->n_output;
        int *pres = is_if ? cuvil_arena_alloc(&g->arena, sizeof(int) * (np->n_output + 1)) : NULL;
        if (is_if && !pres) s = cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (!s && is_loop && !strcmp(op, "SequenceMap")) s = load_seq_map(L, np, desc, name, in, out);
        else if (!s && is_loop) s = load_loop(L, np, desc, name, op, opset, in, out);
        else if (!s && is_if) s = load_if(L, np, desc, &in, &n_in, regions);
        if (!s && is_if) s = if_optionals(L, desc, name, &in, &n_in, &out, &n_out, regions, pres);
        for (size_t j = 0; (is_loop || is_if) && j < np->n_output && !s; j++)
            if (out[j] >= 0 && !cuvil_map_put(&L->names, np->output[j], out[j]))
                s = cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (s) break;
        if (is_loop) continue;
        onnx_node on = {.op = op, .name = name, .desc = desc, .domain = domain, .opset = opset, .n_in = n_in,
                        .n_out = n_out, .in = in, .out = out};
        on.attrs = cuvil_arena_alloc(&g->arena, sizeof(onnx_attr) * (np->n_attribute + 1));
        if (!on.attrs) {
            s = cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t j = 0; j < np->n_attribute && !s; j++) {
            if (is_if && np->attribute[j]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) continue;   /* loaded */
            s = load_attr(L, desc, name, np->attribute[j], &on.attrs[on.n_attrs]);
            if (!s) on.n_attrs++;
        }
        int before = g->n_nodes;
        if (!s) s = cuvil_onnx_map_node(&L->map, &on);
        if (!s && is_if) {
            if (g->n_nodes != before + 1 || cir_node_at(g, before)->kind != CIR_OP_IF) {
                s = cuvil_err(L->ctx, CUVIL_ERR_INTERNAL, "%s: not mapped to one if node", desc);
                break;
            }
            cir_node_at(g, before)->then_region = regions[0];
            cir_node_at(g, before)->else_region = regions[1];
            for (size_t j = 0; j < np->n_output; j++)   /* an optional output: its value and its presence */
                if (pres[j] >= 0 && out[j] >= 0) cir_val(g, out[j])->opt_has = out[pres[j]];
        }
    }
    if (!s && (unknown.n_nodes || unknown.oom)) s = unsup_report(L->ctx, &unknown);
    unsup_free(&unknown);
    return s;
}

static cuvil_status load_outputs(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    if (!gp->n_output) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "the graph has no outputs");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        if (!*name) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph output %zu has no name", i);
        /* (listed again: the same value again, as ONNX's checker and ONNX Runtime take it) */
        int id = cuvil_map_get(&L->names, name);
        if (id < 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph output '%s' is not produced by any node", name);
        decl d;
        cuvil_status s = read_decl(L, gp->output[i], "graph output", &d);
        if (s) return s;
        cir_value *v = cir_val(g, id);
        if (v->opt_has >= 0) {   /* an optional: its value when there is one, and whether there is (output_present) */
            int y = new_value(L, name, CIR_VAL_ACT);
            if (y < 0 || opt_elem(L, id, name, "(optional output)", false, y) < 0) return L->ctx->status;
            v = cir_val(g, (id = y));
            v->optional = true;
        }
        if (v->kind == CIR_VAL_ACT) set_decl(v, &d);
        else if (v->kind == CIR_VAL_CONST && d.dtype != CIR_UNDEF && d.dtype != v->dtype)
            /* an initializer or a Constant's value: known now */
            return cuvil_err(L->ctx, CUVIL_ERR_DTYPE, "graph output '%s' is %s, but the model declares it %s", name,
                             cir_dtype_name(v->dtype), cir_dtype_name(d.dtype));
        if ((s = cir_graph_add_output(g, id))) return s;
    }
    return CUVIL_OK;
}

/* value_info: declared types of intermediate values, checked after shape inference. */
static cuvil_status load_value_info(loader *L, const Onnx__GraphProto *gp) {
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        int id = cuvil_map_get(&L->names, vi->name ? vi->name : "");
        if (id < 0) continue;   /* describes a value the graph does not have: ignored, as ONNX Runtime does */
        cir_value *v = cir_val(L->g, id);
        if (v->kind != CIR_VAL_ACT || v->output_index >= 0) continue;
        if (vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) continue;   /* (op_seq.c checks) */
        decl d;
        cuvil_status s = read_decl(L, vi, "value_info", &d);
        if (s) return s;
        /* only the element type binds: ONNX Runtime merges a conflicting value_info shape leniently */
        v->decl_dtype = d.dtype;
    }
    return CUVIL_OK;
}

/* Whether a value of the model (of the graph, or of an If's branch or a loop's body, whose
 * names left scope with them) is named `name`. */
static bool value_named(const cir_graph *g, const char *name) {
    for (int v = 0; v < g->n_values; v++) {
        const char *nm = cir_val(g, v)->name;
        if (nm && !strcmp(nm, name)) return true;
    }
    return false;
}

static cuvil_status check_dims_used(loader *L) {
    for (int i = 0; i < L->o->n_dims; i++) {
        bool found = false;
        for (int j = 0; j < L->g->n_syms; j++) found |= !strcmp(L->g->syms[j].name, L->o->dims[i].name);
        if (cuvil_map_get(&L->elem_dims, L->o->dims[i].name) >= 0 && !found) continue;   /* (sequence elements' dims) */
        const cuvil_dim_binding *vb = &L->o->dims[i];
        if (!found && value_named(L->g, vb->name)) {
            /* a value's name: the range of the sizes it gives or takes when the model runs
             * (cir_value_bound) */
            cir_graph *g = L->g;
            struct cir_value_bound *nb = cuvil_arena_alloc(&g->arena, sizeof *nb * (size_t)(g->n_value_bounds + 1));
            char *nm = cuvil_arena_strdup(&g->arena, vb->name);
            if (!nb || !nm) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            if (g->n_value_bounds) memcpy(nb, g->value_bounds, sizeof *nb * (size_t)g->n_value_bounds);
            if (vb->step > 1)
                return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--dim %s: '%s' is a value of the model, whose range takes "
                                 "no step", vb->name, vb->name);
            nb[g->n_value_bounds++] = (struct cir_value_bound){nm, vb->max > 0 ? vb->min : vb->value,
                                                               vb->max > 0 ? vb->max : vb->value};
            g->value_bounds = nb;
            continue;
        }
        if (!found) {
            cuvil_sb names = {0};
            for (int j = 0; j < L->g->n_syms; j++) cuvil_sb_printf(&names, "%s%s", j ? ", " : "", L->g->syms[j].name);
            cuvil_status s = cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG,
                                       "--dim %s: the model has no symbolic dim or value named '%s' (its symbolic dims: %s)",
                                       L->o->dims[i].name, L->o->dims[i].name, names.s ? names.s : "none");
            cuvil_sb_free(&names);
            return s;
        }
        const cuvil_dim_binding *b = &L->o->dims[i];
        if (b->max > 0 ? (b->min < 0 || b->min > b->max || b->max > L->lim->dim) : (b->value <= 0 || b->value > L->lim->dim))
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--dim %s: must be a number in 1..%lld or a range LO:HI "
                             "within 0..%lld", b->name, (long long)L->lim->dim, (long long)L->lim->dim);
        if (b->step < 0 || (b->max > 0 && b->step > 1 && (b->min % b->step || b->max % b->step)))
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--dim %s: the range %lld:%lld:%lld must start and end on "
                             "multiples of its step", b->name, (long long)b->min, (long long)b->max, (long long)b->step);
    }
    for (int i = 0; i < L->o->n_shapes; i++) {
        const char *in = L->o->shapes[i].input ? L->o->shapes[i].input : "";
        bool found = false;
        for (int j = 0; j < L->g->n_inputs && !found; j++) found = !strcmp(cir_val(L->g, L->g->inputs[j])->name, in);
        if (!found) return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--shape %s: the model has no input named '%s'", in, in);
    }
    return CUVIL_OK;
}

/* A model file read and decoded once: the graphs of a compile at several symbol values are
 * built from it (cuvil.c), not from the file again. */
struct cuvil_onnx_model {
    Onnx__ModelProto *m;    /* protobuf-c's copy: the file's bytes are not kept */
    char *path;
    char *model_dir;        /* NULL: external data refused */
    char sha256[65];
};

void cuvil_onnx_close(cuvil_onnx_model *mo) {
    if (!mo) return;
    onnx__model_proto__free_unpacked(mo->m, &cuvil_pb_allocator);
    cuvil_free(mo->path);
    cuvil_free(mo->model_dir);
    cuvil_free(mo);
}

/* Decodes data (size bytes, the caller's) into *out. */
static cuvil_status open_buffer(cuvil_ctx *ctx, const uint8_t *data, size_t size, const char *path,
                                const char *model_dir, const cuvil_options *o, cuvil_onnx_model **out) {
    *out = NULL;
    cuvil_onnx_model *mo = cuvil_calloc(1, sizeof *mo);
    if (!mo || !(mo->path = cuvil_strdup(path)) || (model_dir && !(mo->model_dir = cuvil_strdup(model_dir)))) {
        cuvil_onnx_close(mo);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    cuvil_status s = cuvil_onnx_prescan(ctx, data, size, &o->limits);
    if (s) {
        cuvil_onnx_close(mo);
        return cuvil_err_prefix(ctx, "%s: ", path);
    }
    mo->m = onnx__model_proto__unpack(&cuvil_pb_allocator, size, data);
    if (!mo->m) {
        cuvil_onnx_close(mo);
        return cuvil_err(ctx, CUVIL_ERR_MODEL,
                         "%s: not a valid ONNX model (protobuf decoding failed: the file is truncated or not ONNX)", path);
    }
    cuvil_sha256_hex(data, size, mo->sha256);
    *out = mo;
    return CUVIL_OK;
}

cuvil_status cuvil_onnx_open(cuvil_ctx *ctx, const char *path, const cuvil_options *o, cuvil_onnx_model **out) {
    *out = NULL;
    uint8_t *buf;
    size_t size;
    cuvil_status s = cuvil_read_file(ctx, path, "model", o->limits.model_bytes, "model_bytes", &buf, &size);
    if (s) return s;
    char *tmp = cuvil_strdup(path);
    if (!tmp) {
        cuvil_free(buf);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    s = open_buffer(ctx, buf, size, path, dirname(tmp), o, out);
    cuvil_free(tmp);
    cuvil_free(buf);   /* protobuf-c copied what it keeps */
    return s;
}

cuvil_status cuvil_onnx_build(cuvil_ctx *ctx, const cuvil_onnx_model *mo, const cuvil_options *o, cir_graph **out) {
    *out = NULL;
    const char *path = mo->path;
    loader L = {.ctx = ctx, .o = o, .lim = &o->limits, .model_dir = mo->model_dir, .m = mo->m};
    cuvil_status s = CUVIL_OK;
    if (!L.m->graph || !L.m->has_ir_version || L.m->ir_version <= 0) {
        s = cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: not an ONNX model (%s)", path, !L.m->graph ? "no graph" : "no ir_version");
        goto done;
    }
    if (L.m->ir_version > cuvil_onnx_max_ir_version()) {
        s = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "%s: ir_version %lld is newer than this Cuvil knows (up to %d)", path,
                      (long long)L.m->ir_version, cuvil_onnx_max_ir_version());
        goto done;
    }
    if ((s = check_opsets(&L))) goto done;
    L.g = cir_graph_new(ctx);
    if (!L.g) {
        s = CUVIL_ERR_NOMEM;
        goto done;
    }
    L.g->limits = o->limits;
    L.map.g = L.g;
    memcpy(L.g->model_sha256, mo->sha256, sizeof L.g->model_sha256);
    L.g->model_path = cuvil_arena_strdup(&L.g->arena, path);
    if (L.m->graph->name && *L.m->graph->name) L.g->name = cuvil_arena_strdup(&L.g->arena, L.m->graph->name);
    if (!L.g->model_path || !L.g->name) {
        s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = load_initializers(&L, L.m->graph)) || (s = load_inputs(&L, L.m->graph)) ||
        (s = load_nodes(&L, L.m->graph)) || (s = load_outputs(&L, L.m->graph)) ||
        (s = load_value_info(&L, L.m->graph)) || (s = cuvil_onnx_check_dropped(&L.map)) || (s = check_dims_used(&L)))
        goto done;
    s = cir_verify(L.g, false, NULL);
done:
    if (s) {
        if (s != CUVIL_ERR_NOMEM && strncmp(ctx->errmsg, path, strlen(path)) != 0) cuvil_err_prefix(ctx, "%s: ", path);
        cir_graph_free(L.g);
        L.g = NULL;
    }
    cuvil_map_free(&L.names);
    cuvil_map_free(&L.later);
    cuvil_map_free(&L.declared);
    cuvil_map_free(&L.opsets);
    cuvil_map_free(&L.elem_dims);
    cuvil_free(L.shadow);
    cuvil_free(L.map.dropped);
    *out = L.g;
    return s;
}

cuvil_status cuvil_onnx_load_buffer(cuvil_ctx *ctx, const uint8_t *data, size_t size, const char *path,
                                    const char *model_dir, const cuvil_options *o, cir_graph **out) {
    *out = NULL;
    cuvil_onnx_model *mo;
    cuvil_status s = open_buffer(ctx, data, size, path, model_dir, o, &mo);
    if (s) return s;
    s = cuvil_onnx_build(ctx, mo, o, out);
    cuvil_onnx_close(mo);
    return s;
}

cuvil_status cuvil_onnx_load(cuvil_ctx *ctx, const char *path, const cuvil_options *o, cir_graph **out) {
    *out = NULL;
    cuvil_onnx_model *mo;
    cuvil_status s = cuvil_onnx_open(ctx, path, o, &mo);
    if (s) return s;
    s = cuvil_onnx_build(ctx, mo, o, out);
    cuvil_onnx_close(mo);
    return s;
}
