//! Named listeners, as Kafka configures them: `listeners` lists `NAME://host:port` entries,
//! `controller.listener.names` says which one serves the quorum, and
//! `listener.security.protocol.map` gives each name its security protocol.
//!
//! ```text
//! listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
//! controller.listener.names=CONTROLLER
//! listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL
//! controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293
//! ```
//!
//! | `controller.listener.names` | `listeners` | the node serves |
//! | --- | --- | --- |
//! | empty (default) | one entry, named or not | every API on that listener (peers and clients alike) |
//! | one name | that name and exactly one other | the quorum's APIs only on the named (controller) listener; every other API on both |
//! | anything else | | refused at start with the key's name |
//!
//! An entry without `NAME://` is named PLAINTEXT. A name's protocol comes from the map;
//! Kafka's default map gives PLAINTEXT and SSL their own protocol, and, as in Kafka, the
//! controller listener's name defaults to PLAINTEXT when the map is not set at all.
//!
//! SASL_PLAINTEXT and SASL_SSL (SASL/SCRAM, `sasl.enabled.mechanisms`; crate::sasl) are for the
//! client listener of a node with a separate controller listener: peers do not authenticate
//! with SASL, so a listener that serves the quorum (the controller listener, or the only
//! listener) must be PLAINTEXT or SSL.

use std::net::SocketAddr;

/// How a listener's connections are secured (`listener.security.protocol.map`'s values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    /// TLS (Kafka calls it SSL): the `ssl.*` keys give the certificates.
    Ssl,
    /// SASL authentication (SCRAM) in the clear.
    SaslPlaintext,
    /// SASL authentication (SCRAM) over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(text: &str) -> Result<SecurityProtocol, String> {
        match text {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            other => Err(format!("{other:?} is not a security protocol")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the connections speak TLS (SSL, SASL_SSL).
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether the connections must authenticate with SASL first.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One listener: its name, where it binds and how its connections are secured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub address: SocketAddr,
    pub security_protocol: SecurityProtocol,
}

/// The node's listeners: the client listener always, the controller listener when
/// `controller.listener.names` separates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listeners {
    pub client: Listener,
    pub controller: Option<Listener>,
}

impl Listeners {
    /// The listener peers connect to: the controller listener, or the only one.
    pub fn quorum(&self) -> &Listener {
        self.controller.as_ref().unwrap_or(&self.client)
    }

    /// Whether any listener speaks TLS (the `ssl.keystore.*` keys are then required).
    pub fn any_ssl(&self) -> bool {
        self.client.security_protocol.uses_tls()
            || self
                .controller
                .as_ref()
                .is_some_and(|c| c.security_protocol.uses_tls())
    }
}

