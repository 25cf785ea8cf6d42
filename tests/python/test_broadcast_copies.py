"""Expand, Tile and Where (typed.c's row-by-row copies and blends), ArgMax / ArgMin and ReduceMax /
ReduceMin (their rows and NaN rules), TopK on float32 (its keys), GatherElements (its rows) against
numpy, ONNX Runtime or a loop written here.
Expand, Tile, Where on shapes that
reach each of their paths: dims joined or not (copied next to broadcast, size-1 dims between),
a row copied, one value repeated, a tiled row, an outer dim tiled; Where with each operand
broadcast along rows and along columns, in 1, 2, 4 and 8-byte types, and a condition of
random values (the blend has no branch to get wrong on either side)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil
import cuvil_testlib as tl

EXPAND = [((1, 5, 1, 1), (2, 5, 7, 9)), ((5, 1), (3, 5, 6)), ((1, 4, 1, 6), (3, 4, 5, 6)), ((3, 1, 1), (3, 1, 8)),
          ((7,), (2, 3, 7)), ((2, 1, 3, 1), (2, 4, 3, 5)), ((1, 1), (1, 1)), ((4, 1), (1, 1))]


@pytest.mark.parametrize("xs,shape", EXPAND)
def test_expand_against_numpy(tmp_path, xs, shape):
    rng = np.random.default_rng(len(xs) * 7 + sum(shape))
    x = rng.standard_normal(xs).astype(np.float32)
    path = tl.onnx_graph_model(tmp_path / "e.onnx", [helper.make_node("Expand", ["x", "s"], ["y"])],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))], [("y", TensorProto.FLOAT)],
                               [numpy_helper.from_array(np.array(shape, np.int64), "s")])
    got = cuvil.load(tl.compile(path, tmp_path / "e"))(x=x)
    want = x * np.ones(shape, np.float32)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


TILE = [((2, 3), (1, 4)), ((2, 3), (3, 1)), ((2, 1, 3), (2, 5, 2)), ((4, 5, 6), (1, 1, 3)), ((3, 4), (2, 2)),
        ((1, 3, 1), (4, 1, 5)), ((5,), (1,))]


@pytest.mark.parametrize("t,np_t", [(TensorProto.FLOAT, np.float32), (TensorProto.INT64, np.int64),
                                    (TensorProto.UINT8, np.uint8), (TensorProto.FLOAT16, np.float16)])
@pytest.mark.parametrize("xs,reps", TILE)
def test_tile_against_numpy(tmp_path, xs, reps, t, np_t):
    rng = np.random.default_rng(sum(xs) + sum(reps))
    x = (rng.standard_normal(xs) * 50).astype(np_t)
    path = tl.onnx_graph_model(tmp_path / "t.onnx", [helper.make_node("Tile", ["x", "r"], ["y"])],
                               [helper.make_tensor_value_info("x", t, list(xs))], [("y", t)],
                               [numpy_helper.from_array(np.array(reps, np.int64), "r")])
    got = cuvil.load(tl.compile(path, tmp_path / "t"))(x=x)
    np.testing.assert_array_equal(got, np.tile(x, reps))


WHERE = [((3, 4, 5), (3, 4, 5), (3, 4, 5)), ((3, 4, 1), (3, 4, 5), (1, 1, 5)), ((1, 4, 5), (3, 1, 5), (3, 4, 1)),
         ((5,), (2, 3, 5), ()), ((2, 3, 1), (), (2, 3, 7)), ((64, 33), (64, 33), (1, 33))]


@pytest.mark.parametrize("t,np_t", [(TensorProto.FLOAT, np.float32), (TensorProto.INT64, np.int64),
                                    (TensorProto.BOOL, np.bool_), (TensorProto.FLOAT16, np.float16)])
@pytest.mark.parametrize("cs,xs,ys", WHERE)
def test_where_against_numpy(tmp_path, cs, xs, ys, t, np_t):
    rng = np.random.default_rng(len(cs) + 10 * len(xs) + 100 * len(ys))
    c = rng.random(cs) < 0.5
    x = (rng.standard_normal(xs) * 50).astype(np_t)
    y = (rng.standard_normal(ys) * 50).astype(np_t)
    vi = helper.make_tensor_value_info
    path = tl.onnx_graph_model(tmp_path / "w.onnx", [helper.make_node("Where", ["c", "x", "y"], ["o"])],
                               [vi("c", TensorProto.BOOL, list(cs)), vi("x", t, list(xs)), vi("y", t, list(ys))], [("o", t)])
    got = cuvil.load(tl.compile(path, tmp_path / "w"))(c=c, x=x, y=y)
    want = np.where(c, x, y)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


ARG = [((3, 7, 5), 1), ((2, 300, 4), 1), ((4, 9, 300), 1), ((6, 5), 0), ((2, 3, 4), 2)]


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last", [0, 1])
@pytest.mark.parametrize("shape,axis", ARG)
def test_arg_extremes(tmp_path, shape, axis, select_last, op):
    """ArgMax / ArgMin over an axis with inner positions (the float32 path that walks the axis
    outermost, in chunks of 256 positions: 300 crosses one) and without: ties (values rounded to
    a few levels) against ONNX Runtime, with select_last the last of equal extremes; then a NaN
    in some columns, where Cuvil takes the first NaN (numpy's argmax; ONNX Runtime skips NaN)."""
    rng = np.random.default_rng(sum(shape) + axis)
    x = np.round(rng.standard_normal(shape) * 2).astype(np.float32)
    path = tl.onnx_graph_model(tmp_path / "a.onnx", [helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=0,
                                                                        select_last_index=select_last)],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], [("y", TensorProto.INT64)],
                               opset=13)
    model = cuvil.load(tl.compile(path, tmp_path / "a"))
    np.testing.assert_array_equal(model(x=x), tl.ort_run(path, {"x": x})["y"])
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, size=max(1, flat.size // 40))] = np.nan
    xm = np.moveaxis(x, axis, -1)
    ext = xm.max(axis=-1, initial=-np.inf, where=~np.isnan(xm)) if op == "ArgMax" else \
        xm.min(axis=-1, initial=np.inf, where=~np.isnan(xm))
    hit = xm == ext[..., None]
    n = xm.shape[-1]
    pick = (n - 1 - np.argmax(hit[..., ::-1], axis=-1)) if select_last else np.argmax(hit, axis=-1)
    nan = np.isnan(xm)
    np.testing.assert_array_equal(model(x=x), np.where(nan.any(axis=-1), np.argmax(nan, axis=-1), pick))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes", [[2, 3], [1]])
def test_reduce_extremes_with_nan(tmp_path, op, axes):
    """ReduceMax / ReduceMin over H and W (contiguous segments of 37 x 41, past the kernel's
    32-wide partial results and with a tail) and over the channels (rows): a NaN anywhere in a
    reduced set gives NaN (numpy's max), the others the extreme."""
    rng = np.random.default_rng(len(axes))
    x = rng.standard_normal((2, 5, 37, 41)).astype(np.float32)
    x[0, 1, 3, 40] = np.nan
    x[1, 4, 36, 0] = np.nan
    x[1, 2, 0, 5] = np.nan
    path = tl.onnx_graph_model(tmp_path / "r.onnx", [helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=1)],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                               [("y", TensorProto.FLOAT)], opset=13)
    got = cuvil.load(tl.compile(path, tmp_path / "r"))(x=x)
    want = (np.max if op == "ReduceMax" else np.min)(x, axis=tuple(axes), keepdims=True)
    np.testing.assert_array_equal(got, want)


