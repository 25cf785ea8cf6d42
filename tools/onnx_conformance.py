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
    if want.dtype.name in ("int4", "uint4"):   # cuvil-run writes 4-bit values as int8/uint8, one per byte
        if got.dtype != np.dtype(np.int8 if want.dtype.name == "int4" else np.uint8):
            return f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
        want = want.astype(got.dtype)
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


def ort_session(model: Path):
    """ONNX Runtime's CPU session on a model, quiet (it raises when it cannot take the model)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 4
    return ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])


def ort_agrees(model: Path, ins: list[Path], got: dict) -> bool:
    """Whether ONNX Runtime (the peer Cuvil is measured against) computes what Cuvil did where
    both differ from ONNX's data and its reference: a known disagreement between the two."""
    try:
        sess = ort_session(model)
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


# What the conformance target counts (issue 32): every case but these groups, each named with its
# reason in the skip file. A case is out of scope when any node, type, initializer or attribute
# of its model (subgraphs and model-local functions too) falls in one.
STRING_TYPES = {onnx.TensorProto.STRING}
NARROW_TYPES = {getattr(onnx.TensorProto, n) for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                                         "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2")
                if hasattr(onnx.TensorProto, n)}
TRAINING_OPS = {"Adam", "Adagrad", "Momentum", "Gradient"}
TYPE_ATTRS = {"to", "output_dtype", "dtype"}   # attributes that name an element type


def _types_of(tp):
    k = tp.WhichOneof("value")
    if k == "tensor_type":
        yield tp.tensor_type.elem_type
    elif k == "sparse_tensor_type":
        yield tp.sparse_tensor_type.elem_type
    elif k == "sequence_type":
        yield from _types_of(tp.sequence_type.elem_type)
    elif k == "optional_type":
        yield from _types_of(tp.optional_type.elem_type)
    elif k == "map_type":
        yield tp.map_type.key_type
        yield from _types_of(tp.map_type.value_type)


def _graph_types(g):
    for v in list(g.input) + list(g.output) + list(g.value_info):
        yield from _types_of(v.type)
    for t in g.initializer:
        yield t.data_type
    for n in g.node:
        yield from _node_types(n)


def _node_types(n):
    A = onnx.AttributeProto
    for a in n.attribute:
        if a.type == A.TENSOR:
            yield a.t.data_type
        elif a.type == A.TENSORS:
            yield from (t.data_type for t in a.tensors)
        elif a.type == A.INT and a.name in TYPE_ATTRS:
            yield a.i
        elif a.type == A.TYPE_PROTO:
            yield from _types_of(a.tp)
        elif a.type == A.GRAPH:
            yield from _graph_types(a.g)
        elif a.type == A.GRAPHS:
            for g in a.graphs:
                yield from _graph_types(g)


def _nodes(g):
    for n in g.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(a.g)
            for sg in a.graphs:
                yield from _nodes(sg)


def out_of_scope(m: onnx.ModelProto) -> str | None:
    """Why a case's model is outside what the conformance target counts, or None."""
    nodes = list(_nodes(m.graph)) + [n for f in m.functions for n in f.node]
    for n in nodes:
        if n.op_type in TRAINING_OPS and (n.domain in ("", "ai.onnx") or n.domain.startswith("ai.onnx.preview")):
            return "a training-only op"
        if n.domain == "ai.onnx.ml":
            return "the ai.onnx.ml domain"
        if n.domain.startswith("ai.onnx.preview"):
            return "a preview domain"
        if n.op_type == "ImageDecoder":
            return "ImageDecoder"
    types = set(_graph_types(m.graph)) | {t for f in m.functions for n in f.node for t in _node_types(n)}
    if types & STRING_TYPES:
        return "string tensors"
    if types & NARROW_TYPES:
        return "float8/float4/int2 element types"
    return None


