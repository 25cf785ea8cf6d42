/* cuvil.c -- the compiler driver: load, passes, codegen, toolchain. See cuvil.h. */
#include "codegen/toolchain_int.h"
#include "frontend/onnx/onnx_int.h"
#include "passes/passes_int.h"

#include <ctype.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

const char *cuvil_version(void) { return CUVIL_VERSION; }

void cuvil_options_init(cuvil_options *o) {
    memset(o, 0, sizeof *o);
    o->opt_level = 2;
    cuvil_limits_init(&o->limits);
}

/* The symbol prefix: --name, else the output file's stem made into a C identifier. Names
 * starting with "cuvil" are Cuvil's own (cuvil_model, cuvil_rt.h): a stem like that gets "m_"
 * in front, and --name refuses it. */
static cuvil_status pick_prefix(cuvil_ctx *ctx, const cuvil_options *o, const char *output, char *out, size_t len) {
    if (o->name) {
        if (!*o->name || strlen(o->name) >= len - 1 || isdigit((unsigned char)o->name[0]))
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--name '%s': must be a C identifier", o->name);
        for (const char *p = o->name; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_')
                return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--name '%s': must be a C identifier", o->name);
        if (!strncmp(o->name, "cuvil", 5))
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--name '%s': names starting with 'cuvil' are reserved", o->name);
        snprintf(out, len, "%s", o->name);
        return CUVIL_OK;
    }
    const char *base = strrchr(output, '/');
    base = base ? base + 1 : output;
    if (!strncmp(base, "lib", 3) && base[3] && base[3] != '.') base += 3;   /* libfoo.so -> foo */
    char stem[128];
    size_t k = 0;
    for (const char *p = base; *p && *p != '.' && k < sizeof stem - 1; p++) stem[k++] = isalnum((unsigned char)*p) ? *p : '_';
    stem[k] = 0;
    bool fix = !k || isdigit((unsigned char)stem[0]) || !strncmp(stem, "cuvil", 5);
    snprintf(out, len, "%s%s", fix ? (k ? "m_" : "m") : "", stem);
    return CUVIL_OK;
}

/* ===== Symbolic dims ===================================================================== */
/* A model whose symbols have ranges (--dim seq=1:512) is compiled at sample values of them and
 * the texts are merged (codegen/symbolic.c): one model.c for every value in the ranges. The
 * fit uses a grid of the top 3 values of each symbol; the check uses values from the whole
 * range (every value of a range of at most 8, else both ends and points between), so that a
 * size which is not one polynomial over the range (a clamp, a division rounding down) is
 * refused rather than guessed. Memory is planned in every compile alike, with each value's
 * dims at their largest over the whole range. */
#define MAX_SYM_VALUES 12
#define MAX_SAMPLES CG_MAX_SAMPLES
#define MAX_SYMS CG_MAX_SYMS

typedef struct sym_samples {
    int nd, dyn[MAX_SYMS];
    int64_t step[MAX_SYMS];                   /* values and points count in steps: value = point * step */
    int64_t lo[MAX_SYMS], hi[MAX_SYMS];       /* the ranges, in steps */
    int64_t vals[MAX_SYMS][MAX_SYM_VALUES];   /* per symbol, the grid's 3 first (from the top) */
    int nv[MAX_SYMS], gn[MAX_SYMS];
    int64_t pts[MAX_SAMPLES][MAX_SYMS];
    int np;
} sym_samples;

static void add_point(sym_samples *ss, const int64_t *x) {
    for (int p = 0; p < ss->np; p++)
        if (!memcmp(ss->pts[p], x, sizeof ss->pts[p])) return;
    if (ss->np < MAX_SAMPLES) memcpy(ss->pts[ss->np++], x, sizeof ss->pts[0]);
}

static cuvil_status plan_samples(cuvil_ctx *ctx, const cir_graph *g, sym_samples *ss) {
    memset(ss, 0, sizeof *ss);
    for (int k = 0; k < g->n_syms; k++)
        if (g->syms[k].min < g->syms[k].max) {
            if (ss->nd == MAX_SYMS)
                return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "at most %d dims can stay symbolic (here '%s', '%s', '%s' and "
                                 "'%s'); fix the others with --dim NAME=N", MAX_SYMS, g->syms[ss->dyn[0]].name,
                                 g->syms[ss->dyn[1]].name, g->syms[ss->dyn[2]].name, g->syms[k].name);
            ss->dyn[ss->nd++] = k;
        }
    for (int j = 0; j < MAX_SYMS; j++) {
        ss->step[j] = 1;
        ss->lo[j] = ss->hi[j] = 0;
        if (j >= ss->nd) {
            ss->nv[j] = ss->gn[j] = 1;
            continue;
        }
        const cir_sym *sy = &g->syms[ss->dyn[j]];
        ss->step[j] = sy->step > 1 ? sy->step : 1;
        int64_t lo = sy->min / ss->step[j], hi = sy->max / ss->step[j], *v = ss->vals[j];
        ss->lo[j] = lo;
        ss->hi[j] = hi;
        int n = 0;
        if (hi - lo + 1 <= 8) {
            for (int64_t x = hi; x >= lo; x--) v[n++] = x;
        } else {
            for (int i = 0; i < 4; i++) v[n++] = hi - i;               /* the top: the grid and a check */
            for (int i = 1; i <= 4; i++) v[n++] = lo + (hi - lo) * (5 - i) / 5;   /* between */
            for (int i = 3; i >= 0; i--) v[n++] = lo + i;              /* the bottom */
        }
        ss->nv[j] = n;
        ss->gn[j] = n < 3 ? n : 3;
    }
    /* the grid, the first symbol's index fastest (sample 0: the upper bounds) */
    int G = ss->gn[0] * ss->gn[1] * ss->gn[2];
    for (int i = 0; i < G; i++) {
        int64_t x[MAX_SYMS] = {0};
        for (int j = 0, r = i; j < ss->nd; r /= ss->gn[j], j++) x[j] = ss->vals[j][r % ss->gn[j]];
        add_point(ss, x);
    }
    /* the checks: each symbol over its values, the others at their tops and at their bottoms */
    for (int j = 0; j < ss->nd; j++)
        for (int a = 0; a < ss->nv[j]; a++)
            for (int end = 0; end < (ss->nd > 1 ? 2 : 1); end++) {
                int64_t x[MAX_SYMS] = {0};
                for (int k = 0; k < ss->nd; k++) x[k] = k == j ? ss->vals[j][a] : ss->vals[k][end ? ss->nv[k] - 1 : 0];
                add_point(ss, x);
            }
    if (ss->nd > 1) {   /* and the middle */
        int64_t x[MAX_SYMS] = {0};
        for (int k = 0; k < ss->nd; k++) x[k] = ss->vals[k][ss->nv[k] / 2];
        add_point(ss, x);
    }
    return CUVIL_OK;
}

