//! Hand-written cases for the RecordBatch v2 codec: builder -> parse -> records, splitting,
//! truncation, chain validation and the typed errors.

use bytes::{Bytes, BytesMut};
use ringlog_engine::batch::{
    BatchChainValidator, BatchError, BatchIter, DEFAULT_MAX_BATCH_SIZE_BYTES,
    RECORD_BATCH_OVERHEAD, RecordBatch, RecordBatchBuilder, batches, find_next_valid_batch,
    stamp_base_offset, stamp_partition_leader_epoch,
};

fn three_record_batch(base_offset: i64, epoch: i32) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(base_offset).with_leader_epoch(epoch);
    builder.append(1_000, Some(b"k0"), Some(b"v0"), &[]);
    builder.append(
        999,
        None,
        Some(b"value one"),
        &[("trace", Some(b"abc")), ("n", None)],
    );
    builder.append(1_005, Some(b""), None, &[]);
    builder.build()
}

#[test]
fn built_batch_parses_and_iterates_identically() {
    let batch = three_record_batch(40, 7);
    let parsed = RecordBatch::parse(batch.as_bytes().clone()).expect("valid");
    assert_eq!(parsed.base_offset(), 40);
    assert_eq!(parsed.last_offset(), 42);
    assert_eq!(parsed.partition_leader_epoch(), 7);
    assert_eq!(parsed.records_count(), 3);
    assert!(!parsed.is_control());
    assert_eq!(parsed.header().base_timestamp(), 1_000);
    assert_eq!(parsed.header().max_timestamp(), 1_005);
    let records: Vec<_> = parsed.records().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].offset(), 40);
    assert_eq!(records[0].key().map(|k| &k[..]), Some(&b"k0"[..]));
    assert_eq!(records[1].timestamp(), 999);
    assert_eq!(records[1].key(), None);
    let headers: Vec<_> = records[1].headers().iter().collect();
    assert_eq!(headers.len(), 2);
    assert_eq!(headers[0].key_str(), Some("trace"));
    assert_eq!(headers[0].value.as_deref(), Some(&b"abc"[..]));
    assert_eq!(headers[1].value, None);
    assert_eq!(records[2].key().map(|k| k.len()), Some(0));
    assert_eq!(records[2].value(), None);
    assert_eq!(records[2].offset(), 42);
}

#[test]
fn record_values_are_slices_of_the_batch_not_copies() {
    let batch = three_record_batch(0, 0);
    let bytes = batch.as_bytes();
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    for record in batch.records().unwrap() {
        let record = record.unwrap();
        if let Some(value) = record.value() {
            assert!(range.contains(&(value.as_ptr() as usize)));
        }
    }
}

#[test]
fn stamping_offset_and_epoch_keeps_the_crc_valid() {
    let batch = three_record_batch(0, 0);
    let crc = batch.crc();
    let mut bytes = BytesMut::from(&batch.as_bytes()[..]);
    stamp_base_offset(&mut bytes, 1_000_000);
    stamp_partition_leader_epoch(&mut bytes, 12);
    let stamped = RecordBatch::parse(bytes.freeze()).expect("stamped batch still valid");
    assert_eq!(stamped.base_offset(), 1_000_000);
    assert_eq!(stamped.last_offset(), 1_000_002);
    assert_eq!(stamped.partition_leader_epoch(), 12);
    assert_eq!(stamped.crc(), crc);
    let again = batch.into_stamped(5, 6);
    assert_eq!(
        (again.base_offset(), again.partition_leader_epoch()),
        (5, 6)
    );
    assert_eq!(
        again.records().unwrap().next().unwrap().unwrap().offset(),
        5
    );
}

#[test]
fn splitting_yields_each_batch_and_reports_a_torn_tail() {
    let a = three_record_batch(0, 1);
    let b = three_record_batch(3, 1);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(a.as_bytes());
    buf.extend_from_slice(b.as_bytes());
    let whole = buf.clone().freeze();
    let split: Vec<_> = batches(&whole).collect::<Result<_, _>>().unwrap();
    assert_eq!(
        split,
        vec![a.clone(), RecordBatch::parse(b.as_bytes().clone()).unwrap()]
    );
    assert_eq!(split[1].position(), a.size_bytes() as u64);

    // Every cut inside the second batch is a torn tail, never corruption.
    for cut in 1..b.size_bytes() {
        let torn = whole.slice(..a.size_bytes() + cut);
        let mut iter = batches(&torn);
        assert_eq!(iter.next(), Some(Ok(a.clone())));
        let error = iter.next().unwrap().unwrap_err();
        assert!(error.is_truncated(), "cut {cut}: {error}");
        assert_eq!(error.position(), a.size_bytes() as u64);
        assert_eq!(iter.next(), None);
    }
}

#[test]
fn corrupt_length_and_magic_are_not_mistaken_for_a_torn_tail() {
    let a = three_record_batch(0, 1);
    let mut bad_magic = BytesMut::from(&a.as_bytes()[..]);
    bad_magic[16] = 1;
    let bad_magic = bad_magic.freeze();
    assert_eq!(
        batches(&bad_magic.slice(..20)).next(),
        Some(Err(BatchError::BadMagic {
            position: 0,
            magic: 1
        }))
    );
    let mut huge = BytesMut::from(&a.as_bytes()[..]);
    huge[8] = 0x7f;
    let huge = huge.freeze();
    assert!(matches!(
        BatchIter::new(huge.clone()).next(),
        Some(Err(BatchError::Oversize { position: 0, .. }))
    ));
    let mut tiny = BytesMut::from(&a.as_bytes()[..]);
    tiny[8..12].copy_from_slice(&48i32.to_be_bytes());
    assert_eq!(
        batches(&tiny.freeze()).next(),
        Some(Err(BatchError::LengthBelowMinimum {
            position: 0,
            batch_length: 48
        }))
    );
}

