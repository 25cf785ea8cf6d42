"""Every element type at run time: each kernel against NumPy for every type it takes.

Each test builds one ONNX graph with a branch per element type (inputs x_<type>, outputs
y_<type>), compiles it once, runs it through cuvil-run on .npy files and compares every
output with NumPy computing the op's definition. Integer results must match exactly; float64
and float32 within the project's tolerance; float16 within a few half-precision ulps. The
last tests run a model mixing int64, bool and float32 against ONNX Runtime, and check that a
run-time index out of range is an error from run naming the node.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cuvil_testlib as tl

try:   # numpy has no bfloat16; ml_dtypes (an onnx dependency) provides it
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    BF16 = None

ONNX_TYPE = {
    "f32": TensorProto.FLOAT, "f64": TensorProto.DOUBLE, "f16": TensorProto.FLOAT16,
    "i8": TensorProto.INT8, "i16": TensorProto.INT16, "i32": TensorProto.INT32, "i64": TensorProto.INT64,
    "u8": TensorProto.UINT8, "u16": TensorProto.UINT16, "u32": TensorProto.UINT32, "u64": TensorProto.UINT64,
    "bool": TensorProto.BOOL, "bf16": TensorProto.BFLOAT16,
}
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16, "i32": np.int32,
      "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
      "bf16": BF16}
NUMERIC = ["f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
ALL = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"]


def values(t, shape, rng, lo=-50, hi=50, nonzero=False):
    """Random values of type t: integers in [lo, hi] (clipped to the type), floats with
    fractions, bool half true."""
    if t == "bool":
        return rng.random(shape) < 0.5
    dt = np.dtype(NP[t])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(max(lo, info.min), min(hi, info.max) + 1, size=shape)
        if nonzero:
            v[v == 0] = 1
        return v.astype(dt)
    v = rng.uniform(lo / 10, hi / 10, size=shape).astype(dt)
    if nonzero:
        v[np.abs(v) < 0.1] = 0.5
    return v


def build(path, nodes, inputs, outputs, inits=(), opset=18):
    """inputs/outputs: (name, type, shape); shape None for an output leaves it to inference."""
    g = helper.make_graph(
        nodes, "dtypes",
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], s) for n, t, s in outputs],
        initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def check(got, want, t, name):
    if t == "bf16":   # .npy has no bfloat16: cuvil-run writes 2-byte voids, as ml_dtypes saves them
        assert got.dtype == np.dtype("V2"), f"{name}: dtype {got.dtype}, want V2 (bfloat16)"
        got = got.view(BF16)
        assert got.shape == want.shape, f"{name}: shape {got.shape}, want {want.shape}"
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=2e-2, err_msg=name)
        return
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, want {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape}, want {want.shape}"
    if t == "f16":
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=4e-3, atol=4e-3, err_msg=name)
    elif t in ("f32", "f64"):
        tl.assert_close(got, want, name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


def run_cases(tmp_path, nodes, inputs, outputs, feeds, wants, types, inits=(), opset=18):
    outputs = [(n, t, list(wants[n].shape) if s is None else s) for n, t, s in outputs]
    path = build(tmp_path / "m.onnx", nodes, inputs, outputs, inits, opset)
    got = tl.compile_and_run(path, feeds, tmp_path)
    for name, t in types.items():
        check(got[name], wants[name], t, name)


# --------------------------------------------------------------------------------------------
# Arithmetic with broadcasting
# --------------------------------------------------------------------------------------------

def trunc_div(a, b):
    """C's integer division (toward zero) in the type's own width, as ONNX Runtime computes."""
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (q * np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64))).astype(a.dtype)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary(tmp_path, op):
    rng = tl.seeded_rng("binary" + op)
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    for t in NUMERIC:
        a = values(t, (2, 3, 4), rng)
        b = values(t, (3, 1), rng, nonzero=op == "Div", lo=1 if t[0] == "u" else -50)
        if t[0] == "u" and op == "Sub":
            a, b = np.maximum(a, b[None, :, :1].repeat(4, 2)), b   # no negative results for unsigned
        nodes.append(helper.make_node(op, [f"a_{t}", f"b_{t}"], [f"y_{t}"]))
        ins += [(f"a_{t}", t, a.shape), (f"b_{t}", t, b.shape)]
        outs.append((f"y_{t}", t, None))
        feeds[f"a_{t}"], feeds[f"b_{t}"] = a, b
        with np.errstate(all="ignore"):
            if op == "Div" and t in INTS:
                want = trunc_div(a, np.broadcast_to(b, a.shape))
            elif t in ("f16", "bf16"):   # computed in float32, rounded once
                want = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                        "Max": np.maximum, "Min": np.minimum}[op](a.astype(np.float32), b.astype(np.float32)).astype(NP[t])
            else:
                want = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                        "Max": np.maximum, "Min": np.minimum}[op](a, b).astype(a.dtype)
        wants[f"y_{t}"], types[f"y_{t}"] = want, t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(tmp_path, fmod):
    """Mod: fmod=0 takes the divisor's sign (numpy's mod, integers only), fmod=1 the dividend's
    (C's fmod, every numeric type); MIN % -1 is 0 (it traps in C on x86). An integer divisor of
    0 is an error from run (test_int_semantics.py)."""
    rng = tl.seeded_rng(f"mod{fmod}")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    for t in (["f32"] + NUMERIC if fmod else INTS):
        a = values(t, (2, 3, 4), rng)
        b = values(t, (3, 1), rng, nonzero=True, lo=0 if t[0] == "u" else -9, hi=9)
        if t in INTS:
            info = np.iinfo(NP[t])
            a[0, 0, :2] = info.min, info.max
            if t[0] == "i":
                b[1, 0] = -1
        nodes.append(helper.make_node("Mod", [f"a_{t}", f"b_{t}"], [f"y_{t}"], fmod=fmod))
        ins += [(f"a_{t}", t, a.shape), (f"b_{t}", t, b.shape)]
        outs.append((f"y_{t}", t, None))
        feeds[f"a_{t}"], feeds[f"b_{t}"] = a, b
        f = np.fmod if fmod else np.mod
        with np.errstate(all="ignore"):
            if t in ("f16", "bf16"):
                want = f(a.astype(np.float32), b.astype(np.float32)).astype(NP[t])
            else:
                want = f(a, np.broadcast_to(b, a.shape)).astype(a.dtype)
        wants[f"y_{t}"], types[f"y_{t}"] = want, t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)
    # fmod=0 on floats is the model's mistake
    path = build(tmp_path / "bad.onnx", [helper.make_node("Mod", ["a", "b"], ["y"])], [("a", "f32", [2]), ("b", "f32", [2])],
                 [("y", "f32", [2])])
    proc = tl.compile_raw(path, tmp_path / "bad.so")
    assert proc.returncode != 0 and "needs fmod=1" in proc.stderr, proc.stderr


def test_integer_wraparound_and_pow(tmp_path):
    """int8 add/mul wrap around as two's complement; integer pow is exact for small results."""
    a8 = np.array([100, -100, 127, -128], np.int8)
    b8 = np.array([100, -100, 1, -1], np.int8)
    ai = np.array([2, 3, -2, 5], np.int64)
    bi = np.array([10, 3, 3, 0], np.int64)
    nodes = [helper.make_node("Add", ["a8", "b8"], ["s8"]), helper.make_node("Mul", ["a8", "b8"], ["m8"]),
             helper.make_node("Pow", ["ai", "bi"], ["p64"]), helper.make_node("Pow", ["af", "bf"], ["pf"])]
    af, bf = np.array([2.0, 0.5, -3.0], np.float64), np.array([0.5, 3.0, 2.0], np.float64)
    ins = [("a8", "i8", [4]), ("b8", "i8", [4]), ("ai", "i64", [4]), ("bi", "i64", [4]), ("af", "f64", [3]),
           ("bf", "f64", [3])]
    outs = [("s8", "i8", None), ("m8", "i8", None), ("p64", "i64", None), ("pf", "f64", None)]
    feeds = {"a8": a8, "b8": b8, "ai": ai, "bi": bi, "af": af, "bf": bf}
    with np.errstate(all="ignore"):
        wants = {"s8": (a8.astype(np.int16) + b8).astype(np.int8), "m8": (a8.astype(np.int16) * b8).astype(np.int8),
                 "p64": np.array([1024, 27, -8, 1], np.int64), "pf": np.power(af, bf)}
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, {"s8": "i8", "m8": "i8", "p64": "i64", "pf": "f64"})


