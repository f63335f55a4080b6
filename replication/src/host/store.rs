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

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use ringlog_engine::io::{Completion, FileReader, Io};
use ringlog_engine::log::{LogConfig, LogError, PartitionLog, ReadView, Routed};
use ringlog_engine::offset_checkpoint::{self, OffsetCheckpointError};
use ringlog_engine::quorum_state::{QUORUM_STATE_FILE_NAME, QuorumStateData, QuorumStateError};
use ringlog_engine::quorum_state_writer::{QuorumStateWriter, WriterRouted};
use ringlog_engine::snapshot::SnapshotError;

use super::snapshots::PartitionSnapshots;
use crate::records::{batch_headers, kraft_versions_in, voter_sets_in};
use crate::types::{ElectionState, Epoch, OffsetAndEpoch, RecoveredSnapshots, RecoveredState};
use crate::voters::VoterSetEntry;

/// The file of a partition folder holding [`PartitionStore::delete_records_offset`].
pub const LOG_START_OFFSET_CHECKPOINT_FILE_NAME: &str = "log-start-offset-checkpoint";

/// A partition folder's marker that its log was cut below damaged records at start
/// ([`PartitionStore::open`] with `repair`): until it has caught up with a leader, its core grants
/// no vote and does not stand (`Raft::repair_pending`). Removed once the core says so.
pub const REPAIR_PENDING_FILE_NAME: &str = "repair-pending";
/// Where a repair sets the damaged segment files aside (for an operator to look at; nothing
/// reads them again).
pub const DAMAGED_DIR_NAME: &str = "damaged";

/// How much of the log one read of the voter set scan takes.
const SCAN_CHUNK_BYTES: u32 = 1 << 20;

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

/// Bytes of a log or a snapshot for a response: in memory (the log's unflushed tail, or bytes
/// read), or a range of a file for the runtime to send without a userspace copy (from the
/// range's kept-open reader, whose clone keeps the bytes readable after a truncation or a
/// deletion until they are sent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Records {
    Memory(Bytes),
    File(FileRange),
}

/// A range of a file on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRange {
    /// The file's path, for logs and errors (the bytes come from `reader`).
    pub path: PathBuf,
    /// The buffered read-only descriptor its owner keeps open (a segment's, or the snapshot
    /// the host serves), for sendfile; `None` on the memory backend, whose bytes the runtime
    /// reads through [`super::Host::read_file_range`].
    pub reader: Option<FileReader>,
    pub position: u64,
    pub length: u32,
}

