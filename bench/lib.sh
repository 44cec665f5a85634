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
