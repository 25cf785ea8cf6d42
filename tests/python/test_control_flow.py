"""Regions and control flow (issue 31, item 3): ONNX's If compiles to C control flow over its
branches (src/ir/ops/op_if.c, codegen.c): the branches' nodes are regions of the graph that run
only when the condition picks them, read the values around them, may give outputs of different
shapes (sizes the run finds) and nest; a constant condition keeps only the branch it takes.
References: ONNX Runtime, PyTorch (a TorchScript export of data-dependent control flow)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _branch(name, nodes, outputs, inits=()):
    return helper.make_graph(nodes, name, [], [_vi(o, t, None) for o, t in outputs], list(inits))


def _save(tmp_path, name, graph):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, path)
    return path


def test_if_branches_of_different_shapes_nested(tmp_path):
    """c = sum(x) > 0. then: y = x * w + 1 (w an outer constant), z = an inner If on d: x[:, :2]
    or Neg(x[:, :3]); else: y = x[:2] * 3 (another shape), z = Identity(x) (ONNX Runtime wants
    the Identity; Cuvil also takes an outer value returned as is).
    Outputs after it use y and z. ONNX Runtime on inputs taking every path."""
    inner = helper.make_node(
        "If", ["d"], ["z"],
        then_branch=_branch("it", [helper.make_node("Slice", ["x", "s0", "e2", "a1"], ["zt"])], [("zt", TensorProto.FLOAT)]),
        else_branch=_branch("ie", [helper.make_node("Slice", ["x", "s0", "e3", "a1"], ["ze0"]),
                                   helper.make_node("Neg", ["ze0"], ["ze"])], [("ze", TensorProto.FLOAT)]))
    then_g = _branch("then", [helper.make_node("Mul", ["x", "w"], ["t0"]), helper.make_node("Add", ["t0", "one"], ["yt"]),
                              inner], [("yt", TensorProto.FLOAT), ("z", TensorProto.FLOAT)],
                     [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    else_g = _branch("else", [helper.make_node("Slice", ["x", "s0", "e2", "a0"], ["e0"]),
                              helper.make_node("Mul", ["e0", "three"], ["ye"]), helper.make_node("Identity", ["x"], ["xe"])],
                     [("ye", TensorProto.FLOAT), ("xe", TensorProto.FLOAT)],
                     [helper.make_tensor("three", TensorProto.FLOAT, [], [3.0])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
             helper.make_node("Greater", ["sx", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y", "zz"], then_branch=then_g, else_branch=else_g),
             helper.make_node("ReduceSum", ["y"], ["ys"], keepdims=1),
             helper.make_node("Relu", ["zz"], ["zr"])]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [4], [1, 2, 3, 4]), helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
             helper.make_tensor("s0", TensorProto.INT64, [1], [0]), helper.make_tensor("e2", TensorProto.INT64, [1], [2]),
             helper.make_tensor("e3", TensorProto.INT64, [1], [3]), helper.make_tensor("a0", TensorProto.INT64, [1], [0]),
             helper.make_tensor("a1", TensorProto.INT64, [1], [1])]
    g = helper.make_graph(nodes, "ifs", [_vi("x", TensorProto.FLOAT, [3, 4]), _vi("d", TensorProto.BOOL, [])],
                          [_vi("y", TensorProto.FLOAT, None), _vi("ys", TensorProto.FLOAT, None),
                           _vi("zr", TensorProto.FLOAT, None)], inits)
    path = _save(tmp_path, "ifs", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(23)
    for sign in (1, -1, 1, -1):
        for d in (True, False):
            x = (sign * np.abs(rng.standard_normal((3, 4)))).astype(np.float32)
            tl.check_vs_ort(model, path, {"x": x, "d": np.array(d)})


def test_if_constant_condition_keeps_one_branch(tmp_path):
    """A condition the compiler computes (Shape(x)[0] == 3) takes the then branch; the else
    branch, which could not even be inferred (a MatMul of mismatched shapes), is left out, and
    the model is not held back by control flow."""
    then_g = _branch("then", [helper.make_node("Add", ["x", "x"], ["yt"])], [("yt", TensorProto.FLOAT)])
    else_g = _branch("else", [helper.make_node("MatMul", ["x", "x"], ["ye"])], [("ye", TensorProto.FLOAT)])
    nodes = [helper.make_node("Shape", ["x"], ["sh"]), helper.make_node("Gather", ["sh", "i0"], ["n0"], axis=0),
             helper.make_node("Equal", ["n0", "three"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "cif", [_vi("x", TensorProto.FLOAT, [3, 5])], [_vi("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("i0", TensorProto.INT64, [], [0]),
                           helper.make_tensor("three", TensorProto.INT64, [], [3])])
    path = _save(tmp_path, "cif", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(model(x=x), x + x, rtol=1e-6)


class _DataDependent(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            y = torch.relu(x) * 2.0
        else:
            y = x[:, :2] - 1.0
        return y + 0.5


def test_torch_script_if_matches_pytorch(tmp_path):
    """A TorchScript export of data-dependent control flow (an If whose branches give
    [N, 4] or [N, 2]) matches PyTorch on both paths."""
    path = tmp_path / "dd.onnx"
    scripted = torch.jit.script(_DataDependent())
    torch.onnx.export(scripted, (torch.randn(3, 4),), str(path), input_names=["x"], output_names=["y"], opset_version=17,
                      dynamo=False)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    for sign in (1.0, -1.0, 1.0):
        x = (sign * torch.rand(3, 4) + 0.01 * sign).float()
        want = _DataDependent()(x).numpy()
        got = model(x=x.numpy())
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_if_condition_shapes_and_types_refused(tmp_path):
    """Branches of different ranks are refused naming the node; a condition that is not one bool
    too."""
    then_g = _branch("then", [helper.make_node("Identity", ["x"], ["yt"])], [("yt", TensorProto.FLOAT)])
    else_g = _branch("else", [helper.make_node("ReduceSum", ["x"], ["ye"], keepdims=0)], [("ye", TensorProto.FLOAT)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="the_if")],
                          "bad", [_vi("x", TensorProto.FLOAT, [3]), _vi("c", TensorProto.BOOL, [])],
                          [_vi("y", TensorProto.FLOAT, None)])
    proc = tl.compile_raw(_save(tmp_path, "bad", g), tmp_path / "bad.so")
    assert proc.returncode != 0 and "the_if" in proc.stderr and "rank" in proc.stderr, proc.stderr


def test_if_branches_reuse_names_and_read_run_time_sizes(tmp_path):
    """Both branches name their values alike (separate scopes, as exporters write them); the
    then branch reshapes x by a shape that is an input of the model (a size read when the
    model runs, inside a branch), the else branch takes a Unique (a count the kernel finds)."""
    then_g = _branch("then", [helper.make_node("Reshape", ["x", "shape"], ["t"]),
                              helper.make_node("ReduceSum", ["t", "ax"], ["u"], keepdims=0)], [("u", TensorProto.FLOAT)])
    else_g = _branch("else", [helper.make_node("Unique", ["x"], ["t"]),
                              helper.make_node("Neg", ["t"], ["u"])], [("u", TensorProto.FLOAT)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "reuse",
                          [_vi("x", TensorProto.FLOAT, [6]), _vi("c", TensorProto.BOOL, []),
                           _vi("shape", TensorProto.INT64, [2])], [_vi("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("ax", TensorProto.INT64, [1], [1])])
    path = _save(tmp_path, "reuse", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.array([3, 1, 3, 2, 1, 3], np.float32)
    for c, shape in ((True, [2, 3]), (False, [2, 3]), (True, [3, -1]), (True, [6, 1]), (False, [1, 6])):
        tl.check_vs_ort(model, path, {"x": x, "c": np.array(c), "shape": np.array(shape, np.int64)})


def test_if_output_declared_smaller_than_a_branch_fails_cleanly(tmp_path):
    """Branches give [5] and [3], the model declares the output [3]: the planned room is 3, so
    the run that takes the [5] branch fails with a message before copying (never past the
    buffer); the other path matches ONNX Runtime."""
    then_g = _branch("then", [helper.make_node("Neg", ["x"], ["yt"])], [("yt", TensorProto.FLOAT)])
    else_g = _branch("else", [helper.make_node("Slice", ["x", "s0", "e3"], ["ye"])], [("ye", TensorProto.FLOAT)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "decl",
                          [_vi("x", TensorProto.FLOAT, [5]), _vi("c", TensorProto.BOOL, [])], [_vi("y", TensorProto.FLOAT, [3])],
                          [helper.make_tensor("s0", TensorProto.INT64, [1], [0]), helper.make_tensor("e3", TensorProto.INT64, [1], [3])])
    path = _save(tmp_path, "decl", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(model(x=x, c=np.array(False)), x[:3])
    with pytest.raises(cuvil.CuvilError, match=r"If.*larger than its declared or --dim size"):
        model(x=x, c=np.array(True))