impl FileRange {
    /// The range's bytes: from the reader with `pread` when there is one, else through the
    /// backend (the memory backend has no OS file).
    pub(crate) fn read<I: Io>(&self, io: &mut I) -> Result<Vec<u8>, ringlog_engine::io::IoError> {
        match &self.reader {
            Some(reader) => reader.read_at(&self.path, self.position, self.length as usize),
            None => io.read_buffered_at(&self.path, self.position, self.length as usize),
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
    leading: bool,
}

impl PartitionStore {
    /// Keeps the log's tail cache (`LogConfig::tail_cache_bytes`) while this replica leads, and
    /// none otherwise: only a leader is fetched from, and a cache on every replica of every
    /// partition cost up to 4 MiB each for reads that never come.
    pub fn set_leading(&mut self, leading: bool) {
        if leading != self.leading {
            self.leading = leading;
            self.log.set_tail_cache_bytes(if leading {
                self.leader_tail_cache_bytes
            } else {
                0
            });
        }
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
        let (log, snapshots, recovered_snapshots) = loop {
            let (mut log, report) = open_repairing(io, dir, log_config.clone(), repair)?;
            tracing::info!(dir = %dir.display(), ?report, "partition log recovered");
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
            leading: false,
        };
        let mut store = store;
        store.log.set_tail_cache_bytes(0);
        if keeps_snapshots {
            store.scan_voter_records(io)?;
        }
        Ok((store, recovered))
    }

    /// KIP-853: reads the whole log, from its start, for voter set records (the core acts on
    /// the newest one, committed or not, and reverts if it is truncated), after the log-start
    /// snapshot's set. Only partitions with snapshots are read: their log is bounded by them,
    /// and only the metadata partition changes voters (a topic partition's log may be large and
    /// its voters are its replicas).
    pub fn scan_voter_records<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        let mut entries: Vec<VoterSetEntry> =
            self.snapshots.recovered_voters.iter().cloned().collect();
        let end = self.log.log_end_offset().max(0) as u64;
        let mut offset = self.log.log_start_offset().max(0) as u64;
        let mut kraft_version = self.snapshots.recovered_kraft_version;
        while offset < end {
            let bytes = self.read(io, offset, SCAN_CHUNK_BYTES)?;
            let headers =
                batch_headers(&bytes).map_err(|error| self.inconsistent(offset, error))?;
            let Some(last) = headers.last() else {
                return Err(self.inconsistent(offset, "no batch where the log holds one"));
            };
            let next = last.last_offset + 1;
            for (record_offset, voters) in
                voter_sets_in(&bytes).map_err(|error| self.inconsistent(offset, error))?
            {
                entries.push(VoterSetEntry {
                    offset: record_offset,
                    voters,
                });
            }
            if let Some(&(at, version)) = kraft_versions_in(&bytes)
                .map_err(|error| self.inconsistent(offset, error))?
                .last()
            {
                kraft_version = Some(version);
                self.kraft_version_offset = Some(at);
            }
            assert!(next > offset, "the scan moves forward");
            offset = next;
        }
        if !entries.is_empty() {
            tracing::info!(dir = %self.dir.display(), records = entries.len(), latest = ?entries.last().map(|e| e.voters.ids()), "voter set records recovered");
        }
        // A voter set written before KRaftVersionRecords were (this node's earlier versions)
        // still means kraft.version 1.
        self.kraft_version = kraft_version.unwrap_or(if entries.is_empty() {
            0
        } else {
            crate::voters::KRAFT_VERSION_DYNAMIC
        });
        if self.kraft_version > 0 {
            tracing::info!(dir = %self.dir.display(), kraft_version = self.kraft_version, "kraft.version read back");
        }
        self.recovered_voter_entries = entries;
        self.voter_records_scanned = true;
        Ok(())
    }

    fn inconsistent(&self, offset: u64, error: impl std::fmt::Display) -> StorageError {
        StorageError::Inconsistent {
            path: self.dir.display().to_string(),
            reason: format!("reading voter set records at offset {offset}: {error}"),
        }
    }

    /// The voters written into the quorum-state file from now on.
    pub fn set_voters(&mut self, voters: &[i32]) {
        self.voters = voters.to_vec();
    }

    /// Starts writing the quorum-state file (tmp + fdatasync + rename + folder fsync, through the
    /// ring). What the core sends after it waits (`Host`'s held messages) for
    /// [`PartitionStore::take_durable_quorum_state`] to report it.
    pub fn write_quorum_state<I: Io>(
        &mut self,
        io: &mut I,
        state: ElectionState,
    ) -> Result<(), StorageError> {
        let mut data = QuorumStateData::initial(&self.cluster_id, &self.voters);
        data.applied_offset = self.applied_offset() as i64;
        data.leader_epoch = state.epoch as i32;
        data.leader_id = state.leader_id.unwrap_or(-1);
        data.voted_id = state.voted_for.unwrap_or(-1);
        self.quorum_state_issued += 1;
        // Requested first: a write that meets ENOSPC waits and is retried under this ticket,
        // and its state is reported when that retry is durable.
        self.quorum_state_requested
            .push_back((self.quorum_state_issued, state));
        self.quorum_state
            .write(io, self.quorum_state_issued, &data)?;
        Ok(())
    }

    /// KIP-595's quorum-state `appliedOffset`: the offset from which a restart would scan the
    /// log forward (everything below it is applied): the end offset of what the partition's
    /// state machine has applied (`last_applied_offset() + 1`) where it runs one, else the
    /// high-watermark (a `delete` topic's records are applied by being served once committed).
    /// Written only with the quorum-state writes elections make anyway, never per commit, so it
    /// trails; it is informative: recovery reads every voter set record from the log start
    /// (`scan_voter_records`) and does not trust it.
    pub fn applied_offset(&self) -> u64 {
        if self.keeps_snapshots {
            use crate::state_machine::StateMachine;
            (self.snapshots.state_machine.last_applied_offset() + 1).max(0) as u64
        } else {
            self.high_watermark
        }
    }

    /// The ticket of the latest quorum-state write issued (held messages wait for it).
    pub fn quorum_state_issued(&self) -> u64 {
        self.quorum_state_issued
    }

    /// The ticket of the latest quorum-state write that is durable.
    pub fn quorum_state_durable(&self) -> u64 {
        self.quorum_state.durable_ticket()
    }

    /// The newest state that became durable since the last call, if any: writes asked for while
    /// one was in flight were replaced by the newest, which covers them.
    pub fn take_durable_quorum_state(&mut self) -> Option<ElectionState> {
        let durable = self.quorum_state.durable_ticket();
        let mut newest = None;
        while let Some(&(ticket, state)) = self.quorum_state_requested.front() {
            if ticket > durable {
                break;
            }
            self.quorum_state_requested.pop_front();
            newest = Some(state);
        }
        newest
    }

    /// Waits for the quorum-state writes in flight (the partition is being closed).
    pub fn finish_quorum_state<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        Ok(self.quorum_state.finish_blocking(io)?)
    }

