//! A disk that fails with EIO under a real `ringlog serve` (issue 17; docs/node.md, "Storage
//! faults"): three voters, node 3's data folder on a FUSE filesystem (tests/disk_errors/eiofs.c,
//! built by this test) that answers EIO to every write, fdatasync and fallocate under one
//! partition folder once a trigger file exists. Two topics, `eio-a` and `eio-b`, each with a
//! replica on every voter, take acks=all records; then the disk fails for `eio-a-0` on node 3.
//!
//! Issue 17's table: that one partition goes offline on node 3 (Metadata lists node 3 in
//! `offline_replicas`, `ringlog_offline_partitions` counts it), node 3's process keeps running,
//! nodes 1 and 2 keep a leader of `eio-a` and keep committing, `eio-b` keeps committing with all
//! three, and no acknowledged record of either topic is lost. Once the disk is healthy again,
//! node 3 restarted recovers `eio-a` from its disk and catches up.
//!
//! The node runs its default I/O backend (io_uring where the kernel allows it; the test fails
//! if node 3 logs that it fell back): io_uring's writes and fdatasyncs reach the FUSE daemon
//! (the kernel runs them in its io-wq workers), and the kernel's FUSE client takes O_DIRECT
//! opens, so the engine's O_DIRECT files work there unchanged.
//!
//! The test runs as root (it mounts a FUSE filesystem) with gcc, pkg-config, libfuse3-dev and
//! fuse3 installed (scripts/test-all.sh installs them); it fails and says why otherwise.

#[path = "disk_errors/eiofs.rs"]
mod eiofs;
mod quorum;

use std::path::Path;
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::producer::{Producer, ProducerConfig};
use ringlog_net::protocol::{Request, Response, metadata_request};

use eiofs::FaultyDisk;
use quorum::{Quorum, agreed_leader, eventually, read_partition_values, scrape_metrics, serial};

/// The topic whose partition folder fails on node 3.
const FAULTY: &str = "eio-a";
/// The topic on the same disk that stays healthy.
const HEALTHY: &str = "eio-b";
/// The node whose data folder is on the faulty filesystem.
const FAULTY_NODE: i32 = 3;
/// Records per topic in each phase.
const PHASE_RECORDS: usize = 20;

/// Produces `PHASE_RECORDS` records to each topic, alternating, with ringlog's producer
/// (acks=all, each record sent on its own and acknowledged before the next). A leader going
/// offline answers KAFKA_STORAGE_ERROR, which the producer retries at the leader Metadata names
/// next, as Kafka's does (KafkaStorageException is an InvalidMetadataException); a record so
/// answered may still be committed, so the log may hold it twice.
fn produce_phase(quorum: &Quorum, a: &mut Vec<String>, b: &mut Vec<String>, phase: &str) {
    let mut producer = Producer::connect(
        &quorum.bootstrap(),
        ProducerConfig {
            acks: -1,
            linger_ms: 0,
            retries: 100,
            retry_backoff_ms: 100,
            request_timeout_ms: 5_000,
            ..ProducerConfig::default()
        },
    );
    for n in 0..PHASE_RECORDS {
        for (topic, acknowledged) in [(FAULTY, &mut *a), (HEALTHY, &mut *b)] {
            let value = format!("{topic}-{phase}-{n}");
            let partition = TopicPartition::new(topic, 0);
            producer
                .send(&partition, None, Some(value.as_bytes()))
                .and_then(|()| producer.flush())
                .unwrap_or_else(|e| panic!("producing {value}: {e}\n{}", quorum.dump_logs()));
            assert_eq!(
                producer.take_acknowledged().len(),
                1,
                "{value} acknowledged"
            );
            acknowledged.push(value);
        }
    }
}

/// `topic`-0's Metadata entry as one node answers it.
struct PartitionView {
    leader: i32,
    in_sync_replicas: Vec<i32>,
    offline_replicas: Vec<i32>,
}

