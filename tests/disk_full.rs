//! A full disk under a real `ringlog serve` (issue 17; docs/node.md, "Storage faults"): one
//! voter whose data folder is on a 64 MiB tmpfs mounted by the test. A producer fills it until
//! Produce answers KAFKA_STORAGE_ERROR; reads and Metadata still work and the process stays up,
//! also after a kill -9 and a restart on the full disk; then space returns (the test deletes a filler file it wrote into the same tmpfs), Produce
//! succeeds again, and every acknowledged record is readable, in order.
//!
//! The test runs as root (it mounts); if the mount fails the test fails and says why.

mod quorum;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, metadata_request};

use quorum::{Quorum, eventually, produce_to, read_partition_values, scrape_metrics, serial};

const TOPIC: &str = "filling";
const KAFKA_STORAGE_ERROR: i16 = 56;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const LEADER_NOT_AVAILABLE: i16 = 5;
const TMPFS_SIZE: &str = "64m";
/// Freed once the disk is full: room for a few more segments of 1 MiB.
const FILLER_BYTES: usize = 8 << 20;
/// One record of this size per batch: the tmpfs fills in about a thousand produces.
const VALUE_BYTES: usize = 64 << 10;

/// A tmpfs of `TMPFS_SIZE` mounted on a fresh folder, unmounted on drop (after the node that
/// uses it was killed: fields drop after the test's quorum, which is declared later).
struct Tmpfs {
    _parent: tempfile::TempDir,
    mount: PathBuf,
}

