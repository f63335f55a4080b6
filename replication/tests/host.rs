//! The host (`ringlog_replication::host::Host`) over the engine's in-memory backend: the code
//! production runs between the core and the disk, with a clock that is only a parameter and a
//! disk that loses what was not synced.

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::memory::FaultConfig;
use ringlog_engine::io::{MemoryConfig, MemoryIo};
use ringlog_engine::log::LogConfig;
use ringlog_replication::host::{Host, HostConfig, HostMutation, Output, PartitionSpec};
use ringlog_replication::message::{Message, VoteRequest};
use ringlog_replication::multi::PartitionMessage;
use ringlog_replication::rng::SplitMix64;
use ringlog_replication::state_machine::SnapshotPolicyConfig;
use ringlog_replication::{ElectionState, QuorumConfig};

const PARTITION: u32 = 0;

fn config(mutation: Option<HostMutation>) -> HostConfig {
    let mut config = HostConfig::new(
        "host-test".into(),
        vec![1],
        SnapshotPolicyConfig::default(),
        1 << 20,
    );
    config.mutation = mutation;
    config
}

fn spec() -> PartitionSpec {
    PartitionSpec {
        id: PARTITION,
        dir: "/data/metadata-0".into(),
        log_config: LogConfig {
            segment_size_bytes: 1 << 20,
            ..LogConfig::default()
        },
        keeps_snapshots: false,
    }
}

fn open(io: MemoryIo, mutation: Option<HostMutation>) -> Host<MemoryIo> {
    let quorum = QuorumConfig::new(1, &[1]).expect("one voter");
    Host::open(io, config(mutation), &quorum, vec![spec()], 7, 0).expect("open")
}

fn batch(value: u64) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, None, Some(&value.to_le_bytes()), &[]);
    builder.build().into_bytes()
}

/// The high-watermarks the host announced in `outputs`.
fn high_watermarks(outputs: &[Output]) -> Option<u64> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::HighWatermark { high_watermark, .. } => Some(*high_watermark),
            _ => None,
        })
        .max()
}

/// Ticks (advancing the clock) and pumps until the single voter leads; returns the time.
fn elect(host: &mut Host<MemoryIo>, mut now: u64) -> u64 {
    for _ in 0..1000 {
        host.tick(now).expect("tick");
        host.pump(now).expect("pump");
        host.take_output();
        if host.raft(PARTITION).is_some_and(|r| r.is_leader()) {
            return now;
        }
        now += 50;
    }
    panic!("a single voter never became leader");
}

/// Pumps at a fixed time until the host has nothing left to do; returns the highest
/// high-watermark announced.
fn settle(host: &mut Host<MemoryIo>, now: u64) -> Option<u64> {
    let mut highest = None;
    for _ in 0..64 {
        let progressed = host.pump(now).expect("pump");
        let outputs = host.take_output();
        highest = highest.max(high_watermarks(&outputs));
        if !progressed && outputs.is_empty() {
            break;
        }
    }
    highest
}

/// The storage completion path has no timer in it: with a clock that never advances after the
/// append, pumping the storage completions alone makes the record durable, reports it to the
/// core and commits it. The node's loop calls the same `pump` when the ring's readiness fd
/// fires.
#[test]
fn a_flush_completion_commits_with_a_clock_that_never_advances() {
    let mut host = open(MemoryIo::with_seed(1), None);
    let now = elect(&mut host, 0);
    let start = settle(&mut host, now).unwrap_or(0);
    let before = host.store(PARTITION).expect("hosted").high_watermark;
    let appended = host
        .append(now, PARTITION, vec![batch(1)])
        .expect("leader appends");
    assert!(appended.base_offset >= before.max(start));
    assert!(
        host.store(PARTITION).expect("hosted").high_watermark <= appended.base_offset,
        "nothing is committed before its flush completes"
    );
    let committed = settle(&mut host, now).expect("a high-watermark was announced");
    assert!(
        committed > appended.last_offset,
        "the record committed at the same instant: hw {committed}, record {}",
        appended.last_offset
    );
}

