//! Compressed batches (attributes bits 0-2: 1 gzip, 2 snappy, 3 lz4, 4 zstd): the records are
//! read through a decompressed copy of the records section, the batch itself stays as sent, the
//! output is bounded (a decompression bomb is refused while decompressing, with a typed error
//! and without ever holding the claimed size), and bad compressed bytes give a typed error.
//! Cross-checked both ways with the `kafka-protocol` crate, an independent encoder that writes
//! snappy in the Java client's xerial framing and lz4 with the C library.
//!
//! This test binary counts the bytes each thread has allocated (a global allocator below), so
//! that the bomb tests can show how much memory decompression really took.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTimestampType,
};
use ringlog_engine::batch::compression::{self, DecompressError};
use ringlog_engine::batch::{
    BatchError, Compression, LOG_OVERHEAD, MAX_DECOMPRESSED_BATCH_BYTES, RECORD_BATCH_OVERHEAD,
    Record, RecordBatch, RecordBatchBuilder,
};

const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

// ---- per-thread allocation accounting ------------------------------------------------------------

thread_local! {
    /// Bytes this thread holds (allocated minus freed by it) and the most it held since the
    /// last [`reset_peak`].
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
    static PEAK_BYTES: Cell<isize> = const { Cell::new(0) };
}

struct CountingAllocator;

fn account(delta: isize) {
    // `try_with`: a thread being torn down has no counters left; its frees are not counted.
    let _ = LIVE_BYTES.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK_BYTES.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Old and new block may both exist for a moment: count the new one first.
        account(new_size as isize);
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        account(-(layout.size() as isize));
        new
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `f` and returns its result with the most bytes this thread held above what it held
/// before (Rust allocations only: libzstd's own `malloc`s are not seen).
fn peak_allocated_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE_BYTES.with(Cell::get);
    PEAK_BYTES.with(|peak| peak.set(before));
    let result = f();
    let peak = PEAK_BYTES.with(Cell::get);
    (result, (peak - before).max(0) as usize)
}

// ---- helpers ---------------------------------------------------------------------------------------

/// 300 records with repetitive values (so every codec shrinks them), keys, some nulls and
/// headers, past snappy-java's 32 KiB block so the xerial framing has several blocks.
fn sample_builder(base_offset: i64) -> RecordBatchBuilder {
    let mut builder = RecordBatchBuilder::new(base_offset).with_leader_epoch(4);
    for i in 0..300u32 {
        let key = format!("key-{}", i % 17);
        let value = format!("value {i} {}", "abc".repeat(40));
        let value = (i % 11 != 10).then_some(value.as_bytes());
        let headers: &[(&str, Option<&[u8]>)] = if i % 5 == 0 {
            &[("trace", Some(b"t-1")), ("empty", None)]
        } else {
            &[]
        };
        builder.append(
            1_700_000_000_000 + i64::from(i),
            Some(key.as_bytes()),
            value,
            headers,
        );
    }
    builder
}

fn records_of(batch: &RecordBatch) -> Vec<Record> {
    batch
        .records()
        .expect("records readable")
        .collect::<Result<_, _>>()
        .expect("every record decodes")
}

/// What a record says, without where its bytes live.
#[derive(Debug, PartialEq)]
struct RecordFields {
    offset: i64,
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(Bytes, Option<Bytes>)>,
}

fn fields(records: &[Record]) -> Vec<RecordFields> {
    records
        .iter()
        .map(|r| RecordFields {
            offset: r.offset(),
            timestamp: r.timestamp(),
            key: r.key().cloned(),
            value: r.value().cloned(),
            headers: r.headers().iter().map(|h| (h.key, h.value)).collect(),
        })
        .collect()
}

