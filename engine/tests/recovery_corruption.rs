//! Recovery decisions on damaged files (engine/src/log/recovery.rs, the decision table): the
//! durable mark of the trusted slot is where a segment ends, damage below it refuses to open
//! with the path and byte offset, an unfinished flush past it is dropped (never below the floor,
//! the high-watermark), indexes and checkpoints are rebuilt, never a panic.

mod log_support;

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use log_support::*;
use ringlog_engine::io::memory::{FaultConfig, FaultKind, FaultTrigger};
use ringlog_engine::io::{AlignedBuf, Io, MemoryConfig, MemoryIo, Op, OpenOptions};
use ringlog_engine::log::{LogError, PartitionLog, segment_file_image};

/// Where `small_config`'s segments keep their slot region (64 KiB).
const REGION: u64 = 64 * 1024;
const BLOCK: usize = 4096;

/// A hand-made segment file: `data`, ending (per its newest slot) at `durable_mark`.
fn segment_file(data: &[u8], durable_mark: usize) -> Vec<u8> {
    segment_file_image(data, durable_mark as u64, REGION, BLOCK, false)
}

/// Write a whole file durably through the backend (test setup of hand-made disk images).
fn put_file(io: &mut MemoryIo, path: &Path, bytes: &[u8]) {
    io.create_dir_all(path.parent().unwrap()).unwrap();
    let file = io
        .open(
            path,
            OpenOptions {
                create: true,
                ..Default::default()
            },
        )
        .unwrap();
    io.set_len(file, 0).unwrap();
    let mut ops = Vec::new();
    if !bytes.is_empty() {
        ops.push(Op::Write {
            file,
            offset: 0,
            buf: AlignedBuf::from_slice(bytes, 4096),
        });
    }
    ops.push(Op::Fdatasync { file });
    io.submit_linked(ops);
    io.submit_and_wait(1).unwrap();
    let mut done = Vec::new();
    while done.len() < 1 + usize::from(!bytes.is_empty()) {
        io.submit_and_wait(1).unwrap();
        io.drain_completions(&mut done);
    }
    io.close(file).unwrap();
    for ancestor in path.parent().unwrap().ancestors() {
        io.sync_dir(ancestor).unwrap();
    }
}

/// `n` stamped batches, concatenated, with each batch's position.
fn segment_image(n: usize, value_bytes: usize) -> (Vec<u8>, Vec<usize>) {
    let mut image = Vec::new();
    let mut positions = Vec::new();
    for i in 0..n {
        positions.push(image.len());
        image.extend_from_slice(&stamped(
            batch_bytes(2, value_bytes, i as u64),
            2 * i as i64,
            1,
        ));
    }
    (image, positions)
}

