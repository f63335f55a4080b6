//! Produce validation: a Produce partition's records split into batches and each checked before
//! anything is stored (frame, magic, CRC, size, not a control batch, offsets that add up, records
//! readable, compressed ones decompressed within the bound). Nothing a state machine, a consumer
//! or the next start cannot read is ever appended.

use bytes::Bytes;
use ringlog_engine::batch::{BatchError, BatchIter, RecordBatch};

use crate::protocol::ErrorCode;

/// Why a Produce batch is refused before anything is stored.
fn batch_error_code(error: &BatchError) -> ErrorCode {
    match error {
        BatchError::Oversize { .. } => ErrorCode::MessageTooLarge,
        BatchError::CrcMismatch { .. }
        | BatchError::ShortBuffer { .. }
        | BatchError::Truncated { .. }
        | BatchError::SizeMismatch { .. }
        | BatchError::LengthBelowMinimum { .. } => ErrorCode::CorruptMessage,
        _ => ErrorCode::InvalidRecord,
    }
}

/// Splits a Produce partition's records into batches, checking each one (frame, magic, CRC,
/// size ≤ message.max.bytes, not a control batch, at least one record).
pub(crate) fn validate_produce_records(
    records: Option<&Bytes>,
    message_max_bytes: usize,
) -> Result<Vec<Bytes>, (ErrorCode, String)> {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err((ErrorCode::InvalidRecord, "no record batch".into()));
    };
    let mut batches = Vec::new();
    for batch in BatchIter::new(records.clone()).with_max_batch_size_bytes(message_max_bytes) {
        let batch = batch.map_err(|e| (batch_error_code(&e), e.to_string()))?;
        if batch.size_bytes() > message_max_bytes {
            return Err((
                ErrorCode::MessageTooLarge,
                format!(
                    "batch of {} bytes exceeds message.max.bytes",
                    batch.size_bytes()
                ),
            ));
        }
        if batch.is_control() {
            return Err((
                ErrorCode::InvalidRecord,
                "clients may not write control batches".into(),
            ));
        }
        if batch.records_count() <= 0 {
            return Err((ErrorCode::InvalidRecord, "a batch without records".into()));
        }
        // Kafka's rule for v2 batches from clients (LogValidator): baseOffset 0. The leader
        // stamps the real offsets (and the epoch over the client's -1) as it appends.
        let base_offset = batch.header().base_offset();
        if base_offset != 0 {
            return Err((
                ErrorCode::InvalidRecord,
                format!("the baseOffset of a record batch must be 0, not {base_offset}"),
            ));
        }
        check_record_offsets(&batch)?;
        // A slice of the request: not copied here (the append's one copy stamps it).
        batches.push(batch.into_bytes());
    }
    Ok(batches)
}

/// The records without a key among a Produce partition's validated batches, by their index
/// among its records (Kafka's BatchIndex): a topic whose `cleanup.policy` includes `compact`
/// takes none of them, and Kafka answers INVALID_RECORD naming each in RecordErrors.
pub(crate) fn keyless_records(batches: &[Bytes]) -> Result<Vec<i32>, (ErrorCode, String)> {
    let mut keyless = Vec::new();
    let mut index = 0i32;
    for bytes in batches {
        let batch = RecordBatch::parse(bytes.clone())
            .map_err(|e| (ErrorCode::CorruptMessage, e.to_string()))?;
        let records = batch
            .records()
            .map_err(|e| (records_error_code(&e), e.to_string()))?;
        for record in records {
            let record = record.map_err(|e| (ErrorCode::CorruptMessage, e.to_string()))?;
            if record.key().is_none() {
                keyless.push(index);
            }
            index += 1;
        }
    }
    Ok(keyless)
}

