//! Dynamic node configs (Kafka's dynamic broker configs): IncrementalAlterConfigs and
//! AlterConfigs on a BROKER resource (type 4) named by a node id, or by the empty name for the
//! cluster-wide default, change the configs in [`DYNAMIC_BROKER_CONFIGS`] without a restart.
//!
//! Each resource's dynamic configs are one record of `__cluster_metadata-0`, keyed
//! [`BROKER_CONFIG_KEY_PREFIX`] + the resource name, its value the resource's whole dynamic set
//! as tab-separated `name=value` (the topic record's format); a resource with none left is a
//! tombstone. So they are replicated to every node, kept by the metadata snapshot and read
//! back at restart like topic records; every node keeps an image of them ([`BrokerConfigs`]),
//! rebuilt from the metadata partition's key-value state when its applied offset moves, so a
//! Produce reads its limit from a map rather than decoding a record. A value resolves as
//! Kafka resolves it: this node's dynamic value, else the cluster default's, else the
//! properties file's, else the built-in default (DescribeConfigs names which one with its
//! ConfigSource).
//!
//! What each does here:
//!
//! | config | type | effect |
//! | --- | --- | --- |
//! | `message.max.bytes` | int, 0 ..= the log's batch limit (64 MiB or the file's value if larger) | the next Produce's batch limit on topics without `max.message.bytes` |
//! | `background.threads`, `num.io.threads`, `num.network.threads`, `num.replica.fetchers`, `num.recovery.threads.per.data.dir`, `log.cleaner.threads` | int ≥ 1 | none: a node runs one event loop and no thread pool (docs/design.md); stored and described so that tools which set them succeed |
//! | `sasl.kerberos.min.time.before.relogin`, `sasl.kerberos.kinit.cmd` | long ≥ 0, string | none: ringlog has no GSSAPI/Kerberos; stored and described likewise |
//!
//! Any other name is refused with INVALID_REQUEST ("cannot be updated dynamically", Kafka's
//! answer for a static config); a bad value with INVALID_CONFIG. SET sets, DELETE returns to
//! the next source down; APPEND and SUBTRACT apply to list configs only (there are none here:
//! INVALID_CONFIG).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::context::Cx;
use crate::config::NodeConfig;
use crate::protocol::ErrorCode;
use crate::protocol::incremental_alter_configs_request as ia_req;

/// The key prefix of a BROKER resource's dynamic configs in the metadata key-value state.
pub const BROKER_CONFIG_KEY_PREFIX: &[u8] = b"ringlog.broker-config.v1/";

/// The metadata key of `resource`'s dynamic configs (`""`: the cluster-wide default).
pub fn broker_config_key(resource: &str) -> Vec<u8> {
    let mut key = BROKER_CONFIG_KEY_PREFIX.to_vec();
    key.extend_from_slice(resource.as_bytes());
    key
}

/// How a dynamic config's value is checked, and Kafka's ConfigDef type number for
/// DescribeConfigs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DynamicKind {
    /// An int from the minimum up (the maximum is checked where it depends on the node).
    Int {
        min: i64,
    },
    Long {
        min: i64,
    },
    String,
}

impl DynamicKind {
    pub fn config_type(self) -> i8 {
        match self {
            DynamicKind::Int { .. } => 3,
            DynamicKind::Long { .. } => 5,
            DynamicKind::String => 2,
        }
    }
}

/// One config a BROKER resource may change at runtime, with Kafka's default.
#[derive(Clone, Copy, Debug)]
pub struct DynamicConfig {
    pub name: &'static str,
    pub kind: DynamicKind,
    /// Kafka's default, described when neither a dynamic value nor the file sets it (`None`:
    /// the node's own setting, `message.max.bytes`).
    pub default: Option<&'static str>,
    /// `None`: applied. Otherwise why it changes nothing here, described as its documentation.
    pub no_effect: Option<&'static str>,
}

const ONE_LOOP: &str =
    "Stored; a ringlog node runs one event loop and no thread pool, so this changes nothing.";
const NO_KERBEROS: &str = "Stored; ringlog has no GSSAPI/Kerberos, so this changes nothing.";

