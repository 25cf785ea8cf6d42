/* op_rnn.c -- rnn (x, w, r, [b], [sequence_lens], [initial_h], [initial_c], [p], [w_scale,
 * w_zero_point, r_scale, r_zero_point]) -> [y], [y_h], [y_c]: ONNX's RNN, GRU and LSTM
 * (attribute cell, CUVIL_CELL_*), inputs and outputs in ONNX's order and layouts, on
 * cuvil_f32_rnn (emit_rnn.c). The activations are resolved by the frontend into acts
 * (CUVIL_RNN_ACT_* per direction: f, g, h) and act_alpha/act_beta. float32; the sequence length
 * and the batch may be symbolic. With quant 1 (com.microsoft DynamicQuantizeLSTM; LSTM only):
 * w [dirs, input, 4 hidden] and r [dirs, hidden, 4 hidden] are int8 or uint8 constants in ONNX
 * Runtime's layout, their scales float32 per direction or per gate row, their zero points
 * (optional) as many, of their type; on cuvil_rnn_q8. */
#include "ir/ops/ops.h"

static const char *const direction_names[] = {"forward", "reverse", "bidirectional", NULL};

/* quant 1: W [dirs, input, GH] and R [dirs, hidden, GH], 8-bit constants of one type, each
 * with a float32 scale per direction or per gate row and optionally as many zero points of
 * its type (LSTM only: the kernel's). */
static cuvil_status q8_weights(cir_graph *g, cir_node *n, const op_rnn *a, int64_t GH) {
    cir_value *w = cir_in(g, n, 1), *r = cir_in(g, n, 2);
    if (cir_attr_int(n, "cell") != CUVIL_CELL_LSTM) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "8-bit weights are LSTM's only");
    if ((w->dtype != CIR_I8 && w->dtype != CIR_U8) || r->dtype != w->dtype || !cir_is_const(w) || !cir_is_const(r))
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "W '%s' and R '%s' must be int8 or uint8 constants of one type", w->name, r->name);
    if (w->dims[0] != a->dirs || w->dims[1] != a->input || w->dims[2] != GH)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "W '%s' must be [%d, %lld, %lld]", w->name, a->dirs, (long long)a->input,
                            (long long)GH);
    if (r->dims[0] != a->dirs || r->dims[1] != a->hidden || r->dims[2] != GH)
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "R '%s' must be [%d, %lld, %lld]", r->name, a->dirs, (long long)a->hidden,
                            (long long)GH);
    for (int i = 8; i < 12; i += 2) {
        cir_value *sc = cir_in(g, n, i), *zp = cir_in(g, n, i + 1);
        const char *what = i == 8 ? "W" : "R";
        if (!sc) return cir_node_err(g, n, CUVIL_ERR_MODEL, "%s_scale is required", what);
        if (!cir_value_fixed(sc) || (cir_numel(sc) != a->dirs && cir_numel(sc) != a->dirs * GH))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s_scale '%s' must be float32 with %d (per direction) or %lld values (per row)",
                                what, sc->name, a->dirs, (long long)(a->dirs * GH));
        if (zp && (zp->dtype != w->dtype || !cir_value_fixed(zp) || cir_numel(zp) != cir_numel(sc)))
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "%s_zero_point '%s' must have %s's type and %lld values, as its scale", what,
                                zp->name, what, (long long)cir_numel(sc));
    }
    return CUVIL_OK;
}

