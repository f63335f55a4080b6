//! The fuzz corpora of `request_decode` and `produce_decode`, replayed through the same
//! functions the fuzz targets call, plus the generator of their seed inputs: valid frames of
//! every API at its oldest, first flexible and newest version, and hand-made broken frames.
//!
//! Regenerate the seeds with `RINGLOG_WRITE_CORPUS=1 cargo test -p ringlog-net --test
//! protocol_corpus`; files found by the fuzzer are added next to them by hand.

use std::path::{Path, PathBuf};

use bytes::{BufMut, BytesMut};
use ringlog_net::protocol::{
    ApiKey, Ctx, Encoder, Generator, ProduceRequest, Request, RequestHeader, Wire, decode_request,
    encode_request, fuzz_produce_decode, fuzz_request_decode,
};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

fn replay(target: &str, f: fn(&[u8])) {
    let dir = corpus_dir(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        f(&data);
        count += 1;
    }
    assert!(count > 0, "{} is empty", dir.display());
}

#[test]
fn replay_request_decode_corpus() {
    replay("request_decode", fuzz_request_decode);
}

#[test]
fn replay_produce_decode_corpus() {
    replay("produce_decode", fuzz_produce_decode);
}

/// The versions worth a seed: oldest, first flexible, newest.
fn seed_versions(api: ApiKey) -> Vec<i16> {
    let versions = api.versions();
    let flexible = api.flexible_versions().min.max(versions.min);
    let mut out = vec![versions.min, flexible.min(versions.max), versions.max];
    out.dedup();
    out.sort();
    out.dedup();
    out
}

fn request_frame(api: ApiKey, version: i16, seed: u64) -> Vec<u8> {
    let request = Request::generate(api, version, &mut Generator::new(seed));
    let header = RequestHeader {
        api_key: api.key(),
        api_version: version,
        correlation_id: seed as i32,
        client_id: Some("seed".into()),
    };
    encode_request(&header, &request).unwrap()[4..].to_vec()
}

/// (file name, contents, expected to decode).
fn request_decode_seeds() -> Vec<(String, Vec<u8>, bool)> {
    let mut seeds = Vec::new();
    for &api in ApiKey::ALL {
        for version in seed_versions(api) {
            let name = format!("valid-{}-v{version}", api.name().to_lowercase());
            seeds.push((name, request_frame(api, version, 3), true));
        }
    }
    let metadata_v0 = request_frame(ApiKey::Metadata, 0, 3);
    let header_len = 2 + 2 + 4 + 2 + 4; // client id "seed"

    let mut huge_array = metadata_v0[..header_len].to_vec();
    huge_array.extend_from_slice(&i32::MAX.to_be_bytes());
    huge_array.extend_from_slice(&[0; 10]);
    seeds.push(("broken-huge-array-length".into(), huge_array, false));

    let mut null_array = metadata_v0[..header_len].to_vec();
    null_array.extend_from_slice(&(-1i32).to_be_bytes());
    seeds.push(("broken-null-array-v0".into(), null_array, false));

    let fetch = request_frame(ApiKey::Fetch, 12, 3);
    seeds.push((
        "broken-truncated-fetch-v12".into(),
        fetch[..fetch.len() / 2].to_vec(),
        false,
    ));

    // Bytes after the last field are ignored, as Kafka's brokers ignore them.
    let mut trailing = request_frame(ApiKey::Vote, 2, 3);
    trailing.push(0xaa);
    seeds.push(("valid-trailing-byte".into(), trailing, true));

    // librdkafka 2.16's all-topics Metadata v12: a 4-byte topic count placeholder of which
    // the first byte reads as the compact null, so its last three bytes trail.
    let mut librdkafka = request_frame(ApiKey::Metadata, 12, 3)[..2 + 2 + 4].to_vec();
    librdkafka.extend_from_slice(&7i16.to_be_bytes());
    librdkafka.extend_from_slice(b"rdkafka");
    librdkafka.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0]);
    seeds.push((
        "valid-librdkafka-metadata-v12-all-topics".into(),
        librdkafka,
        true,
    ));

    let mut unknown_key = metadata_v0.clone();
    unknown_key[..2].copy_from_slice(&999i16.to_be_bytes());
    seeds.push(("broken-unknown-api-key".into(), unknown_key, false));

    let mut new_api_versions = request_frame(ApiKey::ApiVersions, 4, 3);
    new_api_versions[2..4].copy_from_slice(&5i16.to_be_bytes());
    seeds.push(("broken-api-versions-v5".into(), new_api_versions, false));

    let mut long_varint = request_frame(ApiKey::DescribeQuorum, 0, 3)[..header_len].to_vec();
    long_varint.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    seeds.push(("broken-varint-too-long".into(), long_varint, false));

    let mut bad_utf8 = request_frame(ApiKey::Metadata, 1, 3)[..header_len].to_vec();
    bad_utf8.extend_from_slice(&1i32.to_be_bytes());
    bad_utf8.extend_from_slice(&2i16.to_be_bytes());
    bad_utf8.extend_from_slice(&[0xc3, 0x28]);
    seeds.push(("broken-invalid-utf8".into(), bad_utf8, false));

    seeds.push(("broken-empty".into(), Vec::new(), false));
    seeds
}

