"""Quantized models in every form ONNX Runtime's quantization tool writes, on Cuvil's integer
kernels, against ONNX Runtime's own int8 run of the same file:
- QDQ (quantize_static, int8 per channel and uint8 per tensor): the pass fold_qdq turns each
  DequantizeLinear -> Conv/MatMul/Gemm -> QuantizeLinear into qlinear_conv / qlinear_matmul
  (checked in --emit ir: no float conv or matmul is left);
- QOperator (QLinearConv, QLinearMatMul, com.microsoft QLinearAdd, QGemm, ...);
- dynamic (quantize_dynamic: DynamicQuantizeLinear + ConvInteger / MatMulInteger);
- the ops one at a time (QLinearConv and ConvInteger over groups, strides, padding, per-channel
  weights and each operand type; the com.microsoft QOperator ops; DynamicQuantizeMatMul and
  MatMulIntegerToFloat), and the messages for malformed ones.
Outputs agree within one step of the output's quantization (ONNX Runtime rounds the same
integer sums; a float computed differently may land on the other side of a rounding tie)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cuvil_testlib as tl

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
quant = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

nn = torch.nn


def _export(module, x, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=17, dynamo=False)
    return path


class SmallCNN(nn.Module):
    """Conv-ReLU, a strided conv, a depthwise conv with a residual add, a 1x1 conv, max pool,
    global average pool and a linear head."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pw = nn.Conv2d(32, 48, 1)
        self.fc = nn.Linear(48, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = torch.relu(self.dw(x)) + x
        x = nn.functional.max_pool2d(torch.relu(self.pw(x)), 2)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class SmallMLP(nn.Module):
    """Token-wise layers of a transformer block: Linear, GELU, Linear with a residual,
    LayerNorm, a Linear head."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(32, 64)
        self.l2 = nn.Linear(64, 32)
        self.ln = nn.LayerNorm(32)
        self.head = nn.Linear(32, 16)

    def forward(self, x):
        return self.head(self.ln(self.l2(nn.functional.gelu(self.l1(x))) + x))


def _calib(shape, n=8):
    class Reader(quant.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": np.random.RandomState(i).randn(*shape).astype(np.float32)} for i in range(n)])

        def get_next(self):
            return next(self.it, None)

    return Reader()


def _quantize(f32, out, form, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if form == "dyn_s8":
            quant.quantize_dynamic(str(f32), str(out), weight_type=quant.QuantType.QInt8)
        elif form == "dyn_u8":
            quant.quantize_dynamic(str(f32), str(out), weight_type=quant.QuantType.QUInt8)
        elif form == "dyn_s8_pc":
            quant.quantize_dynamic(str(f32), str(out), weight_type=quant.QuantType.QInt8, per_channel=True)
        elif form == "qdq_s8_pc":
            quant.quantize_static(str(f32), str(out), _calib(shape), quant_format=quant.QuantFormat.QDQ, per_channel=True)
        elif form == "qdq_u8":
            quant.quantize_static(str(f32), str(out), _calib(shape), quant_format=quant.QuantFormat.QDQ,
                                  activation_type=quant.QuantType.QUInt8, weight_type=quant.QuantType.QInt8)
        else:
            quant.quantize_static(str(f32), str(out), _calib(shape), quant_format=quant.QuantFormat.QOperator,
                                  per_channel=True)
    return out


def _output_step(path):
    """The scale of the DequantizeLinear that writes output y (None: y is not one's output)."""
    m = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == "y":
            return float(inits[n.input[1]].reshape(-1)[0])
    return None


def _check(path, x, tmp_path, step=None, rtol=1e-4):
    want = tl.ort_run(path, {"x": x})["y"]
    got = tl.compile_and_run(path, {"x": x}, tmp_path)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    if step is not None:
        err = np.abs(got.astype(np.float64) - want).max()
        assert err <= step * 1.001, f"max error {err}, one output step is {step}"
        # most outputs agree exactly: the integer sums are the same
        assert np.mean(got == want) > 0.95, np.mean(got == want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    return got


FORMS = ["qdq_s8_pc", "qdq_u8", "qop_pc", "dyn_s8", "dyn_u8"]


@pytest.mark.plain   # (torch exports and ONNX Runtime's quantizer: the plain pass only, for CI time)
@pytest.mark.parametrize("form", FORMS)
def test_cnn_quantized(tmp_path, form):
    torch.manual_seed(0)
    f32 = _export(SmallCNN().eval(), torch.randn(2, 3, 16, 16), tmp_path / "f32.onnx")
    q = _quantize(f32, tmp_path / f"{form}.onnx", form, (2, 3, 16, 16))
    x = np.random.RandomState(99).randn(2, 3, 16, 16).astype(np.float32)
    _check(q, x, tmp_path / "run", step=_output_step(q))
    ir = tl.compile(q, tmp_path / "ir", emit="ir").read_text()
    # every conv and the head on the integer kernels, none left in float
    assert " = conv " not in ir and " = gemm " not in ir and " = matmul " not in ir, ir
    # (quantize_dynamic's ConvInteger -> Cast -> Mul: one qlinear_conv with the scale in its epilogue)
    assert ir.count(" = qlinear_conv ") == 4 and " = conv_integer " not in ir, ir


@pytest.mark.plain   # (torch exports and ONNX Runtime's quantizer: the plain pass only, for CI time)
@pytest.mark.parametrize("form", ["qdq_s8_pc", "qdq_u8", "qop_pc", "dyn_u8"])
def test_cnn_quantized_symbolic(tmp_path, form):
    """The CNN with symbolic batch, height and width (an OCR model's variable width): its convs
    and its residual add on the integer kernels at any size of one build (ConvInteger, and
    QLinearConv and QLinearAdd as ONNX Runtime writes them or from the QDQ fold; the depthwise
    conv of 32 channels on its 16-channel kernel), against ONNX Runtime at the ranges' ends and
    between; a size outside them is refused. ONNX Runtime's QOperator form pools uint8 values,
    which Cuvil's MaxPool takes at fixed dims only: refused by name."""
    import cuvil
    torch.manual_seed(0)
    f32 = tmp_path / "f32.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(SmallCNN().eval(), (torch.randn(2, 3, 16, 16),), str(f32), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False, dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}, "y": {0: "n"}})
    q = _quantize(f32, tmp_path / f"{form}.onnx", form, (2, 3, 16, 16))
    dims = {"n": "1:3", "h": "8:40", "w": "8:72"}
    if form == "qop_pc":
        proc = tl.compile_raw(q, tmp_path / "q.so", dims=dims)
        assert proc.returncode != 0 and "MaxPool '/MaxPool'" in proc.stderr and "symbolic dims" in proc.stderr, proc.stderr
        return
    ir = tl.compile(q, tmp_path / "ir", emit="ir", dims=dims).read_text()
    assert " = conv " not in ir and ir.count(" = qlinear_conv ") == 4, ir
    assert form.startswith("dyn") or " = qlinear_add " in ir, ir
    model = cuvil.load(tl.compile(q, tmp_path / "so", dims=dims))
    step = _output_step(q)
    rng = np.random.default_rng(3)
    for shape in [(1, 3, 8, 8), (3, 3, 40, 72), (2, 3, 17, 29), (1, 3, 40, 9)]:
        x = rng.standard_normal(shape).astype(np.float32)
        want, got = tl.ort_run(q, {"x": x})["y"], np.asarray(model(x))
        assert got.shape == want.shape, (shape, got.shape, want.shape)
        if step is None:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        else:   # (as _check: one output step at most, most outputs exact)
            assert np.abs(got.astype(np.float64) - want).max() <= step * 1.001, shape
            assert np.mean(got == want) > 0.95, (shape, np.mean(got == want))
    with pytest.raises(ValueError, match="dim 3"):
        model(np.zeros((1, 3, 16, 80), np.float32))


@pytest.mark.plain   # (torch exports and ONNX Runtime's quantizer: the plain pass only, for CI time)
@pytest.mark.parametrize("form", FORMS + ["dyn_s8_pc"])
def test_mlp_quantized(tmp_path, form):
    torch.manual_seed(1)
    f32 = _export(SmallMLP().eval(), torch.randn(2, 8, 32), tmp_path / "f32.onnx")
    q = _quantize(f32, tmp_path / f"{form}.onnx", form, (2, 8, 32))
    x = np.random.RandomState(7).randn(2, 8, 32).astype(np.float32)
    _check(q, x, tmp_path / "run", step=_output_step(q))
    ir = tl.compile(q, tmp_path / "ir", emit="ir").read_text()
    assert " = matmul " not in ir and " = gemm " not in ir, ir
    if form.startswith("dyn"):   # MatMulInteger -> Cast -> Mul (scales) -> Add (bias): one integer GEMM, its float epilogue
        assert " = matmul_integer " not in ir and " = cast " not in ir, ir
        assert ir.count("# fused Cast+Mul+Add") == 3, ir


def _model(tmp_path, nodes, inputs, outputs, inits, ms=False, opset=17):
    g = helper.make_graph(nodes, "q", inputs, [helper.make_tensor_value_info(o, t, None) for o, t in outputs], inits)
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def _q(rng, dtype, shape):
    lo, hi = (0, 256) if dtype == np.uint8 else (-128, 128)
    return rng.integers(lo, hi, size=shape).astype(dtype)


T8 = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}

CONVS = [  # C, M, H, W, k, stride, pad, group, x type, w type, per-channel
    (3, 8, 9, 11, 3, 1, 1, 1, np.uint8, np.int8, True),
    (16, 24, 7, 7, 1, 1, 0, 1, np.uint8, np.uint8, False),
    (8, 8, 10, 9, 3, 2, 1, 8, np.uint8, np.int8, True),
    (12, 6, 8, 8, 3, 1, 2, 3, np.int8, np.int8, True),
    (64, 40, 14, 14, 3, 1, 1, 1, np.uint8, np.int8, True),
]


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_qlinear_conv(tmp_path, case):
    C, M, H, W, k, s, p, g, xt, wt, pc = CONVS[case]
    rng = np.random.default_rng(case)
    x = _q(rng, xt, (2, C, H, W))
    w = _q(rng, wt, (M, C // g, k, k))
    nw = M if pc else 1
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"), numpy_helper.from_array(_q(rng, xt, ()), "xz"),
             numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.uniform(0.002, 0.02, nw).astype(np.float32).reshape((nw,) if pc else ()), "ws"),
             numpy_helper.from_array(np.zeros((nw,) if pc else (), wt), "wz"),
             numpy_helper.from_array(np.array(0.5, np.float32), "ys"), numpy_helper.from_array(_q(rng, xt, ()), "yz"),
             numpy_helper.from_array(rng.integers(-3000, 3000, M).astype(np.int32), "b")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], kernel_shape=[k, k],
                            strides=[s, s], pads=[p] * 4, group=g)
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", T8[xt], x.shape)], [("y", T8[xt])], inits)
    want = tl.ort_run(path, {"x": x})["y"]
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.abs(got.astype(np.int32) - want).max() <= 1 and np.mean(got == want) > 0.99


@pytest.mark.parametrize("case", [0, 1, 2])
def test_conv_integer(tmp_path, case):
    C, M, H, W, k, s, p, g, xt, wt, pc = CONVS[case]
    rng = np.random.default_rng(10 + case)
    xt, wt = np.uint8, np.uint8 if case == 1 else np.int8
    x = _q(rng, xt, (1, C, H, W))
    inits = [numpy_helper.from_array(_q(rng, wt, (M, C // g, k, k)), "w"),
             numpy_helper.from_array(np.array(rng.integers(0, 255), np.uint8), "xz")]
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=g)
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)], [("y", TensorProto.INT32)],
                  inits)
    # the reference: a naive loop over the definition (ONNX Runtime's ConvInteger takes uint8 only)
    w = numpy_helper.to_array(inits[0]).astype(np.int64)
    xz = int(numpy_helper.to_array(inits[1]))
    xp = np.pad(x.astype(np.int64) - xz, ((0, 0), (0, 0), (p, p), (p, p)))
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    want = np.zeros((1, M, OH, OW), np.int64)
    for m in range(M):
        gi = m // (M // g)
        for i in range(OH):
            for j in range(OW):
                want[0, m, i, j] = (xp[0, gi * (C // g):(gi + 1) * (C // g), i * s:i * s + k, j * s:j * s + k] * w[m]).sum()
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bias", [False, True])
def test_conv_integer_with_scale_folds(tmp_path, bias):
    """quantize_dynamic's convolution: ConvInteger [-> Add(Reshape(int32 bias, run-time values))] ->
    Cast -> Mul(scale, run-time) becomes one qlinear_conv with that epilogue (older exports, as
    ddddocr's OCR model, add the bias in int32), against ONNX Runtime's unfused nodes."""
    rng = np.random.default_rng(21)
    M = 12
    x = _q(rng, np.uint8, (2, 6, 9, 10))
    w = _q(rng, np.int8, (M, 6, 3, 3))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(7, np.uint8), "xz"),
             numpy_helper.from_array(np.array([1, M, 1, 1], np.int64), "bshape")]
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz"], ["acc"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 1],
                              name="ci")]
    ins = [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape), helper.make_tensor_value_info("s", TensorProto.FLOAT, [])]
    feeds = {"x": x, "s": np.array(0.0037, np.float32)}
    if bias:   # a run-time int32 bias, as the export computes it (float bias / scales, floored)
        nodes += [helper.make_node("Reshape", ["b", "bshape"], ["b4"]), helper.make_node("Add", ["acc", "b4"], ["acc2"])]
        ins.append(helper.make_tensor_value_info("b", TensorProto.INT32, [M]))
        feeds["b"] = rng.integers(-20000, 20000, M).astype(np.int32)
    nodes += [helper.make_node("Cast", ["acc2" if bias else "acc"], ["f"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["f", "s"], ["y"])]
    path = _model(tmp_path, nodes, ins, [("y", TensorProto.FLOAT)], inits)
    ir = tl.compile(path, tmp_path / "ir", emit="ir").read_text()
    assert " = conv_integer " not in ir and ir.count(" = qlinear_conv ") == 1 and " = cast " not in ir, ir
    assert " = add " not in ir if bias else "fused Cast+Mul" in ir, ir
    want = tl.ort_run(path, feeds)["y"]
    got = tl.compile_and_run(path, feeds, tmp_path / "run")["y"]
    np.testing.assert_array_equal(got, want)


def _qop_case(name, rng):
    """One com.microsoft QOperator node: (nodes, inputs, feeds, output type, inits)."""
    x8 = _q(rng, np.uint8, (2, 4, 6, 6))
    sc = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    zp = lambda n, v: numpy_helper.from_array(np.array(v, np.uint8), n)  # noqa: E731
    # scales as a calibration gives them (0.05, 0.03 and 0.04 would put many sums exactly on
    # rounding ties, which ONNX Runtime's QLinearAdd, computing in y's units, breaks otherwise)
    base = [sc("xs", 0.0517), zp("xz", 120), sc("ys", 0.0419), zp("yz", 100)]
    vi = [helper.make_tensor_value_info("x", TensorProto.UINT8, x8.shape)]
    feeds = {"x": x8}
    ms = "com.microsoft"
    if name in ("QLinearAdd", "QLinearMul"):
        b8 = _q(rng, np.uint8, (1, 4, 1, 6))   # broadcast
        node = helper.make_node(name, ["x", "xs", "xz", "b", "bs", "bz", "ys", "yz"], ["y"], domain=ms)
        return [node], vi + [helper.make_tensor_value_info("b", TensorProto.UINT8, b8.shape)], {"x": x8, "b": b8}, \
            TensorProto.UINT8, base + [sc("bs", 0.0311), zp("bz", 128)]
    if name == "QLinearSigmoid":
        return [helper.make_node(name, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms)], vi, feeds, TensorProto.UINT8, \
            [sc("xs", 0.05), zp("xz", 120), sc("ys", 1 / 255), zp("yz", 0)]
    if name == "QLinearLeakyRelu":
        return [helper.make_node(name, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms, alpha=0.2)], vi, feeds, \
            TensorProto.UINT8, base
    if name == "QLinearAveragePool":
        return [helper.make_node(name, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms, kernel_shape=[3, 3], strides=[2, 2],
                                 pads=[1, 1, 1, 1], count_include_pad=1)], vi, feeds, TensorProto.UINT8, base
    if name == "QLinearGlobalAveragePool":
        return [helper.make_node(name, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=ms, channels_last=0)], vi, feeds, \
            TensorProto.UINT8, base
    if name == "QLinearConcat":
        b8 = _q(rng, np.uint8, (2, 3, 6, 6))
        node = helper.make_node(name, ["ys", "yz", "x", "xs", "xz", "b", "bs", "bz"], ["y"], domain=ms, axis=1)
        return [node], vi + [helper.make_tensor_value_info("b", TensorProto.UINT8, b8.shape)], {"x": x8, "b": b8}, \
            TensorProto.UINT8, base + [sc("bs", 0.0311), zp("bz", 128)]
    a = _q(rng, np.uint8, (5, 24))
    va = [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)]
    w = numpy_helper.from_array(_q(rng, np.int8, (12, 24)), "w")   # [N, K]: transB
    ws = numpy_helper.from_array(rng.uniform(0.01, 0.03, 12).astype(np.float32), "ws")
    wz = numpy_helper.from_array(np.zeros(12, np.int8), "wz")
    bias = numpy_helper.from_array(rng.integers(-500, 500, 12).astype(np.int32), "bias")
    if name == "QGemm":   # requantized
        node = helper.make_node("QGemm", ["a", "xs", "xz", "w", "ws", "wz", "bias", "ys", "yz"], ["y"], domain=ms, transB=1)
        return [node], va, {"a": a}, TensorProto.UINT8, base + [w, ws, wz, bias]
    if name == "QGemmFloat":
        node = helper.make_node("QGemm", ["a", "xs", "xz", "w", "ws", "wz", "bias"], ["y"], domain=ms, transB=1)
        return [node], va, {"a": a}, TensorProto.FLOAT, base + [w, ws, wz, bias]
    af = rng.standard_normal((3, 5, 24)).astype(np.float32)
    vf = [helper.make_tensor_value_info("a", TensorProto.FLOAT, af.shape)]
    wt = numpy_helper.from_array(_q(rng, np.int8, (24, 12)), "w")   # [K, N]
    fb = numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "fb")
    if name == "DynamicQuantizeMatMul":
        node = helper.make_node(name, ["a", "w", "ws", "wz", "fb"], ["y"], domain=ms)
        return [node], vf, {"a": af}, TensorProto.FLOAT, [wt, ws, wz, fb]
    assert name == "MatMulIntegerToFloat"
    node = helper.make_node(name, ["a", "w", "xs", "ws", "xz", "wz", "fb"], ["y"], domain=ms)
    a3 = _q(rng, np.uint8, (3, 5, 24))
    return [node], [helper.make_tensor_value_info("a", TensorProto.UINT8, a3.shape)], {"a": a3}, TensorProto.FLOAT, \
        [sc("xs", 0.05), zp("xz", 120), wt, ws, wz, fb]


