//! Property tests of the RecordBatch v2 codec: arbitrary batches round-trip through build, parse,
//! split and iterate; every single-bit flip is caught, by the CRC and structure checks inside the
//! CRC-covered range and by the chain validator in baseOffset / partitionLeaderEpoch.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use ringlog_engine::batch::control::{
    ControlRecord, ControlRecordKey, ControlRecordType, LeaderChangeMessage, SnapshotFooterRecord,
    SnapshotHeaderRecord, build_control_batch,
};
use ringlog_engine::batch::{
    BatchChainValidator, BatchError, RecordBatch, RecordBatchBuilder, TimestampType, batches,
};

type Headers = Vec<(String, Option<Vec<u8>>)>;

#[derive(Clone, Debug)]
struct RecordSpec {
    timestamp_ms: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Headers,
}

#[derive(Clone, Debug)]
struct BatchSpec {
    base_offset: i64,
    leader_epoch: i32,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    records: Vec<RecordSpec>,
}

fn bytes(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..max))
}

fn record_spec() -> impl Strategy<Value = RecordSpec> {
    (
        any::<i64>(),
        bytes(64),
        bytes(300),
        proptest::collection::vec((".{0,8}", bytes(16)), 0..4),
    )
        .prop_map(|(timestamp_ms, key, value, headers)| RecordSpec {
            timestamp_ms,
            key,
            value,
            headers,
        })
}

fn batch_spec(max_records: usize) -> impl Strategy<Value = BatchSpec> {
    (
        0i64..1 << 62,
        any::<i32>(),
        proptest::option::of((any::<i64>(), any::<i16>(), any::<i32>())),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(any::<i64>()),
        proptest::collection::vec(record_spec(), 0..max_records),
    )
        .prop_map(
            |(
                base_offset,
                leader_epoch,
                producer,
                transactional,
                control,
                log_append_time,
                records,
            )| {
                BatchSpec {
                    base_offset,
                    leader_epoch,
                    producer,
                    transactional,
                    control,
                    log_append_time,
                    records,
                }
            },
        )
}

fn build(spec: &BatchSpec) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(spec.base_offset)
        .with_leader_epoch(spec.leader_epoch)
        .with_transactional(spec.transactional)
        .with_control(spec.control);
    if let Some((id, epoch, sequence)) = spec.producer {
        builder = builder.with_producer(id, epoch, sequence);
    }
    if let Some(time) = spec.log_append_time {
        builder = builder.with_log_append_time(time);
    }
    for r in &spec.records {
        let headers: Vec<(&str, Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        builder.append(
            r.timestamp_ms,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        );
    }
    builder.build()
}

