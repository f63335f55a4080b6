//! Topics are metadata: creating a topic commits a topic record to `__cluster_metadata-0`;
//! every node applies the committed records in offset order (the metadata image) and starts
//! the new topic's partitions it is a replica of (observers: all of them), each a Raft group
//! whose voters are the partition's replicas, each in its own folder
//! (`<metadata.log.dir>/<topic>-<partition>`). Format of the record (docs/clients.md):
//!
//! ```text
//! key   = "ringlog.topic.v2/<topic>"
//! value = "name=<topic>\ttopic_id=<32 hex digits>\tpartitions=<n>\tcleanup.policy=delete
//!          \tretention.bytes=<n>\tretention.ms=<n>[\tsegment.bytes=<n>][\tsnapshot.minimum.records=<n>][\treplicas=<r>]"
//! ```
//!
//! `replicas` is each partition's replica list, partitions separated by `;` and node ids by
//! `,` (`1,2;2,3;3,1`), chosen by the controller when it proposes the record (placement.rs). A
//! record without it (every topic created before replication factors, `__consumer_offsets`, and
//! a topic placed on every voter) has every configured voter as the replicas of each partition.
//!
//! The config fields after `partitions` are the topic's [`TopicConfig`], under Kafka's property
//! names; a field that is absent takes its default, so records written before the retention
//! fields existed (only `cleanup.policy=delete`) still read. The node's code asks for a
//! partition's config with `Topics::topic_config(table, partition)`.
//!
//! Keyed by the topic's name, the metadata partition's key-value state machine holds exactly
//! one record per topic, so a KIP-630 snapshot of it keeps every topic, and the image is
//! derived from that state (snapshot loaded + log applied after it), not by replaying the log.
//! Records with any other key (the `ringlog.topic.v1` records of before this format, all under
//! one key, or whatever a client produced before 2026-12 refused Produce to internal topics)
//! are not topics. Only the controller writes here: a Produce to an internal topic is refused
//! (handlers.rs), so no client can add, replace or delete a topic record. The controller
//! never proposes a creation for a name it knows (nor one proposed and not yet applied), so a
//! retried or forwarded creation cannot start a topic twice. A later record with the same
//! topic id is a change of that topic, applied in place: its config (IncrementalAlterConfigs,
//! configs.rs) or more partitions (CreatePartitions, create_partitions.rs).
//!
//! CreateTopics is answered by the metadata partition's leader (the controller Metadata
//! names) once the image has applied the record, i.e. once it is committed; any other node
//! answers NOT_CONTROLLER, and so does a new leader until its image has applied everything
//! earlier epochs committed (controller.rs: else it could create a topic that exists
//! and so replace it). A Metadata request for an unknown topic with auto-creation on
//! proposes the topic (forwarded to the controller when this node is not it) and answers
//! LEADER_NOT_AVAILABLE, so the client asks again.

use std::collections::{BTreeMap, BTreeSet};

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;
use ringlog_replication::{NodeId, PartitionId, QuorumConfig};

use super::NodeError;
use super::admin_answers::AdminResults;
use super::context::Cx;
use super::partition_dirs::Leftovers;
use super::partition_table::PartitionTable;
use super::placement::{self, configured_voter_ids};
use super::transport::{PeerPending, Responder};
use crate::config::NodeConfig;
use crate::groups::offsets::OFFSETS_TOPIC;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ErrorCode, Request, RequestHeader, create_topics_request as ct_req,
    create_topics_response as ct_resp,
};

/// CreateTopics version used to forward an auto-creation to the controller.
pub(super) const FORWARD_CREATE_TOPICS_VERSION: i16 = 5;

pub use super::topic_record::*;

#[derive(Default)]
pub(super) struct Topics {
    /// Everything of the metadata log below this offset has been applied.
    pub(super) applied_offset: u64,
    pub(super) image: BTreeMap<String, TopicRecord>,
    /// Names proposed by this node (as controller) and not yet applied.
    pub(super) proposed: BTreeSet<String>,
    /// Set once the leftovers of earlier runs were looked at (partition_dirs.rs).
    pub(super) swept: Option<Leftovers>,
    /// When retention.rs looks at the delete topics' logs next (node clock).
    pub(super) next_retention_check_ms: u64,
    /// The latest record this controller proposed for an existing topic and that is not
    /// applied yet, with its offset and metadata epoch (configs.rs, create_partitions.rs,
    /// delete_topics.rs; `None`: a tombstone). The next change of the topic starts from it, so
    /// two changes in flight do not undo each other, and nothing changes a topic being deleted.
    pub(super) changed: BTreeMap<String, (Option<TopicRecord>, u64, u32)>,
}

