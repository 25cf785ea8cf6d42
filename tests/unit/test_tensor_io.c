/*
 * test_tensor_io.c -- tensor files (.npy, ONNX TensorProto .pb) and the cuvil-run tool.
 *
 * What it checks, against references independent of the code under test:
 *   - cuvil_npy_write produces byte for byte what numpy 2.x's np.save writes (golden bytes below,
 *     generated once with numpy), and cuvil_tensor_read reads numpy-written files of format
 *     1.0, 2.0 and 3.0 with the values numpy stored;
 *   - write/read round trips for every supported dtype and several shapes (scalar, empty, 8-D);
 *     when a Python with numpy is available the written files are also checked with np.load;
 *   - malformed files (truncated, trailing data, big-endian, fortran order, bad headers, huge
 *     shapes) fail with one-line messages naming the file and the problem;
 *   - TensorProto .pb files packed here with protobuf-c, in raw_data and typed-field forms;
 *   - cuvil-run (build/bin/cuvil-run) on hand-written models (fake_model.c, compiled here with
 *     `cc -shared`): good runs, every input error, failures leaving no output files, --info,
 *     --bench --json; and examples/c/classify built by its Makefile against the fake model.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuvil/cuvil.h"
#include "onnx.pb-c.h"

/* ===== a tiny harness ======================================================================== */

static int g_checks, g_failed;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        g_checks++;                                                                          \
        if (!(cond)) {                                                                       \
            g_failed++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);        \
        }                                                                                    \
    } while (0)

/* CHECK that the string s contains sub, printing s when it does not. */
#define CHECK_HAS(s, sub)                                                                    \
    do {                                                                                     \
        g_checks++;                                                                          \
        const char *s_ = (s);                                                                \
        if (!s_ || !strstr(s_, (sub))) {                                                     \
            g_failed++;                                                                      \
            fprintf(stderr, "%s:%d: expected \"%s\" in: %s\n", __FILE__, __LINE__, (sub),    \
                    s_ ? s_ : "(null)");                                                     \
        }                                                                                    \
    } while (0)

#define CHECK_LACKS(s, sub)                                                                  \
    do {                                                                                     \
        g_checks++;                                                                          \
        const char *s_ = (s);                                                                \
        if (s_ && strstr(s_, (sub))) {                                                       \
            g_failed++;                                                                      \
            fprintf(stderr, "%s:%d: did not expect \"%s\" in: %s\n", __FILE__, __LINE__,     \
                    (sub), s_);                                                              \
        }                                                                                    \
    } while (0)

static char g_tmp[4096];    /* the test's scratch directory */
static char g_repo[4096];   /* the source tree */
static char g_run[4096];    /* build/bin/cuvil-run */
static mode_t g_umask;

/* g_tmp/name, in a rotating set of buffers so several may be live in one expression. */
static const char *tp(const char *fmt, ...) {
    static char bufs[16][4608];
    static int k;
    char rel[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *b = bufs[k++ % 16];
    snprintf(b, sizeof bufs[0], "%s/%s", g_tmp, rel);
    return b;
}

/* "name=g_tmp/file", an --input argument. */
static const char *nv(const char *name, const char *file) {
    static char bufs[8][4700];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof bufs[0], "%s=%s/%s", name, g_tmp, file);
    return b;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                s = NULL;
            }
            s = t;
        }
    }
    fclose(f);
    if (s)
        s[n] = '\0';
    return s;
}

/* A message must be one line and start with the path it is about. */
static void check_message(const char *msg, const char *path) {
    CHECK(strchr(msg, '\n') == NULL);
    CHECK(strncmp(msg, path, strlen(path)) == 0);
}

/* Writes a .npy 1.0 file with the given header dict and payload, independently of the code
 * under test (16-byte alignment is enough for readers). */
static void write_npy_raw(const char *path, const char *dict, const void *payload, size_t n) {
    size_t dl = strlen(dict);
    size_t hl = dl + 1;
    while ((10 + hl) % 16)
        hl++;
    unsigned char *buf = malloc(10 + hl + n + 1);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hl & 0xff);
    buf[9] = (unsigned char)(hl >> 8);
    memcpy(buf + 10, dict, dl);
    memset(buf + 10 + dl, ' ', hl - dl - 1);
    buf[10 + hl - 1] = '\n';
    if (n)
        memcpy(buf + 10 + hl, payload, n);
    write_bytes(path, buf, 10 + hl + n);
    free(buf);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static int count_tmp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp") != NULL;
    if (d)
        closedir(d);
    return n;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

/* ===== subprocesses ========================================================================== */

typedef struct proc {
    int rc;       /* exit status, 128+signal if killed, -1 if it could not start */
    char *out;    /* captured stdout and stderr */
    char *err;
} proc;

static void proc_free(proc *p) {
    free(p->out);
    free(p->err);
    memset(p, 0, sizeof *p);
}

/* Runs argv (NULL-terminated; argv[0] looked up in PATH when it has no '/') in directory cwd
 * (NULL: the current one). */
static proc run_argv(const char *cwd, char *const argv[]) {
    proc p = {-1, NULL, NULL};
    const char *fo = tp("proc.out"), *fe = tp("proc.err");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(fo, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(fe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pid < 0)
        return p;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    p.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    p.out = read_text(fo);
    p.err = read_text(fe);
    return p;
}

/* Runs a command given as separate strings, NULL-terminated. */
static proc run_cmd(const char *cwd, ...) {
    char *argv[64];
    int n = 0;
    va_list ap;
    va_start(ap, cwd);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 63)
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return run_argv(cwd, argv);
}

#define CUVIL_STR_(x) #x
#define CUVIL_STR(x) CUVIL_STR_(x)

/* cuvil-run's contract for a failure: status 1, one line on stderr starting "cuvil-run: ",
 * nothing on stdout. */
static void check_run_failure(const proc *p, const char *what) {
    CHECK(p->rc == 1);
    CHECK(p->err && strncmp(p->err, "cuvil-run: ", 11) == 0);
    CHECK(p->err && strchr(p->err, '\n') == strrchr(p->err, '\n'));
    CHECK(p->out && p->out[0] == '\0');
    CHECK_HAS(p->err, what);
}

/* ===== golden files written by numpy 2.4 (np.save / np.lib.format.write_array) =============== */
/* Each is the complete file numpy wrote, as an octal-escaped literal:
 *   npy_f32_2x3     np.save(f, np.arange(6, dtype='<f4').reshape(2, 3))
 *   npy_i64_scalar  np.save(f, np.array(7, dtype='<i8'))
 *   npy_bool_3      np.save(f, np.array([True, False, True]))
 *   npy_f8_v2       write_array(f, np.array([1.5, -2.25], dtype='<f8'), version=(2, 0))
 *   npy_u2_v3       write_array(f, np.array([[1, 65535]], dtype='<u2'), version=(3, 0))
 *   npy_f4_big      np.save(f, np.array([1.0, 2.0], dtype='>f4'))
 *   npy_f4_fortran  np.save(f, np.asfortranarray(np.zeros((2, 3), dtype='<f4')))
 *   npy_f2_2        np.save(f, np.array([1.0, -2.0], dtype='<f2'))
 * (write_array is np.lib.format.write_array.) */

static const char npy_f32_2x3[] =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }       "
    "                                                   \012\000\000\000\000\000\000\200\077"
    "\000\000\000@\000\000@@\000\000\200@\000\000\240@";
#define NPY_F32_2X3_LEN 152
static const char npy_i64_scalar[] =
    "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (), }           "
    "                                                   \012\007\000\000\000\000\000\000\000";