/// Asserts that `batch` holds exactly what `spec` describes.
fn check_matches(batch: &RecordBatch, spec: &BatchSpec) -> Result<(), TestCaseError> {
    let header = batch.header();
    let n = spec.records.len();
    prop_assert_eq!(batch.base_offset(), spec.base_offset);
    prop_assert_eq!(batch.partition_leader_epoch(), spec.leader_epoch);
    prop_assert_eq!(batch.records_count() as usize, n);
    prop_assert_eq!(batch.is_control(), spec.control);
    prop_assert_eq!(batch.is_transactional(), spec.transactional);
    prop_assert_eq!(
        batch.last_offset(),
        spec.base_offset + (n.max(1) as i64 - 1)
    );
    let (id, epoch, sequence) = spec.producer.unwrap_or((-1, -1, -1));
    prop_assert_eq!(
        (
            header.producer_id(),
            header.producer_epoch(),
            header.base_sequence()
        ),
        (id, epoch, sequence)
    );
    let first = spec.records.first().map_or(-1, |r| r.timestamp_ms);
    prop_assert_eq!(header.base_timestamp(), first);
    let max = spec
        .records
        .iter()
        .map(|r| r.timestamp_ms)
        .max()
        .unwrap_or(-1);
    prop_assert_eq!(header.max_timestamp(), spec.log_append_time.unwrap_or(max));
    prop_assert_eq!(
        header.timestamp_type(),
        if spec.log_append_time.is_some() {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    );
    let records: Vec<_> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
    prop_assert_eq!(records.len(), n);
    for (i, (record, want)) in records.iter().zip(&spec.records).enumerate() {
        prop_assert_eq!(record.offset(), spec.base_offset + i as i64);
        prop_assert_eq!(
            record.timestamp(),
            spec.log_append_time.unwrap_or(want.timestamp_ms)
        );
        prop_assert_eq!(record.key().map(|k| k.to_vec()), want.key.clone());
        prop_assert_eq!(record.value().map(|v| v.to_vec()), want.value.clone());
        let headers: Headers = record
            .headers()
            .iter()
            .map(|h| (h.key_str().unwrap().to_owned(), h.value.map(|v| v.to_vec())))
            .collect();
        prop_assert_eq!(&headers, &want.headers);
        if sequence >= 0 {
            // Kafka's incrementSequence: wraps from i32::MAX to 0.
            let expected = ((i64::from(sequence) + i as i64) % (i64::from(i32::MAX) + 1)) as i32;
            prop_assert_eq!(record.sequence(), expected);
        } else {
            prop_assert_eq!(record.sequence(), -1);
        }
    }
    Ok(())
}

/// Every error a flipped bit inside bytes 8.. may cause when parsing one batch.
fn is_detected(result: &Result<RecordBatch, BatchError>) -> bool {
    matches!(
        result,
        Err(BatchError::CrcMismatch { .. }
            | BatchError::BadMagic { .. }
            | BatchError::LengthBelowMinimum { .. }
            | BatchError::Oversize { .. }
            | BatchError::ShortBuffer { .. }
            | BatchError::SizeMismatch { .. })
    )
}

fn flip(bytes: &Bytes, bit: usize) -> Bytes {
    let mut copy = BytesMut::from(&bytes[..]);
    copy[bit / 8] ^= 1 << (bit % 8);
    copy.freeze()
}

/// Byte ranges outside the CRC that only the chain validator can check.
const BASE_OFFSET_BITS: std::ops::Range<usize> = 0..64;
const LEADER_EPOCH_BITS: std::ops::Range<usize> = 96..128;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_batches_round_trip(spec in batch_spec(50)) {
        let batch = build(&spec);
        check_matches(&batch, &spec)?;
        let parsed = RecordBatch::parse(batch.as_bytes().clone()).unwrap();
        prop_assert_eq!(&parsed, &batch);
        check_matches(&parsed, &spec)?;
    }

    /// Several batches back to back split into exactly those batches, at the right positions.
    #[test]
    fn concatenated_batches_split_back(specs in proptest::collection::vec(batch_spec(6), 1..6)) {
        let built: Vec<RecordBatch> = specs.iter().map(build).collect();
        let mut buf = BytesMut::new();
        let mut positions = Vec::new();
        for b in &built {
            positions.push(buf.len() as u64);
            buf.extend_from_slice(b.as_bytes());
        }
        let buf = buf.freeze();
        let split: Vec<RecordBatch> = batches(&buf).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&split, &built);
        for ((batch, spec), position) in split.iter().zip(&specs).zip(positions) {
            prop_assert_eq!(batch.position(), position);
            check_matches(batch, spec)?;
        }
    }

    /// Any bit flipped from batchLength to the end makes parse fail with a corruption error.
    #[test]
    fn random_bit_flips_inside_the_checked_range_are_detected(
        spec in batch_spec(20),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 32),
    ) {
        let batch = build(&spec);
        let bytes = batch.as_bytes();
        let checked_bits = 64..bytes.len() * 8;
        for pick in picks {
            let bit = checked_bits.start + pick.index(checked_bits.len());
            if LEADER_EPOCH_BITS.contains(&bit) {
                continue;
            }
            let result = RecordBatch::parse(flip(bytes, bit));
            prop_assert!(is_detected(&result), "bit {} undetected: {:?}", bit, result);
        }
    }

    /// Flips in baseOffset of any batch but the first break offset continuity.
    #[test]
    fn base_offset_flips_are_caught_by_the_chain(
        specs in proptest::collection::vec(batch_spec(4), 2..5),
        pick in any::<prop::sample::Index>(),
        bit in BASE_OFFSET_BITS,
    ) {
        let chain = contiguous_chain(&specs, 7);
        let victim = 1 + pick.index(chain.len() - 1);
        let result = validate_chain_with_flip(&chain, victim, bit, None);
        prop_assert!(
            matches!(result, Err(BatchError::OffsetNotContinuous { .. } | BatchError::InvalidOffsetRange { .. })),
            "{:?}", result
        );
    }

    /// Flips in partitionLeaderEpoch: with the quorum's current epoch as an upper bound every
    /// flip is caught in the batch itself; without it, a raised epoch is caught at the next batch.
    #[test]
    fn leader_epoch_flips_are_caught_by_the_chain(
        specs in proptest::collection::vec(batch_spec(4), 2..5),
        pick in any::<prop::sample::Index>(),
        bit in LEADER_EPOCH_BITS,
    ) {
        let chain = contiguous_chain(&specs, 7);
        let victim = pick.index(chain.len());
        let bounded = validate_chain_with_flip(&chain, victim, bit, Some(7));
        prop_assert!(
            matches!(bounded, Err(BatchError::EpochWentBackwards { .. } | BatchError::EpochAboveCurrent { .. })),
            "{:?}", bounded
        );
        if victim + 1 < chain.len() {
            let unbounded = validate_chain_with_flip(&chain, victim, bit, None);
            prop_assert!(matches!(unbounded, Err(BatchError::EpochWentBackwards { .. })), "{:?}", unbounded);
        }
    }

    /// Control records of every kind survive build_control_batch and control_records.
    #[test]
    fn control_batches_round_trip(
        records in proptest::collection::vec(control_record(), 1..6),
        base_offset in 0i64..1 << 50,
        epoch in 0i32..1 << 20,
        timestamp in any::<i64>(),
    ) {
        let batch = build_control_batch(base_offset, epoch, timestamp, &records);
        let batch = RecordBatch::parse(batch.into_bytes()).unwrap();
        prop_assert!(batch.is_control());
        let decoded: Vec<_> = batch.control_records().unwrap().collect::<Result<_, _>>().unwrap();
        let expected: Vec<_> = records.into_iter().enumerate().map(|(i, r)| (base_offset + i as i64, r)).collect();
        prop_assert_eq!(decoded, expected);
    }
}

