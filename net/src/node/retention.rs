//! Retention for `cleanup.policy=delete` topics: whole segments go from the start of a
//! partition's log when the partition is larger than `retention.bytes`, or when a segment is
//! older than `retention.ms`.
//!
//! In Raft the log start may only move where a lagging replica can still catch up, so this
//! reuses KIP-630's machinery instead of deleting files behind the core's back: each replica
//! (leader and followers alike, each on its own log) picks the new log start at a segment
//! boundary at or below its high-watermark, and records an **empty snapshot** there (no
//! records: a delete topic has no state to carry, only a point to resume from). It reports the
//! snapshot to the core like any other (`on_snapshot_written`, via `snapshots.written`), and
//! the core's own rules (replication/src/raft/snapshot.rs) decide when the log start follows:
//! the leader once every live replica fetched past it (or `max.replication.lag.ms` passed), a
//! follower once the leader's log start reached it. Then `Work::AdvanceLogStartOffset` deletes
//! the segments (snapshots.rs). A replica fetching below the new start is answered with the
//! SnapshotId and catches up through FetchSnapshot; a consumer gets OFFSET_OUT_OF_RANGE, and
//! ListOffsets earliest answers the new start.
//!
//! The check runs at most once per [`RETENTION_CHECK_INTERVAL_MS`] (Kafka's
//! `log.retention.check.interval.ms`, 5 minutes by default, is not a node property here).
//! The active (last) segment is never deleted.
//!
//! Age: Kafka measures a segment's age by its largest record timestamp (KIP-33's time index);
//! the engine keeps no time index, so a segment's age is its file's modification time, which
//! is the time of its last append (Kafka's rule before KIP-33).

use std::path::Path;

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;
use ringlog_replication::{OffsetAndEpoch, PartitionId};

use super::partition_table::PartitionTable;
use super::topic_record::TopicConfig;
use super::topics::Topics;

/// How often the retention rules are checked.
pub const RETENTION_CHECK_INTERVAL_MS: u64 = 1000;

/// One segment as retention sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base_offset: u64,
    pub size_bytes: u64,
}

/// The log start offset retention moves to, if any: the base offset of the first segment
/// kept. Segments go from the oldest while the partition stays above `retention.bytes`
/// without them, or while they are older than `retention.ms`; never the last segment, and
/// never past `high_watermark` (only committed records may be cut: a snapshot is committed).
/// `last_modified_ms` gives a segment's last append in wall-clock ms (its file's mtime;
/// `None` if unknown), asked only of the segments the time rule decides about: the check runs
/// every second over every partition on the event loop, and until 2026-12-06 it read every
/// segment's mtime, the active one's too (a `statx` per segment per second).
pub fn retention_target(
    segments: &[SegmentInfo],
    high_watermark: u64,
    config: &TopicConfig,
    now_wall_ms: u64,
    last_modified_ms: impl Fn(&SegmentInfo) -> Option<u64>,
) -> Option<u64> {
    if !config.cleanup_policy.deletes() {
        return None;
    }
    let mut remaining_bytes: u64 = segments.iter().map(|s| s.size_bytes).sum();
    let mut target = None;
    for pair in segments.windows(2) {
        let (segment, next) = (pair[0], pair[1]);
        if next.base_offset > high_watermark {
            break;
        }
        let over_size = config.retention_bytes >= 0
            && remaining_bytes - segment.size_bytes >= config.retention_bytes as u64;
        let too_old = !over_size
            && config.retention_ms >= 0
            && last_modified_ms(&segment)
                .is_some_and(|t| now_wall_ms.saturating_sub(t) > config.retention_ms as u64);
        if !(over_size || too_old) {
            break;
        }
        remaining_bytes -= segment.size_bytes;
        target = Some(next.base_offset);
    }
    target
}

fn segment_last_modified_ms(dir: &Path, base_offset: u64) -> Option<u64> {
    let path = dir.join(format!("{base_offset:020}.log"));
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(since.as_millis() as u64)
}

/// An empty snapshot retention or DeleteRecords decided to record (delete_records.rs): the
/// node adds the producer state at its end offset (idempotence.rs) and records it (mod.rs,
/// `Node::record_empty_snapshots`), then calls [`EmptySnapshot::recorded`].
pub(super) struct EmptySnapshot {
    pub(super) partition: PartitionId,
    pub(super) snapshot_id: OffsetAndEpoch,
    /// The wall clock's reading the snapshot is recorded with.
    pub(super) now_wall_ms: u64,
    pub(super) cause: SnapshotCause,
}

