//! Times `PartitionLog::open` (recovery) on an existing partition folder, then closes the log
//! (which writes its segments' batch lists whole, docs/log.md "Recovery"):
//! `cargo run --release -p ringlog-engine --example open_log -- DIR [SEGMENT_BYTES]`.
//! Run it twice to see a restart after a clean close.
use ringlog_engine::io::{AnyIo, open_default_io};
use ringlog_engine::log::{LogConfig, PartitionLog};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: open_log DIR [SEGMENT_BYTES]"));
    let segment_size_bytes = args
        .next()
        .map(|s| s.parse().expect("SEGMENT_BYTES is a number"))
        .unwrap_or(ringlog_engine::log::DEFAULT_SEGMENT_SIZE_BYTES);
    let mut io: AnyIo = open_default_io().expect("an I/O backend");
    let config = LogConfig {
        segment_size_bytes,
        ..LogConfig::default()
    };
    let began = std::time::Instant::now();
    let (log, report) = PartitionLog::open(&mut io, &dir, config).expect("open");
    println!(
        "opened in {:?}: {} batches ({} from batch lists), log end {}",
        began.elapsed(),
        report.batches_recovered,
        report.batches_from_list,
        log.log_end_offset()
    );
    log.close(&mut io).expect("close");
}
