#!/usr/bin/env bash
# fencelock against an earlier fencelock: fencelock-bench built from REV
# (A) and from the working tree (B), run in turn against the same five
# redis-server masters, the order swapped every round (A B, B A, ...), so
# that the machine's load falls on both alike.
#
#   bench/ab.sh REV [--rounds N] [--workloads w1,w2,w5,w6] [--fencing on|off|both] [--quick]
#
# REV is built in a temporary git worktree (release, no tests); the working
# tree in $BUILD (default build-bench/). Prints one JSON line per
# measurement (with "side":"A" or "B"), then for every workload, mode and
# fencing the medians over the rounds of the main numbers and B / A.
# Environment: BUILD, OUT (the JSON lines; default a file in the temporary
# folder), KEEP=1 keeps the temporary folder.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
[ $# -ge 1 ] || { echo "usage: bench/ab.sh REV [--rounds N] [--workloads LIST] [--fencing on|off|both] [--quick]" >&2; exit 2; }
REV=$1
shift
ROUNDS=3
WORKLOADS=w1,w2,w5,w6
FENCING=on
QUICK=
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) ROUNDS=$2; shift ;;
  --workloads) WORKLOADS=$2; shift ;;
  --fencing) FENCING=$2; shift ;;
  --quick) QUICK=--quick ;;
  *) echo "bench/ab.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for tool in git redis-server redis-cli meson ninja python3; do
  command -v "$tool" >/dev/null || { echo "ab.sh: $tool not found" >&2; exit 2; }
done

. "$ROOT/bench/lib.sh"
bench_workdir ab
OUT=${OUT:-$WORK/results.jsonl}
: >"$OUT"
build_both "$REV"

start_masters 5
echo "A: $(git -C "$ROOT" rev-parse --short "$REV")  B: working tree  nodes: $NODE_LIST" >&2

run() { # side binary round; a run that fails (a node too slow to answer on a
         # loaded machine) is reported, and the rounds go on
  "$2" --nodes "$NODE_LIST" --workloads "$WORKLOADS" --fencing "$FENCING" --modes shared \
    --round "$3" $QUICK | sed "s/^{/{\"side\":\"$1\",/" | tee -a "$OUT" ||
    echo "ab.sh: side $1, round $3 failed; its lines so far are kept" >&2
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run A "$A" "$r"; run B "$B" "$r"; else run B "$B" "$r"; run A "$A" "$r"; fi
  redis-cli -p "${PORTS[0]}" ping >/dev/null
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
KEYS = ['acquire_p50_us', 'release_p50_us', 'cycles_per_s', 'grants_per_s', 'handoffs_per_s', 'gap_p50_us',
        'wait_p99_us', 'commands_per_grant', 'client_cpu_us_per_op']
rows = {}
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    k = (j.get('workload'), j.get('mode'), j.get('fencing'))
    for key in KEYS:
        if isinstance(j.get(key), (int, float)):
            rows.setdefault(k, {}).setdefault(key, {}).setdefault(j['side'], []).append(j[key])
print('\n%-4s %-20s %-3s %-22s %12s %12s %7s' % ('work', 'mode', 'fen', 'median of', 'A', 'B', 'B/A'))
for k in sorted(rows, key=str):
    for key, sides in rows[k].items():
        if 'A' in sides and 'B' in sides:
            a, b = statistics.median(sides['A']), statistics.median(sides['B'])
            print('%-4s %-20s %-3s %-22s %12.1f %12.1f %7s' % (k[0], k[1], k[2], key, a, b,
                                                                '%.2f' % (b / a) if a else '-'))
EOF
