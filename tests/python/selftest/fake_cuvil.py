#!/usr/bin/env python3
"""A stand-in for cuvil-compile and cuvil-run built on ONNX Runtime, to check the TEST HARNESS
(not Cuvil): it follows the CLI contract the tests are written to, so that the Python tests can
be run end to end before, or independently of, the real binaries.

    python tests/python/selftest/fake_cuvil.py --make-build /tmp/fakebuild
    CUVIL_BUILD=/tmp/fakebuild python -m pytest -q tests/python

The "compiled model" is a real shared library (built with cc) that exports cuvil_model_entry
and <prefix>_model, and carries the ONNX file (dims fixed) as data; the fake cuvil-run loads it
with ctypes and runs that ONNX file in ONNX Runtime. --make-build writes the two wrapper
scripts (BUILD/bin/cuvil-compile, BUILD/bin/cuvil-run).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUPPORTED = set("""Conv ConvTranspose BatchNormalization Relu LeakyRelu PRelu Clip Sigmoid
HardSigmoid HardSwish Tanh Add Sub Mul Div Pow MaxPool AveragePool GlobalAveragePool
GlobalMaxPool Flatten Reshape Transpose Concat Split Slice Squeeze Unsqueeze Gemm MatMul Softmax
Identity Dropout Constant Pad ReduceMean ReduceMax Resize Shape Gather Cast ConstantOfShape
Floor Expand""".split())


def die(msg: str, code: int = 1):
    print(f"cuvil: error: {msg}", file=sys.stderr)
    sys.exit(code)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        die(message, 2)


# --------------------------------------------------------------------------------------------
# cuvil-compile
# --------------------------------------------------------------------------------------------

C_TEMPLATE = r"""
#include <stdint.h>
#include <stddef.h>
typedef struct { uint32_t abi_version; const char *name; int n_inputs; int n_outputs; } desc_t;
__asm__(".section .rodata\n.global fake_onnx_data\n.type fake_onnx_data,@object\n"
        ".balign 16\nfake_onnx_data:\n.incbin \"%(onnx)s\"\n"
        ".global fake_onnx_end\nfake_onnx_end:\n.previous\n");
