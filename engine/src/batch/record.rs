//! Records inside a batch: read without copying from an uncompressed batch, from a decompressed
//! copy of the records section of a compressed one (compression.rs).
//!
//! ```text
//! Record =>  length varint            bytes after this field
//!            attributes int8          unused, 0
//!            timestampDelta varlong   from the batch's baseTimestamp
//!            offsetDelta varint       from the batch's baseOffset
//!            keyLength varint, key    -1 = null
//!            valueLength varint, value -1 = null
//!            headersCount varint, [headerKeyLength varint, headerKey (UTF-8, not null),
//!                                  headerValueLength varint, headerValue (-1 = null)]
//! ```
//! (`DefaultRecord.java`). Keys, values and headers come out as `Bytes` slices of the batch, or
//! of the decompressed records when the batch is compressed.

use bytes::Bytes;

use super::compression::{self, DecompressError, MAX_DECOMPRESSED_BATCH_BYTES};
use super::header::{Compression, TimestampType};
use super::varint::{ReadError, Reader};
use super::{BatchError, NO_SEQUENCE, RECORD_BATCH_OVERHEAD, RecordBatch};

/// One decoded record; every byte field is a slice of the batch's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    offset: i64,
    timestamp: i64,
    offset_delta: i32,
    timestamp_delta: i64,
    sequence: i32,
    attributes: u8,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: RecordHeaders,
    size_bytes: usize,
}

impl Record {
    pub fn offset(&self) -> i64 {
        self.offset
    }
    /// The record's timestamp: baseTimestamp + timestampDelta, or the batch's maxTimestamp for a
    /// LOG_APPEND_TIME batch.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }
    pub fn offset_delta(&self) -> i32 {
        self.offset_delta
    }
    pub fn timestamp_delta(&self) -> i64 {
        self.timestamp_delta
    }
    /// baseSequence + offsetDelta (wrapping at i32::MAX as Kafka does), or -1 without a producer.
    pub fn sequence(&self) -> i32 {
        self.sequence
    }
    pub fn attributes(&self) -> u8 {
        self.attributes
    }
    pub fn key(&self) -> Option<&Bytes> {
        self.key.as_ref()
    }
    pub fn value(&self) -> Option<&Bytes> {
        self.value.as_ref()
    }
    pub fn headers(&self) -> &RecordHeaders {
        &self.headers
    }
    /// Encoded size including the length varint.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }
}

/// One record header: a UTF-8 key (kept as bytes, as Kafka's wire does not check it) and a
/// nullable value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

impl RecordHeader {
    /// The key as text, if it is valid UTF-8.
    pub fn key_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.key).ok()
    }
}

/// The already-validated headers region of a record, decoded lazily so that records without
/// interest in their headers allocate nothing.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RecordHeaders {
    bytes: Bytes,
    count: u32,
}

impl RecordHeaders {
    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn iter(&self) -> RecordHeadersIter<'_> {
        RecordHeadersIter {
            headers: self,
            reader_pos: 0,
            left: self.count,
        }
    }
}

pub struct RecordHeadersIter<'a> {
    headers: &'a RecordHeaders,
    reader_pos: usize,
    left: u32,
}

