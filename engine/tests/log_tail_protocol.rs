//! The tail protocol's flush (engine/src/log/flush.rs, docs/log.md "The torn tail block"): an
//! ordinary flush writes its full blocks to the data area of the `.log` and its slot to the
//! slot region at the file's end, concurrently, then one fdatasync (a flush of one write is a
//! dsync write instead); until it is durable either write may reach the disk without the other,
//! so a crash can leave the new slot without its blocks.
//! These tests force exactly that state and its neighbours, deterministically:
//!   - slot landed, blocks did not, flush never confirmed: recovery falls back to the previous
//!     slot, keeps every acknowledged byte and cuts the unfinished flush;
//!   - the flush completed and was confirmed, then its blocks were damaged: refuse to open;
//!   - a confirmed slot damaged afterwards: refuse to open (no silent fall back).
//!
//! The random crash histories of `log_crash.rs` tear the same writes at any byte.

mod log_support;

use std::path::{Path, PathBuf};

use log_support::*;
use ringlog_engine::io::memory::{FaultConfig, FaultKind, FaultTrigger};
use ringlog_engine::io::{MemoryConfig, MemoryIo};
use ringlog_engine::log::{LogError, PartitionLog};

const BLOCK: usize = 512;
/// Where `small_config`'s segments keep their slot region (64 KiB, a multiple of BLOCK).
const REGION: u64 = 64 * 1024;

fn memory_io(seed: u64) -> MemoryIo {
    MemoryIo::new(MemoryConfig {
        seed,
        block_size_bytes: BLOCK,
        faults: FaultConfig::default(),
    })
}

fn path(dir: &Path, extension: &str) -> PathBuf {
    dir.join(format!("{:020}.{extension}", 0))
}

/// A log holding batch A (acknowledged, ending inside block 0) and then batch B appended after
/// it, crossing several blocks. Returns (io, log, A's last offset).
fn log_with_acknowledged_a(dir: &Path, seed: u64) -> (MemoryIo, PartitionLog, i64) {
    let mut io = memory_io(seed);
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    let a = log.append_as_leader(batch_bytes(1, 200, 1), 1).unwrap();
    log.flush_and_wait(&mut io).unwrap();
    assert!(
        (log.durable_end_offset() as usize) < BLOCK,
        "A ends in the partial block 0"
    );
    log.append_as_leader(batch_bytes(3, 700, 2), 1).unwrap();
    (io, log, a.last_offset)
}

