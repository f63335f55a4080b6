//! Client requests the node answers itself (not through the quorum's request/response pairs):
//! ApiVersions, DescribeQuorum, Produce (with acks 0, 1 and all) and consumer Fetch (replica id
//! -1, read up to the high-watermark, long-polled until it moves).

use std::collections::BTreeSet;

use ringlog_replication::host::HostError;
use ringlog_replication::{self as core, PartitionId, RaftError};

use super::idempotence::SequenceOutcome;
use super::produce_validation::{keyless_records, recompress_batches, validate_produce_records};
use super::topics::is_internal_topic;
use super::transport::Responder;
use super::{Node, NodeError};
use crate::protocol::ApiKey;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ApiVersionsResponse, ErrorCode, Request, RequestHeader, Response, describe_quorum_request,
    describe_quorum_response as dq, encode_response, produce_request, produce_response,
    supported_api_versions,
};
use crate::server::ListenerRole;

mod consumer_fetch;

use consumer_fetch::ParkedConsumerFetch;
use ringlog_replication::purgatory::Purgatory;

/// The APIs this node answers, at every version the codec speaks. ApiVersions advertises
/// exactly these: a client must never pick an API we would answer with an empty body.
const SERVED_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::InitProducerId,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::DescribeQuorum,
    ApiKey::FetchSnapshot,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::OffsetDelete,
    ApiKey::ListGroups,
    ApiKey::DescribeGroups,
    ApiKey::DeleteGroups,
    ApiKey::DescribeConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AlterConfigs,
    ApiKey::DeleteRecords,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::CreatePartitions,
    ApiKey::DescribeCluster,
    ApiKey::AllocateProducerIds,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
    ApiKey::UpdateRaftVoter,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
];

/// ApiVersions' list on `listener`: the codec's versions of the APIs in [`SERVED_APIS`],
/// without the quorum's own APIs on a client listener (Kafka lists only what a listener
/// exposes; admission.rs).
pub(crate) fn served_api_versions(
    listener: ListenerRole,
) -> Vec<crate::protocol::api_versions_response::ApiVersion> {
    supported_api_versions()
        .into_iter()
        .filter(|v| SERVED_APIS.iter().any(|api| api.key() == v.api_key))
        .filter(|v| {
            listener.serves_quorum()
                || !super::admission::QUORUM_APIS
                    .iter()
                    .any(|api| api.key() == v.api_key)
        })
        .collect()
}

/// Produce requests waiting for durability or the high-watermark, and parked consumer fetches.
#[derive(Default)]
pub(super) struct State {
    produces: std::collections::HashMap<u64, PendingProduce>,
    next_produce_id: u64,
    waiters: Vec<Waiter>,
    /// Consumer fetches waiting for committed records or their `max_wait_ms`, in arrival order.
    parked: Purgatory<u64, ParkedConsumerFetch>,
    next_parked_id: u64,
    pub(super) producers: super::idempotence::Producers,
    /// This node's producer id blocks, and the blocks it proposed as controller
    /// (producer_ids.rs).
    pub(super) producer_ids: super::producer_ids::ProducerIdManager,
    pub(super) producer_id_control: super::producer_ids::ProducerIdControl,
    pub(super) topics: super::topics::Topics,
    /// The ACL image (acls.rs), read by the authorizer.
    pub(super) acl_image: super::acls::AclImage,
    /// The controller's ACL proposals and the ACL APIs (acls.rs).
    pub(super) acls: super::acls::AclState,
    /// Admin answers parked until their metadata records apply (admin_answers.rs).
    pub(super) admin: super::admin_answers::AdminAnswers,
    /// Dynamic node configs as applied, and those proposed not yet applied (broker_configs.rs).
    pub(super) broker_configs: super::broker_configs::BrokerConfigs,
    pub(super) groups: super::groups::GroupsState,
    pub(super) delete_records: super::delete_records::PendingDeletes,
    pub(super) voter_changes: super::voter_changes::PendingVoterChanges,
    /// KIP-853: this voter's UpdateRaftVoter of its own listener (own_endpoint.rs).
    pub(super) own_endpoint: super::own_endpoint::OwnEndpoint,
    /// The SCRAM credentials in force (scram_record.rs), shared with the server's SASL
    /// exchanges.
    pub(super) credentials: super::scram_record::CredentialImage,
}

