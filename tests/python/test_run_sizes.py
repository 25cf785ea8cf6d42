"""Sizes only the run knows (issue 31, item 2): NonZero's count is a symbol whose value the
kernel finds as the model runs (src/ir/cir.c, cir_rt_sym); memory is planned for its upper
bound, the nodes after it compute their sizes from it, run_shapes reports the outputs' actual
dims, and a guard on it is checked before the node that assumes it. References: ONNX Runtime
and PyTorch, at inputs with no, some and all elements non-zero."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl


def _i64(name, vals, shape=None):
    return helper.make_tensor(name, TensorProto.INT64, [len(vals)] if shape is None else shape, vals)


def _model(tmp_path, name, nodes, inputs, outputs, inits=(), opset=17):
    return tl.onnx_graph_model(tmp_path / f"{name}.onnx", nodes, inputs, outputs, inits, opset)


def _sparse(rng, shape, p, dtype=np.float32):
    a = rng.standard_normal(shape).astype(np.float32)
    a[rng.random(shape) >= p] = 0
    return a.astype(dtype)


def _check(model, path, feeds):
    tl.check_vs_ort(model, path, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("symbolic", [False, True], ids=["fixed", "symbolic"])
def test_nonzero_then_gather_and_reduce(tmp_path, symbolic):
    """idx = NonZero(x); v = GatherND(x, Transpose(idx)); outputs idx, v * 2, sum(v), and
    Shape(v): every one sized by the count the run finds, with x's dims fixed or symbolic."""
    nodes = [helper.make_node("NonZero", ["x"], ["idx"]),
             helper.make_node("Transpose", ["idx"], ["idxt"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idxt"], ["v"]),
             helper.make_node("Mul", ["v", "two"], ["v2"]),
             helper.make_node("ReduceSum", ["v"], ["s"], keepdims=0),
             helper.make_node("Shape", ["v"], ["n"])]
    dims = ["R", "C"] if symbolic else [6, 7]
    path = _model(tmp_path, "nz", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                  [("idx", TensorProto.INT64), ("v2", TensorProto.FLOAT), ("s", TensorProto.FLOAT),
                   ("n", TensorProto.INT64)], [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    so = tl.compile(path, tmp_path / "build", dims={"R": "1:8", "C": "1:9"} if symbolic else None)
    model = cuvil.load(so)
    assert model._desc.n_run_sizes == 1
    rng = np.random.default_rng(3)
    shapes = [(6, 7)] if not symbolic else [(1, 1), (8, 9), (3, 5), (6, 7), (2, 9)]
    for shp in shapes:
        for p in (0.0, 0.3, 1.0, 0.7):   # none, some, all non-zero; then fewer than before
            _check(model, path, {"x": _sparse(rng, shp, p)})
    # cuvil-run writes the outputs at the dims the run found
    x = _sparse(rng, (6, 7), 0.4)
    got = tl.run(so, {"x": x}, tmp_path / "run")
    want = tl.ort_run(path, {"x": x})
    tl.assert_outputs_close(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.float16, np.int8, np.float64])
def test_nonzero_element_types(tmp_path, dtype):
    """Integers, booleans, float16 (its -0 is zero) and float64, against numpy.nonzero (ONNX
    Runtime has no int8 or float64 NonZero)."""
    onnx_t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    path = _model(tmp_path, "nzt", [helper.make_node("NonZero", ["x"], ["idx"])],
                  [helper.make_tensor_value_info("x", onnx_t, [3, "N", 2])], [("idx", TensorProto.INT64)])
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"N": "0:5"}))
    rng = np.random.default_rng(4)
    for n in (0, 1, 5, 3):
        x = (rng.integers(-1, 2, (3, n, 2))).astype(dtype)
        if dtype == np.float16:
            x[x == 0] = np.float16(-0.0)
        got = model(x=x)
        want = np.array(np.nonzero(x), dtype=np.int64).reshape(3, -1)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_constant_input_folds(tmp_path):
    """NonZero of a constant is computed at compile time: no size for the run to find."""
    c = np.array([[0, 1.5, 0], [2, 0, -3]], np.float32)
    path = _model(tmp_path, "nzc", [helper.make_node("NonZero", ["c"], ["idx"]),
                                    helper.make_node("Cast", ["idx"], ["f"], to=TensorProto.FLOAT),
                                    helper.make_node("Add", ["f", "x"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT)],
                  [onnx.numpy_helper.from_array(c, "c")])
    model = cuvil.load(tl.compile(path, tmp_path / "build"))
    assert model._desc.n_run_sizes == 0
    _check(model, path, {"x": np.ones((2, 3), np.float32)})


def test_guard_on_a_run_size_is_checked_before_its_node(tmp_path):
    """v (count elements) + w (4 elements): the count must be 4 (or 1), which only the run knows:
    a run with another count fails naming the Add; with 4 it matches ONNX Runtime."""
    nodes = [helper.make_node("NonZero", ["x"], ["idx"]),
             helper.make_node("Transpose", ["idx"], ["idxt"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idxt"], ["v"]),
             helper.make_node("Add", ["v", "w"], ["y"], name="the_add")]
    path = _model(tmp_path, "nzg", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]),
                                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])],
                  [("y", TensorProto.FLOAT)])
    model = cuvil.load(tl.compile(path, tmp_path / "build"))
    x = np.zeros((3, 3), np.float32)
    x[0, 1], x[1, 2], x[2, 0], x[2, 2] = 1, 2, 3, 4
    w = np.arange(4, dtype=np.float32)
    _check(model, path, {"x": x, "w": w})
    x[1, 1] = 5
    with pytest.raises(cuvil.CuvilError, match=r"the_add.*\(5 and 4\)"):
        model(x=x, w=w)


