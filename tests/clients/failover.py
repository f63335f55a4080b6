"""A leader killed mid-stream: a confluent-kafka idempotent producer (acks=all) and a consumer
carry on to the new leader; every acknowledged record is read back exactly once, in order,
by both clients' consumers and by kcat.

usage: failover.py BOOTSTRAP TOPIC
Protocol with the driving test: prints "KILL <node id>" once half the records are
acknowledged, then waits for a line on stdin (the node is dead) before producing the rest.
"""
import sys
import threading
import time

from confluent_kafka import Consumer, TopicPartition

from common import (confluent_producer, create_topic, kafka_python_consume, kcat, log, main,
                    partition_leaders)

COUNT = 2000


def body(args):
    bootstrap, topic = args
    create_topic(bootstrap, topic, 1)
    leader = partition_leaders(bootstrap, topic)[0]
    values = [f"v{i:06d}".encode() for i in range(COUNT)]

    consumed = []
    stop = threading.Event()

    def consume():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover",
                      "enable.auto.commit": False, "auto.offset.reset": "error",
                      "topic.metadata.refresh.interval.ms": 500})
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 120
        while len(consumed) < COUNT and not stop.is_set() and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None or msg.error() is not None:
                continue  # transport errors while the leader is gone are retried
            consumed.append((msg.offset(), msg.value()))
        c.close()

    reader = threading.Thread(target=consume)
    reader.start()

    p = confluent_producer(bootstrap, True)
    acked, failed = [], []

    def on_delivery(error, msg):
        (acked.append((msg.offset(), msg.value())) if error is None else failed.append(error))

    half = COUNT // 2
    for v in values[:half]:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    p.flush(30)
    # Records still in flight when the leader dies are retried by the idempotent producer.
    for v in values[half:half + 200]:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    log(f"KILL {leader}")
    sys.stdin.readline()
    for v in values[half + 200:]:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(90)
    assert left == 0 and not failed, f"{left} unacknowledged, failures {failed[:3]}"
    acked_values = [v for _, v in acked]
    assert acked_values == values, "acknowledgements out of order or missing"
    new_leader = partition_leaders(bootstrap, topic)[0]
    assert new_leader != leader, f"leader still {leader}"
    log(f"all {COUNT} acknowledged; leader {leader} -> {new_leader}")

    reader.join(150)
    stop.set()
    got = [v for _, v in consumed]
    assert got == values, (f"confluent consumer: {len(got)} records, duplicates "
                           f"{len(got) - len(set(got))}, first difference at "
                           f"{next((i for i, (a, b) in enumerate(zip(got, values)) if a != b), None)}")
    assert [o for o, _ in consumed] == [o for o, _ in acked], "consumer offsets differ from the acknowledged ones"
    log("confluent consumer read every record once, in order, across the failover")

    again = kafka_python_consume(bootstrap, topic, 0, 0, COUNT, timeout_s=60)
    assert [(o, v) for o, v, _ in again] == acked, f"kafka-python read {len(again)} records, not the acknowledged ones"
    epochs = sorted({e for _, _, e in again})
    assert len(epochs) >= 2, f"records span one leader epoch only: {epochs}"
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%s\n")
    assert out.split() == [v.decode() for v in values], "kcat -C reads other records"
    log(f"kafka-python and kcat agree; leader epochs {epochs}")


if __name__ == "__main__":
    main(body)
