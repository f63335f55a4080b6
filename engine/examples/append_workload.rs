//! The engine's append workload, for scripts/append-vs-fio.sh: 1 KiB records, one batch per
//! record, group-committed every `--write-size-bytes` of appended batches (one flush: one
//! linked chain on the segment file, the slot write (+ the previous flush's confirmation
//! record), the full blocks' write, one fdatasync), on the default backend (io_uring, else
//! syscalls). Prints the bandwidth and the CPU time spent appending.
//!
//! Two modes, one flush in flight at a time in both (queue depth 1, like `fio --iodepth=1`):
//! - pipelined (default): the producer builds the next group while the previous group's flush
//!   is in flight, then waits for it and starts the next flush, as producers keep appending
//!   during a group commit's fdatasync;
//! - `--serial`: build a group, then `flush_until_durable`, then the next group: the disk idles
//!   while batches are built, so the append CPU adds to every write's round trip.
//!
//! ```sh
//! cargo run --release -p ringlog-engine --example append_workload -- \
//!     --dir /var/tmp/x --total-bytes 268435456 --write-size-bytes 1048576
//! ```

use std::path::PathBuf;
use std::time::Instant;

use bytes::BytesMut;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::{AnyIo, Completion, Io, open_default_io};
use ringlog_engine::log::{LogConfig, PartitionLog, Routed};

fn main() {
    let mut dir = None;
    let mut total_bytes: u64 = 256 << 20;
    let mut write_size_bytes: u64 = 1 << 20;
    let mut record_bytes: usize = 1024;
    let mut serial = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--dir" => dir = Some(PathBuf::from(value())),
            "--total-bytes" => {
                total_bytes = value().parse().unwrap_or_else(|_| usage("--total-bytes"))
            }
            "--write-size-bytes" => {
                write_size_bytes = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--write-size-bytes"))
            }
            "--record-bytes" => {
                record_bytes = value().parse().unwrap_or_else(|_| usage("--record-bytes"))
            }
            "--serial" => serial = true,
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let dir = dir.unwrap_or_else(|| usage("--dir is required"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("clear the workload folder");
    }
    std::fs::create_dir_all(&dir).expect("create the workload folder");
    let mut io: AnyIo = open_default_io().expect("an I/O backend");
    let backend = match &io {
        AnyIo::Uring(_) => "io_uring",
        AnyIo::Syscall(_) => "syscall",
    };
    let config = LogConfig {
        segment_size_bytes: 1 << 30,
        ..LogConfig::default()
    };
    let (mut log, _) =
        PartitionLog::open(&mut io, &dir.join("append-0"), config).expect("open the log");

    let value = vec![0x5a; record_bytes];
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(1_700_000_000_000, None, Some(&value), &[]);
    let template = BytesMut::from(&builder.build().as_bytes()[..]);

    let started = Instant::now();
    let mut appended_bytes = 0u64;
    let mut flushes = 0u64;
    let mut append_seconds = 0f64;
    // Durable end offset the caller waits for before it starts the next flush (pipelined).
    let mut waiting_for: Option<i64> = None;
    let mut ready = Vec::new();
    while appended_bytes < total_bytes {
        let appending = Instant::now();
        let mut group_bytes = 0u64;
        while group_bytes < write_size_bytes && appended_bytes + group_bytes < total_bytes {
            log.append_as_leader(template.clone(), 1).expect("append");
            group_bytes += template.len() as u64;
        }
        append_seconds += appending.elapsed().as_secs_f64();
        appended_bytes += group_bytes;
        flushes += 1;
        if serial {
            log.flush_until_durable(&mut io).expect("flush");
            continue;
        }
        // Pipelined: the previous group's flush ran while this group was built. Ask for this
        // group's flush (group commit: it starts the moment the previous one completes, or now
        // if none is in flight), wait for the previous group, build the next one meanwhile.
        log.flush(&mut io).expect("flush");
        io.submit_and_wait(0).expect("submit");
        if let Some(target) = waiting_for.replace(log.log_end_offset()) {
            wait_until_durable(&mut io, &mut log, target, &mut ready);
        }
    }
    if let Some(target) = waiting_for {
        wait_until_durable(&mut io, &mut log, target, &mut ready);
    }
    let seconds = started.elapsed().as_secs_f64();
    log.close(&mut io).expect("close");
    let bandwidth = appended_bytes as f64 / seconds;
    println!(
        "backend={backend} block_size_bytes={}",
        io.block_size_bytes()
    );
    println!(
        "mode={} appended_bytes={appended_bytes} flushes={flushes} seconds={seconds:.3} \
         append_cpu_seconds={append_seconds:.3}",
        if serial { "serial" } else { "pipelined" }
    );
    // The first segment file's length (data area + slot region, preallocated): the file shape
    // fio gets in the comparison.
    let first_segment_bytes =
        std::fs::metadata(dir.join("append-0").join(format!("{:020}.log", 0)))
            .map(|metadata| metadata.len())
            .expect("the first segment file");
    println!("segment_file_bytes={first_segment_bytes}");
    println!("bandwidth_bytes_per_sec={bandwidth:.0}");
    println!("bandwidth_mib_per_sec={:.1}", bandwidth / (1 << 20) as f64);
}

/// Route completions until the records below `target` are durable.
fn wait_until_durable(
    io: &mut AnyIo,
    log: &mut PartitionLog,
    target: i64,
    ready: &mut Vec<Completion>,
) {
    while log.durable_end_offset() < target {
        io.submit_and_wait(1).expect("wait for a completion");
        io.drain_completions(ready);
        for completion in ready.drain(..) {
            if let Routed::Foreign(_) = log.on_completion(io, completion).expect("flush") {
                unreachable!("the log is the only user of this Io");
            }
        }
    }
    // The completion may have started the next flush: submit it before building more batches,
    // as an event loop submits what its handlers queued at the end of every turn.
    io.submit_and_wait(0).expect("submit");
}

fn usage(problem: &str) -> ! {
    eprintln!("append_workload: {problem}");
    eprintln!(
        "usage: append_workload --dir DIR [--total-bytes N] [--write-size-bytes N] [--record-bytes N] [--serial]"
    );
    std::process::exit(2);
}
