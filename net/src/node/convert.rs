//! The mapping between Kafka's wire messages (`crate::protocol`) and the replication core's
//! messages (`ringlog_replication::message`).
//!
//! One wire request carries many partitions (`topics[].partitions[]`); the core speaks one
//! partition at a time. Inbound, a wire request becomes one [`InboundPart`] per partition, each
//! either a core message for a hosted partition or an error code to answer with. Outbound, the
//! core's answers (or those error codes) are put back in the request's topic/partition order.
//!
//! Versions the node *sends*: the first that carry KIP-853's directory ids, so the receiver
//! can tell a voter's disk from a replacement under the same node id: Vote v1 (v2 for a
//! pre-vote), BeginQuorumEpoch v1, EndQuorumEpoch v1 and Fetch v17 (topic ids from v13,
//! ReplicaState from v15, the ReplicaDirectoryId tag from v17; Kafka 3.9's versions). Inbound,
//! every version the codec speaks is accepted; a version without directory ids gives the core
//! a zero one (none named: it matches any voter entry, as Kafka's `ReplicaKey` without a
//! directory id does). Epochs are unsigned in the core and `int32` on the wire: a negative
//! epoch in a peer request is INVALID_REQUEST, never a wrapped number.

use bytes::Bytes;
use ringlog_replication as core;
use ringlog_replication::{Epoch, NodeId, OffsetAndEpoch, PartitionId};

use crate::protocol::wire::{Records, Uuid};
use crate::protocol::{
    ErrorCode, begin_quorum_epoch_request as bqe_req, begin_quorum_epoch_response as bqe_resp,
    end_quorum_epoch_request as eqe_req, end_quorum_epoch_response as eqe_resp,
    fetch_request as fetch_req, fetch_response as fetch_resp, vote_request as vote_req,
    vote_response as vote_resp,
};

pub use crate::protocol::{METADATA_TOPIC, METADATA_TOPIC_ID};

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

/// The replica id of a Fetch request (top-level before v15, in ReplicaState from v15).
pub fn fetch_replica_id(request: &fetch_req::FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        request.replica_state.replica_id
    } else {
        request.replica_id
    }
}

/// The partitions of a replica Fetch (replica id >= 0) as core fetch requests. `next_id` hands
/// out the core correlation ids that tie each partition's answer back to this request.
pub fn replica_fetch_parts(
    request: &fetch_req::FetchRequest,
    version: i16,
    table: &PartitionTable,
    next_id: impl FnMut() -> u64,
) -> Vec<InboundPart> {
    let named = request.topics.iter().flat_map(|topic| {
        topic
            .partitions
            .iter()
            .map(move |p| (topic.topic.as_str(), topic.topic_id, p))
    });
    replica_fetch_parts_of(named, request, version, table, next_id)
}

