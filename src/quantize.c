/* quantize.c -- cuvil-compile --quantize int8 --calibrate DIR: Cuvil's own int8 quantizer.
 *
 * 1. The float model is compiled into a temporary library with every point to quantize as an
 *    extra output (pass quantize, QUANT_CALIBRATE; passes/quant_int.h), which this process
 *    loads and runs on each calibration set: the range of each point (minmax), or a histogram
 *    of |x| over a second run (percentile, entropy). Exact zeros are left out of the histogram:
 *    every scale holds them exactly, and a Relu's output, half zeros, would otherwise pull the
 *    entropy threshold down to an eighth of the range.
 * 2. Each point gets a uint8 scale and zero point; the model is compiled again with them
 *    (QUANT_APPLY: QuantizeLinear/DequantizeLinear on the points, int8 weights per channel,
 *    folded into the integer kernels by fold_qdq) into the output.
 * 3. A .so output is loaded and run on the calibration sets next to the float one: the
 *    accuracy cost (max and mean absolute error per float output, top-1 agreement of rows of
 *    logits) goes to stderr.
 *
 * DIR holds one folder per input set with <input>.npy for each model input (the input's name,
 * '/' written '_'), or, for a model with one input, .npy files, one set each. The temporary
 * library lives in a private folder that is removed on every exit. */
#include "codegen/toolchain_int.h"
#include "frontend/onnx/onnx_int.h"
#include "passes/passes_int.h"
#include "passes/quant_int.h"
#include "quantize.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SETS 100000
#define HIST_BINS 2048

typedef struct loaded {
    void *h;
    const cuvil_model_desc *d;
    cuvil_model *m;
    void **out;                /* the outputs' buffers */
    int64_t (*odims)[CUVIL_MAX_DIMS];
    int64_t **odp;             /* odims[i], as run_shapes takes them */
    const void **in;           /* the inputs of a run, and their dims */
    const int64_t **idims;
} loaded;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sets in dir, sorted: its folders, or (*files) its .npy files. */
static cuvil_status list_sets(cuvil_ctx *ctx, const char *dir, int n_inputs, char ***out, int *n, bool *files) {
    *out = NULL, *n = 0, *files = false;
    DIR *dp = opendir(dir);
    if (!dp) return cuvil_err(ctx, CUVIL_ERR_IO, "--calibrate %s: %s", dir, strerror(errno));
    char **v = NULL;
    int cap = 0, nd = 0, nf = 0;
    cuvil_status s = CUVIL_OK;
    struct dirent *e;
    while (!s && (e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        char p[PATH_MAX];
        struct stat sb;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p || stat(p, &sb)) continue;
        const size_t l = strlen(e->d_name);
        const bool d = S_ISDIR(sb.st_mode), f = S_ISREG(sb.st_mode) && l > 4 && !strcmp(e->d_name + l - 4, ".npy");
        if (!d && !f) continue;
        if (*n == MAX_SETS) {
            s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate %s: more than %d input sets", dir, MAX_SETS);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nv = cuvil_realloc(v, sizeof *v * (size_t)cap);
            if (!nv) {
                s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
                break;
            }
            v = nv;
        }
        if (!(v[*n] = cuvil_strdup(p))) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        else (*n)++, nd += d, nf += f;
    }
    closedir(dp);
    if (!s && (!*n || (nd && nf)))
        s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate %s: %s", dir,
                      !*n ? "no input sets (a folder per set holding <input>.npy for each input, or .npy files for a "
                            "model with one input)"
                          : "holds both folders and .npy files (a folder per set, or .npy files for a model with one input)");
    if (!s && nf && n_inputs != 1)
        s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate %s: .npy files are sets of a model with one input; this one "
                      "has %d (give a folder per set holding <input>.npy for each)", dir, n_inputs);
    if (s) {
        for (int i = 0; i < *n; i++) cuvil_free(v[i]);
        cuvil_free(v);
        *n = 0;
        return s;
    }
    qsort(v, (size_t)*n, sizeof *v, cmp_str);
    *out = v, *files = nf > 0;
    return CUVIL_OK;
}

