"""confluent-kafka over TLS (security.protocol=SSL): with the cluster's CA it creates a topic,
produces acks=all and consumes every record back byte for byte; with another CA its handshake
fails and it gets no metadata.

usage: tls_roundtrip.py BOOTSTRAP CA_PEM,OTHER_CA_PEM
"""
import os
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import eventually, log, main

TOPIC = "tls-roundtrip"
COUNT = 200


def ssl(bootstrap, ca):
    # librdkafka checks the certificate's name (ssl.endpoint.identification.algorithm=https
    # by default): the node's certificate names 127.0.0.1.
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}


def body(args):
    bootstrap, cas = args
    ca, other_ca = cas.split(",")

    def create():
        admin = AdminClient(ssl(bootstrap, ca))
        futures = admin.create_topics([NewTopic(TOPIC, 1, 3)], request_timeout=10)
        try:
            futures[TOPIC].result(15)
        except KafkaException as error:
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise
        md = admin.list_topics(TOPIC, timeout=5)
        partition = md.topics[TOPIC].partitions.get(0)
        return partition is not None and partition.leader >= 0

    eventually(f"topic {TOPIC} with a leader", create)
    log("topic created over TLS")

    producer = Producer({**ssl(bootstrap, ca), "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})
    values = [os.urandom(16) + f"tls/{i}".encode() for i in range(COUNT)]
    acked, failed = [], []

    def on_delivery(error, msg):
        (failed if error else acked).append(error or (msg.offset(), msg.value()))

    for v in values:
        producer.produce(TOPIC, value=v, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0, "records never acknowledged"
    assert not failed, f"delivery failures: {failed[:3]}"
    assert [v for _, v in acked] == values, "acknowledged out of order"
    log(f"produced {COUNT} records over TLS")

    consumer = Consumer({**ssl(bootstrap, ca), "group.id": "tls-test", "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < COUNT and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, f"consumer error: {msg.error()}"
        got.append((msg.offset(), msg.value()))
    consumer.close()
    assert got == acked, f"consumed {len(got)} records, {sum(a != b for a, b in zip(got, acked))} differ"
    log(f"consumed {COUNT} records over TLS, byte for byte")

    # A client that does not trust the cluster's CA: the handshake fails, nothing is served.
    stranger = Producer({**ssl(bootstrap, other_ca), "socket.timeout.ms": 3000})
    try:
        stranger.list_topics(timeout=5)
    except KafkaException as error:
        log(f"a client trusting another CA gets no metadata: {error}")
    else:
        raise AssertionError("a client that does not trust the CA got metadata")


if __name__ == "__main__":
    main(body)
