#!/usr/bin/env python3
"""Batch-1 latency of Cuvil-compiled models next to ONNX Runtime (and PyTorch), measured in one run.

For each model: compile with cuvil-compile (timed, default target: the host's best), then for each
thread count, Cuvil's library (through the cuvil package) and ONNX Runtime (graph optimisation
'all', intra-op threads T), each loaded once in its own process (bench/peer_run.py --serve), run
ROUNDS alternating turns of ITERS timed runs (after one untimed), the first of each pair swapped
every round, with a pause before each turn longer than either's idle spinning. A pair of turns
takes 0.3-2 s, so that the load of a shared machine hits both alike (on the 2-vCPU VM of
bench/RESULTS.md a model's turn medians moved by up to 40% from one second to the next; rounds of
a process each, 3-4 s apart, left two-thread cells 10-30% apart from one run to the next), and
neither's idle threads share the machine with the other. Each turn reports its median; the
table gives the median of the turn medians, their ratio Cuvil/ORT (< 1: Cuvil faster), the % of
the machine's FMA peak (one core's measured peak, bench/peak.c, times the threads), peak RSS and
start-up (load + first run; Cuvil's from `cuvil-run`, without Python). A second table times
PyTorch eager and AOTInductor (torch._inductor.aoti_compile_and_package) in alternating rounds
of processes.

    $VENV/bin/python bench/bench.py [--models resnet18,resnet50,mobilenet_v2] [--threads 1,2]
        [--rounds 30] [--iters 10] [--no-torch] [--target x86_64-avx2] [--write bench/RESULTS.md]

`make bench-models` runs it with --write: the new run, with the GEMM microbenchmark
(build/bin/cuvil-bench-gemm), goes first in bench/RESULTS.md, under its title (`make bench`
runs the 16-model suite, bench/suite.py).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "models"))
import build_models  # noqa: E402
import build_transformers  # noqa: E402



def model_flops(path: Path, dims: dict | None = None) -> float:
    """Multiply-adds x 2 of Conv, ConvTranspose, Gemm and MatMul, from ONNX shape inference (with
    the inputs' symbolic dims set from dims, and shape values propagated)."""
    m = onnx.load(str(path), load_external_data=False)
    for i in m.graph.input:
        for d in i.type.tensor_type.shape.dim:
            if dims and d.dim_param in dims:
                d.dim_value = dims[d.dim_param]
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    g = m.graph
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        dims_ = [d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim]
        shapes[vi.name] = dims_
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
        elif n.op_type in ("Gemm", "MatMul") and n.input[0] in shapes:
            a = shapes[n.input[0]]
            y = shapes.get(n.output[0])
            if y is None and n.op_type == "MatMul" and n.input[1] in shapes and len(a) >= 2:   # from its inputs
                b = shapes[n.input[1]]
                y = list(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) + [a[-2], b[-1]]
            if y is None:
                continue
            k = a[-2] if n.op_type == "Gemm" and any(a.name == "transA" and a.i for a in n.attribute) else a[-1]
            flops += 2.0 * np.prod(y) * k
    return flops


def peak_gflops_one_core() -> dict:
    """One core's measured FMA peak per ISA (bench/peak.c)."""
    with tempfile.TemporaryDirectory() as td:
        exe = Path(td) / "peak"
        subprocess.run(["cc", "-O2", str(REPO / "bench" / "peak.c"), "-o", str(exe)], check=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def corelat_program(td) -> Path | None:
    """bench/corelat.c built: the round trip of a cache line between two CPUs, ns."""
    exe = Path(td) / "corelat"
    try:
        r = subprocess.run(["cc", "-O2", "-pthread", str(REPO / "bench" / "corelat.c"), "-o", str(exe)],
                           capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if r.returncode == 0 else None


# A round trip above this: the two CPUs do not share a last-level cache (bench/corelat.c).
SPLIT_NS = 150


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def peer(kind, what, xin, threads, iters):
    r = subprocess.run([sys.executable, str(REPO / "bench" / "peer_run.py"), kind, str(what), str(xin), str(threads),
                        str(iters)], capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"{kind} {what}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# Quiet before each turn: ONNX Runtime's workers spin for ~50 ms after a run, Cuvil's ~1-3 ms.
GAP_S = 0.15


def cpuid_mask(work):
    """bench/cpuid_mask.c built into WORK, or None where this machine cannot fault CPUID or has no
    AVX-512 to hide."""
    flags = Path("/proc/cpuinfo").read_text().split()
    if "cpuid_fault" not in flags or "avx512f" not in flags:
        return None
    so = work / "cpuid_mask.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so), str(REPO / "bench" / "cpuid_mask.c")], check=True)
    return so


# A library LD_PRELOADed into ONNX Runtime's servers only (bench/cpuid_mask.c: an AVX2-only CPU), or None.
ORT_PRELOAD = None


class Server:
    """A `peer_run.py KIND WHAT INPUT THREADS 0 --serve` process: the model loaded once, timed
    turns on request."""

    def __init__(self, kind, what, xin, threads, td, label=None):
        self.kind = label or kind
        self.err = open(Path(td) / f"{self.kind}-serve.err", "w+")
        env = dict(os.environ, LD_PRELOAD=str(ORT_PRELOAD)) if ORT_PRELOAD and kind == "ort" else None
        self.p = subprocess.Popen([sys.executable, str(REPO / "bench" / "peer_run.py"), kind, str(what), str(xin),
                                   str(threads), "0", "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, env=env)
        try:
            self.ready = self._read()
        except BaseException:
            self.close()
            raise

    def _fail(self):
        self.p.kill()
        self.p.wait()
        self.err.seek(0)
        lines = self.err.read().strip().splitlines()
        raise RuntimeError(f"{self.kind} server: {lines[-1] if lines else f'exit {self.p.returncode}'}")

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            self._fail()
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise RuntimeError(f"{self.kind} server printed {line.strip()[:200]!r}, not a JSON line") from None

    def turn(self, iters):
        try:
            self.p.stdin.write(f"{iters}\n")
            self.p.stdin.flush()
        except OSError:  # it ended
            self._fail()
        return self._read()

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
        self.err.close()


def paired(so, onnx_path, xin, threads, rounds, iters, td, corelat):
    """Cuvil and ONNX Runtime in alternating turns (module docstring): the turn medians of each,
    ONNX Runtime's start-up and peak RSS, and with several threads the core-to-core round trip
    (ns) before each round."""
    med, ort_info, lat = alternating([("cuvil", "cuvil", so), ("ort", "ort", onnx_path)], xin, threads, rounds, iters,
                                     td, corelat)
    return med["cuvil"], med["ort"], ort_info, lat


def alternating(peers, xin, threads, rounds, iters, td, corelat, rss_out=None):
    """Servers for peers [(label, kind, what)], the last ONNX Runtime, in turns whose order
    rotates every round: {label: turn medians}, ONNX Runtime's start-up and peak RSS, and with
    several threads the core-to-core round trip (ns) before each round. rss_out (a dict): every
    peer's peak RSS (MB) by label."""
    servers = []
    try:
        for label, kind, what in peers:
            servers.append(Server(kind, what, xin, threads, td, label=label))
        med = {s.kind: [] for s in servers}
        rss = 0.0
        lat = []
        for r in range(rounds):
            if threads > 1 and corelat:
                try:
                    out = subprocess.run([str(corelat)], capture_output=True, text=True, timeout=10).stdout.strip()
                except subprocess.TimeoutExpired:
                    out = ""
                if out:
                    lat.append(float(out))
            k = r % len(servers)
            for s in servers[k:] + servers[:k]:
                time.sleep(GAP_S)
                res = s.turn(iters)
                med[s.kind].append(statistics.median(res["times_ms"]))
                if rss_out is not None:
                    rss_out[s.kind] = res["peak_rss_mb"]
                if s is servers[-1]:
                    rss = res["peak_rss_mb"]
        ort_info = dict(servers[-1].ready, peak_rss_mb=rss)
        return med, ort_info, lat
    finally:
        for s in servers:
            s.close()


def cuvil(build, so, xin, name, threads, iters, outdir):
    """cuvil-run's figures (start-up, peak RSS, median); xin: one .npy for input `name`, or a
    {name: .npy} dict."""
    ins = xin.items() if isinstance(xin, dict) else [(name, xin)]
    r = subprocess.run([str(build / "bin" / "cuvil-run"), str(so)] + [a for k, f in ins for a in ("--input", f"{k}={f}")]
                       + ["--bench", str(iters), "--warmup", "3", "--threads", str(threads), "--json", "--output-dir",
                          str(outdir)], check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def aoti_package(name, x, td, threads):
    """Compiles the model with AOTInductor into a .pt2 package; returns (path, seconds) or (None, reason)."""
    script = f"""
import sys, time, torch
sys.path.insert(0, {str(REPO / 'tools' / 'models')!r})
import build_models
torch.set_num_threads({threads})
m = build_models.build_torch_model({name!r}).eval()
x = torch.zeros({list(x.shape)!r})
t = time.perf_counter()
with torch.inference_mode():
    ep = torch.export.export(m, (x,))
    torch._inductor.aoti_compile_and_package(ep, package_path={str(Path(td) / (name + '.pt2'))!r})
print(time.perf_counter() - t)
"""
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return None, "did not finish in 15 min"
    if r.returncode:
        lines = (r.stderr or "").strip().splitlines()
        return None, (lines[-1] if lines else f"exit {r.returncode}")[:200]
    return Path(td) / (name + ".pt2"), float(r.stdout.strip().splitlines()[-1])


# The transformer rows: (batch, seq, past) of the figures, the dims fixed for the
# specialised build, the label.
TRANSFORMER_CASES = {
    "bert": ((1, 128, 0), {"batch": 1, "seq": 128}, "BERT-base (batch 1, seq 128)"),
    "distilbert": ((1, 128, 0), {"batch": 1, "seq": 128}, "DistilBERT (batch 1, seq 128)"),
    "gpt2": ((1, 128, 0), {"batch": 1, "seq": 128}, "GPT-2 prompt (batch 1, seq 128)"),
    "gpt2_decode": ((1, 1, 128), {"batch": 1, "past": 128}, "GPT-2 decode step (batch 1, past 128)"),
}


def compile_timed(build, onnx_path, so, dims, target):
    t = time.perf_counter()
    subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(onnx_path), "--output", str(so)]
                   + [a for k, v in dims.items() for a in ("--dim", f"{k}={v}")]
                   + (["--target", target] if target else []), check=True)
    return time.perf_counter() - t


def transformer_feed(name, shape, td):
    """The example feed of transformer name at shape (batch, seq, past), in td: one .npz of the
    named inputs (for the servers) and a {name: .npy} dict (for cuvil-run)."""
    b, sq, pa = shape
    feed = build_transformers.example_feed(name, batch=b, seq=sq, past=pa)
    xin = td / f"{name}-feed.npz"
    np.savez(xin, **feed)
    files = {}
    for k, v in feed.items():
        files[k] = td / f"{name}-in-{len(files)}.npy"
        np.save(files[k], v)
    return xin, files


def transformer_rows(names, threads, args, build, td, corelat, peak):
    """The dynamo export of each model, compiled twice: with its dims symbolic over the test
    ranges (`--dim seq=1:512`), and specialised to the benchmark's shape; both in alternating
    turns with ONNX Runtime. peak: one core's FMA peak for both, or (Cuvil's, ONNX Runtime's)."""
    cpeak, opeak = peak if isinstance(peak, tuple) else (peak, peak)
    rows = []
    for name in names:
        (b, sq, pa), fixed, label = TRANSFORMER_CASES[name]
        spec = build_transformers.export_for(name, "dynamo")
        onnx_path = build_transformers.get_model(spec.model, spec.exporter, spec.opset)
        ranges = {k: f"{lo}:{hi}" for k, (lo, hi) in build_transformers.MODELS[name].dims.items()}
        so_dyn, so_fix = td / f"{name}-dyn.so", td / f"{name}-fixed.so"
        dyn_s = compile_timed(build, onnx_path, so_dyn, ranges, args.target)
        fix_s = compile_timed(build, onnx_path, so_fix, fixed, args.target)
        xin, files = transformer_feed(name, (b, sq, pa), td)
        flops = model_flops(onnx_path, fixed)
        info = subprocess.run([str(build / "bin" / "cuvil-run"), str(so_dyn), "--info", "--json"], check=True,
                              capture_output=True, text=True).stdout
        target = json.loads(info.strip().splitlines()[-1]).get("info", {}).get("target", "?")
        for th in threads:
            cu_info = cuvil(build, so_dyn, files, None, th, args.iters, td)
            med, ort_info, lat = alternating([("dyn", "cuvil", so_dyn), ("fixed", "cuvil", so_fix), ("ort", "ort", onnx_path)],
                                             xin, th, args.rounds, args.iters, td, corelat)
            d, f, o = (statistics.median(med[k]) for k in ("dyn", "fixed", "ort"))
            rows.append(dict(model=label, threads=th, dyn_ms=round(d, 2), fixed_ms=round(f, 2), ort_ms=round(o, 2),
                             ratio=round(d / o, 3), fixed_ratio=round(f / o, 3), dyn_vs_fixed=round(d / f, 3),
                             pair_ratio=round(statistics.median(x / y for x, y in zip(med["dyn"], med["ort"])), 3),
                             gflop=round(flops / 1e9, 3),
                             cuvil_peak_pct=round(100 * flops / (d * 1e-3) / (cpeak * 1e9 * th), 1),
                             ort_peak_pct=round(100 * flops / (o * 1e-3) / (opeak * 1e9 * th), 1),
                             cuvil_start_ms=round(cu_info["load_ms"] + cu_info["first_ms"], 1),
                             ort_start_ms=round(ort_info["load_ms"] + ort_info["first_ms"], 1),
                             cuvil_rss_mb=round(cu_info["peak_rss_mb"], 1), ort_rss_mb=round(ort_info["peak_rss_mb"], 1),
                             compile_s=f"{dyn_s:.1f} / {fix_s:.1f}", target=target, ranges=" ".join(f"--dim {k}={v}" for k, v in ranges.items())))
            print(f"# {label} threads={th}: cuvil {d:.2f} ms (specialised {f:.2f}), ort {o:.2f} ms, ratio {d / o:.3f}",
                  file=sys.stderr)
    return rows


def transformer_report(rows, args) -> list:
    lines = ["\n### Transformers\n",
             "The dynamo exports of `tools/models/build_transformers.py` (seeded random weights), inputs from its "
             "`example_feed`. Cuvil's build with symbolic dims (the test ranges, column `--dim`) and one specialised to "
             "the benchmark's shape, each in its own process, in turns with ONNX Runtime (the order rotating every "
             f"round; {args.rounds} rounds x {args.iters} runs). Ratio = Cuvil (symbolic dims) / ONNX Runtime; "
             "dyn/fixed = the symbolic build over the specialised one. % peak: FLOPs (2 x multiply-adds of Gemm/MatMul) "
             "per second over the one-core FMA peak x threads (the decode step reads every weight for 0.25 GFLOP: it "
             "is bound by memory, not FMAs). Start (load + first run) and peak RSS: the symbolic build's, by "
             "`cuvil-run` (its arena is planned for the largest shapes); ONNX Runtime's in its Python process.\n",
             "| model | threads | Cuvil ms | specialised ms | ORT ms | Cuvil/ORT | specialised/ORT | dyn/fixed | "
             "Cuvil % peak | ORT % peak | Cuvil start ms | ORT start ms | Cuvil peak RSS MB | ORT peak RSS MB | "
             "compile s (dyn / fixed) | `--dim` |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r['dyn_ms']} | {r['fixed_ms']} | {r['ort_ms']} | "
                     f"**{r['ratio']}** | {r['fixed_ratio']} | {r['dyn_vs_fixed']} | {r['cuvil_peak_pct']} | "
                     f"{r['ort_peak_pct']} | {r['cuvil_start_ms']} | {r['ort_start_ms']} | {r['cuvil_rss_mb']} | "
                     f"{r['ort_rss_mb']} | {r['compile_s']} | `{r['ranges']}` |")
    lines.append("\nThe median of the rounds' own ratios (Cuvil's symbolic build over the ONNX Runtime turn of its "
                 "round): " + ", ".join(f"{r['model']} {r['threads']} thread{'s' if r['threads'] > 1 else ''} "
                                        f"{r['pair_ratio']}" for r in rows) + ".")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2", help="the CNNs ('' for none)")
    ap.add_argument("--transformers", default="bert,gpt2_decode",
                    help=f"the transformers ('' for none; of {', '.join(TRANSFORMER_CASES)})")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--exporter", default="torchscript")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch eager / AOTInductor table")
    ap.add_argument("--target", help="cuvil-compile --target (default: the host's best), e.g. x86_64-avx2 to "
                    "measure the AVX2 kernels on an AVX-512 machine (ONNX Runtime still picks its own)")
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    ap.add_argument("--write", help="write the report into this Markdown file (bench/RESULTS.md)")
    args = ap.parse_args(argv)
    build = Path(args.build)
    threads = [int(t) for t in args.threads.split(",")]
    peaks = peak_gflops_one_core()
    peak = max(peaks.values()) if peaks else float("nan")
    rows, trows, xrows = [], [], []
    target = "?"
    bad = [t for t in args.transformers.split(",") if t and t not in TRANSFORMER_CASES]
    if bad:
        ap.error(f"--transformers: no case for {', '.join(bad)} (there are {', '.join(TRANSFORMER_CASES)})")
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        corelat = corelat_program(td)
        xrows = transformer_rows([t for t in args.transformers.split(",") if t], threads, args, build, td, corelat, peak)
        target = xrows[0]["target"] if xrows else target
        for name in [m for m in args.models.split(",") if m]:
            onnx_path = build_models.get_model(name, args.exporter, args.opset)
            so = td / f"{name}.so"
            t = time.perf_counter()
            subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(onnx_path), "--output", str(so)]
                           + (["--target", args.target] if args.target else []), check=True)
            compile_s = time.perf_counter() - t
            info = subprocess.run([str(build / "bin" / "cuvil-run"), str(so), "--info", "--json"], check=True, capture_output=True,
                                  text=True).stdout
            target = json.loads(info.strip().splitlines()[-1]).get("info", {}).get("target", "?")
            x = build_models.example_input(name)
            xin = td / f"{name}-x.npy"
            np.save(xin, x)
            in_name = onnx.load(str(onnx_path), load_external_data=False).graph.input[0].name
            flops = model_flops(onnx_path)
            for th in threads:
                cu_info = cuvil(build, so, xin, in_name, th, args.iters, td)  # start-up and RSS without Python
                cu, ot, ort_info, lat = paired(so, onnx_path, xin, th, args.rounds, args.iters, td, corelat)
                split = sum(v > SPLIT_NS for v in lat)
                c, o = statistics.median(cu), statistics.median(ot)
                pair = statistics.median(a / b for a, b in zip(cu, ot))
                rows.append(dict(model=name, threads=th, compile_s=round(compile_s, 2), cuvil_ms=round(c, 2),
                                 ort_ms=round(o, 2), ratio=round(c / o, 3), gflop=round(flops / 1e9, 3),
                                 cuvil_peak_pct=round(100 * flops / (c * 1e-3) / (peak * 1e9 * th), 1),
                                 ort_peak_pct=round(100 * flops / (o * 1e-3) / (peak * 1e9 * th), 1),
                                 cuvil_start_ms=round(cu_info["load_ms"] + cu_info["first_ms"], 1),
                                 ort_start_ms=round(ort_info["load_ms"] + ort_info["first_ms"], 1),
                                 cuvil_rss_mb=round(cu_info["peak_rss_mb"], 1),
                                 ort_rss_mb=round(ort_info["peak_rss_mb"], 1),
                                 pair_ratio=round(pair, 3), split=split, lat=lat, runs=args.rounds * args.iters))
                print(f"# {name} threads={th}: cuvil {c:.2f} ms, ort {o:.2f} ms, ratio {c / o:.3f} (median of the "
                      f"pairs' ratios {pair:.3f}; cuvil-run alone {cu_info['median_ms']:.2f} ms"
                      + (f"; {split} of {len(lat)} rounds with the CPUs apart, round trip {min(lat):.0f}-{max(lat):.0f} ns"
                         if lat else "") + ")", file=sys.stderr)
            if not args.no_torch:
                # compiled once; its OpenMP kernels take the thread count torch.set_num_threads gives
                pkg, aoti_s = aoti_package(name, x, td, max(threads))
                for th in threads:
                    ea, aa = [], []
                    for _ in range(max(3, min(6, args.rounds // 2))):
                        ea.append(statistics.median(peer("eager", name, xin, th, args.iters)["times_ms"]))
                        if pkg:
                            aa.append(statistics.median(peer("aoti", pkg, xin, th, args.iters)["times_ms"]))
                    cu_ms = next(r["cuvil_ms"] for r in rows if r["model"] == name and r["threads"] == th)
                    trows.append(dict(model=name, threads=th, eager_ms=round(statistics.median(ea), 2),
                                      aoti_ms=round(statistics.median(aa), 2) if aa else None,
                                      aoti_note=f"compile {aoti_s:.0f} s" if pkg else f"failed: {aoti_s}",
                                      cuvil_ms=cu_ms))
                    print(f"# {name} threads={th}: torch eager {trows[-1]['eager_ms']} ms, aoti {trows[-1]['aoti_ms']}",
                          file=sys.stderr)
    import onnxruntime
    lines = []
    lines.append(f"## {datetime.date.today().isoformat()}: `make bench-models`\n")
    lines.append(f"Machine: {cpu_model()}, {os.cpu_count()} cores; measured one-core FMA peak "
                 + ", ".join(f"{k.upper()} {v:.1f} GFLOP/s" for k, v in peaks.items())
                 + f" (bench/peak.c); Cuvil target `{target}`. ONNX Runtime {onnxruntime.__version__} "
                 f"(graph optimisation 'all', same intra-op threads), torch {_torch_version()}.\n")
    if rows:
        lines.append(f"Batch 1, float32, {args.rounds} alternating turns x {args.iters} runs per model and thread count: "
                     f"Cuvil (through the cuvil package) and ONNX Runtime each loaded once in its own process, their "
                     f"turns alternating with {GAP_S} s of quiet before each (one untimed run, then {args.iters} timed); "
                     f"the medians of the turn medians. "
                     f"Ratio = Cuvil / ONNX Runtime (< 1: Cuvil faster). % peak: FLOPs (2 x multiply-adds of "
                     f"Conv/Gemm/MatMul, counted as direct convolution) per second over the peak x threads; Winograd "
                     f"layers do fewer multiplies than that count, so Cuvil's figure can pass 100. Start: load + first "
                     f"run (Cuvil's by `cuvil-run`, without Python). Peak RSS: each process's VmHWM (Cuvil's of "
                     f"`cuvil-run`; ONNX Runtime's includes the Python interpreter).\n")
        lines.append("| model | threads | Cuvil ms | ORT ms | Cuvil/ORT | Cuvil % peak | ORT % peak | Cuvil start ms | "
                     "ORT start ms | Cuvil peak RSS MB | ORT peak RSS MB | compile s |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            lines.append(f"| {r['model']} | {r['threads']} | {r['cuvil_ms']} | {r['ort_ms']} | **{r['ratio']}** | "
                         f"{r['cuvil_peak_pct']} | {r['ort_peak_pct']} | {r['cuvil_start_ms']} | {r['ort_start_ms']} | "
                         f"{r['cuvil_rss_mb']} | {r['ort_rss_mb']} | {r['compile_s']} |")
        lines.append("\nThe median of the rounds' own ratios (each Cuvil turn over the ONNX Runtime turn beside it): "
                     + ", ".join(f"{r['model']} {r['threads']} thread{'s' if r['threads'] > 1 else ''} {r['pair_ratio']}"
                                 for r in rows) + ".")
    lat_rows = [r for r in rows if r["lat"]]
    if lat_rows:
        lines.append(f"\nWith several threads, before each round, the round trip of a cache line between the first two "
                     f"CPUs (bench/corelat.c); above {SPLIT_NS} ns they do not share a last-level cache (on a VM: the "
                     f"host has placed them apart, which may change within a round): "
                     + ", ".join(f"{r['model']} {r['threads']} threads {r['split']} of {len(r['lat'])} rounds apart "
                                 f"({min(r['lat']):.0f}-{max(r['lat']):.0f} ns)" for r in lat_rows) + ".")
    if trows:
        lines.append("\nPyTorch on the same models, inputs and threads (eager in `torch.inference_mode`; "
                     "AOTInductor: `torch.export` then `aoti_compile_and_package`, loaded with `aoti_load_package`):\n")
        lines.append("| model | threads | PyTorch eager ms | AOTInductor ms | AOTInductor | Cuvil ms |")
        lines.append("|---|---|---|---|---|---|")
        for r in trows:
            lines.append(f"| {r['model']} | {r['threads']} | {r['eager_ms']} | {r['aoti_ms'] if r['aoti_ms'] else '-'} | "
                         f"{r['aoti_note']} | {r['cuvil_ms']} |")
    if xrows:
        lines += transformer_report(xrows, args)
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        gemm = build / "bin" / "cuvil-bench-gemm"
        if gemm.exists():
            out = subprocess.run([str(gemm)], check=True, capture_output=True, text=True).stdout
            report += ("\nGEMM microkernels (`build/bin/cuvil-bench-gemm`, one thread; `ukernel`: the microkernel "
                       "alone on L1-resident panels, `square`/`layer`: the whole driver):\n\n" + out)
        # the report goes first, under the file's title and preamble (as bench/suite.py's do); the
        # sections below it stay
        path = Path(args.write)
        old = path.read_text() if path.exists() else "# Cuvil vs ONNX Runtime — measured results\n"
        cut = old.index("\n## ") + 1 if "\n## " in old else len(old)
        path.write_text(old[:cut] + report + "\n" + old[cut:])
    return 0


def _torch_version():
    try:
        import torch
        return torch.__version__
    except ImportError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
