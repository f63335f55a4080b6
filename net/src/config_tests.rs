//! The configuration file: defaults, aliases, refused keys and the docs table (config.rs).

use super::*;

const MINIMAL: &str = "node.id=2\ncontroller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094\nlisteners=PLAINTEXT://127.0.0.1:9094\nmetadata.log.dir=/tmp/x\n";

#[test]
fn minimal_file_takes_kafka_defaults() {
    let config = NodeConfig::parse("node.properties", MINIMAL).unwrap();
    assert_eq!(config.node_id, 2);
    assert!(config.is_voter());
    assert_eq!(config.quorum_voters.len(), 2);
    assert_eq!(config.election_timeout_ms, 1000);
    assert_eq!(config.fetch_timeout_ms, 2000);
    assert_eq!(config.fetch_snapshot_response_max_bytes, 10 * 1024 * 1024);
    assert_eq!(config.max_replication_lag_ms, 7 * 24 * 3600 * 1000);
    assert_eq!(config.socket_request_max_bytes, 100 * 1024 * 1024);
    assert_eq!(config.advertised_listener, ("127.0.0.1".to_string(), 9094));
    assert_eq!(config.metrics_listener, None);
}

#[test]
fn unknown_key_is_rejected_by_name() {
    let text = format!("{MINIMAL}controller.quorum.election.timout.ms=5\n");
    let error = NodeConfig::parse("node.properties", &text).unwrap_err();
    assert_eq!(
        error,
        ConfigError::UnknownKey {
            path: "node.properties".into(),
            line: 5,
            key: "controller.quorum.election.timout.ms".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("controller.quorum.election.timout.ms")
    );
}

#[test]
fn aliases_resolve_and_may_not_both_be_set() {
    let text = format!("{MINIMAL}metadata.start.offset.lag.time.max.ms=5000\n");
    assert_eq!(
        NodeConfig::parse("p", &text)
            .unwrap()
            .max_replication_lag_ms,
        5000
    );
    let both = format!("{text}max.replication.lag.ms=6000\n");
    assert!(matches!(
        NodeConfig::parse("p", &both),
        Err(ConfigError::Duplicate { .. })
    ));
    let size = format!("{MINIMAL}metadata.snapshot.min.records.size=4096\n");
    assert_eq!(
        NodeConfig::parse("p", &size)
            .unwrap()
            .max_record_bytes_between_snapshots,
        4096
    );
}

/// KIP-595 names the quorum settings `quorum.*` and KIP-630 the FetchSnapshot response
/// limit `replica.fetch.response.max.bytes`; each is the same setting as our key.
#[test]
fn the_kips_names_are_aliases() {
    type Case = (&'static str, &'static str, fn(&NodeConfig) -> u64);
    let cases: &[Case] = &[
        ("quorum.fetch.timeout.ms", "3001", |c| c.fetch_timeout_ms),
        ("quorum.election.timeout.ms", "3002", |c| {
            c.election_timeout_ms
        }),
        ("quorum.election.backoff.max.ms", "3003", |c| {
            c.election_backoff_max_ms
        }),
        ("quorum.request.timeout.ms", "3004", |c| {
            c.request_timeout_ms
        }),
        ("replica.fetch.response.max.bytes", "3005", |c| {
            u64::from(c.fetch_snapshot_response_max_bytes)
        }),
    ];
    for (alias, value, field) in cases {
        let text = format!("{MINIMAL}{alias}={value}\n");
        let config = NodeConfig::parse("p", &text).unwrap();
        assert_eq!(field(&config).to_string(), *value, "{alias}");
    }
    let voters = MINIMAL.replace("controller.quorum.voters=", "quorum.voters=");
    let config = NodeConfig::parse("p", &voters).unwrap();
    assert_eq!(config.quorum_voters.len(), 2);
    // An alias and its key together is a duplicate, whichever comes first.
    let both = format!("{MINIMAL}quorum.voters=1@127.0.0.1:9093\n");
    assert!(matches!(
        NodeConfig::parse("p", &both),
        Err(ConfigError::Duplicate { .. })
    ));
}

/// The key the node parsed and ignored is refused by name now.
#[test]
fn removed_keys_are_refused_by_name() {
    let key = "controller.quorum.append.linger.ms";
    let text = format!("{MINIMAL}{key}=10\n");
    assert_eq!(
        NodeConfig::parse("p", &text),
        Err(ConfigError::UnknownKey {
            path: "p".into(),
            line: 5,
            key: key.into()
        })
    );
}

#[test]
fn missing_and_invalid_values_name_the_key() {
    let error = NodeConfig::parse("p", "node.id=1\n").unwrap_err();
    assert!(matches!(
        error,
        ConfigError::Missing {
            key: "controller.quorum.voters",
            ..
        }
    ));
    let bad = MINIMAL.replace("node.id=2", "node.id=two");
    assert!(matches!(
        NodeConfig::parse("p", &bad),
        Err(ConfigError::Invalid { key: "node.id", .. })
    ));
    let zero = format!("{MINIMAL}controller.quorum.fetch.timeout.ms=0\n");
    assert!(matches!(
        NodeConfig::parse("p", &zero),
        Err(ConfigError::Invalid {
            key: "controller.quorum.fetch.timeout.ms",
            ..
        })
    ));
    assert!(matches!(
        NodeConfig::parse("p", "just words\n"),
        Err(ConfigError::Syntax { line: 1, .. })
    ));
}

#[test]
fn voters_are_validated() {
    assert!(parse_voters("1@h:1,1@h:2").unwrap_err().contains("twice"));
    assert!(parse_voters("x@h:1").is_err());
    assert!(parse_voters("1@h").is_err());
    assert!(parse_voters("").is_err());
    let voters = parse_voters("1@localhost:9093, 3@[::1]:9095").unwrap();
    assert_eq!(
        voters[1],
        VoterAddress {
            node_id: 3,
            host: "::1".into(),
            port: 9095
        }
    );
}

#[test]
fn an_observer_is_a_listed_non_voter() {
    let text = MINIMAL.replace("node.id=2", "node.id=7");
    let observer = format!("{text}controller.quorum.observers=7, 8\n");
    let config = NodeConfig::parse("p", &observer).unwrap();
    assert!(!config.is_voter());
    assert_eq!(config.quorum_observers, [7, 8]);
    assert!(config.is_quorum_member(1) && config.is_quorum_member(8));
    assert!(!config.is_quorum_member(9));
    // Neither a voter nor a listed observer: refused at start-up, naming node.id.
    assert!(matches!(
        NodeConfig::parse("p", &text),
        Err(ConfigError::Invalid { key: "node.id", .. })
    ));
    let both = format!("{MINIMAL}controller.quorum.observers=1\n");
    assert!(matches!(
        NodeConfig::parse("p", &both),
        Err(ConfigError::Invalid {
            key: "controller.quorum.observers",
            ..
        })
    ));
    assert!(parse_observers("3,3").unwrap_err().contains("twice"));
    assert!(parse_observers("-1").is_err());
    assert_eq!(parse_observers(" ").unwrap(), Vec::<i32>::new());
}

/// docs/configuration.md documents exactly the keys the node accepts.
#[test]
fn every_key_is_documented() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/configuration.md"
    ))
    .unwrap();
    for definition in KEYS {
        assert!(
            docs.contains(&format!("`{}`", definition.name)),
            "{} is not documented",
            definition.name
        );
        for alias in definition.aliases {
            assert!(
                docs.contains(&format!("`{alias}`")),
                "alias {alias} is not documented"
            );
        }
    }
}

