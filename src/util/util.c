/* util.c -- arena, context errors, string buffer, map, files. See util.h. */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Noreturn void cuvil_panic(const char *file, int line, const char *what) {
    fprintf(stderr, "cuvil: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

/* ===== Arena ========================================================================== */
struct cuvil_arena_block {
    cuvil_arena_block *next;
    size_t used, cap;
    _Alignas(64) unsigned char data[];
};

#define ARENA_BLOCK (1u << 20)

void *cuvil_arena_alloc(cuvil_arena *a, size_t n) {
    if (n > SIZE_MAX / 2) return NULL;
    /* small objects (names, index arrays) 16-aligned, data 64-aligned: a graph of 200k nodes
     * holds a million small strings */
    size_t align = n >= 64 ? 64 : 16;
    if (a->head) a->head->used = cuvil_align_up(a->head->used, align);
    if (a->head && a->head->used > a->head->cap) a->head->used = a->head->cap;
    n = cuvil_align_up(n ? n : 1, 16);
    cuvil_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        size_t bytes;
        if (cuvil_add_ovf(sizeof *b, cap, &bytes) || bytes > SIZE_MAX - 64) return NULL;
        b = cuvil_aligned_alloc(64, cuvil_align_up(bytes, 64));
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        /* a big one-off block goes behind the head so the head's free space is kept */
        if (a->head && cap == n) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *cuvil_arena_strdup(cuvil_arena *a, const char *s) {
    if (!s) return NULL;
    return cuvil_arena_memdup(a, s, strlen(s) + 1);
}

void *cuvil_arena_memdup(cuvil_arena *a, const void *p, size_t n) {
    void *d = cuvil_arena_alloc(a, n);
    if (d && n) memcpy(d, p, n);
    return d;
}

void cuvil_arena_reset(cuvil_arena *a) {
    if (!a->head) return;
    cuvil_arena_block *keep = a->head, *b = keep->next;
    while (b) {
        cuvil_arena_block *n = b->next;
        cuvil_free(b);
        b = n;
    }
    keep->next = NULL;
    keep->used = 0;
}

void cuvil_arena_free(cuvil_arena *a) {
    cuvil_arena_block *b = a->head;
    while (b) {
        cuvil_arena_block *n = b->next;
        cuvil_free(b);
        b = n;
    }
    a->head = NULL;
}

/* ===== Context ======================================================================== */
void cuvil_err_clear(cuvil_ctx *ctx) {
    cuvil_free(ctx->errlong);
    ctx->errlong = NULL;
    ctx->errmsg[0] = 0;
}

/* The message of fmt/ap: into ctx->errmsg, or, when longer, onto the heap (up to
 * CUVIL_ERRMSG_MAX bytes, then cut at a line's end with a note). prefix goes first. */
static void set_msg(cuvil_ctx *ctx, const char *prefix, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    char *old = ctx->errlong;   /* fmt's arguments may point into the old message */
    ctx->errlong = NULL;
    size_t np = strlen(prefix);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0 && np + (size_t)n < sizeof ctx->errmsg) {
        char buf[sizeof ctx->errmsg];
        vsnprintf(buf, sizeof buf, fmt, ap2);
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s%s", prefix, buf);
    } else if (n >= 0) {
        size_t len = np + (size_t)n;
        char *m = cuvil_malloc(len + 1);
        if (m) {
            memcpy(m, prefix, np);
            vsnprintf(m + np, (size_t)n + 1, fmt, ap2);
            if (len > CUVIL_ERRMSG_MAX) {
                static const char more[] = "\n  ... (the rest of this message is left out)";
                size_t cut = CUVIL_ERRMSG_MAX - sizeof more;
                while (cut > 0 && m[cut] != '\n') cut--;
                memcpy(m + cut, more, sizeof more);
            }
            ctx->errlong = m;
        }
        /* the short copy too, cut at a line's end */
        size_t k = len < sizeof ctx->errmsg - 1 ? len : sizeof ctx->errmsg - 1;
        if (m) memcpy(ctx->errmsg, m, k);
        else snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s(out of memory for a message of %zu bytes)", prefix, len);
        if (m) ctx->errmsg[k] = 0;
    }
    va_end(ap2);
    cuvil_free(old);
}

cuvil_status cuvil_err(cuvil_ctx *ctx, cuvil_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_msg(ctx, "", fmt, ap);
    va_end(ap);
    ctx->status = status;
    return status;
}

static cuvil_status err_prefixed(cuvil_ctx *ctx, const char *prefix, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_msg(ctx, prefix, fmt, ap);
    va_end(ap);
    return ctx->status;
}

cuvil_status cuvil_err_prefix(cuvil_ctx *ctx, const char *fmt, ...) {
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (ctx->errlong) return err_prefixed(ctx, prefix, "%s", ctx->errlong);   /* set_msg frees it after */
    char old[sizeof ctx->errmsg];
    memcpy(old, ctx->errmsg, sizeof old);
    return err_prefixed(ctx, prefix, "%s", old);
}

cuvil_status cuvil_ctx_create(cuvil_ctx **out) {
    *out = cuvil_calloc(1, sizeof **out);
    return *out ? CUVIL_OK : CUVIL_ERR_NOMEM;
}

void cuvil_ctx_destroy(cuvil_ctx *ctx) {
    if (!ctx) return;
    cuvil_free(ctx->errlong);
    cuvil_arena_free(&ctx->arena);
    cuvil_free(ctx);
}

const char *cuvil_errmsg(const cuvil_ctx *ctx) { return !ctx ? "no context" : ctx->errlong ? ctx->errlong : ctx->errmsg; }

/* ===== String buffer ================================================================== */
static bool sb_reserve(cuvil_sb *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    if (extra > SIZE_MAX / 4 - b->len) {
        b->oom = true;
        return false;
    }
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = cuvil_realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void cuvil_sb_vprintf(cuvil_sb *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !sb_reserve(b, (size_t)n)) return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void cuvil_sb_printf(cuvil_sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cuvil_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void cuvil_sb_append(cuvil_sb *b, const void *p, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

void cuvil_sb_puts(cuvil_sb *b, const char *s) { cuvil_sb_append(b, s, strlen(s)); }

void cuvil_sb_c_escape(cuvil_sb *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') cuvil_sb_printf(b, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f || *p == '?') cuvil_sb_printf(b, "\\%03o", *p);
        else cuvil_sb_append(b, p, 1);
    }
}

char cuvil_safe_char(unsigned char c) {
    static const char keep[] = "_ .,:;=+-[]()<>#@!%&|^~{}$'";
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr(keep, c));
    return ok ? (char)c : '_';
}

void cuvil_sb_safe_text(cuvil_sb *b, const char *s, size_t max) {
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        char out = cuvil_safe_char((unsigned char)s[i]);
        cuvil_sb_append(b, &out, 1);
    }
    if (s[i]) cuvil_sb_puts(b, "...");
}

void cuvil_sb_safe_expr(cuvil_sb *b, const char *s, size_t max) {
    size_t i = 0;
    char prev = b->len && b->s ? b->s[b->len - 1] : 0;
    for (; s[i] && i < max; i++) {
        char c = s[i], next = i + 1 < max ? s[i + 1] : 0;
        /* '*' and '/' stay where no neighbour can make a comment's opener or closer (or //);
         * the text's last byte meets whatever follows it, so it never is one */
        bool op = (c == '*' && prev != '/' && next != '/' && next) ||
                  (c == '/' && prev != '*' && prev != '/' && next != '*' && next != '/' && next);
        char out = op ? c : cuvil_safe_char((unsigned char)c);
        cuvil_sb_append(b, &out, 1);
        prev = out;
    }
    if (s[i]) cuvil_sb_puts(b, "...");
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when p does not start one. */
static int utf8_len(const unsigned char *p) {
    int n = p[0] < 0xc2 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : p[0] < 0xf5 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;   /* overlong, surrogate */
    if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;   /* overlong, > U+10FFFF */
    return n;
}

void cuvil_sb_dot_escape(cuvil_sb *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') cuvil_sb_printf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) cuvil_sb_puts(b, " ");
        else if (*p < 0x80) cuvil_sb_append(b, p, 1);
        else {   /* Graphviz reads UTF-8: valid sequences pass, other bytes become '?' */
            int n = utf8_len(p);
            if (n) {
                cuvil_sb_append(b, p, (size_t)n);
                p += n - 1;
            } else {
                cuvil_sb_puts(b, "?");
            }
        }
    }
}

void cuvil_sb_free(cuvil_sb *b) {
    cuvil_free(b->s);
    memset(b, 0, sizeof *b);
}

/* ===== Map (SipHash-1-3 with a random key, linear probing) ============================= */
/* The keys are names from the model: an unkeyed hash (FNV-1a) lets a hostile file pick names
 * that all collide and make every lookup walk the table (131,072 initializers: a minute). With
 * a secret per-process key, collisions cannot be planned. */
static _Atomic uint64_t sip_k0, sip_k1;
static atomic_int sip_ready;

static void sip_init(void) {
    if (atomic_load(&sip_ready)) return;
    uint64_t k[2] = {0, 0};
    if (getrandom(k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
        struct timespec ts;   /* no entropy yet (early boot): the clock and pid still vary */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[0] ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
        k[1] ^= (uint64_t)ts.tv_sec * 0xbf58476d1ce4e5b9ull ^ (uint64_t)(uintptr_t)&k;
    }
    atomic_store(&sip_k0, k[0]);
    atomic_store(&sip_k1, k[1]);
    atomic_store(&sip_ready, 1);
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                             \
    do {                                                                                     \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                            \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                               \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                               \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                            \
    } while (0)

static size_t hash_str(const char *s) {
    uint64_t k0 = atomic_load(&sip_k0), k1 = atomic_load(&sip_k1);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    size_t len = strlen(s), i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t m;
        memcpy(&m, s + i, 8);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)len << 56;
    for (size_t j = 0; i + j < len; j++) last |= (uint64_t)(unsigned char)s[i + j] << (8 * j);
    v3 ^= last;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return (size_t)(v0 ^ v1 ^ v2 ^ v3);
}

static bool map_grow(cuvil_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = cuvil_calloc(cap, sizeof *keys);
    int *vals = cuvil_calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        cuvil_free(keys);
        cuvil_free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = hash_str(m->keys[i]) & (cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    cuvil_free(m->keys);
    cuvil_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

bool cuvil_map_put(cuvil_map *m, const char *key, int val) {
    sip_init();
    if ((m->n + 1) * 2 > m->cap && !map_grow(m)) return false;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->keys[j] && strcmp(m->keys[j], key) != 0) j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) m->n++;
    m->keys[j] = key;
    m->vals[j] = val;
    return true;
}

int cuvil_map_get(const cuvil_map *m, const char *key) {
    if (!m->cap) return -1;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void cuvil_map_free(cuvil_map *m) {
    cuvil_free(m->keys);
    cuvil_free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ===== Files ========================================================================== */
int cuvil_open_regular(cuvil_ctx *ctx, const char *path, const char *what, uint64_t max_bytes, const char *limit_name,
                       uint64_t *size) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        cuvil_err(ctx, CUVIL_ERR_IO, "%s: the %s is not a regular file", path, what);
        return -1;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        if (limit_name)
            cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "%s: the %s is %llu bytes, over the limit %s=%llu (raise it with --limit %s=N)",
                      path, what, (unsigned long long)st.st_size, limit_name, (unsigned long long)max_bytes, limit_name);
        else
            cuvil_err(ctx, CUVIL_ERR_UNSUPPORTED, "%s: the %s is %llu bytes, more than the %llu allowed", path, what,
                      (unsigned long long)st.st_size, (unsigned long long)max_bytes);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return fd;
}

cuvil_status cuvil_read_file(cuvil_ctx *ctx, const char *path, const char *what, uint64_t max_bytes,
                             const char *limit_name, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    uint64_t fsize;
    int fd = cuvil_open_regular(ctx, path, what, max_bytes, limit_name, &fsize);
    if (fd < 0) return ctx->status;
    if (fsize > SIZE_MAX - 1) {
        close(fd);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "%s: too large to read", path);
    }
    uint8_t *buf = cuvil_malloc((size_t)fsize + 1);
    if (!buf) {
        close(fd);
        return cuvil_err(ctx, CUVIL_ERR_NOMEM, "%s: out of memory reading %llu bytes", path, (unsigned long long)fsize);
    }
    /* read what fstat promised, and notice a file that changed size meanwhile */
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, (size_t)fsize + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            cuvil_free(buf);
            return cuvil_err(ctx, CUVIL_ERR_IO, "%s: read failed: %s", path, strerror(e));
        }
        if (r == 0) break;
        got += (size_t)r;
        if (got > fsize) break;
    }
    close(fd);
    if (got != fsize) {
        cuvil_free(buf);
        return cuvil_err(ctx, CUVIL_ERR_IO, "%s: the file changed size while it was read", path);
    }
    *data = buf;
    *size = got;
    return CUVIL_OK;
}

