//! The key-value state machine: Kafka compacted-topic semantics, and KIP-630's promise that a
//! snapshot plus the log after it gives the same state as the whole log.
use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use ringlog_engine::batch::RecordBatch;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::batch::control::{LeaderChangeMessage, build_leader_change_batch};
use ringlog_engine::snapshot::{
    SnapshotEncoder, SnapshotFormat, SnapshotId, validate_snapshot_bytes,
};
use ringlog_replication::state_machine::{KeyValueStateMachine, StateMachine, StateMachineError};

/// One record: key index (small, so keys repeat) and value (None: tombstone).
type Op = (u8, Option<Vec<u8>>);

/// Batches at consecutive offsets from 0, epoch 1; `None` entries become control batches.
fn build_log(batches: &[Option<Vec<Op>>]) -> Vec<RecordBatch> {
    let mut offset = 0i64;
    let mut log = Vec::new();
    for batch in batches {
        let built = match batch {
            Some(ops) => {
                let mut builder = RecordBatchBuilder::new(offset).with_leader_epoch(1);
                for (key, value) in ops {
                    builder.append(0, Some(&[b'k', *key]), value.as_deref(), &[]);
                }
                builder.build()
            }
            None => build_leader_change_batch(
                offset,
                1,
                0,
                &LeaderChangeMessage::new(1, vec![1], vec![1]),
            ),
        };
        offset = built.next_offset();
        log.push(built);
    }
    log
}

fn apply_all(sm: &mut KeyValueStateMachine, batches: &[RecordBatch]) {
    for batch in batches {
        sm.apply(batch).unwrap();
    }
}

/// Snapshot `sm` through the engine's encoder and validator (no I/O: both are pure).
fn snapshot_of(sm: &KeyValueStateMachine) -> ringlog_engine::snapshot::SnapshotContents {
    let id = SnapshotId {
        end_offset: sm.last_applied_offset() + 1,
        epoch: 1,
    };
    let mut encoder = SnapshotEncoder::with_batch_size(id, &sm.snapshot_format(), 0, 256);
    sm.snapshot_records(&mut encoder);
    validate_snapshot_bytes(Path::new("/mem"), id, encoder.finish()).unwrap()
}

fn arb_log() -> impl Strategy<Value = Vec<Option<Vec<Op>>>> {
    let op = (
        0u8..12,
        prop::option::weighted(0.75, prop::collection::vec(any::<u8>(), 0..6)),
    );
    let batch = prop::option::weighted(0.9, prop::collection::vec(op, 1..6));
    prop::collection::vec(batch, 1..30)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    // KIP-630: loading the snapshot and replaying the log after its end offset gives exactly the
    // state of a replica that applied the whole log.
    #[test]
    fn snapshot_plus_suffix_equals_whole_log(log in arb_log(), cut in any::<prop::sample::Index>()) {
        let log = build_log(&log);
        let split = cut.index(log.len() + 1);
        let mut whole = KeyValueStateMachine::new();
        apply_all(&mut whole, &log);

        let mut prefix = KeyValueStateMachine::new();
        apply_all(&mut prefix, &log[..split]);
        let contents = snapshot_of(&prefix);

        // Load into a replica that has unrelated state: load clears first.
        let mut restored = KeyValueStateMachine::new();
        apply_all(&mut restored, &build_log(&[Some(vec![(200, Some(vec![1]))])]));
        restored.load_snapshot(&contents).unwrap();
        prop_assert_eq!(restored.entries(), prefix.entries());
        prop_assert_eq!(restored.last_applied_offset(), prefix.last_applied_offset());
        apply_all(&mut restored, &log[split..]);
        prop_assert_eq!(restored.entries(), whole.entries());
        prop_assert_eq!(restored.last_applied_offset(), whole.last_applied_offset());
    }

    // Compacted-topic semantics against a model: latest value wins, a tombstone deletes.
    #[test]
    fn matches_a_map_model(log in arb_log()) {
        let batches = build_log(&log);
        let mut sm = KeyValueStateMachine::new();
        apply_all(&mut sm, &batches);
        let mut model: BTreeMap<Bytes, Bytes> = BTreeMap::new();
        for (key, value) in log.iter().flatten().flatten() {
            let key = Bytes::from(vec![b'k', *key]);
            match value {
                Some(v) => { model.insert(key, Bytes::from(v.clone())); }
                None => { model.remove(&key); }
            }
        }
        prop_assert_eq!(sm.entries(), &model);
    }
}

#[test]
fn batches_must_continue_the_applied_offset() {
    let log = build_log(&[
        Some(vec![(1, Some(vec![1]))]),
        Some(vec![(2, Some(vec![2]))]),
    ]);
    let mut sm = KeyValueStateMachine::new();
    assert_eq!(
        sm.apply(&log[1]),
        Err(StateMachineError::OutOfOrder {
            expected: 0,
            found: 1
        })
    );
    sm.apply(&log[0]).unwrap();
    assert_eq!(
        sm.apply(&log[0]),
        Err(StateMachineError::OutOfOrder {
            expected: 1,
            found: 0
        })
    );
    sm.apply(&log[1]).unwrap();
    assert_eq!(sm.last_applied_offset(), 1);
}

// KIP-630: the header records which format wrote the snapshot; another format is refused and
// the state is left as it was.
#[test]
fn snapshot_of_another_format_is_refused() {
    let mut sm = KeyValueStateMachine::new();
    apply_all(&mut sm, &build_log(&[Some(vec![(1, Some(vec![1]))])]));
    let id = SnapshotId {
        end_offset: 10,
        epoch: 1,
    };
    let other = SnapshotFormat {
        name: "ringlog.kv".into(),
        version: 9,
    };
    let encoder = SnapshotEncoder::new(id, &other, 0);
    let contents = validate_snapshot_bytes(Path::new("/mem"), id, encoder.finish()).unwrap();
    assert!(matches!(
        sm.load_snapshot(&contents),
        Err(StateMachineError::FormatMismatch { .. })
    ));
    assert_eq!(sm.len(), 1);
    assert_eq!(sm.last_applied_offset(), 0);
}

#[test]
fn stats_count_since_the_last_snapshot() {
    let mut sm = KeyValueStateMachine::new();
    apply_all(
        &mut sm,
        &build_log(&[
            Some(vec![(1, Some(vec![1])), (1, Some(vec![2])), (2, None)]),
            None,
        ]),
    );
    let stats = sm.stats();
    assert_eq!(
        (
            stats.records_since_snapshot,
            stats.changed_keys_since_snapshot,
            stats.keys_count
        ),
        (3, 2, 1)
    );
    assert!(stats.bytes_since_snapshot > 0);
    sm.on_snapshot_taken();
    assert_eq!(sm.stats().records_since_snapshot, 0);
    assert_eq!(sm.stats().keys_count, 1);
}
