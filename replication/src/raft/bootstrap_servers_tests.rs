//! KIP-853 `controller.quorum.bootstrap.servers`: a replica that knows no voter, only servers to
//! ask, finds the leader through their Fetch answers and learns the voter set from the log.

use bytes::Bytes;

use super::*;
use crate::error::ErrorCode;
use crate::message::{FetchResponse, LeaderIdAndEpoch, Message};
use crate::records::{first_voters_batch, stamp_batch};
use crate::voters::VoterSet;

/// The ids a host gives two bootstrap servers (Kafka's: -2, -3).
const BOOTSTRAP: [NodeId; 2] = [-2, -3];

/// The fetches in `work` (a message held behind a quorum-state write counted once).
fn fetch_targets(work: &[Work]) -> Vec<(NodeId, u64)> {
    let mut sent: Vec<(NodeId, u64)> = work
        .iter()
        .filter_map(|w| match w {
            Work::Send {
                to,
                message: Message::FetchRequest(f),
            }
            | Work::SendAfterPersist {
                to,
                message: Message::FetchRequest(f),
            } => Some((*to, f.correlation_id)),
            _ => None,
        })
        .collect();
    sent.dedup();
    sent
}

/// Reports each quorum-state write in `work` durable, as a host would, and returns the work
/// with what that released.
fn settle(raft: &mut Raft, now_ms: u64, mut work: Vec<Work>) -> Vec<Work> {
    let mut index = 0;
    while index < work.len() {
        if let Work::WriteQuorumState(state) = work[index] {
            let released = raft
                .on_persisted(now_ms, Persisted::QuorumState(state))
                .unwrap();
            work.extend(released);
        }
        index += 1;
    }
    work
}

/// A tick, with its quorum-state writes reported durable; returns the fetches sent.
fn tick(raft: &mut Raft, now_ms: u64) -> Vec<(NodeId, u64)> {
    let work = raft.tick(now_ms).unwrap().0;
    fetch_targets(&settle(raft, now_ms, work))
}

/// A step, with its quorum-state writes reported durable; returns the fetches sent.
fn step(raft: &mut Raft, now_ms: u64, from: NodeId, message: Message) -> Vec<(NodeId, u64)> {
    let work = raft.step(now_ms, from, message).unwrap();
    fetch_targets(&settle(raft, now_ms, work))
}

fn answer(correlation_id: u64, leader: Option<NodeId>, records: Bytes) -> Message {
    answer_in(correlation_id, leader, 3, records)
}

fn answer_in(correlation_id: u64, leader: Option<NodeId>, epoch: Epoch, records: Bytes) -> Message {
    Message::FetchResponse(FetchResponse {
        correlation_id,
        // A bootstrap server that does not lead says so and names the leader it knows.
        error_code: if records.is_empty() {
            ErrorCode::NotLeaderOrFollower
        } else {
            ErrorCode::None
        },
        current_leader: LeaderIdAndEpoch {
            leader_id: leader,
            leader_epoch: epoch,
        },
        high_watermark: 0,
        log_start_offset: 0,
        diverging_epoch: None,
        snapshot_id: None,
        records,
    })
}

#[test]
fn a_replica_with_only_bootstrap_servers_finds_the_leader_and_learns_the_voters_from_the_log() {
    let config = QuorumConfig::with_bootstrap_servers(4, &BOOTSTRAP).unwrap();
    let mut raft = Raft::new(config, &RecoveredState::default(), 7, 0).unwrap();
    assert!(raft.voter_set().is_empty(), "no voter known yet");
    // KIP-853: an observer that knows no leader asks a bootstrap server.
    let sent = tick(&mut raft, 1);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, -2);
    // The server names leader 1 of epoch 3: the replica follows it, and fetches from it next.
    let mut sent = step(&mut raft, 2, -2, answer(sent[0].1, Some(1), Bytes::new()));
    assert_eq!(raft.leader_id(), Some(1));
    assert!(!raft.is_local_voter(), "an observer, never a candidate");
    sent.extend(tick(&mut raft, 3));
    assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), vec![1]);
    // The leader's log holds the voter set {1, 2, 3}: three voters more than the unknown set,
    // accepted as the first set this replica learns (a known set may change by one at most).
    let voters = VoterSet::from_ids(&[1, 2, 3]).unwrap();
    let records = stamp_batch(&first_voters_batch(&voters, 0), 0, 3);
    step(&mut raft, 4, 1, answer(sent[0].1, Some(1), records));
    assert_eq!(raft.voter_set(), &voters);
    assert!(!raft.is_local_voter());
}

#[test]
fn a_bootstrap_server_that_knows_no_leader_sends_the_replica_to_the_next_one() {
    let config = QuorumConfig::with_bootstrap_servers(4, &BOOTSTRAP).unwrap();
    let mut raft = Raft::new(config, &RecoveredState::default(), 7, 0).unwrap();
    let sent = tick(&mut raft, 1);
    step(
        &mut raft,
        2,
        -2,
        answer_in(sent[0].1, None, 0, Bytes::new()),
    );
    let backoff = raft.config().request_timeout_ms;
    let sent = tick(&mut raft, 2 + backoff);
    assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), vec![-3]);
}

#[test]
fn bootstrap_servers_are_negative_ids() {
    assert!(QuorumConfig::with_bootstrap_servers(4, &[]).is_err());
    assert!(QuorumConfig::with_bootstrap_servers(4, &[2]).is_err());
}
