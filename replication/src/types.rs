//! Identifiers, the persisted quorum-state record and the quorum configuration.

use std::cmp::Ordering;

use crate::error::RaftError;

/// A node id (`node.id`): Kafka's int32 broker/controller id.
pub type NodeId = i32;
/// A leader epoch (KIP-595 `LeaderEpoch`). Epoch 0 means "no election has happened yet".
pub type Epoch = u32;
/// A partition index inside a [`crate::MultiRaft`] node.
pub type PartitionId = u32;

/// An offset paired with the epoch it belongs to. Ordered epoch first, then offset, like
/// Kafka's `OffsetAndEpoch`: a log whose last record has a larger epoch is more up to date
/// whatever its length (KIP-595 vote rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OffsetAndEpoch {
    pub offset: u64,
    pub epoch: Epoch,
}

impl OffsetAndEpoch {
    pub const fn new(offset: u64, epoch: Epoch) -> Self {
        Self { offset, epoch }
    }
}

impl PartialOrd for OffsetAndEpoch {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OffsetAndEpoch {
    fn cmp(&self, other: &Self) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then(self.offset.cmp(&other.offset))
    }
}

/// The content of the `quorum-state` file: what must be durable before a vote (or a
/// candidacy) is announced. KIP-595: "leader, epoch, voted-for".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ElectionState {
    pub epoch: Epoch,
    pub leader_id: Option<NodeId>,
    pub voted_for: Option<NodeId>,
}

/// What the host recovered from disk for one partition: the log's extent and its
/// leader-epoch cache (`leader-epoch-checkpoint`: epoch → start offset), plus the quorum-state
/// file. Everything described here must already be durable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveredState {
    pub election: ElectionState,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    /// Entries `(epoch, start_offset)` sorted by epoch; `OffsetAndEpoch.offset` is the epoch's
    /// first offset.
    pub epoch_cache: Vec<OffsetAndEpoch>,
    /// The log was cut below damaged records at a start and has not caught up with a leader
    /// since (`Raft::repair_pending`).
    pub repair_pending: bool,
}

/// The snapshots the host recovered for one partition (KIP-630), kept apart from
/// [`RecoveredState`] so hosts without snapshots build that as before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveredSnapshots {
    /// The snapshot at the log start offset; required when the log starts above 0.
    pub log_start_snapshot_id: Option<OffsetAndEpoch>,
    /// The newest valid snapshot. Its end offset must not pass the log end: a host whose log
    /// is behind its newest snapshot truncates the log fully to start there first.
    pub latest_snapshot_id: Option<OffsetAndEpoch>,
}

/// The quorum configuration, with Kafka's property names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumConfig {
    /// `node.id`
    pub node_id: NodeId,
    /// `controller.quorum.voters` (ids only; addresses are the net layer's business).
    pub voters: Vec<NodeId>,
    /// `controller.quorum.election.timeout.ms` (default 1000). The actual timeout is drawn
    /// uniformly from `[t, 2t)`.
    pub election_timeout_ms: u64,
    /// `controller.quorum.election.backoff.max.ms` (default 1000): the random pause after a
    /// lost election before the next candidacy.
    pub election_backoff_max_ms: u64,
    /// `controller.quorum.fetch.timeout.ms` (default 2000): a follower that has not heard from
    /// the leader for this long becomes a candidate; a leader not fetched from by a majority
    /// for this long resigns (check quorum).
    pub fetch_timeout_ms: u64,
    /// `replica.fetch.wait.max.ms`-style long-poll (default 500): how long the leader parks an
    /// empty fetch.
    pub fetch_max_wait_ms: u64,
    /// Long polls end on multiples of this many milliseconds of the host's clock (default 0:
    /// each after its own `fetch_max_wait_ms`; the node sets 100): a parked fetch is answered
    /// at the last multiple within its wait. A replica's idle fetches of many partitions,
    /// parked at different moments, then end in the same tick and come back in one wire Fetch
    /// instead of one each (docs/node.md, "A follower's fetch session per leader").
    pub fetch_wait_grain_ms: u64,
    /// `controller.quorum.request.timeout.ms` (default 2000): when an unanswered request is
    /// sent again.
    pub request_timeout_ms: u64,
    /// `controller.quorum.retry.backoff.ms` (default 20, Kafka's): how soon a voter that
    /// answered a Vote (or pre-vote) with an error, such as not hosting the partition yet, is
    /// asked again; without an answer the request waits `request_timeout_ms`.
    pub retry_backoff_ms: u64,
    /// `replica.fetch.max.bytes`-style cap on the records in one fetch response (default 1 MiB).
    pub fetch_max_bytes: u32,
    /// KIP-630 `max.replication.lag.ms` (default 7 days): how long the leader waits for every
    /// live replica to fetch past a snapshot's end offset before it advances its log start
    /// there anyway (a replica left behind then catches up through FetchSnapshot).
    pub max_replication_lag_ms: u64,
    /// KIP-853: this replica's directory id (`directory.id` in meta.properties; zero: none).
    /// With the node id it is the replica's key: a voter set entry naming another directory
    /// id is not this replica, which then acts as an observer.
    pub directory_id: [u8; 16],
    /// Whether a leader whose log is empty (its log end offset is its log start offset) still
    /// appends the LeaderChangeMessage (default true, KRaft's metadata log). A Kafka topic
    /// partition sets it false, so that its first record is at offset 0 as in Kafka: with
    /// nothing in the log there is no earlier epoch's record for the LeaderChangeMessage to
    /// commit, and the epoch's first record commits as any other. A partition whose voter set
    /// can change must keep it: KIP-853 lets a leader change the voter set only once a record
    /// of its epoch is committed.
    pub leader_change_on_empty_log: bool,
    /// Whether the leader answers a replica's fetch as soon as the high-watermark passes
    /// what that replica was last told (default true: the metadata log, whose followers apply
    /// what is committed; Kafka's KIP-1166 effect). A Kafka topic partition sets it false: its
    /// followers learn the high-watermark with the next records or when their long poll ends
    /// (`fetch_max_wait_ms`), as Kafka's replica fetchers of topic partitions do. A news-only
    /// answer sends the replica around a fetch round trip, and a record produced meanwhile
    /// waits for its next fetch: on the commit path that costs more than a follower's stale
    /// high-watermark, which nothing on a topic partition's follower reads promptly.
    pub prompt_high_watermark: bool,
    /// KIP-853 `controller.quorum.bootstrap.servers`, as the ids the host gives them (Kafka's:
    /// -2, -3, …, never a node id). Non-empty only for a replica started without
    /// `controller.quorum.voters` (`voters` is then empty): it learns its voter set from the
    /// log or a snapshot, and while it knows no leader it asks these servers, whose answers
    /// name the leader (`with_bootstrap_servers`).
    pub bootstrap_servers: Vec<NodeId>,
    /// Test-only rule breakers for the simulator's mutation check.
    #[cfg(feature = "sim")]
    pub mutation: Option<crate::mutation::Mutation>,
}

