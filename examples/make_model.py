#!/usr/bin/env python3
"""Builds Cuvil's bundled demo model: a tiny CNN classifier for 3x64x64 images, 10 classes,
with seeded random weights (no download), exported by the TorchScript exporter
(torch.onnx.export, dynamo=False, opset 13).

Writes, next to this script by default (examples/models/):
  tinycnn.onnx      the model: input 'input' [1,3,64,64] float32 -> output 'logits' [1,10]
  sample.npy        a deterministic input, 1x3x64x64 float32
  sample_ref.npy    ONNX Runtime's output for sample.npy (the demo's expected answer)

Run with the project venv:  $CUVIL_VENV/bin/python examples/make_model.py [--out-dir DIR]
The files are deterministic: running it again rewrites the same bytes.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 0
NUM_CLASSES = 10
INPUT_SHAPE = (1, 3, 64, 64)


def build_model():
    import torch
    import torch.nn as nn

    def conv_bn(cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout), act())

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a = conv_bn(c, c)
            self.b = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return torch.relu(x + self.b(self.a(x)))

    class TinyCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                conv_bn(3, 16, stride=2),                       # 32x32
                conv_bn(16, 16, groups=16, act=nn.ReLU6),       # depthwise
                conv_bn(16, 32, k=1, act=nn.ReLU6),             # pointwise
                nn.MaxPool2d(2),                                # 16x16
                Residual(32),
                conv_bn(32, 64, stride=2),                      # 8x8
                Residual(64),
                nn.AdaptiveAvgPool2d(1),
            )
            self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.2),
                                            nn.Linear(64, NUM_CLASSES))

        def forward(self, x):
            return self.classifier(self.features(x))

    torch.manual_seed(SEED)
    model = TinyCNN()
    # give BatchNorm non-trivial statistics so the folded weights are not just the init
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=g) * 0.6 + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
    return model.eval()


def sample_input() -> np.ndarray:
    """A smooth synthetic 'image' plus a little seeded noise, roughly normalised."""
    rng = np.random.default_rng(SEED)
    _, c, h, w = INPUT_SHAPE
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    chans = [np.sin(3 * xx + 2 * yy), np.cos(4 * yy) * xx, np.exp(-(xx ** 2 + yy ** 2) * 2)]
    img = np.stack(chans[:c])[None] + 0.1 * rng.standard_normal(INPUT_SHAPE)
    img = (img - img.mean()) / img.std()
    return img.astype(np.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=HERE / "models")
    a = ap.parse_args(argv)

    import onnx
    import onnxruntime as ort
    import torch

    out = a.out_dir
    out.mkdir(parents=True, exist_ok=True)
    model = build_model()
    x = sample_input()
    onnx_path = out / "tinycnn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(x),), str(onnx_path), dynamo=False,
                          opset_version=13, input_names=["input"], output_names=["logits"],
                          do_constant_folding=True)
    m = onnx.load(str(onnx_path))
    onnx.checker.check_model(m, full_check=True)
    m.doc_string = ("Cuvil demo model: tiny CNN classifier, 3x64x64 -> 10 logits, seeded random "
                    "weights (examples/make_model.py)")
    onnx.save(m, str(onnx_path))

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ref = sess.run(["logits"], {"input": x})[0]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    err = float(np.max(np.abs(ref - want)))
    if err > 1e-4 * max(1.0, float(np.max(np.abs(want)))):
        print(f"ONNX Runtime and torch disagree: max abs err {err}", file=sys.stderr)
        return 1
    np.save(out / "sample.npy", x)
    np.save(out / "sample_ref.npy", ref)

    size = onnx_path.stat().st_size
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{onnx_path} ({size / 1024:.0f} KiB, ops: {' '.join(ops)})")
    print(f"{out / 'sample.npy'} {x.shape} {x.dtype}")
    print(f"{out / 'sample_ref.npy'} {ref.shape}: class {int(ref.argmax())}, "
          f"logits {np.array2string(ref[0], precision=3)}")
    if size > 2 * 1024 * 1024:
        print("the model is over 2 MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
