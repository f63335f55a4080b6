//! Helpers shared by the log and recovery tests.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use ringlog_engine::batch::{
    RecordBatch, RecordBatchBuilder, stamp_base_offset, stamp_partition_leader_epoch,
};
use ringlog_engine::io::Io;
use ringlog_engine::log::{LogConfig, PartitionLog};

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 * 1024,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// One batch of `records` records whose values are `value_bytes` long, filled from `seed`.
pub fn batch_bytes(records: usize, value_bytes: usize, seed: u64) -> BytesMut {
    let mut builder = RecordBatchBuilder::new(0);
    for record in 0..records {
        let value: Vec<u8> = (0..value_bytes)
            .map(|i| (seed as usize * 31 + record * 7 + i) as u8)
            .collect();
        builder.append(1_700_000_000_000 + seed as i64, None, Some(&value), &[]);
    }
    BytesMut::from(&builder.build().as_bytes()[..])
}

/// A batch as a leader would have stamped it.
pub fn stamped(mut batch: BytesMut, base_offset: i64, epoch: i32) -> Bytes {
    stamp_base_offset(&mut batch, base_offset);
    stamp_partition_leader_epoch(&mut batch, epoch);
    batch.freeze()
}

pub fn parse_at(bytes: &[u8], position: usize) -> RecordBatch {
    let length =
        i32::from_be_bytes(bytes[position + 8..position + 12].try_into().unwrap()) as usize;
    RecordBatch::parse(Bytes::copy_from_slice(
        &bytes[position..position + 12 + length],
    ))
    .unwrap()
}

/// Every batch from the log start to the log end, through `read` (memory and file views).
pub fn read_all<I: Io>(log: &mut PartitionLog, io: &mut I) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let view = log.read(io, offset, 3000).unwrap();
        assert!(
            !view.is_empty(),
            "a read below the log end returns at least one batch"
        );
        let bytes = log.read_view_bytes(io, &view).unwrap();
        let mut position = 0;
        while position < bytes.len() {
            let batch = parse_at(&bytes, position);
            position += batch.size_bytes();
            if batch.last_offset() >= offset {
                offset = batch.last_offset() + 1;
                out.push(batch);
            }
        }
    }
    out
}
