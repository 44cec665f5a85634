#!/usr/bin/env bash
# fencelockd against the library it serves and against etcd's own lock,
# on this machine, with bench/fencelockd-bench (docs/benchmarks.md,
# "fencelockd"):
#
#   bench/fencelockd.sh [--rounds N] [--seconds S] [--waiters N]
#
# 1. installs Debian's etcd-server if etcd is missing (apt-get; root or
#    sudo) and builds fencelock (release, in build-bench/),
# 2. starts 3 redis-server masters (no persistence), one fencelockd on
#    them, and 3 etcd members (data in /dev/shm: the redis nodes keep
#    nothing on disk either), all on free 127.0.0.1 ports, stopped by their
#    PIDs at exit,
# 3. runs N rounds (default 3), each: the library's W1 (one client, 2000
#    acquire + release cycles), lock + unlock cycles over keep-alive HTTP
#    through fencelockd and through etcd's JSON gateway (/v3/lock/lock and
#    /v3/lock/unlock, a lease per client) with 1, 64 and 256 clients on
#    distinct locks (the order swapped every round), the 256 through
#    fencelockd also against the library's W2 with a client per worker (64
#    threads), and WAITERS (default 10000) requests long-polling on 100
#    held resources: fencelockd's memory and CPU per waiter and the
#    commands the nodes see while nobody releases,
# 4. prints one JSON line per measurement, then the medians over the
#    rounds and the goals, met or not.
# Environment: BUILD (build folder), OUT (the JSON lines; default a file in
# the temporary folder), KEEP=1 keeps the temporary folder.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
ROUNDS=3
SECONDS_PER=5
WAITERS=10000
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) ROUNDS=$2; shift ;;
  --seconds) SECONDS_PER=$2; shift ;;
  --waiters) WAITERS=$2; shift ;;
  *) echo "usage: bench/fencelockd.sh [--rounds N] [--seconds S] [--waiters N]" >&2; exit 2 ;;
  esac
  shift
done

if ! command -v etcd >/dev/null; then
  SUDO=
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends etcd-server
fi
for tool in redis-server redis-cli etcd curl meson ninja python3; do
  command -v "$tool" >/dev/null || { echo "fencelockd.sh: $tool not found" >&2; exit 2; }
done

. "$ROOT/bench/lib.sh"
bench_workdir fencelockd
OUT=${OUT:-$WORK/results.jsonl}
cleanup_all() {
  bench_cleanup
  [ -z "${ETCD_DATA:-}" ] || rm -rf "$ETCD_DATA"
}
trap cleanup_all EXIT

if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" "$ROOT" --buildtype=release -Dtests=false >/dev/null
fi
meson compile -C "$BUILD" fencelockd/fencelockd bench/fencelockd-bench >/dev/null
B=$BUILD/bench/fencelockd-bench

start_masters 3
"$BUILD/fencelockd/fencelockd" --nodes "$NODE_LIST" --listen 127.0.0.1:0 --port-file "$WORK/fld.port" \
  --log-level warn --max-wait 2m >"$WORK/fencelockd.log" 2>&1 &
FLD_PID=$!
PIDS+=("$FLD_PID")
for _ in $(seq 100); do [ -s "$WORK/fld.port" ] && break; sleep 0.1; done
FLD_PORT=$(cat "$WORK/fld.port")
start_etcd 3
ETCD_PORT=${ENDPOINTS%%,*}
ETCD_PORT=${ETCD_PORT##*:}

run() { "$B" "$@" | tee -a "$OUT"; }
flush() { for p in "${PORTS[@]}"; do redis-cli -p "$p" flushall >/dev/null; done; }

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  flush
  run lib-w1 "$NODE_LIST" 2000
  for clients in 1 64 256; do
    if [ $((round % 2)) = 1 ]; then order="fencelockd etcd"; else order="etcd fencelockd"; fi
    for t in $order; do
      flush
      if [ "$t" = fencelockd ]; then run http fencelockd "$FLD_PORT" "$clients" "$SECONDS_PER"
      else run http etcd "$ETCD_PORT" "$clients" "$SECONDS_PER"; fi
    done
  done
  flush
  run lib-w2 "$NODE_LIST" 64 "$SECONDS_PER"
  flush
  run waiters "$FLD_PORT" "$FLD_PID" "$NODE_LIST" "$WAITERS" 100 10
  sleep 1
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(pred, key):
    v = [r[key] for r in rows if pred(r)]
    return statistics.median(v) if v else float("nan")
http = lambda t, c: (lambda r: r["bench"] == "http" and r["target"] == t and r["clients"] == c)
w1_p50 = med(lambda r: r["bench"] == "lib-w1", "p50_ms")
f1_p50 = med(http("fencelockd", 1), "p50_ms")
print("medians over %d rounds" % len([r for r in rows if r["bench"] == "lib-w1"]))
print("library W1: p50 %.3f ms, %.0f cycles/s" % (w1_p50, med(lambda r: r["bench"] == "lib-w1", "cycles_per_s")))
for c in (1, 64, 256):
    f = (med(http("fencelockd", c), "cycles_per_s"), med(http("fencelockd", c), "p50_ms"), med(http("fencelockd", c), "p99_ms"))
    e = (med(http("etcd", c), "cycles_per_s"), med(http("etcd", c), "p50_ms"), med(http("etcd", c), "p99_ms"))
    print("%3d client(s): fencelockd %.0f cycles/s p50 %.3f p99 %.3f ms | etcd %.0f cycles/s p50 %.3f p99 %.3f ms"
          % ((c,) + f + e))
    print("    goal >= 3x etcd's cycles/s: %.2fx %s; p99 <= half etcd's: %.2fx %s"
          % (f[0] / e[0], "met" if f[0] >= 3 * e[0] else "NOT met", f[2] / e[2], "met" if f[2] <= e[2] / 2 else "NOT met"))
print("goal p50 within 2x of W1: fencelockd 1 client p50 / W1 p50 = %.2f %s"
      % (f1_p50 / w1_p50, "met" if f1_p50 <= 2 * w1_p50 else "NOT met"))
f256 = med(http("fencelockd", 256), "cycles_per_s")
w2 = med(lambda r: r["bench"] == "lib-w2", "cycles_per_s")
print("goal 256 HTTP clients >= half of W2 client-per-worker: %.0f / %.0f = %.2f %s"
      % (f256, w2, f256 / w2, "met" if f256 >= w2 / 2 else "NOT met"))
w = lambda k: med(lambda r: r["bench"] == "waiters", k)
print("waiters: %d on 100 resources: %.0f bytes RSS per waiter, %.1f us CPU per waiter to set up, "
      "%.3f s CPU in %.0f s idle, %.0f node commands in %.0f s (%.1f/s; the queue refreshes)"
      % (w("waiters"), w("rss_bytes_per_waiter"), w("cpu_s_per_waiter_setup_us"), w("cpu_s_idle"),
         w("idle_seconds"), w("node_commands_idle"), w("idle_seconds"), w("node_commands_per_s")))
PY
