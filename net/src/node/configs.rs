//! DescribeConfigs (32), IncrementalAlterConfigs (44) and the legacy AlterConfigs (33), for
//! topics (resource type 2) and for this node (type 4, Kafka's BROKER). AlterConfigs sets every
//! config of a resource at once: it is answered as the IncrementalAlterConfigs that SETs the
//! configs it names and DELETEs (back to the default) the alterable ones it leaves out
//! ([`incremental_from_legacy`]); the fixed ones left out keep their value.
//!
//! Topic configs live in the topic record of `__cluster_metadata-0` (topics.rs). Every node
//! answers DescribeConfigs from its own topic image; an alteration is a new topic record with
//! the same topic id and the changed config, proposed by the controller and applied by every
//! node (topic_image.rs), so `retention.ms` and `retention.bytes` take effect everywhere at
//! the next retention check, `segment.bytes` at each replica's next segment roll (the active
//! segment rolls at the next batch that would pass the smaller of its own size and the new
//! one), `cleanup.policy` at once on each replica (topic_image.rs,
//! `Host::set_keeps_snapshots`), and all survive restarts with the record. A node that is not the
//! controller forwards the request to it and relays the answer (context.rs,
//! `Cx::forward_to_controller`; [`relay_forwarded`]).
//!
//! What cannot change at runtime is refused, never ignored:
//!
//! | resource | config                                  | alteration answers                |
//! | -------- | --------------------------------------- | --------------------------------- |
//! | topic    | `retention.ms`, `retention.bytes`       | applied (SET, DELETE = default)   |
//! | topic    | `snapshot.minimum.records`              | applied on a snapshot topic; INVALID_CONFIG on a delete topic |
//! | topic    | `segment.bytes` (65536..=1 GiB)         | applied (next segment roll)       |
//! | topic    | `cleanup.policy` `delete`, `compact`, `compact,delete` <-> `snapshot` | applied (below) |
//! | topic    | `cleanup.policy` APPEND / SUBTRACT      | applied to the list (`snapshot` combines with nothing) |
//! | topic    | `max.message.bytes`                     | applied (the next Produce)        |
//! | topic    | `message.format.version`                | accepted and ignored (Kafka 3.x: every batch is v2) |
//! | topic    | `compression.type`                      | applied (the next Produce recompresses, produce_validation.rs) |
//! | topic    | `flush.messages`, `flush.ms`            | stored; every batch is fsynced before its acknowledgement anyway |
//! | topic    | `delete.retention.ms`, `min.compaction.lag.ms`, `max.compaction.lag.ms` | stored; no log cleaner yet (docs/clients.md) |
//! | topic    | any other name                          | INVALID_CONFIG                    |
//! | topic    | APPEND / SUBTRACT on other configs      | INVALID_CONFIG                    |
//! | node     | the dynamic ones (broker_configs.rs)    | applied (a metadata record per node, and for the cluster default) |
//! | node     | any other                               | INVALID_REQUEST (static file)     |
//! | other    | (broker loggers, client metrics, …)     | INVALID_REQUEST                   |
//! | internal topic | any                               | INVALID_REQUEST                   |
//!
//! Adding or removing `compact` changes only which records Produce accepts (keys required),
//! whether retention deletes (`delete` in the list) and whether DeleteRecords is refused
//! (`compact` alone): no state is rebuilt. Between those and `snapshot`, as for `delete`:
//!
//! Changing `cleanup.policy` is safe both ways, because each replica's state machine is its
//! own (a snapshot is the state after the log below it, whatever that log held):
//! - `delete` -> `snapshot`: each replica reloads its key-value state machine from its newest
//!   snapshot (the empty cuts of retention and DeleteRecords: nothing) and applies the log from
//!   there, so the state is that of the records the log still holds; from then on the log is
//!   trimmed behind snapshots, not by retention. Records without a key are in no state: they
//!   go at the first snapshot cut (Kafka refuses keyless records on a compacted topic).
//! - `snapshot` -> `delete`: the state machine stops (a generation in flight finishes); the
//!   log keeps its start and is trimmed by retention from then on. The state below the log
//!   start stays only in the snapshot files, which no Kafka client reads.
//!   `snapshot.minimum.records` must go in the same request (it applies to snapshot topics
//!   only): else INVALID_CONFIG.

