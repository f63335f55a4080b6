//! Outgoing Kafka-protocol connections: one per peer, many requests in flight on it.
//!
//! [`PeerClient`] is what the node uses to send Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
//! FetchSnapshot and DescribeQuorum to another node. It connects lazily, runs the ApiVersions
//! handshake (KIP-511: on UNSUPPORTED_VERSION it retries at the highest ApiVersions version
//! the server lists) and then sends every API at the highest version both sides speak, with
//! request header v1 or v2 as that version requires. Requests are written in the order `send`
//! is called and many may be in flight; a reader task matches responses to requests by
//! correlation id.
//!
//! A Kafka server answers one connection's requests in order, so a Vote pipelined behind a
//! long-polled Fetch would wait for it. The client therefore keeps two connections per peer:
//! a data lane for Fetch and FetchSnapshot, a control lane for everything else.
//!
//! Failures, as Kafka's NetworkClient handles them:
//! - a request unanswered after `controller.quorum.request.timeout.ms` fails with
//!   [`PeerError::Timeout`] and **closes the connection** (a silent peer is treated as gone;
//!   every other request in flight on it fails with [`PeerError::Disconnected`]);
//! - a failed connection is re-established on the next `send`, but not before
//!   `retry_backoff_ms` (20 ms) after the failure, doubling per consecutive failed
//!   attempt up to [`PeerConfig::retry_backoff_max_ms`]. The wait counts against the request's
//!   timeout, so `send` always returns within the timeout.
//!
//! No consensus rule lives here: what to send, and what to do when it fails, is the node's.

mod client;
mod connection;

use std::net::SocketAddr;
use std::rc::Rc;

use crate::config::NodeConfig;
use crate::protocol::{ApiKey, DecodeError, EncodeError};

pub use client::KafkaClient;
pub use connection::PeerClient;

/// Settings of the outgoing connections.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Sent in every request header (Kafka's `client.id`).
    pub client_id: String,
    /// `controller.quorum.request.timeout.ms`.
    pub request_timeout_ms: u64,
    /// The pause after a failed connection (20 ms, as Kafka's `controller.quorum.retry.backoff.ms`).
    pub retry_backoff_ms: u64,
    /// Upper bound of the doubling pause (Kafka's `reconnect.backoff.max.ms` default).
    pub retry_backoff_max_ms: u64,
    /// The largest response frame accepted.
    pub max_frame_bytes: usize,
}

impl PeerConfig {
    pub fn new(client_id: impl Into<String>) -> PeerConfig {
        PeerConfig {
            client_id: client_id.into(),
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            retry_backoff_max_ms: 1000,
            max_frame_bytes: crate::protocol::DEFAULT_MAX_FRAME_BYTES,
        }
    }

    pub fn from_node_config(config: &NodeConfig) -> PeerConfig {
        PeerConfig {
            request_timeout_ms: config.request_timeout_ms,
            ..PeerConfig::new(format!("ringlog-node-{}", config.node_id))
        }
    }

    /// The pause before connection attempt number `failures + 1` after `failures` failures.
    pub fn backoff_ms(&self, failures: u32) -> u64 {
        if failures == 0 {
            return 0;
        }
        let doubled = self
            .retry_backoff_ms
            .saturating_mul(1u64 << (failures - 1).min(20));
        doubled.min(self.retry_backoff_max_ms.max(self.retry_backoff_ms))
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PeerError {
    #[error("{address}: cannot resolve: {reason}")]
    Resolve { address: String, reason: String },
    #[error("{address}: connect failed: {reason}")]
    Connect { address: SocketAddr, reason: String },
    #[error("{api:?}: no response within {timeout_ms} ms")]
    Timeout { api: ApiKey, timeout_ms: u64 },
    #[error("connection lost: {reason}")]
    Disconnected { reason: String },
    #[error("ApiVersions handshake failed: {reason}")]
    Handshake { reason: String },
    #[error("{api:?}: the peer speaks no version we speak")]
    NoCommonVersion { api: ApiKey },
    #[error("encode request: {0}")]
    Encode(#[from] EncodeError),
    #[error("decode response: {0}")]
    Decode(#[from] DecodeError),
    #[error("expected a {expected:?} response, got {got:?}")]
    UnexpectedResponse { expected: ApiKey, got: ApiKey },
    #[error("runtime: {reason}")]
    Runtime { reason: String },
}

/// One [`PeerClient`] per other voter of `controller.quorum.voters`.
pub struct PeerSet {
    peers: Vec<(i32, PeerClient)>,
}

impl PeerSet {
    pub fn from_node_config(config: &NodeConfig) -> PeerSet {
        let peer_config = Rc::new(PeerConfig::from_node_config(config));
        let peers = config
            .quorum_voters
            .iter()
            .filter(|voter| voter.node_id != config.node_id)
            .map(|voter| {
                let address = format!("{}:{}", voter.host, voter.port);
                (
                    voter.node_id,
                    PeerClient::with_shared_config(address, peer_config.clone()),
                )
            })
            .collect();
        PeerSet { peers }
    }

    pub fn get(&self, node_id: i32) -> Option<&PeerClient> {
        self.peers
            .iter()
            .find(|(id, _)| *id == node_id)
            .map(|(_, peer)| peer)
    }

    pub fn iter(&self) -> impl Iterator<Item = (i32, &PeerClient)> {
        self.peers.iter().map(|(id, peer)| (*id, peer))
    }
}
