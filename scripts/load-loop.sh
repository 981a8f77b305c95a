#!/bin/bash
# load-loop.sh [N] [TARGET]: runs `make TARGET` (default test) N times (default 10) on a
# fresh clone of this checkout's HEAD, niced, and prints one line per run: its exit
# status, its time and the load average it ran under (sampled every 10 s). Load the
# machine beside it (e.g. `nice -n 19 stress-ng --cpu 4 --timeout 2h`) to check that
# the suite stays green on a busy machine. It stops by itself after N runs.
set -u
n=${1:-10}
target=${2:-test}
src=$(git rev-parse --show-toplevel)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git clone -q "$src" "$dir/repo" && cd "$dir/repo" || exit 1
echo "load-loop: make $target x$n at $(git rev-parse --short HEAD)"
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  : >"$dir/load"
  (while true; do cut -d' ' -f1 /proc/loadavg >>"$dir/load"; sleep 10; done) &
  sampler=$!
  nice -n 10 make "$target" >"$dir/run.$i.log" 2>&1
  rc=$?
  kill "$sampler"
  mean=$(awk '{s+=$1; n++} END {if (n) printf "%.1f", s/n}' "$dir/load")
  max=$(sort -n "$dir/load" | tail -1)
  echo "run $i rc=$rc $(($(date +%s) - start))s load mean $mean max $max"
  if [ "$rc" -ne 0 ]; then
    grep -E '^--- FAIL|^FAIL' "$dir/run.$i.log" | head
    cp "$dir/run.$i.log" "${TMPDIR:-/tmp}/load-loop.run.$i.log"
  fi
done
