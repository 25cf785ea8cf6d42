/*
 * npy.h -- the examples' small .npy reader: little-endian, C order, format versions 1.0-3.0.
 * Header-only (static functions), so that each example stays one file plus this one.
 */
#ifndef EXAMPLES_NPY_H
#define EXAMPLES_NPY_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_DIMS 16

typedef struct npy_array {
    void *data;                 /* 64-byte aligned (the models want aligned buffers) */
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    size_t count;               /* elements */
} npy_array;

/* Reads path, whose dtype must be `descr` ("<f4", "<i8") of esize bytes, into *a. Returns 0,
 * or -1 after printing "prog: path: why" to stderr. Free a->data with free(). */
static int npy_read(const char *prog, const char *path, const char *descr, size_t esize, npy_array *a) {
    FILE *f = fopen(path, "rb");
    memset(a, 0, sizeof *a);
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    unsigned char pre[12];
    char *header = NULL, want[32];
    const char *why = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] < 1 || pre[6] > 3) {
        why = "not a .npy file (version 1.0 to 3.0)";
        goto out;
    }
    size_t hlen = pre[8] | (size_t)pre[9] << 8;
    if (pre[6] > 1) { /* 2.0 and 3.0: 4-byte header length */
        if (fread(pre + 10, 1, 2, f) != 2) {
            why = "truncated header";
            goto out;
        }
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hlen > 65536 || !(header = malloc(hlen + 1)) || fread(header, 1, hlen, f) != hlen) {
        why = "bad or truncated header";
        goto out;
    }
    header[hlen] = '\0';
    snprintf(want, sizeof want, "'descr': '%s'", descr);
    if (!strstr(header, want)) {
        why = strcmp(descr, "<f4") ? "wrong element type (int64 expected: save with a.astype('int64'))"
                                   : "wrong element type (float32 expected: save with a.astype('float32'))";
        goto out;
    }
    if (strstr(header, "'fortran_order': True")) {
        why = "fortran_order arrays are not supported";
        goto out;
    }
    const char *s = strstr(header, "'shape': (");
    if (!s) {
        why = "header has no shape";
        goto out;
    }
    s += strlen("'shape': (");
    size_t count = 1;
    while (*s != ')') {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || a->ndim == NPY_MAX_DIMS || (v && count > SIZE_MAX / esize / (size_t)v)) {
            why = "bad shape in header";
            goto out;
        }
        a->shape[a->ndim++] = v;
        count *= (size_t)v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    a->count = count;
    size_t bytes = count * esize;
    if (!(a->data = aligned_alloc(64, bytes ? (bytes + 63) / 64 * 64 : 64))) {
        why = "out of memory";
        goto out;
    }
    char extra;
    if (fread(a->data, 1, bytes, f) != bytes || fread(&extra, 1, 1, f) != 0) {
        why = "payload size does not match the header's shape";
        free(a->data);
        a->data = NULL;
    }
out:
    if (why) fprintf(stderr, "%s: %s: %s\n", prog, path, why);
    free(header);
    fclose(f);
    return why ? -1 : 0;
}

#endif /* EXAMPLES_NPY_H */
