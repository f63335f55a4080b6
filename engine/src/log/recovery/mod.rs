//! Opening a partition log: scan every segment (after a clean close, only the batches its batch
//! list does not name: module `batch_list`), decide what each segment's end means, and make the
//! outcome durable before the first append.
//!
//! ## Before the table, per segment
//!
//! Every segment file ends with its slot region (`tail_slot`: the file's last 5 blocks). A file
//! whose length cannot hold one, or whose region holds no valid slot, refuses to open (path and
//! offset): a `.log` is created atomically with a valid slot, so that is never a normal state.
//! The *trusted* slot is chosen: the newest valid one if the full blocks its flush wrote match
//! the CRC32C it records; else, in the last segment, if no confirmation record names it, its
//! flush never finished (its slot landed, its blocks did not all) and the previous slot is
//! trusted, whose flush completed before the newest started. A sealed segment never falls back
//! (its seal completed before a later segment existed), and its trusted slot must vouch for the
//! final block in the data area. A confirmed flush whose blocks no longer match, or a
//! confirmation naming a slot newer than any valid one, refuses.
//!
//! The trusted slot's *durable mark* is the authority on where the segment's batches end:
//! recovery reads the data area only up to it (plus the newest slot's blocks, to check their
//! CRC32C), overlays the slot's copy of the partial last block, and scans `[0, mark)` (frame,
//! CRC, offset continuity, epochs never backwards). Nothing past the trusted mark was ever
//! acknowledged, so nothing there is read, kept or resurrected: a stale batch past a cut and the
//! bytes of an unfinished flush are alike ignored.
//!
//! ## Inputs of the decision
//!
//! - **scan_end**: whether the scan of `[0, mark)` reaches the mark (`AtMark`) or stops
//!   before it (`BelowMark`: a bad or incomplete batch, or zeros, where the mark says durable
//!   batches are).
//! - **newest_flush**: `Finished` when the trusted slot is the newest, `Unfinished` when the
//!   newest slot's flush never finished and recovery fell back to the previous slot (the
//!   unfinished flush's bytes past the mark are dropped).
//! - **below_floor**: whether the log would end below the caller's floor (the high-watermark).
//!
//! ## The table (`RECOVERY_CASES`; every situation matches exactly one row, tested)
//!
//! | # | scan end | newest flush | below floor | action |
//! |---|----------|--------------|-------------|--------|
//! | 1 | AtMark | Finished | any | keep: the batches end at the durable mark |
//! | 2 | BelowMark | any | any | refuse: acknowledged bytes below the durable mark are damaged |
//! | 3 | AtMark | Unfinished | no | truncate: drop the unfinished flush past the durable mark |
//! | 4 | AtMark | Unfinished | yes | refuse: below the floor |
//!
//! After the table: the last segment's end is made durable by a new slot with the recovered
//! mark (overwriting an unfinished flush's slot, so it can never be trusted later), indexes
//! that are missing or disagree are rewritten, the leader-epoch-checkpoint is rebuilt from the
//! batches' epochs if it disagrees, and leftover `*.tmp` files, old-format `.tail` files and
//! orphan `.index` files are removed.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::batch_list;
use super::blocking;
use super::index::SparseIndex;
use super::segment::{self, BatchEntry, Chunk, Segment, round_down, round_up};
use super::tail_slot;
use super::write_tail::WriteTail;
use super::{LogConfig, LogError, PartitionLog};
use crate::batch::split::validate_front_batch;
use crate::batch::{BatchChainValidator, BatchError, RecordBatchHeader};
use crate::epoch_cache::{EpochCacheError, LEADER_EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochCache};
use crate::io::{FileId, Io, IoError, Op, OpenOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentRole {
    Sealed,
    Last,
}

/// How the scan of `[0, durable mark)` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    AtMark,
    BelowMark,
}

/// Whether the trusted slot is the newest (its flush finished) or the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewestFlush {
    Finished,
    Unfinished,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    Keep,
    TruncateTornTail,
    RefuseInteriorCorruption,
    RefuseBelowFloor,
}

/// One situation, as measured on a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverySituation {
    pub scan_end: ScanEnd,
    pub newest_flush: NewestFlush,
    pub below_floor: bool,
}

/// One row: each field lists the values it matches.
#[derive(Debug)]
pub struct RecoveryCase {
    pub row: u8,
    pub scan_end: &'static [ScanEnd],
    pub newest_flush: &'static [NewestFlush],
    pub below_floor: &'static [bool],
    pub action: RecoveryAction,
    pub why: &'static str,
}