#[test]
fn crc_mismatch_reports_stored_and_computed() {
    let a = three_record_batch(0, 1);
    let mut bytes = BytesMut::from(&a.as_bytes()[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    match RecordBatch::parse(bytes.freeze()) {
        Err(BatchError::CrcMismatch {
            position: 0,
            expected,
            actual,
        }) => {
            assert_eq!(expected, a.crc());
            assert_ne!(actual, expected);
        }
        other => panic!("expected a CRC mismatch, got {other:?}"),
    }
}

/// `already_validated` frames batches without their CRC: a flipped payload bit passes (the
/// caller vouched for the bytes), while a plain iterator still reports it; the frame is still
/// checked, so a torn tail ends it with an error either way.
#[test]
fn already_validated_skips_only_the_crc() {
    let a = three_record_batch(0, 1);
    let b = three_record_batch(3, 1);
    let mut bytes = BytesMut::from(&a.as_bytes()[..]);
    bytes.extend_from_slice(b.as_bytes());
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let bytes = bytes.freeze();
    let checked: Vec<_> = BatchIter::new(bytes.clone()).collect();
    assert!(matches!(checked[1], Err(BatchError::CrcMismatch { .. })));
    let framed: Vec<_> = BatchIter::new(bytes.clone())
        .already_validated()
        .map(|batch| batch.expect("framed").base_offset())
        .collect();
    assert_eq!(framed, vec![0, 3]);
    let torn = bytes.slice(..bytes.len() - 5);
    let framed: Vec<_> = BatchIter::new(torn).already_validated().collect();
    assert!(matches!(framed[1], Err(BatchError::Truncated { .. })));
}

#[test]
fn parse_wants_exactly_one_batch() {
    let a = three_record_batch(0, 1);
    let bytes = a.as_bytes();
    assert!(matches!(
        RecordBatch::parse(bytes.slice(..RECORD_BATCH_OVERHEAD - 1)),
        Err(BatchError::ShortBuffer { position: 0, .. })
    ));
    let mut longer = BytesMut::from(&bytes[..]);
    longer.extend_from_slice(&[0]);
    assert!(matches!(
        RecordBatch::parse(longer.freeze()),
        Err(BatchError::SizeMismatch { .. })
    ));
    assert!(matches!(
        RecordBatch::parse(Bytes::new()),
        Err(BatchError::ShortBuffer { .. })
    ));
}

#[test]
fn chain_validator_requires_continuous_offsets_and_monotonic_epochs() {
    let mut chain = BatchChainValidator::new();
    chain.check(&three_record_batch(10, 2)).unwrap();
    chain.check(&three_record_batch(13, 2)).unwrap();
    assert_eq!(
        chain.check(&three_record_batch(17, 3)),
        Err(BatchError::OffsetNotContinuous {
            position: 0,
            expected: 16,
            found: 17
        })
    );
    assert_eq!(
        chain.check(&three_record_batch(16, 1)),
        Err(BatchError::EpochWentBackwards {
            position: 0,
            previous: 2,
            found: 1
        })
    );
    chain.check(&three_record_batch(16, 3)).unwrap();
    assert_eq!(chain.next_offset(), Some(19));

    let mut bounded = BatchChainValidator::expecting(19, 3).with_max_epoch(3);
    assert_eq!(
        bounded.check(&three_record_batch(19, 4)),
        Err(BatchError::EpochAboveCurrent {
            position: 0,
            current: 3,
            found: 4
        })
    );
}

/// A flipped high bit in a middle batch's length makes it look like a torn tail; the scan for a
/// later valid batch shows it is interior corruption instead.
#[test]
fn a_valid_batch_after_a_bad_one_reveals_interior_corruption() {
    let a = three_record_batch(0, 1);
    let b = three_record_batch(3, 1);
    let c = three_record_batch(6, 1);
    let mut buf = BytesMut::new();
    for batch in [&a, &b, &c] {
        buf.extend_from_slice(batch.as_bytes());
    }
    let b_position = a.size_bytes();
    buf[b_position + 9] ^= 0x10; // batchLength + 1 MiB
    let buf = buf.freeze();
    let mut iter = batches(&buf);
    assert_eq!(iter.next(), Some(Ok(a.clone())));
    let error = iter.next().unwrap().unwrap_err();
    assert!(error.is_truncated(), "{error}");
    let found = find_next_valid_batch(&buf, b_position + 1, DEFAULT_MAX_BATCH_SIZE_BYTES)
        .expect("batch c is still there");
    assert_eq!(found, c);
    assert_eq!(found.position(), (a.size_bytes() + b.size_bytes()) as u64);

    // A real torn tail has nothing valid after it.
    let torn = buf.slice(..a.size_bytes() + 30);
    assert_eq!(
        find_next_valid_batch(&torn, 1, DEFAULT_MAX_BATCH_SIZE_BYTES),
        None
    );
}
