# Shared by bench/compare.sh and bench/interop.sh (sourced, not run): a
# temporary folder cleaned up at exit, node-redlock installed into it, and
# redis-server masters on free loopback ports, stopped by their PIDs.

# bench_workdir TAG: sets WORK; removes it and stops every PID in PIDS at
# exit (KEEP=1 keeps the folder).
bench_workdir() {
  WORK=$(mktemp -d "/tmp/fencelock-$1-XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}

# build_both REV: fencelock-bench of REV (release, in a git worktree under
# $WORK, removed at exit) in A, and of the working tree (in $BUILD, default
# build-bench/) in B.
build_both() {
  trap 'git -C "$ROOT" worktree remove --force "$WORK/a" >/dev/null 2>&1 || true; bench_cleanup' EXIT
  git -C "$ROOT" worktree add --detach "$WORK/a" "$1" >/dev/null
  meson setup "$WORK/a/build" "$WORK/a" -Dbuildtype=release -Dtests=false >/dev/null
  ninja -C "$WORK/a/build" bench/fencelock-bench >/dev/null
  BUILD=${BUILD:-$ROOT/build-bench}
  if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" "$ROOT" -Dbuildtype=release -Dtests=false >/dev/null
  fi
  ninja -C "$BUILD" bench/fencelock-bench >/dev/null
  A=$WORK/a/build/bench/fencelock-bench
  B=$BUILD/bench/fencelock-bench
}

# install_node_redlock: node-redlock 5.0.0-beta.2 and ioredis 5 into
# $WORK/peer (nothing is written into the source tree).
install_node_redlock() {
  mkdir -p "$WORK/peer"
  echo '{"name":"fencelock-peer","private":true,"type":"module"}' >"$WORK/peer/package.json"
  (cd "$WORK/peer" && npm install --silent --no-audit --no-fund --no-package-lock \
    redlock@5.0.0-beta.2 ioredis@5 >/dev/null)
}

# start_masters N: N redis-server masters without persistence; appends to
# PIDS, PORTS and NODES ("127.0.0.1:port") and sets NODE_LIST (comma-joined).
start_masters() {
  local want=$1 port=$((20000 + RANDOM % 20000)) dir pid ok
  NODES=()
  PORTS=()
  while [ ${#PORTS[@]} -lt "$want" ]; do
    port=$((port + 1))
    ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || continue # in use
    dir="$WORK/node-$port"
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --daemonize no >"$dir/log" 2>&1 &
    pid=$!
    ok=0
    for _ in $(seq 50); do
      if redis-cli -p "$port" ping >/dev/null 2>&1; then ok=1; break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ $ok = 1 ]; then
      PIDS+=("$pid")
      PORTS+=("$port")
      NODES+=("127.0.0.1:$port")
    else
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  NODE_LIST=$(IFS=,; echo "${NODES[*]}")
}

# A free loopback port above $1.
free_port() {
  local port=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port"
}

# start_etcd N: N members of one cluster; appends to PIDS, sets ENDPOINTS
# (their client URLs, comma-joined) and ETCD_DATA (their data: /dev/shm
# unless ETCD_DISK=1, then $WORK/etcd).
# Ports below 32768, out of the kernel's range for outgoing connections:
# etcd's members connect to each other while the others still start, and
# a port taken by such a connection cannot be listened on.
start_etcd() {
  local n=$1 i port=$((20000 + RANDOM % 10000)) cluster="" names=() clients=() peers=() data
  for i in $(seq "$n"); do
    port=$(free_port $((port + 1)))
    clients+=("$port")
    port=$(free_port $((port + 1)))
    peers+=("$port")
    names+=("m$i")
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$port"
  done
  if [ "${ETCD_DISK:-0}" = 1 ]; then data=$WORK/etcd; else data=$(mktemp -d /dev/shm/fencelock-etcd-XXXXXX); fi
  ETCD_DATA=$data
  for i in $(seq 0 $((n - 1))); do
    mkdir -p "$data/${names[$i]}"
    etcd --name "${names[$i]}" --data-dir "$data/${names[$i]}" \
      --listen-client-urls "http://127.0.0.1:${clients[$i]}" \
      --advertise-client-urls "http://127.0.0.1:${clients[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${peers[$i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${peers[$i]}" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      --initial-cluster-token fencelock-bench --log-level error \
      >"$WORK/etcd-${names[$i]}.log" 2>&1 &
    PIDS+=("$!")
  done
  ENDPOINTS=$(printf 'http://127.0.0.1:%s,' "${clients[@]}")
  ENDPOINTS=${ENDPOINTS%,}
  local healthy
  for _ in $(seq 100); do
    healthy=0
    for i in "${clients[@]}"; do
      curl -sf "http://127.0.0.1:$i/health" | grep -q '"health":"true"' && healthy=$((healthy + 1))
    done
    [ "$healthy" = "$n" ] && return 0
    sleep 0.1
  done
  echo "etcd did not become healthy (logs in $WORK)" >&2
  return 1
}
