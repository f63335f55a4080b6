//! KIP-853 directory ids in the core: a voter is its node id *and* its disk. A replica whose
//! disk was replaced (same id, new directory id) is an observer until it is removed and added
//! again: its fetches do not count toward the high-watermark, its vote is not that voter's, and
//! it does not stand.

use super::*;
use crate::error::ErrorCode;
use crate::message::{BeginQuorumEpochRequest, FetchRequest, Message, VoteRequest};
use crate::records::build_batch;
use crate::types::OffsetAndEpoch;
use crate::voters::{VoterInfo, VoterSet, VoterSetEntry};

const DISK_1: [u8; 16] = [1; 16];
const DISK_2: [u8; 16] = [2; 16];
const DISK_3: [u8; 16] = [3; 16];
/// The disk that replaced node 3's.
const NEW_DISK_3: [u8; 16] = [9; 16];

fn disk(directory_id: [u8; 16]) -> VoterInfo {
    VoterInfo {
        directory_id,
        endpoints: Vec::new(),
    }
}

fn fetch_from(
    raft: &mut Raft,
    now_ms: u64,
    replica: NodeId,
    directory_id: [u8; 16],
    fetch_offset: u64,
) -> Vec<Work> {
    let request = FetchRequest {
        correlation_id: now_ms,
        replica_id: replica,
        current_leader_epoch: raft.epoch(),
        fetch_offset,
        last_fetched_epoch: 1,
        max_bytes: 1024,
        max_wait_ms: 0,
        replica_directory_id: directory_id,
    };
    raft.step(now_ms, replica, Message::FetchRequest(request))
        .unwrap()
}

