/* ops.c -- the op registry (ops.inc), attribute tables and helpers shared by the op files. */
#include "ir/ops/ops.h"

#include <math.h>
#include <string.h>

#define CIR_OP(kind, name) extern const cir_opdef cir_op_##name;
#include "ir/ops/ops.inc"
#undef CIR_OP

static const cir_opdef *const registry[CIR_OP__COUNT] = {
#define CIR_OP(kind, name) [CIR_OP_##kind] = &cir_op_##name,
#include "ir/ops/ops.inc"
#undef CIR_OP
};

const cir_opdef *cir_op_def(cir_op_kind k) {
    CUVIL_ASSERT(k > CIR_OP_NONE && k < CIR_OP__COUNT && registry[k]);
    return registry[k];
}

cir_op_kind cir_op_by_name(const char *name) {
    for (int k = 1; k < CIR_OP__COUNT; k++)
        if (!strcmp(registry[k]->name, name)) return (cir_op_kind)k;
    return CIR_OP_NONE;
}

cuvil_act_params cir_act_params(const cir_act *a) {
    cuvil_act_params p = {CUVIL_ACT_NONE, 0, 0};
    if (a->op == CIR_OP_NONE) return p;
    const cir_opdef *d = cir_op_def(a->op);
    CUVIL_ASSERT(d->flags & CIR_OPF_IS_ACT);
    p.act = d->rt_act;
    p.alpha = a->alpha;
    p.beta = a->beta;
    if (a->op == CIR_OP_GELU && a->alpha != 0) {   /* approximate='tanh' (op_unary.c) */
        p.act = CUVIL_ACT_GELU_TANH;
        p.alpha = 0;
    }
    return p;
}

cuvil_act_params cir_node_act_params(const cir_node *n) {
    cir_act a = cir_node_act(n);
    return cir_act_params(&a);
}

const char *const cir_auto_pad_names[] = {"explicit", "same_upper", "same_lower", "valid", NULL};

/* ===== Attributes ======================================================================== */
static const cir_attr_spec *spec_of(const cir_node *n, const char *name) {
    for (const cir_attr_spec *s = n->def->attrs; s && s->name; s++)
        if (!strcmp(s->name, name)) return s;
    return NULL;
}

/* The attribute set on n, or NULL; `name` must be in the op's table. */
static const cir_attr *find(const cir_node *n, const char *name, const cir_attr_spec **spec) {
    *spec = spec_of(n, name);
    CUVIL_ASSERT(*spec && "attribute not in the op's table");
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].spec == *spec) return &n->attrs[i];
    return NULL;
}

int64_t cir_attr_int(const cir_node *n, const char *name) {
    const cir_attr_spec *s;
    const cir_attr *a = find(n, name, &s);
    CUVIL_ASSERT(s->type == CIR_ATTR_INT || s->type == CIR_ATTR_ENUM || s->type == CIR_ATTR_DTYPE);
    return a ? a->i : s->def_i;
}

float cir_attr_float(const cir_node *n, const char *name) {
    const cir_attr_spec *s;
    const cir_attr *a = find(n, name, &s);
    CUVIL_ASSERT(s->type == CIR_ATTR_FLOAT);
    return a ? a->f : s->def_f;
}

int cir_attr_ints(const cir_node *n, const char *name, const int64_t **out) {
    const cir_attr_spec *s;
    const cir_attr *a = find(n, name, &s);
    CUVIL_ASSERT(s->type == CIR_ATTR_INTS);
    *out = a ? a->ints : NULL;
    return a ? a->n : -1;
}

int cir_attr_floats(const cir_node *n, const char *name, const float **out) {
    const cir_attr_spec *s;
    const cir_attr *a = find(n, name, &s);
    CUVIL_ASSERT(s->type == CIR_ATTR_FLOATS);
    *out = a ? a->floats : NULL;
    return a ? a->n : -1;
}

bool cir_attr_has(const cir_node *n, const char *name) {
    const cir_attr_spec *s;
    return find(n, name, &s) != NULL;
}

const char *cir_attr_enum_name(const cir_node *n, const char *name) {
    const cir_attr_spec *s;
    const cir_attr *a = find(n, name, &s);
    CUVIL_ASSERT(s->type == CIR_ATTR_ENUM);
    return s->names[a ? a->i : s->def_i];
}

static const char *const type_names[] = {"?", "int", "float", "string", "ints", "floats"};

static const char *public_type_name(cuvil_attr_type t) {
    return t >= CUVIL_ATTR_INT && t <= CUVIL_ATTR_FLOATS ? type_names[t] : "unknown";
}

