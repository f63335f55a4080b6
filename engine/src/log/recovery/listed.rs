//! Recovery's side of a segment's batch list (module `batch_list`): which of its records may
//! stand for the batches they name.

use std::path::Path;

use super::super::batch_list;
use super::super::blocking;
use super::super::{LogConfig, LogError};
use super::image::SegmentImage;
use crate::batch::RecordBatchHeader;
use crate::batch::split::validate_front_batch;
use crate::epoch_cache::LeaderEpochCache;
use crate::io::Io;

/// The batches of the segment's list that recovery may take without reading them (module
/// `batch_list`): the intact, consistent prefix inside the durable mark, whose epochs agree with
/// the leader-epoch-checkpoint found, and whose last batch is in the data area as listed; none
/// if any of that fails. Also how many records the file holds.
pub(super) fn listed_batches<I: Io>(
    io: &mut I,
    dir: &Path,
    base_offset: i64,
    previous_epoch: i32,
    image: &SegmentImage<'_>,
    checkpoint: Option<&LeaderEpochCache>,
    config: &LogConfig,
) -> Result<(Vec<batch_list::ListedBatch>, usize), LogError> {
    let Ok(Some(bytes)) = blocking::read_whole_file(io, &batch_list::path(dir, base_offset)) else {
        return Ok((Vec::new(), 0));
    };
    let records = bytes.len() / batch_list::RECORD_BYTES;
    let mut listed = batch_list::decode_prefix(base_offset, &bytes);
    listed.truncate(batch_list::consistent_prefix(
        &listed,
        base_offset,
        previous_epoch,
        image.len,
    ));
    // Each run of one epoch: its first and last batch must have that epoch in the checkpoint
    // (below the checkpoint's first entry, the log start moved past: nothing to compare).
    let agrees = |batch: &batch_list::ListedBatch| {
        batch.epoch < 0
            || checkpoint.is_some_and(|cache| {
                cache
                    .earliest_entry()
                    .is_some_and(|first| batch.base_offset < first.start_offset)
                    || cache.epoch_for_offset(batch.base_offset) == Some(batch.epoch)
            })
    };
    let run_ends = listed.iter().enumerate().filter(|(i, batch)| {
        *i == 0
            || *i + 1 == listed.len()
            || listed[i - 1].epoch != batch.epoch
            || listed[i + 1].epoch != batch.epoch
    });
    if !run_ends.clone().all(|(_, batch)| agrees(batch)) {
        return Ok((Vec::new(), records));
    }
    if let Some(last) = listed.last().copied() {
        let mut bytes = Vec::with_capacity(last.size_bytes as usize);
        image.append(io, last.position, last.end(), &mut bytes)?;
        let there = validate_front_batch(&bytes, last.position, config.max_batch_size_bytes)
            .is_ok_and(|size_bytes| {
                let header = RecordBatchHeader::view(&bytes[..size_bytes]);
                size_bytes as u64 == u64::from(last.size_bytes)
                    && header.base_offset() == last.base_offset
                    && header.last_offset() == last.last_offset
                    && header.partition_leader_epoch() == last.epoch
                    && header.max_timestamp() == last.max_timestamp
                    && header.is_control() == last.control
            });
        if !there {
            return Ok((Vec::new(), records));
        }
    }
    Ok((listed, records))
}
