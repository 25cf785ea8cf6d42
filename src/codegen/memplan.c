/* memplan.c -- storage for every value: caller buffers for graph inputs/outputs, shared bytes
 * for alias ops, and one activation arena laid out from lifetimes (greedy by size, as
 * TFLite's and onnx2c's planners), verified before codegen. See cg_plan_memory(). */
#include "codegen/codegen_int.h"
#include "frontend/onnx/ops/ops_int.h"

#include <string.h>

#define ALIGN 64

typedef struct interval {
    int value;
    int first, last;      /* node indices, inclusive */
    size_t size, offset;
} interval;

static int by_size_desc(const void *a, const void *b) {
    const interval *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->first - y->first;   /* deterministic */
}

static bool overlap_time(const interval *a, const interval *b) { return a->first <= b->last && b->first <= a->last; }
static bool overlap_bytes(const interval *a, const interval *b) {
    return a->offset < b->offset + b->size && b->offset < a->offset + a->size;
}

cuvil_status cg_plan_memory(cir_graph *g, cg_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int nv = g->n_values, nn = g->n_nodes;
    plan->loc = calloc((size_t)nv + 1, sizeof *plan->loc);
    plan->aliased = calloc((size_t)nn + 1, sizeof *plan->aliased);
    int *root = malloc(sizeof(int) * ((size_t)nv + 1));
    int *first = malloc(sizeof(int) * ((size_t)nv + 1)), *last = malloc(sizeof(int) * ((size_t)nv + 1));
    interval *iv = calloc((size_t)nv + 1, sizeof *iv);
    cuvil_status st = CUVIL_OK;
    if (!plan->loc || !plan->aliased || !root || !first || !last || !iv) {
        st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory planning memory");
        goto done;
    }
    for (int v = 0; v < nv; v++) {
        root[v] = v;
        first[v] = -1;
        last[v] = -1;
    }
    /* alias ops share their input's bytes unless their output is a caller's buffer */
    for (int i = 0; i < nn; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead || !(n->def->flags & CIR_OP_ALIAS)) continue;
        cir_value *y = cir_out(g, n, 0);
        if (y->output_index >= 0) continue;
        plan->aliased[i] = true;
        root[y->id] = root[n->in[0]];
    }
    /* lifetimes of roots: from the producing node to the last use of any alias */
    for (int i = 0; i < nn; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_out; j++) {
            int v = n->out[j];
            if (v < 0) continue;
            int r = root[v];
            if (first[r] < 0) first[r] = i;
            if (last[r] < i) last[r] = i;
        }
        for (int j = 0; j < n->n_in + 1; j++) {
            int v = j < n->n_in ? n->in[j] : n->residual;
            if (v < 0) continue;
            int r = root[v];
            if (last[r] < i) last[r] = i;
        }
    }
    int ni = 0;
    for (int v = 0; v < nv; v++) {
        cir_value *val = &g->values[v];
        if (val->kind != CIR_VAL_ACT || root[v] != v || val->output_index >= 0 || first[v] < 0) continue;
        iv[ni].value = v;
        iv[ni].first = first[v];
        iv[ni].last = last[v];
        iv[ni].size = cuvil_align_up(cir_nbytes(val) ? cir_nbytes(val) : 1, ALIGN);
        ni++;
    }
    qsort(iv, (size_t)ni, sizeof *iv, by_size_desc);
    /* greedy: lowest offset that fits between already-placed intervals live at the same time */
    interval **live = malloc(sizeof(interval *) * ((size_t)ni + 1));
    if (!live) {
        st = cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory planning memory");
        goto done;
    }
    size_t arena = 0;
    for (int i = 0; i < ni; i++) {
        int nl = 0;
        for (int j = 0; j < i; j++)
            if (overlap_time(&iv[i], &iv[j])) live[nl++] = &iv[j];
        /* sort the conflicting ones by offset (insertion sort: lists are short) */
        for (int a = 1; a < nl; a++)
            for (int b = a; b > 0 && live[b - 1]->offset > live[b]->offset; b--) {
                interval *t = live[b];
                live[b] = live[b - 1];
                live[b - 1] = t;
            }
        size_t off = 0;
        for (int j = 0; j < nl; j++) {
            if (live[j]->offset >= off + iv[i].size) break;
            if (live[j]->offset + live[j]->size > off) off = live[j]->offset + live[j]->size;
        }
        iv[i].offset = off;
        if (off + iv[i].size > arena) arena = off + iv[i].size;
    }
    free(live);
    /* verify the plan: no two values live at the same time share a byte */
    for (int i = 0; i < ni && !st; i++)
        for (int j = i + 1; j < ni; j++)
            if (overlap_time(&iv[i], &iv[j]) && overlap_bytes(&iv[i], &iv[j])) {
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "memory plan: '%s' and '%s' overlap",
                               g->values[iv[i].value].name, g->values[iv[j].value].name);
                break;
            }
    plan->arena_bytes = arena;
    for (int i = 0; i < ni; i++) plan->loc[iv[i].value] = (cg_loc){CG_LOC_ARENA, (int64_t)iv[i].offset};
    for (int i = 0; i < g->n_inputs; i++) plan->loc[g->inputs[i]] = (cg_loc){CG_LOC_INPUT, i};
    for (int v = 0; v < nv; v++) {
        cir_value *val = &g->values[v];
        if (val->kind == CIR_VAL_CONST) plan->loc[v] = (cg_loc){CG_LOC_CONST, v};
        else if (val->kind == CIR_VAL_ACT && val->output_index >= 0) plan->loc[v] = (cg_loc){CG_LOC_OUTPUT, val->output_index};
    }
    for (int v = 0; v < nv; v++)
        if (root[v] != v) plan->loc[v] = plan->loc[root[v]];
done:
    free(root);
    free(first);
    free(last);
    free(iv);
    if (st) cg_plan_free(plan);
    return st;
}

void cg_plan_free(cg_plan *plan) {
    free(plan->loc);
    free(plan->aliased);
    memset(plan, 0, sizeof *plan);
}
