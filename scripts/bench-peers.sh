#!/usr/bin/env bash
# ringlog beside etcd 3.4 and ZooKeeper 3.8, one after the other on this machine in one run
# (docs/benchmarks.md, "ringlog, etcd and ZooKeeper"). Each system runs as three members on
# 127.0.0.1 with its data on the same disk (under target/bench-peers/), each durable before it
# acknowledges: ringlog acks=all with fsync on, etcd (WAL fsync, its default), ZooKeeper
# (forceSync=yes, its default). Only one system runs at a time; each is stopped before the next.
#
# Workloads, the same value size for all (VALUE_SIZE, default 1024 bytes):
#   (a) one client, one write at a time: p50/p99 latency of an acknowledged write;
#   (b) IN_FLIGHT writes outstanding (default 64, spread over CLIENTS=4 connections/sessions
#       where the client pipelines: ringlog, ZooKeeper; etcd gets IN_FLIGHT HTTP connections):
#       acknowledged writes/s.
#   (c) ringlog through librdkafka (confluent-kafka, acks=all, linger.ms 1, 4 producers),
#       which batches records into produce requests: writes/s only, beside (b).
# Load clients: `ringlog perf append --json` for ringlog; scripts/peer-load.py (etcd's v3
# HTTP/JSON gateway, kazoo for ZooKeeper, confluent-kafka) for the others.
#
#   scripts/bench-peers.sh          (VALUE_SIZE=1024 RUN_SECS=10 WARMUP_SECS=2 IN_FLIGHT=64 CLIENTS=4)
set -euo pipefail
cd "$(dirname "$0")/.."
value_size="${VALUE_SIZE:-1024}"
run_secs="${RUN_SECS:-10}"
warmup_secs="${WARMUP_SECS:-2}"
in_flight="${IN_FLIGHT:-64}"
clients="${CLIENTS:-4}"
# Python load clients are held to one core each by the GIL: (b) runs them in this many
# processes (ringlog's Rust client needs none).
processes="${PROCESSES:-2}"
per_client=$(( (in_flight + clients - 1) / clients ))
folder="$PWD/target/bench-peers"
results="$folder/results"
# Every load command ends by itself; this is the bound should a server hang.
load_timeout=$(( run_secs + warmup_secs + 90 ))

# ---- installs --------------------------------------------------------------------------------
missing=()
command -v etcd >/dev/null || missing+=(etcd-server)
command -v etcdctl >/dev/null || missing+=(etcd-client)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
python3 -c 'import kazoo' 2>/dev/null || pip3 install -q 'kazoo==2.11.0'
python3 -c 'import confluent_kafka' 2>/dev/null || pip3 install -q 'confluent-kafka==2.16.1'
cargo build --quiet --release --bin ringlog

source scripts/lib-quorum.sh
rm -rf "$folder"; mkdir -p "$results"

