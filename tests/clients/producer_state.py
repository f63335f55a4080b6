"""A confluent-kafka idempotent producer whose records DeleteRecords removed, across a restart of
every node: it goes on producing with no error, and nothing is written twice
(net/src/node/producer_state_file.rs, KIP-360's rule for an unknown producer).

usage: producer_state.py BOOTSTRAP TOPIC
Protocol with the driving test: prints "RESTART" once the first half is acknowledged and the
log start moved past all of it, then waits for a line on stdin (every node was killed and
started again) before producing the rest with the same producer.
"""
import sys

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from common import (confluent_consume, confluent_producer, create_topic, eventually, log, main)

HALF = 500


def body(args):
    bootstrap, topic = args
    create_topic(bootstrap, topic, 1)
    values = [f"v{i:06d}".encode() for i in range(2 * HALF)]

    p = confluent_producer(bootstrap, True)
    acked, failed = [], []

    def on_delivery(error, msg):
        (acked.append((msg.offset(), msg.value())) if error is None else failed.append(error))

    for v in values[:HALF]:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(60)
    assert left == 0 and not failed, f"{left} unacknowledged, failures {failed[:3]}"
    # A new topic's first record is at offset 0; the offsets are read from the answers.
    first = acked[0][0]
    assert [o for o, _ in acked] == list(range(first, first + HALF)), "first half not contiguous"
    end = first + HALF

    # Every one of this producer's batches removed from the log.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, end)], operation_timeout=30)
    deleted = futures[TopicPartition(topic, 0, end)].result(30)
    assert deleted.low_watermark == end, f"low watermark {deleted.low_watermark}"
    log(f"deleted below {deleted.low_watermark}")

    log("RESTART")
    sys.stdin.readline()

    for v in values[HALF:]:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(90)
    assert left == 0 and not failed, f"{left} unacknowledged, failures {failed[:3]}"
    assert [v for _, v in acked] == values, "acknowledgements out of order or missing"
    # After the restart the new leader's LeaderChange comes first, then the second half.
    second = [o for o, _ in acked[HALF:]]
    assert second == list(range(second[0], second[0] + HALF)) and second[0] >= end, \
        f"second half offsets {second[:3]}..{second[-3:]} after {end}"

    # Read back from the low watermark: exactly the second half, once each.
    def read_back():
        got = confluent_consume(bootstrap, topic, 0, end, HALF, 20)
        return got if len(got) >= HALF else None

    got = eventually("the second half read back", read_back, timeout_s=60)
    assert [v for _, v, _ in got] == values[HALF:], \
        f"read {len(got)} records, duplicates {len(got) - len(set(v for _, v, _ in got))}"
    extra = confluent_consume(bootstrap, topic, 0, second[-1] + 1, 1, 3)
    assert extra == [], f"records after the last acknowledged one: {extra[:3]}"
    log(f"{2 * HALF} acknowledged once each across the restart")


if __name__ == "__main__":
    main(body)
