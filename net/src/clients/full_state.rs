//! Reading the full state of a `cleanup.policy=snapshot` partition (issue #6): the leader's
//! latest KIP-630 snapshot through FetchSnapshot, then the log after it, applied to a key-value
//! map with Kafka's compacted-topic semantics (a key's latest value; a null value deletes).
//!
//! ```text
//!  Fetch(offset 0) ──ok──────────────────────────────▶ empty map, log from offset 0
//!       └─OFFSET_OUT_OF_RANGE + SnapshotId (E, e) ──▶ FetchSnapshot(E, e) from position 0,
//!            chunk by chunk until Size bytes ──▶ validate (every batch's CRC, offsets, epoch,
//!            header first, footer last) ──▶ load into the map ──▶ log from E (LastFetchedEpoch e)
//!  log: Fetch until the position reaches the high-watermark of the latest answer
//! ```
//!
//! Beyond Kafka (docs/snapshots.md, docs/clients.md): our leader accepts FetchSnapshot from
//! ReplicaId -1 (a consumer) and, when a consumer fetches below the log start of a snapshotted
//! partition, fills the Fetch answer's SnapshotId (KIP-630's field for replicas). Kafka's own
//! consumers ignore both.
//!
//! Anything that invalidates the read on the way (the leader changed, its snapshot was deleted
//! for a newer one, the log start passed the snapshot's end before the log part was read)
//! starts it over from the Fetch at offset 0, until the caller's timeout.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ringlog_engine::snapshot::{SnapshotId, validate_snapshot_bytes};
use ringlog_replication::state_machine::{KeyValueStateMachine, StateMachine};

use super::TopicPartition;
use super::consumer::{Consumer, ConsumerError, FetchPosition, OffsetReset, Validation};
use super::transport::{FETCH_VERSION, LeaderAndEpoch, Target, Transport};
use crate::client::ClientError;
use crate::protocol::wire::Records;
use crate::protocol::{
    ErrorCode, Request, Response, fetch_snapshot_request as snap_req,
    fetch_snapshot_response as snap_resp,
};

/// The FetchSnapshot version the consumer sends (the node serves v0 and v1).
pub const FETCH_SNAPSHOT_VERSION: i16 = 0;

/// A partition's state as of `position`: what a replica's key-value state machine holds after
/// applying every committed record below `position.offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullState {
    pub partition: TopicPartition,
    /// Key → latest value (keys whose latest record is a tombstone are absent).
    pub entries: BTreeMap<Bytes, Bytes>,
    /// The snapshot the read started from; `None` when it read the log from offset 0.
    pub snapshot_id: Option<SnapshotId>,
    /// Where consuming goes on (the consumer is left there): the high-watermark the read
    /// reached, with the epoch of the record before it.
    pub position: FetchPosition,
}

/// Why one attempt of the read must start over (after a backoff), or failed for good.
enum Attempt {
    Retry(String),
    Fatal(ConsumerError),
}

impl From<ConsumerError> for Attempt {
    fn from(error: ConsumerError) -> Attempt {
        match error {
            // The log start passed our position (a newer snapshot, the log behind it trimmed):
            // start over from the newer snapshot.
            ConsumerError::OffsetOutOfRange { offset, .. } => {
                Attempt::Retry(format!("offset {offset} left the log"))
            }
            other => Attempt::Fatal(other),
        }
    }
}

impl<T: Transport> Consumer<T> {
    /// Reads the full state of `partition` (a `cleanup.policy=snapshot` topic's, or the
    /// metadata partition's): the leader's latest snapshot, then the log after it up to the
    /// high-watermark. Replaces the assignment with `partition` alone and leaves the consumer
    /// positioned right after the state, so `poll` goes on with the records that follow.
    ///
    /// Transient trouble (no leader, a leader change, a snapshot replaced meanwhile) starts the
    /// read over until `timeout`; a snapshot that does not validate, a log that starts above 0
    /// without a snapshot, or undecodable records fail it.
    pub fn read_full_state(
        &mut self,
        partition: &TopicPartition,
        timeout: Duration,
    ) -> Result<FullState, ConsumerError> {
        let deadline = Instant::now() + timeout;
        self.assign([partition.clone()]);
        // Fetch without parking (the read stops at the high-watermark it sees) and report an
        // out-of-range position instead of resetting it.
        let saved = self.config.clone();
        self.config.fetch_max_wait_ms = 0;
        self.config.auto_offset_reset = OffsetReset::None;
        let result = loop {
            match self.read_full_state_once(partition, deadline) {
                Ok(state) => break Ok(state),
                Err(Attempt::Fatal(error)) => break Err(error),
                Err(Attempt::Retry(why)) => {
                    if Instant::now() >= deadline {
                        break Err(ConsumerError::Timeout(format!(
                            "reading the full state of {partition}: {why}"
                        )));
                    }
                    tracing::debug!(%partition, %why, "full-state read starts over");
                    self.metadata_stale = true;
                    self.backoff(deadline);
                }
            }
        };
        self.config = saved;
        result
    }

