//! ringlog's one Kafka client: how anything of ringlog talks to a node.
//!
//! - [`exchange`]: a connection's bookkeeping without sockets (framing, the bound on a
//!   response's size, correlation ids answered in order, the ApiVersions handshake). Both
//!   clients below are thin I/O around it.
//! - [`blocking`]: [`Client`], one connection and one request at a time, for the CLI, `perf`,
//!   the Rust consumer and producer (`crate::clients`) and the tests.
//! - The node's peer lanes (`crate::node::transport`) drive the same [`Exchange`] from the
//!   event loop's runtime, one per lane.
//!
//! Nothing here imports the broker (`crate::node`): only `crate::protocol`.

pub mod blocking;
pub mod exchange;

pub use blocking::*;
pub use exchange::Exchange;

use crate::protocol::{ApiKey, DecodeError, EncodeError};

/// The metadata topic every node hosts (KIP-595's `__cluster_metadata`, partition 0).
pub use crate::protocol::METADATA_TOPIC;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{address}: {source}")]
    Io {
        address: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{0}")]
    Protocol(String),
    /// The broker does not speak `version` of `api` (its range from ApiVersions, or `None`
    /// when it does not serve the API at all).
    #[error("{api:?} v{version} is not served by the broker (it serves {broker:?})")]
    UnsupportedVersion {
        api: ApiKey,
        version: i16,
        broker: Option<(i16, i16)>,
    },
}
