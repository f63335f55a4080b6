//! What a Kafka client asks before it produces or consumes: Metadata (brokers, leaders and
//! leader epochs), ListOffsets (earliest, latest, by timestamp) and OffsetForLeaderEpoch
//! (KIP-101/KIP-320: where an epoch ends; both in offsets.rs), plus the CurrentLeaderEpoch
//! check every one of them and consumer Fetch share (KIP-320).
//!
//! Leader epochs are the Raft epochs of the partition's group: a leader stamps every batch it
//! appends with its epoch, so the epoch a client reads from a batch, the one Metadata reports
//! and the one it sends back as CurrentLeaderEpoch are the same number.

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;
use ringlog_replication::{NodeId, OffsetAndEpoch, PartitionId, Raft};

use super::NodeError;
use super::authorize::Requester;
use super::context::Cx;
use super::convert::PartitionTable;
use super::remote_leaders::RemoteLeaders;
use super::storage_faults::OfflinePartitions;
use super::topics::Topics;
use super::transport::Responder;
use crate::acl::ResourceType;
use crate::acl::binding::CLUSTER_RESOURCE_NAME;
use crate::config::NodeConfig;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ApiKey, ErrorCode, metadata_request as md_req, metadata_response as md_resp,
};
use crate::protocol::{RequestHeader, Response, encode_response};