/* Loads library path and creates a context with output buffers. */
static cuvil_status load(cuvil_ctx *ctx, const char *path, loaded *L) {
    memset(L, 0, sizeof *L);
    L->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!L->h) return cuvil_err(ctx, CUVIL_ERR_INTERNAL, "--quantize: cannot load %s: %s", path, dlerror());
    const cuvil_model_desc *(*entry)(void) = (const cuvil_model_desc *(*)(void))dlsym(L->h, "cuvil_model_entry");
    L->d = entry ? entry() : NULL;
    if (!L->d) return cuvil_err(ctx, CUVIL_ERR_INTERNAL, "--quantize: %s has no model", path);
    if (L->d->create(NULL, &L->m))
        return cuvil_err(ctx, CUVIL_ERR_INTERNAL, "--quantize: creating the model of %s: %s", path,
                         L->m ? L->d->errmsg(L->m) : "failed");
    const size_t no = (size_t)L->d->n_outputs + 1, ni = (size_t)L->d->n_inputs + 1;
    L->out = cuvil_calloc(no, sizeof(void *));
    L->odims = cuvil_calloc(no, sizeof *L->odims);
    L->odp = cuvil_calloc(no, sizeof(int64_t *));
    L->in = cuvil_calloc(ni, sizeof(void *));
    L->idims = cuvil_calloc(ni, sizeof(int64_t *));
    if (!L->out || !L->odims || !L->odp || !L->in || !L->idims) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < L->d->n_outputs; i++) L->odp[i] = L->odims[i];
    for (int i = 0; i < L->d->n_outputs; i++)
        if (!(L->out[i] = cuvil_aligned_alloc(64, (L->d->outputs[i].nbytes + 63) / 64 * 64 + 64)))
            return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    return CUVIL_OK;
}

static void unload(loaded *L) {
    for (int i = 0; L->out && L->d && i < L->d->n_outputs; i++) cuvil_free(L->out[i]);
    cuvil_free(L->out);
    cuvil_free(L->odims);
    cuvil_free(L->odp);
    cuvil_free(L->in);
    cuvil_free(L->idims);
    if (L->m) L->d->destroy(L->m);
    if (L->h) dlclose(L->h);
    memset(L, 0, sizeof *L);
}

/* Reads set `set` (a folder, or one file) into ts (one per input of d). */
static cuvil_status read_set(cuvil_ctx *ctx, const cuvil_model_desc *d, const char *set, bool file, cuvil_host_tensor *ts) {
    for (int i = 0; i < d->n_inputs; i++) {
        char p[PATH_MAX], nm[256], err[512];
        const char *in = d->inputs[i].name;
        size_t k = 0;
        if (strlen(in) > 240 || !strcmp(in, ".") || !strcmp(in, ".."))
            return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "--calibrate: input '%.60s' has a name no file can be named after", in);
        for (; in[k]; k++) nm[k] = in[k] == '/' ? '_' : in[k];
        nm[k] = 0;
        for (int j = 0; !file && j < i; j++) {   /* "a/b" and "a_b" would read one file */
            const char *o = d->inputs[j].name;
            size_t l = 0;
            while (o[l] && nm[l] && (o[l] == '/' ? '_' : o[l]) == nm[l]) l++;
            if (!o[l] && !nm[l])
                return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "--calibrate: inputs '%s' and '%s' would both be read from %s.npy",
                                 o, in, nm);
        }
        if (file) snprintf(p, sizeof p, "%s", set);
        else if ((size_t)snprintf(p, sizeof p, "%s/%s.npy", set, nm) >= sizeof p)
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: the path of input '%s' in %s is too long", in, set);
        if (cuvil_tensor_read(p, &ts[i], err, sizeof err))
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: input '%s': %s", in, err);
        if (ts[i].dtype != d->inputs[i].dtype)
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: %s is %s; input '%s' takes %s", p,
                             cuvil_dtype_name(ts[i].dtype), in, cuvil_dtype_name(d->inputs[i].dtype));
        if (ts[i].ndim != d->inputs[i].ndim)
            return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: %s has %d dims; input '%s' takes %d", p, ts[i].ndim,
                             in, d->inputs[i].ndim);
        if (ts[i].dtype == CUVIL_DTYPE_FLOAT32)   /* ranges from NaN or Inf would quantize everything to nothing */
            for (size_t e = 0; e < ts[i].nbytes / sizeof(float); e++)
                if (!isfinite(((const float *)ts[i].data)[e]))
                    return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: %s holds NaN or Inf (element %zu); calibration "
                                     "sets must be finite", p, e);
    }
    return CUVIL_OK;
}

