//! KIP-630 snapshot throughput on a real folder, next to the plain baseline through the same
//! `Io` backend in the same run:
//!
//! | bench | what is timed |
//! | --- | --- |
//! | `write_snapshot` | encode 16 MiB of key/value records into batches, write `.part`, fdatasync, rename, folder fsync |
//! | `plain_write` | write the same number of bytes to a file in the same chunks, fdatasync |
//! | `load_snapshot` | list, read the whole file, validate every batch (CRC32C, offsets, epoch, header/footer) and walk every record |
//! | `plain_read` | read the same file into memory in the same chunks |
//!
//! Reads come from the page cache (the file was just written): they measure the CPU cost of
//! validation against a memory-speed copy, not the device.
//!
//! Run: `cargo bench --bench snapshot` (`RINGLOG_IO=syscall|uring` picks the backend).

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ringlog_engine::io::{AlignedBuf, AnyIo, Completion, Io, Op, OpenOptions};
use ringlog_engine::snapshot::{
    SnapshotFormat, SnapshotId, SnapshotRecordSink, latest_valid_snapshot, naming, write_snapshot,
};

const RECORDS: usize = 16 * 1024;
const VALUE_BYTES: usize = 1024;
const CHUNK_BYTES: usize = 4 * 1024 * 1024;
const ID: SnapshotId = SnapshotId {
    end_offset: 1_000_000,
    epoch: 3,
};

fn run_one<I: Io>(io: &mut I, op: Op) -> Completion {
    let id = io.submit(op);
    let mut done = Vec::new();
    loop {
        io.submit_and_wait(1).expect("submit_and_wait");
        io.drain_completions(&mut done);
        if let Some(index) = done.iter().position(|c| c.op_id == id) {
            return done.swap_remove(index);
        }
    }
}

fn produce(sink: &mut dyn SnapshotRecordSink) {
    let value = vec![0x5a; VALUE_BYTES];
    for i in 0..RECORDS {
        sink.append_record(Some(&(i as u64).to_be_bytes()), Some(&value));
    }
}

fn write_once<I: Io>(io: &mut I, partition_dir: &Path) {
    let format = SnapshotFormat {
        name: "bench".into(),
        version: 0,
    };
    write_snapshot(io, partition_dir, ID, &format, 0, produce).expect("write snapshot");
}

fn plain_write<I: Io>(io: &mut I, path: &Path, size_bytes: usize) {
    let file = io
        .open(
            path,
            OpenOptions {
                create: true,
                ..Default::default()
            },
        )
        .expect("open");
    let data = vec![0x5a; CHUNK_BYTES];
    let mut offset = 0;
    while offset < size_bytes {
        let len = CHUNK_BYTES.min(size_bytes - offset);
        let buf = AlignedBuf::from_slice(&data[..len], io.block_size_bytes());
        run_one(
            io,
            Op::Write {
                file,
                offset: offset as u64,
                buf,
            },
        )
        .result
        .expect("write");
        offset += len;
    }
    run_one(io, Op::Fdatasync { file })
        .result
        .expect("fdatasync");
    io.close(file).expect("close");
}

fn plain_read<I: Io>(io: &mut I, path: &Path) -> usize {
    let file = io
        .open(
            path,
            OpenOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .expect("open");
    let size = io.file_size_bytes(file).expect("size") as usize;
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let len = CHUNK_BYTES.min(size - out.len());
        let completion = run_one(
            io,
            Op::Read {
                file,
                offset: out.len() as u64,
                len,
            },
        );
        let n = completion.result.expect("read");
        out.extend_from_slice(&completion.buf.expect("read buffer").as_slice()[..n]);
    }
    io.close(file).expect("close");
    std::hint::black_box(&out);
    out.len()
}

fn bench_snapshot(c: &mut Criterion) {
    // A real folder on the data disk (not tmpfs), next to the build output.
    let root = tempfile::Builder::new()
        .prefix("ringlog-snapshot-bench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let partition_dir = root.path().join("__cluster_metadata-0");
    let mut io = AnyIo::from_env(Some(root.path())).expect("io backend");
    io.create_dir_all(&partition_dir).expect("mkdir");
    eprintln!("snapshot bench: io backend = {}", io.backend_name());

    write_once(&mut io, &partition_dir);
    let snapshot_path = naming::checkpoint_path(&partition_dir, ID);
    let size_bytes = std::fs::metadata(&snapshot_path)
        .expect("snapshot written")
        .len() as usize;
    let plain_path = partition_dir.join("plain.bin");

    let mut group = c.benchmark_group("snapshot_16MiB");
    group.throughput(Throughput::Bytes(size_bytes as u64));
    group.sample_size(10);
    group.bench_function("write_snapshot", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                io.remove_file(&snapshot_path).expect("remove previous");
                let start = Instant::now();
                write_once(&mut io, &partition_dir);
                total += start.elapsed();
            }
            total
        })
    });
    group.bench_function("plain_write", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if io.exists(&plain_path) {
                    io.remove_file(&plain_path).expect("remove previous");
                }
                let start = Instant::now();
                plain_write(&mut io, &plain_path, size_bytes);
                total += start.elapsed();
            }
            total
        })
    });
    group.bench_function("load_snapshot", |b| {
        b.iter(|| {
            let (contents, skipped) = latest_valid_snapshot(&mut io, &partition_dir).expect("load");
            assert!(skipped.is_empty());
            let contents = contents.expect("snapshot present");
            let records = contents
                .records()
                .inspect(|r| assert!(r.is_ok(), "record"))
                .count();
            assert_eq!(records, RECORDS);
        })
    });
    group.bench_function("plain_read", |b| {
        b.iter(|| assert_eq!(plain_read(&mut io, &snapshot_path), size_bytes))
    });
    group.finish();
}

criterion_group!(benches, bench_snapshot);
criterion_main!(benches);