/// KIP-320: a request's CurrentLeaderEpoch against the partition's epoch. -1 skips the check
/// (old clients); an older epoch is a fenced (zombie) client, a newer one means this node has
/// not yet learned of the election the client already knows about.
pub(crate) fn check_current_leader_epoch(
    current_leader_epoch: i32,
    partition_epoch: u32,
) -> Result<(), ErrorCode> {
    if current_leader_epoch < 0 {
        return Ok(());
    }
    match i64::from(current_leader_epoch).cmp(&i64::from(partition_epoch)) {
        std::cmp::Ordering::Less => Err(ErrorCode::FencedLeaderEpoch),
        std::cmp::Ordering::Greater => Err(ErrorCode::UnknownLeaderEpoch),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// Kafka's `LeaderEpochFileCache.endOffsetFor`: the end offset of `requested` (the start of
/// the next larger epoch, or the log end offset for the latest epoch) with the largest epoch
/// ≤ `requested` that the cache holds. `None` (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) for a
/// negative epoch, an empty cache, or an epoch newer than every cached one.
pub(crate) fn end_offset_for_epoch(
    epoch_cache: &[OffsetAndEpoch],
    log_end_offset: u64,
    requested: i32,
) -> Option<(i32, i64)> {
    let requested = u32::try_from(requested).ok()?;
    let latest = epoch_cache.last()?;
    if requested == latest.epoch {
        return Some((requested as i32, log_end_offset as i64));
    }
    let higher = epoch_cache.iter().find(|e| e.epoch > requested)?;
    let floor_epoch = epoch_cache
        .iter()
        .rev()
        .find(|e| e.epoch <= requested)
        .map_or(requested, |e| e.epoch);
    Some((floor_epoch as i32, higher.offset as i64))
}

/// The epoch of the record at `offset`: the latest cache entry starting at or before it.
pub(crate) fn epoch_of_offset(epoch_cache: &[OffsetAndEpoch], offset: u64) -> i32 {
    epoch_cache
        .iter()
        .rev()
        .find(|e| e.offset <= offset)
        .map_or(-1, |e| e.epoch as i32)
}

/// The partition's leader as a client sees it: leader only when this node leads.
pub(crate) fn leader_check(raft: &Raft, current_leader_epoch: i32) -> Result<(), ErrorCode> {
    if !raft.is_leader() {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    check_current_leader_epoch(current_leader_epoch, raft.epoch())
}

/// The in-sync replicas Metadata reports for a partition this node runs. Its leader knows
/// best: the replicas whose end offset (as their last fetch told it) has reached the
/// high-watermark, the leader included. A follower or observer learns no other replica's
/// progress; it reports every replica, which Raft makes true of what clients read the ISR
/// for (any voter elected holds every committed record).
pub(crate) fn in_sync_replicas(raft: &Raft, replicas: &[i32]) -> Vec<i32> {
    if !raft.is_leader() {
        return replicas.to_vec();
    }
    let quorum = raft.describe_quorum();
    replicas
        .iter()
        .copied()
        .filter(|id| {
            quorum.current_voters.iter().any(|v| {
                v.replica_id == *id && v.log_end_offset.is_some_and(|o| o >= quorum.high_watermark)
            })
        })
        .collect()
}

/// Every broker a client may be sent to: each voter at its client listener
/// (`voter.advertised.listeners`, else its `controller.quorum.voters` address, whose one
/// listener serves clients and peers alike), and this node at its advertised listener when
/// it is an observer. Observers that are not this node are not
/// listed: nothing tells a node another observer's address.
pub(super) fn metadata_brokers(
    config: &NodeConfig,
    metadata: &Raft,
) -> Vec<md_resp::MetadataResponseBroker> {
    let mut brokers: Vec<md_resp::MetadataResponseBroker> = config
        .quorum_voters
        .iter()
        .map(|v| {
            // A voter's client address: `voter.advertised.listeners` names it; else, with one
            // listener for everything, its endpoint in the voter set in force (KIP-853:
            // UpdateRaftVoter, when it moved) wins over the configured address. With a
            // separate controller listener the voter set holds controller endpoints, which
            // are not for clients.
            let explicit = config
                .voter_advertised_listeners
                .iter()
                .find(|a| a.node_id == v.node_id);
            let voter_set_endpoint = config
                .listeners
                .controller
                .is_none()
                .then(|| voter_set_endpoint(config, metadata, v.node_id))
                .flatten();
            let (host, port) = if v.node_id == config.node_id {
                config.advertised_listener.clone()
            } else if let Some(a) = explicit {
                (a.host.clone(), a.port)
            } else if let Some(endpoint) = voter_set_endpoint {
                (endpoint.host.clone(), endpoint.port)
            } else {
                (v.host.clone(), v.port)
            };
            md_resp::MetadataResponseBroker {
                node_id: v.node_id,
                host,
                port: i32::from(port),
                rack: None,
            }
        })
        .collect();
    // KIP-853: voters added since the start, at their client listener in
    // `voter.advertised.listeners`, else at the endpoint their VotersRecord gave.
    for &id in metadata.voter_set().voters().keys() {
        if id == config.node_id || brokers.iter().any(|b| b.node_id == id) {
            continue;
        }
        if let Some(a) = config
            .voter_advertised_listeners
            .iter()
            .find(|a| a.node_id == id)
        {
            brokers.push(md_resp::MetadataResponseBroker {
                node_id: id,
                host: a.host.clone(),
                port: i32::from(a.port),
                rack: None,
            });
        } else if let Some(endpoint) = voter_set_endpoint(config, metadata, id) {
            brokers.push(md_resp::MetadataResponseBroker {
                node_id: id,
                host: endpoint.host.clone(),
                port: i32::from(endpoint.port),
                rack: None,
            });
        }
    }
    if !brokers.iter().any(|b| b.node_id == config.node_id) {
        let (host, port) = config.advertised_listener.clone();
        brokers.push(md_resp::MetadataResponseBroker {
            node_id: config.node_id,
            host,
            port: i32::from(port),
            rack: None,
        });
    }
    brokers
}

/// KIP-853: a voter's endpoint in the metadata quorum's voter set in force (the one named like
/// our controller listener first), when its VotersRecord gave one (as requests.rs
/// `voter_set_endpoint` finds it for the lanes to a peer).
fn voter_set_endpoint<'r>(
    config: &NodeConfig,
    metadata: &'r Raft,
    id: NodeId,
) -> Option<&'r ringlog_replication::Endpoint> {
    let info = metadata.voter_set().voters().get(&id)?;
    info.endpoints
        .iter()
        .find(|e| e.name == config.controller_listener_name())
        .or(info.endpoints.first())
}

/// What names the error for a partition this node does not run: the topic image and the
/// partitions a storage error took offline here.
#[derive(Clone, Copy)]
pub(super) struct PartitionLookup<'a> {
    pub(super) topics: &'a Topics,
    pub(super) offline: &'a OfflinePartitions,
}

