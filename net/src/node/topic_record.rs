//! The topic record's format: its key, the topic's config ([`TopicConfig`], under Kafka's
//! property names) and the record itself ([`TopicRecord`]: name, topic id, partition count,
//! config, replica placement), encoded as the tab-separated text topics.rs's module doc shows.
//! With the record go the rules of a topic's name ([`validate_topic_name`],
//! [`is_internal_topic`]). topics.rs re-exports everything here, so callers name it through
//! `topics::`.

use std::collections::BTreeMap;

use ringlog_engine::batch::Compression;
use ringlog_replication::NodeId;

use crate::groups::offsets::OFFSETS_TOPIC;
use crate::protocol::ErrorCode;
use crate::protocol::create_topics_request as ct_req;
use crate::protocol::wire::Uuid;

/// Kafka's limit on a topic name's length.
const TOPIC_NAME_MAX_LEN: usize = 249;

/// Whether `name` is an internal topic: the node's own state (`__cluster_metadata`; the names
/// Kafka keeps for `__consumer_offsets`, `__transaction_state` and the like). Every name that
/// starts with "__" is, so no client-created topic can ever be one: clients may read them, but
/// never create, delete or produce to them (Produce answers INVALID_TOPIC_EXCEPTION, as Kafka's
/// `ReplicaManager.appendToLocalLog` does for its internal topics).
pub fn is_internal_topic(name: &str) -> bool {
    name.starts_with("__")
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not "." or "..". Internal names
/// ([`is_internal_topic`]) cannot be created by clients.
pub fn validate_topic_name(name: &str) -> Result<(), ErrorCode> {
    let legal = !name.is_empty()
        && name.len() <= TOPIC_NAME_MAX_LEN
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if legal && !is_internal_topic(name) {
        Ok(())
    } else {
        Err(ErrorCode::InvalidTopicException)
    }
}

/// A topic record's key is this prefix followed by the topic's name, so the metadata
/// partition's key-value state (and so its snapshot) holds one entry per topic.
pub const TOPIC_RECORD_KEY_PREFIX: &[u8] = b"ringlog.topic.v2/";

/// The key of `name`'s topic record.
pub fn topic_record_key(name: &str) -> Vec<u8> {
    let mut key = TOPIC_RECORD_KEY_PREFIX.to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

/// Kafka's `retention.ms` default: 7 days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// The smallest `segment.bytes` a topic may ask for (the node's `metadata.log.segment.bytes`
/// floor); the largest is 1 GiB (index positions are 32-bit).
const SEGMENT_BYTES_MIN: i64 = 64 * 1024;
const SEGMENT_BYTES_MAX: i64 = 1 << 30;

/// What happens to a topic's old records (`cleanup.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// Whole segments are deleted from the start by `retention.bytes` / `retention.ms`
    /// (retention.rs).
    Delete,
    /// The partition is a key-value state machine; its log is trimmed behind KIP-630 snapshots
    /// (snapshots.rs).
    Snapshot,
    /// Kafka's `compact`: every record must have a key (Produce refuses a keyless one with
    /// INVALID_RECORD, naming it in RecordErrors, as Kafka does), nothing is deleted by
    /// retention, and DeleteRecords is refused. The log is kept whole: sealed segments are not
    /// rewritten to drop the records a later one with the same key superseded (Kafka's log
    /// cleaner), so a consumer from the start reads every record, the latest value of each key
    /// included, and the partition grows with every record (docs/clients.md, "Compacted
    /// topics").
    Compact,
    /// Kafka's `compact,delete`: keys required as for `compact`, and whole segments deleted by
    /// `retention.bytes` / `retention.ms` as for `delete`.
    CompactDelete,
}

impl CleanupPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Snapshot => "snapshot",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }

    /// Kafka's list value (`delete`, `compact`, `compact,delete` in either order, with spaces
    /// around the commas) or ringlog's `snapshot`, which combines with nothing.
    pub fn parse(value: &str) -> Option<CleanupPolicy> {
        let mut compact = false;
        let mut delete = false;
        let mut snapshot = false;
        for item in value.split(',') {
            match item.trim() {
                "compact" if !compact => compact = true,
                "delete" if !delete => delete = true,
                "snapshot" if !snapshot => snapshot = true,
                _ => return None,
            }
        }
        match (compact, delete, snapshot) {
            (false, true, false) => Some(CleanupPolicy::Delete),
            (true, false, false) => Some(CleanupPolicy::Compact),
            (true, true, false) => Some(CleanupPolicy::CompactDelete),
            (false, false, true) => Some(CleanupPolicy::Snapshot),
            _ => None,
        }
    }

    /// The policy's items, as IncrementalAlterConfigs' APPEND and SUBTRACT see the list.
    pub fn items(self) -> &'static [&'static str] {
        match self {
            CleanupPolicy::Delete => &["delete"],
            CleanupPolicy::Snapshot => &["snapshot"],
            CleanupPolicy::Compact => &["compact"],
            CleanupPolicy::CompactDelete => &["compact", "delete"],
        }
    }

    /// Whether retention deletes whole segments from the start (`delete` is in the list).
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }

    /// Whether every record must have a key (`compact` is in the list).
    pub fn requires_keys(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }
}

