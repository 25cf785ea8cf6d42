#!/usr/bin/env bash
# Installs what Cuvil needs to build and test, and nothing that is already there.
# Idempotent: a second run checks and returns. Called by `make`, `make demo` and `make test`.
#   - Debian packages (apt-get): compiler, cmake, protobuf-c, graphviz, Python venv support,
#     clang with libFuzzer (make fuzz), strace (a test holds one system call of the compiler),
#     qemu-user (tests that run a build on an emulated CPU
#     without AVX-512, and cross targets), valgrind (the work gate counts instructions with
#     callgrind: tools/work_gate.py).
#   - A project virtualenv with the pinned packages of requirements.txt, outside the checkout
#     (so every clone on a machine shares one copy of torch): $CUVIL_VENV, default
#     ${XDG_DATA_HOME:-$HOME/.local/share}/cuvil/venv. Re-installed when requirements.txt changes.
# Prints the venv's path on the last line of stdout when called with --print-venv.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${CUVIL_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/cuvil/venv}"
mode="${1:-all}"

log() { echo "setup: $*" >&2; }

# --- Debian packages ------------------------------------------------------------------------
debs=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev graphviz
      python3-onnx python3-numpy python3-venv python3-pip nettle-dev clang libclang-rt-14-dev qemu-user strace valgrind
      libonnx-testdata)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
fi

[ "$mode" = "--debs-only" ] && exit 0

# --- Python virtualenv -------------------------------------------------------------------------
req="$here/requirements.txt"
want="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.cuvil-requirements.sha256"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "creating virtualenv $venv (torch is large: this takes a while once per machine)"
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2 || true
  "$venv/bin/python" -m pip install -q -r "$req" >&2
  echo "$want" > "$stamp"
fi
# The Python package, installed editable from this checkout (it finds libcuvil in this
# checkout's build/; torch finds backend="cuvil" through its entry point). The checkout that
# ran set-up last is the one the venv sees.
repo="$(cd "$here/../.." && pwd)"
installed="$("$venv/bin/python" - <<'PY' 2>/dev/null || true
import importlib.metadata as md, cuvil
eps = [e.value for e in md.entry_points(group="torch_dynamo_backends") if e.name == "cuvil"]
print(cuvil.__file__ if eps else "")
PY
)"
if [ "$installed" != "$repo/python/cuvil/__init__.py" ]; then
  log "installing the cuvil Python package (editable) from $repo/python"
  "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$repo/python" >&2
fi
[ "$mode" = "--print-venv" ] && echo "$venv"
exit 0
