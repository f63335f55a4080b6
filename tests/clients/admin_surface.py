"""The admin surface of issue 18 with unmodified clients (driven by tests/admin.rs).

Usage: admin_surface.py BOOTSTRAP MODE, where MODE is one of
  configs           DescribeConfigs / IncrementalAlterConfigs of a topic and of a node
  delete_records    DeleteRecords, then consumers start at the new low watermark
  delete_records_snapshot  DeleteRecords on a cleanup.policy=snapshot topic (KIP-630)
  alter_log_configs segment.bytes altered after creation (then alter_to_snapshot and
                    alter_back_to_delete: cleanup.policy both ways, on the same topic)
  create_partitions CreatePartitions, then the new partitions are produced to and consumed
  describe_cluster  DescribeCluster
Each mode prints one result line the Rust side checks (ALTERED, DELETED, GROWN, CLUSTER,
SNAPSHOT_DELETED, SEGMENT_BYTES / SNAPSHOT_POLICY / DELETE_POLICY).
"""
import time
import traceback

from common import create_topic, eventually, log, main, partition_leaders
from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, ResourceType)
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

TOPIC_ALREADY_EXISTS = 36
INVALID_CONFIG = 40
INVALID_REQUEST = 42
INVALID_PARTITIONS = 37
OFFSET_OUT_OF_RANGE = 1


def confluent_admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def error_code_of(future):
    """The Kafka error code a future failed with (0 if it succeeded)."""
    try:
        future.result(timeout=30)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def describe_topic(admin, topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def alter_topic(admin, topic, name, value, op=AlterConfigOpType.SET):
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op)])
    return admin.incremental_alter_configs([resource])[resource]