static const char *spec_type_name(cir_attr_type t) {
    switch (t) {
    case CIR_ATTR_INT: return "int";
    case CIR_ATTR_FLOAT: return "float";
    case CIR_ATTR_INTS: return "ints";
    case CIR_ATTR_FLOATS: return "floats";
    case CIR_ATTR_ENUM: return "string (one of its names)";
    case CIR_ATTR_DTYPE: return "string (an element type) or int";
    }
    return "?";
}

void cir_node_rekind(cir_node *n, cir_op_kind kind) {
    n->kind = kind;
    n->def = cir_op_def(kind);
    int na = 0;
    for (int k = 0; k < n->n_attrs; k++) {
        const cir_attr_spec *sp = spec_of(n, n->attrs[k].spec->name);
        if (!sp || sp->type != n->attrs[k].spec->type) continue;
        n->attrs[na] = n->attrs[k];
        n->attrs[na++].spec = sp;
    }
    n->n_attrs = na;
}

cuvil_status cir_node_set_attr(cir_graph *g, cir_node *n, const cuvil_attr *a) {
    const char *name = a->name ? a->name : "";
    const cir_attr_spec *s = spec_of(n, name);
    if (!s) {
        cuvil_sb names = {0};
        for (const cir_attr_spec *t = n->def->attrs; t && t->name; t++)
            cuvil_sb_printf(&names, "%s%s", t == n->def->attrs ? "" : ", ", t->name);
        cuvil_status st = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "attribute '%s' is not supported (%s takes: %s)", name,
                                       n->def->name, names.s ? names.s : "no attributes");
        cuvil_sb_free(&names);
        return st;
    }
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].spec == s) return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute '%s' is given twice", name);
    cir_attr v = {.spec = s};
    if (a->type == CUVIL_ATTR_STRING && !a->s)
        return cir_node_err(g, n, CUVIL_ERR_INVALID_ARG, "attribute '%s' is a string attribute with no string", name);
    bool ok;
    switch (s->type) {
    case CIR_ATTR_INT: ok = a->type == CUVIL_ATTR_INT; v.i = a->i; break;
    case CIR_ATTR_FLOAT:
        ok = a->type == CUVIL_ATTR_FLOAT || a->type == CUVIL_ATTR_INT;
        v.f = a->type == CUVIL_ATTR_FLOAT ? a->f : (float)a->i;
        break;
    case CIR_ATTR_INTS: ok = a->type == CUVIL_ATTR_INTS; break;
    case CIR_ATTR_FLOATS: ok = a->type == CUVIL_ATTR_FLOATS; break;
    case CIR_ATTR_ENUM:
        ok = a->type == CUVIL_ATTR_STRING && a->s;
        if (ok) {
            int k = 0;
            while (s->names[k] && strcmp(s->names[k], a->s)) k++;
            if (!s->names[k]) {
                cuvil_sb names = {0};
                for (int j = 0; s->names[j]; j++) cuvil_sb_printf(&names, "%s'%s'", j ? ", " : "", s->names[j]);
                cuvil_status st = cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute %s='%s' is not one of %s", name, a->s,
                                               names.s ? names.s : "");
                cuvil_sb_free(&names);
                return st;
            }
            v.i = k;
        }
        break;
    case CIR_ATTR_DTYPE:
        ok = (a->type == CUVIL_ATTR_STRING && a->s) || a->type == CUVIL_ATTR_INT;
        if (ok) {
            cir_dtype t = CIR_UNDEF;
            if (a->type == CUVIL_ATTR_STRING) t = cir_dtype_by_name(a->s);
            else if (a->i > 0 && a->i < 64) t = cir_dtype_from_public((cuvil_dtype)a->i);
            if (t == CIR_UNDEF) {
                if (a->type == CUVIL_ATTR_STRING)
                    return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "attribute %s='%s' is not an element type Cuvil "
                                        "supports", name, a->s);
                return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "attribute %s=%lld (%s) is not an element type Cuvil "
                                    "supports", name, (long long)a->i,
                                    a->i > 0 && a->i <= 0xffff ? cuvil_dtype_name((cuvil_dtype)a->i) : "unknown");
            }
            v.i = t;
        }
        break;
    default: ok = false;
    }
    if (!ok)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute '%s' must be %s, not %s", name, spec_type_name(s->type),
                            public_type_name(a->type));
    if (s->type == CIR_ATTR_INTS || s->type == CIR_ATTR_FLOATS) {
        if (a->n > (size_t)g->limits.values)
            return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "attribute '%s' has %zu values", name, a->n);
        v.n = (int)a->n;
        if (a->n && !(s->type == CIR_ATTR_INTS ? (void *)a->ints : (void *)a->floats))
            return cir_node_err(g, n, CUVIL_ERR_INVALID_ARG, "attribute '%s' has %zu values but no array", name, a->n);
        /* one element more than given, so that an empty list still has an address */
        size_t es = s->type == CIR_ATTR_INTS ? sizeof(int64_t) : sizeof(float);
        void *copy = cuvil_arena_alloc(&g->arena, es * (a->n + 1));
        if (!copy) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (a->n) memcpy(copy, s->type == CIR_ATTR_INTS ? (const void *)a->ints : (const void *)a->floats, es * a->n);
        if (s->type == CIR_ATTR_INTS) v.ints = copy;
        else v.floats = copy;
    }
    cir_attr *na = cuvil_arena_alloc(&g->arena, sizeof(cir_attr) * (size_t)(n->n_attrs + 1));
    if (!na) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    if (n->n_attrs) memcpy(na, n->attrs, sizeof(cir_attr) * (size_t)n->n_attrs);
    na[n->n_attrs] = v;
    n->attrs = na;
    n->n_attrs++;
    return CUVIL_OK;
}

