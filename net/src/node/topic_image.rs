//! The topic image: committed topic records of `__cluster_metadata-0` applied to this node, each
//! new topic's partitions opened and started (those this node is a replica of, placement.rs),
//! deleted ones stopped (delete_topics.rs), changed ones (configs, added partitions) updated,
//! and the admin answers that waited for them.
//!
//! [`Topics::apply_image`] brings the image up to date and returns what the node must do with
//! its partitions ([`TopicChange`]): the node (mod.rs, `Node::apply_metadata_records`) starts
//! and stops them, because that touches its own per-partition bookkeeping (the partition
//! table, producer state, metrics, waiting requests); the pieces that only need the host are
//! here ([`open_partition`], [`apply_topic_settings`], [`preopen_list`]).

use std::path::PathBuf;

use bytes::Bytes;
use ringlog_engine::io::AnyIo;
use ringlog_engine::log::LogConfig;
use ringlog_replication::host::{Host, PartitionSpec};
use ringlog_replication::state_machine::{KeyValueStateMachine, StateMachine};
use ringlog_replication::{PartitionId, RecoveredState};

use super::NodeError;
use super::convert::{HostedPartition, PartitionTable};
use super::partition_dirs::{folder_topic_id, prepare_partition_dir};
use super::placement::configured_voter_ids;
use super::topic_record::{TOPIC_RECORD_KEY_PREFIX, TopicRecord};
use super::topics::{Topics, quorum_config};
use crate::config::NodeConfig;

/// What applying the topic records asks of the node, in the order it must be done: every
/// deletion before any start, so a topic deleted and created again under its name loses its
/// old folders before the new one's partitions open.
pub(super) enum TopicChange {
    /// The topic left the image (a tombstone was applied, or its record now carries another
    /// topic id): its partitions stop and lose their folders (mod.rs, `Node::stop_topic`).
    Deleted(TopicRecord),
    /// The topic entered the image (`from` 0) or changed (`from`: its partition count
    /// before): the node starts its partitions `from..` that it hosts ([`hosts_partition`]),
    /// then applies the topic's settings to its partitions here ([`apply_topic_settings`]).
    Started {
        topic: TopicRecord,
        from: i32,
        /// Its config changed (only for a topic already in the image).
        config_changed: bool,
    },
}

/// What the node still has to do here for topic changes the image has applied, in the order
/// the changes came (`Node::run_topic_changes`): a topic of a hundred partitions creates their
/// files and syncs them, about 1.5-2.5 ms each, and the loop does a few at a time between its
/// other work rather than all in one turn.
pub(super) enum PendingTopicChange {
    /// Start (open or recover) one partition of a topic that entered the image or grew.
    Start { topic: TopicRecord, index: i32 },
    /// Then apply the topic's settings to its partitions here ([`apply_topic_settings`]).
    Settle {
        topic: TopicRecord,
        from: i32,
        config_changed: bool,
    },
    /// Stop a deleted topic's partitions and remove their folders.
    Delete(TopicRecord),
    /// Remove the folders of topics deleted while the node was away, as of the image's applied
    /// offset when this was queued (`partition_dirs::sweep_leftovers`): every start queued
    /// before it has run by then.
    Sweep { applied: u64 },
}

/// The offset below which `state_machine` (the metadata partition's) has applied everything.
fn applied_offset(state_machine: &KeyValueStateMachine) -> u64 {
    (state_machine.last_applied_offset() + 1).max(0) as u64
}

/// Brings the images of the metadata partition's key-value state up to date (ACLs, SCRAM
/// credentials, dynamic node configs, and the topic image: [`Topics::apply_image`]); returns
/// the topic image's changes for the node to make (mod.rs, `Node::apply_metadata_records`).
pub(super) fn apply_images(
    handlers: &mut super::handlers::State,
    host: &Host<AnyIo>,
    table: &PartitionTable,
) -> Option<Vec<TopicChange>> {
    let metadata = super::context::metadata_raft(host, table);
    let state_machine = super::context::metadata_state(host, table);
    if let Some(applied) = handlers.acl_image.apply(state_machine, metadata) {
        handlers.acls.applied(applied);
    }
    let applied = applied_offset(state_machine);
    // SCRAM credentials and dynamic node configs are records of the same state
    // (scram_record.rs, broker_configs.rs), applied before the admin requests waiting for
    // them are answered (by the node, after this).
    handlers
        .credentials
        .refresh(applied, state_machine.entries());
    handlers
        .broker_configs
        .refresh(applied, state_machine.entries());
    handlers
        .topics
        .apply_image(state_machine, applied, metadata.epoch())
}

