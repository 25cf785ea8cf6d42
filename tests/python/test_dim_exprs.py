"""Shapes as expressions (src/ir/dim.h): models whose sizes are floor/ceil divisions, mins and
clamped slices of several symbols, compiled once and checked against ONNX Runtime at many random points of their ranges, shapes
included. Among them the cases that the sample-and-fit mechanism got wrong between its samples
(issue 31): a Slice whose end is piecewise Shape arithmetic read past the input, a slice length
that goes negative between two symbols, a slice to min(seq, 300)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl


def _i64(name, vals, shape=None):
    return helper.make_tensor(name, TensorProto.INT64, [len(vals)] if shape is None else shape, vals)


def _save(tmp_path, name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    import onnx
    onnx.save(m, path)
    return path


def _compile(path, tmp_path, dims):
    out = tmp_path / f"{path.stem}.so"
    proc = tl.compile_raw(path, out, dims=dims)
    assert proc.returncode == 0, proc.stderr
    return cuvil.load(out)


def _check(model, path, feeds):
    want = tl.ort_run(path, feeds)
    got = model(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for (name, w), g in zip(want.items(), got):
        assert g.shape == w.shape, (name, {k: v.shape for k, v in feeds.items()}, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_five_symbols_floor_ceil_min(tmp_path):
    """x[S1, S2][:, :S2 // 3]; a 3x3 max pool, stride 2, pads 1, ceil_mode, over z[S4, S5];
    y[S3][:min(S1, 7)]; and a concat of x's rows with z's: 30 random points of five symbols."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Gather", ["sx", "one"], ["s2"], axis=0),
        helper.make_node("Div", ["s2", "three"], ["s2d3"]),
        helper.make_node("Unsqueeze", ["s2d3", "ax0"], ["e1"]),
        helper.make_node("Slice", ["x", "zero1", "e1", "ax1"], ["t1"]),
        helper.make_node("Relu", ["t1"], ["o1"]),
        helper.make_node("Unsqueeze", ["z", "ax01"], ["z4"]),
        helper.make_node("MaxPool", ["z4"], ["o2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("Gather", ["sx", "zero"], ["s1"], axis=0),
        helper.make_node("Min", ["s1", "seven"], ["m"]),
        helper.make_node("Unsqueeze", ["m", "ax0"], ["e3"]),
        helper.make_node("Slice", ["y", "zero1", "e3"], ["t3"]),
        helper.make_node("Neg", ["t3"], ["o3"]),
        helper.make_node("ReduceSum", ["x", "ax1"], ["rx"], keepdims=0),
        helper.make_node("ReduceSum", ["z", "ax1"], ["rz"], keepdims=0),
        helper.make_node("Concat", ["rx", "rz"], ["o4"], axis=0),
    ]
    inits = [_i64("one", [1], []), _i64("zero", [0], []), _i64("three", [3], []), _i64("seven", [7], []), _i64("ax0", [0]),
             _i64("ax1", [1]), _i64("ax01", [0, 1]), _i64("zero1", [0])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S1", "S2"]),
              helper.make_tensor_value_info("y", TensorProto.FLOAT, ["S3"]),
              helper.make_tensor_value_info("z", TensorProto.FLOAT, ["S4", "S5"])]
    path = _save(tmp_path, "five", nodes, inputs, ["o1", "o2", "o3", "o4"], inits)
    ranges = {"S1": (1, 20), "S2": (1, 50), "S3": (0, 12), "S4": (2, 30), "S5": (2, 31)}
    model = _compile(path, tmp_path, {k: f"{lo}:{hi}" for k, (lo, hi) in ranges.items()})
    rng = np.random.default_rng(5)
    points = [{k: lo for k, (lo, _) in ranges.items()}, {k: hi for k, (_, hi) in ranges.items()}]
    points += [{k: int(rng.integers(lo, hi + 1)) for k, (lo, hi) in ranges.items()} for _ in range(28)]
    for p in points:
        feeds = {"x": rng.standard_normal((p["S1"], p["S2"])).astype(np.float32),
                 "y": rng.standard_normal((p["S3"],)).astype(np.float32),
                 "z": rng.standard_normal((p["S4"], p["S5"])).astype(np.float32)}
        _check(model, path, feeds)


def test_slices_the_fits_got_wrong(tmp_path):
    """x[:seq // 3] from Shape arithmetic (piecewise between any two samples), table[:min(seq,
    300)] + x[:min(seq, 300)], and x[a:b] with a and b the lengths of two other inputs (a length
    that is negative where a > b): exact at every value, never reading past an input."""
    seq = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 8])]
    third = _save(tmp_path, "third", [
        helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i0"], ["s0"], axis=0),
        helper.make_node("Div", ["s0", "three"], ["q"]), helper.make_node("Unsqueeze", ["q", "ax0"], ["e"]),
        helper.make_node("Slice", ["x", "zero", "e"], ["sl"]), helper.make_node("Relu", ["sl"], ["y"])],
        seq, ["y"], [_i64("i0", [0], []), _i64("three", [3], []), _i64("ax0", [0]), _i64("zero", [0])])
    table = np.random.default_rng(1).standard_normal((512, 8)).astype(np.float32)
    capped = _save(tmp_path, "capped", [
        helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i0"], ["s0"], axis=0),
        helper.make_node("Min", ["s0", "c300"], ["m"]), helper.make_node("Unsqueeze", ["m", "ax0"], ["e"]),
        helper.make_node("Slice", ["tab", "zero", "e"], ["st"]), helper.make_node("Slice", ["x", "zero", "e"], ["sx"]),
        helper.make_node("Add", ["st", "sx"], ["y"])],
        seq, ["y"], [_i64("i0", [0], []), _i64("c300", [300], []), _i64("ax0", [0]), _i64("zero", [0]),
                     helper.make_tensor("tab", TensorProto.FLOAT, [512, 8], table.ravel().tolist())])
    between = _save(tmp_path, "between", [
        helper.make_node("Shape", ["p"], ["sa"]), helper.make_node("Shape", ["q"], ["sb"]),
        helper.make_node("Slice", ["x", "sa", "sb"], ["sl"]), helper.make_node("Neg", ["sl"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", 4]), helper.make_tensor_value_info("p", TensorProto.FLOAT, ["A"]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, ["B"])], ["y"], [])
    rng = np.random.default_rng(3)
    m = _compile(third, tmp_path, {"seq": "1:1000"})
    for s in (1, 2, 3, 4, 5, 100, 101, 102, 997, 1000):
        _check(m, third, {"x": rng.standard_normal((s, 8)).astype(np.float32)})
    m = _compile(capped, tmp_path, {"seq": "1:512"})
    for s in (1, 2, 299, 300, 301, 511, 512):
        _check(m, capped, {"x": rng.standard_normal((s, 8)).astype(np.float32)})
    m = _compile(between, tmp_path, {"S": "1:16", "A": "0:20", "B": "0:20"})
    for s, a, b in ((16, 3, 10), (5, 10, 3), (5, 2, 20), (16, 0, 0), (1, 20, 20), (9, 4, 9), (9, 9, 4)):
        _check(m, between, {"x": rng.standard_normal((s, 4)).astype(np.float32),
                            "p": np.zeros(a, np.float32), "q": np.zeros(b, np.float32)})


def test_guard_names_the_node(tmp_path):
    """Two symbols that must be equal (an Add of x[a] and y[b]) become a check when the model
    runs: a run where they differ fails with a message naming the node, not a wrong answer."""
    path = _save(tmp_path, "guard", [helper.make_node("Add", ["x", "y"], ["s"], name="the_add")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a"]),
                  helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b"])], ["s"], [])
    m = _compile(path, tmp_path, {"a": "2:9", "b": "2:9"})
    _check(m, path, {"x": np.ones(5, np.float32), "y": np.ones(5, np.float32)})
    with pytest.raises(cuvil.CuvilError, match="the_add.*differ"):
        m(x=np.ones(5, np.float32), y=np.ones(6, np.float32))


def test_scratch_reserved_for_every_size(tmp_path):
    """A depthwise 3x3 conv, stride (1, 2), over a map whose width is symbolic (PP-OCR's
    recogniser has one): its kernel needs more scratch at small widths than at the upper
    bound, so the reservation is the largest over the symbols' box, not the upper bound's (a
    run at the smallest width failed with 'needs more scratch memory ...')."""
    rng = np.random.default_rng(7)
    w = helper.make_tensor("w", TensorProto.FLOAT, [128, 1, 3, 3], rng.standard_normal(128 * 9).astype(np.float32).tolist())
    path = _save(tmp_path, "dw", [helper.make_node("Conv", ["x", "w"], ["y"], group=128, kernel_shape=[3, 3],
                                                   strides=[1, 2], pads=[1, 1, 1, 1])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 12, "W"])], ["y"], [w])
    m = _compile(path, tmp_path, {"W": "2:160"})
    for width in (2, 3, 8, 9, 33, 160):
        _check(m, path, {"x": rng.standard_normal((1, 128, 12, width)).astype(np.float32)})


def test_blocks_and_indexing_ops_symbolic(tmp_path):
    """DepthToSpace (DCR and CRD), SpaceToDepth, GatherElements, ScatterElements and ScatterND with
    symbolic dims, at random points; a SpaceToDepth over an odd height and gather indices larger
    than the data are refused when the model runs, naming the node."""
    nodes = [
        helper.make_node("DepthToSpace", ["a"], ["o1"], blocksize=2, mode="DCR"),
        helper.make_node("DepthToSpace", ["a"], ["o2"], blocksize=2, mode="CRD"),
        helper.make_node("SpaceToDepth", ["a"], ["o3"], blocksize=2, name="s2d"),
        helper.make_node("GatherElements", ["x", "gi"], ["o4"], axis=1, name="ge"),
        helper.make_node("ScatterElements", ["x", "si", "su"], ["o5"], axis=1, reduction="add"),
        helper.make_node("ScatterND", ["x", "ni", "nu"], ["o6"]),
    ]
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8, "H", "W"]),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, ["R", "C"]),
              helper.make_tensor_value_info("gi", TensorProto.INT64, ["R2", "G"]),
              helper.make_tensor_value_info("si", TensorProto.INT64, ["R", "G"]),
              helper.make_tensor_value_info("su", TensorProto.FLOAT, ["R", "G"]),
              helper.make_tensor_value_info("ni", TensorProto.INT64, ["K", 1]),
              helper.make_tensor_value_info("nu", TensorProto.FLOAT, ["K", "C"])]
    path = _save(tmp_path, "blocks", nodes, inputs, ["o1", "o2", "o3", "o4", "o5", "o6"], [])
    model = _compile(path, tmp_path, {"N": "1:3", "H": "2:20", "W": "2:20", "R": "1:9", "C": "1:9", "R2": "1:9",
                                      "G": "1:12", "K": "1:4"})
    rng = np.random.default_rng(7)
    for _ in range(16):
        n, h, w = int(rng.integers(1, 4)), 2 * int(rng.integers(1, 11)), 2 * int(rng.integers(1, 11))
        r, c = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        r2, g, k = int(rng.integers(1, r + 1)), int(rng.integers(1, 13)), int(rng.integers(1, min(r, 4) + 1))
        feeds = {"a": rng.standard_normal((n, 8, h, w)).astype(np.float32),
                 "x": rng.standard_normal((r, c)).astype(np.float32),
                 "gi": rng.integers(0, c, (r2, g)).astype(np.int64),
                 "si": rng.integers(0, c, (r, g)).astype(np.int64),
                 "su": rng.standard_normal((r, g)).astype(np.float32),
                 "ni": rng.permutation(r)[:k].reshape(k, 1).astype(np.int64),
                 "nu": rng.standard_normal((k, c)).astype(np.float32)}
        _check(model, path, feeds)
    ok = dict(feeds)
    bad = dict(ok, a=rng.standard_normal((1, 8, 3, 4)).astype(np.float32))
    with pytest.raises(cuvil.CuvilError, match=r"s2d.*height modulo blocksize"):
        model(**bad)
    bad = dict(ok, x=np.ones((3, 4), np.float32), gi=np.zeros((4, 2), np.int64), si=np.zeros((3, 2), np.int64),
               su=np.ones((3, 2), np.float32), ni=np.zeros((1, 1), np.int64), nu=np.ones((1, 4), np.float32))
    with pytest.raises(cuvil.CuvilError, match=r"ge.*indices dim within the data's: \d+ exceeds \d+"):
        model(**bad)


