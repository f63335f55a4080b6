//! Crash tests of the partition log on the deterministic memory backend (ARCHITECTURE: "crash at
//! every write boundary and at random bytes, recover, check that every synced record is there and
//! nothing after a torn batch is").
//!
//! Each seed runs a random history of appends (sizes crossing blocks and segments), flushes,
//! completions, waits, epoch changes, truncations, log-start-offset advances and crashes. A crash
//! drops everything not fdatasynced, lets unsynced writes through at random, and tears any
//! unsynced write at a random byte (`tear_every_unsynced_write`): a flush's data-area write,
//! its slot write and the confirmation record riding with it, all in the one segment file
//! before its one fdatasync, each land whole, torn or not at all. After every reopen:
//!   - every batch ever reported durable is there, byte for byte;
//!   - the recovered log is exactly a prefix of what was appended (nothing after a torn batch);
//!   - appending continues at the recovered end.
//!
//! Some seeds also inject write/fdatasync EIO and ENOSPC: after EIO the log must stop, after
//! ENOSPC it must go on (`LogError::NoSpace`, flushes asked again later), and the restart must
//! satisfy the same rules.
//!
//! A failing seed prints itself; replay one with `LOG_CRASH_SEED=<seed> cargo test --test log_crash`.

mod log_support;

use std::path::Path;

use bytes::{Bytes, BytesMut};
use log_support::*;
use ringlog_engine::batch::{stamp_base_offset, stamp_partition_leader_epoch};
use ringlog_engine::io::memory::{FaultConfig, SimRng};
use ringlog_engine::io::{Io, MemoryConfig, MemoryIo};
use ringlog_engine::log::{LogConfig, LogError, PartitionLog, Routed};

const SEEDS: u64 = 1500;
const STEPS: usize = 160;

