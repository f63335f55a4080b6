//! The topic image: committed topic records of `__cluster_metadata-0` applied to this node, each
//! new topic's partitions opened and started (those this node is a replica of, placement.rs),
//! deleted ones stopped (delete_topics.rs), changed ones (configs, added partitions) updated,
//! and the admin answers that waited for them.

use std::path::PathBuf;

use bytes::Bytes;
use ringlog_engine::log::LogConfig;
use ringlog_replication::state_machine::StateMachine;

use super::convert::HostedPartition;
use super::topics::{TOPIC_RECORD_KEY_PREFIX, TopicRecord, quorum_config};
use super::{Node, NodeError};
use ringlog_replication::host::PartitionSpec;

impl Node {
    /// Brings the topic image up to the metadata partition's key-value state (which holds the
    /// latest snapshot plus every committed record applied after it, snapshots.rs), starting
    /// the partitions of new topics, then answers the CreateTopics waiting for them.
    ///
    /// The image is derived from the key-value state, not from a replay of the log: the log
    /// below its start is gone once a snapshot covers it, and the state is what a snapshot
    /// keeps (one entry per topic, keyed by its name).
    pub(super) fn apply_metadata_records(&mut self) -> Result<(), NodeError> {
        // Between work lists, like the rest of this: retention's snapshots are reported to
        // the core by the same pump round.
        self.maybe_enforce_retention()?;
        if let Some(applied) = self.handlers.acl_image.apply(
            super::context::metadata_state(&self.host, &self.table),
            super::context::metadata_raft(&self.host, &self.table),
        ) {
            self.handlers.acls.applied(applied);
        }
        // The fields, not `metadata_state()`: the images below are refreshed while it is read.
        let partition = self.metadata_partition_id();
        let state_machine = &self
            .host
            .store(partition)
            .expect("hosted partition")
            .snapshots
            .state_machine;
        let applied = (state_machine.last_applied_offset() + 1).max(0) as u64;
        // SCRAM credentials and dynamic node configs are records of the same state
        // (scram_record.rs, broker_configs.rs), applied before the admin requests waiting for
        // them are answered below.
        self.handlers
            .credentials
            .refresh(applied, state_machine.entries());
        self.handlers
            .broker_configs
            .refresh(applied, state_machine.entries());
        if applied == self.handlers.topics.applied_offset && self.handlers.topics.swept.is_some() {
            return self.answer_admin();
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
        self.handlers.topics.applied_offset = applied;
        // Deletions first (delete_topics.rs): a topic whose key is gone from the state (a
        // tombstone was applied), or whose record now carries another topic id (deleted and
        // created again, both applied since the last look), stops and loses its folders
        // before a namesake starts.
        let gone: Vec<TopicRecord> = self
            .handlers
            .topics
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
            self.stop_topic(&topic)?;
            self.handlers.topics.image.remove(&topic.name);
        }
        for topic in present {
            self.handlers.topics.proposed.remove(&topic.name);
            if let Some(known) = self.handlers.topics.image.get(&topic.name) {
                // The same topic id (another one was stopped above): a config change
                // (configs.rs) or added partitions (create_partitions.rs). Retention and the
                // other readers of `topic_config` see the new config from here on; partitions
                // only ever grow.
                if *known == topic {
                    continue;
                }
                let (known_partitions, config_changed) =
                    (known.partitions, known.config != topic.config);
                for index in known_partitions..topic.partitions {
                    if self.hosts_partition(&topic, index) {
                        self.start_partition(&topic, index)?;
                    }
                }
                self.apply_snapshot_minimum_records(&topic);
                if config_changed {
                    self.apply_log_config_change(&topic);
                }
                tracing::info!(topic = %topic.name, partitions = topic.partitions, config = ?topic.config, "topic changed");
                self.handlers.topics.image.insert(topic.name.clone(), topic);
                continue;
            }
            for index in 0..topic.partitions {
                if self.hosts_partition(&topic, index) {
                    self.start_partition(&topic, index)?;
                }
            }
            self.apply_snapshot_minimum_records(&topic);
            tracing::info!(topic = %topic.name, partitions = topic.partitions, "topic created");
            self.handlers.topics.image.insert(topic.name.clone(), topic);
        }
        // Changes applied (or proposed in an epoch that is over) are no longer in flight.
        let epoch = self.metadata_raft().epoch();
        self.handlers
            .topics
            .changed
            .retain(|_, (_, offset, proposed_in)| *offset >= applied && *proposed_in == epoch);
        self.sweep_leftovers()?;
        self.answer_admin()
    }

