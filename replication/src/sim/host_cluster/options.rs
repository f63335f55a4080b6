//! What one host-driven run looks like, and the runner's names for its mutations.

use crate::host::HostMutation;
use crate::mutation::Mutation;
use crate::types::PartitionId;

/// What one host-driven run looks like.
#[derive(Clone, Debug)]
pub struct HostSimOptions {
    pub seed: u64,
    /// Voters (1–5); `None`: 3 or 5, drawn from the seed (3 with
    /// `reconfig`, and 2 spares). One voter gets 1–2 observers and a slower disk.
    pub voters: Option<usize>,
    /// Observers (nodes outside the voter set that replicate every partition); `None`: 0-2,
    /// drawn from the seed. Only observers are ever wiped (their disk replaced by an empty
    /// one): a voter may not forget what it acknowledged.
    pub observers: Option<usize>,
    /// Partitions (Raft groups) per node (1–4); `None`: 1–3, drawn from the seed.
    pub partitions: Option<PartitionId>,
    /// A host rule broken on purpose, for the mutation check.
    pub mutation: Option<HostMutation>,
    /// A core rule broken on purpose on every node (`QuorumConfig::mutation`).
    pub core_mutation: Option<Mutation>,
    /// KIP-853 voter changes: 3 bootstrap voters and 2 spare nodes (observers until added);
    /// every 150–600 ms of the fault phase a random partition's leader adds a caught-up
    /// non-voter, removes a voter (itself included) or replaces one ([`super::reconfig`]).
    pub reconfig: bool,
    /// Print every delivered message, crash, restart and role change to stderr (the runner's
    /// `--trace`, for reading one seed's history).
    pub trace: bool,
    /// Simulated time during which faults are injected and clients append.
    pub fault_phase_ms: u64,
    /// After the faults stop: the time the cluster has to elect a leader and catch everyone up.
    pub liveness_budget_ms: u64,
    /// `QuorumConfig::fetch_wait_grain_ms` of every node (0: each long poll ends on its own;
    /// the node runs with 100 against a 500 ms wait, the simulator's wait is 100 ms). Not drawn
    /// from the seed, so runs without it keep their histories.
    pub long_poll_grain_ms: u64,
}

impl HostSimOptions {
    pub fn new(seed: u64) -> HostSimOptions {
        HostSimOptions {
            seed,
            voters: None,
            observers: None,
            partitions: None,
            mutation: None,
            core_mutation: None,
            reconfig: false,
            trace: false,
            fault_phase_ms: 3_000,
            liveness_budget_ms: 20_000,
            long_poll_grain_ms: 0,
        }
    }

    /// The one-line command that replays this run.
    pub fn replay_command(&self) -> String {
        let mut command = format!(
            "cargo run -p ringlog-replication --features sim --bin sim -- --seed {}",
            self.seed
        );
        if self.reconfig {
            command.push_str(" --reconfig");
        }
        if let Some(voters) = self.voters {
            command.push_str(&format!(" --voters {voters}"));
        }
        if let Some(observers) = self.observers {
            command.push_str(&format!(" --observers {observers}"));
        }
        if let Some(partitions) = self.partitions {
            command.push_str(&format!(" --partitions {partitions}"));
        }
        if let Some(mutation) = self.mutation {
            command.push_str(&format!(" --mutation {}", host_mutation_name(mutation)));
        }
        if let Some(mutation) = self.core_mutation {
            command.push_str(&format!(" --mutation {}", mutation.name()));
        }
        if self.fault_phase_ms != HostSimOptions::new(self.seed).fault_phase_ms {
            command.push_str(&format!(" --fault-phase-ms {}", self.fault_phase_ms));
        }
        if self.long_poll_grain_ms != 0 {
            command.push_str(&format!(" --grain-ms {}", self.long_poll_grain_ms));
        }
        command
    }
}

/// The runner's name for a host mutation.
pub fn host_mutation_name(mutation: HostMutation) -> &'static str {
    match mutation {
        HostMutation::AcknowledgeBeforeFlush => "acknowledge-before-flush",
        HostMutation::SendBeforeQuorumState => "send-before-quorum-state",
        HostMutation::SnapshotOneRecordOff => "snapshot-one-record-off",
    }
}

/// The host mutation a runner name stands for.
pub fn host_mutation_from_name(name: &str) -> Option<HostMutation> {
    [
        HostMutation::AcknowledgeBeforeFlush,
        HostMutation::SendBeforeQuorumState,
        HostMutation::SnapshotOneRecordOff,
    ]
    .into_iter()
    .find(|m| host_mutation_name(*m) == name)
}