    fn read_full_state_once(
        &mut self,
        tp: &TopicPartition,
        deadline: Instant,
    ) -> Result<FullState, Attempt> {
        // A position to hold while Metadata is asked (the probe below decides the real one).
        {
            let state = self.state_mut(tp)?;
            state.position = Some(FetchPosition {
                offset: 0,
                offset_epoch: None,
            });
            state.validation = Validation::Done;
        }
        if let Some(error) = self.prepare()? {
            return Err(Attempt::Retry(error.to_string()));
        }
        let Some(leader) = self.leader_of(tp) else {
            return Err(Attempt::Retry("no leader".into()));
        };
        let leader_id = leader.leader_id.expect("leader_of filters");
        // Where does the log start, and which snapshot covers what lies below it?
        let probe = self.fetch_request(
            &[(
                tp.clone(),
                FetchPosition {
                    offset: 0,
                    offset_epoch: None,
                },
                leader.leader_epoch,
            )],
            0,
        );
        let data = match self
            .transport
            .request(Target::Node(leader_id), &probe, FETCH_VERSION)
        {
            Ok(Response::Fetch(response)) => response
                .responses
                .into_iter()
                .filter(|t| t.topic == tp.topic)
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == tp.partition)
                .ok_or_else(|| Attempt::Retry(format!("Fetch answer without {tp}")))?,
            Ok(_) => {
                return Err(Attempt::Fatal(
                    ClientError::Protocol("not a Fetch answer".into()).into(),
                ));
            }
            Err(error) => return Err(Attempt::Retry(error.to_string())),
        };
        let error = ErrorCode::from_code(data.error_code).unwrap_or(ErrorCode::UnknownServerError);
        let (state_machine, snapshot_id) = match error {
            ErrorCode::None => (KeyValueStateMachine::new(), None),
            ErrorCode::OffsetOutOfRange if data.snapshot_id.end_offset > 0 => {
                let id = SnapshotId {
                    end_offset: data.snapshot_id.end_offset,
                    epoch: data.snapshot_id.epoch,
                };
                if !id.is_valid() {
                    return Err(Attempt::Fatal(
                        ClientError::Protocol(format!("{tp}: snapshot id {id:?}")).into(),
                    ));
                }
                let bytes = self.fetch_snapshot(tp, leader, id, deadline)?;
                let contents = validate_snapshot_bytes(
                    Path::new(&format!("FetchSnapshot {tp} from node {leader_id}")),
                    id,
                    bytes,
                )
                .map_err(|source| {
                    Attempt::Fatal(ConsumerError::Snapshot {
                        partition: tp.clone(),
                        source,
                    })
                })?;
                let mut state_machine = KeyValueStateMachine::new();
                state_machine.load_snapshot(&contents).map_err(|source| {
                    Attempt::Fatal(ConsumerError::StateMachine {
                        partition: tp.clone(),
                        source,
                    })
                })?;
                (state_machine, Some(id))
            }
            ErrorCode::OffsetOutOfRange if data.log_start_offset > 0 => {
                return Err(Attempt::Fatal(ConsumerError::NoSnapshot {
                    partition: tp.clone(),
                    log_start_offset: data.log_start_offset,
                }));
            }
            other => return Err(Attempt::Retry(format!("Fetch at offset 0: {other:?}"))),
        };
        // The log after the snapshot: KIP-630, fetch from its end offset with LastFetchedEpoch
        // = its epoch, so the leader checks our position like a follower's.
        let start = FetchPosition {
            offset: snapshot_id.map_or(0, |id| id.end_offset),
            offset_epoch: snapshot_id.map(|id| id.epoch),
        };
        {
            let state = self.state_mut(tp)?;
            state.position = Some(start);
            state.validation = Validation::Done;
            state.high_watermark = None;
        }
        // The map's keys and values are refcounted slices of the snapshot's bytes.
        let mut entries = state_machine.entries().clone();
        drop(state_machine);
        loop {
            let state = self.state_mut(tp)?;
            let position = state
                .position
                .ok_or_else(|| Attempt::Retry("the position was reset".into()))?;
            // Set by every Fetch answer since the start: stop at the latest one's.
            if let Some(high_watermark) = state.high_watermark
                && position.offset >= high_watermark
            {
                return Ok(FullState {
                    partition: tp.clone(),
                    entries,
                    snapshot_id,
                    position,
                });
            }
            if Instant::now() >= deadline {
                return Err(Attempt::Retry(format!(
                    "the log after {} not read by the deadline (at {})",
                    start.offset, position.offset
                )));
            }
            if let Some(error) = self.prepare()? {
                return Err(Attempt::Retry(error.to_string()));
            }
            let (records, trouble) = self.fetch_once(deadline)?;
            for record in records {
                // Records without a key change nothing, as in the replicas' state machine.
                let Some(key) = record.key else { continue };
                match record.value {
                    Some(value) => entries.insert(key, value),
                    None => entries.remove(&key),
                };
            }
            if trouble {
                return Err(Attempt::Retry("fetching the log after the snapshot".into()));
            }
        }
    }

    /// The snapshot's bytes, FetchSnapshot chunk by chunk from position 0 until Size bytes.
    fn fetch_snapshot(
        &mut self,
        tp: &TopicPartition,
        leader: LeaderAndEpoch,
        snapshot_id: SnapshotId,
        deadline: Instant,
    ) -> Result<Bytes, Attempt> {
        let leader_id = leader.leader_id.expect("leader_of filters");
        let mut bytes = BytesMut::new();
        let mut size: Option<i64> = None;
        loop {
            if Instant::now() >= deadline {
                return Err(Attempt::Retry(format!(
                    "snapshot {snapshot_id:?} not fetched by the deadline"
                )));
            }
            let position = bytes.len() as i64;
            let request = Request::FetchSnapshot(snap_req::FetchSnapshotRequest {
                cluster_id: None,
                // A consumer, not a replica: the leader serves it without counting it.
                replica_id: -1,
                max_bytes: self.config.fetch_max_bytes,
                topics: vec![snap_req::TopicSnapshot {
                    name: tp.topic.clone(),
                    partitions: vec![snap_req::PartitionSnapshot {
                        partition: tp.partition,
                        current_leader_epoch: leader.leader_epoch,
                        snapshot_id: snap_req::SnapshotId {
                            end_offset: snapshot_id.end_offset,
                            epoch: snapshot_id.epoch,
                        },
                        position,
                        ..Default::default()
                    }],
                }],
            });
            let response = match self.transport.request(
                Target::Node(leader_id),
                &request,
                FETCH_SNAPSHOT_VERSION,
            ) {
                Ok(Response::FetchSnapshot(response)) => response,
                Ok(_) => {
                    return Err(Attempt::Fatal(
                        ClientError::Protocol("not a FetchSnapshot answer".into()).into(),
                    ));
                }
                Err(error) => return Err(Attempt::Retry(error.to_string())),
            };
            let chunk = chunk_of(&response, tp, snapshot_id, position)?;
            let total = *size.get_or_insert(chunk.size);
            if chunk.size != total {
                return Err(Attempt::Fatal(self.snapshot_error(
                    tp,
                    snapshot_id,
                    format!("size changed from {total} to {} between chunks", chunk.size),
                )));
            }
            if position + chunk.bytes.len() as i64 > total {
                return Err(Attempt::Fatal(self.snapshot_error(
                    tp,
                    snapshot_id,
                    format!(
                        "{} bytes at position {position} pass the size {total}",
                        chunk.bytes.len()
                    ),
                )));
            }
            if chunk.bytes.is_empty() && position < total {
                return Err(Attempt::Retry(format!(
                    "an empty chunk at position {position} of {total}"
                )));
            }
            bytes.extend_from_slice(&chunk.bytes);
            if bytes.len() as i64 == total {
                return Ok(bytes.freeze());
            }
        }
    }

    fn snapshot_error(
        &self,
        tp: &TopicPartition,
        snapshot_id: SnapshotId,
        reason: String,
    ) -> ConsumerError {
        ConsumerError::SnapshotTransfer {
            partition: tp.clone(),
            snapshot_id,
            reason,
        }
    }
}