cuvil_status cir_node_check_attrs(cir_graph *g, cir_node *n) {
    for (const cir_attr_spec *s = n->def->attrs; s && s->name; s++)
        if (s->required && !cir_attr_has(n, s->name))
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "attribute %s is required", s->name);
    return CUVIL_OK;
}

void cir_attrs_print(const cir_node *n, cuvil_sb *out) {
    for (int i = 0; i < n->n_attrs; i++) {
        const cir_attr *a = &n->attrs[i];
        const cir_attr_spec *s = a->spec;
        cuvil_sb_printf(out, " %s=", s->name);
        switch (s->type) {
        case CIR_ATTR_INT: cuvil_sb_printf(out, "%lld", (long long)a->i); break;
        case CIR_ATTR_FLOAT: cuvil_sb_printf(out, "%.9g", (double)a->f); break;
        case CIR_ATTR_ENUM: cuvil_sb_puts(out, s->names[a->i]); break;
        case CIR_ATTR_DTYPE: cuvil_sb_puts(out, cir_dtype_name((cir_dtype)a->i)); break;
        case CIR_ATTR_INTS:
        case CIR_ATTR_FLOATS:
            cuvil_sb_puts(out, "[");
            for (int j = 0; j < a->n && j < 64; j++) {
                if (s->type == CIR_ATTR_INTS) cuvil_sb_printf(out, "%s%lld", j ? "," : "", (long long)a->ints[j]);
                else cuvil_sb_printf(out, "%s%.9g", j ? "," : "", (double)a->floats[j]);
            }
            cuvil_sb_puts(out, a->n > 64 ? ",...]" : "]");
            break;
        }
    }
}

/* ===== Helpers ============================================================================ */
cuvil_status op_check_arity(cir_graph *g, cir_node *n, int lo, int hi, int olo, int ohi) {
    int nin = n->n_in;
    while (nin > 0 && n->in[nin - 1] < 0) nin--;   /* trailing omitted optionals */
    if (nin < lo || (hi >= 0 && nin > hi))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "has %d inputs, expected %d..%d", nin, lo, hi);
    if (n->n_out < olo || n->n_out > ohi)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "has %d outputs, expected %d..%d", n->n_out, olo, ohi);
    for (int i = 0; i < lo; i++)
        if (n->in[i] < 0) return cir_node_err(g, n, CUVIL_ERR_MODEL, "required input %d is missing", i);
    return CUVIL_OK;
}

cuvil_status op_need_f32(cir_graph *g, cir_node *n, int i) {
    cir_value *v = cir_in(g, n, i);
    if (!v) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is missing", i);
    if (v->ndim < 0) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "input '%s' has no shape", v->name);
    if (v->dtype != CIR_F32) {
        g->half_input |= v->dtype == CIR_F16 || v->dtype == CIR_BF16;
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' is %s; only float32 is supported",
                            v->name, cir_dtype_name(v->dtype));
    }
    return CUVIL_OK;
}

/* Input i of n as op_const_ints reads it: present, constant (or, where sval_ok, known as
 * expressions), int32/int64, at most max elements; its element count into *count. */
