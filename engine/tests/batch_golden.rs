//! Byte-for-byte agreement with Kafka's RecordBatch v2 format: a batch laid out by hand from
//! `DefaultRecordBatch.java` / `DefaultRecord.java`, and a cross-check in both directions with an
//! independent implementation, the `kafka-protocol` crate (its `records` module and its generated
//! LeaderChangeMessage / SnapshotHeaderRecord / SnapshotFooterRecord).

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::{self as kp_messages, BrokerId};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTimestampType,
};
use proptest::prelude::*;
use ringlog_engine::batch::control::{
    ControlRecord, ControlRecordType, LeaderChangeMessage, SnapshotFooterRecord,
    SnapshotHeaderRecord, build_leader_change_batch, build_snapshot_footer_batch,
    build_snapshot_header_batch,
};
use ringlog_engine::batch::{RecordBatch, RecordBatchBuilder};

/// The CRC32C (Castagnoli) check value from the CRC catalogue: the polynomial Kafka's
/// `Crc32C` uses, not the zlib CRC-32.
#[test]
fn crc32c_is_castagnoli() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
}

/// One record, key "k", value "v", header ("h" -> null), laid out field by field from the spec.
#[test]
fn hand_built_batch_matches_the_spec_byte_for_byte() {
    let timestamp_ms: i64 = 1_600_000_000_123;
    #[rustfmt::skip]
    let record: &[u8] = &[
        0x16,                   // length varint: 11 bytes follow
        0x00,                   // attributes
        0x00,                   // timestampDelta varlong 0
        0x00,                   // offsetDelta varint 0
        0x02, b'k',             // key length 1 (zig-zag 2), key
        0x02, b'v',             // value length 1, value
        0x02,                   // 1 header
        0x02, b'h', 0x01,       // header key length 1, "h", value length -1 (null)
    ];
    let mut expected = Vec::new();
    expected.extend_from_slice(&42i64.to_be_bytes()); // baseOffset
    let batch_length = (61 - 12 + record.len()) as i32;
    expected.extend_from_slice(&batch_length.to_be_bytes()); // batchLength
    expected.extend_from_slice(&5i32.to_be_bytes()); // partitionLeaderEpoch
    expected.push(2); // magic
    expected.extend_from_slice(&[0; 4]); // crc, filled below
    expected.extend_from_slice(&0i16.to_be_bytes()); // attributes: none, CREATE_TIME
    expected.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
    expected.extend_from_slice(&timestamp_ms.to_be_bytes()); // baseTimestamp
    expected.extend_from_slice(&timestamp_ms.to_be_bytes()); // maxTimestamp
    expected.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
    expected.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
    expected.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
    expected.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
    assert_eq!(expected.len(), 61);
    expected.extend_from_slice(record);
    let crc = crc32c::crc32c(&expected[21..]);
    expected[17..21].copy_from_slice(&crc.to_be_bytes());

    let mut builder = RecordBatchBuilder::new(42).with_leader_epoch(5);
    builder.append(timestamp_ms, Some(b"k"), Some(b"v"), &[("h", None)]);
    let batch = builder.build();
    assert_eq!(&batch.as_bytes()[..], &expected[..]);
    assert_eq!(batch.crc(), crc);
    assert_eq!(RecordBatch::parse(Bytes::from(expected)), Ok(batch));
}

