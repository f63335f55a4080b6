//! Control records: the records of a batch with attributes bit 5 set, which carry protocol
//! events instead of user data (KIP-98 transaction markers, KIP-595 LeaderChange, KIP-630
//! snapshot header and footer, KIP-853 voters).
//!
//! Key (`ControlRecordType.java`, schema version 0, not flexible): `version int16, type int16`.
//! A negative version is corruption; a newer version is read as version 0, as Kafka does.
//!
//! Values are Kafka "data" messages in their flexible encoding (flexibleVersions "0+"), written at
//! the version Kafka's `ControlRecordUtils` uses (0 for all three here):
//!
//! ```text
//! LeaderChangeMessage v0   Version int16, LeaderId int32,
//!                          Voters compact array of { VoterId int32, tagged fields },
//!                          GrantingVoters compact array of { VoterId int32, tagged fields },
//!                          tagged fields
//! SnapshotHeaderRecord v0  Version int16, LastContainedLogTimestamp int64, tagged fields
//! SnapshotFooterRecord v0  Version int16, tagged fields
//! ```
//! A compact array is an unsigned varint N+1 (0 would be null, which these non-nullable fields
//! reject) then N elements; tagged fields are an unsigned varint count of (tag, size, bytes)
//! entries. We write no tagged fields and skip unknown ones on read.
//!
//! Control batches are written as Kafka's `MemoryRecords.withLeaderChangeMessage` & co. do:
//! CREATE_TIME, no compression, not transactional, producerId/epoch/baseSequence -1, one record.

use bytes::{BufMut, Bytes, BytesMut};

use super::varint::{ReadError, Reader, put_unsigned_varint};
use super::{BatchError, RecordBatch, RecordBatchBuilder, RecordIter};

/// `ControlRecordType` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    Commit,
    Abort,
    LeaderChange,
    SnapshotHeader,
    SnapshotFooter,
    KRaftVersion,
    KRaftVoters,
    /// ringlog's own (not Kafka's): a partition's idempotent-producer state at a snapshot's end
    /// offset, carried after the SnapshotHeader (docs/snapshots.md). Its id,
    /// [`PRODUCER_STATE_CONTROL_TYPE`], is far above Kafka's 0–6 so that no type Kafka adds
    /// collides with it; the value is opaque here (the node encodes it).
    ProducerState,
    /// A type this code does not know: kept by number so it can be skipped or passed on.
    Unknown(i16),
}

impl ControlRecordType {
    pub fn from_id(id: i16) -> ControlRecordType {
        match id {
            0 => ControlRecordType::Commit,
            1 => ControlRecordType::Abort,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KRaftVersion,
            6 => ControlRecordType::KRaftVoters,
            PRODUCER_STATE_CONTROL_TYPE => ControlRecordType::ProducerState,
            other => ControlRecordType::Unknown(other),
        }
    }

    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Commit => 0,
            ControlRecordType::Abort => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KRaftVersion => 5,
            ControlRecordType::KRaftVoters => 6,
            ControlRecordType::ProducerState => PRODUCER_STATE_CONTROL_TYPE,
            ControlRecordType::Unknown(id) => id,
        }
    }
}

/// The id of [`ControlRecordType::ProducerState`] (ringlog's own control record type).
pub const PRODUCER_STATE_CONTROL_TYPE: i16 = 20_000;

/// The version of the control record key schema Kafka writes.
pub const CONTROL_RECORD_KEY_VERSION: i16 = 0;
/// Versions of the value schemas written here (Kafka's `ControlRecordUtils.*_CURRENT_VERSION`).
pub const LEADER_CHANGE_VERSION: i16 = 0;
pub const SNAPSHOT_HEADER_VERSION: i16 = 0;
pub const SNAPSHOT_FOOTER_VERSION: i16 = 0;

/// Why a control record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlRecordError {
    #[error("control record has no key")]
    MissingKey,
    #[error("control record key is {size_bytes} bytes, needs 4")]
    KeyTooShort { size_bytes: usize },
    #[error("control record key version {version} is negative")]
    NegativeKeyVersion { version: i16 },
    #[error("{record_type:?} control record has no value")]
    MissingValue { record_type: ControlRecordType },
    #[error("{message}: {reason}")]
    Malformed {
        message: &'static str,
        reason: &'static str,
    },
    #[error("{message}: field {field} is null but not nullable")]
    NullArray {
        message: &'static str,
        field: &'static str,
    },
    #[error("{message}: {trailing_bytes} bytes after the last field")]
    TrailingBytes {
        message: &'static str,
        trailing_bytes: usize,
    },
}