impl Topics {
    /// Brings the topic image up to the metadata partition's key-value state (which holds the
    /// latest snapshot plus every committed record applied after it, snapshots.rs), `applied`
    /// being its [`applied_offset`] and `epoch` the metadata log's current epoch. Returns the
    /// partitions the node must start and stop, in order; `None` when nothing was applied
    /// since the last look and the leftovers of earlier runs were already looked at (then
    /// there is nothing to do but answer the admin requests waiting).
    ///
    /// The image is derived from the key-value state, not from a replay of the log: the log
    /// below its start is gone once a snapshot covers it, and the state is what a snapshot
    /// keeps (one entry per topic, keyed by its name).
    pub(super) fn apply_image(
        &mut self,
        state_machine: &KeyValueStateMachine,
        applied: u64,
        epoch: u32,
    ) -> Option<Vec<TopicChange>> {
        if applied == self.applied_offset && self.swept.is_some() {
            return None;
        }
        let mut present = Vec::new();
        let prefix = Bytes::from_static(TOPIC_RECORD_KEY_PREFIX);
        for (key, value) in state_machine.entries().range(prefix..) {
            let Some(name) = key.strip_prefix(TOPIC_RECORD_KEY_PREFIX) else {
                break;
            };
            match TopicRecord::decode_value(value) {
                Ok(topic) if topic.name.as_bytes() == name => present.push(topic),
                Ok(topic) => {
                    tracing::warn!(topic = %topic.name, "topic record under another topic's key skipped")
                }
                Err(error) => tracing::warn!(%error, "topic record skipped"),
            }
        }
        self.applied_offset = applied;
        let mut changes = Vec::new();
        // Deletions first (delete_topics.rs): a topic whose key is gone from the state (a
        // tombstone was applied), or whose record now carries another topic id (deleted and
        // created again, both applied since the last look), stops and loses its folders
        // before a namesake starts.
        let gone: Vec<TopicRecord> = self
            .image
            .values()
            .filter(|t| {
                !present
                    .iter()
                    .any(|p| p.name == t.name && p.topic_id == t.topic_id)
            })
            .cloned()
            .collect();
        for topic in gone {
            self.image.remove(&topic.name);
            changes.push(TopicChange::Deleted(topic));
        }
        for topic in present {
            self.proposed.remove(&topic.name);
            if let Some(known) = self.image.get(&topic.name) {
                // The same topic id (another one was stopped above): a config change
                // (configs.rs) or added partitions (create_partitions.rs). Retention and the
                // other readers of `topic_config` see the new config from here on; partitions
                // only ever grow.
                if *known == topic {
                    continue;
                }
                let (known_partitions, config_changed) =
                    (known.partitions, known.config != topic.config);
                self.image.insert(topic.name.clone(), topic.clone());
                changes.push(TopicChange::Started {
                    topic,
                    from: known_partitions,
                    config_changed,
                });
                continue;
            }
            self.image.insert(topic.name.clone(), topic.clone());
            changes.push(TopicChange::Started {
                topic,
                from: 0,
                config_changed: false,
            });
        }
        // Changes applied (or proposed in an epoch that is over) are no longer in flight.
        self.changed
            .retain(|_, (_, offset, proposed_in)| *offset >= applied && *proposed_in == epoch);
        Some(changes)
    }
}

/// A topic's partitions here take its settings once its new partitions started: its
/// `snapshot.minimum.records`, and when its config changed (`config_changed`) its segment size
/// and cleanup policy ([`apply_log_config_change`]).
pub(super) fn apply_topic_settings(
    host: &mut Host<AnyIo>,
    table: &PartitionTable,
    config: &NodeConfig,
    topic: &TopicRecord,
    from: i32,
    config_changed: bool,
) {
    apply_snapshot_minimum_records(host, table, topic);
    if from == 0 {
        tracing::info!(topic = %topic.name, partitions = topic.partitions, "topic created");
        return;
    }
    if config_changed {
        apply_log_config_change(host, table, config, topic);
    }
    tracing::info!(topic = %topic.name, partitions = topic.partitions, config = ?topic.config, "topic changed");
}

