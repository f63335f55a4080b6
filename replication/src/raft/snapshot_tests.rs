//! KIP-630 handler tests: snapshots reported written, the log start offset, and Fetch below it.

use super::*;

/// Leader 1 of epoch 1 with the LeaderChange record and a 3-record batch (offsets 0..=3),
/// all durable and committed by node 2's fetch at 4; node 3 has fetched only offset 1.
fn committed_leader() -> Raft {
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
    raft.step(5_020, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    assert_eq!(raft.high_watermark(), 4);
    raft
}

fn snapshot_3() -> OffsetAndEpoch {
    OffsetAndEpoch::new(3, 1)
}

#[test]
fn a_snapshot_past_the_high_watermark_is_a_typed_error() {
    let mut raft = committed_leader();
    assert_eq!(
        raft.on_snapshot_written(5_030, OffsetAndEpoch::new(5, 1)),
        Err(RaftError::SnapshotPastHighWatermark {
            snapshot_end_offset: 5,
            high_watermark: 4
        })
    );
    assert_eq!(raft.log().latest_snapshot_id(), None);
}

#[test]
fn leader_advances_the_log_start_once_every_live_replica_fetched_past_the_snapshot() {
    let mut raft = committed_leader();
    // Node 3 (live, at offset 1) still needs records below 3: the log start stays.
    assert_eq!(
        raft.on_snapshot_written(5_030, snapshot_3()).unwrap(),
        vec![]
    );
    assert_eq!(raft.log().log_start_offset(), 0);
    assert_eq!(raft.log().latest_snapshot_id(), Some(snapshot_3()));
    // Node 3 catches up (its fetch at the log end parks): now the start moves.
    let work = raft
        .step(5_040, 3, Message::FetchRequest(fetch(3, 1, 4, 1)))
        .unwrap();
    assert_eq!(
        work,
        vec![
            Work::AdvanceLogStartOffset { offset: 3 },
            Work::DeleteSnapshotsBefore {
                snapshot_id: snapshot_3()
            },
        ]
    );
    assert_eq!(raft.log().log_start_offset(), 3);
    assert_eq!(raft.log().log_start_snapshot_id(), Some(snapshot_3()));
    // Reporting the same snapshot again changes nothing.
    assert_eq!(
        raft.on_snapshot_written(5_041, snapshot_3()).unwrap(),
        vec![]
    );
}

#[test]
fn leader_answers_a_fetch_below_its_log_start_with_the_latest_snapshot_id() {
    let mut raft = committed_leader();
    raft.step(5_040, 3, Message::FetchRequest(fetch(3, 1, 4, 1)))
        .unwrap();
    raft.on_snapshot_written(5_050, snapshot_3()).unwrap();
    assert_eq!(raft.log().log_start_offset(), 3);
    let expected = |correlation_id, fetch_offset, snapshot_id| {
        vec![Work::SendFetchResponse {
            to: 3,
            response: FetchResponse {
                correlation_id,
                error_code: ErrorCode::None,
                current_leader: LeaderIdAndEpoch {
                    leader_id: Some(1),
                    leader_epoch: 1,
                },
                high_watermark: 4,
                log_start_offset: 3,
                diverging_epoch: None,
                snapshot_id,
                records: Bytes::new(),
            },
            fetch_offset,
            max_bytes: if snapshot_id.is_some() { 0 } else { 1024 },
        }]
    };
    // Below the log start, and at it in an older epoch than the snapshot's: the snapshot.
    for (offset, epoch) in [(2, 1), (0, 0), (3, 0)] {
        let work = raft
            .step(5_060, 3, Message::FetchRequest(fetch(3, 1, offset, epoch)))
            .unwrap();
        assert_eq!(
            work,
            expected(9, offset, Some(snapshot_3())),
            "({offset}, {epoch})"
        );
    }
    // At the snapshot's end in its epoch: records from there.
    let work = raft
        .step(5_070, 3, Message::FetchRequest(fetch(3, 1, 3, 1)))
        .unwrap();
    assert_eq!(work, expected(9, 3, None));
}

#[test]
fn leader_advances_the_log_start_past_a_lagging_replica_after_max_replication_lag() {
    let mut raft = committed_leader();
    raft.config.max_replication_lag_ms = 100;
    assert_eq!(
        raft.on_snapshot_written(5_030, snapshot_3()).unwrap(),
        vec![]
    );
    assert!(raft.next_deadline_ms() <= 5_130);
    let (work, _) = raft.tick(5_129).unwrap();
    assert_eq!(work, vec![]);
    let (work, _) = raft.tick(5_130).unwrap();
    assert_eq!(
        work,
        vec![
            Work::AdvanceLogStartOffset { offset: 3 },
            Work::DeleteSnapshotsBefore {
                snapshot_id: snapshot_3()
            },
        ]
    );
}

#[test]
fn a_replica_that_stopped_fetching_does_not_hold_the_log_start_back() {
    let mut raft = committed_leader();
    // Node 3 last fetched at 5_020; past the fetch timeout it no longer counts as live.
    raft.step(7_025, 2, Message::FetchRequest(fetch(2, 1, 4, 1)))
        .unwrap();
    let work = raft.on_snapshot_written(7_030, snapshot_3()).unwrap();
    assert_eq!(
        work,
        vec![
            Work::AdvanceLogStartOffset { offset: 3 },
            Work::DeleteSnapshotsBefore {
                snapshot_id: snapshot_3()
            },
        ]
    );
}

fn fetch_response_with_start(
    correlation_id: u64,
    high_watermark: u64,
    log_start_offset: u64,
    records: Bytes,
) -> Message {
    let Message::FetchResponse(mut response) =
        fetch_response(correlation_id, high_watermark, records)
    else {
        unreachable!()
    };
    response.log_start_offset = log_start_offset;
    Message::FetchResponse(response)
}

#[test]
fn follower_advances_its_log_start_to_its_snapshot_once_the_leader_has() {
    let mut raft = follower_2();
    let records = stamp_batch(&client_batch(4), 0, 1);
    raft.step(20, 1, fetch_response(1, 0, records)).unwrap();
    raft.on_persisted(
        21,
        Persisted::Log {
            generation: 0,
            end_offset: 4,
        },
    )
    .unwrap();
    raft.step(22, 1, fetch_response(2, 4, Bytes::new()))
        .unwrap();
    assert_eq!(raft.high_watermark(), 4);
    // The leader still starts at 0: the follower keeps its records.
    assert_eq!(raft.on_snapshot_written(23, snapshot_3()).unwrap(), vec![]);
    assert_eq!(raft.log().log_start_offset(), 0);
    // The leader's log start reached 3: the follower's moves to its snapshot there.
    let work = raft
        .step(24, 1, fetch_response_with_start(3, 4, 3, Bytes::new()))
        .unwrap();
    let [
        Work::AdvanceLogStartOffset { offset: 3 },
        Work::DeleteSnapshotsBefore { snapshot_id },
        Work::Send {
            to: 1,
            message: Message::FetchRequest(f),
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(*snapshot_id, snapshot_3());
    assert_eq!((f.fetch_offset, f.last_fetched_epoch), (4, 1));
    assert_eq!(raft.log().log_start_offset(), 3);
}

#[test]
fn follower_keeps_records_its_snapshot_does_not_cover() {
    let mut raft = follower_2();
    let records = stamp_batch(&client_batch(4), 0, 1);
    raft.step(20, 1, fetch_response(1, 0, records)).unwrap();
    raft.on_persisted(
        21,
        Persisted::Log {
            generation: 0,
            end_offset: 4,
        },
    )
    .unwrap();
    raft.step(22, 1, fetch_response(2, 4, Bytes::new()))
        .unwrap();
    raft.on_snapshot_written(23, OffsetAndEpoch::new(2, 1))
        .unwrap();
    // The leader starts at 1, below our snapshot at 2: moving to 2 would drop records the
    // leader still serves; moving to 1 would leave no snapshot at the start. Stay.
    let work = raft
        .step(24, 1, fetch_response_with_start(3, 4, 1, Bytes::new()))
        .unwrap();
    assert!(matches!(work.as_slice(), [Work::Send { .. }]), "{work:?}");
    assert_eq!(raft.log().log_start_offset(), 0);
}

fn recovered_at_snapshot_3() -> RecoveredState {
    RecoveredState {
        repair_pending: false,
        election: ElectionState {
            epoch: 1,
            leader_id: None,
            voted_for: None,
        },
        log_start_offset: 3,
        log_end_offset: 3,
        epoch_cache: Vec::new(),
    }
}

#[test]
fn a_replica_restarted_on_a_snapshot_votes_and_fetches_with_the_snapshot_id() {
    let snapshots = RecoveredSnapshots {
        log_start_snapshot_id: Some(snapshot_3()),
        latest_snapshot_id: Some(snapshot_3()),
    };
    let mut raft =
        Raft::new_with_snapshots(config(2), &recovered_at_snapshot_3(), snapshots, 42, 0).unwrap();
    assert_eq!(raft.log().end_offset_and_epoch(), snapshot_3());
    assert_eq!(raft.high_watermark(), 3);
    // A candidate whose log ends before the snapshot is less up to date; one at it is not.
    let work = raft.step(10, 3, vote_request(3, 2, 1, 2)).unwrap();
    assert_eq!(
        work,
        vec![
            Work::WriteQuorumState(ElectionState {
                epoch: 2,
                leader_id: None,
                voted_for: None
            }),
            Work::SendAfterPersist {
                to: 3,
                message: vote_response(false, 2, None)
            },
        ]
    );
    let work = raft.step(11, 1, vote_request(1, 2, 1, 3)).unwrap();
    assert_eq!(
        work,
        vec![
            Work::WriteQuorumState(ElectionState {
                epoch: 2,
                leader_id: None,
                voted_for: Some(1)
            }),
            Work::SendAfterPersist {
                to: 1,
                message: vote_response(true, 2, None)
            },
        ]
    );
    // As a follower it fetches from the snapshot's end in the snapshot's epoch.
    let work = raft
        .step(
            12,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 2,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    let Some(Work::SendAfterPersist {
        message: Message::FetchRequest(f),
        ..
    }) = work.last()
    else {
        panic!("{work:?}")
    };
    assert_eq!((f.fetch_offset, f.last_fetched_epoch), (3, 1));
}

#[test]
fn recovered_snapshots_must_fit_the_log() {
    let new = |snapshots| {
        Raft::new_with_snapshots(config(2), &recovered_at_snapshot_3(), snapshots, 42, 0).err()
    };
    let invalid = |reason| Some(RaftError::InvalidRecoveredState(reason));
    assert_eq!(
        new(RecoveredSnapshots::default()),
        invalid("a log starting above 0 needs the snapshot at its start")
    );
    assert_eq!(
        new(RecoveredSnapshots {
            log_start_snapshot_id: Some(OffsetAndEpoch::new(2, 1)),
            latest_snapshot_id: None,
        }),
        invalid("the log start snapshot does not end at the log start offset")
    );
    assert_eq!(
        new(RecoveredSnapshots {
            log_start_snapshot_id: Some(snapshot_3()),
            latest_snapshot_id: Some(OffsetAndEpoch::new(5, 1)),
        }),
        invalid("the latest snapshot ends past the log end")
    );
}
