#!/usr/bin/env bash
# node-redlock and fencelock exclude each other on the same resource: both
# lock the key named after the resource with SET NX PX and a random value,
# and release it with a compare-and-delete. This checks it against real
# nodes, with fencing on and off on the fencelock side.
#
#   bench/interop.sh            (needs node and npm; installs node-redlock
#                                5.0.0-beta.2 and ioredis into a temp folder)
# Prints one line per check and "N passed, N failed"; exits 1 if any failed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT" >/dev/null
ninja -C "$BUILD" tools/fencelock >/dev/null
FENCELOCK=$BUILD/tools/fencelock

. "$ROOT/bench/lib.sh"
bench_workdir interop
install_node_redlock
cp "$ROOT/bench/interop-peer.mjs" "$WORK/peer/"

start_masters 3
LIST=$NODE_LIST

pass=0 fail=0
check() { # description, command...
  local what=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $what"; else fail=$((fail + 1)); echo "FAIL $what"; fi
}
peer() { (cd "$WORK/peer" && node interop-peer.mjs --nodes "$LIST" "$@"); }
fl_refused() { # fencelock acquire must be refused as held (exit 75)
  local rc=0
  "$FENCELOCK" --nodes "$LIST" --wait 0 "$@" >/dev/null 2>&1 || rc=$?
  [ "$rc" = 75 ]
}

fl_acquires() { "$FENCELOCK" --nodes "$LIST" --wait 0 "$@" >/dev/null 2>&1; }

for mode in "" --no-fencing; do
  tag=${mode:-fencing on}
  # node-redlock holds the resource (until its stdin closes): fencelock is refused.
  res="n$RANDOM"
  rm -f "$WORK/fifo" "$WORK/held"
  mkfifo "$WORK/fifo"
  peer acquire "$res" <"$WORK/fifo" >"$WORK/held" &
  holder=$!
  exec 7>"$WORK/fifo"
  for _ in $(seq 100); do [ -s "$WORK/held" ] && break; sleep 0.1; done
  check "node-redlock holds $res (value $(head -c 12 "$WORK/held")...)" [ -s "$WORK/held" ]
  check "node-redlock holds, fencelock ($tag) is refused" fl_refused $mode acquire "$res"
  exec 7>&-
  wait "$holder"
  check "after node-redlock releases, fencelock ($tag) acquires" fl_acquires $mode acquire "$res"
  # fencelock holds the resource: node-redlock is refused.
  res="f$RANDOM"
  lock=$("$FENCELOCK" --nodes "$LIST" $mode acquire "$res")
  id=$(echo "$lock" | sed -n 's/.*"lock_id":"\([0-9a-f]*\)".*/\1/p')
  rc=0; peer try "$res" || rc=$?
  check "fencelock ($tag) holds, node-redlock is refused" [ "$rc" = 75 ]
  "$FENCELOCK" --nodes "$LIST" release "$res" "$id" >/dev/null
  rc=0; peer try "$res" || rc=$?
  check "after fencelock ($tag) releases, node-redlock acquires" [ "$rc" = 0 ]
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
