/*
 * tensor_io.c -- dense host tensors in files: .npy (read and write) and ONNX TensorProto .pb
 * (read), used by cuvil-run, the tests and the Python package's fixtures.
 *
 * The format of a file is chosen by its content: a .npy file starts with "\x93NUMPY", anything
 * else is parsed as a serialized onnx.TensorProto. Every number read from a file is untrusted:
 * dims and sizes go through the overflow-checked helpers below before anything is allocated,
 * and the payload must be exactly as long as the header says.
 *
 * Messages are one line, "<path>: <problem>", written into the caller's buffer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuvil/cuvil.h"
#include "frontend/onnx/onnx_int.h"
#include "util/util.h"

/* Tensor data is allocated with this alignment so that callers (cuvil-run) can hand it to a
 * compiled model, which expects 64-byte aligned buffers, without copying. */
#define TENSOR_ALIGN 64
/* numpy refuses headers above 10000 bytes by default; we allow more but not without bound. */
#define NPY_MAX_HEADER (1u << 20)
#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6

/* ===== errors and checked arithmetic ========================================================= */

static cuvil_status fail(char *err, size_t errlen, cuvil_status st, const char *path,
                         const char *fmt, ...) {
    if (err == NULL || errlen == 0)
        return st;
    int n = snprintf(err, errlen, "%s: ", path ? path : "(null)");
    if (n < 0)
        n = 0;
    if ((size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* one line, whatever the path or the file's strings contained */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return st;
}

static bool mul_size(size_t a, size_t b, size_t *out) {
    return !cuvil_mul_ovf(a, b, out);
}

/* Number of elements of dims[0..ndim) times elem_size; false on a negative dim or overflow. */
static bool tensor_nbytes(int ndim, const int64_t *dims, size_t elem_size, size_t *out) {
    size_t n = elem_size;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (uint64_t)dims[i] > SIZE_MAX || !mul_size(n, (size_t)dims[i], &n))
            return false;
    }
    *out = n;
    return true;
}

/* "float32[2,3]" into buf. */
static const char *shape_str(char *buf, size_t len, cuvil_dtype dt, int ndim, const int64_t *dims) {
    int n = snprintf(buf, len, "%s[", cuvil_dtype_name(dt));
    for (int i = 0; i < ndim && n >= 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%" PRId64, i ? "," : "", dims[i]);
    if (n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "]");
    return buf;
}

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void *alloc_aligned(size_t n) { return cuvil_aligned_alloc(TENSOR_ALIGN, n); }

/* ===== file reading helpers ================================================================== */

/* Reads up to n bytes; returns how many were read (less than n only at end of file), or -1
 * with errno set. */
static ssize_t read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static bool write_full(int fd, const void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        done += (size_t)w;
    }
    return true;
}

/* ===== dtype <-> numpy descr ================================================================= */

static const struct {
    const char *code;   /* kind + item size, as in numpy's dtype.str without the byte order */
    cuvil_dtype dtype;
} npy_codes[] = {
    {"f4", CUVIL_DTYPE_FLOAT32}, {"f8", CUVIL_DTYPE_FLOAT64}, {"f2", CUVIL_DTYPE_FLOAT16},
    {"i1", CUVIL_DTYPE_INT8},    {"i2", CUVIL_DTYPE_INT16},   {"i4", CUVIL_DTYPE_INT32},
    {"i8", CUVIL_DTYPE_INT64},   {"u1", CUVIL_DTYPE_UINT8},   {"u2", CUVIL_DTYPE_UINT16},
    {"u4", CUVIL_DTYPE_UINT32},  {"u8", CUVIL_DTYPE_UINT64},  {"b1", CUVIL_DTYPE_BOOL},
    /* numpy has no bfloat16: ml_dtypes' bfloat16 arrays are saved as 2-byte voids ('<V2'), and
     * a 2-byte void is read as bfloat16 (np.load(f).view(ml_dtypes.bfloat16) reads ours) */
    {"V2", CUVIL_DTYPE_BFLOAT16},
    /* nor int4/uint4: written as int8/uint8, one element per byte (read back as those) */
    {"i1", CUVIL_DTYPE_INT4},    {"u1", CUVIL_DTYPE_UINT4},
};
#define N_NPY_CODES (sizeof npy_codes / sizeof npy_codes[0])

static const char *npy_code_of(cuvil_dtype dt) {
    for (size_t i = 0; i < N_NPY_CODES; i++)
        if (npy_codes[i].dtype == dt)
            return npy_codes[i].code;
    return NULL;
}

/* Maps a numpy descr string ("<f4", "|u1", "=i8") to a dtype. */
static cuvil_status npy_parse_descr(const char *path, const char *descr, cuvil_dtype *out,
                                    char *err, size_t errlen) {
    char order = '=';
    const char *code = descr;
    if (*code == '<' || *code == '>' || *code == '|' || *code == '=')
        order = *code++;
    for (size_t i = 0; i < N_NPY_CODES; i++) {
        if (strcmp(code, npy_codes[i].code) != 0)
            continue;
        cuvil_dtype dt = npy_codes[i].dtype;
        if (cuvil_dtype_size(dt) > 1) {
            /* byte order matters only for multi-byte elements */
            if (order == '>' || (order == '=' && !host_is_little_endian()))
                return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                            "big-endian dtype '%s' is not supported; convert with "
                            "a.astype('<%s')", descr, code);
            if (order == '|' && dt != CUVIL_DTYPE_BFLOAT16)   /* a void has no byte order */
                return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                            "invalid dtype descr '%s' ('|' is only valid for 1-byte types)",
                            descr);
        }
        *out = dt;
        return CUVIL_OK;
    }
    return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                "dtype '%s' is not supported (supported: float16/32/64, int8/16/32/64, "
                "uint8/16/32/64, bool, and bfloat16 as ml_dtypes saves it, '<V2')", descr);
}

