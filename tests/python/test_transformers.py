"""Transformers compiled once for every batch and length: BERT-base, DistilBERT (sequence
classification), GPT-2's prompt pass and its decode step with a KV cache, each exported by both
torch exporters (tools/models/build_transformers.py), compiled by cuvil-compile with every
batch and length dim symbolic (`--dim batch=1:8 --dim seq=1:512`, ...), run by cuvil-run at
shapes across those ranges, and compared with ONNX Runtime on the same ONNX file.

The exports are cached with the CNN models' (${CUVIL_TEST_CACHE:-~/.cache/cuvil/test-models});
the first run exports them (about 2 minutes on 2 cores). All are marked slow; the TorchScript
exports also `plain` (not in the sanitizer pass).
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import cuvil_testlib as tl

sys.path.insert(0, str(tl.REPO / "tools" / "models"))
from build_transformers import EXPORTS, MODELS, example_feed, get_model  # noqa: E402

# (batch, seq, past) the issue lists; the prompt pass at 1024 writes 200 MB of logits
SHAPES = {
    "bert": [(1, 1, 0), (1, 128, 0), (3, 77, 0), (8, 512, 0)],
    "distilbert": [(1, 1, 0), (1, 128, 0), (3, 77, 0), (8, 512, 0)],
    "gpt2": [(1, 1, 0), (1, 64, 0), (1, 1024, 0), (2, 33, 0)],
    "gpt2_decode": [(1, 1, 0), (1, 1, 1), (1, 1, 100), (1, 1, 1023), (3, 1, 57)],
}


def _dims(model: str) -> dict:
    return {k: f"{lo}:{hi}" for k, (lo, hi) in MODELS[model].dims.items()}


LAYERS = {"bert": 12, "distilbert": 6, "gpt2": 12, "gpt2_decode": 12}


def _param(e):
    # the TorchScript exports run in make test's plain pass only (conftest.py: CI's time)
    return pytest.param(e, id=e.id, marks=[pytest.mark.plain] if e.exporter == "torchscript" else [])


@pytest.mark.slow
@pytest.mark.parametrize("spec", [_param(e) for e in EXPORTS])
def test_transformer_every_shape(spec, tmp_path):
    """One compile with symbolic batch and length; ONNX Runtime's outputs at every shape. And
    every layer's attention is one node (pass_fuse_attention.c), its softmax gone."""
    onnx_path = get_model(spec.model, spec.exporter, spec.opset)
    small = {k: {"batch": 2, "seq": 5, "past": 3}[k] for k in MODELS[spec.model].dims}
    ir = tl.compile(onnx_path, tmp_path / "ir", emit="ir", dims=small).read_text()
    n_att = sum(" = attention " in line for line in ir.splitlines())
    assert n_att == LAYERS[spec.model] and " = softmax " not in ir, f"{n_att} attention nodes"
    so = tl.compile(onnx_path, tmp_path / "build", stem=spec.model, dims=_dims(spec.model))
    for i, (b, s, p) in enumerate(SHAPES[spec.model]):
        feed = example_feed(spec.model, batch=b, seq=s, past=p, seed=i)
        got = tl.run(so, feed, tmp_path / f"run{i}", threads=2)
        ref = tl.ort_run(onnx_path, feed)
        try:
            tl.assert_outputs_close(got, ref)
        except AssertionError as e:
            raise AssertionError(f"at (batch, seq, past) = {(b, s, p)}:\n{e}") from None


@pytest.mark.slow
def test_transformer_refuses_shapes_out_of_range(tmp_path):
    """A length past the compiled range is refused by name, not run out of bounds."""
    onnx_path = get_model("distilbert", "dynamo", 18)
    so = tl.compile(onnx_path, tmp_path / "build", stem="distilbert", dims={"batch": "1:2", "seq": "1:16"})
    feed = example_feed("distilbert", batch=1, seq=17)
    proc, _ = tl.run_raw(so, feed, tmp_path / "run")
    assert proc.returncode != 0
    assert "seq" in proc.stderr or "17" in proc.stderr, proc.stderr
    # and inside the range it runs
    feed = example_feed("distilbert", batch=2, seq=16)
    tl.assert_outputs_close(tl.run(so, feed, tmp_path / "ok"), tl.ort_run(onnx_path, feed))


def test_example_feed_shapes():
    f = example_feed("gpt2_decode", batch=2, past=0)
    assert f["input_ids"].shape == (2, 1)
    assert f["past_key_values.0.key"].shape == (2, 12, 0, 64)
    f = example_feed("bert", batch=2, seq=6)
    assert f["attention_mask"][1].tolist() == [1, 1, 1, 0, 0, 0]
    assert np.array_equal(f["token_type_ids"][0], [0, 0, 1, 1, 1, 1])


# --------------------------------------------------------------------------------------------
# Greedy generation from C (examples/c/generate.c) against transformers' generate()
# --------------------------------------------------------------------------------------------

GEN_SEED, GEN_PROMPT, GEN_NEW, GEN_MIN_GAP = 1, 8, 32, 5e-3


@pytest.mark.slow
def test_generate_c_matches_transformers(tmp_path):
    """examples/c/generate.c runs GPT-2's prompt pass and 31 decode steps, keeping the KV cache
    itself, and must pick the same 32 token ids as transformers' greedy generate() on the same
    weights. The seed is one where no step has a near-tie (the two largest logits at least
    GEN_MIN_GAP apart, asserted), so that the comparison cannot turn on rounding."""
    import subprocess

    import torch

    from build_transformers import hf_model

    ids = np.random.default_rng(GEN_SEED).integers(0, MODELS["gpt2"].vocab, (1, GEN_PROMPT), dtype=np.int64)
    hf = hf_model("gpt2")
    with torch.no_grad():
        t = torch.from_numpy(ids)
        ref = hf.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=GEN_NEW, do_sample=False,
                          output_scores=True, return_dict_in_generate=True, pad_token_id=hf.config.eos_token_id)
    want = ref.sequences[0, GEN_PROMPT:].tolist()
    gaps = [float(v[0] - v[1]) for v in (torch.topk(s[0], 2).values for s in ref.scores)]
    assert len(want) == GEN_NEW and min(gaps) >= GEN_MIN_GAP, (min(gaps), "pick another GEN_SEED")
    assert len(set(want)) > GEN_NEW // 2, want   # not one token repeated

    total = GEN_PROMPT + GEN_NEW
    so_p = tl.compile(get_model("gpt2", "dynamo", 18), tmp_path / "m", stem="gpt2",
                      dims={"batch": 1, "seq": f"1:{total}"})
    so_d = tl.compile(get_model("gpt2_decode", "dynamo", 18), tmp_path / "m", stem="gpt2_decode",
                      dims={"batch": 1, "past": f"0:{total}"})
    subprocess.run(["make", "-s", "-C", str(tl.REPO / "examples" / "c"), "generate", f"O={tmp_path}"], check=True)
    for threads in (1, 2):
        r = subprocess.run([str(tmp_path / "generate"), str(so_p), str(so_d), str(GEN_NEW),
                            *map(str, ids[0].tolist()), "-t", str(threads)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        got = [int(v) for v in r.stdout.split("tokens:")[1].splitlines()[0].split()]
        assert got == want, f"{threads} thread(s): generate.c {got}\ntransformers {want}"
        gap = float(r.stdout.split("min_gap:")[1].split()[0])
        assert abs(gap - min(gaps)) < 1e-3, (gap, min(gaps))
