//! The partition log: Kafka-layout segments of RecordBatch v2, group commit over the [`Io`]
//! trait, a torn-write-proof tail, and crash recovery (docs/log.md tells the whole design).
//!
//! ```text
//! <dir>/00000000000000000000.log     data area: batches, O_DIRECT, full blocks written once;
//!                                    then the slot region (last 5 blocks): two double-write
//!                                    slots holding the partial last block, a confirmation record
//!       00000000000000000000.index   sparse offset -> position (Kafka layout, advisory)
//!       leader-epoch-checkpoint      epoch -> start offset (Kafka text format)
//! ```
//!
//! Context passing: the log owns no `Io`; every call that touches the disk takes `&mut I`, so
//! many logs can share one backend (one ring). Completions are routed back with
//! [`PartitionLog::on_completion`], which hands foreign ones back untouched.
//!
//! Group commit: appends only copy into memory. [`PartitionLog::flush`] starts one flush (the
//! slot and the full blocks written to the segment file concurrently, then one fdatasync; a
//! flush of one write is a dsync write) if none is in flight; appends that arrive meanwhile
//! wait for the next one, which starts as soon as the current one completes.
//! [`PartitionLog::durable_end_offset`] advances only when the flush is durable.

mod batch_list;
pub(crate) mod blocking;
mod blocking_api;
mod error;
mod flush;
mod fuzz;
pub mod index;
pub mod recovery;
mod reset;
mod segment;
mod tail_slot;
mod write_tail;

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};

use crate::batch::split::validate_front_batch;
use crate::batch::{
    BatchChainValidator, RecordBatchHeader, stamp_base_offset, stamp_partition_leader_epoch,
};
use crate::epoch_cache::{LEADER_EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochCache};
use crate::io::{FileId, FileReader, Io};

pub use error::LogError;
pub use flush::Routed;
pub use fuzz::{fuzz_log_recovery, log_recovery_input_outcome};
pub use recovery::RecoveryReport;
use segment::{BatchEntry, Chunk, Segment};
pub use tail_slot::{SegmentEnd, read_segment_data, read_segment_end, segment_file_image};

/// Kafka's `metadata.log.segment.bytes` default (1 GiB).
pub const DEFAULT_SEGMENT_SIZE_BYTES: u64 = 1 << 30;
/// How far a segment's disk reservation runs ahead of its data by default.
pub const DEFAULT_PREALLOCATE_AHEAD_BYTES: u64 = 16 << 20;

/// Kafka's `index.interval.bytes` default.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u64 = 4096;

/// [`LogConfig::recovery_read_bytes`] by default. Reading the whole segment into one image, as
/// recovery did before, cost a page fault per 4 KiB twice over (the image, and a fresh read buffer
/// per chunk): 1.27 s to open an 850 MB segment, two thirds of it in the kernel's fault path;
/// 8 MiB at a time in one reused buffer, 0.58 s (docs/log.md, "Recovery").
pub const DEFAULT_RECOVERY_READ_BYTES: u64 = 8 << 20;

/// [`LogConfig::batch_list_interval_bytes`] by default: one buffered write of the new records
/// per 4 MiB made durable, and at most 4 MiB (plus a flush) read again by recovery.
pub const DEFAULT_BATCH_LIST_INTERVAL_BYTES: u64 = 4 << 20;

/// How far past a file read the log asks the kernel to read ahead ([`PartitionLog::read`]).
const READ_AHEAD_BYTES: u64 = 4 << 20;

