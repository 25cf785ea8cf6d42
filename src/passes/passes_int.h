/* passes_int.h -- the pass interface: CIR -> CIR, one pass per file, pipeline in passes.inc. */
#ifndef CUVIL_PASSES_INT_H
#define CUVIL_PASSES_INT_H

#include "ir/ops/ops.h"
#include "ir/cir.h"

typedef struct cuvil_pass {
    const char *name;
    int opt_level;        /* runs when the options' opt_level >= this */
    bool required;
    cuvil_status (*run)(cir_graph *g, const cuvil_options *o);
} cuvil_pass;

#define PASS(name, lvl, req) cuvil_status cuvil_pass_##name(cir_graph *g, const cuvil_options *o);
#include "passes/passes.inc"
#undef PASS

/* Runs the pipeline with verification between passes and the dumps o asks for. */
cuvil_status cuvil_run_passes(cir_graph *g, const cuvil_options *o);

/* Folds node n (all inputs constant, def->fold set): computes outputs, marks n dead. */
cuvil_status cuvil_fold_node(cir_graph *g, cir_node *n);
/* Folding runs the scalar reference kernels at compile time. Its work (an estimate in units of
 * about a nanosecond, cuvil_fold_work) is bounded for the whole compile by limits.fold_ops, so
 * that no model makes the compiler compute for hours; a node with a kernel that would go over
 * the budget is left to run in the compiled model (cuvil_fold_wanted), one without is an error
 * (cuvil_fold_node). */
double cuvil_fold_work(cir_graph *g, const cir_node *n);
/* Whether n (all inputs constant, def->fold set) should be folded now: within what is left of
 * the work budget and of folded_bytes, or an op that can only be folded (then cuvil_fold_node
 * reports one that is too costly). */
bool cuvil_fold_wanted(cir_graph *g, const cir_node *n);
/* "<fused>+<src_op>" (or src_op alone), in g's arena: a node's note of the ops fused into it.
 * NULL when out of memory (message on ctx). */
const char *cuvil_fused_note(cir_graph *g, const char *fused, const char *src_op);
/* Per value id, the one live node that reads it, or -1 (no reader, several, or a graph output);
 * counts uses first. cuvil_free() it. NULL when out of memory (message on ctx). */
int *cuvil_single_readers(cir_graph *g);
/* True when every present input of n is constant. */
bool cuvil_inputs_const(cir_graph *g, const cir_node *n);

#endif