@pytest.mark.parametrize("op", ["Neg", "Abs", "Relu", "Sign"])
def test_unary_integers_and_floats(tmp_path, op):
    rng = tl.seeded_rng("unary" + op)
    types_ = ["f64", "f16", "i8", "i16", "i32", "i64"]
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    for t in types_:
        x = values(t, (3, 5), rng)
        nodes.append(helper.make_node(op, [f"x_{t}"], [f"y_{t}"]))
        ins.append((f"x_{t}", t, x.shape))
        outs.append((f"y_{t}", t, None))
        feeds[f"x_{t}"] = x
        wants[f"y_{t}"] = {"Neg": np.negative, "Abs": np.abs, "Relu": lambda v: np.maximum(v, 0).astype(v.dtype),
                           "Sign": np.sign}[op](x)
        types[f"y_{t}"] = t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


def selu(x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * np.where(x > 0, x, alpha * (np.exp(x) - 1))


def shrink(x, bias=0.0, lambd=0.5):
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


def test_float_math(tmp_path):
    """float64 in double precision, float16 through float32: the math functions against numpy
    (inputs in (0.1, 0.9), where every one of them is defined; acosh takes 1 + x)."""
    rng = tl.seeded_rng("floatmath")
    x64 = rng.uniform(0.1, 0.9, size=(7,)).astype(np.float64)
    x16 = rng.uniform(0.1, 0.9, size=(7,)).astype(np.float16)
    nodes, outs, wants, types = [], [], {}, {}
    one = helper.make_tensor("one64", TensorProto.DOUBLE, [], [1.0]), helper.make_tensor("one16", TensorProto.FLOAT16, [], [1.0])
    for t in ("f64", "f16"):
        nodes.append(helper.make_node("Add", [f"x_{t}", f"one{t[1:]}"], [f"xp1_{t}"]))
    math = [("Sqrt", np.sqrt), ("Exp", np.exp), ("Log", np.log), ("Tanh", np.tanh), ("Floor", np.floor),
            ("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin), ("Acos", np.arccos),
            ("Atan", np.arctan), ("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh),
            ("Atanh", np.arctanh), ("Sign", np.sign), ("Softsign", lambda v: v / (1 + np.abs(v))), ("Selu", selu),
            ("Shrink", shrink), ("ThresholdedRelu", lambda v: np.where(v > 1.0, v, 0)),
            ("Mish", lambda v: v * np.tanh(np.log1p(np.exp(v))))]
    for t, x in (("f64", x64), ("f16", x16)):   # acosh is defined from 1
        nodes.append(helper.make_node("Acosh", [f"xp1_{t}"], [f"Acosh_{t}"]))
        outs.append((f"Acosh_{t}", t, None))
        xp1 = x.astype(np.float64) + 1 if t == "f64" else (x.astype(np.float32) + 1).astype(np.float16).astype(np.float32)
        wants[f"Acosh_{t}"] = np.arccosh(xp1).astype(x.dtype)
        types[f"Acosh_{t}"] = t
    for op, f in math:
        for t, x in (("f64", x64), ("f16", x16)):
            nodes.append(helper.make_node(op, [f"x_{t}"], [f"{op}_{t}"]))
            outs.append((f"{op}_{t}", t, None))
            wants[f"{op}_{t}"] = f(x.astype(np.float64)).astype(x.dtype) if t == "f64" else f(x.astype(np.float32)).astype(np.float16)
            types[f"{op}_{t}"] = t
    run_cases(tmp_path, nodes, [("x_f64", "f64", [7]), ("x_f16", "f16", [7])], outs, {"x_f64": x64, "x_f16": x16},
              wants, types, inits=list(one))


# --------------------------------------------------------------------------------------------
# Comparisons, logic, where
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(tmp_path, op):
    rng = tl.seeded_rng("cmp" + op)
    fn = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
          "GreaterOrEqual": np.greater_equal}[op]
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    for t in ["f32"] + NUMERIC + (["bool"] if op == "Equal" else []):
        a = values(t, (2, 6), rng, lo=-3, hi=3)
        b = values(t, (6,), rng, lo=-3, hi=3)   # small ranges: many ties
        nodes.append(helper.make_node(op, [f"a_{t}", f"b_{t}"], [f"y_{t}"]))
        ins += [(f"a_{t}", t, a.shape), (f"b_{t}", t, b.shape)]
        outs.append((f"y_{t}", "bool", None))
        feeds[f"a_{t}"], feeds[f"b_{t}"] = a, b
        wants[f"y_{t}"], types[f"y_{t}"] = fn(a, b), "bool"
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


def test_logic_and_where(tmp_path):
    rng = tl.seeded_rng("logic")
    p, q = rng.random((3, 4)) < 0.5, rng.random((4,)) < 0.5
    nodes = [helper.make_node("And", ["p", "q"], ["and"]), helper.make_node("Or", ["p", "q"], ["or"]),
             helper.make_node("Xor", ["p", "q"], ["xor"]), helper.make_node("Not", ["p"], ["not"])]
    ins, outs = [("p", "bool", [3, 4]), ("q", "bool", [4])], []
    feeds = {"p": p, "q": q}
    wants = {"and": p & q, "or": p | q, "xor": p ^ q, "not": ~p}
    types = {k: "bool" for k in wants}
    outs = [(k, "bool", None) for k in wants]
    for t in ALL:
        x, y = values(t, (3, 1), rng), values(t, (1, 4), rng)
        nodes.append(helper.make_node("Where", ["p", f"x_{t}", f"y_{t}"], [f"w_{t}"]))
        ins += [(f"x_{t}", t, [3, 1]), (f"y_{t}", t, [1, 4])]
        outs.append((f"w_{t}", t, None))
        feeds[f"x_{t}"], feeds[f"y_{t}"] = x, y
        wants[f"w_{t}"], types[f"w_{t}"] = np.where(p, x, y), t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


# --------------------------------------------------------------------------------------------
# Cast: every pair
# --------------------------------------------------------------------------------------------

CAST_TYPES = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"]


@pytest.mark.parametrize("src", CAST_TYPES)
def test_cast_every_pair(tmp_path, src):
    """Values every target holds (0..100 with fractions for floats), so the result is defined by
    ONNX and NumPy agrees: truncation toward zero, exact small integers, bool as x != 0."""
    rng = tl.seeded_rng("cast" + src)
    if src == "bool":
        x = rng.random((9,)) < 0.5
    elif src in ("f32", "f64", "f16", "bf16"):
        x = np.concatenate([rng.uniform(0, 100, 7), [0.0, 0.75]]).astype(NP[src])
    else:
        x = rng.integers(0, 101, 9).astype(NP[src])
    nodes, outs, wants, types = [], [], {}, {}
    for dst in CAST_TYPES:
        nodes.append(helper.make_node("Cast", ["x"], [f"y_{dst}"], to=ONNX_TYPE[dst]))
        outs.append((f"y_{dst}", dst, None))
        if dst in ("f16", "bf16") and src != dst:   # through float32, as ONNX Runtime does
            wants[f"y_{dst}"] = x.astype(np.float64).astype(np.float32).astype(NP[dst])
        elif src == "bf16" and dst != "bf16":   # exact in float32 first
            wants[f"y_{dst}"] = x.astype(np.float32).astype(NP[dst])
        else:
            wants[f"y_{dst}"] = x.astype(NP[dst])
        types[f"y_{dst}"] = dst
    run_cases(tmp_path, nodes, [("x", src, [9])], outs, {"x": x}, wants, types)


def test_cast_integers_to_float32(tmp_path):
    """int32, int8 and uint8 to float32 over their whole range (the fast loops): each value
    rounded once to nearest even, as NumPy does (2^24 + 1 -> 2^24, 2^31 - 1 -> 2^31)."""
    big = [0, 1, -1, 2**24 + 1, -(2**24 + 1), 2**24 + 3, 2**31 - 1, -2**31, 123456789, -987654321]
    feeds = {"a": np.array(big * 4, np.int32), "b": np.arange(-128, 128, dtype=np.int8), "c": np.arange(256).astype(np.uint8)}
    nodes = [helper.make_node("Cast", [k], [f"y_{k}"], to=ONNX_TYPE["f32"]) for k in feeds]
    wants = {f"y_{k}": v.astype(np.float32) for k, v in feeds.items()}
    run_cases(tmp_path, nodes, [("a", "i32", [40]), ("b", "i8", [256]), ("c", "u8", [256])],
              [(f"y_{k}", "f32", None) for k in feeds], feeds, wants, {f"y_{k}": "f32" for k in feeds})


def test_cast_fast_pairs_at_their_edges(tmp_path):
    """The tight loops for float32 <-> int64, float32 -> int32 / bool, int64 <-> int32 at the
    values where the rules matter, against ONNX Runtime: int64 rounded once to float32 (2^24 + 1,
    2^63 - 1), float32 truncated toward zero, out of range and NaN to the integer minimum (x86's
    integer indefinite), int64 -> int32 keeping the low bits, int32 -> int64 sign-extended,
    NaN and -0 to bool."""
    f = np.array([0.0, -0.0, 1.5, -1.5, 2.5e9, -2.5e9, 9.3e18, -9.3e18, 3e38, -np.inf, np.inf, np.nan,
                  2**31 - 128, -2**31, 123.999, -0.999] * 3, np.float32)
    i64 = np.array([0, 1, -1, 2**24 + 1, -(2**24 + 1), 2**53 + 1, 2**63 - 1, -2**63, 2**32 + 7, -(2**32) - 9,
                    2**31, -2**31 - 1, 123456789012, 5, -6, 7] * 3, np.int64)
    i32 = np.array([0, 1, -1, 2**31 - 1, -2**31, 65536, -65537, 42] * 6, np.int32)
    nodes = [helper.make_node("Cast", ["f"], ["f_i64"], to=ONNX_TYPE["i64"]),
             helper.make_node("Cast", ["f"], ["f_i32"], to=ONNX_TYPE["i32"]),
             helper.make_node("Cast", ["f"], ["f_b"], to=ONNX_TYPE["bool"]),
             helper.make_node("Cast", ["i64"], ["i64_f"], to=ONNX_TYPE["f32"]),
             helper.make_node("Cast", ["i64"], ["i64_i32"], to=ONNX_TYPE["i32"]),
             helper.make_node("Cast", ["i32"], ["i32_i64"], to=ONNX_TYPE["i64"])]
    vi = helper.make_tensor_value_info
    path = tl.onnx_graph_model(tmp_path / "c.onnx", nodes,
                               [vi("f", ONNX_TYPE["f32"], [48]), vi("i64", ONNX_TYPE["i64"], [48]), vi("i32", ONNX_TYPE["i32"], [48])],
                               [("f_i64", ONNX_TYPE["i64"]), ("f_i32", ONNX_TYPE["i32"]), ("f_b", ONNX_TYPE["bool"]),
                                ("i64_f", ONNX_TYPE["f32"]), ("i64_i32", ONNX_TYPE["i32"]), ("i32_i64", ONNX_TYPE["i64"])])
    feeds = {"f": f, "i64": i64, "i32": i32}
    got = tl.compile_and_run(path, feeds, tmp_path)
    for name, w in tl.ort_run(path, feeds).items():
        assert got[name].dtype == w.dtype, name
        np.testing.assert_array_equal(got[name], w, err_msg=name)


# --------------------------------------------------------------------------------------------
# Indexing with run-time indices
# --------------------------------------------------------------------------------------------

def test_gather_family(tmp_path):
    rng = tl.seeded_rng("gather")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    idx64 = np.array([[0, -1], [2, 1]], np.int64)
    idx32 = np.array([3, -4, 0], np.int32)
    for t in ["f32", "f64", "f16", "bf16", "i8", "i64", "u16", "bool"]:
        x = values(t, (4, 3), rng)
        nodes.append(helper.make_node("Gather", [f"x_{t}", "i64"], [f"g0_{t}"], axis=0))
        ins.append((f"x_{t}", t, [4, 3]))
        feeds[f"x_{t}"] = x
        outs.append((f"g0_{t}", t, None))
        wants[f"g0_{t}"], types[f"g0_{t}"] = np.take(x, idx64, axis=0), t
    # int32 indices along axis 1 of a [2, 5] int64 tensor
    x = rng.integers(-9, 9, (2, 5)).astype(np.int64)
    nodes.append(helper.make_node("Gather", ["xi", "i32"], ["gi"], axis=1))
    ins += [("xi", "i64", [2, 5]), ("i64", "i64", [2, 2]), ("i32", "i32", [3])]
    feeds.update(xi=x, i64=idx64, i32=idx32)
    outs.append(("gi", "i64", None))
    wants["gi"], types["gi"] = np.take(x, idx32 % 5, axis=1), "i64"
    # GatherElements / GatherND
    d = rng.integers(0, 100, (3, 4)).astype(np.int64)
    ge = np.array([[2, -1, 0, 1], [0, 0, 2, 1]], np.int64)
    nodes.append(helper.make_node("GatherElements", ["d", "ge"], ["gel"], axis=0))
    gn = np.array([[[0, 1], [2, 3]], [[1, 0], [0, -1]]], np.int64)
    nodes.append(helper.make_node("GatherND", ["d", "gn"], ["gnd"]))
    b = rng.integers(0, 100, (2, 3, 4)).astype(np.int32)
    gb = np.array([[[1], [0]], [[2], [2]]], np.int64)
    nodes.append(helper.make_node("GatherND", ["b", "gb"], ["gnb"], batch_dims=1))
    ins += [("d", "i64", [3, 4]), ("ge", "i64", [2, 4]), ("gn", "i64", [2, 2, 2]), ("b", "i32", [2, 3, 4]),
            ("gb", "i64", [2, 2, 1])]
    feeds.update(d=d, ge=ge, gn=gn, b=b, gb=gb)
    outs += [("gel", "i64", None), ("gnd", "i64", None), ("gnb", "i32", None)]
    wants["gel"] = np.take_along_axis(d, ge % 3, axis=0)
    wants["gnd"] = np.array([[d[0, 1], d[2, 3]], [d[1, 0], d[0, 3]]], np.int64)
    wants["gnb"] = np.stack([b[0][[1, 0]], b[1][[2, 2]]])
    types.update(gel="i64", gnd="i64", gnb="i32")
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter(tmp_path, reduction):
    rng = tl.seeded_rng("scatter" + reduction)
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    idx = np.array([[1, 0, 2], [0, 2, 1]], np.int64) if reduction == "none" else np.array([[1, 1, 2], [1, 2, 1]], np.int64)
    for t in ["f32", "f64", "i32", "i64", "u8"]:
        data = values(t, (3, 3), rng, lo=0 if t == "u8" else -5, hi=5)
        upd = values(t, (2, 3), rng, lo=0 if t == "u8" else -5, hi=5)
        nodes.append(helper.make_node("ScatterElements", [f"d_{t}", "idx", f"u_{t}"], [f"se_{t}"], axis=0,
                                      reduction=reduction))
        ins += [(f"d_{t}", t, [3, 3]), (f"u_{t}", t, [2, 3])]
        feeds[f"d_{t}"], feeds[f"u_{t}"] = data, upd
        want = data.copy()
        for i in range(2):
            for j in range(3):
                r, v = idx[i, j], upd[i, j]
                with np.errstate(all="ignore"):
                    want[r, j] = {"none": v, "add": want[r, j] + v, "mul": want[r, j] * v,
                                  "max": max(want[r, j], v), "min": min(want[r, j], v)}[reduction]
        outs.append((f"se_{t}", t, None))
        wants[f"se_{t}"], types[f"se_{t}"] = want, t
        # ScatterND: rows 2 and (reduced twice for the reductions) 0
        nd_idx = np.array([[2], [0]], np.int64) if reduction == "none" else np.array([[2], [2]], np.int64)
        nodes.append(helper.make_node("ScatterND", [f"d_{t}", "ndi", f"u_{t}"], [f"snd_{t}"], reduction=reduction))
        want = data.copy()
        for k in range(2):
            r = nd_idx[k, 0]
            with np.errstate(all="ignore"):
                want[r] = {"none": upd[k], "add": want[r] + upd[k], "mul": want[r] * upd[k],
                           "max": np.maximum(want[r], upd[k]), "min": np.minimum(want[r], upd[k])}[reduction]
        outs.append((f"snd_{t}", t, None))
        wants[f"snd_{t}"], types[f"snd_{t}"] = want, t
    ins += [("idx", "i64", [2, 3]), ("ndi", "i64", [2, 1])]
    feeds.update(idx=idx, ndi=nd_idx)
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_argmax_argmin(tmp_path, op):
    rng = tl.seeded_rng(op)
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    for t in ["f32", "f64", "f16", "i8", "i32", "i64", "u8", "u64"]:
        x = values(t, (3, 4, 5), rng, lo=0 if t[0] == "u" else -4, hi=4)   # ties
        ins.append((f"x_{t}", t, [3, 4, 5]))
        feeds[f"x_{t}"] = x
        for axis, keep, last in ((1, 1, 0), (-1, 0, 1), (0, 0, 0)):
            name = f"y_{t}_{axis}_{keep}_{last}"
            nodes.append(helper.make_node(op, [f"x_{t}"], [name], axis=axis, keepdims=keep, select_last_index=last))
            f = np.argmax if op == "ArgMax" else np.argmin
            w = f(np.flip(x, axis), axis=axis) if last else f(x, axis=axis)
            if last:
                w = x.shape[axis] - 1 - w
            if keep:
                w = np.expand_dims(w, axis)
            outs.append((name, "i64", None))
            wants[name], types[name] = w.astype(np.int64), "i64"
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


def test_data_movement_every_type(tmp_path):
    """Transpose, Concat, Slice, Split, Expand, Tile, Reshape on integer and bool data."""
    rng = tl.seeded_rng("movement")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [2, 3, 4])
    reps = helper.make_tensor("reps", TensorProto.INT64, [2], [2, 3])
    starts = helper.make_tensor("starts", TensorProto.INT64, [1], [1])
    ends = helper.make_tensor("ends", TensorProto.INT64, [1], [3])
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [-1])
    for t in ["i64", "i8", "u32", "bool", "f16", "f64"]:
        x = values(t, (3, 4), rng)
        ins.append((f"x_{t}", t, [3, 4]))
        feeds[f"x_{t}"] = x
        nodes += [helper.make_node("Transpose", [f"x_{t}"], [f"tr_{t}"], perm=[1, 0]),
                  helper.make_node("Concat", [f"x_{t}", f"x_{t}"], [f"cc_{t}"], axis=1),
                  helper.make_node("Slice", [f"x_{t}", "starts", "ends"], [f"sl_{t}"]),
                  helper.make_node("Split", [f"x_{t}"], [f"s0_{t}", f"s1_{t}"], axis=1, num_outputs=2),
                  helper.make_node("Expand", [f"x_{t}", "shape"], [f"ex_{t}"]),
                  helper.make_node("Tile", [f"x_{t}", "reps"], [f"ti_{t}"]),
                  helper.make_node("Reshape", [f"x_{t}", "flat"], [f"rs_{t}"])]
        got = {"tr": x.T, "cc": np.concatenate([x, x], 1), "sl": x[1:3], "s0": x[:, :2], "s1": x[:, 2:],
               "ex": np.broadcast_to(x, (2, 3, 4)), "ti": np.tile(x, (2, 3)), "rs": x.reshape(-1)}
        for k, v in got.items():
            outs.append((f"{k}_{t}", t, None))
            wants[f"{k}_{t}"], types[f"{k}_{t}"] = np.ascontiguousarray(v), t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types, inits=[shape, reps, starts, ends, flat])


