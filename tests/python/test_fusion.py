"""The transformer fusions on small graphs: a Linear's bias into its MatMul (fuse_bias), Gelu
written as a formula into one gelu (fuse_gelu) and from there into the MatMul's epilogue
(fuse_act). Each case is checked twice: the IR shows the fusion (or, for the near misses, does
not), and the compiled model matches ONNX Runtime on the unfused graph."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

import cuvil_testlib as tl
from onnx_cases import Case, R, f32, node

SQRT2 = float(np.sqrt(2.0))


def _gelu_erf(order: str, x="h", y="y", c_sqrt2=SQRT2, mul_half=0.5):
    """Gelu(x) = x * 0.5 * (1 + erf(x / sqrt 2)) with the products in one of three orders."""
    nodes = [node("Div", [x, "sqrt2"], ["u"]), node("Erf", ["u"], ["e"]), node("Add", ["e", "one"], ["s"])]
    if order == "s*x*half":        # (s * x) * 0.5
        nodes += [node("Mul", ["s", x], ["m1"]), node("Mul", ["m1", "half"], [y])]
    elif order == "half*s*x":      # (0.5 * s) * x  (the dynamo exporter's)
        nodes += [node("Mul", ["half", "s"], ["m1"]), node("Mul", [x, "m1"], [y])]
    else:                          # (x * 0.5) * s  (HF's formula as written)
        nodes += [node("Mul", [x, "half"], ["m1"]), node("Mul", ["m1", "s"], [y])]
    inits = {"sqrt2": f32(c_sqrt2).reshape(()), "one": f32(1.0).reshape(()), "half": f32(mul_half).reshape(())}
    return nodes, inits


def _gelu_tanh(x="h", y="y"):
    """GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    nodes = [node("Mul", ["half", x], ["hx"]), node("Pow", [x, "three"], ["p3"]),
             node("Mul", ["p3", "c1"], ["m"]), node("Add", [x, "m"], ["a"]),
             node("Mul", ["a", "c0"], ["k"]), node("Tanh", ["k"], ["t"]),
             node("Add", ["t", "one"], ["s"]), node("Mul", ["hx", "s"], [y])]
    inits = {"half": f32(0.5).reshape(()), "three": f32(3.0).reshape(()), "c1": f32(0.044715).reshape(()),
             "c0": f32(np.sqrt(2.0 / np.pi)).reshape(()), "one": f32(1.0).reshape(())}
    return nodes, inits


def _gelu_tanh_jax(x="h", y="y", c1=0.044715, power=3):
    """jax2tf's (Magika's): the cube as products, x * (x * (0.044715 * x)), and the halving last:
    x * (0.5 * (1 + tanh(sqrt(2/pi) * (x + that))))."""
    nodes = [node("Mul", ["c1", x], ["m0"])]
    prev = "m0"
    for i in range(power - 1):
        nodes.append(node("Mul", [x, prev], [f"m{i + 1}"]))
        prev = f"m{i + 1}"
    nodes += [node("Add", [x, prev], ["a"]), node("Mul", ["c0", "a"], ["k"]), node("Tanh", ["k"], ["t"]),
              node("Add", ["one", "t"], ["s"]), node("Mul", ["half", "s"], ["hs"]), node("Mul", [x, "hs"], [y])]
    inits = {"half": f32(0.5).reshape(()), "c1": f32(c1).reshape(()),
             "c0": f32(np.sqrt(2.0 / np.pi)).reshape(()), "one": f32(1.0).reshape(())}
    return nodes, inits


def _linear_gelu(case_id, gelu_nodes, gelu_inits, bias_shape=(48,)):
    """x [2, 5, 32] -> MatMul W [32, 48] -> Add b -> Gelu -> MatMul W2 [48, 16]."""
    nodes = [node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["h"])] + gelu_nodes + \
            [node("MatMul", ["y", "w2"], ["z"])]
    inits = {"w": R(32, 48), "b": R(*bias_shape), "w2": R(48, 16), **gelu_inits}
    return Case(case_id, 14, nodes, {"x": [2, 5, 32]}, inits, outputs=["z"])


