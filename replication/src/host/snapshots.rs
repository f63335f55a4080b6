//! The host's side of KIP-630: each snapshotted partition's key-value state machine, taking
//! snapshots, serving FetchSnapshot from the files, writing and installing fetched snapshots,
//! moving the log start and deleting old snapshots (docs/snapshots.md).
//!
//! Where the work runs: applying committed batches runs in the host (it reads them back from
//! the log once the high-watermark passes them). Generating a snapshot does not (issue #4): the
//! host takes the key-value state at the snapshot's end offset (a clone of the
//! `BTreeMap<Bytes, Bytes>`: refcounted handles, no byte copies) and hands it to the runtime
//! (`Output::GenerateSnapshot`), which writes it off the loop ([`write_snapshot_job`]: `.part`,
//! fdatasync, rename, folder fsync) and reports the result (`Host::on_snapshot_generated`); the
//! next `pump` reports it to the core (`on_snapshot_written`). At most one generation per
//! partition runs at a time; a crash mid-write leaves a `.part` that `recover` removes at the
//! next start.
//!
//! Which partitions: those opened with `keeps_snapshots` (the runtime decides: KRaft's metadata
//! partition and topics whose `cleanup.policy` is `snapshot`); one [`PartitionSnapshots`] per
//! partition (its own state machine, policy counters, generation in flight and fetch in
//! progress) and one host-wide snapshot policy.
//!
//! FetchSnapshot bytes are not copied through userspace: the leader answers with a file range
//! of the frozen snapshot, carrying the reader kept for the snapshot it serves
//! ([`ServedSnapshot`]), that the runtime sends with sendfile once the wire response is
//! complete.
//!
//! Here: recovery, applying, the log start. What a snapshot's header carries in
//! [`header`]; generation (the policy's decision, the job, the writer) in [`generation`];
//! FetchSnapshot answers, the download and the install in [`serve_and_install`]; unit tests in
//! `snapshots/tests.rs`.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ringlog_engine::io::{FileReader, Io};
use ringlog_engine::log::PartitionLog;
use ringlog_engine::snapshot::{
    PartPolicy, RawSnapshotReader, RawSnapshotWriter, SnapshotError, SnapshotFormat, SnapshotId,
    delete_snapshots_before, latest_valid_snapshot, recover_snapshot_dir,
};

use ringlog_engine::batch::control::ControlRecordType;
use ringlog_engine::snapshot::{SnapshotContents, write_snapshot_with_header_records};

use super::store::{FileRange, StorageError};
use super::{Host, Output};
use crate::error::ErrorCode;
use crate::message::FetchSnapshotResponse;
use crate::state_machine::{
    KeyValueStateMachine, SnapshotDecision, SnapshotPolicyConfig, SnapshotProgress, SnapshotReason,
    StateMachine, policy,
};
use crate::types::{OffsetAndEpoch, PartitionId, RecoveredSnapshots};
use crate::voters::{VoterSet, VoterSetEntry};

mod generation;
mod header;
mod serve_and_install;

pub use generation::{GenerationOutcome, SnapshotJob, write_snapshot_job};
use header::{core_id, engine_id, header_records};
pub use header::{kraft_version_of_snapshot, producer_state_of_snapshot, voters_of_snapshot};

fn state_machine_error(dir: &std::path::Path, error: impl std::fmt::Display) -> StorageError {
    StorageError::Inconsistent {
        path: dir.display().to_string(),
        reason: format!("state machine: {error}"),
    }
}

/// One partition's snapshot state.
#[derive(Default)]
pub struct PartitionSnapshots {
    pub state_machine: KeyValueStateMachine,
    pub latest_snapshot_id: Option<OffsetAndEpoch>,
    last_snapshot_ms: u64,
    /// The snapshot being fetched from the leader.
    fetching: Option<RawSnapshotWriter>,
    /// The snapshot FetchSnapshot answers were last served from, with its kept-open reader:
    /// one descriptor for a whole download instead of one open per answer. Dropped when its
    /// file is deleted (a newer snapshot at the log start, an install).
    serving: Option<ServedSnapshot>,
    /// The snapshot a writer thread is generating: at most one per partition at a time.
    generating: Option<OffsetAndEpoch>,
    /// Snapshots written since the core last heard (`on_snapshot_written`, after the work list).
    pub written: Vec<OffsetAndEpoch>,
    /// Snapshots this node wrote (generated from its state machine, or a retention or
    /// DeleteRecords cut) and fetched from a leader since it started: the runtime's
    /// `snapshots-generated-total` and `snapshots-fetched-total`.
    pub generated_total: u64,
    pub fetched_total: u64,
    /// This partition's own minimum of records between snapshots (a topic's
    /// `snapshot.minimum.records`), over the host's policy; `None`: the host's.
    pub min_records: Option<u64>,
    /// KIP-853: the voter set of the snapshot at the log start, found at start (the first of
    /// the voter set records the core is started with).
    pub recovered_voters: Option<VoterSetEntry>,
    /// KIP-853: the kraft.version the newest snapshot's `KRaftVersionRecord` names, if any.
    pub recovered_kraft_version: Option<i16>,
    /// The producer state carried by the snapshot recovered at start or installed from the
    /// leader (the newest then), with that snapshot's id: what the runtime reads a partition's
    /// producer state from when its log starts there. Snapshots this node generates later are
    /// not read back (the runtime's state is current by then).
    pub producer_state: Option<(OffsetAndEpoch, Bytes)>,
}

