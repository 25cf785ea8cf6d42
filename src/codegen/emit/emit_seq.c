/* emit_seq.c -- the sequence ops (op_seq.c) on the runtime's sequence blocks
 * (runtime/kernels/data/sequence.c): each node copies into its output's block; positions and
 * run-time split lengths are checked by the kernel, and a dim of SequenceAt's or
 * ConcatFromSequence's output that the elements do not share is a size the run finds. */
#include "codegen/emit/emit_int.h"

const char *cg_seq_params(cg_ctx *cg, const cir_value *v) {
    return cg_param(cg, "cuvil_seq_params", "{ .cap = %d, .rank = %d, .hdr = %zu, .slot = %zu, .esize = %zu }", v->seq_n,
                    v->ndim > 0 ? v->ndim : 0, cir_seq_hdr_bytes(v), cir_seq_slot_bytes(v), cir_dtype_size(v->dtype));
}

/* A tensor's dims as an initialiser (a scalar's: one unused 1). */
static const char *dims_of(cg_ctx *cg, const cir_value *x) { return cg_dims_init(cg, x->id, x->ndim > 0 ? x->ndim : 1); }

/* The room planned for y: its dims' upper bounds (a size the run finds: its declared or --dim
 * size where smaller than the elements'), as a static array. */
static const char *out_cap(cg_ctx *cg, const cir_value *y) {
    return cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, y->dims, y->ndim > 0 ? y->ndim : 1));
}

/* pos_t and pos of the optional position input i */
static void pos_args(cg_ctx *cg, cir_graph *g, cir_node *n, int i, const char **t, const char **p) {
    cir_value *v = cir_in(g, n, i);
    *t = v ? cg_rt_type(v->dtype) : "0";
    *p = v ? cg_in(cg, v->id) : "NULL";
}

/* D[] for the output's dims the run finds (op_found_dim keys: the dim, or 0 for concat's) */
static void found_dims(cg_ctx *cg, cir_graph *g, cir_node *n, int rank, int only) {
    for (int d = 0; d < rank; d++) {
        if (only >= 0 && d != only) continue;
        int slot = cg_found_slot(cg, g, n, only >= 0 ? 0 : d, NULL);
        if (slot >= 0) cg_printf(cg, "    D[%d] = yd[%d];\n", slot, d);
    }
}

/* y = element `position` (input 1) of sequence input 0 (SequenceAt, SequenceMap's argument);
 * the node fails with `what`. */
static void seq_at_call(cg_ctx *cg, cir_graph *g, cir_node *n, const char *what) {
    cir_value *S = cir_in(g, n, 0), *y = cir_out(g, n, 0);
    const char *pt, *pp;
    pos_args(cg, g, n, 1, &pt, &pp);
    cg_printf(cg, "    int64_t yd[%d];\n    if (cuvil_seq_at(&%s, %s, %s, %s, %s, yd, %s)) return 1;\n", y->ndim > 0 ? y->ndim : 1,
              cg_seq_params(cg, S), cg_in(cg, S->id), pt, pp, cg_out(cg, y->id), out_cap(cg, y));
    cg_fallible(cg, what);
    found_dims(cg, g, n, y->ndim, -1);
}

