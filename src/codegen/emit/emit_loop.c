/* emit_loop.c -- loop_begin and loop (op_loop.c). codegen.c writes the loop itself around the
 * body's nodes (open_loop, close_loop); these are what runs once before it and once after. */
#include "codegen/emit/emit_int.h"

/* Before the loop: the condition and the initial states into the body's parameters. */
cuvil_status cg_emit_loop_begin(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_loop l;
    if (!op_loop_at(n, &l)) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "a loop_begin that does not match its counts");
    if (!l.scan && n->out[1] >= 0) {
        if (n->in[1] >= 0) cg_printf(cg, "    *%s = *%s;\n", cg_out(cg, n->out[1]), cg_in(cg, n->in[1]));
        else cg_printf(cg, "    *%s = 1;   /* no initial condition: true */\n", cg_out(cg, n->out[1]));
    }
    for (int i = 0; i < l.n; i++)
        if (n->out[2 + i] >= 0)
            cg_printf(cg, "    memmove(%s, %s, %s);\n", cg_out(cg, n->out[2 + i]), cg_in(cg, n->in[2 + i]),
                      cg_nbytes(cg, n->out[2 + i]));
    return CUVIL_OK;
}

/* After it: the states the last iteration left, as the final ones (the scan outputs were
 * written as it went). */
cuvil_status cg_emit_loop(cg_ctx *cg, cir_graph *g, cir_node *n) {
    op_loop l;
    if (!op_loop_at(n, &l)) return cir_node_err(g, n, CUVIL_ERR_INTERNAL, "a loop that does not match its counts");
    for (int i = 0; i < l.n; i++)
        if (n->out[i] >= 0)
            cg_printf(cg, "    memmove(%s, %s, %s);\n", cg_out(cg, n->out[i]), cg_in(cg, n->in[l.p + 2 + i]),
                      cg_nbytes(cg, n->out[i]));
    return CUVIL_OK;
}
