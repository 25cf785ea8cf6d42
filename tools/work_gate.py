#!/usr/bin/env python3
"""The work gate: instructions counted for one run of each of a fixed set of small models,
against the counts committed in tests/work_gate/baseline.json.

Wall-clock time on a shared two-core machine moves by 10-20% between runs; an instruction count
does not. Each case is an ONNX model this file builds (onnx.helper, seeded weights: the same
bytes on every machine), compiled with cuvil-compile for a named target, and run once by
cuvil-run on one thread under valgrind's callgrind, which counts the instructions executed
inside the model's run (cuvil_glue_run_shapes and what it calls: the kernels, not the loading
of the library or of the inputs). Valgrind presents the same CPU to the program on every host
(its own CPUID: AVX2, FMA, F16C, no AVX-512, no VNNI), so the runtime's choices of kernels are
the same on an AVX2 and an AVX-512 machine and the counts are too. Valgrind runs no AVX-512
code: the gate covers the x86_64-avx2 and generic builds; the AVX-512 kernels are covered by
their tests and by benchmarks, not by this gate.

    $VENV/bin/python tools/work_gate.py            # compare; exit 1 when a case grew > 3%
    $VENV/bin/python tools/work_gate.py --update   # rewrite the baseline (say why in the commit)

`make test` runs the comparison (tests/python/test_work_gate.py). A case more than 3% below its
baseline passes with a note: the baseline should then move down, in a commit that says why,
so that the slack does not hide a later regression.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "tests" / "work_gate" / "baseline.json"
TARGETS = ("x86_64-avx2", "generic")
TOLERANCE = 0.03


# ----- the cases ---------------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits, opset=17):
    from onnx import helper
    g = helper.make_graph(nodes, "gate", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _f(name, a):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def case_cnn(rng):
    """A 3x3 conv + Relu, a depthwise 3x3, a 1x1 projection with a residual, a max pool, a
    global pool and a Gemm: the CNN kernels (Winograd or im2col GEMM, depthwise, direct)."""
    from onnx import TensorProto, helper
    inits = [_f("k1", rng.normal(0, 0.2, (32, 16, 3, 3))), _f("b1", rng.normal(0, 0.1, 32)),
             _f("kd", rng.normal(0, 0.3, (32, 1, 3, 3))), _f("k2", rng.normal(0, 0.2, (32, 32, 1, 1))),
             _f("w", rng.normal(0, 0.1, (10, 32))), _f("b", rng.normal(0, 0.1, 10))]
    nodes = [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "kd"], ["d"], pads=[1, 1, 1, 1], group=32),
             helper.make_node("Relu", ["d"], ["dr"]),
             helper.make_node("Conv", ["dr", "k2"], ["c2"]), helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("MaxPool", ["a"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["mp"], ["gp"]), helper.make_node("Flatten", ["gp"], ["fl"]),
             helper.make_node("Gemm", ["fl", "w", "b"], ["y"], transB=1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 28, 28])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return m, {"x": rng.standard_normal((1, 16, 28, 28)).astype(np.float32)}


def case_transformer(rng):
    """One encoder block at 64 tokens, width 128, 4 heads: MatMuls with bias, attention
    (fused), layer norms, GELU (the Erf form, fused), residuals."""
    from onnx import TensorProto, helper
    d, s, h = 128, 64, 4
    inits = [_f("wq", rng.normal(0, 0.08, (d, d))), _f("wk", rng.normal(0, 0.08, (d, d))),
             _f("wv", rng.normal(0, 0.08, (d, d))), _f("wo", rng.normal(0, 0.08, (d, d))),
             _f("bq", rng.normal(0, 0.02, d)), _f("w1", rng.normal(0, 0.08, (d, 4 * d))),
             _f("b1", rng.normal(0, 0.02, 4 * d)), _f("w2", rng.normal(0, 0.05, (4 * d, d))),
             _f("g1", 1 + rng.normal(0, 0.1, d)), _f("be1", rng.normal(0, 0.1, d)),
             _f("g2", 1 + rng.normal(0, 0.1, d)), _f("be2", rng.normal(0, 0.1, d)),
             _f("scale", [1.0 / np.sqrt(d // h)]), _f("half", [0.5]), _f("one", [1.0]), _f("rsqrt2", [1 / np.sqrt(2)])]
    from onnx import numpy_helper
    inits += [numpy_helper.from_array(np.array([1, s, h, d // h], np.int64), "heads"),
              numpy_helper.from_array(np.array([1, s, d], np.int64), "merged")]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "wq"], ["q0"]), n("Add", ["q0", "bq"], ["q1"]), n("MatMul", ["x", "wk"], ["k0"]),
             n("MatMul", ["x", "wv"], ["v0"])]
    for t in ("q1", "k0", "v0"):
        nodes += [n("Reshape", [t, "heads"], [t + "r"]), n("Transpose", [t + "r"], [t + "t"], perm=[0, 2, 1, 3])]
    nodes += [n("Transpose", ["k0t"], ["kT"], perm=[0, 1, 3, 2]), n("MatMul", ["q1t", "kT"], ["sc0"]),
              n("Mul", ["sc0", "scale"], ["sc"]), n("Softmax", ["sc"], ["p"], axis=-1), n("MatMul", ["p", "v0t"], ["o0"]),
              n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]), n("Reshape", ["o1", "merged"], ["o2"]),
              n("MatMul", ["o2", "wo"], ["o3"]), n("Add", ["o3", "x"], ["r1"]),
              n("LayerNormalization", ["r1", "g1", "be1"], ["l1"], axis=-1),
              n("MatMul", ["l1", "w1"], ["f0"]), n("Add", ["f0", "b1"], ["f1"]),
              n("Mul", ["f1", "rsqrt2"], ["e0"]), n("Erf", ["e0"], ["e1"]), n("Add", ["e1", "one"], ["e2"]),
              n("Mul", ["f1", "e2"], ["e3"]), n("Mul", ["e3", "half"], ["gl"]),
              n("MatMul", ["gl", "w2"], ["f2"]), n("Add", ["f2", "l1"], ["r2"]),
              n("LayerNormalization", ["r2", "g2", "be2"], ["y"], axis=-1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])], inits)
    return m, {"x": rng.standard_normal((1, s, d)).astype(np.float32)}


def case_int8(rng):
    """QDQ int8 as ONNX Runtime's quantizer writes it: a conv and a MatMul between
    QuantizeLinear/DequantizeLinear pairs (one around the Reshape between them), per-channel
    weights (the integer kernels and their requantizing epilogues)."""
    from onnx import TensorProto, helper, numpy_helper
    wc = rng.integers(-127, 128, (32, 16, 3, 3)).astype(np.int8)
    wm = rng.integers(-127, 128, (32 * 14 * 14, 64)).astype(np.int8)
    inits = [numpy_helper.from_array(wc, "wc"), _f("wcs", rng.uniform(0.002, 0.01, 32)),
             numpy_helper.from_array(np.zeros(32, np.int8), "wcz"),
             numpy_helper.from_array(wm, "wm"), _f("wms", rng.uniform(0.0005, 0.002, 64)),
             numpy_helper.from_array(np.zeros(64, np.int8), "wmz"),
             _f("s", [0.02]), numpy_helper.from_array(np.array([0], np.uint8), "z"),
             _f("s2", [0.05]), numpy_helper.from_array(np.array([128], np.uint8), "z2"),
             numpy_helper.from_array(np.array([1, 32 * 14 * 14], np.int64), "flat")]
    n = helper.make_node
    nodes = [n("QuantizeLinear", ["x", "s", "z"], ["xq"]), n("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             n("DequantizeLinear", ["wc", "wcs", "wcz"], ["wcd"], axis=0),
             n("Conv", ["xd", "wcd"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]), n("Relu", ["c"], ["cr"]),
             n("QuantizeLinear", ["cr", "s", "z"], ["cq"]), n("DequantizeLinear", ["cq", "s", "z"], ["cd"]),
             n("Reshape", ["cd", "flat"], ["f"]), n("QuantizeLinear", ["f", "s", "z"], ["fq"]),
             n("DequantizeLinear", ["fq", "s", "z"], ["fd"]),
             n("DequantizeLinear", ["wm", "wms", "wmz"], ["wmd"], axis=1), n("MatMul", ["fd", "wmd"], ["m"]),
             n("QuantizeLinear", ["m", "s2", "z2"], ["mq"]), n("DequantizeLinear", ["mq", "s2", "z2"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 28, 28])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], inits, opset=13)
    return m, {"x": rng.uniform(0, 4, (1, 16, 28, 28)).astype(np.float32)}


def case_lstm(rng):
    """An LSTM over 16 steps, 64 inputs, 128 hidden (its GEMMs and gates), then a MatMul."""
    from onnx import TensorProto, helper
    hdim, idim, steps = 128, 64, 16
    inits = [_f("W", rng.normal(0, 0.1, (1, 4 * hdim, idim))), _f("R", rng.normal(0, 0.1, (1, 4 * hdim, hdim))),
             _f("B", rng.normal(0, 0.1, (1, 8 * hdim))), _f("w", rng.normal(0, 0.1, (hdim, 10)))]
    n = helper.make_node
    nodes = [n("LSTM", ["x", "W", "R", "B"], ["yseq"], hidden_size=hdim), n("MatMul", ["yseq", "w"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, idim])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 1, 10])], inits)
    return m, {"x": rng.standard_normal((steps, 1, idim)).astype(np.float32)}


CASES = {"cnn": case_cnn, "transformer": case_transformer, "int8": case_int8, "lstm": case_lstm}


# ----- counting ----------------------------------------------------------------------------------
def _clean_env():
    """The environment without CUVIL_* switches (kernel overrides would change the counts)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CUVIL_") or k == "CUVIL_BUILD"}


