//! A storage fault stays in its partition (issue 17): the host over the in-memory disk with two
//! partitions, one of which meets ENOSPC or EIO. A full disk makes that partition's flush wait
//! (nothing acknowledged that is not durable) until `retry_flushes` finds space again; EIO takes
//! that partition offline. Neither stops the host, and the other partition keeps committing.

use std::path::PathBuf;

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::MemoryIo;
use ringlog_engine::io::memory::{FaultKind, FaultTrigger};
use ringlog_engine::log::LogConfig;
use ringlog_replication::QuorumConfig;
use ringlog_replication::host::{Host, HostConfig, Output, PartitionSpec};
use ringlog_replication::state_machine::SnapshotPolicyConfig;

const FULL: u32 = 0;
const OTHER: u32 = 1;

fn dir(partition: u32) -> PathBuf {
    PathBuf::from(format!("/data/topic-{partition}"))
}

fn segment_path(partition: u32) -> PathBuf {
    dir(partition).join("00000000000000000000.log")
}

fn open(io: MemoryIo) -> Host<MemoryIo> {
    let quorum = QuorumConfig::new(1, &[1]).expect("one voter");
    let config = HostConfig::new(
        "faults".into(),
        vec![1],
        SnapshotPolicyConfig::default(),
        1 << 20,
    );
    let specs = [FULL, OTHER]
        .into_iter()
        .map(|id| PartitionSpec {
            id,
            dir: dir(id),
            log_config: LogConfig {
                segment_size_bytes: 1 << 20,
                preallocate_ahead_bytes: 8 << 10,
                ..LogConfig::default()
            },
            keeps_snapshots: false,
        })
        .collect();
    Host::open(io, config, &quorum, specs, 7, 0).expect("open")
}

fn batch(value: u64) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, None, Some(&[value as u8; 3000]), &[]);
    builder.build().into_bytes()
}

/// Pumps until nothing is left to do; returns each partition's highest announced high-watermark.
fn settle(host: &mut Host<MemoryIo>, now: u64, seen: &mut [u64; 2]) {
    for _ in 0..64 {
        let progressed = host
            .pump(now)
            .expect("a storage fault never fails the host");
        let outputs = host.take_output();
        for output in &outputs {
            if let Output::HighWatermark {
                partition,
                high_watermark,
            } = output
            {
                let slot = &mut seen[*partition as usize];
                *slot = (*slot).max(*high_watermark);
            }
        }
        if !progressed && outputs.is_empty() {
            return;
        }
    }
}

/// Ticks until both single-voter partitions lead; returns the time.
fn elect(host: &mut Host<MemoryIo>, seen: &mut [u64; 2]) -> u64 {
    let mut now = 0;
    for _ in 0..1000 {
        host.tick(now).expect("tick");
        settle(host, now, seen);
        if [FULL, OTHER]
            .iter()
            .all(|p| host.raft(*p).is_some_and(|r| r.is_leader()))
        {
            return now;
        }
        now += 50;
    }
    panic!("the single voters never led");
}

