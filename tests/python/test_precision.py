"""--precision fp16|bf16 (Python: precision=, enable_fp16=True): the library stores its float32
weights in 16 bits; a matrix product's weights and an embedding table are read in place so, the
others widened when a context is created.

The reference is ONNX Runtime on the same model with every float32 initializer of 64 or more
elements rounded to the 16-bit type (what Cuvil promises: each weight rounded once, arithmetic
in float32). The outputs must agree with it far more closely than with the unrounded model's,
so a build that stored float32 weights, or rounded a weight twice (Winograd-transformed weights
rounded after their transform come out 3-4 times further off), fails. Constants that are not
weights (a Pow's exponents, a graph output, values float16 cannot hold) stay exact.
"""
from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cuvil_testlib as tl

ml_dtypes = pytest.importorskip("ml_dtypes")   # an onnx dependency: bfloat16 in NumPy
H16 = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def cnn(path, rng):
    """Two 3x3 convs (Winograd where the target runs it), a 1x1 conv, a pool and a Gemm."""
    def init(n, a):
        return numpy_helper.from_array(a.astype(np.float32), n)
    inits = [init("k1", rng.normal(0, 0.3, (32, 16, 3, 3))), init("b1", rng.normal(0, 0.1, 32)),
             init("k2", rng.normal(0, 0.2, (32, 32, 3, 3))), init("b2", rng.normal(0, 0.1, 32)),
             init("k3", rng.normal(0, 0.3, (64, 32, 1, 1))), init("w", rng.normal(0, 0.3, (100, 64))),
             init("b", rng.normal(0, 0.1, 100))]
    nodes = [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "k2", "b2"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "k3"], ["c3"]), helper.make_node("GlobalAveragePool", ["c3"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 24, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 100])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


# the inputs that are weights (what --precision stores in 16 bits; an Add's operand is not one)
WEIGHT_INPUTS = {("Conv", 1), ("Conv", 2), ("Gemm", 1), ("Gemm", 2), ("MatMul", 1), ("Gather", 0)}


def rounded(path, prec):
    """The model with each float32 weight of >= 64 elements rounded to the 16-bit type; for bf16
    also the other operand of each MatMul or Gemm with such weights (Cast to bfloat16 and back:
    those products take both operands in bfloat16)."""
    m = onnx.load(path)
    uses = {}
    for n in m.graph.node:
        for j, i in enumerate(n.input):
            uses.setdefault(i, set()).add((n.op_type, j))
    big = set()
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT and np.prod(t.dims) >= 64 and uses.get(t.name, {None}) <= WEIGHT_INPUTS:
            a = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array(a.astype(H16[prec]).astype(np.float32), t.name))
            big.add(t.name)
    if prec == "bf16":
        nodes = []
        for k, n in enumerate(m.graph.node):
            if n.op_type in ("MatMul", "Gemm") and n.input[1] in big:
                h, r = f"_bf16_{k}", f"_bf16r_{k}"
                nodes += [helper.make_node("Cast", [n.input[0]], [h], to=TensorProto.BFLOAT16),
                          helper.make_node("Cast", [h], [r], to=TensorProto.FLOAT)]
                n.input[0] = r
            nodes.append(n)
        del m.graph.node[:]
        m.graph.node.extend(nodes)
    return m


def weights_bytes(so):
    return json.loads(tl.run_tool("cuvil-run", [so, "--info", "--json"]).stdout)["info"]["weights_bytes"]


