//! Topics with `cleanup.policy=snapshot` on real `ringlog serve` processes (issues #4 and #6):
//! every partition of such a topic runs the key-value state machine with KIP-630 snapshots, its
//! log start moves behind them, a wiped follower catches up through FetchSnapshot, and the Rust
//! consumer reads the full state (snapshot through FetchSnapshot, then the log after it).
//!
//! The state is checked against a model map (Kafka's compacted-topic semantics: a key's latest
//! value, a null value deletes) built from the acknowledged records.
//!
//! Free ports on 127.0.0.1, data in a temp folder, every child killed on drop; waits poll a
//! condition up to a deadline, never a fixed time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::consumer::{Consumer, ConsumerConfig, ConsumerError, OffsetReset};
use ringlog_net::clients::producer::{Producer, ProducerConfig};
use ringlog_net::clients::transport::{Connections, fetch_metadata};

mod quorum;
use quorum::{Quorum, RINGLOG, checkpoints, eventually, segment_bases};

const TOPIC: &str = "kv";

/// Snapshots every 200 records (and any byte count), 64 KiB segments so whole segments go
/// behind the log start, and the leader moves its log start within a second of a snapshot
/// even while a replica is down.
const SNAPSHOT_CONFIG: &str = "controller.snapshot.minimum.records=200\n\
                               metadata.log.max.record.bytes.between.snapshots=1\n\
                               metadata.log.segment.bytes=65536\n\
                               max.replication.lag.ms=1000";

type Model = BTreeMap<Bytes, Bytes>;

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

/// The leader of `kv`-0 as Metadata names it.
fn topic_leader(quorum: &Quorum) -> Option<i32> {
    let mut connections = Connections::new(&quorum.bootstrap(), Duration::from_millis(500));
    let metadata = fetch_metadata(&mut connections, &[TOPIC.to_string()]).ok()?;
    metadata.partitions.get(&tp())?.leader_id
}

/// Produces `count` keyed records (acks=all) over 40 keys, every 7th a tombstone, values
/// long enough to fill several 64 KiB segments; the model follows each acknowledged record.
fn produce(quorum: &Quorum, model: &mut Model, round: &str, count: usize) -> i64 {
    let mut producer = Producer::connect(&quorum.bootstrap(), ProducerConfig::default());
    let mut sent = Vec::new();
    for i in 0..count {
        let key = Bytes::from(format!("key-{:02}", (i * 7 + round.len()) % 40));
        let value = (i % 7 != 6).then(|| Bytes::from(format!("{round}-{i}-{}", "v".repeat(150))));
        producer.send(&tp(), Some(&key), value.as_deref()).unwrap();
        sent.push((key, value));
    }
    producer.flush().unwrap();
    let acknowledged = producer.take_acknowledged();
    assert_eq!(
        acknowledged.iter().filter(|m| m.offset >= 0).count(),
        count,
        "every record acknowledged"
    );
    for (key, value) in sent {
        match value {
            Some(value) => model.insert(key, value),
            None => model.remove(&key),
        };
    }
    acknowledged.iter().map(|m| m.offset + 1).max().unwrap()
}

/// The base offset of the partition's first segment file.
fn first_segment_base(partition_dir: &Path) -> Option<u64> {
    segment_bases(partition_dir).first().copied()
}

fn partition_dir(quorum: &Quorum, id: i32) -> PathBuf {
    quorum.data_dir(id).join(format!("{TOPIC}-0"))
}

/// The full state through the Rust consumer, once it reaches `acknowledged_end` (a new leader
/// shows records the old one acknowledged only once it committed one of its own epoch); checks
/// it against the model and that it started from a snapshot. Returns the consumer, positioned
/// after the state.
fn assert_full_state(
    quorum: &Quorum,
    model: &Model,
    acknowledged_end: i64,
    when: &str,
) -> (Consumer, i64) {
    let (consumer, state) = eventually(
        Duration::from_secs(30),
        &format!("{when}: a full state up to offset {acknowledged_end}"),
        || {
            let mut consumer = Consumer::connect(&quorum.bootstrap(), ConsumerConfig::default());
            let state = consumer
                .read_full_state(&tp(), Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("{when}: full-state read: {e}"));
            (state.position.offset >= acknowledged_end).then_some((consumer, state))
        },
    );
    let snapshot_id = state
        .snapshot_id
        .unwrap_or_else(|| panic!("{when}: the read started from a snapshot"));
    assert!(snapshot_id.end_offset > 0, "{when}: {snapshot_id:?}");
    assert!(state.position.offset >= snapshot_id.end_offset);
    if state.entries != *model {
        let missing: Vec<_> = model
            .iter()
            .filter(|(k, v)| state.entries.get(*k) != Some(v))
            .map(|(k, v)| (k, v.slice(..v.len().min(12))))
            .collect();
        let extra: Vec<_> = state
            .entries
            .iter()
            .filter(|(k, v)| model.get(*k) != Some(v))
            .map(|(k, v)| (k, v.slice(..v.len().min(12))))
            .collect();
        panic!(
            "{when}: the state ({} keys, {snapshot_id:?}, position {:?}) differs from the model ({} keys): missing or different {missing:?}, unexpected {extra:?}",
            state.entries.len(),
            state.position,
            model.len()
        );
    }
    (consumer, state.position.offset)
}

