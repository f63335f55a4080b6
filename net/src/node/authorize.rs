//! Which operation on which resource each client API needs when an authorizer is configured
//! (`authorizer.class.name`), in one table ([`API_ACTIONS`], Kafka's `KafkaApis` checks), and
//! the node's helpers that apply it. The rules themselves are `crate::acl::authorizer`'s.
//!
//! Two shapes of check:
//! - one resource per request (a group's JoinGroup, the cluster for the ACL APIs): refused
//!   whole before the handler runs ([`Authorizer::refuse_unauthorized`]), with the API's error on
//!   every result (GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED);
//! - one resource per item (Produce's topics, Metadata's topics, DescribeGroups' groups): the
//!   handler asks [`Authorizer::allowed`] for each item and answers that item with
//!   TOPIC_AUTHORIZATION_FAILED (or the group/cluster error) while the others proceed.
//!
//! Not subject to ACLs: requests on the controller listener (`controller.listener.names`:
//! the quorum's RPCs and admin requests another node forwarded, which that node authorized
//! first) and the quorum's own replication between nodes.

use std::sync::Arc;

use super::acl_image::AclImage;
use crate::acl::{
    AclOperation, Action, Asker, Decision, ResourceType, authorize, authorized_operations,
    binding::CLUSTER_RESOURCE_NAME,
};
use crate::protocol::{ApiKey, Request, Response};
use crate::server::ListenerRole;

/// The operation, and on which type of resource, each API needs (Kafka's `KafkaApis`). APIs
/// not listed are not checked (ApiVersions, DescribeCluster, the quorum's APIs; and, not yet,
/// OffsetForLeaderEpoch, InitProducerId, FindCoordinator, ListGroups: docs/clients.md, "ACLs
/// and the authorizer").
#[rustfmt::skip]
pub const API_ACTIONS: &[(ApiKey, ResourceType, AclOperation)] = &[
    (ApiKey::Produce,                 ResourceType::Topic,   AclOperation::Write),
    (ApiKey::Fetch,                   ResourceType::Topic,   AclOperation::Read),
    (ApiKey::ListOffsets,             ResourceType::Topic,   AclOperation::Describe),
    (ApiKey::Metadata,                ResourceType::Topic,   AclOperation::Describe),
    // CREATE on the cluster, or else on the topic (`Authorizer::allowed`).
    (ApiKey::CreateTopics,            ResourceType::Topic,   AclOperation::Create),
    (ApiKey::DeleteTopics,            ResourceType::Topic,   AclOperation::Delete),
    (ApiKey::DeleteRecords,           ResourceType::Topic,   AclOperation::Delete),
    (ApiKey::CreatePartitions,        ResourceType::Topic,   AclOperation::Alter),
    // On the topic, or on the cluster for a node's configs (`Authorizer::config_resource_allowed`).
    (ApiKey::DescribeConfigs,         ResourceType::Topic,   AclOperation::DescribeConfigs),
    (ApiKey::AlterConfigs,            ResourceType::Topic,   AclOperation::AlterConfigs),
    (ApiKey::IncrementalAlterConfigs, ResourceType::Topic,   AclOperation::AlterConfigs),
    (ApiKey::JoinGroup,               ResourceType::Group,   AclOperation::Read),
    (ApiKey::SyncGroup,               ResourceType::Group,   AclOperation::Read),
    (ApiKey::Heartbeat,               ResourceType::Group,   AclOperation::Read),
    (ApiKey::LeaveGroup,              ResourceType::Group,   AclOperation::Read),
    (ApiKey::OffsetCommit,            ResourceType::Group,   AclOperation::Read),
    (ApiKey::OffsetFetch,             ResourceType::Group,   AclOperation::Describe),
    (ApiKey::OffsetDelete,            ResourceType::Group,   AclOperation::Delete),
    (ApiKey::DescribeGroups,          ResourceType::Group,   AclOperation::Describe),
    (ApiKey::DeleteGroups,            ResourceType::Group,   AclOperation::Delete),
    (ApiKey::DescribeAcls,            ResourceType::Cluster, AclOperation::Describe),
    (ApiKey::CreateAcls,              ResourceType::Cluster, AclOperation::Alter),
    (ApiKey::DeleteAcls,              ResourceType::Cluster, AclOperation::Alter),
];

/// The table's row for `api`.
pub fn api_action(api: ApiKey) -> Option<(ResourceType, AclOperation)> {
    API_ACTIONS
        .iter()
        .find(|(key, _, _)| *key == api)
        .map(|&(_, resource_type, operation)| (resource_type, operation))
}

