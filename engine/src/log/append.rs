//! Appending to a log: framing and checking each batch, stamping a leader's, keeping the
//! bytes (the aligned write tail for the flush, the `Bytes` chunk for reads), rolling segments.

use super::*;

/// Whether an append computes each batch's CRC or its caller did when the batch arrived.
#[derive(Clone, Copy)]
enum Crc {
    Check,
    Checked,
}

/// Offsets assigned to (leader) or accepted from (follower) one append call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub batches: usize,
}

impl PartitionLog {
    /// Leader append (KIP-595 leaders append in their own epoch): assign offsets from the log
    /// end, stamp baseOffset and partitionLeaderEpoch in place (neither is CRC-covered, so no
    /// re-checksum), keep the bytes. Durable only after a flush covering them.
    pub fn append_as_leader(
        &mut self,
        batches: BytesMut,
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        self.leader_append(batches, leader_epoch, Crc::Check)
    }

    /// [`PartitionLog::append_as_leader`] of batches whose CRC the caller checked when they
    /// arrived (a Produce's batches, validated before anything is stored; batches the node
    /// built): their frames and counts are checked, their CRC not computed again.
    pub fn append_crc_checked_as_leader(
        &mut self,
        batches: BytesMut,
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        self.leader_append(batches, leader_epoch, Crc::Checked)
    }

    fn leader_append(
        &mut self,
        batches: BytesMut,
        leader_epoch: i32,
        crc: Crc,
    ) -> Result<AppendInfo, LogError> {
        self.check_running()?;
        if let Some(latest) = self.epoch_cache.latest_epoch()
            && leader_epoch < latest
        {
            return Err(self.invalid(crate::batch::BatchError::EpochWentBackwards {
                position: 0,
                previous: latest,
                found: leader_epoch,
            }));
        }
        // Frame, CRC-check and stamp in place, then freeze once: no `Bytes` per batch, no copy
        // (the buffer may be a slice of a larger receive buffer, so it is never re-owned).
        let mut batches = batches;
        let mut metas = std::mem::take(&mut self.append_metas);
        let result = self
            .frame_batches(&batches, &mut metas, crc)
            .and_then(|()| {
                let mut next_offset = self.log_end_offset();
                for meta in &mut metas {
                    let batch = &mut batches[meta.start..meta.start + meta.size_bytes];
                    stamp_base_offset(batch, next_offset);
                    stamp_partition_leader_epoch(batch, leader_epoch);
                    meta.base_offset = next_offset;
                    meta.last_offset = next_offset + meta.last_offset_delta;
                    meta.epoch = leader_epoch;
                    next_offset = meta.last_offset + 1;
                }
                self.append_validated(batches.freeze(), &metas)
            });
        self.append_metas = metas;
        result
    }

    /// Follower append: the leader chose the offsets and epochs; check that they continue this
    /// log (offset continuity, epochs never backwards) before keeping the bytes.
    pub fn append_as_follower(&mut self, batches: Bytes) -> Result<AppendInfo, LogError> {
        self.check_running()?;
        let mut metas = std::mem::take(&mut self.append_metas);
        let result = self
            .frame_batches(&batches, &mut metas, Crc::Check)
            .and_then(|()| {
                let mut chain = BatchChainValidator::expecting(
                    self.log_end_offset(),
                    self.epoch_cache
                        .latest_epoch()
                        .unwrap_or(crate::batch::NO_PARTITION_LEADER_EPOCH),
                );
                for meta in &metas {
                    let header = RecordBatchHeader::view(&batches[meta.start..]);
                    chain
                        .check_header(header, meta.start as u64)
                        .map_err(|source| self.invalid(source))?;
                }
                self.append_validated(batches, &metas)
            });
        self.append_metas = metas;
        result
    }

    /// Frame (and, unless the caller did, CRC-check) every batch of an append into `metas`
    /// (cleared first), reading the headers in place.
    fn frame_batches(
        &self,
        bytes: &[u8],
        metas: &mut Vec<BatchMeta>,
        crc: Crc,
    ) -> Result<(), LogError> {
        metas.clear();
        let mut start = 0;
        while start < bytes.len() {
            let rest = &bytes[start..];
            let max = self.config.max_batch_size_bytes;
            let size_bytes = match crc {
                Crc::Check => validate_front_batch(rest, start as u64, max),
                Crc::Checked => frame_front_batch(rest, start as u64, max),
            }
            .map_err(|source| self.invalid(source))?;
            if size_bytes as u64 > self.config.segment_size_bytes {
                return Err(LogError::BatchTooLarge {
                    size_bytes,
                    segment_size_bytes: self.config.segment_size_bytes,
                });
            }
            let header = RecordBatchHeader::view(&bytes[start..]);
            metas.push(BatchMeta {
                start,
                size_bytes,
                base_offset: header.base_offset(),
                last_offset: header.last_offset(),
                last_offset_delta: i64::from(header.last_offset_delta()),
                epoch: header.partition_leader_epoch(),
                max_timestamp: header.max_timestamp(),
                control: header.is_control(),
            });
            start += size_bytes;
        }
        if metas.is_empty() {
            return Err(self.invalid(crate::batch::BatchError::Truncated {
                position: 0,
                needed: crate::batch::RECORD_BATCH_OVERHEAD,
                available: 0,
            }));
        }
        Ok(())
    }

