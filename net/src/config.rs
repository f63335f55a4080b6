//! The node's configuration: one Java-style properties file with Kafka's key names.
//!
//! Every key the node understands is a row of [`KEYS`]: its name, the aliases other revisions of
//! the KIPs or Kafka itself use for the same setting, its default, and one line of documentation.
//! `docs/configuration.md` lists the same rows (a test checks that the two agree). A key that is not
//! in the table is rejected with its name, so a typo never silently falls back to a default.
//!
//! ```text
//! node.id=1
//! controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
//! listeners=127.0.0.1:9093
//! metadata.log.dir=/var/lib/ringlog/1
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ringlog_replication::host::DEFAULT_LAGGING_TAIL_BUDGET_BYTES;

#[path = "config_listeners.rs"]
pub mod listeners;

pub use listeners::{Listener, Listeners, SecurityProtocol};

#[path = "config_keys.rs"]
mod keys;

#[path = "config_addresses.rs"]
mod addresses;
#[path = "config_properties.rs"]
mod properties;
#[path = "config_security.rs"]
mod security;

pub use addresses::{VoterAddress, parse_observers, parse_voters};
use addresses::{parse_bootstrap_servers, split_host_port};
use properties::Properties;
use security::{sasl_mechanisms, tls_settings};

/// One configuration key: the name we document, the other names accepted for it, the default as
/// it would be written in the file (`None`: required), and what it means.
#[derive(Debug, Clone, Copy)]
pub struct KeyDefinition {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub default: Option<&'static str>,
    pub doc: &'static str,
}

const MIB: u64 = 1024 * 1024;

pub use keys::KEYS;

