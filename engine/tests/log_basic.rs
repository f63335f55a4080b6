//! The partition log on the deterministic memory backend: append, group commit, read, roll,
//! truncate, log start offset, reopen.

mod log_support;

use std::path::Path;

use bytes::BytesMut;
use log_support::*;
use ringlog_engine::io::{Io, MemoryIo};
use ringlog_engine::log::{LogConfig, LogError, PartitionLog, ReadView, Routed};

#[test]
fn leader_append_stamps_offsets_and_epoch_and_reads_back() {
    let mut io = MemoryIo::with_seed(1);
    let dir = Path::new("/data/p-0");
    let (mut log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert_eq!(report.log_end_offset, 0);
    let first = log.append_as_leader(batch_bytes(3, 100, 7), 5).unwrap();
    assert_eq!((first.base_offset, first.last_offset), (0, 2));
    let second = log.append_as_leader(batch_bytes(2, 100, 8), 5).unwrap();
    assert_eq!((second.base_offset, second.last_offset), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(
        log.durable_end_offset(),
        0,
        "nothing is durable before a flush"
    );

    let batches = read_all(&mut log, &mut io);
    assert_eq!(batches.len(), 2);
    assert_eq!(
        (
            batches[1].base_offset(),
            batches[1].partition_leader_epoch()
        ),
        (3, 5)
    );
    assert_eq!(log.end_offset_for_epoch(5), (5, 5));
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), 5);
    log.close(&mut io).unwrap();

    let (mut log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert_eq!((report.log_start_offset, report.log_end_offset), (0, 5));
    assert_eq!(report.truncated, None);
    assert_eq!(read_all(&mut log, &mut io).len(), 2);
    assert_eq!(log.end_offset_for_epoch(5), (5, 5));
}

#[test]
fn group_commit_one_chain_in_flight_and_appends_share_the_next() {
    let mut io = MemoryIo::with_seed(2);
    let dir = Path::new("/data/p-1");
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    // The epoch's checkpoint and the segment's file first (their own preparation, which
    // would otherwise gather the appends below into the first chain).
    log.append_as_leader(batch_bytes(1, 50, 0), 1).unwrap();
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), 1);
    log.append_as_leader(batch_bytes(1, 50, 1), 1).unwrap();
    log.flush(&mut io).unwrap();
    assert!(log.flush_in_flight());
    // Arrive while the first chain is in flight: they wait for the next one.
    log.append_as_leader(batch_bytes(1, 50, 2), 1).unwrap();
    log.flush(&mut io).unwrap();
    log.append_as_leader(batch_bytes(1, 50, 3), 1).unwrap();
    log.flush(&mut io).unwrap();
    let mut advances = Vec::new();
    let mut ready = Vec::new();
    while log.flush_in_flight() {
        io.submit_and_wait(1).unwrap();
        io.drain_completions(&mut ready);
        for completion in ready.drain(..) {
            match log.on_completion(&mut io, completion).unwrap() {
                Routed::Mine {
                    durable_end_offset_advanced_to: Some(offset),
                } => advances.push(offset),
                Routed::Mine { .. } => {}
                Routed::Foreign(c) => panic!("no foreign ops here: {c:?}"),
            }
        }
    }
    assert_eq!(
        advances,
        vec![2, 4],
        "two chains: the first, then one shared by both later appends"
    );
    assert_eq!(log.durable_end_offset(), 4);
}

