#!/bin/sh
# Build (if needed) and run the room example from a meson build directory
# (default: build/ at the top of the tree). Arguments go to the program:
# naive, locked, frozen, steps or cli for one run only.
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$top/build}
[ -d "$build" ] || meson setup "$build" "$top" >/dev/null
meson compile -C "$build" fencelock-example-room storage-guard fencelock >/dev/null
exec "$build/examples/room/fencelock-example-room" "$@"
