/*
 * test_kernel_elementwise.c -- unary activations (cuvil_f32_unary, __scalar, cuvil_f32_act1,
 * cuvil_f32_act_rows)
 * and broadcasting binary ops (cuvil_f32_binary, __scalar) against double-precision references
 * written here.
 *
 * Unary: every activation on random values plus special ones (0, -0, +-0.5, +-2.5 for
 * half-to-even rounding, large magnitudes where exp overflows or underflows, inf, NaN), on
 * lengths around the vector width (tails), in place (y == x) and out of place.
 * Binary: every op with several broadcast patterns (same shape, per-channel, scalar on either
 * side, both sides broadcast, an outer product, transposed strides), in place on either
 * operand, with and without a fused activation.
 */
#include <float.h>

#include "kernel_test_util.h"
#include "../../runtime/kernels/rt_int.h"

/* ---- Unary -------------------------------------------------------------------------------- */
static int act_is_exact(int act) {
    switch (act) {
    case CUVIL_ACT_NONE: case CUVIL_ACT_RELU: case CUVIL_ACT_CLIP:
    case CUVIL_ACT_NEG: case CUVIL_ACT_ABS: case CUVIL_ACT_FLOOR: case CUVIL_ACT_CEIL:
    case CUVIL_ACT_ROUND: case CUVIL_ACT_SIGN: case CUVIL_ACT_THRESHOLDED_RELU:
        return 1;
    default: return 0;
    }
}

static void fill_unary_input(int act, float *x, size_t n) {
    static const float specials[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.0f, -3.0f,
                                     1e-4f, -1e-4f, 20.0f, -20.0f, 88.0f, 89.0f, -87.0f, -95.0f,
                                     -104.0f, 100.0f, -100.0f, INFINITY, -INFINITY, NAN, 1e-30f,
                                     1e30f, -1e30f, 6.0f, -6.0f, 0.625f, -0.6f};
    const size_t ns = sizeof specials / sizeof specials[0];
    const float range = act == CUVIL_ACT_EXP || act == CUVIL_ACT_SIGMOID ? 30.0f : 8.0f;
    for (size_t i = 0; i < n; i++)
        x[i] = (i % 3 == 0) ? specials[(i / 3) % ns] : ktu_uniform(-range, range);
}

static void test_unary(void) {
    static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 1000};
    for (int act = 0; act < CUVIL_ACT__COUNT; act++) {
        const cuvil_act_params a = ktu_act_params(act);
        const double rtol = act_is_exact(act) ? 0.0 : 2e-6, atol = act_is_exact(act) ? 0.0 : 1e-6;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const size_t n = lens[li];
            float *x = ktu_falloc(n + 1), *y = ktu_falloc(n + 1), *x0 = ktu_falloc(n + 1);
            fill_unary_input(act, x0, n);
            double *ref = malloc((n + 1) * sizeof(double));
            for (size_t i = 0; i < n; i++) ref[i] = ktu_actp(&a, x0[i]);
            for (int v = 0; v < 4; v++) {
                memcpy(x, x0, n * sizeof(float));
                y[n] = x[n] = 777.0f;
                float *out = v & 1 ? x : y; /* odd variants run in place */
                if (v < 2)
                    cuvil_f32_unary(&a, x, out, n);
                else
                    cuvil_f32_unary__scalar(&a, x, out, n);
                ktu_check(out, ref, n, rtol, atol, "unary %s n=%zu [%s%s]", cuvil_act_names[act],
                          n, v < 2 ? "public" : "__scalar", v & 1 ? ", in place" : "");
                if (out[n] != 777.0f)
                    ktu_fail("unary %s n=%zu wrote past the end", cuvil_act_names[act], n);
            }
            /* the per-element entry point used by epilogues */
            for (size_t i = 0; i < n; i++) y[i] = cuvil_f32_act1(&a, x0[i]);
            ktu_check(y, ref, n, rtol, atol, "act1 %s", cuvil_act_names[act]);
            /* the tile entry point (GEMM epilogues): 3 rows of n, 5 values between them kept */
            {
                const size_t ld = n + 5, rows = 3;
                float *t = ktu_falloc(rows * ld);
                for (size_t r = 0; r < rows; r++)
                    for (size_t i = 0; i < ld; i++) t[r * ld + i] = i < n ? x0[i] : 777.0f;
                cuvil_f32_act_rows(&a, t, ld, rows, n);
                for (size_t r = 0; r < rows; r++) {
                    ktu_check(t + r * ld, ref, n, rtol, atol, "act_rows %s n=%zu row %zu", cuvil_act_names[act], n, r);
                    for (size_t i = n; i < ld; i++)
                        if (t[r * ld + i] != 777.0f)
                            ktu_fail("act_rows %s n=%zu wrote between the rows", cuvil_act_names[act], n);
                }
                free(t);
            }
            free(x);
            free(y);
            free(x0);
            free(ref);
        }
    }
}