use NewestFlush::{Finished, Unfinished};
use RecoveryAction::{Keep, RefuseBelowFloor, RefuseInteriorCorruption, TruncateTornTail};
use ScanEnd::{AtMark, BelowMark};

const ANY_FLUSH: &[NewestFlush] = &[Finished, Unfinished];
const ANY_BOOL: &[bool] = &[false, true];

#[rustfmt::skip]
pub const RECOVERY_CASES: &[RecoveryCase] = &[
    RecoveryCase { row: 1, scan_end: &[AtMark], newest_flush: &[Finished], below_floor: ANY_BOOL, action: Keep, why: "the batches end at the durable mark" },
    RecoveryCase { row: 2, scan_end: &[BelowMark], newest_flush: ANY_FLUSH, below_floor: ANY_BOOL, action: RefuseInteriorCorruption, why: "bytes below the durable mark (acknowledged) are damaged or missing" },
    RecoveryCase { row: 3, scan_end: &[AtMark], newest_flush: &[Unfinished], below_floor: &[false], action: TruncateTornTail, why: "an unfinished flush past the durable mark is dropped" },
    RecoveryCase { row: 4, scan_end: &[AtMark], newest_flush: &[Unfinished], below_floor: &[true], action: RefuseBelowFloor, why: "dropping the unfinished flush leaves the log below the high-watermark floor" },
];

impl RecoveryCase {
    pub fn matches(&self, situation: &RecoverySituation) -> bool {
        self.scan_end.contains(&situation.scan_end)
            && self.newest_flush.contains(&situation.newest_flush)
            && self.below_floor.contains(&situation.below_floor)
    }
}

