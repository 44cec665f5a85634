#!/usr/bin/env bash
# Fenced file writes from the shell, two fencelock binaries side by side
# (a baseline and a candidate), interleaved round by round so that both see
# the same machine:
#   bench/fencefile.sh BASELINE_FENCELOCK CANDIDATE_FENCELOCK [ROUNDS] [DIR]
# Each round runs, per binary, 40 `write`s with a new token each (the fence
# is raised every time), 40 `write`s with one token, and 40 `append`s with a
# new token each, of one line, in a fresh directory under DIR (default: a
# temporary directory under TMPDIR). Prints the mean milliseconds per call
# and the candidate's time as a ratio of the baseline's.
set -euo pipefail
base=${1:?usage: bench/fencefile.sh BASELINE CANDIDATE [ROUNDS] [DIR]}
cand=${2:?usage: bench/fencefile.sh BASELINE CANDIDATE [ROUNDS] [DIR]}
rounds=${3:-5}
top=$(mktemp -d "${4:-${TMPDIR:-/tmp}}/fencefile-bench.XXXXXX")
trap 'rm -rf "$top"' EXIT
per=40

now_us() { echo $(( $(date +%s%N) / 1000 )); }

# run BIN KIND DIR: prints the microseconds of $per calls
run() {
  local bin=$1 kind=$2 dir=$3 t0 t1 i
  mkdir -p "$dir"
  t0=$(now_us)
  for ((i = 1; i <= per; i++)); do
    case $kind in
      write-new) echo "line $i" | "$bin" write --token "$i" "$dir/f" >/dev/null ;;
      write-same) echo "line $i" | "$bin" write --token 7 "$dir/f" >/dev/null ;;
      append-new) echo "line $i" | "$bin" append --token "$i" "$dir/f" >/dev/null ;;
    esac
  done
  t1=$(now_us)
  echo $((t1 - t0))
}

declare -A sum
kinds="write-new write-same append-new"
for ((r = 1; r <= rounds; r++)); do
  for kind in $kinds; do
    # The order alternates from round to round.
    if ((r % 2)); then order="base cand"; else order="cand base"; fi
    for who in $order; do
      bin=$base; [ "$who" = cand ] && bin=$cand
      us=$(run "$bin" "$kind" "$top/$who-$kind-$r")
      sum[$who-$kind]=$(( ${sum[$who-$kind]:-0} + us ))
    done
  done
done
printf '%-11s %12s %12s %8s\n' kind "base ms" "cand ms" ratio
for kind in $kinds; do
  b=${sum[base-$kind]} c=${sum[cand-$kind]} n=$((rounds * per))
  awk -v k="$kind" -v b="$b" -v c="$c" -v n="$n" \
    'BEGIN { printf "%-11s %12.2f %12.2f %7.2fx\n", k, b / n / 1000, c / n / 1000, c / b }'
done
