#!/usr/bin/env python3
"""The lowering's conv choices against every path it could have taken, shape by shape.

For each shape of the sweep (1-D and 2-D convolutions: large kernels and strides, one input
channel, groups, depthwise with and without a channel multiplier, and the layers of the
benchmark models), and for each x86-64 target this machine runs:
  - the path cuvil-compile chooses for a model of that one conv (--emit ir, the lowering's note);
  - the time of every path the runtime has for the shape (build/bin/cuvil-bench-conv, or
    cuvil-bench-conv-avx2 for AVX2 code on an AVX-512 machine): median of runs for ~0.3 s
    each, one thread, each path checked against the scalar reference first;
  - ONNX Runtime's time for the same one-conv model (one thread, median), for scale.
It prints a Markdown table with the chosen path's time over the best path's ("chosen/best"),
and exits 1 when a shape's chosen path is more than --limit (1.5) times the best. Not a test:
timings are noisy; rerun a shape that misses by a little.

    bench/conv_sweep.py [--build build] [--targets x86_64-avx512,x86_64-avx2] [--only NAME]
                        [--ms 300] [--write bench/RESULTS.md]
                        [--suite all | --suite resnet18,mobilenet_v2,...]

--suite takes instead every distinct Conv of the benchmark suite's vision models
(tools/models/build_suite.py; the shapes from ONNX's shape inference): the lowering check of
issue 34, each conv's chosen path against the fastest path Cuvil has for it, alone (--limit
1.2 there). A conv alone is not a conv in its model: there its input may be cold, its layout
channels last, or its block fused (those rows say what the model runs).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))

# name: (dims, N, C, spatial in, M, kernel, stride, pads (begin..., end...), dilation, group)
# 1-D shapes have one spatial dim (an ONNX Conv over [N, C, W]).
SHAPES = {
    # learned spectrogram front ends (one input channel, long kernels, large strides)
    "spectrogram 1->257 k512 s160, 1 s": (1, 1, 1, [16000], 257, [512], [160], [0, 0], [1], 1),
    "spectrogram 1->257 k512 s160, 10 s": (1, 1, 1, [160000], 257, [512], [160], [0, 0], [1], 1),
    "spectrogram 2-D 1->257 1x400 s1x160": (2, 1, 1, [1, 16000], 257, [1, 400], [1, 160], [0, 0, 0, 0], [1, 1], 1),
    # wav2vec2's feature encoder: first conv (1 -> 512, k10 s5), a later one (512 -> 512, k3 s2)
    "wav2vec2 conv0 1->512 k10 s5": (1, 1, 1, [16000], 512, [10], [5], [0, 0], [1], 1),
    "wav2vec2 conv1 512->512 k3 s2": (1, 1, 512, [3199], 512, [3], [2], [0, 0], [1], 1),
    # 1-D: a TCN layer, a conformer's depthwise conv (k31), a grouped conv with a multiplier
    "1-D 64->64 k3 s1 p1": (1, 1, 64, [1000], 64, [3], [1], [1, 1], [1], 1),
    "1-D depthwise 256 k31 p15": (1, 1, 256, [500], 256, [31], [1], [15, 15], [1], 256),
    "1-D dilated 64->64 k3 d4 p4": (1, 1, 64, [2000], 64, [3], [1], [4, 4], [4], 1),
    # 2-D, one input channel
    "2-D 1->32 3x3 s1 p1, 28x28": (2, 1, 1, [28, 28], 32, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    "2-D 1->64 7x7 s2 p3, 112x112": (2, 1, 1, [112, 112], 64, [7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1),
    "2-D 1->1 5x5 s1 p2, 64x64": (2, 1, 1, [64, 64], 1, [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 1),
    # 2-D large kernels and strides
    "stem 3->64 7x7 s2 p3, 224": (2, 1, 3, [224, 224], 64, [7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1),
    "AlexNet 3->64 11x11 s4 p2, 224": (2, 1, 3, [224, 224], 64, [11, 11], [4, 4], [2, 2, 2, 2], [1, 1], 1),
    "patchify 3->96 4x4 s4, 224": (2, 1, 3, [224, 224], 96, [4, 4], [4, 4], [0, 0, 0, 0], [1, 1], 1),
    "ViT patch 3->192 16x16 s16, 224": (2, 1, 3, [224, 224], 192, [16, 16], [16, 16], [0, 0, 0, 0], [1, 1], 1),
    # 2-D ResNet / MobileNet layers
    "3x3 64->64 s1, 56x56": (2, 1, 64, [56, 56], 64, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    "3x3 128->128 s2, 56x56": (2, 1, 128, [56, 56], 128, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1),
    "3x3 512->512 s1, 7x7": (2, 1, 512, [7, 7], 512, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
    "1x1 256->64, 56x56": (2, 1, 256, [56, 56], 64, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),
    "1x1 512->1024 s2, 28x28": (2, 1, 512, [28, 28], 1024, [1, 1], [2, 2], [0, 0, 0, 0], [1, 1], 1),
    "depthwise 144 3x3 s2, 56x56": (2, 1, 144, [56, 56], 144, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 144),
    "depthwise 96 7x7 p3, 56x56": (2, 1, 96, [56, 56], 96, [7, 7], [1, 1], [3, 3, 3, 3], [1, 1], 96),
    "depthwise 240 5x5 s2, 28x28": (2, 1, 240, [28, 28], 240, [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], 240),
    # groups
    "grouped 128->128 g32 3x3, 28x28": (2, 1, 128, [28, 28], 128, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32),
    "grouped 64->64 g4 3x3 s2, 56x56": (2, 1, 64, [56, 56], 64, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 4),
    "depthwise x2 32->64 3x3, 56x56": (2, 1, 32, [56, 56], 64, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32),
    "depthwise x16 8->128 3x3, 28x28": (2, 1, 8, [28, 28], 128, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 8),
    "depthwise x64 4->256 1x400 s160": (2, 1, 4, [1, 16000], 256, [1, 400], [1, 160], [0, 0, 0, 0], [1, 1], 4),
    # at the rule's edges: few outputs per input channel with a gathering stride
    "depthwise 64 7x7 s2 p3, 56x56": (2, 1, 64, [56, 56], 64, [7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 64),
    "depthwise x4 16->64 1x9 s4": (2, 1, 16, [1, 4000], 64, [1, 9], [1, 4], [0, 0, 0, 0], [1, 1], 16),
    "1->4 k400 s160": (1, 1, 1, [16000], 4, [400], [160], [0, 0], [1], 1),
    "1->2 k9 s3": (1, 1, 1, [16000], 2, [9], [3], [0, 0], [1], 1),
}

# the lowering's note (src/lower/conv.c) -> the bench's path name
NOTES = [
    ("direct depthwise", "depthwise"),
    ("grouped direct", "grouped"),
    ("winograd F(2x2,3x3), tiles as rows", "winograd2_t"),
    ("winograd F(4x4,3x3), tiles as rows", "winograd_t"),
    ("winograd F(4x4,3x3)", "winograd"),
    ("channels-last", "direct_t"),
    ("pixels as rows", "gemm_t"),
    ("direct", "direct"),
    ("gemm", "gemm"),
]


def conv_model(path, spec, seed=0):
    import onnx
    from onnx import TensorProto, helper

    nd, n, c, sp, m, k, s, pads, dil, group = spec
    rng = np.random.default_rng(seed)
    w = onnx.numpy_helper.from_array(rng.standard_normal([m, c // group] + k).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal([m]).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=s, pads=pads, dilations=dil, group=group)
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c] + sp)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w, b])
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    onnx.save(mdl, path)


def suite_shapes(names):
    """{"model: conv description": spec} for every distinct Conv (by shape and attributes) of the
    suite's models `names`, in SHAPES' form; convs whose input dims are not all known, or with
    auto_pad, are left out (and counted in the returned list of skipped)."""
    import onnx
    from onnx import shape_inference

    sys.path.insert(0, str(REPO / "tools" / "models"))
    import build_suite

    shapes, seen, skipped = {}, set(), []
    for name in names:
        m = shape_inference.infer_shapes(onnx.load(str(build_suite.get_model(name))))
        g = m.graph
        dims = {vi.name: [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
                for vi in list(g.value_info) + list(g.input) + list(g.output)}
        inits = {t.name: list(t.dims) for t in g.initializer}
        for node in g.node:
            if node.op_type != "Conv":
                continue
            x, w = dims.get(node.input[0]), inits.get(node.input[1])
            at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if not x or not w or min(x) <= 0 or at.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                skipped.append(f"{name}: {node.name}")
                continue
            nsp = len(x) - 2
            spec = (nsp, x[0], x[1], x[2:], w[0], w[2:], list(at.get("strides", [1] * nsp)),
                    list(at.get("pads", [0] * 2 * nsp)), list(at.get("dilations", [1] * nsp)), int(at.get("group", 1)))
            key = repr(spec)
            if key in seen:
                continue
            seen.add(key)
            k, st = "x".join(map(str, spec[5])), spec[6][0]
            grp = f" g{spec[9]}" if spec[9] > 1 else ""
            shapes[f"{name}: {x[1]}->{w[0]} {k} s{st}{grp}, {'x'.join(map(str, x[2:]))}"] = spec
    return shapes, skipped


def chosen_path(build, model, target):
    r = subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(model), "--output", "-", "--emit", "ir",
                        "--target", target], capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise RuntimeError(r.stderr)
    line = next(ln for ln in r.stdout.splitlines() if " = conv " in ln)
    note = line.split("#")[-1]
    for key, name in NOTES:
        if key in note:
            return name, note.strip()
    return "?", note.strip()


def bench_args(spec):
    nd, n, c, sp, m, k, s, pads, dil, group = spec
    if nd == 1:
        sp, k, s, dil, pads = [1] + sp, [1] + k, [1] + s, [1] + dil, [0, pads[0], 0, pads[1]]
    return [n, c, sp[0], sp[1], m, k[0], k[1], s[0], s[1], pads[0], pads[1], pads[2], pads[3], dil[0], dil[1], group]


def ort_ms(model, spec, ms):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    nd, n, c, sp, *_ = spec
    x = np.random.default_rng(1).standard_normal([n, c] + sp).astype(np.float32)
    t, start = [], time.perf_counter()
    while len(t) < 5 or (time.perf_counter() - start < ms * 1e-3 and len(t) < 500):
        t0 = time.perf_counter()
        sess.run(None, {"x": x})
        t.append(time.perf_counter() - t0)
    return float(np.median(t)) * 1e3


def main():
    import cuvil_testlib as tl

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--targets", default=None, help="comma-separated (default: every x86-64 target this machine runs)")
    ap.add_argument("--only", default=None, help="shapes whose name contains this")
    ap.add_argument("--ms", type=int, default=300, help="time per path, ms")
    ap.add_argument("--limit", type=float, default=1.5)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--write", default=None, help="append the table to this Markdown file")
    ap.add_argument("--suite", default=None, help="the suite's models' convs instead: 'all' or a comma-separated list")
    a = ap.parse_args()
    shapes, skipped = SHAPES, []
    if a.suite:
        sys.path.insert(0, str(REPO / "tools" / "models"))
        import build_suite
        names = list(build_suite.SUITE) if a.suite == "all" else a.suite.split(",")
        shapes, skipped = suite_shapes(names)
        print(f"# {len(shapes)} distinct convs from {len(names)} models ({len(skipped)} left out: {skipped[:5]})",
              file=sys.stderr, flush=True)
    build = Path(a.build)
    targets = a.targets.split(",") if a.targets else [t for t in ("x86_64-avx512", "x86_64-avx2") if tl.host_runs(t)]
    host = tl.host_target()
    lines = [f"| target | shape | chosen | chosen ms | best path | best ms | chosen/best | other paths (ms) |"
             + ("" if a.no_ort else " ONNX Runtime ms |"),
             "|---|---|---|---|---|---|---|---|" + ("" if a.no_ort else "---|")]
    worst, misses = 0.0, []
    with tempfile.TemporaryDirectory(prefix="cuvil-conv-sweep-") as td:
        for i, (name, spec) in enumerate(shapes.items()):
            if a.only and a.only not in name:
                continue
            model = Path(td) / f"conv{i}.onnx"
            conv_model(model, spec)
            ort = None if a.no_ort else ort_ms(model, spec, a.ms)
            for t in targets:
                exe = build / "bin" / ("cuvil-bench-conv" if t == host else "cuvil-bench-conv-" + t.split("-")[-1])
                choice, note = chosen_path(build, model, t)
                r = subprocess.run([str(exe)] + [str(v) for v in bench_args(spec)] + [str(a.ms)], capture_output=True,
                                   text=True, timeout=600)
                if r.returncode:
                    raise RuntimeError(f"{exe}: {r.stderr}")
                paths = json.loads(r.stdout)["paths"]
                bad = {p: v for p, v in paths.items() if isinstance(v, str)}
                if bad:
                    raise RuntimeError(f"{name} ({t}): a path gives a wrong answer: {bad}")
                best = min(paths, key=paths.get)
                got = paths.get(choice)
                ratio = got / paths[best] if got else float("nan")
                if not got or ratio > a.limit:
                    misses.append(f"{name} ({t}): chose {choice} ({got} ms), best {best} ({paths[best]:.3f} ms)")
                worst = max(worst, ratio if got else float("inf"))
                others = ", ".join(f"{p} {v:.3f}" for p, v in paths.items() if p != choice)
                lines.append(f"| {t} | {name} | {choice} | {got if got is None else f'{got:.3f}'} | {best} | "
                             f"{paths[best]:.3f} | {ratio:.2f} | {others or '-'} |"
                             + ("" if ort is None else f" {ort:.3f} |"))
                print(lines[-1], flush=True)
    text = "\n".join(lines)
    print()
    print(text)
    print(f"\nworst chosen/best: {worst:.2f} (limit {a.limit})")
    for m in misses:
        print("  over the limit:", m)
    if a.write:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
        cmd = "bench/conv_sweep.py " + " ".join(sys.argv[1:])
        with open(a.write, "a") as f:
            f.write(f"\n## Conv sweep: the lowering's choice against every path ({time.strftime('%Y-%m-%d')}, {cpu}, "
                    f"one thread)\n\n`{cmd}`\n\n{text}\n\nWorst chosen/best: {worst:.2f} (limit {a.limit}).\n")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