use super::NodeError;
use super::broker_configs::{BrokerConfigs, DYNAMIC_BROKER_CONFIGS, dynamic_config};
use super::context::Cx;
use super::topics::{CleanupPolicy, DEFAULT_RETENTION_MS, TopicConfig, TopicRecord, Topics};
use super::transport::Responder;
use crate::config::NodeConfig;
use crate::protocol::{
    ApiKey, ErrorCode, Request, RequestHeader, alter_configs_request as ac_req,
    describe_configs_request as dc_req, describe_configs_response as dc_resp,
    incremental_alter_configs_request as ia_req, incremental_alter_configs_response as ia_resp,
};

/// Kafka's `ConfigResource.Type`.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Kafka's `DescribeConfigsResponse.ConfigSource`.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// Kafka's `ConfigDef.Type` numbers in DescribeConfigs v3+.
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_LIST: i8 = 7;

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// The alterable topic configs a legacy AlterConfigs returns to their defaults when it leaves
/// them out (Kafka's AlterConfigs replaces a resource's whole dynamic config).
const RESET_WHEN_LEFT_OUT: &[&str] = &[
    "cleanup.policy",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "snapshot.minimum.records",
    "max.message.bytes",
    "compression.type",
    "flush.messages",
    "flush.ms",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
];

/// A legacy AlterConfigs resource as the IncrementalAlterConfigs one it amounts to.
pub fn incremental_from_legacy(
    resource: &ac_req::AlterConfigsResource,
) -> ia_req::AlterConfigsResource {
    let mut configs: Vec<ia_req::AlterableConfig> = resource
        .configs
        .iter()
        .map(|c| ia_req::AlterableConfig {
            name: c.name.clone(),
            config_operation: OP_SET,
            value: c.value.clone(),
        })
        .collect();
    if resource.resource_type == RESOURCE_TOPIC {
        for name in RESET_WHEN_LEFT_OUT {
            if !resource.configs.iter().any(|c| c.name == *name) {
                configs.push(ia_req::AlterableConfig {
                    name: name.to_string(),
                    config_operation: OP_DELETE,
                    value: None,
                });
            }
        }
    }
    ia_req::AlterConfigsResource {
        resource_type: resource.resource_type,
        resource_name: resource.resource_name.clone(),
        configs,
    }
}

/// One config as DescribeConfigs lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedConfig {
    pub name: &'static str,
    pub value: Option<String>,
    pub source: i8,
    pub read_only: bool,
    pub config_type: i8,
    /// What a tool shows beside the value (DescribeConfigs v3+ `documentation`): said only
    /// where ringlog takes a config that changes nothing here, so no tool makes it look as if
    /// it did.
    pub documentation: Option<&'static str>,
}

/// The documentation of the topic configs stored without effect.
const NO_CLEANER: &str =
    "Stored and validated as Kafka does; ringlog has no log cleaner yet, so this changes nothing.";
const ALWAYS_FLUSHED: &str = "Stored and validated as Kafka does; ringlog fsyncs every batch on a majority before acknowledging it, whatever this says.";

/// The node settings a topic's configs fall back to, each with whether the node's properties
/// file set it (STATIC_BROKER_CONFIG) or it is the default (DEFAULT_CONFIG).
#[derive(Clone, Copy, Debug)]
pub struct NodeTopicDefaults {
    /// `metadata.log.segment.bytes`
    pub segment_bytes: (u64, bool),
    /// `message.max.bytes` in force, with its ConfigSource (it may be set dynamically,
    /// broker_configs.rs).
    pub message_max_bytes: (u32, i8),
    /// `controller.snapshot.minimum.records`
    pub snapshot_minimum_records: (u64, bool),
}

