//! The little the core needs to know about Kafka RecordBatch v2 bytes: per batch, its offsets,
//! record count and partition leader epoch; plus the one batch the core writes itself, the
//! LeaderChangeMessage control batch.
//!
//! Batches stay opaque `Bytes` everywhere else. The header reader is a few fixed-position
//! reads (the core needs offsets, count and epoch per batch, nothing else) with bounds checks;
//! the LeaderChangeMessage batch comes from the engine's codec (`ringlog_engine::batch`).
//! [`build_batch`] makes plain client batches for tests, the simulator and benches.
//!
//! RecordBatch v2 header (big-endian), byte positions:
//! ```text
//!  0 baseOffset i64        8 batchLength i32     12 partitionLeaderEpoch i32   16 magic i8 (=2)
//! 17 crc u32 (CRC32C of bytes 21..end)           21 attributes i16 (0x20 = control)
//! 23 lastOffsetDelta i32  27 baseTimestamp i64   35 maxTimestamp i64   43 producerId i64
//! 51 producerEpoch i16    53 baseSequence i32    57 recordsCount i32   61 records...
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::RaftError;
use crate::types::{Epoch, NodeId};

/// Size of the RecordBatch v2 header.
pub const BATCH_HEADER_SIZE_BYTES: usize = 61;
const MAGIC_V2: u8 = 2;
const ATTRIBUTE_CONTROL: u16 = 0x20;

/// One record's key and value, either possibly null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// What the core reads from one batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    pub last_offset: u64,
    pub partition_leader_epoch: Epoch,
    pub records_count: u32,
    /// Total size of the batch in bytes.
    pub size_bytes: usize,
}

fn be_u32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

fn be_u64(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&data[at..at + 8]);
    u64::from_be_bytes(b)
}

/// Reads the headers of the consecutive batches in `records`. A truncated or malformed batch
/// is a typed error: the whole response is rejected, nothing is appended.
pub fn batch_headers(records: &[u8]) -> Result<Vec<BatchHeader>, RaftError> {
    parse_batch_headers(records, false)
}

/// [`batch_headers`] for a client's proposal before the leader stamps it: Kafka producers send
/// partitionLeaderEpoch -1 (`RecordBatch.NO_PARTITION_LEADER_EPOCH`), which the stamp replaces
/// (it sits outside the CRC). Reported as epoch 0.
pub fn proposal_headers(records: &[u8]) -> Result<Vec<BatchHeader>, RaftError> {
    parse_batch_headers(records, true)
}

fn parse_batch_headers(
    records: &[u8],
    unstamped_epoch_allowed: bool,
) -> Result<Vec<BatchHeader>, RaftError> {
    let mut headers = Vec::new();
    let mut position = 0usize;
    while position < records.len() {
        let rest = &records[position..];
        if rest.len() < BATCH_HEADER_SIZE_BYTES {
            return Err(RaftError::MalformedBatch {
                position,
                reason: "truncated header",
            });
        }
        let batch_length = be_u32(rest, 8) as usize;
        let size_bytes = batch_length
            .checked_add(12)
            .ok_or(RaftError::MalformedBatch {
                position,
                reason: "batch length overflow",
            })?;
        if size_bytes < BATCH_HEADER_SIZE_BYTES || size_bytes > rest.len() {
            return Err(RaftError::MalformedBatch {
                position,
                reason: "bad batch length",
            });
        }
        if rest[16] != MAGIC_V2 {
            return Err(RaftError::MalformedBatch {
                position,
                reason: "magic is not 2",
            });
        }
        let base_offset = be_u64(rest, 0);
        let last_offset_delta = be_u32(rest, 23);
        let records_count = be_u32(rest, 57);
        let mut partition_leader_epoch = be_u32(rest, 12);
        if unstamped_epoch_allowed && partition_leader_epoch == u32::MAX {
            partition_leader_epoch = 0;
        }
        if base_offset > i64::MAX as u64 || partition_leader_epoch > i32::MAX as u32 {
            return Err(RaftError::MalformedBatch {
                position,
                reason: "negative offset or epoch",
            });
        }
        if records_count == 0 || last_offset_delta > i32::MAX as u32 {
            return Err(RaftError::MalformedBatch {
                position,
                reason: "bad record count",
            });
        }
        headers.push(BatchHeader {
            base_offset,
            last_offset: base_offset + u64::from(last_offset_delta),
            partition_leader_epoch,
            records_count,
            size_bytes,
        });
        position += size_bytes;
    }
    Ok(headers)
}

