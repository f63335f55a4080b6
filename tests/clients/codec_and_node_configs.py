"""A topic's `compression.type` and the cleaner/flush configs, and dynamic node configs, with
confluent-kafka (driven by tests/topic_configs.rs, which checks the stored codecs itself).

- CreateTopics takes `compression.type`, `delete.retention.ms`, `flush.ms` (librdkafka's 0081);
  DescribeConfigs shows them as topic configs; a codec Kafka does not have, or
  `min.compaction.lag.ms` above `max.compaction.lag.ms`, is INVALID_CONFIG.
- Records produced uncompressed to an `lz4` topic, and with gzip to an `uncompressed` one, read
  back the same (the test then sees lz4 and uncompressed batches in the logs); after
  IncrementalAlterConfigs sets the first topic to `zstd`, the next records are stored in zstd.
- Dynamic node configs (Kafka's dynamic broker configs): `sasl.kerberos.min.time.before.relogin`
  on one node (0081's AlterConfigs) is taken and described on that node as
  DYNAMIC_BROKER_CONFIG; `message.max.bytes` set on every node lowers the Produce
  limit (a 30000-byte record refused, MSG_SIZE_TOO_LARGE) and, deleted, raises it again; a static
  setting (`log.dirs`) is refused. The script prints `restart`, the test restarts every node, and
  the dynamic values are still there.
"""
import sys
import time

from common import eventually, log, main
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, ResourceType)


def produce(bootstrap, topic, values, **conf):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "message.timeout.ms": 30000, "retries": 0, **conf})
    results = []
    for value in values:
        p.produce(topic, value=value, partition=0,
                  on_delivery=lambda error, _m: results.append(error.name() if error else None))
    p.flush(60)
    assert len(results) == len(values), f"{len(results)} of {len(values)} deliveries reported"
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
            got.append(msg.value())
    c.close()
    return got


def described(admin, resource_type, name, config):
    resource = ConfigResource(resource_type, name)
    entry = admin.describe_configs([resource])[resource].result(timeout=15)[config]
    return entry.value, entry.source


def alter(admin, resource_type, name, config, value, operation=AlterConfigOpType.SET):
    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(config, value, incremental_operation=operation)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def refused(what, action):
    try:
        action()
    except KafkaException as error:
        return error.args[0].code()
    raise AssertionError(f"{what} was taken")


def until_answered(what, bootstrap, topic, values, **conf):
    return eventually(what, lambda: (lambda r: r if "NOT_LEADER_OR_FOLLOWER" not in r
                                     and "_MSG_TIMED_OUT" not in r else None)(
        produce(bootstrap, topic, values, **conf)))


