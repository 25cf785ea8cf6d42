"""Regions and control flow (issue 31, item 3): ONNX's If compiles to C control flow over its
branches (src/ir/ops/op_if.c, codegen.c): the branches' nodes are regions of the graph that run
only when the condition picks them, read the values around them, may give outputs of different
shapes (sizes the run finds) and nest; a constant condition keeps only the branch it takes.
Loop and Scan compile to a C loop over their body (src/ir/ops/op_loop.c): states carry from one
iteration to the next, scan outputs stack the iterations' elements, a Loop's count is a size
the run finds. References: ONNX Runtime, PyTorch (TorchScript exports of data-dependent control
flow)."""
from __future__ import annotations

import subprocess

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


@pytest.mark.parametrize("failing", ["else", "both"])
def test_if_branch_that_cannot_run_fails_only_when_taken(tmp_path, failing):
    """A run-time condition (an input) whose else branch cannot be inferred at the sizes compiled
    for (x [N, 5] times itself, compiled at N = 3; TorchScript exports carry such branches: silero-vad's
    8 kHz path at a 512-sample chunk). The model compiles with a note; the then branch matches
    ONNX Runtime, and a run that takes the else branch fails naming the If and the reason, as
    ONNX Runtime's does. When neither branch can run, the compile fails."""
    bad = helper.make_node("MatMul", ["x", "x"], ["ye"])
    then_g = _branch("then", [helper.make_node("Add", ["x", "x"], ["yt"]) if failing == "else" else
                              helper.make_node("MatMul", ["x", "x"], ["yt"])], [("yt", TensorProto.FLOAT)])
    else_g = _branch("else", [bad], [("ye", TensorProto.FLOAT)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="pick")], "dead",
                          [_vi("x", TensorProto.FLOAT, ["N", 5]), _vi("c", TensorProto.BOOL, [])], [_vi("y", TensorProto.FLOAT, None)])
    path = _save(tmp_path, "dead", g)
    so = tmp_path / "dead.so"
    p = subprocess.run([str(tl.bin_path("cuvil-compile")), "--model", str(path), "--output", str(so), "--dim", "N=3"],
                       capture_output=True, text=True)
    if failing == "both":
        assert p.returncode != 0 and "MatMul" in p.stderr and not so.exists(), p.stderr
        return
    assert p.returncode == 0 and "If 'pick': its else branch cannot run at these sizes" in p.stderr, p.stderr
    model = cuvil.load(so)
    x = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(model(x=x, c=np.array(True)), tl.ort_run(path, {"x": x, "c": np.array(True)})["y"], rtol=1e-6)
    with pytest.raises(cuvil.CuvilError, match=r"If 'pick'.*else branch cannot run at the sizes compiled for: MatMul"):
        model(x=x, c=np.array(False))
    with pytest.raises(Exception):   # (ONNX Runtime: the MatMul's shapes)
        tl.ort_run(path, {"x": x, "c": np.array(False)})


