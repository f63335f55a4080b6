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
//! Here: recovery, generation, applying, the log start; FetchSnapshot answers, the download and
//! the install in [`serve_and_install`]; unit tests in `snapshots/tests.rs`.
//! About 800 lines: the four steps above share the partition's snapshot state and its
//! invariants, which are easier to check side by side; serving and installing already live apart.

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

mod serve_and_install;

fn engine_id(id: OffsetAndEpoch) -> SnapshotId {
    SnapshotId {
        end_offset: id.offset as i64,
        epoch: id.epoch as i32,
    }
}

fn core_id(id: SnapshotId) -> OffsetAndEpoch {
    OffsetAndEpoch::new(id.end_offset.max(0) as u64, id.epoch.max(0) as u32)
}

/// KIP-853: the voter set a snapshot carries (its `VotersRecord`, after the header), if any.
/// A record that does not decode makes the snapshot unusable: its files cannot be trusted.
pub fn voters_of_snapshot(contents: &SnapshotContents) -> Result<Option<VoterSet>, StorageError> {
    let Some((_, value)) = contents
        .header_control_records
        .iter()
        .rev()
        .find(|(record_type, _)| *record_type == ControlRecordType::KRaftVoters)
    else {
        return Ok(None);
    };
    let value = value.as_deref().unwrap_or_default();
    VoterSet::decode_record_value(value)
        .map(Some)
        .map_err(|error| StorageError::Inconsistent {
            path: contents.path.display().to_string(),
            reason: format!("snapshot voter set: {error}"),
        })
}

/// The control records after a snapshot's header (Kafka's layout): with a voter set in the log
/// (kraft.version 1), the `KRaftVersionRecord` and then the `VotersRecord` in force at its end
/// offset (KIP-853; none while only `controller.quorum.voters` applies); then the partition's
/// producer state at its end offset, when the runtime gave one (a `ProducerState` record,
/// ringlog's own: docs/snapshots.md).
fn header_records(
    voters: Option<&VoterSet>,
    producer_state: Option<&Bytes>,
) -> Vec<(ControlRecordType, Bytes)> {
    let mut records = Vec::new();
    if let Some(voters) = voters {
        records.push((
            ControlRecordType::KRaftVersion,
            Bytes::from(crate::voters::encode_kraft_version_record(
                crate::voters::KRAFT_VERSION_DYNAMIC,
            )),
        ));
        records.push((
            ControlRecordType::KRaftVoters,
            Bytes::from(voters.encode_record_value()),
        ));
    }
    if let Some(producer_state) = producer_state {
        records.push((ControlRecordType::ProducerState, producer_state.clone()));
    }
    records
}

/// The producer state a snapshot carries (its `ProducerState` record's value, opaque here: the
/// runtime encodes and reads it), if any: snapshots written before it existed have none.
pub fn producer_state_of_snapshot(contents: &SnapshotContents) -> Option<Bytes> {
    contents
        .header_control_records
        .iter()
        .rev()
        .find(|(record_type, _)| *record_type == ControlRecordType::ProducerState)
        .map(|(_, value)| value.clone().unwrap_or_default())
}

/// KIP-853: the kraft.version a snapshot's `KRaftVersionRecord` names, if it holds one.
pub fn kraft_version_of_snapshot(contents: &SnapshotContents) -> Result<Option<i16>, StorageError> {
    let Some((_, value)) = contents
        .header_control_records
        .iter()
        .rev()
        .find(|(record_type, _)| *record_type == ControlRecordType::KRaftVersion)
    else {
        return Ok(None);
    };
    crate::voters::decode_kraft_version_record(value.as_deref().unwrap_or_default())
        .map(Some)
        .map_err(|error| StorageError::Inconsistent {
            path: contents.path.display().to_string(),
            reason: format!("snapshot kraft.version: {error}"),
        })
}

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
        let partitions: Vec<PartitionId> = self.stores.keys().copied().collect();
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