def _ir_and_check(c: Case, tmp_path) -> str:
    m, inputs, ref = c.build()
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    ir = tl.compile(p, tmp_path / "ir", emit="ir").read_text()
    so = tl.compile(p, tmp_path / "build")
    tl.assert_outputs_close(tl.run(so, inputs, tmp_path / "run"), ref)
    return ir


def _ops(ir: str) -> list:
    return re.findall(r"^  %\d+ = ([a-z_]+) ", ir, flags=re.M)


@pytest.mark.parametrize("order", ["s*x*half", "half*s*x", "x*half*s"])
def test_linear_bias_and_erf_gelu_become_one_matmul(order, tmp_path):
    ir = _ir_and_check(_linear_gelu(f"fuse-erf-{order}", *_gelu_erf(order)), tmp_path)
    assert _ops(ir) == ["matmul", "matmul"], ir
    first = next(line for line in ir.splitlines() if " = matmul " in line)
    assert "act=gelu(0," in first and re.search(r"\(%\d+, %\d+, %\d+\)", first), first


def test_tanh_gelu_becomes_the_tanh_form(tmp_path):
    ir = _ir_and_check(_linear_gelu("fuse-tanh", *_gelu_tanh()), tmp_path)
    assert _ops(ir) == ["matmul", "matmul"], ir
    assert "act=gelu(1," in ir, ir


def test_jax_tanh_gelu_becomes_the_tanh_form(tmp_path):
    ir = _ir_and_check(_linear_gelu("fuse-tanh-jax", *_gelu_tanh_jax()), tmp_path)
    assert _ops(ir) == ["matmul", "matmul"], ir
    assert "act=gelu(1," in ir, ir


@pytest.mark.parametrize("what", ["square", "fourth-power", "not-0.044715"])
def test_near_jax_tanh_gelu_is_left_alone(what, tmp_path):
    """x^2 or x^4 in place of the cube, or another coefficient: not Gelu; the nodes stay."""
    kw = {"square": {"power": 2}, "fourth-power": {"power": 4}, "not-0.044715": {"c1": 0.045}}[what]
    ir = _ir_and_check(_linear_gelu(f"fuse-near-jax-{what}", *_gelu_tanh_jax(**kw)), tmp_path)
    assert "gelu" not in ir
    assert "tanh" in ir


@pytest.mark.parametrize("what", ["not-sqrt2", "not-half"])
def test_near_gelu_is_left_alone(what, tmp_path):
    """A formula with another constant is not Gelu: the nodes stay and the numbers still match."""
    kw = {"c_sqrt2": 1.5} if what == "not-sqrt2" else {"mul_half": 0.45}
    ir = _ir_and_check(_linear_gelu(f"fuse-near-{what}", *_gelu_erf("s*x*half", **kw)), tmp_path)
    assert "gelu" not in ir
    assert "erf" in ir


def test_gelu_input_also_read_elsewhere(tmp_path):
    """The Gelu's input h is also a graph output: the bias still goes into the MatMul, which
    then writes h, and the formula still becomes one gelu, but that cannot be the MatMul's
    epilogue (h must be kept)."""
    c = _linear_gelu("fuse-shared", *_gelu_erf("x*half*s"))
    c.outputs = ["z", "h"]
    ir = _ir_and_check(c, tmp_path)
    assert "act=gelu" not in ir
    assert _ops(ir) == ["matmul", "gelu", "matmul"], ir


def test_bias_of_rank_4_is_not_fused(tmp_path):
    """[1, 1, 1, N] broadcasts like a row here, but at other values of a symbol it may not
    (an attention mask [batch, 1, 1, N]): only 1-D biases are fused."""
    nodes = [node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["y"])]
    c = Case("fuse-bias-4d", 14, nodes, {"x": [1, 2, 5, 32]}, {"w": R(32, 48), "b": R(1, 1, 1, 48)})
    ir = _ir_and_check(c, tmp_path)
    assert _ops(ir) == ["matmul", "add"], ir


