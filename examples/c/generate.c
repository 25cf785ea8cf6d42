/*
 * generate.c -- greedy text generation with GPT-2 compiled by Cuvil, from plain C.
 *
 * Two models, compiled once each with symbolic dims (tools/models/build_transformers.py makes
 * the ONNX files):
 *   the prompt pass   input_ids [batch, seq] -> logits [batch, seq, vocab] and the KV cache,
 *                     present.<i>.key / .value [batch, heads, seq, head_dim], i < layers
 *   the decode step   input_ids [batch, 1] and past_key_values.<i>.key / .value
 *                     [batch, heads, past, head_dim] -> logits [batch, 1, vocab] and present.*
 *                     [batch, heads, past + 1, head_dim]
 *
 *     cuvil-compile --model gpt2.onnx --output out/gpt2.so --dim batch=1 --dim seq=1:1024
 *     cuvil-compile --model gpt2_decode.onnx --output out/gpt2_decode.so --dim batch=1 \
 *         --dim past=0:1023
 *     make generate
 *     ./generate out/gpt2.so out/gpt2_decode.so 32 464 2068 7586 21831 [THREADS]
 *
 * The program runs the prompt pass on the token ids, then one decode step per new token,
 * each time taking the token with the largest logit. The caller (this program) keeps the KV
 * cache: each step's present.* are the next step's past_key_values.*, in two sets of buffers
 * that trade places. It prints the new token ids, the smallest gap between the two largest
 * logits over the steps (a near-tie would make greedy decoding fragile), and the time per step.
 *
 * The models are loaded with dlopen through the entry point every Cuvil model exports
 * (cuvil_model_entry), so one program serves any pair; only cuvil_model.h is needed.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <float.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuvil_model.h"

#define MAX_TENSORS 64

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("generate: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The model library at path: its descriptor, or NULL after printing why. */
static const cuvil_model_desc *open_model(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fail("%s: %s", path, dlerror());
        return NULL;
    }
    cuvil_model_entry_fn entry = NULL;
    *(void **)&entry = dlsym(h, CUVIL_MODEL_ENTRY_SYMBOL);
    const cuvil_model_desc *d = entry ? entry() : NULL;
    if (!d || d->abi_version != CUVIL_MODEL_ABI_VERSION) {
        fail("%s: not a Cuvil model of ABI version %d", path, CUVIL_MODEL_ABI_VERSION);
        return NULL;
    }
    return d;
}

/* The model's cache layout, from the prompt model's first present output. */
typedef struct kv_shape {
    int n;              /* present.* outputs (2 per layer) */
    int64_t heads, head_dim, max_len;
    int64_t vocab;
} kv_shape;

static int check_models(const cuvil_model_desc *p, const cuvil_model_desc *d, kv_shape *kv) {
    if (p->n_inputs != 1 || p->inputs[0].dtype != CUVIL_DTYPE_INT64 || p->inputs[0].ndim != 2)
        return fail("%s: the prompt model takes one int64 input [batch, seq]", p->name);
    if (p->n_outputs < 3 || p->n_outputs > MAX_TENSORS || p->outputs[0].ndim != 3 || p->outputs[1].ndim != 4)
        return fail("%s: the prompt model gives logits [batch, seq, vocab] and present.* [batch, heads, seq, dim]",
                    p->name);
    kv->n = p->n_outputs - 1;
    kv->vocab = p->outputs[0].dims[2];
    kv->heads = p->outputs[1].dims[1];
    kv->head_dim = p->outputs[1].dims[3];
    if (d->n_inputs != 1 + kv->n || d->n_outputs != 1 + kv->n || d->inputs[0].dtype != CUVIL_DTYPE_INT64)
        return fail("%s: the decode model takes input_ids and %d past_key_values.*, and gives logits and %d "
                    "present.*", d->name, kv->n, kv->n);
    kv->max_len = d->outputs[1].dims[2];   /* past + 1 at the top of its range */
    for (int i = 1; i <= kv->n; i++) {
        const cuvil_tensor_info *a = &d->inputs[i], *b = &d->outputs[i], *c = &p->outputs[i];
        if (a->ndim != 4 || b->ndim != 4 || a->dtype != CUVIL_DTYPE_FLOAT32 || b->dtype != CUVIL_DTYPE_FLOAT32 ||
            a->dims[1] != kv->heads || a->dims[3] != kv->head_dim || b->dims[1] != kv->heads ||
            b->dims[3] != kv->head_dim || c->dims[1] != kv->heads || c->dims[3] != kv->head_dim)
            return fail("%s: past/present %d are not [batch, %lld, len, %lld] float32", d->name, i,
                        (long long)kv->heads, (long long)kv->head_dim);
    }
    if (d->outputs[0].dims[2] != kv->vocab) return fail("the two models' vocabularies differ");
    return 0;
}

