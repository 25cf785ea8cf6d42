/* print.c -- CIR as text (cuvil-compile --emit ir) and as a Graphviz digraph (--emit dot). */
#include "ir/cir.h"

#include <string.h>

static void print_attr(cuvil_sb *o, const cir_attr *a) {
    cuvil_sb_printf(o, "%s=", a->name);
    switch (a->type) {
    case CIR_ATTR_FLOAT: cuvil_sb_printf(o, "%g", a->f); break;
    case CIR_ATTR_INT: cuvil_sb_printf(o, "%lld", (long long)a->i); break;
    case CIR_ATTR_STRING: cuvil_sb_puts(o, "\""); cuvil_sb_c_escape(o, a->s); cuvil_sb_puts(o, "\""); break;
    case CIR_ATTR_INTS:
        cuvil_sb_puts(o, "[");
        for (int i = 0; i < a->n; i++) cuvil_sb_printf(o, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        cuvil_sb_puts(o, "]");
        break;
    case CIR_ATTR_FLOATS:
        cuvil_sb_puts(o, "[");
        for (int i = 0; i < a->n; i++) cuvil_sb_printf(o, "%s%g", i ? "," : "", a->floats[i]);
        cuvil_sb_puts(o, "]");
        break;
    case CIR_ATTR_TENSOR: cuvil_sb_printf(o, "%%%d", a->tensor); break;
    default: cuvil_sb_puts(o, "..."); break;
    }
}

static void value_ref(cuvil_sb *o, int id) {
    if (id < 0) cuvil_sb_puts(o, "_");
    else cuvil_sb_printf(o, "%%%d", id);
}

void cir_print_text(cir_graph *g, cuvil_sb *o) {
    char sh[256];
    cuvil_sb_printf(o, "graph \"");
    cuvil_sb_c_escape(o, g->name);
    cuvil_sb_printf(o, "\" opset=%d\n", g->opset);
    for (int i = 0; i < g->n_inputs; i++) {
        cir_value *v = &g->values[g->inputs[i]];
        cuvil_sb_printf(o, "  input  %%%d \"", v->id);
        cuvil_sb_c_escape(o, v->name);
        cuvil_sb_printf(o, "\" : %s\n", cir_shape_str(g, v, sh, sizeof sh));
    }
    cir_graph_count_uses(g);
    for (int i = 0; i < g->n_values; i++) {
        cir_value *v = &g->values[i];
        if (v->kind != CIR_VAL_CONST || v->n_uses == 0) continue;
        cuvil_sb_printf(o, "  const  %%%d \"", v->id);
        cuvil_sb_c_escape(o, v->name);
        cuvil_sb_printf(o, "\" : %s", cir_shape_str(g, v, sh, sizeof sh));
        if (cir_numel(v) <= 8 && v->data) {
            cuvil_sb_puts(o, " = {");
            for (int64_t j = 0; j < cir_numel(v); j++)
                cuvil_sb_printf(o, "%s%g", j ? "," : "", cir_const_f64(v, j));
            cuvil_sb_puts(o, "}");
        }
        cuvil_sb_puts(o, "\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead) continue;
        cuvil_sb_puts(o, "  ");
        for (int j = 0; j < n->n_out; j++) {
            if (j) cuvil_sb_puts(o, ", ");
            value_ref(o, n->out[j]);
        }
        cuvil_sb_printf(o, " = %s%s%s \"", *n->domain ? n->domain : "", *n->domain ? "." : "", n->op);
        cuvil_sb_c_escape(o, n->name);
        cuvil_sb_puts(o, "\" (");
        for (int j = 0; j < n->n_in; j++) {
            if (j) cuvil_sb_puts(o, ", ");
            value_ref(o, n->in[j]);
        }
        cuvil_sb_puts(o, ")");
        if (n->n_attrs || n->act.act || n->residual >= 0) {
            cuvil_sb_puts(o, " {");
            for (int j = 0; j < n->n_attrs; j++) {
                if (j) cuvil_sb_puts(o, ", ");
                print_attr(o, &n->attrs[j]);
            }
            if (n->residual >= 0) cuvil_sb_printf(o, "%sresidual=%%%d", n->n_attrs ? ", " : "", n->residual);
            if (n->act.act)
                cuvil_sb_printf(o, "%sact=%d(%g,%g)", n->n_attrs || n->residual >= 0 ? ", " : "",
                                n->act.act, n->act.alpha, n->act.beta);
            cuvil_sb_puts(o, "}");
        }
        cuvil_sb_puts(o, " :");
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0)
                cuvil_sb_printf(o, " %s", cir_shape_str(g, &g->values[n->out[j]], sh, sizeof sh));
        if (n->fused) cuvil_sb_printf(o, "  # fused %s", n->fused);
        cuvil_sb_puts(o, "\n");
    }
    for (int i = 0; i < g->n_outputs; i++) {
        cir_value *v = &g->values[g->outputs[i]];
        cuvil_sb_printf(o, "  output %%%d \"", v->id);
        cuvil_sb_c_escape(o, v->name);
        cuvil_sb_printf(o, "\" : %s\n", cir_shape_str(g, v, sh, sizeof sh));
    }
}

/* DOT labels are HTML-unsafe-free plain strings: escape quotes and backslashes. */
static void dot_str(cuvil_sb *o, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') cuvil_sb_printf(o, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) cuvil_sb_puts(o, " ");
        else cuvil_sb_append(o, s, 1);
    }
}