def test_gelu_op_tanh_form(tmp_path):
    """The ONNX Gelu op (opset 20) with approximate='tanh', alone and after a MatMul."""
    nodes = [node("MatMul", ["x", "w"], ["mm"]), node("Gelu", ["mm"], ["y"], approximate="tanh"),
             node("Gelu", ["x"], ["y2"], approximate="tanh")]
    c = Case("gelu-op-tanh", 20, nodes, {"x": [3, 32]}, {"w": R(32, 32)}, outputs=["y", "y2"])
    ir = _ir_and_check(c, tmp_path)
    assert "act=gelu(1," in ir


def _guarded_softmax(case_id, zero=0.0):
    """s = softmax(x + mask) with row 1 of the mask all -inf, then Where(IsNaN(s), zero, s): the
    guard torch's attention export puts after its softmax."""
    mask = np.zeros((1, 1, 4, 6), np.float32)
    mask[0, 0, 1, :] = -np.inf
    mask[0, 0, 2, 3:] = -np.inf
    nodes = [node("Add", ["x", "mask"], ["a"]), node("Softmax", ["a"], ["s"], axis=-1),
             node("IsNaN", ["s"], ["n"]), node("Where", ["n", "z", "s"], ["y"])]
    return Case(case_id, 14, nodes, {"x": [2, 3, 4, 6]}, {"mask": mask, "z": f32(zero).reshape(())})


def test_softmax_nan_guard_fused(tmp_path):
    """The fully masked row is 0 (NaN without the guard), the others a softmax; one node."""
    ir = _ir_and_check(_guarded_softmax("fuse-nan-guard"), tmp_path)
    assert _ops(ir) == ["add", "softmax"], ir
    assert "nan_to_zero=1" in ir, ir


def test_softmax_nan_guard_other_value_left_alone(tmp_path):
    ir = _ir_and_check(_guarded_softmax("fuse-nan-guard-one", zero=1.0), tmp_path)
    assert _ops(ir) == ["add", "softmax", "is_nan", "where"], ir


def _as_float16(m):
    """m with its float32 inputs, outputs and initializers float16: a float16 model as a converter
    writes it (onnxconverter-common's float16 conversion keeps the same nodes)."""
    m16 = onnx.ModelProto()
    m16.CopyFrom(m)
    for t in m16.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float16), t.name))
    for vi in list(m16.graph.input) + list(m16.graph.output):
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    return m16


@pytest.mark.parametrize("what", ["gelu", "nan_guard"])
def test_float16_model_keeps_its_fusions(what, tmp_path):
    """A float16 model is computed in float32 between casts. Its Gelu formula, whose sqrt 2 is
    float16's 1.4140625, still becomes one gelu in the MatMul's epilogue; the guard after its
    softmax, whose IsNaN reads the softmax cast back to float16, still folds into the softmax
    (neither did: a converted DistilBERT ran 20% slower than its float32 build). Against ONNX
    Runtime on the float32 graph with the float16 model's constants and inputs, within float16's
    rounding."""
    c = _linear_gelu("f16-gelu", *_gelu_erf("x*half*s")) if what == "gelu" else _guarded_softmax("f16-nan-guard")
    m32, inputs, _ = c.build()
    m16 = _as_float16(m32)
    ref = onnx.ModelProto()
    ref.CopyFrom(m32)
    for t in ref.graph.initializer:   # (float32 arithmetic on the float16 model's values)
        if t.data_type == onnx.TensorProto.FLOAT:
            a = onnx.numpy_helper.to_array(t).astype(np.float16).astype(np.float32)
            t.CopyFrom(onnx.numpy_helper.from_array(a, t.name))
    x16 = {k: v.astype(np.float16) for k, v in inputs.items()}
    want = tl.ort_run(ref, {k: v.astype(np.float32) for k, v in x16.items()})
    p = tmp_path / "m16.onnx"
    onnx.save(m16, p)
    ir = tl.compile(p, tmp_path / "ir", emit="ir").read_text()
    got = tl.run(tl.compile(p, tmp_path / "build"), x16, tmp_path / "run")
    for k, w in want.items():
        assert got[k].dtype == np.float16
        np.testing.assert_allclose(got[k].astype(np.float32), w, rtol=4e-3, atol=4e-3 * np.abs(w).max(), err_msg=k)
    if what == "gelu":
        assert "act=gelu(0," in ir and "erf" not in _ops(ir), ir
    else:
        assert "nan_to_zero=1" in ir and "is_nan" not in _ops(ir) and "where" not in _ops(ir), ir


