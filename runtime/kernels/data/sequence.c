/*
 * sequence.c -- sequences of tensors as one block (cuvil_seq_params, cuvil_rt.h): the
 * header of dims, then a slot per element. Every op copies what it keeps into its output's
 * block (blocks may differ in slot size: a sequence's slot has room for its own elements'
 * bounds), so a sequence never points into another value's memory.
 */
#include <string.h>

#include "../rt_int.h"

static int64_t elem_bytes(const cuvil_seq_params *p, const void *S, int64_t i) {
    const int64_t *d = (const int64_t *)S + 1 + i * p->rank;
    int64_t n = p->esize;
    for (int k = 0; k < p->rank; k++) n *= d[k];
    return n;
}

static const unsigned char *slot_of(const cuvil_seq_params *p, const void *S, int64_t i) {
    return (const unsigned char *)S + p->hdr + i * p->slot;
}

/* O's element j = S's element i (their dims and bytes) */
static void copy_elem(const cuvil_seq_params *pi, const void *S, int64_t i, const cuvil_seq_params *po, void *O, int64_t j) {
    memcpy((int64_t *)O + 1 + j * po->rank, (const int64_t *)S + 1 + i * pi->rank, sizeof(int64_t) * (size_t)pi->rank);
    int64_t nb = elem_bytes(pi, S, i);
    if (nb) memmove((unsigned char *)O + po->hdr + j * po->slot, slot_of(pi, S, i), (size_t)nb);
}

/* The position (pos_t 0: dflt) made non-negative; -1 when outside lo..hi (before that). */
static int64_t position(int pos_t, const void *pos, int64_t dflt, int64_t n, int64_t hi) {
    if (!pos_t) return dflt;
    int64_t v = pos_t == CUVIL_T_I32 ? *(const int32_t *)pos : *(const int64_t *)pos;
    if (v < -n || v > hi) return -1;
    return v < 0 ? v + n : v;
}

void cuvil_seq_put(const cuvil_seq_params *p, void *O, int64_t n, int64_t i, const void *x, const int64_t *xd) {
    ((int64_t *)O)[0] = n;
    memcpy((int64_t *)O + 1 + i * p->rank, xd, sizeof(int64_t) * (size_t)p->rank);
    int64_t nb = elem_bytes(p, O, i);
    if (nb) memcpy((unsigned char *)O + p->hdr + i * p->slot, x, (size_t)nb);
}

int cuvil_seq_insert(const cuvil_seq_params *pi, const void *S, const cuvil_seq_params *po, void *O, const void *x,
                     const int64_t *xd, int pos_t, const void *pos) {
    int64_t n = ((const int64_t *)S)[0], at = position(pos_t, pos, n, n, n);
    if (at < 0 || n + 1 > po->cap) return 1;
    /* from the end: O may be S (no: distinct values), but slots may grow; copy back to front */
    for (int64_t i = n - 1; i >= at; i--) copy_elem(pi, S, i, po, O, i + 1);
    for (int64_t i = 0; i < at; i++) copy_elem(pi, S, i, po, O, i);
    cuvil_seq_put(po, O, n + 1, at, x, xd);
    return 0;
}

int cuvil_seq_erase(const cuvil_seq_params *pi, const void *S, const cuvil_seq_params *po, void *O, int pos_t,
                    const void *pos) {
    int64_t n = ((const int64_t *)S)[0], at = n ? position(pos_t, pos, n - 1, n, n - 1) : -1;
    if (at < 0) return 1;
    for (int64_t i = 0, j = 0; i < n; i++)
        if (i != at) copy_elem(pi, S, i, po, O, j++);
    ((int64_t *)O)[0] = n - 1;
    return 0;
}

int cuvil_seq_at(const cuvil_seq_params *p, const void *S, int pos_t, const void *pos, void *y, int64_t *yd,
                 const int64_t *ycap) {
    int64_t n = ((const int64_t *)S)[0], at = n ? position(pos_t, pos, 0, n, n - 1) : -1;
    if (at < 0 || !pos_t) return 1;
    memcpy(yd, (const int64_t *)S + 1 + at * p->rank, sizeof(int64_t) * (size_t)p->rank);
    for (int k = 0; k < p->rank; k++)
        if (yd[k] > ycap[k]) return 1;   /* over the room planned for the output */
    int64_t nb = elem_bytes(p, S, at);
    if (nb) memcpy(y, slot_of(p, S, at), (size_t)nb);
    return 0;
}

