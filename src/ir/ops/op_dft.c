/* op_dft.c -- dft (x, [dft_length], [axis]; axis, inverse, onesided): ONNX DFT (opsets 17 and
 * 20) as its reference computes it, on cuvil_f32_dft; stft (signal, frame_step, [window],
 * [frame_length]; onesided): ONNX STFT on cuvil_f32_stft. Lengths, steps and axes constant;
 * fixed dims; float32. */
#include "ir/ops/ops.h"

#include <string.h>

/* Optional input i, if present an int32 or int64 scalar. */
static cuvil_status int_scalar(cir_graph *g, cir_node *n, int i, const char *what) {
    cir_value *c = cir_in(g, n, i);
    if (c && ((c->dtype != CIR_I64 && c->dtype != CIR_I32) || cir_numel(c) != 1))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s '%s' must be an int32 or int64 scalar", what, c->name);
    return CUVIL_OK;
}

/* Optional scalar integer input i, constant: its value into *v (absent: *v unchanged). */
static cuvil_status const_scalar(cir_graph *g, cir_node *n, int i, const char *what, int64_t *v) {
    cir_value *c = cir_in(g, n, i);
    cuvil_status s = int_scalar(g, n, i, what);
    if (s || !c) return s;
    if (!cir_is_const(c))
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "%s '%s' must be a constant (it sets the output's shape)", what,
                            c->name);
    *v = cir_const_i64(c, 0);
    return CUVIL_OK;
}

/* Inputs from..to that are present and read only when the model runs. */
bool op_dft_runtime(cir_graph *g, cir_node *n, int from, int to) {
    for (int i = from; i <= to; i++)
        if (cir_in(g, n, i) && !cir_is_const(cir_in(g, n, i))) return true;
    return false;
}

/* An output whose shape depends on inputs read when the model runs: the declared one (the run
 * checks that they give it), of at most 8 dims. */
cuvil_status op_declared_output(cir_graph *g, cir_node *n, cir_dtype t, int rank, const char *what) {
    cir_value *y = cir_out(g, n, 0);
    bool ok = y->decl_ndim == rank && rank <= 8;
    for (int d = 0; ok && d < rank; d++) ok = y->decl_dims[d] >= 0;
    if (!ok)
        return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "%s read when the model runs: the output's shape must be declared "
                            "(rank %d, fixed dims) or they constant", what, rank);
    cir_set_shape(y, t, rank, y->decl_dims);
    return CUVIL_OK;
}

/* DFT's input: [..., 1 (real) or 2 (complex)]. */
static cuvil_status dft_input(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0);
    if (x->ndim < 2 || (x->dims[x->ndim - 1] != 1 && x->dims[x->ndim - 1] != 2))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "input '%s' must end in a dim of 1 (real) or 2 (complex)", x->name);
    return CUVIL_OK;
}

cuvil_status op_dft_params(cir_graph *g, cir_node *n, cuvil_dft_params *p, int *axis_out) {
    cir_value *x = cir_in(g, n, 0);
    memset(p, 0, sizeof *p);
    cuvil_status s = dft_input(g, n);
    if (s) return s;
    int64_t axis = cir_attr_int(n, "axis"), len = -1;
    if ((s = const_scalar(g, n, 2, "axis", &axis)) || (s = const_scalar(g, n, 1, "dft_length", &len))) return s;
    if (axis < -x->ndim || axis >= x->ndim) return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %lld is out of range", (long long)axis);
    int a = (int)(axis < 0 ? axis + x->ndim : axis);
    if (a == x->ndim - 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "axis %lld is the real/imaginary dim", (long long)axis);
    bool inverse = cir_attr_int(n, "inverse") != 0, onesided = cir_attr_int(n, "onesided") != 0;
    if (len < 0) len = inverse && onesided ? 2 * (x->dims[a] - 1) : x->dims[a];
    if (len < 1 || len > g->limits.dim)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "dft_length is %lld; it must be positive", (long long)len);
    p->mode = !inverse ? 0 : onesided ? 2 : 1;
    p->in_complex = x->dims[x->ndim - 1] == 2;
    p->outer = 1;
    for (int d = 0; d < a; d++) p->outer *= x->dims[d];
    p->len = x->dims[a];
    p->inner = 1;
    for (int d = a + 1; d < x->ndim - 1; d++) p->inner *= x->dims[d];
    p->n = len;
    p->out_len = !inverse && onesided ? len / 2 + 1 : len;
    *axis_out = a;
    return CUVIL_OK;
}

