/* onnx_tensor.c -- TensorProto to dense bytes: raw_data, typed fields, external data files. */
#include "frontend/onnx/onnx_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Refuses locations that could read outside the model's folder: absolute paths, any '..'
 * component, and (after resolving symlinks) anything not under model_dir. */
static cuvil_status external_path(cuvil_ctx *ctx, const char *model_dir, const char *loc,
                                  const char *what, char *out, size_t outlen) {
    if (!loc || !*loc)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': external data without a location", what);
    if (loc[0] == '/' || loc[0] == '\\')
        return cuvil_err(ctx, CUVIL_ERR_MODEL,
                         "tensor '%s': external data location '%s' is absolute; only paths inside "
                         "the model's folder are allowed", what, loc);
    for (const char *p = loc; *p;) {
        const char *e = p + strcspn(p, "/\\");
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return cuvil_err(ctx, CUVIL_ERR_MODEL,
                             "tensor '%s': external data location '%s' contains '..'; only paths "
                             "inside the model's folder are allowed", what, loc);
        p = *e ? e + 1 : e;
    }
    char joined[PATH_MAX], real_dir[PATH_MAX];
    if (snprintf(joined, sizeof joined, "%s/%s", model_dir, loc) >= (int)sizeof joined)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': external data path too long", what);
    if (!realpath(model_dir, real_dir))
        return cuvil_err(ctx, CUVIL_ERR_IO, "%s: %s", model_dir, strerror(errno));
    if (!realpath(joined, out))
        return cuvil_err(ctx, CUVIL_ERR_IO, "tensor '%s': external data file '%s': %s", what, loc,
                         strerror(errno));
    size_t n = strlen(real_dir);
    if (strncmp(out, real_dir, n) != 0 || (out[n] != '/' && strcmp(real_dir, "/") != 0))
        return cuvil_err(ctx, CUVIL_ERR_MODEL,
                         "tensor '%s': external data location '%s' resolves outside the model's folder",
                         what, loc);
    (void)outlen;
    return CUVIL_OK;
}

static bool parse_u64(const char *s, uint64_t *v) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-') return false;
    *v = x;
    return true;
}

static cuvil_status read_external(cuvil_ctx *ctx, const Onnx__TensorProto *t, const char *model_dir,
                                  const char *what, void *dst, size_t nbytes) {
    if (!model_dir)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': external data is not allowed here", what);
    const char *loc = NULL;
    uint64_t off = 0, len = 0;
    bool has_off = false, has_len = false, has_loc = false;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
        if (!k) continue;
        bool *seen = !strcmp(k, "location") ? &has_loc : !strcmp(k, "offset") ? &has_off : !strcmp(k, "length") ? &has_len : NULL;
        if (seen && *seen) return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': external data key '%s' is given twice", what, k);
        if (seen) *seen = true;
        if (!strcmp(k, "location")) loc = v;
        else if (!strcmp(k, "offset") && !parse_u64(v, &off))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': bad external data offset '%s'", what, v ? v : "");
        else if (!strcmp(k, "length") && !parse_u64(v, &len))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': bad external data length '%s'", what, v ? v : "");
    }
    char path[PATH_MAX];
    cuvil_status s = external_path(ctx, model_dir, loc, what, path, sizeof path);
    if (s) return s;
    if (has_len && len != nbytes)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': external data length %llu, expected %zu bytes",
                         what, (unsigned long long)len, nbytes);
    uint64_t fsize;
    char what_file[300];
    snprintf(what_file, sizeof what_file, "external data file of tensor '%.200s'", what);
    int fd = cuvil_open_regular(ctx, path, what_file, UINT64_MAX, NULL, &fsize);
    if (fd < 0) return ctx->status;
    if (fsize < off || fsize - off < nbytes) {
        close(fd);
        return cuvil_err(ctx, CUVIL_ERR_MODEL,
                         "tensor '%s': external data file '%s' is too short for %zu bytes at offset %llu",
                         what, loc, nbytes, (unsigned long long)off);
    }
    size_t done = 0;
    while (done < nbytes) {
        ssize_t r = pread(fd, (char *)dst + done, nbytes - done, (off_t)(off + done));
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            close(fd);
            return cuvil_err(ctx, CUVIL_ERR_IO, "tensor '%s': reading '%s' failed", what, loc);
        }
        done += (size_t)r;
    }
    close(fd);
    return CUVIL_OK;
}

