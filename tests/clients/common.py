"""Shared helpers of the real-client tests (driven by tests/clients.rs).

Every check raises AssertionError with a message saying what differed; the Rust test shows the
script's output when it exits non-zero.
"""
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError


def log(*args):
    print(*args, flush=True)


def eventually(what, probe, timeout_s=30.0, interval_s=0.2):
    deadline = time.monotonic() + timeout_s
    last = None
    last_value = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
            last_value = value
        except Exception as error:  # a node may be starting or just killed
            last = error
        time.sleep(interval_s)
    raise AssertionError(
        f"timed out waiting for {what} (last error: {last!r}, last value: {last_value!r})")


def create_topic(bootstrap, topic, partitions):
    """CreateTopics through kafka-python's admin client (it asks the controller). A retry whose
    earlier attempt went through but was not answered in time (a loaded machine) finds the topic
    there: TOPIC_ALREADY_EXISTS then counts as created, but never on the first attempt."""
    attempts = [0]

    def attempt():
        attempts[0] += 1
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        try:
            try:
                result = admin.create_topics([NewTopic(topic, partitions, 3)])
            except TopicAlreadyExistsError:
                if attempts[0] > 1:
                    return True
                raise
            errors = [t.get("error_code", 0) if isinstance(t, dict) else t[1]
                      for t in getattr(result, "topic_errors", None) or result.get("topics", [])]
            assert all(e == 0 for e in errors), f"CreateTopics answered {result}"
            return True
        finally:
            admin.close()

    eventually(f"topic {topic} to be created", attempt)
    # Every partition has a leader before anyone produces.
    eventually(f"leaders for {topic}", lambda: len(partition_leaders(bootstrap, topic)) == partitions)


def partition_leaders(bootstrap, topic):
    """{partition: (leader id, leader epoch)} from confluent's Metadata (v7+ has epochs)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "meta"})
    try:
        md = c.list_topics(topic, timeout=5)
        t = md.topics[topic]
        assert t.error is None, f"metadata error for {topic}: {t.error}"
        return {p.id: p.leader for p in t.partitions.values() if p.leader >= 0}
    finally:
        c.close()


def confluent_producer(bootstrap, idempotent):
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 100,
    })


def confluent_produce(bootstrap, topic, partition, values, idempotent):
    """Produces values in order; returns [(offset, value)] of the acknowledged ones."""
    p = confluent_producer(bootstrap, idempotent)
    acked, failed = [], []

    def on_delivery(error, msg):
        if error is None:
            acked.append((msg.offset(), msg.value()))
        else:
            failed.append(error)

    for v in values:
        p.produce(topic, value=v, partition=partition, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(60)
    assert left == 0, f"{left} records never acknowledged"
    assert not failed, f"delivery failures: {failed[:3]}"
    return acked


def kafka_python_produce(bootstrap, topic, partition, values, idempotent):
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent,
                      linger_ms=5, retries=50, max_in_flight_requests_per_connection=5 if idempotent else 1)
    futures = [(v, p.send(topic, value=v, partition=partition)) for v in values]
    acked = [(f.get(timeout=60).offset, v) for v, f in futures]
    p.close()
    return acked


def confluent_consume(bootstrap, topic, partition, start_offset, count, timeout_s=30):
    """assign + seek, then read `count` records: [(offset, value, leader epoch)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-test",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    c.assign([TopicPartition(topic, partition, start_offset)])
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, f"confluent consumer error: {msg.error()}"
        out.append((msg.offset(), msg.value(), msg.leader_epoch()))
    c.close()
    return out


def kafka_python_consume(bootstrap, topic, partition, start_offset, count, timeout_s=30):
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none")
    tp = KTopicPartition(topic, partition)
    c.assign([tp])
    c.seek(tp, start_offset)
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            for r in records:
                out.append((r.offset, r.value, getattr(r, "leader_epoch", None)))
    c.close()
    return out


def kcat(*args, timeout_s=30):
    done = subprocess.run(["kcat", *args], capture_output=True, timeout=timeout_s)
    assert done.returncode == 0, f"kcat {args} failed: {done.stderr.decode()}"
    return done.stdout.decode()


def main(body):
    try:
        body(sys.argv[1:])
    except AssertionError as error:
        log(f"FAILED: {error}")
        sys.exit(1)
    log("OK")