/// A topic's configs: those the topic record holds, and the node settings that act for it.
pub fn describe_topic_configs(
    config: &TopicConfig,
    node: &NodeTopicDefaults,
) -> Vec<DescribedConfig> {
    let node_segment_bytes = node.segment_bytes;
    let message_max_bytes = node.message_max_bytes;
    let topic_or_default = |is_default: bool| {
        if is_default {
            SOURCE_DEFAULT
        } else {
            SOURCE_TOPIC
        }
    };
    let node_source = |from_file: bool| {
        if from_file {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        }
    };
    let (segment_value, segment_source) = match config.segment_bytes {
        Some(bytes) => (bytes.to_string(), SOURCE_TOPIC),
        None => (
            node_segment_bytes.0.to_string(),
            node_source(node_segment_bytes.1),
        ),
    };
    let (snapshot_records_value, snapshot_records_source) = match config.snapshot_minimum_records {
        Some(records) => (records.to_string(), SOURCE_TOPIC),
        None => (
            node.snapshot_minimum_records.0.to_string(),
            node_source(node.snapshot_minimum_records.1),
        ),
    };
    let defaults = TopicConfig::default();
    let long = |name: &'static str, value: i64, default: i64, documentation| DescribedConfig {
        name,
        value: Some(value.to_string()),
        source: topic_or_default(value == default),
        read_only: false,
        config_type: TYPE_LONG,
        documentation: Some(documentation),
    };
    vec![
        DescribedConfig {
            name: "cleanup.policy",
            value: Some(config.cleanup_policy.as_str().to_string()),
            source: topic_or_default(config.cleanup_policy == CleanupPolicy::Delete),
            read_only: false,
            config_type: TYPE_LIST,
            documentation: None,
        },
        DescribedConfig {
            name: "retention.bytes",
            value: Some(config.retention_bytes.to_string()),
            source: topic_or_default(config.retention_bytes == -1),
            read_only: false,
            config_type: TYPE_LONG,
            documentation: None,
        },
        DescribedConfig {
            name: "retention.ms",
            value: Some(config.retention_ms.to_string()),
            source: topic_or_default(config.retention_ms == DEFAULT_RETENTION_MS),
            read_only: false,
            config_type: TYPE_LONG,
            documentation: None,
        },
        DescribedConfig {
            name: "segment.bytes",
            value: Some(segment_value),
            source: segment_source,
            read_only: false,
            config_type: TYPE_INT,
            documentation: None,
        },
        DescribedConfig {
            name: "max.message.bytes",
            value: Some(
                config
                    .max_message_bytes
                    .map_or(message_max_bytes.0.to_string(), |b| b.to_string()),
            ),
            source: config
                .max_message_bytes
                .map_or(message_max_bytes.1, |_| SOURCE_TOPIC),
            read_only: false,
            config_type: TYPE_INT,
            documentation: None,
        },
        DescribedConfig {
            name: "snapshot.minimum.records",
            value: Some(snapshot_records_value),
            source: snapshot_records_source,
            // Alterable on a snapshot topic only (TopicConfig::check).
            read_only: config.cleanup_policy != CleanupPolicy::Snapshot,
            config_type: TYPE_LONG,
            documentation: None,
        },
        DescribedConfig {
            name: "compression.type",
            value: Some(config.compression_type.as_str().to_string()),
            source: topic_or_default(config.compression_type == defaults.compression_type),
            read_only: false,
            config_type: TYPE_STRING,
            documentation: None,
        },
        long(
            "flush.messages",
            config.flush_messages,
            defaults.flush_messages,
            ALWAYS_FLUSHED,
        ),
        long(
            "flush.ms",
            config.flush_ms,
            defaults.flush_ms,
            ALWAYS_FLUSHED,
        ),
        long(
            "delete.retention.ms",
            config.delete_retention_ms,
            defaults.delete_retention_ms,
            NO_CLEANER,
        ),
        long(
            "min.compaction.lag.ms",
            config.min_compaction_lag_ms,
            defaults.min_compaction_lag_ms,
            NO_CLEANER,
        ),
        long(
            "max.compaction.lag.ms",
            config.max_compaction_lag_ms,
            defaults.max_compaction_lag_ms,
            NO_CLEANER,
        ),
    ]
}

/// Why an alteration of a topic's configs is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AlterConfigsError {
    #[error("{0} is named twice")]
    Duplicate(String),
    #[error(
        "{name}: operation {operation} is not supported (SET and DELETE; APPEND and SUBTRACT on the list cleanup.policy)"
    )]
    Operation { name: String, operation: i8 },
    #[error("{0}: a list config cannot be left empty")]
    EmptyList(String),
    #[error(transparent)]
    Config(#[from] super::topics::TopicConfigError),
}

