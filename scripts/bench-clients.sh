#!/usr/bin/env bash
# `ringlog perf append` (1 and 16 clients, 1 x 1 KiB record per request, acks=all, 10 s each)
# then `perf fetch` of what they wrote (1 and 16 clients) beside `perf sendfile-baseline` of the
# first segment 16 times, on a fresh three-voter quorum (docs/benchmarks.md).
#
#   scripts/bench-clients.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release --bin ringlog
source scripts/lib-quorum.sh
folder="$PWD/target/bench-append"
start_quorum "$folder"
trap stop_quorum EXIT
# The topic `bench` (clients cannot write __cluster_metadata since issue 17), created by the
# first perf append; its partition elects its own leader.
topic=bench
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in 1 16; do
  "$RINGLOG" perf append --topic "$topic" --bootstrap "127.0.0.1:${PORTS[1]}" --clients $c \
    --batch-records 1 --record-size 1024 --acks all --duration-secs 10
done
leader="$(leader_id "$topic-0")"
"$RINGLOG" perf fetch --topic "$topic" --bootstrap "127.0.0.1:${PORTS[$leader]}" --clients 1 --max-bytes 8388608
"$RINGLOG" perf fetch --topic "$topic" --bootstrap "127.0.0.1:${PORTS[$leader]}" --clients 16 --max-bytes 8388608
seg=$(ls "$folder/node-$leader/$topic-0"/*.log | head -1)
"$RINGLOG" perf sendfile-baseline "$seg" --repeat 16
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