@pytest.mark.parametrize("prec", ["fp16", "bf16"])
@pytest.mark.parametrize("target", [None, "generic"])
def test_weights_in_16_bits_match_the_rounded_model(tmp_path, prec, target):
    """Outputs equal ONNX Runtime's on the model with rounded weights (within float32
    arithmetic's differences), far closer than to the float32 model; the weights the library
    holds are at most 55% of the float32 build's (the transformed Winograd weights, 4 times the
    source's size, are made when a context is created). generic: the portable conversion."""
    path = cnn(tmp_path / "cnn.onnx", tl.seeded_rng("precision-cnn"))
    x = tl.seeded_rng("precision-x").standard_normal((1, 16, 24, 24)).astype(np.float32)
    kw = {"target": target} if target else {}
    so32 = tl.compile(path, tmp_path / "f32", **kw)
    so16 = tl.compile(path, tmp_path / prec, extra=["--precision", prec], **kw)
    assert weights_bytes(so16) <= 0.55 * weights_bytes(so32), (weights_bytes(so16), weights_bytes(so32))
    y = tl.run(so16, {"x": x}, tmp_path / "run")["y"]
    want = tl.ort_run(rounded(path, prec), {"x": x})["y"]
    exact = tl.ort_run(path, {"x": x})["y"]
    off = float(np.abs(want - exact).max())   # what rounding the weights does
    assert off > 1e-4, off
    err = float(np.abs(y - want).max())
    assert err < off / 20, (err, off)
    # a second context of the same library widens its own copy: same outputs
    y2 = tl.run(so16, {"x": x}, tmp_path / "run2")["y"]
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("prec", ["fp16", "bf16"])
def test_constants_that_are_not_weights_stay_exact(tmp_path, prec):
    """Kept float32 under --precision: an embedding table holding values the 16-bit type cannot
    hold (fp16: 1e6; bf16: -FLT_MAX, a mask's value, which rounds to -inf), a Mul's constant (it
    may be a rotary embedding's frequencies: rounded, long positions would drift), a Pow's
    exponents, a constant graph output, and a vector of fewer than 64 elements. A MatMul's weights
    of 1/3 next to them are rounded (the check that the option took effect)."""
    rng = tl.seeded_rng("precision-exact")
    table = rng.uniform(-1, 1, (16, 128)).astype(np.float32)
    table[3, 5] = 1e6 if prec == "fp16" else -np.finfo(np.float32).max
    freq = rng.uniform(1e-4, 1.0, (1, 128)).astype(np.float32)
    expo = rng.uniform(1.0, 2.0, (1, 128)).astype(np.float32)
    small = rng.uniform(-1, 1, (1, 32)).astype(np.float32)
    third = np.full((128, 4), 1 / 3, np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((table, "table"), (freq, "freq"), (expo, "expo"), (small, "small"), (third, "third"))]
    nodes = [helper.make_node("Abs", ["x"], ["ax"]), helper.make_node("Gather", ["table", "ids"], ["y_table"]),
             helper.make_node("Mul", ["x", "freq"], ["y_freq"]),
             helper.make_node("Pow", ["ax", "expo"], ["y_pow"]), helper.make_node("Identity", ["expo"], ["y_const"]),
             helper.make_node("Mul", ["s", "small"], ["y_small"]), helper.make_node("MatMul", ["x", "third"], ["y_third"])]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "exact", [vi("x", TensorProto.FLOAT, [1, 128]), vi("s", TensorProto.FLOAT, [1, 32]),
                                           vi("ids", TensorProto.INT64, [2])],
                          [vi(n, TensorProto.FLOAT, None) for n in ("y_table", "y_freq", "y_pow", "y_const", "y_small", "y_third")],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "exact.onnx"
    onnx.save(m, path)
    feeds = {"x": rng.uniform(-2, 2, (1, 128)).astype(np.float32), "s": rng.uniform(-2, 2, (1, 32)).astype(np.float32),
             "ids": np.array([3, 7], np.int64)}
    proc = tl.compile_raw(path, tmp_path / "m.so", extra=["--precision", prec])
    assert proc.returncode == 0, proc.stderr
    assert "1 constants kept in float32" in proc.stderr, proc.stderr
    got = tl.run(tmp_path / "m.so", feeds, tmp_path / "run")
    want = tl.ort_run(path, feeds)
    for k in ("y_table", "y_freq", "y_const", "y_small"):
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    tl.assert_close(got["y_pow"], want["y_pow"], "y_pow")
    w16 = third.astype(H16[prec]).astype(np.float32)
    x16 = feeds["x"].astype(H16[prec]).astype(np.float32) if prec == "bf16" else feeds["x"]   # (bf16: both operands)
    np.testing.assert_allclose(got["y_third"], x16 @ w16, rtol=1e-5, atol=1e-5)
    assert np.abs(got["y_third"] - want["y_third"]).max() > 1e-4   # rounded: not the float32 answer