/// The server's defaults and the documented defaults are the same numbers.
#[test]
fn resource_limits_default_to_the_servers_defaults() {
    use crate::server::ServerConfig;
    let config = NodeConfig::parse("p", MINIMAL).unwrap();
    let server = ServerConfig::from_node_config(&config);
    let defaults = ServerConfig::new(config.listeners.client.address);
    assert_eq!(server.connections_max_idle, defaults.connections_max_idle);
    assert_eq!(
        server.queued_max_request_bytes,
        defaults.queued_max_request_bytes
    );
    assert_eq!(server.queued_max_request_bytes, Some(100 * 1024 * 1024));
    assert_eq!(server.max_connections, defaults.max_connections);
    assert_eq!(
        server.max_connections_per_ip,
        defaults.max_connections_per_ip
    );
    assert_eq!(
        server.socket_request_max_bytes,
        defaults.socket_request_max_bytes
    );
}

/// Kafka's -1 is an unbounded budget; a budget that cannot hold the largest request would
/// leave such a request unread forever, so it is refused with both keys' values.
#[test]
fn the_request_budget_holds_the_largest_request_or_is_unbounded() {
    let unbounded = format!("{MINIMAL}queued.max.request.bytes=-1\n");
    assert_eq!(
        NodeConfig::parse("p", &unbounded)
            .unwrap()
            .queued_max_request_bytes,
        None
    );
    let small =
        format!("{MINIMAL}socket.request.max.bytes=1048576\nqueued.max.request.bytes=1048576\n");
    assert_eq!(
        NodeConfig::parse("p", &small)
            .unwrap()
            .queued_max_request_bytes,
        Some(1 << 20)
    );
    for bad in ["0", "-2", "104857599", "lots"] {
        let text = format!("{MINIMAL}queued.max.request.bytes={bad}\n");
        let error = NodeConfig::parse("p", &text).unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::Invalid {
                    key: "queued.max.request.bytes",
                    ..
                }
            ),
            "{bad}: {error}"
        );
    }
    for key in ["max.connections", "max.connections.per.ip"] {
        let text = format!("{MINIMAL}{key}=0\n");
        assert!(matches!(
            NodeConfig::parse("p", &text),
            Err(ConfigError::Invalid { key: k, .. }) if k == key
        ));
    }
}

