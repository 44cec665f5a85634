#!/usr/bin/env bash
# The nodes' work per lock cycle, counted, not timed: fencelock-bench's W1
# (sequential acquire + release of the plain lock, a new resource each
# cycle) and W6 (one cycle: each lock kind once, as W1 does) built from
# REV (A) and from the working tree (B), each against one redis-server
# run under valgrind's callgrind, which counts the instructions the node
# executes. A W1 run of 350 cycles (--quick) and one of 2200 differ only
# in 1850 cycles (W6: 175 and 1100, 925), so their difference over that
# is one cycle's instructions, without the connection set-up, the
# scripts' loading and the node's own start. Unlike a timed run this does
# not move with the machine's load: it measures what "node CPU per
# operation" means, on a busy machine too.
#
#   bench/node-cost.sh REV [--fencing on|off|both] [--workloads w1,w6] [--client]
#
# With --client, fencelock-bench runs under callgrind too, and its own
# instructions per cycle are counted the same way (one node: each step's
# reply wakes the client once, so this count repeats as well).
#
# Prints one JSON line per side and fencing, then B / A. Needs valgrind.
# Environment: BUILD (default build-bench/), KEEP=1 keeps the temporary folder.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: bench/node-cost.sh REV [--fencing on|off|both] [--workloads w1,w6] [--client]" >&2; exit 2; }
REV=$1
shift
FENCING=both
WORKLOADS=w1
CLIENT=0
while [ $# -gt 0 ]; do
  case $1 in
  --fencing) FENCING=$2; shift ;;
  --workloads) WORKLOADS=$2; shift ;;
  --client) CLIENT=1 ;;
  *) echo "bench/node-cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case $FENCING in on | off) FENCINGS=$FENCING ;; both) FENCINGS="off on" ;; *) echo "node-cost.sh: --fencing on|off|both" >&2; exit 2 ;; esac
for tool in git redis-server redis-cli meson ninja valgrind callgrind_control python3; do
  command -v "$tool" >/dev/null || { echo "node-cost.sh: $tool not found" >&2; exit 2; }
done

. "$ROOT/bench/lib.sh"
bench_workdir node-cost
build_both "$REV"
echo "A: $(git -C "$ROOT" rev-parse --short "$REV")  B: working tree" >&2

# node_ir BINARY WORKLOAD FENCING QUICK: the instructions one node ran for
# a run of the workload (from its start to its shutdown); with --client,
# then on the same line the client's (from its start to its exit).
node_ir() {
  local port dir pid out ok=0 try
  # Ports below 32768, out of the kernel's range for outgoing connections,
  # which other programs' clients may take between the check and the bind;
  # a node that still cannot bind is started again on another.
  for try in 1 2 3 4 5; do
    port=$(free_port $((20000 + RANDOM % 12000)))
    dir=$WORK/node-$port
    out=$dir/callgrind.out
    mkdir -p "$dir"
    valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --port "$port" --bind 127.0.0.1 \
      --save '' --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 300); do
      if redis-cli -p "$port" ping >/dev/null 2>&1 && kill -0 "$pid" 2>/dev/null; then ok=1; break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    [ $ok = 1 ] && break
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ $ok = 1 ] || { echo "node-cost.sh: redis-server under valgrind did not start (tried 5 ports)" >&2; exit 1; }
  # One node under valgrind answers a step in a few milliseconds, inside
  # the default request timeout (50 ms); W1 stops at its first error,
  # W6 counts them.
  local run=()
  [ "$CLIENT" = 0 ] || run=(valgrind --tool=callgrind --callgrind-out-file="$dir/client.out")
  "${run[@]}" "$1" --nodes "127.0.0.1:$port" --workloads "$2" --fencing "$3" $4 >"$dir/json" 2>"$dir/client.log" ||
    { echo "node-cost.sh: the $2 run failed" >&2; exit 1; }
  ! grep -q '"errors":[1-9]' "$dir/json" || { echo "node-cost.sh: the $2 run had errors" >&2; exit 1; }
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  local node client=
  node=$(awk '/^summary:/ { print $2 }' "$out")
  [ "$CLIENT" = 0 ] || client=$(awk '/^summary:/ { print $2 }' "$dir/client.out")
  echo "$node $client"
}

for w in ${WORKLOADS//,/ }; do
  case $w in w1) cycles=1850 ;; w6) cycles=925 ;; *) echo "node-cost.sh: workloads w1, w6" >&2; exit 2 ;; esac
  for f in $FENCINGS; do
    for side in A B; do
      bin=$A
      [ $side = B ] && bin=$B
      out=$(node_ir "$bin" "$w" "$f" --quick)
      read -r -a short <<<"$out"
      out=$(node_ir "$bin" "$w" "$f" "")
      read -r -a long <<<"$out"
      client=
      [ "$CLIENT" = 0 ] || client=",\"client_instructions_per_cycle\":$(((long[1] - short[1]) / cycles))"
      echo "{\"bench\":\"node-cost\",\"side\":\"$side\",\"workload\":\"$w\",\"fencing\":\"$f\",\"node_instructions_per_cycle\":$(((long[0] - short[0]) / cycles))$client}"
    done
  done
done | tee "$WORK/results.jsonl"

python3 - "$WORK/results.jsonl" <<'EOF'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    for who in ('node', 'client'):
        if who + '_instructions_per_cycle' in j:
            rows.setdefault((j['workload'], j['fencing'], who), {})[j['side']] = j[who + '_instructions_per_cycle']
print('\n%-4s %-8s %-6s %14s %14s %7s' % ('work', 'fencing', 'who', 'A instr/cycle', 'B instr/cycle', 'B/A'))
for (w, f, who), s in rows.items():
    print('%-4s %-8s %-6s %14d %14d %7.2f' % (w, f, who, s['A'], s['B'], s['B'] / s['A']))
EOF
