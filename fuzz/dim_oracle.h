/* dim_oracle.h -- the check behind fuzz_dim and test_dim: bytes are read as a small stack
 * program that builds dim expressions (ir/dim.h) over up to four symbols with byte-chosen
 * ranges, each op both through the canonicalising constructors and as a plain tree. Every
 * expression the constructors accept is then evaluated at the corners of the symbols' ranges
 * and at pseudo-random points in them, simplified (cir_dim_eval) and plainly (the tree, with
 * floor division and Python's modulo written out here): the values must agree, the plain
 * arithmetic must not overflow (the constructor promised bounds inside +-2^62), and the value
 * must lie inside the expression's bounds. Commuted operands must give the same expression
 * (the canonical form), and the printers must not fail. dim_oracle_run returns 0, or 1 after
 * printing what went wrong. */
#ifndef CUVIL_FUZZ_DIM_ORACLE_H
#define CUVIL_FUZZ_DIM_ORACLE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/dim.h"

#define DO_MAX_NODES 64
#define DO_MAX_SYMS 4

typedef struct do_node {
    int op;                 /* 0 const, 1 sym, 2.. the binary ops of do_ops */
    int l, r;               /* operand nodes */
    int64_t v;              /* const value, sym index */
    const cir_dim *e;       /* what the constructors made; NULL: refused */
} do_node;

enum { DO_CONST, DO_SYM, DO_ADD, DO_SUB, DO_MUL, DO_FDIV, DO_CDIV, DO_MOD, DO_MIN, DO_MAX, DO_NEG, DO__N };

typedef struct do_prog {
    const uint8_t *p;
    size_t n, at;
} do_prog;

static unsigned do_byte(do_prog *g) { return g->at < g->n ? g->p[g->at++] : 0; }

/* An integer: mostly small, sometimes large (to reach the limits). */
static int64_t do_int(do_prog *g) {
    unsigned b = do_byte(g);
    switch (b >> 6) {
    case 0: return (int64_t)(b & 63) - 8;
    case 1: return (int64_t)(b & 63) + 1;
    case 2: return (int64_t)(do_byte(g) | (do_byte(g) << 8)) - 1000;
    default: {
        int sh = (int)(b & 63);
        int64_t v = sh >= 62 ? ((int64_t)1 << 62) - 1 : (int64_t)1 << sh;
        return (do_byte(g) & 1) ? -v : v;
    }
    }
}

/* The plain tree's value; false when the arithmetic overflows or divides by zero. */
static bool do_eval(const do_node *nd, int i, const int64_t *vals, int64_t *out) {
    const do_node *x = &nd[i];
    int64_t a = 0, b = 0;
    if (x->op == DO_CONST) { *out = x->v; return true; }
    if (x->op == DO_SYM) { *out = vals[x->v]; return true; }
    if (!do_eval(nd, x->l, vals, &a)) return false;
    if (x->op != DO_NEG && !do_eval(nd, x->r, vals, &b)) return false;
    switch (x->op) {
    case DO_ADD: return !__builtin_add_overflow(a, b, out);
    case DO_SUB: return !__builtin_sub_overflow(a, b, out);
    case DO_MUL: return !__builtin_mul_overflow(a, b, out);
    case DO_NEG: return !__builtin_sub_overflow((int64_t)0, a, out);
    case DO_MIN: *out = a < b ? a : b; return true;
    case DO_MAX: *out = a > b ? a : b; return true;
    case DO_FDIV:
    case DO_CDIV:
    case DO_MOD: {
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        int64_t q = a / b, r = a % b;
        if (x->op == DO_FDIV) *out = q - (r && ((r < 0) != (b < 0)));
        else if (x->op == DO_CDIV) *out = q + (r && ((r < 0) == (b < 0)));
        else *out = r && ((r < 0) != (b < 0)) ? r + b : r;
        return true;
    }
    }
    return false;
}

static const cir_dim *do_build(cir_dimtab *t, int op, const cir_dim *a, const cir_dim *b) {
    switch (op) {
    case DO_ADD: return cir_dim_add(t, a, b);
    case DO_SUB: return cir_dim_sub(t, a, b);
    case DO_MUL: return cir_dim_mul(t, a, b);
    case DO_FDIV: return cir_dim_fdiv(t, a, b);
    case DO_CDIV: return cir_dim_cdiv(t, a, b);
    case DO_MOD: return cir_dim_mod(t, a, b);
    case DO_MIN: return cir_dim_min(t, a, b);
    case DO_MAX: return cir_dim_max(t, a, b);
    case DO_NEG: return cir_dim_neg(t, a);
    }
    return NULL;
}

static uint64_t do_rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void do_sym_c(cuvil_sb *o, int k, void *u) {
    (void)u;
    cuvil_sb_printf(o, "D[%d]", k);
}