impl PartitionLookup<'_> {
    /// The error for a partition this node does not run: NOT_LEADER_OR_FOLLOWER when the
    /// partition exists (another node is its replica; the client refreshes its metadata and
    /// finds the leader), UNKNOWN_TOPIC_OR_PARTITION otherwise.
    pub(super) fn absent_error(&self, topic: &str, index: i32) -> ErrorCode {
        // A replica here that a storage error took offline (storage_faults.rs).
        if self
            .offline
            .by_name
            .contains_key(&(topic.to_string(), index))
        {
            return ErrorCode::KafkaStorageError;
        }
        let exists = self
            .topics
            .image
            .get(topic)
            .is_some_and(|t| (0..t.partitions).contains(&index));
        if exists {
            ErrorCode::NotLeaderOrFollower
        } else {
            ErrorCode::UnknownTopicOrPartition
        }
    }

    /// [`PartitionLookup::absent_error`] for a request naming the topic by id (Fetch v13+).
    pub(super) fn absent_error_by_id(&self, topic_id: Uuid, index: i32) -> ErrorCode {
        let name = self
            .topics
            .image
            .values()
            .find(|t| t.topic_id == topic_id)
            .map(|t| t.name.clone());
        match name {
            Some(name) => self.absent_error(&name, index),
            None => ErrorCode::UnknownTopicOrPartition,
        }
    }
}

mod offsets;

pub(super) use offsets::{handle_list_offsets, handle_offset_for_leader_epoch};

// ---- Metadata -----------------------------------------------------------------------------

/// A Metadata answer before the node has auto-created the unknown topics it names (topics.rs
/// `auto_create_topic`, whose error each of them gets) and sent the leader lookups its remote
/// partitions queued (remote_leaders.rs); [`MetadataDraft::finish`] then completes it.
pub(super) struct MetadataDraft {
    topics: Vec<md_resp::MetadataResponseTopic>,
    /// The unknown topics to auto-create: their position in `topics` and their name.
    to_create: Vec<(usize, String)>,
}

impl MetadataDraft {
    /// The topics of `request` this node answers for: every topic the requester may describe,
    /// or those asked for. A partition this node does not run is answered from what `remote`
    /// learned of its leader (a lookup queued when that is stale).
    pub(super) fn new(
        cx: &Cx,
        lookup: PartitionLookup,
        remote: &mut RemoteLeaders,
        request: &md_req::MetadataRequest,
        version: i16,
        requester: &Requester,
    ) -> MetadataDraft {
        // v0: an empty list means every topic; v1+: null does.
        let requested: Option<Vec<md_req::MetadataRequestTopic>> = match &request.topics {
            None => None,
            Some(list) if list.is_empty() && version == 0 => None,
            Some(list) => Some(list.clone()),
        };
        let authorizer = cx.authorizer();
        let describable = |name: &str| authorizer.allowed(requester, ApiKey::Metadata, name);
        let mut to_create = Vec::new();
        let topics: Vec<md_resp::MetadataResponseTopic> = match requested {
            // Every topic the requester may describe; the others are left out (Kafka's).
            None => {
                let names: Vec<String> = known_topic_names(cx.table, lookup.topics)
                    .into_iter()
                    .filter(|name| describable(name))
                    .collect();
                names
                    .iter()
                    .filter_map(|name| metadata_topic(cx, lookup, remote, name))
                    .collect()
            }
            Some(list) => {
                let mut topics = Vec::with_capacity(list.len());
                for t in &list {
                    let name = match &t.name {
                        Some(name) => Some(name.clone()),
                        None => lookup
                            .topics
                            .image
                            .values()
                            .find(|topic| topic.topic_id == t.topic_id)
                            .map(|topic| topic.name.clone())
                            .or_else(|| {
                                cx.table
                                    .ids()
                                    .find(|id| cx.table.get(*id).topic_id == t.topic_id)
                                    .map(|id| cx.table.get(id).topic.clone())
                            }),
                    };
                    // A topic the requester may not describe is answered so, whether it exists
                    // or not, and is not created (Kafka's).
                    if let Some(denied) = name.as_deref().filter(|n| !describable(n)) {
                        topics.push(md_resp::MetadataResponseTopic {
                            error_code: ErrorCode::TopicAuthorizationFailed.code(),
                            name: Some(denied.to_string()),
                            topic_id: t.topic_id,
                            topic_authorized_operations: i32::MIN,
                            ..Default::default()
                        });
                        continue;
                    }
                    if let Some(found) = name
                        .as_deref()
                        .and_then(|n| metadata_topic(cx, lookup, remote, n))
                    {
                        topics.push(found);
                        continue;
                    }
                    let auto_create = version < 4 || request.allow_auto_topic_creation;
                    let may_create = name
                        .as_deref()
                        .is_none_or(|n| authorizer.allowed(requester, ApiKey::CreateTopics, n));
                    // The error for a topic this node does not host. Creating topics on demand
                    // (`auto.create.topics.enable`) goes through the metadata log (topics.rs):
                    // the node does it and sets the error (`MetadataDraft::set_error`).
                    let error = match name.as_deref() {
                        _ if !may_create => ErrorCode::TopicAuthorizationFailed,
                        Some(name) if auto_create && cx.config.auto_create_topics_enable => {
                            to_create.push((topics.len(), name.to_string()));
                            ErrorCode::None
                        }
                        _ => ErrorCode::UnknownTopicOrPartition,
                    };
                    topics.push(md_resp::MetadataResponseTopic {
                        error_code: error.code(),
                        name: name.or_else(|| t.name.clone()),
                        topic_id: t.topic_id,
                        topic_authorized_operations: i32::MIN,
                        ..Default::default()
                    });
                }
                topics
            }
        };
        MetadataDraft { topics, to_create }
    }