def test_trilu_every_type(tmp_path):
    """Trilu, upper and lower, against numpy's triu/tril: k constant (positive, negative, past
    the matrix) and k computed at run time, on a batch of matrices of each type."""
    rng = tl.seeded_rng("trilu")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    inits = [helper.make_tensor(f"k{i}", TensorProto.INT64, [], [k]) for i, k in enumerate((2, -1, 9))]
    ins.append(("krt", "i64", []))
    feeds["krt"] = np.array(-2, np.int64)
    for t in ["f32", "i64", "u8", "bool", "f16"]:
        x = values(t, (2, 3, 5), rng)
        ins.append((f"x_{t}", t, [2, 3, 5]))
        feeds[f"x_{t}"] = x
        cases = [("u", [], 1, np.triu(x)), ("l", [], 0, np.tril(x)), ("u0", ["k0"], 1, np.triu(x, 2)),
                 ("l1", ["k1"], 0, np.tril(x, -1)), ("u2", ["k2"], 1, np.triu(x, 9)), ("lrt", ["krt"], 0, np.tril(x, -2)),
                 ("urt", ["krt"], 1, np.triu(x, -2))]
        for name, k, upper, want in cases:
            nodes.append(helper.make_node("Trilu", [f"x_{t}"] + k, [f"{name}_{t}"], upper=upper))
            outs.append((f"{name}_{t}", t, None))
            wants[f"{name}_{t}"], types[f"{name}_{t}"] = want, t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types, inits=inits)


