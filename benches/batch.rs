//! RecordBatch v2 throughput: validate (parse: frame + CRC32C), validate and walk every record,
//! and encode (build), for 16 KiB and 1 MiB batches of 1 KiB records; raw CRC32C over the same
//! bytes is the baseline validation cannot beat (the node's, `ringlog_engine::crc`, and beside it
//! the `crc32c` crate's).
//!
//! Run: cargo bench --bench batch   (add `-- --quick` for a short run)

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ringlog_engine::batch::{RecordBatch, RecordBatchBuilder};

const RECORD_VALUE_BYTES: usize = 1024;

fn build(batch_bytes: usize, value: &[u8]) -> RecordBatch {
    let records = batch_bytes / RECORD_VALUE_BYTES;
    let mut builder =
        RecordBatchBuilder::with_capacity(0, batch_bytes + records * 16).with_leader_epoch(1);
    for i in 0..records {
        let key = (i as u64).to_be_bytes();
        builder.append(1_700_000_000_000 + i as i64, Some(&key), Some(value), &[]);
    }
    builder.build()
}

fn bench_batch(c: &mut Criterion) {
    let value = vec![0xa5u8; RECORD_VALUE_BYTES];
    for (label, batch_bytes) in [("16KiB", 16 * 1024), ("1MiB", 1024 * 1024)] {
        let batch = build(batch_bytes, &value);
        let bytes = batch.as_bytes().clone();
        let mut group = c.benchmark_group(format!("batch/{label}"));
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function("crc32c_baseline", |b| {
            b.iter(|| ringlog_engine::crc::crc32c(black_box(&bytes[21..])))
        });
        // The implementation the node used until 2026-12-05 (engine/src/crc.rs says why not).
        group.bench_function("crc32c_crate", |b| {
            b.iter(|| crc32c::crc32c(black_box(&bytes[21..])))
        });
        group.bench_function("validate", |b| {
            b.iter(|| RecordBatch::parse(black_box(bytes.clone())).expect("valid"))
        });
        group.bench_function("validate_and_iterate", |b| {
            b.iter(|| {
                let batch = RecordBatch::parse(black_box(bytes.clone())).expect("valid");
                let mut value_bytes = 0;
                for record in batch.records().expect("uncompressed") {
                    value_bytes += record.expect("valid record").value().map_or(0, |v| v.len());
                }
                value_bytes
            })
        });
        group.bench_function("encode", |b| {
            b.iter(|| build(batch_bytes, black_box(&value)))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_batch);
criterion_main!(benches);
