//! Metadata for all topics (`list_topics()` with no topic, `kcat -L`) through unmodified
//! Kafka clients against a three-voter quorum of real `ringlog serve` processes, one client
//! per test (tests/clients/list_topics.py).
//!
//! librdkafka 2.1 and later (confluent-kafka 2.16, kcat on a current librdkafka) ask for all
//! topics with a Metadata v12 request carrying three bytes after its last field: the node used
//! to close the connection on them ("3 trailing bytes at byte 22 after a complete api key 3
//! v12 message") and the client failed with `_TRANSPORT`. Kafka's brokers read the fields a
//! version defines and ignore the rest; so does the node now (docs/protocol.md, "Parsing rule").
//! kafka-python sends no such bytes; its tests pin down that its listings keep working.

use std::time::Duration;

mod quorum;
use quorum::{Quorum, run_client_script, serial};

/// Starts a quorum and runs list_topics.py with `client`; the script creates two topics and
/// lists them until both appear with their partitions and the three voters as brokers.
fn list_topics_with(client: &str) {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "list_topics.py",
        client,
        Duration::from_secs(180),
        |_, _| None,
    );
}

/// confluent-kafka's `Producer.list_topics()` (librdkafka's all-topics Metadata v12, with its
/// three trailing bytes) lists every topic.
#[test]
fn confluent_producer_lists_all_topics() {
    list_topics_with("confluent-producer");
}

/// confluent-kafka's `AdminClient.list_topics()`: the same request, through the admin client.
#[test]
fn confluent_admin_client_lists_all_topics() {
    list_topics_with("confluent-admin");
}

/// kafka-python's `KafkaAdminClient.list_topics()` (Metadata v12, topics null).
#[test]
fn kafka_python_admin_client_lists_all_topics() {
    list_topics_with("kafka-python-admin");
}

/// kafka-python's `KafkaConsumer.topics()`.
#[test]
fn kafka_python_consumer_lists_all_topics() {
    list_topics_with("kafka-python-consumer");
}

/// `kcat -L` with the system's librdkafka (Metadata v4 on Debian 12's 2.0.2) and with
/// librdkafka 2.16 (Metadata v12 with the trailing bytes): both list every topic, alike.
#[test]
fn kcat_lists_all_topics() {
    list_topics_with("kcat");
}