/// `ringlog consume --full-state` prints the state as key<TAB>value lines in key order.
fn assert_cli_full_state(quorum: &Quorum, model: &Model) {
    let output = Command::new(RINGLOG)
        .args([
            "consume",
            "--bootstrap",
            &quorum.bootstrap(),
            "--topic",
            TOPIC,
        ])
        .arg("--full-state")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: String = model
        .iter()
        .map(|(k, v)| {
            format!(
                "{}\t{}\n",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )
        })
        .collect();
    assert_eq!(String::from_utf8(output.stdout).unwrap(), expected);
}

#[test]
fn snapshot_topic_full_state_survives_a_wiped_follower_a_leader_kill_and_a_full_restart() {
    let mut quorum = Quorum::format_with(3, SNAPSHOT_CONFIG);
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[("cleanup.policy", "snapshot")]);
    let mut model = Model::new();

    // Round 1: past the snapshot threshold several times, with overwrites and deletes.
    let acknowledged_end = produce(&quorum, &mut model, "one", 1200);
    let leader = eventually(Duration::from_secs(20), "a kv-0 leader", || {
        topic_leader(&quorum)
    });
    // KIP-630: a snapshot is taken and the log start moves to it; the log behind it goes.
    eventually(
        Duration::from_secs(30),
        "a checkpoint and a trimmed log on the leader",
        || {
            let dir = partition_dir(&quorum, leader);
            let latest = *checkpoints(&dir).last()?;
            (first_segment_base(&dir)? > 0 && latest > 0).then_some(())
        },
    );
    // A plain consumer from offset 0 finds the beginning gone (auto.offset.reset=none).
    eventually(
        Duration::from_secs(30),
        "OFFSET_OUT_OF_RANGE at offset 0",
        || {
            let mut consumer = Consumer::connect(
                &quorum.bootstrap(),
                ConsumerConfig {
                    auto_offset_reset: OffsetReset::None,
                    ..ConsumerConfig::default()
                },
            );
            consumer.assign([tp()]);
            consumer.seek(&tp(), 0).unwrap();
            match consumer.poll(Duration::from_millis(500)) {
                Err(ConsumerError::OffsetOutOfRange { offset: 0, .. }) => Some(()),
                _ => None,
            }
        },
    );
    assert_full_state(&quorum, &model, acknowledged_end, "after round one");
    assert_cli_full_state(&quorum, &model);

    // A follower loses its disk: it catches up through FetchSnapshot, its log starting at the
    // snapshot's end offset.
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let other = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    quorum.kill(follower);
    quorum.wipe(follower);
    quorum.start_node(follower);
    eventually(
        Duration::from_secs(30),
        "the wiped follower installs a snapshot",
        || {
            let dir = partition_dir(&quorum, follower);
            let installed = checkpoints(&dir);
            let &[end_offset] = installed.as_slice() else {
                return None;
            };
            (first_segment_base(&dir)? == end_offset).then_some(())
        },
    );

    // Round 2 with the other follower down: the wiped follower is the only replica besides the
    // leader with these records, so once the leader dies it must become leader from its own
    // (fetched) snapshot and log.
    quorum.kill(other);
    let acknowledged_end = produce(&quorum, &mut model, "two", 600);
    quorum.kill(leader);
    quorum.start_node(other);
    eventually(
        Duration::from_secs(30),
        "the rebuilt follower leads kv-0",
        || (topic_leader(&quorum)? == follower).then_some(()),
    );
    assert_full_state(
        &quorum,
        &model,
        acknowledged_end,
        "led by the rebuilt follower",
    );

    // Every node restarts: the state comes back from snapshots plus logs.
    quorum.kill_all();
    quorum.start_all();
    let (mut consumer, position) =
        assert_full_state(&quorum, &model, acknowledged_end, "after a full restart");

    // The consumer goes on from the position the read left it at.
    let mut producer = Producer::connect(&quorum.bootstrap(), ProducerConfig::default());
    producer
        .send(&tp(), Some(b"after"), Some(b"restart"))
        .unwrap();
    producer.flush().unwrap();
    let records = eventually(Duration::from_secs(20), "the next record", || {
        let records = consumer.poll(Duration::from_millis(500)).unwrap();
        (!records.is_empty()).then_some(records)
    });
    assert_eq!(records[0].offset, position);
    assert_eq!(records[0].key.as_deref(), Some(&b"after"[..]));
}
