//! Reads just behind the durable end come from memory (`LogConfig::tail_cache_bytes`): the
//! segment is written with O_DIRECT, so a file read there is a disk read, which a follower
//! fetching what the leader has just flushed used to cause on every round.

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::MemoryIo;
use ringlog_engine::log::{LogConfig, PartitionLog, ReadView};

fn config(tail_cache_bytes: u64) -> LogConfig {
    LogConfig {
        segment_size_bytes: 8 << 20,
        tail_cache_bytes,
        ..LogConfig::default()
    }
}

/// Appends `count` batches of ~1 KiB, each its own append, flushing after each.
fn fill(log: &mut PartitionLog, io: &mut MemoryIo, count: u64) {
    for i in 0..count {
        log.append_as_leader(batch_bytes(1, 1000, i), 1).unwrap();
        log.flush_and_wait(io).unwrap();
    }
}

/// A log in `dir` with that cache, filled with `count` flushed appends.
fn filled(seed: u64, dir: &str, tail_cache_bytes: u64, count: u64) -> (PartitionLog, MemoryIo) {
    let mut io = MemoryIo::with_seed(seed);
    let (mut log, _) =
        PartitionLog::open(&mut io, Path::new(dir), config(tail_cache_bytes)).unwrap();
    fill(&mut log, &mut io, count);
    (log, io)
}

/// Whether a read at `offset` is answered with a file region (else from memory).
fn read_from_file(log: &PartitionLog, io: &MemoryIo, offset: i64) -> bool {
    matches!(
        log.read(io, offset, 1 << 20).unwrap(),
        ReadView::File { .. }
    )
}

/// The batches of an in-memory view (one slice or several chunks' slices, joined), checked
/// whole and contiguous.
fn batches_in(view: &ReadView) -> Vec<(i64, i64)> {
    let bytes = match view {
        ReadView::Memory(bytes) => bytes.to_vec(),
        ReadView::Chunks(chunks) => chunks.concat(),
        ReadView::File { .. } => panic!("a file region, not memory"),
    };
    let bytes = &bytes[..];
    let mut out = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let batch = parse_at(bytes, position);
        position += batch.size_bytes();
        out.push((batch.base_offset(), batch.last_offset()));
    }
    assert_eq!(position, bytes.len(), "whole batches only");
    out
}

#[test]
fn a_read_behind_the_durable_end_within_the_cache_is_served_from_memory_whole() {
    let (log, io) = filled(7, "/data/c-0", 64 << 10, 200);
    assert_eq!(log.durable_end_offset(), 200);
    // 20 batches (~21 KB) behind the end, every one written to the file: from memory, and all
    // of them in one read, not the one append that held the first.
    let view = log.read(&io, 180, 1 << 20).unwrap();
    let batches = batches_in(&view);
    assert_eq!(batches.len(), 20);
    assert_eq!((batches[0].0, batches[19].1), (180, 199));
    // Bounded by max_bytes, in whole batches.
    let view = log.read(&io, 180, 5000).unwrap();
    let n = batches_in(&view).len();
    assert!((2..5).contains(&n), "{n} batches in 5000 bytes");
    // Far behind (~200 KB, past the 64 KiB cache): the file.
    assert!(read_from_file(&log, &io, 0));
}

#[test]
fn without_a_cache_what_was_written_is_read_from_the_file() {
    let (mut log, io) = filled(8, "/data/c-1", 0, 50);
    // One more append drops the chunks a flush wrote (the next append, off the flush path).
    log.append_as_leader(batch_bytes(1, 1000, 99), 1).unwrap();
    assert!(read_from_file(&log, &io, 10));
}

/// A roll keeps the sealed segment's last bytes in memory (a follower still fetching its end
/// reads memory, not the disk), and segments smaller than the cache do not pile up: only the
/// newest sealed one keeps any.
#[test]
fn a_roll_keeps_the_sealed_tail_and_only_the_newest_sealed_segment_keeps_any() {
    let mut io = MemoryIo::with_seed(9);
    let config = LogConfig {
        segment_size_bytes: 64 * 1024,
        tail_cache_bytes: 1 << 20,
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(&mut io, Path::new("/data/c-2"), config).unwrap();
    let mut rolled_at = Vec::new();
    for i in 0..400u64 {
        let before = log.segment_base_offsets().len();
        log.append_as_leader(batch_bytes(1, 1000, i), 1).unwrap();
        log.flush_and_wait(&mut io).unwrap();
        if log.segment_base_offsets().len() > before {
            rolled_at.push(i);
            // Just rolled: the sealed segment's last batch is still in memory.
            let bases = log.segment_base_offsets();
            let sealed_last = bases[bases.len() - 1] - 1;
            let view = log.read(&io, sealed_last, 1 << 20).unwrap();
            assert_eq!(
                batches_in(&view).len(),
                1,
                "the sealed segment's last batch, at {i}"
            );
        }
    }
    assert!(rolled_at.len() >= 4, "rolled at {rolled_at:?}");
    let bases = log.segment_base_offsets();
    // Two segments before the newest sealed one: dropped from memory.
    assert!(read_from_file(&log, &io, bases[bases.len() - 3]));
}

/// Shrinking the cache drops what is beyond it at once (a leader that became a follower).
#[test]
fn a_smaller_cache_drops_what_lies_beyond_it_at_once() {
    let (mut log, io) = filled(10, "/data/c-3", 1 << 20, 100);
    assert!(!read_from_file(&log, &io, 50));
    log.set_tail_cache_bytes(0);
    assert!(read_from_file(&log, &io, 50));
}

/// A read spanning several appends' chunks answers slices of them, by reference: until
/// 2026-12-07 it copied them into one buffer, every replica fetch's bytes once more on the
/// leader's thread (docs/log.md, "The tail cache").
#[test]
fn a_read_across_appends_answers_slices_of_their_chunks_without_a_copy() {
    let (log, io) = filled(13, "/disk/slices", 4 << 20, 3);
    let ReadView::Chunks(slices) = log.read(&io, 0, 1 << 20).unwrap() else {
        panic!("three appends' chunks read as one buffer");
    };
    assert_eq!(slices.len(), 3);
    // Each slice is the chunk itself: a read of one append alone starts at the same bytes.
    for (offset, slice) in slices.iter().enumerate() {
        let ReadView::Memory(alone) = log.read(&io, offset as i64, 1).unwrap() else {
            panic!("one append's batch is one slice of its chunk");
        };
        assert_eq!(slice.as_ptr(), alone.as_ptr(), "append {offset} was copied");
        assert_eq!(slice, &alone);
    }
    assert_eq!(
        batches_in(&log.read(&io, 0, 1 << 20).unwrap()),
        [(0, 0), (1, 1), (2, 2)]
    );
}
