#![no_main]
//! KIP-630 snapshot load: arbitrary bytes as a `.checkpoint` file; listing, validated loading and
//! raw region reads return Ok or a typed error, never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ringlog_engine::snapshot::fuzz_snapshot_load(data));
