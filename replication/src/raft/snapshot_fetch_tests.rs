//! KIP-630 FetchSnapshot tests: the follower's download and install, the leader's answers,
//! elections while downloading, and two fetch fixes (observer timeouts, unstamped epochs).

use super::*;

fn snapshot_10() -> OffsetAndEpoch {
    OffsetAndEpoch::new(10, 1)
}

/// A Fetch response from leader 1 (epoch 1) naming `snapshot_id`, the leader's log start 10.
fn fetch_response_with_snapshot(correlation_id: u64, snapshot_id: OffsetAndEpoch) -> Message {
    let Message::FetchResponse(mut response) = fetch_response(correlation_id, 12, Bytes::new())
    else {
        unreachable!()
    };
    response.log_start_offset = 10;
    response.snapshot_id = Some(snapshot_id);
    Message::FetchResponse(response)
}

fn snapshot_response(
    correlation_id: u64,
    error_code: ErrorCode,
    size: u64,
    position: u64,
    bytes: &'static [u8],
) -> Message {
    Message::FetchSnapshotResponse(FetchSnapshotResponse {
        correlation_id,
        error_code,
        current_leader: LeaderIdAndEpoch {
            leader_id: Some(1),
            leader_epoch: 1,
        },
        snapshot_id: snapshot_10(),
        size,
        position,
        unaligned_records: Bytes::from_static(bytes),
    })
}

fn expect_fetch_snapshot(work: &[Work], position: u64) -> u64 {
    let [
        ..,
        Work::Send {
            to: 1,
            message: Message::FetchSnapshotRequest(r),
        },
    ] = work
    else {
        panic!("expected a FetchSnapshot last: {work:?}")
    };
    assert_eq!(
        (
            r.replica_id,
            r.current_leader_epoch,
            r.snapshot_id,
            r.position
        ),
        (2, 1, snapshot_10(), position)
    );
    r.correlation_id
}

/// Follower 2 (empty log) told by the leader to load snapshot (10, 1).
fn downloading_follower() -> (Raft, u64) {
    // follower_2 sent its first Fetch (correlation id 1) when it learned of the leader.
    let mut raft = follower_2();
    let work = raft
        .step(21, 1, fetch_response_with_snapshot(1, snapshot_10()))
        .unwrap();
    // KIP-630: log fetching pauses; the snapshot is fetched from position 0.
    assert_eq!(work.len(), 1, "{work:?}");
    let correlation_id = expect_fetch_snapshot(&work, 0);
    (raft, correlation_id)
}

#[test]
fn follower_downloads_the_snapshot_installs_it_and_fetches_from_its_end() {
    let (mut raft, c1) = downloading_follower();
    assert_eq!(
        raft.snapshot_fetch_progress(),
        Some((snapshot_10(), 0, None))
    );
    let work = raft
        .step(22, 1, snapshot_response(c1, ErrorCode::None, 5, 0, b"abc"))
        .unwrap();
    assert_eq!(
        work[0],
        Work::WriteSnapshotChunk {
            snapshot_id: snapshot_10(),
            size_bytes: 5,
            position: 0,
            bytes: Bytes::from_static(b"abc"),
        }
    );
    let c2 = expect_fetch_snapshot(&work, 3);
    assert_eq!(
        raft.log().log_end_offset(),
        0,
        "the log is reset only when complete"
    );
    let work = raft
        .step(23, 1, snapshot_response(c2, ErrorCode::None, 5, 3, b"de"))
        .unwrap();
    let [
        Work::WriteSnapshotChunk { position: 3, .. },
        Work::InstallSnapshot { snapshot_id },
        Work::HighWatermarkChanged { high_watermark: 10 },
        Work::Send {
            to: 1,
            message: Message::FetchRequest(f),
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(*snapshot_id, snapshot_10());
    // KIP-630: fetch from the snapshot's end offset with LastFetchedEpoch = its epoch.
    assert_eq!((f.fetch_offset, f.last_fetched_epoch), (10, 1));
    let log = raft.log();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark()
        ),
        (10, 10, 10)
    );
    assert_eq!(log.log_start_snapshot_id(), Some(snapshot_10()));
    assert_eq!(log.end_offset_and_epoch(), snapshot_10());
    assert_eq!(raft.snapshot_fetch_progress(), None);
}

