"""Integer results at the edges, against ONNX Runtime: Div and Mod by zero (an error from run that
names the node), MIN / -1 and MIN % -1, Pow past the type's range, Cast of values an integer
type does not hold (infinities, NaN, 3e38, negatives to unsigned types). Each is checked when
the model runs and when the compiler folds it (constant inputs), which must agree: both use the
run-time kernels.

ONNX Runtime's own answers here are what its kernels compute on x86-64 (ONNX leaves most of them
undefined); where they depend on more than the values, the test says so:
  * a float32/float64/bfloat16 -> uint32 Cast of a value out of range gives one answer in its
    vectorised loop (4 elements at a time) and another in the loop over the last n % 4
    elements; Cuvil gives the vectorised loop's, and the tests use lengths that are multiples of 4;
  * an integer Pow whose exponent is one value over a whole row (a scalar, or [n, 1] against
    [n, m]) computes x * x and x * x * x for the exponents 2 and 3 (wrapping), and
    (int)pow((double)x, (double)y) otherwise (the type's minimum when out of range); Cuvil follows
    the same rule;
  * int32 and int64 MIN / -1 traps (SIGFPE) in some of its paths and gives MIN in others; Cuvil
    gives MIN (two's complement wrap-around), never a trap.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil_testlib as tl

try:
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    BF16 = None

INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16,
        "u32": np.uint32, "u64": np.uint64}
FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": BF16}
ONNX_T = {"f32": TensorProto.FLOAT, "f64": TensorProto.DOUBLE, "f16": TensorProto.FLOAT16,
          "bf16": TensorProto.BFLOAT16, "i8": TensorProto.INT8, "i16": TensorProto.INT16, "i32": TensorProto.INT32,
          "i64": TensorProto.INT64, "u8": TensorProto.UINT8, "u16": TensorProto.UINT16, "u32": TensorProto.UINT32,
          "u64": TensorProto.UINT64, "bool": TensorProto.BOOL}


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "ints", [helper.make_tensor_value_info(n, ONNX_T[t], s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, ONNX_T[t], s) for n, t, s in outputs],
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def save(m, path):
    onnx.save(m, path)
    return path


def ort_session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def equal(got, ref, name):
    """Integers equal; bfloat16 outputs arrive from cuvil-run as 2-byte voids."""
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    if got.dtype == np.dtype("V2"):
        got = got.view(np.uint16)
        ref = ref.view(np.uint16)
    assert got.dtype == ref.dtype, (name, got.dtype, ref.dtype)
    bad = got != ref
    assert not bad.any(), f"{name}: at {np.argwhere(bad)[:6].ravel().tolist()} got {got[bad][:6]} want {ref[bad][:6]}"


# --------------------------------------------------------------------------------------------
# Div and Mod by zero
# --------------------------------------------------------------------------------------------

DIVS = [("Div", {}), ("Mod", {"fmod": 0}), ("Mod", {"fmod": 1})]


@pytest.mark.parametrize("op,attrs", DIVS, ids=["Div", "Mod", "Mod-fmod"])
def test_integer_division_by_a_run_time_zero_is_an_error_from_run(tmp_path, op, attrs):
    """Every integer type: a divisor of 0 makes run fail with a message that names the node and
    says what happened (ONNX Runtime: "Integer division by zero", "Integer modulo by zero");
    without a zero the results are ONNX Runtime's."""
    nodes, ins, outs = [], [], []
    for t in INTS:
        nodes.append(helper.make_node(op, [f"a_{t}", f"b_{t}"], [f"y_{t}"], name=f"{op.lower()}_{t}", **attrs))
        ins += [(f"a_{t}", t, [6]), (f"b_{t}", t, [6])]
        outs.append((f"y_{t}", t, [6]))
    p = save(model(nodes, ins, outs), tmp_path / "m.onnx")
    so = tl.compile(p, tmp_path / "build")
    feeds = {}
    for t, dt in INTS.items():
        signed = np.iinfo(dt).min < 0
        feeds[f"a_{t}"] = np.array([7, -7, 100, np.iinfo(dt).max, 0, -3] if signed else [7, 9, 100, np.iinfo(dt).max, 0, 3],
                                   dt)
        feeds[f"b_{t}"] = np.array([2, 2, -7, 3, 5, -2] if signed else [2, 2, 7, 3, 5, 2], dt)
    got = tl.run(so, feeds, tmp_path / "ok")
    ref = dict(zip([o.name for o in ort_session(p).get_outputs()], ort_session(p).run(None, feeds)))
    for name, r in ref.items():
        equal(got[name], r, name)
    word = "division" if op == "Div" else "modulo"
    for t, dt in INTS.items():
        bad = dict(feeds)
        bad[f"b_{t}"] = feeds[f"b_{t}"].copy()
        bad[f"b_{t}"][3] = 0
        with pytest.raises(Exception, match=f"(?i)integer {word} by zero"):   # ONNX Runtime refuses it too
            ort_session(p).run(None, bad)
        proc, _ = tl.run_raw(so, bad, tmp_path / f"zero_{t}")
        assert proc.returncode != 0, f"{t}: a divisor of 0 ran"
        assert f"'{op.lower()}_{t}'" in proc.stderr and f"integer {word} by zero" in proc.stderr, proc.stderr


