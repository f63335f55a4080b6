//! Compressed batches on real `ringlog serve` processes. A Kafka client producing with
//! compression.type gzip, snappy, lz4 or zstd to a partition that runs a state machine
//! (`__cluster_metadata-0`, a `cleanup.policy=snapshot` topic) once had its batch
//! acknowledged, and then every voter exited applying it ("compression codec 1 is not
//! supported"), again at every restart: one request, a permanent outage. Now the batches are
//! stored as sent, decompressed where their records are read, and checked at Produce so that
//! nothing unreadable is appended (docs/record-batch.md, docs/clients.md); and clients can no
//! longer write `__cluster_metadata` at all (issue 17): the same batches there are refused.
//!
//! Free ports on 127.0.0.1, data in a temp folder, every child killed on drop; waits poll a
//! condition up to a deadline, never a fixed time. The Python client is confluent-kafka
//! (scripts/test-all.sh installs it).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use ringlog_engine::batch::{RECORD_BATCH_OVERHEAD, RecordBatchBuilder};
use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::consumer::{Consumer, ConsumerConfig};

mod quorum;
use quorum::{
    Quorum, checkpoints, eventually, high_watermark, read_partition_batches, read_partition_values,
    run_client_script, serial,
};

const TOPIC: &str = "kv-compressed";
const METADATA: &str = "__cluster_metadata";
/// As in tests/clients/compressed_produce.py.
const CODECS: [(&str, u8); 4] = [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)];
/// The script's codecs for its refused records to `__cluster_metadata` (librdkafka's).
const METADATA_CODECS: [&str; 3] = ["gzip", "snappy", "zstd"];
const PER_CODEC: usize = 200;
const METADATA_PER_CODEC: usize = 20;

const CORRUPT_MESSAGE: i16 = 2;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;

/// compressed_produce.py's record value for (codec, index).
fn record_value(codec: &str, i: usize) -> Bytes {
    let mut value = format!("{codec} record {i}: ").into_bytes();
    value.extend_from_slice(&b"compressible ".repeat(20));
    Bytes::from(value)
}

/// The state the script's records leave in the snapshot topic: every key once.
fn expected_state() -> BTreeMap<Bytes, Bytes> {
    CODECS
        .iter()
        .flat_map(|(codec, _)| {
            (0..PER_CODEC).map(move |i| {
                (
                    Bytes::from(format!("{codec}-{i:04}")),
                    record_value(codec, i),
                )
            })
        })
        .collect()
}

/// The values the script tried to produce to `__cluster_metadata`.
fn refused_metadata_values() -> Vec<Bytes> {
    METADATA_CODECS
        .iter()
        .flat_map(|codec| (0..METADATA_PER_CODEC).map(move |i| record_value(codec, i)))
        .collect()
}

/// No node has exited on its own.
fn assert_all_running(quorum: &mut Quorum, when: &str) {
    let exited = quorum.exited();
    assert!(
        exited.is_empty(),
        "{when}: nodes exited {exited:?}\n{}",
        quorum.dump_logs()
    );
}

/// The snapshot topic's state through the Rust consumer (which decompresses the batches
/// itself) equals `expected` once it has caught up.
fn assert_state(quorum: &Quorum, expected: &BTreeMap<Bytes, Bytes>, when: &str) {
    let tp = TopicPartition::new(TOPIC, 0);
    let entries = eventually(
        Duration::from_secs(30),
        &format!("{when}: the full state of {TOPIC}"),
        || {
            let mut consumer = Consumer::connect(&quorum.bootstrap(), ConsumerConfig::default());
            let state = consumer
                .read_full_state(&tp, Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("{when}: full-state read: {e}"));
            (state.entries.len() >= expected.len()).then_some(state.entries)
        },
    );
    if entries != *expected {
        let differing: Vec<_> = expected
            .iter()
            .filter(|(k, v)| entries.get(*k) != Some(v))
            .map(|(k, _)| k)
            .take(5)
            .collect();
        let extra: Vec<_> = entries
            .keys()
            .filter(|k| !expected.contains_key(*k))
            .take(5)
            .collect();
        panic!(
            "{when}: {} entries, {} expected; missing or different {differing:?}, unexpected {extra:?}",
            entries.len(),
            expected.len()
        );
    }
}