def np_cumsum(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        c = c - y
    return np.flip(c, axis) if reverse else c


def test_cumsum_every_type(tmp_path):
    """CumSum, inclusive and exclusive, forward and reverse, along a constant axis and one given
    when the model runs, against numpy; a run-time axis out of range is an error from run."""
    rng = tl.seeded_rng("cumsum")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    inits = [helper.make_tensor("a1", TensorProto.INT64, [], [1]), helper.make_tensor("am1", TensorProto.INT32, [], [-1])]
    ins.append(("art", "i64", []))
    feeds["art"] = np.array(0, np.int64)
    for t in ["f32", "f64", "f16", "i32", "i64", "u64"]:
        x = values(t, (2, 3, 4), rng, lo=0 if t[0] == "u" else -20, hi=20)
        ins.append((f"x_{t}", t, [2, 3, 4]))
        feeds[f"x_{t}"] = x
        for name, axis, ex, rev, ax in (("a", "a1", 0, 0, 1), ("b", "am1", 1, 0, 2), ("c", "a1", 0, 1, 1),
                                         ("d", "am1", 1, 1, 2), ("e", "art", 0, 0, 0), ("f", "art", 1, 1, 0)):
            nodes.append(helper.make_node("CumSum", [f"x_{t}", axis], [f"{name}_{t}"], exclusive=ex, reverse=rev))
            outs.append((f"{name}_{t}", t, None))
            want = np_cumsum(x.astype(np.float32) if t == "f16" else x, ax, ex, rev)
            wants[f"{name}_{t}"], types[f"{name}_{t}"] = want.astype(x.dtype), t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types, inits=inits)
    so = tl.compile(tmp_path / "m.onnx", tmp_path / "again", stem="cumsum")
    feeds["art"] = np.array(3, np.int64)
    proc, _ = tl.run_raw(so, feeds, tmp_path / "bad")
    assert proc.returncode != 0 and "axis is out of range" in proc.stderr, proc.stderr


