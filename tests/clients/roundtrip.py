"""Create a topic, produce with confluent-kafka and kafka-python (acks=all, idempotent and
not), consume everything back with both by assign+seek from the start and from the middle,
byte for byte with offsets and leader epochs, and check that kcat -L / kcat -C agree.

usage: roundtrip.py BOOTSTRAP TOPIC
"""
import os

from common import (confluent_consume, confluent_produce, create_topic, eventually, kafka_python_consume,
                    kafka_python_produce, kcat, log, main, partition_leaders)

PARTITIONS = 2
PER_PRODUCER = 50


def body(args):
    bootstrap, topic = args
    create_topic(bootstrap, topic, PARTITIONS)
    leaders = partition_leaders(bootstrap, topic)
    log("leaders", leaders)

    # Random bytes (not just text): the round trip must be byte for byte.
    expected = {p: [] for p in range(PARTITIONS)}
    producers = [
        ("confluent idempotent", confluent_produce, True),
        ("confluent plain", confluent_produce, False),
        ("kafka-python idempotent", kafka_python_produce, True),
        ("kafka-python plain", kafka_python_produce, False),
    ]
    for name, produce, idempotent in producers:
        for p in range(PARTITIONS):
            values = [os.urandom(8) + f"{name}/{p}/{i}".encode() for i in range(PER_PRODUCER)]
            acked = produce(bootstrap, topic, p, values, idempotent)
            assert [v for _, v in acked] == values, f"{name}: acknowledged out of order"
            offsets = [o for o, _ in acked]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), \
                f"{name}: offsets {offsets[:5]}..."
            expected[p].extend(acked)
            log(f"{name} p{p}: offsets {offsets[0]}..{offsets[-1]}")

    for p in range(PARTITIONS):
        want = expected[p]
        middle = len(want) // 2
        for start in (0, middle):
            # Offset 0 is the first record's (a new topic has no LeaderChange record before
            # it); seeking to a record's own offset starts at that record.
            seek = 0 if start == 0 else want[start][0]
            wanted = want[start:]
            for name, consume in (("confluent", confluent_consume), ("kafka-python", kafka_python_consume)):
                got = consume(bootstrap, topic, p, seek, len(wanted))
                assert [(o, v) for o, v, _ in got] == wanted, \
                    f"{name} p{p} from {seek}: got {len(got)} records, first differences " \
                    f"{[(a, b) for a, b in zip([(o, v) for o, v, _ in got], wanted) if a != b][:2]}"
                epochs = {e for _, _, e in got}
                assert epochs == {leaders_epoch(bootstrap, topic, p)}, \
                    f"{name} p{p}: leader epochs {epochs}"
            log(f"p{p} from offset {seek}: {len(wanted)} records match for both consumers")

    # kcat -L lists the same partitions and leaders; kcat -C reads the same records.
    listing = kcat("-b", bootstrap, "-L", "-t", topic)
    for p, leader in leaders.items():
        assert f"partition {p}, leader {leader}," in listing, f"kcat -L disagrees:\n{listing}"
    for p in range(PARTITIONS):
        out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", str(p), "-o", "beginning", "-e",
                   "-f", "%o %S\n")
        lines = [l for l in out.splitlines() if l]
        assert [int(l.split()[0]) for l in lines] == [o for o, _ in expected[p]], \
            f"kcat -C offsets differ on p{p}"
        assert [int(l.split()[1]) for l in lines] == [len(v) for _, v in expected[p]], \
            f"kcat -C sizes differ on p{p}"
    log("kcat agrees")


def leaders_epoch(bootstrap, topic, partition):
    """The partition's leader epoch as ListOffsets reports it (KIP-320: clients start there)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "epoch"})
    try:
        tp = eventually("ListOffsets", lambda: c.offsets_for_times([TopicPartition(topic, partition, 0)], timeout=5)[0])
        return tp.leader_epoch
    finally:
        c.close()


if __name__ == "__main__":
    main(body)