impl State {
    pub(super) fn next_deadline_ms(&self) -> u64 {
        let produce = self
            .produces
            .values()
            .map(|p| p.deadline_ms)
            .min()
            .unwrap_or(u64::MAX);
        let parked = self.parked.next_deadline_ms();
        produce
            .min(parked)
            .min(self.admin.next_deadline_ms())
            .min(self.groups.next_deadline_ms())
            .min(self.delete_records.next_deadline_ms())
            .min(self.voter_changes.next_deadline_ms())
    }
}

struct PendingProduce {
    responder: Responder,
    correlation_id: i32,
    version: i16,
    topics: Vec<(String, Uuid, Vec<ProduceAnswer>)>,
    deadline_ms: u64,
}

#[derive(Clone)]
struct ProduceAnswer {
    index: i32,
    answer: Option<(ErrorCode, i64, Option<String>)>,
    /// Produce v8+'s RecordErrors: the records that made an INVALID_RECORD answer, by index.
    record_errors: Vec<produce_response::BatchIndexAndErrorMessage>,
}

/// A produced batch range waiting for acks=1 (durable locally) or acks=all (committed).
struct Waiter {
    produce: u64,
    topic: usize,
    part: usize,
    partition: PartitionId,
    base_offset: u64,
    last_offset: u64,
    acks_all: bool,
    leader_epoch: u32,
}

