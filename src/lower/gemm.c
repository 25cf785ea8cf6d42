/* gemm.c -- the lowering's kernel selection for Gemm and MatMul: the blocked GEMM on B packed
 * at compile time where B is a constant. */
#include "lower/lower_int.h"

#include <string.h>

/* Gemm and MatMul run the blocked GEMM (a one-row product streams B); a constant B shared by
 * every batch item is packed now into the NR-column panels the target's microkernel reads. */
cuvil_status lower_gemm(cir_graph *g, cir_node *n, const lower_ctx *c) {
    const cuvil_target_info *t = c->t;
    cuvil_gemm_params p;
    int64_t nirr, *offs;
    cuvil_status s = op_gemm_params(g, n, &p, &nirr, &offs);
    if (s) return s;
    cuvil_free(offs);
    cir_value *b = cir_in(g, n, 1);
    char algo[160];
    snprintf(algo, sizeof algo, "gemm %dx%d kc=%lld", t->mr, t->nr, (long long)t->kc);
    if (g->opt_level >= 1 && cir_is_const(b) && b->dtype == CIR_F32 && !nirr && (p.batch <= 1 || p.b_bstride == 0) &&
        p.N > 0 && p.K > 0) {
        p.packed_nr = t->nr;
        p.packed_kc = t->kc;
        int id;
        bool fill;
        char key[160];
        snprintf(key, sizeof key, "gemm N%lld K%lld ldb%lld t%d nr%lld kc%lld", (long long)p.N, (long long)p.K,
                 (long long)p.ldb, p.trans_b, (long long)p.packed_nr, (long long)p.packed_kc);
        if ((s = lower_packed_const(g, b, cuvil_f32_gemm_packed_b_floats(&p), key, &id, &fill))) return s;
        if (fill) cuvil_f32_gemm_pack_b(&p, b->data, cir_val(g, id)->data);
        n->low.packed = id;
        snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ", B prepacked");
    }
    n->low.note = cuvil_arena_strdup(&g->arena, algo);
    return n->low.note ? CUVIL_OK : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
}