    /// The unknown topics the node auto-creates, in the request's order: the position to give
    /// [`MetadataDraft::set_error`] and the name.
    pub(super) fn take_to_create(&mut self) -> Vec<(usize, String)> {
        std::mem::take(&mut self.to_create)
    }

    /// An auto-created topic's error (what the client is told to do meanwhile).
    pub(super) fn set_error(&mut self, position: usize, error: ErrorCode) {
        self.topics[position].error_code = error.code();
    }

    /// The answer: the topics, the brokers, the controller and, when asked (v8+), the
    /// operations the requester may perform.
    pub(super) fn finish(
        self,
        cx: &Cx,
        request: &md_req::MetadataRequest,
        requester: &Requester,
    ) -> md_resp::MetadataResponse {
        let mut topics = self.topics;
        let controller_id = cx
            .table
            .find(super::convert::METADATA_TOPIC, 0)
            .and_then(|id| cx.host.raft(id))
            .and_then(Raft::leader_id)
            .unwrap_or(-1);
        // v8+: the operations the requester may perform, when asked (Kafka's bitfields).
        if request.include_topic_authorized_operations {
            for topic in &mut topics {
                if let (0, Some(name)) = (topic.error_code, &topic.name) {
                    topic.topic_authorized_operations =
                        cx.authorizer()
                            .authorized_operations(requester, ResourceType::Topic, name);
                }
            }
        }
        let cluster_authorized_operations = if request.include_cluster_authorized_operations {
            cx.authorizer().authorized_operations(
                requester,
                ResourceType::Cluster,
                CLUSTER_RESOURCE_NAME,
            )
        } else {
            i32::MIN
        };
        md_resp::MetadataResponse {
            throttle_time_ms: 0,
            brokers: metadata_brokers(cx.config, cx.metadata_raft()),
            cluster_id: Some(cx.cluster_id.to_string()),
            controller_id,
            topics,
            cluster_authorized_operations,
            error_code: 0,
        }
    }
}

/// A partition this node runs: its leader as its Raft group knows it, `replicas` (the
/// group's voters) and the in-sync replicas ([`in_sync_replicas`]).
fn metadata_partition(
    host: &Host<AnyIo>,
    table: &PartitionTable,
    id: PartitionId,
    replicas: Vec<i32>,
) -> md_resp::MetadataResponsePartition {
    let hosted = table.get(id);
    let raft = host.raft(id).expect("hosted partition");
    let leader = raft.leader_id();
    md_resp::MetadataResponsePartition {
        error_code: if leader.is_some() {
            ErrorCode::None.code()
        } else {
            ErrorCode::LeaderNotAvailable.code()
        },
        partition_index: hosted.index,
        leader_id: leader.unwrap_or(-1),
        // Only a leader's epoch: a candidate's epoch may never get a leader, and a client
        // that adopts it (librdkafka) skips its KIP-320 validation when the leader of that
        // epoch appears (an epoch it already knows), fetching unvalidated.
        leader_epoch: if leader.is_some() {
            raft.epoch() as i32
        } else {
            -1
        },
        isr_nodes: in_sync_replicas(raft, &replicas),
        replica_nodes: replicas,
        offline_replicas: Vec::new(),
    }
}

