//! Client requests the node answers itself (not through the quorum's request/response pairs):
//! the dispatch of every client request, ApiVersions, DescribeQuorum, Produce (with acks 0, 1
//! and all, produce.rs) and consumer Fetch (replica id -1, read up to the high-watermark,
//! long-polled until it moves, consumer_fetch.rs).

use ringlog_replication as core;

use super::context::Cx;
use super::metadata::PartitionLookup;
use super::transport::Responder;
use super::{Node, NodeError};
use crate::protocol::ApiKey;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ApiVersionsResponse, ErrorCode, Request, RequestHeader, Response, describe_quorum_request,
    describe_quorum_response as dq, encode_response, supported_api_versions,
};
use crate::server::ListenerRole;

mod consumer_fetch;
mod produce;

pub(super) use consumer_fetch::ParkedFetches;
pub(super) use produce::{ProduceEnv, Produces};

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

/// The state of the Kafka APIs the node serves: produce requests waiting for durability or
/// the high-watermark, parked consumer fetches, and each other API's own.
#[derive(Default)]
pub(super) struct State {
    /// Produce requests waiting for durability or the high-watermark (produce.rs).
    pub(super) produces: Produces,
    /// Consumer fetches waiting for committed records or their `max_wait_ms`
    /// (consumer_fetch.rs).
    pub(super) fetches: ParkedFetches,
    /// The idempotent producers' state of every partition (idempotence.rs).
    pub(super) producers: super::idempotence::Producers,
    /// This node's producer id blocks, and the blocks it proposed as controller
    /// (producer_ids.rs).
    pub(super) producer_ids: super::producer_ids::ProducerIdManager,
    pub(super) producer_id_control: super::producer_ids::ProducerIdControl,
    pub(super) topics: super::topics::Topics,
    /// The ACL image (acls.rs), read by the authorizer.
    pub(super) acl_image: super::acl_image::AclImage,
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
        let produce = self.produces.next_deadline_ms();
        let parked = self.fetches.next_deadline_ms();
        produce
            .min(parked)
            .min(self.admin.next_deadline_ms())
            .min(self.groups.next_deadline_ms())
            .min(self.delete_records.next_deadline_ms())
            .min(self.voter_changes.next_deadline_ms())
    }
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
                let response = super::idempotence::handle_init_producer_id(&r, || {
                    let mut cx = cx!(self);
                    self.handlers
                        .producer_ids
                        .claim_producer_id(&mut cx, &mut self.handlers.producer_id_control)
                });
                // It may have asked for a producer id block (producer_ids.rs).
                self.after_call()?;
                Response::InitProducerId(response)
            }
            Request::ApiVersions(_) => Response::ApiVersions(ApiVersionsResponse {
                error_code: 0,
                api_keys: served_api_versions(responder.listener()),
                ..Default::default()
            }),
            Request::Metadata(r) => {
                let mut cx = cx!(self);
                super::metadata::answer_metadata(
                    &mut cx,
                    &mut self.handlers.topics,
                    &self.offline,
                    &mut self.remote_leaders,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::ListOffsets(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let response =
                    super::metadata::handle_list_offsets(&mut cx!(self), lookup, &r, &requester);
                Response::ListOffsets(response)
            }
            Request::OffsetForLeaderEpoch(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let response =
                    super::metadata::handle_offset_for_leader_epoch(&cx!(self), lookup, &r);
                Response::OffsetForLeaderEpoch(response)
            }
            Request::DescribeQuorum(r) => {
                Response::DescribeQuorum(describe_quorum(&cx!(self), self.started_wall_ms, &r))
            }
            Request::Produce(r) => {
                let message_max_bytes = self
                    .handlers
                    .broker_configs
                    .message_max_bytes(&self.config)
                    .0;
                let mut call = self.handlers.produces.begin(responder, &header, r);
                // Each append's output is delivered before the next partition is looked at,
                // and before any answer.
                loop {
                    let mut cx = cx!(self);
                    let mut env = ProduceEnv {
                        producers: &mut self.handlers.producers,
                        stall: &mut self.stall,
                        lookup: PartitionLookup {
                            topics: &self.handlers.topics,
                            offline: &self.offline,
                        },
                        message_max_bytes,
                        shutting_down: self.shutdown_until_ms.is_some(),
                    };
                    if !call.next_partition(&mut cx, &mut env) {
                        break;
                    }
                    let delivered = self.deliver();
                    call.delivered(delivered);
                }
                let now = self.now_ms();
                let Some(id) = self.handlers.produces.finish(call, now) else {
                    return Ok(());
                };
                self.check_waiters()?;
                return self.handlers.produces.maybe_complete(&cx!(self), id);
            }
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
                Response::DescribeConfigs(super::configs::handle_describe_configs(
                    &cx!(self),
                    &self.handlers.topics,
                    &self.handlers.broker_configs,
                    &r,
                    &requester,
                ))
            }
            Request::IncrementalAlterConfigs(r) => {
                let mut cx = cx!(self);
                super::configs::handle_incremental_alter_configs(
                    &mut cx,
                    &mut self.handlers.topics,
                    &mut self.handlers.broker_configs,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::AlterConfigs(r) => {
                let mut cx = cx!(self);
                super::configs::handle_alter_configs(
                    &mut cx,
                    &mut self.handlers.topics,
                    &mut self.handlers.broker_configs,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
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
                let brokers = super::metadata::metadata_brokers(&self.config, self.metadata_raft());
                Response::DescribeCluster(super::describe_cluster::handle_describe_cluster(
                    &cx!(self),
                    &r,
                    &requester,
                    brokers,
                ))
            }
            Request::AllocateProducerIds(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .producer_id_control
                    .handle_allocate_producer_ids(
                        &mut cx,
                        &mut self.handlers.producer_ids,
                        responder,
                        &header,
                        &r,
                    )?;
                return self.after_call();
            }
            Request::Fetch(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let shutting_down = self.shutdown_until_ms.is_some();
                let mut cx = cx!(self);
                return self.handlers.fetches.consumer_fetch(
                    &mut cx,
                    lookup,
                    shutting_down,
                    responder,
                    &header,
                    r,
                    true,
                );
            }
            r @ (Request::AddRaftVoter(_)
            | Request::RemoveRaftVoter(_)
            | Request::UpdateRaftVoter(_)) => {
                let mut cx = cx!(self);
                self.handlers
                    .voter_changes
                    .handle(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeUserScramCredentials(r) => Response::DescribeUserScramCredentials(
                self.handlers
                    .credentials
                    .handle_describe_user_scram_credentials(&r),
            ),
            Request::AlterUserScramCredentials(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .credentials
                    .handle_alter_user_scram_credentials(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            r @ (Request::SaslHandshake(_) | Request::SaslAuthenticate(_)) => {
                super::scram::sasl_request_outside_the_exchange(&r)
            }
            r if super::groups::is_group_request(&r) => {
                let brokers = match r {
                    Request::FindCoordinator(_) => {
                        super::metadata::metadata_brokers(&self.config, self.metadata_raft())
                    }
                    _ => Vec::new(),
                };
                let env = super::groups::GroupsEnv {
                    topics: &self.handlers.topics,
                    message_max_bytes: self
                        .handlers
                        .broker_configs
                        .message_max_bytes(&self.config)
                        .0,
                };
                let mut cx = cx!(self);
                let call = self
                    .handlers
                    .groups
                    .handle_request(&mut cx, env, brokers, responder, header, r);
                if self.handlers.groups.take_offsets_topic_wanted()
                    && let Err(code) = self.handlers.topics.propose_offsets_topic(&mut cx!(self))
                {
                    tracing::info!(?code, "__consumer_offsets not proposed yet");
                }
                let after = self.after_call();
                return call.and(after);
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
}

// ---- DescribeQuorum ---------------------------------------------------------------------

/// DescribeQuorum of the partitions asked (`started_wall_ms`: the node clock's zero on the
/// wall clock, for the timestamps).
fn describe_quorum(
    cx: &Cx,
    started_wall_ms: u64,
    request: &describe_quorum_request::DescribeQuorumRequest,
) -> dq::DescribeQuorumResponse {
    let wall = |ms: Option<u64>| ms.map_or(-1, |ms| (started_wall_ms + ms) as i64);
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
                    let found = cx
                        .table
                        .find(&t.topic_name, p.partition_index)
                        .and_then(|id| cx.host.raft(id));
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
        nodes: quorum_nodes(cx),
        ..Default::default()
    }
}

/// DescribeQuorum v2's Nodes: every voter of the metadata quorum in force (KIP-853), with
/// the endpoints its VotersRecord gave, or its `controller.quorum.voters` address.
fn quorum_nodes(cx: &Cx) -> Vec<dq::Node> {
    let voters = cx.metadata_raft().voter_set().clone();
    voters
        .voters()
        .iter()
        .filter_map(|(&id, info)| {
            let listeners: Vec<dq::Listener> = if info.endpoints.is_empty() {
                let configured = cx.config.quorum_voters.iter().find(|v| v.node_id == id)?;
                vec![dq::Listener {
                    name: cx.config.controller_listener_name().to_string(),
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