def test_if_dead_branch_leaves_no_size_check_and_a_late_constant_condition_is_refused(tmp_path):
    """The dropped branch's size assumptions go with it: its Add of x [3, 5] and x2 [K, 5] (K a
    range) would check K against 3, and a run of the other branch with K = 5 must not fail on
    it. A condition that folds to a constant only after shape inference (ReduceMax over 5000
    products: folded late) and picks the branch that cannot run fails the compile."""
    then_g = _branch("then", [helper.make_node("Identity", ["x"], ["yt"])], [("yt", TensorProto.FLOAT)])
    else_g = _branch("else", [helper.make_node("Add", ["x", "x2"], ["s"]), helper.make_node("MatMul", ["s", "s"], ["ye"])],
                     [("ye", TensorProto.FLOAT)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="pick")], "guards",
                          [_vi("x", TensorProto.FLOAT, ["N", 5]), _vi("x2", TensorProto.FLOAT, ["K", 5]), _vi("c", TensorProto.BOOL, [])],
                          [_vi("y", TensorProto.FLOAT, None)])
    path = _save(tmp_path, "guards", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"N": "3", "K": "1:8"}))
    x = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(model(x=x, x2=np.ones((5, 5), np.float32), c=np.array(True)), x)
    with pytest.raises(cuvil.CuvilError, match=r"else branch cannot run"):
        model(x=x, x2=np.ones((3, 5), np.float32), c=np.array(False))
    # the condition: ReduceMax(w * 2) > 0 on 5000 weights of -1, known only once folding runs
    nodes = [helper.make_node("Mul", ["w", "two"], ["w2"]), helper.make_node("ReduceMax", ["w2"], ["m"], keepdims=0),
             helper.make_node("Greater", ["m", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="pick")]
    g = helper.make_graph(nodes, "late", [_vi("x", TensorProto.FLOAT, ["N", 5]), _vi("x2", TensorProto.FLOAT, ["K", 5])],
                          [_vi("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("w", TensorProto.FLOAT, [5000], [-1.0] * 5000),
                           helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]), helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    path = _save(tmp_path, "late", g)
    with pytest.raises(tl.CuvilError, match=r"If 'pick': the branch its condition takes cannot run at these sizes: MatMul"):
        tl.compile(path, tmp_path / "c", dims={"N": "3", "K": "1:8"})


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


def _body(name, nodes, inputs, outputs, inits=()):
    return helper.make_graph(nodes, name, [_vi(n, t, sh) for n, t, sh in inputs],
                             [_vi(n, t, None) for n, t in outputs], list(inits))


def _loop_model(tmp_path, name, body, n_states, inputs, outputs, inits=(), loop_inputs=None):
    loop_inputs = loop_inputs or [i.name for i in inputs]
    outs = [o[0] for o in outputs]
    g = helper.make_graph([helper.make_node("Loop", loop_inputs, outs, body=body, name="the_loop")], name, inputs,
                          [_vi(n, t, sh) for n, t, sh in outputs], list(inits))
    return _save(tmp_path, name, g)


F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def test_loop_trip_count_and_condition_with_scan_outputs(tmp_path):
    """for i < M while cond: s = s + x * i; cond = sum(s) < limit; scan outputs s and i. M is
    an input (its bound from --dim M=0:12, so the scan outputs' room is 12 iterations); the
    condition may end it early. ONNX Runtime at M = 0, 1, 5, 12 and limits that stop it at
    different iterations."""
    body = _body("body", [helper.make_node("Cast", ["i"], ["fi"], to=F),
                          helper.make_node("Mul", ["x", "fi"], ["xi"]),
                          helper.make_node("Add", ["s_in", "xi"], ["s_out"]),
                          helper.make_node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
                          helper.make_node("Less", ["tot", "limit"], ["c_out"]),
                          helper.make_node("Identity", ["s_out"], ["s_scan"]),
                          helper.make_node("Identity", ["i"], ["i_scan"])],
                 [("i", I64, []), ("c_in", B, []), ("s_in", F, [2, 3])],
                 [("c_out", B), ("s_out", F), ("s_scan", F), ("i_scan", I64)])
    path = _loop_model(tmp_path, "loop1", body, 1,
                       [_vi("M", I64, []), _vi("c", B, []), _vi("s0", F, [2, 3]), _vi("x", F, [2, 3]),
                        _vi("limit", F, [])],
                       [("s", F, None), ("ss", F, None), ("is", I64, None)], loop_inputs=["M", "c", "s0"])
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"M": "0:12"}))
    rng = np.random.default_rng(5)
    for m, limit in ((0, 100.0), (1, 100.0), (5, 1e9), (12, 1e9), (12, 40.0), (7, 10.0)):
        feeds = {"M": np.array(m, np.int64), "c": np.array(True), "s0": rng.random((2, 3), np.float32),
                 "x": rng.random((2, 3), np.float32), "limit": np.array(limit, np.float32)}
        tl.check_vs_ort(model, path, feeds)
    feeds["c"] = np.array(False)   # no iteration at all
    tl.check_vs_ort(model, path, feeds)
    # 13 iterations do not fit the room --dim M=0:12 planned: the run fails before writing past it
    with pytest.raises(cuvil.CuvilError, match=r"the_loop.*more iterations than"):
        model(**{**feeds, "c": np.array(True), "M": np.array(13, np.int64), "limit": np.array(1e9, np.float32)})
    tl.check_vs_ort(model, path, {**feeds, "c": np.array(True), "M": np.array(13, np.int64)})   # stops early: fine


