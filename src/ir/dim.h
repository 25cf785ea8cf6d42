/*
 * dim.h -- dims as symbolic integer expressions.
 *
 * A dim of CIR is an expression over symbols (`batch`, `seq`, a data-dependent count), each
 * with a declared range [lo, hi]: integers, symbols, + - *, floor division, modulo (the
 * divisor's sign, as Python's), min and max. Ceiling division is written with floor division.
 * Expressions are immutable and hash-consed in a table (cir_dimtab): every constructor
 * simplifies to one canonical form, so two expressions built the same way, or built ways
 * that the rules below make the same, are the same pointer, and structural equality is ==.
 *
 * The canonical form:
 *  - a sum is a constant plus terms with non-zero integer coefficients, each term a product
 *    of factors that are neither sums nor constants (products distribute over sums);
 *  - floor((b*X + Y) / b) = X + floor(Y / b), and common factors of divisor and terms go
 *    (floor((2x + 1) / 4) = floor(x / 2)); nested divisions by constants merge; modulo drops
 *    the terms its divisor divides;
 *  - min/max drop the arguments their difference proves dominated: min(seq, seq + 1) = seq;
 *  - any expression whose bounds meet is that constant.
 * Every expression carries bounds [lo, hi] from its symbols' ranges (interval analysis,
 * exact for a sum of distinct symbols, otherwise a safe over-approximation). The bounds of
 * every expression and of every partial result the printed C computes stay inside
 * ±CIR_DIM_LIMIT, so the C the codegen prints cannot overflow int64 for any values of the
 * symbols in their ranges; a constructor that cannot keep that promise, or would divide by
 * something that may be zero, returns NULL and says why (cir_dimtab_why). Constructors take
 * NULL operands and return NULL, so a chain of them is checked once at its end.
 *
 *     cir_dimtab t; cir_dimtab_init(&t);
 *     const cir_dim *seq = cir_dim_sym(&t, cir_dimtab_add_sym(&t, "seq", 1, 512));
 *     const cir_dim *third = cir_dim_fdiv(&t, seq, cir_dim_const(&t, 3));   // seq // 3
 *     int64_t v; cir_dim_eval(third, (int64_t[]){ 100 }, &v);                 // 33
 *     cir_dimtab_free(&t);
 */
#ifndef CUVIL_IR_DIM_H
#define CUVIL_IR_DIM_H

#include "util/util.h"

/* Every bound, value and partial result of an expression stays strictly inside this. */
#define CIR_DIM_LIMIT ((int64_t)1 << 62)
/* The most terms of a sum or factors of a product or arguments of min/max, and the deepest
 * nesting: model shapes need a few; anything larger is refused (bounded work and recursion). */
#define CIR_DIM_MAX_TERMS 64
#define CIR_DIM_MAX_DEPTH 64
/* The most symbols of one table. */
#define CIR_DIM_MAX_SYMS 4096

/* Keep in ORDER: canonical sorting ranks kinds by this enum. */
typedef enum cir_dim_kind {
    CIR_DIM_CONST = 0,
    CIR_DIM_SYM,     /* c: the symbol's index in its table */
    CIR_DIM_MUL,     /* a[0] * a[1] * ...: n >= 2 factors, none a sum, a product or a constant */
    CIR_DIM_FDIV,    /* floor(a[0] / a[1]) */
    CIR_DIM_MOD,     /* a[0] - a[1] * floor(a[0] / a[1]) */
    CIR_DIM_MIN,     /* n >= 2 arguments */
    CIR_DIM_MAX,
    CIR_DIM_ADD      /* c + k[0]*a[0] + k[1]*a[1] + ...: n >= 1 terms, none a sum or constant */
} cir_dim_kind;

typedef struct cir_dim {
    cir_dim_kind kind;
    int n;                       /* operands */
    int depth;                   /* 1 for a constant or symbol */
    uint32_t id;                 /* creation order in its table: the canonical sort key */
    int64_t c;                   /* CONST: the value; SYM: the index; ADD: the constant term */
    int64_t lo, hi;              /* every value the expression takes lies in [lo, hi] */
    const struct cir_dim **a;
    const int64_t *k;            /* ADD: each term's coefficient */
    uint64_t hash;
    struct cir_dim *next;        /* the table's hash chain */
} cir_dim;

