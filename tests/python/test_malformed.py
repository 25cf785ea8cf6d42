"""The malformed-model corpus (tests/malformed/make_corpus.py): every hostile, broken or
over-the-limit model is refused by cuvil-compile with exit status 1 (never a signal: no crash,
no abort), exactly one line on stderr holding the expected reason, and nothing left behind in
the output folder (no library, header, build folder or temporary file)."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

import cuvil_testlib as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "malformed"))
import make_corpus  # noqa: E402

pytestmark = pytest.mark.usefixtures("cuvil_works")


@pytest.mark.parametrize("name", sorted(make_corpus.CASES))
def test_malformed_model_is_refused(name, tmp_path):
    case = make_corpus.CASES[name]
    model = make_corpus.write_case(name, case, tmp_path / "in")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = tl.compile_raw(model, out_dir / "m.so", extra=case.args, timeout=120)
    assert proc.returncode >= 0, f"cuvil-compile died of {signal.Signals(-proc.returncode).name}:\n{proc.stderr}"
    assert proc.returncode == 1, f"exit {proc.returncode}, want 1 (a refusal):\n{proc.stderr}"
    assert proc.stderr.startswith("cuvil-compile: "), proc.stderr
    assert case.expect in proc.stderr, f"want {case.expect!r} in:\n{proc.stderr}"
    tl.assert_clean_failure(proc, max_lines=2, absent=[out_dir])