/// The three limits set in the file reach the server as they were written.
#[test]
fn resource_limits_reach_the_server() {
    use crate::server::ServerConfig;
    let text = format!(
        "{MINIMAL}max.connections=7\nmax.connections.per.ip=3\nqueued.max.request.bytes=209715200\n"
    );
    let server = ServerConfig::from_node_config(&NodeConfig::parse("p", &text).unwrap());
    assert_eq!(server.max_connections, 7);
    assert_eq!(server.max_connections_per_ip, 3);
    assert_eq!(server.queued_max_request_bytes, Some(200 * 1024 * 1024));
}

/// The group keys default to Kafka's values (GroupConfig::default is the same table) and
/// are read under Kafka's names.
#[test]
fn group_keys_default_to_kafkas_values() {
    let config = NodeConfig::parse("p", MINIMAL).unwrap();
    assert_eq!(config.groups, crate::groups::GroupConfig::default());
    let text =
        format!("{MINIMAL}offsets.topic.num.partitions=3\ngroup.initial.rebalance.delay.ms=0\n");
    let config = NodeConfig::parse("p", &text).unwrap();
    assert_eq!(config.groups.offsets_topic_num_partitions, 3);
    assert_eq!(config.groups.initial_rebalance_delay_ms, 0);
    let text = format!("{MINIMAL}offsets.topic.segment.bytes=100\n");
    assert!(matches!(
        NodeConfig::parse("p", &text),
        Err(ConfigError::Invalid {
            key: "offsets.topic.segment.bytes",
            ..
        })
    ));
}