/// The row for a situation (the table is exhaustive and disjoint: see the tests).
pub fn decide(situation: &RecoverySituation) -> &'static RecoveryCase {
    let mut matching = RECOVERY_CASES.iter().filter(|case| case.matches(situation));
    let case = matching
        .next()
        .expect("the recovery table covers every situation");
    debug_assert!(
        matching.next().is_none(),
        "the recovery table rows are disjoint"
    );
    case
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments_scanned: usize,
    pub batches_recovered: usize,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The durable mark of the last segment (its trusted slot).
    pub durable_mark: Option<DurableMarkFound>,
    /// An unfinished flush that was dropped (never below the floor).
    pub truncated: Option<TornTailTruncation>,
    /// Segments (base offsets) whose `.index` was missing, damaged or wrong and was rewritten.
    pub indexes_rebuilt: Vec<i64>,
    pub epoch_checkpoint_rewritten: bool,
    /// Leftover files removed (`*.tmp`, old-format `.tail`, orphan `.index`).
    pub files_removed: Vec<String>,
    /// The newest slot's flush had not finished (its blocks are not all there and it
    /// was never confirmed): recovery used the previous slot. The slot's sequence.
    pub unfinished_flush_slot: Option<u64>,
    /// Batches taken from the segments' batch lists instead of read and checked again
    /// (`batches_recovered` counts them too): only after a clean close.
    pub batches_from_list: usize,
    /// The log was closed cleanly (its `clean-shutdown` marker was there).
    pub clean_shutdown: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableMarkFound {
    pub segment_base_offset: i64,
    pub slot_sequence: u64,
    pub position: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTailTruncation {
    pub segment_base_offset: i64,
    /// Where the segment now ends.
    pub position: u64,
    /// The log end offset after the cut.
    pub log_end_offset: i64,
    /// Non-zero bytes dropped after `position` (what the unfinished flush had written).
    pub bytes_discarded: u64,
    pub row: u8,
}

/// The result of scanning one segment image.
struct Scan {
    base_offset: i64,
    entries: Vec<(BatchEntry, i32, u64)>,
    valid_end: u64,
    next_offset: i64,
    last_epoch: i32,
    /// Why the scan stopped before the end of the image (empty when it reached it).
    stop_reason: String,
}

impl PartitionLog {
    /// Open (creating the folder if needed) and recover the log in `dir`. Never truncates below
    /// nothing: see [`PartitionLog::open_with_floor`] to protect a known high-watermark.
    pub fn open<I: Io>(
        io: &mut I,
        dir: &Path,
        config: LogConfig,
    ) -> Result<(PartitionLog, RecoveryReport), LogError> {
        Self::open_with_floor(io, dir, config, i64::MIN)
    }

    /// Open and recover, refusing (with [`LogError::TruncateBelowFloor`]) any recovery cut
    /// below `high_watermark_floor`.
    pub fn open_with_floor<I: Io>(
        io: &mut I,
        dir: &Path,
        config: LogConfig,
        high_watermark_floor: i64,
    ) -> Result<(PartitionLog, RecoveryReport), LogError> {
        assert!(
            config.segment_size_bytes >= 1 && config.segment_size_bytes <= (i32::MAX as u64),
            "segment_size_bytes must be in 1..=2^31-1 (index positions are 32-bit)"
        );
        let block = io.block_size_bytes();
        io.create_dir_all(dir)?;
        // The folder itself (and any parent just created) must survive a crash too.
        for ancestor in dir.ancestors() {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            io.sync_dir(ancestor)?;
        }
        let mut report = RecoveryReport::default();
        // Closed cleanly: the batch lists stand in for reading (module batch_list). The
        // marker goes first, durably: whatever happens from here on is not a clean close.
        let marker = dir.join(batch_list::CLEAN_SHUTDOWN_FILE);
        report.clean_shutdown = io.exists(&marker);
        if report.clean_shutdown {
            io.remove_file(&marker)?;
            io.sync_dir(dir)?;
        }
        let names = io.list_dir(dir)?;
        let mut bases: Vec<i64> = names
            .iter()
            .filter_map(|name| segment::parse_segment_file_name(name, "log"))
            .collect();
        bases.sort_unstable();
        for name in &names {
            // `.tail`: the slots' file of the layout before the slot region moved into the
            // `.log` itself; never trusted now.
            let old_tail = segment::parse_segment_file_name(name, "tail").is_some();
            let orphan = ["index", "batches"].iter().any(|extension| {
                segment::parse_segment_file_name(name, extension)
                    .is_some_and(|base| !bases.contains(&base))
            });
            if name.ends_with(".tmp") || orphan || old_tail {
                io.remove_file(&dir.join(name))?;
                report.files_removed.push(name.clone());
            }
        }

        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            block_size_bytes: block,
            segments: Vec::new(),
            log_start_offset: 0,
            durable_end_offset: 0,
            epoch_cache: LeaderEpochCache::new(),
            epoch_cache_dirty: false,
            in_flight: None,
            confirming: None,
            confirmation_pending: None,
            spare_write_buf: None,
            append_metas: Vec::new(),
            flush_requested_offset: 0,
            generation: 0,
            stopped: None,
            waiting_for_space: None,
        };
        let mut expected_next: Option<i64> = None;
        let mut last_epoch = crate::batch::NO_PARTITION_LEADER_EPOCH;
        // The leader-epoch-checkpoint as found: a batch list's epochs must agree with it.
        let checkpoint_found =
            LeaderEpochCache::load(io, &dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).ok();
        for (position_in_list, &base) in bases.iter().enumerate() {
            let role = if position_in_list + 1 == bases.len() {
                SegmentRole::Last
            } else {
                SegmentRole::Sealed
            };
            let log_path = segment::segment_file_path(dir, base, "log");
            if let Some(expected) = expected_next
                && base != expected
            {
                return Err(LogError::Corruption {
                    path: log_path,
                    position: 0,
                    reason: format!(
                        "segment base offset {base} does not continue the previous segment's end offset {expected}"
                    ),
                });
            }
            let file = io.open(
                &log_path,
                OpenOptions {
                    direct: true,
                    ..Default::default()
                },
            )?;
            report.segments_scanned += 1;
            let corruption = |position: u64, reason: String| LogError::Corruption {
                path: log_path.clone(),
                position,
                reason,
            };

            // The slot region: the file's last 5 blocks.
            let file_len = io.file_size_bytes(file)?;
            let region_offset = tail_slot::region_offset_of_file(file_len, block).ok_or_else(|| {
                corruption(
                    file_len,
                    format!("a segment file of {file_len} bytes has no slot region of 5 blocks of {block} bytes"),
                )
            })?;
            let region = read_for_recovery(
                io,
                file,
                &log_path,
                region_offset,
                tail_slot::region_size_bytes(block),
            )?;
            let slots = tail_slot::valid_slots_newest_first(&region, block);
            let confirmation = tail_slot::decode_confirmation(&region, block);
            let Some(newest) = slots.first() else {
                return Err(corruption(
                    region_offset,
                    "the slot region holds no valid slot".into(),
                ));
            };
            if let Some(confirmed) = confirmation
                && confirmed.sequence > newest.sequence
            {
                // That slot's flush completed (the record is written only after), so a
                // missing slot is damage to acknowledged bytes, not a torn write.
                return Err(corruption(
                    region_offset + tail_slot::slot_offset(confirmed.sequence, block),
                    format!(
                        "slot {} was confirmed durable but is damaged",
                        confirmed.sequence
                    ),
                ));
            }
            for slot in &slots {
                if slot.covered_end(block) > region_offset {
                    return Err(corruption(
                        region_offset + tail_slot::slot_offset(slot.sequence, block),
                        format!(
                            "slot {} covers up to byte {}, past the slot region at {region_offset}",
                            slot.sequence,
                            slot.covered_end(block)
                        ),
                    ));
                }
            }
            // The data area up to the furthest block a valid slot vouches for: the trusted
            // mark's bytes, and the newest flush's blocks to check against its CRC32C. Only the
            // slots' flushes are read here (`flushes`); the batches below the mark are scanned
            // chunk by chunk further down, never the whole segment in memory at once.
            let read_end = slots
                .iter()
                .map(|slot| slot.block_start(block))
                .max()
                .unwrap_or(0);
            let flushes_start = round_down(
                slots
                    .iter()
                    .map(|slot| slot.flush_start_position)
                    .min()
                    .unwrap_or(0)
                    .min(read_end),
                block,
            );
            let mut flushes =
                read_for_recovery(io, file, &log_path, flushes_start, read_end - flushes_start)?;
            flushes.resize((read_end - flushes_start) as usize, 0);
            let flushes = FlushBlocks {
                start: flushes_start,
                bytes: flushes,
            };

            let mut newest_flush = NewestFlush::Finished;
            let slot = if flushes.present(newest, block) {
                newest.clone()
            } else if role == SegmentRole::Last
                && let Some(previous) = slots.get(1)
                && !newest.confirmed_by(confirmation)
            {
                newest_flush = NewestFlush::Unfinished;
                report.unfinished_flush_slot = Some(newest.sequence);
                previous.clone()
            } else {
                newest.clone()
            };
            let mark = slot.durable_mark();
            let damaged_last_flush = (!flushes.present(&slot, block)).then(|| {
                (
                    slot.flush_start_position,
                    format!(
                        "the blocks of the last flush [{}, {}) do not match the CRC32C recorded in slot {}",
                        slot.flush_start_position,
                        slot.block_start(block),
                        slot.sequence
                    ),
                )
            });
            if role == SegmentRole::Sealed && !slot.data.is_empty() {
                // A seal writes its final block to the data area and a slot without data;
                // reads of a sealed segment come from the data area.
                return Err(corruption(
                    region_offset + tail_slot::slot_offset(slot.sequence, block),
                    format!(
                        "the last slot ({}) of a sealed segment holds a partial block instead of vouching for its final block",
                        slot.sequence
                    ),
                ));
            }
            let bytes_discarded = if newest_flush == NewestFlush::Unfinished {
                let from = (mark.saturating_sub(flushes.start) as usize).min(flushes.bytes.len());
                flushes.bytes[from..]
                    .iter()
                    .filter(|byte| **byte != 0)
                    .count() as u64
            } else {
                0
            };
            // The slot's copy of the partial block lies over the data area (append-only bytes:
            // it agrees with whatever full block later reached the data area), and the image
            // ends at the mark: nothing past it was acknowledged.
            let image = SegmentImage {
                file,
                path: &log_path,
                file_end: read_end,
                len: mark.min(read_end.max(slot.covered_end(block))),
                overlay_start: slot.block_start(block),
                overlay: &slot.data,
            };
            if role == SegmentRole::Last {
                report.durable_mark = Some(DurableMarkFound {
                    segment_base_offset: base,
                    slot_sequence: slot.sequence,
                    position: mark,
                });
            }

            // The segment's batch list: read in place of the batches it names after a clean
            // close, checked against them after a crash (module batch_list).
            let (mut listed, list_records) = listed_batches(
                io,
                dir,
                base,
                last_epoch,
                &image,
                checkpoint_found.as_ref(),
                &log.config,
            )?;
            let scan = if report.clean_shutdown {
                report.batches_from_list += listed.len();
                scan_segment(
                    io,
                    &image,
                    Scan::after(&listed, base, last_epoch),
                    &log.config,
                )?
            } else {
                // After a crash every batch is read and checked; the list is kept as far as
                // it names what was read.
                let scan =
                    scan_segment(io, &image, Scan::after(&[], base, last_epoch), &log.config)?;
                let agreeing = listed
                    .iter()
                    .zip(&scan.entries)
                    .take_while(|(listed, (entry, epoch, size_bytes))| {
                        listed.base_offset == entry.base_offset
                            && listed.last_offset == entry.last_offset
                            && listed.position == entry.position
                            && listed.max_timestamp == entry.max_timestamp
                            && listed.control == entry.control
                            && listed.epoch == *epoch
                            && u64::from(listed.size_bytes) == *size_bytes
                    })
                    .count();
                listed.truncate(agreeing);
                scan
            };
            if let Some((flush_start, reason)) = damaged_last_flush {
                // Name the first damaged batch when the scan finds it inside those blocks.
                let position = if scan.valid_end < mark && scan.valid_end >= flush_start {
                    scan.valid_end
                } else {
                    flush_start
                };
                return Err(corruption(position, reason));
            }
            let situation = RecoverySituation {
                scan_end: if scan.valid_end == mark {
                    ScanEnd::AtMark
                } else {
                    ScanEnd::BelowMark
                },
                newest_flush,
                below_floor: scan.next_offset < high_watermark_floor,
            };
            let case = decide(&situation);
            match case.action {
                RecoveryAction::Keep => {}
                RecoveryAction::TruncateTornTail => {
                    report.truncated = Some(TornTailTruncation {
                        segment_base_offset: base,
                        position: scan.valid_end,
                        log_end_offset: scan.next_offset,
                        bytes_discarded,
                        row: case.row,
                    });
                }
                RecoveryAction::RefuseInteriorCorruption => {
                    return Err(corruption(
                        scan.valid_end,
                        format!(
                            "{} (recovery row {}): valid batches end at byte {} but the durable mark is {mark}: {}",
                            case.why, case.row, scan.valid_end, scan.stop_reason
                        ),
                    ));
                }
                RecoveryAction::RefuseBelowFloor => {
                    return Err(LogError::TruncateBelowFloor {
                        dir: dir.to_path_buf(),
                        offset: scan.next_offset,
                        floor: high_watermark_floor,
                    });
                }
            }

            // Build the in-memory segment from the valid prefix.
            let mut segment = Segment::new_empty(base, block, region_offset);
            for (entry, epoch, size_bytes) in &scan.entries {
                segment.index.on_batch_appended(
                    base,
                    entry.base_offset,
                    entry.position,
                    *size_bytes,
                    log.config.index_interval_bytes,
                );
                segment.batches.push(*entry);
                if *epoch >= 0 {
                    log.epoch_cache
                        .assign(*epoch, entry.base_offset)
                        .map_err(|source| LogError::EpochCache {
                            dir: dir.to_path_buf(),
                            source,
                        })?;
                }
            }
            report.batches_recovered += scan.entries.len();
            segment.size_bytes = scan.valid_end;
            segment.next_offset = scan.next_offset;
            segment.flushed_end = scan.valid_end;
            segment.flushed_next_offset = scan.next_offset;
            segment.file = Some(file);
            segment.reader = io.open_reader(&log_path)?;
            segment.slot_sequence = slot.sequence;
            let valid_end = scan.valid_end;
            let mut tail_partial = Vec::new();
            match role {
                SegmentRole::Sealed => {
                    segment.sealed = true;
                    segment.seal_durable = true;
                    segment.written_full_end = round_up(valid_end, block);
                }
                SegmentRole::Last => {
                    let block_start = round_down(valid_end, block);
                    let first_in_memory =
                        (0..segment.batches.len()).find(|&j| segment.batch_end(j) > block_start);
                    // The bytes kept in memory: the partial last block, and the batches that end
                    // in it from their start.
                    let from = first_in_memory
                        .map_or(block_start, |first| segment.batches[first].position)
                        .min(block_start);
                    let mut kept = Vec::with_capacity((valid_end - from) as usize);
                    image.append(io, from, valid_end, &mut kept)?;
                    let kept = Bytes::from(kept);
                    let at = |position: u64| (position - from) as usize;
                    segment.written_full_end = block_start;
                    segment.write_tail_start = block_start;
                    segment.write_tail = WriteTail::from_partial(&kept[at(block_start)..], block);
                    if let Some(first) = first_in_memory {
                        let position = segment.batches[first].position;
                        segment.chunks.push_back(Chunk {
                            position,
                            bytes: kept.slice(at(position)..),
                        });
                    }
                    tail_partial = kept[at(block_start)..].to_vec();
                }
            }
            rebuild_index_if_needed(io, dir, &segment, &mut report)?;
            log.segments.push(segment);
            let index = log.segments.len() - 1;
            log.segments[index].batch_list_written = listed.len();
            if list_records > listed.len() {
                // Records past what was used: cut durably, so none of them ever follows a
                // record written from now on.
                log.cut_batch_list(io, index, listed.len())?;
            }
            expected_next = Some(scan.next_offset);
            last_epoch = scan.last_epoch;

            if role == SegmentRole::Last {
                // Make the recovered end durable with a new slot (also after a drop: it
                // overwrites the unfinished flush's slot).
                let index = log.segments.len() - 1;
                let partial = std::mem::take(&mut tail_partial);
                log.write_durable_end(io, index, valid_end, &partial)?;
            }
        }
        if log.segments.is_empty() {
            let region_offset = log.new_segment_region_offset();
            log.segments
                .push(Segment::new_empty(0, block, region_offset));
        }
        log.log_start_offset = log.segments[0].base_offset;
        log.durable_end_offset = log.log_end_offset();
        log.flush_requested_offset = log.durable_end_offset;

        // The leader-epoch-checkpoint: rebuilt from the batches, rewritten if it disagrees.
        let checkpoint_path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
        let on_disk = LeaderEpochCache::load(io, &checkpoint_path);
        let agrees = matches!(&on_disk, Ok(cache) if *cache == log.epoch_cache);
        let file_exists = io.exists(&checkpoint_path);
        if !agrees && (file_exists || !log.epoch_cache.is_empty()) {
            match log.epoch_cache.persist(io, &checkpoint_path) {
                Ok(()) => report.epoch_checkpoint_rewritten = true,
                // A node restarted on a full disk still opens: the cache in memory is right
                // (rebuilt from the batches), and the next flush writes the file first.
                Err(EpochCacheError::Io(source)) if source.is_no_space() => {
                    tracing::warn!(dir = %dir.display(), %source, "no space to rewrite the leader-epoch-checkpoint; the next flush writes it");
                    log.epoch_cache_dirty = true;
                }
                Err(source) => {
                    return Err(LogError::EpochCache {
                        dir: dir.to_path_buf(),
                        source,
                    });
                }
            }
        }
        report.log_start_offset = log.log_start_offset;
        report.log_end_offset = log.log_end_offset();
        Ok((log, report))
    }
}

