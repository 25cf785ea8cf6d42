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
/* The Mul that alone reads t (float32, read once, not a graph output), in region, with x (the
 * very value, either side) as its other input and x's dims as its output's: where an
 * activation written as x * f(x) ends (fuse_silu, fuse_mish). NULL if there is none. */
cir_node *cuvil_mul_by_input(cir_graph *g, const int *user, const cir_value *t, const cir_value *x, int region);
/* Node n, which a matched pattern ends at, becomes the unary op kind on value x, without
 * attributes (the caller sets any); fused: the comment's note. Uses are recounted by the caller. */
void cuvil_node_become_unary(cir_graph *g, cir_node *n, cir_op_kind kind, int x, const char *fused);
/* Regions (an If's branches, a loop's body: cir_node.region after shape inference, the live
 * one) bound what a pass may join. A fusion or a pattern that replaces several nodes by one
 * takes nodes of one region only: a node of a branch runs when the condition picks it and one
 * of a body once per iteration, so joining it with a node around it would run its work when it
 * should not, or once instead of every iteration. CSE keeps a node for an identical later one
 * only where the kept one's region holds the other's (cir_region_within): a value of the other
 * branch, or of a body, is not there. A rewrite that makes a node read its producer's inputs
 * instead (collapse_chains, drop_identities) is safe anywhere: those are seen wherever the
 * producer's output is. cir_verify checks that every value is read only where its writer's
 * region holds the reader's. */
/* The only live node reading v (NULL: none, several, or v is a graph output); needs the uses
 * counted (cir_graph_count_uses). */
cir_node *cuvil_sole_reader(cir_graph *g, const cir_value *v);
/* Whether --disable-pass names pass `name`. */
bool cuvil_pass_disabled(const cuvil_options *o, const char *name);
/* True when every present input of n is constant. */
bool cuvil_inputs_const(cir_graph *g, const cir_node *n);

/* ===== Replacing values (the simplifying passes: cse, drop_identities, collapse_chains) =====
 * A pass walks the nodes in order and replaces a node's output by a value that holds the same
 * data (same dtype and dims): rep maps each replaced value to its stand-in, and a node's inputs
 * are looked up through it (cuvil_rewrite_inputs) before the node is examined; the end rewrites
 * every live node. A graph output keeps its name and its value: the node that makes the stand-in
 * writes the output instead, or, where it cannot (the stand-in is an input, a constant or
 * another output), the removed node becomes an identity that copies the stand-in into it. */
typedef struct cuvil_rewrite {
    cir_graph *g;
    int *rep;            /* per value id: the value that stands for it (itself when none) */
    int n_values;        /* the values when the pass began (later ones stand for themselves) */
    int n_changed;       /* nodes removed or merged */
} cuvil_rewrite;

/* Sets up rw for g. CUVIL_OK, or CUVIL_ERR_NOMEM with a message on the context. */
cuvil_status cuvil_rewrite_begin(cir_graph *g, cuvil_rewrite *rw);
/* The value that stands for value id v now (v itself when it was not replaced; -1 for -1). */
int cuvil_rewrite_resolve(cuvil_rewrite *rw, int v);
/* Replaces n's inputs (and its residual) by their stand-ins. */
void cuvil_rewrite_inputs(cuvil_rewrite *rw, cir_node *n);
/* Whether node n's outputs can all be replaced by those of node keep (same count): false when
 * one of n's is a graph output that keep's cannot take over and n has several outputs. */
bool cuvil_rewrite_can_merge(cuvil_rewrite *rw, const cir_node *n, const cir_node *keep);
/* Replaces the one output of live node n by value `to` (same dtype and dims, defined before n)
 * and removes n, or turns it into identity(to) where its output is a graph output that `to`'s
 * maker cannot write. Returns false, changing nothing, when n is already that identity. */
bool cuvil_rewrite_replace(cuvil_rewrite *rw, cir_node *n, int to);
/* Replaces every output of n by the same output of keep (cuvil_rewrite_can_merge holds), and
 * removes n. */
void cuvil_rewrite_merge(cuvil_rewrite *rw, cir_node *n, const cir_node *keep);
/* Rewrites every live node's inputs, removes the nodes no one reads now (dce) and releases rw. */
void cuvil_rewrite_end(cuvil_rewrite *rw);

#endif
