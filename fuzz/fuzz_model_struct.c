/* fuzz_model_struct.c -- structure-aware libFuzzer target: the same pipeline as fuzz_model.c,
 * but new inputs come from valid models changed the way a hostile file would change them:
 * dims, attributes (values, types, repeats, removals), names (to hostile strings and to other
 * names), edges (rewired, out of order), op types, dtypes, opsets. Inputs that do not parse
 * fall back to libFuzzer's byte mutations. */
#include "fuzz_common.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fuzz_compile(data, size, size ? data[size - 1] % 4 : 2);
}

#ifndef CUVIL_FUZZ_REPLAY   /* the replay build (replay_main.c) runs inputs only */
/* ===== randomness and interesting values ================================================= */
static uint64_t rng_state;
static uint64_t rnd(void) {   /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t pick(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static int64_t interesting_int(void) {
    static const int64_t v[] = {0, 1, -1, 2, 3, 4, 7, 8, 16, 64, 255, 256, 1000, 65535, 65536, -2, -3,
                                INT32_MAX, (int64_t)INT32_MAX + 1, INT32_MIN, (int64_t)1 << 32, ((int64_t)1 << 32) + 1,
                                (int64_t)1 << 40, (int64_t)1 << 62, INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 1};
    if (rnd() % 4 == 0) return (int64_t)(rnd() % 17) - 4;
    return v[pick(sizeof v / sizeof v[0])];
}

static float interesting_float(void) {
    static const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-7f, 1e9f, 1e30f, -1e30f, 3.4e38f};
    switch (rnd() % 8) {
    case 0: return __builtin_nanf("");
    case 1: return __builtin_inff();
    case 2: return -__builtin_inff();
    default: return v[pick(sizeof v / sizeof v[0])];
    }
}

/* Hostile and ordinary strings; the result is malloc'd (protobuf-c frees it). */
static char *weird_string(void) {
    static const char *const v[] = {
        "x", "y", "", "b */ __attribute__((constructor)) static void pwn(void){} /* ", "/*", "*/", "\"]; x [label=\"",
        "\\", "?\?/", "a\nb", "%s%n%s", "../../etc/passwd", "\x7f\x80\xff", "batch", "N", "Conv", "in[0]"};
    if (rnd() % 8 == 0) {
        size_t n = 1 + pick(700);
        char *s = malloc(n + 1);
        if (!s) return NULL;
        for (size_t i = 0; i < n; i++) s[i] = (char)(' ' + pick(95));
        s[n] = 0;
        return s;
    }
    const char *src = v[pick(sizeof v / sizeof v[0])];
    char *s = malloc(strlen(src) + 1);
    if (s) strcpy(s, src);
    return s;
}

static void set_string(char **field, char *s) {
    if (!s) return;
    free(*field);   /* protobuf-c's default allocator is malloc */
    *field = s;
}

static char *copy_string(const char *src) {
    char *s = malloc(strlen(src ? src : "") + 1);
    if (s) strcpy(s, src ? src : "");
    return s;
}

/* ===== what there is to mutate ============================================================= */
static Onnx__TensorShapeProto *some_shape(Onnx__GraphProto *g) {
    size_t n = g->n_input + g->n_output + g->n_value_info;
    if (!n) return NULL;
    size_t k = pick(n);
    Onnx__ValueInfoProto *vi = k < g->n_input ? g->input[k] : k < g->n_input + g->n_output ? g->output[k - g->n_input]
                                                                                           : g->value_info[k - g->n_input - g->n_output];
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type) return NULL;
    return vi->type->tensor_type->shape;
}

static Onnx__ValueInfoProto *some_value_info(Onnx__GraphProto *g) {
    size_t n = g->n_input + g->n_output + g->n_value_info;
    if (!n) return NULL;
    size_t k = pick(n);
    return k < g->n_input ? g->input[k] : k < g->n_input + g->n_output ? g->output[k - g->n_input]
                                                                       : g->value_info[k - g->n_input - g->n_output];
}

/* A name some value of the graph has. */
static const char *some_name(Onnx__GraphProto *g) {
    size_t n = g->n_input + g->n_initializer + g->n_node;
    if (!n) return "x";
    size_t k = pick(n);
    if (k < g->n_input) return g->input[k]->name;
    if (k < g->n_input + g->n_initializer) return g->initializer[k - g->n_input]->name;
    Onnx__NodeProto *nd = g->node[k - g->n_input - g->n_initializer];
    return nd->n_output ? nd->output[pick(nd->n_output)] : "x";
}

static const char *const op_names[] = {
    "Conv", "ConvTranspose", "BatchNormalization", "Relu", "Clip", "Add", "Mul", "Div", "MaxPool", "AveragePool",
    "GlobalAveragePool", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Gemm", "MatMul", "Shape",
    "Slice", "Split", "Softmax", "Gather", "Cast", "Pad", "ReduceMean", "ReduceSum", "Resize", "Upsample",
    "ConstantOfShape", "Range", "Expand", "Equal", "Where", "Tile", "Sum", "Constant", "Identity", "Size", "Sigmoid",
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt", "SequenceLength",
    "SplitToSequence", "ConcatFromSequence"};

