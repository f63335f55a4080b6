//! The mapping between Kafka's wire messages (`crate::protocol`) and the replication core's
//! messages (`ringlog_replication::message`).
//!
//! One wire request carries many partitions (`topics[].partitions[]`); the core speaks one
//! partition at a time. Inbound, a wire request becomes one [`InboundPart`] per partition, each
//! either a core message for a hosted partition or an error code to answer with. Outbound, the
//! core's answers (or those error codes) are put back in the request's topic/partition order.
//! This file holds what every quorum message shares and Vote, BeginQuorumEpoch and
//! EndQuorumEpoch; replica Fetch, the one that carries records and fetch sessions, is
//! `convert/fetch.rs` (its functions re-exported here).
//!
//! Versions the node *sends*: the first that carry KIP-853's directory ids, so the receiver
//! can tell a voter's disk from a replacement under the same node id: Vote v1 (v2 for a
//! pre-vote), BeginQuorumEpoch v1, EndQuorumEpoch v1 and Fetch v17 (topic ids from v13,
//! ReplicaState from v15, the ReplicaDirectoryId tag from v17; Kafka 3.9's versions). Inbound,
//! every version the codec speaks is accepted; a version without directory ids gives the core
//! a zero one (none named: it matches any voter entry, as Kafka's `ReplicaKey` without a
//! directory id does). Epochs are unsigned in the core and `int32` on the wire: a negative
//! epoch in a peer request is INVALID_REQUEST, never a wrapped number.

use ringlog_replication as core;
use ringlog_replication::{Epoch, NodeId, PartitionId};

use crate::protocol::wire::Uuid;
use crate::protocol::{
    ErrorCode, begin_quorum_epoch_request as bqe_req, begin_quorum_epoch_response as bqe_resp,
    end_quorum_epoch_request as eqe_req, end_quorum_epoch_response as eqe_resp,
    vote_request as vote_req, vote_response as vote_resp,
};

pub use crate::protocol::{METADATA_TOPIC, METADATA_TOPIC_ID};

mod fetch;
pub use fetch::{
    FetchSessionPlan, REPLICA_FETCH_RESPONSE_MAX_BYTES, fetch_partition_data,
    fetch_partition_error, fetch_replica_id, fetch_request, fetch_request_in_session,
    fetch_response, peer_fetch_response_parts, replica_fetch_parts,
};

/// Wire versions the node uses for the requests it sends to peers.
pub const VOTE_VERSION: i16 = 1;
/// KIP-996: the PreVote field exists from Vote v2 on.
pub const PRE_VOTE_VERSION: i16 = 2;
pub const BEGIN_QUORUM_EPOCH_VERSION: i16 = 1;
pub const END_QUORUM_EPOCH_VERSION: i16 = 1;
pub const PEER_FETCH_VERSION: i16 = 17;

pub use super::partition_table::{HostedPartition, PartitionTable};

/// One partition of an inbound wire request.
#[derive(Clone, Debug, PartialEq)]
pub struct InboundPart {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    /// The core message for a hosted partition (and its sender), or the error to answer with.
    pub target: Result<(PartitionId, NodeId, core::Message), ErrorCode>,
}

fn epoch(value: i32) -> Result<Epoch, ErrorCode> {
    Epoch::try_from(value).map_err(|_| ErrorCode::InvalidRequest)
}

fn offset(value: i64) -> Result<u64, ErrorCode> {
    u64::try_from(value).map_err(|_| ErrorCode::InvalidRequest)
}

fn leader_wire(leader: Option<NodeId>) -> i32 {
    leader.unwrap_or(-1)
}

fn leader_core(leader_id: i32, leader_epoch: i32) -> core::LeaderIdAndEpoch {
    core::LeaderIdAndEpoch {
        leader_id: (leader_id >= 0).then_some(leader_id),
        leader_epoch: Epoch::try_from(leader_epoch).unwrap_or(0),
    }
}

/// A core error code as a wire error code (same numbers).
pub fn error_to_wire(code: core::ErrorCode) -> i16 {
    code.code()
}

/// A wire error code as a core error code; numbers the core does not know become
/// UNKNOWN_SERVER_ERROR (the core then treats the response as failed).
pub fn error_to_core(code: i16) -> core::ErrorCode {
    core::ErrorCode::from_code(code).unwrap_or(core::ErrorCode::UnknownServerError)
}

fn part(
    table: &PartitionTable,
    topic: &str,
    index: i32,
    build: impl FnOnce() -> Result<(NodeId, core::Message), ErrorCode>,
) -> InboundPart {
    let target = match table.find(topic, index) {
        None => Err(ErrorCode::UnknownTopicOrPartition),
        Some(id) => build().map(|(from, message)| (id, from, message)),
    };
    InboundPart {
        topic: topic.to_string(),
        topic_id: Uuid::ZERO,
        index,
        target,
    }
}