/* Runs L on the inputs ts; the outputs in L->out, their dims in L->odims. */
static cuvil_status run(cuvil_ctx *ctx, loaded *L, const cuvil_host_tensor *ts, const char *set) {
    for (int i = 0; i < L->d->n_inputs; i++) L->in[i] = ts[i].data, L->idims[i] = ts[i].dims;
    if (L->d->run_shapes(L->m, L->in, L->idims, L->out, L->odp))
        return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: set %s: %s", set, L->d->errmsg(L->m));
    return CUVIL_OK;
}

static int64_t out_count(const loaded *L, int i) {
    int64_t c = 1;
    for (int k = 0; k < L->d->outputs[i].ndim; k++) c *= L->odims[i][k];
    return c;
}

/* Runs the calibration library on every set; pass 0 the ranges, pass 1 the histograms. */
static cuvil_status collect(cuvil_ctx *ctx, loaded *L, char **sets, int n_sets, bool files, cuvil_quant_state *st, int pass) {
    cuvil_host_tensor *ts = cuvil_calloc((size_t)L->d->n_inputs + 1, sizeof *ts);
    cuvil_status s = ts ? CUVIL_OK : cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (int k = 0; !s && k < n_sets; k++) {
        memset(ts, 0, sizeof *ts * (size_t)L->d->n_inputs);
        if (!(s = read_set(ctx, L->d, sets[k], files, ts)) && !(s = run(ctx, L, ts, sets[k]))) {
            for (int p = 0; p < st->n_pts; p++) {
                cuvil_qpoint *q = &st->pts[p];
                const int o = st->n_model_outputs + p;
                const float *x = L->out[o];
                const int64_t c = out_count(L, o);
                if (pass == 0) {
                    for (int64_t i = 0; i < c; i++) {
                        if (!isfinite(x[i])) continue;
                        if (x[i] < q->lo) q->lo = x[i];
                        if (x[i] > q->hi) q->hi = x[i];
                    }
                    q->count += (uint64_t)c;
                    continue;
                }
                const double amax = fmax(-q->lo, q->hi);
                if (!(amax > 0)) continue;
                for (int64_t i = 0; i < c; i++) {   /* (zeros, a Relu's half, are exact at any scale: not counted) */
                    if (!isfinite(x[i]) || x[i] == 0) continue;
                    int b = (int)(fabs((double)x[i]) / amax * HIST_BINS);
                    q->hist[b >= HIST_BINS ? HIST_BINS - 1 : b]++;
                }
            }
        }
        for (int i = 0; i < L->d->n_inputs; i++) cuvil_host_tensor_free(&ts[i]);
    }
    cuvil_free(ts);
    return s;
}

/* The threshold (in bins) below which a fraction p of |x| lies. */
static int percentile_bin(const uint64_t *h, double p) {
    uint64_t total = 0, acc = 0;
    for (int i = 0; i < HIST_BINS; i++) total += h[i];
    for (int i = 0; i < HIST_BINS; i++) {
        acc += h[i];
        if ((double)acc >= p * (double)total) return i + 1;
    }
    return HIST_BINS;
}

/* The entropy threshold (in bins): the one whose histogram, clipped there and quantized to
 * `levels` bins, loses the least information (KL divergence; TensorRT's calibration). */
static int entropy_bin(const uint64_t *h, int levels) {
    double best = INFINITY;
    int best_i = HIST_BINS;
    double *P = cuvil_malloc(sizeof(double) * HIST_BINS), *Q = cuvil_malloc(sizeof(double) * HIST_BINS);
    if (!P || !Q) {
        cuvil_free(P);
        cuvil_free(Q);
        return HIST_BINS;
    }
    for (int i = levels; i <= HIST_BINS; i++) {
        double outl = 0, tot = 0;
        for (int k = 0; k < HIST_BINS; k++) {
            if (k < i) P[k] = (double)h[k];
            else outl += (double)h[k];
        }
        P[i - 1] += outl;
        for (int k = 0; k < i; k++) tot += P[k];
        if (!(tot > 0)) continue;
        /* Q: the first i bins merged into `levels`, each spread back over its non-empty bins */
        for (int j = 0; j < levels; j++) {
            const int a = (int)((int64_t)j * i / levels), b = (int)((int64_t)(j + 1) * i / levels);
            double sum = 0;
            int nz = 0;
            for (int k = a; k < b; k++) sum += (double)h[k], nz += h[k] != 0;
            for (int k = a; k < b; k++) Q[k] = h[k] && nz ? sum / nz : 0;
        }
        double qt = 0, kl = 0;
        for (int k = 0; k < i; k++) qt += Q[k];
        for (int k = 0; k < i; k++) {
            if (P[k] <= 0) continue;
            const double pk = P[k] / tot, qk = qt > 0 ? Q[k] / qt : 0;
            kl += qk > 0 ? pk * log(pk / qk) : pk * 30;   /* (mass Q lacks: a large penalty) */
        }
        if (kl < best) best = kl, best_i = i;
    }
    cuvil_free(P);
    cuvil_free(Q);
    return best_i;
}

