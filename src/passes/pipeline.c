/* pipeline.c -- runs the passes of passes.inc in order, verifying the graph after each. */
#include "passes/passes_int.h"

#include <errno.h>
#include <stdarg.h>
#include <strings.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const cuvil_pass pipeline[] = {
#define PASS(name, lvl, req) {#name, lvl, req, cuvil_pass_##name},
#include "passes/passes.inc"
#undef PASS
};
#define N_PASSES (int)(sizeof pipeline / sizeof pipeline[0])

cir_node *cuvil_sole_reader(cir_graph *g, const cir_value *v) {
    if (!v || v->n_uses != 1 || v->output_index >= 0) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int k = 0; k < cir_node_n_reads(n); k++)
            if (cir_node_read(n, k) == v->id) return n;
    }
    return NULL;
}

bool cuvil_inputs_const(cir_graph *g, const cir_node *n) {
    for (int i = 0; i < cir_node_n_reads(n); i++)
        if (cir_node_read(n, i) >= 0 && !cir_is_const(cir_val(g, cir_node_read(n, i)))) return false;
    return true;
}

double cuvil_fold_work(cir_graph *g, const cir_node *n) {
    /* every shape is bounded (cuvil_shape_ok); doubles hold these products without overflow.
     * Units are about a nanosecond: the reference kernels (Conv, Gemm, MatMul, pools) cost about
     * one per multiply-add or window element, the generic folds (one dtype switch per element
     * read) about eight per element. */
    cir_value *y = cir_val(g, n->out[0]);
    if (!y) return 0;
    double out = (double)cir_numel(y), in = 0;
    for (int i = 0; i < n->n_in; i++) {
        cir_value *v = cir_in(g, n, i);
        if (v) in += (double)cir_numel(v);
    }
    if (n->kind == CIR_OP_CONV) {
        cir_value *w = cir_in(g, n, 1);
        double per = w && w->ndim > 0 && w->dims[0] > 0 ? (double)cir_numel(w) / (double)w->dims[0] : 1;
        return in + out * (per > 1 ? per : 1);
    }
    if (n->kind == CIR_OP_GEMM || n->kind == CIR_OP_MATMUL) {
        cir_value *a = cir_in(g, n, 0);
        bool ta = n->kind == CIR_OP_GEMM && cir_attr_int(n, "trans_a");
        double k = a && a->ndim > 0 ? (double)a->dims[ta ? 0 : a->ndim - 1] : 1;
        return in + out * (k > 1 ? k : 1);
    }
    if (n->kind == CIR_OP_MAX_POOL || n->kind == CIR_OP_AVG_POOL) {
        const int64_t *k;
        double win = 1;
        int nk = cir_attr_ints(n, "kernel_shape", &k);
        for (int i = 0; i < nk; i++) win *= (double)(k[i] > 0 ? k[i] : 1);
        return in + out * win;
    }
    double per_output = n->kind == CIR_OP_SUM || n->kind == CIR_OP_MEAN ? n->n_in
                        : n->kind == CIR_OP_RESIZE                       ? 1 << (2 * (y->ndim < 4 ? y->ndim : 4))
                                                                         : 1;
    return 8 * (in + out * per_output);
}

bool cuvil_fold_wanted(cir_graph *g, const cir_node *n) {
    if (cir_op_always_folds(n->def)) return true;
    uint64_t bytes = 0;
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(g, n->out[i]);
        if (v) bytes += cir_nbytes(v);
    }
    return cuvil_fold_work(g, n) <= (double)g->limits.fold_ops - g->fold_work &&
           bytes <= g->limits.folded_bytes && g->folded_bytes <= g->limits.folded_bytes - bytes;
}

