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

/* An RNN (RNN, GRU, LSTM) with constant weights: w and r packed now, per direction, into the
 * panels its input projection and each step's product read (cuvil_f32_rnn_pack), so that the
 * run packs nothing (ddddocr's 2048-wide bidirectional LSTM repacked 40 MB a call). */
cuvil_status lower_rnn(cir_graph *g, cir_node *n, const lower_ctx *c) {
    cir_value *w = cir_in(g, n, 1), *r = cir_in(g, n, 2);
    if (g->opt_level < 1 || n->half != CIR_UNDEF || !cir_is_const(w) || !cir_is_const(r) || w->dtype != CIR_F32 ||
        r->dtype != CIR_F32)
        return CUVIL_OK;
    op_rnn a;
    cuvil_status s = op_rnn_sizes(g, n, &a);
    if (s) return s;
    const cuvil_target_info *t = c->t;
    cuvil_rnn_params p = {.cell = (int)cir_attr_int(n, "cell"), .dirs = a.dirs, .input = a.input, .hidden = a.hidden};
    char key[160];
    snprintf(key, sizeof key, "rnn r%d cell%d dirs%d I%lld H%lld nr%d kc%lld", r->id, p.cell, p.dirs, (long long)p.input,
             (long long)p.hidden, t->nr, (long long)t->kc);
    const size_t nf = cuvil_f32_rnn_packed_floats(&p, t->nr);
    if (!lower_pack_fits(g, nf, 0)) return CUVIL_OK;   /* (over limits.packed_bytes: the kernel packs r per call) */
    int id;
    bool fill;
    if ((s = lower_packed_const(g, w, nf, key, &id, &fill))) return s;
    if (fill) cuvil_f32_rnn_pack(&p, w->data, r->data, t->nr, t->kc, cir_val(g, id)->data);
    n->low.packed = id;
    char note[96];
    snprintf(note, sizeof note, "weights prepacked (nr=%d kc=%lld)", t->nr, (long long)t->kc);
    n->low.note = cuvil_arena_strdup(&g->arena, note);
    return n->low.note ? CUVIL_OK : cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
}