static const desc_t desc = {1, "%(name)s", %(nin)d, %(nout)d};
const desc_t *%(name)s_model(void) { return &desc; }
const desc_t *cuvil_model_entry(void) { return &desc; }
int %(name)s_create(void) { return 0; }
int %(name)s_run(void) { return 0; }
"""

MAKEFILE = """libmodel.so: model.c model.onnx
\tcc -shared -fPIC -O1 -o $@ model.c
"""


def _load_checked(path: Path):
    import onnx

    if not path.exists():
        die(f"{path}: no such file")
    if path.is_dir():
        die(f"{path}: is a directory, not an ONNX model")
    try:
        m = onnx.load_model_from_string(path.read_bytes())
    except Exception as e:  # noqa: BLE001
        die(f"{path}: not a valid ONNX model (protobuf parse failed: {str(e)[:80]})")
    if not m.graph.node or not m.graph.output:
        die(f"{path}: the ONNX graph is empty (no nodes or no outputs)")
    base = path.parent.resolve()
    for t in list(m.graph.initializer):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        ed = {e.key: e.value for e in t.external_data}
        loc = ed.get("location", "")
        if os.path.isabs(loc) or ".." in Path(loc).parts:
            die(f"initializer '{t.name}': external data location '{loc}' is absolute or "
                f"contains '..'; it must stay inside the model's folder")
        real = (base / loc).resolve()
        if base not in real.parents:
            die(f"initializer '{t.name}': external data location '{loc}' resolves outside "
                f"the model's folder")
        if not real.is_file():
            die(f"initializer '{t.name}': external data file '{loc}' not found")
        off, length = int(ed.get("offset", 0)), int(ed.get("length", -1))
        if length >= 0 and off + length > real.stat().st_size:
            die(f"initializer '{t.name}': external data file '{loc}' is too short")
    onnx.load_external_data_for_model(m, str(base))
    opsets = {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
    bad = [f"node '{n.name}': {(n.domain or 'ai.onnx')}::{n.op_type} "
           f"(opset {opsets.get(n.domain or 'ai.onnx', '?')})"
           for n in m.graph.node if n.domain not in ("", "ai.onnx") or n.op_type not in SUPPORTED]
    if bad:
        die(f"{len(bad)} unsupported op(s):\n  " + "\n  ".join(bad))
    return m


def _fix_dims(m, dims: dict):
    """Fixes every symbolic dim: to --dim NAME=N, else 1 (as cuvil-compile does)."""
    inits = {t.name for t in m.graph.initializer}
    vis = [vi for vi in list(m.graph.input) + list(m.graph.output) if vi.name not in inits]
    known = {d.dim_param for vi in vis for d in vi.type.tensor_type.shape.dim if d.dim_param}
    for name in dims:
        if name not in known:
            die(f"--dim {name}: the model has no symbolic dim named '{name}'")
    for vi in vis:
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param:
                name = d.dim_param
                d.dim_value = dims.get(name, 1)   # clears dim_param (a oneof)
                m.metadata_props.add(key=f"dimname:{vi.name}:{k}", value=name)


def compile_main(argv):
    import onnx

    ap = Parser(prog="cuvil-compile")
    ap.add_argument("--model", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--emit", default="so", choices=["so", "c", "ir", "dot"])
    ap.add_argument("--target", default="x86_64-avx2", choices=["x86_64-avx2", "generic"])
    ap.add_argument("--opt-level", type=int, default=2, choices=[0, 1, 2, 3])
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--name", default="model")
    a = ap.parse_args(argv)
    dims = {}
    for d in a.dim:
        k, eq, v = d.partition("=")
        if not eq or not v.lstrip("-").isdigit() or int(v) < 1:
            die(f"--dim {d}: expected NAME=N with N >= 1")
        dims[k] = int(v)
    model_path = Path(a.model)
    m = _load_checked(model_path)
    _fix_dims(m, dims)
    m.metadata_props.add(key="sha256", value=hashlib.sha256(model_path.read_bytes()).hexdigest())
    out = a.output
    if a.emit in ("ir", "dot"):
        if a.emit == "ir":
            text = "".join(f"%{n.output[0]} = {n.op_type}({', '.join(n.input)})\n"
                           for n in m.graph.node)
        else:
            text = "digraph model {\n" + "".join(
                f'  "{i}" -> "{n.output[0]}" [label="{n.op_type}"];\n'
                for n in m.graph.node for i in n.input if i) + "}\n"
        if out == "-":
            sys.stdout.write(text)
        else:
            if not Path(out).parent.is_dir():
                die(f"{out}: folder does not exist")
            Path(out).write_text(text)
        return 0
    outp = Path(out)
    if not outp.parent.is_dir():
        die(f"{out}: folder does not exist")
    nin = len([i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}])
    src = {"name": a.name, "nin": nin, "nout": len(m.graph.output)}
    if a.emit == "c":
        outp.mkdir(exist_ok=True)
        onnx.save(m, outp / "model.onnx")
        (outp / "model.c").write_text(C_TEMPLATE % dict(src, onnx="model.onnx"))
        (outp / "Makefile").write_text(MAKEFILE)
        return 0
    with tempfile.TemporaryDirectory() as td:
        onnx.save(m, Path(td) / "model.onnx")
        (Path(td) / "model.c").write_text(C_TEMPLATE % dict(src, onnx="model.onnx"))
        tmp_so = Path(td) / "model.so"
        r = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_so), "model.c"], cwd=td,
                           capture_output=True, text=True)
        if r.returncode != 0:
            die(f"the C compiler failed: {r.stderr.strip()[:300]}")
        outp.write_bytes(tmp_so.read_bytes())
    outp.with_suffix(".h").write_text(
        f"#include \"cuvil/cuvil_model.h\"\nconst cuvil_model_desc *{a.name}_model(void);\n"
        f"cuvil_status {a.name}_create(const cuvil_model_options *, cuvil_model **);\n"
        f"cuvil_status {a.name}_run(cuvil_model *, const void *const *, void *const *);\n")
    return 0


# --------------------------------------------------------------------------------------------
# cuvil-run
# --------------------------------------------------------------------------------------------

def _model_bytes(so: str) -> bytes:
    import ctypes

    if not os.path.exists(so):
        die(f"{so}: no such file")
    try:
        lib = ctypes.CDLL(os.path.abspath(so))
    except OSError as e:
        die(f"{so}: cannot load: {e}")
    if not hasattr(lib, "cuvil_model_entry") or not hasattr(lib, "fake_onnx_data"):
        die(f"{so}: not a Cuvil model (no cuvil_model_entry)")
    start = ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_onnx_data"))
    end = ctypes.addressof(ctypes.c_char.in_dll(lib, "fake_onnx_end"))
    return ctypes.string_at(start, end - start)


def _read_input(name: str, f: str):
    import numpy as np

    if not os.path.isfile(f):
        die(f"input '{name}': {f}: no such file")
    try:
        if f.endswith(".pb"):
            from onnx import TensorProto, numpy_helper

            t = TensorProto()
            t.ParseFromString(Path(f).read_bytes())
            return numpy_helper.to_array(t)
        a = np.load(f, allow_pickle=False)
        return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("=")))
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001
        die(f"input '{name}': {f}: unreadable or truncated npy/pb file ({str(e)[:80]})")


def run_main(argv):
    import numpy as np
    import onnx
    import onnxruntime as ort

    ap = Parser(prog="cuvil-run")
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--output-dir", default=".")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--info", action="store_true")
    a = ap.parse_args(argv)
    if a.threads < 1:
        die(f"--threads {a.threads}: must be >= 1")
    t0 = time.perf_counter()
    data = _model_bytes(a.model)
    m = onnx.load_model_from_string(data)
    inits = {t.name for t in m.graph.initializer}
    ins = [vi for vi in m.graph.input if vi.name not in inits]
    meta = {p.key: p.value for p in m.metadata_props}

    def desc(vi):
        dims = [str(d.dim_value) for d in vi.type.tensor_type.shape.dim]
        names = [f"{meta[f'dimname:{vi.name}:{k}']}={d.dim_value}"
                 for k, d in enumerate(vi.type.tensor_type.shape.dim)
                 if f"dimname:{vi.name}:{k}" in meta]
        return f"{vi.name}: float32 [{', '.join(dims)}]" + (f" ({', '.join(names)})"
                                                            if names else "")

    if a.info:
        print("inputs:\n  " + "\n  ".join(desc(v) for v in ins))
        print("outputs:\n  " + "\n  ".join(desc(v) for v in m.graph.output))
        print(f"model_sha256: {meta.get('sha256')}")
        return 0
    feeds = {}
    for spec in a.input:
        name, eq, f = spec.partition("=")
        if not eq:
            die(f"--input {spec}: expected NAME=FILE")
        want = next((v for v in ins if v.name == name), None)
        if want is None:
            die(f"no input named '{name}' (the model's inputs: "
                f"{', '.join(v.name for v in ins)})")
        if name in feeds:
            die(f"input '{name}' given twice")
        arr = _read_input(name, f)
        if arr.dtype != np.float32:
            die(f"input '{name}': dtype {arr.dtype}, the model wants float32")
        shape = [d.dim_value for d in want.type.tensor_type.shape.dim]
        if list(arr.shape) != shape:
            die(f"input '{name}': shape {list(arr.shape)}, the model wants {shape}")
        feeds[name] = arr
    missing = [v.name for v in ins if v.name not in feeds]
    if missing:
        die(f"missing input(s): {', '.join(missing)}")
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3
    names = [o.name for o in sess.get_outputs()]
    t1 = time.perf_counter()
    outs = sess.run(names, feeds)
    first_ms = (time.perf_counter() - t1) * 1e3
    if a.bench:
        ts = []
        for _ in range(a.bench):
            t = time.perf_counter()
            sess.run(names, feeds)
            ts.append((time.perf_counter() - t) * 1e3)
        ts.sort()
        r = {"median_ms": ts[len(ts) // 2], "p99_ms": ts[min(len(ts) - 1, int(len(ts) * .99))],
             "min_ms": ts[0], "load_ms": load_ms, "first_ms": first_ms,
             "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        print(json.dumps(r) if a.json else r)
        return 0
    od = Path(a.output_dir)
    od.mkdir(parents=True, exist_ok=True)
    for n, v in zip(names, outs):
        np.save(od / (n.replace("/", "_") + ".npy"), v)
    return 0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--tool":
        return {"cuvil-compile": compile_main, "cuvil-run": run_main}[sys.argv[2]](sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--make-build", type=Path, required=True,
                    help="write BUILD/bin/cuvil-compile and cuvil-run that run this script")
    a = ap.parse_args()
    b = a.make_build / "bin"
    b.mkdir(parents=True, exist_ok=True)
    for tool in ("cuvil-compile", "cuvil-run"):
        p = b / tool
        p.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "
                     f"--tool {tool} \"$@\"\n")
        p.chmod(0o755)
    print(a.make_build.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