fn control_record() -> impl Strategy<Value = ControlRecord> {
    let ids = || proptest::collection::vec(any::<i32>(), 0..8);
    prop_oneof![
        (any::<i32>(), ids(), ids())
            .prop_map(|(l, v, g)| ControlRecord::LeaderChange(LeaderChangeMessage::new(l, v, g))),
        any::<i64>().prop_map(|t| ControlRecord::SnapshotHeader(SnapshotHeaderRecord::new(t))),
        Just(ControlRecord::SnapshotFooter(SnapshotFooterRecord::new())),
        (
            prop_oneof![Just(0i16), Just(1), Just(5), Just(6), 7i16..i16::MAX],
            bytes(20)
        )
            .prop_map(|(id, value)| ControlRecord::Other {
                key: ControlRecordKey::new(ControlRecordType::from_id(id)),
                value: value.map(Bytes::from),
            }),
    ]
}

/// The batches of `specs`, restamped to follow each other from offset 0, all in `epoch`.
fn contiguous_chain(specs: &[BatchSpec], epoch: i32) -> Vec<RecordBatch> {
    let mut next = 0;
    specs
        .iter()
        .map(|spec| {
            let batch = build(spec).into_stamped(next, epoch);
            next = batch.next_offset();
            batch
        })
        .collect()
}

/// Runs the chain validator over `chain` with one bit of batch `victim` flipped. The flipped
/// batch must still pass parse (the bit is outside the CRC); returns the validator's verdict.
fn validate_chain_with_flip(
    chain: &[RecordBatch],
    victim: usize,
    bit: usize,
    max_epoch: Option<i32>,
) -> Result<(), BatchError> {
    let mut validator = BatchChainValidator::expecting(0, chain[0].partition_leader_epoch());
    if let Some(max) = max_epoch {
        validator = validator.with_max_epoch(max);
    }
    for (i, batch) in chain.iter().enumerate() {
        let batch = if i == victim {
            RecordBatch::parse(flip(batch.as_bytes(), bit)).expect("outside the CRC: parse passes")
        } else {
            batch.clone()
        };
        validator.check(&batch)?;
    }
    Ok(())
}

