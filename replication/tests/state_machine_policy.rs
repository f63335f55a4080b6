//! KIP-630 "When to Snapshot" as a decision table.
use ringlog_replication::state_machine::policy::{
    SnapshotDecision, SnapshotPolicyConfig, SnapshotProgress, SnapshotReason, decide,
};

const MIB: u64 = 1024 * 1024;
const HOUR_MS: u64 = 3_600_000;

/// A replica with committed state beyond its latest snapshot but no trigger met.
fn base() -> SnapshotProgress {
    SnapshotProgress {
        applied_end_offset: 1_000,
        high_watermark: 1_000,
        latest_snapshot_end_offset: 500,
        records_since_snapshot: 100,
        bytes_since_snapshot: MIB,
        changed_keys_since_snapshot: 10,
        keys_count: 1_000,
        now_ms: 10_000,
        last_snapshot_ms: 0,
    }
}

#[test]
fn decision_table() {
    let config = SnapshotPolicyConfig::default();
    assert_eq!(config.min_records, 16_384);
    assert_eq!(config.min_bytes, 20 * MIB);
    assert_eq!(config.min_cleanable_ratio, 0.5);
    assert_eq!(config.max_interval_ms, HOUR_MS);
    let snapshot = |reason| SnapshotDecision::Snapshot {
        end_offset: 1_000,
        reason,
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, SnapshotProgress, SnapshotDecision)> = vec![
        ("nothing triggers", base(), SnapshotDecision::Wait),
        ("records and bytes both reached",
         SnapshotProgress { records_since_snapshot: 16_384, bytes_since_snapshot: 20 * MIB, ..base() }, snapshot(SnapshotReason::Volume)),
        ("records reached, bytes not",
         SnapshotProgress { records_since_snapshot: 16_384, bytes_since_snapshot: 20 * MIB - 1, ..base() }, SnapshotDecision::Wait),
        ("bytes reached, records not",
         SnapshotProgress { records_since_snapshot: 16_383, bytes_since_snapshot: 20 * MIB, ..base() }, SnapshotDecision::Wait),
        ("half the keys changed with enough records",
         SnapshotProgress { records_since_snapshot: 16_384, changed_keys_since_snapshot: 500, ..base() }, snapshot(SnapshotReason::Churn)),
        ("just under half the keys changed",
         SnapshotProgress { records_since_snapshot: 16_384, changed_keys_since_snapshot: 499, ..base() }, SnapshotDecision::Wait),
        ("every key changed but few records (tiny state)",
         SnapshotProgress { records_since_snapshot: 10, changed_keys_since_snapshot: 1_000, ..base() }, SnapshotDecision::Wait),
        ("every key deleted with enough records",
         SnapshotProgress { records_since_snapshot: 16_384, changed_keys_since_snapshot: 3, keys_count: 0, ..base() }, snapshot(SnapshotReason::Churn)),
        ("an hour passed",
         SnapshotProgress { now_ms: HOUR_MS, last_snapshot_ms: 0, ..base() }, snapshot(SnapshotReason::Age)),
        ("an hour minus 1 ms",
         SnapshotProgress { now_ms: HOUR_MS - 1, last_snapshot_ms: 0, ..base() }, SnapshotDecision::Wait),
        ("an hour passed but nothing new since the snapshot",
         SnapshotProgress { now_ms: 2 * HOUR_MS, latest_snapshot_end_offset: 1_000, ..base() }, SnapshotDecision::Wait),
        ("every trigger but nothing new",
         SnapshotProgress { records_since_snapshot: 1 << 30, bytes_since_snapshot: 1 << 40, latest_snapshot_end_offset: 1_000, ..base() }, SnapshotDecision::Wait),
        ("applied past the high-watermark: never snapshot uncommitted state",
         SnapshotProgress { high_watermark: 999, records_since_snapshot: 1 << 30, bytes_since_snapshot: 1 << 40, ..base() },
         SnapshotDecision::RefuseUncommitted { applied_end_offset: 1_000, high_watermark: 999 }),
        ("clock went backwards: no age trigger",
         SnapshotProgress { now_ms: 5, last_snapshot_ms: 10, ..base() }, SnapshotDecision::Wait),
    ];
    for (name, progress, expected) in cases {
        assert_eq!(decide(&config, &progress), expected, "{name}");
    }
}

#[test]
fn interval_zero_disables_the_age_trigger() {
    let config = SnapshotPolicyConfig {
        max_interval_ms: 0,
        ..SnapshotPolicyConfig::default()
    };
    let progress = SnapshotProgress {
        now_ms: 100 * HOUR_MS,
        ..base()
    };
    assert_eq!(decide(&config, &progress), SnapshotDecision::Wait);
}
