#![no_main]
//! Any request frame: decode_request never panics, and a decoded request re-encodes to a frame
//! that decodes to the same value.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ringlog_net::protocol::fuzz_request_decode(data));