/// Preferred leaders kept (`auto.leader.rebalance.enable`, node/leader_balance.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderBalanceConfig {
    /// `leader.imbalance.check.interval.seconds`, in milliseconds.
    pub check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage`.
    pub per_node_percentage: u64,
}

/// The parsed, validated configuration of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    pub node_id: i32,
    pub quorum_voters: Vec<VoterAddress>,
    /// KIP-853 `controller.quorum.bootstrap.servers` (host, port): set only when
    /// `quorum_voters` is empty.
    pub quorum_bootstrap_servers: Vec<(String, u16)>,
    /// `controller.quorum.observers`: the non-voting replicas allowed to fetch.
    pub quorum_observers: Vec<i32>,
    /// `listeners`, `controller.listener.names`, `listener.security.protocol.map`.
    pub listeners: Listeners,
    pub advertised_listener: (String, u16),
    /// `voter.advertised.listeners`: other voters' client listeners, for Metadata.
    pub voter_advertised_listeners: Vec<VoterAddress>,
    /// The `ssl.*` keys; `None` when no listener speaks SSL.
    pub tls: Option<crate::tls::TlsSettings>,
    /// `sasl.enabled.mechanisms` of the SASL client listener; empty without one.
    pub sasl_enabled_mechanisms: Vec<crate::sasl::ScramMechanism>,
    pub metadata_log_dir: PathBuf,
    pub election_timeout_ms: u64,
    pub election_backoff_max_ms: u64,
    pub fetch_timeout_ms: u64,
    pub request_timeout_ms: u64,
    /// `producer.id.expiration.ms` (producer_state.rs).
    pub producer_id_expiration_ms: u64,
    /// `controller.socket.timeout.ms`: how long a forwarded admin request waits (configs.rs).
    pub controller_socket_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub fetch_max_wait_ms: u64,
    /// `idle.poll.us`: how long the event loop polls after a busy turn before it sleeps
    /// (node/mod.rs, `run`).
    pub idle_poll_us: u64,
    pub segment_size_bytes: u64,
    pub max_record_bytes_between_snapshots: u64,
    pub snapshot_minimum_records: u64,
    pub snapshot_min_cleanable_ratio: f64,
    pub max_snapshot_interval_ms: u64,
    pub fetch_snapshot_max_bytes: u32,
    pub fetch_snapshot_response_max_bytes: u32,
    /// `replica.lag.cache.max.bytes` (`HostConfig::lagging_tail_budget_bytes`); unset, its
    /// default but at most a sixteenth of the machine's memory ([`unset_lagging_tail_budget`]).
    pub lagging_tail_budget_bytes: u64,
    pub max_replication_lag_ms: u64,
    pub socket_request_max_bytes: u32,
    /// `queued.max.request.bytes`; `None` is Kafka's -1, unbounded.
    pub queued_max_request_bytes: Option<u64>,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// `connections.max.idle.ms`; `None` is -1, idle connections kept.
    pub connections_max_idle_ms: Option<u64>,
    pub message_max_bytes: u32,
    pub metrics_listener: Option<SocketAddr>,
    pub auto_create_topics_enable: bool,
    /// `auto.leader.rebalance.enable` and its two settings; `None` when disabled
    /// (node/leader_balance.rs).
    pub leader_balance: Option<LeaderBalanceConfig>,
    /// `authorizer.class.name`, `allow.everyone.if.no.acl.found`, `super.users`.
    pub authorizer: crate::acl::AuthorizerConfig,
    pub num_partitions: u32,
    /// `default.replication.factor`: the replication factor of a topic created with -1.
    pub default_replication_factor: i16,
    /// `default.replication.factor` was left unset: the factor is the smaller of 3 and the
    /// metadata quorum's voters in force when a topic is placed (placement.rs), which grows
    /// with `add-voter`; `default_replication_factor` is its value over the configured voters.
    pub default_replication_factor_follows_voters: bool,
    /// Consumer groups: the `offsets.*` and `group.*` keys.
    pub groups: crate::groups::GroupConfig,
    /// Every key of [`KEYS`] as this node resolved it, for DescribeConfigs of the node.
    pub properties: Vec<ResolvedProperty>,
    /// Not a key: the data folder's `directory.id` (KIP-853) from `meta.properties`, set by
    /// the node at start (`None`: a folder formatted without one, or not read yet). Every
    /// partition's core carries it in its Fetch and Vote requests.
    pub directory_id: Option<[u8; 16]>,
}

/// One node property as resolved at start: its value (`None`: unset and without a default)
/// and whether the properties file set it (Kafka's STATIC_BROKER_CONFIG) or it is the
/// default (DEFAULT_CONFIG).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedProperty {
    pub name: &'static str,
    pub value: Option<String>,
    pub from_file: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("{path}: line {line}: expected key=value, found {text:?}")]
    Syntax {
        path: String,
        line: usize,
        text: String,
    },
    #[error("{path}: line {line}: unknown configuration key {key:?}")]
    UnknownKey {
        path: String,
        line: usize,
        key: String,
    },
    #[error("{path}: key {key:?} is set twice (also as {other:?})")]
    Duplicate {
        path: String,
        key: String,
        other: String,
    },
    #[error("{path}: required key {key:?} is missing")]
    Missing { path: String, key: &'static str },
    #[error("{path}: {key}={value:?}: {reason}")]
    Invalid {
        path: String,
        key: &'static str,
        value: String,
        reason: String,
    },
    #[error("{path}: {reason}")]
    Read { path: String, reason: String },
}

impl NodeConfig {
    /// Read and validate a properties file.
    pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.display().to_string(),
            reason: error.to_string(),
        })?;
        NodeConfig::parse(&path.display().to_string(), &text)
    }

    /// Parse properties text; `origin` names the source in error messages.
    pub fn parse(origin: &str, text: &str) -> Result<NodeConfig, ConfigError> {
        let values = Properties::parse(origin, text)?;
        // KIP-853: a node either knows the bootstrap voter set or servers to ask who leads.
        let quorum_bootstrap_servers =
            parse_bootstrap_servers(values.get("controller.quorum.bootstrap.servers"))
                .map_err(|reason| values.invalid("controller.quorum.bootstrap.servers", reason))?;
        let quorum_voters = match values.get("controller.quorum.voters") {
            "" if quorum_bootstrap_servers.is_empty() => {
                return Err(ConfigError::Missing {
                    path: origin.into(),
                    key: "controller.quorum.voters",
                });
            }
            "" => Vec::new(),
            _ if !quorum_bootstrap_servers.is_empty() => {
                return Err(values.invalid(
                    "controller.quorum.bootstrap.servers",
                    "set either controller.quorum.voters or controller.quorum.bootstrap.servers, not both".into(),
                ));
            }
            text => parse_voters(text)
                .map_err(|reason| values.invalid("controller.quorum.voters", reason))?,
        };
        let node_id: i32 = values.number("node.id")?;
        if node_id < 0 {
            return Err(values.invalid("node.id", "must not be negative".into()));
        }
        let quorum_observers = parse_observers(values.get("controller.quorum.observers"))
            .map_err(|reason| values.invalid("controller.quorum.observers", reason))?;
        if let Some(both) = quorum_observers
            .iter()
            .find(|id| quorum_voters.iter().any(|voter| voter.node_id == **id))
        {
            return Err(values.invalid(
                "controller.quorum.observers",
                format!("{both} is also a voter"),
            ));
        }
        // A node outside both lists would be refused by every leader it fetches from: say so
        // at start-up instead of letting it retry forever.
        let is_voter = quorum_voters.iter().any(|voter| voter.node_id == node_id);
        if !is_voter && !quorum_observers.contains(&node_id) && quorum_bootstrap_servers.is_empty()
        {
            return Err(values.invalid(
                "node.id",
                "is neither in controller.quorum.voters nor in controller.quorum.observers".into(),
            ));
        }
        let listeners = listeners::parse_listeners(
            values.required("listeners")?,
            values.get("controller.listener.names"),
            values.get("listener.security.protocol.map"),
            values.set_in_file("listener.security.protocol.map"),
        )
        .map_err(|(key, reason)| values.invalid(key, reason))?;
        let advertised_listener = match listeners::advertised_client_listener(
            values.get("advertised.listeners"),
            &listeners.client.name,
        )
        .map_err(|reason| values.invalid("advertised.listeners", reason))?
        {
            None => (
                listeners.client.address.ip().to_string(),
                listeners.client.address.port(),
            ),
            Some(text) => split_host_port(&text)
                .map_err(|reason| values.invalid("advertised.listeners", reason))?,
        };
        let tls = if listeners.any_ssl() {
            Some(tls_settings(&values)?)
        } else {
            None
        };
        let sasl_enabled_mechanisms = if listeners.client.security_protocol.uses_sasl() {
            sasl_mechanisms(values.get("sasl.enabled.mechanisms"))
                .map_err(|reason| values.invalid("sasl.enabled.mechanisms", reason))?
        } else {
            Vec::new()
        };
        let voter_advertised_listeners = match values.get("voter.advertised.listeners") {
            "" => Vec::new(),
            text => parse_voters(text)
                .map_err(|reason| values.invalid("voter.advertised.listeners", reason))?,
        };
        // Observers may be listed too: one added as a voter later (KIP-853) is named there.
        if let Some(stranger) = voter_advertised_listeners.iter().find(|v| {
            !quorum_voters.iter().any(|voter| voter.node_id == v.node_id)
                && !quorum_observers.contains(&v.node_id)
        }) {
            return Err(values.invalid(
                "voter.advertised.listeners",
                format!(
                    "{} is in neither controller.quorum.voters nor controller.quorum.observers",
                    stranger.node_id
                ),
            ));
        }
        // With a separate controller listener, controller.quorum.voters no longer says where
        // clients reach a voter: Metadata would send clients to the controller listener,
        // which may speak TLS they were not told of.
        if listeners.controller.is_some()
            && let Some(missing) = quorum_voters.iter().find(|voter| {
                voter.node_id != node_id
                    && !voter_advertised_listeners
                        .iter()
                        .any(|v| v.node_id == voter.node_id)
            })
        {
            return Err(values.invalid(
                "voter.advertised.listeners",
                format!(
                    "must give voter {}'s client listener when controller.listener.names separates the controller listener",
                    missing.node_id
                ),
            ));
        }
        let metrics_text = values.get("metrics.listener");
        let metrics_listener = if metrics_text.is_empty() {
            None
        } else {
            Some(
                metrics_text
                    .parse()
                    .map_err(|_| values.invalid("metrics.listener", "expected host:port".into()))?,
            )
        };
        let socket_request_max_bytes: u32 = values.positive("socket.request.max.bytes")?;
        let queued_max_request_bytes = match values.number::<i64>("queued.max.request.bytes")? {
            -1 => None,
            budget if budget >= i64::from(socket_request_max_bytes) => Some(budget as u64),
            _ => {
                return Err(values.invalid(
                    "queued.max.request.bytes",
                    format!(
                        "must be -1 (unbounded) or at least socket.request.max.bytes ({socket_request_max_bytes}), so that the largest request can be read"
                    ),
                ));
            }
        };
        let connections_max_idle_ms = match values.number::<i64>("connections.max.idle.ms")? {
            -1 => None,
            idle if idle > 0 => Some(idle as u64),
            _ => {
                return Err(values.invalid(
                    "connections.max.idle.ms",
                    "must be -1 (never) or a positive number of milliseconds".to_string(),
                ));
            }
        };
        let ratio: f64 = values.number("metadata.snapshot.min.cleanable.ratio")?;
        if !(0.0..=1.0).contains(&ratio) {
            return Err(values.invalid(
                "metadata.snapshot.min.cleanable.ratio",
                "must be between 0 and 1".into(),
            ));
        }
        // Kafka's default is 1; the smaller of 3 and the voters keeps the default topic as
        // safe as the cluster allows (docs/configuration.md).
        let default_replication_factor_follows_voters =
            values.get("default.replication.factor").is_empty();
        let default_replication_factor = match values.get("default.replication.factor") {
            "" => quorum_voters.len().clamp(1, 3) as i16,
            _ => {
                let factor: i16 = values.positive("default.replication.factor")?;
                // With bootstrap servers only, the voters are not known before the log is.
                if !quorum_voters.is_empty() && factor as usize > quorum_voters.len() {
                    return Err(values.invalid(
                        "default.replication.factor",
                        format!(
                            "must be at most the number of voters ({})",
                            quorum_voters.len()
                        ),
                    ));
                }
                factor
            }
        };
        let config = NodeConfig {
            node_id,
            quorum_voters,
            quorum_bootstrap_servers,
            quorum_observers,
            listeners,
            advertised_listener,
            voter_advertised_listeners,
            tls,
            sasl_enabled_mechanisms,
            metadata_log_dir: PathBuf::from(values.required("metadata.log.dir")?),
            election_timeout_ms: values.positive("controller.quorum.election.timeout.ms")?,
            election_backoff_max_ms: values
                .positive("controller.quorum.election.backoff.max.ms")?,
            fetch_timeout_ms: values.positive("controller.quorum.fetch.timeout.ms")?,
            request_timeout_ms: values.positive("controller.quorum.request.timeout.ms")?,
            producer_id_expiration_ms: values.positive("producer.id.expiration.ms")?,
            controller_socket_timeout_ms: values.positive("controller.socket.timeout.ms")?,
            retry_backoff_ms: values.positive("controller.quorum.retry.backoff.ms")?,
            fetch_max_wait_ms: values.number("controller.quorum.fetch.max.wait.ms")?,
            idle_poll_us: values.number("idle.poll.us")?,
            segment_size_bytes: values.positive("metadata.log.segment.bytes")?,
            max_record_bytes_between_snapshots: values
                .number("metadata.log.max.record.bytes.between.snapshots")?,
            snapshot_minimum_records: values.number("controller.snapshot.minimum.records")?,
            snapshot_min_cleanable_ratio: ratio,
            max_snapshot_interval_ms: values.number("metadata.log.max.snapshot.interval.ms")?,
            fetch_snapshot_max_bytes: values.positive("replica.fetch.snapshot.max.bytes")?,
            fetch_snapshot_response_max_bytes: values
                .positive("replica.fetch.snapshot.response.max.bytes")?,
            lagging_tail_budget_bytes: if values.set_in_file("replica.lag.cache.max.bytes") {
                values.number("replica.lag.cache.max.bytes")?
            } else {
                unset_lagging_tail_budget(DEFAULT_LAGGING_TAIL_BUDGET_BYTES)
            },
            max_replication_lag_ms: values.positive("max.replication.lag.ms")?,
            socket_request_max_bytes,
            queued_max_request_bytes,
            max_connections: values.positive("max.connections")?,
            max_connections_per_ip: values.positive("max.connections.per.ip")?,
            connections_max_idle_ms,
            message_max_bytes: values.positive("message.max.bytes")?,
            metrics_listener,
            auto_create_topics_enable: values.boolean("auto.create.topics.enable")?,
            leader_balance: if values.boolean("auto.leader.rebalance.enable")? {
                let percentage: u64 = values.number("leader.imbalance.per.broker.percentage")?;
                if percentage > 100 {
                    return Err(values.invalid(
                        "leader.imbalance.per.broker.percentage",
                        "must be at most 100".into(),
                    ));
                }
                Some(LeaderBalanceConfig {
                    check_interval_ms: values
                        .positive::<u64>("leader.imbalance.check.interval.seconds")?
                        .checked_mul(1_000)
                        .ok_or_else(|| {
                            values.invalid(
                                "leader.imbalance.check.interval.seconds",
                                "too large".into(),
                            )
                        })?,
                    per_node_percentage: percentage,
                })
            } else {
                None
            },
            authorizer: crate::acl::AuthorizerConfig::parse(
                values.get("authorizer.class.name"),
                values.boolean("allow.everyone.if.no.acl.found")?,
                values.get("super.users"),
            )
            .map_err(|(key, reason)| values.invalid(key, reason))?,
            num_partitions: values.positive("num.partitions")?,
            properties: values.resolved(),
            directory_id: None,
            default_replication_factor,
            default_replication_factor_follows_voters,
            groups: crate::groups::GroupConfig {
                offsets_topic_num_partitions: values.positive("offsets.topic.num.partitions")?,
                offsets_topic_segment_bytes: values.positive("offsets.topic.segment.bytes")?,
                offsets_commit_timeout_ms: values.positive("offsets.commit.timeout.ms")?,
                offset_metadata_max_bytes: values.number("offset.metadata.max.bytes")?,
                offsets_retention_ms: values
                    .positive::<u64>("offsets.retention.minutes")?
                    .checked_mul(60_000)
                    .filter(|ms| *ms <= i64::MAX as u64)
                    .ok_or_else(|| {
                        values.invalid("offsets.retention.minutes", "too large".into())
                    })?,
                offsets_retention_check_interval_ms: values
                    .positive("offsets.retention.check.interval.ms")?,
                initial_rebalance_delay_ms: values.number("group.initial.rebalance.delay.ms")?,
                min_session_timeout_ms: values.positive("group.min.session.timeout.ms")?,
                max_session_timeout_ms: values.positive("group.max.session.timeout.ms")?,
            },
        };
        if config.groups.offsets_topic_num_partitions > 10_000 {
            return Err(values.invalid(
                "offsets.topic.num.partitions",
                "must be at most 10000".into(),
            ));
        }
        if !(65_536..=1 << 30).contains(&config.groups.offsets_topic_segment_bytes) {
            return Err(values.invalid(
                "offsets.topic.segment.bytes",
                "must be from 65536 to 1073741824".into(),
            ));
        }
        if config.groups.offset_metadata_max_bytes > i16::MAX as usize {
            return Err(values.invalid(
                "offset.metadata.max.bytes",
                "must be at most 32767 (a protocol string)".into(),
            ));
        }
        if config.groups.min_session_timeout_ms > config.groups.max_session_timeout_ms {
            return Err(values.invalid(
                "group.min.session.timeout.ms",
                "must not exceed group.max.session.timeout.ms".into(),
            ));
        }
        if config.segment_size_bytes < MIB / 16 {
            return Err(values.invalid(
                "metadata.log.segment.bytes",
                "must be at least 65536".into(),
            ));
        }
        Ok(config)
    }

    /// True when this node is one of the voters; otherwise it is an observer.
    pub fn is_voter(&self) -> bool {
        self.quorum_voters
            .iter()
            .any(|voter| voter.node_id == self.node_id)
    }

    /// The name under which voters' quorum endpoints are published (DescribeQuorum, KIP-853
    /// voter sets): the controller listener's, or `CONTROLLER` when one listener serves all.
    pub fn controller_listener_name(&self) -> &str {
        self.listeners
            .controller
            .as_ref()
            .map_or("CONTROLLER", |listener| listener.name.as_str())
    }

    /// True when `replica_id` may replicate from this quorum: a voter or a listed observer.
    pub fn is_quorum_member(&self, replica_id: i32) -> bool {
        self.quorum_voters
            .iter()
            .any(|voter| voter.node_id == replica_id)
            || self.quorum_observers.contains(&replica_id)
    }
}

/// `replica.lag.cache.max.bytes` when the file does not set it: the default (1 GiB), but at
/// most a sixteenth of the machine's memory. `ringlog dev` runs three voters and an observer on
/// one machine, each leader of some partitions: on a machine of 4 GiB the default would allow
/// them most of it while a node is down.
fn unset_lagging_tail_budget(default: u64) -> u64 {
    // SAFETY: sysconf only reads the running system's values.
    let (pages, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page_bytes <= 0 {
        return default;
    }
    default.min(pages as u64 * page_bytes as u64 / 16)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
