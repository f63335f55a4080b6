//! The partition log on real files, through io_uring and through plain syscalls: append across
//! segments, flush, read back (file regions with the segment's kept-open reader for sendfile),
//! truncate, reopen, and the sparse index on disk pointing at batch boundaries.

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::{Io, SyscallIo, UringIo};
use ringlog_engine::log::{LogConfig, PartitionLog, ReadView, read_segment_end};

fn config() -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 * 1024,
        // One segment's worth: the oldest segments keep no chunks, and are read from their files.
        tail_cache_bytes: 64 * 1024,
        index_interval_bytes: 4096,
        // Recovery reads a few blocks at a time into the backend's recycled buffer.
        recovery_read_bytes: 3 * 4096,
        ..LogConfig::default()
    }
}

fn scenario<I: Io>(io: &mut I, dir: &Path) {
    let (mut log, report) = PartitionLog::open(io, dir, config()).unwrap();
    assert_eq!(report.log_end_offset, 0);
    let mut appended = Vec::new();
    for i in 0..200u64 {
        let batch = batch_bytes(
            1 + (i % 4) as usize,
            [10, 300, 1000, 2500][(i % 4) as usize],
            i,
        );
        appended.push(batch.clone());
        log.append_as_leader(batch, 1 + (i / 50) as i32).unwrap();
        if i % 16 == 0 {
            log.flush(io).unwrap();
        }
    }
    let end = log.log_end_offset();
    assert_eq!(log.flush_and_wait(io).unwrap(), end);
    assert!(
        log.segment_base_offsets().len() > 3,
        "rolled: {:?}",
        log.segment_base_offsets()
    );
    let view = log.read(io, 0, 1 << 20).unwrap();
    match &view {
        ReadView::File {
            reader, position, ..
        } => {
            assert!(reader.is_some(), "real files give sendfile a descriptor");
            assert_eq!(*position, 0);
        }
        ReadView::Memory(_) | ReadView::Chunks(_) => {
            panic!("a sealed segment is read from its file")
        }
    }
    let batches = read_all(&mut log, io);
    assert_eq!(batches.len(), 200);
    for (batch, original) in batches.iter().zip(&appended) {
        // Same records; only baseOffset and partitionLeaderEpoch (outside the CRC) were stamped.
        assert_eq!(&batch.as_bytes()[8..12], &original[8..12]);
        assert_eq!(&batch.as_bytes()[16..], &original[16..]);
    }
    log.close(io).unwrap();

    // Reopen: everything is there, the index files point at batch boundaries.
    let (mut log, report) = PartitionLog::open(io, dir, config()).unwrap();
    assert_eq!(report.log_end_offset, end);
    assert_eq!(report.truncated, None);
    assert_eq!(read_all(&mut log, io).len(), 200);
    let bases = log.segment_base_offsets();
    // One file per segment: the slot region is the `.log`'s last 5 blocks, at the configured
    // segment size; the newest slot's mark is where the batches end (what `ringlog dump` uses).
    for (base, size_bytes) in log.segment_sizes_bytes() {
        let path = dir.join(format!("{base:020}.log"));
        let end = read_segment_end(&path).unwrap().expect("a slot region");
        assert_eq!(end.region_offset, config().segment_size_bytes, "{path:?}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            end.region_offset + 5 * end.block_size_bytes as u64
        );
        assert_eq!(end.durable_mark, size_bytes, "{path:?}");
        assert!(!dir.join(format!("{base:020}.tail")).exists());
    }
    let first_segment = std::fs::read(dir.join(format!("{:020}.log", bases[0]))).unwrap();
    let index = std::fs::read(dir.join(format!("{:020}.index", bases[0]))).unwrap();
    assert!(!index.is_empty() && index.len().is_multiple_of(8));
    for entry in index.chunks_exact(8) {
        let relative = u32::from_be_bytes(entry[..4].try_into().unwrap()) as i64;
        let position = u32::from_be_bytes(entry[4..].try_into().unwrap()) as usize;
        let batch = parse_at(&first_segment, position);
        assert_eq!(batch.base_offset(), bases[0] + relative);
    }
    let (segment, position) = log.index_lookup(bases[1] - 1).unwrap();
    assert_eq!(segment, bases[0]);
    assert!(parse_at(&first_segment, position as usize).base_offset() < bases[1]);

    // Truncate into an older segment, durably; append continues there.
    let cut = bases[1] + 3;
    let new_end = log.truncate_to(io, cut, 0).unwrap();
    assert!(new_end <= cut && new_end >= bases[1]);
    assert_eq!(log.segment_base_offsets(), bases[..2].to_vec());
    log.append_as_leader(batch_bytes(2, 100, 999), 9).unwrap();
    log.flush_and_wait(io).unwrap();
    log.close(io).unwrap();
    let (mut log, _) = PartitionLog::open(io, dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), new_end + 2);
    assert_eq!(log.end_offset_for_epoch(9), (9, new_end + 2));
    let batches = read_all(&mut log, io);
    assert_eq!(batches.last().unwrap().partition_leader_epoch(), 9);
    log.close(io).unwrap();
}

#[test]
fn syscall_backend_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::for_dir(dir.path());
    scenario(&mut io, &dir.path().join("metadata-0"));
}

#[test]
fn io_uring_backend_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = match UringIo::for_dir(dir.path()) {
        Ok(io) => io,
        // Same rule as the io backend tests: only a host that forbids io_uring skips it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            eprintln!("io_uring is not permitted on this host ({e}); skipped");
            return;
        }
        Err(e) => panic!("io_uring setup failed: {e}"),
    };
    scenario(&mut io, &dir.path().join("metadata-0"));
}

/// Bytes the filesystem has allocated to the segment files of `dir` (st_blocks × 512).
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".log"))
        .map(|entry| entry.metadata().unwrap().blocks() * 512)
        .sum()
}

/// Issue 17: a 1 GiB segment reserves disk space 16 MiB ahead of its data, not its whole size
/// up front (a node with a hundred partitions reserved 100 GiB before a single record), and the
/// reservation keeps running ahead as the data grows.
#[test]
fn a_segment_reserves_disk_ahead_of_its_data_not_its_whole_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::for_dir(dir.path());
    let config = LogConfig {
        segment_size_bytes: 1 << 30,
        ..LogConfig::default()
    };
    let ahead = config.preallocate_ahead_bytes;
    let log_dir = dir.path().join("topic-0");
    let (mut log, _) = PartitionLog::open(&mut io, &log_dir, config).unwrap();
    log.append_as_leader(batch_bytes(1, 100, 0), 1).unwrap();
    log.flush_and_wait(&mut io).unwrap();
    let first = allocated_bytes(&log_dir);
    assert!(
        first <= ahead + (1 << 20),
        "a new segment holds {first} bytes of disk, more than its reservation ahead"
    );
    // 40 MiB of data: the reservation follows it.
    for i in 0..40u64 {
        log.append_as_leader(batch_bytes(16, 64 * 1024, i), 1)
            .unwrap();
        log.flush_and_wait(&mut io).unwrap();
    }
    let written: u64 = log.segment_sizes_bytes().iter().map(|(_, size)| size).sum();
    let grown = allocated_bytes(&log_dir);
    assert!(
        grown >= written && grown <= written + ahead + (1 << 20),
        "{written} bytes of data hold {grown} bytes of disk"
    );
    log.close(&mut io).unwrap();
}