/// Appends batches one at a time and crashes the in-memory disk at random moments (unsynced
/// writes lost or torn); after each restart every record the host had announced committed is
/// still in the log. Returns the number of crashes after which a committed record was missing,
/// and the number of crashes that found committed records to keep.
fn crash_run(seed: u64, mutation: Option<HostMutation>) -> (usize, usize) {
    let mut rng = SplitMix64::new(seed);
    // Operations complete late (a pump may return with a flush still in flight), and a crash
    // tears or drops what was not synced.
    let memory_config = MemoryConfig {
        seed,
        faults: FaultConfig {
            delay_probability: 0.5,
            tear_probability: 0.5,
            tear_every_unsynced_write: true,
            writeback_probability: 0.3,
            ..FaultConfig::default()
        },
        ..MemoryConfig::default()
    };
    let mut host = open(MemoryIo::new(memory_config.clone()), mutation);
    let mut now = elect(&mut host, 0);
    let mut committed = 0u64;
    let mut lost = 0;
    let mut kept = 0;
    for value in 0..200u64 {
        host.append(now, PARTITION, vec![batch(value)])
            .expect("leader appends");
        // A few rounds of completions, or none (still in flight at a crash).
        for _ in 0..rng.below(3) {
            host.pump(now).expect("pump");
            if let Some(hw) = high_watermarks(&host.take_output()) {
                committed = committed.max(hw);
            }
        }
        if rng.below(10) == 0 {
            let mut io = host.into_io();
            io.crash();
            host = open(io, mutation);
            let end = host.store(PARTITION).expect("hosted").log.log_end_offset() as u64;
            if end < committed {
                lost += 1;
            } else if committed > 0 {
                kept += 1;
            }
            now = elect(&mut host, now + 1);
            settle(&mut host, now);
            committed = committed.min(end);
        }
        now += 1;
    }
    (lost, kept)
}

#[test]
fn committed_records_survive_crashes_of_the_disk() {
    let mut kept = 0;
    for seed in 1..=20 {
        let (lost, seed_kept) = crash_run(seed, None);
        assert_eq!(lost, 0, "seed {seed} lost committed records");
        kept += seed_kept;
    }
    assert!(
        kept > 20,
        "too few crashes found committed records to keep: {kept}"
    );
}

/// The check above can fail: a host that reports the log durable before its fdatasync
/// (acknowledging a produce before its flush) loses committed records at a crash.
#[test]
fn a_host_acknowledging_before_the_flush_is_caught() {
    let lost: usize = (1..=20)
        .map(|seed| crash_run(seed, Some(HostMutation::AcknowledgeBeforeFlush)).0)
        .sum();
    assert!(
        lost > 0,
        "no seed caught a host that acknowledges before the flush"
    );
}

/// Node 1 of three grants node 2's vote in a new epoch; the quorum-state write runs through the
/// ring, so the loop goes on while it is in flight. Returns whether a crash right after the vote
/// response left forgot the vote (KIP-595: a vote is durable before its response leaves).
fn vote_run(seed: u64, mutation: Option<HostMutation>) -> bool {
    let memory_config = MemoryConfig {
        seed,
        faults: FaultConfig {
            delay_probability: 0.5,
            tear_probability: 0.5,
            tear_every_unsynced_write: true,
            writeback_probability: 0.3,
            ..FaultConfig::default()
        },
        ..MemoryConfig::default()
    };
    let quorum = QuorumConfig::new(1, &[1, 2, 3]).expect("three voters");
    let mut config = config(mutation);
    config.voters = vec![1, 2, 3];
    let mut host = Host::open(
        MemoryIo::new(memory_config),
        config.clone(),
        &quorum,
        vec![spec()],
        seed,
        0,
    )
    .expect("open");
    let vote = VoteRequest {
        candidate_epoch: 5,
        candidate_id: 2,
        last_offset_epoch: 0,
        last_offset: 0,
        pre_vote: false,
    };
    let message = PartitionMessage {
        partition: PARTITION,
        message: Message::VoteRequest(vote),
    };
    host.step(10, 2, message).expect("step");
    let mut granted = false;
    for _ in 0..64 {
        granted = host.take_output().iter().any(|o| {
            matches!(o, Output::Send { message: Message::VoteResponse(r), .. } if r.vote_granted)
        });
        if granted {
            break;
        }
        host.pump(10).expect("pump");
    }
    assert!(granted, "seed {seed}: the vote was never granted");
    let mut io = host.into_io();
    io.crash();
    let host = Host::open(io, config, &quorum, vec![spec()], seed, 20).expect("reopen");
    let election = host.raft(PARTITION).expect("hosted").election_state();
    election
        != ElectionState {
            epoch: 5,
            leader_id: None,
            voted_for: Some(2),
        }
}

#[test]
fn a_granted_vote_survives_a_crash_right_after_its_response() {
    for seed in 1..=20 {
        assert!(!vote_run(seed, None), "seed {seed} forgot its vote");
    }
}

/// The check above can fail: a host that lets the vote response leave before the quorum-state
/// is durable forgets the vote at a crash.
#[test]
fn a_host_sending_the_vote_before_the_quorum_state_is_caught() {
    let forgot = (1..=20)
        .filter(|&seed| vote_run(seed, Some(HostMutation::SendBeforeQuorumState)))
        .count();
    assert!(
        forgot > 0,
        "no seed caught a vote sent before its quorum-state write"
    );
}
