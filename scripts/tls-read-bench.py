"""Consumer read throughput of one partition over PLAINTEXT or SSL (docs/server.md, "TLS").

usage: tls-read-bench.py plain-produce|plain|ssl-produce|ssl BOOTSTRAP [CA_PEM]
  *-produce writes 200,000 records of 1 KiB to topic "bench" (created, one partition, RF 1);
  plain/ssl read them all three times with one confluent-kafka consumer and print MiB/s.
Not a test: a measurement to run by hand against a node restarted with either listener.
"""
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
mode, bootstrap = sys.argv[1], sys.argv[2]
conf = {"bootstrap.servers": bootstrap}
if mode.startswith("ssl"):
    conf.update({"security.protocol": "SSL", "ssl.ca.location": sys.argv[3]})
if mode.endswith("produce"):
    admin = AdminClient(conf); admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(15)
    p = Producer({**conf, "acks": "all", "linger.ms": 20, "batch.size": 1000000})
    v = b"x" * 1024
    for i in range(200000):
        while True:
            try:
                p.produce("bench", v, partition=0); break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(120) == 0
    print("produced")
    sys.exit(0)
for run in range(3):
    c = Consumer({**conf, "group.id": "b", "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 10485760, "queued.max.messages.kbytes": 262144})
    c.assign([TopicPartition("bench", 0, 0)])
    n = 0; nbytes = 0; start = time.monotonic()
    while n < 200000:
        msgs = c.consume(10000, 5)
        for m in msgs:
            assert m.error() is None, m.error()
            n += 1; nbytes += len(m.value())
    elapsed = time.monotonic() - start
    c.close()
    print(f"{mode} run {run}: {n} records, {nbytes/elapsed/1048576:.0f} MiB/s of values in {elapsed:.2f} s")