def _layer_norm_formula(case_id, swap=False, axes=(-1,), eps=1e-12):
    """LayerNorm as the TorchScript exporter writes it below opset 17, after a MatMul."""
    nodes = [node("MatMul", ["x", "w"], ["h"]),
             node("ReduceMean", ["h"], ["m"], axes=list(axes)), node("Sub", ["h", "m"], ["d"]),
             node("Pow", ["d", "two"], ["p"]), node("ReduceMean", ["p"], ["v"], axes=list(axes)),
             node("Add", ["v", "eps"], ["e"]), node("Sqrt", ["e"], ["s"]), node("Div", ["d", "s"], ["n"]),
             node("Mul", ["gamma", "n"] if swap else ["n", "gamma"], ["g"]),
             node("Add", ["beta", "g"] if swap else ["g", "beta"], ["y"])]
    inits = {"w": R(16, 24), "two": f32(2.0).reshape(()),
             "eps": f32(eps).reshape(()), "gamma": R(24), "beta": R(24)}
    return Case(case_id, 14, nodes, {"x": [2, 5, 16]}, inits)


@pytest.mark.parametrize("swap", [False, True], ids=["n*gamma+beta", "beta+gamma*n"])
def test_layer_norm_formula_becomes_one_node(swap, tmp_path):
    ir = _ir_and_check(_layer_norm_formula(f"fuse-ln-{swap}", swap=swap), tmp_path)
    assert _ops(ir) == ["matmul", "layer_norm"], ir
    assert "epsilon=9.99999996e-13" in ir or "epsilon=1e-12" in ir, ir


def test_layer_norm_formula_over_another_axis_left_alone(tmp_path):
    ir = _ir_and_check(_layer_norm_formula("fuse-ln-axis", axes=(-2,)), tmp_path)
    assert "layer_norm" not in ir


def test_gelu_through_a_reshape_into_the_gemm(tmp_path):
    """GPT-2's Linear: Gemm on [batch * seq, n], Reshape to [batch, seq, n], then Gelu (tanh):
    the Gelu goes into the Gemm's epilogue through the reshape."""
    gelu_nodes, gelu_inits = _gelu_tanh(x="r")
    nodes = [node("Reshape", ["x", "s2"], ["x2"]), node("Gemm", ["x2", "w", "b"], ["h"]),
             node("Reshape", ["h", "s3"], ["r"])] + gelu_nodes
    inits = {"s2": np.array([-1, 32], np.int64), "w": R(32, 48), "b": R(48), "s3": np.array([2, 5, 48], np.int64),
             **gelu_inits}
    ir = _ir_and_check(Case("fuse-gelu-view", 14, nodes, {"x": [2, 5, 32]}, inits), tmp_path)
    assert _ops(ir) == ["reshape", "gemm", "reshape"], ir
    assert "act=gelu(1," in ir, ir


# ---- attention (pass_fuse_attention.c) ----------------------------------------------------
B, S, H, D = 2, 7, 3, 8   # batch, sequence, heads, head dim: hidden 24


def _heads(src, dst, perm=(0, 2, 1, 3)):
    """[B, S, H * D] -> Reshape [B, S, H, D] -> Transpose perm."""
    return [node("Reshape", [src, "shp4"], [dst + "_r"]), node("Transpose", [dst + "_r"], [dst], perm=list(perm))]


