//! Committed offsets through the replicated log (docs/groups.md): OffsetCommit appends one
//! record per partition to the group's `__consumer_offsets` partition through the node's own
//! leader and answers once the high-watermark passed them (acks=all); OffsetFetch reads the
//! partition's key-value state (committed records only); OffsetDelete and DeleteGroups append
//! tombstones and answer the same way.
//!
//! A write is answered NOT_COORDINATOR as soon as this node is no longer the partition's
//! leader in the epoch it appended in (records of a lost epoch may be replaced, as for a
//! Produce), REQUEST_TIMED_OUT after `offsets.commit.timeout.ms`.

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::AnyIo;
use ringlog_replication::PartitionId;
use ringlog_replication::host::Host;

use super::super::NodeError;
use super::super::context::Cx;
use super::super::topics::Topics;
use super::super::transport::Responder;
use super::{GroupsEnv, GroupsState, offsets_state};
use crate::groups::metadata;
use crate::groups::offsets::{self, CommittedOffset};
use crate::protocol::{
    ErrorCode, RequestHeader, Response, delete_groups_request as del_req,
    delete_groups_response as del_resp, encode_response, offset_commit_request as oc_req,
    offset_commit_response as oc_resp, offset_delete_request as od_req,
    offset_delete_response as od_resp, offset_fetch_request as of_req,
    offset_fetch_response as of_resp,
};

/// The largest batch one write appends; a commit of more partitions is split (each batch
/// must fit `message.max.bytes` and a segment).
const WRITE_BATCH_BYTES_MAX: usize = 512 * 1024;

/// A write waiting for its records to be committed.
pub(super) struct PendingWrite {
    responder: Responder,
    correlation_id: i32,
    version: i16,
    pub(super) deadline_ms: u64,
    response: WriteResponse,
    appends: Vec<Append>,
}

/// Records appended in one partition for some slots of the answer.
pub(super) struct Append {
    partition: PartitionId,
    pub(super) leader_epoch: u32,
    pub(super) last_offset: u64,
    slots: Vec<usize>,
}

impl PendingWrite {
    /// Whether some of this write's records in `partition` are not committed yet.
    pub(super) fn touches(&self, partition: PartitionId) -> bool {
        self.appends.iter().any(|a| a.partition == partition)
    }
}

/// The answer being filled: each slot is one partition's (or group's) error code.
enum WriteResponse {
    Commit(oc_resp::OffsetCommitResponse, Vec<(usize, usize)>),
    Delete(od_resp::OffsetDeleteResponse, Vec<(usize, usize)>),
    DeleteGroups(del_resp::DeleteGroupsResponse),
}

impl WriteResponse {
    fn set(&mut self, slot: usize, code: ErrorCode) {
        match self {
            WriteResponse::Commit(r, slots) => {
                let (t, p) = slots[slot];
                r.topics[t].partitions[p].error_code = code.code();
            }
            WriteResponse::Delete(r, slots) => {
                let (t, p) = slots[slot];
                r.topics[t].partitions[p].error_code = code.code();
            }
            WriteResponse::DeleteGroups(r) => r.results[slot].error_code = code.code(),
        }
    }

    fn into_response(self) -> Response {
        match self {
            WriteResponse::Commit(r, _) => Response::OffsetCommit(r),
            WriteResponse::Delete(r, _) => Response::OffsetDelete(r),
            WriteResponse::DeleteGroups(r) => Response::DeleteGroups(r),
        }
    }
}

impl GroupsState {
    // ---- OffsetCommit ---------------------------------------------------------------------