/// A topic's `compression.type` applied to a Produce partition's validated batches: each batch
/// not already in `codec` is recompressed (its records unchanged, engine `recompressed`), as
/// Kafka's LogValidator does before the append; `codec` `None` (`producer`) keeps them as sent.
/// A recompressed batch must still fit `message_max_bytes` (MESSAGE_TOO_LARGE otherwise).
pub(crate) fn recompress_batches(
    batches: Vec<Bytes>,
    codec: Option<ringlog_engine::batch::Compression>,
    message_max_bytes: usize,
) -> Result<Vec<Bytes>, (ErrorCode, String)> {
    let Some(codec) = codec else {
        return Ok(batches);
    };
    batches
        .into_iter()
        .map(|bytes| {
            let batch = RecordBatch::parse(bytes)
                .map_err(|e| (ErrorCode::CorruptMessage, e.to_string()))?;
            if batch.compression() == codec {
                return Ok(batch.into_bytes());
            }
            let out = ringlog_engine::batch::record::recompressed(&batch, codec)
                .map_err(|e| (records_error_code(&e), e.to_string()))?;
            if out.len() > message_max_bytes {
                return Err((
                    ErrorCode::MessageTooLarge,
                    format!(
                        "batch of {} bytes after recompression exceeds message.max.bytes",
                        out.len()
                    ),
                ));
            }
            Ok(out)
        })
        .collect()
}

/// The batch's offsets must add up (Kafka's inner-offset check): lastOffsetDelta is the record
/// count minus one, and the records' offset deltas run 0, 1, … without a gap. Offsets are
/// stamped from these numbers, so a batch that lies about them would shift every later
/// offset.
///
/// A compressed batch is decompressed here (within `MAX_DECOMPRESSED_BATCH_BYTES`) and its
/// records checked the same way; it is then stored as sent. Every batch appended is one whose
/// records a state machine, a consumer and the next start can read: a committed batch that
/// cannot be read would stop every voter that applies it, at every restart.
fn check_record_offsets(batch: &RecordBatch) -> Result<(), (ErrorCode, String)> {
    let declared = batch.header().last_offset_delta();
    if i64::from(declared) != i64::from(batch.records_count()) - 1 {
        return Err((
            ErrorCode::InvalidRecord,
            format!(
                "lastOffsetDelta {declared} with {} records",
                batch.records_count()
            ),
        ));
    }
    let records = batch
        .records()
        .map_err(|e| (records_error_code(&e), e.to_string()))?;
    let mut expected = 0i32;
    for record in records {
        let record = record.map_err(|e| (ErrorCode::CorruptMessage, e.to_string()))?;
        if record.offset_delta() != expected {
            return Err((
                ErrorCode::InvalidRecord,
                format!(
                    "record offsetDelta {} where {expected} was due",
                    record.offset_delta()
                ),
            ));
        }
        expected += 1;
    }
    if expected != batch.records_count() {
        return Err((
            ErrorCode::InvalidRecord,
            format!(
                "{expected} records where the header says {}",
                batch.records_count()
            ),
        ));
    }
    Ok(())
}