/* Each point's scale and zero point from what the calibration saw. */
static void params(cuvil_quant_state *st, cuvil_calibration method) {
    for (int p = 0; p < st->n_pts; p++) {
        cuvil_qpoint *q = &st->pts[p];
        double lo = q->lo < 0 ? q->lo : 0, hi = q->hi > 0 ? q->hi : 0;   /* zero exactly representable */
        const double amax = fmax(-lo, hi);
        if (method != CUVIL_CALIB_MINMAX && amax > 0 && q->hist) {
            const int b = method == CUVIL_CALIB_PERCENTILE ? percentile_bin(q->hist, 0.99999) : entropy_bin(q->hist, lo < 0 ? 128 : 256);
            const double t = amax * b / HIST_BINS;
            if (hi > t) hi = t;
            if (lo < -t) lo = -t;
        }
        double sc = (hi - lo) / 255.0;
        if (!(sc > 0) || !isfinite(sc) || (float)sc < 1e-30f) sc = 1.0;   /* (a point that is always 0) */
        double z = nearbyint(-lo / sc);
        q->scale = (float)sc;
        q->zero_point = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
        q->lo = lo, q->hi = hi;
    }
}

/* The accuracy report: the float model's outputs (F, the model's own first) against the
 * quantized one's (Q) on every set. */
static cuvil_status report(cuvil_ctx *ctx, loaded *F, loaded *Q, char **sets, int n_sets, bool files) {
    const int n = Q->d->n_outputs;
    double *mx = cuvil_calloc((size_t)n + 1, sizeof(double)), *sum = cuvil_calloc((size_t)n + 1, sizeof(double));
    int64_t *cnt = cuvil_calloc((size_t)n + 1, sizeof(int64_t)), *rows = cuvil_calloc((size_t)n + 1, sizeof(int64_t)),
            *agree = cuvil_calloc((size_t)n + 1, sizeof(int64_t)), *bad = cuvil_calloc((size_t)n + 1, sizeof(int64_t));
    cuvil_host_tensor *ts = cuvil_calloc((size_t)Q->d->n_inputs + 1, sizeof *ts);
    cuvil_status s = !mx || !sum || !cnt || !rows || !agree || !bad || !ts ? cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory") : CUVIL_OK;
    for (int k = 0; !s && k < n_sets; k++) {
        memset(ts, 0, sizeof *ts * (size_t)Q->d->n_inputs);
        if (!(s = read_set(ctx, Q->d, sets[k], files, ts)) && !(s = run(ctx, F, ts, sets[k])) && !(s = run(ctx, Q, ts, sets[k]))) {
            for (int o = 0; o < n; o++) {
                const cuvil_tensor_info *t = &Q->d->outputs[o];
                if (t->dtype != CUVIL_DTYPE_FLOAT32 || t->is_sequence) continue;
                const float *a = F->out[o], *b = Q->out[o];
                const int64_t c = out_count(Q, o), last = t->ndim ? Q->odims[o][t->ndim - 1] : 1;
                for (int64_t i = 0; i < c; i++) {
                    const double e = fabs((double)a[i] - (double)b[i]);
                    if (!isfinite(e)) {   /* (a NaN or Inf on one side only, or Inf on both) */
                        bad[o] += !(a[i] == b[i]);
                        continue;
                    }
                    if (e > mx[o]) mx[o] = e;
                    sum[o] += e;
                    cnt[o]++;
                }
                for (int64_t r = 0; last >= 2 && r < c / last; r++) {   /* top-1 of each row of logits */
                    int64_t ia = 0, ib = 0;
                    for (int64_t j = 1; j < last; j++) {
                        if (a[r * last + j] > a[r * last + ia]) ia = j;
                        if (b[r * last + j] > b[r * last + ib]) ib = j;
                    }
                    rows[o]++, agree[o] += ia == ib;
                }
            }
        }
        for (int i = 0; i < Q->d->n_inputs; i++) cuvil_host_tensor_free(&ts[i]);
    }
    for (int o = 0; !s && o < n; o++) {
        if (!cnt[o] && !bad[o]) continue;
        fprintf(stderr, "cuvil: quantize: output '%s' against float32 on the %d calibration sets: max abs error %.4g, mean %.4g",
                Q->d->outputs[o].name, n_sets, mx[o], sum[o] / (double)cnt[o]);
        if (rows[o]) fprintf(stderr, ", top-1 agreement %lld of %lld rows (%.1f%%)", (long long)agree[o], (long long)rows[o],
                             100.0 * (double)agree[o] / (double)rows[o]);
        if (bad[o]) fprintf(stderr, "; %lld values NaN or Inf on one side only", (long long)bad[o]);
        fprintf(stderr, "\n");
    }
    cuvil_free(mx);
    cuvil_free(sum);
    cuvil_free(cnt);
    cuvil_free(rows);
    cuvil_free(agree);
    cuvil_free(bad);
    cuvil_free(ts);
    return s;
}

