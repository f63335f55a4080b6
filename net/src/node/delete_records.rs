//! DeleteRecords (21): moves a partition's log start offset up to an offset a client names,
//! on the partition's leader, with the machinery retention uses (retention.rs): the leader
//! records an **empty KIP-630 snapshot** at the new start and reports it to the core, whose
//! rules move its log start once every live replica fetched past it; each follower learns the
//! leader's log start from its Fetch responses (`leader_log_start_offset`) and records its own
//! empty snapshot there ([`follow_leader_log_starts`], once per retention check), after
//! which its core moves its log start too. The answer (`low_watermark`, the leader's new log
//! start) waits until the leader's log start has moved, as Kafka's waits for its replicas.
//!
//! The log start stays on a batch boundary: a replica appends whole batches, so a log start
//! inside a batch would leave a follower that catches up through FetchSnapshot unable to append
//! the batch the leader sends from there. An offset inside a batch moves the log start to that
//! batch's first offset and records the asked offset as the **client log start**
//! (`PartitionStore::client_log_start_offset`, durable in the partition's
//! `log-start-offset-checkpoint`): Kafka's logStartOffset as clients see it, exactly where
//! Kafka cuts. Fetch answers it as LogStartOffset and refuses offsets below it
//! (OFFSET_OUT_OF_RANGE), ListOffsets answers it as the earliest offset, and a fetch from it
//! returns the whole batch, whose records below it the client skips (as it does for any fetch
//! inside a batch). Followers take it from their leader's Fetch responses' LogStartOffset
//! ([`follow_leader_log_starts`]) and write it down too, and report their own in their
//! Fetch requests' LogStartOffset; the answer waits until every replica that fetched within
//! the fetch timeout has reported it (Kafka's DelayedDeleteRecords waits for its replicas'
//! low watermarks), so a new leader answers the same earliest offset.
//!
//! A `cleanup.policy=snapshot` topic's partition is a key-value state machine, and KIP-630
//! lets its log start only be the end offset of one of its snapshots (the state below the log
//! start must live somewhere). Its state machine stands at the high-watermark (it applies what
//! is committed), and its state at an earlier offset is not at hand (it would take the previous
//! snapshot plus a replay of the log up to there). So a cut there goes where a snapshot is:
//!
//! - asked for the offset the state machine stands at (the high-watermark, offset -1 included,
//!   with nothing committed since it was read): the leader generates a snapshot there now
//!   (`Host::generate_snapshot_at`, written off the loop like the policy's) and its log start
//!   moves to it: every record is deleted, the state is kept in the snapshot;
//! - asked for an earlier offset: the log start moves to the leader's latest snapshot if that
//!   is above the log start (the policy's snapshots, `snapshot.minimum.records`), else it stays;
//!   `low_watermark` says where it starts, as Kafka's answer gives the resulting low watermark.
//!   It may be below the asked offset (nothing at or above it is deleted by this request);
//!   it is above it only where the policy's latest snapshot already was.
//!
//! A follower of a snapshot topic whose leader's log start passed its own generates a snapshot
//! there if its state machine stands exactly there (nothing committed since: the usual case
//! after a cut at the high-watermark), so its log start follows; otherwise its log start
//! follows its own policy's snapshots, and a follower that becomes leader may answer a lower
//! earliest offset than the old leader's `low_watermark` (never a higher one than its own
//! snapshots allow).
//!
//! | partition                                    | answer                                      |
//! | -------------------------------------------- | ------------------------------------------- |
//! | not hosted here                              | UNKNOWN_TOPIC_OR_PARTITION                  |
//! | not led here                                 | NOT_LEADER_OR_FOLLOWER                      |
//! | internal topics (`__consumer_offsets`, …)    | POLICY_VIOLATION (only the node cuts their logs, behind their snapshots) |
//! | offset -1                                    | up to the high-watermark                    |
//! | offset < -1, or above the high-watermark     | OFFSET_OUT_OF_RANGE                         |
//! | at or below the log start                    | the log start, at once                      |
//! | `cleanup.policy=delete`                      | the asked offset, once the leader's log start reached its batch and every live replica reported it |
//! | `cleanup.policy=snapshot`, at the state machine's offset | the new log start (there), once the snapshot is written and the leader's log start moved |
//! | `cleanup.policy=snapshot`, elsewhere         | the leader's latest snapshot once its log start moved there, or the log start at once if no snapshot is above it |
//! | leadership lost while waiting                | NOT_LEADER_OR_FOLLOWER                      |
//! | `timeout_ms` passed                          | REQUEST_TIMED_OUT                           |

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;
use ringlog_replication::{NodeId, OffsetAndEpoch, PartitionId};