/// What `topic`-0's leader holds below its high-watermark.
struct Stored {
    /// The codecs of the client (non-control) batches.
    codecs: BTreeSet<u8>,
    /// The values of their records, in offset order.
    values: Vec<Bytes>,
    /// The offset after the last batch.
    end_offset: i64,
}

fn stored(quorum: &Quorum, topic: &str, when: &str) -> Stored {
    eventually(
        Duration::from_secs(30),
        &format!("{when}: the batches of {topic}"),
        || {
            let (mut client, _) = quorum.partition_leader(topic)?;
            let batches = read_partition_batches(&mut client, topic).ok()?;
            let mut codecs = BTreeSet::new();
            let mut values = Vec::new();
            for batch in batches.iter().filter(|b| !b.is_control()) {
                codecs.insert(batch.compression().id());
                for record in batch.records().unwrap_or_else(|e| panic!("{when}: {e}")) {
                    let record = record.unwrap_or_else(|e| panic!("{when}: {e}"));
                    values.extend(record.value().cloned());
                }
            }
            let end_offset = batches.last()?.next_offset();
            Some(Stored {
                codecs,
                values,
                end_offset,
            })
        },
    )
}

/// What the nodes hold after the script: every node running, the snapshot topic's batches
/// stored compressed with all four codecs and its state complete, and none of the client's
/// records in `__cluster_metadata`, which holds only the node's own.
fn assert_compressed_records_served(quorum: &mut Quorum, when: &str) {
    assert_state(quorum, &expected_state(), when);
    let topic = stored(quorum, TOPIC, when);
    assert_eq!(
        topic.codecs,
        CODECS.iter().map(|(_, id)| *id).collect(),
        "{when}: every batch compressed, with each codec"
    );
    assert_eq!(topic.values.len(), CODECS.len() * PER_CODEC, "{when}");
    let metadata = stored(quorum, METADATA, when);
    let refused = refused_metadata_values();
    assert!(
        !metadata.values.iter().any(|v| refused.contains(v)),
        "{when}: a client's record in {METADATA}"
    );
    assert_every_node_applied(quorum, &format!("{TOPIC}-0"), topic.end_offset, when);
    assert_every_node_applied(quorum, &format!("{METADATA}-0"), metadata.end_offset, when);
}

/// Every node's high-watermark of `partition` reached `end_offset`, so each node's state
/// machine applied every batch below it, and every node still runs (a batch its state
/// machine could not apply would have stopped it).
fn assert_every_node_applied(quorum: &mut Quorum, partition: &str, end_offset: i64, when: &str) {
    for node in &quorum.nodes {
        eventually(
            Duration::from_secs(30),
            &format!(
                "{when}: node {} applied {partition} up to {end_offset}",
                node.id
            ),
            || (high_watermark(node, partition)? >= end_offset).then_some(()),
        );
    }
    assert_all_running(quorum, when);
}

/// The defect's story: confluent-kafka produces with each codec, acks=all, to a snapshot topic
/// (and is refused at `__cluster_metadata`); every voter applies the batches and keeps
/// running; the records read back (librdkafka's consumer, the Rust consumer's full state, the
/// stored batches); after kill -9 of every node, all start again, apply the committed
/// compressed batches again from their logs, and serve the same state.
#[test]
fn compressed_batches_from_a_kafka_client_are_applied_and_survive_a_full_restart() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[("cleanup.policy", "snapshot")]);

    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "compressed_produce.py",
        TOPIC,
        Duration::from_secs(180),
        |_, _| None,
    );
    assert_compressed_records_served(&mut quorum, "after the compressed produce");

    // The committed compressed batches are in every log and no snapshot covers them (far
    // below the default thresholds), so every node applies them again at start.
    for node in 1..=3 {
        let partition = format!("{TOPIC}-0");
        let dir = quorum.data_dir(node).join(&partition);
        assert_eq!(checkpoints(&dir), [] as [u64; 0], "node {node} {partition}");
    }
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    assert_compressed_records_served(&mut quorum, "after kill -9 and restart of every node");
}

