//! KIP-630 "When to Snapshot", as a pure function of counters and the time.
//!
//! | trigger | condition (all since the latest snapshot) |
//! | --- | --- |
//! | volume | ≥ `controller.snapshot.minimum.records` committed records **and** ≥ `metadata.log.max.record.bytes.between.snapshots` (alias `metadata.snapshot.min.records.size`) bytes |
//! | churn | ≥ `controller.snapshot.minimum.records` committed records **and** changed keys / keys ≥ `metadata.snapshot.min.cleanable.ratio` |
//! | age | `metadata.log.max.snapshot.interval.ms` passed (0 disables) |
//!
//! and in every case: there is committed state the latest snapshot does not hold
//! (`applied end offset > latest snapshot end offset`), and only committed state is snapshotted
//! (the applied end offset is at most the high-watermark; a state machine that applied past it
//! is a bug, refused rather than snapshotted).
//!
//! The churn trigger keeps the record minimum (as KIP-630's earlier revision does: "the update
//! counter is greater than half the cardinality *and* the minimum records") so a tiny state does
//! not snapshot after every record.

/// The snapshot settings, with Kafka's and the KIP's defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotPolicyConfig {
    /// `controller.snapshot.minimum.records` (default 16384).
    pub min_records: u64,
    /// `metadata.log.max.record.bytes.between.snapshots` / `metadata.snapshot.min.records.size`
    /// (default 20 MiB).
    pub min_bytes: u64,
    /// `metadata.snapshot.min.cleanable.ratio` (default 0.5).
    pub min_cleanable_ratio: f64,
    /// `metadata.log.max.snapshot.interval.ms` (default 1 hour; 0 disables).
    pub max_interval_ms: u64,
}

impl Default for SnapshotPolicyConfig {
    fn default() -> Self {
        SnapshotPolicyConfig {
            min_records: 16_384,
            min_bytes: 20 * 1024 * 1024,
            min_cleanable_ratio: 0.5,
            max_interval_ms: 60 * 60 * 1000,
        }
    }
}

/// Where the replica stands. Times come from the caller's (injected) clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotProgress {
    /// `last_applied_offset + 1` of the state machine: the end offset a snapshot now would have.
    pub applied_end_offset: i64,
    pub high_watermark: i64,
    /// End offset of the latest snapshot, 0 if none.
    pub latest_snapshot_end_offset: i64,
    pub records_since_snapshot: u64,
    pub bytes_since_snapshot: u64,
    pub changed_keys_since_snapshot: u64,
    pub keys_count: u64,
    pub now_ms: u64,
    /// When the latest snapshot was taken or loaded (or the replica started).
    pub last_snapshot_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotReason {
    Volume,
    Churn,
    Age,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotDecision {
    Wait,
    /// Take a snapshot with this end offset now.
    Snapshot {
        end_offset: i64,
        reason: SnapshotReason,
    },
    /// The state machine applied past the high-watermark: never snapshot uncommitted state.
    RefuseUncommitted {
        applied_end_offset: i64,
        high_watermark: i64,
    },
}

/// Decide whether to snapshot now. See the module doc for the table.
pub fn decide(config: &SnapshotPolicyConfig, progress: &SnapshotProgress) -> SnapshotDecision {
    if progress.applied_end_offset > progress.high_watermark {
        return SnapshotDecision::RefuseUncommitted {
            applied_end_offset: progress.applied_end_offset,
            high_watermark: progress.high_watermark,
        };
    }
    if progress.applied_end_offset <= progress.latest_snapshot_end_offset {
        return SnapshotDecision::Wait;
    }
    let end_offset = progress.applied_end_offset;
    let enough_records = progress.records_since_snapshot >= config.min_records;
    if enough_records && progress.bytes_since_snapshot >= config.min_bytes {
        return SnapshotDecision::Snapshot {
            end_offset,
            reason: SnapshotReason::Volume,
        };
    }
    // Integer comparison of changed / keys >= ratio, without dividing by an empty state: with no
    // keys left, every change was a deletion and the whole state changed.
    let churned = progress.changed_keys_since_snapshot > 0
        && (progress.keys_count == 0
            || progress.changed_keys_since_snapshot as f64
                >= config.min_cleanable_ratio * progress.keys_count as f64);
    if enough_records && churned {
        return SnapshotDecision::Snapshot {
            end_offset,
            reason: SnapshotReason::Churn,
        };
    }
    if config.max_interval_ms > 0
        && progress.now_ms.saturating_sub(progress.last_snapshot_ms) >= config.max_interval_ms
    {
        return SnapshotDecision::Snapshot {
            end_offset,
            reason: SnapshotReason::Age,
        };
    }
    SnapshotDecision::Wait
}