cuvil_status cg_emit_seq(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    const char *pt, *pp;
    switch (n->kind) {
    case CIR_OP_SEQ_EMPTY:
        cg_printf(cg, "    ((int64_t *)%s)[0] = 0;\n", cg_out(cg, y->id));
        return CUVIL_OK;
    case CIR_OP_SEQ_CONSTRUCT: {
        const char *p = cg_seq_params(cg, y);
        for (int i = 0; i < n->n_in; i++) {
            cir_value *x = cir_in(g, n, i);
            cg_printf(cg, "    {\n        const int64_t d[] = %s;\n        cuvil_seq_put(&%s, %s, %d, %d, %s, d);\n    }\n",
                      dims_of(cg, x), p, cg_out(cg, y->id), n->n_in, i, cg_in(cg, x->id));
        }
        return CUVIL_OK;
    }
    case CIR_OP_SEQ_INSERT: {
        cir_value *S = cir_in(g, n, 0), *x = cir_in(g, n, 1);
        pos_args(cg, g, n, 2, &pt, &pp);
        cg_printf(cg, "    {\n        const int64_t d[] = %s;\n        if (cuvil_seq_insert(&%s, %s, &%s, %s, %s, d, %s, %s)) return 1;\n"
                      "    }\n", dims_of(cg, x), cg_seq_params(cg, S), cg_in(cg, S->id), cg_seq_params(cg, y), cg_out(cg, y->id),
                  cg_in(cg, x->id), pt, pp);
        cg_fallible(cg, "its position is outside -n..n (n: the sequence's length)");
        return CUVIL_OK;
    }
    case CIR_OP_SEQ_ERASE: {
        cir_value *S = cir_in(g, n, 0);
        pos_args(cg, g, n, 1, &pt, &pp);
        cg_printf(cg, "    if (cuvil_seq_erase(&%s, %s, &%s, %s, %s, %s)) return 1;\n", cg_seq_params(cg, S), cg_in(cg, S->id),
                  cg_seq_params(cg, y), cg_out(cg, y->id), pt, pp);
        cg_fallible(cg, "its position is outside -n..n-1 (n: the sequence's length)");
        return CUVIL_OK;
    }
    case CIR_OP_SEQ_MAP_ARG:
        if (cir_in(g, n, 0)->seq_n < 0) {   /* a tensor: itself in every iteration */
            cg_printf(cg, "    memcpy(%s, %s, %s);\n", cg_out(cg, y->id), cg_in(cg, n->in[0]), cg_nbytes(cg, y->id));
            return CUVIL_OK;
        }
        cg_printf(cg, "    if (*(const int64_t *)%s != *(const int64_t *)%s) return 1;\n", cg_in(cg, n->in[0]),
                  cg_in(cg, n->in[2]));   /* (then the element at the iteration's number, as SequenceAt) */
        seq_at_call(cg, g, n, "its sequences differ in length (SequenceMap takes sequences of one length), or an element "
                              "is larger than the room planned for it");
        return CUVIL_OK;
    case CIR_OP_SEQ_AT:
        seq_at_call(cg, g, n, "its position is outside -n..n-1 (n: the sequence's length), or the element is larger than "
                              "the output's declared or --dim size");
        return CUVIL_OK;
    case CIR_OP_SEQ_JOIN: {
        cir_value *A = cir_in(g, n, 0), *B = cir_in(g, n, 1);
        cg_printf(cg, "    if (cuvil_seq_join(&%s, %s, &%s, %s, &%s, %s)) return 1;\n", cg_seq_params(cg, A), cg_in(cg, A->id),
                  cg_seq_params(cg, B), cg_in(cg, B->id), cg_seq_params(cg, y), cg_out(cg, y->id));
        cg_fallible(cg, "its sequences hold more than planned");
        return CUVIL_OK;
    }
    case CIR_OP_OPT_ELEM: {   /* (the value is read only when present: an absent graph input is NULL) */
        cir_value *x = cir_in(g, n, 0);
        bool must = cir_attr_int(n, "must") != 0;
        cg_printf(cg, "    if (*(const uint8_t *)%s) memcpy(%s, %s, %s);\n", cg_in(cg, n->in[1]), cg_out(cg, y->id),
                  cg_in(cg, x->id), cg_nbytes(cg, y->id));
        if (must) {
            cg_printf(cg, "    else return 1;\n");
            cg_fallible(cg, "the optional holds no value");
        } else if (y->seq_n >= 0) {
            cg_printf(cg, "    else *(int64_t *)%s = 0;   /* (an empty sequence, never read) */\n", cg_out(cg, y->id));
        }
        int slot = y->optional && y->output_index >= 0 ? cg_present_slot(cg, y->output_index) : -1;
        if (slot >= 0) cg_printf(cg, "    D[%d] = *(const uint8_t *)%s;   /* the output holds one */\n", slot, cg_in(cg, n->in[1]));
        return CUVIL_OK;
    }
    case CIR_OP_PRESENT:
        cg_printf(cg, "    *(uint8_t *)%s = %s != NULL;\n", cg_out(cg, y->id), cg_in(cg, n->in[0]));
        return CUVIL_OK;
    case CIR_OP_SEQ_LENGTH:   /* (where an expression gives it, codegen writes that instead) */
        cg_printf(cg, "    *(int64_t *)%s = *(const int64_t *)%s;\n", cg_out(cg, y->id), cg_in(cg, n->in[0]));
        return CUVIL_OK;
    case CIR_OP_SPLIT_TO_SEQ: {
        int axis, keep;
        int64_t count, lens[CIR_SEQ_MAX];
        cuvil_status s = op_split_to_seq_layout(g, n, &axis, &count, lens, &keep);
        if (s) return s;
        cir_value *x = cir_in(g, n, 0), *sp = cir_in(g, n, 1);
        bool rt = count && lens[0] < 0;   /* the lengths read from split when the model runs */
        const char *L = rt || !count ? "NULL" : cg_param(cg, "int64_t[]", "%s", cg_i64s(cg, lens, (int)count));
        cg_printf(cg, "    {\n        const int64_t xd[] = %s;\n        if (cuvil_seq_split(&%s, %s, %s, xd, %d, %d, %lld, %s, %s, %s, %d)) "
                      "return 1;\n    }\n", dims_of(cg, x), cg_seq_params(cg, y), cg_out(cg, y->id), cg_in(cg, x->id), x->ndim, axis,
                  (long long)count, L, rt ? cg_rt_type(sp->dtype) : "0", rt ? cg_in(cg, sp->id) : "NULL", !keep);
        cg_fallible(cg, "its split lengths are negative or do not sum to the axis's length");
        return CUVIL_OK;
    }
    case CIR_OP_CONCAT_FROM_SEQ: {
        int axis;
        cuvil_status s = op_concat_from_seq_axis(g, n, &axis);
        if (s) return s;
        cir_value *S = cir_in(g, n, 0);
        cg_printf(cg, "    int64_t yd[%d];\n    if (cuvil_seq_concat(&%s, %s, %d, %d, %s, yd, %s)) return 1;\n",
                  y->ndim > 0 ? y->ndim : 1, cg_seq_params(cg, S), cg_in(cg, S->id), axis, cir_attr_int(n, "new_axis") != 0,
                  cg_out(cg, y->id), out_cap(cg, y));
        cg_fallible(cg, "its sequence is empty, or its elements differ in a dim other than the axis, or they join to more "
                        "than the output's declared or --dim size");
        found_dims(cg, g, n, y->ndim, axis);
        return CUVIL_OK;
    }
    default: return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "not a sequence op");
    }
}