static cuvil_status int_input(cir_graph *g, cir_node *n, int i, const char *what, int max, bool sval_ok, cir_value **v,
                              int *count) {
    *v = cir_in(g, n, i);
    if (!*v) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' is missing", what);
    if (!cir_is_const(*v) && !(sval_ok && (*v)->sval))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                            "input '%s' ('%s') is computed at run time; Cuvil needs it constant "
                            "(it could not be folded from the model's fixed shapes)", what, (*v)->name);
    if ((*v)->dtype != CIR_I64 && (*v)->dtype != CIR_I32)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' must be int64, not %s", what, cir_dtype_name((*v)->dtype));
    int64_t cnt = cir_numel(*v);
    if (cnt > max) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has %lld elements, at most %d supported",
                                       what, (long long)cnt, max);
    *count = (int)cnt;
    return CUVIL_OK;
}

cuvil_status op_const_ints(cir_graph *g, cir_node *n, int i, const char *what, int64_t *out, int max, int *count) {
    cir_value *v;
    cuvil_status s = int_input(g, n, i, what, max, false, &v, count);
    for (int j = 0; !s && j < *count; j++) out[j] = cir_const_i64(v, j);
    return s;
}

cuvil_status op_sval_ints(cir_graph *g, cir_node *n, int i, const char *what, const cir_dim **out, int max, int *count) {
    cir_value *v;
    cuvil_status s = int_input(g, n, i, what, max, true, &v, count);
    for (int j = 0; !s && j < *count; j++)
        if (!(out[j] = cir_sval_at(g, v, j))) return cir_dim_err(g, n, what);
    return s;
}

cuvil_status op_size_ints(cir_graph *g, cir_node *n, int i, const char *what, const cir_dim **out, int max, int *count,
                          int64_t lo, int64_t hi) {
    cir_value *v = cir_in(g, n, i);
    if (!v || cir_is_const(v) || v->sval) return op_sval_ints(g, n, i, what, out, max, count);
    if (v->dtype != CIR_I64 && v->dtype != CIR_I32)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "input '%s' must be int64, not %s", what, cir_dtype_name(v->dtype));
    if (!cir_value_fixed(v))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' ('%s') is computed at run time and its length is "
                            "symbolic; Cuvil reads sizes from a tensor of fixed length", what, v->name);
    int64_t cnt = cir_numel(v);
    if (cnt > max || cnt > CIR_MAX_SVAL)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has %lld elements, at most %d supported", what,
                            (long long)cnt, max < CIR_MAX_SVAL ? max : CIR_MAX_SVAL);
    *count = (int)cnt;
    for (int j = 0; j < *count; j++)
        if (!(out[j] = cir_rt_load(g, n, i, j, lo, hi))) return g->ctx->status;
    return CUVIL_OK;
}

cuvil_status op_found_dim(cir_graph *g, cir_node *n, int out, int d, int k, int64_t derived, bool soft,
                          const cir_dim **dx) {
    cir_value *v = cir_out(g, n, out);
    int64_t lo, b;
    bool given = v && ((v->output_index >= 0 && d < v->decl_ndim && v->decl_dims[d] >= 0) || cir_value_bound(g, v->name, &lo, &b));
    int64_t hi = soft && given ? -1 : derived;
    if (v && v->output_index >= 0 && d < v->decl_ndim && v->decl_dims[d] >= 0 && (hi < 0 || v->decl_dims[d] < hi))
        hi = v->decl_dims[d];   /* a graph output declared this size: the run checks it (check_declared) */
    if (v && cir_value_bound(g, v->name, &lo, &b) && (hi < 0 || b < hi)) hi = b;
    if (hi < 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "dim %d of its output '%s' is known only when the model runs and "
                            "nothing bounds it: give its largest value with --dim %s=0:N", d, v ? v->name : "?",
                            v ? v->name : "?");
    return (*dx = cir_rt_found(g, n, k, hi, "dim")) ? CUVIL_OK : g->ctx->status;
}