#define NPY_I64_SCALAR_LEN 136
static const char npy_bool_3[] =
    "\223NUMPY\001\000v\000{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }         "
    "                                                   \012\001\000\001";
#define NPY_BOOL_3_LEN 131
static const char npy_f8_v2[] =
    "\223NUMPY\002\000t\000\000\000{'descr': '<f8', 'fortran_order': False, 'shape': (2,), } "
    "                                                         \012\000\000\000\000\000\000"
    "\370\077\000\000\000\000\000\000\002\300";
#define NPY_F8_V2_LEN 144
static const char npy_u2_v3[] =
    "\223NUMPY\003\000t\000\000\000{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2), "
    "}                                                        \012\001\000\377\377";
#define NPY_U2_V3_LEN 132
static const char npy_f4_big[] =
    "\223NUMPY\001\000v\000{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }         "
    "                                                   \012\077\200\000\000@\000\000\000";
#define NPY_F4_BIG_LEN 136
static const char npy_f4_fortran[] =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }        "
    "                                                   \012\000\000\000\000\000\000\000\000"
    "\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000";
#define NPY_F4_FORTRAN_LEN 152
static const char npy_f2_2[] =
    "\223NUMPY\001\000v\000{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }         "
    "                                                   \012\000<\000\300";
#define NPY_F2_2_LEN 132

/* ===== dtype names and sizes ================================================================= */

static void test_dtype(void) {
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_FLOAT32) == 4);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_FLOAT64) == 8);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_INT64) == 8);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_UINT64) == 8);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_INT32) == 4);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_UINT32) == 4);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_FLOAT16) == 2);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_BFLOAT16) == 2);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_INT16) == 2);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_UINT16) == 2);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_INT8) == 1);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_UINT8) == 1);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_BOOL) == 1);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_STRING) == 0);
    CHECK(cuvil_dtype_size(CUVIL_DTYPE_UNDEFINED) == 0);
    CHECK(cuvil_dtype_size((cuvil_dtype)14) == 0);    /* complex64: not known */
    CHECK(cuvil_dtype_size((cuvil_dtype)-1) == 0);
    CHECK(cuvil_dtype_size((cuvil_dtype)1000) == 0);
    CHECK(strcmp(cuvil_dtype_name(CUVIL_DTYPE_FLOAT32), "float32") == 0);
    CHECK(strcmp(cuvil_dtype_name(CUVIL_DTYPE_FLOAT64), "float64") == 0);
    CHECK(strcmp(cuvil_dtype_name(CUVIL_DTYPE_BOOL), "bool") == 0);
    CHECK(strcmp(cuvil_dtype_name(CUVIL_DTYPE_BFLOAT16), "bfloat16") == 0);
    CHECK(strcmp(cuvil_dtype_name(CUVIL_DTYPE_UINT64), "uint64") == 0);
    CHECK(strcmp(cuvil_dtype_name((cuvil_dtype)14), "unknown") == 0);
    CHECK(strcmp(cuvil_dtype_name((cuvil_dtype)-7), "unknown") == 0);
}

/* ===== .npy: against numpy's own bytes ======================================================= */

/* Reads path, expecting success. */
static bool read_ok(const char *path, cuvil_host_tensor *t) {
    char err[512];
    cuvil_status st = cuvil_tensor_read(path, t, err, sizeof err);
    if (st != CUVIL_OK)
        fprintf(stderr, "unexpected failure: %s (%s)\n", err, cuvil_status_str(st));
    CHECK(st == CUVIL_OK);
    return st == CUVIL_OK;
}

static void test_npy_numpy_golden(void) {
    cuvil_host_tensor t;
    const char *p = tp("golden_f32.npy");
    write_bytes(p, npy_f32_2x3, NPY_F32_2X3_LEN);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_FLOAT32 && t.ndim == 2 && t.dims[0] == 2 && t.dims[1] == 3);
        CHECK(t.nbytes == 24 && t.name == NULL);
        CHECK((uintptr_t)t.data % 64 == 0);
        for (int i = 0; i < 6; i++)
            CHECK(((float *)t.data)[i] == (float)i);
        /* and the writer reproduces numpy's file exactly */
        const char *q = tp("written_f32.npy");
        char err[512];
        CHECK(cuvil_npy_write(q, &t, err, sizeof err) == CUVIL_OK);
        char *w = read_text(q);
        struct stat sb;
        CHECK(w && stat(q, &sb) == 0 && sb.st_size == NPY_F32_2X3_LEN);
        CHECK(w && memcmp(w, npy_f32_2x3, NPY_F32_2X3_LEN) == 0);
        free(w);
        cuvil_host_tensor_free(&t);
        CHECK(t.data == NULL && t.name == NULL);
    }
    p = tp("golden_i64.npy");
    write_bytes(p, npy_i64_scalar, NPY_I64_SCALAR_LEN);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_INT64 && t.ndim == 0 && t.nbytes == 8);
        CHECK(*(int64_t *)t.data == 7);
        const char *q = tp("written_i64.npy");
        char err[512];
        CHECK(cuvil_npy_write(q, &t, err, sizeof err) == CUVIL_OK);
        char *w = read_text(q);
        CHECK(w && memcmp(w, npy_i64_scalar, NPY_I64_SCALAR_LEN) == 0);
        free(w);
        cuvil_host_tensor_free(&t);
    }
    p = tp("golden_bool.npy");
    write_bytes(p, npy_bool_3, NPY_BOOL_3_LEN);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_BOOL && t.ndim == 1 && t.dims[0] == 3 && t.nbytes == 3);
        CHECK(memcmp(t.data, "\1\0\1", 3) == 0);
        const char *q = tp("written_bool.npy");
        char err[512];
        CHECK(cuvil_npy_write(q, &t, err, sizeof err) == CUVIL_OK);
        char *w = read_text(q);
        CHECK(w && memcmp(w, npy_bool_3, NPY_BOOL_3_LEN) == 0);
        free(w);
        cuvil_host_tensor_free(&t);
    }
    p = tp("golden_f8_v2.npy");
    write_bytes(p, npy_f8_v2, NPY_F8_V2_LEN);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_FLOAT64 && t.ndim == 1 && t.dims[0] == 2);
        CHECK(((double *)t.data)[0] == 1.5 && ((double *)t.data)[1] == -2.25);
        cuvil_host_tensor_free(&t);
    }
    p = tp("golden_u2_v3.npy");
    write_bytes(p, npy_u2_v3, NPY_U2_V3_LEN);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_UINT16 && t.ndim == 2 && t.dims[0] == 1 && t.dims[1] == 2);
        CHECK(((uint16_t *)t.data)[0] == 1 && ((uint16_t *)t.data)[1] == 65535);
        cuvil_host_tensor_free(&t);
    }
    p = tp("golden_f2.npy");
    write_bytes(p, npy_f2_2, NPY_F2_2_LEN);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_FLOAT16 && t.ndim == 1 && t.dims[0] == 2);
        CHECK(((uint16_t *)t.data)[0] == 0x3c00 && ((uint16_t *)t.data)[1] == 0xc000);
        cuvil_host_tensor_free(&t);
    }
}

/* ===== .npy: refused and malformed files ===================================================== */

/* Reads path expecting failure with status st and a message containing each of the
 * NULL-terminated strings. */
