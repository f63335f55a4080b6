//! ringlog-replication: the KIP-595 quorum as a pure state machine, and the host that executes
//! its work against the engine.
//!
//! The core has no sockets, threads, clock, files or global randomness: a host feeds [`Raft`]
//! (one partition) or [`MultiRaft`] (several partitions over one voter set) with messages, time
//! and persistence completions, and executes the [`Work`] it returns. See docs/raft.md.
//! [`host::Host`] is that host: the core plus the partition stores over one `engine::io::Io`,
//! with no sockets, threads or clock either (the runtime in `net` drives it).
//! With the `sim` feature, [`sim`] runs whole clusters of the real core in a deterministic
//! simulator (docs/simulator.md).

pub mod error;
pub mod fair_share;
pub mod host;
pub mod log_state;
pub mod message;
pub mod multi;
pub mod mutation;
pub mod purgatory;
pub mod quorum;
pub mod raft;
pub mod records;
pub mod rng;
pub mod state_machine;
pub mod types;
pub mod voters;
pub mod work;

#[cfg(feature = "sim")]
pub mod sim;

pub use error::{ErrorCode, RaftError};
pub use log_state::{LogState, ValidatedOffset};
pub use message::*;
pub use multi::{MultiRaft, PartitionMessage, PartitionWork};
pub use mutation::Mutation;
pub use quorum::EpochState;
pub use raft::{AppendResult, Raft};
pub use types::{
    ElectionState, Epoch, NodeId, OffsetAndEpoch, PartitionId, QuorumConfig, RecoveredSnapshots,
    RecoveredState,
};
pub use voters::{Endpoint, VoterInfo, VoterSet, VoterSetEntry, VoterSetHistory};
pub use work::{Persisted, Work};