#[test]
fn crash_anywhere_keeps_the_durable_prefix_exactly() {
    if let Ok(seed) = std::env::var("LOG_CRASH_SEED") {
        let seed: u64 = seed.parse().expect("LOG_CRASH_SEED is a number");
        // Seeds from 1_000_000 are the write-error runs.
        if let Err(message) = run_seed(seed, seed >= 1_000_000) {
            panic!("seed {seed}: {message}");
        }
        return;
    }
    let mut failures = Vec::new();
    for seed in 0..SEEDS {
        if let Err(message) = run_seed(seed, false) {
            eprintln!("log_crash: seed {seed} failed: {message}");
            failures.push(seed);
        }
    }
    assert!(
        failures.is_empty(),
        "failing seeds (replay with LOG_CRASH_SEED=<seed>): {failures:?}"
    );
    // Recoveries took batches from the segments' batch lists (the path under test), not only
    // from scans.
    assert!(BATCHES_FROM_LIST.load(std::sync::atomic::Ordering::Relaxed) > 0);
    // And deferring opens took some unread after crashes, checked behind.
    assert!(UNVERIFIED_CHECKED.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// Batches deferring opens took unread after a crash and `verify_listed` read back.
static UNVERIFIED_CHECKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Batches recoveries took from batch lists, over every seed run by this binary.
static BATCHES_FROM_LIST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[test]
fn write_errors_stop_the_log_and_a_restart_keeps_the_durable_prefix() {
    let mut failures = Vec::new();
    for seed in 0..SEEDS / 5 {
        if let Err(message) = run_seed(1_000_000 + seed, true) {
            eprintln!("log_crash: seed {} failed: {message}", 1_000_000 + seed);
            failures.push(1_000_000 + seed);
        }
    }
    assert!(
        failures.is_empty(),
        "failing seeds (replay with LOG_CRASH_SEED=<seed>): {failures:?}"
    );
}

/// What the test knows about the log.
struct Model {
    /// Every appended batch not truncated since, in offset order: (base, last, stamped bytes).
    batches: Vec<(i64, i64, Bytes)>,
    /// The durable end offset the log last reported.
    durable: i64,
    /// The high-watermark floor the test promises never to cut below.
    floor: i64,
    epoch: i32,
}

fn run_seed(seed: u64, with_write_errors: bool) -> Result<(), String> {
    let mut rng = SimRng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let block = if rng.chance(0.5) { 512 } else { 4096 };
    let faults = FaultConfig {
        tear_probability: 0.8,
        tear_every_unsynced_write: rng.chance(0.7),
        writeback_probability: 0.3,
        reorder_completions: rng.chance(0.5),
        delay_probability: if rng.chance(0.5) { 0.3 } else { 0.0 },
        write_eio_probability: if with_write_errors { 0.01 } else { 0.0 },
        write_enospc_probability: if with_write_errors { 0.005 } else { 0.0 },
        fsync_eio_probability: if with_write_errors { 0.01 } else { 0.0 },
        ..FaultConfig::default()
    };
    let mut io = MemoryIo::new(MemoryConfig {
        seed,
        block_size_bytes: block,
        faults,
    });
    let segment_size_bytes = [8192, 16 * 1024, 64 * 1024][rng.below(3) as usize];
    let config = LogConfig {
        segment_size_bytes,
        index_interval_bytes: [128, 1024, 4096][rng.below(3) as usize],
        // Recovery reads the segment a few blocks at a time, so batches cross its chunks' ends.
        recovery_read_bytes: [1000, 4096, 3 * 4096, 1 << 20][rng.below(4) as usize],
        // The batch list written after every flush, every few blocks, or only at seals.
        batch_list_interval_bytes: [0, 700, 4096, 1 << 30][rng.below(4) as usize],
        // Odd seeds take the listed batches unread after a crash and check them behind.
        defer_listed_check_after_crash: seed % 2 == 1,
        ..LogConfig::default()
    };
    let dir = Path::new("/disk/metadata-0");
    let mut model = Model {
        batches: Vec::new(),
        durable: 0,
        floor: 0,
        epoch: 1,
    };
    let mut log = reopen(&mut io, dir, &config, &mut model, with_write_errors)?;
    for step in 0..STEPS {
        let outcome = one_step(&mut rng, &mut io, &mut log, &mut model, dir);
        if std::env::var("LOG_CRASH_TRACE").is_ok() {
            eprintln!(
                "step {step}: {outcome:?} end {} durable {} model.durable {} floor {}",
                log.log_end_offset(),
                log.durable_end_offset(),
                model.durable,
                model.floor
            );
        }
        match outcome {
            Ok(true) => {}
            Ok(false) => {
                // A crash (chosen, or the log stopped after an I/O error): power loss, restart.
                // Sometimes after a clean close (its batch lists then stand in for reading,
                // though the crash may tear them: they were never fsynced).
                if rng.chance(0.3) {
                    let _ = log.close(&mut io);
                } else {
                    drop(log);
                }
                io.crash();
                log = reopen(&mut io, dir, &config, &mut model, with_write_errors)
                    .map_err(|e| format!("step {step}: {e}"))?;
            }
            Err(message) => return Err(format!("step {step}: {message}")),
        }
    }
    drop(log);
    io.crash();
    reopen(&mut io, dir, &config, &mut model, with_write_errors).map(|_| ())
}

/// One random action. `Ok(false)`: crash now.
fn one_step(
    rng: &mut SimRng,
    io: &mut MemoryIo,
    log: &mut PartitionLog,
    model: &mut Model,
    dir: &Path,
) -> Result<bool, String> {
    let result: Result<(), LogError> = match rng.below(100) {
        0..=39 => {
            let mut buf = BytesMut::new();
            let count = 1 + rng.below(3) as usize;
            for _ in 0..count {
                let records = 1 + rng.below(3) as usize;
                let value_bytes = [0, 10, 100, 700, 1500][rng.below(5) as usize];
                buf.extend_from_slice(&batch_bytes(records, value_bytes, rng.next_u64() % 1000));
            }
            let expected_base = log.log_end_offset();
            let input = buf.clone();
            match log.append_as_leader(buf, model.epoch) {
                Ok(info) => {
                    if info.base_offset != expected_base {
                        return Err(format!(
                            "append got base {} expected {expected_base}",
                            info.base_offset
                        ));
                    }
                    record_append(model, input, expected_base);
                    Ok(())
                }
                Err(error) => Err(error),
            }
        }
        40..=57 => log.flush(io),
        58..=72 => pump(io, log, model, rng.chance(0.5)),
        73..=77 => log.flush_and_wait(io).map(|durable| {
            model.durable = durable;
        }),
        78..=80 => {
            model.epoch += 1;
            Ok(())
        }
        81..=84 => {
            let end = log.log_end_offset();
            let low = model.floor.max(log.log_start_offset());
            if end > low {
                let offset = low + rng.below((end - low) as u64 + 1) as i64;
                // A truncation that fails midway may or may not have taken effect: from here on
                // only what lies below `offset` is promised.
                let cut = model
                    .batches
                    .iter()
                    .find(|(_, last, _)| *last >= offset)
                    .map_or(offset, |b| b.0);
                model.durable = model.durable.min(cut);
                match log.truncate_to(io, offset, model.floor) {
                    Ok(new_end) => {
                        if new_end < model.floor || new_end > offset {
                            return Err(format!("truncate_to({offset}) ended at {new_end}"));
                        }
                        model.batches.retain(|(_, last, _)| *last < new_end);
                        model.durable = log.durable_end_offset();
                        Ok(())
                    }
                    // The batch holding `offset` starts below the floor: refused, unchanged.
                    Err(LogError::TruncateBelowFloor { .. }) if log.log_end_offset() == end => {
                        Ok(())
                    }
                    // Injected I/O error mid-truncation: stop and restart (see above).
                    Err(_) if io.config().faults.write_eio_probability > 0.0 => return Ok(false),
                    Err(error) => Err(error),
                }
            } else {
                Ok(())
            }
        }
        85..=88 => {
            let high = model.floor.min(log.durable_end_offset());
            if high > log.log_start_offset() {
                let offset = log.log_start_offset()
                    + rng.below((high - log.log_start_offset()) as u64 + 1) as i64;
                log.advance_log_start_offset(io, offset).map(|_| ())
            } else {
                Ok(())
            }
        }
        89..=93 => {
            // The high-watermark moves up, never past what is durable here.
            let durable = log.durable_end_offset();
            if durable > model.floor {
                model.floor += rng.below((durable - model.floor) as u64 + 1) as i64;
            }
            Ok(())
        }
        _ => return Ok(false),
    };
    model.durable = model
        .durable
        .max(log.durable_end_offset())
        .min(log.log_end_offset());
    match result {
        Ok(()) => Ok(true),
        // Out of space: the log goes on (nothing was lost), a later flush asks again.
        Err(error) if error.is_no_space() => Ok(true),
        Err(
            error @ (LogError::WriteFailed { .. }
            | LogError::Stopped { .. }
            | LogError::Io(_)
            | LogError::EpochCache { .. }),
        ) if io.config().faults.write_eio_probability > 0.0 => {
            if std::env::var("LOG_CRASH_TRACE").is_ok() {
                eprintln!("stopping on: {error}");
            }
            Ok(false)
        }
        Err(error) => Err(format!("{error} (in {})", dir.display())),
    }
}

/// Run ready completions through the log, as an event loop would.
fn pump(
    io: &mut MemoryIo,
    log: &mut PartitionLog,
    model: &mut Model,
    wait: bool,
) -> Result<(), LogError> {
    let min = if wait && io.in_flight() > 0 { 1 } else { 0 };
    io.submit_and_wait(min)?;
    let mut ready = Vec::new();
    io.drain_completions(&mut ready);
    // Every drained completion is routed, also after an error: out of space the log goes on
    // and waits for the rest of its chain.
    let mut first_error = None;
    for completion in ready {
        match log.on_completion(io, completion) {
            Ok(Routed::Mine {
                durable_end_offset_advanced_to: Some(offset),
            }) => model.durable = offset,
            Ok(Routed::Mine { .. }) => {}
            Ok(Routed::Foreign(completion)) => {
                panic!("no other user of this Io: {completion:?}")
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn record_append(model: &mut Model, input: BytesMut, base_offset: i64) {
    let mut position = 0;
    let mut next = base_offset;
    while position < input.len() {
        let batch = parse_at(&input, position);
        let mut bytes = BytesMut::from(batch.as_bytes().as_ref());
        stamp_base_offset(&mut bytes, next);
        stamp_partition_leader_epoch(&mut bytes, model.epoch);
        let last = next + (batch.last_offset() - batch.base_offset());
        model.batches.push((next, last, bytes.freeze()));
        next = last + 1;
        position += batch.size_bytes();
    }
}

/// Restart after a crash and check the recovered log against the model.
fn reopen(
    io: &mut MemoryIo,
    dir: &Path,
    config: &LogConfig,
    model: &mut Model,
    with_write_errors: bool,
) -> Result<PartitionLog, String> {
    // A restart may itself hit an injected write error: power-cycle again, as an operator would.
    let mut attempts = 0;
    let (mut log, report) = loop {
        match PartitionLog::open_with_floor(io, dir, config.clone(), model.floor) {
            Ok(opened) => {
                BATCHES_FROM_LIST.fetch_add(
                    opened.1.batches_from_list,
                    std::sync::atomic::Ordering::Relaxed,
                );
                break opened;
            }
            Err(
                LogError::WriteFailed { .. }
                | LogError::NoSpace { .. }
                | LogError::Io(_)
                | LogError::EpochCache { .. },
            ) if with_write_errors && attempts < 20 => {
                attempts += 1;
                io.crash();
            }
            Err(error) => return Err(format!("reopen failed: {error}")),
        }
    };
    // What a deferring open took unread reads back (nothing here flips bits).
    for unverified in &report.unverified {
        PartitionLog::verify_listed(io, unverified, config)
            .map_err(|error| format!("listed batches taken unread do not read back: {error}"))?;
        UNVERIFIED_CHECKED.fetch_add(unverified.batches(), std::sync::atomic::Ordering::Relaxed);
    }
    let end = log.log_end_offset();
    if end < model.durable {
        return Err(format!(
            "lost durable records: recovered end {end} < durable {} ({report:?})",
            model.durable
        ));
    }
    let recovered = read_all(&mut log, io);
    let mut expected = model
        .batches
        .iter()
        .skip_while(|(_, last, _)| *last < log.log_start_offset());
    let mut next = None;
    for batch in &recovered {
        let Some((base, _, bytes)) = expected.next() else {
            return Err(format!(
                "recovered batch at {} was never appended",
                batch.base_offset()
            ));
        };
        if batch.as_bytes() != bytes {
            return Err(format!(
                "batch at {base} differs from what was appended ({report:?})"
            ));
        }
        if let Some(next) = next
            && batch.base_offset() != next
        {
            return Err(format!(
                "gap: batch at {} after {next}",
                batch.base_offset()
            ));
        }
        next = Some(batch.last_offset() + 1);
    }
    if log.durable_end_offset() != end {
        return Err("after recovery everything recovered is durable".into());
    }
    if let Some(latest) = log.latest_epoch()
        && log.end_offset_for_epoch(latest) != (latest, end)
    {
        return Err("epoch cache disagrees with the log end".into());
    }
    // What was not recovered was never acknowledged: forget it.
    model.batches.retain(|(_, last, _)| *last < end);
    model.durable = end;
    model.epoch = model.epoch.max(log.latest_epoch().unwrap_or(0));
    Ok(log)
}
