"""Ops issue 32 brought, each against ONNX Runtime at random data: Celu, MeanVarianceNormalization
(ONNX functions written as CIR nodes), EyeLike, LRN, ReverseSequence (a length past the time axis
fails the run naming the node), BatchNormalization with parameters the model takes as inputs,
float Mod with fmod=0 (numpy's sign rule)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _run(tmp_path, name, nodes, vis, outs, feeds, opset=17):
    path = tl.onnx_graph_model(tmp_path / f"{name}.onnx", nodes, vis, outs, opset=opset)
    model = cuvil.load(tl.compile(path, tmp_path / name))
    tl.check_vs_ort(model, path, feeds, rtol=1e-5, atol=1e-5)
    return model


def test_celu_mvn_lrn_eyelike(tmp_path):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("Celu", ["x"], ["c"], alpha=0.7), helper.make_node("MeanVarianceNormalization", ["x"], ["m"]),
             helper.make_node("LRN", ["x"], ["l"], size=3, alpha=0.02, beta=0.6, bias=1.5),
             helper.make_node("EyeLike", ["e"], ["i"], k=1, dtype=TensorProto.INT32)]
    _run(tmp_path, "misc", nodes, [_vi("x", F, [2, 5, 3, 4]), _vi("e", F, [3, 5])],
         [("c", F), ("m", F), ("l", F), ("i", TensorProto.INT32)], {"x": x, "e": np.zeros((3, 5), np.float32)})


def test_reverse_sequence(tmp_path):
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=1, batch_axis=0)
    x = np.arange(4 * 5 * 2, dtype=np.float32).reshape(4, 5, 2)
    m = _run(tmp_path, "rs", [node], [_vi("x", F, [4, 5, 2]), _vi("lens", I64, [4])], [("y", F)],
             {"x": x, "lens": np.array([5, 1, 0, 3], np.int64)})
    with pytest.raises(cuvil.CuvilError, match=r"ReverseSequence.*sequence length"):
        m(x=x, lens=np.array([6, 1, 1, 1], np.int64))


def test_batchnorm_parameters_as_inputs_and_float_mod(tmp_path):
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"], epsilon=1e-3),
             helper.make_node("Mod", ["a", "d"], ["r"], fmod=0)]
    vis = [_vi("x", F, [2, 3, 4]), _vi("s", F, [3]), _vi("b", F, [3]), _vi("mu", F, [3]), _vi("var", F, [3]),
           _vi("a", F, [6]), _vi("d", F, [6])]
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32), "s": rng.standard_normal(3).astype(np.float32),
             "b": rng.standard_normal(3).astype(np.float32), "mu": rng.standard_normal(3).astype(np.float32),
             "var": rng.uniform(0.5, 2, 3).astype(np.float32),
             "a": np.array([5.5, -5.5, 5.5, -5.5, 0.0, 3.0], np.float32),
             "d": np.array([2.0, 2.0, -2.0, -2.0, 3.0, 1.5], np.float32)}
    _run(tmp_path, "bn", nodes, vis, [("y", F), ("r", F)], feeds, opset=28)
    # before opset 28 a float Mod with fmod=0 is not a valid model: refused, as ONNX Runtime does
    path = tl.onnx_graph_model(tmp_path / "mod15.onnx", nodes[1:], vis[5:], [("r", F)], opset=15)
    proc = tl.compile_raw(path, tmp_path / "mod15.so")
    assert proc.returncode != 0 and "fmod=1 before opset 28" in proc.stderr, proc.stderr


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_vs_ort(tmp_path, mode, padding, align):
    """A grid reaching past the borders (-1.6..1.6) so that every padding mode matters."""
    rng = np.random.default_rng(10)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    feeds = {"x": rng.standard_normal((2, 3, 5, 6)).astype(np.float32),
             "g": rng.uniform(-1.6, 1.6, (2, 4, 7, 2)).astype(np.float32)}
    _run(tmp_path, "gs", [node], [_vi("x", F, [2, 3, 5, 6]), _vi("g", F, [2, 4, 7, 2])], [("y", F)], feeds, opset=20)


def test_quantization_ops_vs_ort(tmp_path):
    """QuantizeLinear per axis and blocked, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger
    (ONNX Runtime takes scalar zero points only), QLinearMatMul: naive kernels as ONNX's reference computes them
    (issue 32; the precision issue brings the fast ones), exactly ONNX Runtime's integers."""
    rng = np.random.default_rng(11)
    U8, I8 = TensorProto.UINT8, TensorProto.INT8
    inits = [helper.make_tensor("s", F, [4], rng.uniform(0.01, 0.1, 4)), helper.make_tensor("z", I8, [4], [0, 3, -5, 7]),
             helper.make_tensor("bs", F, [2, 4], rng.uniform(0.01, 0.1, 8)),
             helper.make_tensor("bzp", U8, [], [128]),
             helper.make_tensor("as_", F, [], [0.02]), helper.make_tensor("bsc", F, [], [0.03]),
             helper.make_tensor("ys", F, [], [0.05]), helper.make_tensor("yz", U8, [], [120])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"], axis=1),
             helper.make_node("QuantizeLinear", ["x", "bs"], ["qb"], axis=0, block_size=2, output_dtype=I8),
             helper.make_node("DynamicQuantizeLinear", ["x"], ["dy", "dys", "dyz"]),
             helper.make_node("MatMulInteger", ["a", "b", "azp1", "bzp"], ["mi"]),
             helper.make_node("QLinearMatMul", ["a", "as_", "azp1", "b", "bsc", "bzp", "ys", "yz"], ["qm"])]
    inits.append(helper.make_tensor("azp1", U8, [], [2]))
    vis = [_vi("x", F, [4, 4]), _vi("a", U8, [3, 5]), _vi("b", U8, [5, 6])]
    outs = [("q", I8), ("dq", F), ("qb", I8), ("dy", U8), ("dys", F), ("dyz", U8), ("mi", TensorProto.INT32), ("qm", U8)]
    path = tl.onnx_graph_model(tmp_path / "q.onnx", nodes, vis, outs, inits, opset=21)
    model = cuvil.load(tl.compile(path, tmp_path / "q"))
    for _ in range(3):
        feeds = {"x": rng.uniform(-12, 12, (4, 4)).astype(np.float32), "a": rng.integers(0, 256, (3, 5)).astype(np.uint8),
                 "b": rng.integers(0, 256, (5, 6)).astype(np.uint8)}
        tl.check_vs_ort(model, path, feeds, rtol=1e-6, atol=1e-6)