/// One uncompressed record `key` → `value`.
fn batch(key: &str, value: &str) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    builder.build().into_bytes()
}

/// `batch` with codec `codec` in its attributes and the CRC made to fit: the records section
/// is left as it is (uncompressed bytes, so garbage to every codec).
fn with_codec(batch: &Bytes, codec: u8) -> Bytes {
    let mut bytes = batch.to_vec();
    bytes[22] = (bytes[22] & !0x07) | codec;
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(bytes.len() > RECORD_BATCH_OVERHEAD);
    Bytes::from(bytes)
}

/// Produce refuses what no reader could read, before anything is appended: codec id 5 with
/// UNSUPPORTED_COMPRESSION_TYPE, a gzip batch whose compressed bytes are garbage (CRC valid)
/// with CORRUPT_MESSAGE; the good batches on either side get consecutive offsets, the
/// partition holds only them, and no voter exits. At `__cluster_metadata` every one of them,
/// good or not, is INVALID_TOPIC_EXCEPTION: only the node writes there.
#[test]
fn unreadable_compressed_batches_are_refused_and_nothing_is_appended() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[("cleanup.policy", "snapshot")]);

    let (mut client, _) = eventually(Duration::from_secs(20), "a leader of the topic", || {
        quorum.partition_leader(TOPIC)
    });
    let (code, before) = quorum::produce_to(&mut client, TOPIC, 0, batch("client/good", "before"));
    assert_eq!(code, 0, "the good batch before");
    let unknown_codec = with_codec(&batch("client/bad", "codec 5"), 5);
    let (code, _) = quorum::produce_to(&mut client, TOPIC, 0, unknown_codec.clone());
    assert_eq!(code, UNSUPPORTED_COMPRESSION_TYPE, "codec 5");
    let bad_gzip = with_codec(&batch("client/bad", "not gzip"), 1);
    let (code, _) = quorum::produce_to(&mut client, TOPIC, 0, bad_gzip.clone());
    assert_eq!(code, CORRUPT_MESSAGE, "garbage gzip");
    let (code, after) = quorum::produce_to(&mut client, TOPIC, 0, batch("client/good", "after"));
    assert_eq!(
        (code, after),
        (0, before + 1),
        "nothing appended between the good batches"
    );
    let values = read_partition_values(&mut client, TOPIC).unwrap();
    let clients: Vec<&[u8]> = values
        .iter()
        .map(Vec::as_slice)
        .filter(|v| [&b"before"[..], b"after", b"codec 5", b"not gzip"].contains(v))
        .collect();
    assert_eq!(clients, [&b"before"[..], b"after"]);
    assert_every_node_applied(&mut quorum, &format!("{TOPIC}-0"), after + 1, TOPIC);

    // Internal state is written only by the node: good or not, refused before it is read.
    let (mut metadata, _) = eventually(Duration::from_secs(20), "a metadata leader", || {
        quorum.partition_leader(METADATA)
    });
    for records in [batch("client/good", "before"), unknown_codec, bad_gzip] {
        let (code, _) = quorum::produce_to(&mut metadata, METADATA, 0, records);
        assert_eq!(code, INVALID_TOPIC_EXCEPTION, "{METADATA}");
    }
    assert_state(
        &quorum,
        &BTreeMap::from([(Bytes::from("client/good"), Bytes::from("after"))]),
        "after the refusals",
    );
}
