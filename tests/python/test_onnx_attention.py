"""ONNX's Attention op (opsets 23-24) on the attention kernel (issue 32): 3-D and 4-D inputs,
grouped-query heads, a KV cache (past in, present out), boolean and float masks, causal,
softcap and the scores output (modes 0 and 3: where mode 2 hides a key, ONNX Runtime writes the
lowest float and ONNX's reference -inf, as Cuvil does; with softcap, ONNX Runtime's mode 0 is
the scores before the cap, the reference's after it, as Cuvil's), against ONNX Runtime at random data; with a symbolic sequence
length, at several lengths from one build."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F = TensorProto.FLOAT


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_attention_3d_gqa_cache_vs_ort(tmp_path, causal, mask):
    B, S, P, qh, kvh, H = 2, 3, 4, 4, 2, 8
    ins = ["q", "k", "v", "m" if mask else "", "pk", "pv"]
    node = helper.make_node("Attention", ins, ["y", "pres_k", "pres_v", "qk"], is_causal=causal, q_num_heads=qh,
                            kv_num_heads=kvh, softcap=5.0 if causal else 0.0,
                            qk_matmul_output_mode=3 if causal else 0)
    vis = [_vi("q", F, [B, S, qh * H]), _vi("k", F, [B, S, kvh * H]), _vi("v", F, [B, S, kvh * H]),
           _vi("pk", F, [B, kvh, P, H]), _vi("pv", F, [B, kvh, P, H])]
    if mask:
        vis.append(_vi("m", TensorProto.BOOL if mask == "bool" else F, [S, P + S]))
    path = tl.onnx_graph_model(tmp_path / "att.onnx", [node], vis, [(o, F) for o in ("y", "pres_k", "pres_v", "qk")],
                               opset=23)
    model = cuvil.load(tl.compile(path, tmp_path / "b"))
    rng = np.random.default_rng(2)
    for _ in range(2):
        feeds = {"q": rng.standard_normal((B, S, qh * H)), "k": rng.standard_normal((B, S, kvh * H)),
                 "v": rng.standard_normal((B, S, kvh * H)), "pk": rng.standard_normal((B, kvh, P, H)),
                 "pv": rng.standard_normal((B, kvh, P, H))}
        feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
        if mask == "bool":
            feeds["m"] = rng.random((S, P + S)) > 0.3
        elif mask == "float":
            feeds["m"] = rng.standard_normal((S, P + S)).astype(np.float32)
        tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)


def test_attention_4d_symbolic_length_vs_ort(tmp_path):
    """4-D inputs whose sequence length is a symbol: one build, lengths 1..9, causal."""
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)
    vis = [_vi(n, F, [1, 2, "seq", 16]) for n in ("q", "k", "v")]
    path = tl.onnx_graph_model(tmp_path / "att4.onnx", [node], vis, [("y", F)], opset=23)
    model = cuvil.load(tl.compile(path, tmp_path / "b", dims={"seq": "1:9"}))
    rng = np.random.default_rng(4)
    for s in (1, 2, 5, 9):
        feeds = {n: rng.standard_normal((1, 2, s, 16)).astype(np.float32) for n in ("q", "k", "v")}
        tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)
