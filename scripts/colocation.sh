#!/usr/bin/env bash
# Issue 16's co-location experiment: does throughput depend on whether one node leads both the
# topic's partition and `__cluster_metadata-0`? Each round starts a fresh three-voter quorum
# (scripts/lib-quorum.sh, fsync on), creates a topic of one partition, notes which node leads
# it and which leads the metadata partition, and runs four confluent-kafka producers
# (scripts/peer-load.py: acks=all, linger.ms=1, 1 KiB values, QUEUE records in flight each)
# for SECS seconds. Where the quorum puts the leaders is its own choice, so rounds go on until
# each placement (same node, different nodes) has RUNS rounds, or MAX_ROUNDS in all; then the
# table of both, and the ratio of their medians.
#
#   RUNS=5 MAX_ROUNDS=20 SECS=10 QUEUE=200 scripts/colocation.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-5}"; max_rounds="${MAX_ROUNDS:-20}"; secs="${SECS:-10}"; queue="${QUEUE:-200}"
folder="${FOLDER:-$(mktemp -d /tmp/colocation.XXXXXX)}"
results="$folder/results"; mkdir -p "$results"
python3 -c 'import confluent_kafka' 2>/dev/null || pip3 install -q 'confluent-kafka==2.16.1'
cargo build --quiet --release --bin ringlog
source scripts/lib-quorum.sh
trap 'stop_quorum 2>/dev/null || true; rm -rf "$folder/quorum"' EXIT

echo "colocation: commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ), $secs s per round, $queue in flight per producer"
same=0; different=0; round=0
while { [ "$same" -lt "$runs" ] || [ "$different" -lt "$runs" ]; } && [ "$round" -lt "$max_rounds" ]; do
  round=$((round + 1))
  start_quorum "$folder/quorum"
  bootstrap="127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]},127.0.0.1:${PORTS[3]}"
  # Creates the topic (one partition) with a few records.
  "$RINGLOG" perf append --bootstrap "$bootstrap" --topic colo --partitions 1 --clients 1 \
    --batch-records 1 --duration-secs 1 --json >/dev/null
  topic_leader=""
  for _ in $(seq 100); do topic_leader="$(leader_id colo-0)"; [ -n "$topic_leader" ] && break; sleep 0.1; done
  metadata_leader="$(leader_id)"
  if [ "$topic_leader" = "$metadata_leader" ]; then placement=same; else placement=different; fi
  # A placement already measured RUNS times is not run again.
  if { [ "$placement" = same ] && [ "$same" -ge "$runs" ]; } ||
     { [ "$placement" = different ] && [ "$different" -ge "$runs" ]; }; then
    stop_quorum; continue
  fi
  python3 scripts/peer-load.py kafka --bootstrap "$bootstrap" --topic colo --producers 4 \
    --queue-records "$queue" --in-flight 5 --linger-ms 1 --warmup-secs 2 --duration-secs "$secs" \
    > "$results/round-$round.json" 2>/dev/null
  stop_quorum
  if [ "$placement" = same ]; then same=$((same + 1)); else different=$((different + 1)); fi
  python3 - "$results/round-$round.json" "$round" "$placement" "$topic_leader" "$metadata_leader" <<'PY' | tee -a "$results/rounds.txt"
import json, sys
j = json.load(open(sys.argv[1]))
l = j["latency_ms"]
print(f"round {sys.argv[2]}: {sys.argv[3]} (colo-0 led by {sys.argv[4]}, metadata by {sys.argv[5]}): "
      f"{j['records_per_sec']:.0f} records/s p50 {l['p50']:.1f} ms p99 {l['p99']:.1f} ms errors {j['errors']}")
PY
done
python3 - "$results/rounds.txt" <<'PY'
import re, statistics, sys
by = {"same": [], "different": []}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+: (\w+) .*: (\d+) records/s p50 ([\d.]+) ms", line)
    if m:
        by[m.group(1)].append((int(m.group(2)), float(m.group(3))))
print("| placement | rounds | records/s | median | p50 ms (median) |")
print("| --- | --- | --- | --- | --- |")
for k, v in by.items():
    if v:
        print(f"| {k} node{'s' if k == 'different' else ''} | {len(v)} | {' / '.join(str(r) for r, _ in v)} "
              f"| {statistics.median(r for r, _ in v):,.0f} | {statistics.median(p for _, p in v):.1f} |")
if by["same"] and by["different"]:
    ratio = statistics.median(r for r, _ in by["same"]) / statistics.median(r for r, _ in by["different"])
    print(f"same over different (medians): {ratio:.2f}")
PY
