//! The partition log's errors: every one says which file and which byte or offset.

use std::path::PathBuf;

use crate::batch::BatchError;
use crate::epoch_cache::EpochCacheError;
use crate::io::IoError;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A metadata operation (open, rename, remove, folder fsync, set_len) failed.
    #[error("log I/O failed: {0}")]
    Io(#[from] IoError),

    /// A write or fdatasync failed (EIO, or an fdatasync with any error): the page cache may
    /// have dropped the data, so the log refuses every further append and flush (ARCHITECTURE:
    /// write EIO takes the partition offline). A write that met ENOSPC is [`LogError::NoSpace`].
    #[error("write to {path} at byte {position} failed, the log is stopped: {source}")]
    WriteFailed {
        path: PathBuf,
        position: u64,
        #[source]
        source: IoError,
    },

    /// Out of space (ENOSPC, EDQUOT) before anything of the flush was made durable: a disk
    /// reservation (`fallocate`), a new segment's file, the leader-epoch-checkpoint, or a write
    /// of the flush (no fdatasync was issued over it). Nothing is lost and the log keeps
    /// running: the appended records stay in memory, not durable, and the next
    /// [`PartitionLog::flush`](super::PartitionLog::flush) tries again (the failed writes of a
    /// chain are submitted again as they were). [`PartitionLog::waiting_for_space`] says so
    /// meanwhile.
    #[error("no space for the log at {path} byte {position}, waiting for space: {source}")]
    NoSpace {
        path: PathBuf,
        position: u64,
        #[source]
        source: IoError,
    },

    /// The log stopped after an earlier write failure.
    #[error("the log of {dir} stopped after a failed write: {first_error}")]
    Stopped { dir: PathBuf, first_error: String },

    /// Bytes that were reported durable (or sit before such bytes) are damaged: recovery refuses
    /// to truncate there. Repair the range from a peer or restore the file.
    #[error("corruption in {path} at byte {position}: {reason}")]
    Corruption {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// Recovery or a truncation would remove records below the caller's floor (the
    /// high-watermark): those records may be committed.
    #[error(
        "refusing to truncate {dir} to offset {offset}: below the floor (high-watermark) {floor}"
    )]
    TruncateBelowFloor {
        dir: PathBuf,
        offset: i64,
        floor: i64,
    },

    /// An offset outside `[log_start_offset, log_end_offset]` was asked for.
    #[error("offset {offset} is outside the log [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },

    /// Appended bytes are not a valid batch sequence continuing this log.
    #[error("invalid batch for the log of {dir}: {source}")]
    InvalidBatch {
        dir: PathBuf,
        #[source]
        source: BatchError,
    },

    /// A single batch larger than a whole segment cannot be stored.
    #[error("batch of {size_bytes} bytes exceeds segment_size_bytes {segment_size_bytes}")]
    BatchTooLarge {
        size_bytes: usize,
        segment_size_bytes: u64,
    },

    #[error("leader-epoch-checkpoint of {dir}: {source}")]
    EpochCache {
        dir: PathBuf,
        #[source]
        source: EpochCacheError,
    },
}

impl LogError {
    /// Whether this is (or wraps) an out-of-space error that ends when space returns.
    pub fn is_no_space(&self) -> bool {
        match self {
            LogError::NoSpace { .. } => true,
            LogError::Io(source)
            | LogError::EpochCache {
                source: EpochCacheError::Io(source),
                ..
            } => source.is_no_space(),
            _ => false,
        }
    }

    /// The same error, as [`LogError::NoSpace`] when it is an out-of-space one.
    pub(crate) fn into_no_space(self) -> LogError {
        match self {
            LogError::Io(source)
            | LogError::EpochCache {
                source: EpochCacheError::Io(source),
                ..
            } if source.is_no_space() => LogError::NoSpace {
                path: source.path.clone(),
                position: source.offset,
                source,
            },
            other => other,
        }
    }
}