#[test]
fn snapshot_errors_make_the_follower_rediscover_with_a_fetch() {
    // KIP-630: SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE and NOT_LEADER_OR_FOLLOWER.
    for error in [
        ErrorCode::SnapshotNotFound,
        ErrorCode::PositionOutOfRange,
        ErrorCode::NotLeaderOrFollower,
    ] {
        let (mut raft, c1) = downloading_follower();
        let work = raft
            .step(22, 1, snapshot_response(c1, error, 0, 0, b""))
            .unwrap();
        assert_eq!(work, vec![], "{error:?}: backs off first");
        assert_eq!(raft.snapshot_fetch_progress(), None);
        let (work, _) = raft.tick(1_000).unwrap();
        let [
            Work::Send {
                message: Message::FetchRequest(f),
                ..
            },
        ] = work.as_slice()
        else {
            panic!("{error:?}: {work:?}")
        };
        assert_eq!(f.fetch_offset, 0);
    }
    // A size that changed between two responses (another snapshot under the same id) too.
    let (mut raft, c1) = downloading_follower();
    let work = raft
        .step(22, 1, snapshot_response(c1, ErrorCode::None, 5, 0, b"abc"))
        .unwrap();
    let c2 = expect_fetch_snapshot(&work, 3);
    raft.step(23, 1, snapshot_response(c2, ErrorCode::None, 6, 3, b"de"))
        .unwrap();
    assert_eq!(raft.snapshot_fetch_progress(), None);
    assert_eq!(raft.log().log_end_offset(), 0);
}