def test_depth_to_space_and_back(tmp_path):
    """DepthToSpace (DCR and CRD) and SpaceToDepth against numpy's reshape/transpose definitions
    in the ONNX spec, on float32 and int64; a channel count that blocksize^2 does not divide is
    refused by the compiler with the numbers."""
    rng = tl.seeded_rng("d2s")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    b = 2
    for t in ["f32", "i64"]:
        x = values(t, (2, 8, 3, 5), rng)
        ins.append((f"x_{t}", t, [2, 8, 3, 5]))
        feeds[f"x_{t}"] = x
        n, c, h, w = x.shape
        dcr = x.reshape(n, b, b, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 4, h * b, w * b)
        crd = x.reshape(n, c // 4, b, b, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // 4, h * b, w * b)
        back = dcr.reshape(n, c // 4, h, b, w, b).transpose(0, 3, 5, 1, 2, 4).reshape(n, c, h, w)
        nodes += [helper.make_node("DepthToSpace", [f"x_{t}"], [f"dcr_{t}"], blocksize=b),
                  helper.make_node("DepthToSpace", [f"x_{t}"], [f"crd_{t}"], blocksize=b, mode="CRD"),
                  helper.make_node("SpaceToDepth", [f"dcr_{t}"], [f"back_{t}"], blocksize=b)]
        for k, v in (("dcr", dcr), ("crd", crd), ("back", back)):
            outs.append((f"{k}_{t}", t, None))
            wants[f"{k}_{t}"], types[f"{k}_{t}"] = np.ascontiguousarray(v), t
        np.testing.assert_array_equal(back, x)   # the reference itself: SpaceToDepth undoes DCR
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)
    bad = build(tmp_path / "bad.onnx", [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=3)], [("x", "f32", [1, 8, 2, 2])],
                [("y", "f32", [1, 1, 6, 6])])
    proc = tl.compile_raw(bad, tmp_path / "bad.so")
    assert proc.returncode != 0 and "has 8 channels, not a multiple of blocksize^2 = 9" in proc.stderr, proc.stderr


def test_sum_and_mean_at_run_time(tmp_path):
    """Sum and Mean of three run-time inputs that broadcast ([3,1,4], [2,4], [4]) and of one,
    float32 and float64, against numpy."""
    rng = tl.seeded_rng("summean")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    for t in ["f32", "f64"]:
        xs = [values(t, shp, rng) for shp in ((3, 1, 4), (2, 4), (4,))]
        names = [f"{k}_{t}" for k in ("a", "b", "c")]
        for nm, x in zip(names, xs):
            ins.append((nm, t, list(x.shape)))
            feeds[nm] = x
        total = xs[0] + xs[1] + xs[2]
        for op, inputs, want in (("Sum", names, total), ("Mean", names, total / 3), ("Sum", names[:1], xs[0])):
            out = f"{op}{len(inputs)}_{t}"
            nodes.append(helper.make_node(op, inputs, [out]))
            outs.append((out, t, None))
            wants[out], types[out] = want.astype(xs[0].dtype), t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
              "ReduceL2", "ReduceLogSumExp"]


def reduce_ref(op, x, axes, t):
    """numpy's reduction as the ONNX op defines it for type t: integers in 64-bit arithmetic
    that wraps to the type, means and L2 truncated; floats in float64, rounded once."""
    dt = x.dtype
    if t in ("f64", "f16", "bf16"):
        v = x.astype(np.float64)
        r = {"ReduceSum": lambda: v.sum(axes), "ReduceMean": lambda: v.mean(axes), "ReduceMax": lambda: v.max(axes),
             "ReduceMin": lambda: v.min(axes), "ReduceProd": lambda: v.prod(axes),
             "ReduceSumSquare": lambda: (v * v).sum(axes), "ReduceL1": lambda: np.abs(v).sum(axes),
             "ReduceL2": lambda: np.sqrt((v * v).sum(axes)),
             "ReduceLogSumExp": lambda: np.log(np.exp(v).sum(axes))}[op]()
        return np.asarray(r).astype(dt)
    unsigned = dt.kind == "u"
    w = x.astype(np.uint64 if unsigned else np.int64)
    count = int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(over="ignore"):
        r = {"ReduceSum": lambda: w.sum(axes), "ReduceMax": lambda: w.max(axes), "ReduceMin": lambda: w.min(axes),
             "ReduceProd": lambda: w.prod(axes), "ReduceSumSquare": lambda: (w * w).sum(axes),
             "ReduceL1": lambda: (w if unsigned else np.abs(w)).sum(axes),
             "ReduceMean": lambda: (w.sum(axes) // count if unsigned else
                                    np.trunc(w.sum(axes) / count).astype(np.int64)),
             "ReduceL2": lambda: np.trunc(np.sqrt((w * w).sum(axes).astype(np.float64))).astype(np.int64)}[op]()
    return np.asarray(r).astype(dt)   # the low bits: wraps to the type