def configs(bootstrap, topic):
    create_topic(bootstrap, topic, 1)
    admin = confluent_admin(bootstrap)

    # Defaults, with Kafka's names, sources and read-only flags.
    entries = describe_topic(admin, topic)
    assert entries["retention.ms"].value == "604800000", entries["retention.ms"]
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value, \
        entries["retention.ms"].source
    assert not entries["retention.ms"].is_read_only
    assert entries["cleanup.policy"].value == "delete"
    assert not entries["cleanup.policy"].is_read_only
    assert not entries["segment.bytes"].is_read_only
    assert "segment.bytes" in entries and "max.message.bytes" in entries, sorted(entries)
    log(f"described {sorted(entries)}")

    # confluent-kafka: SET retention.ms.
    code = error_code_of(alter_topic(admin, topic, "retention.ms", "3600000"))
    assert code == 0, f"altering retention.ms answered {code}"

    def altered():
        e = describe_topic(admin, topic)["retention.ms"]
        return e.value == "3600000" and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    eventually("retention.ms to read back altered", altered)

    # What cannot be is refused by name, not ignored.
    for name, value in (("segment.bytes", "1024"), ("cleanup.policy", "compact,snapshot"),
                        ("no.such.config", "1"), ("retention.ms", "soon"),
                        ("snapshot.minimum.records", "10")):
        code = error_code_of(alter_topic(admin, topic, name, value))
        assert code == INVALID_CONFIG, f"altering {name}={value} answered {code}"
    assert describe_topic(admin, topic)["segment.bytes"].value != "1024"

    # A node's configs are read-only: described with their source, alterations refused.
    node = ConfigResource(ResourceType.BROKER, "1")
    node_entries = admin.describe_configs([node])[node].result(timeout=30)
    assert node_entries["node.id"].value == "1", node_entries["node.id"]
    assert node_entries["node.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert node_entries["node.id"].is_read_only
    assert node_entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    code = error_code_of(admin.incremental_alter_configs([node])[node])
    assert code == INVALID_REQUEST, f"altering a node config answered {code}"

    # confluent-kafka's legacy alter_configs (AlterConfigs): every config at once, those left
    # out back to their defaults.
    def legacy_alter(configs):
        resource = ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
        return error_code_of(admin.alter_configs([resource])[resource])

    code = legacy_alter({"retention.ms": "3600000", "retention.bytes": "2048"})
    assert code == 0, f"alter_configs answered {code}"
    eventually("alter_configs' retention.bytes to read back",
               lambda: describe_topic(admin, topic)["retention.bytes"].value == "2048")
    assert legacy_alter({"retention.ms": "3600000"}) == 0

    def reset():
        e = describe_topic(admin, topic)
        return e["retention.bytes"].value == "-1" and e["retention.ms"].value == "3600000"

    eventually("alter_configs to reset retention.bytes it left out", reset)
    code = legacy_alter({"retention.ms": "3600000", "segment.bytes": "1024"})
    assert code == INVALID_CONFIG, f"alter_configs of segment.bytes=1024 answered {code}"

    # kafka-python (IncrementalAlterConfigs to the least loaded node, which forwards it to
    # the controller when it is not).
    k = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        result = k.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic,
                                                  configs={"retention.bytes": "1048576"})])
        assert result["topic"][topic] == "OK", result

        def modified():
            d = k.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)])
            got = d["topic"][topic]
            return got if "retention.bytes" in got and got["retention.bytes"]["value"] == \
                "1048576" else None

        got = eventually("kafka-python to read retention.bytes back", modified)
        # The default filter ("modified") leaves out what is at its default.
        assert set(got) == {"retention.ms", "retention.bytes"}, sorted(got)
        assert got["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG", got
    finally:
        k.close()

    # A snapshot topic's snapshot.minimum.records (KIP-630's name) takes effect: 40 records
    # snapshot with 10, not with the node's default (16384).
    snap = f"{topic}-snap"
    attempts = [0]

    def create_snapshot_topic():
        attempts[0] += 1
        new = NewTopic(snap, num_partitions=1, replication_factor=3,
                       config={"cleanup.policy": "snapshot"})
        code = error_code_of(admin.create_topics([new])[snap])
        return code == 0 or (code == TOPIC_ALREADY_EXISTS and attempts[0] > 1)

    eventually(f"{snap} to be created", create_snapshot_topic)
    entry = describe_topic(admin, snap)["snapshot.minimum.records"]
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value and not entry.is_read_only, entry
    code = error_code_of(alter_topic(admin, snap, "snapshot.minimum.records", "10"))
    assert code == 0, f"altering snapshot.minimum.records answered {code}"
    eventually("snapshot.minimum.records to read back altered",
               lambda: describe_topic(admin, snap)["snapshot.minimum.records"].value == "10")
    eventually(f"leaders for {snap}", lambda: len(partition_leaders(bootstrap, snap)) == 1)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    for i in range(40):
        p.produce(snap, key=f"k{i}".encode(), value=b"v", partition=0)
    assert p.flush(60) == 0
    log(f"SNAPSHOT_TOPIC {snap}")
    log(f"ALTERED {topic}")


def delete_records(bootstrap, topic):
    create_topic(bootstrap, topic, 1)
    # One record per batch, so every offset is a batch boundary; record i is at offset base + i
    # (base is 0: a new topic's first leader appends no LeaderChange into its empty log).
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "batch.num.messages": 1, "message.timeout.ms": 60000})
    offsets = []
    for i in range(100):
        p.produce(topic, value=f"r{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: offsets.append(msg.offset()))
        p.flush(30)
    assert p.flush(30) == 0 and len(offsets) == 100
    base = offsets[0]
    assert offsets == list(range(base, base + 100)), offsets[:5]
    high = base + 100

    admin = confluent_admin(bootstrap)
    tp = TopicPartition(topic, 0, 40)
    deleted = admin.delete_records([tp])[tp].result(timeout=30)
    assert deleted.low_watermark == 40, deleted
    # Above the high-watermark: Kafka's OFFSET_OUT_OF_RANGE.
    tp = TopicPartition(topic, 0, high + 1)
    code = error_code_of(admin.delete_records([tp])[tp])
    assert code == OFFSET_OUT_OF_RANGE, f"delete_records above the high-watermark: {code}"

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-delete-records",
                  "enable.auto.commit": False})
    low, latest = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, latest) == (40, high), (low, latest)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    first = None
    deadline = time.monotonic() + 30
    while first is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            first = (msg.offset(), msg.value())
    c.close()
    assert first == (40, f"r{40 - base}".encode()), f"confluent read {first} first"

    # kafka-python moves it further; its consumer starts there.
    k = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        result = k.delete_records({KTopicPartition(topic, 0): 60})
        (answer,) = result.values()
        assert answer["low_watermark"] == 60, result
    finally:
        k.close()
    kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                       auto_offset_reset="earliest")
    ktp = KTopicPartition(topic, 0)
    kc.assign([ktp])
    kc.seek_to_beginning(ktp)
    first = None
    deadline = time.monotonic() + 30
    while first is None and time.monotonic() < deadline:
        for records in kc.poll(timeout_ms=500).values():
            first = (records[0].offset, records[0].value)
            break
    kc.close()
    assert first == (60, f"r{60 - base}".encode()), f"kafka-python read {first} first"
    log(f"DELETED {topic} 60")


