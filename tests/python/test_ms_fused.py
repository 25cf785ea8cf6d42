"""ONNX Runtime's fused ops (domain com.microsoft), as its transformer optimiser writes them,
against ONNX Runtime: small BERT, DistilBERT and GPT-2 (transformers architectures, seeded
random weights, torch.onnx's TorchScript exporter) put through
onnxruntime.transformers.optimizer, with padded rows; and each op alone in its forms (masks of
1 to 3 dims, causal, qkv_hidden_sizes, transposes, the optional outputs)."""
from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import cuvil
import cuvil_testlib as tl

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
MS = "com.microsoft"


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _ms_model(path, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _export(name: str, path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64,
                                      attn_implementation="eager")
        m = transformers.GPT2LMHeadModel(cfg).eval()

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, ids, mask):
                pos = torch.arange(ids.shape[1]).unsqueeze(0)
                return self.m(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits
        names, outs, mtype = ["input_ids", "attention_mask"], ["logits"], "gpt2"
    elif name == "bert":
        cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                      vocab_size=100, max_position_embeddings=64, attn_implementation="eager")
        m = transformers.BertModel(cfg).eval()

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, ids, mask, types):
                r = self.m(input_ids=ids, attention_mask=mask, token_type_ids=types)
                return r.last_hidden_state, r.pooler_output
        names, outs, mtype = ["input_ids", "attention_mask", "token_type_ids"], ["hidden", "pooled"], "bert"
    else:
        cfg = transformers.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=100,
                                            max_position_embeddings=64, attn_implementation="eager")
        m = transformers.DistilBertModel(cfg).eval()

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, ids, mask):
                return self.m(input_ids=ids, attention_mask=mask).last_hidden_state
        names, outs, mtype = ["input_ids", "attention_mask"], ["hidden"], "bert"
    args = tuple(torch.ones(2, 8, dtype=torch.int64) for _ in names)
    raw = path.with_suffix(".raw.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(W(), args, str(raw), input_names=names, output_names=outs, opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
        from onnxruntime.transformers import optimizer
        opt = optimizer.optimize_model(str(raw), model_type=mtype, num_heads=4, hidden_size=64, opt_level=1)
    opt.save_model_to_file(str(path))
    return names


@pytest.mark.plain   # (transformers exports: the plain pass only, for CI time)
@pytest.mark.parametrize("name,fused", [
    ("bert", {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}),
    ("distilbert", {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}),
    ("gpt2", {"SkipLayerNormalization", "FastGelu"}),
])
def test_optimised_transformers_against_ort(tmp_path, name, fused):
    path = tmp_path / f"{name}.onnx"
    names = _export(name, path)
    ops = Counter(n.op_type for n in onnx.load(path).graph.node if n.domain == MS)
    assert fused <= set(ops), ops   # the optimiser wrote the fused ops this test is about
    model = cuvil.load(tl.compile(path, tmp_path / name, dims={"batch": "1:4", "seq": "1:32"}))
    rng = np.random.default_rng(1)
    B, S = 3, 11
    mask = np.ones((B, S), np.int64)
    mask[1, 7:] = 0   # padded rows
    mask[2, 4:] = 0
    feeds = {"input_ids": rng.integers(0, 100, (B, S)).astype(np.int64), "attention_mask": mask,
             "token_type_ids": rng.integers(0, 2, (B, S)).astype(np.int64)}
    tl.check_vs_ort(model, path, {k: feeds[k] for k in names}, rtol=1e-4, atol=1e-4)


def test_contrib_activations_matmul_norms_softmax(tmp_path):
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Gelu", ["x"], ["g"], domain=MS),
             helper.make_node("FastGelu", ["x", "b"], ["fg"], domain=MS),
             helper.make_node("QuickGelu", ["x"], ["qg"], domain=MS, alpha=1.5),
             helper.make_node("BiasGelu", ["x", "b"], ["bg"], domain=MS),
             helper.make_node("FusedMatMul", ["x", "w"], ["fm"], domain=MS, transB=1, alpha=0.5),
             helper.make_node("FusedMatMul", ["xt", "xt"], ["fm2"], domain=MS, transA=1),
             helper.make_node("SimplifiedLayerNormalization", ["x", "b"], ["sl", "sl_inv"], epsilon=1e-4),   # (ONNX's domain)
             helper.make_node("SkipLayerNormalization", ["x", "s", "gam", "b", "b"], ["skl", "skl_m", "skl_i", "skl_sum"],
                              domain=MS),
             helper.make_node("SkipSimplifiedLayerNormalization", ["x", "s", "gam"], ["ssl"], domain=MS)]
    vis = [_vi("x", F, [2, 3, 8]), _vi("b", F, [8]), _vi("w", F, [5, 8]), _vi("xt", F, [2, 8, 3]), _vi("s", F, [3, 8]),
           _vi("gam", F, [8])]
    outs = [(n, F) for n in ["g", "fg", "qg", "bg", "fm", "fm2", "sl", "sl_inv", "skl", "skl_m", "skl_i", "skl_sum", "ssl"]]
    path = _ms_model(tmp_path / "a.onnx", nodes, vis, outs)
    model = cuvil.load(tl.compile(path, tmp_path / "a"))
    feeds = {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.float32)
             for v in vis}
    tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)