/// `compression.type`: the codec a topic's batches are stored with. `producer` (Kafka's
/// default) stores each batch as its producer compressed it; any other value makes the leader
/// recompress a batch sent with another codec before it is appended (produce_validation.rs,
/// `recompress_batches`), as Kafka's LogValidator does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicCompression {
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl TopicCompression {
    pub fn parse(value: &str) -> Option<TopicCompression> {
        Some(match value.trim() {
            "producer" => TopicCompression::Producer,
            "uncompressed" => TopicCompression::Uncompressed,
            "gzip" => TopicCompression::Gzip,
            "snappy" => TopicCompression::Snappy,
            "lz4" => TopicCompression::Lz4,
            "zstd" => TopicCompression::Zstd,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TopicCompression::Producer => "producer",
            TopicCompression::Uncompressed => "uncompressed",
            TopicCompression::Gzip => "gzip",
            TopicCompression::Snappy => "snappy",
            TopicCompression::Lz4 => "lz4",
            TopicCompression::Zstd => "zstd",
        }
    }

    /// The codec every stored batch must have; `None`: the producer's, whatever it is.
    pub fn codec(self) -> Option<Compression> {
        match self {
            TopicCompression::Producer => None,
            TopicCompression::Uncompressed => Some(Compression::None),
            TopicCompression::Gzip => Some(Compression::Gzip),
            TopicCompression::Snappy => Some(Compression::Snappy),
            TopicCompression::Lz4 => Some(Compression::Lz4),
            TopicCompression::Zstd => Some(Compression::Zstd),
        }
    }
}

/// Kafka's defaults of the configs a topic record stores only when they differ.
const DEFAULT_FLUSH_MESSAGES: i64 = i64::MAX;
const DEFAULT_FLUSH_MS: i64 = i64::MAX;
const DEFAULT_DELETE_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;
const DEFAULT_MIN_COMPACTION_LAG_MS: i64 = 0;
const DEFAULT_MAX_COMPACTION_LAG_MS: i64 = i64::MAX;

/// A topic's configuration, as CreateTopics accepted it and the topic record stores it.
/// Kafka's names and defaults; `-1` means "no limit" for both retention bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicConfig {
    pub cleanup_policy: CleanupPolicy,
    /// `retention.bytes`: delete the oldest segments while the partition is larger (-1: none).
    pub retention_bytes: i64,
    /// `retention.ms`: delete a segment whose newest record is older (-1: none).
    pub retention_ms: i64,
    /// `segment.bytes`: this topic's segment size; `None` takes the node's
    /// `metadata.log.segment.bytes`.
    pub segment_bytes: Option<i64>,
    /// `snapshot.minimum.records` (KIP-630's name) of a `cleanup.policy=snapshot` topic: the
    /// records between its partitions' snapshots; `None` takes the node's
    /// `controller.snapshot.minimum.records`.
    pub snapshot_minimum_records: Option<i64>,
    /// `max.message.bytes`: the largest batch a Produce may bring to this topic; `None` takes
    /// the node's `message.max.bytes`. Never more than the segment size (topics.rs,
    /// `produce_max_batch_bytes`).
    pub max_message_bytes: Option<i64>,
    /// `compression.type` ([`TopicCompression`]).
    pub compression_type: TopicCompression,
    /// `flush.messages` and `flush.ms`: Kafka's fsync interval. Stored and described; every
    /// batch is fsynced on a majority before it is acknowledged whatever they say (durability
    /// never waits for an interval here), so no value makes writes less durable.
    pub flush_messages: i64,
    pub flush_ms: i64,
    /// `delete.retention.ms`, `min.compaction.lag.ms`, `max.compaction.lag.ms`: Kafka's log
    /// cleaner's settings, validated as Kafka validates them, stored and described. ringlog has
    /// no log cleaner yet (`cleanup.policy`, [`CleanupPolicy::Compact`]), so they change
    /// nothing until it does.
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            cleanup_policy: CleanupPolicy::Delete,
            retention_bytes: -1,
            retention_ms: DEFAULT_RETENTION_MS,
            segment_bytes: None,
            snapshot_minimum_records: None,
            max_message_bytes: None,
            compression_type: TopicCompression::Producer,
            flush_messages: DEFAULT_FLUSH_MESSAGES,
            flush_ms: DEFAULT_FLUSH_MS,
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_compaction_lag_ms: DEFAULT_MIN_COMPACTION_LAG_MS,
            max_compaction_lag_ms: DEFAULT_MAX_COMPACTION_LAG_MS,
        }
    }
}

