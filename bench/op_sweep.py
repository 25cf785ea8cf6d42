#!/usr/bin/env python3
"""One-node models, one per op and shape that exporters put on large tensors, Cuvil against ONNX
Runtime: the cliff finder for everything that is not a convolution or a GEMM.

Each case is a model of one node (or two where the op needs an input made first) on about a
million values; cuvil-compile builds it for --target, `cuvil-run --bench` times it, and ONNX
Runtime (one thread; with --ort-avx2-only on an AVX-512 machine, shown an AVX2-only CPU through
bench/cpuid_mask.c as bench/suite.py does) times the same file, in alternating turns. It prints a
Markdown table (medians of the turns' medians, ratio Cuvil / ONNX Runtime) and marks with `<<<`
the cases over --limit (1.5). Not a test: timings are noisy, and the cases are shapes a user's
model may have, not a model. bench/conv_sweep.py covers the convolutions.

    bench/op_sweep.py [--build build] [--target x86_64-avx2] [--ort-avx2-only] [--only NAME,...]
                      [--turns 3] [--iters 50] [--limit 1.5] [--write bench/RESULTS.md]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import bench  # noqa: E402

F, I64, I32, U8, I8, BOOL = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.UINT8,
                             TensorProto.INT8, TensorProto.BOOL)
NP2ONNX = {np.dtype(np.float32): F, np.dtype(np.int64): I64, np.dtype(np.int32): I32, np.dtype(np.uint8): U8,
           np.dtype(np.int8): I8, np.dtype(np.bool_): BOOL}

ORT_TIMER = r'''
import sys, time, statistics, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
f = dict(np.load(sys.argv[2]))
for _ in range(5): s.run(None, f)
t = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter(); s.run(None, f); t.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(t))
'''


def C(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def cases():
    """(name, nodes, {input: array}, [initializers], opset, [(output, elem type)])"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal([1, 64, 112, 112]).astype(np.float32)
    x2 = rng.standard_normal([1, 64, 112, 112]).astype(np.float32)
    xs = rng.standard_normal([1, 64, 56, 56]).astype(np.float32)
    u = rng.standard_normal([16, 28, 22, 22]).astype(np.float32)
    pos = np.abs(u) + 0.01
    ch = np.abs(rng.standard_normal([1, 64, 1, 1])).astype(np.float32) + 0.5
    row = np.abs(rng.standard_normal([112])).astype(np.float32) + 0.5
    n = helper.make_node
    out = []

    def add(name, nodes, feeds, inits=(), opset=17, outs=(("y", F),)):
        out.append((name, nodes, feeds, list(inits), opset, list(outs)))

    for op in ["Relu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt",
               "Abs", "Neg", "Floor", "Round", "Erf", "Softplus", "Softsign", "HardSigmoid", "HardSwish", "Reciprocal",
               "Sin", "Mish", "Sign"]:
        add(op, [n(op, ["a"], ["y"])], {"a": pos if op in ("Log", "Sqrt") else u}, opset=18)
    add("PRelu (per channel)", [n("PRelu", ["a", "s"], ["y"])], {"a": u},
        [C("s", (rng.standard_normal([1, 28, 1, 1]) * 0.2).astype(np.float32))])
    for op in ["Add", "Mul", "Div", "Max", "Pow"]:
        b = pos if op == "Pow" else u
        add(f"{op} (same shape)", [n(op, ["a", "b"], ["y"])], {"a": pos if op == "Pow" else u, "b": b})
        add(f"{op} (per channel)", [n(op, ["a", "c"], ["y"])], {"a": np.abs(x) if op == "Pow" else x}, [C("c", ch)])
        add(f"{op} (per column)", [n(op, ["a", "c"], ["y"])], {"a": np.abs(x) if op == "Pow" else x}, [C("c", row)])
    add("Where", [n("Where", ["c", "a", "b"], ["y"])], {"c": x > 0, "a": x, "b": x2})
    add("Equal + Cast", [n("Equal", ["a", "b"], ["m"]), n("Cast", ["m"], ["y"], to=F)],
        {"a": np.round(x), "b": np.round(x2)})
    add("Cast float32 -> int64", [n("Cast", ["a"], ["y"], to=I64)], {"a": x * 100}, outs=(("y", I64),))
    add("Cast int64 -> float32", [n("Cast", ["a"], ["y"], to=F)],
        {"a": rng.integers(-1000, 1000, [1, 64, 112, 112]).astype(np.int64)})
    add("Clip", [n("Clip", ["a", "lo", "hi"], ["y"])], {"a": x}, [C("lo", np.float32(-1)), C("hi", np.float32(1))])
    add("Softmax (last axis, 112)", [n("Softmax", ["a"], ["y"], axis=-1)], {"a": x})
    add("Softmax (channels)", [n("Softmax", ["a"], ["y"], axis=1)], {"a": x})
    add("LogSoftmax", [n("LogSoftmax", ["a"], ["y"], axis=-1)], {"a": x})
    add("ReduceMean (last)", [n("ReduceMean", ["a"], ["y"], axes=[-1])], {"a": x}, opset=13)
    add("ReduceSum (channels)", [n("ReduceSum", ["a", "ax"], ["y"])], {"a": x}, [C("ax", np.array([1], np.int64))],
        opset=13)
    add("ReduceMax (H, W)", [n("ReduceMax", ["a"], ["y"], axes=[2, 3])], {"a": x}, opset=13)
    add("ArgMax (channels)", [n("ArgMax", ["a"], ["y"], axis=1)], {"a": x}, outs=(("y", I64),))
    add("TopK (112-long rows, k 10)", [n("TopK", ["a", "k"], ["y", "i"], axis=-1)], {"a": x.reshape(64 * 112, 112)},
        [C("k", np.array([10], np.int64))], opset=11)
    add("Transpose (to NHWC)", [n("Transpose", ["a"], ["y"], perm=[0, 2, 3, 1])], {"a": x})
    add("Concat (channels)", [n("Concat", ["a", "b"], ["y"], axis=1)], {"a": x, "b": x2})
    add("Slice (every other W)", [n("Slice", ["a", "s", "e", "ax", "st"], ["y"])], {"a": x},
        [C("s", np.array([1])), C("e", np.array([111])), C("ax", np.array([3])), C("st", np.array([2]))])
    add("Pad (reflect)", [n("Pad", ["a", "p"], ["y"], mode="reflect")], {"a": x},
        [C("p", np.array([0, 0, 2, 2, 0, 0, 2, 2], np.int64))])
    add("Resize nearest 2x", [n("Resize", ["a", "", "sc"], ["y"], mode="nearest")], {"a": x},
        [C("sc", np.array([1, 1, 2, 2], np.float32))])
    add("Resize linear 2x", [n("Resize", ["a", "", "sc"], ["y"], mode="linear")], {"a": x},
        [C("sc", np.array([1, 1, 2, 2], np.float32))])
    add("MaxPool 3x3 s2", [n("MaxPool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
        {"a": x})
    add("AveragePool 3x3 s1 (pads not counted)",
        [n("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0)], {"a": x})
    add("AveragePool 2x2 s2", [n("AveragePool", ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {"a": x})
    add("GlobalAveragePool", [n("GlobalAveragePool", ["a"], ["y"])], {"a": x})
    add("InstanceNormalization", [n("InstanceNormalization", ["a", "s", "b"], ["y"])], {"a": x},
        [C("s", np.ones(64, np.float32)), C("b", np.zeros(64, np.float32))])
    add("LayerNormalization (rows of 112)", [n("LayerNormalization", ["a", "s", "b"], ["y"], axis=-1)], {"a": x},
        [C("s", np.ones(112, np.float32)), C("b", np.zeros(112, np.float32))])
    add("DepthToSpace", [n("DepthToSpace", ["a"], ["y"], blocksize=2)], {"a": x})
    add("SpaceToDepth", [n("SpaceToDepth", ["a"], ["y"], blocksize=2)], {"a": x})
    add("Tile", [n("Tile", ["a", "r"], ["y"])], {"a": x[:, :, :56]}, [C("r", np.array([1, 1, 2, 1], np.int64))])
    add("Expand (per channel)", [n("Expand", ["a", "s"], ["y"])], {"a": ch},
        [C("s", np.array([1, 64, 112, 112], np.int64))])
    add("Gather (rows of 768)", [n("Gather", ["w", "i"], ["y"])],
        {"i": rng.integers(0, 30000, [128]).astype(np.int64)}, [C("w", rng.standard_normal([30000, 768]).astype(np.float32))])
    add("GatherElements", [n("GatherElements", ["a", "i"], ["y"], axis=3)], {"a": xs},
        [C("i", rng.integers(0, 56, [1, 64, 56, 56]).astype(np.int64))])
    add("CumSum", [n("CumSum", ["a", "ax"], ["y"])], {"a": x}, [C("ax", np.array(3, np.int64))])
    add("Einsum bij,bjk->bik", [n("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")],
        {"a": x.reshape(64, 112, 112), "b": x2.reshape(64, 112, 112)})
    add("MatMul (batched)", [n("MatMul", ["a", "b"], ["y"])], {"a": x.reshape(64, 112, 112), "b": x2.reshape(64, 112, 112)})
    add("ConvTranspose 2x2 s2", [n("ConvTranspose", ["a", "w"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {"a": xs},
        [C("w", rng.standard_normal([64, 32, 2, 2]).astype(np.float32))])
    add("DequantizeLinear", [n("DequantizeLinear", ["a", "s", "z"], ["y"])],
        {"a": rng.integers(0, 255, [1, 64, 112, 112]).astype(np.uint8)}, [C("s", np.float32(0.02)), C("z", np.uint8(128))])
    add("QuantizeLinear", [n("QuantizeLinear", ["a", "s", "z"], ["y"])], {"a": x},
        [C("s", np.float32(0.02)), C("z", np.uint8(128))], outs=(("y", U8),))
    add("MatMulInteger 128x768x768", [n("MatMulInteger", ["a", "w", "az"], ["y"])],
        {"a": rng.integers(0, 255, [128, 768]).astype(np.uint8)},
        [C("w", rng.integers(-100, 100, [768, 768]).astype(np.int8)), C("az", np.uint8(128))], outs=(("y", I32),))
    xy = rng.random([1, 2000, 2]).astype(np.float32) * 600
    boxes = np.concatenate([xy, xy + rng.random([1, 2000, 2]).astype(np.float32) * 60 + 5], -1)
    add("NonMaxSuppression (80 classes x 2000 boxes)", [n("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"])],
        {"b": np.ascontiguousarray(boxes), "s": rng.random([1, 80, 2000]).astype(np.float32)},
        [C("m", np.array([100], np.int64)), C("i", np.array([0.5], np.float32)), C("t", np.array([0.3], np.float32))],
        outs=(("y", I64),))
    T, B, IN, H = 50, 1, 128, 256
    add("LSTM (50 steps, 128 -> 256)", [n("LSTM", ["a", "w", "r", "bb"], ["y"], hidden_size=H)],
        {"a": rng.standard_normal([T, B, IN]).astype(np.float32)},
        [C("w", (rng.standard_normal([1, 4 * H, IN]) * 0.1).astype(np.float32)),
         C("r", (rng.standard_normal([1, 4 * H, H]) * 0.1).astype(np.float32)), C("bb", np.zeros([1, 8 * H], np.float32))])
    add("GRU (50 steps, 128 -> 256)", [n("GRU", ["a", "w", "r", "bb"], ["y"], hidden_size=H)],
        {"a": rng.standard_normal([T, B, IN]).astype(np.float32)},
        [C("w", (rng.standard_normal([1, 3 * H, IN]) * 0.1).astype(np.float32)),
         C("r", (rng.standard_normal([1, 3 * H, H]) * 0.1).astype(np.float32)), C("bb", np.zeros([1, 6 * H], np.float32))])
    return out


def save(path, nodes, feeds, inits, opset, outs):
    vi = [helper.make_tensor_value_info(k, NP2ONNX[v.dtype], list(v.shape)) for k, v in feeds.items()]
    g = helper.make_graph(nodes, "op", vi, [helper.make_tensor_value_info(o, t, None) for o, t in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--target", default="x86_64-avx2")
    ap.add_argument("--ort-avx2-only", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated parts of case names")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--limit", type=float, default=1.5)
    ap.add_argument("--write", help="append the table to this Markdown file")
    a = ap.parse_args()
    build = Path(a.build)
    only = [s for s in a.only.split(",") if s]
    rows, over = [], 0
    with tempfile.TemporaryDirectory(prefix="cuvil-ops-") as tds:
        td = Path(tds)
        env = dict(os.environ)
        if a.ort_avx2_only:
            mask = bench.cpuid_mask(td)
            if not mask:
                ap.error("--ort-avx2-only needs an AVX-512 CPU with cpuid_fault (see /proc/cpuinfo)")
            env["LD_PRELOAD"] = str(mask)
        for i, (name, nodes, feeds, inits, opset, outs) in enumerate(cases()):
            if only and not any(s.lower() in name.lower() for s in only):
                continue
            path, so = td / f"op{i}.onnx", td / f"op{i}.so"
            save(path, nodes, feeds, inits, opset, outs)
            np.savez(td / f"op{i}.npz", **feeds)
            args = []
            for k, v in feeds.items():
                np.save(td / f"op{i}.{k}.npy", np.ascontiguousarray(v))
                args += ["--input", f"{k}={td / f'op{i}.{k}.npy'}"]
            r = subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(path), "--output", str(so),
                                "--target", a.target], capture_output=True, text=True)
            if r.returncode:
                rows.append(f"| {name} | - | - | refused: {r.stderr.strip().splitlines()[-1][:120]} |")
                print(rows[-1], flush=True)
                continue
            cs, os_ = [], []
            for _ in range(a.turns):
                r = subprocess.run([str(build / "bin" / "cuvil-run"), str(so), *args, "--bench", str(a.iters), "--json"],
                                   capture_output=True, text=True, check=True)
                cs.append(json.loads(r.stdout.strip().splitlines()[-1])["median_ms"])
                r = subprocess.run([sys.executable, "-c", ORT_TIMER, str(path), str(td / f"op{i}.npz"), str(a.iters)],
                                   capture_output=True, text=True, env=env, check=True)
                os_.append(float(r.stdout.strip().splitlines()[-1]))
            c, o = statistics.median(cs), statistics.median(os_)
            mark = " <<<" if c / o > a.limit else ""
            over += bool(mark)
            rows.append(f"| {name} | {c:.3f} | {o:.3f} | {c / o:.2f}{mark} |")
            print(rows[-1], flush=True)
    import onnxruntime
    head = (f"One-node models (`bench/op_sweep.py --target {a.target}{' --ort-avx2-only' if a.ort_avx2_only else ''}`), "
            f"{bench.cpu_model()}, one thread, ONNX Runtime {onnxruntime.__version__}"
            f"{' shown an AVX2-only CPU' if a.ort_avx2_only else ''}; {a.turns} alternating turns of {a.iters} runs, "
            f"medians. {over} over {a.limit}x.\n\n| case | Cuvil ms | ORT ms | Cuvil/ORT |\n|---|---|---|---|\n")
    table = head + "\n".join(rows) + "\n"
    print()
    print(table)
    if a.write:
        with open(a.write, "a") as f:
            f.write("\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
