#!/bin/sh
# Build (if needed) and run the roulette example from a meson build directory
# (default: build/ at the top of the tree). Arguments go to the program:
# naive, locked or faults for one run only.
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$top/build}
[ -d "$build" ] || meson setup "$build" "$top" >/dev/null
meson compile -C "$build" fencelock-example-roulette storage-guard >/dev/null
exec "$build/examples/roulette/fencelock-example-roulette" "$@"
