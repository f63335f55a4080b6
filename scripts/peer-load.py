#!/usr/bin/env python3
"""Load clients for scripts/bench-peers.sh: the same two workloads against etcd, ZooKeeper and
ringlog (through librdkafka), each printing one JSON object shaped like `ringlog perf append
--json` (records_per_sec, mb_per_sec, latency_ms p50/p99/p999/max, errors, settings).

    peer-load.py etcd  --endpoint 127.0.0.1:P --in-flight N ...   (v3 HTTP/JSON gateway)
    peer-load.py zk    --hosts 127.0.0.1:P --in-flight N ...      (kazoo, async set)
    peer-load.py kafka --bootstrap 127.0.0.1:P --topic T ...       (confluent-kafka, acks=all)

A "write" is one durable, acknowledged write of --value-size bytes: an etcd put (the member
fsyncs its WAL before the leader commits), a ZooKeeper setData (forceSync: each server fsyncs
its transaction log before acking the proposal), a Kafka record with acks=all. --in-flight
bounds the writes waiting for their answer at once (1: one write at a time). Every run stops
by itself after --warmup-secs + --duration-secs; writes due in the warm-up are not counted.
Latency is from send to acknowledgement, in a closed loop.
"""

import argparse
import base64
import http.client
import json
import multiprocessing
import sys
import threading
import time


class Stats:
    """One process's latencies (microseconds) and errors in the measured window."""

    def __init__(self, started, args, acknowledged):
        self.lock = threading.Lock()
        self.latencies_us = []
        self.errors = 0
        self.measure_from = started + args.warmup_secs
        self.end = started + args.warmup_secs + args.duration_secs
        self.acknowledged = acknowledged

    def done(self, sent, ok):
        now = time.monotonic()
        if ok:
            with self.acknowledged.get_lock():
                self.acknowledged.value += 1
        if sent < self.measure_from or sent >= self.end:
            return
        with self.lock:
            if ok:
                self.latencies_us.append((now - sent) * 1e6)
            else:
                self.errors += 1


def summary(command, latencies, errors, args, seconds_wall, cpu_seconds, settings):
    latencies = sorted(latencies)

    def quantile_ms(q):
        if not latencies:
            return 0.0
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1000.0

    records = len(latencies)
    seconds = args.duration_secs
    return {
        "command": command,
        "records": records,
        "bytes": records * args.value_size,
        "seconds": seconds,
        "records_per_sec": records / seconds,
        "mb_per_sec": records * args.value_size / 1e6 / seconds,
        "requests": records,
        "errors": errors,
        "requests_unsent": 0,
        "latency_ms": {
            "p50": quantile_ms(0.50),
            "p99": quantile_ms(0.99),
            "p999": quantile_ms(0.999),
            "max": latencies[-1] / 1000.0 if latencies else 0.0,
        },
        # CPU the load client itself used (all its processes), as a share of one core: near
        # 100 % per process means the client, not the server, may set the pace.
        "client_cpu_percent": 100.0 * cpu_seconds / seconds_wall,
        "settings": settings,
    }


def run_parts(part, args, command, settings):
    """Runs `part(args, index, stats)` in --processes processes (Python threads share one
    core through the GIL; processes do not), starts them together once each has set up,
    prints a progress line each second, merges what they measured."""
    processes = max(1, args.processes)
    acknowledged = multiprocessing.Value("q", 0)
    ready = multiprocessing.Barrier(processes + 1)
    results = multiprocessing.Queue()

    def child(index):
        setup = part(args, index)
        ready.wait(timeout=120)
        started = time.monotonic()
        cpu_before = time.process_time()
        stats = Stats(started, args, acknowledged)
        setup(stats)
        results.put((stats.latencies_us, stats.errors, time.process_time() - cpu_before))

    context = multiprocessing.get_context("fork")
    children = [context.Process(target=child, args=(i,), daemon=True) for i in range(processes)]
    for c in children:
        c.start()
    ready.wait(timeout=120)
    started = time.monotonic()
    end = started + args.warmup_secs + args.duration_secs
    last = 0
    while time.monotonic() < end:
        time.sleep(1)
        count = acknowledged.value
        print(f"{command}: {count - last} writes/s acknowledged", file=sys.stderr)
        last = count
    latencies, errors, cpu_seconds = [], 0, 0.0
    for _ in children:
        part_latencies, part_errors, part_cpu = results.get(timeout=120)
        latencies += part_latencies
        errors += part_errors
        cpu_seconds += part_cpu
    wall = time.monotonic() - started
    for c in children:
        c.join(timeout=30)
    settings["processes"] = processes
    return summary(command, latencies, errors, args, wall, cpu_seconds, settings)


