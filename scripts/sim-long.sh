#!/usr/bin/env bash
# The long simulator run (docs/simulator.md, "Long runs"): 100,000 seeds of the production host
# across cluster shapes (drawn, four partitions, one voter, voter changes, a 10 s fault phase),
# two runners at a time. Seed ranges start far from the test run's (0-1,199) so they add coverage. Prints each range's summary line and exits
# non-zero if any seed failed; the failing seeds' replay commands are in the output.
# Usage: scripts/sim-long.sh [scale]   (scale 1 = 100,000 seeds; 0.1 = a quick 10,000)
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:-1}"
cargo build --release -q -p ringlog-replication --features sim --bin sim
sim=target/release/sim
n() { awk -v s="$scale" -v n="$1" 'BEGIN { printf "%d", n * s }'; }
runs=(
  "--seeds $(n 40000) --start 4000000"
  "--seeds $(n 15000) --start 4500000 --partitions 4"
  "--voters 1 --seeds $(n 15000) --start 7000000"
  "--reconfig --seeds $(n 20000) --start 8000000"
  "--seeds $(n 10000) --start 9000000 --fault-phase-ms 10000"
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
  grep -E '^(FAIL|  replay|host|reconfig)' "$out/$i.log" || true
  [ "$(cat "$out/$i.rc")" = 0 ] || failed=1
done
rm -rf "$out"
exit $failed
