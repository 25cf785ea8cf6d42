/* symbolic.c -- one model for every value of its symbolic dims, from compiles at sample values.
 *
 * A model with dims that stay symbolic (--dim seq=1:512) is compiled at several values of its
 * symbols (cuvil.c picks them: the upper bounds first, then a grid); each compile is ordinary
 * CIR with fixed shapes, generated with its kernel parameters inside the node functions and its
 * memory planned at the upper bounds. The texts must then be the same but for integers: each
 * integer that differs is fitted, exactly, by a polynomial of degree at most 2 in each symbol
 * with integer coefficients, checked at every sample, and written as a C
 * expression of the run's values D[]. Integers in comments and strings keep the upper bounds'
 * text; on lines marked @max (descriptors, memory sizes) they take the largest sampled value; a
 * stride written as CG_ANY_TEXT (of a dim of size 1) takes what the other samples say. Anything
 * else that differs (the code itself, a float, the weights) means the model's code depends on a
 * symbol in a way this cannot express, and the compile says so. */
#include "codegen/codegen_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct tok {
    size_t start, end;      /* the integer's bytes, suffix included */
    int64_t value;
    bool frozen;            /* in a comment or a string: the upper bounds' text */
    bool maxed;             /* on a line marked @max: the largest value of any sample */
    bool any;               /* CG_ANY_TEXT: any value (fits the other samples) */
} tok;

typedef struct toks {
    tok *t;
    int n, cap;
} toks;

static bool push(toks *ts, tok t) {
    if (ts->n == ts->cap) {
        int nc = ts->cap ? 2 * ts->cap : 1024;
        tok *p = cuvil_realloc(ts->t, sizeof *p * (size_t)nc);
        if (!p) return false;
        ts->t = p;
        ts->cap = nc;
    }
    ts->t[ts->n++] = t;
    return true;
}

static bool line_has_max(const char *s, size_t len, size_t at) {
    size_t a = at, b = at;
    while (a > 0 && s[a - 1] != '\n') a--;
    while (b < len && s[b] != '\n') b++;
    for (size_t i = a; i + 4 <= b; i++)
        if (!memcmp(s + i, "@max", 4)) return true;
    return false;
}