def test_fused_matmul_transposes_intermediate_operands(tmp_path):
    """transA / transB of an operand the graph computes (its rank not declared, as in models ONNX
    Runtime's optimiser saved): the transpose waits for shape inference; a rank-1 operand is
    refused there, naming it."""
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["y", "y"], ["c"], axis=2),
             helper.make_node("FusedMatMul", ["r", "y"], ["a"], domain=MS, transA=1, alpha=2.0),
             helper.make_node("FusedMatMul", ["r", "c"], ["b"], domain=MS, transA=1),
             helper.make_node("FusedMatMul", ["c", "c"], ["d"], domain=MS, transB=1, alpha=0.5)]
    vis = [_vi("x", F, [2, 4, 5]), _vi("y", F, [2, 4, 3])]
    path = _ms_model(tmp_path / "f.onnx", nodes, vis, [("a", F), ("b", F), ("d", F)])
    model = cuvil.load(tl.compile(path, tmp_path / "f"))
    feeds = {"x": rng.standard_normal((2, 4, 5)).astype(np.float32), "y": rng.standard_normal((2, 4, 3)).astype(np.float32)}
    tl.check_vs_ort(model, path, feeds, rtol=1e-5, atol=1e-6)
    bad = _ms_model(tmp_path / "bad.onnx", [helper.make_node("ReduceMean", ["x"], ["v"], keepdims=0, axes=[0, 1]),
                                            helper.make_node("FusedMatMul", ["v", "v"], ["z"], domain=MS, transA=1)],
                    [_vi("x", F, [2, 4, 5])], [("z", F)])
    with pytest.raises(tl.CuvilError, match="has rank 1; swapping its last two dims needs 2 or more"):
        tl.compile(bad, tmp_path / "bad")


def test_bias_softmax_against_numpy(tmp_path):   # (ONNX Runtime has it for CUDA only)
    rng = np.random.default_rng(4)
    node = helper.make_node("BiasSoftmax", ["x", "sb"], ["bs"], domain=MS, axis=1, is_inner_broadcast=1)
    path = _ms_model(tmp_path / "s.onnx", [node], [_vi("x", F, [2, 3, 8]), _vi("sb", F, [2, 1, 8])], [("bs", F)])
    x, sb = rng.standard_normal((2, 3, 8)).astype(np.float32), rng.standard_normal((2, 1, 8)).astype(np.float32)
    got = cuvil.load(tl.compile(path, tmp_path / "s"))(x=x, sb=sb)
    z = (x + sb).reshape(2, -1)   # over every dim from axis 1 on, as ONNX Runtime's (opset-11) softmax
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 8), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask_rank,causal", [(0, 1), (1, 0), (2, 0), (3, 0)])
def test_contrib_attention_masks(tmp_path, mask_rank, causal):
    rng = np.random.default_rng(3 + mask_rank)
    B, S, H, heads = 2, 5, 12, 3
    ins = ["x", "w", "b"] + (["m"] if mask_rank else [])
    node = helper.make_node("Attention", ins, ["y"], domain=MS, num_heads=heads, unidirectional=causal,
                            qkv_hidden_sizes=[H, H, 6] if mask_rank == 2 else None)
    vdim = 6 if mask_rank == 2 else H
    vis = [_vi("x", F, [B, S, H]), _vi("w", F, [H, 2 * H + vdim]), _vi("b", F, [2 * H + vdim])]
    m = None
    if mask_rank == 1:
        m = np.array([5, 3], np.int32)
    elif mask_rank == 2:
        m = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    elif mask_rank == 3:
        m = (rng.random((B, S, S)) > 0.3).astype(np.int32)
        m[:, :, 0] = 1
    if m is not None:
        vis.append(_vi("m", I32, list(m.shape)))
    path = _ms_model(tmp_path / "t.onnx", [node], vis, [("y", F)])
    model = cuvil.load(tl.compile(path, tmp_path / "t"))
    feeds = {"x": rng.standard_normal((B, S, H)).astype(np.float32),
             "w": rng.standard_normal((H, 2 * H + vdim)).astype(np.float32) * 0.3,
             "b": rng.standard_normal(2 * H + vdim).astype(np.float32)}
    if m is not None:
        feeds["m"] = m
    tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)