def _attention(case_id, *, scale="qk", mask="input", guard=False, k_path="dynamo", rank3=False,
               softmax_out=False, v_scale=False, kv_cache=False, opset=14, axis=-1):
    """One attention block as the torch exporters write it: x [B, S, 24] -> three MatMuls ->
    heads -> scores (scaled: 'qk' multiplies q and k' by d^-1/4 as dynamo does, 'div' divides
    the scores by sqrt(d)) + mask ('input' [B, 1, 1, S] float, 'causal' a constant [S, S] of 0
    and finfo.min, 'rows' an input [B, 1, S, S], None) -> Softmax [-> Where(IsNaN)] -> * v ->
    Transpose -> Reshape [B, S, 24] -> MatMul."""
    c4 = float(D) ** -0.25
    nodes = [node("MatMul", ["x", "wq"], ["pq"]), node("MatMul", ["x", "wk"], ["pk"]),
             node("MatMul", ["x", "wv"], ["pv"])]
    nodes += _heads("pq", "q") + _heads("pv", "v0")
    if k_path == "dynamo":   # TorchScript-free path: heads, [B*H, S, D], transposed, back to [B, H, D, S]
        nodes += _heads("pk", "k") + [node("Reshape", ["k", "shp3"], ["k3"]),
                                      node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
                                      node("Reshape", ["k3t", "shp4t"], ["kt"])]
    else:                     # TorchScript's: one Transpose straight from the heads' reshape
        nodes += [node("Reshape", ["pk", "shp4"], ["k_r"]), node("Transpose", ["k_r"], ["kt"], perm=[0, 2, 3, 1])]
    inputs = {"x": [B, S, 24]}
    outputs = ["y"]
    if kv_cache:   # K and V after a past of 4 tokens; the concatenations are outputs too
        nodes += [node("Transpose", ["kt"], ["kn"], perm=[0, 1, 3, 2]),
                  node("Concat", ["past_k", "kn"], ["present_k"], axis=2),
                  node("Transpose", ["present_k"], ["kt2"], perm=[0, 1, 3, 2]),
                  node("Concat", ["past_v", "v0"], ["present_v"], axis=2)]
        inputs.update(past_k=[B, H, 4, D], past_v=[B, H, 4, D])
        outputs += ["present_k", "present_v"]
        kt, v = "kt2", "present_v"
    else:
        kt, v = "kt", "v0"
    if v_scale:
        nodes += [node("Mul", [v, "c2"], ["vs"])]
        v = "vs"
    q = "q"
    if rank3:
        nodes += [node("Reshape", [q, "shp3"], ["q3"]), node("Reshape", [kt, "shp3t"], ["kt3"]),
                  node("Reshape", [v, "shp3"], ["v3"])]
        q, kt, v = "q3", "kt3", "v3"
    if scale == "qk":
        nodes += [node("Mul", [q, "c4"], ["qs"]), node("Mul", [kt, "c4"], ["ks"]), node("MatMul", ["qs", "ks"], ["sc"])]
    else:
        nodes += [node("MatMul", [q, kt], ["sc0"]), node("Div", ["sc0", "sqrtd"], ["sc"])]
    kv = S + 4 if kv_cache else S
    if mask == "input":
        inputs["mask"] = [1, 1, kv] if rank3 else [B, 1, 1, kv]
        nodes += [node("Add", ["sc", "mask"], ["sm_in"])]
    elif mask == "rows":
        inputs["mask"] = [B, 1, S, kv]
        nodes += [node("Add", ["mask", "sc"], ["sm_in"])]
    elif mask == "causal":
        nodes += [node("Add", ["sc", "causal"], ["sm_in"])]
    nodes += [node("Softmax", ["sm_in" if mask else "sc"], ["p"], axis=axis)]
    if guard:
        nodes += [node("IsNaN", ["p"], ["isn"]), node("Where", ["isn", "zero", "p"], ["pg"])]
    pp = "pg" if guard else "p"
    nodes += [node("MatMul", [pp, v], ["o"])]
    if rank3:
        nodes += [node("Reshape", ["o", "shp4h"], ["o4"])]
        o = "o4"
    else:
        o = "o"
    nodes += [node("Transpose", [o], ["ot"], perm=[0, 2, 1, 3]), node("Reshape", ["ot", "shp_out"], ["attn"]),
              node("MatMul", ["attn", "wo"], ["y"])]
    if softmax_out:
        outputs.append("p")
    causal = np.where(np.arange(kv)[None, :] > np.arange(S)[:, None] + kv - S, np.finfo(np.float32).min, 0)
    inits = {"wq": R(24, 24), "wk": R(24, 24), "wv": R(24, 24), "wo": R(24, 24),
             "shp4": np.array([B, -1, H, D], np.int64), "shp_out": np.array([B, S, H * D], np.int64),
             "shp3": np.array([B * H, -1, D], np.int64), "shp3t": np.array([B * H, D, -1], np.int64),
             "shp4t": np.array([B, H, D, -1], np.int64), "shp4h": np.array([B, H, -1, D], np.int64),
             "c4": f32(c4).reshape(()), "c2": f32(0.5).reshape(()), "sqrtd": f32(np.sqrt(D)).reshape(()),
             "zero": f32(0.0).reshape(()), "causal": causal.astype(np.float32)}
    return Case(case_id, opset, nodes, inputs, inits, outputs=outputs)