/// A frozen snapshot being served: its path, size and buffered reader (`Io::open_reader`;
/// `None` on the memory backend, whose bytes the runtime reads through the host). A reply still
/// queued holds a clone of the reader, so a deleted snapshot's bytes stay readable until sent.
#[derive(Debug)]
pub(super) struct ServedSnapshot {
    pub(super) snapshot_id: SnapshotId,
    path: PathBuf,
    pub(super) size_bytes: u64,
    reader: Option<FileReader>,
}

impl ServedSnapshot {
    /// Finds the frozen snapshot `snapshot_id` of the partition, takes its size and opens its
    /// reader. SNAPSHOT_NOT_FOUND is [`SnapshotError::NotFound`].
    pub(super) fn open<I: Io>(
        io: &mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
    ) -> Result<ServedSnapshot, SnapshotError> {
        let raw = RawSnapshotReader::open(io, partition_dir, snapshot_id)?;
        let path = raw.path().to_path_buf();
        let size_bytes = raw.size_bytes();
        let closed = raw.close(io);
        let reader = io.open_reader(&path)?;
        closed?;
        Ok(ServedSnapshot {
            snapshot_id,
            path,
            size_bytes,
            reader,
        })
    }

    /// At most `max_len_bytes` from `position` (fewer at the end; empty at the end). A position
    /// past the size is POSITION_OUT_OF_RANGE.
    pub(super) fn range(
        &self,
        position: u64,
        max_len_bytes: u64,
    ) -> Result<FileRange, SnapshotError> {
        if position > self.size_bytes {
            return Err(SnapshotError::PositionOutOfRange {
                path: self.path.clone(),
                position,
                size_bytes: self.size_bytes,
            });
        }
        let length = max_len_bytes.min(self.size_bytes - position);
        Ok(FileRange {
            path: self.path.clone(),
            reader: self.reader.clone(),
            position,
            length: u32::try_from(length).expect("a region is at most max_bytes, a u32"),
        })
    }
}

impl PartitionSnapshots {
    /// At start: a leftover `.part` is removed (a fetch starts over, it is never loaded), the
    /// newest valid snapshot is loaded into the state machine, and the log is aligned with it:
    /// a log ending before it is truncated fully to start there (a follower's snapshot may pass
    /// its fsynced log end, or a crash hit an install between freeze and truncation); a log
    /// that starts above 0 starts at it (segments are deleted only below a snapshot, so the
    /// first segment's base is at or below it).
    pub fn recover<I: Io>(
        io: &mut I,
        log: &mut PartitionLog,
    ) -> Result<(PartitionSnapshots, RecoveredSnapshots), StorageError> {
        let dir = log.dir().to_path_buf();
        let report = recover_snapshot_dir(io, &dir, PartPolicy::Remove)?;
        tracing::debug!(dir = %dir.display(), ?report, "snapshot folder recovered");
        let (latest, skipped) = latest_valid_snapshot(io, &dir)?;
        for skipped in skipped.iter() {
            tracing::error!(dir = %dir.display(), ?skipped, "invalid snapshot skipped (left on disk)");
        }
        let mut snapshots = PartitionSnapshots {
            state_machine: KeyValueStateMachine::new(),
            ..Default::default()
        };
        let Some(contents) = latest else {
            if log.log_start_offset() > 0 {
                return Err(StorageError::Inconsistent {
                    path: dir.display().to_string(),
                    reason: format!(
                        "the log starts at {} but there is no snapshot",
                        log.log_start_offset()
                    ),
                });
            }
            return Ok((snapshots, RecoveredSnapshots::default()));
        };
        let id = core_id(contents.snapshot_id);
        snapshots
            .state_machine
            .load_snapshot(&contents)
            .map_err(|e| state_machine_error(&dir, e))?;
        let voters = voters_of_snapshot(&contents)?;
        snapshots.recovered_kraft_version = kraft_version_of_snapshot(&contents)?;
        snapshots.producer_state = producer_state_of_snapshot(&contents).map(|state| (id, state));
        snapshots.latest_snapshot_id = Some(id);
        let offset = id.offset as i64;
        let mut log_start_snapshot_id = None;
        if offset > log.log_end_offset() {
            tracing::info!(snapshot = ?id, log_end_offset = log.log_end_offset(), "log behind its newest snapshot: starting it there");
            log.truncate_fully_and_start_at(io, offset)?;
            log_start_snapshot_id = Some(id);
        } else if log.log_start_offset() > 0 {
            if log.log_start_offset() > offset {
                return Err(StorageError::Inconsistent {
                    path: dir.display().to_string(),
                    reason: format!(
                        "the log starts at {}, past its newest snapshot {offset}",
                        log.log_start_offset()
                    ),
                });
            }
            log.advance_log_start_offset(io, offset)?;
            log_start_snapshot_id = Some(id);
        }
        // The set a snapshot carries is in force at its end offset − 1; it matters only when the
        // log starts there (else the log itself still holds the record).
        if log_start_snapshot_id.is_some() {
            snapshots.recovered_voters = voters.map(|voters| VoterSetEntry {
                offset: id.offset.saturating_sub(1),
                voters,
            });
        }
        Ok((
            snapshots,
            RecoveredSnapshots {
                log_start_snapshot_id,
                latest_snapshot_id: Some(id),
            },
        ))
    }
}