static cuvil_status dft_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 1, 3, 1, 1);
    if (s || (s = op_need_f32(g, n, 0))) return s;
    cir_value *x = cir_in(g, n, 0);
    if (!cir_value_fixed(x)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has symbolic dims", x->name);
    if (op_dft_runtime(g, n, 1, 2)) {
        if ((s = int_scalar(g, n, 1, "dft_length")) || (s = int_scalar(g, n, 2, "axis")) || (s = dft_input(g, n))) return s;
        return op_declared_output(g, n, CIR_F32, x->ndim, "dft_length or axis");
    }
    cuvil_dft_params p;
    int a;
    if ((s = op_dft_params(g, n, &p, &a))) return s;
    int64_t dims[CIR_MAX_DIMS];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    dims[a] = p.out_len;
    dims[x->ndim - 1] = p.mode == 2 ? 1 : 2;
    cir_set_shape(cir_out(g, n, 0), CIR_F32, x->ndim, dims);
    return CUVIL_OK;
}

static const cir_attr_spec dft_attrs[] = {
    {"axis", CIR_ATTR_INT, 1, 0, NULL, false},
    {"inverse", CIR_ATTR_INT, 0, 0, NULL, false},
    {"onesided", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};
const cir_opdef cir_op_dft = {"dft", 0, 1, 3, 1, 1, dft_attrs, dft_infer, NULL, NULL, 0};

/* STFT's signal [batch, length, 1 or 2] and window (1-D). */
static cuvil_status stft_inputs(cir_graph *g, cir_node *n) {
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 2);
    if (x->ndim != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "signal '%s' must be [batch, length, 1 or 2]", x->name);
    if (w && w->ndim != 1) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "window '%s' must be 1-D", w->name);
    return CUVIL_OK;
}

cuvil_status op_stft_params(cir_graph *g, cir_node *n, cuvil_stft_params *p) {
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 2);
    memset(p, 0, sizeof *p);
    cuvil_status s = stft_inputs(g, n);
    if (s) return s;
    int64_t step = 0, flen = -1;
    if (!cir_in(g, n, 1)) return cir_node_err(g, n, CUVIL_ERR_MODEL, "frame_step is required");
    if ((s = const_scalar(g, n, 1, "frame_step", &step)) || (s = const_scalar(g, n, 3, "frame_length", &flen))) return s;
    if (flen < 0) flen = w ? w->dims[0] : x->dims[1];
    if (w && w->dims[0] != flen)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "window '%s' has %lld values for frames of %lld", w->name,
                            (long long)w->dims[0], (long long)flen);
    if (step < 1 || flen < 1 || flen > x->dims[1])
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "frame_step %lld and frame_length %lld must be positive, the frame no "
                            "longer than the signal (%lld)", (long long)step, (long long)flen, (long long)x->dims[1]);
    p->in_complex = x->dims[2] == 2;
    p->batch = x->dims[0];
    p->sig_len = x->dims[1];
    p->step = step;
    p->frames = 1 + (x->dims[1] - flen) / step;
    p->win_len = w ? w->dims[0] : flen;
    p->n = flen;
    p->bins = cir_attr_int(n, "onesided") ? flen / 2 + 1 : flen;
    return CUVIL_OK;
}

static cuvil_status stft_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 2, 4, 1, 1);
    if (s || (s = op_need_f32(g, n, 0)) || (cir_in(g, n, 2) && (s = op_need_f32(g, n, 2)))) return s;
    for (int i = 0; i < 3; i += 2) {
        cir_value *v = cir_in(g, n, i);
        if (v && !cir_value_fixed(v)) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "input '%s' has symbolic dims", v->name);
    }
    if (op_dft_runtime(g, n, 1, 1) || op_dft_runtime(g, n, 3, 3)) {
        cir_value *x = cir_in(g, n, 0);
        if ((s = stft_inputs(g, n)) || (s = int_scalar(g, n, 1, "frame_step")) || (s = int_scalar(g, n, 3, "frame_length")))
            return s;
        if ((s = op_declared_output(g, n, CIR_F32, 4, "frame_step or frame_length"))) return s;
        cir_value *y = cir_out(g, n, 0);
        if (y->dims[0] != x->dims[0] || y->dims[3] != 2)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "the declared output must be [%lld, frames, bins, 2]",
                                (long long)x->dims[0]);
        return CUVIL_OK;
    }
    cuvil_stft_params p;
    if ((s = op_stft_params(g, n, &p))) return s;
    int64_t dims[4] = {p.batch, p.frames, p.bins, 2};
    cir_set_shape(cir_out(g, n, 0), CIR_F32, 4, dims);
    return CUVIL_OK;
}

static const cir_attr_spec stft_attrs[] = {{"onesided", CIR_ATTR_INT, 1, 0, NULL, false}, CIR_ATTR_END};
const cir_opdef cir_op_stft = {"stft", 0, 2, 4, 1, 1, stft_attrs, stft_infer, NULL, NULL, 0};