/// The topic entry: every partition of a topic of the image (those this node does not run
/// from what it learned of their leaders, remote_leaders.rs), or the hosted partitions of
/// a topic outside the image (`__cluster_metadata`), in index order.
fn metadata_topic(
    cx: &Cx,
    lookup: PartitionLookup,
    remote: &mut RemoteLeaders,
    name: &str,
) -> Option<md_resp::MetadataResponseTopic> {
    // What a topic record without placement means: every configured voter (placement.rs).
    let voters: Vec<NodeId> = cx.config.quorum_voters.iter().map(|v| v.node_id).collect();
    let table = cx.table;
    if let Some(topic) = lookup.topics.image.get(name).cloned() {
        let mut partitions = Vec::with_capacity(topic.partitions as usize);
        for index in 0..topic.partitions {
            let replicas = topic.replicas_of(index, &voters);
            let hosted = table
                .find(name, index)
                .filter(|id| table.get(*id).topic_id == topic.topic_id);
            let offline = lookup
                .offline
                .by_name
                .contains_key(&(name.to_string(), index));
            let remote_partition = |remote: &mut RemoteLeaders, replicas| {
                remote.partition_metadata(
                    cx.now_ms,
                    cx.config.request_timeout_ms,
                    &topic,
                    index,
                    replicas,
                )
            };
            partitions.push(match hosted {
                Some(id) => metadata_partition(cx.host, table, id, replicas),
                // This node's replica went offline after a storage error: the others may
                // lead; a partition with no other replica has no leader (Kafka's offline
                // partition).
                None if offline => {
                    let own = cx.config.node_id;
                    let others = replicas.iter().any(|r| *r != own);
                    let mut partition = if others {
                        remote_partition(remote, replicas)
                    } else {
                        md_resp::MetadataResponsePartition {
                            error_code: ErrorCode::KafkaStorageError.code(),
                            partition_index: index,
                            leader_id: -1,
                            leader_epoch: -1,
                            isr_nodes: Vec::new(),
                            replica_nodes: replicas,
                            offline_replicas: Vec::new(),
                        }
                    };
                    partition.isr_nodes.retain(|r| *r != own);
                    partition.offline_replicas.push(own);
                    partition
                }
                None => remote_partition(remote, replicas),
            });
        }
        return Some(md_resp::MetadataResponseTopic {
            error_code: ErrorCode::None.code(),
            name: Some(name.to_string()),
            topic_id: topic.topic_id,
            is_internal: super::topics::is_internal_topic(name),
            partitions,
            topic_authorized_operations: i32::MIN,
        });
    }
    let mut ids: Vec<PartitionId> = table
        .ids()
        .filter(|id| table.get(*id).topic == name)
        .collect();
    if ids.is_empty() {
        return None;
    }
    ids.sort_by_key(|id| table.get(*id).index);
    let topic_id = table.get(ids[0]).topic_id;
    Some(md_resp::MetadataResponseTopic {
        error_code: ErrorCode::None.code(),
        name: Some(name.to_string()),
        topic_id,
        is_internal: super::topics::is_internal_topic(name),
        partitions: ids
            .iter()
            .map(|id| metadata_partition(cx.host, table, *id, voters.clone()))
            .collect(),
        topic_authorized_operations: i32::MIN,
    })
}

/// Every topic of the image and every topic with a partition here, by name.
fn known_topic_names(table: &PartitionTable, topics: &Topics) -> Vec<String> {
    let mut names: Vec<String> = table
        .ids()
        .map(|id| table.get(id).topic.clone())
        .chain(topics.image.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Metadata's answer ([`MetadataDraft`]): the topics asked for, the unknown ones auto-created
/// where that is allowed (topics.rs), the leader lookups the answer queued sent (the client's
/// next Metadata sees their answers, remote_leaders.rs), and the answer completed.
#[allow(clippy::too_many_arguments)]
pub(super) fn metadata_response(
    cx: &mut Cx,
    topics: &mut Topics,
    offline: &OfflinePartitions,
    remote: &mut RemoteLeaders,
    request: &md_req::MetadataRequest,
    version: i16,
    requester: &Requester,
) -> md_resp::MetadataResponse {
    let lookup = PartitionLookup { topics, offline };
    let mut draft = MetadataDraft::new(cx, lookup, remote, request, version, requester);
    for (position, name) in draft.take_to_create() {
        let error = topics.auto_create_topic(cx, &name);
        draft.set_error(position, error);
    }
    remote.send_lookups(cx);
    draft.finish(cx, request, requester)
}

/// Answers a Metadata request, or parks it while the leader lookups its answer started are in
/// flight (remote_leaders.rs).
pub(super) fn answer_metadata(
    cx: &mut Cx,
    topics: &mut Topics,
    offline: &OfflinePartitions,
    remote: &mut RemoteLeaders,
    responder: Responder,
    header: &RequestHeader,
    request: md_req::MetadataRequest,
) -> Result<(), NodeError> {
    let version = header.api_version;
    let requester = responder.requester();
    let response = metadata_response(cx, topics, offline, remote, &request, version, &requester);
    let waiting: Vec<(String, i32)> = response
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.name.clone().unwrap_or_default();
            t.partitions
                .iter()
                .filter(|p| p.error_code == ErrorCode::LeaderNotAvailable.code())
                .map(move |p| (name.clone(), p.partition_index))
        })
        .filter(|key| remote.lookup_in_flight(key))
        .collect();
    if waiting.is_empty() {
        let frame = encode_response(
            header.correlation_id,
            version,
            &Response::Metadata(response),
        )?;
        responder.send(Some(frame));
        return Ok(());
    }
    remote.park(responder, header, request, waiting, cx.now_ms);
    Ok(())
}

