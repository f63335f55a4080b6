//! Writes v2 batches the way Kafka's `MemoryRecordsBuilder` does, uncompressed or with one of
//! Kafka's codecs.

use bytes::{BufMut, Bytes, BytesMut};
use zerocopy::FromBytes;

use super::compression;
use super::header::{
    Compression, RecordBatchHeader, TimestampType, compute_attributes, compute_crc,
};
use super::varint::{put_varint, put_varlong, size_of_varint, size_of_varlong};
use super::{
    LOG_OVERHEAD, MAGIC_V2, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, RecordBatch,
};

/// Builds one batch. Records get consecutive offsets from `base_offset`; the first record's
/// timestamp becomes baseTimestamp (Kafka's FirstTimestamp) and the largest becomes maxTimestamp.
///
/// ```
/// use ringlog_engine::batch::RecordBatchBuilder;
/// let mut builder = RecordBatchBuilder::new(100).with_leader_epoch(3);
/// builder.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[("h", None)]);
/// let batch = builder.build();
/// assert_eq!((batch.base_offset(), batch.last_offset(), batch.records_count()), (100, 100, 1));
/// ```
#[derive(Clone, Debug)]
pub struct RecordBatchBuilder {
    buf: BytesMut,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    compression: Compression,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
}

impl RecordBatchBuilder {
    pub fn new(base_offset: i64) -> RecordBatchBuilder {
        RecordBatchBuilder::with_capacity(base_offset, 0)
    }

    /// As [`RecordBatchBuilder::new`], reserving room for `records_size_bytes` of records.
    pub fn with_capacity(base_offset: i64, records_size_bytes: usize) -> RecordBatchBuilder {
        let mut buf = BytesMut::with_capacity(RECORD_BATCH_OVERHEAD + records_size_bytes);
        buf.put_bytes(0, RECORD_BATCH_OVERHEAD);
        RecordBatchBuilder {
            buf,
            base_offset,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            log_append_time: None,
            compression: Compression::None,
            base_timestamp: NO_TIMESTAMP,
            max_timestamp: NO_TIMESTAMP,
            records_count: 0,
        }
    }

    pub fn with_leader_epoch(mut self, partition_leader_epoch: i32) -> RecordBatchBuilder {
        self.partition_leader_epoch = partition_leader_epoch;
        self
    }

