#!/usr/bin/env python3
"""Latency of Cuvil-compiled models next to ONNX Runtime, measured in the same run.

For each model: compile with cuvil-compile (timed), then alternate ROUNDS times between
`cuvil-run --bench ITERS --json` (its own process, like a user's) and ITERS runs of an ONNX
Runtime session in this process, so drifts in machine load hit both. Reports medians over all
iterations, the ratio ORT/Cuvil (> 1: Cuvil faster), the % of this machine's peak FLOP/s one
core reaches, start-up (load + first run) and peak RSS.

    $VENV/bin/python bench/bench.py [--models resnet18,resnet50,mobilenet_v2] [--rounds 5] [--iters 20]

Results go to stdout as a Markdown table (paste into bench/RESULTS.md) and, with --json, as JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "models"))
import build_models  # noqa: E402


def model_flops(path: Path) -> float:
    """Multiply-adds x 2 of Conv, ConvTranspose, Gemm and MatMul, from ONNX shape inference."""
    m = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    g = m.graph
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim]
        shapes[vi.name] = dims
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    flops = 0.0
    for n in g.node:
        if n.op_type in ("Conv", "ConvTranspose") and n.output[0] in shapes and n.input[1] in shapes:
            y, w = shapes[n.output[0]], shapes[n.input[1]]
            if n.op_type == "Conv":
                flops += 2.0 * np.prod(y) * np.prod(w[1:])
            else:
                flops += 2.0 * np.prod(shapes[n.input[0]]) * np.prod(w[1:])
        elif n.op_type in ("Gemm", "MatMul") and n.output[0] in shapes and n.input[0] in shapes:
            a, y = shapes[n.input[0]], shapes[n.output[0]]
            k = a[-2] if n.op_type == "Gemm" and any(a.name == "transA" and a.i for a in n.attribute) else a[-1]
            flops += 2.0 * np.prod(y) * k
    return flops


def peak_gflops_one_core() -> float:
    """One core's measured AVX2 FMA peak (bench/peak.c): the clock /proc/cpuinfo reports is
    often the base clock, not the one the core runs at."""
    with tempfile.TemporaryDirectory() as td:
        exe = Path(td) / "peak"
        subprocess.run(["cc", "-O2", "-mavx2", "-mfma", str(REPO / "bench" / "peak.c"), "-o", str(exe)], check=True)
        return float(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)


def ort_times(sess, feed, iters):
    out = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feed)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--exporter", default="torchscript")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--ort-threads", type=int, default=1, help="ONNX Runtime intra-op threads (Cuvil runs on one)")
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    build = Path(args.build)
    peak = peak_gflops_one_core()
    rows = []
    with tempfile.TemporaryDirectory() as td:
        for name in args.models.split(","):
            onnx_path = build_models.get_model(name, args.exporter, args.opset)
            so = Path(td) / f"{name}.so"
            t = time.perf_counter()
            subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(onnx_path), "--output", str(so)], check=True)
            compile_s = time.perf_counter() - t
            x = build_models.example_input(name)
            xin = Path(td) / f"{name}-x.npy"
            np.save(xin, x)
            so_opts = ort.SessionOptions()
            so_opts.intra_op_num_threads = args.ort_threads
            so_opts.inter_op_num_threads = 1
            t = time.perf_counter()
            sess = ort.InferenceSession(str(onnx_path), so_opts, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            ort_load_ms = (time.perf_counter() - t) * 1e3
            t = time.perf_counter()
            sess.run(None, feed)
            ort_first_ms = (time.perf_counter() - t) * 1e3
            cu, ot, info = [], [], None
            for _ in range(args.rounds):
                r = subprocess.run([str(build / "bin" / "cuvil-run"), str(so), "--input", f"input={xin}", "--bench",
                                    str(args.iters), "--warmup", "3", "--json", "--output-dir", td],
                                   check=True, capture_output=True, text=True)
                info = json.loads(r.stdout.strip().splitlines()[-1])
                cu.append(info["median_ms"])
                ot.extend(ort_times(sess, feed, args.iters))
            flops = model_flops(onnx_path)
            cu_med, ort_med = statistics.median(cu), statistics.median(ot)
            rows.append(dict(model=name, exporter=f"{args.exporter}{args.opset}", compile_s=round(compile_s, 2),
                             cuvil_ms=round(cu_med, 2), ort_ms=round(ort_med, 2), ratio=round(ort_med / cu_med, 3),
                             gflop=round(flops / 1e9, 3),
                             cuvil_peak_pct=round(100 * flops / (cu_med * 1e-3) / (peak * 1e9), 1),
                             ort_peak_pct=round(100 * flops / (ort_med * 1e-3) / (peak * 1e9), 1),
                             cuvil_load_ms=round(info["load_ms"], 2), cuvil_first_ms=round(info["first_ms"], 2),
                             ort_load_ms=round(ort_load_ms, 1), ort_first_ms=round(ort_first_ms, 1),
                             cuvil_rss_mb=round(info["peak_rss_mb"], 1)))
            print(f"# {name}: done", file=sys.stderr)
    print(f"Peak (one core, measured AVX2 FMA, bench/peak.c): {peak:.1f} GFLOP/s; ORT intra-op threads: {args.ort_threads}; "
          f"{args.rounds} rounds x {args.iters} iterations, alternating\n")
    print("| model | export | compile s | Cuvil ms | ORT ms | ORT/Cuvil | GFLOP | Cuvil % peak | ORT % peak | "
          "Cuvil load+first ms | ORT load+first ms | Cuvil peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['exporter']} | {r['compile_s']} | {r['cuvil_ms']} | {r['ort_ms']} | {r['ratio']} | "
              f"{r['gflop']} | {r['cuvil_peak_pct']} | {r['ort_peak_pct']} | "
              f"{r['cuvil_load_ms']} + {r['cuvil_first_ms']} | {r['ort_load_ms']} + {r['ort_first_ms']} | {r['cuvil_rss_mb']} |")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
