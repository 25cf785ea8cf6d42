"""pytest configuration for Cuvil's Python tests.

Every test here drives the real binaries (build/bin/cuvil-compile, build/bin/cuvil-run, or
$CUVIL_BUILD/bin/...). When they are missing or broken the tests ERROR with the reason; they
never skip, since a skipped test would read as a pass.

Markers:
  slow    big models (ResNet-50, the transformers); run by default, deselect with `-m "not slow"`
  plain   run by the plain build's pass only: `make test`'s second pass (ASan + UBSan, the same
          tests on an instrumented build) deselects them with `-m "not plain"` to keep CI's time
          (the transformers' TorchScript exports: their dynamo twins run in both passes; the
          tests whose time is the system compiler's or pip's: emitted C built with make, a
          fresh virtualenv, the README's quickstart, the codegen-time scaling check)

Environment:
  CUVIL_BUILD          build folder (default <repo>/build)
  CUVIL_TEST_CACHE     exported-model cache (default ~/.cache/cuvil/test-models)
Each test's files (model, inputs, outputs, the compiled .so) are in its tmp_path; pytest keeps
those of the last 3 runs under /tmp/pytest-of-$USER/.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuvil_testlib as tl  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: big model; deselect with -m 'not slow'")
    config.addinivalue_line("markers", "plain: not in the sanitizer pass of make test (CI time)")
    config.addinivalue_line("markers", "needs_cuvil: drives build/bin/cuvil-compile and cuvil-run")


def pytest_report_header(config):
    return [f"cuvil build: {tl.build_dir()}",
            f"cuvil test-model cache: {__import__('build_models').cache_dir()}"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.needs_cuvil)


@pytest.fixture(autouse=True)
def _needs_cuvil(cuvil_bins):
    """Every test in this folder drives the binaries."""


@pytest.fixture(scope="session")
def cuvil_bins():
    """The binaries exist: fail (not skip) every test otherwise."""
    missing = tl.missing_binaries()
    if missing:
        pytest.fail("Cuvil is not built: " + "; ".join(missing)
                    + ". Build it (`make build`) or point CUVIL_BUILD at a build folder.",
                    pytrace=False)
    return tl.build_dir()


@pytest.fixture(scope="session")
def cuvil_works(cuvil_bins, tmp_path_factory):
    """A positive control: cuvil-compile and cuvil-run handle a one-Relu model. Tests that
    expect a failure use it, so that a placeholder binary that fails on everything cannot
    make them pass."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    d = tmp_path_factory.mktemp("smoke")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "smoke",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, d / "relu.onnx")
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    err = None
    try:
        so = tl.compile(d / "relu.onnx", d)
        got = tl.run(so, {"x": x}, d)
    except AssertionError as e:
        err = str(e)
    if err is not None:
        pytest.fail(f"Cuvil cannot compile and run a one-Relu model, so the failure tests "
                    f"cannot tell a right refusal from a broken tool:\n{err}", pytrace=False)
    if "y" not in got or not np.array_equal(got["y"], np.maximum(x, 0)):
        pytest.fail(f"Cuvil's one-Relu model gives {got}, want y={np.maximum(x, 0)}",
                    pytrace=False)
    return so
