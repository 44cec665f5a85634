#!/bin/sh
# Run one example and check, apart from its own exit status, that it printed
# each expected verdict line (a fixed string per argument after the first).
#   check.sh PROGRAM 'verdict: naive: race shown' 'verdict: locked: ok' ...
set -u
prog=$1
shift
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$prog" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: $prog exited with $rc"
  exit 1
fi
for want in "$@"; do
  if ! grep -qF -- "$want" "$out"; then
    echo "FAIL: no line with: $want"
    exit 1
  fi
done
echo "all verdicts as expected"
