"""Kafka topic configs beyond retention, with confluent-kafka (driven by tests/topic_configs.rs).

- `cleanup.policy=compact` at creation: a record without a key is refused with INVALID_RECORD
  (Kafka's rule for compacted topics; librdkafka fails the other records of the same batch with
  _INVALID_DIFFERENT_RECORD), keyed records are stored, and a consumer from the start reads every
  one of them; DeleteRecords is refused with POLICY_VIOLATION.
- IncrementalAlterConfigs APPEND / SUBTRACT on the list `cleanup.policy` (librdkafka's test 0011):
  `delete` + `compact` = `compact,delete`, keyless records refused; `compact` subtracted again,
  keyless records taken.
- `max.message.bytes` per topic: a batch above it is refused with MSG_SIZE_TOO_LARGE; raised with
  IncrementalAlterConfigs, the same record is taken.
- `message.format.version` is taken and ignored, as Kafka 3.x does.
"""
import time

from common import eventually, log, main
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)


def produce(bootstrap, topic, records, **conf):
    """Produces (key, value) pairs in one batch; returns each record's error name (None: ok)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50,
                  "message.timeout.ms": 30000, "retries": 0, **conf})
    results = [None] * len(records)
    done = [0]

    def on_delivery(index):
        def callback(error, _msg):
            results[index] = error.name() if error else None
            done[0] += 1
        return callback

    for index, (key, value) in enumerate(records):
        p.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery(index))
    p.flush(60)
    assert done[0] == len(records), f"{done[0]} of {len(records)} deliveries reported"
    return results


def consume_all(bootstrap, topic, expected, timeout_s=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.key(), msg.value()))
    c.close()
    return got


def described(admin, topic, name):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    return configs[name].value


def alter(admin, topic, name, value, operation):
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=operation)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def body(args):
    bootstrap, prefix = args
    admin = AdminClient({"bootstrap.servers": bootstrap})
    compact, listed, limited = f"{prefix}-compact", f"{prefix}-listed", f"{prefix}-limited"
    futures = admin.create_topics([
        NewTopic(compact, 1, 3, config={"cleanup.policy": "compact",
                                        "message.format.version": "2.8-IV1"}),
        NewTopic(listed, 1, 3),
        NewTopic(limited, 1, 3, config={"max.message.bytes": "20000"}),
    ])
    for topic, future in futures.items():
        future.result(timeout=30)
        log(f"created {topic}")
    time.sleep(1)

    # A compacted topic: keys required.
    assert described(admin, compact, "cleanup.policy") == "compact"
    # Two keyless records: with exactly one record error librdkafka reports the partition's error
    # for every record of the batch; with more, each record its own.
    mixed = [(b"k1", b"v1"), (None, b"keyless"), (b"k2", b"v2"), (None, b"keyless too")]
    results = eventually("the compacted topic to answer Produce",
                         lambda: (lambda r: r if "NOT_LEADER_OR_FOLLOWER" not in r
                                  and "_MSG_TIMED_OUT" not in r else None)(
                             produce(bootstrap, compact, mixed)))
    assert results[1] == results[3] == "INVALID_RECORD", f"keyless records: {results}"
    assert results[0] == results[2] == "_INVALID_DIFFERENT_RECORD", f"same batch: {results}"
    log(f"mixed batch on a compacted topic: {results}")
    keyed = [(b"k1", b"v1"), (b"k2", b"v2"), (b"k1", b"v1-again")]
    results = produce(bootstrap, compact, keyed)
    assert results == [None, None, None], f"keyed records: {results}"
    got = consume_all(bootstrap, compact, len(keyed))
    assert got == keyed, f"read back {got}"
    log(f"keyed records stored and read back whole: {got}")
    resource = TopicPartition(compact, 0, 1)
    try:
        outcome = admin.delete_records([resource])[resource].result(timeout=15)
        raise AssertionError(f"DeleteRecords on a compacted topic answered {outcome}")
    except AssertionError:
        raise
    except Exception as error:  # KafkaException carrying the broker's error
        code = error.args[0].code() if error.args else None
        assert code == KafkaError.POLICY_VIOLATION, f"DeleteRecords: {error!r}"
        log("DeleteRecords on a compacted topic: POLICY_VIOLATION")

    # APPEND and SUBTRACT on the list cleanup.policy (librdkafka's 0011).
    alter(admin, listed, "cleanup.policy", "compact", AlterConfigOpType.APPEND)
    policy = eventually("compact appended on every node",
                        lambda: (lambda v: v if v == "compact,delete" else None)(
                            described(admin, listed, "cleanup.policy")))
    results = eventually("the keyless record to be refused",
                         lambda: (lambda r: r if r == ["INVALID_RECORD"] else None)(
                             produce(bootstrap, listed, [(None, b"keyless")])))
    log(f"after APPEND: {policy}, keyless record {results[0]}")
    alter(admin, listed, "cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)
    results = eventually("the keyless record to be taken again",
                         lambda: (lambda r: r if r == [None] else None)(
                             produce(bootstrap, listed, [(None, b"keyless")])))
    assert described(admin, listed, "cleanup.policy") == "delete"
    log("after SUBTRACT: delete, keyless record taken")

    # max.message.bytes per topic.
    assert described(admin, limited, "max.message.bytes") == "20000"
    big = [(b"k", b"x" * 30000)]
    results = eventually("the limited topic to answer Produce",
                         lambda: (lambda r: r if r != ["NOT_LEADER_OR_FOLLOWER"] else None)(
                             produce(bootstrap, limited, big)))
    assert results == ["MSG_SIZE_TOO_LARGE"], f"30000 bytes over max.message.bytes=20000: {results}"
    alter(admin, limited, "max.message.bytes", "100000", AlterConfigOpType.SET)
    eventually("the raised limit to take the record",
               lambda: produce(bootstrap, limited, big) == [None])
    log("max.message.bytes: refused at 20000, taken at 100000")


if __name__ == "__main__":
    main(body)