/// The quorum settings of a partition whose Raft group's voters are `voters` (the configured
/// voters for `__cluster_metadata-0`, a topic partition's replicas otherwise).
pub(super) fn quorum_config(
    config: &NodeConfig,
    voters: &[NodeId],
) -> Result<QuorumConfig, NodeError> {
    let mut quorum = if voters.is_empty() && !config.quorum_bootstrap_servers.is_empty() {
        // KIP-853: no voter known yet; the core asks the bootstrap servers who leads.
        QuorumConfig::with_bootstrap_servers(config.node_id, &bootstrap_server_ids(config))?
    } else {
        QuorumConfig::new(config.node_id, voters)?
    };
    quorum.election_timeout_ms = config.election_timeout_ms;
    quorum.election_backoff_max_ms = config.election_backoff_max_ms;
    quorum.fetch_timeout_ms = config.fetch_timeout_ms;
    quorum.request_timeout_ms = config.request_timeout_ms;
    quorum.retry_backoff_ms = config.retry_backoff_ms;
    quorum.fetch_max_wait_ms = config.fetch_max_wait_ms;
    // A replica's idle partitions' long polls end together (docs/node.md, "A follower's fetch
    // session per leader").
    quorum.fetch_wait_grain_ms = LONG_POLL_GRAIN_MS;
    // KRaft's MAX_FETCH_SIZE_BYTES: a follower behind by a GiB catches up in 128 rounds of
    // fetch, append and flush rather than 1,024 (docs/benchmarks.md, "Catching up"); a wire
    // Fetch shares REPLICA_FETCH_RESPONSE_MAX_BYTES among its partitions (convert/fetch.rs).
    quorum.fetch_max_bytes = REPLICA_FETCH_MAX_BYTES;
    quorum.max_replication_lag_ms = config.max_replication_lag_ms;
    quorum.directory_id = config.directory_id.unwrap_or([0; 16]);
    Ok(quorum)
}

/// The most bytes of one partition a replica Fetch asks for or is answered with.
pub(super) const REPLICA_FETCH_MAX_BYTES: u32 = 8 * 1024 * 1024;

/// Long polls end on multiples of this many milliseconds (`QuorumConfig::fetch_wait_grain_ms`):
/// a follower's idle partitions, parked at their leader at different moments, come back in a
/// few wire Fetches per `fetch.max.wait.ms` rather than one each, and each wire Fetch costs
/// the leader every partition of the session.
const LONG_POLL_GRAIN_MS: u64 = 100;

/// The ids the core knows `controller.quorum.bootstrap.servers` by: Kafka's -2, -3, … (never a
/// node id; -1 means "none" on the wire).
pub(super) fn bootstrap_server_ids(config: &NodeConfig) -> Vec<NodeId> {
    (0..config.quorum_bootstrap_servers.len() as NodeId)
        .map(|index| -2 - index)
        .collect()
}

/// `__consumer_offsets`' config: a snapshot topic (its state is the committed offsets, its
/// log trimmed behind KIP-630 snapshots), nothing deleted by age or size.
pub(super) fn offsets_topic_config(config: &NodeConfig) -> TopicConfig {
    TopicConfig {
        cleanup_policy: CleanupPolicy::Snapshot,
        retention_bytes: -1,
        retention_ms: -1,
        segment_bytes: Some(config.groups.offsets_topic_segment_bytes),
        snapshot_minimum_records: None,
        max_message_bytes: None,
        ..TopicConfig::default()
    }
}

/// A fresh topic id: random, so a topic deleted and created again under the same name gets
/// another one (and its old folders can be told apart, partition_dirs.rs).
fn random_topic_id() -> Uuid {
    let a = super::random_seed().to_le_bytes();
    let b = super::random_seed().to_le_bytes();
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&a);
    id[8..].copy_from_slice(&b);
    Uuid(id)
}

impl Topics {
    pub(super) fn topic_exists(&self, name: &str) -> bool {
        self.image.contains_key(name)
    }