#[test]
fn a_new_epoch_drops_the_download() {
    let (mut raft, c1) = downloading_follower();
    let work = raft
        .step(
            22,
            3,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 3,
                leader_epoch: 2,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    // The new leader is asked with a Fetch (after the quorum-state write), not FetchSnapshot.
    assert!(
        work.iter().any(|w| matches!(
            w,
            Work::SendAfterPersist {
                to: 3,
                message: Message::FetchRequest(_)
            }
        )),
        "{work:?}"
    );
    persist_quorum_state(&mut raft, 22, &work);
    assert_eq!(raft.snapshot_fetch_progress(), None);
    // The old leader's late answer is ignored.
    let work = raft
        .step(23, 1, snapshot_response(c1, ErrorCode::None, 5, 0, b"abc"))
        .unwrap();
    assert!(
        !work
            .iter()
            .any(|w| matches!(w, Work::WriteSnapshotChunk { .. })),
        "{work:?}"
    );
}

#[test]
fn a_replica_with_only_an_incomplete_snapshot_votes_as_if_its_log_were_empty() {
    let (mut raft, c1) = downloading_follower();
    raft.step(22, 1, snapshot_response(c1, ErrorCode::None, 5, 0, b"abc"))
        .unwrap();
    assert_eq!(raft.log().end_offset_and_epoch(), OffsetAndEpoch::new(0, 0));
    // Its own view of its log is empty, so a candidate with an empty log gets its vote.
    let work = raft.step(2_000, 3, vote_request(3, 2, 0, 0)).unwrap();
    let granted = work.iter().any(|w| {
        matches!(
            w,
            Work::SendAfterPersist {
                message: Message::VoteResponse(VoteResponse {
                    vote_granted: true,
                    ..
                }),
                ..
            }
        )
    });
    assert!(granted, "{work:?}");
}

/// Leader 1 with the committed log of `committed_leader`-style setup and snapshot (3, 1).
fn leader_with_snapshot_3() -> Raft {
    let mut raft = leader_1();
    raft.append(5_000, vec![client_batch(3)]).unwrap();
    raft.on_persisted(
        5_000,
        Persisted::Log {
            generation: 0,
            end_offset: 4,
        },
    )
    .unwrap();
    raft.step(5_010, 2, Message::FetchRequest(fetch(2, 1, 4, 1)))
        .unwrap();
    raft.on_snapshot_written(5_020, OffsetAndEpoch::new(3, 1))
        .unwrap();
    raft
}

fn fetch_snapshot(epoch: Epoch, snapshot_id: OffsetAndEpoch) -> Message {
    Message::FetchSnapshotRequest(FetchSnapshotRequest {
        correlation_id: 7,
        replica_id: 3,
        current_leader_epoch: epoch,
        snapshot_id,
        position: 2,
        max_bytes: 100,
        replica_directory_id: [0; 16],
    })
}

#[test]
fn leader_answers_fetch_snapshot_after_epoch_and_snapshot_checks() {
    let mut raft = leader_with_snapshot_3();
    let answer = |raft: &mut Raft, epoch, snapshot_id| {
        let work = raft
            .step(5_030, 3, fetch_snapshot(epoch, snapshot_id))
            .unwrap();
        let [
            Work::SendFetchSnapshotResponse {
                to: 3,
                response,
                max_bytes,
            },
        ] = work.as_slice()
        else {
            panic!("{work:?}")
        };
        assert_eq!(
            (
                response.correlation_id,
                response.position,
                response.snapshot_id
            ),
            (7, 2, snapshot_id)
        );
        (response.error_code, *max_bytes)
    };
    let known = OffsetAndEpoch::new(3, 1);
    assert_eq!(answer(&mut raft, 1, known), (ErrorCode::None, 100));
    assert_eq!(
        answer(&mut raft, 1, OffsetAndEpoch::new(2, 1)),
        (ErrorCode::SnapshotNotFound, 0)
    );
    assert_eq!(
        answer(&mut raft, 0, known),
        (ErrorCode::FencedLeaderEpoch, 0)
    );
    assert_eq!(
        answer(&mut raft, 2, known),
        (ErrorCode::UnknownLeaderEpoch, 0)
    );
    // A follower is not the one to ask.
    let mut follower = follower_2();
    let work = follower.step(30, 3, fetch_snapshot(1, known)).unwrap();
    assert!(matches!(
        work.as_slice(),
        [Work::SendFetchSnapshotResponse { response, .. }, ..]
            if response.error_code == ErrorCode::NotLeaderOrFollower
    ));
}

/// ringlog beyond Kafka (docs/snapshots.md): a consumer (ReplicaId -1) reading a snapshot
/// topic's full state fetches the snapshot like a replica, but the leader keeps no progress for
/// it, so it never holds back the log start nor shows up as an observer.
#[test]
fn a_consumer_fetches_a_snapshot_without_becoming_an_observer() {
    let mut raft = leader_with_snapshot_3();
    let Message::FetchSnapshotRequest(mut request) = fetch_snapshot(1, OffsetAndEpoch::new(3, 1))
    else {
        unreachable!()
    };
    request.replica_id = -1;
    let work = raft
        .step(5_030, -1, Message::FetchSnapshotRequest(request))
        .unwrap();
    let [
        Work::SendFetchSnapshotResponse {
            to: -1,
            response,
            max_bytes: 100,
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(response.error_code, ErrorCode::None);
    let described = raft.describe_quorum();
    assert!(described.observers.is_empty(), "{described:?}");
    assert!(
        described.current_voters.iter().all(|v| v.replica_id != -1),
        "{described:?}"
    );
}

#[test]
fn an_observer_whose_fetch_times_out_asks_the_next_voter() {
    let config = QuorumConfig::new(9, &[1, 2, 3]).unwrap();
    let mut observer = Raft::new(config, &RecoveredState::default(), 1, 0).unwrap();
    let mut asked = Vec::new();
    let mut now = 0;
    for _ in 0..3 {
        let (work, next) = observer.tick(now).unwrap();
        for w in &work {
            if let Work::Send {
                to,
                message: Message::FetchRequest(_),
            } = w
            {
                asked.push(*to);
            }
        }
        now = next;
    }
    asked.dedup();
    assert!(
        asked.len() >= 3,
        "every unanswered fetch moves on: {asked:?}"
    );
    assert_ne!(asked[0], asked[1]);
}

#[test]
fn append_accepts_batches_with_partition_leader_epoch_minus_one() {
    // Kafka producers send partitionLeaderEpoch -1; the leader stamps it (outside the CRC).
    let mut raft = leader_1();
    let mut batch = client_batch(2).to_vec();
    batch[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    let (result, _) = raft.append(5_000, vec![Bytes::from(batch)]).unwrap();
    assert_eq!((result.base_offset, result.last_offset), (1, 2));
}
