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
