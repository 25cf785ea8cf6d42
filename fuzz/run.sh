#!/usr/bin/env bash
# fuzz/run.sh BUILD SECONDS [TARGET...] -- runs each libFuzzer target of BUILD (a CUVIL_FUZZ=ON
# build) for SECONDS, on its working corpus BUILD/corpus/TARGET and the seeds BUILD/seeds/*.
# Fails (exit 1) when a target finds a crash, a leak, a timeout or runaway memory; the input is
# left in BUILD/findings/TARGET/ -- minimise it (TARGET -minimize_crash=1), fix the bug, and
# commit it to fuzz/regressions/TARGET/ so the test suite replays it. Prints, per target, the
# executions, executions per second and new coverage.
set -euo pipefail
build="$1"; secs="$2"; shift 2
ROOT_DIR="$(cd "$(dirname "$0")/.." && pwd)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_model fuzz_model_struct fuzz_tensor fuzz_dim)
status=0
for t in "${targets[@]}"; do
  case "$t" in fuzz_tensor) seeds="$build/seeds/tensor" ;; fuzz_dim) seeds="$ROOT_DIR/fuzz/regressions/fuzz_dim" ;; *) seeds="$build/seeds/model" ;; esac
  corpus="$build/corpus/$t" findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  log="$build/fuzz-$t.log"
  echo "fuzz: $t for ${secs}s (corpus $corpus, seeds $seeds)"
  set +e
  "$build/fuzz/$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=3000 -malloc_limit_mb=2048 \
      -max_len=1048576 -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$seeds" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  echo "fuzz: $t: ${execs:-?} executions, ${rate:-?}/s, ${cov:-cov: ?}, exit $rc"
  if [ $rc -ne 0 ]; then
    echo "fuzz: $t FOUND A PROBLEM (input in $findings); the end of its log:" >&2
    tail -40 "$log" >&2
    status=1
  fi
done
exit $status
