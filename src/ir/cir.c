/* cir.c -- CIR graph construction, attributes, constants, use counts. See cir.h. */
#include "ir/cir.h"

#include <limits.h>
#include <math.h>
#include <string.h>

cir_graph *cir_graph_new(cuvil_ctx *ctx) {
    cir_graph *g = cuvil_calloc(1, sizeof *g);
    if (!g) {
        cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->ctx = ctx;
    g->name = "model";
    cuvil_limits_init(&g->limits);
    return g;
}

void cir_graph_free(cir_graph *g) {
    if (!g) return;
    cuvil_free(g->values);
    cuvil_free(g->nodes);
    cuvil_arena_free(&g->arena);
    cuvil_free(g);
}

static bool grow(cir_graph *g, void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    if (need > INT_MAX / 2) {
        cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED, "the graph has too many values or nodes");
        return false;
    }
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = cuvil_realloc(*arr, (size_t)nc * elem);
    if (!p) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory growing the graph");
        return false;
    }
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return true;
}

int cir_value_add(cir_graph *g, const char *name, cir_value_kind kind) {
    if (!grow(g, (void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(cir_value)))
        return -1;
    int id = g->n_values++;
    cir_value *v = &g->values[id];
    memset(v, 0, sizeof *v);
    v->id = id;
    v->name = cuvil_arena_strdup(&g->arena, name ? name : "");
    v->kind = kind;
    v->ndim = -1;
    v->producer = -1;
    v->output_index = -1;
    v->decl_ndim = -1;
    for (int i = 0; i < CIR_MAX_DIMS; i++) v->dim_sym[i] = -1;
    if (!v->name) {
        g->n_values--;
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return -1;
    }
    return id;
}

void *cir_value_make_const(cir_graph *g, cir_value *v) {
    size_t nb = cir_nbytes(v);
    if (g->const_bytes + nb > g->limits.total_bytes || nb > g->limits.total_bytes) {
        cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED,
                  "constant '%s' (%zu bytes) brings the model's constants over the limit total_bytes=%llu (raise it "
                  "with --limit total_bytes=N)", v->name, nb, (unsigned long long)g->limits.total_bytes);
        return NULL;
    }
    void *d = cuvil_arena_alloc(&g->arena, nb);
    if (!d) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory for constant '%s' (%zu bytes)", v->name, nb);
        return NULL;
    }
    v->kind = CIR_VAL_CONST;
    v->data = d;
    g->const_bytes += nb;
    return d;
}

int cir_const_add(cir_graph *g, const char *name, cuvil_dtype dtype, int ndim,
                  const int64_t *dims, const void *data) {
    CUVIL_ASSERT(ndim >= 0 && ndim <= CIR_MAX_DIMS);
    int64_t d0[CIR_MAX_DIMS];   /* dims may point into g->values, which cir_value_add may move */
    if (ndim) memcpy(d0, dims, sizeof(int64_t) * (size_t)ndim);
    int id = cir_value_add(g, name, CIR_VAL_CONST);
    if (id < 0) return -1;
    cir_value *v = &g->values[id];
    cir_set_shape(v, dtype, ndim, d0);
    void *d = cir_value_make_const(g, v);
    if (!d) return -1;
    if (data) memcpy(d, data, cir_nbytes(v));
    return id;
}

int cir_node_add(cir_graph *g, const char *op, const char *name, int n_in, const int *in,
                 int n_out, const int *out) {
    if (!grow(g, (void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(cir_node))) return -1;
    int idx = g->n_nodes;
    cir_node *n = &g->nodes[idx];
    memset(n, 0, sizeof *n);
    n->id = idx;
    n->op = cuvil_arena_strdup(&g->arena, op);
    n->domain = "";
    n->name = cuvil_arena_strdup(&g->arena, name);
    n->opset = g->opset;
    n->residual = -1;
    n->in = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(n_in + 1));
    n->out = cuvil_arena_alloc(&g->arena, sizeof(int) * (size_t)(n_out + 1));
    if (!n->op || !n->name || !n->in || !n->out) {
        cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        return -1;
    }
    n->n_in = n_in;
    n->n_out = n_out;
    if (n_in) memcpy(n->in, in, sizeof(int) * (size_t)n_in);
    if (n_out) memcpy(n->out, out, sizeof(int) * (size_t)n_out);
    g->n_nodes++;
    return idx;
}

int64_t cir_numel(const cir_value *v) {
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->dims[i];
    return n;
}

size_t cir_nbytes(const cir_value *v) {
    return (size_t)cir_numel(v) * cuvil_dtype_size(v->dtype);
}