    pub(super) fn handle_offset_commit(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        responder: Responder,
        header: &RequestHeader,
        request: oc_req::OffsetCommitRequest,
    ) -> Result<(), NodeError> {
        let mut response = oc_resp::OffsetCommitResponse {
            throttle_time_ms: 0,
            topics: request
                .topics
                .iter()
                .map(|t| oc_resp::OffsetCommitResponseTopic {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| oc_resp::OffsetCommitResponsePartition {
                            partition_index: p.partition_index,
                            error_code: 0,
                        })
                        .collect(),
                })
                .collect(),
        };
        let group_check = self
            .group_coordinator(cx, env, &request.group_id)
            .and_then(|found| {
                let now = cx.now_ms;
                self.coordinator
                    .validate_offset_commit(
                        now,
                        &request.group_id,
                        &request.member_id,
                        request.generation_id_or_member_epoch,
                        request.group_instance_id.as_deref(),
                    )
                    .map(|()| found)
            });
        let partition = match group_check {
            Ok((_, partition)) => partition,
            Err(code) => {
                for topic in &mut response.topics {
                    for p in &mut topic.partitions {
                        p.error_code = code.code();
                    }
                }
                return send_write_answer(responder, header, Response::OffsetCommit(response));
            }
        };
        let commit_timestamp_ms = cx.now_wall_ms;
        let mut records = Vec::new();
        let mut slots = Vec::new();
        for (t, topic) in request.topics.iter().enumerate() {
            for (p, part) in topic.partitions.iter().enumerate() {
                let metadata = part.committed_metadata.clone().unwrap_or_default();
                let code = if metadata.len() > cx.config.groups.offset_metadata_max_bytes {
                    ErrorCode::OffsetMetadataTooLarge
                } else if !topic_partition_exists(env.topics, &topic.name, part.partition_index) {
                    ErrorCode::UnknownTopicOrPartition
                } else {
                    let key =
                        offsets::offset_key(&request.group_id, &topic.name, part.partition_index);
                    let value = offsets::offset_value(&CommittedOffset {
                        offset: part.committed_offset,
                        leader_epoch: part.committed_leader_epoch,
                        metadata,
                        commit_timestamp_ms,
                    });
                    // Both fit: the topic exists (short name), the group id and the metadata
                    // were bounded before.
                    if let (Some(key), Some(value)) = (key, value) {
                        records.push((key, Some(value)));
                        slots.push((t, p));
                        continue;
                    }
                    ErrorCode::InvalidRequest
                };
                response.topics[t].partitions[p].error_code = code.code();
            }
        }
        let mut write = WriteResponse::Commit(response, slots);
        let appends = match append_offset_records(cx, env, partition, records) {
            Ok(Some(append)) => vec![append],
            Ok(None) => Vec::new(),
            Err(code) => {
                for slot in 0..slot_count(&write) {
                    write.set(slot, code);
                }
                Vec::new()
            }
        };
        self.park_write(cx, responder, header, write, appends)
    }

    // ---- OffsetFetch ----------------------------------------------------------------------

    pub(super) fn handle_offset_fetch(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        request: &of_req::OffsetFetchRequest,
        version: i16,
    ) -> of_resp::OffsetFetchResponse {
        if version >= 8 {
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    let wanted = g.topics.as_ref().map(|topics| {
                        topics
                            .iter()
                            .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                            .collect()
                    });
                    let (error, topics) = self.fetch_group_offsets(cx, env, &g.group_id, wanted);
                    of_resp::OffsetFetchResponseGroup {
                        group_id: g.group_id.clone(),
                        error_code: error.code(),
                        topics: topics
                            .into_iter()
                            .map(|(name, partitions)| of_resp::OffsetFetchResponseTopics {
                                name,
                                partitions: partitions
                                    .into_iter()
                                    .map(|(index, code, c)| {
                                        of_resp::OffsetFetchResponsePartitions {
                                            partition_index: index,
                                            committed_offset: c.offset,
                                            committed_leader_epoch: c.leader_epoch,
                                            metadata: Some(c.metadata),
                                            error_code: code.code(),
                                        }
                                    })
                                    .collect(),
                            })
                            .collect(),
                    }
                })
                .collect();
            return of_resp::OffsetFetchResponse {
                groups,
                ..Default::default()
            };
        }
        let wanted = request.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                .collect()
        });
        let (error, topics) = self.fetch_group_offsets(cx, env, &request.group_id, wanted);
        let topics = topics
            .into_iter()
            .map(|(name, partitions)| of_resp::OffsetFetchResponseTopic {
                name,
                partitions: partitions
                    .into_iter()
                    .map(|(index, code, c)| of_resp::OffsetFetchResponsePartition {
                        partition_index: index,
                        committed_offset: c.offset,
                        committed_leader_epoch: c.leader_epoch,
                        metadata: Some(c.metadata),
                        // v0-1 have no group-level error: each partition carries it.
                        error_code: if version < 2 && error != ErrorCode::None {
                            error.code()
                        } else {
                            code.code()
                        },
                    })
                    .collect(),
            })
            .collect();
        of_resp::OffsetFetchResponse {
            throttle_time_ms: 0,
            topics,
            error_code: error.code(),
            groups: Vec::new(),
        }
    }

    /// One group's committed offsets: of the named partitions (offset -1 where none is
    /// committed), or of every partition it committed (`wanted` None).
    #[allow(clippy::type_complexity)]
    fn fetch_group_offsets(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        group_id: &str,
        wanted: Option<Vec<(String, Vec<i32>)>>,
    ) -> (
        ErrorCode,
        Vec<(String, Vec<(i32, ErrorCode, CommittedOffset)>)>,
    ) {
        let none = || CommittedOffset {
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: -1,
        };
        let partition = match self.group_coordinator(cx, env, group_id) {
            Ok((_, partition)) => partition,
            Err(code) => {
                // The named partitions are listed with the error (v0-1 read it there).
                let topics = wanted
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, parts)| {
                        (name, parts.into_iter().map(|p| (p, code, none())).collect())
                    })
                    .collect();
                return (code, topics);
            }
        };
        let state = offsets_state(cx.host, partition);
        let topics = match wanted {
            Some(wanted) => wanted
                .into_iter()
                .map(|(name, parts)| {
                    let partitions = parts
                        .into_iter()
                        .map(|p| {
                            let committed = offsets::committed_offset(state, group_id, &name, p);
                            (p, ErrorCode::None, committed.unwrap_or_else(none))
                        })
                        .collect();
                    (name, partitions)
                })
                .collect(),
            None => {
                let mut topics: Vec<(String, Vec<(i32, ErrorCode, CommittedOffset)>)> = Vec::new();
                for o in offsets::group_offsets(state, group_id) {
                    match topics.last_mut() {
                        Some((name, parts)) if *name == o.topic => {
                            parts.push((o.partition, ErrorCode::None, o.committed))
                        }
                        _ => topics
                            .push((o.topic, vec![(o.partition, ErrorCode::None, o.committed)])),
                    }
                }
                topics
            }
        };
        (ErrorCode::None, topics)
    }

    // ---- OffsetDelete ---------------------------------------------------------------------

    pub(super) fn handle_offset_delete(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        responder: Responder,
        header: &RequestHeader,
        request: od_req::OffsetDeleteRequest,
    ) -> Result<(), NodeError> {
        let mut response = od_resp::OffsetDeleteResponse {
            error_code: 0,
            throttle_time_ms: 0,
            topics: request
                .topics
                .iter()
                .map(|t| od_resp::OffsetDeleteResponseTopic {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| od_resp::OffsetDeleteResponsePartition {
                            partition_index: p.partition_index,
                            error_code: 0,
                        })
                        .collect(),
                })
                .collect(),
        };
        let group_id = request.group_id.as_str();
        let topics: Vec<&str> = request.topics.iter().map(|t| t.name.as_str()).collect();
        let checked = self
            .group_coordinator(cx, env, group_id)
            .and_then(|(_, partition)| {
                let coordinator = &self.coordinator;
                if !coordinator.contains(group_id)
                    && !offsets::has_offsets(offsets_state(cx.host, partition), group_id)
                {
                    return Err(ErrorCode::GroupIdNotFound);
                }
                Ok((partition, coordinator.offsets_deletable(group_id, &topics)?))
            });
        let (partition, deletable) = match checked {
            Ok(found) => found,
            Err(code) => {
                response.error_code = code.code();
                return send_write_answer(responder, header, Response::OffsetDelete(response));
            }
        };
        let mut records = Vec::new();
        let mut slots = Vec::new();
        for (t, topic) in request.topics.iter().enumerate() {
            for (p, part) in topic.partitions.iter().enumerate() {
                if !deletable[t] {
                    response.topics[t].partitions[p].error_code =
                        ErrorCode::GroupSubscribedToTopic.code();
                    continue;
                }
                let key = offsets::offset_key(group_id, &topic.name, part.partition_index);
                if let Some(key) = key.filter(|k| offsets_state(cx.host, partition).contains_key(k))
                {
                    records.push((key, None));
                    slots.push((t, p));
                }
            }
        }
        let mut write = WriteResponse::Delete(response, slots);
        let appends = match append_offset_records(cx, env, partition, records) {
            Ok(append) => append.into_iter().collect(),
            Err(code) => {
                for slot in 0..slot_count(&write) {
                    write.set(slot, code);
                }
                Vec::new()
            }
        };
        self.park_write(cx, responder, header, write, appends)
    }

    // ---- DeleteGroups ---------------------------------------------------------------------

    pub(super) fn handle_delete_groups(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        responder: Responder,
        header: &RequestHeader,
        request: del_req::DeleteGroupsRequest,
    ) -> Result<(), NodeError> {
        let mut results = Vec::new();
        let mut appends = Vec::new();
        for (slot, group_id) in request.groups_names.iter().enumerate() {
            let outcome = self
                .group_coordinator(cx, env, group_id)
                .and_then(|(_, partition)| {
                    let in_memory = self.coordinator.delete_group(group_id)?;
                    let state = offsets_state(cx.host, partition);
                    let mut records: Vec<(Bytes, Option<Bytes>)> =
                        offsets::group_offsets(state, group_id)
                            .into_iter()
                            .filter_map(|o| {
                                Some((offsets::offset_key(group_id, &o.topic, o.partition)?, None))
                            })
                            .collect();
                    // Its metadata record goes with it (a new coordinator must not restore it).
                    if let Some(key) =
                        metadata::group_metadata_key(group_id).filter(|k| state.contains_key(k))
                    {
                        records.push((key, None));
                    }
                    if !in_memory && records.is_empty() {
                        return Err(ErrorCode::GroupIdNotFound);
                    }
                    append_offset_records(cx, env, partition, records)
                });
            let code = match outcome {
                Ok(Some(mut append)) => {
                    append.slots = vec![slot];
                    appends.push(append);
                    ErrorCode::None
                }
                Ok(None) => ErrorCode::None,
                Err(code) => code,
            };
            results.push(del_resp::DeletableGroupResult {
                group_id: group_id.clone(),
                error_code: code.code(),
            });
        }
        let write = WriteResponse::DeleteGroups(del_resp::DeleteGroupsResponse {
            throttle_time_ms: 0,
            results,
        });
        self.park_write(cx, responder, header, write, appends)
    }

    // ---- the writes -------------------------------------------------------------------------

    fn park_write(
        &mut self,
        cx: &Cx,
        responder: Responder,
        header: &RequestHeader,
        response: WriteResponse,
        appends: Vec<Append>,
    ) -> Result<(), NodeError> {
        let deadline_ms = cx.now_ms + cx.config.groups.offsets_commit_timeout_ms;
        self.writes.push(PendingWrite {
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
            deadline_ms,
            response,
            appends,
        });
        self.check_group_writes(cx.host)
    }

    /// Answers the writes whose records are committed; fails the appends whose leader lost
    /// its epoch.
    pub(super) fn check_group_writes(&mut self, host: &Host<AnyIo>) -> Result<(), NodeError> {
        let mut index = 0;
        while index < self.writes.len() {
            let write = &mut self.writes[index];
            let mut settled = Vec::new();
            write.appends.retain(|append| {
                let raft = host.raft(append.partition);
                let outcome = match raft {
                    Some(r) if r.is_leader() && r.epoch() == append.leader_epoch => host
                        .store(append.partition)
                        .filter(|s| s.high_watermark > append.last_offset)
                        .map(|_| ErrorCode::None),
                    _ => Some(ErrorCode::NotCoordinator),
                };
                match outcome {
                    Some(code) => {
                        settled.extend(append.slots.iter().map(|s| (*s, code)));
                        false
                    }
                    None => true,
                }
            });
            for (slot, code) in settled {
                write.response.set(slot, code);
            }
            if write.appends.is_empty() {
                let write = self.writes.swap_remove(index);
                answer_write(write)?;
            } else {
                index += 1;
            }
        }
        Ok(())
    }

    pub(super) fn expire_group_writes(&mut self, now_ms: u64) -> Result<(), NodeError> {
        let (expired, kept) = std::mem::take(&mut self.writes)
            .into_iter()
            .partition(|w| w.deadline_ms <= now_ms);
        self.writes = kept;
        for write in expired {
            settle_and_answer(write, ErrorCode::RequestTimedOut)?;
        }
        Ok(())
    }

    pub(super) fn fail_group_writes(&mut self, code: ErrorCode) -> Result<(), NodeError> {
        for write in std::mem::take(&mut self.writes) {
            settle_and_answer(write, code)?;
        }
        Ok(())
    }
}