cuvil_status op_rnn_sizes(cir_graph *g, cir_node *n, op_rnn *a) {
    cuvil_status s;
    a->q8 = cir_attr_int(n, "quant") != 0;
    for (int i = 0; i < n->n_in; i++)
        if (i != 4 && !(a->q8 && (i == 1 || i == 2 || i == 9 || i == 11)) && cir_in(g, n, i) && (s = op_need_f32(g, n, i)))
            return s;
    cir_value *x = cir_in(g, n, 0), *w = cir_in(g, n, 1), *r = cir_in(g, n, 2);
    int cell = (int)cir_attr_int(n, "cell");
    if (!a->q8 && n->n_in > 8) return cir_node_err(g, n, CUVIL_ERR_MODEL, "inputs past P are quant 1's (8-bit weights' scales)");
    a->gates = cell == CUVIL_CELL_LSTM ? 4 : cell == CUVIL_CELL_GRU ? 3 : 1;
    a->dirs = cir_attr_int(n, "direction") == 2 ? 2 : 1;
    a->layout = (int)cir_attr_int(n, "layout");
    if (a->layout != 0 && a->layout != 1)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "layout is %d; it must be 0 or 1", a->layout);
    if (x->ndim != 3) return cir_node_err(g, n, CUVIL_ERR_SHAPE, "X '%s' has rank %d; it must be 3", x->name, x->ndim);
    a->seq = cir_dimx(g, x, a->layout ? 1 : 0);
    a->batch = cir_dimx(g, x, a->layout ? 0 : 1);
    if (x->dx[2]) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "X's input size (dim 2) must be fixed");
    a->input = x->dims[2];
    if (w->ndim != 3 || r->ndim != 3 || !cir_value_fixed(w) || !cir_value_fixed(r))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "W and R must be fixed 3-D tensors %s",
                            a->q8 ? "[directions, input or hidden, 4 * hidden]" : "[directions, gates * hidden, ...]");
    const int gd = a->q8 ? 2 : 1;   /* W's and R's gate dim (8-bit: ONNX Runtime's [dirs, input, 4 hidden]) */
    a->hidden = cir_attr_has(n, "hidden_size") ? cir_attr_int(n, "hidden_size") : w->dims[gd] / a->gates;
    if (a->hidden < 0 || a->hidden > w->dims[gd])   /* (W holds gates * hidden rows: no overflow below) */
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "hidden_size %lld does not fit W '%s' with %lld rows",
                            (long long)a->hidden, w->name, (long long)w->dims[gd]);
    const int64_t GH = a->gates * a->hidden;
    if (a->q8) {
        if (a->layout) return cir_node_err(g, n, CUVIL_ERR_UNSUPPORTED, "8-bit weights take layout 0 only");
        if ((s = q8_weights(g, n, a, GH))) return s;
    } else {
        if (a->hidden < 0 || w->dims[0] != a->dirs || w->dims[1] != GH || w->dims[2] != a->input)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "W '%s' must be [%d, %lld, %lld]", w->name, a->dirs, (long long)GH,
                                (long long)a->input);
        if (r->dims[0] != a->dirs || r->dims[1] != GH || r->dims[2] != a->hidden)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "R '%s' must be [%d, %lld, %lld]", r->name, a->dirs, (long long)GH,
                                (long long)a->hidden);
    }
    cir_value *b = cir_in(g, n, 3), *sl = cir_in(g, n, 4), *p = cir_in(g, n, 7);
    if (b && (b->ndim != 2 || !cir_value_fixed(b) || b->dims[0] != a->dirs || b->dims[1] != 2 * GH))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "B '%s' must be [%d, %lld]", b->name, a->dirs, (long long)(2 * GH));
    if (p && (cell != CUVIL_CELL_LSTM || p->ndim != 2 || !cir_value_fixed(p) || p->dims[0] != a->dirs ||
              p->dims[1] != 3 * a->hidden))
        return cir_node_err(g, n, CUVIL_ERR_SHAPE, "P '%s' must be [%d, %lld] (LSTM's peepholes)", p->name, a->dirs,
                            (long long)(3 * a->hidden));
    if (sl) {
        if (sl->dtype != CIR_I32 || sl->ndim != 1)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "sequence_lens '%s' must be a 1-D int32 tensor", sl->name);
        if ((s = cir_require_eq(g, n, cir_dimx(g, sl, 0), a->batch, "sequence_lens's length and the batch"))) return s;
    }
    for (int i = 5; i < 7; i++) {
        cir_value *st = cir_in(g, n, i);
        if (!st) continue;
        if (i == 6 && cell != CUVIL_CELL_LSTM) return cir_node_err(g, n, CUVIL_ERR_MODEL, "initial_c is LSTM's");
        int dd = a->layout ? 1 : 0;   /* [dirs, batch, hidden], layout 1 [batch, dirs, hidden] */
        if (st->ndim != 3 || st->dx[dd] || st->dims[dd] != a->dirs || st->dx[2] || st->dims[2] != a->hidden)
            return cir_node_err(g, n, CUVIL_ERR_SHAPE, "'%s' must be %s", st->name,
                                a->layout ? "[batch, directions, hidden]" : "[directions, batch, hidden]");
        if ((s = cir_require_eq(g, n, cir_dimx(g, st, 1 - dd), a->batch, "the initial state's batch"))) return s;
    }
    const int64_t *acts;
    int na = cir_attr_ints(n, "acts", &acts);
    const float *al, *be;
    if (na != a->dirs * 3 || cir_attr_floats(n, "act_alpha", &al) != na || cir_attr_floats(n, "act_beta", &be) != na)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "acts, act_alpha and act_beta need %d values each", a->dirs * 3);
    for (int i = 0; i < na; i++) {
        if (acts[i] < 0 || acts[i] >= CUVIL_RNN_ACT__COUNT)
            return cir_node_err(g, n, CUVIL_ERR_MODEL, "activation %lld is not one of CUVIL_RNN_ACT_*", (long long)acts[i]);
        a->act[i / 3][i % 3] = (cuvil_rnn_act){(int)acts[i], al[i], be[i]};
    }
    return CUVIL_OK;
}

