/* onnx_load.c -- ONNX ModelProto (protobuf-c) to CIR. See onnx_int.h. */
#include "frontend/onnx/onnx_int.h"
#include "frontend/onnx/ops/ops_int.h"

#include <libgen.h>
#include <limits.h>
#include <string.h>

typedef struct loader {
    cuvil_ctx *ctx;
    cir_graph *g;
    const cuvil_options *o;
    cuvil_map names;          /* value name -> id */
    char model_dir[PATH_MAX];
    Onnx__ModelProto *m;
} loader;

static int opset_of(const Onnx__ModelProto *m, const char *domain) {
    bool dflt = !domain || !*domain || !strcmp(domain, "ai.onnx");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        bool d_dflt = !d || !*d || !strcmp(d, "ai.onnx");
        if ((dflt && d_dflt) || (!dflt && d && !strcmp(d, domain)))
            return (int)m->opset_import[i]->version;
    }
    return -1;
}

static int sym_get(loader *L, const char *name) {
    cir_graph *g = L->g;
    for (int i = 0; i < g->n_syms; i++)
        if (!strcmp(g->syms[i].name, name)) return i;
    if (g->n_syms == (int)(sizeof g->syms / sizeof g->syms[0])) return -1;
    int64_t val = 1;
    for (int i = 0; i < L->o->n_dims; i++)
        if (!strcmp(L->o->dims[i].name, name)) val = L->o->dims[i].value;
    g->syms[g->n_syms].name = cuvil_arena_strdup(&g->arena, name);
    g->syms[g->n_syms].value = val;
    return g->n_syms++;
}

static cuvil_status add_name(loader *L, const char *name, int id) {
    if (!cuvil_map_put(&L->names, L->g->values[id].name, id))
        return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    (void)name;
    return CUVIL_OK;
}

static cuvil_status load_initializers(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *name = t->name ? t->name : "";
        cuvil_dtype dt;
        int ndim;
        int64_t dims[CUVIL_MAX_DIMS];
        void *data;
        cuvil_status s = cuvil_onnx_tensor_data(L->ctx, &g->arena, t, L->model_dir, name, &dt,
                                                &ndim, dims, &data);
        if (s) return s;
        int id = cir_value_add(g, name, CIR_VAL_CONST);
        if (id < 0) return L->ctx->status;
        cir_set_shape(&g->values[id], dt, ndim, dims);
        g->values[id].data = data;
        if ((s = add_name(L, name, id))) return s;
    }
    if (gp->n_sparse_initializer)
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "sparse initializers are not supported");
    return CUVIL_OK;
}

static cuvil_status load_inputs(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    g->inputs = cuvil_arena_alloc(&g->arena, sizeof(int) * (gp->n_input + 1));
    if (!g->inputs) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi->name ? vi->name : "";
        if (cuvil_map_get(&L->names, name) >= 0) continue;  /* an initializer (IR < 4 style) */
        const Onnx__TypeProto *tp = vi->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                             "graph input '%s': only tensor inputs are supported", name);
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        cuvil_dtype dt = (cuvil_dtype)tt->elem_type;
        if (!cuvil_dtype_size(dt))
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': element type %d is not supported",
                             name, (int)tt->elem_type);
        if (!tt->shape)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                             "graph input '%s': the model gives no shape (rank unknown)", name);
        if (tt->shape->n_dim > CUVIL_MAX_DIMS)
            return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': rank %zu > %d", name,
                             tt->shape->n_dim, CUVIL_MAX_DIMS);
        int id = cir_value_add(g, name, CIR_VAL_INPUT);
        if (id < 0) return L->ctx->status;
        cir_value *v = &g->values[id];
        int64_t dims[CUVIL_MAX_DIMS];
        int syms[CUVIL_MAX_DIMS];
        for (size_t d = 0; d < tt->shape->n_dim; d++) {
            const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            syms[d] = -1;
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0) {
                dims[d] = dim->dim_value;
            } else {
                char anon[256];
                const char *sname = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                                            dim->dim_param && *dim->dim_param
                                        ? dim->dim_param
                                        : (snprintf(anon, sizeof anon, "%s_dim%zu", name, d), anon);
                syms[d] = sym_get(L, sname);
                if (syms[d] < 0)
                    return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "graph input '%s': too many symbolic dims", name);
                dims[d] = g->syms[syms[d]].value;
            }
        }
        cir_set_shape(v, dt, (int)tt->shape->n_dim, dims);
        for (size_t d = 0; d < tt->shape->n_dim; d++) v->dim_sym[d] = syms[d];
        g->inputs[g->n_inputs++] = id;
        cuvil_status s = add_name(L, name, id);
        if (s) return s;
    }
    return CUVIL_OK;
}

