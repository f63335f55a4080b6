//! Replica Fetch ⇄ core messages: a leader's inbound replica Fetch as one part per partition
//! (a Fetch's own partitions, or those its KIP-227 session stands for:
//! replica_fetch_sessions.rs), the answers put back as a wire Fetch response, a follower's
//! wire Fetch to a leader (the response budget shared among its partitions, its place in the
//! fetch session) and the leader's answer as core responses. The other quorum messages
//! (Vote, BeginQuorumEpoch, EndQuorumEpoch) and what they share with these are the parent's,
//! convert.rs.

use bytes::Bytes;
use ringlog_replication as core;
use ringlog_replication::{Epoch, NodeId, OffsetAndEpoch, PartitionId};

use super::{
    HostedPartition, InboundPart, PartAnswer, PartitionTable, answer_error_code, epoch,
    error_to_core, error_to_wire, group, leader_core, leader_wire, offset,
};
use crate::protocol::wire::{Records, Uuid};
use crate::protocol::{ErrorCode, fetch_request as fetch_req, fetch_response as fetch_resp};

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
    mut next_id: impl FnMut() -> u64,
) -> Vec<InboundPart> {
    let replica_id = fetch_replica_id(request, version);
    let max_wait_ms = u64::try_from(request.max_wait_ms).unwrap_or(0);
    let mut parts = Vec::new();
    let named = request
        .topics
        .iter()
        .flat_map(|topic| topic.partitions.iter().map(move |p| (topic, p)));
    for (topic, p) in named {
        let (topic_name, topic_id) = (topic.topic.as_str(), topic.topic_id);
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

    /// Whether the Fetch names the `i`-th partition outstanding (a full Fetch names all).
    pub fn names(&self, i: usize) -> bool {
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
            let Some(id) = table.find_named(&t.topic, t.topic_id, p.partition_index) else {
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