@pytest.mark.parametrize("t", ["f64", "f16", "i8", "i32", "i64", "u8", "u64"])
def test_reductions_every_type(tmp_path, t):
    """Every reduction at run time on every numeric type (float32 has its own kernel), over
    one axis and over two, against numpy: int8 sums wrap, uint64 values above INT64_MAX
    compare as unsigned."""
    rng = tl.seeded_rng("reduce" + t)
    x = values(t, (3, 4, 5), rng, lo=-6, hi=6)
    if t == "u64":
        x[0, 0, :] = np.uint64(2**63 + 5)
    if t == "i8":
        x[1] = 100   # sums over 4 and over 15 elements leave int8's range
    ops = [op for op in REDUCE_OPS if t in ("f64", "f16") or op != "ReduceLogSumExp"]
    nodes, outs, wants, types, inits = [], [], {}, {}, []
    for ai, axes in enumerate(([1], [0, 2])):
        inits.append(onnx.numpy_helper.from_array(np.array(axes, np.int64), f"ax{ai}"))
        for op in ops:
            out = f"{op}_{ai}"
            nodes.append(helper.make_node(op, ["x", f"ax{ai}"], [out], keepdims=0))
            wants[out], types[out] = reduce_ref(op, x, tuple(axes), t), t
            outs.append((out, t, None))
    run_cases(tmp_path, nodes, [("x", t, [3, 4, 5])], outs, {"x": x}, wants, types, inits)


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_half_inputs_of_float32_kernels_compute_in_float32(tmp_path, t):
    """Ops whose kernels take float32 (MatMul, Softmax, Conv, ReduceMean, LayerNormalization,
    MaxPool, Gemm) on float16 and bfloat16 tensors: computed in float32 between casts, each
    result rounded to the type once, as numpy computes it here in float32 step by step."""
    if t == "bf16" and BF16 is None:
        pytest.skip("ml_dtypes is not installed: no bfloat16 in numpy")
    rng = tl.seeded_rng("half" + t)
    h = NP[t]
    def rnd(x):   # a float32 result rounded to the type
        return np.asarray(x, np.float32).astype(h)
    f32 = np.float32
    a = values(t, (2, 3, 5), rng)
    w = values(t, (5, 4), rng)
    x = values(t, (1, 3, 6, 6), rng)
    k = values(t, (2, 3, 3, 3), rng)
    g = values(t, (5,), rng)
    mm = rnd(a.astype(f32) @ w.astype(f32))
    e = np.exp(mm.astype(f32) - mm.astype(f32).max(-1, keepdims=True))
    sm = rnd(e / e.sum(-1, keepdims=True))
    conv = np.zeros((1, 2, 4, 4), f32)
    xf, kf = x.astype(f32), k.astype(f32)
    for i in range(4):
        for j in range(4):
            conv[0, :, i, j] = np.einsum("chw,ochw->o", xf[0, :, i:i + 3, j:j + 3], kf)
    red = rnd(x.astype(f32).mean(axis=(2, 3)))
    af = a.astype(f32)
    mu, var = af.mean(-1, keepdims=True), af.var(-1, keepdims=True)
    ln = rnd((af - mu) / np.sqrt(var + 1e-5) * g.astype(f32))
    pool = x.reshape(1, 3, 3, 2, 3, 2).max(axis=(3, 5))
    gemm = rnd(a[0].astype(f32) @ a[0].astype(f32).T)
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(k, "k"),
             onnx.numpy_helper.from_array(g, "g"), onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "ax")]
    if t == "bf16":   # numpy_helper stores ml_dtypes' bfloat16 as raw bytes of the right type
        for init, arr in zip(inits[:3], (w, k, g)):
            init.data_type = TensorProto.BFLOAT16
            init.raw_data = arr.view(np.uint16).tobytes()
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Softmax", ["mm"], ["sm"]),
             helper.make_node("Conv", ["x", "k"], ["conv"]),
             helper.make_node("ReduceMean", ["x", "ax"], ["red"], keepdims=0),
             helper.make_node("LayerNormalization", ["a", "g"], ["ln", "lnm"]),
             helper.make_node("MaxPool", ["x"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Gemm", ["a0", "a0"], ["gemm"], transB=1)]
    a0 = a[0]
    wants = {"mm": mm, "sm": sm, "conv": rnd(conv), "red": red, "ln": ln, "pool": pool, "gemm": gemm}
    ins = [("a", t, [2, 3, 5]), ("x", t, [1, 3, 6, 6]), ("a0", t, [3, 5])]
    types = {n: t for n in wants}
    wants["lnm"], types["lnm"] = mu.astype(f32), "f32"   # the statistics stay float32 (stash_type)
    outs = [(n, types[n], None) for n in wants]
    run_cases(tmp_path, nodes, ins, outs, {"a": a, "x": x, "a0": a0}, wants, types, inits)


def half_chain_model(path, t, rng):
    """x (half) -> Conv 3x3 -> Clip(0, 6) -> Conv 1x1 -> Add(the Clip) -> Relu (r2, an output too)
    -> GlobalAveragePool -> Flatten -> Gemm -> y (half); and a model's own Cast pair: a (float32) -> Cast(half) ->
    Cast(float32) -> z. Returns the path, the feeds and the weights as float32."""
    h = NP[t]
    x = values(t, (1, 3, 9, 9), rng)
    a = rng.uniform(-3, 3, (4, 5)).astype(np.float32)
    ws = {"k1": (rng.uniform(-0.4, 0.4, (6, 3, 3, 3))), "b1": rng.uniform(-1, 1, 6), "k2": rng.uniform(-0.4, 0.4, (6, 6, 1, 1)),
          "gw": rng.uniform(-1, 1, (5, 6)), "gb": rng.uniform(-1, 1, 5), "lo": np.array(0.0), "hi": np.array(6.0)}
    ws = {k: v.astype(np.float32).astype(h) for k, v in ws.items()}
    inits = []
    for k, v in ws.items():
        init = onnx.numpy_helper.from_array(v.astype(np.float32), k)
        init.data_type = ONNX_TYPE[t]
        init.ClearField("float_data")
        init.raw_data = v.view(np.uint16).tobytes()
        inits.append(init)
    half = ONNX_TYPE[t]
    nodes = [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             helper.make_node("Conv", ["r1", "k2"], ["c2"]),
             helper.make_node("Add", ["c2", "r1"], ["s"]), helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "gw", "gb"], ["y"], transB=1),
             helper.make_node("Cast", ["a"], ["ah"], to=half), helper.make_node("Cast", ["ah"], ["z"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", half, [1, 3, 9, 9]),
                                           helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 5])],
                          [helper.make_tensor_value_info("y", half, [1, 5]), helper.make_tensor_value_info("r2", half, [1, 6, 9, 9]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 5])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path, {"x": x, "a": a}, {k: v.astype(np.float32) for k, v in ws.items()}