class _BoolIndex(torch.nn.Module):
    def forward(self, x, t):
        v = x[x > t]            # NonZero + GatherND in the export
        return v * 2.0, v.sum(), torch.nonzero(x < -t)


def test_torch_boolean_indexing_matches_pytorch(tmp_path):
    """x[x > t] and torch.nonzero from a torch.onnx export (TorchScript exporter), with x's dims
    symbolic: the outputs' sizes follow the data, as in PyTorch."""
    m = _BoolIndex().eval()
    x0, t0 = torch.randn(4, 6), torch.tensor(0.5)
    path = tmp_path / "boolidx.onnx"
    torch.onnx.export(m, (x0, t0), path, input_names=["x", "t"], output_names=["v2", "s", "nz"], opset_version=17,
                      dynamic_axes={"x": {0: "B", 1: "L"}}, dynamo=False)
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"B": "1:6", "L": "1:10"}))
    rng = np.random.default_rng(5)
    for b, l, t in [(4, 6, 0.5), (1, 1, 0.0), (6, 10, 3.0), (2, 9, -5.0), (5, 3, 0.8)]:
        x = torch.from_numpy(rng.standard_normal((b, l)).astype(np.float32))
        tt = torch.tensor(t, dtype=torch.float32)
        want = m(x, tt)
        got = model(x=x.numpy(), t=tt.numpy())
        for g, w in zip(got, want):
            w = w.numpy()
            assert g.shape == w.shape, (b, l, t, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_matches_onnxruntime(tmp_path, axis):
    """Compress along an axis, or over the flattened input without one; a run-time condition
    (its count a size the run finds) and a constant one (a number), with x's dims symbolic."""
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Compress", ["x", "c"], ["y"], **kw),
             helper.make_node("Compress", ["x", "k"], ["z"], **kw),
             helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0)]
    clen = "L"
    path = _model(tmp_path, "cmp", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["A", 4, "B"]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [clen])],
                  [("y", TensorProto.FLOAT), ("z", TensorProto.FLOAT), ("s", TensorProto.FLOAT)],
                  [onnx.numpy_helper.from_array(np.array([True, False, True]), "k")])
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"A": "3:5", "B": "3:6", "L": "0:3"}))
    rng = np.random.default_rng(6)
    for a, b, l in [(3, 3, 3), (5, 6, 0), (4, 5, 2), (3, 6, 3), (5, 3, 1)]:
        for p in (0.0, 0.5, 1.0):
            feeds = {"x": rng.standard_normal((a, 4, b)).astype(np.float32), "c": rng.random(l) < p}
            _check(model, path, feeds)


def test_compress_condition_longer_than_axis_is_refused(tmp_path):
    """ONNX Runtime refuses a condition longer than the axis; so does the compiled model, naming
    the node, when only the run knows both lengths (and the compiler when it knows them)."""
    node = helper.make_node("Compress", ["x", "c"], ["y"], axis=1, name="cmp_node")
    path = _model(tmp_path, "cmpg", [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "B"]),
                                             helper.make_tensor_value_info("c", TensorProto.BOOL, ["L"])],
                  [("y", TensorProto.FLOAT)])
    model = cuvil.load(tl.compile(path, tmp_path / "build", dims={"B": "1:4", "L": "1:6"}))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _check(model, path, {"x": x, "c": np.array([True, False, True])})
    with pytest.raises(cuvil.CuvilError, match=r"cmp_node.*condition's length within the axis: 5 exceeds 3"):
        model(x=x, c=np.ones(5, bool))
    fixed = _model(tmp_path, "cmpf", [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                              helper.make_tensor_value_info("c", TensorProto.BOOL, [5])],
                   [("y", TensorProto.FLOAT)])
    proc = tl.compile_raw(fixed, tmp_path / "f.so")
    tl.assert_clean_failure(proc, mentions=["cmp_node", "5 exceeds 3"])
