/* onnx_prescan.c -- a walk over the protobuf wire format of a model, guided by the protobuf-c
 * descriptors, before protobuf-c unpacks it. protobuf-c recurses once per nesting level with no
 * bound, and keeps strings NUL-terminated with no length; so a hostile file could overflow the
 * stack (a TypeProto nested 5,000 deep) or hide a name's tail behind a NUL byte
 * ("w.bin\0../../etc/passwd"). This walk bounds the nesting depth and the depth of graphs
 * inside graphs, refuses a string field that holds a NUL byte, and counts the elements
 * protobuf-c would allocate (messages and strings: memory). It recurses at most limits.nesting
 * levels. Wire data that breaks the protobuf encoding rules is refused here, not left to
 * protobuf-c: protobuf-c is more lenient (it takes field numbers past 2^29-1 as unknown fields),
 * and everything after a spot this walk cannot read would go unchecked. */
#include "frontend/onnx/onnx_int.h"

#include <string.h>

typedef struct scan {
    cuvil_ctx *ctx;
    const cuvil_limits *lim;
    int64_t elements;       /* messages and strings seen: what protobuf-c allocates one by one */
    int64_t max_elements;
    const char *kind;       /* "ONNX model", "ONNX TensorProto": for the message */
} scan;

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return false;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static cuvil_status walk(scan *s, const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, int depth,
                         int graphs) {
    if (depth > s->lim->nesting || depth > CUVIL_MAX_NESTING)   /* (a library caller may set any limit) */
        return cuvil_err(s->ctx, CUVIL_ERR_UNSUPPORTED,
                         "protobuf messages are nested more than %lld deep (at a %s); the limit is nesting=%lld "
                         "(raise it with --limit nesting=N, at most %d)", (long long)s->lim->nesting, d->name,
                         (long long)s->lim->nesting, CUVIL_MAX_NESTING);
    if (d == &onnx__graph_proto__descriptor && ++graphs - 1 > s->lim->subgraph_depth)
        return cuvil_err(s->ctx, CUVIL_ERR_UNSUPPORTED,
                         "graphs are nested more than %lld deep (If/Loop/Scan bodies inside each other); the limit is "
                         "subgraph_depth=%lld (raise it with --limit subgraph_depth=N)",
                         (long long)s->lim->subgraph_depth, (long long)s->lim->subgraph_depth);
    if (++s->elements > s->max_elements) goto too_many;
    /* singular message fields seen in this message: protobuf-c merges a repeated one into the
     * first, copying it each time (100,000 repeats of `graph` in 400 KB took 15 s) */
    uint64_t seen_once = 0;
    while (p < end) {
        uint64_t key, len;
        if (!varint(&p, end, &key)) goto bad;
        unsigned wt = (unsigned)(key & 7);
        uint64_t num = key >> 3;
        if (num == 0 || num > 0x1fffffff) goto bad;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)num);
        /* protobuf-c keeps every field it does not know, one allocation each */
        if (!f && ++s->elements > s->max_elements) goto too_many;
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && f->label != PROTOBUF_C_LABEL_REPEATED) {
            size_t idx = (size_t)(f - d->fields);
            if (idx < 64) {
                if (seen_once & ((uint64_t)1 << idx))
                    return cuvil_err(s->ctx, CUVIL_ERR_MODEL, "the field %s.%s, which holds one message, is given more than once",
                                     d->name, f->name);
                seen_once |= (uint64_t)1 << idx;
            }
        }
        switch (wt) {
        case 0:
            if (!varint(&p, end, &len)) goto bad;
            break;
        case 1:
            if (end - p < 8) goto bad;
            p += 8;
            break;
        case 5:
            if (end - p < 4) goto bad;
            p += 4;
            break;
        case 2: {
            if (!varint(&p, end, &len) || len > (uint64_t)(end - p)) goto bad;
            const uint8_t *q = p;
            p += len;
            if (!f) break;
            if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                cuvil_status st = walk(s, f->descriptor, q, p, depth + 1, graphs);
                if (st) return st;
            } else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
                if (++s->elements > s->max_elements) goto too_many;
                if (f->type == PROTOBUF_C_TYPE_STRING && len && memchr(q, 0, (size_t)len))
                    return cuvil_err(s->ctx, CUVIL_ERR_MODEL,
                                     "a string field (%s.%s) contains a NUL byte; names and paths in a model must not",
                                     d->name, f->name);
            }
            break;
        }
        default:
            goto bad;   /* groups (3, 4) do not occur in ONNX; 6 and 7 do not exist */
        }
    }
    return CUVIL_OK;
bad:
    return cuvil_err(s->ctx, CUVIL_ERR_MODEL,
                     "not a valid %s (protobuf decoding failed: the file is truncated or not ONNX)", s->kind);
too_many:
    return cuvil_err(s->ctx, CUVIL_ERR_UNSUPPORTED,
                     "the model holds more than %lld protobuf messages and strings (the limit is values=%lld; "
                     "raise it with --limit values=N)", (long long)s->max_elements, (long long)s->lim->values);
}

/* What protobuf-c allocates, one block per message and string (up to ~250 bytes each), is
 * bounded by limits.values of them: about 1 GB at most with the defaults, instead of 130 times
 * the file's size (10 million empty initializers in a 20 MB file took 2.6 GB). */
cuvil_status cuvil_onnx_prescan(cuvil_ctx *ctx, const uint8_t *data, size_t size, const cuvil_limits *lim) {
    scan s = {.ctx = ctx, .lim = lim, .max_elements = lim->values,
              .kind = "ONNX model"};
    return walk(&s, &onnx__model_proto__descriptor, data, data + size, 1, 0);
}

cuvil_status cuvil_onnx_prescan_tensor(cuvil_ctx *ctx, const uint8_t *data, size_t size, const cuvil_limits *lim) {
    scan s = {.ctx = ctx, .lim = lim, .max_elements = lim->values,
              .kind = "ONNX TensorProto"};
    return walk(&s, &onnx__tensor_proto__descriptor, data, data + size, 1, 0);
}
