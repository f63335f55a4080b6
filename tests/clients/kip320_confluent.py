"""KIP-320 with librdkafka (confluent-kafka), driven by tests/kip320.rs.

usage: kip320_confluent.py BOOTSTRAP TOPIC PARTITION COUNT RESET AFTER

Reads COUNT records from offset 0 and prints `read <last offset> <last leader epoch>`; waits
for a line on stdin (the test has run `ringlog unclean-recover` meanwhile); then polls:
with RESET=error (auto.offset.reset=error) until librdkafka reports the log truncation,
printed as `truncated <broker end offset>`; with a reset policy until AFTER records arrived,
each printed as `record <offset> <value>`. Anything else is printed as `error <text>`.
"""

import re
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition


def is_topic_record(key):
    """The node's own records in the metadata log (the `__consumer_offsets` topic record that
    this consumer's coordinator lookup had created): not the test's."""
    return key is not None and key.startswith(b"ringlog.topic.v2/")


def main():
    bootstrap, topic, partition, count, reset, after = sys.argv[1:7]
    partition, count, after = int(partition), int(count), int(after)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "kip320-confluent",
        "enable.auto.commit": False,
        "auto.offset.reset": reset,
        "topic.metadata.refresh.interval.ms": 500,
        "reconnect.backoff.max.ms": 200,
        "retry.backoff.ms": 100,
        # Logged to stderr, which the test shows when it fails.
        "debug": "fetch,topic,metadata",
    })
    consumer.assign([TopicPartition(topic, partition, 0)])
    # Bootstrapped while every node answers (the test stops one right after).
    consumer.list_topics(topic, timeout=20)
    print("ready", flush=True)
    read, last = 0, None
    deadline = time.time() + 60
    while read < count and time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            print(f"error {msg.error()}", flush=True)
            continue
        if is_topic_record(msg.key()):
            continue
        read += 1
        last = msg
    print(f"read {last.offset()} {last.leader_epoch()}", flush=True)
    sys.stdin.readline()
    got = 0
    deadline = time.time() + 60
    while time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        error = msg.error()
        if error:
            text = str(error)
            if "truncation" in text.lower() or "TRUNCATION" in error.name():
                found = re.search(r"end offset is (\d+)", text)
                print(f"truncated {found.group(1) if found else -1} {text}", flush=True)
                return
            print(f"error {error.name()} {text}", flush=True)
            continue
        if is_topic_record(msg.key()):
            continue
        print(f"record {msg.offset()} {msg.value().decode()}", flush=True)
        got += 1
        if got >= after:
            return
    print("error timed out", flush=True)


if __name__ == "__main__":
    main()