def split(total, parts, index):
    """Part `index` of `total` slots spread over `parts` (the first ones take the remainder)."""
    return total // parts + (1 if index < total % parts else 0)


# ---- etcd: v3 HTTP/JSON gateway, one keep-alive connection per in-flight slot ----------------

def etcd_leader(endpoints):
    """The client address of the member that leads (writes sent there skip a forwarding hop)."""
    members, leader = {}, None
    for endpoint in endpoints:
        host, port = endpoint.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("POST", "/v3/maintenance/status", body="{}")
        status = json.loads(conn.getresponse().read())
        members[status["header"]["member_id"]] = endpoint
        leader = status["leader"]
    return members.get(leader, endpoints[0])


def etcd_part(args, index):
    host, port = args.leader.split(":")
    value = base64.b64encode(b"x" * args.value_size).decode()
    slots = split(args.in_flight, args.processes, index)
    connections = [http.client.HTTPConnection(host, int(port), timeout=30) for _ in range(slots)]

    def run(stats):
        def worker(slot):
            conn = connections[slot]
            sequence = 0
            while True:
                sent = time.monotonic()
                if sent >= stats.end:
                    return
                # A small key space per slot: the store stays small (etcd keeps old
                # revisions until compaction, which this short run does not need).
                key = base64.b64encode(f"bench/{index}/{slot}/{sequence % 100}".encode()).decode()
                sequence += 1
                try:
                    conn.request("POST", "/v3/kv/put",
                                 body=json.dumps({"key": key, "value": value}))
                    response = conn.getresponse()
                    body = response.read()
                    stats.done(sent, response.status == 200 and b'"error"' not in body)
                except (OSError, http.client.HTTPException):
                    stats.done(sent, False)
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=30)

        threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(slots)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.warmup_secs + args.duration_secs + 60)

    return run


def run_etcd(args):
    args.leader = etcd_leader(args.endpoint.split(","))
    return run_parts(etcd_part, args, "etcd put (HTTP/JSON gateway)",
                     {"endpoint": args.leader, "in_flight": args.in_flight,
                      "value_size_bytes": args.value_size,
                      "duration_secs": args.duration_secs, "warmup_secs": args.warmup_secs})


# ---- ZooKeeper: kazoo, set_async with up to --in-flight outstanding per session --------------

def zk_leader(hosts):
    """The server whose `srvr` four-letter word says Mode: leader."""
    import socket
    for host_port in hosts:
        host, port = host_port.split(":")
        try:
            with socket.create_connection((host, int(port)), timeout=2) as s:
                s.sendall(b"srvr")
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
            if b"Mode: leader" in answer:
                return host_port
        except OSError:
            continue
    return hosts[0]