    /// Leader append: stamps offsets from the log end and `leader_epoch`. Returns the base offset.
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
        let info = self.log.append_as_leader(bytes, leader_epoch as i32)?;
        Ok(info.base_offset as u64)
    }

    /// Whole batches from `offset`, at most `max_bytes` (at least one batch), materialised.
    pub fn read<I: Io>(
        &mut self,
        io: &mut I,
        offset: u64,
        max_bytes: u32,
    ) -> Result<Bytes, StorageError> {
        if offset >= self.log.log_end_offset() as u64 || max_bytes == 0 {
            return Ok(Bytes::new());
        }
        let view = self.log.read(io, offset as i64, max_bytes as usize)?;
        if let ReadView::File {
            path,
            reader,
            position,
            length_bytes,
            ..
        } = &view
        {
            // A region below the segment's written end is complete on disk: read it with
            // `pread` on the segment's kept-open reader (through the backend on the memory
            // one, which has none). The engine's `read_view_bytes` first waits for the flush
            // in flight, which stalled the event loop on an fdatasync for every metadata scan
            // of the produce path (docs/benchmarks.md).
            let read = match reader {
                Some(reader) => reader.read_at(path, *position, *length_bytes as usize),
                None => io.read_buffered_at(path, *position, *length_bytes as usize),
            };
            if let Ok(bytes) = read
                && bytes.len() as u64 == *length_bytes
            {
                return Ok(Bytes::from(bytes));
            }
        }
        Ok(self.log.read_view_bytes(io, &view)?)
    }

    /// Whole batches from `offset` whose last offset is below `end_offset`, at most `max_bytes`
    /// (at least one batch), for a send without a userspace copy: the in-memory tail as a
    /// `Bytes` slice, a written segment range as a [`FileRange`] carrying the segment's
    /// kept-open buffered reader, which the runtime sends from with `sendfile(2)` from the page
    /// cache (the engine's own descriptor may be O_DIRECT, which sendfile cannot read at
    /// unaligned positions). The range's clone of the reader keeps a deleted or truncated-away
    /// segment's bytes readable while the reply is queued.
    pub fn read_region<I: Io>(
        &mut self,
        io: &mut I,
        offset: u64,
        max_bytes: u32,
        end_offset: u64,
    ) -> Result<Records, StorageError> {
        if offset >= self.log.log_end_offset() as u64 || offset >= end_offset || max_bytes == 0 {
            return Ok(Records::Memory(Bytes::new()));
        }
        let end_offset = i64::try_from(end_offset).unwrap_or(i64::MAX);
        let view = self
            .log
            .read_below(io, offset as i64, max_bytes as usize, end_offset)?;
        match view {
            ReadView::Memory(bytes) => Ok(Records::Memory(bytes)),
            ReadView::File {
                path,
                reader,
                position,
                length_bytes,
                ..
            } => {
                let length =
                    u32::try_from(length_bytes).map_err(|_| StorageError::Inconsistent {
                        path: path.display().to_string(),
                        reason: format!("a read of {length_bytes} bytes does not fit one response"),
                    })?;
                Ok(Records::File(FileRange {
                    path,
                    reader,
                    position,
                    length,
                }))
            }
        }
    }

    /// The log start clients see: the engine's, or the advance the core already made that
    /// waits for idle I/O to delete its segments (node/mod.rs), whichever is later.
    pub fn log_start_offset(&self) -> u64 {
        (self.log.log_start_offset().max(0) as u64).max(self.deferred_log_start_offset.unwrap_or(0))
    }

    /// The core caught up after a repair: the marker goes (durably: a restart before this
    /// keeps the core's caution, which is safe).
    pub fn finish_repair<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        let path = self.dir.join(REPAIR_PENDING_FILE_NAME);
        io.remove_file(&path).map_err(LogError::from)?;
        io.sync_dir(&self.dir).map_err(LogError::from)?;
        self.repair_pending = false;
        Ok(())
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

    /// Whether a flush or a quorum-state write the core asked for has not completed yet.
    pub fn persistence_outstanding(&self) -> bool {
        (self.log.durable_end_offset() as u64) < self.flush_target
            || self.quorum_state.durable_ticket() < self.quorum_state_issued
    }
}

