#!/usr/bin/env python3
"""Builds the ONNX models that Cuvil's model tests compile, with a cache.

Models (all with seeded random weights; no weights are ever downloaded):
  resnet18, resnet50, mobilenet_v2   torchvision, weights=None, torch.manual_seed(0), eval mode,
                                     BatchNorm statistics and affine parameters randomised with a
                                     seeded generator so that BN folding is really exercised
  custom_cnn                         a small CNN that exercises the ops exporters emit for CNNs

Exports (EXPORTS below): TorchScript exporter (dynamo=False) at opset 13 for every model and at
opset 11 for resnet18 and custom_cnn; the dynamo exporter (dynamo=True) at opset 18 for every
model, with the defaults a user gets (optimize=True, external_data=True: the weights land in a
side file `<name>.onnx.data`). resnet18's batch dim is symbolic ('batch') in every export.
Both exporters fold eval-mode BatchNorm into the conv before it, so one more export,
resnet18-torchscript13-keepbn (training=PRESERVE), keeps the BatchNormalization nodes.

Importable:
    from build_models import get_model, example_input, EXPORTS
    path = get_model("resnet18", "torchscript", 13)    # exports once, then served from the cache

The cache lives in ${CUVIL_TEST_CACHE:-~/.cache/cuvil/test-models}; a file's key holds the model,
the exporter settings, the torch/torchvision/onnxscript versions and a hash of this script, so an
edit here or a new torch re-exports and a rerun with nothing changed exports nothing.

CLI:
    build_models.py                     export (or find in the cache) every model, check each in
                                        ONNX Runtime against torch, print export times and op sets
    build_models.py --only resnet18     just that model (repeatable); --exporter dynamo|torchscript
    build_models.py --out DIR           also copy the files to DIR/<model>-<exporter><opset>.onnx
    build_models.py --no-cache          export into a temporary folder, bypassing the cache
    build_models.py --json              one JSON document instead of the table
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()

# --------------------------------------------------------------------------------------------
# The matrix of models and exports
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    name: str
    input_shape: tuple          # with batch 1
    output_names: tuple
    dynamic_batch: bool = False  # batch dim symbolic 'batch' in the ONNX file
    slow: bool = False           # big: the tests mark it slow


MODELS = {
    "resnet18": ModelSpec("resnet18", (1, 3, 224, 224), ("output",), dynamic_batch=True),
    "resnet50": ModelSpec("resnet50", (1, 3, 224, 224), ("output",), slow=True),
    "mobilenet_v2": ModelSpec("mobilenet_v2", (1, 3, 224, 224), ("output",)),
    "custom_cnn": ModelSpec("custom_cnn", (1, 3, 32, 32), ("probs", "features")),
}

INPUT_NAME = "input"


@dataclass(frozen=True)
class ExportSpec:
    model: str
    exporter: str   # "torchscript" (dynamo=False) or "dynamo" (dynamo=True)
    opset: int
    variant: str = ""   # "keepbn": TorchScript with training=PRESERVE, which keeps BatchNorm

    @property
    def id(self) -> str:
        suffix = f"-{self.variant}" if self.variant else ""
        return f"{self.model}-{self.exporter}{self.opset}{suffix}"


EXPORTS = [
    ExportSpec("resnet18", "torchscript", 13),
    ExportSpec("resnet18", "torchscript", 11),
    ExportSpec("resnet18", "dynamo", 18),
    # Both exporters fold eval-mode BatchNorm into the conv before it, so none of the above has a
    # BatchNormalization node (but custom_cnn-torchscript*, after its ConvTranspose). This one
    # keeps all 20, so that Cuvil's own BN folding meets a real network.
    ExportSpec("resnet18", "torchscript", 13, "keepbn"),
    ExportSpec("resnet50", "torchscript", 13),
    ExportSpec("resnet50", "dynamo", 18),
    ExportSpec("mobilenet_v2", "torchscript", 13),
    # the oldest opsets Cuvil claims: Clip with attributes (opset 7..10), Flatten/Gemm of old
    ExportSpec("mobilenet_v2", "torchscript", 9),
    ExportSpec("resnet18", "torchscript", 7),
    ExportSpec("mobilenet_v2", "dynamo", 18),
    ExportSpec("custom_cnn", "torchscript", 13),
    ExportSpec("custom_cnn", "torchscript", 11),
    ExportSpec("custom_cnn", "dynamo", 18),
]


def example_input(model: str, batch: int = 1, seed: int = 0) -> np.ndarray:
    """The seeded N(0,1) float32 input the tests feed `model` (batch `batch`)."""
    shape = (batch,) + tuple(MODELS[model].input_shape[1:])
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


# --------------------------------------------------------------------------------------------
# The torch models
# --------------------------------------------------------------------------------------------


def _randomize_batchnorm(model, seed: int = 1234) -> None:
    """Gives every BatchNorm non-trivial statistics and affine parameters (seeded), so that a
    compiler that folds BN into the preceding conv gets checked on real numbers. The ranges
    keep activations O(1) through ResNet-50's depth."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=g) * 0.6 + 0.5)       # U(0.5, 1.1)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)  # U(0.5, 2.0)