static void read_fails(const char *path, cuvil_status want, ...) {
    cuvil_host_tensor t;
    char err[512];
    memset(&t, 0x5a, sizeof t);
    cuvil_status st = cuvil_tensor_read(path, &t, err, sizeof err);
    if (st != want)
        fprintf(stderr, "%s: status %s, expected %s (%s)\n", path, cuvil_status_str(st),
                cuvil_status_str(want), err);
    CHECK(st == want);
    CHECK(t.data == NULL && t.name == NULL && t.nbytes == 0);   /* left zeroed */
    check_message(err, path);
    va_list ap;
    va_start(ap, want);
    const char *sub;
    while ((sub = va_arg(ap, const char *)))
        CHECK_HAS(err, sub);
    va_end(ap);
}

static void test_npy_errors(void) {
    float six[7] = {0};
    const char *p;

    p = tp("trunc.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six, 20);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "truncated", "float32[2,3]", "24 bytes", "holds 20",
               NULL);
    p = tp("trailing.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six, 28);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "trailing data", "24 bytes", "holds 28", NULL);
    p = tp("big.npy");
    write_bytes(p, npy_f4_big, NPY_F4_BIG_LEN);
    read_fails(p, CUVIL_ERR_UNSUPPORTED, "big-endian", "'>f4'", NULL);
    p = tp("fortran.npy");
    write_bytes(p, npy_f4_fortran, NPY_F4_FORTRAN_LEN);
    read_fails(p, CUVIL_ERR_UNSUPPORTED, "fortran_order", NULL);
    p = tp("complex.npy");
    write_npy_raw(p, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", six, 8);
    read_fails(p, CUVIL_ERR_UNSUPPORTED, "'<c8'", "not supported", NULL);
    p = tp("bar_f4.npy");
    write_npy_raw(p, "{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "'|f4'", NULL);
    p = tp("structured.npy");
    write_npy_raw(p, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", six, 4);
    read_fails(p, CUVIL_ERR_UNSUPPORTED, "structured", NULL);
    p = tp("huge.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                     "4294967296), }", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "too large", NULL);
    p = tp("hugedim.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(99999999999999999999,), }", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "64 bits", NULL);
    p = tp("ninedims.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
                  six, 4);
    read_fails(p, CUVIL_ERR_UNSUPPORTED, "at most 8", NULL);
    p = tp("negative.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "negative", NULL);
    p = tp("noshape.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, }", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "'shape'", NULL);
    p = tp("extrakey.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "unexpected key 'x'", NULL);
    p = tp("dupkey.npy");
    write_npy_raw(p, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
                  six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "twice", NULL);
    p = tp("notdict.npy");
    write_npy_raw(p, "[1, 2]", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "malformed .npy header", NULL);
    p = tp("badorder.npy");
    write_npy_raw(p, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", six, 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "fortran_order", NULL);
    p = tp("v4.npy");
    write_bytes(p, "\x93NUMPY\x04\x00\x10\x00{}              \n", 26);
    read_fails(p, CUVIL_ERR_UNSUPPORTED, "version 4.0", NULL);
    p = tp("shortheader.npy");
    write_bytes(p, "\x93NUMPY\x01\x00\x70\x00{'descr'", 17);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "truncated .npy header", NULL);
    p = tp("shortmagic.npy");
    write_bytes(p, "\x93NUM", 4);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "truncated .npy magic", NULL);
    p = tp("empty.npy");
    write_bytes(p, "", 0);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "empty file", NULL);
    p = tp("text.npy");
    write_bytes(p, "this is not a tensor\n", 21);
    read_fails(p, CUVIL_ERR_INVALID_ARG, "not a .npy file", NULL);
    p = tp("does-not-exist.npy");
    read_fails(p, CUVIL_ERR_IO, "cannot open", NULL);
    p = tp("a-directory");
    mkdir(p, 0755);
    read_fails(p, CUVIL_ERR_IO, "directory", NULL);

    /* accepted spellings: '=' and '|' byte orders, double quotes, Python 2 longs, no spaces */
    cuvil_host_tensor t;
    p = tp("native.npy");
    write_npy_raw(p, "{\"descr\": \"=i4\", \"fortran_order\": False, \"shape\": (2L,)}", six, 8);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_INT32 && t.ndim == 1 && t.dims[0] == 2);
        cuvil_host_tensor_free(&t);
    }
    p = tp("u1.npy");
    write_npy_raw(p, "{'descr':'>u1','fortran_order':False,'shape':(3,1)}", "abc", 3);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_UINT8 && t.ndim == 2 && memcmp(t.data, "abc", 3) == 0);
        cuvil_host_tensor_free(&t);
    }
    p = tp("zero.npy");
    write_npy_raw(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 5), }", NULL, 0);
    if (read_ok(p, &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_FLOAT64 && t.ndim == 2 && t.dims[0] == 0 && t.nbytes == 0);
        cuvil_host_tensor_free(&t);
    }
    cuvil_host_tensor_free(NULL);   /* allowed */

    /* a NULL or zero-length error buffer is allowed */
    CHECK(cuvil_tensor_read(tp("trunc.npy"), &t, NULL, 0) == CUVIL_ERR_INVALID_ARG);
}

/* ===== .npy: write/read round trips ========================================================== */

static const struct {
    cuvil_dtype dt;
    const char *np;   /* numpy's dtype.str, for the cross-check */
} rt_dtypes[] = {
    {CUVIL_DTYPE_FLOAT32, "<f4"}, {CUVIL_DTYPE_FLOAT64, "<f8"}, {CUVIL_DTYPE_FLOAT16, "<f2"},
    {CUVIL_DTYPE_INT8, "|i1"},    {CUVIL_DTYPE_INT16, "<i2"},   {CUVIL_DTYPE_INT32, "<i4"},
    {CUVIL_DTYPE_INT64, "<i8"},   {CUVIL_DTYPE_UINT8, "|u1"},   {CUVIL_DTYPE_UINT16, "<u2"},
    {CUVIL_DTYPE_UINT32, "<u4"},  {CUVIL_DTYPE_UINT64, "<u8"},  {CUVIL_DTYPE_BOOL, "|b1"},
};

static const struct {
    int ndim;
    int64_t dims[CUVIL_MAX_DIMS];
} rt_shapes[] = {
    {0, {0}}, {1, {0}}, {1, {5}}, {2, {2, 3}}, {4, {1, 2, 1, 3}}, {3, {7, 0, 2}},
    {8, {1, 1, 2, 1, 1, 3, 1, 2}}, {1, {12345}},
};

/* Python that checks every file of the manifest with np.load; argv[1] is the manifest. */
static const char numpy_check_py[] =
    "import sys, numpy as np\n"
    "n = 0\n"
    "for line in open(sys.argv[1]):\n"
    "    path, dt, shape = line.split()\n"
    "    shape = tuple(int(s) for s in shape[1:].split(',') if s)\n"
    "    a = np.load(path)\n"
    "    raw = open(path, 'rb').read()\n"
    "    assert a.dtype.str == dt, (path, a.dtype.str, dt)\n"
    "    assert a.shape == shape, (path, a.shape, shape)\n"
    "    assert a.tobytes() == raw[len(raw) - a.nbytes:], path\n"
    "    assert (len(raw) - a.nbytes) % 64 == 0, path\n"
    "    n += 1\n"
    "print('numpy-ok', n)\n";

static const char *find_python_with_numpy(void) {
    static char buf[4096];
    const char *env = getenv("CUVIL_PYTHON");
    if (env && *env)
        return env;
    const char *venv = getenv("CUVIL_VENV");
    const char *home = getenv("HOME");
    const char *cands[3] = {NULL, NULL, "python3"};
    char a[4096], b[4096];
    if (venv && *venv) {
        snprintf(a, sizeof a, "%s/bin/python", venv);
        cands[0] = a;
    }
    if (home && *home) {
        snprintf(b, sizeof b, "%s/.local/share/cuvil/venv/bin/python", home);
        cands[1] = b;
    }
    for (int i = 0; i < 3; i++) {
        if (!cands[i] || (strchr(cands[i], '/') && access(cands[i], X_OK) != 0))
            continue;
        proc p = run_cmd(NULL, cands[i], "-c", "import numpy", NULL);
        int rc = p.rc;
        proc_free(&p);
        if (rc == 0) {
            snprintf(buf, sizeof buf, "%s", cands[i]);
            return buf;
        }
    }
    return NULL;
}

