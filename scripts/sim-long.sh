#!/usr/bin/env bash
# The long simulator run (docs/simulator.md, "Long runs"): 100,000 seeds across every profile,
# with one and with four partitions per cluster, two runners at a time. Seed ranges start far
# from the test run's (0-999) so they add coverage. Prints each range's summary line and exits
# non-zero if any seed failed; the failing seeds' replay commands are in the output.
# Usage: scripts/sim-long.sh [scale]   (scale 1 = 100,000 seeds; 0.1 = a quick 10,000)
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:-1}"
cargo build --release -q -p ringlog-replication --features sim --bin sim
sim=target/release/sim
n() { awk -v s="$scale" -v n="$1" 'BEGIN { printf "%d", n * s }'; }
runs=(
  "--profile three --seeds $(n 30000) --start 4000000"
  "--profile three --seeds $(n 10000) --start 4500000 --partitions 4"
  "--profile mixed --seeds $(n 25000) --start 5000000"
  "--profile mixed --seeds $(n 10000) --start 6000000 --partitions 4"
  "--profile single --seeds $(n 20000) --start 7000000"
  "--profile single --seeds $(n 5000) --start 7500000 --partitions 4"
)
out=$(mktemp -d)
pids=()
for i in "${!runs[@]}"; do
  # Two at a time: the machines this runs on have two cores.
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}" || true; pids=("${pids[@]:1}"); fi
  # shellcheck disable=SC2086
  ( $sim ${runs[$i]} >"$out/$i.log" 2>&1; echo $? >"$out/$i.rc" ) &
  pids+=($!)
done
wait
failed=0
for i in "${!runs[@]}"; do
  echo "== sim ${runs[$i]}"
  grep -E '^(FAIL|  replay|profile)' "$out/$i.log" || true
  [ "$(cat "$out/$i.rc")" = 0 ] || failed=1
done
rm -rf "$out"
exit $failed
