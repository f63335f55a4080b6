#!/usr/bin/env bash
# How fast a follower catches up: a three-voter quorum (scripts/lib-quorum.sh), one follower of
# `perf-0` stopped (SIGTERM), at least GIB GiB of record values appended without it (`ringlog
# perf append` in 2 s runs, 1 KiB records, acks=all, which the other two voters acknowledge; the
# batches' bytes behind are measured, ~1.6 GB for GIB=1), the follower started again, and the time
# from its start until its log end offset reaches the leader's (each node's metrics, polled
# every 20 ms). Beside it, in the same run, fio's sequential read rate of the same disk, for
# issue 16's bound: caught up in at most 2 x (bytes behind / that rate).
#
#   scripts/catch-up.sh            (GIB=1, RINGLOG=target/release/ringlog)
#   GIB=2 RINGLOG=/path/to/ringlog scripts/catch-up.sh
# The nodes' data folders (several GB) are removed when the run ends, their logs kept in
# target/catch-up/quorum; KEEP_DATA=1 keeps the data too.
set -euo pipefail
cd "$(dirname "$0")/.."
gib="${GIB:-1}"
command -v fio >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
[ -n "${RINGLOG:-}" ] || cargo build --quiet --release --bin ringlog
source scripts/lib-quorum.sh
folder="$PWD/target/catch-up"
start_quorum "$folder/quorum"
cleanup() {
  stop_quorum
  [ -n "${KEEP_DATA:-}" ] || rm -rf "$folder"/quorum/node-1 "$folder"/quorum/node-2 "$folder"/quorum/node-3
}
trap cleanup EXIT

metric() { # node metric partition
  python3 - "${METRICS[$1]}" "$2" "$3" <<'PY'
import re, sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=1).read().decode()
m = re.search(rf'kafka_server_raft_metrics_{sys.argv[2]}\{{partition="{sys.argv[3]}"\}} (\S+)', body)
print(int(float(m.group(1))) if m else -1)
PY
}

# The topic, and who leads it.
"$RINGLOG" perf append --bootstrap "127.0.0.1:${PORTS[1]}" --clients 1 --batch-records 1 \
  --duration-secs 1 >/dev/null
leader=""
for _ in $(seq 1 100); do leader="$(leader_id perf-0)"; [ -n "$leader" ] && break; sleep 0.1; done
follower=1; [ "$leader" = 1 ] && follower=2
echo "perf-0: leader node $leader; stopping follower node $follower"
kill -TERM "${PIDS[$follower]}"; wait "${PIDS[$follower]}" 2>/dev/null || true
behind_from="$(metric "$leader" log_end_offset perf-0)"

# Append GIB GiB while it is down.
target_records=$((gib * 1024 * 1024))
while :; do
  end="$(metric "$leader" log_end_offset perf-0)"
  [ "$end" -ge $((behind_from + target_records)) ] && break
  "$RINGLOG" perf append --bootstrap "127.0.0.1:${PORTS[$leader]}" --clients 32 --batch-records 64 \
    --duration-secs 2 >/dev/null