impl Tmpfs {
    fn mount() -> Tmpfs {
        let parent = tempfile::tempdir().unwrap();
        let mount = parent.path().join("disk");
        std::fs::create_dir(&mount).unwrap();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"])
            .arg(&mount)
            .output()
            .expect("running mount(8)");
        assert!(
            output.status.success(),
            "this test mounts a {TMPFS_SIZE} tmpfs for the node's data folder and must run as \
             root: `mount -t tmpfs -o size={TMPFS_SIZE} tmpfs {}` failed: {}",
            mount.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        Tmpfs {
            _parent: parent,
            mount,
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

fn value(n: usize) -> Vec<u8> {
    let mut value = format!("record-{n:06}-").into_bytes();
    value.resize(VALUE_BYTES, b'a' + (n % 26) as u8);
    value
}

fn batch(value: &[u8]) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(1_700_000_000_000, None, Some(value), &[]);
    builder.build().into_bytes()
}

/// The Metadata entry of `TOPIC`-0 at `client`: (error code, leader).
fn metadata_of(client: &mut Client) -> (i16, i32) {
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(TOPIC.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Response::Metadata(m) = client.request(&request, 12).expect("Metadata answers") else {
        panic!("not a Metadata answer")
    };
    let partition = &m.topics[0].partitions[0];
    (partition.error_code, partition.leader_id)
}

/// The leader of `TOPIC`-0 that the node at `address` names in Metadata, if it answers.
fn leader_at(address: &str) -> Option<i32> {
    let mut client = Client::connect(address, Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(TOPIC.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let partition = m.topics.first()?.partitions.first()?;
    (partition.error_code == 0).then_some(partition.leader_id)
}

/// Whether `acknowledged` appears in `read` in the same order (records answered with an error
/// while the disk was full may have become durable later and sit between them).
fn is_subsequence(acknowledged: &[Vec<u8>], read: &[Vec<u8>]) -> bool {
    let mut read = read.iter();
    acknowledged.iter().all(|a| read.any(|r| r == a))
}

fn used_bytes(path: &Path) -> String {
    let output = Command::new("df").arg("-k").arg(path).output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_full_disk_refuses_produce_keeps_serving_and_resumes_when_space_returns() {
    let _serial = serial();
    let disk = Tmpfs::mount();
    let data = disk.mount.join("node-1");
    let mut quorum = Quorum::format_with(1, &format!("metadata.log.dir={}", data.display()));
    quorum.start_all();
    quorum.create_topic(TOPIC, 1, &[]);
    quorum.wait_for_leader_of(TOPIC, Duration::from_secs(20));
    let filler = disk.mount.join("filler");
    std::fs::write(&filler, vec![0x5a; FILLER_BYTES]).expect("the filler fits the empty tmpfs");

    let mut client = Client::connect(&quorum.address(1), Duration::from_secs(15)).unwrap();
    let mut acknowledged: Vec<Vec<u8>> = Vec::new();
    let mut next = 0;
    let mut refused = false;
    // 64 MiB at 64 KiB a record: the disk is full well before 2000 produces.
    for _ in 0..2000 {
        let value = value(next);
        next += 1;
        let (code, _) = produce_to(&mut client, TOPIC, 0, batch(&value));
        match code {
            0 => acknowledged.push(value),
            KAFKA_STORAGE_ERROR => {
                refused = true;
                break;
            }
            other => panic!(
                "Produce answered {other} after {} records\n{}",
                acknowledged.len(),
                quorum.dump_logs()
            ),
        }
    }
    assert!(
        refused,
        "the tmpfs never filled: {}\n{}",
        used_bytes(&disk.mount),
        quorum.dump_logs()
    );
    assert!(
        acknowledged.len() > 100,
        "the disk filled after only {} records",
        acknowledged.len()
    );

    // Full: Produce is refused at once (not left to time out), reads and Metadata work, the
    // process is up, and the metrics say why.
    let (code, _) = produce_to(&mut client, TOPIC, 0, batch(&value(next)));
    next += 1;
    assert_eq!(code, KAFKA_STORAGE_ERROR, "still full");
    assert_eq!(
        metadata_of(&mut client),
        (0, 1),
        "Metadata names the leader"
    );
    let read = read_partition_values(&mut client, TOPIC).expect("reads work on a full disk");
    assert_eq!(
        read.len(),
        acknowledged.len(),
        "exactly the acknowledged records are committed"
    );
    assert!(read == acknowledged, "the acknowledged records, in order");
    let metrics = scrape_metrics(quorum.node(1).metrics_port).expect("the metrics answer");
    assert!(
        metrics
            .get("ringlog_partitions_waiting_for_space")
            .is_some_and(|count| *count >= 1.0),
        "ringlog_partitions_waiting_for_space counts the full partition: {:?}",
        metrics.get("ringlog_partitions_waiting_for_space")
    );
    assert!(quorum.exited().is_empty(), "the node is still running");

    // kill -9 and a restart on the full disk: recovery opens every log (what it would rewrite
    // waits for space), and the node serves: it elects itself again (the quorum-state fits in
    // what was reserved or freed) or its vote waits for space (the metric says so). Either way
    // the process runs.
    drop(client);
    quorum.kill(1);
    quorum.start_node(1);
    eventually(
        Duration::from_secs(30),
        "the restarted node leads again or waits for space",
        || {
            let waiting = scrape_metrics(quorum.node(1).metrics_port)
                .and_then(|m| m.get("ringlog_partitions_waiting_for_space").copied());
            let leader = leader_at(&quorum.address(1));
            (leader == Some(1) || waiting.is_some_and(|n| n >= 1.0)).then_some(())
        },
    );
    assert!(
        quorum.exited().is_empty(),
        "the node restarted on a full disk is running\n{}",
        quorum.dump_logs()
    );
    // Reads wait here: a leader learns the high-watermark only once a record of its own epoch
    // (its LeaderChange) is committed (KIP-595), and that record waits for space like any
    // other. They are checked below, once space returned.

    // Space returns: the node notices by itself (a retry on its backoff), elects, and Produce
    // succeeds.
    std::fs::remove_file(&filler).unwrap();
    let mut client = Client::connect(&quorum.address(1), Duration::from_secs(15)).unwrap();
    eventually(Duration::from_secs(30), "Produce succeeds again", || {
        let value = value(next);
        next += 1;
        match produce_to(&mut client, TOPIC, 0, batch(&value)) {
            (0, _) => {
                acknowledged.push(value);
                Some(())
            }
            // Still full, or the election after the restart not done yet.
            (KAFKA_STORAGE_ERROR | NOT_LEADER_OR_FOLLOWER | LEADER_NOT_AVAILABLE, _) => None,
            (other, _) => panic!("Produce answered {other} after space returned"),
        }
    });
    for _ in 0..10 {
        let value = value(next);
        next += 1;
        let (code, _) = produce_to(&mut client, TOPIC, 0, batch(&value));
        assert_eq!(code, 0, "Produce after space returned");
        acknowledged.push(value);
    }
    let read = read_partition_values(&mut client, TOPIC).expect("reads after space returned");
    assert!(
        is_subsequence(&acknowledged, &read),
        "every acknowledged record is readable, in order: {} acknowledged, {} read",
        acknowledged.len(),
        read.len()
    );
    assert!(quorum.exited().is_empty(), "the node never exited");
    quorum.kill_all();
}

/// A node whose log cannot be written keeps serving: logging is best effort. `ringlog dev`
/// keeps each node's log in its data folder, so a full disk fails the log's writes too. Until
/// 2026-12-07 the first log line that failed made the logger report it with `eprintln!`, which
/// panicked ("failed printing to stderr"): every voter of a `dev` quorum whose disk filled
/// exited with 101, and `dev` restarted each into the same panic. Here each node's stderr is
/// /dev/full, which fails every write with ENOSPC.
#[test]
fn nodes_whose_logs_cannot_be_written_keep_serving() {
    let _serial = serial();
    let mut quorum = quorum::Quorum::format(3);
    for node in &mut quorum.nodes {
        node.log = PathBuf::from("/dev/full");
    }
    quorum.start_all();
    quorum.create_topic(TOPIC, 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(30));
    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    let values: Vec<Vec<u8>> = (0..20).map(value).collect();
    for value in &values {
        let (error, _) = produce_to(&mut client, TOPIC, 0, batch(value));
        assert_eq!(error, 0, "acks=all produce to a node that cannot log");
    }
    assert_eq!(read_partition_values(&mut client, TOPIC).unwrap(), values);
    assert_eq!(quorum.exited(), vec![], "a node exited");
}
