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