/// The epoch of the record just below `end_offset`: the largest epoch of the leader-epoch cache
/// that starts below it; the latest snapshot's epoch when the cache holds none (every record
/// below `end_offset` is then inside that snapshot).
pub fn epoch_before(
    epoch_cache: &[OffsetAndEpoch],
    end_offset: u64,
    latest_snapshot_id: Option<OffsetAndEpoch>,
) -> u32 {
    epoch_cache
        .iter()
        .rev()
        .find(|e| e.offset < end_offset)
        .map(|e| e.epoch)
        .or(latest_snapshot_id.map(|s| s.epoch))
        .unwrap_or(0)
}

impl<I: Io> Host<I> {
    /// Feeds the state machine the committed batches it has not applied, then asks for a
    /// snapshot (`Output::GenerateSnapshot`) if the policy says so. Only partitions that keep
    /// snapshots run a state machine: a `cleanup.policy=delete` topic's log must not be cut
    /// behind a snapshot.
    pub(super) fn apply_committed(&mut self, partition: PartitionId) -> Result<(), StorageError> {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        if !store.keeps_snapshots {
            return Ok(());
        }
        let now_ms = self.now_ms;
        let epoch_cache: Vec<OffsetAndEpoch> = self
            .multi
            .partition(partition)
            .map(|r| r.log().epoch_cache().to_vec())
            .unwrap_or_default();
        let high_watermark = store.high_watermark;
        loop {
            let next = (store.snapshots.state_machine.last_applied_offset() + 1) as u64;
            if next >= high_watermark {
                break;
            }
            let bytes = store.read(&mut self.io, next, 1 << 20)?;
            if bytes.is_empty() {
                break;
            }
            let mut progressed = false;
            for batch in ringlog_engine::batch::batches(&bytes) {
                let batch = batch.map_err(|e| state_machine_error(&store.dir, e))?;
                if batch.last_offset() as u64 >= high_watermark {
                    break;
                }
                store
                    .snapshots
                    .state_machine
                    .apply(&batch)
                    .map_err(|e| state_machine_error(&store.dir, e))?;
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        let policy = SnapshotPolicyConfig {
            min_records: store
                .snapshots
                .min_records
                .unwrap_or(self.config.snapshot_policy.min_records),
            ..self.config.snapshot_policy
        };
        let Some((mut job, reason)) =
            store
                .snapshots
                .maybe_begin_generation(&policy, high_watermark, &epoch_cache, now_ms)
        else {
            return Ok(());
        };
        let dir = store.dir.clone();
        self.abort_moot_fetch(partition, job.snapshot_id)?;
        job.voters = self.snapshot_voters(partition, job.snapshot_id);
        #[cfg(feature = "sim")]
        if self.config.mutation == Some(super::HostMutation::SnapshotOneRecordOff) {
            job.entries.pop_first();
        }
        tracing::info!(partition, snapshot = ?job.snapshot_id, ?reason, "snapshot generation started");
        self.output.push(Output::GenerateSnapshot {
            partition,
            dir,
            job,
        });
        Ok(())
    }

    /// The runtime wrote (or failed to write) the snapshot of an `Output::GenerateSnapshot`: a
    /// frozen one is reported to the core at the next `pump`; a failed one is logged and the
    /// policy decides again later.
    pub fn on_snapshot_generated(
        &mut self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
        result: Result<(), String>,
    ) {
        let Some(store) = self.stores.get_mut(&partition) else {
            return;
        };
        match store.snapshots.finish_generation(snapshot_id, result) {
            GenerationOutcome::Taken => {
                tracing::info!(partition, snapshot = ?snapshot_id, "snapshot taken")
            }
            GenerationOutcome::Superseded => {
                tracing::info!(partition, snapshot = ?snapshot_id, "snapshot taken, superseded by an installed one")
            }
            GenerationOutcome::Failed(error) => {
                tracing::error!(partition, snapshot = ?snapshot_id, %error, "snapshot generation failed")
            }
        }
    }

    /// Generates a snapshot of `partition` at `end_offset` now (DeleteRecords on a snapshot
    /// topic, [`PartitionSnapshots::begin_generation_at`]): the job goes out as an
    /// `Output::GenerateSnapshot` like a policy's, and the core moves the log start when it is
    /// written. Returns whether a generation started.
    pub fn generate_snapshot_at(&mut self, partition: PartitionId, end_offset: u64) -> bool {
        let Some(store) = self.stores.get_mut(&partition) else {
            return false;
        };
        if !store.keeps_snapshots {
            return false;
        }
        let epoch_cache: Vec<OffsetAndEpoch> = self
            .multi
            .partition(partition)
            .map(|r| r.log().epoch_cache().to_vec())
            .unwrap_or_default();
        let Some(mut job) = store.snapshots.begin_generation_at(
            end_offset,
            store.high_watermark,
            &epoch_cache,
            self.now_ms,
        ) else {
            return false;
        };
        let dir = store.dir.clone();
        if let Err(error) = self.abort_moot_fetch(partition, job.snapshot_id) {
            self.take_offline(partition, &error);
            return false;
        }
        job.voters = self.snapshot_voters(partition, job.snapshot_id);
        tracing::info!(partition, snapshot = ?job.snapshot_id, "snapshot generation started (asked for)");
        self.output.push(Output::GenerateSnapshot {
            partition,
            dir,
            job,
        });
        true
    }

    /// A topic's `cleanup.policy` changed at runtime (delete <-> snapshot): whether the
    /// partition runs its key-value state machine with snapshots from now on.
    ///
    /// Starting it: the state machine is reloaded from the newest snapshot on disk (a delete
    /// topic's are the empty cuts of retention and DeleteRecords, one at its log start; none
    /// when its log starts at 0), since it stopped applying where the partition stopped keeping
    /// snapshots (or never started), and then applies the committed log after it at the next
    /// `pump`, so its state is that of the records in the log. Stopping it: no more
    /// generations (one in flight finishes and is reported); the log keeps its start, and the
    /// runtime's retention cuts it from then on.
    pub fn set_keeps_snapshots(
        &mut self,
        partition: PartitionId,
        keeps_snapshots: bool,
    ) -> Result<(), StorageError> {
        let Some(store) = self.stores.get_mut(&partition) else {
            return Ok(());
        };
        if store.keeps_snapshots == keeps_snapshots {
            return Ok(());
        }
        if keeps_snapshots {
            let (latest, skipped) = latest_valid_snapshot(&mut self.io, &store.dir)?;
            for skipped in skipped.iter() {
                tracing::error!(?skipped, "invalid snapshot skipped (left on disk)");
            }
            let mut state_machine = KeyValueStateMachine::new();
            match latest {
                Some(contents) => state_machine
                    .load_snapshot(&contents)
                    .map_err(|e| state_machine_error(&store.dir, e))?,
                None if store.log.log_start_offset() > 0 => {
                    return Err(StorageError::Inconsistent {
                        path: store.dir.display().to_string(),
                        reason: format!(
                            "the log starts at {} but there is no snapshot",
                            store.log.log_start_offset()
                        ),
                    });
                }
                None => {}
            }
            store.snapshots.state_machine = state_machine;
        }
        store.keeps_snapshots = keeps_snapshots;
        tracing::info!(partition, keeps_snapshots, "cleanup policy changed");
        Ok(())
    }

    /// Sets a partition's own minimum of records between snapshots (`None`: the host's
    /// policy); the next generation check uses it.
    pub fn set_snapshot_min_records(&mut self, partition: PartitionId, min_records: Option<u64>) {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        store.snapshots.min_records = min_records;
    }

    /// A snapshot at `snapshot_id` is about to be written here (generated, or an empty cut).
    /// A fetch of a snapshot no newer than it, left from a leader's answer the core has since
    /// moved past (it caught up from the log), is moot: its writer is dropped and its `.part`
    /// removed first, since a fetch of the same id writes the same `.part` path, and a stale
    /// writer aborted later would remove what the local snapshot froze or is writing under
    /// that name (`sim --reconfig --voters 5 --seed 46`: the partition went offline).
    fn abort_moot_fetch(
        &mut self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
    ) -> Result<(), StorageError> {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        if let Some(writer) = store
            .snapshots
            .fetching
            .take_if(|writer| writer.snapshot_id() <= engine_id(snapshot_id))
        {
            tracing::info!(partition, fetched = ?writer.snapshot_id(), snapshot = ?snapshot_id, "a snapshot fetch left behind is dropped");
            writer.abort(&mut self.io)?;
        }
        Ok(())
    }

    /// Records an empty snapshot at `snapshot_id` (a `cleanup.policy=delete` topic's retention
    /// cut: no state machine state crosses it; a header and a footer, a few hundred bytes, and
    /// the runtime's `producer_state` at the cut when given), reported to the core at the next
    /// `pump` so the log start follows it.
    pub fn record_empty_snapshot(
        &mut self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
        now_wall_ms: u64,
        producer_state: Option<Bytes>,
    ) -> Result<(), StorageError> {
        self.abort_moot_fetch(partition, snapshot_id)?;
        let voters = self.snapshot_voters(partition, snapshot_id);
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        let format = store.snapshots.state_machine.snapshot_format();
        write_snapshot_with_header_records(
            &mut self.io,
            &store.dir,
            engine_id(snapshot_id),
            &format,
            now_wall_ms as i64,
            &header_records(voters.as_ref(), producer_state.as_ref()),
            |_| {},
        )?;
        store.snapshots.latest_snapshot_id = Some(snapshot_id);
        store.snapshots.written.push(snapshot_id);
        store.snapshots.generated_total += 1;
        Ok(())
    }

    /// KIP-853: the voter set a snapshot ending at `snapshot_id` carries: the record in force
    /// at its end offset − 1, if the log (or the snapshot it starts at) holds one.
    fn snapshot_voters(
        &self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
    ) -> Option<VoterSet> {
        let last = snapshot_id.offset.checked_sub(1)?;
        self.multi
            .partition(partition)?
            .voter_history()
            .recorded_at(last)
            .cloned()
    }

    /// Reports snapshots written since the last work list to the core (never while executing
    /// one: no re-entrancy). Returns whether there was any.
    pub(super) fn report_snapshots_written(
        &mut self,
        now_ms: u64,
    ) -> Result<bool, super::HostError> {
        let mut any = false;
        // Called on every pump: a walk that allocates only when a snapshot was written.
        let partitions: Vec<PartitionId> = self
            .stores
            .iter()
            .filter(|(_, store)| !store.snapshots.written.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for partition in partitions {
            let written = std::mem::take(
                &mut self
                    .stores
                    .get_mut(&partition)
                    .expect("hosted")
                    .snapshots
                    .written,
            );
            for id in written {
                any = true;
                let work = self.multi.on_snapshot_written(now_ms, partition, id)?;
                self.execute(work)?;
            }
        }
        Ok(any)
    }

    /// The core moved the log start: whole segments below it go.
    pub(super) fn advance_log_start(
        &mut self,
        partition: PartitionId,
        offset: u64,
    ) -> Result<(), StorageError> {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        let deleted = store
            .log
            .advance_log_start_offset(&mut self.io, offset as i64)?;
        tracing::info!(
            partition,
            offset,
            segments_deleted = deleted,
            "log start advanced"
        );
        Ok(())
    }

    /// KIP-630 "When to Delete Snapshots": those older than the one at the log start.
    pub(super) fn delete_old_snapshots(
        &mut self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
    ) -> Result<(), StorageError> {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        // A reader kept for an older snapshot must not outlive its file's deletion: a follower
        // still downloading it is answered SNAPSHOT_NOT_FOUND and starts over from the newest.
        if store
            .snapshots
            .serving
            .as_ref()
            .is_some_and(|served| served.snapshot_id < engine_id(snapshot_id))
        {
            store.snapshots.serving = None;
        }
        let deleted = delete_snapshots_before(&mut self.io, &store.dir, engine_id(snapshot_id))?;
        if !deleted.is_empty() {
            tracing::info!(partition, ?deleted, "old snapshots deleted");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