/// Offers each completion to every log and quorum-state writer. A store's error does not stop
/// the routing of the others' completions: it is returned with the store's index in `stores`
/// (the host takes that partition offline, or lets it wait for space: `Host::pump`).
pub fn route_completions<I: Io>(
    io: &mut I,
    stores: &mut [&mut PartitionStore],
    completions: Vec<Completion>,
) -> Vec<(usize, StorageError)> {
    let mut failures = Vec::new();
    'next: for completion in completions {
        let mut completion = completion;
        for (index, store) in stores.iter_mut().enumerate() {
            match store.log.on_completion(io, completion) {
                Ok(Routed::Mine { .. }) => continue 'next,
                Ok(Routed::Foreign(back)) => completion = back,
                Err(error) => {
                    failures.push((index, error.into()));
                    continue 'next;
                }
            }
            match store.quorum_state.on_completion(io, completion) {
                Ok(WriterRouted::Mine { .. }) => continue 'next,
                Ok(WriterRouted::Foreign(back)) => completion = back,
                Err(error) => {
                    failures.push((index, error.into()));
                    continue 'next;
                }
            }
        }
        tracing::warn!(op = ?completion.op_id, "completion of no partition log");
    }
    failures
}

/// Opens a partition log; with `repair`, a segment that recovery refuses as damaged
/// (`LogError::Corruption`: acknowledged bytes that no longer read back) is set aside with every
/// later segment, into the folder's `damaged/`, and the log opened again without them: it ends
/// where the intact segments end, and the records after are fetched again from the leader.
/// The folder gets `repair-pending` first, so the core learns it holds less than it may have
/// acknowledged (it grants no vote and does not stand until it has caught up with a leader,
/// `Raft::repair_pending`): a voter that forgot acknowledged records must not help elect a
/// leader that lacks them. Without `repair` (a single replica: no peer holds the records) the
/// damage is refused as before.
fn open_repairing<I: Io>(
    io: &mut I,
    dir: &Path,
    log_config: LogConfig,
    repair: bool,
) -> Result<(PartitionLog, ringlog_engine::log::RecoveryReport), StorageError> {
    loop {
        match PartitionLog::open(io, dir, log_config.clone()) {
            Ok(opened) => return Ok(opened),
            Err(LogError::Corruption {
                path,
                position,
                reason,
            }) if repair && segment_base_of(&path).is_some() => {
                let base = segment_base_of(&path).expect("checked");
                tracing::error!(
                    path = %path.display(),
                    position,
                    reason,
                    "damaged segment: it and every later one are set aside in damaged/, and the records are fetched again from the leader"
                );
                mark_repair_pending(io, dir, base)?;
                set_aside_segments_from(io, dir, base)?;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Whether the folder's `checkpoints/` holds a frozen snapshot file (valid or not).
fn has_snapshot_files<I: Io>(io: &mut I, dir: &Path) -> bool {
    let checkpoints = ringlog_engine::snapshot::naming::checkpoints_dir(dir);
    io.exists(&checkpoints)
        && io
            .list_dir(&checkpoints)
            .is_ok_and(|names| names.iter().any(|n| n.ends_with(".checkpoint")))
}

/// Moves every file of the folder's `checkpoints/` into `damaged/`, durably.
fn set_aside_snapshots<I: Io>(io: &mut I, dir: &Path) -> Result<(), StorageError> {
    let checkpoints = ringlog_engine::snapshot::naming::checkpoints_dir(dir);
    if !io.exists(&checkpoints) {
        return Ok(());
    }
    let names = io.list_dir(&checkpoints).map_err(LogError::from)?;
    set_aside(io, dir, &checkpoints, names)
}

/// Writes `repair-pending` (naming the first offset set aside) unless a repair already did.
fn mark_repair_pending<I: Io>(io: &mut I, dir: &Path, offset: u64) -> Result<(), StorageError> {
    let marker = dir.join(REPAIR_PENDING_FILE_NAME);
    if !io.exists(&marker) {
        offset_checkpoint::persist(io, &marker, offset)?;
    }
    Ok(())
}

/// Moves the files `names` of folder `from` into the partition folder's `damaged/`, each under
/// a name not taken there yet, and makes both folders durable.
fn set_aside<I: Io>(
    io: &mut I,
    dir: &Path,
    from: &Path,
    names: Vec<String>,
) -> Result<(), StorageError> {
    let damaged = dir.join(DAMAGED_DIR_NAME);
    io.create_dir_all(&damaged).map_err(LogError::from)?;
    for name in names {
        let mut target = damaged.join(&name);
        let mut n = 1;
        while io.exists(&target) {
            target = damaged.join(format!("{name}.{n}"));
            n += 1;
        }
        io.rename(&from.join(&name), &target)
            .map_err(LogError::from)?;
    }
    io.sync_dir(&damaged).map_err(LogError::from)?;
    io.sync_dir(from).map_err(LogError::from)?;
    Ok(())
}

/// The base offset of a segment file's path (`<20 digits>.log`).
fn segment_base_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// Moves every segment file (`.log`, `.index`) whose base offset is at least `base` into
/// `damaged/`, durably.
fn set_aside_segments_from<I: Io>(io: &mut I, dir: &Path, base: u64) -> Result<(), StorageError> {
    let names = io
        .list_dir(dir)
        .map_err(LogError::from)?
        .into_iter()
        .filter(|name| {
            let Some((stem, ext)) = name.split_once('.') else {
                return false;
            };
            (ext == "log" || ext == "index")
                && stem.len() == 20
                && stem.parse::<u64>().is_ok_and(|b| b >= base)
        })
        .collect();
    set_aside(io, dir, dir, names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog_engine::batch::RecordBatchBuilder;
    use ringlog_engine::io::{AnyIo, SyscallIo};

    fn open(io: &mut AnyIo, dir: &Path) -> PartitionStore {
        let (store, _) =
            PartitionStore::open(io, dir, LogConfig::default(), "cluster", &[1], false, false)
                .expect("open");
        store
    }

    /// A partition opened while another log's flush is in flight (a topic created while the
    /// metadata partition fetches): the blocking reads of the opening take only their own
    /// completions, so the other log's stay in the ring and its flush still completes. Seen
    /// before routing by owner: the quorum-state read dropped them, the metadata partition
    /// waited for its flush forever and never fetched again, and a restarted node kept a
    /// deleted topic (tests/topics_admin.rs).
    #[test]
    fn completions_of_another_log_survive_a_partition_opening() {
        let folder = tempfile::tempdir().unwrap();
        let mut io = AnyIo::Syscall(SyscallIo::new());
        // Partition b exists with a quorum-state file, so reopening it reads through the ring.
        let mut b = open(&mut io, &folder.path().join("b"));
        b.write_quorum_state(&mut io, ElectionState::default())
            .unwrap();
        b.finish_quorum_state(&mut io).unwrap();
        drop(b);

        let mut a = open(&mut io, &folder.path().join("a"));
        let mut builder = RecordBatchBuilder::new(0);
        builder.append(1, None, Some(b"v"), &[]);
        a.append_as_leader(&[builder.build().into_bytes()], 1)
            .unwrap();
        a.log.flush(&mut io).unwrap();
        let _b = open(&mut io, &folder.path().join("b"));
        assert!(io.ready_count() > 0, "reopening b ran a's queued flush");

        for _ in 0..16 {
            let mut ready = Vec::new();
            io.submit_and_wait(0).unwrap();
            io.drain_completions(&mut ready);
            assert!(route_completions(&mut io, &mut [&mut a], ready).is_empty());
            if a.log.durable_end_offset() == 1 {
                return;
            }
        }
        panic!("a's flush never completed: its completions were lost");
    }

    /// The log's tail cache follows the replica's role: a leader answers its followers' reads
    /// of what it has just flushed from memory, a follower keeps nothing it is not asked for.
    #[test]
    fn only_a_leading_replica_keeps_the_tail_cache() {
        let folder = tempfile::tempdir().unwrap();
        let mut io = AnyIo::Syscall(SyscallIo::new());
        let mut store = open(&mut io, &folder.path().join("p"));
        let append_and_flush = |store: &mut PartitionStore, io: &mut AnyIo, i: u64| {
            let mut builder = RecordBatchBuilder::new(0);
            builder.append(1, None, Some(&[i as u8; 3000]), &[]);
            store
                .append_as_leader(&[builder.build().into_bytes()], 1)
                .unwrap();
            store.log.flush_and_wait(io).unwrap();
        };
        let in_memory = |store: &PartitionStore, io: &AnyIo| {
            matches!(
                store.log.read(io, 5, 1 << 20).unwrap(),
                ringlog_engine::log::ReadView::Memory(_)
            )
        };
        store.set_leading(true);
        for i in 0..10 {
            append_and_flush(&mut store, &mut io, i);
        }
        assert!(
            in_memory(&store, &io),
            "a leader reads its flushed tail from memory"
        );
        store.set_leading(false);
        assert!(!in_memory(&store, &io), "a follower dropped it");
        for i in 10..20 {
            append_and_flush(&mut store, &mut io, i);
        }
        assert!(!in_memory(&store, &io), "and keeps none of what it writes");
    }
}
