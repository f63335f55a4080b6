#![no_main]
//! RecordBatch v2: split, validate, chain-check, iterate records, decode control records.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ringlog_engine::batch::fuzz_batch_decode(data));
