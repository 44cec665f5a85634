#!/usr/bin/env bash
# The main demo: replay Kleppmann's scenarios (GC pause, network delay,
# clock jump, node restart, pause during acquisition) and a leader elected,
# then deposed while paused (zombie leader), against real redis-server
# nodes and a real storage-guard, each without fencing and with it.
#   bash scripts/demo.sh                 # all scenarios
#   bash scripts/demo.sh gc-pause        # one of them
# Prints a timeline and a verdict per run; draws them in replay-out/replay.svg
# and replay-out/replay.json.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || meson setup "$BUILD_DIR" >/dev/null
meson compile -C "$BUILD_DIR" >/dev/null
exec "$BUILD_DIR/scenarios/fencelock-replay" --out replay-out "$@"