/* ===== .npy header parser ==================================================================== */
/* The header is a Python dict literal:
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }
 * numpy evaluates it with ast.literal_eval; we accept the subset numpy writes (either quote,
 * any whitespace, optional trailing commas, Python 2 'L' suffixes). */

typedef struct npy_header {
    char descr[32];
    bool fortran_order;
    int ndim;
    int64_t dims[CUVIL_MAX_DIMS];
} npy_header;

typedef struct hparser {
    const char *p;
    const char *path;
    char *err;
    size_t errlen;
} hparser;

static void hp_ws(hparser *h) {
    while (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')
        h->p++;
}

/* A quoted string into buf (truncation is an error). */
static cuvil_status hp_string(hparser *h, char *buf, size_t len, const char *what) {
    char q = *h->p;
    if (q != '\'' && q != '"')
        return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                    "malformed .npy header: expected a quoted %s", what);
    h->p++;
    size_t n = 0;
    while (*h->p && *h->p != q) {
        if (*h->p == '\\' || n + 1 >= len)
            return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                        "malformed .npy header: unsupported or overlong %s", what);
        buf[n++] = *h->p++;
    }
    if (*h->p != q)
        return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                    "malformed .npy header: unterminated %s", what);
    h->p++;
    buf[n] = '\0';
    return CUVIL_OK;
}

static cuvil_status hp_int(hparser *h, int64_t *out) {
    if (*h->p == '-')
        return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                    "malformed .npy header: negative dimension in shape");
    if (*h->p < '0' || *h->p > '9')
        return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                    "malformed .npy header: expected an integer in shape");
    int64_t v = 0;
    while (*h->p >= '0' && *h->p <= '9') {
        if (__builtin_mul_overflow(v, (int64_t)10, &v) ||
            __builtin_add_overflow(v, (int64_t)(*h->p - '0'), &v))
            return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                        "malformed .npy header: dimension in shape does not fit in 64 bits");
        h->p++;
    }
    if (*h->p == 'L' || *h->p == 'l')
        h->p++;
    *out = v;
    return CUVIL_OK;
}

static cuvil_status hp_shape(hparser *h, npy_header *hd) {
    if (*h->p != '(')
        return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                    "malformed .npy header: 'shape' is not a tuple");
    h->p++;
    hd->ndim = 0;
    for (;;) {
        hp_ws(h);
        if (*h->p == ')')
            break;
        int64_t v = 0;
        cuvil_status st = hp_int(h, &v);
        if (st != CUVIL_OK)
            return st;
        if (hd->ndim == CUVIL_MAX_DIMS)
            return fail(h->err, h->errlen, CUVIL_ERR_UNSUPPORTED, h->path,
                        "shape has more than %d dims, Cuvil supports at most %d",
                        CUVIL_MAX_DIMS, CUVIL_MAX_DIMS);
        hd->dims[hd->ndim++] = v;
        hp_ws(h);
        if (*h->p == ',') {
            h->p++;
            continue;
        }
        if (*h->p != ')')
            return fail(h->err, h->errlen, CUVIL_ERR_INVALID_ARG, h->path,
                        "malformed .npy header: bad 'shape' tuple");
    }
    h->p++;
    return CUVIL_OK;
}

static cuvil_status npy_parse_header(const char *path, const char *text, npy_header *hd,
                                     char *err, size_t errlen) {
    hparser h = {text, path, err, errlen};
    bool seen_descr = false, seen_order = false, seen_shape = false;
    cuvil_status st;
    memset(hd, 0, sizeof *hd);
    hp_ws(&h);
    if (*h.p != '{')
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "malformed .npy header: expected '{'");
    h.p++;
    for (;;) {
        hp_ws(&h);
        if (*h.p == '}')
            break;
        char key[32];
        if ((st = hp_string(&h, key, sizeof key, "key")) != CUVIL_OK)
            return st;
        hp_ws(&h);
        if (*h.p != ':')
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                        "malformed .npy header: expected ':' after '%s'", key);
        h.p++;
        hp_ws(&h);
        bool *seen;
        if (strcmp(key, "descr") == 0) {
            seen = &seen_descr;
            if (*h.p != '\'' && *h.p != '"')
                return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                            "structured dtypes are not supported (descr is not a string)");
            if ((st = hp_string(&h, hd->descr, sizeof hd->descr, "descr")) != CUVIL_OK)
                return st;
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &seen_order;
            if (strncmp(h.p, "True", 4) == 0) {
                hd->fortran_order = true;
                h.p += 4;
            } else if (strncmp(h.p, "False", 5) == 0) {
                hd->fortran_order = false;
                h.p += 5;
            } else {
                return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                            "malformed .npy header: 'fortran_order' is not True or False");
            }
        } else if (strcmp(key, "shape") == 0) {
            seen = &seen_shape;
            if ((st = hp_shape(&h, hd)) != CUVIL_OK)
                return st;
        } else {
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                        "malformed .npy header: unexpected key '%s'", key);
        }
        if (*seen)
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                        "malformed .npy header: key '%s' appears twice", key);
        *seen = true;
        hp_ws(&h);
        if (*h.p == ',') {
            h.p++;
            continue;
        }
        if (*h.p != '}')
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                        "malformed .npy header: expected ',' or '}' after '%s'", key);
    }
    h.p++;
    hp_ws(&h);
    if (*h.p != '\0')
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "malformed .npy header: unexpected text after the dict");
    const char *missing = !seen_descr ? "descr" : !seen_order ? "fortran_order"
                        : !seen_shape ? "shape" : NULL;
    if (missing)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "malformed .npy header: no '%s' key", missing);
    return CUVIL_OK;
}

/* ===== .npy reader =========================================================================== */

