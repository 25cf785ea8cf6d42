#!/usr/bin/env python3
"""The benchmark suite's vision and audio models (issue 34): seeded random weights, exported by
torch.onnx (TorchScript exporter, opset 17) into the same cache as build_models.py. Nothing is
downloaded: torchvision and timm build the architectures from code; the YOLO-style detector and
the CRNN text recogniser are defined here; the Whisper-tiny encoder is transformers'
WhisperEncoder from its config. The transformers of the suite (BERT-base, DistilBERT, the GPT-2
decode step) are build_transformers.py's.

    $VENV/bin/python tools/models/build_suite.py [--models a,b] [--check]

--check compares ONNX Runtime's output on each export with PyTorch's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
import build_models  # noqa: E402  (the cache, the export helper, BatchNorm statistics)

OPSET = 17


@dataclass(frozen=True)
class SuiteModel:
    name: str
    source: str                 # "torchvision", "timm", "own", "transformers"
    arch: str                   # the constructor's name
    input_shape: tuple
    label: str


SUITE = {m.name: m for m in [
    SuiteModel("resnet18", "torchvision", "resnet18", (1, 3, 224, 224), "ResNet-18"),
    SuiteModel("resnet50", "torchvision", "resnet50", (1, 3, 224, 224), "ResNet-50"),
    SuiteModel("mobilenet_v2", "torchvision", "mobilenet_v2", (1, 3, 224, 224), "MobileNetV2"),
    SuiteModel("mobilenet_v3_large", "torchvision", "mobilenet_v3_large", (1, 3, 224, 224), "MobileNetV3-Large"),
    SuiteModel("efficientnet_b0", "torchvision", "efficientnet_b0", (1, 3, 224, 224), "EfficientNet-B0"),
    SuiteModel("lcnet_100", "timm", "lcnet_100", (1, 3, 224, 224), "PP-LCNet x1.0 (timm)"),
    SuiteModel("ghostnet_100", "timm", "ghostnet_100", (1, 3, 224, 224), "GhostNet (timm)"),
    SuiteModel("regnet_y_400mf", "torchvision", "regnet_y_400mf", (1, 3, 224, 224), "RegNetY-400MF"),
    SuiteModel("convnext_tiny", "torchvision", "convnext_tiny", (1, 3, 224, 224), "ConvNeXt-Tiny"),
    SuiteModel("vit_s16", "timm", "vit_small_patch16_224", (1, 3, 224, 224), "ViT-S/16 (timm)"),
    SuiteModel("yolo_style", "own", "yolo_style", (1, 3, 320, 320), "YOLO-style detector (v5n-like, 320x320)"),
    SuiteModel("whisper_tiny_enc", "transformers", "whisper_tiny_enc", (1, 80, 3000), "Whisper-tiny encoder (30 s)"),
    SuiteModel("crnn", "own", "crnn", (1, 3, 32, 320), "CRNN text recogniser (32x320)"),
]}


# ----- the models defined here --------------------------------------------------------------------
def _yolo_style():
    """A YOLOv5n-like detector: a CSP backbone of C3 blocks (SiLU), SPPF, a PAN neck with
    nearest upsampling and concatenations, and three 1x1 detection heads (3 anchors x 85)."""
    import torch
    import torch.nn as nn

    def conv(c1, c2, k=1, s=1):   # (the 6x6 stem: padding 2, as YOLOv5's)
        return nn.Sequential(nn.Conv2d(c1, c2, k, s, k // 2 if k % 2 else k // 2 - 1, bias=False), nn.BatchNorm2d(c2),
                             nn.SiLU())

    class Bottleneck(nn.Module):
        def __init__(self, c, shortcut=True):
            super().__init__()
            self.cv1, self.cv2, self.add = conv(c, c, 1), conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C3(nn.Module):
        def __init__(self, c1, c2, n=1, shortcut=True):
            super().__init__()
            h = c2 // 2
            self.cv1, self.cv2, self.cv3 = conv(c1, h), conv(c1, h), conv(2 * h, c2)
            self.m = nn.Sequential(*[Bottleneck(h, shortcut) for _ in range(n)])

        def forward(self, x):
            return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))

    class SPPF(nn.Module):
        def __init__(self, c1, c2):
            super().__init__()
            h = c1 // 2
            self.cv1, self.cv2, self.m = conv(c1, h), conv(4 * h, c2), nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))

    class Yolo(nn.Module):
        def __init__(self, w=(16, 32, 64, 128, 256), na=3, no=85):
            super().__init__()
            self.stem = conv(3, w[0], 6, 2)
            self.b1 = nn.Sequential(conv(w[0], w[1], 3, 2), C3(w[1], w[1], 1))
            self.b2 = nn.Sequential(conv(w[1], w[2], 3, 2), C3(w[2], w[2], 2))
            self.b3 = nn.Sequential(conv(w[2], w[3], 3, 2), C3(w[3], w[3], 3))
            self.b4 = nn.Sequential(conv(w[3], w[4], 3, 2), C3(w[4], w[4], 1), SPPF(w[4], w[4]))
            self.l1, self.c1 = conv(w[4], w[3]), C3(2 * w[3], w[3], 1, False)
            self.l2, self.c2 = conv(w[3], w[2]), C3(2 * w[2], w[2], 1, False)
            self.d1, self.c3 = conv(w[2], w[2], 3, 2), C3(2 * w[2], w[3], 1, False)
            self.d2, self.c4 = conv(w[3], w[3], 3, 2), C3(2 * w[3], w[4], 1, False)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.heads = nn.ModuleList(nn.Conv2d(c, na * no, 1) for c in (w[2], w[3], w[4]))
            self.na, self.no = na, no

        def forward(self, x):
            p3 = self.b2(self.b1(self.stem(x)))
            p4 = self.b3(p3)
            p5 = self.b4(p4)
            t5 = self.l1(p5)
            n4 = self.c1(torch.cat([self.up(t5), p4], 1))
            t4 = self.l2(n4)
            o3 = self.c2(torch.cat([self.up(t4), p3], 1))
            o4 = self.c3(torch.cat([self.d1(o3), t4], 1))
            o5 = self.c4(torch.cat([self.d2(o4), t5], 1))
            outs = []
            for h, f in zip(self.heads, (o3, o4, o5)):
                b, _, gy, gx = f.shape
                y = h(f).view(b, self.na, self.no, gy * gx).permute(0, 1, 3, 2).reshape(b, -1, self.no)
                outs.append(torch.sigmoid(y))
            return torch.cat(outs, 1)

    return Yolo()


def _crnn(num_classes=97):
    """A CRNN text recogniser (PP-OCR/CRNN-like): a VGG-style conv stack with BatchNorm and Relu
    that pools height to 1, a two-layer bidirectional LSTM of 128 per direction, and a Linear
    over the classes per column."""
    import torch.nn as nn

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()

            def block(c1, c2, pool):
                layers = [nn.Conv2d(c1, c2, 3, 1, 1, bias=False), nn.BatchNorm2d(c2), nn.ReLU()]
                return layers + ([nn.MaxPool2d(pool, pool)] if pool else [])

            self.cnn = nn.Sequential(*block(3, 32, (2, 2)), *block(32, 64, (2, 2)), *block(64, 128, None),
                                     *block(128, 128, (2, 1)), *block(128, 256, None), *block(256, 256, (2, 1)),
                                     *block(256, 256, (2, 1)))
            self.rnn = nn.LSTM(256, 128, num_layers=2, bidirectional=True)
            self.fc = nn.Linear(256, num_classes)

        def forward(self, x):
            f = self.cnn(x)                         # B,256,1,W/4
            f = f.squeeze(2).permute(2, 0, 1)       # T,B,256
            y, _ = self.rnn(f)
            return self.fc(y).softmax(-1)           # T,B,classes

    return CRNN()


def _whisper_tiny_encoder():
    import torch
    import transformers

    cfg = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                     decoder_layers=4, decoder_attention_heads=6, encoder_ffn_dim=1536,
                                     decoder_ffn_dim=1536, num_mel_bins=80, attn_implementation="eager")
    enc = transformers.WhisperModel(cfg).get_encoder()

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = enc

        def forward(self, x):
            return self.enc(x).last_hidden_state

    return Enc()


def build_torch(name: str):
    """The eval-mode module of suite model `name`, seeded weights (BatchNorm statistics too)."""
    import torch

    m = SUITE[name]
    torch.manual_seed(0)
    if m.source == "torchvision":
        import torchvision
        mod = getattr(torchvision.models, m.arch)(weights=None)
    elif m.source == "timm":
        import timm
        mod = timm.create_model(m.arch, pretrained=False)
    elif m.arch == "yolo_style":
        mod = _yolo_style()
    elif m.arch == "crnn":
        mod = _crnn()
    elif m.arch == "whisper_tiny_enc":
        mod = _whisper_tiny_encoder()
    else:
        raise ValueError(name)
    build_models._randomize_batchnorm(mod)
    return mod.eval()


def example_input(name: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SUITE[name].input_shape, dtype=np.float32)


def _key(name: str) -> str:
    import torch
    vers = {"torch": torch.__version__, "opset": OPSET, "source": SUITE[name].source}
    if SUITE[name].source == "timm":
        import timm
        vers["timm"] = timm.__version__
    if SUITE[name].source == "transformers":
        import transformers
        vers["transformers"] = transformers.__version__
    src = hashlib.sha256(HERE.read_bytes()).hexdigest()[:12]
    return f"suite-{name}-s" + hashlib.sha256((json.dumps(vers, sort_keys=True) + src).encode()).hexdigest()[:16]


def get_model(name: str) -> Path:
    """The cached ONNX file of suite model `name` (exported first if missing)."""
    import torch

    def export(path):
        mod = build_torch(name)
        x = torch.from_numpy(example_input(name))
        return build_models.run_export(mod, (x,), path, name, True, input_names=["input"], output_names=["output"],
                                       opset_version=OPSET, dynamo=False)

    return build_models.cached_export(build_models.cache_dir(), _key(name), f"suite-{name}-", export, name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(SUITE))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        p = get_model(name)
        line = f"{name}: {p}"
        if args.check:
            import onnxruntime as ort
            import torch
            x = example_input(name)
            with torch.no_grad():
                want = build_torch(name)(torch.from_numpy(x)).numpy()
            got = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
            line += f"  ORT vs torch max |diff| {float(np.abs(got - want).max()):.2e} (scale {float(np.abs(want).max()):.2e})"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