/// ENOSPC on one partition's segment file: that partition's records are not acknowledged
/// while the disk is full, its committed records stay readable, the other partition commits,
/// and once space returns a retry makes everything durable and committed.
#[test]
fn a_full_disk_holds_one_partition_s_acknowledgements_until_space_returns() {
    let mut host = open(MemoryIo::with_seed(3));
    let mut seen = [0u64; 2];
    let now = elect(&mut host, &mut seen);
    let before = host.append(now, FULL, vec![batch(1)]).unwrap();
    settle(&mut host, now, &mut seen);
    assert!(seen[FULL as usize] > before.last_offset);

    host.io_mut().add_fault(FaultTrigger {
        path: Some(segment_path(FULL)),
        ..FaultTrigger::always(FaultKind::WriteEnospc)
    });
    let mut last_full = 0;
    for value in 0..8 {
        last_full = host
            .append(now, FULL, vec![batch(value)])
            .unwrap()
            .last_offset;
        host.append(now, OTHER, vec![batch(value)]).unwrap();
        settle(&mut host, now, &mut seen);
    }
    assert!(host.waiting_for_space(FULL));
    assert!(!host.waiting_for_space(OTHER));
    assert!(
        host.offline_partitions().is_empty(),
        "out of space is not offline"
    );
    assert!(
        seen[FULL as usize] <= before.last_offset + 1,
        "nothing written while the disk is full is committed: hw {}",
        seen[FULL as usize]
    );
    let other_end = host.store(OTHER).unwrap().log.log_end_offset() as u64;
    assert_eq!(
        seen[OTHER as usize], other_end,
        "the other partition commits"
    );
    assert!(
        !host
            .read(FULL, before.base_offset, 1 << 20)
            .unwrap()
            .is_empty(),
        "committed records stay readable"
    );
    assert_eq!(host.retry_flushes(), 1);
    settle(&mut host, now, &mut seen);
    assert!(host.waiting_for_space(FULL), "still full: still waiting");
    assert!(seen[FULL as usize] <= before.last_offset + 1);

    host.io_mut().clear_faults();
    assert_eq!(host.retry_flushes(), 1);
    settle(&mut host, now, &mut seen);
    assert!(!host.waiting_for_space(FULL));
    assert!(
        seen[FULL as usize] > last_full,
        "after space returned everything commits: hw {} last {last_full}",
        seen[FULL as usize]
    );
}

/// EIO on one partition's segment file takes that partition offline, not the host: its core
/// stops, the error is kept for Metadata, and the other partition keeps committing.
#[test]
fn eio_takes_one_partition_offline_and_the_others_go_on() {
    let mut host = open(MemoryIo::with_seed(4));
    let mut seen = [0u64; 2];
    let now = elect(&mut host, &mut seen);
    host.io_mut().add_fault(FaultTrigger::once_at(
        FaultKind::WriteEio,
        segment_path(FULL),
    ));
    host.append(now, FULL, vec![batch(1)]).unwrap();
    settle(&mut host, now, &mut seen);
    let offline = host.offline_partitions();
    assert_eq!(offline.keys().copied().collect::<Vec<_>>(), vec![FULL]);
    assert!(
        offline[&FULL].error.contains("Input/output error"),
        "{offline:?}"
    );
    assert!(
        host.raft(FULL).is_none(),
        "an offline partition's core stopped"
    );
    assert!(host.append(now, FULL, vec![batch(2)]).is_err());
    assert!(host.read(FULL, 0, 1024).is_err(), "an error, not a panic");

    let appended = host.append(now, OTHER, vec![batch(3)]).unwrap();
    settle(&mut host, now, &mut seen);
    assert!(seen[OTHER as usize] > appended.last_offset);
}

/// A node restarted on a full disk: the election's quorum-state write meets ENOSPC, so the
/// vote waits (it must not count before it is durable) and nothing goes offline; once space
/// returns, a retry writes it and the partitions elect and commit.
#[test]
fn an_election_on_a_full_disk_waits_for_space_instead_of_going_offline() {
    let mut io = MemoryIo::with_seed(5);
    io.add_fault(FaultTrigger::always(FaultKind::WriteEnospc));
    let mut host = open(io);
    let mut seen = [0u64; 2];
    let mut now = 0;
    for _ in 0..100 {
        host.tick(now).expect("tick");
        settle(&mut host, now, &mut seen);
        now += 50;
    }
    assert!(
        host.offline_partitions().is_empty(),
        "{:?}",
        host.offline_partitions()
    );
    assert!(
        [FULL, OTHER]
            .iter()
            .all(|p| !host.raft(*p).unwrap().is_leader() && host.waiting_for_space(*p)),
        "no election without a durable vote"
    );

    host.io_mut().clear_faults();
    assert_eq!(host.retry_flushes(), 2);
    let now = elect(&mut host, &mut seen);
    let appended = host.append(now, FULL, vec![batch(9)]).unwrap();
    settle(&mut host, now, &mut seen);
    assert!(seen[FULL as usize] > appended.last_offset);
}
