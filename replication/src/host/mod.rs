//! The host: the replication core ([`MultiRaft`]) and the partition stores it drives, with the
//! executor of the core's [`Work`] (docs/design.md, "The host").
//!
//! ```text
//!  runtime (net/src/node)                      Host<I: Io>
//!  ─ step / tick / append / resign ──────▶ ┌─────────────────────────────────────┐
//!  ─ pump (storage completions) ─────────▶ │ MultiRaft ──Work──▶ execute         │──▶ engine (Io)
//!  ─ on_snapshot_generated ──────────────▶ │ held messages, persistence reports  │
//!  ◀──────────────── take_output ──────────│ Output: messages, appends, HW, ...  │
//!                                          └─────────────────────────────────────┘
//! ```
//!
//! Kafka splits the same way: `raft/` owns `KafkaRaftClient` and its log, `core/server` the
//! APIs. The host has no sockets, no threads, no clock and no randomness of its own: every call
//! that may step the core takes `now_ms`, storage goes through the one [`Io`] it owns, and what
//! the runtime must do (send a message, answer a fetch with a file range, track an append for
//! idempotent producers, write a snapshot off the loop) comes back as [`Output`], in order,
//! from [`Host::take_output`]. It never calls up into API, controller or metrics code.
//!
//! Rules it keeps (`Work`'s contract, docs/raft.md):
//! - no re-entrancy: the core is never called while a work list is being executed; persistence
//!   completions go into a queue and are reported after the current list (`pump`);
//! - a quorum-state write is synchronous (tmp + fdatasync + rename + folder fsync) and finishes
//!   before the next work item runs;
//! - a `SendAfterPersist` message waits until every log flush requested before it completed;
//! - `Persisted::Log` is reported only from the engine's durable end offset, which moves only
//!   after an fdatasync.
//!
//! A storage fault stays in its partition (issue 17, docs/node.md "Storage faults"): out of
//! space (ENOSPC, EDQUOT) a partition's flush waits and [`Host::retry_flushes`] asks again
//! (the runtime calls it on a backoff of its own clock); any other storage error takes the
//! partition offline ([`Host::offline_partitions`]): its core is removed, its files closed, and
//! every other partition, and the process, go on.

mod execute;
mod pump;
pub mod snapshots;
pub mod store;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;

use bytes::Bytes;
use ringlog_engine::io::Io;
use ringlog_engine::log::{LogConfig, UnverifiedBatches};

use crate::error::RaftError;
use crate::message::{FetchResponse, FetchSnapshotResponse, Message};
use crate::multi::{MultiRaft, PartitionMessage};
use crate::raft::{AppendResult, Raft};
use crate::state_machine::SnapshotPolicyConfig;
use crate::types::{NodeId, OffsetAndEpoch, PartitionId, QuorumConfig, RecoveredState};
use crate::voters::{VoterInfo, VoterSet};
use crate::work::Persisted;

pub use pump::CONFIRMATION_DELAY_MS;
pub use snapshots::{GenerationOutcome, PartitionSnapshots, SnapshotJob, write_snapshot_job};
pub use store::{FileRange, PartitionStore, Records, StorageError, route_completions};

/// What a host call can fail with: the core refused the input (a stale or malformed message:
/// the runtime logs it and goes on), or storage failed (the partition's files cannot be trusted).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("replication core: {0}")]
    Raft(#[from] RaftError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The host's fixed settings.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Written into every quorum-state file.
    pub cluster_id: String,
    /// The configured voters, written into every quorum-state file.
    pub voters: Vec<NodeId>,
    /// KIP-630: when a snapshotted partition takes a snapshot.
    pub snapshot_policy: SnapshotPolicyConfig,
    /// `replica.fetch.snapshot.max.bytes`: at most this much of one snapshot per answer.
    pub fetch_snapshot_max_bytes: u32,
    /// A rule of the host broken on purpose, to show that tests catch it (sim builds only).
    #[cfg(feature = "sim")]
    pub mutation: Option<HostMutation>,
}

impl HostConfig {
    pub fn new(
        cluster_id: String,
        voters: Vec<NodeId>,
        snapshot_policy: SnapshotPolicyConfig,
        fetch_snapshot_max_bytes: u32,
    ) -> HostConfig {
        HostConfig {
            cluster_id,
            voters,
            snapshot_policy,
            fetch_snapshot_max_bytes,
            #[cfg(feature = "sim")]
            mutation: None,
        }
    }
}