int cuvil_seq_copy(const cuvil_seq_params *pi, const void *S, const cuvil_seq_params *po, void *O) {
    int64_t n = ((const int64_t *)S)[0];
    if (n < 0 || n > po->cap || (n && pi->rank != po->rank)) return 1;   /* (an empty one: any rank) */
    for (int64_t i = 0; i < n; i++)
        if (elem_bytes(pi, S, i) > po->slot) return 1;
    for (int64_t i = 0; i < n; i++) copy_elem(pi, S, i, po, O, i);
    ((int64_t *)O)[0] = n;
    return 0;
}

int cuvil_seq_join(const cuvil_seq_params *pa, const void *A, const cuvil_seq_params *pb, const void *B,
                   const cuvil_seq_params *po, void *O) {
    int64_t na = ((const int64_t *)A)[0], nb = ((const int64_t *)B)[0];
    if (na < 0 || nb < 0 || na > po->cap || nb > po->cap - na || (na && pa->rank != po->rank) || (nb && pb->rank != po->rank))
        return 1;
    for (int64_t i = 0; i < na; i++)
        if (elem_bytes(pa, A, i) > po->slot) return 1;
    for (int64_t i = 0; i < nb; i++)
        if (elem_bytes(pb, B, i) > po->slot) return 1;
    for (int64_t i = 0; i < na; i++) copy_elem(pa, A, i, po, O, i);
    for (int64_t i = 0; i < nb; i++) copy_elem(pb, B, i, po, O, na + i);
    ((int64_t *)O)[0] = na + nb;
    return 0;
}

/* Piece i's length: lens[i], or split's (type split_t) when lens is NULL. */
static int64_t split_len(const int64_t *lens, int split_t, const void *split, int64_t i) {
    return lens ? lens[i] : split_t == CUVIL_T_I32 ? ((const int32_t *)split)[i] : ((const int64_t *)split)[i];
}

int cuvil_seq_split(const cuvil_seq_params *po, void *O, const void *x, const int64_t *xd, int r, int axis, int64_t n,
                    const int64_t *lens, int split_t, const void *split, int drop) {
    int64_t outer = 1, inner = po->esize, total = 0;
    for (int k = 0; k < axis; k++) outer *= xd[k];
    for (int k = axis + 1; k < r; k++) inner *= xd[k];
    if (n > po->cap) return 1;
    for (int64_t i = 0; i < n; i++) {   /* the lengths first: all checked before a byte moves */
        int64_t l = split_len(lens, split_t, split, i);
        if (l < 0 || l > xd[axis] - total) return 1;
        total += l;
    }
    if (total != xd[axis]) return 1;
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t l = split_len(lens, split_t, split, i);
        int64_t *d = (int64_t *)O + 1 + i * po->rank;
        for (int k = 0, o = 0; k < r; k++) {
            if (k == axis && drop) continue;
            d[o++] = k == axis ? l : xd[k];
        }
        unsigned char *dst = (unsigned char *)O + po->hdr + i * po->slot;
        for (int64_t b = 0; b < outer; b++)
            if (l) memcpy(dst + b * l * inner, (const unsigned char *)x + (b * xd[axis] + off) * inner, (size_t)(l * inner));
        off += l;
    }
    ((int64_t *)O)[0] = n;
    return 0;
}

int cuvil_seq_concat(const cuvil_seq_params *p, const void *S, int axis, int stack, void *y, int64_t *yd,
                     const int64_t *ycap) {
    int64_t n = ((const int64_t *)S)[0];
    if (n < 1) return 1;
    const int64_t *d0 = (const int64_t *)S + 1;
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {   /* the dims other than the axis agree */
        const int64_t *d = d0 + i * p->rank;
        for (int k = 0; k < p->rank; k++)
            if ((stack || k != axis) && d[k] != d0[k]) return 1;
        total += stack ? 1 : d[axis];
    }
    int64_t outer = 1, inner = p->esize;
    for (int k = 0; k < axis; k++) outer *= d0[k];
    for (int k = stack ? axis : axis + 1; k < p->rank; k++) inner *= d0[k];
    for (int k = 0, o = 0; k < p->rank + stack; k++) {
        if (stack && k == axis) {
            yd[o++] = n;
            continue;
        }
        int src = stack && k > axis ? k - 1 : k;
        yd[o++] = !stack && k == axis ? total : d0[src];
    }
    for (int k = 0; k < p->rank + stack; k++)
        if (yd[k] > ycap[k]) return 1;   /* over the room planned for the output */
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t l = stack ? 1 : (d0 + i * p->rank)[axis];
        const unsigned char *src = slot_of(p, S, i);
        for (int64_t b = 0; b < outer; b++)
            if (l) memcpy((unsigned char *)y + (b * total + off) * inner, src + b * l * inner, (size_t)(l * inner));
        off += l;
    }
    return 0;
}