/* fd is positioned just after the 6-byte magic. */
static cuvil_status npy_read(const char *path, int fd, const struct stat *sb,
                             cuvil_host_tensor *out, char *err, size_t errlen) {
    unsigned char ver[2];
    ssize_t r = read_full(fd, ver, 2);
    if (r < 0)
        return fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
    if (r < 2)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "truncated .npy header");
    if (ver[0] < 1 || ver[0] > 3 || ver[1] != 0)
        return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                    "unsupported .npy format version %u.%u (supported: 1.0, 2.0, 3.0)",
                    ver[0], ver[1]);

    /* header length: little-endian u16 in 1.0, u32 in 2.0 and 3.0 */
    unsigned char lenb[4] = {0, 0, 0, 0};
    size_t nlen = ver[0] == 1 ? 2 : 4;
    r = read_full(fd, lenb, nlen);
    if (r < 0)
        return fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
    if ((size_t)r < nlen)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "truncated .npy header");
    uint32_t hlen = (uint32_t)lenb[0] | (uint32_t)lenb[1] << 8 | (uint32_t)lenb[2] << 16 |
                    (uint32_t)lenb[3] << 24;
    if (hlen > NPY_MAX_HEADER)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    ".npy header length %" PRIu32 " is implausibly large", hlen);
    size_t data_off = NPY_MAGIC_LEN + 2 + nlen + hlen;

    char *text = cuvil_malloc((size_t)hlen + 1);
    if (!text)
        return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
    r = read_full(fd, text, hlen);
    if (r < 0 || (size_t)r < hlen) {
        cuvil_free(text);
        if (r < 0)
            return fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "truncated .npy header: %" PRIu32 " header bytes expected, file holds %zd",
                    hlen, r);
    }
    text[hlen] = '\0';
    if (strlen(text) != hlen) {
        cuvil_free(text);
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "malformed .npy header: contains a NUL byte");
    }
    npy_header hd;
    cuvil_status st = npy_parse_header(path, text, &hd, err, errlen);
    cuvil_free(text);
    if (st != CUVIL_OK)
        return st;
    if (hd.fortran_order)
        return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                    "fortran_order=True is not supported; save a C-ordered array "
                    "(numpy.ascontiguousarray)");
    cuvil_dtype dt = CUVIL_DTYPE_UNDEFINED;
    if ((st = npy_parse_descr(path, hd.descr, &dt, err, errlen)) != CUVIL_OK)
        return st;

    char sbuf[256];
    size_t nbytes;
    if (!tensor_nbytes(hd.ndim, hd.dims, cuvil_dtype_size(dt), &nbytes))
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "shape %s is too large (size overflows)",
                    shape_str(sbuf, sizeof sbuf, dt, hd.ndim, hd.dims));
    /* For a regular file the size is known up front: refuse before allocating (a forged
     * header must not make us allocate gigabytes). */
    if (S_ISREG(sb->st_mode)) {
        uint64_t fsize = (uint64_t)sb->st_size;
        uint64_t have = fsize > data_off ? fsize - data_off : 0;
        if (have != nbytes)
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                        "%s: header says %s = %zu bytes of data, file holds %" PRIu64,
                        have < nbytes ? "truncated" : "trailing data",
                        shape_str(sbuf, sizeof sbuf, dt, hd.ndim, hd.dims), nbytes, have);
    }
    void *data = alloc_aligned(nbytes);
    if (!data)
        return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory (%zu bytes)", nbytes);
    r = read_full(fd, data, nbytes);
    if (r < 0 || (size_t)r != nbytes) {
        cuvil_free(data);
        if (r < 0)
            return fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "truncated: header says %s = %zu bytes of data, file holds %zd",
                    shape_str(sbuf, sizeof sbuf, dt, hd.ndim, hd.dims), nbytes, r);
    }
    char extra;
    r = read_full(fd, &extra, 1);
    if (r != 0) {
        cuvil_free(data);
        if (r < 0)
            return fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "trailing data: header says %s = %zu bytes of data, file holds more",
                    shape_str(sbuf, sizeof sbuf, dt, hd.ndim, hd.dims), nbytes);
    }
    out->dtype = dt;
    out->ndim = hd.ndim;
    memcpy(out->dims, hd.dims, sizeof hd.dims);
    out->data = data;
    out->nbytes = nbytes;
    out->name = NULL;
    return CUVIL_OK;
}

/* ===== ONNX TensorProto reader =============================================================== */

/* Reads the rest of fd after the `n0` bytes already in `head` into one malloc'd buffer. */
static cuvil_status read_rest(const char *path, int fd, const struct stat *sb,
                              const unsigned char *head, size_t n0, unsigned char **out,
                              size_t *outlen, char *err, size_t errlen) {
    size_t cap = 1 << 16;
    if (S_ISREG(sb->st_mode) && (uint64_t)sb->st_size < SIZE_MAX - 1)
        cap = (size_t)sb->st_size + 1;   /* +1: so the final read sees end of file */
    if (cap < n0 + 1)
        cap = n0 + 1;
    unsigned char *buf = cuvil_malloc(cap);
    if (!buf)
        return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
    memcpy(buf, head, n0);
    size_t len = n0;
    for (;;) {
        if (len == cap) {
            size_t ncap;
            if (!mul_size(cap, 2, &ncap)) {
                cuvil_free(buf);
                return fail(err, errlen, CUVIL_ERR_NOMEM, path, "file too large");
            }
            unsigned char *nb = cuvil_realloc(buf, ncap);
            if (!nb) {
                cuvil_free(buf);
                return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read_full(fd, buf + len, cap - len);
        if (r < 0) {
            cuvil_free(buf);
            return fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
        }
        len += (size_t)r;
        if (len < cap)
            break;
    }
    *out = buf;
    *outlen = len;
    return CUVIL_OK;
}

static void *aligned_alloc_cb(void *unused, size_t n) {
    (void)unused;
    return alloc_aligned(n);
}

/* The TensorProto decoder is the ONNX frontend's (one decoder for initializers and .pb files);
 * its message is re-worded as "<path>: <problem>". */
static cuvil_status pb_convert(const char *path, const Onnx__TensorProto *tp,
                               cuvil_host_tensor *out, char *err, size_t errlen) {
    if (!tp->has_data_type)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "not a .npy file (no \\x93NUMPY magic) and not an ONNX TensorProto "
                    "(no data_type field)");
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path, "TensorProto with external data is not supported");
    cuvil_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    void *data = NULL;
    size_t nbytes = 0;
    cuvil_dtype dt;
    int ndim;
    int64_t dims[CUVIL_MAX_DIMS] = {0};
    cuvil_status st = cuvil_onnx_tensor_decode(&ctx, tp, NULL, "", NULL, CUVIL_ERR_INVALID_ARG, aligned_alloc_cb, NULL, &dt,
                                               &ndim, dims, &data, &nbytes);
    if (st != CUVIL_OK) {
        cuvil_free(data);
        const char *msg = ctx.errmsg;
        if (!strncmp(msg, "tensor '': ", 11)) msg += 11;
        st = fail(err, errlen, st, path, "TensorProto: %s", msg);
        cuvil_free(ctx.errlong);
        return st;
    }
    cuvil_free(ctx.errlong);
    char *name = NULL;
    if (tp->name && tp->name[0] && !(name = cuvil_strdup(tp->name))) {
        cuvil_free(data);
        return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
    }
    out->dtype = dt;
    out->ndim = ndim;
    memcpy(out->dims, dims, sizeof dims);
    out->data = data;
    out->nbytes = nbytes;
    out->name = name;
    return CUVIL_OK;
}