QOPS = ["QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool",
        "QLinearConcat", "QGemm", "QGemmFloat", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"]


@pytest.mark.parametrize("name", QOPS)
def test_ms_qoperator(tmp_path, name):
    rng = np.random.default_rng(len(name))
    nodes, vis, feeds, yt, inits = _qop_case(name, rng)
    path = _model(tmp_path, nodes, vis, [("y", yt)], inits, ms=True)
    want = tl.ort_run(path, feeds)["y"]
    got = tl.compile_and_run(path, feeds, tmp_path / "run")["y"]
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if yt == TensorProto.FLOAT:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    else:
        assert np.abs(got.astype(np.int32) - want).max() <= 1 and np.mean(got == want) > 0.97
    if name in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat"):   # the bias in the GEMM's epilogue, no Add after it
        ir = tl.compile(path, tmp_path / "ir", emit="ir").read_text()
        assert " = add " not in ir and ir.count(" = qlinear_matmul ") == 1 and ", _, _, _, %" in ir, ir


def test_qlinear_conv_refuses_bad_params(tmp_path):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"), numpy_helper.from_array(np.array(3, np.uint8), "xz"),
             numpy_helper.from_array(_q(rng, np.int8, (8, 3, 3, 3)), "w"),
             numpy_helper.from_array(np.full(5, 0.01, np.float32), "ws"),   # 5 scales for 8 channels
             numpy_helper.from_array(np.zeros(5, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.5, np.float32), "ys"), numpy_helper.from_array(np.array(0, np.uint8), "yz")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qc")
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, 3, 8, 8))],
                  [("y", TensorProto.UINT8)], inits)
    proc = tl.compile_raw(path, tmp_path / "m.so")
    tl.assert_clean_failure(proc, mentions=["qc", "w_scale", "one per output channel"])
    # an x zero point of another type than x
    inits[1] = numpy_helper.from_array(np.array(3, np.int8), "xz")
    inits[3] = numpy_helper.from_array(np.full(8, 0.01, np.float32), "ws")
    inits[4] = numpy_helper.from_array(np.zeros(8, np.int8), "wz")
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, 3, 8, 8))],
                  [("y", TensorProto.UINT8)], inits)
    proc = tl.compile_raw(path, tmp_path / "m.so")
    tl.assert_clean_failure(proc, mentions=["qc", "x_zero_point", "int8"])