/// The configs a BROKER resource may change at runtime (module doc: what each does).
pub const DYNAMIC_BROKER_CONFIGS: &[DynamicConfig] = &[
    DynamicConfig {
        name: "message.max.bytes",
        kind: DynamicKind::Int { min: 0 },
        default: None,
        no_effect: None,
    },
    DynamicConfig {
        name: "background.threads",
        kind: DynamicKind::Int { min: 1 },
        default: Some("10"),
        no_effect: Some(ONE_LOOP),
    },
    DynamicConfig {
        name: "num.io.threads",
        kind: DynamicKind::Int { min: 1 },
        default: Some("8"),
        no_effect: Some(ONE_LOOP),
    },
    DynamicConfig {
        name: "num.network.threads",
        kind: DynamicKind::Int { min: 1 },
        default: Some("3"),
        no_effect: Some(ONE_LOOP),
    },
    DynamicConfig {
        name: "num.replica.fetchers",
        kind: DynamicKind::Int { min: 1 },
        default: Some("1"),
        no_effect: Some(ONE_LOOP),
    },
    DynamicConfig {
        name: "num.recovery.threads.per.data.dir",
        kind: DynamicKind::Int { min: 1 },
        default: Some("1"),
        no_effect: Some(ONE_LOOP),
    },
    DynamicConfig {
        name: "log.cleaner.threads",
        kind: DynamicKind::Int { min: 0 },
        default: Some("1"),
        no_effect: Some(ONE_LOOP),
    },
    DynamicConfig {
        name: "sasl.kerberos.min.time.before.relogin",
        kind: DynamicKind::Long { min: 0 },
        default: Some("60000"),
        no_effect: Some(NO_KERBEROS),
    },
    DynamicConfig {
        name: "sasl.kerberos.kinit.cmd",
        kind: DynamicKind::String,
        default: Some("/usr/bin/kinit"),
        no_effect: Some(NO_KERBEROS),
    },
];

pub fn dynamic_config(name: &str) -> Option<&'static DynamicConfig> {
    DYNAMIC_BROKER_CONFIGS.iter().find(|c| c.name == name)
}

/// A resource's dynamic configs from their record value; an entry that does not parse (a
/// record of a later version) is skipped with a warning rather than failing the node.
pub fn decode_broker_configs(value: &[u8]) -> BTreeMap<String, String> {
    let Ok(text) = std::str::from_utf8(value) else {
        tracing::warn!("dynamic broker config record is not utf-8; skipped");
        return BTreeMap::new();
    };
    text.split('\t')
        .filter(|field| !field.is_empty())
        .filter_map(|field| match field.split_once('=') {
            Some((name, value)) if dynamic_config(name).is_some() => {
                Some((name.to_string(), value.to_string()))
            }
            _ => {
                tracing::warn!(field, "dynamic broker config entry skipped");
                None
            }
        })
        .collect()
}

/// The record value of a resource's dynamic configs; `None` (a tombstone) when none is left.
pub fn encode_broker_configs(configs: &BTreeMap<String, String>) -> Option<Vec<u8>> {
    if configs.is_empty() {
        return None;
    }
    let fields: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Some(fields.join("\t").into_bytes())
}

