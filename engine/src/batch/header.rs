//! The 61-byte v2 batch header, read in place.
//!
//! ```text
//! byte  field                 type    CRC-covered
//!    0  baseOffset            int64   no   (stamped by the leader)
//!    8  batchLength           int32   no   (bytes after this field: size - 12)
//!   12  partitionLeaderEpoch  int32   no   (stamped by the leader)
//!   16  magic                 int8    no   (= 2)
//!   17  crc                   uint32  no   (CRC32C of bytes 21..end)
//!   21  attributes            int16   yes  bits 0-2 compression, 3 timestamp type,
//!                                          4 transactional, 5 control, 6 delete horizon
//!   23  lastOffsetDelta       int32   yes
//!   27  baseTimestamp         int64   yes  (Kafka: FirstTimestamp)
//!   35  maxTimestamp          int64   yes
//!   43  producerId            int64   yes
//!   51  producerEpoch         int16   yes
//!   53  baseSequence          int32   yes
//!   57  recordsCount          int32   yes
//!   61  records...
//! ```

use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{
    BatchError, CRC_START, LOG_OVERHEAD, MAGIC_V2, MIN_BATCH_LENGTH, RECORD_BATCH_OVERHEAD,
};

const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
const CONTROL_FLAG_MASK: i16 = 0x20;
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;

/// The header as it lies in the buffer: every field big-endian, no alignment needed.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Debug)]
#[repr(C)]
pub struct RecordBatchHeader {
    pub base_offset: I64,
    pub batch_length: I32,
    pub partition_leader_epoch: I32,
    pub magic: i8,
    pub crc: U32,
    pub attributes: I16,
    pub last_offset_delta: I32,
    pub base_timestamp: I64,
    pub max_timestamp: I64,
    pub producer_id: I64,
    pub producer_epoch: I16,
    pub base_sequence: I32,
    pub records_count: I32,
}

const _: () = assert!(size_of::<RecordBatchHeader>() == RECORD_BATCH_OVERHEAD);

/// Attributes bits 0-2 (`CompressionType` ids in Kafka).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// Ids 5-7: not assigned by Kafka.
    Unknown(u8),
}

impl Compression {
    pub fn from_id(id: u8) -> Compression {
        match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other),
        }
    }

    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
            Compression::Unknown(id) => id,
        }
    }
}

/// Attributes bit 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    /// Every record's timestamp is the batch's maxTimestamp (`DefaultRecordBatch.RecordIterator`).
    LogAppendTime,
}

impl RecordBatchHeader {
    /// The header at the front of `bytes`. Callers have checked the length (a [`super::RecordBatch`]
    /// always has), so a short slice is a broken invariant.
    pub(crate) fn view(bytes: &[u8]) -> &RecordBatchHeader {
        match RecordBatchHeader::ref_from_prefix(bytes) {
            Ok((header, _rest)) => header,
            Err(_) => panic!(
                "invariant: a validated batch holds a {RECORD_BATCH_OVERHEAD}-byte header, got {} bytes",
                bytes.len()
            ),
        }
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset.get()
    }
    pub fn batch_length(&self) -> i32 {
        self.batch_length.get()
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        self.partition_leader_epoch.get()
    }
    pub fn magic(&self) -> i8 {
        self.magic
    }
    pub fn crc(&self) -> u32 {
        self.crc.get()
    }
    pub fn attributes(&self) -> i16 {
        self.attributes.get()
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.last_offset_delta.get()
    }
    /// baseOffset + lastOffsetDelta (wrapping: baseOffset is not CRC-protected and may be junk;
    /// [`super::BatchChainValidator`] rejects ranges that overflow).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(i64::from(self.last_offset_delta()))
    }
    pub fn base_timestamp(&self) -> i64 {
        self.base_timestamp.get()
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp.get()
    }
    pub fn producer_id(&self) -> i64 {
        self.producer_id.get()
    }
    pub fn producer_epoch(&self) -> i16 {
        self.producer_epoch.get()
    }
    pub fn base_sequence(&self) -> i32 {
        self.base_sequence.get()
    }
    pub fn records_count(&self) -> i32 {
        self.records_count.get()
    }
    pub fn compression(&self) -> Compression {
        Compression::from_id((self.attributes() & COMPRESSION_CODEC_MASK) as u8)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_MASK == 0 {
            TimestampType::CreateTime
        } else {
            TimestampType::LogAppendTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_FLAG_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_FLAG_MASK != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_FLAG_MASK != 0
    }
}