def zk_part(args, index):
    from kazoo.client import KazooClient

    sessions = split(args.sessions, args.processes, index)
    per_session = max(1, args.in_flight // args.sessions)
    value = b"x" * args.value_size
    clients = []
    for s in range(sessions):
        zk = KazooClient(hosts=args.leader, timeout=30)
        zk.start(timeout=30)
        for slot in range(per_session):
            zk.ensure_path(f"/bench/{index}/{s}/{slot}")
        clients.append(zk)

    def run(stats):
        def session(s):
            zk = clients[s]
            window = threading.Semaphore(per_session)
            sequence = 0
            while time.monotonic() < stats.end:
                window.acquire()
                sent = time.monotonic()
                if sent >= stats.end:
                    window.release()
                    break
                result = zk.set_async(f"/bench/{index}/{s}/{sequence % per_session}", value)
                sequence += 1

                def answered(result, sent=sent):
                    stats.done(sent, result.exception is None)
                    window.release()

                result.rawlink(answered)
            # The outstanding answers arrive (bounded) before the session closes.
            for _ in range(per_session):
                window.acquire(timeout=30)

        threads = [threading.Thread(target=session, args=(s,), daemon=True)
                   for s in range(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.warmup_secs + args.duration_secs + 60)
        for zk in clients:
            zk.stop()
            zk.close()

    return run


def run_zk(args):
    args.leader = zk_leader(args.hosts.split(","))
    args.sessions = max(args.sessions, args.processes)
    return run_parts(zk_part, args, "zookeeper setData (kazoo)",
                     {"server": args.leader, "sessions": args.sessions,
                      "in_flight": max(1, args.in_flight // args.sessions) * args.sessions,
                      "value_size_bytes": args.value_size,
                      "duration_secs": args.duration_secs, "warmup_secs": args.warmup_secs})


# ---- ringlog through librdkafka: confluent-kafka producers, acks=all -------------------------

def kafka_part(args, index):
    from confluent_kafka import Producer

    value = b"x" * args.value_size
    config = {
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "linger.ms": args.linger_ms,
        "max.in.flight.requests.per.connection": args.in_flight,
        "enable.idempotence": False,
        "queue.buffering.max.messages": args.queue_records,
        "message.timeout.ms": 30000,
    }
    producers = [Producer(config) for _ in range(split(args.producers, args.processes, index))]

    def run(stats):
        def producer_thread(producer):
            sequence = 0
            while time.monotonic() < stats.end:
                sent = time.monotonic()
                try:
                    producer.produce(args.topic, value, partition=sequence % args.partitions,
                                     on_delivery=lambda e, _m, sent=sent: stats.done(sent, e is None))
                    sequence += 1
                except BufferError:
                    producer.poll(0.001)
                    continue
                producer.poll(0)
            producer.flush(30)

        threads = [threading.Thread(target=producer_thread, args=(p,), daemon=True)
                   for p in producers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.warmup_secs + args.duration_secs + 60)

    return run


def run_kafka(args):
    return run_parts(kafka_part, args, "ringlog via confluent-kafka (librdkafka)",
                     {"bootstrap": args.bootstrap, "topic": args.topic,
                      "producers": args.producers, "linger_ms": args.linger_ms,
                      "max_in_flight_per_connection": args.in_flight,
                      "queue_records": args.queue_records,
                      "value_size_bytes": args.value_size,
                      "duration_secs": args.duration_secs, "warmup_secs": args.warmup_secs})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="system", required=True)
    for name in ("etcd", "zk", "kafka"):
        p = sub.add_parser(name)
        p.add_argument("--value-size", type=int, default=1024)
        p.add_argument("--in-flight", type=int, default=1)
        p.add_argument("--duration-secs", type=float, default=10)
        p.add_argument("--warmup-secs", type=float, default=2)
        p.add_argument("--processes", type=int, default=1,
                       help="client processes sharing the load (past one core's GIL)")
        if name == "etcd":
            p.add_argument("--endpoint", required=True, help="host:port[,host:port...]")
        elif name == "zk":
            p.add_argument("--hosts", required=True, help="host:port[,host:port...]")
            p.add_argument("--sessions", type=int, default=1)
        else:
            p.add_argument("--bootstrap", required=True)
            p.add_argument("--topic", required=True)
            p.add_argument("--partitions", type=int, default=1)
            p.add_argument("--producers", type=int, default=4)
            p.add_argument("--linger-ms", type=float, default=1)
            p.add_argument("--queue-records", type=int, default=10000)
    args = parser.parse_args()
    run = {"etcd": run_etcd, "zk": run_zk, "kafka": run_kafka}[args.system]
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