    /// A topic's `segment.bytes` or `cleanup.policy` changed (configs.rs): its partitions
    /// here take the new segment size for their next segment, and start or stop running their
    /// state machine with snapshots (`Host::set_keeps_snapshots`). A partition whose state
    /// machine cannot be reloaded (a storage error reading its snapshot) keeps its old policy
    /// until the node restarts, and says so in the log; the topic record stays the truth.
    fn apply_log_config_change(&mut self, topic: &TopicRecord) {
        let segment_size_bytes = self.topic_log_config(topic).segment_size_bytes;
        let keeps_snapshots =
            super::snapshots::keeps_snapshots(&topic.name, Some(topic.config.cleanup_policy));
        for id in self.topic_partition_ids(topic) {
            self.host.set_segment_size_bytes(id, segment_size_bytes);
            if let Err(error) = self.host.set_keeps_snapshots(id, keeps_snapshots) {
                tracing::error!(partition = id, %error, cleanup_policy = topic.config.cleanup_policy.as_str(), "the new cleanup.policy takes effect at the next start");
            }
        }
    }

    /// The partitions of `topic` (this incarnation of its name) this node runs.
    fn topic_partition_ids(&self, topic: &TopicRecord) -> Vec<ringlog_replication::PartitionId> {
        self.table
            .ids()
            .filter(|id| {
                let hosted = self.table.get(*id);
                hosted.topic == topic.name && hosted.topic_id == topic.topic_id
            })
            .collect()
    }

    /// Gives the topic's partitions its `snapshot.minimum.records` (or the node's, when unset);
    /// their next snapshot-generation check uses it.
    fn apply_snapshot_minimum_records(&mut self, topic: &TopicRecord) {
        let min_records = topic
            .config
            .snapshot_minimum_records
            .map(|n| n.max(1) as u64);
        for id in self.topic_partition_ids(topic) {
            self.host.set_snapshot_min_records(id, min_records);
        }
    }

    /// Whether this node runs partition `index` of `topic`: it is one of the partition's
    /// replicas (placement.rs), or an observer (observers replicate every partition, without
    /// voting).
    pub(super) fn hosts_partition(&self, topic: &TopicRecord, index: i32) -> bool {
        !self.config.is_voter()
            || topic
                .replicas_of(index, &self.configured_voter_ids())
                .contains(&self.config.node_id)
    }

