#!/usr/bin/env python3
"""Symbolic builds against their specialised twins (issue 31's figures): for BERT-base, the
GPT-2 decode step (both TorchScript exports of tools/models/build_transformers.py, seeded random
weights) and ResNet-18 and MobileNetV2 with batch, H and W dynamic (torchvision, seeded random weights), the
compile time of the build with its dims symbolic against the build at the benchmark shape, and
the latency of both at that shape, 1 and 2 threads.

Compiles alternate (symbolic, fixed) for --compiles rounds, each into a fresh folder (no cache);
latency alternates the two models call by call for --iters calls after a warm-up; medians.

    $VENV/bin/python bench/symbolic_vs_fixed.py [--compiles 3] [--iters 30] [--target T] [--only ResNet]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools" / "models"))
sys.path.insert(0, str(REPO / "python"))

import cuvil  # noqa: E402
from build_transformers import example_feed, get_model  # noqa: E402

COMPILE = REPO / "build" / "bin" / "cuvil-compile"


def torchvision_hw(folder: Path, name: str) -> Path:
    """torchvision's model `name` (seeded random weights) with batch, H and W dynamic."""
    import torch
    import torchvision

    path = folder / f"{name}_hw.onnx"
    if not path.exists():
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)(weights=None).eval()
        torch.onnx.export(m, (torch.randn(1, 3, 64, 64),), str(path), input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}}, opset_version=13, dynamo=False)
    return path


def compile_once(model: Path, dims: dict, target: str | None, folder: Path, env: dict) -> tuple[float, Path]:
    out = folder / "m.so"
    args = [str(COMPILE), "--model", str(model), "--output", str(out)]
    for k, v in dims.items():
        args += ["--dim", f"{k}={v}"]
    if target:
        args += ["--target", target]
    t = time.perf_counter()
    subprocess.run(args, check=True, env=env, cwd=folder)
    return time.perf_counter() - t, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiles", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--target", default=None)
    ap.add_argument("--only", default=None, help="the models whose name contains this (ResNet, BERT, GPT)")
    a = ap.parse_args()
    env = dict(os.environ, CUVIL_NO_SAMPLES="1")   # the expression path, or an error
    work = Path(tempfile.mkdtemp(prefix="cuvil-symbench-"))
    cases = [
        ("BERT-base", get_model("bert", "torchscript", 14), {"batch": "1:8", "seq": "1:512"}, {"batch": "1", "seq": "128"},
         lambda: example_feed("bert", batch=1, seq=128, past=0, seed=1), "batch 1, seq 128"),
        ("GPT-2 decode step", get_model("gpt2_decode", "torchscript", 16), {"batch": "1:8", "past": "0:1023"},
         {"batch": "1", "past": "128"}, lambda: example_feed("gpt2_decode", batch=1, seq=1, past=128, seed=1),
         "batch 1, past 128"),
        ("ResNet-18", torchvision_hw(work, "resnet18"), {"N": "1:4", "H": "32:1024", "W": "32:1024"}, {"N": "1", "H": "224", "W": "224"},
         lambda: {"x": np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)}, "1x3x224x224"),
        ("MobileNetV2", torchvision_hw(work, "mobilenet_v2"), {"N": "1:4", "H": "32:1024", "W": "32:1024"},
         {"N": "1", "H": "224", "W": "224"},
         lambda: {"x": np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)}, "1x3x224x224"),
    ]
    print("| model | shape | compile symbolic / fixed s | ratio | threads | latency symbolic / fixed ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, model, sym_dims, fixed_dims, feed_fn, shape in cases:
        if a.only and a.only.lower() not in name.lower():
            continue
        ts, tf = [], []
        for r in range(a.compiles):
            for dims, acc, tag in ((sym_dims, ts, "s"), (fixed_dims, tf, "f")):
                folder = work / f"{name[:4]}-{tag}{r}".replace(" ", "_")
                folder.mkdir(parents=True, exist_ok=True)
                t, so = compile_once(model, dims, a.target, folder, env)
                acc.append(t)
        sym_so = work / f"{name[:4]}-s0".replace(" ", "_") / "m.so"
        fix_so = work / f"{name[:4]}-f0".replace(" ", "_") / "m.so"
        feed = feed_fn()
        cs, cf = statistics.median(ts), statistics.median(tf)
        for threads in (1, 2):
            ms, mf = cuvil.load(sym_so, threads=threads), cuvil.load(fix_so, threads=threads)
            for _ in range(3):
                ms(**feed)
                mf(**feed)
            ls, lf = [], []
            for _ in range(a.iters):
                t = time.perf_counter()
                ms(**feed)
                ls.append(time.perf_counter() - t)
                t = time.perf_counter()
                mf(**feed)
                lf.append(time.perf_counter() - t)
            s, f = statistics.median(ls) * 1e3, statistics.median(lf) * 1e3
            print(f"| {name} | {shape} | {cs:.2f} / {cf:.2f} | {cs / cf:.2f} | {threads} | {s:.2f} / {f:.2f} | {s / f:.3f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