/* ---- Binary ------------------------------------------------------------------------------- */
static double bin_ref(int op, double a, double b) {
    switch (op) {
    case CUVIL_BIN_ADD: return a + b;
    case CUVIL_BIN_SUB: return a - b;
    case CUVIL_BIN_MUL: return a * b;
    case CUVIL_BIN_DIV: return a / b;
    case CUVIL_BIN_POW: return pow(a, b);
    case CUVIL_BIN_MAX: return isnan(a) || isnan(b) ? NAN : fmax(a, b);   /* NaN propagates (ONNX Runtime) */
    case CUVIL_BIN_MIN: return isnan(a) || isnan(b) ? NAN : fmin(a, b);
    case CUVIL_BIN_PRELU: return a >= 0 ? a : a * b;
    case CUVIL_BIN_MOD: return a - b * floor(a / b);   /* the divisor's sign (numpy) */
    case CUVIL_BIN_FMOD: return a - b * trunc(a / b);  /* the dividend's sign (C) */
    default: return NAN;
    }
}

static const char *bin_names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Mod", "Fmod"};
_Static_assert(sizeof bin_names / sizeof bin_names[0] == CUVIL_BIN__FLOAT_COUNT, "a name per float CUVIL_BIN_*");

typedef struct bcase {
    const char *name;
    int ndim;
    int64_t dims[4];
    int64_t as[4], bs[4]; /* element strides; 0 broadcasts */
    int64_t a_size, b_size;
    int inplace_a, inplace_b; /* allowed in-place variants */
} bcase;

static const bcase bcases[] = {
    {"same shape", 4, {2, 3, 4, 5}, {60, 20, 5, 1}, {60, 20, 5, 1}, 120, 120, 1, 1},
    {"per channel b", 4, {2, 3, 4, 5}, {60, 20, 5, 1}, {0, 1, 0, 0}, 120, 3, 1, 0},
    {"per channel a", 4, {2, 3, 4, 5}, {0, 1, 0, 0}, {60, 20, 5, 1}, 3, 120, 0, 1},
    {"scalar b", 3, {3, 7, 9}, {63, 9, 1}, {0, 0, 0}, 189, 1, 1, 0},
    {"scalar a", 2, {5, 17}, {0, 0}, {17, 1}, 1, 85, 0, 1},
    {"both broadcast", 4, {2, 3, 4, 5}, {20, 0, 5, 1}, {0, 1, 0, 0}, 40, 3, 0, 0},
    {"outer product", 2, {4, 33}, {1, 0}, {0, 1}, 4, 33, 0, 0},
    {"last-dim vector", 3, {2, 6, 19}, {114, 19, 1}, {0, 0, 1}, 228, 19, 1, 0},
    {"transposed a", 2, {6, 10}, {1, 6}, {10, 1}, 60, 60, 0, 1},
    {"size-1 dims", 5 - 1, {1, 9, 1, 11}, {99, 11, 11, 1}, {0, 11, 0, 1}, 99, 99, 1, 1},
    /* large enough to split over threads: rows (a squeeze-excitation scale), one long row */
    {"per channel, many rows", 4, {1, 144, 40, 30}, {172800, 1200, 30, 1}, {0, 1, 0, 0}, 172800, 144, 1, 0},
    {"one long row", 1, {150000}, {1}, {1}, 150000, 150000, 1, 1},
};

