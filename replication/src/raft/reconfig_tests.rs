//! Voter changes in the core (KIP-595 quorum reassignment, KIP-853): each test drives one
//! replica through its inputs and checks the voter set it acts on and the work it emits.

use bytes::{Bytes, BytesMut};

use super::*;
use crate::error::ErrorCode;
use crate::message::{
    BeginQuorumEpochRequest, FetchRequest, FetchResponse, LeaderIdAndEpoch, Message,
};
use crate::records::{build_batch, stamp_batch, voters_batch};
use crate::types::OffsetAndEpoch;
use crate::voters::{VoterSet, VoterSetEntry};

use super::tests::{persist_quorum_state, vote_response};

fn set(ids: &[NodeId]) -> VoterSet {
    VoterSet::from_ids(ids).unwrap()
}

/// Node 1, the only bootstrap voter, leads epoch 1 with its LeaderChange committed (HW 1).
fn lone_leader() -> Raft {
    lone_leader_on_disk([0; 16])
}

/// [`lone_leader`] whose directory id is `directory_id`.
fn lone_leader_on_disk(directory_id: [u8; 16]) -> Raft {
    let mut config = QuorumConfig::new(1, &[1]).unwrap();
    config.directory_id = directory_id;
    let mut raft = Raft::new(config, &RecoveredState::default(), 7, 0).unwrap();
    raft.tick(5_000).unwrap();
    let election = raft.election_state();
    raft.on_persisted(5_000, Persisted::QuorumState(election))
        .unwrap();
    assert!(raft.is_leader());
    let election = raft.election_state();
    raft.on_persisted(5_000, Persisted::QuorumState(election))
        .unwrap();
    raft.on_persisted(
        5_000,
        Persisted::Log {
            generation: 0,
            end_offset: 1,
        },
    )
    .unwrap();
    assert_eq!(raft.high_watermark(), 1);
    raft
}

fn fetch_from(raft: &mut Raft, now_ms: u64, replica: NodeId, fetch_offset: u64) -> Vec<Work> {
    fetch_after_epoch(raft, now_ms, replica, fetch_offset, 1)
}

fn fetch_after_epoch(
    raft: &mut Raft,
    now_ms: u64,
    replica: NodeId,
    fetch_offset: u64,
    last_fetched_epoch: Epoch,
) -> Vec<Work> {
    let request = FetchRequest {
        correlation_id: now_ms,
        ..super::tests::fetch(replica, raft.epoch(), fetch_offset, last_fetched_epoch)
    };
    raft.step(now_ms, replica, Message::FetchRequest(request))
        .unwrap()
}

fn flush_all(raft: &mut Raft, now_ms: u64) {
    let end_offset = raft.log().log_end_offset();
    let generation = raft.log().generation();
    raft.on_persisted(
        now_ms,
        Persisted::Log {
            generation,
            end_offset,
        },
    )
    .unwrap();
}