def test_contrib_mha_and_rotary(tmp_path):
    rng = np.random.default_rng(5)
    B, S, T, H, heads = 2, 4, 6, 8, 2
    nodes = [helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias", "kpm"], ["y"], domain=MS, num_heads=heads),
             helper.make_node("RotaryEmbedding", ["q", "pos", "cos", "sin"], ["r"], domain=MS, num_heads=heads)]
    vis = [_vi("q", F, [B, S, H]), _vi("k", F, [B, T, H]), _vi("v", F, [B, T, H]), _vi("bias", F, [3 * H]),
           _vi("kpm", I32, [B, T]), _vi("pos", I64, [B, S]), _vi("cos", F, [16, 2]), _vi("sin", F, [16, 2])]
    path = _ms_model(tmp_path / "h.onnx", nodes, vis, [("y", F), ("r", F)])
    model = cuvil.load(tl.compile(path, tmp_path / "h"))
    ang = rng.uniform(0, 6, (16, 2))
    feeds = {"q": rng.standard_normal((B, S, H)).astype(np.float32), "k": rng.standard_normal((B, T, H)).astype(np.float32),
             "v": rng.standard_normal((B, T, H)).astype(np.float32), "bias": rng.standard_normal(3 * H).astype(np.float32),
             "kpm": np.array([[1] * 6, [1, 1, 1, 0, 0, 0]], np.int32), "pos": rng.integers(0, 16, (B, S)).astype(np.int64),
             "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}
    tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("past", [0, 5])
def test_contrib_group_query_attention(tmp_path, past):
    rng = np.random.default_rng(6 + past)
    B, S, hq, hk, D = 2, 5 if not past else 1, 4, 2, 8
    ins = ["q", "k", "v", "pk" if past else "", "pv" if past else "", "sl", "tot"]
    node = helper.make_node("GroupQueryAttention", ins, ["y", "present_k", "present_v"], domain=MS, num_heads=hq,
                            kv_num_heads=hk)
    vis = [_vi("q", F, [B, S, hq * D]), _vi("k", F, [B, S, hk * D]), _vi("v", F, [B, S, hk * D]), _vi("sl", I32, [B]),
           _vi("tot", I32, [])]
    if past:
        vis += [_vi("pk", F, [B, hk, past, D]), _vi("pv", F, [B, hk, past, D])]
    path = _ms_model(tmp_path / "g.onnx", [node], vis, [("y", F), ("present_k", F), ("present_v", F)])
    model = cuvil.load(tl.compile(path, tmp_path / "g"))
    feeds = {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.float32)
             for v in vis if v.type.tensor_type.elem_type == F}
    feeds["sl"] = np.full(B, past + S - 1, np.int32)
    feeds["tot"] = np.array(past + S, np.int32)
    tl.check_vs_ort(model, path, feeds, rtol=1e-4, atol=1e-5)
    with pytest.raises(cuvil.CuvilError, match="GroupQueryAttention.*padded rows"):   # a padded row: refused
        model(**{**feeds, "sl": np.array([past + S - 1, past + S - 2], np.int32)})


def test_contrib_refusals(tmp_path):
    node = helper.make_node("Attention", ["x", "w", "", "", "past"], ["y", "present"], domain=MS, num_heads=2)
    vis = [_vi("x", F, [1, 3, 4]), _vi("w", F, [4, 12]), _vi("past", F, [2, 1, 2, 2, 2])]
    path = _ms_model(tmp_path / "p.onnx", [node], vis, [("y", F), ("present", F)])
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "p.so"), mentions=["Attention", "cache"])
    node = helper.make_node("GroupQueryAttention", ["x", "", "", "", "", "sl", "tot"], ["y"], domain=MS, num_heads=2,
                            kv_num_heads=1)
    path = _ms_model(tmp_path / "q.onnx", [node], [_vi("x", F, [1, 3, 12]), _vi("sl", I32, [1]), _vi("tot", I32, [])],
                     [("y", F)])
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "q.so"), mentions=["GroupQueryAttention", "packed"])


def test_contrib_malformed_nodes_refused(tmp_path):
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], [""], domain=MS, num_heads=2)
    path = _ms_model(tmp_path / "o.onnx", [node], [_vi(n, F, [1, 3, 4]) for n in "qkv"], [("q", F)])
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "o.so"), mentions=["MultiHeadAttention", "output 0"])
    node = helper.make_node("Attention", ["x", "w"], ["y"], domain=MS, num_heads=2, qkv_hidden_sizes=[4.0, 4.0, 4.0])
    path = _ms_model(tmp_path / "f.onnx", [node], [_vi("x", F, [1, 3, 4]), _vi("w", F, [4, 12])], [("y", F)])
    tl.assert_clean_failure(tl.compile_raw(path, tmp_path / "f.so"), mentions=["Attention", "qkv_hidden_sizes"])
