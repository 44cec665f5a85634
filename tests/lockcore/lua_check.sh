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
# The composer's library: a block with anything but functions at its top
# level (here an indented table) must stay inside the function that needs
# it, made on every call as in the script, not at the library's top level,
# where every call would share it.
t=$(mktemp -d)
mkdir -p "$t/lib" "$t/out"
# compose STEM ARGS...: lua-compose over the test blocks, its C output named by STEM
compose() {
  local stem=$1
  shift
  python3 "$src/scripts/lua-compose.py" --include-dir "$t/lib" --c "$t/out/$stem.c" --h "$t/out/$stem.h" \
    --outdir "$t/out" "$@"
}
printf 'local function count_bump(t)\n  t.n = t.n + 1\n  return t.n\nend\n  local count_state = {n = 0}\n' >"$t/lib/count.lua"
printf 'local function plain_one()\n  return 1\nend\n' >"$t/lib/one.lua"
# And a value after a one-line function, a function's name bound anew, a
# call of a function the block does not include (the script did, before).
printf 'local function ol_noop() end local ol_st = {n = 0}\nlocal function ol_get()\n  return ol_st\nend\n' >"$t/lib/ol.lua"
printf 'local function rb_seen()\n  return 0\nend\nlocal function rb_bump()\n  rb_seen = function() return 1 end\n  return 1\nend\n' >"$t/lib/rb.lua"
printf 'local function ka_first()\n  return KEYS[1]\nend\n' >"$t/lib/ka.lua"
printf 'local function fv_twice()\n  return ka_first() .. ka_first()\nend\n' >"$t/lib/fv.lua"
printf -- '--- @include "count"\n--- @include "one"\n--- @include "rb"\n--- @include "ka"\n--- @include "fv"\nreturn count_bump(count_state) + plain_one() + rb_bump() + #fv_twice()\n' >"$t/calls.lua"
# (the value after a one-line function is refused outright: below)
printf -- '--- @include "ol"\nreturn ol_get().n\n' >"$t/ol.lua"
if compose o --library lib:t "$t/ol.lua:t_ol" >/dev/null 2>&1; then
  echo "FAIL: lua-compose took a value after a one-line function"; fail=1
fi
if compose x --library lib:t "$t/calls.lua:t_calls" >/dev/null; then
  top=$(awk '/^redis.register_function/ { exit } { print }' "$t/out/lib.lua")
  for name in count_state rb_seen fv_twice; do
    if printf '%s\n' "$top" | grep -q "$name"; then
      echo "FAIL: lua-compose --library made the block of $name at the library's top level"; fail=1
    fi
  done
  if ! printf '%s\n' "$top" | grep -q 'local function plain_one'; then
    echo "FAIL: lua-compose --library did not make a block of functions at the library's top level"; fail=1
  fi
else
  echo "FAIL: lua-compose --library failed on a test block"; fail=1
fi
# A script keeps the functions it calls, and those they call, and loses
# the rest (made for nothing on every call).
printf 'local function pr_helper()\n  return 2\nend\nlocal function pr_used()\n  return pr_helper()\nend\nlocal function pr_only_unused()\n  return 3\nend\nlocal function pr_unused()\n  return pr_only_unused()\nend\n' >"$t/lib/pr.lua"
printf -- '--- @include "pr"\nreturn pr_used() + 0\n' >"$t/prune.lua"
if compose p "$t/prune.lua:t_prune" >/dev/null; then
  for name in pr_used pr_helper; do
    grep -q "local function $name" "$t/out/prune.lua" ||
      { echo "FAIL: lua-compose left out $name, which the script calls"; fail=1; }
  done
  for name in pr_unused pr_only_unused; do
    ! grep -q "$name" "$t/out/prune.lua" ||
      { echo "FAIL: lua-compose kept $name, which nothing calls"; fail=1; }
  done
else
  echo "FAIL: lua-compose failed on a test block"; fail=1
