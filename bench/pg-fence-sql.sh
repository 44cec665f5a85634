#!/usr/bin/env bash
# The cost of PostgreSQL's fence as fencelock.sql installs it (schema
# fencelock, SECURITY DEFINER functions with a pinned search_path) against
# the layout before it (tests/fencestore/old-layout/fencelock.sql: plain
# functions in public), with pgbench on one server (docs/benchmarks.md,
# "PostgreSQL's fence, hardened"):
#
#   bench/pg-fence-sql.sh [--rounds N] [--seconds S] [--clients C]
#
# Starts a PostgreSQL 15 cluster of its own (Debian's, in a temporary
# directory, a free port, fsync and synchronous_commit as the defaults),
# installs each SQL in a database of its own, and runs, interleaved
# old/new (the order swapped every round), a guarded write per transaction:
# BEGIN; try_admit a growing token for one of 1,000 resources; an upsert into
# a table of records; COMMIT. NEW_SQL=FILE measures another SQL in place of
# fencelock.sql. Prints one JSON line per run and the median
# ratio new/old of transactions/s.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=3
SECONDS_PER=10
CLIENTS=4
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) ROUNDS=$2; shift ;;
  --seconds) SECONDS_PER=$2; shift ;;
  --clients) CLIENTS=$2; shift ;;
  *) echo "usage: bench/pg-fence-sql.sh [--rounds N] [--seconds S] [--clients C]" >&2; exit 2 ;;
  esac
  shift
done
BIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
for tool in initdb pg_ctl pgbench psql; do
  [ -x "$BIN/$tool" ] || { echo "pg-fence-sql: $BIN/$tool is missing (postgresql-15)" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/pg-fence-sql.XXXXXX)
chmod 755 "$TMP"
as_pg=()
[ "$(id -u)" = 0 ] && { chown postgres "$TMP"; as_pg=(runuser -u postgres --); }
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
  "${as_pg[@]}" "$BIN/pg_ctl" -D "$TMP/d" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"${as_pg[@]}" "$BIN/initdb" -D "$TMP/d" -U fencelock --auth=trust >/dev/null
"${as_pg[@]}" "$BIN/pg_ctl" -D "$TMP/d" -l "$TMP/log" -w \
  -o "-p $PORT -k $TMP -c listen_addresses=127.0.0.1 -c max_connections=50" start >/dev/null
psql_() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U fencelock "$@"; }
psql_ -d postgres -c "CREATE DATABASE old_sql" -c "CREATE DATABASE new_sql"
psql_ -d old_sql -f "$ROOT/tests/fencestore/old-layout/fencelock.sql" >/dev/null
psql_ -d new_sql -f "${NEW_SQL:-$ROOT/fencestore/sql/fencelock.sql}" >/dev/null 2>&1
for db in old_sql new_sql; do
  psql_ -d "$db" -c "CREATE TABLE records (key text PRIMARY KEY, value text NOT NULL)"
done
# Tokens grow with the clock (microseconds), as fencelock's do; try_admit,
# as fencestore_admit and storage-guard call it, so that a token taken
# before waiting for another writer's row lock is not an error that would
# end a pgbench client (the rare stale ones raise nothing, in both).
cat >"$TMP/old.sql" <<'EOF'
\set r random(1, 1000)
BEGIN;
SELECT fencelock_try_admit('res-' || :r, (extract(epoch from clock_timestamp()) * 1000000)::bigint);
INSERT INTO records VALUES ('res-' || :r, 'v') ON CONFLICT (key) DO UPDATE SET value = excluded.value;
COMMIT;
EOF
sed 's/fencelock_try_admit(/fencelock.try_admit(/' "$TMP/old.sql" >"$TMP/new.sql"
run() { # which
  local tps
  tps=$("$BIN/pgbench" -n -h 127.0.0.1 -p "$PORT" -U fencelock -c "$CLIENTS" -j 2 -T "$SECONDS_PER" \
    -f "$TMP/$1.sql" "$1_sql" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
  echo "{\"bench\":\"pg-fence-sql\",\"sql\":\"$1\",\"clients\":$CLIENTS,\"seconds\":$SECONDS_PER,\"tps\":${tps:-0}}"
}
results=$TMP/results.jsonl
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do run "$which" | tee -a "$results"; done
done
python3 - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
old = [r["tps"] for r in rows if r["sql"] == "old"]
new = [r["tps"] for r in rows if r["sql"] == "new"]
print("old layout: median %.0f tx/s; fencelock.sql: median %.0f tx/s; ratio new/old %.3f"
      % (statistics.median(old), statistics.median(new), statistics.median(new) / statistics.median(old)))
EOF
