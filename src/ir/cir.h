/*
 * cir.h -- CIR, Cuvil's typed dataflow graph.
 *
 * A graph is a list of values and a list of nodes in topological order. Values have a dtype
 * and a shape whose dims are integers, each optionally tied to a named symbol (the `batch` an
 * exporter leaves open); this version binds every symbol to a number before shape inference,
 * and keeps the name so the compiled model can report it. A value is one of: a graph input,
 * a constant (data known at compile time), or an activation produced by a node. Nodes carry
 * the ONNX op type and attributes as loaded, the source node name (for messages and generated
 * comments), and what passes add: a fused activation and a fused residual input.
 *
 * All memory belongs to the graph's arena; cir_graph_free() releases everything.
 */
#ifndef CUVIL_CIR_H
#define CUVIL_CIR_H

#include "cuvil/cuvil.h"
#include "cuvil_rt.h"
#include "util/util.h"

#define CIR_MAX_DIMS CUVIL_MAX_DIMS

typedef enum cir_value_kind {
    CIR_VAL_ACT = 0,   /* produced by a node */
    CIR_VAL_INPUT,     /* a graph input: caller's buffer */
    CIR_VAL_CONST      /* data known at compile time */
} cir_value_kind;

typedef struct cir_value {
    int id;
    const char *name;          /* ONNX name; for messages and comments only */
    cir_value_kind kind;
    cuvil_dtype dtype;         /* UNDEFINED until inferred */
    int ndim;                  /* -1 until inferred */
    int64_t dims[CIR_MAX_DIMS];
    int dim_sym[CIR_MAX_DIMS]; /* index into graph->syms, or -1 */
    void *data;                /* CIR_VAL_CONST: dense row-major data, arena-owned */
    int producer;              /* node index, -1 for inputs and constants */
    int n_uses;                /* computed by cir_graph_count_uses() */
    int output_index;          /* position among graph outputs, -1 if not an output */
    /* What the model declares for this value (a graph output or a value_info entry), checked
     * against what shape inference finds. decl_dtype UNDEFINED: nothing declared. */
    cuvil_dtype decl_dtype;
    int decl_ndim;             /* -1: no shape declared */
    int64_t decl_dims[CIR_MAX_DIMS];   /* -1: not a fixed number (symbolic or absent) */
} cir_value;

typedef enum cir_attr_type {
    CIR_ATTR_FLOAT = 1, CIR_ATTR_INT, CIR_ATTR_STRING, CIR_ATTR_TENSOR, CIR_ATTR_GRAPH,
    CIR_ATTR_FLOATS = 6, CIR_ATTR_INTS, CIR_ATTR_STRINGS
} cir_attr_type; /* numbers are ONNX's AttributeProto.AttributeType */

typedef struct cir_attr {
    const char *name;
    cir_attr_type type;
    float f;
    int64_t i;
    const char *s;
    int n;                     /* count for FLOATS/INTS/STRINGS */
    float *floats;
    int64_t *ints;
    const char **strings;
    int tensor;                /* CIR_ATTR_TENSOR: a constant value id */
} cir_attr;

struct cir_opdef;

typedef struct cir_node {
    int id;
    const char *op;            /* ONNX op type, e.g. "Conv" */
    const char *domain;        /* "" for the default ONNX domain */
    const char *name;          /* ONNX node name, or a synthesised "Conv_12" */
    int opset;                 /* opset version of the node's domain */
    const struct cir_opdef *def;
    int n_in, n_out;
    int *in;                   /* value ids; -1 for an omitted optional input */
    int *out;
    int n_attrs;
    cir_attr *attrs;
    bool dead;                 /* removed by a pass; skipped everywhere, dropped by DCE */
    /* added by passes */
    cuvil_act_params act;      /* fused activation applied to the output */
    int residual;              /* value id added before the activation, or -1 */
    const char *fused;         /* names of the ops fused in, for comments ("BatchNormalization+Relu") */
} cir_node;

typedef struct cir_sym {
    const char *name;
    int64_t value;
} cir_sym;

typedef struct cir_graph {
    cuvil_ctx *ctx;
    cuvil_arena arena;
    const char *name;
    int opset;                 /* default-domain opset */
    int n_values, cap_values;
    cir_value *values;
    int n_nodes, cap_nodes;
    cir_node *nodes;
    int n_inputs, n_outputs;
    int *inputs;               /* value ids */
    int *outputs;              /* value ids */
    int n_syms;
    cir_sym syms[32];
    char model_sha256[65];
    const char *model_path;
    cuvil_limits limits;       /* bounds on what the model may make the compiler do */
    uint64_t const_bytes;      /* bytes of constant data held, checked against limits.total_bytes */
    uint64_t folded_bytes;     /* of those, computed at compile time (limits.folded_bytes) */
    double fold_work;          /* work spent folding so far (limits.fold_ops, cuvil_fold_work) */
} cir_graph;

