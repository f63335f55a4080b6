//! Partition log throughput on a real temp folder with the default backend (io_uring, else
//! syscalls): group-committed appends and sequential reads. Reports bytes/s (criterion prints
//! MiB/s from `Throughput::Bytes`).
//!
//! How concurrency is modelled: the log is driven by one event loop, so "N concurrent
//! appenders" means N producers whose requests arrive during the same flush window. One
//! iteration = N appends of one batch holding one 1 KiB record (each producer submits its
//! batch), then one `flush_and_wait` shared by all N waiting producers (one write + fdatasync
//! chain, plus the tail-slot write). With N = 1 every record pays a full fdatasync; with 64 the
//! fdatasync is shared 64 ways, which is what group commit is for.
//!
//! Run: cargo bench --bench append   (add `-- --quick` for a short run)

use std::hint::black_box;
use std::time::Duration;

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::{AnyIo, open_default_io};
use ringlog_engine::log::{LogConfig, PartitionLog};

const RECORD_VALUE_BYTES: usize = 1024;

fn one_record_batch() -> BytesMut {
    let value = vec![0xa5u8; RECORD_VALUE_BYTES];
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(1_700_000_000_000, None, Some(&value), &[]);
    BytesMut::from(&builder.build().as_bytes()[..])
}

fn config() -> LogConfig {
    // Small enough that criterion's many iterations roll segments (and exercise sealing).
    LogConfig {
        segment_size_bytes: 64 << 20,
        ..LogConfig::default()
    }
}

fn bench_append(c: &mut Criterion) {
    let template = one_record_batch();
    let mut group = c.benchmark_group("append_group_commit");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for appenders in [1usize, 8, 64] {
        let folder = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp folder");
        let mut io: AnyIo = open_default_io().expect("an I/O backend");
        let (mut log, _) =
            PartitionLog::open(&mut io, &folder.path().join("p-0"), config()).unwrap();
        group.throughput(Throughput::Bytes((appenders * template.len()) as u64));
        group.bench_function(format!("1KiB_records/{appenders}_appenders"), |b| {
            b.iter(|| {
                for _ in 0..appenders {
                    log.append_as_leader(template.clone(), 1).unwrap();
                }
                black_box(log.flush_and_wait(&mut io).unwrap())
            })
        });
        log.close(&mut io).unwrap();
    }
    group.finish();
}

fn bench_sequential_read(c: &mut Criterion) {
    let template = one_record_batch();
    let folder = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp folder");
    let mut io: AnyIo = open_default_io().expect("an I/O backend");
    let (mut log, _) = PartitionLog::open(&mut io, &folder.path().join("p-0"), config()).unwrap();
    let total_bytes = 128usize << 20;
    let batches = total_bytes / template.len();
    for i in 0..batches {
        log.append_as_leader(template.clone(), 1).unwrap();
        if i % 1024 == 1023 {
            log.flush(&mut io).unwrap();
        }
    }
    log.flush_and_wait(&mut io).unwrap();
    let end = log.log_end_offset();
    let mut group = c.benchmark_group("sequential_read");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes((batches * template.len()) as u64));
    group.bench_function("128MiB_in_1MiB_reads", |b| {
        b.iter(|| {
            let mut offset = 0;
            let mut bytes_read = 0usize;
            while offset < end {
                let view = log.read(&io, offset, 1 << 20).unwrap();
                let bytes = log.read_view_bytes(&mut io, &view).unwrap();
                bytes_read += bytes.len();
                // One record per batch: the next offset follows from the batch count.
                offset += (bytes.len() / template.len()) as i64;
            }
            black_box(bytes_read)
        })
    });
    group.finish();
    log.close(&mut io).unwrap();
}

criterion_group!(benches, bench_append, bench_sequential_read);
criterion_main!(benches);
