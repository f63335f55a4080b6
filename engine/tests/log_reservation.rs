//! A segment's reservation ahead of its writes (docs/log.md, "Out of space") runs through the
//! ring: once the writes reach the second half of what is reserved, the next stretch is
//! reserved by an `Op::Fallocate`, and the chain that needs it finds it done. Only a write that
//! passes the reservation before that (or after a refused one) reserves synchronously, on the
//! caller's thread: the event loop's, in a node, where a `fallocate` waits for the block
//! allocator and for the direct writes in flight on the file (docs/benchmarks.md, "Where the
//! loop blocked").

#[macro_use]
mod io_forward;

mod log_support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use log_support::*;
use ringlog_engine::io::memory::{FaultKind, FaultTrigger};
use ringlog_engine::io::{
    FileId, Io, IoError, MemoryConfig, MemoryIo, Op, OpId, SyscallIo, UringIo,
};
use ringlog_engine::log::{LogConfig, PartitionLog};

/// An `Io` that counts the synchronous reservations (`preallocate`) and the ones submitted
/// through the ring (`Op::Fallocate`), and hands everything to `inner`.
struct CountingIo<I> {
    inner: I,
    synchronous: usize,
    submitted: usize,
}

impl<I: Io> CountingIo<I> {
    fn new(inner: I) -> Self {
        CountingIo {
            inner,
            synchronous: 0,
            submitted: 0,
        }
    }

    fn count(&mut self, op: &Op) {
        if matches!(op, Op::Fallocate { .. }) {
            self.submitted += 1;
        }
    }
}

impl<I: Io> Io for CountingIo<I> {
    forward_io!(inner; block_size_bytes, open, close, file_size_bytes, set_len, create_dir_all, list_dir, exists, rename, remove_file, sync_dir, open_dir, raw_fd, submit_and_wait, drain_completions, take_completions, ready_count, in_flight);
    fn preallocate(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        self.synchronous += 1;
        self.inner.preallocate(file, len_bytes)
    }
    fn submit(&mut self, op: Op) -> OpId {
        self.count(&op);
        self.inner.submit(op)
    }
    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        for op in &ops {
            self.count(op);
        }
        self.inner.submit_linked(ops)
    }
}

const AHEAD: u64 = 1 << 20;

fn config() -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 << 20,
        preallocate_ahead_bytes: AHEAD,
        ..LogConfig::default()
    }
}

/// Appends `rounds` × 128 KiB, flushing after each; returns the bytes appended.
fn append_and_flush<I: Io>(log: &mut PartitionLog, io: &mut I, rounds: u64, seed: u64) -> u64 {
    let mut appended = 0;
    for round in 0..rounds {
        let batch = batch_bytes(2, 64 * 1024, seed + round);
        appended += batch.len() as u64;
        log.append_as_leader(batch, 1).unwrap();
        log.flush_and_wait(io).unwrap();
    }
    appended
}

/// The disk a folder's files hold (their allocated blocks), reservations included.
fn allocated_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().blocks() * 512)
        .sum()
}

fn reservations_follow_the_writes_through_the_ring<I: Io>(inner: I, root: &Path) {
    let mut io = CountingIo::new(inner);
    let dir = root.join("topic-0");
    let (mut log, _) = PartitionLog::open(&mut io, &dir, config()).unwrap();
    // 6 MiB: six stretches of `AHEAD` past the one the segment's creation reserved.
    let appended = append_and_flush(&mut log, &mut io, 48, 0);
    assert_eq!(
        io.synchronous, 1,
        "only the segment's creation reserves on the caller's thread; {} through the ring",
        io.submitted
    );
    assert!(
        io.submitted >= 5,
        "{} reservations through the ring for {appended} bytes",
        io.submitted
    );
    let allocated = allocated_bytes(&dir);
    assert!(
        allocated >= appended && allocated <= appended + AHEAD + (1 << 20),
        "{appended} bytes written hold {allocated} bytes of disk"
    );
    log.close(&mut io).unwrap();
    let (mut log, _) = PartitionLog::open(&mut io, &dir, config()).unwrap();
    assert_eq!(read_all(&mut log, &mut io).len(), 48);
}

#[test]
fn reservations_follow_the_writes_through_the_ring_on_io_uring() {
    let root = tempfile::tempdir().unwrap();
    match UringIo::for_dir(root.path()) {
        Ok(io) => reservations_follow_the_writes_through_the_ring(io, root.path()),
        // A host that forbids io_uring (seccomp, sysctl): the plain syscalls' test stands.
        Err(error) => eprintln!("io_uring unavailable here ({error}): not run"),
    }
}

#[test]
fn reservations_follow_the_writes_through_the_ring_on_plain_syscalls() {
    let root = tempfile::tempdir().unwrap();
    let io = SyscallIo::for_dir(root.path());
    reservations_follow_the_writes_through_the_ring(io, root.path());
}

/// A reservation refused in the background (the disk was full for a moment) is made by the
/// chain that needs the space, on its thread, and nothing is lost or refused.
#[test]
fn a_reservation_refused_in_the_background_is_made_when_the_space_is_needed() {
    let mut io = CountingIo::new(MemoryIo::new(MemoryConfig {
        seed: 5,
        block_size_bytes: 4096,
        ..MemoryConfig::default()
    }));
    let dir = Path::new("/disk/topic-0");
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    // Three rounds stay in the first half of the first stretch; the fourth reaches the second.
    append_and_flush(&mut log, &mut io, 3, 0);
    assert_eq!((io.synchronous, io.submitted), (1, 0));
    // The first reservation or write to meet the disk now is refused: the background
    // reservation, which the chain submits before its writes.
    io.inner
        .add_fault(FaultTrigger::once(FaultKind::WriteEnospc));
    append_and_flush(&mut log, &mut io, 1, 100);
    assert_eq!((io.synchronous, io.submitted), (1, 1));
    // Not asked again in the background; the chain that passes the reservation makes it.
    let mut rounds = 4;
    while io.synchronous == 1 {
        assert!(rounds < 9, "the reservation of 1 MiB was passed long ago");
        append_and_flush(&mut log, &mut io, 1, 200 + rounds);
        rounds += 1;
        assert_eq!(
            io.submitted, 1,
            "a refused reservation is not asked again ahead"
        );
    }
    // Then the background takes over again.
    append_and_flush(&mut log, &mut io, 8, 300);
    rounds += 8;
    assert_eq!(io.synchronous, 2);
    assert!(io.submitted >= 2);
    let end = log.log_end_offset();
    drop(log);
    io.inner.crash();
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), end, "every flushed batch survived");
    assert_eq!(read_all(&mut log, &mut io).len() as u64, rounds);
}