/// `default.replication.factor`: unset, the smaller of 3 and the voters; set, from 1 to the
/// number of voters (a default no topic could take is refused at start, with the key's name).
#[test]
fn default_replication_factor_is_bounded_by_the_voters() {
    let config = NodeConfig::parse("p", MINIMAL).unwrap();
    assert_eq!(config.default_replication_factor, 2);
    assert!(config.default_replication_factor_follows_voters);
    let config =
        NodeConfig::parse("p", &format!("{MINIMAL}default.replication.factor=1\n")).unwrap();
    assert_eq!(config.default_replication_factor, 1);
    assert!(!config.default_replication_factor_follows_voters);
    for bad in ["0", "3", "-1", "x"] {
        let text = format!("{MINIMAL}default.replication.factor={bad}\n");
        let error = NodeConfig::parse("p", &text).unwrap_err();
        assert!(
            error.to_string().contains("default.replication.factor"),
            "{bad}: {error}"
        );
    }
}

/// `controller.quorum.retry.backoff.ms` (KIP-595's `quorum.retry.backoff.ms`) takes effect
/// again: it paces a Vote asked again after an error answer (Kafka's default, 20 ms).
#[test]
fn retry_backoff_has_kafka_s_default_and_its_kip_alias() {
    assert_eq!(
        NodeConfig::parse("p", MINIMAL).unwrap().retry_backoff_ms,
        20
    );
    let text = format!("{MINIMAL}quorum.retry.backoff.ms=7\n");
    assert_eq!(NodeConfig::parse("p", &text).unwrap().retry_backoff_ms, 7);
}

/// Kafka's listener keys: a separate controller listener with its own security protocol.
const SEPARATED: &str = "node.id=2\ncontroller.quorum.voters=1@127.0.0.1:9193,2@127.0.0.1:9194\n\
    listeners=PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9194\n\
    controller.listener.names=CONTROLLER\nvoter.advertised.listeners=1@127.0.0.1:9093\n\
    metadata.log.dir=/tmp/x\n";

#[test]
fn one_listener_serves_everything_as_before() {
    let config = NodeConfig::parse("p", MINIMAL).unwrap();
    assert_eq!(config.listeners.controller, None);
    assert_eq!(config.listeners.client.name, "PLAINTEXT");
    assert_eq!(
        config.listeners.client.address,
        "127.0.0.1:9094".parse().unwrap()
    );
    assert_eq!(
        config.listeners.client.security_protocol,
        SecurityProtocol::Plaintext
    );
    assert_eq!(config.controller_listener_name(), "CONTROLLER");
    // Without a name, as `ringlog dev` and older configurations write it.
    let bare = MINIMAL.replace("PLAINTEXT://", "");
    assert_eq!(
        NodeConfig::parse("p", &bare).unwrap().listeners,
        config.listeners
    );
}

#[test]
fn controller_listener_names_separate_the_quorum_listener() {
    let config = NodeConfig::parse("p", SEPARATED).unwrap();
    let controller = config.listeners.controller.clone().unwrap();
    assert_eq!(controller.name, "CONTROLLER");
    assert_eq!(controller.address, "127.0.0.1:9194".parse().unwrap());
    // Kafka: an unset map makes the controller listener PLAINTEXT.
    assert_eq!(controller.security_protocol, SecurityProtocol::Plaintext);
    assert_eq!(
        config.listeners.client.address,
        "127.0.0.1:9094".parse().unwrap()
    );
    assert_eq!(config.listeners.quorum(), &controller);
    assert_eq!(config.advertised_listener, ("127.0.0.1".to_string(), 9094));
    assert_eq!(config.voter_advertised_listeners[0].port, 9093);
    assert_eq!(config.controller_listener_name(), "CONTROLLER");
    // The server gets both listeners.
    let server = crate::server::ServerConfig::from_node_config(&config);
    assert_eq!(server.listener, "127.0.0.1:9094".parse().unwrap());
    assert_eq!(
        server.controller_listener,
        Some("127.0.0.1:9194".parse().unwrap())
    );
}