impl Node {
    pub(super) fn handle_client_request(
        &mut self,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        // With an authorizer, nothing is authorized before the ACL image is loaded (acls.rs,
        // `acls_loaded`): the connection is closed unanswered (a Kafka broker does not serve
        // before its authorizer's initial load either) and the client reconnects and retries.
        if self.config.authorizer.settings.is_some()
            && !matches!(request, Request::ApiVersions(_))
            && responder.listener() != ListenerRole::Controller
            && !self
                .handlers
                .acl_image
                .loaded(super::context::metadata_raft(&self.host, &self.table))
        {
            tracing::debug!(api = ?request.api_key(), "ACL image not loaded yet; connection closed");
            return Ok(());
        }
        // The requests whose one resource the requester may not touch stop here (authorize.rs).
        let requester = responder.requester();
        if let Some(refused) = self.authorizer().refuse_unauthorized(&requester, &request) {
            let frame = encode_response(header.correlation_id, version, &refused)?;
            responder.send(Some(frame));
            return Ok(());
        }
        let response = match request {
            Request::InitProducerId(r) => {
                Response::InitProducerId(self.handle_init_producer_id(&r))
            }
            Request::ApiVersions(_) => Response::ApiVersions(ApiVersionsResponse {
                error_code: 0,
                api_keys: served_api_versions(responder.listener()),
                ..Default::default()
            }),
            Request::Metadata(r) => return self.answer_metadata(responder, &header, r),
            Request::ListOffsets(r) => {
                Response::ListOffsets(self.handle_list_offsets(&r, &requester))
            }
            Request::OffsetForLeaderEpoch(r) => {
                Response::OffsetForLeaderEpoch(self.handle_offset_for_leader_epoch(&r))
            }
            Request::DescribeQuorum(r) => Response::DescribeQuorum(self.describe_quorum(&r)),
            Request::Produce(r) => return self.handle_produce(responder, &header, r),
            Request::CreateTopics(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_create_topics(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteTopics(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_delete_topics(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeConfigs(r) => {
                Response::DescribeConfigs(self.handle_describe_configs(&r, &requester))
            }
            Request::IncrementalAlterConfigs(r) => {
                return self.handle_incremental_alter_configs(responder, &header, r);
            }
            Request::AlterConfigs(r) => return self.handle_alter_configs(responder, &header, r),
            Request::CreatePartitions(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_create_partitions(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteRecords(r) => return self.handle_delete_records(responder, &header, r),
            Request::DescribeAcls(r) => {
                Response::DescribeAcls(super::acls::AclState::handle_describe_acls(&cx!(self), &r))
            }
            Request::CreateAcls(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .acls
                    .handle_create_acls(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteAcls(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .acls
                    .handle_delete_acls(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeCluster(r) => {
                Response::DescribeCluster(self.handle_describe_cluster(&r, &requester))
            }
            Request::AllocateProducerIds(r) => {
                return self.handle_allocate_producer_ids(responder, &header, &r);
            }
            Request::Fetch(r) => return self.consumer_fetch(responder, &header, r, true),
            r @ (Request::AddRaftVoter(_)
            | Request::RemoveRaftVoter(_)
            | Request::UpdateRaftVoter(_)) => {
                return self.handle_voter_change(responder, &header, r);
            }
            Request::DescribeUserScramCredentials(r) => Response::DescribeUserScramCredentials(
                self.handle_describe_user_scram_credentials(&r),
            ),
            Request::AlterUserScramCredentials(r) => {
                return self.handle_alter_user_scram_credentials(responder, &header, r);
            }
            r @ (Request::SaslHandshake(_) | Request::SaslAuthenticate(_)) => {
                super::scram::sasl_request_outside_the_exchange(&r)
            }
            r if super::groups::is_group_request(&r) => {
                return self.handle_group_request(responder, header, r);
            }
            other => {
                // Not served by this node yet: an empty answer keeps the connection in step.
                tracing::debug!(api = ?other.api_key(), "request not served; empty answer");
                match other {
                    Request::FetchSnapshot(_) => Response::FetchSnapshot(Default::default()),
                    _ => return Ok(()),
                }
            }
        };
        let frame = encode_response(header.correlation_id, version, &response)?;
        responder.send(Some(frame));
        Ok(())
    }

    // ---- DescribeQuorum ---------------------------------------------------------------------

    fn describe_quorum(
        &self,
        request: &describe_quorum_request::DescribeQuorumRequest,
    ) -> dq::DescribeQuorumResponse {
        let wall = |ms: Option<u64>| ms.map_or(-1, |ms| (self.started_wall_ms + ms) as i64);
        // KIP-853: a voter's directory id is the one its voter set records, an observer's the
        // one it fetched with (the core's `describe_quorum`): a voter's id fetching from a
        // replaced disk shows as an observer with the new directory id.
        let replica = |r: &core::ReplicaState| dq::ReplicaState {
            replica_id: r.replica_id,
            replica_directory_id: Uuid(r.replica_directory_id),
            log_end_offset: r.log_end_offset.map_or(-1, |o| o as i64),
            last_fetch_timestamp: wall(r.last_fetch_timestamp_ms),
            last_caught_up_timestamp: wall(r.last_caught_up_timestamp_ms),
        };
        let topics = request
            .topics
            .iter()
            .map(|t| dq::TopicData {
                topic_name: t.topic_name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let found = self
                            .table
                            .find(&t.topic_name, p.partition_index)
                            .and_then(|id| self.host.raft(id));
                        match found {
                            None => dq::PartitionData {
                                partition_index: p.partition_index,
                                error_code: ErrorCode::UnknownTopicOrPartition.code(),
                                leader_id: -1,
                                leader_epoch: -1,
                                high_watermark: -1,
                                ..Default::default()
                            },
                            Some(raft) => {
                                let d = raft.describe_quorum();
                                dq::PartitionData {
                                    partition_index: p.partition_index,
                                    error_code: d.error_code.code(),
                                    leader_id: d.leader_id.unwrap_or(-1),
                                    leader_epoch: d.leader_epoch as i32,
                                    high_watermark: d.high_watermark as i64,
                                    current_voters: d.current_voters.iter().map(replica).collect(),
                                    observers: d.observers.iter().map(replica).collect(),
                                    ..Default::default()
                                }
                            }
                        }
                    })
                    .collect(),
            })
            .collect();
        dq::DescribeQuorumResponse {
            error_code: 0,
            topics,
            nodes: self.quorum_nodes(),
            ..Default::default()
        }
    }

    /// DescribeQuorum v2's Nodes: every voter of the metadata quorum in force (KIP-853), with
    /// the endpoints its VotersRecord gave, or its `controller.quorum.voters` address.
    fn quorum_nodes(&self) -> Vec<dq::Node> {
        let voters = self.metadata_raft().voter_set().clone();
        voters
            .voters()
            .iter()
            .filter_map(|(&id, info)| {
                let listeners: Vec<dq::Listener> = if info.endpoints.is_empty() {
                    let configured = self.config.quorum_voters.iter().find(|v| v.node_id == id)?;
                    vec![dq::Listener {
                        name: self.config.controller_listener_name().to_string(),
                        host: configured.host.clone(),
                        port: configured.port,
                    }]
                } else {
                    info.endpoints
                        .iter()
                        .map(|e| dq::Listener {
                            name: e.name.clone(),
                            host: e.host.clone(),
                            port: e.port,
                        })
                        .collect()
                };
                Some(dq::Node {
                    node_id: id,
                    listeners,
                })
            })
            .collect()
    }

    // ---- Produce ----------------------------------------------------------------------------

    fn handle_produce(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        request: produce_request::ProduceRequest,
    ) -> Result<(), NodeError> {
        let acks = request.acks;
        let requester = responder.requester();
        let id = self.handlers.next_produce_id;
        self.handlers.next_produce_id += 1;
        let mut topics = Vec::new();
        let mut waiters = Vec::new();
        for (topic_index, topic) in request.topic_data.iter().enumerate() {
            let mut answers = Vec::new();
            for (part_index, data) in topic.partition_data.iter().enumerate() {
                let mut answer = ProduceAnswer {
                    index: data.index,
                    answer: None,
                    record_errors: Vec::new(),
                };
                let partition = self.table.find(&topic.name, data.index);
                let result: Result<(), (ErrorCode, Option<String>)> = (|| {
                    if !matches!(acks, -1..=1) {
                        return Err((ErrorCode::InvalidRequiredAcks, None));
                    }
                    if !self.allowed(&requester, ApiKey::Produce, &topic.name) {
                        return Err((ErrorCode::TopicAuthorizationFailed, None));
                    }
                    // Internal state is written only by the node: a topic record produced to
                    // `__cluster_metadata` would create, replace or delete a topic on every
                    // node, past CreateTopics and DeleteTopics.
                    if is_internal_topic(&topic.name) {
                        let message = format!("Cannot append to internal topic {}", topic.name);
                        return Err((ErrorCode::InvalidTopicException, Some(message)));
                    }
                    let Some(partition) = partition else {
                        return Err((self.absent_partition_error(&topic.name, data.index), None));
                    };
                    // Internal state is written by the node only (docs/groups.md).
                    if topic.name == crate::groups::offsets::OFFSETS_TOPIC {
                        return Err((
                            ErrorCode::InvalidTopicException,
                            Some(
                                "__consumer_offsets is written by the group coordinator only"
                                    .into(),
                            ),
                        ));
                    }
                    if self.shutdown_until_ms.is_some() {
                        return Err((ErrorCode::NotLeaderOrFollower, None));
                    }
                    // Out of disk space: nothing more is appended until a retried flush gets
                    // through (storage_faults.rs); reads and other partitions go on.
                    if self.host.waiting_for_space(partition) {
                        let message = format!(
                            "{}-{} is waiting for disk space (ENOSPC)",
                            topic.name, data.index
                        );
                        return Err((ErrorCode::KafkaStorageError, Some(message)));
                    }
                    let batches = validate_produce_records(
                        data.records.as_ref(),
                        self.handlers.topics.produce_max_batch_bytes(
                            &self.host,
                            &self.table,
                            self.node_message_max_bytes().0,
                            partition,
                        ),
                    )
                    .map_err(|(code, message)| (code, Some(message)))?;
                    // Kafka's rule for a compacted topic: no record without a key. The whole
                    // Produce partition is refused, the keyless records named (librdkafka fails
                    // those with INVALID_RECORD and the others with _INVALID_DIFFERENT_RECORD).
                    if self
                        .handlers
                        .topics
                        .topic_config(&self.table, partition)
                        .is_some_and(|c| c.cleanup_policy.requires_keys())
                    {
                        let keyless = keyless_records(&batches)
                            .map_err(|(code, message)| (code, Some(message)))?;
                        if !keyless.is_empty() {
                            let message = format!(
                                "Compacted topic cannot accept message without key in topic partition {}-{}.",
                                topic.name, data.index
                            );
                            answer.record_errors = keyless
                                .iter()
                                .map(|&batch_index| produce_response::BatchIndexAndErrorMessage {
                                    batch_index,
                                    batch_index_error_message: Some(message.clone()),
                                })
                                .collect();
                            let summary = format!(
                                "One or more records have been rejected due to {} record errors in total",
                                keyless.len()
                            );
                            return Err((ErrorCode::InvalidRecord, Some(summary)));
                        }
                    }
                    // The topic's `compression.type`: batches stored in its codec.
                    let codec = self
                        .handlers
                        .topics
                        .topic_config(&self.table, partition)
                        .and_then(|c| c.compression_type.codec());
                    let max_batch_bytes = self.handlers.topics.produce_max_batch_bytes(
                        &self.host,
                        &self.table,
                        self.node_message_max_bytes().0,
                        partition,
                    );
                    let batches = recompress_batches(batches, codec, max_batch_bytes)
                        .map_err(|(code, message)| (code, Some(message)))?;
                    let leading = self.host.raft(partition).is_some_and(|r| r.is_leader());
                    if leading {
                        match self
                            .check_producer_sequences(partition, &batches)
                            .map_err(|e| (ErrorCode::KafkaStorageError, Some(e.to_string())))?
                        {
                            SequenceOutcome::Append => {}
                            SequenceOutcome::Duplicate {
                                base_offset,
                                last_offset,
                            } => {
                                let raft = self.host.raft(partition).expect("hosted");
                                if acks == 0 {
                                    answer.answer =
                                        Some((ErrorCode::None, base_offset as i64, None));
                                } else {
                                    waiters.push(Waiter {
                                        produce: id,
                                        topic: topic_index,
                                        part: part_index,
                                        partition,
                                        base_offset,
                                        last_offset,
                                        acks_all: acks == -1,
                                        leader_epoch: raft.epoch(),
                                    });
                                }
                                return Ok(());
                            }
                            SequenceOutcome::Refused(code) => return Err((code, None)),
                        }
                    }
                    let now = self.now_ms();
                    let appended = match self.host.append(now, partition, batches) {
                        Ok(ok) => ok,
                        Err(HostError::Raft(RaftError::NotLeader { .. })) => {
                            return Err((ErrorCode::NotLeaderOrFollower, None));
                        }
                        Err(HostError::Raft(error)) => {
                            return Err((ErrorCode::InvalidRecord, Some(error.to_string())));
                        }
                        Err(HostError::Storage(error)) => {
                            return Err((ErrorCode::KafkaStorageError, Some(error.to_string())));
                        }
                    };
                    self.deliver()
                        .map_err(|e| (ErrorCode::KafkaStorageError, Some(e.to_string())))?;
                    if acks == 0 {
                        answer.answer = Some((ErrorCode::None, appended.base_offset as i64, None));
                    } else {
                        waiters.push(Waiter {
                            produce: id,
                            topic: topic_index,
                            part: part_index,
                            partition,
                            base_offset: appended.base_offset,
                            last_offset: appended.last_offset,
                            acks_all: acks == -1,
                            leader_epoch: appended.leader_epoch,
                        });
                    }
                    Ok(())
                })();
                if let Err((code, message)) = result {
                    answer.answer = Some((code, -1, message));
                }
                answers.push(answer);
            }
            topics.push((topic.name.clone(), topic.topic_id, answers));
        }
        if acks == 0 {
            // Kafka sends no response to acks=0; the slot is freed so later answers flow.
            responder.send(None);
            return Ok(());
        }
        self.handlers.waiters.extend(waiters);
        let timeout_ms = u64::try_from(request.timeout_ms).unwrap_or(0).max(1);
        self.handlers.produces.insert(
            id,
            PendingProduce {
                responder,
                correlation_id: header.correlation_id,
                version: header.api_version,
                topics,
                deadline_ms: self.now_ms() + timeout_ms,
            },
        );
        self.check_produce_waiters()?;
        self.maybe_complete_produce(id)
    }

    /// Answers the produce waiters whose records are durable (acks=1) or committed (acks=all),
    /// and fails those whose leader lost its epoch: records appended in a lost epoch may be
    /// replaced, so the high-watermark passing their offsets proves nothing about them.
    pub(super) fn check_produce_waiters(&mut self) -> Result<(), NodeError> {
        // Committed metadata records first: a topic may have been created.
        let began = std::time::Instant::now();
        self.apply_metadata_records()?;
        self.stall.part(began, "pump: apply_metadata_records");
        let began = std::time::Instant::now();
        self.groups_pump()?;
        self.stall.part(began, "pump: groups");
        let now = self.now_ms();
        self.handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)?;
        self.answer_voter_changes()?;
        self.answer_producer_id_blocks()?;
        let began = std::time::Instant::now();
        let mut touched = Vec::new();
        let mut index = 0;
        while index < self.handlers.waiters.len() {
            let w = &self.handlers.waiters[index];
            // A partition taken offline meanwhile: storage_faults.rs answers its waiters.
            let (Some(raft), Some(store)) =
                (self.host.raft(w.partition), self.host.store(w.partition))
            else {
                index += 1;
                continue;
            };
            let outcome = if !raft.is_leader() || raft.epoch() != w.leader_epoch {
                Some(ErrorCode::NotLeaderOrFollower)
            } else if (w.acks_all && store.high_watermark > w.last_offset)
                || (!w.acks_all && store.log.durable_end_offset() as u64 > w.last_offset)
            {
                Some(ErrorCode::None)
            } else {
                None
            };
            match outcome {
                None => index += 1,
                Some(code) => {
                    let w = self.handlers.waiters.swap_remove(index);
                    let base = if code == ErrorCode::None {
                        w.base_offset as i64
                    } else {
                        -1
                    };
                    if let Some(p) = self.handlers.produces.get_mut(&w.produce) {
                        p.topics[w.topic].2[w.part].answer = Some((code, base, None));
                    }
                    touched.push(w.produce);
                }
            }
        }
        self.stall.part(began, "pump: produce waiters");
        let began = std::time::Instant::now();
        for id in touched {
            self.maybe_complete_produce(id)?;
        }
        self.stall.part(began, "pump: produce responses");
        let began = std::time::Instant::now();
        let woken = self.wake_parked_fetches();
        self.stall.part(began, "pump: wake_parked_fetches");
        woken
    }

    fn maybe_complete_produce(&mut self, id: u64) -> Result<(), NodeError> {
        let done = self.handlers.produces.get(&id).is_some_and(|p| {
            p.topics
                .iter()
                .all(|(_, _, parts)| parts.iter().all(|a| a.answer.is_some()))
        });
        if done {
            let p = self.handlers.produces.remove(&id).expect("checked");
            self.send_produce_response(p)?;
        }
        Ok(())
    }

    fn send_produce_response(&mut self, p: PendingProduce) -> Result<(), NodeError> {
        let mut leaders_named = BTreeSet::new();
        let responses = p
            .topics
            .into_iter()
            .map(
                |(name, topic_id, parts)| produce_response::TopicProduceResponse {
                    partition_responses: parts
                        .into_iter()
                        .map(|a| {
                            let (code, base_offset, message) =
                                a.answer.unwrap_or((ErrorCode::RequestTimedOut, -1, None));
                            // KIP-951: a partition refused because this node does not lead it
                            // names the leader it knows, so the client redirects without a
                            // metadata round trip. (Until 2026-12-02 this named the metadata
                            // partition's leader, whatever the topic: a client sent its retry to
                            // the wrong node.)
                            let redirect = matches!(
                                code,
                                ErrorCode::NotLeaderOrFollower | ErrorCode::FencedLeaderEpoch
                            );
                            let partition = if name.is_empty() {
                                self.table.find_by_id(topic_id, a.index)
                            } else {
                                self.table.find(&name, a.index)
                            };
                            let leader = partition
                                .filter(|_| redirect)
                                .and_then(|id| self.host.raft(id))
                                .map(|r| r.leader_and_epoch());
                            if let Some(id) = leader.and_then(|l| l.leader_id) {
                                leaders_named.insert(id);
                            }
                            produce_response::PartitionProduceResponse {
                                index: a.index,
                                error_code: code.code(),
                                base_offset,
                                log_start_offset: 0,
                                error_message: message,
                                record_errors: a.record_errors,
                                current_leader: produce_response::LeaderIdAndEpoch {
                                    leader_id: leader.and_then(|l| l.leader_id).unwrap_or(-1),
                                    leader_epoch: leader.map_or(-1, |l| l.leader_epoch as i32),
                                },
                                ..Default::default()
                            }
                        })
                        .collect(),
                    name,
                    topic_id,
                },
            )
            .collect();
        // KIP-951: the endpoints of the leaders named above.
        let node_endpoints = self
            .metadata_brokers()
            .into_iter()
            .filter(|b| leaders_named.contains(&b.node_id))
            .map(|b| produce_response::NodeEndpoint {
                node_id: b.node_id,
                host: b.host,
                port: b.port,
                rack: b.rack,
            })
            .collect();
        let response = Response::Produce(produce_response::ProduceResponse {
            responses,
            node_endpoints,
            ..Default::default()
        });
        let frame = encode_response(p.correlation_id, p.version, &response)?;
        p.responder.send(Some(frame));
        Ok(())
    }

    /// Produce requests past their timeout and parked fetches past their wait are answered.
    pub(super) fn handlers_expire(&mut self, now: u64) {
        if let Err(error) = self.groups_tick(now) {
            tracing::warn!(%error, "group deadlines");
        }
        let now_ms = self.now_ms();
        if let Err(error) =
            self.handlers
                .delete_records
                .answer_ready(&self.host, &self.config, now_ms)
        {
            tracing::warn!(%error, "DeleteRecords deadlines");
        }
        if let Err(error) = self.answer_voter_changes() {
            tracing::warn!(%error, "voter change deadlines");
        }
        self.maybe_send_own_endpoint_update(now);
        let expired: Vec<u64> = self
            .handlers
            .produces
            .iter()
            .filter(|(_, p)| p.deadline_ms <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.handlers.waiters.retain(|w| w.produce != id);
            let p = self.handlers.produces.remove(&id).expect("listed");
            if let Err(error) = self.send_produce_response(p) {
                tracing::warn!(%error, "answering an expired produce");
            }
        }
        for (_, parked) in self.handlers.parked.take_due(now, |_, _| false) {
            if let Err(error) = self.answer_parked(parked) {
                tracing::warn!(%error, "answering a parked fetch");
            }
        }
    }

    /// Shutdown: every waiting produce and parked fetch is answered now.
    /// Fails the produce waiters of one partition (its topic is being deleted, topics.rs).
    pub(super) fn fail_partition_waiters(
        &mut self,
        partition: PartitionId,
        code: ErrorCode,
    ) -> Result<(), NodeError> {
        let (failed, kept) = std::mem::take(&mut self.handlers.waiters)
            .into_iter()
            .partition(|w| w.partition == partition);
        self.handlers.waiters = kept;
        let mut touched = Vec::new();
        for w in failed {
            if let Some(p) = self.handlers.produces.get_mut(&w.produce) {
                p.topics[w.topic].2[w.part]
                    .answer
                    .get_or_insert((code, -1, None));
            }
            touched.push(w.produce);
        }
        for id in touched {
            self.maybe_complete_produce(id)?;
        }
        Ok(())
    }

    pub(super) fn handlers_fail_all(&mut self, code: ErrorCode) -> Result<(), NodeError> {
        let waiters = std::mem::take(&mut self.handlers.waiters);
        for w in waiters {
            if let Some(p) = self.handlers.produces.get_mut(&w.produce) {
                p.topics[w.topic].2[w.part]
                    .answer
                    .get_or_insert((code, -1, None));
            }
        }
        let ids: Vec<u64> = self.handlers.produces.keys().copied().collect();
        for id in ids {
            self.maybe_complete_produce(id)?;
        }
        for (_, parked) in self.handlers.parked.take_all() {
            self.answer_parked(parked)?;
        }
        self.fail_voter_changes(code)?;
        self.groups_fail_all()
    }
}