/// Read `[offset, offset + len)` of a segment for recovery; a read error (EIO) is corruption
/// of that file.
fn read_for_recovery<I: Io>(
    io: &mut I,
    file: FileId,
    path: &Path,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, LogError> {
    blocking::read_range(io, file, offset, Some(len)).map_err(|error| LogError::Corruption {
        path: path.to_path_buf(),
        position: error.offset,
        reason: format!("read failed: {error}"),
    })
}

/// The blocks the slots' flushes wrote, `[start, start + bytes.len())` of the segment, read to
/// check each slot's CRC32C of them.
struct FlushBlocks {
    start: u64,
    bytes: Vec<u8>,
}

impl FlushBlocks {
    fn present(&self, slot: &tail_slot::TailSlot, block_size_bytes: usize) -> bool {
        slot.flushed_blocks_present(&self.bytes, self.start, block_size_bytes)
    }
}

/// A segment as recovery reads it: the data area up to `file_end`, zeros past it, the trusted
/// slot's copy of the partial block (`overlay`) laid over at `overlay_start`, and nothing at or
/// past `len` (the durable mark).
struct SegmentImage<'a> {
    file: FileId,
    path: &'a Path,
    file_end: u64,
    len: u64,
    overlay_start: u64,
    overlay: &'a [u8],
}

