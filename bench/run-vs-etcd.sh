#!/usr/bin/env bash
# `fencelock run` against `etcdctl lock`, the tool a shell user would pick
# instead: both as whole processes, on this machine, each against three
# servers on loopback (three redis-server masters without persistence;
# three etcd members, their data in memory, see --etcd-disk).
#
#   bench/run-vs-etcd.sh [--rounds N] [--runs N] [--seconds S] [--procs P] [--etcd-disk]
#
# 1. installs Debian's etcd-server and etcd-client if etcd is missing
#    (apt-get; root or sudo) and builds fencelock (release, in build-bench/),
# 2. starts 3 redis-server masters and 3 etcd members on free 127.0.0.1
#    ports (temporary folder; stopped by their PIDs at exit),
# 3. runs N rounds (default 5), each measuring both tools in turn, the
#    order swapped every round (A B, B A, ...):
#    - one: RUNS (default 20) runs of `fencelock run L -- true` and of
#      `etcdctl lock L true` one after the other: wall time per run, and
#      the CPU time (user + sys) of the runs;
#    - contention: P processes (default 16), each running the tool in a loop
#      on one lock for S seconds (default 5): grants per second, all
#      processes together,
# 4. prints one JSON line per measurement, then the medians over the rounds
#    and the ratios fencelock / etcd.
#
# etcd's data lives in /dev/shm unless --etcd-disk: the redis nodes keep
# nothing on disk either, and etcd fsyncs its log on every write, which
# on a slow disk would measure the disk, not the lock.
# Environment: BUILD (build folder), OUT (the JSON lines; default a file in
# the temporary folder), KEEP=1 keeps the temporary folder.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=5
RUNS=20
SECONDS_PER=5
PROCS=16
ETCD_DISK=0
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) ROUNDS=$2; shift ;;
  --runs) RUNS=$2; shift ;;
  --seconds) SECONDS_PER=$2; shift ;;
  --procs) PROCS=$2; shift ;;
  --etcd-disk) ETCD_DISK=1 ;;
  *) echo "usage: bench/run-vs-etcd.sh [--rounds N] [--runs N] [--seconds S] [--procs P] [--etcd-disk]" >&2; exit 2 ;;
  esac
  shift
done

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
  SUDO=
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends etcd-server etcd-client
fi
for tool in redis-server redis-cli etcd etcdctl meson ninja python3; do
  command -v "$tool" >/dev/null || { echo "run-vs-etcd.sh: $tool not found" >&2; exit 2; }
done

. "$ROOT/bench/lib.sh"
bench_workdir etcd
OUT=${OUT:-$WORK/results.jsonl}

if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" "$ROOT" --buildtype=release -Dtests=false >/dev/null
fi
meson compile -C "$BUILD" tools/fencelock >/dev/null
FL=$BUILD/tools/fencelock

cleanup_all() {
  bench_cleanup
  [ "$ETCD_DISK" = 1 ] || [ -z "${ETCD_DATA:-}" ] || rm -rf "$ETCD_DATA"
}
trap cleanup_all EXIT

start_masters 3
start_etcd 3

fl_cmd=("$FL" --nodes "$NODE_LIST" --wait 30s run)
etcd_cmd=(etcdctl --endpoints="$ENDPOINTS" lock)
# The command line of a tool, with the lock name: "fencelock"/"etcd" L.
tool_cmd() {
  if [ "$1" = fencelock ]; then echo "${fl_cmd[@]}" "$2" -- true; else echo "${etcd_cmd[@]}" "$2" true; fi
}
run_tool() { # tool lock
  if [ "$1" = fencelock ]; then "${fl_cmd[@]}" "$2" -- true; else "${etcd_cmd[@]}" "$2" true; fi
}

