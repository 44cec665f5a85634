#!/usr/bin/env bash
# Build fencelock's Debian packages from the tree (dpkg-buildpackage -b),
# check them with lintian (no errors), install them on this machine, run
# every installed program (fencelockd and storage-guard with their
# installed configuration, against a real redis-server, reloaded with
# SIGHUP), verify the installed units, then purge the packages and check
# that nothing they brought is left behind. Needs root (apt-get, dpkg).
#   bash scripts/test-packages.sh
# Prints "N passed, N failed" last; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

passed=0
failed=0
check() { # name, command...
  local name=$1; shift
  if "$@"; then
    passed=$((passed + 1)); echo "ok: $name"
  else
    failed=$((failed + 1)); echo "FAILED: $name"
  fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends debhelper dpkg-dev lintian fakeroot adduser systemd \
  redis-server curl openssl gcc pkgconf >/dev/null ||
  { failed=$((failed + 1)); echo "FAILED: apt-get"; finish; }

work=$(mktemp -d "${TMPDIR:-/tmp}/fencelock-deb-XXXXXX")
redis_pid=
fld_pid=
sg_pid=
installed=
cleanup() {
  for p in $fld_pid $sg_pid $redis_pid; do kill "$p" 2>/dev/null; done
  # A run that stopped half-way leaves no package behind either.
  [ -n "$installed" ] && dpkg --purge fencelock fencelockd storage-guard libfencelock-dev libfencelock0 \
    >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# The tree's files only (not a build directory), as a source package would.
src=$work/fencelock
mkdir -p "$src"
if git -C "$root" rev-parse >/dev/null 2>&1; then
  git -C "$root" ls-files -z | (cd "$root" && xargs -0 tar -cf -) | tar -xf - -C "$src"
else
  tar -C "$root" --exclude='./build*' -cf - . | tar -xf - -C "$src"
fi
(cd "$src" && dpkg-buildpackage -b -us -uc -j2 >"$work/build.log" 2>&1)
check "dpkg-buildpackage -b" test $? -eq 0 || { tail -40 "$work/build.log"; finish; }
debs=$(ls "$work"/*.deb | grep -v -- '-dbgsym_')
check "five packages built" test "$(echo "$debs" | wc -l)" -eq 5

lintian --fail-on error "$work"/fencelock_*.changes >"$work/lintian.log" 2>&1
lintian_rc=$?
sed 's/^/lintian: /' "$work/lintian.log"
check "lintian: no errors" test "$lintian_rc" -eq 0

# What the system holds before: the packages must leave it so.
snapshot() {
  {
  find /etc /usr /lib /var/lib /opt -xdev \
    \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/systemd/deb-systemd-helper-enabled \
       -o -path /var/lib/systemd/deb-systemd-helper-masked -o -path /etc/ld.so.cache -o -path /var/lib/ucf \
       -o -path /usr/share/man -o -path /var/cache \) -prune -o -print 2>/dev/null
  getent passwd | cut -d: -f1 | sed 's/^/user:/' | LC_ALL=C sort
  getent group | cut -d: -f1 | sed 's/^/group:/'
  } | LC_ALL=C sort
}
snapshot >"$work/before"

# shellcheck disable=SC2086
installed=1
apt-get install -y -q --no-install-recommends $debs >"$work/install.log" 2>&1
check "apt-get install the packages" test $? -eq 0 || { tail -30 "$work/install.log"; finish; }
for p in fencelock fencelockd storage-guard libfencelock0 libfencelock-dev; do dpkg -L "$p"; done \
  | LC_ALL=C sort -u >"$work/files"

check "fencelock --version" sh -c '/usr/bin/fencelock --version | grep -q "^fencelock "'
check "fencelock-replay --help" sh -c '/usr/bin/fencelock-replay --help | grep -q gc-pause'
check "fencelockd --version" sh -c '/usr/bin/fencelockd --version | grep -q "^fencelockd 0"'
check "storage-guard --version" sh -c '/usr/bin/storage-guard --version | grep -q "^storage-guard 0"'
check "man pages" man -w fencelock fencelockd storage-guard fencelock-replay
check "system users" sh -c 'getent passwd fencelockd >/dev/null && getent passwd storage-guard >/dev/null'
check "the default configurations are installed" test -f /etc/fencelock/fencelockd.conf -a \
  -f /etc/fencelock/storage-guard.conf
check "fencelockd --check-config (installed default)" \
  /usr/bin/fencelockd --config /etc/fencelock/fencelockd.conf --nodes 127.0.0.1:6379 --check-config
check "storage-guard --check-config (installed default)" \
  /usr/bin/storage-guard --config /etc/fencelock/storage-guard.conf --check-config
check "systemd-analyze verify the installed units" \
  systemd-analyze verify /lib/systemd/system/fencelockd.service /lib/systemd/system/storage-guard.service
for u in fencelockd storage-guard; do
  score=$(systemd-analyze security --offline=true "/lib/systemd/system/$u.service" 2>/dev/null |
    sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
  echo "systemd-analyze security $u: ${score:-?}"
  check "$u unit exposure at most 2.0" awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }'
done

# The development package: a program built with pkg-config alone.
cat >"$work/hello.c" <<'EOF'
#include <lockcore/lockcore.h>
#include <stdio.h>
int main(void)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    printf("%llu\n", (unsigned long long)o.request_timeout_ms);
    return 0;
}
EOF
# shellcheck disable=SC2046
check "libfencelock-dev: build and run against lockcore" sh -c \
  "gcc -std=c11 -o '$work/hello' '$work/hello.c' \$(pkg-config --cflags --libs lockcore) && '$work/hello' >/dev/null"
check "libfencelock-dev: the test kit's pkg-config file" pkg-config --exists fencelock-testkit

# The installed services, as the units start them (the file, then the
# command line), against a real redis-server on a free port.
port_of() { # a free loopback port
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_file() { # path, tenths of a second
  local i=0; while [ ! -s "$1" ] && [ "$i" -lt "$2" ]; do sleep 0.1; i=$((i + 1)); done; [ -s "$1" ]
}
rport=$(port_of)
mkdir -p "$work/redis"
redis-server --port "$rport" --bind 127.0.0.1 --dir "$work/redis" --save '' --appendonly no \
  >"$work/redis.log" 2>&1 &
redis_pid=$!
i=0; until redis-cli -p "$rport" ping >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
/usr/bin/fencelockd --config /etc/fencelock/fencelockd.conf --nodes "127.0.0.1:$rport" \
  --listen 127.0.0.1:0 --port-file "$work/fld.port" >"$work/fld.log" 2>&1 &
fld_pid=$!
check "installed fencelockd listens" wait_file "$work/fld.port" 100
fport=$(cat "$work/fld.port" 2>/dev/null)
check "installed fencelockd grants a lock with a token" sh -c \
  "curl -sS --max-time 10 -X POST 127.0.0.1:$fport/v1/locks/pkg | grep -q '\"token\"'"
kill -HUP "$fld_pid" 2>/dev/null
check "installed fencelockd reloads at SIGHUP" sh -c \
  "for i in \$(seq 50); do grep -q SIGHUP '$work/fld.log' && exit 0; sleep 0.1; done; exit 1"
check "installed fencelockd serves after the reload" sh -c \
  "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' 127.0.0.1:$fport/healthz | grep -q 200"
kill "$fld_pid"; wait "$fld_pid"; fld_rc=$?; fld_pid=
check "installed fencelockd stops cleanly" test "$fld_rc" -eq 0

/usr/bin/storage-guard --config /etc/fencelock/storage-guard.conf --db "$work/records.db" \
  --listen 127.0.0.1:0 --port-file "$work/sg.port" >"$work/sg.log" 2>&1 &
sg_pid=$!
check "installed storage-guard listens" wait_file "$work/sg.port" 100
sport=$(cat "$work/sg.port" 2>/dev/null)
check "installed storage-guard refuses a stale token" sh -c "
  curl -sS --max-time 10 -o /dev/null -X PUT -d '{\"value\":\"a\",\"token\":7}' 127.0.0.1:$sport/v1/records/r &&
  curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X PUT -d '{\"value\":\"b\",\"token\":6}' \
    127.0.0.1:$sport/v1/records/r | grep -q 409"
kill "$sg_pid"; wait "$sg_pid"; sg_rc=$?; sg_pid=
check "installed storage-guard stops cleanly" test "$sg_rc" -eq 0
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null; redis_pid=

# Remove keeps the configuration; purge takes everything. (dpkg, not apt:
# apt no longer knows packages installed from files once they are removed.)
pkgs="fencelock fencelockd storage-guard libfencelock-dev libfencelock0"
# shellcheck disable=SC2086
dpkg --remove $pkgs >"$work/remove.log" 2>&1
check "dpkg --remove" test $? -eq 0 || cat "$work/remove.log"
check "remove keeps the configuration" test -f /etc/fencelock/fencelockd.conf
# shellcheck disable=SC2086
dpkg --purge $pkgs >"$work/purge.log" 2>&1
check "dpkg --purge" test $? -eq 0 || cat "$work/purge.log"
left=$(while read -r f; do [ -d "$f" ] || { [ -e "$f" ] && echo "$f"; }; done <"$work/files")
[ -n "$left" ] && echo "left behind: $left"
check "purge removes every file of the packages" test -z "$left"
snapshot >"$work/after"
new=$(LC_ALL=C comm -13 "$work/before" "$work/after")
[ -n "$new" ] && echo "new after purge: $new"
check "nothing is left behind (files, directories, users, groups)" test -z "$new"
finish
