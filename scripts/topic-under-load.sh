#!/usr/bin/env bash
# What creating a topic costs the partitions already under load (issue 16: no event-loop turn
# holds the thread for more than a few milliseconds). Each round starts a fresh three-voter
# quorum (scripts/lib-quorum.sh, fsync on), loads one partition with an open-loop
# `ringlog perf append` (RATE records/s of 1 KiB from 8 clients, acks=all, one request in
# flight each), and after a few seconds creates a topic of P partitions from a second
# `perf append` (which waits for every partition's leader). Prints, per round, the loaded
# partition's latency (from each request's due time, so a stall shows in full) and the
# nodes' event-loop turns past 5, 20 and 100 ms and their longest turn, counted from the
# metrics before and after the load.
#
#   RINGLOG=target/release/ringlog ROUNDS=3 P=100 RATE=40000 scripts/topic-under-load.sh
#
# KEEP=1 keeps the last round's folder (node logs: NODE_LOG_LEVEL=warn,ringlog_net::node::observe=debug
# logs every turn past 5 ms with its slowest step).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"; partitions="${P:-100}"; rate="${RATE:-40000}"
folder="${FOLDER:-$(mktemp -d /tmp/topic-under-load.XXXXXX)}"
[ -n "${RINGLOG:-}" ] || cargo build --quiet --release --bin ringlog
source scripts/lib-quorum.sh
trap 'stop_quorum 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$folder/quorum"' EXIT

# Prints "turns>5 turns>20 turns>100 longest" summed (the longest: the largest) over the nodes.
turns() {
  python3 - "${METRICS[1]}" "${METRICS[2]}" "${METRICS[3]}" <<'PY'
import re, sys, urllib.request
over = {"5": 0, "20": 0, "100": 0}; longest = 0
for port in sys.argv[1:]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    for m in re.finditer(r'ringlog_event_loop_turns_held_over_total\{over_ms="(\d+)"\} (\d+)', body):
        if m.group(1) in over:
            over[m.group(1)] += int(m.group(2))
    m = re.search(r"ringlog_event_loop_longest_turn_ms (\d+)", body)
    longest = max(longest, int(m.group(1)) if m else 0)
print(over["5"], over["20"], over["100"], longest)
PY
}

echo "topic-under-load: $RINGLOG, $(date -u +%Y-%m-%dT%H:%M:%SZ), $partitions partitions created under $rate records/s"
for round in $(seq "$rounds"); do
  start_quorum "$folder/quorum"
  bootstrap="127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]},127.0.0.1:${PORTS[3]}"
  "$RINGLOG" perf append --bootstrap "$bootstrap" --topic loaded --clients 1 --batch-records 1 \
    --duration-secs 1 --json >/dev/null
  read -r b5 b20 b100 _ <<< "$(turns)"
  "$RINGLOG" perf append --bootstrap "$bootstrap" --topic loaded --clients 8 --batch-records 16 \
    --rate "$rate" --warmup-secs 1 --duration-secs 8 --json > "$folder/load.json" &
  load=$!
  sleep 4
  started=$(date +%s.%N)
  "$RINGLOG" perf append --bootstrap "$bootstrap" --topic "created$round" --partitions "$partitions" \
    --clients 1 --batch-records 1 --rate 10 --duration-secs 1 --json >/dev/null
  created=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)")
  wait "$load"
  read -r a5 a20 a100 longest <<< "$(turns)"
  stop_quorum
  python3 - "$folder/load.json" "$round" "$created" $((a5 - b5)) $((a20 - b20)) $((a100 - b100)) "$longest" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); l = j["latency_ms"]
print(f"round {sys.argv[2]}: {j['records_per_sec']:.0f} records/s, p99 {l['p99']:.1f} p99.9 {l['p999']:.1f} "
      f"max {l['max']:.1f} ms; topic created and led in {sys.argv[3]} s; turns past 5/20/100 ms "
      f"{sys.argv[4]}/{sys.argv[5]}/{sys.argv[6]}, longest {sys.argv[7]} ms")
PY
done
