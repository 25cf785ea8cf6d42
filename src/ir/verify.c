/* verify.c -- structural checks any pass boundary can run. See cir_verify() in cir.h. */
#include "ir/cir.h"

#include <string.h>

cuvil_status cir_verify(cir_graph *g, bool shapes, const char *after_pass) {
    const char *when = after_pass ? after_pass : "load";
    uint8_t *defined = cuvil_calloc((size_t)g->n_values + 1, 1);
    int *where = cuvil_malloc(sizeof(int) * ((size_t)g->n_values + 1));   /* per value: its writer's region, -1: everywhere */
    if (!defined || !where) {
        cuvil_free(defined);
        cuvil_free(where);
        return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_values; i++) where[i] = -1;
    cuvil_status st = CUVIL_OK;
    char desc[512];
    for (int i = 0; i < g->n_values; i++)
        if (cir_val(g, i)->kind != CIR_VAL_ACT) defined[i] = 1;
    for (int i = 0; i < g->n_nodes && st == CUVIL_OK; i++) {
        cir_node *n = cir_node_at(g, i);
        if (n->dead) continue;
        if (n->n_post < 0 || n->n_post > CIR_MAX_POSTS) {
            st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: %s: an epilogue of %d steps", when,
                           cir_node_desc(n, desc, sizeof desc), n->n_post);
            break;
        }
        for (int j = 0; j < cir_node_n_reads(n) && st == CUVIL_OK; j++) {
            int v = cir_node_read(n, j);
            if (v < 0) continue;
            if (v >= g->n_values)
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: %s: input id %d out of range",
                               when, cir_node_desc(n, desc, sizeof desc), v);
            else if (!defined[v])
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL,
                               "verify after %s: %s: input '%s' is used before it is defined",
                               when, cir_node_desc(n, desc, sizeof desc), cir_val(g, v)->name);
            /* a value is seen in its writer's region and the regions inside it; an If reads its
             * branches' values, a loop its body's */
            else if (where[v] >= 0 && !cir_region_within(g, n->region, where[v]) &&
                     !((n->kind == CIR_OP_IF || n->kind == CIR_OP_LOOP) &&
                       (cir_region_within(g, where[v], n->then_region) ||
                        (n->else_region > 0 && cir_region_within(g, where[v], n->else_region)))))
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL,
                               "verify after %s: %s: input '%s' is written in region %d, which does not hold the "
                               "node's (%d)", when, cir_node_desc(n, desc, sizeof desc), cir_val(g, v)->name, where[v],
                               n->region);
        }
        if (st == CUVIL_OK && n->kind == CIR_OP_IF && n->then_region > 0 && n->then_region < g->n_regions &&
            !cir_is_const(cir_in(g, n, 0)) && g->regions[n->then_region].cond != n->in[0])
            st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: %s: its branches' condition is not its input's",
                           when, cir_node_desc(n, desc, sizeof desc));
        for (int j = 0; j < n->n_out && st == CUVIL_OK; j++) {
            int v = n->out[j];
            if (v < 0) continue;
            cir_value *val = cir_val(g, v);
            if (defined[v] && val->kind == CIR_VAL_ACT)
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: %s: output '%s' is defined twice",
                               when, cir_node_desc(n, desc, sizeof desc), val->name);
            else if (val->kind != CIR_VAL_ACT)
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL,
                               "verify after %s: %s: output '%s' is an input or constant", when,
                               cir_node_desc(n, desc, sizeof desc), val->name);
            else if (shapes && ((val->ndim < 0 && val->seq_n < 0) || val->dtype == CIR_UNDEF))
                st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: %s: output '%s' has no shape",
                               when, cir_node_desc(n, desc, sizeof desc), val->name);
            defined[v] = 1;
            where[v] = n->region;
        }
    }
    for (int i = 0; i < g->n_outputs && st == CUVIL_OK; i++)
        if (!defined[g->outputs[i]])
            st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: graph output '%s' is never defined",
                           when, cir_val(g, g->outputs[i])->name);
    for (int i = 0; i < g->n_values && st == CUVIL_OK; i++) {
        cir_value *v = cir_val(g, i);
        if (v->kind == CIR_VAL_CONST && v->ndim >= 0 && !v->data && cir_numel(v) > 0)
            st = cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "verify after %s: constant '%s' has no data", when, v->name);
    }
    cuvil_free(defined);
    cuvil_free(where);
    return st;
}