static void test_npy_roundtrip(void) {
    char dir[4608];
    snprintf(dir, sizeof dir, "%s", tp("rt"));
    mkdir(dir, 0755);
    FILE *manifest = fopen(tp("rt-manifest.txt"), "w");
    int nfiles = 0;
    for (size_t d = 0; d < sizeof rt_dtypes / sizeof rt_dtypes[0]; d++) {
        for (size_t s = 0; s < sizeof rt_shapes / sizeof rt_shapes[0]; s++) {
            cuvil_host_tensor t = {.dtype = rt_dtypes[d].dt, .ndim = rt_shapes[s].ndim};
            size_t count = 1;
            for (int i = 0; i < t.ndim; i++) {
                t.dims[i] = rt_shapes[s].dims[i];
                count *= (size_t)t.dims[i];
            }
            t.nbytes = count * cuvil_dtype_size(t.dtype);
            unsigned char *data = malloc(t.nbytes + 1);
            for (size_t i = 0; i < t.nbytes; i++)
                data[i] = t.dtype == CUVIL_DTYPE_BOOL ? (unsigned char)(i % 3 == 0)
                                                      : (unsigned char)(i * 37 + 11 + d);
            t.data = data;
            const char *p = tp("rt/t_%zu_%zu.npy", d, s);
            char err[512];
            cuvil_status st = cuvil_npy_write(p, &t, err, sizeof err);
            if (st != CUVIL_OK)
                fprintf(stderr, "write failed: %s\n", err);
            CHECK(st == CUVIL_OK);
            cuvil_host_tensor r;
            if (st == CUVIL_OK && read_ok(p, &r)) {
                CHECK(r.dtype == t.dtype && r.ndim == t.ndim && r.nbytes == t.nbytes);
                CHECK(memcmp(r.dims, t.dims, sizeof(int64_t) * (size_t)t.ndim) == 0);
                CHECK(t.nbytes == 0 || memcmp(r.data, t.data, t.nbytes) == 0);
                struct stat sb;
                CHECK(stat(p, &sb) == 0 && ((size_t)sb.st_size - t.nbytes) % 64 == 0);
                CHECK((sb.st_mode & 0777) == (0666 & ~g_umask));   /* not mkstemp's 0600 */
                cuvil_host_tensor_free(&r);
            }
            if (manifest) {
                fprintf(manifest, "%s %s s", p, rt_dtypes[d].np);
                for (int i = 0; i < t.ndim; i++)
                    fprintf(manifest, "%" PRId64 ",", t.dims[i]);
                fprintf(manifest, "\n");
            }
            nfiles++;
            free(data);
        }
    }
    CHECK(count_tmp_files(dir) == 0);
    if (manifest)
        fclose(manifest);

    /* overwrite replaces the file */
    cuvil_host_tensor one = {.dtype = CUVIL_DTYPE_FLOAT32, .ndim = 1, .dims = {1}, .nbytes = 4};
    float v = 42.0f;
    one.data = &v;
    char err[512];
    CHECK(cuvil_npy_write(tp("rt/t_0_2.npy"), &one, err, sizeof err) == CUVIL_OK);
    cuvil_host_tensor r;
    if (read_ok(tp("rt/t_0_2.npy"), &r)) {
        CHECK(r.nbytes == 4 && *(float *)r.data == 42.0f);
        cuvil_host_tensor_free(&r);
    }
    /* restore for the numpy check */
    float five[5] = {0};
    cuvil_host_tensor five_t = {.dtype = CUVIL_DTYPE_FLOAT32, .ndim = 1, .dims = {5},
                                .nbytes = 20, .data = five};
    {
        unsigned char *b = (unsigned char *)five;
        for (size_t i = 0; i < 20; i++)
            b[i] = (unsigned char)(i * 37 + 11);
    }
    CHECK(cuvil_npy_write(tp("rt/t_0_2.npy"), &five_t, err, sizeof err) == CUVIL_OK);

    /* bfloat16 goes out as a 2-byte void ('<V2', as ml_dtypes saves it) and comes back */
    cuvil_host_tensor bf = one, back;
    uint16_t bits = 0x3fc0;   /* 1.5 */
    bf.dtype = CUVIL_DTYPE_BFLOAT16;
    bf.nbytes = 2;
    bf.data = &bits;
    CHECK(cuvil_npy_write(tp("rt/bf16ok.npy"), &bf, err, sizeof err) == CUVIL_OK);
    CHECK(cuvil_tensor_read(tp("rt/bf16ok.npy"), &back, err, sizeof err) == CUVIL_OK && back.dtype == CUVIL_DTYPE_BFLOAT16 &&
          back.nbytes == 2 && !memcmp(back.data, &bits, 2));
    cuvil_host_tensor_free(&back);

    /* writer errors: nothing is left behind */
    cuvil_host_tensor bad = one;
    bad.dtype = CUVIL_DTYPE_STRING;
    bad.nbytes = 2;
    CHECK(cuvil_npy_write(tp("rt/bf16.npy"), &bad, err, sizeof err) == CUVIL_ERR_UNSUPPORTED);
    CHECK_HAS(err, "string");
    check_message(err, tp("rt/bf16.npy"));
    bad = one;
    bad.nbytes = 8;
    CHECK(cuvil_npy_write(tp("rt/badsize.npy"), &bad, err, sizeof err) == CUVIL_ERR_INVALID_ARG);
    CHECK_HAS(err, "float32[1]");
    bad = one;
    bad.ndim = 9;
    CHECK(cuvil_npy_write(tp("rt/ndim.npy"), &bad, err, sizeof err) == CUVIL_ERR_INVALID_ARG);
    bad = one;
    bad.dims[0] = -1;
    CHECK(cuvil_npy_write(tp("rt/neg.npy"), &bad, err, sizeof err) == CUVIL_ERR_INVALID_ARG);
    bad = one;
    bad.data = NULL;
    CHECK(cuvil_npy_write(tp("rt/nodata.npy"), &bad, err, sizeof err) == CUVIL_ERR_INVALID_ARG);
    CHECK(cuvil_npy_write(tp("no/such/dir/x.npy"), &one, err, sizeof err) == CUVIL_ERR_IO);
    CHECK_HAS(err, "temporary file");
    check_message(err, tp("no/such/dir/x.npy"));
    mkdir(tp("rt/isdir.npy"), 0755);
    CHECK(cuvil_npy_write(tp("rt/isdir.npy"), &one, err, sizeof err) == CUVIL_ERR_IO);
    CHECK_HAS(err, "rename");
    CHECK(!exists(tp("rt/bf16.npy")) && !exists(tp("rt/badsize.npy")));
    CHECK(!exists(tp("rt/ndim.npy")) && !exists(tp("rt/neg.npy")) && !exists(tp("rt/nodata.npy")));
    CHECK(count_tmp_files(dir) == 0);
    rmdir(tp("rt/isdir.npy"));

    /* independent reader: numpy itself, when there is one */
    const char *py = find_python_with_numpy();
    if (!py) {
        printf("  SKIP numpy cross-check (no python with numpy; set CUVIL_PYTHON)\n");
        return;
    }
    write_bytes(tp("check.py"), numpy_check_py, strlen(numpy_check_py));
    proc p = run_cmd(NULL, py, tp("check.py"), tp("rt-manifest.txt"), NULL);
    char want[64];
    snprintf(want, sizeof want, "numpy-ok %d", nfiles);
    if (p.rc != 0)
        fprintf(stderr, "numpy check failed:\n%s%s", p.out ? p.out : "", p.err ? p.err : "");
    CHECK(p.rc == 0);
    CHECK_HAS(p.out, want);
    printf("  numpy cross-check (%s): %d files\n", py, nfiles);
    proc_free(&p);
}