/// [`LogConfig::tail_cache_bytes`] by default.
pub const DEFAULT_TAIL_CACHE_BYTES: u64 = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment before a batch would take the active one past this size
    /// (`metadata.log.segment.bytes`). At most 2 GiB: index positions are 32-bit.
    pub segment_size_bytes: u64,
    /// Bytes of batches between two sparse index entries (`index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// Reserve disk space (fallocate) ahead of the writes, so a write inside the reservation
    /// never hits ENOSPC midway: at most `preallocate_ahead_bytes` past the data written, never
    /// a segment's whole size (1 GiB by default) up front, which a node with a hundred
    /// partitions could not afford (issue 17).
    pub preallocate: bool,
    /// How far the reservation runs ahead of the data written (`preallocate`).
    pub preallocate_ahead_bytes: u64,
    /// A batch claiming more than this is corruption, not a torn write.
    pub max_batch_size_bytes: usize,
    /// How much of a segment recovery reads and scans at a time (rounded up to whole blocks):
    /// the memory an open needs, whatever the segment's size.
    pub recovery_read_bytes: u64,
    /// How many bytes of batches become durable between two writes of a segment's batch list
    /// (`batch_list`, docs/log.md "Recovery"): at most this much of a segment is read again
    /// after a crash, beyond what the list names. A sealed segment's list is written whole.
    pub batch_list_interval_bytes: u64,
    /// How many bytes already written to the active segment's file stay in memory behind its
    /// unwritten tail, so that reads a little behind the durable end (followers and observers
    /// fetching what the leader has just flushed) are answered from memory. The segment is
    /// written with O_DIRECT, so a read of it goes to the disk: with this at zero, a third of
    /// a three-voter quorum's replica traffic was read back from the disk synchronously by
    /// `sendfile` on the event loop's thread (156 MB/s of reads at 159 MB/s of produce,
    /// 2026-12-04).
    pub tail_cache_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_size_bytes: DEFAULT_SEGMENT_SIZE_BYTES,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            preallocate: true,
            preallocate_ahead_bytes: DEFAULT_PREALLOCATE_AHEAD_BYTES,
            max_batch_size_bytes: crate::batch::DEFAULT_MAX_BATCH_SIZE_BYTES,
            recovery_read_bytes: DEFAULT_RECOVERY_READ_BYTES,
            batch_list_interval_bytes: DEFAULT_BATCH_LIST_INTERVAL_BYTES,
            tail_cache_bytes: DEFAULT_TAIL_CACHE_BYTES,
        }
    }
}

/// Offsets assigned to (leader) or accepted from (follower) one append call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub batches: usize,
}

/// Where the bytes of a read are: whole batches, starting at the batch holding the asked offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadView {
    /// A zero-copy slice of the in-memory tail.
    Memory(Bytes),
    /// A region of a segment file, for sendfile/splice from `reader` (or an `Io` read on the
    /// memory backend, which has no reader).
    File {
        /// The engine's own handle (possibly O_DIRECT): for reads through the `Io`.
        file: FileId,
        /// The segment's kept-open buffered descriptor (`Segment::reader`), the same one for
        /// every read of the segment; a clone keeps the bytes readable after the segment is
        /// deleted or truncated away. `None` on the memory backend.
        reader: Option<FileReader>,
        /// The segment file's path, for logs and errors.
        path: PathBuf,
        position: u64,
        length_bytes: u64,
    },
}

impl ReadView {
    pub fn len_bytes(&self) -> u64 {
        match self {
            ReadView::Memory(bytes) => bytes.len() as u64,
            ReadView::File { length_bytes, .. } => *length_bytes,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len_bytes() == 0
    }
}

/// In-flight flush chain of one segment, and confirmation records (see `flush.rs`).
pub(crate) use flush::{InFlightConfirmation, InFlightFlush, PendingConfirmation};

pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    block_size_bytes: usize,
    /// Sorted by base offset; the last one takes appends. Never empty.
    segments: Vec<Segment>,
    log_start_offset: i64,
    durable_end_offset: i64,
    epoch_cache: LeaderEpochCache,
    epoch_cache_dirty: bool,
    in_flight: Option<InFlightFlush>,
    /// The confirmation record being written (off the critical path), and the next one.
    confirming: Option<InFlightConfirmation>,
    confirmation_pending: Option<PendingConfirmation>,
    /// A completed segment write's buffer, reused as the next write tail (no allocation and
    /// no fresh page faults per flush).
    spare_write_buf: Option<crate::io::AlignedBuf>,
    /// Scratch for the batches of one append call (kept: no allocation per append).
    append_metas: Vec<BatchMeta>,
    /// A flush was asked to cover everything below this offset.
    flush_requested_offset: i64,
    /// Bumped by every truncation: a chain started before it must not move the durable offset.
    generation: u64,
    /// Set by the first failed write; every later append or flush fails.
    stopped: Option<String>,
    /// Set while a flush waits for disk space (ENOSPC/EDQUOT): where, and the errno; see
    /// `waiting_for_space`.
    waiting_for_space: Option<(PathBuf, u64, i32)>,
}

