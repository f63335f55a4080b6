//! A segment's batch list (`<base>.batches`, docs/log.md "Recovery"): recovery takes the listed
//! batches without reading them again, and falls back to reading the segment whenever the list
//! cannot be trusted. On real files, through plain syscalls.

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::SyscallIo;
use ringlog_engine::log::{LogConfig, PartitionLog, RecoveryReport};

fn config() -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 * 1024,
        batch_list_interval_bytes: 4096,
        ..LogConfig::default()
    }
}

/// Appends `count` batches (seeds `first_seed..`) at `epoch` and flushes after each.
fn append(log: &mut PartitionLog, io: &mut SyscallIo, first_seed: u64, count: u64, epoch: i32) {
    for seed in first_seed..first_seed + count {
        log.append_as_leader(batch_bytes(1 + (seed % 3) as usize, 200, seed), epoch)
            .unwrap();
        log.flush_and_wait(io).unwrap();
    }
}

/// Opens (recovers) the log in `dir`.
fn open(io: &mut SyscallIo, dir: &Path) -> (PartitionLog, RecoveryReport) {
    PartitionLog::open(io, dir, config()).unwrap()
}

fn batches_as_bytes(log: &mut PartitionLog, io: &mut SyscallIo) -> Vec<Vec<u8>> {
    read_all(log, io)
        .iter()
        .map(|batch| batch.as_bytes().to_vec())
        .collect()
}

fn list_path(dir: &Path, base_offset: i64) -> std::path::PathBuf {
    dir.join(format!("{base_offset:020}.batches"))
}

#[test]
fn a_clean_restart_reads_no_batch_again_and_sees_the_same_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::new();
    let (mut log, _) = open(&mut io, dir.path());
    append(&mut log, &mut io, 0, 300, 3);
    assert!(log.segment_base_offsets().len() > 2, "rolled");
    let before = batches_as_bytes(&mut log, &mut io);
    let end = log.log_end_offset();
    let by_time = log.find_batch_by_timestamp(0, end, Some(1_700_000_000_150));
    log.close(&mut io).unwrap();

    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(report.batches_recovered, 300);
    assert_eq!(report.batches_from_list, 300, "{report:?}");
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(batches_as_bytes(&mut log, &mut io), before);
    assert_eq!(
        log.find_batch_by_timestamp(0, end, Some(1_700_000_000_150)),
        by_time
    );
    // Appends go on after the listed batches, and survive the next restart.
    append(&mut log, &mut io, 300, 5, 4);
    log.close(&mut io).unwrap();
    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(report.batches_from_list, 305);
    assert_eq!(batches_as_bytes(&mut log, &mut io).len(), 305);
}

#[test]
fn after_a_crash_every_batch_is_read_again_and_the_list_kept_where_it_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::new();
    let (mut log, _) = open(&mut io, dir.path());
    append(&mut log, &mut io, 0, 120, 1);
    let before = batches_as_bytes(&mut log, &mut io);
    // A crash: no close. Every batch is read and checked again (a bit flipped while the node
    // was down is found), whatever the lists say.
    drop(log);
    let (mut log, report) = open(&mut io, dir.path());
    assert!(!report.clean_shutdown);
    assert_eq!(report.batches_from_list, 0, "{report:?}");
    assert_eq!(batches_as_bytes(&mut log, &mut io), before);
    // The lists were kept where they agree, and completed by the clean close.
    log.close(&mut io).unwrap();
    let (mut log, report) = open(&mut io, dir.path());
    assert!(report.clean_shutdown);
    assert_eq!(report.batches_from_list, 120, "{report:?}");
    assert_eq!(batches_as_bytes(&mut log, &mut io), before);
    // The marker is gone once opened: a crash from here is no clean close.
    drop(log);
    let (_, report) = open(&mut io, dir.path());
    assert!(!report.clean_shutdown);
    assert_eq!(report.batches_from_list, 0);
}

#[test]
fn a_damaged_or_foreign_list_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::new();
    let (mut log, _) = open(&mut io, dir.path());
    append(&mut log, &mut io, 0, 40, 2);
    let before = batches_as_bytes(&mut log, &mut io);
    log.close(&mut io).unwrap();

    // Another log with the same offsets, sizes and epoch but other timestamps: its list is
    // intact and consistent, yet names batches that are not these (the last one is read and
    // compared).
    let other = tempfile::tempdir().unwrap();
    let (mut log, _) = open(&mut io, other.path());
    for seed in 0..40u64 {
        // The same records as `batch_bytes` builds, with other timestamps.
        let mut builder = ringlog_engine::batch::RecordBatchBuilder::new(0);
        for record in 0..1 + (seed % 3) as usize {
            let value: Vec<u8> = (0..200)
                .map(|i| (seed as usize * 31 + record * 7 + i) as u8)
                .collect();
            builder.append(1_600_000_000_000 + seed as i64, None, Some(&value), &[]);
        }
        let batch = bytes::BytesMut::from(&builder.build().as_bytes()[..]);
        log.append_as_leader(batch, 2).unwrap();
        log.flush_and_wait(&mut io).unwrap();
    }
    log.close(&mut io).unwrap();
    std::fs::copy(list_path(other.path(), 0), list_path(dir.path(), 0)).unwrap();
    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(report.batches_from_list, 0, "{report:?}");
    assert_eq!(batches_as_bytes(&mut log, &mut io), before);
    log.close(&mut io).unwrap();

    // A flipped bit in a record: the records before it are used, the rest is read again.
    let path = list_path(dir.path(), 0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[48 * 10 + 5] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(report.batches_from_list, 10, "{report:?}");
    assert_eq!(batches_as_bytes(&mut log, &mut io), before);
}