cir_graph *cir_graph_new(cuvil_ctx *ctx);
void cir_graph_free(cir_graph *g);

/* Adds a value with no shape yet; returns its id or -1 (out of memory, message on ctx). */
int cir_value_add(cir_graph *g, const char *name, cir_value_kind kind);
/* Adds a constant value holding a copy of data (nbytes must match dtype x dims). dims may
 * point into the graph (it is copied before the graph grows). */
int cir_const_add(cir_graph *g, const char *name, cuvil_dtype dtype, int ndim,
                  const int64_t *dims, const void *data);
/* Makes v a constant with fresh zeroed data of its dtype and shape; returns the data, or NULL
 * (message on the context) when out of memory or over limits.total_bytes. */
void *cir_value_make_const(cir_graph *g, cir_value *v);
/* Adds a node; inputs/outputs are copied. Returns its index or -1. */
int cir_node_add(cir_graph *g, const char *op, const char *name, int n_in, const int *in,
                 int n_out, const int *out);

static inline cir_value *cir_val(cir_graph *g, int id) { return id < 0 ? NULL : &g->values[id]; }
/* Input i of n, or NULL if absent/omitted. */
static inline cir_value *cir_in(cir_graph *g, const cir_node *n, int i) {
    return i < n->n_in && n->in[i] >= 0 ? &g->values[n->in[i]] : NULL;
}
/* Output i, which must exist (required outputs are named: the loader checks it). */
static inline cir_value *cir_out(cir_graph *g, const cir_node *n, int i) {
    CUVIL_ASSERT(i < n->n_out && n->out[i] >= 0);
    return &g->values[n->out[i]];
}

int64_t cir_numel(const cir_value *v);
size_t cir_nbytes(const cir_value *v);
bool cir_is_const(const cir_value *v);
/* Sets v's dtype and shape (dims copied, symbols cleared). */
void cir_set_shape(cir_value *v, cuvil_dtype dtype, int ndim, const int64_t *dims);
/* Checks v's shape against the graph's limits (cuvil_shape_ok); errors name node n (or the
 * value alone when n is NULL). Shape inference runs it on every output it sets. */
cuvil_status cir_check_shape(cir_graph *g, const cir_node *n, const cir_value *v);
/* "f32[1,3,224,224]" with symbolic dims as "batch=1"; returns buf. Symbol names are written
 * through cuvil_safe_char(), so the text is safe in comments, DOT and messages. */
char *cir_shape_str(const cir_graph *g, const cir_value *v, char *buf, size_t len);
const char *cir_dtype_short(cuvil_dtype t);

/* Attribute access with defaults; NULL/def when absent. */
const cir_attr *cir_attr_find(const cir_node *n, const char *name);
int64_t cir_attr_int(const cir_node *n, const char *name, int64_t def);
float cir_attr_float(const cir_node *n, const char *name, float def);
const char *cir_attr_str(const cir_node *n, const char *name, const char *def);
/* Integer list: returns the count (or -1 when absent) and a pointer to the elements. */
int cir_attr_ints(const cir_node *n, const char *name, const int64_t **out);

/* Conversions without undefined behaviour: double -> int64 truncates toward zero, NaN gives 0,
 * out-of-range values saturate; float -> IEEE half and -> bfloat16 round to nearest even
 * (overflow to infinity, NaN stays NaN). */
int64_t cir_f64_to_i64(double x);
uint16_t cir_f32_to_f16(float f);
uint16_t cir_f32_to_bf16(float f);

/* Reads element i of a constant as int64 / double (any numeric dtype). */
int64_t cir_const_i64(const cir_value *v, int64_t i);
double cir_const_f64(const cir_value *v, int64_t i);
/* Writes element i of a constant from a double / int64 (converted to its dtype). */
void cir_const_set_f64(cir_value *v, int64_t i, double x);
void cir_const_set_i64(cir_value *v, int64_t i, int64_t x);

/* Recomputes producers and use counts from the live nodes. */
void cir_graph_count_uses(cir_graph *g);

/* Checks structural invariants: every input of a live node is a graph input, a constant or
 * produced by an earlier live node; every value produced once; shapes and dtypes known when
 * `shapes` is set; outputs defined. Returns CUVIL_OK or CUVIL_ERR_INTERNAL with a message. */
cuvil_status cir_verify(cir_graph *g, bool shapes, const char *after_pass);

/* Printers. Text: one line per value declaration and node. DOT: a Graphviz digraph. */
void cir_print_text(cir_graph *g, cuvil_sb *out);
void cir_print_dot(cir_graph *g, cuvil_sb *out);

/* Message prefix for node n: "Conv 'conv1': ". Returns buf. */
const char *cir_node_desc(const cir_node *n, char *buf, size_t len);
/* Records an error about node n: "<op> '<name>': <message>". */
cuvil_status cir_node_err(cir_graph *g, const cir_node *n, cuvil_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* CUVIL_CIR_H */
