"""ONNX's RNN, GRU and LSTM (issue 32) on the recurrent kernel: every cell and direction, with
sequence lengths, initial states, peepholes, clip, linear_before_reset and named activations,
against ONNX Runtime at random data; layout 1 against ONNX Runtime's layout-0 result transposed;
a PyTorch bidirectional two-layer LSTM and a GRU exported by torch.onnx with a symbolic sequence
length, against PyTorch; a sequence length outside 0..seq fails the run naming the node."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I32 = TensorProto.FLOAT, TensorProto.INT32
S, B, I, H = 5, 3, 4, 6
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(tmp_path, op, direction, *, layout=0, lens=False, init=False, peep=False, attrs=None, name="m"):
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    rng = np.random.default_rng(zlib.crc32(repr((op, direction, lens, init, peep)).encode()))   # layout: same weights
    inits = [helper.make_tensor("W", F, [d, g * H, I], rng.uniform(-0.5, 0.5, d * g * H * I)),
             helper.make_tensor("R", F, [d, g * H, H], rng.uniform(-0.5, 0.5, d * g * H * H)),
             helper.make_tensor("B", F, [d, 2 * g * H], rng.uniform(-0.5, 0.5, d * 2 * g * H))]
    ins = ["X", "W", "R", "B", "lens" if lens else "", "h0" if init else ""]
    vis = [helper.make_tensor_value_info("X", F, [B, S, I] if layout else [S, B, I])]
    if lens:
        vis.append(helper.make_tensor_value_info("lens", I32, [B]))
    if init:
        vis.append(helper.make_tensor_value_info("h0", F, [B, d, H] if layout else [d, B, H]))
    outs = ["Y", "Yh"]
    if op == "LSTM":
        ins += ["c0" if init else "", "P" if peep else ""]
        outs.append("Yc")
        if init:
            vis.append(helper.make_tensor_value_info("c0", F, [B, d, H] if layout else [d, B, H]))
        if peep:
            inits.append(helper.make_tensor("P", F, [d, 3 * H], rng.uniform(-0.5, 0.5, d * 3 * H)))
    while ins and not ins[-1]:
        ins.pop()
    node = helper.make_node(op, ins, outs, hidden_size=H, direction=direction, layout=layout, **(attrs or {}))
    return tl.onnx_graph_model(tmp_path / f"{name}.onnx", [node], vis, [(o, F) for o in outs], inits, opset=14)


def _feeds(seed, layout=0, lens=False, init=False, lstm=False, d=1):
    rng = np.random.default_rng(seed)
    f = {"X": rng.standard_normal((B, S, I) if layout else (S, B, I)).astype(np.float32)}
    if lens:
        f["lens"] = np.array([5, 2, 0], np.int32)
    if init:
        f["h0"] = rng.standard_normal((B, d, H) if layout else (d, B, H)).astype(np.float32)
        if lstm:
            f["c0"] = rng.standard_normal((B, d, H) if layout else (d, B, H)).astype(np.float32)
    return f


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_cells_vs_ort(tmp_path, op, direction):
    d = 2 if direction == "bidirectional" else 1
    path = _model(tmp_path, op, direction, lens=True, init=True, peep=op == "LSTM")
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    for seed in (1, 2):
        tl.check_vs_ort(model, path, _feeds(seed, lens=True, init=True, lstm=op == "LSTM", d=d), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_weights_packed_ahead_or_per_call(tmp_path, op):
    """Constant W and R are packed when the model compiles (the emitted C calls
    cuvil_f32_rnn_packed); over limits.packed_bytes they are not, and the kernel packs R per call
    instead of refusing the model. Both against ONNX Runtime."""
    path = _model(tmp_path, op, "bidirectional", init=True)
    feeds = _feeds(3, init=True, lstm=op == "LSTM", d=2)
    for name, extra in [("ahead", []), ("per_call", ["--limit", "packed_bytes=1"])]:
        src = "".join(f.read_text() for f in tl.compile(path, tmp_path / f"c_{name}", emit="c", extra=extra).glob("*.c"))
        assert ("cuvil_f32_rnn_packed(" in src) == (name == "ahead"), name
        model = cuvil.load(tl.compile(path, tmp_path / name, extra=extra))
        tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("GRU", {"linear_before_reset": 1}),
    ("GRU", {"clip": 0.6}),
    ("GRU", {"clip": 0.6, "linear_before_reset": 1}),
    ("GRU", {"activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.3], "activation_beta": [0.4]}),
    ("LSTM", {"clip": 0.7, "input_forget": 1}),
    ("LSTM", {"activations": ["Sigmoid", "LeakyRelu", "ScaledTanh"], "activation_alpha": [0.2, 0.9],
              "activation_beta": [1.5]}),
    ("RNN", {"activations": ["Relu"]}),
])
def test_cell_options_vs_ort(tmp_path, op, attrs):
    path = _model(tmp_path, op, "forward", init=True, attrs=attrs)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    tl.check_vs_ort(model, path, _feeds(3, init=True, lstm=op == "LSTM"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_layout_1_is_layout_0_transposed(tmp_path, op):
    """ONNX Runtime's CPU kernels take layout 0 only: the same weights at layout 0 there, and
    the inputs and outputs transposed, give layout 1's reference."""
    p1 = _model(tmp_path, op, "bidirectional", layout=1, init=True, name="l1")
    p0 = _model(tmp_path, op, "bidirectional", layout=0, init=True, name="l0")
    model = cuvil.load(tl.compile(p1, tmp_path / "b"))
    f1 = _feeds(4, layout=1, init=True, lstm=op == "LSTM", d=2)
    f0 = {k: v.transpose(1, 0, 2) for k, v in f1.items()}
    want = tl.ort_run(p0, f0)
    got = model(**f1)
    np.testing.assert_allclose(got[0], want["Y"].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
    for g, k in zip(got[1:], list(want)[1:]):
        np.testing.assert_allclose(g, want[k].transpose(1, 0, 2), rtol=1e-4, atol=1e-5)


def test_bad_sequence_length_fails_the_run(tmp_path):
    path = _model(tmp_path, "LSTM", "forward", lens=True)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    f = _feeds(5, lens=True)
    f["lens"] = np.array([5, 6, 1], np.int32)
    with pytest.raises(cuvil.CuvilError, match=r"LSTM.*sequence length"):
        model(**f)


def test_torch_lstm_and_gru_symbolic_sequence(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
            self.gru = torch.nn.GRU(32, 12)

        def forward(self, x):
            y, _ = self.lstm(x)
            z, h = self.gru(y.transpose(0, 1))
            return z, h

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 7, 8)
    path = tmp_path / "tl.onnx"
    torch.onnx.export(net, (x,), str(path), input_names=["x"], output_names=["z", "h"],
                      dynamic_axes={"x": {1: "seq"}}, opset_version=17, dynamo=False)
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"seq": "1:20"}))
    for s in (1, 7, 20):
        xs = torch.randn(2, s, 8)
        with torch.no_grad():
            z, h = net(xs)
        got = model(x=xs.numpy())
        np.testing.assert_allclose(got[0], z.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], h.numpy(), rtol=1e-4, atol=1e-5)
