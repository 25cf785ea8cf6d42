"""Expand, Tile and Where (typed.c's row-by-row copies and blends) against numpy on shapes that
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