@pytest.mark.parametrize("op,attrs", DIVS, ids=["Div", "Mod", "Mod-fmod"])
def test_integer_division_by_a_constant_zero_is_refused_when_folded(tmp_path, op, attrs):
    a = numpy_helper.from_array(np.array([5, 6], np.int32), "a")
    b = numpy_helper.from_array(np.array([3, 0], np.int32), "b")
    p = save(model([helper.make_node(op, ["a", "b"], ["y"], name="folded", **attrs)], [], [("y", "i32", [2])], [a, b]),
             tmp_path / "m.onnx")
    proc = tl.compile_raw(p, tmp_path / "m.so")
    word = "division" if op == "Div" else "modulo"
    assert proc.returncode != 0 and "'folded'" in proc.stderr and f"integer {word} by zero" in proc.stderr, proc.stderr


def test_min_over_minus_one(tmp_path):
    """MIN / -1 wraps to MIN and MIN % -1 is 0 (either fmod), at run time and folded, never a
    trap. int8 and int16 against ONNX Runtime; for int32 and int64 ONNX Runtime's answer depends
    on its code path (a trap in some), so the two's complement result is asserted."""
    nodes, ins, outs, inits, feeds = [], [], [], [], {}
    for t in ("i8", "i16", "i32", "i64"):
        dt = INTS[t]
        a = np.array([np.iinfo(dt).min, np.iinfo(dt).min, -7, 7], dt)
        b = np.array([-1, 1, -1, -1], dt)
        feeds[f"a_{t}"], feeds[f"b_{t}"] = a, b
        inits += [numpy_helper.from_array(a, f"ca_{t}"), numpy_helper.from_array(b, f"cb_{t}")]
        ins += [(f"a_{t}", t, [4]), (f"b_{t}", t, [4])]
        for src in ("", "c"):
            for op, attrs, tag in (("Div", {}, "div"), ("Mod", {}, "mod"), ("Mod", {"fmod": 1}, "fmod")):
                nodes.append(helper.make_node(op, [f"{src}a_{t}", f"{src}b_{t}"], [f"{tag}{src}_{t}"], **attrs))
                outs.append((f"{tag}{src}_{t}", t, [4]))
    p = save(model(nodes, ins, outs, inits), tmp_path / "m.onnx")
    got = tl.compile_and_run(p, feeds, tmp_path)
    sub = {k: v for k, v in feeds.items() if k.endswith(("i8", "i16"))}
    sub_outs = [o for o, *_ in outs if o.endswith(("i8", "i16"))]
    sess = ort_session(save(model([n for n in nodes if n.output[0] in sub_outs], [i for i in ins if i[0] in sub],
                                  [o for o in outs if o[0] in sub_outs], [i for i in inits if i.name.endswith(("i8", "i16"))]),
                            tmp_path / "ort.onnx"))
    for name, r in zip(sub_outs, sess.run(sub_outs, sub)):
        equal(got[name], r, name)
    for t in ("i8", "i16", "i32", "i64"):
        lo = np.iinfo(INTS[t]).min
        for src in ("", "c"):
            equal(got[f"div{src}_{t}"], np.array([lo, lo, 7, -7], INTS[t]), f"div{src}_{t}")
            equal(got[f"mod{src}_{t}"], np.array([0, 0, 0, 0], INTS[t]), f"mod{src}_{t}")
            equal(got[f"fmod{src}_{t}"], np.array([0, 0, 0, 0], INTS[t]), f"fmod{src}_{t}")


