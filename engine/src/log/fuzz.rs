//! Fuzz entry point for recovery: arbitrary bytes become a partition folder on the memory
//! backend, and opening it must give `Ok` or a typed error, never a panic. After a successful
//! open the log must take an append, flush it, read everything back, and reopen after a crash.
//!
//! Input layout: `flags u8 | side_len u16 BE | side bytes | segment bytes`. The segment bytes are
//! the whole `.log` file, slot region (its last 5 blocks) included; flags bit 3 splits them in
//! half into two segment files (base offsets `b` and `b + 2`). Flags bit 0 puts the side bytes
//! in `<base>.tail` (a leftover of the layout before the slot region moved into the `.log`),
//! bit 1 in `<base>.index`, bit 2 in `leader-epoch-checkpoint`; bit 4 picks a 512-byte block
//! size (4096 otherwise), bit 5 gives the first segment base offset 7. The corpus seeds are
//! real folders this code wrote (`engine/tests/log_recovery_fuzz_corpus.rs` makes them), whole,
//! torn and damaged.

use std::path::Path;

use bytes::BytesMut;

use super::{LogConfig, PartitionLog, blocking};
use crate::batch::RecordBatchBuilder;
use crate::io::{Io, MemoryConfig, MemoryIo};

pub fn fuzz_log_recovery(data: &[u8]) {
    let _ = log_recovery_input_outcome(data);
}

/// Run one `log_recovery` input (see the module doc) and say what the first open made of it:
/// `Ok(log end offset)` or the typed error's text; `None` when the input is too short to
/// describe a folder. Panics (the fuzz target's finding) when a recovered log misbehaves.
pub fn log_recovery_input_outcome(data: &[u8]) -> Option<Result<i64, String>> {
    let (&flags, rest) = data.split_first()?;
    if rest.len() < 2 {
        return None;
    }
    let side_len = (u16::from_be_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
    let side = &rest[2..2 + side_len];
    let segment = &rest[2 + side_len..];
    let block_size_bytes = if flags & 0x10 != 0 { 512 } else { 4096 };
    let mut io = MemoryIo::new(MemoryConfig {
        seed: 1,
        block_size_bytes,
        ..MemoryConfig::default()
    });
    let dir = Path::new("/fuzz/p-0");
    let base: i64 = if flags & 0x20 != 0 { 7 } else { 0 };
    let put = |io: &mut MemoryIo, name: String, bytes: &[u8]| {
        blocking::write_whole_file(io, &dir.join(name), bytes).expect("memory backend writes");
    };
    io.create_dir_all(dir).expect("memory backend mkdir");
    if flags & 0x08 != 0 && segment.len() >= 2 {
        let (first, second) = segment.split_at(segment.len() / 2);
        put(&mut io, format!("{base:020}.log"), first);
        put(&mut io, format!("{:020}.log", base + 2), second);
    } else {
        put(&mut io, format!("{base:020}.log"), segment);
    }
    if flags & 0x01 != 0 {
        put(&mut io, format!("{base:020}.tail"), side);
    }
    if flags & 0x02 != 0 {
        put(&mut io, format!("{base:020}.index"), side);
    }
    if flags & 0x04 != 0 {
        put(&mut io, "leader-epoch-checkpoint".to_string(), side);
    }
    for path in [Path::new("/fuzz/p-0"), Path::new("/fuzz"), Path::new("/")] {
        io.sync_dir(path).expect("memory backend fsync dir");
    }

    let config = LogConfig {
        // Small, so that a segment the log creates after recovery stays small in memory.
        segment_size_bytes: 8 << 10,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    let mut log = match PartitionLog::open(&mut io, dir, config.clone()) {
        Ok((log, _report)) => log,
        Err(error) => return Some(Err(error.to_string())),
    };
    let end_before = log.log_end_offset();
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, None, Some(b"after recovery"), &[]);
    let batch = BytesMut::from(&builder.build().as_bytes()[..]);
    let epoch = log.latest_epoch().unwrap_or(0).max(0);
    let info = log
        .append_as_leader(batch, epoch)
        .expect("a recovered log takes an append");
    assert_eq!(info.base_offset, end_before);
    let durable = log
        .flush_and_wait(&mut io)
        .expect("the memory backend has no faults here");
    assert_eq!(durable, end_before + 1);
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let view = log
            .read(&io, offset, 1 << 16)
            .expect("offsets inside the log are readable");
        let bytes = log.read_view_bytes(&mut io, &view).expect("readable");
        assert!(!bytes.is_empty());
        let mut next = offset;
        for batch in crate::batch::batches(&bytes) {
            let batch = batch.expect("recovered batches are valid");
            next = next.max(batch.next_offset());
        }
        assert!(next > offset, "reads make progress");
        offset = next;
    }
    drop(log);
    io.crash();
    let (log, _) = PartitionLog::open(&mut io, dir, config).expect("a log this code wrote reopens");
    assert_eq!(log.log_end_offset(), end_before + 1);
    Some(Ok(end_before))
}