def test_loop_swapped_states_and_a_captured_value(tmp_path):
    """Fibonacci pairs: (a, b) -> (b, a + b), where the body returns b_in itself as a's next
    value (the two states' bytes cross: the copy goes through scratch), with w, a value of the
    graph around it, added each iteration; a constant trip count of 9."""
    body = _body("fib", [helper.make_node("Add", ["a_in", "b_in"], ["ab"]),
                         helper.make_node("Add", ["ab", "w"], ["b_out"])],
                 [("i", I64, []), ("c_in", B, []), ("a_in", F, [4]), ("b_in", F, [4])],
                 [("c_in", B), ("b_in", F), ("b_out", F)])
    g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["w"]),
                           helper.make_node("Loop", ["nine", "", "a0", "b0"], ["a", "b"], body=body)], "fib",
                          [_vi("a0", F, [4]), _vi("b0", F, [4]), _vi("x", F, [4])],
                          [_vi("a", F, None), _vi("b", F, None)],
                          [helper.make_tensor("nine", I64, [], [9]), helper.make_tensor("two", F, [], [2.0])])
    path = _save(tmp_path, "fib", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(7)
    for _ in range(3):
        tl.check_vs_ort(model, path, {"a0": rng.random(4, np.float32), "b0": rng.random(4, np.float32),
                                      "x": rng.random(4, np.float32)}, rtol=1e-5)


def test_nested_loops_with_an_if_inside(tmp_path):
    """An outer Loop over i < 4 whose body runs an inner Loop over j < i + 1 (a trip count the
    outer body computes) accumulating t = t * 0.5 + y, and an If on i being even that adds or
    subtracts the inner result; the outer loop scans out its state. ONNX Runtime."""
    inner = _body("inner", [helper.make_node("Mul", ["t_in", "half"], ["th"]),
                            helper.make_node("Add", ["th", "y"], ["t_out"])],
                  [("j", I64, []), ("ci", B, []), ("t_in", F, [3])], [("ci", B), ("t_out", F)],
                  [helper.make_tensor("half", F, [], [0.5])])
    if_node = helper.make_node("If", ["even"], ["u"],
                               then_branch=_branch("th", [helper.make_node("Add", ["s_in", "t"], ["ut"])], [("ut", F)]),
                               else_branch=_branch("el", [helper.make_node("Sub", ["s_in", "t"], ["ue"])], [("ue", F)]))
    outer = _body("outer", [helper.make_node("Add", ["i", "one"], ["n_inner"]),
                            helper.make_node("Loop", ["n_inner", "", "zeros"], ["t"], body=inner),
                            helper.make_node("Mod", ["i", "two"], ["r"]),
                            helper.make_node("Equal", ["r", "zero"], ["even"]),
                            if_node,
                            helper.make_node("Identity", ["u"], ["u_scan"])],
                  [("i", I64, []), ("c", B, []), ("s_in", F, [3])], [("c", B), ("u", F), ("u_scan", F)],
                  [helper.make_tensor("one", I64, [], [1]), helper.make_tensor("two", I64, [], [2]),
                   helper.make_tensor("zero", I64, [], [0])])
    g = helper.make_graph([helper.make_node("Loop", ["four", "", "s0"], ["s", "us"], body=outer)], "nested",
                          [_vi("s0", F, [3]), _vi("y", F, [3])], [_vi("s", F, None), _vi("us", F, None)],
                          [helper.make_tensor("four", I64, [], [4]), helper.make_tensor("zeros", F, [3], [0, 0, 0])])
    path = _save(tmp_path, "nested", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(11)
    for _ in range(3):
        tl.check_vs_ort(model, path, {"s0": rng.random(3, np.float32), "y": rng.random(3, np.float32)})


def test_scan_axes_and_directions(tmp_path):
    """Scan (opset 17) over two inputs: x scanned along axis 1 forwards, r along axis 0
    backwards; the state is a running product-sum; scan outputs stacked on axis 1 backwards
    and on axis 0 forwards. The scanned length is symbolic (--dim T=1:9). ONNX Runtime at T =
    1, 4, 9."""
    body = _body("sb", [helper.make_node("Mul", ["st", "xe"], ["p"]),
                        helper.make_node("Add", ["p", "re"], ["st2"]),
                        helper.make_node("Neg", ["st2"], ["o1"]),
                        helper.make_node("ReduceSum", ["xe"], ["o2"], keepdims=1)],
                 [("st", F, [2]), ("xe", F, [2]), ("re", F, [2])], [("st2", F), ("o1", F), ("o2", F)])
    g = helper.make_graph([helper.make_node("Scan", ["s0", "x", "r"], ["s", "y1", "y2"], body=body, num_scan_inputs=2,
                                            scan_input_axes=[1, 0], scan_input_directions=[0, 1],
                                            scan_output_axes=[1, 0], scan_output_directions=[1, 0])], "scan",
                          [_vi("s0", F, [2]), _vi("x", F, [2, "T"]), _vi("r", F, ["T", 2])],
                          [_vi("s", F, None), _vi("y1", F, None), _vi("y2", F, None)])
    path = _save(tmp_path, "scan", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"T": "1:9"}))
    rng = np.random.default_rng(13)
    for t in (1, 4, 9):
        tl.check_vs_ort(model, path, {"s0": rng.random(2, np.float32), "x": rng.random((2, t), np.float32),
                                      "r": rng.random((t, 2), np.float32)})


