#!/bin/sh
# A GC-pause test in shell, against the installed programs: redis-server,
# storage-guard and the fencelock CLI, plus curl. Client A takes the lock,
# reads, stalls past its TTL (the "GC pause"); client B takes the lock and
# writes; A's late write must be refused (409), and storage-guard's audit
# log must show it. Exits 0 when all holds, 1 otherwise. Every process it
# starts is stopped by its PID; every wait is bounded.
set -eu

dir=$(mktemp -d "${TMPDIR:-/tmp}/gc-pause-test-XXXXXX")
pids=""
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_for() { # seconds, command...: retry the command until it succeeds
  n=$(( $1 * 10 )); shift
  while [ "$n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}

nodes=""
for i in 1 2 3; do
  port=$(free_port)
  mkdir "$dir/node$i"
  redis-server --save '' --appendonly no --bind 127.0.0.1 --port "$port" --dir "$dir/node$i" \
    --daemonize no >"$dir/node$i.log" 2>&1 &
  pids="$pids $!"
  wait_for 10 redis-cli -p "$port" ping || fail "redis-server on port $port did not start"
  nodes="$nodes${nodes:+,}127.0.0.1:$port"
done
export FENCELOCK_NODES="$nodes"

storage-guard --db "$dir/records.db" --listen 127.0.0.1:0 --port-file "$dir/sg.port" 2>"$dir/sg.log" &
pids="$pids $!"
wait_for 15 test -s "$dir/sg.port" || fail "storage-guard did not start"
SG="http://127.0.0.1:$(cat "$dir/sg.port")"

token_of() { sed -n 's/.*"token":\([0-9]*\).*/\1/p'; }
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

# Client A: lock, fenced read.
token_a=$(fencelock --ttl 1s acquire balance | token_of)
[ -n "$token_a" ] || fail "client A got no lock"
[ "$(status "$SG/v1/records/balance?token=$token_a")" = 404 ] || fail "A's fenced read"

sleep 1.5 # A's "GC pause": its lease runs out

# Client B: lock, fenced read, write.
token_b=$(fencelock --ttl 1s acquire balance | token_of)
[ -n "$token_b" ] || fail "client B got no lock after A's lease ran out"
[ "$token_b" -gt "$token_a" ] || fail "B's token $token_b is not above A's $token_a"
[ "$(status -X PUT "$SG/v1/records/balance" -d "{\"value\": 100, \"token\": $token_b}")" = 200 ] ||
  fail "B's write was not accepted"

# A wakes up and writes what it computed before the pause.
got=$(status -X PUT "$SG/v1/records/balance" -d "{\"value\": 1, \"token\": $token_a}")
[ "$got" = 409 ] || fail "A's late write got $got, not 409 stale_token"

# The audit log: B's write accepted, A's write refused as stale.
log=$(curl -s "$SG/v1/log?resource=balance")
echo "$log" | grep -q "\"token\":$token_b,[^}]*\"outcome\":\"accepted\"" || fail "B's write is not in the log: $log"
echo "$log" | grep -q "\"token\":$token_a,[^}]*\"outcome\":\"stale\"" || fail "A's refusal is not in the log: $log"
[ "$(curl -s "$SG/v1/records/balance" | sed -n 's/.*"value":\([0-9]*\).*/\1/p')" = 100 ] ||
  fail "the record does not hold B's value"

echo "gc-pause-test.sh: A's late write was refused; B's write stands"
