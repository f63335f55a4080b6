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

mod append;
mod batch_list;
pub(crate) mod blocking;
mod blocking_api;
mod chunks;
mod error;
mod flush;
mod fuzz;
pub mod index;
mod read;
pub mod recovery;
mod reset;
mod segment;
mod tail_cache;
mod tail_slot;
mod write_tail;

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};

use crate::batch::split::{frame_front_batch, validate_front_batch};
use crate::batch::{
    BatchChainValidator, RecordBatchHeader, stamp_base_offset, stamp_partition_leader_epoch,
};
use crate::epoch_cache::{LEADER_EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochCache};
use crate::io::{FileId, FileReader, Io};

pub use append::AppendInfo;
use append::BatchMeta;
use chunks::Chunk;
pub use chunks::LaggingTailBudget;
pub use error::LogError;
pub use flush::Routed;
pub use fuzz::{fuzz_log_recovery, log_recovery_input_outcome};
pub use read::ReadView;
pub use recovery::{RecoveryReport, UnverifiedBatches};
use segment::{BatchEntry, Segment};
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
    /// After a crash, take the batches a segment's batch list names below its partial last
    /// block without reading them, as after a clean close, and report them in
    /// [`RecoveryReport::unverified`] for the caller to check off the start path
    /// ([`PartitionLog::verify_listed`]); the log opens in the time its lists and unlisted
    /// tails take to read, not its size. Off: every batch is read and checked at open.
    pub defer_listed_check_after_crash: bool,
    /// The caller created the folder and made it durable, with its entry in the parent, just
    /// before this open (a new topic partition's folder, made on the node's `folder-prep`
    /// thread: net/src/node/folder_prep.rs): the open skips its syncs of the folder and its
    /// parent. Off: they are synced, since the folder may be one an earlier run created and
    /// died before syncing.
    pub folder_durable_before_open: bool,
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
            defer_listed_check_after_crash: false,
            folder_durable_before_open: false,
        }
    }
}

/// In-flight flush chain of one segment, and confirmation records (see `flush.rs`).
pub(crate) use flush::{InFlightConfirmation, InFlightFlush, PendingConfirmation, Preparation};

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
    /// The files a chain needs before it starts (a new epoch's checkpoint, a new segment's
    /// `.log`), being made durable through the ring (`flush::prepare`).
    preparing: Option<Preparation>,
    /// The confirmation record being written (off the critical path), and the next one.
    confirming: Option<InFlightConfirmation>,
    /// The data area's next stretch being reserved through the ring (`flush::segment_files`).
    reserving: Option<flush::InFlightReservation>,
    /// A segment (base offset) whose reservation in the background failed, and its reserved
    /// end then: none is submitted for it again until the synchronous path reserved more.
    reservation_refused: Option<(i64, u64)>,
    confirmation_pending: Option<PendingConfirmation>,
    /// The segment file whose confirmation record was written alone, as a plain write, and
    /// has not been through a blocking path's fdatasync since (see `flush::confirmation`).
    confirmation_unsynced: Option<FileId>,
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
    /// The chunks kept behind the tail cache for replicas that lag, and the node's budget for
    /// them ([`PartitionLog::keep_for_lagging_replicas`]).
    lagging: Option<tail_cache::LaggingReplicas>,
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

    /// Whether a flush is under way: its chain, or the files it needs first, in flight.
    pub fn flush_in_flight(&self) -> bool {
        self.in_flight.is_some() || self.preparing.is_some()
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
    /// and mark it clean: at a reset and at `close` if dirty. Otherwise the cache is written
    /// through the ring before the next chain (`flush::prepare`): a new epoch before any of its
    /// batches is flushed; a truncation's or log start advance's removed entries name no batch
    /// left and wait for that chain.
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
            .field("preparing", &self.preparing.is_some())
            .field("stopped", &self.stopped)
            .field("waiting_for_space", &self.waiting_for_space)
            .finish()
    }
}
