//! Pure encoding of a snapshot's batches: header, the state machine's records, footer. No I/O:
//! [`super::SnapshotWriter`] puts the bytes on disk.

use bytes::{Bytes, BytesMut};

use crate::batch::RecordBatchBuilder;
use crate::batch::control::{
    ControlRecord, ControlRecordKey, ControlRecordType, SnapshotFooterRecord, SnapshotHeaderRecord,
    build_snapshot_footer_batch,
};

use super::SnapshotId;

/// Record header on the SnapshotHeader record naming the state machine's format.
pub const FORMAT_HEADER_KEY: &str = "ringlog.snapshot.format";
/// Record header on the SnapshotHeader record holding the format's version (i16, big-endian).
pub const FORMAT_VERSION_HEADER_KEY: &str = "ringlog.snapshot.format.version";
/// A data batch is closed once it reaches this size (Kafka's snapshot writer uses 8 MiB batches
/// for the metadata log; 1 MiB keeps a torn or corrupt batch's blast radius and the reader's
/// peak buffer small at no measurable cost).
pub const SNAPSHOT_BATCH_SIZE_BYTES_MAX: usize = 1024 * 1024;

/// Which state machine wrote a snapshot and in which version of its format (KIP-630: "persist
/// information about the format type and version such that the state machine can decode it").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SnapshotFormat {
    pub name: String,
    pub version: i16,
}

/// Where a state machine writes its records when it takes a snapshot. Implemented by the
/// engine's [`SnapshotEncoder`] and [`super::SnapshotFileSink`], and by anything a test likes:
/// it keeps the state machine free of I/O.
pub trait SnapshotRecordSink {
    fn append_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>);
}

/// Encodes one snapshot into batches. Completed batches accumulate until taken with
/// [`SnapshotEncoder::take_encoded`], so a large state can be written while it is encoded.
#[derive(Debug)]
pub struct SnapshotEncoder {
    snapshot_id: SnapshotId,
    timestamp_ms: i64,
    batch_size_bytes_max: usize,
    /// Offset (within the snapshot) of the next record.
    next_offset: i64,
    current: Option<RecordBatchBuilder>,
    encoded: BytesMut,
    records_count: u64,
}

impl SnapshotEncoder {
    /// Starts a snapshot: encodes the header batch at offset 0. `last_contained_log_timestamp_ms`
    /// is the timestamp of the last record the snapshot covers (Kafka's SnapshotHeaderRecord).
    pub fn new(
        snapshot_id: SnapshotId,
        format: &SnapshotFormat,
        last_contained_log_timestamp_ms: i64,
    ) -> SnapshotEncoder {
        SnapshotEncoder::with_batch_size(
            snapshot_id,
            format,
            last_contained_log_timestamp_ms,
            SNAPSHOT_BATCH_SIZE_BYTES_MAX,
        )
    }

    pub fn with_batch_size(
        snapshot_id: SnapshotId,
        format: &SnapshotFormat,
        last_contained_log_timestamp_ms: i64,
        batch_size_bytes_max: usize,
    ) -> SnapshotEncoder {
        SnapshotEncoder::with_header_records(
            snapshot_id,
            format,
            last_contained_log_timestamp_ms,
            batch_size_bytes_max,
            &[],
        )
    }

    /// [`SnapshotEncoder::with_batch_size`] with more control records in the header's batch,
    /// after the SnapshotHeader: Kafka's layout for the records a snapshot carries besides the
    /// state machine's (KIP-853: the KRaftVersion and Voters records in force at its end
    /// offset). Each is a (type, value) pair; the reader returns them in
    /// `SnapshotContents::header_control_records`.
    pub fn with_header_records(
        snapshot_id: SnapshotId,
        format: &SnapshotFormat,
        last_contained_log_timestamp_ms: i64,
        batch_size_bytes_max: usize,
        header_records: &[(ControlRecordType, Bytes)],
    ) -> SnapshotEncoder {
        assert!(
            snapshot_id.is_valid(),
            "snapshot id {snapshot_id:?} is not valid"
        );
        let header = SnapshotHeaderRecord::new(last_contained_log_timestamp_ms);
        // build_snapshot_header_batch has no record headers; the format rides on them, so the
        // header batch is built here with the same builder and the same key and value encoding.
        let mut builder = RecordBatchBuilder::new(0)
            .with_leader_epoch(snapshot_id.epoch)
            .with_control(true);
        let key = ControlRecordKey::new(ControlRecordType::SnapshotHeader).encode();
        let value = ControlRecord::SnapshotHeader(header).encode_value();
        let version = format.version.to_be_bytes();
        builder.append(
            last_contained_log_timestamp_ms,
            Some(&key),
            value.as_deref(),
            &[
                (FORMAT_HEADER_KEY, Some(format.name.as_bytes())),
                (FORMAT_VERSION_HEADER_KEY, Some(&version)),
            ],
        );
        for (record_type, value) in header_records {
            assert!(
                !matches!(
                    record_type,
                    ControlRecordType::SnapshotHeader | ControlRecordType::SnapshotFooter
                ),
                "a snapshot has one header and one footer"
            );
            let key = ControlRecordKey::new(*record_type).encode();
            builder.append(
                last_contained_log_timestamp_ms,
                Some(&key),
                Some(value),
                &[],
            );
        }
        let header_batch = builder.build();
        let mut encoded = BytesMut::new();
        encoded.extend_from_slice(header_batch.as_bytes());
        SnapshotEncoder {
            snapshot_id,
            timestamp_ms: last_contained_log_timestamp_ms,
            batch_size_bytes_max,
            next_offset: header_batch.next_offset(),
            current: None,
            encoded,
            records_count: 0,
        }
    }

    pub fn snapshot_id(&self) -> SnapshotId {
        self.snapshot_id
    }

    /// Data records appended so far.
    pub fn records_count(&self) -> u64 {
        self.records_count
    }

    /// Bytes of completed batches waiting to be taken.
    pub fn encoded_len_bytes(&self) -> usize {
        self.encoded.len()
    }

    /// The completed batches since the last call (whole batches only).
    pub fn take_encoded(&mut self) -> Bytes {
        self.encoded.split().freeze()
    }

    /// Closes the last data batch, appends the footer, and returns the remaining bytes.
    pub fn finish(mut self) -> Bytes {
        self.close_batch();
        let footer = build_snapshot_footer_batch(
            self.next_offset,
            self.snapshot_id.epoch,
            self.timestamp_ms,
            &SnapshotFooterRecord::new(),
        );
        self.encoded.extend_from_slice(footer.as_bytes());
        self.encoded.freeze()
    }

    fn close_batch(&mut self) {
        if let Some(builder) = self.current.take() {
            let batch = builder.build();
            debug_assert_eq!(batch.base_offset(), self.next_offset);
            self.next_offset = batch.next_offset();
            self.encoded.extend_from_slice(batch.as_bytes());
        }
    }
}

impl SnapshotRecordSink for SnapshotEncoder {
    fn append_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        let (next_offset, epoch) = (self.next_offset, self.snapshot_id.epoch);
        let builder = self
            .current
            .get_or_insert_with(|| RecordBatchBuilder::new(next_offset).with_leader_epoch(epoch));
        builder.append(self.timestamp_ms, key, value, &[]);
        self.records_count += 1;
        if builder.size_bytes() >= self.batch_size_bytes_max {
            self.close_batch();
        }
    }
}