# --------------------------------------------------------------------------------------------
# Pow
# --------------------------------------------------------------------------------------------

def pow_cases(dt):
    big = 3037000500 if dt == np.int64 else 46341   # x * x just past the type's maximum
    base = np.array([2, 3, -3, 10, 2, -2, 0, 0, 5, 7, big, -big, 3, 1, -1, 2], dt)
    exp = np.array([40, 40, 41, 20, 63, 63, -1, 0, -2, 1, 2, 2, 64, -5, -5, 31], dt)
    return base, exp


@pytest.mark.parametrize("t", ["i32", "i64"])
def test_integer_pow_past_the_range_matches_onnx_runtime(tmp_path, t):
    """Element by element (a [16] exponent): pow in double, converted as ONNX Runtime converts
    (out of range or inf: the type's minimum). A scalar exponent 2 or 3 multiplies (wrapping),
    and so does a [2, 1] exponent against a [2, 8] base, row by row. Run time and folded."""
    dt = INTS[t]
    base, exp = pow_cases(dt)
    b2 = base.reshape(2, 8)
    e_rows = np.array([[2], [3]], dt)
    cases = {"v": (base, exp), "s2": (base, np.array(2, dt)), "s3": (base, np.array(3, dt)), "s5": (base, np.array(5, dt)),
             "rows": (b2, e_rows)}
    nodes, ins, outs, inits, feeds = [], [], [], [], {}
    for k, (x, e) in cases.items():
        feeds[f"x_{k}"], feeds[f"e_{k}"] = x, e
        ins += [(f"x_{k}", t, list(x.shape)), (f"e_{k}", t, list(e.shape))]
        inits += [numpy_helper.from_array(x, f"cx_{k}"), numpy_helper.from_array(e, f"ce_{k}")]
        nodes += [helper.make_node("Pow", [f"x_{k}", f"e_{k}"], [f"y_{k}"]),
                  helper.make_node("Pow", [f"cx_{k}", f"ce_{k}"], [f"yc_{k}"])]
        outs += [(f"y_{k}", t, list(x.shape)), (f"yc_{k}", t, list(x.shape))]
    p = save(model(nodes, ins, outs, inits), tmp_path / "m.onnx")
    got = tl.compile_and_run(p, feeds, tmp_path)
    sess = ort_session(p)
    names = [o.name for o in sess.get_outputs()]
    for name, r in zip(names, sess.run(names, feeds)):
        equal(got[name], r, name)
    # and what those answers are: the wrap for x * x, the minimum for the others
    lo = np.iinfo(dt).min
    assert got["y_v"][0] == (1 << 40 if t == "i64" else lo) and got["y_v"][1] == lo and got["y_v"][6] == lo
    assert got["y_s2"][10] == np.array(base[10], dt) * np.array(base[10], dt)


def test_integer_pow_by_a_float_exponent_folded(tmp_path):
    """An int32 base and a float32 exponent (only folded: the run-time kernel takes one type):
    the exponent is not truncated first (4 ** 0.5 is 2)."""
    x = np.array([4, 9, 2, -8, 46341, 10], np.int32)
    e = np.array([0.5, 0.5, 0.5, 1 / 3, 2.0, 10.0], np.float32)
    p = save(model([helper.make_node("Pow", ["x", "e"], ["y"])], [], [("y", "i32", [6])],
                   [numpy_helper.from_array(x, "x"), numpy_helper.from_array(e, "e")]), tmp_path / "m.onnx")
    got = tl.compile_and_run(p, {}, tmp_path)
    ref = ort_session(p).run(None, {})[0]
    equal(got["y"], ref, "y")
    assert got["y"][0] == 2


# --------------------------------------------------------------------------------------------
# Cast out of range
# --------------------------------------------------------------------------------------------