/// A topic's `segment.bytes` or `cleanup.policy` changed (configs.rs): its partitions
/// here take the new segment size for their next segment, and start or stop running their
/// state machine with snapshots (`Host::set_keeps_snapshots`). A partition whose state
/// machine cannot be reloaded (a storage error reading its snapshot) keeps its old policy
/// until the node restarts, and says so in the log; the topic record stays the truth.
fn apply_log_config_change(
    host: &mut Host<AnyIo>,
    table: &PartitionTable,
    config: &NodeConfig,
    topic: &TopicRecord,
) {
    let segment_size_bytes = topic_log_config(config, topic).segment_size_bytes;
    let keeps_snapshots =
        super::snapshots::keeps_snapshots(&topic.name, Some(topic.config.cleanup_policy));
    for id in topic_partition_ids(table, topic) {
        host.set_segment_size_bytes(id, segment_size_bytes);
        if let Err(error) = host.set_keeps_snapshots(id, keeps_snapshots) {
            tracing::error!(partition = id, %error, cleanup_policy = topic.config.cleanup_policy.as_str(), "the new cleanup.policy takes effect at the next start");
        }
    }
}

/// The partitions of `topic` (this incarnation of its name) this node runs.
pub(super) fn topic_partition_ids(table: &PartitionTable, topic: &TopicRecord) -> Vec<PartitionId> {
    table
        .ids()
        .filter(|id| {
            let hosted = table.get(*id);
            hosted.topic == topic.name && hosted.topic_id == topic.topic_id
        })
        .collect()
}

/// Gives the topic's partitions its `snapshot.minimum.records` (or the node's, when unset);
/// their next snapshot-generation check uses it.
fn apply_snapshot_minimum_records(
    host: &mut Host<AnyIo>,
    table: &PartitionTable,
    topic: &TopicRecord,
) {
    let min_records = topic
        .config
        .snapshot_minimum_records
        .map(|n| n.max(1) as u64);
    for id in topic_partition_ids(table, topic) {
        host.set_snapshot_min_records(id, min_records);
    }
}

/// Whether this node runs partition `index` of `topic`: it is one of the partition's
/// replicas (placement.rs), or an observer (observers replicate every partition, without
/// voting).
pub(super) fn hosts_partition(config: &NodeConfig, topic: &TopicRecord, index: i32) -> bool {
    !config.is_voter()
        || topic
            .replicas_of(index, &configured_voter_ids(config))
            .contains(&config.node_id)
}

/// The folder of partition `index` of topic `name`.
pub(super) fn partition_dir(config: &NodeConfig, name: &str, index: i32) -> PathBuf {
    config.metadata_log_dir.join(format!("{name}-{index}"))
}

/// Opens (or recovers) a topic partition's folder and starts its Raft group, whose voters
/// are the partition's replicas; `created_below_offset` is the topic image's applied offset
/// (partition_dirs.rs). `folder_made`: the `folder-prep` thread has just made the folder and
/// made it durable (folder_prep.rs), so it is opened as it is. Adds the partition to `table`;
/// returns its id, its folder and what its recovery found. The node then gives it its
/// producer state and metrics (mod.rs, `Node::start_partition`).
pub(super) fn open_partition(
    host: &mut Host<AnyIo>,
    table: &mut PartitionTable,
    config: &NodeConfig,
    created_below_offset: u64,
    (topic, index): (&TopicRecord, i32),
    folder_made: bool,
    now: u64,
) -> Result<(PartitionId, PathBuf, RecoveredState), NodeError> {
    let hosted = HostedPartition {
        topic: topic.name.clone(),
        topic_id: topic.topic_id,
        index,
    };
    let dir = partition_dir(config, &topic.name, index);
    if !folder_made {
        prepare_partition_dir(host, &dir, topic.topic_id, created_below_offset)?;
    }
    let log_config = LogConfig {
        folder_durable_before_open: folder_made,
        ..topic_log_config(config, topic)
    };
    let id = table.add(hosted);
    let replicas = topic.replicas_of(index, &configured_voter_ids(config));
    let mut quorum = quorum_config(config, &replicas)?;
    // A Kafka topic partition's first record is at offset 0, as in Kafka: a leader of an
    // empty log appends no LeaderChangeMessage (QuorumConfig::leader_change_on_empty_log).
    // `__consumer_offsets` keeps it: a coordinator serves once its state machine applied
    // the record opening the leader's epoch (groups.rs, `caught_up_leader_epoch`), and in
    // an empty partition that record is the LeaderChangeMessage.
    quorum.leader_change_on_empty_log = topic.name == crate::groups::offsets::OFFSETS_TOPIC;
    // Its followers apply nothing a client reads from them: they learn the high-watermark
    // with the next records, so a commit's answer never sends them around an extra fetch
    // while the next record arrives (QuorumConfig::prompt_high_watermark).
    quorum.prompt_high_watermark = false;
    let spec = PartitionSpec {
        id,
        dir: dir.clone(),
        log_config,
        keeps_snapshots: super::snapshots::keeps_snapshots(
            &topic.name,
            Some(topic.config.cleanup_policy),
        ),
    };
    let recovered = match host.add_partition(&quorum, spec, super::random_seed(), now) {
        Ok(recovered) => recovered,
        Err(error) => {
            table.remove(id);
            return Err(error.into());
        }
    };
    // Kafka's controller makes a new partition's first replica its leader; here the first
    // replica stands at once instead of after a random election timeout (1-2 s by default,
    // what an auto-created topic's first Metadata answers used to wait for). The core
    // ignores this unless the partition is brand new (epoch 0, empty log, no vote).
    if replicas.first() == Some(&config.node_id) {
        host.stand_first(now, id)?;
    }
    Ok((id, dir, recovered))
}

