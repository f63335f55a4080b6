//! The codec's bound rules, pinned down: no wire length is trusted beyond the bytes left in
//! the frame, so the memory a decode claims is at most a small constant times the frame size,
//! whatever the lengths claim. A counting global allocator measures it in this test binary.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use ringlog_net::protocol::{
    ApiKey, DecodeError, Decoder, ErrorCode, Generator, Records, Request, RequestHeader, Response,
    ResponsePart, decode_request, decode_request_frame, decode_response, encode_request,
    encode_response, encode_response_parts, fetch_response, split_frame, supported_api_versions,
    unsupported_api_versions_response,
};

struct CountingAllocator;

thread_local! {
    // Bytes requested by this thread (tests run on parallel threads; each counts its own).
    static ALLOCATED_BYTES: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED_BYTES.try_with(|c| c.set(c.get() + layout.size()));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATED_BYTES.try_with(|c| c.set(c.get() + new_size));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Bytes allocated by this thread while `f` runs.
fn allocated_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED_BYTES.with(Cell::get);
    let out = f();
    let after = ALLOCATED_BYTES.with(Cell::get);
    (out, after - before)
}

/// A decoded value can be bigger in memory than on the wire (a 1-byte compact string becomes
/// a 24-byte `String`), but only by a constant factor.
const MEMORY_PER_WIRE_BYTE_MAX: usize = 64;
const MEMORY_FIXED_MAX: usize = 4096;

fn header_bytes(api: ApiKey, version: i16) -> BytesMut {
    let header = RequestHeader {
        api_key: api.key(),
        api_version: version,
        correlation_id: 11,
        client_id: None,
    };
    // The encoding of a default request starts with the header; cut it there.
    let frame = encode_request(
        &header,
        &Request::generate(api, version, &mut Generator::new(1)),
    )
    .unwrap();
    let header_len = 2 + 2 + 4 + 2 + usize::from(api.is_flexible(version));
    BytesMut::from(&frame[4..4 + header_len])
}

#[test]
fn array_length_of_i32_max_with_ten_bytes_of_body_fails_without_allocating() {
    // Metadata v0: the body is one int32 array length; claim i32::MAX topics.
    let mut frame = header_bytes(ApiKey::Metadata, 0);
    frame.put_i32(i32::MAX);
    frame.put_slice(&[0u8; 10]);
    let frame = frame.freeze();
    let frame_len = frame.len();
    let (result, allocated) = allocated_during(|| decode_request(frame));
    match result {
        Err(DecodeError::LengthExceedsFrame {
            field,
            length,
            remaining,
            ..
        }) => {
            assert_eq!(field, "MetadataRequest.topics");
            assert_eq!(length, i64::from(i32::MAX));
            assert_eq!(remaining, 10);
        }
        other => panic!("expected LengthExceedsFrame, got {other:?}"),
    }
    assert!(
        allocated <= 1024,
        "{allocated} bytes allocated for a {frame_len}-byte frame"
    );
}

#[test]
fn compact_array_length_near_u32_max_fails_without_allocating() {
    // Fetch v12 (flexible): ... topics is a compact array; find it by building a frame whose
    // body is the fixed fields then a huge unsigned varint.
    let mut frame = header_bytes(ApiKey::Fetch, 12);
    frame.put_i32(-1); // replica_id
    frame.put_i32(500); // max_wait_ms
    frame.put_i32(1); // min_bytes
    frame.put_i32(1 << 20); // max_bytes
    frame.put_i8(0); // isolation_level
    frame.put_i32(0); // session_id
    frame.put_i32(-1); // session_epoch
    frame.put_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]); // topics: count + 1 = u32::MAX - 1
    frame.put_slice(&[0u8; 4]);
    let (result, allocated) = allocated_during(|| decode_request(frame.freeze()));
    assert!(
        matches!(
            result,
            Err(DecodeError::LengthExceedsFrame {
                field: "FetchRequest.topics",
                ..
            })
        ),
        "{result:?}"
    );
    assert!(allocated <= 1024, "{allocated} bytes allocated");
}