/// A control record key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlRecordKey {
    pub version: i16,
    pub record_type: ControlRecordType,
}

impl ControlRecordKey {
    pub fn new(record_type: ControlRecordType) -> ControlRecordKey {
        ControlRecordKey {
            version: CONTROL_RECORD_KEY_VERSION,
            record_type,
        }
    }

    pub fn encode(&self) -> [u8; 4] {
        let mut key = [0u8; 4];
        key[..2].copy_from_slice(&self.version.to_be_bytes());
        key[2..].copy_from_slice(&self.record_type.id().to_be_bytes());
        key
    }

    /// `ControlRecordType.parseTypeId`: at least 4 bytes, version not negative; bytes past the
    /// first 4 (a newer key version) are ignored.
    pub fn decode(key: &[u8]) -> Result<ControlRecordKey, ControlRecordError> {
        if key.len() < 4 {
            return Err(ControlRecordError::KeyTooShort {
                size_bytes: key.len(),
            });
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(ControlRecordError::NegativeKeyVersion { version });
        }
        let record_type = ControlRecordType::from_id(i16::from_be_bytes([key[2], key[3]]));
        Ok(ControlRecordKey {
            version,
            record_type,
        })
    }
}

/// KIP-595: written by a new leader as the first record of its epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderChangeMessage {
    pub version: i16,
    pub leader_id: i32,
    /// VoterId of every voter in the quorum for this epoch.
    pub voters: Vec<i32>,
    /// VoterId of the voters who granted the leader its vote.
    pub granting_voters: Vec<i32>,
}

impl LeaderChangeMessage {
    const NAME: &'static str = "LeaderChangeMessage";

    pub fn new(leader_id: i32, voters: Vec<i32>, granting_voters: Vec<i32>) -> Self {
        LeaderChangeMessage {
            version: LEADER_CHANGE_VERSION,
            leader_id,
            voters,
            granting_voters,
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(
            2 + 4 + 10 + 5 * (self.voters.len() + self.granting_voters.len()) + 1,
        );
        buf.put_i16(self.version);
        buf.put_i32(self.leader_id);
        put_voters(&mut buf, &self.voters);
        put_voters(&mut buf, &self.granting_voters);
        put_unsigned_varint(&mut buf, 0); // no tagged fields
        buf.freeze()
    }

    pub fn decode(value: &[u8]) -> Result<LeaderChangeMessage, ControlRecordError> {
        let mut reader = Reader::new(value);
        let malformed = |e: ReadError| malformed(Self::NAME, e);
        let version = reader.i16().map_err(malformed)?;
        let leader_id = reader.i32().map_err(malformed)?;
        let voters = read_voters(&mut reader, "Voters")?;
        let granting_voters = read_voters(&mut reader, "GrantingVoters")?;
        skip_tagged_fields(&mut reader).map_err(malformed)?;
        expect_end(&reader, Self::NAME)?;
        Ok(LeaderChangeMessage {
            version,
            leader_id,
            voters,
            granting_voters,
        })
    }
}

/// KIP-630: the first record of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHeaderRecord {
    pub version: i16,
    pub last_contained_log_timestamp: i64,
}

impl SnapshotHeaderRecord {
    const NAME: &'static str = "SnapshotHeaderRecord";

    pub fn new(last_contained_log_timestamp: i64) -> SnapshotHeaderRecord {
        SnapshotHeaderRecord {
            version: SNAPSHOT_HEADER_VERSION,
            last_contained_log_timestamp,
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(11);
        buf.put_i16(self.version);
        buf.put_i64(self.last_contained_log_timestamp);
        put_unsigned_varint(&mut buf, 0);
        buf.freeze()
    }

    pub fn decode(value: &[u8]) -> Result<SnapshotHeaderRecord, ControlRecordError> {
        let mut reader = Reader::new(value);
        let malformed = |e: ReadError| malformed(Self::NAME, e);
        let version = reader.i16().map_err(malformed)?;
        let last_contained_log_timestamp = reader.i64().map_err(malformed)?;
        skip_tagged_fields(&mut reader).map_err(malformed)?;
        expect_end(&reader, Self::NAME)?;
        Ok(SnapshotHeaderRecord {
            version,
            last_contained_log_timestamp,
        })
    }
}

/// KIP-630: the last record of a snapshot; its presence proves the snapshot is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotFooterRecord {
    pub version: i16,
}

impl SnapshotFooterRecord {
    const NAME: &'static str = "SnapshotFooterRecord";

