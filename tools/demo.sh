#!/usr/bin/env bash
# demo.sh BUILD_DIR -- the end-to-end demo: compile examples/models/tinycnn.onnx to a shared
# library, build the plain-C example (examples/c) against it, classify examples/models/sample.npy,
# then show what cuvil-run reports about the model and how fast it runs.
#
#   tools/demo.sh build        # after: cmake -S . -B build && cmake --build build
#
# Everything it writes goes to BUILD_DIR/demo.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
out="$build/demo"
model_onnx="$repo/examples/models/tinycnn.onnx"
sample="$repo/examples/models/sample.npy"
compile="$build/bin/cuvil-compile"
run="$build/bin/cuvil-run"

die() { echo "demo: $*" >&2; exit 1; }
for f in "$compile" "$run"; do
  [ -x "$f" ] || die "$f not found: build first (cmake --build $1)"
done
for f in "$model_onnx" "$sample"; do
  [ -f "$f" ] || die "$f not found"
done
mkdir -p "$out"

step() { printf '\n== %s\n' "$*"; }

step "compile: $(basename "$model_onnx") -> $out/tinycnn.so"
t0=$(date +%s.%N)
"$compile" --model "$model_onnx" --output "$out/tinycnn.so"
t1=$(date +%s.%N)
[ -f "$out/tinycnn.so" ] && [ -f "$out/tinycnn.h" ] || die "cuvil-compile did not write tinycnn.so and tinycnn.h"
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "compiled in %.2f s\n", b - a }'

step "build examples/c/classify against it (plain C, no libcuvil)"
make -s -C "$repo/examples/c" MODEL_DIR="$out" MODEL=tinycnn O="$out"

step "classify $(basename "$sample")"
"$out/classify" "$sample"

step "cuvil-run --info"
"$run" "$out/tinycnn.so" --info

step "cuvil-run --bench 100"
"$run" "$out/tinycnn.so" --input "$sample" --bench 100

step "check against ONNX Runtime's output for the same input (examples/models/sample_ref.npy)"
"$run" "$out/tinycnn.so" --input "$sample" --output-dir "$out/run" > /dev/null
py="${CUVIL_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/cuvil/venv}/bin/python"
if [ -x "$py" ]; then
  "$py" - "$out/run/logits.npy" "$repo/examples/models/sample_ref.npy" <<'PY'
import sys, numpy as np
got, ref = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.abs(got - ref).max())
print(f"max |cuvil - onnxruntime| = {err:.3g} (max |ref| = {float(np.abs(ref).max()):.3g}); "
      f"top class {int(got.argmax())} vs {int(ref.argmax())}")
sys.exit(0 if np.allclose(got, ref, rtol=1e-3, atol=1e-4 * float(np.abs(ref).max())) else 1)
PY
else
  echo "(no project virtualenv: run tools/setup/setup.sh to compare with ONNX Runtime)"
fi