static cuvil_status load_attr(loader *L, cir_node *n, const Onnx__AttributeProto *ap, cir_attr *a) {
    cir_graph *g = L->g;
    char desc[512];
    a->name = cuvil_arena_strdup(&g->arena, ap->name ? ap->name : "");
    a->type = (cir_attr_type)ap->type;
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        char *s = cuvil_arena_alloc(&g->arena, ap->s.len + 1);
        if (!s) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        if (ap->s.len) memcpy(s, ap->s.data, ap->s.len);
        a->s = s;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->n = (int)ap->n_floats;
        a->floats = cuvil_arena_memdup(&g->arena, ap->floats, sizeof(float) * ap->n_floats);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->n = (int)ap->n_ints;
        a->ints = cuvil_arena_memdup(&g->arena, ap->ints, sizeof(int64_t) * ap->n_ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->n = (int)ap->n_strings;
        a->strings = cuvil_arena_alloc(&g->arena, sizeof(char *) * (ap->n_strings + 1));
        for (size_t i = 0; i < ap->n_strings; i++) {
            char *s = cuvil_arena_alloc(&g->arena, ap->strings[i].len + 1);
            if (!s) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
            if (ap->strings[i].len) memcpy(s, ap->strings[i].data, ap->strings[i].len);
            a->strings[i] = s;
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s: attribute '%s' has no tensor",
                                     cir_node_desc(n, desc, sizeof desc), a->name);
        cuvil_dtype dt;
        int ndim;
        int64_t dims[CUVIL_MAX_DIMS];
        void *data;
        char what[600];
        snprintf(what, sizeof what, "%s.%s", n->name, a->name);
        cuvil_status s = cuvil_onnx_tensor_data(L->ctx, &g->arena, ap->t, L->model_dir, what, &dt,
                                                &ndim, dims, &data);
        if (s) return cuvil_err_prefix(L->ctx, "%s: ", cir_node_desc(n, desc, sizeof desc));
        int id = cir_value_add(g, what, CIR_VAL_CONST);
        if (id < 0) return L->ctx->status;
        cir_set_shape(&g->values[id], dt, ndim, dims);
        g->values[id].data = data;
        a->tensor = id;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED,
                         "%s: attribute '%s' is a subgraph; control flow (If/Loop/Scan) is not supported yet",
                         cir_node_desc(n, desc, sizeof desc), a->name);
    default:
        return cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%s: attribute '%s' has unsupported type %d",
                         cir_node_desc(n, desc, sizeof desc), a->name, (int)ap->type);
    }
    if ((a->n && ((a->type == CIR_ATTR_FLOATS && !a->floats) || (a->type == CIR_ATTR_INTS && !a->ints))) || !a->name)
        return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    return CUVIL_OK;
}

static cuvil_status load_nodes(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    cuvil_sb unknown = {0};
    int n_unknown = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *op = np->op_type ? np->op_type : "";
        const char *domain = np->domain ? np->domain : "";
        if (!strcmp(domain, "ai.onnx")) domain = "";
        char synth[128];
        const char *name = np->name && *np->name ? np->name : (snprintf(synth, sizeof synth, "%s_%zu", op, i), synth);
        int opset = opset_of(L->m, domain);
        const cir_opdef *def = cir_op_lookup(domain, op);
        if (!def || opset < def->since) {
            cuvil_sb_printf(&unknown, "\n  %s%s%s '%s' (opset %d)%s", domain, *domain ? "." : "", op, name,
                            opset, def ? ": this opset version is older than Cuvil supports" : "");
            n_unknown++;
        }
        if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2) {
            cuvil_sb_free(&unknown);
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s '%s': too many inputs or outputs", op, name);
        }
        int *in = cuvil_arena_alloc(&L->g->arena, sizeof(int) * (np->n_input + 1));
        int *out = cuvil_arena_alloc(&L->g->arena, sizeof(int) * (np->n_output + 1));
        if (!in || !out) {
            cuvil_sb_free(&unknown);
            return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        }
        for (size_t j = 0; j < np->n_input; j++) {
            const char *iname = np->input[j];
            if (!iname || !*iname) {
                in[j] = -1;
                continue;
            }
            in[j] = cuvil_map_get(&L->names, iname);
            if (in[j] < 0) {
                cuvil_sb_free(&unknown);
                return cuvil_err(L->ctx, CUVIL_ERR_MODEL,
                                 "%s '%s': input '%s' is not a graph input, an initializer or the output of an "
                                 "earlier node (is the graph sorted?)", op, name, iname);
            }
        }
        for (size_t j = 0; j < np->n_output; j++) {
            const char *oname = np->output[j];
            if (!oname || !*oname) {
                out[j] = -1;
                continue;
            }
            if (cuvil_map_get(&L->names, oname) >= 0) {
                cuvil_sb_free(&unknown);
                return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "%s '%s': output '%s' is defined twice", op, name, oname);
            }
            out[j] = cir_value_add(g, oname, CIR_VAL_ACT);
            if (out[j] < 0) return L->ctx->status;
            cuvil_status s = add_name(L, oname, out[j]);
            if (s) return s;
        }
        int idx = cir_node_add(g, op, name, (int)np->n_input, in, (int)np->n_output, out);
        if (idx < 0) return L->ctx->status;
        cir_node *n = &g->nodes[idx];
        n->domain = cuvil_arena_strdup(&g->arena, domain);
        n->opset = opset;
        n->def = def;
        n->n_attrs = (int)np->n_attribute;
        n->attrs = cuvil_arena_alloc(&g->arena, sizeof(cir_attr) * (np->n_attribute + 1));
        if (!n->attrs) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
        for (size_t j = 0; j < np->n_attribute; j++) {
            cuvil_status s = load_attr(L, n, np->attribute[j], &n->attrs[j]);
            if (s) {
                cuvil_sb_free(&unknown);
                return s;
            }
        }
    }
    if (n_unknown) {
        cuvil_status s = cuvil_err(L->ctx, CUVIL_ERR_UNSUPPORTED, "%d node%s use%s ops Cuvil does not support:%s",
                                   n_unknown, n_unknown > 1 ? "s" : "", n_unknown > 1 ? "" : "s",
                                   unknown.s ? unknown.s : "");
        cuvil_sb_free(&unknown);
        return s;
    }
    cuvil_sb_free(&unknown);
    return CUVIL_OK;
}