cuvil_status cuvil_fold_node(cir_graph *g, cir_node *n) {
    CUVIL_ASSERT(n->def && n->def->fold);
    uint64_t bytes = 0;
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(g, n->out[i]);
        if (v) bytes += cir_nbytes(v);   /* each is bounded by limits.tensor_bytes: no overflow */
    }
    if (bytes > g->limits.folded_bytes || g->folded_bytes > g->limits.folded_bytes - bytes)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                            "computing it at compile time would bring the constants computed at compile time to %llu "
                            "bytes, over the limit folded_bytes=%llu (raise it with --limit folded_bytes=N)",
                            (unsigned long long)(g->folded_bytes + bytes), (unsigned long long)g->limits.folded_bytes);
    double work = cuvil_fold_work(g, n);
    if (work > (double)g->limits.fold_ops - g->fold_work)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED,
                            "computing it at compile time would bring the compile-time work to about %.3g operations, "
                            "over the limit fold_ops=%lld (raise it with --limit fold_ops=N)", g->fold_work + work,
                            (long long)g->limits.fold_ops);
    g->folded_bytes += bytes;
    g->fold_work += work;
    cuvil_status s = n->def->fold(g, n);
    if (s) return s;
    for (int i = 0; i < n->n_out; i++) {
        cir_value *v = cir_val(g, n->out[i]);
        if (v && v->kind != CIR_VAL_CONST) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "fold left output %d unset", i);
        if (v) v->producer = -1;
    }
    n->dead = true;
    return CUVIL_OK;
}

const char *cuvil_fused_note(cir_graph *g, const char *fused, const char *src_op) {
    char *f = cuvil_arena_alloc(&g->arena, strlen(fused ? fused : "") + strlen(src_op) + 2);
    if (!f) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    sprintf(f, "%s%s%s", fused ? fused : "", fused ? "+" : "", src_op);
    return f;
}

void cuvil_node_become_unary(cir_graph *g, cir_node *n, cir_op_kind kind, int x, const char *fused) {
    (void)g;
    n->kind = kind;
    n->def = cir_op_def(kind);
    n->n_in = 1;
    n->in[0] = x;
    n->n_attrs = 0;
    n->attrs = NULL;
    n->fused = fused;
}

cir_node *cuvil_mul_by_input(cir_graph *g, const int *user, const cir_value *t, const cir_value *x, int region) {
    if (!t || t->dtype != CIR_F32 || user[t->id] < 0) return NULL;
    cir_node *m = cir_node_at(g, user[t->id]);
    if (m->dead || m->kind != CIR_OP_MUL || m->n_post || m->n_in != 2 || m->region != region) return NULL;
    const int other = m->in[0] == t->id ? m->in[1] : m->in[1] == t->id ? m->in[0] : -1;
    cir_value *y = cir_out(g, m, 0);
    return other == x->id && y && y->dtype == CIR_F32 && cir_same_dims(x, y) ? m : NULL;
}

int *cuvil_single_readers(cir_graph *g) {
    int *user = cuvil_malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!user) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cir_graph_count_uses(g);
    for (int v = 0; v < g->n_values; v++) user[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) user[n->in[k]] = cir_val(g, n->in[k])->n_uses == 1 ? i : -1;
        for (int k = n->n_in; k < cir_node_n_reads(n); k++)
            if (cir_node_read(n, k) >= 0) user[cir_node_read(n, k)] = -1;
    }
    for (int v = 0; v < g->n_values; v++)
        if (cir_val(g, v)->output_index >= 0) user[v] = -1;
    return user;
}

/* ===== Replacing values ===================================================================== */
cuvil_status cuvil_rewrite_begin(cir_graph *g, cuvil_rewrite *rw) {
    memset(rw, 0, sizeof *rw);
    rw->g = g;
    rw->n_values = g->n_values;
    rw->rep = cuvil_malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!rw->rep) {
        memset(rw, 0, sizeof *rw);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++) rw->rep[v] = v;
    cir_graph_count_uses(g);
    return CUVIL_OK;
}

