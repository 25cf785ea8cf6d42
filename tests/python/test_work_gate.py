"""The work gate (tools/work_gate.py): the instructions one run of each of a fixed set of small
models executes (callgrind, x86_64-avx2 and generic builds, one thread) must not grow more than
3% over tests/work_gate/baseline.json. Counts, not wall-clock time: they are the same on every
run and every x86-64 host (valgrind shows the program the same CPU everywhere), so the gate
cannot flake. A change that makes a case cheaper passes with a note; move the baseline then
(tools/work_gate.py --update) in a commit that says why. Not in the sanitizer pass (valgrind
does not run ASan builds)."""
from __future__ import annotations

import json
import shutil
import sys

import pytest

import cuvil_testlib as tl

sys.path.insert(0, str(tl.REPO / "tools"))
import work_gate  # noqa: E402

pytestmark = pytest.mark.plain


def test_instructions_within_the_baseline(tmp_path):
    assert shutil.which("valgrind"), "valgrind is not installed (tools/setup/setup.sh installs it)"
    base = json.loads(work_gate.BASELINE.read_text())
    got = work_gate.measure(tl.build_dir(), tmp_path)
    fails, notes = work_gate.compare(got, base)
    for s in notes:
        print("note:", s)
    assert not fails, "\n".join(fails)


def test_gate_fails_on_growth():
    """The comparison itself: 3% over fails, 3% under notes, a case missing from the baseline fails."""
    base = {"a/x": 1000, "b/x": 1000, "c/x": 1000}
    fails, notes = work_gate.compare({"a/x": 1031, "b/x": 1030, "c/x": 960, "d/x": 5}, base)
    assert [f.split(":")[0] for f in fails] == ["a/x", "d/x"] and [n.split(":")[0] for n in notes] == ["c/x"]