/// A control batch as `MemoryRecords.withLeaderChangeMessage` writes it, by hand.
#[test]
fn hand_built_leader_change_batch_matches_the_spec() {
    let message = LeaderChangeMessage::new(1, vec![1, 2, 3], vec![1, 3]);
    #[rustfmt::skip]
    let value: &[u8] = &[
        0x00, 0x00,                          // Version 0
        0x00, 0x00, 0x00, 0x01,              // LeaderId 1
        0x04,                                // Voters: compact array, 3 elements (N+1)
        0, 0, 0, 1, 0x00,                    //   VoterId 1, no tagged fields
        0, 0, 0, 2, 0x00,
        0, 0, 0, 3, 0x00,
        0x03,                                // GrantingVoters: 2 elements
        0, 0, 0, 1, 0x00,
        0, 0, 0, 3, 0x00,
        0x00,                                // no tagged fields
    ];
    assert_eq!(&message.encode()[..], value);
    let batch = build_leader_change_batch(100, 7, 1_234, &message);
    let header = batch.header();
    assert!(batch.is_control());
    assert!(!batch.is_transactional());
    assert_eq!(header.attributes(), 0x20);
    assert_eq!(header.producer_id(), -1);
    assert_eq!(header.producer_epoch(), -1);
    assert_eq!(header.base_sequence(), -1);
    assert_eq!(
        (header.base_timestamp(), header.max_timestamp()),
        (1_234, 1_234)
    );
    let record = batch.records().unwrap().next().unwrap().unwrap();
    assert_eq!(record.key().map(|k| &k[..]), Some(&[0u8, 0, 0, 2][..]));
    assert_eq!(record.value().map(|v| &v[..]), Some(value));
    assert!(record.headers().is_empty());
    let controls: Vec<_> = batch
        .control_records()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(controls, vec![(100, ControlRecord::LeaderChange(message))]);
}

#[test]
fn snapshot_header_and_footer_values_match_the_spec() {
    let header = SnapshotHeaderRecord::new(0x0102_0304_0506_0708);
    assert_eq!(
        &header.encode()[..],
        &[0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0][..],
        "Version, LastContainedLogTimestamp, no tagged fields"
    );
    assert_eq!(&SnapshotFooterRecord::new().encode()[..], &[0, 0, 0][..]);
    let header_batch = build_snapshot_header_batch(0, 3, 99, &header);
    let footer_batch = build_snapshot_footer_batch(1, 3, 99, &SnapshotFooterRecord::new());
    let key_type = |b: &RecordBatch| {
        let (_, record) = b.control_records().unwrap().next().unwrap().unwrap();
        record.record_type()
    };
    assert_eq!(key_type(&header_batch), ControlRecordType::SnapshotHeader);
    assert_eq!(key_type(&footer_batch), ControlRecordType::SnapshotFooter);
}

// ---------------------------------------------------------------------------------------------
// Cross-check with kafka-protocol.

#[derive(Clone, Debug)]
struct Input {
    base_offset: i64,
    leader_epoch: i32,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
    control: bool,
    first_timestamp: i64,
    records: Vec<InputRecord>,
}

/// (timestamp delta, key, value, headers) of one generated record.
type InputRecord = (
    u32,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn input() -> impl Strategy<Value = Input> {
    let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
    // kafka-protocol keeps headers in an IndexMap, so keys must be unique: index-suffixed.
    let headers = proptest::collection::vec(("[a-z]{0,6}", bytes()), 0..4).prop_map(|hs| {
        hs.into_iter()
            .enumerate()
            .map(|(i, (k, v))| (format!("{k}{i}"), v))
            .collect::<Vec<_>>()
    });
    // kafka-protocol takes the minimum timestamp as baseTimestamp, Kafka the first record's:
    // with non-decreasing timestamps the two agree.
    let record = (0u32..5_000, bytes(), bytes(), headers);
    (
        0i64..1 << 40,
        -1i32..1_000,
        proptest::option::of((0i64..1 << 40, 0i16..100, 0i32..1 << 20)),
        any::<bool>(),
        any::<bool>(),
        0i64..1 << 42,
        proptest::collection::vec(record, 1..12),
    )
        .prop_map(
            |(
                base_offset,
                leader_epoch,
                producer,
                transactional,
                control,
                first_timestamp,
                records,
            )| {
                Input {
                    base_offset,
                    leader_epoch,
                    producer,
                    transactional,
                    control,
                    first_timestamp,
                    records,
                }
            },
        )
}

fn timestamps(input: &Input) -> Vec<i64> {
    let mut t = input.first_timestamp;
    input
        .records
        .iter()
        .map(|(step, ..)| {
            t += i64::from(*step);
            t
        })
        .collect()
}

fn ours(input: &Input) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(input.base_offset)
        .with_leader_epoch(input.leader_epoch)
        .with_transactional(input.transactional)
        .with_control(input.control);
    if let Some((id, epoch, sequence)) = input.producer {
        builder = builder.with_producer(id, epoch, sequence);
    }
    for ((_, key, value, headers), ts) in input.records.iter().zip(timestamps(input)) {
        let headers: Vec<(&str, Option<&[u8]>)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        builder.append(ts, key.as_deref(), value.as_deref(), &headers);
    }
    builder.build()
}

