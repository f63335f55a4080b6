"""Replication factors through confluent-kafka (driven by tests/replication_factor.rs).

usage: replication_factor.py BOOTSTRAP unused

Against three voters:
1. AdminClient creates `rf-one` (1 partition, replication_factor=1) and `rf-two` (3 partitions,
   replication_factor=2); `rf-four` (replication_factor=4) is refused with
   INVALID_REPLICATION_FACTOR, as Kafka refuses a factor above its broker count.
2. Metadata from every node, each asked alone (so the nodes that are no replica answer too):
   each partition's replicas and ISR have RF entries, every node names the same leader, and
   the leader is one of the replicas. CreatePartitions grows `rf-two` to 6 partitions, the new
   ones with 2 replicas too, then to 8 with the client's own assignment (bad ones refused with
   INVALID_REPLICA_ASSIGNMENT).
3. A producer bootstrapped at a node that is not rf-one's replica finds the leader and produces
   (acks=all: fsynced on the one replica); a consumer reads the records back.
4. The script prints `restart <id>` for rf-one's only replica; the test kills it (-9) and starts
   it again, then answers `restarted`. Every acknowledged record is still there, and the topic
   takes and serves more.
"""
import sys
import time

from common import eventually, log, main
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def create(admin, topic, partitions, replication_factor):
    """CreateTopics; returns None when created, else the KafkaError."""
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)],
                                  operation_timeout=10, request_timeout=15)
    try:
        futures[topic].result(timeout=30)
        return None
    except KafkaException as error:
        return error.args[0]


def ensure_created(admin, topic, partitions, replication_factor):
    """Created, retrying what a loaded machine may answer; TOPIC_ALREADY_EXISTS counts only
    after a first attempt (that one may have gone through unanswered)."""
    attempts = [0]

    def attempt():
        attempts[0] += 1
        error = create(admin, topic, partitions, replication_factor)
        if error is None:
            return True
        if error.code() == KafkaError.TOPIC_ALREADY_EXISTS and attempts[0] > 1:
            return True
        assert error.code() != KafkaError.INVALID_REPLICATION_FACTOR, f"{topic}: {error.str()}"
        log(f"{topic}: {error.str()}, again")
        return False

    eventually(f"{topic} created", attempt, timeout_s=60)


def metadata_from(address, topic):
    """{partition: (leader, replicas, isr)} as node `address` alone answers it."""
    c = Consumer({"bootstrap.servers": address, "group.id": "rf-meta",
                  "topic.metadata.refresh.interval.ms": 100})
    try:
        md = c.list_topics(topic, timeout=5)
        # librdkafka may have learned of the other brokers from this node and asked another.
        t = md.topics[topic]
        if t.error is not None:
            return None
        return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}
    finally:
        c.close()


def agreed_placement(addresses, topic, partitions, rf):
    """Every node's answer, once all name a leader among RF replicas and an ISR of RF."""
    views = []
    for address in addresses:
        view = metadata_from(address, topic)
        if view is None or len(view) != partitions:
            return None
        for leader, replicas, isr in view.values():
            if leader < 0 or leader not in replicas or len(replicas) != rf or len(isr) != rf:
                return None
        views.append(view)
    return views[0] if all(v == views[0] for v in views) else None


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "retry.backoff.ms": 100})
    acked, failed = [], []

    def on_delivery(error, msg):
        (acked if error is None else failed).append(msg.value() if error is None else error)

    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(60)
    assert left == 0, f"{left} records never acknowledged"
    assert not failed, f"delivery failures: {failed[:3]}"
    return acked