/// The log settings of a topic's partitions.
fn topic_log_config(config: &NodeConfig, topic: &TopicRecord) -> LogConfig {
    LogConfig {
        segment_size_bytes: topic
            .config
            .segment_bytes
            .map_or(config.segment_size_bytes, |b| b as u64),
        max_batch_size_bytes: (config.message_max_bytes as usize)
            .max(ringlog_engine::batch::DEFAULT_MAX_BATCH_SIZE_BYTES),
        // After a crash the batch lists stand in for reading; the batches they name are
        // checked behind the start (listed_checks.rs).
        defer_listed_check_after_crash: true,
        ..LogConfig::default()
    }
}

/// At start-up, before the loop serves: the partition folders to recover ahead (mod.rs,
/// `Node::preopen_partitions`), with their log settings, and the number of topics known: those
/// of every topic this node knows from its own metadata log (the state at its latest snapshot
/// plus every record after it that it holds, committed or not) that it hosts and whose folder
/// is here, so that starting them when the committed topic image reaches them takes no
/// recovery on the event loop. Recovery reads each active segment (up to `segment.bytes`): on
/// a node restarted under load that held its loop for 4.9-9.8 s (docs/benchmarks.md,
/// 2026-12-01) while it was a voter of every partition. A folder that fails to open then is
/// opened (and reported) when started.
pub(super) fn preopen_list(
    host: &mut Host<AnyIo>,
    table: &PartitionTable,
    config: &NodeConfig,
) -> Result<(usize, Vec<(PathBuf, LogConfig)>), NodeError> {
    let partition = super::context::metadata_partition_id(table);
    let store = host.store(partition).expect("hosted partition");
    let mut known = store.snapshots.state_machine.clone();
    let end = store.log.log_end_offset() as u64;
    let mut offset = (known.last_applied_offset() + 1).max(0) as u64;
    while offset < end {
        let bytes = host.read(partition, offset, 1 << 20)?;
        if bytes.is_empty() {
            break;
        }
        let before = offset;
        for batch in ringlog_engine::batch::batches(&bytes) {
            let Ok(batch) = batch else { break };
            offset = batch.next_offset() as u64;
            // What cannot be applied here is left to the committed image.
            let _ = known.apply(&batch);
        }
        if offset == before {
            break;
        }
    }
    let prefix = Bytes::from_static(TOPIC_RECORD_KEY_PREFIX);
    let topics: Vec<TopicRecord> = known
        .entries()
        .range(prefix..)
        .take_while(|(key, _)| key.starts_with(TOPIC_RECORD_KEY_PREFIX))
        .filter_map(|(_, value)| TopicRecord::decode_value(value).ok())
        .collect();
    let mut folders = Vec::new();
    for topic in &topics {
        for index in 0..topic.partitions {
            if !hosts_partition(config, topic, index) {
                continue;
            }
            let dir = partition_dir(config, &topic.name, index);
            if folder_topic_id(&dir) != Some(topic.topic_id) {
                continue;
            }
            folders.push((dir, topic_log_config(config, topic)));
        }
    }
    Ok((topics.len(), folders))
}