cuvil_status cuvil_quantize_compile(cuvil_ctx *ctx, const cuvil_onnx_model *model, const cuvil_options *o,
                                    const char *model_path, const char *target, const char *prefix, const char *output) {
    if (!o->calibrate) return cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--quantize int8 needs --calibrate DIR (input sets)");
    cuvil_quant_state st;
    memset(&st, 0, sizeof st);
    st.o = o;
    char **sets = NULL, tmp[PATH_MAX] = "", lib[PATH_MAX + 32];
    int n_sets = 0;
    bool files = false;
    loaded F, Q;
    memset(&F, 0, sizeof F);
    memset(&Q, 0, sizeof Q);
    cir_graph *g = NULL;
    const char *td = getenv("TMPDIR");
    cuvil_status s = CUVIL_OK;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/cuvil-calibrate-XXXXXX", td && *td ? td : "/tmp") >= sizeof tmp || !mkdtemp(tmp))
        return cuvil_err(ctx, CUVIL_ERR_IO, "--quantize: cannot make a temporary folder: %s", strerror(errno));
    if (!cuvil_tmp_register(tmp)) {
        rmdir(tmp);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    }
    snprintf(lib, sizeof lib, "%s/calibrate.so", tmp);
    /* 1. the float model with the points as outputs, run on the sets */
    cuvil_options o1 = *o;
    o1.emit = CUVIL_EMIT_SO;
    o1.precision = CUVIL_PRECISION_FP32;
    o1.activations = CUVIL_PRECISION_FP32;   /* (the ranges of the float32 model's values) */
    o1.name = NULL;
    st.mode = QUANT_CALIBRATE;
    if (!(s = cuvil_onnx_build(ctx, model, o, &g)) && !(s = cir_graph_bind_syms(g))) {
        g->quant = &st;
        /* (for this machine: the output's target may be one it cannot run) */
        o1.target = cuvil_host_target();
        s = cuvil_compile_cir(ctx, g, &o1, model_path, o1.target, "cuvil_calibrate", lib);
    }
    cir_graph_free(g);
    g = NULL;
    if (!s) s = load(ctx, lib, &F);
    if (!s) s = list_sets(ctx, o->calibrate, F.d->n_inputs, &sets, &n_sets, &files);
    if (!s && F.d->n_outputs != st.n_model_outputs + st.n_names)
        s = cuvil_err(ctx, CUVIL_ERR_INTERNAL, "--quantize: the calibration model has %d outputs, not %d", F.d->n_outputs,
                      st.n_model_outputs + st.n_names);
    if (!s) {
        st.n_pts = st.n_names;
        st.pts = cuvil_calloc((size_t)st.n_pts + 1, sizeof *st.pts);
        if (!st.pts) s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (int p = 0; !s && p < st.n_pts; p++) {
            st.pts[p].name = st.names[p];
            st.pts[p].lo = INFINITY, st.pts[p].hi = -INFINITY;
            if (o->calibration != CUVIL_CALIB_MINMAX && !(st.pts[p].hist = cuvil_calloc(HIST_BINS, sizeof(uint64_t))))
                s = cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        }
    }
    if (!s) s = collect(ctx, &F, sets, n_sets, files, &st, 0);
    if (!s && o->calibration != CUVIL_CALIB_MINMAX) s = collect(ctx, &F, sets, n_sets, files, &st, 1);
    for (int p = 0; !s && p < st.n_pts; p++)
        if (!(st.pts[p].lo <= st.pts[p].hi))
            s = cuvil_err(ctx, CUVIL_ERR_INVALID_ARG, "--calibrate: '%s' took no finite value on the %d sets (NaN or Inf "
                          "everywhere): it cannot be quantized", st.pts[p].name, n_sets);
    if (!s) params(&st, o->calibration);
    /* 2. the model with the points quantized, into the output */
    st.mode = QUANT_APPLY;
    if (!s && !(s = cuvil_onnx_build(ctx, model, o, &g)) && !(s = cir_graph_bind_syms(g))) {
        g->quant = &st;
        s = cuvil_compile_cir(ctx, g, o, model_path, target, prefix, output);
    }
    cir_graph_free(g);
    if (!s) {
        static const char *const meth[] = {"minmax", "percentile", "entropy"};
        fprintf(stderr, "cuvil: quantize: %d convolutions and matrix products in int8, %d activations quantized (uint8, "
                        "%s calibration on %d input sets)", st.n_nodes, st.n_pts, meth[o->calibration], n_sets);
        if (st.n_lstm) fprintf(stderr, "; %d LSTM%s on int8 weights (X and h quantized as they run)", st.n_lstm, st.n_lstm > 1 ? "s" : "");
        if (st.n_kept) fprintf(stderr, "; %d kept in float32: %s%s", st.n_kept, st.kept, strlen(st.kept) > sizeof st.kept - 90 ? ", ..." : "");
        fprintf(stderr, "\n");
    }
    /* 3. the accuracy cost */
    if (!s && o->emit == CUVIL_EMIT_SO) {
        char real[PATH_MAX];
        if (!realpath(output, real)) s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", output, strerror(errno));
        /* (a library for another machine, or one whose features this CPU lacks: no report, and no error) */
        if (!s && load(ctx, real, &Q) == CUVIL_OK) {
            s = report(ctx, &F, &Q, sets, n_sets, files);
        } else if (!s) {
            fprintf(stderr, "cuvil: quantize: the accuracy cost is not measured: this machine cannot run the %s library "
                            "(%s)\n", target, cuvil_errmsg(ctx));
            cuvil_err_clear(ctx);
            ctx->status = CUVIL_OK;
        }
    } else if (!s) {
        fprintf(stderr, "cuvil: quantize: the accuracy cost is measured for a .so output only\n");
    }
    unload(&Q);
    unload(&F);
    for (int i = 0; i < n_sets; i++) cuvil_free(sets[i]);
    cuvil_free(sets);
    for (int p = 0; p < st.n_pts; p++) cuvil_free(st.pts[p].hist);
    cuvil_free(st.pts);
    for (int i = 0; i < st.n_names; i++) cuvil_free(st.names[i]);
    cuvil_free(st.names);
    cuvil_tmp_remove(tmp);
    return s;
}

cuvil_status cuvil_int4_weights_compile(cuvil_ctx *ctx, cir_graph *g, const cuvil_options *o, const char *model_path,
                                        const char *target, const char *prefix, const char *output) {
    cuvil_quant_state st;
    memset(&st, 0, sizeof st);
    st.o = o;
    st.mode = QUANT_INT4W;
    g->quant = &st;
    cuvil_status s = cuvil_compile_cir(ctx, g, o, model_path, target, prefix, output);
    g->quant = NULL;
    if (!s) {
        fprintf(stderr, "cuvil: quantize: %d MatMul/Gemm weights in 4 bits (blocks of 32, asymmetric)", st.n_nodes);
        if (st.n_kept) fprintf(stderr, "; %d kept in float32: %s%s", st.n_kept, st.kept, strlen(st.kept) > sizeof st.kept - 90 ? ", ..." : "");
        fprintf(stderr, "\n");
    }
    return s;
}
