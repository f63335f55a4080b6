#!/usr/bin/env python3
"""A bounded fault run against a three-voter ringlog quorum on 127.0.0.1 (scripts/fault-run.sh
starts the quorum and calls this).

Phases, each `--seconds` long: a fault-free phase, then a fault phase in which one node at a
time is killed (kill -9, restarted after 2 s) or paused (SIGSTOP, SIGCONT after 2 s) every
`--every` seconds, never more than one at a time (`--kind all`: every node killed at once
instead, all restarted after 2 s). Throughout, `--producers` confluent-kafka
producers (acks=all, idempotent) write unique values to a topic. At the end every node is
running, a consumer reads the whole topic from every partition's beginning, and the run fails if
any acknowledged value is missing or if a value appears twice (the producers are idempotent).

Prints one JSON line with the acknowledged records/s of each phase and their ratio, and the
nodes' event-loop turns in each phase that held the loop's thread, or used its CPU, past 5, 20,
100 and 500 ms (`ringlog_event_loop_turns_*`, scraped from each node's metrics every half
second; a paused node's turn counts as held for the pause; what a killed node counted since
the last scrape is lost with it).
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


class Node:
    def __init__(self, node_id, binary, config, log_path):
        self.id, self.binary, self.config, self.log_path = node_id, binary, config, log_path
        self.process = None

    def start(self):
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        log_file = open(self.log_path, "a")
        self.process = subprocess.Popen(
            [self.binary, "serve", "--config", self.config],
            stdout=subprocess.DEVNULL, stderr=log_file, env=env)

    def alive(self):
        return self.process is not None and self.process.poll() is None


def produce_loop(bootstrap, topic, index, stop, acked, lock, record_size):
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 1, "message.timeout.ms": 120000, "queue.buffering.max.messages": 2000,
    })
    sequence = 0

    def delivered(error, message):
        if error is None:
            with lock:
                acked.append((message.value().split(b" ", 1)[0].decode(), time.monotonic()))

    while not stop.is_set():
        try:
            value = f"p{index}-{sequence} ".ljust(record_size, "x").encode()
            producer.produce(topic, value=value, on_delivery=delivered)
            sequence += 1
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.flush(150)


class TurnCounts:
    """The event-loop turn counters of every node, summed over restarts (a counter that went
    down belongs to a new process: its value is all new)."""

    PREFIX = "ringlog_event_loop_"

    def __init__(self, configs):
        self.ports = []
        for config in configs:
            with open(config) as f:
                listener = [l.split("=", 1)[1].strip() for l in f if l.startswith("metrics.listener=")]
            self.ports.append(listener[0].rsplit(":", 1)[1] if listener else None)
        self.last = [{} for _ in configs]
        self.total = {}
        self.longest_ms = 0.0
        self.lock = threading.Lock()

    def scrape(self):
        for index, port in enumerate(self.ports):
            if port is None:
                continue
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.3).read().decode()
            except Exception:  # killed, paused or starting: the next scrape counts it
                continue
            with self.lock:
                for line in body.splitlines():
                    if not line.startswith(self.PREFIX):
                        continue
                    key, value = line.rsplit(" ", 1)
                    value = float(value)
                    if key.startswith(self.PREFIX + "longest_turn_ms"):
                        self.longest_ms = max(self.longest_ms, value)
                        continue
                    before = self.last[index].get(key, 0.0)
                    self.total[key] = self.total.get(key, 0.0) + (value - before if value >= before else value)
                    self.last[index][key] = value

    def snapshot(self):
        with self.lock:
            return dict(self.total)

    @staticmethod
    def summary(before, after):
        def over(family):
            out = {}
            for key, value in after.items():
                if key.startswith(TurnCounts.PREFIX + family):
                    ms = key.split('over_ms="', 1)[1].split('"', 1)[0]
                    out[ms] = int(value - before.get(key, 0.0))
            return dict(sorted(out.items(), key=lambda kv: int(kv[0])))
        turns = TurnCounts.PREFIX + "turns_total"
        return {"turns": int(after.get(turns, 0.0) - before.get(turns, 0.0)),
                "held_over_ms": over("turns_held_over_total"),
                "cpu_over_ms": over("turns_cpu_over_total")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--configs", nargs=3, required=True)
    parser.add_argument("--logs", nargs=3, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--every", type=float, default=5)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--record-size", type=int, default=1024)
    # "one": one node at a time killed or paused (the default, above); "all": every node
    # killed with kill -9 at the same moment, all started again 2 s later (not a power cut:
    # the kernel keeps what they wrote and did not sync; the simulator's power losses drop it).
    parser.add_argument("--kind", choices=["one", "all"], default="one")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    nodes = [Node(i + 1, args.binary, c, l) for i, (c, l) in enumerate(zip(args.configs, args.logs))]
    for node in nodes:
        node.start()
    topic = "fault-run"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    deadline = time.monotonic() + 60
    while True:
        futures = admin.create_topics([NewTopic(topic, args.partitions, 3)])
        try:
            futures[topic].result(10)
            break
        except Exception as error:  # not yet elected, or NOT_CONTROLLER: ask again
            if "TOPIC_ALREADY_EXISTS" in str(error):
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    acked, lock, stop = [], threading.Lock(), threading.Event()
    threads = [threading.Thread(target=produce_loop,
                                args=(args.bootstrap, topic, i, stop, acked, lock, args.record_size))
               for i in range(args.producers)]
    for thread in threads:
        thread.start()
    turns = TurnCounts(args.configs)
    scraping = threading.Event()

    def scrape_loop():
        while not scraping.wait(0.5):
            turns.scrape()
    scraper = threading.Thread(target=scrape_loop)
    scraper.start()
    try:
        phase_start = time.monotonic()
        turns.scrape()
        turns_at_start = turns.snapshot()
        time.sleep(args.seconds)
        fault_start = time.monotonic()
        turns.scrape()
        turns_at_faults = turns.snapshot()
        faults = []
        while time.monotonic() - fault_start < args.seconds:
            if args.kind == "all":
                log("kill every node")
                faults.append((time.monotonic(), "kill all"))
                for node in nodes:
                    node.process.kill()
                for node in nodes:
                    node.process.wait()
                time.sleep(2)
                for node in nodes:
                    node.start()
                time.sleep(max(0.0, args.every - 2))
                continue
            victim = rng.choice(nodes)
            kind = rng.choice(["kill", "pause"])
            log(f"{kind} node {victim.id}")
            faults.append((time.monotonic(), f"{kind} {victim.id}"))
            if kind == "kill":
                victim.process.kill()
                victim.process.wait()
                time.sleep(2)
                victim.start()
            else:
                victim.process.send_signal(signal.SIGSTOP)
                time.sleep(2)
                victim.process.send_signal(signal.SIGCONT)
            time.sleep(max(0.0, args.every - 2))
        fault_end = time.monotonic()
        turns.scrape()
        turns_at_end = turns.snapshot()
    finally:
        scraping.set()
        scraper.join()
        stop.set()
        for thread in threads:
            thread.join(200)
        for node in nodes:
            if node.alive():
                node.process.send_signal(signal.SIGCONT)
            else:
                node.start()
    with lock:
        timeline = {}
        for _, t in acked:
            if fault_start <= t < fault_end:
                second = int(t - fault_start)
                timeline[second] = timeline.get(second, 0) + 1
    # Acknowledged records in each second of the fault phase, with the faults started in it.
    for second in range(int(fault_end - fault_start) + 1):
        started = [what for t, what in faults if int(t - fault_start) == second]
        log(f"fault phase +{second:3d}s: {timeline.get(second, 0):7d} acknowledged {' '.join(started)}")
    with lock:
        values = [v for v, _ in acked]
        free = sum(1 for _, t in acked if phase_start <= t < fault_start)
        faulty = sum(1 for _, t in acked if fault_start <= t < fault_end)
    # Read everything back from the quorum, all nodes running.
    # enable.partition.eof: a partition whose log ends with a control batch (a new leader's
    # LeaderChange record, after the restarts above) has no message at its last offset; the
    # end-of-partition event says it was read to the high-watermark.
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    end_offsets = {}
    deadline = time.monotonic() + 120
    for p in range(args.partitions):
        while True:
            try:
                end_offsets[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(args.partitions)])
    seen = {}
    positions = {p: 0 for p in range(args.partitions)}
    while any(positions[p] < end_offsets[p] for p in positions):
        if time.monotonic() > deadline:
            raise SystemExit(f"read back timed out at {positions} of {end_offsets}")
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                positions[message.partition()] = max(positions[message.partition()],
                                                     message.offset())
            continue
        positions[message.partition()] = message.offset() + 1
        value = message.value().split(b" ", 1)[0].decode()
        seen[value] = seen.get(value, 0) + 1
    consumer.close()
    missing = [v for v in values if v not in seen]
    duplicated = [v for v, n in seen.items() if n > 1]
    result = {
        "acknowledged": len(values), "read_back": sum(seen.values()), "missing": len(missing),
        "duplicated": len(duplicated), "faults": len(faults),
        "fault_free_records_per_s": round(free / args.seconds, 1),
        "faulty_records_per_s": round(faulty / (fault_end - fault_start), 1),
    }
    result["ratio"] = round(result["faulty_records_per_s"] / max(result["fault_free_records_per_s"], 1e-9), 3)
    result["loop_turns_fault_free"] = TurnCounts.summary(turns_at_start, turns_at_faults)
    result["loop_turns_faults"] = TurnCounts.summary(turns_at_faults, turns_at_end)
    result["longest_loop_turn_ms"] = round(turns.longest_ms, 1)
    print(json.dumps(result), flush=True)
    for node in nodes:
        node.process.send_signal(signal.SIGTERM)
    for node in nodes:
        try:
            node.process.wait(20)
        except subprocess.TimeoutExpired:
            node.process.kill()
    if missing or duplicated:
        raise SystemExit(f"LOST {missing[:10]} DUPLICATED {duplicated[:10]}")


if __name__ == "__main__":
    main()