/// `current` after `alterations` (SET and DELETE), every value checked; the whole resource or
/// nothing. `message_max_bytes_limit` bounds `message.max.bytes` (the log's batch limit).
pub fn altered_broker_configs(
    current: &BTreeMap<String, String>,
    alterations: &[ia_req::AlterableConfig],
    message_max_bytes_limit: i64,
) -> Result<BTreeMap<String, String>, (ErrorCode, String)> {
    let mut configs = current.clone();
    for (index, alteration) in alterations.iter().enumerate() {
        let name = alteration.name.as_str();
        if alterations[..index].iter().any(|a| a.name == name) {
            return Err((ErrorCode::InvalidRequest, format!("{name} is named twice")));
        }
        let Some(config) = dynamic_config(name) else {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "cannot update these configs dynamically: {name} (dynamic here: {})",
                    DYNAMIC_BROKER_CONFIGS
                        .iter()
                        .map(|c| c.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        match alteration.config_operation {
            // SET
            0 => {
                let value = alteration.value.as_deref().unwrap_or("").trim();
                check_value(config, value, message_max_bytes_limit)?;
                configs.insert(name.to_string(), value.to_string());
            }
            // DELETE
            1 => {
                configs.remove(name);
            }
            operation => {
                return Err((
                    ErrorCode::InvalidConfig,
                    format!("{name}: operation {operation} applies to list configs only"),
                ));
            }
        }
    }
    Ok(configs)
}

fn check_value(
    config: &DynamicConfig,
    value: &str,
    message_max_bytes_limit: i64,
) -> Result<(), (ErrorCode, String)> {
    let invalid = |reason: String| {
        Err((
            ErrorCode::InvalidConfig,
            format!("invalid value {value:?} for {}: {reason}", config.name),
        ))
    };
    let (min, max) = match config.kind {
        DynamicKind::String => {
            return if value.is_empty() || value.contains(['\t', '\n']) {
                invalid("must be a non-empty single-line string".into())
            } else {
                Ok(())
            };
        }
        DynamicKind::Int { min } if config.name == "message.max.bytes" => {
            (min, message_max_bytes_limit)
        }
        DynamicKind::Int { min } => (min, i64::from(i32::MAX)),
        DynamicKind::Long { min } => (min, i64::MAX),
    };
    match value.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(()),
        _ => invalid(format!("must be a number from {min} to {max}")),
    }
}

/// Kafka's `DescribeConfigsResponse.ConfigSource` of a dynamic value.
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;

/// The dynamic node configs of every BROKER resource as applied on this node (derived from the
/// metadata state when its applied offset moves, as the SCRAM credentials are), and those this
/// node proposed as controller and has not applied yet, with the record's offset and the epoch
/// it was proposed in: the next alteration starts from them, so two in flight do not undo each
/// other.
#[derive(Debug, Default)]
pub struct BrokerConfigs {
    applied_offset: Option<u64>,
    /// Resource name (a node id, `""` the cluster default) → its dynamic configs.
    image: BTreeMap<String, BTreeMap<String, String>>,
    pending: BTreeMap<String, (BTreeMap<String, String>, u64, u32)>,
}

impl BrokerConfigs {
    /// Rebuilds the image from the metadata key-value state when the applied offset moved:
    /// one range scan of the few broker-config keys, so a Produce reads its limit from a map.
    pub fn refresh(&mut self, applied_offset: u64, entries: &BTreeMap<Bytes, Bytes>) {
        if self.applied_offset == Some(applied_offset) {
            return;
        }
        self.applied_offset = Some(applied_offset);
        self.image = entries
            .range(Bytes::from_static(BROKER_CONFIG_KEY_PREFIX)..)
            .take_while(|(key, _)| key.starts_with(BROKER_CONFIG_KEY_PREFIX))
            .filter_map(|(key, value)| {
                let resource = std::str::from_utf8(&key[BROKER_CONFIG_KEY_PREFIX.len()..]).ok()?;
                Some((resource.to_string(), decode_broker_configs(value)))
            })
            .collect();
        self.pending
            .retain(|_, (_, offset, _)| *offset >= applied_offset);
    }

    /// The value in force for `name` on node `node_id`: its dynamic value, else the cluster
    /// default's; with the ConfigSource DescribeConfigs reports (2 DYNAMIC_BROKER_CONFIG, 3
    /// DYNAMIC_DEFAULT_BROKER_CONFIG). `None`: no dynamic value.
    pub fn value(&self, node_id: i32, name: &str) -> Option<(String, i8)> {
        let lookup = |resource: &str, source: i8| {
            self.image
                .get(resource)
                .and_then(|configs| configs.get(name).cloned())
                .map(|value| (value, source))
        };
        lookup(&node_id.to_string(), SOURCE_DYNAMIC_BROKER)
            .or_else(|| lookup("", SOURCE_DYNAMIC_DEFAULT_BROKER))
    }
}

impl BrokerConfigs {
    /// `message.max.bytes` in force on this node: the dynamic value, else the properties
    /// file's (`config`).
    pub(super) fn message_max_bytes(&self, config: &NodeConfig) -> (u32, Option<i8>) {
        match self
            .value(config.node_id, "message.max.bytes")
            .and_then(|(v, source)| Some((v.parse::<u32>().ok()?, source)))
        {
            Some((bytes, source)) => (bytes, Some(source)),
            None => (config.message_max_bytes, None),
        }
    }

    /// Alters a BROKER resource's dynamic configs (the controller's side); `Some(offset)` when
    /// a record was proposed.
    pub(super) fn alter_resource(
        &mut self,
        cx: &mut Cx,
        resource: &ia_req::AlterConfigsResource,
        validate_only: bool,
    ) -> Result<Option<u64>, (ErrorCode, String)> {
        let name = resource.resource_name.as_str();
        let known = name.is_empty()
            || name.parse::<i32>().is_ok_and(|id| {
                id == cx.config.node_id || cx.metadata_raft().voter_set().ids().contains(&id)
            });
        if !known {
            return Err((
                ErrorCode::InvalidRequest,
                format!("no node {name:?} (a node id, or empty for the cluster default)"),
            ));
        }
        let epoch = cx.metadata_raft().epoch();
        let applied = cx.metadata_applied_offset;
        let current = match self.pending.get(name) {
            Some((configs, offset, proposed_in)) if *offset >= applied && *proposed_in == epoch => {
                configs.clone()
            }
            _ => self.image.get(name).cloned().unwrap_or_default(),
        };
        let configs = altered_broker_configs(
            &current,
            &resource.configs,
            message_max_bytes_limit(cx.config),
        )?;
        if validate_only || configs == current {
            return Ok(None);
        }
        let value = encode_broker_configs(&configs);
        let offset = cx
            .propose_metadata_entry(&broker_config_key(name), value.as_deref())
            .map_err(|code| (code, "metadata append failed".into()))?;
        tracing::info!(
            resource = name,
            ?configs,
            offset,
            "dynamic node configs proposed"
        );
        self.pending
            .insert(name.to_string(), (configs, offset, epoch));
        Ok(Some(offset))
    }
}

/// The largest `message.max.bytes` the logs take without a restart (their batch limit).
fn message_max_bytes_limit(config: &NodeConfig) -> i64 {
    (config.message_max_bytes as i64)
        .max(ringlog_engine::batch::DEFAULT_MAX_BATCH_SIZE_BYTES as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, value: &str) -> ia_req::AlterableConfig {
        ia_req::AlterableConfig {
            name: name.into(),
            config_operation: 0,
            value: Some(value.into()),
        }
    }

    #[test]
    fn dynamic_broker_configs_are_checked_and_resolve_node_then_cluster_default() {
        let none = BTreeMap::new();
        let limit = 64 << 20;
        let node = altered_broker_configs(
            &none,
            &[
                set("message.max.bytes", "2000"),
                set("sasl.kerberos.min.time.before.relogin", "58000"),
            ],
            limit,
        )
        .unwrap();
        assert_eq!(node.get("message.max.bytes").unwrap(), "2000");
        // Static configs, bad numbers, values past the log's limit and list operations are
        // refused, and nothing of a refused resource applies.
        for (alteration, code) in [
            (set("log.dirs", "/tmp"), ErrorCode::InvalidRequest),
            (set("num.io.threads", "0"), ErrorCode::InvalidConfig),
            (set("num.io.threads", "x"), ErrorCode::InvalidConfig),
            (
                set("message.max.bytes", &(limit + 1).to_string()),
                ErrorCode::InvalidConfig,
            ),
            (
                ia_req::AlterableConfig {
                    name: "background.threads".into(),
                    config_operation: 2,
                    value: Some("3".into()),
                },
                ErrorCode::InvalidConfig,
            ),
        ] {
            let refused = altered_broker_configs(
                &node,
                &[set("num.network.threads", "4"), alteration],
                limit,
            );
            assert_eq!(refused.unwrap_err().0, code);
        }
        let encoded = encode_broker_configs(&node).unwrap();
        assert_eq!(decode_broker_configs(&encoded), node);

        let default = altered_broker_configs(
            &none,
            &[set("message.max.bytes", "3000"), set("num.io.threads", "2")],
            limit,
        )
        .unwrap();
        let mut entries = BTreeMap::new();
        entries.insert(Bytes::from(broker_config_key("1")), Bytes::from(encoded));
        entries.insert(
            Bytes::from(broker_config_key("")),
            Bytes::from(encode_broker_configs(&default).unwrap()),
        );
        let mut image = BrokerConfigs::default();
        image.refresh(7, &entries);
        assert_eq!(
            image.value(1, "message.max.bytes"),
            Some(("2000".into(), SOURCE_DYNAMIC_BROKER))
        );
        assert_eq!(
            image.value(2, "message.max.bytes"),
            Some(("3000".into(), SOURCE_DYNAMIC_DEFAULT_BROKER))
        );
        assert_eq!(
            image.value(1, "num.io.threads"),
            Some(("2".into(), SOURCE_DYNAMIC_DEFAULT_BROKER))
        );
        assert_eq!(image.value(1, "num.network.threads"), None);

        // DELETE returns to the next source down; the last one gone leaves a tombstone.
        let deleted = altered_broker_configs(
            &node,
            &[
                ia_req::AlterableConfig {
                    name: "message.max.bytes".into(),
                    config_operation: 1,
                    value: None,
                },
                ia_req::AlterableConfig {
                    name: "sasl.kerberos.min.time.before.relogin".into(),
                    config_operation: 1,
                    value: None,
                },
            ],
            limit,
        )
        .unwrap();
        assert_eq!(encode_broker_configs(&deleted), None);
    }
}