static cuvil_status pb_read(const char *path, int fd, const struct stat *sb,
                            const unsigned char *head, size_t n0, cuvil_host_tensor *out,
                            char *err, size_t errlen) {
    unsigned char *buf = NULL;
    size_t len = 0;
    cuvil_status st = read_rest(path, fd, sb, head, n0, &buf, &len, err, errlen);
    if (st != CUVIL_OK)
        return st;
    if (len == 0) {
        cuvil_free(buf);
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "empty file (expected .npy or ONNX TensorProto)");
    }
    /* the same guards as for a model: bounded nesting is trivially true for a TensorProto, but
     * a NUL byte in its name or external-data strings must not be cut silently */
    cuvil_ctx pctx;
    memset(&pctx, 0, sizeof pctx);
    cuvil_limits lim;
    cuvil_limits_init(&lim);
    if (cuvil_onnx_prescan_tensor(&pctx, buf, len, &lim) != CUVIL_OK) {
        cuvil_free(buf);
        if (strstr(pctx.errmsg, "protobuf decoding failed"))
            st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                      "not a .npy file (no \\x93NUMPY magic) and not a valid ONNX TensorProto");
        else
            st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "TensorProto: %s", pctx.errmsg);
        cuvil_free(pctx.errlong);
        return st;
    }
    cuvil_free(pctx.errlong);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&cuvil_pb_allocator, len, buf);
    cuvil_free(buf);
    if (!tp)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "not a .npy file (no \\x93NUMPY magic) and not a valid ONNX TensorProto");
    st = pb_convert(path, tp, out, err, errlen);
    onnx__tensor_proto__free_unpacked(tp, &cuvil_pb_allocator);
    return st;
}

/* ===== public API ============================================================================ */

cuvil_status cuvil_tensor_read(const char *path, cuvil_host_tensor *out, char *err,
                               size_t errlen) {
    cuvil_limits l;
    cuvil_limits_init(&l);
    return cuvil_tensor_read_max(path, l.tensor_bytes + NPY_MAX_HEADER + 64, out, err, errlen);
}

cuvil_status cuvil_tensor_read_max(const char *path, uint64_t max_bytes, cuvil_host_tensor *out, char *err,
                                   size_t errlen) {
    if (err && errlen)
        err[0] = '\0';
    if (!out || !path)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "cuvil_tensor_read: NULL argument");
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: a FIFO must not block the open; only regular files are read */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return fail(err, errlen, CUVIL_ERR_IO, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, CUVIL_ERR_IO, path, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, CUVIL_ERR_IO, path, "is a directory, not a tensor file");
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, CUVIL_ERR_IO, path, "is not a regular file (a device, FIFO or socket)");
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "the file is %llu bytes, more than the %llu expected",
                    (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    unsigned char head[NPY_MAGIC_LEN];
    ssize_t r = read_full(fd, head, sizeof head);
    cuvil_status st;
    if (r < 0) {
        st = fail(err, errlen, CUVIL_ERR_IO, path, "read failed: %s", strerror(errno));
    } else if ((size_t)r == NPY_MAGIC_LEN && memcmp(head, NPY_MAGIC, NPY_MAGIC_LEN) == 0) {
        st = npy_read(path, fd, &sb, out, err, errlen);
    } else if (r > 0 && memcmp(head, NPY_MAGIC, (size_t)r) == 0) {
        st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "truncated .npy magic");
    } else {
        st = pb_read(path, fd, &sb, head, (size_t)r, out, err, errlen);
    }
    close(fd);
    if (st != CUVIL_OK)
        memset(out, 0, sizeof *out);
    return st;
}

void cuvil_host_tensor_free(cuvil_host_tensor *t) {
    if (!t)
        return;
    cuvil_free(t->data);
    cuvil_free(t->name);
    memset(t, 0, sizeof *t);
}

/* ===== .npy writer =========================================================================== */

/* The header numpy's np.save writes (format 1.0), byte for byte: the dict repr, spare room to
 * grow the first axis in place, spaces up to a 64-byte boundary and a newline. Returns the
 * total length of magic + version + length + header, or 0 if it does not fit. */
