/* onnx_int.h -- private interface of the ONNX frontend. */
#ifndef CUVIL_ONNX_INT_H
#define CUVIL_ONNX_INT_H

#include "ir/cir.h"
#include "onnx.pb-c.h"

/* Loads the ONNX model at path into a new graph. Symbolic dims are bound from o->dims (default
 * 1). Every op the compiler does not know is reported at once. Everything in the file is
 * checked against the ONNX spec, ONNX's operator schemas and o->limits. On failure returns a
 * status with the message on ctx and *out = NULL. */
cuvil_status cuvil_onnx_load(cuvil_ctx *ctx, const char *path, const cuvil_options *o,
                             cir_graph **out);
/* A model file read, checked for nesting and decoded, from which cuvil_onnx_build builds the
 * graph (the driver keeps the file's bytes for the output's checks). */
typedef struct cuvil_onnx_model cuvil_onnx_model;
cuvil_status cuvil_onnx_open(cuvil_ctx *ctx, const char *path, const cuvil_options *o, cuvil_onnx_model **out);
void cuvil_onnx_close(cuvil_onnx_model *m);
/* Builds the graph as cuvil_onnx_load does (a ranged symbol's dims at its upper bound, until
 * cir_graph_bind_syms makes them expressions). */
cuvil_status cuvil_onnx_build(cuvil_ctx *ctx, const cuvil_onnx_model *m, const cuvil_options *o, cir_graph **out);
/* The same from bytes in memory (the fuzzers use it). `path` names the model in messages and
 * records where it came from; model_dir is where external data lives (NULL: refused). */
cuvil_status cuvil_onnx_load_buffer(cuvil_ctx *ctx, const uint8_t *data, size_t size, const char *path,
                                    const char *model_dir, const cuvil_options *o, cir_graph **out);

/* Walks the protobuf wire format before protobuf-c unpacks it: refuses nesting deeper than
 * lim->nesting, graphs nested deeper than lim->subgraph_depth, and strings with a NUL byte.
 * Malformed wire data passes (protobuf-c refuses it). onnx_prescan.c. */
cuvil_status cuvil_onnx_prescan(cuvil_ctx *ctx, const uint8_t *data, size_t size, const cuvil_limits *lim);
/* The same for a serialized TensorProto (.pb tensor files). */
cuvil_status cuvil_onnx_prescan_tensor(cuvil_ctx *ctx, const uint8_t *data, size_t size, const cuvil_limits *lim);

/* Checks a node against ONNX's schema for its op at opset: input/output counts, attribute
 * names, types, repeats, required attributes. desc names the node in messages. Ops ONNX has
 * no schema for pass (the loader reports unsupported ops). onnx_schema.c. */
cuvil_status cuvil_onnx_check_node(cuvil_ctx *ctx, const Onnx__NodeProto *np, const char *desc, int opset);
/* The newest opset and IR version the schema table knows. */
int cuvil_onnx_max_opset(void);
int cuvil_onnx_max_ir_version(void);
/* The first opset in which ONNX defines op, 0 if never. */
int cuvil_onnx_first_opset(const char *op);

/* ===== Mapping ONNX ops onto CIR ops (onnx_ops.c) ======================================= */
/* One attribute of an ONNX node in its public form; TENSOR attributes are loaded as constant
 * values (tensor: the value id, else -1). */
typedef struct onnx_attr {
    const char *name;
    cuvil_attr a;
    const char **strs;     /* a STRINGS attribute's strings (a.type 0: no CIR op takes one; a mapping may) */
    int n_strs;
    int tensor;
    bool used;             /* consumed by the op's mapping (not passed through) */
} onnx_attr;

/* An ONNX node whose inputs and outputs are CIR value ids (-1: omitted). */
typedef struct onnx_node {
    const char *op, *name, *desc;   /* desc: "Conv 'conv1'" for messages */
    const char *domain;             /* "" (ONNX's) or "com.microsoft" */
    int opset;
    int n_in, n_out;
    int *in, *out;
    int n_attrs;
    onnx_attr *attrs;
} onnx_node;

/* An output an ONNX op has and its CIR op does not (a Dropout mask, BatchNormalization's
 * running statistics, MaxPool's indices): fine unless something uses it. */
typedef struct onnx_dropped {
    int value;
    const char *desc, *why;
} onnx_dropped;

typedef struct onnx_mapper {
    cir_graph *g;
    onnx_dropped *dropped;
    int n_dropped, cap_dropped;
} onnx_mapper;

/* The first opset of the ONNX domain Cuvil supports `op` from; 0 when it does not support it. */
int cuvil_onnx_op_since(const char *op);
/* The first opset of `domain` ("com.microsoft": ONNX Runtime's contrib ops) whose op Cuvil
 * maps, or 0 for none. */
int cuvil_onnx_domain_op_since(const char *domain, const char *op);
/* Every (domain, op) the frontend maps, a line each: domain ("" for ONNX's), op, the first
 * opset taken, the CIR op it becomes (or starts from, where written as several), and "direct"
 * (one node, the attributes by name) or "mapped" (a mapping function). Tab-separated. */
void cuvil_onnx_list_ops(cuvil_sb *sb);
/* Adds CIR for node on (zero or more nodes and constants). Errors name the node. */
cuvil_status cuvil_onnx_map_node(onnx_mapper *m, onnx_node *on);
/* After the graph is loaded: an error if a dropped output is used by a node or is a graph
 * output. */
cuvil_status cuvil_onnx_check_dropped(onnx_mapper *m);

/* protobuf-c allocator that goes through cuvil_malloc/cuvil_free (fault injection). */
extern ProtobufCAllocator cuvil_pb_allocator;

/* Converts a TensorProto's data (raw_data, typed fields, or external data relative to
 * model_dir; model_dir NULL refuses external data) into dense little-endian bytes allocated
 * in arena. `what` names the tensor in messages. The shape is checked against lim. Sets
 * *dtype, *ndim, dims, *data. */
cuvil_status cuvil_onnx_tensor_data(cuvil_ctx *ctx, cuvil_arena *arena, const Onnx__TensorProto *t,
                                    const char *model_dir, const char *what, const cuvil_limits *lim,
                                    cuvil_dtype *dtype, int *ndim, int64_t dims[CUVIL_MAX_DIMS], void **data);

/* The decoder behind cuvil_onnx_tensor_data, shared with the .pb reader of cuvil_tensor_read:
 * data must be in raw_data, the one typed field the spec names for its dtype, or (with
 * model_dir) an external file. Malformed tensors get status `malformed`; the data is allocated
 * with alloc(alloc_arg, nbytes). lim bounds the shape (NULL: the default limits). */
cuvil_status cuvil_onnx_tensor_decode(cuvil_ctx *ctx, const Onnx__TensorProto *t, const char *model_dir,
                                      const char *what, const cuvil_limits *lim, cuvil_status malformed,
                                      void *(*alloc)(void *, size_t),
                                      void *alloc_arg, cuvil_dtype *dtype, int *ndim, int64_t dims[CUVIL_MAX_DIMS],
                                      void **data, size_t *nbytes);

#endif