/// A host rule to break on purpose (the simulator's mutation check, docs/simulator.md).
#[cfg(feature = "sim")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMutation {
    /// Report the log durable up to its end offset without waiting for the fdatasync, so a
    /// produce is acknowledged before its flush.
    AcknowledgeBeforeFlush,
    /// Release a message held behind a quorum-state write without waiting for it, so a vote
    /// leaves before it is durable.
    SendBeforeQuorumState,
    /// Generate each snapshot without the first key of the state, so the snapshot differs from
    /// the committed log it stands for.
    SnapshotOneRecordOff,
}

/// A partition to open: its folder, its log's settings, whether it keeps a state machine with
/// snapshots.
#[derive(Clone, Debug)]
pub struct PartitionSpec {
    pub id: PartitionId,
    pub dir: PathBuf,
    pub log_config: LogConfig,
    pub keeps_snapshots: bool,
}

/// What the runtime must do, in the order the host produced it.
#[derive(Debug)]
pub enum Output {
    /// A core message for `to`: a request to send, or an answer for the request it answers.
    Send {
        partition: PartitionId,
        to: NodeId,
        message: Message,
    },
    /// A replica fetch answered; `records`, when set, holds the answer's bytes (the response's
    /// own `records` are then empty).
    FetchResponse {
        partition: PartitionId,
        response: FetchResponse,
        records: Option<FileRange>,
    },
    /// KIP-630: a FetchSnapshot answered; `region`, when set, holds the answer's bytes.
    FetchSnapshotResponse {
        partition: PartitionId,
        to: NodeId,
        response: FetchSnapshotResponse,
        region: Option<FileRange>,
    },
    /// The leader appended `batches` (stamped from `base_offset`).
    LeaderAppended {
        partition: PartitionId,
        base_offset: u64,
        batches: Vec<Bytes>,
    },
    /// A follower appended the leader's `records` as they are.
    FollowerAppended {
        partition: PartitionId,
        records: Bytes,
    },
    /// The log now ends at `offset` (a diverging tail was cut) or, with `snapshot`, starts and
    /// ends there (a fetched snapshot was installed).
    Truncated {
        partition: PartitionId,
        offset: u64,
        snapshot: bool,
    },
    /// The high-watermark moved; the state machine (if any) applied what it committed.
    HighWatermark {
        partition: PartitionId,
        high_watermark: u64,
    },
    /// A snapshot to write off the loop ([`write_snapshot_job`]); report the result with
    /// [`Host::on_snapshot_generated`].
    GenerateSnapshot {
        partition: PartitionId,
        dir: PathBuf,
        job: SnapshotJob,
    },
}