fn theirs(input: &Input) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) = input.producer.unwrap_or((-1, -1, -1));
    let records: Vec<KpRecord> = input
        .records
        .iter()
        .zip(timestamps(input))
        .enumerate()
        .map(|(i, ((_, key, value, headers), timestamp))| {
            let mut kp_headers = IndexMap::new();
            for (k, v) in headers {
                kp_headers.insert(StrBytes::from_string(k.clone()), v.clone().map(Bytes::from));
            }
            KpRecord {
                transactional: input.transactional,
                control: input.control,
                delete_horizon: false,
                partition_leader_epoch: input.leader_epoch,
                producer_id,
                producer_epoch,
                timestamp_type: KpTimestampType::Creation,
                offset: input.base_offset + i as i64,
                // kafka-protocol derives baseSequence from the first record and groups records
                // whose offset - sequence agrees; -1 + i keeps them in one batch without a producer.
                sequence: base_sequence.wrapping_add(i as i32),
                timestamp,
                key: key.clone().map(Bytes::from),
                value: value.clone().map(Bytes::from),
                headers: kp_headers,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: KpCompression::None,
        },
    )
    .expect("kafka-protocol encodes");
    buf.freeze()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Both encoders produce the same bytes for the same records.
    #[test]
    fn our_encoding_equals_kafka_protocols(input in input()) {
        let ours = ours(&input);
        prop_assert_eq!(&ours.as_bytes()[..], &theirs(&input)[..]);
    }

    /// kafka-protocol's decoder (which checks the CRC) reads what we write, field by field.
    #[test]
    fn kafka_protocol_decodes_our_batches(input in input()) {
        let batch = ours(&input);
        let mut buf = batch.as_bytes().clone();
        let set = RecordBatchDecoder::decode(&mut buf).expect("kafka-protocol decodes");
        prop_assert_eq!(set.records.len(), input.records.len());
        for ((kp, ours), ts) in set.records.iter().zip(batch.records().unwrap()).zip(timestamps(&input)) {
            let ours = ours.unwrap();
            prop_assert_eq!(kp.offset, ours.offset());
            prop_assert_eq!(kp.timestamp, ts);
            prop_assert_eq!(kp.timestamp, ours.timestamp());
            // Without a producer Kafka reports sequence -1; kafka-protocol reports -1 + offsetDelta.
            if input.producer.is_some() {
                prop_assert_eq!(kp.sequence, ours.sequence());
            } else {
                prop_assert_eq!(ours.sequence(), -1);
            }
            prop_assert_eq!(kp.key.as_ref(), ours.key());
            prop_assert_eq!(kp.value.as_ref(), ours.value());
            prop_assert_eq!(kp.control, input.control);
            prop_assert_eq!(kp.transactional, input.transactional);
            prop_assert_eq!(kp.partition_leader_epoch, input.leader_epoch);
            let kp_headers: Vec<(Bytes, Option<Bytes>)> =
                kp.headers.iter().map(|(k, v)| (Bytes::copy_from_slice(k.as_bytes()), v.clone())).collect();
            let our_headers: Vec<(Bytes, Option<Bytes>)> =
                ours.headers().iter().map(|h| (h.key, h.value)).collect();
            prop_assert_eq!(kp_headers, our_headers);
        }
    }

    /// We parse and iterate what kafka-protocol writes.
    #[test]
    fn we_parse_kafka_protocol_batches(input in input()) {
        let batch = RecordBatch::parse(theirs(&input)).expect("we parse it");
        prop_assert_eq!(batch.base_offset(), input.base_offset);
        prop_assert_eq!(batch.records_count() as usize, input.records.len());
        prop_assert_eq!(batch.is_control(), input.control);
        let records: Vec<_> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
        for (i, (record, (_, key, value, headers))) in records.iter().zip(&input.records).enumerate() {
            prop_assert_eq!(record.offset(), input.base_offset + i as i64);
            prop_assert_eq!(record.key().map(|k| k.to_vec()), key.clone());
            prop_assert_eq!(record.value().map(|v| v.to_vec()), value.clone());
            let decoded: Vec<(String, Option<Vec<u8>>)> = record
                .headers()
                .iter()
                .map(|h| (h.key_str().unwrap().to_owned(), h.value.map(|v| v.to_vec())))
                .collect();
            prop_assert_eq!(&decoded, headers);
        }
    }

    /// Our LeaderChangeMessage v0 bytes are kafka-protocol's, and each decodes the other's.
    #[test]
    fn leader_change_message_matches_kafka_protocol(
        leader_id in any::<i32>(),
        voters in proptest::collection::vec(any::<i32>(), 0..140),
        granting in proptest::collection::vec(any::<i32>(), 0..10),
    ) {
        let ours = LeaderChangeMessage::new(leader_id, voters.clone(), granting.clone());
        let kp_voters = |ids: &[i32]| ids.iter().map(|&id| kp_messages::leader_change_message::Voter::default().with_voter_id(id)).collect::<Vec<_>>();
        let kp = kp_messages::LeaderChangeMessage::default()
            .with_version(0)
            .with_leader_id(BrokerId(leader_id))
            .with_voters(kp_voters(&voters))
            .with_granting_voters(kp_voters(&granting));
        let mut kp_bytes = BytesMut::new();
        kp.encode(&mut kp_bytes, 0).unwrap();
        prop_assert_eq!(&ours.encode()[..], &kp_bytes[..]);
        prop_assert_eq!(LeaderChangeMessage::decode(&kp_bytes), Ok(ours.clone()));
        let decoded = kp_messages::LeaderChangeMessage::decode(&mut ours.encode(), 0).unwrap();
        prop_assert_eq!(decoded, kp);
    }

    #[test]
    fn snapshot_records_match_kafka_protocol(timestamp in any::<i64>()) {
        let kp = kp_messages::SnapshotHeaderRecord::default().with_version(0).with_last_contained_log_timestamp(timestamp);
        let mut kp_bytes = BytesMut::new();
        kp.encode(&mut kp_bytes, 0).unwrap();
        let ours = SnapshotHeaderRecord::new(timestamp);
        prop_assert_eq!(&ours.encode()[..], &kp_bytes[..]);
        prop_assert_eq!(SnapshotHeaderRecord::decode(&kp_bytes), Ok(ours));

        let kp = kp_messages::SnapshotFooterRecord::default().with_version(0);
        let mut kp_bytes = BytesMut::new();
        kp.encode(&mut kp_bytes, 0).unwrap();
        prop_assert_eq!(&SnapshotFooterRecord::new().encode()[..], &kp_bytes[..]);
    }
}

