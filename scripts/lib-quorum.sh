# Sourced by scripts/flamegraph.sh and scripts/bench-node.sh: a three-voter ringlog quorum on
# free 127.0.0.1 ports from a release build, with a metrics listener per node.
#
#   start_quorum FOLDER      formats and starts nodes 1..3; sets PORTS[i], METRICS[i], PIDS[i]
#                            (EXTRA_PROPS: more lines for every node's properties)
#   leader_id [PARTITION]    prints the id of the node whose metrics say current-state=leader
#                            for PARTITION (default __cluster_metadata-0; e.g. perf-0)
#   stop_quorum              SIGTERM to every node, then waits for them

RINGLOG="${RINGLOG:-$PWD/target/release/ringlog}"

# N distinct free ports below the kernel's ephemeral range (32768 on Linux by default), which
# outgoing connections never take between this check and the nodes' binds (port 0 would hand
# out exactly those): random in [20000, 32000), each checked free.
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = []
while len(ports) < int(sys.argv[1]):
    port = random.randrange(20000, min(32000, lo))
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    if port not in ports:
        ports.append(port)
print(" ".join(map(str, ports)))
PY
}

start_quorum() {
  local folder="$1" id voters=""
  rm -rf "$folder"; mkdir -p "$folder"
  PORTS=(); METRICS=(); PIDS=()
  local ports; read -r -a ports <<< "$(free_ports 6)"
  for id in 1 2 3; do
    PORTS[$id]="${ports[$((2 * id - 2))]}"; METRICS[$id]="${ports[$((2 * id - 1))]}"
    voters="${voters:+$voters,}$id@127.0.0.1:${PORTS[$id]}"
  done
  local cluster_id; cluster_id="$("$RINGLOG" random-uuid)"
  for id in 1 2 3; do
    cat > "$folder/node-$id.properties" <<PROPS
node.id=$id
controller.quorum.voters=$voters
listeners=127.0.0.1:${PORTS[$id]}
metrics.listener=127.0.0.1:${METRICS[$id]}
metadata.log.dir=$folder/node-$id
${EXTRA_PROPS:-}
PROPS
    "$RINGLOG" format --cluster-id "$cluster_id" --config "$folder/node-$id.properties" >/dev/null
    RUST_LOG=${NODE_LOG_LEVEL:-warn} "$RINGLOG" serve --config "$folder/node-$id.properties" 2>"$folder/node-$id.log" &
    PIDS[$id]=$!
  done
  local deadline=$((SECONDS + 30))
  until [ -n "$(leader_id)" ]; do
    [ $SECONDS -lt $deadline ] || { echo "no leader within 30 s" >&2; return 1; }
    sleep 0.2
  done
}

leader_id() {
  local id partition="${1:-__cluster_metadata-0}"
  for id in 1 2 3; do
    if python3 - "${METRICS[$id]}" "$partition" <<'PY' 2>/dev/null
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=1).read().decode()
sample = f'kafka_server_raft_metrics_current_state{{partition="{sys.argv[2]}",state="leader"}} 1'
sys.exit(0 if sample in body else 1)
PY
    then echo "$id"; return; fi
  done
}

stop_quorum() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