/// Appends `records` (key, value; a `None` value is a tombstone) to `partition`, which this
/// node leads. `None` when there is nothing to append. The slots of the returned append are
/// 0..records of a one-append write; callers with several appends set their own. The host's
/// output (the records for the followers) is the node's to deliver after the call.
pub(super) fn append_offset_records(
    cx: &mut Cx,
    env: GroupsEnv,
    partition: PartitionId,
    records: Vec<(Bytes, Option<Bytes>)>,
) -> Result<Option<Append>, ErrorCode> {
    if records.is_empty() {
        return Ok(None);
    }
    let count = records.len();
    let timestamp_ms = cx.now_wall_ms;
    // Each batch must fit `message.max.bytes` and one segment of the partition.
    let batch_bytes_max =
        (max_batch_bytes(cx, env, partition) / 2).clamp(4096, WRITE_BATCH_BYTES_MAX);
    let mut batches = Vec::new();
    let mut builder = RecordBatchBuilder::new(0);
    for (key, value) in &records {
        let record_bytes = key.len() + value.as_ref().map_or(0, |v| v.len()) + 64;
        if !builder.is_empty() && builder.size_bytes() + record_bytes > batch_bytes_max {
            batches.push(std::mem::replace(&mut builder, RecordBatchBuilder::new(0)));
        }
        builder.append(timestamp_ms, Some(key), value.as_deref(), &[]);
    }
    batches.push(builder);
    let mut bytes = Vec::new();
    for builder in batches {
        bytes.extend_from_slice(&builder.build().into_bytes());
    }
    let bytes = Bytes::from(bytes);
    let max = max_batch_bytes(cx, env, partition);
    let batches = super::super::produce_validation::validate_produce_records(Some(&bytes), max)
        .map_err(|(_, message)| {
            tracing::warn!(%message, "offset records refused");
            ErrorCode::InvalidCommitOffsetSize
        })?;
    let appended = match cx.host.append(cx.now_ms, partition, batches) {
        Ok(appended) => appended,
        Err(ringlog_replication::host::HostError::Raft(_)) => {
            return Err(ErrorCode::NotCoordinator);
        }
        Err(ringlog_replication::host::HostError::Storage(_)) => {
            return Err(ErrorCode::KafkaStorageError);
        }
    };
    Ok(Some(Append {
        partition,
        leader_epoch: appended.leader_epoch,
        last_offset: appended.last_offset,
        slots: (0..count).collect(),
    }))
}