#[test]
fn listener_keys_are_validated_by_name() {
    let invalid = |text: &str| match NodeConfig::parse("p", text) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an invalid key, got {other:?}"),
    };
    // Two listeners, and nothing says which one is the controller's.
    assert_eq!(
        invalid(
            &SEPARATED
                .replace("controller.listener.names=CONTROLLER\n", "")
                .replace("CONTROLLER://", "SSL://")
        ),
        "listeners"
    );
    assert_eq!(
        invalid(&SEPARATED.replace("names=CONTROLLER", "names=QUORUM")),
        "controller.listener.names"
    );
    assert_eq!(
        invalid(&SEPARATED.replace("names=CONTROLLER", "names=CONTROLLER,PLAINTEXT")),
        "controller.listener.names"
    );
    // Only the controller listener: no client listener.
    assert_eq!(
        invalid(&SEPARATED.replace("PLAINTEXT://127.0.0.1:9094,", "")),
        "listeners"
    );
    assert_eq!(
        invalid(&SEPARATED.replace("127.0.0.1:9094,", "127.0.0.1:9194,")),
        "listeners"
    );
    assert_eq!(
        invalid(&SEPARATED.replace("PLAINTEXT://127.0.0.1:9094", "CONTROLLER://127.0.0.1:9095")),
        "listeners"
    );
    // Another voter's client listener is needed for Metadata.
    assert_eq!(
        invalid(&SEPARATED.replace("voter.advertised.listeners=1@127.0.0.1:9093\n", "")),
        "voter.advertised.listeners"
    );
    assert_eq!(
        invalid(&SEPARATED.replace("1@127.0.0.1:9093", "1@127.0.0.1:9093,7@127.0.0.1:9097")),
        "voter.advertised.listeners"
    );
    // A map that is set must name every listener; SASL on the controller listener is refused
    // (peers do not authenticate with SASL).
    let mapped = format!("{SEPARATED}listener.security.protocol.map=PLAINTEXT:PLAINTEXT\n");
    assert_eq!(invalid(&mapped), "listener.security.protocol.map");
    let sasl = format!(
        "{SEPARATED}listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL\n"
    );
    assert_eq!(invalid(&sasl), "listener.security.protocol.map");
}

#[test]
fn advertised_listeners_pick_the_client_listeners_entry() {
    let text = format!(
        "{SEPARATED}advertised.listeners=CONTROLLER://c.example:9194,PLAINTEXT://p.example:19094\n"
    );
    let config = NodeConfig::parse("p", &text).unwrap();
    assert_eq!(config.advertised_listener, ("p.example".to_string(), 19094));
    let missing = format!("{SEPARATED}advertised.listeners=CONTROLLER://c.example:9194\n");
    assert!(matches!(
        NodeConfig::parse("p", &missing),
        Err(ConfigError::Invalid {
            key: "advertised.listeners",
            ..
        })
    ));
}

/// SASL/SCRAM on the client listener: `sasl.enabled.mechanisms` names SCRAM mechanisms only;
/// a listener that serves the quorum cannot be SASL.
#[test]
fn sasl_client_listeners_take_scram_mechanisms_only() {
    use crate::sasl::ScramMechanism;
    let invalid = |text: &str| match NodeConfig::parse("p", text) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an invalid key, got {other:?}"),
    };
    let sasl = SEPARATED.replace(
        "PLAINTEXT://127.0.0.1:9094",
        "SASL_PLAINTEXT://127.0.0.1:9094",
    );
    let with = |mechanisms: &str| format!("{sasl}sasl.enabled.mechanisms={mechanisms}\n");
    let config = NodeConfig::parse("p", &with("SCRAM-SHA-512, SCRAM-SHA-256")).unwrap();
    assert_eq!(
        config.listeners.client.security_protocol,
        SecurityProtocol::SaslPlaintext
    );
    assert_eq!(
        config.sasl_enabled_mechanisms,
        vec![ScramMechanism::Sha512, ScramMechanism::Sha256]
    );
    // Kafka's default (GSSAPI) and the mechanisms ringlog does not have are refused by name.
    assert_eq!(invalid(&sasl), "sasl.enabled.mechanisms");
    assert_eq!(invalid(&with("PLAIN")), "sasl.enabled.mechanisms");
    assert_eq!(
        invalid(&with("SCRAM-SHA-256,OAUTHBEARER")),
        "sasl.enabled.mechanisms"
    );
    // Without a SASL listener the key is not read.
    let plain = NodeConfig::parse("p", &format!("{SEPARATED}sasl.enabled.mechanisms=PLAIN\n"));
    assert!(plain.unwrap().sasl_enabled_mechanisms.is_empty());
    // One listener for everything serves the quorum: it cannot be SASL.
    let combined = MINIMAL.replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        + "sasl.enabled.mechanisms=SCRAM-SHA-256\n";
    assert_eq!(invalid(&combined), "listener.security.protocol.map");
    // SASL_SSL is TLS as well: the ssl.* keys become required.
    let sasl_ssl = with("SCRAM-SHA-256").replace("SASL_PLAINTEXT://", "SASL_SSL://");
    assert!(invalid(&sasl_ssl).starts_with("ssl."));
}