    pub fn new() -> SnapshotFooterRecord {
        SnapshotFooterRecord {
            version: SNAPSHOT_FOOTER_VERSION,
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(3);
        buf.put_i16(self.version);
        put_unsigned_varint(&mut buf, 0);
        buf.freeze()
    }

    pub fn decode(value: &[u8]) -> Result<SnapshotFooterRecord, ControlRecordError> {
        let mut reader = Reader::new(value);
        let malformed = |e: ReadError| malformed(Self::NAME, e);
        let version = reader.i16().map_err(malformed)?;
        skip_tagged_fields(&mut reader).map_err(malformed)?;
        expect_end(&reader, Self::NAME)?;
        Ok(SnapshotFooterRecord { version })
    }
}

impl Default for SnapshotFooterRecord {
    fn default() -> Self {
        SnapshotFooterRecord::new()
    }
}

/// A decoded control record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlRecord {
    LeaderChange(LeaderChangeMessage),
    SnapshotHeader(SnapshotHeaderRecord),
    SnapshotFooter(SnapshotFooterRecord),
    /// Any other type (transaction markers, KRaft version/voters, unknown): key and raw value.
    Other {
        key: ControlRecordKey,
        value: Option<Bytes>,
    },
}

impl ControlRecord {
    pub fn record_type(&self) -> ControlRecordType {
        match self {
            ControlRecord::LeaderChange(_) => ControlRecordType::LeaderChange,
            ControlRecord::SnapshotHeader(_) => ControlRecordType::SnapshotHeader,
            ControlRecord::SnapshotFooter(_) => ControlRecordType::SnapshotFooter,
            ControlRecord::Other { key, .. } => key.record_type,
        }
    }

    pub fn key(&self) -> ControlRecordKey {
        match self {
            ControlRecord::Other { key, .. } => *key,
            other => ControlRecordKey::new(other.record_type()),
        }
    }

    pub fn encode_value(&self) -> Option<Bytes> {
        match self {
            ControlRecord::LeaderChange(m) => Some(m.encode()),
            ControlRecord::SnapshotHeader(m) => Some(m.encode()),
            ControlRecord::SnapshotFooter(m) => Some(m.encode()),
            ControlRecord::Other { value, .. } => value.clone(),
        }
    }

    /// Decodes a control record from its key and value.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, ControlRecordError> {
        let key = ControlRecordKey::decode(key.ok_or(ControlRecordError::MissingKey)?)?;
        let required = || {
            value.ok_or(ControlRecordError::MissingValue {
                record_type: key.record_type,
            })
        };
        Ok(match key.record_type {
            ControlRecordType::LeaderChange => {
                ControlRecord::LeaderChange(LeaderChangeMessage::decode(required()?)?)
            }
            ControlRecordType::SnapshotHeader => {
                ControlRecord::SnapshotHeader(SnapshotHeaderRecord::decode(required()?)?)
            }
            ControlRecordType::SnapshotFooter => {
                ControlRecord::SnapshotFooter(SnapshotFooterRecord::decode(required()?)?)
            }
            _ => ControlRecord::Other {
                key,
                value: value.map(Bytes::copy_from_slice),
            },
        })
    }
}

/// Builds a control batch holding `records` (CREATE_TIME, every record at `timestamp_ms`).
pub fn build_control_batch(
    base_offset: i64,
    leader_epoch: i32,
    timestamp_ms: i64,
    records: &[ControlRecord],
) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(base_offset)
        .with_leader_epoch(leader_epoch)
        .with_control(true);
    for record in records {
        let key = record.key().encode();
        let value = record.encode_value();
        builder.append(timestamp_ms, Some(&key), value.as_deref(), &[]);
    }
    builder.build()
}

/// `MemoryRecords.withLeaderChangeMessage`: the batch a new leader appends first in its epoch.
pub fn build_leader_change_batch(
    base_offset: i64,
    leader_epoch: i32,
    timestamp_ms: i64,
    message: &LeaderChangeMessage,
) -> RecordBatch {
    build_control_batch(
        base_offset,
        leader_epoch,
        timestamp_ms,
        &[ControlRecord::LeaderChange(message.clone())],
    )
}

/// `MemoryRecords.withSnapshotHeaderRecord`.
pub fn build_snapshot_header_batch(
    base_offset: i64,
    leader_epoch: i32,
    timestamp_ms: i64,
    header: &SnapshotHeaderRecord,
) -> RecordBatch {
    build_control_batch(
        base_offset,
        leader_epoch,
        timestamp_ms,
        &[ControlRecord::SnapshotHeader(*header)],
    )
}