void cir_print_dot(cir_graph *g, cuvil_sb *o) {
    char sh[256];
    cir_graph_count_uses(g);
    cuvil_sb_puts(o, "digraph cir {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    for (int i = 0; i < g->n_inputs; i++) {
        cir_value *v = &g->values[g->inputs[i]];
        cuvil_sb_printf(o, "  v%d [shape=ellipse, label=\"", v->id);
        dot_str(o, v->name);
        cuvil_sb_printf(o, "\\n%s\"];\n", cir_shape_str(g, v, sh, sizeof sh));
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead) continue;
        cuvil_sb_printf(o, "  n%d [shape=box, style=rounded, label=\"", i);
        dot_str(o, n->op);
        if (n->fused) {
            cuvil_sb_puts(o, "+");
            dot_str(o, n->fused);
        }
        cuvil_sb_puts(o, "\\n");
        dot_str(o, n->name);
        cuvil_sb_puts(o, "\"];\n");
    }
    for (int i = 0; i < g->n_outputs; i++) {
        cir_value *v = &g->values[g->outputs[i]];
        cuvil_sb_printf(o, "  out%d [shape=ellipse, label=\"", i);
        dot_str(o, v->name);
        cuvil_sb_printf(o, "\\n%s\"];\n", cir_shape_str(g, v, sh, sizeof sh));
    }
    for (int i = 0; i < g->n_nodes; i++) {
        cir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in + 1; j++) {
            int id = j < n->n_in ? n->in[j] : n->residual;
            if (id < 0) continue;
            cir_value *v = &g->values[id];
            if (v->kind == CIR_VAL_CONST) continue;
            if (v->kind == CIR_VAL_INPUT) cuvil_sb_printf(o, "  v%d -> n%d", id, i);
            else if (v->producer >= 0) cuvil_sb_printf(o, "  n%d -> n%d", v->producer, i);
            else continue;
            cuvil_sb_printf(o, " [label=\"%s\"];\n", cir_shape_str(g, v, sh, sizeof sh));
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        cir_value *v = &g->values[g->outputs[i]];
        if (v->producer >= 0) cuvil_sb_printf(o, "  n%d -> out%d;\n", v->producer, i);
        else if (v->kind == CIR_VAL_INPUT) cuvil_sb_printf(o, "  v%d -> out%d;\n", v->id, i);
    }
    cuvil_sb_puts(o, "}\n");
}