/// `header_from`'s header with its records section replaced by `section` and codec `codec`
/// in the attributes; batchLength and CRC made to fit, so only the section can be wrong.
fn with_section(header_from: &RecordBatch, codec: u8, section: &[u8]) -> RecordBatch {
    let mut bytes = BytesMut::from(&header_from.as_bytes()[..RECORD_BATCH_OVERHEAD]);
    bytes.extend_from_slice(section);
    let batch_length = i32::try_from(bytes.len() - LOG_OVERHEAD).unwrap();
    bytes[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let attributes = (i16::from_be_bytes([bytes[21], bytes[22]]) & !0x07) | i16::from(codec);
    bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    RecordBatch::parse(bytes.freeze()).expect("frame and CRC are valid")
}

/// The records section (bytes after the header) of an uncompressed batch.
fn records_section(batch: &RecordBatch) -> &[u8] {
    assert_eq!(batch.compression(), Compression::None);
    &batch.as_bytes()[RECORD_BATCH_OVERHEAD..]
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn lz4_frame(data: &[u8]) -> Vec<u8> {
    let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(data, 1).unwrap()
}

/// One raw snappy block, as librdkafka writes snappy.
fn snappy_raw(data: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(data).unwrap()
}

/// snappy-java's framing, as Kafka's Java producer writes snappy, with `block_bytes` blocks.
fn snappy_xerial(data: &[u8], block_bytes: usize) -> Vec<u8> {
    let mut out = b"\x82SNAPPY\0".to_vec();
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    for chunk in data.chunks(block_bytes) {
        let block = snappy_raw(chunk);
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    out
}

/// The section compressed with `codec` by the codec's crate directly (snappy: xerial).
fn compress_with_crate(codec: Compression, data: &[u8]) -> Vec<u8> {
    match codec {
        Compression::Gzip => gzip(data),
        Compression::Snappy => snappy_xerial(data, 32 * 1024),
        Compression::Lz4 => lz4_frame(data),
        Compression::Zstd => zstd(data),
        other => panic!("no codec {other:?}"),
    }
}

// ---- reading compressed records ------------------------------------------------------------------

/// Each codec: the builder's compressed batch reads back the same records as the uncompressed
/// one, is smaller, and names its codec; the batch's bytes are what was built (reading never
/// rewrites a batch).
#[test]
fn each_codec_round_trips_through_the_builder() {
    let plain = sample_builder(1_000).build();
    let expected = fields(&records_of(&plain));
    for codec in CODECS {
        let batch = sample_builder(1_000).with_compression(codec).build();
        let stored = batch.as_bytes().clone();
        let parsed = RecordBatch::parse(stored.clone()).expect("valid frame and CRC");
        assert_eq!(parsed.compression(), codec);
        assert_eq!(parsed.header().attributes() & 0x07, i16::from(codec.id()));
        assert_eq!(
            (
                parsed.base_offset(),
                parsed.last_offset(),
                parsed.records_count()
            ),
            (1_000, 1_299, 300)
        );
        assert!(
            parsed.size_bytes() < plain.size_bytes() / 2,
            "{codec:?}: {} bytes compressed, {} plain",
            parsed.size_bytes(),
            plain.size_bytes()
        );
        assert_eq!(fields(&records_of(&parsed)), expected, "{codec:?}");
        assert_eq!(
            parsed.as_bytes(),
            &stored,
            "{codec:?}: the batch is untouched"
        );
    }
}

/// Each codec, compressed by the codec's own crate rather than our builder.
#[test]
fn each_codec_compressed_by_its_crate_reads() {
    let plain = sample_builder(7).build();
    let expected = fields(&records_of(&plain));
    for codec in CODECS {
        let section = compress_with_crate(codec, records_section(&plain));
        let batch = with_section(&plain, codec.id(), &section);
        assert_eq!(fields(&records_of(&batch)), expected, "{codec:?}");
    }
}

/// Snappy both ways Kafka clients write it: one raw block (librdkafka) and snappy-java's
/// xerial framing (the Java client), with one block and with many small ones.
#[test]
fn snappy_reads_raw_and_xerial_framed() {
    let plain = sample_builder(0).build();
    let expected = fields(&records_of(&plain));
    let section = records_section(&plain);
    for (what, compressed) in [
        ("raw", snappy_raw(section)),
        ("xerial, one block", snappy_xerial(section, 1 << 20)),
        ("xerial, 1 KiB blocks", snappy_xerial(section, 1024)),
    ] {
        let batch = with_section(&plain, 2, &compressed);
        assert_eq!(fields(&records_of(&batch)), expected, "{what}");
    }
}

/// LOG_APPEND_TIME, producer ids and sequences come from the header, compressed or not.
#[test]
fn header_fields_apply_to_compressed_records() {
    let build = |codec| {
        let mut builder = RecordBatchBuilder::new(50)
            .with_producer(9, 2, 100)
            .with_log_append_time(1_234)
            .with_compression(codec);
        for i in 0..3u8 {
            builder.append(10 + i64::from(i), None, Some(&[i]), &[]);
        }
        builder.build()
    };
    let plain = fields(&records_of(&build(Compression::None)));
    for codec in CODECS {
        let batch = build(codec);
        let records = records_of(&batch);
        assert_eq!(fields(&records), plain, "{codec:?}");
        assert_eq!(
            records.iter().map(Record::sequence).collect::<Vec<_>>(),
            [100, 101, 102]
        );
        assert!(records.iter().all(|r| r.timestamp() == 1_234));
    }
}

/// An empty batch (recordsCount 0, as compaction leaves) with a codec but no stream at all.
#[test]
fn an_empty_compressed_batch_has_no_records() {
    let empty = RecordBatchBuilder::new(3).build();
    for codec in CODECS {
        let batch = with_section(&empty, codec.id(), &[]);
        assert_eq!(records_of(&batch).len(), 0, "{codec:?}");
    }
}

// ---- refusals --------------------------------------------------------------------------------------

/// Ids 5-7 are no Kafka codec: UnsupportedCompression, as before compression was read.
#[test]
fn unknown_codec_ids_are_unsupported() {
    let plain = sample_builder(0).build();
    for codec in 5..=7u8 {
        let batch = with_section(&plain, codec, records_section(&plain));
        assert!(
            matches!(
                batch.records(),
                Err(BatchError::UnsupportedCompression { codec: c, position: 0 }) if c == codec
            ),
            "codec {codec}"
        );
    }
}

/// Compressed bytes that are not a valid stream (cut short, or not compressed at all) are a
/// typed `Decompression` error naming the codec, never a panic.
#[test]
fn corrupt_compressed_bytes_are_a_typed_error() {
    let plain = sample_builder(0).build();
    let section = records_section(&plain);
    for codec in CODECS {
        let compressed = compress_with_crate(codec, section);
        let cut = &compressed[..compressed.len() / 2];
        let garbage = b"these bytes were never compressed by anything at all".as_slice();
        for (what, bytes) in [("cut in half", cut), ("garbage", garbage)] {
            let batch = with_section(&plain, codec.id(), bytes);
            match batch.records() {
                Err(BatchError::Decompression {
                    codec: c,
                    position: 0,
                    reason,
                }) => {
                    assert_eq!(c, codec.id(), "{codec:?} {what}");
                    assert!(!reason.is_empty());
                }
                Err(other) => panic!("{codec:?} {what}: {other}"),
                Ok(_) => panic!("{codec:?} {what}: read as valid"),
            }
        }
    }
    // Raw snappy cut short, and xerial framing whose block length runs past the end.
    let raw = snappy_raw(section);
    let batch = with_section(&plain, 2, &raw[..raw.len() - 10]);
    assert!(matches!(
        batch.records(),
        Err(BatchError::Decompression { codec: 2, .. })
    ));
    let mut xerial = snappy_xerial(section, 32 * 1024);
    xerial[16..20].copy_from_slice(&i32::MAX.to_be_bytes());
    let batch = with_section(&plain, 2, &xerial);
    assert!(matches!(
        batch.records(),
        Err(BatchError::Decompression { codec: 2, .. })
    ));
}

/// A records section that decompresses to one byte past the bound, for each codec, is refused
/// with `DecompressedTooLarge` when the records are read.
#[test]
fn a_section_past_the_bound_is_refused_when_read() {
    let header_from = sample_builder(0).build();
    let bomb = vec![0u8; MAX_DECOMPRESSED_BATCH_BYTES + 1];
    for codec in CODECS {
        let batch = with_section(&header_from, codec.id(), &compress_with_crate(codec, &bomb));
        assert!(
            batch.size_bytes() < MAX_DECOMPRESSED_BATCH_BYTES / 16,
            "{codec:?}: a bomb is small"
        );
        match batch.records() {
            Err(BatchError::DecompressedTooLarge {
                codec: c,
                limit,
                position: 0,
            }) => {
                assert_eq!((c, limit), (codec.id(), MAX_DECOMPRESSED_BATCH_BYTES))
            }
            Err(other) => panic!("{codec:?}: {other}"),
            Ok(_) => panic!("{codec:?}: the bomb was read"),
        }
    }
}

/// The bound holds while decompressing: a 64 MiB bomb against a 1 MiB limit is refused having
/// held the limit plus the codec's working memory, never the bomb's size (gzip, snappy, lz4;
/// libzstd allocates with its own malloc, which this allocator cannot see, and its window is
/// capped in compression.rs).
#[test]
fn a_bomb_is_refused_without_holding_its_size() {
    const LIMIT: usize = 1 << 20;
    const BOMB: usize = 64 << 20;
    // An LZ4 frame's header sets its block size, up to 4 MiB: the decoder holds one compressed
    // and one decompressed block.
    const CODEC_WORKING_BYTES_MAX: usize = 2 * (4 << 20);
    let zeros = vec![0u8; BOMB];
    for codec in CODECS {
        let compressed = compress_with_crate(codec, &zeros);
        let (result, peak) =
            peak_allocated_during(|| compression::decompress(codec, &compressed, LIMIT));
        assert!(
            matches!(result, Err(DecompressError::TooLarge { limit: LIMIT, .. })),
            "{codec:?}: {result:?}"
        );
        println!("{codec:?}: held at most {peak} bytes");
        assert!(
            peak <= 2 * LIMIT + CODEC_WORKING_BYTES_MAX,
            "{codec:?}: held {peak} bytes to refuse a {BOMB}-byte bomb at a {LIMIT}-byte limit"
        );
    }
    // Raw snappy states its length up front: a 5-byte block claiming 1 GiB is refused before
    // anything is allocated for it, and a claim beyond what the block could expand to is
    // corrupt even under the limit.
    let mut claims_a_gibibyte = Vec::new();
    let mut length = 1u32 << 30;
    while length >= 0x80 {
        claims_a_gibibyte.push((length as u8 & 0x7f) | 0x80);
        length >>= 7;
    }
    claims_a_gibibyte.push(length as u8);
    claims_a_gibibyte.push(0);
    let (result, peak) = peak_allocated_during(|| {
        compression::decompress(Compression::Snappy, &claims_a_gibibyte, LIMIT)
    });
    assert!(
        matches!(result, Err(DecompressError::TooLarge { .. })),
        "{result:?}"
    );
    assert!(peak < 4096, "held {peak} bytes");
    let claims_a_half_mebibyte = [0x80, 0x80, 0x20, 0x00];
    let result = compression::decompress(Compression::Snappy, &claims_a_half_mebibyte, LIMIT);
    assert!(
        matches!(result, Err(DecompressError::Corrupt { .. })),
        "{result:?}"
    );
}

// ---- cross-check with kafka-protocol ---------------------------------------------------------------

fn kp_codec(codec: Compression) -> KpCompression {
    match codec {
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
        other => panic!("no codec {other:?}"),
    }
}

/// kafka-protocol's compressed batches (xerial snappy, C lz4) read with our reader, and ours
/// decode with kafka-protocol's, record for record.
#[test]
fn compressed_batches_agree_with_kafka_protocol_both_ways() {
    let plain = records_of(&sample_builder(20).build());
    let kp_records: Vec<KpRecord> = plain
        .iter()
        .map(|r| KpRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 4,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: KpTimestampType::Creation,
            offset: r.offset(),
            sequence: -1 + r.offset_delta(),
            timestamp: r.timestamp(),
            key: r.key().cloned(),
            value: r.value().cloned(),
            headers: r
                .headers()
                .iter()
                .map(|h| {
                    (
                        kafka_protocol::protocol::StrBytes::from_utf8(h.key).unwrap(),
                        h.value,
                    )
                })
                .collect(),
        })
        .collect();
    let expected = fields(&plain);
    for codec in CODECS {
        let mut theirs = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut theirs,
            &kp_records,
            &RecordEncodeOptions {
                version: 2,
                compression: kp_codec(codec),
            },
        )
        .expect("kafka-protocol encodes");
        let batch = RecordBatch::parse(theirs.freeze()).expect("we parse theirs");
        assert_eq!(batch.compression(), codec);
        assert_eq!(fields(&records_of(&batch)), expected, "theirs, {codec:?}");

        let ours = sample_builder(20).with_compression(codec).build();
        let mut buf = ours.as_bytes().clone();
        let set = RecordBatchDecoder::decode(&mut buf).expect("kafka-protocol decodes ours");
        assert_eq!(set.compression, kp_codec(codec));
        let decoded: Vec<_> = set
            .records
            .iter()
            .map(|r| (r.offset, r.timestamp, r.key.clone(), r.value.clone()))
            .collect();
        let wanted: Vec<_> = expected
            .iter()
            .map(|f| (f.offset, f.timestamp, f.key.clone(), f.value.clone()))
            .collect();
        assert_eq!(decoded, wanted, "ours, {codec:?}");
    }
}

/// A topic's `compression.type` recompresses a batch: every pair of codecs (none included)
/// keeps the records and every header field but the codec, batchLength and CRC, and the result
/// is a valid batch (its CRC checks when it is parsed again).
#[test]
fn recompression_keeps_records_and_header_between_every_pair_of_codecs() {
    use ringlog_engine::batch::record::recompressed;
    let all = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for from in all {
        let original = sample_builder(7)
            .with_producer(42, 3, 100)
            .with_compression(from)
            .build();
        let expected = fields(&records_of(&original));
        for to in all {
            let bytes = recompressed(&original, to).expect("recompressed");
            let again = RecordBatch::parse(bytes).expect("a valid batch, CRC included");
            assert_eq!(again.compression(), to, "{from:?} -> {to:?}");
            assert_eq!(fields(&records_of(&again)), expected, "{from:?} -> {to:?}");
            let (a, b) = (original.header(), again.header());
            assert_eq!(
                (
                    a.base_offset(),
                    a.partition_leader_epoch(),
                    a.last_offset_delta(),
                    a.base_timestamp(),
                    a.max_timestamp(),
                    a.producer_id(),
                    a.producer_epoch(),
                    a.base_sequence(),
                    a.records_count(),
                    a.timestamp_type(),
                    a.is_transactional(),
                ),
                (
                    b.base_offset(),
                    b.partition_leader_epoch(),
                    b.last_offset_delta(),
                    b.base_timestamp(),
                    b.max_timestamp(),
                    b.producer_id(),
                    b.producer_epoch(),
                    b.base_sequence(),
                    b.records_count(),
                    b.timestamp_type(),
                    b.is_transactional(),
                ),
                "{from:?} -> {to:?}"
            );
            if from == to {
                assert_eq!(again.as_bytes(), original.as_bytes());
            }
        }
    }
}
