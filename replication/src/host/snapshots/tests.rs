//! The per-partition bookkeeping every snapshotted partition shares (the metadata partition
//! and each `cleanup.policy=snapshot` topic partition), without a host: the snapshot's
//! epoch, one generation at a time, and how a writer's report updates the latest snapshot.

use super::*;
use ringlog_engine::batch::RecordBatchBuilder;

/// Policy: a snapshot after every 3 records (any byte count), no age trigger.
fn every_three_records() -> SnapshotPolicyConfig {
    SnapshotPolicyConfig {
        min_records: 3,
        min_bytes: 1,
        min_cleanable_ratio: 0.5,
        max_interval_ms: 0,
    }
}

/// Applies one batch of `records` (key, value) at `base_offset`.
fn apply(snapshots: &mut PartitionSnapshots, base_offset: i64, records: &[(&str, Option<&str>)]) {
    let mut builder = RecordBatchBuilder::new(base_offset).with_leader_epoch(2);
    for (key, value) in records {
        builder.append(0, Some(key.as_bytes()), value.map(str::as_bytes), &[]);
    }
    snapshots.state_machine.apply(&builder.build()).unwrap();
}

#[test]
fn a_snapshot_carries_the_epoch_of_the_record_below_its_end_offset() {
    let cache = [
        OffsetAndEpoch::new(0, 1),
        OffsetAndEpoch::new(100, 2),
        OffsetAndEpoch::new(250, 3),
    ];
    assert_eq!(
        epoch_before(&cache, 100, None),
        1,
        "record 99 is of epoch 1"
    );
    assert_eq!(epoch_before(&cache, 101, None), 2);
    assert_eq!(epoch_before(&cache, 251, None), 3);
    // The cache starts at the log start: below it, the latest snapshot's epoch holds.
    let trimmed = [OffsetAndEpoch::new(300, 4)];
    let latest = Some(OffsetAndEpoch::new(300, 3));
    assert_eq!(epoch_before(&trimmed, 300, latest), 3);
    assert_eq!(epoch_before(&[], 0, None), 0);
}

#[test]
fn one_generation_at_a_time_and_the_report_makes_it_the_latest() {
    let policy = every_three_records();
    let cache = [OffsetAndEpoch::new(0, 2)];
    let mut snapshots = PartitionSnapshots {
        state_machine: KeyValueStateMachine::new(),
        ..Default::default()
    };
    apply(&mut snapshots, 0, &[("a", Some("1")), ("b", Some("1"))]);
    assert!(
        snapshots
            .maybe_begin_generation(&policy, 2, &cache, 10)
            .is_none(),
        "two records are under the minimum"
    );
    apply(&mut snapshots, 2, &[("a", Some("2")), ("b", None)]);
    // KIP-630: only committed state: the policy refuses state past the high-watermark.
    assert!(
        snapshots
            .maybe_begin_generation(&policy, 3, &cache, 10)
            .is_none(),
        "state past the high-watermark is refused"
    );
    let (job, _) = snapshots
        .maybe_begin_generation(&policy, 4, &cache, 10)
        .expect("four committed records");
    assert_eq!(job.snapshot_id, OffsetAndEpoch::new(4, 2));
    let expected: Vec<(&[u8], &[u8])> = vec![(b"a", b"2")];
    let taken: Vec<(&[u8], &[u8])> = job
        .entries
        .iter()
        .map(|(k, v)| (k.as_ref(), v.as_ref()))
        .collect();
    assert_eq!(
        taken, expected,
        "the state at the end offset, tombstone applied"
    );
    // While the writer runs, the policy is not asked again, however much arrives.
    apply(
        &mut snapshots,
        4,
        &[("c", Some("1")), ("d", Some("1")), ("e", Some("1"))],
    );
    assert!(
        snapshots
            .maybe_begin_generation(&policy, 7, &cache, 20)
            .is_none()
    );
    assert_eq!(
        snapshots.finish_generation(job.snapshot_id, Ok(())),
        GenerationOutcome::Taken
    );
    assert_eq!(snapshots.latest_snapshot_id, Some(job.snapshot_id));
    assert_eq!(snapshots.written, vec![job.snapshot_id]);
    // The counters restarted at offset 4: the three records since then make the next one.
    let (next, _) = snapshots
        .maybe_begin_generation(&policy, 7, &cache, 30)
        .expect("three records since the snapshot");
    assert_eq!(next.snapshot_id, OffsetAndEpoch::new(7, 2));
    assert_eq!(next.entries.len(), 4);
}