/// A new epoch's leader-epoch-checkpoint and a new segment's `.log` are made durable through the
/// ring: `flush` returns with their syncs in flight (until 2026-12-06 it wrote both with blocking
/// syncs, which held a node's event loop 54-122 ms when 100 partitions started at once), and the
/// chain starts only once they are: the durable end never covers a batch whose epoch the durable
/// checkpoint lacks, nor a segment whose name is not durable.
#[test]
fn a_new_epoch_s_files_are_made_durable_through_the_ring_before_its_chain() {
    let mut io = MemoryIo::with_seed(4);
    let dir = Path::new("/data/p-new");
    let checkpoint = dir.join("leader-epoch-checkpoint");
    let segment = dir.join("00000000000000000000.log");
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    let durable_epochs = |io: &MemoryIo| {
        io.durable_bytes(&checkpoint)
            .map(|bytes| String::from_utf8(bytes).unwrap())
            .unwrap_or_default()
    };
    for (epoch, seed, line) in [(1, 10, "1 0"), (3, 11, "3 2")] {
        log.append_as_leader(batch_bytes(2, 50, seed), epoch)
            .unwrap();
        log.flush(&mut io).unwrap();
        assert!(log.flush_in_flight() && io.in_flight() > 0);
        assert!(
            !durable_epochs(&io).lines().any(|l| l == line),
            "epoch {epoch}: flush waited for its checkpoint's syncs"
        );
        if epoch == 1 {
            assert!(
                io.visible_bytes(&segment).is_none(),
                "nor its segment created"
            );
        }
        let mut ready = Vec::new();
        let mut completions = 0;
        while log.flush_in_flight() {
            io.submit_and_wait(1).unwrap();
            io.drain_completions(&mut ready);
            for completion in ready.drain(..) {
                completions += 1;
                let routed = log.on_completion(&mut io, completion).unwrap();
                assert!(matches!(routed, Routed::Mine { .. }));
                if log.durable_end_offset() > 0 {
                    assert!(io.durable_bytes(&segment).is_some());
                }
                if log.durable_end_offset() == log.log_end_offset() {
                    assert!(
                        durable_epochs(&io).lines().any(|l| l == line),
                        "epoch {epoch}: its batches durable before its checkpoint entry"
                    );
                }
            }
        }
        assert_eq!(log.durable_end_offset(), log.log_end_offset());
        // Checkpoint write + fdatasync, folder fsync, the chain's dsync write (and at epoch 1
        // the segment's slot region write + fdatasync).
        assert!(completions >= 4, "epoch {epoch}: {completions} completions");
    }
    log.close(&mut io).unwrap();
    let (log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert_eq!(report.log_end_offset, 4);
    assert_eq!(log.end_offset_for_epoch(1), (1, 2));
    assert!(!report.epoch_checkpoint_rewritten);
}

#[test]
fn another_owner_s_completions_are_handed_back_or_left_in_the_backend() {
    let mut io = MemoryIo::with_seed(3);
    let (mut log, _) = PartitionLog::open(&mut io, Path::new("/data/p-2"), small_config()).unwrap();
    let other = io
        .open(
            Path::new("/data/other"),
            ringlog_engine::io::OpenOptions {
                create: true,
                ..Default::default()
            },
        )
        .unwrap();
    let foreign_id = io.submit(ringlog_engine::io::Op::Fdatasync { file: other });
    io.submit_and_wait(1).unwrap();
    let mut ready = Vec::new();
    io.drain_completions(&mut ready);
    let completion = ready.pop().unwrap();
    match log.on_completion(&mut io, completion).unwrap() {
        Routed::Foreign(c) => assert_eq!(c.op_id, foreign_id),
        other => panic!("expected foreign, got {other:?}"),
    }
    // A blocking call takes only the log's own completions: another owner's stays in the
    // backend, where that owner drains it (routing by owner, no stash to hand back).
    let foreign_id = io.submit(ringlog_engine::io::Op::Fdatasync { file: other });
    log.append_as_leader(batch_bytes(1, 10, 1), 1).unwrap();
    log.flush_and_wait(&mut io).unwrap();
    assert_eq!(log.durable_end_offset(), 1);
    let mut left = Vec::new();
    io.drain_completions(&mut left);
    assert_eq!(
        left.iter().map(|c| c.op_id).collect::<Vec<_>>(),
        vec![foreign_id]
    );
}

/// Two logs share one ring: a blocking wait of one never takes the other's completion, which
/// stays ready for it (before routing by owner, the waiter stashed it and the other log could
/// wait for it in the ring forever).
#[test]
fn a_blocking_wait_leaves_another_log_s_completions_to_it() {
    let mut io = MemoryIo::with_seed(8);
    let (mut a, _) = PartitionLog::open(&mut io, Path::new("/data/a-0"), small_config()).unwrap();
    let (mut b, _) = PartitionLog::open(&mut io, Path::new("/data/b-0"), small_config()).unwrap();
    b.append_as_leader(batch_bytes(1, 10, 1), 1).unwrap();
    b.flush(&mut io).unwrap();
    a.append_as_leader(batch_bytes(1, 10, 2), 1).unwrap();
    a.flush_and_wait(&mut io).unwrap();
    assert_eq!(a.durable_end_offset(), 1);
    // b's flush completed meanwhile; its completions are still in the backend for b.
    let mut ready = Vec::new();
    io.submit_and_wait(0).unwrap();
    io.drain_completions(&mut ready);
    assert!(!ready.is_empty());
    for completion in ready {
        assert!(matches!(
            b.on_completion(&mut io, completion).unwrap(),
            Routed::Mine { .. }
        ));
    }
    b.flush_and_wait(&mut io).unwrap();
    assert_eq!(b.durable_end_offset(), 1);
}

/// A truncation removes epochs from the cache without writing the checkpoint (two blocking syncs
/// on the caller's thread until 2026-12-06): the next chain's preparation writes it before any
/// batch after the cut is flushed, and a crash before that reopens to the truncated log with
/// the cache rebuilt from the batches.
#[test]
fn a_truncation_s_checkpoint_is_written_by_the_next_chain_not_at_once() {
    let mut io = MemoryIo::with_seed(5);
    let dir = Path::new("/data/p-cut");
    let checkpoint = dir.join("leader-epoch-checkpoint");
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    log.append_as_leader(batch_bytes(2, 50, 1), 1).unwrap();
    log.append_as_leader(batch_bytes(2, 50, 2), 4).unwrap();
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), 4);
    let durable =
        |io: &MemoryIo| String::from_utf8(io.durable_bytes(&checkpoint).unwrap()).unwrap();
    assert!(durable(&io).lines().any(|line| line == "4 2"));

    assert_eq!(log.truncate_to(&mut io, 2, 0).unwrap(), 2);
    assert_eq!(log.latest_epoch(), Some(1), "the cache itself is cut");
    assert!(
        durable(&io).lines().any(|line| line == "4 2"),
        "the file waits for the next chain"
    );
    // A crash now: the batches say what the cache is.
    let mut crashed = MemoryIo::from_snapshot(&io.snapshot(), io.config().clone());
    crashed.crash();
    let (reopened, report) = PartitionLog::open(&mut crashed, dir, small_config()).unwrap();
    assert_eq!(report.log_end_offset, 2);
    assert_eq!(reopened.latest_epoch(), Some(1));
    assert!(report.epoch_checkpoint_rewritten);

    // The next chain: epoch 1 again after the cut (no new entry), the file written first.
    let stamped_again = stamped(batch_bytes(1, 50, 3), 2, 1);
    log.append_as_follower(stamped_again).unwrap();
    log.flush(&mut io).unwrap();
    assert!(
        durable(&io).lines().any(|line| line == "4 2"),
        "not before the chain's preparation"
    );
    assert_eq!(log.flush_and_wait(&mut io).unwrap(), 3);
    assert!(!durable(&io).lines().any(|line| line.starts_with("4 ")));
    log.close(&mut io).unwrap();
    let (_, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert!(!report.epoch_checkpoint_rewritten);
}

