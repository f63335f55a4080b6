#![no_main]
//! Produce request bodies (first byte picks the version): records come back as zero-copy
//! slices of the frame, and the request round-trips.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ringlog_net::protocol::fuzz_produce_decode(data));