    /// Opens (or recovers) a topic partition's folder and starts its Raft group, whose voters
    /// are the partition's replicas.
    fn start_partition(&mut self, topic: &TopicRecord, index: i32) -> Result<(), NodeError> {
        if let Some(error) = self.offline_partition_error(&topic.name, index) {
            // Taken offline by a storage error: it stays so until the node restarts.
            tracing::warn!(topic = %topic.name, index, error, "not starting an offline partition");
            return Ok(());
        }
        let hosted = HostedPartition {
            topic: topic.name.clone(),
            topic_id: topic.topic_id,
            index,
        };
        let dir: PathBuf = self
            .config
            .metadata_log_dir
            .join(format!("{}-{index}", topic.name));
        self.prepare_partition_dir(&dir, topic.topic_id)?;
        let log_config = self.topic_log_config(topic);
        let id = self.table.add(hosted);
        let replicas = topic.replicas_of(index, &self.configured_voter_ids());
        let mut quorum = quorum_config(&self.config, &replicas)?;
        // A Kafka topic partition's first record is at offset 0, as in Kafka: a leader of an
        // empty log appends no LeaderChangeMessage (QuorumConfig::leader_change_on_empty_log).
        // `__consumer_offsets` keeps it: a coordinator serves once its state machine applied
        // the record opening the leader's epoch (groups.rs, `caught_up_leader_epoch`), and in
        // an empty partition that record is the LeaderChangeMessage.
        quorum.leader_change_on_empty_log = topic.name == crate::groups::offsets::OFFSETS_TOPIC;
        let now = self.now_ms();
        let spec = PartitionSpec {
            id,
            dir: dir.clone(),
            log_config,
            keeps_snapshots: super::snapshots::keeps_snapshots(
                &topic.name,
                Some(topic.config.cleanup_policy),
            ),
        };
        let recovered = match self
            .host
            .add_partition(&quorum, spec, super::random_seed(), now)
        {
            Ok(recovered) => recovered,
            Err(error) => {
                self.table.remove(id);
                return Err(error.into());
            }
        };
        // Kafka's controller makes a new partition's first replica its leader; here the first
        // replica stands at once instead of after a random election timeout (1-2 s by default,
        // what an auto-created topic's first Metadata answers used to wait for). The core
        // ignores this unless the partition is brand new (epoch 0, empty log, no vote).
        if replicas.first() == Some(&self.config.node_id) {
            self.host.stand_first(now, id)?;
        }
        self.handlers.producers.adopt_preopened(id, &dir);
        // Idempotent producing's state exists from the partition's start and follows every
        // append, the follower's too: a follower that becomes leader answers its first Produce
        // without reading its whole log on the loop (seen in scripts/fault-run.sh as 1.5-6 s
        // turns on a new leader of a topic created while the node ran). A new partition's
        // log is empty, so this reads nothing; a preopened one was read before the loop.
        self.handlers.producers.ensure(&mut self.host, id)?;
        self.observer
            .add_partition(id, self.table.dir_name(id), &dir);
        tracing::info!(partition = id, dir = %dir.display(), ?recovered, "partition started");
        Ok(())
    }

    /// The log settings of a topic's partitions.
    fn topic_log_config(&self, topic: &TopicRecord) -> LogConfig {
        LogConfig {
            segment_size_bytes: topic
                .config
                .segment_bytes
                .map_or(self.config.segment_size_bytes, |b| b as u64),
            max_batch_size_bytes: (self.config.message_max_bytes as usize)
                .max(ringlog_engine::batch::DEFAULT_MAX_BATCH_SIZE_BYTES),
            ..LogConfig::default()
        }
    }

    /// At start-up, before the loop serves: recovers the partitions of every topic this node
    /// knows from its own metadata log (the state at its latest snapshot plus every record after
    /// it that it holds, committed or not) and whose folder is here, so that starting them when
    /// the committed topic image reaches them takes no recovery on the event loop. Recovery
    /// reads each active segment (up to `segment.bytes`): on a node restarted under load that
    /// held its loop for 4.9-9.8 s (docs/benchmarks.md, 2026-12-01) while it was a voter of
    /// every partition. A folder that fails to open here is opened (and reported) when started.
    pub(super) fn preopen_partitions(&mut self) -> Result<(), NodeError> {
        let started = std::time::Instant::now();
        let partition = self.metadata_partition_id();
        let store = self.host.store(partition).expect("hosted partition");
        let mut known = store.snapshots.state_machine.clone();
        let end = store.log.log_end_offset() as u64;
        let mut offset = (known.last_applied_offset() + 1).max(0) as u64;
        while offset < end {
            let bytes = self.host.read(partition, offset, 1 << 20)?;
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
        let mut opened = 0;
        for topic in &topics {
            for index in 0..topic.partitions {
                if !self.hosts_partition(topic, index) {
                    continue;
                }
                let dir = self
                    .config
                    .metadata_log_dir
                    .join(format!("{}-{index}", topic.name));
                if super::delete_topics::folder_topic_id(&dir) != Some(topic.topic_id) {
                    continue;
                }
                let log_config = self.topic_log_config(topic);
                match self.host.preopen(dir.clone(), log_config) {
                    Ok(()) => {
                        self.handlers
                            .producers
                            .read_preopened(&mut self.host, &dir)?;
                        opened += 1;
                    }
                    Err(error) => {
                        tracing::warn!(dir = %dir.display(), %error, "not recovered ahead; it is opened when started")
                    }
                }
            }
        }
        tracing::info!(
            topics = topics.len(),
            partitions = opened,
            took_ms = started.elapsed().as_millis() as u64,
            "partitions recovered before serving"
        );
        Ok(())
    }
}
