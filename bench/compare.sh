#!/usr/bin/env bash
# fencelock against node-redlock and against the Redis ceiling, in one run
# on one machine, against the same five redis-server masters.
#
#   bench/compare.sh [--quick] [--rounds N]
#
# 1. builds fencelock-bench (release build in build-bench/),
# 2. installs node-redlock 5.0.0-beta.2 and ioredis into a temporary folder
#    (nothing is written into the source tree),
# 3. starts 5 redis-server masters on free 127.0.0.1 ports (no persistence;
#    stopped by their PIDs at exit),
# 4. runs N rounds (default 3), each running the three contestants in a
#    rotated order: redis-benchmark (the ceiling), node-redlock W1-W3 and W5,
#    fencelock W1-W3 with fencing off and on (and W4, fenced writes to
#    storage-guard, when a storage-guard binary is there),
# 5. prints the table of medians and ratios (bench/table.mjs).
#
# Every JSON line is kept in $OUT (default: a file in the temporary folder),
# and copied to $BUILD/bench-results.jsonl at the end. Environment: BUILD
# (build folder), OUT, KEEP=1 keeps the temporary folder.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=3
QUICK=
while [ $# -gt 0 ]; do
  case $1 in
  --quick) QUICK=--quick ;;
  --rounds) ROUNDS=$2; shift ;;
  *) echo "usage: bench/compare.sh [--quick] [--rounds N]" >&2; exit 2 ;;
  esac
  shift
done

for tool in redis-server redis-benchmark redis-cli node npm meson ninja; do
  command -v "$tool" >/dev/null || { echo "compare.sh: $tool not found" >&2; exit 2; }
done

. "$ROOT/bench/lib.sh"
bench_workdir compare
OUT=${OUT:-$WORK/results.jsonl}
: >"$OUT"

# ---- build ----
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" "$ROOT" -Dbuildtype=release -Dtests=false >/dev/null
fi
ninja -C "$BUILD" bench/fencelock-bench >/dev/null
BENCH=$BUILD/bench/fencelock-bench
# W4 needs storage-guard: the one built here, or STORAGE_GUARD=path.
ninja -C "$BUILD" storage-guard/storage-guard >/dev/null 2>&1 || true
STORAGE_GUARD=${STORAGE_GUARD:-$BUILD/storage-guard/storage-guard}
W4=()
if [ -x "$STORAGE_GUARD" ]; then
  W4=(--storage-guard "$STORAGE_GUARD")
else
  echo "compare.sh: no storage-guard at $STORAGE_GUARD: W4 is skipped" >&2
fi

# ---- node-redlock, in the temporary folder ----
install_node_redlock
cp "$ROOT/bench/redlock-peer.mjs" "$WORK/peer/"
REDLOCK_VERSION=$(node -p "require('$WORK/peer/node_modules/redlock/package.json').version")
IOREDIS_VERSION=$(node -p "require('$WORK/peer/node_modules/ioredis/package.json').version")

# ---- five masters ----
start_masters 5

# ---- contestants ----
# The compare-and-delete every Redlock client runs to release: lockcore's
# own, as composed by the build (lockcore/lua/release_plain.lua).
ninja -C "$BUILD" lockcore/release_plain.lua >/dev/null
CAD_SCRIPT=$(cat "$BUILD/lockcore/release_plain.lua")

