//! `ringlog dump` on segment files the engine wrote: it prints every batch up to the newest
//! slot's durable mark (the active segment's partial last block comes from the slot, not the
//! data area) and stops there, never reading the sparse space before the slot region.

use std::path::Path;
use std::process::Command;

use bytes::BytesMut;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::SyscallIo;
use ringlog_engine::log::{LogConfig, PartitionLog};

fn dump(file: &Path) -> String {
    dump_with(file, &[])
}

fn dump_with(file: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_ringlog"))
        .arg("dump")
        .args(args)
        .arg(file)
        .output()
        .expect("ringlog runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn dump_prints_the_batches_of_sealed_and_active_segments_up_to_the_mark() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut io = SyscallIo::for_dir(root.path());
    let config = LogConfig {
        segment_size_bytes: 16 * 1024,
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(&mut io, &dir, config).unwrap();
    for i in 0..25u32 {
        let mut builder = RecordBatchBuilder::new(0);
        builder.append(0, None, Some(&vec![i as u8; 1000]), &[]);
        log.append_as_leader(BytesMut::from(&builder.build().as_bytes()[..]), 3)
            .unwrap();
        log.flush_and_wait(&mut io).unwrap();
    }
    let sizes = log.segment_sizes_bytes();
    log.close(&mut io).unwrap();
    assert!(sizes.len() >= 2, "rolled: {sizes:?}");

    let mut batches = 0;
    for (base, size_bytes) in &sizes {
        let out = dump(&dir.join(format!("{base:020}.log")));
        assert!(
            out.contains(&format!("marks the batches' end at byte {size_bytes}")),
            "{out}"
        );
        assert!(!out.contains("stopped at byte"), "{out}");
        let count: u64 = out
            .lines()
            .filter(|line| line.starts_with("baseOffset: "))
            .count() as u64;
        assert!(out.contains(&format!("\n{count} batches")), "{out}");
        // Each segment's batches continue from its base offset.
        assert!(
            out.contains(&format!("baseOffset: {base} ")),
            "segment {base}: {out}"
        );
        batches += count;
    }
    assert_eq!(
        batches, 25,
        "every batch, the active segment's last one included"
    );
}

/// `ringlog dump --print-records` on a snapshot: the producer state it carries after its header
/// (docs/snapshots.md, "Producer state") is printed decoded, apart from the state machine's
/// records.
#[test]
fn dump_prints_the_producer_state_a_snapshot_carries() {
    use ringlog_net::node::producer_state::ProducerBatch;
    use ringlog_net::node::producer_state_file::{SavedProducerState, encode};
    use ringlog_replication::host::{SnapshotJob, write_snapshot_job};
    use ringlog_replication::state_machine::{KeyValueStateMachine, StateMachine};
    use ringlog_replication::types::OffsetAndEpoch;

    let root = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::for_dir(root.path());
    let state = SavedProducerState {
        offset: 10,
        batches: vec![ProducerBatch {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
            last_sequence: 4,
            base_offset: 3,
            last_offset: 7,
            max_timestamp: 1_000,
        }],
    };
    let mut entries = std::collections::BTreeMap::new();
    entries.insert(
        bytes::Bytes::from_static(b"k"),
        bytes::Bytes::from_static(b"v"),
    );
    let job = SnapshotJob {
        snapshot_id: OffsetAndEpoch::new(10, 2),
        format: KeyValueStateMachine::new().snapshot_format(),
        entries,
        voters: None,
        producer_state: Some(bytes::Bytes::from(encode(&state))),
    };
    write_snapshot_job(&mut io, root.path(), &job, 1).unwrap();
    let file = root
        .path()
        .join("checkpoints/00000000000000000010-00000000000000000002.checkpoint");
    let text = dump_with(&file, &["--print-records"]);
    assert!(
        text.contains(
            "control: ProducerState offset: 10 batches: [producerId 7 epoch 0 sequences 0..=4 offsets 3..=7]"
        ),
        "{text}"
    );
    assert!(text.contains("key: k value: v"), "{text}");
}

/// `ringlog dump FILE --print-records | head -1`: the reader goes away after one line, and dump
/// ends by SIGPIPE as a Unix filter does. Until 2026-12-07 it panicked in `println!` ("failed
/// printing to stdout: Broken pipe", exit 101, a backtrace on stderr).
#[test]
fn dump_into_a_pipe_closed_early_ends_quietly() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p-0");
    let mut io = SyscallIo::for_dir(root.path());
    let (mut log, _) = PartitionLog::open(&mut io, &dir, LogConfig::default()).unwrap();
    // Far more output than a pipe holds (64 KiB), so dump is still writing when it closes.
    for i in 0..200u32 {
        let mut builder = RecordBatchBuilder::new(0);
        for record in 0..50u32 {
            builder.append(0, None, Some(format!("{i}-{record}").as_bytes()), &[]);
        }
        log.append_as_leader(BytesMut::from(&builder.build().as_bytes()[..]), 1)
            .unwrap();
    }
    log.flush_and_wait(&mut io).unwrap();
    log.close(&mut io).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringlog"))
        .args(["dump", "--print-records"])
        .arg(dir.join(format!("{:020}.log", 0)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ringlog runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("Dumping"), "{first}");
    // The reader drops here, closing the pipe.
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGPIPE),
        "{status}; stderr: {stderr}"
    );
    assert!(stderr.is_empty(), "{stderr}");
}
