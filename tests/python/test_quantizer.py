"""Cuvil's own int8 quantizer: cuvil-compile --quantize int8 --calibrate DIR, and
cuvil.compile(..., quantize="int8", calibration=[...]).

The reference is independent of the compiler: the test computes each point's range with ONNX
Runtime on the float model (its intermediate values as outputs), writes the QDQ model the
quantizer promises (uint8 activations from the min/max range, int8 weights symmetric per output
channel) with the onnx package, and runs it in ONNX Runtime. Cuvil's quantized library must be
far closer to that model than the float model is. The digits demo model quantized by Cuvil
keeps >= 99% top-1 agreement with float32 on the 360 held-out digits (the issue's bar).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil_testlib as tl

ROOT = Path(__file__).resolve().parents[2]


def save_model(path, name, nodes, inits):
    """x [1, 16, 12, 12] -> y [1, 10], opset 17."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def cnn(path, rng):
    """conv 3x3 + relu, conv 3x3 + relu, conv 1x1, global pool, flatten, gemm (logits)."""
    def init(n, a):
        return numpy_helper.from_array(a.astype(np.float32), n)
    inits = [init("k1", rng.normal(0, 0.3, (32, 16, 3, 3))), init("b1", rng.normal(0, 0.1, 32)),
             init("k2", rng.normal(0, 0.2, (32, 32, 3, 3))), init("b2", rng.normal(0, 0.1, 32)),
             init("k3", rng.normal(0, 0.3, (64, 32, 1, 1))), init("w", rng.normal(0, 0.3, (10, 64))),
             init("b", rng.normal(0, 0.1, 10))]
    nodes = [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "k2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "k3"], ["c3"], name="conv3"), helper.make_node("GlobalAveragePool", ["c3"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1, name="fc")]
    return save_model(path, "cnn", nodes, inits)


POINTS = ["x", "r1", "r2", "c3", "f"]   # what the quantizer promises to quantize in cnn()
WEIGHTS = {"k1": 0, "k2": 0, "k3": 0, "w": 0}   # output-channel axis (Gemm transB: rows)


def calibration(tmp_path, n=12, shape=(1, 16, 12, 12)):
    d = tmp_path / "cal"
    d.mkdir()
    rng = tl.seeded_rng("quantizer-cal")
    sets = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    for k, a in enumerate(sets):
        np.save(d / f"{k:03d}.npy", a)
    return d, sets


def qdq_reference(path, sets, points=POINTS, weights=WEIGHTS):
    """The QDQ model the quantizer promises, from ONNX Runtime's view of the float model."""
    m = onnx.load(path)
    probe = onnx.load(path)
    for p in points[1:]:
        probe.graph.output.append(helper.make_tensor_value_info(p, TensorProto.FLOAT, None))
    lo = {p: 0.0 for p in points}
    hi = {p: 0.0 for p in points}
    for x in sets:
        vals = tl.ort_run(probe, {"x": x})
        vals["x"] = x
        for p in points:
            lo[p], hi[p] = min(lo[p], float(vals[p].min())), max(hi[p], float(vals[p].max()))
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    new_inits, nodes = [], []
    for p in points:   # p -> Q -> DQ -> p_dq, read by everyone instead of p
        s = np.float32((hi[p] - lo[p]) / 255.0)
        z = np.uint8(np.clip(np.rint(-lo[p] / s), 0, 255))
        new_inits += [numpy_helper.from_array(np.array(s, np.float32), p + "_s"), numpy_helper.from_array(np.array(z, np.uint8), p + "_z")]
    for name, axis in weights.items():
        w = inits[name]
        mx = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
        sc = np.where(mx > 0, mx / np.float32(127), np.float32(1)).astype(np.float32)
        q = np.clip(np.rint(w / sc.reshape((-1,) + (1,) * (w.ndim - 1))), -127, 127).astype(np.int8)
        new_inits += [numpy_helper.from_array(q, name + "_q"), numpy_helper.from_array(sc, name + "_ws"),
                      numpy_helper.from_array(np.zeros(w.shape[0], np.int8), name + "_wz")]
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_ws", name + "_wz"], [name + "_dq"], axis=axis))
    ren = {p: p + "_dq" for p in points}
    ren.update({w: w + "_dq" for w in weights})
    for p in points[:1]:
        nodes += [helper.make_node("QuantizeLinear", [p, p + "_s", p + "_z"], [p + "_q"]),
                  helper.make_node("DequantizeLinear", [p + "_q", p + "_s", p + "_z"], [p + "_dq"])]
    for n in g.node:
        n2 = onnx.NodeProto()
        n2.CopyFrom(n)
        for i, v in enumerate(n2.input):
            if v in ren:
                n2.input[i] = ren[v]
        nodes.append(n2)
        for o in n.output:
            if o in points:
                nodes += [helper.make_node("QuantizeLinear", [o, o + "_s", o + "_z"], [o + "_q"]),
                          helper.make_node("DequantizeLinear", [o + "_q", o + "_s", o + "_z"], [o + "_dq"])]
    g2 = helper.make_graph(nodes, "qdq", list(g.input), list(g.output), list(g.initializer) + new_inits)
    m2 = helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)])
    m2.ir_version = 8
    onnx.checker.check_model(m2)
    return m2