SPECIAL = [np.inf, -np.inf, np.nan, 3e38, -3e38, 2.0**31, 2.0**32, 2.0**63, 2.0**64, 1e19, -1.0, -1.5, 255.9, 256.0,
           300.0, -129.0, 1e10, -2.0**31, -2.0**63, 65536.0, -0.5, 4294967295.0, 3e9, 0.0]   # 24: a multiple of 4
TARGETS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"]


@pytest.mark.parametrize("src", ["f32", "f64", "f16", "bf16"])
def test_cast_of_values_out_of_range_matches_onnx_runtime(tmp_path, src):
    """Every float type to every integer type and bool, at run time (input x) and folded (the
    same values as a constant), both against ONNX Runtime (bfloat16: ONNX Runtime's Python API
    takes no bfloat16 input, so its reference comes from the constant)."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.array(SPECIAL, np.float64).astype(FLOATS[src])
    c = numpy_helper.from_array(x.astype(np.float32), "c") if src == "bf16" else numpy_helper.from_array(x, "c")
    if src == "bf16":   # from_array writes float32 values: store the bfloat16 bits
        c = helper.make_tensor("c", TensorProto.BFLOAT16, [len(x)], x.view(np.uint16).tobytes(), raw=True)
    nodes, outs = [], []
    for dst in TARGETS:
        nodes += [helper.make_node("Cast", ["x"], [f"y_{dst}"], to=ONNX_T[dst]),
                  helper.make_node("Cast", ["c"], [f"yc_{dst}"], to=ONNX_T[dst])]
        outs += [(f"y_{dst}", dst, [len(x)]), (f"yc_{dst}", dst, [len(x)])]
    p = save(model(nodes, [("x", src, [len(x)])], outs, [c]), tmp_path / "m.onnx")
    got = tl.compile_and_run(p, {"x": x}, tmp_path)
    if src == "bf16":
        only_c = model([n for n in nodes if n.input[0] == "c"], [], [o for o in outs if o[0].startswith("yc_")], [c])
        sess = ort_session(save(only_c, tmp_path / "ort.onnx"))
        names = [o.name for o in sess.get_outputs()]
        ref = dict(zip(names, sess.run(names, {})))
        ref.update({"y_" + k[3:]: v for k, v in list(ref.items())})
    else:
        sess = ort_session(p)
        names = [o.name for o in sess.get_outputs()]
        ref = dict(zip(names, sess.run(names, {"x": x})))
    for name, r in ref.items():
        equal(got[name], r, f"{src} -> {name}")


@pytest.mark.parametrize("t", ["i8", "i16", "u8", "u16"])
def test_narrow_integer_products_wrap(t, tmp_path):
    """Mul of 8- and 16-bit integers wraps like its type, at run time and folded. The
    kernel once multiplied two uint16_t operands promoted to int (65535 * 65535 overflows int:
    undefined behaviour, which the sanitizer build of make test reports). Reference: NumPy's
    wrapping products (ONNX Runtime has no kernel for these types)."""
    dt = INTS[t]
    info = np.iinfo(dt)
    a = np.array([info.max, info.min, -1 if info.min < 0 else 3, 123, info.max, 7, info.min, 2], dt)
    b = np.array([info.max, info.min, -1 if info.min < 0 else 200, 45, 2, info.max, 3, 0], dt)
    want = (a.astype(np.int64) * b.astype(np.int64)).astype(dt)   # wraps like the type
    run_model = model([helper.make_node("Mul", ["a", "b"], ["y"])], [("a", t, [8]), ("b", t, [8])], [("y", t, [8])])
    so = tl.compile(save(run_model, tmp_path / "run.onnx"), tmp_path / "r")
    np.testing.assert_array_equal(tl.run(so, {"a": a, "b": b}, tmp_path / "rr")["y"], want)
    folded = model([helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "x"], ["y"])],
                   [("x", t, [8])], [("y", t, [8])], [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")])
    so = tl.compile(save(folded, tmp_path / "fold.onnx"), tmp_path / "f")
    zero = np.zeros(8, dt)
    np.testing.assert_array_equal(tl.run(so, {"x": zero}, tmp_path / "fr")["y"], want)