#[test]
fn add_then_remove_the_leader_one_change_at_a_time() {
    let mut raft = lone_leader();
    // KIP-853: a node that never fetched cannot be added.
    assert!(matches!(
        raft.add_voter(5_001, 2),
        Err(RaftError::VoterNotCaughtUp { voter_id: 2, .. })
    ));
    // Node 2 catches up as an observer (its fetch reaches the leader's end).
    fetch_from(&mut raft, 5_002, 2, 1);
    let (appended, work) = raft.add_voter(5_003, 2).unwrap();
    assert_eq!((appended.base_offset, appended.last_offset), (1, 2));
    let Some(Work::AppendAsLeader { batches, .. }) = work.first() else {
        panic!("{work:?}")
    };
    let stamped = stamp_batch(&batches[0], 1, 1);
    // KIP-853: the first voter set in the log comes after a KRaftVersionRecord (kraft.version
    // 1) in the same batch, as Kafka's leader writes them.
    assert_eq!(
        crate::records::kraft_versions_in(&stamped).unwrap(),
        vec![(1, 1)]
    );
    assert_eq!(
        crate::records::voter_sets_in(&stamped).unwrap(),
        vec![(2, set(&[1, 2]))]
    );
    // KIP-595: effective when appended, before it commits.
    assert_eq!(raft.voter_set(), &set(&[1, 2]));
    // One change in flight: the next waits for this one to commit.
    assert!(matches!(
        raft.remove_voter(5_004, 1),
        Err(RaftError::VoterChangeInFlight {
            pending_offset: 2,
            high_watermark: 1
        })
    ));
    // With two voters the leader's own flush is no longer a majority.
    flush_all(&mut raft, 5_005);
    assert_eq!(raft.high_watermark(), 1);
    fetch_from(&mut raft, 5_006, 2, 3);
    assert_eq!(raft.high_watermark(), 3, "committed by both voters");
    // The leader removes itself: it keeps leading, without counting itself, until that commits.
    raft.remove_voter(5_007, 1).unwrap();
    assert_eq!(raft.voter_set(), &set(&[2]));
    flush_all(&mut raft, 5_008);
    assert!(raft.is_leader());
    assert_eq!(raft.high_watermark(), 3);
    // The next voter set is a VotersRecord alone.
    assert_eq!(raft.voter_history().latest_offset(), Some(3));
    let work = fetch_from(&mut raft, 5_009, 2, 4);
    assert_eq!(raft.high_watermark(), 4);
    // KIP-595: once its removal is committed it steps down with EndQuorumEpoch.
    assert!(matches!(raft.state(), EpochState::Resigned(_)), "{work:?}");
    assert!(work.iter().any(|w| matches!(
        w,
        Work::Send {
            to: 2,
            message: Message::EndQuorumEpochRequest(_)
        }
    )));
    // It never stands again: when its timer fires it becomes an observer looking for the leader.
    let (work, _) = raft.tick(60_000).unwrap();
    assert!(
        matches!(raft.state(), EpochState::Unattached(_)),
        "{work:?}"
    );
    assert!(!work.iter().any(|w| matches!(
        w,
        Work::Send {
            message: Message::VoteRequest(_),
            ..
        }
    )));
}

#[test]
fn voter_changes_refused_with_typed_errors() {
    let config = QuorumConfig::new(2, &[1, 2, 3]).unwrap();
    let mut follower = Raft::new(config, &RecoveredState::default(), 7, 0).unwrap();
    let error = follower.add_voter(1, 4).unwrap_err();
    assert!(matches!(error, RaftError::NotLeader { .. }));
    assert_eq!(
        error.voter_change_error_code(),
        ErrorCode::NotLeaderOrFollower
    );
    let mut raft = lone_leader();
    assert_eq!(raft.add_voter(5_001, 1), Err(RaftError::AlreadyVoter(1)));
    assert_eq!(raft.remove_voter(5_001, 9), Err(RaftError::UnknownVoter(9)));
    assert!(matches!(
        raft.remove_voter(5_001, 1),
        Err(RaftError::InvalidVoterSet(_))
    ));
    // An observer that fetched long ago has not caught up.
    fetch_from(&mut raft, 5_002, 2, 1);
    let error = raft.add_voter(50_000, 2).unwrap_err();
    assert_eq!(error.voter_change_error_code(), ErrorCode::RequestTimedOut);
    assert_eq!(raft.voter_set(), &set(&[1]), "nothing changed");
}

