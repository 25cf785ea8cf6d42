#!/usr/bin/env python3
"""--activations fp16|bf16 against float32 activations: latency and arena, same model, same run.

Builds the float32 models of bench/quant_bench.py (torchvision ResNet-50 and MobileNetV2 at
1x3x224x224, BERT-base at 1x128 tokens; seeded random weights), compiles each three times
(--activations fp32, fp16, bf16) for the target given (default: this machine's best), and times
the three libraries with cuvil-run in alternating turns (ROUNDS turns of ITERS timed runs each,
the order reversed every other turn). Prints the median of each one's turn medians, its ratio to
float32 and its arena (cuvil-run --info). A benchmark, not a test.

    $VENV/bin/python bench/activations_bench.py [--models resnet50,mobilenet_v2,bert_base]
        [--threads 1,2] [--rounds 5] [--iters 20] [--target x86_64-avx2] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import quant_bench  # noqa: E402  (its model builders)

VARIANTS = ("fp32", "fp16", "bf16")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--target", default=None)
    ap.add_argument("--work", default="/tmp/cuvil-quant-bench")
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    args = ap.parse_args(argv)
    work, bin_ = Path(args.work), Path(args.build) / "bin"
    work.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        if name == "bert_base":
            f32, _, feed = quant_bench.build_bert(work)
            ins = [a for k in ("ids", "mask") for a in ("--input", f"{k}={work / (k + '.npy')}")]
            for k, v in np.load(feed).items():
                np.save(work / f"{k}.npy", v)
        else:
            f32, _ = quant_bench.build(name, work)
            x = work / "act_x.npy"
            np.save(x, np.random.RandomState(0).randn(1, 3, 224, 224).astype(np.float32))
            ins = ["--input", f"x={x}"]
        sos = []
        for v in VARIANTS:
            so = work / f"{name}_act_{v}.so"
            subprocess.run([str(bin_ / "cuvil-compile"), "--model", str(f32), "--output", str(so), "--activations", v]
                           + (["--target", args.target] if args.target else []), check=True)
            sos.append(so)
        arena = {so: json.loads(subprocess.run([str(bin_ / "cuvil-run"), str(so), "--info", "--json"], check=True,
                                               capture_output=True, text=True).stdout.strip().splitlines()[-1])["info"]
                 for so in sos}
        for th in args.threads.split(","):
            med = {so: [] for so in sos}
            for r in range(args.rounds):
                for so in (sos if r % 2 == 0 else sos[::-1]):
                    out = subprocess.run([str(bin_ / "cuvil-run"), str(so)] + ins + ["--bench", str(args.iters), "--threads",
                                         th, "--json"], check=True, capture_output=True, text=True).stdout
                    med[so].append(json.loads(out.strip().splitlines()[-1])["median_ms"])
            base = statistics.median(med[sos[0]])
            cells = [f"{v} {statistics.median(med[so]):.2f} ms ({statistics.median(med[so]) / base:.2f}x), "
                     f"arena {arena[so]['arena_bytes'] / 1e6:.2f} MB" for v, so in zip(VARIANTS, sos)]
            print(f"| {name} | {arena[sos[0]]['target']} | {th} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