/// An SSL listener needs the `ssl.*` keys; what rustls cannot read is refused by name.
#[test]
fn ssl_listeners_take_kafkas_pem_keys() {
    let ssl = SEPARATED.to_string()
        + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\n";
    let invalid = |text: &str| match NodeConfig::parse("p", text) {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an invalid key, got {other:?}"),
    };
    assert_eq!(invalid(&ssl), "ssl.keystore.location");
    let with_file = format!(
        "{ssl}ssl.keystore.location=/etc/ringlog/node.pem\nssl.truststore.location=/etc/ringlog/ca.pem\nssl.client.auth=required\n"
    );
    let config = NodeConfig::parse("p", &with_file).unwrap();
    assert_eq!(
        config
            .listeners
            .controller
            .as_ref()
            .unwrap()
            .security_protocol,
        SecurityProtocol::Ssl
    );
    assert_eq!(
        config.listeners.client.security_protocol,
        SecurityProtocol::Plaintext
    );
    let tls = config.tls.unwrap();
    assert_eq!(
        tls.private_key,
        Some(crate::tls::PemSource::File("/etc/ringlog/node.pem".into()))
    );
    assert_eq!(tls.client_auth, crate::tls::ClientAuth::Required);
    assert!(tls.endpoint_identification);
    // PEM text instead of a file.
    let inline = format!(
        "{ssl}ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- QUJD -----END CERTIFICATE-----\nssl.keystore.key=-----BEGIN PRIVATE KEY----- QUJD -----END PRIVATE KEY-----\n"
    );
    assert!(matches!(
        NodeConfig::parse("p", &inline)
            .unwrap()
            .tls
            .unwrap()
            .certificate_chain,
        Some(crate::tls::PemSource::Text(_))
    ));
    assert_eq!(
        invalid(&format!("{with_file}ssl.keystore.type=JKS\n")),
        "ssl.keystore.type"
    );
    assert_eq!(
        invalid(&format!("{with_file}ssl.key.password=secret\n")),
        "ssl.key.password"
    );
    assert_eq!(
        invalid(&with_file.replace("ssl.client.auth=required", "ssl.client.auth=always")),
        "ssl.client.auth"
    );
    assert_eq!(
        invalid(&format!(
            "{with_file}ssl.keystore.key=-----BEGIN PRIVATE KEY----- QUJD -----END PRIVATE KEY-----\n"
        )),
        "ssl.keystore.location"
    );
    // Without an SSL listener the keys are not needed.
    assert_eq!(NodeConfig::parse("p", SEPARATED).unwrap().tls, None);
}

