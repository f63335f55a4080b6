#!/usr/bin/env bash
# A bounded fault run (/tmp/fault-run-long.py): a fault-free phase, then one node at a time killed
# (kill -9) or paused (SIGSTOP) every few seconds, four idempotent confluent-kafka producers at
# acks=all throughout (1 KiB records); then every acknowledged record must be read back exactly once. Prints the
# acknowledged records/s of both phases and their ratio as one JSON line. 127.0.0.1 only.
#
#   scripts/fault-run.sh [SECONDS_PER_PHASE=60] [EVERY=5] [PARTITIONS=1]   (RINGLOG=binary)
#   KIND=all scripts/fault-run.sh …   every node killed (kill -9) at once instead, all restarted 2 s later
# The nodes' data folders (gigabytes per node) are removed when the run ends, the nodes' logs
# and properties kept in target/fault-run; KEEP_DATA=1 keeps the data too.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"; every="${2:-5}"; partitions="${3:-1}"
python3 -c 'import confluent_kafka' 2>/dev/null || python3 -m pip install --quiet --user confluent-kafka==2.16.1
# RINGLOG=path runs another binary (a baseline beside the current one); else a release build.
if [ -z "${RINGLOG:-}" ]; then
  cargo build --quiet --release --bin ringlog
  RINGLOG="$PWD/target/release/ringlog"
fi
source scripts/lib-quorum.sh
folder="$PWD/target/fault-run"
rm -rf "$folder"; mkdir -p "$folder"
read -r -a ports <<< "$(free_ports 6)"
voters=""
for id in 1 2 3; do voters="${voters:+$voters,}$id@127.0.0.1:${ports[$((2 * id - 2))]}"; done
cluster_id="$("$RINGLOG" random-uuid)"
for id in 1 2 3; do
  cat > "$folder/node-$id.properties" <<PROPS
node.id=$id
controller.quorum.voters=$voters
listeners=127.0.0.1:${ports[$((2 * id - 2))]}
metrics.listener=127.0.0.1:${ports[$((2 * id - 1))]}
metadata.log.dir=$folder/node-$id
PROPS
  "$RINGLOG" format --cluster-id "$cluster_id" --config "$folder/node-$id.properties" >/dev/null
done
bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[2]},127.0.0.1:${ports[4]}"
# The run reads every acknowledged record back before it returns: the data is not needed after.
[ -n "${KEEP_DATA:-}" ] || trap 'rm -rf "$folder"/node-1 "$folder"/node-2 "$folder"/node-3' EXIT
python3 /tmp/fault-run-long.py --binary "$RINGLOG" \
  --configs "$folder"/node-{1,2,3}.properties --logs "$folder"/node-{1,2,3}.log \
  --bootstrap "$bootstrap" --seconds "$seconds" --every "$every" --partitions "$partitions" \
  --kind "${KIND:-one}"