/// The largest batch `__consumer_offsets`-`partition` takes (topics.rs,
/// `produce_max_batch_bytes`).
fn max_batch_bytes(cx: &Cx, env: GroupsEnv, partition: PartitionId) -> usize {
    env.topics
        .produce_max_batch_bytes(cx.host, cx.table, env.message_max_bytes, partition)
}

fn settle_and_answer(mut write: PendingWrite, code: ErrorCode) -> Result<(), NodeError> {
    for append in std::mem::take(&mut write.appends) {
        for slot in append.slots {
            write.response.set(slot, code);
        }
    }
    answer_write(write)
}

fn answer_write(write: PendingWrite) -> Result<(), NodeError> {
    let response = write.response.into_response();
    let frame = encode_response(write.correlation_id, write.version, &response)?;
    write.responder.send(Some(frame));
    Ok(())
}

fn send_write_answer(
    responder: Responder,
    header: &RequestHeader,
    response: Response,
) -> Result<(), NodeError> {
    let frame = encode_response(header.correlation_id, header.api_version, &response)?;
    responder.send(Some(frame));
    Ok(())
}

/// Whether `topic` has partition `index` (an offset of another partition is refused, as
/// Kafka refuses it: UNKNOWN_TOPIC_OR_PARTITION).
fn topic_partition_exists(topics: &Topics, topic: &str, index: i32) -> bool {
    topics
        .image
        .get(topic)
        .is_some_and(|t| (0..t.partitions).contains(&index))
        || (topic == super::super::convert::METADATA_TOPIC && index == 0)
}

fn slot_count(write: &WriteResponse) -> usize {
    match write {
        WriteResponse::Commit(_, slots) | WriteResponse::Delete(_, slots) => slots.len(),
        WriteResponse::DeleteGroups(r) => r.results.len(),
    }
}