TOPK = [((40, 112), -1, 10), ((3, 50, 4), 1, 7), ((6, 9), 1, 9), ((2, 1000), 1, 300), ((5, 8), 0, 2)]


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("shape,axis,k", TOPK)
def test_topk_float32(tmp_path, shape, axis, k, largest):
    """TopK on float32 (its selection by 64-bit keys): ties (values rounded to a few levels, +0
    and -0 equal) come in index order, against ONNX Runtime; then NaN, which comes first for
    largest and last otherwise (ties among NaN by index), against that order sorted by numpy."""
    rng = np.random.default_rng(sum(shape) + k + largest)
    x = np.round(rng.standard_normal(shape) * 2).astype(np.float32)
    x[x == 0] = np.where(rng.random(int((x == 0).sum())) < 0.5, np.float32(-0.0), np.float32(0.0))
    vi = helper.make_tensor_value_info
    path = tl.onnx_graph_model(tmp_path / "k.onnx", [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis,
                                                                        largest=largest)],
                               [vi("x", TensorProto.FLOAT, list(shape))], [("v", TensorProto.FLOAT), ("i", TensorProto.INT64)],
                               [numpy_helper.from_array(np.array([k], np.int64), "k")], opset=11)
    model = cuvil.load(tl.compile(path, tmp_path / "k"))
    got_v, got_i = model(x=x)
    want = tl.ort_run(path, {"x": x})
    np.testing.assert_array_equal(got_i, want["i"])
    np.testing.assert_array_equal(got_v, want["v"])
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, size=max(2, flat.size // 30))] = np.nan
    got_v, got_i = model(x=x)
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    nan = np.isnan(xm)
    key = np.where(nan, -np.inf if largest else np.inf, -xm if largest else xm)   # NaN first / last
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    np.testing.assert_array_equal(np.moveaxis(got_i, axis, -1), order)
    np.testing.assert_array_equal(np.moveaxis(got_v, axis, -1), np.take_along_axis(xm, order, axis=-1))
    assert n >= k


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("t,np_t", [(TensorProto.FLOAT, np.float32), (TensorProto.INT64, np.int64),
                                    (TensorProto.UINT8, np.uint8)])
def test_gather_elements_rows(tmp_path, axis, t, np_t):
    """GatherElements (its row-by-row path: a row's base once, each element its index times the
    axis' stride) on data [3, 5, 7] with indices smaller than the data on the other axes, int32
    and negative indices, against a loop over every index written here."""
    rng = np.random.default_rng(axis + 10)
    data = (rng.standard_normal((3, 5, 7)) * 100).astype(np_t)
    ishape = [2, 4, 6]
    ax = axis % 3
    ishape[ax] = 9
    idx = rng.integers(-data.shape[ax], data.shape[ax], ishape).astype(np.int32)
    want = np.empty(ishape, np_t)
    for c in np.ndindex(*ishape):
        src = list(c)
        src[ax] = idx[c] % data.shape[ax]
        want[c] = data[tuple(src)]
    vi = helper.make_tensor_value_info
    path = tl.onnx_graph_model(tmp_path / "g.onnx", [helper.make_node("GatherElements", ["d", "i"], ["y"], axis=axis)],
                               [vi("d", t, [3, 5, 7]), vi("i", TensorProto.INT32, ishape)], [("y", t)], opset=13)
    got = cuvil.load(tl.compile(path, tmp_path / "g"))(d=data, i=idx)
    np.testing.assert_array_equal(got, want)
