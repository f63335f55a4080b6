#!/usr/bin/env bash
# Records a flamegraph of the leader (or, with ROLE=follower, of one follower) of the loaded
# partition of a three-voter quorum while `ringlog perf append` loads it (acks=all, 1 KiB
# records): the acks=all produce path, or the replica's side of it, as docs/benchmarks.md shows.
#
#   scripts/flamegraph.sh [OUT.svg] [SECONDS]     (default docs/flamegraph-produce-acks-all.svg, 15)
#   CLIENTS=8 BATCH_RECORDS=16 scripts/flamegraph.sh
#   ROLE=follower scripts/flamegraph.sh docs/flamegraph-follower-acks-all.svg
#
# Tools: Linux perf (Debian package linux-perf) records the leader's stacks (DWARF unwinding:
# the release profile keeps line tables, no frame pointers needed); inferno (crates.io) folds
# and renders them. Both are installed here when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/flamegraph-produce-acks-all.svg}"
seconds="${2:-15}"
clients="${CLIENTS:-8}"
batch_records="${BATCH_RECORDS:-16}"
role="${ROLE:-leader}"

command -v perf >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
command -v inferno-flamegraph >/dev/null 2>&1 || cargo install --quiet --locked inferno
cargo build --quiet --release --bin ringlog

source scripts/lib-quorum.sh
folder="$PWD/target/flamegraph"
start_quorum "$folder/quorum"
trap stop_quorum EXIT
# The topic `bench` (clients cannot write __cluster_metadata since issue 17): a first short
# append creates it, so its partition's leader is known before the profiled run.
topic=bench
"$RINGLOG" perf append --topic "$topic" --bootstrap "127.0.0.1:${PORTS[1]}" --clients 1 \
  --batch-records 1 --record-size 1024 --acks all --duration-secs 1 >/dev/null
leader="$(leader_id "$topic-0")"
target="$leader"
if [ "$role" = follower ]; then
  for id in 1 2 3; do [ "$id" != "$leader" ] && target="$id" && break; done
fi
echo "flamegraph: leader of $topic-0 is node $leader; recording the $role, node $target (pid ${PIDS[$target]}), ${seconds} s"

"$RINGLOG" perf append --topic "$topic" --bootstrap "127.0.0.1:${PORTS[1]}" --clients "$clients" \
  --batch-records "$batch_records" --record-size 1024 --acks all --duration-secs $((seconds + 2)) &
load=$!
sleep 1
perf record -F 997 --call-graph dwarf,32768 -p "${PIDS[$target]}" -o "$folder/perf.data" \
  -- sleep "$seconds" 2>"$folder/perf-record.log"
wait "$load"
perf script -i "$folder/perf.data" 2>/dev/null | inferno-collapse-perf > "$folder/stacks.folded"
inferno-flamegraph --title "ringlog $role, perf append acks=all, 1 KiB records" \
  < "$folder/stacks.folded" > "$out"
echo "flamegraph: $out (folded stacks in $folder/stacks.folded)"