/// The attributes word for the given flags (`DefaultRecordBatch.computeAttributes`).
pub(crate) fn compute_attributes(
    compression: Compression,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
) -> i16 {
    let mut attributes = i16::from(compression.id()) & COMPRESSION_CODEC_MASK;
    if timestamp_type == TimestampType::LogAppendTime {
        attributes |= TIMESTAMP_TYPE_MASK;
    }
    if transactional {
        attributes |= TRANSACTIONAL_FLAG_MASK;
    }
    if control {
        attributes |= CONTROL_FLAG_MASK;
    }
    attributes
}

/// Writes baseOffset in place. Not CRC-covered, so the batch stays valid.
///
/// Panics if `batch` is shorter than the header: stamping a non-batch is a caller bug.
pub fn stamp_base_offset(batch: &mut [u8], base_offset: i64) {
    assert!(
        batch.len() >= RECORD_BATCH_OVERHEAD,
        "stamp_base_offset on {} bytes, a batch has at least {RECORD_BATCH_OVERHEAD}",
        batch.len()
    );
    batch[..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes partitionLeaderEpoch in place. Not CRC-covered, so the batch stays valid.
///
/// Panics if `batch` is shorter than the header: stamping a non-batch is a caller bug.
pub fn stamp_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    assert!(
        batch.len() >= RECORD_BATCH_OVERHEAD,
        "stamp_partition_leader_epoch on {} bytes, a batch has at least {RECORD_BATCH_OVERHEAD}",
        batch.len()
    );
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// CRC32C of the CRC-covered part of a whole batch (attributes..end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crate::crc::crc32c(&batch[CRC_START.min(batch.len())..])
}

/// What the front of a buffer says about the batch starting there.
pub(crate) enum Frame {
    /// The buffer holds the whole declared batch (and maybe more after it).
    Complete { size_bytes: usize },
    /// The bytes present are consistent but the batch continues past the end of the buffer.
    Short { needed: usize, available: usize },
}

/// Checks what can be checked before the whole batch is present: the length bounds and the magic
/// byte. A frame that is merely short is not an error here; the caller decides whether that is a
/// `ShortBuffer` or a torn-tail `Truncated`.
pub(crate) fn check_frame(
    buf: &[u8],
    position: u64,
    max_size_bytes: usize,
) -> Result<Frame, BatchError> {
    let available = buf.len();
    if available < LOG_OVERHEAD {
        return Ok(Frame::Short {
            needed: RECORD_BATCH_OVERHEAD,
            available,
        });
    }
    let batch_length = i32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if batch_length < MIN_BATCH_LENGTH {
        return Err(BatchError::LengthBelowMinimum {
            position,
            batch_length,
        });
    }
    // batch_length >= 49 > 0, so the cast is exact.
    let size_bytes = LOG_OVERHEAD + batch_length as usize;
    if size_bytes > max_size_bytes {
        return Err(BatchError::Oversize {
            position,
            size_bytes,
            max_size_bytes,
        });
    }
    if let Some(&magic) = buf.get(MAGIC_OFFSET) {
        let magic = magic as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::BadMagic { position, magic });
        }
    }
    if available < size_bytes {
        return Ok(Frame::Short {
            needed: size_bytes,
            available,
        });
    }
    Ok(Frame::Complete { size_bytes })
}

/// CRC and the header-only sanity checks on a whole batch (`batch.len()` = declared size).
pub(crate) fn check_crc_and_counts(batch: &[u8], position: u64) -> Result<(), BatchError> {
    debug_assert!(batch.len() >= RECORD_BATCH_OVERHEAD);
    let expected = u32::from_be_bytes([
        batch[CRC_OFFSET],
        batch[CRC_OFFSET + 1],
        batch[CRC_OFFSET + 2],
        batch[CRC_OFFSET + 3],
    ]);
    let actual = compute_crc(batch);
    if expected != actual {
        return Err(BatchError::CrcMismatch {
            position,
            expected,
            actual,
        });
    }
    check_counts(batch, position)
}

/// The header-only sanity checks of [`check_crc_and_counts`], without the CRC: for batches whose
/// CRC their producer already checked.
pub(crate) fn check_counts(batch: &[u8], position: u64) -> Result<(), BatchError> {
    debug_assert!(batch.len() >= RECORD_BATCH_OVERHEAD);
    let header = RecordBatchHeader::view(batch);
    if header.records_count() < 0 {
        return Err(BatchError::InvalidRecordsCount {
            position,
            records_count: header.records_count(),
        });
    }
    if header.last_offset_delta() < 0 {
        return Err(BatchError::InvalidLastOffsetDelta {
            position,
            last_offset_delta: header.last_offset_delta(),
        });
    }
    Ok(())
}