#[test]
fn segments_roll_and_reads_cross_them() {
    let mut io = MemoryIo::with_seed(4);
    let dir = Path::new("/data/p-3");
    let config = LogConfig {
        segment_size_bytes: 4096,
        // One segment's worth: older segments keep no chunks in memory.
        tail_cache_bytes: 4096,
        ..small_config()
    };
    let (mut log, _) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    for i in 0..40 {
        log.append_as_leader(batch_bytes(2, 300, i), 1).unwrap();
        if i % 7 == 0 {
            log.flush_and_wait(&mut io).unwrap();
        }
    }
    log.flush_and_wait(&mut io).unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4, "rolled: {bases:?}");
    for base in &bases {
        let name = format!("{base:020}.log");
        assert!(
            io.visible_files().iter().any(|p| p.ends_with(&name)),
            "{name} exists"
        );
    }
    assert_eq!(read_all(&mut log, &mut io).len(), 40);
    // Sealed segments behind the tail cache are served as file regions (zero-copy), the tail
    // from memory.
    assert!(matches!(
        log.read(&io, 0, 1 << 20).unwrap(),
        ReadView::File { .. }
    ));
    log.close(&mut io).unwrap();
    let (mut log, report) = PartitionLog::open(&mut io, dir, config).unwrap();
    assert_eq!(report.log_end_offset, 80);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(read_all(&mut log, &mut io).len(), 40);
    // Index lookup: the sparse entry points at a batch boundary at or before the offset.
    let sealed_end = *bases.last().unwrap();
    for offset in [0, 17, 40, sealed_end - 1] {
        let (segment_base, position) = log.index_lookup(offset).unwrap();
        assert!(segment_base <= offset);
        let bytes = io
            .visible_bytes(&dir.join(format!("{segment_base:020}.log")))
            .unwrap();
        let batch = parse_at(&bytes, position as usize);
        assert!(
            batch.base_offset() <= offset,
            "index for {offset} points at {}",
            batch.base_offset()
        );
        // Scanning forward from the entry reaches the batch holding the offset.
        let mut at = position as usize;
        let mut batch = batch;
        while batch.last_offset() < offset {
            at += batch.size_bytes();
            batch = parse_at(&bytes, at);
        }
        assert!(batch.base_offset() <= offset && offset <= batch.last_offset());
    }
}