cuvil_status op_window_x(cir_graph *g, cir_node *n, int i, const cir_dim *in, int64_t ek, int64_t s, int ap, int64_t pb,
                         int64_t pe, bool ceil_mode, op_window *w) {
    cir_dimtab *t = &g->dt;
    const cir_dim *sd = cir_dim_const(t, s);
    if (ap == CIR_PAD_SAME_UPPER || ap == CIR_PAD_SAME_LOWER) {
        w->out = cir_dim_cdiv(t, in, sd);
        const cir_dim *total = cir_dim_max(t, cir_dim_sub(t, cir_dim_add_const(t, cir_dim_scale(t, w->out, s), ek - s), in),
                                           cir_dim_const(t, 0));
        const cir_dim *half = cir_dim_fdiv(t, total, cir_dim_const(t, 2));
        w->pb = ap == CIR_PAD_SAME_UPPER ? half : cir_dim_sub(t, total, half);
        w->pe = cir_dim_sub(t, total, w->pb);
    } else {
        if (ap == CIR_PAD_VALID) pb = pe = 0;
        w->pb = cir_dim_const(t, pb);
        w->pe = cir_dim_const(t, pe);
        const cir_dim *span = cir_dim_add_const(t, in, pb + pe - ek);
        if (span && span->lo < 0) {
            cuvil_sb e = {0};
            cir_dim_print(&e, t, in);
            cuvil_status st = cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "along spatial dim %d the window (%lld) is larger "
                                           "than the padded input when %s < %lld; raise the symbol's minimum", i,
                                           (long long)ek, e.s ? e.s : "?", (long long)(ek - pb - pe));
            cuvil_sb_free(&e);
            return st;
        }
        w->out = cir_dim_add_const(t, ceil_mode ? cir_dim_cdiv(t, span, sd) : cir_dim_fdiv(t, span, sd), 1);
        /* the last window must start inside the input or its left padding (ceil_mode) */
        if (ceil_mode) w->out = cir_dim_min(t, w->out, cir_dim_cdiv(t, cir_dim_add_const(t, in, pb), sd));
    }
    if (!w->out || !w->pb || !w->pe) return cir_dim_err(g, n, "the output size");
    if (w->out->lo <= 0)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "the output size along spatial dim %d may be 0 for the smallest "
                            "inputs; raise the symbol's minimum", i);
    return CUVIL_OK;
}

cuvil_status op_axis(cir_graph *g, cir_node *n, int64_t axis, int rank, const char *what, int *out) {
    if (axis < -rank || axis >= rank)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s=%lld is out of range for rank %d", what, (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return CUVIL_OK;
}

cuvil_status op_broadcast(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b, int *ndim, int64_t *dims) {
    int r = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[256], sb[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot broadcast '%s' %s with '%s' %s", a->name,
                                cir_shape_str(g, a, sa, sizeof sa), b->name, cir_shape_str(g, b, sb, sizeof sb));
        }
        dims[i] = da == 1 ? db : da;
    }
    *ndim = r;
    return CUVIL_OK;
}

void op_bcast_strides(const cir_value *v, int ndim, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        int iv = i - (ndim - v->ndim);
        int64_t d = iv >= 0 ? v->dims[iv] : 1;
        strides[i] = (d == 1 && dims[i] != 1) || iv < 0 ? 0 : s;
        s *= d;
    }
}

void op_bin_params(const cir_value *a, const cir_value *b, const cir_value *y, int op, cuvil_binary_params *p) {
    memset(p, 0, sizeof *p);
    p->op = op;
    cuvil_binary_bind(p, 3, (const int[]){a->ndim, b->ndim, y->ndim}, (const int64_t *const[]){a->dims, b->dims, y->dims});
}

cuvil_status op_broadcast_x(cir_graph *g, cir_node *n, const cir_value *a, const cir_value *b, int *ndim,
                            const cir_dim **dx) {
    int r = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
        const cir_dim *one = cir_dim_const(&g->dt, 1);
        const cir_dim *da = ia >= 0 ? cir_dimx(g, a, ia) : one, *db = ib >= 0 ? cir_dimx(g, b, ib) : one;
        if (!da || !db) return cir_dim_err(g, n, "broadcasting");
        if (da == db || db == one) {
            dx[i] = da;
        } else if (da == one) {
            dx[i] = db;
        } else if (cir_dim_is_const(da) && cir_dim_is_const(db)) {
            char sa[256], sb[256];
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "cannot broadcast '%s' %s with '%s' %s", a->name,
                                cir_shape_str(g, a, sa, sizeof sa), b->name, cir_shape_str(g, b, sb, sizeof sb));
        } else {
            /* two dims that may differ: equal, or one of them 1 when the model runs (checked
             * then; the kernels bind their strides to the run's dims) */
            char what[64];
            snprintf(what, sizeof what, "broadcast dims %d of the operands", i);
            cuvil_status s = cir_require_bcast(g, n, da, db, what, &dx[i]);
            if (s) return s;
        }
    }
    *ndim = r;
    return CUVIL_OK;
}

cuvil_status op_need_typed(cir_graph *g, cir_node *n, int i, bool bool_ok) {
    cir_value *v = cir_in(g, n, i);
    if (!v) return cir_node_err(g, n, CUVIL_ERR_MODEL, "input %d is missing", i);
    if (v->dtype == CIR_UNDEF || (!bool_ok && v->dtype == CIR_BOOL))
        return cir_node_err(g, n, CUVIL_ERR_DTYPE, "input '%s' is %s; %s takes numbers", v->name, cir_dtype_name(v->dtype),
                            n->def->name);
    return CUVIL_OK;
}