fn produce_body(version: i16, seed: u64) -> Vec<u8> {
    let c = Ctx::new(version, ApiKey::Produce.is_flexible(version));
    let request = ProduceRequest::generate(&mut Generator::new(seed), c);
    let mut e = Encoder::new();
    request.encode(&mut e, c).unwrap();
    let selector = (version - ApiKey::Produce.versions().min) as u8;
    let mut out = vec![selector];
    out.extend_from_slice(&e.into_bytes());
    out
}

fn produce_decode_seeds() -> Vec<(String, Vec<u8>, bool)> {
    let versions = ApiKey::Produce.versions();
    let mut seeds: Vec<_> = (versions.min..=versions.max)
        .flat_map(|version| {
            [5u64, 6].map(|seed| {
                (
                    format!("valid-v{version}-{seed}"),
                    produce_body(version, seed),
                    true,
                )
            })
        })
        .collect();

    // v3, one topic "t", one partition, records claiming 1 GiB with 16 bytes present.
    let mut huge = BytesMut::new();
    huge.put_u8(0);
    huge.put_i16(-1);
    huge.put_i16(-1);
    huge.put_i32(1000);
    huge.put_i32(1);
    huge.put_i16(1);
    huge.put_slice(b"t");
    huge.put_i32(1);
    huge.put_i32(0);
    huge.put_i32(1 << 30);
    huge.put_slice(&[0; 16]);
    seeds.push(("broken-huge-records-length".into(), huge.to_vec(), false));

    let valid = produce_body(9, 5);
    seeds.push((
        "broken-truncated-v9".into(),
        valid[..valid.len() - 3].to_vec(),
        false,
    ));

    let mut negative = BytesMut::new();
    negative.put_u8(0);
    negative.put_i16(-2); // transactional_id length -2: invalid
    seeds.push((
        "broken-negative-string-length".into(),
        negative.to_vec(),
        false,
    ));
    seeds
}

fn decodes_as_request(data: &[u8]) -> bool {
    decode_request(bytes::Bytes::copy_from_slice(data)).is_ok()
}

fn produce_decodes(data: &[u8]) -> bool {
    let Some((&selector, body)) = data.split_first() else {
        return false;
    };
    let versions = ApiKey::Produce.versions();
    let version = versions.min + i16::from(selector % (versions.max - versions.min + 1) as u8);
    let c = Ctx::new(version, ApiKey::Produce.is_flexible(version));
    let mut d = ringlog_net::protocol::Decoder::new(bytes::Bytes::copy_from_slice(body));
    ProduceRequest::decode(&mut d, c).is_ok() && d.remaining() == 0
}

/// The seeds decode (or fail) as intended, and the committed corpus holds every one of them.
fn check_seeds(target: &str, seeds: Vec<(String, Vec<u8>, bool)>, decodes: fn(&[u8]) -> bool) {
    let dir = corpus_dir(target);
    let write = std::env::var_os("RINGLOG_WRITE_CORPUS").is_some();
    if write {
        std::fs::create_dir_all(&dir).unwrap();
    }
    for (name, data, valid) in seeds {
        assert_eq!(decodes(&data), valid, "{target}/{name}");
        let path = dir.join(&name);
        if write {
            std::fs::write(&path, &data).unwrap();
        } else {
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (regenerate with RINGLOG_WRITE_CORPUS=1)",
                    path.display()
                )
            });
            assert_eq!(committed, data, "{} is stale", path.display());
        }
    }
}

#[test]
fn request_decode_seeds_are_in_the_corpus() {
    check_seeds("request_decode", request_decode_seeds(), decodes_as_request);
}

#[test]
fn produce_decode_seeds_are_in_the_corpus() {
    check_seeds("produce_decode", produce_decode_seeds(), produce_decodes);
}