/* A folded value that depends on a symbol cannot sit in the weights, which serve every size:
 * when a kernel reads it, the node that computed it runs again when the model runs (a Range
 * over the sequence, a Shape used as data). Revives the producers of the values marked in
 * want (per value id): each such node lives again and its outputs become activations; their
 * data stays, for kernel parameters computed at compile time. The node's own inputs are left
 * as they are; a constant among them that a kernel reads and that depends on a symbol shows
 * up in the next comparison of the compiles (symbolic_generate). */
static cuvil_status revive(cuvil_ctx *ctx, cir_graph *g, const uint8_t *want, const char *syms) {
    if (!want) return CUVIL_OK;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        bool hit = false;
        for (int j = 0; n->dead && j < n->n_out; j++)
            hit |= n->out[j] >= 0 && want[n->out[j]] && cir_val(g, n->out[j])->kind == CIR_VAL_CONST;
        if (!hit) continue;
        if (!cir_op_has_emitter(n->def) && !(n->def->flags & CIR_OPF_ALIAS)) {
            const char *what = "";
            for (int j = 0; j < n->n_out && !*what; j++)
                if (n->out[j] >= 0 && want[n->out[j]]) what = cir_val(g, n->out[j])->name;
            return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "the model cannot keep its dims symbolic: node '%s' (%s) computes "
                             "'%s' at compile time, which depends on %s, and %s has no kernel to compute it when the model "
                             "runs (fix the dims with --dim NAME=N)", n->name, n->src_op, what, syms, n->src_op);
        }
        n->dead = false;
        for (int j = 0; j < n->n_out; j++) {
            cir_value *v = n->out[j] >= 0 ? cir_val(g, n->out[j]) : NULL;
            if (!v || v->kind != CIR_VAL_CONST) continue;
            v->kind = CIR_VAL_ACT;
            v->producer = i;
        }
        /* inferred again with the inputs it now has: an op may fold types its kernel does not
         * take (an int64 Clip or ReduceProd), which infer refuses for run-time inputs. The
         * shape-data ops infer by folding and run whatever their inputs. */
        if (n->def->flags & CIR_OPF_SHAPE_DATA) continue;
        cuvil_status s = n->def->infer(g, n);
        if (s) {
            char why[sizeof ctx->errmsg];
            snprintf(why, sizeof why, "%s", ctx->errmsg);
            return cuvil_err(ctx, s, "the model cannot keep its dims symbolic: %s (with %s symbolic, that input is "
                             "computed when the model runs; fix the dims with --dim NAME=N)", why, syms);
        }
    }
    for (int i = 0; i < g->n_values; i++)
        if (want[i] && cir_val(g, i)->kind == CIR_VAL_CONST)
            return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "the model cannot keep its dims symbolic: the constant '%s' "
                             "depends on %s and no node of the model computes it (fix the dims with --dim NAME=N)",
                             cir_val(g, i)->name, syms);
    cir_graph_count_uses(g);
    return CUVIL_OK;
}

static const char graph_differs[] = "the model cannot keep its dims symbolic: its graph differs with the value of a "
                                    "symbol (fix them with --dim NAME=N)";

/* Builds the model's graph at sample p, borrowing the initializers of g0 (sample 0's graph),
 * and runs the passes; the graph must have g0's values (revive, codegen and the fits compare
 * them by id). Then revives the values of want, if any (one flag per value). */
static cuvil_status load_sample(cuvil_ctx *ctx, const cuvil_options *o, const cuvil_onnx_model *model,
                                const cir_graph *g0, const char *target, const sym_samples *ss, int p,
                                const uint8_t *want, const char *syms, cir_graph **out) {
    int64_t sample[32];
    for (int j = 0; j < 32; j++) sample[j] = -1;   /* -1: not a symbol of the samples */
    for (int j = 0; j < ss->nd; j++) sample[ss->dyn[j]] = ss->pts[p][j] * ss->step[j];
    cuvil_status s = cuvil_onnx_build(ctx, model, o, sample, 32, g0, out);
    if (s) return s;
    (*out)->target = target;
    (*out)->opt_level = o->opt_level;
    (*out)->symbolic = true;
    if ((s = cuvil_run_passes(*out, o))) return s;
    if ((*out)->n_values != g0->n_values) return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "%s", graph_differs);
    return revive(ctx, *out, want, syms);
}

/* Marks in marks the constants that the compiles of g (sample 0, output a) and gs (output b)
 * place in the weights with different bytes or at one only, or write into the code with
 * different values, unless want has them already; returns how many it newly marked. */
