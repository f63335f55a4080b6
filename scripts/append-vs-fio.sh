#!/usr/bin/env bash
# One command: the engine's append workload, then fio doing the same sequential direct writes
# with an fdatasync after each write, in the same run on the same folder; prints both
# bandwidths and their ratio (engine / fio; the target is >= 0.9).
#
#   scripts/append-vs-fio.sh [folder]        (default: target/append-vs-fio, on the repo's disk)
#   TOTAL_BYTES=268435456 WRITE_SIZE_BYTES=1048576 scripts/append-vs-fio.sh
#
# What is compared, like for like (docs/log.md, "Performance"):
#   engine: 1 KiB records (one RecordBatch each), group-committed every WRITE_SIZE_BYTES of
#     batches with flush_until_durable: per flush, one O_DIRECT write of the new full blocks to
#     the segment + fdatasync, and concurrently one tail-slot write (2 blocks) + fdatasync; one
#     flush at a time (queue depth 1 per file). Its segment file is fallocate'd (1 GiB, keep
#     size) at creation. The time includes building, CRC-checking and stamping the batches.
#   fio: WRITE_SIZE_BYTES sequential O_DIRECT writes through io_uring, an fdatasync after each,
#     iodepth 1, one fresh file of TOTAL_BYTES fallocate'd up front (fio's default).
# Both move TOTAL_BYTES on the same folder, one after the other in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."

folder="${1:-$PWD/target/append-vs-fio}"
total_bytes="${TOTAL_BYTES:-268435456}"
write_size_bytes="${WRITE_SIZE_BYTES:-1048576}"

if ! command -v fio >/dev/null 2>&1; then
  echo "append-vs-fio: installing fio"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
fi

cargo build --quiet --release -p ringlog-engine --example append_workload
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
workload="$target_dir/release/examples/append_workload"

mkdir -p "$folder"
engine_out="$("$workload" --dir "$folder/engine" --total-bytes "$total_bytes" --write-size-bytes "$write_size_bytes")"
echo "$engine_out" | sed 's/^/engine: /'
engine_bw="$(echo "$engine_out" | sed -n 's/^bandwidth_bytes_per_sec=//p')"
rm -rf "$folder/engine"

rm -rf "$folder/fio"
mkdir -p "$folder/fio"
fio_json="$(fio --name=x --directory="$folder/fio" --ioengine=io_uring --direct=1 --rw=write \
  --fdatasync=1 --bs="$write_size_bytes" --size="$total_bytes" --iodepth=1 --fallocate=native \
  --output-format=json)"
fio_bw="$(echo "$fio_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"])')"
rm -rf "$folder/fio"

python3 - "$engine_bw" "$fio_bw" "$write_size_bytes" "$total_bytes" <<'PY'
import sys
engine, fio, write_size, total = (float(x) for x in sys.argv[1:])
mib = 1 << 20
print(f"write size {int(write_size)} bytes, total {int(total) // mib} MiB")
print(f"engine append: {engine / mib:8.1f} MiB/s")
print(f"fio          : {fio / mib:8.1f} MiB/s")
print(f"ratio engine/fio: {engine / fio:.3f} (target >= 0.9)")
PY
echo "load average (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