def chain_ref(x, w, step):
    """The chain of half_chain_model in float32 from the rounded input and weights: r2 and y; step
    rounds a result to the half type (identity: rounded only once, at the end)."""
    def conv(x, k, pad):
        n, c, hh, ww = x.shape
        o, _, kh, kw = k.shape
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        y = np.zeros((n, o, hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1), np.float32)
        for i in range(y.shape[2]):
            for j in range(y.shape[3]):
                y[0, :, i, j] = np.einsum("chw,ochw->o", xp[0, :, i:i + kh, j:j + kw], k)
        return y
    c1 = step(conv(x, w["k1"], 1) + w["b1"].reshape(1, -1, 1, 1))
    r1 = step(np.clip(c1, 0, 6))
    c2 = step(conv(r1, w["k2"], 0))
    r2 = step(np.maximum(step(c2 + r1), 0))
    f = step(r2.mean(axis=(2, 3)))
    return r2, f @ w["gw"].T + w["gb"]


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_half_chain_runs_in_float32_between_kernels(tmp_path, t):
    """A float16/bfloat16 model's kernels run in float32 with one cast in and one per output out
    (pass half_chain, as ONNX Runtime computes float16 on CPUs): the IR keeps only those casts and
    the model's own Cast pair (which rounds on purpose and must stay: z is a rounded to the type),
    and the convs fuse the clip, the residual and the relu. The outputs are the float32 chain
    rounded once, closer to it than to numpy rounding every intermediate; with --disable-pass
    half_chain every intermediate is rounded, and the outputs are closer to that. float16: ONNX
    Runtime's outputs agree with the rounded-once chain too."""
    if t == "bf16" and BF16 is None:
        pytest.skip("ml_dtypes is not installed: no bfloat16 in numpy")
    h = NP[t]
    path, feeds, w = half_chain_model(tmp_path / "chain.onnx", t, tl.seeded_rng("halfchain" + t))
    x32 = feeds["x"].astype(np.float32)
    f32 = lambda v: np.asarray(v, np.float32).astype(h).astype(np.float32)   # noqa: E731
    once = [f32(v) for v in chain_ref(x32, w, lambda v: v)]
    step = [f32(v) for v in chain_ref(x32, w, f32)]
    z = feeds["a"].astype(h).astype(np.float32)
    ir = tl.compile(path, tmp_path / "ir", emit="ir").read_text()
    ops = [ln.split("=", 1)[1].split()[0] for ln in ir.splitlines() if ln.lstrip().startswith("%") and " = " in ln]
    assert ops.count("cast") == 5, ir   # x in, y and r2 out, the model's two
    assert "clip" not in ops and "add" not in ops and "relu" not in ops, ir   # fused into the convs
    ulp = 2.0 ** (-10 if t == "f16" else -7)
    err = lambda a, b: float(np.abs(a - b).mean())   # noqa: E731
    assert err(once[0], step[0]) > 0   # the two references differ: the test can tell them apart

    def outs(got):
        return [(got[k].view(BF16) if t == "bf16" else got[k]).astype(np.float32) for k in ("r2", "y")]

    got = tl.compile_and_run(path, feeds, tmp_path / "on")
    np.testing.assert_array_equal(got["z"], z)
    for g, o, st in zip(outs(got), once, step):
        np.testing.assert_allclose(g, o, rtol=2 * ulp, atol=2 * ulp)
    assert err(outs(got)[0], once[0]) < 0.5 * err(outs(got)[0], step[0])
    got = tl.compile_and_run(path, feeds, tmp_path / "off", extra=["--disable-pass", "half_chain"])
    np.testing.assert_array_equal(got["z"], z)
    for g, st in zip(outs(got), step):
        np.testing.assert_allclose(g, st, rtol=2 * ulp, atol=2 * ulp)
    assert err(outs(got)[0], step[0]) < 0.5 * err(outs(got)[0], once[0])
    if t == "f16":
        ort = tl.ort_run(path, feeds)
        for k, o in zip(("r2", "y"), once):
            np.testing.assert_allclose(ort[k].astype(np.float32), o, rtol=2 * ulp, atol=2 * ulp)


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_half_kernels_keep_symbolic_dims(tmp_path, t):
    """A half model with a symbolic batch: the float32 kernels between casts (LayerNorm, MatMul,
    Softmax) give the run's rows, not the range's upper bound (their float32 outputs lost the
    dims' expressions: 4 rows came back for 3, the last garbage)."""
    if t == "bf16" and BF16 is None:
        pytest.skip("ml_dtypes is not installed: no bfloat16 in numpy")
    rng = tl.seeded_rng("halfsym" + t)
    h = NP[t]
    w = values(t, (8, 5), rng)
    init = onnx.numpy_helper.from_array(w.astype(np.float32), "w")
    init.data_type, init.raw_data = ONNX_TYPE[t], w.view(np.uint16).tobytes()
    init.ClearField("float_data")
    one = onnx.numpy_helper.from_array(np.ones(8, np.float32), "g")
    one.data_type, one.raw_data = ONNX_TYPE[t], np.ones(8, h).view(np.uint16).tobytes()
    one.ClearField("float_data")
    nodes = [helper.make_node("LayerNormalization", ["x", "g"], ["ln"], axis=-1), helper.make_node("MatMul", ["ln", "w"], ["mm"]),
             helper.make_node("Softmax", ["mm"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "halfsym", [helper.make_tensor_value_info("x", ONNX_TYPE[t], ["b", 8])],
                          [helper.make_tensor_value_info("y", ONNX_TYPE[t], None)], [init, one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "halfsym.onnx"
    onnx.save(m, path)
    x = values(t, (3, 8), rng)
    got = tl.compile_and_run(path, {"x": x}, tmp_path / "run", dims={"b": "1:4"})["y"]
    xf = x.astype(np.float32)
    ln = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-5)
    mm = ln @ w.astype(np.float32)
    e = np.exp(mm - mm.max(-1, keepdims=True))
    check(got, (e / e.sum(-1, keepdims=True)).astype(h), t, "y")


def test_half_path_messages_mixed_types_and_sum(tmp_path):
    """Found by a review of the float16 path: a float32 input among float16 ones of a Conv or
    Gemm is refused as ONNX Runtime refuses it (not silently computed); messages name the
    model's own values and nodes; Sum and Mean on float16 run (against numpy)."""
    F16, vi = TensorProto.FLOAT16, helper.make_tensor_value_info

    def compile_msg(name, nodes, ins, outs, inits=()):
        g = helper.make_graph(nodes, name, ins, outs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        path = tmp_path / f"{name}.onnx"
        onnx.save(m, path)
        proc = tl.compile_raw(path, tmp_path / f"{name}.so")
        return proc.returncode, proc.stderr

    w32 = onnx.numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    rc, err = compile_msg("conv_mixed", [helper.make_node("Conv", ["x", "w"], ["y"], name="cv")],
                          [vi("x", F16, [1, 3, 5, 5])], [vi("y", F16, None)], [w32])
    assert rc != 0 and "Conv 'cv': inputs 'x' (float16) and 'w' (float32) differ in type" in err, err
    g32 = onnx.numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    rc, err = compile_msg("gemm_mixed", [helper.make_node("Gemm", ["x", "w"], ["y"], name="gm")],
                          [vi("x", F16, [2, 3])], [vi("y", F16, None)], [g32])
    assert rc != 0 and "Gemm 'gm': inputs 'x' (float16) and 'w' (float32) differ in type" in err, err
    rc, err = compile_msg("mm_dims", [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                          [vi("a", F16, [3, 4]), vi("b", F16, [5, 6])], [vi("y", F16, None)])
    assert rc != 0 and "MatMul 'mm': inner dims differ: 'a (as float32)'" in err, err
    rc, err = compile_msg("declared", [helper.make_node("Softmax", ["x"], ["y"], name="sm")],
                          [vi("x", F16, [2, 3])], [vi("y", F16, [2, 4])])
    assert rc != 0 and "Softmax 'sm': graph output 'y' is f16[2,3], but the model declares it [2,4]" in err, err
    rng = tl.seeded_rng("sumf16")
    a, b, c = (values("f16", (2, 3), rng) for _ in range(3))
    f32 = np.float32
    wants = {"s": (a.astype(f32) + b.astype(f32) + c.astype(f32)).astype(np.float16),
             "m": ((a.astype(f32) + b.astype(f32) + c.astype(f32)) / 3).astype(np.float16)}
    run_cases(tmp_path, [helper.make_node("Sum", ["a", "b", "c"], ["s"]), helper.make_node("Mean", ["a", "b", "c"], ["m"])],
              [(n, "f16", [2, 3]) for n in "abc"], [("s", "f16", None), ("m", "f16", None)], {"a": a, "b": b, "c": c},
              wants, {"s": "f16", "m": "f16"})


def test_cuvil_run_prints_values_of_every_type(tmp_path):
    """cuvil-run's summary shows an output's leading values for every type (float16, bfloat16
    and the 16/32/64-bit unsigned integers used to print '?')."""
    cases = {"f16": [1.5, -2, 0.25, 65504], "bf16": [1.5, -2, 0.25, 3.0e38], "i16": [-32768, 7, 0, 32767],
             "u16": [65535, 1, 0, 9], "u32": [4294967295, 2, 0, 3], "u64": [18446744073709551615, 5, 0, 1]}
    nodes = [helper.make_node("Identity", [f"x_{t}"], [f"y_{t}"]) for t in cases]
    path = build(tmp_path / "m.onnx", nodes, [(f"x_{t}", t, [4]) for t in cases], [(f"y_{t}", t, [4]) for t in cases])
    so = tl.compile(path, tmp_path / "build", stem="m")
    feeds = {f"x_{t}": np.array(v, dtype=NP[t] if t != "bf16" else np.float32).astype(NP[t]) for t, v in cases.items()}
    proc, _ = tl.run_raw(so, feeds, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    for t in cases:   # the values the type holds, as C's %g (Python's) or as integers
        x = feeds[f"x_{t}"]
        vals = ["%g" % float(v) for v in x.astype(np.float32)] if t in ("f16", "bf16") else [str(int(v)) for v in x]
        assert f"y_{t}: " in proc.stdout and "[" + ", ".join(vals) + "]" in proc.stdout, (t, proc.stdout)


def test_clip_with_run_time_bounds_every_type(tmp_path):
    """Clip whose bounds are graph inputs (both, min only, max only) and integer Clip with
    constant bounds, against numpy; float NaN stays NaN."""
    rng = tl.seeded_rng("clip")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    inits = []
    for t in ["f32", "f64", "f16", "i8", "i32", "i64", "u8", "u64"]:
        x = values(t, (3, 7), rng, lo=0 if t[0] == "u" else -50, hi=50)
        if t[0] == "f":
            x[0, 0] = np.nan
        lo, hi = np.array(-10 if t[0] != "u" else 5, NP[t]), np.array(20, NP[t])
        ins += [(f"x_{t}", t, [3, 7]), (f"lo_{t}", t, []), (f"hi_{t}", t, [])]
        feeds.update({f"x_{t}": x, f"lo_{t}": lo, f"hi_{t}": hi})
        inits += [onnx.numpy_helper.from_array(lo, f"clo_{t}"), onnx.numpy_helper.from_array(hi, f"chi_{t}")]
        for name, args, want in (("both", [f"lo_{t}", f"hi_{t}"], np.clip(x, lo, hi)), ("min", [f"lo_{t}"], np.maximum(x, lo)),
                                 ("max", ["", f"hi_{t}"], np.minimum(x, hi)),
                                 ("const", [f"clo_{t}", f"chi_{t}"], np.clip(x, lo, hi))):
            nodes.append(helper.make_node("Clip", [f"x_{t}"] + args, [f"{name}_{t}"]))
            outs.append((f"{name}_{t}", t, None))
            wants[f"{name}_{t}"], types[f"{name}_{t}"] = want.astype(x.dtype), t
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types, inits=inits)


def np_topk(x, k, axis, largest):
    """numpy's reference: a stable sort on the key (ties keep the lower index first)."""
    key = -x.astype(np.float64) if largest else x.astype(np.float64)
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def test_topk_every_type(tmp_path):
    """TopK, largest and smallest, along the last axis and axis 0, with ties (small integers
    repeat), values and indices, against a stable numpy sort."""
    rng = tl.seeded_rng("topk")
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    inits = [helper.make_tensor("k3", TensorProto.INT64, [1], [3]), helper.make_tensor("k2", TensorProto.INT64, [1], [2])]
    for t in ["f32", "f64", "f16", "i32", "i64"]:
        x = values(t, (4, 6), rng, lo=-4, hi=4)
        ins.append((f"x_{t}", t, [4, 6]))
        feeds[f"x_{t}"] = x
        for name, k, kn, axis, largest in (("a", 3, "k3", -1, 1), ("b", 3, "k3", -1, 0), ("c", 2, "k2", 0, 1)):
            v, i = np_topk(x, k, axis, largest)
            nodes.append(helper.make_node("TopK", [f"x_{t}", kn], [f"{name}v_{t}", f"{name}i_{t}"], axis=axis,
                                          largest=largest))
            outs += [(f"{name}v_{t}", t, None), (f"{name}i_{t}", "i64", None)]
            wants[f"{name}v_{t}"], types[f"{name}v_{t}"] = v, t
            wants[f"{name}i_{t}"], types[f"{name}i_{t}"] = i, "i64"
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types, inits=inits, opset=11)


def test_isnan_isinf(tmp_path):
    """IsNaN and IsInf (both signs, positive only, negative only) on float32/64 and float16
    holding NaN, +-inf, +-0, large and ordinary values, against numpy."""
    nodes, ins, outs, feeds, wants, types = [], [], [], {}, {}, {}
    base = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 6e4, np.nan, -np.inf]
    for t in ["f32", "f64", "f16"]:
        x = np.array(base, NP[t])
        ins.append((f"x_{t}", t, [len(base)]))
        feeds[f"x_{t}"] = x
        for name, op, kw, want in (("nan", "IsNaN", {}, np.isnan(x)), ("inf", "IsInf", {}, np.isinf(x)),
                                   ("pinf", "IsInf", {"detect_negative": 0}, np.isposinf(x)),
                                   ("ninf", "IsInf", {"detect_positive": 0}, np.isneginf(x))):
            nodes.append(helper.make_node(op, [f"x_{t}"], [f"{name}_{t}"], **kw))
            outs.append((f"{name}_{t}", "bool", None))
            wants[f"{name}_{t}"], types[f"{name}_{t}"] = want, "bool"
    run_cases(tmp_path, nodes, ins, outs, feeds, wants, types)


# --------------------------------------------------------------------------------------------
# A model mixing int64, bool and float against ONNX Runtime; errors from run
# --------------------------------------------------------------------------------------------

def mixed_model(path):
    """Token embedding as a transformer front end writes it: Gather on run-time ids, a padding
    mask from Equal, positions from Range over the sequence length (Shape), Expand, Cast, Where."""
    n = helper.make_node
    emb = onnx.numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4) / 7 - 2, "emb")
    c = lambda name, v, dt=np.int64: onnx.numpy_helper.from_array(np.array(v, dt), name)  # noqa: E731
    nodes = [
        n("Gather", ["emb", "ids"], ["tok"], axis=0),                       # [B, S, 4]
        n("Shape", ["ids"], ["shp"]),
        n("Gather", ["shp", "one"], ["seq"], axis=0),                       # scalar S
        n("Range", ["zero", "seq", "one"], ["pos"]),                        # [S]
        n("Expand", ["pos", "shp"], ["posb"]),                              # [B, S]
        n("Cast", ["posb"], ["posf"], to=TensorProto.FLOAT),
        n("Unsqueeze", ["posf", "axes"], ["pos3"]),                         # [B, S, 1]
        n("Add", ["tok", "pos3"], ["h"]),
        n("Equal", ["ids", "zero"], ["pad"]),                               # bool [B, S]
        n("Unsqueeze", ["pad", "axes"], ["pad3"]),
        n("Where", ["pad3", "negf", "h"], ["masked"]),
        n("Not", ["pad"], ["keep"]),
        n("Cast", ["keep"], ["keepi"], to=TensorProto.INT64),
        n("ReduceSum", ["keepi", "axes1"], ["lens"], keepdims=0),            # int64 [B] (folds? no: run time)
    ]
    g = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 6])],
                          [helper.make_tensor_value_info("masked", TensorProto.FLOAT, [2, 6, 4]),
                           helper.make_tensor_value_info("pad", TensorProto.BOOL, [2, 6]),
                           helper.make_tensor_value_info("keepi", TensorProto.INT64, [2, 6])],
                          initializer=[emb, c("zero", 0), c("one", 1), c("axes", [-1]), c("axes1", [1]),
                                       c("negf", -1.0, np.float32)])
    g.output.pop()   # lens: reductions run on float32 only; keep the model to what is claimed
    g.node.pop()
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return m