#[test]
fn after_a_truncation_the_list_names_only_the_new_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::new();
    let (mut log, _) = open(&mut io, dir.path());
    append(&mut log, &mut io, 0, 60, 1);
    log.close(&mut io).unwrap();
    let (mut log, _) = open(&mut io, dir.path());
    // A follower's truncation (diverged at offset 30), then a new leader's batches.
    log.truncate_to(&mut io, 30, 0).unwrap();
    let end = log.log_end_offset();
    append(&mut log, &mut io, 1000, 30, 2);
    let after = batches_as_bytes(&mut log, &mut io);
    // A clean restart, a crash, and a clean restart again: each gives the new history.
    log.close(&mut io).unwrap();
    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(report.batches_from_list, after.len(), "{report:?}");
    assert_eq!(batches_as_bytes(&mut log, &mut io), after);
    drop(log);
    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(batches_as_bytes(&mut log, &mut io), after, "{report:?}");
    log.close(&mut io).unwrap();
    let (mut log, report) = open(&mut io, dir.path());
    assert_eq!(report.batches_from_list, after.len(), "{report:?}");
    assert_eq!(batches_as_bytes(&mut log, &mut io), after);
    assert!(end <= 30);
}

fn deferring() -> LogConfig {
    LogConfig {
        defer_listed_check_after_crash: true,
        ..config()
    }
}

/// Flips one bit of the file at `position`.
fn flip(path: &Path, position: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[position as usize] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn after_a_crash_a_deferred_check_opens_from_the_lists_and_checks_them_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::new();
    let (mut log, _) = open(&mut io, dir.path());
    append(&mut log, &mut io, 0, 300, 2);
    assert!(log.segment_base_offsets().len() > 2, "rolled");
    let before = batches_as_bytes(&mut log, &mut io);
    let end = log.log_end_offset();
    drop(log);

    // A crash, then an open that takes the listed batches unread.
    let (mut log, report) = PartitionLog::open(&mut io, dir.path(), deferring()).unwrap();
    assert!(!report.clean_shutdown);
    assert!(report.batches_from_list > 250, "{report:?}");
    let unverified: usize = report.unverified.iter().map(|u| u.batches()).sum();
    assert_eq!(unverified, report.batches_from_list);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(batches_as_bytes(&mut log, &mut io), before);
    // Each segment's listed batches read back, checked from another `Io` while the log is open.
    let mut checker = SyscallIo::new();
    for batches in &report.unverified {
        PartitionLog::verify_listed(&mut checker, batches, &deferring()).unwrap();
        assert!(batches.end_offset() <= end);
    }
    // Appends go on after them.
    append(&mut log, &mut io, 300, 3, 3);
    assert_eq!(batches_as_bytes(&mut log, &mut io).len(), 303);
}

#[test]
fn a_bit_flipped_in_a_listed_batch_before_a_crash_is_found_by_the_deferred_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::new();
    let (mut log, _) = open(&mut io, dir.path());
    append(&mut log, &mut io, 0, 300, 2);
    let bases = log.segment_base_offsets();
    drop(log);
    // A bit of a record in the first (sealed) segment's tenth batch or so.
    let sealed = dir.path().join(format!("{:020}.log", bases[0]));
    flip(&sealed, 2000);

    let (_, report) = PartitionLog::open(&mut io, dir.path(), deferring()).unwrap();
    let first = report
        .unverified
        .iter()
        .find(|u| u.base_offset() == bases[0])
        .expect("the sealed segment's batches unverified");
    assert_eq!(first.path(), sealed);
    match PartitionLog::verify_listed(&mut SyscallIo::new(), first, &deferring()) {
        Err(ringlog_engine::log::LogError::Corruption { path, position, .. }) => {
            assert_eq!(path, sealed);
            assert!(position <= 2000, "names the damaged batch: {position}");
        }
        other => panic!("the flip was not found: {other:?}"),
    }
    // The other segments read back.
    for other in report
        .unverified
        .iter()
        .filter(|u| u.base_offset() != bases[0])
    {
        PartitionLog::verify_listed(&mut SyscallIo::new(), other, &deferring()).unwrap();
    }
    // Without deferring, the open itself refuses, naming the same file.
    match PartitionLog::open(&mut SyscallIo::new(), dir.path(), config()) {
        Err(ringlog_engine::log::LogError::Corruption { path, .. }) => assert_eq!(path, sealed),
        other => panic!("opened past the flip: {:?}", other.map(|(_, r)| r)),
    }
}
