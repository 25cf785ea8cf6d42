#!/usr/bin/env python3
"""ONNX's backend node tests through Cuvil: each case's model.onnx is compiled with
cuvil-compile, run by cuvil-run on every test_data_set_* (input_*.pb), and its outputs are
compared with the case's expected output_*.pb (rtol 1e-3, atol 1e-5, NaN equal to NaN; the
tolerances of ONNX's own backend runner).

    $CUVIL_VENV/bin/python tools/onnx_conformance.py [--data DIR] [--build BUILD] [-j N]
                                                     [--filter SUBSTRING] [--json OUT]

DIR defaults to Debian's libonnx-testdata (1.12: 932 node cases, 1,072 models in all with the
simple/pytorch/real folders). Prints one line per case that is not a pass, then the totals:
pass, outdated (differs from the case's data, but ONNX's current reference implementation
computes what Cuvil did), as-ort (differs from the data and the reference, but ONNX Runtime
computes what Cuvil did: where the two disagree Cuvil follows ONNX Runtime), refused
(cuvil-compile or cuvil-run said no, cleanly), wrong (ran, wrong numbers), crashed (a signal or a sanitizer report). A developer tool, not a test: it reports where Cuvil
stands against the ONNX spec.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("/usr/share/libonnx-testdata/data")


def load_pb(path: Path, seq: bool = False, opt: bool = False):
    """(name, array), for a sequence (name, [arrays]), for an optional (name, value or None)."""
    if opt:
        o = onnx.OptionalProto()
        o.ParseFromString(path.read_bytes())
        if o.HasField("tensor_value"):
            return o.name, numpy_helper.to_array(o.tensor_value)
        if o.HasField("sequence_value"):
            return o.name, [numpy_helper.to_array(t) for t in o.sequence_value.tensor_values]
        return o.name, None
    if seq:
        s = onnx.SequenceProto()
        s.ParseFromString(path.read_bytes())
        return s.name, [numpy_helper.to_array(t) for t in s.tensor_values]
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t.name, numpy_helper.to_array(t)


def is_opt(vi) -> bool:
    return vi.type.HasField("optional_type")


def elem_type(vi):
    """The type of a value, or of an optional's element."""
    return vi.type.optional_type.elem_type if is_opt(vi) else vi.type


def is_seq(vi) -> bool:
    return elem_type(vi).HasField("sequence_type")


def load_val(path: Path, vi):
    return load_pb(path, is_seq(vi), is_opt(vi))[1]


def as_bf16_bits(a):
    """bfloat16 as raw uint16 bits: cuvil-run writes it as '<V2', ONNX 1.12's data as uint16,
    newer onnx as ml_dtypes.bfloat16."""
    return a.view(np.uint16) if a.dtype.itemsize == 2 and a.dtype.kind in "Vu" or a.dtype.name == "bfloat16" else None


def mismatch(name: str, got, want) -> str | None:
    if got is None or want is None:   # an optional without a value
        return None if got is None and want is None else f"{name}: got {'nothing' if got is None else 'a value'}, " \
                                                          f"want {'nothing' if want is None else 'a value'}"
    if isinstance(want, list) or isinstance(got, list):   # sequences: element by element
        if not isinstance(want, list) or not isinstance(got, list):
            return f"{name}: got a {'sequence' if isinstance(got, list) else 'tensor'}, want the other"
        if len(got) != len(want):
            return f"{name}: got {len(got)} elements, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = mismatch(f"{name}[{i}]", g, w)
            if why:
                return why
        return None
    """Why got is not want (rtol 1e-3, atol 1e-5, NaN == NaN), or None."""
    if got.dtype == np.dtype("V2"):   # bfloat16: compared as float32
        gb, wb = as_bf16_bits(got), as_bf16_bits(want)
        if wb is None:
            return f"{name}: got bfloat16{list(got.shape)}, want {want.dtype}{list(want.shape)}"
        got, want = ((b.astype(np.uint32) << 16).view(np.float32) for b in (gb, wb))
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "fc":
        ok = np.allclose(got, want, rtol=1e-3, atol=1e-5, equal_nan=True)
    else:
        ok = np.array_equal(got, want)
    if ok:
        return None
    err = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))) if got.size else 0
    return f"{name}: max abs error {err:.3g}"