impl PartitionLog {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Changes the segment size (a topic's `segment.bytes` altered at runtime): segments
    /// created from now on take it; the active segment keeps its own slot region, so it holds
    /// at most the smaller of the new size and what it was created with (see
    /// `append_validated`), and rolls at the next batch that would pass that.
    pub fn set_segment_size_bytes(&mut self, segment_size_bytes: u64) {
        assert!(
            segment_size_bytes >= 1 && segment_size_bytes <= (i32::MAX as u64),
            "segment_size_bytes must be in 1..=2^31-1 (index positions are 32-bit)"
        );
        self.config.segment_size_bytes = segment_size_bytes;
    }

    /// The first offset still in the log (KIP-630 LogBeginOffset).
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The offset the next appended record gets.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// Every record below this offset is durable (its flush's writes completed).
    pub fn durable_end_offset(&self) -> i64 {
        self.durable_end_offset
    }

    /// Whether a flush chain is in flight.
    pub fn flush_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Kafka's endOffsetFor for a fetcher's LastFetchedEpoch (KIP-320).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epoch_cache
            .end_offset_for_epoch(epoch, self.log_end_offset())
    }

    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    /// The latest leader epoch in the log, if any batch carries one.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epoch_cache.latest_epoch()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments
            .iter()
            .map(|segment| segment.base_offset)
            .collect()
    }

    /// (base offset, bytes appended) of each segment, oldest first: what retention by size
    /// measures (a preallocated file's length is not its data).
    pub fn segment_sizes_bytes(&self) -> Vec<(i64, u64)> {
        self.segments
            .iter()
            .map(|segment| (segment.base_offset, segment.size_bytes))
            .collect()
    }

    /// The sparse index's answer for `offset`: (segment base offset, byte position to scan from).
    pub fn index_lookup(&self, offset: i64) -> Option<(i64, u64)> {
        if offset < self.log_start_offset || offset >= self.log_end_offset() {
            return None;
        }
        let segment = &self.segments[self.segment_index_for(offset)];
        let entry = segment.index.lookup(segment.base_offset, offset);
        Some((segment.base_offset, u64::from(entry.position)))
    }

    /// The base offset of the batch holding `offset`, from the in-memory batch index (no I/O);
    /// `None` outside `[log_start_offset, log_end_offset)`. A log start a replica can fetch
    /// from must be a batch boundary: followers append whole batches (DeleteRecords, in net).
    pub fn batch_base_offset(&self, offset: i64) -> Option<i64> {
        if offset < self.log_start_offset || offset >= self.log_end_offset() {
            return None;
        }
        let segment = &self.segments[self.segment_index_for(offset)];
        let index = segment.batch_index_for(offset);
        segment.batches.get(index).map(|batch| batch.base_offset)
    }

    /// ListOffsets by timestamp (KIP-79) over the in-memory batch entries, Kafka's time index
    /// without its file: among the data batches (control batches never answer) whose last
    /// offset is in `[from, below)`, with `Some(target)` the first whose MaxTimestamp is at least
    /// `target`, with `None` the first of those with the largest MaxTimestamp. Returns that
    /// batch's (base offset, MaxTimestamp); the caller reads the one batch to find the record.
    /// No I/O, so a lookup never holds an event loop on the disk.
    pub fn find_batch_by_timestamp(
        &self,
        from: i64,
        below: i64,
        target: Option<i64>,
    ) -> Option<(i64, i64)> {
        // The entries of `segment` whose last offset is in [from, below).
        let in_range = |segment: &Segment| {
            let first = segment.batch_index_for(from);
            let end = segment
                .batches
                .partition_point(|batch| batch.last_offset < below);
            first..end.max(first)
        };
        let mut best: Option<(i64, i64)> = None;
        for segment in &self.segments {
            let range = in_range(segment);
            let Some(last) = segment.batches[range.clone()].last() else {
                continue;
            };
            match target {
                Some(target) => {
                    if last.max_timestamp_so_far < target {
                        continue;
                    }
                    // The first entry whose running maximum reaches the target is the first
                    // data batch at or above it, unless the maximum came from before `from`:
                    // then the batches from there on are looked at one by one.
                    let batches = &segment.batches[range];
                    let start = batches.partition_point(|b| b.max_timestamp_so_far < target);
                    if let Some(found) = batches[start..]
                        .iter()
                        .find(|b| !b.control && b.max_timestamp >= target)
                    {
                        return Some((found.base_offset, found.max_timestamp));
                    }
                }
                None => {
                    let batches = &segment.batches[range.clone()];
                    // From the segment's first entry, the last running maximum is the range's
                    // maximum and the first entry reaching it holds it; a range starting later
                    // (the log start inside the first segment) is looked at one by one.
                    let found = if range.start == 0 {
                        let max = last.max_timestamp_so_far;
                        (max != i64::MIN).then(|| {
                            &batches[batches.partition_point(|b| b.max_timestamp_so_far < max)]
                        })
                    } else {
                        batches.iter().filter(|b| !b.control).reduce(|a, b| {
                            if b.max_timestamp > a.max_timestamp {
                                b
                            } else {
                                a
                            }
                        })
                    };
                    if let Some(found) = found
                        && best.is_none_or(|(_, max)| found.max_timestamp > max)
                    {
                        best = Some((found.base_offset, found.max_timestamp));
                    }
                }
            }
        }
        best
    }

    /// Leader append (KIP-595 leaders append in their own epoch): assign offsets from the log
    /// end, stamp baseOffset and partitionLeaderEpoch in place (neither is CRC-covered, so no
    /// re-checksum), keep the bytes. Durable only after a flush covering them.
    pub fn append_as_leader(
        &mut self,
        batches: BytesMut,
        leader_epoch: i32,
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
        let result = self.frame_batches(&batches, &mut metas).and_then(|()| {
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
        let result = self.frame_batches(&batches, &mut metas).and_then(|()| {
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

    /// A view of whole batches from the one holding `from_offset`, at most `max_bytes` unless the
    /// first batch alone is larger (it is returned whole, as Kafka does). An empty view at the
    /// log end. Reads may return records not yet durable; bound them by the high-watermark.
    pub fn read<I: Io>(
        &self,
        io: &I,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<ReadView, LogError> {
        self.read_below(io, from_offset, max_bytes, i64::MAX)
    }

    /// [`PartitionLog::read`] bounded to whole batches whose last offset is below
    /// `end_offset` (a consumer reads below the high-watermark only), decided from the batch
    /// index so a file region never has to be read back to find its committed prefix. An empty
    /// view when the batch holding `from_offset` ends at or above `end_offset`.
    pub fn read_below<I: Io>(
        &self,
        _io: &I,
        from_offset: i64,
        max_bytes: usize,
        end_offset: i64,
    ) -> Result<ReadView, LogError> {
        let log_end_offset = self.log_end_offset();
        if from_offset == log_end_offset {
            return Ok(ReadView::Memory(Bytes::new()));
        }
        if from_offset < self.log_start_offset || from_offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: from_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset,
            });
        }
        let segment = &self.segments[self.segment_index_for(from_offset)];
        let first = segment.batch_index_for(from_offset);
        assert!(
            first < segment.batches.len(),
            "offset {from_offset} below the segment's end has a batch"
        );
        if segment.batches[first].last_offset >= end_offset {
            return Ok(ReadView::Memory(Bytes::new()));
        }
        let start = segment.batches[first].position;
        let limit = start + max_bytes as u64;
        let in_memory = segment
            .chunks
            .front()
            .is_some_and(|chunk| start >= chunk.position);
        // The chunks cover every position from the first one to the segment's end.
        let available_end = if in_memory {
            segment.size_bytes
        } else {
            segment.written_full_end.min(segment.size_bytes)
        };
        let mut end = segment.batch_end(first);
        debug_assert!(end <= available_end, "the first batch is wholly readable");
        let mut index = first + 1;
        while index < segment.batches.len() {
            let next_end = segment.batch_end(index);
            if next_end > available_end
                || next_end > limit
                || segment.batches[index].last_offset >= end_offset
            {
                break;
            }
            end = next_end;
            index += 1;
        }
        if in_memory {
            let chunk = segment
                .chunks
                .iter()
                .find(|chunk| chunk.position <= start && start < chunk.end())
                .expect("chunks cover every position from the first chunk to the segment end");
            if end <= chunk.end() {
                let from = (start - chunk.position) as usize;
                let to = (end - chunk.position) as usize;
                return Ok(ReadView::Memory(chunk.bytes.slice(from..to)));
            }
            // Several appends' chunks: one copy, up to `max_bytes`, where a view of the first
            // chunk alone gave a follower one Produce request's batches per round trip.
            let bytes = segment
                .copy_from_chunks(start, end)
                .expect("the chunks hold every byte from the first chunk to the segment end");
            Ok(ReadView::Memory(Bytes::from(bytes)))
        } else {
            let file = segment
                .file
                .expect("bytes below written_full_end are in an open file");
            // A reader this far behind reads on sequentially (a follower or observer catching
            // up, a consumer): have the kernel read what follows into the page cache now, so
            // its next read is not a disk read inside `sendfile` on the event loop's thread
            // (the segment is written with O_DIRECT, so none of it is cached).
            if let Some(reader) = &segment.reader {
                let ahead_end = (end + READ_AHEAD_BYTES).min(segment.written_full_end);
                if ahead_end > end {
                    reader.will_need(end, ahead_end - end);
                }
            }
            Ok(ReadView::File {
                file,
                reader: segment.reader.clone(),
                path: segment::segment_file_path(&self.dir, segment.base_offset, "log"),
                position: start,
                length_bytes: end - start,
            })
        }
    }

    // --- internals -------------------------------------------------------------------------

    fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    fn segment_index_for(&self, offset: i64) -> usize {
        let after = self
            .segments
            .partition_point(|segment| segment.base_offset <= offset);
        after.saturating_sub(1)
    }

    fn check_running(&self) -> Result<(), LogError> {
        match &self.stopped {
            None => Ok(()),
            Some(first_error) => Err(LogError::Stopped {
                dir: self.dir.clone(),
                first_error: first_error.clone(),
            }),
        }
    }

    fn invalid(&self, source: crate::batch::BatchError) -> LogError {
        LogError::InvalidBatch {
            dir: self.dir.clone(),
            source,
        }
    }

    /// Where a segment created now puts its slot region (past any data it can hold).
    fn new_segment_region_offset(&self) -> u64 {
        tail_slot::region_offset_for(self.config.segment_size_bytes, self.block_size_bytes)
    }

    fn epoch_checkpoint_path(&self) -> PathBuf {
        self.dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)
    }

    /// Write the whole leader-epoch cache to its checkpoint now (blocking: tmp, fsync, rename)
    /// and mark it clean. Called where the cache changed with the log (a new epoch, a
    /// truncation, a log start advance, a reset).
    fn persist_epoch_cache<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        let path = self.epoch_checkpoint_path();
        self.epoch_cache
            .persist(io, &path)
            .map_err(|source| LogError::EpochCache {
                dir: self.dir.clone(),
                source,
            })?;
        self.epoch_cache_dirty = false;
        Ok(())
    }

    /// Frame and CRC-check every batch of an append into `metas` (cleared first), reading the
    /// headers in place.
    fn frame_batches(&self, bytes: &[u8], metas: &mut Vec<BatchMeta>) -> Result<(), LogError> {
        metas.clear();
        let mut start = 0;
        while start < bytes.len() {
            let size_bytes = validate_front_batch(
                &bytes[start..],
                start as u64,
                self.config.max_batch_size_bytes,
            )
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
    /// Changes how many written bytes stay in memory (`LogConfig::tail_cache_bytes`); a smaller
    /// budget drops the chunks beyond it now. A host keeps the cache only where reads of the
    /// recent tail come: on a partition's leader, which its followers fetch from.
    pub fn set_tail_cache_bytes(&mut self, tail_cache_bytes: u64) {
        let shrinks = tail_cache_bytes < self.config.tail_cache_bytes;
        self.config.tail_cache_bytes = tail_cache_bytes;
        if shrinks {
            self.release_cached_chunks();
        }
    }

    /// Drops the chunks a completed flush put in the file once they are more than
    /// `tail_cache_bytes` behind what was written; the segment sealed before the active one
    /// keeps what the active one leaves of that budget.
    fn release_cached_chunks(&mut self) {
        let tail_cache_bytes = self.config.tail_cache_bytes;
        if let [.., previous, active] = &mut self.segments[..]
            && !previous.chunks.is_empty()
        {
            previous
                .release_written_chunks(tail_cache_bytes.saturating_sub(active.written_full_end));
        }
        let active = self.segments.last_mut().expect("active segment");
        active.release_written_chunks(tail_cache_bytes);
    }

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
        self.segments
            .push(Segment::new_empty(base_offset, block, region_offset));
    }
}

/// Where consecutive batches lie in their append's buffer.
fn run_bytes_range(metas: &[BatchMeta]) -> std::ops::Range<usize> {
    let last = &metas[metas.len() - 1];
    metas[0].start..last.start + last.size_bytes
}

/// What an append learned about one batch.
#[derive(Clone, Copy, Debug)]
struct BatchMeta {
    start: usize,
    size_bytes: usize,
    base_offset: i64,
    last_offset: i64,
    last_offset_delta: i64,
    epoch: i32,
    max_timestamp: i64,
    control: bool,
}

impl std::fmt::Debug for PartitionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionLog")
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset)
            .field("log_end_offset", &self.log_end_offset())
            .field("durable_end_offset", &self.durable_end_offset)
            .field("segments", &self.segment_base_offsets())
            .field("flush_in_flight", &self.in_flight.is_some())
            .field("stopped", &self.stopped)
            .field("waiting_for_space", &self.waiting_for_space)
            .finish()
    }
}