use super::NodeError;
use super::context::Cx;
use super::partition_table::PartitionTable;
use super::retention::{EmptySnapshot, SnapshotCause};
use super::topic_record::{CleanupPolicy, is_internal_topic};
use super::topics::Topics;
use super::transport::Responder;
use crate::config::NodeConfig;
use crate::protocol::{
    ErrorCode, RequestHeader, Response, delete_records_request as dr_req,
    delete_records_response as dr_resp, encode_response,
};

/// DeleteRecords answers waiting for their leaders' log starts to move.
#[derive(Default)]
pub(super) struct PendingDeletes {
    waiting: Vec<PendingDelete>,
    /// The client log starts replicas reported in their Fetch requests (LogStartOffset), by
    /// (partition, replica), while some answer waits
    /// ([`PendingDeletes::note_replica_log_starts`]).
    replica_log_starts: std::collections::HashMap<(PartitionId, NodeId), u64>,
    /// A leader's LogStartOffset changed in a Fetch response: follow it in this loop turn
    /// rather than at the next retention check ([`follow_leader_log_starts`]).
    pub(super) follow_due: bool,
}

struct PendingDelete {
    responder: Responder,
    correlation_id: i32,
    version: i16,
    response: dr_resp::DeleteRecordsResponse,
    parts: Vec<WaitingPart>,
    deadline_ms: u64,
}

impl PendingDeletes {
    pub(super) fn next_deadline_ms(&self) -> u64 {
        self.waiting
            .iter()
            .map(|p| p.deadline_ms)
            .min()
            .unwrap_or(u64::MAX)
    }
}

/// One partition of a DeleteRecords whose answer waits.
#[derive(Clone, Copy)]
struct WaitingPart {
    /// Where its answer is in the response: topic index, partition index.
    topic: usize,
    index: usize,
    partition: PartitionId,
    /// The leader's log start must reach this (a batch's first offset, or a snapshot's end).
    log_start: u64,
    /// The client log start the leader and every live replica must stand at (`log_start`,
    /// or the asked offset inside the batch starting there).
    client_log_start: u64,
    /// The leader epoch the cut was made in: leadership lost meanwhile answers
    /// NOT_LEADER_OR_FOLLOWER.
    epoch: u32,
}

/// What one partition of a DeleteRecords does.
enum Outcome {
    /// The log already starts at or above the target: answer this low watermark.
    Done(i64),
    /// Wait for the leader's log start to reach `log_start` and the replicas'
    /// client log starts `client_log_start`.
    Wait {
        partition: PartitionId,
        log_start: u64,
        client_log_start: u64,
        epoch: u32,
    },
}

/// The epoch of a snapshot ending at `offset`: that of the record just below it.
fn epoch_below(epoch_cache: &[OffsetAndEpoch], offset: u64) -> u32 {
    epoch_cache
        .iter()
        .rev()
        .find(|e| e.offset < offset)
        .map_or(0, |e| e.epoch)
}