fn log_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// A log written by the log itself and flushed: (io, segment file path, batch positions).
fn written_log(dir: &Path, batches: usize) -> (MemoryIo, Vec<u64>) {
    let mut io = MemoryIo::with_seed(11);
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    let mut positions = Vec::new();
    let mut position = 0u64;
    for i in 0..batches {
        let batch = batch_bytes(1, 300, i as u64);
        positions.push(position);
        position += batch.len() as u64;
        log.append_as_leader(batch, 1).unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    log.close(&mut io).unwrap();
    (io, positions)
}

#[test]
fn a_flipped_bit_in_a_durable_interior_batch_refuses_to_open_with_path_and_offset() {
    let dir = Path::new("/d/flip");
    for victim in [0usize, 3, 7] {
        let (mut io, positions) = written_log(dir, 20);
        // A byte inside the CRC-covered payload of batch `victim`, in the full blocks of the file.
        let byte = positions[victim] + 70;
        io.flip_bit(&log_path(dir, 0), byte, 3).unwrap();
        io.crash();
        let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
        match &error {
            LogError::Corruption { path, position, .. } => {
                assert_eq!(path, &log_path(dir, 0), "{error}");
                assert_eq!(*position, positions[victim], "{error}");
            }
            other => panic!("expected corruption, got {other}"),
        }
        assert!(
            error.to_string().contains("00000000000000000000.log"),
            "{error}"
        );
    }
}

#[test]
fn a_flipped_base_offset_outside_the_crc_is_caught_by_the_chain_check() {
    let dir = Path::new("/d/flip-offset");
    let (mut io, positions) = written_log(dir, 20);
    io.flip_bit(&log_path(dir, 0), positions[5] + 7, 0).unwrap(); // lowest byte of baseOffset
    io.crash();
    let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
    assert!(
        matches!(error, LogError::Corruption { position, .. } if position == positions[5]),
        "{error}"
    );
}

#[test]
fn a_torn_tail_slot_rewrite_keeps_the_previously_acknowledged_tail() {
    // Acknowledged: batch A, whose block is only in a tail slot. Then B is appended into the
    // same block and its flush (a rewrite of the other slot) is torn at a random byte.
    for seed in 0..200 {
        let faults = FaultConfig {
            tear_probability: 1.0,
            writeback_probability: 0.5,
            ..FaultConfig::default()
        };
        let mut io = MemoryIo::new(MemoryConfig {
            seed,
            block_size_bytes: 4096,
            faults,
        });
        let dir = Path::new("/d/torn-slot");
        let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        let a = log.append_as_leader(batch_bytes(1, 200, 1), 1).unwrap();
        log.flush_and_wait(&mut io).unwrap();
        log.append_as_leader(batch_bytes(1, 200, 2), 1).unwrap();
        log.flush(&mut io).unwrap();
        if seed % 2 == 1 {
            io.submit_and_wait(0).unwrap(); // sometimes the write ran, unsynced
        }
        drop(log);
        let crash = io.crash();
        let (mut log, report) = PartitionLog::open(&mut io, dir, small_config())
            .unwrap_or_else(|e| panic!("seed {seed}: {e} after {crash:?}"));
        assert!(
            log.log_end_offset() > a.last_offset,
            "seed {seed}: acknowledged A lost ({report:?})"
        );
        let batches = read_all(&mut log, &mut io);
        assert_eq!(batches[0].base_offset(), 0, "seed {seed}");
    }
}

#[test]
fn recovery_table_on_hand_made_segments() {
    // Rows 1 and 2: the batches must reach the durable mark exactly; whatever lies past it is
    // never read (it was never acknowledged), whatever is wrong below it refuses to open.
    let dir = Path::new("/d/hand-made");
    let (image, positions) = segment_image(6, 100);
    let third = positions[2];
    let len = image.len();
    let cases: Vec<(&str, Vec<u8>, Result<i64, u64>)> = vec![
        ("clean end at the mark", segment_file(&image, len), Ok(12)),
        (
            "zero padding past the mark",
            segment_file(&[image.clone(), vec![0; 3000]].concat(), len),
            Ok(12),
        ),
        (
            "an incomplete batch past the mark is never read",
            segment_file(&image[..len - 40], positions[5]),
            Ok(10),
        ),
        (
            "garbage past the mark is never read",
            segment_file(&[image.clone(), vec![0xab; 3000]].concat(), len),
            Ok(12),
        ),
        (
            "the mark says durable but the last batch is incomplete",
            segment_file(&image[..len - 40], len),
            Err(positions[5] as u64),
        ),
        (
            "the mark says durable but the last batch has a bad CRC",
            {
                let mut bad = image.clone();
                bad[positions[5] + 80] ^= 0xff;
                segment_file(&bad, len)
            },
            Err(positions[5] as u64),
        ),
        (
            "bad batch followed by a valid one",
            {
                let mut bad = image.clone();
                bad[third + 80] ^= 0xff;
                segment_file(&bad, len)
            },
            Err(third as u64),
        ),
        (
            "zeros where the mark says batches are",
            segment_file(&[], 3000),
            Err(0),
        ),
        (
            "garbage only, mark 0",
            segment_file(&[0xab; 5000], 0),
            Ok(0),
        ),
    ];
    for (name, bytes, expected) in cases {
        let mut io = MemoryIo::with_seed(3);
        put_file(&mut io, &log_path(dir, 0), &bytes);
        match (PartitionLog::open(&mut io, dir, small_config()), expected) {
            (Ok((log, report)), Ok(end)) => {
                assert_eq!(log.log_end_offset(), end, "{name}: {report:?}");
                assert_eq!(report.truncated, None, "{name}: nothing is cut");
            }
            (Err(LogError::Corruption { path, position, .. }), Err(at)) => {
                assert_eq!((path, position), (log_path(dir, 0), at), "{name}");
            }
            (other, expected) => panic!(
                "{name}: got {:?}, expected {expected:?}",
                other.map(|(_, r)| r)
            ),
        }
    }
}

/// A log whose last flush never finished: A (5 batches) acknowledged, then B's flush wrote its
/// slot (it reached the medium) but its data-area write failed. Returns the disk and A's end.
fn log_with_an_unfinished_flush(dir: &Path) -> (MemoryIo, i64) {
    let mut io = MemoryIo::new(MemoryConfig {
        seed: 9,
        block_size_bytes: BLOCK,
        faults: FaultConfig {
            writeback_probability: 1.0,
            ..FaultConfig::default()
        },
    });
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    for i in 0..5 {
        log.append_as_leader(batch_bytes(2, 100, i), 1).unwrap();
    }
    let a_end = log.flush_and_wait(&mut io).unwrap();
    log.append_as_leader(batch_bytes(4, 2000, 9), 1).unwrap();
    io.add_fault(FaultTrigger {
        kind: FaultKind::WriteEio,
        path: Some(log_path(dir, 0)),
        offset: Some(0),
        times: Some(1),
    });
    assert!(log.flush_and_wait(&mut io).is_err());
    drop(log);
    io.crash();
    (io, a_end)
}

#[test]
fn an_unfinished_flush_is_never_dropped_below_the_floor() {
    // Rows 3 and 4: dropping the unfinished flush (B) is allowed only when the log still
    // reaches the caller's floor.
    let dir = Path::new("/d/floor");
    let (mut io, a_end) = log_with_an_unfinished_flush(dir);
    let error = PartitionLog::open_with_floor(&mut io, dir, small_config(), a_end + 1).unwrap_err();
    assert!(
        matches!(
            error,
            LogError::TruncateBelowFloor { offset, floor, .. } if offset == a_end && floor == a_end + 1
        ),
        "{error}"
    );
    // Nothing was cut: with a floor at A's end the same files open and drop B.
    let (log, report) = PartitionLog::open_with_floor(&mut io, dir, small_config(), a_end).unwrap();
    assert_eq!(log.log_end_offset(), a_end);
    let truncated = report.truncated.clone().unwrap();
    assert_eq!((truncated.log_end_offset, truncated.row), (a_end, 3));
    assert_eq!(report.unfinished_flush_slot, Some(2), "{report:?}");
}

#[test]
fn damaged_indexes_and_checkpoints_are_rebuilt() {
    let dir = Path::new("/d/index");
    let (mut io, _) = written_log(dir, 40);
    let index = dir.join("00000000000000000000.index");
    let checkpoint = dir.join("leader-epoch-checkpoint");
    let good_index = io.visible_bytes(&index).unwrap();
    assert!(!good_index.is_empty());
    for (name, bytes) in [
        ("empty", vec![]),
        ("torn", good_index[..good_index.len() - 3].to_vec()),
        ("garbage", vec![0xee; 64]),
        ("disagrees", good_index[..good_index.len() - 8].to_vec()),
    ] {
        put_file(&mut io, &index, &bytes);
        put_file(&mut io, &checkpoint, b"0\n7\nnonsense\n");
        let (log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        assert_eq!(report.indexes_rebuilt, vec![0], "{name}");
        assert!(report.epoch_checkpoint_rewritten, "{name}");
        assert_eq!(io.visible_bytes(&index).unwrap(), good_index, "{name}");
        assert_eq!(
            io.visible_bytes(&checkpoint).unwrap(),
            b"0\n1\n1 0\n",
            "{name}"
        );
        log.close(&mut io).unwrap();
    }
}

#[test]
fn a_segment_that_does_not_continue_the_previous_one_refuses_to_open() {
    let dir = Path::new("/d/gap");
    let (image, _) = segment_image(3, 50);
    let mut io = MemoryIo::with_seed(5);
    let sealed = segment_file_image(&image, image.len() as u64, REGION, BLOCK, true);
    put_file(&mut io, &log_path(dir, 0), &sealed);
    put_file(&mut io, &log_path(dir, 9), &segment_file(&[], 0));
    let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
    assert!(
        matches!(&error, LogError::Corruption { path, position: 0, .. } if path == &log_path(dir, 9)),
        "{error}"
    );
}

#[test]
fn a_read_error_during_recovery_is_corruption_with_the_path() {
    let dir = Path::new("/d/eio");
    let (mut io, _) = written_log(dir, 40);
    io.add_fault(FaultTrigger::always_at(
        FaultKind::ReadEio,
        log_path(dir, 0),
        100,
    ));
    let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
    assert!(
        matches!(&error, LogError::Corruption { path, .. } if path == &log_path(dir, 0)),
        "{error}"
    );
}

#[test]
fn a_segment_file_without_a_valid_slot_refuses_to_open() {
    // A `.log` is created atomically with a valid slot: a region without one is corruption,
    // named with the path and the region's offset; a file too short for a region too.
    let dir = Path::new("/d/no-slot");
    let (image, _) = segment_image(3, 50);
    for (name, bytes, position) in [
        (
            "region overwritten",
            {
                let mut file = segment_file(&image, image.len());
                file[REGION as usize..].fill(0x55);
                file
            },
            REGION,
        ),
        ("no region at all", image.clone(), image.len() as u64),
    ] {
        let mut io = MemoryIo::with_seed(7);
        put_file(&mut io, &log_path(dir, 0), &bytes);
        let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
        match &error {
            LogError::Corruption {
                path, position: at, ..
            } => {
                assert_eq!(
                    (path, *at),
                    (&log_path(dir, 0), position),
                    "{name}: {error}"
                )
            }
            other => panic!("{name}: expected corruption, got {other}"),
        }
        assert!(
            error.to_string().contains("00000000000000000000.log"),
            "{error}"
        );
    }
}

#[test]
fn an_old_format_tail_file_is_removed_and_never_trusted() {
    let dir = Path::new("/d/old-tail");
    let (mut io, _) = written_log(dir, 3);
    put_file(
        &mut io,
        &dir.join("00000000000000000000.tail"),
        &[0x55; 16384],
    );
    let (log, report) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert!(
        report
            .files_removed
            .contains(&"00000000000000000000.tail".to_string()),
        "{report:?}"
    );
    assert!(!io.exists(&dir.join("00000000000000000000.tail")));
}

#[test]
fn appends_continue_after_bytes_past_the_mark_were_ignored() {
    // A torn batch past the mark (never acknowledged) is overwritten by the next appends, and a
    // restart after them finds the new batch, not the stale bytes.
    let dir = Path::new("/d/continue");
    let (image, positions) = segment_image(6, 100);
    let mut io = MemoryIo::with_seed(6);
    put_file(
        &mut io,
        &log_path(dir, 0),
        &segment_file(&image[..image.len() - 40], positions[5]),
    );
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    let info = log.append_as_leader(batch_bytes(1, 10, 1), 2).unwrap();
    assert_eq!(info.base_offset, 10);
    log.flush_and_wait(&mut io).unwrap();
    io.crash();
    let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
    let batches = read_all(&mut log, &mut io);
    assert_eq!(batches.len(), 6);
    assert_eq!(batches[5].partition_leader_epoch(), 2);
    let _: Bytes = BytesMut::new().freeze();
}