/// Timing hooks: the runtime measures the host's work items with its own clock (the host has
/// none). `end` names the item or stage that began at the last `begin`.
pub trait Probe {
    fn begin(&mut self);
    fn end(&mut self, name: &'static str);
}

struct NoProbe;

impl Probe for NoProbe {
    fn begin(&mut self) {}
    fn end(&mut self, _name: &'static str) {}
}

/// A `SendAfterPersist` message waiting for the flushes and quorum-state writes requested
/// before it.
struct Held {
    /// What each partition had outstanding when the message was held.
    targets: Vec<HeldTarget>,
    partition: PartitionId,
    to: NodeId,
    message: Message,
}

/// One partition's persistence a held message waits for.
struct HeldTarget {
    partition: PartitionId,
    /// Released once the log is durable to here…
    flush_target: u64,
    /// …or a truncation came in between (`truncate_to` makes what stays durable itself).
    truncations: u64,
    /// And once the quorum-state write of this ticket (or a later one) is durable.
    quorum_state_ticket: u64,
}

pub struct Host<I: Io> {
    io: I,
    config: HostConfig,
    multi: MultiRaft,
    stores: BTreeMap<PartitionId, PartitionStore>,
    held: VecDeque<Held>,
    persisted: VecDeque<(PartitionId, Persisted)>,
    output: Vec<Output>,
    probe: Box<dyn Probe>,
    /// The `now_ms` of the latest call, for work that records a time (a snapshot's).
    now_ms: u64,
    /// Partitions recovered ahead of their start ([`Host::preopen`]), by folder.
    preopened: BTreeMap<PathBuf, (PartitionStore, RecoveredState)>,
    /// Partitions taken offline by a storage error, with the error.
    offline: BTreeMap<PartitionId, OfflinePartition>,
    /// Fetched snapshots installed by the work list being executed, with the voter set each
    /// holds, for the core once the list is done (`execute`).
    installed_snapshots: Vec<(PartitionId, OffsetAndEpoch, Option<VoterSet>)>,
    /// The partitions whose store carries the `repair-pending` marker, for `finish_repairs`
    /// to look at after each work list instead of walking every store.
    repairing: BTreeSet<PartitionId>,
    /// KIP-630: per partition, the snapshot older ones are deleted before, at the start of the
    /// next `pump`, once the answers of the call that retired them were carried out
    /// (`Work::DeleteSnapshotsBefore`, execute.rs). Kept here, as `repairing`, so a pump does
    /// not walk every store to find them.
    retired_snapshots: BTreeMap<PartitionId, OffsetAndEpoch>,
    /// The partitions whose log holds a confirmation record waiting to be written
    /// (`write_due_confirmations`). Walking every store for them on every turn was ~2 % of a
    /// loaded voter's CPU with a hundred partitions (2026-12-06).
    confirmations_watched: BTreeSet<PartitionId>,
    /// Partitions whose record may have begun or stopped waiting since the last
    /// `write_due_confirmations`, which looks at them first: every owner of a drained
    /// completion (a flush completes), every partition a work list reached (a flush carries
    /// the record; a truncation's or roll's blocking wait completes one).
    confirmations_fresh: Vec<PartitionId>,
    /// The watched records' due times (each store's `confirmation_due_ms`), earliest first:
    /// before the first, nothing is written.
    confirmations_due: BTreeSet<(u64, PartitionId)>,
    /// A watched log waits for disk space: its record is looked at on every call.
    confirmations_space_waiting: bool,
    /// When `write_due_confirmations` last looked at every store (a record that began to wait
    /// some other way is found within `CONFIRMATION_SWEEP_MS`).
    confirmations_swept_ms: u64,
}

/// A partition taken offline by a storage error (Kafka's offline log directory, per partition).
#[derive(Clone, Debug)]
pub struct OfflinePartition {
    pub dir: PathBuf,
    pub error: String,
}

impl<I: Io> Host<I> {
    /// Opens (and recovers) every partition's files and starts the core over them.
    pub fn open(
        mut io: I,
        config: HostConfig,
        quorum: &QuorumConfig,
        partitions: Vec<PartitionSpec>,
        seed: u64,
        now_ms: u64,
    ) -> Result<Host<I>, HostError> {
        let mut stores = BTreeMap::new();
        let mut recovered: BTreeMap<PartitionId, RecoveredState> = BTreeMap::new();
        let mut recovered_snapshots = BTreeMap::new();
        let mut voter_records = BTreeMap::new();
        for spec in partitions {
            let (store, state) = PartitionStore::open(
                &mut io,
                &spec.dir,
                spec.log_config,
                &config.cluster_id,
                &config.voters,
                spec.keeps_snapshots,
                // A repair fetches the records again from a peer: a lone voter has none.
                config.voters.len() > 1,
            )?;
            tracing::info!(partition = spec.id, ?state, "recovered");
            recovered_snapshots.insert(spec.id, store.recovered_snapshots);
            voter_records.insert(spec.id, store.recovered_voter_entries.clone());
            stores.insert(spec.id, store);
            recovered.insert(spec.id, state);
        }
        let repairing = stores
            .iter()
            .filter(|(_, store)| store.repair_pending)
            .map(|(id, _)| *id)
            .collect();
        let multi = MultiRaft::new_recovered(
            quorum,
            &recovered,
            &recovered_snapshots,
            voter_records,
            seed,
            now_ms,
        )?;
        Ok(Host {
            io,
            config,
            multi,
            stores,
            held: VecDeque::new(),
            persisted: VecDeque::new(),
            output: Vec::new(),
            probe: Box::new(NoProbe),
            now_ms,
            preopened: BTreeMap::new(),
            offline: BTreeMap::new(),
            installed_snapshots: Vec::new(),
            repairing,
            retired_snapshots: BTreeMap::new(),
            confirmations_watched: BTreeSet::new(),
            confirmations_fresh: Vec::new(),
            confirmations_due: BTreeSet::new(),
            confirmations_space_waiting: false,
            confirmations_swept_ms: 0,
        })
    }

