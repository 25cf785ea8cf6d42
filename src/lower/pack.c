/* pack.c -- the lowering's weight packing: constants in a kernel's own layout, made once per
 * weight and layout and counted against limits.packed_bytes. */
#include "lower/lower_int.h"

#include <string.h>

/* A float32 constant of nf elements for n's weights w in a kernel's layout ("<w>.packed"),
 * counted with the model's own constants against limits.total_bytes (cir_const_add). key:
 * everything besides w's bytes that the layout depends on. Its id in *id. When this graph
 * already packed w with the same key and size (one weight read by many nodes: a shared
 * embedding, a weight-tied layer), that constant is returned and *fill is false: a weight is
 * packed once per layout, not once per reader (a 1 MiB weight read by 400 MatMuls was packed
 * 400 times). Otherwise the caller fills the zeroed data. */
cuvil_status lower_packed_const(cir_graph *g, const cir_value *w, size_t nf, const char *key, int *id, bool *fill) {
    /* the key text names the layout exactly (no hash collision can share two layouts) */
    char ikey[1024];
    if ((size_t)snprintf(ikey, sizeof ikey, "%d|%zu|%s", w->id, nf, key) >= sizeof ikey)
        return cuvil_err(g->ctx, CUVIL_ERR_INTERNAL, "lowering: a packing key of %zu bytes", strlen(key));
    int have = cuvil_map_get(&g->pack_index, ikey);
    if (have >= 0) {
        *id = have;
        *fill = false;
        return CUVIL_OK;
    }
    const uint64_t nb = (uint64_t)nf * sizeof(float);
    if (nb > g->packed_budget || g->packed_bytes > g->packed_budget - nb)
        return cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                         "weight '%s' in the layout of one more kernel (%llu bytes) brings the weights packed for the "
                         "kernels over the limit packed_bytes=%llu (by default twice the model's constants plus 64 MiB; "
                         "raise it with --limit packed_bytes=N)", w->name, (unsigned long long)nb,
                         (unsigned long long)g->packed_budget);
    g->packed_bytes += nb;
    char name[600];
    snprintf(name, sizeof name, "%.500s.packed", w->name);
    int64_t dims = (int64_t)nf;
    *fill = true;
    *id = cir_const_add(g, name, CIR_F32, 1, &dims, NULL);
    if (*id < 0) return g->ctx->status;
    const char *k = cuvil_arena_strdup(&g->arena, ikey);
    if (!k || !cuvil_map_put(&g->pack_index, k, *id)) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
    return CUVIL_OK;
}

/* Node n leaves its packed weights for another layout: where no other node reads them, their
 * bytes no longer count against limits.packed_bytes (the generated code holds only the
 * constants it reads). */
void lower_release_pack(cir_graph *g, cir_node *n) {
    if (n->low.packed < 0) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const cir_node *o = cir_node_at(g, i);
        if (o != n && !o->dead && o->low.packed == n->low.packed) return;
    }
    const uint64_t nb = cir_nbytes(cir_val(g, n->low.packed));
    g->packed_bytes -= nb < g->packed_bytes ? nb : g->packed_bytes;
    n->low.packed = -1;
}

/* Whether nf more packed floats and `keep` bytes after them stay within limits.packed_bytes
 * (lower_packed_const's check). */
bool lower_pack_fits(const cir_graph *g, size_t nf, uint64_t keep) {
    const uint64_t nb = (uint64_t)nf * sizeof(float);
    return nb <= g->packed_budget && keep <= g->packed_budget - nb && g->packed_bytes <= g->packed_budget - nb - keep;
}

/* The key of lower_packed_const for a conv's weights: the fields of p the packing reads (and the
 * map's size, which picks some of them; not the batch). */
void lower_conv_pack_key(const cuvil_conv2d_params *p, char *key, size_t n) {
    snprintf(key, n, "conv C%lld M%lld g%lld k%lldx%lld s%lldx%lld d%lldx%lld p%lld,%lld H%lldx%lld O%lldx%lld "
             "a%lld l%lld mr%lld kc%lld", (long long)p->C, (long long)p->M, (long long)p->group, (long long)p->KH,
             (long long)p->KW, (long long)p->stride_h, (long long)p->stride_w, (long long)p->dil_h,
             (long long)p->dil_w, (long long)p->pad_t, (long long)p->pad_l, (long long)p->H, (long long)p->W,
             (long long)p->OH, (long long)p->OW, (long long)p->algo, (long long)p->layout, (long long)p->packed_mr,
             (long long)p->packed_kc);
}