/// The config after `alterations` (Kafka's IncrementalAlterConfigs semantics: SET sets,
/// DELETE returns to the default), or why it is refused; the whole resource or nothing.
pub fn altered_topic_config(
    current: &TopicConfig,
    alterations: &[ia_req::AlterableConfig],
) -> Result<TopicConfig, AlterConfigsError> {
    let mut config = *current;
    for (index, alteration) in alterations.iter().enumerate() {
        if alterations[..index]
            .iter()
            .any(|earlier| earlier.name == alteration.name)
        {
            return Err(AlterConfigsError::Duplicate(alteration.name.clone()));
        }
        let listed;
        let value = match alteration.config_operation {
            OP_SET => alteration.value.as_deref(),
            OP_DELETE => None,
            // Kafka's list configs take APPEND and SUBTRACT; of a topic's configs here only
            // `cleanup.policy` is a list. The result must still be a policy (`snapshot`
            // combines with nothing; subtracting the last item is refused, as Kafka does).
            operation @ (OP_APPEND | OP_SUBTRACT) if alteration.name == "cleanup.policy" => {
                let mut items: Vec<&str> = config.cleanup_policy.items().to_vec();
                for item in alteration.value.as_deref().unwrap_or("").split(',') {
                    let item = item.trim();
                    if operation == OP_APPEND {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|i| *i != item);
                    }
                }
                if items.is_empty() {
                    return Err(AlterConfigsError::EmptyList(alteration.name.clone()));
                }
                listed = items.join(",");
                Some(listed.as_str())
            }
            operation => {
                return Err(AlterConfigsError::Operation {
                    name: alteration.name.clone(),
                    operation,
                });
            }
        };
        config.set(&alteration.name, value)?;
    }
    config.check()?;
    Ok(config)
}

// ---- DescribeConfigs ---------------------------------------------------------------------

/// DescribeConfigs, answered from this node's topic image (`topics`) and dynamic node configs
/// (`broker_configs`).
pub(super) fn handle_describe_configs(
    cx: &Cx,
    topics: &Topics,
    broker_configs: &BrokerConfigs,
    request: &dc_req::DescribeConfigsRequest,
    requester: &super::authorize::Requester,
) -> dc_resp::DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let mut result = dc_resp::DescribeConfigsResult {
                error_message: None,
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.clone(),
                ..Default::default()
            };
            let described = cx
                .authorizer()
                .config_resource_allowed(
                    requester,
                    ApiKey::DescribeConfigs,
                    resource.resource_type,
                    &resource.resource_name,
                )
                .map_err(|code| (code, "Authorization failed.".to_string()))
                .and_then(|()| {
                    described_configs(
                        cx.config,
                        topics,
                        broker_configs,
                        resource.resource_type,
                        &resource.resource_name,
                    )
                });
            match described {
                Ok(configs) => {
                    result.configs = configs
                        .into_iter()
                        .filter(|c| {
                            // Null or empty: every config (Kafka's ConfigHelper).
                            resource
                                .configuration_keys
                                .as_ref()
                                .filter(|keys| !keys.is_empty())
                                .is_none_or(|keys| keys.iter().any(|k| k == c.name))
                        })
                        .map(|c| dc_resp::DescribeConfigsResourceResult {
                            name: c.name.to_string(),
                            value: c.value,
                            read_only: c.read_only,
                            config_source: c.source,
                            is_sensitive: false,
                            synonyms: Vec::new(),
                            config_type: c.config_type,
                            documentation: c.documentation.map(str::to_string),
                        })
                        .collect();
                }
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(message);
                }
            }
            result
        })
        .collect();
    dc_resp::DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
    }
}

