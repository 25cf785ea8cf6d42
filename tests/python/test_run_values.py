"""Sizes read from tensors when the model runs (issue 31, item 2): an op whose output size
comes from the values of an integer tensor the model only has when it runs (an input of the
model, or computed) -- Expand's shape, Tile's repeats, ConstantOfShape's shape, TopK's k,
Range's bounds -- reads them just before the node runs into symbols whose ranges come from
the op and from a `--dim VALUE=LO:HI` naming the tensor (src/ir/cir.c, cir_rt_load);
Reshape's shape, Slice's starts/ends/axes/steps and a float Range give sizes the node finds
as it runs (op_found_dim), at most what the op implies or what the declared output or a
`--dim OUTPUT=LO:HI` allows. Memory is planned for the bounds; a value outside them fails the
run naming the node. References: ONNX Runtime, numpy."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl


def _model(tmp_path, name, nodes, inputs, outputs, inits=(), opset=17):
    return tl.onnx_graph_model(tmp_path / f"{name}.onnx", nodes, inputs, outputs, inits, opset)


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _check(model, path, feeds):
    tl.check_vs_ort(model, path, feeds, rtol=1e-6, atol=1e-6)


def test_expand_tile_constant_of_shape_from_inputs(tmp_path):
    """y = Expand(x, shape) + 1, t = Tile(x, reps), c = ConstantOfShape(cshape) (value 7):
    shape, reps and cshape are inputs of the model, bounded by --dim; ONNX Runtime at random
    values, 1s that broadcast among them."""
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["y"]),
             helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("ConstantOfShape", ["cshape"], ["c"],
                              value=helper.make_tensor("v", TensorProto.INT32, [1], [7]))]
    path = _model(tmp_path, "ex", nodes,
                  [_vi("x", TensorProto.FLOAT, [3, 1]), _vi("shape", TensorProto.INT64, [3]),
                   _vi("reps", TensorProto.INT64, [2]), _vi("cshape", TensorProto.INT64, [2])],
                  [("y", TensorProto.FLOAT), ("t", TensorProto.FLOAT), ("c", TensorProto.INT32)],
                  [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    so = tl.compile(path, tmp_path / "b", dims={"shape": "0:6", "reps": "0:4", "cshape": "0:5"})
    model = cuvil.load(so)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 1)).astype(np.float32)
    cases = [([2, 3, 6], [1, 1], [2, 3]), ([1, 1, 1], [4, 4], [5, 5]), ([0, 3, 2], [0, 2], [0, 4]),
             ([6, 1, 6], [3, 1], [1, 0])]
    for _ in range(8):
        cases.append(([int(rng.integers(0, 7)), int(rng.choice([1, 3])), int(rng.integers(0, 7))],
                      [int(v) for v in rng.integers(0, 5, 2)], [int(v) for v in rng.integers(0, 6, 2)]))
    for shape, reps, cshape in cases:
        _check(model, path, {"x": x, "shape": np.array(shape, np.int64), "reps": np.array(reps, np.int64),
                             "cshape": np.array(cshape, np.int64)})
    feeds = {"x": x, "reps": np.array([1, 1], np.int64), "cshape": np.array([1, 1], np.int64)}
    # a value over its --dim: refused by the run, naming the node and the value
    with pytest.raises(cuvil.CuvilError, match=r"Expand.*shape\[0\] = 7 is outside 0\.\.6"):
        model(shape=np.array([7, 3, 1], np.int64), **feeds)
    # broadcasting 2 against the input's 3: refused (ONNX Runtime refuses it too)
    with pytest.raises(cuvil.CuvilError, match=r"shape\[1\] must be 1 or 3 \(the input's dim\)"):
        model(shape=np.array([2, 2, 1], np.int64), **feeds)
    # the model still runs after a refused run
    _check(model, path, {**feeds, "shape": np.array([2, 3, 2], np.int64)})


def test_unbounded_value_names_the_dim_to_give(tmp_path):
    """Without a --dim, Expand's shape may be any size: the compile says which --dim bounds it."""
    path = _model(tmp_path, "unb", [helper.make_node("Expand", ["x", "shape"], ["y"])],
                  [_vi("x", TensorProto.FLOAT, [3, 1]), _vi("shape", TensorProto.INT64, [3])], [("y", TensorProto.FLOAT)])
    proc = tl.compile_raw(path, tmp_path / "unb.so")
    assert proc.returncode != 0
    assert "--dim shape=LO:HI" in proc.stderr and "'shape'" in proc.stderr, proc.stderr