int cuvil_rewrite_resolve(cuvil_rewrite *rw, int v) {
    if (v < 0 || v >= rw->n_values) return v;
    int r = v;
    while (rw->rep[r] != r) r = rw->rep[r];
    while (rw->rep[v] != r) {   /* path compression */
        int next = rw->rep[v];
        rw->rep[v] = r;
        v = next;
    }
    return r;
}

void cuvil_rewrite_inputs(cuvil_rewrite *rw, cir_node *n) {
    for (int k = 0; k < n->n_in; k++) n->in[k] = cuvil_rewrite_resolve(rw, n->in[k]);
    for (int k = 0; k < n->n_post; k++)
        if (n->post[k].kind == CIR_POST_ADD) n->post[k].value = cuvil_rewrite_resolve(rw, n->post[k].value);
}

/* The live node that writes value `to`, which may instead write a graph output: none when `to`
 * is an input, a constant or a graph output itself. */
static cir_node *output_taker(cuvil_rewrite *rw, int to) {
    cir_value *t = cir_val(rw->g, to);
    if (t->kind != CIR_VAL_ACT || t->output_index >= 0 || t->producer < 0) return NULL;
    cir_node *p = cir_node_at(rw->g, t->producer);
    return p->dead ? NULL : p;
}

bool cuvil_rewrite_can_merge(cuvil_rewrite *rw, const cir_node *n, const cir_node *keep) {
    /* a size known only when the model runs is each node's own symbol: the dims differ */
    if (n->n_out != keep->n_out || n->n_rt || keep->n_rt) return false;
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        if (keep->out[k] < 0) return false;
        if (n->n_out > 1 && cir_val(rw->g, n->out[k])->output_index >= 0 && !output_taker(rw, keep->out[k])) return false;
    }
    return true;
}

/* Value `from`, which a node about to be removed made, is now `to`'s data. */
static void replace_one(cuvil_rewrite *rw, int from, int to) {
    cir_graph *g = rw->g;
    cir_value *f = cir_val(g, from);
    CUVIL_ASSERT(from < rw->n_values && to < rw->n_values);
    CUVIL_ASSERT(f->dtype == cir_val(g, to)->dtype && cir_same_dims(f, cir_val(g, to)));
    if (f->output_index < 0) {
        rw->rep[from] = to;
        return;
    }
    cir_node *p = output_taker(rw, to);
    CUVIL_ASSERT(p);   /* checked by the callers */
    /* the graph output keeps its value: to's maker writes it, and to's readers read it */
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] == to) p->out[j] = from;
    f->producer = p->id;
    cir_val(g, to)->producer = -1;
    rw->rep[to] = from;
}

bool cuvil_rewrite_replace(cuvil_rewrite *rw, cir_node *n, int to) {
    CUVIL_ASSERT(n->n_out == 1 && !n->dead);
    cir_graph *g = rw->g;
    int from = n->out[0];
    cir_value *f = cir_val(g, from);
    if (f->output_index < 0 || output_taker(rw, to)) {
        replace_one(rw, from, to);
        n->dead = true;
        rw->n_changed++;
        return true;
    }
    /* an output that an input, a constant or another output becomes: a copy into it */
    if (n->kind == CIR_OP_IDENTITY && n->n_in == 1 && n->in[0] == to) return false;
    n->kind = CIR_OP_IDENTITY;
    n->def = cir_op_def(CIR_OP_IDENTITY);
    n->src_op = "Identity";
    n->n_attrs = 0;
    n->attrs = NULL;
    n->n_in = 1;
    n->in[0] = to;
    n->n_post = 0;
    n->fused = NULL;
    rw->n_changed++;
    return true;
}

void cuvil_rewrite_merge(cuvil_rewrite *rw, cir_node *n, const cir_node *keep) {
    if (n->n_out == 1) {
        cuvil_rewrite_replace(rw, n, keep->out[0]);
        return;
    }
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) replace_one(rw, n->out[k], keep->out[k]);
    n->dead = true;
    rw->n_changed++;
}

