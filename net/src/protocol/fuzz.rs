//! Fuzz entry points (`fuzz/fuzz_targets/*.rs` call these; `tests/protocol_corpus.rs` replays
//! the corpora through them). A panic here is a bug in the codec.

use bytes::{BufMut, Bytes, BytesMut};

use super::{ApiKey, Encoder, Request, RequestHeader, decode_request, encode_request};

/// Any frame: decoding returns `Ok` or `Err`, never panics; a decoded request re-encodes, and
/// decoding that again gives the same header and request.
pub fn fuzz_request_decode(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    if let Ok((header, request)) = decode_request(frame.clone()) {
        check_blobs_are_slices_of(&frame, &request);
        assert_reencodes(&header, &request);
    }
}

/// A Produce request body at the version chosen by the first byte, behind a valid header: the
/// records must come back as zero-copy slices of the frame, and re-encoding must round-trip.
pub fn fuzz_produce_decode(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let versions = ApiKey::Produce.versions();
    let span = (versions.max - versions.min + 1) as u8;
    let version = versions.min + i16::from(selector % span);
    let header = RequestHeader {
        api_key: ApiKey::Produce.key(),
        api_version: version,
        correlation_id: 7,
        client_id: Some("fuzz".to_string()),
    };
    let mut e = Encoder::new();
    header
        .encode(&mut e, ApiKey::Produce.is_flexible(version))
        .expect("a header with a 4-byte client id encodes");
    let mut frame = BytesMut::from(&e.into_bytes()[..]);
    frame.put_slice(body);
    let frame = frame.freeze();
    if let Ok((decoded_header, request)) = decode_request(frame.clone()) {
        assert_eq!(decoded_header, header);
        assert!(matches!(request, Request::Produce(_)));
        check_blobs_are_slices_of(&frame, &request);
        assert_reencodes(&decoded_header, &request);
    }
}

fn assert_reencodes(header: &RequestHeader, request: &Request) {
    let encoded = encode_request(header, request).expect("a decoded request must re-encode");
    let (header_again, request_again) =
        decode_request(encoded.slice(4..)).expect("a re-encoded request must decode");
    assert_eq!(&header_again, header);
    assert_eq!(&request_again, request);
}

/// Produce records must point into the frame they were decoded from: no copy on the hot path.
fn check_blobs_are_slices_of(frame: &Bytes, request: &Request) {
    if let Request::Produce(produce) = request {
        let range = frame.as_ptr_range();
        for topic in &produce.topic_data {
            for partition in &topic.partition_data {
                if let Some(records) = &partition.records
                    && !records.is_empty()
                {
                    let r = records.as_ptr_range();
                    assert!(range.start <= r.start && r.end <= range.end);
                }
            }
        }
    }
}