/// Answers the parked Metadata requests whose lookups ended or whose wait is over, with what
/// the node knows now (called every loop turn, after the turn's events).
pub(super) fn answer_parked_metadata(
    cx: &mut Cx,
    topics: &mut Topics,
    offline: &OfflinePartitions,
    remote: &mut RemoteLeaders,
) {
    for entry in remote.take_ready(cx.now_ms) {
        let requester = entry.responder.requester();
        let response = metadata_response(
            cx,
            topics,
            offline,
            remote,
            &entry.request,
            entry.version,
            &requester,
        );
        match encode_response(
            entry.correlation_id,
            entry.version,
            &Response::Metadata(response),
        ) {
            Ok(frame) => entry.responder.send(Some(frame)),
            Err(error) => tracing::warn!(%error, "encoding a parked Metadata answer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(u32, u64)]) -> Vec<OffsetAndEpoch> {
        entries
            .iter()
            .map(|(epoch, offset)| OffsetAndEpoch::new(*offset, *epoch))
            .collect()
    }

    #[test]
    fn kip_320_current_leader_epoch_check() {
        assert_eq!(check_current_leader_epoch(-1, 5), Ok(()));
        assert_eq!(check_current_leader_epoch(5, 5), Ok(()));
        assert_eq!(
            check_current_leader_epoch(4, 5),
            Err(ErrorCode::FencedLeaderEpoch)
        );
        assert_eq!(
            check_current_leader_epoch(6, 5),
            Err(ErrorCode::UnknownLeaderEpoch)
        );
    }

    #[test]
    fn kip_101_end_offset_of_an_epoch_is_the_start_of_the_next_larger_one() {
        // Epoch 1 from 0, epoch 3 from 10, epoch 4 from 25; log end 40.
        let c = cache(&[(1, 0), (3, 10), (4, 25)]);
        assert_eq!(end_offset_for_epoch(&c, 40, 1), Some((1, 10)));
        // Epoch 2 never had a leader that wrote: the largest epoch ≤ 2 is 1, ending at 10.
        assert_eq!(end_offset_for_epoch(&c, 40, 2), Some((1, 10)));
        assert_eq!(end_offset_for_epoch(&c, 40, 3), Some((3, 25)));
        // The latest epoch ends at the log end.
        assert_eq!(end_offset_for_epoch(&c, 40, 4), Some((4, 40)));
        // Newer than anything we know, or undefined: UNDEFINED_EPOCH_OFFSET.
        assert_eq!(end_offset_for_epoch(&c, 40, 5), None);
        assert_eq!(end_offset_for_epoch(&c, 40, -1), None);
        assert_eq!(end_offset_for_epoch(&[], 0, 0), None);
        // Older than the first entry: the requested epoch ends where the first one starts.
        let c = cache(&[(3, 10)]);
        assert_eq!(end_offset_for_epoch(&c, 20, 2), Some((2, 10)));
    }

    #[test]
    fn epoch_of_an_offset_is_the_entry_covering_it() {
        let c = cache(&[(1, 0), (3, 10)]);
        assert_eq!(epoch_of_offset(&c, 0), 1);
        assert_eq!(epoch_of_offset(&c, 9), 1);
        assert_eq!(epoch_of_offset(&c, 10), 3);
        assert_eq!(epoch_of_offset(&[], 0), -1);
    }
}