# one TOOL ROUND: RUNS runs in a row; per-run wall ms (median) and CPU ms
# per run, from the children's user + sys time.
one() {
  local tool=$1 round=$2 i t0 t1 walls=() failed=0
  local cpu0 cpu1
  cpu0=$(children_cpu_ms)
  for i in $(seq "$RUNS"); do
    t0=${EPOCHREALTIME/./}
    run_tool "$tool" "one-$round" >/dev/null 2>&1 || failed=$((failed + 1))
    t1=${EPOCHREALTIME/./}
    walls+=("$((t1 - t0))")
  done
  cpu1=$(children_cpu_ms)
  local med
  med=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1000}')
  echo "{\"bench\":\"one\",\"tool\":\"$tool\",\"round\":$round,\"runs\":$RUNS,\"failed\":$failed,\"wall_ms_median\":$med,\"cpu_ms_per_run\":$(awk "BEGIN {print ($cpu1 - $cpu0) / $RUNS}")}" | tee -a "$OUT"
}

# User + sys time of this shell's reaped children, in ms (cutime and
# cstime of /proc/PID/stat, in clock ticks; $$ is this shell even in a
# command substitution).
TICK=$(getconf CLK_TCK)
children_cpu_ms() {
  awk -v t="$TICK" '{sub(/^.*\) /, ""); print int(($14 + $15) * 1000 / t)}' "/proc/$$/stat"
}

# contention TOOL ROUND: PROCS loops on one lock for SECONDS_PER seconds.
contention() {
  local tool=$1 round=$2 i start end
  local dir=$WORK/contention-$tool-$round
  mkdir -p "$dir"
  start=${EPOCHREALTIME/./}
  end=$((start + SECONDS_PER * 1000000))
  local pids=()
  for i in $(seq "$PROCS"); do
    (
      n=0 f=0
      while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
        if run_tool "$tool" "busy-$round" >/dev/null 2>&1; then n=$((n + 1)); else f=$((f + 1)); fi
      done
      echo "$n $f" >"$dir/$i"
    ) &
    pids+=("$!")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  local stop=${EPOCHREALTIME/./}
  local grants failures
  grants=$(cat "$dir"/* | awk '{s += $1} END {print s}')
  failures=$(cat "$dir"/* | awk '{s += $2} END {print s}')
  echo "{\"bench\":\"contention\",\"tool\":\"$tool\",\"round\":$round,\"procs\":$PROCS,\"grants\":$grants,\"failed\":$failures,\"seconds\":$(awk "BEGIN {print ($stop - $start) / 1e6}"),\"grants_per_s\":$(awk "BEGIN {print $grants / (($stop - $start) / 1e6)}")}" | tee -a "$OUT"
}

echo "fencelock: $(tool_cmd fencelock L)"
echo "etcd:      $(tool_cmd etcd L)"
# Warm-up: page caches, connections, the first etcd elections.
for _ in 1 2 3; do run_tool fencelock warm >/dev/null 2>&1 || true; run_tool etcd warm >/dev/null 2>&1 || true; done

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order=(fencelock etcd); else order=(etcd fencelock); fi
  for tool in "${order[@]}"; do one "$tool" "$round"; done
  for tool in "${order[@]}"; do contention "$tool" "$round"; done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(bench, tool, key):
    return statistics.median(r[key] for r in rows if r["bench"] == bench and r["tool"] == tool)
one_f, one_e = med("one", "fencelock", "wall_ms_median"), med("one", "etcd", "wall_ms_median")
cpu_f, cpu_e = med("one", "fencelock", "cpu_ms_per_run"), med("one", "etcd", "cpu_ms_per_run")
con_f, con_e = med("contention", "fencelock", "grants_per_s"), med("contention", "etcd", "grants_per_s")
failed = sum(r["failed"] for r in rows)
print(f"one run, wall ms (median of rounds): fencelock {one_f:.2f}, etcdctl {one_e:.2f}; "
      f"ratio fencelock/etcd {one_f / one_e:.2f} (goal <= 0.50: {'met' if one_f / one_e <= 0.5 else 'not met'})")
print(f"one run, CPU ms: fencelock {cpu_f:.2f}, etcdctl {cpu_e:.2f}; ratio {cpu_f / cpu_e:.2f}")
print(f"contention, grants/s (median of rounds): fencelock {con_f:.1f}, etcd {con_e:.1f}; "
      f"ratio fencelock/etcd {con_f / con_e:.2f} (goal >= 1.5: {'met' if con_f / con_e >= 1.5 else 'not met'})")
print(f"failed runs: {failed}")
PY
echo "results: $OUT"
