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
#     flush, concurrent writes on the segment file: one slot write (2 blocks, in the slot region
#     at the file's end; plus the previous flush's confirmation record when the flush follows
#     another at once), one O_DIRECT write of the new full blocks, then one fdatasync; one
#     flush at a time (queue depth 1). Its segment file is created 1 GiB + 5 blocks long and fallocate'd at
#     creation. The time includes building, CRC-checking and stamping the batches.
#   fio: WRITE_SIZE_BYTES sequential O_DIRECT writes through io_uring, an fdatasync after each,
#     iodepth 1, TOTAL_BYTES from the start of one fresh file fallocate'd up front. The file has
#     the engine's segment file length (A, the baseline of the target): a 1 GiB preallocated file
#     has more extents than the inode holds, so ext4 writes an extent block at every fdatasync
#     (two metadata writes per cycle instead of one; block-layer traces show it for both),
#     which is the file's shape, not engine overhead. Also shown, fio's own default: a file of
#     TOTAL_BYTES (B).
# Each moves TOTAL_BYTES on the same folder, one after the other, ROUNDS times interleaved, with
# the discards of the previous run's deleted file finished first.
set -euo pipefail
cd "$(dirname "$0")/.."

folder="${1:-$PWD/target/append-vs-fio}"
total_bytes="${TOTAL_BYTES:-268435456}"
write_size_bytes="${WRITE_SIZE_BYTES:-1048576}"
rounds="${ROUNDS:-9}"

if ! command -v fio >/dev/null 2>&1; then
  echo "append-vs-fio: installing fio"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
fi

cargo build --quiet --release -p ringlog-engine --example append_workload
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
workload="$target_dir/release/examples/append_workload"

mkdir -p "$folder"
# Deleting a run's file makes the filesystem discard its blocks (this machine's ext4 is mounted
# with `discard`): ~70 ms of device time after a 1 GiB segment (block-layer trace), which landed on whichever run came
# next. Let it finish before the next run starts.
settle() {
  sync
  sleep 0.3
}
run_engine() { # $1: extra workload flag (empty: pipelined). Sets engine_bw, segment_file_bytes.
  local out
  out="$("$workload" --dir "$folder/engine" --total-bytes "$total_bytes" \
    --write-size-bytes "$write_size_bytes" $1)"
  echo "$out" | sed 's/^/engine: /' >&2
  rm -rf "$folder/engine"
  settle
  engine_bw="$(echo "$out" | sed -n 's/^bandwidth_bytes_per_sec=//p')"
  segment_file_bytes="$(echo "$out" | sed -n 's/^segment_file_bytes=//p')"
}
run_fio() { # $1: the file's length (fio writes TOTAL_BYTES of it from the start). Sets fio_bw.
  local json
  rm -rf "$folder/fio"
  mkdir -p "$folder/fio"
  json="$(fio --name=x --directory="$folder/fio" --ioengine=io_uring --direct=1 --rw=write \
    --fdatasync=1 --bs="$write_size_bytes" --filesize="$1" --io_size="$total_bytes" \
    --iodepth=1 --fallocate=native --output-format=json)"
  rm -rf "$folder/fio"
  settle
  fio_bw="$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"])')"
}

rm -rf "$folder/engine" "$folder/fio"
settle

# Interleaved rounds, so drift of a shared machine's disk hits all alike: engine pipelined, fio
# on the engine's file shape, engine serial, fio on a file of TOTAL_BYTES. The ratio that counts
# is the median of the per-round pipelined / fio-on-the-same-file-shape ratios.
results=""
for round in $(seq 1 "$rounds"); do
  run_engine ""
  pipelined_bw="$engine_bw"
  run_fio "$segment_file_bytes"
  fio_same_shape_bw="$fio_bw"
  run_engine --serial
  serial_bw="$engine_bw"
  run_fio "$total_bytes"
  results="$results $pipelined_bw,$serial_bw,$fio_same_shape_bw,$fio_bw"
  echo "round $round done, load average $(cut -d' ' -f1 /proc/loadavg)" >&2
done

python3 - "$write_size_bytes" "$total_bytes" "$segment_file_bytes" $results <<'PY'
import statistics, sys
write_size, total, segment_file = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rows = [tuple(float(x) for x in r.split(",")) for r in sys.argv[4:]]
mib = 1 << 20
print(f"write size {write_size} bytes, total {total // mib} MiB, {len(rows)} interleaved rounds")
print(f"fio A: a file of the engine's segment shape ({segment_file} bytes, fallocate'd); "
      f"fio B: fio's default, a file of {total} bytes")
print("round  pipelined  serial  fio A   fio B  (MiB/s)  pipelined/A  serial/A  pipelined/B")
for i, (engine, serial, fio_a, fio_b) in enumerate(rows, 1):
    print(f"{i:5}  {engine / mib:9.1f}  {serial / mib:6.1f}  {fio_a / mib:6.1f}  {fio_b / mib:6.1f}"
          f"           {engine / fio_a:11.3f}  {serial / fio_a:8.3f}  {engine / fio_b:11.3f}")
median = lambda values: statistics.median(list(values))
print(f"median ratio engine/fio: {median(r[0] / r[2] for r in rows):.3f} (target >= 0.9); "
      f"serial/fio: {median(r[1] / r[2] for r in rows):.3f}; "
      f"engine/fio on fio's default file: {median(r[0] / r[3] for r in rows):.3f}")
PY
echo "load average (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
