//! Reads just behind the durable end come from memory (`LogConfig::tail_cache_bytes`): the
//! segment is written with O_DIRECT, so a file read there is a disk read, which a follower
//! fetching what the leader has just flushed used to cause on every round.

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::MemoryIo;
use ringlog_engine::log::{LaggingTailBudget, LogConfig, PartitionLog, ReadView};

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
/// reads memory, not the disk), and segments smaller than the cache keep only what lies within
/// it: the cache counts bytes behind the log's end, over its segments.
#[test]
fn a_roll_keeps_the_sealed_tail_and_older_segments_keep_only_what_the_cache_covers() {
    let mut io = MemoryIo::with_seed(9);
    let config = LogConfig {
        segment_size_bytes: 64 * 1024,
        tail_cache_bytes: 128 * 1024,
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
    assert!(rolled_at.len() >= 5, "rolled at {rolled_at:?}");
    let bases = log.segment_base_offsets();
    // Within 128 KiB of the end, two segments back: memory. Three segments back and more
    // (over 128 KiB behind): dropped.
    assert!(!read_from_file(&log, &io, bases[bases.len() - 2]));
    assert!(read_from_file(&log, &io, bases[bases.len() - 4]));
    assert!(log.cached_bytes() <= (128 + 64) * 1024);
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

/// KIP-595 replicas back from a restart fetch what they missed: a leader keeps it in memory
/// (`PartitionLog::keep_for_lagging_replicas`) while the node's budget allows, and drops it
/// once they have fetched it.
#[test]
fn what_a_lagging_replica_has_not_fetched_stays_in_memory_until_it_has() {
    let budget = LaggingTailBudget::new(10 << 20);
    let mut io = MemoryIo::with_seed(11);
    let (mut log, _) =
        PartitionLog::open(&mut io, Path::new("/data/c-4"), config(64 << 10)).unwrap();
    log.keep_for_lagging_replicas(&budget, Some(0));
    fill(&mut log, &mut io, 300);
    log.append_as_leader(batch_bytes(1, 1000, 300), 1).unwrap();
    // ~300 KB behind, far past the 64 KiB cache: memory, in whole batches from the one asked.
    let view = log.read(&io, 10, 1 << 20).unwrap();
    let batches = batches_in(&view);
    assert_eq!((batches[0].0, batches.len()), (10, 291));
    assert_eq!(budget.cached_bytes(), log.cached_bytes());
    assert!(log.cached_bytes() > 300_000, "{}", log.cached_bytes());
    // The replica fetched up to 100: what lies before it goes, what follows stays.
    log.keep_for_lagging_replicas(&budget, Some(100));
    assert!(read_from_file(&log, &io, 50));
    assert!(!read_from_file(&log, &io, 100));
    // None lags: back to the tail cache alone.
    log.keep_for_lagging_replicas(&budget, None);
    assert!(read_from_file(&log, &io, 100));
    assert!(log.cached_bytes() < (64 << 10) + 8192);
    assert_eq!(budget.cached_bytes(), log.cached_bytes());
}

/// Across a roll the kept chunks stay whole (the older segment's as well), and the budget the
/// node's logs share bounds what all of them keep: a log that finds it spent keeps no more,
/// and the bytes a dropped or truncated log held are given back.
#[test]
fn the_budget_shared_by_a_nodes_logs_bounds_what_they_keep_for_lagging_replicas() {
    let budget = LaggingTailBudget::new(200 << 10);
    let mut io = MemoryIo::with_seed(12);
    let open = |io: &mut MemoryIo, dir: &str| {
        let config = LogConfig {
            segment_size_bytes: 64 * 1024,
            tail_cache_bytes: 16 * 1024,
            ..LogConfig::default()
        };
        PartitionLog::open(io, Path::new(dir), config).unwrap().0
    };
    let mut first = open(&mut io, "/data/c-5");
    let mut second = open(&mut io, "/data/c-6");
    first.keep_for_lagging_replicas(&budget, Some(0));
    second.keep_for_lagging_replicas(&budget, Some(0));
    fill(&mut first, &mut io, 300);
    first
        .append_as_leader(batch_bytes(1, 1000, 300), 1)
        .unwrap();
    assert!(first.segment_base_offsets().len() >= 5);
    // ~310 KB appended: the newest ~200 KiB stay, across the segments they lie in, and the
    // log drops its oldest as it appends on.
    let kept = budget.cached_bytes();
    assert!(kept.abs_diff(200 << 10) < 2200, "{kept}");
    assert!(read_from_file(&first, &io, 0));
    for offset in [150, 200, 250] {
        assert!(!read_from_file(&first, &io, offset), "{offset}");
    }
    // The budget is spent: the second log keeps only its tail cache.
    fill(&mut second, &mut io, 100);
    second
        .append_as_leader(batch_bytes(1, 1000, 100), 1)
        .unwrap();
    assert!(read_from_file(&second, &io, 10));
    assert!(second.cached_bytes() < (16 << 10) + 8192);
    // A truncation's chunks are counted as well.
    second.truncate_to(&mut io, 95, 0).unwrap();
    assert_eq!(
        budget.cached_bytes(),
        first.cached_bytes() + second.cached_bytes()
    );
    // The first log gone (its partition moved, or the node stopped leading it): its bytes
    // come back, and the second keeps what its replica lacks again.
    drop(first);
    assert_eq!(budget.cached_bytes(), second.cached_bytes());
    fill(&mut second, &mut io, 50);
    second
        .append_as_leader(batch_bytes(1, 1000, 500), 1)
        .unwrap();
    assert!(!read_from_file(&second, &io, 96));
}
