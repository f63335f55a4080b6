//! Replays every file of fuzz/corpus/log_recovery through the fuzz entry point, so the inputs
//! the fuzzer found interesting (and any crash it once found) run in every test run; and makes
//! the seed inputs of that corpus from folders this code really wrote (whole, torn, damaged),
//! checking that each opens or refuses as its name says.
//!
//! Regenerate the seeds after a change of the on-disk layout:
//! `LOG_RECOVERY_CORPUS_WRITE=1 cargo test -p ringlog-engine --test log_recovery_fuzz_corpus`.

mod log_support;

use std::path::Path;

use log_support::*;
use ringlog_engine::io::memory::{FaultConfig, FaultKind, FaultTrigger};
use ringlog_engine::io::{Io, MemoryConfig, MemoryIo};
use ringlog_engine::log::{LogConfig, PartitionLog, log_recovery_input_outcome, read_segment_end};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/log_recovery");
const BLOCK: usize = 512;
const FLAG_TAIL: u8 = 0x01;
const FLAG_INDEX: u8 = 0x02;
const FLAG_CHECKPOINT: u8 = 0x04;
const FLAG_TWO_SEGMENTS: u8 = 0x08;
const FLAG_BLOCK_512: u8 = 0x10;
const FLAG_BASE_7: u8 = 0x20;

#[test]
fn every_corpus_input_recovers_or_fails_cleanly() {
    let mut count = 0;
    for entry in std::fs::read_dir(CORPUS).expect("the corpus folder exists") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        eprintln!("replaying {}", path.display());
        ringlog_engine::log::fuzz_log_recovery(&data);
        count += 1;
    }
    assert!(count > 0, "the corpus {CORPUS} is empty");
}