    /// The config of the topic `partition` (of the node's `table`) belongs to, as its
    /// committed topic record has it. `None` for `__cluster_metadata-0` (not a topic of the
    /// image: its log is always trimmed behind snapshots, snapshots.rs) and for a partition
    /// whose topic is not (or no longer) in the image.
    pub(super) fn topic_config(
        &self,
        table: &PartitionTable,
        partition: PartitionId,
    ) -> Option<&TopicConfig> {
        self.topic_record(table, partition).map(|t| &t.config)
    }

    /// The committed topic record `partition` (of the node's `table`) belongs to; `None` as
    /// for [`Topics::topic_config`].
    pub(super) fn topic_record(
        &self,
        table: &PartitionTable,
        partition: PartitionId,
    ) -> Option<&TopicRecord> {
        let hosted = table.get(partition);
        self.image
            .get(&hosted.topic)
            .filter(|t| t.topic_id == hosted.topic_id)
    }

    /// The largest batch a Produce may bring to `partition`: the topic's `max.message.bytes`,
    /// else the node's `message.max.bytes` (`node_message_max_bytes`, broker_configs.rs), and
    /// never more than the partition's segment size (`segment.bytes`), because a batch must
    /// fit in one segment (Kafka refuses such a batch too).
    pub(super) fn produce_max_batch_bytes(
        &self,
        host: &Host<AnyIo>,
        table: &PartitionTable,
        node_message_max_bytes: u32,
        partition: PartitionId,
    ) -> usize {
        let segment_bytes = host
            .store(partition)
            .map_or(u64::MAX, |s| s.log.config().segment_size_bytes);
        let max_message_bytes = self
            .topic_config(table, partition)
            .and_then(|c| c.max_message_bytes)
            .map_or(node_message_max_bytes as u64, |b| b.max(0) as u64);
        max_message_bytes.min(segment_bytes) as usize
    }

    // ---- proposing ----------------------------------------------------------------------------

    /// The topic as the controller's next change must start from: the latest record it
    /// proposed for it (in the metadata log's current `epoch`) and that is not applied yet,
    /// else the image's. `None`: no such topic, or its deletion is in flight.
    pub(super) fn latest_topic_record(&self, name: &str, epoch: u32) -> Option<TopicRecord> {
        match self.changed.get(name) {
            Some((record, offset, proposed_in))
                if *offset >= self.applied_offset && *proposed_in == epoch =>
            {
                record.clone()
            }
            _ => self.image.get(name).cloned(),
        }
    }

    /// Proposes a changed record of an existing topic (same topic id); returns its offset.
    pub(super) fn propose_topic_change(
        &mut self,
        cx: &mut Cx,
        record: &TopicRecord,
    ) -> Result<u64, ErrorCode> {
        let offset = cx.propose_metadata_record(&record.name, Some(&record.encode_value()))?;
        let epoch = cx.metadata_raft().epoch();
        self.changed
            .insert(record.name.clone(), (Some(record.clone()), offset, epoch));
        tracing::info!(topic = %record.name, partitions = record.partitions, config = ?record.config, offset, "topic change proposed");
        Ok(offset)
    }

    /// Appends a topic record to the metadata log (this node must lead it). Returns the
    /// record's offset.
    fn propose_topic(&mut self, cx: &mut Cx, record: &TopicRecord) -> Result<u64, ErrorCode> {
        let offset = cx.propose_metadata_record(&record.name, Some(&record.encode_value()))?;
        self.proposed.insert(record.name.clone());
        tracing::info!(topic = %record.name, partitions = record.partitions, offset, "topic proposed");
        Ok(offset)
    }

    /// The controller proposes `__consumer_offsets` (groups.rs asks when a client first needs a
    /// coordinator), once its image holds every committed topic record: a second record for
    /// the name would replace the first topic and its committed offsets.
    pub(super) fn propose_offsets_topic(&mut self, cx: &mut Cx) -> Result<u64, ErrorCode> {
        if !cx.controller_active() {
            return Err(ErrorCode::NotController);
        }
        if self.topic_exists(OFFSETS_TOPIC) || self.proposed.contains(OFFSETS_TOPIC) {
            return Err(ErrorCode::TopicAlreadyExists);
        }
        let partitions = cx.config.groups.offsets_topic_num_partitions;
        let record = TopicRecord {
            name: OFFSETS_TOPIC.to_string(),
            topic_id: random_topic_id(),
            partitions,
            config: offsets_topic_config(cx.config),
            // Every voter in force, as before replication factors (docs/groups.md).
            replicas: placement::every_voter_placement(cx.config, cx.metadata_raft(), partitions),
        };
        self.propose_topic(cx, &record)
    }