#[test]
fn truncate_is_durable_and_refuses_below_the_floor() {
    let mut io = MemoryIo::with_seed(5);
    let dir = Path::new("/data/p-4");
    let config = LogConfig {
        segment_size_bytes: 4096,
        ..small_config()
    };
    let (mut log, _) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch_bytes(1, 200, i), 1 + i as i32 / 10)
            .unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    let error = log.truncate_to(&mut io, 5, 10).unwrap_err();
    assert!(
        matches!(error, LogError::TruncateBelowFloor { floor: 10, .. }),
        "{error}"
    );
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(log.truncate_to(&mut io, 12, 10).unwrap(), 12);
    assert_eq!(log.end_offset_for_epoch(2), (2, 12));
    assert_eq!(log.end_offset_for_epoch(3), (-1, -1));
    // Durable at once: a crash right now keeps the cut.
    io.crash();
    let (mut log, report) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    assert_eq!(report.log_end_offset, 12);
    assert_eq!(read_all(&mut log, &mut io).len(), 12);
    // Appending continues from the cut.
    let info = log.append_as_leader(batch_bytes(1, 10, 99), 4).unwrap();
    assert_eq!(info.base_offset, 12);
    log.flush_and_wait(&mut io).unwrap();
    io.crash();
    let (mut log, _) = PartitionLog::open(&mut io, dir, config).unwrap();
    assert_eq!(read_all(&mut log, &mut io).len(), 13);
    assert_eq!(log.end_offset_for_epoch(2), (2, 12));
}