# Every process this script starts is in PEER_PIDS (ringlog's in PIDS, from lib-quorum.sh);
# all are ended on exit, however the script exits.
PEER_PIDS=(); PIDS=()
stop_peers() {
  local pid
  for pid in "${PEER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PEER_PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PEER_PIDS=()
}
# The data folders go once a system has stopped (ringlog preallocates 1 GiB per partition
# segment on each node: 3 x 3 GiB here), unless KEEP_DATA=1; results and logs stay.
drop_data() { [ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$@"; }
cleanup() {
  stop_peers; stop_quorum 2>/dev/null || true
  drop_data "$folder/ringlog" "$folder/etcd" "$folder/zookeeper"
}
trap cleanup EXIT

load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
# run_load NAME COMMAND...: the command's JSON summary to NAME.json, its progress lines to
# this terminal, and the CPU it used (user, system, wall seconds) to NAME.cpu.
run_load() {
  local name="$1"; shift
  local TIMEFORMAT='%U %S %R'
  { time timeout "$load_timeout" "$@" > "$results/$name.json" 2>&3; } 3>&2 2> "$results/$name.cpu"
}
echo "bench-peers: value ${value_size} B, ${run_secs} s measured after ${warmup_secs} s warm-up, (b) ${in_flight} in flight"
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
load

peer_load=(python3 scripts/peer-load.py)
same=(--value-size "$value_size" --warmup-secs "$warmup_secs" --duration-secs "$run_secs")

# ---- ringlog -----------------------------------------------------------------------------------
echo "== ringlog: 3 voters (release build, fsync on), acks=all"
start_quorum "$folder/ringlog"
leader="$(leader_id)"
bootstrap="127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]},127.0.0.1:${PORTS[3]}"
perf=("$RINGLOG" perf append --bootstrap "$bootstrap" --topic bench --partitions 1
  --batch-records 1 --record-size "$value_size" --acks all
  --warmup-secs "$warmup_secs" --duration-secs "$run_secs" --json)
run_load ringlog-a "${perf[@]}" --clients 1 --in-flight 1
run_load ringlog-b "${perf[@]}" --clients "$clients" --in-flight "$per_client"
run_load ringlog-c "${peer_load[@]}" kafka --bootstrap "$bootstrap" --topic bench \
  --producers 4 --in-flight 16 --linger-ms 1 --processes "$processes" "${same[@]}"
echo "leader was node $leader; $(load)"
stop_quorum
drop_data "$folder/ringlog"

# ---- etcd --------------------------------------------------------------------------------------
echo "== etcd $(etcd --version | head -1 | cut -d' ' -f3): 3 members"
read -r -a ports <<< "$(free_ports 6)"
cluster=""
for i in 1 2 3; do
  cluster="${cluster:+$cluster,}m$i=http://127.0.0.1:${ports[$((2 * i - 1))]}"
done
endpoints=""
for i in 1 2 3; do
  client="127.0.0.1:${ports[$((2 * i - 2))]}" peer="http://127.0.0.1:${ports[$((2 * i - 1))]}"
  endpoints="${endpoints:+$endpoints,}$client"
  etcd --name "m$i" --data-dir "$folder/etcd/m$i" \
    --listen-client-urls "http://$client" --advertise-client-urls "http://$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench-peers \
    --logger zap --log-level warn 2> "$folder/etcd-m$i.log" &
  PEER_PIDS+=($!)
done
deadline=$((SECONDS + 60))
until ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || { echo "etcd not healthy within 60 s" >&2; exit 1; }
  sleep 0.5
done
run_load etcd-a "${peer_load[@]}" etcd --endpoint "$endpoints" --in-flight 1 "${same[@]}"
run_load etcd-b "${peer_load[@]}" etcd --endpoint "$endpoints" --in-flight "$in_flight" \
  --processes "$processes" "${same[@]}"
load
stop_peers
drop_data "$folder/etcd"

# ---- ZooKeeper ---------------------------------------------------------------------------------
echo "== ZooKeeper $(dpkg-query -W -f '${Version}' zookeeper): 3 servers"
read -r -a ports <<< "$(free_ports 9)"
hosts=""
for i in 1 2 3; do hosts="${hosts:+$hosts,}127.0.0.1:${ports[$((3 * i - 3))]}"; done
for i in 1 2 3; do
  dir="$folder/zookeeper/s$i"; mkdir -p "$dir/data"; echo "$i" > "$dir/data/myid"
  {
    echo "tickTime=2000"; echo "initLimit=10"; echo "syncLimit=5"
    echo "dataDir=$dir/data"; echo "clientPort=${ports[$((3 * i - 3))]}"
    echo "clientPortAddress=127.0.0.1"; echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr"; echo "maxClientCnxns=0"
    for j in 1 2 3; do
      echo "server.$j=127.0.0.1:${ports[$((3 * j - 2))]}:${ports[$((3 * j - 1))]}"
    done
  } > "$dir/zoo.cfg"
  java -Xmx512m -Dzookeeper.root.logger=WARN,CONSOLE -Dzookeeper.console.threshold=WARN \
    -cp "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" > "$folder/zookeeper-s$i.log" 2>&1 &
  PEER_PIDS+=($!)
done
zk_serving() {
  python3 - "$hosts" <<'PY'
import socket, sys
modes = []
for hp in sys.argv[1].split(","):
    host, port = hp.split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1) as s:
            s.sendall(b"srvr"); answer = s.recv(4096)
        modes += [line for line in answer.decode().splitlines() if line.startswith("Mode:")]
    except OSError:
        pass
sys.exit(0 if "Mode: leader" in modes and modes.count("Mode: follower") == 2 else 1)
PY
}
deadline=$((SECONDS + 90))
until zk_serving; do
  [ $SECONDS -lt $deadline ] || { echo "ZooKeeper ensemble not serving within 90 s" >&2; exit 1; }
  sleep 0.5
done
run_load zk-a "${peer_load[@]}" zk --hosts "$hosts" --sessions 1 --in-flight 1 "${same[@]}"
run_load zk-b "${peer_load[@]}" zk --hosts "$hosts" --sessions "$clients" --in-flight "$in_flight" \
  --processes "$processes" "${same[@]}"
load
stop_peers

# ---- the table ---------------------------------------------------------------------------------
python3 - "$results" <<'PY'
import json, sys
names = ["ringlog-a", "ringlog-b", "ringlog-c", "etcd-a", "etcd-b", "zk-a", "zk-b"]
r = {name: json.load(open(f"{sys.argv[1]}/{name}.json")) for name in names}
for name in names:
    # `time`'s user, system and wall seconds of the load command (last line of NAME.cpu).
    user, system, wall = map(float, open(f"{sys.argv[1]}/{name}.cpu").read().split()[-3:])
    r[name]["client_cpu_percent"] = 100 * (user + system) / wall
def ratio(a, b):
    return f"{a / b:.2f}" if b else "-"
def row(what, key, pick, fmt, ratios=True):
    ring, etcd, zk = (pick(r[f"{s}-{key}"]) for s in ("ringlog", "etcd", "zk"))
    ratios = f"{ratio(ring, etcd)} | {ratio(ring, zk)}" if ratios else "- | -"
    print(f"| {what} | {fmt(ring)} | {fmt(etcd)} | {fmt(zk)} | {ratios} |")
ms = lambda v: f"{v:.2f} ms"
rate = lambda v: f"{v:,.0f}".replace(",", " ")
print("| workload | ringlog | etcd | ZooKeeper | ringlog ÷ etcd | ringlog ÷ ZooKeeper |")
print("| --- | --- | --- | --- | --- | --- |")
row("(a) 1 write at a time: p50", "a", lambda s: s["latency_ms"]["p50"], ms)
row("(a) 1 write at a time: p99", "a", lambda s: s["latency_ms"]["p99"], ms)
row("(a) 1 write at a time: writes/s", "a", lambda s: s["records_per_sec"], rate)
row("(b) many in flight: writes/s", "b", lambda s: s["records_per_sec"], rate)
row("(b) many in flight: p50", "b", lambda s: s["latency_ms"]["p50"], ms)
row("(b) many in flight: p99", "b", lambda s: s["latency_ms"]["p99"], ms)
cpu = lambda v: f"{v:.0f} %"
row("(a) load client CPU, % of one core", "a", lambda s: s["client_cpu_percent"], cpu, False)
row("(b) load client CPU, % of one core", "b", lambda s: s["client_cpu_percent"], cpu, False)
c = r["ringlog-c"]
print(f"| (c) ringlog via librdkafka, records batched by the client: writes/s | {rate(c['records_per_sec'])} "
      f"(p50 {ms(c['latency_ms']['p50'])}, client CPU {cpu(c['client_cpu_percent'])}) | not measured | not measured | - | - |")
errors = {k: v["errors"] for k, v in r.items() if v["errors"]}
print(f"errors: {errors or 'none'}")
PY
echo "raw JSON summaries: $results"