static int mark_differing(const cir_graph *g, const cg_output *a, const cir_graph *gs, const cg_output *b,
                          const uint8_t *want, uint8_t *marks) {
    int marked = 0;
    for (int v = 0; v < g->n_values && v < a->n_const_off && v < b->n_const_off; v++) {
        int64_t oa = a->const_off[v], ob = b->const_off[v];
        bool ca = a->in_code && a->in_code[v], cb = b->in_code && b->in_code[v];
        if (oa < 0 && ob < 0 && !ca && !cb) continue;
        const cir_value *x = cir_val(g, v), *y = cir_val(gs, v);
        size_t na = cir_nbytes(x), nb = cir_nbytes(y);
        bool differs;
        if (ca || cb)   /* written into the code (gather indices): compared as the values they are */
            differs = !ca || !cb || x->ndim != y->ndim || memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->ndim) ||
                      na != nb || (na && memcmp(x->data, y->data, na));
        else
            differs = oa < 0 || ob < 0 || na != nb || (na && x->data != y->data && memcmp(x->data, y->data, na));
        if (differs && !want[v] && !marks[v]) {
            marks[v] = 1;
            marked++;
        }
    }
    return marked;
}

/* One compile per sample, to see each value's dims there (round 1 of a symbolic compile, and
 * what --emit ir shows of one): dv holds them (value i's dim d at sample p: DV(sd, i, d, p)),
 * expr the dims that vary as expressions of the symbols (in g's arena; NULL where a dim is
 * fixed, "?" where it fits no polynomial, which the compile refuses later with its reason). */
typedef struct sym_dims {
    sym_samples ss;
    cg_samples sm;           /* its points are ss's */
    int n_values;            /* g's */
    size_t *first;           /* per value: the index of its first dim */
    size_t n_dims;
    int64_t *dv;             /* per dim, per sample */
    const char **expr;       /* per dim */
    char and_names[200];     /* "H and W": what sizes are not polynomials in */
    char or_names[200];      /* "H or W": what a value depends on */
} sym_dims;
#define DV(sd, i, d, p) (sd)->dv[((sd)->first[i] + (size_t)(d)) * (size_t)(sd)->ss.np + (size_t)(p)]

static void sym_dims_free(sym_dims *sd) {
    cuvil_free(sd->first);
    cuvil_free(sd->dv);
    cuvil_free(sd->expr);
    sd->first = NULL;
    sd->dv = NULL;
    sd->expr = NULL;
}

/* Gives gx (g, or a sample's graph: the same value ids) the dims' expressions. */
static void sym_dims_apply(const sym_dims *sd, cir_graph *gx) {
    for (int i = 0; i < sd->n_values && i < gx->n_values; i++) {
        cir_value *v = cir_val(gx, i);
        for (int d = 0; d < v->ndim; d++) v->dim_expr[d] = sd->expr[sd->first[i] + (size_t)d];
    }
}

static cuvil_status sym_dims_measure(cuvil_ctx *ctx, cir_graph *g, const cuvil_options *o, const cuvil_onnx_model *model,
                                     const char *target, sym_dims *sd) {
    memset(sd, 0, sizeof *sd);
    sym_samples *ss = &sd->ss;
    cuvil_status s = plan_samples(ctx, g, ss);
    if (s) return s;
    cg_samples *sm = &sd->sm;
    *sm = (cg_samples){.n = ss->np, .nd = ss->nd, .points = (const int64_t(*)[MAX_SYMS])ss->pts};
    for (int j = 0; j < MAX_SYMS; j++) {
        sm->grid[j] = ss->vals[j];
        sm->grid_n[j] = ss->gn[j];
        sm->step[j] = ss->step[j];
        sm->lo[j] = ss->lo[j];
        sm->hi[j] = ss->hi[j];
        sm->names[j] = j < ss->nd ? g->syms[ss->dyn[j]].name : "";
    }
    cg_sym_names(sm, "and", sd->and_names, sizeof sd->and_names);
    cg_sym_names(sm, "or", sd->or_names, sizeof sd->or_names);
    sd->n_values = g->n_values;
    sd->first = cuvil_malloc(sizeof(size_t) * ((size_t)g->n_values + 1));
    for (int i = 0; sd->first && i < g->n_values; i++) {
        sd->first[i] = sd->n_dims;
        sd->n_dims += (size_t)cir_val(g, i)->ndim;
    }
    sd->dv = sd->first ? cuvil_calloc(sd->n_dims * (size_t)ss->np + 1, sizeof *sd->dv) : NULL;
    sd->expr = sd->first ? cuvil_calloc(sd->n_dims + 1, sizeof *sd->expr) : NULL;
    if (!sd->dv || !sd->expr) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    /* sample 0 is g, already through the passes */
    for (int i = 0; i < g->n_values; i++)
        for (int d = 0; d < cir_val(g, i)->ndim; d++) DV(sd, i, d, 0) = cir_val(g, i)->dims[d];
    for (int p = 1; p < ss->np && !s; p++) {
        cir_graph *gs = NULL;
        if (!(s = load_sample(ctx, o, model, g, target, ss, p, NULL, NULL, &gs))) {
            for (int i = 0; !s && i < g->n_values; i++) {
                const cir_value *v = cir_val(gs, i);
                if (v->ndim != cir_val(g, i)->ndim || v->dtype != cir_val(g, i)->dtype)
                    s = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "%s", graph_differs);
                for (int d = 0; !s && d < v->ndim; d++) DV(sd, i, d, p) = v->dims[d];
            }
        }
        cir_graph_free(gs);
    }
    /* the dims that vary, as expressions (in g's arena, one copy each) */
    for (int i = 0; i < g->n_values && !s; i++)
        for (int d = 0; d < cir_val(g, i)->ndim && !s; d++) {
            bool same = true;
            for (int p = 1; p < ss->np; p++) same &= DV(sd, i, d, p) == DV(sd, i, d, 0);
            char e[1024];
            if (same) continue;
            if (!cg_sym_expr(sm, &DV(sd, i, d, 0), e, sizeof e))   /* no polynomial: the compile refuses it */
                snprintf(e, sizeof e, "?");
            const char *copy = cuvil_arena_strdup(&g->arena, e);
            if (!copy) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
            sd->expr[sd->first[i] + (size_t)d] = copy;
        }
    return s;
}

