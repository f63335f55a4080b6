//! A full disk (ENOSPC, EDQUOT) is a condition of the log that ends when space returns, not a
//! failure that stops it (issue 17; docs/log.md, "Out of space"):
//!   - a flush that meets ENOSPC (the reservation, a new segment's file, or a write of the
//!     chain) reports `LogError::NoSpace`, keeps `durable_end_offset` where it was, and leaves
//!     the log running: reads and appends go on, `waiting_for_space` says why;
//!   - a crash meanwhile recovers the log exactly at the last durable batch: nothing written
//!     while the disk was full is exposed, whole or in part;
//!   - once space returns, `flush` asks again and everything appended becomes durable.
//!
//! EIO stays fatal for the log (the page cache may have dropped the data).

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::memory::{FaultKind, FaultTrigger};
use ringlog_engine::io::{Io, MemoryConfig, MemoryIo};
use ringlog_engine::log::{LogConfig, LogError, PartitionLog, Routed};

const DIR: &str = "/disk/topic-0";

fn config(preallocate: bool) -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 * 1024,
        index_interval_bytes: 256,
        preallocate,
        // Small, so a few appends pass the reservation and must reserve again.
        preallocate_ahead_bytes: 8 * 1024,
        ..LogConfig::default()
    }
}

fn io() -> MemoryIo {
    MemoryIo::new(MemoryConfig {
        seed: 17,
        block_size_bytes: 4096,
        ..MemoryConfig::default()
    })
}

/// Appends `count` batches of 1000-byte records; returns the log end after them.
fn append(log: &mut PartitionLog, count: usize, seed: u64) -> i64 {
    for i in 0..count {
        log.append_as_leader(batch_bytes(2, 1000, seed + i as u64), 1)
            .expect("appends only touch memory, also while the disk is full");
    }
    log.log_end_offset()
}

/// Routes completions until nothing of the log is in flight; returns the first error.
fn pump(io: &mut MemoryIo, log: &mut PartitionLog) -> Result<(), LogError> {
    let mut first_error = None;
    while io.in_flight() > 0 {
        io.submit_and_wait(1).unwrap();
        let mut ready = Vec::new();
        io.drain_completions(&mut ready);
        for completion in ready {
            match log.on_completion(io, completion) {
                Ok(Routed::Mine { .. }) => {}
                Ok(Routed::Foreign(completion)) => panic!("no other owner: {completion:?}"),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Crashes the disk and reopens the log on what is durable.
fn crash_and_reopen(io: &mut MemoryIo, log: PartitionLog, preallocate: bool) -> PartitionLog {
    drop(log);
    io.crash();
    io.clear_faults();
    PartitionLog::open(io, Path::new(DIR), config(preallocate))
        .expect("reopen after the crash")
        .0
}

/// The reservation ahead of the data is refused: the flush waits, nothing is lost, the log
/// keeps serving, and the flush goes through once space returns.
#[test]
fn a_refused_reservation_waits_for_space_and_the_flush_resumes() {
    let mut io = io();
    let dir = Path::new(DIR);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config(true)).unwrap();
    let durable = append(&mut log, 3, 0);
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), durable);

    io.add_fault(FaultTrigger::always(FaultKind::WriteEnospc));
    let end = append(&mut log, 10, 100);
    let error = log.flush(&mut io).expect_err("the disk is full");
    assert!(matches!(error, LogError::NoSpace { .. }), "{error}");
    pump(&mut io, &mut log).unwrap();
    assert_eq!(log.durable_end_offset(), durable, "nothing new is durable");
    assert!(log.waiting_for_space().is_some());
    // Still running: reads of what is durable, more appends, more (refused) flushes.
    assert_eq!(read_all(&mut log, &mut io).len(), 13);
    let end = end.max(append(&mut log, 1, 200));
    assert!(log.flush(&mut io).unwrap_err().is_no_space());
    assert!(
        log.flush_and_wait(&mut io).unwrap_err().is_no_space(),
        "a blocking flush answers instead of waiting forever"
    );

    io.clear_faults();
    log.flush(&mut io).expect("space returned");
    pump(&mut io, &mut log).unwrap();
    assert_eq!(log.durable_end_offset(), end);
    assert!(log.waiting_for_space().is_none());
    let mut log = crash_and_reopen(&mut io, log, true);
    assert_eq!(
        log.log_end_offset(),
        end,
        "everything flushed after space returned"
    );
    assert_eq!(read_all(&mut log, &mut io).len(), 14);
}

/// Without a reservation (a filesystem that cannot `fallocate`) the chain's own writes meet
/// ENOSPC: the chain waits with nothing fdatasynced over them and is submitted again, whole.
#[test]
fn a_write_that_met_enospc_is_submitted_again_when_space_returns() {
    let mut io = io();
    let dir = Path::new(DIR);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config(false)).unwrap();
    let durable = append(&mut log, 2, 0);
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), durable);

    io.add_fault(FaultTrigger::always(FaultKind::WriteEnospc));
    let end = append(&mut log, 5, 100);
    log.flush(&mut io)
        .expect("the chain starts; its writes fail later");
    let error = pump(&mut io, &mut log).expect_err("the writes met ENOSPC");
    assert!(matches!(error, LogError::NoSpace { .. }), "{error}");
    assert_eq!(log.durable_end_offset(), durable);
    assert!(log.waiting_for_space().is_some());
    // Asking again while still full: the same writes, refused again, nothing stops.
    log.flush(&mut io).unwrap();
    assert!(pump(&mut io, &mut log).unwrap_err().is_no_space());
    assert_eq!(log.durable_end_offset(), durable);

    io.clear_faults();
    log.flush(&mut io).unwrap();
    pump(&mut io, &mut log).unwrap();
    assert_eq!(log.durable_end_offset(), end);
    let mut log = crash_and_reopen(&mut io, log, false);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&mut log, &mut io).len(), 7);
}