def test_review_edge_cases_vs_ort(tmp_path):
    """Edge cases a fresh-context review found: MatMulInteger with K = 0 (zeros, not unwritten
    memory: against numpy, since ONNX Runtime's own result there depends on what else the model
    holds), GridSample nearest on coordinates that tie in float32 (as ONNX Runtime rounds them),
    Squeeze with a run-time axes tensor of length 0 (every dim of 1), ReduceSum over run-time
    axes that cover every dim with keepdims=0 (a scalar)."""
    U8 = TensorProto.UINT8
    mi = tl.onnx_graph_model(tmp_path / "mi.onnx", [helper.make_node("MatMulInteger", ["a", "b"], ["mi"])],
                             [_vi("a", U8, [3, 0]), _vi("b", U8, [0, 4])], [("mi", TensorProto.INT32)], opset=20)
    got = cuvil.load(tl.compile(mi, tmp_path / "mi"))(a=np.zeros((3, 0), np.uint8), b=np.zeros((0, 4), np.uint8))
    np.testing.assert_array_equal(got, np.zeros((3, 4), np.int32))
    nodes = [helper.make_node("GridSample", ["x", "g"], ["gs"], mode="nearest"),
             helper.make_node("Squeeze", ["s", "sa"], ["sq"]),
             helper.make_node("ReduceSum", ["r", "ra"], ["rs"], keepdims=0)]
    vis = [_vi("x", F, [1, 1, 1, 5]), _vi("g", F, [1, 1, 4, 2]),
           _vi("s", F, [1, 3, 1, 2]), _vi("sa", I64, [0]), _vi("r", F, [2, 3]), _vi("ra", I64, [2])]
    feeds = {"x": np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5),
             "g": np.array([[[[-0.6, 0], [0.2, 0], [-0.2, 0], [0.6, 0]]]], np.float32),
             "s": np.arange(6, dtype=np.float32).reshape(1, 3, 1, 2), "sa": np.zeros(0, np.int64),
             "r": np.arange(6, dtype=np.float32).reshape(2, 3), "ra": np.array([1, 0], np.int64)}
    _run(tmp_path, "edge", nodes, vis, [("gs", F), ("sq", F), ("rs", F)], feeds, opset=20)


def test_squeeze_to_a_scalar_checks_its_run_time_axes(tmp_path):
    node = helper.make_node("Squeeze", ["s", "sa"], ["sq"])
    path = tl.onnx_graph_model(tmp_path / "sq.onnx", [node], [_vi("s", F, [1]), _vi("sa", I64, [1])], [("sq", F)])
    model = cuvil.load(tl.compile(path, tmp_path / "sq"))
    tl.check_vs_ort(model, path, {"s": np.array([4.0], np.float32), "sa": np.array([-1], np.int64)})
    with pytest.raises(cuvil.CuvilError, match=r"Squeeze.*out of range"):
        model(s=np.array([4.0], np.float32), sa=np.array([3], np.int64))


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_vs_ort(tmp_path, p):
    """LpNormalization along an axis, with negative values and a row of zeros (0 out, not NaN)."""
    x = np.random.default_rng(12).standard_normal((3, 4)).astype(np.float32)
    x[1] = 0
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p)
    _run(tmp_path, f"lp{p}", [node], [_vi("x", F, [3, 4])], [("y", F)], {"x": x})