static cuvil_status symbolic_generate(cuvil_ctx *ctx, cir_graph *g, const cuvil_options *o, const cuvil_onnx_model *model,
                                      const char *target, const char *prefix, const char *abi, cg_output *gen) {
    if (!model) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "a built graph's dims are fixed");
    sym_dims sdims, *sd = &sdims;
    const sym_samples *ssp = &sd->ss;
    const cg_samples *smp = &sd->sm;
    size_t *plan = cuvil_malloc(sizeof(size_t) * ((size_t)g->n_values + 1));
    uint8_t *want = NULL;   /* per value id: computed when the model runs (revive) */
    cuvil_sb *texts = NULL, *headers = NULL;
    cuvil_status s = sym_dims_measure(ctx, g, o, model, target, sd);
    if (!s) {
        texts = cuvil_calloc((size_t)ssp->np, sizeof *texts);
        headers = cuvil_calloc((size_t)ssp->np, sizeof *headers);
        if (!plan || !texts || !headers) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    if (s) goto done;
    /* each value's memory: the product of its dims' largest values over the whole range (a
     * size can peak between samples: [256 - H, H]); each dim must be a polynomial there */
    for (int i = 0; i < g->n_values && !s; i++) {
        const cir_value *v = cir_val(g, i);
        uint64_t bytes = cir_dtype_size(v->dtype);
        for (int d = 0; d < v->ndim && !s; d++) {
            int64_t m = DV(sd, i, d, 0);
            bool same = true;
            for (int p = 1; p < ssp->np; p++) same &= DV(sd, i, d, p) == m;
            if (!same && !cg_sym_max(smp, &DV(sd, i, d, 0), &m))
                s = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "the model cannot keep its dims symbolic: dim %d of '%s' is not a "
                              "polynomial of degree 2 or less in %s (if strides divide it, give the symbol a step: "
                              "--dim NAME=LO:HI:STEP; if it is clamped at one end of the range, as a slice that is empty "
                              "for small values, narrow the range)", d, v->name, sd->and_names);
            else if (m < 0 || __builtin_mul_overflow(bytes, (uint64_t)m, &bytes) || bytes > g->limits.tensor_bytes)
                s = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "the model cannot keep its dims symbolic: '%s' would need more than "
                              "the limit tensor_bytes=%llu somewhere in the range", v->name,
                              (unsigned long long)g->limits.tensor_bytes);
        }
        plan[i] = (size_t)bytes;
        if (cir_nbytes(v) > plan[i]) plan[i] = cir_nbytes(v);
    }
    /* round 2: each sample's C, all with that plan. A constant in the weights that differs
     * between the compiles depends on a symbol: its producer runs when the model runs instead
     * (revive), and the compiles start again, until the weights agree. A round stops at the
     * first sample that finds such constants (nearly always the first, which differs from
     * sample 0 in every symbol), so only the last round, which finds none, compiles them all. */
    const char *syms = sd->or_names;
    want = cuvil_calloc((size_t)g->n_values + 1, 1);
    uint8_t *marks = cuvil_calloc((size_t)g->n_values + 1, 1);   /* this round's finds */
    if ((!want || !marks) && !s) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    g->plan_bytes = plan;
    g->n_plan_bytes = g->n_values;
    for (int round = 0; !s; round++) {
        int marked = 0;
        bool differ = false;   /* the weights, or data written into the code */
        sym_dims_apply(sd, g);   /* again: revived nodes were inferred again */
        if (!(s = cg_generate(g, o, prefix, target, abi, false, gen))) {
            texts[0] = gen->model_c;   /* borrowed */
            headers[0] = gen->model_h;
        }
        for (int p = 1; p < ssp->np && !s && !marked; p++) {
            cir_graph *gs = NULL;
            cg_output go;
            memset(&go, 0, sizeof go);
            if (!(s = load_sample(ctx, o, model, g, target, ssp, p, want, syms, &gs))) {
                gs->plan_bytes = plan;
                gs->n_plan_bytes = g->n_values;
                sym_dims_apply(sd, gs);
                s = cg_generate(gs, o, prefix, target, abi, true, &go);
                if (!s) {
                    int m = mark_differing(g, gen, gs, &go, want, marks);
                    marked += m;
                    differ |= m > 0 || !cg_weights_equal(gen, &go);
                }
                if (!s) {
                    texts[p] = go.model_c;
                    headers[p] = go.model_h;
                    memset(&go.model_c, 0, sizeof go.model_c);
                    memset(&go.model_h, 0, sizeof go.model_h);
                }
            }
            cg_output_free(&go);
            cir_graph_free(gs);
        }
        if (s || !differ) break;
        if (!marked || round == 32)   /* data no value owns (a kernel's own tables) differs */
            s = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "the model cannot keep its dims symbolic: constants it computes at "
                          "compile time depend on %s (fix them with --dim NAME=N)", syms);
        for (int p = 1; texts && headers && p < ssp->np; p++) {
            cuvil_sb_free(&texts[p]);
            cuvil_sb_free(&headers[p]);
        }
        cg_output_free(gen);
        memset(gen, 0, sizeof *gen);
        for (int i = 0; i < g->n_values; i++) want[i] |= marks[i];
        if (!s) s = revive(ctx, g, want, syms);
    }
    cuvil_free(marks);
    if (!s) {
        cuvil_sb merged = {0}, merged_h = {0};
        s = cg_merge_symbolic(ctx, texts, smp, &merged);
        if (!s) s = cg_merge_symbolic(ctx, headers, smp, &merged_h);
        if (!s) {
            cuvil_sb_free(&gen->model_c);
            cuvil_sb_free(&gen->model_h);
            gen->model_c = merged;
            gen->model_h = merged_h;
        } else {
            cuvil_sb_free(&merged);
            cuvil_sb_free(&merged_h);
        }
    }