/// A topic config that CreateTopics (or a topic record) cannot take, with the property's name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopicConfigError {
    #[error(
        "topic config {name} is not supported (supported: cleanup.policy, retention.bytes, retention.ms, segment.bytes, max.message.bytes, snapshot.minimum.records, compression.type, flush.messages, flush.ms, delete.retention.ms, min.compaction.lag.ms, max.compaction.lag.ms; message.format.version accepted and ignored)"
    )]
    Unsupported { name: String },
    #[error("topic config {name}={value:?} is invalid: {reason}")]
    Invalid {
        name: String,
        value: Option<String>,
        reason: &'static str,
    },
}

impl TopicConfig {
    /// The config of a CreateTopics topic: defaults, overridden by each named config in turn.
    pub fn from_create_configs(
        configs: &[ct_req::CreatableTopicConfig],
    ) -> Result<TopicConfig, TopicConfigError> {
        let mut config = TopicConfig::default();
        for c in configs {
            config.set(&c.name, c.value.as_deref())?;
        }
        config.check()?;
        Ok(config)
    }

    /// What one property alone cannot tell: `snapshot.minimum.records` applies only to a
    /// snapshot topic (on a delete topic it would do nothing, so it is refused).
    pub fn check(&self) -> Result<(), TopicConfigError> {
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            return Err(TopicConfigError::Invalid {
                name: "min.compaction.lag.ms".into(),
                value: Some(self.min_compaction_lag_ms.to_string()),
                reason: "must not be greater than max.compaction.lag.ms",
            });
        }
        match self.snapshot_minimum_records {
            Some(records) if self.cleanup_policy != CleanupPolicy::Snapshot => {
                Err(TopicConfigError::Invalid {
                    name: "snapshot.minimum.records".into(),
                    value: Some(records.to_string()),
                    reason: "applies only to cleanup.policy=snapshot topics",
                })
            }
            _ => Ok(()),
        }
    }

    /// Sets one property by its Kafka name. A null value (Kafka: "use the default") resets it.
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), TopicConfigError> {
        let invalid = |reason| TopicConfigError::Invalid {
            name: name.to_string(),
            value: value.map(str::to_string),
            reason,
        };
        let defaults = TopicConfig::default();
        let number = |min: i64, max: i64, reason| {
            value
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| invalid(reason))
        };
        match name {
            "cleanup.policy" => {
                self.cleanup_policy = match value {
                    None => CleanupPolicy::Delete,
                    Some(value) => CleanupPolicy::parse(value).ok_or_else(|| {
                        invalid("must be delete, compact, compact,delete or snapshot")
                    })?,
                }
            }
            "retention.bytes" => {
                self.retention_bytes = match value {
                    None => defaults.retention_bytes,
                    Some(_) => number(-1, i64::MAX, "must be -1 or a byte count")?,
                }
            }
            "retention.ms" => {
                self.retention_ms = match value {
                    None => defaults.retention_ms,
                    Some(_) => number(-1, i64::MAX, "must be -1 or a duration in ms")?,
                }
            }
            "segment.bytes" => {
                self.segment_bytes = match value {
                    None => None,
                    Some(_) => Some(number(
                        SEGMENT_BYTES_MIN,
                        SEGMENT_BYTES_MAX,
                        "must be from 65536 to 1073741824",
                    )?),
                }
            }
            "snapshot.minimum.records" => {
                self.snapshot_minimum_records = match value {
                    None => None,
                    Some(_) => Some(number(1, i64::MAX, "must be at least 1")?),
                }
            }
            "max.message.bytes" => {
                self.max_message_bytes = match value {
                    None => None,
                    Some(_) => Some(number(
                        0,
                        i64::from(i32::MAX),
                        "must be a byte count from 0 to 2147483647",
                    )?),
                }
            }
            "compression.type" => {
                self.compression_type = match value {
                    None => defaults.compression_type,
                    Some(value) => TopicCompression::parse(value).ok_or_else(|| {
                        invalid("must be uncompressed, zstd, lz4, snappy, gzip or producer")
                    })?,
                }
            }
            "flush.messages" => {
                self.flush_messages = match value {
                    None => defaults.flush_messages,
                    Some(_) => number(1, i64::MAX, "must be at least 1")?,
                }
            }
            "flush.ms" => {
                self.flush_ms = match value {
                    None => defaults.flush_ms,
                    Some(_) => number(0, i64::MAX, "must be a duration in ms")?,
                }
            }
            "delete.retention.ms" => {
                self.delete_retention_ms = match value {
                    None => defaults.delete_retention_ms,
                    Some(_) => number(0, i64::MAX, "must be a duration in ms")?,
                }
            }
            "min.compaction.lag.ms" => {
                self.min_compaction_lag_ms = match value {
                    None => defaults.min_compaction_lag_ms,
                    Some(_) => number(0, i64::MAX, "must be a duration in ms")?,
                }
            }
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = match value {
                    None => defaults.max_compaction_lag_ms,
                    Some(_) => number(1, i64::MAX, "must be a duration of at least 1 ms")?,
                }
            }
            // Kafka 3.x takes `message.format.version` and ignores it (the message format
            // follows the inter-broker protocol, RecordBatch v2 since 3.0; Kafka 4 removed the
            // config). Here too: a version string is accepted, nothing is stored, every batch is
            // v2. Anything else is refused as Kafka's validator refuses it.
            "message.format.version" => {
                let version = value.unwrap_or("3.0-IV1").trim();
                let numbers = version.split('-').next().unwrap_or("");
                let valid = !numbers.is_empty()
                    && numbers
                        .split('.')
                        .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if !valid {
                    return Err(invalid("must be a Kafka version such as 0.10.0 or 3.0-IV1"));
                }
            }
            _ => {
                return Err(TopicConfigError::Unsupported {
                    name: name.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The properties as `name=value` pairs, in the order the topic record writes them (a
    /// default `segment.bytes` is left out).
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut entries = vec![
            ("cleanup.policy", self.cleanup_policy.as_str().to_string()),
            ("retention.bytes", self.retention_bytes.to_string()),
            ("retention.ms", self.retention_ms.to_string()),
        ];
        if let Some(bytes) = self.segment_bytes {
            entries.push(("segment.bytes", bytes.to_string()));
        }
        if let Some(records) = self.snapshot_minimum_records {
            entries.push(("snapshot.minimum.records", records.to_string()));
        }
        if let Some(bytes) = self.max_message_bytes {
            entries.push(("max.message.bytes", bytes.to_string()));
        }
        // The rest only when set away from Kafka's default: records written before they
        // existed read back the same.
        let defaults = TopicConfig::default();
        if self.compression_type != defaults.compression_type {
            entries.push((
                "compression.type",
                self.compression_type.as_str().to_string(),
            ));
        }
        for (name, value, default) in [
            (
                "flush.messages",
                self.flush_messages,
                defaults.flush_messages,
            ),
            ("flush.ms", self.flush_ms, defaults.flush_ms),
            (
                "delete.retention.ms",
                self.delete_retention_ms,
                defaults.delete_retention_ms,
            ),
            (
                "min.compaction.lag.ms",
                self.min_compaction_lag_ms,
                defaults.min_compaction_lag_ms,
            ),
            (
                "max.compaction.lag.ms",
                self.max_compaction_lag_ms,
                defaults.max_compaction_lag_ms,
            ),
        ] {
            if value != default {
                entries.push((name, value.to_string()));
            }
        }
        entries
    }
}

/// One topic of the metadata image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRecord {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: i32,
    pub config: TopicConfig,
    /// Each partition's replicas (its Raft group's voters), in partition order, the first the
    /// preferred leader (placement.rs). `None`: every configured voter, as for every topic
    /// created before replication factors existed and for `__consumer_offsets`.
    pub replicas: Option<Vec<Vec<NodeId>>>,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopicRecordError {
    #[error("topic record: {0}")]
    Malformed(&'static str),
}

impl TopicRecord {
    pub fn encode_value(&self) -> Vec<u8> {
        let id: String = self.topic_id.0.iter().map(|b| format!("{b:02x}")).collect();
        let mut text = format!(
            "name={}\ttopic_id={id}\tpartitions={}",
            self.name, self.partitions
        );
        for (name, value) in self.config.entries() {
            text.push_str(&format!("\t{name}={value}"));
        }
        if let Some(replicas) = &self.replicas {
            let lists: Vec<String> = replicas
                .iter()
                .map(|r| {
                    r.iter()
                        .map(NodeId::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            text.push_str(&format!("\t{REPLICAS_FIELD}={}", lists.join(";")));
        }
        text.into_bytes()
    }

    /// The replicas of partition `index`: the placement the record carries, or every one of
    /// `voters` for a record without one. Empty for an index the topic does not have.
    pub fn replicas_of(&self, index: i32, voters: &[NodeId]) -> Vec<NodeId> {
        if index < 0 || index >= self.partitions {
            return Vec::new();
        }
        match &self.replicas {
            Some(replicas) => replicas.get(index as usize).cloned().unwrap_or_default(),
            // Every voter, starting at a different one for each partition as Kafka's assignment
            // does: the first replica is the partition's first leader (`Raft::stand_first`),
            // so the leaders of a topic on every node spread over the nodes.
            None => {
                let mut rotated = voters.to_vec();
                if !rotated.is_empty() {
                    rotated.rotate_left(index as usize % voters.len());
                }
                rotated
            }
        }
    }

    pub fn decode_value(value: &[u8]) -> Result<TopicRecord, TopicRecordError> {
        let text = std::str::from_utf8(value).map_err(|_| TopicRecordError::Malformed("utf-8"))?;
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for field in text.split('\t') {
            let (k, v) = field
                .split_once('=')
                .ok_or(TopicRecordError::Malformed("field without '='"))?;
            fields.insert(k, v);
        }
        let name = fields
            .get("name")
            .ok_or(TopicRecordError::Malformed("no name"))?;
        if *name != OFFSETS_TOPIC {
            validate_topic_name(name).map_err(|_| TopicRecordError::Malformed("bad name"))?;
        }
        let hex = fields
            .get("topic_id")
            .ok_or(TopicRecordError::Malformed("no topic_id"))?;
        if hex.len() != 32 || !hex.is_ascii() {
            return Err(TopicRecordError::Malformed("topic_id is not 32 hex digits"));
        }
        let mut id = [0u8; 16];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| TopicRecordError::Malformed("topic_id is not hex"))?;
        }
        let partitions: i32 = fields
            .get("partitions")
            .and_then(|p| p.parse().ok())
            .filter(|p| (1..=10_000).contains(p))
            .ok_or(TopicRecordError::Malformed("partitions"))?;
        // Everything else is a config property; a field absent (the records written before
        // retention existed) keeps its default.
        let replicas = fields
            .get(REPLICAS_FIELD)
            .map(|text| decode_replicas(text, partitions))
            .transpose()?;
        let mut config = TopicConfig::default();
        for (key, value) in &fields {
            if matches!(*key, "name" | "topic_id" | "partitions" | REPLICAS_FIELD) {
                continue;
            }
            config
                .set(key, Some(value))
                .map_err(|_| TopicRecordError::Malformed("config"))?;
        }
        Ok(TopicRecord {
            name: name.to_string(),
            topic_id: Uuid(id),
            partitions,
            config,
            replicas,
        })
    }
}

/// The topic record's field with each partition's replicas: `1,2;2,3;3,1` (partition 0's
/// replicas are 1 and 2, …). Absent in records written before replication factors.
const REPLICAS_FIELD: &str = "replicas";

/// Parses the replicas field: one non-empty list of distinct, non-negative node ids per
/// partition, exactly `partitions` lists.
fn decode_replicas(text: &str, partitions: i32) -> Result<Vec<Vec<NodeId>>, TopicRecordError> {
    let malformed = TopicRecordError::Malformed("replicas");
    let mut replicas = Vec::new();
    for list in text.split(';') {
        if replicas.len() >= partitions as usize {
            return Err(malformed);
        }
        let mut nodes = Vec::new();
        for id in list.split(',') {
            let id: NodeId = id.parse().map_err(|_| malformed.clone())?;
            if id < 0 || nodes.contains(&id) {
                return Err(malformed);
            }
            nodes.push(id);
        }
        replicas.push(nodes);
    }
    if replicas.len() != partitions as usize {
        return Err(malformed);
    }
    Ok(replicas)
}
