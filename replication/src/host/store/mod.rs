//! One partition's files, as the host executes the core's storage work on them: the partition
//! log (`ringlog_engine::log::PartitionLog`) and the `quorum-state` file (written through the
//! ring by `ringlog_engine::quorum_state_writer::QuorumStateWriter`).
//!
//! Every `PartitionLog` and quorum-state writer of a host shares the host's one `Io` backend
//! (one ring); a completion drained from it is offered to each in turn ([`route_completions`]).
//!
//! Durability bookkeeping: `reported_durable_end_offset` is the log's durable end as last
//! reported to the core (`Persisted::Log`). The host compares it with the engine's
//! `durable_end_offset` after every storage step, so a flush that completed inside a blocking
//! engine call (truncation, a file read) is reported too.
//!
//! Here: the store, its opening and the completions' routing; `reads.rs` (what a read hands the
//! runtime), `quorum_state.rs`, `repair.rs` (damaged segments set aside, `repair-pending`),
//! `voter_records.rs` (KIP-853 records read at open), `tests.rs`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use ringlog_engine::io::{Completion, FileReader, Io};
use ringlog_engine::log::{
    LaggingTailBudget, LogConfig, LogError, PartitionLog, ReadView, Routed, UnverifiedBatches,
};
use ringlog_engine::offset_checkpoint::{self, OffsetCheckpointError};
use ringlog_engine::quorum_state::{QUORUM_STATE_FILE_NAME, QuorumStateData, QuorumStateError};
use ringlog_engine::quorum_state_writer::{QuorumStateWriter, WriterRouted};
use ringlog_engine::snapshot::SnapshotError;

use super::snapshots::PartitionSnapshots;
pub use reads::{FileRange, Records};
pub use repair::{DAMAGED_DIR_NAME, REPAIR_PENDING_FILE_NAME};
use repair::{
    has_snapshot_files, mark_repair_pending, open_repairing, set_aside_segments_from,
    set_aside_snapshots,
};

mod quorum_state;
mod reads;
mod repair;
#[cfg(test)]
mod tests;
mod voter_records;
use crate::records::{batch_headers, kraft_versions_in, voter_sets_in};
use crate::types::{
    ElectionState, Epoch, OffsetAndEpoch, PartitionId, RecoveredSnapshots, RecoveredState,
};
use crate::voters::VoterSetEntry;

/// The file of a partition folder holding [`PartitionStore::delete_records_offset`].
pub const LOG_START_OFFSET_CHECKPOINT_FILE_NAME: &str = "log-start-offset-checkpoint";

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The partition is not hosted (it was taken offline after a storage error, or removed).
    #[error("partition {0} is not hosted here (offline or removed)")]
    NotHosted(crate::types::PartitionId),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    QuorumState(#[from] QuorumStateError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    OffsetCheckpoint(#[from] OffsetCheckpointError),
    #[error("{path}: {reason}")]
    Inconsistent { path: String, reason: String },
}

impl StorageError {
    /// Out of space (ENOSPC, EDQUOT): the partition waits for space instead of going offline.
    pub fn is_no_space(&self) -> bool {
        match self {
            StorageError::Log(error) => error.is_no_space(),
            StorageError::QuorumState(QuorumStateError::Io(error)) => error.is_no_space(),
            StorageError::OffsetCheckpoint(OffsetCheckpointError::Io(error)) => error.is_no_space(),
            _ => false,
        }
    }
}

