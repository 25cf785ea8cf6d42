/* emit_shape.c -- the SHAPE_DATA ops (op_shape.c, op_fold_only.c): shape, size, range and
 * constant_of_shape. Their nodes fold whenever their inputs are known; with symbolic dims a
 * Range or ConstantOfShape whose size depends on a symbol runs when the model runs, its count
 * an expression of the run's dims (a Shape's value is written from its expressions instead,
 * codegen.c's sval_fill). */
#include "codegen/emit/emit_int.h"

/* Shape and Size: the value computed at compile time, written element by element. */
cuvil_status cg_emit_shape(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    if (y->dtype != CIR_I64 || !y->data)
        return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "its value '%s' was not computed at compile time", y->name);
    const char *out = cg_out(cg, n->out[0]);
    char buf[32];
    for (int64_t i = 0; i < cir_numel(y); i++)
        cg_printf(cg, "    %s[%lld] = %s;\n", out, (long long)i, cg_i64(((const int64_t *)y->data)[i], buf));
    return CUVIL_OK;
}

/* Range: start + i * delta for the count found at compile time (limit is not read). */
cuvil_status cg_emit_range(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    char hi[32];
    int slot = cg_found_slot(cg, g, n, 0, hi);
    if (slot >= 0) {   /* the count, found when the model runs */
        cg_found_call(cg, slot, "its delta is 0, or its count is not a number or over the size planned for it",
                      "cuvil_range_count_t(%s, %s, %s, %s, %s)", cg_rt_type(y->dtype), cg_in(cg, n->in[0]),
                      cg_in(cg, n->in[1]), cg_in(cg, n->in[2]), hi);
        cg_printf(cg, "    cuvil_range_t(%s, %s, %s, %s, D[%d]);\n", cg_rt_type(y->dtype), cg_in(cg, n->in[0]),
                  cg_in(cg, n->in[2]), cg_out(cg, n->out[0]), slot);
        return CUVIL_OK;
    }
    cg_printf(cg, "    cuvil_range_t(%s, %s, %s, %s, %s);\n", cg_rt_type(y->dtype), cg_in(cg, n->in[0]), cg_in(cg, n->in[2]),
              cg_out(cg, n->out[0]), cg_numel(cg, y->id));
    return CUVIL_OK;
}

/* ConstantOfShape: the value input repeated, or float32 zeros without one. */
cuvil_status cg_emit_constant_of_shape(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *y = cir_out(g, n, 0);
    if (!cir_in(g, n, 1))
        cg_printf(cg, "    memset(%s, 0, %s);\n", cg_out(cg, n->out[0]), cg_nbytes(cg, y->id));
    else
        cg_printf(cg, "    cuvil_fill(%s, %zu, %s, %s);\n", cg_in(cg, n->in[1]), cir_dtype_size(y->dtype),
                  cg_out(cg, n->out[0]), cg_numel(cg, y->id));
    return CUVIL_OK;
}

int cg_found_slot(cg_ctx *cg, const cir_graph *g, const cir_node *n, int k, char hi[32]) {
    for (int r = n->rt_first; r < n->rt_first + n->n_rt; r++)
        if (g->rt_key[r] == -1 - k) {
            if (hi) cg_i64(g->rt_hi[r], hi);
            return cg_rt_slot(cg, g->rt_syms[r]);
        }
    return -1;
}

const char *cg_found_his(cg_ctx *cg, cir_graph *g, const cir_node *n, int cnt, int *slots) {
    cuvil_sb sb = {0};
    char hi[32];
    cuvil_sb_puts(&sb, "{ ");
    for (int k = 0; k < cnt; k++) {
        slots[k] = cg_found_slot(cg, g, n, k, hi);
        cuvil_sb_printf(&sb, "%s%s", k ? ", " : "", slots[k] >= 0 ? hi : "0");
    }
    cuvil_sb_puts(&sb, cnt ? " }" : "0 }");
    const char *r = cg_str(cg, sb.s ? sb.s : "{ 0 }");
    cuvil_sb_free(&sb);
    return r;
}