/// A whole leader-change batch through kafka-protocol's batch decoder and message decoder.
#[test]
fn kafka_protocol_reads_our_leader_change_batch() {
    let message = LeaderChangeMessage::new(2, vec![1, 2, 3], vec![2, 3]);
    let batch = build_leader_change_batch(500, 9, 1_700_000_000_000, &message);
    let mut buf = batch.as_bytes().clone();
    let set = RecordBatchDecoder::decode(&mut buf).unwrap();
    assert_eq!(set.records.len(), 1);
    let record = &set.records[0];
    assert!(record.control);
    assert!(!record.transactional);
    assert_eq!((record.producer_id, record.producer_epoch), (-1, -1));
    assert_eq!(record.partition_leader_epoch, 9);
    assert_eq!(record.offset, 500);
    assert_eq!(record.key.as_deref(), Some(&[0u8, 0, 0, 2][..]));
    let mut value = record.value.clone().unwrap();
    let kp = kp_messages::LeaderChangeMessage::decode(&mut value, 0).unwrap();
    assert_eq!(kp.leader_id, BrokerId(2));
    let ids = |v: &[kp_messages::leader_change_message::Voter]| {
        v.iter().map(|v| v.voter_id).collect::<Vec<_>>()
    };
    assert_eq!(ids(&kp.voters), vec![1, 2, 3]);
    assert_eq!(ids(&kp.granting_voters), vec![2, 3]);
}