def closer_than_float(tmp_path, path, ref, seed):
    """q.so's outputs on 4 test inputs are ref's (ONNX Runtime on the promised QDQ model) to
    within a tenth of the float model's distance from it."""
    test = tl.seeded_rng(seed)
    for k in range(4):
        x = test.standard_normal((1, 16, 12, 12)).astype(np.float32)
        got = tl.run(tmp_path / "q.so", {"x": x}, tmp_path / f"run{k}")["y"]
        want = tl.ort_run(ref, {"x": x})["y"]
        flt = tl.ort_run(path, {"x": x})["y"]
        d_float = float(np.abs(flt - want).max())
        assert d_float > 1e-3, d_float   # quantizing changes the answer: the comparison can fail
        assert float(np.abs(got - want).max()) < d_float / 10, (np.abs(got - want).max(), d_float)


def test_int8_follows_the_promised_quantization(tmp_path):
    """--quantize int8 (minmax): every conv and the Gemm become integer nodes (--emit ir), the
    report is on stderr, and the outputs are ONNX Runtime's on the QDQ model the quantizer
    promises to within a tenth of the float model's distance from it."""
    path = cnn(tmp_path / "cnn.onnx", tl.seeded_rng("quantizer-cnn"))
    cal, sets = calibration(tmp_path)
    ir = tl.compile(path, tmp_path / "ir", emit="ir", extra=["--quantize", "int8", "--calibrate", cal]).read_text()
    ops = [ln.split("=", 1)[1].split()[0] for ln in ir.splitlines() if ln.lstrip().startswith("%") and " = " in ln]
    assert ops.count("qlinear_conv") == 3 and ops.count("qlinear_matmul") == 1, ir
    assert "conv" not in ops and "gemm" not in ops and "matmul" not in ops, ir
    proc = tl.compile_raw(path, tmp_path / "q.so", extra=["--quantize", "int8", "--calibrate", cal])
    assert proc.returncode == 0, proc.stderr
    assert "4 convolutions and matrix products in int8, 5 activations quantized" in proc.stderr, proc.stderr
    assert "output 'y' against float32 on the 12 calibration sets: max abs error" in proc.stderr, proc.stderr
    ref = qdq_reference(path, sets)
    closer_than_float(tmp_path, path, ref, "quantizer-test")