def _custom_cnn():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class CustomCNN(nn.Module):
        """3x32x32 -> (probs [B,10], features [B,48]). Every line is there for an op."""

        def __init__(self, num_classes: int = 10):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn0 = nn.BatchNorm2d(16)
            self.gconv = nn.Conv2d(16, 32, 3, groups=4, dilation=2)       # grouped + dilated
            self.bn1 = nn.BatchNorm2d(32)
            self.prelu = nn.PReLU(32)                                      # per-channel slope
            self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)           # depthwise
            self.pw = nn.Conv2d(32, 32, 1)
            self.bn2 = nn.BatchNorm2d(32)
            # ceil_mode matters along H (30 rows) for these two; the AvgPool's last ceil window
            # holds one real row, one padding row and one row past the padding
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True)
            self.avg_excl = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False,
                                         ceil_mode=True)
            self.avg_incl = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True)
            self.up = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)
            self.bn3 = nn.BatchNorm2d(16)
            self.prelu1 = nn.PReLU()                                       # scalar slope
            self.scale = nn.Parameter(torch.randn(1, 8, 1, 1))
            self.q = nn.Linear(16, 16)
            self.k = nn.Linear(16, 16)
            self.v = nn.Linear(16, 16)
            self.fc1 = nn.Linear(48, 64)
            self.drop = nn.Dropout(0.5)
            self.fc2 = nn.Linear(64, num_classes)

        def forward(self, x):
            x = F.relu(self.bn0(self.stem(x)))                  # B,16,32,32
            y = F.pad(x, (1, 2, 1, 1))                          # asymmetric: B,16,34,35
            y = self.prelu(self.bn1(self.gconv(y)))             # B,32,30,31
            y = F.relu6(self.dw(y))                             # Clip(0,6)
            y = F.leaky_relu(self.bn2(self.pw(y)), 0.1)
            a = self.maxpool(y)                                 # B,32,15,15
            b = self.avg_excl(y)[:, :, 1:, 1:]                  # B,32,16,16 -> 15,15
            c = self.avg_incl(y)[:, :, :, :15]                  # B,32,15,16 -> 15,15
            m = y.mean(dim=(2, 3), keepdim=True)                # ReduceMean B,32,1,1
            z = a * torch.sigmoid(c) + b - m                    # broadcasting
            z = z / (1.0 + F.hardsigmoid(m))
            z = F.hardswish(z)
            u = self.prelu1(self.bn3(self.up(z)))               # B,16,30,30
            u = u[:, :, ::2, 1::2]                              # stepped slice: B,16,15,15
            u1, u2 = torch.chunk(u, 2, dim=1)                   # Split
            v = torch.cat([torch.tanh(u1), (u2 ** 2) * self.scale], dim=1)
            v = F.hardtanh(v, -1.0, 1.0)                        # Clip(-1,1)
            s = F.adaptive_avg_pool2d(v, 1)                     # B,16,1,1
            s = s.squeeze(3).squeeze(2)                         # B,16
            v = v * torch.sigmoid(s.unsqueeze(-1).unsqueeze(-1))
            n2 = F.interpolate(v, scale_factor=2.0, mode="nearest")                      # 30x30
            b2 = F.interpolate(v, size=(30, 30), mode="bilinear", align_corners=False)
            b3 = F.interpolate(v, size=(30, 30), mode="bilinear", align_corners=True)
            w = n2 + b2 - 0.5 * b3                              # B,16,30,30
            gm = F.adaptive_max_pool2d(w, 1).flatten(1)         # global max pool: B,16
            t = F.avg_pool2d(w, 4)                              # B,16,7,7
            seq = t.flatten(2).permute(0, 2, 1)                 # B,49,16
            q, k, vv = self.q(seq), self.k(seq), self.v(seq)
            att = torch.softmax(torch.matmul(q, k.transpose(1, 2)) / 4.0, dim=-1)
            o = torch.matmul(att, vv).mean(dim=1)               # B,16
            o = o.reshape(o.shape[0], 4, 4).reshape(-1, 16)
            feat = torch.cat([gm, o, s.view(s.size(0), -1)], dim=1)   # B,48
            h = self.drop(F.relu(self.fc1(feat)))
            probs = torch.softmax(self.fc2(h), dim=1)
            return probs, feat

    return CustomCNN()