    /// Metadata for an unknown topic with auto-creation allowed: propose it (here if this node
    /// is the controller, else forwarded: queued in `cx`) and tell the client to come back.
    pub(super) fn auto_create_topic(&mut self, cx: &mut Cx, name: &str) -> ErrorCode {
        if let Err(code) = validate_topic_name(name) {
            return code;
        }
        if self.proposed.contains(name) {
            return ErrorCode::LeaderNotAvailable;
        }
        let partitions = cx.config.num_partitions.min(10_000) as i32;
        let raft = cx.metadata_raft();
        let (leading, controller) = (raft.is_leader(), raft.leader_id());
        if leading && !cx.controller_active() {
            // Not caught up: the topic may exist in records not applied yet (see
            // controller.rs). The client asks again.
            return ErrorCode::LeaderNotAvailable;
        }
        if leading {
            let placed =
                placement::place_new_partitions(cx.config, cx.metadata_raft(), 0, partitions, -1);
            let replicas = match placed {
                Ok(placed) => {
                    placement::recorded_placement(placed, &configured_voter_ids(cx.config))
                }
                Err(error) => {
                    tracing::warn!(topic = name, %error, "auto-creation failed");
                    return error.error_code();
                }
            };
            let record = TopicRecord {
                name: name.to_string(),
                topic_id: random_topic_id(),
                partitions,
                config: TopicConfig::default(),
                replicas,
            };
            if let Err(code) = self.propose_topic(cx, &record) {
                tracing::warn!(topic = name, ?code, "auto-creation failed");
            }
        } else if let Some(controller) = controller {
            let request = ct_req::CreateTopicsRequest {
                topics: vec![ct_req::CreatableTopic {
                    name: name.to_string(),
                    num_partitions: partitions,
                    replication_factor: -1,
                    ..Default::default()
                }],
                timeout_ms: 5_000,
                validate_only: false,
            };
            cx.send_to_peer(
                controller,
                Request::CreateTopics(request),
                FORWARD_CREATE_TOPICS_VERSION,
                PeerPending::Control,
                false,
            );
        }
        ErrorCode::LeaderNotAvailable
    }

    // ---- CreateTopics ---------------------------------------------------------------------------

