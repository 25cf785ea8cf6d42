/* dim.c -- dims as symbolic integer expressions (dim.h): the hash-consing table, the
 * canonicalising constructors, bounds, evaluation and printing.
 *
 * Bounds are computed in 128-bit arithmetic from operands whose bounds are inside
 * ±CIR_DIM_LIMIT (2^62), so no product of two of them or sum of a few overflows; a result
 * outside the limit is refused. Sums keep their terms as linear forms (struct lin) while they
 * are built, so cancellation (seq - seq) happens before anything is interned. */
#include "ir/dim.h"

#include <stdarg.h>
#include <string.h>

typedef __int128 i128;

#define LIN_CAP 128   /* terms of a sum being built, before merging equal ones */

static const cir_dim *fail(cir_dimtab *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const cir_dim *fail(cir_dimtab *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof t->why, fmt, ap);
    va_end(ap);
    return NULL;
}

static bool inside(i128 v) { return v > -(i128)CIR_DIM_LIMIT && v < (i128)CIR_DIM_LIMIT; }

static int64_t floor_div(int64_t a, int64_t b) {   /* b != 0, no INT64_MIN / -1 (bounded) */
    int64_t q = a / b;
    if ((a % b) && ((a < 0) != (b < 0))) q--;
    return q;
}
static i128 floor_div128(i128 a, i128 b) {
    i128 q = a / b;
    if ((a % b) && ((a < 0) != (b < 0))) q--;
    return q;
}
static int64_t floor_mod(int64_t a, int64_t b) { return a - b * floor_div(a, b); }
static int64_t gcd64(int64_t a, int64_t b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* ===== The table ========================================================================= */
void cir_dimtab_init(cir_dimtab *t) { memset(t, 0, sizeof *t); }

void cir_dimtab_free(cir_dimtab *t) {
    cuvil_free(t->bucket);
    cuvil_free(t->syms);
    cuvil_arena_free(&t->arena);
    memset(t, 0, sizeof *t);
}

const char *cir_dimtab_why(const cir_dimtab *t) { return t->why; }

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_of(cir_dim_kind kind, int64_t c, int n, const cir_dim *const *a, const int64_t *k) {
    uint64_t h = mix(mix(0x12345u, (uint64_t)kind), (uint64_t)c);
    for (int i = 0; i < n; i++) {
        h = mix(h, a[i]->id);
        if (k) h = mix(h, (uint64_t)k[i]);
    }
    return mix(h, (uint64_t)n);
}

static bool grow(cir_dimtab *t) {
    size_t nb = t->n_bucket ? 2 * t->n_bucket : 256;
    cir_dim **b = cuvil_calloc(nb, sizeof *b);
    if (!b) return false;
    for (size_t i = 0; i < t->n_bucket; i++) {
        for (cir_dim *e = t->bucket[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    cuvil_free(t->bucket);
    t->bucket = b;
    t->n_bucket = nb;
    return true;
}

/* The one expression of this kind and these operands (k: ADD's coefficients, else NULL),
 * with bounds [lo, hi]; a constant when the bounds meet. */
static const cir_dim *intern(cir_dimtab *t, cir_dim_kind kind, int64_t c, int n, const cir_dim *const *a,
                             const int64_t *k, int64_t lo, int64_t hi) {
    if (lo == hi && kind != CIR_DIM_CONST) return cir_dim_const(t, lo);
    int depth = 1;
    for (int i = 0; i < n; i++)
        if (a[i]->depth + 1 > depth) depth = a[i]->depth + 1;
    if (depth > CIR_DIM_MAX_DEPTH) return fail(t, "a dim expression nested deeper than %d", CIR_DIM_MAX_DEPTH);
    uint64_t h = hash_of(kind, c, n, a, k);
    if (t->n_bucket) {
        for (cir_dim *e = t->bucket[h & (t->n_bucket - 1)]; e; e = e->next) {
            if (e->hash != h || e->kind != kind || e->c != c || e->n != n) continue;
            bool same = true;
            for (int i = 0; i < n && same; i++) same = e->a[i] == a[i] && (!k || e->k[i] == k[i]);
            if (same) return e;
        }
    }
    if (t->n + 1 > t->n_bucket / 4 * 3 && !grow(t)) return fail(t, "out of memory");
    cir_dim *e = cuvil_arena_alloc(&t->arena, sizeof *e);
    const cir_dim **ops = n ? cuvil_arena_memdup(&t->arena, a, sizeof *a * (size_t)n) : NULL;
    int64_t *ks = k ? cuvil_arena_memdup(&t->arena, k, sizeof *k * (size_t)n) : NULL;
    if (!e || (n && !ops) || (k && !ks)) return fail(t, "out of memory");
    e->kind = kind;
    e->n = n;
    e->depth = depth;
    e->id = t->next_id++;
    e->c = c;
    e->lo = lo;
    e->hi = hi;
    e->a = ops;
    e->k = ks;
    e->hash = h;
    e->next = t->bucket[h & (t->n_bucket - 1)];
    t->bucket[h & (t->n_bucket - 1)] = e;
    t->n++;
    return e;
}

const cir_dim *cir_dim_const(cir_dimtab *t, int64_t v) {
    if (!inside(v)) return fail(t, "the integer %lld is beyond the dim limit of +-2^62", (long long)v);
    return intern(t, CIR_DIM_CONST, v, 0, NULL, NULL, v, v);
}

int cir_dimtab_add_sym(cir_dimtab *t, const char *name, int64_t lo, int64_t hi) {
    if (lo > hi || !inside(lo) || !inside(hi)) {
        fail(t, "symbol %.64s: the range %lld..%lld is empty or beyond +-2^62", name ? name : "", (long long)lo, (long long)hi);
        return -1;
    }
    if (t->n_syms >= CIR_DIM_MAX_SYMS) {
        fail(t, "more than %d symbols", CIR_DIM_MAX_SYMS);
        return -1;
    }
    if (t->n_syms == t->cap_syms) {
        int nc = t->cap_syms ? 2 * t->cap_syms : 16;
        cir_dimsym *s = cuvil_realloc(t->syms, sizeof *s * (size_t)nc);
        if (!s) {
            fail(t, "out of memory");
            return -1;
        }
        t->syms = s;
        t->cap_syms = nc;
    }
    int k = t->n_syms;
    cir_dimsym *s = &t->syms[k];
    s->name = cuvil_arena_strdup(&t->arena, name ? name : "");
    s->lo = lo;
    s->hi = hi;
    s->unit = 1;
    s->e = s->name ? intern(t, CIR_DIM_SYM, k, 0, NULL, NULL, lo, hi) : NULL;
    if (!s->e) {
        fail(t, "out of memory");
        return -1;
    }
    t->n_syms++;
    return k;
}

const cir_dim *cir_dim_sym(cir_dimtab *t, int k) {
    if (k < 0 || k >= t->n_syms) return fail(t, "no symbol %d", k);
    return t->syms[k].e;
}

/* ===== Canonical order ===================================================================== */
static int order(const cir_dim *x, const cir_dim *y) {
    if (x == y) return 0;
    if (x->kind != y->kind) {   /* constants last (the arguments of min and max) */
        int rx = x->kind == CIR_DIM_CONST ? 100 : (int)x->kind, ry = y->kind == CIR_DIM_CONST ? 100 : (int)y->kind;
        return rx < ry ? -1 : 1;
    }
    if (x->kind == CIR_DIM_SYM || x->kind == CIR_DIM_CONST) return x->c < y->c ? -1 : x->c > y->c;
    return x->id < y->id ? -1 : 1;
}

static void sort_dims(const cir_dim **v, int n) {   /* insertion sort: n is small */
    for (int i = 1; i < n; i++) {
        const cir_dim *e = v[i];
        int j = i;
        for (; j > 0 && order(v[j - 1], e) > 0; j--) v[j] = v[j - 1];
        v[j] = e;
    }
}

/* ===== Sums as linear forms ================================================================== */
typedef struct lin {
    i128 c;
    int n;
    const cir_dim *t[LIN_CAP];
    i128 k[LIN_CAP];
} lin;

static bool lin_term(cir_dimtab *t, lin *l, i128 k, const cir_dim *e) {
    if (!inside(k)) {
        fail(t, "a coefficient beyond the dim limit of +-2^62");
        return false;
    }
    if (!k) return true;
    for (int i = 0; i < l->n; i++)
        if (l->t[i] == e) {
            l->k[i] += k;
            return true;
        }
    if (l->n == LIN_CAP) {
        fail(t, "a dim expression of more than %d terms", LIN_CAP);
        return false;
    }
    l->t[l->n] = e;
    l->k[l->n++] = k;
    return true;
}

/* l += mult * e */
static bool lin_add(cir_dimtab *t, lin *l, const cir_dim *e, i128 mult) {
    if (!inside(mult)) {
        fail(t, "a coefficient beyond the dim limit of +-2^62");
        return false;
    }
    if (e->kind == CIR_DIM_CONST) {
        l->c += (i128)e->c * mult;
        return true;
    }
    if (e->kind != CIR_DIM_ADD) return lin_term(t, l, mult, e);
    l->c += (i128)e->c * mult;
    for (int i = 0; i < e->n; i++)
        if (!lin_term(t, l, (i128)e->k[i] * mult, e->a[i])) return false;
    return true;
}

static void lin_init(lin *l) {
    l->c = 0;
    l->n = 0;
}

/* Bounds of k * e. */
static void scaled_bounds(i128 k, const cir_dim *e, i128 *lo, i128 *hi) {
    i128 a = k * e->lo, b = k * e->hi;
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
}

/* Bounds of the merged sum l from its terms' bounds. */
static void lin_bounds(const lin *l, i128 *lo, i128 *hi) {
    *lo = *hi = l->c;
    for (int i = 0; i < l->n; i++) {
        i128 a, b;
        scaled_bounds(l->k[i], l->t[i], &a, &b);
        *lo += a;
        *hi += b;
    }
}

static i128 lcm128(i128 a, i128 b) {
    i128 x = a, y = b;
    while (y) {
        i128 r = x % y;
        x = y;
        y = r;
    }
    return a / x * b;
}

/* Bounds of the sum l tighter than its terms' bounds, from relaxations in which terms can
 * cancel: floor(x/d) lies in [(x - d + 1)/d, x/d], so with D the divisors' lcm, D*l is bounded
 * by linear forms in x itself (seq - seq // 3 >= 1, where the terms' bounds say >= -169); and
 * min(a, b) <= a, b (max >= a, b), so a term -min(a, b) is at least -a and at least -b, of
 * which the one that cancels best is taken (seq - min(seq, 4) >= 0). Leaves lo, hi as they
 * are where nothing applies. */
static bool relaxable(const cir_dim *e, i128 k, bool lower) {
    bool mn = e->kind == CIR_DIM_MIN, mx = e->kind == CIR_DIM_MAX;
    return lower ? (mn && k < 0) || (mx && k > 0) : (mn && k > 0) || (mx && k < 0);
}

/* f: a lower (upper) bound of D*l, each min/max term i with choice[i] >= 0 taken as that
 * argument. False when a coefficient would pass the limit. */
static bool relax_form(cir_dimtab *t, const lin *l, i128 D, bool lower, const int *choice, lin *f) {
    lin_init(f);
    f->c = D * l->c;
    for (int i = 0; i < l->n; i++) {
        const cir_dim *e = l->t[i];
        i128 k = l->k[i];
        bool ok;
        if (e->kind == CIR_DIM_FDIV && e->a[1]->kind == CIR_DIM_CONST) {
            i128 d = e->a[1]->c, m = D / d;
            ok = lin_add(t, f, e->a[0], k * m);
            if (lower ? k > 0 : k < 0) f->c += k * m * (1 - d);
        } else {
            ok = lin_add(t, f, choice[i] >= 0 ? e->a[choice[i]] : e, k * D);
        }
        if (!ok) return false;
    }
    return true;
}

static void relaxed_bounds(cir_dimtab *t, const lin *l, i128 *lo, i128 *hi) {
    i128 D = 1;
    bool any = false;
    for (int i = 0; i < l->n; i++) {
        const cir_dim *e = l->t[i];
        if (e->kind == CIR_DIM_FDIV && e->a[1]->kind == CIR_DIM_CONST) D = lcm128(D, e->a[1]->c), any = true;
        if (D > ((i128)1 << 20)) return;
        any |= e->kind == CIR_DIM_MIN || e->kind == CIR_DIM_MAX;
    }
    if (!any) return;
    char why[sizeof t->why];
    memcpy(why, t->why, sizeof why);
    int choice[CIR_DIM_MAX_TERMS];
    lin f;
    for (int side = 0; side < 2; side++) {
        bool lower = side == 0;
        for (int i = 0; i < l->n; i++) choice[i] = -1;
        i128 a, b;
        if (!relax_form(t, l, D, lower, choice, &f)) break;
        lin_bounds(&f, &a, &b);
        i128 best = lower ? a : b;
        /* each min/max term in turn: the argument that bounds best, the others as they are */
        for (int i = 0; i < l->n; i++) {
            if (!relaxable(l->t[i], l->k[i], lower)) continue;
            int keep = -1;
            for (int j = 0; j < l->t[i]->n; j++) {
                choice[i] = j;
                if (!relax_form(t, l, D, lower, choice, &f)) continue;
                lin_bounds(&f, &a, &b);
                if (lower ? a > best : b < best) best = lower ? a : b, keep = j;
            }
            choice[i] = keep;
        }
        if (lower) {
            i128 r = -floor_div128(-best, D);   /* ceil(best / D) */
            if (r > *lo) *lo = r;
        } else {
            i128 r = floor_div128(best, D);
            if (r < *hi) *hi = r;
        }
    }
    memcpy(t->why, why, sizeof why);
    CUVIL_ASSERT(*lo <= *hi);
}

static const cir_dim *lin_make(cir_dimtab *t, lin *l) {
    int n = 0;
    for (int i = 0; i < l->n; i++)   /* drop terms that cancelled */
        if (l->k[i]) {
            l->t[n] = l->t[i];
            l->k[n++] = l->k[i];
        }
    l->n = n;
    for (int i = 1; i < n; i++) {   /* insertion sort into the canonical order */
        const cir_dim *e = l->t[i];
        i128 k = l->k[i];
        int j = i;
        for (; j > 0 && order(l->t[j - 1], e) > 0; j--) {
            l->t[j] = l->t[j - 1];
            l->k[j] = l->k[j - 1];
        }
        l->t[j] = e;
        l->k[j] = k;
    }
    if (!inside(l->c)) return fail(t, "an integer beyond the dim limit of +-2^62");
    if (!n) return cir_dim_const(t, (int64_t)l->c);
    if (n == 1 && l->k[0] == 1 && l->c == 0) return l->t[0];
    if (n > CIR_DIM_MAX_TERMS) return fail(t, "a dim expression of more than %d terms", CIR_DIM_MAX_TERMS);
    /* the bounds of every partial sum the printed C computes: the terms in order, then c */
    i128 lo = 0, hi = 0;
    int64_t k[CIR_DIM_MAX_TERMS];
    for (int i = 0; i < n; i++) {
        i128 a, b;
        if (!inside(l->k[i])) return fail(t, "a coefficient beyond the dim limit of +-2^62");
        k[i] = (int64_t)l->k[i];
        scaled_bounds(l->k[i], l->t[i], &a, &b);
        lo += a;
        hi += b;
        if (!inside(a) || !inside(b) || !inside(lo) || !inside(hi))
            return fail(t, "a dim expression whose values may pass +-2^62");
    }
    lo += l->c;
    hi += l->c;
    if (!inside(lo) || !inside(hi)) return fail(t, "a dim expression whose values may pass +-2^62");
    relaxed_bounds(t, l, &lo, &hi);
    return intern(t, CIR_DIM_ADD, (int64_t)l->c, n, l->t, k, (int64_t)lo, (int64_t)hi);
}

const cir_dim *cir_dim_add(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    lin l;
    lin_init(&l);
    if (!lin_add(t, &l, a, 1) || !lin_add(t, &l, b, 1)) return NULL;
    return lin_make(t, &l);
}

const cir_dim *cir_dim_sub(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    lin l;
    lin_init(&l);
    if (!lin_add(t, &l, a, 1) || !lin_add(t, &l, b, -1)) return NULL;
    return lin_make(t, &l);
}

const cir_dim *cir_dim_scale(cir_dimtab *t, const cir_dim *a, int64_t k) {
    if (!a) return NULL;
    lin l;
    lin_init(&l);
    if (!lin_add(t, &l, a, k)) return NULL;
    return lin_make(t, &l);
}

const cir_dim *cir_dim_neg(cir_dimtab *t, const cir_dim *a) { return cir_dim_scale(t, a, -1); }

const cir_dim *cir_dim_add_const(cir_dimtab *t, const cir_dim *a, int64_t k) {
    return cir_dim_add(t, a, cir_dim_const(t, k));
}

/* ===== Products ============================================================================= */
static int factors(const cir_dim *e, const cir_dim **out) {
    if (e->kind == CIR_DIM_MUL) {
        memcpy(out, e->a, sizeof *out * (size_t)e->n);
        return e->n;
    }
    out[0] = e;
    return 1;
}

/* The product of the factors f[0..n) (sorted here), none a sum or constant. */
static const cir_dim *product(cir_dimtab *t, const cir_dim **f, int n) {
    if (n == 1) return f[0];
    if (n > CIR_DIM_MAX_TERMS) return fail(t, "a dim product of more than %d factors", CIR_DIM_MAX_TERMS);
    sort_dims(f, n);
    i128 lo = f[0]->lo, hi = f[0]->hi;   /* bounds of each partial product, left to right */
    for (int i = 1; i < n; i++) {
        i128 c[4] = {lo * f[i]->lo, lo * f[i]->hi, hi * f[i]->lo, hi * f[i]->hi};
        lo = hi = c[0];
        for (int j = 1; j < 4; j++) {
            if (c[j] < lo) lo = c[j];
            if (c[j] > hi) hi = c[j];
        }
        if (!inside(lo) || !inside(hi)) return fail(t, "a dim product whose values may pass +-2^62");
    }
    return intern(t, CIR_DIM_MUL, 0, n, f, NULL, (int64_t)lo, (int64_t)hi);
}

static const cir_dim *mono_mul(cir_dimtab *t, const cir_dim *x, const cir_dim *y) {
    const cir_dim *f[2 * CIR_DIM_MAX_TERMS];
    int n = factors(x, f);
    n += factors(y, f + n);
    return product(t, f, n);
}

const cir_dim *cir_dim_mul(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    if (a->kind == CIR_DIM_CONST) return cir_dim_scale(t, b, a->c);
    if (b->kind == CIR_DIM_CONST) return cir_dim_scale(t, a, b->c);
    lin la, lb, r;
    lin_init(&la);
    lin_init(&lb);
    lin_init(&r);
    if (!lin_add(t, &la, a, 1) || !lin_add(t, &lb, b, 1)) return NULL;
    if ((la.n + 1) * (lb.n + 1) > LIN_CAP) return fail(t, "a dim product of sums with too many terms");
    r.c = la.c * lb.c;
    for (int i = 0; i < la.n; i++)
        if (!lin_term(t, &r, la.k[i] * lb.c, la.t[i])) return NULL;
    for (int j = 0; j < lb.n; j++)
        if (!lin_term(t, &r, la.c * lb.k[j], lb.t[j])) return NULL;
    for (int i = 0; i < la.n; i++)
        for (int j = 0; j < lb.n; j++) {
            const cir_dim *m = mono_mul(t, la.t[i], lb.t[j]);
            if (!m || !lin_term(t, &r, la.k[i] * lb.k[j], m)) return NULL;
        }
    return lin_make(t, &r);
}

/* ===== Division and modulo ===================================================================== */
/* Whether monomial m (a term of a sum) is a multiple of monomial d: m's factors hold d's (as
 * multisets); *q gets the others' product (NULL when none are left: the quotient is 1). */
static bool mono_divides(cir_dimtab *t, const cir_dim *m, const cir_dim *d, const cir_dim **q, bool *err) {
    const cir_dim *fm[CIR_DIM_MAX_TERMS], *fd[CIR_DIM_MAX_TERMS];
    int nm = factors(m, fm), nd = factors(d, fd);
    bool used[CIR_DIM_MAX_TERMS] = {false};
    for (int j = 0; j < nd; j++) {
        int i = 0;
        while (i < nm && (used[i] || fm[i] != fd[j])) i++;
        if (i == nm) return false;
        used[i] = true;
    }
    const cir_dim *rest[CIR_DIM_MAX_TERMS];
    int nr = 0;
    for (int i = 0; i < nm; i++)
        if (!used[i]) rest[nr++] = fm[i];
    *q = nr ? product(t, rest, nr) : NULL;
    if (nr && !*q) *err = true;
    return true;
}

/* a split by divisor monomial kd*md (kd > 0; md NULL for a constant divisor): into q, the
 * quotient of the terms it divides, and r, the rest (a's constant included, for a symbolic
 * divisor). Returns false on failure. */
static bool split_divisible(cir_dimtab *t, const cir_dim *a, i128 kd, const cir_dim *md, lin *q, lin *r) {
    lin l;
    lin_init(&l);
    lin_init(q);
    lin_init(r);
    if (!lin_add(t, &l, a, 1)) return false;
    for (int i = 0; i < l.n; i++) {
        const cir_dim *rest = NULL;
        bool err = false;
        if (l.k[i] % kd == 0 && (!md || mono_divides(t, l.t[i], md, &rest, &err))) {
            if (err) return false;
            if (!md) rest = l.t[i];
            if (rest) {
                if (!lin_term(t, q, l.k[i] / kd, rest)) return false;
            } else {
                q->c += l.k[i] / kd;
            }
        } else if (!lin_term(t, r, l.k[i], l.t[i])) {
            return false;
        }
    }
    if (md) {
        r->c = l.c;
    } else {
        q->c += floor_div128(l.c, kd);
        r->c = l.c - floor_div128(l.c, kd) * kd;
    }
    return true;
}

static bool may_be_zero(const cir_dim *b) { return b->lo <= 0 && b->hi >= 0; }

/* The divisor of b as kd * md with kd > 0: b a constant (md NULL), a term, or a sum of one
 * term. False for other sums. */
static bool monomial(const cir_dim *b, i128 *kd, const cir_dim **md) {
    if (b->kind == CIR_DIM_CONST) {
        *kd = b->c;
        *md = NULL;
        return b->c > 0;
    }
    if (b->kind == CIR_DIM_ADD) {
        if (b->n != 1 || b->c != 0 || b->k[0] <= 0) return false;
        *kd = b->k[0];
        *md = b->a[0];
        return true;
    }
    *kd = 1;
    *md = b;
    return true;
}

/* The degree of a term (its factors; 0 for NULL, the constant 1) and the greater of two terms
 * in the order polynomial division takes leading terms in: degree, then the canonical order. */
static int degree(const cir_dim *m) { return !m ? 0 : m->kind == CIR_DIM_MUL ? m->n : 1; }
static bool term_after(const cir_dim *x, const cir_dim *y) {
    if (degree(x) != degree(y)) return degree(x) > degree(y);
    return x && y && order(x, y) > 0;
}

/* a / b when b, a sum of terms, divides a as a polynomial (768*batch*past + 768*batch by
 * 64*past + 64 is 12*batch): the quotient, exact, or NULL. Long division on leading terms,
 * a bounded number of steps. */
static const cir_dim *exact_quotient(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    lin n, d, q;
    lin_init(&n);
    lin_init(&d);
    lin_init(&q);
    if (!lin_add(t, &n, a, 1) || !lin_add(t, &d, b, 1) || !d.n) return NULL;
    int ld = 0;   /* b's leading term (the constant cannot lead a sum of terms) */
    for (int j = 1; j < d.n; j++)
        if (term_after(d.t[j], d.t[ld])) ld = j;
    for (int step = 0; step < 32; step++) {
        int ln = -1;
        for (int i = 0; i < n.n; i++)
            if (n.k[i] && (ln < 0 || term_after(n.t[i], n.t[ln]))) ln = i;
        if (ln < 0) return n.c ? NULL : lin_make(t, &q);   /* a constant remainder: not exact */
        const cir_dim *m = NULL;
        bool err = false;
        if (n.k[ln] % d.k[ld] || !mono_divides(t, n.t[ln], d.t[ld], &m, &err) || err) return NULL;
        i128 qk = n.k[ln] / d.k[ld];
        if (!inside(qk)) return NULL;
        if (!m) q.c += qk;
        else if (!lin_term(t, &q, qk, m)) return NULL;
        /* n -= qk * m * b */
        for (int j = 0; j < d.n; j++) {
            const cir_dim *pm = m ? mono_mul(t, m, d.t[j]) : d.t[j];
            if (!pm || !inside(qk * d.k[j]) || !lin_term(t, &n, -qk * d.k[j], pm)) return NULL;
        }
        if (d.c) {
            if (m) {
                if (!inside(qk * d.c) || !lin_term(t, &n, -qk * d.c, m)) return NULL;
            } else {
                n.c -= qk * d.c;
            }
        }
    }
    return NULL;
}

const cir_dim *cir_dim_fdiv(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    if (may_be_zero(b)) {
        if (b->kind == CIR_DIM_CONST) return fail(t, "a dim divided by 0");
        return fail(t, "a dim divided by an expression that may be 0 (its values span %lld..%lld)", (long long)b->lo,
                    (long long)b->hi);
    }
    if (b->hi < 0) return cir_dim_fdiv(t, cir_dim_neg(t, a), cir_dim_neg(t, b));   /* floor(a/b) = floor(-a/-b) */
    if (a == b) return cir_dim_const(t, 1);
    if (b->kind == CIR_DIM_CONST && b->c == 1) return a;
    i128 kd;
    const cir_dim *md;
    lin q, r;
    const cir_dim *rest;
    if (monomial(b, &kd, &md)) {
        if (!split_divisible(t, a, kd, md, &q, &r)) return NULL;
        if (!md) {   /* constant divisor: r.c in [0, kd); drop the factor common to kd and r's terms */
            if (!r.n) return lin_make(t, &q);
            int64_t g = (int64_t)kd;
            for (int i = 0; i < r.n && g > 1; i++) g = gcd64(g, (int64_t)(r.k[i] % g));
            if (g > 1) {
                for (int i = 0; i < r.n; i++) r.k[i] /= g;
                r.c /= g;   /* floor: r.c >= 0 */
                kd /= g;
            }
            rest = lin_make(t, &r);
            if (!rest) return NULL;
            const cir_dim *div;
            if (kd == 1) {
                div = rest;
            } else if (rest->kind == CIR_DIM_FDIV && rest->a[1]->kind == CIR_DIM_CONST && inside(kd * rest->a[1]->c)) {
                div = cir_dim_fdiv(t, rest->a[0], cir_dim_const(t, (int64_t)(kd * rest->a[1]->c)));
            } else if (rest->kind == CIR_DIM_ADD && rest->n == 1 && rest->k[0] == 1 && rest->a[0]->kind == CIR_DIM_FDIV &&
                       rest->a[0]->a[1]->kind == CIR_DIM_CONST && inside(kd * rest->a[0]->a[1]->c) &&
                       inside((i128)rest->c * rest->a[0]->a[1]->c)) {
                /* floor((floor(x/b) + c) / d) = floor((x + c*b) / (b*d)), b, d > 0: a conv's
                 * (H + 1) // 2 after another stays one division */
                const cir_dim *in = rest->a[0];
                int64_t b = in->a[1]->c;
                div = cir_dim_fdiv(t, cir_dim_add_const(t, in->a[0], rest->c * b), cir_dim_const(t, (int64_t)(kd * b)));
            } else {
                const cir_dim *ops[2] = {rest, cir_dim_const(t, (int64_t)kd)};
                if (!ops[1]) return NULL;
                div = intern(t, CIR_DIM_FDIV, 0, 2, ops, NULL, floor_div(rest->lo, (int64_t)kd),
                             floor_div(rest->hi, (int64_t)kd));
            }
            return cir_dim_add(t, lin_make(t, &q), div);
        }
        if (!r.n && r.c == 0) return lin_make(t, &q);
        rest = lin_make(t, &r);
    } else {
        char why[sizeof t->why];
        memcpy(why, t->why, sizeof why);
        const cir_dim *e = exact_quotient(t, a, b);   /* b a sum: a multiple of it? */
        memcpy(t->why, why, sizeof why);
        if (e) return e;
        lin_init(&q);
        rest = a;
    }
    if (!rest) return NULL;
    /* a symbolic divisor b > 0 (or a sum): floor over the corners of the bounds */
    const cir_dim *div;
    if (rest->lo >= 0 && rest->hi < b->lo) {
        div = cir_dim_const(t, 0);
    } else {
        int64_t c[4] = {floor_div(rest->lo, b->lo), floor_div(rest->lo, b->hi), floor_div(rest->hi, b->lo),
                        floor_div(rest->hi, b->hi)};
        int64_t lo = c[0], hi = c[0];
        for (int i = 1; i < 4; i++) {
            if (c[i] < lo) lo = c[i];
            if (c[i] > hi) hi = c[i];
        }
        const cir_dim *ops[2] = {rest, b};
        div = intern(t, CIR_DIM_FDIV, 0, 2, ops, NULL, lo, hi);
    }
    return cir_dim_add(t, lin_make(t, &q), div);
}

const cir_dim *cir_dim_cdiv(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    if (b->kind == CIR_DIM_CONST && b->c > 0) return cir_dim_fdiv(t, cir_dim_add_const(t, a, b->c - 1), b);
    return cir_dim_neg(t, cir_dim_fdiv(t, cir_dim_neg(t, a), b));   /* ceil(a/b) = -floor(-a/b) */
}

const cir_dim *cir_dim_mod(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    if (may_be_zero(b)) {
        if (b->kind == CIR_DIM_CONST) return fail(t, "a dim modulo 0");
        return fail(t, "a dim modulo an expression that may be 0 (its values span %lld..%lld)", (long long)b->lo,
                    (long long)b->hi);
    }
    if (b->hi < 0) return cir_dim_neg(t, cir_dim_mod(t, cir_dim_neg(t, a), cir_dim_neg(t, b)));
    if (a == b || (b->kind == CIR_DIM_CONST && b->c == 1)) return cir_dim_const(t, 0);
    i128 kd;
    const cir_dim *md;
    lin q, r;
    const cir_dim *rest = a;
    if (monomial(b, &kd, &md)) {
        if (!split_divisible(t, a, kd, md, &q, &r)) return NULL;
        if (!md) {
            if (!r.n) return cir_dim_const(t, (int64_t)r.c);
            /* (g*m + c) mod (g*d) = g * ((m + c div g) mod d) + c mod g */
            int64_t g = (int64_t)kd;
            for (int i = 0; i < r.n && g > 1; i++) g = gcd64(g, (int64_t)(r.k[i] % g));
            if (g > 1) {
                i128 c2 = r.c % g;
                for (int i = 0; i < r.n; i++) r.k[i] /= g;
                r.c /= g;
                return cir_dim_add_const(t, cir_dim_scale(t, cir_dim_mod(t, lin_make(t, &r), cir_dim_const(t, (int64_t)(kd / g))), g),
                                         (int64_t)c2);
            }
            rest = lin_make(t, &r);
            if (!rest) return NULL;
            if (rest->lo >= 0 && rest->hi < kd) return rest;
            if (rest->kind == CIR_DIM_MOD && rest->a[1]->kind == CIR_DIM_CONST && rest->a[1]->c % kd == 0)
                return cir_dim_mod(t, rest->a[0], b);
            const cir_dim *ops[2] = {rest, b};
            return intern(t, CIR_DIM_MOD, 0, 2, ops, NULL, 0, rest->lo >= 0 && rest->hi < kd - 1 ? rest->hi : (int64_t)kd - 1);
        }
        if (!r.n && r.c == 0) return cir_dim_const(t, 0);
        rest = lin_make(t, &r);
        if (!rest) return NULL;
    }
    if (rest == a && b->kind == CIR_DIM_ADD) {   /* b a sum: a multiple of it leaves 0 */
        char why[sizeof t->why];
        memcpy(why, t->why, sizeof why);
        const cir_dim *e = exact_quotient(t, a, b);
        memcpy(t->why, why, sizeof why);
        if (e) return cir_dim_const(t, 0);
    }
    if (rest->lo >= 0 && rest->hi < b->lo) return rest;
    int64_t hi = b->hi - 1;
    if (rest->lo >= 0 && rest->hi < hi) hi = rest->hi;
    const cir_dim *ops[2] = {rest, b};
    return intern(t, CIR_DIM_MOD, 0, 2, ops, NULL, 0, hi);
}

/* ===== Min and max ============================================================================ */
bool cir_dim_prove_le(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return false;
    if (a == b) return true;
    if (a->hi <= b->lo) return true;
    char why[sizeof t->why];
    memcpy(why, t->why, sizeof why);
    const cir_dim *d = cir_dim_sub(t, b, a);
    memcpy(t->why, why, sizeof why);   /* a difference that cannot be formed proves nothing */
    return d && d->lo >= 0;
}

bool cir_dim_prove_lt(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    return cir_dim_prove_le(t, cir_dim_add_const(t, a, 1), b);
}
bool cir_dim_prove_eq(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    (void)t;
    return a && a == b;   /* canonical forms: equal values, equal expressions, as far as the rules reach */
}
bool cir_dim_prove_ne(cir_dimtab *t, const cir_dim *a, const cir_dim *b) {
    return cir_dim_prove_lt(t, a, b) || cir_dim_prove_lt(t, b, a);
}

static const cir_dim *minmax(cir_dimtab *t, cir_dim_kind kind, const cir_dim *a, const cir_dim *b) {
    if (!a || !b) return NULL;
    const cir_dim *v[2 * CIR_DIM_MAX_TERMS];
    int n = 0;
    const cir_dim *src[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        if (src[s]->kind == kind) {
            for (int i = 0; i < src[s]->n; i++) v[n++] = src[s]->a[i];
        } else {
            v[n++] = src[s];
        }
    }
    bool drop[2 * CIR_DIM_MAX_TERMS] = {false};
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n && !drop[i]; j++) {
            if (i == j) continue;   /* against every other, dropped or not: the result is order-free */
            /* v[i] goes when v[j] is never worse (ties, equal values in two forms: the later
             * in the canonical order goes, whichever order the arguments came in) */
            bool j_wins = kind == CIR_DIM_MIN ? cir_dim_prove_le(t, v[j], v[i]) : cir_dim_prove_le(t, v[i], v[j]);
            if (j_wins) {
                bool tie = kind == CIR_DIM_MIN ? cir_dim_prove_le(t, v[i], v[j]) : cir_dim_prove_le(t, v[j], v[i]);
                if (!tie || order(v[j], v[i]) < 0 || (v[j] == v[i] && j < i)) drop[i] = true;
            }
        }
    }
    int m = 0;
    for (int i = 0; i < n; i++) m += !drop[i];
    if (!m) {
        /* every one dominated by another: a cycle of proofs in one direction each (the provers
         * are incomplete), so nothing is dropped but repeats */
        for (int i = 0; i < n; i++) {
            drop[i] = false;
            for (int j = 0; j < i && !drop[i]; j++) drop[i] = v[j] == v[i];
        }
    }
    m = 0;
    for (int i = 0; i < n; i++)
        if (!drop[i]) v[m++] = v[i];
    if (m == 1) return v[0];
    if (m > CIR_DIM_MAX_TERMS) return fail(t, "a dim min/max of more than %d arguments", CIR_DIM_MAX_TERMS);
    sort_dims(v, m);
    int64_t lo = v[0]->lo, hi = v[0]->hi;
    for (int i = 1; i < m; i++) {
        if (kind == CIR_DIM_MIN) {
            if (v[i]->lo < lo) lo = v[i]->lo;
            if (v[i]->hi < hi) hi = v[i]->hi;
        } else {
            if (v[i]->lo > lo) lo = v[i]->lo;
            if (v[i]->hi > hi) hi = v[i]->hi;
        }
    }
    return intern(t, kind, 0, m, v, NULL, lo, hi);
}

const cir_dim *cir_dim_min(cir_dimtab *t, const cir_dim *a, const cir_dim *b) { return minmax(t, CIR_DIM_MIN, a, b); }
const cir_dim *cir_dim_max(cir_dimtab *t, const cir_dim *a, const cir_dim *b) { return minmax(t, CIR_DIM_MAX, a, b); }

/* ===== Evaluation ============================================================================== */
bool cir_dim_eval(const cir_dim *e, const int64_t *vals, int n_vals, int64_t *out) {
    int64_t x, y, r = 0;
    switch (e->kind) {
    case CIR_DIM_CONST:
        *out = e->c;
        return true;
    case CIR_DIM_SYM:
        if (e->c >= n_vals) return false;
        *out = vals[e->c];
        return true;
    case CIR_DIM_ADD:
        r = 0;
        for (int i = 0; i < e->n; i++)
            if (!cir_dim_eval(e->a[i], vals, n_vals, &x) || __builtin_mul_overflow(x, e->k[i], &x) ||
                __builtin_add_overflow(r, x, &r))
                return false;
        if (__builtin_add_overflow(r, e->c, &r)) return false;
        *out = r;
        return true;
    case CIR_DIM_MUL:
        r = 1;
        for (int i = 0; i < e->n; i++)
            if (!cir_dim_eval(e->a[i], vals, n_vals, &x) || __builtin_mul_overflow(r, x, &r)) return false;
        *out = r;
        return true;
    case CIR_DIM_FDIV:
    case CIR_DIM_MOD:
        if (!cir_dim_eval(e->a[0], vals, n_vals, &x) || !cir_dim_eval(e->a[1], vals, n_vals, &y)) return false;
        if (y == 0 || (x == INT64_MIN && y == -1)) return false;
        *out = e->kind == CIR_DIM_FDIV ? floor_div(x, y) : floor_mod(x, y);
        return true;
    case CIR_DIM_MIN:
    case CIR_DIM_MAX:
        for (int i = 0; i < e->n; i++) {
            if (!cir_dim_eval(e->a[i], vals, n_vals, &x)) return false;
            if (!i || (e->kind == CIR_DIM_MIN ? x < r : x > r)) r = x;
        }
        *out = r;
        return true;
    }
    return false;
}

bool cir_dim_uses(const cir_dim *e, int k) {
    if (e->kind == CIR_DIM_SYM) return e->c == k;
    for (int i = 0; i < e->n; i++)
        if (cir_dim_uses(e->a[i], k)) return true;
    return false;
}

/* ===== Printing ================================================================================ */
static void print_int(cuvil_sb *o, int64_t v, bool c_syntax) {
    bool wide = c_syntax && (v > INT32_MAX || v < -(int64_t)INT32_MAX);
    cuvil_sb_printf(o, "%lld%s", (long long)v, wide ? "LL" : "");
}

/* One printer for both notations. C: every sum, product and division parenthesised, symbols
 * through sym. People (Python's notation): parentheses only around an operand that needs them
 * (`inner`: an operand of *, // or %), symbols by name. */
typedef struct style {
    bool c;
    cir_dim_sym_fn sym;
    void *user;
    const cir_dimtab *t;
} style;

static void pr(cuvil_sb *o, const cir_dim *e, const style *st, bool inner);

/* For people: k times the product m (a symbol, a product, or another factor), compactly
 * ("2*N*H"); a symbol that counts steps of its dim (cir_dimsym.unit) is the dim over its unit,
 * so 16 steps of H = 32*s print as "H/2", with the units' product reduced against k. */
static void term(cuvil_sb *o, int64_t k, const cir_dim *m, const style *st) {
    const cir_dim *f[CIR_DIM_MAX_TERMS];
    int n = m->kind == CIR_DIM_MUL ? m->n : 1;
    if (m->kind == CIR_DIM_MUL) memcpy(f, m->a, sizeof *f * (size_t)n);
    else f[0] = m;
    int64_t q = 1;
    for (int i = 0; i < n; i++) {
        int64_t u = f[i]->kind == CIR_DIM_SYM && f[i]->c < st->t->n_syms ? st->t->syms[f[i]->c].unit : 1;
        if (u > 1 && q <= CIR_DIM_LIMIT / u) q *= u;   /* units are small: never near the limit */
    }
    int64_t g = gcd64(k, q);
    k /= g;
    q /= g;
    if (k != 1) cuvil_sb_printf(o, "%lld*", (long long)k);
    for (int i = 0; i < n; i++) {
        if (i) cuvil_sb_puts(o, "*");
        if (f[i]->kind == CIR_DIM_SYM) {
            const char *name = f[i]->c < st->t->n_syms ? st->t->syms[f[i]->c].name : "";
            if (*name) cuvil_sb_safe_text(o, name, 64);
            else cuvil_sb_printf(o, "s%lld", (long long)f[i]->c);
        } else {
            pr(o, f[i], st, true);
        }
    }
    if (q != 1) cuvil_sb_printf(o, "/%lld", (long long)q);
}

static void pr(cuvil_sb *o, const cir_dim *e, const style *st, bool inner) {
    bool paren;
    switch (e->kind) {
    case CIR_DIM_CONST:
        paren = e->c < 0 && (st->c || inner);
        cuvil_sb_puts(o, paren ? "(" : "");
        print_int(o, e->c, st->c);
        cuvil_sb_puts(o, paren ? ")" : "");
        return;
    case CIR_DIM_SYM:
        if (st->c) {
            st->sym(o, (int)e->c, st->user);
            return;
        }
        term(o, 1, e, st);
        return;
    case CIR_DIM_ADD: {
        paren = st->c || inner;
        cuvil_sb_puts(o, paren ? "(" : "");
        int ix[CIR_DIM_MAX_TERMS];   /* for people: the terms of higher degree first */
        for (int i = 0; i < e->n; i++) {
            int j = i;
            for (; !st->c && j > 0 && degree(e->a[ix[j - 1]]) < degree(e->a[i]); j--) ix[j] = ix[j - 1];
            ix[j] = i;
        }
        for (int ii = 0; ii < e->n; ii++) {
            int i = ix[ii];
            int64_t k = e->k[i];
            if (ii) cuvil_sb_puts(o, k < 0 ? " - " : " + ");
            else if (k < 0) cuvil_sb_puts(o, "-");
            if (k < 0) k = -k;
            if (!st->c) {
                term(o, k, e->a[i], st);
                continue;
            }
            if (k != 1) {
                print_int(o, k, st->c);
                cuvil_sb_puts(o, " * ");
            }
            pr(o, e->a[i], st, true);
        }
        if (e->c) {
            cuvil_sb_puts(o, e->c < 0 ? " - " : " + ");
            print_int(o, e->c < 0 ? -e->c : e->c, st->c);
        }
        cuvil_sb_puts(o, paren ? ")" : "");
        return;
    }
    case CIR_DIM_MUL:
        if (!st->c) {
            term(o, 1, e, st);
            return;
        }
        cuvil_sb_puts(o, "(");
        for (int i = 0; i < e->n; i++) {
            if (i) cuvil_sb_puts(o, " * ");
            pr(o, e->a[i], st, true);
        }
        cuvil_sb_puts(o, ")");
        return;
    case CIR_DIM_FDIV:
    case CIR_DIM_MOD: {
        bool div = e->kind == CIR_DIM_FDIV;
        /* in C, the operator where its truncation is the floor, else the runtime's helper */
        bool call = st->c && !(e->a[0]->lo >= 0 && e->a[1]->lo > 0);
        paren = !call && (st->c || inner);
        cuvil_sb_puts(o, call ? (div ? "cuvil_fdiv(" : "cuvil_fmod(") : paren ? "(" : "");
        pr(o, e->a[0], st, true);
        cuvil_sb_puts(o, call ? ", " : div ? (st->c ? " / " : " // ") : " % ");
        pr(o, e->a[1], st, true);
        cuvil_sb_puts(o, call || paren ? ")" : "");
        return;
    }
    case CIR_DIM_MIN:
    case CIR_DIM_MAX: {
        const char *fn = e->kind == CIR_DIM_MIN ? (st->c ? "cuvil_imin(" : "min(") : (st->c ? "cuvil_imax(" : "max(");
        for (int i = 0; i < (st->c ? e->n - 1 : 1); i++) cuvil_sb_puts(o, fn);   /* C: nested calls of two */
        pr(o, e->a[0], st, false);
        for (int i = 1; i < e->n; i++) {
            cuvil_sb_puts(o, ", ");
            pr(o, e->a[i], st, false);
            if (st->c) cuvil_sb_puts(o, ")");
        }
        if (!st->c) cuvil_sb_puts(o, ")");
        return;
    }
    }
}

void cir_dim_print_c(cuvil_sb *o, const cir_dim *e, cir_dim_sym_fn sym, void *user) {
    style st = {.c = true, .sym = sym, .user = user};
    pr(o, e, &st, false);
}

void cir_dim_print(cuvil_sb *o, const cir_dimtab *t, const cir_dim *e) {
    if (!e) {
        cuvil_sb_puts(o, "?");
        return;
    }
    style st = {.t = t};
    pr(o, e, &st, false);
}
