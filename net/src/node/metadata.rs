//! What a Kafka client asks before it produces or consumes: Metadata (brokers, leaders and
//! leader epochs), ListOffsets (earliest, latest, by timestamp) and OffsetForLeaderEpoch
//! (KIP-101/KIP-320: where an epoch ends), plus the CurrentLeaderEpoch check every one of
//! them and consumer Fetch share (KIP-320).
//!
//! Leader epochs are the Raft epochs of the partition's group: a leader stamps every batch it
//! appends with its epoch, so the epoch a client reads from a batch, the one Metadata reports
//! and the one it sends back as CurrentLeaderEpoch are the same number.

use ringlog_engine::batch::BatchIter;
use ringlog_replication::{OffsetAndEpoch, PartitionId, Raft};

use super::Node;
use crate::acl::ResourceType;
use crate::acl::binding::CLUSTER_RESOURCE_NAME;
use crate::protocol::{
    ApiKey, ErrorCode, list_offsets_request as lo_req, list_offsets_response as lo_resp,
    metadata_request as md_req, metadata_response as md_resp,
    offset_for_leader_epoch_request as ofle_req, offset_for_leader_epoch_response as ofle_resp,
};

/// ListOffsets' special timestamps (Kafka's `ListOffsetsRequest`).
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// How many bytes a timestamp lookup reads from the log at a time.
const SCAN_CHUNK_BYTES: u32 = 1 << 20;

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

impl Node {
    // ---- Metadata -----------------------------------------------------------------------------

