#![no_main]
//! Recovery from arbitrary segment, tail, index and checkpoint files: `Ok` or a typed error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringlog_engine::log::fuzz_log_recovery(data);
});