static size_t npy_make_header(char *buf, size_t len, const char *descr, int ndim,
                              const int64_t *dims) {
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%" PRId64, i ? ", " : "", dims[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    if (ndim > 0) {
        /* numpy: GROWTH_AXIS_MAX_DIGITS (21) - len(repr(shape[0])) spaces */
        int digits = snprintf(NULL, 0, "%" PRId64, dims[0]);
        for (int i = digits; i < 21; i++)
            dict[n++] = ' ';
    }
    size_t hlen = (size_t)n + 1;                    /* + '\n' */
    size_t pad = 64 - (NPY_MAGIC_LEN + 2 + 2 + hlen) % 64;
    size_t total = NPY_MAGIC_LEN + 2 + 2 + hlen + pad;
    if (total > len || hlen + pad > 0xffff)
        return 0;   /* LCOV_EXCL_LINE: at most 8 dims always fit */
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((hlen + pad) & 0xff);
    buf[9] = (char)((hlen + pad) >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

static atomic_uint tmp_counter;

/* Creates a fresh "<path>.tmpXXXXXX" with mode 0666 & ~umask (mkstemp would give 0600). */
static int open_tmp(const char *path, char *tmp, size_t tmplen) {
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        /* splitmix64 */
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull + atomic_fetch_add(&tmp_counter, 1));
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        char suffix[7];
        for (int i = 0; i < 6; i++, z /= 62)
            suffix[i] = chars[z % 62];
        suffix[6] = '\0';
        snprintf(tmp, tmplen, "%s.tmp%s", path, suffix);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;   /* errno is EEXIST */
}

cuvil_status cuvil_npy_write(const char *path, const cuvil_host_tensor *t, char *err,
                             size_t errlen) {
    char sbuf[256];
    if (err && errlen)
        err[0] = '\0';
    if (!path || !t)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "cuvil_npy_write: NULL argument");
    const char *code = npy_code_of(t->dtype);
    if (!code)
        return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                    "cannot write dtype %s as .npy (numpy has no such type)",
                    cuvil_dtype_name(t->dtype));
    if (t->ndim < 0 || t->ndim > CUVIL_MAX_DIMS)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "tensor has %d dims (0..%d allowed)", t->ndim, CUVIL_MAX_DIMS);
    size_t nbytes;
    if (!tensor_nbytes(t->ndim, t->dims, cuvil_dtype_size(t->dtype), &nbytes))
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "tensor shape %s is invalid (negative dim or size overflow)",
                    shape_str(sbuf, sizeof sbuf, t->dtype, t->ndim, t->dims));
    if (nbytes != t->nbytes)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                    "tensor %s is %zu bytes but nbytes says %zu",
                    shape_str(sbuf, sizeof sbuf, t->dtype, t->ndim, t->dims), nbytes, t->nbytes);
    if (nbytes > 0 && !t->data)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "tensor has no data");

    char descr[4] = {cuvil_dtype_size(t->dtype) == 1 ? '|' : '<', code[0], code[1], '\0'};
    char header[1024];
    size_t hsize = npy_make_header(header, sizeof header, descr, t->ndim, t->dims);
    if (hsize == 0)   /* LCOV_EXCL_LINE */
        return fail(err, errlen, CUVIL_ERR_INTERNAL, path, ".npy header does not fit");

    size_t tmplen = strlen(path) + 16;
    char *tmp = cuvil_malloc(tmplen);
    if (!tmp)
        return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
    int fd = open_tmp(path, tmp, tmplen);
    if (fd < 0) {
        cuvil_status st = fail(err, errlen, CUVIL_ERR_IO, path,
                               "cannot create temporary file '%s': %s", tmp, strerror(errno));
        cuvil_free(tmp);
        return st;
    }
    cuvil_status st = CUVIL_OK;
    if (!write_full(fd, header, hsize) || !write_full(fd, t->data, nbytes)) {
        st = fail(err, errlen, CUVIL_ERR_IO, path, "write failed: %s", strerror(errno));
        close(fd);
    } else if (close(fd) != 0) {
        st = fail(err, errlen, CUVIL_ERR_IO, path, "write failed: %s", strerror(errno));
    } else if (rename(tmp, path) != 0) {
        st = fail(err, errlen, CUVIL_ERR_IO, path, "cannot rename '%s' into place: %s", tmp,
                  strerror(errno));
    }
    if (st != CUVIL_OK)
        unlink(tmp);
    cuvil_free(tmp);
    return st;
}

/* ===== sequences: ONNX SequenceProto .pb or a folder of .npy (read), .npz (write) ============= */

/* A varint at *p (before end) into *v; false where it runs past end or is over 10 bytes. */
static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (int s = 0; s < 70 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Appends a tensor to *ts (n of them, room for cap). */
static cuvil_status seq_push(const char *path, cuvil_host_tensor **ts, int *n, int *cap, int max_n, char *err,
                             size_t errlen) {
    if (*n >= max_n)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "the sequence holds more than %d elements", max_n);
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        cuvil_host_tensor *nt = cuvil_realloc(*ts, (size_t)nc * sizeof *nt);
        if (!nt)
            return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
        *ts = nt;
        *cap = nc;
    }
    memset(&(*ts)[*n], 0, sizeof **ts);
    return CUVIL_OK;
}

/* A regular file's bytes (at most limit of them) into *buf (cuvil_free it). */
static cuvil_status read_file(const char *path, uint64_t limit, unsigned char **buf, size_t *len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat fsb;
    cuvil_status st;
    *buf = NULL;
    *len = 0;
    if (fd < 0)
        return fail(err, errlen, CUVIL_ERR_IO, path, "cannot open: %s", strerror(errno));
    if (fstat(fd, &fsb) != 0 || !S_ISREG(fsb.st_mode)) {
        st = fail(err, errlen, CUVIL_ERR_IO, path, "is not a regular file or a folder");
    } else if ((uint64_t)fsb.st_size > limit) {
        st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "the file is %llu bytes, more than the %llu expected",
                  (unsigned long long)fsb.st_size, (unsigned long long)limit);
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        unsigned char none[1] = {0};
        st = read_rest(path, fd, &fsb, none, 0, buf, len, err, errlen);
    }
    close(fd);
    return st;
}

