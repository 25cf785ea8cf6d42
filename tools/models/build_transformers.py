#!/usr/bin/env python3
"""Builds the transformer models that Cuvil's tests and benchmark compile, with a cache.

Models (Hugging Face `transformers` classes, standard configs, seeded random weights; nothing
is ever downloaded):
  bert          BertModel, bert-base config (12 layers, hidden 768, 12 heads, vocab 30522);
                inputs input_ids, attention_mask, token_type_ids [batch, seq] (int64);
                outputs last_hidden_state [batch, seq, 768], pooler_output [batch, 768]
  distilbert    DistilBertForSequenceClassification, distilbert-base config, 2 labels, as a
                text-classification pipeline runs it; inputs input_ids, attention_mask;
                output logits [batch, 2]
  gpt2          GPT2LMHeadModel, gpt2 config (12 layers), the prompt pass: input input_ids
                [batch, seq]; outputs logits [batch, seq, 50257] and the KV cache,
                present.<i>.key / present.<i>.value [batch, 12, seq, 64]
  gpt2_decode   the same weights, one decode step: inputs input_ids [batch, 1] and
                past_key_values.<i>.key / .value [batch, 12, past, 64]; outputs logits
                [batch, 1, 50257] and present.<i>.key / .value [batch, 12, past + 1, 64]

The weights: the classes' own seeded initialisation (torch.manual_seed(0)), after which every
bias and LayerNorm parameter, which that initialisation sets to 0 or 1, is drawn from a seeded
generator too, so that a compiler that drops or swaps one is caught. GPT-2's matrices but the
embeddings are then scaled by 5 (N(0, 0.1)): with the initialiser's 0.02 the blocks add so little
to the token's embedding that greedy decoding repeats the last token forever, and a generation
test would compare one token 32 times.

Exports (EXPORTS): the TorchScript exporter (dynamo=False, opset 14..17) and the dynamo
exporter (dynamo=True, opset 18, weights in a side file), each with every batch and length dim
named (batch, seq, past), so one ONNX file serves every shape.

Importable:
    from build_transformers import get_model, example_feed, EXPORTS, MODELS
    path = get_model("bert", "dynamo", 18)       # exports once, then served from the cache
    feed = example_feed("bert", batch=3, seq=77)

The cache is build_models.py's (${CUVIL_TEST_CACHE:-~/.cache/cuvil/test-models}); a file's key
holds the export settings, the torch/transformers/onnxscript versions and a hash of this
script.

CLI:
    build_transformers.py [--only MODEL] [--exporter dynamo|torchscript] [--out DIR]
        exports (or finds in the cache) the models, checks each in ONNX Runtime against
        transformers at two shapes, and prints export times and op counts
    build_transformers.py --only MODEL --feeds DIR [--shape BATCH,SEQ,PAST]
        also writes example_feed's inputs to DIR/<input>.npy (cuvil-run --input NAME=FILE)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from build_models import _EXPORT_TIMES, _sidecars, cache_dir, cached_export, ort_run, run_export  # noqa: E402


@dataclass(frozen=True)
class TModel:
    name: str
    inputs: tuple        # names; token ids first
    outputs: tuple
    dims: dict           # the symbolic dims and their ranges, as `cuvil-compile --dim` takes them
    vocab: int


N_LAYER, N_HEAD, HEAD_DIM = 12, 12, 64
_KV = tuple(f"{i}.{kv}" for i in range(N_LAYER) for kv in ("key", "value"))

MODELS = {
    "bert": TModel("bert", ("input_ids", "attention_mask", "token_type_ids"),
                   ("last_hidden_state", "pooler_output"), {"batch": (1, 8), "seq": (1, 512)}, 30522),
    "distilbert": TModel("distilbert", ("input_ids", "attention_mask"), ("logits",),
                         {"batch": (1, 8), "seq": (1, 512)}, 30522),
    "gpt2": TModel("gpt2", ("input_ids",), ("logits",) + tuple(f"present.{k}" for k in _KV),
                   {"batch": (1, 8), "seq": (1, 1024)}, 50257),
    "gpt2_decode": TModel("gpt2_decode", ("input_ids",) + tuple(f"past_key_values.{k}" for k in _KV),
                          ("logits",) + tuple(f"present.{k}" for k in _KV),
                          {"batch": (1, 8), "past": (0, 1023)}, 50257),
}


@dataclass(frozen=True)
class TExport:
    model: str
    exporter: str   # "torchscript" (dynamo=False) or "dynamo" (dynamo=True)
    opset: int

    @property
    def id(self) -> str:
        return f"{self.model}-{self.exporter}{self.opset}"


EXPORTS = [
    TExport("bert", "torchscript", 14),
    TExport("bert", "dynamo", 18),
    TExport("distilbert", "torchscript", 17),
    TExport("distilbert", "dynamo", 18),
    TExport("gpt2", "torchscript", 14),
    TExport("gpt2", "dynamo", 18),
    TExport("gpt2_decode", "torchscript", 16),
    TExport("gpt2_decode", "dynamo", 18),
]


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def example_feed(model: str, batch: int = 1, seq: int = 8, past: int = 0, seed: int = 0) -> dict:
    """Seeded inputs for `model`: token ids; for BERT and DistilBERT an attention mask whose
    second row (if any) pads its second half, and for BERT token types 1 from a third of the
    way; for gpt2_decode one new token and N(0,1) past keys and values of length `past`."""
    spec = MODELS[model]
    rng = np.random.default_rng(seed)
    n = 1 if model == "gpt2_decode" else seq
    feed = {"input_ids": rng.integers(0, spec.vocab, (batch, n), dtype=np.int64)}
    if "attention_mask" in spec.inputs:
        mask = np.ones((batch, seq), np.int64)
        if batch > 1 and seq > 1:
            mask[1, seq - seq // 2:] = 0
        feed["attention_mask"] = mask
    if "token_type_ids" in spec.inputs:
        tt = np.zeros((batch, seq), np.int64)
        tt[:, seq // 3:] = 1
        feed["token_type_ids"] = tt
    for name in spec.inputs:
        if name.startswith("past_key_values."):
            feed[name] = rng.standard_normal((batch, N_HEAD, past, HEAD_DIM), dtype=np.float32)
    return feed


# --------------------------------------------------------------------------------------------
# The torch models
# --------------------------------------------------------------------------------------------


def _randomize(model, seed: int = 1234) -> None:
    """Seeded biases and LayerNorm parameters (the classes initialise them to 0 and 1)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) * 0.4 + 0.8)   # U(0.8, 1.2)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.05)
            elif getattr(mod, "bias", None) is not None and isinstance(mod.bias, torch.Tensor):
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.02)