    /// Keep validated, stamped batches: roll when a batch would overflow the active segment,
    /// copy into the aligned write tail, remember the `Bytes` for reads, update indexes.
    fn append_validated(
        &mut self,
        bytes: Bytes,
        metas: &[BatchMeta],
    ) -> Result<AppendInfo, LogError> {
        let first = self.segments.last().expect("active segment");
        if first.size_bytes == 0 && metas[0].size_bytes as u64 > first.region_offset {
            // A recovered empty segment created under a smaller segment size: its slot region
            // starts before this batch would end (a new segment would hold it).
            return Err(LogError::BatchTooLarge {
                size_bytes: metas[0].size_bytes,
                segment_size_bytes: first.region_offset,
            });
        }
        let mut run_start = 0;
        for (index, meta) in metas.iter().enumerate() {
            let active = self.segments.last().expect("active segment");
            let run_bytes = (meta.start + meta.size_bytes - metas[run_start].start) as u64;
            // Roll before a batch that would take the active segment past its size, unless
            // it would be the segment's first batch (a batch never spans two segments). A
            // segment created under another configuration keeps its own capacity: data never
            // reaches its slot region.
            let capacity_bytes = self.config.segment_size_bytes.min(active.region_offset);
            if (active.size_bytes > 0 || index > run_start)
                && active.size_bytes + run_bytes > capacity_bytes
            {
                if index > run_start {
                    let run = &metas[run_start..index];
                    self.keep_run(bytes.slice(run_bytes_range(run)), run);
                }
                run_start = index;
                if self.active().size_bytes > 0 {
                    self.roll(meta.base_offset);
                }
            }
            if meta.epoch >= 0 {
                let changed = self
                    .epoch_cache
                    .assign(meta.epoch, meta.base_offset)
                    .map_err(|source| LogError::EpochCache {
                        dir: self.dir.clone(),
                        source,
                    })?;
                self.epoch_cache_dirty |= changed;
            }
        }
        let run = &metas[run_start..];
        let range = run_bytes_range(run);
        // The usual case keeps the whole buffer: slicing a `Bytes` still owned as a `Vec`
        // allocates its shared header, once per append.
        let run_bytes = if range == (0..bytes.len()) {
            bytes
        } else {
            bytes.slice(range)
        };
        self.keep_run(run_bytes, run);
        Ok(AppendInfo {
            base_offset: metas[0].base_offset,
            last_offset: metas[metas.len() - 1].last_offset,
            batches: metas.len(),
        })
    }

    /// Append consecutive batches that all fit the active segment.
    fn keep_run(&mut self, run: Bytes, metas: &[BatchMeta]) {
        let interval = self.config.index_interval_bytes;
        // Off the flush path: here rather than when a flush completes.
        self.release_cached_chunks();
        let segment = self.segments.last_mut().expect("active segment");
        let first = metas[0].start;
        debug_assert_eq!(run_bytes_range(metas).len(), run.len());
        let run_position = segment.size_bytes;
        for meta in metas {
            assert_eq!(
                meta.base_offset, segment.next_offset,
                "batches continue the log"
            );
            let position = run_position + (meta.start - first) as u64;
            segment.index.on_batch_appended(
                segment.base_offset,
                meta.base_offset,
                position,
                meta.size_bytes as u64,
                interval,
            );
            let entry = BatchEntry::after(
                segment.batches.last(),
                meta.base_offset,
                meta.last_offset,
                position,
                meta.max_timestamp,
                meta.control,
                meta.epoch,
            );
            segment.batches.push(entry);
            segment.next_offset = meta.last_offset + 1;
        }
        segment.write_tail.extend_from_slice(&run);
        segment.size_bytes += run.len() as u64;
        segment.chunks.push_back(Chunk {
            position: run_position,
            next_offset: segment.next_offset,
            bytes: run,
        });
        debug_assert_eq!(
            segment.write_tail_start + segment.write_tail.len() as u64,
            segment.size_bytes
        );
    }

    /// Seal the active segment and start a new one at `base_offset` (its files are created by
    /// the first flush that reaches it, after the sealed one is durable).
    fn roll(&mut self, base_offset: i64) {
        let block = self.block_size_bytes;
        let active = self.segments.last_mut().expect("active segment");
        assert_eq!(
            active.next_offset, base_offset,
            "a new segment starts at the log end"
        );
        active.sealed = true;
        let region_offset = self.new_segment_region_offset();
        self.push_segment(Segment::new_empty(
            &self.dir,
            base_offset,
            block,
            region_offset,
        ));
    }
}

/// Where consecutive batches lie in their append's buffer.
fn run_bytes_range(metas: &[BatchMeta]) -> std::ops::Range<usize> {
    let last = &metas[metas.len() - 1];
    metas[0].start..last.start + last.size_bytes
}

/// What an append learned about one batch.
#[derive(Clone, Copy, Debug)]
pub(super) struct BatchMeta {
    start: usize,
    size_bytes: usize,
    base_offset: i64,
    last_offset: i64,
    last_offset_delta: i64,
    epoch: i32,
    max_timestamp: i64,
    control: bool,
}
