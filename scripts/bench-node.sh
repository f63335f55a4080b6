#!/usr/bin/env bash
# The node benchmarks of docs/benchmarks.md, each beside its baseline from the same run:
#
# 1. committed records/s and commit latency of a three-voter quorum on loopback, 1 KiB records,
#    acks=all, fsync on (`ringlog perf append`), beside the engine's own append rate for 1 KiB
#    records with group commit and fdatasync (engine/examples/append_workload, same disk);
# 2. a consumer fetch of a ~1 GiB log from the leader (`ringlog perf fetch`) beside a plain
#    sendfile(2) of the same segment file over loopback (`ringlog perf sendfile-baseline`).
#
#   scripts/bench-node.sh                      (LOG_BYTES=1073741824 CLIENTS=8 SECONDS_APPEND=15)
set -euo pipefail
cd "$(dirname "$0")/.."
log_bytes="${LOG_BYTES:-1073741824}"
clients="${CLIENTS:-8}"
seconds_append="${SECONDS_APPEND:-15}"
batch_records="${BATCH_RECORDS:-16}"

cargo build --quiet --release --bin ringlog
cargo build --quiet --release -p ringlog-engine --example append_workload
source scripts/lib-quorum.sh
# The load goes to the topic `bench` (created by the first perf append; a cleanup.policy=delete
# topic keeps its whole log: no snapshot moves its start while part 2 fills and reads it).
# Before issue 17 it went to __cluster_metadata-0, which clients can no longer write.
topic=bench
folder="$PWD/target/bench-node"
rm -rf "$folder"; mkdir -p "$folder"

echo "== 1. engine baseline: 1 KiB records, group commit + fdatasync (256 MiB)"
"$PWD/target/release/examples/append_workload" --dir "$folder/engine" \
  --total-bytes 268435456 --write-size-bytes 1048576 | sed 's/^/engine: /'
rm -rf "$folder/engine"

echo "== 1. quorum: perf append, $clients clients, $batch_records x 1 KiB records per batch, acks=all"
start_quorum "$folder/quorum"
trap stop_quorum EXIT
"$RINGLOG" perf append --topic "$topic" --bootstrap "127.0.0.1:${PORTS[1]}" --clients "$clients" \
  --batch-records "$batch_records" --record-size 1024 --acks all --duration-secs "$seconds_append"

echo "== 2. fill the log to $log_bytes bytes, then consumer fetch vs sendfile"
leader="$(leader_id "$topic-0")"
segment_dir="$folder/quorum/node-$leader/$topic-0"
log_size() { du -cb "$segment_dir"/*.log | tail -1 | cut -f1; }
while [ "$(log_size)" -lt "$log_bytes" ]; do
  "$RINGLOG" perf append --topic "$topic" --bootstrap "127.0.0.1:${PORTS[$leader]}" --clients "$clients" \
    --batch-records 64 --record-size 1024 --acks 1 --duration-secs 5 >/dev/null
done
echo "log: $(log_size) bytes in $(ls "$segment_dir"/*.log | wc -l) segment file(s)"
# Warm the page cache the same way for both: each reads the file once before it is timed.
cat "$segment_dir"/*.log > /dev/null
"$RINGLOG" perf fetch --topic "$topic" --bootstrap "127.0.0.1:${PORTS[$leader]}" --clients 1 --max-bytes 8388608
for segment in "$segment_dir"/*.log; do
  "$RINGLOG" perf sendfile-baseline "$segment"
done
