"""docs/ONNX_OPS.md is generated (tools/gen_ops_doc.py) from `cuvil-compile --list-ops`, ONNX's
schemas, docs/OPS.md and the conformance skip file: it must be current, and --list-ops must
name the ops the frontend takes (each with a CIR op of docs/OPS.md)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cuvil_testlib as tl

ROOT = Path(__file__).resolve().parents[2]


def test_onnx_ops_doc_is_current():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_ops_doc.py"), "--check", "--build", str(tl.build_dir())],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_list_ops():
    out = subprocess.run([str(tl.bin_path("cuvil-compile")), "--list-ops"], capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    assert all(len(r) == 5 for r in rows)
    ops = {(r[0], r[1]): r for r in rows}
    assert ops[("", "Conv")][3] == "conv" and ops[("", "Einsum")][2] == "12"
    assert ops[("com.microsoft", "SkipLayerNormalization")][3] == "layer_norm"
    cir = {line.split("`")[1] for line in (ROOT / "docs" / "OPS.md").read_text().splitlines() if line.startswith("| `")}
    assert {r[3] for r in rows} - {"-"} <= cir