/// A crash while the disk is full recovers exactly the last durable batch: whatever the
/// refused or half-done flushes left in the files is never exposed.
#[test]
fn a_crash_while_the_disk_is_full_ends_the_log_at_the_last_durable_batch() {
    for preallocate in [true, false] {
        let mut io = io();
        let dir = Path::new(DIR);
        let (mut log, _) = PartitionLog::open(&mut io, dir, config(preallocate)).unwrap();
        let durable = append(&mut log, 3, 0);
        assert_eq!(log.flush_and_wait(&mut io).unwrap(), durable);
        // Writes succeed, reservations fail (and the other way round without preallocation):
        // the partial state is as messy as it gets.
        io.add_fault(FaultTrigger {
            times: Some(3),
            ..FaultTrigger::always(FaultKind::WriteEnospc)
        });
        append(&mut log, 12, 100);
        let _ = log.flush(&mut io);
        let _ = pump(&mut io, &mut log);
        assert_eq!(log.durable_end_offset(), durable);
        let mut log = crash_and_reopen(&mut io, log, preallocate);
        assert_eq!(
            log.log_end_offset(),
            durable,
            "preallocate {preallocate}: the log ends at the last durable batch"
        );
        assert_eq!(read_all(&mut log, &mut io).len(), 3);
    }
}

/// A roll needs a new segment's file: out of space, its `.tmp` is removed, the log waits, and
/// the segment is created once space returns.
#[test]
fn a_new_segment_out_of_space_is_created_when_space_returns() {
    let mut io = io();
    let dir = Path::new(DIR);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config(true)).unwrap();
    // 64 KiB segments, ~2 KiB batches: 40 batches roll at least once.
    let first = append(&mut log, 20, 0);
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), first);
    io.add_fault(FaultTrigger::always(FaultKind::WriteEnospc));
    let end = append(&mut log, 40, 100);
    for _ in 0..4 {
        let _ = log.flush(&mut io);
        let _ = pump(&mut io, &mut log);
    }
    assert!(log.durable_end_offset() < end);
    assert!(log.waiting_for_space().is_some());
    assert!(
        io.visible_files()
            .iter()
            .all(|path| !path.to_string_lossy().ends_with(".tmp")),
        "no half-made segment file is left: {:?}",
        io.visible_files()
    );
    io.clear_faults();
    while log.durable_end_offset() < end {
        log.flush(&mut io).unwrap();
        pump(&mut io, &mut log).unwrap();
    }
    assert!(log.segment_base_offsets().len() >= 2, "the log rolled");
    let mut log = crash_and_reopen(&mut io, log, true);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&mut log, &mut io).len(), 60);
}

/// EIO is not a full disk: the page cache may have dropped the data, so the log stops.
#[test]
fn eio_on_a_write_still_stops_the_log() {
    let mut io = io();
    let (mut log, _) = PartitionLog::open(&mut io, Path::new(DIR), config(true)).unwrap();
    append(&mut log, 1, 0);
    io.add_fault(FaultTrigger::once_at(
        FaultKind::WriteEio,
        Path::new(DIR).join("00000000000000000000.log"),
    ));
    log.flush(&mut io).unwrap();
    let error = pump(&mut io, &mut log).unwrap_err();
    assert!(matches!(error, LogError::WriteFailed { .. }), "{error}");
    assert!(!error.is_no_space());
    assert!(matches!(
        log.flush(&mut io).unwrap_err(),
        LogError::Stopped { .. }
    ));
}

/// A node restarted on a full disk opens its log: recovery's rewrites of the advisory index
/// and of the leader-epoch-checkpoint wait for space instead of refusing to open (issue 17:
/// "ENOSPC ... recurs at restart"); the checkpoint is written by the first flush after space
/// returns.
#[test]
fn a_log_opens_on_a_full_disk_and_writes_what_it_owes_once_space_returns() {
    let mut io = io();
    let dir = Path::new(DIR);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config(true)).unwrap();
    let durable = append(&mut log, 4, 0);
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), durable);
    // A crash: the active segment's index (written at a seal or a close) is missing, and
    // without the checkpoint file recovery has to write both.
    drop(log);
    io.crash();
    let checkpoint = dir.join("leader-epoch-checkpoint");
    if io.exists(&checkpoint) {
        io.remove_file(&checkpoint).unwrap();
        io.sync_dir(dir).unwrap();
    }
    // Full: every new block is refused. The segment's slot region, written whole when the
    // segment was created, is allocated, so recovery's slot write still lands (on a real
    // filesystem too): the new files are what a full disk refuses.
    for path in ["00000000000000000000.index", "leader-epoch-checkpoint.tmp"] {
        io.add_fault(FaultTrigger {
            path: Some(dir.join(path)),
            ..FaultTrigger::always(FaultKind::WriteEnospc)
        });
    }
    let (mut log, report) = PartitionLog::open(&mut io, dir, config(true))
        .expect("a full disk does not keep the log from opening");
    assert!(report.indexes_rebuilt.is_empty() && !report.epoch_checkpoint_rewritten);
    assert_eq!(log.log_end_offset(), durable);
    assert_eq!(read_all(&mut log, &mut io).len(), 4, "reads work");

    io.clear_faults();
    let end = append(&mut log, 1, 100);
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), end);
    assert!(
        io.exists(&checkpoint),
        "the first flush wrote the checkpoint"
    );
}