typedef struct cir_dimsym {
    const char *name;            /* the table's copy */
    int64_t lo, hi;
    int64_t unit;                /* for people: the symbol counts steps of this size of the dim
                                  * it names (printed as name/unit); 1 otherwise */
    const cir_dim *e;            /* the symbol as an expression (a constant when lo == hi) */
} cir_dimsym;

typedef struct cir_dimtab {
    cuvil_arena arena;
    cir_dim **bucket;
    size_t n_bucket, n;
    cir_dimsym *syms;
    int n_syms, cap_syms;
    uint32_t next_id;
    char why[192];               /* why the last constructor that failed returned NULL */
} cir_dimtab;

void cir_dimtab_init(cir_dimtab *t);
void cir_dimtab_free(cir_dimtab *t);
/* A new symbol with values in [lo, hi] (inside ±CIR_DIM_LIMIT, lo <= hi); returns its index,
 * or -1 (out of memory, a bad range, too many symbols; why says which). Names need not be
 * unique; they are for people. */
int cir_dimtab_add_sym(cir_dimtab *t, const char *name, int64_t lo, int64_t hi);
/* Why the last constructor returned NULL ("" if none did). */
const char *cir_dimtab_why(const cir_dimtab *t);

/* ===== Constructors: the canonical expression, or NULL (see cir_dimtab_why) ============ */
const cir_dim *cir_dim_const(cir_dimtab *t, int64_t v);
const cir_dim *cir_dim_sym(cir_dimtab *t, int k);
const cir_dim *cir_dim_add(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
const cir_dim *cir_dim_sub(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
const cir_dim *cir_dim_neg(cir_dimtab *t, const cir_dim *a);
const cir_dim *cir_dim_mul(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
const cir_dim *cir_dim_scale(cir_dimtab *t, const cir_dim *a, int64_t k);
const cir_dim *cir_dim_add_const(cir_dimtab *t, const cir_dim *a, int64_t k);
/* floor(a / b) and ceil(a / b); NULL when b may be 0. */
const cir_dim *cir_dim_fdiv(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
const cir_dim *cir_dim_cdiv(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
/* a mod b with the sign of b (Python's %); NULL when b may be 0. */
const cir_dim *cir_dim_mod(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
const cir_dim *cir_dim_min(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
const cir_dim *cir_dim_max(cir_dimtab *t, const cir_dim *a, const cir_dim *b);

/* ===== Queries ========================================================================= */
static inline bool cir_dim_is_const(const cir_dim *e) { return e && e->kind == CIR_DIM_CONST; }
/* Whether a <= b (a < b, a == b, a != b) for every value of the symbols in their ranges, as far
 * as the bounds of b - a show; false also when it cannot be shown (or a or b is NULL). */
bool cir_dim_prove_le(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
bool cir_dim_prove_lt(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
bool cir_dim_prove_eq(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
bool cir_dim_prove_ne(cir_dimtab *t, const cir_dim *a, const cir_dim *b);
/* The value at the symbols' values vals[] (by index). False when a value is missing, or the
 * arithmetic overflows or divides by zero (possible only for values outside the ranges). */
bool cir_dim_eval(const cir_dim *e, const int64_t *vals, int n_vals, int64_t *out);
/* Whether e uses symbol k. */
bool cir_dim_uses(const cir_dim *e, int k);

/* ===== Printing ========================================================================= */
/* How a symbol is written: the callback appends symbol k. */
typedef void (*cir_dim_sym_fn)(cuvil_sb *o, int k, void *user);
/* As a C expression of type int64_t ("(D[0] / 3)", "cuvil_imin(D[1], 300)"), symbols written
 * by sym. Uses cuvil_fdiv, cuvil_fmod, cuvil_imin and cuvil_imax of the runtime (cuvil_rt.h)
 * where the plain C operator would differ. */
void cir_dim_print_c(cuvil_sb *o, const cir_dim *e, cir_dim_sym_fn sym, void *user);
/* For people, in Python's notation ("seq // 3", "min(seq, 512)", "(H + 1) // 2"), symbols by
 * their names through cuvil_safe_char (safe in comments and messages). */
void cir_dim_print(cuvil_sb *o, const cir_dimtab *t, const cir_dim *e);

#endif /* CUVIL_IR_DIM_H */