#[test]
fn string_and_bytes_lengths_beyond_the_frame_are_errors() {
    // Produce v3: transactional_id (int16 length) claims 30000 bytes.
    let mut frame = header_bytes(ApiKey::Produce, 3);
    frame.put_i16(30_000);
    frame.put_slice(b"abc");
    assert!(matches!(
        decode_request(frame.freeze()),
        Err(DecodeError::LengthExceedsFrame {
            field: "ProduceRequest.transactional_id",
            ..
        })
    ));

    // Produce v3: one topic, one partition, records claiming 1 GiB.
    let mut frame = header_bytes(ApiKey::Produce, 3);
    frame.put_i16(-1); // transactional_id: null
    frame.put_i16(-1); // acks
    frame.put_i32(1000); // timeout_ms
    frame.put_i32(1); // topics
    frame.put_i16(1);
    frame.put_slice(b"t");
    frame.put_i32(1); // partitions
    frame.put_i32(0); // index
    frame.put_i32(1 << 30); // records length
    frame.put_slice(&[0u8; 16]);
    let (result, allocated) = allocated_during(|| decode_request(frame.freeze()));
    assert!(
        matches!(
            result,
            Err(DecodeError::LengthExceedsFrame {
                field: "PartitionProduceData.records",
                ..
            })
        ),
        "{result:?}"
    );
    assert!(allocated <= 1024, "{allocated} bytes allocated");
}

/// The generic form of the rule: take a valid frame of every API and version, overwrite each
/// 4-byte window with i32::MAX (an int32 length anywhere) and each 5-byte window with a huge
/// unsigned varint (a compact length anywhere), and decode. Whatever the result, the memory
/// claimed stays within a constant factor of the frame.
#[test]
fn no_length_anywhere_makes_a_decode_allocate_beyond_the_frame() {
    let mut decodes = 0usize;
    for &api in ApiKey::ALL {
        let versions = api.versions();
        for version in versions.min..=versions.max {
            let mut g = Generator::new(u64::from(version as u16) << 8 | api.key() as u64);
            let request = Request::generate(api, version, &mut g);
            let header = RequestHeader {
                api_key: api.key(),
                api_version: version,
                correlation_id: 1,
                client_id: Some("c".into()),
            };
            let frame = encode_request(&header, &request).unwrap().slice(4..);
            let patches: [&[u8]; 2] = [&[0x7f, 0xff, 0xff, 0xff], &[0xff, 0xff, 0xff, 0xff, 0x0f]];
            for patch in patches {
                for at in 8..frame.len().saturating_sub(patch.len()) {
                    let mut bad = BytesMut::from(&frame[..]);
                    bad[at..at + patch.len()].copy_from_slice(patch);
                    let bad = bad.freeze();
                    let len = bad.len();
                    let (_, allocated) = allocated_during(|| decode_request(bad));
                    assert!(
                        allocated <= MEMORY_PER_WIRE_BYTE_MAX * len + MEMORY_FIXED_MAX,
                        "{api:?} v{version}, patch at {at}: {allocated} bytes for {len}"
                    );
                    decodes += 1;
                }
            }
        }
    }
    assert!(decodes > 1000);
}

#[test]
fn every_truncation_of_a_valid_frame_is_an_error() {
    for &api in ApiKey::ALL {
        let versions = api.versions();
        for version in versions.min..=versions.max {
            let request = Request::generate(api, version, &mut Generator::new(99));
            let header = RequestHeader {
                api_key: api.key(),
                api_version: version,
                correlation_id: 5,
                client_id: None,
            };
            let frame = encode_request(&header, &request).unwrap().slice(4..);
            assert_eq!(decode_request(frame.clone()).unwrap().1, request);
            for len in 0..frame.len() {
                assert!(
                    decode_request(frame.slice(..len)).is_err(),
                    "{api:?} v{version} cut at {len} of {} decoded",
                    frame.len()
                );
            }
        }
    }
}