/// Why the listener keys do not make a valid set: the key to blame and the reason.
pub(crate) type ListenerError = (&'static str, String);

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_SECURITY_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// Parses `listeners` against `controller.listener.names` and the protocol map
/// (`map_from_file`: whether the map was set, not Kafka's default).
pub(crate) fn parse_listeners(
    listeners: &str,
    controller_names: &str,
    protocol_map: &str,
    map_from_file: bool,
) -> Result<Listeners, ListenerError> {
    let map = parse_protocol_map(protocol_map)
        .map_err(|reason| ("listener.security.protocol.map", reason))?;
    let names: Vec<&str> = split_list(controller_names).collect();
    let controller_name = match names.as_slice() {
        [] => None,
        [name] => Some(*name),
        _ => {
            return Err((
                "controller.listener.names",
                "name exactly one listener (several controller listeners are not supported)".into(),
            ));
        }
    };
    let mut named: Vec<(&str, SocketAddr)> = Vec::new();
    for entry in split_list(listeners) {
        let (name, address_text) = match entry.split_once("://") {
            Some((name, address)) => (name, address),
            None => ("PLAINTEXT", entry),
        };
        if name.is_empty() {
            return Err(("listeners", format!("{entry:?} has an empty listener name")));
        }
        if named.iter().any(|(other, _)| *other == name) {
            return Err(("listeners", format!("listener name {name} is used twice")));
        }
        let address: SocketAddr = address_text.parse().map_err(|_| {
            (
                "listeners",
                format!("{entry:?}: expected host:port with a numeric IP address"),
            )
        })?;
        named.push((name, address));
    }
    if let Some(controller_name) = controller_name
        && !named.iter().any(|(name, _)| *name == controller_name)
    {
        return Err((
            "controller.listener.names",
            format!("{controller_name} is not one of the listeners"),
        ));
    }
    let mut parsed: Vec<Listener> = Vec::new();
    let quorum_name = controller_name.or(named.first().map(|(name, _)| *name));
    for (name, address) in named {
        let security_protocol = match map.iter().find(|(mapped, _)| mapped == name) {
            Some((_, protocol)) => *protocol,
            // Kafka: a controller listener the (unset) map does not name is PLAINTEXT.
            None if !map_from_file && Some(name) == controller_name => SecurityProtocol::Plaintext,
            None => {
                return Err((
                    "listener.security.protocol.map",
                    format!("has no security protocol for listener {name}"),
                ));
            }
        };
        if security_protocol.uses_sasl() && Some(name) == quorum_name {
            return Err((
                "listener.security.protocol.map",
                format!(
                    "listener {name} serves the quorum and cannot be {}: peers do not authenticate with SASL; put SASL on a client listener beside a PLAINTEXT or SSL controller listener",
                    security_protocol.name()
                ),
            ));
        }
        parsed.push(Listener {
            name: name.to_string(),
            address,
            security_protocol,
        });
    }
    match controller_name {
        None => match <[Listener; 1]>::try_from(parsed) {
            Ok([client]) => Ok(Listeners {
                client,
                controller: None,
            }),
            Err(parsed) if parsed.is_empty() => Err(("listeners", "no listener".into())),
            Err(_) => Err((
                "listeners",
                "several listeners need controller.listener.names to say which one serves the quorum"
                    .into(),
            )),
        },
        Some(controller_name) => {
            let at = parsed
                .iter()
                .position(|l| l.name == controller_name)
                .expect("checked above");
            let controller = parsed.remove(at);
            match <[Listener; 1]>::try_from(parsed) {
                Ok([client]) => {
                    if client.address == controller.address {
                        return Err((
                            "listeners",
                            "the client and controller listeners bind the same address".into(),
                        ));
                    }
                    Ok(Listeners {
                        client,
                        controller: Some(controller),
                    })
                }
                Err(_) => Err((
                    "listeners",
                    format!("name exactly one listener besides the controller listener {controller_name}"),
                )),
            }
        }
    }
}

/// `NAME:PROTOCOL,…`: names unique.
fn parse_protocol_map(text: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut map: Vec<(String, SecurityProtocol)> = Vec::new();
    for entry in split_list(text) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| format!("{entry:?} is not NAME:PROTOCOL"))?;
        let protocol = SecurityProtocol::parse(protocol.trim())?;
        let name = name.trim();
        if map.iter().any(|(mapped, _)| mapped == name) {
            return Err(format!("{name} is mapped twice"));
        }
        map.push((name.to_string(), protocol));
    }
    Ok(map)
}

/// `advertised.listeners`: the entry named like the client listener, or the only unnamed one.
/// Empty text: `None` (the client listener itself is advertised).
pub(crate) fn advertised_client_listener(
    text: &str,
    client_name: &str,
) -> Result<Option<String>, String> {
    let entries: Vec<&str> = split_list(text).collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let named = entries
        .iter()
        .find_map(|entry| match entry.split_once("://") {
            Some((name, address)) if name == client_name => Some(address),
            _ => None,
        });
    if let Some(address) = named {
        return Ok(Some(address.to_string()));
    }
    match entries.as_slice() {
        [only] if !only.contains("://") => Ok(Some(only.to_string())),
        _ => Err(format!("no entry for the client listener {client_name}")),
    }
}

fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
}