def hf_model(name: str):
    """The eval-mode transformers model behind `name` (gpt2 and gpt2_decode share one)."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if name == "bert":
        m = tf.BertModel(tf.BertConfig())
    elif name == "distilbert":
        m = tf.DistilBertForSequenceClassification(tf.DistilBertConfig(num_labels=2))
    elif name in ("gpt2", "gpt2_decode"):
        m = tf.GPT2LMHeadModel(tf.GPT2Config())
    else:
        raise ValueError(f"unknown model {name!r}")
    _randomize(m)
    if name in ("gpt2", "gpt2_decode"):
        with torch.no_grad():
            for pname, p in m.named_parameters():   # the tied lm_head is wte: left as it is
                if p.dim() == 2 and not pname.startswith(("transformer.wte", "transformer.wpe")):
                    p.mul_(5.0)
    return m.eval()


def _flat_cache(cache) -> list:
    out = []
    for layer in cache.layers:
        out += [layer.keys, layer.values]
    return out


def export_module(name: str):
    """hf_model(name) wrapped to take and return the flat tensors of MODELS[name]."""
    import torch

    hf = hf_model(name)

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = hf

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return o.last_hidden_state, o.pooler_output

    class DistilBert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = hf

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).logits

    class Prompt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = hf

        def forward(self, input_ids):
            o = self.m(input_ids=input_ids, use_cache=True)
            return tuple([o.logits] + _flat_cache(o.past_key_values))

    class Decode(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = hf

        def forward(self, input_ids, *past):
            from transformers import DynamicCache

            cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(N_LAYER)],
                                 config=self.m.config)
            o = self.m(input_ids=input_ids, past_key_values=cache, use_cache=True)
            return tuple([o.logits] + _flat_cache(o.past_key_values))

    return {"bert": Bert, "distilbert": DistilBert, "gpt2": Prompt, "gpt2_decode": Decode}[name]().eval()


def torch_run(name: str, feed: dict) -> dict:
    """The outputs of the torch module that export_module(name) exports, by output name."""
    import torch

    mod = export_module(name)
    with torch.no_grad():
        out = mod(*[torch.from_numpy(feed[k]) for k in MODELS[name].inputs])
    out = out if isinstance(out, tuple) else (out,)
    return {k: v.numpy() for k, v in zip(MODELS[name].outputs, out)}


# --------------------------------------------------------------------------------------------
# Export and cache
# --------------------------------------------------------------------------------------------


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "onnx", "onnxscript"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "none"
    return out


def _sym_axes(name: str) -> dict:
    """Per input and output name: {axis: dim name}."""
    spec = MODELS[name]
    seq = "past" if name == "gpt2_decode" else "seq"
    ax = {}
    for k in spec.inputs + spec.outputs:
        if k.startswith("past_key_values."):
            ax[k] = {0: "batch", 2: "past"}
        elif k.startswith("present."):
            ax[k] = {0: "batch", 2: "total" if name == "gpt2_decode" else "seq"}
        elif k == "pooler_output" or (k == "logits" and name == "distilbert"):
            ax[k] = {0: "batch"}
        elif name == "gpt2_decode":
            ax[k] = {0: "batch"}            # input_ids [batch, 1], logits [batch, 1, vocab]
        else:
            ax[k] = {0: "batch", 1: seq}
    return ax


def export_settings(spec: TExport) -> dict:
    s = {"model": spec.model, "exporter": spec.exporter, "opset": spec.opset,
         "axes": {k: {str(a): d for a, d in v.items()} for k, v in _sym_axes(spec.model).items()}}
    if spec.exporter == "dynamo":
        s.update(dynamo=True, optimize=True, external_data=True)
    else:
        s.update(dynamo=False, do_constant_folding=True)
    return s


def _key_prefix(spec: TExport) -> str:
    return f"{spec.id}-torch{_versions()['torch'].replace('+', '_')}-"


def cache_key(spec: TExport) -> str:
    script = hashlib.sha256(HERE.read_bytes()).hexdigest()[:12]
    blob = json.dumps({"settings": export_settings(spec), "versions": _versions()}, sort_keys=True)
    return f"{_key_prefix(spec)}s{hashlib.sha256(blob.encode()).hexdigest()[:12]}-h{script}"


def export(spec: TExport, path: Path, quiet: bool = True) -> float:
    """Exports `spec` to `path` (plus `path`.data for the dynamo exporter); returns seconds."""
    import torch

    ms = MODELS[spec.model]
    mod = export_module(spec.model)
    # the example the exporters trace: batch 2, length 8 (past 5), so no dim is 1
    feed = example_feed(spec.model, batch=2, seq=8, past=5)
    args = tuple(torch.from_numpy(feed[k]) for k in ms.inputs)
    kw = dict(input_names=list(ms.inputs), output_names=list(ms.outputs), opset_version=spec.opset)
    axes = _sym_axes(spec.model)
    if spec.exporter == "torchscript":
        kw.update(dynamo=False, dynamic_axes=axes)
    else:
        dims = {d: torch.export.Dim(d, max=hi) for d, (lo, hi) in ms.dims.items()}
        shapes = [{a: dims[d] for a, d in axes[k].items()} for k in ms.inputs]
        if spec.model == "gpt2_decode":   # forward(input_ids, *past)
            shapes = (shapes[0], tuple(shapes[1:]))
        kw.update(dynamo=True, dynamic_shapes=tuple(shapes), external_data=True)
    return run_export(mod, args, path, spec.id, quiet, **kw)


def get_model(model: str, exporter: str, opset: int, cache: Path | None = None) -> Path:
    """Path of the cached ONNX file for (model, exporter, opset), exporting it first if
    missing (atomically: into a temporary folder, then renamed)."""
    spec = TExport(model, exporter, opset)
    if spec not in EXPORTS:
        raise ValueError(f"no such export: {spec}")
    return cached_export(cache or cache_dir(), cache_key(spec), _key_prefix(spec),
                         lambda path: export(spec, path), spec.id)


def export_for(model: str, exporter: str) -> TExport:
    """The one export of `model` by `exporter`."""
    return next(e for e in EXPORTS if e.model == model and e.exporter == exporter)


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def verify(spec: TExport, path: Path) -> dict:
    """ONNX Runtime against transformers (through the exported wrapper) at two shapes."""
    res = {}
    shapes = [dict(batch=1, seq=5, past=0 if spec.model != "gpt2_decode" else 3), dict(batch=3, seq=11, past=7)]
    for sh in shapes:
        feed = example_feed(spec.model, **sh, seed=2)
        ref = torch_run(spec.model, feed)
        got = ort_run(path, feed)
        err = max(float(np.max(np.abs(ref[k] - got[k]))) for k in ref)
        scale = max(float(np.max(np.abs(ref[k]))) for k in ref)
        res[f"{sh['batch']}x{sh['seq']}" + (f"+{sh['past']}" if spec.model == "gpt2_decode" else "")] = err
        if not err <= 1e-4 * scale + 1e-4:
            raise AssertionError(f"{spec.id}: ONNX Runtime and transformers disagree at {sh}: max abs err {err:g}")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", choices=sorted(MODELS), help="model (repeatable)")
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"])
    ap.add_argument("--out", type=Path, help="also copy the files here")
    ap.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime check")
    ap.add_argument("--feeds", type=Path, help="write example inputs here as <input>.npy")
    ap.add_argument("--shape", default="1,128,0", help="BATCH,SEQ,PAST of --feeds (default 1,128,0)")
    a = ap.parse_args(argv)
    if a.feeds:
        b, s, p = (int(v) for v in a.shape.split(","))
        a.feeds.mkdir(parents=True, exist_ok=True)
        for m in a.only or []:
            for k, v in example_feed(m, batch=b, seq=s, past=p).items():
                np.save(a.feeds / f"{k}.npy", v)
                print(f"--input {k}={a.feeds / f'{k}.npy'}")
    from build_models import op_summary

    for spec in EXPORTS:
        if (a.only and spec.model not in a.only) or (a.exporter and spec.exporter != a.exporter):
            continue
        path = get_model(spec.model, spec.exporter, spec.opset)
        row = op_summary(path)
        t = f"exported in {_EXPORT_TIMES[spec.id]:.1f} s" if spec.id in _EXPORT_TIMES else "cached"
        print(f"{spec.id:26s} {t:20s} {path}", flush=True)
        print(f"    ops: {' '.join(f'{k}x{v}' for k, v in row['ops'].items())}")
        if not a.no_verify:
            print(f"    ORT vs transformers, max abs err: {verify(spec, path)}", flush=True)
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            for side in row["external_data"]:
                shutil.copy2(path.parent / side, a.out / side)
            shutil.copy2(path, a.out / f"{spec.id}.onnx")
    return 0


if __name__ == "__main__":
    sys.exit(main())
