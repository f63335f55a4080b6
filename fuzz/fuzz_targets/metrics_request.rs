#![no_main]
//! The metrics endpoint's HTTP request-head parser.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ringlog_net::metrics::fuzz_metrics_request(data));