/* The largest of n logits (the first one on ties) and its lead over the second largest. */
static int64_t argmax(const float *x, int64_t n, double *gap) {
    int64_t best = 0;
    float b1 = -FLT_MAX, b2 = -FLT_MAX;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] > b1) {
            b2 = b1;
            b1 = x[i];
            best = i;
        } else if (x[i] > b2) {
            b2 = x[i];
        }
    }
    *gap = (double)b1 - (double)b2;
    return best;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s PROMPT.so DECODE.so N_NEW TOKEN_ID... [-t THREADS]\n", argv[0]);
        return 2;
    }
    int threads = 1, n_prompt = 0;
    const int n_new = atoi(argv[3]);
    int64_t *tokens = calloc((size_t)argc + (n_new > 0 ? (size_t)n_new : 0), sizeof *tokens);
    if (!tokens) return fail("out of memory");
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            threads = atoi(argv[++i]);
            continue;
        }
        char *end;
        long long v = strtoll(argv[i], &end, 10);
        if (*end || end == argv[i] || v < 0) return fail("not a token id: %s", argv[i]);
        tokens[n_prompt++] = v;
    }
    if (n_new < 1 || n_prompt < 1) return fail("want at least one token id and N_NEW >= 1");
    const cuvil_model_desc *pd = open_model(argv[1]), *dd = pd ? open_model(argv[2]) : NULL;
    kv_shape kv = {0};
    if (!pd || !dd || check_models(pd, dd, &kv)) return 1;
    for (int i = 0; i < n_prompt; i++)
        if (tokens[i] >= kv.vocab) return fail("token id %lld is past the vocabulary (%lld)", (long long)tokens[i],
                                               (long long)kv.vocab);
    const int64_t total = (int64_t)n_prompt + n_new - 1;   /* the cache after the last step */
    if (total > kv.max_len) return fail("%d + %d tokens need a cache of %lld; the decode model takes %lld",
                                        n_prompt, n_new, (long long)total, (long long)kv.max_len);

    /* two sets of cache buffers of the largest size, and the logits of the prompt pass */
    const size_t kv_bytes = (size_t)(kv.heads * (total + 1) * kv.head_dim) * sizeof(float);
    float *cache[2][MAX_TENSORS] = {{0}};
    float *logits = malloc((size_t)(n_prompt * kv.vocab) * sizeof(float));
    int rc = 1;
    cuvil_model *pm = NULL, *dm = NULL;
    int oom = !logits;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < kv.n; i++) oom |= !(cache[s][i] = malloc(kv_bytes));
    if (oom) {
        fail("out of memory");
        goto done;
    }
    cuvil_model_options opts = {.n_threads = threads};
    if (pd->create(&opts, &pm) != CUVIL_OK || dd->create(&opts, &dm) != CUVIL_OK) {
        fail("create failed: %s", pm ? (dm ? dd->errmsg(dm) : pd->errmsg(pm)) : "out of memory");
        goto done;
    }

    /* the prompt pass: logits for every position, and the cache of the prompt */
    double t0 = now_ms(), min_gap = DBL_MAX;
    {
        const int64_t ids_dims[2] = {1, n_prompt};
        const void *ins[1] = {tokens};
        const int64_t *in_dims[1] = {ids_dims};
        void *outs[MAX_TENSORS + 1] = {logits};
        for (int i = 0; i < kv.n; i++) outs[1 + i] = cache[0][i];
        if (pd->run_shapes(pm, ins, in_dims, outs, NULL) != CUVIL_OK) {
            fail("prompt pass: %s", pd->errmsg(pm));
            goto done;
        }
    }
    double gap;
    tokens[n_prompt] = argmax(logits + (n_prompt - 1) * kv.vocab, kv.vocab, &gap);
    min_gap = gap;
    double t_prompt = now_ms() - t0;

    /* the decode steps: step k reads the cache of n_prompt + k - 1 tokens from set (k - 1) % 2
     * and writes n_prompt + k tokens into the other set */
    t0 = now_ms();
    for (int k = 1; k < n_new; k++) {
        const int64_t past = n_prompt + k - 1;
        const int64_t ids_dims[2] = {1, 1}, kv_dims[4] = {1, kv.heads, past, kv.head_dim};
        const void *ins[MAX_TENSORS + 1] = {&tokens[past]};
        const int64_t *in_dims[MAX_TENSORS + 1] = {ids_dims};
        void *outs[MAX_TENSORS + 1] = {logits};
        for (int i = 0; i < kv.n; i++) {
            ins[1 + i] = cache[(k - 1) % 2][i];
            in_dims[1 + i] = kv_dims;
            outs[1 + i] = cache[k % 2][i];
        }
        if (dd->run_shapes(dm, ins, in_dims, outs, NULL) != CUVIL_OK) {
            fail("decode step %d: %s", k, dd->errmsg(dm));
            goto done;
        }
        tokens[past + 1] = argmax(logits, kv.vocab, &gap);
        min_gap = gap < min_gap ? gap : min_gap;
    }
    double t_decode = now_ms() - t0;

    printf("tokens:");
    for (int i = 0; i < n_new; i++) printf(" %lld", (long long)tokens[n_prompt + i]);
    printf("\nmin_gap: %.6g\n", min_gap);
    printf("prompt pass %.2f ms (%d tokens), %d decode steps %.2f ms (%.2f ms each), %d thread%s\n", t_prompt, n_prompt,
           n_new - 1, t_decode, n_new > 1 ? t_decode / (n_new - 1) : 0.0, threads, threads == 1 ? "" : "s");
    rc = 0;

done:
    if (pm) pd->destroy(pm);
    if (dm) dd->destroy(dm);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < kv.n; i++) free(cache[s][i]);
    free(logits);
    free(tokens);
    return rc;
}
