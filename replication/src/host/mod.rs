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
//! - a quorum-state write (tmp + fdatasync + rename + folder fsync) goes through the ring like a
//!   flush, and what it guards waits for it (a `SendAfterPersist` vote, the core's report);
//! - a `SendAfterPersist` message waits until every log flush requested before it completed;
//! - `Persisted::Log` is reported only from the engine's durable end offset, which moves only
//!   after an fdatasync.
//!
//! A storage fault stays in its partition (issue 17, docs/node.md "Storage faults"): out of
//! space (ENOSPC, EDQUOT) a partition's flush waits and [`Host::retry_flushes`] asks again
//! (the runtime calls it on a backoff of its own clock); any other storage error takes the
//! partition offline ([`Host::offline_partitions`]): its core is removed, its files closed, and
//! every other partition, and the process, go on.

// What lives where: `drive` (calls that step the core), `execute` (a work list carried out),
// `pump` (storage completions, durability reports), `confirmations` (records written alone),
// `lifecycle`
// (partitions added, removed, closed), `faults` (out of space, offline), `reads`, `output`,
// `snapshots` (KIP-630), `store` (one partition's files).
mod confirmations;
mod drive;
mod execute;
mod faults;
mod lifecycle;
mod output;
mod pump;
mod reads;
pub mod snapshots;
pub mod store;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;

use ringlog_engine::io::Io;
use ringlog_engine::log::{LaggingTailBudget, LogConfig};

use crate::error::RaftError;
use crate::message::Message;
use crate::multi::MultiRaft;
use crate::raft::Raft;
use crate::state_machine::SnapshotPolicyConfig;
use crate::types::{NodeId, OffsetAndEpoch, PartitionId, QuorumConfig, RecoveredState};
use crate::voters::VoterSet;
use crate::work::Persisted;

pub use confirmations::CONFIRMATION_DELAY_MS;
pub use faults::OfflinePartition;
pub use output::Output;
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

/// [`HostConfig::lagging_tail_budget_bytes`] by default: a follower back from a restart 1 GiB
/// behind reads all it missed from memory (docs/log.md "What lagging voters have not fetched").
pub const DEFAULT_LAGGING_TAIL_BUDGET_BYTES: u64 = 1 << 30;

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
    /// `replica.lag.cache.max.bytes`: the bytes of appended batches the node's logs keep in
    /// memory, all together, for voters that have not fetched them yet
    /// ([`ringlog_engine::log::LaggingTailBudget`]; 0: none beyond each leader's tail cache).
    pub lagging_tail_budget_bytes: u64,
    /// A rule of the host broken on purpose, to show that tests catch it (sim builds only).
    #[cfg(feature = "sim")]
    pub mutation: Option<HostMutation>,
    /// The simulator's check of every resting group on every tick
    /// ([`MultiRaft::set_check_resting_ticks`]; sim builds only, off unless set).
    #[cfg(feature = "sim")]
    pub check_resting_ticks: bool,
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
            lagging_tail_budget_bytes: DEFAULT_LAGGING_TAIL_BUDGET_BYTES,
            #[cfg(feature = "sim")]
            mutation: None,
            #[cfg(feature = "sim")]
            check_resting_ticks: false,
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
    /// The memory the node's logs share for records their leaders' lagging voters still fetch
    /// (`HostConfig::lagging_tail_budget_bytes`; execute.rs keeps each log's floor).
    lagging_tail: LaggingTailBudget,
    /// KIP-630: per partition, the snapshot older ones are deleted before, at the start of the
    /// next `pump`, once the answers of the call that retired them were carried out
    /// (`Work::DeleteSnapshotsBefore`, execute.rs). Kept here, as `repairing`, so a pump does
    /// not walk every store to find them.
    retired_snapshots: BTreeMap<PartitionId, OffsetAndEpoch>,
    /// Confirmation records waiting to be written alone (confirmations.rs).
    confirmations: confirmations::ConfirmationWatch,
    /// The partitions whose durable end or quorum state may have moved since `pump` last
    /// reported them: the stores that had an operation in flight when completions were
    /// drained, those a work list reached, those whose flush was retried or whose log start
    /// advance ran in `pump`. The reports look at these only (pump.rs); simulator builds check
    /// every store after each report.
    durability_news: BTreeSet<PartitionId>,
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
        #[allow(unused_mut)]
        let mut multi = MultiRaft::new_recovered(
            quorum,
            &recovered,
            &recovered_snapshots,
            voter_records,
            seed,
            now_ms,
        )?;
        #[cfg(feature = "sim")]
        multi.set_check_resting_ticks(config.check_resting_ticks);
        let lagging_tail = LaggingTailBudget::new(config.lagging_tail_budget_bytes);
        // Every log's chunks count against the node's budget from the start (recovery keeps a
        // partial last block's); none is kept for lagging voters before the core says who lags.
        for store in stores.values_mut() {
            store.keep_for_lagging_voters(&lagging_tail, None);
        }
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
            lagging_tail,
            repairing,
            retired_snapshots: BTreeMap::new(),
            confirmations: Default::default(),
            durability_news: BTreeSet::new(),
        })
    }

    /// The runtime's timing hooks (a stall watch).
    pub fn set_probe(&mut self, probe: Box<dyn Probe>) {
        self.probe = probe;
    }

    /// The backend, the host dropped without closing anything: what a crash leaves.
    pub fn into_io(self) -> I {
        self.io
    }

    /// What the runtime must do, in order, since the last call.
    pub fn take_output(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.output)
    }

    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

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
}