done
end="$(metric "$leader" log_end_offset perf-0)"
# The batches' bytes in a partition's segments: each segment's newest slot marks where its
# batches end (`ringlog dump`'s second line). Not the files' sizes: a segment file is created
# at its full size (1 GiB), so `du` measured whole segments (every run said "1.00 GiB" behind
# until 2026-12-05, when 1.6 GB was).
log_bytes() { # partition folder
  local total=0 f end
  for f in "$1"/*.log; do
    end=$("$RINGLOG" dump "$f" | sed -n 2p | grep -o "end at byte [0-9]*" | grep -o "[0-9]*$" || true)
    total=$((total + ${end:-0}))
  done
  echo "$total"
}
bytes_behind=$(log_bytes "$folder/quorum/node-$leader/perf-0")
bytes_follower=$(log_bytes "$folder/quorum/node-$follower/perf-0")
echo "leader's log end $end; follower behind by $((end - behind_from)) records, $((bytes_behind - bytes_follower)) bytes of batches"
# What the leader keeps in memory for the follower (`ringlog_tail_cache_bytes`, docs/log.md "What
# lagging voters have not fetched") and what that costs it in resident memory.
kept=$(python3 -c '
import re, sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=1).read().decode()
m = re.search(r"^ringlog_tail_cache_bytes (\S+)", body, re.M)
print(int(float(m.group(1))) if m else "no")' "${METRICS[$leader]}")
echo "leader: $kept bytes of batches kept in memory, $(awk '/VmRSS/ {print $2}' "/proc/${PIDS[$leader]}/status") KiB resident"

# Start it again and time its catch-up. One poller for the whole wait (a process started every
# 20 ms, python or bash, took a third of this 2-core machine's CPU from the nodes it measured),
# started before the page cache is dropped: started after, its own start-up (python read back
# from disk) was counted in the follower's, 0.3-0.8 s of the 2026-12-04 figures.
poll_out="$folder/poll.out"
rm -f "$poll_out"
python3 - "${METRICS[$follower]}" "$end" >"$poll_out" <<'PY' &
import re, sys, time, urllib.request
port, end = sys.argv[1], int(sys.argv[2])
pattern = re.compile(r'kafka_server_raft_metrics_log_end_offset\{partition="perf-0"\} (\S+)')
print("ready", flush=True)
started = None
while True:
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
        m = pattern.search(body)
    except OSError:
        m = None
    # The partition's metrics appear when it starts (once the metadata image names its topic).
    if m and started is None:
        started = time.time()
    if m and int(float(m.group(1))) >= end:
        print(f"{started:.6f} {time.time():.6f}", flush=True)
        break
    time.sleep(0.02)
PY
poller=$!
until grep -q ready "$poll_out" 2>/dev/null; do sleep 0.05; done
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
# The leader's log leaves the cache; the binary comes back (a restarted node's usually is).
cat "$RINGLOG" >/dev/null
leader_cpu_before=$(awk '{print $14+$15}' "/proc/${PIDS[$leader]}/stat")
started=$(date +%s.%N)
RUST_LOG=${NODE_LOG_LEVEL:-warn} "$RINGLOG" serve --config "$folder/quorum/node-$follower.properties" \
  2>>"$folder/quorum/node-$follower.log" &
PIDS[$follower]=$!
wait "$poller"
read -r partition_started caught < <(tail -n 1 "$poll_out")
# CPU time (user + system, in clock ticks of 10 ms) from /proc/<pid>/stat: the follower's since
# its start, the leader's during the catch-up.
follower_cpu=$(awk '{print $14+$15}' "/proc/${PIDS[$follower]}/stat")
leader_cpu=$(( $(awk '{print $14+$15}' "/proc/${PIDS[$leader]}/stat") - leader_cpu_before ))
echo "CPU: follower ${follower_cpu}0 ms since its start, leader ${leader_cpu}0 ms during the catch-up"

# The disk's sequential read rate, same run (direct, so the page cache does not answer).
fio --name=seqread --filename="$folder/fio.dat" --size=1g --rw=read --bs=1m --direct=1 \
  --ioengine=psync --output-format=json >"$folder/fio.json" 2>/dev/null
rm -f "$folder/fio.dat"
python3 - "$started" "$caught" "$((bytes_behind - bytes_follower))" "$folder/fio.json" \
  "$partition_started" <<'PY'
import json, sys
seconds = float(sys.argv[2]) - float(sys.argv[1])
copying = float(sys.argv[2]) - float(sys.argv[5])
behind = int(sys.argv[3])
read = json.load(open(sys.argv[4]))["jobs"][0]["read"]["bw_bytes"]
bound = 2 * behind / read
print(f"caught up in {seconds:.2f} s from the process's start ({copying:.2f} s from the "
      f"partition's start); {behind / 1e9:.2f} GB behind; fio sequential read "
      f"{read / 1e6:.0f} MB/s; bound 2 x behind / read = {bound:.2f} s; ratio {seconds / bound:.2f} "
      f"({copying / bound:.2f} from the partition's start)")
PY