    /// The runtime's timing hooks (a stall watch).
    pub fn set_probe(&mut self, probe: Box<dyn Probe>) {
        self.probe = probe;
    }

    /// Recovers a partition's files now, ahead of [`Host::add_partition`] for the same folder
    /// (which then only starts its core): a runtime opens at start-up, before it serves, the
    /// partitions it knows it held, so their recovery (a scan of the active segment, up to its
    /// size) never holds its event loop.
    pub fn preopen(&mut self, dir: PathBuf, log_config: LogConfig) -> Result<(), StorageError> {
        if self.preopened.contains_key(&dir) || self.stores.values().any(|s| s.dir == dir) {
            return Ok(());
        }
        let (store, recovered) = PartitionStore::open(
            &mut self.io,
            &dir,
            log_config,
            &self.config.cluster_id,
            &self.config.voters,
            false,
            // Damage is repaired when the partition starts, where its replicas are known
            // (`add_partition`): a topic partition with one replica has no peer to repair from.
            false,
        )?;
        self.preopened.insert(dir, (store, recovered));
        Ok(())
    }

    /// A preopened partition's log bounds (start, end) and recovered high-watermark.
    pub fn preopened_bounds(&self, dir: &std::path::Path) -> Option<(u64, u64, u64)> {
        self.preopened.get(dir).map(|(store, _)| {
            (
                store.log.log_start_offset().max(0) as u64,
                store.log.log_end_offset().max(0) as u64,
                store.high_watermark,
            )
        })
    }

    /// A preopened partition's store (its recovered snapshots, say).
    pub fn preopened_store(&self, dir: &std::path::Path) -> Option<&PartitionStore> {
        self.preopened.get(dir).map(|(store, _)| store)
    }

    /// Whole batches of a preopened partition from `offset` (see [`Host::read`]).
    pub fn read_preopened(
        &mut self,
        dir: &std::path::Path,
        offset: u64,
        max_bytes: u32,
    ) -> Result<Bytes, StorageError> {
        let (store, _) = self.preopened.get_mut(dir).expect("preopened partition");
        store.read(&mut self.io, offset, max_bytes)
    }

    /// Closes what [`Host::preopen`] opened and no partition started with (a folder about to be
    /// removed, or every one once the runtime knows its partitions).
    pub fn discard_preopened(&mut self, dir: Option<&std::path::Path>) {
        let dirs: Vec<PathBuf> = match dir {
            Some(dir) => vec![dir.to_path_buf()],
            None => self.preopened.keys().cloned().collect(),
        };
        for dir in dirs {
            if let Some((store, _)) = self.preopened.remove(&dir)
                && let Err(error) = store.log.close(&mut self.io)
            {
                tracing::warn!(dir = %dir.display(), %error, "closing a preopened partition");
            }
        }
    }

    /// Opens a partition created after the start (a topic's) and starts its core; a partition
    /// recovered by [`Host::preopen`] with the same log settings is taken as it is.
    pub fn add_partition(
        &mut self,
        quorum: &QuorumConfig,
        spec: PartitionSpec,
        seed: u64,
        now_ms: u64,
    ) -> Result<RecoveredState, HostError> {
        self.now_ms = now_ms;
        if self.offline.contains_key(&spec.id) {
            return Err(StorageError::NotHosted(spec.id).into());
        }
        let preopened = match self.preopened.remove(&spec.dir) {
            Some((store, recovered)) if store.opened_with(&spec.log_config) => {
                Some((store, recovered))
            }
            Some((store, _)) => {
                store.log.close(&mut self.io).map_err(StorageError::from)?;
                None
            }
            None => None,
        };
        let (mut store, recovered) = match preopened {
            Some(found) => found,
            None => PartitionStore::open(
                &mut self.io,
                &spec.dir,
                spec.log_config,
                &self.config.cluster_id,
                &quorum.voters,
                spec.keeps_snapshots,
                quorum.voters.len() > 1,
            )?,
        };
        store.keeps_snapshots = spec.keeps_snapshots;
        // The partition's own voters (a topic partition's replicas), not the configured ones,
        // go into its quorum-state file.
        store.set_voters(&quorum.voters);
        if spec.keeps_snapshots && !store.voter_records_scanned {
            // Preopened as a partition without snapshots: its log was not scanned for voter
            // set records yet.
            store.scan_voter_records(&mut self.io)?;
        }
        self.multi.add_partition_recovered(
            quorum,
            spec.id,
            &recovered,
            store.recovered_snapshots,
            store.recovered_voter_entries.clone(),
            seed,
            now_ms,
        )?;
        if store.repair_pending {
            self.repairing.insert(spec.id);
        }
        self.stores.insert(spec.id, store);
        Ok(recovered)
    }

