//! KIP-630: truncating a log fully to start at a snapshot's end offset (a follower that
//! installed a fetched snapshot), on the deterministic memory backend, with crashes.

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::{Io, MemoryIo};
use ringlog_engine::log::{LogConfig, PartitionLog};

#[test]
fn truncate_fully_and_start_at_drops_every_record_and_continues_from_the_offset() {
    let mut io = MemoryIo::with_seed(11);
    let dir = Path::new("/data/p-reset");
    let config = LogConfig {
        segment_size_bytes: 2048,
        ..small_config()
    };
    let (mut log, _) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch_bytes(1, 200, i), 1).unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    assert!(log.segment_base_offsets().len() > 2);

    log.truncate_fully_and_start_at(&mut io, 100).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.durable_end_offset()
        ),
        (100, 100, 100)
    );
    assert!(log.epoch_cache().entries().is_empty());
    assert_eq!(log.segment_base_offsets(), vec![100]);

    // A crash now: no old segment survives (the node restarts the log at its snapshot).
    io.crash();
    let (reopened, report) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    assert_eq!(report.log_end_offset, 0, "no segment file is left");
    drop(reopened);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    log.truncate_fully_and_start_at(&mut io, 100).unwrap();

    // Appends continue from the offset, in a new epoch, and survive a crash.
    let info = log.append_as_leader(batch_bytes(2, 100, 77), 3).unwrap();
    assert_eq!(info.base_offset, 100);
    log.flush_and_wait(&mut io).unwrap();
    io.crash();
    let (mut log, report) = PartitionLog::open(&mut io, dir, config).unwrap();
    assert_eq!((report.log_start_offset, report.log_end_offset), (100, 102));
    assert_eq!(log.end_offset_for_epoch(3), (3, 102));
    assert_eq!(read_all(&mut log, &mut io).len(), 1);
    assert!(io.exists(&dir.join("00000000000000000100.log")));
}