class _RunTimeLoop(torch.nn.Module):
    def forward(self, x, n):
        y = x
        acc = torch.zeros_like(x)
        for i in range(int(n)):
            y = torch.tanh(y * 0.9 + float(i) * 0.1)
            acc = acc + y
        return y, acc


def test_torch_script_loop_over_a_run_time_count_matches_pytorch(tmp_path):
    """A TorchScript export of a Python for loop over a count the caller passes (a Loop whose
    trip count is an input) matches PyTorch at counts 0, 1, 3 and 8."""
    path = tmp_path / "rl.onnx"
    scripted = torch.jit.script(_RunTimeLoop())
    torch.onnx.export(scripted, (torch.randn(2, 5), torch.tensor(3)), str(path), input_names=["x", "n"],
                      output_names=["y", "acc"], opset_version=17, dynamo=False)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    for k in (0, 1, 3, 8):
        x = torch.randn(2, 5)
        want = _RunTimeLoop()(x, torch.tensor(k))
        got = model(x=x.numpy(), n=np.array(k, np.int64))
        for w, gt in zip(want, got):
            np.testing.assert_allclose(gt, w.numpy(), rtol=1e-5, atol=1e-6)


def test_loop_refusals_name_the_node(tmp_path):
    """A state whose shape changes between iterations (a Concat that grows it), a Loop with
    neither trip count nor condition, and scan outputs that nothing bounds (the trip count an
    input without --dim) are refused, naming the Loop and what to do."""
    grow = _body("grow", [helper.make_node("Concat", ["s_in", "s_in"], ["s_out"], axis=0)],
                 [("i", I64, []), ("c", B, []), ("s_in", F, [2])], [("c", B), ("s_out", F)])
    p1 = _loop_model(tmp_path, "grow", grow, 1, [_vi("M", I64, []), _vi("s0", F, [2])], [("s", F, None)],
                     loop_inputs=["M", "", "s0"])
    proc = tl.compile_raw(p1, tmp_path / "g.so")
    assert proc.returncode != 0 and "the_loop" in proc.stderr and "state 0" in proc.stderr, proc.stderr
    p2 = _loop_model(tmp_path, "never", grow, 1, [_vi("s0", F, [2])], [("s", F, None)], loop_inputs=["", "", "s0"])
    proc = tl.compile_raw(p2, tmp_path / "n.so")
    assert proc.returncode != 0 and "never end" in proc.stderr, proc.stderr
    scan = _body("sc", [helper.make_node("Identity", ["s_in"], ["s_out"]), helper.make_node("Neg", ["s_in"], ["e"])],
                 [("i", I64, []), ("c", B, []), ("s_in", F, [2])], [("c", B), ("s_out", F), ("e", F)])
    p3 = _loop_model(tmp_path, "unb", scan, 1, [_vi("M", I64, []), _vi("s0", F, [2])], [("s", F, None), ("es", F, None)],
                     loop_inputs=["M", "", "s0"])
    proc = tl.compile_raw(p3, tmp_path / "u.so")
    assert proc.returncode != 0 and "the_loop" in proc.stderr and "--dim es=0:N" in proc.stderr, proc.stderr


