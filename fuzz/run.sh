#!/usr/bin/env bash
# Run fencelock's libFuzzer targets, each for a while, from its seed corpus
# in fuzz/corpus/<target>/ (read only: what a run finds goes to
# BUILD_DIR/fuzz-out/<target>/corpus, crashes to BUILD_DIR/fuzz-out/<target>/).
#   fuzz/run.sh                         # every target, 30 s each
#   FUZZ_SECONDS=3600 fuzz/run.sh fuzz_sg_api
# Environment: BUILD_DIR (default build-fuzz; set up with clang and
# -Dfuzz=true if it does not exist), FUZZ_SECONDS (per target), FUZZ_ARGS
# (more libFuzzer flags, e.g. "-jobs=2 -workers=2").
# Every target runs with -malloc_limit_mb=64: no input may make one
# allocation of more than 64 MiB (the hostile-node bound, docs/security.md).
# Prints one line "1 passed, 0 failed" (no target crashed) or
# "0 passed, 1 failed" last: for .ci/run the fuzzing is one test.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FUZZ_ARGS=${FUZZ_ARGS:-}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_token fuzz_address fuzz_sg_api fuzz_lockcore_replies fuzz_conf)

fail() { echo "$*"; echo "0 passed, 1 failed"; exit 1; }

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  CC=clang meson setup "$BUILD_DIR" -Dfuzz=true -Db_lundef=false -Dtests=false ||
    fail "fuzz: meson setup failed"
fi
meson compile -C "$BUILD_DIR" || fail "fuzz: build failed"

failed=0
for t in "${targets[@]}"; do
  exe=$BUILD_DIR/fuzz/$t
  [ -x "$exe" ] || fail "fuzz: no target $t"
  out=$BUILD_DIR/fuzz-out/$t
  mkdir -p "$out/corpus"
  log=$out/log
  # shellcheck disable=SC2086
  "$exe" -max_total_time="$FUZZ_SECONDS" -malloc_limit_mb=64 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$out/" $FUZZ_ARGS "$out/corpus" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  cov=$(grep -E 'DONE +cov:' "$log" | grep -oE 'cov: [0-9]+' | tail -n 1)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $t: ${FUZZ_SECONDS} s, ${runs:-?} inputs, ${cov:-cov: ?}, no crash"
  else
    failed=1
    echo "fuzz: $t: FAILED (exit $rc); the input is in $out/ (crash-*, leak-*, timeout-*, oom-*):"
    grep -vE '^#[0-9]+[[:space:]]' "$log" | tail -n 60
  fi
done

if [ "$failed" -eq 0 ]; then
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
  exit 1
fi
