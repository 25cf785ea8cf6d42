"""Whole-model tests: torchvision ResNet-18/50, MobileNetV2 and a custom CNN, exported by the
TorchScript exporter (opset 11, 13) and the dynamo exporter (opset 18) -- see
tools/models/build_models.py for the matrix -- compiled by cuvil-compile, run by cuvil-run on
a seeded N(0,1) input, and compared with ONNX Runtime on the same ONNX file.

The exported files are cached (${CUVIL_TEST_CACHE:-~/.cache/cuvil/test-models}); the first run
exports them (about 45 s on 2 cores for all of them), later runs do not. ResNet-50 is marked
slow: `-m "not slow"` leaves it out.
"""
from __future__ import annotations

import numpy as np
import pytest

import cuvil_testlib as tl
from build_models import EXPORTS, INPUT_NAME, MODELS, example_input, get_model


def _param(spec, **extra):
    marks = [pytest.mark.slow] if MODELS[spec.model].slow else []
    return pytest.param(spec, id=spec.id, marks=marks, **extra)


def _model_path(spec):
    return get_model(spec.model, spec.exporter, spec.opset, spec.variant)


@pytest.mark.parametrize("spec", [_param(s) for s in EXPORTS])
def test_model(spec, tmp_path):
    onnx_path = _model_path(spec)
    x = example_input(spec.model, batch=1, seed=0)
    # a symbolic batch dim is fixed explicitly: the contract does not say what it defaults to
    dims = {"batch": 1} if MODELS[spec.model].dynamic_batch else None
    so = tl.compile(onnx_path, tmp_path / "build", stem=spec.model, dims=dims)
    got = tl.run(so, {INPUT_NAME: x}, tmp_path / "run")
    ref = tl.ort_run(onnx_path, {INPUT_NAME: x})
    tl.assert_outputs_close(got, ref)
    # on a pool of 3 threads (uneven splits, more threads than this machine's 2 cores): every
    # output element is computed by one thread exactly as on one, so the outputs are identical
    got3 = tl.run(so, {INPUT_NAME: x}, tmp_path / "run3", threads=3)
    for k in got:
        assert np.array_equal(got3[k], got[k]), f"{k}: 3 threads differ from 1 (max |d| " \
            f"{float(np.max(np.abs(got3[k] - got[k])))})"


@pytest.mark.parametrize("spec", [_param(s) for s in EXPORTS if MODELS[s.model].dynamic_batch])
def test_model_batch2(spec, tmp_path):
    """The symbolic batch dim compiled as 2 (--dim batch=2) and fed a batch-2 input."""
    onnx_path = _model_path(spec)
    x = example_input(spec.model, batch=2, seed=1)
    so = tl.compile(onnx_path, tmp_path / "build", stem=spec.model, dims={"batch": 2})
    got = tl.run(so, {INPUT_NAME: x}, tmp_path / "run")
    ref = tl.ort_run(onnx_path, {INPUT_NAME: x})
    tl.assert_outputs_close(got, ref)


def test_demo_model(tmp_path):
    """The bundled demo (examples/make_model.py): its reference output is ONNX Runtime's, and
    Cuvil reproduces it."""
    import numpy as np

    d = tl.REPO / "examples" / "models"
    onnx_path = d / "tinycnn.onnx"
    x, want = np.load(d / "sample.npy"), np.load(d / "sample_ref.npy")
    tl.assert_close(tl.ort_run(onnx_path, {"input": x})["logits"], want,
                    name="ONNX Runtime vs sample_ref.npy")
    got = tl.compile_and_run(onnx_path, {"input": x}, tmp_path)
    tl.assert_outputs_close(got, {"logits": want})
    assert int(got["logits"].argmax()) == int(want.argmax())