pub struct PartitionStore {
    pub dir: PathBuf,
    pub log: PartitionLog,
    /// Writes the quorum-state through the ring (the loop goes on meanwhile).
    quorum_state: QuorumStateWriter,
    /// The tickets of the quorum-state writes issued and not yet reported durable, oldest first.
    quorum_state_requested: VecDeque<(u64, ElectionState)>,
    /// The ticket of the latest quorum-state write issued.
    quorum_state_issued: u64,
    cluster_id: String,
    voters: Vec<i32>,
    /// The high-watermark the core last announced.
    pub high_watermark: u64,
    /// The durable end offset last reported to the core.
    pub reported_durable_end_offset: u64,
    /// The end offset of the latest flush the core asked for.
    pub flush_target: u64,
    /// Bumped by each truncation: messages held behind a flush issued before it are released,
    /// because `truncate_to` makes everything below the cut durable before it returns.
    pub truncations: u64,
    /// KIP-630: the state machine, the snapshot being fetched, snapshots to report.
    pub snapshots: PartitionSnapshots,
    /// The snapshots found at start (for the core's start).
    pub recovered_snapshots: RecoveredSnapshots,
    /// A log start advance the core asked for, run once no I/O is in flight (`Host::pump`).
    pub deferred_log_start_offset: Option<u64>,
    /// Whether the partition runs the key-value state machine with KIP-630 snapshots (the
    /// runtime decides from the topic's `cleanup.policy`; a `delete` topic's log must not be
    /// cut behind a snapshot).
    pub keeps_snapshots: bool,
    /// KIP-853: the voter set records found at start, for the core (`Raft::recover`): the
    /// log-start snapshot's set, then every `VotersRecord` in the log, by offset.
    pub recovered_voter_entries: Vec<VoterSetEntry>,
    /// Whether the log was read for them ([`PartitionStore::scan_voter_records`]).
    pub voter_records_scanned: bool,
    /// KIP-853 `kraft.version` read back at start ([`PartitionStore::scan_voter_records`]): the
    /// newest `KRaftVersionRecord` of the log, else the newest snapshot's; 0 (the static
    /// `controller.quorum.voters` set) when neither holds one.
    pub kraft_version: i16,
    /// The offset of the `KRaftVersionRecord` it was read from in the log (`None`: from the
    /// snapshot, or none recorded).
    pub kraft_version_offset: Option<u64>,
    /// Where a DeleteRecords cut inside a batch (0: none): the first offset clients may read
    /// when it is above the log start ([`PartitionStore::client_log_start_offset`]). The log
    /// start itself stays on the batch's first offset, because replicas append whole batches.
    /// Durable in `log-start-offset-checkpoint` ([`PartitionStore::record_delete_records_offset`]).
    delete_records_offset: u64,
    /// Whether `repair-pending` is in the folder: the log lost damaged records at a start and
    /// has not caught up with a leader since ([`REPAIR_PENDING_FILE_NAME`]).
    pub repair_pending: bool,
    /// The log's `tail_cache_bytes` while this replica leads (its followers fetch the recent
    /// tail from it); a follower's log keeps none ([`PartitionStore::set_leading`]).
    leader_tail_cache_bytes: u64,
    /// When the waiting confirmation record of the log's last flush is written alone if no
    /// flush has carried it by then (`Host::write_due_confirmations`).
    pub confirmation_due_ms: Option<u64>,
    /// The batches recovery took from the batch lists after a crash without reading them
    /// (`LogConfig::defer_listed_check_after_crash`), for the runtime to check behind the
    /// start (`Host::take_unverified`).
    pub unverified: Vec<UnverifiedBatches>,
}

impl PartitionStore {
    /// Keeps the log's tail cache (`LogConfig::tail_cache_bytes`) while this replica leads, and
    /// none otherwise: only a leader is fetched from, and a cache on every replica of every
    /// partition cost up to 4 MiB each for reads that never come.
    /// Setting the budget it already has changes nothing.
    pub fn set_leading(&mut self, leading: bool) {
        self.log.set_tail_cache_bytes(if leading {
            self.leader_tail_cache_bytes
        } else {
            0
        });
    }

    /// Keeps in memory the records past `lagging_from` (the least log end of the voters that
    /// fetch from this leader; `None`: not leading, or none lags) while the node's `budget`
    /// allows ([`PartitionLog::keep_for_lagging_replicas`]).
    pub fn keep_for_lagging_voters(
        &mut self,
        budget: &LaggingTailBudget,
        lagging_from: Option<u64>,
    ) {
        self.log
            .keep_for_lagging_replicas(budget, lagging_from.map(|offset| offset as i64));
    }

    /// Whether the log was opened with `config`: its settings as given at open, the tail
    /// cache's budget included (a follower's log keeps none while it follows,
    /// [`PartitionStore::set_leading`]).
    pub fn opened_with(&self, config: &LogConfig) -> bool {
        let mut opened = self.log.config().clone();
        opened.tail_cache_bytes = self.leader_tail_cache_bytes;
        opened == *config
    }