#[test]
fn an_asked_for_generation_takes_the_state_only_where_the_state_machine_stands() {
    let cache = [OffsetAndEpoch::new(0, 2)];
    let mut snapshots = PartitionSnapshots {
        state_machine: KeyValueStateMachine::new(),
        ..Default::default()
    };
    apply(&mut snapshots, 0, &[("a", Some("1")), ("b", Some("1"))]);
    // KIP-630: the state at offset 1 is not at hand (the machine stands at 2).
    assert!(snapshots.begin_generation_at(1, 2, &cache, 10).is_none());
    // Not committed yet.
    assert!(snapshots.begin_generation_at(2, 1, &cache, 10).is_none());
    // Two records are under any policy minimum, but asked for: taken.
    let job = snapshots
        .begin_generation_at(2, 2, &cache, 10)
        .expect("the state at 2");
    assert_eq!(job.snapshot_id, OffsetAndEpoch::new(2, 2));
    assert_eq!(job.entries.len(), 2);
    // One generation at a time.
    apply(&mut snapshots, 2, &[("c", Some("1"))]);
    assert!(snapshots.begin_generation_at(3, 3, &cache, 10).is_none());
    assert_eq!(
        snapshots.finish_generation(job.snapshot_id, Ok(())),
        GenerationOutcome::Taken
    );
    // Not at or below the latest snapshot.
    assert!(snapshots.begin_generation_at(2, 3, &cache, 10).is_none());
    assert!(snapshots.begin_generation_at(3, 3, &cache, 10).is_some());
}

#[test]
fn a_failed_or_superseded_generation_leaves_the_latest_snapshot_alone() {
    let policy = every_three_records();
    let cache = [OffsetAndEpoch::new(0, 1)];
    let mut snapshots = PartitionSnapshots {
        state_machine: KeyValueStateMachine::new(),
        ..Default::default()
    };
    apply(
        &mut snapshots,
        0,
        &[("a", Some("1")), ("b", Some("1")), ("c", Some("1"))],
    );
    let (job, _) = snapshots
        .maybe_begin_generation(&policy, 3, &cache, 0)
        .unwrap();
    let failed = snapshots.finish_generation(job.snapshot_id, Err("disk full".into()));
    assert_eq!(failed, GenerationOutcome::Failed("disk full".into()));
    assert_eq!(snapshots.latest_snapshot_id, None);
    assert!(snapshots.written.is_empty());
    // The counters restarted when the state was taken: a retry needs new records.
    assert!(
        snapshots
            .maybe_begin_generation(&policy, 3, &cache, 0)
            .is_none()
    );
    apply(
        &mut snapshots,
        3,
        &[("d", Some("1")), ("e", Some("1")), ("f", Some("1"))],
    );
    let (job, _) = snapshots
        .maybe_begin_generation(&policy, 6, &cache, 0)
        .unwrap();
    // A newer snapshot was fetched from the leader and installed while the writer ran.
    let installed = OffsetAndEpoch::new(9, 1);
    snapshots.latest_snapshot_id = Some(installed);
    assert_eq!(
        snapshots.finish_generation(job.snapshot_id, Ok(())),
        GenerationOutcome::Superseded
    );
    assert_eq!(snapshots.latest_snapshot_id, Some(installed));
    assert!(
        snapshots.written.is_empty(),
        "the core is told only of the latest"
    );
}

/// A snapshot carries the runtime's producer state after its header, as a `ProducerState`
/// control record (docs/snapshots.md): it reads back apart from the state machine's records,
/// which load as before; a snapshot without one (as written before it existed) still loads and
/// carries none.
#[test]
fn a_snapshot_carries_the_producer_state_apart_from_the_state_machines_records() {
    let folder = tempfile::tempdir().unwrap();
    let mut io = ringlog_engine::io::SyscallIo::new();
    let mut entries = std::collections::BTreeMap::new();
    entries.insert(Bytes::from_static(b"k"), Bytes::from_static(b"v"));
    let state = Bytes::from_static(b"the runtime's encoding");
    for (end_offset, producer_state) in [(5, None), (9, Some(state))] {
        let job = SnapshotJob {
            snapshot_id: OffsetAndEpoch::new(end_offset, 2),
            format: KeyValueStateMachine::new().snapshot_format(),
            entries: entries.clone(),
            voters: None,
            producer_state,
        };
        write_snapshot_job(&mut io, folder.path(), &job, 1).unwrap();
        let (contents, skipped) = latest_valid_snapshot(&mut io, folder.path()).unwrap();
        assert!(skipped.is_empty());
        let contents = contents.expect("the snapshot just written");
        assert_eq!(contents.snapshot_id, engine_id(job.snapshot_id));
        assert_eq!(producer_state_of_snapshot(&contents), job.producer_state);
        assert_eq!(
            contents.records_count, 1,
            "the record is not the state machine's"
        );
        let mut state_machine = KeyValueStateMachine::new();
        state_machine.load_snapshot(&contents).unwrap();
        assert_eq!(state_machine.entries(), &entries);
    }
}