def create_snapshot_topic(admin, topic, bootstrap):
    """A one-partition cleanup.policy=snapshot topic on three replicas, with a leader."""
    attempts = [0]

    def create():
        attempts[0] += 1
        new = NewTopic(topic, num_partitions=1, replication_factor=3,
                       config={"cleanup.policy": "snapshot"})
        code = error_code_of(admin.create_topics([new])[topic])
        return code == 0 or (code == TOPIC_ALREADY_EXISTS and attempts[0] > 1)

    eventually(f"{topic} to be created", create)
    eventually(f"leaders for {topic}", lambda: len(partition_leaders(bootstrap, topic)) == 1)


def produce_one_per_batch(bootstrap, topic, count, first_key):
    """`count` keyed records, one per batch; returns their offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "batch.num.messages": 1, "message.timeout.ms": 60000})
    offsets = []
    for i in range(first_key, first_key + count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: offsets.append(msg.offset()))
        p.flush(30)
    assert p.flush(30) == 0 and len(offsets) == count
    return offsets


def first_record_from_beginning(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-delete-records-snap",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    first = None
    deadline = time.monotonic() + 30
    while first is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            first = (msg.offset(), msg.key())
    c.close()
    return first


def delete_records_snapshot(bootstrap, topic):
    """KIP-630 on a snapshot topic: the log start moves only to a snapshot's end offset. A cut
    at the high-watermark snapshots the state there; a cut below it, with no snapshot above the
    log start (the node's policy wants 16384 records), deletes nothing and answers where the
    log starts."""
    admin = confluent_admin(bootstrap)
    create_snapshot_topic(admin, topic, bootstrap)
    offsets = produce_one_per_batch(bootstrap, topic, 30, 0)
    high = offsets[-1] + 1

    tp = TopicPartition(topic, 0, offsets[10])
    below = admin.delete_records([tp])[tp].result(timeout=30)
    assert below.low_watermark == 0, f"a cut where no snapshot is answered {below}"
    assert first_record_from_beginning(bootstrap, topic) == (offsets[0], b"k0")

    tp = TopicPartition(topic, 0, high)
    at_high = admin.delete_records([tp])[tp].result(timeout=30)
    assert at_high.low_watermark == high, f"a cut at the high-watermark {high} answered {at_high}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-delete-records-snap"})
    low, latest = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, latest) == (high, high), (low, latest)

    # More records, then a cut at offset -1 (confluent's OFFSET_END: the high-watermark).
    offsets = produce_one_per_batch(bootstrap, topic, 10, 30)
    assert offsets[0] == high, offsets
    assert first_record_from_beginning(bootstrap, topic) == (high, b"k30")
    high = offsets[-1] + 1
    tp = TopicPartition(topic, 0, OFFSET_END)
    at_end = admin.delete_records([tp])[tp].result(timeout=30)
    assert at_end.low_watermark == high, f"a cut at -1 ({high}) answered {at_end}"
    log(f"SNAPSHOT_DELETED {topic} {high}")


def alter_log_configs(bootstrap, topic):
    """segment.bytes and cleanup.policy after creation (IncrementalAlterConfigs and the legacy
    AlterConfigs): each answer, then an effect the Rust side or this script observes."""
    create_topic(bootstrap, topic, 1)
    admin = confluent_admin(bootstrap)
    value = b"x" * 4000

    # segment.bytes: 64 KiB instead of the node's 1 MiB; 100 records of 4 kB then fill about
    # six segments (tests/admin.rs counts them in every replica's folder).
    code = error_code_of(alter_topic(admin, topic, "segment.bytes", "65536"))
    assert code == 0, f"altering segment.bytes answered {code}"

    def segment_bytes():
        e = describe_topic(admin, topic)["segment.bytes"]
        return e.value == "65536" and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    eventually("segment.bytes to read back altered", segment_bytes)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "batch.num.messages": 1, "message.timeout.ms": 60000})
    for i in range(100):
        p.produce(topic, key=f"k{i % 10}".encode(), value=value, partition=0)
        p.flush(30)
    assert p.flush(30) == 0
    log(f"SEGMENT_BYTES {topic} 65536")


def alter_to_snapshot(bootstrap, topic):
    """The second step of alter_log_configs, once tests/admin.rs counted the segments."""
    admin = confluent_admin(bootstrap)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    # delete -> snapshot, with a snapshot every 10 records: every replica reloads its state
    # machine and snapshots it (tests/admin.rs looks for the checkpoints).
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "snapshot", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("snapshot.minimum.records", "10",
                    incremental_operation=AlterConfigOpType.SET)])
    code = error_code_of(admin.incremental_alter_configs([resource])[resource])
    assert code == 0, f"altering cleanup.policy to snapshot answered {code}"
    eventually("cleanup.policy to read back snapshot",
               lambda: describe_topic(admin, topic)["cleanup.policy"].value == "snapshot")
    # Back to delete, but snapshot.minimum.records only applies to snapshot topics.
    code = error_code_of(alter_topic(admin, topic, "cleanup.policy", "delete"))
    assert code == INVALID_CONFIG, f"delete with snapshot.minimum.records answered {code}"
    for i in range(20):
        p.produce(topic, key=f"k{i % 10}".encode(), value=b"snap", partition=0)
    assert p.flush(60) == 0
    log(f"SNAPSHOT_POLICY {topic}")


def alter_back_to_delete(bootstrap, topic):
    """The third step of alter_log_configs, once tests/admin.rs saw the snapshots: the legacy
    AlterConfigs (every config at once: the left-out snapshot.minimum.records goes back to its
    default) turns the topic back to delete with retention.bytes 0, and retention cuts the log
    to its active segment (a snapshot topic's log is not cut by retention)."""
    admin = confluent_admin(bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={
        "cleanup.policy": "delete", "retention.bytes": "0", "segment.bytes": "65536"})
    code = error_code_of(admin.alter_configs([resource])[resource])
    assert code == 0, f"alter_configs back to delete answered {code}"
    eventually("cleanup.policy to read back delete",
               lambda: describe_topic(admin, topic)["cleanup.policy"].value == "delete")
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "batch.num.messages": 1, "message.timeout.ms": 60000})
    offsets = []
    for i in range(40):
        p.produce(topic, value=b"y" * 4000, partition=0,
                  on_delivery=lambda err, msg: offsets.append(msg.offset()))
        p.flush(30)
    assert p.flush(30) == 0 and len(offsets) == 40
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-alter-log-configs"})

    def cut():
        low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low if low > offsets[20] else None

    low = eventually("retention to cut the log to its last segments", cut)
    c.close()
    log(f"DELETE_POLICY {topic} {low}")


