#!/usr/bin/env bash
# A client of fencelock-replay in shell (docs/testing.md, "The replay client
# protocol"). It takes the lock with the fencelock command, writes with curl,
# and reports each step on stdout as one JSON line.
#
#   fencelock-replay --client examples/replay-clients/client.sh gc-pause
#
# With --storage postgresql://... it writes to your own table instead, the
# row of --key in records (key text PRIMARY KEY, value text), guarded by
# fencelock.admit() in the same transaction (fencelock.sql, see
# docs/guarding-your-database.md), through psql ($PSQL, else from PATH);
# it reports 200 when the write committed and 409 when the token was stale.
#
# Needs bash, curl, sed and fencelock ($FENCELOCK, else from PATH). Shell
# cannot read CLOCK_MONOTONIC, so the events carry no "t": the replay stamps
# each line when it reads it. The lease is measured on /proc/uptime, which
# never jumps. Not supported: --no-validity-check (fencelock always checks),
# and so the first two runs of acquire-pause; its third run stops this
# script while the fencelock child it waits for goes on, which is not the
# story that run tells.
set -u

FENCELOCK=${FENCELOCK:-fencelock}
PSQL=${PSQL:-psql}
name=A nodes='' storage='' resource=ledger key=ledger value='' ttl=10000 wait=0 fencing=1 go=''

usage() {
  echo "usage: $0 --nodes URL,... --storage HOST:PORT|postgresql://... --value V [--name N] [--resource R] [--key K]" >&2
  echo "       [--ttl MS] [--wait MS] [--no-fencing] [--go before-check|before-write]" >&2
  exit 64
}

while [ $# -gt 0 ]; do
  case $1 in
    --name | --nodes | --storage | --resource | --key | --value | --ttl | --wait | --go)
      [ $# -ge 2 ] || usage
      case $1 in
        --name) name=$2 ;;
        --nodes) nodes=$2 ;;
        --storage) storage=$2 ;;
        --resource) resource=$2 ;;
        --key) key=$2 ;;
        --value) value=$2 ;;
        --ttl) ttl=$2 ;;
        --wait) wait=$2 ;;
        --go) go=$2 ;;
      esac
      shift 2 ;;
    --no-fencing) fencing=0; shift ;;
    *) echo "$0: unsupported: $1" >&2; usage ;;
  esac
done
[ -n "$nodes" ] && [ -n "$storage" ] && [ -n "$value" ] || usage
case $go in '' | before-check | before-write) ;; *) usage ;; esac

tmp=$(mktemp -d) || exit 70
trap 'rm -rf "$tmp"' EXIT

emit() { printf '%s\n' "$1"; }

# A JSON string: backslashes and quotes escaped (the replay's values have no
# control characters).
json_str() {
  local s=${1//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}

# A number or string field of fencelock's one-line JSON output.
field() {
  printf '%s' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# Milliseconds on /proc/uptime (centiseconds; monotonic, never stepped).
now_ms() {
  local up
  read -r up _ </proc/uptime
  echo $((10#${up/./} * 10))
}

# Write to storage-guard; the HTTP status.
write_http() {
  local body
  body="{\"value\":$(json_str "$value"),\"resource\":$(json_str "$resource")"
  [ "$fencing" = 1 ] && body+=",\"token\":$token"
  body+="}"
  curl -s --noproxy '*' --max-time 60 -o "$tmp/body" -w '%{http_code}' -X PUT \
    -H 'Content-Type: application/json' --data-binary "$body" "http://$storage/v1/records/$key"
}

# Write to your own table in PostgreSQL: the fencing check and the write in
# one transaction. psql stops at the first error (FL409 for a stale token)
# and the transaction is rolled back. 200, 409, or 0 when it failed.
write_pg() {
  local admit=
  [ "$fencing" = 1 ] && admit="SELECT fencelock.admit(:'resource', :token) \\gset"
  if "$PSQL" -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=sqlstate -d "$storage" -v resource="$resource" \
    -v token="$token" -v key="$key" -v value="$value" >/dev/null 2>"$tmp/psql" <<SQL; then
BEGIN;
$admit
INSERT INTO records (key, value) VALUES (:'key', :'value')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
COMMIT;
SQL
    echo 200
  elif grep -q FL409 "$tmp/psql"; then
    echo 409
  else
    cat "$tmp/psql" >&2
    echo 0
  fi
}

# Wait for the replay's line at a stop; stdin closed ends the client.
stop_at() {
  [ "$go" = "$1" ] || return 0
  read -r _ || exit 4
}

opts=(--nodes "$nodes" --ttl "${ttl}ms" --wait "${wait}ms" --retry-delay 50ms)
[ "$fencing" = 1 ] || opts+=(--no-fencing)

if ! lock=$("$FENCELOCK" "${opts[@]}" acquire "$resource" 2>"$tmp/err"); then
  cat "$tmp/err" >&2
  emit "{\"ev\":\"acquire_failed\",\"error\":$(json_str "$(tail -n 1 "$tmp/err")")}"
  exit 3
fi
id=$(field lock_id "$lock")
token=$(field token "$lock")
validity=$(field validity_ms "$lock")
emit "{\"ev\":\"acquired\",\"token\":$token,\"validity_ms\":$validity,\"nodes_ok\":$(field nodes_granted "$lock")}"

# Check the lease as fencelock counted it: from the start of the round that
# granted it (after any wait for another holder), on CLOCK_MONOTONIC.
# /proc/uptime never runs behind that clock (it counts suspended time too),
# but shows only centiseconds: 10 ms off the lease cover them.
valid_until=$(field valid_until_mono_ms "$lock")
stop_at before-check
left=$((valid_until - 10 - $(now_ms)))
[ "$left" -gt 0 ] || left=0
emit "{\"ev\":\"checked\",\"remaining_ms\":$left}"

if [ "$left" -gt 0 ]; then
  stop_at before-write
  emit "{\"ev\":\"writing\",\"value\":$(json_str "$value"),\"token\":$token}"
  case $storage in
    postgresql://* | postgres://*) status=$(write_pg) ;;
    *) status=$(write_http) ;;
  esac
  emit "{\"ev\":\"written\",\"status\":$((10#${status:-0}))}"
fi

rc=0
released=$("$FENCELOCK" --nodes "$nodes" release "$resource" "$id") || rc=$?
emit "{\"ev\":\"released\",\"rc\":$rc,\"nodes_ok\":$(field nodes_released "$released" | grep . || echo 0)}"
exit 0