impl QuorumConfig {
    /// A configuration with Kafka's defaults. Rejects an empty or duplicated voter set.
    pub fn new(node_id: NodeId, voters: &[NodeId]) -> Result<Self, RaftError> {
        let mut sorted = voters.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.is_empty() || sorted.len() != voters.len() {
            return Err(RaftError::InvalidVoterSet(voters.to_vec()));
        }
        Ok(Self {
            node_id,
            voters: sorted,
            election_timeout_ms: 1000,
            election_backoff_max_ms: 1000,
            fetch_timeout_ms: 2000,
            fetch_max_wait_ms: 500,
            fetch_wait_grain_ms: 0,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            fetch_max_bytes: 1 << 20,
            max_replication_lag_ms: 7 * 24 * 60 * 60 * 1000,
            directory_id: [0; 16],
            leader_change_on_empty_log: true,
            prompt_high_watermark: true,
            bootstrap_servers: Vec::new(),
            #[cfg(feature = "sim")]
            mutation: None,
        })
    }

    /// KIP-853: a replica that knows no voter yet, only servers to ask who leads (Kafka's
    /// `controller.quorum.bootstrap.servers` without `controller.quorum.voters`). Its voter set
    /// is empty until its log or an installed snapshot holds one, so it starts as an observer
    /// and never stands. `bootstrap_servers` are the ids its host gives those addresses:
    /// negative (Kafka's -2, -3, …), so none is mistaken for a replica.
    pub fn with_bootstrap_servers(
        node_id: NodeId,
        bootstrap_servers: &[NodeId],
    ) -> Result<Self, RaftError> {
        if bootstrap_servers.is_empty() || bootstrap_servers.iter().any(|&id| id >= 0) {
            return Err(RaftError::InvalidVoterSet(bootstrap_servers.to_vec()));
        }
        let mut config = Self::new(node_id, &[node_id])?;
        config.voters = Vec::new();
        config.bootstrap_servers = bootstrap_servers.to_vec();
        Ok(config)
    }

    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.binary_search(&id).is_ok()
    }

    pub fn is_local_voter(&self) -> bool {
        self.is_voter(self.node_id)
    }

    /// Votes (or durable copies) needed for a decision: a strict majority of the voters.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// Whether a test-only mutation is switched on; always false without the `sim` feature.
    #[inline]
    #[allow(unused_variables)]
    pub(crate) fn mutated(&self, which: crate::mutation::Mutation) -> bool {
        #[cfg(feature = "sim")]
        {
            self.mutation == Some(which)
        }
        #[cfg(not(feature = "sim"))]
        {
            false
        }
    }
}
