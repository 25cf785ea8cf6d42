/* test_dim.c -- dim expressions (ir/dim.h): the canonical forms the shape inference relies
 * on (what simplifies, what is proven), bounds, refusals, the printers; then many random
 * programs through the fuzz target's oracle (fuzz/dim_oracle.h: simplified expressions against
 * plain arithmetic at the corners and random points of the ranges). */
#include "check.h"
#include "../../fuzz/dim_oracle.h"

static cir_dimtab T;

static const char *show(const cir_dim *e) {
    static char buf[8][256];
    static int k;
    cuvil_sb o = {0};
    cir_dim_print(&o, &T, e);
    char *b = buf[k++ % 8];
    snprintf(b, 256, "%s", o.s ? o.s : "");
    cuvil_sb_free(&o);
    return b;
}

static const char *show_c(const cir_dim *e) {
    static char buf[256];
    cuvil_sb o = {0};
    cir_dim_print_c(&o, e, do_sym_c, NULL);
    snprintf(buf, sizeof buf, "%s", o.s ? o.s : "");
    cuvil_sb_free(&o);
    return buf;
}

#define C(v) cir_dim_const(&T, v)
#define EXPECT(e, text) CHECK(!strcmp(show(e), text), "got '%s', want '%s'", show(e), text)

int main(void) {
    cir_dimtab_init(&T);
    const cir_dim *seq = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "seq", 1, 512));
    const cir_dim *b = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "batch", 1, 64));
    const cir_dim *H = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "H", 32, 1024));
    const cir_dim *neg = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "x", -10, 10));
    const cir_dim *fixed = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "f", 7, 7));
    CHECK(seq && b && H && neg, "symbols");
    CHECK(cir_dim_is_const(fixed) && fixed->c == 7, "a symbol of one value is that constant");

    /* sums: cancellation, order, constants */
    EXPECT(cir_dim_sub(&T, cir_dim_add(&T, seq, b), seq), "batch");
    CHECK(cir_dim_add(&T, seq, b) == cir_dim_add(&T, b, seq), "commutative sums are one expression");
    EXPECT(cir_dim_add(&T, cir_dim_scale(&T, seq, 2), C(1)), "2*seq + 1");
    /* products distribute */
    const cir_dim *bs = cir_dim_mul(&T, b, seq);
    CHECK(cir_dim_mul(&T, cir_dim_add_const(&T, seq, 1), b) == cir_dim_add(&T, bs, b), "(seq+1)*batch = batch*seq + batch");
    CHECK(bs->lo == 1 && bs->hi == 512 * 64, "bounds of batch*seq: %lld..%lld", (long long)bs->lo, (long long)bs->hi);

    /* floor division: the forms conv, pool, slice and reshape make */
    EXPECT(cir_dim_fdiv(&T, seq, C(3)), "seq // 3");
    CHECK(cir_dim_fdiv(&T, cir_dim_scale(&T, seq, 64), C(64)) == seq, "64*seq // 64 = seq");
    CHECK(cir_dim_fdiv(&T, cir_dim_add_const(&T, cir_dim_scale(&T, seq, 2), 1), C(2)) == seq, "(2seq+1)//2 = seq");
    EXPECT(cir_dim_fdiv(&T, cir_dim_add_const(&T, cir_dim_scale(&T, seq, 2), 1), C(4)), "seq // 2");
    CHECK(cir_dim_fdiv(&T, cir_dim_fdiv(&T, H, C(2)), C(2)) == cir_dim_fdiv(&T, H, C(4)), "(H//2)//2 = H//4");
    const cir_dim *h2 = H;
    for (int i = 0; i < 5; i++) h2 = cir_dim_fdiv(&T, cir_dim_add_const(&T, h2, 1), C(2));   /* five stride-2 convs */
    EXPECT(h2, "(H + 31) // 32");
    EXPECT(cir_dim_cdiv(&T, seq, C(3)), "(seq + 2) // 3");
    CHECK(cir_dim_cdiv(&T, cir_dim_scale(&T, seq, 2), C(2)) == seq, "ceil(2seq/2) = seq");
    /* a conv: (H + 2*1 - 3) // 2 + 1 */
    EXPECT(cir_dim_add_const(&T, cir_dim_fdiv(&T, cir_dim_add_const(&T, H, -1), C(2)), 1), "(H + 1) // 2");
    /* reshape's -1: batch*seq*768 / (batch*768) = seq, exactly */
    const cir_dim *numel = cir_dim_scale(&T, bs, 768);
    CHECK(cir_dim_fdiv(&T, numel, cir_dim_scale(&T, b, 768)) == seq, "batch*seq*768 // (768*batch) = seq: %s",
          show(cir_dim_fdiv(&T, numel, cir_dim_scale(&T, b, 768))));
    CHECK(cir_dim_fdiv(&T, seq, seq) == C(1), "seq // seq = 1");
    /* a sum divides exactly: (768*batch*seq + 768*batch) // (64*seq + 64) = 12*batch */
    const cir_dim *num = cir_dim_scale(&T, cir_dim_add(&T, bs, b), 768), *den = cir_dim_scale(&T, cir_dim_add_const(&T, seq, 1), 64);
    CHECK(cir_dim_fdiv(&T, num, den) == cir_dim_scale(&T, b, 12), "exact division by a sum: %s", show(cir_dim_fdiv(&T, num, den)));
    CHECK(cir_dim_fdiv(&T, cir_dim_add_const(&T, num, 1), den) != cir_dim_scale(&T, b, 12), "a remainder is no exact division");
    CHECK(cir_dim_fdiv(&T, cir_dim_add_const(&T, seq, -1), cir_dim_add_const(&T, seq, 0)) == C(0), "(seq-1)//seq = 0");
    /* negative numerators floor, as Python */
    CHECK(cir_dim_fdiv(&T, C(-7), C(2)) == C(-4) && cir_dim_mod(&T, C(-7), C(2)) == C(1) &&
              cir_dim_mod(&T, C(7), C(-2)) == C(-1) && cir_dim_fdiv(&T, C(7), C(-2)) == C(-4),
          "floor division and modulo of negative numbers");
    CHECK(!strcmp(show_c(cir_dim_fdiv(&T, seq, C(3))), "(D[0] / 3)"), "C: %s", show_c(cir_dim_fdiv(&T, seq, C(3))));
    CHECK(!strcmp(show_c(cir_dim_fdiv(&T, neg, C(3))), "cuvil_fdiv(D[3], 3)"), "C: %s", show_c(cir_dim_fdiv(&T, neg, C(3))));
    /* division by something that may be zero is refused, with the reason */
    CHECK(!cir_dim_fdiv(&T, seq, neg) && strstr(cir_dimtab_why(&T), "may be 0"), "x may be 0: %s", cir_dimtab_why(&T));
    CHECK(!cir_dim_mod(&T, seq, C(0)) && !cir_dim_fdiv(&T, seq, C(0)), "division by 0 refused");
    CHECK(!cir_dim_fdiv(&T, NULL, seq), "NULL operands give NULL");

    /* modulo */
    CHECK(cir_dim_mod(&T, cir_dim_add_const(&T, cir_dim_scale(&T, seq, 4), 6), C(4)) == C(2), "(4seq+6) %% 4 = 2");
    CHECK(cir_dim_mod(&T, cir_dim_mod(&T, H, C(8)), C(4)) == cir_dim_mod(&T, H, C(4)), "(H %% 8) %% 4 = H %% 4");
    CHECK(cir_dim_mod(&T, cir_dim_mod(&T, H, C(8)), C(8)) == cir_dim_mod(&T, H, C(8)), "(H %% 8) %% 8 = H %% 8");
    const cir_dim *m = cir_dim_mod(&T, seq, C(8));
    CHECK(m->lo == 0 && m->hi == 7, "seq %% 8 in 0..7");

    /* min and max: what the ranges or the difference prove */
    EXPECT(cir_dim_min(&T, seq, C(300)), "min(seq, 300)");
    CHECK(cir_dim_min(&T, seq, C(512)) == seq && cir_dim_min(&T, seq, C(600)) == seq, "min(seq, >=512) = seq");
    CHECK(cir_dim_max(&T, seq, C(1)) == seq && cir_dim_max(&T, seq, C(0)) == seq, "max(seq, <=1) = seq");
    CHECK(cir_dim_min(&T, seq, cir_dim_add_const(&T, seq, 1)) == seq, "min(seq, seq+1) = seq");
    CHECK(cir_dim_min(&T, seq, b) == cir_dim_min(&T, b, seq), "min commutes");
    const cir_dim *mn = cir_dim_min(&T, seq, C(300));
    CHECK(mn->lo == 1 && mn->hi == 300, "min(seq, 300) in 1..300");
    CHECK(cir_dim_min(&T, cir_dim_min(&T, seq, C(300)), C(200)) == cir_dim_min(&T, seq, C(200)), "nested min");
    CHECK(cir_dim_prove_le(&T, cir_dim_fdiv(&T, seq, C(3)), seq), "seq//3 <= seq");
    const cir_dim *rest = cir_dim_sub(&T, seq, cir_dim_min(&T, seq, C(4)));
    CHECK(cir_dim_max(&T, rest, C(0)) == rest && rest->lo == 0, "seq - min(seq, 4) >= 0: %s, lo %lld", show(rest),
          (long long)rest->lo);
    CHECK(!cir_dim_prove_le(&T, seq, cir_dim_fdiv(&T, seq, C(3))), "not seq <= seq//3");
    CHECK(cir_dim_prove_lt(&T, seq, cir_dim_add_const(&T, seq, 1)), "seq < seq + 1");
    CHECK(cir_dim_prove_ne(&T, seq, C(0)) && !cir_dim_prove_ne(&T, seq, C(5)), "seq != 0, perhaps 5");

    /* the limits */
    const cir_dim *big = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "big", 1, (int64_t)1 << 40));
    CHECK(!cir_dim_mul(&T, big, cir_dim_mul(&T, big, big)) && strstr(cir_dimtab_why(&T), "2^62"),
          "big^3 passes 2^62: refused (%s)", cir_dimtab_why(&T));
    CHECK(cir_dimtab_add_sym(&T, "bad", 5, 4) < 0 && cir_dimtab_add_sym(&T, "bad", 0, INT64_MAX) < 0, "bad ranges refused");
    const cir_dim *deep = seq;
    for (int i = 0; i < 2 * CIR_DIM_MAX_DEPTH && deep; i++) deep = cir_dim_max(&T, cir_dim_add_const(&T, deep, -1), b);
    CHECK(!deep && strstr(cir_dimtab_why(&T), "deeper"), "nesting is bounded: %s", cir_dimtab_why(&T));

    /* evaluation */
    int64_t v;
    const cir_dim *e = cir_dim_add(&T, cir_dim_fdiv(&T, cir_dim_mul(&T, b, seq), C(3)), cir_dim_min(&T, H, C(100)));
    CHECK(cir_dim_eval(e, (int64_t[]){10, 4, 333, 0}, 4, &v) && v == 40 / 3 + 100, "eval: %lld", (long long)v);
    CHECK(!cir_dim_eval(e, (int64_t[]){10}, 1, &v), "eval without a symbol's value fails");

    /* names reach the printer only as safe text */
    const cir_dim *evil = cir_dim_sym(&T, cir_dimtab_add_sym(&T, "a*/b\n", 1, 9));
    CHECK(!strstr(show(evil), "*/") && !strchr(show(evil), '\n'), "names are sanitised: %s", show(evil));
    cir_dimtab_free(&T);

    /* random programs through the oracle */
    uint64_t s = 88172645463325252ULL;
    uint8_t buf[96];
    int bad = 0;
    for (int it = 0; it < 20000 && bad < 5; it++) {
        size_t n = 8 + do_rng(&s) % (sizeof buf - 8);
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)do_rng(&s);
        if (dim_oracle_run(buf, n)) {
            bad++;
            fprintf(stderr, "  (random program %d)\n", it);
        }
    }
    CHECK(!bad, "%d random programs broke the oracle", bad);
    if (!failures) printf("test_dim: all checks passed\n");
    return failures != 0;
}