def test_loop_without_condition_input_stops_on_the_body_condition(tmp_path):
    """Loop(M, "", k): the body's condition still ends the loop (ONNX's text calls it ignored
    there; its reference implementation and ONNX Runtime stop on it, and Cuvil follows them).
    Its scan output's count is then a size the run finds, not M."""
    body = _body("b", [helper.make_node("Add", ["k", "i"], ["k2"]), helper.make_node("Less", ["k2", "three"], ["cout"]),
                       helper.make_node("Identity", ["k2"], ["ks"])],
                 [("i", I64, []), ("cin", B, []), ("k", I64, [])], [("cout", B), ("k2", I64), ("ks", I64)],
                 [helper.make_tensor("three", I64, [], [3])])
    g = helper.make_graph([helper.make_node("Loop", ["seven", "", "k0"], ["K", "KS"], body=body)], "nocond",
                          [_vi("k0", I64, [])], [_vi("K", I64, None), _vi("KS", I64, None)],
                          [helper.make_tensor("seven", I64, [], [7])])
    path = _save(tmp_path, "nocond", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    for k0 in (0, 2, 5, -20):
        tl.check_vs_ort(model, path, {"k0": np.array(k0, np.int64)})


def test_nested_loop_scan_output_bounded_by_dim_on_a_body_value(tmp_path):
    """An inner Loop whose trip count the outer body computes (i + 1) has a scan output 'es'.
    With nothing bounding the outer trip count M, nothing bounds 'es': the compile says to give
    --dim es=0:N, and that --dim, naming a value of the body, is taken. With --dim M=0:5 alone
    the outer iteration number is a symbol in 0..4, so i + 1 and 'es' are bounded by 5; a run
    with M = 7 fails at the sixth iteration, before any size passes what was planned. ONNX
    Runtime at M = 0..5."""
    inner = _body("inner", [helper.make_node("Identity", ["ci"], ["co"]), helper.make_node("Cast", ["j"], ["e"], to=F)],
                  [("j", I64, []), ("ci", B, [])], [("co", B), ("e", F)])
    outer = _body("outer", [helper.make_node("Add", ["i", "one"], ["n"]),
                            helper.make_node("Loop", ["n", "T"], ["es"], body=inner),
                            helper.make_node("ReduceSum", ["es"], ["r"], keepdims=0),
                            helper.make_node("Add", ["s", "r"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"])],
                  [("i", I64, []), ("c", B, []), ("s", F, [])], [("c2", B), ("s2", F)],
                  [helper.make_tensor("one", I64, [], [1])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "T", "s0"], ["S"], body=outer)], "nest",
                          [_vi("M", I64, []), _vi("s0", F, [])], [_vi("S", F, None)],
                          [helper.make_tensor("T", B, [], [1])])
    path = _save(tmp_path, "nest", g)
    proc = tl.compile_raw(path, tmp_path / "u.so")
    assert proc.returncode != 0 and "--dim es=0:N" in proc.stderr, proc.stderr
    feeds = lambda m: {"M": np.array(m, np.int64), "s0": np.array(0.5, np.float32)}   # noqa: E731
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"es": "0:5"}))
    for m in range(6):
        tl.check_vs_ort(model, path, feeds(m))
    model = cuvil.load(tl.compile(path, tmp_path / "m", dims={"M": "0:5"}))
    for m in range(6):
        tl.check_vs_ort(model, path, feeds(m))
    with pytest.raises(cuvil.CuvilError, match=r"more iterations than its trip count's bound"):
        model(**feeds(7))