/* ===== ONNX TensorProto .pb ================================================================== */

static void write_pb(const char *path, const Onnx__TensorProto *tp_) {
    size_t n = onnx__tensor_proto__get_packed_size(tp_);
    uint8_t *buf = malloc(n + 1);
    size_t m = onnx__tensor_proto__pack(tp_, buf);
    CHECK(m == n);
    write_bytes(path, buf, n);
    free(buf);
}

static void test_pb(void) {
    cuvil_host_tensor t;
    const char *p;

    /* raw_data, with a name */
    {
        Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
        int64_t dims[] = {2, 2};
        float vals[] = {1.0f, -2.5f, 3.25f, 1e30f};
        m.n_dims = 2;
        m.dims = dims;
        m.has_data_type = 1;
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        m.has_raw_data = 1;
        m.raw_data.len = sizeof vals;
        m.raw_data.data = (uint8_t *)vals;
        m.name = "conv1.weight";
        p = tp("raw.pb");
        write_pb(p, &m);
        if (read_ok(p, &t)) {
            CHECK(t.dtype == CUVIL_DTYPE_FLOAT32 && t.ndim == 2);
            CHECK(t.dims[0] == 2 && t.dims[1] == 2);
            CHECK(t.nbytes == 16 && memcmp(t.data, vals, 16) == 0);
            CHECK(t.name && strcmp(t.name, "conv1.weight") == 0);
            CHECK((uintptr_t)t.data % 64 == 0);
            cuvil_host_tensor_free(&t);
        }
        /* raw_data of the wrong length */
        m.raw_data.len = 12;
        p = tp("rawshort.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "needs 16 bytes", "raw_data holds 12", NULL);
        /* both raw_data and float_data */
        m.raw_data.len = 16;
        m.n_float_data = 4;
        m.float_data = vals;
        p = tp("both.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "both raw_data and float_data", NULL);
    }
    /* float_data, no name */
    {
        Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
        int64_t dims[] = {1, 3};
        float vals[] = {0.5f, 1.5f, -7.0f};
        m.n_dims = 2;
        m.dims = dims;
        m.has_data_type = 1;
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        m.n_float_data = 3;
        m.float_data = vals;
        p = tp("x_float_data.pb");
        write_pb(p, &m);
        if (read_ok(p, &t)) {
            CHECK(t.dtype == CUVIL_DTYPE_FLOAT32 && t.ndim == 2 && t.dims[1] == 3);
            CHECK(memcmp(t.data, vals, 12) == 0 && t.name == NULL);
            cuvil_host_tensor_free(&t);
        }
        m.n_float_data = 2;
        p = tp("fewfloats.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "needs 3 elements", "float_data holds 2", NULL);
        /* data in a field that does not match data_type */
        m.n_float_data = 3;
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        p = tp("wrongfield.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "float_data", "int64_data", NULL);
    }
    /* int64_data, scalar */
    {
        Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
        int64_t vals[] = {-1234567890123LL};
        m.has_data_type = 1;
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        m.n_int64_data = 1;
        m.int64_data = vals;
        p = tp("scalar.pb");
        write_pb(p, &m);
        if (read_ok(p, &t)) {
            CHECK(t.dtype == CUVIL_DTYPE_INT64 && t.ndim == 0 && t.nbytes == 8);
            CHECK(*(int64_t *)t.data == -1234567890123LL);
            cuvil_host_tensor_free(&t);
        }
    }
    /* int32_data carries int8, bool, float16, uint16 */
    {
        struct {
            int dt;
            int32_t vals[3];
            unsigned char want[6];
            size_t nbytes;
        } cases[] = {
            {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, {-1, 5, 127}, {0xff, 5, 127}, 3},
            {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, {0, 3, 1}, {0, 1, 1}, 3},
            {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, {0x3c00, 0xc000, 0},
             {0, 0x3c, 0, 0xc0, 0, 0}, 6},
            {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, {65535, 1, 2}, {0xff, 0xff, 1, 0, 2, 0}, 6},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
            int64_t dims[] = {3};
            m.n_dims = 1;
            m.dims = dims;
            m.has_data_type = 1;
            m.data_type = cases[i].dt;
            m.n_int32_data = 3;
            m.int32_data = cases[i].vals;
            p = tp("int32_%zu.pb", i);
            write_pb(p, &m);
            if (read_ok(p, &t)) {
                CHECK(t.dtype == (cuvil_dtype)cases[i].dt && t.nbytes == cases[i].nbytes);
                CHECK(memcmp(t.data, cases[i].want, cases[i].nbytes) == 0);
                cuvil_host_tensor_free(&t);
            }
        }
    }
    /* double_data, uint64_data */
    {
        Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
        int64_t dims[] = {2};
        double d[] = {0.1, -1e300};
        m.n_dims = 1;
        m.dims = dims;
        m.has_data_type = 1;
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
        m.n_double_data = 2;
        m.double_data = d;
        p = tp("double.pb");
        write_pb(p, &m);
        if (read_ok(p, &t)) {
            CHECK(t.dtype == CUVIL_DTYPE_FLOAT64 && memcmp(t.data, d, 16) == 0);
            cuvil_host_tensor_free(&t);
        }
        Onnx__TensorProto u = ONNX__TENSOR_PROTO__INIT;
        uint64_t uv[] = {4294967295u, 7};
        u.n_dims = 1;
        u.dims = dims;
        u.has_data_type = 1;
        u.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__UINT32;
        u.n_uint64_data = 2;
        u.uint64_data = uv;
        p = tp("uint32.pb");
        write_pb(p, &u);
        if (read_ok(p, &t)) {
            CHECK(t.dtype == CUVIL_DTYPE_UINT32 && t.nbytes == 8);
            CHECK(((uint32_t *)t.data)[0] == 4294967295u && ((uint32_t *)t.data)[1] == 7);
            cuvil_host_tensor_free(&t);
        }
    }
    /* refused: strings, external data, unknown types, missing data, negative dims */
    {
        Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
        int64_t dims[] = {2};
        m.n_dims = 1;
        m.dims = dims;
        m.has_data_type = 1;
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
        p = tp("string.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_UNSUPPORTED, "string", NULL);
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64;
        p = tp("complex.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_UNSUPPORTED, "data_type 14", NULL);
        m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        p = tp("nodata.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "needs 2 elements", NULL);
        m.has_data_location = 1;
        m.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        p = tp("external.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_UNSUPPORTED, "external data", NULL);
        m.has_data_location = 0;
        dims[0] = -3;
        p = tp("negdim.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "negative dim -3", NULL);
        dims[0] = INT64_MAX;
        p = tp("hugedim.pb");
        write_pb(p, &m);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "over the limit dim=", NULL);
        /* a valid protobuf message with no data_type: not a tensor */
        Onnx__TensorProto e = ONNX__TENSOR_PROTO__INIT;
        e.name = "x";
        p = tp("notype.pb");
        write_pb(p, &e);
        read_fails(p, CUVIL_ERR_INVALID_ARG, "not an ONNX TensorProto", NULL);
    }
}

/* ===== cuvil-run on hand-written models ====================================================== */

static bool g_have_models;

/* Compiles tests/unit/fake_model.c into a shared library, as the compiler would a model. */
static bool build_fake(const char *out, const char *define) {
    char inc[4200], src[4200];
    snprintf(inc, sizeof inc, "-I%s/include", g_repo);
    snprintf(src, sizeof src, "%s/tests/unit/fake_model.c", g_repo);
    proc p = run_cmd(NULL, "cc", "-std=c11", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra",
                     "-Werror", "-fvisibility=hidden", inc, define, src, "-o", out, NULL);
    if (p.rc != 0)
        fprintf(stderr, "cc failed (%d) building %s:\n%s%s", p.rc, out, p.out ? p.out : "",
                p.err ? p.err : "");
    CHECK(p.rc == 0);
    bool ok = p.rc == 0;
    proc_free(&p);
    return ok;
}

static void put_tensor(const char *path, cuvil_dtype dt, int ndim, const int64_t *dims,
                       const void *data) {
    cuvil_host_tensor t = {.dtype = dt, .ndim = ndim, .data = (void *)data};
    t.nbytes = cuvil_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        t.dims[i] = dims[i];
        t.nbytes *= (size_t)dims[i];
    }
    char err[512];
    if (cuvil_npy_write(path, &t, err, sizeof err) != CUVIL_OK) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
}

/* Runs cuvil-run with the given arguments (NULL-terminated) in directory cwd. */
static proc cuvil_run(const char *cwd, ...) {
    char *argv[64];
    int n = 0;
    argv[n++] = g_run;
    va_list ap;
    va_start(ap, cwd);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 63)
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return run_argv(cwd, argv);
}

static void test_build_models(void) {
    if (access(g_run, X_OK) != 0) {
        fprintf(stderr, "cuvil-run not found at %s (build the cuvil-run target first)\n", g_run);
        CHECK(!"cuvil-run is built");
        return;
    }
    g_have_models = build_fake(tp("fake.so"), "-DFAKE_VARIANT=1") &&
                    build_fake(tp("fake2.so"), "-DFAKE_VARIANT=2") &&
                    build_fake(tp("fake_abi.so"), "-DFAKE_ABI_VERSION=99") &&
                    build_fake(tp("noentry.so"), "-DFAKE_NO_ENTRY");

    /* inputs used below */
    float x[3] = {1, 2, 3};
    put_tensor(tp("x.npy"), CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, x);
    float x6[6] = {0};
    put_tensor(tp("x_batch2.npy"), CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x6);
    put_tensor(tp("x_1x4.npy"), CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, x6);
    put_tensor(tp("x_flat.npy"), CUVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, x6);
    double xd[3] = {1, 2, 3};
    put_tensor(tp("x_f64.npy"), CUVIL_DTYPE_FLOAT64, 2, (int64_t[]){1, 3}, xd);
    float xn[3] = {1, NAN, 3};
    put_tensor(tp("x_nan.npy"), CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, xn);
    write_npy_raw(tp("x_trunc.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }",
                  x, 8);
    float a[4] = {1, 2, 3, 4};
    int64_t b[2] = {10, 20};
    put_tensor(tp("a.npy"), CUVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, a);
    put_tensor(tp("b.npy"), CUVIL_DTYPE_INT64, 1, (int64_t[]){2}, b);
    Onnx__TensorProto m = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[] = {1, 3};
    m.n_dims = 2;
    m.dims = dims;
    m.has_data_type = 1;
    m.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    m.n_float_data = 3;
    m.float_data = x;
    write_pb(tp("x.pb"), &m);
}

/* Reads a float32 output file and compares it with want[n] and shape dims[ndim]. */
static void check_f32_file(const char *path, int ndim, const int64_t *dims, const float *want,
                           int n) {
    cuvil_host_tensor t;
    if (!read_ok(path, &t))
        return;
    CHECK(t.dtype == CUVIL_DTYPE_FLOAT32 && t.ndim == ndim && t.nbytes == (size_t)n * 4);
    for (int i = 0; i < ndim && i < t.ndim; i++)
        CHECK(t.dims[i] == dims[i]);
    for (int i = 0; i < n && (size_t)i * 4 < t.nbytes; i++)
        CHECK(((float *)t.data)[i] == want[i]);
    cuvil_host_tensor_free(&t);
}

static void test_run_good(void) {
    if (!g_have_models)
        return;
    const float y[3] = {3, 5, 7};   /* 2*x+1 */
    proc p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "x.npy"), "--output-dir",
                       tp("out1"), NULL);
    CHECK(p.rc == 0);
    CHECK(p.err && p.err[0] == '\0');
    CHECK_HAS(p.out, "y: float32[batch=1,3] = [3, 5, 7] -> ");
    check_f32_file(tp("out1/y.npy"), 2, (int64_t[]){1, 3}, y, 3);
    CHECK(count_entries(tp("out1")) == 1);
    proc_free(&p);

    /* a bare model name is a file in the current directory; the output dir defaults to it;
     * an unnamed input is fine for a one-input model; nested output dirs are created;
     * "--opt=value" spelling */
    mkdir(tp("cwd"), 0755);
    CHECK(link(tp("fake.so"), tp("cwd/fake.so")) == 0);
    p = cuvil_run(tp("cwd"), "fake.so", "--input", tp("x.npy"), NULL);
    CHECK(p.rc == 0);
    check_f32_file(tp("cwd/y.npy"), 2, (int64_t[]){1, 3}, y, 3);
    proc_free(&p);
    p = cuvil_run(tp("cwd"), "fake.so", "--input=../x.pb", "--output-dir=a/b/c", "--threads=4",
                  NULL);
    CHECK(p.rc == 0);
    check_f32_file(tp("cwd/a/b/c/y.npy"), 2, (int64_t[]){1, 3}, y, 3);
    proc_free(&p);

    /* two inputs; output names: "/" becomes "_", ":" is kept; a scalar int64 output */
    p = cuvil_run(NULL, tp("fake2.so"), "--input", nv("b", "b.npy"), "--input",
                  nv("a", "a.npy"), "--output-dir", tp("out2"), NULL);
    CHECK(p.rc == 0);
    CHECK_HAS(p.out, "sum/0: float32[2,2] = [11, 22, 13, 24] -> ");
    CHECK_HAS(p.out, "count:0: int64[] = [30] -> ");
    check_f32_file(tp("out2/sum_0.npy"), 2, (int64_t[]){2, 2}, (float[]){11, 22, 13, 24}, 4);
    cuvil_host_tensor t;
    if (read_ok(tp("out2/count:0.npy"), &t)) {
        CHECK(t.dtype == CUVIL_DTYPE_INT64 && t.ndim == 0 && *(int64_t *)t.data == 30);
        cuvil_host_tensor_free(&t);
    }
    CHECK(count_entries(tp("out2")) == 2);
    proc_free(&p);
}

static void test_run_input_errors(void) {
    if (!g_have_models)
        return;
    char out[4608];
    snprintf(out, sizeof out, "%s", tp("out_err"));   /* tp() buffers rotate */
    proc p;

    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("z", "x.npy"), "--output-dir", out,
                  NULL);
    check_run_failure(&p, "unknown input 'z'; the model's inputs are: x");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "x_batch2.npy"), "--output-dir",
                  out, NULL);
    check_run_failure(&p, "input 'x': file ");
    CHECK_HAS(p.err, "x_batch2.npy has shape [2,3], model was compiled for [1,3] (batch=1); "
                     "recompile with --dim batch=2");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "x_1x4.npy"), "--output-dir",
                  out, NULL);
    check_run_failure(&p, "has shape [1,4], model was compiled for [1,3] (batch=1)");
    CHECK_LACKS(p.err, "recompile");   /* dim 1 is not symbolic */
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "x_flat.npy"), "--output-dir",
                  out, NULL);
    check_run_failure(&p, "has shape [3], model was compiled for [1,3]");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "x_f64.npy"), "--output-dir",
                  out, NULL);
    check_run_failure(&p, "x_f64.npy holds float64, model expects float32");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "x_trunc.npy"), "--output-dir",
                  out, NULL);
    check_run_failure(&p, "input 'x': ");
    CHECK_HAS(p.err, "x_trunc.npy: truncated: header says float32[1,3] = 12 bytes of data, "
                     "file holds 8");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", nv("x", "missing.npy"), NULL);
    check_run_failure(&p, "missing.npy: cannot open");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--output-dir", out, NULL);
    check_run_failure(&p, "missing input 'x' (float32[batch=1,3]); pass --input x=FILE");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", tp("x.npy"), "--input", nv("x", "x.npy"),
                  NULL);
    check_run_failure(&p, "input 'x' given twice");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake2.so"), "--input", nv("a", "a.npy"), "--output-dir", out,
                  NULL);
    check_run_failure(&p, "missing input 'b' (int64[2])");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake2.so"), "--input", tp("a.npy"), NULL);
    check_run_failure(&p, "the model has 2 inputs (a, b); name it with --input NAME=FILE");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake2.so"), "--input", nv("a", "b.npy"), "--input",
                  nv("b", "a.npy"), NULL);
    check_run_failure(&p, "input 'a': file ");
    CHECK_HAS(p.err, "holds int64, model expects float32");
    proc_free(&p);
    CHECK(!exists(out));   /* nothing was created for failed runs */
}

