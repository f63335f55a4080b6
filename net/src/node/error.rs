//! The errors that end a node's run (`run`): what a partition's fault does not cover (a fault in
//! one partition takes only that partition offline, docs/node.md "Storage faults").

use ringlog_engine::io::BackendChoiceError;
use ringlog_replication::RaftError;
use ringlog_replication::host::{HostError, StorageError};

use crate::meta_properties::MetaPropertiesError;
use crate::protocol::EncodeError;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Meta(#[from] MetaPropertiesError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    DataDirLock(#[from] crate::data_dir_lock::DataDirLockError),
    #[error(transparent)]
    IoBackend(#[from] BackendChoiceError),
    #[error("replication core: {0}")]
    Raft(#[from] RaftError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
    #[error("encoding a message: {0}")]
    Encode(#[from] EncodeError),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

impl From<HostError> for NodeError {
    fn from(error: HostError) -> Self {
        match error {
            HostError::Raft(e) => NodeError::Raft(e),
            HostError::Storage(e) => NodeError::Storage(e),
        }
    }
}