def _attention_nodes(ir: str) -> list:
    return [line for line in ir.splitlines() if " = attention " in line]


@pytest.mark.parametrize("kw", [
    dict(scale="qk", mask="input", guard=True),                 # BERT, dynamo
    dict(scale="div", mask="input", k_path="torchscript"),      # BERT, TorchScript
    dict(scale="div", mask="rows", guard=True),                 # a [B, 1, S, S] mask added first
    dict(scale="qk", mask=None),
    dict(scale="div", mask="input", rank3=True),                # [B * H, S, D] operands
], ids=["qk-mask-guard", "div-mask-ts", "rows-mask", "no-mask", "rank3"])
def test_attention_becomes_one_node(kw, tmp_path):
    ir = _ir_and_check(_attention("attn-" + "-".join(f"{k}{v}" for k, v in kw.items()), **kw), tmp_path)
    att = _attention_nodes(ir)
    assert len(att) == 1, ir
    ops = _ops(ir)
    assert "softmax" not in ops and "is_nan" not in ops, ir
    # q, k, v read where the projections wrote them, y written where the last MatMul reads it;
    # not with [B * H, S, D] operands, whose first dim has no one stride in [B, S, H * D]
    assert ("transpose" in ops) == kw.get("rank3", False), ir
    assert ops.count("matmul") == 4, ir
    assert len(re.findall(r"%\d+", att[0].split("(", 1)[1].split(")")[0])) == (3 if kw["mask"] is None else 4), att


def test_attention_masked_rows_are_zero_with_the_guard(tmp_path):
    """A row of the mask all -inf: NaN through softmax, 0 after the exporters' guard; the kernel
    does the same (checked against ONNX Runtime on the unfused graph)."""
    c = _attention("attn-empty-row", scale="div", mask="rows", guard=True)
    m, inputs, _ = c.build()
    inputs["mask"][1, 0, 2, :] = -np.inf
    inputs["mask"][0, 0, 5, :3] = -np.inf
    ref = tl.ort_run(m, inputs)
    assert np.all(np.isfinite(ref["y"]))
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    assert len(_attention_nodes(tl.compile(p, tmp_path / "ir", emit="ir").read_text())) == 1
    tl.assert_outputs_close(tl.run(tl.compile(p, tmp_path / "build"), inputs, tmp_path / "run"), ref)


def test_attention_causal_constant_mask_is_generated(tmp_path):
    """GPT-2's mask, constant after folding: the kernel makes it (no mask input)."""
    ir = _ir_and_check(_attention("attn-causal", scale="div", mask="causal"), tmp_path)
    att = _attention_nodes(ir)
    assert len(att) == 1 and "causal mask" in att[0], ir
    assert len(re.findall(r"%\d+", att[0].split("(", 1)[1].split(")")[0])) == 3, att


def test_attention_with_kv_cache(tmp_path):
    """GPT-2's decode: K and V are concatenations of the past and the new token's, which are
    outputs too; the causal mask over 4 + S keys is generated."""
    ir = _ir_and_check(_attention("attn-kv", scale="qk", mask="causal", kv_cache=True), tmp_path)
    att = _attention_nodes(ir)
    assert len(att) == 1 and "causal mask" in att[0], ir
    assert "softmax" not in _ops(ir), ir


@pytest.mark.parametrize("kw", [dict(v_scale=True), dict(softmax_out=True), dict(opset=11, axis=2)],
                         ids=["v-scaled", "softmax-output", "softmax-opset11-axis2"])
