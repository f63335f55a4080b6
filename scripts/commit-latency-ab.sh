#!/usr/bin/env bash
# One acks=all record at a time on a fresh `ringlog dev` quorum (three voters and an observer on
# 127.0.0.1, fsync on), for two ringlog binaries in alternation, ROUNDS times each, in one run:
# the p50/p99 commit latency of each run and the median per binary. Used to judge a change to
# the commit path against the binary before it on the same machine in the same minutes.
#
#   scripts/commit-latency-ab.sh OLD_BINARY NEW_BINARY [folder]
#   ROUNDS=3 DURATION_SECS=8 RECORD_SIZE=1024 scripts/commit-latency-ab.sh a/ringlog b/ringlog
set -euo pipefail
old="$1"; new="$2"
folder="${3:-$(mktemp -d /tmp/commit-latency-ab.XXXXXX)}"
mkdir -p "$folder"
rounds="${ROUNDS:-3}"; duration="${DURATION_SECS:-8}"; record_size="${RECORD_SIZE:-1024}"
port=19193

run_one() { # binary label round
  local bin="$1" label="$2" round="$3" data="$folder/$2-$3"
  rm -rf "$data"; mkdir -p "$data"
  setsid "$bin" dev --data-dir "$data/nodes" --base-port "$port" --segment-bytes 67108864 \
    >"$data/dev.log" 2>&1 &
  local dev=$!
  for _ in $(seq 1 100); do grep -q '^leader:' "$data/dev.log" 2>/dev/null && break; sleep 0.1; done
  "$bin" perf append --bootstrap "127.0.0.1:$port" --clients 1 --batch-records 1 \
    --record-size "$record_size" --warmup-secs 2 --duration-secs "$duration" --json \
    >"$data/perf.json" 2>"$data/perf.err" || true
  kill -TERM "$dev" 2>/dev/null || true
  wait "$dev" 2>/dev/null || true
  python3 - "$data/perf.json" "$label" "$round" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
l = j["latency_ms"]
print(f"{sys.argv[2]} round {sys.argv[3]}: p50 {l['p50']:.3f} ms  p99 {l['p99']:.3f} ms  {j['records_per_sec']:.0f} records/s  errors {j['errors']}")
PY
}

for round in $(seq 1 "$rounds"); do
  run_one "$old" old "$round" | tee -a "$folder/results.txt"
  run_one "$new" new "$round" | tee -a "$folder/results.txt"
done
python3 - "$folder/results.txt" <<'PY'
import re, statistics, sys
p50 = {"old": [], "new": []}
for line in open(sys.argv[1]):
    m = re.match(r"(old|new) round \d+: p50 ([\d.]+)", line)
    if m:
        p50[m.group(1)].append(float(m.group(2)))
o, n = statistics.median(p50["old"]), statistics.median(p50["new"])
print(f"median p50: old {o:.3f} ms, new {n:.3f} ms, new/old {n/o:.2f}")
PY
