"""Ops whose axes, sizes, pads or modes the model reads when it runs (issue 32): Unsqueeze and
Squeeze axes, Split sizes, Pad's pads and value (every type), Dropout's training_mode and mask,
Pow with an exponent of another type (a Relu after it stays a node: the mixed-type kernel has no
epilogue) -- each against ONNX Runtime, and a bad value fails the run naming the node."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _check(model, path, feeds):
    tl.check_vs_ort(model, path, feeds, rtol=1e-6, atol=1e-6)


def test_unsqueeze_squeeze_split_from_inputs(tmp_path):
    nodes = [helper.make_node("Unsqueeze", ["x", "ua"], ["u"]), helper.make_node("Squeeze", ["u", "ua"], ["s"]),
             helper.make_node("Split", ["x", "sp"], ["p0", "p1", "p2"], axis=1)]
    path = tl.onnx_graph_model(tmp_path / "ax.onnx", nodes,
                               [_vi("x", F, [2, 6]), _vi("ua", I64, [2]), _vi("sp", I64, [3])],
                               [("u", F), ("s", F), ("p0", F), ("p1", F), ("p2", F)], opset=18)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for ua, sp in (([0, 3], [1, 2, 3]), ([-1, 1], [0, 6, 0]), ([2, 0], [3, 3, 0])):
        _check(model, path, {"x": x, "ua": np.array(ua, np.int64), "sp": np.array(sp, np.int64)})
    with pytest.raises(cuvil.CuvilError, match=r"Unsqueeze.*out of range or repeated"):
        model(x=x, ua=np.array([1, 1], np.int64), sp=np.array([2, 2, 2], np.int64))
    with pytest.raises(cuvil.CuvilError, match=r"Split.*do not add up"):
        model(x=x, ua=np.array([0, 1], np.int64), sp=np.array([2, 2, 1], np.int64))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("t", [F, I32])
def test_pad_from_inputs(tmp_path, mode, t):
    ins = ["x", "pads"] + (["v"] if mode == "constant" else [])
    vis = [_vi("x", t, [3, 4]), _vi("pads", I64, [4])] + ([_vi("v", t, [])] if mode == "constant" else [])
    node = helper.make_node("Pad", ins, ["y"], mode=mode)
    path = tl.onnx_graph_model(tmp_path / "pad.onnx", [node], vis, [("y", t)], opset=18)
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"y": "0:10"}))   # the output's dims: at most 10
    np_t = np.float32 if t == F else np.int32
    x = np.arange(12).reshape(3, 4).astype(np_t)
    for pads in ([1, 2, 2, 2], [0, 0, 2, 3], [2, 1, 1, 3]):
        feeds = {"x": x, "pads": np.array(pads, np.int64)}
        if mode == "constant":
            feeds["v"] = np.array(7, np_t)
        _check(model, path, feeds)
    with pytest.raises(cuvil.CuvilError, match=r"Pad.*not valid"):
        bad = {"x": x, "pads": np.array([-4, 0, 0, 0], np.int64)}
        if mode == "constant":
            bad["v"] = np.array(7, np_t)
        model(**bad)


def test_dropout_training_mode_and_mask(tmp_path):
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "z"])
    path = tl.onnx_graph_model(tmp_path / "do.onnx", [node],
                               [_vi("x", F, [2, 3]), _vi("r", F, []), _vi("t", TensorProto.BOOL, [])],
                               [("y", F), ("z", TensorProto.BOOL)], opset=13)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _check(model, path, {"x": x, "r": np.array(0.5, np.float32), "t": np.array(False)})
    _check(model, path, {"x": x, "r": np.array(0.0, np.float32), "t": np.array(True)})
    with pytest.raises(cuvil.CuvilError, match=r"Dropout.*training-mode Dropout"):
        model(x=x, r=np.array(0.5, np.float32), t=np.array(True))


def test_pow_exponent_of_another_type_then_relu(tmp_path):
    nodes = [helper.make_node("Pow", ["x", "e"], ["p"]), helper.make_node("Relu", ["p"], ["y"]),
             helper.make_node("Pow", ["i", "f"], ["q"])]
    path = tl.onnx_graph_model(tmp_path / "pow.onnx", nodes,
                               [_vi("x", F, [5]), _vi("e", I64, [5]), _vi("i", I32, [5]), _vi("f", F, [5])],
                               [("y", F), ("q", I32)], opset=15)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    feeds = {"x": np.array([-2, -1.5, 0.5, 2, 3], np.float32), "e": np.array([3, 2, 1, 0, 2], np.int64),
             "i": np.array([2, -3, 4, 5, 7], np.int32), "f": np.array([2, 3, 0.5, 1, 2], np.float32)}
    _check(model, path, feeds)