void cuvil_rewrite_end(cuvil_rewrite *rw) {
    cir_graph *g = rw->g;
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = cir_node_at(g, i);
        if (!n->dead) cuvil_rewrite_inputs(rw, n);
    }
    for (int r = 1; r < g->n_regions; r++)   /* a branch's condition: its If's, as it now reads it */
        if (g->regions[r].cond >= 0) g->regions[r].cond = cuvil_rewrite_resolve(rw, g->regions[r].cond);
    cuvil_free(rw->rep);
    rw->rep = NULL;
    /* what no one reads now goes before the fusions count readers (a reshape left reading a
     * transpose would make it look shared) */
    if (rw->n_changed) cuvil_pass_dce(g, NULL);
    cir_graph_count_uses(g);
}

bool cuvil_pass_disabled(const cuvil_options *o, const char *name) {
    for (int i = 0; i < o->n_disabled; i++)
        if (!strcmp(o->disabled_passes[i], name)) return true;
    return false;
}

/* CUVIL_DUMP_IR: the IR after loading and after every pass that runs, as text and as DOT, and
 * the final graph as cuvil_ir.ir and cuvil_ir.dot. "1" (or true, yes, on) dumps under
 * ./cuvil-ir, any other value names the folder to dump under ("0", false, no, off or empty:
 * no dump). Each compile gets a folder of its own there (ir-<pid>-<n>, n the first free
 * number), so that nothing already there is overwritten: NN-<pass>.ir and NN-<pass>.dot,
 * created only if absent. The folder's name says nothing of the model (its names are
 * untrusted); inside the DOT they are escaped as everywhere. A debugging switch never fails a
 * compile: when the folder cannot be made or written, one warning on stderr, and no more
 * dumps for that compile. */
#define DUMP_IR_DEFAULT "cuvil-ir"

typedef struct ir_dump {
    char dir[4096];
    int n;
} ir_dump;

static bool env_word(const char *v, const char *const *words) {
    for (; *words; words++)
        if (!strcasecmp(v, *words)) return true;
    return false;
}