done:
    for (int p = 1; texts && headers && p < ssp->np; p++) {
        cuvil_sb_free(&texts[p]);
        cuvil_sb_free(&headers[p]);
    }
    cuvil_free(texts);
    cuvil_free(headers);
    cuvil_free(want);
    g->plan_bytes = NULL;
    cuvil_free(plan);
    sym_dims_free(sd);
    return s;   /* gen (sample 0's output, or the merged one) is the caller's to free */
}

/* Passes, then the output o asks for. model_path: the model file (for output checks), or NULL
 * for a built graph; model: that file, decoded (the samples of a symbolic compile are built
 * from it). */
static cuvil_status compile_cir(cuvil_ctx *ctx, cir_graph *g, const cuvil_options *o, const char *model_path,
                                const cuvil_onnx_model *model,
                                const char *target, const char *prefix, const char *output) {
    cuvil_status s;
    g->target = target;
    g->opt_level = o->opt_level;
    if ((s = cuvil_run_passes(g, o))) return s;
    if (o->emit == CUVIL_EMIT_IR || o->emit == CUVIL_EMIT_DOT) {
        if (g->symbolic && model) {   /* the dims that depend on the symbols, as expressions of them */
            sym_dims sd;
            s = sym_dims_measure(ctx, g, o, model, target, &sd);
            if (!s) sym_dims_apply(&sd, g);
            sym_dims_free(&sd);
            if (s) return s;
        }
        cuvil_sb sb = {0};
        if (o->emit == CUVIL_EMIT_IR) {
            /* the header line also tells a later compile that Cuvil wrote this file */
            cuvil_sb_puts(&sb, "# CIR of ");
            cuvil_sb_safe_text(&sb, model_path ? cir_model_name(g) : g->name, 200);
            cuvil_sb_printf(&sb, ", generated by Cuvil %s\n", cuvil_version());
            cir_print_text(g, &sb);
        } else {
            cir_print_dot(g, &sb);
        }
        if (sb.oom) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        else if (!strcmp(output, "-")) fputs(sb.s ? sb.s : "", stdout);
        else s = cuvil_write_file_atomic(ctx, output, sb.s ? sb.s : "", sb.len);
        cuvil_sb_free(&sb);
        return s;
    }
    char *abi = NULL;
    if ((s = cuvil_read_abi_header(ctx, &abi))) return s;
    cg_output gen;
    memset(&gen, 0, sizeof gen);
    s = g->symbolic ? symbolic_generate(ctx, g, o, model, target, prefix, abi, &gen)
                    : cg_generate(g, o, prefix, target, abi, false, &gen);
    cuvil_free(abi);
    const char *src = model_path ? model_path : g->model_path;
    if (!s) {
        if (o->emit == CUVIL_EMIT_C) s = cuvil_emit_sources(ctx, &gen, prefix, target, o, src, output);
        else s = cuvil_build_library(ctx, &gen, prefix, target, o, src, output);
    }
    cg_output_free(&gen);
    return s;
}

/* Checks shared by both entry points; fills target and prefix. */
static cuvil_status check_request(cuvil_ctx *ctx, const cuvil_options *o, const char *model_path, const char *output,
                                  const char **target, char *prefix, size_t len) {
    if (o->opt_level < 0 || o->opt_level > 3)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--opt-level %d: must be 0..3", o->opt_level);
    if ((int)o->emit < CUVIL_EMIT_SO || o->emit > CUVIL_EMIT_DOT)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "options.emit is %d, not one of cuvil_emit", (int)o->emit);
    *target = o->target ? o->target : cuvil_host_target();
    cuvil_status s = cuvil_check_target(ctx, *target, o->emit == CUVIL_EMIT_SO || o->emit == CUVIL_EMIT_A);
    if (s) return s;
    if ((s = pick_prefix(ctx, o, output, prefix, len))) return s;
    /* refuse an output Cuvil must not write before doing any work */
    return cuvil_check_output(ctx, model_path, o, output);
}

/* --output DIR/ (a trailing slash): the output goes into the folder DIR, named after the
 * model's file ("resnet18.onnx" -> DIR/resnet18.so, .a, .ir or .dot; "model" without a file);
 * with --emit c the folder is DIR itself. DIR must exist. *out is output, or buf. */
static cuvil_status resolve_output(cuvil_ctx *ctx, const char *model_path, const cuvil_options *o, const char *output,
                                   char *buf, size_t len, const char **out) {
    *out = output;
    size_t n = strlen(output);
    if (!n || output[n - 1] != '/') return CUVIL_OK;
    while (n > 1 && output[n - 1] == '/') n--;
    if (n == 1 && output[0] == '/') return CUVIL_OK;   /* "/": refused by cuvil_check_output */
    if (n >= len - 1) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--output: the path is too long");
    memcpy(buf, output, n);
    buf[n] = 0;
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--output %s: no such folder (a trailing '/' names the folder the "
                         "output goes into)", output);
    if (o->emit != CUVIL_EMIT_C) {
        const char *base = model_path ? strrchr(model_path, '/') : NULL;
        base = base ? base + 1 : model_path ? model_path : "model";
        size_t bl = strlen(base);
        const char *dot = strrchr(base, '.');
        if (dot && dot > base) bl = (size_t)(dot - base);
        if (!bl) base = "model", bl = 5;
        static const char *const ext[] = {".so", ".a", "", ".ir", ".dot"};
        if ((size_t)snprintf(buf + n, len - n, "/%.*s%s", (int)bl, base, ext[o->emit]) >= len - n)
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--output: the path is too long");
    }
    *out = buf;
    return CUVIL_OK;
}

