#!/usr/bin/env bash
# Build fencelock and run its test suite against real redis-server processes.
#   scripts/test.sh                      # plain build in build/, all suites
# Environment knobs (used by .ci/run):
#   BUILD_DIR=build-asan MESON_ARGS="-Db_sanitize=address,undefined" scripts/test.sh
#   SUITES="unit" WRAPPER="valgrind ..." scripts/test.sh
# Prints "N passed, N failed" last; exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
MESON_ARGS=${MESON_ARGS:-}
SUITES=${SUITES:-}
WRAPPER=${WRAPPER:-}

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$BUILD_DIR" $MESON_ARGS
fi
meson compile -C "$BUILD_DIR"

# A log name of our own, cleared first, so that an older log is never counted
# (with --wrapper, meson adds the wrapper's name to it).
args=(--print-errorlogs --num-processes 2 --logbase fencelock-tests)
for s in $SUITES; do args+=(--suite "$s"); done
# A wrapper (valgrind) wraps each test's own program. The examples are
# driven by a shell script (tests/examples/check.sh), and valgrind on bash
# reports bash's own leaks: they run plain and under the sanitizers only.
# So do the explorer's runs: valgrind would wrap the explorer, not the
# client processes it starts, and its fault proxies, one thread each and
# run one at a time under valgrind, would slow every client's traffic
# (the explorer's checker still runs under valgrind, in suite unit).
# The client packages (suite clients) run in Python, Node.js and Go:
# valgrind would wrap their interpreters and the harness, not the servers.
[ -n "$WRAPPER" ] && args+=(--wrapper "$WRAPPER" --no-suite examples --no-suite explorer-run --no-suite clients)
# Tests that size themselves down under a wrapper read this
# (tests/fencelockd/test_idle.c: 1,000 idle connections, not 10,000).
export FENCELOCK_TEST_WRAPPER="$WRAPPER"
status=0
rm -f "$BUILD_DIR"/meson-logs/fencelock-tests*.json
meson test -C "$BUILD_DIR" "${args[@]}" || status=$?

python3 - "$BUILD_DIR"/meson-logs/fencelock-tests*.json <<'PY'
import json, sys
passed = failed = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    if r.get("result") in ("OK", "EXPECTEDFAIL"):
        passed += 1
    else:
        failed += 1
print(f"{passed} passed, {failed} failed")
PY
exit $status