/// Node 2 follows 1 in epoch 1 over the bootstrap voters {1, 2, 3}.
fn follower_2() -> Raft {
    let config = QuorumConfig::new(2, &[1, 2, 3]).unwrap();
    let mut raft = Raft::new(config, &RecoveredState::default(), 7, 0).unwrap();
    let work = raft
        .step(
            10,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 1,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    for item in &work {
        if let Work::WriteQuorumState(state) = item {
            raft.on_persisted(10, Persisted::QuorumState(*state))
                .unwrap();
        }
    }
    raft
}

fn response(correlation_id: u64, records: Bytes, diverging: Option<OffsetAndEpoch>) -> Message {
    Message::FetchResponse(FetchResponse {
        correlation_id,
        error_code: ErrorCode::None,
        current_leader: LeaderIdAndEpoch {
            leader_id: Some(1),
            leader_epoch: 1,
        },
        high_watermark: 0,
        log_start_offset: 0,
        diverging_epoch: diverging,
        snapshot_id: None,
        records,
    })
}

#[test]
fn a_follower_acts_on_a_voter_set_when_appended_and_reverts_it_when_truncated() {
    let mut raft = follower_2();
    let mut records = BytesMut::new();
    records.extend_from_slice(&stamp_batch(
        &build_batch(&[(None, Some(b"x"))], false, 0),
        0,
        1,
    ));
    records.extend_from_slice(&stamp_batch(&voters_batch(&set(&[1, 2]), 0), 1, 1));
    raft.step(20, 1, response(1, records.freeze(), None))
        .unwrap();
    // KIP-595: node 3 is out as soon as the record is in node 2's log, committed or not.
    assert_eq!(raft.voter_set(), &set(&[1, 2]));
    assert_eq!(raft.voter_history().latest_offset(), Some(1));
    flush_all(&mut raft, 21);
    // The leader (a new one's log) diverges at offset 1: the record goes, {1, 2, 3} is back.
    raft.step(
        22,
        1,
        response(2, Bytes::new(), Some(OffsetAndEpoch::new(1, 1))),
    )
    .unwrap();
    assert_eq!(raft.log().log_end_offset(), 1);
    assert_eq!(raft.voter_set(), &set(&[1, 2, 3]));
}

#[test]
fn a_follower_refuses_a_voter_set_that_changes_two_voters_at_once() {
    let mut raft = follower_2();
    let records = stamp_batch(&voters_batch(&set(&[1, 2, 4, 5]), 0), 0, 1);
    let error = raft.step(20, 1, response(1, records, None)).unwrap_err();
    assert_eq!(
        error,
        RaftError::VoterSetChangeTooLarge {
            offset: 0,
            difference: 3
        }
    );
    assert_eq!(raft.log().log_end_offset(), 0, "nothing appended");
    assert_eq!(raft.voter_set(), &set(&[1, 2, 3]));
}

#[test]
fn a_restarted_replica_rebuilds_its_voter_set_from_snapshot_and_log() {
    // The host found the snapshot's set {1, 2} and a record {1, 2, 4} at offset 7 in the log.
    let recovered = RecoveredState {
        repair_pending: false,
        election: ElectionState {
            epoch: 2,
            leader_id: Some(1),
            voted_for: None,
        },
        log_start_offset: 5,
        log_end_offset: 9,
        epoch_cache: vec![OffsetAndEpoch::new(5, 2)],
    };
    let snapshots = RecoveredSnapshots {
        log_start_snapshot_id: Some(OffsetAndEpoch::new(5, 2)),
        latest_snapshot_id: None,
    };
    let entries = vec![
        VoterSetEntry {
            offset: 4,
            voters: set(&[1, 2]),
        },
        VoterSetEntry {
            offset: 7,
            voters: set(&[1, 2, 4]),
        },
    ];
    let config = QuorumConfig::new(4, &[1, 2, 3]).unwrap();
    let raft = Raft::recover(config.clone(), &recovered, snapshots, entries, 7, 0).unwrap();
    assert_eq!(raft.voter_set(), &set(&[1, 2, 4]));
    assert_eq!(raft.voter_set_at(6), &set(&[1, 2]));
    // A record past the log end is an inconsistent recovery, not a panic.
    let past_end = vec![VoterSetEntry {
        offset: 9,
        voters: set(&[1]),
    }];
    assert!(Raft::recover(config, &recovered, snapshots, past_end, 7, 0).is_err());
}

#[test]
fn a_new_voter_counts_toward_the_high_watermark_only_from_its_first_fetch_as_a_voter() {
    // Simulator, profile reconfig, seeds 170 and 289: a spare fetched up to the leader's end as
    // an observer, its disk was then replaced (it restarts empty; without KIP-853's directory
    // ids the leader cannot tell), and the leader added it and counted that old fetch offset:
    // its high-watermark passed records that only the leader held durably.
    let mut raft = lone_leader();
    fetch_from(&mut raft, 5_001, 2, 1);
    raft.add_voter(5_002, 2).unwrap();
    flush_all(&mut raft, 5_003);
    fetch_from(&mut raft, 5_004, 2, 3);
    assert_eq!(raft.voter_set(), &set(&[1, 2]));
    assert_eq!(raft.high_watermark(), 3);
    // Voter 2 stops fetching at 3; the leader appends up to 6 and holds it durably.
    let batch = build_batch(&[(None, Some(b"x"))], false, 0);
    raft.append(5_005, vec![batch.clone(), batch.clone(), batch])
        .unwrap();
    flush_all(&mut raft, 5_006);
    assert_eq!(raft.high_watermark(), 3, "voter 2 is still at 3");
    // Observer 3 reports the leader's end (6), then loses its disk, and is added.
    fetch_from(&mut raft, 5_007, 3, 6);
    let (appended, _) = raft.add_voter(5_008, 3).unwrap();
    assert_eq!(appended.base_offset, 6);
    assert_eq!(raft.voter_set(), &set(&[1, 2, 3]));
    flush_all(&mut raft, 5_009);
    // KIP-595: the set in force is {1, 2, 3}; offset 6 is durable on the leader only.
    assert_eq!(
        raft.high_watermark(),
        3,
        "an observer's fetch offset from before the add must not count"
    );
    // Voter 3's first fetch as a voter (at what it holds now, the whole log) counts.
    fetch_from(&mut raft, 5_010, 3, 7);
    assert_eq!(
        raft.high_watermark(),
        7,
        "leader and voter 3: a majority of 3"
    );
}

/// KIP-853 UpdateRaftVoter: a voter's endpoints change without a membership change (same ids,
/// so no majority changes); an unchanged voter appends nothing; an unknown voter, or one known
/// with another disk (directory id), is refused.
#[test]
fn update_voter_replaces_endpoints_and_keeps_the_ids() {
    use crate::voters::{Endpoint, VoterInfo};
    // The leader's own disk is the one it records (KIP-853: another would make it an observer).
    let mut raft = lone_leader_on_disk([7; 16]);
    let info = |port: u16| VoterInfo {
        directory_id: [7; 16],
        endpoints: vec![Endpoint {
            name: "CONTROLLER".into(),
            host: "localhost".into(),
            port,
        }],
    };
    // The bootstrap voter has a zero directory id: any directory id may claim it.
    let (appended, work) = raft.update_voter(5_001, 1, info(9001)).unwrap().unwrap();
    assert!(
        work.iter()
            .any(|w| matches!(w, Work::AppendAsLeader { .. }))
    );
    assert_eq!(raft.voter_set().ids(), vec![1]);
    assert_eq!(raft.voter_set().voters()[&1], info(9001));
    flush_all(&mut raft, 5_002);
    assert!(raft.high_watermark() > appended.last_offset);
    assert!(raft.update_voter(5_003, 1, info(9001)).unwrap().is_none());
    let mut other_disk = info(9002);
    other_disk.directory_id = [8; 16];
    assert!(matches!(
        raft.update_voter(5_004, 1, other_disk),
        Err(RaftError::UnknownVoter(1))
    ));
    assert!(matches!(
        raft.update_voter(5_005, 2, info(9003)),
        Err(RaftError::UnknownVoter(2))
    ));
}

fn vote_requests_to(work: &[Work], pre_vote: bool) -> Vec<NodeId> {
    work.iter()
        .filter_map(|w| match w {
            Work::Send {
                to,
                message: Message::VoteRequest(r),
            }
            | Work::SendAfterPersist {
                to,
                message: Message::VoteRequest(r),
            } if r.pre_vote == pre_vote => Some(*to),
            _ => None,
        })
        .collect()
}

/// A leader that removed itself and crashed before the removal committed holds the only copy
/// of it and the longest log. It stands (counting only the grants of its set in force), leads
/// until the removal commits, then resigns and never stands again. Before 2026-12-06 it never
/// stood: the old set {1, 2, 3, 5} had to elect someone else without its vote (it refuses
/// shorter logs), and with voter 5's disk replaced nobody could be elected (simulator, profile
/// reconfig, seed 106 of a build with another operation stream).
#[test]
fn a_leader_whose_removal_is_uncommitted_stands_after_a_restart() {
    let recovered = RecoveredState {
        repair_pending: false,
        election: ElectionState {
            epoch: 2,
            leader_id: Some(2),
            voted_for: Some(2),
        },
        log_start_offset: 0,
        log_end_offset: 10,
        epoch_cache: vec![OffsetAndEpoch::new(0, 1), OffsetAndEpoch::new(6, 2)],
    };
    let removal = vec![VoterSetEntry {
        offset: 8,
        voters: set(&[1, 3, 5]),
    }];
    let config = QuorumConfig::new(2, &[1, 2, 3, 5]).unwrap();
    let mut raft = Raft::recover(
        config,
        &recovered,
        RecoveredSnapshots::default(),
        removal,
        7,
        0,
    )
    .unwrap();
    assert_eq!(raft.voter_set(), &set(&[1, 3, 5]));
    assert!(!raft.is_local_voter());
    assert!(raft.may_stand(), "the committed set (bootstrap) names it");

    let (work, _) = raft.tick(60_000).unwrap();
    persist_quorum_state(&mut raft, 60_000, &work);
    assert!(
        matches!(raft.state(), EpochState::Prospective(_)),
        "{:?}: {work:?}",
        raft.state()
    );
    assert_eq!(vote_requests_to(&work, true), vec![1, 3, 5]);
    // Its own pre-vote does not count: it is not in the set it acts on.
    raft.step(60_001, 1, vote_response(true, 2, None)).unwrap();
    assert!(matches!(raft.state(), EpochState::Prospective(_)));
    let work = raft.step(60_002, 3, vote_response(true, 2, None)).unwrap();
    persist_quorum_state(&mut raft, 60_002, &work);
    assert_eq!(raft.epoch(), 3);
    assert_eq!(vote_requests_to(&work, false), vec![1, 3, 5]);
    raft.step(60_003, 1, vote_response(true, 3, None)).unwrap();
    assert!(!raft.is_leader(), "one grant of three is no majority");
    let work = raft.step(60_004, 3, vote_response(true, 3, None)).unwrap();
    persist_quorum_state(&mut raft, 60_004, &work);
    assert!(raft.is_leader());

    // It leads without counting itself: its own flush commits nothing.
    flush_all(&mut raft, 60_005);
    let end = raft.log().log_end_offset();
    assert!(end > 10, "the LeaderChange record of epoch 3");
    assert_eq!(raft.high_watermark(), 0);
    fetch_after_epoch(&mut raft, 60_006, 1, end, 3);
    assert_eq!(raft.high_watermark(), 0);
    // A majority of {1, 3, 5} has it: the removal is committed, and the leader resigns.
    fetch_after_epoch(&mut raft, 60_007, 3, end, 3);
    assert_eq!(raft.high_watermark(), end);
    assert!(matches!(raft.state(), EpochState::Resigned(_)));
    assert!(!raft.may_stand());
    let (work, _) = raft.tick(120_000).unwrap();
    assert!(matches!(raft.state(), EpochState::Unattached(_)));
    assert!(vote_requests_to(&work, true).is_empty());
    assert!(vote_requests_to(&work, false).is_empty());
}
