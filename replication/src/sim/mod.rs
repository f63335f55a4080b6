//! The deterministic cluster simulator (feature `sim`): 1–5 voters and 0–2 observers running
//! the real core over a simulated network (delay, drop, duplicate, reorder, one-way and two-way
//! partitions, leader isolation) and simulated disks that lose every unsynced write on a crash,
//! with a client workload of appends. The invariants in [`invariants`] are checked after every
//! event; once the faults stop, the cluster must elect a leader and bring every replica up to
//! date within a fixed budget. One seed replays one history bit for bit (see docs/simulator.md).

mod cluster;
pub mod invariants;
pub mod network;
pub mod store;

use std::collections::BTreeMap;

pub use cluster::{SteadyCluster, run_seed};

use crate::mutation::Mutation;

/// The cluster shapes the simulator draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Three voters, no observers.
    Three,
    /// 1–5 voters and 0–2 observers, drawn from the seed.
    Mixed,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Three => "three",
            Profile::Mixed => "mixed",
        }
    }

    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "three" => Some(Profile::Three),
            "mixed" => Some(Profile::Mixed),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub profile: Profile,
    pub mutation: Option<Mutation>,
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
        command
    }
}

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct SimReport {
    pub seed: u64,
    pub voters: usize,
    pub observers: usize,
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