#[test]
fn a_slot_that_landed_without_its_blocks_falls_back_to_the_previous_slot() {
    // The data-area write fails (so its blocks never reach the disk), the slot write before it
    // in the chain succeeded and reaches the medium anyway (writeback, no fdatasync): the disk
    // holds the new slot and not its blocks, the state a power loss mid-flush can leave. B was
    // never acknowledged; A (in block 0, which the failed write would have written for the
    // first time in the data area) must survive intact.
    let dir = Path::new("/d/slot-without-blocks");
    let (io, mut log, a_last) = log_with_acknowledged_a(dir, 1);
    let mut io = MemoryIo::from_snapshot(
        &io.snapshot(),
        MemoryConfig {
            faults: FaultConfig {
                writeback_probability: 1.0,
                ..FaultConfig::default()
            },
            ..io.config().clone()
        },
    );
    // The log's open files belong to the old backend: reopen on the copy of its disk.
    drop(log);
    let (reopened, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    log = reopened;
    log.append_as_leader(batch_bytes(3, 700, 2), 1).unwrap();
    io.add_fault(FaultTrigger {
        kind: FaultKind::WriteEio,
        path: Some(path(dir, "log")),
        offset: Some(0),
        times: Some(1),
    });
    let error = log.flush_and_wait(&mut io).unwrap_err();
    assert!(matches!(error, LogError::WriteFailed { .. }), "{error}");
    assert_eq!(log.durable_end_offset(), a_last + 1, "B never acknowledged");
    drop(log);
    io.crash();
    let (mut log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert_eq!(
        report.unfinished_flush_slot,
        Some(3),
        "slot 3 (slot 2 was the reopen's) landed without its blocks: {report:?}"
    );
    assert_eq!(log.log_end_offset(), a_last + 1, "{report:?}");
    let batches = read_all(&mut log, &mut io);
    assert_eq!(batches.len(), 1);
    assert_eq!(
        batches[0].as_bytes()[..],
        stamped(batch_bytes(1, 200, 1), 0, 1)[..]
    );
    // The log goes on from there, and a second restart agrees.
    log.append_as_leader(batch_bytes(1, 50, 3), 1).unwrap();
    let durable = log.flush_and_wait(&mut io).unwrap();
    drop(log);
    io.crash();
    let (log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert_eq!(log.log_end_offset(), durable, "{report:?}");
    assert_eq!(report.unfinished_flush_slot, None);
}

#[test]
fn blocks_of_a_confirmed_flush_that_no_longer_match_refuse_to_open() {
    // B's flush completed and its confirmation record is durable (flush_and_wait waits for
    // it): a flipped bit in B's blocks is damage to acknowledged data, never a torn flush.
    let dir = Path::new("/d/confirmed-blocks");
    let (mut io, mut log, a_last) = log_with_acknowledged_a(dir, 2);
    log.flush_and_wait(&mut io).unwrap();
    assert!(log.durable_end_offset() > a_last + 1);
    drop(log);
    io.flip_bit(&path(dir, "log"), BLOCK as u64 + 100, 2)
        .unwrap();
    io.crash();
    let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
    match &error {
        LogError::Corruption { path: p, .. } => assert_eq!(p, &path(dir, "log"), "{error}"),
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn a_confirmed_slot_damaged_afterwards_refuses_to_open() {
    // The newest slot holds the only durable copy of B's partial last block. Once confirmed,
    // a damaged slot is acknowledged data lost: refuse, do not fall back to the older slot.
    let dir = Path::new("/d/confirmed-slot");
    let (mut io, mut log, _) = log_with_acknowledged_a(dir, 3);
    log.flush_and_wait(&mut io).unwrap();
    drop(log);
    // Slot 2 (sequence 2) sits at the region's start; its data block is the second block.
    io.flip_bit(&path(dir, "log"), REGION + BLOCK as u64 + 3, 0)
        .unwrap();
    io.crash();
    let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("confirmed durable but is damaged"),
        "{error}"
    );
}

#[test]
fn a_flush_is_durable_before_its_confirmation_and_survives_losing_it() {
    // flush_until_durable returns when the blocks and the slot are fdatasynced; the
    // confirmation record is still queued. A crash then loses the record, never the records.
    let dir = Path::new("/d/unconfirmed");
    for seed in 0..50 {
        let (mut io, mut log, _) = log_with_acknowledged_a(dir, 100 + seed);
        let durable = log.flush_until_durable(&mut io).unwrap();
        assert_eq!(durable, log.log_end_offset());
        drop(log);
        io.crash();
        let (log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        assert_eq!(log.log_end_offset(), durable, "seed {seed}: {report:?}");
        assert_eq!(report.unfinished_flush_slot, None, "seed {seed}");
    }
}

/// The sequence the durable confirmation record (region block 4 of the `.log`) names, if it is
/// intact.
fn durable_confirmed_sequence(io: &MemoryIo, dir: &Path) -> Option<u64> {
    let log = io.durable_bytes(&path(dir, "log"))?;
    let at = REGION as usize + 4 * BLOCK;
    let record = log.get(at..at + 24)?;
    let crc = u32::from_be_bytes(record[20..24].try_into().unwrap());
    (&record[0..4] == b"RLTC" && crc == crc32c::crc32c(&record[..20]))
        .then(|| u64::from_be_bytes(record[8..16].try_into().unwrap()))
}

/// Route completions until the durable end offset reaches `target`; returns how many
/// fdatasyncs completed meanwhile. Stops at once, like a caller told "durable" would go on.
fn route_until_durable(io: &mut MemoryIo, log: &mut PartitionLog, target: i64) -> usize {
    use ringlog_engine::io::Io;
    use ringlog_engine::log::Routed;
    let mut fdatasyncs = 0;
    let mut ready = Vec::new();
    while log.durable_end_offset() < target {
        io.submit_and_wait(1).unwrap();
        io.drain_completions(&mut ready);
        for completion in ready.drain(..) {
            // A completed fdatasync carries no buffer and reports 0 bytes.
            fdatasyncs += usize::from(completion.buf.is_none() && completion.result.is_ok());
            assert!(matches!(
                log.on_completion(io, completion).unwrap(),
                Routed::Mine { .. }
            ));
        }
    }
    fdatasyncs
}

#[test]
fn a_flush_asked_during_a_flush_carries_the_previous_confirmation() {
    // Group commit under load: C's flush is asked while B's is in flight, so it starts the
    // moment B's completes. B's confirmation record then rides on C's chain (its writes:
    // blocks, slot and record, then one fdatasync), and B is confirmed once C is durable. A
    // flush issues at most one fdatasync (none when it is a single dsync write).
    let dir = Path::new("/d/piggyback");
    let (mut io, mut log, _) = log_with_acknowledged_a(dir, 4);
    assert_eq!(durable_confirmed_sequence(&io, dir), Some(1), "A's flush");
    log.flush(&mut io).unwrap();
    let b_end = log.log_end_offset();
    log.append_as_leader(batch_bytes(3, 700, 5), 1).unwrap();
    log.flush(&mut io).unwrap();
    let c_end = log.log_end_offset();
    let syncs_b = route_until_durable(&mut io, &mut log, b_end);
    let syncs_c = route_until_durable(&mut io, &mut log, c_end);
    assert!(
        syncs_b + syncs_c <= 2,
        "two flushes, at most one fdatasync each: {syncs_b} + {syncs_c}"
    );
    assert_eq!(
        durable_confirmed_sequence(&io, dir),
        Some(2),
        "B's flush (slot 2) confirmed by C's chain"
    );
    // C's own confirmation goes on its own (nothing else is asked): lose it in a crash and C is
    // still there; a clean wait confirms C too.
    let mut crashed = MemoryIo::from_snapshot(&io.snapshot(), io.config().clone());
    crashed.crash();
    let (reopened, report) = PartitionLog::open(&mut crashed, dir, small_config()).unwrap();
    assert_eq!(reopened.log_end_offset(), c_end, "{report:?}");
    log.flush_and_wait(&mut io).unwrap();
    assert_eq!(durable_confirmed_sequence(&io, dir), Some(3), "C's flush");
}

#[test]
fn a_flush_of_one_write_carries_the_previous_confirmation_in_its_submission() {
    // One record at a time: each flush is its slot alone (the records end inside block 0), one
    // dsync write. The completed flush's confirmation record is not written alone: it waits and
    // joins the next flush's submission as a plain write beside that dsync write, so the pair
    // costs one submission and no fdatasync. `flush_and_wait` writes a waiting record and
    // makes it durable; `write_confirmation` writes it alone (the host, when no flush came).
    use ringlog_engine::io::Io;
    let dir = Path::new("/d/rider");
    let mut io = memory_io(11);
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    // The epoch's checkpoint and the segment's file are made durable before the first chain
    // (their own syncs): past them, every flush here is one write.
    log.append_as_leader(batch_bytes(1, 1, 0), 1).unwrap();
    log.flush_and_wait(&mut io).unwrap();
    log.append_as_leader(batch_bytes(1, 50, 1), 1).unwrap();
    log.flush(&mut io).unwrap();
    assert_eq!(
        io.in_flight(),
        1,
        "the first flush: its slot, one dsync write"
    );
    let a_end = log.log_end_offset();
    assert_eq!(
        route_until_durable(&mut io, &mut log, a_end),
        0,
        "no fdatasync"
    );
    assert!(
        log.confirmation_waiting(),
        "A's record waits for the next flush"
    );
    assert_eq!(io.in_flight(), 0, "and is not written alone");

    log.append_as_leader(batch_bytes(2, 50, 2), 1).unwrap();
    log.flush(&mut io).unwrap();
    assert!(!log.confirmation_waiting(), "A's record rides on B's flush");
    assert_eq!(io.in_flight(), 2, "B's slot and A's record, one submission");
    let b_end = log.log_end_offset();
    assert!((b_end as usize) < BLOCK * 2);
    assert_eq!(
        route_until_durable(&mut io, &mut log, b_end),
        0,
        "still no fdatasync"
    );
    assert!(log.confirmation_waiting(), "B's record waits in turn");
    // A crash now loses at most the records' confirmations, never the records.
    let mut crashed = MemoryIo::from_snapshot(&io.snapshot(), io.config().clone());
    crashed.crash();
    let (reopened, report) = PartitionLog::open(&mut crashed, dir, small_config()).unwrap();
    assert_eq!(reopened.log_end_offset(), b_end, "{report:?}");

    // Written alone on request, then made durable by the blocking path.
    log.write_confirmation(&mut io);
    assert!(!log.confirmation_waiting());
    assert_eq!(io.in_flight(), 1, "B's record alone");
    log.flush_and_wait(&mut io).unwrap();
    assert_eq!(
        durable_confirmed_sequence(&io, dir),
        Some(3),
        "B's flush (slot 3: the warm-up's is 1)"
    );

    // flush_and_wait leaves no record waiting.
    log.append_as_leader(batch_bytes(3, 100, 3), 1).unwrap();
    log.flush_and_wait(&mut io).unwrap();
    assert!(!log.confirmation_waiting());
    assert_eq!(durable_confirmed_sequence(&io, dir), Some(4), "C's flush");
}

#[test]
fn stale_batches_past_a_cut_are_never_resurrected() {
    // A truncation ends the segment with a new slot only: B and C stay in the data area past
    // the mark. The next flush (D, then E) writes over them with its own slot; a crash that
    // tears any of its writes at any byte, or lets any of them through, must recover A, A+D or
    // A+D+E, never a stale B or C (same offsets, other bytes).
    for seed in 0..300 {
        let faults = FaultConfig {
            tear_probability: 0.7,
            tear_every_unsynced_write: true,
            writeback_probability: 0.5,
            ..FaultConfig::default()
        };
        let mut io = MemoryIo::new(MemoryConfig {
            seed,
            block_size_bytes: BLOCK,
            faults,
        });
        let dir = Path::new("/d/stale");
        let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        let a = log.append_as_leader(batch_bytes(1, 300, 1), 1).unwrap();
        log.append_as_leader(batch_bytes(2, 400, 2), 1).unwrap(); // B
        log.append_as_leader(batch_bytes(3, 500, 3), 1).unwrap(); // C
        log.flush_and_wait(&mut io).unwrap();
        let cut = log.truncate_to(&mut io, a.last_offset + 1, 0).unwrap();
        assert_eq!(cut, a.last_offset + 1);
        let d = stamped(batch_bytes(2, 400, 4), cut, 2);
        let e = stamped(batch_bytes(1, 900, 5), cut + 2, 2);
        log.append_as_leader(batch_bytes(2, 400, 4), 2).unwrap();
        if seed % 3 == 0 {
            log.flush_and_wait(&mut io).unwrap(); // D durable, E's flush torn
        }
        log.append_as_leader(batch_bytes(1, 900, 5), 2).unwrap();
        log.flush(&mut io).unwrap();
        if seed % 2 == 1 {
            use ringlog_engine::io::Io;
            io.submit_and_wait(0).unwrap(); // the writes ran, unsynced
        }
        let durable = log.durable_end_offset();
        drop(log);
        let crash = io.crash();
        let (mut log, report) = PartitionLog::open(&mut io, dir, small_config())
            .unwrap_or_else(|error| panic!("seed {seed}: {error} after {crash:?}"));
        let batches = read_all(&mut log, &mut io);
        let a_bytes = stamped(batch_bytes(1, 300, 1), 0, 1);
        let expected: Vec<&[u8]> = vec![&a_bytes, &d, &e];
        assert!(
            log.log_end_offset() >= durable,
            "seed {seed}: durable records lost ({report:?})"
        );
        assert!(batches.len() <= 3, "seed {seed}: {report:?}");
        for (batch, want) in batches.iter().zip(&expected) {
            assert_eq!(
                &batch.as_bytes()[..],
                *want,
                "seed {seed}: batch {} is not A/D/E ({report:?}, {crash:?})",
                batch.base_offset()
            );
        }
    }
}
