//! Typed errors of snapshot files: every variant names the file, and the byte offset where one
//! applies, so an operator can find the damage.

use std::path::PathBuf;

use crate::batch::BatchError;
use crate::io::IoError;

use super::SnapshotId;

/// What is wrong with a snapshot file's batch sequence (each batch's own CRC was fine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StructureError {
    #[error("the file is empty")]
    Empty,
    #[error("the first batch is not a control batch starting with a SnapshotHeader record")]
    FirstBatchNotHeader,
    #[error("the last batch is not a control batch ending with a SnapshotFooter record")]
    LastBatchNotFooter,
    #[error("a SnapshotHeader or SnapshotFooter appears in the middle of the snapshot")]
    MisplacedControlRecord,
    #[error("SnapshotHeader version {0} is not supported")]
    UnsupportedHeaderVersion(i16),
    #[error("SnapshotFooter version {0} is not supported")]
    UnsupportedFooterVersion(i16),
    #[error("a batch's partitionLeaderEpoch differs from the snapshot's epoch")]
    EpochMismatch,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Io(#[from] IoError),
    /// A batch failed its frame, CRC, record or chain check.
    #[error("snapshot {path}: {source}")]
    Batch {
        path: PathBuf,
        #[source]
        source: BatchError,
    },
    /// The batches are individually fine but do not form a snapshot.
    #[error("snapshot {path} at byte {position}: {reason}")]
    Structure {
        path: PathBuf,
        position: u64,
        reason: StructureError,
    },
    /// FetchSnapshot bytes that do not continue the `.part` file exactly.
    #[error(
        "snapshot {path}: bytes at position {position} but the file holds {size_bytes} bytes (gap or overlap)"
    )]
    NotContiguous {
        path: PathBuf,
        position: u64,
        size_bytes: u64,
    },
    /// More bytes than the snapshot's announced Size, or a freeze before all of them arrived.
    #[error(
        "snapshot {path}: holds {size_bytes} bytes, the snapshot's Size is {expected_size_bytes}"
    )]
    SizeMismatch {
        path: PathBuf,
        size_bytes: u64,
        expected_size_bytes: u64,
    },
    /// FetchSnapshot POSITION_OUT_OF_RANGE: a Position past the snapshot's Size.
    #[error("snapshot {path}: position {position} is past its size {size_bytes}")]
    PositionOutOfRange {
        path: PathBuf,
        position: u64,
        size_bytes: u64,
    },
    #[error("snapshot {path} already exists")]
    AlreadyExists { path: PathBuf },
    #[error("snapshot {snapshot_id:?} not found")]
    NotFound { snapshot_id: SnapshotId },
    /// A negative end offset or epoch (from the wire) cannot name a snapshot.
    #[error("snapshot id {snapshot_id:?} is not valid")]
    InvalidId { snapshot_id: SnapshotId },
    /// A state machine's record was refused by the writer (e.g. the writer already failed).
    #[error("snapshot {path}: the writer is closed after an earlier error")]
    WriterPoisoned { path: PathBuf },
}

impl SnapshotError {
    /// The byte offset in the file the error is about, where there is one.
    pub fn position(&self) -> Option<u64> {
        match self {
            SnapshotError::Io(e) => Some(e.offset),
            SnapshotError::Batch { source, .. } => Some(source.position()),
            SnapshotError::Structure { position, .. }
            | SnapshotError::NotContiguous { position, .. }
            | SnapshotError::PositionOutOfRange { position, .. } => Some(*position),
            _ => None,
        }
    }

    /// True when the file's bytes are wrong (CRC, frame, structure), as opposed to an I/O
    /// failure or a caller error: the snapshot is corrupt and must not be loaded.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            SnapshotError::Batch { .. } | SnapshotError::Structure { .. }
        )
    }
}
