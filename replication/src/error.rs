//! Kafka's error codes (wire numbers) and the core's own typed errors.

use thiserror::Error;

use crate::types::{Epoch, NodeId};

/// The Kafka error codes the quorum protocol uses, with Kafka's numbers (`Errors.java`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    UnknownServerError = -1,
    None = 0,
    OffsetOutOfRange = 1,
    /// Formerly NOT_LEADER_FOR_PARTITION: the receiver is not the leader (the response names
    /// the leader it knows).
    NotLeaderOrFollower = 6,
    RequestTimedOut = 7,
    BrokerNotAvailable = 8,
    InvalidRequest = 42,
    /// The request's leader epoch is older than the receiver's.
    FencedLeaderEpoch = 74,
    /// The request's leader epoch is newer than the receiver's.
    UnknownLeaderEpoch = 75,
    /// The sender or the receiver of a voter-only request is not a voter.
    InconsistentVoterSet = 94,
    SnapshotNotFound = 98,
    PositionOutOfRange = 99,
    InconsistentClusterId = 104,
    /// KIP-853: the request names this replica with another directory id than its own (its
    /// disk was replaced since the sender's voter set recorded it).
    InvalidVoterKey = 125,
}

impl ErrorCode {
    pub fn code(self) -> i16 {
        self as i16
    }

    /// Maps a wire number back; an unknown number is a typed error, not a panic.
    pub fn from_code(code: i16) -> Result<ErrorCode, RaftError> {
        Ok(match code {
            -1 => ErrorCode::UnknownServerError,
            0 => ErrorCode::None,
            1 => ErrorCode::OffsetOutOfRange,
            6 => ErrorCode::NotLeaderOrFollower,
            7 => ErrorCode::RequestTimedOut,
            8 => ErrorCode::BrokerNotAvailable,
            42 => ErrorCode::InvalidRequest,
            74 => ErrorCode::FencedLeaderEpoch,
            75 => ErrorCode::UnknownLeaderEpoch,
            94 => ErrorCode::InconsistentVoterSet,
            98 => ErrorCode::SnapshotNotFound,
            99 => ErrorCode::PositionOutOfRange,
            104 => ErrorCode::InconsistentClusterId,
            125 => ErrorCode::InvalidVoterKey,
            other => return Err(RaftError::UnknownErrorCode(other)),
        })
    }
}

/// Errors returned by the core's inputs. None of them changes the core's state.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RaftError {
    #[error("invalid voter set {0:?}: must be non-empty without duplicates")]
    InvalidVoterSet(Vec<NodeId>),
    #[error("illegal quorum-state transition from {from} to {to} (epoch {epoch})")]
    IllegalTransition {
        from: &'static str,
        to: &'static str,
        epoch: Epoch,
    },
    #[error("not the leader (leader {leader_id:?}, epoch {epoch})")]
    NotLeader {
        leader_id: Option<NodeId>,
        epoch: Epoch,
    },
    #[error("not a candidate or leader: nothing to resign")]
    NothingToResign,
    #[error("leadership not transferred to {successor}: {reason}")]
    TransferRefused {
        successor: NodeId,
        reason: &'static str,
    },
    #[error("malformed record batch at byte {position}: {reason}")]
    MalformedBatch {
        position: usize,
        reason: &'static str,
    },
    #[error(
        "batches must be appended in offset order: expected base offset {expected}, got {actual}"
    )]
    NonContiguousBatch { expected: u64, actual: u64 },
    #[error("batch epoch {batch_epoch} is outside [{last_epoch}, {leader_epoch}]")]
    InvalidBatchEpoch {
        batch_epoch: Epoch,
        last_epoch: Epoch,
        leader_epoch: Epoch,
    },
    #[error("two leaders claim epoch {epoch}: {local} and {remote}")]
    ConflictingLeader {
        epoch: Epoch,
        local: NodeId,
        remote: NodeId,
    },
    #[error("recovered state is inconsistent: {0}")]
    InvalidRecoveredState(&'static str),
    #[error("unknown Kafka error code {0}")]
    UnknownErrorCode(i16),
    #[error("unknown partition {0}")]
    UnknownPartition(u32),
    #[error("empty append")]
    EmptyAppend,
    #[error(
        "snapshot end offset {snapshot_end_offset} is past the high-watermark {high_watermark}"
    )]
    SnapshotPastHighWatermark {
        snapshot_end_offset: u64,
        high_watermark: u64,
    },
    #[error("malformed VotersRecord: {0}")]
    MalformedVotersRecord(&'static str),
    #[error(
        "a voter change is in flight: the voter set at offset {pending_offset} is not committed (high-watermark {high_watermark})"
    )]
    VoterChangeInFlight {
        pending_offset: u64,
        high_watermark: u64,
    },
    #[error(
        "the leader has not committed a record of its epoch yet (epoch start {epoch_start_offset}, high-watermark {high_watermark})"
    )]
    LeaderEpochNotCommitted {
        epoch_start_offset: u64,
        high_watermark: u64,
    },
    #[error("node {0} is already a voter")]
    AlreadyVoter(NodeId),
    #[error("node {0} is not a voter")]
    UnknownVoter(NodeId),
    #[error(
        "node {voter_id} has not caught up (fetch offset {fetch_offset:?}, leader log end {log_end_offset})"
    )]
    VoterNotCaughtUp {
        voter_id: NodeId,
        fetch_offset: Option<u64>,
        log_end_offset: u64,
    },
    #[error("voter set record at {offset} changes {difference} voters at once")]
    VoterSetChangeTooLarge { offset: u64, difference: usize },
}

impl RaftError {
    /// The Kafka error code an AddRaftVoter / RemoveRaftVoter response carries for this error
    /// (KIP-853): a change that cannot happen yet (one in flight, the leader's epoch not
    /// committed, the new voter not caught up) is REQUEST_TIMED_OUT, so the client retries; a
    /// request that can never succeed is INVALID_REQUEST; anything else the core refuses is
    /// NOT_LEADER_OR_FOLLOWER or UNKNOWN_SERVER_ERROR. (KIP-853's DUPLICATE_VOTER and
    /// VOTER_NOT_FOUND are for the net layer to add with their wire numbers.)
    pub fn voter_change_error_code(&self) -> ErrorCode {
        match self {
            RaftError::NotLeader { .. } => ErrorCode::NotLeaderOrFollower,
            RaftError::VoterChangeInFlight { .. }
            | RaftError::LeaderEpochNotCommitted { .. }
            | RaftError::VoterNotCaughtUp { .. } => ErrorCode::RequestTimedOut,
            RaftError::AlreadyVoter(_)
            | RaftError::UnknownVoter(_)
            | RaftError::InvalidVoterSet(_) => ErrorCode::InvalidRequest,
            _ => ErrorCode::UnknownServerError,
        }
    }
}
