"""KIP-320 with kafka-python, driven by tests/kip320.rs.

usage: kip320_kafka_python.py BOOTSTRAP TOPIC PARTITION COUNT RESET AFTER

Same protocol as kip320_confluent.py: `read <last offset> <last leader epoch>`, wait for a
stdin line, then `truncated <divergent offset>` (kafka-python raises LogTruncationError with
the divergent offsets when auto_offset_reset is `none`) or AFTER `record <offset> <value>`
lines with a reset policy; `error <text>` otherwise.
"""

import sys
import time

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import LogTruncationError


def is_topic_record(key):
    """The node's own records in the metadata log (the `__consumer_offsets` topic record): not
    the test's."""
    return key is not None and key.startswith(b"ringlog.topic.v2/")


def main():
    bootstrap, topic, partition, count, reset, after = sys.argv[1:7]
    partition, count, after = int(partition), int(count), int(after)
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        enable_auto_commit=False,
        auto_offset_reset=reset,
        metadata_max_age_ms=500,
        reconnect_backoff_max_ms=200,
        retry_backoff_ms=100,
        request_timeout_ms=5000,
    )
    consumer.assign([tp])
    consumer.seek(tp, 0)
    # Bootstrapped while every node answers (the test stops one right after).
    consumer.partitions_for_topic(topic)
    print("ready", flush=True)
    read, last = 0, None
    deadline = time.time() + 60
    while read < count and time.time() < deadline:
        for record in consumer.poll(timeout_ms=200).get(tp, []):
            if is_topic_record(record.key):
                continue
            read += 1
            last = record
    print(f"read {last.offset} {last.leader_epoch}", flush=True)
    sys.stdin.readline()
    got = 0
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            records = consumer.poll(timeout_ms=200).get(tp, [])
        except LogTruncationError as error:
            divergent = error.divergent_offsets.get(tp)
            offset = divergent.offset if divergent is not None else -1
            print(f"truncated {offset} {error}", flush=True)
            return
        except Exception as error:  # noqa: BLE001 - reported to the test as text
            print(f"error {type(error).__name__} {error}", flush=True)
            continue
        for record in records:
            if is_topic_record(record.key):
                continue
            print(f"record {record.offset} {record.value.decode()}", flush=True)
            got += 1
            if got >= after:
                return
    print("error timed out", flush=True)


if __name__ == "__main__":
    main()
