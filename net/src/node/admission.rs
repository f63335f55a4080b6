//! Who may send the quorum's requests. Checked when a request arrives, before any part of it
//! reaches the core, so a refused request changes nothing: no epoch, vote, leader,
//! high-watermark or replica state moves, and the answer carries only the error.
//!
//! | request | refused when | error |
//! | --- | --- | --- |
//! | Vote, BeginQuorumEpoch, EndQuorumEpoch, replica Fetch (ReplicaId >= 0), replica FetchSnapshot | its ClusterId is missing or not this cluster's | INCONSISTENT_CLUSTER_ID (104) |
//! | replica Fetch, replica FetchSnapshot | its ReplicaId is neither a voter (configured, or in the metadata quorum's voter set in force, KIP-853) nor listed in `controller.quorum.observers` | INCONSISTENT_VOTER_SET (94) |
//! | replica Fetch, replica FetchSnapshot | its ReplicaId is a voter but not a replica of a partition it names (placement.rs; observers replicate every partition) | INCONSISTENT_VOTER_SET (94) |
//! | Vote, BeginQuorumEpoch, EndQuorumEpoch | a partition's candidate or leader is neither a configured voter nor in the metadata quorum's voter set in force | INCONSISTENT_VOTER_SET (94) |
//!
//! Consumer Fetch and FetchSnapshot (ReplicaId -1) are not quorum traffic and are not checked:
//! any client may read, internal topics included, as Kafka allows.
//!
//! Kafka's rules and where ours differ (`KafkaRaftClient.hasValidClusterId`):
//! - Kafka accepts a request with no ClusterId at all ("we don't enforce the cluster id if it
//!   is not provided"), for clients older than KIP-595. Every KRaft voter, ours and Kafka's,
//!   sends it, so a missing one is refused here: else a stranger would only have to leave it
//!   out.
//! - Kafka's KRaft leader accepts a Fetch from any replica id as an observer (its observers
//!   are brokers that register later). Here the observers are configured, like the voters, and
//!   an unknown id gets INCONSISTENT_VOTER_SET, the error Kafka's KIP-595 code gives a voter-only
//!   request from outside the voter set (`validateVoterOnlyRequest`, Kafka 3.x): it names the
//!   cause, a membership the two nodes disagree on. Kafka's partition replication answers an
//!   unassigned replica's fetch with UNKNOWN_LEADER_EPOCH, which would send the fetcher into
//!   retries as if the leader were merely behind.
//! - Kafka answers these errors at the top level only; here every partition entry carries the
//!   same code as well, so a node that reads per-partition errors (ours) sees it too.
//!
//! Before all of this, the listener: with a separate controller listener
//! (`controller.listener.names`), a quorum request ([`is_quorum_request`]) on the client
//! listener closes its connection before it reaches the event loop (transport.rs), which is
//! Kafka's answer to an API a listener does not expose (`Processor.parseRequestHeader`: "which
//! is not enabled"); ApiVersions on the client listener does not list those APIs.
//!
//! These checks keep a node of another cluster, or a node nobody configured, from voting,
//! fencing a leader or counting toward a high-watermark by mistake. They do not authenticate:
//! Metadata tells any client the cluster id, and a replica id is whatever the request says.
//! A controller listener speaking TLS with `ssl.client.auth=required` (docs/node.md,
//! "Listeners") admits only holders of a CA-signed certificate.

use ringlog_replication::NodeId;

use super::convert;
use crate::config::NodeConfig;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ApiKey, ErrorCode, Request, Response, begin_quorum_epoch_response as bqe_resp,
    end_quorum_epoch_response as eqe_resp, fetch_response, fetch_snapshot_response as snap_resp,
    vote_response,
};

/// The quorum's APIs, served only where [`crate::server::ListenerRole::serves_quorum`]:
/// Kafka's controller-only APIs that a node of this quorum answers. Fetch and FetchSnapshot
/// are not listed: they are client APIs too (`ringlog consume --full-state` reads a snapshot
/// topic's snapshot), served and advertised on every listener; only a replica's
/// (ReplicaId >= 0) is the quorum's ([`is_quorum_request`]).
pub(crate) const QUORUM_APIS: &[ApiKey] = &[
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::AllocateProducerIds,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
    ApiKey::UpdateRaftVoter,
];