    /// Every broker a client may be sent to: each voter at its client listener
    /// (`voter.advertised.listeners`, else its `controller.quorum.voters` address, whose one
    /// listener serves clients and peers alike), and this node at its advertised listener when
    /// it is an observer. Observers that are not this node are not
    /// listed: nothing tells a node another observer's address.
    pub(super) fn metadata_brokers(&self) -> Vec<md_resp::MetadataResponseBroker> {
        let mut brokers: Vec<md_resp::MetadataResponseBroker> = self
            .config
            .quorum_voters
            .iter()
            .map(|v| {
                // A voter's client address: `voter.advertised.listeners` names it; else, with one
                // listener for everything, its endpoint in the voter set in force (KIP-853:
                // UpdateRaftVoter, when it moved) wins over the configured address. With a
                // separate controller listener the voter set holds controller endpoints, which
                // are not for clients.
                let explicit = self
                    .config
                    .voter_advertised_listeners
                    .iter()
                    .find(|a| a.node_id == v.node_id);
                let voter_set_endpoint = self
                    .config
                    .listeners
                    .controller
                    .is_none()
                    .then(|| self.voter_set_endpoint(v.node_id))
                    .flatten();
                let (host, port) = if v.node_id == self.config.node_id {
                    self.config.advertised_listener.clone()
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
        for &id in self.metadata_raft().voter_set().voters().keys() {
            if id == self.config.node_id || brokers.iter().any(|b| b.node_id == id) {
                continue;
            }
            if let Some(a) = self
                .config
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
            } else if let Some(endpoint) = self.voter_set_endpoint(id) {
                brokers.push(md_resp::MetadataResponseBroker {
                    node_id: id,
                    host: endpoint.host.clone(),
                    port: i32::from(endpoint.port),
                    rack: None,
                });
            }
        }
        if !brokers.iter().any(|b| b.node_id == self.config.node_id) {
            let (host, port) = self.config.advertised_listener.clone();
            brokers.push(md_resp::MetadataResponseBroker {
                node_id: self.config.node_id,
                host,
                port: i32::from(port),
                rack: None,
            });
        }
        brokers
    }

    /// A partition this node runs: its leader as its Raft group knows it, `replicas` (the
    /// group's voters) and the in-sync replicas ([`Node::in_sync_replicas`]).
    fn metadata_partition(
        &self,
        id: PartitionId,
        replicas: Vec<i32>,
    ) -> md_resp::MetadataResponsePartition {
        let hosted = self.table.get(id);
        let raft = self.host.raft(id).expect("hosted partition");
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
    fn metadata_topic(&mut self, name: &str) -> Option<md_resp::MetadataResponseTopic> {
        let voters = super::placement::configured_voter_ids(&self.config);
        if let Some(topic) = self.handlers.topics.image.get(name).cloned() {
            let mut partitions = Vec::with_capacity(topic.partitions as usize);
            for index in 0..topic.partitions {
                let replicas = topic.replicas_of(index, &voters);
                let hosted = self
                    .table
                    .find(name, index)
                    .filter(|id| self.table.get(*id).topic_id == topic.topic_id);
                let offline = self.offline_partition_error(name, index).is_some();
                partitions.push(match hosted {
                    Some(id) => self.metadata_partition(id, replicas),
                    // This node's replica went offline after a storage error: the others may
                    // lead; a partition with no other replica has no leader (Kafka's offline
                    // partition).
                    None if offline => {
                        let own = self.config.node_id;
                        let others = replicas.iter().any(|r| *r != own);
                        let mut partition = if others {
                            self.remote_partition_metadata(&topic, index, replicas)
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
                    None => self.remote_partition_metadata(&topic, index, replicas),
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
        let mut ids: Vec<PartitionId> = self
            .table
            .ids()
            .filter(|id| self.table.get(*id).topic == name)
            .collect();
        if ids.is_empty() {
            return None;
        }
        ids.sort_by_key(|id| self.table.get(*id).index);
        let topic_id = self.table.get(ids[0]).topic_id;
        Some(md_resp::MetadataResponseTopic {
            error_code: ErrorCode::None.code(),
            name: Some(name.to_string()),
            topic_id,
            is_internal: super::topics::is_internal_topic(name),
            partitions: ids
                .iter()
                .map(|id| self.metadata_partition(*id, voters.clone()))
                .collect(),
            topic_authorized_operations: i32::MIN,
        })
    }

    /// Every topic of the image and every topic with a partition here, by name.
    fn known_topic_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .table
            .ids()
            .map(|id| self.table.get(id).topic.clone())
            .chain(self.handlers.topics.image.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub(super) fn handle_metadata(
        &mut self,
        request: &md_req::MetadataRequest,
        version: i16,
        requester: &super::authorize::Requester,
    ) -> md_resp::MetadataResponse {
        // v0: an empty list means every topic; v1+: null does.
        let requested: Option<Vec<md_req::MetadataRequestTopic>> = match &request.topics {
            None => None,
            Some(list) if list.is_empty() && version == 0 => None,
            Some(list) => Some(list.clone()),
        };
        let describable = |node: &Self, name: &str| node.allowed(requester, ApiKey::Metadata, name);
        let mut topics: Vec<md_resp::MetadataResponseTopic> = match requested {
            // Every topic the requester may describe; the others are left out (Kafka's).
            None => {
                let names: Vec<String> = self
                    .known_topic_names()
                    .into_iter()
                    .filter(|name| describable(self, name))
                    .collect();
                names
                    .iter()
                    .filter_map(|name| self.metadata_topic(name))
                    .collect()
            }
            Some(list) => {
                let mut topics = Vec::with_capacity(list.len());
                for t in &list {
                    let name = match &t.name {
                        Some(name) => Some(name.clone()),
                        None => self
                            .handlers
                            .topics
                            .image
                            .values()
                            .find(|topic| topic.topic_id == t.topic_id)
                            .map(|topic| topic.name.clone())
                            .or_else(|| {
                                self.table
                                    .ids()
                                    .find(|id| self.table.get(*id).topic_id == t.topic_id)
                                    .map(|id| self.table.get(id).topic.clone())
                            }),
                    };
                    // A topic the requester may not describe is answered so, whether it exists
                    // or not, and is not created (Kafka's).
                    if let Some(denied) = name.as_deref().filter(|n| !describable(self, n)) {
                        topics.push(md_resp::MetadataResponseTopic {
                            error_code: ErrorCode::TopicAuthorizationFailed.code(),
                            name: Some(denied.to_string()),
                            topic_id: t.topic_id,
                            topic_authorized_operations: i32::MIN,
                            ..Default::default()
                        });
                        continue;
                    }
                    if let Some(found) = name.as_deref().and_then(|n| self.metadata_topic(n)) {
                        topics.push(found);
                        continue;
                    }
                    let auto_create = version < 4 || request.allow_auto_topic_creation;
                    let may_create = name
                        .as_deref()
                        .is_none_or(|n| self.allowed(requester, ApiKey::CreateTopics, n));
                    let error = if may_create {
                        self.metadata_unknown_topic(name.as_deref(), auto_create)
                    } else {
                        ErrorCode::TopicAuthorizationFailed
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
        let controller_id = self
            .table
            .find(super::convert::METADATA_TOPIC, 0)
            .and_then(|id| self.host.raft(id))
            .and_then(Raft::leader_id)
            .unwrap_or(-1);
        // The lookups of leaders this node does not know leave now; the client's next
        // Metadata sees their answers (remote_leaders.rs).
        if let Err(error) = self.send_leader_lookups() {
            tracing::warn!(%error, "asking replicas for their leaders");
        }
        // v8+: the operations the requester may perform, when asked (Kafka's bitfields).
        if request.include_topic_authorized_operations {
            for topic in &mut topics {
                if let (0, Some(name)) = (topic.error_code, &topic.name) {
                    topic.topic_authorized_operations = self.authorizer().authorized_operations(
                        requester,
                        ResourceType::Topic,
                        name,
                    );
                }
            }
        }
        let cluster_authorized_operations = if request.include_cluster_authorized_operations {
            self.authorizer().authorized_operations(
                requester,
                ResourceType::Cluster,
                CLUSTER_RESOURCE_NAME,
            )
        } else {
            i32::MIN
        };
        md_resp::MetadataResponse {
            throttle_time_ms: 0,
            brokers: self.metadata_brokers(),
            cluster_id: Some(self.cluster_id.clone()),
            controller_id,
            topics,
            cluster_authorized_operations,
            error_code: 0,
        }
    }

    /// The error for a topic this node does not host. Creating topics on demand
    /// (`auto.create.topics.enable`) goes through the metadata log (topics.rs).
    fn metadata_unknown_topic(&mut self, name: Option<&str>, auto_create: bool) -> ErrorCode {
        match name {
            Some(name) if auto_create && self.config.auto_create_topics_enable => {
                let mut cx = cx!(self);
                let code = self.handlers.topics.auto_create_topic(&mut cx, name);
                if let Err(error) = self.after_call() {
                    tracing::warn!(%error, "auto-creation");
                }
                code
            }
            _ => ErrorCode::UnknownTopicOrPartition,
        }
    }

    // ---- ListOffsets --------------------------------------------------------------------------

    pub(super) fn handle_list_offsets(
        &mut self,
        request: &lo_req::ListOffsetsRequest,
        requester: &super::authorize::Requester,
    ) -> lo_resp::ListOffsetsResponse {
        let topics = request
            .topics
            .iter()
            .map(|t| lo_resp::ListOffsetsTopicResponse {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let answer = if self.allowed(requester, ApiKey::ListOffsets, &t.name) {
                            self.list_offset(&t.name, p)
                        } else {
                            Err(ErrorCode::TopicAuthorizationFailed)
                        };
                        let (error, timestamp, offset, leader_epoch) = match answer {
                            Ok((timestamp, offset, epoch)) => {
                                (ErrorCode::None, timestamp, offset, epoch)
                            }
                            Err(code) => (code, -1, -1, -1),
                        };
                        lo_resp::ListOffsetsPartitionResponse {
                            partition_index: p.partition_index,
                            error_code: error.code(),
                            timestamp,
                            offset,
                            leader_epoch,
                        }
                    })
                    .collect(),
            })
            .collect();
        lo_resp::ListOffsetsResponse {
            throttle_time_ms: 0,
            topics,
        }
    }

    /// (timestamp, offset, leader epoch) for one partition; offsets are those a consumer may
    /// read (below the high-watermark).
    fn list_offset(
        &mut self,
        topic: &str,
        p: &lo_req::ListOffsetsPartition,
    ) -> Result<(i64, i64, i32), ErrorCode> {
        let id = self
            .table
            .find(topic, p.partition_index)
            .ok_or_else(|| self.absent_partition_error(topic, p.partition_index))?;
        let raft = self.host.raft(id).expect("hosted partition");
        leader_check(raft, p.current_leader_epoch)?;
        let cache = raft.log().epoch_cache().to_vec();
        let epoch = raft.epoch() as i32;
        let store = self.host.store(id).expect("hosted partition");
        let high_watermark = store.high_watermark;
        // Kafka's logStartOffset (delete_records.rs): the earliest offset a client may read.
        let log_start_offset = store.client_log_start_offset();
        match p.timestamp {
            LATEST_TIMESTAMP => Ok((-1, high_watermark as i64, epoch)),
            EARLIEST_TIMESTAMP => Ok((
                -1,
                log_start_offset as i64,
                epoch_of_offset(&cache, log_start_offset),
            )),
            MAX_TIMESTAMP => Ok(self
                .scan_timestamps(id, log_start_offset, high_watermark, None)
                .unwrap_or((-1, -1, -1))),
            target if target >= 0 => Ok(self
                .scan_timestamps(id, log_start_offset, high_watermark, Some(target))
                .unwrap_or((-1, -1, -1))),
            _ => Err(ErrorCode::InvalidRequest),
        }
    }

    /// With `Some(target)`, the first record whose timestamp is at least `target`; with
    /// `None`, the record with the largest timestamp (the first of them); both among the data
    /// batches in `[from, high_watermark)`. The batch comes from the engine's in-memory batch
    /// entries (`PartitionLog::find_batch_by_timestamp`, no I/O); only that one batch is read,
    /// to name the record. A compressed batch is decompressed for it; one that cannot be is
    /// answered with its base offset and MaxTimestamp.
    fn scan_timestamps(
        &mut self,
        id: PartitionId,
        from: u64,
        high_watermark: u64,
        target: Option<i64>,
    ) -> Option<(i64, i64, i32)> {
        let store = self.host.store(id)?;
        let (base_offset, max_timestamp) =
            store
                .log
                .find_batch_by_timestamp(from as i64, high_watermark as i64, target)?;
        let bytes = match self.host.read(id, base_offset as u64, SCAN_CHUNK_BYTES) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(%error, base_offset, "log read failed in a timestamp lookup");
                return None;
            }
        };
        let batch = BatchIter::new(bytes).next()?.ok()?;
        let epoch = batch.partition_leader_epoch();
        // `from` may be inside this batch (a DeleteRecords cut there): no record below it.
        let mut found = (max_timestamp, batch.base_offset().max(from as i64), epoch);
        if let Ok(records) = batch.records() {
            for record in records.flatten().filter(|r| r.offset() >= from as i64) {
                let hit = match target {
                    Some(t) => record.timestamp() >= t,
                    None => record.timestamp() == max_timestamp,
                };
                if hit {
                    found = (record.timestamp(), record.offset(), epoch);
                    break;
                }
            }
        }
        Some(found)
    }

    // ---- OffsetForLeaderEpoch -----------------------------------------------------------------

    pub(super) fn handle_offset_for_leader_epoch(
        &self,
        request: &ofle_req::OffsetForLeaderEpochRequest,
    ) -> ofle_resp::OffsetForLeaderEpochResponse {
        let topics = request
            .topics
            .iter()
            .map(|t| ofle_resp::OffsetForLeaderTopicResult {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let answer = self
                            .table
                            .find(&t.topic, p.partition)
                            .ok_or_else(|| self.absent_partition_error(&t.topic, p.partition))
                            .and_then(|id| {
                                let raft = self.host.raft(id).expect("hosted partition");
                                leader_check(raft, p.current_leader_epoch)?;
                                let log = raft.log();
                                Ok(end_offset_for_epoch(
                                    log.epoch_cache(),
                                    log.log_end_offset(),
                                    p.leader_epoch,
                                ))
                            });
                        let (error, (leader_epoch, end_offset)) = match answer {
                            Ok(found) => (ErrorCode::None, found.unwrap_or((-1, -1))),
                            Err(code) => (code, (-1, -1)),
                        };
                        ofle_resp::EpochEndOffset {
                            error_code: error.code(),
                            partition: p.partition,
                            leader_epoch,
                            end_offset,
                        }
                    })
                    .collect(),
            })
            .collect();
        ofle_resp::OffsetForLeaderEpochResponse {
            throttle_time_ms: 0,
            topics,
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