def case_info(case: Path) -> tuple[str | None, list[str]]:
    """(out-of-scope reason or None, the op types of the model's top-level graph)."""
    try:
        m = onnx.load(str(case / "model.onnx"), load_external_data=False)
    except Exception:  # noqa: BLE001  (run_case says why)
        return None, []
    ops = sorted({(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in m.graph.node})
    return out_of_scope(m), ops


def ort_case(case: Path) -> str:
    """ONNX Runtime on the same case, the same comparison: 'pass' or why not."""
    try:
        m = onnx.load(str(case / "model.onnx"), load_external_data=False)
        sess = ort_session(case / "model.onnx")
    except Exception as e:  # noqa: BLE001
        return f"refused: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
    vis = {i.name: i for i in m.graph.input}
    ovis = {o.name: o for o in m.graph.output}
    for ds in sorted(p for p in case.glob("test_data_set_*") if p.is_dir()):
        ins = sorted(ds.glob("input_*.pb"), key=lambda q: int(q.stem.split("_")[1]))
        outs = sorted(ds.glob("output_*.pb"), key=lambda q: int(q.stem.split("_")[1]))
        try:
            feeds = {i.name: load_val(f, vis[i.name]) for i, f in zip(sess.get_inputs(), ins)}
            got = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            return f"refused: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
        for o, g, f in zip(sess.get_outputs(), got, outs):
            g = None if g is None else (list(g) if isinstance(g, list) else np.asarray(g))
            why = mismatch(o.name, g, load_val(f, ovis[o.name]))
            if why:
                return "wrong: " + why
    return "pass"


SUITES = {   # name -> (data folder, its folders)
    "debian-1.12": (DEFAULT_DATA, ["node", "simple", "pytorch-converted", "pytorch-operator", "real"]),
    "onnx-1.23.2": (None, ["node"]),   # written into the build folder: BUILD/onnx-node-cases-1.23.2
}


def ensure_generated(data: Path) -> None:
    """The 1.23.2 node cases, written by tools/gen_onnx_node_cases.py from the pinned wheel."""
    if (data / "node").is_dir() and (data / ".complete").exists():
        return
    if onnx.__version__ != "1.23.2":
        sys.exit(f"onnx {onnx.__version__} is installed; the onnx-1.23.2 suite is generated by onnx 1.23.2 "
                 "(tools/setup/requirements.txt pins it: make setup)")
    if data.exists():
        shutil.rmtree(data)
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_onnx_node_cases.py"), str(data)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (data / ".complete").write_text(onnx.__version__ + "\n")


# Why a case that differs from its data differs, where that is known (the skip file says it).
NOTES = [
    (re.compile(r"test_attention\w*bf16"), "bfloat16 within one bf16 step (2^-8) of ONNX's reference, which rounds to "
                                           "bfloat16 after every step; Cuvil computes in float32 and rounds once"),
]


def read_skips(path: Path) -> dict[str, str]:
    skips = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition("\t")
            skips[name.strip()] = why.strip()
    return skips


def short(detail: str) -> str:
    """A failure's detail for the skip file: one line, without the machine's paths."""
    d = re.sub(r"\S*/(model\.onnx|m\.so|input_\d+\.pb|output_\d+\.pb)", r"\1", detail.replace("\t", " ").replace("\n", " "))
    d = re.sub(r"^model\.onnx: ", "", d)
    return d[:240]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="one folder of cases (node/ and, with --all-folders, the others)")
    ap.add_argument("--suite", action="append", choices=sorted(SUITES),
                    help="a suite by name (repeatable; the default with no --data: both)")
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--filter", default="")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--all-folders", action="store_true", help="with --data: not only node/ but simple, pytorch-*, real")
    ap.add_argument("--ort", action="store_true", help="also ONNX Runtime on the same cases (its column in the tables)")
    ap.add_argument("--ops", action="store_true", help="print the per-op table")
    ap.add_argument("--quiet", action="store_true", help="no line per case that does not pass (the skip file has them)")
    ap.add_argument("--skips", type=Path, help="the skip file: fail when a case that does not pass is not in it")
    ap.add_argument("--write-skips", type=Path, help="write every case that does not pass, with its reason")
    ap.add_argument("--ratchet", type=Path, help="fail when a folder passes fewer cases than this file records")
    ap.add_argument("--write-ratchet", type=Path, help="record each folder's passing cases")
    a = ap.parse_args()
    if a.data:
        sets = [(None, a.data, ["node"] + (["simple", "pytorch-converted", "pytorch-operator", "real"]
                                            if a.all_folders else []))]
    else:
        sets = []
        for name in a.suite or sorted(SUITES):
            data, folders = SUITES[name]
            if name == "onnx-1.23.2":
                data = a.build.resolve() / "onnx-node-cases-1.23.2"   # (absolute: the tools run in a work folder)
                ensure_generated(data)
            elif not (data / "node").is_dir():
                sys.exit(f"{data} is missing: install Debian's libonnx-testdata (make setup does)")
            sets.append((name, data, folders))
    cases = [(s, f, c) for s, data, folders in sets for f in folders for c in sorted((data / f).glob("*"))
             if c.is_dir() and a.filter in c.name]
    key = {(s, f, c): f"{s + '/' if s else ''}{f}/{c.name}" for s, f, c in cases}
    results, info, ort_res = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="cuvil-conformance-") as td, cf.ThreadPoolExecutor(a.j) as pool:
        futs = {pool.submit(run_case, c, a.build.resolve(), Path(td) / f"{s}-{f}-{c.name}"): (s, f, c)
                for s, f, c in cases}
        for fut in cf.as_completed(futs):
            s, f, c = futs[fut]
            try:
                status, detail = fut.result()
            except subprocess.TimeoutExpired:
                status, detail = "crashed", "timed out"
            except Exception as e:  # noqa: BLE001  (data this script cannot read: not a tensor)
                status, detail = "skipped", f"unreadable test data: {type(e).__name__}: {str(e)[:120]}"
            k = key[(s, f, c)]
            results[k] = (status, detail)
            info[k] = case_info(c) if (c / "model.onnx").is_file() else ("no model or no data in the package", [])
            if status == "skipped" and detail == "no model or no data":
                info[k] = ("no model or no data in the package", [])
            if a.ort:
                ort_res[k] = ort_case(c) if info[k][0] != "no model or no data in the package" else "no data"
            shutil.rmtree(Path(td) / f"{s}-{f}-{c.name}", ignore_errors=True)
    counts = {}
    for name in sorted(results):
        status, detail = results[name]
        counts[status] = counts.get(status, 0) + 1
        if status != "pass" and not a.quiet:
            print(f"{status:8} {name}: {detail}")
    total = sum(counts.values())
    print(f"\n{total} cases: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("pass", "outdated", "as-ort", "refused",
                                                                            "wrong", "crashed", "skipped")))
    # per op: the in-scope cases whose top-level graph uses it
    if a.ops:
        per_op = {}
        for k, (status, _) in results.items():
            scope, ops = info[k]
            if scope is None:
                for op in ops:
                    t = per_op.setdefault(op, [0, 0, 0])
                    t[0] += 1
                    t[1] += status == "pass"
                    t[2] += ort_res.get(k) == "pass"
        print(f"\n{'op (in-scope cases using it)':34} {'cases':>6} {'Cuvil':>6}" + (f" {'ORT':>6}" if a.ort else ""))
        for op in sorted(per_op):
            n, p, o = per_op[op]
            print(f"{op:34} {n:6} {p:6}" + (f" {o:6}" if a.ort else ""))
    # per folder: in scope and of all cases
    folders = {}
    for k, (status, _) in results.items():
        fk = k.rsplit("/", 1)[0]
        t = folders.setdefault(fk, [0, 0, 0, 0, 0, 0])   # all, in scope, pass all, pass in scope, ORT all, ORT in
        scope = info[k][0]
        if scope == "no model or no data in the package":
            continue
        ok, ook = status == "pass", ort_res.get(k) == "pass"
        t[0] += 1
        t[2] += ok
        t[4] += ook
        if scope is None:
            t[1] += 1
            t[3] += ok
            t[5] += ook
    pct = lambda p, n: f"{p:5} ({100 * p / n:5.1f}%)" if n else f"{p:5}    (-)  "   # noqa: E731
    print(f"\n{'folder':28} {'cases':>5} {'in scope':>8}  {'Cuvil in scope':>15}  {'Cuvil of all':>15}"
          + (f"  {'ORT in scope':>15}  {'ORT of all':>15}" if a.ort else ""))
    for fk in sorted(folders):
        t = folders[fk]
        if t[0]:
            print(f"{fk:28} {t[0]:5} {t[1]:8}  {pct(t[3], t[1]):>15}  {pct(t[2], t[0]):>15}"
                  + (f"  {pct(t[5], t[1]):>15}  {pct(t[4], t[0]):>15}" if a.ort else ""))
    failed = 0
    skip_lines = []
    for k in sorted(results):
        status, detail = results[k]
        if status == "pass":
            continue
        scope = info[k][0]
        note = next((n for r, n in NOTES if r.search(k)), None) if status in ("wrong", "as-ort", "outdated") else None
        skip_lines.append(f"{k}\t{'out of scope: ' + scope if scope else status + ': ' + short(detail)}"
                          + (f" ({note})" if note else ""))
    if a.write_skips:
        a.write_skips.write_text("# Every conformance case that does not pass (tools/onnx_conformance.py), with its reason:\n"
                                 "# out of scope (issue 32's groups), refused (Cuvil said no, cleanly), or how it differs.\n"
                                 "# make conformance fails when a case not listed here does not pass.\n"
                                 + "".join(line + "\n" for line in skip_lines))
    if a.skips:
        skips = read_skips(a.skips)
        new = [line for line in skip_lines if line.split("\t")[0] not in skips]
        for line in new:
            print(f"NOT IN THE SKIP FILE: {line}")
        failed += len(new)
        worse = [k for k in skips if k in results and results[k][0] in ("wrong", "crashed")
                 and not skips[k].startswith(results[k][0] + ":")]
        for k in worse:   # listed as refused, now a wrong answer or a crash: never silently
            print(f"NOW {results[k][0].upper()} (the skip file says '{skips[k][:60]}'): {k}: {results[k][1]}")
        failed += len(worse)
        stale = [k for k in skips if k in results and results[k][0] == "pass"]
        if stale:
            print(f"{len(stale)} cases of the skip file pass now (remove them: --write-skips): " + ", ".join(stale[:20]))
    if a.write_ratchet:
        a.write_ratchet.write_text("# passing cases per folder; make conformance fails below these (the ratchet)\n"
                                   + "".join(f"{fk}\t{folders[fk][2]}\n" for fk in sorted(folders) if folders[fk][0]))
    if a.ratchet:
        for line in a.ratchet.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                fk, n = line.split("\t")
                if fk in folders and not a.filter and folders[fk][2] < int(n):
                    print(f"RATCHET: {fk} passes {folders[fk][2]} cases, fewer than the {n} recorded in {a.ratchet}")
                    failed += 1
    if a.json:
        a.json.write_text(json.dumps({k: {"status": s, "detail": d, **({"ort": ort_res[k]} if k in ort_res else {}),
                                          "scope": info[k][0]} for k, (s, d) in results.items()}, indent=1))
    npass = counts.get("pass", 0)
    ncases = sum(1 for k in results if info[k][0] != "no model or no data in the package")
    print(f"{npass} passed, {ncases - npass} failed")
    if a.skips or a.ratchet:
        return 1 if failed or counts.get("crashed") else 0
    return 1 if counts.get("crashed") or counts.get("wrong") else 0


if __name__ == "__main__":
    sys.exit(main())