impl SegmentImage<'_> {
    /// Append the image's bytes `[from, to)` (within `len`) to `out`.
    fn append<I: Io>(
        &self,
        io: &mut I,
        from: u64,
        to: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), LogError> {
        assert!(
            from <= to && to <= self.len,
            "recovery reads inside the image"
        );
        let appended_at = out.len();
        let file_to = to.min(self.file_end);
        if from < file_to {
            let block = io.block_size_bytes();
            let aligned_from = round_down(from, block);
            let aligned_to = round_up(file_to, block);
            let mut completions = blocking::run_ops(
                io,
                vec![Op::Read {
                    file: self.file,
                    offset: aligned_from,
                    len: (aligned_to - aligned_from) as usize,
                }],
                false,
            )
            .map_err(|error| self.read_failed(error))?;
            let mut completion = completions.pop().expect("one completion per op");
            let read = blocking::completion_result(&mut completion)
                .map_err(|error| self.read_failed(error))?;
            if let Some(buf) = completion.buf {
                let data = &buf.as_slice()[..read.min(buf.len())];
                let skip = (from - aligned_from) as usize;
                let want = (file_to - from) as usize;
                let have = data.len().saturating_sub(skip).min(want);
                out.extend_from_slice(&data[skip.min(data.len())..skip.min(data.len()) + have]);
                io.recycle_read_buf(buf);
            }
        }
        // Past the file's part (a short read, or the image running past it): zeros, as the
        // slot's copy of the partial block then says.
        out.resize(appended_at + (to - from) as usize, 0);
        let overlay_end = self.overlay_start + self.overlay.len() as u64;
        let (lo, hi) = (from.max(self.overlay_start), to.min(overlay_end));
        if lo < hi {
            out[appended_at + (lo - from) as usize..appended_at + (hi - from) as usize]
                .copy_from_slice(
                    &self.overlay
                        [(lo - self.overlay_start) as usize..(hi - self.overlay_start) as usize],
                );
        }
        Ok(())
    }

    /// A read error (EIO) is corruption of this file.
    fn read_failed(&self, error: IoError) -> LogError {
        LogError::Corruption {
            path: self.path.to_path_buf(),
            position: error.offset,
            reason: format!("read failed: {error}"),
        }
    }
}