def create_partitions(bootstrap, topic):
    create_topic(bootstrap, topic, 1)
    admin = confluent_admin(bootstrap)
    futures = admin.create_partitions([NewPartitions(topic, 3)])
    assert error_code_of(futures[topic]) == 0
    eventually(f"leaders of {topic}'s 3 partitions",
               lambda: len(partition_leaders(bootstrap, topic)) == 3)
    # Partitions only grow.
    code = error_code_of(admin.create_partitions([NewPartitions(topic, 2)])[topic])
    assert code == INVALID_PARTITIONS, f"shrinking answered {code}"

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    acked = []
    p.produce(topic, value=b"new-partition", partition=2,
              on_delivery=lambda err, msg: acked.append((err, msg.partition(), msg.offset())))
    assert p.flush(60) == 0 and len(acked) == 1 and acked[0][:2] == (None, 2), acked
    offset = acked[0][2]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-create-partitions",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 2, 0)])
    got = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got = (msg.partition(), msg.offset(), msg.value())
    c.close()
    assert got == (2, offset, b"new-partition"), got

    k = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        k.create_partitions({topic: 4})
    finally:
        k.close()
    eventually(f"leaders of {topic}'s 4 partitions",
               lambda: len(partition_leaders(bootstrap, topic)) == 4)
    log(f"GROWN {topic} 4")


def describe_cluster(bootstrap, _topic):
    ports = sorted(int(a.rsplit(":", 1)[1]) for a in bootstrap.split(","))
    admin = confluent_admin(bootstrap)
    d = admin.describe_cluster().result(timeout=30)
    assert d.cluster_id, d
    assert d.controller is not None and d.controller.id in (1, 2, 3), d.controller
    assert sorted(n.id for n in d.nodes) == [1, 2, 3], d.nodes
    assert sorted(n.port for n in d.nodes) == ports, d.nodes
    k = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        kd = k.describe_cluster()
    finally:
        k.close()
    assert kd["cluster_id"] == d.cluster_id, kd
    assert sorted(b["broker_id"] for b in kd["brokers"]) == [1, 2, 3], kd
    log(f"CLUSTER {d.cluster_id}")


MODES = {f.__name__: f for f in (configs, delete_records, delete_records_snapshot,
                                  alter_log_configs, alter_to_snapshot, alter_back_to_delete,
                                  create_partitions,
                                  describe_cluster)}


def body(args):
    bootstrap, mode = args
    try:
        # alter_back_to_delete goes on with alter_log_configs' topic.
        name = "alter_log_configs" if mode.startswith("alter_") else mode
        MODES[mode](bootstrap, f"admin-{name.replace('_', '-')}")
    except AssertionError:
        log(traceback.format_exc())
        raise


if __name__ == "__main__":
    main(body)
