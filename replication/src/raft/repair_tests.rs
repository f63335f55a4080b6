//! The repair rules (repair.rs), one input at a time.

use super::tests::{asks_for_votes, persist_quorum_state};
use super::*;
use crate::error::ErrorCode;
use crate::message::*;
use crate::records::{KeyValue, build_batch, stamp_batch};
use crate::types::OffsetAndEpoch;

/// Node `node_id` of {1, 2, 3} after a restart that repaired its log: three records of
/// epoch 1 survived; its quorum-state knows epoch 1.
fn restarted(node_id: NodeId, repair_pending: bool) -> Raft {
    let recovered = RecoveredState {
        election: ElectionState {
            epoch: 1,
            leader_id: None,
            voted_for: None,
        },
        log_end_offset: 3,
        epoch_cache: vec![OffsetAndEpoch::new(0, 1)],
        repair_pending,
        ..RecoveredState::default()
    };
    Raft::new(
        QuorumConfig::new(node_id, &[1, 2, 3]).unwrap(),
        &recovered,
        42,
        0,
    )
    .unwrap()
}

fn vote(candidate_id: NodeId, epoch: Epoch, pre_vote: bool) -> Message {
    // A log far ahead of ours: up to date by KIP-595's rule.
    Message::VoteRequest(VoteRequest {
        candidate_epoch: epoch,
        candidate_id,
        last_offset_epoch: epoch - 1,
        last_offset: 100,
        pre_vote,
        candidate_directory_id: [0; 16],
        voter_directory_id: [0; 16],
    })
}

fn granted(work: &[Work]) -> bool {
    work.iter().any(|w| {
        matches!(
            w,
            Work::Send {
                message: Message::VoteResponse(VoteResponse {
                    vote_granted: true,
                    ..
                }),
                ..
            } | Work::SendAfterPersist {
                message: Message::VoteResponse(VoteResponse {
                    vote_granted: true,
                    ..
                }),
                ..
            }
        )
    })
}

#[test]
fn a_repairing_replica_grants_no_vote_and_never_stands() {
    // The same replica without the repair grants both (the rule is what refuses).
    let mut healthy = restarted(2, false);
    assert!(granted(&healthy.step(10, 1, vote(1, 2, true)).unwrap()));
    assert!(granted(&healthy.step(10, 1, vote(1, 2, false)).unwrap()));

    let mut raft = restarted(2, true);
    assert!(raft.repair_pending());
    assert!(!granted(&raft.step(10, 1, vote(1, 2, true)).unwrap()));
    assert!(!granted(&raft.step(10, 1, vote(1, 2, false)).unwrap()));
    // A minute of election timeouts: it never asks for a vote, and its timer keeps a deadline
    // in the future (no busy loop).
    let mut now = 10;
    while now < 60_000 {
        let (work, next) = raft.tick(now).unwrap();
        persist_quorum_state(&mut raft, now, &work);
        assert!(!asks_for_votes(&work), "at {now}: {work:?}");
        assert!(
            !matches!(
                raft.state(),
                EpochState::Prospective(_) | EpochState::Candidate(_) | EpochState::Leader(_)
            ),
            "at {now}: {:?}",
            raft.state()
        );
        assert!(next > now, "at {now}: next deadline {next}");
        now = next;
    }
}

#[test]
fn a_repairing_follower_votes_again_once_durable_up_to_its_leaders_high_watermark() {
    let mut raft = restarted(2, true);
    let work = raft
        .step(
            10,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 2,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    persist_quorum_state(&mut raft, 10, &work);
    let correlation_id = work
        .iter()
        .find_map(|w| match w {
            Work::SendAfterPersist {
                message: Message::FetchRequest(f),
                ..
            }
            | Work::Send {
                message: Message::FetchRequest(f),
                ..
            } => Some(f.correlation_id),
            _ => None,
        })
        .expect("the follower fetches");
    // The leader's records of epoch 2 at 3..=5, committed up to 6.
    let values: Vec<KeyValue<'_>> = (0..3).map(|_| (None, Some(&b"v"[..]))).collect();
    let records = stamp_batch(&build_batch(&values, false, 0), 3, 2);
    let work = raft
        .step(
            20,
            1,
            Message::FetchResponse(FetchResponse {
                correlation_id,
                error_code: ErrorCode::None,
                current_leader: LeaderIdAndEpoch {
                    leader_id: Some(1),
                    leader_epoch: 2,
                },
                high_watermark: 6,
                log_start_offset: 0,
                diverging_epoch: None,
                snapshot_id: None,
                records,
            }),
        )
        .unwrap();
    let generation = work
        .iter()
        .find_map(|w| match w {
            Work::Flush { generation, .. } => Some(*generation),
            _ => None,
        })
        .expect("the follower flushes what it appended");
    // Appended, not yet durable: still repairing.
    assert!(raft.repair_pending());
    assert!(!granted(&raft.step(21, 3, vote(3, 3, true)).unwrap()));
    raft.on_persisted(
        30,
        Persisted::Log {
            generation,
            end_offset: 6,
        },
    )
    .unwrap();
    assert!(!raft.repair_pending());
    assert!(granted(&raft.step(31, 3, vote(3, 3, true)).unwrap()));
}