def test_symbolic_dims_that_are_1_when_the_model_runs_broadcast(tmp_path):
    """Two symbolic dims that broadcast (Add, Less, Where, a variadic Sum, and Expand to 4):
    equal, or either 1 when the model runs, as ONNX Runtime broadcasts them; any other pair fails
    the run naming the node. Every pair N, M in 1..4 against ONNX Runtime."""
    F = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["x", "y"], ["z"], name="add_node"),
             helper.make_node("Less", ["x", "y"], ["lt"]),
             helper.make_node("Where", ["c", "x", "y"], ["w"]),
             helper.make_node("Sum", ["x", "y", "x"], ["s"]),
             helper.make_node("Expand", ["x", "four"], ["e"], name="expand_node"),
             helper.make_node("Cast", ["lt"], ["ltf"], to=F)]
    path = _save(tmp_path, "bcast", nodes[:4] + nodes[5:], [vi("x", F, ["N"]), vi("y", F, ["M"]), vi("c", TensorProto.BOOL, ["N"])],
                 ["z", "ltf", "w", "s"], [_i64("four", [4])])
    model = _compile(path, tmp_path, {"N": "1:4", "M": "1:4"})
    e_path = _save(tmp_path, "expand", nodes[4:5], [vi("x", F, ["N"])], ["e"], [_i64("four", [4])])
    e_model = _compile(e_path, tmp_path, {"N": "1:4"})
    rng = np.random.default_rng(4)
    for n in range(1, 5):
        x = rng.standard_normal(n).astype(np.float32)
        c = rng.random(n) > 0.5
        for m in range(1, 5):
            y = rng.standard_normal(m).astype(np.float32)
            if n == m or n == 1 or m == 1:
                _check(model, path, {"x": x, "y": y, "c": c})
            else:
                with pytest.raises(cuvil.CuvilError, match="add_node.*do not broadcast"):
                    model(x=x, y=y, c=c)
        if n in (1, 4):
            _check(e_model, e_path, {"x": x})
        else:
            with pytest.raises(cuvil.CuvilError, match="expand_node.*do not broadcast"):
                e_model(x=x)