cuvil_status cuvil_compile_file(cuvil_ctx *ctx, const char *model_path, const cuvil_options *o, const char *output) {
    cuvil_err_clear(ctx);
    if (!model_path || !output || !o) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "model path, options and output are required");
    char out_buf[PATH_MAX];
    cuvil_status s0 = resolve_output(ctx, model_path, o, output, out_buf, sizeof out_buf, &output);
    if (s0) return s0;
    const char *target;
    char prefix[128];
    cuvil_status s = check_request(ctx, o, model_path, output, &target, prefix, sizeof prefix);
    if (s) return s;
    cir_graph *g = NULL;
    cuvil_onnx_model *model = NULL;
    if ((s = cuvil_onnx_open(ctx, model_path, o, &model))) return s;
    if (!(s = cuvil_onnx_build(ctx, model, o, NULL, 0, NULL, &g))) {
        bool ranged = false;
        for (int k = 0; k < g->n_syms; k++) ranged |= g->syms[k].min < g->syms[k].max;
        /* symbolic dims: one compile with shapes as expressions of the symbols; a model with an
         * op that cannot take them yet is compiled at sample values instead */
        if (ranged && !(s = cir_graph_bind_syms(g))) s = compile_cir(ctx, g, o, model_path, model, target, prefix, output);
        /* CUVIL_NO_SAMPLES=1 (tests): report what the expressions could not do instead */
        const char *strict = getenv("CUVIL_NO_SAMPLES");
        if (ranged && (g->sym_unsupported || s == CUVIL_ERR_UNSUPPORTED) && !(strict && !strcmp(strict, "1"))) {
            cir_graph_free(g);
            g = NULL;
            cuvil_err_clear(ctx);
            ctx->status = CUVIL_OK;
            if (!(s = cuvil_onnx_build(ctx, model, o, NULL, 0, NULL, &g))) {
                g->symbolic = true;
                s = compile_cir(ctx, g, o, model_path, model, target, prefix, output);
            }
        } else if (!ranged) {
            s = compile_cir(ctx, g, o, model_path, model, target, prefix, output);
        }
    }
    /* constants computed at compile time that were equal at the symbols' upper bounds (sample
     * 0) merged there (pass_cse.c); where they differ at another value, the samples' graphs
     * differ: again without those merges */
    if (s == CUVIL_ERR_UNSUPPORTED && g && g->symbolic && g->n_cse_merged > 0) {
        cir_graph_free(g);
        g = NULL;
        if (!(s = cuvil_onnx_build(ctx, model, o, NULL, 0, NULL, &g))) {
            g->symbolic = true;
            g->cse_computed_off = true;
            s = compile_cir(ctx, g, o, model_path, model, target, prefix, output);
        }
    }
    cir_graph_free(g);
    cuvil_onnx_close(model);
    return s;
}

/* ===== The builder API ======================================================================= */
struct cuvil_graph {
    cuvil_ctx *ctx;
    cir_graph *g;
    bool compiled;
    uint8_t *ok;        /* per value id: returned by a call that succeeded (others are refused) */
    int cap_ok;
};

cuvil_ctx *cuvil_graph_ctx_(cuvil_graph *g) { return g ? g->ctx : NULL; }

/* Marks value id as usable; false when out of memory (message on ctx). */
static bool mark_ok(cuvil_graph *gr, int id) {
    if (id >= gr->cap_ok) {
        int nc = gr->cap_ok ? gr->cap_ok : 256;
        while (nc <= id) nc *= 2;
        uint8_t *p = cuvil_realloc(gr->ok, (size_t)nc);
        if (!p) {
            cuvil_err(gr->ctx, CUVIL_ERR_NOMEM, "out of memory");
            return false;
        }
        memset(p + gr->cap_ok, 0, (size_t)(nc - gr->cap_ok));
        gr->ok = p;
        gr->cap_ok = nc;
    }
    gr->ok[id] = 1;
    return true;
}

static bool is_ok(const cuvil_graph *gr, int id) { return id >= 0 && id < gr->cap_ok && gr->ok[id]; }

cuvil_status cuvil_graph_create(cuvil_ctx *ctx, const char *name, cuvil_graph **out) {
    if (!ctx || !out) return CUVIL_ERR_INVALID_ARG;
    *out = NULL;
    cuvil_err_clear(ctx);
    cuvil_graph *gr = cuvil_calloc(1, sizeof *gr);
    if (!gr) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    gr->ctx = ctx;
    gr->g = cir_graph_new(ctx);
    if (!gr->g) {
        cuvil_free(gr);
        return CUVIL_ERR_NOMEM;
    }
    const char *nm = cuvil_arena_strdup(&gr->g->arena, name && *name ? name : "graph");
    const char *path = cuvil_arena_strdup(&gr->g->arena, "(built with the cuvil_graph API)");
    if (!nm || !path) {
        cuvil_graph_destroy(gr);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    gr->g->name = nm;
    gr->g->model_path = path;
    memset(gr->g->model_sha256, '0', 64);
    *out = gr;
    return CUVIL_OK;
}

void cuvil_graph_destroy(cuvil_graph *gr) {
    if (!gr) return;
    cir_graph_free(gr->g);
    cuvil_free(gr->ok);
    cuvil_free(gr);
}

/* Every builder call starts here: a fresh message, and no calls after compiling. */
static bool usable(cuvil_graph *gr) {
    if (!gr) return false;
    cuvil_err_clear(gr->ctx);
    gr->ctx->status = CUVIL_OK;
    if (gr->compiled) {
        cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "the graph was compiled already; build a new one");
        return false;
    }
    return true;
}