    pub(super) fn handle_create_topics(
        &mut self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: ct_req::CreateTopicsRequest,
    ) -> Result<(), NodeError> {
        // A leader still applying what earlier epochs committed is not the controller yet.
        let leading = cx.controller_active();
        let catching_up = !leading && cx.metadata_raft().is_leader();
        let requester = responder.requester();
        let mut results = Vec::new();
        let mut waiting = Vec::new();
        let mut seen = BTreeSet::new();
        for topic in &request.topics {
            let mut result = ct_resp::CreatableTopicResult {
                name: topic.name.clone(),
                error_message: None,
                num_partitions: -1,
                replication_factor: -1,
                configs: None,
                ..Default::default()
            };
            // `__consumer_offsets` is the one internal topic a CreateTopics may create (a node
            // that is not the controller asks for it so): always with this controller's
            // `offsets.topic.*` settings, whatever the request says (docs/groups.md).
            let offsets_topic = topic.name == OFFSETS_TOPIC;
            let mut partitions = if offsets_topic {
                cx.config.groups.offsets_topic_num_partitions
            } else if topic.num_partitions == -1 {
                cx.config.num_partitions.min(10_000) as i32
            } else {
                topic.num_partitions
            };
            let mut replication_factor: i16 = -1;
            let outcome: Result<Option<u64>, (ErrorCode, String)> = (|| {
                if !leading {
                    // A leader whose image may still miss a committed record of the topic.
                    let why = if catching_up {
                        "the controller is catching up"
                    } else {
                        "ask the controller"
                    };
                    return Err((ErrorCode::NotController, why.into()));
                }
                // `__consumer_offsets` is asked for by the nodes themselves (groups.rs).
                if !offsets_topic
                    && !cx.authorizer().allowed(
                        &requester,
                        crate::protocol::ApiKey::CreateTopics,
                        &topic.name,
                    )
                {
                    return Err((
                        ErrorCode::TopicAuthorizationFailed,
                        "Authorization failed.".into(),
                    ));
                }
                if !offsets_topic {
                    validate_topic_name(&topic.name)
                        .map_err(|c| (c, format!("illegal topic name {:?}", topic.name)))?;
                }
                if !seen.insert(topic.name.clone()) {
                    return Err((ErrorCode::InvalidRequest, "named twice".into()));
                }
                if self.topic_exists(&topic.name) || self.proposed.contains(&topic.name) {
                    return Err((ErrorCode::TopicAlreadyExists, "topic exists".into()));
                }
                if !(1..=10_000).contains(&partitions) {
                    return Err((ErrorCode::InvalidPartitions, "1 to 10000 partitions".into()));
                }
                // Kafka: an assignment comes with -1 for both counts.
                if !topic.assignments.is_empty()
                    && (topic.num_partitions != -1 || topic.replication_factor != -1)
                {
                    return Err((
                        ErrorCode::InvalidRequest,
                        "an assignment comes with num_partitions and replication_factor -1".into(),
                    ));
                }
                if offsets_topic && !topic.assignments.is_empty() {
                    return Err((
                        ErrorCode::InvalidReplicaAssignment,
                        "__consumer_offsets is on every voter".into(),
                    ));
                }
                // `__consumer_offsets` is on every voter, as before replication factors
                // (docs/groups.md): every voter in force (placement.rs).
                let configured = configured_voter_ids(cx.config);
                let replicas = if offsets_topic {
                    placement::every_voter_placement(cx.config, cx.metadata_raft(), partitions)
                } else {
                    let placed = if topic.assignments.is_empty() {
                        placement::place_new_partitions(
                            cx.config,
                            cx.metadata_raft(),
                            0,
                            partitions,
                            topic.replication_factor,
                        )
                    } else {
                        placement::check_assignment(
                            &placement::placement_nodes(cx.metadata_raft()),
                            topic
                                .assignments
                                .iter()
                                .map(|a| (a.partition_index, a.broker_ids.clone())),
                        )
                    }
                    .map_err(|e| (e.error_code(), e.to_string()))?;
                    partitions = placed.len() as i32;
                    if !(1..=10_000).contains(&partitions) {
                        return Err((ErrorCode::InvalidPartitions, "1 to 10000 partitions".into()));
                    }
                    if topic.assignments.is_empty() {
                        placement::recorded_placement(placed, &configured)
                    } else {
                        placement::recorded_assignment(placed, &configured)
                    }
                };
                replication_factor = replicas
                    .as_ref()
                    .and_then(|r| r.first())
                    .map_or(configured.len(), Vec::len) as i16;
                let config = if offsets_topic {
                    offsets_topic_config(cx.config)
                } else {
                    TopicConfig::from_create_configs(&topic.configs)
                        .map_err(|e| (ErrorCode::InvalidConfig, e.to_string()))?
                };
                result.configs = Some(
                    config
                        .entries()
                        .into_iter()
                        .map(|(name, value)| ct_resp::CreatableTopicConfigs {
                            name: name.to_string(),
                            value: Some(value),
                            read_only: false,
                            // DYNAMIC_TOPIC_CONFIG: set on the topic.
                            config_source: 1,
                            is_sensitive: false,
                        })
                        .collect(),
                );
                if request.validate_only {
                    return Ok(None);
                }
                let record = TopicRecord {
                    name: topic.name.clone(),
                    topic_id: random_topic_id(),
                    partitions,
                    config,
                    replicas,
                };
                result.topic_id = record.topic_id;
                self.propose_topic(cx, &record)
                    .map(Some)
                    .map_err(|c| (c, "metadata append failed".into()))
            })();
            match outcome {
                Ok(offset) => {
                    result.num_partitions = partitions;
                    result.replication_factor = replication_factor;
                    if let Some(offset) = offset {
                        waiting.push((results.len(), offset));
                    }
                }
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(message);
                }
            }
            results.push(result);
        }
        cx.park_admin_answer(
            responder,
            header,
            request.timeout_ms,
            AdminResults::Create(results),
            waiting,
        )
    }
}

#[cfg(test)]
#[path = "topics_tests.rs"]
mod tests;
