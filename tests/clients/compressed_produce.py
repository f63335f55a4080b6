"""Produce with compression.type gzip, snappy, lz4 and zstd, acks=all, to partition 0 of TOPIC
(a cleanup.policy=snapshot topic: its records feed a state machine on every voter); then read
TOPIC back with the confluent consumer, byte for byte with the acknowledged offsets.
tests/compression.rs checks the nodes, the stored batches' codecs and the state after this
script, and again after a full restart.

The same compressed records to __cluster_metadata are refused: only the node writes its
internal state (issue 17; before, a gzip batch there was acknowledged and then stopped every
voter). librdkafka reports each as failed with TOPIC_EXCEPTION (Kafka's INVALID_TOPIC_EXCEPTION)
and none as delivered.

gzip, snappy (raw, as librdkafka writes it) and zstd come from confluent-kafka (librdkafka);
lz4 from kafka-python with the lz4 package (librdkafka enables lz4 only for a broker that
advertises FindCoordinator, its feature map dating LZ4 support by that API; ringlog did not
before it served consumer groups, and kafka-python's lz4 frames are the ones tested here).
kafka-python does not produce to an internal topic, so __cluster_metadata gets the three
librdkafka codecs.

The records are a function of (codec, index), so the Rust test knows them without being told:
key b"{codec}-{i:04}", value record_value(codec, i); PER_CODEC of each per codec to TOPIC;
METADATA_PER_CODEC keyed b"client/{codec}-{i:04}" per codec of METADATA_CODECS are tried on
__cluster_metadata.

usage: compressed_produce.py BOOTSTRAP TOPIC
"""
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

from common import confluent_consume, log, main

CODECS = ["gzip", "snappy", "lz4", "zstd"]
METADATA_CODECS = ["gzip", "snappy", "zstd"]
PER_CODEC = 200
METADATA_PER_CODEC = 20
METADATA = "__cluster_metadata"


def record_value(codec, i):
    # Repetitive, so every codec shrinks it: librdkafka sends a batch uncompressed when
    # compression would not make it smaller.
    return f"{codec} record {i}: ".encode() + b"compressible " * 20


def produce(bootstrap, topic, codec, records):
    """Produces [(key, value)] in order with `codec`; returns [(offset, value)] acknowledged."""
    if codec == "lz4":
        return kafka_python_produce(bootstrap, topic, codec, records)
    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": codec,
        # Many records per batch: compression is per batch.
        "linger.ms": 50,
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 100,
    })
    acked, failed = [], []

    def on_delivery(error, msg):
        if error is None:
            acked.append((msg.offset(), msg.value()))
        else:
            failed.append(error)

    for key, value in records:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(60)
    assert left == 0, f"{topic} {codec}: {left} records never acknowledged"
    assert not failed, f"{topic} {codec}: delivery failures {failed[:3]}"
    assert [v for _, v in acked] == [v for _, v in records], f"{topic} {codec}: acknowledged out of order"
    return acked


def produce_refused(bootstrap, topic, codec, records):
    """Produces [(key, value)] with `codec`; every record must fail with TOPIC_EXCEPTION."""
    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 50,
        "message.timeout.ms": 20000,
        "retry.backoff.ms": 100,
    })
    acked, failed = [], []

    def on_delivery(error, msg):
        if error is None:
            acked.append(msg.offset())
        else:
            failed.append(error)

    for key, value in records:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(60)
    assert left == 0, f"{topic} {codec}: {left} records never reported"
    assert not acked, f"{topic} {codec}: acknowledged at offsets {acked[:3]}"
    codes = {e.code() for e in failed}
    assert codes == {KafkaError.TOPIC_EXCEPTION}, f"{topic} {codec}: failures {failed[:3]}"
    return len(failed)


def kafka_python_produce(bootstrap, topic, codec, records):
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=codec,
                      linger_ms=50, retries=50, max_in_flight_requests_per_connection=1)
    futures = [(value, p.send(topic, key=key, value=value, partition=0)) for key, value in records]
    acked = [(f.get(timeout=60).offset, value) for value, f in futures]
    p.close()
    return acked


def body(args):
    bootstrap, topic = args
    expected = []
    for codec in CODECS:
        records = [(f"{codec}-{i:04}".encode(), record_value(codec, i)) for i in range(PER_CODEC)]
        acked = produce(bootstrap, topic, codec, records)
        log(f"{topic} {codec}: offsets {acked[0][0]}..{acked[-1][0]}")
        expected.extend(acked)

    for codec in METADATA_CODECS:
        records = [(f"client/{codec}-{i:04}".encode(), record_value(codec, i))
                   for i in range(METADATA_PER_CODEC)]
        refused = produce_refused(bootstrap, METADATA, codec, records)
        log(f"{METADATA} {codec}: {refused} records refused (TOPIC_EXCEPTION)")

    # librdkafka decompresses on its own: the batches are served as they were sent.
    got = confluent_consume(bootstrap, topic, 0, 0, len(expected))
    assert [(o, v) for o, v, _ in got] == expected, \
        f"consumed {len(got)} of {len(expected)} records, first differences " \
        f"{[(a, b) for a, b in zip([(o, v) for o, v, _ in got], expected) if a != b][:2]}"
    log(f"{topic}: {len(got)} records read back")


if __name__ == "__main__":
    main(body)