/// [`replica_fetch_parts`] of the partitions `named` (topic name, topic id, the wire
/// partition) stand for, with `request`'s replica and wait: a Fetch's own, or those its
/// fetch session stands for (KIP-227, replica_fetch_sessions.rs).
pub fn replica_fetch_parts_of<'a>(
    named: impl Iterator<Item = (&'a str, Uuid, &'a fetch_req::FetchPartition)>,
    request: &fetch_req::FetchRequest,
    version: i16,
    table: &PartitionTable,
    mut next_id: impl FnMut() -> u64,
) -> Vec<InboundPart> {
    let replica_id = fetch_replica_id(request, version);
    let max_wait_ms = u64::try_from(request.max_wait_ms).unwrap_or(0);
    let mut parts = Vec::new();
    for (topic_name, topic_id, p) in named {
        let found = if version >= 13 {
            table.find_by_id(topic_id, p.partition)
        } else {
            table.find(topic_name, p.partition)
        };
        let target = match found {
            None => Err(ErrorCode::UnknownTopicOrPartition),
            Some(id) => (|| {
                Ok((
                    id,
                    replica_id,
                    core::Message::FetchRequest(core::FetchRequest {
                        correlation_id: next_id(),
                        replica_id,
                        current_leader_epoch: epoch(p.current_leader_epoch)?,
                        fetch_offset: offset(p.fetch_offset)?,
                        // -1 (no record fetched yet) is epoch 0 in the core.
                        last_fetched_epoch: Epoch::try_from(p.last_fetched_epoch).unwrap_or(0),
                        max_bytes: u32::try_from(p.partition_max_bytes).unwrap_or(0),
                        max_wait_ms,
                        // KIP-853 (v17+; zero before): which disk fetches.
                        replica_directory_id: p.replica_directory_id.0,
                    }),
                ))
            })(),
        };
        parts.push(InboundPart {
            topic: topic_name.to_string(),
            topic_id,
            index: p.partition,
            target,
        });
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

/// A core fetch response as one wire partition entry (records already filled in).
pub fn fetch_partition_data(index: i32, r: &core::FetchResponse) -> fetch_resp::PartitionData {
    fetch_resp::PartitionData {
        partition_index: index,
        error_code: error_to_wire(r.error_code),
        high_watermark: r.high_watermark as i64,
        last_stable_offset: r.high_watermark as i64,
        log_start_offset: r.log_start_offset as i64,
        diverging_epoch: match r.diverging_epoch {
            Some(d) => fetch_resp::EpochEndOffset {
                epoch: d.epoch as i32,
                end_offset: d.offset as i64,
            },
            None => fetch_resp::EpochEndOffset::default(),
        },
        current_leader: fetch_resp::LeaderIdAndEpoch {
            leader_id: leader_wire(r.current_leader.leader_id),
            leader_epoch: r.current_leader.leader_epoch as i32,
        },
        snapshot_id: match r.snapshot_id {
            Some(s) => fetch_resp::SnapshotId {
                end_offset: s.offset as i64,
                epoch: s.epoch as i32,
            },
            None => fetch_resp::SnapshotId::default(),
        },
        records: Some(Records::Bytes(r.records.clone())),
        ..Default::default()
    }
}

/// An error entry for a partition of a Fetch.
pub fn fetch_partition_error(index: i32, error: ErrorCode) -> fetch_resp::PartitionData {
    fetch_resp::PartitionData {
        partition_index: index,
        error_code: error.code(),
        high_watermark: -1,
        records: Some(Records::Bytes(Bytes::new())),
        ..Default::default()
    }
}

pub fn fetch_response(parts: &[InboundPart], answers: &[PartAnswer]) -> fetch_resp::FetchResponse {
    let topics = group(parts, answers, |p, a| match a {
        PartAnswer::Core(core::Message::FetchResponse(r)) => fetch_partition_data(p.index, r),
        other => fetch_partition_error(p.index, answer_error_code(other)),
    });
    fetch_resp::FetchResponse {
        responses: topics
            .into_iter()
            .map(|(head, partitions)| fetch_resp::FetchableTopicResponse {
                topic: head.topic.clone(),
                topic_id: head.topic_id,
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

/// The most bytes one replica Fetch response may carry in all (Kafka's
/// `replica.fetch.response.max.bytes` default), shared by the partitions it asks for
/// ([`partition_shares`]): well under `socket.request.max.bytes` (100 MiB by default), which
/// the follower's lane holds a response to. Each partition asked for its own `max_bytes` before
/// 2026-12-04, so a follower behind on a hundred partitions of one leader would have been sent
/// a response larger than it reads (found by reading the code, not seen in a run).
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: u32 = 10 * 1024 * 1024;

/// What each partition of one wire Fetch may ask for, in order, from `fetches` (each core's
/// `max_bytes`, and whether the partition is idle: its latest answer carried no records). The
/// idle ones share a quarter of [`REPLICA_FETCH_RESPONSE_MAX_BYTES`] and the others the rest, so
/// the whole response never exceeds it; with none idle, or all, the share is even. Shared
/// evenly by all (2026-12-04 to 2026-12-05), one busy partition among a hundred idle ones of
/// the same leader was asked for ~300 KiB a round: 85,000 records/s where it alone did
/// 236,000 (docs/benchmarks.md, "Idle partitions"). A partition that was idle and has records
/// again is still sent its first batch whole (`read_below`), and asks for its full share
/// from the next round.
fn partition_shares(fetches: &[(u32, bool)]) -> Vec<u32> {
    let limit = u64::from(REPLICA_FETCH_RESPONSE_MAX_BYTES);
    let total = fetches.len().max(1) as u64;
    let idle = fetches.iter().filter(|(_, idle)| *idle).count() as u64;
    let active = total - idle;
    let (idle_share, active_share) = if idle == 0 || active == 0 {
        (limit / total, limit / total)
    } else {
        let idle_share = limit / 4 / idle;
        (idle_share, (limit - idle_share * idle) / active)
    };
    fetches
        .iter()
        .map(|&(max_bytes, idle)| {
            let share = if idle { idle_share } else { active_share };
            u64::from(max_bytes).min(share) as u32
        })
        .collect()
}

/// One Fetch request carrying the fetches of every partition bound for one peer, each with
/// whether it is idle ([`partition_shares`]).
pub fn fetch_request(
    cluster_id: &str,
    replica_id: NodeId,
    fetches: &[(&HostedPartition, &core::FetchRequest, bool, i64)],
) -> fetch_req::FetchRequest {
    fetch_request_in_session(
        cluster_id,
        replica_id,
        fetches,
        &FetchSessionPlan::sessionless(),
    )
}

/// Where a replica Fetch stands in its fetch session with the leader (KIP-227,
/// fetch_sessions.rs): the session and epoch it names, which of the partitions outstanding
/// there it names (an incremental Fetch leaves out those whose ask the leader holds
/// unchanged; empty: all), and the partitions the leader's session should forget.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchSessionPlan {
    pub session_id: i32,
    pub session_epoch: i32,
    pub named: Vec<bool>,
    pub forgotten: Vec<(Uuid, i32)>,
}

impl FetchSessionPlan {
    /// A full Fetch outside any session (SessionId 0, SessionEpoch -1).
    pub fn sessionless() -> FetchSessionPlan {
        FetchSessionPlan {
            session_id: 0,
            session_epoch: -1,
            named: Vec::new(),
            forgotten: Vec::new(),
        }
    }

    fn names(&self, i: usize) -> bool {
        self.named.get(i).copied().unwrap_or(true)
    }

    /// KIP-227: the session epoch after `epoch`, wrapping to 1 (0 opens a session, -1 closes
    /// it), as the leader expects it and the follower sends it.
    pub fn next_epoch(epoch: i32) -> i32 {
        if epoch == i32::MAX { 1 } else { epoch + 1 }
    }
}

/// [`fetch_request`] in a session: the byte shares and the wait are those of every
/// outstanding partition (what the full Fetch would ask), the partitions named those `plan`
/// names. A partition left out has its log start unread (`-1` will do).
pub fn fetch_request_in_session(
    cluster_id: &str,
    replica_id: NodeId,
    fetches: &[(&HostedPartition, &core::FetchRequest, bool, i64)],
    plan: &FetchSessionPlan,
) -> fetch_req::FetchRequest {
    let max_wait_ms = fetches
        .iter()
        .map(|(_, f, _, _)| f.max_wait_ms)
        .min()
        .unwrap_or(0);
    let shares = partition_shares(
        &fetches
            .iter()
            .map(|(_, f, idle, _)| (f.max_bytes, *idle))
            .collect::<Vec<_>>(),
    );
    let mut topics: Vec<fetch_req::FetchTopic> = Vec::new();
    for (i, ((hosted, f, _, log_start_offset), share)) in fetches.iter().zip(shares).enumerate() {
        if !plan.names(i) {
            continue;
        }
        let partition = fetch_req::FetchPartition {
            partition: hosted.index,
            current_leader_epoch: f.current_leader_epoch as i32,
            fetch_offset: f.fetch_offset as i64,
            last_fetched_epoch: f.last_fetched_epoch as i32,
            log_start_offset: *log_start_offset,
            partition_max_bytes: i32::try_from(share).unwrap_or(i32::MAX),
            replica_directory_id: Uuid(f.replica_directory_id),
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.topic == hosted.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(fetch_req::FetchTopic {
                topic: hosted.topic.clone(),
                topic_id: hosted.topic_id,
                partitions: vec![partition],
            }),
        }
    }
    fetch_req::FetchRequest {
        cluster_id: Some(cluster_id.to_string()),
        // Before v15 at the top, from v15 in ReplicaState: both set, each version sends its own.
        replica_id,
        replica_state: fetch_req::ReplicaState {
            replica_id,
            replica_epoch: -1,
        },
        max_wait_ms: i32::try_from(max_wait_ms).unwrap_or(i32::MAX),
        min_bytes: 1,
        max_bytes: REPLICA_FETCH_RESPONSE_MAX_BYTES as i32,
        session_id: plan.session_id,
        session_epoch: plan.session_epoch,
        topics,
        forgotten_topics_data: forgotten_topics(&plan.forgotten),
        ..Default::default()
    }
}

/// Forgotten partitions grouped by topic id, in the order given.
fn forgotten_topics(forgotten: &[(Uuid, i32)]) -> Vec<fetch_req::ForgottenTopic> {
    let mut topics: Vec<fetch_req::ForgottenTopic> = Vec::new();
    for (topic_id, index) in forgotten {
        match topics.iter_mut().find(|t| t.topic_id == *topic_id) {
            Some(topic) => topic.partitions.push(*index),
            None => topics.push(fetch_req::ForgottenTopic {
                topic_id: *topic_id,
                partitions: vec![*index],
                ..Default::default()
            }),
        }
    }
    topics
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

/// The per-partition core fetch responses of a peer's Fetch response; `correlation_for` maps a
/// partition to the core correlation id of the fetch we sent for it.
pub fn peer_fetch_response_parts(
    response: &fetch_resp::FetchResponse,
    table: &PartitionTable,
    mut correlation_for: impl FnMut(PartitionId) -> Option<u64>,
) -> Vec<(PartitionId, core::Message)> {
    let mut out = Vec::new();
    for t in &response.responses {
        for p in &t.partitions {
            // v13+ name topics by id, older versions by name.
            let found = if t.topic.is_empty() {
                table.find_by_id(t.topic_id, p.partition_index)
            } else {
                table.find(&t.topic, p.partition_index)
            };
            let Some(id) = found else {
                continue;
            };
            let Some(correlation_id) = correlation_for(id) else {
                continue;
            };
            let error = if p.error_code == 0 {
                response.error_code
            } else {
                p.error_code
            };
            let records = match &p.records {
                Some(Records::Bytes(b)) => b.clone(),
                _ => Bytes::new(),
            };
            out.push((
                id,
                core::Message::FetchResponse(core::FetchResponse {
                    correlation_id,
                    error_code: error_to_core(error),
                    current_leader: leader_core(
                        p.current_leader.leader_id,
                        p.current_leader.leader_epoch,
                    ),
                    high_watermark: u64::try_from(p.high_watermark).unwrap_or(0),
                    log_start_offset: u64::try_from(p.log_start_offset).unwrap_or(0),
                    diverging_epoch: (p.diverging_epoch.epoch >= 0
                        && p.diverging_epoch.end_offset >= 0)
                        .then(|| {
                            OffsetAndEpoch::new(
                                p.diverging_epoch.end_offset as u64,
                                p.diverging_epoch.epoch as Epoch,
                            )
                        }),
                    snapshot_id: (p.snapshot_id.epoch >= 0 && p.snapshot_id.end_offset >= 0).then(
                        || {
                            OffsetAndEpoch::new(
                                p.snapshot_id.end_offset as u64,
                                p.snapshot_id.epoch as Epoch,
                            )
                        },
                    ),
                    records,
                }),
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
