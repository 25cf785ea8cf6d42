#!/usr/bin/env python3
"""4-bit weights (com.microsoft MatMulNBits) against ONNX Runtime for 1 to 128 rows.

A float32 MatMul of K x N seeded random weights quantized by ONNX Runtime's MatMulNBitsQuantizer
(4 bits, block 32, asymmetric), compiled once per x86-64 target with its rows symbolic
(`--dim m=1:512`); for each row count and thread count, Cuvil (`cuvil-run --bench 20`, its median)
and ONNX Runtime (20 timed runs in this process, their median) in alternating turns, ROUNDS
rounds; the table gives the median of each one's turn medians.

    $VENV/bin/python bench/q4_bench.py [--rows 1,16,24,128] [--threads 1,2] [--rounds 5]
        [--targets x86_64-avx512,x86_64-avx2]
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
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]


def build(path, K, N):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    w = np.random.default_rng(0).normal(0, 0.02, (K, N)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", N])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    q = MatMulNBitsQuantizer(m, bits=4, block_size=32, is_symmetric=False)
    q.process()
    q.model.save_model_to_file(str(path), False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,16,24,128")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--targets", default="x86_64-avx512,x86_64-avx2", help="those of these this machine runs")
    ap.add_argument("--size", type=int, default=4096, help="K = N")
    ap.add_argument("--build", default=os.environ.get("CUVIL_BUILD", str(REPO / "build")))
    args = ap.parse_args(argv)
    import onnxruntime as ort
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import cuvil_testlib as tl
    build_dir = Path(args.build)
    print("| target | rows | threads | Cuvil ms | ORT ms | ratio |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="cuvil-q4-") as tds:
        td = Path(tds)
        model = td / "q4.onnx"
        build(model, args.size, args.size)
        rng = np.random.default_rng(5)
        xs = {}
        for M in (int(v) for v in args.rows.split(",")):
            xs[M] = td / f"x{M}.npy"
            np.save(xs[M], rng.standard_normal((M, args.size)).astype(np.float32))
        for target in (t for t in args.targets.split(",") if tl.host_runs(t)):
            so = td / f"q4-{target}.so"
            subprocess.run([str(build_dir / "bin" / "cuvil-compile"), "--model", str(model), "--output", str(so),
                            "--dim", "m=1:512", "--target", target], check=True)
            for th in (int(v) for v in args.threads.split(",")):
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = th
                sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
                for M, xf in xs.items():
                    x = np.load(xf)
                    for _ in range(3):
                        sess.run(None, {"x": x})
                    cu, ot = [], []
                    for _ in range(args.rounds):
                        ts = []
                        for _ in range(20):
                            t = time.perf_counter()
                            sess.run(None, {"x": x})
                            ts.append((time.perf_counter() - t) * 1e3)
                        ot.append(statistics.median(ts))
                        time.sleep(0.2)
                        r = subprocess.run([str(build_dir / "bin" / "cuvil-run"), str(so), "--input", f"x={xf}", "--bench", "20",
                                            "--threads", str(th), "--json"], check=True, capture_output=True, text=True)
                        cu.append(json.loads(r.stdout.strip().splitlines()[-1])["median_ms"])
                        time.sleep(0.2)
                    c, o = statistics.median(cu), statistics.median(ot)
                    print(f"| {target} | {M} | {th} | {c:.2f} | {o:.2f} | {c / o:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
