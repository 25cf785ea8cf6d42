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
        default: ptrs[i] = out[r->index]; break;
        }
    }
}

void cuvil_concat(int64_t outer, int n_in, const int64_t *nb_chunk, const void *const *ins,
                  void *y) {
    int64_t row = 0;
    for (int i = 0; i < n_in; i++) row += nb_chunk[i];
    int64_t off = 0;
    for (int i = 0; i < n_in; i++) {
        const char *src = (const char *)ins[i];
        char *dst = (char *)y + off;
        const size_t nb = (size_t)nb_chunk[i];
        if (nb > 0)
            for (int64_t r = 0; r < outer; r++) memcpy(dst + r * row, src + r * (int64_t)nb, nb);
        off += nb_chunk[i];
    }
}

void cuvil_split(int64_t outer, int n_out, const int64_t *nb_chunk, const void *x,
                 void *const *outs) {
    int64_t row = 0;
    for (int i = 0; i < n_out; i++) row += nb_chunk[i];
    int64_t off = 0;
    for (int i = 0; i < n_out; i++) {
        const char *src = (const char *)x + off;
        char *dst = (char *)outs[i];
        const size_t nb = (size_t)nb_chunk[i];
        if (nb > 0)
            for (int64_t r = 0; r < outer; r++) memcpy(dst + r * (int64_t)nb, src + r * row, nb);
        off += nb_chunk[i];
    }
}