/// Why an [`EmptySnapshot`] is recorded, for the log line once it is.
pub(super) enum SnapshotCause {
    /// This module's rules.
    Retention {
        retention_bytes: i64,
        retention_ms: i64,
    },
    /// A follower's log start follows its leader's (delete_records.rs), whose client log start
    /// is `client_log_start_offset`.
    FollowLeader { client_log_start_offset: u64 },
    /// A DeleteRecords on the leader asked for `client_log_start_offset`; its answer waits
    /// for the snapshot (delete_records.rs, `PendingDeletes::cut_failed` when it cannot be
    /// recorded).
    DeleteRecords { client_log_start_offset: u64 },
}

impl EmptySnapshot {
    /// Logs the snapshot, recorded.
    pub(super) fn recorded(&self) {
        let (partition, log_start_offset) = (self.partition, self.snapshot_id.offset);
        match self.cause {
            SnapshotCause::Retention {
                retention_bytes,
                retention_ms,
            } => tracing::info!(
                partition,
                log_start_offset,
                retention_bytes,
                retention_ms,
                "retention: empty snapshot recorded, the log start follows it"
            ),
            SnapshotCause::FollowLeader {
                client_log_start_offset,
            } => tracing::info!(
                partition,
                log_start_offset,
                client_log_start_offset,
                "the leader's log start moved: empty snapshot recorded, the log start follows it"
            ),
            SnapshotCause::DeleteRecords {
                client_log_start_offset,
            } => tracing::info!(
                partition,
                log_start_offset,
                client_log_start_offset,
                "DeleteRecords: empty snapshot recorded, the log start follows it"
            ),
        }
    }
}

impl Topics {
    /// Whether the retention rules are to be checked at `now_ms` (node clock): at most once
    /// per [`RETENTION_CHECK_INTERVAL_MS`]; schedules the next check when they are.
    pub(super) fn retention_check_due(&mut self, now_ms: u64) -> bool {
        if now_ms < self.next_retention_check_ms {
            return false;
        }
        self.next_retention_check_ms = now_ms + RETENTION_CHECK_INTERVAL_MS;
        true
    }