/// One partition's chunk of a FetchSnapshot answer.
struct Chunk {
    size: i64,
    bytes: Bytes,
}

/// The answer for `tp`: its bytes, or why the read starts over (a leader change, the snapshot
/// gone for a newer one) or fails.
fn chunk_of(
    response: &snap_resp::FetchSnapshotResponse,
    tp: &TopicPartition,
    snapshot_id: SnapshotId,
    position: i64,
) -> Result<Chunk, Attempt> {
    let top = ErrorCode::from_code(response.error_code).unwrap_or(ErrorCode::UnknownServerError);
    if !top.is_none() {
        return Err(Attempt::Retry(format!("FetchSnapshot: {top:?}")));
    }
    let Some(answer) = response
        .topics
        .iter()
        .filter(|t| t.name == tp.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.index == tp.partition)
    else {
        return Err(Attempt::Retry(format!("FetchSnapshot answer without {tp}")));
    };
    let error = ErrorCode::from_code(answer.error_code).unwrap_or(ErrorCode::UnknownServerError);
    match error {
        ErrorCode::None => {}
        // The snapshot was replaced (SNAPSHOT_NOT_FOUND), the leader moved, our epoch is
        // stale: find the latest snapshot on the current leader again.
        other => return Err(Attempt::Retry(format!("FetchSnapshot {tp}: {other:?}"))),
    }
    let fetched = SnapshotId {
        end_offset: answer.snapshot_id.end_offset,
        epoch: answer.snapshot_id.epoch,
    };
    if fetched != snapshot_id || answer.position != position || answer.size <= 0 {
        return Err(Attempt::Retry(format!(
            "FetchSnapshot {tp}: answered {fetched:?} at {} of {} for {snapshot_id:?} at {position}",
            answer.position, answer.size
        )));
    }
    let bytes = match &answer.unaligned_records {
        Records::Bytes(bytes) => bytes.clone(),
        Records::External { .. } => Bytes::new(),
    };
    Ok(Chunk {
        size: answer.size,
        bytes,
    })
}