bool cir_is_const(const cir_value *v) { return v && v->kind == CIR_VAL_CONST; }

void cir_set_shape(cir_value *v, cuvil_dtype dtype, int ndim, const int64_t *dims) {
    CUVIL_ASSERT(ndim >= 0 && ndim <= CIR_MAX_DIMS);
    v->dtype = dtype;
    v->ndim = ndim;
    for (int i = 0; i < CIR_MAX_DIMS; i++) {
        v->dims[i] = i < ndim ? dims[i] : 0;
        v->dim_sym[i] = -1;
    }
}

const char *cir_dtype_short(cuvil_dtype t) {
    switch (t) {
    case CUVIL_DTYPE_FLOAT32: return "f32";
    case CUVIL_DTYPE_FLOAT64: return "f64";
    case CUVIL_DTYPE_FLOAT16: return "f16";
    case CUVIL_DTYPE_BFLOAT16: return "bf16";
    case CUVIL_DTYPE_INT64: return "i64";
    case CUVIL_DTYPE_INT32: return "i32";
    case CUVIL_DTYPE_INT16: return "i16";
    case CUVIL_DTYPE_INT8: return "i8";
    case CUVIL_DTYPE_UINT8: return "u8";
    case CUVIL_DTYPE_UINT16: return "u16";
    case CUVIL_DTYPE_UINT32: return "u32";
    case CUVIL_DTYPE_UINT64: return "u64";
    case CUVIL_DTYPE_BOOL: return "bool";
    case CUVIL_DTYPE_STRING: return "string";
    default: return "?";
    }
}

/* Appends printf output to buf[*o..len), truncating; *o never passes len - 1. */
static void put(char *buf, size_t len, size_t *o, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *o, const char *fmt, ...) {
    if (*o + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *o, len - *o, fmt, ap);
    va_end(ap);
    if (n > 0) *o = *o + (size_t)n < len ? *o + (size_t)n : len - 1;
}

char *cir_shape_str(const cir_graph *g, const cir_value *v, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    put(buf, len, &o, "%s", cir_dtype_short(v->dtype));
    if (v->ndim < 0) {
        put(buf, len, &o, "[?]");
        return buf;
    }
    put(buf, len, &o, "[");
    for (int i = 0; i < v->ndim; i++) {
        if (i) put(buf, len, &o, ",");
        if (v->dim_sym[i] >= 0) {
            char safe[68];
            size_t k = 0;
            for (const char *p = g->syms[v->dim_sym[i]].name; *p && k < 64; p++) safe[k++] = cuvil_safe_char((unsigned char)*p);
            safe[k] = 0;
            put(buf, len, &o, "%s=%lld", safe, (long long)v->dims[i]);
        } else {
            put(buf, len, &o, "%lld", (long long)v->dims[i]);
        }
    }
    put(buf, len, &o, "]");
    return buf;
}

cuvil_status cir_check_shape(cir_graph *g, const cir_node *n, const cir_value *v) {
    char why[256], sh[256];
    if (cuvil_shape_ok(&g->limits, cuvil_dtype_size(v->dtype), v->ndim, v->dims, why, sizeof why)) return CUVIL_OK;
    if (n) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "output '%s' %s: %s", v->name, cir_shape_str(g, v, sh, sizeof sh), why);
    return cuvil_err(g->ctx, CUVIL_ERR_UNSUPPORTED, "'%s' %s: %s", v->name, cir_shape_str(g, v, sh, sizeof sh), why);
}

