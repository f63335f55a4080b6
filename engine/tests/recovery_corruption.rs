//! Recovery decisions on damaged files (engine/src/log/recovery.rs, the decision table): torn
//! final writes are cut, interior corruption refuses to open with the path and byte offset, the
//! floor (high-watermark) is never crossed, indexes and checkpoints are rebuilt, never a panic.

mod log_support;

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use log_support::*;
use ringlog_engine::io::memory::{FaultConfig, FaultKind, FaultTrigger};
use ringlog_engine::io::{AlignedBuf, Io, MemoryConfig, MemoryIo, Op, OpenOptions};
use ringlog_engine::log::{LogError, PartitionLog};

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
fn recovery_table_on_a_segment_without_a_tail_file() {
    let dir = Path::new("/d/no-tail");
    let (image, positions) = segment_image(6, 100);
    let third = positions[2];
    let cases: Vec<(&str, Vec<u8>, Result<i64, u64>)> = vec![
        ("clean end", image.clone(), Ok(12)),
        (
            "clean end with zero padding",
            [image.clone(), vec![0; 3000]].concat(),
            Ok(12),
        ),
        (
            "incomplete last batch",
            image[..image.len() - 40].to_vec(),
            Ok(10),
        ),
        (
            "last batch with a bad CRC, zeros after",
            {
                let mut bad = image.clone();
                let last = positions[5] + 80;
                bad[last] ^= 0xff;
                [bad, vec![0; 100]].concat()
            },
            Ok(10),
        ),
        (
            "bad batch followed by a valid one",
            {
                let mut bad = image.clone();
                bad[third + 80] ^= 0xff;
                bad
            },
            Err(third as u64),
        ),
        ("garbage only", vec![0xab; 5000], Ok(0)),
    ];
    for (name, bytes, expected) in cases {
        let mut io = MemoryIo::with_seed(3);
        put_file(&mut io, &log_path(dir, 0), &bytes);
        match (PartitionLog::open(&mut io, dir, small_config()), expected) {
            (Ok((log, report)), Ok(end)) => {
                assert_eq!(log.log_end_offset(), end, "{name}: {report:?}");
                assert_eq!(
                    report.truncated.is_some(),
                    end < 12 && !bytes.is_empty(),
                    "{name}: {report:?}"
                );
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

#[test]
fn a_torn_tail_is_never_cut_below_the_floor() {
    let dir = Path::new("/d/floor");
    let (image, _) = segment_image(6, 100);
    let mut io = MemoryIo::with_seed(4);
    put_file(&mut io, &log_path(dir, 0), &image[..image.len() - 40]);
    let error = PartitionLog::open_with_floor(&mut io, dir, small_config(), 12).unwrap_err();
    assert!(
        matches!(
            error,
            LogError::TruncateBelowFloor {
                offset: 10,
                floor: 12,
                ..
            }
        ),
        "{error}"
    );
    // Nothing was cut: with a lower floor the same files open and cut the torn batch.
    let (log, report) = PartitionLog::open_with_floor(&mut io, dir, small_config(), 10).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    assert_eq!(report.truncated.unwrap().log_end_offset, 10);
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
    put_file(&mut io, &log_path(dir, 0), &image);
    put_file(&mut io, &log_path(dir, 9), &[]);
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
fn a_tail_file_without_a_valid_slot_refuses_to_open() {
    let dir = Path::new("/d/tail");
    let (mut io, _) = written_log(dir, 3);
    put_file(
        &mut io,
        &dir.join("00000000000000000000.tail"),
        &[0x55; 16384],
    );
    let error = PartitionLog::open(&mut io, dir, small_config()).unwrap_err();
    assert!(
        error.to_string().contains("00000000000000000000.tail"),
        "{error}"
    );
}

#[test]
fn appends_continue_after_a_torn_tail_was_cut() {
    let dir = Path::new("/d/continue");
    let (image, _) = segment_image(6, 100);
    let mut io = MemoryIo::with_seed(6);
    put_file(&mut io, &log_path(dir, 0), &image[..image.len() - 40]);
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