def dw_cnn(path, rng):
    """MobileNetV2's block: conv 1x1 + clip(0, 6), depthwise 3x3 stride 2 + clip(0, 6), conv 1x1,
    global pool, flatten, gemm."""
    def init(n, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), n)
    inits = [init("e1", rng.normal(0, 0.3, (32, 16, 1, 1))), init("eb1", rng.normal(0, 0.1, 32)),
             init("d1", rng.normal(0, 0.4, (32, 1, 3, 3))), init("db1", rng.normal(0, 0.1, 32)),
             init("p1", rng.normal(0, 0.3, (24, 32, 1, 1))), init("w", rng.normal(0, 0.3, (10, 24))),
             init("b", rng.normal(0, 0.1, 10)), init("lo", 0.0), init("hi", 6.0)]
    nodes = [helper.make_node("Conv", ["x", "e1", "eb1"], ["c1"], name="expand"),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             helper.make_node("Conv", ["r1", "d1", "db1"], ["c2"], group=32, pads=[1, 1, 1, 1], strides=[2, 2], name="dw"),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
             helper.make_node("Conv", ["r2", "p1"], ["c3"], name="project"), helper.make_node("GlobalAveragePool", ["c3"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1, name="fc")]
    return save_model(path, "dw_cnn", nodes, inits)


def test_depthwise_conv_quantized(tmp_path):
    """A depthwise conv (stride 2, between Clips) is quantized like the others: an integer node,
    and the outputs are ONNX Runtime's on the promised QDQ model to within a tenth of the float
    model's distance from it."""
    path = dw_cnn(tmp_path / "dw.onnx", tl.seeded_rng("quantizer-dw"))
    cal, sets = calibration(tmp_path)
    ir = tl.compile(path, tmp_path / "ir", emit="ir", extra=["--quantize", "int8", "--calibrate", cal]).read_text()
    ops = [ln.split("=", 1)[1].split()[0] for ln in ir.splitlines() if ln.lstrip().startswith("%") and " = " in ln]
    assert ops.count("qlinear_conv") == 3 and ops.count("qlinear_matmul") == 1, ir
    assert "conv" not in ops, ir
    proc = tl.compile_raw(path, tmp_path / "q.so", extra=["--quantize", "int8", "--calibrate", cal])
    assert proc.returncode == 0, proc.stderr
    assert "4 convolutions and matrix products in int8, 5 activations quantized" in proc.stderr, proc.stderr
    assert "kept in float32" not in proc.stderr, proc.stderr
    ref = qdq_reference(path, sets, ["x", "r1", "r2", "c3", "f"], {"e1": 0, "d1": 0, "p1": 0, "w": 0})
    closer_than_float(tmp_path, path, ref, "quantizer-dw-test")


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_histogram_calibrations_and_keep_float(tmp_path, method):
    """percentile and entropy run (a second pass over the sets) and stay close to float32;
    --keep-float by node name and by op leaves those nodes in float32 (the IR keeps them)."""
    path = cnn(tmp_path / "cnn.onnx", tl.seeded_rng("quantizer-cnn"))
    cal, sets = calibration(tmp_path)
    args = ["--quantize", "int8", "--calibrate", cal, "--calibration", method, "--keep-float", "conv2", "--keep-float", "Gemm"]
    ir = tl.compile(path, tmp_path / "ir", emit="ir", extra=args).read_text()
    ops = [ln.split("=", 1)[1].split()[0] for ln in ir.splitlines() if ln.lstrip().startswith("%") and " = " in ln]
    assert ops.count("qlinear_conv") == 2 and ops.count("conv") == 1 and ops.count("gemm") == 1, ir
    proc = tl.compile_raw(path, tmp_path / "q.so", extra=args)
    assert proc.returncode == 0 and f"{method} calibration on 12 input sets" in proc.stderr, proc.stderr
    assert "2 kept in float32: Conv 'conv2' (--keep-float), Gemm 'fc' (--keep-float)" in proc.stderr, proc.stderr
    x = sets[0]
    got = tl.run(tmp_path / "q.so", {"x": x}, tmp_path / "run")["y"]
    flt = tl.ort_run(path, {"x": x})["y"]
    assert float(np.abs(got - flt).max()) < 0.05 * float(np.abs(flt).max()), (got, flt)


def _int8_rows(w):
    """w [D, 4H, K] per gate row symmetric int8 (scale max |w| / 127, half to even) in
    DynamicQuantizeLSTM's [D, K, 4H], and the scales [D, 4H]: what the quantizer promises."""
    m = np.abs(w).max(axis=2)
    sc = np.where(m > 0, m / np.float32(127), np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(w / sc[:, :, None]), -127, 127).astype(np.int8)
    return q.transpose(0, 2, 1).copy(), sc


def test_lstm_quantized_as_dynamic_quantize_lstm(tmp_path):
    """--quantize int8 gives an LSTM int8 weights per gate row and quantizes X and h as the model
    runs (no calibration point): against ONNX Runtime's DynamicQuantizeLSTM on the weights
    quantized here, to float32 rounding, and near the float32 model; the report counts it, and
    --keep-float LSTM leaves it in float32 with a note."""
    rng = tl.seeded_rng("quantizer-lstm")
    S, I, H, D = 6, 12, 16, 2
    w = rng.normal(0, 0.3, (D, 4 * H, I)).astype(np.float32)
    r = rng.normal(0, 0.3, (D, 4 * H, H)).astype(np.float32)
    b = rng.normal(0, 0.1, (D, 8 * H)).astype(np.float32)
    x_vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, 1, I])
    y_vi = helper.make_tensor_value_info("y", TensorProto.FLOAT, [S, D, 1, H])
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=H, direction="bidirectional", name="lstm")
    g = helper.make_graph([node], "lstm", [x_vi], [y_vi], [numpy_helper.from_array(a, n) for a, n in ((w, "W"), (r, "R"), (b, "B"))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "lstm.onnx"
    onnx.save(m, path)
    cal = tmp_path / "cal"
    cal.mkdir()
    sets = [rng.normal(0, 1, (S, 1, I)).astype(np.float32) for _ in range(3)]
    for k, a in enumerate(sets):
        np.save(cal / f"{k}.npy", a)
    proc = tl.compile_raw(path, tmp_path / "q.so", extra=["--quantize", "int8", "--calibrate", cal])
    assert proc.returncode == 0 and "1 LSTM on int8 weights" in proc.stderr, proc.stderr
    (wq, ws), (rq, rs) = _int8_rows(w), _int8_rows(r)
    z = numpy_helper.from_array(np.zeros((D, 4 * H), np.int8), "z")
    dq = helper.make_node("DynamicQuantizeLSTM", ["x", "Wq", "Rq", "B", "", "", "", "", "ws", "z", "rs", "z"], ["y"],
                          domain="com.microsoft", hidden_size=H, direction="bidirectional")
    ref = helper.make_model(helper.make_graph([dq], "ref", [x_vi], [y_vi], [
        numpy_helper.from_array(a, n) for a, n in ((wq, "Wq"), (rq, "Rq"), (b, "B"), (ws, "ws"), (rs, "rs"))] + [z]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    ref.ir_version = 8
    for x in sets:
        got = tl.run(tmp_path / "q.so", {"x": x}, tmp_path / "run")["y"]
        want = tl.ort_run(ref, {"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
        flt = tl.ort_run(path, {"x": x})["y"]
        assert np.abs(got - flt).max() <= 0.05 * np.abs(flt).max()
    proc = tl.compile_raw(path, tmp_path / "k.so", extra=["--quantize", "int8", "--calibrate", cal, "--keep-float", "LSTM"])
    assert proc.returncode == 0 and "LSTM 'lstm' (--keep-float)" in proc.stderr and "on int8 weights" not in proc.stderr, proc.stderr


def test_bad_quantize_requests(tmp_path):
    path = cnn(tmp_path / "cnn.onnx", tl.seeded_rng("quantizer-cnn"))
    cal, _ = calibration(tmp_path, n=2)
    out = tmp_path / "m.so"
    cases = [
        (["--quantize", "int8"], ["--calibrate"]),
        (["--calibrate", cal], ["--quantize"]),
        (["--quantize", "int4"], ["--quantize", "int4"]),
        (["--quantize", "int8", "--calibrate", tmp_path / "nope"], ["nope"]),
        (["--quantize", "int8", "--calibrate", cal, "--calibration", "magic"], ["magic"]),
        (["--quantize", "int8", "--calibrate", cal, "--opt-level", "0"], ["fold_qdq"]),
        (["--quantize", "int8", "--calibrate", cal, "--disable-pass", "fold_qdq"], ["fold_qdq"]),
    ]
    for extra, mentions in cases:
        tl.assert_clean_failure(tl.compile_raw(path, out, extra=extra), mentions=mentions, absent=[out], what=str(extra))
    bad = tmp_path / "bad"   # a set of the wrong dtype, then of the wrong shape
    bad.mkdir()
    np.save(bad / "0.npy", np.zeros((1, 16, 12, 12), np.float64))
    tl.assert_clean_failure(tl.compile_raw(path, out, extra=["--quantize", "int8", "--calibrate", bad]),
                            mentions=["0.npy", "float64", "float32"], absent=[out])
    np.save(bad / "0.npy", np.zeros((1, 16, 12, 13), np.float32))
    tl.assert_clean_failure(tl.compile_raw(path, out, extra=["--quantize", "int8", "--calibrate", bad]),
                            mentions=["set"], absent=[out])
    np.save(bad / "0.npy", np.full((1, 16, 12, 12), np.nan, np.float32))   # NaN: no range to quantize with
    tl.assert_clean_failure(tl.compile_raw(path, out, extra=["--quantize", "int8", "--calibrate", bad]),
                            mentions=["NaN or Inf"], absent=[out])
    tl.assert_clean_failure(tl.compile_raw(path, out, extra=["--quantize", "int8", "--calibrate", cal, "--keep-float", "conv9"]),
                            mentions=["--keep-float conv9", "no node"], absent=[out])
    empty = tmp_path / "empty"
    empty.mkdir()
    tl.assert_clean_failure(tl.compile_raw(path, out, extra=["--quantize", "int8", "--calibrate", empty]),
                            mentions=["no input sets"], absent=[out])


@pytest.mark.plain
def test_digits_model_quantized_keeps_top1(tmp_path, monkeypatch):
    """The demo's digits CNN, trained here (2 s), quantized by cuvil.compile(quantize="int8")
    on 100 training images: >= 99% top-1 agreement with float32 on the 360 held-out digits."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("sklearn.datasets")
    cuvil = pytest.importorskip("cuvil")
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    sys.path.insert(0, str(ROOT / "examples" / "digits"))
    try:
        import train as digits_train
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    x, y, test, train = digits_train.load_split()
    model = digits_train.train_model(x, y, train, 15)
    ex = torch.from_numpy(x[test[:1]])
    target = {"target": tl.env_target()} if tl.env_target() else {}
    fm = cuvil.compile(model, ex, **target)
    names = [s.name for s in fm.inputs]
    with pytest.raises(TypeError, match="list of input sets"):   # one batch array is not a list of sets
        cuvil.compile(model, ex, quantize="int8", calibration=x[train[:4]])
    qm = cuvil.compile(model, ex, quantize="int8", calibration=[{names[0]: x[i:i + 1]} for i in train[:100]], **target)
    agree = correct = 0
    for i in test:
        a, b = fm(x[i:i + 1]), qm(x[i:i + 1])
        agree += int(a.argmax() == b.argmax())
        correct += int(b.argmax() == y[i])
    assert agree >= 0.99 * len(test), (agree, correct)
    assert correct >= 0.95 * len(test), (agree, correct)


@pytest.mark.plain   # (a torch export and ONNX Runtime's quantizer: the plain pass only, for CI time)
def test_int4_weights_as_onnx_runtime_quantizes_them(tmp_path, monkeypatch):
    """--quantize int4-weights on an MLP (MatMul + Add) equals ONNX Runtime running the model
    its MatMulNBitsQuantizer (4 bits, block 32, asymmetric) wrote from the same float model:
    the same quantized weights, dequantized inside Cuvil's product (matmul_nbits in the IR);
    and from Python, quantize="int4-weights"."""
    torch = pytest.importorskip("torch")
    cuvil = pytest.importorskip("cuvil")
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    import warnings
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(96, 200), torch.nn.GELU(), torch.nn.Linear(200, 64), torch.nn.Tanh(),
                            torch.nn.Linear(64, 10)).eval()
    x = torch.randn(1, 3, 96)
    path = tmp_path / "mlp.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=17, dynamo=False)
        q = MatMulNBitsQuantizer(onnx.load(str(path)), bits=4, block_size=32, is_symmetric=False)
        q.process()
    qpath = tmp_path / "ortq.onnx"
    q.model.save_model_to_file(str(qpath), False)
    assert sum(n.op_type == "MatMulNBits" for n in onnx.load(str(qpath)).graph.node) == 3
    feeds = {"x": x.numpy()}
    want = tl.ort_run(qpath, feeds)["y"]
    flt = tl.ort_run(path, feeds)["y"]
    assert np.abs(want - flt).max() > 1e-3   # 4 bits change the answer: the comparison can fail
    ir = tl.compile(path, tmp_path / "ir", emit="ir", extra=["--quantize", "int4-weights"]).read_text()
    assert ir.count("= matmul_nbits ") == 3 and "= matmul " not in ir, ir
    proc = tl.compile_raw(path, tmp_path / "q4.so", extra=["--quantize", "int4-weights"])
    assert proc.returncode == 0 and "3 MatMul/Gemm weights in 4 bits" in proc.stderr, proc.stderr
    got = tl.run(tmp_path / "q4.so", feeds, tmp_path / "run")["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    target = {"target": tl.env_target()} if tl.env_target() else {}
    np.testing.assert_allclose(cuvil.compile(str(path), quantize="int4-weights", **target)(x.numpy()), want, rtol=1e-5, atol=1e-5)
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "bad.so", extra=["--quantize", "int4-weights", "--calibrate", tmp_path]),
                            mentions=["int4-weights", "calibration"], absent=[tmp_path / "bad.so"])