def lm(path, rng, vocab=3000, d=64, h=256):
    """An embedding table, a two-product block with a residual, and a head back to the vocabulary,
    over a symbolic sequence length (one row runs the one-row product, more the blocked one)."""
    def init(n, a):
        return numpy_helper.from_array(a.astype(np.float32), n)
    inits = [init("table", rng.normal(0, 1, (vocab, d))), init("w1", rng.normal(0, 0.2, (d, h))),
             init("b1", rng.normal(0, 0.1, h)), init("w2", rng.normal(0, 0.1, (h, d))),
             init("head", rng.normal(0, 0.2, (d, vocab)))]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("MatMul", ["e", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["a1"]), helper.make_node("Relu", ["a1"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m2"]), helper.make_node("Add", ["e", "m2"], ["res"]),
             helper.make_node("MatMul", ["res", "head"], ["y"])]
    g = helper.make_graph(nodes, "lm", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", vocab])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("prec", ["fp16", "bf16"])
@pytest.mark.parametrize("target", [None, "generic"])
def test_products_and_tables_read_in_16_bits(tmp_path, prec, target):
    """A MatMul's prepacked weights and a Gather's table stay in 16 bits in memory: the kernels read
    them where the library stores them and widen them as they go (cuvil_f32_gemm_w16,
    cuvil_gather_w16), so a context widens next to nothing (the note's figure). Outputs equal ONNX
    Runtime's on the model with rounded weights, for one row (the one-row product) and 37 (the
    blocked one). generic: the portable conversion."""
    path = lm(tmp_path / "lm.onnx", tl.seeded_rng("precision-lm"))
    kw = {"target": target} if target else {}
    proc = tl.compile_raw(path, tmp_path / "lm.so", extra=["--precision", prec, "--dim", "seq=1:64"], **kw)
    assert proc.returncode == 0, proc.stderr
    import re
    note = re.search(r"of ([0-9.]+) MB of float32 weights.*widened to ([0-9.]+) MB when a context is created.*"
                     r"; ([0-9.]+) MB of them .* are read in place in 16 bits", proc.stderr)
    assert note, proc.stderr
    f32_mb, widened_mb, in_place_mb = (float(v) for v in note.groups())
    assert f32_mb > 1.5 and widened_mb <= 0.01 and in_place_mb >= 0.45 * f32_mb, proc.stderr
    src = tl.compile(path, tmp_path / "c", emit="c", target=target or tl.effective_target(),
                     extra=["--precision", prec, "--dim", "seq=1:64"])
    code = "".join(f.read_text() for f in src.glob("*.c"))
    assert code.count("cuvil_f32_gemm_w16(") == 3 and "cuvil_gather_w16" in code
    rng = tl.seeded_rng("precision-lm-ids")
    for seq in (1, 37):
        ids = rng.integers(0, 3000, (1, seq)).astype(np.int64)
        y = tl.run(tmp_path / "lm.so", {"ids": ids}, tmp_path / f"run{seq}")["y"]
        want = tl.ort_run(rounded(path, prec), {"ids": ids})["y"]
        exact = tl.ort_run(path, {"ids": ids})["y"]
        off = float(np.abs(want - exact).max())
        assert off > 1e-3, off
        err = float(np.abs(y - want).max())
        assert err < off / 20, (seq, err, off)


def test_float16_model_reads_its_products_in_16_bits(tmp_path):
    """A float16 model (no --precision): its kernels compute in float32, and the products' weights,
    which its float16 initializers hold exactly, stay in 16 bits: the library's weights are about
    half those of the same model in float32, the stored weights are still the layout (no table of
    segments to widen: no copy at create, which is what lets a caller's buffer hold a context; no
    note), and the outputs are the
    float32 computation on those weights rounded to float16 once."""
    rng = tl.seeded_rng("precision-lm16")
    path32 = lm(tmp_path / "lm32.onnx", rng)
    m = onnx.load(path32)
    for t in m.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    path16 = tmp_path / "lm16.onnx"
    onnx.save(m, path16)
    so32 = tl.compile(path32, tmp_path / "b32", extra=["--dim", "seq=1:64"])
    so16 = tmp_path / "lm16.so"
    proc = tl.compile_raw(path16, so16, extra=["--dim", "seq=1:64"])
    assert proc.returncode == 0, proc.stderr
    assert "--precision" not in proc.stderr, proc.stderr
    assert weights_bytes(so16) <= 0.55 * weights_bytes(so32), (weights_bytes(so16), weights_bytes(so32))
    src = tl.compile(path16, tmp_path / "c", emit="c", target=tl.effective_target(), extra=["--dim", "seq=1:64"])
    code = "".join(f.read_text() for f in src.glob("*.c"))
    assert code.count("cuvil_f32_gemm_w16(") == 3 and "wsegs_" not in code
    # --precision fp32 said: float32 weights, as before this storage (the same outputs)
    so16_32 = tl.compile(path16, tmp_path / "strict", extra=["--dim", "seq=1:64", "--precision", "fp32"])
    # (the table stays float16 either way: the Gather runs on it as it is; the products' weights double)
    assert weights_bytes(so16_32) >= 1.4 * weights_bytes(so16), (weights_bytes(so16_32), weights_bytes(so16))
    w = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in m.graph.initializer}
    for seq in (1, 29):
        ids = rng.integers(0, 3000, (1, seq)).astype(np.int64)
        y = tl.run(so16, {"ids": ids}, tmp_path / f"run{seq}")["y"]
        assert y.dtype == np.float16
        np.testing.assert_allclose(tl.run(so16_32, {"ids": ids}, tmp_path / f"strict{seq}")["y"].astype(np.float32),
                                   y.astype(np.float32), rtol=1e-3, atol=1e-3)
        e = w["table"][ids]
        r = np.maximum(e @ w["w1"] + w["b1"], 0)
        want = ((e + r @ w["w2"]) @ w["head"]).astype(np.float16)
        np.testing.assert_allclose(y.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_bad_precision_is_refused(tmp_path):
    path = cnn(tmp_path / "cnn.onnx", tl.seeded_rng("precision-cnn"))
    proc = tl.compile_raw(path, tmp_path / "m.so", extra=["--precision", "int3"])
    tl.assert_clean_failure(proc, mentions=["--precision", "int3"], absent=[tmp_path / "m.so"])
    proc = tl.compile_raw(path, tmp_path / "m.so", extra=["--activations", "fp8"])
    tl.assert_clean_failure(proc, mentions=["--activations", "fp8"], absent=[tmp_path / "m.so"])


def test_python_precision_and_enable_fp16(tmp_path, monkeypatch):
    """cuvil.compile(..., precision="bf16"), enable_fp16=True and activations="fp16" build what
    the command line builds (the last not what float32 builds); a contradictory or unknown
    precision or activations is a ValueError."""
    cuvil = pytest.importorskip("cuvil")
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    path = cnn(tmp_path / "cnn.onnx", tl.seeded_rng("precision-cnn"))
    x = tl.seeded_rng("precision-x").standard_normal((1, 16, 24, 24)).astype(np.float32)
    target = {"target": tl.env_target()} if tl.env_target() else {}   # (the one tl.compile uses)
    for kw, prec in (({"enable_fp16": True}, "fp16"), ({"precision": "bf16"}, "bf16")):
        y = cuvil.compile(str(path), **kw, **target)(x)
        so = tl.compile(path, tmp_path / prec, extra=["--precision", prec])
        np.testing.assert_array_equal(y, tl.run(so, {"x": x}, tmp_path / f"run-{prec}")["y"])
    y = cuvil.compile(str(path), activations="fp16", **target)(x)
    so = tl.compile(path, tmp_path / "act16", extra=["--activations", "fp16"])
    np.testing.assert_array_equal(y, tl.run(so, {"x": x}, tmp_path / "run-act16")["y"])
    assert not np.array_equal(y, cuvil.compile(str(path), **target)(x))
    with pytest.raises(ValueError, match="activations"):
        cuvil.compile(str(path), activations="int8")
    with pytest.raises(ValueError, match="enable_fp16"):
        cuvil.compile(str(path), enable_fp16=True, precision="bf16")
    with pytest.raises(ValueError, match="precision"):
        cuvil.compile(str(path), precision="int8")


def test_python_bfloat16_inputs_and_outputs(tmp_path, monkeypatch):
    """A bfloat16 model from Python: torch.bfloat16 tensors in give torch.bfloat16 out; NumPy
    takes ml_dtypes.bfloat16 arrays or the uint16 bits and gives the bits; all three agree, and
    with ONNX Runtime's reading of the model (float32 arithmetic, bfloat16 output)."""
    cuvil = pytest.importorskip("cuvil")
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    rng = tl.seeded_rng("precision-bf16-io")
    w = rng.normal(0, 0.5, (8, 6)).astype(ml_dtypes.bfloat16)
    t = numpy_helper.from_array(w.astype(np.float32), "w")
    t.data_type, t.raw_data = TensorProto.BFLOAT16, w.view(np.uint16).tobytes()
    t.ClearField("float_data")
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])], "bf",
                          [vi("x", TensorProto.BFLOAT16, [3, 8])], [vi("y", TensorProto.BFLOAT16, [3, 6])], [t])
    mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    mp.ir_version = 8
    path = tmp_path / "bf.onnx"
    onnx.save(mp, path)
    model = cuvil.compile(str(path))
    assert model.inputs[0].bfloat16 and model.inputs[0].dtype == np.uint16
    x = rng.normal(0, 1, (3, 8)).astype(ml_dtypes.bfloat16)
    yt = model(torch.from_numpy(x.view(np.int16)).view(torch.bfloat16))
    assert isinstance(yt, torch.Tensor) and yt.dtype == torch.bfloat16
    ym, yb = model(x), model(x.view(np.uint16))
    assert ym.dtype == np.uint16 and yb.dtype == np.uint16
    np.testing.assert_array_equal(ym, yb)
    np.testing.assert_array_equal(yt.view(torch.int16).numpy().view(np.uint16), yb)
    want = np.tanh(x.astype(np.float32) @ w.astype(np.float32))
    np.testing.assert_allclose(yb.view(ml_dtypes.bfloat16).astype(np.float32), want, rtol=1e-2, atol=1e-2)
    with pytest.raises(TypeError, match="bfloat16"):
        model(x.astype(np.float32))


