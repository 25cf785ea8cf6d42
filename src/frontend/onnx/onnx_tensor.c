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
    uint64_t off = 0, len = UINT64_MAX;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
        if (!k) continue;
        if (!strcmp(k, "location")) loc = v;
        else if (!strcmp(k, "offset") && !parse_u64(v, &off))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': bad external data offset '%s'", what, v ? v : "");
        else if (!strcmp(k, "length") && !parse_u64(v, &len))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': bad external data length '%s'", what, v ? v : "");
    }
    char path[PATH_MAX];
    cuvil_status s = external_path(ctx, model_dir, loc, what, path, sizeof path);
    if (s) return s;
    if (len != UINT64_MAX && len != nbytes)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': external data length %llu, expected %zu bytes",
                         what, (unsigned long long)len, nbytes);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return cuvil_err(ctx, CUVIL_ERR_IO, "tensor '%s': %s: %s", what, loc, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < off || (uint64_t)st.st_size - off < nbytes) {
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

cuvil_status cuvil_onnx_tensor_data(cuvil_ctx *ctx, cuvil_arena *arena, const Onnx__TensorProto *t,
                                    const char *model_dir, const char *what, cuvil_dtype *dtype,
                                    int *ndim, int64_t dims[CUVIL_MAX_DIMS], void **data) {
    cuvil_dtype dt = (cuvil_dtype)t->data_type;
    size_t esize = cuvil_dtype_size(dt);
    if (!esize)
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "tensor '%s': data type %d is not supported",
                         what, (int)t->data_type);
    if (t->n_dims > CUVIL_MAX_DIMS)
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "tensor '%s': %zu dims, at most %d supported",
                         what, t->n_dims, CUVIL_MAX_DIMS);
    size_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': negative dim %lld", what, (long long)t->dims[i]);
        if (cuvil_mul_ovf(numel, (size_t)t->dims[i], &numel))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': size overflows", what);
        dims[i] = t->dims[i];
    }
    size_t nbytes;
    if (cuvil_mul_ovf(numel, esize, &nbytes))
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': size overflows", what);
    void *d = cuvil_arena_alloc(arena, nbytes);
    if (!d) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", what, nbytes);
    *dtype = dt;
    *ndim = (int)t->n_dims;
    *data = d;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(ctx, t, model_dir, what, d, nbytes);
    if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': raw_data has %zu bytes, shape needs %zu",
                             what, t->raw_data.len, nbytes);
        if (nbytes) memcpy(d, t->raw_data.data, nbytes);
        return CUVIL_OK;
    }
    size_t have = 0;
    switch (dt) {
    case CUVIL_DTYPE_FLOAT32:
        have = t->n_float_data;
        if (have == numel) memcpy(d, t->float_data, nbytes);
        break;
    case CUVIL_DTYPE_FLOAT64:
        have = t->n_double_data;
        if (have == numel) memcpy(d, t->double_data, nbytes);
        break;
    case CUVIL_DTYPE_INT64:
        have = t->n_int64_data;
        if (have == numel) memcpy(d, t->int64_data, nbytes);
        break;
    case CUVIL_DTYPE_UINT32:
    case CUVIL_DTYPE_UINT64:
        have = t->n_uint64_data;
        if (have == numel)
            for (size_t i = 0; i < numel; i++) {
                if (dt == CUVIL_DTYPE_UINT32) ((uint32_t *)d)[i] = (uint32_t)t->uint64_data[i];
                else ((uint64_t *)d)[i] = t->uint64_data[i];
            }
        break;
    case CUVIL_DTYPE_INT32: case CUVIL_DTYPE_INT16: case CUVIL_DTYPE_INT8: case CUVIL_DTYPE_UINT16:
    case CUVIL_DTYPE_UINT8: case CUVIL_DTYPE_BOOL: case CUVIL_DTYPE_FLOAT16: case CUVIL_DTYPE_BFLOAT16:
        have = t->n_int32_data;
        if (have == numel)
            for (size_t i = 0; i < numel; i++) {
                int32_t x = t->int32_data[i];
                switch (esize) {
                case 1: ((uint8_t *)d)[i] = (uint8_t)x; break;
                case 2: ((uint16_t *)d)[i] = (uint16_t)x; break;
                default: ((int32_t *)d)[i] = x; break;
                }
            }
        break;
    default:
        return cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "tensor '%s': data type %d is not supported", what, (int)dt);
    }
    if (have != numel)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "tensor '%s': holds %zu elements, shape needs %zu", what, have, numel);
    return CUVIL_OK;
}
