//! Kafka's RecordBatch v2 ("magic 2"), byte for byte.
//!
//! A batch is a 61-byte header followed by `recordsCount` records (layout in [`header`], record
//! layout in [`record`]). The references are Kafka's `DefaultRecordBatch.java` and
//! `DefaultRecord.java` (clients/src/main/java/org/apache/kafka/common/record/); the control
//! records (KIP-595 LeaderChange, KIP-630 snapshot header and footer) are in [`control`].
//!
//! What is checked where (see also docs/record-batch.md):
//!
//! | check                                             | where                                  | error                                          |
//! |---------------------------------------------------|----------------------------------------|------------------------------------------------|
//! | enough bytes for the header / the declared length | [`RecordBatch::parse`], [`BatchIter`]  | `ShortBuffer` (parse) / `Truncated` (splitter) |
//! | batchLength at least 49, size at most the limit   | same                                   | `LengthBelowMinimum`, `Oversize`               |
//! | magic = 2                                         | same                                   | `BadMagic`                                     |
//! | CRC32C over attributes..end                       | same                                   | `CrcMismatch`                                  |
//! | recordsCount >= 0, lastOffsetDelta >= 0           | same                                   | `InvalidRecordsCount`, `InvalidLastOffsetDelta` |
//! | a known codec (0-4) to read records               | [`RecordBatch::records`]               | `UnsupportedCompression`                       |
//! | compressed records decompress, within the bound   | [`RecordBatch::records`]               | `Decompression`, `DecompressedTooLarge`        |
//! | each record well formed, count and deltas agree   | [`RecordIter`]                         | `MalformedRecord`, `RecordsEndedEarly`, ...    |
//! | baseOffset continues, leader epoch not backwards  | [`BatchChainValidator`]                | `OffsetNotContinuous`, `EpochWentBackwards`    |
//!
//! baseOffset and partitionLeaderEpoch sit outside the CRC so that a leader can stamp them
//! ([`stamp_base_offset`], [`stamp_partition_leader_epoch`]) without re-checksumming. The price is
//! that a flipped bit there passes the CRC: only the chain validator can catch it, which is why
//! every reader of a sequence of batches must run one.

pub mod builder;
pub mod chain;
pub mod compression;
pub mod control;
mod error;
pub mod header;
pub mod record;
pub mod split;
mod varint;

pub use builder::RecordBatchBuilder;
pub use chain::BatchChainValidator;
pub use compression::MAX_DECOMPRESSED_BATCH_BYTES;
pub use error::BatchError;
pub use header::{
    Compression, RecordBatchHeader, TimestampType, stamp_base_offset, stamp_partition_leader_epoch,
};
pub use record::{Record, RecordHeader, RecordHeaders, RecordIter};
pub use split::{BatchIter, batches, find_next_valid_batch};

use bytes::Bytes;

/// Size of the v2 batch header, `DefaultRecordBatch.RECORD_BATCH_OVERHEAD`.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// baseOffset (8) + batchLength (4): the bytes not counted by batchLength (`Records.LOG_OVERHEAD`).
pub const LOG_OVERHEAD: usize = 12;
/// The only batch format we read or write.
pub const MAGIC_V2: i8 = 2;
/// Kafka's `RecordBatch.NO_PRODUCER_ID`, `NO_PRODUCER_EPOCH`, `NO_SEQUENCE`, `NO_TIMESTAMP`,
/// `NO_PARTITION_LEADER_EPOCH`.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// Largest batch accepted unless the caller says otherwise. A length field above this is
/// reported as `Oversize` (corruption) rather than waited for as a torn tail: a flipped high bit
/// in batchLength must not make recovery think the rest of the segment is a partial write.
pub const DEFAULT_MAX_BATCH_SIZE_BYTES: usize = 64 * 1024 * 1024;

/// Byte offset of the first CRC-covered byte (attributes).
pub(crate) const CRC_START: usize = 21;
/// Smallest legal batchLength: the header minus the 12 bytes batchLength does not count.
pub(crate) const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;

/// One whole v2 batch, validated (structure + CRC) on construction. Cheap to clone: it is a
/// `Bytes` slice of whatever buffer it was parsed from.
///
/// Two batches are equal when their bytes are; where they were found does not matter.
#[derive(Clone, Debug)]
pub struct RecordBatch {
    bytes: Bytes,
    /// Byte position of this batch in the buffer or file it was scanned from, carried into every
    /// error about it so that recovery can report "corrupt batch at byte N".
    position: u64,
}

impl PartialEq for RecordBatch {
    fn eq(&self, other: &RecordBatch) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for RecordBatch {}

impl RecordBatch {
    /// Validates one whole batch: `bytes` must hold exactly one batch. Checks length, magic and
    /// CRC; the records themselves are checked when iterated ([`RecordBatch::records`]).
    pub fn parse(bytes: Bytes) -> Result<RecordBatch, BatchError> {
        RecordBatch::parse_at(bytes, 0, DEFAULT_MAX_BATCH_SIZE_BYTES)
    }

    /// As [`RecordBatch::parse`], with the batch's position (reported in errors) and a size limit.
    pub fn parse_at(
        bytes: Bytes,
        position: u64,
        max_size_bytes: usize,
    ) -> Result<RecordBatch, BatchError> {
        let size_bytes = match header::check_frame(&bytes, position, max_size_bytes)? {
            header::Frame::Complete { size_bytes } => size_bytes,
            header::Frame::Short { needed, available } => {
                return Err(BatchError::ShortBuffer {
                    position,
                    needed,
                    available,
                });
            }
        };
        if size_bytes != bytes.len() {
            return Err(BatchError::SizeMismatch {
                position,
                size_bytes,
                available: bytes.len(),
            });
        }
        header::check_crc_and_counts(&bytes, position)?;
        Ok(RecordBatch { bytes, position })
    }