/// `MemoryRecords.withSnapshotFooterRecord`.
pub fn build_snapshot_footer_batch(
    base_offset: i64,
    leader_epoch: i32,
    timestamp_ms: i64,
    footer: &SnapshotFooterRecord,
) -> RecordBatch {
    build_control_batch(
        base_offset,
        leader_epoch,
        timestamp_ms,
        &[ControlRecord::SnapshotFooter(*footer)],
    )
}

/// Decodes the control records of a control batch, one per record, with the record's offset.
pub struct ControlRecordIter {
    records: RecordIter,
    position: u64,
    index: u32,
}

impl ControlRecordIter {
    pub(crate) fn new(batch: &RecordBatch) -> Result<ControlRecordIter, BatchError> {
        if !batch.is_control() {
            return Err(BatchError::NotControlBatch {
                position: batch.position(),
            });
        }
        Ok(ControlRecordIter {
            records: batch.records()?,
            position: batch.position(),
            index: 0,
        })
    }
}

impl Iterator for ControlRecordIter {
    /// (offset, record)
    type Item = Result<(i64, ControlRecord), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let record = match self.records.next()? {
            Ok(record) => record,
            Err(error) => return Some(Err(error)),
        };
        let record_index = self.index;
        self.index += 1;
        let decoded =
            ControlRecord::decode(record.key().map(|k| &k[..]), record.value().map(|v| &v[..]));
        Some(
            decoded
                .map(|control| (record.offset(), control))
                .map_err(|source| BatchError::ControlRecord {
                    position: self.position,
                    record_index,
                    source,
                }),
        )
    }
}

fn malformed(message: &'static str, e: ReadError) -> ControlRecordError {
    ControlRecordError::Malformed {
        message,
        reason: e.reason(),
    }
}

fn expect_end(reader: &Reader<'_>, message: &'static str) -> Result<(), ControlRecordError> {
    match reader.remaining() {
        0 => Ok(()),
        trailing_bytes => Err(ControlRecordError::TrailingBytes {
            message,
            trailing_bytes,
        }),
    }
}

/// A compact array of flexible `Voter { VoterId }` structs.
fn put_voters(buf: &mut BytesMut, voter_ids: &[i32]) {
    let len = u32::try_from(voter_ids.len() + 1).expect("more than u32::MAX voters");
    put_unsigned_varint(buf, len);
    for &voter_id in voter_ids {
        buf.put_i32(voter_id);
        put_unsigned_varint(buf, 0); // the Voter struct's tagged fields
    }
}

fn read_voters(
    reader: &mut Reader<'_>,
    field: &'static str,
) -> Result<Vec<i32>, ControlRecordError> {
    let malformed = |e: ReadError| malformed(LeaderChangeMessage::NAME, e);
    let len_plus_one = reader.unsigned_varint().map_err(malformed)?;
    let Some(len) = len_plus_one.checked_sub(1) else {
        return Err(ControlRecordError::NullArray {
            message: LeaderChangeMessage::NAME,
            field,
        });
    };
    // Each Voter takes at least 5 bytes: never trust the count for the allocation.
    let mut voters = Vec::with_capacity((len as usize).min(reader.remaining() / 5));
    for _ in 0..len {
        voters.push(reader.i32().map_err(malformed)?);
        skip_tagged_fields(reader).map_err(malformed)?;
    }
    Ok(voters)
}

/// Skips a tagged-field section: count, then (tag, size, bytes) per field.
fn skip_tagged_fields(reader: &mut Reader<'_>) -> Result<(), ReadError> {
    let count = reader.unsigned_varint()?;
    for _ in 0..count {
        let _tag = reader.unsigned_varint()?;
        let size = reader.unsigned_varint()?;
        reader.take(size as usize)?;
    }
    Ok(())
}

/// Fuzzing the value decoders directly: whatever decodes must re-encode to something that decodes
/// to the same value.
pub(crate) fn fuzz_control_values(data: &[u8]) {
    if let Ok(m) = LeaderChangeMessage::decode(data) {
        assert_eq!(LeaderChangeMessage::decode(&m.encode()), Ok(m));
    }
    if let Ok(m) = SnapshotHeaderRecord::decode(data) {
        assert_eq!(SnapshotHeaderRecord::decode(&m.encode()), Ok(m));
    }
    if let Ok(m) = SnapshotFooterRecord::decode(data) {
        assert_eq!(SnapshotFooterRecord::decode(&m.encode()), Ok(m));
    }
    let (key, value) = data.split_at(data.len().min(4));
    if let Ok(record) = ControlRecord::decode(Some(key), Some(value)) {
        let again = ControlRecord::decode(
            Some(&record.key().encode()),
            record.encode_value().as_deref(),
        );
        assert_eq!(again, Ok(record));
    }
}
