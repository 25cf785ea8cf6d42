"""ONNX's own backend node cases (Debian's libonnx-testdata, ONNX 1.12, installed by the set-up
script) for the ops issue 31 made symbolic or run-sized, and its control flow, sequences and
optionals: each case's model compiled and run by
tools/onnx_conformance.py and its outputs compared with the case's expected ones. Every case
of these ops must pass, but the few listed in EXPECTED (an op of a later item, or ONNX
Runtime's answer where it and the case's data disagree)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cuvil_testlib as tl

DATA = Path("/usr/share/libonnx-testdata/data")
OPS = {  # filter -> how many node cases ONNX 1.12 has
    "test_nonzero": 1, "test_compress": 4, "test_depthtospace": 4, "test_spacetodepth": 2,
    "test_gather_elements": 3, "test_scatter_elements": 4, "test_scatternd": 3,
    "test_scatter_with": 2,   # with_axis and without_axis: the opset 9-10 Scatter
    # sizes read from tensors when the model runs (test_run_values.py)
    "test_reshape": 10, "test_expand": 2, "test_tile": 2, "test_constantofshape": 3, "test_top_k": 3,
    "test_slice": 8, "test_range": 4,
    # ops whose output size the kernel finds
    "test_nonmaxsuppression": 9, "test_onehot": 4, "test_unique": 5,
    "test_resize": 23,   # scales and sizes are inputs of every case
    "test_if": 3, "test_loop11": 1, "test_scan": 2,   # control flow (test_control_flow.py)
    # sequences as graph inputs and outputs, SequenceMap, a Loop appending to one (test_sequences.py)
    "test_sequence_insert": 2, "test_sequence_map": 12, "test_identity_sequence": 1, "test_loop13_seq": 1,
    "test_optional": 4, "test_identity_opt": 1,   # optionals (test_optionals.py)
}
# Cases that do not pass, their status and a word of its detail: refused cleanly until the item
# that brings their op lands, or computed as ONNX Runtime computes them where it and ONNX's data
# disagree.
EXPECTED = {
    # align_corners onto a length that is not a whole number (2 x 0.6): ONNX's reference divides
    # by the fractional length 1.2, ONNX Runtime (and Cuvil) by the output's 1
    "node/test_resize_downsample_scales_linear_align_corners": ("as-ort", "ONNX Runtime computes"),
    "node/test_resize_downsample_scales_cubic_align_corners": ("as-ort", "ONNX Runtime computes"),
}


@pytest.mark.parametrize("filt", sorted(OPS))
def test_backend_cases_pass(tmp_path, filt):
    assert (DATA / "node").is_dir(), f"{DATA} is missing: install Debian's libonnx-testdata (make setup does)"
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(tl.REPO / "tools" / "onnx_conformance.py"), "--data", str(DATA),
                           "--build", str(tl.build_dir()), "-j", "1", "--filter", filt, "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 or out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    res = {k: v for k, v in json.loads(out.read_text()).items() if k.startswith("node/")}
    assert len(res) == OPS[filt], sorted(res)
    bad = {k: v for k, v in res.items() if v["status"] != "pass" and k not in EXPECTED}
    assert not bad, bad
    for k in set(res) & set(EXPECTED):
        status, word = EXPECTED[k]
        assert res[k]["status"] == status and word in res[k]["detail"], (k, res[k])


def test_schema_table_is_current():
    """src/frontend/onnx/onnx_schema.inc (the attributes and arities every node is checked
    against) lists every op of onnx_ops.c's table: a mapping added without regenerating it would
    leave that op's attributes unchecked."""
    proc = subprocess.run([sys.executable, str(tl.REPO / "tools" / "gen" / "gen_onnx_schema.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
