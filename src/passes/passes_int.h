/* passes_int.h -- the pass interface: CIR -> CIR, one pass per file, pipeline in passes.inc. */
#ifndef CUVIL_PASSES_INT_H
#define CUVIL_PASSES_INT_H

#include "frontend/onnx/ops/ops_int.h"
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
/* Folding runs the scalar reference kernels at compile time: its work is bounded, so that no
 * model makes the compiler compute for hours (a constant image convolved with a huge kernel).
 * Over the budget (multiply-adds, or output elements for other ops) a node that has a kernel
 * stays in the graph and runs in the compiled model instead. */
#define CUVIL_FOLD_MAX_WORK ((int64_t)1 << 30)
bool cuvil_fold_affordable(cir_graph *g, const cir_node *n);
/* True when every present input of n is constant. */
bool cuvil_inputs_const(cir_graph *g, const cir_node *n);

#endif