/// KIP-853: a node may know servers to ask who leads instead of the voters; it is then an
/// observer (not listed in `controller.quorum.observers` itself), and one of the two keys is
/// required, never both.
#[test]
fn bootstrap_servers_replace_the_voters() {
    let text = "node.id=4\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093, 127.0.0.1:9094\n\
                listeners=127.0.0.1:9096\nmetadata.log.dir=/tmp/x\n";
    let config = NodeConfig::parse("p", text).unwrap();
    assert!(config.quorum_voters.is_empty());
    assert!(!config.is_voter());
    assert_eq!(
        config.quorum_bootstrap_servers,
        vec![
            ("127.0.0.1".to_string(), 9093),
            ("127.0.0.1".to_string(), 9094)
        ]
    );
    let both = format!("{MINIMAL}controller.quorum.bootstrap.servers=127.0.0.1:9093\n");
    assert!(matches!(
        NodeConfig::parse("p", &both),
        Err(ConfigError::Invalid {
            key: "controller.quorum.bootstrap.servers",
            ..
        })
    ));
    let neither = "node.id=4\nlisteners=127.0.0.1:9096\nmetadata.log.dir=/tmp/x\n";
    assert!(matches!(
        NodeConfig::parse("p", neither),
        Err(ConfigError::Missing {
            key: "controller.quorum.voters",
            ..
        })
    ));
    let bad = "node.id=4\ncontroller.quorum.bootstrap.servers=nohost\n\
               listeners=127.0.0.1:9096\nmetadata.log.dir=/tmp/x\n";
    assert!(NodeConfig::parse("p", bad).is_err());
}

/// `replica.lag.cache.max.bytes`: as set, 0 and more than the default included; unset, 1 GiB
/// but at most a sixteenth of the machine's memory (as /proc/meminfo counts it).
#[test]
fn the_lagging_tail_budget_is_bounded_by_the_machine_unless_set() {
    let unset = NodeConfig::parse("p", MINIMAL).unwrap();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let mem_total_kib: u64 = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("MemTotal in /proc/meminfo");
    let expected = DEFAULT_LAGGING_TAIL_BUDGET_BYTES.min(mem_total_kib * 1024 / 16);
    // The key's documented default is the host's own.
    let documented = KEYS
        .iter()
        .find(|key| key.name == "replica.lag.cache.max.bytes")
        .and_then(|key| key.default)
        .expect("a documented default");
    assert_eq!(documented, DEFAULT_LAGGING_TAIL_BUDGET_BYTES.to_string());
    // sysconf's pages and MemTotal differ by the kernel's own reservations: within 1 %.
    let got = unset.lagging_tail_budget_bytes;
    assert!(
        got <= DEFAULT_LAGGING_TAIL_BUDGET_BYTES && got.abs_diff(expected) <= expected / 100,
        "{got} {expected}"
    );
    for value in [0u64, 1 << 20, 8 << 30] {
        let file = format!("{MINIMAL}replica.lag.cache.max.bytes={value}\n");
        let config = NodeConfig::parse("p", &file).unwrap();
        assert_eq!(config.lagging_tail_budget_bytes, value);
    }
}

/// `auto.leader.rebalance.enable` and its settings (node/leader_balance.rs): on by default
/// with Kafka's 300 s and 10 %, off when disabled, and a percentage above 100 refused.
#[test]
fn preferred_leaders_are_kept_as_kafka_keeps_them_unless_disabled() {
    let balance = |lines: &str| {
        NodeConfig::parse("p", &format!("{MINIMAL}{lines}"))
            .unwrap()
            .leader_balance
            .map(|b| (b.check_interval_ms, b.per_node_percentage))
    };
    assert_eq!(balance(""), Some((300_000, 10)));
    let lines =
        "leader.imbalance.check.interval.seconds=2\nleader.imbalance.per.broker.percentage=0\n";
    assert_eq!(balance(lines), Some((2_000, 0)));
    assert_eq!(balance("auto.leader.rebalance.enable=false\n"), None);
    for bad in [
        "leader.imbalance.per.broker.percentage=101",
        "leader.imbalance.check.interval.seconds=0",
    ] {
        let error = NodeConfig::parse("p", &format!("{MINIMAL}{bad}\n")).unwrap_err();
        assert!(
            error.to_string().contains(bad.split('=').next().unwrap()),
            "{bad}: {error}"
        );
    }
}