def test_attention_near_misses(kw, tmp_path):
    """A product on v stays a node before the attention (its input is the product); a softmax
    that is also a graph output, or one of opset 11 over the flattened [S, S] of each head, is
    not fused at all. All still match ONNX Runtime."""
    ir = _ir_and_check(_attention("attn-near-" + "-".join(kw), scale="div", mask="input", **kw), tmp_path)
    if "softmax_out" in kw or "axis" in kw:
        assert not _attention_nodes(ir) and "softmax" in _ops(ir), ir
    else:
        assert len(_attention_nodes(ir)) == 1 and "mul" in _ops(ir), ir


def _conv_silu(case_id, silu_nodes, outputs=("y",), extra_inits=None):
    """x [1, 8, 10, 12] -> Conv 3x3 (16 channels, bias) -> the given nodes on "h" -> "y"."""
    nodes = [node("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1])] + silu_nodes
    inits = {"w": R(16, 8, 3, 3), "b": R(16), **(extra_inits or {})}
    return Case(case_id, 13, nodes, {"x": [1, 8, 10, 12]}, inits, outputs=list(outputs))


def _check_scaled_inputs(inputs, tmp_path):
    """The model _ir_and_check saved, on its inputs times 60 (past the exp's +-87) with NaN,
    +inf and -inf in x: the same as ONNX Runtime's."""
    p = tmp_path / "m.onnx"
    big = {k: (v * 60).astype(np.float32) for k, v in inputs.items()}
    big["x"][0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    want = tl.ort_run(p, big)
    got = tl.run(tl.compile(p, tmp_path / "build-big"), big, tmp_path / "run-big")
    tl.assert_outputs_close(got, want)


@pytest.mark.parametrize("order", ["x*s", "s*x"])
def test_sigmoid_times_input_becomes_silu_in_the_conv(order, tmp_path):
    """torch's nn.SiLU as exported before ONNX had the op: Mul(h, Sigmoid(h)). One silu, which
    then goes into the conv's epilogue; checked against ONNX Runtime on the two nodes, with
    inputs scaled so the values reach past +-87 (the exp's wide path) and NaN."""
    mul_in = ["h", "s"] if order == "x*s" else ["s", "h"]
    c = _conv_silu(f"fuse-silu-{order}", [node("Sigmoid", ["h"], ["s"]), node("Mul", mul_in, ["y"])])
    m, inputs, ref = c.build()
    ir = _ir_and_check(c, tmp_path)
    assert _ops(ir) == ["conv"], ir
    assert "act=silu" in ir, ir
    _check_scaled_inputs(inputs, tmp_path)


@pytest.mark.parametrize("what", ["sigmoid-also-output", "sigmoid-of-another", "sigmoid-read-twice"])
def test_near_silu_is_left_alone(what, tmp_path):
    """Mul(h, Sigmoid(h)) only: a sigmoid the graph also returns or another node reads, or a
    product with a value other than the sigmoid's input, stays as written."""
    if what == "sigmoid-also-output":
        c = _conv_silu("silu-near-out", [node("Sigmoid", ["h"], ["s"]), node("Mul", ["h", "s"], ["y"])],
                       outputs=("y", "s"))
    elif what == "sigmoid-of-another":
        c = _conv_silu("silu-near-other", [node("Relu", ["h"], ["r"]), node("Sigmoid", ["r"], ["s"]),
                                           node("Mul", ["h", "s"], ["y"])])
    else:
        c = _conv_silu("silu-near-twice", [node("Sigmoid", ["h"], ["s"]), node("Mul", ["h", "s"], ["y0"]),
                                           node("Add", ["y0", "s"], ["y"])])
    ir = _ir_and_check(c, tmp_path)
    assert "silu" not in _ops(ir) and "act=silu" not in ir, ir
    assert "sigmoid" in _ops(ir), ir


@pytest.mark.parametrize("order", ["x*t", "t*x"])
def test_softplus_tanh_times_input_becomes_mish_in_the_conv(order, tmp_path):
    """Mish as exported before ONNX had the op (darknet's YOLOv4, torch's F.mish at opset < 18):
    Mul(h, Tanh(Softplus(h))). One mish, which then goes into the conv's epilogue; checked
    against ONNX Runtime on the three nodes, with inputs scaled past the exp's range and NaN,
    +-inf (Mish(-inf) is NaN in both: -inf * tanh(0))."""
    mul_in = ["h", "t"] if order == "x*t" else ["t", "h"]
    c = _conv_silu(f"fuse-mish-{order}", [node("Softplus", ["h"], ["s"]), node("Tanh", ["s"], ["t"]),
                                          node("Mul", mul_in, ["y"])])
    m, inputs, ref = c.build()
    ir = _ir_and_check(c, tmp_path)
    assert _ops(ir) == ["conv"], ir
    assert "act=mish" in ir, ir
    _check_scaled_inputs(inputs, tmp_path)


@pytest.mark.parametrize("what", ["tanh-also-output", "softplus-read-twice", "tanh-of-another"])
def test_near_mish_is_left_alone(what, tmp_path):
    """Mul(h, Tanh(Softplus(h))) only: a tanh the graph also returns, a softplus another node
    reads, or a product with a value other than the softplus's input stays as written."""
    if what == "tanh-also-output":
        c = _conv_silu("mish-near-out", [node("Softplus", ["h"], ["s"]), node("Tanh", ["s"], ["t"]),
                                         node("Mul", ["h", "t"], ["y"])], outputs=("y", "t"))
    elif what == "softplus-read-twice":
        c = _conv_silu("mish-near-twice", [node("Softplus", ["h"], ["s"]), node("Tanh", ["s"], ["t"]),
                                           node("Mul", ["h", "t"], ["y0"]), node("Add", ["y0", "s"], ["y"])])
    else:
        c = _conv_silu("mish-near-other", [node("Relu", ["h"], ["r"]), node("Softplus", ["r"], ["s"]),
                                           node("Tanh", ["s"], ["t"]), node("Mul", ["h", "t"], ["y"])])
    ir = _ir_and_check(c, tmp_path)
    assert "mish" not in _ops(ir) and "act=mish" not in ir, ir
    assert "tanh" in _ops(ir), ir


@pytest.mark.parametrize("form", ["attr-13", "attr-neg-13", "input-18"])
def test_mean_over_h_and_w_becomes_global_pool(form, tmp_path):
    """ReduceMean over H and W keeping them (timm's squeeze-excitation) on a conv's 4-D output
    becomes a global average pool, with its axes as an attribute (opset 13, also as -1, -2) or
    as a constant input (opset 18); checked against ONNX Runtime."""
    opset = 18 if form == "input-18" else 13
    axes = [-1, -2] if form == "attr-neg-13" else [2, 3]
    rm = (node("ReduceMean", ["h", "axes"], ["y"], keepdims=1) if opset == 18
          else node("ReduceMean", ["h"], ["y"], axes=axes, keepdims=1))
    c = _conv_silu(f"mean-pool-{form}", [rm], extra_inits={"axes": np.array(axes, np.int64)} if opset == 18 else None)
    c.opset = opset
    ir = _ir_and_check(c, tmp_path)
    assert _ops(ir) == ["conv", "global_avg_pool"], ir


@pytest.mark.parametrize("what", ["keepdims-0", "axes-1-2", "axes-3", "3-d"])
def test_other_means_stay_reductions(what, tmp_path):
    """A ReduceMean that is not a global pool's [N, C, H, W] -> [N, C, 1, 1] stays one: without
    keepdims, over C and H, over W alone, or of a 3-D tensor over its last two axes."""
    if what == "3-d":
        nodes = [node("Reshape", ["h", "shape"], ["h3"]), node("ReduceMean", ["h3"], ["y"], axes=[1, 2], keepdims=1)]
        c = _conv_silu("mean-3d", nodes, extra_inits={"shape": np.array([16, 10, 12], np.int64)})
    else:
        attrs = {"keepdims-0": dict(axes=[2, 3], keepdims=0), "axes-1-2": dict(axes=[1, 2], keepdims=1),
                 "axes-3": dict(axes=[3], keepdims=1)}[what]
        c = _conv_silu(f"mean-{what}", [node("ReduceMean", ["h"], ["y"], **attrs)])
    ir = _ir_and_check(c, tmp_path)
    assert "reduce_mean" in _ops(ir) and "global_avg_pool" not in _ops(ir), ir