static const char *const attr_names[] = {"axis", "axes", "pads", "strides", "dilations", "kernel_shape", "group",
                                         "perm", "to", "mode", "auto_pad", "alpha", "beta", "transA", "transB",
                                         "keepdims", "epsilon", "split", "value", "ceil_mode", "allowzero", "starts",
                                         "ends", "scales", "output_shape", "output_padding", "num_outputs", "new_axis", "dtype",
                                         "bogus"};

/* ===== mutations =========================================================================== */
static void mutate_dim(Onnx__ModelProto *m) {
    Onnx__GraphProto *g = m->graph;
    if (rnd() % 2 && g->n_initializer) {
        Onnx__TensorProto *t = g->initializer[pick(g->n_initializer)];
        if (t->n_dims) t->dims[pick(t->n_dims)] = interesting_int();
        return;
    }
    Onnx__TensorShapeProto *s = some_shape(g);
    if (!s || !s->n_dim) return;
    Onnx__TensorShapeProto__Dimension *d = s->dim[pick(s->n_dim)];
    if (rnd() % 4 == 0) {
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) free(d->dim_param);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = weird_string();
        if (!d->dim_param) d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
        return;
    }
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) free(d->dim_param);
    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d->dim_value = interesting_int();
}

static void mutate_attr(Onnx__ModelProto *m) {
    Onnx__GraphProto *g = m->graph;
    if (!g->n_node) return;
    Onnx__NodeProto *n = g->node[pick(g->n_node)];
    unsigned what = (unsigned)(rnd() % 8);
    if (what == 0 || !n->n_attribute) {   /* add one (maybe a repeat, maybe unknown) */
        Onnx__AttributeProto *a = malloc(sizeof *a), **arr = realloc(n->attribute, sizeof *arr * (n->n_attribute + 1));
        if (!a || !arr) {
            free(a);
            if (arr) n->attribute = arr;
            return;
        }
        n->attribute = arr;
        onnx__attribute_proto__init(a);
        a->name = copy_string(n->n_attribute && rnd() % 2 ? n->attribute[pick(n->n_attribute)]->name
                                                          : attr_names[pick(sizeof attr_names / sizeof attr_names[0])]);
        a->has_type = 1;
        if (rnd() % 2) {
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
            a->has_i = 1;
            a->i = interesting_int();
        } else {
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
            a->n_ints = 1 + pick(6);
            a->ints = malloc(sizeof(int64_t) * a->n_ints);
            if (!a->ints) a->n_ints = 0;
            for (size_t i = 0; i < a->n_ints; i++) a->ints[i] = interesting_int();
        }
        n->attribute[n->n_attribute++] = a;
        return;
    }
    Onnx__AttributeProto *a = n->attribute[pick(n->n_attribute)];
    switch (what) {
    case 1:
        a->i = interesting_int();
        a->has_i = 1;
        break;
    case 2:
        if (a->n_ints) a->ints[pick(a->n_ints)] = interesting_int();
        else a->f = interesting_float();
        break;
    case 3:
        a->f = interesting_float();
        a->has_f = 1;
        if (a->n_floats) a->floats[pick(a->n_floats)] = interesting_float();
        break;
    case 4:   /* the type no longer matches the value */
        a->type = (Onnx__AttributeProto__AttributeType)(1 + pick(14));
        break;
    case 5:   /* remove it */
        for (size_t i = 0; i < n->n_attribute; i++)
            if (n->attribute[i] == a) {
                onnx__attribute_proto__free_unpacked(a, NULL);
                n->attribute[i] = n->attribute[--n->n_attribute];
                break;
            }
        break;
    case 6:
        set_string(&a->name, copy_string(attr_names[pick(sizeof attr_names / sizeof attr_names[0])]));
        break;
    default:
        if (a->t && a->t->n_dims) a->t->dims[pick(a->t->n_dims)] = interesting_int();
        else if (a->s.len) a->s.data[pick(a->s.len)] = (uint8_t)rnd();
        break;
    }
}