static void test_run_failures(void) {
    if (!g_have_models)
        return;
    proc p;
    char out[4608];
    snprintf(out, sizeof out, "%s", tp("out_fail"));   /* tp() buffers rotate */

    /* the model's run fails: no output, no output directory */
    p = cuvil_run(NULL, tp("fake.so"), "--input", tp("x_nan.npy"), "--output-dir", out, NULL);
    check_run_failure(&p, "run failed: fake: x holds NaN at index (1)");
    CHECK(!exists(out));
    proc_free(&p);
    /* create fails */
    p = cuvil_run(NULL, tp("fake.so"), "--input", tp("x.npy"), "--threads", "100", "--output-dir",
                  out, NULL);
    check_run_failure(&p, "create failed: fake: n_threads must be in 0..64 (100)");
    CHECK(!exists(out));
    proc_free(&p);
    /* writing the second output fails: the first is removed again */
    mkdir(tp("out_partial"), 0755);
    mkdir(tp("out_partial/count:0.npy"), 0755);
    p = cuvil_run(NULL, tp("fake2.so"), "--input", nv("a", "a.npy"), "--input",
                  nv("b", "b.npy"), "--output-dir", tp("out_partial"), NULL);
    check_run_failure(&p, "output 'count:0': ");
    CHECK(!exists(tp("out_partial/sum_0.npy")));
    CHECK(count_entries(tp("out_partial")) == 1);   /* only the directory we put there */
    proc_free(&p);
    /* the output dir is a file */
    write_bytes(tp("a_file"), "x", 1);
    p = cuvil_run(NULL, tp("fake.so"), "--input", tp("x.npy"), "--output-dir", tp("a_file/sub"),
                  NULL);
    check_run_failure(&p, "--output-dir");
    proc_free(&p);
    /* models that are not loadable */
    p = cuvil_run(NULL, tp("fake_abi.so"), "--input", tp("x.npy"), NULL);
    check_run_failure(&p, "model ABI version 99, this cuvil-run supports " CUVIL_STR(CUVIL_MODEL_ABI_VERSION));
    proc_free(&p);
    p = cuvil_run(NULL, tp("noentry.so"), "--input", tp("x.npy"), NULL);
    check_run_failure(&p, "not a Cuvil model (no symbol 'cuvil_model_entry')");
    proc_free(&p);
    p = cuvil_run(NULL, tp("nosuch.so"), "--input", tp("x.npy"), NULL);
    check_run_failure(&p, "cannot load model");
    proc_free(&p);
    p = cuvil_run(NULL, tp("x.npy"), "--info", NULL);
    check_run_failure(&p, "cannot load model");
    proc_free(&p);
    /* usage errors */
    p = cuvil_run(NULL, tp("fake.so"), "--frobnicate", NULL);
    check_run_failure(&p, "unknown option '--frobnicate'");
    proc_free(&p);
    p = cuvil_run(NULL, NULL);
    check_run_failure(&p, "no model given");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--bench", "0", NULL);
    check_run_failure(&p, "--bench '0'");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--threads", "-2", NULL);
    check_run_failure(&p, "--threads '-2'");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", NULL);
    check_run_failure(&p, "--input needs a value");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), tp("fake2.so"), NULL);
    check_run_failure(&p, "unexpected argument");
    proc_free(&p);
    p = cuvil_run(NULL, "--help", NULL);
    CHECK(p.rc == 0);
    CHECK_HAS(p.out, "usage: cuvil-run MODEL.so");
    proc_free(&p);
}