/// Every bit of a few small batches, exhaustively: inside the checked range parse fails; in
/// baseOffset and partitionLeaderEpoch parse passes and the chain validator fails.
#[test]
fn every_bit_flip_of_small_batches_is_detected() {
    let mut one = RecordBatchBuilder::new(0);
    one.append(1_000, Some(b"k"), Some(b"v"), &[]);
    let mut three = RecordBatchBuilder::new(0).with_producer(77, 1, 5);
    three.append(5, None, Some(b"first"), &[("h", Some(b"x"))]);
    three.append(3, Some(b"key"), None, &[]);
    three.append(
        1 << 40,
        Some(b""),
        Some(b"third value"),
        &[("a", None), ("b", Some(b""))],
    );
    let samples = [
        RecordBatchBuilder::new(0).build(),
        one.build(),
        three.build(),
        ringlog_engine::batch::control::build_leader_change_batch(
            0,
            7,
            1,
            &LeaderChangeMessage::new(1, vec![1, 2, 3], vec![1, 2]),
        ),
    ];
    for sample in samples {
        // Two copies so that the second batch's continuity and epoch are checked.
        let first = sample.clone().into_stamped(0, 7);
        let second = sample.clone().into_stamped(first.next_offset(), 7);
        let bytes = second.as_bytes();
        for bit in 0..bytes.len() * 8 {
            let flipped = flip(bytes, bit);
            if BASE_OFFSET_BITS.contains(&bit) || LEADER_EPOCH_BITS.contains(&bit) {
                let parsed = RecordBatch::parse(flipped).expect("outside the CRC");
                let mut chain = BatchChainValidator::new().with_max_epoch(7);
                chain.check(&first).unwrap();
                let verdict = chain.check(&parsed);
                assert!(
                    verdict.is_err(),
                    "bit {bit} of a {}-byte batch passed the chain",
                    bytes.len()
                );
            } else {
                let result = RecordBatch::parse(flipped);
                assert!(is_detected(&result), "bit {bit} undetected: {result:?}");
            }
        }
    }
}

/// A record iterator that meets bytes inconsistent with the header reports which consistency
/// rule broke. The batches are built with correct CRCs so that the record checks are reached.
#[test]
fn records_inconsistent_with_the_header_are_typed_errors() {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(1, Some(b"a"), Some(b"b"), &[]);
    builder.append(2, Some(b"c"), Some(b"d"), &[]);
    let good = builder.build();

    let with_header = |edit: &dyn Fn(&mut BytesMut)| {
        let mut bytes = BytesMut::from(&good.as_bytes()[..]);
        edit(&mut bytes);
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let batch = RecordBatch::parse(bytes.freeze()).expect("CRC recomputed");
        batch.records().unwrap().find_map(Result::err)
    };
    // recordsCount says 3, the bytes hold 2.
    assert_eq!(
        with_header(&|b| b[57..61].copy_from_slice(&3i32.to_be_bytes())),
        Some(BatchError::RecordsEndedEarly {
            position: 0,
            declared: 3,
            found: 2
        })
    );
    // recordsCount says 1: the second record's bytes are left over.
    assert!(matches!(
        with_header(&|b| b[57..61].copy_from_slice(&1i32.to_be_bytes())),
        Some(BatchError::TrailingBytesAfterRecords { declared: 1, .. })
    ));
    // lastOffsetDelta says 5, the last record has delta 1.
    assert_eq!(
        with_header(&|b| b[23..27].copy_from_slice(&5i32.to_be_bytes())),
        Some(BatchError::LastOffsetDeltaMismatch {
            position: 0,
            declared: 5,
            found: 1
        })
    );
    // lastOffsetDelta says 0: the second record's delta 1 is beyond it.
    assert!(matches!(
        with_header(&|b| b[23..27].copy_from_slice(&0i32.to_be_bytes())),
        Some(BatchError::OffsetDeltaOutOfOrder {
            record_index: 1,
            found: 1,
            ..
        })
    ));
    // A codec in attributes over uncompressed records: header and CRC still validate, the
    // records are refused (gzip: not a gzip stream; 5: no such codec).
    let with_codec = |codec: u8| {
        let mut bytes = BytesMut::from(&good.as_bytes()[..]);
        bytes[22] |= codec;
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        RecordBatch::parse(bytes.freeze()).expect("header and CRC are fine")
    };
    let gzip = with_codec(1);
    assert!(matches!(
        gzip.records(),
        Err(BatchError::Decompression { codec: 1, .. })
    ));
    assert!(matches!(
        gzip.control_records(),
        Err(BatchError::NotControlBatch { .. })
    ));
    assert!(matches!(
        with_codec(5).records(),
        Err(BatchError::UnsupportedCompression { codec: 5, .. })
    ));
}
