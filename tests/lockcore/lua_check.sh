#!/usr/bin/env bash
# The Redis scripts, as the build composed them: each one parses as Lua 5.1
# (Redis's), reads no global but Redis's own and the KEYS and ARGV it is
# given, and sets none (Redis refuses that at run time, and a name a block
# forgot to include shows here instead of on a node). And each block of
# the sources is written once: no local function is defined in two files.
# The function library (fencelock.lua) reads no KEYS or ARGV but its
# functions' own.
#   tests/lockcore/lua_check.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail
src=$1 build=$2
luac=$(command -v luac5.1 || true)
[ -n "$luac" ] || { echo "lua_check: luac5.1 not found (Debian: lua5.1)"; exit 1; }
allowed=' redis KEYS ARGV tonumber tostring string math table ipairs pairs type unpack error '
fail=0 n=0
for f in "$build"/fencing/*.lua "$build"/lockcore/*.lua; do
  n=$((n + 1))
  if ! out=$("$luac" -p -l "$f" 2>&1); then
    echo "FAIL $f: $out"; fail=1; continue
  fi
  while read -r op name; do
    if [ "$op" = SETGLOBAL ]; then
      echo "FAIL $(basename "$f"): sets the global '$name'"; fail=1
    elif [ "$(basename "$f")" = fencelock.lua ] && { [ "$name" = KEYS ] || [ "$name" = ARGV ]; }; then
      echo "FAIL $(basename "$f"): reads the global '$name' (a function gets its own; a block made at the library's top level must not read them)"; fail=1
    elif [[ "$allowed" != *" $name "* ]]; then
      echo "FAIL $(basename "$f"): reads the global '$name' (a block not included?)"; fail=1
    fi
  done < <(printf '%s\n' "$out" | sed -n 's/.*\(GETGLOBAL\|SETGLOBAL\).*; \(.*\)$/\1 \2/p' | sort -u)
done
[ "$n" -ge 20 ] || { echo "FAIL: only $n composed scripts found under $build"; fail=1; }
dups=$(grep -ho 'local function [A-Za-z_0-9]*' "$src"/fencing/lua/*.lua "$src"/fencing/lua/lib/*.lua \
  "$src"/lockcore/lua/*.lua "$src"/lockcore/lua/lib/*.lua | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "FAIL: defined in two places: $dups"; fail=1
fi
[ "$fail" = 0 ] && echo "ok: $n scripts"
exit $fail
