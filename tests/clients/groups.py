"""Consumer groups (the classic protocol) through unmodified clients, driven by tests/groups.rs.

usage: groups.py BOOTSTRAP MODE

MODE resume: a confluent-kafka consumer subscribes with a group id, reads part of a
two-partition topic, commits synchronously and closes; `committed()` returns the offsets with
the leader epoch of the last record read (KIP-320). A second consumer of the same group reads
the rest: it starts exactly after the commit, and the two together read every record once.

MODE split: two confluent-kafka members of one group split a four-partition topic (two
partitions each, disjoint); the first closes (LeaveGroup) and the second takes all four over,
reading the records of the other's partitions from the offsets it committed.

MODE failover: a consumer commits, then the script prints "COMMITTED <group>" and waits for a
line on stdin (the test kills the group's coordinator with kill -9); a new consumer of the group
then finds the new coordinator, gets the same committed offsets and epochs, and resumes there.

MODE kafka-python: kafka-python's KafkaConsumer(group_id=...) does what MODE resume does.

MODE kcat: `kcat -G` (the system's librdkafka) reads 70 records of a two-partition topic with
a group and exits (its consumer commits on close); a second `kcat -G` of the group reads exactly
the rest and exits at the end of both partitions.

MODE admin: confluent-kafka's AdminClient lists and describes a group with a member, lists its
committed offsets, cannot delete it while the member is in (NON_EMPTY_GROUP), alters its
offsets once it is empty, and deletes it.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

from common import confluent_produce, create_topic, eventually, kcat, log, main

PER_PARTITION = 60


def member(bootstrap, group, **extra):
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    config.update(extra)
    return Consumer(config)


def produce_all(bootstrap, topic, partitions):
    """PER_PARTITION records per partition; {(partition, offset): value} acknowledged."""
    records = {}
    for p in range(partitions):
        values = [f"{topic}-{p}-{i:04d}".encode() for i in range(PER_PARTITION)]
        for offset, value in confluent_produce(bootstrap, topic, p, values, False):
            records[(p, offset)] = value
    assert len(records) == partitions * PER_PARTITION, f"acknowledged {len(records)}"
    return records


def read(consumers, count, timeout_s=60):
    """Polls each consumer in turn until `count` records arrived in all: [(consumer index,
    partition, offset, value, leader epoch)]. Polling all of them keeps every member's
    rebalance moving."""
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        assert time.monotonic() < deadline, f"read {len(out)} of {count} records"
        for i, c in enumerate(consumers):
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer {i}: {msg.error()}"
            out.append((i, msg.partition(), msg.offset(), msg.value(), msg.leader_epoch()))
    return out


def commit_last(consumer, topic, records):
    """Commits, per partition, the offset after the last record read with that record's leader
    epoch; returns {partition: (offset, epoch)}."""
    last = {}
    for _, partition, offset, _, epoch in records:
        if partition not in last or offset >= last[partition][0]:
            last[partition] = (offset + 1, epoch)
    offsets = [TopicPartition(topic, p, o, leader_epoch=e) for p, (o, e) in last.items()]
    committed = consumer.commit(offsets=offsets, asynchronous=False)
    for tp in committed:
        assert tp.error is None, f"commit of {tp}: {tp.error}"
    return last


def check_committed(consumer, topic, expected):
    """`committed()` answers the offsets and the KIP-320 leader epochs."""
    asked = [TopicPartition(topic, p) for p in expected]
    got = {tp.partition: (tp.offset, tp.leader_epoch)
           for tp in consumer.committed(asked, timeout=20)}
    assert got == expected, f"committed() answered {got}, expected {expected}"
    for p, (_, epoch) in expected.items():
        assert epoch is not None and epoch >= 0, f"partition {p}: no leader epoch"


def resume(bootstrap):
    topic, group = "orders", "resume-group"
    create_topic(bootstrap, topic, 2)
    records = produce_all(bootstrap, topic, 2)

    first = member(bootstrap, group)
    first.subscribe([topic])
    part = read([first], 70)
    last = commit_last(first, topic, part)
    check_committed(first, topic, last)
    log(f"first member read {len(part)} and committed {last}")
    first.close()

    second = member(bootstrap, group)
    second.subscribe([topic])
    rest = read([second], len(records) - len(part))
    for p in (0, 1):
        offsets = [o for _, q, o, _, _ in rest if q == p]
        expected = last.get(p, (0, None))[0]
        if offsets:
            assert min(offsets) == expected, f"partition {p} resumed at {min(offsets)}, committed {expected}"
    seen = [(p, o) for _, p, o, _, _ in part + rest]
    assert len(seen) == len(set(seen)), "a record was read twice"
    assert set(seen) == set(records), f"missing {sorted(set(records) - set(seen))[:5]}"
    for _, p, o, value, _ in part + rest:
        assert records[(p, o)] == value, f"{p}/{o} read {value!r}"
    # Nothing more arrives: every record was read once.
    extra = [m for m in (second.poll(0.5) for _ in range(4)) if m is not None and m.error() is None]
    assert not extra, f"records read twice: {[(m.partition(), m.offset()) for m in extra]}"
    second.close()


def split(bootstrap):
    topic, group = "split", "split-group"
    create_topic(bootstrap, topic, 4)
    records = produce_all(bootstrap, topic, 4)
    assignments = [set(), set()]

    def tracker(i):
        def on_assign(consumer, partitions):
            assignments[i] = {tp.partition for tp in partitions}
            log(f"member {i} assigned {sorted(assignments[i])}")

        def on_revoke(consumer, partitions):
            # The usual pattern: commit what was read before the partitions move, so their
            # next owner (or this member again) resumes exactly there.
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as error:
                assert error.args[0].code() == KafkaError._NO_OFFSET, f"commit on revoke: {error}"
            assignments[i] = set()
        return on_assign, on_revoke

    members = [member(bootstrap, group), member(bootstrap, group)]
    for i, c in enumerate(members):
        on_assign, on_revoke = tracker(i)
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    early = []

    def split_done():
        for i, c in enumerate(members):
            msg = c.poll(0.1)
            if msg is None:
                continue
            # A member may read as soon as its own callback ran (one poll serves the callback
            # and may return a record), before the other member's poll ran its own; but only
            # in the split generation: two partitions, never all four.
            assert msg.error() is None, f"consumer {i}: {msg.error()}"
            assert len(assignments[i]) == 2 and msg.partition() in assignments[i], \
                f"member {i} read partition {msg.partition()} before the split ({assignments})"
            early.append((i, msg.partition(), msg.offset(), msg.value(), msg.leader_epoch()))
        a, b = assignments
        return len(a) == 2 and len(b) == 2 and not (a & b) and (a | b) == {0, 1, 2, 3}
    # No record is read before the split: the first member waits for the second one within
    # the initial rebalance delay, so both start in one generation.
    eventually("the two members to split the four partitions", split_done, timeout_s=60)
    got = early + read(members, 100 - len(early))
    for i, p, _, _, _ in got:
        assert p in assignments[i], f"member {i} read partition {p}, assigned {assignments[i]}"
    log(f"split {assignments}, read {len(got)}")

    # The first member leaves (close sends LeaveGroup after its revoke callback committed);
    # the survivor takes the four partitions and reads what is left, once each, resuming the
    # leaver's partitions where the leaver stopped.
    members[0].close()
    survivor = members[1]
    seen = {(p, o) for _, p, o, _, _ in got}
    deadline = time.monotonic() + 60
    while seen != set(records) or assignments[1] != {0, 1, 2, 3}:
        missing = sorted(set(records) - seen)[:5]
        assert time.monotonic() < deadline, f"assigned {assignments[1]}, missing {missing}"
        msg = survivor.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, f"survivor: {msg.error()}"
        key = (msg.partition(), msg.offset())
        assert key not in seen, f"{key} read twice"
        seen.add(key)
    log(f"survivor took over {sorted(assignments[1])}")
    survivor.close()


def failover(bootstrap):
    topic, group = "durable", "failover-group"
    create_topic(bootstrap, topic, 2)
    records = produce_all(bootstrap, topic, 2)
    first = member(bootstrap, group)
    first.subscribe([topic])
    part = read([first], 50)
    last = commit_last(first, topic, part)
    check_committed(first, topic, last)
    first.close()
    log(f"COMMITTED {group}")
    answer = sys.stdin.readline().strip()
    assert answer == "killed", f"the test answered {answer!r}"

    second = member(bootstrap, group)
    eventually("the new coordinator to serve the commits",
               lambda: check_committed(second, topic, last) is None, timeout_s=60)
    second.subscribe([topic])
    rest = read([second], len(records) - len(part), timeout_s=90)
    seen = [(p, o) for _, p, o, _, _ in part + rest]
    assert len(seen) == len(set(seen)), "a record was read twice after the failover"
    assert set(seen) == set(records), f"missing {sorted(set(records) - set(seen))[:5]}"
    second.close()


def kafka_python(bootstrap):
    topic, group = "kp-orders", "kafka-python-group"
    create_topic(bootstrap, topic, 2)
    records = produce_all(bootstrap, topic, 2)

    def consumer():
        return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500)

    def poll(c, count, timeout_s=60):
        out = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count:
            assert time.monotonic() < deadline, f"kafka-python read {len(out)} of {count}"
            for batch in c.poll(timeout_ms=200, max_records=count - len(out)).values():
                out.extend((r.partition, r.offset, r.value, r.leader_epoch) for r in batch)
        return out

    first = consumer()
    part = poll(first, 70)
    last = {}
    for p, o, _, e in part:
        if p not in last or o >= last[p][0]:
            last[p] = (o + 1, e)
    first.commit({KTopicPartition(topic, p): OffsetAndMetadata(o, "", e) for p, (o, e) in last.items()})
    for p, (o, e) in last.items():
        got = first.committed(KTopicPartition(topic, p), metadata=True)
        assert (got.offset, got.leader_epoch) == (o, e), \
            f"kafka-python committed({p}) = {got}, expected offset {o} epoch {e}"
        assert e is not None and e >= 0, f"partition {p}: no leader epoch"
    first.close()

    second = consumer()
    rest = poll(second, len(records) - len(part))
    seen = [(p, o) for p, o, _, _ in part + rest]
    assert len(seen) == len(set(seen)), "kafka-python read a record twice"
    assert set(seen) == set(records), f"missing {sorted(set(records) - set(seen))[:5]}"
    second.close()


def kcat_group(bootstrap):
    topic, group = "kcat-orders", "kcat-group"
    create_topic(bootstrap, topic, 2)
    records = produce_all(bootstrap, topic, 2)
    common = ["-b", bootstrap, "-G", group, "-q", "-f", "%p %o %s\n",
              "-X", "session.timeout.ms=6000", "-X", "auto.offset.reset=earliest"]

    def lines(out):
        return [(int(p), int(o), v.encode()) for p, o, v in (line.split(" ", 2) for line in out.splitlines())]
    first = lines(kcat(*common, "-c", "70", topic, timeout_s=60))
    assert len(first) == 70, f"kcat read {len(first)}"
    rest = lines(kcat(*common, "-e", topic, timeout_s=60))
    seen = [(p, o) for p, o, _ in first + rest]
    assert len(seen) == len(set(seen)), "kcat read a record twice"
    assert set(seen) == set(records), f"missing {sorted(set(records) - set(seen))[:5]}"
    for p, o, value in first + rest:
        assert records[(p, o)] == value, f"{p}/{o} read {value!r}"
    log(f"kcat -G read {len(first)} then {len(rest)}")


def admin(bootstrap):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    topic, group = "admin-orders", "admin-group"
    create_topic(bootstrap, topic, 2)
    produce_all(bootstrap, topic, 2)
    a = AdminClient({"bootstrap.servers": bootstrap})
    m = member(bootstrap, group)
    m.subscribe([topic])
    last = commit_last(m, topic, read([m], 30))

    def listed():
        result = a.list_consumer_groups(request_timeout=10).result(timeout=30)
        return {g.group_id: g.state for g in result.valid}
    eventually("the group listed Stable",
               lambda: listed().get(group) == ConsumerGroupState.STABLE, timeout_s=30)
    described = a.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=30)
    assert described.state == ConsumerGroupState.STABLE, f"described {described.state}"
    assert described.partition_assignor == "range", described.partition_assignor
    assert len(described.members) == 1, f"members {described.members}"
    assigned = {tp.partition for tp in described.members[0].assignment.topic_partitions}
    assert assigned == {0, 1}, f"assignment {assigned}"

    def offsets():
        asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in (0, 1)])
        got = a.list_consumer_group_offsets([asked])[group].result(timeout=30)
        return {tp.partition: tp.offset for tp in got.topic_partitions}
    expected = {p: last.get(p, (-1001, None))[0] for p in (0, 1)}
    assert offsets() == expected, f"offsets {offsets()}, expected {expected}"

    try:
        a.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=30)
        raise AssertionError("a group with a member was deleted")
    except KafkaException as error:
        assert error.args[0].code() == KafkaError.NON_EMPTY_GROUP, f"delete: {error}"
    m.close()

    altered = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5),
                                                   TopicPartition(topic, 1, 7)])
    eventually("the offsets altered",
               lambda: a.alter_consumer_group_offsets([altered])[group].result(timeout=30),
               timeout_s=30)
    assert offsets() == {0: 5, 1: 7}, f"after alter: {offsets()}"
    a.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=30)
    assert group not in listed(), "deleted, still listed"


def body(args):
    bootstrap, mode = args
    modes = {"resume": resume, "split": split, "failover": failover,
             "kafka-python": kafka_python, "admin": admin, "kcat": kcat_group}
    modes[mode](bootstrap)


if __name__ == "__main__":
    main(body)