/// What a seed must do when opened.
#[derive(Debug)]
enum Expect {
    End(i64),
    Refuse(&'static str),
}

fn config() -> LogConfig {
    LogConfig {
        segment_size_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn memory_io(writeback_probability: f64) -> MemoryIo {
    MemoryIo::new(MemoryConfig {
        seed: 5,
        block_size_bytes: BLOCK,
        faults: FaultConfig {
            writeback_probability,
            ..FaultConfig::default()
        },
    })
}

fn input(flags: u8, side: &[u8], segments: &[u8]) -> Vec<u8> {
    let mut out = vec![flags | FLAG_BLOCK_512];
    out.extend_from_slice(&(side.len() as u16).to_be_bytes());
    out.extend_from_slice(side);
    out.extend_from_slice(segments);
    out
}

/// The newest valid slot's sequence of a segment file's bytes (through a real file, as
/// `ringlog dump` reads it).
fn newest_slot_sequence(file: &[u8]) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    std::fs::write(&path, file).unwrap();
    read_segment_end(&path)
        .unwrap()
        .expect("a slot region")
        .newest_slot_sequence
}

fn durable(io: &MemoryIo, dir: &Path, base: i64) -> Vec<u8> {
    io.durable_bytes(&dir.join(format!("{base:020}.log")))
        .expect("the segment file is durable")
}

/// Appends `records` one-record batches of `value_bytes`, flushing after every third.
fn appended(log: &mut PartitionLog, io: &mut MemoryIo, records: u64, value_bytes: usize) {
    for i in 0..records {
        log.append_as_leader(batch_bytes(1, value_bytes, i), 1)
            .unwrap();
        if i % 3 == 2 {
            log.flush_and_wait(io).unwrap();
        }
    }
    log.flush_and_wait(io).unwrap();
}

fn seeds() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let dir = Path::new("/g/p-0");
    let mut seeds = Vec::new();

    // A whole log, its last block partial (in the newest slot only).
    let mut io = memory_io(0.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    appended(&mut log, &mut io, 7, 300);
    let whole = durable(&io, dir, 0);
    seeds.push(("00-whole-log", input(0, &[], &whole), Expect::End(7)));
    seeds.push((
        "01-whole-log-garbage-index",
        input(FLAG_INDEX, &[0xee; 40], &whole),
        Expect::End(7),
    ));
    seeds.push((
        "02-whole-log-wrong-checkpoint",
        input(FLAG_CHECKPOINT, b"0\n1\n9 3\n", &whole),
        Expect::End(7),
    ));
    seeds.push((
        "03-old-format-tail-left-over",
        input(FLAG_TAIL, &[0x55; 2560], &whole),
        Expect::End(7),
    ));
    let mut flipped = whole.clone();
    flipped[200] ^= 0x08;
    seeds.push((
        "04-interior-flip",
        input(0, &[], &flipped),
        Expect::Refuse("corruption"),
    ));
    let mut no_slot = whole.clone();
    let region = no_slot.len() - 5 * BLOCK;
    no_slot[region..].fill(0x55);
    seeds.push((
        "05-region-garbage",
        input(0, &[], &no_slot),
        Expect::Refuse("no valid slot"),
    ));
    seeds.push((
        "06-short-file",
        input(0, &[], &whole[..3000]),
        Expect::Refuse("no slot region"),
    ));
    // The newest slot damaged after its flush was confirmed: refuse, never fall back.
    let mut torn_slot = whole.clone();
    let newest_slot = region + newest_slot_sequence(&whole) as usize % 2 * 2 * BLOCK;
    torn_slot[newest_slot + 20] ^= 0x01;
    seeds.push((
        "07-confirmed-newest-slot-damaged",
        input(0, &[], &torn_slot),
        Expect::Refuse("confirmed durable but is damaged"),
    ));
    log.close(&mut io).unwrap();

    // Two segments (the first holds offsets 0 and 1: base + 2 is the second's base), each with
    // its region at the same place, so the input splits them in half.
    let mut io = memory_io(0.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    appended(&mut log, &mut io, 5, 1700);
    assert_eq!(log.segment_base_offsets()[..2], [0, 2]);
    let first = durable(&io, dir, 0);
    let second = durable(&io, dir, 2);
    assert_eq!(first.len(), second.len());
    seeds.push((
        "08-two-segments",
        input(
            FLAG_TWO_SEGMENTS,
            &[],
            &[first.clone(), second.clone()].concat(),
        ),
        Expect::End(4),
    ));
    let mut sealed_damaged = first.clone();
    sealed_damaged[1800] ^= 0x40;
    seeds.push((
        "09-sealed-segment-damaged",
        input(
            FLAG_TWO_SEGMENTS,
            &[],
            &[sealed_damaged, second.clone()].concat(),
        ),
        Expect::Refuse("corruption"),
    ));

    // A log starting at offset 7 (a follower that installed a snapshot).
    let mut io = memory_io(0.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    log.truncate_fully_and_start_at(&mut io, 7).unwrap();
    appended(&mut log, &mut io, 4, 200);
    seeds.push((
        "10-base-offset-7",
        input(FLAG_BASE_7, &[], &durable(&io, dir, 7)),
        Expect::End(11),
    ));

    // An unfinished flush: its slot reached the medium, its data-area write did not.
    let mut io = memory_io(1.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    appended(&mut log, &mut io, 3, 100);
    log.append_as_leader(batch_bytes(3, 400, 9), 1).unwrap();
    io.add_fault(FaultTrigger {
        kind: FaultKind::WriteEio,
        path: Some(dir.join(format!("{:020}.log", 0))),
        offset: Some(0),
        times: Some(1),
    });
    assert!(log.flush_and_wait(&mut io).is_err());
    drop(log);
    io.crash();
    seeds.push((
        "11-slot-without-its-blocks",
        input(0, &[], &durable(&io, dir, 0)),
        Expect::End(3),
    ));

    // The newest flush's blocks torn before its confirmation: the previous slot is trusted.
    let mut io = memory_io(0.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    appended(&mut log, &mut io, 2, 100);
    log.append_as_leader(batch_bytes(2, 600, 8), 1).unwrap();
    log.flush(&mut io).unwrap();
    // Route completions until durable, leaving the confirmation record queued (unsynced).
    let target = log.log_end_offset();
    let mut ready = Vec::new();
    while log.durable_end_offset() < target {
        io.submit_and_wait(1).unwrap();
        io.drain_completions(&mut ready);
        for completion in ready.drain(..) {
            log.on_completion(&mut io, completion).unwrap();
        }
    }
    let mut torn_blocks = durable(&io, dir, 0);
    torn_blocks[700] ^= 0x02;
    seeds.push((
        "12-unconfirmed-blocks-torn",
        input(0, &[], &torn_blocks),
        Expect::End(2),
    ));
    let untouched = durable(&io, dir, 0);
    seeds.push((
        "13-durable-before-confirmation",
        input(0, &[], &untouched),
        Expect::End(4),
    ));

    // A cut: stale batches past the mark in the data area.
    let mut io = memory_io(0.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    appended(&mut log, &mut io, 6, 250);
    log.truncate_to(&mut io, 2, 0).unwrap();
    seeds.push((
        "14-stale-batches-past-a-cut",
        input(0, &[], &durable(&io, dir, 0)),
        Expect::End(2),
    ));

    // An empty log's fresh segment.
    let mut io = memory_io(0.0);
    let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
    log.append_as_leader(batch_bytes(1, 10, 1), 1).unwrap();
    log.truncate_to(&mut io, 0, 0).unwrap();
    seeds.push((
        "15-empty-segment",
        input(0, &[], &durable(&io, dir, 0)),
        Expect::End(0),
    ));
    seeds
}

#[test]
fn the_seed_inputs_open_as_their_names_say() {
    let write = std::env::var("LOG_RECOVERY_CORPUS_WRITE").is_ok();
    for (name, data, expect) in seeds() {
        let outcome = log_recovery_input_outcome(&data).expect("a seed describes a folder");
        match (&outcome, &expect) {
            (Ok(end), Expect::End(want)) => assert_eq!(end, want, "{name}"),
            (Err(error), Expect::Refuse(words)) => {
                assert!(error.contains(words), "{name}: {error}")
            }
            _ => panic!("{name}: got {outcome:?}, expected {expect:?}"),
        }
        if write {
            std::fs::write(Path::new(CORPUS).join(name), &data).unwrap();
        } else {
            let committed = std::fs::read(Path::new(CORPUS).join(name)).unwrap_or_default();
            assert!(
                committed == data,
                "{name}: the committed seed differs from what this code writes \
                 (LOG_RECOVERY_CORPUS_WRITE=1 regenerates it)"
            );
        }
    }
}