/* One warning, then no more dumps in this compile. */
static void dump_warn(ir_dump *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dump_warn(ir_dump *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("cuvil: warning: CUVIL_DUMP_IR: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("; the compile goes on without the IR dump\n", stderr);
    va_end(ap);
    d->dir[0] = 0;
}

static void dump_open(ir_dump *d) {
    static const char *const off[] = {"0", "false", "no", "off", NULL}, *const on[] = {"1", "true", "yes", "on", NULL};
    const char *root = getenv("CUVIL_DUMP_IR");
    d->dir[0] = 0;
    d->n = 0;
    if (!root || !*root || env_word(root, off)) return;
    if (env_word(root, on)) root = DUMP_IR_DEFAULT;
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        dump_warn(d, "cannot create the folder %s: %s", root, strerror(errno));
        return;
    }
    for (int k = 0; k < 10000; k++) {
        int len = snprintf(d->dir, sizeof d->dir, "%s/ir-%ld-%d", root, (long)getpid(), k);
        if (len < 0 || (size_t)len >= sizeof d->dir) {
            dump_warn(d, "the folder name %s is too long", root);
            return;
        }
        if (mkdir(d->dir, 0755) == 0) return;
        if (errno != EEXIST) {
            int e = errno;
            dump_warn(d, "cannot create a folder in %s: %s", root, strerror(e));
            return;
        }
    }
    dump_warn(d, "no free folder name under %s", root);
}

static void dump_write(cir_graph *g, ir_dump *d, const char *stage) {
    if (!d->dir[0]) return;
    for (int dot = 0; dot < 2; dot++) {
        char path[4200];
        if (stage)
            snprintf(path, sizeof path, "%s/%02d-%s.%s", d->dir, d->n, stage, dot ? "dot" : "ir");
        else
            snprintf(path, sizeof path, "%s/cuvil_ir.%s", d->dir, dot ? "dot" : "ir");
        cuvil_sb sb = {0};
        if (dot) cir_print_dot(g, &sb);
        else cir_print_text(g, &sb);
        if (sb.oom) {
            cuvil_sb_free(&sb);
            dump_warn(d, "out of memory printing the IR");
            return;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        bool ok = fd >= 0;
        int e = errno;
        if (ok) {
            size_t left = sb.len;
            const char *p = sb.s;
            while (ok && left) {
                ssize_t w = write(fd, p, left);
                if (w < 0 && errno == EINTR) continue;
                ok = w > 0;
                e = w == 0 ? ENOSPC : errno;
                if (ok) p += w, left -= (size_t)w;
            }
            if (close(fd) != 0 && ok) ok = false, e = errno;
        }
        cuvil_sb_free(&sb);
        if (!ok) {
            dump_warn(d, "cannot write %s: %s", path, strerror(e));
            return;
        }
    }
    d->n++;
}

cuvil_status cuvil_run_passes(cir_graph *g, const cuvil_options *o) {
    for (int i = 0; i < o->n_disabled; i++) {
        int found = -1;
        for (int j = 0; j < N_PASSES; j++)
            if (!strcmp(pipeline[j].name, o->disabled_passes[i])) found = j;
        if (found < 0) {
            cuvil_sb names = {0};
            for (int j = 0; j < N_PASSES; j++) {
                bool again = false;   /* a pass listed twice (cse) is named once */
                for (int k = 0; k < j; k++) again |= !strcmp(pipeline[k].name, pipeline[j].name);
                if (!again) cuvil_sb_printf(&names, "%s%s", j ? ", " : "", pipeline[j].name);
            }
            cuvil_status s = cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "--disable-pass %s: no such pass (passes: %s)",
                                       o->disabled_passes[i], names.s ? names.s : "");
            cuvil_sb_free(&names);
            return s;
        }
        if (pipeline[found].required)
            return cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "--disable-pass %s: this pass is required", pipeline[found].name);
    }
    if (o->dump_after && strcmp(o->dump_after, "all") && strcmp(o->dump_after, "load")) {
        bool ok = false;
        for (int j = 0; j < N_PASSES; j++) ok |= !strcmp(pipeline[j].name, o->dump_after);
        if (!ok) return cuvil_err(g->ctx, CUVIL_ERR_INVALID_ARG, "--dump-ir-after %s: no such pass", o->dump_after);
    }
    ir_dump dump;
    dump_open(&dump);
    dump_write(g, &dump, "load");
    FILE *df = o->dump_file ? o->dump_file : stderr;
    if (o->dump_after && (!strcmp(o->dump_after, "all") || !strcmp(o->dump_after, "load"))) {
        cuvil_sb sb = {0};
        cir_print_text(g, &sb);
        fprintf(df, "# IR after load\n%s", sb.s ? sb.s : "");
        cuvil_sb_free(&sb);
    }
    for (int i = 0; i < N_PASSES; i++) {
        const cuvil_pass *p = &pipeline[i];
        if ((!p->required && o->opt_level < p->opt_level) || cuvil_pass_disabled(o, p->name)) continue;
        /* (an If's branches and a loop's body bound what a pass may join: passes_int.h) */
        cir_graph_count_uses(g);
        cuvil_status s = p->run(g, o);
        if (s) return s;
        if ((s = cir_verify(g, true, p->name))) return s;
        dump_write(g, &dump, p->name);
        if (o->dump_after && (!strcmp(o->dump_after, "all") || !strcmp(o->dump_after, p->name))) {
            cuvil_sb sb = {0};
            cir_print_text(g, &sb);
            fprintf(df, "# IR after %s\n%s", p->name, sb.s ? sb.s : "");
            cuvil_sb_free(&sb);
        }
    }
    cir_graph_count_uses(g);
    dump_write(g, &dump, NULL);   /* the final graph: cuvil_ir.ir, cuvil_ir.dot */
    return CUVIL_OK;
}
