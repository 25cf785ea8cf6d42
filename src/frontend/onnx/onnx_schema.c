/* onnx_schema.c -- every node checked against ONNX's operator schema of its opset version
 * (onnx_schema.inc, generated from the onnx package): input and output counts, attribute
 * names, types, repeats and required ones. ONNX's checker and ONNX Runtime refuse the same. */
#include "frontend/onnx/onnx_int.h"

#include <string.h>

/* ONNX AttributeProto.AttributeType numbers */
enum {
    ONNX_ATTR_UNDEFINED = 0, ONNX_ATTR_FLOAT = 1, ONNX_ATTR_INT = 2, ONNX_ATTR_STRING = 3, ONNX_ATTR_TENSOR = 4,
    ONNX_ATTR_GRAPH = 5, ONNX_ATTR_FLOATS = 6, ONNX_ATTR_INTS = 7, ONNX_ATTR_STRINGS = 8, ONNX_ATTR_TENSORS = 9,
    ONNX_ATTR_GRAPHS = 10, ONNX_ATTR_SPARSE_TENSOR = 11, ONNX_ATTR_SPARSE_TENSORS = 12, ONNX_ATTR_TYPE_PROTO = 13,
    ONNX_ATTR_TYPE_PROTOS = 14
};

typedef struct onnx_attr_spec {
    const char *name;
    int type;
    int required;
} onnx_attr_spec;

typedef struct onnx_schema {
    const char *op;
    int since, deprecated, min_in, max_in, min_out, max_out;
    const char *in_opts, *out_opts;   /* per formal parameter: S single, O optional, V variadic */
    int n_attrs;
    const onnx_attr_spec *attrs;
} onnx_schema;

/* Whether position k of a node's inputs (or outputs) must be named: its formal parameter (the
 * last one for the positions a variadic parameter takes) is not optional. */
static bool required_at(const char *opts, size_t k) {
    size_t n = strlen(opts);
    if (!n) return false;
    char o = k < n ? opts[k] : opts[n - 1] == 'V' ? 'V' : 'O';
    return o != 'O';
}

#include "frontend/onnx/onnx_schema.inc"

#define N_SCHEMAS (int)(sizeof onnx_schemas / sizeof onnx_schemas[0])

int cuvil_onnx_max_opset(void) { return ONNX_SCHEMA_MAX_OPSET; }
int cuvil_onnx_max_ir_version(void) { return ONNX_SCHEMA_MAX_IR_VERSION; }

static const char *type_name(int t) {
    static const char *const names[] = {"undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
                                        "strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors", "type_proto",
                                        "type_protos"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

/* The schema version in force for op at opset: the latest with since <= opset. *first gets
 * the op's first version (0 when ONNX has no such op). */
static const onnx_schema *find(const char *op, int opset, int *first) {
    /* the table is sorted by op (byte order), then since: binary search for the op's first row */
    int lo = 0, hi = N_SCHEMAS;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (strcmp(onnx_schemas[mid].op, op) < 0) lo = mid + 1;
        else hi = mid;
    }
    const onnx_schema *best = NULL;
    *first = lo < N_SCHEMAS && !strcmp(onnx_schemas[lo].op, op) ? onnx_schemas[lo].since : 0;
    for (int i = lo; i < N_SCHEMAS && !strcmp(onnx_schemas[i].op, op); i++)
        if (onnx_schemas[i].since <= opset) best = &onnx_schemas[i];
    return best;
}

cuvil_status cuvil_onnx_check_node(cuvil_ctx *ctx, const Onnx__NodeProto *np, const char *desc, int opset) {
    int first;
    const onnx_schema *s = find(np->op_type, opset, &first);
    if (!s) return CUVIL_OK;   /* not an op Cuvil implements: reported with the others by the loader */
    if (s->deprecated)
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: %s is deprecated since opset %d and not valid in opset %d", desc,
                         np->op_type, s->since, opset);
    if ((int64_t)np->n_input < s->min_in || (int64_t)np->n_input > s->max_in) {
        if (s->min_in == s->max_in)
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: has %zu inputs; %s-%d takes %d", desc, np->n_input, np->op_type,
                             s->since, s->min_in);
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: has %zu inputs; %s-%d takes %d to %d", desc, np->n_input, np->op_type,
                         s->since, s->min_in, s->max_in);
    }
    if ((int64_t)np->n_output < s->min_out || (int64_t)np->n_output > s->max_out) {
        if (s->min_out == s->max_out)
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: has %zu outputs; %s-%d has %d", desc, np->n_output, np->op_type,
                             s->since, s->min_out);
        return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: has %zu outputs; %s-%d has %d to %d", desc, np->n_output,
                         np->op_type, s->since, s->min_out, s->max_out);
    }
    for (size_t k = 0; k < np->n_input; k++)
        if ((!np->input[k] || !*np->input[k]) && required_at(s->in_opts, k))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: input %zu is required by %s-%d but has no name", desc, k,
                             np->op_type, s->since);
    for (size_t k = 0; k < np->n_output; k++)
        if ((!np->output[k] || !*np->output[k]) && required_at(s->out_opts, k))
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: output %zu is required by %s-%d but has no name", desc, k,
                             np->op_type, s->since);
    /* every attribute must be one the schema names, so repeats are found by schema index:
     * linear in the node's attributes however many a hostile node has */
    bool seen[64] = {false};
    if (s->n_attrs > (int)(sizeof seen / sizeof seen[0]))
        return cuvil_err(ctx, CUVIL_ERR_INTERNAL, "%s: the schema of %s has too many attributes", desc, np->op_type);
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        const char *name = a->name ? a->name : "";
        if (a->ref_attr_name && *a->ref_attr_name)
            return cuvil_err(ctx, CUVIL_ERR_MODEL,
                             "%s: attribute '%s' refers to a function attribute ('%s'), which is only valid inside a "
                             "function", desc, name, a->ref_attr_name);
        int k = 0;
        while (k < s->n_attrs && strcmp(s->attrs[k].name, name)) k++;
        if (k == s->n_attrs) {
            char known[512];
            size_t o = 0;
            known[0] = 0;
            for (int j = 0; j < s->n_attrs && o < sizeof known; j++)
                o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", j ? ", " : "", s->attrs[j].name);
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: unknown attribute '%s' (%s-%d has %s%s)", desc, name,
                             np->op_type, s->since, s->n_attrs ? "" : "none", known);
        }
        if (seen[k]) return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' is given twice", desc, name);
        seen[k] = true;
        if ((int)a->type != s->attrs[k].type)
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' has type %s; %s-%d expects %s", desc, name,
                             a->has_type ? type_name((int)a->type) : "(none)", np->op_type, s->since,
                             type_name(s->attrs[k].type));
    }
    for (int k = 0; k < s->n_attrs; k++)
        if (s->attrs[k].required && !seen[k])
            return cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: required attribute '%s' is missing", desc, s->attrs[k].name);
    return CUVIL_OK;
}

int cuvil_onnx_first_opset(const char *op) {
    int first;
    find(op, 0, &first);
    return first;
}
