//! The core's output: the work a host must do, in order.

use bytes::Bytes;

use crate::message::{FetchResponse, FetchSnapshotResponse, Message};
use crate::types::{ElectionState, Epoch, NodeId, OffsetAndEpoch};

/// One item of work. A host executes a list front to back with these rules:
/// - `Send` may leave at once.
/// - `SendAfterPersist` may leave only after every persistence item issued so far (in this
///   list and earlier ones: `WriteQuorumState`, `Flush`) has completed, e.g. a vote response
///   after the quorum-state write. Hosts complete persistence in issue order, so holding the
///   message behind the last outstanding operation is enough.
/// - `AppendAsLeader`/`AppendAsFollower`/`Truncate` change the log in memory; records become
///   durable only at a `Flush`, whose completion the host reports with
///   `on_persisted(Persisted::Log { .. })`. `Truncate` itself must be durable when the item
///   completes (truncate + fsync), as Kafka does.
/// - `WriteQuorumState` completes with `on_persisted(Persisted::QuorumState(..))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    Send {
        to: NodeId,
        message: Message,
    },
    SendAfterPersist {
        to: NodeId,
        message: Message,
    },
    /// Answer a fetch: fill `response.records` with whole batches read from the log starting
    /// at `fetch_offset` (at least one batch if any, then up to `max_bytes`), then send it.
    SendFetchResponse {
        to: NodeId,
        response: FetchResponse,
        fetch_offset: u64,
        max_bytes: u32,
    },
    /// KIP-630, leader: answer a FetchSnapshot. The host opens the snapshot `response.snapshot_id`
    /// (none: SNAPSHOT_NOT_FOUND), checks `response.position` against its size (past it:
    /// POSITION_OUT_OF_RANGE), sets `response.size` and fills `unaligned_records` with the file's
    /// bytes from `position`, at most `max_bytes` (and its fair share of the request's
    /// `replica.fetch.snapshot.response.max.bytes` when several partitions ask at once), then
    /// sends it. A file region is what a zero-copy send path wants here.
    SendFetchSnapshotResponse {
        to: NodeId,
        response: FetchSnapshotResponse,
        max_bytes: u32,
    },
    /// KIP-630, follower: write `bytes` at `position` of the snapshot `snapshot_id` being
    /// fetched (`<id>.checkpoint.part`, `size_bytes` in all). Position 0 starts the file afresh
    /// (a leftover `.part` from an earlier attempt is truncated). Need not be durable: the
    /// `.part` is fsynced when installed, and a restart fetches the snapshot again.
    WriteSnapshotChunk {
        snapshot_id: OffsetAndEpoch,
        size_bytes: u64,
        position: u64,
        bytes: Bytes,
    },
    /// KIP-630, follower: every byte of `snapshot_id` arrived. Before anything after this item:
    /// freeze the `.part` (fdatasync, validate, rename, folder fsync), load it into the state
    /// machine, and truncate the log fully so that it starts and ends at `snapshot_id.offset`
    /// (durably, log start offset included). The core already counts the log as reset. A
    /// failure here is a storage failure: the host stops the partition (as for a write EIO).
    InstallSnapshot {
        snapshot_id: OffsetAndEpoch,
    },
    /// Stamp base offsets (consecutive from `base_offset`) and `leader_epoch` into `batches`
    /// and append them.
    AppendAsLeader {
        base_offset: u64,
        leader_epoch: Epoch,
        batches: Vec<Bytes>,
    },
    /// Append batches received from the leader as they are (already stamped).
    AppendAsFollower {
        records: Bytes,
    },
    /// Drop every record at and above `offset` (durably).
    Truncate {
        offset: u64,
    },
    /// fsync the log; report `Persisted::Log { generation, end_offset }` when done.
    Flush {
        generation: u64,
        end_offset: u64,
    },
    /// Write the quorum-state file (tmp + fsync + rename + dir fsync).
    WriteQuorumState(ElectionState),
    /// The high-watermark moved: records below it are committed (feed the state machine).
    HighWatermarkChanged {
        high_watermark: u64,
    },
    /// KIP-630: the log now starts at `offset` (the end offset of a snapshot the host holds):
    /// the host may delete the segments wholly below it. Need not be durable: a restart that
    /// finds older segments still there only starts with a longer log.
    AdvanceLogStartOffset {
        offset: u64,
    },
    /// KIP-630: snapshots older than `snapshot_id` (the one at the new log start) are no longer
    /// needed by anyone; the host may delete them.
    DeleteSnapshotsBefore {
        snapshot_id: OffsetAndEpoch,
    },
}

impl Work {
    /// The variant's name, for diagnostics (the node's stall watch names the slowest item).
    pub fn name(&self) -> &'static str {
        match self {
            Work::Send { .. } => "Send",
            Work::SendAfterPersist { .. } => "SendAfterPersist",
            Work::SendFetchResponse { .. } => "SendFetchResponse",
            Work::SendFetchSnapshotResponse { .. } => "SendFetchSnapshotResponse",
            Work::WriteSnapshotChunk { .. } => "WriteSnapshotChunk",
            Work::InstallSnapshot { .. } => "InstallSnapshot",
            Work::AppendAsLeader { .. } => "AppendAsLeader",
            Work::AppendAsFollower { .. } => "AppendAsFollower",
            Work::Truncate { .. } => "Truncate",
            Work::Flush { .. } => "Flush",
            Work::WriteQuorumState(_) => "WriteQuorumState",
            Work::HighWatermarkChanged { .. } => "HighWatermarkChanged",
            Work::AdvanceLogStartOffset { .. } => "AdvanceLogStartOffset",
            Work::DeleteSnapshotsBefore { .. } => "DeleteSnapshotsBefore",
        }
    }
}

/// A persistence completion reported by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persisted {
    /// The log is durable up to `end_offset` for the log generation the flush was issued in.
    Log {
        generation: u64,
        end_offset: u64,
    },
    QuorumState(ElectionState),
}
