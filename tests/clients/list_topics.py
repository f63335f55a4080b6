"""Metadata for all topics, as each client asks for it (driven by tests/metadata_clients.rs).

usage: list_topics.py BOOTSTRAP CLIENT

CLIENT is one of:
- confluent-producer: confluent-kafka's Producer.list_topics() with no topic
- confluent-admin: confluent-kafka's AdminClient.list_topics() with no topic
- kafka-python-admin: kafka-python's KafkaAdminClient.list_topics()
- kafka-python-consumer: kafka-python's KafkaConsumer.topics()
- kcat: `kcat -L` with the system's librdkafka, then with the librdkafka 2.16 that the
  confluent-kafka wheel carries (Debian 12's kcat links librdkafka 2.0.2, which asks Metadata
  v4 at most; librdkafka 2.1 and later ask v12, the request that used to close the connection)

The script creates two topics (kafka-python's admin, by name), then lists every topic with
CLIENT until both appear with their partitions (a node that has not applied a topic's record
yet does not list it), and checks what the listing says. librdkafka's all-topics Metadata v12
carries three bytes after its last field; before the node ignored them as Kafka does, it
closed the connection and these listings failed with _TRANSPORT.
"""
import glob
import os
import re
import subprocess
import tempfile

import confluent_kafka
from common import create_topic, eventually, log, main, partition_leaders
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient

# name -> partition count
TOPICS = {"listed-one": 1, "listed-three": 3}
VOTERS = 3


def confluent_listing(client):
    """{topic: partition count} and the broker count from a librdkafka ClusterMetadata."""
    metadata = client.list_topics(timeout=5)
    topics = {}
    for name, topic in metadata.topics.items():
        assert topic.error is None, f"{name}: {topic.error}"
        topics[name] = len(topic.partitions)
    return topics, len(metadata.brokers)


def confluent_producer(bootstrap):
    return confluent_listing(Producer({"bootstrap.servers": bootstrap}))


def confluent_admin(bootstrap):
    return confluent_listing(AdminClient({"bootstrap.servers": bootstrap}))


def kafka_python_admin(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        # Names only: no partitions, no brokers.
        return {name: None for name in admin.list_topics()}, None
    finally:
        admin.close()


def kafka_python_consumer(bootstrap):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        names = consumer.topics()
        return ({name: len(consumer.partitions_for_topic(name) or ()) for name in names},
                len(consumer._client.cluster.brokers()))
    finally:
        consumer.close()


def kcat_listing(bootstrap, env):
    done = subprocess.run(["kcat", "-b", bootstrap, "-L", "-m", "5"], capture_output=True,
                          timeout=30, env=env)
    assert done.returncode == 0, f"kcat -L failed: {done.stderr.decode()}"
    out = done.stdout.decode()
    topics = {m[0]: int(m[1]) for m in re.findall(r'topic "([^"]+)" with (\d+) partitions', out)}
    brokers = re.search(r"^ (\d+) brokers:", out, re.M)
    assert brokers, f"kcat -L names no brokers:\n{out}"
    return topics, int(brokers.group(1))


def kcat_librdkafka_version(env):
    out = subprocess.run(["kcat", "-V"], capture_output=True, timeout=30, env=env).stdout.decode()
    found = re.search(r"librdkafka (\d+\.\d+\.\d+)", out)
    assert found, f"kcat -V names no librdkafka:\n{out}"
    return found.group(1)


def wheel_librdkafka_env(folder):
    """An environment in which kcat loads the librdkafka shipped in the confluent-kafka wheel
    (auditwheel renames it, so a `librdkafka.so.1` link to it goes in `folder`)."""
    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
    found = glob.glob(os.path.join(libs, "librdkafka-*.so*"))
    assert found, f"no librdkafka in {libs} (scripts/test-all.sh installs the confluent-kafka wheel)"
    os.symlink(os.path.realpath(found[0]), os.path.join(folder, "librdkafka.so.1"))
    return dict(os.environ, LD_LIBRARY_PATH=folder)


def kcat(bootstrap):
    """Both kcat runs must list the same; returns the listing of the librdkafka 2.16 one."""
    with tempfile.TemporaryDirectory() as folder:
        wheel_env = wheel_librdkafka_env(folder)
        runs = [("system", dict(os.environ)), ("wheel", wheel_env)]
        listings = []
        for name, env in runs:
            version = kcat_librdkafka_version(env)
            listing = eventually(f"kcat -L ({name} librdkafka {version}) to list {sorted(TOPICS)}",
                                 lambda: complete(kcat_listing(bootstrap, env)))
            log(f"kcat -L with librdkafka {version}: {listing}")
            listings.append(listing)
        assert kcat_librdkafka_version(wheel_env) == confluent_kafka.libversion()[0], \
            "kcat did not load the wheel's librdkafka"
        # __consumer_offsets appears once the first consumer with a group id asked for a
        # coordinator (create_topic's leader lookup does), possibly between the two runs.
        public = [({n: p for n, p in topics.items() if not n.startswith("__")}, brokers)
                  for topics, brokers in listings]
        assert public[0] == public[1], f"the two kcat runs disagree: {listings}"
        return listings[1]


LISTERS = {
    "confluent-producer": confluent_producer,
    "confluent-admin": confluent_admin,
    "kafka-python-admin": kafka_python_admin,
    "kafka-python-consumer": kafka_python_consumer,
    "kcat": kcat,
}


def complete(listing):
    """The listing once every created topic is in it (else None, to be asked again)."""
    topics, brokers = listing
    return listing if all(name in topics for name in TOPICS) else None


def body(args):
    bootstrap, client = args
    lister = LISTERS[client]
    for name, partitions in TOPICS.items():
        create_topic(bootstrap, name, partitions)
    log("created", TOPICS, "leaders", {name: partition_leaders(bootstrap, name) for name in TOPICS})

    if client == "kcat":
        topics, brokers = lister(bootstrap)
    else:
        topics, brokers = eventually(f"{client} to list {sorted(TOPICS)}",
                                     lambda: complete(lister(bootstrap)))
    log(f"{client} lists {topics} and {brokers} brokers")
    # kafka-python's admin list_topics() gives topic names only (None for the rest).
    assert brokers in (VOTERS, None), f"{client}: {brokers} brokers, expected {VOTERS}"
    for name, partitions in TOPICS.items():
        assert topics[name] in (partitions, None), \
            f"{client}: {name} has {topics[name]} partitions, expected {partitions}"


if __name__ == "__main__":
    main(body)
