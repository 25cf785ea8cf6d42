#!/usr/bin/env python3
"""The demo's model: a small CNN trained with PyTorch on scikit-learn's 8x8 handwritten digits
(1797 images that ship inside the scikit-learn package: nothing is downloaded), compiled with
cuvil.compile and saved as a library for the C programs of examples/c.

    $VENV/bin/python examples/digits/train.py --out OUT

Writes OUT/digits.so and OUT/digits.h (the model), OUT/digits_x.npy (the 360 held-out images,
float32 [360,1,8,8]), OUT/digits_y.npy (their labels, int64) and OUT/digits_torch.npy
(PyTorch's predictions, int64), OUT/digit.npy (the first held-out image alone), and prints
PyTorch's held-out accuracy and latency.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

import cuvil

N_TEST = 360


def make_model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def load_split():
    """The digits as float32 [1797, 1, 8, 8] (gray levels 0..16 scaled to 0..1), their labels,
    and the held-out and training indices (the demo's fixed split)."""
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))
    return x, y, order[:N_TEST], order[N_TEST:]


def train_model(x, y, train, epochs):
    """make_model() trained with Adam on the training digits; returned in eval mode."""
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for _ in range(epochs):
        model.train()
        for b in torch.randperm(len(train)).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt[b]), yt[b]).backward()
            opt.step()
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--epochs", type=int, default=25)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    x, y, test, train = load_split()
    t0 = time.perf_counter()
    model = train_model(x, y, train, args.epochs)
    train_s = time.perf_counter() - t0

    xs = torch.from_numpy(x[test])
    with torch.inference_mode():
        pred = model(xs).argmax(1).numpy()
        times = []
        for i in range(N_TEST):  # one digit at a time, as the C program runs them
            t = time.perf_counter()
            model(xs[i:i + 1])
            times.append(time.perf_counter() - t)
    acc = float((pred == y[test]).mean())
    print(f"PyTorch: trained {args.epochs} epochs on {len(train)} digits in {train_s:.1f} s; "
          f"held-out accuracy {100 * acc:.1f}% ({int((pred == y[test]).sum())}/{N_TEST}); "
          f"latency median {1e6 * float(np.median(times)):.0f} us per digit (eager, 1 thread)")

    t = time.perf_counter()
    compiled = cuvil.compile(model, torch.zeros(1, 1, 8, 8))
    compiled.save(args.out / "digits.so")
    print(f"cuvil.compile: {args.out / 'digits.so'} and digits.h in {time.perf_counter() - t:.1f} s "
          f"(target {compiled.target})")
    np.save(args.out / "digits_x.npy", x[test])
    np.save(args.out / "digits_y.npy", y[test])
    np.save(args.out / "digits_torch.npy", pred.astype(np.int64))
    np.save(args.out / "digit.npy", x[test[:1]])  # one held-out digit, for classify and cuvil-run


if __name__ == "__main__":
    main()