    /// Takes a partition out: its core, its queued reports and held messages, and its log
    /// (closed after its in-flight I/O; other logs' completions stay in the ring). Returns the
    /// partition's folder. Call it between host calls, so no work of it is half executed.
    pub fn remove_partition(&mut self, id: PartitionId) -> Option<PathBuf> {
        self.multi.remove_partition(id);
        self.persisted.retain(|(p, _)| *p != id);
        self.held.retain(|h| h.partition != id);
        for held in &mut self.held {
            held.targets.retain(|t| t.partition != id);
        }
        self.repairing.remove(&id);
        self.retired_snapshots.remove(&id);
        self.confirmations_watched.remove(&id);
        self.confirmations_due
            .retain(|(_, partition)| *partition != id);
        let mut store = self.stores.remove(&id)?;
        let dir = store.dir.clone();
        if let Err(error) = store.finish_quorum_state(&mut self.io) {
            tracing::warn!(partition = id, %error, "finishing a removed partition's quorum-state");
        }
        if let Err(error) = store.log.close(&mut self.io) {
            tracing::warn!(partition = id, %error, "closing a removed partition");
        }
        Some(dir)
    }

    /// Takes a partition offline after a storage error: its core stops (it neither votes,
    /// leads nor acknowledges any more; the other replicas elect without it), its files are
    /// closed, and the error is kept for Metadata and metrics. A restart recovers its files.
    pub(super) fn take_offline(&mut self, id: PartitionId, error: &StorageError) {
        tracing::error!(partition = id, %error, "storage error: the partition goes offline");
        if let Some(dir) = self.remove_partition(id) {
            self.offline.insert(
                id,
                OfflinePartition {
                    dir,
                    error: error.to_string(),
                },
            );
        }
    }

    /// Partitions taken offline by a storage error.
    pub fn offline_partitions(&self) -> &BTreeMap<PartitionId, OfflinePartition> {
        &self.offline
    }

    /// Partitions whose flush waits for disk space (ENOSPC, EDQUOT).
    pub fn partitions_waiting_for_space(&self) -> Vec<PartitionId> {
        self.stores
            .iter()
            .filter(|(_, store)| store.waiting_for_space())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether `partition`'s flush waits for disk space.
    pub fn waiting_for_space(&self, partition: PartitionId) -> bool {
        self.stores
            .get(&partition)
            .is_some_and(PartitionStore::waiting_for_space)
    }

    /// Asks every partition that waits for disk space to flush again (space may have
    /// returned): a flush that could not start starts, a chain whose writes met ENOSPC submits
    /// them again. Returns how many were asked; whether they got through shows once their
    /// completions are routed ([`Host::pump`], then [`Host::partitions_waiting_for_space`]).
    /// The runtime calls it on a bounded backoff of its own clock, never in a loop.
    pub fn retry_flushes(&mut self) -> usize {
        let waiting = self.partitions_waiting_for_space();
        for partition in &waiting {
            let store = self.stores.get_mut(partition).expect("listed above");
            match store.retry_waiting_for_space(&mut self.io) {
                Ok(()) => {}
                Err(error) if error.is_no_space() => {}
                Err(error) => self.take_offline(*partition, &error),
            }
        }
        waiting.len()
    }

    /// The backend, the host dropped without closing anything: what a crash leaves.
    pub fn into_io(self) -> I {
        self.io
    }

    /// Flushes and closes every log (shutdown).
    pub fn close(mut self) {
        for (partition, mut store) in std::mem::take(&mut self.stores) {
            // A vote or an epoch asked for before the shutdown is on disk when we stop.
            if let Err(error) = store.finish_quorum_state(&mut self.io) {
                tracing::warn!(partition, %error, "finishing the quorum-state write");
            }
            if let Err(error) = store.log.close(&mut self.io) {
                tracing::warn!(partition, %error, "closing the log");
            }
        }
    }

    // ---- driving the core ------------------------------------------------------------------

    /// Timers: returns the next deadline (ms) the core asks to be ticked at.
    pub fn tick(&mut self, now_ms: u64) -> Result<u64, HostError> {
        self.now_ms = now_ms;
        let (work, next_deadline_ms) = self.multi.tick(now_ms)?;
        self.execute(work)?;
        self.write_due_confirmations(now_ms);
        Ok(next_deadline_ms.min(self.next_confirmation_due_ms().unwrap_or(u64::MAX)))
    }

    /// A message from a peer.
    pub fn step(
        &mut self,
        now_ms: u64,
        from: NodeId,
        message: PartitionMessage,
    ) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self.multi.step(now_ms, from, message)?;
        Ok(self.execute(work)?)
    }