/// Kafka's rule: a broker reads the fields a request's version defines and ignores whatever
/// follows them. Every API and version, with tails that would be errors if they were read (a
/// huge length, a long varint, a lone byte): the value is exactly the one without the tail,
/// and the tail's length is reported.
#[test]
fn bytes_after_a_complete_request_are_ignored() {
    let tails: [&[u8]; 4] = [
        &[0xaa],
        &[0x01, 0x00, 0x00],
        &[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
        &[0u8; 300],
    ];
    for &api in ApiKey::ALL {
        let versions = api.versions();
        for version in versions.min..=versions.max {
            let request = Request::generate(api, version, &mut Generator::new(17));
            let header = RequestHeader {
                api_key: api.key(),
                api_version: version,
                correlation_id: 23,
                client_id: Some("tail".into()),
            };
            let frame = encode_request(&header, &request).unwrap().slice(4..);
            let exact = decode_request_frame(frame.clone()).unwrap();
            assert_eq!(exact.ignored_trailing_bytes, 0);
            for tail in tails {
                let mut longer = BytesMut::from(&frame[..]);
                longer.put_slice(tail);
                let decoded = decode_request_frame(longer.freeze()).unwrap_or_else(|error| {
                    panic!("{api:?} v{version} + {} bytes: {error}", tail.len())
                });
                assert_eq!(decoded.header, exact.header, "{api:?} v{version}");
                assert_eq!(decoded.request, exact.request, "{api:?} v{version}");
                assert_eq!(decoded.ignored_trailing_bytes, tail.len());
            }
        }
    }
}

/// The frame confluent-kafka 2.16 (librdkafka 2.16.0) sends for `Producer.list_topics()`,
/// captured off the socket: Metadata v12 for all topics. librdkafka reserves four bytes for the
/// topic count and, on its all-topics path, never shrinks them to the one-byte compact null
/// (`rd_kafka_MetadataRequest0`: "v9+: keep 0"), so the body is
/// `00 00 00 00 | 01 | 00 | 00` (count placeholder, AllowAutoTopicCreation, IncludeTopic-
/// AuthorizedOperations, no tagged fields). Read field by field, as Kafka reads it: topics
/// null (all), AllowAutoTopicCreation false, IncludeTopicAuthorizedOperations false, no tagged
/// fields, and the last three bytes ignored.
#[test]
fn librdkafka_all_topics_metadata_v12_decodes_as_kafka_reads_it() {
    let frame = Bytes::from_static(&[
        0x00, 0x03, 0x00, 0x0c, // api key 3 (Metadata), version 12
        0x00, 0x00, 0x00, 0x03, // correlation id 3
        0x00, 0x07, b'r', b'd', b'k', b'a', b'f', b'k', b'a', // client id "rdkafka"
        0x00, // header tagged fields: none
        0x00, 0x00, 0x00, 0x00, // topics: the 4-byte count placeholder; 0x00 = null
        0x01, 0x00, 0x00, // what librdkafka meant as the three fields: ignored
    ]);
    let decoded = decode_request_frame(frame).unwrap();
    assert_eq!(decoded.header.api_key, ApiKey::Metadata.key());
    assert_eq!(decoded.header.api_version, 12);
    assert_eq!(decoded.header.client_id.as_deref(), Some("rdkafka"));
    let Request::Metadata(metadata) = decoded.request else {
        panic!("not Metadata: {:?}", decoded.request)
    };
    assert_eq!(metadata.topics, None, "null topics: all topics");
    assert!(!metadata.allow_auto_topic_creation);
    assert!(!metadata.include_topic_authorized_operations);
    assert_eq!(decoded.ignored_trailing_bytes, 3);
}

/// Ignoring a tail does not loosen the bounds inside a message: a length that runs past the
/// frame is still an error, trailing bytes or not (an array count whose elements the tail
/// cannot hold, a string that claims more than the frame has left).
#[test]
fn lengths_past_the_frame_are_still_errors_when_bytes_follow() {
    // Metadata v12: 100 topics claimed, each at least 18 bytes; 20 bytes follow.
    let mut frame = header_bytes(ApiKey::Metadata, 12);
    frame.put_u8(101);
    frame.put_slice(&[0u8; 20]);
    assert!(matches!(
        decode_request(frame.freeze()),
        Err(DecodeError::LengthExceedsFrame {
            field: "MetadataRequest.topics",
            ..
        })
    ));
    // Metadata v1: one topic whose name claims 200 bytes of the 50 left.
    let mut frame = header_bytes(ApiKey::Metadata, 1);
    frame.put_i32(1);
    frame.put_i16(200);
    frame.put_slice(&[b'x'; 50]);
    assert!(matches!(
        decode_request(frame.freeze()),
        Err(DecodeError::LengthExceedsFrame {
            field: "MetadataRequestTopic.name",
            ..
        })
    ));
}

/// Responses stay strict (docs/protocol.md): we only decode responses of ringlog peers and of
/// nodes our own client asked, and a byte too many there is a bug to hear about.
#[test]
fn trailing_bytes_after_a_response_are_an_error() {
    let response = Response::generate(ApiKey::DescribeQuorum, 2, &mut Generator::new(5));
    let frame = encode_response(41, 2, &response).unwrap();
    let mut longer = BytesMut::from(&frame[4..]);
    longer.put_u8(0xaa);
    assert_eq!(
        decode_response(ApiKey::DescribeQuorum, 2, frame.slice(4..))
            .unwrap()
            .1,
        response
    );
    assert!(matches!(
        decode_response(ApiKey::DescribeQuorum, 2, longer.freeze()),
        Err(DecodeError::TrailingBytes { remaining: 1, .. })
    ));
}

#[test]
fn null_in_a_non_nullable_version_is_an_error() {
    // Metadata v0: topics may not be null (null means "all topics" only from v1).
    let mut frame = header_bytes(ApiKey::Metadata, 0);
    frame.put_i32(-1);
    assert!(matches!(
        decode_request(frame.freeze()),
        Err(DecodeError::NullNotAllowed {
            field: "MetadataRequest.topics",
            ..
        })
    ));
    let mut frame = header_bytes(ApiKey::Metadata, 1);
    frame.put_i32(-1);
    let (_, request) = decode_request(frame.freeze()).unwrap();
    assert!(matches!(request, Request::Metadata(m) if m.topics.is_none()));
}

#[test]
fn a_tagged_field_whose_value_does_not_fill_its_declared_size_is_an_error() {
    // FetchSnapshot v0 request: tagged field 0 (cluster_id) declared 5 bytes, holding a
    // 2-byte compact string ("a") and three stray bytes.
    let mut frame = header_bytes(ApiKey::FetchSnapshot, 0);
    frame.put_i32(1); // replica_id
    frame.put_i32(1000); // max_bytes
    frame.put_u8(1); // topics: empty
    frame.put_u8(1); // one tagged field
    frame.put_u8(0); // tag 0
    frame.put_u8(5); // size 5
    frame.put_slice(&[2, b'a', 0, 0, 0]);
    assert!(matches!(
        decode_request(frame.freeze()),
        Err(DecodeError::TaggedFieldSize {
            declared: 5,
            used: 2,
            ..
        })
    ));
}

#[test]
fn unknown_tagged_fields_are_skipped() {
    let mut frame = header_bytes(ApiKey::FetchSnapshot, 0);
    frame.put_i32(1);
    frame.put_i32(1000);
    frame.put_u8(1);
    frame.put_u8(2); // two tagged fields
    frame.put_slice(&[0, 2, 2, b'c']); // tag 0: cluster_id "c"
    frame.put_slice(&[90, 3, 1, 2, 3]); // tag 90: unknown, 3 bytes
    let (_, request) = decode_request(frame.freeze()).unwrap();
    match request {
        Request::FetchSnapshot(r) => assert_eq!(r.cluster_id.as_deref(), Some("c")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn varints_longer_than_five_bytes_are_errors() {
    let mut d = Decoder::new(Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]));
    assert!(matches!(
        d.unsigned_varint("x"),
        Err(DecodeError::VarintTooLong { .. })
    ));
    let mut d = Decoder::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x10]));
    assert!(matches!(
        d.unsigned_varint("x"),
        Err(DecodeError::VarintTooLong { .. })
    ));
    let mut d = Decoder::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f]));
    assert_eq!(d.unsigned_varint("x").unwrap(), u32::MAX);
}

