//! What the host hands the runtime to do ([`Host::take_output`](super::Host::take_output)), in
//! the order it produced it.

use std::path::PathBuf;

use bytes::Bytes;

use super::{FileRange, Records, SnapshotJob};
use crate::message::{FetchResponse, FetchSnapshotResponse, Message};
use crate::types::{NodeId, PartitionId};

/// What the runtime must do, in the order the host produced it.
#[derive(Debug)]
pub enum Output {
    /// A core message for `to`: a request to send, or an answer for the request it answers.
    Send {
        partition: PartitionId,
        to: NodeId,
        message: Message,
    },
    /// A replica fetch answered; `records`, when set, holds the answer's bytes (the response's
    /// own `records` are then empty): slices of the in-memory tail or a file range, never
    /// `Records::Memory` (one buffer goes in the response itself).
    FetchResponse {
        partition: PartitionId,
        response: FetchResponse,
        records: Option<Records>,
    },
    /// KIP-630: a FetchSnapshot answered; `region`, when set, holds the answer's bytes.
    FetchSnapshotResponse {
        partition: PartitionId,
        to: NodeId,
        response: FetchSnapshotResponse,
        region: Option<FileRange>,
    },
    /// The leader appended `batches` (stamped from `base_offset`).
    LeaderAppended {
        partition: PartitionId,
        base_offset: u64,
        batches: Vec<Bytes>,
    },
    /// A follower appended the leader's `records` as they are.
    FollowerAppended {
        partition: PartitionId,
        records: Bytes,
    },
    /// The log now ends at `offset` (a diverging tail was cut) or, with `snapshot`, starts and
    /// ends there (a fetched snapshot was installed).
    Truncated {
        partition: PartitionId,
        offset: u64,
        snapshot: bool,
    },
    /// The high-watermark moved; the state machine (if any) applied what it committed.
    HighWatermark {
        partition: PartitionId,
        high_watermark: u64,
    },
    /// A snapshot to write off the loop ([`write_snapshot_job`](super::write_snapshot_job)); report the result with
    /// [`Host::on_snapshot_generated`](super::Host::on_snapshot_generated).
    GenerateSnapshot {
        partition: PartitionId,
        dir: PathBuf,
        job: SnapshotJob,
    },
}
