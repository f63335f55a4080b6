"""Retention by size with unmodified clients (driven by tests/topics_admin.rs).

kafka-python's admin creates a topic with 64 KiB segments and retention.bytes=128 KiB;
confluent-kafka produces ~400 KiB; the earliest offset (ListOffsets) moves past 0; a consumer
asking for offset 0 is told OFFSET_OUT_OF_RANGE (librdkafka with auto.offset.reset=error,
kafka-python with auto_offset_reset="none") or resets to the new earliest per its policy.
Prints `TRIMMED <earliest>` and waits for a line on stdin (the Rust side checks every node's
folder).
"""
import sys
import time

from common import eventually, log, main
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError

TOPIC_ALREADY_EXISTS = 36


def earliest_and_latest(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-retention"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
    finally:
        c.close()


def body(args):
    bootstrap, topic = args

    def create():
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            spec = {topic: {"num_partitions": 1, "replication_factor": 3, "configs": {
                "segment.bytes": "65536", "retention.bytes": "131072", "retention.ms": "-1"}}}
            result = admin.create_topics(spec, raise_errors=False)["topics"][0]
            assert result["error_code"] in (0, TOPIC_ALREADY_EXISTS), f"CreateTopics: {result}"
            return True
        finally:
            admin.close()

    eventually(f"{topic} to be created", create)
    # Batches well below the 64 KiB segments (librdkafka's default batch.size is 1 MB).
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "batch.size": 16384, "message.timeout.ms": 60000})
    acked, failed = [], []

    def on_delivery(error, msg):
        (failed if error else acked).append(error or msg.offset())

    for _ in range(400):
        p.produce(topic, value=b"r" * 1000, partition=0, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(60) == 0 and not failed, f"delivery failures: {failed[:3]}"
    last = max(acked)
    log(f"produced 400 records of 1000 bytes, last offset {last}")

    # The log start follows the retention snapshot once the followers have fetched past it.
    # ~130 records per 128 KiB are kept, plus at most two segments (64 KiB each); the check
    # runs once a second and the log start follows the followers, so wait for it.
    def trimmed():
        w = earliest_and_latest(bootstrap, topic)
        return w if 0 < w[0] and 100 <= w[1] - w[0] <= 130 + 2 * 66 else None

    earliest, latest = eventually("the log start to follow retention.bytes", trimmed,
                                  timeout_s=30)
    assert latest == last + 1, f"latest {latest}, last acknowledged {last}"
    kept = latest - earliest
    log(f"earliest {earliest}, latest {latest}: {kept} records kept")

    # librdkafka: reset=error reports OFFSET_OUT_OF_RANGE for offset 0; reset=earliest lands
    # on the new start.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-retention",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 20
    error = None
    while error is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is not None, f"read offset {msg.offset()} below the log start"
        error = msg.error()
    c.close()
    assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET, \
        f"confluent reset=error: {error}"
    log(f"confluent auto.offset.reset=error: {error.str()}")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-retention",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    first = None
    deadline = time.monotonic() + 20
    while first is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            first = msg.offset()
    c.close()
    assert first is not None and first >= earliest, f"confluent earliest reset read {first}"
    log(f"confluent auto.offset.reset=earliest resumed at {first}")

    # kafka-python: "none" raises OffsetOutOfRangeError, "earliest" resets.
    k = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none")
    tp = KTopicPartition(topic, 0)
    k.assign([tp])
    k.seek(tp, 0)
    raised = None
    deadline = time.monotonic() + 20
    while raised is None and time.monotonic() < deadline:
        try:
            got = k.poll(timeout_ms=500)
            assert not got, f"kafka-python read below the log start: {got}"
        except OffsetOutOfRangeError as e:
            raised = e
    k.close()
    assert raised is not None, "kafka-python never raised OffsetOutOfRangeError"
    log(f"kafka-python auto_offset_reset=none: {type(raised).__name__}")
    k = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    k.assign([tp])
    k.seek(tp, 0)
    first = None
    deadline = time.monotonic() + 20
    while first is None and time.monotonic() < deadline:
        for records in k.poll(timeout_ms=500).values():
            first = records[0].offset
            break
    k.close()
    assert first is not None and first >= earliest, f"kafka-python earliest reset read {first}"
    log(f"kafka-python auto_offset_reset=earliest resumed at {first}")

    log(f"TRIMMED {earliest}")
    assert sys.stdin.readline().strip(), "no answer to TRIMMED"


if __name__ == "__main__":
    main(body)