static cuvil_status rnn_infer(cir_graph *g, cir_node *n) {
    cuvil_status s = op_check_arity(g, n, 3, 12, 0, 3);
    if (s) return s;
    op_rnn a;
    if ((s = op_rnn_sizes(g, n, &a))) return s;
    cir_dimtab *t = &g->dt;
    const cir_dim *dirs = cir_dim_const(t, a.dirs), *hid = cir_dim_const(t, a.hidden);
    const cir_dim *yd[4] = {a.seq, dirs, a.batch, hid}, *yl[4] = {a.batch, a.seq, dirs, hid};
    const cir_dim *hd[3] = {dirs, a.batch, hid}, *hl[3] = {a.batch, dirs, hid};
    if (cir_out_opt(g, n, 0)) cir_set_shape_x(cir_out_opt(g, n, 0), CIR_F32, 4, a.layout ? yl : yd);
    for (int i = 1; i < 3; i++)
        if (cir_out_opt(g, n, i)) cir_set_shape_x(cir_out_opt(g, n, i), CIR_F32, 3, a.layout ? hl : hd);
    if (cir_out_opt(g, n, 2) && cir_attr_int(n, "cell") != CUVIL_CELL_LSTM)
        return cir_node_err(g, n, CUVIL_ERR_MODEL, "only LSTM has a Y_c output");
    return CUVIL_OK;
}

static const cir_attr_spec rnn_attrs[] = {
    {"cell", CIR_ATTR_INT, 0, 0, NULL, true},
    {"direction", CIR_ATTR_ENUM, 0, 0, direction_names, false},
    {"hidden_size", CIR_ATTR_INT, 0, 0, NULL, false},
    {"layout", CIR_ATTR_INT, 0, 0, NULL, false},
    {"clip", CIR_ATTR_FLOAT, 0, 0, NULL, false},
    {"linear_before_reset", CIR_ATTR_INT, 0, 0, NULL, false},
    {"input_forget", CIR_ATTR_INT, 0, 0, NULL, false},
    {"acts", CIR_ATTR_INTS, 0, 0, NULL, true},
    {"act_alpha", CIR_ATTR_FLOATS, 0, 0, NULL, true},
    {"act_beta", CIR_ATTR_FLOATS, 0, 0, NULL, true},
    {"quant", CIR_ATTR_INT, 0, 0, NULL, false},
    CIR_ATTR_END,
};

const cir_opdef cir_op_rnn = {"rnn", CIR_OPF_SYM_DIMS, 3, 12, 0, 3, rnn_attrs, rnn_infer, NULL, NULL, 0};