/// Writes `base_offset` and `partition_leader_epoch` into a copy of `batch`. Both fields sit
/// outside the CRC, so the checksum stays valid. The host's log does this for
/// `Work::AppendAsLeader`; the simulator uses it too.
pub fn stamp_batch(batch: &[u8], base_offset: u64, leader_epoch: Epoch) -> Bytes {
    assert!(
        batch.len() >= BATCH_HEADER_SIZE_BYTES,
        "stamping a batch shorter than a header"
    );
    let mut out = BytesMut::from(batch);
    out[0..8].copy_from_slice(&base_offset.to_be_bytes());
    out[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
    out.freeze()
}

/// Builds a RecordBatch v2 with the given records (each `(key, value)`), base offset 0 and
/// epoch 0 (the leader stamps both). `control` sets the control attribute.
pub fn build_batch(records: &[KeyValue<'_>], control: bool, timestamp_ms: i64) -> Bytes {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let mut body = BytesMut::new();
    for (offset_delta, (key, value)) in records.iter().enumerate() {
        let mut record = BytesMut::new();
        record.put_i8(0); // attributes
        put_varlong(&mut record, 0); // timestampDelta
        put_varlong(&mut record, offset_delta as i64);
        put_nullable(&mut record, *key);
        put_nullable(&mut record, *value);
        put_varlong(&mut record, 0); // headers count
        put_varlong(&mut body, record.len() as i64);
        body.extend_from_slice(&record);
    }
    let mut batch = BytesMut::with_capacity(BATCH_HEADER_SIZE_BYTES + body.len());
    batch.put_i64(0); // baseOffset, stamped by the leader
    batch.put_i32((BATCH_HEADER_SIZE_BYTES - 12 + body.len()) as i32);
    batch.put_i32(0); // partitionLeaderEpoch, stamped by the leader
    batch.put_u8(MAGIC_V2);
    batch.put_u32(0); // crc, filled below
    batch.put_u16(if control { ATTRIBUTE_CONTROL } else { 0 });
    batch.put_i32(records.len() as i32 - 1); // lastOffsetDelta
    batch.put_i64(timestamp_ms);
    batch.put_i64(timestamp_ms);
    batch.put_i64(-1); // producerId
    batch.put_i16(-1); // producerEpoch
    batch.put_i32(-1); // baseSequence
    batch.put_i32(records.len() as i32);
    batch.extend_from_slice(&body);
    let crc = ringlog_engine::batch::header::compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch.freeze()
}

/// The LeaderChangeMessage control batch a new leader appends (KIP-595): LeaderId, Voters,
/// GrantingVoters, built by the engine's codec (`MemoryRecords.withLeaderChangeMessage`). Base
/// offset and epoch are 0: the host stamps them like any other batch.
pub fn leader_change_batch(
    leader_id: NodeId,
    voters: &[NodeId],
    granting_voters: &[NodeId],
) -> Bytes {
    use ringlog_engine::batch::control::{LeaderChangeMessage, build_leader_change_batch};
    let message = LeaderChangeMessage::new(leader_id, voters.to_vec(), granting_voters.to_vec());
    build_leader_change_batch(0, 0, 0, &message).into_bytes()
}

/// KIP-853's voter set control batch (`VotersRecord`, control type 6), written by the leader
/// when it adds or removes a voter. Base offset and epoch are 0: the host stamps them.
pub fn voters_batch(voters: &crate::voters::VoterSet, timestamp_ms: i64) -> Bytes {
    use ringlog_engine::batch::control::{ControlRecordKey, ControlRecordType};
    let key = ControlRecordKey::new(ControlRecordType::KRaftVoters).encode();
    let value = voters.encode_record_value();
    build_batch(&[(Some(&key[..]), Some(&value[..]))], true, timestamp_ms)
}

/// The first voter set of a log (kraft.version 0 → 1, KIP-853): one control batch holding a
/// `KRaftVersionRecord` (kraft.version 1) and then the `VotersRecord`, as Kafka's leader writes
/// them when the voter set moves into the log. The VotersRecord is at the base offset + 1.
pub fn first_voters_batch(voters: &crate::voters::VoterSet, timestamp_ms: i64) -> Bytes {
    use ringlog_engine::batch::control::{ControlRecordKey, ControlRecordType};
    let version_key = ControlRecordKey::new(ControlRecordType::KRaftVersion).encode();
    let version_value =
        crate::voters::encode_kraft_version_record(crate::voters::KRAFT_VERSION_DYNAMIC);
    let voters_key = ControlRecordKey::new(ControlRecordType::KRaftVoters).encode();
    let voters_value = voters.encode_record_value();
    build_batch(
        &[
            (Some(&version_key[..]), Some(&version_value[..])),
            (Some(&voters_key[..]), Some(&voters_value[..])),
        ],
        true,
        timestamp_ms,
    )
}

/// The `KRaftVersionRecord`s in `records` (as [`voter_sets_in`]): (offset, kraft.version).
pub fn kraft_versions_in(records: &Bytes) -> Result<Vec<(u64, i16)>, RaftError> {
    use ringlog_engine::batch::control::ControlRecordType;
    let mut found = Vec::new();
    for (offset, value) in control_values_in(records, ControlRecordType::KRaftVersion)? {
        let value = value.ok_or(RaftError::MalformedVotersRecord("no value"))?;
        found.push((offset, crate::voters::decode_kraft_version_record(&value)?));
    }
    Ok(found)
}

/// The voter sets in `records` (consecutive stamped batches, e.g. a Fetch response or a
/// snapshot's batches), with the offset of each record. Only control batches are opened; a
/// control batch that does not parse, or a `VotersRecord` that does not decode, is a typed
/// error, so a response carrying one is rejected whole.
pub fn voter_sets_in(records: &Bytes) -> Result<Vec<(u64, crate::voters::VoterSet)>, RaftError> {
    use ringlog_engine::batch::control::ControlRecordType;
    let mut found = Vec::new();
    for (offset, value) in control_values_in(records, ControlRecordType::KRaftVoters)? {
        let value = value.ok_or(RaftError::MalformedVotersRecord("no value"))?;
        found.push((
            offset,
            crate::voters::VoterSet::decode_record_value(&value)?,
        ));
    }
    Ok(found)
}

/// The (offset, value) of every control record of `record_type` in `records`.
fn control_values_in(
    records: &Bytes,
    record_type: ringlog_engine::batch::control::ControlRecordType,
) -> Result<Vec<(u64, Option<Bytes>)>, RaftError> {
    use ringlog_engine::batch::RecordBatch;
    use ringlog_engine::batch::control::ControlRecord;
    let mut found = Vec::new();
    let mut position = 0usize;
    for header in parse_batch_headers(records, false)? {
        let batch = records.slice(position..position + header.size_bytes);
        let at = position;
        position += header.size_bytes;
        if !is_control_batch(&batch) {
            continue;
        }
        let unreadable = |_| RaftError::MalformedBatch {
            position: at,
            reason: "control batch does not parse",
        };
        let parsed = RecordBatch::parse(batch).map_err(unreadable)?;
        for record in parsed.control_records().map_err(unreadable)? {
            let (offset, record) = record.map_err(unreadable)?;
            if let ControlRecord::Other { key, value } = record
                && key.record_type == record_type
            {
                found.push((offset as u64, value));
            }
        }
    }
    Ok(found)
}

/// Whether a batch is a control batch (attributes bit 5).
pub fn is_control_batch(batch: &[u8]) -> bool {
    batch.len() >= BATCH_HEADER_SIZE_BYTES
        && u16::from_be_bytes([batch[21], batch[22]]) & ATTRIBUTE_CONTROL != 0
}

fn put_nullable(out: &mut BytesMut, data: Option<&[u8]>) {
    match data {
        None => put_varlong(out, -1),
        Some(d) => {
            put_varlong(out, d.len() as i64);
            out.extend_from_slice(d);
        }
    }
}

fn put_varlong(out: &mut BytesMut, value: i64) {
    put_unsigned_varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_unsigned_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_batches_parse_back_and_stamping_keeps_the_crc() {
        let a = build_batch(&[(None, Some(b"x")), (None, Some(b"y"))], false, 5);
        let b = stamp_batch(&leader_change_batch(1, &[1, 2, 3], &[1, 2]), 2, 7);
        let mut both = BytesMut::new();
        both.extend_from_slice(&a);
        both.extend_from_slice(&b);
        let headers = batch_headers(&both).unwrap();
        assert_eq!(headers.len(), 2);
        assert_eq!(
            (
                headers[0].base_offset,
                headers[0].last_offset,
                headers[0].records_count
            ),
            (0, 1, 2)
        );
        assert_eq!(
            (
                headers[1].base_offset,
                headers[1].last_offset,
                headers[1].partition_leader_epoch
            ),
            (2, 2, 7)
        );
        assert!(is_control_batch(&b) && !is_control_batch(&a));
        assert_eq!(
            ringlog_engine::batch::header::compute_crc(&b).to_be_bytes(),
            b[17..21]
        );
    }

    #[test]
    fn malformed_batches_are_typed_errors() {
        let a = build_batch(&[(None, Some(b"x"))], false, 0);
        assert!(matches!(
            batch_headers(&a[..30]),
            Err(RaftError::MalformedBatch { .. })
        ));
        let mut bad_magic = BytesMut::from(&a[..]);
        bad_magic[16] = 1;
        assert!(batch_headers(&bad_magic).is_err());
        let mut bad_len = BytesMut::from(&a[..]);
        bad_len[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(batch_headers(&bad_len).is_err());
        assert_eq!(batch_headers(&[]).unwrap(), vec![]);
    }
}