def test_mixed_int_bool_float_model_matches_onnx_runtime(tmp_path):
    m = mixed_model(tmp_path / "mixed.onnx")
    ids = np.array([[3, 1, 4, 1, 0, 0], [9, 2, 6, 5, 3, 0]], np.int64)
    got = tl.compile_and_run(tmp_path / "mixed.onnx", {"ids": ids}, tmp_path)
    ref = tl.ort_run(m, {"ids": ids})
    tl.assert_outputs_close(got, ref)


def test_index_out_of_range_is_an_error_from_run(tmp_path):
    m = mixed_model(tmp_path / "mixed.onnx")
    del m
    so = tl.compile(tmp_path / "mixed.onnx", tmp_path / "build")
    proc, _ = tl.run_raw(so, {"ids": np.array([[3, 1, 4, 1, 0, 10], [0] * 6], np.int64)}, tmp_path / "run")
    assert proc.returncode != 0
    assert "Gather" in proc.stderr and "index is out of range [-10, 10)" in proc.stderr, proc.stderr
    proc, _ = tl.run_raw(so, {"ids": np.array([[-10, 1, 4, 1, 0, 2], [0] * 6], np.int64)}, tmp_path / "run2")
    assert proc.returncode == 0, proc.stderr   # -10 counts from the end: row 0
