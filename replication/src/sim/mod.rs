//! The deterministic cluster simulator (feature `sim`): every node runs the production host,
//! [`Host<MemoryIo>`](crate::host::Host), over the engine's fault-injecting in-memory disk,
//! with 1–5 voters, 0–2 observers and 1–4 partitions (one Raft group each, on the same nodes),
//! over a simulated network (delay, drop, duplicate, reorder, one-way and two-way partitions,
//! leader isolation), under crashes that tear unsynced writes, majority power losses, pauses,
//! wiped observers and voter changes, with a client workload of appends ([`host_cluster`]).
//! Its checks run after every event; once the faults stop, the cluster must elect a leader and
//! bring every replica up to date within a fixed budget. One seed replays one history bit for
//! bit (docs/simulator.md).

pub mod host_cluster;
pub mod invariants;
pub mod network;

use std::collections::BTreeMap;

pub use host_cluster::{HostSimOptions, SteadyCluster, run_host_seed};

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