/// Why a Produce batch's records cannot be read: a codec Kafka does not have (ids 5-7) is
/// UNSUPPORTED_COMPRESSION_TYPE; compressed bytes that do not decompress, or decompress past
/// the bound, and malformed records are CORRUPT_MESSAGE.
fn records_error_code(error: &BatchError) -> ErrorCode {
    match error {
        BatchError::UnsupportedCompression { .. } => ErrorCode::UnsupportedCompressionType,
        _ => ErrorCode::CorruptMessage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog_engine::batch::RecordBatchBuilder;

    fn batch(values: &[&[u8]]) -> Bytes {
        let mut builder = RecordBatchBuilder::new(0);
        for v in values {
            builder.append(0, None, Some(v), &[]);
        }
        builder.build().into_bytes()
    }

    #[test]
    fn produce_validation_accepts_good_batches_and_names_each_fault() {
        let good = batch(&[b"a", b"b"]);
        let two = Bytes::from([good.clone(), good.clone()].concat());
        assert_eq!(
            validate_produce_records(Some(&two), 1 << 20).unwrap().len(),
            2
        );

        let mut flipped = good.to_vec();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let code = validate_produce_records(Some(&Bytes::from(flipped)), 1 << 20)
            .unwrap_err()
            .0;
        assert_eq!(code, ErrorCode::CorruptMessage);

        let code = validate_produce_records(Some(&good), 70).unwrap_err().0;
        assert_eq!(code, ErrorCode::MessageTooLarge);

        let mut magic = good.to_vec();
        magic[16] = 1;
        let code = validate_produce_records(Some(&Bytes::from(magic)), 1 << 20)
            .unwrap_err()
            .0;
        assert!(
            matches!(code, ErrorCode::InvalidRecord | ErrorCode::CorruptMessage),
            "{code:?}"
        );

        let code = validate_produce_records(None, 1 << 20).unwrap_err().0;
        assert_eq!(code, ErrorCode::InvalidRecord);

        // baseOffset is outside the CRC: a client's must be 0 (Kafka's LogValidator), the
        // partitionLeaderEpoch may be anything (clients send -1; the leader stamps its own).
        let mut based = good.to_vec();
        based[0..8].copy_from_slice(&5i64.to_be_bytes());
        let code = validate_produce_records(Some(&Bytes::from(based)), 1 << 20)
            .unwrap_err()
            .0;
        assert_eq!(code, ErrorCode::InvalidRecord);
        let mut unstamped = good.to_vec();
        unstamped[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        let unstamped = Bytes::from(unstamped);
        let stored = validate_produce_records(Some(&unstamped), 1 << 20).unwrap();
        assert_eq!(stored, vec![unstamped.clone()], "stored as sent");
        assert_eq!(
            stored[0].as_ptr(),
            unstamped.as_ptr(),
            "a slice, not a copy"
        );
    }

    /// `batch`'s header with `section` as its records section and `codec` in its attributes,
    /// batchLength and CRC made to fit: only the section (or the codec) can be wrong.
    fn with_section(batch: &[u8], codec: u8, section: &[u8]) -> Bytes {
        use ringlog_engine::batch::{LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, header::compute_crc};
        let mut bytes = batch[..RECORD_BATCH_OVERHEAD].to_vec();
        bytes.extend_from_slice(section);
        let batch_length = i32::try_from(bytes.len() - LOG_OVERHEAD).unwrap();
        bytes[8..12].copy_from_slice(&batch_length.to_be_bytes());
        bytes[22] = (bytes[22] & !0x07) | codec;
        let crc = compute_crc(&bytes);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(bytes)
    }

    /// A compressed batch is decompressed and checked like any other before it is stored, and
    /// stored as sent; what cannot be read is refused with Kafka's codes: an unknown codec
    /// UNSUPPORTED_COMPRESSION_TYPE, bad compressed bytes or bad records inside
    /// CORRUPT_MESSAGE, offsets that do not add up INVALID_RECORD.
    #[test]
    fn produce_validation_reads_compressed_batches() {
        use ringlog_engine::batch::{Compression, RECORD_BATCH_OVERHEAD, compression};
        let validate = |bytes: Bytes| validate_produce_records(Some(&bytes), 1 << 20);
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut builder = RecordBatchBuilder::new(0).with_compression(codec);
            builder.append(0, None, Some(b"a"), &[]);
            builder.append(0, None, Some(b"b"), &[]);
            let sent = builder.build().into_bytes();
            let stored = validate(sent.clone()).unwrap();
            assert_eq!(stored.len(), 1, "{codec:?}");
            // Stored as sent (stamped only as the leader appends).
            assert_eq!(stored[0], sent, "{codec:?}");
        }

        let plain = batch(&[b"a", b"b"]);
        let records = &plain[RECORD_BATCH_OVERHEAD..];
        for codec in 5..=7 {
            let code = validate(with_section(&plain, codec, records))
                .unwrap_err()
                .0;
            assert_eq!(code, ErrorCode::UnsupportedCompressionType, "codec {codec}");
        }
        // Uncompressed records under the gzip id: not a gzip stream.
        let code = validate(with_section(&plain, 1, records)).unwrap_err().0;
        assert_eq!(code, ErrorCode::CorruptMessage);
        // A gzip stream cut short.
        let gzip = compression::compress(Compression::Gzip, records);
        let cut = &gzip[..gzip.len() - 5];
        let code = validate(with_section(&plain, 1, cut)).unwrap_err().0;
        assert_eq!(code, ErrorCode::CorruptMessage);
        // A valid stream whose records have garbage after them.
        let trailing = compression::compress(Compression::Zstd, &[records, b"junk"].concat());
        let code = validate(with_section(&plain, 4, &trailing)).unwrap_err().0;
        assert_eq!(code, ErrorCode::CorruptMessage);
        // lastOffsetDelta 5 for two records.
        let mut lying =
            with_section(&plain, 3, &compression::compress(Compression::Lz4, records)).to_vec();
        lying[23..27].copy_from_slice(&5i32.to_be_bytes());
        let lying = with_section(&lying, 3, &lying[RECORD_BATCH_OVERHEAD..]);
        let code = validate(lying).unwrap_err().0;
        assert_eq!(code, ErrorCode::InvalidRecord);
    }
}
