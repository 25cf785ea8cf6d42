/*
 * concat.c -- Concat and Split as row copies: the output (input) is `outer` rows, each the
 * concatenation of one nb_chunk[i]-byte piece per input (output).
 */
#include <string.h>

#include "../rt_int.h"

void cuvil_resolve_refs(const cuvil_ref *refs, int64_t n, unsigned char *arena, const unsigned char *weights,
                        const void *const *in, void *const *out, void **ptrs) {
    for (int64_t i = 0; i < n; i++) {
        const cuvil_ref *r = &refs[i];
        switch (r->kind) {
        case CUVIL_REF_ARENA: ptrs[i] = arena + r->index; break;
        case CUVIL_REF_WEIGHTS: ptrs[i] = (void *)(uintptr_t)(weights + r->index); break;
        case CUVIL_REF_INPUT: ptrs[i] = (void *)(uintptr_t)in[r->index]; break;
        default: ptrs[i] = (unsigned char *)out[r->index] + r->offset; break;
        }
    }
}

/* Concat and Split copy between a packed side (piece i of row r at bufs[i] + r nb[i]) and a
 * joined one (row r at joined + r row, piece i from its offset in the row). The joined side's
 * bytes are split over the threads: on two threads a Concat of two 64 x 40x40 maps the
 * convs before it had each split over both cores ran on the caller alone, reading half from
 * the other core's cache (YOLO-style, AVX2, bench/profile_layers.py: 0.012 ms on one thread,
 * 0.021 on two). */
typedef struct concat_job {
    int64_t outer, row;
    int n;
    const int64_t *nb;
    void *const *bufs;
    char *joined;
    int to_joined;   /* Concat: the pieces into the joined rows; Split: out of them */
} concat_job;

/* Joined bytes [b0, b1). */
static void concat_bytes(void *vctx, int64_t b0, int64_t b1, int tid) {
    const concat_job *j = vctx;
    (void)tid;
    for (int64_t r = b0 / j->row; r < j->outer && r * j->row < b1; r++) {
        int64_t off = r * j->row;
        for (int i = 0; i < j->n; off += j->nb[i], i++) {
            const int64_t lo = off > b0 ? off : b0, hi = off + j->nb[i] < b1 ? off + j->nb[i] : b1;
            if (lo >= hi) continue;
            char *piece = (char *)j->bufs[i] + r * j->nb[i] + (lo - off);
            if (j->to_joined)
                memcpy(j->joined + lo, piece, (size_t)(hi - lo));
            else
                memcpy(piece, j->joined + lo, (size_t)(hi - lo));
        }
    }
}

static void concat_run(int64_t outer, int n, const int64_t *nb, void *const *bufs, char *joined, int to_joined) {
    int64_t row = 0;
    for (int i = 0; i < n; i++) row += nb[i];
    if (outer <= 0 || row <= 0) return;
    concat_job j = {outer, row, n, nb, bufs, joined, to_joined};
    /* (over the threads from 64 KB, two shares of 32 KB, in whole cache lines) */
    cuvil_parallel_range(outer * row, 32768, 64, concat_bytes, &j);
}

void cuvil_concat(int64_t outer, int n_in, const int64_t *nb_chunk, const void *const *ins,
                  void *y) {
    concat_run(outer, n_in, nb_chunk, (void *const *)(uintptr_t)ins, (char *)y, 1);
}

void cuvil_split(int64_t outer, int n_out, const int64_t *nb_chunk, const void *x,
                 void *const *outs) {
    concat_run(outer, n_out, nb_chunk, outs, (char *)(uintptr_t)x, 0);
}