# ----- --activations fp16|bf16: the values between kernels stored in 16 bits -----------------
def blocks(path, rng):
    """A conv + Relu, a conv whose residual (the first conv's output) and Relu fuse into it, a
    Reshape of that (a relabelling), a MatMul, a Softmax: values of every kind the step meets
    (a fused kernel's output, an epilogue's read, an alias, a product's input), and a small
    one (the last MatMul's 640 outputs: not stored)."""
    def init(n, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), n)
    inits = [init("k1", rng.normal(0, 0.3, (16, 8, 3, 3))), init("b1", rng.normal(0, 0.1, 16)),
             init("k2", rng.normal(0, 0.15, (16, 16, 3, 3))), init("w", rng.normal(0, 0.1, (144, 64))),
             init("w2", rng.normal(0, 0.2, (64, 40))),
             numpy_helper.from_array(np.array([1, 16, 144], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "k2"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Relu", ["a"], ["r2"]), helper.make_node("Reshape", ["r2", "shape"], ["s"]),
             helper.make_node("MatMul", ["s", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "w2"], ["g"]), helper.make_node("Sigmoid", ["g"], ["y"])]
    g = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 40]),
                           helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 16, 64])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def rounded_at(path, names, to):
    """The model with each value in `names` rounded to type `to` where it is made (Cast to it and
    back, its readers reading the result): ONNX Runtime then computes what --activations promises."""
    m = onnx.load(path)
    nodes = []
    for n in m.graph.node:
        nodes.append(n)
        for o in n.output:
            if o in names:
                nodes += [helper.make_node("Cast", [o], [o + "_h"], to=to),
                          helper.make_node("Cast", [o + "_h"], [o + "_r"], to=TensorProto.FLOAT)]
    for n in nodes:
        if n.op_type != "Cast" or not n.output[0].endswith(("_h", "_r")):
            n.input[:] = [i + "_r" if i in names else i for i in n.input]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