def reference_agrees(model: Path, ins: list[Path], got: dict) -> bool:
    """Whether ONNX's own reference implementation (onnx.reference, the current spec) computes
    what Cuvil did: the case's expected data may predate a spec change (ONNX 1.12 truncates
    float to bfloat16; the spec now rounds to nearest even)."""
    try:
        from onnx.reference import ReferenceEvaluator
        ev = ReferenceEvaluator(str(model))
        vis = {i.name: i for i in onnx.load(str(model)).graph.input}
        feeds = {n: load_val(f, vis[n]) for n, f in zip(ev.input_names, ins)}
        outs = ev.run(None, feeds)
    except Exception:  # noqa: BLE001  (the reference cannot run it: no second opinion)
        return False
    return all(name in got and mismatch(name, got[name], np.asarray(ref)) is None for name, ref in zip(ev.output_names, outs))


def ort_agrees(model: Path, ins: list[Path], got: dict) -> bool:
    """Whether ONNX Runtime (the peer Cuvil is measured against) computes what Cuvil did where
    both differ from ONNX's data and its reference: a known disagreement between the two."""
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        vis = {i.name: i for i in onnx.load(str(model)).graph.input}
        feeds = {i.name: load_val(f, vis[i.name]) for i, f in zip(sess.get_inputs(), ins)}
        outs = sess.run(None, feeds)
    except Exception:  # noqa: BLE001  (ONNX Runtime cannot run it: no second opinion)
        return False
    return all(o.name in got and mismatch(o.name, got[o.name], np.asarray(r)) is None
               for o, r in zip(sess.get_outputs(), outs))