fi
# What the pruning must not be fooled by: a call after the concatenation
# operator; a function whose block pulls another in locally, left whole
# (here never called: it goes whole, and what stays parses).
printf 'local function cc_suffix()\n  return "x"\nend\n' >"$t/lib/cc.lua"
printf 'local function li_inner()\n  return 1\nend\n' >"$t/lib/li.lua"
printf 'local function li_outer()\n  if KEYS[1] then return 0 end\n  --- @include-local "li"\n  return li_inner()\nend\n' >"$t/lib/lo.lua"
printf -- '--- @include "cc"\n--- @include "lo"\nreturn KEYS[1]..cc_suffix()\n' >"$t/tricky.lua"
if compose k "$t/tricky.lua:t_tricky" >/dev/null; then
  grep -q 'local function cc_suffix' "$t/out/tricky.lua" ||
    { echo "FAIL: lua-compose left out cc_suffix, called after '..'"; fail=1; }
  ! grep -q 'li_' "$t/out/tricky.lua" || { echo "FAIL: lua-compose left part of li_outer"; fail=1; }
  "$luac" -p "$t/out/tricky.lua" || { echo "FAIL: the pruned script does not parse"; fail=1; }
else
  echo "FAIL: lua-compose failed on a test block"; fail=1
fi
# A script that ends by returning one function's result runs its body in
# place, its parameters set from the call.
printf 'local function ip_run(a, b)\n  if a then return b end\n  return 0\nend\n' >"$t/lib/ip.lua"
printf -- '--- @include "ip"\nreturn ip_run(KEYS[1], ARGV[1])\n' >"$t/inplace.lua"
if compose i "$t/inplace.lua:t_inplace" >/dev/null; then
  if grep -q 'ip_run' "$t/out/inplace.lua" || ! grep -q '^local a, b = KEYS\[1\], ARGV\[1\]$' "$t/out/inplace.lua"; then
    echo "FAIL: lua-compose did not run ip_run's body in place: $(tr '\n' ' ' <"$t/out/inplace.lua")"; fail=1
  fi
  "$luac" -p "$t/out/inplace.lua" || { echo "FAIL: the script run in place does not parse"; fail=1; }
else
  echo "FAIL: lua-compose failed on a test block"; fail=1
fi
# Shapes the composer cannot read for sure are refused ("end" with more
# on its line among them, which would run a function on to the next), and
# a body is not run in place where the call passes the function itself or
# where a later local (plain, after a ';', without '=', indented) would
# hide a name it uses.
case_of() { # NAME SOURCE: composes SOURCE as NAME.lua; prints "refused", "in place" or "kept"
  printf -- "$2" >"$t/$1.lua"
  if ! compose "$1" "$t/$1.lua:t_$1" >/dev/null 2>&1; then
    echo refused
  elif grep -q '^local function f(' "$t/out/$1.lua"; then echo kept; else echo "in place"; fi
}
for c in "refused|one_line|local function g(x) return x end\nreturn g(1) + 0\n" \
  "refused|first_line_end|local function g(a) if a then return 1 end\n  return 2\nend\nreturn 1\n" \
  "refused|long_string|local function g()\n  return [[\nend\n]]\nend\nreturn g() .. ''\n" \
  "refused|body_col0|local function f(a)\nlocal r = a\nreturn r\nend\nreturn f(ARGV[1])\n" \
  "refused|end_comment|local function g()\n  return 1\nend -- why\nreturn 1\n" \
  "refused|oneliner_comment|local function g(x) return x end -- why\nif ARGV[1] then\n  redis.call('SET', KEYS[1], 'v')\nend\nreturn 1\n" \
  "kept|hidden|local function f(a)\n  return tostring(a)\nend\nlocal tostring = function() return 0 end\nreturn f(1)\n" \
  "kept|arg_is_f|local function f(g)\n  return type(g)\nend\nreturn f(f)\n" \
  "kept|later_semicolon|local n = 1\nlocal function f()\n  return n\nend\nlocal a = 2; local n = 3\nreturn f()\n" \
  "kept|later_no_value|local n = 1\nlocal function f()\n  return n\nend\nlocal n -- why\nn = 3\nreturn f()\n" \
  "kept|later_indented|local n = 1\nlocal function f()\n  return n\nend\n  local n = 3\nreturn f()\n" \
  "in place|plain|local n = 1\nlocal function f(a)\n  return n .. a\nend\nlocal m = 3\nreturn f(ARGV[1])\n"; do
  want=${c%%|*} rest=${c#*|}
  got=$(case_of "${rest%%|*}" "${rest#*|}")
  [ "$got" = "$want" ] || { echo "FAIL: lua-compose on ${rest%%|*}: $got, not $want"; fail=1; }
done
rm -rf "$t"
[ "$fail" = 0 ] && echo "ok: $n scripts"
exit $fail