    /// The retention rules applied to every `cleanup.policy=delete` partition of `table` (see
    /// the module doc): the empty snapshots to record, each at the new log start of its
    /// partition. Runs between work lists (mod.rs, `Node::maybe_enforce_retention`): the
    /// snapshots recorded are reported to the core by `report_snapshots_written`.
    pub(super) fn retention_snapshots(
        &self,
        host: &Host<AnyIo>,
        table: &PartitionTable,
        now_wall_ms: u64,
    ) -> Vec<EmptySnapshot> {
        let mut snapshots = Vec::new();
        for id in table.ids() {
            let Some(config) = self.topic_config(table, id).copied() else {
                continue;
            };
            if !config.cleanup_policy.deletes()
                || (config.retention_bytes < 0 && config.retention_ms < 0)
            {
                continue;
            }
            let Some(raft) = host.raft(id) else {
                continue;
            };
            let Some(store) = host.store(id) else {
                continue;
            };
            let segments: Vec<SegmentInfo> = store
                .log
                .segment_sizes_bytes()
                .into_iter()
                .map(|(base, size_bytes)| SegmentInfo {
                    base_offset: base.max(0) as u64,
                    size_bytes,
                })
                .collect();
            let Some(target) = retention_target(
                &segments,
                store.high_watermark,
                &config,
                now_wall_ms,
                |segment| segment_last_modified_ms(&store.dir, segment.base_offset),
            ) else {
                continue;
            };
            let latest = store.snapshots.latest_snapshot_id.map_or(0, |s| s.offset);
            if target <= latest || target <= store.log_start_offset() {
                // Already recorded; the core moves the log start when its rules allow.
                continue;
            }
            // The snapshot's epoch is that of the record just below its end offset.
            let epoch = raft
                .log()
                .epoch_cache()
                .iter()
                .rev()
                .find(|e| e.offset < target)
                .map(|e| e.epoch)
                .unwrap_or(0);
            // Empty: a delete topic carries no state machine state across the cut; its
            // producers' state crosses it in the snapshot (docs/snapshots.md), which the node
            // adds.
            snapshots.push(EmptySnapshot {
                partition: id,
                snapshot_id: OffsetAndEpoch::new(target, epoch),
                now_wall_ms,
                cause: SnapshotCause::Retention {
                    retention_bytes: config.retention_bytes,
                    retention_ms: config.retention_ms,
                },
            });
        }
        snapshots
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::topic_record::CleanupPolicy;

    /// (base offset, size, last modified) of each segment.
    type Segments = Vec<(u64, u64, u64)>;

    fn segments(sizes: &[(u64, u64, u64)]) -> Segments {
        sizes.to_vec()
    }

    /// `retention_target` over `s`, counting the segments whose age it asked for in `asked`.
    fn target_asking(
        s: &Segments,
        high_watermark: u64,
        config: &TopicConfig,
        now_wall_ms: u64,
        asked: &std::cell::Cell<usize>,
    ) -> Option<u64> {
        let infos: Vec<SegmentInfo> = s
            .iter()
            .map(|&(base_offset, size_bytes, _)| SegmentInfo {
                base_offset,
                size_bytes,
            })
            .collect();
        super::retention_target(&infos, high_watermark, config, now_wall_ms, |segment| {
            asked.set(asked.get() + 1);
            s.iter()
                .find(|&&(base, _, _)| base == segment.base_offset)
                .map(|&(_, _, modified)| modified)
        })
    }

    fn target(
        s: &Segments,
        high_watermark: u64,
        config: &TopicConfig,
        now_wall_ms: u64,
    ) -> Option<u64> {
        target_asking(s, high_watermark, config, now_wall_ms, &Default::default())
    }

    fn config(retention_bytes: i64, retention_ms: i64) -> TopicConfig {
        TopicConfig {
            retention_bytes,
            retention_ms,
            ..TopicConfig::default()
        }
    }

    #[test]
    fn size_retention_deletes_whole_segments_from_the_start() {
        // Kafka's rule: a segment goes only if the rest still holds retention.bytes. Four
        // segments of 100 bytes, retention.bytes 250: one goes (300 left; two would leave 200).
        let s = segments(&[(0, 100, 0), (10, 100, 0), (20, 100, 0), (30, 100, 0)]);
        assert_eq!(target(&s, 40, &config(250, -1), 0), Some(10));
        assert_eq!(target(&s, 40, &config(200, -1), 0), Some(20));
        // Exactly at the bound: deleting one leaves 300 ≥ 300.
        assert_eq!(target(&s, 40, &config(300, -1), 0), Some(10));
        assert_eq!(target(&s, 40, &config(400, -1), 0), None);
        // Never past the high-watermark (a cut must be committed).
        assert_eq!(target(&s, 15, &config(0, -1), 0), Some(10));
        // Never the active (last) segment.
        assert_eq!(target(&s, 40, &config(0, -1), 0), Some(30));
        // No limits, or the snapshot policy: nothing.
        assert_eq!(target(&s, 40, &config(-1, -1), 0), None);
        let mut snapshot = config(0, -1);
        snapshot.cleanup_policy = CleanupPolicy::Snapshot;
        assert_eq!(target(&s, 40, &snapshot, 0), None);
    }

    #[test]
    fn time_retention_deletes_old_segments_up_to_the_first_young_one() {
        let s = segments(&[
            (0, 10, 1_000),
            (10, 10, 2_000),
            (20, 10, 9_000),
            (30, 10, 1_000),
        ]);
        // At 10 000 with retention.ms 5 000: the first two are older; the third is not, so the
        // fourth (older, but after a young one) stays too.
        assert_eq!(target(&s, 40, &config(-1, 5_000), 10_000), Some(20));
        assert_eq!(target(&s, 40, &config(-1, 50_000), 10_000), None);
    }

    /// The time rule reads a segment's age only where it decides: up to the first young
    /// segment, never the active (last) one, not at all for a partition of one segment.
    #[test]
    fn time_retention_asks_the_age_of_the_segments_it_decides_about_only() {
        let asked = std::cell::Cell::new(0);
        let one = segments(&[(0, 10, 1_000)]);
        assert_eq!(
            target_asking(&one, 10, &config(-1, 5_000), 10_000, &asked),
            None
        );
        assert_eq!(asked.get(), 0, "one segment: the active one, never deleted");
        let young = segments(&[(0, 10, 9_000), (10, 10, 9_500), (20, 10, 9_900)]);
        assert_eq!(
            target_asking(&young, 30, &config(-1, 5_000), 10_000, &asked),
            None
        );
        assert_eq!(asked.get(), 1, "the oldest is young: the rest are younger");
        asked.set(0);
        let old = segments(&[(0, 10, 1_000), (10, 10, 2_000), (20, 10, 3_000)]);
        assert_eq!(
            target_asking(&old, 30, &config(-1, 5_000), 10_000, &asked),
            Some(20)
        );
        assert_eq!(asked.get(), 2, "never the active segment");
    }
}