run_ceiling() { # round
  local p=${PORTS[0]} n1=200000 n16=1000000 nrt=20000
  [ -n "$QUICK" ] && n1=50000 n16=200000 nrt=5000
  # One client, one command at a time: the round trip to one node, the
  # floor under W1's latency.
  redis-cli -p "$p" FLUSHALL >/dev/null
  local line
  line=$(redis-benchmark -h 127.0.0.1 -p "$p" -c 1 -n "$nrt" -P 1 -r 1000000 --csv \
    SET 'lk:__rand_int__' v NX PX 10000 | tail -n 1 | tr -d '"')
  echo "{\"bench\":\"redis-benchmark\",\"round\":$1,\"workload\":\"ceiling\",\"mode\":\"rtt\",\"clients\":1,\"pipeline\":1,\"set_nx_per_s\":$(echo "$line" | cut -d, -f2),\"set_nx_p50_us\":$(echo "$line" | cut -d, -f5 | awk '{print $1 * 1000}')}" >>"$OUT"
  for pipe in 1 16; do
    local n=$n1
    [ $pipe = 16 ] && n=$n16
    redis-cli -p "$p" FLUSHALL >/dev/null
    local sha
    sha=$(redis-cli -p "$p" SCRIPT LOAD "$CAD_SCRIPT")
    local set_rps cad_rps
    set_rps=$(redis-benchmark -h 127.0.0.1 -p "$p" -c 50 -n "$n" -P "$pipe" -r 1000000 --csv \
      SET 'lk:__rand_int__' v NX PX 10000 | tail -n 1 | cut -d, -f2 | tr -d '"')
    cad_rps=$(redis-benchmark -h 127.0.0.1 -p "$p" -c 50 -n "$n" -P "$pipe" -r 1000000 --csv \
      EVALSHA "$sha" 1 'lk:__rand_int__' v | tail -n 1 | cut -d, -f2 | tr -d '"')
    echo "{\"bench\":\"redis-benchmark\",\"round\":$1,\"workload\":\"ceiling\",\"mode\":\"P$pipe\",\"clients\":50,\"pipeline\":$pipe,\"set_nx_per_s\":$set_rps,\"cad_per_s\":$cad_rps}" >>"$OUT"
  done
}

run_peer() { # round
  local spec
  for spec in "w1 single" "w2 shared" "w2 threads" "w3 shared" "w3 threads" "w5 procs"; do
    set -- "$1" $spec
    (cd "$WORK/peer" && node redlock-peer.mjs --nodes "$NODE_LIST" --workload "$2" --mode "$3" \
      --round "$1" $QUICK) >>"$OUT"
  done
}

run_fencelock() { # round
  local w=w1,w2,w3
  [ ${#W4[@]} -gt 0 ] && w=w1,w2,w3,w4
  "$BENCH" --nodes "$NODE_LIST" --workloads "$w" --fencing both --round "$1" $QUICK "${W4[@]}" >>"$OUT"
  # W5 (16 processes, one resource, polling / notified / fair) runs with
  # fencing on only: notification and the fair queue are fencelock's own.
  "$BENCH" --nodes "$NODE_LIST" --workloads w5 --fencing on --round "$1" $QUICK >>"$OUT"
}

LOAD_BEFORE=$(uptime)
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME")" >&2
echo "load before: $LOAD_BEFORE" >&2
echo "redis: $(redis-server --version | cut -d' ' -f3), node $(node --version), redlock $REDLOCK_VERSION, ioredis $IOREDIS_VERSION" >&2
contestants=(run_ceiling run_peer run_fencelock)
for r in $(seq "$ROUNDS"); do
  for k in 0 1 2; do
    c=${contestants[$(((k + r - 1) % 3))]}
    echo "round $r: ${c#run_}" >&2
    "$c" "$r"
  done
done
LOAD_AFTER=$(uptime)
echo "load after: $LOAD_AFTER" >&2

echo "{\"bench\":\"meta\",\"load_before\":\"$(echo "$LOAD_BEFORE" | sed 's/.*average: //')\",\"load_after\":\"$(echo "$LOAD_AFTER" | sed 's/.*average: //')\",\"redlock\":\"$REDLOCK_VERSION\",\"ioredis\":\"$IOREDIS_VERSION\",\"rounds\":$ROUNDS}" >>"$OUT"
node "$ROOT/bench/table.mjs" "$OUT"
cp "$OUT" "$BUILD/bench-results.jsonl"
echo "all results: $BUILD/bench-results.jsonl" >&2