def test_loop_iteration_number_is_a_bounded_symbol(tmp_path):
    """With the trip count bounded (--dim M=0:4), the iteration number i is a symbol in 0..3:
    the body's x[i:i+1] has the shape [1, 3] whatever i is, so Squeeze takes its axis 0 (a
    Slice whose start is only known as the loop runs, on fixed shapes), and the scan output is
    [M, 3]. A run with M = 5 fails at the fifth iteration with a message. ONNX Runtime at M =
    1..4 (at M = 0 it gives the scan output [0, 0], Cuvil [0, 3])."""
    body = _body("b", [helper.make_node("Unsqueeze", ["i", "ax0"], ["st"]), helper.make_node("Add", ["i", "one"], ["e"]),
                       helper.make_node("Unsqueeze", ["e", "ax0"], ["en"]),
                       helper.make_node("Slice", ["x", "st", "en", "ax0"], ["xs"]),
                       helper.make_node("Squeeze", ["xs", "ax0"], ["sq"]), helper.make_node("Add", ["s", "sq"], ["s2"]),
                       helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["sq"], ["scan"])],
                 [("i", I64, []), ("c", B, []), ("s", F, [3])], [("c2", B), ("s2", F), ("scan", F)],
                 [helper.make_tensor("ax0", I64, [1], [0]), helper.make_tensor("one", I64, [], [1])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "c0", "s0"], ["S", "SC"], body=body)], "iter",
                          [_vi("M", I64, []), _vi("c0", B, []), _vi("s0", F, [3]), _vi("x", F, [4, 3])],
                          [_vi("S", F, None), _vi("SC", F, None)])
    path = _save(tmp_path, "iter", g)
    ir = tl.compile(path, tmp_path / "ir", emit="ir", dims={"M": "0:4"}).read_text()
    assert any(" = squeeze " in ln and ": f32[3]" in ln for ln in ir.splitlines()), ir
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"M": "0:4"}))
    x = np.random.default_rng(3).random((4, 3), np.float32)
    feeds = lambda m: {"M": np.array(m, np.int64), "c0": np.array(True), "s0": np.zeros(3, np.float32), "x": x}   # noqa: E731
    for m in (1, 2, 4):
        tl.check_vs_ort(model, path, feeds(m))
    s, sc = model(**feeds(0))
    assert sc.shape == (0, 3) and np.array_equal(s, np.zeros(3, np.float32))
    with pytest.raises(cuvil.CuvilError, match=r"more iterations than its trip count's bound"):
        model(**feeds(5))