static void test_run_info(void) {
    if (!g_have_models)
        return;
    proc p = cuvil_run(tp("cwd"), tp("fake.so"), "--info", NULL);
    CHECK(p.rc == 0);
    CHECK(p.err && p.err[0] == '\0');
    CHECK_HAS(p.out, "name:     fake\n");
    CHECK_HAS(p.out, "target:   generic\n");
    CHECK_HAS(p.out, "cuvil:    0.1.0-fake\n");
    CHECK_HAS(p.out, "sha256:   0000000000000000");
    CHECK_HAS(p.out, "options:  opt_level=0");
    CHECK_HAS(p.out, "arena:    0 bytes");
    CHECK_HAS(p.out, "inputs:\n  x: float32[batch=1,3]\n");
    CHECK_HAS(p.out, "outputs:\n  y: float32[batch=1,3]\n");
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake2.so"), "--info", "--json", NULL);
    CHECK(p.rc == 0);
    CHECK(p.out && strchr(p.out, '\n') == p.out + strlen(p.out) - 1);
    CHECK_HAS(p.out, "\"info\": {\"name\": \"fake2\"");
    CHECK_HAS(p.out, "{\"name\": \"sum/0\", \"dtype\": \"float32\", \"shape\": [2, 2]");
    CHECK_HAS(p.out, "{\"name\": \"count:0\", \"dtype\": \"int64\", \"shape\": []");
    proc_free(&p);
    /* --info with inputs also runs */
    p = cuvil_run(NULL, tp("fake.so"), "--info", "--input", tp("x.npy"), "--output-dir",
                  tp("out_info"), NULL);
    CHECK(p.rc == 0);
    CHECK_HAS(p.out, "inputs:\n  x: float32[batch=1,3]\n");
    CHECK(exists(tp("out_info/y.npy")));
    proc_free(&p);
}

/* The number after "key": in a JSON line, or NAN when the key is missing. */
static double json_number(const char *s, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = s ? strstr(s, k) : NULL;
    if (!p)
        return NAN;
    char *end;
    double v = strtod(p + strlen(k), &end);
    return end == p + strlen(k) ? NAN : v;
}