    /// Leader: appends a client's batches (Produce). Each batch's CRC must have been checked
    /// when it arrived (a Produce is validated before anything is stored); the store does not
    /// compute it again ([`PartitionStore::append_as_leader`]).
    pub fn append(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        batches: Vec<Bytes>,
    ) -> Result<AppendResult, HostError> {
        self.now_ms = now_ms;
        let (appended, work) = self.multi.append(now_ms, partition, batches)?;
        self.execute(work)?;
        Ok(appended)
    }

    /// A new partition's designated first leader stands at once
    /// ([`Raft::stand_first`](crate::raft::Raft::stand_first)).
    pub fn stand_first(&mut self, now_ms: u64, partition: PartitionId) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self.multi.stand_first(now_ms, partition)?;
        Ok(self.execute(work)?)
    }

    /// KIP-853 AddRaftVoter: the partition's leader appends a voter set with `id` added. The
    /// change is in force at once and done when the returned record's offset is below the
    /// high-watermark (`Output::HighWatermark`).
    pub fn add_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<AppendResult, HostError> {
        self.now_ms = now_ms;
        let (appended, work) = self.multi.add_voter(now_ms, partition, id, info)?;
        self.execute(work)?;
        Ok(appended)
    }

    /// KIP-853 RemoveRaftVoter: the partition's leader appends a voter set without `id` (see
    /// [`Host::add_voter`] for when it is done).
    pub fn remove_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
    ) -> Result<AppendResult, HostError> {
        self.now_ms = now_ms;
        let (appended, work) = self.multi.remove_voter(now_ms, partition, id)?;
        self.execute(work)?;
        Ok(appended)
    }

    /// KIP-853 UpdateRaftVoter: the partition's leader appends a voter set with `id`'s
    /// directory id and endpoints replaced; `None` when nothing changes.
    pub fn update_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<Option<AppendResult>, HostError> {
        self.now_ms = now_ms;
        let Some((appended, work)) = self.multi.update_voter(now_ms, partition, id, info)? else {
            return Ok(None);
        };
        self.execute(work)?;
        Ok(Some(appended))
    }