def test_subgraph_reading_its_own_nodes_output_is_refused(tmp_path):
    """An If's branch or a Loop's body that reads an output of that same If or Loop is a cycle:
    refused by name, not taken for an outer value (found by fuzz_model_struct)."""
    br = lambda nm: helper.make_graph([helper.make_node("Neg", ["y"], [nm + "_o"], name=nm + "_neg")], nm, [],  # noqa: E731
                                      [helper.make_tensor_value_info(nm + "_o", TensorProto.FLOAT, [2])])
    ifm = tl.onnx_graph_model(tmp_path / "ifc.onnx", [helper.make_node("If", ["c"], ["y"], then_branch=br("t"),
                                                                        else_branch=br("e"))],
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [("y", TensorProto.FLOAT)])
    tl.assert_clean_failure(tl.compile_raw(ifm, tmp_path / "ifc.so"), mentions=["t_neg", "'y'", "cycle"])
    body = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond_o"]),
                              helper.make_node("Add", ["s", "out"], ["s_o"], name="body_add")], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
                             [helper.make_tensor_value_info("cond_o", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("s_o", TensorProto.FLOAT, [2])])
    lpm = tl.onnx_graph_model(tmp_path / "lpc.onnx", [helper.make_node("Loop", ["m", "", "x"], ["out"], body=body)],
                              [helper.make_tensor_value_info("m", TensorProto.INT64, []),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [("out", TensorProto.FLOAT)])
    tl.assert_clean_failure(tl.compile_raw(lpm, tmp_path / "lpc.so"), mentions=["body_add", "'out'", "cycle"])


def test_passes_run_inside_branches_and_bodies(tmp_path):
    """The rewriting passes run on graphs with control flow, each within one region: a Conv
    and its Relu in a branch fuse there; the identical Relu(x) of both branches stays in each
    (CSE may not give one branch the other's value); a Conv outside an If and a Relu inside
    stay apart; a MatMul and its bias Add in a loop's body fuse there. Against ONNX Runtime with
    either condition and every trip count; the IR shows the fusions."""
    rng = np.random.default_rng(2)
    w = helper.make_tensor("w", F, [4, 2, 3, 3], rng.standard_normal((4, 2, 3, 3)).astype(np.float32).ravel())
    mw = helper.make_tensor("mw", F, [6, 6], (rng.standard_normal((6, 6)) * 0.3).astype(np.float32).ravel())
    mb = helper.make_tensor("mb", F, [6], rng.standard_normal(6).astype(np.float32))
    w2 = helper.make_tensor("w2", F, [4, 2, 3, 3], rng.standard_normal((4, 2, 3, 3)).astype(np.float32).ravel())
    then_g = _branch("then", [helper.make_node("Conv", ["img", "w2"], ["tc"], pads=[1, 1, 1, 1], name="branch_conv"),
                              helper.make_node("Relu", ["tc"], ["tr"]),
                              helper.make_node("Relu", ["outer"], ["tr2"]),
                              helper.make_node("Add", ["tr", "tr2"], ["t_out"])], [("t_out", F)])
    else_g = _branch("else", [helper.make_node("Relu", ["outer"], ["er"]),
                              helper.make_node("Neg", ["er"], ["e_out"])], [("e_out", F)])
    body = _body("body", [helper.make_node("MatMul", ["st", "mw"], ["mm"], name="body_matmul"),
                          helper.make_node("Add", ["mm", "mb"], ["st2"]),
                          helper.make_node("Tanh", ["st2"], ["st_out"]),
                          helper.make_node("Identity", ["c"], ["c_out"])],
                 [("i", I64, []), ("c", B, []), ("st", F, [1, 6])], [("c_out", B), ("st_out", F)])
    g = helper.make_graph(
        [helper.make_node("Conv", ["img", "w"], ["outer"], pads=[1, 1, 1, 1], name="outer_conv"),
         helper.make_node("If", ["flag"], ["z"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Loop", ["m", "", "s0"], ["s"], body=body)], "passes",
        [_vi("img", F, [1, 2, 5, 5]), _vi("flag", B, []), _vi("m", I64, []), _vi("s0", F, [1, 6])],
        [_vi("z", F, [1, 4, 5, 5]), _vi("s", F, [1, 6])], [w, w2, mw, mb])
    path = _save(tmp_path, "passes", g)
    ir = tl.compile(path, tmp_path / "ir", emit="ir", dims={"m": "0:5"}).read_text()
    conv_lines = [ln for ln in ir.splitlines() if "conv" in ln and "branch_conv" in ln]
    assert conv_lines and "relu" in conv_lines[0], ir              # fused in its branch
    outer_lines = [ln for ln in ir.splitlines() if "outer_conv" in ln]
    assert outer_lines and "relu" not in outer_lines[0], ir         # not with a branch's Relu
    assert sum(" relu " in ln for ln in ir.splitlines()) == 2, ir   # the two branches' Relu(outer)
    mm = [ln for ln in ir.splitlines() if "body_matmul" in ln]
    assert mm and "fused Add" in mm[0], ir                          # its bias, in the body
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"m": "0:5"}))
    img = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    s0 = rng.standard_normal((1, 6)).astype(np.float32)
    for flag in (True, False):
        for m in (0, 1, 5):
            tl.check_vs_ort(model, path, {"img": img, "flag": np.array(flag), "m": np.array(m, np.int64), "s0": s0},
                            rtol=1e-5, atol=1e-5)


def test_cse_keeps_each_branch_its_own_nodes(tmp_path):
    """Relu(x) in both branches of a run-time If: each branch computes its own (merging them
    would read, in the else branch, a value only the then branch makes)."""
    two = helper.make_tensor("two", F, [], [2.0])
    then_g = _branch("t", [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Mul", ["a", "two"], ["ta"])],
                     [("ta", F)])
    else_g = _branch("e", [helper.make_node("Relu", ["x"], ["b"]), helper.make_node("Add", ["b", "two"], ["eb"])],
                     [("eb", F)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "cse",
                          [_vi("c", B, []), _vi("x", F, [4])], [_vi("y", F, [4])], [two])
    path = _save(tmp_path, "cse", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    x = np.array([-1, 0.5, 2, -3], np.float32)
    for c in (True, False):
        tl.check_vs_ort(model, path, {"c": np.array(c), "x": x}, rtol=0, atol=0)


def test_subgraph_names_may_hide_outer_ones(tmp_path):
    """A loop body's input and a SequenceMap body's input named as a value around them (ONNX's
    checker and ONNX Runtime take it): each hides the outer value in its body only, and the
    outer value is seen again after it (a branch reads it)."""
    body = _body("body", [helper.make_node("Add", ["x", "x"], ["x2"]), helper.make_node("Identity", ["c"], ["c_out"])],
                 [("i", I64, []), ("c", B, []), ("x", F, [3])], [("c_out", B), ("x2", F)])
    then_g = _branch("t", [helper.make_node("Neg", ["x"], ["ny"]), helper.make_node("Mul", ["ny", "y"], ["t_out"])],
                     [("t_out", F)])
    else_g = _branch("e", [helper.make_node("Abs", ["x"], ["e_out"])], [("e_out", F)])
    map_body = helper.make_graph([helper.make_node("Mul", ["y", "x"], ["my"])], "mb",
                                 [_vi("y", F, [3]), _vi("x", F, [3])], [_vi("my", F, [3])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "x"], ["looped"], body=body),
         helper.make_node("If", ["flag"], ["z"], then_branch=then_g, else_branch=else_g),
         helper.make_node("SequenceConstruct", ["y", "x"], ["s"]),
         helper.make_node("SequenceMap", ["s", "x"], ["ms"], body=map_body),
         helper.make_node("ConcatFromSequence", ["ms"], ["cat"], axis=0),
         helper.make_node("Add", ["x", "y"], ["outer"])], "shadow",
        [_vi("x", F, [3]), _vi("y", F, [3]), _vi("m", I64, []), _vi("flag", B, [])],
        [_vi("looped", F, [3]), _vi("z", F, [3]), _vi("cat", F, [6]), _vi("outer", F, [3])])
    path = _save(tmp_path, "shadow", g)
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"m": "0:4"}))
    x, y = np.array([1, -2, 3], np.float32), np.array([0.5, 0.25, -1], np.float32)
    for m in (0, 2):
        for flag in (True, False):
            tl.check_vs_ort(model, path, {"x": x, "y": y, "m": np.array(m, np.int64), "flag": np.array(flag)}, rtol=0,
                            atol=0)