/* One TensorProto (len bytes at msg, element `what` of path) into *t, as a .pb tensor file is read. */
static cuvil_status pb_tensor_at(const char *path, const uint8_t *msg, size_t len, int what, cuvil_host_tensor *t, char *err,
                                 size_t errlen) {
    cuvil_ctx pctx;
    memset(&pctx, 0, sizeof pctx);
    cuvil_limits lim;
    cuvil_limits_init(&lim);
    cuvil_status st = CUVIL_OK;
    if (cuvil_onnx_prescan_tensor(&pctx, msg, len, &lim) != CUVIL_OK)
        st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "element %d: %s", what, pctx.errmsg);
    cuvil_free(pctx.errlong);
    if (st != CUVIL_OK)
        return st;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&cuvil_pb_allocator, len, msg);
    if (!tp)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "element %d is not a valid ONNX TensorProto", what);
    st = pb_convert(path, tp, t, err, errlen);
    onnx__tensor_proto__free_unpacked(tp, &cuvil_pb_allocator);
    return st;
}

/* The next field of a protobuf message at *p (before end) into *f: its number, wire type and
 * varint value, or (length-delimited) its bytes at f->msg, f->v of them. SequenceProto and
 * OptionalProto have fields of those two wire types only: any other is not theirs (false). */
typedef struct pb_field {
    uint64_t num, wt, v;
    const uint8_t *msg;
} pb_field;

static bool pb_next(const uint8_t **p, const uint8_t *end, pb_field *f) {
    uint64_t key;
    if (!pb_varint(p, end, &key)) return false;
    f->num = key >> 3;
    f->wt = key & 7;
    if (f->wt == 0) return pb_varint(p, end, &f->v);
    if (f->wt != 2 || !pb_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p)) return false;
    f->msg = *p;
    *p += f->v;
    return true;
}

/* A SequenceProto (onnx-data.proto: name 1, elem_type 2, tensor_values 3; the other kinds of
 * element, 4-7, are refused; any other field means another message, a TensorProto most
 * likely), each tensor decoded as a .pb tensor file is. */
static cuvil_status seq_pb_parse(const char *path, const uint8_t *buf, size_t len, uint64_t max_bytes,
                                 cuvil_host_tensor **ts, int *n, int *cap, int max_n, char *err, size_t errlen) {
    const uint8_t *p = buf, *end = buf + len;
    uint64_t elem_type = 0, total = 0;
    while (p < end) {
        pb_field f;
        if (!pb_next(&p, end, &f) || f.num < 1 || f.num > 7 || (f.num == 2) != (f.wt == 0))
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                        "not a valid ONNX SequenceProto (a sequence is a SequenceProto .pb or a folder of 0.npy, 1.npy, "
                        "...; a TensorProto is one tensor)");
        if (f.num == 2) {
            elem_type = f.v;
            continue;
        }
        if (f.num >= 4)
            return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                        "a SequenceProto of sparse tensors, sequences, maps or optionals (Cuvil takes tensors)");
        if (f.num != 3)
            continue;   /* (its name) */
        cuvil_status st = seq_push(path, ts, n, cap, max_n, err, errlen);
        if (st != CUVIL_OK || (st = pb_tensor_at(path, f.msg, (size_t)f.v, *n, &(*ts)[*n], err, errlen)) != CUVIL_OK)
            return st;
        total += (*ts)[(*n)++].nbytes;
        if (total > max_bytes)
            return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "its elements hold more than the %llu bytes expected",
                        (unsigned long long)max_bytes);
    }
    if (*n && elem_type != 1)
        return fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path, "a SequenceProto whose elem_type is %llu, not TENSOR (1)",
                    (unsigned long long)elem_type);
    return CUVIL_OK;
}

cuvil_status cuvil_optional_read_max(const char *path, uint64_t max_bytes, int max_n, int want_seq, int *kind,
                                     cuvil_host_tensor *t, cuvil_host_tensor **seq, int *n, char *err, size_t errlen) {
    if (err && errlen)
        err[0] = '\0';
    if (!path || !kind || !t || !seq || !n)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "cuvil_optional_read_max: NULL argument");
    *kind = 0;
    memset(t, 0, sizeof *t);
    *seq = NULL;
    *n = 0;
    unsigned char *buf = NULL;
    size_t len = 0;
    cuvil_status st = read_file(path, max_bytes + 4096 + (uint64_t)max_n * 4096, &buf, &len, err, errlen);
    /* OptionalProto: name 1, elem_type 2, tensor_value 3, sequence_value 5 (4, 6, 7: kinds Cuvil
     * does not take); a one-tensor SequenceProto reads the same, and an optional sequence input
     * takes a SequenceProto as its value */
    const uint8_t *p = buf, *end = buf + len, *tv = NULL, *sv = NULL;
    size_t tl = 0, sl = 0;
    uint64_t elem_type = 0;
    int n3 = 0, n5 = 0;
    bool other = false;
    while (st == CUVIL_OK && p < end && !other) {
        pb_field f;
        if (!pb_next(&p, end, &f) || f.num < 1 || f.num > 7 || (f.num == 2) != (f.wt == 0)) {
            other = true;   /* not an OptionalProto (nor a SequenceProto): the value's own file */
        } else if (f.num == 2) {
            elem_type = f.v;
        } else if (f.num == 3) {
            tv = f.msg, tl = (size_t)f.v, n3++;
        } else if (f.num == 5) {
            sv = f.msg, sl = (size_t)f.v, n5++;
        } else if (f.num != 1) {
            st = fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                      "an OptionalProto of a sparse tensor, a map or an optional (Cuvil takes tensors and sequences)");
        }
    }
    int cap = 0;
    if (st != CUVIL_OK || other) {
        *kind = other && st == CUVIL_OK ? -1 : 0;
    } else if (want_seq && (n3 || elem_type == 1) && !n5) {   /* a SequenceProto: the sequence itself */
        if ((st = seq_pb_parse(path, buf, len, max_bytes, seq, n, &cap, max_n, err, errlen)) == CUVIL_OK) *kind = 2;
    } else if (want_seq && n5 == 1 && !n3) {
        if ((st = seq_pb_parse(path, sv, sl, max_bytes, seq, n, &cap, max_n, err, errlen)) == CUVIL_OK) *kind = 2;
    } else if (!want_seq && n3 == 1 && !n5) {
        if ((st = pb_tensor_at(path, tv, tl, 0, t, err, errlen)) == CUVIL_OK) *kind = 1;
    } else if (n3 || n5) {
        st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "the file holds %s; the input takes %s",
                  n5 ? "a sequence" : n3 > 1 ? "several tensors (a SequenceProto)" : "a tensor",
                  want_seq ? "a sequence" : "one tensor");
    }
    cuvil_free(buf);
    if (st != CUVIL_OK) {
        cuvil_host_tensor_free(t);
        cuvil_host_seq_free(*seq, *n);
        *seq = NULL;
        *n = 0;
        *kind = 0;
    }
    return st;
}