// ---- inbound requests -------------------------------------------------------------------

/// KIP-853 `VoterId` (Vote and BeginQuorumEpoch v1+): the replica the sender means. A request
/// meant for another node id is refused with INVALID_VOTER_KEY before it reaches the core, so
/// it grants nothing and moves no epoch (Kafka's `isValidVoterKey`; -1, v0's default, names
/// nobody and passes). The directory id beside it is the core's check (docs/raft.md).
fn check_voter_id(voter_id: i32, local_id: NodeId) -> Result<(), ErrorCode> {
    if voter_id >= 0 && voter_id != local_id {
        Err(ErrorCode::InvalidVoterKey)
    } else {
        Ok(())
    }
}

pub fn vote_request_parts(
    request: &vote_req::VoteRequest,
    table: &PartitionTable,
    local_id: NodeId,
) -> Vec<InboundPart> {
    let mut parts = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            parts.push(part(table, &topic.topic_name, p.partition_index, || {
                check_voter_id(request.voter_id, local_id)?;
                Ok((
                    p.replica_id,
                    core::Message::VoteRequest(core::VoteRequest {
                        candidate_epoch: epoch(p.replica_epoch)?,
                        candidate_id: p.replica_id,
                        last_offset_epoch: epoch(p.last_offset_epoch)?,
                        last_offset: offset(p.last_offset)?,
                        // KIP-996: answered without binding us (replication/src/raft/pre_vote.rs).
                        pre_vote: p.pre_vote,
                        candidate_directory_id: p.replica_directory_id.0,
                        voter_directory_id: p.voter_directory_id.0,
                    }),
                ))
            }));
        }
    }
    parts
}

pub fn begin_quorum_epoch_request_parts(
    request: &bqe_req::BeginQuorumEpochRequest,
    table: &PartitionTable,
    local_id: NodeId,
) -> Vec<InboundPart> {
    let mut parts = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            parts.push(part(table, &topic.topic_name, p.partition_index, || {
                check_voter_id(request.voter_id, local_id)?;
                Ok((
                    p.leader_id,
                    core::Message::BeginQuorumEpochRequest(core::BeginQuorumEpochRequest {
                        leader_id: p.leader_id,
                        leader_epoch: epoch(p.leader_epoch)?,
                        voter_directory_id: p.voter_directory_id.0,
                    }),
                ))
            }));
        }
    }
    parts
}

pub fn end_quorum_epoch_request_parts(
    request: &eqe_req::EndQuorumEpochRequest,
    table: &PartitionTable,
) -> Vec<InboundPart> {
    let mut parts = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            parts.push(part(table, &topic.topic_name, p.partition_index, || {
                // v0 names ids only (no directory id: any disk), v1 ids with their disks.
                let mut preferred_successors = p.preferred_successors.clone();
                let mut preferred_successor_directory_ids =
                    vec![[0; 16]; p.preferred_successors.len()];
                for candidate in &p.preferred_candidates {
                    preferred_successors.push(candidate.candidate_id);
                    preferred_successor_directory_ids.push(candidate.candidate_directory_id.0);
                }
                Ok((
                    p.leader_id,
                    core::Message::EndQuorumEpochRequest(core::EndQuorumEpochRequest {
                        leader_id: p.leader_id,
                        leader_epoch: epoch(p.leader_epoch)?,
                        preferred_successors,
                        preferred_successor_directory_ids,
                    }),
                ))
            }));
        }
    }
    parts
}

// ---- outbound responses -----------------------------------------------------------------

/// One partition's answer: the core's response message, or an error code.
#[derive(Clone, Debug)]
pub enum PartAnswer {
    Core(core::Message),
    Error(ErrorCode),
}

/// Groups answers by topic in request order (consecutive parts of the same topic share one
/// topic entry, as they arrived).
fn group<'a, T>(
    parts: &'a [InboundPart],
    answers: &'a [PartAnswer],
    mut make: impl FnMut(&'a InboundPart, &'a PartAnswer) -> T,
) -> Vec<(&'a InboundPart, Vec<T>)> {
    let mut out: Vec<(&InboundPart, Vec<T>)> = Vec::new();
    for (p, a) in parts.iter().zip(answers) {
        let item = make(p, a);
        match out.last_mut() {
            Some((head, items)) if head.topic == p.topic && head.topic_id == p.topic_id => {
                items.push(item)
            }
            _ => out.push((p, vec![item])),
        }
    }
    out
}

