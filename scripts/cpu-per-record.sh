#!/usr/bin/env bash
# CPU per acknowledged record of a fresh `ringlog dev` quorum (three voters and an observer on
# 127.0.0.1) under a fixed open-loop rate, split by thread name: the event loop (the node's
# main thread), `ringlog-sync` (group sync), the io_uring workers (`iou-wrk-*`), the others.
# Read from /proc/<pid>/task/*/stat over the measured seconds, after a warm-up. A fixed rate
# makes runs comparable where a saturated one is not: the CPU a record costs, not how many
# records the two cores reach (docs/benchmarks.md, "Where 100 partitions' extra CPU goes").
#
#   scripts/cpu-per-record.sh [BINARY] [RATE] [PARTITIONS]
#   SECS=6 CLIENTS=32 BATCH_RECORDS=64 scripts/cpu-per-record.sh target/release/ringlog 80000 100
set -euo pipefail
bin="${1:-target/release/ringlog}"; rate="${2:-80000}"; partitions="${3:-1}"
secs="${SECS:-6}"; clients="${CLIENTS:-32}"; batch_records="${BATCH_RECORDS:-64}"
port=19193
folder="$(mktemp -d /tmp/cpu-per-record.XXXXXX)"
trap 'rm -rf "$folder"' EXIT

setsid "$bin" dev --data-dir "$folder/nodes" --base-port "$port" --segment-bytes 67108864 \
  >"$folder/dev.log" 2>&1 &
dev=$!
for _ in $(seq 1 100); do grep -q '^leader:' "$folder/dev.log" 2>/dev/null && break; sleep 0.1; done
"$bin" perf append --bootstrap "127.0.0.1:$port" --clients "$clients" --batch-records "$batch_records" \
  --partitions "$partitions" --rate "$rate" --record-size 1024 --warmup-secs 4 \
  --duration-secs $((secs + 3)) --json >"$folder/perf.json" 2>"$folder/perf.err" &
load=$!
sleep 6
pids=$(cat "$folder"/nodes/node-*.pid)
snapshot() { # one line per thread: pid tid name ticks
  for pid in $pids; do
    for task in /proc/"$pid"/task/*; do
      # An io_uring worker may exit between the listing and the reads: skip it.
      comm=$(tr ' ' _ <"$task/comm" 2>/dev/null) || continue
      ticks=$(awk '{print $14 + $15}' "$task/stat" 2>/dev/null) || continue
      echo "$pid $(basename "$task") $comm $ticks"
    done
  done
}
process_ticks() { for pid in $pids; do awk '{print $14 + $15}' /proc/"$pid"/stat; done | paste -sd+ | bc; }
snapshot >"$folder/before"; before=$(process_ticks)
sleep "$secs"
snapshot >"$folder/after"; after=$(process_ticks)
wait "$load"
kill -TERM "$dev"; wait "$dev" 2>/dev/null || true

python3 - "$folder" "$rate" "$secs" "$before" "$after" "$(getconf CLK_TCK)" <<'PY'
import collections, json, sys
folder, rate, secs, before, after, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
records = rate * secs
us = lambda ticks: ticks * 1e6 / hz / records
def load(name):
    rows = {}
    for line in open(f"{folder}/{name}"):
        pid, tid, comm, ticks = line.split()
        rows[(pid, tid)] = (comm, int(ticks))
    return rows
first, last = load("before"), load("after")
by_name = collections.Counter()
for key, (comm, ticks) in last.items():
    name = "iou-wrk" if comm.startswith("iou-") else ("event loop" if key[0] == key[1] else comm)
    by_name[name] += ticks - first.get(key, (comm, 0))[1]
perf = json.load(open(f"{folder}/perf.json"))
print(f"{rate} records/s asked, {perf['records_per_sec']:.0f} acknowledged, p50 {perf['latency_ms']['p50']:.1f} ms")
print(f"the processes: {us(after - before):.2f} µs per record")
for name, ticks in by_name.most_common():
    print(f"  {name:16s} {us(ticks):6.2f} µs")
PY