static cuvil_status load_outputs(loader *L, const Onnx__GraphProto *gp) {
    cir_graph *g = L->g;
    if (!gp->n_output) return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "the graph has no outputs");
    g->outputs = cuvil_arena_alloc(&g->arena, sizeof(int) * gp->n_output);
    if (!g->outputs) return cuvil_err(L->ctx, CUVIL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        int id = cuvil_map_get(&L->names, name);
        if (id < 0)
            return cuvil_err(L->ctx, CUVIL_ERR_MODEL, "graph output '%s' is not produced by any node", name);
        g->outputs[g->n_outputs++] = id;
        if (g->values[id].output_index < 0) g->values[id].output_index = (int)i;
    }
    return CUVIL_OK;
}

static cuvil_status check_dims_used(loader *L) {
    for (int i = 0; i < L->o->n_dims; i++) {
        bool found = false;
        for (int j = 0; j < L->g->n_syms; j++) found |= !strcmp(L->g->syms[j].name, L->o->dims[i].name);
        if (!found) {
            cuvil_sb names = {0};
            for (int j = 0; j < L->g->n_syms; j++) cuvil_sb_printf(&names, "%s%s", j ? ", " : "", L->g->syms[j].name);
            cuvil_status s = cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG,
                                       "--dim %s: the model has no symbolic dim named '%s' (its symbolic dims: %s)",
                                       L->o->dims[i].name, L->o->dims[i].name, names.s ? names.s : "none");
            cuvil_sb_free(&names);
            return s;
        }
        if (L->o->dims[i].value <= 0)
            return cuvil_err(L->ctx, CUVIL_ERR_INVALID_ARG, "--dim %s=%lld: must be positive",
                             L->o->dims[i].name, (long long)L->o->dims[i].value);
    }
    return CUVIL_OK;
}

cuvil_status cuvil_onnx_load(cuvil_ctx *ctx, const char *path, const cuvil_options *o, cir_graph **out) {
    *out = NULL;
    uint8_t *buf;
    size_t size;
    cuvil_status s = cuvil_read_file(ctx, path, &buf, &size);
    if (s) return s;
    loader L = {.ctx = ctx, .o = o};
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    snprintf(L.model_dir, sizeof L.model_dir, "%s", dirname(tmp));
    L.m = onnx__model_proto__unpack(NULL, size, buf);
    if (!L.m) {
        free(buf);
        return cuvil_err(ctx, CUVIL_ERR_MODEL,
                         "%s: not a valid ONNX model (protobuf decoding failed: the file is truncated or not ONNX)",
                         path);
    }
    if (!L.m->graph || !L.m->has_ir_version || L.m->ir_version <= 0) {
        s = cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: not an ONNX model (%s)", path,
                      !L.m->graph ? "no graph" : "no ir_version");
        goto done;
    }
    L.g = cir_graph_new(ctx);
    if (!L.g) {
        s = CUVIL_ERR_NOMEM;
        goto done;
    }
    L.g->opset = opset_of(L.m, "");
    if (L.g->opset < 0) {
        s = cuvil_err(ctx, CUVIL_ERR_MODEL, "%s: the model imports no opset for the default ONNX domain", path);
        goto done;
    }
    cuvil_sha256_hex(buf, size, L.g->model_sha256);
    L.g->model_path = cuvil_arena_strdup(&L.g->arena, path);
    if (L.m->graph->name && *L.m->graph->name) L.g->name = cuvil_arena_strdup(&L.g->arena, L.m->graph->name);
    if ((s = load_initializers(&L, L.m->graph)) || (s = load_inputs(&L, L.m->graph)) ||
        (s = load_nodes(&L, L.m->graph)) || (s = load_outputs(&L, L.m->graph)) || (s = check_dims_used(&L)))
        goto done;
    s = cir_verify(L.g, false, NULL);
done:
    if (s) {
        if (s != CUVIL_ERR_NOMEM && strncmp(ctx->errmsg, path, strlen(path)) != 0)
            cuvil_err_prefix(ctx, "%s: ", path);
        cir_graph_free(L.g);
        L.g = NULL;
    }
    cuvil_map_free(&L.names);
    onnx__model_proto__free_unpacked(L.m, NULL);
    free(buf);
    *out = L.g;
    return s;
}