static void test_run_bench(void) {
    if (!g_have_models)
        return;
    mkdir(tp("bench"), 0755);
    proc p = cuvil_run(tp("bench"), tp("fake.so"), "--input", tp("x.npy"), "--bench", "20",
                       "--json", NULL);
    CHECK(p.rc == 0);
    CHECK(p.err && p.err[0] == '\0');
    /* exactly one line: one JSON object */
    CHECK(p.out && strlen(p.out) > 2 && p.out[0] == '{');
    CHECK(p.out && strchr(p.out, '\n') == p.out + strlen(p.out) - 1);
    CHECK(p.out && strlen(p.out) > 2 && p.out[strlen(p.out) - 2] == '}');
    const char *keys[] = {"median_ms", "p99_ms", "min_ms", "mean_ms", "iters", "load_ms",
                          "first_ms", "peak_rss_mb", "threads", "warmup"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        double v = json_number(p.out, keys[i]);
        if (!(v >= 0))
            fprintf(stderr, "key %s missing or negative in: %s", keys[i], p.out);
        CHECK(v >= 0);
    }
    CHECK(json_number(p.out, "iters") == 20);
    CHECK(json_number(p.out, "warmup") == 2);
    CHECK(json_number(p.out, "threads") == 1);
    CHECK(json_number(p.out, "peak_rss_mb") > 0);
    CHECK(json_number(p.out, "min_ms") <= json_number(p.out, "median_ms"));
    CHECK(json_number(p.out, "median_ms") <= json_number(p.out, "p99_ms"));
    CHECK_HAS(p.out, "\"model\": \"");
    CHECK(count_entries(tp("bench")) == 0);   /* --bench without --output-dir writes nothing */
    proc_free(&p);

    p = cuvil_run(NULL, tp("fake.so"), "--input", tp("x.npy"), "--bench", "5", "--warmup", "0",
                  "--threads", "3", "--output-dir", tp("bench/out"), NULL);
    CHECK(p.rc == 0);
    CHECK_HAS(p.out, "5 runs (after 0 warmup): median ");
    CHECK_HAS(p.out, "(threads=3)");
    CHECK_HAS(p.out, "peak RSS:");
    CHECK(exists(tp("bench/out/y.npy")));
    proc_free(&p);
    p = cuvil_run(NULL, tp("fake.so"), "--input", tp("x.npy"), "--warmup", "3", NULL);
    check_run_failure(&p, "--warmup needs --bench");
    proc_free(&p);
}

/* ===== examples/c built against the fake model =============================================== */

static void test_example_classify(void) {
    if (!g_have_models)
        return;
    proc p = run_cmd(NULL, "make", "--version", NULL);
    int have_make = p.rc == 0;
    proc_free(&p);
    if (!have_make) {
        printf("  SKIP examples/c (no make)\n");
        return;
    }
    /* what cuvil-compile writes beside fake.so: a header declaring the prefixed API */
    char hdr[8192];
    snprintf(hdr, sizeof hdr,
             "#ifndef FAKE_H\n#define FAKE_H\n#include \"%s/include/cuvil/cuvil_model.h\"\n"
             "const cuvil_model_desc *fake_model(void);\n"
             "cuvil_status fake_create(const cuvil_model_options *opts, cuvil_model **out);\n"
             "cuvil_status fake_run(cuvil_model *m, const void *const *inputs, "
             "void *const *outputs);\n"
             "const char *fake_errmsg(const cuvil_model *m);\n"
             "void fake_destroy(cuvil_model *m);\n#endif\n", g_repo);
    write_bytes(tp("fake.h"), hdr, strlen(hdr));
    char exdir[4200], mdir[4200], odir[4200];
    snprintf(exdir, sizeof exdir, "%s/examples/c", g_repo);
    snprintf(mdir, sizeof mdir, "MODEL_DIR=%s", g_tmp);
    snprintf(odir, sizeof odir, "O=%s/ex", g_tmp);
    p = run_cmd(NULL, "make", "-s", "-C", exdir, mdir, "MODEL=fake", odir, NULL);
    if (p.rc != 0)
        fprintf(stderr, "make examples/c failed:\n%s%s", p.out ? p.out : "", p.err ? p.err : "");
    CHECK(p.rc == 0);
    proc_free(&p);
    /* y = [3, 5, 7]: softmax gives class 2 0.8668, class 1 0.1173, class 0 0.0159 */
    p = run_cmd(tp("ex"), "./classify", tp("x.npy"), NULL);
    CHECK(p.rc == 0);
    CHECK_HAS(p.out, "1. class 2  p=0.8668");
    CHECK_HAS(p.out, "2. class 1  p=0.1173");
    CHECK_HAS(p.out, "3. class 0  p=0.0159");
    CHECK_HAS(p.out, "median latency over 50 runs:");
    proc_free(&p);
    p = run_cmd(tp("ex"), "./classify", tp("x_batch2.npy"), NULL);
    CHECK(p.rc == 1);
    CHECK_HAS(p.err, "shape");
    proc_free(&p);
    p = run_cmd(tp("ex"), "./classify", tp("x_f64.npy"), NULL);
    CHECK(p.rc == 1);
    CHECK_HAS(p.err, "float32");
    proc_free(&p);
}

/* ===== main ================================================================================== */

int main(void) {
    g_umask = umask(0);
    umask(g_umask);

    /* the source tree: this file is <repo>/tests/unit/test_tensor_io.c */
    const char *env = getenv("CUVIL_SOURCE_DIR");
    snprintf(g_repo, sizeof g_repo, "%s", env && *env ? env : __FILE__);
    if (!(env && *env)) {
        char *s = strstr(g_repo, "tests/unit/test_tensor_io.c");
        if (s)
            *s = '\0';
        if (g_repo[0] != '/') {   /* compiled with a relative path: resolve from here */
            char *abs = realpath(g_repo[0] ? g_repo : ".", NULL);
            if (abs)
                snprintf(g_repo, sizeof g_repo, "%s", abs);
            free(abs);
        }
        size_t n = strlen(g_repo);
        if (n > 1 && g_repo[n - 1] == '/')
            g_repo[n - 1] = '\0';
    }
    /* cuvil-run: <build>/bin beside <build>/tests where this binary lives */
    env = getenv("CUVIL_RUN");
    if (env && *env) {
        snprintf(g_run, sizeof g_run, "%s", env);
    } else {
        char self[3072];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(g_run, sizeof g_run, "%s/../bin/cuvil-run", self);
    }
    const char *tmpdir = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/cuvil_test_tensor_io_XXXXXX",
             tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(g_tmp)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_tmp, strerror(errno));
        return 2;
    }

    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"dtype", test_dtype},
        {"npy_numpy_golden", test_npy_numpy_golden},
        {"npy_errors", test_npy_errors},
        {"npy_roundtrip", test_npy_roundtrip},
        {"pb_tensorproto", test_pb},
        {"build_fake_models", test_build_models},
        {"cuvil_run_good", test_run_good},
        {"cuvil_run_input_errors", test_run_input_errors},
        {"cuvil_run_failures", test_run_failures},
        {"cuvil_run_info", test_run_info},
        {"cuvil_run_bench_json", test_run_bench},
        {"example_classify", test_example_classify},
    };
    int n_bad = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = g_failed;
        tests[i].fn();
        bool ok = g_failed == before;
        n_bad += !ok;
        printf("%s %s\n", ok ? "[  OK  ]" : "[ FAIL ]", tests[i].name);
    }
    printf("%d checks, %d failed, %d of %zu tests failed\n", g_checks, g_failed, n_bad,
           sizeof tests / sizeof tests[0]);
    if (g_failed || getenv("CUVIL_KEEP_TMP"))
        printf("scratch files kept in %s\n", g_tmp);
    else
        nftw(g_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return g_failed ? 1 : 0;
}