static void fill_bin(int op, float *v, int64_t n, int is_b) {
    for (int64_t i = 0; i < n; i++) {
        if (op == CUVIL_BIN_POW)
            v[i] =
                is_b ? (i % 4 == 0 ? 2.0f
                                   : (float)((int)(ktu_u32() % 7) - 3) + (i % 3 == 0 ? 0.5f : 0.0f))
                     : ktu_uniform(0.1f, 3.0f) * (i % 5 == 0 ? -1.0f : 1.0f);
        else if ((op == CUVIL_BIN_DIV || op == CUVIL_BIN_MOD || op == CUVIL_BIN_FMOD) && is_b)
            v[i] = ktu_uniform(0.5f, 2.0f) * (i % 2 ? -1.0f : 1.0f);
        else
            v[i] = ktu_uniform(-3.0f, 3.0f);
    }
}

static cuvil_pool *pool3;   /* (main makes it) */

static void test_binary(void) {
    static const int acts[] = {CUVIL_ACT_NONE, CUVIL_ACT_RELU, CUVIL_ACT_SIGMOID};
    for (int op = 0; op < CUVIL_BIN__FLOAT_COUNT; op++)
        for (size_t ci = 0; ci < sizeof bcases / sizeof bcases[0]; ci++)
            for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
                const bcase *c = &bcases[ci];
                cuvil_binary_params p;
                memset(&p, 0, sizeof p);
                p.op = op;
                p.ndim = c->ndim;
                int64_t total = 1;
                for (int d = 0; d < c->ndim; d++) {
                    p.dims[d] = c->dims[d];
                    p.a_strides[d] = c->as[d];
                    p.b_strides[d] = c->bs[d];
                    total *= c->dims[d];
                }
                p.act = ktu_act_params(acts[ai]);
                float *a0 = ktu_falloc((size_t)c->a_size), *b0 = ktu_falloc((size_t)c->b_size);
                fill_bin(op, a0, c->a_size, 0);
                fill_bin(op, b0, c->b_size, 1);
                double *ref = malloc((size_t)total * sizeof(double));
                int64_t idx[4] = {0};
                for (int64_t t = 0; t < total; t++) {
                    int64_t ia = 0, ib = 0;
                    for (int d = 0; d < c->ndim; d++) {
                        ia += idx[d] * c->as[d];
                        ib += idx[d] * c->bs[d];
                    }
                    ref[t] = ktu_actp(&p.act, bin_ref(op, a0[ia], b0[ib]));
                    for (int d = c->ndim - 1; d >= 0; d--) {
                        if (++idx[d] < c->dims[d]) break;
                        idx[d] = 0;
                    }
                }
                const double rtol = op == CUVIL_BIN_POW ? 2e-6 : 1e-6, atol = 1e-7;
                float *a = ktu_falloc((size_t)c->a_size), *b = ktu_falloc((size_t)c->b_size);
                float *y = ktu_falloc((size_t)total);
                /* variants: 0 out of place, 1 y == a, 2 y == b; each public, __scalar and
                 * public on a pool of 3 threads */
                for (int v = 0; v < 9; v++) {
                    const int where = v % 3, scalar = v >= 3 && v < 6, pooled = v >= 6;
                    if ((where == 1 && !c->inplace_a) || (where == 2 && !c->inplace_b)) continue;
                    memcpy(a, a0, (size_t)c->a_size * sizeof(float));
                    memcpy(b, b0, (size_t)c->b_size * sizeof(float));
                    float *out = where == 1 ? a : where == 2 ? b : y;
                    const cuvil_pool *old = pooled ? cuvil_pool_bind(pool3) : NULL;
                    if (scalar)
                        cuvil_f32_binary__scalar(&p, a, b, out);
                    else
                        cuvil_f32_binary(&p, a, b, out);
                    if (pooled) cuvil_pool_bind(old);
                    ktu_check(out, ref, (size_t)total, rtol, atol, "binary %s %s act=%s [%s%s]",
                              bin_names[op], c->name, cuvil_act_names[acts[ai]],
                              scalar ? "__scalar" : pooled ? "public, 3 threads" : "public",
                              where == 1 ? ", y == a" : where == 2 ? ", y == b" : "");
                }
                free(a0);
                free(b0);
                free(a);
                free(b);
                free(y);
                free(ref);
            }
}

int main(void) {
    pool3 = cuvil_pool_create(3, 0, ktu_aligned_alloc, ktu_aligned_free, NULL);
    test_unary();
    test_binary();
    cuvil_pool_destroy(pool3);
    return ktu_finish("test_kernel_elementwise");
}