    /// Opens (and recovers) the partition's log and reads its quorum-state. Its blocking reads
    /// take only their own completions; other logs' stay in the ring for them.
    pub fn open<I: Io>(
        io: &mut I,
        dir: &Path,
        log_config: LogConfig,
        cluster_id: &str,
        voters: &[i32],
        keeps_snapshots: bool,
        repair: bool,
    ) -> Result<(PartitionStore, RecoveredState), StorageError> {
        let mut unverified: Vec<UnverifiedBatches>;
        let (log, snapshots, recovered_snapshots) = loop {
            let (mut log, mut report) = open_repairing(io, dir, log_config.clone(), repair)?;
            unverified = std::mem::take(&mut report.unverified);
            tracing::info!(
                dir = %dir.display(),
                ?report,
                unverified_segments = unverified.len(),
                "partition log recovered"
            );
            match PartitionSnapshots::recover(io, &mut log) {
                Ok((snapshots, recovered)) => break (log, snapshots, recovered),
                // The snapshot the log starts at no longer reads back (the log cannot start
                // without it): with a peer, everything is fetched again, the snapshot first.
                // (Only where a snapshot file is there and does not read back: a log start
                // with no snapshot at all is a bug, not damage, and stays refused; the
                // simulator's log-start-without-snapshot mutation is caught by it.)
                Err(StorageError::Inconsistent { path, reason })
                    if repair && log.log_start_offset() > 0 && has_snapshot_files(io, dir) =>
                {
                    tracing::error!(
                        %path,
                        reason,
                        "no valid snapshot at the log start: the log and the snapshots are set aside in damaged/, and fetched again from the leader"
                    );
                    log.close(io)?;
                    mark_repair_pending(io, dir, 0)?;
                    set_aside_segments_from(io, dir, 0)?;
                    set_aside_snapshots(io, dir)?;
                }
                Err(error) => return Err(error),
            }
        };
        let repair_pending = io.exists(&dir.join(REPAIR_PENDING_FILE_NAME));
        let quorum_state_path = dir.join(QUORUM_STATE_FILE_NAME);
        let state = QuorumStateData::load(io, &quorum_state_path)?;
        let election = match &state {
            None => ElectionState::default(),
            Some(s) => {
                if !s.cluster_id.is_empty() && s.cluster_id != cluster_id {
                    return Err(StorageError::Inconsistent {
                        path: quorum_state_path.display().to_string(),
                        reason: format!(
                            "written for cluster {:?}, this node belongs to {cluster_id:?}",
                            s.cluster_id
                        ),
                    });
                }
                ElectionState {
                    epoch: Epoch::try_from(s.leader_epoch).unwrap_or(0),
                    leader_id: (s.leader_id >= 0).then_some(s.leader_id),
                    voted_for: (s.voted_id >= 0).then_some(s.voted_id),
                }
            }
        };
        let epoch_cache = log
            .epoch_cache()
            .entries()
            .iter()
            .map(|e| OffsetAndEpoch::new(e.start_offset as u64, e.epoch as Epoch))
            .collect();
        let recovered = RecoveredState {
            election,
            log_start_offset: log.log_start_offset() as u64,
            log_end_offset: log.log_end_offset() as u64,
            epoch_cache,
            repair_pending,
        };
        let durable = log.durable_end_offset() as u64;
        let checkpoint_path = dir.join(LOG_START_OFFSET_CHECKPOINT_FILE_NAME);
        let delete_records_offset = match offset_checkpoint::load(io, &checkpoint_path) {
            Ok(offset) => offset.unwrap_or(0),
            // An untrusted cut is no cut: the records above the log start stay readable (none
            // is lost; a DeleteRecords may be repeated), the next cut rewrites the file.
            Err(OffsetCheckpointError::Malformed { path, reason }) => {
                tracing::warn!(%path, reason, "offset checkpoint not trusted, ignored");
                0
            }
            Err(error) => return Err(error.into()),
        };
        let store = PartitionStore {
            dir: dir.to_path_buf(),
            log,
            quorum_state: QuorumStateWriter::new(&quorum_state_path),
            quorum_state_requested: VecDeque::new(),
            quorum_state_issued: 0,
            cluster_id: cluster_id.to_string(),
            voters: voters.to_vec(),
            // Everything a snapshot holds is committed.
            high_watermark: recovered_snapshots
                .latest_snapshot_id
                .map_or(0, |s| s.offset),
            reported_durable_end_offset: durable,
            flush_target: durable,
            truncations: 0,
            snapshots,
            recovered_snapshots,
            deferred_log_start_offset: None,
            keeps_snapshots,
            recovered_voter_entries: Vec::new(),
            voter_records_scanned: false,
            kraft_version: 0,
            kraft_version_offset: None,
            delete_records_offset,
            repair_pending,
            leader_tail_cache_bytes: log_config.tail_cache_bytes,
            confirmation_due_ms: None,
            unverified,
        };
        let mut store = store;
        store.log.set_tail_cache_bytes(0);
        if keeps_snapshots {
            store.scan_voter_records(io)?;
        }
        Ok((store, recovered))
    }

