#!/usr/bin/env bash
# One command: the engine's append workload and fio doing the same sequential direct writes
# with an fdatasync after each write, in the same run on the same folder; prints the
# bandwidths and their ratios (engine / fio; the target is >= 0.9).
#
#   scripts/append-vs-fio.sh [folder]        (default: target/append-vs-fio, on the repo's disk)
#   TOTAL_BYTES=268435456 WRITE_SIZE_BYTES=1048576 ROUNDS=3 scripts/append-vs-fio.sh
#
# What is compared, like for like (docs/log.md, "Performance"):
#   engine: 1 KiB records (one RecordBatch each), group-committed every WRITE_SIZE_BYTES of
#     batches, pipelined (the producer builds the next group while the previous flush is in
#     flight, as producers keep appending during a group commit; the ratio that counts) and
#     serial (build, then flush_until_durable: the disk idles while batches are built). Per
#     flush, one linked chain on the segment file: one slot write (2 blocks, in the slot region
#     at the file's end; plus the previous flush's confirmation record when the flush follows
#     another at once), one O_DIRECT write of the new full blocks, one fdatasync; one flush at a
#     time (queue depth 1). Its segment file is created 1 GiB + 5 blocks long and fallocate'd at
#     creation. The time includes building, CRC-checking and stamping the batches.
#   fio: WRITE_SIZE_BYTES sequential O_DIRECT writes through io_uring, an fdatasync after each,
#     iodepth 1, one fresh file of TOTAL_BYTES fallocate'd up front (fio's default).
# Each moves TOTAL_BYTES on the same folder, one after the other, ROUNDS times interleaved.
set -euo pipefail
cd "$(dirname "$0")/.."

folder="${1:-$PWD/target/append-vs-fio}"
total_bytes="${TOTAL_BYTES:-268435456}"
write_size_bytes="${WRITE_SIZE_BYTES:-1048576}"
rounds="${ROUNDS:-3}"

if ! command -v fio >/dev/null 2>&1; then
  echo "append-vs-fio: installing fio"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
fi

cargo build --quiet --release -p ringlog-engine --example append_workload
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
workload="$target_dir/release/examples/append_workload"

mkdir -p "$folder"
run_engine() { # $1: extra workload flag (empty: pipelined)
  local out
  out="$("$workload" --dir "$folder/engine" --total-bytes "$total_bytes" \
    --write-size-bytes "$write_size_bytes" $1)"
  echo "$out" | sed 's/^/engine: /' >&2
  rm -rf "$folder/engine"
  echo "$out" | sed -n 's/^bandwidth_bytes_per_sec=//p'
}
run_fio() {
  local json
  rm -rf "$folder/fio"
  mkdir -p "$folder/fio"
  json="$(fio --name=x --directory="$folder/fio" --ioengine=io_uring --direct=1 --rw=write \
    --fdatasync=1 --bs="$write_size_bytes" --size="$total_bytes" --iodepth=1 --fallocate=native \
    --output-format=json)"
  rm -rf "$folder/fio"
  echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"])'
}

# Interleaved rounds (engine pipelined, engine serial, fio), so drift of a shared machine's
# load hits all three alike; the ratio that counts is the median of the per-round ratios.
results=""
for round in $(seq 1 "$rounds"); do
  engine_bw="$(run_engine "")"
  serial_bw="$(run_engine --serial)"
  fio_bw="$(run_fio)"
  results="$results $engine_bw,$serial_bw,$fio_bw"
  echo "round $round done, load average $(cut -d' ' -f1 /proc/loadavg)" >&2
done

python3 - "$write_size_bytes" "$total_bytes" $results <<'PY'
import statistics, sys
write_size, total = int(sys.argv[1]), int(sys.argv[2])
rows = [tuple(float(x) for x in r.split(",")) for r in sys.argv[3:]]
mib = 1 << 20
print(f"write size {write_size} bytes, total {total // mib} MiB, {len(rows)} interleaved rounds")
print("round  pipelined MiB/s  serial MiB/s  fio MiB/s  pipelined/fio  serial/fio")
for i, (engine, serial, fio) in enumerate(rows, 1):
    print(f"{i:5}  {engine / mib:15.1f}  {serial / mib:12.1f}  {fio / mib:9.1f}  {engine / fio:13.3f}  {serial / fio:10.3f}")
median = statistics.median(e / f for e, _, f in rows)
median_serial = statistics.median(s / f for _, s, f in rows)
print(f"median ratio engine/fio: {median:.3f} (target >= 0.9); serial/fio: {median_serial:.3f}")
PY
echo "load average (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