/* Stores v, taken from a widened TensorProto field, as element i of dtype dt (truncating to the
 * element width, as onnx.numpy_helper does). */
static void store_int(void *data, size_t i, cuvil_dtype dt, uint64_t v) {
    switch (cuvil_dtype_size(dt)) {
    case 1: ((uint8_t *)data)[i] = dt == CUVIL_DTYPE_BOOL ? v != 0 : (uint8_t)v; break;
    case 2: ((uint16_t *)data)[i] = (uint16_t)v; break;
    case 4: ((uint32_t *)data)[i] = (uint32_t)v; break;
    default: ((uint64_t *)data)[i] = v; break;
    }
}

static const char *shape_text(char *buf, size_t len, cuvil_dtype dt, int ndim, const int64_t *dims) {
    size_t o = (size_t)snprintf(buf, len, "%s[", cuvil_dtype_name(dt));
    for (int i = 0; i < ndim && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

cuvil_status cuvil_onnx_tensor_decode(cuvil_ctx *ctx, const Onnx__TensorProto *t, const char *model_dir,
                                      const char *what, const cuvil_limits *lim, cuvil_status malformed,
                                      void *(*alloc)(void *, size_t),
                                      void *alloc_arg, cuvil_dtype *dtype, int *ndim, int64_t dims[CUVIL_MAX_DIMS],
                                      void **data, size_t *nbytes_out) {
    char sbuf[256];
    if (!t->has_data_type)
        return cuvil_err(ctx, malformed, "tensor '%s': no data_type", what);
    cuvil_dtype dt = (cuvil_dtype)t->data_type;
    size_t esize = cuvil_dtype_size(dt);
    if (dt == CUVIL_DTYPE_STRING || !esize)
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "tensor '%s': data_type %d (%s) is not supported", what,
                         (int)t->data_type, cuvil_dtype_name(dt));
    if (t->segment) return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", what);
    if (t->n_dims > CUVIL_MAX_DIMS)
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "tensor '%s': %zu dims, at most %d supported", what, t->n_dims,
                         CUVIL_MAX_DIMS);
    size_t numel = 1, nbytes;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return cuvil_err(ctx, malformed, "tensor '%s': negative dim %lld at axis %zu", what, (long long)t->dims[i], i);
        dims[i] = t->dims[i];
        if (cuvil_mul_ovf(numel, (size_t)t->dims[i], &numel))
            return cuvil_err(ctx, malformed, "tensor '%s': shape %s is too large (size overflows)", what,
                             shape_text(sbuf, sizeof sbuf, dt, (int)i + 1, dims));
    }
    cuvil_limits dflt;
    if (!lim) {
        cuvil_limits_init(&dflt);
        lim = &dflt;
    }
    char why[256];
    /* over a limit: "unsupported" in a model (the limit can be raised); a tensor file is just
     * a bad argument */
    if (!cuvil_shape_ok(lim, esize, (int)t->n_dims, dims, why, sizeof why))
        return cuvil_err(ctx, malformed == CUVIL_ERR_MODEL ? CUVIL_ERR_UNSUPPORTED : malformed, "tensor '%s' %s: %s", what,
                         shape_text(sbuf, sizeof sbuf, dt, (int)t->n_dims, dims), why);
    if (cuvil_mul_ovf(numel, esize, &nbytes))
        return cuvil_err(ctx, malformed, "tensor '%s': shape %s is too large (size overflows)", what,
                         shape_text(sbuf, sizeof sbuf, dt, (int)t->n_dims, dims));
    *dtype = dt;
    *ndim = (int)t->n_dims;
    shape_text(sbuf, sizeof sbuf, dt, *ndim, dims);
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;

    /* which typed field the ONNX spec puts this dtype in; data anywhere else is an error */
    const char *field;
    size_t nfield;
    switch (dt) {
    case CUVIL_DTYPE_FLOAT32: field = "float_data"; nfield = t->n_float_data; break;
    case CUVIL_DTYPE_FLOAT64: field = "double_data"; nfield = t->n_double_data; break;
    case CUVIL_DTYPE_INT64: field = "int64_data"; nfield = t->n_int64_data; break;
    case CUVIL_DTYPE_UINT32: case CUVIL_DTYPE_UINT64: field = "uint64_data"; nfield = t->n_uint64_data; break;
    default: field = "int32_data"; nfield = t->n_int32_data; break;
    }
    const struct { const char *name; size_t n; } typed[] = {
        {"float_data", t->n_float_data}, {"double_data", t->n_double_data}, {"int64_data", t->n_int64_data},
        {"uint64_data", t->n_uint64_data}, {"int32_data", t->n_int32_data}, {"string_data", t->n_string_data},
    };
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++)
        if (typed[i].n && strcmp(typed[i].name, field))
            return cuvil_err(ctx, malformed, "tensor '%s': data type %s holds its data in %s (expected raw_data or %s)",
                             what, cuvil_dtype_name(dt), typed[i].name, field);
    bool raw = !external && t->has_raw_data && (t->raw_data.len > 0 || nfield == 0);
    if ((raw || external) && nfield)
        return cuvil_err(ctx, malformed, "tensor '%s': holds data in both %s and %s", what,
                         external ? "an external file" : "raw_data", field);
    /* 4-bit types are packed two per byte (the first element in the low nibble) in raw_data,
     * an external file and int32_data (one byte per entry); unpacked here, one per byte */
    bool four = dt == CUVIL_DTYPE_INT4 || dt == CUVIL_DTYPE_UINT4;
    size_t stored = four ? (numel + 1) / 2 : nbytes, stored_n = four ? stored : numel;
    if (raw && t->raw_data.len != stored)
        return cuvil_err(ctx, malformed, "tensor '%s': %s needs %zu bytes, raw_data holds %zu", what, sbuf, stored,
                         t->raw_data.len);
    if (!raw && !external && nfield != stored_n)
        return cuvil_err(ctx, malformed, "tensor '%s': %s needs %zu %s, %s holds %zu", what, sbuf, stored_n,
                         four ? "entries (two elements each)" : "elements", field, nfield);
    void *d = alloc(alloc_arg, nbytes);
    if (!d) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", what, nbytes);
    *data = d;
    *nbytes_out = nbytes;
    if (four) {
        uint8_t *u = d;
        if (external) {
            cuvil_status s = read_external(ctx, t, model_dir, what, d, stored);
            if (s) return s;
        } else if (raw) {
            if (stored) memcpy(d, t->raw_data.data, stored);
        } else {
            for (size_t i = 0; i < stored; i++) u[i] = (uint8_t)t->int32_data[i];
        }
        for (size_t i = numel; i-- > 0;) {   /* backwards: byte i/2 is read before anything overwrites it */
            unsigned v = (u[i / 2] >> (4 * (i % 2))) & 0xFu;
            u[i] = (uint8_t)(dt == CUVIL_DTYPE_INT4 && (v & 8u) ? (int)v - 16 : (int)v);
        }
        return CUVIL_OK;
    }
    if (external) return read_external(ctx, t, model_dir, what, d, nbytes);
    if (raw) {
        if (nbytes) memcpy(d, t->raw_data.data, nbytes);
        return CUVIL_OK;
    }
    if (!nbytes) return CUVIL_OK;   /* an empty tensor: the typed field may be absent (NULL) */
    switch (dt) {
    case CUVIL_DTYPE_FLOAT32: memcpy(d, t->float_data, nbytes); break;
    case CUVIL_DTYPE_FLOAT64: memcpy(d, t->double_data, nbytes); break;
    case CUVIL_DTYPE_INT64: memcpy(d, t->int64_data, nbytes); break;
    case CUVIL_DTYPE_UINT32: case CUVIL_DTYPE_UINT64:
        for (size_t i = 0; i < numel; i++) store_int(d, i, dt, t->uint64_data[i]);
        break;
    default:
        for (size_t i = 0; i < numel; i++) store_int(d, i, dt, (uint64_t)(int64_t)t->int32_data[i]);
        break;
    }
    return CUVIL_OK;
}

static void *arena_alloc(void *arena, size_t n) { return cuvil_arena_alloc(arena, n); }

cuvil_status cuvil_onnx_tensor_data(cuvil_ctx *ctx, cuvil_arena *arena, const Onnx__TensorProto *t,
                                    const char *model_dir, const char *what, const cuvil_limits *lim,
                                    cuvil_dtype *dtype, int *ndim, int64_t dims[CUVIL_MAX_DIMS], void **data) {
    size_t nbytes;
    return cuvil_onnx_tensor_decode(ctx, t, model_dir, what, lim, CUVIL_ERR_MODEL, arena_alloc, arena, dtype, ndim,
                                    dims, data, &nbytes);
}