impl Iterator for RecordHeadersIter<'_> {
    type Item = RecordHeader;

    fn next(&mut self) -> Option<RecordHeader> {
        if self.left == 0 {
            return None;
        }
        let bytes = &self.headers.bytes;
        let mut reader = Reader::new(&bytes[self.reader_pos..]);
        let decoded = read_header(&mut reader, bytes, self.reader_pos);
        // The region was walked and validated when the record was decoded.
        debug_assert!(decoded.is_ok(), "re-reading validated headers failed");
        let header = decoded.ok()?;
        self.reader_pos += reader.position();
        self.left -= 1;
        Some(header)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// Iterator over a batch's records, zero-copy for an uncompressed batch. Checks, as it goes,
/// each record's structure, that offset deltas increase and stay within lastOffsetDelta, and at
/// the end that the count, the final delta and the byte length all agree with the header.
/// Yields at most one error, then stops.
pub struct RecordIter {
    /// The records, from `cursor` on: the whole batch (records at byte 61) when uncompressed,
    /// the decompressed records section (records at byte 0) when compressed. Record positions
    /// in errors are positions in these bytes.
    batch: Bytes,
    position: u64,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    base_sequence: i32,
    last_offset_delta: i32,
    declared: i32,
    read: u32,
    cursor: usize,
    previous_delta: i64,
    done: bool,
}

impl RecordIter {
    pub(crate) fn new(batch: &RecordBatch) -> Result<RecordIter, BatchError> {
        let header = batch.header();
        let (records, cursor) = match header.compression() {
            Compression::None => (batch.as_bytes().clone(), RECORD_BATCH_OVERHEAD),
            codec => (decompress_records(batch, codec)?, 0),
        };
        let log_append_time = match header.timestamp_type() {
            TimestampType::CreateTime => None,
            TimestampType::LogAppendTime => Some(header.max_timestamp()),
        };
        Ok(RecordIter {
            batch: records,
            position: batch.position(),
            base_offset: header.base_offset(),
            base_timestamp: header.base_timestamp(),
            log_append_time,
            base_sequence: header.base_sequence(),
            last_offset_delta: header.last_offset_delta(),
            declared: header.records_count(),
            read: 0,
            cursor,
            previous_delta: -1,
            done: false,
        })
    }

    fn finish(&mut self) -> Option<Result<Record, BatchError>> {
        self.done = true;
        let trailing_bytes = self.batch.len() - self.cursor;
        if trailing_bytes != 0 {
            return Some(Err(BatchError::TrailingBytesAfterRecords {
                position: self.position,
                declared: self.declared,
                trailing_bytes,
            }));
        }
        if self.declared > 0 && self.previous_delta != i64::from(self.last_offset_delta) {
            return Some(Err(BatchError::LastOffsetDeltaMismatch {
                position: self.position,
                declared: self.last_offset_delta,
                found: self.previous_delta as i32,
            }));
        }
        None
    }

    fn decode_next(&mut self) -> Result<Record, BatchError> {
        let record_index = self.read;
        let record_position = self.cursor;
        let malformed = |reason: &'static str| BatchError::MalformedRecord {
            position: self.position,
            record_index,
            record_position,
            reason,
        };
        let mut reader = Reader::new(&self.batch[self.cursor..]);
        let body_len = reader.varint().map_err(|e| malformed(e.reason()))?;
        if body_len < 0 {
            return Err(malformed("negative record length"));
        }
        let length_size = reader.position();
        let body = reader
            .take(body_len as usize)
            .map_err(|_| malformed("record length runs past the end of the batch"))?;
        let body_start = self.cursor + length_size;
        let mut reader = Reader::new(body);
        let field = |e: ReadError| malformed(e.reason());
        let attributes = reader.u8().map_err(field)?;
        let timestamp_delta = reader.varlong().map_err(field)?;
        let offset_delta = reader.varint().map_err(field)?;
        if i64::from(offset_delta) <= self.previous_delta || offset_delta > self.last_offset_delta {
            return Err(BatchError::OffsetDeltaOutOfOrder {
                position: self.position,
                record_index,
                previous: self.previous_delta,
                found: offset_delta,
            });
        }
        let key = read_nullable(&mut reader, &self.batch, body_start).map_err(field)?;
        let value = read_nullable(&mut reader, &self.batch, body_start).map_err(field)?;
        let headers_count = reader.varint().map_err(field)?;
        if headers_count < 0 {
            return Err(malformed("negative header count"));
        }
        let headers_start = reader.position();
        for _ in 0..headers_count {
            read_header(&mut reader, &self.batch, body_start).map_err(|e| match e {
                HeaderError::Read(e) => malformed(e.reason()),
                HeaderError::NullKey => malformed("null header key"),
            })?;
        }
        if reader.remaining() != 0 {
            return Err(malformed("record length disagrees with its fields"));
        }
        // Most records have no headers: skip the slice (and its reference count traffic).
        let headers = if headers_count == 0 {
            RecordHeaders::default()
        } else {
            RecordHeaders {
                bytes: self
                    .batch
                    .slice(body_start + headers_start..body_start + body.len()),
                count: headers_count as u32,
            }
        };
        let size_bytes = length_size + body.len();
        self.cursor += size_bytes;
        self.previous_delta = i64::from(offset_delta);
        let sequence = if self.base_sequence >= 0 {
            increment_sequence(self.base_sequence, offset_delta)
        } else {
            NO_SEQUENCE
        };
        Ok(Record {
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp: self
                .log_append_time
                .unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta)),
            offset_delta,
            timestamp_delta,
            sequence,
            attributes,
            key,
            value,
            headers,
            size_bytes,
        })
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record, BatchError>;

    fn next(&mut self) -> Option<Result<Record, BatchError>> {
        if self.done {
            return None;
        }
        if i64::from(self.read) >= i64::from(self.declared) {
            return self.finish();
        }
        if self.cursor == self.batch.len() {
            self.done = true;
            return Some(Err(BatchError::RecordsEndedEarly {
                position: self.position,
                declared: self.declared,
                found: self.read,
            }));
        }
        match self.decode_next() {
            Ok(record) => {
                self.read += 1;
                Some(Ok(record))
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// The records section of a compressed batch, decompressed (at most
/// [`MAX_DECOMPRESSED_BATCH_BYTES`]). An empty batch (recordsCount 0, as compaction leaves) may
/// carry no compressed stream at all: nothing to decompress.
fn decompress_records(batch: &RecordBatch, codec: Compression) -> Result<Bytes, BatchError> {
    let section = &batch.as_bytes()[RECORD_BATCH_OVERHEAD..];
    if section.is_empty() && batch.records_count() == 0 {
        return Ok(Bytes::new());
    }
    let position = batch.position();
    match compression::decompress(codec, section, MAX_DECOMPRESSED_BATCH_BYTES) {
        Ok(records) => Ok(Bytes::from(records)),
        Err(DecompressError::Unsupported { codec }) => {
            Err(BatchError::UnsupportedCompression { position, codec })
        }
        Err(DecompressError::Corrupt { reason, .. }) => Err(BatchError::Decompression {
            position,
            codec: codec.id(),
            reason,
        }),
        Err(DecompressError::TooLarge { limit, .. }) => Err(BatchError::DecompressedTooLarge {
            position,
            codec: codec.id(),
            limit,
        }),
    }
}

/// `batch` with its records section compressed with `codec` instead (Kafka's LogValidator
/// when a topic's `compression.type` differs from the producer's codec): the records are the
/// same bytes, only the section's encoding, the codec bits of attributes, batchLength and the
/// CRC change; every other header field (offsets, timestamps, producer id, epoch and
/// sequence, transactional flag) is kept. The batch itself when it already has `codec`.
///
/// Fails as [`RecordBatch::records`] does for a section that cannot be decompressed.
pub fn recompressed(batch: &RecordBatch, codec: Compression) -> Result<Bytes, BatchError> {
    let current = batch.compression();
    if current == codec {
        return Ok(batch.as_bytes().clone());
    }
    if let Compression::Unknown(id) = codec {
        return Err(BatchError::UnsupportedCompression {
            position: batch.position(),
            codec: id,
        });
    }
    let plain = match current {
        Compression::None => batch.as_bytes().slice(RECORD_BATCH_OVERHEAD..),
        other => decompress_records(batch, other)?,
    };
    let section = match codec {
        Compression::None => plain.to_vec(),
        other => compression::compress(other, &plain),
    };
    let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + section.len());
    out.extend_from_slice(&batch.as_bytes()[..RECORD_BATCH_OVERHEAD]);
    out.extend_from_slice(&section);
    let batch_length = (out.len() - super::LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let attributes = (batch.header().attributes() & !ATTRIBUTES_CODEC_MASK)
        | (i16::from(codec.id()) & ATTRIBUTES_CODEC_MASK);
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = super::header::compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(Bytes::from(out))
}

/// Where a v2 batch header keeps attributes and the CRC, and attributes' codec bits.
const ATTRIBUTES_OFFSET: usize = 21;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_CODEC_MASK: i16 = 0x07;

/// `DefaultRecordBatch.incrementSequence`: sequences wrap from i32::MAX to 0.
fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// A varint length then that many bytes, or null for -1 (any negative, as Kafka's
/// `Utils.readBytes` treats it).
fn read_nullable(
    reader: &mut Reader<'_>,
    batch: &Bytes,
    base: usize,
) -> Result<Option<Bytes>, ReadError> {
    let len = reader.varint()?;
    if len < 0 {
        return Ok(None);
    }
    let start = base + reader.position();
    reader.take(len as usize)?;
    Ok(Some(batch.slice(start..start + len as usize)))
}

enum HeaderError {
    Read(ReadError),
    NullKey,
}

impl From<ReadError> for HeaderError {
    fn from(e: ReadError) -> HeaderError {
        HeaderError::Read(e)
    }
}

/// One header at the reader's position; `bytes[base..]` is what the reader walks.
fn read_header(
    reader: &mut Reader<'_>,
    bytes: &Bytes,
    base: usize,
) -> Result<RecordHeader, HeaderError> {
    let key = read_nullable(reader, bytes, base)?.ok_or(HeaderError::NullKey)?;
    let value = read_nullable(reader, bytes, base)?;
    Ok(RecordHeader { key, value })
}