def consume_all(bootstrap, topic, count, timeout_s=60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rf-test",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            log(f"consumer: {msg.error()}")
            continue
        out.append(msg.value())
    c.close()
    return out


def body(args):
    bootstrap = args[0]
    addresses = bootstrap.split(",")
    admin = AdminClient({"bootstrap.servers": bootstrap})

    ensure_created(admin, "rf-one", 1, 1)
    ensure_created(admin, "rf-two", 3, 2)
    refused = create(admin, "rf-four", 1, 4)
    assert refused is not None and refused.code() == KafkaError.INVALID_REPLICATION_FACTOR, \
        f"replication_factor=4 on three nodes answered {refused!r}"
    log(f"rf-four refused: {refused.str()}")

    one = eventually("rf-one's placement agreed by every node",
                     lambda: agreed_placement(addresses, "rf-one", 1, 1), timeout_s=60)
    two = eventually("rf-two's placement agreed by every node",
                     lambda: agreed_placement(addresses, "rf-two", 3, 2), timeout_s=60)
    log(f"rf-one {one}; rf-two {two}")
    replica = one[0][1][0]
    # rf-two's replicas are spread: three partitions of RF 2 over three nodes hold two each.
    held = {}
    for _, replicas, _ in two.values():
        for r in replicas:
            held[r] = held.get(r, 0) + 1
    assert sorted(held.values()) == [2, 2, 2], f"rf-two's replicas are not spread: {two}"

    # CreatePartitions places the new partitions with the topic's replication factor (2), not
    # on every node.
    grown = admin.create_partitions([NewPartitions("rf-two", 6)])["rf-two"]
    grown.result(timeout=60)
    six = eventually("rf-two's six partitions agreed by every node",
                     lambda: agreed_placement(addresses, "rf-two", 6, 2), timeout_s=60)
    log(f"rf-two grown: {six}")

    # CreatePartitions with the client's own assignment (librdkafka's 0081): the new partitions
    # go on the nodes named, in that order; an assignment Kafka refuses is refused the same way.
    for bad in ([[1, 2]], [[1], [2]], [[1, 1], [2, 3]], [[1, 9], [2, 3]]):
        future = admin.create_partitions([NewPartitions("rf-two", 8, bad)])["rf-two"]
        try:
            future.result(timeout=60)
            raise AssertionError(f"assignment {bad} was taken")
        except KafkaException as error:
            assert error.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, \
                f"assignment {bad}: {error!r}"
    grown = admin.create_partitions([NewPartitions("rf-two", 8, [[3, 1], [2, 3]])])["rf-two"]
    grown.result(timeout=60)
    eight = eventually("rf-two's eight partitions agreed by every node",
                       lambda: agreed_placement(addresses, "rf-two", 8, 2), timeout_s=60)
    assert (eight[6][1], eight[7][1]) == ([1, 3], [2, 3]), f"assigned partitions: {eight}"
    log(f"rf-two grown by assignment: {eight[6]}, {eight[7]}; bad assignments refused")

    # A client's assignment on every node keeps its order: the first replica is the preferred
    # leader, and Metadata names the replicas in the order given.
    ordered = [[3, 2, 1], [1, 3, 2]]
    future = admin.create_topics([NewTopic("rf-ordered", num_partitions=len(ordered),
                                           replica_assignment=ordered)])
    future["rf-ordered"].result(timeout=60)
    admin.create_partitions([NewPartitions("rf-ordered", 3, [[2, 1, 3]])])["rf-ordered"] \
        .result(timeout=60)
    ordered.append([2, 1, 3])

    def replica_order():
        md = admin.list_topics("rf-ordered", timeout=5).topics["rf-ordered"]
        got = [md.partitions[i].replicas for i in sorted(md.partitions)]
        return got if got == ordered else None
    eventually("rf-ordered's replicas in the assigned order", replica_order, timeout_s=60)
    log(f"rf-ordered's replicas kept the assigned order: {ordered}")

    # A producer that knows only a node holding no replica of rf-one.
    elsewhere = [a for i, a in enumerate(addresses, start=1) if i != replica][0]
    values = [f"before-{i}".encode() for i in range(50)]
    acked = produce(elsewhere, "rf-one", values)
    assert acked == values, "records acknowledged out of order"
    read = consume_all(elsewhere, "rf-one", len(values))
    assert read == values, f"read back {len(read)} of {len(values)} records"

    log(f"restart {replica}")
    answer = sys.stdin.readline().strip()
    assert answer == "restarted", f"the test answered {answer!r}"
    eventually("rf-one led again", lambda: agreed_placement(addresses, "rf-one", 1, 1),
               timeout_s=60)
    more = [f"after-{i}".encode() for i in range(20)]
    assert produce(bootstrap, "rf-one", more) == more
    read = consume_all(bootstrap, "rf-one", len(values) + len(more))
    assert read == values + more, \
        f"after the replica's restart: {len(read)} records, expected {len(values) + len(more)}"
    log(f"rf-one kept {len(values)} records across its replica's restart")


if __name__ == "__main__":
    main(body)
