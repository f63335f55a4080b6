//! Leaders of partitions this node is not a replica of. A voter runs only the partitions it is
//! a replica of (placement.rs), yet Kafka clients ask any broker for Metadata and expect every
//! partition's leader in the answer. Such a node learns a leader on demand: Metadata answers
//! from what it last learned and, when that is older than [`FRESH_MS`] (or unknown), asks one
//! of the partition's replicas with DescribeQuorum (the leader answers with its voters' end
//! offsets, a follower with NOT_LEADER_OR_FOLLOWER and the leader it follows). The answer
//! arrives within a round trip, so the client's next Metadata (clients refresh after
//! LEADER_NOT_AVAILABLE or NOT_LEADER_OR_FOLLOWER) sees it. Why on demand rather than
//! published in the metadata log: docs/design.md, "Replication factor".
//!
//! | what the node knows of the partition | Metadata answers |
//! | --- | --- |
//! | nothing yet | LEADER_NOT_AVAILABLE, leader -1 (a lookup leaves) |
//! | a leader and epoch from a replica | that leader and epoch, ISR as the leader reported it (or the replicas when a follower answered) |
//!
//! A Metadata whose answer would say LEADER_NOT_AVAILABLE for a partition whose lookup just left
//! waits for that lookup (parked, [`METADATA_WAIT_MS`] at most) and is answered once it ended,
//! with what it learned: a client's first Metadata after a topic's creation names every leader
//! a replica knows, as a Kafka broker's does. Admin clients act on the first answer (librdkafka's
//! DeleteRecords fails a partition answered LEADER_NOT_AVAILABLE instead of asking again).
//! Only the lookups the request itself needs are waited for, and the request is answered even
//! if they fail (a dead replica), never parked twice.
//!
//! Produce, Fetch, ListOffsets and OffsetForLeaderEpoch for such a partition are answered
//! NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata and goes to the leader.

use std::collections::BTreeMap;

use ringlog_replication::NodeId;

use super::PeerPending;
use super::context::Cx;
use super::topics::TopicRecord;
use super::transport::Responder;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ErrorCode, Request, RequestHeader, Response, describe_quorum_request as dq_req,
    describe_quorum_response as dq_resp, metadata_request as md_req, metadata_response as md_resp,
};

/// How long a learned leader is answered without asking again.
const FRESH_MS: u64 = 200;
/// The DescribeQuorum version a lookup sends (every version carries what a lookup reads).
const DESCRIBE_QUORUM_VERSION: i16 = 1;

/// The longest a Metadata waits for the leader lookups it started (one round trip to a
/// replica normally; a replica that does not answer must not hold the client long).
const METADATA_WAIT_MS: u64 = 500;

/// What this node knows of the leaders of partitions it does not run.
#[derive(Debug, Default)]
pub(super) struct RemoteLeaders {
    known: BTreeMap<(String, i32), RemoteLeader>,
    /// Lookups to send once the current request is answered, by the replica to ask.
    queued: BTreeMap<NodeId, Vec<(String, i32)>>,
    /// Metadata requests waiting for lookups (module doc).
    parked: Vec<ParkedMetadata>,
}

#[derive(Debug)]
pub(super) struct ParkedMetadata {
    pub(super) responder: Responder,
    pub(super) correlation_id: i32,
    pub(super) version: i16,
    pub(super) request: md_req::MetadataRequest,
    /// The partitions it answered LEADER_NOT_AVAILABLE whose lookups were in flight.
    waiting: Vec<(String, i32)>,
    deadline_ms: u64,
}

#[derive(Debug, Default)]
struct RemoteLeader {
    topic_id: Uuid,
    /// (leader, epoch) from the latest answer that named one.
    leader: Option<(NodeId, i32)>,
    /// In-sync replicas as the leader last reported them.
    isr: Option<Vec<NodeId>>,
    learned_ms: Option<u64>,
    /// When the lookup in flight left (at most one per partition).
    asked_ms: Option<u64>,
    /// Lookups sent, to ask the replicas in turn while none names a leader.
    asks: usize,
}

