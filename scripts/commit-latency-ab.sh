#!/usr/bin/env bash
# One acks=all record at a time on a fresh `ringlog dev` quorum (three voters and an observer on
# 127.0.0.1, fsync on), for two or more ringlog binaries in alternation, ROUNDS times each, in
# one run: the p50/p99 commit latency and records/s of each run, the medians per binary, and
# each over the first binary's (CLIENTS, IN_FLIGHT (requests per client) and BATCH_RECORDS make it a throughput run, PARTITIONS
# spreads it over a topic of that many partitions). Used to judge a change to the commit path against the binary before
# it on the same machine in the same minutes.
#
#   scripts/commit-latency-ab.sh LABEL=BINARY LABEL=BINARY [...]
#   ROUNDS=3 DURATION_SECS=8 RECORD_SIZE=1024 CLIENTS=1 IN_FLIGHT=1 BATCH_RECORDS=1 PARTITIONS=1 \
#     FOLDER=/tmp/x \
#     scripts/commit-latency-ab.sh \
#     old=a/ringlog new=b/ringlog
set -euo pipefail
folder="${FOLDER:-$(mktemp -d /tmp/commit-latency-ab.XXXXXX)}"
mkdir -p "$folder"
rounds="${ROUNDS:-3}"; duration="${DURATION_SECS:-8}"; record_size="${RECORD_SIZE:-1024}"
clients="${CLIENTS:-1}"; batch_records="${BATCH_RECORDS:-1}"; partitions="${PARTITIONS:-1}"
in_flight="${IN_FLIGHT:-1}"
port=19193

run_one() { # binary label round
  local bin="$1" label="$2" round="$3" data="$folder/$2-$3"
  rm -rf "$data"; mkdir -p "$data"
  setsid "$bin" dev --data-dir "$data/nodes" --base-port "$port" --segment-bytes 67108864 \
    >"$data/dev.log" 2>&1 &
  local dev=$!
  for _ in $(seq 1 100); do grep -q '^leader:' "$data/dev.log" 2>/dev/null && break; sleep 0.1; done
  "$bin" perf append --bootstrap "127.0.0.1:$port" --clients "$clients" --batch-records "$batch_records" \
    --partitions "$partitions" --in-flight "$in_flight" \
    --record-size "$record_size" --warmup-secs 2 --duration-secs "$duration" --json \
    >"$data/perf.json" 2>"$data/perf.err" || true
  kill -TERM "$dev" 2>/dev/null || true
  wait "$dev" 2>/dev/null || true
  # A loaded run writes gigabytes per node: keep only the logs and the figures.
  rm -rf "$data/nodes"
  python3 - "$data/perf.json" "$label" "$round" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
l = j["latency_ms"]
print(f"{sys.argv[2]} round {sys.argv[3]}: p50 {l['p50']:.3f} ms  p99 {l['p99']:.3f} ms  {j['records_per_sec']:.0f} records/s  errors {j['errors']}")
PY
}

for round in $(seq 1 "$rounds"); do
  for pair in "$@"; do
    run_one "${pair#*=}" "${pair%%=*}" "$round" | tee -a "$folder/results.txt"
  done
done
python3 - "$folder/results.txt" "${1%%=*}" <<'PY'
import re, statistics, sys
p50, rate = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) round \d+: p50 ([\d.]+) ms .* ([\d]+) records/s", line)
    if m:
        p50.setdefault(m.group(1), []).append(float(m.group(2)))
        rate.setdefault(m.group(1), []).append(float(m.group(3)))
base, base_rate = statistics.median(p50[sys.argv[2]]), statistics.median(rate[sys.argv[2]])
for label in p50:
    median, median_rate = statistics.median(p50[label]), statistics.median(rate[label])
    print(f"median {label}: p50 {median:.3f} ms ({median / base:.2f} of {sys.argv[2]}), "
          f"{median_rate:.0f} records/s ({median_rate / base_rate:.2f} of {sys.argv[2]})")
PY