static void mutate_name(Onnx__ModelProto *m) {
    Onnx__GraphProto *g = m->graph;
    switch (rnd() % 6) {
    case 0:
        if (g->n_node) set_string(&g->node[pick(g->n_node)]->name, weird_string());
        break;
    case 1: {   /* a value renamed everywhere it appears would be a no-op: rename one place only */
        Onnx__ValueInfoProto *vi = some_value_info(g);
        if (vi) set_string(&vi->name, rnd() % 2 ? weird_string() : copy_string(some_name(g)));
        break;
    }
    case 2:
        if (g->n_initializer) set_string(&g->initializer[pick(g->n_initializer)]->name, copy_string(some_name(g)));
        break;
    case 3:
        set_string(&g->name, weird_string());
        break;
    default: {   /* consistent rename of one value to a hostile name: stays valid, tests escaping */
        if (!g->n_node) break;
        Onnx__NodeProto *n = g->node[pick(g->n_node)];
        if (!n->n_output) break;
        size_t o = pick(n->n_output);
        char *old = copy_string(n->output[o]), *neu = weird_string();
        if (!old || !neu || !*neu) {
            free(old);
            free(neu);
            break;
        }
        for (size_t i = 0; i < g->n_node; i++)
            for (size_t j = 0; j < g->node[i]->n_input; j++)
                if (g->node[i]->input[j] && !strcmp(g->node[i]->input[j], old))
                    set_string(&g->node[i]->input[j], copy_string(neu));
        for (size_t i = 0; i < g->n_output; i++)   /* (a graph output may have no name) */
            if (g->output[i]->name && !strcmp(g->output[i]->name, old)) set_string(&g->output[i]->name, copy_string(neu));
        set_string(&n->output[o], neu);
        free(old);
        break;
    }
    }
}

static void mutate_edge(Onnx__ModelProto *m) {
    Onnx__GraphProto *g = m->graph;
    if (!g->n_node) return;
    Onnx__NodeProto *n = g->node[pick(g->n_node)];
    switch (rnd() % 4) {
    case 0:
        if (n->n_input) set_string(&n->input[pick(n->n_input)], copy_string(rnd() % 8 ? some_name(g) : ""));
        break;
    case 1:
        if (n->n_output) set_string(&n->output[pick(n->n_output)], copy_string(some_name(g)));
        break;
    case 2: {   /* out of order */
        size_t a = pick(g->n_node), b = pick(g->n_node);
        Onnx__NodeProto *t = g->node[a];
        g->node[a] = g->node[b];
        g->node[b] = t;
        break;
    }
    default:   /* one input fewer or more */
        if (n->n_input && rnd() % 2) {
            free(n->input[--n->n_input]);
        } else {
            char **arr = realloc(n->input, sizeof *arr * (n->n_input + 1));
            if (!arr) break;
            n->input = arr;
            n->input[n->n_input] = copy_string(some_name(g));
            if (n->input[n->n_input]) n->n_input++;
        }
        break;
    }
}

static void mutate_misc(Onnx__ModelProto *m) {
    Onnx__GraphProto *g = m->graph;
    switch (rnd() % 6) {
    case 0:
        if (g->n_node)
            set_string(&g->node[pick(g->n_node)]->op_type,
                       copy_string(op_names[pick(sizeof op_names / sizeof op_names[0])]));
        break;
    case 1: {
        Onnx__ValueInfoProto *vi = some_value_info(g);
        if (vi && vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && vi->type->tensor_type)
            vi->type->tensor_type->elem_type = (int32_t)pick(24);
        break;
    }
    case 2:
        if (g->n_initializer) g->initializer[pick(g->n_initializer)]->data_type = (int32_t)pick(24);
        break;
    case 3:
        if (m->n_opset_import) m->opset_import[pick(m->n_opset_import)]->version = rnd() % 4 ? 1 + (int64_t)pick(30) : interesting_int();
        break;
    case 4:
        m->ir_version = rnd() % 2 ? 1 + (int64_t)pick(16) : interesting_int();
        break;
    default:
        if (g->n_initializer) {
            Onnx__TensorProto *t = g->initializer[pick(g->n_initializer)];
            if (t->raw_data.len) t->raw_data.len = pick(t->raw_data.len + 1);
        }
        break;
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    /* protobuf-c recurses without bound: the seeds include models nested 5,000 deep, which the
     * compiler refuses before unpacking; the mutator must not unpack them either */
    cuvil_ctx quiet;
    memset(&quiet, 0, sizeof quiet);
    cuvil_limits lim;
    cuvil_limits_init(&lim);
    if (cuvil_onnx_prescan(&quiet, data, size, &lim) != CUVIL_OK) return LLVMFuzzerMutate(data, size, max_size);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
    if (!m || !m->graph) {
        if (m) onnx__model_proto__free_unpacked(m, NULL);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    rng_state = seed;
    int rounds = 1 + (int)pick(3);
    for (int r = 0; r < rounds; r++) {
        switch (rnd() % 5) {
        case 0: mutate_dim(m); break;
        case 1: mutate_attr(m); break;
        case 2: mutate_name(m); break;
        case 3: mutate_edge(m); break;
        default: mutate_misc(m); break;
        }
    }
    size_t need = onnx__model_proto__get_packed_size(m);
    size_t out = 0;
    if (need <= max_size) {
        onnx__model_proto__pack(m, data);
        out = need;
    }
    onnx__model_proto__free_unpacked(m, NULL);
    return out ? out : LLVMFuzzerMutate(data, size, max_size);
}
#endif