static atomic_long write_fail_at;   /* 0: never */

void cuvil_write_fail_after(long n) { atomic_store(&write_fail_at, n > 0 ? n : 0); }

/* True when this write must fail (fault injection: a full disk). */
static bool injected_write_failure(void) {
    long n = atomic_load(&write_fail_at);
    if (n <= 0) return false;
    if (n == 1) {
        atomic_store(&write_fail_at, 0);
        return true;
    }
    atomic_store(&write_fail_at, n - 1);
    return false;
}

cuvil_status cuvil_write_file_atomic(cuvil_ctx *ctx, const char *path, const void *data,
                                     size_t size) {
    size_t plen = strlen(path);
    char *tmp = cuvil_malloc(plen + 16);
    if (!tmp) return cuvil_err(ctx, CUVIL_ERR_NOMEM, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmpXXXXXX", 11);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        cuvil_status s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        cuvil_free(tmp);
        return s;
    }
    bool registered = cuvil_tmp_register(tmp);
    const uint8_t *p = data;
    size_t left = size;
    int err = 0;
    if (injected_write_failure()) err = ENOSPC;
    while (left && !err) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fchmod(fd, 0644) != 0 && !err) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (registered) cuvil_tmp_forget(tmp);
    if (err) {
        cuvil_status s = cuvil_err(ctx, CUVIL_ERR_IO, "%s: write failed: %s", path, strerror(err));
        unlink(tmp);
        cuvil_free(tmp);
        return s;
    }
    cuvil_free(tmp);
    return CUVIL_OK;
}

void cuvil_sha256_hex(const void *data, size_t size, char out[65]) {
    struct sha256_ctx c;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&c);
    sha256_update(&c, size, data);
    sha256_digest(&c, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) sprintf(out + 2 * i, "%02x", d[i]);
    out[64] = 0;
}