/// A partition's replicas as the metadata image places it (the voters for
/// `__cluster_metadata-0`: the configured voters and the voter set in force); `None` for a
/// partition the image does not have.
pub(super) fn partition_replicas(
    image: &BTreeMap<String, TopicRecord>,
    configured_voters: &[NodeId],
    metadata_voters: &[NodeId],
    topic: super::admission::TopicRef<'_>,
    index: i32,
) -> Option<Vec<NodeId>> {
    use super::admission::TopicRef;
    let record = match topic {
        // The metadata quorum: the configured voters and the voter set in force (KIP-853: an
        // added voter replicates it; a removed one keeps fetching as an observer until its own
        // log tells it).
        TopicRef::Name(name) if name == super::convert::METADATA_TOPIC => {
            return (index == 0).then(|| {
                let mut nodes = configured_voters.to_vec();
                nodes.extend_from_slice(metadata_voters);
                nodes.sort_unstable();
                nodes.dedup();
                nodes
            });
        }
        TopicRef::Name(name) => image.get(name),
        TopicRef::Id(id) => image.values().find(|t| t.topic_id == id),
    }?;
    (0..record.partitions)
        .contains(&index)
        .then(|| record.replicas_of(index, configured_voters))
}

impl RemoteLeaders {
    /// Queues the lookups the last Metadata answers asked for: one DescribeQuorum per replica
    /// asked (sent by the node when the call returns).
    pub(super) fn send_lookups(&mut self, cx: &mut Cx) {
        let queued = std::mem::take(&mut self.queued);
        for (target, partitions) in queued {
            let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (topic, index) in &partitions {
                topics.entry(topic.clone()).or_default().push(*index);
            }
            let request = dq_req::DescribeQuorumRequest {
                topics: topics
                    .into_iter()
                    .map(|(topic_name, indexes)| dq_req::TopicData {
                        topic_name,
                        partitions: indexes
                            .into_iter()
                            .map(|partition_index| dq_req::PartitionData { partition_index })
                            .collect(),
                    })
                    .collect(),
            };
            cx.send_to_peer(
                target,
                Request::DescribeQuorum(request),
                DESCRIBE_QUORUM_VERSION,
                PeerPending::LeaderLookup(partitions),
                false,
            );
        }
    }

    /// A replica's DescribeQuorum answer: each partition's leader (and, from the leader, its
    /// in-sync replicas) is learned; the lookup is no longer in flight.
    pub(super) fn learn(&mut self, response: &Response, now: u64) {
        let Response::DescribeQuorum(response) = response else {
            return;
        };
        for topic in &response.topics {
            for p in &topic.partitions {
                let key = (topic.topic_name.clone(), p.partition_index);
                let Some(entry) = self.known.get_mut(&key) else {
                    continue;
                };
                entry.asked_ms = None;
                if p.leader_id < 0 {
                    continue;
                }
                // Never back to an older epoch: answers to two lookups may cross.
                if entry
                    .leader
                    .is_some_and(|(_, epoch)| epoch > p.leader_epoch)
                {
                    continue;
                }
                let changed = entry.leader != Some((p.leader_id, p.leader_epoch));
                entry.leader = Some((p.leader_id, p.leader_epoch));
                entry.learned_ms = Some(now);
                if p.error_code == ErrorCode::None.code() {
                    entry.isr = Some(in_sync_replicas(p));
                } else if changed {
                    entry.isr = None;
                }
            }
        }
    }

    /// A lookup answered or lost (the peer's connection failed): the partitions may be asked
    /// again (of the next replica, if no leader was learned) by the next Metadata.
    pub(super) fn lookup_ended(&mut self, partitions: &[(String, i32)]) {
        for key in partitions {
            if let Some(entry) = self.known.get_mut(key) {
                entry.asked_ms = None;
            }
        }
    }

    pub(super) fn lookup_in_flight(&self, key: &(String, i32)) -> bool {
        self.known
            .get(key)
            .is_some_and(|entry| entry.asked_ms.is_some())
    }

    /// Parks a Metadata request while the lookups of `waiting` are in flight (module doc).
    pub(super) fn park(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        request: md_req::MetadataRequest,
        waiting: Vec<(String, i32)>,
        now: u64,
    ) {
        self.parked.push(ParkedMetadata {
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
            request,
            waiting,
            deadline_ms: now + METADATA_WAIT_MS,
        });
    }