/// Who sent a request: its connection's principal and the client's IP, and whether it came on
/// the controller listener (not subject to ACLs, module doc).
#[derive(Debug, Clone)]
pub struct Requester {
    principal: Arc<str>,
    host: String,
    exempt: bool,
}

impl Requester {
    pub fn new(
        principal: Arc<str>,
        peer_addr: std::net::SocketAddr,
        listener: ListenerRole,
    ) -> Requester {
        Requester {
            principal,
            host: peer_addr.ip().to_string(),
            exempt: listener == ListenerRole::Controller,
        }
    }

    pub fn principal(&self) -> &str {
        &self.principal
    }

    fn asker(&self) -> Asker<'_> {
        Asker {
            principal: &self.principal,
            host: &self.host,
        }
    }
}

/// The authorization checks of one call: the node's authorizer settings and its applied ACL
/// image (acls.rs), lent by the node to the API handlers.
#[derive(Clone, Copy)]
pub(super) struct Authorizer<'a> {
    pub(super) config: &'a crate::acl::AuthorizerConfig,
    pub(super) image: &'a AclImage,
}

impl Authorizer<'_> {
    /// Decides `operation` on one resource for `requester`.
    pub(super) fn authorize_action(
        &self,
        requester: &Requester,
        resource_type: ResourceType,
        operation: AclOperation,
        resource_name: &str,
    ) -> Decision {
        if requester.exempt {
            return Decision::NoAuthorizer;
        }
        let decision = authorize(
            self.config,
            self.image.bindings(),
            requester.asker(),
            Action {
                operation,
                resource_type,
                resource_name,
            },
        );
        if !decision.allowed() {
            tracing::debug!(principal = %requester.principal, host = %requester.host, ?operation, ?resource_type, resource_name, ?decision, "not authorized");
        }
        decision
    }

    /// Whether `requester` may do what `api` does ([`API_ACTIONS`]) to the resource `name`
    /// (a topic or group name; ignored for the cluster). An API outside the table is allowed.
    pub(super) fn allowed(&self, requester: &Requester, api: ApiKey, name: &str) -> bool {
        let Some((resource_type, operation)) = api_action(api) else {
            return true;
        };
        let name = if resource_type == ResourceType::Cluster {
            CLUSTER_RESOURCE_NAME
        } else {
            name
        };
        if api == ApiKey::CreateTopics
            && self
                .authorize_action(
                    requester,
                    ResourceType::Cluster,
                    AclOperation::Create,
                    CLUSTER_RESOURCE_NAME,
                )
                .allowed()
        {
            return true;
        }
        self.authorize_action(requester, resource_type, operation, name)
            .allowed()
    }

    /// The configs APIs' check of one resource (its DescribeConfigs / AlterConfigs resource
    /// type: 2 a topic, 4 a node, whose configs are the cluster's to Kafka's authorizer): the
    /// table's operation on the topic or on the cluster, else the error that resource is
    /// answered with.
    pub(super) fn config_resource_allowed(
        &self,
        requester: &Requester,
        api: ApiKey,
        resource_type: i8,
        name: &str,
    ) -> Result<(), crate::protocol::ErrorCode> {
        let Some((_, operation)) = api_action(api) else {
            return Ok(());
        };
        let (resource_type, name, refusal) = match resource_type {
            2 => (
                ResourceType::Topic,
                name,
                crate::protocol::ErrorCode::TopicAuthorizationFailed,
            ),
            _ => (
                ResourceType::Cluster,
                CLUSTER_RESOURCE_NAME,
                crate::protocol::ErrorCode::ClusterAuthorizationFailed,
            ),
        };
        if self
            .authorize_action(requester, resource_type, operation, name)
            .allowed()
        {
            Ok(())
        } else {
            Err(refusal)
        }
    }

    /// Kafka's authorized-operations bitfield of one resource for `requester`.
    pub(super) fn authorized_operations(
        &self,
        requester: &Requester,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        let config = if requester.exempt {
            &crate::acl::AuthorizerConfig::default()
        } else {
            self.config
        };
        authorized_operations(
            config,
            self.image.bindings(),
            requester.asker(),
            resource_type,
            name,
        )
    }

    /// The answer to a request whose one resource `requester` may not touch (module doc), or
    /// `None` when it may proceed to its handler.
    pub(super) fn refuse_unauthorized(
        &self,
        requester: &Requester,
        request: &Request,
    ) -> Option<Response> {
        use crate::protocol::*;
        let group = |name: &str| !self.allowed(requester, request.api_key(), name);
        let cluster = || !self.allowed(requester, request.api_key(), CLUSTER_RESOURCE_NAME);
        let group_code = ErrorCode::GroupAuthorizationFailed.code();
        let cluster_code = ErrorCode::ClusterAuthorizationFailed.code();
        Some(match request {
            Request::JoinGroup(r) if group(&r.group_id) => Response::JoinGroup(JoinGroupResponse {
                error_code: group_code,
                member_id: r.member_id.clone(),
                ..Default::default()
            }),
            Request::SyncGroup(r) if group(&r.group_id) => Response::SyncGroup(SyncGroupResponse {
                error_code: group_code,
                ..Default::default()
            }),
            Request::Heartbeat(r) if group(&r.group_id) => Response::Heartbeat(HeartbeatResponse {
                error_code: group_code,
                ..Default::default()
            }),
            Request::LeaveGroup(r) if group(&r.group_id) => {
                Response::LeaveGroup(LeaveGroupResponse {
                    error_code: group_code,
                    ..Default::default()
                })
            }
            Request::OffsetDelete(r) if group(&r.group_id) => {
                Response::OffsetDelete(OffsetDeleteResponse {
                    error_code: group_code,
                    ..Default::default()
                })
            }
            Request::OffsetCommit(r) if group(&r.group_id) => {
                Response::OffsetCommit(OffsetCommitResponse {
                    throttle_time_ms: 0,
                    topics: r
                        .topics
                        .iter()
                        .map(|t| offset_commit_response::OffsetCommitResponseTopic {
                            name: t.name.clone(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|p| offset_commit_response::OffsetCommitResponsePartition {
                                    partition_index: p.partition_index,
                                    error_code: group_code,
                                })
                                .collect(),
                        })
                        .collect(),
                })
            }
            // One request, several groups: refused whole when any is refused (each refused
            // group named so; the others answered the same, as not attempted).
            Request::OffsetFetch(r) if offset_fetch_groups(r).iter().any(|g| group(g)) => {
                Response::OffsetFetch(OffsetFetchResponse {
                    error_code: group_code,
                    groups: r
                        .groups
                        .iter()
                        .map(|g| offset_fetch_response::OffsetFetchResponseGroup {
                            group_id: g.group_id.clone(),
                            topics: Vec::new(),
                            error_code: group_code,
                        })
                        .collect(),
                    ..Default::default()
                })
            }
            Request::DeleteGroups(r) if r.groups_names.iter().any(|g| group(g)) => {
                Response::DeleteGroups(DeleteGroupsResponse {
                    throttle_time_ms: 0,
                    results: r
                        .groups_names
                        .iter()
                        .map(|g| delete_groups_response::DeletableGroupResult {
                            group_id: g.clone(),
                            error_code: group_code,
                        })
                        .collect(),
                })
            }
            Request::DescribeAcls(_) if self.config.enabled() && cluster() => {
                Response::DescribeAcls(DescribeAclsResponse {
                    error_code: cluster_code,
                    error_message: Some("Cluster authorization failed.".into()),
                    ..Default::default()
                })
            }
            Request::CreateAcls(r) if self.config.enabled() && cluster() => {
                Response::CreateAcls(CreateAclsResponse {
                    throttle_time_ms: 0,
                    results: r
                        .creations
                        .iter()
                        .map(|_| create_acls_response::AclCreationResult {
                            error_code: cluster_code,
                            error_message: Some("Cluster authorization failed.".into()),
                        })
                        .collect(),
                })
            }
            Request::DeleteAcls(r) if self.config.enabled() && cluster() => {
                Response::DeleteAcls(DeleteAclsResponse {
                    throttle_time_ms: 0,
                    filter_results: r
                        .filters
                        .iter()
                        .map(|_| delete_acls_response::DeleteAclsFilterResult {
                            error_code: cluster_code,
                            error_message: Some("Cluster authorization failed.".into()),
                            matching_acls: Vec::new(),
                        })
                        .collect(),
                })
            }
            _ => return None,
        })
    }
}

/// The groups an OffsetFetch names: `group_id` before v8, `groups` from v8.
fn offset_fetch_groups(request: &crate::protocol::OffsetFetchRequest) -> Vec<&str> {
    if request.groups.is_empty() {
        vec![request.group_id.as_str()]
    } else {
        request.groups.iter().map(|g| g.group_id.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per API: a second row would never be read (`api_action` takes the first).
    #[test]
    fn the_table_names_each_api_once() {
        for (index, (api, _, _)) in API_ACTIONS.iter().enumerate() {
            assert!(
                !API_ACTIONS[index + 1..]
                    .iter()
                    .any(|(other, _, _)| other == api),
                "{api:?} twice"
            );
        }
        assert_eq!(
            api_action(ApiKey::Produce),
            Some((ResourceType::Topic, AclOperation::Write))
        );
        assert_eq!(api_action(ApiKey::ApiVersions), None);
    }
}