def test_reshape_from_input(tmp_path):
    """Reshape(x, shape) * 2 with shape an input: 0 (copy), -1 (infer), allowzero 0; no --dim
    needed (each dim is at most x's element count). A shape that does not fit fails the run."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Mul", ["r", "two"], ["y"])]
    path = _model(tmp_path, "rs", nodes, [_vi("x", TensorProto.FLOAT, [2, 3, 4]), _vi("shape", TensorProto.INT64, [3])],
                  [("y", TensorProto.FLOAT)], [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for shape in ([4, 3, 2], [0, -1, 1], [-1, 2, 2], [1, 1, 24], [0, 0, -1], [2, 12, 1], [24, 1, 1]):
        _check(model, path, {"x": x, "shape": np.array(shape, np.int64)})
    for bad in ([5, 5, 1], [-1, -1, 6], [0, 0, 5], [-2, 3, 4]):
        with pytest.raises(cuvil.CuvilError, match=r"Reshape.*does not fit"):
            model(x=x, shape=np.array(bad, np.int64))


def test_slice_from_inputs(tmp_path):
    """Slice with starts, ends, axes and steps all inputs: ONNX Runtime at random values
    (negative indices, steps, out-of-range ends, negative axes)."""
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
             helper.make_node("Neg", ["s"], ["y"])]
    path = _model(tmp_path, "sl", nodes,
                  [_vi("x", TensorProto.FLOAT, [5, 6, 7])] + [_vi(n, TensorProto.INT64, [2]) for n in ("st", "en", "ax", "sp")],
                  [("y", TensorProto.FLOAT)])
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    for _ in range(30):
        ax = rng.choice([-3, -2, -1, 0, 1, 2], 2, replace=False)
        if len({int(a) % 3 for a in ax}) < 2:
            continue
        feeds = {"x": x, "st": rng.integers(-9, 9, 2).astype(np.int64), "en": rng.integers(-9, 9, 2).astype(np.int64),
                 "ax": ax.astype(np.int64), "sp": rng.choice([-3, -2, -1, 1, 2, 3], 2).astype(np.int64)}
        _check(model, path, feeds)
    with pytest.raises(cuvil.CuvilError, match=r"Slice.*not valid"):
        model(x=x, st=np.array([0, 0], np.int64), en=np.array([3, 3], np.int64), ax=np.array([1, 1], np.int64),
              sp=np.array([1, 1], np.int64))


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_from_input(tmp_path, keepdims):
    """ReduceSum/ReduceMax/ReduceL2 with axes an input of the model (opsets 13 and 18): ONNX
    Runtime at every pair of distinct axes, negative ones too, for float32 and int32 inputs;
    a repeated or out-of-range axis fails the run naming the node."""
    nodes = [helper.make_node("ReduceSum", ["x", "ax"], ["s"], keepdims=keepdims),
             helper.make_node("ReduceMax", ["i", "ax"], ["m"], keepdims=keepdims),
             helper.make_node("ReduceL2", ["x", "ax"], ["l"], keepdims=keepdims)]
    path = _model(tmp_path, "red", nodes,
                  [_vi("x", TensorProto.FLOAT, [3, 4, 5]), _vi("i", TensorProto.INT32, [3, 4, 5]),
                   _vi("ax", TensorProto.INT64, [2])],
                  [("s", TensorProto.FLOAT), ("m", TensorProto.INT32), ("l", TensorProto.FLOAT)], opset=18)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    i = rng.integers(-100, 100, (3, 4, 5)).astype(np.int32)
    for a in (-3, -2, -1, 0, 1, 2):
        for b in (-3, -2, -1, 0, 1, 2):
            if a % 3 != b % 3:
                _check(model, path, {"x": x, "i": i, "ax": np.array([a, b], np.int64)})
    for bad in ([1, 1], [0, 3], [-4, 0]):
        with pytest.raises(cuvil.CuvilError, match=r"ReduceSum.*axes are not valid"):
            model(x=x, i=i, ax=np.array(bad, np.int64))


def test_topk_and_range_from_inputs(tmp_path):
    """TopK with k an input (at most the axis), Range with an integer limit read when the model
    runs (--dim limit=0:40) and a float Range whose count is found (--dim fr=0:64)."""
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
             helper.make_node("Range", ["zero", "limit", "three"], ["r"]),
             helper.make_node("Range", ["fs", "fl", "fd"], ["fr"])]
    path = _model(tmp_path, "tk", nodes,
                  [_vi("x", TensorProto.FLOAT, [3, 9]), _vi("k", TensorProto.INT64, [1]),
                   _vi("limit", TensorProto.INT64, []), _vi("fs", TensorProto.FLOAT, []),
                   _vi("fl", TensorProto.FLOAT, []), _vi("fd", TensorProto.FLOAT, [])],
                  [("v", TensorProto.FLOAT), ("i", TensorProto.INT64), ("r", TensorProto.INT64), ("fr", TensorProto.FLOAT)],
                  [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
                   helper.make_tensor("three", TensorProto.INT64, [], [3])])
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"limit": "0:40", "fr": "0:64"}))
    rng = np.random.default_rng(5)
    x = rng.permutation(27).reshape(3, 9).astype(np.float32)
    for k, lim, (fs, fl, fd) in [(0, 0, (0, 1, 0.25)), (9, 40, (5, -3, -0.5)), (4, 17, (1, 1, 1)), (1, 1, (-2, 5.5, 0.125))]:
        _check(model, path, {"x": x, "k": np.array([k], np.int64), "limit": np.array(lim, np.int64),
                             "fs": np.array(fs, np.float32), "fl": np.array(fl, np.float32),
                             "fd": np.array(fd, np.float32)})
    ok = {"x": x, "limit": np.array(3, np.int64), "fs": np.array(0, np.float32), "fl": np.array(1, np.float32),
          "fd": np.array(0.5, np.float32)}
    with pytest.raises(cuvil.CuvilError, match=r"TopK.*k\[0\] = 10 is outside 0\.\.9"):
        model(k=np.array([10], np.int64), **{kk: v for kk, v in ok.items()})
    with pytest.raises(cuvil.CuvilError, match=r"Range.*over the size planned"):
        model(**{**ok, "k": np.array([1], np.int64), "fd": np.array(0.01, np.float32)})   # 100 elements > 64
    with pytest.raises(cuvil.CuvilError, match=r"limit\[0\] = 41 is outside"):
        model(**{**ok, "k": np.array([1], np.int64), "limit": np.array(41, np.int64)})


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression_vs_ort(tmp_path, center):
    """NonMaxSuppression on random boxes (2 batches, 3 classes, 12 boxes), with the maximum per
    class, the IoU and the score thresholds all inputs of the model: ONNX Runtime at several
    settings (a maximum of 0 keeps nothing)."""
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "mx", "iou", "sth"], ["sel"],
                              center_point_box=center)]
    path = _model(tmp_path, f"nms{center}", nodes,
                  [_vi("boxes", TensorProto.FLOAT, [2, 12, 4]), _vi("scores", TensorProto.FLOAT, [2, 3, 12]),
                   _vi("mx", TensorProto.INT64, [1]), _vi("iou", TensorProto.FLOAT, [1]),
                   _vi("sth", TensorProto.FLOAT, [1])], [("sel", TensorProto.INT64)])
    so = tl.compile(path, tmp_path / "b")
    model = cuvil.load(so)
    rng = np.random.default_rng(13 + center)
    for mx, iou, sth in [(3, 0.5, 0.0), (12, 0.3, 0.2), (0, 0.5, 0.0), (5, 0.0, -1.0), (100, 1.0, 0.5), (2, 0.7, 0.9)]:
        if center:
            boxes = np.concatenate([rng.uniform(0, 10, (2, 12, 2)), rng.uniform(0.5, 4, (2, 12, 2))], axis=2)
        else:
            boxes = rng.uniform(0, 10, (2, 12, 4))
        feeds = {"boxes": boxes.astype(np.float32), "scores": rng.random((2, 3, 12)).astype(np.float32),
                 "mx": np.array([mx], np.int64), "iou": np.array([iou], np.float32), "sth": np.array([sth], np.float32)}
        _check(model, path, feeds)
    with pytest.raises(cuvil.CuvilError, match=r"NonMaxSuppression.*iou_threshold is outside"):
        model(**{**feeds, "iou": np.array([1.5], np.float32)})


def test_non_max_suppression_ties_vs_ort(tmp_path):
    """NonMaxSuppression taking candidates from a heap of keys: 4 classes of 300 boxes with scores
    rounded to tenths (ties, taken by index) and signed zeros, thresholds that keep a few or a
    hundred a class, against ONNX Runtime."""
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "mx", "iou", "sth"], ["sel"])]
    path = _model(tmp_path, "nmsties", nodes,
                  [_vi("boxes", TensorProto.FLOAT, [1, 300, 4]), _vi("scores", TensorProto.FLOAT, [1, 4, 300]),
                   _vi("mx", TensorProto.INT64, [1]), _vi("iou", TensorProto.FLOAT, [1]),
                   _vi("sth", TensorProto.FLOAT, [1])], [("sel", TensorProto.INT64)])
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(29)
    xy = rng.uniform(0, 100, (1, 300, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(2, 20, (1, 300, 2))], axis=2).astype(np.float32)
    scores = np.round(rng.uniform(-1, 1, (1, 4, 300)), 1).astype(np.float32)
    scores[scores == 0] = np.where(rng.random(int((scores == 0).sum())) < 0.5, np.float32(-0.0), np.float32(0.0))
    for mx, iou, sth in [(100, 0.5, -2.0), (5, 0.3, 0.0), (300, 0.7, -0.5), (50, 0.0, 0.4)]:
        _check(model, path, {"boxes": boxes, "scores": scores, "mx": np.array([mx], np.int64),
                             "iou": np.array([iou], np.float32), "sth": np.array([sth], np.float32)})


def test_onehot_and_unique_vs_ort(tmp_path):
    """OneHot with depth an input (float, truncated; --dim oh=0:12 bounds the new axis) over
    indices with negative and out-of-range values, and Unique (sorted, and by first occurrence
    along an axis) with all four outputs: ONNX Runtime."""
    nodes = [helper.make_node("OneHot", ["ind", "depth", "vals"], ["oh"], axis=1),
             helper.make_node("Unique", ["u"], ["uy", "ui", "uinv", "uc"], sorted=1),
             helper.make_node("Unique", ["m"], ["my", "mi", "minv", "mc"], sorted=0, axis=0)]
    path = _model(tmp_path, "ohu", nodes,
                  [_vi("ind", TensorProto.INT64, [3, 4]), _vi("depth", TensorProto.FLOAT, []),
                   _vi("vals", TensorProto.FLOAT, [2]), _vi("u", TensorProto.FLOAT, [20]), _vi("m", TensorProto.INT64, [7, 3])],
                  [("oh", TensorProto.FLOAT), ("uy", TensorProto.FLOAT), ("ui", TensorProto.INT64), ("uinv", TensorProto.INT64),
                   ("uc", TensorProto.INT64), ("my", TensorProto.INT64), ("mi", TensorProto.INT64),
                   ("minv", TensorProto.INT64), ("mc", TensorProto.INT64)])
    so = tl.compile(path, tmp_path / "b", dims={"oh": "0:12"})
    model = cuvil.load(so)
    rng = np.random.default_rng(17)
    for depth in (5.0, 12.0, 1.5, 1.0):
        feeds = {"ind": rng.integers(-14, 14, (3, 4)).astype(np.int64), "depth": np.array(depth, np.float32),
                 "vals": np.array([-1.0, 3.0], np.float32), "u": rng.integers(0, 6, 20).astype(np.float32),
                 "m": rng.integers(0, 2, (7, 3)).astype(np.int64)}
        _check(model, path, feeds)
    for bad in (13.0, 0.0, -2.0):   # over the --dim, and under 1 (ONNX Runtime refuses those too)
        with pytest.raises(cuvil.CuvilError, match=r"OneHot.*depth is under 1, or over"):
            model(**{**feeds, "depth": np.array(bad, np.float32)})


@pytest.mark.parametrize("by", ["scales", "sizes"])
def test_resize_from_inputs(tmp_path, by):
    """Resize (linear, half_pixel; nearest, asymmetric) with its scales or sizes an input:
    the output's H and W are sizes the node finds, bounded by --dim ry=0:24 and --dim rn=0:24;
    ONNX Runtime at several factors, up and down. A size over the bound fails the run."""
    empty = helper.make_tensor("empty", TensorProto.FLOAT, [0], [])
    ins = ["x", "", "s"] if by == "scales" else ["x", "", "", "s"]
    nodes = [helper.make_node("Resize", ins, ["ry"], mode="linear"),
             helper.make_node("Resize", ins, ["rn"], mode="nearest", coordinate_transformation_mode="asymmetric",
                              nearest_mode="floor")]
    st = (TensorProto.FLOAT, [4]) if by == "scales" else (TensorProto.INT64, [4])
    path = _model(tmp_path, f"rs{by}", nodes, [_vi("x", TensorProto.FLOAT, [1, 2, 6, 5]), _vi("s", *st)],
                  [("ry", TensorProto.FLOAT), ("rn", TensorProto.FLOAT)], [empty])
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"ry": "0:24", "rn": "0:24"}))
    rng = np.random.default_rng(19)
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    for h, w in [(2.0, 3.0), (0.5, 0.4), (1.0, 1.0), (3.5, 1.25), (0.34, 4.0)]:
        s = np.array([1, 1, h, w], np.float32) if by == "scales" else np.array([1, 2, int(6 * h), int(5 * w)], np.int64)
        _check(model, path, {"x": x, "s": s})
    big = np.array([1, 1, 5, 1], np.float32) if by == "scales" else np.array([1, 2, 30, 5], np.int64)
    with pytest.raises(cuvil.CuvilError, match=r"Resize.*over the output's declared or --dim size"):
        model(x=x, s=big)


def test_run_time_reshape_into_matmul_and_range_extremes(tmp_path):
    """A Reshape by a shape the model takes feeds a MatMul with a fixed weight: K is a size the
    run finds, checked against the weight's when the model runs (no packing of the weight for
    a K the compiler cannot see). An int64 Range across the whole int64 span with a huge delta
    (limit - start overflows int64) counts in unsigned arithmetic, as ONNX Runtime does."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"]),
             helper.make_node("Range", ["a", "b", "d"], ["q"])]
    path = _model(tmp_path, "rmm", nodes,
                  [_vi("x", TensorProto.FLOAT, [2, 3, 4]), _vi("s", TensorProto.INT64, [2]),
                   _vi("a", TensorProto.INT64, []), _vi("b", TensorProto.INT64, []), _vi("d", TensorProto.INT64, [])],
                  [("y", TensorProto.FLOAT), ("q", TensorProto.INT64)],
                  [helper.make_tensor("w", TensorProto.FLOAT, [4, 5], list(np.linspace(-1, 1, 20)))])
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"q": "0:10"}))
    x = np.random.default_rng(29).standard_normal((2, 3, 4)).astype(np.float32)
    big = {"a": np.array(-2**63, np.int64), "b": np.array(2**63 - 1, np.int64), "d": np.array(2**62, np.int64)}
    for s in ([6, 4], [-1, 4]):
        _check(model, path, {"x": x, "s": np.array(s, np.int64), **big})
    with pytest.raises(cuvil.CuvilError, match=r"MatMul"):
        model(x=x, s=np.array([4, 6], np.int64), **big)   # K = 6 against the weight's 4