    /// Leader append: stamps offsets from the log end and `leader_epoch`. Returns the base offset.
    /// Each batch's CRC was checked when it arrived ([`crate::host::Host::append`]); the engine
    /// frames them without computing it again. The one copy here takes the batches out of the
    /// request that carried them (shared, read-only) into a buffer the stamps can be written to,
    /// which the log keeps for reads; the log's write tail is the second.
    pub fn append_as_leader(
        &mut self,
        batches: &[Bytes],
        leader_epoch: Epoch,
    ) -> Result<u64, StorageError> {
        let size: usize = batches.iter().map(Bytes::len).sum();
        let mut bytes = BytesMut::with_capacity(size);
        for batch in batches {
            bytes.extend_from_slice(batch);
        }
        let info = self
            .log
            .append_crc_checked_as_leader(bytes, leader_epoch as i32)?;
        Ok(info.base_offset as u64)
    }

    /// The log start clients see: the engine's, or the advance the core already made that
    /// waits for idle I/O to delete its segments (node/mod.rs), whichever is later.
    pub fn log_start_offset(&self) -> u64 {
        (self.log.log_start_offset().max(0) as u64).max(self.deferred_log_start_offset.unwrap_or(0))
    }

    /// The first offset clients may read (Kafka's logStartOffset, what Fetch answers as
    /// LogStartOffset and ListOffsets as the earliest offset): the log start, or above it the
    /// offset a DeleteRecords named inside the log start's batch. Never past the log end.
    pub fn client_log_start_offset(&self) -> u64 {
        let log_end = self.log.log_end_offset().max(0) as u64;
        self.log_start_offset()
            .max(self.delete_records_offset.min(log_end))
    }

    /// Records durably that clients may read from `offset` on (DeleteRecords inside a batch;
    /// [`PartitionStore::client_log_start_offset`]). Never moves it back.
    pub fn record_delete_records_offset<I: Io>(
        &mut self,
        io: &mut I,
        offset: u64,
    ) -> Result<(), StorageError> {
        if offset <= self.delete_records_offset {
            return Ok(());
        }
        let path = self.dir.join(LOG_START_OFFSET_CHECKPOINT_FILE_NAME);
        offset_checkpoint::persist(io, &path, offset)?;
        self.delete_records_offset = offset;
        Ok(())
    }

    /// Whether the log's flush or the quorum-state write waits for disk space (ENOSPC,
    /// EDQUOT; `Host::retry_flushes`).
    pub fn waiting_for_space(&self) -> bool {
        self.log.waiting_for_space().is_some() || self.quorum_state.waiting_for_space()
    }

    /// Asks again what waits for disk space: the log's flush, the quorum-state write.
    pub fn retry_waiting_for_space<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        if self.log.waiting_for_space().is_some() {
            self.log.flush(io)?;
        }
        if self.quorum_state.waiting_for_space() {
            self.quorum_state.retry(io)?;
        }
        Ok(())
    }

    /// Whether the log or the quorum-state writer has an operation in flight: only such a
    /// store can own a completion ([`route_completions`]).
    pub fn awaits_completions(&self) -> bool {
        self.log.awaits_completions() || self.quorum_state.awaits_completions()
    }

    /// Whether a flush or a quorum-state write the core asked for has not completed yet.
    pub fn persistence_outstanding(&self) -> bool {
        (self.log.durable_end_offset() as u64) < self.flush_target
            || self.quorum_state.durable_ticket() < self.quorum_state_issued
    }
}

/// Offers each completion to the logs and quorum-state writers of `stores`: those that await
/// completions ([`PartitionStore::awaits_completions`], every owner of one drained from the
/// ring). A store's error does not stop the routing of the others' completions: it is returned
/// with the store's partition (the host takes that partition offline, or lets it wait for
/// space: `Host::pump`).
pub fn route_completions<I: Io>(
    io: &mut I,
    stores: &mut [(PartitionId, &mut PartitionStore)],
    completions: Vec<Completion>,
) -> Vec<(PartitionId, StorageError)> {
    let mut failures = Vec::new();
    'next: for completion in completions {
        let mut completion = completion;
        for (partition, store) in stores.iter_mut() {
            match store.log.on_completion(io, completion) {
                Ok(Routed::Mine { .. }) => continue 'next,
                Ok(Routed::Foreign(back)) => completion = back,
                Err(error) => {
                    failures.push((*partition, error.into()));
                    continue 'next;
                }
            }
            match store.quorum_state.on_completion(io, completion) {
                Ok(WriterRouted::Mine { .. }) => continue 'next,
                Ok(WriterRouted::Foreign(back)) => completion = back,
                Err(error) => {
                    failures.push((*partition, error.into()));
                    continue 'next;
                }
            }
        }
        tracing::warn!(op = ?completion.op_id, "completion of no partition log");
    }
    failures
}