#[test]
fn log_start_offset_deletes_whole_segments_only() {
    let mut io = MemoryIo::with_seed(6);
    let dir = Path::new("/data/p-5");
    let config = LogConfig {
        segment_size_bytes: 2048,
        ..small_config()
    };
    let (mut log, _) = PartitionLog::open(&mut io, dir, config.clone()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch_bytes(1, 200, i), 1).unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    let bases = log.segment_base_offsets();
    let target = bases[2] + 1;
    let deleted = log.advance_log_start_offset(&mut io, target).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(log.log_start_offset(), target);
    assert_eq!(log.segment_base_offsets()[0], bases[2]);
    assert!(matches!(
        log.read(&io, bases[0], 100),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    io.crash();
    let (log, report) = PartitionLog::open(&mut io, dir, config).unwrap();
    assert_eq!(report.log_start_offset, bases[2]);
    assert_eq!(log.log_end_offset(), 30);
}

#[test]
fn follower_append_checks_continuity_and_epochs() {
    let mut io = MemoryIo::with_seed(7);
    let (mut log, _) = PartitionLog::open(&mut io, Path::new("/data/p-6"), small_config()).unwrap();
    let ok = stamped(batch_bytes(2, 10, 1), 0, 3);
    assert_eq!(log.append_as_follower(ok).unwrap().last_offset, 1);
    let gap = stamped(batch_bytes(1, 10, 2), 5, 3);
    assert!(matches!(
        log.append_as_follower(gap),
        Err(LogError::InvalidBatch { .. })
    ));
    let backwards = stamped(batch_bytes(1, 10, 2), 2, 2);
    assert!(matches!(
        log.append_as_follower(backwards),
        Err(LogError::InvalidBatch { .. })
    ));
    let mut corrupt = BytesMut::from(&stamped(batch_bytes(1, 10, 2), 2, 3)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    assert!(matches!(
        log.append_as_follower(corrupt.freeze()),
        Err(LogError::InvalidBatch { .. })
    ));
    assert_eq!(log.log_end_offset(), 2);
    assert!(matches!(
        log.append_as_leader(batch_bytes(1, 10, 3), 2),
        Err(LogError::InvalidBatch { .. })
    ));
}

#[test]
fn read_below_stops_before_the_first_batch_reaching_the_bound() {
    // A consumer reads below the high-watermark only; the bound is decided from the batch
    // index, so it holds for in-memory tails and file regions alike.
    let mut io = MemoryIo::with_seed(41);
    let (mut log, _) =
        PartitionLog::open(&mut io, Path::new("/data/p-below"), small_config()).unwrap();
    let first_batch = batch_bytes(3, 100, 1);
    let second_batch = batch_bytes(2, 100, 2);
    let first = first_batch.len() as u64;
    let whole = first + second_batch.len() as u64;
    // One append, so both batches sit in one in-memory chunk a single read may span.
    let mut both = first_batch;
    both.extend_from_slice(&second_batch);
    log.append_as_leader(both, 1).unwrap(); // offsets 0..=2 and 3..=4
    assert_eq!(log.read(&io, 0, 1 << 20).unwrap().len_bytes(), whole);
    // Bound inside the first batch: nothing may go out.
    assert_eq!(log.read_below(&io, 0, 1 << 20, 2).unwrap().len_bytes(), 0);
    // Bound at the second batch's start: only the first batch.
    assert_eq!(
        log.read_below(&io, 0, 1 << 20, 3).unwrap().len_bytes(),
        first
    );
    // Bound inside the second batch: still only the first.
    assert_eq!(
        log.read_below(&io, 0, 1 << 20, 4).unwrap().len_bytes(),
        first
    );
    // Bound at the log end: everything, as an unbounded read.
    assert_eq!(
        log.read_below(&io, 0, 1 << 20, 5).unwrap().len_bytes(),
        whole
    );
    assert_eq!(log.read_below(&io, 3, 1 << 20, 4).unwrap().len_bytes(), 0);
    assert_eq!(
        log.read_below(&io, 3, 1 << 20, 5).unwrap().len_bytes(),
        whole - first
    );
}

#[test]
fn a_segment_keeps_its_slot_region_when_the_segment_size_changes_between_runs() {
    // The slot region of a segment sits where its file was created to end; a later run with a
    // larger segment size must roll before data reaches it, and one with a smaller size reads
    // the old (larger) segments as they are.
    let mut io = MemoryIo::with_seed(12);
    let dir = Path::new("/data/resized");
    let small = LogConfig {
        segment_size_bytes: 8192,
        ..small_config()
    };
    let (mut log, _) = PartitionLog::open(&mut io, dir, small.clone()).unwrap();
    for i in 0..4 {
        log.append_as_leader(batch_bytes(1, 1000, i), 1).unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    log.close(&mut io).unwrap();
    assert_eq!(
        io.visible_bytes(&dir.join(format!("{:020}.log", 0)))
            .unwrap()
            .len(),
        8192 + 5 * 4096,
        "data area of 8 KiB, then the 5-block slot region"
    );

    let large = LogConfig {
        segment_size_bytes: 64 * 1024,
        ..small_config()
    };
    let (mut log, _) = PartitionLog::open(&mut io, dir, large.clone()).unwrap();
    for i in 4..40 {
        log.append_as_leader(batch_bytes(1, 1000, i), 1).unwrap();
        log.flush(&mut io).unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    let sizes = log.segment_sizes_bytes();
    assert!(
        sizes[0].1 <= 8192,
        "the first segment rolled before its region: {sizes:?}"
    );
    assert!(sizes.len() >= 2 && sizes[1].1 > 8192, "{sizes:?}");
    log.close(&mut io).unwrap();
    io.crash();
    let (mut log, report) = PartitionLog::open(&mut io, dir, small).unwrap();
    assert_eq!(report.log_end_offset, 40, "{report:?}");
    assert_eq!(read_all(&mut log, &mut io).len(), 40);
}

/// A leader's append of batches whose CRC was checked on arrival (a validated Produce) keeps
/// the same bytes as the checking append, and still refuses what does not frame.
#[test]
fn crc_checked_leader_append_stores_what_the_checking_append_stores() {
    let mut io = MemoryIo::with_seed(2);
    let (mut checking, _) =
        PartitionLog::open(&mut io, Path::new("/data/a-0"), small_config()).unwrap();
    let (mut checked, _) =
        PartitionLog::open(&mut io, Path::new("/data/b-0"), small_config()).unwrap();
    for i in 0..5u64 {
        let two = [batch_bytes(2, 100, i), batch_bytes(1, 50, i + 100)].concat();
        let a = checking
            .append_as_leader(BytesMut::from(&two[..]), 3)
            .unwrap();
        let b = checked
            .append_crc_checked_as_leader(BytesMut::from(&two[..]), 3)
            .unwrap();
        assert_eq!(a, b);
    }
    assert_eq!(checking.flush_and_wait(&mut io).unwrap(), 15);
    assert_eq!(checked.flush_and_wait(&mut io).unwrap(), 15);
    let a = read_all(&mut checking, &mut io);
    let b = read_all(&mut checked, &mut io);
    assert_eq!(a.len(), 10);
    assert!(
        a.iter().zip(&b).all(|(a, b)| a.as_bytes() == b.as_bytes()),
        "the same stamped bytes"
    );

    // A batch length below the minimum: refused, nothing kept.
    let mut short = batch_bytes(1, 10, 9).to_vec();
    short[8..12].copy_from_slice(&10i32.to_be_bytes());
    let refused = checked.append_crc_checked_as_leader(BytesMut::from(&short[..]), 3);
    assert!(
        matches!(refused, Err(LogError::InvalidBatch { .. })),
        "{refused:?}"
    );
    assert_eq!(checked.log_end_offset(), 15);
}

/// Opening a log makes its folder's entry durable, also when the folder was there already: an
/// earlier run may have made it and died before syncing its parent. And folders created by the
/// open itself, several levels deep, all survive a crash.
#[test]
fn open_makes_the_log_folder_durable_whether_it_existed_or_not() {
    let mut io = MemoryIo::with_seed(3);
    // An earlier run's folder: `/data` durable in `/`, `/data/old-0` not yet in `/data`.
    io.create_dir_all(Path::new("/data/old-0")).unwrap();
    io.sync_dir(Path::new("/")).unwrap();
    for dir in ["/data/old-0", "/data/new/deeper/p-0"] {
        let dir = Path::new(dir);
        let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        log.append_as_leader(batch_bytes(2, 50, 1), 1).unwrap();
        assert_eq!(log.flush_and_wait(&mut io).unwrap(), 2);
        drop(log);
        io.crash();
        let (log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        assert_eq!(report.log_end_offset, 2, "{} after a crash", dir.display());
        drop(log);
    }
}
