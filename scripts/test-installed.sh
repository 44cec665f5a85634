#!/usr/bin/env bash
# Install fencelock into a temporary directory (meson install --destdir) and
# build and run the examples in examples/gc-pause-test against that
# installation only: the C test through pkg-config (fencelock-testkit,
# lockcore, cmocka), the shell test through the installed storage-guard and
# fencelock. This is what a user's own GC-pause test goes through.
#   BUILD_DIR=build scripts/test-installed.sh
# Prints "N passed, N failed" last; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$BUILD_DIR" ${MESON_ARGS:-} || { echo "0 passed, 1 failed"; exit 1; }
fi
meson compile -C "$BUILD_DIR" || { echo "0 passed, 1 failed"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencelock-installed-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
meson install -C "$BUILD_DIR" --no-rebuild --destdir "$dest" --quiet || { echo "0 passed, 1 failed"; exit 1; }

opt() { meson introspect "$BUILD_DIR" --buildoptions | python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name']=='$1'][0])"; }
prefix=$(opt prefix)
libdir=$(opt libdir)
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
mandir=$(opt mandir)
case $mandir in /*) ;; *) mandir=$prefix/$mandir ;; esac

# The .pc files name the real prefix; point copies of them at the staged
# tree (PKG_CONFIG_SYSROOT_DIR would also move hiredis and the others).
mkdir -p "$tmp/pc"
for pc in "$dest$libdir"/pkgconfig/*.pc; do
  sed "s|^prefix=.*|prefix=$dest$prefix|" "$pc" >"$tmp/pc/$(basename "$pc")"
done
export PKG_CONFIG_PATH=$tmp/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# No LD_LIBRARY_PATH: the installed programs find the installed libraries
# by their RUNPATH (relative to themselves), the libraries find libfencing
# by theirs, and a program of the user's by the rpath docs/lockcore.md
# gives, as they would anywhere.
unset LD_LIBRARY_PATH
export PATH=$dest$prefix/bin:$PATH
unset SG_EXE

passed=0
failed=0
run() { # name, command...
  echo "--- $1"
  shift
  if "$@"; then passed=$((passed + 1)); echo "--- ok"; else failed=$((failed + 1)); echo "--- FAILED"; fi
}
# Nothing from the build tree may leak in: the header and the library must
# come from the staged installation.
run "pkg-config finds the installed kit" sh -c \
  "pkg-config --cflags fencelock-testkit | grep -q -- '-I$dest' && test -f '$dest$libdir/libfencelock-testkit.a'"
# Each installed program runs with an empty environment, from the staged
# tree (which the loader's cache knows nothing of).
for prog in fencelock fencelockd storage-guard fencelock-replay; do
  run "installed $prog runs" sh -c "env -i '$dest$prefix/bin/$prog' --version | grep -q '^$prog '"
done
run "installed man pages" sh -c \
  "for m in fencelock fencelockd storage-guard fencelock-replay; do test -s '$dest$mandir/man1/'\$m.1 || exit 1; done"
# A program of the user's, linked as docs/lockcore.md says.
cat >"$tmp/app.c" <<'C'
#include <lockcore/lockcore.h>
#include <stdio.h>
int main(void)
{
    struct lockcore_options o;
    lockcore_options_init(&o);
    printf("%s\n", lockcore_strerror(LOCKCORE_ELOCKED));
    return o.ttl_ms > 0 ? 0 : 1;
}
C
run "a program linked as docs/lockcore.md says runs" sh -c \
  "cc -o '$tmp/app' '$tmp/app.c' \$(pkg-config --cflags --libs lockcore) \
     -Wl,-rpath,\$(pkg-config --variable=libdir lockcore) && env -i '$tmp/app'"
run "lockcore.pc keeps hiredis and openssl private" sh -c \
  "! pkg-config --libs lockcore | grep -Eq -- '-lhiredis|-lssl|-lcrypto'"
run "C example builds against the installed kit" make -s -C examples/gc-pause-test O="$tmp" "$tmp/gc_pause_test"
run "C example passes" "$tmp/gc_pause_test"
run "shell example passes" examples/gc-pause-test/gc-pause-test.sh
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