/// A leader's FetchSnapshot answers of one snapshot carry the one reader the host keeps for it
/// (no open per answer), with the file's bytes; the reader goes when the snapshot is deleted
/// (a newer one at the log start) and the next answer for it is SNAPSHOT_NOT_FOUND, while a
/// clone a queued reply holds still reads the deleted file's bytes.
#[test]
fn fetch_snapshot_answers_share_the_served_snapshots_reader() {
    use crate::message::{FetchSnapshotResponse, LeaderIdAndEpoch};
    use crate::types::QuorumConfig;
    use ringlog_engine::io::SyscallIo;
    use ringlog_engine::log::LogConfig;

    let folder = tempfile::tempdir().unwrap();
    let dir = folder.path().join("p");
    let quorum = QuorumConfig::new(1, &[1]).expect("one voter");
    let config = super::super::HostConfig::new(
        "cluster".to_string(),
        vec![1],
        every_three_records(),
        1 << 20,
    );
    let spec = super::super::PartitionSpec {
        id: 0,
        dir: dir.clone(),
        log_config: LogConfig::default(),
        keeps_snapshots: true,
    };
    let mut host = Host::open(SyscallIo::new(), config, &quorum, vec![spec], 7, 0).expect("open");
    let mut entries = std::collections::BTreeMap::new();
    for i in 0..200u32 {
        entries.insert(
            Bytes::from(format!("key-{i}")),
            Bytes::from(vec![i as u8; 100]),
        );
    }
    let job = |end_offset| SnapshotJob {
        snapshot_id: OffsetAndEpoch::new(end_offset, 1),
        format: KeyValueStateMachine::new().snapshot_format(),
        entries: entries.clone(),
        voters: None,
        producer_state: None,
    };
    let old = job(5);
    write_snapshot_job(host.io_mut(), &dir, &old, 1).unwrap();
    let path = dir
        .join("checkpoints")
        .join(format!("{:020}-{:020}.checkpoint", 5, 1));
    let file_bytes = std::fs::read(&path).unwrap();
    assert!(file_bytes.len() > 2 * 4096, "{} bytes", file_bytes.len());

    let answer = |host: &mut Host<SyscallIo>, snapshot_id, position| {
        let mut response = FetchSnapshotResponse {
            correlation_id: 0,
            error_code: ErrorCode::None,
            current_leader: LeaderIdAndEpoch {
                leader_id: Some(1),
                leader_epoch: 1,
            },
            snapshot_id,
            size: 0,
            position,
            unaligned_records: Bytes::new(),
        };
        let range = host.fill_fetch_snapshot_response(0, &mut response, 4096);
        (response, range)
    };
    let (first, range_a) = answer(&mut host, old.snapshot_id, 0);
    let (second, range_b) = answer(&mut host, old.snapshot_id, 4096);
    assert_eq!(first.error_code, ErrorCode::None);
    assert_eq!(first.size, file_bytes.len() as u64);
    assert_eq!(second.size, file_bytes.len() as u64);
    let (range_a, range_b) = (range_a.unwrap(), range_b.unwrap());
    assert_eq!(range_a.path, path);
    let (reader_a, reader_b) = (
        range_a.reader.clone().unwrap(),
        range_b.reader.clone().unwrap(),
    );
    assert!(std::sync::Arc::ptr_eq(reader_a.file(), reader_b.file()));
    assert_eq!((range_b.position, range_b.length), (4096, 4096));
    assert_eq!(
        host.read_file_range(&range_b).unwrap(),
        file_bytes[4096..8192]
    );
    let (past_end, none) = answer(&mut host, old.snapshot_id, file_bytes.len() as u64 + 1);
    assert_eq!(past_end.error_code, ErrorCode::PositionOutOfRange);
    assert!(none.is_none());

    // A newer snapshot at the log start: the old one is deleted and the host's reader dropped.
    assert_eq!(
        std::sync::Arc::strong_count(reader_a.file()),
        5,
        "the host's, the two ranges' and the two clones here"
    );
    let new = job(9);
    write_snapshot_job(host.io_mut(), &dir, &new, 2).unwrap();
    host.delete_old_snapshots(0, new.snapshot_id).unwrap();
    assert!(!path.exists(), "{path:?} deleted");
    assert_eq!(
        std::sync::Arc::strong_count(reader_a.file()),
        4,
        "the host's is gone"
    );
    assert_eq!(host.read_file_range(&range_a).unwrap(), file_bytes[..4096]);
    let (gone, none) = answer(&mut host, old.snapshot_id, 0);
    assert_eq!(gone.error_code, ErrorCode::SnapshotNotFound);
    assert!(none.is_none());
    let (newer, range) = answer(&mut host, new.snapshot_id, 0);
    assert_eq!(newer.error_code, ErrorCode::None);
    let reader = range.unwrap().reader.unwrap();
    assert!(!std::sync::Arc::ptr_eq(reader.file(), reader_a.file()));
}