    /// The parked Metadata requests whose lookups ended or whose wait is over, to be answered
    /// with what the node knows now.
    pub(super) fn take_ready(&mut self, now: u64) -> Vec<ParkedMetadata> {
        let parked = std::mem::take(&mut self.parked);
        let (ready, waiting): (Vec<_>, Vec<_>) = parked.into_iter().partition(|entry| {
            entry.deadline_ms <= now || !entry.waiting.iter().any(|key| self.lookup_in_flight(key))
        });
        self.parked = waiting;
        ready
    }

    /// When the loop must look at the parked Metadata requests again at the latest.
    pub(super) fn parked_deadline_ms(&self) -> Option<u64> {
        self.parked.iter().map(|p| p.deadline_ms).min()
    }

    /// Forgets what was learned of a deleted topic's partitions.
    pub(super) fn forget(&mut self, topic: &str) {
        self.known.retain(|(name, _), _| name != topic);
    }
}

impl RemoteLeaders {
    /// The Metadata entry of partition `index` of `topic`, which this node does not run: what
    /// it last learned, and a lookup queued when that is stale ([`RemoteLeaders::send_lookups`]
    /// sends it; one in flight for less than `request_timeout_ms` is not repeated).
    pub(super) fn partition_metadata(
        &mut self,
        now: u64,
        request_timeout_ms: u64,
        topic: &TopicRecord,
        index: i32,
        replicas: Vec<NodeId>,
    ) -> md_resp::MetadataResponsePartition {
        let key = (topic.name.clone(), index);
        let entry = self.known.entry(key.clone()).or_default();
        if entry.topic_id != topic.topic_id {
            // A new topic under the name: nothing learned of the old one holds.
            *entry = RemoteLeader {
                topic_id: topic.topic_id,
                ..RemoteLeader::default()
            };
        }
        let stale = entry
            .learned_ms
            .is_none_or(|learned| now.saturating_sub(learned) >= FRESH_MS);
        let in_flight = entry
            .asked_ms
            .is_some_and(|asked| now.saturating_sub(asked) < request_timeout_ms);
        if stale && !in_flight && !replicas.is_empty() {
            // The leader it knows if that is a replica, else the replicas in turn.
            let target = match entry.leader {
                Some((leader, _)) if replicas.contains(&leader) && entry.asks.is_multiple_of(2) => {
                    leader
                }
                _ => replicas[entry.asks % replicas.len()],
            };
            entry.asks = entry.asks.wrapping_add(1);
            entry.asked_ms = Some(now);
            self.queued.entry(target).or_default().push(key);
        }
        let entry = &self.known[&(topic.name.clone(), index)];
        let (error, leader_id, leader_epoch) = match entry.leader {
            Some((leader, epoch)) => (ErrorCode::None, leader, epoch),
            None => (ErrorCode::LeaderNotAvailable, -1, -1),
        };
        md_resp::MetadataResponsePartition {
            error_code: error.code(),
            partition_index: index,
            leader_id,
            leader_epoch,
            isr_nodes: entry.isr.clone().unwrap_or_else(|| replicas.clone()),
            replica_nodes: replicas,
            offline_replicas: Vec::new(),
        }
    }
}

/// The voters a leader's DescribeQuorum reports at or past its high-watermark, in its order.
fn in_sync_replicas(p: &dq_resp::PartitionData) -> Vec<NodeId> {
    p.current_voters
        .iter()
        .filter(|v| v.log_end_offset >= p.high_watermark)
        .map(|v| v.replica_id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ISR a leader reports: the voters whose end offset reached its high-watermark.
    #[test]
    fn in_sync_replicas_are_the_voters_at_the_high_watermark() {
        let voter = |replica_id, log_end_offset| dq_resp::ReplicaState {
            replica_id,
            log_end_offset,
            ..Default::default()
        };
        let p = dq_resp::PartitionData {
            high_watermark: 10,
            current_voters: vec![voter(2, 12), voter(3, 9), voter(1, 10), voter(4, -1)],
            ..Default::default()
        };
        assert_eq!(in_sync_replicas(&p), vec![2, 1]);
    }
}
