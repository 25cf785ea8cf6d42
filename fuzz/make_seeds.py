#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (make fuzz):

    SEEDS/model/   valid ONNX models: the bundled example, every op test case of
                   tests/python/test_ops.py (each a small graph exercising one op and its
                   attribute/opset variants), and the malformed-model corpus of tests/malformed
    SEEDS/tensor/  .npy files of every dtype and a few shapes, TensorProto, SequenceProto and
                   OptionalProto .pb files

Deterministic: the same files every run. Run with the project venv's python.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "tests" / "malformed"))

MAX_SEED_BYTES = 256 * 1024


def model_seeds(out: Path) -> int:
    import test_ops  # noqa: E402  (the op cases, without running them)

    n = 0
    (out / "tinycnn.onnx").write_bytes((ROOT / "examples/models/tinycnn.onnx").read_bytes())
    n += 1
    for case in test_ops.CASES:
        data = case.model().SerializeToString()
        if len(data) <= MAX_SEED_BYTES:
            (out / f"op-{case.id}.onnx").write_bytes(data)
            n += 1
    try:
        import make_corpus  # tests/malformed: hostile and broken models, by design
    except ImportError:
        return n
    for name, data in make_corpus.all_models():
        if len(data) <= MAX_SEED_BYTES:
            (out / f"bad-{name}.onnx").write_bytes(data)
            n += 1
    return n


def tensor_seeds(out: Path) -> int:
    rng = np.random.default_rng(7)
    n = 0
    dtypes = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
              np.uint16, np.uint32, np.uint64, np.bool_]
    shapes = [(), (0,), (3,), (2, 3), (1, 3, 4, 4), (2, 0, 5)]
    for dt in dtypes:
        for shape in shapes:
            a = (rng.standard_normal(shape) * 10).astype(dt)
            b = io.BytesIO()
            np.save(b, a)
            name = f"{np.dtype(dt).name}-{'x'.join(map(str, shape)) or 'scalar'}"
            (out / f"{name}.npy").write_bytes(b.getvalue())
            t = numpy_helper.from_array(a, name="x")
            (out / f"{name}.pb").write_bytes(t.SerializeToString())
            n += 2
    for k, shape in enumerate([(), (3,), (2, 3)]):   # SequenceProto files (sequence inputs)
        sp = onnx.SequenceProto(name="s", elem_type=onnx.SequenceProto.TENSOR)
        sp.tensor_values.extend(numpy_helper.from_array((rng.standard_normal(shape[:1] + shape[1:]) * i).astype(np.float32))
                                for i in range(k + 1))
        (out / f"seq-{k}.pb").write_bytes(sp.SerializeToString())
        op = onnx.OptionalProto(name="o", elem_type=onnx.OptionalProto.SEQUENCE, sequence_value=sp)
        (out / f"opt-seq-{k}.pb").write_bytes(op.SerializeToString())
        n += 2
    t = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), name="o")
    (out / "opt-tensor.pb").write_bytes(onnx.OptionalProto(name="o", elem_type=onnx.OptionalProto.TENSOR,
                                                           tensor_value=t).SerializeToString())
    (out / "opt-none.pb").write_bytes(onnx.OptionalProto(name="o").SerializeToString())
    n += 2
    return n


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} SEEDS_DIR", file=sys.stderr)
        return 2
    seeds = Path(sys.argv[1])
    for sub in ("model", "tensor"):
        (seeds / sub).mkdir(parents=True, exist_ok=True)
    nm = model_seeds(seeds / "model")
    nt = tensor_seeds(seeds / "tensor")
    print(f"fuzz seeds: {nm} models, {nt} tensor files in {seeds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
