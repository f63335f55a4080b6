//! The deterministic cluster simulator (feature `sim`): 1–5 voters and 0–2 observers running
//! the real core (1–4 partitions, one Raft group each, on the same nodes) over a simulated
//! network (delay, drop, duplicate, reorder, one-way and two-way
//! partitions, leader isolation) and simulated disks that lose every unsynced write on a crash,
//! with a client workload of appends. The invariants in [`invariants`] are checked after every
//! event; once the faults stop, the cluster must elect a leader and bring every replica up to
//! date within a fixed budget. One seed replays one history bit for bit (see docs/simulator.md).

mod cluster;
pub mod host_cluster;
pub mod invariants;
pub mod network;
pub mod store;

use std::collections::BTreeMap;

pub use cluster::run_seed;
pub use host_cluster::{HostSimOptions, SteadyCluster, run_host_seed};

use crate::mutation::Mutation;
use crate::types::PartitionId;

/// Deliberate breakers of the simulated host's KIP-630 rules, so the mutation check can show
/// that the snapshot invariants catch them (`SimOptions::snapshot_mutation`; the simulator
/// exists only with the `sim` feature, so no production build can switch one on). The core's
/// own rules are broken with [`Mutation`] instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SnapshotMutation {
    /// A leader loads (installs) its own latest snapshot as if it had fetched it.
    LeaderLoadsSnapshot,
    /// A snapshot is written without one of the state machine's records.
    SnapshotOneRecordOff,
    /// The leader sends every partition of a FetchSnapshot response all it asks for,
    /// ignoring `replica.fetch.snapshot.response.max.bytes` and the fair share.
    IgnoreFairShare,
    /// The leader fills a FetchSnapshot response first come, first served: within the cap, but
    /// the first partition may take it all and leave the others less than the average share.
    UnfairShare,
}

impl SnapshotMutation {
    pub const ALL: [SnapshotMutation; 4] = [
        SnapshotMutation::LeaderLoadsSnapshot,
        SnapshotMutation::SnapshotOneRecordOff,
        SnapshotMutation::IgnoreFairShare,
        SnapshotMutation::UnfairShare,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SnapshotMutation::LeaderLoadsSnapshot => "leader-loads-snapshot",
            SnapshotMutation::SnapshotOneRecordOff => "snapshot-one-record-off",
            SnapshotMutation::IgnoreFairShare => "ignore-fair-share",
            SnapshotMutation::UnfairShare => "unfair-share",
        }
    }

    pub fn from_name(name: &str) -> Option<SnapshotMutation> {
        SnapshotMutation::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The cluster shapes the simulator draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Three voters, no observers.
    Three,
    /// 1–5 voters and 0–2 observers, drawn from the seed.
    Mixed,
    /// One voter and 1–2 observers (Kafka's standalone controller with read replicas): the
    /// lone voter is its own majority, so every durability rule rests on its own disk.
    Single,
    /// Three bootstrap voters and two spare nodes; leaders add, remove and replace voters
    /// (KIP-595 reassignment) under every other fault class.
    Reconfig,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Three => "three",
            Profile::Mixed => "mixed",
            Profile::Single => "single",
            Profile::Reconfig => "reconfig",
        }
    }

    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "three" => Some(Profile::Three),
            "mixed" => Some(Profile::Mixed),
            "single" => Some(Profile::Single),
            "reconfig" => Some(Profile::Reconfig),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub profile: Profile,
    pub mutation: Option<Mutation>,
    /// A broken host rule (KIP-630), for the mutation check.
    pub snapshot_mutation: Option<SnapshotMutation>,
    /// Partitions (Raft groups) per cluster; `None`: 1–4, drawn from the seed.
    pub partitions: Option<PartitionId>,
    /// Simulated time during which faults are injected and clients append.
    pub fault_phase_ms: u64,
    /// After the faults stop: the time the cluster has to elect a leader and catch everyone up.
    pub liveness_budget_ms: u64,
}

impl SimOptions {
    pub fn new(seed: u64, profile: Profile) -> Self {
        Self {
            seed,
            profile,
            mutation: None,
            snapshot_mutation: None,
            partitions: None,
            fault_phase_ms: 6_000,
            liveness_budget_ms: 20_000,
        }
    }

    /// The one-line command that replays this run.
    pub fn replay_command(&self) -> String {
        let mut command = format!(
            "cargo run -p ringlog-replication --features sim --bin sim -- --profile {} --seed {}",
            self.profile.name(),
            self.seed
        );
        if let Some(m) = self.mutation {
            command.push_str(&format!(" --mutation {}", m.name()));
        }
        if let Some(m) = self.snapshot_mutation {
            command.push_str(&format!(" --mutation {}", m.name()));
        }
        if let Some(p) = self.partitions {
            command.push_str(&format!(" --partitions {p}"));
        }
        command
    }
}

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct SimReport {
    pub seed: u64,
    pub voters: usize,
    pub observers: usize,
    pub partitions: usize,
    /// FNV-1a hash of every event in order: equal for two runs of the same seed.
    pub trace_hash: u64,
    pub events: u64,
    /// How often each fault class fired.
    pub faults: BTreeMap<&'static str, u64>,
    pub committed_batches: usize,
    pub client_batches_committed: usize,
    /// Distinct epochs that had a leader.
    pub elections: usize,
    pub sim_time_ms: u64,
    pub violation: Option<String>,
}