fn described_configs(
    config: &NodeConfig,
    topics: &Topics,
    broker_configs: &BrokerConfigs,
    resource_type: i8,
    name: &str,
) -> Result<Vec<DescribedConfig>, (ErrorCode, String)> {
    let from_file = |key: &str| {
        config
            .properties
            .iter()
            .any(|p| p.name == key && p.from_file)
    };
    let node_source = |from_file: bool| {
        if from_file {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        }
    };
    match resource_type {
        RESOURCE_TOPIC => {
            let topic = topics.image.get(name).ok_or((
                ErrorCode::UnknownTopicOrPartition,
                format!("no topic {name:?}"),
            ))?;
            let node = NodeTopicDefaults {
                segment_bytes: (
                    config.segment_size_bytes,
                    from_file("metadata.log.segment.bytes"),
                ),
                message_max_bytes: match broker_configs.message_max_bytes(config) {
                    (bytes, Some(source)) => (bytes, source),
                    (bytes, None) => (bytes, node_source(from_file("message.max.bytes"))),
                },
                snapshot_minimum_records: (
                    config.snapshot_minimum_records,
                    from_file("controller.snapshot.minimum.records"),
                ),
            };
            Ok(describe_topic_configs(&topic.config, &node))
        }
        RESOURCE_BROKER => {
            check_node_resource(config, name)?;
            // The properties file's settings, read-only, except those a BROKER resource
            // may change at runtime (broker_configs.rs), which show the value in force and
            // where it comes from; then the dynamic ones the file does not name.
            let mut described: Vec<DescribedConfig> = config
                .properties
                .iter()
                .map(|p| {
                    let dynamic = dynamic_config(p.name);
                    let (value, source) = match broker_configs.value(config.node_id, p.name) {
                        Some((value, source)) if dynamic.is_some() => (Some(value), source),
                        _ => (p.value.clone(), node_source(p.from_file)),
                    };
                    DescribedConfig {
                        name: p.name,
                        value,
                        source,
                        read_only: dynamic.is_none(),
                        config_type: dynamic.map_or(TYPE_STRING, |d| d.kind.config_type()),
                        documentation: dynamic.and_then(|d| d.no_effect),
                    }
                })
                .collect();
            for dynamic in DYNAMIC_BROKER_CONFIGS {
                if described.iter().any(|d| d.name == dynamic.name) {
                    continue;
                }
                let (value, source) = match broker_configs.value(config.node_id, dynamic.name) {
                    Some((value, source)) => (Some(value), source),
                    None => (dynamic.default.map(str::to_string), SOURCE_DEFAULT),
                };
                described.push(DescribedConfig {
                    name: dynamic.name,
                    value,
                    source,
                    read_only: false,
                    config_type: dynamic.kind.config_type(),
                    documentation: dynamic.no_effect,
                });
            }
            Ok(described)
        }
        other => Err((
            ErrorCode::InvalidRequest,
            format!("resource type {other} is not supported (2 topic, 4 broker)"),
        )),
    }
}

/// A node resource names this node's id, or is empty (Kafka: the cluster-wide default,
/// here the same static settings).
fn check_node_resource(config: &NodeConfig, name: &str) -> Result<(), (ErrorCode, String)> {
    if name.is_empty() || name.parse::<i32>() == Ok(config.node_id) {
        Ok(())
    } else {
        Err((
            ErrorCode::InvalidRequest,
            format!(
                "unexpected broker id, expected {} but received {name:?}",
                config.node_id
            ),
        ))
    }
}

// ---- IncrementalAlterConfigs -------------------------------------------------------------

/// IncrementalAlterConfigs: forwarded to the controller, or (on it) the resources altered
/// against the topic image and its changes in flight (`topics`) and the dynamic node configs
/// (`broker_configs`), answered once the proposed records are applied.
pub(super) fn handle_incremental_alter_configs(
    cx: &mut Cx,
    topics: &mut Topics,
    broker_configs: &mut BrokerConfigs,
    responder: Responder,
    header: &RequestHeader,
    request: ia_req::IncrementalAlterConfigsRequest,
) -> Result<(), NodeError> {
    let writes_metadata = request
        .resources
        .iter()
        .any(|r| matches!(r.resource_type, RESOURCE_TOPIC | RESOURCE_BROKER));
    if writes_metadata && !cx.controller_active() {
        return cx.forward_to_controller(
            responder,
            header,
            Request::IncrementalAlterConfigs(request),
        );
    }
    let requester = responder.requester();
    answer_alter_configs(
        cx,
        (topics, broker_configs),
        (responder, &requester),
        header,
        &request.resources,
        request.validate_only,
        ApiKey::IncrementalAlterConfigs,
    )
}