/* The integer literals of C text s, outside identifiers and other numbers. */
static bool tokenize(const char *s, size_t len, toks *out) {
    enum { CODE, COMMENT, LINE_COMMENT, STRING, CHAR } st = CODE;
    for (size_t i = 0; i < len;) {
        char c = s[i];
        switch (st) {
        case COMMENT:
            if (c == '*' && i + 1 < len && s[i + 1] == '/') {
                st = CODE;
                i += 2;
                continue;
            }
            break;
        case LINE_COMMENT:
            if (c == '\n') st = CODE;
            break;
        case STRING:
        case CHAR:
            if (c == '\\') {
                i += 2;
                continue;
            }
            if (c == (st == STRING ? '"' : '\'')) st = CODE;
            break;
        case CODE:
            if (c == '/' && i + 1 < len && s[i + 1] == '*') {
                st = COMMENT;
                i += 2;
                continue;
            }
            if (c == '/' && i + 1 < len && s[i + 1] == '/') {
                st = LINE_COMMENT;
                i += 2;
                continue;
            }
            if (c == '"') st = STRING;
            else if (c == '\'') st = CHAR;
            else if (isalpha((unsigned char)c) || c == '_') {
                while (i < len && (isalnum((unsigned char)s[i]) || s[i] == '_')) i++;
                continue;
            }
            break;
        }
        if (isdigit((unsigned char)c) && (i == 0 || !(isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_' || s[i - 1] == '.'))) {
            /* a preprocessing number: digits, letters, dots, exponent signs */
            size_t j = i;
            while (j < len && (isalnum((unsigned char)s[j]) || s[j] == '.' || s[j] == '_' ||
                               ((s[j] == '+' || s[j] == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
                j++;
            size_t k = i;
            int64_t v = 0;
            bool big = false;
            while (k < j && isdigit((unsigned char)s[k]) && !big) {
                int dg = s[k] - '0';
                if (v > (INT64_MAX - dg) / 10) big = true;
                else v = v * 10 + dg;
                k++;
            }
            bool integer = !big;
            for (size_t q = k; q < j; q++) integer &= strchr("uUlL", s[q]) != NULL;
            if (integer) {
                bool any = st == CODE && j - i == strlen(CG_ANY_TEXT) && !memcmp(s + i, CG_ANY_TEXT, j - i);
                /* a negative literal ("= -3LL", "{ -1LL,"): the minus is the number's, so that a
                 * value whose sign follows a symbol is one integer to fit, not code that changes */
                size_t b = i;
                if (st == CODE && b > 0 && s[b - 1] == '-') {
                    size_t q = b - 1;
                    while (q > 0 && s[q - 1] == ' ') q--;
                    if (q > 0 && strchr("=,({[", s[q - 1])) {
                        b--;
                        v = -v;
                    }
                }
                tok t = {b, j, v, st != CODE, st == CODE && line_has_max(s, len, i), any};
                if (!push(out, t)) return false;
            }
            i = j;
            continue;
        }
        i++;
    }
    return true;
}

/* " (.OH of Conv 'name')": the field an integer at `at` of generated C s initialises and the
 * node whose comment ("/" "* Conv 'name' ...: ...") comes before it; names there are already
 * comment-safe. Empty when neither is found. */
static void where(const char *s, size_t at, char *out, size_t n) {
    char field[40] = "", node[120] = "";
    size_t i = at;
    while (i > 0 && s[i - 1] != '\n' && s[i - 1] != '=' && at - i < 8) i--;   /* "... .OH = 8" */
    if (i > 0 && s[i - 1] == '=') {
        size_t e = i - 1;
        while (e > 0 && s[e - 1] == ' ') e--;
        size_t b = e;
        while (b > 0 && (isalnum((unsigned char)s[b - 1]) || s[b - 1] == '_' || s[b - 1] == '.')) b--;
        if (e > b && e - b < sizeof field) snprintf(field, sizeof field, "%.*s", (int)(e - b), s + b);
    }
    for (size_t b = at; b > 3; b--)
        if (s[b - 1] == '\n' && !memcmp(s + b, "/* ", 3) && b + 3 < at && strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ", s[b + 3])) {
            size_t e = b + 3;
            while (e < at && s[e] != ':' && s[e] != ';' && s[e] != '\n' && e - b < sizeof node - 4) e++;
            snprintf(node, sizeof node, "%.*s", (int)(e - b - 3), s + b + 3);
            break;
        }
    if (*field || *node)
        snprintf(out, n, " (%s%s%s)", field, *field && *node ? " of " : "", node);
    else
        *out = 0;
}

/* Newton's divided differences at integer nodes, exactly: the coefficients (c[0] + c[1] x +
 * c[2] x^2, degree m - 1) of the polynomial through (x[i], f[i]), or false when they are not
 * integers. */
static bool fit1(const int64_t *x, const int64_t *f, int m, int64_t c[3]) {
    int64_t d[3] = {0, 0, 0};
    for (int i = 0; i < m; i++) d[i] = f[i];
    for (int k = 1; k < m; k++)
        for (int i = m - 1; i >= k; i--) {
            int64_t num = d[i] - d[i - 1], den = x[i] - x[i - k];
            if (den == 0 || num % den) return false;
            d[i] = num / den;
        }
    c[0] = c[1] = c[2] = 0;
    /* p = d0 + d1 (x - x0) + d2 (x - x0)(x - x1) */
    c[0] = d[0];
    if (m > 1) {
        c[0] -= d[1] * x[0];
        c[1] += d[1];
    }
    if (m > 2) {
        c[0] += d[2] * x[0] * x[1];
        c[1] -= d[2] * (x[0] + x[1]);
        c[2] += d[2];
    }
    return true;
}

/* A polynomial of degree 2 at most in each of the symbols: c[e0 + 3 e1 + 9 e2] is the
 * coefficient of x0^e0 x1^e1 x2^e2. */
#define NC 27   /* 3^CG_MAX_SYMS */
_Static_assert(CG_MAX_SYMS == 3, "NC is 3^CG_MAX_SYMS");

static int expo(int e, int j) { return j == 0 ? e % 3 : j == 1 ? e / 3 % 3 : e / 9; }

static __int128 eval(const int64_t c[NC], const int64_t *x) {
    __int128 r = 0;
    for (int e = 0; e < NC; e++) {
        if (!c[e]) continue;
        __int128 t = c[e];
        for (int j = 0; j < CG_MAX_SYMS; j++)
            for (int k = 0; k < expo(e, j); k++) t *= x[j];
        r += t;
    }
    return r;
}

/* The polynomial (degree 2 at most in each symbol, integer coefficients) through the values f[s]
 * of the samples that say one (any[s] false; any may be NULL), checked at every such sample. */
static bool fit_poly(const cg_samples *sm, const int64_t *f, const bool *any, int64_t c[NC]) {
    memset(c, 0, sizeof(int64_t) * NC);
    bool ok = true;
    if (sm->nd == 1) {
        /* through the first three samples (upper bounds first) that say a value */
        int64_t x[3] = {0, 0, 0}, v[3] = {0, 0, 0};
        int m = 0;
        for (int s = 0; s < sm->n && m < 3; s++) {
            if (any && any[s]) continue;
            bool seen = false;
            for (int k = 0; k < m; k++) seen |= x[k] == sm->points[s][0];
            if (seen) continue;
            x[m] = sm->points[s][0];
            v[m++] = f[s];
        }
        ok = fit1(x, v, m, c);
    } else {
        /* on the grid (samples 0 .. G - 1, the first symbol's index fastest), one symbol at a
         * time: along symbol j, each line of the grid gets the polynomial in x_j through its
         * values (its coefficients replace the values, index for exponent), skipping the
         * points that say "any"; a line with none is "any" itself */
        int n[CG_MAX_SYMS] = {1, 1, 1}, G = 1;
        for (int j = 0; j < sm->nd; j++) G *= n[j] = sm->grid_n[j];
        int64_t v[NC] = {0};
        bool na[NC] = {false};   /* not any (and in the grid) */
        for (int i = 0; i < G; i++) {
            /* grid index (a0, a1, a2) -> slot a0 + 3 a1 + 9 a2 */
            int slot = i % n[0] + 3 * (i / n[0] % n[1]) + 9 * (i / (n[0] * n[1]));
            v[slot] = f[i];
            na[slot] = !(any && any[i]);
        }
        for (int j = 0; j < sm->nd && ok; j++) {
            int stride = j == 0 ? 1 : j == 1 ? 3 : 9;
            for (int base = 0; base < NC && ok; base++) {
                if (expo(base, j) != 0) continue;
                bool inside = true;   /* the line lies in the grid (other indices in range) */
                for (int k = 0; k < CG_MAX_SYMS; k++)
                    if (k != j) inside &= expo(base, k) < (k < j ? 3 : n[k]);
                if (!inside) continue;
                int64_t x[3], y[3], cf[3];
                int m = 0;
                for (int a = 0; a < n[j]; a++)
                    if (na[base + a * stride]) {
                        x[m] = sm->grid[j][a];
                        y[m++] = v[base + a * stride];
                    }
                if (m) ok = fit1(x, y, m, cf);
                for (int a = 0; a < 3; a++) {
                    v[base + a * stride] = m ? cf[a] : 0;
                    na[base + a * stride] = m > 0;
                }
            }
        }
        if (ok) {
            ok = false;   /* every point "any": no fit */
            for (int e = 0; e < NC; e++) {
                c[e] = na[e] ? v[e] : 0;
                ok |= na[e];
            }
        }
    }
    /* every sample that says a value checks it */
    for (int s = 0; s < sm->n && ok; s++)
        ok = (any && any[s]) || eval(c, sm->points[s]) == (__int128)f[s];
    return ok;
}

/* The largest value of c over the symbols' ranges (in steps): exact for one symbol (the ends
 * and the vertex); for more, the sum of each term's largest value (the symbols are >= 1, so
 * each term is largest at a corner), an upper bound that is exact when no coefficient is
 * negative. */
static __int128 poly_max(const cg_samples *sm, const int64_t c[NC]) {
    if (sm->nd == 1) {
        int64_t lo = sm->lo[0], hi = sm->hi[0], cand[4] = {lo, hi, lo, lo};
        if (c[2] < 0) {   /* a maximum inside: -c1 / (2 c2), either side */
            __int128 v = (__int128)-c[1] / (2 * (__int128)c[2]);
            for (int k = 0; k < 2; k++) {
                __int128 x = v + k;
                cand[2 + k] = x < lo ? lo : x > hi ? hi : (int64_t)x;
            }
        }
        __int128 m = INT64_MIN;
        for (int k = 0; k < 4; k++) {
            int64_t x[CG_MAX_SYMS] = {cand[k], 0, 0};
            if (eval(c, x) > m) m = eval(c, x);
        }
        return m;
    }
    __int128 m = 0;
    for (int e = 0; e < NC; e++) {
        if (!c[e]) continue;
        __int128 t = c[e];
        for (int j = 0; j < sm->nd; j++)
            for (int k = 0; k < expo(e, j); k++) t *= c[e] > 0 ? sm->hi[j] : sm->lo[j];
        m += t;
    }
    return m;
}

bool cg_sym_max(const cg_samples *sm, const int64_t *f, int64_t *max) {
    int64_t c[NC];
    if (!fit_poly(sm, f, NULL, c)) return false;
    __int128 m = poly_max(sm, c);
    for (int s = 0; s < sm->n; s++)
        if (f[s] > m) m = f[s];
    if (m > INT64_MAX) return false;
    *max = (int64_t)m;
    return true;
}

/* Appends printf output to buf[*o..len); false once it does not fit. */
static bool putf(char *buf, size_t len, size_t *o, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool putf(char *buf, size_t len, size_t *o, const char *fmt, ...) {
    if (*o >= len) return false;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *o, len - *o, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= len - *o) {
        *o = len;
        return false;
    }
    *o += (size_t)w;
    return true;
}

bool cg_sym_expr(const cg_samples *sm, const int64_t *f, char *buf, size_t len) {
    int64_t c[NC];
    if (!len || !fit_poly(sm, f, NULL, c)) return false;
    char nm[CG_MAX_SYMS][72];
    for (int j = 0; j < sm->nd; j++) {   /* at most 64 bytes of a name, "..." after a cut one */
        size_t k = 0;
        const char *p = sm->names[j];
        for (; *p && k < 64; p++) nm[j][k++] = cuvil_safe_char((unsigned char)*p);
        if (*p) nm[j][k++] = '.', nm[j][k++] = '.', nm[j][k++] = '.';
        nm[j][k] = 0;
    }
    size_t o = 0;
    bool first = true, ok = true;
    buf[0] = 0;
    /* the terms by degree, highest first; the constant last */
    for (int deg = 2 * CG_MAX_SYMS; deg >= 0 && ok; deg--)
        for (int e = 0; e < NC && ok; e++) {
            int d = 0, only = -1;   /* only: the symbol of a term linear in one symbol */
            for (int j = 0; j < CG_MAX_SYMS; j++) {
                d += expo(e, j);
                if (expo(e, j)) only = only == -1 && expo(e, j) == 1 ? j : -2;
            }
            if (d != deg || !c[e]) continue;
            int64_t a = c[e] < 0 ? -c[e] : c[e];
            if (c[e] == INT64_MIN) return false;
            ok = putf(buf, len, &o, "%s", first ? (c[e] < 0 ? "-" : "") : (c[e] < 0 ? " - " : " + "));
            first = false;
            if (!d) {
                ok = ok && putf(buf, len, &o, "%lld", (long long)a);
                continue;
            }
            if (only >= 0 && sm->step[only] > 1) {
                /* a * (X / step) with X a multiple of step: "X", "3*X", "X/2" when exact, else as it is */
                int64_t st = sm->step[only];
                if (a == st) ok = ok && putf(buf, len, &o, "%s", nm[only]);
                else if (a % st == 0) ok = ok && putf(buf, len, &o, "%lld*%s", (long long)(a / st), nm[only]);
                else if (st % a == 0) ok = ok && putf(buf, len, &o, "%s/%lld", nm[only], (long long)(st / a));
                else ok = ok && putf(buf, len, &o, "%lld*(%s/%lld)", (long long)a, nm[only], (long long)st);
                continue;
            }
            bool lead = a != 1;
            if (lead) ok = ok && putf(buf, len, &o, "%lld", (long long)a);
            for (int j = 0; j < CG_MAX_SYMS; j++)
                for (int k = 0; k < expo(e, j); k++) {
                    if (sm->step[j] > 1) ok = ok && putf(buf, len, &o, "%s(%s/%lld)", lead ? "*" : "", nm[j], (long long)sm->step[j]);
                    else ok = ok && putf(buf, len, &o, "%s%s", lead ? "*" : "", nm[j]);
                    lead = true;
                }
        }
    if (first) ok = putf(buf, len, &o, "0");
    return ok;
}

/* "batch=4, seq=40": sample s's values. */
static const char *point_str(const cg_samples *sm, int s, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < sm->nd && k < len; j++) {
        int w = snprintf(buf + k, len - k, "%s%.40s=%lld", j ? ", " : "", sm->names[j],
                         (long long)(sm->points[s][j] * sm->step[j]));
        if (w < 0) break;
        k += (size_t)w;
    }
    return buf;
}

const char *cg_sym_names(const cg_samples *sm, const char *conj, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < sm->nd && k < len; j++) {
        int w = snprintf(buf + k, len - k, "%s%s%s%.60s", !j ? "" : j == sm->nd - 1 ? " " : ", ",
                         j && j == sm->nd - 1 ? conj : "", j && j == sm->nd - 1 ? " " : "", sm->names[j]);
        if (w < 0) break;
        k += (size_t)w;
    }
    return buf;
}

cuvil_status cg_merge_symbolic(cuvil_ctx *ctx, const cuvil_sb *texts, const cg_samples *sm, cuvil_sb *out) {
    const int n = sm->n;
    const int64_t *step = sm->step;
    char var[CG_MAX_SYMS][48];   /* how the code names each symbol's fitted variable */
    for (int j = 0; j < CG_MAX_SYMS; j++)
        if (step[j] > 1) snprintf(var[j], sizeof var[j], "(D[%d] / %lld)", j, (long long)step[j]);
        else snprintf(var[j], sizeof var[j], "D[%d]", j);
    toks *ts = cuvil_calloc((size_t)n, sizeof *ts);
    if (!ts) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    cuvil_status st = CUVIL_OK;
    for (int s = 0; s < n && !st; s++)
        if (!tokenize(texts[s].s ? texts[s].s : "", texts[s].len, &ts[s])) st = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    char why[800] = "";
    /* the same text but for integers */
    for (int s = 1; s < n && !st && !*why; s++) {
        /* the text between the numbers, up to the first place it differs (the numbers may
         * differ in count too: then so does some text between them) */
        const int nt = ts[s].n < ts[0].n ? ts[s].n : ts[0].n;
        size_t p0 = 0, ps = 0;
        for (int i = 0; i <= nt && !*why; i++) {
            size_t e0 = i < nt ? ts[0].t[i].start : texts[0].len, es = i < nt ? ts[s].t[i].start : texts[s].len;
            if (e0 - p0 != es - ps || memcmp(texts[0].s + p0, texts[s].s + ps, e0 - p0)) {
                char at[200], a[160], b[160];
                size_t k = 0;   /* the first byte that differs */
                while (p0 + k < e0 && ps + k < es && texts[0].s[p0 + k] == texts[s].s[ps + k]) k++;
                where(texts[0].s, p0 + k, at, sizeof at);
                snprintf(why, sizeof why, "its code%s (not only its numbers) differs between %s and %s", at,
                         point_str(sm, 0, a, sizeof a), point_str(sm, s, b, sizeof b));
            }
            if (i < nt) {
                p0 = ts[0].t[i].end;
                ps = ts[s].t[i].end;
            }
        }
        if (!*why && ts[s].n != ts[0].n) {   /* not reached: the texts differ somewhere above */
            char a[160], b[160];
            snprintf(why, sizeof why, "its code differs between %s and %s", point_str(sm, 0, a, sizeof a),
                     point_str(sm, s, b, sizeof b));
        }
    }
    size_t prev = 0;
    for (int i = 0; i < ts[0].n && !st && !*why; i++) {
        const tok *t0 = &ts[0].t[i];
        cuvil_sb_append(out, texts[0].s + prev, t0->start - prev);
        prev = t0->end;
        bool same = true, all_any = true;
        for (int s = 0; s < n; s++) {
            same &= ts[s].t[i].value == t0->value && ts[s].t[i].any == t0->any;
            all_any &= ts[s].t[i].any;
        }
        if (all_any) {   /* any value at every sample */
            cuvil_sb_puts(out, "0");
            continue;
        }
        if (same || t0->frozen) {
            cuvil_sb_append(out, texts[0].s + t0->start, t0->end - t0->start);
            continue;
        }
        if (t0->maxed) {   /* a bound (a buffer's size, a descriptor's dim): the largest */
            int64_t mx = INT64_MIN, f[CG_MAX_SAMPLES];
            for (int s = 0; s < n; s++) {
                f[s] = ts[s].t[i].value;
                if (f[s] > mx) mx = f[s];
            }
            /* over the whole range when it is a polynomial (a size can peak between samples),
             * else the largest sampled (memory sizes are planned over the range beforehand) */
            int64_t pm;
            if (cg_sym_max(sm, f, &pm) && pm > mx) mx = pm;
            cuvil_sb_printf(out, "%lld", (long long)mx);
            continue;
        }
        int64_t f[CG_MAX_SAMPLES], c[NC];
        bool any[CG_MAX_SAMPLES];
        for (int q = 0; q < n; q++) {
            f[q] = ts[q].t[i].value;
            any[q] = ts[q].t[i].any;
        }
        bool ok = fit_poly(sm, f, any, c);
        if (!ok) {
            /* the usual cause: a stride or pool divides the dim, rounding down; over multiples of the
             * strides' product the sizes are exact again */
            char at[200], nm[160];
            where(texts[0].s, t0->start, at, sizeof at);
            snprintf(why, sizeof why, "a size in its code%s is not a polynomial of degree 2 or less in %s (if strides "
                     "divide it, give it a step that is a multiple of their product: --dim NAME=LO:HI:STEP, e.g. 32 for a "
                     "CNN; if it is clamped at one end of the range, narrow the range)", at, cg_sym_names(sm, "and", nm, sizeof nm));
            break;
        }
        cuvil_sb_puts(out, "((int64_t)(");
        bool first = true;
        /* x0's powers outermost, then x1's, then x2's */
        for (int e0 = 0; e0 < 3; e0++)
            for (int e12 = 0; e12 < 9; e12++) {
                int e = e0 + 3 * e12;
                if (!c[e]) continue;
                cuvil_sb_printf(out, "%s%lldLL", first ? "" : " + ", (long long)c[e]);
                for (int j = 0; j < CG_MAX_SYMS; j++)
                    for (int k = 0; k < expo(e, j); k++) cuvil_sb_printf(out, " * %s", var[j]);
                first = false;
            }
        cuvil_sb_puts(out, first ? "0))" : "))");
    }
    if (!st && !*why) cuvil_sb_append(out, texts[0].s + prev, texts[0].len - prev);
    if (!st && *why)
        st = cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "the model cannot keep its dims symbolic: %s (fix them with --dim NAME=N)",
                       why);
    if (!st && out->oom) st = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int s = 0; s < n; s++) cuvil_free(ts[s].t);
    cuvil_free(ts);
    return st;
}