/* ===== Attributes ===================================================================== */
const cir_attr *cir_attr_find(const cir_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t cir_attr_int(const cir_node *n, const char *name, int64_t def) {
    const cir_attr *a = cir_attr_find(n, name);
    return a && a->type == CIR_ATTR_INT ? a->i : def;
}

float cir_attr_float(const cir_node *n, const char *name, float def) {
    const cir_attr *a = cir_attr_find(n, name);
    if (!a) return def;
    if (a->type == CIR_ATTR_FLOAT) return a->f;
    if (a->type == CIR_ATTR_INT) return (float)a->i;
    return def;
}

const char *cir_attr_str(const cir_node *n, const char *name, const char *def) {
    const cir_attr *a = cir_attr_find(n, name);
    return a && a->type == CIR_ATTR_STRING ? a->s : def;
}

int cir_attr_ints(const cir_node *n, const char *name, const int64_t **out) {
    const cir_attr *a = cir_attr_find(n, name);
    if (!a || a->type != CIR_ATTR_INTS) {
        *out = NULL;
        return -1;
    }
    *out = a->ints;
    return a->n;
}

/* ===== Constant element access ========================================================== */
int64_t cir_f64_to_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

uint16_t cir_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {                                   /* subnormal half, or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;   /* may carry into the exponent: fine */
    return (uint16_t)(sign | h);
}

uint16_t cir_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

int64_t cir_const_i64(const cir_value *v, int64_t i) {
    const void *d = v->data;
    switch (v->dtype) {
    case CUVIL_DTYPE_INT64: return ((const int64_t *)d)[i];
    case CUVIL_DTYPE_INT32: return ((const int32_t *)d)[i];
    case CUVIL_DTYPE_INT16: return ((const int16_t *)d)[i];
    case CUVIL_DTYPE_INT8: return ((const int8_t *)d)[i];
    case CUVIL_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case CUVIL_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case CUVIL_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case CUVIL_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
    case CUVIL_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case CUVIL_DTYPE_FLOAT32: return cir_f64_to_i64(((const float *)d)[i]);
    case CUVIL_DTYPE_FLOAT64: return cir_f64_to_i64(((const double *)d)[i]);
    case CUVIL_DTYPE_FLOAT16: case CUVIL_DTYPE_BFLOAT16: return cir_f64_to_i64(cir_const_f64(v, i));
    default: CUVIL_ASSERT(!"cir_const_i64: unsupported dtype");
    }
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else {
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

double cir_const_f64(const cir_value *v, int64_t i) {
    const void *d = v->data;
    switch (v->dtype) {
    case CUVIL_DTYPE_FLOAT32: return ((const float *)d)[i];
    case CUVIL_DTYPE_FLOAT64: return ((const double *)d)[i];
    case CUVIL_DTYPE_FLOAT16: return half_to_float(((const uint16_t *)d)[i]);
    case CUVIL_DTYPE_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t *)d)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    default: return (double)cir_const_i64(v, i);
    }
}

void cir_const_set_f64(cir_value *v, int64_t i, double x) {
    void *d = v->data;
    switch (v->dtype) {
    case CUVIL_DTYPE_FLOAT32: ((float *)d)[i] = (float)x; break;
    case CUVIL_DTYPE_FLOAT64: ((double *)d)[i] = x; break;
    case CUVIL_DTYPE_FLOAT16: ((uint16_t *)d)[i] = cir_f32_to_f16((float)x); break;
    case CUVIL_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = cir_f32_to_bf16((float)x); break;
    case CUVIL_DTYPE_BOOL: ((uint8_t *)d)[i] = x != 0; break;
    default: cir_const_set_i64(v, i, cir_f64_to_i64(x)); break;
    }
}

void cir_const_set_i64(cir_value *v, int64_t i, int64_t x) {
    void *d = v->data;
    switch (v->dtype) {
    case CUVIL_DTYPE_INT64: ((int64_t *)d)[i] = x; break;
    case CUVIL_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)x; break;
    case CUVIL_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)x; break;
    case CUVIL_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)x; break;
    case CUVIL_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)x; break;
    case CUVIL_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)x; break;
    case CUVIL_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)x; break;
    case CUVIL_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)x; break;
    case CUVIL_DTYPE_BOOL: ((uint8_t *)d)[i] = x != 0; break;
    case CUVIL_DTYPE_FLOAT32: ((float *)d)[i] = (float)x; break;
    case CUVIL_DTYPE_FLOAT64: ((double *)d)[i] = (double)x; break;
    case CUVIL_DTYPE_FLOAT16: ((uint16_t *)d)[i] = cir_f32_to_f16((float)x); break;
    case CUVIL_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = cir_f32_to_bf16((float)x); break;
    default: CUVIL_ASSERT(!"cir_const_set_i64: unsupported dtype");
    }
}

/* ===== Uses ================================================================================== */
void cir_graph_count_uses(cir_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        g->values[i].n_uses = 0;
        if (g->values[i].kind == CIR_VAL_ACT) g->values[i].producer = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) g->values[n->in[j]].n_uses++;
        if (n->residual >= 0) g->values[n->residual].n_uses++;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && g->values[n->out[j]].kind == CIR_VAL_ACT)
                g->values[n->out[j]].producer = i;
    }
    for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].n_uses++;
}

/* ===== Messages ============================================================================== */
const char *cir_node_desc(const cir_node *n, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s '%s'", n->domain && *n->domain ? n->domain : "",
             n->domain && *n->domain ? "." : "", n->op, n->name);
    return buf;
}

cuvil_status cir_node_err(cir_graph *g, const cir_node *n, cuvil_status s, const char *fmt, ...) {
    char desc[512], msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cuvil_err(g->ctx, s, "%s: %s", cir_node_desc(n, desc, sizeof desc), msg);
}