/// The legacy AlterConfigs, answered as the IncrementalAlterConfigs it amounts to
/// ([`incremental_from_legacy`]).
pub(super) fn handle_alter_configs(
    cx: &mut Cx,
    topics: &mut Topics,
    broker_configs: &mut BrokerConfigs,
    responder: Responder,
    header: &RequestHeader,
    request: ac_req::AlterConfigsRequest,
) -> Result<(), NodeError> {
    let writes_metadata = request
        .resources
        .iter()
        .any(|r| matches!(r.resource_type, RESOURCE_TOPIC | RESOURCE_BROKER));
    if writes_metadata && !cx.controller_active() {
        return cx.forward_to_controller(responder, header, Request::AlterConfigs(request));
    }
    // A legacy AlterConfigs names a resource's whole config, and tools build it from
    // DescribeConfigs (librdkafka's tests do): a read-only config named at the value it is
    // described with is no change, and is dropped rather than refused.
    let resources: Vec<ia_req::AlterConfigsResource> = request
        .resources
        .iter()
        .map(|resource| {
            let described = described_configs(
                cx.config,
                topics,
                broker_configs,
                resource.resource_type,
                &resource.resource_name,
            )
            .unwrap_or_default();
            let mut resource = resource.clone();
            resource.configs.retain(|c| {
                !described.iter().any(|d| {
                    d.read_only && d.name == c.name && d.value.as_deref() == c.value.as_deref()
                })
            });
            incremental_from_legacy(&resource)
        })
        .collect();
    let requester = responder.requester();
    answer_alter_configs(
        cx,
        (topics, broker_configs),
        (responder, &requester),
        header,
        &resources,
        request.validate_only,
        ApiKey::AlterConfigs,
    )
}

/// Alters each resource and answers once the proposed records are applied (as `api`:
/// AlterConfigs, the legacy form, or IncrementalAlterConfigs).
fn answer_alter_configs(
    cx: &mut Cx,
    (topics, broker_configs): (&mut Topics, &mut BrokerConfigs),
    (responder, requester): (Responder, &super::authorize::Requester),
    header: &RequestHeader,
    resources: &[ia_req::AlterConfigsResource],
    validate_only: bool,
    api: ApiKey,
) -> Result<(), NodeError> {
    let legacy = api == ApiKey::AlterConfigs;
    let mut results = Vec::new();
    let mut waiting = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let mut result = ia_resp::AlterConfigsResourceResponse {
            error_code: 0,
            error_message: None,
            resource_type: resource.resource_type,
            resource_name: resource.resource_name.clone(),
        };
        let duplicate = resources[..index].iter().any(|earlier| {
            earlier.resource_type == resource.resource_type
                && earlier.resource_name == resource.resource_name
        });
        let outcome = if duplicate {
            Err((ErrorCode::InvalidRequest, "resource named twice".into()))
        } else {
            cx.authorizer()
                .config_resource_allowed(
                    requester,
                    api,
                    resource.resource_type,
                    &resource.resource_name,
                )
                .map_err(|code| (code, "Authorization failed.".to_string()))
                .and_then(|()| alter_resource(cx, topics, broker_configs, resource, validate_only))
        };
        match outcome {
            Ok(Some(offset)) => waiting.push((results.len(), offset)),
            Ok(None) => {}
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
        30_000,
        super::admin_answers::AdminResults::AlterConfigs { legacy, results },
        waiting,
    )
}

/// Alters one resource; `Some(offset)` when a topic record was proposed at that offset.
fn alter_resource(
    cx: &mut Cx,
    topics: &mut Topics,
    broker_configs: &mut BrokerConfigs,
    resource: &ia_req::AlterConfigsResource,
    validate_only: bool,
) -> Result<Option<u64>, (ErrorCode, String)> {
    match resource.resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => return broker_configs.alter_resource(cx, resource, validate_only),
        other => {
            return Err((
                ErrorCode::InvalidRequest,
                format!("resource type {other} is not supported (2 topic, 4 broker)"),
            ));
        }
    }
    let name = &resource.resource_name;
    if super::topics::is_internal_topic(name) {
        return Err((
            ErrorCode::InvalidRequest,
            format!("{name} is internal; its configs are the node's settings"),
        ));
    }
    let topic = topics
        .latest_topic_record(name, cx.metadata_raft().epoch())
        .ok_or((
            ErrorCode::UnknownTopicOrPartition,
            format!("no topic {name:?}"),
        ))?;
    let config = altered_topic_config(&topic.config, &resource.configs)
        .map_err(|e| (ErrorCode::InvalidConfig, e.to_string()))?;
    if validate_only || config == topic.config {
        return Ok(None);
    }
    let record = TopicRecord { config, ..topic };
    topics
        .propose_topic_change(cx, &record)
        .map(Some)
        .map_err(|code| (code, "metadata append failed".into()))
}

// ---- shared by the admin APIs that change a topic ------------------------------------------

#[cfg(test)]
#[path = "configs_tests.rs"]
mod tests;