def build_torch_model(name: str):
    """The eval-mode torch module for `name`, with seeded random weights."""
    import torch

    torch.manual_seed(0)
    if name == "custom_cnn":
        model = _custom_cnn()
    else:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
    _randomize_batchnorm(model)
    return model.eval()


# --------------------------------------------------------------------------------------------
# Export and cache
# --------------------------------------------------------------------------------------------


def _versions() -> dict:
    """Versions of what shapes an export, read without importing torch (that takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "torchvision", "onnx", "onnxscript"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:   # onnxscript: only the dynamo exporter needs it
            out[pkg] = "none"
    return out


def export_settings(spec: ExportSpec) -> dict:
    """Everything about how `spec` is exported, as it goes into the cache key."""
    ms = MODELS[spec.model]
    s = {
        "model": spec.model,
        "exporter": spec.exporter,
        "opset": spec.opset,
        "input_shape": list(ms.input_shape),
        "input_names": [INPUT_NAME],
        "output_names": list(ms.output_names),
        "dynamic_batch": ms.dynamic_batch,
    }
    if spec.exporter == "torchscript":
        s.update(dynamo=False, do_constant_folding=True)
        if spec.variant == "keepbn":
            s.update(training="PRESERVE")
    else:
        s.update(dynamo=True, optimize=True, external_data=True)
    return s


def cache_dir() -> Path:
    d = os.environ.get("CUVIL_TEST_CACHE")
    return Path(d).expanduser() if d else Path.home() / ".cache" / "cuvil" / "test-models"


def _key_prefix(spec: ExportSpec) -> str:
    return f"{spec.id}-torch{_versions()['torch'].replace('+', '_')}-"


def cache_key(spec: ExportSpec) -> str:
    """<model>-<exporter><opset>[-variant]-torch<version>-s<settings hash>-h<script hash>"""
    script = hashlib.sha256(HERE.read_bytes()).hexdigest()[:12]
    blob = json.dumps({"settings": export_settings(spec), "versions": _versions()},
                      sort_keys=True)
    settings = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return f"{_key_prefix(spec)}s{settings}-h{script}"


def export_model(spec: ExportSpec, path: Path, quiet: bool = True) -> float:
    """Exports `spec` to `path` (plus `path`.data for the dynamo exporter); returns seconds."""
    import torch

    ms = MODELS[spec.model]
    model = build_torch_model(spec.model)
    x = torch.from_numpy(example_input(spec.model))
    kw = dict(input_names=[INPUT_NAME], output_names=list(ms.output_names),
              opset_version=spec.opset)
    if spec.exporter == "torchscript":
        kw["dynamo"] = False
        if spec.variant == "keepbn":
            kw["training"] = torch.onnx.TrainingMode.PRESERVE   # the model is in eval mode
        if ms.dynamic_batch:
            kw["dynamic_axes"] = {INPUT_NAME: {0: "batch"},
                                  **{o: {0: "batch"} for o in ms.output_names}}
    elif spec.exporter == "dynamo":
        kw["dynamo"] = True
        if ms.dynamic_batch:
            kw["dynamic_shapes"] = ({0: torch.export.Dim("batch")},)
    else:
        raise ValueError(f"unknown exporter {spec.exporter!r}")
    return run_export(model, (x,), path, spec.id, quiet, **kw)


def run_export(module, args: tuple, path: Path, what: str, quiet: bool = True, **kw) -> float:
    """torch.onnx.export(module, args, path, **kw) under no_grad, its chatter kept unless it
    fails (then printed with `what`); returns seconds."""
    import torch

    sink = io.StringIO()
    redirect = (contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink)) if quiet else ()
    t0 = time.perf_counter()
    try:
        with contextlib.ExitStack() as st, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for r in redirect:
                st.enter_context(r)
            with torch.no_grad():
                torch.onnx.export(module, args, str(path), **kw)
    except Exception:
        sys.stderr.write(f"export of {what} failed; the exporter said:\n{sink.getvalue()}\n")
        raise
    return time.perf_counter() - t0


def _sidecars(onnx_path: Path) -> list:
    """The external-data files an ONNX file refers to (names relative to its folder)."""
    import onnx

    m = onnx.load(str(onnx_path), load_external_data=False)
    tensors = list(m.graph.initializer) + [a.t for n in m.graph.node for a in n.attribute
                                           if a.type == onnx.AttributeProto.TENSOR]
    locs = set()
    for t in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            for e in t.external_data:
                if e.key == "location":
                    locs.add(e.value)
    return sorted(locs)


_EXPORT_TIMES: dict = {}   # spec.id -> seconds, for the exports this process did


def get_model(model: str, exporter: str, opset: int, variant: str = "",
              cache: Path | None = None) -> Path:
    """Path of the cached ONNX file for (model, exporter, opset[, variant]), exporting it first
    if missing.
    Writes are atomic (export into a temporary folder, then rename), so an interrupted export
    leaves nothing half-written in the cache."""
    spec = ExportSpec(model, exporter, opset, variant)
    if spec not in EXPORTS:
        raise ValueError(f"no such export: {spec}")
    return cached_export(cache or cache_dir(), cache_key(spec), _key_prefix(spec),
                         lambda path: export_model(spec, path), spec.id)


def cached_export(cache: Path, key: str, prefix: str, export, what: str) -> Path:
    """cache/<key>.onnx, made first if missing by export(path) (which returns seconds, noted in
    _EXPORT_TIMES[what]) into a temporary folder and renamed, so that an interrupted export
    leaves nothing half-written; then the stale exports of the same prefix (an older hash of
    the script or other settings: ResNet-50 is 100 MB a copy, GPT-2 650 MB) are removed."""
    cache.mkdir(parents=True, exist_ok=True)
    dst = cache / f"{key}.onnx"
    if dst.exists():
        return dst
    with tempfile.TemporaryDirectory(dir=cache, prefix=".tmp-") as td:
        tmp = Path(td) / dst.name        # same basename: the external-data location is baked in
        _EXPORT_TIMES[what] = export(tmp)
        for side in _sidecars(tmp):     # data first, so a visible .onnx always has its data
            os.replace(Path(td) / side, cache / side)
        os.replace(tmp, dst)
    for p in cache.glob(prefix + "s*.onnx"):
        if p.name != dst.name:
            for side in _sidecars(p) if p.exists() else []:
                (cache / side).unlink(missing_ok=True)
            p.unlink(missing_ok=True)
    return dst


# --------------------------------------------------------------------------------------------
# Checks: ONNX Runtime vs torch, and what ops the exporters emitted
# --------------------------------------------------------------------------------------------


def ort_run(onnx_path, inputs: dict) -> dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


def torch_run(model: str, x: np.ndarray) -> list:
    import torch

    with torch.no_grad():
        out = build_torch_model(model)(torch.from_numpy(x))
    out = out if isinstance(out, tuple) else (out,)
    return [o.numpy() for o in out]


def op_summary(onnx_path) -> dict:
    """{'opsets': {domain: version}, 'ops': {op_type: count}, 'inputs': {name: dims},
    'dynamic_inputs': [op_type: what arrives as an input that older opsets had as attribute]}"""
    import onnx

    m = onnx.load(str(onnx_path), load_external_data=False)
    ops: dict = {}
    for n in m.graph.node:
        key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
        ops[key] = ops.get(key, 0) + 1
    inits = {t.name for t in m.graph.initializer}
    consts = {o for n in m.graph.node if n.op_type == "Constant" for o in n.output}
    # inputs that carry what used to be attributes, and whether they are constant
    attr_like = {"Reshape": {1: "shape"}, "Unsqueeze": {1: "axes"}, "Squeeze": {1: "axes"},
                 "ReduceMean": {1: "axes"}, "ReduceMax": {1: "axes"}, "Split": {1: "split"},
                 "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
                 "Pad": {1: "pads", 2: "constant_value", 3: "axes"},
                 "Clip": {1: "min", 2: "max"}, "Resize": {1: "roi", 2: "scales", 3: "sizes"},
                 "Dropout": {1: "ratio"}, "Expand": {1: "shape"}, "Tile": {1: "repeats"}}
    as_inputs = set()
    for n in m.graph.node:
        for i, what in attr_like.get(n.op_type, {}).items():
            if i < len(n.input) and n.input[i]:
                kind = ("initializer" if n.input[i] in inits else
                        "Constant" if n.input[i] in consts else "computed")
                as_inputs.add(f"{n.op_type}.{what}({kind})")
    dims = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        dims[vi.name] = [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
    return {"opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
            "ops": dict(sorted(ops.items())), "inputs": dims,
            "attr_inputs": sorted(as_inputs), "external_data": _sidecars(onnx_path),
            "bytes": Path(onnx_path).stat().st_size}


def verify(spec: ExportSpec, path: Path) -> dict:
    """Runs the ONNX file in ONNX Runtime and compares with torch; returns the max errors."""
    x = example_input(spec.model)
    ref = torch_run(spec.model, x)
    got = list(ort_run(path, {INPUT_NAME: x}).values())
    res = {}
    for name, r, g in zip(MODELS[spec.model].output_names, ref, got):
        assert r.shape == g.shape, (spec.id, name, r.shape, g.shape)
        err = float(np.max(np.abs(r - g)))
        scale = float(np.max(np.abs(r)))
        res[name] = {"max_abs_err": err, "max_abs_ref": scale}
        if not err <= 1e-3 * max(scale, 1e-6) + 1e-5:
            raise AssertionError(f"{spec.id}: ORT and torch disagree on {name}: "
                                 f"max abs err {err:g} (max |ref| {scale:g})")
    if MODELS[spec.model].dynamic_batch:
        x2 = example_input(spec.model, batch=2, seed=1)
        got2 = list(ort_run(path, {INPUT_NAME: x2}).values())
        ref2 = torch_run(spec.model, x2)
        err2 = max(float(np.max(np.abs(r - g))) for r, g in zip(ref2, got2))
        res["batch2_max_abs_err"] = err2
        assert err2 <= 1e-3 * max(float(np.max(np.abs(ref2[0]))), 1e-6) + 1e-5, (spec.id, err2)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", choices=sorted(MODELS), help="model (repeatable)")
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"])
    ap.add_argument("--out", type=Path, help="also copy the files here")
    ap.add_argument("--no-cache", action="store_true", help="export into a temporary folder")
    ap.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime check")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    specs = [s for s in EXPORTS if (not a.only or s.model in a.only)
             and (not a.exporter or s.exporter == a.exporter)]
    tmp = tempfile.TemporaryDirectory(prefix="cuvil-models-") if a.no_cache else None
    cache = Path(tmp.name) if tmp else cache_dir()
    report = []
    for spec in specs:
        t0 = time.perf_counter()
        path = get_model(spec.model, spec.exporter, spec.opset, spec.variant, cache=cache)
        wall = time.perf_counter() - t0
        row = {"id": spec.id, "path": str(path),
               "export_s": _EXPORT_TIMES.get(spec.id), "cached": spec.id not in _EXPORT_TIMES,
               "get_s": wall, **op_summary(path)}
        if not a.no_verify:
            row["verify"] = verify(spec, path)
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            dst = a.out / f"{spec.id}.onnx"
            # keep the external-data file name the .onnx refers to
            for side in row["external_data"]:
                shutil.copy2(path.parent / side, a.out / side)
            shutil.copy2(path, dst)
        report.append(row)
        if not a.json:
            t = "cached" if row["cached"] else f"exported in {row['export_s']:.1f} s"
            print(f"{spec.id:28s} {t:20s} {row['bytes'] / 1e6:7.2f} MB  opsets={row['opsets']} "
                  f"inputs={row['inputs']}", flush=True)
            print(f"    ops: {' '.join(f'{k}x{v}' for k, v in row['ops'].items())}")
            if row["attr_inputs"]:
                print(f"    as inputs: {' '.join(row['attr_inputs'])}")
            if row["external_data"]:
                print(f"    external data: {row['external_data']}")
            if "verify" in row:
                print(f"    ORT vs torch: {row['verify']}")
    if a.json:
        print(json.dumps(report, indent=1))
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