pub fn vote_response(parts: &[InboundPart], answers: &[PartAnswer]) -> vote_resp::VoteResponse {
    let topics = group(parts, answers, |p, a| match a {
        PartAnswer::Core(core::Message::VoteResponse(r)) => vote_resp::PartitionData {
            partition_index: p.index,
            error_code: error_to_wire(r.error_code),
            leader_id: leader_wire(r.current_leader.leader_id),
            leader_epoch: r.current_leader.leader_epoch as i32,
            vote_granted: r.vote_granted,
        },
        other => vote_resp::PartitionData {
            partition_index: p.index,
            error_code: answer_error(other),
            leader_id: -1,
            leader_epoch: -1,
            vote_granted: false,
        },
    });
    vote_resp::VoteResponse {
        topics: topics
            .into_iter()
            .map(|(head, partitions)| vote_resp::TopicData {
                topic_name: head.topic.clone(),
                partitions,
            })
            .collect(),
        ..Default::default()
    }
}

pub fn begin_quorum_epoch_response(
    parts: &[InboundPart],
    answers: &[PartAnswer],
) -> bqe_resp::BeginQuorumEpochResponse {
    let topics = group(parts, answers, |p, a| match a {
        PartAnswer::Core(core::Message::BeginQuorumEpochResponse(r)) => bqe_resp::PartitionData {
            partition_index: p.index,
            error_code: error_to_wire(r.error_code),
            leader_id: leader_wire(r.current_leader.leader_id),
            leader_epoch: r.current_leader.leader_epoch as i32,
        },
        other => bqe_resp::PartitionData {
            partition_index: p.index,
            error_code: answer_error(other),
            leader_id: -1,
            leader_epoch: -1,
        },
    });
    bqe_resp::BeginQuorumEpochResponse {
        topics: topics
            .into_iter()
            .map(|(head, partitions)| bqe_resp::TopicData {
                topic_name: head.topic.clone(),
                partitions,
            })
            .collect(),
        ..Default::default()
    }
}

pub fn end_quorum_epoch_response(
    parts: &[InboundPart],
    answers: &[PartAnswer],
) -> eqe_resp::EndQuorumEpochResponse {
    let topics = group(parts, answers, |p, a| match a {
        PartAnswer::Core(core::Message::EndQuorumEpochResponse(r)) => eqe_resp::PartitionData {
            partition_index: p.index,
            error_code: error_to_wire(r.error_code),
            leader_id: leader_wire(r.current_leader.leader_id),
            leader_epoch: r.current_leader.leader_epoch as i32,
        },
        other => eqe_resp::PartitionData {
            partition_index: p.index,
            error_code: answer_error(other),
            leader_id: -1,
            leader_epoch: -1,
        },
    });
    eqe_resp::EndQuorumEpochResponse {
        topics: topics
            .into_iter()
            .map(|(head, partitions)| eqe_resp::TopicData {
                topic_name: head.topic.clone(),
                partitions,
            })
            .collect(),
        ..Default::default()
    }
}

fn answer_error_code(answer: &PartAnswer) -> ErrorCode {
    match answer {
        PartAnswer::Error(e) => *e,
        // A core answer of the wrong kind is a node bug; answer it as a server error.
        PartAnswer::Core(_) => ErrorCode::UnknownServerError,
    }
}

fn answer_error(answer: &PartAnswer) -> i16 {
    answer_error_code(answer).code()
}

// ---- outbound requests (to peers) and their responses -----------------------------------

/// A core request for one partition as a single-partition wire request (Vote,
/// BeginQuorumEpoch, EndQuorumEpoch). Fetches go through [`fetch_request`], which batches.
/// A core request for peer `to` as a wire request and the version to send it at. Vote and
/// BeginQuorumEpoch name `to` as their `VoterId` (KIP-853), which the receiver checks.
pub fn peer_request(
    cluster_id: &str,
    hosted: &HostedPartition,
    message: &core::Message,
    to: NodeId,
) -> Option<(crate::protocol::Request, i16)> {
    use crate::protocol::Request;
    Some(match message {
        core::Message::VoteRequest(r) => (
            Request::Vote(vote_req::VoteRequest {
                cluster_id: Some(cluster_id.to_string()),
                voter_id: to,
                topics: vec![vote_req::TopicData {
                    topic_name: hosted.topic.clone(),
                    partitions: vec![vote_req::PartitionData {
                        partition_index: hosted.index,
                        replica_epoch: r.candidate_epoch as i32,
                        replica_id: r.candidate_id,
                        last_offset_epoch: r.last_offset_epoch as i32,
                        last_offset: r.last_offset as i64,
                        pre_vote: r.pre_vote,
                        replica_directory_id: Uuid(r.candidate_directory_id),
                        voter_directory_id: Uuid(r.voter_directory_id),
                    }],
                }],
            }),
            if r.pre_vote {
                PRE_VOTE_VERSION
            } else {
                VOTE_VERSION
            },
        ),
        core::Message::BeginQuorumEpochRequest(r) => (
            Request::BeginQuorumEpoch(bqe_req::BeginQuorumEpochRequest {
                cluster_id: Some(cluster_id.to_string()),
                voter_id: to,
                topics: vec![bqe_req::TopicData {
                    topic_name: hosted.topic.clone(),
                    partitions: vec![bqe_req::PartitionData {
                        partition_index: hosted.index,
                        leader_id: r.leader_id,
                        leader_epoch: r.leader_epoch as i32,
                        voter_directory_id: Uuid(r.voter_directory_id),
                    }],
                }],
                ..Default::default()
            }),
            BEGIN_QUORUM_EPOCH_VERSION,
        ),
        core::Message::EndQuorumEpochRequest(r) => (
            Request::EndQuorumEpoch(eqe_req::EndQuorumEpochRequest {
                cluster_id: Some(cluster_id.to_string()),
                topics: vec![eqe_req::TopicData {
                    topic_name: hosted.topic.clone(),
                    partitions: vec![eqe_req::PartitionData {
                        partition_index: hosted.index,
                        leader_id: r.leader_id,
                        leader_epoch: r.leader_epoch as i32,
                        preferred_successors: r.preferred_successors.clone(),
                        preferred_candidates: r
                            .preferred_successors
                            .iter()
                            .enumerate()
                            .map(|(i, &candidate_id)| eqe_req::ReplicaInfo {
                                candidate_id,
                                candidate_directory_id: Uuid(
                                    r.preferred_successor_directory_ids
                                        .get(i)
                                        .copied()
                                        .unwrap_or([0; 16]),
                                ),
                            })
                            .collect(),
                    }],
                }],
                ..Default::default()
            }),
            END_QUORUM_EPOCH_VERSION,
        ),
        _ => return None,
    })
}