impl PendingDeletes {
    /// DeleteRecords: validates each partition and makes its cut (module doc), then parks the
    /// answer here. Returns the empty snapshots the leader must record (the node adds their
    /// producer state, mod.rs `Node::handle_delete_records`, and calls [`Self::cut_failed`]
    /// for one it cannot record), after which [`Self::answer_ready`] answers what is done.
    pub(super) fn handle_delete_records(
        &mut self,
        cx: &mut Cx,
        topics: &Topics,
        responder: Responder,
        header: &RequestHeader,
        request: dr_req::DeleteRecordsRequest,
    ) -> Result<Vec<EmptySnapshot>, NodeError> {
        let mut response = dr_resp::DeleteRecordsResponse::default();
        let mut parts = Vec::new();
        let mut cuts = Vec::new();
        let requester = responder.requester();
        for (t, topic) in request.topics.iter().enumerate() {
            let allowed = cx.authorizer().allowed(
                &requester,
                crate::protocol::ApiKey::DeleteRecords,
                &topic.name,
            );
            let mut result = dr_resp::DeleteRecordsTopicResult {
                name: topic.name.clone(),
                partitions: Vec::new(),
            };
            for (p, partition) in topic.partitions.iter().enumerate() {
                let mut answer = dr_resp::DeleteRecordsPartitionResult {
                    partition_index: partition.partition_index,
                    low_watermark: -1,
                    error_code: 0,
                };
                let outcome = if allowed {
                    delete_records_below(
                        cx,
                        topics,
                        &topic.name,
                        partition.partition_index,
                        partition.offset,
                        &mut cuts,
                    )
                } else {
                    Err(ErrorCode::TopicAuthorizationFailed)
                };
                match outcome {
                    Ok(Outcome::Done(low_watermark)) => answer.low_watermark = low_watermark,
                    Ok(Outcome::Wait {
                        partition,
                        log_start,
                        client_log_start,
                        epoch,
                    }) => parts.push(WaitingPart {
                        topic: t,
                        index: p,
                        partition,
                        log_start,
                        client_log_start,
                        epoch,
                    }),
                    Err(code) => answer.error_code = code.code(),
                }
                result.partitions.push(answer);
            }
            response.topics.push(result);
        }
        let timeout_ms = u64::try_from(request.timeout_ms).unwrap_or(0).max(1);
        self.waiting.push(PendingDelete {
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
            response,
            parts,
            deadline_ms: cx.now_ms + timeout_ms,
        });
        Ok(cuts)
    }

    /// The leader could not record the empty snapshot `cut` of the DeleteRecords just parked
    /// ([`Self::handle_delete_records`]): the partitions of the request that wait for it (its
    /// partition, a log start at or above the cut's) are answered KAFKA_STORAGE_ERROR.
    pub(super) fn cut_failed(&mut self, cut: &EmptySnapshot) {
        let Some(pending) = self.waiting.last_mut() else {
            return;
        };
        let response = &mut pending.response;
        pending.parts.retain(|part| {
            let waits_for_it =
                part.partition == cut.partition && part.log_start >= cut.snapshot_id.offset;
            if waits_for_it {
                response.topics[part.topic].partitions[part.index].error_code =
                    ErrorCode::KafkaStorageError.code();
            }
            !waits_for_it
        });
    }

    /// Notes the client log starts a replica's Fetch reports (LogStartOffset, for each
    /// partition it fetches), while some DeleteRecords answer waits for them.
    pub(super) fn note_replica_log_starts(
        &mut self,
        table: &PartitionTable,
        request: &crate::protocol::fetch_request::FetchRequest,
        replica: NodeId,
    ) {
        let deletes = self;
        if deletes.waiting.is_empty() {
            deletes.replica_log_starts.clear();
            return;
        }
        for topic in &request.topics {
            for p in &topic.partitions {
                let found = table.find_named(&topic.topic, topic.topic_id, p.partition);
                if let (Some(id), Ok(offset)) = (found, u64::try_from(p.log_start_offset)) {
                    deletes.replica_log_starts.insert((id, replica), offset);
                }
            }
        }
    }

    /// Whether every replica of `partition` other than this node that fetched within the
    /// fetch timeout reported a client log start of at least `offset`.
    fn live_replicas_reported(
        &self,
        config: &NodeConfig,
        raft: &ringlog_replication::Raft,
        partition: PartitionId,
        offset: u64,
        now_ms: u64,
    ) -> bool {
        let quorum = raft.describe_quorum();
        let live_since = now_ms.saturating_sub(config.fetch_timeout_ms);
        let local = config.node_id;
        quorum
            .current_voters
            .iter()
            .chain(quorum.observers.iter())
            .filter(|r| {
                r.replica_id != local && r.last_fetch_timestamp_ms.is_some_and(|t| t >= live_since)
            })
            .all(|r| {
                self.replica_log_starts
                    .get(&(partition, r.replica_id))
                    .is_some_and(|&reported| reported >= offset)
            })
    }