class TinyLM(nn.Module):
    """A decoder-ish stack of Linear layers (what MatMulNBits quantizes in a language model)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 64)
        self.l1 = nn.Linear(64, 128)
        self.l2 = nn.Linear(128, 64, bias=False)
        self.head = nn.Linear(64, 50)

    def forward(self, ids):
        h = self.emb(ids)
        h = h + self.l2(nn.functional.silu(self.l1(h)))
        return self.head(h)


@pytest.mark.plain   # (torch exports and ONNX Runtime's quantizer: the plain pass only, for CI time)
@pytest.mark.parametrize("block,sym,bits", [(32, False, 4), (128, True, 4), (16, False, 4), (64, True, 8)])
def test_matmul_nbits_quantizer(tmp_path, block, sym, bits):
    """onnxruntime's MatMulNBitsQuantizer (4-bit, and 8-bit in newer versions) on a tiny
    language-model stack: the logits and the greedy tokens against ONNX Runtime's run."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    torch.manual_seed(3)
    ids = torch.randint(0, 50, (2, 12))
    path = tmp_path / "f32.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TinyLM().eval(), (ids,), str(path), input_names=["ids"], output_names=["y"], opset_version=17,
                          dynamo=False)
        q = MatMulNBitsQuantizer(onnx.load(str(path)), bits=bits, block_size=block, is_symmetric=sym)
        q.process()
    qpath = tmp_path / "q.onnx"
    q.model.save_model_to_file(str(qpath), False)
    assert any(n.op_type == "MatMulNBits" for n in onnx.load(str(qpath)).graph.node)
    feed = {"ids": ids.numpy()}
    want = tl.ort_run(qpath, feed)["y"]
    got = tl.compile_and_run(qpath, feed, tmp_path / "run")["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert (got.argmax(-1) == want.argmax(-1)).all()


@pytest.mark.parametrize("bits,zp", [(4, "packed"), (2, None), (8, "float")])
def test_matmul_nbits_node(tmp_path, bits, zp):
    """One MatMulNBits node written by hand: K not a multiple of the block, zero points packed,
    absent (2^(bits-1)) or float, a bias; against ONNX Runtime."""
    rng = np.random.default_rng(bits)
    K, N, bs = 40, 12, 16
    nb = (K + bs - 1) // bs
    B = rng.integers(0, 256, (N, nb, bs * bits // 8)).astype(np.uint8)
    scales = rng.uniform(0.01, 0.1, N * nb).astype(np.float32)
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scales, "s"),
             numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "bias")]
    ins = ["a", "B", "s"]
    if zp == "packed":
        inits.append(numpy_helper.from_array(rng.integers(0, 256, N * ((nb * bits + 7) // 8)).astype(np.uint8), "z"))
        ins.append("z")
    elif zp == "float":
        inits.append(numpy_helper.from_array(rng.uniform(0, 2 ** bits - 1, N * nb).astype(np.float32), "z"))
        ins.append("z")
    else:
        ins.append("")
    ins += ["", "bias"]
    node = helper.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=K, N=N, bits=bits, block_size=bs)
    a = rng.standard_normal((3, K)).astype(np.float32)
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape)],
                  [("y", TensorProto.FLOAT)], inits, ms=True)
    # the definition, written out here: value j of a block from its byte's low bits up
    per = 8 // bits
    W = np.zeros((K, N), np.float64)
    for n in range(N):
        for k in range(K):
            b, j = divmod(k, bs)
            v = (int(B[n, b, j // per]) >> ((j % per) * bits)) & (2 ** bits - 1)
            if zp == "packed":
                z = (int(inits[3].raw_data[n * ((nb * bits + 7) // 8) + b * bits // 8]) >> (b * bits % 8)) & (2 ** bits - 1)
            elif zp == "float":
                z = float(numpy_helper.to_array(inits[3])[n * nb + b])
            else:
                z = 2 ** (bits - 1)
            W[k, n] = (v - z) * float(scales[n * nb + b])
    want = a.astype(np.float64) @ W + numpy_helper.to_array(inits[2])
    got = tl.compile_and_run(path, {"a": a}, tmp_path / "run")["y"]
    ir = tl.compile(path, tmp_path / "ir", emit="ir").read_text()
    assert ("matmul_nbits" in ir) == (bits == 4), ir   # 4 bits: dequantized inside the product (q4gemm.c)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    try:   # and ONNX Runtime, where its build runs this form, agrees with that reading
        ort = tl.ort_run(path, {"a": a})["y"]
    except Exception:   # noqa: BLE001 (2- and 8-bit forms arrived in later ONNX Runtime versions)
        return
    np.testing.assert_allclose(ort, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _qdq_conv(tmp_path, *, q_zp=True, q_outdt=None, bias=None, ys=0.05, act=None):
    """DQ(x) -> Conv (DQ'd int8 weights, [bias]) -> [Relu] -> Q, opset 21."""
    rng = np.random.RandomState(1)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"), numpy_helper.from_array(np.array(128, np.uint8), "xz"),
             numpy_helper.from_array(rng.randint(-50, 50, (4, 3, 3, 3)).astype(np.int8), "wq"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws"), numpy_helper.from_array(np.array(0, np.int8), "wz"),
             numpy_helper.from_array(np.array(ys, np.float32), "ys")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"])]
    cin = ["xf", "wf"]
    if bias is not None:
        inits.append(numpy_helper.from_array(np.asarray(bias, np.float32), "b"))
        cin.append("b")
    nodes.append(helper.make_node("Conv", cin, ["c"], pads=[1, 1, 1, 1]))
    last = "c"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        last = "r"
    qin = [last, "ys"]
    if q_zp:
        inits.append(numpy_helper.from_array(np.array(3, np.int8 if q_outdt == TensorProto.INT8 else np.uint8), "yz"))
        qin.append("yz")
    qa = {} if q_outdt is None else {"output_dtype": q_outdt}
    nodes.append(helper.make_node("QuantizeLinear", qin, ["y"], **qa))
    return _model(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, 3, 8, 8))],
                  [("y", q_outdt or TensorProto.UINT8)], inits, opset=21)


@pytest.mark.parametrize("dtype,axis,opset", [(np.uint8, -1, 13), (np.int8, 1, 11), (np.uint8, 0, 13)])
def test_qlinear_softmax(tmp_path, dtype, axis, opset):
    """com.microsoft QLinearSoftmax (what quantize_static's QOperator form writes for a Softmax;
    PP-OCR's classifier ends in one): dequantized, the softmax of its opset (before 13: over
    the dims from axis on, as one), quantized; against ONNX Runtime, within one step."""
    rng = np.random.default_rng(opset + axis)
    x = _q(rng, dtype, (2, 3, 5))
    t = T8[dtype]
    zx, zy = (np.array(120, np.uint8), np.array(0, np.uint8)) if dtype == np.uint8 else (np.array(-5, np.int8), np.array(-128, np.int8))
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"), numpy_helper.from_array(zx, "xz"),
             numpy_helper.from_array(np.array(1 / 256, np.float32), "ys"), numpy_helper.from_array(zy, "yz")]
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft", axis=axis, opset=opset)
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", t, x.shape)], [("y", t)], inits, ms=True)
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"]
    want = tl.ort_run(path, {"x": x})["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1, (got.ravel()[:10], want.ravel()[:10])


def test_qdq_weights_quantized_in_the_model_fold(tmp_path):
    """Float weights from a Constant node through QuantizeLinear -> DequantizeLinear (what ONNX
    Runtime's quantize_static writes for a Paddle export, whose weights are Constant nodes): the
    QuantizeLinear of constants folds to int8 weights and the conv runs on the integer kernel,
    like ONNX Runtime's own int8 run of the file."""
    rng = np.random.RandomState(3)
    w = rng.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"), numpy_helper.from_array(np.array(128, np.uint8), "xz"),
             numpy_helper.from_array(np.array(0.004, np.float32), "ws"), numpy_helper.from_array(np.array(-10, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys"), numpy_helper.from_array(np.array(3, np.uint8), "yz")]
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w, "wv")),
             helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("QuantizeLinear", ["w", "ws", "wz"], ["wq"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, 3, 8, 8))],
                  [("y", TensorProto.UINT8)], inits, opset=13)
    ir = tl.compile(path, tmp_path / "ir", emit="ir").read_text()
    assert "qlinear_conv" in ir and "= quantize " not in ir and "= conv " not in ir, ir
    x = rng.randint(0, 256, (1, 3, 8, 8)).astype(np.uint8)
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"]
    want = tl.ort_run(path, {"x": x})["y"]
    assert np.abs(got.astype(np.int32) - want).max() <= 1


DYN_CASES = {   # case: (the scale's shape, the bias' shape or None, a second reader of the Cast, folds)
    "scalar_scale_bias": ((), (12,), False, True),
    "column_scales": ((12,), None, False, True),
    "column_scales_scalar_bias": ((1, 12), (), False, True),
    "row_scales": ((5, 1), None, False, False),       # one per row: not the epilogue's
    "cast_read_twice": ((), (12,), True, False),       # the int32 sum wanted as float elsewhere
    "scale_rank3": ((1, 1, 12), None, False, False),   # per column but of rank 3: stays as it is, and compiles
}


@pytest.mark.parametrize("case", list(DYN_CASES))
def test_dynamic_fold_edges(tmp_path, case):
    """MatMulInteger -> Cast -> Mul [-> Add] folds into the integer GEMM's float epilogue only where
    the scale and bias are one value or one per column and nothing else reads the steps between;
    every case against ONNX Runtime (the unfolded float semantics) and the IR."""
    sshape, bshape, twice, folds = DYN_CASES[case]
    rng = np.random.default_rng(3)
    a = _q(rng, np.uint8, (2, 5, 24))
    inits = [numpy_helper.from_array(_q(rng, np.int8, (24, 12)), "w"), numpy_helper.from_array(np.array(7, np.uint8), "az"),
             numpy_helper.from_array(rng.uniform(1e-4, 1e-3, sshape).astype(np.float32), "s")]
    nodes = [helper.make_node("MatMulInteger", ["a", "w", "az"], ["acc"]), helper.make_node("Cast", ["acc"], ["f"], to=1),
             helper.make_node("Mul", ["f", "s"], ["m"])]
    outs, last = [], "m"
    if bshape is not None:
        inits.append(numpy_helper.from_array(rng.standard_normal(bshape).astype(np.float32), "b"))
        nodes.append(helper.make_node("Add", ["b", "m"], ["y"]))
        last = "y"
    outs.append((last, TensorProto.FLOAT))
    if twice:
        nodes.append(helper.make_node("Neg", ["f"], ["g"]))
        outs.append(("g", TensorProto.FLOAT))
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)], outs, inits)
    want = tl.ort_run(path, {"a": a})
    got = tl.compile_and_run(path, {"a": a}, tmp_path / "run")
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6 * np.abs(want[k]).max())
    ir = tl.compile(path, tmp_path / "ir", emit="ir").read_text()
    assert (" = qlinear_matmul " in ir and " = matmul_integer " not in ir) == folds, ir