def test_declared_output_mismatch_and_nan_index_messages(tmp_path):
    """A declared output dim the run contradicts fails with the declared size first; a NaN index
    of OneHot is no index (a row of off values), never class 0."""
    g = helper.make_graph([helper.make_node("Slice", ["x", "st", "en"], ["y"]),
                           helper.make_node("OneHot", ["ind", "dep", "vals"], ["oh"])], "decl",
                          [_vi("x", TensorProto.FLOAT, [6]), _vi("st", TensorProto.INT64, [1]), _vi("en", TensorProto.INT64, [1]),
                           _vi("ind", TensorProto.FLOAT, [3])],
                          [_vi("y", TensorProto.FLOAT, [3]), _vi("oh", TensorProto.FLOAT, None)],
                          [helper.make_tensor("dep", TensorProto.INT64, [], [4]),
                           helper.make_tensor("vals", TensorProto.FLOAT, [2], [0.0, 1.0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "decl.onnx"
    import onnx
    onnx.save(m, path)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.arange(6, dtype=np.float32)
    ind = np.array([1.7, np.nan, -1.2], np.float32)
    y, oh = model(x=x, st=np.array([1], np.int64), en=np.array([4], np.int64), ind=ind)
    np.testing.assert_array_equal(y, x[1:4])
    np.testing.assert_array_equal(oh, [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]])
    with pytest.raises(cuvil.CuvilError, match=r"declared output dim and the size the run found differ \(3 and 2\)"):
        model(x=x, st=np.array([0], np.int64), en=np.array([2], np.int64), ind=ind)


def test_expand_declared_like_its_input_still_checks_its_shape(tmp_path):
    """Expand(x [1,3,1], shape) declared [1,3,1] (ONNX's simple/test_expand_shape_model1): the
    output is the input's shape, but the node is not dropped as an identity, since the values
    of shape read when the model runs must still be checked (a shape [2, 2] fails the run, as
    in ONNX Runtime; [3, 1] and [1, 1] give x)."""
    g = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "exd",
                          [_vi("x", TensorProto.FLOAT, [1, 3, 1]), _vi("shape", TensorProto.INT64, [2])],
                          [_vi("y", TensorProto.FLOAT, [1, 3, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "exd.onnx"
    import onnx
    onnx.save(m, path)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.array([1, 2, 3], np.float32).reshape(1, 3, 1)
    for s in ([3, 1], [1, 1]):
        _check(model, path, {"x": x, "shape": np.array(s, np.int64)})
    with pytest.raises(cuvil.CuvilError, match=r"Expand"):
        model(x=x, shape=np.array([2, 2], np.int64))
