//! Client requests the node answers itself (not through the quorum's request/response pairs):
//! the dispatch of every client request, ApiVersions, DescribeQuorum, Produce (with acks 0, 1
//! and all, produce.rs) and consumer Fetch (replica id -1, read up to the high-watermark,
//! long-polled until it moves, consumer_fetch.rs).

use ringlog_replication as core;

use super::context::Cx;
use crate::protocol::ApiKey;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ErrorCode, describe_quorum_request, describe_quorum_response as dq, supported_api_versions,
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
    /// Preferred leaders kept (leader_balance.rs).
    pub(super) leader_balance: super::leader_balance::LeaderBalance,
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

// ---- DescribeQuorum ---------------------------------------------------------------------

/// DescribeQuorum of the partitions asked (`started_wall_ms`: the node clock's zero on the
/// wall clock, for the timestamps).
pub(super) fn describe_quorum(
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
