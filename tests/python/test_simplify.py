"""The simplifying passes (src/passes/pass_cse.c, pass_drop_identities.c,
pass_collapse_chains.c) on small graphs. Each case is checked twice: the IR after the passes
(`--emit ir`) has the nodes it should (counted by op), and the compiled model matches ONNX
Runtime on the unsimplified graph, bit for bit where the simplification claims to be exact (the
sign of a zero, NaN, infinities), else within the project's tolerance. Graph outputs keep their
names and values when the node that made one is removed: an output that is also an input, and
two outputs that become one value, included. Each pass can be turned off by name.
"""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil_testlib as tl

F32 = TensorProto.FLOAT
NAN, INF = np.float32(np.nan), np.float32(np.inf)
# values where a wrong simplification shows: both zeros, NaN, infinities, ties with the bounds
SPECIAL = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, -1.0, 1.0, 0.5, -0.5, 2.5, -2.5, 6.0, -6.0, 3.0e38,
                    -3.0e38, 1e-40], np.float32)


def build(nodes, inputs, outputs, inits=(), opset=17):
    """inputs/outputs: (name, TensorProto type, shape); inits: {name: array}."""
    g = helper.make_graph(nodes, "simplify", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def ops(ir: str) -> list:
    """The live nodes' ops, in order."""
    return re.findall(r"^  %\d+(?:, %\d+)* = ([a-z_]+) ", ir, flags=re.M)


def assert_bitwise(got, ref, name):
    """Equal values with the same sign of zero; NaN where the reference has NaN."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (name, got.dtype, got.shape, ref.dtype, ref.shape)
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, ref, err_msg=name)
        return
    nan = np.isnan(ref)
    assert (np.isnan(got) == nan).all(), f"{name}: NaN at {np.argwhere(np.isnan(got) != nan)[:5].tolist()}"
    g, r = got[~nan], ref[~nan]
    bad = (g != r) | (np.signbit(g) != np.signbit(r))
    assert not bad.any(), f"{name}: got {g[bad][:8]}, want {r[bad][:8]} (signs of zero count)"


def ort_as_written(path, feeds) -> dict:
    """ONNX Runtime with its own graph rewrites off: the model's arithmetic as written. (Its
    default level drops an Add of +0 where it can, so that -0 + 0 gives -0 there, where IEEE
    addition, and ONNX Runtime's Add kernel, give +0; Cuvil keeps that Add.)"""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def check(tmp_path, m, feeds, *, exact=True, extra=(), dims=None):
    """Compiles m (the IR, then a .so), runs it on feeds and compares every output with ONNX
    Runtime, within the project's tolerance and, where exact, bit for bit with ONNX Runtime's
    kernels (ort_as_written); returns the ops of the IR and the IR."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    ir = tl.compile(p, tmp_path / "ir", emit="ir", extra=extra, dims=dims).read_text()
    so = tl.compile(p, tmp_path / "build", extra=extra, dims=dims)
    got = tl.run(so, feeds, tmp_path / "run")
    tl.assert_outputs_close(got, tl.ort_run(p, feeds))
    if exact:
        for name, r in ort_as_written(p, feeds).items():
            assert_bitwise(got[tl.output_file_stem(name)], r, name)
    return ops(ir), ir


def xfeed(shape=(4, 16), seed=0, special=True):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    if special:
        flat = x.reshape(-1)
        flat[:len(SPECIAL)] = SPECIAL
    return x


# --------------------------------------------------------------------------------------------
# Idempotent ops (collapse_chains)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("inner,outer,keep", [("Relu", "Relu", "relu"), ("Abs", "Abs", "abs"),
                                              ("Floor", "Floor", "floor"), ("Ceil", "Ceil", "ceil"),
                                              ("Round", "Round", "round"), ("Ceil", "Floor", "ceil"),
                                              ("Floor", "Round", "floor"), ("Round", "Ceil", "round")])
def test_idempotent_pair_is_one_node(tmp_path, inner, outer, keep):
    m = build([helper.make_node(inner, ["x"], ["a"]), helper.make_node(outer, ["a"], ["b"]),
               helper.make_node(outer, ["b"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])])
    got, _ = check(tmp_path, m, {"x": xfeed()})
    assert got == [keep], got


def test_idempotent_chain_of_int64_abs(tmp_path):
    """abs(abs(MIN)) is abs(MIN), which wraps to MIN, as ONNX Runtime computes it."""
    i64 = TensorProto.INT64
    m = build([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Abs", ["a"], ["y"])],
              [("x", i64, [8])], [("y", i64, [8])])
    x = np.array([np.iinfo(np.int64).min, -5, -1, 0, 1, 7, 100, np.iinfo(np.int64).max], np.int64)
    assert check(tmp_path, m, {"x": x})[0] == ["abs"]


def test_relu_of_abs_is_left_alone(tmp_path):
    """relu(abs(x)) is abs(x) for floats but not for an integer MIN; two different ops stay."""
    m = build([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])])
    assert check(tmp_path, m, {"x": xfeed()})[0] == ["abs", "relu"]


def clip(x, y, lo, hi, name=None):
    return helper.make_node("Clip", [x, lo or "", hi or ""], [y], name=name or f"clip_{y}")


@pytest.mark.parametrize("bounds,n_clips", [
    ((-2.0, 4.0, -1.0, 6.0), 1),        # overlap: [-1, 4]
    ((-1.0, 6.0, -2.0, 4.0), 1),
    ((-2.0, 4.0, -2.0, 4.0), 1),        # the same range twice
    ((0.0, 1.0, -0.0, 2.0), 1),         # +0 and -0 bounds tie
    ((-2.0, 4.0, None, 3.0), 1),        # an absent bound
    ((None, None, -1.0, None), 1),
    ((-2.0, -1.0, 1.0, 2.0), 2),        # disjoint: left as it is
    ((1.0, 2.0, -2.0, -1.0), 2),
    ((3.0, 1.0, 0.0, 5.0), 2),          # an inverted first range (ONNX Runtime: the max everywhere)
])
def test_clip_of_clip_intersects_the_ranges(tmp_path, bounds, n_clips):
    a, b, c, d = bounds
    inits = {k: np.float32(v) for k, v in zip("abcd", bounds) if v is not None}
    nodes = [clip("x", "m", "a" if a is not None else None, "b" if b is not None else None),
             clip("m", "y", "c" if c is not None else None, "d" if d is not None else None)]
    m = build(nodes, [("x", F32, [4, 16])], [("y", F32, [4, 16])], inits)
    x = xfeed()
    x.reshape(-1)[20:28] = [-2, -1, 0, 1, 2, 3, 4, 6]   # ties with every bound
    got, ir = check(tmp_path, m, {"x": x})
    assert got.count("clip") == n_clips, ir


def test_int32_clip_of_clip(tmp_path):
    i32 = TensorProto.INT32
    m = build([clip("x", "m", "a", "b"), clip("m", "y", "c", "d")], [("x", i32, [12])], [("y", i32, [12])],
              {"a": np.int32(-100), "b": np.int32(50), "c": np.int32(-7), "d": np.int32(2**31 - 1)})
    x = np.array([-2**31, -101, -100, -8, -7, 0, 2, 49, 50, 51, 1000, 2**31 - 1], np.int32)
    assert check(tmp_path, m, {"x": x})[0] == ["clip"]


def test_float64_clip_of_clip_is_left_alone(tmp_path):
    """float64 Clip runs with float32 bounds (a known difference, not this pass's): not merged."""
    f64 = TensorProto.DOUBLE
    m = build([clip("x", "m", "a", "b"), clip("m", "y", "c", "d")], [("x", f64, [16])], [("y", f64, [16])],
              {k: np.float64(v) for k, v in zip("abcd", (-2.0, 4.0, -1.0, 6.0))})
    x = np.linspace(-8, 8, 16)
    assert check(tmp_path, m, {"x": x})[0] == ["clip", "clip"]


@pytest.mark.parametrize("op", ["Min", "Max"])
def test_min_of_min_with_constants_is_one_node(tmp_path, op):
    c1 = np.array([[-1.0], [0.0], [2.0], [-0.0]], np.float32)       # [4, 1]
    c2 = np.array([0.5, -0.0, 0.0, 1.0] * 4, np.float32)           # [16]
    m = build([helper.make_node(op, ["x", "c1"], ["a"]), helper.make_node(op, ["a", "c2"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"c1": c1, "c2": c2})
    # a [4, 16] constant would be larger than both: left as it is
    assert check(tmp_path, m, {"x": xfeed()})[0] == [op.lower()] * 2
    c1 = np.array([-1.0, 0.0, 2.0, -0.0] * 4, np.float32)
    m = build([helper.make_node(op, ["x", "c1"], ["a"]), helper.make_node(op, ["a", "c2"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"c1": c1, "c2": c2})
    assert check(tmp_path / "same-shape", m, {"x": xfeed()})[0] == [op.lower()]
    m = build([helper.make_node(op, ["x", "c1"], ["a"]), helper.make_node(op, ["a", "c1"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"c1": c1})
    assert check(tmp_path / "same-constant", m, {"x": xfeed()})[0] == [op.lower()]


def test_min_of_min_with_a_nan_constant_stays(tmp_path):
    c1 = np.array([1.0, np.nan] * 8, np.float32)
    c2 = np.array([0.5] * 16, np.float32)
    m = build([helper.make_node("Min", ["x", "c1"], ["a"]), helper.make_node("Min", ["a", "c2"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"c1": c1, "c2": c2})
    assert check(tmp_path, m, {"x": xfeed()})[0] == ["min", "min"]


# --------------------------------------------------------------------------------------------
# Identity ops (drop_identities) and chains of views and transposes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,c,swap,removed", [
    ("Add", -0.0, False, True), ("Add", -0.0, True, True),
    ("Add", 0.0, False, False),     # -0 + +0 is +0: not x where x is -0
    ("Sub", 0.0, False, True), ("Sub", -0.0, False, False), ("Sub", 0.0, True, False),   # 0 - x is -x
    ("Mul", 1.0, False, True), ("Mul", 1.0, True, True), ("Mul", -1.0, False, False),
    ("Div", 1.0, False, True), ("Div", 1.0, True, False),
])
def test_float_identity_arithmetic(tmp_path, op, c, swap, removed):
    ins = ["c", "r"] if swap else ["r", "c"]
    m = build([helper.make_node("Neg", ["x"], ["r"]), helper.make_node(op, ins, ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"c": np.float32(c)})
    got, ir = check(tmp_path, m, {"x": xfeed()})   # x holds -0, +0, NaN, infinities
    assert got == (["neg"] if removed else ["neg", op.lower()]), ir


def test_identity_arithmetic_keeps_the_shape_and_type(tmp_path):
    """A zero of a larger shape broadcasts x: the add stays. int64 x + 0 and x * 1 go."""
    i64 = TensorProto.INT64
    m = build([helper.make_node("Add", ["x", "z"], ["y"]), helper.make_node("Add", ["i", "zi"], ["a"]),
               helper.make_node("Mul", ["a", "one"], ["b"]), helper.make_node("Neg", ["b"], ["yi"])],
              [("x", F32, [16]), ("i", i64, [3])], [("y", F32, [4, 16]), ("yi", i64, [3])],
              {"z": np.full((4, 16), -0.0, np.float32), "zi": np.zeros(3, np.int64), "one": np.int64(1)})
    got, ir = check(tmp_path, m, {"x": xfeed((16,)), "i": np.array([-3, 0, 2**62], np.int64)})
    assert got == ["add", "neg"], ir


@pytest.mark.parametrize("starts,ends,axes,steps,shape,removed", [
    ([0], [64], [1], [1], [4, 16], True),                   # a ghost module's x[:, :out] of all of x's channels
    ([0, -100], [2**62, 2**62], [0, 1], None, [4, 16], True),   # clamped to the whole axes
    ([0], [16], [-1], [2], [4, 8], False),                  # every other element
    ([15], [-17], [1], [-1], [4, 16], False),               # reversed: the same shape, not the same values
    ([1], [16], [1], [1], [4, 15], False),                  # from 1
])
def test_slice_of_all_of_its_input_goes(tmp_path, starts, ends, axes, steps, shape, removed):
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64), "a": np.array(axes, np.int64)}
    ins = ["r", "s", "e", "a"]
    if steps is not None:
        inits["st"] = np.array(steps, np.int64)
        ins.append("st")
    m = build([helper.make_node("Neg", ["x"], ["r"]), helper.make_node("Slice", ins, ["t"]),
               helper.make_node("Relu", ["t"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, shape)], inits)
    got, ir = check(tmp_path, m, {"x": xfeed()})
    assert got == (["neg", "relu"] if removed else ["neg", "slice", "relu"]), ir


def test_transpose_pair_that_cancels_goes(tmp_path):
    m = build([helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
               helper.make_node("Transpose", ["t"], ["u"], perm=[1, 2, 0]),
               helper.make_node("Relu", ["u"], ["y"])],
              [("x", F32, [2, 3, 4])], [("y", F32, [2, 3, 4])])
    assert check(tmp_path, m, {"x": xfeed((2, 3, 4))})[0] == ["relu"]


def test_transpose_pair_that_does_not_cancel_is_one(tmp_path):
    m = build([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Transpose", ["r"], ["t"], perm=[2, 0, 1]),
               helper.make_node("Transpose", ["t"], ["y"], perm=[2, 0, 1])],
              [("x", F32, [2, 3, 4])], [("y", F32, [3, 4, 2])])
    got, ir = check(tmp_path, m, {"x": xfeed((2, 3, 4))})
    assert got == ["relu", "transpose"], ir
    assert "perm=[1,2,0]" in ir, ir


def test_reshape_of_reshape_cast_and_expand_to_themselves(tmp_path):
    m = build([helper.make_node("Reshape", ["x", "s1"], ["a"]), helper.make_node("Reshape", ["a", "s2"], ["b"]),
               helper.make_node("Relu", ["b"], ["c"]),
               helper.make_node("Cast", ["c"], ["d"], to=F32),
               helper.make_node("Expand", ["d", "e"], ["f"]),
               helper.make_node("Reshape", ["f", "s3"], ["y"])],
              [("x", F32, [4, 6])], [("y", F32, [3, 8])],
              {"s1": np.array([2, 12], np.int64), "s2": np.array([8, -1], np.int64),
               "e": np.array([1, 3], np.int64), "s3": np.array([3, 8], np.int64)})
    got, ir = check(tmp_path, m, {"x": xfeed((4, 6))})
    assert got == ["reshape", "relu", "reshape"], ir


# --------------------------------------------------------------------------------------------
# Common subexpressions (cse)
# --------------------------------------------------------------------------------------------

def test_cse_merges_equal_nodes_and_constants(tmp_path):
    """Two copies of one branch (the same op on the same input, and Mul by two initializers that
    hold the same bytes) become one; Sub does not commute; Add does."""
    w = np.linspace(-1, 1, 16, dtype=np.float32)
    m = build([helper.make_node("Relu", ["x"], ["r1"]), helper.make_node("Relu", ["x"], ["r2"]),
               helper.make_node("Mul", ["r1", "w1"], ["m1"]), helper.make_node("Mul", ["r2", "w2"], ["m2"]),
               helper.make_node("Add", ["m1", "x"], ["a1"]), helper.make_node("Add", ["x", "m2"], ["a2"]),
               helper.make_node("Sub", ["a1", "x"], ["s1"]), helper.make_node("Sub", ["x", "a2"], ["s2"]),
               helper.make_node("Mul", ["s1", "s2"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"w1": w, "w2": w.copy()})
    got, ir = check(tmp_path, m, {"x": xfeed()}, exact=False)
    assert sorted(got) == ["add", "mul", "mul", "relu", "sub", "sub"], ir
    assert ir.count("const ") == 1, ir


def test_cse_keeps_different_attributes_apart(tmp_path):
    m = build([helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0]),
               helper.make_node("Transpose", ["x"], ["t2"], perm=[1, 0]),
               helper.make_node("LeakyRelu", ["x"], ["l1"], alpha=0.1),
               helper.make_node("LeakyRelu", ["x"], ["l2"], alpha=0.2),
               helper.make_node("Sub", ["l1", "l2"], ["d"]), helper.make_node("Transpose", ["d"], ["dt"], perm=[1, 0]),
               helper.make_node("Add", ["t1", "t2"], ["a"]), helper.make_node("Add", ["a", "dt"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [16, 4])])
    got, ir = check(tmp_path, m, {"x": xfeed()}, exact=False)
    # the two transposes of x are one; the leaky relus differ in alpha
    assert got.count("leaky_relu") == 2 and got.count("transpose") == 2, ir


def test_cse_merges_multi_output_nodes(tmp_path):
    m = build([helper.make_node("Split", ["x", "sp"], ["a1", "b1"], axis=1),
               helper.make_node("Split", ["x", "sp"], ["a2", "b2"], axis=1),
               helper.make_node("Sub", ["a1", "b2"], ["s"]), helper.make_node("Mul", ["b1", "a2"], ["p"]),
               helper.make_node("Add", ["s", "p"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 8])], {"sp": np.array([8, 8], np.int64)}, opset=13)
    got, ir = check(tmp_path, m, {"x": xfeed()}, exact=False)
    assert got.count("split") == 1, ir


# --------------------------------------------------------------------------------------------
# Graph outputs
# --------------------------------------------------------------------------------------------

def test_removed_node_that_made_an_output_keeps_its_name(tmp_path):
    m = build([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])])
    got, ir = check(tmp_path, m, {"x": xfeed()})
    assert got == ["relu"] and re.search(r'output %\d+ "y"', ir), ir


def test_output_that_is_also_an_input(tmp_path):
    """x is an input and an output; y = x * 1 and z = Identity(x) are outputs that become x."""
    m = build([helper.make_node("Mul", ["x", "one"], ["y"]), helper.make_node("Identity", ["x"], ["z"]),
               helper.make_node("Add", ["y", "z"], ["w"])],
              [("x", F32, [4, 16])], [("x", F32, [4, 16]), ("y", F32, [4, 16]), ("z", F32, [4, 16]),
                                      ("w", F32, [4, 16])], {"one": np.float32(1.0)})
    got, ir = check(tmp_path, m, {"x": xfeed()})
    assert "mul" not in got and got.count("add") == 1, ir
    for name in "xyzw":
        assert re.search(rf'output %\d+ "{name}"', ir), ir


def test_two_outputs_that_become_one_value(tmp_path):
    """y1 = relu(x) and y2 = relu(x) (cse), y3 = relu(y1) (collapse_chains), y4 = y1 + -0.0
    (drop_identities): four outputs, one relu, each output its own name and the same values."""
    m = build([helper.make_node("Relu", ["x"], ["y1"]), helper.make_node("Relu", ["x"], ["y2"]),
               helper.make_node("Relu", ["y1"], ["y3"]), helper.make_node("Add", ["y1", "nz"], ["y4"])],
              [("x", F32, [4, 16])], [(f"y{i}", F32, [4, 16]) for i in range(1, 5)], {"nz": np.float32(-0.0)})
    got, ir = check(tmp_path, m, {"x": xfeed()})
    assert got.count("relu") == 1 and "add" not in got, ir


def test_output_read_by_another_node(tmp_path):
    """The removed relu's output is an output and also read by the next node."""
    m = build([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
               helper.make_node("Relu", ["b"], ["y"]), helper.make_node("Neg", ["y"], ["z"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16]), ("z", F32, [4, 16]), ("b", F32, [4, 16])])
    got, ir = check(tmp_path, m, {"x": xfeed()})
    assert got.count("relu") == 1, ir


# --------------------------------------------------------------------------------------------
# Turning passes off, symbolic dims
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("off,want", [
    ((), ["relu", "add"]),
    (("cse",), ["relu", "relu", "add"]),
    (("collapse_chains",), ["relu", "relu", "add"]),
    (("drop_identities",), ["relu", "add", "add"]),
])
def test_each_pass_can_be_disabled(tmp_path, off, want):
    m = build([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
               helper.make_node("Relu", ["a"], ["c"]), helper.make_node("Add", ["b", "nz"], ["d"]),
               helper.make_node("Add", ["c", "d"], ["y"])],
              [("x", F32, [4, 16])], [("y", F32, [4, 16])], {"nz": np.float32(-0.0)})
    extra = [a for p in off for a in ("--disable-pass", p)]
    got, ir = check(tmp_path, m, {"x": xfeed()}, extra=extra)
    assert sorted(got) == sorted(want), ir


def test_symbolic_dims(tmp_path):
    """One compile for every batch: the simplifications do not depend on the batch."""
    m = build([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
               helper.make_node("Relu", ["x"], ["c"]), helper.make_node("Mul", ["b", "one"], ["d"]),
               helper.make_node("Reshape", ["d", "s1"], ["e"]), helper.make_node("Reshape", ["e", "s2"], ["f"]),
               helper.make_node("Add", ["f", "c"], ["y"])],
              [("x", F32, ["batch", 16])], [("y", F32, ["batch", 16])],
              {"one": np.float32(1.0), "s1": np.array([-1, 4, 4], np.int64), "s2": np.array([-1, 16], np.int64)})
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    ir = tl.compile(p, tmp_path / "ir", emit="ir", dims={"batch": "1:8"}).read_text()
    assert ops(ir) == ["relu", "reshape", "add"], ir
    so = tl.compile(p, tmp_path / "build", dims={"batch": "1:8"})
    for b in (1, 3, 8):
        x = xfeed((b, 16), seed=b)
        got = tl.run(so, {"x": x}, tmp_path / f"run{b}")
        ref = tl.ort_run(p, {"x": x})
        tl.assert_outputs_close(got, ref)


def test_symbolic_dims_constants_equal_at_the_upper_bounds_only(tmp_path):
    """x [a, b] with a and b both 1..8: the sizes a and b, computed from x's shape, are equal at
    the upper bounds (the first compile) and nowhere else with a != b; cse merges them there, the
    other compiles disagree, and the model is compiled again without that merge. It must give
    a * x + b * x at every shape."""
    m = build([helper.make_node("Shape", ["x"], ["s"]),
               helper.make_node("Gather", ["s", "i0"], ["s0"], axis=0),
               helper.make_node("Gather", ["s", "i1"], ["s1"], axis=0),
               helper.make_node("Cast", ["s0"], ["f0"], to=F32), helper.make_node("Cast", ["s1"], ["f1"], to=F32),
               helper.make_node("Mul", ["x", "f0"], ["m0"]), helper.make_node("Mul", ["x", "f1"], ["m1"]),
               helper.make_node("Add", ["m0", "m1"], ["y"])],
              [("x", F32, ["a", "b"])], [("y", F32, ["a", "b"])],
              {"i0": np.array([0], np.int64), "i1": np.array([1], np.int64)})
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    so = tl.compile(p, tmp_path / "build", dims={"a": "1:8", "b": "1:8"})
    for a, b in ((8, 8), (3, 8), (8, 2), (5, 7), (1, 1)):
        x = xfeed((a, b), seed=a * 10 + b, special=False)
        got = tl.run(so, {"x": x}, tmp_path / f"run{a}x{b}")
        tl.assert_outputs_close(got, tl.ort_run(p, {"x": x}))
