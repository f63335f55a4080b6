//! The built-in key-value state machine, with Kafka compacted-topic semantics: a key maps to the
//! value of its latest record; a record with a null value (a tombstone) deletes the key.
//!
//! Its snapshot is its key/value set, in key order (so two replicas with the same state write
//! byte-identical snapshot records). Loading it and applying the log from the snapshot's end
//! offset gives exactly the state of a replica that applied the whole log
//! (`replication/tests/state_machine_kv.rs` property-tests that).
//!
//! Records without a key (which a compacted topic would refuse) change nothing; they are still
//! counted as applied, so every replica stays at the same offset.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use ringlog_engine::batch::RecordBatch;
use ringlog_engine::snapshot::{SnapshotContents, SnapshotFormat, SnapshotRecordSink};

use super::{StateMachine, StateMachineError, StateMachineStats};

pub const KV_FORMAT_NAME: &str = "ringlog.kv";
pub const KV_FORMAT_VERSION: i16 = 0;

#[derive(Clone, Debug, Default)]
pub struct KeyValueStateMachine {
    entries: BTreeMap<Bytes, Bytes>,
    last_applied_offset: i64,
    records_since_snapshot: u64,
    bytes_since_snapshot: u64,
    changed_since_snapshot: HashSet<Bytes>,
}

impl KeyValueStateMachine {
    pub fn new() -> KeyValueStateMachine {
        KeyValueStateMachine {
            last_applied_offset: -1,
            ..Default::default()
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&Bytes> {
        self.entries.get(key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The whole state, in key order.
    pub fn entries(&self) -> &BTreeMap<Bytes, Bytes> {
        &self.entries
    }

    fn put(&mut self, key: Bytes, value: Option<Bytes>) {
        match value {
            Some(value) => {
                self.entries.insert(key.clone(), value);
            }
            None => {
                self.entries.remove(&key);
            }
        }
        self.changed_since_snapshot.insert(key);
    }
}

impl StateMachine for KeyValueStateMachine {
    fn snapshot_format(&self) -> SnapshotFormat {
        SnapshotFormat {
            name: KV_FORMAT_NAME.to_string(),
            version: KV_FORMAT_VERSION,
        }
    }

    fn apply(&mut self, batch: &RecordBatch) -> Result<(), StateMachineError> {
        let expected = self.last_applied_offset + 1;
        if batch.base_offset() != expected {
            return Err(StateMachineError::OutOfOrder {
                expected,
                found: batch.base_offset(),
            });
        }
        if !batch.is_control() {
            // Decode everything before changing anything: a bad record leaves the state as it was.
            let records = batch.records()?.collect::<Result<Vec<_>, _>>()?;
            for record in records {
                if let Some(key) = record.key() {
                    self.put(key.clone(), record.value().cloned());
                }
                self.records_since_snapshot += 1;
            }
        }
        self.bytes_since_snapshot += batch.size_bytes() as u64;
        self.last_applied_offset = batch.last_offset();
        Ok(())
    }

    fn last_applied_offset(&self) -> i64 {
        self.last_applied_offset
    }

    fn snapshot_records(&self, sink: &mut dyn SnapshotRecordSink) {
        for (key, value) in &self.entries {
            sink.append_record(Some(key), Some(value));
        }
    }

    fn load_snapshot(&mut self, contents: &SnapshotContents) -> Result<(), StateMachineError> {
        let expected = self.snapshot_format();
        if contents.format.as_ref() != Some(&expected) {
            return Err(StateMachineError::FormatMismatch {
                expected,
                found: contents.format.clone(),
            });
        }
        // Build aside and swap: a bad snapshot leaves the old state untouched.
        let mut entries = BTreeMap::new();
        for (index, record) in contents.records().enumerate() {
            let record = record?;
            let key = record
                .key()
                .cloned()
                .ok_or(StateMachineError::RecordWithoutKey {
                    index: index as u64,
                })?;
            match record.value() {
                Some(value) => entries.insert(key, value.clone()),
                None => entries.remove(&key),
            };
        }
        *self = KeyValueStateMachine {
            entries,
            last_applied_offset: contents.snapshot_id.end_offset - 1,
            ..KeyValueStateMachine::new()
        };
        Ok(())
    }

    fn stats(&self) -> StateMachineStats {
        StateMachineStats {
            records_since_snapshot: self.records_since_snapshot,
            bytes_since_snapshot: self.bytes_since_snapshot,
            changed_keys_since_snapshot: self.changed_since_snapshot.len() as u64,
            keys_count: self.entries.len() as u64,
        }
    }

    fn on_snapshot_taken(&mut self) {
        self.records_since_snapshot = 0;
        self.bytes_since_snapshot = 0;
        self.changed_since_snapshot.clear();
    }
}