/// A fetch at the leader's log end.
fn fetch_to_end(raft: &mut Raft, now_ms: u64, replica: NodeId, directory_id: [u8; 16]) {
    let end = raft.log().log_end_offset();
    fetch_from(raft, now_ms, replica, directory_id, end);
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

/// Node 1 (disk 1) leads {1, 2, 3} whose voter set records disks 1, 2 and 3, every change
/// committed (built as a lone leader that added 2 and then 3, each caught up first).
fn leader_of_three_disks() -> Raft {
    let mut config = QuorumConfig::new(1, &[1]).unwrap();
    config.directory_id = DISK_1;
    let mut raft = Raft::new(config, &RecoveredState::default(), 7, 0).unwrap();
    raft.tick(5_000).unwrap();
    for _ in 0..2 {
        let election = raft.election_state();
        raft.on_persisted(5_000, Persisted::QuorumState(election))
            .unwrap();
    }
    assert!(raft.is_leader());
    flush_all(&mut raft, 5_000);
    assert_eq!(raft.high_watermark(), 1);
    // The first voter set in the log: a KRaftVersionRecord and the VotersRecord (offsets 1, 2).
    raft.update_voter(5_001, 1, disk(DISK_1)).unwrap().unwrap();
    flush_all(&mut raft, 5_001);
    assert_eq!(raft.high_watermark(), 3);
    fetch_to_end(&mut raft, 5_002, 2, DISK_2);
    raft.add_voter_with_info(5_003, 2, disk(DISK_2)).unwrap();
    flush_all(&mut raft, 5_003);
    fetch_to_end(&mut raft, 5_004, 2, DISK_2);
    assert_eq!(raft.high_watermark(), raft.log().log_end_offset());
    fetch_to_end(&mut raft, 5_005, 3, DISK_3);
    raft.add_voter_with_info(5_006, 3, disk(DISK_3)).unwrap();
    flush_all(&mut raft, 5_006);
    fetch_to_end(&mut raft, 5_007, 2, DISK_2);
    fetch_to_end(&mut raft, 5_008, 3, DISK_3);
    assert_eq!(raft.high_watermark(), raft.log().log_end_offset());
    raft
}

fn append_one(raft: &mut Raft, now_ms: u64) -> u64 {
    let (appended, _) = raft
        .append(now_ms, vec![build_batch(&[(None, Some(b"x"))], false, 0)])
        .unwrap();
    flush_all(raft, now_ms);
    appended.last_offset + 1
}

#[test]
fn a_replaced_disk_does_not_count_toward_the_high_watermark_until_added_again() {
    let mut raft = leader_of_three_disks();
    let end = append_one(&mut raft, 6_000);
    // Voter 2 is down. Node 3's disk was replaced: it fetched everything under its new disk.
    fetch_from(&mut raft, 6_001, 3, NEW_DISK_3, end);
    assert_eq!(
        raft.high_watermark(),
        end - 1,
        "KIP-853: the replica on the new disk is an observer, not voter 3"
    );
    let described = raft.describe_quorum();
    let voter_3 = described
        .current_voters
        .iter()
        .find(|v| v.replica_id == 3)
        .unwrap();
    assert_eq!(voter_3.replica_directory_id, DISK_3);
    assert_eq!(voter_3.log_end_offset, Some(end - 1), "the old disk's last");
    let observer_3 = described
        .observers
        .iter()
        .find(|o| o.replica_id == 3)
        .expect("the new disk fetches as an observer");
    assert_eq!(observer_3.replica_directory_id, NEW_DISK_3);
    assert_eq!(observer_3.log_end_offset, Some(end));

    // The same fetch from the disk the voter set names would have committed it.
    let mut same_disk = raft.clone();
    fetch_from(&mut same_disk, 6_002, 3, DISK_3, end);
    assert_eq!(same_disk.high_watermark(), end);

    // Voter 2 returns: node 3 is removed and added again with its new disk.
    fetch_from(&mut raft, 6_003, 2, DISK_2, end);
    assert_eq!(raft.high_watermark(), end);
    let (removal, _) = raft.remove_voter(6_004, 3).unwrap();
    flush_all(&mut raft, 6_004);
    fetch_from(&mut raft, 6_005, 2, DISK_2, removal.last_offset + 1);
    assert_eq!(raft.high_watermark(), removal.last_offset + 1);
    fetch_from(&mut raft, 6_006, 3, NEW_DISK_3, removal.last_offset + 1);
    let (addition, _) = raft
        .add_voter_with_info(6_007, 3, disk(NEW_DISK_3))
        .unwrap();
    flush_all(&mut raft, 6_007);
    fetch_from(&mut raft, 6_008, 2, DISK_2, addition.last_offset + 1);
    let end = append_one(&mut raft, 6_009);
    // Voter 2 is down again: the leader and node 3 on its new disk now make the majority.
    fetch_from(&mut raft, 6_010, 3, NEW_DISK_3, end);
    assert_eq!(raft.high_watermark(), end, "re-added, its disk counts");
    // A late fetch from the old disk is now an observer's.
    let end = append_one(&mut raft, 6_011);
    fetch_from(&mut raft, 6_012, 3, DISK_3, end);
    assert_eq!(raft.high_watermark(), end - 1);
}

/// Node 3 on its new disk, following 1 in epoch 1, with the voter set {1, 2, 3} naming disk 3.
fn replaced_replica_3() -> Raft {
    let mut config = QuorumConfig::new(3, &[1, 2, 3]).unwrap();
    config.directory_id = NEW_DISK_3;
    let voters = VoterSet::from_ids(&[1]).unwrap();
    let voters = voters
        .with_voter(1, disk(DISK_1))
        .with_voter(2, disk(DISK_2))
        .with_voter(3, disk(DISK_3));
    let recovered = RecoveredState {
        repair_pending: false,
        election: ElectionState {
            epoch: 1,
            leader_id: None,
            voted_for: None,
        },
        log_start_offset: 0,
        log_end_offset: 5,
        epoch_cache: vec![OffsetAndEpoch::new(0, 1)],
    };
    Raft::recover(
        config,
        &recovered,
        RecoveredSnapshots::default(),
        vec![VoterSetEntry { offset: 4, voters }],
        7,
        0,
    )
    .unwrap()
}

#[test]
fn a_replaced_disk_grants_no_vote_as_the_old_voter_and_never_stands() {
    let mut raft = replaced_replica_3();
    // A candidate asks voter 3 on disk 3: this replica is not that voter.
    let request = |pre_vote: bool, voter_directory_id: [u8; 16]| {
        Message::VoteRequest(VoteRequest {
            candidate_epoch: if pre_vote { 1 } else { 2 },
            candidate_id: 1,
            last_offset_epoch: 1,
            last_offset: 5,
            pre_vote,
            candidate_directory_id: DISK_1,
            voter_directory_id,
        })
    };
    for pre_vote in [true, false] {
        let work = raft.step(10, 1, request(pre_vote, DISK_3)).unwrap();
        // (An observer also looks for the leader: a Fetch may go out.)
        let response = work
            .iter()
            .find_map(|w| match w {
                Work::Send {
                    message: Message::VoteResponse(r),
                    ..
                } => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{work:?}"));
        assert_eq!(response.error_code, ErrorCode::InvalidVoterKey);
        assert!(!response.vote_granted);
    }
    assert_eq!(
        raft.epoch(),
        1,
        "a request for another disk changes nothing"
    );
    // Addressed to its own disk (or to none) it answers as any replica does.
    let mut own = raft.clone();
    let work = own.step(10, 1, request(false, NEW_DISK_3)).unwrap();
    assert!(work.iter().any(|w| matches!(
        w,
        Work::SendAfterPersist {
            message: Message::VoteResponse(r),
            ..
        } if r.vote_granted
    )));
    // BeginQuorumEpoch to disk 3 is refused the same way.
    let work = raft
        .step(
            11,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 2,
                voter_directory_id: DISK_3,
            }),
        )
        .unwrap();
    assert!(work.iter().any(|w| matches!(
        w,
        Work::Send {
            message: Message::BeginQuorumEpochResponse(r),
            ..
        } if r.error_code == ErrorCode::InvalidVoterKey
    )));
    // Its election timer never makes it stand: it is not a voter of the set in force.
    let (work, _) = raft.tick(60_000).unwrap();
    assert!(
        !work.iter().any(|w| matches!(
            w,
            Work::Send {
                message: Message::VoteRequest(_),
                ..
            }
        )),
        "{work:?}"
    );
}

#[test]
fn a_candidate_asks_each_voter_for_the_disk_its_set_names() {
    let mut config = QuorumConfig::new(1, &[1, 2, 3]).unwrap();
    config.directory_id = DISK_1;
    let voters = VoterSet::from_ids(&[1])
        .unwrap()
        .with_voter(1, disk(DISK_1))
        .with_voter(2, disk(DISK_2))
        .with_voter(3, disk(DISK_3));
    let recovered = RecoveredState {
        repair_pending: false,
        election: ElectionState {
            epoch: 1,
            leader_id: None,
            voted_for: None,
        },
        log_start_offset: 0,
        log_end_offset: 5,
        epoch_cache: vec![OffsetAndEpoch::new(0, 1)],
    };
    let mut raft = Raft::recover(
        config,
        &recovered,
        RecoveredSnapshots::default(),
        vec![VoterSetEntry { offset: 4, voters }],
        7,
        0,
    )
    .unwrap();
    let (work, _) = raft.tick(60_000).unwrap();
    let asked: Vec<(NodeId, [u8; 16], [u8; 16])> = work
        .iter()
        .filter_map(|w| match w {
            Work::Send {
                to,
                message: Message::VoteRequest(r),
            } => Some((*to, r.voter_directory_id, r.candidate_directory_id)),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![(2, DISK_2, DISK_1), (3, DISK_3, DISK_1)]);
    // Voter 3's disk was replaced: its INVALID_VOTER_KEY is a refusal. With voter 2 also
    // refusing, the pre-vote cannot be won.
    let refusal = |error_code| {
        Message::VoteResponse(crate::message::VoteResponse {
            error_code,
            current_leader: crate::message::LeaderIdAndEpoch {
                leader_id: None,
                leader_epoch: 1,
            },
            vote_granted: false,
        })
    };
    raft.step(60_001, 3, refusal(ErrorCode::InvalidVoterKey))
        .unwrap();
    let EpochState::Prospective(p) = raft.state() else {
        panic!("{:?}", raft.state())
    };
    assert!(p.rejecting.contains(&3), "counted as a refusal");
}

/// KIP-853: FetchSnapshot v1 carries the downloading replica's directory id, checked like a
/// Fetch's: the replaced disk of voter 3 downloading a snapshot is an observer, and keeps
/// neither voter 3 alive (check quorum) nor its old progress.
#[test]
fn a_replaced_disk_downloading_a_snapshot_is_an_observer() {
    let mut raft = leader_of_three_disks();
    let end = append_one(&mut raft, 6_000);
    fetch_from(&mut raft, 6_001, 2, DISK_2, end);
    assert_eq!(raft.high_watermark(), end);
    let snapshot_id = OffsetAndEpoch::new(end, raft.epoch());
    raft.on_snapshot_written(6_002, snapshot_id).unwrap();
    let voter_3_before = raft
        .describe_quorum()
        .current_voters
        .into_iter()
        .find(|v| v.replica_id == 3)
        .unwrap();
    let epoch = raft.epoch();
    let download = |directory_id: [u8; 16]| {
        Message::FetchSnapshotRequest(crate::message::FetchSnapshotRequest {
            correlation_id: 9,
            replica_id: 3,
            current_leader_epoch: epoch,
            snapshot_id,
            position: 0,
            max_bytes: 100,
            replica_directory_id: directory_id,
        })
    };
    let mut same_disk = raft.clone();
    let work = raft.step(6_500, 3, download(NEW_DISK_3)).unwrap();
    assert!(
        work.iter().any(|w| matches!(
            w,
            Work::SendFetchSnapshotResponse { response, .. } if response.error_code == ErrorCode::None
        )),
        "{work:?}"
    );
    let described = raft.describe_quorum();
    let voter_3 = described
        .current_voters
        .iter()
        .find(|v| v.replica_id == 3)
        .unwrap();
    assert_eq!(
        voter_3.last_fetch_timestamp_ms, voter_3_before.last_fetch_timestamp_ms,
        "the new disk's download is not voter 3's"
    );
    let observer_3 = described
        .observers
        .iter()
        .find(|o| o.replica_id == 3)
        .expect("the new disk downloads as an observer");
    assert_eq!(observer_3.replica_directory_id, NEW_DISK_3);

    // The same download from the disk the voter set names is voter 3's.
    same_disk.step(6_500, 3, download(DISK_3)).unwrap();
    let described = same_disk.describe_quorum();
    let voter_3 = described
        .current_voters
        .iter()
        .find(|v| v.replica_id == 3)
        .unwrap();
    assert_eq!(voter_3.last_fetch_timestamp_ms, Some(6_500));
    assert!(described.observers.iter().all(|o| o.replica_id != 3));
}