/* Checks a shape given to the builder; returns the CIR dtype or CIR_UNDEF with a message. */
static cir_dtype check_value(cuvil_graph *gr, const char *what, const char *name, cuvil_dtype dtype, int ndim,
                             const int64_t *dims) {
    cir_dtype t = cir_dtype_from_public(dtype);
    if (t == CIR_UNDEF) {
        cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': element type %d (%s) is not supported", what, name,
                  (int)dtype, cuvil_dtype_name(dtype));
        return CIR_UNDEF;
    }
    if (ndim < 0 || ndim > CIR_MAX_DIMS || (ndim && !dims)) {
        cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': rank %d (0..%d, with dims)", what, name, ndim, CIR_MAX_DIMS);
        return CIR_UNDEF;
    }
    for (int i = 0; i < ndim; i++)
        if (dims[i] < 0) {
            cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': dim %d is %lld", what, name, i, (long long)dims[i]);
            return CIR_UNDEF;
        }
    char why[256];
    if (!cuvil_shape_ok(&gr->g->limits, cir_dtype_size(t), ndim, dims, why, sizeof why)) {
        cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': %s", what, name, why);
        return CIR_UNDEF;
    }
    return t;
}

int cuvil_graph_input(cuvil_graph *gr, const char *name, cuvil_dtype dtype, int ndim, const int64_t *dims,
                      const char *const *dim_names) {
    if (!usable(gr)) return -1;
    cir_graph *g = gr->g;
    name = name ? name : "";
    cir_dtype t = check_value(gr, "graph input", name, dtype, ndim, dims);
    if (t == CIR_UNDEF) return -1;
    /* the dim names first, so that a refused call registers nothing */
    int sym[CIR_MAX_DIMS], n_new = 0;
    const char *new_names[CIR_MAX_DIMS];
    int64_t new_vals[CIR_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        sym[i] = -1;
        if (!dim_names || !dim_names[i]) continue;
        int k = 0;
        while (k < g->n_syms && strcmp(g->syms[k].name, dim_names[i])) k++;
        int64_t other = k < g->n_syms ? g->syms[k].value : -1;
        for (int j = 0; j < n_new && other < 0; j++)
            if (!strcmp(new_names[j], dim_names[i])) other = new_vals[j], k = g->n_syms + j;
        if (other >= 0 && other != dims[i]) {
            cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "graph input '%s': dim %d is named '%s' and is %lld, but '%s' is %lld",
                      name, i, dim_names[i], (long long)dims[i], dim_names[i], (long long)other);
            return -1;
        }
        if (other < 0) {
            new_names[n_new] = dim_names[i];
            new_vals[n_new] = dims[i];
            k = g->n_syms + n_new++;
        }
        sym[i] = k;
    }
    if (g->n_syms + n_new > (int)(sizeof g->syms / sizeof g->syms[0])) {
        cuvil_err(gr->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': too many named dims (at most %d in a graph)", name,
                  (int)(sizeof g->syms / sizeof g->syms[0]));
        return -1;
    }
    const char *copies[CIR_MAX_DIMS];
    for (int j = 0; j < n_new; j++)
        if (!(copies[j] = cuvil_arena_strdup(&g->arena, new_names[j]))) {
            cuvil_err(gr->ctx, CUVIL_ERR_NOMEM, "out of memory");
            return -1;
        }
    int id = cir_value_add(g, name, CIR_VAL_INPUT);
    if (id < 0 || !mark_ok(gr, id) || cir_graph_add_input(g, id)) {
        if (id >= 0) gr->ok[id] = 0;
        return -1;
    }
    for (int j = 0; j < n_new; j++) {
        g->syms[g->n_syms + j].name = copies[j];
        g->syms[g->n_syms + j].value = new_vals[j];
        g->syms[g->n_syms + j].step = 1;
    }
    g->n_syms += n_new;
    cir_value *v = cir_val(g, id);
    cir_set_shape(v, t, ndim, dims);
    for (int i = 0; i < ndim; i++) v->dim_sym[i] = sym[i];
    return id;
}

int cuvil_graph_constant(cuvil_graph *gr, const char *name, cuvil_dtype dtype, int ndim, const int64_t *dims,
                         const void *data) {
    if (!usable(gr)) return -1;
    name = name ? name : "";
    cir_dtype t = check_value(gr, "constant", name, dtype, ndim, dims);
    if (t == CIR_UNDEF) return -1;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];   /* bounded by check_value */
    if (!data && n) {
        cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "constant '%s': no data", name);
        return -1;
    }
    int id = cir_const_add(gr->g, name, t, ndim, dims, data);
    if (id < 0 || !mark_ok(gr, id)) return -1;   /* a value left without data is never marked usable */
    return id;
}

static const char *arity_str(int lo, int hi, char *buf, size_t len) {
    if (hi < 0) snprintf(buf, len, "%d or more", lo);
    else if (lo == hi) snprintf(buf, len, "%d", lo);
    else snprintf(buf, len, "%d..%d", lo, hi);
    return buf;
}