    /// Wraps bytes this module just wrote (the builder asserts them in debug builds).
    pub(crate) fn from_built(bytes: Bytes) -> RecordBatch {
        RecordBatch { bytes, position: 0 }
    }

    /// Wraps bytes whose frame the caller has just checked, and whose CRC it checked too or
    /// was vouched for (`BatchIter::already_validated`).
    pub(crate) fn from_validated(bytes: Bytes, position: u64) -> RecordBatch {
        RecordBatch { bytes, position }
    }

    /// The header, read in place.
    pub fn header(&self) -> &RecordBatchHeader {
        RecordBatchHeader::view(&self.bytes)
    }

    pub fn base_offset(&self) -> i64 {
        self.header().base_offset()
    }

    /// baseOffset + lastOffsetDelta: the offset of the batch's last record (for an empty batch
    /// kept by compaction, the last offset it once held).
    pub fn last_offset(&self) -> i64 {
        self.header().last_offset()
    }

    /// The offset the next batch in the log must start at.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    pub fn partition_leader_epoch(&self) -> i32 {
        self.header().partition_leader_epoch()
    }

    pub fn records_count(&self) -> i32 {
        self.header().records_count()
    }

    pub fn is_control(&self) -> bool {
        self.header().is_control()
    }

    pub fn is_transactional(&self) -> bool {
        self.header().is_transactional()
    }

    pub fn compression(&self) -> Compression {
        self.header().compression()
    }

    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }

    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Position of the batch in the buffer it was scanned from (0 for [`RecordBatch::parse`]).
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn crc(&self) -> u32 {
        self.header().crc()
    }

    /// Iterator over the records: zero-copy for an uncompressed batch; a compressed batch's
    /// records section is decompressed first, into a new buffer of at most
    /// [`MAX_DECOMPRESSED_BATCH_BYTES`] (the batch itself stays as it is). Fails at once for an
    /// unknown codec, invalid compressed bytes or a section that decompresses past the bound.
    pub fn records(&self) -> Result<RecordIter, BatchError> {
        RecordIter::new(self)
    }

    /// Decoded control records of a control batch.
    pub fn control_records(&self) -> Result<control::ControlRecordIter, BatchError> {
        control::ControlRecordIter::new(self)
    }

    /// The same batch with baseOffset and partitionLeaderEpoch replaced, as a leader does on
    /// append. The CRC stays valid because neither field is covered by it. Copies only when the
    /// underlying buffer is shared.
    pub fn into_stamped(self, base_offset: i64, partition_leader_epoch: i32) -> RecordBatch {
        let mut bytes = match self.bytes.try_into_mut() {
            Ok(unique) => unique,
            Err(shared) => bytes::BytesMut::from(&shared[..]),
        };
        stamp_base_offset(&mut bytes, base_offset);
        stamp_partition_leader_epoch(&mut bytes, partition_leader_epoch);
        RecordBatch {
            bytes: bytes.freeze(),
            position: self.position,
        }
    }
}

/// Fuzz entry point: split, validate, chain-check, iterate every record and decode every control
/// record of arbitrary bytes, and decode the control values directly. Must never panic; asserts
/// the decode/encode round trips it can.
pub fn fuzz_batch_decode(data: &[u8]) {
    let buf = Bytes::copy_from_slice(data);
    let mut chain = BatchChainValidator::new();
    for batch in batches(&buf) {
        let Ok(batch) = batch else { break };
        let _ = chain.check(&batch);
        exercise_batch(&batch);
    }
    if let Ok(batch) = RecordBatch::parse(buf.clone()) {
        exercise_batch(&batch);
    }
    control::fuzz_control_values(data);
}

fn exercise_batch(batch: &RecordBatch) {
    let header = batch.header();
    let _ = (header.max_timestamp(), header.producer_id(), batch.crc());
    if let Ok(records) = batch.records() {
        let mut rebuilt = RecordBatchBuilder::new(batch.base_offset())
            .with_leader_epoch(batch.partition_leader_epoch())
            .with_control(batch.is_control());
        let mut all_ok = true;
        for record in records {
            let Ok(record) = record else {
                all_ok = false;
                break;
            };
            let headers: Vec<(Bytes, Option<Bytes>)> = record
                .headers()
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect();
            rebuilt.append_raw_headers(record.timestamp(), record.key(), record.value(), &headers);
        }
        // A batch whose records all decoded re-encodes to the same records (not necessarily the
        // same bytes: varints may have been written non-canonically).
        if all_ok && header.timestamp_type() == TimestampType::CreateTime {
            let rebuilt = rebuilt.build();
            let a: Vec<_> = batch.records().into_iter().flatten().flatten().collect();
            let b: Vec<_> = rebuilt.records().into_iter().flatten().flatten().collect();
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(
                    (x.timestamp(), x.key(), x.value()),
                    (y.timestamp(), y.key(), y.value())
                );
            }
        }
    }
    if let Ok(controls) = batch.control_records() {
        for control in controls.flatten() {
            let _ = control;
        }
    }
}
