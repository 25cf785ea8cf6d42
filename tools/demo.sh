#!/usr/bin/env bash
# demo.sh BUILD_DIR -- the end-to-end demo, on a model trained here: a small CNN learns
# scikit-learn's 8x8 handwritten digits with PyTorch (seconds), cuvil.compile turns it into a
# shared library, and plain-C programs (examples/c) run it on the 360 held-out digits: accuracy
# and latency of the compiled model next to PyTorch's, and how often they agree. Then what
# cuvil-run reports about the library.
#
#   tools/demo.sh build [OUT]  # after `make build` and tools/setup/setup.sh (the project venv)
#
# Everything it writes goes to OUT, by default BUILD_DIR/demo.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
out="${2:-$build/demo}"
run="$build/bin/cuvil-run"
py="${CUVIL_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/cuvil/venv}/bin/python"

die() { echo "demo: $*" >&2; exit 1; }
[ -x "$run" ] || die "$run not found: build first (make build)"
[ -x "$py" ] || die "$py not found: run tools/setup/setup.sh (the project virtualenv)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

step() { printf '\n== %s\n' "$*"; }

step "train a CNN on scikit-learn's digits with PyTorch, compile it with cuvil.compile"
CUVIL_LIB="$build/lib/libcuvil.so" "$py" "$repo/examples/digits/train.py" --out "$out"
[ -f "$out/digits.so" ] && [ -f "$out/digits.h" ] || die "cuvil.compile did not write digits.so and digits.h"

step "build examples/c (plain C, no libcuvil, no Python) against digits.so"
make -s -C "$repo/examples/c" MODEL_DIR="$out" MODEL=digits O="$out"

step "the compiled model, from C, on the 360 held-out digits (reference: PyTorch's predictions)"
"$out/evaluate" "$out/digits_x.npy" "$out/digits_y.npy" "$out/digits_torch.npy"

step "classify one held-out digit"
"$out/classify" "$out/digit.npy"

step "cuvil-run --info"
"$run" "$out/digits.so" --info

step "cuvil-run --bench 1000"
"$run" "$out/digits.so" --input "$out/digit.npy" --bench 1000