def run_case(case: Path, build: Path, work: Path) -> tuple[str, str]:
    """(status, detail) for one case folder."""
    model = case / "model.onnx"
    sets = sorted(p for p in case.glob("test_data_set_*") if p.is_dir())
    if not model.is_file() or not sets:
        return "skipped", "no model or no data"
    try:
        m = onnx.load(str(model), load_external_data=False)
    except Exception as e:  # noqa: BLE001
        return "refused", f"onnx cannot load it: {e}"
    init = {i.name for i in m.graph.initializer}
    inputs = [i.name for i in m.graph.input if i.name not in init]
    outputs = [o.name for o in m.graph.output]
    out_vi = {o.name: o for o in m.graph.output}
    in_vi = [i for i in m.graph.input if i.name not in init]
    work.mkdir(parents=True, exist_ok=True)
    so = work / "m.so"
    # bind symbolic input dims from the first data set's shapes
    dims = {}
    seq_args = []
    first = sorted(sets[0].glob("input_*.pb"))
    for vi, f in zip(in_vi, first):
        if is_seq(vi):   # a sequence: its count and its elements' largest dims over every data set
            counts, big = [], None
            for ds in sets:
                elems = load_val(ds / f.name, vi) or []
                counts.append(len(elems))
                for e in elems:
                    big = list(e.shape) if big is None else [max(a, b) for a, b in zip(big, e.shape)]
            seq_args += ["--seq", f"{vi.name}={min(counts)}:{max(counts)}" if min(counts) < max(counts)
                         else f"{vi.name}={counts[0]}"]
            if big:
                seq_args += ["--shape", f"{vi.name}=" + ",".join(str(max(b, 1)) for b in big)]
            continue
        arr = load_val(f, vi)
        for d, n in zip(elem_type(vi).tensor_type.shape.dim, arr.shape if arr is not None else ()):
            if d.dim_param:
                dims[d.dim_param] = n
    args = [str(build / "bin" / "cuvil-compile"), "--model", str(model), "--output", str(so)] + seq_args
    for k, v in dims.items():   # (a fixed --dim is positive: an empty dim as the range 0..1, run at 0)
        args += ["--dim", f"{k}={v}" if v else f"{k}=0:1"]
    p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=600, cwd=work)
    bound = re.search(r"give its largest value with --dim (\S+)=0:N", p.stderr) if p.returncode > 0 else None
    if bound and bound.group(1) in inputs:   # as a user would: the input's largest value in the data
        k = inputs.index(bound.group(1))
        vals = [load_val(sorted(ds.glob("input_*.pb"), key=lambda q: int(q.stem.split("_")[1]))[k], in_vi[k]) for ds in sets]
        if all(isinstance(v, np.ndarray) and v.size == 1 and v.dtype.kind in "iu" for v in vals):
            args += ["--dim", f"{bound.group(1)}=0:{max(int(v.reshape(-1)[0]) for v in vals)}"]
            p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=600, cwd=work)
    if p.returncode < 0 or "Sanitizer" in p.stderr:
        return "crashed", f"cuvil-compile: {p.stderr.strip()[:300]}"
    if p.returncode != 0:
        msg = " | ".join(line.strip() for line in p.stderr.strip().splitlines())
        return "refused", msg.split(": ", 1)[-1][:400] if msg else f"exit {p.returncode}"
    for ds in sets:
        ins = sorted(ds.glob("input_*.pb"), key=lambda q: int(q.stem.split("_")[1]))
        outs = sorted(ds.glob("output_*.pb"), key=lambda q: int(q.stem.split("_")[1]))
        od = work / ("out_" + ds.name)
        if od.exists():
            shutil.rmtree(od)
        args = [str(build / "bin" / "cuvil-run"), str(so), "--output-dir", str(od)]
        for vi, f in zip(in_vi, ins):
            if not (is_opt(vi) and load_val(f, vi) is None):   # (an optional without a value: left out)
                args += ["--input", f"{vi.name}={f}"]
        p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=600, cwd=work)
        if p.returncode < 0 or "Sanitizer" in p.stderr:
            return "crashed", f"cuvil-run: {p.stderr.strip()[:300]}"
        if p.returncode != 0:
            return "refused", p.stderr.strip()[:300]
        got_files = {f.name[:-4]: f for f in list(od.glob("*.npy")) + list(od.glob("*.npz"))}
        got = {}
        for name in outputs:
            stem = "".join("_" if c in "/\\" or ord(c) < 32 else c for c in name) or "output"
            if stem not in got_files:
                if is_opt(out_vi[name]):
                    got[name] = None   # (an optional output without a value: no file)
                    continue
                return "wrong", f"no output file for '{name}'"
            got[name] = np.load(got_files[stem], allow_pickle=False)
            if is_seq(out_vi[name]):
                got[name] = [got[name][f"arr_{i}"] for i in range(len(got[name].files))]
        for name, f in zip(outputs, outs):
            why = mismatch(name, got[name], load_val(f, out_vi[name]))
            if why:
                if reference_agrees(model, ins, got):
                    return "outdated", f"{why}; onnx.reference (the current spec) agrees with Cuvil"
                if ort_agrees(model, ins, got):
                    return "as-ort", f"{why}; ONNX Runtime computes what Cuvil did (it and the spec disagree)"
                return "wrong", why
    return "pass", ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--filter", default="")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--all-folders", action="store_true", help="not only node/: simple, pytorch-*, real")
    a = ap.parse_args()
    folders = ["node"] + (["simple", "pytorch-converted", "pytorch-operator", "real"] if a.all_folders else [])
    cases = [c for f in folders for c in sorted((a.data / f).glob("*")) if c.is_dir() and a.filter in c.name]
    results = {}
    with tempfile.TemporaryDirectory(prefix="cuvil-conformance-") as td, cf.ThreadPoolExecutor(a.j) as pool:
        futs = {pool.submit(run_case, c, a.build.resolve(), Path(td) / f"{c.parent.name}-{c.name}"): c for c in cases}
        for fut in cf.as_completed(futs):
            c = futs[fut]
            try:
                status, detail = fut.result()
            except subprocess.TimeoutExpired:
                status, detail = "crashed", "timed out"
            except Exception as e:  # noqa: BLE001  (data this script cannot read: not a tensor)
                status, detail = "skipped", f"unreadable test data: {type(e).__name__}: {str(e)[:120]}"
            results[f"{c.parent.name}/{c.name}"] = (status, detail)
            shutil.rmtree(Path(td) / f"{c.parent.name}-{c.name}", ignore_errors=True)
    counts = {}
    for name in sorted(results):
        status, detail = results[name]
        counts[status] = counts.get(status, 0) + 1
        if status != "pass":
            print(f"{status:8} {name}: {detail}")
    total = sum(counts.values())
    print(f"\n{total} cases: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("pass", "outdated", "as-ort", "refused",
                                                                            "wrong", "crashed", "skipped")))
    if a.json:
        a.json.write_text(json.dumps({k: {"status": s, "detail": d} for k, (s, d) in results.items()}, indent=1))
    return 1 if counts.get("crashed") or counts.get("wrong") else 0


if __name__ == "__main__":
    sys.exit(main())