static int dim_oracle_run(const uint8_t *data, size_t size) {
    do_prog g = {data, size, 0};
    cir_dimtab t;
    cir_dimtab_init(&t);
    int ns = 1 + (int)(do_byte(&g) % DO_MAX_SYMS);
    int64_t lo[DO_MAX_SYMS], hi[DO_MAX_SYMS];
    for (int k = 0; k < ns; k++) {
        unsigned b = do_byte(&g);
        lo[k] = (b & 1) ? do_int(&g) : (int64_t)(do_byte(&g) % 8);
        int64_t w = (b & 2) ? do_int(&g) : (int64_t)(do_byte(&g) % 64);
        if (w < 0) w = -w;
        if (__builtin_add_overflow(lo[k], w, &hi[k]) || hi[k] >= CIR_DIM_LIMIT) hi[k] = lo[k];
        char name[8];
        snprintf(name, sizeof name, "s%d", k);
        if (cir_dimtab_add_sym(&t, name, lo[k], hi[k]) != k) {
            cir_dimtab_free(&t);
            return 0;   /* a range the table refuses (beyond the limit): nothing to check */
        }
    }
    do_node nd[DO_MAX_NODES];
    int n = 0;
    int stack[DO_MAX_NODES], sp = 0;
    int fails = 0;
    while (g.at < g.n && n < DO_MAX_NODES) {
        unsigned op = do_byte(&g) % DO__N;
        do_node *x = &nd[n];
        memset(x, 0, sizeof *x);
        x->op = (int)op;
        if (op == DO_CONST) {
            x->v = do_int(&g);
            x->e = cir_dim_const(&t, x->v);
            if (!x->e) continue;
        } else if (op == DO_SYM) {
            x->v = do_byte(&g) % (unsigned)ns;
            x->e = cir_dim_sym(&t, (int)x->v);
        } else if (op == DO_NEG) {
            if (sp < 1) continue;
            x->l = stack[sp - 1];
            if (!nd[x->l].e) continue;
            x->e = do_build(&t, (int)op, nd[x->l].e, NULL);
            sp--;
        } else {
            if (sp < 2) continue;
            x->l = stack[sp - 2];
            x->r = stack[sp - 1];
            if (!nd[x->l].e || !nd[x->r].e) continue;
            x->e = do_build(&t, (int)op, nd[x->l].e, nd[x->r].e);
            if (x->e && (op == DO_ADD || op == DO_MUL || op == DO_MIN || op == DO_MAX)) {
                const cir_dim *y = do_build(&t, (int)op, nd[x->r].e, nd[x->l].e);
                if (y && y != x->e) {
                    cuvil_sb a = {0}, b = {0};
                    cir_dim_print(&a, &t, x->e);
                    cir_dim_print(&b, &t, y);
                    fprintf(stderr, "dim oracle: op %u is not canonical under commuting: %s vs %s\n", op,
                            a.s ? a.s : "", b.s ? b.s : "");
                    cuvil_sb_free(&a);
                    cuvil_sb_free(&b);
                    fails++;
                }
            }
            sp -= 2;
        }
        if (!x->e) continue;   /* refused: a divisor that may be 0, a bound beyond 2^62, ... */
        stack[sp++] = n++;
    }
    /* every accepted node, at the corners and at random points */
    uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)size;
    for (size_t i = 0; i < size; i++) seed = (seed ^ data[i]) * 0x100000001b3ULL;
    if (!seed) seed = 1;
    int corners = 1 << ns;
    for (int pt = 0; pt < corners + 24 && !fails; pt++) {
        int64_t vals[DO_MAX_SYMS];
        for (int k = 0; k < ns; k++) {
            if (pt < corners) vals[k] = (pt >> k) & 1 ? hi[k] : lo[k];
            else vals[k] = lo[k] + (int64_t)(do_rng(&seed) % (uint64_t)(hi[k] - lo[k] + 1));
        }
        for (int i = 0; i < n && !fails; i++) {
            int64_t want, got;
            if (!do_eval(nd, i, vals, &want)) {
                fprintf(stderr, "dim oracle: node %d: the plain arithmetic overflows though the constructor accepted it\n", i);
                fails++;
            } else if (!cir_dim_eval(nd[i].e, vals, ns, &got)) {
                fprintf(stderr, "dim oracle: node %d: cir_dim_eval fails\n", i);
                fails++;
            } else if (got != want || got < nd[i].e->lo || got > nd[i].e->hi) {
                cuvil_sb a = {0};
                cir_dim_print(&a, &t, nd[i].e);
                fprintf(stderr, "dim oracle: node %d (op %d): %s is %lld, the plain tree says %lld; bounds %lld..%lld\n", i,
                        nd[i].op, a.s ? a.s : "", (long long)got, (long long)want, (long long)nd[i].e->lo,
                        (long long)nd[i].e->hi);
                for (int k = 0; k < ns; k++)
                    fprintf(stderr, "  s%d = %lld (range %lld..%lld)\n", k, (long long)vals[k], (long long)lo[k], (long long)hi[k]);
                cuvil_sb_free(&a);
                fails++;
            }
        }
    }
    for (int i = 0; i < n; i++) {   /* the printers run on everything */
        cuvil_sb a = {0};
        cir_dim_print(&a, &t, nd[i].e);
        cir_dim_print_c(&a, nd[i].e, do_sym_c, NULL);
        cuvil_sb_free(&a);
    }
    cir_dimtab_free(&t);
    return fails ? 1 : 0;
}

#endif