@pytest.mark.parametrize("act", ["fp16", "bf16"])
@pytest.mark.parametrize("target", [None, "generic"])
def test_activations_in_16_bits_match_the_rounded_model(tmp_path, act, target):
    """--activations: the values between kernels are the model's rounded once to 16 bits where
    the kernel that makes them writes them. Which values: the fused conv's output r1 (read by
    the next conv and by its epilogue), the second conv's r2 (its residual and Relu fused), the
    MatMul's m; not the Reshape's s (it relabels r2's 16 bits), not the Softmax's p (a graph
    output: the caller's float32), not the last MatMul's 640 outputs (under 1,024). ONNX Runtime on the
    model rounded there must agree far more closely than the float32 model does; and the
    library's stored values must be fewer bytes than the float32 build's would be."""
    path = blocks(tmp_path / "blocks.onnx", tl.seeded_rng("act16-model"))
    x = tl.seeded_rng("act16-x").standard_normal((1, 8, 12, 12)).astype(np.float32)
    kw = {"target": target} if target else {}
    ir = tl.compile(path, tmp_path / "ir", emit="ir", extra=["--activations", act], **kw).read_text()
    label = "stored as float16" if act == "fp16" else "stored as bfloat16"
    stored = set(re.findall(r'cast "(\w+) \(' + label + r'\)"', ir))
    assert stored == {"r1", "r2", "m"}, stored
    so = tl.compile(path, tmp_path / act, extra=["--activations", act], **kw)
    got = tl.run(so, {"x": x}, tmp_path / "run")
    to = TensorProto.FLOAT16 if act == "fp16" else TensorProto.BFLOAT16
    want = tl.ort_run(rounded_at(path, {"r1", "r2", "m"}, to), {"x": x})
    exact = tl.ort_run(path, {"x": x})
    for k in ("y", "p"):
        off = float(np.abs(want[k] - exact[k]).max())   # what rounding the activations does
        assert off > (1e-5 if act == "fp16" else 1e-4), (k, off)
        err = float(np.abs(got[k] - want[k]).max())
        assert err < off / 10, (k, err, off)


