#!/usr/bin/env python3
"""--precision fp16|bf16 against float32 and ONNX Runtime: latency, peak RSS, library size, start-up.

For each transformer (tools/models/build_transformers.py's dynamo export, seeded random weights),
compiled with its dims fixed to the benchmark's shape as float32, fp16 and bf16, the three Cuvil
libraries and ONNX Runtime (on the float32 model: it has no 16-bit weight mode on CPUs) run in
alternating turns in their own processes (bench/bench.py's servers: ROUNDS turns of ITERS timed
runs each, the order rotated every round). The table gives the median of each one's turn medians,
the ratio to ONNX Runtime and to Cuvil float32, each one's peak RSS (VmHWM of the serving process,
the Python interpreter and NumPy included for both), the library's size and cuvil-run's start-up
(create + first run, without Python).

    $VENV/bin/python bench/precision_bench.py [--models gpt2_decode,bert] [--threads 1,2]
        [--rounds 8] [--iters 10] [--target x86_64-avx2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import bench  # noqa: E402  (its servers and model list)

PRECISIONS = ("fp32", "fp16", "bf16")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2_decode,bert")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--target", default=None, help="cuvil-compile --target (default: the host's best)")
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    args = ap.parse_args(argv)
    build = Path(args.build)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuvil-precision-") as tds:
        td = Path(tds)
        for name in args.models.split(","):
            (b, sq, pa), fixed, label = bench.TRANSFORMER_CASES[name]
            spec = bench.build_transformers.export_for(name, "dynamo")
            onnx_path = bench.build_transformers.get_model(spec.model, spec.exporter, spec.opset)
            sos = {}
            for prec in PRECISIONS:
                sos[prec] = td / f"{name}-{prec}.so"
                subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(onnx_path), "--output",
                                str(sos[prec]), "--precision", prec]
                               + [a for k, v in fixed.items() for a in ("--dim", f"{k}={v}")]
                               + (["--target", args.target] if args.target else []), check=True)
            xin, files = bench.transformer_feed(name, (b, sq, pa), td)
            info = subprocess.run([str(build / "bin" / "cuvil-run"), str(sos["fp32"]), "--info", "--json"], check=True,
                                  capture_output=True, text=True).stdout
            target = json.loads(info.strip().splitlines()[-1])["info"]["target"]
            for th in (int(t) for t in args.threads.split(",")):
                start = {p: bench.cuvil(build, sos[p], files, None, th, 5, td) for p in PRECISIONS}
                peers = [(p, "cuvil", sos[p]) for p in PRECISIONS] + [("ort", "ort", onnx_path)]
                rss = {}
                med, ort_info, _ = bench.alternating(peers, xin, th, args.rounds, args.iters, td, None, rss_out=rss)
                ms = {k: statistics.median(v) for k, v in med.items()}
                for p in PRECISIONS:
                    rows.append(dict(model=label, target=target, threads=th, precision=p, ms=round(ms[p], 2),
                                     ort_ms=round(ms["ort"], 2), ratio_ort=round(ms[p] / ms["ort"], 3),
                                     ratio_f32=round(ms[p] / ms["fp32"], 3), rss_mb=round(rss[p], 1),
                                     ort_rss_mb=round(rss["ort"], 1), so_mb=round(sos[p].stat().st_size / 1e6, 1),
                                     start_ms=round(start[p]["load_ms"] + start[p]["first_ms"], 1),
                                     ort_start_ms=round(ort_info["load_ms"] + ort_info["first_ms"], 1)))
                    print(f"# {label} {p} threads={th}: {ms[p]:.2f} ms, ORT {ms['ort']:.2f} ms", file=sys.stderr)
    print("| model | target | threads | precision | Cuvil ms | ORT f32 ms | Cuvil / ORT | / Cuvil fp32 | peak RSS MB "
          "(ORT) | .so MB | start-up ms (ORT) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['target']} | {r['threads']} | {r['precision']} | {r['ms']} | {r['ort_ms']} | "
              f"{r['ratio_ort']} | {r['ratio_f32']} | {r['rss_mb']} ({r['ort_rss_mb']}) | {r['so_mb']} | "
              f"{r['start_ms']} ({r['ort_start_ms']}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