def test_integer_matmul_weights_stored_once(tmp_path):
    """MatMulInteger's constant weights go into the library packed, once: the raw copy is not
    kept beside them (BERT-base int8's library was 195 MB for 85 MB of int8 weights). Two
    models that differ only in a 1024 x 1024 int8 weight differ in size by about 1 MB."""
    rng = np.random.default_rng(8)
    sizes = []
    for n in (16, 1024):
        w = numpy_helper.from_array(_q(rng, np.int8, (1024, n)), "w")
        node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
        d = tmp_path / str(n)
        d.mkdir()
        path = _model(d, [node], [helper.make_tensor_value_info("a", TensorProto.UINT8, (4, 1024))], [("y", TensorProto.INT32)],
                      [w])
        sizes.append(tl.compile(path, tmp_path / f"so{n}").stat().st_size)
    grew = sizes[1] - sizes[0]
    assert 1024 * 1008 <= grew < 1.3 * 1024 * 1024, sizes


@pytest.mark.parametrize("btype", [np.int8, np.uint8])
@pytest.mark.parametrize("spikes", [12, 400])
def test_integer_matmul_pair_split(tmp_path, btype, spikes):
    """For x86_64-avx2 a MatMulInteger's constant B is packed pair-split where few pairs need it
    (vpmaddubsw's int16 pair sums, exact only on pairs whose products cannot leave int16; the
    rest a list of corrections): B mostly small with pairs of 127 / -128 that would saturate
    (12: split, each corrected; 400: more than the split takes, the 16-bit kernel), A 255 where
    they meet, rows past a microkernel's 6, a zero point on each side, against an exact numpy
    product."""
    if not tl.host_runs("x86_64-avx2"):
        pytest.skip("this machine does not run x86_64-avx2 code")
    rng = np.random.default_rng(5)
    M, K, N = 37, 301, 70
    b = rng.integers(-40, 41, size=(K, N))
    a = rng.integers(0, 256, size=(M, K))
    for i in range(spikes):
        k, n = 2 * rng.integers(0, K // 2), rng.integers(0, N)
        b[k, n] = b[k + 1, n] = 127 if i % 2 else -128
        a[rng.integers(0, M), k:k + 2] = 255
    a[:, K - 1] = 255
    if btype == np.uint8:
        b = b + 128
    a, b = a.astype(np.uint8), b.astype(btype)
    az, bz = np.uint8(3), btype(1)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(az), "az"), numpy_helper.from_array(np.array(bz), "bz")]
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)], [("y", TensorProto.INT32)],
                  inits)
    got = tl.compile_and_run(path, {"a": a}, tmp_path / "run", target="x86_64-avx2")["y"]
    want = (a.astype(np.int64) - int(az)) @ (b.astype(np.int64) - int(bz))
    np.testing.assert_array_equal(got, want)
    # the packed weights in the library: split where the pairs needing a correction (counted
    # here) are at most 1 in 256, their count in the header (int64 K, N, type, 1 byte a value,
    # split, count)
    bs = b.astype(np.int16) - (128 if btype == np.uint8 else 0)
    p, q = bs[0:K - 1:2], bs[1:K:2]
    need = int(((np.maximum(p, 0) + np.maximum(q, 0) > 128) | (np.minimum(p, 0) + np.minimum(q, 0) < -128)).sum())
    split = need <= N * ((K + 1) // 2) // 256
    assert split == (spikes == 12), need
    blob = (tl.compile(path, tmp_path / "c", emit="c", target="x86_64-avx2") / "weights.bin").read_bytes()
    w = np.frombuffer(blob[:len(blob) // 8 * 8], np.int64)
    hits = [i for i in range(len(w) - 6) if w[i] == K and w[i + 1] == N and w[i + 3] == 1]
    assert len(hits) == 1, hits
    assert list(w[hits[0] + 4:hits[0] + 6]) == ([1, need] if split else [0, 0])


MAXPOOL8 = [  # (input shape, attributes)
    ((1, 4, 16, 16), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),   # ResNet's stem
    ((2, 3, 9, 10), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((1, 3, 10, 11), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 3, 30, 31), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dilations=[2, 2], ceil_mode=1)),
    ((1, 2, 7, 8), dict(kernel_shape=[3, 2], strides=[1, 3], pads=[0, 1, 2, 0])),
    ((1, 2, 3, 2100), dict(kernel_shape=[2, 3], strides=[1, 2], pads=[1, 1, 1, 1])),   # wider than the row buffer
]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("case", range(len(MAXPOOL8)))
def test_maxpool_8bit(tmp_path, dtype, case):
    """MaxPool of uint8 / int8 (a QOperator model's, between QLinearConvs) against ONNX Runtime,
    exactly: pads, ceil_mode, dilations, asymmetric windows, the row-wise kernel and the general
    one past its buffer."""
    shape, attrs = MAXPOOL8[case]
    rng = np.random.default_rng(case)
    x = _q(rng, dtype, shape)
    t = T8[dtype]
    path = _model(tmp_path, [helper.make_node("MaxPool", ["x"], ["y"], **attrs)], [helper.make_tensor_value_info("x", t, shape)],
                  [("y", t)], [], opset=12)
    np.testing.assert_array_equal(tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"], tl.ort_run(path, {"x": x})["y"])


def _ort_float(path, feeds):
    """ONNX Runtime without its graph optimisations: the QDQ model's float semantics."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


@pytest.mark.parametrize("case", ["int8_output_dtype", "negative_scale_relu", "huge_bias", "plain"])
def test_qdq_fold_edges(tmp_path, case):
    """What the fold must leave alone or take exactly: a Q typed by output_dtype without a zero
    point, a Relu before a Q of negative scale (the clamp would flip), a bias that could take the
    int32 sum out of range; each against the float semantics (ONNX Runtime unoptimised)."""
    unit = 0.02 * 0.01
    kw = {"int8_output_dtype": dict(q_zp=False, q_outdt=TensorProto.INT8),
          "negative_scale_relu": dict(ys=-0.05, act="relu"),
          "huge_bias": dict(bias=[2147483000 * unit, -2147483000 * unit, 1.0, 2147480000 * unit]),
          "plain": dict(act="relu")}[case]
    path = _qdq_conv(tmp_path, **kw)
    x = np.random.RandomState(1).randint(0, 256, (1, 3, 8, 8)).astype(np.uint8)
    want = _ort_float(path, {"x": x})
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.abs(got.astype(np.int32) - want).max() <= 1, (got.ravel()[:8], want.ravel()[:8])


class TwoLSTM(nn.Module):
    def __init__(self, bi):
        super().__init__()
        self.lstm = nn.LSTM(12, 16, num_layers=2, bidirectional=bi, batch_first=True)
        self.fc = nn.Linear(32 if bi else 16, 5)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


def _lstm_dequantized(m):
    """m with each com.microsoft DynamicQuantizeLSTM replaced by an ONNX LSTM on its weights
    dequantized here ((q - zp) * scale, W [D, I, 4H] transposed back to [D, 4H, I]): the float
    LSTM the 8-bit one approximates, computed without Cuvil."""
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = onnx.ModelProto()
    out.CopyFrom(m)
    for n in out.graph.node:
        if n.op_type != "DynamicQuantizeLSTM":
            continue
        ins = list(n.input) + [""] * (12 - len(n.input))
        new = []
        for wi, si, zi in ((1, 8, 9), (2, 10, 11)):
            q, s = inits[ins[wi]].astype(np.float32), inits[ins[si]].astype(np.float32)
            z = inits[ins[zi]].astype(np.float32) if ins[zi] else np.zeros_like(s)
            D, G = q.shape[0], q.shape[2]
            s, z = (s.reshape(D, 1, 1), z.reshape(D, 1, 1)) if s.size == D else (s.reshape(D, 1, G), z.reshape(D, 1, G))
            w = ((q - z) * s).transpose(0, 2, 1).astype(np.float32)
            name = ins[wi] + "_float"
            out.graph.initializer.append(numpy_helper.from_array(w, name))
            new.append(name)
        del n.input[:]
        n.input.extend([ins[0], new[0], new[1]] + ins[3:8])
        while n.input and n.input[-1] == "":
            n.input.pop()
        n.op_type, n.domain = "LSTM", ""
    return out


@pytest.mark.plain   # (a torch export and ONNX Runtime's quantizer)
@pytest.mark.parametrize("case", ["forward_tensor", "bidirectional_channel", "bidirectional_channel_u8", "forward_batch1"])
def test_dynamic_quantize_lstm(tmp_path, case):
    """quantize_dynamic writes an LSTM as com.microsoft DynamicQuantizeLSTM (int8 W [D, I, 4H] and
    R, scales per direction or per gate row). Cuvil runs it on the integer GEMM, X and h
    quantized as ONNX Runtime's kernel quantizes them: against ONNX Runtime's own int8 run on
    one thread (which quantizes h of every batch row together, as Cuvil does), to float32
    rounding; and near the float LSTM on the dequantized weights. _u8: the weights as uint8 with
    the zero points moved by 128 (the same values)."""
    torch.manual_seed(0)
    bi, pc = case.startswith("bidirectional"), case.startswith("bidirectional")
    x = torch.randn(1 if case.endswith("batch1") else 2, 6, 12)
    f32 = _export(TwoLSTM(bi).eval(), x, tmp_path / "lstm.onnx")
    q = tmp_path / "lstm_q.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quant.quantize_dynamic(str(f32), str(q), weight_type=quant.QuantType.QInt8, per_channel=pc)
    m = onnx.load(str(q))
    assert sum(n.op_type == "DynamicQuantizeLSTM" for n in m.graph.node) == 2
    if case.endswith("_u8"):
        names = {i for n in m.graph.node if n.op_type == "DynamicQuantizeLSTM" for i in (n.input[1], n.input[2], n.input[9], n.input[11])}
        for i in m.graph.initializer:
            if i.name in names:
                i.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(i).astype(np.int16) + 128).astype(np.uint8), i.name))
        onnx.save(m, str(q))
    feeds = {"x": x.numpy()}
    got = tl.compile_and_run(q, feeds, tmp_path / "run")["y"]
    ort_int8 = tl.ort_run(q, feeds)["y"]   # (one thread)
    np.testing.assert_allclose(got, ort_int8, rtol=0, atol=1e-5 * np.abs(ort_int8).max())
    want = tl.ort_run(_lstm_dequantized(m), feeds)["y"]
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max(), np.abs(got - want).max()
    if case == "forward_tensor":   # a scale of the wrong size is refused, by name
        n = next(n for n in m.graph.node if n.op_type == "DynamicQuantizeLSTM")
        for i in m.graph.initializer:
            if i.name == n.input[8]:
                i.CopyFrom(numpy_helper.from_array(np.ones(3, np.float32), i.name))
        onnx.save(m, str(q))
        with pytest.raises(tl.CuvilError, match="W_scale .* must be float32 with 1 \\(per direction\\) or 64 values"):
            tl.compile(q, tmp_path / "bad")


@pytest.mark.parametrize("case", ["reverse_states_peep_u8", "bidirectional_lens_clip", "forward_batch3_rowscales", "forward_split"])
def test_dynamic_quantize_lstm_node(tmp_path, case):
    """A DynamicQuantizeLSTM node written by hand with its optional inputs (bias, sequence
    lengths, initial states, peepholes, zero points per row), uint8 or int8 weights, against
    ONNX Runtime's int8 run on one thread. ONNX Runtime takes only zero points of 0: its model
    holds the same integers as int8 (q - zp), its zero points 0. forward_split: 600 inputs,
    weights mostly small with pairs of 127 (W packed pair-split, with corrections, for
    x86_64-avx2, which it is built for)."""
    split = case.endswith("_split")
    if split and not tl.host_runs("x86_64-avx2"):
        pytest.skip("this machine does not run x86_64-avx2 code")
    rng = np.random.default_rng(len(case))
    S, I, H = 7, 600 if split else 10, 8
    B = 3 if "batch3" in case else 1
    D = 2 if case.startswith("bidirectional") else 1
    u8 = case.endswith("_u8")
    wt = np.uint8 if u8 else np.int8
    per_row = "rowscales" in case or u8
    shp = (D, 4 * H) if per_row else (D,)
    ns = int(np.prod(shp))

    def weights(k):   # 8-bit q and its zero points z (per row or direction), q - z within int8
        z = (rng.integers(100, 156, shp) if u8 else rng.integers(-20, 21, shp) * (not split)).astype(np.int16)
        zb = z.reshape(D, 1, -1) if per_row else z.reshape(D, 1, 1)
        q = np.clip(zb + rng.integers(-40 if split else -100, 41 if split else 101, (D, k, 4 * H)), -128 if not u8 else 0,
                    127 if not u8 else 255)
        if split:   # (pairs that vpmaddubsw would saturate on: a correction each)
            for i in range(6):
                kk, col = 2 * rng.integers(0, k // 2), rng.integers(0, 4 * H)
                q[0, kk:kk + 2, col] = 127 if i % 2 else -128
        return q.astype(wt), z.astype(wt), (q - zb).astype(np.int8)

    (wq, wz, w0), (rq, rz, r0) = weights(I), weights(H)
    ws, rs = (rng.uniform(0.002, 0.02, ns).astype(np.float32).reshape(shp) for _ in range(2))
    common = [numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(rs, "rs"),
              numpy_helper.from_array(rng.standard_normal((D, 8 * H)).astype(np.float32) * 0.3, "B")]
    attrs = dict(hidden_size=H, direction={1: "forward", 2: "bidirectional"}[D])
    if case.startswith("reverse"):
        attrs["direction"] = "reverse"
    if "clip" in case:
        attrs["clip"] = 0.9
    feeds = {"x": rng.standard_normal((S, B, I)).astype(np.float32)}
    ins = ["x", "W", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"]
    vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (S, B, I))]
    if "lens" in case:
        common.append(numpy_helper.from_array(np.array([S - 2] * B, np.int32), "lens"))
        ins[4] = "lens"
    if "states" in case:
        for k, nm in ((5, "h0"), (6, "c0")):
            feeds[nm] = rng.standard_normal((D, B, H)).astype(np.float32) * 0.5
            vis.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, (D, B, H)))
            ins[k] = nm
    if "peep" in case:
        common.append(numpy_helper.from_array(rng.standard_normal((D, 3 * H)).astype(np.float32) * 0.2, "P"))
        ins[7] = "P"
    outs = [("y", TensorProto.FLOAT), ("yh", TensorProto.FLOAT), ("yc", TensorProto.FLOAT)]
    node = helper.make_node("DynamicQuantizeLSTM", ins, ["y", "yh", "yc"], domain="com.microsoft", **attrs)
    path = _model(tmp_path, [node], vis, outs, common + [numpy_helper.from_array(a, nm) for a, nm in
                                                         ((wq, "W"), (rq, "R"), (wz, "wz"), (rz, "rz"))], ms=True)
    got = tl.compile_and_run(path, feeds, tmp_path / "run", **({"target": "x86_64-avx2"} if split else {}))
    ref_node = helper.make_node("DynamicQuantizeLSTM", ins[:9] + ["z0", "rs", "z0"], ["y", "yh", "yc"], domain="com.microsoft", **attrs)
    (tmp_path / "ref").mkdir()
    ref = _model(tmp_path / "ref", [ref_node], vis, outs, common + [numpy_helper.from_array(w0, "W"), numpy_helper.from_array(r0, "R"),
                                                                    numpy_helper.from_array(np.zeros(shp, np.int8), "z0")], ms=True)
    want = tl.ort_run(ref, feeds)
    for k in ("y", "yh", "yc"):
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5 * max(1.0, np.abs(want[k]).max()), err_msg=k)


def test_conv_integer_stride2_wide(tmp_path):
    """Stride 2 over rows whose inside part is a multiple of 16 columns (the vector path's last
    chunk), against a naive loop."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 2, 32, 66)).astype(np.uint8)
    w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])
    path = _model(tmp_path, [node], [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)], [("y", TensorProto.INT32)],
                  [numpy_helper.from_array(w, "w")])
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    OH, OW = 16, 33
    want = np.zeros((1, 3, OH, OW), np.int64)
    for m in range(3):
        for i in range(OH):
            for j in range(OW):
                want[0, m, i, j] = (xp[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w[m].astype(np.int64)).sum()
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run")["y"]
    np.testing.assert_array_equal(got, want)


def _bert(path):
    """A small BERT (transformers, seeded weights) with batch and sequence symbolic."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                  vocab_size=100, max_position_embeddings=64, attn_implementation="eager")
    bert = transformers.BertModel(cfg).eval()

    class W(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = bert

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.randint(0, 100, (2, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(W(), (ids, torch.ones(2, 16, dtype=torch.int64)), str(path), input_names=["ids", "mask"],
                          output_names=["h"], opset_version=17, dynamo=False,
                          dynamic_axes={"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}})
    return path


@pytest.mark.plain   # (torch exports and ONNX Runtime's quantizer: the plain pass only, for CI time)
@pytest.mark.parametrize("form", ["dynamic", "qdq"])
def test_bert_quantized_symbolic(tmp_path, form):
    """BERT with symbolic batch and sequence put through quantize_dynamic (DynamicQuantizeLinear +
    MatMulInteger on every Linear, the embeddings' Gather dequantized) or quantize_static (QDQ:
    the 12 weight MatMuls fold into qlinear_matmul with symbolic rows; the two products of
    activations per layer stay float, named on stderr); several batch x sequence sizes of one
    build, padded rows. Dynamic: against ONNX Runtime's int8 run (each MatMulInteger folded with
    its Cast, scale Mul and bias Add). QDQ: against the model's float
    semantics (ONNX Runtime unoptimised; its optimised int8 run differs from those by its own
    QLinear approximations, ~1% here)."""
    import cuvil
    f32 = _bert(tmp_path / "bert.onnx")
    q = tmp_path / f"bert_{form}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if form == "dynamic":
            quant.quantize_dynamic(str(f32), str(q), weight_type=quant.QuantType.QInt8)
        else:
            class Reader(quant.CalibrationDataReader):
                def __init__(self):
                    self.it = iter([{"ids": np.random.RandomState(i).randint(0, 100, (2, 16)).astype(np.int64),
                                     "mask": np.ones((2, 16), np.int64)} for i in range(4)])

                def get_next(self):
                    return next(self.it, None)

            quant.quantize_static(str(f32), str(q), Reader(), quant_format=quant.QuantFormat.QDQ, per_channel=True)
    dims = {"batch": "1:4", "seq": "1:32"}
    ir = tl.compile(q, tmp_path / "ir", emit="ir", dims=dims).read_text()
    assert ir.count(" = qlinear_matmul ") == 12, ir
    if form == "dynamic":   # each MatMulInteger with its Cast, scale Mul and bias Add: one GEMM, the float epilogue
        assert " = matmul_integer " not in ir and ir.count("# fused Cast+Mul+Add") == 12, ir
    model = cuvil.load(tl.compile(q, tmp_path / "so", dims=dims))
    rng = np.random.default_rng(1)
    for B, S in [(3, 11), (1, 32), (4, 5)]:
        mask = np.ones((B, S), np.int64)
        mask[0, S // 2:] = 0
        feed = {"ids": rng.integers(0, 100, (B, S)).astype(np.int64), "mask": mask}
        want = tl.ort_run(q, feed)["h"] if form == "dynamic" else _ort_float(q, feed)
        np.testing.assert_allclose(model(**feed), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
