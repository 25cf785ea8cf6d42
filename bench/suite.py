#!/usr/bin/env python3
"""The benchmark suite (issue 34): 16 architectures, Cuvil against ONNX Runtime in one run.

The vision and audio models of tools/models/build_suite.py (torchvision, timm, a YOLO-style
detector, a CRNN, the Whisper-tiny encoder; seeded weights) and the transformers of
bench/bench.py (BERT-base and DistilBERT at 128 tokens, the GPT-2 decode step at past 128).
For each: cuvil-compile (timed; for the given target or the host's best), Cuvil's output
against ONNX Runtime's on the same input (max |difference| over the output's scale), then for
each thread count Cuvil and ONNX Runtime in alternating turns in their own processes
(bench/bench.py's servers: ROUNDS turns of ITERS timed runs each, the order swapped every round),
the median of the turn medians, their ratio, % of this machine's FMA peak (bench/peak.c, times
the threads), Cuvil's start-up and both peak RSS. Then the geometric mean of the ratios per
thread count. A model Cuvil cannot compile or run is a row saying so, not a crash of the run.

    $VENV/bin/python bench/suite.py [--quick | --full] [--models a,b] [--threads 1,2]
        [--target x86_64-avx2 [--ort-avx2-only]] [--gemm] [--torch] [--write bench/RESULTS.md]

--quick (the default): 4 turns of 5 runs (~10 minutes after the exports, which are cached);
--full: 20 turns of 10. --gemm adds the GEMM microbenchmark, --torch PyTorch eager and
torch.compile columns for the vision models. `make bench` runs --quick --gemm and `make
bench-full` --full --gemm --torch, each writing bench/RESULTS.md.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tools" / "models"))
import bench  # noqa: E402
import build_suite  # noqa: E402

TRANSFORMERS = ("bert", "distilbert", "gpt2_decode")


def fmt_ms(v):
    return "-" if v is None else v if isinstance(v, str) else f"{v:.2f}"


def torch_ms(kind, name, xin, threads, args):
    """The median ms of a PyTorch peer (bench/peer_run.py), or the reason it did not run."""
    try:
        return statistics.median(bench.peer(kind, name, xin, threads, args.rounds * args.iters)["times_ms"])
    except Exception as e:   # noqa: BLE001  (a cell that says so)
        return "fails: " + str(e).splitlines()[0][:80]


def vision_row(name, build, args, td, corelat, peak, threads):
    spec = build_suite.SUITE[name]
    rows = []
    try:
        onnx_path = build_suite.get_model(name)
    except Exception as e:   # noqa: BLE001  (a row that says so)
        return [dict(model=spec.label, error=f"export failed: {str(e).splitlines()[0][:200]}")]
    so = td / f"{name}.so"
    t = time.perf_counter()
    p = subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(onnx_path), "--output", str(so)]
                       + (["--target", args.target] if args.target else []), capture_output=True, text=True)
    compile_s = time.perf_counter() - t
    if p.returncode:
        return [dict(model=spec.label, error="cuvil-compile: " + (p.stderr.strip().splitlines() or ["?"])[-1][:300])]
    x = build_suite.example_input(name)
    xin = td / f"{name}-x.npy"
    np.save(xin, x)
    out = td / f"{name}-out"
    r = subprocess.run([str(build / "bin" / "cuvil-run"), str(so), "--input", f"input={xin}", "--output-dir", str(out)],
                       capture_output=True, text=True)
    if r.returncode:
        return [dict(model=spec.label, error="cuvil-run: " + (r.stderr.strip().splitlines() or ["?"])[-1][:300])]
    import onnxruntime as ort
    want = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    got = np.load(next(out.glob("*.npy")))
    err = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
    flops = bench.model_flops(onnx_path)
    for th in threads:
        cu_info = bench.cuvil(build, so, xin, "input", th, args.iters, td)
        cu, ot, ort_info, _ = bench.paired(so, onnx_path, xin, th, args.rounds, args.iters, td, corelat)
        c, o = statistics.median(cu), statistics.median(ot)
        eager = compiled = None
        if args.torch:
            # PyTorch on the same module, input and threads, each in its own process after
            # Cuvil's and ONNX Runtime's turns (not alternating): eager, then torch.compile
            # (compiled by its first run, which is not timed)
            eager, compiled = torch_ms("suite-eager", name, xin, th, args), torch_ms("suite-compile", name, xin, th, args)
        rows.append(dict(model=spec.label, threads=th, cuvil_ms=c, ort_ms=o, ratio=c / o, err=err, eager=eager,
                         compiled=compiled,
                         cuvil_pct=100 * flops / (c * 1e-3) / (peak[0] * 1e9 * th),
                         ort_pct=100 * flops / (o * 1e-3) / (peak[1] * 1e9 * th), gflop=flops / 1e9,
                         start_ms=cu_info["load_ms"] + cu_info["first_ms"], cuvil_rss=cu_info["peak_rss_mb"],
                         ort_rss=ort_info["peak_rss_mb"], compile_s=compile_s))
        print(f"# {spec.label} threads={th}: cuvil {c:.2f} ms, ort {o:.2f} ms, ratio {c / o:.3f}, rel err {err:.1e}",
              file=sys.stderr, flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="4 turns of 5 runs (the default)")
    mode.add_argument("--full", action="store_true", help="20 turns of 10 runs")
    ap.add_argument("--models", default=",".join(list(build_suite.SUITE) + list(TRANSFORMERS)))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--gemm", action="store_true",
                    help="also the GEMM microbenchmark (build/bin/cuvil-bench-gemm; --quick with --quick)")
    ap.add_argument("--torch", action="store_true",
                    help="also PyTorch eager and torch.compile on the vision models (each in its own process)")
    ap.add_argument("--target", default=None)
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    ap.add_argument("--write", help="add the report to this Markdown file, under its title")
    ap.add_argument("--ort-avx2-only", action="store_true",
                    help="run ONNX Runtime under bench/cpuid_mask.c (AVX-512 and VNNI hidden from CPUID), as on an "
                         "AVX2-only machine; needs an AVX-512 CPU whose kernel lets a process fault CPUID")
    args = ap.parse_args(argv)
    # the peer processes import the cuvil package from this checkout
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    args.rounds, args.iters = (20, 10) if args.full else (4, 5)
    build = Path(args.build)
    threads = [int(t) for t in args.threads.split(",")]
    names = [m for m in args.models.split(",") if m]
    bad = [m for m in names if m not in build_suite.SUITE and m not in TRANSFORMERS]
    if bad:
        ap.error(f"no suite model {', '.join(bad)}")
    peaks = bench.peak_gflops_one_core()
    # each side's % of the peak of the ISA it runs: Cuvil its target's, ONNX Runtime AVX2's
    # under --ort-avx2-only, else the host's best (as each picks)
    best = max(peaks.values()) if peaks else float("nan")
    isa = next((k for k in sorted(peaks, key=len, reverse=True) if args.target and args.target.endswith("-" + k)), None)
    peak = (peaks[isa] if isa else best, peaks.get("avx2", best) if args.ort_avx2_only else best)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuvil-suite-") as tds:
        td = Path(tds)
        if args.ort_avx2_only:
            bench.ORT_PRELOAD = bench.cpuid_mask(td)
            if not bench.ORT_PRELOAD:
                ap.error("--ort-avx2-only needs an AVX-512 CPU with cpuid_fault (see /proc/cpuinfo)")
        corelat = bench.corelat_program(td)
        for name in names:
            if name in TRANSFORMERS:
                try:
                    for r in bench.transformer_rows([name], threads, args, build, td, corelat, peak):
                        rows.append(dict(model=r["model"], threads=r["threads"], cuvil_ms=r["dyn_ms"], ort_ms=r["ort_ms"],
                                         ratio=r["ratio"], err=None, cuvil_pct=r["cuvil_peak_pct"],
                                         ort_pct=r["ort_peak_pct"], gflop=r["gflop"], start_ms=r["cuvil_start_ms"],
                                         cuvil_rss=r["cuvil_rss_mb"], ort_rss=r["ort_rss_mb"],
                                         compile_s=float(r["compile_s"].split(" / ")[0])))
                except Exception as e:   # noqa: BLE001
                    rows.append(dict(model=name, error=str(e).splitlines()[0][:300]))
            else:
                rows += vision_row(name, build, args, td, corelat, peak, threads)
    import onnxruntime
    tgt = args.target or "the host's best"
    info = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"## {datetime.date.today().isoformat()}: the benchmark suite (`bench/suite.py {'--full' if args.full else '--quick'}"
             f"{' --target ' + args.target if args.target else ''}{' --ort-avx2-only' if args.ort_avx2_only else ''}`)\n",
             f"Machine: {bench.cpu_model()}, {os.cpu_count()} cores; one-core FMA peak "
             + ", ".join(f"{k.upper()} {v:.1f} GFLOP/s" for k, v in peaks.items())
             + f" (% peak: Cuvil's of {peak[0]:.1f}, its target's; ONNX Runtime's of {peak[1]:.1f}, the ISA it runs)"
             + f". ONNX Runtime {onnxruntime.__version__}"
             + (" under bench/cpuid_mask.c (it sees an AVX2-only CPU)" if args.ort_avx2_only else "")
             + f"; Cuvil target {tgt}{', at ' + info if info else ''}. "
             f"{args.rounds} alternating turns x {args.iters} runs; medians of the turn medians. Ratio: Cuvil / ONNX "
             f"Runtime (< 1: Cuvil faster). Error: max |Cuvil - ONNX Runtime| over the output's max |value| "
             f"(transformers: checked by tests/python/test_transformers.py). Transformers run the symbolic build "
             f"(`--dim seq=1:512` etc.).\n",
             "| model | threads | Cuvil ms | ORT ms | Cuvil/ORT | Cuvil % peak | ORT % peak | GFLOP | error | Cuvil start ms "
             "| Cuvil RSS MB | ORT RSS MB | compile s |" + (" PyTorch eager ms | torch.compile ms |" if args.torch else ""),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.torch else "")]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | - | - | - | **fails**: {r['error'].replace('|', '/')} | | | | | | | | |"
                         + (" | |" if args.torch else ""))
            continue
        err = f"{r['err']:.1e}" if r["err"] is not None else "-"
        lines.append(f"| {r['model']} | {r['threads']} | {r['cuvil_ms']:.2f} | {r['ort_ms']:.2f} | **{r['ratio']:.2f}** | "
                     f"{r['cuvil_pct']:.0f} | {r['ort_pct']:.0f} | {r['gflop']:.2f} | {err} | {r['start_ms']:.0f} | "
                     f"{r['cuvil_rss']:.0f} | {r['ort_rss']:.0f} | {r['compile_s']:.1f} |"
                     + (f" {fmt_ms(r.get('eager'))} | {fmt_ms(r.get('compiled'))} |" if args.torch else ""))
    for th in threads:
        rs = [r["ratio"] for r in rows if "error" not in r and r["threads"] == th]
        if rs:
            gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
            worst = max((r for r in rows if "error" not in r and r["threads"] == th), key=lambda r: r["ratio"])
            lines.append(f"\n{th} thread{'s' if th > 1 else ''}: geometric mean of the ratios {gm:.2f} over {len(rs)} "
                         f"models; {sum(x > 1.0 for x in rs)} above 1.0 (worst: {worst['model']} {worst['ratio']:.2f}).")
    failed = [r["model"] for r in rows if "error" in r]
    if failed:
        lines.append(f"\nNot run: {', '.join(failed)}.")
    if args.gemm:
        # the target's own GEMM bench (cuvil-bench-gemm-avx2: % of the AVX2 peak) where there is one
        gemm = build / "bin" / "cuvil-bench-gemm"
        if isa and (build / "bin" / f"cuvil-bench-gemm-{isa}").exists():
            gemm = build / "bin" / f"cuvil-bench-gemm-{isa}"
        out = subprocess.run([str(gemm)] + ([] if args.full else ["--quick"]), capture_output=True, text=True)
        lines.append(f"\nGEMM (`build/bin/{gemm.name}{'' if args.full else ' --quick'}`; `ukernel`: the microkernel "
                     "alone on L1-resident panels; `square`, `layer`: the whole driver, one thread; `square, 2 threads`: "
                     "% of twice the one-core peak):\n\n" + (out.stdout if out.returncode == 0 else f"fails: {out.stderr}"))
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        path = Path(args.write)
        old = path.read_text() if path.exists() else "# Cuvil vs ONNX Runtime — measured results\n\n"
        cut = old.index("\n## ") + 1 if "\n## " in old else len(old)
        path.write_text(old[:cut] + report + "\n" + old[cut:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