def body(args):
    bootstrap, prefix = args
    admin = AdminClient({"bootstrap.servers": bootstrap})
    lz4, plain = f"{prefix}-lz4", f"{prefix}-plain"
    futures = admin.create_topics([
        NewTopic(lz4, 1, 3, config={"compression.type": "lz4", "delete.retention.ms": "900",
                                    "flush.ms": "12345678"}),
        NewTopic(plain, 1, 3, config={"compression.type": "uncompressed"}),
    ])
    for topic, future in futures.items():
        future.result(timeout=30)
        log(f"created {topic}")
    for config, value in [("compression.type", "brotli"),
                          ("min.compaction.lag.ms", "100"),
                          ("delete.retention.ms", "-1")]:
        extra = {"max.compaction.lag.ms": "50"} if config == "min.compaction.lag.ms" else {}
        topic = NewTopic(f"{prefix}-bad", 1, 3, config={config: value, **extra})
        code = refused(f"{config}={value}",
                       lambda: admin.create_topics([topic])[topic.topic].result(timeout=30))
        assert code == KafkaError.INVALID_CONFIG, f"{config}={value}: {code}"
    log("bad codec, compaction lags and delete.retention.ms refused with INVALID_CONFIG")

    assert described(admin, ResourceType.TOPIC, lz4, "compression.type") == \
        ("lz4", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert described(admin, ResourceType.TOPIC, lz4, "delete.retention.ms")[0] == "900"
    assert described(admin, ResourceType.TOPIC, lz4, "flush.ms")[0] == "12345678"
    assert described(admin, ResourceType.TOPIC, plain, "flush.ms")[0] == str(2**63 - 1)

    first = [f"lz4 record {i} ".encode() * 20 for i in range(20)]
    assert until_answered("the lz4 topic", bootstrap, lz4, first,
                          **{"compression.type": "none"}) == [None] * 20
    gz = [f"gzip record {i} ".encode() * 20 for i in range(20)]
    assert until_answered("the uncompressed topic", bootstrap, plain, gz,
                          **{"compression.type": "gzip"}) == [None] * 20
    alter(admin, ResourceType.TOPIC, lz4, "compression.type", "zstd")
    # The partition's leader must have applied it before the next produce: the test asks the
    # leader itself (a DescribeConfigs here may be answered by any node) and answers `applied`.
    log("wait-zstd")
    answer = sys.stdin.readline().strip()
    assert answer == "applied", f"the test answered {answer!r}"
    second = [f"zstd record {i} ".encode() * 20 for i in range(20)]
    assert produce(bootstrap, lz4, second, **{"compression.type": "snappy"}) == [None] * 20
    assert consume_all(bootstrap, lz4, 40) == first + second
    assert consume_all(bootstrap, plain, 20) == gz
    log("records read back the same from recompressed batches")

    # Dynamic node configs.
    brokers = sorted(admin.list_topics(timeout=15).brokers)
    node = str(brokers[0])
    alter(admin, ResourceType.BROKER, node, "sasl.kerberos.min.time.before.relogin", "58000")
    value = eventually("the node config applied", lambda: (lambda v: v if v[0] == "58000" else None)(
        described(admin, ResourceType.BROKER, node, "sasl.kerberos.min.time.before.relogin")))
    assert value[1] == ConfigSource.DYNAMIC_BROKER_CONFIG.value, value
    code = refused("log.dirs", lambda: alter(admin, ResourceType.BROKER, node, "log.dirs", "/tmp"))
    assert code == KafkaError.INVALID_REQUEST, code
    log("node config set on one node; a static one refused")

    big = [b"x" * 30000]
    assert produce(bootstrap, plain, big) == [None]
    # confluent-kafka names no cluster-default resource (an empty name), so each node is set.
    for b in brokers:
        alter(admin, ResourceType.BROKER, str(b), "message.max.bytes", "20000")
    eventually("the lower limit on every node", lambda: all(
        described(admin, ResourceType.BROKER, str(b), "message.max.bytes") ==
        ("20000", ConfigSource.DYNAMIC_BROKER_CONFIG.value) for b in brokers))
    assert produce(bootstrap, plain, big) == ["MSG_SIZE_TOO_LARGE"]
    log("message.max.bytes=20000 on every node: a 30000-byte record refused")

    log("restart")
    answer = sys.stdin.readline().strip()
    assert answer == "restarted", f"the test answered {answer!r}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    eventually("the node config after the restart", lambda: described(
        admin, ResourceType.BROKER, node, "sasl.kerberos.min.time.before.relogin")[0] == "58000")
    assert described(admin, ResourceType.BROKER, node, "message.max.bytes")[0] == "20000"
    assert until_answered("the lowered limit after the restart", bootstrap, plain, big) == \
        ["MSG_SIZE_TOO_LARGE"]
    for b in brokers:
        alter(admin, ResourceType.BROKER, str(b), "message.max.bytes", None,
              AlterConfigOpType.DELETE)
    eventually("the limit raised again", lambda: produce(bootstrap, plain, big) == [None])
    log("dynamic node configs kept across a restart; message.max.bytes deleted, limit back")


if __name__ == "__main__":
    main(body)