    /// Idempotent / transactional producer identity: producerId, producerEpoch, baseSequence.
    pub fn with_producer(
        mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> RecordBatchBuilder {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn with_transactional(mut self, transactional: bool) -> RecordBatchBuilder {
        self.transactional = transactional;
        self
    }

    /// Sets attributes bit 5: the records are control records (see [`super::control`]).
    pub fn with_control(mut self, control: bool) -> RecordBatchBuilder {
        self.control = control;
        self
    }

    /// LOG_APPEND_TIME: the broker's append time overrides every record's timestamp on read.
    pub fn with_log_append_time(mut self, log_append_time_ms: i64) -> RecordBatchBuilder {
        self.log_append_time = Some(log_append_time_ms);
        self
    }

    /// Compresses the records section with `compression` at [`RecordBatchBuilder::build`], as a
    /// Kafka producer with that `compression.type` does (snappy in the Java client's xerial
    /// framing).
    ///
    /// Panics for ids 5-7: there is no such codec to compress with.
    pub fn with_compression(mut self, compression: Compression) -> RecordBatchBuilder {
        assert!(
            !matches!(compression, Compression::Unknown(_)),
            "no codec to compress with: {compression:?}"
        );
        self.compression = compression;
        self
    }

    pub fn records_count(&self) -> i32 {
        self.records_count
    }

    /// Size the batch would have if built now, uncompressed.
    pub fn size_bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records_count == 0
    }

    /// Appends a record at the next offset.
    ///
    /// Panics if the batch would exceed i32::MAX bytes or records: Kafka's size fields cannot say
    /// that, and no caller should build a 2 GiB batch.
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> &mut RecordBatchBuilder {
        self.append_with(
            timestamp_ms,
            key,
            value,
            headers.len(),
            |buf| {
                for (key, value) in headers {
                    put_nullable(buf, Some(key.as_bytes()));
                    put_nullable(buf, *value);
                }
            },
            headers
                .iter()
                .map(|(k, v)| header_size(k.as_bytes(), *v))
                .sum(),
        )
    }

    /// As [`RecordBatchBuilder::append`] with headers whose keys are raw bytes, as they come out
    /// of [`super::RecordHeader`] (for re-encoding records read from another batch).
    pub fn append_raw_headers(
        &mut self,
        timestamp_ms: i64,
        key: Option<&Bytes>,
        value: Option<&Bytes>,
        headers: &[(Bytes, Option<Bytes>)],
    ) -> &mut RecordBatchBuilder {
        self.append_with(
            timestamp_ms,
            key.map(|k| &k[..]),
            value.map(|v| &v[..]),
            headers.len(),
            |buf| {
                for (key, value) in headers {
                    put_nullable(buf, Some(key));
                    put_nullable(buf, value.as_deref());
                }
            },
            headers
                .iter()
                .map(|(k, v)| header_size(k, v.as_deref()))
                .sum(),
        )
    }

    fn append_with(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers_count: usize,
        write_headers: impl FnOnce(&mut BytesMut),
        headers_size: usize,
    ) -> &mut RecordBatchBuilder {
        if self.records_count == 0 {
            self.base_timestamp = timestamp_ms;
            self.max_timestamp = timestamp_ms;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
        let offset_delta = self.records_count;
        // Wrapping: the reader adds it back with wrapping arithmetic, so any i64 round-trips.
        let timestamp_delta = timestamp_ms.wrapping_sub(self.base_timestamp);
        let headers_count =
            i32::try_from(headers_count).expect("more than i32::MAX headers in one record");
        let body_size = 1
            + size_of_varlong(timestamp_delta)
            + size_of_varint(offset_delta)
            + nullable_size(key)
            + nullable_size(value)
            + size_of_varint(headers_count)
            + headers_size;
        let body_size = i32::try_from(body_size).expect("record larger than i32::MAX bytes");
        let start = self.buf.len();
        self.buf
            .reserve(size_of_varint(body_size) + body_size as usize);
        put_varint(&mut self.buf, body_size);
        self.buf.put_u8(0); // record attributes: none defined
        put_varlong(&mut self.buf, timestamp_delta);
        put_varint(&mut self.buf, offset_delta);
        put_nullable(&mut self.buf, key);
        put_nullable(&mut self.buf, value);
        put_varint(&mut self.buf, headers_count);
        write_headers(&mut self.buf);
        debug_assert_eq!(
            self.buf.len() - start,
            size_of_varint(body_size) + body_size as usize,
            "record size computed ahead disagrees with the bytes written"
        );
        assert!(
            self.buf.len() - LOG_OVERHEAD <= i32::MAX as usize,
            "batch larger than i32::MAX bytes"
        );
        self.records_count = self
            .records_count
            .checked_add(1)
            .expect("more than i32::MAX records in one batch");
        self
    }

    /// Fills in the header and CRC. An empty builder gives an empty batch (recordsCount 0,
    /// timestamps -1, lastOffsetDelta 0) like the header Kafka keeps after compaction.
    pub fn build(self) -> RecordBatch {
        let RecordBatchBuilder { mut buf, .. } = self;
        if self.compression != Compression::None {
            let compressed = compression::compress(self.compression, &buf[RECORD_BATCH_OVERHEAD..]);
            buf.truncate(RECORD_BATCH_OVERHEAD);
            buf.extend_from_slice(&compressed);
            assert!(
                buf.len() - LOG_OVERHEAD <= i32::MAX as usize,
                "batch larger than i32::MAX bytes"
            );
        }
        let size_bytes = buf.len();
        let timestamp_type = if self.log_append_time.is_some() {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        };
        let max_timestamp = self.log_append_time.unwrap_or(self.max_timestamp);
        let header = match RecordBatchHeader::mut_from_prefix(&mut buf[..]) {
            Ok((header, _)) => header,
            Err(_) => unreachable!("the builder reserved the header up front"),
        };
        header.base_offset.set(self.base_offset);
        header.batch_length.set((size_bytes - LOG_OVERHEAD) as i32);
        header
            .partition_leader_epoch
            .set(self.partition_leader_epoch);
        header.magic = MAGIC_V2;
        header.attributes.set(compute_attributes(
            self.compression,
            timestamp_type,
            self.transactional,
            self.control,
        ));
        header
            .last_offset_delta
            .set((self.records_count - 1).max(0));
        header.base_timestamp.set(self.base_timestamp);
        header.max_timestamp.set(max_timestamp);
        header.producer_id.set(self.producer_id);
        header.producer_epoch.set(self.producer_epoch);
        header.base_sequence.set(self.base_sequence);
        header.records_count.set(self.records_count);
        let crc = compute_crc(&buf);
        header_mut(&mut buf).crc.set(crc);
        let bytes = buf.freeze();
        // Assert the batch right after writing it: a builder bug must not reach the log.
        debug_assert!(RecordBatch::parse(bytes.clone()).is_ok());
        RecordBatch::from_built(bytes)
    }
}

fn header_mut(buf: &mut [u8]) -> &mut RecordBatchHeader {
    match RecordBatchHeader::mut_from_prefix(buf) {
        Ok((header, _)) => header,
        Err(_) => unreachable!("the builder reserved the header up front"),
    }
}

fn nullable_size(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => size_of_varint(-1),
        Some(b) => {
            let len = i32::try_from(b.len()).expect("field larger than i32::MAX bytes");
            size_of_varint(len) + b.len()
        }
    }
}

fn header_size(key: &[u8], value: Option<&[u8]>) -> usize {
    nullable_size(Some(key)) + nullable_size(value)
}

fn put_nullable(buf: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.put_slice(b);
        }
    }
}