/// Whether `request` is the quorum's: one of [`QUORUM_APIS`], or a replica's Fetch or
/// FetchSnapshot.
pub(crate) fn is_quorum_request(request: &Request, version: i16) -> bool {
    match request {
        Request::Fetch(r) => convert::fetch_replica_id(r, version) >= 0,
        Request::FetchSnapshot(r) => r.replica_id >= 0,
        other => QUORUM_APIS.contains(&other.api_key()),
    }
}

/// Why a quorum request is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refusal {
    #[error("cluster id {claimed:?} is not this cluster's")]
    ClusterId { claimed: Option<String> },
    #[error("replica {replica_id} is neither a voter nor a configured observer")]
    UnknownReplica { replica_id: NodeId },
    #[error("replica {replica_id} is not a voter")]
    NotAVoter { replica_id: NodeId },
    #[error("replica {replica_id} is not a replica of {topic}-{partition}")]
    NotAReplica {
        replica_id: NodeId,
        topic: String,
        partition: i32,
    },
}

/// A partition as a request names it: by topic name, or by topic id (Fetch v13+).
#[derive(Clone, Copy, Debug)]
pub(super) enum TopicRef<'a> {
    Name(&'a str),
    Id(Uuid),
}

impl Refusal {
    pub(super) fn error_code(&self) -> ErrorCode {
        match self {
            Refusal::ClusterId { .. } => ErrorCode::InconsistentClusterId,
            Refusal::UnknownReplica { .. }
            | Refusal::NotAVoter { .. }
            | Refusal::NotAReplica { .. } => ErrorCode::InconsistentVoterSet,
        }
    }
}

/// Checks a request against the table in the module doc. Client requests pass. `replicas`
/// gives a partition's replicas, `None` for a partition this node does not know (the request
/// is then refused per partition further on, as unknown).
#[cfg(test)]
pub(super) fn admit(
    request: &Request,
    version: i16,
    cluster_id: &str,
    config: &NodeConfig,
    replicas: &dyn Fn(TopicRef<'_>, i32) -> Option<Vec<NodeId>>,
) -> Result<(), Refusal> {
    admit_with_voters(request, version, cluster_id, config, &[], replicas)
}

/// [`admit`] with the metadata quorum's voter set in force (KIP-853: voters added since the
/// start are voters too, with or without a place in `controller.quorum.voters`).
pub(super) fn admit_with_voters(
    request: &Request,
    version: i16,
    cluster_id: &str,
    config: &NodeConfig,
    metadata_voters: &[NodeId],
    replicas: &dyn Fn(TopicRef<'_>, i32) -> Option<Vec<NodeId>>,
) -> Result<(), Refusal> {
    let (claimed, replica_id) = match request {
        Request::Vote(r) => (&r.cluster_id, None),
        Request::BeginQuorumEpoch(r) => (&r.cluster_id, None),
        Request::EndQuorumEpoch(r) => (&r.cluster_id, None),
        Request::Fetch(r) => match convert::fetch_replica_id(r, version) {
            id if id >= 0 => (&r.cluster_id, Some(id)),
            _ => return Ok(()),
        },
        Request::FetchSnapshot(r) if r.replica_id >= 0 => (&r.cluster_id, Some(r.replica_id)),
        _ => return Ok(()),
    };
    if claimed.as_deref() != Some(cluster_id) {
        return Err(Refusal::ClusterId {
            claimed: claimed.clone(),
        });
    }
    match replica_id {
        Some(replica_id)
            if !config.is_quorum_member(replica_id) && !metadata_voters.contains(&replica_id) =>
        {
            return Err(Refusal::UnknownReplica { replica_id });
        }
        // A voter replicates only the partitions placed on it; an observer every partition.
        Some(replica_id) if !config.quorum_observers.contains(&replica_id) => {
            let named: Vec<(TopicRef<'_>, i32)> = match request {
                Request::Fetch(r) => r
                    .topics
                    .iter()
                    .flat_map(|t| {
                        let topic = if version >= 13 {
                            TopicRef::Id(t.topic_id)
                        } else {
                            TopicRef::Name(&t.topic)
                        };
                        t.partitions.iter().map(move |p| (topic, p.partition))
                    })
                    .collect(),
                Request::FetchSnapshot(r) => r
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(move |p| (TopicRef::Name(&t.name), p.partition))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for (topic, partition) in named {
                if replicas(topic, partition).is_some_and(|r| !r.contains(&replica_id)) {
                    return Err(Refusal::NotAReplica {
                        replica_id,
                        topic: match topic {
                            TopicRef::Name(name) => name.to_string(),
                            TopicRef::Id(id) => format!("{id:?}"),
                        },
                        partition,
                    });
                }
            }
        }
        _ => {}
    }
    // Voter-only requests name their sender per partition. The core grants a vote whatever
    // its own log says of the candidate (KIP-853: the candidate's voter set decides whether
    // the vote counts), and a Vote or BeginQuorumEpoch in a newer epoch moves the receiver
    // to it: from a node that is no configured voter that would only unseat a leader.
    let senders: Vec<NodeId> = match request {
        Request::Vote(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.replica_id))
            .collect(),
        Request::BeginQuorumEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.leader_id))
            .collect(),
        Request::EndQuorumEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.leader_id))
            .collect(),
        _ => Vec::new(),
    };
    let voter = |id: NodeId| {
        config.quorum_voters.iter().any(|v| v.node_id == id) || metadata_voters.contains(&id)
    };
    match senders.into_iter().find(|id| !voter(*id)) {
        Some(replica_id) => Err(Refusal::NotAVoter { replica_id }),
        None => Ok(()),
    }
}

