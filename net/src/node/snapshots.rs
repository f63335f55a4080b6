//! The runtime's side of KIP-630 snapshots: which partitions keep them, the node-wide policy
//! from Kafka's keys, and the writer threads. The host (`ringlog_replication::host`) keeps the
//! state machines, asks for a snapshot (`Output::GenerateSnapshot`), serves, fetches and
//! installs them (docs/snapshots.md); the node only writes a generated snapshot off its loop:
//! a `snapshot-writer` thread with its own plain-syscall backend writes it (`.part`,
//! fdatasync, rename, folder fsync), and its report comes back through a channel the loop
//! selects on (`SnapshotDone`) and goes to `Host::on_snapshot_generated`.

use std::path::PathBuf;

use ringlog_engine::io::SyscallIo;
use ringlog_replication::host::{SnapshotJob, write_snapshot_job};
use ringlog_replication::state_machine::SnapshotPolicyConfig;
use ringlog_replication::{OffsetAndEpoch, PartitionId};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::NodeError;
use super::topics::CleanupPolicy;

/// A writer thread's report: the snapshot is frozen (renamed, fsynced), or the error.
#[derive(Debug)]
pub struct SnapshotDone {
    partition: PartitionId,
    snapshot_id: OffsetAndEpoch,
    result: Result<(), String>,
}

/// Kafka's snapshot policy keys as the state machine's policy (one node-wide policy for every
/// snapshotted partition).
pub(super) fn policy_config(config: &crate::config::NodeConfig) -> SnapshotPolicyConfig {
    SnapshotPolicyConfig {
        min_records: config.snapshot_minimum_records,
        min_bytes: config.max_record_bytes_between_snapshots,
        min_cleanable_ratio: config.snapshot_min_cleanable_ratio,
        max_interval_ms: config.max_snapshot_interval_ms,
    }
}

/// Whether a partition of `topic` (with its topic's `cleanup.policy`, `None` for the metadata
/// topic, which has no topic record) runs the key-value state machine with snapshots:
/// `__cluster_metadata-0` (KRaft's snapshotted log; topic records are keyed by topic name,
/// topics.rs, so its snapshot keeps every topic) and every partition of a topic whose
/// `cleanup.policy` is `snapshot` (Kafka's compacted-topic semantics, with the log trimmed
/// behind snapshots instead of compacted). A `cleanup.policy=delete` topic keeps no state
/// machine: a snapshot must not cut its log.
pub(super) fn keeps_snapshots(topic: &str, cleanup_policy: Option<CleanupPolicy>) -> bool {
    topic == super::convert::METADATA_TOPIC || cleanup_policy == Some(CleanupPolicy::Snapshot)
}

/// Starts the writer threads; their reports come back on the receiver `new` returns.
pub(super) struct SnapshotWriters {
    done: UnboundedSender<SnapshotDone>,
}

impl SnapshotWriters {
    pub(super) fn new() -> (SnapshotWriters, UnboundedReceiver<SnapshotDone>) {
        let (done, reports) = unbounded_channel();
        (SnapshotWriters { done }, reports)
    }

    /// Writes the host's snapshot job on a thread of its own (the loop's ring is not shared).
    pub(super) fn spawn(
        &self,
        partition: PartitionId,
        dir: PathBuf,
        job: SnapshotJob,
        now_ms: u64,
    ) -> Result<(), NodeError> {
        let done = self.done.clone();
        std::thread::Builder::new()
            .name("snapshot-writer".into())
            .spawn(move || {
                let mut io = SyscallIo::for_dir(&dir);
                let result = write_snapshot_job(&mut io, &dir, &job, now_ms);
                // The loop is gone only at exit; the .part is then removed at the next start.
                let _ = done.send(SnapshotDone {
                    partition,
                    snapshot_id: job.snapshot_id,
                    result,
                });
            })
            .map_err(NodeError::Runtime)?;
        Ok(())
    }
}

impl SnapshotDone {
    /// A writer thread finished: the host reports a frozen snapshot to the core at its next
    /// `pump`; a failed one is logged and the policy decides again later.
    pub(super) fn report_to(
        self,
        host: &mut ringlog_replication::host::Host<ringlog_engine::io::AnyIo>,
    ) {
        host.on_snapshot_generated(self.partition, self.snapshot_id, self.result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_partition_and_snapshot_topics_keep_snapshots_delete_topics_do_not() {
        assert!(keeps_snapshots(super::super::convert::METADATA_TOPIC, None));
        assert!(keeps_snapshots("orders", Some(CleanupPolicy::Snapshot)));
        assert!(!keeps_snapshots("orders", Some(CleanupPolicy::Delete)));
        // A topic partition whose record is not (yet) in the image: no state machine.
        assert!(!keeps_snapshots("orders", None));
    }
}