    /// KIP-595 graceful shutdown of one partition: a leader resigns with EndQuorumEpoch.
    pub fn resign(&mut self, now_ms: u64, partition: PartitionId) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self.multi.resign(now_ms, partition)?;
        Ok(self.execute(work)?)
    }

    /// What the runtime must do, in order, since the last call.
    pub fn take_output(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.output)
    }

    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    // ---- reading ---------------------------------------------------------------------------

    pub fn multi(&self) -> &MultiRaft {
        &self.multi
    }

    /// The partitions whose group was reached since the last call
    /// ([`MultiRaft::take_touched`]): what an observer of the groups' state looks at.
    pub fn take_touched_partitions(&mut self) -> BTreeSet<PartitionId> {
        self.multi.take_touched()
    }

    pub fn raft(&self, partition: PartitionId) -> Option<&Raft> {
        self.multi.partition(partition)
    }

    pub fn store(&self, partition: PartitionId) -> Option<&PartitionStore> {
        self.stores.get(&partition)
    }

    /// DeleteRecords inside a batch: clients read `partition` from `offset` on, durably
    /// ([`PartitionStore::record_delete_records_offset`]). The log start itself moves with
    /// an empty snapshot at the batch's first offset ([`Host::record_empty_snapshot`]).
    pub fn record_delete_records_offset(
        &mut self,
        partition: PartitionId,
        offset: u64,
    ) -> Result<(), StorageError> {
        let store = self
            .stores
            .get_mut(&partition)
            .ok_or(StorageError::NotHosted(partition))?;
        store.record_delete_records_offset(&mut self.io, offset)
    }

    /// A topic's `segment.bytes` changed at runtime: the partition's next segment takes it
    /// (`PartitionLog::set_segment_size_bytes`).
    pub fn set_segment_size_bytes(&mut self, partition: PartitionId, segment_size_bytes: u64) {
        if let Some(store) = self.stores.get_mut(&partition) {
            store.log.set_segment_size_bytes(segment_size_bytes);
        }
    }

    /// The batches a started partition's recovery took unread from its batch lists after a
    /// crash (`LogConfig::defer_listed_check_after_crash`), with the partition's truncation
    /// count now, for the runtime to read and check behind the start
    /// (`PartitionLog::verify_listed`); each partition's once.
    pub fn take_unverified(&mut self, partition: PartitionId) -> (Vec<UnverifiedBatches>, u64) {
        self.stores
            .get_mut(&partition)
            .map_or((Vec::new(), 0), |store| {
                (std::mem::take(&mut store.unverified), store.truncations)
            })
    }

    /// Whether a partition's log still holds the batches [`Host::take_unverified`] gave when
    /// its truncation count was `truncations`: the same segment, not cut since (a cut, and the
    /// records written after it, may have replaced them), and not removed by a log start move.
    pub fn still_holds(
        &self,
        partition: PartitionId,
        batches: &UnverifiedBatches,
        truncations: u64,
    ) -> bool {
        self.stores.get(&partition).is_some_and(|store| {
            store.truncations == truncations
                && store
                    .log
                    .segment_base_offsets()
                    .contains(&batches.base_offset())
                && store.log.log_end_offset() >= batches.end_offset()
        })
    }

    pub fn stores(&self) -> impl Iterator<Item = (PartitionId, &PartitionStore)> {
        self.stores.iter().map(|(id, s)| (*id, s))
    }

    pub fn io(&self) -> &I {
        &self.io
    }

    /// The backend itself, for a snapshot writer that shares it (the host-driven simulator
    /// writes `Output::GenerateSnapshot` jobs on the node's one in-memory disk; production writes
    /// them on a thread with a backend of its own). Its blocking calls take only their own
    /// completions (`io::wait_for_all`), so the host's operations in flight stay routed to it.
    pub fn io_mut(&mut self) -> &mut I {
        &mut self.io
    }

    /// Whole batches from `offset`, at most `max_bytes` (at least one batch), materialised.
    pub fn read(
        &mut self,
        partition: PartitionId,
        offset: u64,
        max_bytes: u32,
    ) -> Result<Bytes, StorageError> {
        let store = self
            .stores
            .get_mut(&partition)
            .ok_or(StorageError::NotHosted(partition))?;
        store.read(&mut self.io, offset, max_bytes)
    }

    /// Whole batches from `offset` below `end_offset`, as memory or a file range to send.
    pub fn read_region(
        &mut self,
        partition: PartitionId,
        offset: u64,
        max_bytes: u32,
        end_offset: u64,
    ) -> Result<Records, StorageError> {
        let store = self
            .stores
            .get_mut(&partition)
            .ok_or(StorageError::NotHosted(partition))?;
        store.read_region(&mut self.io, offset, max_bytes, end_offset)
    }

    /// The bytes of a file range, read into memory (for a runtime that cannot send the file
    /// itself, e.g. over the memory backend): from its reader, or through the backend where it
    /// has none.
    pub fn read_file_range(&mut self, range: &FileRange) -> Result<Bytes, StorageError> {
        let bytes = range
            .read(&mut self.io)
            .map_err(|e| StorageError::Log(e.into()))?;
        Ok(Bytes::from(bytes))
    }
}