def hazards(path, rng):
    """Values --activations must leave in float32: m1, which a Reshape relabels into a graph
    output; m2, which a Sin reads (angles); mk, made from a constant float16 and bfloat16 cannot
    hold (an attention mask's -3.4e38); and ones it stores: s (Sin's output) and m3."""
    def init(n, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), n)
    inits = [init("w1", rng.normal(0, 0.2, (32, 32))), init("w2", rng.normal(0, 0.2, (32, 32))),
             init("w3", rng.normal(0, 0.2, (32, 32))), init("lowest", [np.finfo(np.float32).min]),
             numpy_helper.from_array(np.array([1, 2048], np.int64), "flat")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Reshape", ["m1", "flat"], ["o1"]),
             helper.make_node("MatMul", ["x", "w2"], ["m2"]), helper.make_node("Sin", ["m2"], ["s"]),
             helper.make_node("MatMul", ["s", "w3"], ["m3"]), helper.make_node("Mul", ["mask", "lowest"], ["mk"]),
             helper.make_node("Add", ["m3", "mk"], ["a"]), helper.make_node("Softmax", ["a"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "hazards", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 32]),
                                             helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 64, 32])],
                          [helper.make_tensor_value_info("o1", TensorProto.FLOAT, [1, 2048]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 32])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("act", ["fp16", "bf16"])
