//! KIP-630 state machines: what applies committed batches, writes snapshots and loads them.
//!
//! The trait is pure: it sees batches and snapshot records in memory and writes its snapshot into
//! a [`SnapshotRecordSink`]; the node does the I/O with the engine
//! (`ringlog_engine::snapshot::{write_snapshot, latest_valid_snapshot, ...}`).
//!
//! The life of a replica's state machine (KIP-630 "Loading Snapshots"):
//! 1. at start: `load_snapshot(latest valid snapshot)` if there is one, then `apply` every
//!    committed batch from the snapshot's end offset up to the high-watermark;
//! 2. while running: `apply` each batch once the high-watermark passes it, in offset order;
//! 3. when [`policy::decide`] says so: `snapshot_records` into the engine's writer, then
//!    `on_snapshot_taken` once the file is frozen;
//! 4. when a follower finished fetching a newer snapshot: `load_snapshot` (which clears first),
//!    then `apply` from its end offset.

pub mod kv;
pub mod policy;

use ringlog_engine::batch::{BatchError, RecordBatch};
use ringlog_engine::snapshot::{SnapshotContents, SnapshotFormat, SnapshotRecordSink};

pub use kv::KeyValueStateMachine;
pub use policy::{SnapshotDecision, SnapshotPolicyConfig, SnapshotProgress, SnapshotReason};

/// Counters a state machine keeps since its last snapshot, for [`policy::decide`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateMachineStats {
    /// Records applied since the last snapshot (or since empty).
    pub records_since_snapshot: u64,
    /// Bytes of batches applied since the last snapshot.
    pub bytes_since_snapshot: u64,
    /// Distinct keys written or deleted since the last snapshot.
    pub changed_keys_since_snapshot: u64,
    /// Keys in the state now (its cardinality).
    pub keys_count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateMachineError {
    /// Batches must be applied in offset order, each continuing the last applied offset.
    #[error("batch at offset {found} does not continue the applied offset (expected {expected})")]
    OutOfOrder { expected: i64, found: i64 },
    #[error("snapshot format {found:?} cannot be loaded by {expected:?}")]
    FormatMismatch {
        expected: SnapshotFormat,
        found: Option<SnapshotFormat>,
    },
    #[error("snapshot record {index} has no key")]
    RecordWithoutKey { index: u64 },
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// A replicated state machine (KIP-630 "Interaction Between Kafka Raft and the State Machine").
pub trait StateMachine {
    /// The format written into the snapshot header; `load_snapshot` refuses any other.
    fn snapshot_format(&self) -> SnapshotFormat;

    /// Apply one committed batch. Batches come in offset order, control batches included (they
    /// change no state but advance the applied offset).
    fn apply(&mut self, batch: &RecordBatch) -> Result<(), StateMachineError>;

    /// Offset of the last applied record; -1 when nothing was applied. A snapshot taken now has
    /// end offset `last_applied_offset() + 1`.
    fn last_applied_offset(&self) -> i64;

    /// Write the state as of `last_applied_offset` into `sink` (the state machine chooses the
    /// records; the header names the format).
    fn snapshot_records(&self, sink: &mut dyn SnapshotRecordSink);

    /// Clear, then load a validated snapshot; afterwards `last_applied_offset` is the snapshot's
    /// end offset − 1.
    fn load_snapshot(&mut self, contents: &SnapshotContents) -> Result<(), StateMachineError>;

    /// Counters for the snapshot policy.
    fn stats(&self) -> StateMachineStats;

    /// The snapshot taken at `snapshot_records` is frozen: reset the counters.
    fn on_snapshot_taken(&mut self);
}