/// The answer to a refused request: `code` at the top level and in every partition the
/// request named (leader unknown, no records). `None` for a request [`admit`] never refuses.
pub(super) fn refused_response(request: &Request, code: ErrorCode) -> Option<Response> {
    let error_code = code.code();
    Some(match request {
        Request::Vote(r) => Response::Vote(vote_response::VoteResponse {
            error_code,
            topics: r
                .topics
                .iter()
                .map(|t| vote_response::TopicData {
                    topic_name: t.topic_name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| vote_response::PartitionData {
                            partition_index: p.partition_index,
                            error_code,
                            leader_id: -1,
                            leader_epoch: -1,
                            vote_granted: false,
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        }),
        Request::BeginQuorumEpoch(r) => {
            Response::BeginQuorumEpoch(bqe_resp::BeginQuorumEpochResponse {
                error_code,
                topics: r
                    .topics
                    .iter()
                    .map(|t| bqe_resp::TopicData {
                        topic_name: t.topic_name.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| bqe_resp::PartitionData {
                                partition_index: p.partition_index,
                                error_code,
                                leader_id: -1,
                                leader_epoch: -1,
                            })
                            .collect(),
                    })
                    .collect(),
                ..Default::default()
            })
        }
        Request::EndQuorumEpoch(r) => Response::EndQuorumEpoch(eqe_resp::EndQuorumEpochResponse {
            error_code,
            topics: r
                .topics
                .iter()
                .map(|t| eqe_resp::TopicData {
                    topic_name: t.topic_name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| eqe_resp::PartitionData {
                            partition_index: p.partition_index,
                            error_code,
                            leader_id: -1,
                            leader_epoch: -1,
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        }),
        Request::Fetch(r) => Response::Fetch(fetch_response::FetchResponse {
            error_code,
            responses: r
                .topics
                .iter()
                .map(|t| fetch_response::FetchableTopicResponse {
                    topic: t.topic.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| convert::fetch_partition_error(p.partition, code))
                        .collect(),
                })
                .collect(),
            ..Default::default()
        }),
        Request::FetchSnapshot(r) => Response::FetchSnapshot(snap_resp::FetchSnapshotResponse {
            error_code,
            topics: r
                .topics
                .iter()
                .map(|t| snap_resp::TopicSnapshot {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| snap_resp::PartitionSnapshot {
                            index: p.partition,
                            error_code,
                            ..Default::default()
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        }),
        _ => return None,
    })
}

/// Refusals are logged as a warning at most once per [`RefusalLog::WARN_EVERY_MS`] (with how
/// many were only logged at debug level since), so a misconfigured or hostile peer that keeps
/// asking cannot flood the log.
#[derive(Debug, Default)]
pub(super) struct RefusalLog {
    last_warning_ms: Option<u64>,
    quiet_since_warning: u64,
}

impl RefusalLog {
    const WARN_EVERY_MS: u64 = 10_000;

    pub(super) fn note(&mut self, now_ms: u64, api: ApiKey, refusal: &Refusal) {
        let due = self
            .last_warning_ms
            .is_none_or(|last| now_ms.saturating_sub(last) >= Self::WARN_EVERY_MS);
        if due {
            tracing::warn!(
                ?api,
                %refusal,
                refused_quietly_since_last_warning = self.quiet_since_warning,
                "quorum request refused"
            );
            self.last_warning_ms = Some(now_ms);
            self.quiet_since_warning = 0;
        } else {
            tracing::debug!(?api, %refusal, "quorum request refused");
            self.quiet_since_warning += 1;
        }
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