/* "<dir>/<i>.<ext>", malloc'd (NULL: out of memory). */
static char *elem_file(const char *dir, int i, const char *ext) {
    size_t plen = strlen(dir) + 32;
    char *f = cuvil_malloc(plen);
    if (f) snprintf(f, plen, "%s/%d.%s", dir, i, ext);
    return f;
}

cuvil_status cuvil_seq_read_max(const char *path, uint64_t max_bytes, int max_n, cuvil_host_tensor **out, int *n_out,
                                char *err, size_t errlen) {
    if (err && errlen)
        err[0] = '\0';
    if (!out || !n_out || !path)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "cuvil_seq_read_max: NULL argument");
    *out = NULL;
    *n_out = 0;
    cuvil_host_tensor *ts = NULL;
    int n = 0, cap = 0;
    cuvil_status st = CUVIL_OK;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fail(err, errlen, CUVIL_ERR_IO, path, "cannot open: %s", strerror(errno));
    if (S_ISDIR(sb.st_mode)) {   /* DIR/0.npy, DIR/1.npy, ... (.npy or .pb each) until one is missing */
        uint64_t total = 0;
        for (int i = 0;; i++) {
            char *f = elem_file(path, i, "npy");
            if (f && access(f, F_OK) != 0) {
                cuvil_free(f);
                f = elem_file(path, i, "pb");
            }
            if (!f) {
                st = fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
                break;
            }
            if (access(f, F_OK) != 0) {
                cuvil_free(f);
                break;
            }
            if ((st = seq_push(path, &ts, &n, &cap, max_n, err, errlen)) == CUVIL_OK &&
                (st = cuvil_tensor_read_max(f, max_bytes - total + NPY_MAX_HEADER, &ts[n], err, errlen)) == CUVIL_OK)
                total += ts[n++].nbytes;
            cuvil_free(f);
            if (st == CUVIL_OK && total > max_bytes)
                st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "its elements hold more than the %llu bytes expected",
                          (unsigned long long)max_bytes);
            if (st != CUVIL_OK)
                break;
        }
        /* nothing else there: a gap (0.npy, 2.npy), another name (00.npy) or both 0.npy and 0.pb
         * would make a shorter sequence than the folder means */
        DIR *dir = st == CUVIL_OK ? opendir(path) : NULL;
        if (st == CUVIL_OK && !dir)
            st = fail(err, errlen, CUVIL_ERR_IO, path, "cannot list the folder: %s", strerror(errno));
        for (struct dirent *de; dir && st == CUVIL_OK && (de = readdir(dir));) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char want[32];
            bool ours = false;
            for (int k = 0; k < n && !ours; k++) {
                snprintf(want, sizeof want, "%d.npy", k);
                ours = !strcmp(de->d_name, want);
                snprintf(want, sizeof want, "%d.pb", k);
                if (!strcmp(de->d_name, want)) {   /* the .pb of an element read as its .npy: both there */
                    char *npy = elem_file(path, k, "npy");
                    if (!npy) {
                        st = fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
                        break;
                    }
                    ours = access(npy, F_OK) != 0;
                    cuvil_free(npy);
                }
            }
            if (!ours && st == CUVIL_OK)
                st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                          "holds '%.100s', which is not one of its elements 0..%d (a sequence's folder holds 0.npy, "
                          "1.npy, ... (or .pb), numbered from 0 without gaps, and nothing else)", de->d_name, n - 1);
        }
        if (dir)
            closedir(dir);
    } else {
        unsigned char *buf = NULL;
        size_t len = 0;
        st = read_file(path, max_bytes + 4096 + (uint64_t)max_n * 4096, &buf, &len, err, errlen);
        if (st == CUVIL_OK && len >= 4 && !memcmp(buf, "PK\x03\x04", 4))
            st = fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path,
                      "a .npz is not read as a sequence (yet): give a folder of 0.npy, 1.npy, ... or a SequenceProto .pb");
        if (st == CUVIL_OK && len >= NPY_MAGIC_LEN && !memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN))
            st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path,
                      "a .npy file holds one tensor; a sequence is a SequenceProto .pb or a folder of 0.npy, 1.npy, ...");
        if (st == CUVIL_OK)
            st = seq_pb_parse(path, buf, len, max_bytes, &ts, &n, &cap, max_n, err, errlen);
        cuvil_free(buf);
    }
    if (st != CUVIL_OK) {
        cuvil_host_seq_free(ts, n);   /* (a failed read leaves nothing in ts[n]) */
        return st;
    }
    *out = ts;
    *n_out = n;
    return CUVIL_OK;
}

void cuvil_host_seq_free(cuvil_host_tensor *ts, int n) {
    for (int i = 0; ts && i < n; i++)
        cuvil_host_tensor_free(&ts[i]);
    cuvil_free(ts);
}

/* CRC-32 (ISO-HDLC, as zip uses), table-driven. */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static atomic_int ready;
    if (!atomic_load(&ready)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        atomic_store(&ready, 1);
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void le16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void le32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }

cuvil_status cuvil_npz_write(const char *path, const cuvil_host_tensor *ts, int n, char *err, size_t errlen) {
    if (err && errlen)
        err[0] = '\0';
    if (!path || (n && !ts) || n < 0 || n > 65535)
        return fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "cuvil_npz_write: bad argument");
    typedef struct { uint32_t crc, size, off; char name[24]; } entry;
    entry *es = cuvil_calloc((size_t)n + 1, sizeof *es);
    size_t tmplen = strlen(path) + 16;
    char *tmp = cuvil_malloc(tmplen);
    if (!es || !tmp) {
        cuvil_free(es);
        cuvil_free(tmp);
        return fail(err, errlen, CUVIL_ERR_NOMEM, path, "out of memory");
    }
    cuvil_status st = CUVIL_OK;
    char sbuf[256];
    for (int i = 0; i < n && st == CUVIL_OK; i++) {   /* every element checked before a byte is written */
        const cuvil_host_tensor *t = &ts[i];
        size_t nb;
        if (!npy_code_of(t->dtype))
            st = fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path, "cannot write dtype %s as .npy (numpy has no such type)",
                      cuvil_dtype_name(t->dtype));
        else if (t->ndim < 0 || t->ndim > CUVIL_MAX_DIMS ||
                 !tensor_nbytes(t->ndim, t->dims, cuvil_dtype_size(t->dtype), &nb) || nb != t->nbytes ||
                 (nb && !t->data))
            st = fail(err, errlen, CUVIL_ERR_INVALID_ARG, path, "element %d, %s, does not match its bytes", i,
                      shape_str(sbuf, sizeof sbuf, t->dtype, t->ndim, t->dims));
    }
    int fd = st == CUVIL_OK ? open_tmp(path, tmp, tmplen) : -1;
    if (st == CUVIL_OK && fd < 0)
        st = fail(err, errlen, CUVIL_ERR_IO, path, "cannot create temporary file '%s': %s", tmp, strerror(errno));
    uint64_t off = 0;
    for (int i = 0; i < n && st == CUVIL_OK; i++) {   /* local header, then the .npy */
        const cuvil_host_tensor *t = &ts[i];
        const char *code = npy_code_of(t->dtype);
        char descr[4] = {cuvil_dtype_size(t->dtype) == 1 ? '|' : '<', code[0], code[1], '\0'};
        char header[1024];
        size_t hsize = npy_make_header(header, sizeof header, descr, t->ndim, t->dims);
        uint64_t size = (uint64_t)hsize + t->nbytes;
        size_t nl = (size_t)snprintf(es[i].name, sizeof es[i].name, "arr_%d.npy", i);
        if (!hsize || size >= 0xffffffffu || off + 30 + nl + size >= 0xffffffffu) {
            st = fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path, "the sequence is over the 4 GiB a .npz without zip64 holds");
            break;
        }
        es[i].crc = crc32_update(crc32_update(0, header, hsize), t->data, t->nbytes);
        es[i].size = (uint32_t)size;
        es[i].off = (uint32_t)off;
        unsigned char lh[30] = {0};
        le32(lh, 0x04034b50u);
        le16(lh + 4, 20);
        le16(lh + 12, 0x21);   /* 1980-01-01 */
        le32(lh + 14, es[i].crc);
        le32(lh + 18, es[i].size);
        le32(lh + 22, es[i].size);
        le16(lh + 26, (unsigned)nl);
        if (!write_full(fd, lh, sizeof lh) || !write_full(fd, es[i].name, nl) || !write_full(fd, header, hsize) ||
            !write_full(fd, t->data, t->nbytes))
            st = fail(err, errlen, CUVIL_ERR_IO, path, "write failed: %s", strerror(errno));
        off += 30 + nl + size;
    }
    uint64_t cd = off;
    for (int i = 0; i < n && st == CUVIL_OK; i++) {   /* the central directory */
        size_t nl = strlen(es[i].name);
        unsigned char ch[46] = {0};
        le32(ch, 0x02014b50u);
        le16(ch + 4, 20);
        le16(ch + 6, 20);
        le16(ch + 14, 0x21);
        le32(ch + 16, es[i].crc);
        le32(ch + 20, es[i].size);
        le32(ch + 24, es[i].size);
        le16(ch + 28, (unsigned)nl);
        le32(ch + 42, es[i].off);
        if (!write_full(fd, ch, sizeof ch) || !write_full(fd, es[i].name, nl))
            st = fail(err, errlen, CUVIL_ERR_IO, path, "write failed: %s", strerror(errno));
        off += 46 + nl;
    }
    if (st == CUVIL_OK && off >= 0xffffffffu)
        st = fail(err, errlen, CUVIL_ERR_UNSUPPORTED, path, "the sequence is over the 4 GiB a .npz without zip64 holds");
    if (st == CUVIL_OK) {
        unsigned char eo[22] = {0};
        le32(eo, 0x06054b50u);
        le16(eo + 8, (unsigned)n);
        le16(eo + 10, (unsigned)n);
        le32(eo + 12, (uint32_t)(off - cd));
        le32(eo + 16, (uint32_t)cd);
        if (!write_full(fd, eo, sizeof eo))
            st = fail(err, errlen, CUVIL_ERR_IO, path, "write failed: %s", strerror(errno));
    }
    if (fd >= 0) {
        if (close(fd) != 0 && st == CUVIL_OK)
            st = fail(err, errlen, CUVIL_ERR_IO, path, "write failed: %s", strerror(errno));
        if (st == CUVIL_OK && rename(tmp, path) != 0)
            st = fail(err, errlen, CUVIL_ERR_IO, path, "cannot rename '%s' into place: %s", tmp, strerror(errno));
        if (st != CUVIL_OK)
            unlink(tmp);
    }
    cuvil_free(es);
    cuvil_free(tmp);
    return st;
}
