//! The quorum's messages, named after KIP-595 (and KIP-320's DivergingEpoch). The net layer
//! maps Kafka's wire messages (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, DescribeQuorum)
//! and KIP-630's FetchSnapshot
//! to and from these structs; the core never sees bytes on the wire except record batches.

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::types::{Epoch, NodeId, OffsetAndEpoch};

/// KIP-595 `CurrentLeader`/`LeaderIdAndEpoch`: who the responder believes leads, in which epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaderIdAndEpoch {
    pub leader_id: Option<NodeId>,
    pub leader_epoch: Epoch,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VoteRequest {
    pub candidate_epoch: Epoch,
    pub candidate_id: NodeId,
    /// Epoch of the candidate's last record.
    pub last_offset_epoch: Epoch,
    /// The candidate's log end offset.
    pub last_offset: u64,
    /// KIP-996: a Prospective voter asking whether we would vote for it, in its current epoch
    /// (`candidate_epoch` is not raised); granting binds nothing and is not persisted.
    pub pre_vote: bool,
    /// KIP-853 `ReplicaDirectoryId` (Vote v1+): the candidate's own directory id (zero: none).
    pub candidate_directory_id: [u8; 16],
    /// KIP-853 `VoterDirectoryId` (Vote v1+): the directory id the candidate's voter set
    /// records for the receiver (zero: none). A receiver with another directory id answers
    /// INVALID_VOTER_KEY and grants nothing: its disk is not the one that voter had.
    pub voter_directory_id: [u8; 16],
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VoteResponse {
    pub error_code: ErrorCode,
    pub current_leader: LeaderIdAndEpoch,
    pub vote_granted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BeginQuorumEpochRequest {
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    /// KIP-853 `VoterDirectoryId` (BeginQuorumEpoch v1+): the receiver's directory id in the
    /// leader's voter set (zero: none); another disk answers INVALID_VOTER_KEY.
    pub voter_directory_id: [u8; 16],
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BeginQuorumEpochResponse {
    pub error_code: ErrorCode,
    pub current_leader: LeaderIdAndEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EndQuorumEpochRequest {
    /// The resigning leader (or candidate).
    pub leader_id: NodeId,
    pub leader_epoch: Epoch,
    /// Voters in the order the resigning node prefers them as successor: most caught up first.
    pub preferred_successors: Vec<NodeId>,
    /// KIP-853 `CandidateDirectoryId` (EndQuorumEpoch v1+) of each preferred successor, in the
    /// same order; empty from a sender that names none (v0). A replica named with another
    /// directory id than its own is not the successor named.
    pub preferred_successor_directory_ids: Vec<[u8; 16]>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EndQuorumEpochResponse {
    pub error_code: ErrorCode,
    pub current_leader: LeaderIdAndEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FetchRequest {
    /// Matches the response to this request (the net layer maps it to the request header's
    /// CorrelationId). A follower ignores responses to fetches it no longer waits for, so a
    /// duplicated or late response can never make it truncate twice. Ids restart with the
    /// process, so a host must never hand a restarted replica a response to a request of its
    /// previous life (a restart means new connections).
    pub correlation_id: u64,
    pub replica_id: NodeId,
    pub current_leader_epoch: Epoch,
    pub fetch_offset: u64,
    pub last_fetched_epoch: Epoch,
    pub max_bytes: u32,
    pub max_wait_ms: u64,
    /// KIP-853 `ReplicaDirectoryId` (Fetch v17+): the fetching replica's directory id (zero:
    /// none). A fetch whose directory id differs from the one the voter set in force records
    /// for `replica_id` is an observer's: it counts neither toward the high-watermark nor as
    /// that voter's liveness.
    pub replica_directory_id: [u8; 16],
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FetchResponse {
    pub correlation_id: u64,
    pub error_code: ErrorCode,
    pub current_leader: LeaderIdAndEpoch,
    pub high_watermark: u64,
    pub log_start_offset: u64,
    /// KIP-320/595 DivergingEpoch: truncate to at most this end offset of this epoch.
    pub diverging_epoch: Option<OffsetAndEpoch>,
    /// KIP-630 SnapshotId: the fetch offset is below the log start; load this snapshot.
    pub snapshot_id: Option<OffsetAndEpoch>,
    /// Whole RecordBatch v2 batches starting at the fetch offset.
    pub records: Bytes,
}

impl FetchResponse {
    /// The answer a host gives its core for a fetch it could not deliver: the connection to the
    /// peer was refused, reset or timed out (BROKER_NOT_AVAILABLE, no leader named).
    pub fn unreachable(correlation_id: u64) -> FetchResponse {
        FetchResponse {
            correlation_id,
            error_code: ErrorCode::BrokerNotAvailable,
            current_leader: LeaderIdAndEpoch {
                leader_id: None,
                leader_epoch: 0,
            },
            high_watermark: 0,
            log_start_offset: 0,
            diverging_epoch: None,
            snapshot_id: None,
            records: Bytes::new(),
        }
    }
}

/// KIP-630 FetchSnapshot: a follower or observer asks the leader for `snapshot_id`'s bytes from
/// `position`. The wire message can carry several partitions; the core speaks per partition and
/// the host bundles them (and shares the response's bytes with `fair_share`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FetchSnapshotRequest {
    /// As in [`FetchRequest`]: matches the response to the request.
    pub correlation_id: u64,
    pub replica_id: NodeId,
    pub current_leader_epoch: Epoch,
    pub snapshot_id: OffsetAndEpoch,
    pub position: u64,
    pub max_bytes: u32,
    /// KIP-853 `ReplicaDirectoryId` (FetchSnapshot v1+): the downloading replica's directory
    /// id (zero: none), checked like a Fetch's: a download from a voter's id on another disk is
    /// an observer's.
    pub replica_directory_id: [u8; 16],
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FetchSnapshotResponse {
    pub correlation_id: u64,
    /// SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
    /// UNKNOWN_LEADER_EPOCH, or NONE.
    pub error_code: ErrorCode,
    pub current_leader: LeaderIdAndEpoch,
    pub snapshot_id: OffsetAndEpoch,
    /// The snapshot file's total size in bytes.
    pub size: u64,
    /// Where `unaligned_records` starts in the file.
    pub position: u64,
    /// The file's bytes `[position, position + len)`: not aligned to batches.
    pub unaligned_records: Bytes,
}

/// One message between two replicas of the same partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    VoteRequest(VoteRequest),
    VoteResponse(VoteResponse),
    BeginQuorumEpochRequest(BeginQuorumEpochRequest),
    BeginQuorumEpochResponse(BeginQuorumEpochResponse),
    EndQuorumEpochRequest(EndQuorumEpochRequest),
    EndQuorumEpochResponse(EndQuorumEpochResponse),
    FetchRequest(FetchRequest),
    FetchResponse(FetchResponse),
    FetchSnapshotRequest(FetchSnapshotRequest),
    FetchSnapshotResponse(FetchSnapshotResponse),
}

impl Message {
    pub fn kind(&self) -> &'static str {
        match self {
            Message::VoteRequest(_) => "VoteRequest",
            Message::VoteResponse(_) => "VoteResponse",
            Message::BeginQuorumEpochRequest(_) => "BeginQuorumEpochRequest",
            Message::BeginQuorumEpochResponse(_) => "BeginQuorumEpochResponse",
            Message::EndQuorumEpochRequest(_) => "EndQuorumEpochRequest",
            Message::EndQuorumEpochResponse(_) => "EndQuorumEpochResponse",
            Message::FetchRequest(_) => "FetchRequest",
            Message::FetchResponse(_) => "FetchResponse",
            Message::FetchSnapshotRequest(_) => "FetchSnapshotRequest",
            Message::FetchSnapshotResponse(_) => "FetchSnapshotResponse",
        }
    }
}

/// DescribeQuorum's per-replica state (KIP-595 `ReplicaState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    pub replica_id: NodeId,
    /// KIP-853 `ReplicaDirectoryId`: a voter's from the voter set in force, an observer's from
    /// its last fetch (zero: none).
    pub replica_directory_id: [u8; 16],
    /// The last fetch offset the leader accepted from this replica (for the leader itself: its
    /// log end offset).
    pub log_end_offset: Option<u64>,
    pub last_fetch_timestamp_ms: Option<u64>,
    pub last_caught_up_timestamp_ms: Option<u64>,
}

/// DescribeQuorum's partition data, answered by the leader only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeQuorumPartition {
    pub error_code: ErrorCode,
    pub leader_id: Option<NodeId>,
    pub leader_epoch: Epoch,
    pub high_watermark: u64,
    pub current_voters: Vec<ReplicaState>,
    pub observers: Vec<ReplicaState>,
}