def test_activations_keep_what_16_bits_would_break(tmp_path, act):
    """Not stored: a value a Reshape makes a graph output (o1 equals the float32 build's), what
    a Sin reads, what a constant beyond the type's range makes (a mask's -3.4e38, which would
    become -inf: the masked entries' softmax stays what float32 gives). Stored: the rest."""
    path = hazards(tmp_path / "hazards.onnx", tl.seeded_rng("act16-hazards"))
    rng = tl.seeded_rng("act16-hazards-x")
    feed = {"x": rng.standard_normal((1, 64, 32)).astype(np.float32),
            "mask": (rng.random((1, 64, 32)) < 0.25).astype(np.float32)}
    ir = tl.compile(path, tmp_path / "ir", emit="ir", extra=["--activations", act]).read_text()
    label = "stored as float16" if act == "fp16" else "stored as bfloat16"
    assert set(re.findall(r'cast "(\w+) \(' + label + r'\)"', ir)) == {"s", "m3"}
    got = tl.run(tl.compile(path, tmp_path / act, extra=["--activations", act]), feed, tmp_path / "run")
    f32 = tl.run(tl.compile(path, tmp_path / "f32"), feed, tmp_path / "run32")
    np.testing.assert_array_equal(got["o1"], f32["o1"])
    to = TensorProto.FLOAT16 if act == "fp16" else TensorProto.BFLOAT16
    want = tl.ort_run(rounded_at(path, {"s", "m3"}, to), feed)["y"]
    assert np.isfinite(got["y"]).all() and (got["y"][feed["mask"] > 0] == 0).all()
    assert float(np.abs(got["y"] - want).max()) < 1e-5


def test_activation_overflowing_float16_fails_the_run(tmp_path):
    """A value beyond float16's 65504 at run time: the fp16 build's run fails naming the value
    (not an infinity going on), on one thread and on two (the overflow in the second thread's
    half); bfloat16 holds it, and its run gives the rounded model's."""
    def init(n, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), n)
    w = np.full((64, 64), 40.0, np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["big"]),
                           helper.make_node("Transpose", ["big"], ["y"], perm=[0, 2, 1])], "ovf",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 512])], [init("w", w)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "ovf.onnx"
    onnx.save(m, path)
    x = np.full((1, 512, 64), 0.5, np.float32)
    x[0, 400:] = 30.0   # each sum there 64 * 30 * 40 = 76800
    so = tl.compile(path, tmp_path / "fp16", extra=["--activations", "fp16"])
    np.save(tmp_path / "x.npy", x)
    for th in ("1", "2"):
        proc = tl.run_tool("cuvil-run", [so, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "o",
                                         "--threads", th])
        assert proc.returncode != 0 and "big (stored as float16)" in proc.stderr and "65504" in proc.stderr, proc.stderr
    x[0, 400:] = 0.5
    assert tl.run(so, {"x": x}, tmp_path / "fine", threads=2)["y"].shape == (1, 64, 512)
    x[0, 400:] = 30.0
    y = tl.run(tl.compile(path, tmp_path / "bf16", extra=["--activations", "bf16"]), {"x": x}, tmp_path / "run")["y"]
    want = tl.ort_run(rounded_at(path, {"big"}, TensorProto.BFLOAT16), {"x": x})["y"]
    np.testing.assert_array_equal(y, want)