void cg_emit_found_dims(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *sv = cir_in(g, n, 1), *y = cir_out(g, n, 0);
    int slots[CIR_MAX_DIMS];
    const char *hi = cg_found_his(cg, g, n, y->ndim, slots);
    cg_printf(cg, "    {\n        static const int64_t hi[] = %s;\n        const int64_t xd[] = %s;\n        int64_t o[%d];\n",
              y->ndim ? hi : "{ 0 }", cg_dims_init(cg, x->id, x->ndim > 0 ? x->ndim : 1), y->ndim > 0 ? y->ndim : 1);
    const char *t = sv->dtype == CIR_I32 ? "CUVIL_T_I32" : "CUVIL_T_I64";
    if (n->kind == CIR_OP_RESHAPE)
        cg_printf(cg, "        if (cuvil_reshape_dims(%s, %s, %d, xd, %d, %d, hi, o)) return 1;\n", t, cg_in(cg, sv->id), y->ndim,
                  x->ndim, cir_attr_int(n, "allowzero") != 0);
    else
        cg_printf(cg, "        if (cuvil_squeeze_dims(%d, %s, %s, %lld, xd, %d, hi, o)) return 1;\n",
                  n->kind == CIR_OP_UNSQUEEZE, t, cg_in(cg, sv->id), (long long)cir_numel(sv), x->ndim);
    for (int d = 0; d < y->ndim; d++) cg_printf(cg, "        D[%d] = o[%d];\n", slots[d], d);
    cg_printf(cg, "    }\n");
    cg_fallible(cg, n->kind == CIR_OP_RESHAPE ? "its shape does not fit the input by Reshape's rules, or gives a dim over the "
                                                "size planned for it"
                                              : "its axes are out of range or repeated, or squeeze a dim that is not 1");
}

/* ===== if (op_if.c) ========================================================================== */
/* The copies of branch b (0 then, 1 else) into the outputs, with the dims the run finds. */
static void if_copies(cg_ctx *cg, cir_graph *g, cir_node *n, int b, const char *ind) {
    int k = n->n_out;
    for (int i = 0; i < k; i++) {
        int src = n->in[1 + b * k + i];
        if (src < 0 || n->out[i] < 0) continue;
        cir_value *v = cir_val(g, src);
        if (v->seq_n >= 0) {   /* a sequence: into the output's slots */
            cg_printf(cg, "%s    if (cuvil_seq_copy(&%s, %s, &%s, %s)) return 1;\n", ind, cg_seq_params(cg, v), cg_in(cg, src),
                      cg_seq_params(cg, cir_val(g, n->out[i])), cg_out(cg, n->out[i]));
            cg_fallible(cg, "the branch it takes gives a sequence larger than its output's room");
            continue;
        }
        for (int d = 0; d < v->ndim; d++) {
            char hi[32];
            int slot = cg_found_slot(cg, g, n, i * CIR_MAX_DIMS + d, hi);
            if (slot < 0) continue;   /* a dim both branches give alike */
            cg_printf(cg, "%s    D[%d] = %s;   /* the branch's size */\n%s    if (D[%d] > %s) return 1;\n", ind, slot,
                      cg_dim_c(cg, cir_dimx(g, v, d)), ind, slot, hi);
            cg_fallible(cg, "the branch it takes gives an output larger than its declared or --dim size");
        }
        cg_printf(cg, "%s    memmove(%s, %s, %s);\n", ind, cg_out(cg, n->out[i]), cg_in(cg, src), cg_nbytes(cg, src));
    }
}

cuvil_status cg_emit_if(cg_ctx *cg, cir_graph *g, cir_node *n) {
    cir_value *c = cir_in(g, n, 0);
    if (cir_is_const(c)) {   /* the branch it takes ran unconditionally */
        const int pick = ((const uint8_t *)c->data)[0] ? 0 : 1;
        if (n->fail_branch == pick + 1)   /* (a condition folded after shape inference left that branch out) */
            return cuvil_err(g->ctx, CUVIL_ERR_SHAPE, "If '%s': the branch its condition takes cannot run at these sizes: %s",
                             n->name, n->fail_msg);
        if_copies(cg, g, n, pick, "");
        return CUVIL_OK;
    }
    cg_printf(cg, "    if (*(const uint8_t *)%s) {\n", cg_in(cg, n->in[0]));
    if (n->fail_branch == 1) cg_printf(cg, "        return 1;   /* (this branch cannot run at these sizes) */\n");
    else if_copies(cg, g, n, 0, "    ");
    cg_printf(cg, "    } else {\n");
    if (n->fail_branch == 2) cg_printf(cg, "        return 1;   /* (this branch cannot run at these sizes) */\n");
    else if_copies(cg, g, n, 1, "    ");
    cg_printf(cg, "    }\n");
    if (n->fail_branch) {
        cuvil_sb b = {0};
        cuvil_sb_printf(&b, "its %s branch cannot run at the sizes compiled for: %.400s", n->fail_branch == 1 ? "then" : "else",
                        n->fail_msg);
        char *what = b.s ? cuvil_arena_strdup(&g->arena, b.s) : NULL;
        cuvil_sb_free(&b);
        if (!what) return cuvil_err(g->ctx, CUVIL_ERR_NOMEM, "out of memory");
        cg_fallible(cg, what);
    }
    return CUVIL_OK;
}