def count(build: Path, case: str, target: str, work: Path) -> int:
    """Instructions of one run of `case` compiled for `target` (callgrind, inside the run)."""
    import onnx
    rng = np.random.default_rng(hash_name(case))
    model, feed = CASES[case](rng)
    d = work / f"{case}-{target}"
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, d / "m.onnx")
    ins = []
    for k, v in feed.items():
        np.save(d / f"{k}.npy", v)
        ins += ["--input", f"{k}={d / (k + '.npy')}"]
    env = _clean_env()
    subprocess.run([str(build / "bin" / "cuvil-compile"), "--model", str(d / "m.onnx"), "--output", str(d / "m.so"),
                    "--target", target], check=True, capture_output=True, text=True, env=env, cwd=d)
    out = d / "callgrind.out"
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        "--toggle-collect=cuvil_glue_run_shapes", str(build / "bin" / "cuvil-run"), str(d / "m.so"),
                        "--threads", "1", "--output-dir", str(d / "out")] + ins,
                       capture_output=True, text=True, env=env, cwd=d)
    if p.returncode != 0:
        raise RuntimeError(f"{case} / {target}: valgrind cuvil-run failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
    if not m or int(m.group(1)) == 0:
        raise RuntimeError(f"{case} / {target}: callgrind counted nothing inside the run:\n{p.stderr[-2000:]}")
    return int(m.group(1))


def hash_name(s: str) -> int:
    """A seed from a case's name that does not change between processes (hash() does)."""
    return int.from_bytes(s.encode()[:8].ljust(8, b"\0"), "little")


def measure(build: Path, work: Path) -> dict:
    return {f"{c}/{t}": count(build, c, t, work) for c in CASES for t in TARGETS}


def compare(got: dict, base: dict) -> tuple[list, list]:
    """(failures, notes): cases over the baseline by more than TOLERANCE, or missing from it;
    cases under it by more than TOLERANCE."""
    fails, notes = [], []
    for k, v in got.items():
        b = base.get(k)
        if b is None:
            fails.append(f"{k}: {v:,} instructions, not in {BASELINE.relative_to(REPO)} (run tools/work_gate.py --update)")
        elif v > b * (1 + TOLERANCE):
            fails.append(f"{k}: {v:,} instructions, {v / b - 1:+.1%} over the baseline's {b:,}")
        elif v < b * (1 - TOLERANCE):
            notes.append(f"{k}: {v:,} instructions, {v / b - 1:+.1%} under the baseline's {b:,}: move the baseline "
                         f"down (tools/work_gate.py --update) in a commit that says why")
    return fails, notes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, default=Path(os.environ.get("CUVIL_BUILD", REPO / "build")))
    ap.add_argument("--update", action="store_true", help="write the counts as the new baseline")
    args = ap.parse_args(argv)
    if not shutil.which("valgrind"):
        sys.exit("work_gate: valgrind is not installed (tools/setup/setup.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="cuvil-work-gate-") as td:
        got = measure(args.build.resolve(), Path(td))
    base = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    for k, v in got.items():
        b = base.get(k)
        print(f"{k:28s} {v:>14,}" + (f"   baseline {b:>14,} ({v / b - 1:+.2%})" if b else "   (no baseline)"))
    if args.update:
        BASELINE.parent.mkdir(parents=True, exist_ok=True)
        BASELINE.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {BASELINE.relative_to(REPO)}")
        return 0
    fails, notes = compare(got, base)
    for s in notes:
        print("note:", s)
    for s in fails:
        print("FAIL:", s)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
