#!/usr/bin/env bash
# Installs the Debian 12 packages fencelock builds, tests and demos with,
# skipping what is already there. Run as root (or with sudo available).
set -euo pipefail

pkgs=(
  build-essential meson ninja-build pkg-config clang-format
  redis-server redis-tools
  libhiredis-dev libssl-dev openssl libsqlite3-dev libjansson-dev libcmocka-dev libmicrohttpd-dev libgnutls28-dev
  postgresql-15 libpq-dev
  faketime libfaketime iproute2 curl valgrind lua5.1
  clang libclang-rt-14-dev
  # A minimal system (debootstrap --variant=minbase) has none of these:
  # the CA bundle for HTTPS (curl and the TLS tests verify against it),
  # python3 (the test summary, the Python replay client), jq (docs/cli.md).
  ca-certificates python3 jq
  # Node.js (18 in Debian 12: fetch built in) runs the fencelockd example client.
  nodejs
  # The client packages of clients/: a venv for the Python one (Debian's pip
  # refuses system installs), Go (1.19 in Debian 12) for the Go one.
  python3-venv golang-go
)
# npm installs the Node.js client and builds it (TypeScript from the npm
# registry). Debian's nodejs has it in the separate npm package; a nodejs
# from elsewhere that brings its own npm conflicts with that package, so ask
# for it only when there is no npm at all.
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