#[test]
fn zigzag_varints_round_trip() {
    use ringlog_net::protocol::Encoder;
    for v in [
        0i64,
        -1,
        1,
        -64,
        63,
        64,
        i32::MAX as i64,
        i32::MIN as i64,
        i64::MAX,
        i64::MIN,
    ] {
        let mut e = Encoder::new();
        e.put_varlong(v);
        if let Ok(v32) = i32::try_from(v) {
            e.put_varint(v32);
        }
        let mut d = Decoder::new(e.into_bytes());
        assert_eq!(d.varlong("v").unwrap(), v);
        if let Ok(v32) = i32::try_from(v) {
            assert_eq!(d.varint("v").unwrap(), v32);
        }
        assert_eq!(d.remaining(), 0);
    }
    // Kafka's examples: 0 -> 0x00, -1 -> 0x01, 1 -> 0x02, -64 -> 0x7f, 64 -> 0x80 0x01.
    let mut e = Encoder::new();
    for v in [0, -1, 1, -64, 64] {
        e.put_varint(v);
    }
    assert_eq!(&e.into_bytes()[..], &[0x00, 0x01, 0x02, 0x7f, 0x80, 0x01]);
}

#[test]
fn unknown_api_keys_and_unsupported_versions_carry_the_correlation_id() {
    let mut frame = BytesMut::new();
    frame.put_i16(1000);
    frame.put_i16(0);
    frame.put_i32(77);
    frame.put_i16(-1);
    assert_eq!(
        decode_request(frame.freeze()),
        Err(DecodeError::UnknownApiKey {
            api_key: 1000,
            correlation_id: 77
        })
    );
    // KIP-511: a newer client's ApiVersions (v5 here, beyond our v4) is answered in v0 with
    // UNSUPPORTED_VERSION and our ranges.
    let mut frame = BytesMut::new();
    frame.put_i16(ApiKey::ApiVersions.key());
    frame.put_i16(5);
    frame.put_i32(78);
    frame.put_slice(&[0, 0, 0]);
    assert_eq!(
        decode_request(frame.freeze()),
        Err(DecodeError::UnsupportedVersion {
            api_key: 18,
            version: 5,
            correlation_id: 78
        })
    );
    let answer = unsupported_api_versions_response(78).unwrap();
    let (header, response) = decode_response(ApiKey::ApiVersions, 0, answer.slice(4..)).unwrap();
    assert_eq!(header.correlation_id, 78);
    match response {
        Response::ApiVersions(r) => {
            assert_eq!(r.error_code, ErrorCode::UnsupportedVersion.code());
            assert_eq!(r.api_keys, supported_api_versions());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn split_frame_refuses_oversized_and_negative_sizes_before_buffering() {
    let mut buf = BytesMut::new();
    buf.put_i32(5);
    buf.put_slice(b"abc");
    assert_eq!(split_frame(&mut buf, 100).unwrap(), None);
    buf.put_slice(b"de");
    buf.put_i32(1);
    assert_eq!(
        split_frame(&mut buf, 100).unwrap().as_deref(),
        Some(&b"abcde"[..])
    );
    assert_eq!(split_frame(&mut buf, 100).unwrap(), None);

    let mut buf = BytesMut::new();
    buf.put_i32(101);
    assert!(matches!(
        split_frame(&mut buf, 100),
        Err(DecodeError::FrameSize {
            size_bytes: 101,
            ..
        })
    ));
    let mut buf = BytesMut::new();
    buf.put_i32(-4);
    assert!(matches!(
        split_frame(&mut buf, 100),
        Err(DecodeError::FrameSize { size_bytes: -4, .. })
    ));
}

/// The server sends a Fetch response's records without copying them: the parts, written in
/// order, are byte for byte the single-buffer encoding, and an external region is counted in
/// the size prefix and preceded by its length.
#[test]
fn response_parts_splice_records_without_copying() {
    let records_a = Bytes::from(vec![0xa5; 300]);
    let region_bytes = vec![0x5a; 200];
    let partition = |index: i32, records: Records| fetch_response::PartitionData {
        partition_index: index,
        high_watermark: 10,
        records: Some(records),
        ..Default::default()
    };
    for version in [4, 11, 12, 16] {
        let in_memory = Response::Fetch(fetch_response::FetchResponse {
            responses: vec![fetch_response::FetchableTopicResponse {
                topic: "t".into(),
                partitions: vec![
                    partition(0, Records::Bytes(records_a.clone())),
                    partition(1, Records::Bytes(Bytes::from(region_bytes.clone()))),
                ],
                ..Default::default()
            }],
            ..Default::default()
        });
        let single = encode_response(9, version, &in_memory).unwrap();

        let mut spliced = in_memory.clone();
        if let Response::Fetch(r) = &mut spliced {
            r.responses[0].partitions[1].records = Some(Records::External {
                token: 42,
                size_bytes: 200,
            });
        }
        let parts = encode_response_parts(9, version, &spliced).unwrap();
        let mut joined = BytesMut::new();
        let mut saw_records_by_reference = false;
        for part in &parts {
            match part {
                ResponsePart::Encoded(b) => joined.put_slice(b),
                ResponsePart::Records(b) => {
                    assert_eq!(b.as_ptr(), records_a.as_ptr(), "records were copied");
                    saw_records_by_reference = true;
                    joined.put_slice(b);
                }
                ResponsePart::External { token, size_bytes } => {
                    assert_eq!((*token, *size_bytes), (42, 200));
                    joined.put_slice(&region_bytes);
                }
            }
        }
        assert!(saw_records_by_reference);
        assert_eq!(&joined[..], &single[..], "v{version}");

        // A single buffer cannot hold an external region.
        assert!(encode_response(9, version, &spliced).is_err());
    }
}