/// What the core is told of a Vote, BeginQuorumEpoch or EndQuorumEpoch its peer's lane lost
/// (`QuorumRpc::peer_failed`): BROKER_NOT_AVAILABLE, naming no leader (epoch 0 is never news).
pub fn lost_quorum_request_answer(api: crate::protocol::ApiKey) -> core::Message {
    use crate::protocol::ApiKey;
    let error_code = core::ErrorCode::BrokerNotAvailable;
    let current_leader = core::LeaderIdAndEpoch {
        leader_id: None,
        leader_epoch: 0,
    };
    match api {
        ApiKey::Vote => core::Message::VoteResponse(core::VoteResponse {
            error_code,
            current_leader,
            vote_granted: false,
        }),
        ApiKey::BeginQuorumEpoch => {
            core::Message::BeginQuorumEpochResponse(core::BeginQuorumEpochResponse {
                error_code,
                current_leader,
            })
        }
        _ => core::Message::EndQuorumEpochResponse(core::EndQuorumEpochResponse {
            error_code,
            current_leader,
        }),
    }
}

/// The per-partition core responses in a peer's wire response. Partitions not hosted here are
/// skipped (a response can only name what we asked for).
pub fn peer_response_parts(
    response: &crate::protocol::Response,
    table: &PartitionTable,
) -> Vec<(PartitionId, core::Message)> {
    use crate::protocol::Response;
    let mut out = Vec::new();
    match response {
        Response::Vote(r) => {
            for t in &r.topics {
                for p in &t.partitions {
                    if let Some(id) = table.find(&t.topic_name, p.partition_index) {
                        let error = if p.error_code == 0 {
                            r.error_code
                        } else {
                            p.error_code
                        };
                        out.push((
                            id,
                            core::Message::VoteResponse(core::VoteResponse {
                                error_code: error_to_core(error),
                                current_leader: leader_core(p.leader_id, p.leader_epoch),
                                vote_granted: p.vote_granted,
                            }),
                        ));
                    }
                }
            }
        }
        Response::BeginQuorumEpoch(r) => {
            for t in &r.topics {
                for p in &t.partitions {
                    if let Some(id) = table.find(&t.topic_name, p.partition_index) {
                        let error = if p.error_code == 0 {
                            r.error_code
                        } else {
                            p.error_code
                        };
                        out.push((
                            id,
                            core::Message::BeginQuorumEpochResponse(
                                core::BeginQuorumEpochResponse {
                                    error_code: error_to_core(error),
                                    current_leader: leader_core(p.leader_id, p.leader_epoch),
                                },
                            ),
                        ));
                    }
                }
            }
        }
        Response::EndQuorumEpoch(r) => {
            for t in &r.topics {
                for p in &t.partitions {
                    if let Some(id) = table.find(&t.topic_name, p.partition_index) {
                        let error = if p.error_code == 0 {
                            r.error_code
                        } else {
                            p.error_code
                        };
                        out.push((
                            id,
                            core::Message::EndQuorumEpochResponse(core::EndQuorumEpochResponse {
                                error_code: error_to_core(error),
                                current_leader: leader_core(p.leader_id, p.leader_epoch),
                            }),
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