cuvil_status cuvil_graph_node(cuvil_graph *gr, const char *op, const char *name, int n_in, const int *inputs, int n_out,
                              int *outputs, const char *const *out_names, int n_attrs, const cuvil_attr *attrs) {
    if (!usable(gr)) return gr ? gr->ctx->status : CUVIL_ERR_INVALID_ARG;
    cir_graph *g = gr->g;
    cuvil_ctx *ctx = gr->ctx;
    op = op ? op : "";
    name = name ? name : "";
    cir_op_kind kind = cir_op_by_name(op);
    if (kind == CIR_OP_NONE)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "node '%s': no CIR op is named '%s' (docs/OPS.md lists them)", name, op);
    const cir_opdef *def = cir_op_def(kind);
    char ia[32], oa[32];
    if (n_in < def->min_in || (def->max_in >= 0 && n_in > def->max_in) || n_out < def->min_out || n_out > def->max_out)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': %d inputs and %d outputs given; it takes %s inputs and %s outputs",
                         op, name, n_in, n_out, arity_str(def->min_in, def->max_in, ia, sizeof ia),
                         arity_str(def->min_out, def->max_out, oa, sizeof oa));
    if ((n_in && !inputs) || !outputs)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': the %s array is NULL", op, name, !outputs ? "outputs" : "inputs");
    if (n_attrs < 0 || (n_attrs && !attrs))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': %d attributes with %s array", op, name, n_attrs,
                         attrs ? "an" : "no");
    for (int i = 0; i < n_in; i++) {
        if (inputs[i] == -1 && i < def->min_in)
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': required input %d is omitted", op, name, i);
        if (inputs[i] != -1 && !is_ok(gr, inputs[i]))
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "%s '%s': input %d is value %d, which %s", op, name, i, inputs[i],
                             inputs[i] >= 0 && inputs[i] < g->n_values ? "a call that failed left behind"
                                                                        : "does not exist");
    }
    int *outs = cuvil_malloc(sizeof(int) * (size_t)n_out);
    if (!outs) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    cuvil_status s = CUVIL_OK;
    for (int i = 0; i < n_out && !s; i++) {
        char nm[600];
        const char *on = out_names && out_names[i] ? out_names[i] : (snprintf(nm, sizeof nm, "%.500s:%d", name, i), nm);
        outs[i] = cir_value_add(g, on, CIR_VAL_ACT);
        if (outs[i] < 0) s = ctx->status;
    }
    int id = s ? -1 : cir_node_add(g, kind, name, NULL, n_in, inputs, n_out, outs);
    if (!s && id < 0) s = ctx->status;
    for (int i = 0; i < n_attrs && !s; i++) s = cir_node_set_attr(g, cir_node_at(g, id), &attrs[i]);
    for (int i = 0; i < n_out && !s; i++)
        if (!mark_ok(gr, outs[i])) s = ctx->status;
    if (!s) {
        for (int i = 0; i < n_out; i++) outputs[i] = outs[i];
    } else {
        if (id >= 0) cir_node_at(g, id)->dead = true;   /* a node that failed to build takes no part */
        for (int i = 0; i < n_out; i++)
            if (outs[i] >= 0 && outs[i] < gr->cap_ok) gr->ok[outs[i]] = 0;
    }
    cuvil_free(outs);
    return s;
}

cuvil_status cuvil_graph_output(cuvil_graph *gr, int value) {
    if (!usable(gr)) return CUVIL_ERR_INVALID_ARG;
    if (!is_ok(gr, value))
        return cuvil_err(gr->ctx, CUVIL_ERR_INVALID_ARG, "graph output: value %d %s", value,
                         value >= 0 && value < gr->g->n_values ? "was left behind by a call that failed" : "does not exist");
    return cir_graph_add_output(gr->g, value);
}

cuvil_status cuvil_compile_graph(cuvil_graph *gr, const cuvil_options *o, const char *output) {
    if (!gr) return CUVIL_ERR_INVALID_ARG;
    cuvil_ctx *ctx = gr->ctx;
    if (!usable(gr)) return CUVIL_ERR_INVALID_ARG;
    if (!o || !output) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "options and output are required");
    char out_buf[PATH_MAX];
    cuvil_status s0 = resolve_output(ctx, NULL, o, output, out_buf, sizeof out_buf, &output);
    if (s0) return s0;
    if (o->n_dims)
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "options.dims: a built graph's dims are fixed when it is built");
    cir_graph *g = gr->g;
    if (!g->n_outputs) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "the graph has no outputs");
    /* what was built under the default limits must fit the ones asked for */
    if (g->n_values > o->limits.values || g->n_nodes > o->limits.nodes || g->const_bytes > o->limits.total_bytes)
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED,
                         "the graph (%d values, %d nodes, %llu bytes of constants) is over options.limits (values=%lld, "
                         "nodes=%lld, total_bytes=%llu)", g->n_values, g->n_nodes, (unsigned long long)g->const_bytes,
                         (long long)o->limits.values, (long long)o->limits.nodes,
                         (unsigned long long)o->limits.total_bytes);
    g->limits = o->limits;
    for (int i = 0; i < g->n_values; i++) {
        cir_value *v = cir_val(g, i);
        if (v->kind != CIR_VAL_ACT && v->ndim >= 0 && cir_check_shape(g, NULL, v)) return ctx->status;
    }
    const char *target;
    char prefix[128];
    cuvil_status s = check_request(ctx, o, NULL, output, &target, prefix, sizeof prefix);
    if (s) return s;
    if (strcmp(output, "-") != 0) {
        /* the folder the output goes to must exist before the graph is spent */
        char *dir = cuvil_strdup(output);
        if (!dir) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        struct stat st;
        bool ok = stat(dirname(dir), &st) == 0 && S_ISDIR(st.st_mode);
        cuvil_free(dir);
        if (!ok) return cuvil_err(ctx, CUVIL_ERR_IO, "%s: the folder it would go in does not exist", output);
    }
    gr->compiled = true;   /* the passes rewrite the graph from here on */
    if ((s = cir_verify(g, false, NULL))) return s;
    return compile_cir(ctx, g, o, NULL, NULL, target, prefix, output);
}
