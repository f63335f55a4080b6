//! Generating a snapshot: the policy's decision (`maybe_begin_generation`), the job the host
//! hands to the runtime (`SnapshotJob`: the key-value state at the end offset, refcounted,
//! with the voters and the producer state), and the writer the runtime runs off its loop
//! (`write_snapshot_job`: `.part`, fdatasync, rename, folder fsync).

use super::*;

/// What a snapshot writer writes: the state at `snapshot_id`, taken by the host.
pub struct SnapshotJob {
    pub snapshot_id: OffsetAndEpoch,
    pub format: SnapshotFormat,
    /// A clone of the key-value map: refcounted handles, not the keys' and values' bytes.
    pub entries: std::collections::BTreeMap<Bytes, Bytes>,
    /// KIP-853: the voter set in force at the end offset, written after the header (`None`:
    /// only `controller.quorum.voters` applies there).
    pub voters: Option<VoterSet>,
    /// The partition's producer state at the end offset, encoded by the runtime (which keeps
    /// it), written as a `ProducerState` record after the header; `None`: none written.
    pub producer_state: Option<Bytes>,
}

/// How a generation ended, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenerationOutcome {
    /// Now the latest snapshot; queued for `on_snapshot_written`.
    Taken,
    /// Frozen, but a snapshot fetched from the leader and installed meanwhile is as new.
    Superseded,
    /// Not written (the `.part` is removed at the next start); the policy decides again later.
    Failed(String),
}

impl PartitionSnapshots {
    /// The policy's view of this partition.
    pub fn progress(&self, high_watermark: u64, now_ms: u64) -> SnapshotProgress {
        let stats = self.state_machine.stats();
        SnapshotProgress {
            applied_end_offset: self.state_machine.last_applied_offset() + 1,
            high_watermark: high_watermark as i64,
            latest_snapshot_end_offset: self.latest_snapshot_id.map_or(0, |s| s.offset as i64),
            records_since_snapshot: stats.records_since_snapshot,
            bytes_since_snapshot: stats.bytes_since_snapshot,
            changed_keys_since_snapshot: stats.changed_keys_since_snapshot,
            keys_count: stats.keys_count,
            now_ms,
            last_snapshot_ms: self.last_snapshot_ms,
        }
    }

    /// Asks the policy; if it says snapshot, takes the state for a writer and marks the
    /// generation in flight. Never two generations of one partition at once: while one runs
    /// the policy is not asked (the next decision follows its completion). The counters restart
    /// at the snapshot's point, not at the write's completion.
    pub fn maybe_begin_generation(
        &mut self,
        policy: &SnapshotPolicyConfig,
        high_watermark: u64,
        epoch_cache: &[OffsetAndEpoch],
        now_ms: u64,
    ) -> Option<(SnapshotJob, SnapshotReason)> {
        if self.generating.is_some() {
            return None;
        }
        let SnapshotDecision::Snapshot { end_offset, reason } =
            policy::decide(policy, &self.progress(high_watermark, now_ms))
        else {
            return None;
        };
        let end_offset = end_offset as u64;
        assert!(
            end_offset <= high_watermark,
            "a snapshot of uncommitted state: end offset {end_offset} past the high-watermark {high_watermark}"
        );
        let job = self.take_job(end_offset, epoch_cache, now_ms);
        Some((job, reason))
    }

    /// The state machine's state as a job for a writer, with the snapshot's id at `end_offset`
    /// (the epoch of the record below it); the generation is then in flight.
    fn take_job(
        &mut self,
        end_offset: u64,
        epoch_cache: &[OffsetAndEpoch],
        now_ms: u64,
    ) -> SnapshotJob {
        let epoch = epoch_before(epoch_cache, end_offset, self.latest_snapshot_id);
        let snapshot_id = OffsetAndEpoch::new(end_offset, epoch);
        let job = SnapshotJob {
            snapshot_id,
            format: self.state_machine.snapshot_format(),
            entries: self.state_machine.entries().clone(),
            voters: None,
            producer_state: None,
        };
        self.state_machine.on_snapshot_taken();
        self.last_snapshot_ms = now_ms;
        self.generating = Some(snapshot_id);
        job
    }

    /// DeleteRecords on a snapshot topic (KIP-630: a log start is always a snapshot's end
    /// offset): takes the state for a writer at `end_offset` now, whatever the policy says,
    /// if that is exactly where the state machine stands (its state at another offset is not
    /// at hand), the offset is committed and above the latest snapshot, and no generation is
    /// in flight. `None` otherwise; the caller then cuts at the latest snapshot instead.
    pub fn begin_generation_at(
        &mut self,
        end_offset: u64,
        high_watermark: u64,
        epoch_cache: &[OffsetAndEpoch],
        now_ms: u64,
    ) -> Option<SnapshotJob> {
        let applied_end_offset = (self.state_machine.last_applied_offset() + 1).max(0) as u64;
        if self.generating.is_some()
            || applied_end_offset != end_offset
            || end_offset > high_watermark
            || self
                .latest_snapshot_id
                .is_some_and(|latest| latest.offset >= end_offset)
        {
            return None;
        }
        Some(self.take_job(end_offset, epoch_cache, now_ms))
    }

    /// A writer thread reported `snapshot_id`.
    pub fn finish_generation(
        &mut self,
        snapshot_id: OffsetAndEpoch,
        result: Result<(), String>,
    ) -> GenerationOutcome {
        debug_assert_eq!(self.generating, Some(snapshot_id));
        self.generating = None;
        match result {
            Ok(())
                if self
                    .latest_snapshot_id
                    .is_none_or(|latest| latest.offset < snapshot_id.offset) =>
            {
                self.latest_snapshot_id = Some(snapshot_id);
                self.written.push(snapshot_id);
                self.generated_total += 1;
                GenerationOutcome::Taken
            }
            Ok(()) => GenerationOutcome::Superseded,
            Err(error) => GenerationOutcome::Failed(error),
        }
    }
}

impl std::fmt::Debug for SnapshotJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotJob")
            .field("snapshot_id", &self.snapshot_id)
            .field("entries", &self.entries.len())
            .finish()
    }
}

/// Writes a snapshot job (`.part`, fdatasync, rename, folder fsync): what the runtime runs off
/// its loop for `Output::GenerateSnapshot`, with a backend of its own.
pub fn write_snapshot_job<I: Io>(
    io: &mut I,
    dir: &std::path::Path,
    job: &SnapshotJob,
    now_ms: u64,
) -> Result<(), String> {
    write_snapshot_with_header_records(
        io,
        dir,
        engine_id(job.snapshot_id),
        &job.format,
        now_ms as i64,
        &header_records(job.voters.as_ref(), job.producer_state.as_ref()),
        |sink| {
            for (key, value) in &job.entries {
                sink.append_record(Some(key), Some(value));
            }
        },
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}
