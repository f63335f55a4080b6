//! Typed errors for everything that can be wrong with a batch or a sequence of batches.
//!
//! Every variant carries `position`: the byte position of the offending batch in the buffer (or
//! file region) being scanned, so that recovery can name the exact spot.

use super::control::ControlRecordError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// [`super::RecordBatch::parse`] was given fewer bytes than the header or the declared length.
    #[error("batch at byte {position}: needs {needed} bytes, buffer holds {available}")]
    ShortBuffer {
        position: u64,
        needed: usize,
        available: usize,
    },
    /// The last batch of a scanned buffer ends past the buffer's end: a torn (partial) final
    /// write, as opposed to corruption. Everything that could be checked in the bytes present
    /// (length bounds, magic) was fine.
    #[error("batch at byte {position} is truncated: needs {needed} bytes, {available} present")]
    Truncated {
        position: u64,
        needed: usize,
        available: usize,
    },
    /// [`super::RecordBatch::parse`] was given more bytes than the one batch it declares.
    #[error("batch at byte {position}: declares {size_bytes} bytes but was given {available}")]
    SizeMismatch {
        position: u64,
        size_bytes: usize,
        available: usize,
    },
    #[error("batch at byte {position}: batchLength {batch_length} is below the minimum 49")]
    LengthBelowMinimum { position: u64, batch_length: i32 },
    #[error("batch at byte {position}: size {size_bytes} bytes exceeds the limit {max_size_bytes}")]
    Oversize {
        position: u64,
        size_bytes: usize,
        max_size_bytes: usize,
    },
    #[error("batch at byte {position}: magic {magic}, only magic 2 is supported")]
    BadMagic { position: u64, magic: i8 },
    #[error(
        "batch at byte {position}: CRC32C mismatch, stored {expected:#010x}, computed {actual:#010x}"
    )]
    CrcMismatch {
        position: u64,
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed over attributes..end.
        actual: u32,
    },
    #[error("batch at byte {position}: recordsCount {records_count} is negative")]
    InvalidRecordsCount { position: u64, records_count: i32 },
    #[error("batch at byte {position}: lastOffsetDelta {last_offset_delta} is negative")]
    InvalidLastOffsetDelta {
        position: u64,
        last_offset_delta: i32,
    },
    /// Records of a batch compressed with `codec` (attributes bits 0-2) cannot be read: ids 5-7
    /// name no Kafka codec. Header and CRC validation still work for such batches.
    #[error("batch at byte {position}: compression codec {codec} is not supported")]
    UnsupportedCompression { position: u64, codec: u8 },
    /// The records section is not a valid stream of its codec (1 gzip, 2 snappy, 3 lz4,
    /// 4 zstd). The CRC passed, so these are the bytes the producer sent.
    #[error(
        "batch at byte {position}: records compressed with codec {codec} are invalid: {reason}"
    )]
    Decompression {
        position: u64,
        codec: u8,
        reason: String,
    },
    /// The records section would decompress to more than `limit` bytes
    /// ([`super::compression::MAX_DECOMPRESSED_BATCH_BYTES`]): refused while decompressing,
    /// before more than the limit is held.
    #[error(
        "batch at byte {position}: records compressed with codec {codec} decompress to more than {limit} bytes"
    )]
    DecompressedTooLarge {
        position: u64,
        codec: u8,
        limit: usize,
    },
    #[error(
        "batch at byte {position}, record {record_index} (byte {record_position} of the batch): {reason}"
    )]
    MalformedRecord {
        position: u64,
        record_index: u32,
        record_position: usize,
        reason: &'static str,
    },
    #[error("batch at byte {position}: declares {declared} records, its bytes end after {found}")]
    RecordsEndedEarly {
        position: u64,
        declared: i32,
        found: u32,
    },
    #[error(
        "batch at byte {position}: {trailing_bytes} bytes remain after the {declared} declared records"
    )]
    TrailingBytesAfterRecords {
        position: u64,
        declared: i32,
        trailing_bytes: usize,
    },
    #[error(
        "batch at byte {position}, record {record_index}: offsetDelta {found} does not follow {previous} or exceeds lastOffsetDelta"
    )]
    OffsetDeltaOutOfOrder {
        position: u64,
        record_index: u32,
        previous: i64,
        found: i32,
    },
    #[error(
        "batch at byte {position}: lastOffsetDelta {declared} but the last record has offsetDelta {found}"
    )]
    LastOffsetDeltaMismatch {
        position: u64,
        declared: i32,
        found: i32,
    },
    #[error(
        "batch at byte {position}: baseOffset {found}, expected {expected} to continue the previous batch"
    )]
    OffsetNotContinuous {
        position: u64,
        expected: i64,
        found: i64,
    },
    #[error(
        "batch at byte {position}: baseOffset {base_offset} with lastOffsetDelta {last_offset_delta} is not a valid offset range"
    )]
    InvalidOffsetRange {
        position: u64,
        base_offset: i64,
        last_offset_delta: i32,
    },
    #[error(
        "batch at byte {position}: partitionLeaderEpoch {found} is below the previous batch's {previous}"
    )]
    EpochWentBackwards {
        position: u64,
        previous: i32,
        found: i32,
    },
    #[error(
        "batch at byte {position}: partitionLeaderEpoch {found} is above the current epoch {current}"
    )]
    EpochAboveCurrent {
        position: u64,
        current: i32,
        found: i32,
    },
    #[error("batch at byte {position} is not a control batch")]
    NotControlBatch { position: u64 },
    #[error("batch at byte {position}, control record {record_index}: {source}")]
    ControlRecord {
        position: u64,
        record_index: u32,
        source: ControlRecordError,
    },
}

impl BatchError {
    /// The byte position of the batch the error is about.
    pub fn position(&self) -> u64 {
        match *self {
            BatchError::ShortBuffer { position, .. }
            | BatchError::Truncated { position, .. }
            | BatchError::SizeMismatch { position, .. }
            | BatchError::LengthBelowMinimum { position, .. }
            | BatchError::Oversize { position, .. }
            | BatchError::BadMagic { position, .. }
            | BatchError::CrcMismatch { position, .. }
            | BatchError::InvalidRecordsCount { position, .. }
            | BatchError::InvalidLastOffsetDelta { position, .. }
            | BatchError::UnsupportedCompression { position, .. }
            | BatchError::Decompression { position, .. }
            | BatchError::DecompressedTooLarge { position, .. }
            | BatchError::MalformedRecord { position, .. }
            | BatchError::RecordsEndedEarly { position, .. }
            | BatchError::TrailingBytesAfterRecords { position, .. }
            | BatchError::OffsetDeltaOutOfOrder { position, .. }
            | BatchError::LastOffsetDeltaMismatch { position, .. }
            | BatchError::OffsetNotContinuous { position, .. }
            | BatchError::InvalidOffsetRange { position, .. }
            | BatchError::EpochWentBackwards { position, .. }
            | BatchError::EpochAboveCurrent { position, .. }
            | BatchError::NotControlBatch { position }
            | BatchError::ControlRecord { position, .. } => position,
        }
    }

    /// True only for a torn final write: the bytes present were consistent, there were just not
    /// enough of them. Every other error means the bytes themselves are wrong.
    pub fn is_truncated(&self) -> bool {
        matches!(self, BatchError::Truncated { .. })
    }
}