    /// Answers the DeleteRecords whose leaders' log starts reached their targets (or that lost
    /// leadership, or timed out) at `now` (node clock). Runs with the produce waiters
    /// (handlers.rs).
    pub(super) fn answer_ready(
        &mut self,
        host: &Host<AnyIo>,
        config: &NodeConfig,
        now: u64,
    ) -> Result<(), NodeError> {
        let mut index = 0;
        while index < self.waiting.len() {
            let pending = &mut self.waiting[index];
            let expired = now >= pending.deadline_ms;
            let mut parts = std::mem::take(&mut pending.parts);
            let mut response = std::mem::take(&mut pending.response);
            parts.retain(|part| {
                let answer = &mut response.topics[part.topic].partitions[part.index];
                let (Some(raft), Some(store)) =
                    (host.raft(part.partition), host.store(part.partition))
                else {
                    answer.error_code = ErrorCode::UnknownTopicOrPartition.code();
                    return false;
                };
                if !raft.is_leader() || raft.epoch() != part.epoch {
                    answer.error_code = ErrorCode::NotLeaderOrFollower.code();
                    return false;
                }
                let client_log_start = store.client_log_start_offset();
                if store.log_start_offset() >= part.log_start
                    && client_log_start >= part.client_log_start
                    && self.live_replicas_reported(
                        config,
                        raft,
                        part.partition,
                        part.client_log_start,
                        now,
                    )
                {
                    answer.low_watermark = client_log_start as i64;
                    return false;
                }
                if expired {
                    answer.error_code = ErrorCode::RequestTimedOut.code();
                    return false;
                }
                true
            });
            let pending = &mut self.waiting[index];
            pending.parts = parts;
            pending.response = response;
            if pending.parts.is_empty() {
                let pending = self.waiting.swap_remove(index);
                let frame = encode_response(
                    pending.correlation_id,
                    pending.version,
                    &Response::DeleteRecords(pending.response),
                )?;
                pending.responder.send(Some(frame));
            } else {
                index += 1;
            }
        }
        Ok(())
    }
}