impl Scan {
    /// A scan of the segment starting at `base_offset` that has got past the `listed` batches.
    fn after(listed: &[batch_list::ListedBatch], base_offset: i64, previous_epoch: i32) -> Scan {
        let entries = batch_list::entries(listed);
        Scan {
            base_offset,
            entries: entries
                .into_iter()
                .zip(listed)
                .map(|(entry, batch)| (entry, batch.epoch, u64::from(batch.size_bytes)))
                .collect(),
            valid_end: listed.last().map_or(0, batch_list::ListedBatch::end),
            next_offset: listed
                .last()
                .map_or(base_offset, |batch| batch.last_offset + 1),
            last_epoch: listed.last().map_or(previous_epoch, |batch| batch.epoch),
            stop_reason: String::new(),
        }
    }
}

/// The batches of the segment's list that recovery may take without reading them (module
/// `batch_list`): the intact, consistent prefix inside the durable mark, whose epochs agree with
/// the leader-epoch-checkpoint found, and whose last batch is in the data area as listed; none
/// if any of that fails. Also how many records the file holds.
fn listed_batches<I: Io>(
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

/// Scan batches of a segment image (which ends at the durable mark) from where `start` ends (the
/// segment's start, or its last listed batch), checking frame, CRC, offset continuity and epoch
/// order. The image is
/// read `config.recovery_read_bytes` at a time into one reused buffer (the read buffer goes back
/// to the backend, `Io::recycle_read_buf`); a batch cut by a chunk's end is carried into the next.
fn scan_segment<I: Io>(
    io: &mut I,
    image: &SegmentImage<'_>,
    start: Scan,
    config: &LogConfig,
) -> Result<Scan, LogError> {
    let mut scan = start;
    let base_offset = scan.base_offset;
    let mut chain = BatchChainValidator::expecting(scan.next_offset, scan.last_epoch);
    // The image's bytes `[window_start, window_start + window.len())`.
    let mut window: Vec<u8> = Vec::new();
    let mut window_start = scan.valid_end;
    let mut read_to = scan.valid_end;
    loop {
        if read_to < image.len {
            let to = (read_to + config.recovery_read_bytes.max(1)).min(image.len);
            image.append(io, read_to, to, &mut window)?;
            read_to = to;
        }
        let all_read = read_to == image.len;
        let mut cursor = 0usize;
        while cursor < window.len() {
            let position = window_start + cursor as u64;
            let rest = &window[cursor..];
            let problem = match validate_front_batch(rest, position, config.max_batch_size_bytes) {
                // The batch continues in the next chunk.
                Err(BatchError::Truncated { .. } | BatchError::ShortBuffer { .. }) if !all_read => {
                    break;
                }
                Err(error) => Some(error.to_string()),
                Ok(size_bytes) => {
                    let header = RecordBatchHeader::view(&rest[..size_bytes]);
                    if let Err(error) = chain.check_header(header, position) {
                        Some(error.to_string())
                    } else if header.last_offset() - base_offset > i64::from(u32::MAX) {
                        Some("batch offset does not fit a segment's 32-bit relative offsets".into())
                    } else {
                        scan.entries.push((
                            BatchEntry::after(
                                scan.entries.last().map(|(entry, _, _)| entry),
                                header.base_offset(),
                                header.last_offset(),
                                position,
                                header.max_timestamp(),
                                header.is_control(),
                                header.partition_leader_epoch(),
                            ),
                            header.partition_leader_epoch(),
                            size_bytes as u64,
                        ));
                        scan.valid_end = position + size_bytes as u64;
                        scan.next_offset = header.last_offset().wrapping_add(1);
                        scan.last_epoch = header.partition_leader_epoch();
                        cursor += size_bytes;
                        None
                    }
                }
            };
            if let Some(reason) = problem {
                scan.stop_reason = reason;
                return Ok(scan);
            }
        }
        if all_read {
            return Ok(scan);
        }
        window.drain(..cursor);
        window_start += cursor as u64;
    }
}

/// Compare the `.index` file with the entries rebuilt from the scan; rewrite it if it differs.
fn rebuild_index_if_needed<I: Io>(
    io: &mut I,
    dir: &Path,
    segment: &Segment,
    report: &mut RecoveryReport,
) -> Result<(), LogError> {
    let path: PathBuf = segment::segment_file_path(dir, segment.base_offset, "index");
    let expected = segment.index.encode();
    let on_disk = blocking::read_whole_file(io, &path).ok().flatten();
    let agrees = on_disk
        .as_deref()
        .and_then(SparseIndex::decode_entries)
        .is_some_and(|entries| entries == segment.index.entries);
    if !agrees {
        match blocking::write_whole_file(io, &path, &expected) {
            Ok(()) => report.indexes_rebuilt.push(segment.base_offset),
            // Advisory: a node restarted on a full disk opens without it (the entries are in
            // memory; the next open or the segment's seal writes it).
            Err(error) if error.is_no_space() => {
                tracing::warn!(path = %path.display(), %error, "no space to rewrite the index");
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TigerBeetle style: every combination of inputs matches exactly one row.
    #[test]
    fn every_situation_matches_exactly_one_row() {
        let mut seen_rows = std::collections::BTreeSet::new();
        for scan_end in [AtMark, BelowMark] {
            for newest_flush in [Finished, Unfinished] {
                for below_floor in [false, true] {
                    let situation = RecoverySituation {
                        scan_end,
                        newest_flush,
                        below_floor,
                    };
                    let rows: Vec<u8> = RECOVERY_CASES
                        .iter()
                        .filter(|c| c.matches(&situation))
                        .map(|c| c.row)
                        .collect();
                    assert_eq!(rows.len(), 1, "{situation:?} matches rows {rows:?}");
                    seen_rows.insert(rows[0]);
                }
            }
        }
        assert_eq!(
            seen_rows.len(),
            RECOVERY_CASES.len(),
            "every row is reachable"
        );
    }

    #[test]
    fn the_rules_that_matter() {
        let base = RecoverySituation {
            scan_end: AtMark,
            newest_flush: Finished,
            below_floor: false,
        };
        assert_eq!(decide(&base).action, Keep);
        assert_eq!(
            decide(&RecoverySituation {
                below_floor: true,
                ..base
            })
            .action,
            Keep,
            "nothing is cut: a log that ends below the floor is not made shorter"
        );
        assert_eq!(
            decide(&RecoverySituation {
                scan_end: BelowMark,
                ..base
            })
            .action,
            RefuseInteriorCorruption,
            "damage below the mark is never truncated, even at the end"
        );
        assert_eq!(
            decide(&RecoverySituation {
                scan_end: BelowMark,
                newest_flush: Unfinished,
                ..base
            })
            .action,
            RefuseInteriorCorruption
        );
        assert_eq!(
            decide(&RecoverySituation {
                newest_flush: Unfinished,
                ..base
            })
            .action,
            TruncateTornTail,
            "past the mark: unfinished flush"
        );
        assert_eq!(
            decide(&RecoverySituation {
                newest_flush: Unfinished,
                below_floor: true,
                ..base
            })
            .action,
            RefuseBelowFloor
        );
    }
}
