#!/usr/bin/env bash
# KIP-630 FetchSnapshot throughput beside its same-run baseline (docs/benchmarks.md):
# a three-voter quorum on loopback takes a snapshot of a cleanup.policy=snapshot topic's
# partition (bench-snapshot-0; clients cannot write __cluster_metadata since issue 17); its frozen file on
# the leader is then replaced (same name, atomic rename) by a SNAPSHOT_BYTES file, and
# `ringlog perf fetch-snapshot` downloads it chunk by chunk from the leader as a new follower
# does (FetchSnapshot requests, replica.fetch.snapshot.max.bytes per response, served with
# sendfile), beside `ringlog perf sendfile-baseline` of the same file over loopback.
# The replaced file is not a valid snapshot: only the leader's serving path is timed (the
# leader does not validate the frozen files it serves; a real follower would reject it).
#
#   scripts/bench-snapshot.sh                  (SNAPSHOT_BYTES=536870912 MAX_BYTES=8388608)
set -euo pipefail
cd "$(dirname "$0")/.."
snapshot_bytes="${SNAPSHOT_BYTES:-536870912}"
max_bytes="${MAX_BYTES:-8388608}"

cargo build --quiet --release --bin ringlog
export EXTRA_PROPS="controller.snapshot.minimum.records=400
metadata.log.max.record.bytes.between.snapshots=1
replica.fetch.snapshot.max.bytes=$max_bytes
replica.fetch.snapshot.response.max.bytes=$max_bytes"
source scripts/lib-quorum.sh
folder="$PWD/target/bench-snapshot"
start_quorum "$folder"
trap stop_quorum EXIT
topic=bench-snapshot
"$RINGLOG" perf append --topic "$topic" --topic-config cleanup.policy=snapshot \
  --bootstrap "127.0.0.1:${PORTS[1]}" --clients 1 \
  --batch-records 16 --record-size 1024 --acks all --duration-secs 2 >/dev/null
leader="$(leader_id "$topic-0")"
checkpoints="$folder/node-$leader/$topic-0/checkpoints"
deadline=$((SECONDS + 30))
until ls "$checkpoints"/*.checkpoint >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || { echo "no snapshot on the leader within 30 s" >&2; exit 1; }
  sleep 0.2
done
# The stand-in bytes are made first (seconds for 1 GiB), then the latest snapshot is taken once
# the policy has settled: a snapshot taken meanwhile would make the chosen one stale, and the
# leader deletes stale snapshots (SNAPSHOT_NOT_FOUND, seen with a 1 GiB file).
head -c "$snapshot_bytes" /dev/urandom > "$checkpoints/../bench.tmp"
snapshot=""
until [ -n "$snapshot" ] && [ "$snapshot" = "$(ls "$checkpoints"/*.checkpoint | tail -1)" ]; do
  snapshot="$(ls "$checkpoints"/*.checkpoint | tail -1)"
  sleep 2
done
mv "$checkpoints/../bench.tmp" "$snapshot"
follower=1; [ "$leader" = 1 ] && follower=2
echo "snapshot: $snapshot ($(stat -c %s "$snapshot") bytes), leader $leader, load: $(cut -d' ' -f1-3 /proc/loadavg)"
# Warm the page cache the same way for both: each reads the file once before it is timed.
cat "$snapshot" > /dev/null
for round in 1 2 3; do
  "$RINGLOG" perf fetch-snapshot --bootstrap "127.0.0.1:${PORTS[$leader]}" --topic "$topic" \
    --snapshot "$snapshot" --replica-id "$follower" --max-bytes "$max_bytes"
  "$RINGLOG" perf sendfile-baseline "$snapshot"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