/// Validates one partition's deletion and makes the cut that moves its log start (see the
/// module doc's table): the empty snapshot to record goes into `cuts`.
fn delete_records_below(
    cx: &mut Cx,
    topics: &Topics,
    topic: &str,
    index: i32,
    offset: i64,
    cuts: &mut Vec<EmptySnapshot>,
) -> Result<Outcome, ErrorCode> {
    let (host, table) = (&mut *cx.host, cx.table);
    let partition = table
        .find(topic, index)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    let raft = host
        .raft(partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    if !raft.is_leader() {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let epoch = raft.epoch();
    let epoch_cache = raft.log().epoch_cache().to_vec();
    if is_internal_topic(topic) {
        return Err(ErrorCode::PolicyViolation);
    }
    let policy = topics
        .topic_config(table, partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?
        .cleanup_policy;
    // Kafka refuses DeleteRecords on a topic whose policy does not delete
    // (`cleanup.policy=compact`): its records go only by compaction.
    if policy == CleanupPolicy::Compact {
        return Err(ErrorCode::PolicyViolation);
    }
    let store = host
        .store(partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    let high_watermark = store.high_watermark;
    let asked = match offset {
        -1 => high_watermark,
        o if o < 0 || o as u64 > high_watermark => return Err(ErrorCode::OffsetOutOfRange),
        o => o as u64,
    };
    // The log start on a batch boundary (module doc): the start of the batch holding
    // `asked`.
    let target = store
        .log
        .batch_base_offset(asked as i64)
        .map_or(asked, |base| base.max(0) as u64);
    let log_start = store.log_start_offset();
    let client_log_start = store.client_log_start_offset();
    // A cut this request made already (the partition named twice) counts as recorded.
    let planned = cuts
        .iter()
        .filter(|c| c.partition == partition)
        .map(|c| c.snapshot_id.offset)
        .max()
        .unwrap_or(0);
    let latest = store
        .snapshots
        .latest_snapshot_id
        .map_or(0, |s| s.offset)
        .max(planned);
    if policy == CleanupPolicy::Snapshot {
        if target <= log_start {
            return Ok(Outcome::Done(log_start as i64));
        }
        // KIP-630: only to a snapshot's end offset (module doc).
        let target = if host.generate_snapshot_at(partition, target) {
            tracing::info!(
                partition,
                log_start_offset = target,
                "DeleteRecords: snapshot of the state machine asked for, the log start follows it"
            );
            target
        } else if latest > log_start {
            latest.min(target)
        } else {
            return Ok(Outcome::Done(log_start as i64));
        };
        return Ok(Outcome::Wait {
            partition,
            log_start: target,
            client_log_start: target,
            epoch,
        });
    }
    if asked <= client_log_start {
        return Ok(Outcome::Done(client_log_start as i64));
    }
    let storage_error = |error| {
        tracing::error!(partition, %error, "DeleteRecords: recording the cut");
        ErrorCode::KafkaStorageError
    };
    if asked > target {
        // Inside a batch: durable before the log start moves to the batch's first offset
        // (a restart in between must not show the batch's records below `asked`).
        host.record_delete_records_offset(partition, asked)
            .map_err(storage_error)?;
    }
    if target > latest.max(log_start) {
        // The producers' state outlives their batches: the snapshot carries it (the node
        // adds it when it records the snapshot).
        cuts.push(EmptySnapshot {
            partition,
            snapshot_id: OffsetAndEpoch::new(target, epoch_below(&epoch_cache, target)),
            now_wall_ms: cx.now_wall_ms.max(0) as u64,
            cause: SnapshotCause::DeleteRecords {
                client_log_start_offset: asked,
            },
        });
    }
    Ok(Outcome::Wait {
        partition,
        log_start: target,
        client_log_start: asked,
        epoch,
    })
}

/// A follower of a `cleanup.policy=delete` partition whose leader's log start moved past
/// its own (DeleteRecords, or the leader's retention ahead of this node's) records an empty
/// snapshot there, so its core moves its log start to the leader's (KIP-630: a follower's
/// log start follows the leader's only up to a snapshot of its own).
///
/// A follower of a `cleanup.policy=snapshot` partition generates a snapshot of its state
/// machine there instead, if the machine stands exactly there (module doc).
///
/// Returns the empty snapshots to record (the node adds their producer state, mod.rs
/// `Node::record_empty_snapshots`).
pub(super) fn follow_leader_log_starts(
    host: &mut Host<AnyIo>,
    table: &PartitionTable,
    topics: &Topics,
    now_wall_ms: u64,
) -> Result<Vec<EmptySnapshot>, NodeError> {
    let mut snapshots = Vec::new();
    for id in table.ids() {
        let Some(policy) = topics.topic_config(table, id).map(|c| c.cleanup_policy) else {
            continue;
        };
        if is_internal_topic(&table.get(id).topic) {
            continue;
        }
        let (Some(raft), Some(store)) = (host.raft(id), host.store(id)) else {
            continue;
        };
        if raft.is_leader() || raft.leader_id().is_none() {
            continue;
        }
        let leader_start = raft.leader_log_start_offset();
        if policy == CleanupPolicy::Snapshot {
            let latest = store.snapshots.latest_snapshot_id.map_or(0, |s| s.offset);
            if leader_start > store.log_start_offset()
                && leader_start > latest
                && host.generate_snapshot_at(id, leader_start)
            {
                tracing::info!(
                    partition = id,
                    log_start_offset = leader_start,
                    "the leader's log start moved: snapshot of the state machine there asked for"
                );
            }
            continue;
        }
        // Only where this replica's log holds committed records up to the cut (the
        // leader's log is the same up to its high-watermark, batch for batch).
        if leader_start <= store.client_log_start_offset() || leader_start > store.high_watermark {
            continue;
        }
        // The log start on the batch boundary at or below the leader's client log start,
        // which is recorded as this replica's own when it lies inside that batch.
        let target = store
            .log
            .batch_base_offset(leader_start as i64)
            .map_or(leader_start, |base| base.max(0) as u64);
        let latest = store.snapshots.latest_snapshot_id.map_or(0, |s| s.offset);
        let cut = target > latest.max(store.log_start_offset());
        let snapshot_id =
            OffsetAndEpoch::new(target, epoch_below(raft.log().epoch_cache(), target));
        if leader_start > target {
            host.record_delete_records_offset(id, leader_start)?;
        }
        if !cut {
            continue;
        }
        snapshots.push(EmptySnapshot {
            partition: id,
            snapshot_id,
            now_wall_ms,
            cause: SnapshotCause::FollowLeader {
                client_log_start_offset: leader_start,
            },
        });
    }
    Ok(snapshots)
}