/// `topic`-0's Metadata entry at node `address`.
fn metadata_at(address: &str, topic: &str) -> Option<PartitionView> {
    let mut client = Client::connect(address, Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let partition = m.topics.first()?.partitions.first()?;
    Some(PartitionView {
        leader: partition.leader_id,
        in_sync_replicas: partition.isr_nodes.clone(),
        offline_replicas: partition.offline_replicas.clone(),
    })
}

/// Node `replica`'s log end offset of `topic`-0 and the high-watermark, as the leader that
/// Metadata names reports them in DescribeQuorum.
fn replica_progress(quorum: &Quorum, topic: &str, replica: i32) -> Option<(i64, i64)> {
    let (mut leader, _) = quorum.partition_leader(topic)?;
    let view = leader.describe_quorum_of(topic, 0).ok()?;
    let state = view
        .partition
        .current_voters
        .iter()
        .find(|v| v.replica_id == replica)?;
    Some((state.log_end_offset, view.partition.high_watermark))
}

/// Whether node `replica` holds every committed record of `topic`-0.
fn caught_up(quorum: &Quorum, topic: &str, replica: i32) -> Option<()> {
    let (log_end_offset, high_watermark) = replica_progress(quorum, topic, replica)?;
    (high_watermark > 0 && log_end_offset >= high_watermark).then_some(())
}

/// Every acknowledged value of `topic`, read back from its leader: each one there, in the
/// order acknowledged (an unacknowledged attempt may sit between them).
fn assert_all_acknowledged_readable(quorum: &Quorum, topic: &str, acknowledged: &[String]) {
    let read: Vec<String> = eventually(
        Duration::from_secs(30),
        &format!("{topic} read back from its leader"),
        || {
            let (mut client, _) = quorum.partition_leader(topic)?;
            read_partition_values(&mut client, topic).ok()
        },
    )
    .into_iter()
    .map(|v| String::from_utf8(v).unwrap())
    .collect();
    let mut rest = read.iter();
    for value in acknowledged {
        assert!(
            rest.any(|r| r == value),
            "acknowledged {value} of {topic} is missing or out of order: read {read:?}"
        );
    }
}

/// Node 3's replica of `eio-a` when its disk fails.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    Follower,
    Leader,
}

/// A follower's replica fails on a fetched batch's write or fdatasync; its leader goes on.
#[test]
fn eio_under_a_follower_takes_only_that_replica_offline_and_a_restart_recovers_it() {
    eio_takes_one_replica_offline(Role::Follower);
}

/// The leader's replica fails on its own flush: it stops leading (its core is removed) and the
/// other two elect, with no acknowledged record lost.
#[test]
fn eio_under_a_leader_takes_only_that_replica_offline_and_the_others_elect() {
    eio_takes_one_replica_offline(Role::Leader);
}

/// Kills and restarts `eio-a`'s leader until node 3 has `role` in it (KIP-595 elections are
/// randomised: some node wins each time, and node 3 in time).
fn give_node_3_the_role(quorum: &mut Quorum, role: Role) -> i32 {
    eventually(
        Duration::from_secs(90),
        &format!("node 3 as {role:?} of {FAULTY}"),
        || {
            let (leader, _) = quorum.wait_for_leader_of(FAULTY, Duration::from_secs(20));
            if (leader == FAULTY_NODE) == (role == Role::Leader) {
                return Some(leader);
            }
            quorum.kill(leader);
            quorum.start_node(leader);
            None
        },
    )
}

