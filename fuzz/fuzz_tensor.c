/* fuzz_tensor.c -- libFuzzer target: arbitrary bytes as a tensor file (.npy or ONNX TensorProto
 * .pb, chosen by content as cuvil-run does) through cuvil_tensor_read_max, and a successful
 * read back out through cuvil_npy_write and in again (the round trip must agree); the same bytes
 * as a sequence (an ONNX SequenceProto, cuvil_seq_read_max), whose elements must be what the
 * reader promises and go out through cuvil_npz_write; and as an ONNX OptionalProto
 * (cuvil_optional_read_max), the same of its value. The bytes are put in a memfd, so the
 * reader's own file handling (regular file, size, short reads) runs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuvil/cuvil.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd_of(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz-tensor", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_of(data, size);
    if (fd < 0) return 0;
    char path[64], err[1024];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    cuvil_host_tensor t;
    if (cuvil_tensor_read_max(path, (uint64_t)64 << 20, &t, err, sizeof err) == CUVIL_OK) {
        /* what the reader promises: nbytes is the shape's size, the data 64-byte aligned */
        size_t want = cuvil_dtype_size(t.dtype);
        for (int i = 0; i < t.ndim; i++) want *= (size_t)t.dims[i];
        if (want != t.nbytes || ((uintptr_t)t.data & 63)) {
            fprintf(stderr, "tensor read: nbytes %zu for a shape of %zu bytes, data %p\n", t.nbytes, want, t.data);
            abort();
        }
        /* write it as .npy and read it again: same dtype (4-bit integers come back as the 8-bit
         * ones numpy has, one element per byte as in memory), shape and bytes */
        cuvil_dtype back = t.dtype == CUVIL_DTYPE_INT4 ? CUVIL_DTYPE_INT8 : t.dtype == CUVIL_DTYPE_UINT4 ? CUVIL_DTYPE_UINT8
                                                                                                            : t.dtype;
        char out[] = "/tmp/cuvil-fuzz-tensor-XXXXXX";
        int ofd = mkstemp(out);
        if (ofd >= 0) {
            close(ofd);
            if (cuvil_npy_write(out, &t, err, sizeof err) == CUVIL_OK) {
                cuvil_host_tensor u;
                if (cuvil_tensor_read(out, &u, err, sizeof err) != CUVIL_OK) {
                    fprintf(stderr, "re-read of a written .npy failed: %s\n", err);
                    abort();
                }
                if (u.dtype != back || u.ndim != t.ndim || u.nbytes != t.nbytes ||
                    memcmp(u.dims, t.dims, sizeof(int64_t) * (size_t)t.ndim) ||
                    (t.nbytes && memcmp(u.data, t.data, t.nbytes))) {
                    fprintf(stderr, "the .npy round trip changed the tensor\n");
                    abort();
                }
                cuvil_host_tensor_free(&u);
            }
            unlink(out);
        }
        cuvil_host_tensor_free(&t);
    }
    cuvil_host_tensor *ts = NULL;
    int n = 0;
    if (cuvil_seq_read_max(path, (uint64_t)64 << 20, 64, &ts, &n, err, sizeof err) == CUVIL_OK) {
        for (int e = 0; e < n; e++) {
            size_t want = cuvil_dtype_size(ts[e].dtype);
            for (int i = 0; i < ts[e].ndim; i++) want *= (size_t)ts[e].dims[i];
            if (want != ts[e].nbytes || ((uintptr_t)ts[e].data & 63)) {
                fprintf(stderr, "sequence read: element %d: nbytes %zu for a shape of %zu bytes\n", e, ts[e].nbytes, want);
                abort();
            }
        }
        char out[] = "/tmp/cuvil-fuzz-seq-XXXXXX";
        int ofd = mkstemp(out);
        if (ofd >= 0) {
            close(ofd);
            (void)cuvil_npz_write(out, ts, n, err, sizeof err);   /* (a dtype numpy lacks: refused) */
            unlink(out);
        }
        cuvil_host_seq_free(ts, n);
    }
    for (int want_seq = 0; want_seq < 2; want_seq++) {
        int kind = 0;
        ts = NULL;
        n = 0;
        if (cuvil_optional_read_max(path, (uint64_t)64 << 20, 64, want_seq, &kind, &t, &ts, &n, err, sizeof err) != CUVIL_OK)
            continue;
        size_t want = cuvil_dtype_size(t.dtype);
        for (int i = 0; i < t.ndim; i++) want *= (size_t)t.dims[i];
        if ((kind == 1 && (want != t.nbytes || ((uintptr_t)t.data & 63) || want_seq)) || (kind != 2 && (ts || n)) ||
            (kind == 2 && !want_seq) || (kind != 1 && (t.data || t.nbytes)) || kind < -1 || kind > 2) {
            fprintf(stderr, "optional read: kind %d, tensor of %zu bytes for %zu, %d elements\n", kind, t.nbytes, want, n);
            abort();
        }
        cuvil_host_tensor_free(&t);
        cuvil_host_seq_free(ts, n);
    }
    close(fd);
    return 0;
}