fn eio_takes_one_replica_offline(role: Role) {
    let _serial = serial();
    let mut quorum = Quorum::format(3);
    let disk = FaultyDisk::mount_over(
        &quorum.data_dir(FAULTY_NODE),
        &format!("{FAULTY}-0"),
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/disk_errors/eiofs.c"
        )),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    quorum.start_all();
    quorum.create_topic(FAULTY, 1, &[]);
    quorum.create_topic(HEALTHY, 1, &[]);
    quorum.wait_for_leader_of(FAULTY, Duration::from_secs(20));
    quorum.wait_for_leader_of(HEALTHY, Duration::from_secs(20));
    let mut acknowledged_a: Vec<String> = Vec::new();
    let mut acknowledged_b: Vec<String> = Vec::new();
    produce_phase(&quorum, &mut acknowledged_a, &mut acknowledged_b, "healthy");
    eventually(Duration::from_secs(20), "node 3 holds both topics", || {
        caught_up(&quorum, FAULTY, FAULTY_NODE)?;
        caught_up(&quorum, HEALTHY, FAULTY_NODE)
    });
    let leader_before = give_node_3_the_role(&mut quorum, role);
    eventually(Duration::from_secs(20), "every replica caught up", || {
        [1, 2, 3].iter().try_for_each(|id| {
            caught_up(&quorum, FAULTY, *id)?;
            caught_up(&quorum, HEALTHY, *id)
        })
    });

    // The disk fails under eio-a-0 on node 3 only. Every record of eio-a now reaches node 3's
    // write (as leader or follower) and fails there.
    disk.fail();
    produce_phase(&quorum, &mut acknowledged_a, &mut acknowledged_b, "failing");
    let refusals = disk.refusals();
    assert!(
        !refusals.is_empty(),
        "node 3 met no EIO: eiofs refused nothing\n{}",
        quorum.dump_logs()
    );
    assert!(
        refusals.iter().all(|r| r.contains(&format!("/{FAULTY}-0"))),
        "only eio-a-0 fails: {refusals:?}"
    );

    // Issue 17: that one replica is offline on node 3, and node 3 says so: not leading, not in
    // sync (node 3 learns the new leader from the others, remote_leaders.rs).
    eventually(
        Duration::from_secs(20),
        "node 3 reports eio-a-0 offline, led by another node",
        || {
            let view = metadata_at(&quorum.address(FAULTY_NODE), FAULTY)?;
            (view.offline_replicas == [FAULTY_NODE]
                && view.leader != FAULTY_NODE
                && !view.in_sync_replicas.contains(&FAULTY_NODE))
            .then_some(())
        },
    );
    eventually(
        Duration::from_secs(10),
        "ringlog_offline_partitions counts eio-a-0 only",
        || {
            let metrics = scrape_metrics(quorum.node(FAULTY_NODE).metrics_port)?;
            (metrics.get("ringlog_offline_partitions") == Some(&1.0)).then_some(())
        },
    );
    let healthy =
        metadata_at(&quorum.address(FAULTY_NODE), HEALTHY).expect("node 3 answers Metadata");
    assert!(
        healthy.offline_replicas.is_empty(),
        "eio-b-0 is not offline: {:?}",
        healthy.offline_replicas
    );
    assert!(
        healthy.in_sync_replicas.contains(&FAULTY_NODE),
        "node 3 follows eio-b: {:?}",
        healthy.in_sync_replicas
    );
    assert!(quorum.exited().is_empty(), "node 3's process keeps running");

    // Nodes 1 and 2 keep a leader of eio-a and commit without node 3; eio-b commits with all
    // three (node 3's replica of eio-b keeps up).
    let survivors = [quorum.address(1), quorum.address(2)];
    let (leader_after, _) = eventually(Duration::from_secs(20), "eio-a led by 1 or 2", || {
        agreed_leader(&survivors, FAULTY, 0).filter(|(leader, _)| *leader != FAULTY_NODE)
    });
    produce_phase(&quorum, &mut acknowledged_a, &mut acknowledged_b, "offline");
    eventually(
        Duration::from_secs(20),
        "node 3 keeps up with eio-b",
        || caught_up(&quorum, HEALTHY, FAULTY_NODE),
    );
    let (log_end_offset, high_watermark) = eventually(
        Duration::from_secs(10),
        "eio-a's leader reports its replicas",
        || replica_progress(&quorum, FAULTY, FAULTY_NODE),
    );
    assert!(
        log_end_offset < high_watermark,
        "node 3's offline eio-a-0 took no more records: {log_end_offset} of {high_watermark}"
    );
    assert_all_acknowledged_readable(&quorum, FAULTY, &acknowledged_a);
    assert_all_acknowledged_readable(&quorum, HEALTHY, &acknowledged_b);
    assert!(quorum.exited().is_empty(), "node 3's process keeps running");
    eprintln!(
        "eio-a-0 was led by {leader_before} when the disk failed, then by {leader_after}; \
         {} refused calls",
        refusals.len()
    );

    // The disk heals; offline lasts until a restart, which recovers eio-a-0 from node 3's disk
    // and lets it catch up.
    disk.heal();
    quorum.kill(FAULTY_NODE);
    quorum.start_node(FAULTY_NODE);
    eventually(
        Duration::from_secs(30),
        "node 3 serves eio-a-0 again, caught up",
        || {
            let view = metadata_at(&quorum.address(FAULTY_NODE), FAULTY)?;
            (view.offline_replicas.is_empty() && view.in_sync_replicas.contains(&FAULTY_NODE))
                .then_some(())?;
            caught_up(&quorum, FAULTY, FAULTY_NODE)
        },
    );
    produce_phase(
        &quorum,
        &mut acknowledged_a,
        &mut acknowledged_b,
        "recovered",
    );
    eventually(
        Duration::from_secs(20),
        "node 3 follows both topics",
        || {
            caught_up(&quorum, FAULTY, FAULTY_NODE)?;
            caught_up(&quorum, HEALTHY, FAULTY_NODE)
        },
    );
    assert_all_acknowledged_readable(&quorum, FAULTY, &acknowledged_a);
    assert_all_acknowledged_readable(&quorum, HEALTHY, &acknowledged_b);
    let metrics = scrape_metrics(quorum.node(FAULTY_NODE).metrics_port).expect("metrics answer");
    assert_eq!(metrics.get("ringlog_offline_partitions"), Some(&0.0));
    assert!(quorum.exited().is_empty(), "every node runs");

    // The node used io_uring on the FUSE filesystem (no fallback to plain syscalls).
    let log = std::fs::read_to_string(&quorum.node(FAULTY_NODE).log).unwrap();
    assert!(
        !log.contains("io_uring unavailable"),
        "node 3 ran the io_uring backend"
    );
    assert!(
        !log.contains("refuses O_DIRECT"),
        "node 3 opened its segments O_DIRECT through FUSE"
    );
    quorum.kill_all();
}
